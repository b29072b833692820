/*
 * nodelifecycle.c - nodes whose heartbeat stopped; see nodelifecycle.h.
 *
 * Works on the store directly (it runs inside the server), one atomic
 * read-modify-write per object, each re-checking its condition on the
 * current object: a node that came back, or a pod that finished or was
 * re-bound meanwhile, is left as it is. The scan is a plain poll: a few
 * hundred nodes cost microseconds, and pods are listed only while some
 * node is lost.
 *
 * A node's last sign of life is the later of its Lease's renewTime (the
 * agent renews it every heartbeat) and its Ready condition's
 * lastHeartbeatTime (written by agents without a lease, and rarely by those
 * with one). The node leases are listed once per scan.
 */
#include "control/nodelifecycle.h"
#include "control/events.h" /* NodeNotReady, evictions */
#include "control/apiserver.h"
#include "control/resources.h"
#include "core/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct gs_nodelc {
    struct gs_store *store;
    struct gs_event_source ev; /* events hook */
    double grace_s, start_s;
    int64_t period_ms;
    pthread_t th;
    bool started;
    atomic_bool stop;
    pthread_mutex_t mu; /* stats */
    struct gs_nodelc_stats st;
    json_t *missing;       /* node name -> first scan (s) that found pods bound to it but no Node */
    double next_orphan_s;  /* next scan for such pods */
};

#define ORPHAN_PERIOD_S 20.0     /* as Kubernetes' PodGC */
#define ORPHAN_QUARANTINE_S 40.0 /* a missing Node must stay missing this long */

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* RFC 3339 with optional fraction ("...T03:04:05.123456Z"); 0 when absent or malformed. */
static double parse_time(const char *s)
{
    struct tm tm = {0};
    const char *rest = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!rest) return 0;
    double frac = 0, scale = 0.1;
    if (*rest == '.')
        for (rest++; *rest >= '0' && *rest <= '9'; rest++, scale /= 10) frac += (*rest - '0') * scale;
    return (double)timegm(&tm) + frac;
}

static void now_text(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *ready_cond(const json_t *node)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), i, c)
        if (jstr(c, "type") && !strcmp(jstr(c, "type"), "Ready")) return c;
    return NULL;
}

static bool has_taint(const json_t *node)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(json_object_get(node, "spec"), "taints"), i, t)
        if (jstr(t, "key") && !strcmp(jstr(t, "key"), GS_TAINT_UNREACHABLE)) return true;
    return false;
}

/*--- Node transitions ---*/

struct node_arg {
    struct gs_nodelc *l;
    double now;
    bool lost;       /* the direction of the change */
    json_t *leases;  /* node name -> renewTime (seconds) */
};

static double last_seen(const struct gs_nodelc *l, const json_t *node, const json_t *leases, bool *has_hb)
{
    json_t *c = ready_cond(node);
    double hb = parse_time(c ? jstr(c, "lastHeartbeatTime") : NULL);
    const char *name = jstr(json_object_get(node, "metadata"), "name");
    double lease = name ? json_real_value(json_object_get(leases, name)) : 0;
    if (lease > hb) hb = lease;
    *has_hb = hb > 0;
    return hb > l->start_s ? hb : l->start_s;
}

static int lease_one(const char *key, json_t *lease, void *arg)
{
    (void)key;
    const char *name = jstr(json_object_get(lease, "metadata"), "name");
    double t = parse_time(jstr(json_object_get(lease, "spec"), "renewTime"));
    if (name && t > 0) json_object_set_new(arg, name, json_real(t));
    return 0;
}

static int mark_node(json_t *cur, json_t **out, void *arg)
{
    struct node_arg *na = arg;
    bool has_hb;
    if (!cur) return GS_STORE_UNCHANGED;
    bool lost = na->now - last_seen(na->l, cur, na->leases, &has_hb) > na->l->grace_s;
    if (!has_hb || lost != na->lost) return GS_STORE_UNCHANGED;
    json_t *n = json_deep_copy(cur);
    json_t *spec = json_object_get(n, "spec");
    if (!json_is_object(spec)) json_object_set_new(n, "spec", spec = json_object());
    json_t *taints = json_object_get(spec, "taints");
    char ts[32];
    now_text(ts, sizeof ts);
    if (lost) {
        if (!json_is_array(taints)) json_object_set_new(spec, "taints", taints = json_array());
        if (!has_taint(n))
            json_array_append_new(taints, json_pack("{s:s,s:s,s:s}", "key", GS_TAINT_UNREACHABLE, "effect",
                                                    "NoSchedule", "timeAdded", ts));
        json_t *c = ready_cond(n);
        if (c) {
            json_object_set_new(c, "status", json_string("Unknown"));
            json_object_set_new(c, "reason", json_string("NodeStatusUnknown"));
            json_object_set_new(c, "message", json_string("the node agent stopped posting its heartbeat"));
            json_object_set_new(c, "lastTransitionTime", json_string(ts));
        }
    } else {
        json_t *keep = json_array(), *t;
        size_t i;
        json_array_foreach(taints, i, t)
            if (!jstr(t, "key") || strcmp(jstr(t, "key"), GS_TAINT_UNREACHABLE)) json_array_append(keep, t);
        json_object_set_new(spec, "taints", keep);
    }
    *out = n;
    return 0;
}

