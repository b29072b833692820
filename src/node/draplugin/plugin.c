/*
 * plugin.c - the DRA plugin's gRPC services, registration and run loop
 * (draplugin.h).
 *
 * Two servers (rpc.h, one thread each): dra.sock with DRAPlugin v1 and
 * v1beta1 and DRAResourceHealth, and <driver>-reg.sock with Registration.
 * A Prepare for a claim not prepared yet reads the claim outside the mutex
 * (the API may be slow) and commits under it; the checkpoint is written
 * before the answer leaves, so an answered claim survives a crash.
 */
#include "node/draplugin/draplugin.h"

#include "core/error.h"
#include "core/log.h"
#include "node/cdi.h"
#include "node/deviceplugin/rpc.h"
#include "node/draplugin/msgs.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct gs_drap {
    struct gs_drap_config cfg;
    char driver[128], node[128], plugins_dir[1024], registry_dir[1024], cdi_dir[1024], state_path[1200];
    char sock[1200], reg_sock[1200];
    pthread_mutex_t mu;
    struct gs_drap_table table;   /* under mu */
    struct gs_drap_state st;      /* under mu */
    int64_t updated[GS_DRAP_MAX_DEVS]; /* health determinations, unix seconds */
    atomic_uint_fast64_t version;
    atomic_int refused;           /* the kubelet refused the registration: serve again */
    atomic_int registered;
    struct gs_rpc_server *srv, *reg;
};

static int64_t wall_s(void)
{
    return (int64_t)time(NULL);
}

/*--- DRAPlugin ---*/

/* Prepares one claim; the answer's entry for it. */
static json_t *prepare_one(struct gs_drap *p, const json_t *c)
{
    const char *ns = json_string_value(json_object_get(c, "namespace"));
    const char *uid = json_string_value(json_object_get(c, "uid"));
    const char *name = json_string_value(json_object_get(c, "name"));
    char err[512] = "";
    if (!*uid || !*name || !*ns) return json_pack("{s:[],s:s}", "devices", "error",
                                                  "claim: namespace, uid and name are all required");
    pthread_mutex_lock(&p->mu);
    json_t *done = json_incref(json_object_get(p->st.claims, uid));
    pthread_mutex_unlock(&p->mu);
    if (done) { /* prepared before (maybe by an earlier run): the same answer, the claim not read again */
        json_t *e = json_pack("{s:O,s:s}", "devices", json_object_get(done, "devices"), "error", "");
        json_decref(done);
        return e;
    }
    json_t *claim = NULL, *prep = NULL;
    int rc = p->cfg.get_claim ? p->cfg.get_claim(p->cfg.get_claim_ud, ns, name, &claim, err, sizeof err) : GS_ENOENT;
    if (rc == GS_ENOENT && !err[0]) snprintf(err, sizeof err, "ResourceClaim %s/%s not found", ns, name);
    else if (rc && !err[0]) snprintf(err, sizeof err, "ResourceClaim %s/%s: %s", ns, name, gs_strerror(rc));
    if (!rc) {
        pthread_mutex_lock(&p->mu);
        rc = gs_drap_choose(&p->st, &p->table, claim, ns, name, uid, &prep, err, sizeof err);
        json_t *spec = rc ? NULL : gs_drap_cdi_spec(&p->table, uid, prep);
        pthread_mutex_unlock(&p->mu);
        char path[2048], dir[1100], *text = spec ? json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(spec);
        if (!rc) {
            gs_drap_cdi_path(p->cdi_dir, uid, path, sizeof path);
            snprintf(dir, sizeof dir, "%s", p->cdi_dir);
            rc = text ? gs_cdi_write_text(dir, strrchr(path, '/') + 1, text, NULL, 0) : GS_ENOMEM;
            if (rc) snprintf(err, sizeof err, "cannot write the CDI spec %.400s: %s", path, strerror(errno));
        }
        free(text);
    }
    json_decref(claim);
    if (!rc) {
        pthread_mutex_lock(&p->mu);
        json_object_set(p->st.claims, uid, prep);
        rc = gs_drap_checkpoint_save(p->state_path, &p->st);
        if (rc) {
            json_object_del(p->st.claims, uid);
            snprintf(err, sizeof err, "cannot write the checkpoint %.400s: %s", p->state_path, strerror(errno));
        }
        pthread_mutex_unlock(&p->mu);
    }
    json_t *e = rc ? json_pack("{s:[],s:s}", "devices", "error", err)
                   : json_pack("{s:O,s:s}", "devices", json_object_get(prep, "devices"), "error", "");
    if (rc) gs_log(GS_LOG_WARN, "dra-plugin: claim not prepared", "claim", name, "uid", uid, "error", err, NULL);
    else gs_log(GS_LOG_INFO, "dra-plugin: claim prepared", "claim", name, "uid", uid, NULL);
    json_decref(prep);
    return e;
}

