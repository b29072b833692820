/*
 * agent.c - the node agent's handle: start (discovery, checkpoint recovery,
 * HTTP endpoint, threads), the sync loop, stop, and its report. The pod
 * lifecycle is in agent_pods.c, the Node in agent_node.c, the pod watch in
 * agent_watch.c, the HTTP endpoint in agent_http.c; agent.h has the design.
 *
 * The sync loop wakes every 50 ms: it takes the keys the watch marked as
 * changed, reconciles them, then polls processes and writes status reports,
 * renews the heartbeat when due and republishes the NodeResourceTopology
 * when allocations or health changed. Registration is retried on the loop
 * until the server answers, so an agent may start before its server.
 *
 * Reconcile first: at start, and when the loop finds it did not run for
 * PAUSE_NS (the process was stopped, the machine froze - a partition as
 * the server saw it), the agent admits no new pod until a fresh list of its
 * pods was applied and every process the server no longer wants here
 * (deleted, finished or evicted there, re-created elsewhere) has stopped
 * and, for evictions, been confirmed. Only then do the GPUs those processes
 * held go to new pods.
 */
#include "agent/agent_int.h"
#include "core/endpoint.h"
#include "core/log.h"
#include "node/gpus_disc.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define LOOP_MS 50

/*--- Helpers shared by the agent's files ---*/

int64_t gs__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t gs__wall_s(void) { return (int64_t)time(NULL); }