/*--- Pods of lost nodes ---*/

static int fix_pod(json_t *cur, json_t **out, void *arg)
{
    const char *node = arg;
    if (!cur) return GS_STORE_UNCHANGED;
    const char *bound = jstr(json_object_get(cur, "spec"), "nodeName");
    const char *phase = jstr(json_object_get(cur, "status"), "phase");
    if (!bound || strcmp(bound, node) || (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))))
        return GS_STORE_UNCHANGED;
    if (jstr(json_object_get(cur, "metadata"), "deletionTimestamp")) return GS_STORE_UNCHANGED; /* never re-created */
    json_t *n = json_deep_copy(cur);
    const char *policy = jstr(json_object_get(n, "spec"), "restartPolicy");
    char msg[300];
    snprintf(msg, sizeof msg, "node %s stopped answering or was removed; the pod's processes are lost", node);
    if (policy && !strcmp(policy, "Never")) {
        json_t *st = json_object_get(n, "status");
        if (!json_is_object(st)) json_object_set_new(n, "status", st = json_object());
        json_object_set_new(st, "phase", json_string("Failed"));
        json_object_set_new(st, "reason", json_string("NodeLost"));
        json_object_set_new(st, "message", json_string(msg));
        *out = n;
        return 0;
    }
    json_t *md = json_object_get(n, "metadata");
    json_t *ann = json_object_get(md, "annotations");
    if (!json_is_object(ann)) json_object_set_new(md, "annotations", ann = json_object());
    json_object_set(ann, "gpusched.io/recreated-from", json_object_get(md, "uid"));
    json_object_set_new(ann, "gpusched.io/recreated-reason", json_string(msg));
    json_object_del(ann, "gpusched.io/devices");
    json_object_del(json_object_get(n, "spec"), "nodeName");
    json_object_set_new(n, "status", json_object());
    int err = gs_apiserver_prepare_new(n);
    if (err) {
        json_decref(n);
        return err;
    }
    *out = n;
    return 0;
}

struct scan_ctx {
    struct gs_nodelc *l;
    double now;
    json_t *exists;  /* node name -> true, every Node */
    json_t *lost;    /* node name -> true */
    json_t *changes; /* key -> bool lost */
    json_t *pods;    /* key -> {node, never, rv (when terminating)} */
    json_t *leases;  /* node name -> renewTime */
};

static int scan_node(const char *key, json_t *node, void *arg)
{
    struct scan_ctx *c = arg;
    bool has_hb;
    double seen = last_seen(c->l, node, c->leases, &has_hb);
    bool lost = c->now - seen > c->l->grace_s;
    json_t *rc = ready_cond(node);
    bool unknown = rc && jstr(rc, "status") && !strcmp(jstr(rc, "status"), "Unknown");
    bool tainted = has_taint(node);
    const char *name = jstr(json_object_get(node, "metadata"), "name");
    if (name) json_object_set_new(c->exists, name, json_true());
    if (!has_hb) return 0;
    if (lost && name) json_object_set_new(c->lost, name, json_true());
    if (lost && (!tainted || !unknown)) json_object_set_new(c->changes, key, json_true());
    if (!lost && tainted) json_object_set_new(c->changes, key, json_false());
    return 0;
}

/* Collects the unfinished pods of lost nodes (mutating inside a list is not allowed). */
static int scan_pod(const char *key, json_t *pod, void *arg)
{
    struct scan_ctx *c = arg;
    const char *node = jstr(json_object_get(pod, "spec"), "nodeName");
    if (!node || !json_object_get(c->lost, node)) return 0;
    const char *phase = jstr(json_object_get(pod, "status"), "phase");
    if (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))) return 0;
    const char *policy = jstr(json_object_get(pod, "spec"), "restartPolicy");
    json_t *md = json_object_get(pod, "metadata");
    json_t *v = json_pack("{s:s,s:b}", "node", node, "never", policy && !strcmp(policy, "Never"));
    /* Being deleted, and the node cannot confirm: deleted now (unless finalizers hold it). */
    if (jstr(md, "deletionTimestamp") && !json_array_size(json_object_get(md, "finalizers")))
        json_object_set_new(v, "rv", json_integer(gs_store_obj_rv(pod)));
    json_object_set_new(c->pods, key, v);
    return 0;
}

