/*
 * server.c - starts and stops the control plane's parts in order; see server.h.
 *
 * Order matters: the store first (everything reads it), then the scheduler
 * (it loads the whole store before its first decision), then the HTTP
 * server. Stopping goes the other way, so no request lands on a closed store.
 */
#include "control/server.h"

#include "control/apiserver.h"
#include "control/events.h" /* Event recorder and TTL sweep */
#include "control/auth.h"
#include "loops/sched_loop.h"
#include "control/secret.h"
#include "loops/nodelifecycle.h" /* node lifecycle hook */
#include "loops/claims.h"        /* resourceclaim controller hook */
#include "control/dra_defaults.h"    /* default DeviceClasses */
#include "control/namespaces.h"    /* built-in namespaces, namespace controller */
#include "govern/metrics.h"         /* GPU stack operator and /metrics hook */
#include "govern/operator.h"
#include "control/tls.h"
#include "control/replica.h" /* one leader among replicas */
#include "core/codec.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

struct gs_server {
    char *dir;
    struct gs_store *store;
    struct gs_source *source; /* the loops' way to the store (source.h) */
    struct gs_tls tls;
    bool has_tls;
    struct gs_auth auth;
    bool has_auth;
    struct gs_sched_config cfg;
    bool has_cfg;
    struct gs_sched_loop *loop;
    struct gs_nodelc *nodelc; /* node lifecycle hook */
    struct gs_claims *claims; /* resourceclaim controller hook */
    struct gs_nsctl *nsctl;   /* namespace controller */
    struct gs_operator *op;   /* GPU stack operator hook */
    struct gs_hist cycle_hist; /* scheduling cycle latency for /metrics */
    struct gs_apiserver *api;
    struct gs_recorder *events; /* Event recorder hook */
    char url[300];
    char kubeconfig[4200];
    char agent_token[128];
    /* Replicas (replica.h): the loops' own store handle (fenced to the
     * leader's term; the API's handle where the store has no fence), the
     * elector, and what the leader-only loops need to start again. */
    struct gs_store *loop_store;
    bool own_loop_store;          /* a second handle, closed at stop */
    struct gs_source *lease_source; /* the Lease's way to the API's handle */
    struct gs_replica *replica;
    pthread_mutex_t lead_mu;      /* guards the leader-only handles below against /metrics */
    struct gs_recorder *sweeper;  /* the Event TTL sweep, leader-only */
    int64_t event_ttl_ns;
    double node_lost_timeout_s;
    bool no_scheduler;
    uint64_t seed; /* the claims controller's generated names */
    int lock_fd;                  /* <dir>/store.lock, held while a SQLite store is open; -1: none */
};

static int write_private(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return GS_EIO;
    size_t len = strlen(text);
    bool ok = write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
    close(fd);
    return ok ? 0 : GS_EIO;
}

static int random_token(char *buf, size_t len)
{
    unsigned char b[24];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) return GS_EIO;
    for (size_t i = 0; i < sizeof b && 2 * i + 2 < len; i++) snprintf(buf + 2 * i, 3, "%02x", b[i]);
    return 0;
}

/* Appends a node token for each of o->node_names that has none, then reloads. */
static int add_node_tokens(struct gs_server *s, const struct gs_server_opts *o, const char *path, struct gs_diags *d)
{
    bool added = false;
    for (size_t i = 0; i < o->nnode_names; i++) {
        if (gs_server_node_token(s, o->node_names[i])) continue;
        char tok[64], line[512];
        int err = random_token(tok, sizeof tok);
        if (err) return err;
        int n = snprintf(line, sizeof line, "%s,system:node:%s,system:nodes,,node\n", tok, o->node_names[i]);
        int fd = open(path, O_RDWR | O_APPEND);
        char last = '\n';
        off_t end = fd >= 0 ? lseek(fd, 0, SEEK_END) : 0;
        if (end > 0 && pread(fd, &last, 1, end - 1) != 1) last = '\n';
        bool ok = fd >= 0 && n > 0 && n < (int)sizeof line && (last == '\n' || write(fd, "\n", 1) == 1) &&
                  write(fd, line, (size_t)n) == n && fsync(fd) == 0;
        if (fd >= 0) close(fd);
        if (!ok) return GS_EIO;
        added = true;
    }
    if (!added) return 0;
    gs_auth_free(&s->auth);
    return gs_auth_load(path, &s->auth, d);
}

