/*
 * tenants.c - the multi-tenant experiment (see tenants.h): a trace split
 * across tenants with bursts and gangs, replayed on a simulated clock
 * through admission and the scheduler driver, or through the driver alone.
 *
 * The loop is replay.c's, with admission in front of the scheduling queue:
 * at each instant (an arrival, a completion, a backoff ending, a sample
 * tick) it completes the pods whose time is up (a pod that ends before the
 * rest of its workload gives its quota back; the workload finishes when its
 * last pod does), submits the arrivals, runs admission cycles (admitted
 * workloads' pods enter the scheduler; evicted ones leave it through the
 * eviction callback and wait to be admitted again, starting over) and
 * schedules what they admitted, until a cycle admits nothing. A pod's
 * duration counts from its binding; a workload's waiting time runs from its
 * arrival to the binding of its last pod.
 */
#include "sim/tenants.h"

#include "core/clock.h"
#include "sched/admission/admission.h"
#include "sched/scheduler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_ADMIT_ROUNDS 64 /* admission cycles per instant */

struct twl {
    int tenant;
    size_t first, npods;     /* pods order[first .. first + npods) */
    int64_t arrival_ns, duration_ns, gpu_milli;
    int32_t adm;             /* admission id, -1 before submission */
    size_t nbound, ndone;
    bool gang, waited;
};

struct tpod {
    size_t wl;
    char *key;
    bool bound, done;
    uint32_t gen;            /* bumped on eviction: stale completions are ignored */
};

struct done {
    int64_t t_ns;
    size_t pod;
    uint32_t gen;
};

struct tenants {
    const struct gs_trace *t;
    const struct gs_tenants_opts *o;
    struct gs_diags *d;
    struct gs_clock clock;
    struct gs_cache *cache;
    struct gs_queue_tree tree;
    struct gs_admission *adm;
    struct gs_sched_config cfg;
    struct gs_profile prof;
    json_t *hold_args;
    struct gs_scheduler *sched;
    struct twl *w;
    size_t nw, next;
    size_t *order;           /* pod indices grouped by workload */
    struct tpod *p;
    struct done *heap;
    size_t nheap, capheap;
    int64_t used[GS_TENANTS_MAX], pending[GS_TENANTS_MAX], capacity;
    double *wait_small, *wait_large;
    size_t nsmall, nlarge;
    int64_t preemptions, finished;
    double jain_sum, share_sum[GS_TENANTS_MAX], ent_sum[GS_TENANTS_MAX], jain_min;
    int64_t contended;
    double idle_sum;
    json_t *queues;
    bool snapped;
    void (*sample)(void *, const struct gs_tenants_point *);
    void *ctx;
};

static int64_t to_ns(double s) { return (int64_t)llround(s * (double)GS_NS_PER_SEC); }

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33, x *= 0xff51afd7ed558ccdULL, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/*--- Completion heap ---*/

static bool done_less(const struct done *a, const struct done *b)
{
    return a->t_ns != b->t_ns ? a->t_ns < b->t_ns : a->pod < b->pod;
}

static int heap_push(struct tenants *s, struct done x)
{
    if (s->nheap == s->capheap) {
        size_t cap = s->capheap ? 2 * s->capheap : 256;
        struct done *h = realloc(s->heap, cap * sizeof *h);
        if (!h) return GS_ENOMEM;
        s->heap = h;
        s->capheap = cap;
    }
    size_t i = s->nheap++;
    s->heap[i] = x;
    for (; i && done_less(&s->heap[i], &s->heap[(i - 1) / 2]); i = (i - 1) / 2) {
        struct done tmp = s->heap[i];
        s->heap[i] = s->heap[(i - 1) / 2];
        s->heap[(i - 1) / 2] = tmp;
    }
    return 0;
}

static struct done heap_pop(struct tenants *s)
{
    struct done top = s->heap[0];
    s->heap[0] = s->heap[--s->nheap];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < s->nheap && done_less(&s->heap[l], &s->heap[m])) m = l;
        if (l + 1 < s->nheap && done_less(&s->heap[l + 1], &s->heap[m])) m = l + 1;
        if (m == i) break;
        struct done tmp = s->heap[i];
        s->heap[i] = s->heap[m];
        s->heap[m] = tmp;
        i = m;
    }
    return top;
}

/*--- The scenario ---*/