void gs__rfc3339(int64_t t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

const char *gs__jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

int gs_agent_mock_nodes(const char *spec, int *nodes, const char **spec_out)
{
    *nodes = 1;
    *spec_out = spec;
    char *end;
    long n = strtol(spec, &end, 10);
    if (end == spec || *end != 'x') return 0;
    const char *rest = end + 1;
    long m = strtol(rest, &end, 10);
    if (end == rest || *end != 'x') return 0; /* "8xH100": one node of 8 */
    (void)m;
    if (n < 1 || n > 1000) return GS_EINVAL;
    *nodes = (int)n;
    *spec_out = rest;
    return 0;
}

/*--- Sync loop ---*/

static void take_changes(struct gs_agent *a)
{
    pthread_mutex_lock(&a->wmu);
    json_t *changed = a->changed, *objs = json_object(), *later = json_object();
    a->changed = json_object();
    a->applied_gen = a->list_gen;
    const char *k;
    json_t *v;
    json_object_foreach(changed, k, v) {
        json_t *o = json_object_get(a->desired, k);
        if (o) json_object_set(objs, k, o);
    }
    pthread_mutex_unlock(&a->wmu);
    json_object_foreach(changed, k, v)
        if (!gs__pods_reconcile(a, k, json_object_get(objs, k))) json_object_set_new(later, k, json_true());
    if (json_object_size(later)) { /* held back by the reconcile: taken again next time */
        pthread_mutex_lock(&a->wmu);
        json_object_update_missing(a->changed, later);
        pthread_mutex_unlock(&a->wmu);
    }
    json_decref(changed);
    json_decref(objs);
    json_decref(later);
}

/*--- Reconcile first ---*/

#define PAUSE_NS (3LL * 1000000000) /* a loop that did not run this long was paused */

/* Holds admissions back until a list newer than now was applied and the
 * processes the server no longer wants here have stopped. */
static void begin_reconcile(struct gs_agent *a, const char *why)
{
    pthread_mutex_lock(&a->wmu);
    a->gate_gen = a->list_gen + 1;
    pthread_mutex_unlock(&a->wmu);
    atomic_store(&a->relist_now, true);
    atomic_store(&a->watch_cancel, true);
    a->reconciling = true;
    a->reconcile_stops = 0;
    gs_log(GS_LOG_INFO, "agent: reconciling before admitting pods", "node", a->node, "why", why, NULL);
}

static void end_reconcile(struct gs_agent *a)
{
    if (!a->reconciling || a->applied_gen < a->gate_gen || gs__pods_stopping(a)) return;
    a->reconciling = false;
    char n[16];
    snprintf(n, sizeof n, "%d", a->reconcile_stops);
    gs_log(GS_LOG_INFO, "agent: reconciled, admitting pods", "node", a->node, "stopped", n, NULL);
}

static void node_upkeep(struct gs_agent *a, int64_t now)
{
    if (!atomic_load(&a->registered)) {
        if (now < a->next_heartbeat_ns) return;
        a->next_heartbeat_ns = now + 500000000;
        if (gs__node_register(a) == 0) {
            atomic_store(&a->registered, true);
            a->nrt_dirty = true;
            a->next_heartbeat_ns = now + (int64_t)a->o.heartbeat_ms * 1000000;
            gs_log(GS_LOG_INFO, "agent: node registered", "node", a->node, "endpoint", a->endpoint, NULL);
        }
        return;
    }
    bool health = gs__node_health_changed(a);
    if (health) a->nrt_dirty = true;
    if (health || now >= a->next_heartbeat_ns) {
        int err = gs__node_heartbeat(a);
        /* A Node deleted under us is registered again. */
        if (err == GS_ENOENT) atomic_store(&a->registered, false);
        a->next_heartbeat_ns = now + (int64_t)(err ? 500 : a->o.heartbeat_ms) * 1000000;
    }
    if (a->nrt_dirty && now >= a->next_nrt_ns) {
        a->nrt_dirty = gs__node_publish_nrt(a) != 0;
        a->next_nrt_ns = now + 500000000;
    }
    gs__slices_tick(a, now, health); /* DRA ResourceSlices */
}

static void *loop_main(void *arg)
{
    struct gs_agent *a = arg;
    while (!atomic_load(&a->stop)) {
        int64_t now = gs__mono_ns();
        if (a->last_loop_ns && now - a->last_loop_ns > PAUSE_NS) begin_reconcile(a, "resumed after a pause");
        a->last_loop_ns = now;
        node_upkeep(a, now);
        if (atomic_load(&a->registered)) gs__stack_tick(a, now); /* GPU stack validators */
        take_changes(a);
        gs__pods_tick(a);
        end_reconcile(a);
        usleep(LOOP_MS * 1000);
    }
    return NULL;
}

/*--- Start and stop ---*/

static int open_discovery(struct gs_agent *a, char *err, size_t errlen)
{
    const char *spec = a->o.mock_spec;
    char buf[1024];
    /* Several mock nodes in one process need distinct GPU UUIDs: name the host. */
    if (spec && a->o.node_name && !strstr(spec, "host=") && access(spec, R_OK) != 0) {
        snprintf(buf, sizeof buf, "%s,host=%s", spec, a->o.node_name);
        spec = buf;
    }
    int rc = gs_disc_open_named(&a->disc, a->o.backend, spec, NULL, &a->clock);
    if (rc) {
        snprintf(err, errlen, "discovery: %s", a->disc.err[0] ? a->disc.err : gs_strerror(rc));
        return rc;
    }
    a->disc_open = true;
    if ((rc = gs_disc_inventory(&a->disc, &a->inv))) {
        snprintf(err, errlen, "discovery inventory: %s", a->disc.err[0] ? a->disc.err : gs_strerror(rc));
        return rc;
    }
    gs_node_gpus_from_inventory(&a->gpus, &a->inv, 1);
    snprintf(a->node, sizeof a->node, "%s", a->o.node_name ? a->o.node_name : a->inv.hostname);
    struct gs_exporter_config ec = {.interval_ns = a->o.metrics_interval_ns};
    ec.hostname = a->node;
    if ((rc = gs_exporter_create(&a->disc, &ec, &a->exp)) || (rc = gs_exporter_start(a->exp))) {
        snprintf(err, errlen, "exporter: %s", gs_strerror(rc));
        return rc;
    }
    return 0;
}

static void defaults(struct gs_agent *a)
{
    if (!a->o.heartbeat_ms) a->o.heartbeat_ms = 2000;
    if (!a->o.resync_ms) a->o.resync_ms = 10000;
    if (!a->o.grace_ms) a->o.grace_ms = 3000;
    if (!a->o.metrics_interval_ns) a->o.metrics_interval_ns = 5000000000LL;
}

static int random_hex(char *buf, size_t len)
{
    unsigned char b[24];
    if (len < 2 * sizeof b + 1 || getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) return GS_EIO;
    for (size_t i = 0; i < sizeof b; i++) snprintf(buf + 2 * i, 3, "%02x", b[i]);
    return 0;
}

/* The runtimes (docs/NODE.md "Runtimes"): the default handler must be one
 * this node has; runc's state and the image store live under the state dir,
 * by absolute path (bundles name them). */
static int runtimes_setup(struct gs_agent *a, char *err, size_t errlen)
{
    const char *def = a->o.default_runtime;
    if (def && strcmp(def, "process") && strcmp(def, "runc")) {
        snprintf(err, errlen, "--default-runtime \"%.100s\": want process or runc", def);
        return GS_EINVAL;
    }
    char abs[PATH_MAX];
    if (!realpath(a->state_dir, abs)) snprintf(abs, sizeof abs, "%s", a->state_dir);
    snprintf(a->runc_root, sizeof a->runc_root, "%.1000s/runc", abs);
    snprintf(a->image_dir, sizeof a->image_dir, "%.1000s/images", abs);
    a->runc.bin = a->o.runc_bin;
    a->runc.root = a->runc_root;
    a->runc_ok = gs_runc_available(&a->runc);
    if (def && !strcmp(def, "runc") && !a->runc_ok) {
        snprintf(err, errlen, "--default-runtime runc: cannot run %.200s (install Debian's runc)",
                 a->o.runc_bin ? a->o.runc_bin : "runc");
        return GS_EUNSUPPORTED;
    }
    return 0;
}

static int setup(struct gs_agent *a, char *err, size_t errlen)
{
    int rc = open_discovery(a, err, errlen);
    if (rc) return rc;
    if (a->o.state_dir) snprintf(a->state_dir, sizeof a->state_dir, "%s", a->o.state_dir);
    else snprintf(a->state_dir, sizeof a->state_dir, "gpusched-data/agent/%s", a->node);
    if (gs_mkdirs(a->state_dir)) {
        snprintf(err, errlen, "cannot create %s: %s", a->state_dir, strerror(errno));
        return GS_EIO;
    }
    if ((rc = runtimes_setup(a, err, errlen))) return rc;
    struct gs_diags d = {0};
    rc = gs_client_new(&a->o.conn, &a->cl, &d);
    if (rc) {
        snprintf(err, errlen, "client: %s", d.n ? d.v[0].msg : gs_strerror(rc));
        gs_diags_free(&d);
        return rc;
    }
    gs_diags_free(&d);
    if (a->o.http_token) snprintf(a->http_token, sizeof a->http_token, "%s", a->o.http_token);
    else if ((rc = random_hex(a->http_token, sizeof a->http_token))) return rc; /* only /metrics is open */
    a->o.http_token = NULL; /* borrowed: the copy is what counts */
    if ((rc = gs__agent_events_start(a))) { /* Events hook */
        snprintf(err, errlen, "events: %s", gs_strerror(rc));
        return rc;
    }
    const char *listen = a->o.listen ? a->o.listen : "127.0.0.1:0";
    if ((rc = gs__http_start(a, listen, err, errlen))) return rc;
    char host[256];
    const char *colon = strrchr(listen, ':');
    snprintf(host, sizeof host, "%.*s", (int)(colon - listen), listen);
    if (a->o.advertise) snprintf(host, sizeof host, "%s", a->o.advertise);
    if (!host[0] || !strcmp(host, "0.0.0.0")) snprintf(host, sizeof host, "127.0.0.1");
    snprintf(a->endpoint, sizeof a->endpoint, "http://%s:%d", host, a->port);
    char why[400];
    if (gs_endpoint_check(a->endpoint, why, sizeof why)) { /* the server would refuse the Node (422) */
        snprintf(err, errlen, "--advertise \"%.200s\": %s", host, why);
        return GS_EINVAL;
    }
    gs__pods_recover(a);
    begin_reconcile(a, "start"); /* before the threads: the first list is the gate */
    return 0;
}

int gs_agent_start(const struct gs_agent_opts *o, struct gs_agent **out, char *err, size_t errlen)
{
    struct gs_agent *a = calloc(1, sizeof *a);
    if (!a) return GS_ENOMEM;
    a->o = *o;
    gs_clock_init_real(&a->clock);
    defaults(a);
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->wmu, NULL);
    a->desired = json_object();
    a->changed = json_object();
    int rc = setup(a, err, errlen);
    if (!rc && pthread_create(&a->watch_th, NULL, gs__watch_main, a) == 0) a->watch_started = true;
    if (!rc && pthread_create(&a->loop_th, NULL, loop_main, a) == 0) a->loop_started = true;
    if (!rc && (!a->loop_started || !a->watch_started)) rc = GS_ENOMEM;
    if (rc) {
        gs_agent_stop(a, false);
        return rc;
    }
    *out = a;
    return 0;
}