const char *gs_server_scheduler_token(const struct gs_server *s)
{
    for (size_t i = 0; s->has_auth && i < s->auth.n; i++)
        if (s->auth.v[i].role == GS_ROLE_SCHEDULER) return s->auth.v[i].token;
    return NULL;
}

/* The data directory's tokens file gets a scheduler token once (a file the
 * operator passed with --tokens is theirs: left as it is). */
static int add_scheduler_token(struct gs_server *s, const char *path, struct gs_diags *d)
{
    if (gs_server_scheduler_token(s)) return 0;
    char tok[64], line[256];
    int err = random_token(tok, sizeof tok);
    if (err) return err;
    int n = snprintf(line, sizeof line, "%s,%s,,,scheduler\n", tok, GS_SCHEDULER_USER);
    int fd = open(path, O_RDWR | O_APPEND);
    char last = '\n';
    off_t end = fd >= 0 ? lseek(fd, 0, SEEK_END) : 0;
    if (end > 0 && pread(fd, &last, 1, end - 1) != 1) last = '\n';
    bool ok = fd >= 0 && (last == '\n' || write(fd, "\n", 1) == 1) && write(fd, line, (size_t)n) == n && fsync(fd) == 0;
    if (fd >= 0) close(fd);
    if (!ok) return GS_EIO;
    gs_auth_free(&s->auth);
    return gs_auth_load(path, &s->auth, d);
}

static int load_tokens(struct gs_server *s, const struct gs_server_opts *o, struct gs_diags *d)
{
    char path[4200];
    if (o->tokens_file) snprintf(path, sizeof path, "%s", o->tokens_file);
    else snprintf(path, sizeof path, "%s/tokens.csv", s->dir);
    int err = gs_auth_load(path, &s->auth, d);
    if (err == GS_ENOENT && !o->tokens_file) {
        gs_auth_free(&s->auth);
        char tok[64], text[256];
        if ((err = random_token(tok, sizeof tok))) return err;
        snprintf(text, sizeof text, "# token,user,groups,namespaces,role\n%s,admin,system:masters,,admin\n", tok);
        if ((err = write_private(path, text))) return err;
        err = gs_auth_load(path, &s->auth, d);
    }
    if (err == GS_ENOENT) gs_diags_add(d, path, "tokens file not found");
    s->has_auth = true;
    if (!err && (err = add_node_tokens(s, o, path, d))) gs_diags_add(d, path, "cannot add the node tokens");
    if (!err && !o->tokens_file && (err = add_scheduler_token(s, path, d)))
        gs_diags_add(d, path, "cannot add the scheduler token");
    if (err) return err;
    s->auth.qps = o->qps == 0 ? 2000 : o->qps;
    s->auth.burst = o->burst > 0 ? o->burst : s->auth.qps * 2;
    return 0;
}

const char *gs_server_admin_token(const struct gs_server *s)
{
    for (size_t i = 0; s->has_auth && i < s->auth.n; i++)
        if (s->auth.v[i].role == GS_ROLE_ADMIN) return s->auth.v[i].token;
    return NULL;
}

const char *gs_server_node_token(const struct gs_server *s, const char *name)
{
    for (size_t i = 0; s->has_auth && name && i < s->auth.n; i++)
        if (s->auth.v[i].role == GS_ROLE_NODE && !strcmp(s->auth.v[i].node, name)) return s->auth.v[i].token;
    return NULL;
}

/* A kubeconfig for user (with tok, or none) at path. */
static int write_kubeconfig_for(struct gs_server *s, const char *path, const char *user, const char *tok)
{
    char *ca = NULL;
    if (s->has_tls) {
        gnutls_datum_t in = {(unsigned char *)s->tls.ca_pem, (unsigned)strlen(s->tls.ca_pem)}, out;
        if (gnutls_base64_encode2(&in, &out) < 0) return GS_ENOMEM;
        ca = strndup((char *)out.data, out.size);
        gnutls_free(out.data);
        if (!ca) return GS_ENOMEM;
    }
    char *text = NULL;
    int n = asprintf(&text,
                     "apiVersion: v1\nkind: Config\nclusters:\n- name: gpusched\n  cluster:\n    server: %s\n%s%s%s"
                     "contexts:\n- name: gpusched\n  context:\n    cluster: gpusched\n    user: %s\n"
                     "current-context: gpusched\nusers:\n- name: %s\n  user:\n%s%s%s",
                     s->url, ca ? "    certificate-authority-data: " : "", ca ? ca : "", ca ? "\n" : "", user, user,
                     tok ? "    token: " : "    {}\n", tok ? tok : "", tok ? "\n" : "");
    free(ca);
    if (n < 0) return GS_ENOMEM;
    int err = write_private(path, text);
    free(text);
    return err;
}

