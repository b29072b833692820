/*
 * nodelifecycle.c - nodes whose heartbeat stopped, and the taint-based
 * eviction of their pods; see nodelifecycle.h.
 *
 * Works through the source (source.h: the server's store in process), one atomic
 * read-modify-write per object, each re-checking its condition on the
 * current object: a node that came back, or a pod that finished or was
 * re-bound meanwhile, is left as it is. The scan is a plain poll: a few
 * hundred nodes cost microseconds, and pods are listed only while some
 * node carries a NoExecute taint of ours, some eviction is unsettled, or
 * some node is missing.
 *
 * A node's last sign of life is the later of its Lease's renewTime (the
 * agent renews it every heartbeat) and its Ready condition's
 * lastHeartbeatTime (written by agents without a lease, and rarely by those
 * with one).
 *
 * Nodes and node Leases are not listed per scan: the controller keeps what
 * a scan needs of each (struct node_sum: heartbeat, Ready=False, whether
 * its taints already say each verdict, our NoExecute taints; a Lease's
 * renewTime) from one list and then the change stream, as an informer
 * does, and lists again only when it fell behind the stream or the stream
 * failed. Listing 50,000 Nodes every period decoded every one of them twice
 * a second, more CPU than the whole create path at that size. A scan then
 * walks the summaries in memory; a node whose summary says it needs a
 * taint change is written by a read-modify-write that re-checks the stored
 * object, so a summary a little behind the store costs at most a no-op
 * write. The same stream says whether anything could have made an orphan
 * (below), so that check never falls behind the ring between its passes.
 *
 * Eviction times come from the taint's timeAdded, so a restarted server
 * evicts when the old one would have; an unsettled eviction is found again
 * from the pod's annotations. Time is wall time (RFC 3339 stamps in
 * objects written by other processes), read by the thread only.
 */
#include "loops/nodelifecycle.h"
#include "control/api.h"
#include "control/events.h" /* NodeNotReady, evictions */
#include "control/apiserver.h"
#include "core/object.h"
#include "control/resources.h"
#include "core/log.h"
#include "sched/strmap.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct gs_nodelc {
    struct gs_source *source;
    struct gs_event_source ev; /* events hook */
    double grace_s, start_s, lost_s;
    int64_t period_ms;
    pthread_t th;
    bool started;
    atomic_bool stop;
    pthread_mutex_t mu; /* stats */
    struct gs_nodelc_stats st;
    json_t *missing;       /* node name -> first scan (s) that found pods bound to it but no Node */
    double next_orphan_s;  /* next scan for such pods */
    size_t pending;        /* unsettled evictions seen by the last pod scan */
    bool listed;           /* pods were listed at least once */
    bool orphans_listed;   /* the pods were listed for orphans since the last relist */
    bool orphan_dirty;     /* the stream showed a change that could make an orphan since that list */
    struct gs__strmap nodes; /* node name (owned by the value) -> struct node_sum */
    json_t *leases;          /* node name -> its Lease's renewTime (s) */
    char lease_prefix[128];  /* the node Leases' store prefix */
    int64_t rv;              /* the change stream is followed from here */
    bool synced;             /* nodes and leases were listed and rv is their cursor */
};

/* What a scan needs of one Node (see the file's comment). */
struct node_sum {
    char *name;         /* owned; the map's key */
    double hb;          /* the Ready condition's lastHeartbeatTime (0: none) */
    bool ready_false;   /* the Ready condition's status is "False" */
    bool ok[3];         /* as_wanted(node, w) for each enum want */
    bool noexec[2];     /* carries our NoExecute taint: [0] unreachable, [1] not-ready */
    double added[2];    /* its timeAdded (0: none or malformed) */
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

/* t (wall seconds) as RFC 3339: the scan's own time, so a scan driven by a test stamps its time. */
static void time_text(double now, char *buf, size_t len)
{
    time_t t = (time_t)now;
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

static bool is_ours(const char *key)
{
    return key && (!strcmp(key, GS_TAINT_UNREACHABLE) || !strcmp(key, GS_TAINT_NOT_READY));
}

/* The lifecycle taint key the node carries (NULL: none). */
static const char *taint_key(const json_t *node)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(json_object_get(node, "spec"), "taints"), i, t)
        if (is_ours(jstr(t, "key"))) return jstr(t, "key");
    return NULL;
}

static bool has_taint(const json_t *node, const char *key, const char *effect)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(json_object_get(node, "spec"), "taints"), i, t)
        if (jstr(t, "key") && !strcmp(jstr(t, "key"), key) && jstr(t, "effect") && !strcmp(jstr(t, "effect"), effect))
            return true;
    return false;
}

