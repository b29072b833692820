/*
 * replay.c - the replay experiment: pods arrive and leave at their trace
 * times on a simulated clock, and the scheduler's own queue decides when a
 * pod that did not fit is tried again.
 *
 * Design. Time is a struct gs_clock in simulated nanoseconds; the loop jumps
 * from one interesting instant to the next: the next arrival, the next
 * completion (a min-heap of end times) or the moment the queue's earliest
 * backoff expires. At each instant it
 *   1. completes the pods whose time is up (gs_scheduler_delete_pod frees
 *      their resources and the "pod deleted" event moves waiting pods back),
 *   2. adds the pods arriving now to the scheduling queue,
 *   3. runs the scheduler driver (sched/scheduler.h) until the queue has
 *      nothing ready: one scheduling and binding cycle per pod; a pod that
 *      does not fit is requeued as unschedulable and waits for an event,
 *      exactly as in the server,
 *   4. takes one sample (utilisation, pending, fragmentation).
 * So queueing delay (arrival -> bound) comes out of the real queue and
 * framework rather than a model of them. The run ends when nothing is left
 * to arrive or complete and no pod is backing off: pods still unschedulable
 * then would fail forever and stay counted as pending.
 *
 * The profile. Without a policy it is the server's (gs_sched_config_gpusched,
 * or --config's read by gs_sched_config_load) exactly as the server's
 * scheduler loop runs it: the replay is then the server on a simulated
 * clock. With one, it is kube's default set (or --config's) with the
 * placement policy as the only Score plugin besides the feature scorers and
 * enabled at every other point it implements; the FGD family gets the
 * trace's target workload as its args unless the config gives one.
 * Fragmentation samples use the same target workload, and the fragmentation
 * ratio is the fragmented share of idle GPU milli, as in the fgd experiment.
 *
 * Admission (replay_admit.h). When the trace uses queues, the server's
 * admission loop holds pods back until their workload is admitted, runs one
 * cycle at every instant before the scheduler (as the server's rounds do)
 * and wakes the loop for its one-second tick while workloads wait. A pod it
 * evicts is a "preempted" event and waits for admission again.
 *
 * The cluster at the start. Pods of the trace already running (a node set)
 * are put in the cache on their devices before the first instant; nodes with
 * a ready time are unschedulable until then, and waiting pods look again
 * when one becomes ready.
 *
 * Events: "scheduled" and "completed" for every pod, "failed" for the first
 * failed attempt of a pod only (with its diagnosis): retries after each
 * completion would otherwise flood the log with copies of the same line.
 *
 * Gangs and preemption. PodGroups of the trace go to the scheduler and
 * NodeResourceTopology objects to the cache before the first instant. Pods
 * held at Permit are reported "scheduled" when the driver binds them (its
 * bound hook), and "failed" (always, with the reason) when a wait ends in a
 * rejection: timeouts are rare and each one matters. An eviction by
 * preemption is a "preempted" event; the victim's completion is cancelled
 * (a run counter invalidates its heap entry) and the driver has already
 * requeued it, so it is scheduled again later and runs its full duration.
 * The scheduler wakes the loop for Permit timeouts as for backoffs.
 */
#include "core/codec.h"
#include "sched/frag.h"
#include "sched/topology_core.h"
#include "sched/scheduler.h"
#include "sim/sim.h"
#include "sim/sim_dra.h" /* resource claims */
#include "sim/replay_admit.h" /* admission in front of the queue */
#include "sim/replay_gangq.h" /* gang queueing modes and gang accounting */

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_ERRORS 16 /* attempts ending in Error before a pod is given up */
/* With workloads waiting for admission and nothing else left to happen,
 * admission ticks go on this long after the last change: its timers
 * (patience and minimum runtime 10 min, reservations 30 min) fall inside. */
#define ADMIT_IDLE_NS (3600LL * GS_NS_PER_SEC)

struct rpod {
    char *key;                /* "ns/name" */
    int64_t arrival_ns, duration_ns; /* duration -1: runs forever */
    int64_t gpu_milli;        /* total GPU milli asked (count x share) */
    int64_t sched_ns;         /* -1 until bound */
    struct gs_assignment a;
    int32_t errors;
    bool failed_logged;
    uint32_t run;             /* bumped on eviction: older completions are stale */
    bool prebound;            /* running when the trace starts: placed before the first instant */
    bool on_node;             /* bound now (scheduled and not yet completed or evicted) */
    char *group;              /* "ns/<group>" of its PodGroup or Workload, NULL none */
};

struct ready {
    int64_t t_ns;
    int32_t node;
};

struct completion {
    int64_t t_ns;
    uint64_t seq;
    size_t pod;
    uint32_t run;
};

struct by_ptr {
    const struct gs_pod *p;
    size_t i;
};

struct replay {
    const struct gs_trace *t;
    const struct gs_sim_opts *o;
    const struct gs_sim_sink *sink;
    struct gs_diags *d;
    struct gs_clock clock;
    struct gs_cache *cache;
    struct gs_sched_config cfg;
    bool have_cfg;
    struct gs_profile profile;  /* shallow copy of a cfg profile with the policy applied */
    json_t *policy_args;        /* args added for the policy (owned), or NULL */
    struct gs_scheduler *sched;
    struct gs_frag_model *frag;
    struct rpod *pods;
    size_t *order;              /* pod indices by arrival */
    struct by_ptr *index;       /* sorted by pointer: pod -> index */
    struct completion *heap;
    size_t nheap, capheap;
    uint64_t seq;
    double *delays;
    size_t ndelays, next_arrival;
    int64_t arrived, scheduled, running, dropped, arrived_milli, capacity_milli;
    bool have100, have80;
    double alloc_at_100, frag_at_80;
    struct gs_sim_sample last;
    struct gs_nrt *nrts;        /* parsed NodeResourceTopology objects (owned) */
    size_t nnrts;
    int64_t preempted;
    int hook_err;
    struct gs_sim_dra *dra;     /* DRA objects and claims (sim_dra.h), NULL without any */
    const json_t *claims_now;   /* the scheduled event's claims (sim_dra.h) */
    bool server_profile;        /* no policy: the profile runs as it is (see build_profile) */
    struct gs_replay_admit *adm; /* admission (replay_admit.h), NULL when the trace uses none */
    struct ready *ready;        /* nodes not schedulable from the start, by time */
    size_t nready, next_ready;
    uint64_t changes;           /* arrivals, events and nodes made ready so far */
    int64_t changed_ns;         /* when changes last moved */
    struct gs_gangq *gq;        /* gang queue (replay_gangq.h): its mode and the gang accounting */
    enum gs_gangq_mode gq_mode; /* its mode, auto resolved */
    json_t *gq_args;            /* args of its pin filter in the profile (owned), NULL none */
    int64_t last_ns, last_used; /* the previous instant and its GPU milli in use */
    bool last_gang_waiting;     /* a gang pod waited at the end of the previous instant */
    double gang_wait_ns, gang_idle_milli_ns; /* time a gang pod waited; idle GPU milli x time then */
};