static int64_t pod_gpu(const struct gs_pod *p) { return (int64_t)p->demand.gpu_count * p->demand.gpu_milli; }

struct arrival {
    int64_t t_ns;
    size_t pod;
    int tenant;
};

static int cmp_arrival(const void *a, const void *b)
{
    const struct arrival *x = a, *y = b;
    if (x->t_ns != y->t_ns) return x->t_ns < y->t_ns ? -1 : 1;
    return x->pod < y->pod ? -1 : x->pod > y->pod;
}

/* Tenants, bursts and gangs: fills s->w (by arrival) and s->order. */
static int build_workloads(struct tenants *s)
{
    size_t n = s->t->npods;
    int nt = s->o->ntenants;
    int64_t burst = to_ns(s->o->burst_s);
    struct arrival *arr = calloc(n ? n : 1, sizeof *arr);
    s->w = calloc(n ? n : 1, sizeof *s->w);
    s->order = calloc(n ? n : 1, sizeof *s->order);
    s->p = calloc(n ? n : 1, sizeof *s->p);
    bool *used = calloc(n ? n : 1, sizeof *used);
    if (!arr || !s->w || !s->order || !s->p || !used) {
        free(arr), free(used);
        return GS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        int k = (int)(mix(s->o->seed * 0x9e3779b97f4a7c15ULL + i) % (uint64_t)nt);
        int64_t t = to_ns((s->t->pods[i].arrival > 0 ? s->t->pods[i].arrival : 0) / s->o->speedup);
        int64_t shift = burst * k / nt; /* each tenant's bursts start at its own offset */
        arr[i] = (struct arrival){((t + shift) / burst) * burst + (burst - shift) % burst, i, k};
    }
    qsort(arr, n, sizeof *arr, cmp_arrival);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (used[i]) continue;
        const struct gs_trace_pod *tp = &s->t->pods[arr[i].pod];
        struct twl *w = &s->w[s->nw++];
        *w = (struct twl){.tenant = arr[i].tenant, .first = at, .arrival_ns = arr[i].t_ns, .adm = -1};
        size_t members = 1;
        uint64_t h = mix(s->o->seed ^ (arr[i].pod * 0x2545f4914f6cdd1dULL));
        if (tp->pod->demand.gpu_count >= 1 && tp->pod->demand.gpu_milli == GS_GPU_MILLI && s->o->gang_fraction > 0 &&
            (double)(h % 10000) < s->o->gang_fraction * 10000)
            members = 2 + (size_t)((h >> 20) % 3);
        used[i] = true;
        s->order[at++] = arr[i].pod;
        for (size_t j = i + 1; j < n && w->npods + 1 < members; j++) { /* the tenant's next whole-GPU pods */
            const struct gs_pod *q = s->t->pods[arr[j].pod].pod;
            if (used[j] || arr[j].tenant != w->tenant || q->demand.gpu_milli != GS_GPU_MILLI) continue;
            used[j] = true;
            s->order[at++] = arr[j].pod;
            w->npods++;
        }
        w->npods++;
        w->gang = w->npods > 1;
        for (size_t k = w->first; k < w->first + w->npods; k++) {
            const struct gs_trace_pod *m = &s->t->pods[s->order[k]];
            int64_t dur = m->duration >= 0 ? to_ns(m->duration) : INT64_MAX / 4;
            if (dur > w->duration_ns) w->duration_ns = dur;
            w->gpu_milli += pod_gpu(m->pod);
            s->p[s->order[k]].wl = (size_t)(w - s->w);
        }
    }
    free(arr), free(used);
    for (size_t i = 0; i < n; i++) {
        char key[512];
        gs_meta_key(&s->t->pods[i].pod->meta, key, sizeof key);
        if (!(s->p[i].key = strdup(key))) return GS_ENOMEM;
    }
    return 0;
}

/*--- Setup ---*/