static bool is_terminal(const json_t *pod)
{
    const char *phase = jstr(json_object_get(pod, "status"), "phase");
    return phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"));
}

static const char *ann(const json_t *pod, const char *key)
{
    return jstr(json_object_get(json_object_get(pod, "metadata"), "annotations"), key);
}

bool gs_nodelc_eviction_pending(const struct gs_labels *annotations)
{
    return gs_labels_get(annotations, GS_ANN_EVICTED_AT) && !gs_labels_get(annotations, GS_ANN_DEVICES_RELEASED);
}

bool gs_nodelc_eviction_pending_json(const json_t *pod)
{
    return ann(pod, GS_ANN_EVICTED_AT) && !ann(pod, GS_ANN_DEVICES_RELEASED);
}

/* Did the node confirm that the pod's processes stopped (condition ProcessesStopped=True)? */
static bool node_confirmed(const json_t *pod)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "conditions"), i, c)
        if (jstr(c, "type") && !strcmp(jstr(c, "type"), GS_COND_PROCESSES_STOPPED) && jstr(c, "status") &&
            !strcmp(jstr(c, "status"), "True"))
            return true;
    return false;
}

/*--- Node transitions ---*/

enum want { W_NONE, W_UNREACHABLE, W_NOT_READY };

struct node_arg {
    struct gs_nodelc *l;
    double now;
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

/* What the node's taints should say; *watched false for nodes without a heartbeat. */
static enum want wanted(const struct gs_nodelc *l, const json_t *node, const json_t *leases, double now, bool *watched)
{
    bool has_hb;
    double seen = last_seen(l, node, leases, &has_hb);
    *watched = has_hb;
    if (!has_hb) return W_NONE;
    if (now - seen > l->grace_s) return W_UNREACHABLE;
    json_t *rc = ready_cond(node);
    return rc && jstr(rc, "status") && !strcmp(jstr(rc, "status"), "False") ? W_NOT_READY : W_NONE;
}

/* wanted() from a summary: the same rule, nothing decoded. */
static enum want wanted_sum(const struct gs_nodelc *l, const struct node_sum *s, double now, bool *watched)
{
    double lease = json_real_value(json_object_get(l->leases, s->name)), hb = lease > s->hb ? lease : s->hb;
    *watched = hb > 0;
    if (!*watched) return W_NONE;
    if (now - (hb > l->start_s ? hb : l->start_s) > l->grace_s) return W_UNREACHABLE;
    return s->ready_false ? W_NOT_READY : W_NONE;
}

/* Does the node already look as w wants? */
static bool as_wanted(const json_t *node, enum want w)
{
    const char *have = taint_key(node);
    if (w == W_NONE) return !have;
    const char *key = w == W_UNREACHABLE ? GS_TAINT_UNREACHABLE : GS_TAINT_NOT_READY;
    const char *other = w == W_UNREACHABLE ? GS_TAINT_NOT_READY : GS_TAINT_UNREACHABLE;
    json_t *rc = ready_cond(node);
    bool unknown = rc && jstr(rc, "status") && !strcmp(jstr(rc, "status"), "Unknown");
    return has_taint(node, key, "NoSchedule") && has_taint(node, key, "NoExecute") &&
           !has_taint(node, other, "NoSchedule") && !has_taint(node, other, "NoExecute") &&
           (w != W_UNREACHABLE || !rc || unknown);
}

static int lease_one(const char *key, json_t *lease, void *arg)
{
    (void)key;
    const char *name = jstr(json_object_get(lease, "metadata"), "name");
    double t = parse_time(jstr(json_object_get(lease, "spec"), "renewTime"));
    if (name && t > 0) json_object_set_new(arg, name, json_real(t));
    else if (name) json_object_del(arg, name); /* a renewal without a time: no sign of life */
    return 0;
}

/*--- Nodes and Leases from the change stream ---*/

static void sum_free(struct node_sum *s)
{
    if (!s) return;
    free(s->name);
    free(s);
}

static void sums_clear(struct gs__strmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key) sum_free(m->slots[i].val);
    gs__strmap_free(m);
    gs__strmap_init(m);
}