static void hook_bound(void *ctx, const struct gs_pod *pod, const struct gs_assignment *a);
static void hook_rejected(void *ctx, const struct gs_pod *pod, const char *reason);
static void hook_evicted(void *ctx, const struct gs_pod *victim, const struct gs_pod *preemptor,
                         const struct gs_assignment *a);
static void hook_admitted(void *ctx, size_t i);
static void hook_admit_evicted(void *ctx, size_t i, const char *by);
static void hook_gang_released(void *ctx, size_t i);

/*--- Small helpers ---*/

static int64_t to_ns(double s) { return (int64_t)llround(s * (double)GS_NS_PER_SEC); }
static double to_s(int64_t ns) { return (double)ns / (double)GS_NS_PER_SEC; }

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct by_ptr *)a)->p, y = (uintptr_t)((const struct by_ptr *)b)->p;
    return x < y ? -1 : x > y;
}

static size_t pod_index(const struct replay *r, const struct gs_pod *p)
{
    struct by_ptr key = {.p = p};
    const struct by_ptr *hit = bsearch(&key, r->index, r->t->npods, sizeof key, cmp_ptr);
    return hit ? hit->i : SIZE_MAX;
}

struct by_arrival {
    int64_t t_ns;
    size_t i;
};

static int cmp_arrival(const void *a, const void *b)
{
    const struct by_arrival *x = a, *y = b;
    if (x->t_ns != y->t_ns) return x->t_ns < y->t_ns ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i; /* trace order among equal times */
}

static void emit_at(struct replay *r, double t, enum gs_sim_event_type type, const struct rpod *p, const char *reason)
{
    r->changes++;
    r->changed_ns = gs_clock_now(&r->clock);
    if (!r->sink->event) return;
    const struct gs_node_info *n = p->a.node >= 0 ? gs_cache_node(r->cache, p->a.node) : NULL;
    struct gs_sim_event e = {.t = t, .type = type, .pod = p->key,
                             .node = type == GS_SIM_FAILED || !n ? NULL : n->name,
                             .gpus = type == GS_SIM_FAILED ? 0 : p->a.gpu_mask,
                             .milli = type == GS_SIM_FAILED ? 0 : p->a.milli, .reason = reason,
                             .claims = type == GS_SIM_SCHEDULED ? r->claims_now : NULL,
                             .queue = gs_replay_admit_queue(r->adm, (size_t)(p - r->pods)), .group = p->group};
    r->sink->event(r->sink->ctx, &e);
}

static void emit(struct replay *r, enum gs_sim_event_type type, const struct rpod *p, const char *reason)
{
    emit_at(r, to_s(gs_clock_now(&r->clock)), type, p, reason);
}

/*--- Completion heap ---*/

static bool heap_less(const struct completion *a, const struct completion *b)
{
    return a->t_ns != b->t_ns ? a->t_ns < b->t_ns : a->seq < b->seq;
}

static int heap_push(struct replay *r, int64_t t_ns, size_t pod, uint32_t run)
{
    if (r->nheap == r->capheap) {
        size_t cap = r->capheap ? r->capheap * 2 : 256;
        struct completion *h = realloc(r->heap, cap * sizeof *h);
        if (!h) return GS_ENOMEM;
        r->heap = h;
        r->capheap = cap;
    }
    size_t i = r->nheap++;
    r->heap[i] = (struct completion){t_ns, r->seq++, pod, run};
    while (i > 0 && heap_less(&r->heap[i], &r->heap[(i - 1) / 2])) {
        struct completion tmp = r->heap[i];
        r->heap[i] = r->heap[(i - 1) / 2];
        r->heap[(i - 1) / 2] = tmp;
        i = (i - 1) / 2;
    }
    return 0;
}

static struct completion heap_pop(struct replay *r)
{
    struct completion top = r->heap[0];
    r->heap[0] = r->heap[--r->nheap];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < r->nheap && heap_less(&r->heap[l], &r->heap[m])) m = l;
        if (l + 1 < r->nheap && heap_less(&r->heap[l + 1], &r->heap[m])) m = l + 1;
        if (m == i) break;
        struct completion tmp = r->heap[i];
        r->heap[i] = r->heap[m];
        r->heap[m] = tmp;
        i = m;
    }
    return top;
}

/*--- Setup ---*/

static int init_pods(struct replay *r)
{
    size_t n = r->t->npods;
    r->pods = calloc(n ? n : 1, sizeof *r->pods);
    r->order = calloc(n ? n : 1, sizeof *r->order);
    r->index = calloc(n ? n : 1, sizeof *r->index);
    r->delays = calloc(n ? n : 1, sizeof *r->delays);
    struct by_arrival *arr = calloc(n ? n : 1, sizeof *arr);
    if (!r->pods || !r->order || !r->index || !r->delays || !arr) {
        free(arr);
        return GS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const struct gs_trace_pod *tp = &r->t->pods[i];
        struct rpod *p = &r->pods[i];
        char key[512];
        gs_meta_key(&tp->pod->meta, key, sizeof key);
        if (!(p->key = strdup(key))) {
            free(arr);
            return GS_ENOMEM;
        }
        p->arrival_ns = to_ns(tp->arrival > 0 ? tp->arrival : 0);
        p->duration_ns = tp->duration >= 0 ? to_ns(tp->duration) : -1;
        p->gpu_milli = (int64_t)tp->pod->demand.gpu_count * tp->pod->demand.gpu_milli;
        p->sched_ns = -1;
        p->a.node = -1;
        p->prebound = tp->node != NULL;
        if (tp->pod->pod_group && *tp->pod->pod_group) {
            const char *ns = tp->pod->meta.namespace_ ? tp->pod->meta.namespace_ : "default";
            size_t len = strlen(ns) + strlen(tp->pod->pod_group) + 2;
            if (!(p->group = malloc(len))) {
                free(arr);
                return GS_ENOMEM;
            }
            const char *g = strrchr(tp->pod->pod_group, '/'); /* "<api group>/<name>" for the other shapes */
            snprintf(p->group, len, "%s/%s", ns, g ? g + 1 : tp->pod->pod_group);
        }
        arr[i] = (struct by_arrival){p->arrival_ns, i};
        r->index[i] = (struct by_ptr){tp->pod, i};
    }
    qsort(arr, n, sizeof *arr, cmp_arrival);
    for (size_t i = 0; i < n; i++) r->order[i] = arr[i].i;
    free(arr);
    qsort(r->index, n, sizeof *r->index, cmp_ptr);
    return 0;
}

