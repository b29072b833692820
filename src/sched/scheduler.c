/*
 * scheduler.c - queue + framework + cache in one loop; see scheduler.h.
 *
 * The driver owns the framework and the queue; the cache is the caller's, so
 * a simulator can inspect it between cycles. Pods waiting at Permit leave the
 * queue's in-flight state only when the framework reports them: bound (done)
 * or rejected (requeued as unschedulable).
 *
 * Plugins learn of pods and PodGroups through the framework's events
 * (on_pod, on_podgroup), so the driver remembers every pod it was given by
 * key to report its departure. Preemption evicts through the handle's evict
 * callback: the victim leaves the cache and goes back to the queue, like a
 * pod its controller recreates. A pod that got a nominated node from
 * PostFilter is retried after backoff rather than parked as unschedulable:
 * the evictions it caused happened before it was requeued, so no later
 * event would wake it.
 *
 * Queueing hints. A pod that fit nowhere is parked until an event that could
 * change the answer of whoever rejected it (kube's EventsToRegister): the
 * union over the plugins in its diagnosis, from the table below. A node
 * selector or a taint is only helped by a node change, not by a pod freeing
 * GPUs; a plugin the table does not know waits for every event. Gang members
 * also wait for their siblings and their PodGroup. A pod only
 * InterPodAffinity rejected also waits for pods that get a node or leave
 * one, but is woken by such an event only when that pod concerns its terms
 * (its queueing hint, sched/affinity_hint.h); an event that names no pod
 * wakes it as before.
 */
#include "sched/scheduler.h"

#include "sched/affinity_hint.h"
#include "sched/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Events that can make a pod that fit nowhere fit somewhere. */
#define RETRY_EVENTS (GS_EV_NODE_ADDED | GS_EV_NODE_UPDATED | GS_EV_POD_DELETED | GS_EV_DEVICE_FREED)
#define NODE_EVENTS (GS_EV_NODE_ADDED | GS_EV_NODE_UPDATED)
#define GANG_EVENTS (GS_EV_POD_ADDED | GS_EV_PODGROUP)

/* Which events can undo a plugin's rejection. */
static const struct {
    const char *plugin;
    unsigned events;
} hints[] = {
    {"NodeUnschedulable", NODE_EVENTS},
    {"NodeAffinity", NODE_EVENTS},
    {"TaintToleration", NODE_EVENTS},
    {"GpuModel", NODE_EVENTS},
    {"NodeResourcesFit", RETRY_EVENTS},
    {"GpuShare", RETRY_EVENTS},
    {"NodeResourceTopology", RETRY_EVENTS},
    {"Coscheduling", RETRY_EVENTS | GANG_EVENTS},
    /* kube's InterPodAffinity: Pod add/delete and Node add/label events; the
     * pod events go through its hint (AFFINITY_CHECKED). */
    {"InterPodAffinity", NODE_EVENTS | GS_EV_POD_DELETED | GS_EV_POD_BOUND},
};

/* Events that wake a pod rejected by InterPodAffinity only when the pod they
 * name concerns its terms (sched/affinity_hint.h). */
#define AFFINITY_CHECKED (GS_EV_POD_DELETED | GS_EV_POD_BOUND)

static unsigned hint_events(const char *plugin)
{
    for (size_t i = 0; plugin && i < sizeof hints / sizeof hints[0]; i++)
        if (!strcmp(hints[i].plugin, plugin)) return hints[i].events;
    return GS_EV_ALL;
}

/* The events a pod r rejected waits for; *checked: those of them that only
 * InterPodAffinity asked for (they go through its hint). */
static unsigned requeue_events(const struct gs_schedule_result *r, const struct gs_pod *pod, unsigned *checked)
{
    unsigned ev = 0, others = 0;
    bool affinity = false;
    if (r->feasible_nodes > 0) ev = GS_EV_ALL; /* it fit a node and failed later (Reserve, Permit) */
    else if (r->diag.prefilter.code != GS_SUCCESS) ev = hint_events(r->diag.prefilter.plugin);
    else if (!r->diag.n) ev = NODE_EVENTS; /* no node at all */
    others = ev;
    for (size_t i = 0; ev != GS_EV_ALL && i < r->diag.n; i++) {
        const char *name = r->diag.entries[i].plugin ? r->diag.entries[i].plugin->name : NULL;
        unsigned e = name ? hint_events(name) : NODE_EVENTS;
        ev |= e;
        if (name && !strcmp(name, "InterPodAffinity")) affinity = true;
        else others |= e;
    }
    if (pod->pod_group) ev |= GANG_EVENTS, others |= GANG_EVENTS;
    *checked = affinity && ev != GS_EV_ALL ? AFFINITY_CHECKED & ~others : 0;
    return ev;
}