static int build_tree(struct tenants *s)
{
    const char *res[] = {GS_RES_GPU, GS_RES_CPU, GS_RES_MEMORY};
    int64_t total[3] = {s->capacity, 0, 0};
    for (int32_t i = 0; i < gs_cache_node_count(s->cache); i++) {
        const struct gs_node_info *n = gs_cache_node(s->cache, i);
        total[1] += n->cpu_alloc;
        total[2] += n->mem_alloc * 1000;
    }
    double wsum = 0;
    for (int k = 0; k < s->o->ntenants; k++) wsum += s->o->weights[k];
    gs_queue_tree_init(&s->tree);
    for (int k = 0; k < s->o->ntenants; k++) {
        char name[32];
        snprintf(name, sizeof name, "tenant-%c", 'a' + k);
        int64_t g[3];
        for (int r = 0; r < 3; r++) g[r] = (int64_t)((double)total[r] * s->o->weights[k] / wsum);
        struct gs_qt_queue_spec q = {.name = name, .weight = s->o->weights[k], .res = res, .guarantee = g, .nres = 3,
                                     .within = GS_PREEMPT_NEVER, .reclaim = GS_PREEMPT_ANY};
        int rc = gs_queue_tree_add_queue(&s->tree, &q);
        if (rc) return rc;
    }
    int rc = gs_queue_tree_finalize(&s->tree, s->d);
    for (int r = 0; !rc && r < 3; r++) rc = gs_queue_tree_set_capacity(&s->tree, res[r], total[r]);
    return rc;
}

static void on_evict(void *ctx, const struct gs_pod *pod);

static int build_profile(struct tenants *s)
{
    int rc = gs_sched_config_default(&s->cfg);
    if (rc) return rc;
    s->prof = s->cfg.profiles[0];
    if (s->o->policy) {
        const struct gs_plugin *p = gs_plugin_lookup(s->o->policy);
        const struct gs_plugin *const *all = gs_plugin_all();
        for (size_t i = 0; !p && all && all[i]; i++)
            if (!strcasecmp(all[i]->name, s->o->policy)) p = all[i];
        if (!p || !p->score) {
            gs_diags_add(s->d, "policy", "unknown placement policy \"%s\"", s->o->policy);
            return GS_EINVAL;
        }
        s->prof.points[GS_PT_SCORE][0] = (struct gs_profile_plugin){.plugin = p, .weight = 1};
        s->prof.npoints[GS_PT_SCORE] = 1;
        s->prof.npoints[GS_PT_PRE_SCORE] = 0;
        if (p->pre_score) s->prof.points[GS_PT_PRE_SCORE][s->prof.npoints[GS_PT_PRE_SCORE]++].plugin = p;
    }
    if (!s->adm || s->prof.npoints[GS_PT_FILTER] >= GS_MAX_PLUGINS_PER_POINT || s->prof.nargs >= GS_MAX_PLUGINS_PER_POINT * 4)
        return 0;
    /* Nodes freed by reclaim are held for the claimant. */
    s->hold_args = gs_admission_plugin_args(s->adm);
    if (!s->hold_args) return GS_ENOMEM;
    s->prof.points[GS_PT_FILTER][s->prof.npoints[GS_PT_FILTER]++] =
        (struct gs_profile_plugin){.plugin = &gs_admission_hold_plugin, .weight = 1};
    s->prof.args[s->prof.nargs] = s->hold_args;
    s->prof.args_names[s->prof.nargs++] = gs_admission_hold_plugin.name;
    return 0;
}