/* NodeResourceTopology objects of the trace, parsed and attached to their nodes. */
static int attach_topologies(struct replay *r)
{
    r->nrts = calloc(r->t->nobjects ? r->t->nobjects : 1, sizeof *r->nrts);
    if (!r->nrts) return GS_ENOMEM;
    for (size_t i = 0; i < r->t->nobjects; i++) {
        struct gs_object *o = r->t->objects[i];
        if (o->kind != GS_KIND_NODERESOURCETOPOLOGY) continue;
        int rc = gs_nrt_parse(gs_object_to_json(o), &r->nrts[r->nnrts], r->d);
        if (rc) return rc;
        struct gs_nrt *n = &r->nrts[r->nnrts++];
        int32_t idx = gs_cache_find_node(r->cache, n->node);
        if (idx < 0) {
            gs_diags_add(r->d, n->node, "NodeResourceTopology for an unknown node");
            return GS_EINVAL;
        }
        gs_cache_set_nrt(r->cache, idx, n);
    }
    return 0;
}

static int init_cache(struct replay *r)
{
    gs_clock_init_sim(&r->clock, 0);
    r->cache = gs_cache_new(&r->clock);
    if (!r->cache) return GS_ENOMEM;
    for (size_t i = 0; i < r->t->nnodes; i++) {
        int rc = gs_cache_add_node_spec(r->cache, &r->t->nodes[i]);
        if (rc < 0) {
            gs_diags_add(r->d, r->t->nodes[i].name ? r->t->nodes[i].name : "node", "cannot add node: %s",
                         gs_strerror(rc));
            return rc;
        }
    }
    r->capacity_milli = gs_cache_gpu_count(r->cache) * GS_GPU_MILLI;
    int rc = gs_sim_dra_new(r->cache, r->t, r->o->seed, &r->dra, r->d); /* DRA: sim_dra.h */
    return rc ? rc : attach_topologies(r);
}

/* --config takes the file `gpusched server --config` takes (gs_sched_config_load).
 * Without one: the server's own profile when no policy is given, else
 * kube's default set the policy is put into (what --policy always meant). */
static int load_config(struct replay *r)
{
    if (r->o->config_path) return gs_sched_config_load(r->o->config_path, &r->cfg, r->d);
    return r->server_profile ? gs_sched_config_gpusched(&r->cfg) : gs_sched_config_default(&r->cfg);
}

static const struct gs_plugin *find_policy(const char *name)
{
    const struct gs_plugin *p = gs_plugin_lookup(name);
    const struct gs_plugin *const *all = gs_plugin_all();
    for (size_t i = 0; !p && all && all[i]; i++)
        if (!strcasecmp(all[i]->name, name)) p = all[i];
    return p && p->score ? p : NULL;
}

static bool point_has(const struct gs_profile *pr, enum gs_point pt, const struct gs_plugin *p)
{
    for (int i = 0; i < pr->npoints[pt]; i++)
        if (pr->points[pt][i].plugin == p) return true;
    return false;
}

/* Enables p at pt if it implements it and is not there yet (first or last). */
static void enable_at(struct gs_profile *pr, enum gs_point pt, const struct gs_plugin *p, bool implements, bool first)
{
    if (!implements || point_has(pr, pt, p) || pr->npoints[pt] == GS_MAX_PLUGINS_PER_POINT) return;
    struct gs_profile_plugin *v = pr->points[pt];
    if (first) memmove(v + 1, v, (size_t)pr->npoints[pt] * sizeof *v);
    v[first ? 0 : pr->npoints[pt]] = (struct gs_profile_plugin){.plugin = p, .weight = 1};
    pr->npoints[pt]++;
}

static bool has_args(const struct gs_profile *pr, const char *name)
{
    for (int i = 0; i < pr->nargs; i++)
        if (pr->args_names[i] && !strcmp(pr->args_names[i], name)) return true;
    return false;
}

/* FGD scores against the expected workload: give it the trace's. */
static int add_policy_args(struct replay *r, const struct gs_plugin *p)
{
    if (!r->frag || strncmp(p->name, "FGD", 3) || has_args(&r->profile, p->name)) return 0;
    if (r->profile.nargs >= (int)(sizeof r->profile.args / sizeof r->profile.args[0])) return 0;
    json_t *tw = gs_frag_model_to_json(r->frag);
    if (!tw) return GS_ENOMEM;
    r->policy_args = json_object();
    if (!r->policy_args) {
        json_decref(tw);
        return GS_ENOMEM;
    }
    json_object_set_new(r->policy_args, "targetWorkload", tw);
    r->profile.args[r->profile.nargs] = r->policy_args;
    r->profile.args_names[r->profile.nargs++] = p->name;
    return 0;
}

/* Scorers that belong to a feature rather than to placement policy: they
 * stay next to the policy (gang plans, topology, spread, nominations). */
static bool feature_scorer(const struct gs_plugin *p)
{
    static const char *const names[] = {"Coscheduling", "NodeResourceTopology", "PodTopologySpread",
                                        "DefaultPreemption"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(p->name, names[i])) return true;
    return false;
}

/* The policy becomes the first Score plugin; feature scorers are kept after it. */
static void keep_feature_scores(struct gs_profile *pr, const struct gs_plugin *policy)
{
    struct gs_profile_plugin kept[GS_MAX_PLUGINS_PER_POINT];
    int n = 0;
    kept[n++] = (struct gs_profile_plugin){.plugin = policy, .weight = 1};
    for (int i = 0; i < pr->npoints[GS_PT_SCORE] && n < GS_MAX_PLUGINS_PER_POINT; i++)
        if (pr->points[GS_PT_SCORE][i].plugin != policy && feature_scorer(pr->points[GS_PT_SCORE][i].plugin))
            kept[n++] = pr->points[GS_PT_SCORE][i];
    memcpy(pr->points[GS_PT_SCORE], kept, (size_t)n * sizeof *kept);
    pr->npoints[GS_PT_SCORE] = n;
}

/* NodeResourceTopology picks GPU sets by interconnect: ahead of the policy's choice. */
static void topology_reserve_first(struct gs_profile *pr)
{
    struct gs_profile_plugin *v = pr->points[GS_PT_RESERVE];
    for (int i = 1; i < pr->npoints[GS_PT_RESERVE]; i++) {
        if (strcmp(v[i].plugin->name, "NodeResourceTopology")) continue;
        struct gs_profile_plugin t = v[i];
        memmove(v + 1, v, (size_t)i * sizeof *v);
        v[0] = t;
        return;
    }
}