/* The summary of node (named name) into m, replacing an older one. 0 or GS_ENOMEM. */
static int sum_put(struct gs__strmap *m, const char *name, const json_t *node)
{
    struct node_sum *s = gs__strmap_get(m, name);
    bool fresh = !s;
    if (fresh && (!(s = calloc(1, sizeof *s)) || !(s->name = strdup(name)) || gs__strmap_put(m, s->name, s))) {
        sum_free(s);
        return GS_ENOMEM;
    }
    char *keep = s->name;
    *s = (struct node_sum){.name = keep};
    json_t *rc = ready_cond(node);
    s->hb = parse_time(rc ? jstr(rc, "lastHeartbeatTime") : NULL);
    s->ready_false = rc && jstr(rc, "status") && !strcmp(jstr(rc, "status"), "False");
    for (int w = W_NONE; w <= W_NOT_READY; w++) s->ok[w] = as_wanted(node, (enum want)w);
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(json_object_get(node, "spec"), "taints"), i, t) {
        const char *key = jstr(t, "key"), *eff = jstr(t, "effect");
        if (!is_ours(key) || !eff || strcmp(eff, "NoExecute")) continue;
        int k = !strcmp(key, GS_TAINT_NOT_READY); /* the last of a key wins, as note_noexec's map */
        s->noexec[k] = true;
        s->added[k] = parse_time(jstr(t, "timeAdded"));
    }
    return 0;
}

static void sum_del(struct gs__strmap *m, const char *name)
{
    sum_free(gs__strmap_del(m, name));
}

static bool node_exists(const struct gs_nodelc *l, const char *name)
{
    return gs__strmap_get(&l->nodes, name) != NULL;
}

static int list_node(const char *key, json_t *node, void *arg)
{
    return sum_put(arg, key + strlen("nodes/"), node);
}

/* Nodes and Leases listed into fresh maps (the old ones stay when a list
 * fails); the stream is then followed from the older list's cursor
 * (replaying a change both saw leaves the newer state once caught up). */
static void relist(struct gs_nodelc *l)
{
    struct gs__strmap nodes;
    gs__strmap_init(&nodes);
    json_t *leases = json_object();
    int64_t rv_l = 0, rv_n = 0;
    int err = leases ? gs_source_list(l->source, l->lease_prefix, lease_one, leases, &rv_l) : GS_ENOMEM;
    if (err == GS_ENOENT) err = 0, rv_l = INT64_MAX;
    if (!err) err = gs_source_list(l->source, "nodes/", list_node, &nodes, &rv_n);
    if (err) {
        sums_clear(&nodes);
        json_decref(leases);
        return;
    }
    sums_clear(&l->nodes);
    l->nodes = nodes;
    json_decref(l->leases);
    l->leases = leases;
    l->rv = rv_l < rv_n ? rv_l : rv_n;
    l->synced = true;
    l->orphan_dirty = true; /* what happened to pods meanwhile is unknown */
}

static bool may_orphan(const struct gs_nodelc *l, const struct gs_store_event *ev);

static void apply_event(struct gs_nodelc *l, const struct gs_store_event *ev)
{
    size_t lp = strlen(l->lease_prefix);
    bool node = !strncmp(ev->key, "nodes/", 6), lease = !strncmp(ev->key, l->lease_prefix, lp);
    if (!node && !lease) {
        if (!l->orphan_dirty && may_orphan(l, ev)) l->orphan_dirty = true;
        return;
    }
    if (node && ev->type == GS_STORE_DELETED) l->orphan_dirty = true;
    const char *name = ev->key + (node ? 6 : lp);
    if (ev->type == GS_STORE_DELETED) {
        if (node) sum_del(&l->nodes, name);
        else json_object_del(l->leases, name);
        return;
    }
    json_t *doc = ev->value ? json_loads(ev->value, 0, NULL) : NULL;
    if (!doc) { /* cannot happen for a stored text; look at everything again */
        l->synced = false;
        return;
    }
    if (node && sum_put(&l->nodes, name, doc)) l->synced = false;
    if (lease) lease_one(ev->key, doc, l->leases);
    json_decref(doc);
}

/* Catches up with the change stream (or lists again when it cannot). */
static void follow(struct gs_nodelc *l)
{
    while (l->synced) {
        struct gs_store_event *evs = NULL;
        size_t n = 0;
        int err = gs_source_events(l->source, &l->rv, NULL, 0, NULL, &evs, &n);
        for (size_t i = 0; !err && i < n && l->synced; i++) apply_event(l, &evs[i]);
        gs_store_events_free(evs, n);
        if (err) l->synced = false;
        else if (!n) return;
    }
    relist(l);
}