static int setup(struct tenants *s)
{
    gs_clock_init_sim(&s->clock, 0);
    if (!(s->cache = gs_cache_new(&s->clock))) return GS_ENOMEM;
    for (size_t i = 0; i < s->t->nnodes; i++) /* node i kept when the running share crosses an integer */
        if (floor((double)(i + 1) * s->o->node_fraction) > floor((double)i * s->o->node_fraction) &&
            gs_cache_add_node_spec(s->cache, &s->t->nodes[i]) < 0)
            return GS_EINVAL;
    s->capacity = gs_cache_gpu_count(s->cache) * GS_GPU_MILLI;
    int rc = build_workloads(s);
    if (!rc && s->o->admission) rc = build_tree(s);
    if (!rc && s->o->admission) {
        const struct gs_tenants_opts *o = s->o;
        double hw = o->history_weight == 0 ? 0.5 : o->history_weight < 0 ? 0 : o->history_weight;
        struct gs_admission_opts ao = {.halflife_ns = to_ns(o->halflife_s), .history_weight = hw,
                                       .starvation_wait_ns = to_ns(o->starvation_s), .evict = on_evict,
                                       .ctx = s, .max_checks = 512,
                                       .reclaim_min_runtime_ns = to_ns(o->min_runtime_s),
                                       .reclaim_wait_ns = to_ns(o->reclaim_wait_s),
                                       .impatient_share = o->impatient_share,
                                       .max_preemptions = o->max_preemptions, .evict_charge = o->evict_charge,
                                       .hold_ns = to_ns(o->hold_s), .reserve_horizon_ns = to_ns(o->reserve_horizon_s),
                                       .reserve_under_share = o->reserve_under_share,
                                       .share_gate = o->share_gate, .pin_placement = o->pin_placement,
                                       .pin_large = o->pin_large, .pin_above = o->pin_above,
                                       .drain = o->drain, .drain_strict = o->drain_strict,
                                       .consolidate_moves = o->consolidate_moves,
                                       .consolidate_own = o->consolidate_own,
                                       .reclaim_above_nominal = o->reclaim_above_nominal,
                                       .global_victims = o->global_victims,
                                       .victim_cost = o->victim_cost};
        rc = gs_admission_new(&s->tree, s->cache, &s->clock, &ao, &s->adm, s->d);
    }
    if (!rc) rc = build_profile(s);
    struct gs_scheduler_opts so = {.profile = &s->prof, .seed = s->o->seed};
    if (!rc) rc = gs_scheduler_new(&s->clock, s->cache, &so, &s->sched, s->d);
    /* The experiment reads no failure text: skip formatting it in each failed cycle. */
    if (!rc) gs_framework_set_diagnosis_text(gs_scheduler_framework(s->sched), false);
    s->wait_small = calloc(s->nw ? s->nw : 1, sizeof *s->wait_small);
    s->wait_large = calloc(s->nw ? s->nw : 1, sizeof *s->wait_large);
    return rc ? rc : s->wait_small && s->wait_large ? 0 : GS_ENOMEM;
}

static void teardown(struct tenants *s)
{
    gs_scheduler_free(s->sched);
    json_decref(s->queues);
    gs_admission_free(s->adm);
    json_decref(s->hold_args);
    if (s->cfg.profiles) gs_sched_config_free(&s->cfg);
    gs_queue_tree_free(&s->tree);
    if (s->cache) gs_cache_free(s->cache);
    for (size_t i = 0; s->p && i < s->t->npods; i++) free(s->p[i].key);
    free(s->p), free(s->w), free(s->order), free(s->heap), free(s->wait_small), free(s->wait_large);
}

/*--- Events ---*/

static size_t pod_index(const struct tenants *s, const struct gs_pod *pod)
{
    /* Trace pods live in one array of pointers; a linear search is rare (evictions only). */
    for (size_t i = 0; i < s->t->npods; i++)
        if (s->t->pods[i].pod == pod) return i;
    return SIZE_MAX;
}

static void on_evict(void *ctx, const struct gs_pod *pod)
{
    struct tenants *s = ctx;
    size_t i = pod_index(s, pod);
    if (i == SIZE_MAX) return;
    struct tpod *p = &s->p[i];
    struct twl *w = &s->w[p->wl];
    gs_scheduler_delete_pod(s->sched, p->key);
    if (p->bound) { /* an unbound pod is still counted as pending */
        s->used[w->tenant] -= pod_gpu(pod);
        s->pending[w->tenant] += pod_gpu(pod);
        w->nbound--;
    }
    if (p->done) { /* the workload starts over: its finished pods run again */
        s->pending[w->tenant] += pod_gpu(pod);
        w->ndone--;
    }
    p->bound = p->done = false;
    p->gen++;
    if (pod == s->t->pods[s->order[w->first]].pod) s->preemptions++; /* once per workload */
}

static int bound(struct tenants *s, const struct gs_pod *pod, int64_t now)
{
    size_t i = pod_index(s, pod);
    if (i == SIZE_MAX) return GS_ESTATE;
    struct tpod *p = &s->p[i];
    struct twl *w = &s->w[p->wl];
    p->bound = true;
    w->nbound++;
    s->used[w->tenant] += pod_gpu(pod);
    s->pending[w->tenant] -= pod_gpu(pod);
    if (w->nbound == w->npods && !w->waited) {
        w->waited = true;
        double wait = (double)(now - w->arrival_ns) / GS_NS_PER_SEC;
        if (w->gang || w->gpu_milli >= 4 * GS_GPU_MILLI) s->wait_large[s->nlarge++] = wait;
        else if (w->gpu_milli <= GS_GPU_MILLI) s->wait_small[s->nsmall++] = wait;
    }
    int64_t dur = s->t->pods[i].duration >= 0 ? to_ns(s->t->pods[i].duration) : -1;
    return dur >= 0 ? heap_push(s, (struct done){now + dur, i, p->gen}) : 0;
}