static json_t *unprepare_one(struct gs_drap *p, const json_t *c)
{
    const char *uid = json_string_value(json_object_get(c, "uid"));
    if (!*uid) return json_pack("{s:s}", "error", "claim: uid is required");
    char path[2048], err[512] = "";
    gs_drap_cdi_path(p->cdi_dir, uid, path, sizeof path);
    /* Idempotent: an unknown claim (never prepared, or unprepared already) is done. */
    if (unlink(path) && errno != ENOENT) snprintf(err, sizeof err, "cannot remove %.400s: %s", path, strerror(errno));
    pthread_mutex_lock(&p->mu);
    json_t *had = json_incref(json_object_get(p->st.claims, uid));
    if (had && !err[0]) {
        json_object_del(p->st.claims, uid);
        if (gs_drap_checkpoint_save(p->state_path, &p->st)) {
            json_object_set(p->st.claims, uid, had);
            snprintf(err, sizeof err, "cannot write the checkpoint %.400s: %s", p->state_path, strerror(errno));
        }
    }
    pthread_mutex_unlock(&p->mu);
    json_decref(had);
    if (!err[0]) gs_log(GS_LOG_INFO, "dra-plugin: claim unprepared", "uid", uid, NULL);
    return json_pack("{s:s}", "error", err);
}

static int m_prepare(void *ud, const uint8_t *req, size_t len, uint8_t **out, size_t *olen, char *msg, size_t ml)
{
    json_t *claims;
    if (gs__drap_claims_decode(req, len, &claims)) {
        snprintf(msg, ml, "NodePrepareResourcesRequest: not a valid message");
        return GS_RPC_INVALID_ARGUMENT;
    }
    json_t *ans = json_object();
    size_t i;
    json_t *c;
    json_array_foreach(claims, i, c) json_object_set_new(ans, json_string_value(json_object_get(c, "uid")),
                                                         prepare_one(ud, c));
    int rc = gs__drap_prepare_pack(ans, out, olen);
    json_decref(ans);
    json_decref(claims);
    if (rc) snprintf(msg, ml, "out of memory");
    return rc ? GS_RPC_INTERNAL : GS_RPC_OK;
}

static int m_unprepare(void *ud, const uint8_t *req, size_t len, uint8_t **out, size_t *olen, char *msg, size_t ml)
{
    json_t *claims;
    if (gs__drap_claims_decode(req, len, &claims)) {
        snprintf(msg, ml, "NodeUnprepareResourcesRequest: not a valid message");
        return GS_RPC_INVALID_ARGUMENT;
    }
    json_t *ans = json_object();
    size_t i;
    json_t *c;
    json_array_foreach(claims, i, c) json_object_set_new(ans, json_string_value(json_object_get(c, "uid")),
                                                         unprepare_one(ud, c));
    int rc = gs__drap_unprepare_pack(ans, out, olen);
    json_decref(ans);
    json_decref(claims);
    if (rc) snprintf(msg, ml, "out of memory");
    return rc ? GS_RPC_INTERNAL : GS_RPC_OK;
}

/*--- DRAResourceHealth ---*/

static uint64_t s_version(void *ud)
{
    struct gs_drap *p = ud;
    return atomic_load(&p->version) + 1; /* a new stream (version 0) gets the first list */
}

static int s_message(void *ud, uint8_t **buf, size_t *len)
{
    struct gs_drap *p = ud;
    json_t *h = json_array();
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->table.n; i++) {
        const struct gs_drap_dev *d = &p->table.d[i];
        json_array_append_new(h, json_pack("{s:s,s:s,s:b,s:s,s:I}", "pool", p->node, "device", d->name, "healthy",
                                           d->healthy, "message", d->message, "updated", (json_int_t)p->updated[i]));
    }
    pthread_mutex_unlock(&p->mu);
    int rc = gs__drap_health_pack(h, buf, len);
    json_decref(h);
    return rc;
}

static const struct gs_rpc_stream_src health_src = {s_version, s_message};

#define DRA_V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define DRA_V1BETA1 "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"