/* The admin's kubeconfig, and next to it scheduler.kubeconfig for a
 * standalone `gpusched scheduler` (the tenant-free scheduler identity). */
static int write_kubeconfig(struct gs_server *s)
{
    snprintf(s->kubeconfig, sizeof s->kubeconfig, "%s/kubeconfig", s->dir);
    int err = write_kubeconfig_for(s, s->kubeconfig, "admin", gs_server_admin_token(s));
    const char *st = gs_server_scheduler_token(s);
    if (!err && st) {
        char path[4300];
        snprintf(path, sizeof path, "%s/scheduler.kubeconfig", s->dir);
        err = write_kubeconfig_for(s, path, GS_SCHEDULER_USER, st);
    }
    return err;
}

/* The API's explain subresource, answered by the scheduler loop. */
static int server_explain(void *ctx, const char *ns, const char *name, char **text)
{
    return gs_sched_loop_explain(ctx, ns, name, text);
}

static int load_sched_config(struct gs_server *s, const char *path, struct gs_diags *d)
{
    int err = gs_sched_config_load(path, &s->cfg, d); /* the file shape `sim --config` takes too */
    s->has_cfg = !err;
    return err;
}

/* /metrics hook: the operator's GPU stack metrics and the scheduler's. */
static char *metrics_page(void *arg)
{
    struct gs_server *s = arg;
    struct gs_mbuf b = {0};
    pthread_mutex_lock(&s->lead_mu); /* the operator comes and goes with leadership */
    if (s->op) gs_operator_metrics(s->op, &b.buf, &b.len, &b.cap);
    pthread_mutex_unlock(&s->lead_mu);
    if (s->replica) gs_replica_metrics(s->replica, &b); /* gpusched_leader{replica=...} */
    gs_metrics_store(&b, s->store); /* store health */
    if (s->loop) gs_sched_loop_metrics(s->loop, &s->cycle_hist, &b);
    gs_recorder_metrics(s->events, true, &b); /* Event recorder hook */
    if (b.err || !b.buf) {
        free(b.buf);
        return NULL;
    }
    return b.buf;
}

/* The data directory holds the tokens, keys and kubeconfig: its owner only
 * (pods run as another uid and cannot enter it), and the proxy's token. */
static int private_dir(struct gs_server *s, const struct gs_server_opts *o, struct gs_diags *d)
{
    char parent[4200];
    snprintf(parent, sizeof parent, "%s", s->dir);
    for (char *p = parent + 1; *p; p++) { /* parents as mkdir -p would make them */
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(parent, 0755) && errno != EEXIST) break;
        *p = '/';
    }
    if ((mkdir(s->dir, 0700) && errno != EEXIST) || chmod(s->dir, 0700)) {
        gs_diags_add(d, s->dir, "cannot create the data directory with mode 0700: %s", strerror(errno));
        return GS_EIO;
    }
    if (o->no_auth) return 0;
    char path[4200];
    if (o->agent_token_file) snprintf(path, sizeof path, "%s", o->agent_token_file);
    else snprintf(path, sizeof path, "%s/agent.token", s->dir);
    int err = gs_secret_ensure(path, s->agent_token, sizeof s->agent_token);
    if (err) gs_diags_add(d, path, "cannot read or create the agent token: %s", gs_strerror(err));
    return err;
}

/*--- The leader's loops (replica.h) ---
 *
 * Without leader_elect they start once, here, and run until stop. With it
 * they start when this replica becomes leader and stop when it stops
 * leading. The scheduler loop is not among them: it runs on every replica,
 * following the store so its cache is warm for a takeover and answers the
 * explain subresource, and writes only while may_write says so. */

static void leader_loops_stop(void *ctx)
{
    struct gs_server *s = ctx;
    pthread_mutex_lock(&s->lead_mu);
    struct gs_operator *op = s->op;
    struct gs_claims *cl = s->claims;
    struct gs_nodelc *lc = s->nodelc;
    struct gs_nsctl *ns = s->nsctl;
    struct gs_recorder *sw = s->sweeper;
    s->op = NULL, s->claims = NULL, s->nodelc = NULL, s->nsctl = NULL, s->sweeper = NULL;
    pthread_mutex_unlock(&s->lead_mu);
    gs_operator_stop(op);   /* GPU stack operator hook */
    gs_claims_stop(cl);     /* resourceclaim controller hook */
    gs_nodelc_stop(lc);     /* node lifecycle hook */
    gs_nsctl_stop(ns);
    gs_recorder_free(sw);
}