static void complete_due(struct tenants *s, int64_t now)
{
    while (s->nheap && s->heap[0].t_ns <= now) {
        struct done x = heap_pop(s);
        struct tpod *p = &s->p[x.pod];
        if (x.gen != p->gen || !p->bound) continue;
        struct twl *w = &s->w[p->wl];
        gs_scheduler_delete_pod(s->sched, p->key);
        p->bound = false;
        p->done = true;
        s->used[w->tenant] -= pod_gpu(s->t->pods[x.pod].pod);
        if (++w->ndone == w->npods) {
            s->finished++;
            if (s->adm) gs_admission_finish(s->adm, w->adm);
        } else if (s->adm) { /* gang members end at their own times: the finished one's quota is free */
            gs_admission_pod_finished(s->adm, w->adm, s->t->pods[x.pod].pod);
        }
    }
}

static int enqueue_pods(struct tenants *s, const struct twl *w)
{
    for (size_t k = w->first; k < w->first + w->npods; k++) {
        if (s->p[s->order[k]].done || s->p[s->order[k]].bound) continue;
        int rc = gs_scheduler_add_pod(s->sched, s->t->pods[s->order[k]].pod);
        if (rc && rc != GS_EEXIST) return rc;
    }
    return 0;
}

static int arrive_due(struct tenants *s, int64_t now)
{
    const struct gs_pod *pods[8];
    for (; s->next < s->nw && s->w[s->next].arrival_ns <= now; s->next++) {
        struct twl *w = &s->w[s->next];
        s->pending[w->tenant] += w->gpu_milli;
        if (!s->adm) {
            int rc = enqueue_pods(s, w);
            if (rc) return rc;
            continue;
        }
        for (size_t k = 0; k < w->npods; k++) pods[k] = s->t->pods[s->order[w->first + k]].pod;
        char key[64], q[32];
        snprintf(key, sizeof key, "wl/%zu", s->next);
        snprintf(q, sizeof q, "tenant-%c", 'a' + w->tenant);
        struct gs_workload_spec spec = {.key = key, .queue = q, .pods = pods, .npods = w->npods,
                                        .est_duration_ns = w->duration_ns};
        w->adm = gs_admission_submit(s->adm, &spec);
        if (w->adm < 0) return w->adm;
    }
    return 0;
}

static int admit(struct tenants *s, size_t *nadmitted)
{
    struct gs_admission_result r;
    int rc = gs_admission_cycle(s->adm, &r);
    *nadmitted = rc ? 0 : r.nadmitted;
    for (size_t i = 0; !rc && i < r.nadmitted; i++) {
        const struct gs_workload *aw = gs_admission_workload(s->adm, r.admitted[i]);
        size_t idx = (size_t)strtoul(aw->key + 3, NULL, 10);
        rc = enqueue_pods(s, &s->w[idx]);
    }
    return rc;
}

static int schedule_ready(struct tenants *s, int64_t now)
{
    struct gs_cycle_result c;
    int rc;
    while ((rc = gs_scheduler_run_one(s->sched, &c)) > 0)
        if (c.code == GS_SUCCESS && (rc = bound(s, c.pod, now)) < 0) return rc;
    return rc;
}

/* Admission caps the placement checks of one cycle, so after a burst it
 * runs again (once the scheduler has bound what it admitted) until a cycle
 * admits nothing: the burst is admitted at the instant it arrives, as the
 * FIFO baseline schedules it, not one slice per later event. */
static int admit_and_schedule(struct tenants *s, int64_t now)
{
    size_t admitted = 1;
    int rc = 0;
    for (int round = 0; !rc && admitted && round < MAX_ADMIT_ROUNDS; round++) {
        if (s->adm) rc = admit(s, &admitted);
        else admitted = 0;
        if (!rc) rc = schedule_ready(s, now);
    }
    return rc;
}

/*--- Samples ---*/