/* No policy: the profile exactly as the server's scheduler loop runs it,
 * placement included. A policy: it becomes the placement score (below). */
static bool server_profile(const struct gs_sim_opts *o)
{
    return !o->policy || !*o->policy || !strcmp(o->policy, GS_SIM_PROFILE);
}

static int build_profile(struct replay *r)
{
    r->server_profile = server_profile(r->o);
    int rc = load_config(r);
    if (rc) return rc;
    r->have_cfg = true;
    const struct gs_profile *base = gs_sched_config_profile(&r->cfg, GS_DEFAULT_SCHEDULER);
    if (!base && r->cfg.nprofiles) base = &r->cfg.profiles[0];
    if (r->server_profile) {
        if (!base) {
            gs_diags_add(r->d, r->o->config_path ? r->o->config_path : "config", "no scheduler profile");
            return GS_EINVAL;
        }
        r->profile = *base;
        return 0;
    }
    const struct gs_plugin *p = find_policy(r->o->policy);
    if (!base || !p) {
        gs_diags_add(r->d, "policy", base ? "unknown placement policy \"%s\"" : "no scheduler profile", r->o->policy);
        return GS_EINVAL;
    }
    r->profile = *base;
    keep_feature_scores(&r->profile, p);
    /* The default scorers' PreScore would only prepare scores nobody reads. */
    r->profile.npoints[GS_PT_PRE_SCORE] = 0;
    enable_at(&r->profile, GS_PT_PRE_SCORE, p, p->pre_score, false);
    enable_at(&r->profile, GS_PT_PRE_FILTER, p, p->pre_filter, false);
    enable_at(&r->profile, GS_PT_FILTER, p, p->filter, false);
    enable_at(&r->profile, GS_PT_RESERVE, p, p->reserve, true); /* its GPU choice goes first */
    topology_reserve_first(&r->profile);
    return add_policy_args(r, p);
}

/* The gang queue in front of the scheduler (replay_gangq.h). Its modes
 * other than the scheduler's own are an alternative to admission's queues,
 * not a layer on top of them. */
static int init_gangq(struct replay *r)
{
    r->gq_mode = gs_gangq_resolve(r->o->gang_queue, r->t, r->adm != NULL);
    if (r->gq_mode != GS_GANGQ_SCHEDULER && r->adm) {
        gs_diags_add(r->d, "--gang-queue", "\"%s\": the trace uses admission queues, which decide the order "
                     "already; use --gang-queue scheduler", gs_gangq_mode_name(r->gq_mode));
        return GS_EINVAL;
    }
    int64_t *dur = malloc((r->t->npods ? r->t->npods : 1) * sizeof *dur);
    if (!dur) return GS_ENOMEM;
    for (size_t i = 0; i < r->t->npods; i++) dur[i] = r->pods[i].duration_ns;
    int rc = gs_gangq_new(r->gq_mode, r->t, dur, r->cache, &r->clock, &r->profile, hook_gang_released, r,
                          &r->gq, r->d);
    free(dur);
    if (!rc && r->o->gang_slack_s > 0) gs_gangq_set_slack(r->gq, r->o->gang_slack_s);
    if (rc || !gs_gangq_mode_pins(r->gq_mode)) return rc;
    /* Backfills beside the reservation take the nodes the check chose (after
     * the gang queue's own placement check was built, which must not see it). */
    if (r->profile.npoints[GS_PT_FILTER] >= GS_MAX_PLUGINS_PER_POINT || r->profile.nargs >= GS_MAX_PLUGINS_PER_POINT * 4) {
        gs_diags_add(r->d, "--gang-queue", "%s: the profile has no room for the filter %s",
                     gs_gangq_mode_name(r->gq_mode), gs_gangq_pin_plugin.name);
        return GS_EINVAL;
    }
    if (!(r->gq_args = gs_gangq_plugin_args(r->gq))) return GS_ENOMEM;
    r->profile.points[GS_PT_FILTER][r->profile.npoints[GS_PT_FILTER]++] =
        (struct gs_profile_plugin){.plugin = &gs_gangq_pin_plugin, .weight = 1};
    r->profile.args[r->profile.nargs] = r->gq_args;
    r->profile.args_names[r->profile.nargs++] = gs_gangq_pin_plugin.name;
    return 0;
}

static int init_scheduler(struct replay *r)
{
    const struct gs_pod **pods = malloc((r->t->npods ? r->t->npods : 1) * sizeof *pods);
    if (!pods) return GS_ENOMEM;
    for (size_t i = 0; i < r->t->npods; i++) pods[i] = r->t->pods[i].pod;
    int rc = r->t->npods ? gs_frag_model_new(r->cache, pods, r->t->npods, GS_FRAG_DEFAULT_COVERAGE, &r->frag) : 0;
    free(pods);
    if (rc) return rc;
    if ((rc = build_profile(r))) return rc;
    /* Admission before the scheduler, whose profile gets its AdmissionHold filter, as on the server. */
    struct gs_replay_admit_hooks ah = {.admitted = hook_admitted, .evicted = hook_admit_evicted, .ctx = r};
    if ((rc = gs_replay_admit_new(r->t, r->cache, &r->clock, &r->profile, &ah, &r->adm, r->d))) return rc;
    if ((rc = init_gangq(r))) return rc;
    struct gs_scheduler_opts so = {.profile = gs_replay_admit_profile(r->adm, &r->profile), .seed = r->o->seed,
                                   .hooks = {.bound = hook_bound, .rejected = hook_rejected,
                                             .evicted = hook_evicted, .ctx = r}};
    if ((rc = gs_scheduler_new(&r->clock, r->cache, &so, &r->sched, r->d))) return rc;
    for (size_t i = 0; i < r->t->nobjects; i++)
        if (r->t->objects[i]->kind == GS_KIND_PODGROUP) gs_scheduler_add_podgroup(r->sched, r->t->objects[i]->u.podgroup);
    return 0;
}

static void replay_free(struct replay *r)
{
    for (size_t i = 0; i < r->nnrts; i++) gs_nrt_clear(&r->nrts[i]);
    free(r->nrts);
    gs_scheduler_free(r->sched);
    gs_gangq_free(r->gq);
    json_decref(r->gq_args);
    gs_replay_admit_free(r->adm); /* after the scheduler, whose profile it owns */
    gs_sim_dra_free(r->dra);
    json_decref(r->policy_args);
    if (r->have_cfg) gs_sched_config_free(&r->cfg);
    if (r->frag) gs_frag_model_free(r->frag);
    if (r->cache) gs_cache_free(r->cache);
    for (size_t i = 0; r->pods && i < r->t->npods; i++) free(r->pods[i].key), free(r->pods[i].group);
    free(r->ready);
    free(r->pods);
    free(r->order);
    free(r->index);
    free(r->heap);
    free(r->delays);
}