static int mark_node(json_t *cur, json_t **out, void *arg)
{
    struct node_arg *na = arg;
    bool watched;
    if (!cur) return GS_STORE_UNCHANGED;
    enum want w = wanted(na->l, cur, na->leases, na->now, &watched);
    if (!watched || as_wanted(cur, w)) return GS_STORE_UNCHANGED;
    json_t *n = json_deep_copy(cur);
    json_t *spec = json_object_get(n, "spec");
    if (!json_is_object(spec)) json_object_set_new(n, "spec", spec = json_object());
    json_t *taints = json_object_get(spec, "taints"), *keep = json_array(), *t;
    const char *key = w == W_UNREACHABLE ? GS_TAINT_UNREACHABLE : w == W_NOT_READY ? GS_TAINT_NOT_READY : NULL;
    size_t i;
    /* Ours of the wanted key stay as they are (their timeAdded counts); the others go. */
    json_array_foreach(taints, i, t)
        if (!is_ours(jstr(t, "key")) || (key && !strcmp(jstr(t, "key"), key))) json_array_append(keep, t);
    json_object_set_new(spec, "taints", keep);
    char ts[32];
    time_text(na->now, ts, sizeof ts);
    const char *effects[2] = {"NoSchedule", "NoExecute"};
    for (int e = 0; key && e < 2; e++)
        if (!has_taint(n, key, effects[e]))
            json_array_append_new(keep, json_pack("{s:s,s:s,s:s}", "key", key, "effect", effects[e], "timeAdded", ts));
    json_t *c = ready_cond(n);
    if (w == W_UNREACHABLE && c) {
        json_object_set_new(c, "status", json_string("Unknown"));
        json_object_set_new(c, "reason", json_string("NodeStatusUnknown"));
        json_object_set_new(c, "message", json_string("the node agent stopped posting its heartbeat"));
        json_object_set_new(c, "lastTransitionTime", json_string(ts));
    }
    *out = n;
    return 0;
}

/*--- Pods ---*/

/* Re-creates a pod that restarts (or fails a Never pod) whose node can no
 * longer run it: a lost node's, or an evicted pod's once settled. */