/* Water-filling of cap over demands by weight. */
static void entitle(const double *w, const double *demand, int n, double cap, double *out)
{
    bool active[GS_TENANTS_MAX];
    for (int k = 0; k < n; k++) out[k] = 0, active[k] = demand[k] > 0;
    for (int round = 0; round < n && cap > 1e-9; round++) {
        double ws = 0, spent = 0;
        for (int k = 0; k < n; k++) ws += active[k] ? w[k] : 0;
        if (ws <= 0) break;
        for (int k = 0; k < n; k++) {
            if (!active[k]) continue;
            double give = cap * w[k] / ws;
            if (out[k] + give >= demand[k]) give = demand[k] - out[k], active[k] = false;
            out[k] += give;
            spent += give;
        }
        cap -= spent;
    }
}

static void take_sample(struct tenants *s, int64_t now)
{
    struct gs_tenants_point pt = {.t = (double)now / GS_NS_PER_SEC, .ntenants = s->o->ntenants, .jain = -1};
    int n = s->o->ntenants, with = 0;
    for (int k = 0; k < n; k++) {
        pt.used[k] = (double)s->used[k] / GS_GPU_MILLI;
        pt.demand[k] = (double)(s->used[k] + s->pending[k]) / GS_GPU_MILLI;
    }
    double cap = (double)s->capacity / GS_GPU_MILLI;
    entitle(s->o->weights, pt.demand, n, cap, pt.entitled);
    double sx = 0, sxx = 0, dem = 0;
    for (int k = 0; k < n; k++) {
        dem += pt.demand[k];
        if (pt.entitled[k] <= 0) continue;
        double x = pt.used[k] / pt.entitled[k];
        sx += x, sxx += x * x, with++;
    }
    if (with >= 2 && sxx > 0 && dem > cap) { /* contended: fairness matters */
        pt.jain = sx * sx / (with * sxx);
        s->jain_sum += pt.jain;
        if (pt.jain < s->jain_min) s->jain_min = pt.jain;
        double idle = 1;
        for (int k = 0; k < n; k++) {
            s->share_sum[k] += pt.used[k] / cap, s->ent_sum[k] += pt.entitled[k] / cap;
            idle -= pt.used[k] / cap;
        }
        s->idle_sum += idle;
        s->contended++;
    }
    if (s->sample) s->sample(s->ctx, &pt);
}

/*--- The loop ---*/

static int64_t next_instant(struct tenants *s, int64_t now, int64_t next_sample)
{
    int64_t next = INT64_MAX, wake = gs_scheduler_next_wake(s->sched);
    if (s->next < s->nw) next = s->w[s->next].arrival_ns;
    if (s->nheap && s->heap[0].t_ns < next) next = s->heap[0].t_ns;
    if (wake >= 0 && (wake > now ? wake : now + 1) < next) next = wake > now ? wake : now + 1;
    if (next != INT64_MAX && next_sample < next) next = next_sample;
    return next;
}