/* The queue's hint: InterPodAffinity's, on the scheduler's cache. */
static bool affinity_hint(void *ctx, const struct gs_pod *waiting, const struct gs_pod *pod, bool arrived)
{
    const struct gs_cache *c = ctx;
    return gs_affinity_pod_event_helps(c, waiting, pod, arrived);
}

struct gs_scheduler {
    const struct gs_clock *clock;
    struct gs_cache *cache;
    struct gs_sched_config defaults; /* used when no profile is given */
    struct gs_framework *fw;
    struct gs_sched_queue *q;
    int64_t ttl;
    char reason[1024];
    int bound_in_tick;
    struct gs_scheduler_hooks hooks;
    struct gs__strmap pods; /* key -> pod, every pod added and not deleted */
    int64_t evictions;
};

static int evict(void *ctx, const struct gs_pod *victim, const struct gs_pod *preemptor)
{
    struct gs_scheduler *s = ctx;
    char key[GS__KEY_MAX];
    gs__pod_key(victim, key, sizeof key);
    const struct gs_assignment *a = gs_cache_pod_assignment(s->cache, key);
    if (!a) return GS_ENOENT;
    if (s->hooks.evicted) s->hooks.evicted(s->hooks.ctx, victim, preemptor, a);
    gs_cache_remove_pod(s->cache, key);
    s->evictions++;
    gs_sched_queue_add(s->q, victim);
    gs_sched_queue_on_pod_event(s->q, GS_EV_POD_DELETED, victim, false);
    return 0;
}

static bool queue_less(void *ctx, const struct gs_queued_pod *a, const struct gs_queued_pod *b)
{
    return gs_framework_less(ctx, a, b);
}

static void activate(void *ctx, const struct gs_pod *pod)
{
    struct gs_scheduler *s = ctx;
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    gs_sched_queue_reactivate(s->q, pod, key); /* delete + add in place; not queued: left alone */
}

static void activate_many(void *ctx, const struct gs_pod *const *pods, size_t n)
{
    struct gs_scheduler *s = ctx;
    gs_sched_queue_reactivate_many(s->q, pods, n); /* as activate on each, in order */
}

int gs_scheduler_new(const struct gs_clock *clock, struct gs_cache *cache, const struct gs_scheduler_opts *o,
                     struct gs_scheduler **out, struct gs_diags *d)
{
    *out = NULL;
    struct gs_scheduler *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->clock = clock;
    s->cache = cache;
    s->ttl = o ? o->assumed_ttl_ns : 0;
    if (o) s->hooks = o->hooks;
    gs__strmap_init(&s->pods);
    const struct gs_profile *p = o ? o->profile : NULL;
    int err = 0;
    if (!p) {
        err = gs_sched_config_default(&s->defaults);
        p = err ? NULL : &s->defaults.profiles[0];
    }
    struct gs_handle h = {.clock = clock, .cache = cache, .seed = o ? o->seed : 0, .evict = evict, .evict_ctx = s,
                          .activate = activate, .activate_many = activate_many};
    if (!err) err = gs_framework_new(p, &h, &s->fw, d);
    if (!err) {
        s->q = gs_sched_queue_new(clock, o ? &o->queue : NULL, queue_less, s->fw);
        if (!s->q) err = GS_ENOMEM;
        else gs_sched_queue_set_hint(s->q, affinity_hint, cache);
    }
    if (err) {
        gs_scheduler_free(s);
        return err;
    }
    *out = s;
    return 0;
}

void gs_scheduler_free(struct gs_scheduler *s)
{
    if (!s) return;
    gs_sched_queue_free(s->q);
    gs_framework_free(s->fw);
    gs_sched_config_free(&s->defaults);
    for (size_t i = 0; i < s->pods.cap; i++) free((char *)s->pods.slots[i].key);
    gs__strmap_free(&s->pods);
    free(s);
}

struct gs_framework *gs_scheduler_framework(struct gs_scheduler *s) { return s->fw; }
struct gs_sched_queue *gs_scheduler_queue(struct gs_scheduler *s) { return s->q; }