/*--- The event loop ---*/

static int bound(struct replay *r, size_t i, const struct gs_assignment *a)
{
    struct rpod *p = &r->pods[i];
    int64_t now = gs_clock_now(&r->clock);
    if (p->sched_ns < 0) r->delays[r->ndelays++] = to_s(now - p->arrival_ns); /* first placement only */
    p->sched_ns = now;
    p->a = *a;
    p->on_node = true;
    gs_gangq_bound(r->gq, i, a->node, __builtin_popcountll(a->gpu_mask), now);
    r->scheduled++;
    r->running++;
    r->claims_now = gs_sim_dra_bound(r->dra, gs_scheduler_framework(r->sched), r->t->pods[i].pod, to_s(now));
    emit(r, GS_SIM_SCHEDULED, p, NULL);
    r->claims_now = NULL;
    return p->duration_ns >= 0 ? heap_push(r, now + p->duration_ns, i, p->run) : 0;
}

/*--- Driver hooks: Permit waits and evictions ---*/

static void hook_bound(void *ctx, const struct gs_pod *pod, const struct gs_assignment *a)
{
    struct replay *r = ctx;
    size_t i = pod_index(r, pod);
    int rc = i == SIZE_MAX ? GS_ESTATE : bound(r, i, a);
    if (rc && !r->hook_err) r->hook_err = rc;
}

static void hook_rejected(void *ctx, const struct gs_pod *pod, const char *reason)
{
    struct replay *r = ctx;
    size_t i = pod_index(r, pod);
    if (i == SIZE_MAX) return;
    r->pods[i].failed_logged = true;
    emit(r, GS_SIM_FAILED, &r->pods[i], reason);
}

static void hook_evicted(void *ctx, const struct gs_pod *victim, const struct gs_pod *preemptor,
                         const struct gs_assignment *a)
{
    struct replay *r = ctx;
    size_t i = pod_index(r, victim);
    if (i == SIZE_MAX) return;
    struct rpod *p = &r->pods[i];
    char why[600];
    char key[512];
    gs_meta_key(&preemptor->meta, key, sizeof key);
    snprintf(why, sizeof why, "preempted by %s", key);
    p->a = *a;
    emit(r, GS_SIM_PREEMPTED, p, why);
    gs_sim_dra_left(r->dra, victim);
    gs_gangq_left(r->gq, i, false);
    p->on_node = false;
    p->run++;
    r->running--;
    r->scheduled--;
    r->preempted++;
}

/* Admission admitted the pod's workload: it enters the scheduling queue. */
static void hook_admitted(void *ctx, size_t i)
{
    struct replay *r = ctx;
    int rc = gs_scheduler_add_pod(r->sched, r->t->pods[i].pod);
    if (rc) {
        gs_diags_add(r->d, r->pods[i].key, "cannot queue: %s", gs_strerror(rc));
        if (!r->hook_err) r->hook_err = rc;
    }
}

/* The gang queue let the pod's workload in: it enters the scheduling queue. */
static void hook_gang_released(void *ctx, size_t i) { hook_admitted(ctx, i); }

/* Admission's reclaim or preemption evicted the pod's workload: out of the
 * scheduler and the cache, its completion void; admission holds it again
 * (replay_admit.c) and it runs its full duration once admitted again. */
static void hook_admit_evicted(void *ctx, size_t i, const char *by)
{
    struct replay *r = ctx;
    struct rpod *p = &r->pods[i];
    if (p->on_node) {
        char why[600];
        snprintf(why, sizeof why, "evicted by admission for workload %s", by ? by : "?");
        emit(r, GS_SIM_PREEMPTED, p, why);
        gs_sim_dra_left(r->dra, r->t->pods[i].pod);
        gs_gangq_left(r->gq, i, false);
        p->on_node = false;
        p->run++;
        r->running--;
        r->scheduled--;
        r->preempted++;
    }
    gs_scheduler_delete_pod(r->sched, p->key);
}

/* The driver has requeued the pod; log its first failure, and give up on a
 * pod whose cycles keep ending in internal errors. */
static void failed(struct replay *r, size_t i, const struct gs_cycle_result *c)
{
    struct rpod *p = &r->pods[i];
    if (!p->failed_logged) {
        emit(r, GS_SIM_FAILED, p, c->reason ? c->reason : gs_code_name(c->code));
        p->failed_logged = true;
    }
    if (c->code == GS_ERROR && ++p->errors >= MAX_ERRORS) {
        gs_scheduler_delete_pod(r->sched, p->key);
        r->dropped++;
    }
}

/* Pods held at Permit (gangs) are bound later by the driver's tick and are
 * not reported as events; no placement policy waits at Permit. */
static int schedule_ready(struct replay *r)
{
    struct gs_cycle_result c;
    int rc;
    while ((rc = gs_scheduler_run_one(r->sched, &c)) > 0) {
        size_t i = pod_index(r, c.pod);
        if (i == SIZE_MAX) return GS_ESTATE;
        if (c.code == GS_SUCCESS) rc = bound(r, i, &c.a);
        else if (c.code != GS_WAIT) failed(r, i, &c);
        if (rc < 0) return rc;
    }
    if (rc < 0) gs_diags_add(r->d, "replay", "scheduling cycle failed: %s", gs_strerror(rc));
    return rc;
}

static void complete_due(struct replay *r, int64_t now)
{
    while (r->nheap && r->heap[0].t_ns <= now) {
        struct completion c = heap_pop(r);
        struct rpod *p = &r->pods[c.pod];
        if (c.run != p->run) continue; /* evicted since: this completion is void */
        emit(r, GS_SIM_COMPLETED, p, NULL); /* before removal: the node's name is still at hand */
        gs_sim_dra_left(r->dra, r->t->pods[c.pod].pod);
        gs_scheduler_delete_pod(r->sched, p->key); /* frees resources, wakes waiting pods */
        gs_replay_admit_gone(r->adm, c.pod);   /* its share of the quota */
        gs_gangq_left(r->gq, c.pod, true);
        p->on_node = false;
        r->running--;
    }
}

/* Is the pod for the profile that runs? The server leaves a pod naming
 * another schedulerName to that scheduler (or to a profile of its own, which
 * the replay does not run); --policy replays schedule every pod, as always. */
static bool ours(const struct replay *r, const struct gs_pod *p)
{
    if (!r->server_profile || !p->scheduler_name) return true;
    const char *name = r->profile.scheduler_name ? r->profile.scheduler_name : GS_DEFAULT_SCHEDULER;
    return !strcmp(p->scheduler_name, name);
}