void gs_agent_stop(struct gs_agent *a, bool kill_pods)
{
    if (!a) return;
    atomic_store(&a->stop, true);
    atomic_store(&a->watch_cancel, true);
    if (a->loop_started) pthread_join(a->loop_th, NULL);
    if (a->watch_started) pthread_join(a->watch_th, NULL);
    if (kill_pods) gs__pods_kill_all(a);
    gs__agent_events_stop(a); /* Events hook */
    gs__http_stop(a);
    gs__stack_free(a); /* GPU stack */
    gs__slices_free(a); /* DRA ResourceSlices */
    gs_exporter_free(a->exp);
    if (a->disc_open) gs_disc_close(&a->disc);
    gs_client_free(a->cl);
    for (size_t i = 0; i < a->npods; i++) gs__pod_free(a->pods[i]);
    free(a->pods);
    json_decref(a->desired);
    json_decref(a->changed);
    json_decref(a->lease); /* node lease (agent_node.c) */
    pthread_mutex_destroy(&a->mu);
    pthread_mutex_destroy(&a->wmu);
    free(a);
}

const char *gs_agent_node(const struct gs_agent *a) { return a->node; }
int gs_agent_port(const struct gs_agent *a) { return a->port; }
bool gs_agent_registered(struct gs_agent *a) { return atomic_load(&a->registered); }

json_t *gs_agent_report(struct gs_agent *a)
{
    json_t *pods = json_array();
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->npods; i++) {
        json_t *r = gs__pod_report(a->pods[i]);
        json_t *uuids = json_array(), *g;
        size_t k;
        json_array_foreach(json_object_get(r, "gpus"), k, g)
            json_array_append_new(uuids, json_string(a->gpus.gpu[json_integer_value(g)].uuid));
        json_object_set_new(r, "devices", uuids);
        json_array_append_new(pods, r);
    }
    pthread_mutex_unlock(&a->mu);
    return json_pack("{s:s,s:s,s:b,s:o}", "node", a->node, "endpoint", a->endpoint, "registered",
                     atomic_load(&a->registered), "pods", pods);
}