static int leader_loops_start(void *ctx)
{
    struct gs_server *s = ctx;
    struct gs_nsctl *ns = NULL;
    struct gs_nodelc *lc = NULL;
    struct gs_operator *op = NULL;
    struct gs_claims *cl = NULL;
    struct gs_recorder *sw = NULL;
    struct gs_nsctl_opts nso = {.store = s->loop_store};
    int err = gs_nsctl_start(&nso, &ns);
    if (!err && s->replica) { /* one sweeper among the replicas: its recorder records nothing else */
        struct gs_recorder_opts ro = {.store = s->loop_store, .ttl_ns = s->event_ttl_ns};
        err = gs_recorder_new(&ro, &sw);
    }
    if (!err && !s->no_scheduler) {
        /* node lifecycle hook: NotReady nodes, their pods failed or re-created */
        struct gs_nodelc_opts no = {.source = s->source, .events = s->events,
                                    .lost_ms = (int64_t)(s->node_lost_timeout_s * 1000)};
        err = gs_nodelc_start(&no, &lc);
        /* GPU stack operator hook: ClusterPolicy, per-node state machines */
        struct gs_operator_opts oo = {.source = s->source, .events = s->events};
        if (!err) err = gs_operator_start(&oo, &op);
        /* resourceclaim controller hook: claims from templates, reservedFor, deallocation */
        struct gs_claims_opts co = {.source = s->source, .seed = s->seed};
        if (!err) err = gs_claims_start(&co, &cl);
    }
    pthread_mutex_lock(&s->lead_mu);
    s->nsctl = ns, s->nodelc = lc, s->op = op, s->claims = cl, s->sweeper = sw;
    pthread_mutex_unlock(&s->lead_mu);
    return err;
}

/* The fence of the loops' handle (replica.h). */
static int loop_fence(void *ctx, const char *key, int64_t rv)
{
    struct gs_server *s = ctx;
    return gs_store_set_fence(s->loop_store, key, rv);
}

/* The loops' store handle: a second one where the store can fence writes
 * (etcd: same endpoints and prefix, its own watch and ring; the API's
 * handle compacts, this one does not), else the API's own (SQLite: one
 * process, nothing to fence). */
static int open_loop_store(struct gs_server *s, const struct gs_server_opts *o, struct gs_diags *d)
{
    s->loop_store = s->store;
    s->own_loop_store = false;
    if (o->store_kind != GS_STORE_ETCD) return 0;
    struct gs_store_etcd_opts eo = o->etcd;
    eo.ring_events = o->ring_events;
    eo.compaction_interval_ms = -1;
    eo.diags = d;
    size_t nd = d->n;
    int err = gs_store_open_etcd(&eo, &s->loop_store);
    if (err) {
        s->loop_store = s->store;
        if (d->n == nd) gs_diags_add(d, "etcd", "cannot open the control loops' store handle: %s", gs_strerror(err));
        return err;
    }
    s->own_loop_store = true;
    return 0;
}

/* The election, when asked for: made before the scheduler loop (whose
 * may_write it is), started last, once everything it starts and stops exists. */
static int make_replica(struct gs_server *s, const struct gs_server_opts *o, struct gs_diags *d)
{
    int err = gs_source_local_new(s->store, &s->lease_source);
    if (err) return err;
    struct gs_replica_opts ro = {.lease_source = s->lease_source, .identity = o->replica_id,
                                 .lease_duration_ns = o->lease_duration_ns, .renew_deadline_ns = o->renew_deadline_ns,
                                 .retry_period_ns = o->retry_period_ns, .seed = o->seed,
                                 .set_fence = s->own_loop_store ? loop_fence : NULL, .start = leader_loops_start,
                                 .stop = leader_loops_stop, .ctx = s};
    return gs_replica_new(&ro, &s->replica, d);
}

/* /readyz's note: which replica leads. */
static char *ready_note(void *arg)
{
    struct gs_server *s = arg;
    return s->replica ? gs_replica_ready_note(s->replica) : NULL;
}

/* A SQLite store belongs to one process: the lock tells a second server,
 * and `gpusched store migrate`, that this one runs. */