static int arrive_due(struct replay *r, int64_t now)
{
    while (r->next_arrival < r->t->npods) {
        size_t i = r->order[r->next_arrival];
        if (r->pods[i].prebound) { /* placed before the first instant */
            r->next_arrival++;
            continue;
        }
        if (r->pods[i].arrival_ns > now) break;
        r->next_arrival++;
        r->arrived++;
        r->arrived_milli += r->pods[i].gpu_milli;
        r->changes++;
        r->changed_ns = now;
        if (!ours(r, r->t->pods[i].pod)) continue; /* another scheduler's: pending, as on the server */
        if (gs_gangq_arrive(r->gq, i, now)) continue;    /* held by the gang queue's mode */
        if (gs_replay_admit_arrive(r->adm, i)) continue; /* held until its workload is admitted */
        int rc = gs_scheduler_add_pod(r->sched, r->t->pods[i].pod);
        if (rc) {
            gs_diags_add(r->d, r->pods[i].key, "cannot queue: %s", gs_strerror(rc));
            return rc;
        }
    }
    return 0;
}

/*--- The cluster at the start ---*/

/* Pods running when the trace starts (a snapshot): on exactly their node and
 * devices, without a decision; their run counts from `started`. */
static int place_running(struct replay *r)
{
    for (size_t i = 0; i < r->t->npods; i++) {
        const struct gs_trace_pod *tp = &r->t->pods[i];
        struct rpod *p = &r->pods[i];
        if (!tp->node) continue;
        int32_t idx = gs_cache_find_node(r->cache, tp->node);
        if (idx < 0) {
            gs_diags_add(r->d, p->key, "runs on node \"%s\", which the cluster does not have", tp->node);
            return GS_EINVAL;
        }
        if (!(tp->started <= 0) || !isfinite(tp->started)) {
            gs_diags_add(r->d, p->key, "started %g: a running pod started at or before the trace start (<= 0)",
                         tp->started);
            return GS_EINVAL;
        }
        const struct gs_node_info *n = gs_cache_node(r->cache, idx);
        if (n->ngpus < 64 && tp->gpus >> n->ngpus) {
            gs_diags_add(r->d, p->key, "GPU mask %#llx names GPUs that node %s (%d GPUs) does not have",
                         (unsigned long long)tp->gpus, tp->node, (int)n->ngpus);
            return GS_EINVAL;
        }
        struct gs_assignment a = {.node = idx, .gpu_mask = tp->gpus,
                                  .milli = tp->milli > 0 ? tp->milli : tp->pod->demand.gpu_milli,
                                  .mem_mib = tp->pod->demand.gpu_mem_mib};
        int rc = gs_cache_add_bound(r->cache, tp->pod, &a);
        if (rc) {
            gs_diags_add(r->d, p->key, "cannot run on node %s with GPU mask %#llx: %s", tp->node,
                         (unsigned long long)tp->gpus, rc == GS_EINVAL ? "it does not fit there" : gs_strerror(rc));
            return rc;
        }
        int64_t started = to_ns(tp->started);
        p->sched_ns = started;
        p->a = a;
        p->on_node = true;
        r->arrived++;
        r->arrived_milli += p->gpu_milli;
        r->scheduled++;
        r->running++;
        emit_at(r, tp->started, GS_SIM_SCHEDULED, p, NULL);
        gs_replay_admit_running(r->adm, i);
        gs_gangq_prebound(r->gq, i, idx, __builtin_popcountll(tp->gpus),
                          p->duration_ns >= 0 ? started + p->duration_ns : -1);
        if (p->duration_ns >= 0 && (rc = heap_push(r, started + p->duration_ns, i, p->run))) return rc;
    }
    return 0;
}