static const struct gs_rpc_method dra_methods[] = {
    {DRA_V1 "NodePrepareResources", m_prepare, NULL},
    {DRA_V1 "NodeUnprepareResources", m_unprepare, NULL},
    {DRA_V1BETA1 "NodePrepareResources", m_prepare, NULL},
    {DRA_V1BETA1 "NodeUnprepareResources", m_unprepare, NULL},
    {"/v1.DRAResourceHealth/NodeWatchResources", NULL, &health_src},
};

/*--- Registration ---*/

static int m_info(void *ud, const uint8_t *req, size_t len, uint8_t **out, size_t *olen, char *msg, size_t ml)
{
    struct gs_drap *p = ud;
    (void)req, (void)len;
    if (gs__drap_info_pack(p->driver, p->sock, out, olen)) {
        snprintf(msg, ml, "out of memory");
        return GS_RPC_INTERNAL;
    }
    return GS_RPC_OK;
}

static int m_status(void *ud, const uint8_t *req, size_t len, uint8_t **out, size_t *olen, char *msg, size_t ml)
{
    struct gs_drap *p = ud;
    int ok = 0;
    char err[512];
    if (gs__drap_status_decode(req, len, &ok, err, sizeof err)) {
        snprintf(msg, ml, "RegistrationStatus: not a valid message");
        return GS_RPC_INVALID_ARGUMENT;
    }
    if (ok) {
        atomic_fetch_add(&p->registered, 1);
        gs_log(GS_LOG_INFO, "dra-plugin: registered with the kubelet", "driver", p->driver, NULL);
    } else {
        atomic_store(&p->refused, 1);
        gs_log(GS_LOG_WARN, "dra-plugin: the kubelet refused the registration, registering again", "driver",
               p->driver, "error", err[0] ? err : "(none given)", NULL);
    }
    *out = NULL, *olen = 0; /* RegistrationStatusResponse is empty */
    return GS_RPC_OK;
}

static const struct gs_rpc_method reg_methods[] = {
    {"/pluginregistration.Registration/GetInfo", m_info, NULL},
    {"/pluginregistration.Registration/NotifyRegistrationStatus", m_status, NULL},
};

/*--- Life cycle ---*/

static void trim_slash(char *s)
{
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == '/') s[n - 1] = '\0';
}

static int mkdir_p(const char *dir)
{
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *q = tmp + 1; *q; q++) {
        if (*q != '/') continue;
        *q = '\0';
        if (mkdir(tmp, 0755) && errno != EEXIST) return GS_EIO;
        *q = '/';
    }
    return mkdir(tmp, 0755) && errno != EEXIST ? GS_EIO : 0;
}

int gs_drap_create(const struct gs_drap_config *cfg, const struct gs_drap_table *t, struct gs_drap **out, char *err,
                   size_t errlen)
{
    if (!cfg->node || !*cfg->node) {
        snprintf(err, errlen, "the node name is required (it is the pool name)");
        return GS_EINVAL;
    }
    struct gs_drap *p = calloc(1, sizeof *p);
    if (!p) return GS_ENOMEM;
    p->cfg = *cfg;
    snprintf(p->driver, sizeof p->driver, "%s", cfg->driver ? cfg->driver : GS_DRAP_DRIVER);
    snprintf(p->node, sizeof p->node, "%s", cfg->node);
    snprintf(p->plugins_dir, sizeof p->plugins_dir, "%s", cfg->plugins_dir ? cfg->plugins_dir : GS_DRAP_PLUGINS_DIR);
    snprintf(p->registry_dir, sizeof p->registry_dir, "%s",
             cfg->registry_dir ? cfg->registry_dir : GS_DRAP_REGISTRY_DIR);
    snprintf(p->cdi_dir, sizeof p->cdi_dir, "%s", cfg->cdi_dir ? cfg->cdi_dir : GS_CDI_DEFAULT_DIR);
    trim_slash(p->plugins_dir), trim_slash(p->registry_dir), trim_slash(p->cdi_dir);
    if (cfg->state_path) snprintf(p->state_path, sizeof p->state_path, "%s", cfg->state_path);
    else snprintf(p->state_path, sizeof p->state_path, "%s/%s/checkpoint.json", p->plugins_dir, p->driver);
    snprintf(p->sock, sizeof p->sock, "%s/%s/dra.sock", p->plugins_dir, p->driver);
    snprintf(p->reg_sock, sizeof p->reg_sock, "%s/%s-reg.sock", p->registry_dir, p->driver);
    p->table = *t;
    for (int i = 0; i < t->n; i++) p->updated[i] = wall_s();
    p->st = (struct gs_drap_state){p->driver, p->node, p->cdi_dir, json_object()};
    pthread_mutex_init(&p->mu, NULL);
    int rc = gs_drap_checkpoint_load(p->state_path, &p->st, err, errlen);
    if (rc) {
        gs_drap_destroy(p);
        return rc;
    }
    *out = p;
    return 0;
}