static int lock_data_dir(struct gs_server *s, struct gs_diags *d)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/" GS_SERVER_LOCK_FILE, s->dir);
    s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (s->lock_fd < 0) {
        gs_diags_add(d, path, "cannot open the store lock: %s", strerror(errno));
        return GS_EIO;
    }
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB)) {
        gs_diags_add(d, path, "the data directory is in use by another gpusched server (or store migrate): %s",
                     strerror(errno));
        return GS_EBUSY;
    }
    return 0;
}

static int start_parts(struct gs_server *s, const struct gs_server_opts *o, struct gs_diags *d)
{
    int err = private_dir(s, o, d);
    if (err) return err;
    if (o->store_kind != GS_STORE_ETCD && (err = lock_data_dir(s, d))) return err; /* etcd: shared by design */
    struct gs_store_opts so = {.dir = s->dir, .sync_full = o->sync_full, .ring_events = o->ring_events,
                               .accept_regression = o->accept_store_regression, .diags = d};
    size_t nd = d->n;
    if (o->store_kind == GS_STORE_ETCD) { /* store_etcd.c: the data directory keeps tokens and TLS only */
        struct gs_store_etcd_opts eo = o->etcd;
        eo.ring_events = o->ring_events;
        eo.diags = d;
        err = gs_store_open_etcd(&eo, &s->store);
    } else {
        err = gs_store_open_sqlite(&so, &s->store);
    }
    if (err) {
        if (d->n == nd) gs_diags_add(d, s->dir, "cannot open the store: %s", gs_strerror(err));
        return err;
    }
    if ((err = gs_namespaces_bootstrap(s->store))) {
        gs_diags_add(d, s->dir, "cannot create the built-in namespaces: %s", gs_strerror(err));
        return err;
    }
    if ((err = gs_dra_default_classes(s->store))) { /* gpu.nvidia.com, mig.nvidia.com (dra_defaults.h) */
        gs_diags_add(d, s->dir, "cannot create the default DeviceClasses: %s", gs_strerror(err));
        return err;
    }
    if ((err = open_loop_store(s, o, d))) return err;
    /* One in-process source for every control loop: the same interface the
     * standalone scheduler gets over a Kubernetes API server. */
    if ((err = gs_source_local_new(s->loop_store, &s->source))) return err;
    if (!o->no_auth && (err = load_tokens(s, o, d))) return err;
    if (!o->insecure) {
        if ((err = gs_tls_ensure(s->dir, NULL, 0, &s->tls))) {
            gs_diags_add(d, s->dir, "cannot create or read the TLS certificates: %s", gs_strerror(err));
            return err;
        }
        s->has_tls = true;
    }
    if (o->sched_config && (err = load_sched_config(s, o->sched_config, d))) return err;
    /* Event recorder hook: one queue and thread for every producer, plus the TTL sweep. */
    if (o->event_ttl_s < 0) {
        gs_diags_add(d, "event-ttl", "must be > 0 seconds, got %lld", (long long)o->event_ttl_s);
        return GS_EINVAL;
    }
    s->event_ttl_ns = (o->event_ttl_s ? o->event_ttl_s : GS_EVENT_TTL_DEFAULT_S) * GS_NS_PER_SEC;
    s->node_lost_timeout_s = o->node_lost_timeout_s;
    s->no_scheduler = o->no_scheduler;
    s->seed = o->seed;
    if (o->leader_elect && (err = make_replica(s, o, d))) return err;
    /* With replicas the TTL sweep is the leader's (leader_loops_start). */
    struct gs_recorder_opts ro = {.store = s->loop_store, .ttl_ns = o->leader_elect ? 0 : s->event_ttl_ns};
    if ((err = gs_recorder_new(&ro, &s->events))) return err;
    if (!o->no_scheduler) {
        struct gs_sched_loop_opts lo = {.source = s->source, .config = s->has_cfg ? &s->cfg : NULL, .seed = o->seed,
                                        .cycle_latency = &s->cycle_hist, .admission = o->admission,
                                        .events = s->events}; /* admission server options, events */
        if (s->replica) lo.may_write = gs_replica_may_write, lo.may_write_ctx = s->replica;
        if ((err = gs_sched_loop_start(&lo, &s->loop, d))) return err;
    }
    if (!o->leader_elect && (err = leader_loops_start(s))) return err;
    struct gs_apiserver_opts ao = {o->listen ? o->listen : "127.0.0.1:6443", s->store, o->no_auth ? NULL : &s->auth,
                                   s->has_tls ? &s->tls : NULL, o->max_body, metrics_page, s, NULL, NULL,
                                   s->agent_token, o->max_connections, o->max_per_ip, o->idle_timeout_s, o->fail_qps,
                                   o->admit_defaults, /* default tolerations (admit_defaults.c) */
                                   ready_note};       /* which replica leads, on /readyz */
    if (s->loop) {
        ao.explain = server_explain;
        ao.explain_ctx = s->loop;
    }
    if ((err = gs_apiserver_start(&ao, &s->api))) {
        gs_diags_add(d, ao.listen, "cannot listen: %s", gs_strerror(err));
        return err;
    }
    const char *host = ao.listen;
    const char *colon = strrchr(host, ':');
    int hl = colon ? (int)(colon - host) : 0;
    if (hl == 0 || (hl == 7 && !strncmp(host, "0.0.0.0", 7))) host = "127.0.0.1", hl = 9;
    snprintf(s->url, sizeof s->url, "%s://%.*s:%d", s->has_tls ? "https" : "http", hl, host,
             gs_apiserver_port(s->api));
    if ((err = write_kubeconfig(s))) {
        gs_diags_add(d, s->dir, "cannot write the kubeconfig");
        return err;
    }
    return s->replica ? gs_replica_start(s->replica) : 0;
}