/* An Event from "node-controller" on the object stored under key, as obj (its latest state) names it. */
static void lc_event(struct gs_nodelc *l, const char *kind, const json_t *obj, const char *type, const char *reason,
                     const char *msg)
{
    const json_t *md = json_object_get(obj, "metadata");
    if (!jstr(md, "name")) return;
    struct gs_event_ref ref = {.kind = kind, .ns = jstr(md, "namespace"), .name = jstr(md, "name"),
                               .uid = jstr(md, "uid")};
    gs_event_record(&l->ev, &ref, type, reason, reason, "%s", msg);
}

static void force_delete(struct gs_nodelc *l, const char *key, const char *node, int64_t rv)
{
    json_t *old = NULL;
    if (gs_store_delete(l->store, key, rv, &old, NULL)) return; /* changed meanwhile: the next scan looks again */
    char msg[400];
    snprintf(msg, sizeof msg, "Deleting terminating pod: node %s cannot confirm it stopped", node);
    lc_event(l, "Pod", old, "Normal", "NodeControllerEviction", msg);
    json_decref(old);
    pthread_mutex_lock(&l->mu);
    l->st.pods_deleted++;
    pthread_mutex_unlock(&l->mu);
    gs_log(GS_LOG_WARN, "node lifecycle: terminating pod deleted", "pod", key, "node", node, NULL);
}

static void fix_pods(struct scan_ctx *c)
{
    const char *key;
    json_t *v;
    json_object_foreach(c->pods, key, v) {
        const char *node = jstr(v, "node");
        bool never = json_is_true(json_object_get(v, "never"));
        if (json_object_get(v, "rv")) {
            force_delete(c->l, key, node, json_integer_value(json_object_get(v, "rv")));
            continue;
        }
        json_t *out = NULL;
        if (gs_store_mutate(c->l->store, key, fix_pod, (void *)node, &out, NULL) == 0) {
            pthread_mutex_lock(&c->l->mu);
            if (never) c->l->st.pods_failed++;
            else c->l->st.pods_recreated++;
            pthread_mutex_unlock(&c->l->mu);
            gs_log(GS_LOG_WARN, never ? "node lifecycle: pod failed" : "node lifecycle: pod re-created", "pod", key,
                   "node", node, NULL);
            char msg[400];
            snprintf(msg, sizeof msg, never ? "Pod failed: node %s stopped answering" :
                     "Pod re-created unbound: node %s stopped answering", node);
            const char *bound = jstr(json_object_get(out, "spec"), "nodeName"); /* not a pod left unchanged */
            const char *why = jstr(json_object_get(out, "status"), "reason");
            if (!bound || (why && !strcmp(why, "NodeLost")))
                lc_event(c->l, "Pod", out, "Warning", "NodeControllerEviction", msg);
        }
        json_decref(out);
    }
}

/*--- Pods bound to no Node (Kubernetes' PodGC) ---*/

struct orphan_ctx {
    struct scan_ctx *c;
    json_t *seen; /* missing node name -> first seen (s), this pass */
    json_t *due;  /* missing past the quarantine -> true */
};

static int orphan_pod(const char *key, json_t *pod, void *arg)
{
    (void)key;
    struct orphan_ctx *o = arg;
    const char *node = jstr(json_object_get(pod, "spec"), "nodeName");
    if (!node || json_object_get(o->c->exists, node) || json_object_get(o->seen, node)) return 0;
    const json_t *before = json_object_get(o->c->l->missing, node);
    double first = before ? json_real_value(before) : o->c->now;
    json_object_set_new(o->seen, node, json_real(first));
    /* Lost only after a quarantine: a node being re-registered (deleted and
     * created again) is not condemned. */
    if (o->c->now - first >= ORPHAN_QUARANTINE_S) json_object_set_new(o->due, node, json_true());
    return 0;
}

/* Every ORPHAN_PERIOD_S (listing every pod is why it runs rarely): nodes
 * whose Node object is gone while pods are still bound to them join the
 * lost set, and those pods are handled as a lost node's are. */