static int fix_pod(json_t *cur, json_t **out, void *arg)
{
    const char *node = arg;
    if (!cur) return GS_STORE_UNCHANGED;
    const char *bound = jstr(json_object_get(cur, "spec"), "nodeName");
    if (!bound || strcmp(bound, node) || is_terminal(cur)) return GS_STORE_UNCHANGED;
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
    json_t *an = json_object_get(md, "annotations");
    if (!json_is_object(an)) json_object_set_new(md, "annotations", an = json_object());
    json_object_set(an, "gpusched.io/recreated-from", json_object_get(md, "uid"));
    json_object_set_new(an, "gpusched.io/recreated-reason", json_string(msg));
    json_object_del(an, "gpusched.io/devices");
    json_object_del(an, GS_ANN_EVICTED_AT);
    json_object_del(an, GS_ANN_DEVICES_RELEASED);
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

struct evict_arg {
    const char *node;
    const char *uid;
    double now;
};

/* The taint manager's eviction: annotation, DisruptionTarget, and Failed
 * (NodeLost) for a pod that never restarts. Its devices stay held. */
static int evict_pod(json_t *cur, json_t **out, void *arg)
{
    struct evict_arg *ea = arg;
    if (!cur) return GS_STORE_UNCHANGED;
    json_t *md = json_object_get(cur, "metadata");
    const char *bound = jstr(json_object_get(cur, "spec"), "nodeName"), *uid = jstr(md, "uid");
    if (!bound || strcmp(bound, ea->node) || !uid || strcmp(uid, ea->uid) || is_terminal(cur) ||
        ann(cur, GS_ANN_EVICTED_AT))
        return GS_STORE_UNCHANGED;
    json_t *n = json_deep_copy(cur);
    md = json_object_get(n, "metadata");
    json_t *an = json_object_get(md, "annotations");
    if (!json_is_object(an)) json_object_set_new(md, "annotations", an = json_object());
    char ts[32], msg[300];
    time_text(ea->now, ts, sizeof ts);
    json_object_set_new(an, GS_ANN_EVICTED_AT, json_string(ts));
    gs__pod_set_condition(n, "DisruptionTarget", "True", "DeletionByTaintManager",
                          "Taint manager: deleting due to NoExecute taint");
    const char *policy = jstr(json_object_get(n, "spec"), "restartPolicy");
    if (policy && !strcmp(policy, "Never") && !jstr(md, "deletionTimestamp")) {
        json_t *st = json_object_get(n, "status");
        snprintf(msg, sizeof msg, "node %s stopped answering and the pod's toleration of it ran out", ea->node);
        json_object_set_new(st, "phase", json_string("Failed"));
        json_object_set_new(st, "reason", json_string("NodeLost"));
        json_object_set_new(st, "message", json_string(msg));
    }
    *out = n;
    return 0;
}

/* Settles an eviction: the devices are released (and a pod that restarts is
 * re-created by fix_pod afterwards). why says how. */
struct settle_arg {
    const char *why;
    double now;
};

static int settle_pod(json_t *cur, json_t **out, void *arg)
{
    const struct settle_arg *sa = arg;
    if (!cur || !gs_nodelc_eviction_pending_json(cur)) return GS_STORE_UNCHANGED;
    json_t *n = json_deep_copy(cur);
    json_t *an = json_object_get(json_object_get(n, "metadata"), "annotations");
    char v[128], ts[32];
    time_text(sa->now, ts, sizeof ts);
    snprintf(v, sizeof v, "%s %s", ts, sa->why);
    json_object_set_new(an, GS_ANN_DEVICES_RELEASED, json_string(v));
    *out = n;
    return 0;
}

enum action { A_FIX, A_EVICT, A_CONFIRMED, A_LOST };

struct scan_ctx {
    struct gs_nodelc *l;
    double now;
    json_t *lost;    /* node name -> true: missing Node (PodGC) */
    json_t *changes; /* node key -> true */
    json_t *noexec;  /* node name -> {taint key -> timeAdded (s)} */
    json_t *pods;    /* pod key -> {node, uid, action, rv (terminating), never} */
    json_t *leases;  /* node name -> renewTime (borrowed: the controller's) */
    size_t pending;
};

/* Records the NoExecute taints of ours on node (name) with the time each was added. */
static void note_noexec(struct scan_ctx *c, const char *name, const json_t *node)
{
    size_t i;
    json_t *t, *m = NULL;
    json_array_foreach(json_object_get(json_object_get(node, "spec"), "taints"), i, t) {
        const char *key = jstr(t, "key"), *eff = jstr(t, "effect");
        if (!is_ours(key) || !eff || strcmp(eff, "NoExecute")) continue;
        double added = parse_time(jstr(t, "timeAdded"));
        if (added <= 0) added = c->l->start_s; /* no stamp: counted from this controller's start */
        if (!m) json_object_set_new(c->noexec, name, m = json_object());
        json_object_set_new(m, key, json_real(added));
    }
}

static void scan_node(struct scan_ctx *c, const struct node_sum *s)
{
    bool watched;
    enum want w = wanted_sum(c->l, s, c->now, &watched);
    if (watched && !s->ok[w]) {
        char key[GS__KEY_MAX + 16];
        snprintf(key, sizeof key, "nodes/%s", s->name);
        json_object_set_new(c->changes, key, json_true());
        return;
    }
    static const char *const keys[2] = {GS_TAINT_UNREACHABLE, GS_TAINT_NOT_READY};
    json_t *m = NULL; /* note_noexec's record, from the summary */
    for (int k = 0; k < 2; k++) {
        if (!s->noexec[k]) continue;
        if (!m) json_object_set_new(c->noexec, s->name, m = json_object());
        json_object_set_new(m, keys[k], json_real(s->added[k] > 0 ? s->added[k] : c->l->start_s));
    }
}

/* When the pod's tolerations of taints (key -> timeAdded) run out: +inf
 * when it tolerates every one of them forever. Kubernetes' rule: the
 * smallest tolerationSeconds of the matching tolerations, none meaning
 * forever, 0 or less meaning at once; a taint not tolerated at all, at once. */
static double evict_at(const json_t *pod, const json_t *taints)
{
    struct gs_object *o = NULL;
    struct gs_diags d = {0};
    double at = INFINITY;
    int err = gs_object_decode((json_t *)pod, &o, &d);
    gs_diags_free(&d);
    const struct gs_pod *p = !err && o && o->kind == GS_KIND_POD ? o->u.pod : NULL;
    const char *key;
    json_t *added;
    json_object_foreach((json_t *)taints, key, added) {
        struct gs_taint t = {.key = (char *)key, .effect = GS_EFFECT_NOEXECUTE};
        bool tolerated = false;
        double secs = INFINITY;
        for (size_t i = 0; p && i < p->ntolerations; i++) {
            if (!gs_toleration_tolerates(&p->tolerations[i], &t)) continue;
            tolerated = true;
            /* One without seconds (forever) does not lift the bound of one with them. */
            if (p->tolerations[i].has_seconds && (double)p->tolerations[i].toleration_seconds < secs)
                secs = (double)p->tolerations[i].toleration_seconds;
        }
        double due = !tolerated ? 0 : secs < INFINITY ? json_real_value(added) + (secs > 0 ? secs : 0) : INFINITY;
        if (due < at) at = due;
    }
    gs_object_free(o);
    return at;
}

static void add_action(struct scan_ctx *c, const char *key, const json_t *pod, const char *node, enum action a)
{
    json_t *md = json_object_get(pod, "metadata");
    const char *policy = jstr(json_object_get(pod, "spec"), "restartPolicy");
    json_t *v = json_pack("{s:s,s:s,s:i,s:b}", "node", node, "uid", jstr(md, "uid") ? jstr(md, "uid") : "", "action",
                          (int)a, "never", policy && !strcmp(policy, "Never"));
    /* Being deleted: deleted once its node cannot or need not confirm (unless finalizers hold it). */
    if (jstr(md, "deletionTimestamp") && !json_array_size(json_object_get(md, "finalizers")))
        json_object_set_new(v, "rv", json_integer(gs_store_obj_rv(pod)));
    json_object_set_new(c->pods, key, v);
}

/* Decides, read-only (mutating inside a list is not allowed), what each pod needs. */
static int scan_pod(const char *key, json_t *pod, void *arg)
{
    struct scan_ctx *c = arg;
    const char *node = jstr(json_object_get(pod, "spec"), "nodeName");
    if (!node) return 0;
    if (gs_nodelc_eviction_pending_json(pod)) {
        double at = parse_time(ann(pod, GS_ANN_EVICTED_AT));
        if (node_confirmed(pod)) add_action(c, key, pod, node, A_CONFIRMED);
        else if (!node_exists(c->l, node) || c->now - at >= c->l->lost_s) add_action(c, key, pod, node, A_LOST);
        else c->pending++;
        return 0;
    }
    if (is_terminal(pod)) return 0;
    if (ann(pod, GS_ANN_EVICTED_AT)) { /* settled, not yet re-created (the write failed): again */
        add_action(c, key, pod, node, A_FIX);
        return 0;
    }
    if (json_object_get(c->lost, node)) {
        add_action(c, key, pod, node, A_FIX);
        return 0;
    }
    json_t *taints = json_object_get(c->noexec, node);
    if (taints && c->now >= evict_at(pod, taints)) add_action(c, key, pod, node, A_EVICT);
    return 0;
}

static void count(struct gs_nodelc *l, uint64_t *field)
{
    pthread_mutex_lock(&l->mu);
    (*field)++;
    pthread_mutex_unlock(&l->mu);
}

/* An Event from "node-controller" on obj (the object's latest state). */
static void lc_event(struct gs_nodelc *l, const char *kind, const json_t *obj, const char *type, const char *reason,
                     const char *fmt, const char *arg)
{
    const json_t *md = json_object_get(obj, "metadata");
    if (!jstr(md, "name")) return;
    struct gs_event_ref ref = {.kind = kind, .ns = jstr(md, "namespace"), .name = jstr(md, "name"),
                               .uid = jstr(md, "uid")};
    char msg[400];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    gs_event_record(&l->ev, &ref, type, reason, reason, "%s", msg);
}

static void force_delete(struct gs_nodelc *l, const char *key, const char *uid, const char *node, int64_t rv)
{
    json_t *old = NULL;
    /* uid and version as preconditions: changed meanwhile, the next scan looks again */
    if (gs_source_remove(l->source, key, uid && *uid ? uid : NULL, rv, &old)) return;
    count(l, &l->st.pods_deleted);
    gs_log(GS_LOG_WARN, "node lifecycle: terminating pod deleted", "pod", key, "node", node, NULL);
    lc_event(l, "Pod", old, "Normal", "NodeControllerEviction", "Deleting terminating pod: node %s cannot confirm it stopped",
             node);
    json_decref(old);
}

/* out (may be NULL): the object as written, the caller's to release. */
static int mutate(struct gs_nodelc *l, const char *key, gs_store_mutate_fn fn, void *arg, json_t **out)
{
    json_t *o = NULL;
    int err = gs_source_mutate(l->source, key, NULL, fn, arg, &o, NULL);
    if (out && !err) *out = o;
    else json_decref(o);
    return err;
}

static void recreate(struct gs_nodelc *l, const char *key, const char *node, bool never)
{
    json_t *out = NULL;
    if (mutate(l, key, fix_pod, (void *)node, &out)) return;
    count(l, never ? &l->st.pods_failed : &l->st.pods_recreated);
    gs_log(GS_LOG_WARN, never ? "node lifecycle: pod failed" : "node lifecycle: pod re-created", "pod", key, "node",
           node, NULL);
    lc_event(l, "Pod", out, "Warning", "NodeControllerEviction",
             never ? "Pod failed: node %s stopped answering" : "Pod re-created unbound: node %s stopped answering", node);
    json_decref(out);
}

static void act(struct scan_ctx *c, const char *key, const json_t *v)
{
    struct gs_nodelc *l = c->l;
    const char *node = jstr(v, "node");
    bool never = json_is_true(json_object_get(v, "never"));
    json_t *rv = json_object_get(v, "rv");
    enum action a = (enum action)json_integer_value(json_object_get(v, "action"));
    switch (a) {
    case A_FIX:
        if (rv) force_delete(l, key, jstr(v, "uid"), node, json_integer_value(rv));
        else recreate(l, key, node, never);
        return;
    case A_EVICT: {
        struct evict_arg ea = {node, jstr(v, "uid"), c->now};
        json_t *out = NULL;
        if (mutate(l, key, evict_pod, &ea, &out)) return;
        lc_event(l, "Pod", out, "Normal", "TaintManagerEviction", "Marking for deletion Pod %s", key + strlen("pods/"));
        json_decref(out);
        count(l, &l->st.pods_evicted);
        if (never && !rv) count(l, &l->st.pods_failed); /* a terminating pod is not failed */
        c->pending++;
        gs_log(GS_LOG_WARN, "node lifecycle: pod evicted, its devices held until the node confirms or is lost", "pod",
               key, "node", node, NULL);
        return;
    }
    case A_CONFIRMED:
    case A_LOST:
        if (rv) { /* being deleted: nothing to re-create, the object goes */
            force_delete(l, key, jstr(v, "uid"), node, json_integer_value(rv));
        } else {
            struct settle_arg sa = {a == A_CONFIRMED ? "node confirmed the processes stopped" : "node lost", c->now};
            if (mutate(l, key, settle_pod, &sa, NULL)) return;
        }
        count(l, a == A_CONFIRMED ? &l->st.confirmed : &l->st.declared_lost);
        gs_log(GS_LOG_WARN, "node lifecycle: eviction settled, devices released", "pod", key, "node", node, "how",
               a == A_CONFIRMED ? "confirmed" : "lost", NULL);
        if (!rv && !never) recreate(l, key, node, false);
        return;
    }
}

static void fix_pods(struct scan_ctx *c)
{
    const char *key;
    json_t *v;
    json_object_foreach(c->pods, key, v) act(c, key, v);
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
    if (!node || node_exists(o->c->l, node) || json_object_get(o->seen, node)) return 0;
    const json_t *before = json_object_get(o->c->l->missing, node);
    double first = before ? json_real_value(before) : o->c->now;
    json_object_set_new(o->seen, node, json_real(first));
    /* Lost only after a quarantine: a node being re-registered (deleted and
     * created again) is not condemned. */
    if (o->c->now - first >= ORPHAN_QUARANTINE_S) json_object_set_new(o->due, node, json_true());
    return 0;
}

/* Whether a change could have made an orphan: a Node deleted, or a pod
 * written bound to a node that does not exist now (in the summaries, which
 * follow the same stream in order). Names are DNS labels; anything
 * unexpected counts as a change. */
static bool may_orphan(const struct gs_nodelc *l, const struct gs_store_event *ev)
{
    if (!strncmp(ev->key, "nodes/", 6)) return ev->type == GS_STORE_DELETED;
    if (strncmp(ev->key, "pods/", 5) || ev->type == GS_STORE_DELETED || !ev->value) return false;
    for (const char *p = ev->value; (p = strstr(p, "\"nodeName\"")); ) { /* every one: an annotation may say it too */
        p += strlen("\"nodeName\"");
        while (*p == ' ' || *p == ':') p++;
        if (*p++ != '"') return true;
        const char *end = strchr(p, '"');
        char name[256];
        if (!end || end - p >= (long)sizeof name || memchr(p, '\\', (size_t)(end - p))) return true;
        memcpy(name, p, (size_t)(end - p));
        name[end - p] = 0;
        if (!node_exists(l, name)) return true;
        p = end + 1;
    }
    return false;
}

/* Whether the pods need no new look: the last list found no node missing
 * and the change stream since (followed every scan, so it never falls
 * behind the ring between two passes) shows nothing that could make an
 * orphan. Listing 500,000 pods every ORPHAN_PERIOD_S was several seconds of
 * CPU each time. */
static bool orphans_unchanged(struct scan_ctx *c)
{
    struct gs_nodelc *l = c->l;
    return l->orphans_listed && !json_object_size(l->missing) && !l->orphan_dirty;
}

/* Every ORPHAN_PERIOD_S (listing every pod is why it runs rarely): nodes
 * whose Node object is gone while pods are still bound to them join the
 * lost set, and those pods are handled as a lost node's are. */
static void find_orphans(struct scan_ctx *c, int64_t *rv)
{
    struct gs_nodelc *l = c->l;
    if (c->now < l->next_orphan_s) return;
    l->next_orphan_s = c->now + ORPHAN_PERIOD_S;
    if (orphans_unchanged(c)) return;
    struct orphan_ctx o = {c, json_object(), json_object()};
    bool dirty = l->orphan_dirty;
    l->orphan_dirty = false; /* a change after this list's version is seen by the next follow() */
    if (o.seen && o.due && gs_source_list(l->source, "pods/", orphan_pod, &o, rv) == 0) {
        l->orphans_listed = true;
        dirty = false;
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
    if (dirty) l->orphan_dirty = true; /* the list failed: again next time */
    json_decref(o.seen);
    json_decref(o.due);
}

void gs_nodelc_scan(struct gs_nodelc *l, double now_s)
{
    follow(l);
    struct scan_ctx c = {l, now_s, json_object(), json_object(), json_object(), json_object(), l->leases, 0};
    int64_t rv;
    for (size_t i = 0; i < l->nodes.cap; i++)
        if (l->nodes.slots[i].key) scan_node(&c, l->nodes.slots[i].val);
    const char *key;
    json_t *v;
    json_object_foreach(c.changes, key, v) {
        struct node_arg na = {l, now_s, c.leases};
        json_t *out = NULL;
        if (gs_source_mutate(l->source, key, NULL, mark_node, &na, &out, NULL) == 0 && out) {
            const char *name = jstr(json_object_get(out, "metadata"), "name"), *tk = taint_key(out);
            if (name) note_noexec(&c, name, out);
            if (tk && !strcmp(tk, GS_TAINT_UNREACHABLE)) {
                count(l, &l->st.not_ready);
                lc_event(l, "Node", out, "Normal", "NodeNotReady", "Node %s status is now: NodeNotReady", name);
            }
            gs_log(GS_LOG_WARN, tk ? "node lifecycle: node tainted" : "node lifecycle: node taints lifted", "node", key,
                   "taint", tk ? tk : "", NULL);
        }
        json_decref(out);
    }
    find_orphans(&c, &rv);
    /* Pods are listed only when some of them may need something. */
    if ((json_object_size(c.lost) || json_object_size(c.noexec) || l->pending || !l->listed) &&
        gs_source_list(l->source, "pods/", scan_pod, &c, &rv) == 0) {
        l->listed = true;
        fix_pods(&c);
        l->pending = c.pending;
    }
    json_decref(c.pods);
    json_decref(c.lost);
    json_decref(c.changes);
    json_decref(c.noexec);
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
    l->source = o->source;
    double grace = (double)o->grace_ms / 1000;
    const char *env = getenv("GPUSCHED_NODE_GRACE");
    if (grace <= 0 && env && atof(env) > 0) grace = atof(env);
    l->grace_s = grace > 0 ? grace : 40;
    l->period_ms = o->period_ms > 0 ? o->period_ms : 500;
    l->lost_s = o->lost_ms > 0 ? (double)o->lost_ms / 1000 : GS_NODE_LOST_DEFAULT_S;
    l->ev = (struct gs_event_source){o->events, "node-controller", NULL, 0}; /* events hook */
    l->start_s = start_s;
    l->missing = json_object();
    l->leases = json_object();
    gs__strmap_init(&l->nodes);
    gs_api_key(gs_api_resource_lookup("leases"), GS_NODE_LEASE_NS, NULL, l->lease_prefix, sizeof l->lease_prefix);
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
    json_decref(l->leases);
    sums_clear(&l->nodes);
    gs__strmap_free(&l->nodes);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

void gs_nodelc_stats(struct gs_nodelc *l, struct gs_nodelc_stats *out)
{
    pthread_mutex_lock(&l->mu);
    *out = l->st;
    pthread_mutex_unlock(&l->mu);
}