static int run_loop(struct tenants *s)
{
    int64_t now = 0, step = to_ns(s->o->sample_s), next_sample = 0;
    for (int64_t next; (next = next_instant(s, now, next_sample)) != INT64_MAX;) {
        now = next > now ? next : now;
        gs_clock_set(&s->clock, now);
        complete_due(s, now);
        int rc = arrive_due(s, now);
        if (!rc) rc = admit_and_schedule(s, now);
        if (rc < 0) {
            gs_diags_add(s->d, "tenants", "simulation failed: %s", gs_strerror(rc));
            return rc;
        }
        if (now >= next_sample) {
            take_sample(s, now);
            next_sample = (now / step + 1) * step;
        }
        if (s->adm && s->o->want_queues && !s->snapped && s->o->queues_at_s >= 0 && now >= to_ns(s->o->queues_at_s)) {
            s->snapped = true;
            s->queues = gs_admission_queues_json(s->adm, 20, 5);
        }
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void percentiles(double *v, size_t n, double *out)
{
    static const double ps[3] = {50, 90, 99};
    qsort(v, n, sizeof *v, cmp_double);
    for (int i = 0; i < 3; i++) {
        size_t rank = (size_t)ceil(ps[i] / 100.0 * (double)n);
        out[i] = n ? v[rank ? rank - 1 : 0] : 0;
    }
}

static void fill_result(struct tenants *s, struct gs_tenants_result *res)
{
    res->ntenants = s->o->ntenants;
    res->gpus = s->capacity / GS_GPU_MILLI;
    res->workloads = (int64_t)s->nw;
    for (size_t i = 0; i < s->nw; i++) res->gangs += s->w[i].gang;
    res->finished = s->finished;
    res->preemptions = s->preemptions;
    for (int k = 0; k < s->o->ntenants; k++) {
        res->weight[k] = s->o->weights[k];
        res->mean_share[k] = s->contended ? s->share_sum[k] / (double)s->contended : 0;
        res->mean_entitled[k] = s->contended ? s->ent_sum[k] / (double)s->contended : 0;
    }
    res->idle_share = s->contended ? s->idle_sum / (double)s->contended : 0;
    if (s->adm) {
        struct gs_admission_stats st;
        gs_admission_stats(s->adm, &st);
        res->spared_min_runtime = st.spared_min_runtime;
        res->spared_fair_share = st.spared_fair_share;
        res->spared_cap = st.spared_cap;
        res->reclaims_deferred = st.reclaims_deferred;
        res->max_workload_preemptions = st.max_workload_preemptions;
        res->charged_gpu_hours = st.charged_gpu_hours;
        res->evictions = st.evictions;
        res->victim_searches = st.victim_searches;
        res->victim_searches_won = st.victim_searches_won;
        res->nodewise_won = st.nodewise_won;
        res->nodewise_refused = st.nodewise_refused;
        res->nodewise_unproven = st.nodewise_unproven;
        res->reservations = st.reservations;
        res->reservations_beyond_horizon = st.reservations_beyond_horizon;
        res->share_gated = st.share_gated;
        res->drains = st.drains;
        res->drains_beyond_horizon = st.drains_beyond_horizon;
        res->consolidations = st.consolidations;
        res->consolidation_moves = st.consolidation_moves;
        res->consolidation_own = st.consolidation_own;
        res->consolidation_own_waiting = st.consolidation_own_waiting;
        res->pins_expired = st.pins_expired;
        res->claims_unplaced = st.claims_unplaced;
        res->evictions_unplaced = st.evictions_unplaced;
        res->evicted_gpus = (double)st.evicted_gpu_milli / GS_GPU_MILLI;
        if (s->o->want_queues && !s->snapped) s->queues = gs_admission_queues_json(s->adm, 20, 5);
    }
    res->queues = s->queues;
    s->queues = NULL;
    res->jain_mean = s->contended ? s->jain_sum / (double)s->contended : 1;
    res->jain_min = s->contended ? s->jain_min : 1;
    percentiles(s->wait_small, s->nsmall, res->wait_small);
    percentiles(s->wait_large, s->nlarge, res->wait_large);
}

int gs_tenants_run(const struct gs_trace *t, const struct gs_tenants_opts *in,
                   void (*sample)(void *ctx, const struct gs_tenants_point *p), void *ctx,
                   struct gs_tenants_result *res, struct gs_diags *d)
{
    struct gs_tenants_opts o = *in;
    if (o.ntenants == 0) o.ntenants = 3;
    if (o.ntenants < 2 || o.ntenants > GS_TENANTS_MAX) {
        gs_diags_add(d, "tenants", "want 2 to %d tenants, got %d", GS_TENANTS_MAX, o.ntenants);
        return GS_EINVAL;
    }
    for (int k = 0; k < o.ntenants; k++)
        if (o.weights[k] <= 0) o.weights[k] = k == 1 ? 2 : 1;
    if (o.burst_s <= 0) o.burst_s = 1800;
    if (o.gang_fraction == 0) o.gang_fraction = 0.3;
    if (o.sample_s <= 0) o.sample_s = 600;
    if (o.halflife_s <= 0) o.halflife_s = 3600;
    if (o.starvation_s <= 0) o.starvation_s = 1800;
    if (o.speedup <= 0) o.speedup = 1;
    if (o.node_fraction <= 0 || o.node_fraction > 1) o.node_fraction = 1;
    struct tenants s = {.t = t, .o = &o, .d = d, .sample = sample, .ctx = ctx, .jain_min = 1};
    struct gs_clock wall;
    gs_clock_init_real(&wall);
    int64_t t0 = gs_clock_now(&wall);
    memset(res, 0, sizeof *res);
    int rc = setup(&s);
    if (!rc) rc = run_loop(&s);
    if (!rc) fill_result(&s, res);
    res->wall_seconds = (double)(gs_clock_now(&wall) - t0) / GS_NS_PER_SEC;
    teardown(&s);
    return rc;
}