int gs_scheduler_add_pod(struct gs_scheduler *s, const struct gs_pod *pod)
{
    int err = gs_sched_queue_add(s->q, pod);
    if (err) return err;
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    if (!gs__strmap_get(&s->pods, key)) {
        char *dup = strdup(key);
        if (!dup || gs__strmap_put(&s->pods, dup, (void *)pod) != 0) {
            free(dup);
            gs_sched_queue_delete(s->q, key);
            return GS_ENOMEM;
        }
    }
    gs_framework_notify_pod(s->fw, pod, true);
    gs_sched_queue_on_event(s->q, GS_EV_POD_ADDED);
    return 0;
}

/* The pod leaves for good: plugins hear of it, the driver forgets it. */
static void forget_pod(struct gs_scheduler *s, const char *pod_key)
{
    const struct gs_pod *pod = gs__strmap_get(&s->pods, pod_key);
    if (!pod) return;
    for (size_t i = 0; i < s->pods.cap; i++) {
        if (s->pods.slots[i].key && !strcmp(s->pods.slots[i].key, pod_key)) {
            char *k = (char *)s->pods.slots[i].key;
            gs__strmap_del(&s->pods, pod_key);
            free(k);
            break;
        }
    }
    gs_framework_notify_pod(s->fw, pod, false);
}

int gs_scheduler_add_podgroup(struct gs_scheduler *s, const struct gs_podgroup *pg)
{
    gs_framework_notify_podgroup(s->fw, pg, true);
    gs_sched_queue_on_event(s->q, GS_EV_PODGROUP);
    return 0;
}

void gs_scheduler_remove_podgroup(struct gs_scheduler *s, const struct gs_podgroup *pg)
{
    gs_framework_notify_podgroup(s->fw, pg, false);
}