static int cmp_ready(const void *a, const void *b)
{
    const struct ready *x = a, *y = b;
    if (x->t_ns != y->t_ns) return x->t_ns < y->t_ns ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

/* Nodes that become schedulable later (trace->node_ready_at): unschedulable until then. */
static int init_ready(struct replay *r)
{
    if (!r->t->node_ready_at) return 0;
    r->ready = calloc(r->t->nnodes ? r->t->nnodes : 1, sizeof *r->ready);
    if (!r->ready) return GS_ENOMEM;
    for (size_t i = 0; i < r->t->nnodes; i++) {
        double at = r->t->node_ready_at[i];
        const char *name = r->t->nodes[i].name ? r->t->nodes[i].name : "node";
        if (!isfinite(at) || at < 0) {
            gs_diags_add(r->d, name, "ready at %g s: want a time at or after the trace start (>= 0)", at);
            return GS_EINVAL;
        }
        if (at <= 0) continue;
        int32_t idx = gs_cache_find_node(r->cache, name);
        if (idx < 0) return GS_ESTATE;
        gs_cache_set_schedulable(r->cache, idx, false);
        r->ready[r->nready++] = (struct ready){to_ns(at), idx};
    }
    qsort(r->ready, r->nready, sizeof *r->ready, cmp_ready);
    return 0;
}

static void ready_due(struct replay *r, int64_t now)
{
    bool any = false;
    for (; r->next_ready < r->nready && r->ready[r->next_ready].t_ns <= now; r->next_ready++) {
        gs_cache_set_schedulable(r->cache, r->ready[r->next_ready].node, true);
        any = true;
    }
    if (!any) return;
    r->changes++;
    r->changed_ns = now;
    gs_sched_queue_on_event(gs_scheduler_queue(r->sched), GS_EV_NODE_UPDATED); /* waiting pods look again */
}

static void sample(struct replay *r, int64_t now)
{
    struct gs_sim_sample *s = &r->last;
    double cap = r->capacity_milli > 0 ? (double)r->capacity_milli : 1;
    s->t = to_s(now);
    s->pods_arrived = r->arrived;
    s->pods_scheduled = r->scheduled;
    s->pods_running = r->running;
    s->pods_pending = r->arrived - r->scheduled - r->dropped;
    s->arrived_milli = r->arrived_milli;
    s->used_milli = gs_cache_gpu_milli_used(r->cache);
    int64_t idle = 0;
    s->frag_milli = r->frag ? gs_frag_cluster_total(r->frag, r->cache, &idle) : 0;
    s->arrived_pct = 100.0 * (double)s->arrived_milli / cap;
    s->alloc_pct = 100.0 * (double)s->used_milli / cap;
    s->frag_ratio = idle > 0 ? 100.0 * (double)s->frag_milli / (double)idle : 0; /* share of idle GPU */
    if (!r->have100 && s->arrived_pct >= 100) r->have100 = true, r->alloc_at_100 = s->alloc_pct;
    if (!r->have80 && s->arrived_pct >= 80) r->have80 = true, r->frag_at_80 = s->frag_ratio;
    if (r->sink->sample) r->sink->sample(r->sink->ctx, s);
}

/* The next instant anything happens, or INT64_MAX when nothing will. Once
 * no pod is left to arrive or complete, only pods still backing off can
 * change anything; the unschedulable ones would fail again forever. */
static int64_t next_instant(const struct replay *r, int64_t now, bool *tick_only)
{
    int64_t next = INT64_MAX;
    *tick_only = false;
    /* Admission retries waiting workloads every tick, as on the server;
     * once nothing else can happen, only for a while (ADMIT_IDLE_NS). */
    int64_t tick = gs_replay_admit_next_tick(r->adm, now);
    const struct gs_sched_queue *q = gs_scheduler_queue(r->sched);
    if (r->next_arrival == r->t->npods && r->nheap == 0 && gs_sched_queue_backoff_len(q) == 0 &&
        gs_framework_waiting(gs_scheduler_framework(r->sched)) == 0 && r->next_ready == r->nready) {
        if (tick < 0 || tick - r->changed_ns > ADMIT_IDLE_NS) return next;
        *tick_only = true;
        return tick;
    }
    if (r->next_arrival < r->t->npods) next = r->pods[r->order[r->next_arrival]].arrival_ns;
    if (r->nheap && r->heap[0].t_ns < next) next = r->heap[0].t_ns;
    if (r->next_ready < r->nready && r->ready[r->next_ready].t_ns < next) next = r->ready[r->next_ready].t_ns;
    int64_t ready = gs_scheduler_next_wake(r->sched);
    if (ready >= 0 && (ready > now ? ready : now + 1) < next) next = ready > now ? ready : now + 1;
    if (tick >= 0 && tick < next) next = tick, *tick_only = true;
    return next;
}

/* Pods admission still holds when the run ends never reached the scheduler,
 * so no cycle logged them: one "failed" event each, with admission's reason
 * (a quota that does not cover a resource, a pod larger than its quota). */
static void never_admitted(struct replay *r)
{
    if (!r->adm) return;
    for (size_t i = 0; i < r->t->npods; i++) {
        struct rpod *p = &r->pods[i];
        if (p->sched_ns >= 0 || p->failed_logged) continue;
        char *why = gs_replay_admit_why(r->adm, i);
        if (!why) continue;
        emit(r, GS_SIM_FAILED, p, why);
        p->failed_logged = true;
        free(why);
    }
}

static int run_loop(struct replay *r)
{
    int64_t now = 0;
    size_t total = 2 * r->t->npods, step = 0;
    bool tick_only;
    for (int64_t next; (next = next_instant(r, now, &tick_only)) != INT64_MAX;) {
        now = next > now ? next : now;
        gs_clock_set(&r->clock, now);
        uint64_t changes = r->changes;
        if (r->last_gang_waiting) { /* the previous instant's state lasted until now */
            r->gang_wait_ns += (double)(now - r->last_ns);
            r->gang_idle_milli_ns += (double)(r->capacity_milli - r->last_used) * (double)(now - r->last_ns);
        }
        complete_due(r, now);
        ready_due(r, now);
        int rc = arrive_due(r, now);
        /* Admission first, as in the server's rounds: what it admits is scheduled now. */
        if (!rc && r->adm && (rc = gs_replay_admit_cycle(r->adm)) > 0) rc = 0;
        if (!rc && (rc = gs_gangq_cycle(r->gq, now)) > 0) rc = 0;
        if (!rc) rc = r->hook_err;
        if (!rc) rc = schedule_ready(r);
        if (!rc) rc = r->hook_err;
        gs_gangq_check(r->gq);
        r->last_ns = now;
        r->last_used = gs_cache_gpu_milli_used(r->cache);
        r->last_gang_waiting = gs_gangq_gang_pods_waiting(r->gq) > 0;
        if (rc) {
            if (r->d && !r->d->n) gs_diags_add(r->d, "replay", "at %.3f s: %s", to_s(now), gs_strerror(rc));
            return rc;
        }
        if (tick_only && changes == r->changes) continue; /* an admission tick that changed nothing */
        sample(r, now);
        if (r->sink->progress && (++step & 255) == 0)
            r->sink->progress(r->sink->ctx, total ? (double)(r->arrived + r->scheduled) / (double)total : 1);
    }
    never_admitted(r);
    if (r->sink->progress) r->sink->progress(r->sink->ctx, 1.0);
    return 0;
}

/*--- Results ---*/

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v (0 when empty). */
static double percentile(const double *v, size_t n, double p)
{
    if (n == 0) return 0;
    size_t rank = (size_t)ceil(p / 100.0 * (double)n);
    return v[rank ? rank - 1 : 0];
}

static void fill_result(struct replay *r, struct gs_sim_result *res)
{
    snprintf(res->policy, sizeof res->policy, "%s", r->server_profile ? GS_SIM_PROFILE : r->o->policy);
    res->seed = r->o->seed;
    res->nodes = gs_cache_live_nodes(r->cache);
    res->gpus = gs_cache_gpu_count(r->cache);
    res->pods_arrived = r->arrived;
    res->pods_scheduled = r->scheduled;
    res->alloc_pct_final = r->last.alloc_pct;
    res->alloc_pct_at_100 = r->have100 ? r->alloc_at_100 : r->last.alloc_pct;
    res->frag_ratio_at_80 = r->have80 ? r->frag_at_80 : r->last.frag_ratio;
    qsort(r->delays, r->ndelays, sizeof *r->delays, cmp_double);
    res->delay_p50 = percentile(r->delays, r->ndelays, 50);
    res->delay_p90 = percentile(r->delays, r->ndelays, 90);
    res->delay_p99 = percentile(r->delays, r->ndelays, 99);
    res->pods_preempted = r->preempted;
    struct gs_gangq_stats gs;
    gs_gangq_stats(r->gq, &gs);
    res->gangs = gs.gangs;
    res->gangs_started = gs.gangs_started;
    res->partial_gangs = gs.partial;
    res->gang_reservations = gs.reservations;
    res->gang_backfilled = gs.backfilled;
    res->gang_queue = (int)r->gq_mode;
    res->gang_delay_p50 = gs.gang_delay_p50;
    res->gang_delay_p99 = gs.gang_delay_p99;
    res->gang_wait_hours = r->gang_wait_ns / GS_NS_PER_SEC / 3600.0;
    res->gang_idle_gpu_hours = r->gang_idle_milli_ns / 1000.0 / GS_NS_PER_SEC / 3600.0;
    double cap_h = (double)r->capacity_milli / 1000.0 * res->gang_wait_hours;
    res->gang_idle_frac = cap_h > 0 ? res->gang_idle_gpu_hours / cap_h : 0;
}

int gs_sim_run_replay(const struct gs_trace *t, const struct gs_sim_opts *o, const struct gs_sim_sink *sink,
                      struct gs_sim_result *res, struct gs_diags *d)
{
    static const struct gs_sim_sink none = {0};
    struct replay r = {.t = t, .o = o, .sink = sink ? sink : &none, .d = d};
    struct gs_clock wall;
    gs_clock_init_real(&wall);
    int64_t t0 = gs_clock_now(&wall);
    memset(res, 0, sizeof *res);
    int rc = init_pods(&r);
    if (!rc) rc = init_cache(&r);
    if (!rc) rc = init_scheduler(&r);
    if (!rc) rc = init_ready(&r);
    if (!rc) rc = place_running(&r);
    if (!rc) rc = run_loop(&r);
    if (!rc) fill_result(&r, res);
    res->wall_seconds = (double)(gs_clock_now(&wall) - t0) / GS_NS_PER_SEC;
    replay_free(&r);
    return rc;
}

/*--- Features the profile does not run (gs_sim_check) ---*/

static bool profile_runs(const struct gs_profile *pr, const char *name)
{
    for (int pt = 0; pt < GS_PT_COUNT; pt++)
        for (int i = 0; i < pr->npoints[pt]; i++)
            if (!strcmp(pr->points[pt][i].plugin->name, name)) return true;
    return false;
}

static bool pod_claims(const struct gs_pod *p)
{
    return json_array_size(json_object_get(json_object_get(p->doc, "spec"), "resourceClaims")) > 0;
}

/* Is queue q (named by a pod of namespace ns) defined by the trace: a LocalQueue there, or a Queue? */
static bool queue_defined(const struct gs_trace *t, const char *ns, const char *q)
{
    for (size_t i = 0; i < t->nobjects; i++) {
        const struct gs_object *o = t->objects[i];
        if (o->kind != GS_KIND_LOCALQUEUE && o->kind != GS_KIND_QUEUE) continue;
        const struct gs_meta *m = &o->u.generic->meta;
        const char *ons = m->namespace_ ? m->namespace_ : "default";
        if (m->name && !strcmp(m->name, q) && (o->kind == GS_KIND_QUEUE || !strcmp(ons, ns))) return true;
    }
    return false;
}

struct features {
    size_t groups, claims, queued, undefined;
    const char *group, *queue; /* an example of each */
};

static void count_features(const struct gs_trace *t, struct features *f)
{
    memset(f, 0, sizeof *f);
    for (size_t i = 0; i < t->nobjects; i++)
        if (t->objects[i]->kind == GS_KIND_PODGROUP) {
            if (!f->groups++) f->group = t->objects[i]->u.podgroup->meta.name;
        }
    for (size_t i = 0; i < t->npods; i++) {
        const struct gs_pod *p = t->pods[i].pod;
        const char *ns = p->meta.namespace_ ? p->meta.namespace_ : "default";
        if (!f->groups && p->pod_group && *p->pod_group) f->group = p->pod_group; /* named, not defined */
        f->claims += pod_claims(p);
        if (!p->queue_name || !*p->queue_name) continue;
        f->queued++;
        if (!queue_defined(t, ns, p->queue_name) && !f->undefined++) f->queue = p->queue_name;
    }
}

int gs_sim_check(const struct gs_trace *t, const struct gs_sim_opts *o, struct gs_diags *warnings, struct gs_diags *d)
{
    struct features f;
    count_features(t, &f);
    if (o->mode == GS_SIM_FGD) {
        if (f.groups || f.queued)
            gs_diags_add(warnings, f.groups ? "gangs" : "admission",
                         "the fgd experiment places each pod once, on its own: %s%s%s are not run; use --experiment "
                         "replay to run them as the server does",
                         f.groups ? "PodGroups (gangs)" : "", f.groups && f.queued ? " and " : "",
                         f.queued ? "queues (admission)" : "");
        return 0;
    }
    struct replay r = {.t = t, .o = o, .d = d};
    int rc = build_profile(&r);
    if (!rc) {
        char what[400];
        const char *name = r.profile.scheduler_name ? r.profile.scheduler_name : GS_DEFAULT_SCHEDULER;
        if (r.server_profile && !o->config_path) snprintf(what, sizeof what, "the server's default profile");
        else if (r.server_profile) snprintf(what, sizeof what, "profile \"%s\" of --config %s", name, o->config_path);
        else snprintf(what, sizeof what, "profile \"%s\" (%s with --policy %s)", name,
                      o->config_path ? "--config's plugins" : "kube's default plugins", o->policy);
        if ((f.groups || f.group) && !profile_runs(&r.profile, "Coscheduling"))
            gs_diags_add(warnings, "gangs",
                         "the workload has PodGroups (%s%s) but %s does not run Coscheduling: gang members are "
                         "placed one by one and partial gangs hold GPUs; drop --policy to run the server's profile, "
                         "or enable Coscheduling in --config",
                         f.group ? f.group : "", f.groups > 1 ? ", ..." : "", what);
        if (f.claims && !profile_runs(&r.profile, "DynamicResources"))
            gs_diags_add(warnings, "claims",
                         "%zu pod%s claim devices (spec.resourceClaims) but %s does not run DynamicResources: the "
                         "claims are not allocated; drop --policy to run the server's profile, or enable "
                         "DynamicResources in --config",
                         f.claims, f.claims == 1 ? "" : "s", what);
        size_t others = 0;
        const char *other = NULL;
        for (size_t i = 0; i < t->npods; i++)
            if (!ours(&r, t->pods[i].pod) && !others++) other = t->pods[i].pod->scheduler_name;
        if (others)
            gs_diags_add(warnings, "schedulerName",
                         "%zu pod%s name schedulerName \"%s\" but the replay runs only %s: they stay pending, as the "
                         "server leaves them to that scheduler; set their spec.schedulerName to \"%s\", or give "
                         "--config only that scheduler's profile",
                         others, others == 1 ? "" : "s", other, what, name);
        if (f.undefined)
            gs_diags_add(warnings, "admission",
                         "%zu pod%s name queue \"%s\" (label kueue.x-k8s.io/queue-name) but the workload defines no "
                         "LocalQueue or Queue of that name: admission holds them (UnknownQueue) as the server "
                         "would; add the LocalQueue and ClusterQueue (or Queue) documents",
                         f.undefined, f.undefined == 1 ? "" : "s", f.queue);
    }
    json_decref(r.policy_args);
    if (r.have_cfg) gs_sched_config_free(&r.cfg);
    return rc;
}