int gs_server_start(const struct gs_server_opts *o, struct gs_server **out, struct gs_diags *d)
{
    *out = NULL;
    struct gs_server *s = calloc(1, sizeof *s);
    if (!s || !(s->dir = strdup(o->data_dir ? o->data_dir : "./gpusched-data"))) {
        free(s);
        return GS_ENOMEM;
    }
    gs_hist_init(&s->cycle_hist, 0.0001, 2, 16); /* 100 us .. 3.3 s */
    pthread_mutex_init(&s->lead_mu, NULL);
    s->lock_fd = -1;
    struct gs_server_opts eo = *o;
    if (eo.store_kind == GS_STORE_ETCD) eo.leader_elect = true; /* a shared store: replicas elect one leader */
    int err = start_parts(s, &eo, d);
    if (err) {
        gs_server_stop(s);
        return err;
    }
    gs_log(GS_LOG_INFO, "server: serving", "url", s->url, "data", s->dir, NULL);
    *out = s;
    return 0;
}

void gs_server_stop(struct gs_server *s)
{
    if (!s) return;
    gs_apiserver_stop(s->api);
    gs_sched_loop_stop(s->loop); /* first: its may_write asks the replica's elector */
    gs_replica_free(s->replica); /* the leader's loops stop, then the Lease is released */
    leader_loops_stop(s);        /* without replicas: the operator, node lifecycle, namespaces */
    gs_recorder_free(s->events); /* writes what its producers queued */
    gs_source_free(s->source);   /* after every loop that borrowed it */
    gs_source_free(s->lease_source);
    if (s->own_loop_store) gs_store_close(s->loop_store);
    gs_store_close(s->store);
    pthread_mutex_destroy(&s->lead_mu);
    if (s->lock_fd >= 0) close(s->lock_fd); /* after the store closed */
    gs_hist_destroy(&s->cycle_hist);
    if (s->has_cfg) gs_sched_config_free(&s->cfg);
    if (s->has_auth) gs_auth_free(&s->auth);
    gs_tls_free(&s->tls);
    free(s->dir);
    free(s);
}

int gs_server_port(const struct gs_server *s) { return gs_apiserver_port(s->api); }
const char *gs_server_url(const struct gs_server *s) { return s->url; }
const char *gs_server_kubeconfig(const struct gs_server *s) { return s->kubeconfig; }
const char *gs_server_agent_token(const struct gs_server *s) { return s->agent_token; }
struct gs_store *gs_server_store(struct gs_server *s) { return s->store; }
struct gs_recorder *gs_server_events(struct gs_server *s) { return s->events; }
struct gs_sched_loop *gs_server_sched_loop(struct gs_server *s) { return s->loop; }
struct gs_replica *gs_server_replica(struct gs_server *s) { return s->replica; }
bool gs_server_leading(struct gs_server *s) { return !s->replica || gs_replica_leading(s->replica); }

void gs_server_sched_stats(struct gs_server *s, struct gs_sched_loop_stats *out)
{
    memset(out, 0, sizeof *out);
    if (s->loop) gs_sched_loop_stats(s->loop, out);
}