int64_t gs_scheduler_next_wake(const struct gs_scheduler *s)
{
    int64_t a = gs_sched_queue_next_ready(s->q), b = gs_framework_next_deadline(s->fw);
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

int64_t gs_scheduler_evictions(const struct gs_scheduler *s) { return s->evictions; }

int gs_scheduler_delete_pod(struct gs_scheduler *s, const char *pod_key)
{
    int qerr = gs_sched_queue_delete(s->q, pod_key);
    /* A pod waiting at Permit holds an assumption: reject it first so plugins unreserve. */
    int werr = gs_framework_reject(s->fw, pod_key, NULL, "pod deleted");
    gs_scheduler_tick(s);
    int cerr = gs_cache_remove_pod(s->cache, pod_key);
    const struct gs_pod *gone = gs__strmap_get(&s->pods, pod_key);
    if (cerr == 0 || werr == 0) {
        if (gone) gs_sched_queue_on_pod_event(s->q, GS_EV_POD_DELETED, gone, false);
        else gs_sched_queue_on_event(s->q, GS_EV_POD_DELETED);
    }
    forget_pod(s, pod_key);
    return qerr == 0 || cerr == 0 || werr == 0 ? 0 : GS_ENOENT;
}

static int node_event(struct gs_scheduler *s, int r, enum gs_cluster_event ev)
{
    if (r >= 0) gs_sched_queue_on_event(s->q, ev);
    return r;
}

int gs_scheduler_add_node(struct gs_scheduler *s, const struct gs_node *node)
{
    return node_event(s, gs_cache_add_node(s->cache, node), GS_EV_NODE_ADDED);
}

int gs_scheduler_add_node_spec(struct gs_scheduler *s, const struct gs_node_spec *spec)
{
    return node_event(s, gs_cache_add_node_spec(s->cache, spec), GS_EV_NODE_ADDED);
}

int gs_scheduler_update_node(struct gs_scheduler *s, const struct gs_node *node)
{
    return node_event(s, gs_cache_update_node(s->cache, node), GS_EV_NODE_UPDATED);
}

int gs_scheduler_remove_node(struct gs_scheduler *s, const char *name)
{
    return gs_cache_remove_node(s->cache, name);
}

/* A waiting pod was allowed (bind it now) or rejected (back to the queue). */
static void on_waiting_done(const struct gs_pod *pod, bool ok, void *arg)
{
    struct gs_scheduler *s = arg;
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    const char *why = "rejected while waiting at Permit";
    if (ok) {
        const struct gs_assignment *held = gs_cache_pod_assignment(s->cache, key);
        struct gs_assignment a = held ? *held : (struct gs_assignment){.node = -1};
        struct gs_status b = gs_framework_bind(s->fw, pod);
        if (b.code == GS_SUCCESS) {
            gs_sched_queue_done(s->q, key);
            gs_sched_queue_on_pod_event(s->q, GS_EV_POD_BOUND, pod, true);
            s->bound_in_tick++;
            if (s->hooks.bound) s->hooks.bound(s->hooks.ctx, pod, &a);
            return;
        }
        snprintf(s->reason, sizeof s->reason, "%s", b.reason);
        why = s->reason;
    } else {
        why = gs_framework_last_rejection(s->fw);
    }
    if (s->hooks.rejected) s->hooks.rejected(s->hooks.ctx, pod, why);
    struct gs_queued_pod qp = {.pod = pod};
    gs_sched_queue_requeue(s->q, &qp, true, RETRY_EVENTS | (pod->pod_group ? GANG_EVENTS : 0));
}

int gs_scheduler_tick(struct gs_scheduler *s)
{
    s->bound_in_tick = 0;
    gs_framework_tick(s->fw, on_waiting_done, s);
    if (gs_cache_expire(s->cache, NULL, NULL) > 0) gs_sched_queue_on_event(s->q, GS_EV_POD_DELETED);
    return s->bound_in_tick;
}

int gs_scheduler_run_one(struct gs_scheduler *s, struct gs_cycle_result *out)
{
    memset(out, 0, sizeof *out);
    out->a.node = -1;
    gs_scheduler_tick(s);
    struct gs_queued_pod qp;
    if (!gs_sched_queue_pop(s->q, &qp)) return 0;
    out->pod = qp.pod;
    out->attempts = qp.attempts;
    out->enqueued_ns = qp.enqueued_ns;
    char key[GS__KEY_MAX];
    gs__pod_key(qp.pod, key, sizeof key);

    struct gs_status gate = gs_framework_pre_enqueue(s->fw, qp.pod);
    if (!gs_status_ok(&gate)) {
        snprintf(s->reason, sizeof s->reason, "%s", gate.reason);
        out->code = gate.code == GS_ERROR ? GS_ERROR : GS_PENDING;
        out->reason = s->reason;
        int e = gs_sched_queue_requeue(s->q, &qp, true, GS_EV_ALL);
        return e ? e : 1;
    }
    struct gs_schedule_result r;
    int err = gs_framework_schedule(s->fw, qp.pod, s->ttl, &r);
    if (err) {
        gs_schedule_result_free(&r);
        gs_sched_queue_requeue(s->q, &qp, false, 0);
        return err;
    }
    out->code = r.code;
    out->a = r.a;
    out->feasible_nodes = r.feasible_nodes;
    if (r.code == GS_SUCCESS) {
        struct gs_status b = gs_framework_bind(s->fw, qp.pod);
        if (b.code == GS_SUCCESS) {
            gs_sched_queue_done(s->q, key);
            gs_sched_queue_on_pod_event(s->q, GS_EV_POD_BOUND, qp.pod, true);
        } else {
            out->code = b.code;
            snprintf(s->reason, sizeof s->reason, "%s", b.reason);
            out->reason = s->reason;
            gs_sched_queue_requeue(s->q, &qp, false, 0);
        }
    } else if (r.code != GS_WAIT) {
        /* The framework's status already holds the diagnosis line; format
         * it again only when that copy was cut at the status' size. */
        size_t have = strnlen(r.status.reason, sizeof r.status.reason);
        if (r.feasible_nodes == 0 && (r.diag.n || r.diag.prefilter.code != GS_SUCCESS) &&
            have + 1 >= sizeof r.status.reason)
            gs_diagnosis_format(&r.diag, qp.pod, s->reason, sizeof s->reason);
        else if (r.feasible_nodes == 0 && (r.diag.n || r.diag.prefilter.code != GS_SUCCESS))
            memcpy(s->reason, r.status.reason, have + 1);
        else
            snprintf(s->reason, sizeof s->reason, "%s", r.status.reason);
        out->reason = s->reason;
        bool park = (gs_status_rejects(&r.status) || r.code != GS_ERROR) && r.nominated_node < 0;
        unsigned checked = 0, ev = requeue_events(&r, qp.pod, &checked);
        gs_sched_queue_requeue_hinted(s->q, &qp, park, ev, checked);
    }
    gs_schedule_result_free(&r);
    return 1;
}