static void find_orphans(struct scan_ctx *c, int64_t *rv)
{
    struct gs_nodelc *l = c->l;
    if (c->now < l->next_orphan_s) return;
    l->next_orphan_s = c->now + ORPHAN_PERIOD_S;
    struct orphan_ctx o = {c, json_object(), json_object()};
    if (o.seen && o.due && gs_store_list(l->store, "pods/", orphan_pod, &o, rv) == 0) {
        json_decref(l->missing); /* nodes that came back, or lost their pods, are forgotten */
        l->missing = json_incref(o.seen);
        const char *name;
        json_t *v;
        json_object_foreach(o.due, name, v) {
            json_object_set_new(c->lost, name, json_true());
            pthread_mutex_lock(&l->mu);
            l->st.orphan_nodes++;
            pthread_mutex_unlock(&l->mu);
            gs_log(GS_LOG_WARN, "node lifecycle: pods bound to a node that does not exist", "node", name, NULL);
        }
    }
    json_decref(o.seen);
    json_decref(o.due);
}

void gs_nodelc_scan(struct gs_nodelc *l, double now_s)
{
    struct scan_ctx c = {l, now_s, json_object(), json_object(), json_object(), json_object(), json_object()};
    int64_t rv;
    char prefix[128];
    gs_api_key(gs_api_resource_lookup("leases"), GS_NODE_LEASE_NS, NULL, prefix, sizeof prefix);
    gs_store_list(l->store, prefix, lease_one, c.leases, &rv);
    gs_store_list(l->store, "nodes/", scan_node, &c, &rv);
    const char *key;
    json_t *v;
    json_object_foreach(c.changes, key, v) {
        struct node_arg na = {l, now_s, json_is_true(v), c.leases};
        json_t *out = NULL;
        if (gs_store_mutate(l->store, key, mark_node, &na, &out, NULL) == 0 && na.lost) {
            pthread_mutex_lock(&l->mu);
            l->st.not_ready++;
            pthread_mutex_unlock(&l->mu);
            gs_log(GS_LOG_WARN, "node lifecycle: node NotReady", "node", key, NULL);
            char msg[400];
            snprintf(msg, sizeof msg, "Node %s status is now: NodeNotReady", key + strlen("nodes/"));
            lc_event(l, "Node", out, "Normal", "NodeNotReady", msg);
        }
        json_decref(out);
    }
    find_orphans(&c, &rv);
    if (json_object_size(c.lost) && gs_store_list(l->store, "pods/", scan_pod, &c, &rv) == 0) fix_pods(&c);
    json_decref(c.exists);
    json_decref(c.pods);
    json_decref(c.lost);
    json_decref(c.changes);
    json_decref(c.leases);
}

/*--- Thread ---*/

static void *run(void *arg)
{
    struct gs_nodelc *l = arg;
    while (!atomic_load(&l->stop)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        gs_nodelc_scan(l, (double)ts.tv_sec + ts.tv_nsec / 1e9);
        for (int64_t t = 0; t < l->period_ms && !atomic_load(&l->stop); t += 50) usleep(50000);
    }
    return NULL;
}

int gs_nodelc_new(const struct gs_nodelc_opts *o, double start_s, struct gs_nodelc **out)
{
    struct gs_nodelc *l = calloc(1, sizeof *l);
    if (!l) return GS_ENOMEM;
    l->store = o->store;
    double grace = (double)o->grace_ms / 1000;
    const char *env = getenv("GPUSCHED_NODE_GRACE");
    if (grace <= 0 && env && atof(env) > 0) grace = atof(env);
    l->grace_s = grace > 0 ? grace : 40;
    l->period_ms = o->period_ms > 0 ? o->period_ms : 500;
    l->start_s = start_s;
    l->ev = (struct gs_event_source){o->events, "node-controller", NULL, 0}; /* events hook */
    l->missing = json_object();
    pthread_mutex_init(&l->mu, NULL);
    *out = l;
    return 0;
}

int gs_nodelc_start(const struct gs_nodelc_opts *o, struct gs_nodelc **out)
{
    struct gs_nodelc *l;
    int err = gs_nodelc_new(o, (double)time(NULL), &l);
    if (err) return err;
    if (pthread_create(&l->th, NULL, run, l)) {
        gs_nodelc_stop(l);
        return GS_ENOMEM;
    }
    l->started = true;
    *out = l;
    return 0;
}

void gs_nodelc_stop(struct gs_nodelc *l)
{
    if (!l) return;
    atomic_store(&l->stop, true);
    if (l->started) pthread_join(l->th, NULL);
    json_decref(l->missing);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

void gs_nodelc_stats(struct gs_nodelc *l, struct gs_nodelc_stats *out)
{
    pthread_mutex_lock(&l->mu);
    *out = l->st;
    pthread_mutex_unlock(&l->mu);
}