void gs_drap_destroy(struct gs_drap *p)
{
    if (!p) return;
    gs_drap_unserve(p);
    json_decref(p->st.claims);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int gs_drap_serve(struct gs_drap *p, char *err, size_t errlen)
{
    gs_drap_unserve(p);
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/%s", p->plugins_dir, p->driver);
    if (mkdir_p(dir) || mkdir_p(p->registry_dir)) {
        snprintf(err, errlen, "cannot create %s or %s: %s", dir, p->registry_dir, strerror(errno));
        return GS_EIO;
    }
    struct gs_rpc_server_cfg c = {p->sock, dra_methods, sizeof dra_methods / sizeof dra_methods[0], p,
                                  p->cfg.poll_ms};
    int rc = gs_rpc_server_start(&c, &p->srv, err, errlen);
    /* Registration last: the kubelet dials the endpoint as soon as it sees this socket. */
    struct gs_rpc_server_cfg r = {p->reg_sock, reg_methods, sizeof reg_methods / sizeof reg_methods[0], p, 0};
    if (!rc) rc = gs_rpc_server_start(&r, &p->reg, err, errlen);
    if (rc) gs_drap_unserve(p);
    atomic_store(&p->refused, 0);
    return rc;
}

void gs_drap_unserve(struct gs_drap *p)
{
    gs_rpc_server_stop(p->reg);
    gs_rpc_server_stop(p->srv);
    p->reg = p->srv = NULL;
}

const char *gs_drap_socket(const struct gs_drap *p)
{
    return p->sock;
}

const char *gs_drap_reg_socket(const struct gs_drap *p)
{
    return p->reg_sock;
}

bool gs_drap_set_gpu_health(struct gs_drap *p, const char *gpu_uuid, bool healthy, const char *message)
{
    bool changed = false;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->table.n; i++) {
        struct gs_drap_dev *d = &p->table.d[i];
        /* A MIG device's minor is its parent's: follow the GPU with that minor. */
        bool mine = !strcmp(d->uuid, gpu_uuid);
        for (int j = 0; !mine && d->mig && j < p->table.n; j++)
            mine = !p->table.d[j].mig && !strcmp(p->table.d[j].uuid, gpu_uuid) && p->table.d[j].minor == d->minor;
        if (!mine || d->healthy == healthy) continue;
        d->healthy = healthy;
        snprintf(d->message, sizeof d->message, "%s", healthy ? "" : (message ? message : "unhealthy"));
        p->updated[i] = wall_s();
        changed = true;
    }
    pthread_mutex_unlock(&p->mu);
    if (changed) atomic_fetch_add(&p->version, 1);
    return changed;
}

int gs_drap_prepared(struct gs_drap *p)
{
    pthread_mutex_lock(&p->mu);
    int n = (int)json_object_size(p->st.claims);
    pthread_mutex_unlock(&p->mu);
    return n;
}

/*--- Run loop ---*/

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static bool present(const char *path)
{
    struct stat st;
    return !stat(path, &st);
}

int gs_drap_run(struct gs_drap *p, gs_drap_health_fn health, void *ud, volatile sig_atomic_t *stop)
{
    char err[512];
    int rc = gs_drap_serve(p, err, sizeof err);
    if (rc) {
        gs_log(GS_LOG_ERROR, "dra-plugin: cannot serve", "socket", p->sock, "error", err, NULL);
        return rc;
    }
    gs_log(GS_LOG_INFO, "dra-plugin: serving", "driver", p->driver, "socket", p->sock, "registration", p->reg_sock,
           NULL);
    while (!rc && !*stop) {
        if (health) rc = health(ud, p, 100);
        else sleep_ms(100);
        bool gone = !present(p->sock) || !present(p->reg_sock);
        if (rc || *stop || (!gone && !atomic_load(&p->refused))) continue;
        if (gone) gs_log(GS_LOG_INFO, "dra-plugin: a socket was removed, serving again", "driver", p->driver, NULL);
        else sleep_ms(1000); /* refused: the kubelet tries again when the socket is new */
        if (gs_drap_serve(p, err, sizeof err)) {
            gs_log(GS_LOG_WARN, "dra-plugin: cannot serve again, retrying", "error", err, NULL);
            sleep_ms(1000);
        }
    }
    gs_drap_unserve(p);
    return rc;
}
