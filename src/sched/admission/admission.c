/*
 * admission.c - the admission loop: pending workloads per leaf queue, the
 * fair-share pick, quota + placement checks, reclaim/preemption with victims
 * proved on the cache, holds for claimants, the starvation reservation and
 * backfill, and the per-queue status (see admission.h for the behaviour).
 *
 * Cost control. A try is a quota check (a walk up the tree) and, when quota
 * fits, a placement check (filters over the nodes for each pod). A workload
 * that failed is not tried again until something was released (a workload
 * finished or was evicted, a hold or reservation ended, capacity was added):
 * a counter, release_seq, is bumped on each such event and stored in the
 * workload when it fails. Admitting others only makes fitting harder, so
 * skipping it meanwhile never loses an admission. Placement checks per cycle
 * are capped as well (opts.max_checks).
 */
#include "sched/admission/admission.h"

#include "sched/admission/dra_admit.h"
#include "sched/admission/drain.h"
#include "sched/admission/nodeplan.h"
#include "sched/admission/placement.h"
#include "sched/strmap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VICTIM_CHECKS 32 /* placement checks while searching victims for one claimant */
#define MAX_SHADOW_STEPS 1024 /* running workloads released while estimating a start */
#define MAX_SHADOW_CHECKS 48
#define MAX_DRAINS 32        /* whole-node drains at once (opts.drain) */
#define MAX_DRAIN_PLANS 4    /* drains planned per cycle */

struct leafq {
    int32_t *v; /* pending workload ids, in admission order */
    size_t n, cap;
};

struct runq {
    int32_t *v;       /* admitted workload ids, by (admitted_ns, id) */
    size_t n, cap;
    size_t submitted; /* workloads ever submitted to the leaf: cap is at least this */
    size_t capped;    /* of them, admitted with their evictions at the cap of the window */
};

/* A hold keeps other pods off nodes[0..n) for the claimant wl. A pin
 * (opts.pin_placement) instead keeps wl's own pod i on nodes[i], the node the
 * placement check chose, until its pods are bound. */
struct hold {
    int32_t wl;
    int64_t until_ns;
    int32_t *nodes;
    size_t n;
    bool pin;
    int32_t nvictims; /* a reclaim's hold: the evictions it was made with */
};

struct ids {
    int32_t *v;
    size_t n, cap;
};

/* opts.drain: nodes kept for a gang of a queue below its fair share (drain.h). */
struct drain {
    int32_t wl;
    int64_t start;  /* when its GPUs are estimated to be free */
    struct ids nodes;
};

struct gs_admission {
    const struct gs_queue_tree *t;
    struct gs_cache *cache;
    const struct gs_clock *clock;
    struct gs_admission_opts o;
    struct gs_quota q;
    struct gs_fairshare fs;
    struct gs_placer *placer;
    struct gs_workload **w;
    size_t n, cap;
    struct leafq *lq;
    int64_t *q_preempt;
    int64_t *q_caused;    /* evictions each leaf's claimants caused */
    struct gs_admission_stats st;
    int searches;         /* victim searches this cycle */
    uint64_t cycle_no;
    uint64_t res_fail_seq; /* release_seq when no reservation could be made */
    double (*pend)[GS_QT_MAX_RES];
    bool *cand;
    uint64_t release_seq, seq;
    struct ids adm, ev;
    struct ids kept; /* admitted this cycle, pods assumed in the cache until it ends */
    /* Per leaf, its admitted workloads by admission time: victim and
     * end-time searches visit the running workloads of the queues concerned
     * instead of every workload ever submitted, and a victim search learns
     * whether a queue has a workload too young to evict from its newest one.
     * Each list has room for every workload submitted to its leaf, so
     * admit() never allocates. */
    struct runq *runq;
    struct gs__strmap by_key; /* workload key -> id + 1 (keys borrowed from the workloads) */
    struct hold *holds;
    size_t nholds, capholds;
    int32_t res_wl;
    int64_t res_start;
    struct ids res_nodes;
    struct drain drains[MAX_DRAINS];
    size_t ndrains;
    uint64_t drain_fail_seq; /* release_seq when planning made no drain */
    uint8_t *excl;
    int32_t *place_nodes; /* nodes of the last successful placement check */
    size_t place_cap;
    int checks;
    uint64_t dra_gen; /* opts.dra's generation last looked at */
};

/*--- Small helpers ---*/

static int ids_push(struct ids *s, int32_t v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        int32_t *nv = realloc(s->v, cap * sizeof *nv);
        if (!nv) return GS_ENOMEM;
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = v;
    return 0;
}

static int64_t now_ns(const struct gs_admission *a) { return gs_clock_now(a->clock); }

static bool wl_before(const struct gs_workload *x, const struct gs_workload *y)
{
    if (x->priority != y->priority) return x->priority > y->priority;
    if (x->created_ns != y->created_ns) return x->created_ns < y->created_ns;
    return x->seq < y->seq;
}

static int pending_insert(struct gs_admission *a, struct gs_workload *w)
{
    struct leafq *l = &a->lq[w->queue];
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        int32_t *v = realloc(l->v, cap * sizeof *v);
        if (!v) return GS_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (wl_before(a->w[l->v[mid]], w)) lo = mid + 1;
        else hi = mid;
    }
    memmove(l->v + lo + 1, l->v + lo, (l->n - lo) * sizeof *l->v);
    l->v[lo] = w->id;
    l->n++;
    w->state = GS_WL_PENDING;
    return 0;
}

static void pending_remove(struct gs_admission *a, const struct gs_workload *w)
{
    struct leafq *l = &a->lq[w->queue];
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] == w->id) {
            memmove(l->v + i, l->v + i + 1, (l->n - i - 1) * sizeof *l->v);
            l->n--;
            return;
        }
}

static const char *res_name(const struct gs_admission *a, int fr)
{
    const char *s = a->t->res_names[fr % GS_QT_MAX_RES];
    return s ? s : "?";
}

/*--- Requests and flavors ---*/

/* The request of w with flavor flav[g] for each group of its leaf. */
static void request(const struct gs_admission *a, const struct gs_workload *w, const int8_t *flav, int64_t *req)
{
    const struct gs_qt_node *n = &a->t->nodes[w->queue];
    memset(req, 0, sizeof(gs_qvec));
    for (int g = 0; g < n->ngroups; g++)
        for (int k = 0; k < n->groups[g].nres; k++) {
            int r = n->groups[g].res[k];
            req[GS_QT_FR(flav[g], r)] = w->demand[r] - w->released[r];
        }
}

/* Does group g of w's leaf fit flavor f: now (by available quota), or at
 * all (at most nominal + borrowing limit, for preemption)? */
static bool group_fits(const struct gs_admission *a, const struct gs_workload *w, int g, int f, bool at_all)
{
    const struct gs_qt_node *n = &a->t->nodes[w->queue];
    for (int k = 0; k < n->groups[g].nres; k++) {
        int r = n->groups[g].res[k], fr = GS_QT_FR(f, r);
        if (w->demand[r] <= 0) continue;
        const struct gs_qt_quota *qq = &n->quota[fr];
        if (!qq->set) return false;
        int64_t cap = at_all ? (qq->borrowing_limit == GS_QT_UNLIMITED ? GS_QT_UNLIMITED
                                                                      : gs_sat_add(a->q.subtree[w->queue][fr], qq->borrowing_limit))
                             : gs_quota_available(&a->q, w->queue, fr);
        if (w->demand[r] > cap) return false;
    }
    return true;
}

/* First fitting flavor per group, the first group from flavor position
 * first_start on (*first_pos: the position taken there, may be NULL).
 * false when some group has none. */
static bool choose_flavors(const struct gs_admission *a, const struct gs_workload *w, int8_t *flav, bool at_all,
                           int first_start, int *first_pos)
{
    const struct gs_qt_node *n = &a->t->nodes[w->queue];
    for (int g = 0; g < n->ngroups; g++) {
        int found = -1;
        for (int i = g == 0 ? first_start : 0; i < n->groups[g].nflavors && found < 0; i++)
            if (group_fits(a, w, g, n->groups[g].flavors[i], at_all)) found = i;
        if (found < 0) return false;
        flav[g] = (int8_t)n->groups[g].flavors[found];
        if (g == 0 && first_pos) *first_pos = found;
    }
    return true;
}

static int flavor_labels(const struct gs_admission *a, const struct gs_workload *w, const int8_t *flav,
                         struct gs_labels *out)
{
    const struct gs_qt_node *n = &a->t->nodes[w->queue];
    for (int g = 0; g < n->ngroups; g++) {
        const struct gs_labels *l = &a->t->flavors[flav[g]].node_labels;
        for (size_t i = 0; i < l->n; i++)
            if (gs_labels_set(out, l->v[i].key, l->v[i].value)) return GS_ENOMEM;
    }
    return 0;
}

/* Owner demand on resource r: usage plus pending requests. */
static int64_t queue_demand(const struct gs_admission *a, int32_t leaf, int r)
{
    int64_t d = 0;
    for (int f = 0; f < a->t->nflavors; f++) d += a->q.usage[leaf][GS_QT_FR(f, r)];
    for (size_t i = 0; i < a->lq[leaf].n; i++) d += a->w[a->lq[leaf].v[i]]->demand[r];
    return d;
}

/*--- Holds and the reservation ---*/

static bool pod_of(const struct gs_workload *w, const struct gs_pod *pod)
{
    for (size_t i = 0; i < w->npods; i++)
        if (w->pods[i] == pod) return true;
    return false;
}

/* The pin of pod (its index in the pinned workload in *at), or NULL. */
static const struct hold *pin_of(const struct gs_admission *a, const struct gs_pod *pod, size_t *at)
{
    for (size_t h = 0; h < a->nholds; h++) {
        const struct hold *x = &a->holds[h];
        if (!x->pin) continue;
        const struct gs_workload *w = a->w[x->wl];
        for (size_t i = 0; i < w->npods && i < x->n; i++)
            if (w->pods[i] == pod) {
                *at = i;
                return x;
            }
    }
    return NULL;
}

/* Held for a workload other than pod's (pins aside). */
static bool held_for_other(const struct gs_admission *a, int32_t node, const struct gs_pod *pod)
{
    for (size_t h = 0; h < a->nholds; h++) {
        const struct hold *x = &a->holds[h];
        if (x->pin) continue;
        for (size_t i = 0; i < x->n; i++)
            if (x->nodes[i] == node && !pod_of(a->w[x->wl], pod)) return true;
    }
    return false;
}

bool gs_admission_node_held(const struct gs_admission *a, int32_t node, const struct gs_pod *pod)
{
    size_t at;
    const struct hold *pin = pin_of(a, pod, &at);
    if (pin) return pin->nodes[at] != node;
    return held_for_other(a, node, pod);
}

bool gs_admission_holds_apply(const struct gs_admission *a, const struct gs_pod *pod)
{
    for (size_t h = 0; h < a->nholds; h++) {
        if (!a->holds[h].n) continue;
        bool mine = pod_of(a->w[a->holds[h].wl], pod);
        if (a->holds[h].pin ? mine : !mine) return true;
    }
    return false;
}

static bool all_placed(const struct gs_admission *a, const struct gs_workload *w)
{
    for (size_t i = 0; i < w->npods; i++) {
        char key[512];
        gs_meta_key(&w->pods[i]->meta, key, sizeof key);
        if (!gs_cache_pod_assignment(a->cache, key)) return false;
    }
    return true;
}

static bool hold_done(const struct gs_admission *a, const struct hold *h, int64_t now)
{
    const struct gs_workload *w = a->w[h->wl];
    if (now >= h->until_ns || w->state != GS_WL_ADMITTED) return true;
    return all_placed(a, w); /* every pod is placed: nothing left to hold */
}

static void expire_holds(struct gs_admission *a)
{
    int64_t now = now_ns(a);
    size_t k = 0;
    for (size_t h = 0; h < a->nholds; h++) {
        if (hold_done(a, &a->holds[h], now)) {
            /* a pin that ran out with pods still unbound: the scheduler could not use the check's node */
            const struct gs_workload *w = a->w[a->holds[h].wl];
            if (a->holds[h].pin && now >= a->holds[h].until_ns && w->state == GS_WL_ADMITTED) a->st.pins_expired++;
            /* a claimant that lost its place (evicted itself) or whose pods the scheduler did not bind
             * within the hold: the evictions made for it gained it nothing */
            bool lost = w->state == GS_WL_PENDING || (w->state == GS_WL_ADMITTED && !all_placed(a, w));
            if (a->holds[h].nvictims && lost) {
                a->st.claims_unplaced++;
                a->st.evictions_unplaced += a->holds[h].nvictims;
            }
            free(a->holds[h].nodes);
            if (!a->holds[h].pin) a->release_seq++; /* a pin kept no one else off a node */
        } else {
            a->holds[k++] = a->holds[h];
        }
    }
    a->nholds = k;
}

static int add_hold(struct gs_admission *a, int32_t wl, const int32_t *nodes, size_t n, bool pin)
{
    if (a->nholds == a->capholds) {
        size_t cap = a->capholds ? 2 * a->capholds : 4;
        struct hold *h = realloc(a->holds, cap * sizeof *h);
        if (!h) return GS_ENOMEM;
        a->holds = h;
        a->capholds = cap;
    }
    int32_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return GS_ENOMEM;
    memcpy(v, nodes, n * sizeof *v);
    a->holds[a->nholds++] = (struct hold){.wl = wl, .until_ns = now_ns(a) + a->o.hold_ns, .nodes = v, .n = n,
                                             .pin = pin};
    return 0;
}

/* Nodes w may not use now: held for others, and reserved ones unless w ends before the reservation starts. */
static const uint8_t *excluded_for(struct gs_admission *a, const struct gs_workload *w)
{
    int32_t nn = gs_cache_node_count(a->cache);
    memset(a->excl, 0, (size_t)nn + 1);
    bool any = false;
    for (size_t h = 0; h < a->nholds; h++) {
        if (a->holds[h].wl == w->id || a->holds[h].pin) continue;
        for (size_t i = 0; i < a->holds[h].n; i++)
            if (a->holds[h].nodes[i] < nn) a->excl[a->holds[h].nodes[i]] = 1, any = true;
    }
    bool backfills = w->est_duration_ns > 0 && now_ns(a) + w->est_duration_ns <= a->res_start;
    if (a->res_wl >= 0 && a->res_wl != w->id && !backfills)
        for (size_t i = 0; i < a->res_nodes.n; i++)
            if (a->res_nodes.v[i] < nn) a->excl[a->res_nodes.v[i]] = 1, any = true;
    for (size_t k = 0; k < a->ndrains; k++) { /* a drain's nodes: its gang and what ends before it starts */
        const struct drain *x = &a->drains[k];
        /* the drain serves its queue's share: that queue's own work may use the nodes too */
        if (x->wl == w->id || (!a->o.drain_strict && a->w[x->wl]->queue == w->queue) ||
            (w->est_duration_ns > 0 && now_ns(a) + w->est_duration_ns <= x->start))
            continue;
        for (size_t i = 0; i < x->nodes.n; i++)
            if (x->nodes.v[i] < nn) a->excl[x->nodes.v[i]] = 1, any = true;
    }
    return any ? a->excl : NULL;
}

/*--- Placement ---*/

static int grow_scratch(struct gs_admission *a, size_t npods)
{
    size_t nn = (size_t)gs_cache_node_count(a->cache) + 1;
    uint8_t *e = realloc(a->excl, nn);
    if (!e) return GS_ENOMEM;
    a->excl = e;
    if (npods > a->place_cap) {
        int32_t *p = realloc(a->place_nodes, npods * sizeof *p);
        if (!p) return GS_ENOMEM;
        a->place_nodes = p;
        a->place_cap = npods;
    }
    return 0;
}

/* Could w's GPU pods fit at all on the usable nodes, by free GPU counts
 * alone? A necessary condition, checked before running the filters. */
static bool gpu_room_on(struct gs_admission *a, const struct gs_workload *w, const uint8_t *excl)
{
    int64_t whole = 0, milli = 0, biggest = 0;
    for (size_t i = 0; i < w->npods; i++) {
        const struct gs_demand *d = &w->pods[i]->demand;
        if (d->gpu_count <= 0) continue;
        milli += (int64_t)d->gpu_count * d->gpu_milli;
        if (d->gpu_milli >= GS_GPU_MILLI) whole += d->gpu_count;
        if (d->gpu_milli >= GS_GPU_MILLI && d->gpu_count > biggest) biggest = d->gpu_count;
    }
    if (!milli) return true;
    /* Whole GPUs from the cache's contiguous hot records first (live there is
     * the node's live); a whole free GPU is GS_GPU_MILLI of free milli, so
     * the scattered node records are read only when whole GPUs alone do not
     * already cover the milli asked. Same answer as summing all three. */
    const struct gs_node_hot *hot = gs_cache_hot(a->cache);
    int64_t free_whole = 0, free_milli = 0, most = 0;
    int32_t total = gs_cache_node_count(a->cache);
    for (int32_t n = 0; n < total; n++) {
        if (!hot[n].live || (excl && excl[n])) continue;
        free_whole += hot[n].gpus_whole_free;
        if (hot[n].gpus_whole_free > most) most = hot[n].gpus_whole_free;
    }
    if (free_whole < whole || most < biggest) return false;
    if (milli <= free_whole * GS_GPU_MILLI) return true;
    for (int32_t n = 0; n < total; n++) {
        const struct gs_node_info *ni = gs_cache_node(a->cache, n);
        if (!ni || !ni->live || (excl && excl[n])) continue;
        free_milli += ni->gpu_milli_free;
    }
    return free_milli >= milli;
}

/* 1 when w's pods can be placed on flavor flav now, 0 when not, or an
 * error. keep: on success the pods stay assumed in the cache until the end
 * of the cycle, so later checks in the same cycle see them. */
static int placeable(struct gs_admission *a, struct gs_workload *w, const int8_t *flav, bool set_reason, bool keep)
{
    if (a->o.quota_only || !w->npods) return 1;
    int rc = grow_scratch(a, w->npods);
    struct gs_labels labels = {0};
    if (!rc) rc = flavor_labels(a, w, flav, &labels);
    const uint8_t *excl = rc ? NULL : excluded_for(a, w);
    if (!rc && !gpu_room_on(a, w, excl)) {
        a->st.prefilter_skips++;
        if (set_reason) snprintf(w->reason, sizeof w->reason, "quota fits but no placement: not enough free GPUs on usable nodes");
        gs_labels_free(&labels);
        return 0;
    }
    if (!rc) {
        a->checks++;
        a->st.placement_checks++;
        struct gs_place_req r = {.pods = w->pods, .npods = w->npods, .labels = &labels,
                                 .excluded = excl, .nodes_out = a->place_nodes, .keep = keep};
        char why[160];
        /* The placer formats its failure only for a caller that keeps it. */
        rc = gs_placer_try(a->placer, &r, set_reason ? why : NULL, sizeof why);
        if (rc == 1 && keep && ids_push(&a->kept, w->id)) rc = GS_ENOMEM;
        if (rc == 0 && set_reason) snprintf(w->reason, sizeof w->reason, "quota fits but no placement: %.150s", why);
    }
    gs_labels_free(&labels);
    return rc;
}

/*--- Drains (drain.h) ---*/

static void drop_drain(struct gs_admission *a, size_t k)
{
    free(a->drains[k].nodes.v);
    a->drains[k] = a->drains[--a->ndrains];
    a->release_seq++; /* its nodes are open to everyone again */
}

static void drop_drain_of(struct gs_admission *a, int32_t wl)
{
    for (size_t k = 0; k < a->ndrains; k++)
        if (a->drains[k].wl == wl) {
            drop_drain(a, k);
            return;
        }
}

static bool drained(const struct gs_admission *a, int32_t wl)
{
    for (size_t k = 0; k < a->ndrains; k++)
        if (a->drains[k].wl == wl) return true;
    return false;
}

/* pin_placement: w was just admitted on the nodes of the last placement
 * check (a->place_nodes); the scheduler is to bind each pod there. */
static bool starved_elsewhere(const struct gs_admission *a, int32_t leaf);
static bool starved_large(const struct gs_admission *a);
static bool above_share(const struct gs_admission *a);

static int pin_workload(struct gs_admission *a, const struct gs_workload *w)
{
    if (!a->o.pin_placement || a->o.quota_only || !w->npods || w->gpu_milli <= 0) return 0;
    /* Only while some queue below its share waits for room: the check packs by
     * GPUs alone, and pinning everyone strands GPUs on nodes whose CPU or
     * memory it filled when no gang is waiting for whole nodes. */
    if (!starved_elsewhere(a, -1)) return 0;
    if (a->o.pin_large && !starved_large(a)) return 0;
    if (a->o.pin_above && !above_share(a)) return 0;
    return add_hold(a, w->id, a->place_nodes, w->npods, true);
}

/*--- Admit, evict, finish ---*/

static bool run_capped(const struct gs_admission *a, const struct gs_workload *w)
{
    return a->o.max_preemptions > 0 && w->window_preemptions >= a->o.max_preemptions;
}

/* Where w is or would go in its leaf's list (admitted_ns must not have changed since). */
static size_t run_slot(const struct gs_admission *a, const struct runq *q, const struct gs_workload *w)
{
    size_t lo = 0, hi = q->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct gs_workload *x = a->w[q->v[mid]];
        if (x->admitted_ns < w->admitted_ns || (x->admitted_ns == w->admitted_ns && x->id < w->id)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void run_add(struct gs_admission *a, const struct gs_workload *w)
{
    struct runq *q = &a->runq[w->queue];
    size_t at = run_slot(a, q, w);
    memmove(q->v + at + 1, q->v + at, (q->n - at) * sizeof *q->v); /* room reserved at submission */
    q->v[at] = w->id;
    q->n++;
    q->capped += run_capped(a, w);
}

static void run_del(struct gs_admission *a, const struct gs_workload *w)
{
    struct runq *q = &a->runq[w->queue];
    size_t at = run_slot(a, q, w);
    if (at == q->n || q->v[at] != w->id) return;
    memmove(q->v + at, q->v + at + 1, (q->n - at - 1) * sizeof *q->v);
    q->n--;
    q->capped -= run_capped(a, w);
}

static void admit(struct gs_admission *a, struct gs_workload *w, const int8_t *flav)
{
    gs_qvec req;
    gs_fairshare_advance(&a->fs, &a->q, now_ns(a));
    memcpy(w->flavor, flav, sizeof w->flavor);
    request(a, w, flav, req);
    gs_quota_apply(&a->q, w->queue, req, +1);
    pending_remove(a, w);
    w->state = GS_WL_ADMITTED;
    w->admitted_ns = now_ns(a);
    w->reason[0] = '\0';
    a->st.admitted++;
    ids_push(&a->adm, w->id);
    run_add(a, w); /* after admitted_ns: the list is ordered by it */
    if (a->res_wl == w->id) a->res_wl = -1, a->res_nodes.n = 0;
    drop_drain_of(a, w->id);
}

static void evict_pods(struct gs_admission *a, const struct gs_workload *v)
{
    for (size_t i = 0; i < v->npods; i++) {
        if (a->o.evict) {
            a->o.evict(a->o.ctx, v->pods[i]);
        } else {
            char key[512];
            gs_meta_key(&v->pods[i]->meta, key, sizeof key);
            gs_cache_remove_pod(a->cache, key);
        }
    }
}

static int evict(struct gs_admission *a, struct gs_workload *v, const struct gs_workload *by, bool reclaim, int r)
{
    gs_qvec req;
    gs_fairshare_advance(&a->fs, &a->q, now_ns(a));
    request(a, v, v->flavor, req);
    gs_quota_apply(&a->q, v->queue, req, -1);
    run_del(a, v);
    evict_pods(a, v);
    memset(v->released, 0, sizeof v->released); /* it restarts whole */
    memset(v->pod_done, 0, v->npods);
    int64_t now = now_ns(a);
    if (now - v->window_start_ns >= a->o.preemption_window_ns || !v->window_preemptions)
        v->window_start_ns = now, v->window_preemptions = 0;
    v->window_preemptions++;
    v->evicted_cycle = a->cycle_no; /* a restart in the same cycle would throw its work away for nothing */
    v->preemptions++;
    if (v->preemptions > a->st.max_workload_preemptions) a->st.max_workload_preemptions = v->preemptions;
    a->q_preempt[v->queue]++;
    a->q_caused[by->queue]++;
    a->st.evictions++;
    a->st.evicted_gpu_milli += v->gpu_milli;
    a->st.reclaims += reclaim;
    if (a->o.evict_charge > 0) { /* the work the victim loses is paid by the queue that caused it */
        double lost = (double)v->gpu_milli / 1000.0 * (double)(now - v->admitted_ns) / (3600.0 * GS_NS_PER_SEC);
        a->fs.n[by->queue].ledger_gpu_hours += lost * a->o.evict_charge;
        a->st.charged_gpu_hours += lost * a->o.evict_charge;
    }
    v->fail_seq = 0;
    if (reclaim) {
        v->blocked_by = by->queue;
        v->blocked_res = r;
        v->blocked_demand = queue_demand(a, by->queue, r);
    }
    snprintf(v->reason, sizeof v->reason, "evicted by %s of %s", reclaim ? "reclaim" : "preemption", by->key);
    a->release_seq++;
    int rc = pending_insert(a, v);
    for (size_t i = 0; i < a->adm.n; i++) /* admitted earlier in this cycle: the caller never saw it */
        if (a->adm.v[i] == v->id) {
            memmove(a->adm.v + i, a->adm.v + i + 1, (a->adm.n - i - 1) * sizeof *a->adm.v);
            a->adm.n--;
            return rc;
        }
    return rc ? rc : ids_push(&a->ev, v->id);
}

int gs_admission_finish(struct gs_admission *a, int32_t id)
{
    if (id < 0 || (size_t)id >= a->n) return GS_ENOENT;
    struct gs_workload *w = a->w[id];
    if (w->state == GS_WL_ADMITTED) {
        gs_qvec req;
        gs_fairshare_advance(&a->fs, &a->q, now_ns(a));
        request(a, w, w->flavor, req);
        gs_quota_apply(&a->q, w->queue, req, -1);
        run_del(a, w);
    } else if (w->state == GS_WL_PENDING) {
        pending_remove(a, w);
    }
    if (a->res_wl == id) a->res_wl = -1, a->res_nodes.n = 0;
    drop_drain_of(a, id);
    w->state = GS_WL_FINISHED;
    a->release_seq++;
    return 0;
}

void gs_admission_capacity_changed(struct gs_admission *a) { a->release_seq++; }

/* Restoring state (a server rebuilding admission from a running cluster):
 * the workload already runs, so its quota is reserved without the checks,
 * on the first flavors that fit now, else that fit at all, else the first. */
int gs_admission_restore(struct gs_admission *a, int32_t id)
{
    if (id < 0 || (size_t)id >= a->n) return GS_ENOENT;
    struct gs_workload *w = a->w[id];
    if (w->state == GS_WL_INADMISSIBLE && w->dra_wait) {
        /* it runs, so its claims were satisfied once: the devices it holds stay charged even
         * if a slice is gone by now */
        int rc = pending_insert(a, w);
        if (rc) return rc;
        w->dra_wait = false;
    }
    if (w->state != GS_WL_PENDING) return GS_ESTATE;
    const struct gs_qt_node *n = &a->t->nodes[w->queue];
    int8_t flav[GS_QT_MAX_GROUPS] = {0};
    if (!choose_flavors(a, w, flav, false, 0, NULL) && !choose_flavors(a, w, flav, true, 0, NULL))
        for (int g = 0; g < n->ngroups; g++) flav[g] = (int8_t)n->groups[g].flavors[0];
    admit(a, w, flav);
    a->adm.n--; /* not reported by the next cycle: the caller already runs it */
    return 0;
}

/*--- Victim simulation ---*/

struct removed {
    int32_t wl;
    struct gs_assignment *asg; /* per pod; node -1 when it was not in the cache */
};

static int sim_remove(struct gs_admission *a, int32_t id, struct removed *out)
{
    struct gs_workload *v = a->w[id];
    gs_qvec req;
    out->wl = id;
    out->asg = calloc(v->npods ? v->npods : 1, sizeof *out->asg);
    if (!out->asg) return GS_ENOMEM;
    request(a, v, v->flavor, req);
    gs_quota_apply(&a->q, v->queue, req, -1);
    for (size_t i = 0; i < v->npods; i++) {
        char key[512];
        gs_meta_key(&v->pods[i]->meta, key, sizeof key);
        const struct gs_assignment *as = gs_cache_pod_assignment(a->cache, key);
        out->asg[i].node = -1;
        if (as) {
            out->asg[i] = *as;
            gs_cache_remove_pod(a->cache, key);
        }
    }
    return 0;
}

static void sim_restore(struct gs_admission *a, struct removed *r)
{
    struct gs_workload *v = a->w[r->wl];
    gs_qvec req;
    request(a, v, v->flavor, req);
    gs_quota_apply(&a->q, v->queue, req, +1);
    for (size_t i = 0; i < v->npods; i++)
        if (r->asg[i].node >= 0) gs_cache_add_bound(a->cache, v->pods[i], &r->asg[i]);
    free(r->asg);
    r->asg = NULL;
}

struct cand {
    int32_t wl;
    bool other;
};

static int cmp_cand(const void *x, const void *y, void *ctx)
{
    const struct cand *p = x, *q = y;
    const struct gs_admission *ad = ctx;
    const struct gs_workload *a = ad->w[p->wl], *b = ad->w[q->wl];
    if (p->other != q->other) return p->other ? -1 : 1;
    if (a->priority != b->priority) return a->priority < b->priority ? -1 : 1;
    if (a->admitted_ns != b->admitted_ns) return a->admitted_ns > b->admitted_ns ? -1 : 1;
    return a->id > b->id ? -1 : 1;
}

static int32_t root_of(const struct gs_queue_tree *t, int32_t i)
{
    while (t->nodes[i].parent >= 0) i = t->nodes[i].parent;
    return i;
}

/* Is leaf still borrowing some (flavor, resource) that req asks for? */
static bool borrows_contested(const struct gs_admission *a, int32_t leaf, const int64_t *req)
{
    for (int fr = 0; fr < GS_QT_NFR; fr++)
        if (req[fr] > 0 && gs_quota_borrowed(&a->q, leaf, fr) > 0) return true;
    return false;
}

static bool within_nominal(const struct gs_admission *a, int32_t leaf, const int64_t *req, int *contested)
{
    for (int fr = 0; fr < GS_QT_NFR; fr++) {
        if (req[fr] <= 0) continue;
        if (a->q.usage[leaf][fr] + req[fr] > a->q.subtree[leaf][fr]) return false;
        if (*contested < 0 || fr % GS_QT_MAX_RES == a->fs.gpu_res) *contested = fr % GS_QT_MAX_RES;
    }
    return true;
}

/* The resource a claim is about: GPUs when it asks for them, else the first it asks. */
static int contested_res(const struct gs_admission *a, const int64_t *req)
{
    int first = -1;
    for (int fr = 0; fr < GS_QT_NFR; fr++) {
        if (req[fr] <= 0) continue;
        if (fr % GS_QT_MAX_RES == a->fs.gpu_res) return a->fs.gpu_res;
        if (first < 0) first = fr % GS_QT_MAX_RES;
    }
    return first < 0 ? 0 : first;
}

static int64_t leaf_use(const struct gs_admission *a, int32_t leaf, int r)
{
    int64_t u = 0;
    for (int f = 0; f < a->t->nflavors; f++) u += a->q.usage[leaf][GS_QT_FR(f, r)];
    return u;
}

/* Reclaim takes from a queue only while it stays at or above its fair
 * share of r without v (usage as the search has left it). */
static bool keeps_fair_share(struct gs_admission *a, const struct gs_workload *v, int r)
{
    if (a->o.reclaim_above_nominal) return true;
    return (double)(leaf_use(a, v->queue, r) - (v->demand[r] - v->released[r])) >= a->fs.n[v->queue].deserved[r] - 0.5;
}

/* Too young to evict (1), or evicted often enough lately (2); 0 when neither. */
static int protected_victim(const struct gs_admission *a, const struct gs_workload *v, int64_t now)
{
    if (a->o.reclaim_min_runtime_ns > 0 && now - v->admitted_ns < a->o.reclaim_min_runtime_ns) return 1;
    if (a->o.max_preemptions > 0 && v->window_preemptions >= a->o.max_preemptions &&
        now - v->window_start_ns < a->o.preemption_window_ns)
        return 2;
    return 0;
}

static size_t victim_candidates(struct gs_admission *a, const struct gs_workload *w, const int64_t *req,
                                struct cand *out)
{
    const struct gs_qt_node *n = &a->t->nodes[w->queue];
    int contested = -1, r = contested_res(a, req);
    bool reclaim = n->reclaim != GS_PREEMPT_NEVER && within_nominal(a, w->queue, req, &contested);
    /* patience, waived for a queue far below its fair share (opts.impatient_share) */
    bool impatient = a->o.impatient_share > 0 && a->fs.n[w->queue].share < a->o.impatient_share;
    if (reclaim && !impatient && a->o.reclaim_wait_ns > 0 && now_ns(a) - w->created_ns < a->o.reclaim_wait_ns) {
        reclaim = false;
        a->st.reclaims_deferred++;
    }
    size_t k = 0;
    bool spared[3] = {0};
    int64_t now = now_ns(a);
    int32_t root = root_of(a->t, w->queue);
    bool within = n->within == GS_PREEMPT_LOWER_PRIORITY || n->within == GS_PREEMPT_LOWER_OR_NEWER_EQUAL;
    for (int32_t leaf = 0; leaf < a->t->n; leaf++) {
        if (leaf != w->queue && !(reclaim && root_of(a->t, leaf) == root)) continue;
        const struct runq *q = &a->runq[leaf];
        bool other = leaf != w->queue;
        bool may = other ? borrows_contested(a, leaf, req) : within; /* can any of q be a victim? */
        if (!may && q->n) {
            /* Only what the rules spared is counted: the newest workload is
             * the youngest, and only capped ones can be spared by the cap. */
            if (protected_victim(a, a->w[q->v[q->n - 1]], now) == 1) spared[1] = true;
            if (!q->capped || spared[2]) continue;
        }
        for (size_t i = 0; i < q->n; i++) {
            const struct gs_workload *v = a->w[q->v[i]];
            if (v == w) continue;
            int why = protected_victim(a, v, now);
            if (why) {
                spared[why] = true;
                continue;
            }
            bool ok;
            if (!may) {
                ok = false;
            } else if (!other) {
                ok = (n->within == GS_PREEMPT_LOWER_PRIORITY && v->priority < w->priority) ||
                     (n->within == GS_PREEMPT_LOWER_OR_NEWER_EQUAL &&
                      (v->priority < w->priority || (v->priority == w->priority && v->created_ns > w->created_ns)));
            } else {
                ok = n->reclaim == GS_PREEMPT_ANY || v->priority < w->priority;
                if (ok && !keeps_fair_share(a, v, r)) ok = false, spared[0] = true;
            }
            if (ok) out[k++] = (struct cand){.wl = v->id, .other = other};
        }
    }
    qsort_r(out, k, sizeof *out, cmp_cand, a);
    /* Counted per claim, not per candidate: claims in which the rule protected someone. */
    a->st.spared_fair_share += spared[0];
    a->st.spared_min_runtime += spared[1];
    a->st.spared_cap += spared[2];
    return k;
}

/* Does w fit now (quota for req, placement on flav)? 1, 0 or an error. */
static int fits_now(struct gs_admission *a, struct gs_workload *w, const int64_t *req, const int8_t *flav)
{
    if (!gs_quota_fits(&a->q, w->queue, req, NULL)) return 0;
    return placeable(a, w, flav, false, false);
}

/* Puts back, newest first, each of rm[0..k) whose return still lets w fit;
 * the rest go to chosen. Returns how many or an error; the state is restored. */
static int minimal_set(struct gs_admission *a, struct gs_workload *w, const int64_t *req, const int8_t *flav,
                       struct removed *rm, size_t k, int32_t *chosen)
{
    int nchosen = 0, rc = 0;
    for (size_t i = k; i-- > 0;) {
        int32_t id = rm[i].wl;
        sim_restore(a, &rm[i]);
        int f = fits_now(a, w, req, flav);
        if (f < 0) rc = f;
        if (f == 1) continue;
        if (sim_remove(a, id, &rm[i])) break;
        chosen[nchosen++] = id;
    }
    for (size_t i = 0; i < k; i++)
        if (rm[i].asg) sim_restore(a, &rm[i]);
    return rc < 0 ? rc : nchosen;
}

/*--- Node-wise victims (nodeplan.h) ---*/

struct np_ctx {
    struct gs_admission *a;
    const int64_t *req;
    const struct cand *c;
    gs_qvec *gone; /* per leaf: what the victims booked so far would free */
    int r;         /* the contested resource */
    /* The planner calls take/untake for every victim it tries on every node:
     * the (flavor, resource) entries the claimant asks for, listed once, spare
     * those calls a walk over every entry. */
    int nreq;
    int16_t reqfr[GS_QT_NFR];
};

#define MAX_TERMS (GS_QT_MAX_GROUPS * GS_QT_MAX_RES)

/* The entries request() writes, as (index, value) pairs; their number. */
static int request_terms(const struct gs_admission *a, const struct gs_workload *w, const int8_t *flav, int16_t *fr,
                         int64_t *val)
{
    const struct gs_qt_node *n = &a->t->nodes[w->queue];
    int k = 0;
    for (int g = 0; g < n->ngroups; g++)
        for (int j = 0; j < n->groups[g].nres; j++) {
            int r = n->groups[g].res[j], at = GS_QT_FR(flav[g], r), t = 0;
            while (t < k && fr[t] != at) t++; /* a later group writing the same entry wins, as in request() */
            if (t == k && k < MAX_TERMS) fr[k++] = (int16_t)at;
            if (t < k) val[t] = w->demand[r] - w->released[r];
        }
    return k;
}

/* The planner's view of the reclaim rules, with the victims booked so far
 * counted as gone: the victim's queue still borrows what the claimant asks
 * for and stays at or above its fair share without it. */
static bool np_take(void *ctx, size_t i)
{
    struct np_ctx *x = ctx;
    struct gs_admission *a = x->a;
    const struct gs_workload *v = a->w[x->c[i].wl];
    const int64_t *use_v = a->q.usage[v->queue], *gone = x->gone[v->queue];
    if (x->c[i].other) {
        bool borrows = false;
        int64_t use = 0;
        for (int j = 0; j < x->nreq && !borrows; j++) {
            int fr = x->reqfr[j];
            borrows = use_v[fr] - gone[fr] > a->q.subtree[v->queue][fr];
        }
        for (int f = 0; f < GS_QT_MAX_FLAVORS; f++) use += use_v[GS_QT_FR(f, x->r)] - gone[GS_QT_FR(f, x->r)];
        if (!borrows) return false;
        if (!a->o.reclaim_above_nominal &&
            (double)(use - (v->demand[x->r] - v->released[x->r])) < a->fs.n[v->queue].deserved[x->r] - 0.5)
            return false;
    }
    int16_t fr[MAX_TERMS];
    int64_t val[MAX_TERMS];
    int k = request_terms(a, v, v->flavor, fr, val);
    for (int t = 0; t < k; t++) x->gone[v->queue][fr[t]] += val[t];
    return true;
}

static void np_untake(void *ctx, size_t i)
{
    struct np_ctx *x = ctx;
    const struct gs_workload *v = x->a->w[x->c[i].wl];
    int16_t fr[MAX_TERMS];
    int64_t val[MAX_TERMS];
    int k = request_terms(x->a, v, v->flavor, fr, val);
    for (int t = 0; t < k; t++) x->gone[v->queue][fr[t]] -= val[t];
}

/* The nodes as the planner sees them; held, reserved and other-flavor nodes unusable. */
static int np_nodes(struct gs_admission *a, const struct gs_workload *w, const int8_t *flav,
                    struct gs__np_node *nodes, int32_t *gfree)
{
    struct gs_labels labels = {0};
    int rc = flavor_labels(a, w, flav, &labels);
    const uint8_t *excl = rc ? NULL : excluded_for(a, w);
    size_t at = 0;
    for (int32_t i = 0; !rc && i < gs_cache_node_count(a->cache); i++) {
        const struct gs_node_info *ni = gs_cache_node(a->cache, i);
        nodes[i] = (struct gs__np_node){.gfree = gfree + at};
        if (!ni || !ni->live) continue;
        bool usable = ni->schedulable && !(excl && excl[i]) && gs__labels_cover(&labels, ni->labels);
        gs__np_node_of(ni, usable, gfree + at, &nodes[i]);
        at += (size_t)ni->ngpus;
    }
    gs_labels_free(&labels);
    return rc;
}

/* Runs the planner; *k victims (indices into c) in pick. 1: no set of
 * allowed victims lets w fit by the planner's count; else 0 or an error. */
static int np_plan(struct gs_admission *a, struct gs_workload *w, const int64_t *req, const int8_t *flav,
                   const struct cand *c, size_t nc, size_t *pick, size_t *k)
{
    size_t nn = (size_t)gs_cache_node_count(a->cache), ngpu = 0, nvp = 0;
    for (size_t i = 0; i < nn; i++) {
        const struct gs_node_info *ni = gs_cache_node(a->cache, (int32_t)i);
        ngpu += ni && ni->live ? (size_t)ni->ngpus : 0;
    }
    for (size_t i = 0; i < nc; i++) nvp += a->w[c[i].wl]->npods;
    struct gs__np_node *nodes = calloc(nn ? nn : 1, sizeof *nodes);
    int32_t *gfree = malloc((ngpu ? ngpu : 1) * sizeof *gfree);
    struct gs__np_victim *v = malloc((nc ? nc : 1) * sizeof *v);
    struct gs__np_vpod *vp = malloc((nvp ? nvp : 1) * sizeof *vp);
    struct gs__np_pod *pods = malloc((w->npods ? w->npods : 1) * sizeof *pods);
    gs_qvec *gone = calloc(a->t->n ? (size_t)a->t->n : 1, sizeof *gone);
    int rc = nodes && gfree && v && vp && pods && gone ? 0 : GS_ENOMEM;
    if (!rc) rc = np_nodes(a, w, flav, nodes, gfree);
    if (!rc) {
        int64_t now = now_ns(a);
        for (size_t i = 0, at = 0; i < nc; at += a->w[c[i].wl]->npods, i++) {
            const struct gs_workload *x = a->w[c[i].wl];
            gs__np_vpods_of(a->cache, x->pods, x->npods, vp + at);
            v[i] = (struct gs__np_victim){.pods = vp + at, .npods = x->npods, .priority = x->priority,
                                          .cost = (double)x->gpu_milli * (double)(now - x->admitted_ns) / GS_NS_PER_SEC};
        }
        for (size_t i = 0; i < w->npods; i++) gs__np_pod_of(a->cache, w->pods[i], &pods[i]);
        struct np_ctx x = {.a = a, .req = req, .c = c, .gone = gone, .r = contested_res(a, req)};
        for (int fr = 0; fr < GS_QT_NFR; fr++)
            if (req[fr] > 0) x.reqfr[x.nreq++] = (int16_t)fr;
        struct gs__np_req r = {.nodes = nodes, .nnodes = nn, .v = v, .nv = nc, .pods = pods, .npods = w->npods,
                               .take = np_take, .untake = np_untake, .ctx = &x,
                               .cost = a->o.victim_cost};
        rc = gs__nodeplan(&r, pick, k);
        rc = rc == 0 ? 1 : rc < 0 ? rc : 0;
    }
    free(nodes), free(gfree), free(v), free(vp), free(pods), free(gone);
    return rc;
}

/* Node-wise victims: the planner's set, removed in simulation with the
 * rules checked again, then the real quota and placement check. Returns the
 * number chosen (minimal, in chosen), 0 when the planner finds no set, -2
 * (NP_UNPROVEN) when its set did not make w fit (something the planner does
 * not model, such as a filter plugin), or an error. The state is restored. */
#define NP_UNPROVEN (-2)
static int nodewise_victims(struct gs_admission *a, struct gs_workload *w, const int64_t *req, const int8_t *flav,
                            const struct cand *c, size_t nc, struct removed *rm, int32_t *chosen)
{
    size_t *pick = malloc((nc ? nc : 1) * sizeof *pick), k = 0, done = 0;
    if (!pick) return GS_ENOMEM;
    int rc = np_plan(a, w, req, flav, c, nc, pick, &k), r = contested_res(a, req);
    if (rc == 1) {
        free(pick);
        a->st.nodewise_refused++;
        return 0;
    }
    if (!rc && k == 0) rc = NP_UNPROVEN; /* fits by the count without victims: not ours to explain */
    for (size_t i = 0; !rc && i < k; i++) {
        const struct cand *x = &c[pick[i]];
        if (x->other && (!borrows_contested(a, a->w[x->wl]->queue, req) || !keeps_fair_share(a, a->w[x->wl], r)))
            rc = NP_UNPROVEN;
        else if (!(rc = sim_remove(a, x->wl, &rm[done]))) done++;
    }
    free(pick);
    if (!rc && !gs_quota_fits(&a->q, w->queue, req, NULL)) rc = NP_UNPROVEN;
    if (!rc) {
        rc = placeable(a, w, flav, false, false);
        if (rc == 0) rc = NP_UNPROVEN;
    }
    if (rc == 1) {
        a->st.nodewise_won++;
        return minimal_set(a, w, req, flav, rm, done, chosen);
    }
    for (size_t i = 0; i < done; i++) sim_restore(a, &rm[i]);
    if (rc == NP_UNPROVEN) a->st.nodewise_unproven++;
    return rc;
}

/* Takes victims one by one until w fits, then puts back the unneeded ones.
 * Returns the number chosen (in rm[0..k)) or 0 when none works; the state
 * is restored either way. A claimant that asks for GPUs gets node-wise
 * victims first; the global order is the fallback when the planner's set
 * could not be proved. */
static int search_victims(struct gs_admission *a, struct gs_workload *w, const int64_t *req, const int8_t *flav,
                          struct cand *c, size_t nc, struct removed *rm, int32_t *chosen)
{
    if (!a->o.quota_only && !a->o.global_victims && w->gpu_milli > 0 && w->npods) {
        int got = nodewise_victims(a, w, req, flav, c, nc, rm, chosen);
        if (got != NP_UNPROVEN) return got;
    }
    size_t k = 0;
    int found = 0, checks = 0, rc = 0, r = contested_res(a, req);
    for (size_t i = 0; i < nc && !found && checks < MAX_VICTIM_CHECKS; i++) {
        if (c[i].other && !borrows_contested(a, a->w[c[i].wl]->queue, req)) continue;
        if (c[i].other && !keeps_fair_share(a, a->w[c[i].wl], r)) continue;
        if ((rc = sim_remove(a, c[i].wl, &rm[k]))) break;
        k++;
        if (!gs_quota_fits(&a->q, w->queue, req, NULL)) continue;
        checks++;
        if ((rc = placeable(a, w, flav, false, false)) < 0) break;
        found = rc;
    }
    if (found) return minimal_set(a, w, req, flav, rm, k, chosen);
    for (size_t i = 0; i < k; i++)
        if (rm[i].asg) sim_restore(a, &rm[i]);
    return rc < 0 ? rc : 0;
}

static int preempt(struct gs_admission *a, struct gs_workload *w)
{
    const struct gs_qt_node *n = &a->t->nodes[w->queue];
    if (n->within == GS_PREEMPT_NEVER && n->reclaim == GS_PREEMPT_NEVER) return 0;
    if (a->o.max_victim_searches > 0 && a->searches >= a->o.max_victim_searches) return 0;
    int8_t flav[GS_QT_MAX_GROUPS] = {0};
    gs_qvec req;
    if (!choose_flavors(a, w, flav, true, 0, NULL)) return 0;
    request(a, w, flav, req);
    /* The search's arrays are sized by the candidates, not by every workload:
     * zeroing one per failed try was a tenth of a busy cycle. */
    struct cand *c = malloc((a->n ? a->n : 1) * sizeof *c);
    struct removed *rm = NULL;
    int32_t *chosen = NULL;
    int rc = c ? 0 : GS_ENOMEM;
    size_t nc = rc ? 0 : victim_candidates(a, w, req, c);
    if (nc && (!(rm = calloc(nc, sizeof *rm)) || !(chosen = malloc(nc * sizeof *chosen)))) rc = GS_ENOMEM, nc = 0;
    if (nc) a->searches++, a->st.victim_searches++;
    int k = nc ? search_victims(a, w, req, flav, c, nc, rm, chosen) : 0;
    if (k < 0) rc = k;
    if (k > 0) a->st.victim_searches_won++;
    int contested = -1;
    within_nominal(a, w->queue, req, &contested);
    for (int i = 0; !rc && i < k; i++) {
        struct gs_workload *v = a->w[chosen[i]];
        rc = evict(a, v, w, v->queue != w->queue, contested >= 0 ? contested : 0);
    }
    if (!rc && k > 0) { /* the evictions freed what the simulation proved */
        rc = gs_quota_fits(&a->q, w->queue, req, NULL) ? placeable(a, w, flav, true, true) : 0;
        if (rc == 1) {
            admit(a, w, flav);
            rc = add_hold(a, w->id, a->place_nodes, w->npods, false);
            if (!rc) a->holds[a->nholds - 1].nvictims = k;
            if (!rc) rc = pin_workload(a, w);
            if (!rc) rc = 1;
        }
    }
    free(c), free(rm), free(chosen);
    return rc;
}

/*--- Consolidation (opts.consolidate_moves, opts.consolidate_own) ---*/

/* A running single-pod workload that could move to make a node whole:
 * where it runs (node, the GPUs of mask, milli of each). */
struct mover {
    int32_t node, milli, wl;
    uint64_t mask;
};

static int cmp_mover(const void *x, const void *y)
{
    const struct mover *p = x, *q = y;
    if (p->node != q->node) return p->node < q->node ? -1 : 1;
    return (p->wl > q->wl) - (p->wl < q->wl);
}

/* Fills *m when v may move: admitted before this cycle, one small pod
 * asking for GPUs (whole or a share), in the cache, not at its eviction cap. */
static bool mover_of(const struct gs_admission *a, const struct gs_workload *v, struct mover *m)
{
    if (v->state != GS_WL_ADMITTED || v->npods != 1 || v->gpu_milli <= 0 || v->gpu_milli >= a->o.large_gpu_milli)
        return false;
    if (v->pods[0]->demand.gpu_count <= 0 || v->admitted_ns >= now_ns(a)) return false;
    if (run_capped(a, v) && now_ns(a) - v->window_start_ns < a->o.preemption_window_ns) return false;
    char key[512];
    gs_meta_key(&v->pods[0]->meta, key, sizeof key);
    const struct gs_assignment *as = gs_cache_pod_assignment(a->cache, key);
    if (!as || as->node < 0 || !as->gpu_mask) return false;
    *m = (struct mover){.node = as->node, .milli = as->milli, .wl = v->id, .mask = as->gpu_mask};
    return true;
}

static int32_t whole_gpus(const int32_t *free, int32_t ng)
{
    int32_t k = 0;
    for (int32_t g = 0; g < ng; g++) k += free[g] >= GS_GPU_MILLI;
    return k;
}

/* The fewest of node n's movers m[0..nm) (at most max) whose leaving makes
 * g of its GPUs whole, chosen greedily (each step the mover leaving the most
 * whole GPUs, then the most free milli, then the least moved); their
 * indexes in pick, the count returned, -1 when none does. *moved: GPU milli. */
static int node_moves(const struct gs_node_info *ni, const struct mover *m, size_t nm, int32_t g, int max,
                      size_t *pick, int64_t *moved)
{
    int32_t free[64], ng = ni->ngpus < 64 ? ni->ngpus : 64;
    for (int32_t i = 0; i < ng; i++) free[i] = ni->gpus[i].healthy ? ni->gpus[i].milli_free : INT32_MIN / 2;
    bool taken[64] = {0};
    int k = 0;
    *moved = 0;
    while (whole_gpus(free, ng) < g) {
        if (k == max) return -1;
        size_t best = nm;
        int32_t bw = -1;
        int64_t bf = -1, bm = 0;
        for (size_t j = 0; j < nm && j < 64; j++) {
            if (taken[j]) continue;
            int32_t w = 0;
            int64_t f = 0, mv = 0;
            for (int32_t i = 0; i < ng; i++) {
                int32_t x = free[i] + (m[j].mask >> i & 1 ? m[j].milli : 0);
                w += x >= GS_GPU_MILLI;
                f += x > 0 ? x : 0;
                mv += m[j].mask >> i & 1 ? m[j].milli : 0;
            }
            if (w > bw || (w == bw && (f > bf || (f == bf && mv < bm)))) best = j, bw = w, bf = f, bm = mv;
        }
        if (best == nm) return -1;
        taken[best] = true;
        for (int32_t i = 0; i < ng; i++)
            if (m[best].mask >> i & 1) free[i] += m[best].milli;
        pick[k++] = best;
        *moved += bm;
    }
    return k;
}

/* Moves allowed per gang pod. */
static int move_limit(const struct gs_admission *a)
{
    int k = a->o.consolidate_moves > 0 ? a->o.consolidate_moves : 0;
    return a->o.consolidate_own > k ? a->o.consolidate_own : k;
}

/* The pods kept assumed since mark leave the cache again (a proof undone). */
static void unkeep(struct gs_admission *a, size_t mark)
{
    for (size_t k = mark; k < a->kept.n; k++) {
        const struct gs_workload *v = a->w[a->kept.v[k]];
        for (size_t i = 0; i < v->npods; i++) {
            char key[512];
            gs_meta_key(&v->pods[i]->meta, key, sizeof key);
            gs_cache_remove_pod(a->cache, key);
        }
    }
    a->kept.n = mark;
}

/* Chooses, per pod of w (largest first), the usable node that the fewest
 * moves (then the fewest GPUs moved, then the lowest index) make hold it;
 * out gets the movers, *nout how many. 1 when every pod has a node and some
 * move is needed, 0 otherwise. m is sorted by node. */
static int choose_moves(struct gs_admission *a, const struct gs_workload *w, uint8_t *used, const struct mover *m,
                        size_t nm, int32_t *out, size_t *nout)
{
    int32_t nn = gs_cache_node_count(a->cache);
    bool done[64] = {0};
    size_t pick[8], best_pick[8];
    *nout = 0;
    for (size_t round = 0; round < w->npods; round++) {
        size_t p = w->npods;
        for (size_t i = 0; i < w->npods; i++)
            if (!done[i] && w->pods[i]->demand.gpu_count > 0 &&
                (p == w->npods || w->pods[i]->demand.gpu_count > w->pods[p]->demand.gpu_count))
                p = i;
        if (p == w->npods) break;
        done[p] = true;
        int32_t g = w->pods[p]->demand.gpu_count, best = -1;
        int best_k = 0;
        int64_t best_moved = 0;
        size_t best_at = 0, at = 0;
        for (int32_t n = 0; n < nn; n++) {
            size_t first = at;
            while (at < nm && m[at].node == n) at++;
            const struct gs_node_info *ni = gs_cache_node(a->cache, n);
            if (!ni || !ni->live || !ni->schedulable || used[n] || ni->ngpus < g) continue;
            int64_t moved = 0;
            int k = node_moves(ni, m + first, at - first, g, move_limit(a), pick, &moved);
            if (k < 0) continue;
            if (best < 0 || k < best_k || (k == best_k && moved < best_moved)) {
                best = n, best_k = k, best_moved = moved, best_at = first;
                memcpy(best_pick, pick, (size_t)k * sizeof *pick);
            }
        }
        if (best < 0) return 0;
        used[best] = 1;
        for (int j = 0; j < best_k; j++) out[(*nout)++] = m[best_at + best_pick[j]].wl;
    }
    return *nout > 0;
}

/* opts.consolidate_moves: w (large, of a queue below its fair share) fits
 * its quota but no node, and no queue is above its share (reclaim, which
 * applies then, is cheaper). When the free GPUs summed over the usable nodes
 * would hold it, picks nodes that moving a few small workloads makes whole,
 * proves on the cache that w then fits and that each mover fits elsewhere
 * at once (nothing displaced), and only then evicts the movers, admits w with
 * a hold and admits each mover again pinned to its new node. With
 * opts.consolidate_own, w's own queue's small workloads move too, without
 * the proof that they fit elsewhere (one that does not waits in line).
 * 1 admitted, 0 not, or an error. */
static int consolidate(struct gs_admission *a, struct gs_workload *w, const int8_t *flav)
{
    bool others = a->o.consolidate_moves > 0, own = a->o.consolidate_own > 0;
    if ((!others && !own) || a->o.quota_only || w->gpu_milli < a->o.large_gpu_milli ||
        a->fs.n[w->queue].share >= 1.0 || w->npods > 64 || above_share(a))
        return 0;
    int32_t nn = gs_cache_node_count(a->cache);
    int64_t want = 0, have = 0;
    for (size_t i = 0; i < w->npods; i++) {
        const struct gs_demand *d = &w->pods[i]->demand;
        if (d->gpu_count > 0 && d->gpu_milli < GS_GPU_MILLI) return 0; /* gangs of whole GPUs only */
        want += (int64_t)d->gpu_count * GS_GPU_MILLI;
    }
    uint8_t *used = calloc((size_t)nn + 1, 1);
    struct mover *m = malloc((a->n ? a->n : 1) * sizeof *m);
    int32_t *mv = malloc(w->npods * 8 * sizeof *mv + sizeof *mv);
    struct removed *rm = NULL;
    int rc = used && m && mv ? 0 : GS_ENOMEM;
    const uint8_t *ex = rc ? NULL : excluded_for(a, w);
    if (ex) memcpy(used, ex, (size_t)nn);
    for (int32_t n = 0; !rc && n < nn; n++) {
        const struct gs_node_info *ni = gs_cache_node(a->cache, n);
        if (ni && ni->live && !used[n]) have += ni->gpu_milli_free;
    }
    size_t nm = 0, nmv = 0;
    if (!rc && have >= want) {
        for (int32_t i = 0; i < a->t->n; i++)
            for (size_t k = 0; (others || i == w->queue) && k < a->runq[i].n; k++)
                nm += mover_of(a, a->w[a->runq[i].v[k]], &m[nm]);
        qsort(m, nm, sizeof *m, cmp_mover);
    }
    bool planned = !rc && have >= want && choose_moves(a, w, used, m, nm, mv, &nmv);
    if (planned && !(rm = calloc(nmv, sizeof *rm))) rc = GS_ENOMEM, planned = false;
    if (planned) { /* the proof: movers out, w in, each mover elsewhere, then all undone */
        for (size_t i = 0; !rc && i < nmv; i++) rc = sim_remove(a, mv[i], &rm[i]);
        size_t mark = a->kept.n;
        int ok = rc ? rc : placeable(a, w, flav, false, true);
        for (size_t i = 0; ok == 1 && i < nmv; i++) {
            struct gs_workload *v = a->w[mv[i]];
            /* The queue's own mover need not fit elsewhere: it waits in line, its queue's choice. */
            if (own && v->queue == w->queue) continue;
            ok = placeable(a, v, v->flavor, false, true);
            if (ok == 1 && a->place_nodes[0] == rm[i].asg[0].node) ok = 0; /* back where it was: no move */
        }
        unkeep(a, mark);
        for (size_t i = nmv; i-- > 0;)
            if (rm[i].asg) sim_restore(a, &rm[i]);
        if (ok < 0) rc = ok;
        planned = ok == 1;
    }
    if (planned) {
        for (size_t i = 0; !rc && i < nmv; i++) rc = evict(a, a->w[mv[i]], w, false, 0);
        int ok = rc ? rc : placeable(a, w, flav, true, true);
        if (ok == 1) {
            admit(a, w, flav);
            rc = add_hold(a, w->id, a->place_nodes, w->npods, false);
            if (!rc) a->holds[a->nholds - 1].nvictims = (int32_t)nmv;
            if (!rc) rc = pin_workload(a, w);
            a->st.consolidations++;
            a->st.consolidation_moves += (int64_t)nmv;
        } else if (ok < 0) {
            rc = ok;
        }
        for (size_t i = 0; !rc && i < nmv; i++) { /* each mover restarts at once on its new node, pinned there */
            struct gs_workload *v = a->w[mv[i]];
            int r = placeable(a, v, v->flavor, false, true);
            if (r < 0) rc = r;
            bool mine = own && v->queue == w->queue;
            a->st.consolidation_own += mine;
            if (r == 1) {
                admit(a, v, v->flavor);
                rc = add_hold(a, v->id, a->place_nodes, v->npods, true);
            } else if (r == 0 && mine) {
                a->st.consolidation_own_waiting++;
            }
        }
        if (!rc) rc = ok == 1;
    }
    free(used), free(m), free(mv), free(rm);
    return rc;
}

/*--- One try ---*/

static bool would_borrow(const struct gs_admission *a, int32_t leaf, const int64_t *req)
{
    for (int fr = 0; fr < GS_QT_NFR; fr++)
        if (req[fr] > 0 && a->q.usage[leaf][fr] + req[fr] > a->q.subtree[leaf][fr]) return true;
    return false;
}

static void milli_text(int64_t v, char *buf, size_t len)
{
    if (v == GS_QT_UNLIMITED) snprintf(buf, len, "unlimited");
    else if (v % 1000 == 0) snprintf(buf, len, "%lld", (long long)(v / 1000));
    else snprintf(buf, len, "%.3f", (double)v / 1000.0);
}

static void quota_reason(struct gs_admission *a, struct gs_workload *w)
{
    const struct gs_qt_node *n = &a->t->nodes[w->queue];
    int8_t flav[GS_QT_MAX_GROUPS] = {0};
    for (int g = 0; g < n->ngroups; g++) flav[g] = (int8_t)n->groups[g].flavors[0];
    gs_qvec req;
    request(a, w, flav, req);
    int bad = 0;
    gs_quota_fits(&a->q, w->queue, req, &bad);
    char want[32], avail[32]; /* in the resource's own units, as a manifest writes them */
    milli_text(req[bad], want, sizeof want);
    milli_text(gs_quota_available(&a->q, w->queue, bad), avail, sizeof avail);
    snprintf(w->reason, sizeof w->reason, "waiting for quota in %s %s: %s %s > %s available (flavor %s)",
             n->kind == GS_QT_CLUSTERQUEUE ? "ClusterQueue" : "queue", n->name, res_name(a, bad), want, avail,
             a->t->flavors[bad / GS_QT_MAX_RES].name);
}

/* 1 admitted, 0 not, or an error. */
static int try_admit(struct gs_admission *a, struct gs_workload *w)
{
    if (w->blocked_by >= 0 && queue_demand(a, w->blocked_by, w->blocked_res) < w->blocked_demand) w->blocked_by = -1;
    const struct gs_qt_node *n = &a->t->nodes[w->queue];
    int8_t flav[GS_QT_MAX_GROUPS] = {0}, fit_flav[GS_QT_MAX_GROUPS] = {0};
    bool quota_ok = false;
    for (int start = 0; n->ngroups && start < n->groups[0].nflavors; start++) {
        if (!choose_flavors(a, w, flav, false, start, &start)) break;
        gs_qvec req;
        request(a, w, flav, req);
        if (w->blocked_by >= 0 && would_borrow(a, w->queue, req)) {
            snprintf(w->reason, sizeof w->reason, "evicted by reclaim: not borrowing again until %s's demand drops",
                     a->t->nodes[w->blocked_by].name);
            w->fail_seq = a->release_seq;
            return 0;
        }
        if (!quota_ok) memcpy(fit_flav, flav, sizeof fit_flav);
        quota_ok = true;
        int rc = placeable(a, w, flav, true, true);
        if (rc < 0) return rc;
        if (rc == 1) {
            admit(a, w, flav);
            rc = pin_workload(a, w);
            return rc ? rc : 1;
        }
    }
    if (!quota_ok) quota_reason(a, w);
    w->placement_failed = quota_ok;
    int rc = quota_ok ? consolidate(a, w, fit_flav) : 0;
    if (rc) return rc;
    rc = preempt(a, w);
    if (rc == 0) w->fail_seq = a->release_seq;
    return rc;
}

/*--- Start estimates and the reservation ---*/

struct ending {
    int64_t end_ns;
    int32_t wl;
};

static bool end_before(const struct ending *p, const struct ending *q)
{
    return p->end_ns != q->end_ns ? p->end_ns < q->end_ns : p->wl < q->wl;
}

/* Min-heap by (end, workload): a total order, so the walk is the sorted one. */
static void end_sift(struct ending *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && end_before(&h[l], &h[m])) m = l;
        if (l + 1 < n && end_before(&h[l + 1], &h[m])) m = l + 1;
        if (m == i) return;
        struct ending t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static bool gpu_room(struct gs_admission *a, const struct gs_workload *w)
{
    int64_t free_milli = gs_cache_gpu_count(a->cache) * GS_GPU_MILLI - gs_cache_gpu_milli_used(a->cache);
    return free_milli >= w->gpu_milli;
}

/* When running workloads end at their estimates, the first time w fits
 * (quota and placement); nodes it would take then in a->place_nodes. */
static int64_t shadow_time(struct gs_admission *a, struct gs_workload *w, bool *ok)
{
    int8_t flav[GS_QT_MAX_GROUPS] = {0};
    gs_qvec req;
    int64_t now = now_ns(a), start = -1;
    *ok = false;
    if (!choose_flavors(a, w, flav, true, 0, NULL)) return -1;
    request(a, w, flav, req);
    int32_t saved_res = a->res_wl;
    a->res_wl = -1; /* the reservation being computed must not exclude its own nodes */
    if (fits_now(a, w, req, flav) == 1) {
        a->res_wl = saved_res;
        *ok = true;
        return now;
    }
    struct ending *e = malloc((a->n ? a->n : 1) * sizeof *e);
    struct removed *rm = calloc(MAX_SHADOW_STEPS, sizeof *rm);
    size_t ne = 0, k = 0;
    for (int32_t leaf = 0; e && leaf < a->t->n; leaf++)
        for (size_t i = 0; i < a->runq[leaf].n; i++) {
            const struct gs_workload *x = a->w[a->runq[leaf].v[i]];
            if (x->est_duration_ns > 0) e[ne++] = (struct ending){x->admitted_ns + x->est_duration_ns, x->id};
        }
    /* A heap, not a sort: the walk usually stops after a few endings of many. */
    for (size_t i = ne / 2; e && i-- > 0;) end_sift(e, ne, i);
    int checks = 0;
    while (rm && e && ne && k < MAX_SHADOW_STEPS && checks < MAX_SHADOW_CHECKS) {
        struct ending cur = e[0];
        e[0] = e[--ne];
        end_sift(e, ne, 0);
        if (sim_remove(a, cur.wl, &rm[k])) break;
        k++;
        if (!gs_quota_fits(&a->q, w->queue, req, NULL) || !gpu_room(a, w)) continue;
        checks++;
        if (placeable(a, w, flav, false, false) == 1) {
            start = cur.end_ns > now ? cur.end_ns : now;
            *ok = true;
            break;
        }
    }
    for (size_t i = 0; i < k; i++) sim_restore(a, &rm[i]);
    free(e), free(rm);
    a->res_wl = saved_res;
    return start;
}

/* reserve_under_share: the first pending large workload (queue order) of
 * the queue with the lowest weighted share below 1, or NULL. */
static struct gs_workload *under_share_candidate(struct gs_admission *a)
{
    int32_t leaf = -1;
    for (int32_t i = 0; i < a->t->n; i++) {
        if (!a->lq[i].n || a->fs.n[i].share >= 1.0) continue;
        bool large = false;
        for (size_t k = 0; k < a->lq[i].n && !large; k++)
            large = a->w[a->lq[i].v[k]]->gpu_milli >= a->o.large_gpu_milli;
        if (large && (leaf < 0 || a->fs.n[i].share < a->fs.n[leaf].share)) leaf = i;
    }
    for (size_t k = 0; leaf >= 0 && k < a->lq[leaf].n; k++) {
        struct gs_workload *w = a->w[a->lq[leaf].v[k]];
        if (w->gpu_milli >= a->o.large_gpu_milli) return w;
    }
    return NULL;
}

static int refresh_reservation(struct gs_admission *a)
{
    int64_t now = now_ns(a);
    if (a->res_wl >= 0 && (a->w[a->res_wl]->state != GS_WL_PENDING || now > a->res_start)) {
        a->res_wl = -1;
        a->res_nodes.n = 0;
        a->release_seq++;
    }
    if (a->res_wl >= 0 || a->o.starvation_wait_ns < 0 || a->res_fail_seq == a->release_seq) return 0;
    struct gs_workload *best = NULL;
    if (a->o.reserve_under_share) best = under_share_candidate(a);
    for (size_t i = 0; !best && i < a->n; i++) {
        struct gs_workload *w = a->w[i];
        if (w->state != GS_WL_PENDING || w->gpu_milli < a->o.large_gpu_milli) continue;
        if (now - w->created_ns < a->o.starvation_wait_ns) continue;
        if (!best || wl_before(w, best)) best = w;
    }
    if (!best) return 0;
    bool ok;
    int64_t start = shadow_time(a, best, &ok);
    if (!ok || start <= now) return 0; /* fits now (the cycle admits it) or no estimate */
    if (a->o.reserve_horizon_ns > 0 && start - now > a->o.reserve_horizon_ns) {
        a->res_fail_seq = a->release_seq; /* too far off: no idle hold; retried when capacity is released */
        a->st.reservations_beyond_horizon++;
        return 0;
    }
    a->st.reservations++;
    a->res_wl = best->id;
    a->res_start = start;
    a->res_nodes.n = 0;
    for (size_t i = 0; i < best->npods; i++)
        if (ids_push(&a->res_nodes, a->place_nodes[i])) return GS_ENOMEM;
    return 0;
}

/* The drain planner's input for w (drain.h): per usable node, when each GPU
 * will be wholly free by the declared ends of the admitted workloads on it. A
 * GPU that something without a known end holds never frees. */
static int drain_input(struct gs_admission *a, const struct gs_workload *w, struct gs__drain_node *nodes,
                       int64_t *gend, int32_t *cnt, size_t *off)
{
    int8_t flav[GS_QT_MAX_GROUPS] = {0};
    struct gs_labels labels = {0};
    if (!choose_flavors(a, w, flav, true, 0, NULL)) return 0;
    int rc = flavor_labels(a, w, flav, &labels);
    const uint8_t *excl = rc ? NULL : excluded_for(a, w);
    int64_t now = now_ns(a);
    int32_t nn = gs_cache_node_count(a->cache);
    size_t at = 0;
    for (int32_t i = 0; i < nn; i++) {
        const struct gs_node_info *ni = gs_cache_node(a->cache, i);
        off[i] = at;
        nodes[i] = (struct gs__drain_node){.model = -1, .gend = gend + at};
        if (!ni || !ni->live) continue;
        nodes[i].usable = !rc && ni->schedulable && !(excl && excl[i]) && gs__labels_cover(&labels, ni->labels);
        nodes[i].model = ni->gpu_model;
        nodes[i].ngpus = ni->ngpus;
        for (int32_t g = 0; g < ni->ngpus; g++, at++) {
            cnt[at] = 0;
            gend[at] = !ni->gpus[g].healthy ? GS_DRAIN_NEVER : ni->gpus[g].milli_free >= GS_GPU_MILLI ? now : -1;
        }
    }
    off[nn] = at;
    gs_labels_free(&labels);
    for (size_t k = 0; k < a->ndrains; k++) /* one drain per node: gangs of one queue must not share theirs */
        for (size_t i = 0; i < a->drains[k].nodes.n; i++)
            if (a->drains[k].nodes.v[i] < nn) nodes[a->drains[k].nodes.v[i]].usable = false;
    for (int32_t leaf = 0; leaf < a->t->n; leaf++)
        for (size_t k = 0; k < a->runq[leaf].n; k++) {
            const struct gs_workload *x = a->w[a->runq[leaf].v[k]];
            int64_t end = x->est_duration_ns > 0 ? x->admitted_ns + x->est_duration_ns : GS_DRAIN_NEVER;
            if (end != GS_DRAIN_NEVER && end <= now) end = now + 1; /* overran its estimate: soon, not now */
            for (size_t i = 0; i < x->npods; i++) {
                char key[512];
                gs_meta_key(&x->pods[i]->meta, key, sizeof key);
                const struct gs_assignment *as = gs_cache_pod_assignment(a->cache, key);
                if (!as || as->node < 0 || as->node >= nn) continue;
                for (int32_t g = 0; g < nodes[as->node].ngpus && g < 64; g++) {
                    if (!(as->gpu_mask >> g & 1)) continue;
                    size_t j = off[as->node] + (size_t)g;
                    cnt[j]++;
                    if (gend[j] < end) gend[j] = end;
                }
            }
        }
    for (int32_t i = 0; i < nn; i++) {
        const struct gs_node_info *ni = gs_cache_node(a->cache, i);
        for (int32_t g = 0; ni && ni->live && g < ni->ngpus; g++) {
            size_t j = off[i] + (size_t)g;
            if (gend[j] == -1 || (gend[j] != now && cnt[j] < ni->gpus[g].npods)) gend[j] = GS_DRAIN_NEVER;
        }
    }
    return rc ? rc : 1;
}

/* Plans a drain for w: 1 with the drain filled, 0 when none (no node ever,
 * fits by GPU count already, or past the horizon), or an error. */
static int plan_drain(struct gs_admission *a, struct gs_workload *w, struct drain *out)
{
    int32_t nn = gs_cache_node_count(a->cache);
    size_t ngpu = 0;
    for (int32_t i = 0; i < nn; i++) {
        const struct gs_node_info *ni = gs_cache_node(a->cache, i);
        ngpu += ni && ni->live ? (size_t)ni->ngpus : 0;
    }
    struct gs__drain_node *nodes = calloc((size_t)nn + 1, sizeof *nodes);
    int64_t *gend = malloc((ngpu + 1) * sizeof *gend);
    int32_t *cnt = malloc((ngpu + 1) * sizeof *cnt);
    size_t *off = malloc(((size_t)nn + 1) * sizeof *off);
    struct gs__drain_pod *pods = calloc(w->npods + 1, sizeof *pods);
    int32_t *where = malloc((w->npods + 1) * sizeof *where);
    int rc = nodes && gend && cnt && off && pods && where ? drain_input(a, w, nodes, gend, cnt, off) : GS_ENOMEM;
    int64_t start = 0, now = now_ns(a);
    if (rc == 1) {
        for (size_t i = 0; i < w->npods; i++) {
            struct gs__np_pod p;
            gs__np_pod_of(a->cache, w->pods[i], &p);
            pods[i] = (struct gs__drain_pod){.gpus = p.gpus, .models = p.models};
        }
        rc = gs__drain_plan(nodes, (size_t)nn, pods, w->npods, where, &start);
    }
    if (rc == 1 && start <= now) rc = 0; /* room by GPU count now: what stops it is not a drain's business */
    if (rc == 1 && a->o.reserve_horizon_ns > 0 && start - now > a->o.reserve_horizon_ns) {
        a->st.drains_beyond_horizon++;
        rc = 0;
    }
    if (rc == 1) {
        *out = (struct drain){.wl = w->id, .start = start};
        for (size_t i = 0; rc == 1 && i < w->npods; i++) {
            bool seen = where[i] < 0;
            for (size_t j = 0; j < out->nodes.n && !seen; j++) seen = out->nodes.v[j] == where[i];
            if (!seen && ids_push(&out->nodes, where[i])) rc = GS_ENOMEM;
        }
        if (rc != 1) free(out->nodes.v);
    }
    free(nodes), free(gend), free(cnt), free(off), free(pods), free(where);
    return rc;
}

/* opts.drain: drops drains that are done (their gang admitted or gone, the
 * start passed, the queue at its share again), then plans new ones for the
 * large workloads of queues below their fair share that fit their quota but
 * found no placement, lowest share first, while the queue's drained GPUs
 * stay under what it lacks of its share. */
static int refresh_drains(struct gs_admission *a)
{
    if (!a->o.drain) return 0;
    int64_t now = now_ns(a);
    for (size_t k = a->ndrains; k-- > 0;) {
        const struct gs_workload *w = a->w[a->drains[k].wl];
        if (w->state != GS_WL_PENDING || now > a->drains[k].start || a->fs.n[w->queue].share >= 1.0) drop_drain(a, k);
    }
    if (a->drain_fail_seq == a->release_seq) return 0;
    int r = a->fs.gpu_res, planned = 0, made = 0;
    bool *seen = a->cand; /* reused: the cycle sets it again before its loop */
    for (int32_t i = 0; i < a->t->n; i++) seen[i] = false;
    for (;;) {
        int32_t leaf = -1;
        for (int32_t i = 0; i < a->t->n; i++)
            if (!seen[i] && a->lq[i].n && a->fs.n[i].share < 1.0 && (leaf < 0 || a->fs.n[i].share < a->fs.n[leaf].share))
                leaf = i;
        if (leaf < 0 || r < 0) break;
        seen[leaf] = true;
        double lack = a->fs.n[leaf].deserved[r] - (double)leaf_use(a, leaf, r);
        for (size_t k = 0; k < a->ndrains; k++)
            if (a->w[a->drains[k].wl]->queue == leaf) lack -= (double)a->w[a->drains[k].wl]->gpu_milli;
        for (size_t k = 0; k < a->lq[leaf].n && lack > 0 && a->ndrains < MAX_DRAINS && planned < MAX_DRAIN_PLANS; k++) {
            struct gs_workload *w = a->w[a->lq[leaf].v[k]];
            if (!w->placement_failed || w->gpu_milli < a->o.large_gpu_milli || w->id == a->res_wl || drained(a, w->id))
                continue;
            planned++;
            int rc = plan_drain(a, w, &a->drains[a->ndrains]);
            if (rc < 0) return rc;
            if (rc == 0) continue;
            a->ndrains++, made++;
            a->st.drains++;
            lack -= (double)w->gpu_milli;
        }
    }
    if (planned && !made) a->drain_fail_seq = a->release_seq; /* tried and failed: wait for a release */
    return 0;
}

int64_t gs_admission_estimate_start(struct gs_admission *a, int32_t id)
{
    if (id < 0 || (size_t)id >= a->n || a->w[id]->state != GS_WL_PENDING) return -1;
    if (a->res_wl == id) return a->res_start;
    if (grow_scratch(a, a->w[id]->npods)) return -1;
    bool ok;
    int64_t t = shadow_time(a, a->w[id], &ok);
    return ok ? t : -1;
}

int32_t gs_admission_reservation(const struct gs_admission *a, int64_t *start_ns)
{
    if (start_ns) *start_ns = a->res_wl >= 0 ? a->res_start : -1;
    return a->res_wl;
}

/*--- The cycle ---*/

static void pending_demand(struct gs_admission *a)
{
    for (int32_t i = 0; i < a->t->n; i++) {
        memset(a->pend[i], 0, sizeof a->pend[i]);
        for (size_t k = 0; k < a->lq[i].n; k++)
            for (int r = 0; r < GS_QT_MAX_RES; r++) a->pend[i][r] += (double)a->w[a->lq[i].v[k]]->demand[r];
    }
}

/* share_gate: is some queue other than leaf below its fair share with a
 * GPU workload that fit its quota but found no placement? */
static bool starved_elsewhere(const struct gs_admission *a, int32_t leaf)
{
    for (int32_t i = 0; i < a->t->n; i++) {
        if (i == leaf || !a->lq[i].n || a->fs.n[i].share >= 1.0) continue;
        for (size_t k = 0; k < a->lq[i].n; k++) {
            const struct gs_workload *w = a->w[a->lq[i].v[k]];
            if (w->placement_failed && w->gpu_milli > 0) return true;
        }
    }
    return false;
}

/* pin_large: is some queue below its fair share waiting with a large GPU
 * workload (large_gpu_milli) that fit its quota but found no placement? */
static bool starved_large(const struct gs_admission *a)
{
    for (int32_t i = 0; i < a->t->n; i++) {
        if (!a->lq[i].n || a->fs.n[i].share >= 1.0) continue;
        for (size_t k = 0; k < a->lq[i].n; k++) {
            const struct gs_workload *w = a->w[a->lq[i].v[k]];
            if (w->placement_failed && w->gpu_milli >= a->o.large_gpu_milli) return true;
        }
    }
    return false;
}

/* pin_above: does some queue use more GPUs than its fair share (by at least
 * one GPU), so that a queue below its share is owed capacity others hold? */
static bool above_share(const struct gs_admission *a)
{
    int r = a->fs.gpu_res;
    for (int32_t i = 0; r >= 0 && i < a->t->n; i++)
        if (gs_queue_tree_is_leaf(a->t, i) && (double)leaf_use(a, i, r) >= a->fs.n[i].deserved[r] + GS_GPU_MILLI)
            return true;
    return false;
}

/* Tries the pending workloads of one leaf in order; 1 when one was admitted. */
static int serve_leaf(struct gs_admission *a, int32_t leaf)
{
    bool strict = a->t->nodes[leaf].strategy == GS_QT_STRICT_FIFO;
    bool gated = a->o.share_gate && a->fs.n[leaf].share >= 1.0 && starved_elsewhere(a, leaf);
    if (gated) a->st.share_gated++;
    for (size_t k = 0; k < a->lq[leaf].n && a->checks < a->o.max_checks; k++) {
        struct gs_workload *w = a->w[a->lq[leaf].v[k]];
        if (gated && w->gpu_milli > 0) {
            if (strict) return 0;
            continue;
        }
        if (w->id == a->res_wl) {
            if (strict) return 0;
            continue; /* tried first in the cycle */
        }
        if (w->fail_seq != a->release_seq && w->evicted_cycle != a->cycle_no) {
            int rc = try_admit(a, w);
            if (rc) return rc;
        }
        if (strict) return 0;
    }
    return 0;
}

/* The pods kept assumed during the cycle leave the cache: the scheduler places them for real. */
static void release_kept(struct gs_admission *a)
{
    for (size_t k = 0; k < a->kept.n; k++) {
        const struct gs_workload *w = a->w[a->kept.v[k]];
        for (size_t i = 0; i < w->npods; i++) {
            char key[512];
            gs_meta_key(&w->pods[i]->meta, key, sizeof key);
            gs_cache_remove_pod(a->cache, key);
        }
    }
    a->kept.n = 0;
}

static int dra_recheck(struct gs_admission *a);

int gs_admission_cycle(struct gs_admission *a, struct gs_admission_result *out)
{
    a->adm.n = a->ev.n = 0;
    a->checks = a->searches = 0;
    a->cycle_no++;
    gs_fairshare_advance(&a->fs, &a->q, now_ns(a));
    expire_holds(a);
    int rc = grow_scratch(a, 1);
    if (!rc && a->o.dra && gs_dra_admit_generation(a->o.dra) != a->dra_gen) {
        a->dra_gen = gs_dra_admit_generation(a->o.dra);
        rc = dra_recheck(a);
        a->release_seq++; /* quota or feasibility changed: everyone may try again */
    }
    pending_demand(a); /* fair shares are current for the reservation's reclaim too */
    gs_fairshare_compute(&a->fs, &a->q, (const double(*)[GS_QT_MAX_RES])a->pend);
    if (!rc) rc = refresh_reservation(a);
    if (!rc) rc = refresh_drains(a);
    if (!rc && a->res_wl >= 0) {
        rc = try_admit(a, a->w[a->res_wl]);
        if (rc > 0) rc = 0;
    }
    for (int32_t i = 0; i < a->t->n; i++) a->cand[i] = a->lq[i].n > 0;
    bool dirty = true;
    while (!rc && a->checks < a->o.max_checks) {
        if (dirty) {
            pending_demand(a);
            gs_fairshare_compute(&a->fs, &a->q, (const double(*)[GS_QT_MAX_RES])a->pend);
        }
        int32_t leaf = gs_fairshare_pick(&a->fs, a->cand);
        if (leaf < 0) break;
        rc = serve_leaf(a, leaf);
        dirty = rc == 1;
        if (rc == 1) rc = 0;
        else a->cand[leaf] = false;
    }
    release_kept(a);
    if (out) *out = (struct gs_admission_result){a->adm.v, a->adm.n, a->ev.v, a->ev.n};
    return rc < 0 ? rc : 0;
}

/*--- Submission ---*/

/* Adds pod's demand per resource to out; *uncovered set when it asks for
 * something the leaf of a strict (Kueue) queue does not cover. */
static void pod_demand(const struct gs_admission *a, int32_t leaf, const struct gs_pod *pod, int64_t *out,
                       bool *uncovered)
{
    const struct gs_queue_tree *t = a->t;
    const struct gs_qt_node *n = &t->nodes[leaf];
    bool covered[GS_QT_MAX_RES] = {0};
    for (int g = 0; g < n->ngroups; g++)
        for (int k = 0; k < n->groups[g].nres; k++) covered[n->groups[g].res[k]] = true;
    int cpu = gs_queue_tree_res(t, GS_RES_CPU), mem = gs_queue_tree_res(t, GS_RES_MEMORY);
    int gpu = gs_queue_tree_res(t, GS_RES_GPU), pods = gs_queue_tree_res(t, GS_RES_PODS);
    const struct gs_demand *d = &pod->demand;
    int64_t g = (int64_t)d->gpu_count * d->gpu_milli;
    struct { int id; int64_t v; } each[] = {{cpu, d->cpu_milli}, {mem, d->mem_bytes * 1000}, {gpu, g}, {pods, 1000}};
    for (size_t k = 0; k < sizeof each / sizeof each[0]; k++) {
        if (each[k].id >= 0) out[each[k].id] += each[k].v;
        if (k < 3 && each[k].v > 0 && n->strict_cover && (each[k].id < 0 || !covered[each[k].id])) *uncovered = true;
    }
    for (size_t k = 0; k < d->extended.n; k++) {
        int r = gs_queue_tree_res(t, d->extended.v[k].name);
        if (r >= 0) out[r] += d->extended.v[k].milli;
        if (n->strict_cover && (r < 0 || !covered[r]) && d->extended.v[k].milli > 0) *uncovered = true;
    }
}

/* The devices pods' claims ask for (dra_admit.h), added to out as whole units of their
 * resource names. 0, or the dra_admit error with why filled (w->reason). */
static int dra_demand(struct gs_admission *a, int32_t leaf, const struct gs_pod *const *pods, size_t npods, int flags,
                      int64_t *out, int64_t *gpu_milli, bool *uncovered, char *why, size_t len)
{
    struct gs_dra_need need = {0};
    /* what was counted is charged even when a claim fails the feasibility check: a workload
     * restored as running holds those devices */
    int rc = gs_dra_admit_need(a->o.dra, pods, npods, flags, &need, why, len);
    const struct gs_qt_node *n = &a->t->nodes[leaf];
    for (size_t i = 0; i < need.n; i++) {
        int r = gs_queue_tree_res(a->t, need.v[i].resource);
        bool covered = false;
        for (int g = 0; r >= 0 && g < n->ngroups && !covered; g++)
            for (int k = 0; k < n->groups[g].nres; k++) covered |= n->groups[g].res[k] == r;
        if (r >= 0) out[r] += need.v[i].devices * 1000;
        if (gpu_milli && need.v[i].devices > 0 && !strcmp(need.v[i].resource, GS_RES_GPU))
            *gpu_milli += need.v[i].devices * GS_GPU_MILLI;
        if (n->strict_cover && !covered && need.v[i].devices > 0 && uncovered) {
            *uncovered = true;
            if (!rc) snprintf(why, len, "claims ask for %lld of %s, which ClusterQueue %s does not cover",
                              (long long)need.v[i].devices, need.v[i].resource, n->name);
        }
    }
    return rc;
}

static void build_demand(struct gs_admission *a, struct gs_workload *w, bool *uncovered)
{
    *uncovered = false;
    for (size_t i = 0; i < w->npods; i++) {
        const struct gs_demand *d = &w->pods[i]->demand;
        w->gpu_milli += (int64_t)d->gpu_count * d->gpu_milli;
        pod_demand(a, w->queue, w->pods[i], w->demand, uncovered);
        if (a->o.dra && gs_dra_admit_pod_has_claims(w->pods[i])) w->has_claims = true;
    }
    w->dra_wait = false;
    if (!w->has_claims || *uncovered) return;
    bool dra_uncovered = false;
    int rc = dra_demand(a, w->queue, w->pods, w->npods, GS_DRA_NEED_SHARED | GS_DRA_NEED_FEASIBLE, w->demand,
                        &w->gpu_milli, &dra_uncovered, w->reason, sizeof w->reason);
    if (rc || dra_uncovered) w->dra_wait = true; /* w->reason says which claim and why */
}

/* DRA objects changed: workloads waiting for their claims are looked at again (a class or a
 * node with the devices appeared), and pending ones whose claims no longer fit anywhere
 * become inadmissible. Admitted workloads keep what they reserved. */
static int dra_recheck(struct gs_admission *a)
{
    for (size_t i = 0; i < a->n; i++) {
        struct gs_workload *w = a->w[i];
        if (!w->has_claims || !(w->state == GS_WL_PENDING || (w->state == GS_WL_INADMISSIBLE && w->dra_wait))) continue;
        memset(w->demand, 0, sizeof w->demand);
        w->gpu_milli = 0;
        bool uncovered;
        build_demand(a, w, &uncovered);
        if (w->state == GS_WL_PENDING && (w->dra_wait || uncovered)) {
            pending_remove(a, w);
            w->state = GS_WL_INADMISSIBLE;
            w->dra_wait = true;
        } else if (w->state == GS_WL_INADMISSIBLE && !w->dra_wait && !uncovered) {
            w->reason[0] = '\0';
            w->fail_seq = 0;
            int rc = pending_insert(a, w);
            if (rc) return rc;
        }
    }
    return 0;
}

int gs_admission_pod_finished(struct gs_admission *a, int32_t id, const struct gs_pod *pod)
{
    if (id < 0 || (size_t)id >= a->n) return GS_ENOENT;
    struct gs_workload *w = a->w[id];
    size_t i = 0;
    while (i < w->npods && w->pods[i] != pod) i++;
    if (i == w->npods) return GS_ENOENT;
    if (w->state != GS_WL_ADMITTED) return GS_ESTATE;
    if (w->pod_done[i]) return 0;
    gs_qvec before, after;
    gs_fairshare_advance(&a->fs, &a->q, now_ns(a));
    request(a, w, w->flavor, before);
    bool unused = false;
    int64_t d[GS_QT_MAX_RES] = {0};
    pod_demand(a, w->queue, pod, d, &unused);
    char why[192];
    if (w->has_claims) /* the pod's own template claims; named ones stay with the workload */
        dra_demand(a, w->queue, &pod, 1, 0, d, NULL, NULL, why, sizeof why);
    for (int r = 0; r < GS_QT_MAX_RES; r++) w->released[r] += d[r];
    w->pod_done[i] = 1;
    request(a, w, w->flavor, after);
    for (int fr = 0; fr < GS_QT_NFR; fr++) before[fr] -= after[fr];
    gs_quota_apply(&a->q, w->queue, before, -1);
    a->release_seq++;
    return 0;
}

int gs_admission_submit(struct gs_admission *a, const struct gs_workload_spec *s)
{
    int32_t leaf = gs_queue_tree_resolve(a->t, s->namespace_, s->queue);
    if (leaf < 0) return GS_ENOENT;
    if (gs_admission_find(a, s->key) >= 0) return GS_EEXIST;
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 64;
        struct gs_workload **v = realloc(a->w, cap * sizeof *v);
        if (!v) return GS_ENOMEM;
        a->w = v;
        a->cap = cap;
    }
    struct runq *rq = &a->runq[leaf];
    if (rq->cap == rq->submitted) {
        size_t cap = rq->cap ? 2 * rq->cap : 16;
        int32_t *v = realloc(rq->v, cap * sizeof *v);
        if (!v) return GS_ENOMEM;
        rq->v = v;
        rq->cap = cap;
    }
    struct gs_workload *w = calloc(1, sizeof *w);
    if (!w) return GS_ENOMEM;
    w->key = strdup(s->key);
    w->pods = malloc((s->npods ? s->npods : 1) * sizeof *w->pods);
    w->pod_done = calloc(s->npods ? s->npods : 1, 1);
    if (!w->key || !w->pods || !w->pod_done || gs__strmap_put(&a->by_key, w->key, (void *)(intptr_t)(a->n + 1))) {
        if (w->key) gs__strmap_del(&a->by_key, w->key);
        free(w->key), free(w->pods), free(w->pod_done), free(w);
        return GS_ENOMEM;
    }
    memcpy(w->pods, s->pods, s->npods * sizeof *w->pods);
    w->npods = s->npods;
    w->id = (int32_t)a->n;
    w->queue = leaf;
    w->priority = s->priority;
    w->est_duration_ns = s->est_duration_ns;
    w->created_ns = now_ns(a);
    w->seq = ++a->seq;
    w->blocked_by = -1;
    bool uncovered;
    build_demand(a, w, &uncovered);
    rq->submitted++;
    a->w[a->n++] = w;
    if (uncovered) {
        w->state = GS_WL_INADMISSIBLE;
        snprintf(w->reason, sizeof w->reason, "asks for a resource ClusterQueue %s does not cover",
                 a->t->nodes[leaf].name);
        return w->id;
    }
    if (w->dra_wait) {
        w->state = GS_WL_INADMISSIBLE; /* w->reason names the claim */
        return w->id;
    }
    int rc = pending_insert(a, w);
    return rc ? rc : w->id;
}

int gs_admission_submit_pod(struct gs_admission *a, const struct gs_pod *pod, int64_t est_duration_ns)
{
    char key[512];
    gs_meta_key(&pod->meta, key, sizeof key);
    const struct gs_pod *pods[1] = {pod};
    struct gs_workload_spec s = {.key = key, .namespace_ = pod->meta.namespace_, .queue = pod->queue_name,
                                 .priority = pod->priority, .pods = pods, .npods = 1,
                                 .est_duration_ns = est_duration_ns};
    return gs_admission_submit(a, &s);
}

/*--- Life cycle and lookups ---*/

static void set_defaults(struct gs_admission_opts *o)
{
    if (o->halflife_ns <= 0) o->halflife_ns = 3600 * GS_NS_PER_SEC;
    if (o->history_weight < 0) o->history_weight = 0.5;
    if (o->starvation_wait_ns == 0) o->starvation_wait_ns = 1800 * GS_NS_PER_SEC;
    if (o->large_gpu_milli <= 0) o->large_gpu_milli = 8000;
    if (o->hold_ns <= 0) o->hold_ns = 60 * GS_NS_PER_SEC;
    if (o->max_checks <= 0) o->max_checks = 256;
    if (o->reclaim_min_runtime_ns == 0) o->reclaim_min_runtime_ns = 600 * GS_NS_PER_SEC;
    if (o->reclaim_wait_ns == 0) o->reclaim_wait_ns = 600 * GS_NS_PER_SEC;
    if (o->max_preemptions == 0) o->max_preemptions = 1;
    if (o->preemption_window_ns <= 0) o->preemption_window_ns = 3600 * GS_NS_PER_SEC;
    if (o->evict_charge == 0) o->evict_charge = 1;
    if (o->max_victim_searches == 0) o->max_victim_searches = 8;
    if (o->reserve_horizon_ns == 0) o->reserve_horizon_ns = 3600 * GS_NS_PER_SEC;
}

int gs_admission_new(const struct gs_queue_tree *tree, struct gs_cache *cache, const struct gs_clock *clock,
                     const struct gs_admission_opts *o, struct gs_admission **out, struct gs_diags *d)
{
    if (!tree->finalized) return GS_ESTATE;
    struct gs_admission *a = calloc(1, sizeof *a);
    if (!a) return GS_ENOMEM;
    a->t = tree;
    a->cache = cache;
    a->clock = clock;
    if (o) a->o = *o;
    else a->o.history_weight = -1;
    set_defaults(&a->o);
    a->release_seq = 1;
    a->res_wl = -1;
    size_t n = tree->n ? (size_t)tree->n : 1;
    a->lq = calloc(n, sizeof *a->lq);
    a->runq = calloc(n, sizeof *a->runq);
    a->q_preempt = calloc(n, sizeof *a->q_preempt);
    a->q_caused = calloc(n, sizeof *a->q_caused);
    a->pend = calloc(n, sizeof *a->pend);
    a->cand = calloc(n, sizeof *a->cand);
    int rc = a->lq && a->runq && a->q_preempt && a->q_caused && a->pend && a->cand ? 0 : GS_ENOMEM;
    if (!rc) rc = gs_quota_init(&a->q, tree);
    if (!rc) rc = gs_fairshare_init(&a->fs, tree, a->o.halflife_ns, a->o.history_weight, now_ns(a));
    if (!rc) rc = gs_placer_new(cache, clock, a->o.profile, &a->placer, d);
    if (rc) {
        gs_admission_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void gs_admission_free(struct gs_admission *a)
{
    if (!a) return;
    for (size_t i = 0; i < a->n; i++) {
        free(a->w[i]->key);
        free(a->w[i]->pods);
        free(a->w[i]->pod_done);
        free(a->w[i]);
    }
    free(a->w);
    for (int32_t i = 0; a->lq && i < a->t->n; i++) free(a->lq[i].v);
    for (int32_t i = 0; a->runq && i < a->t->n; i++) free(a->runq[i].v);
    for (size_t h = 0; h < a->nholds; h++) free(a->holds[h].nodes);
    free(a->holds);
    for (size_t k = 0; k < a->ndrains; k++) free(a->drains[k].nodes.v);
    free(a->lq), free(a->q_preempt), free(a->q_caused), free(a->pend), free(a->cand);
    free(a->adm.v), free(a->ev.v), free(a->res_nodes.v), free(a->kept.v);
    free(a->excl), free(a->place_nodes), free(a->runq);
    gs__strmap_free(&a->by_key);
    gs_quota_free(&a->q);
    gs_fairshare_free(&a->fs);
    gs_placer_free(a->placer);
    free(a);
}

const struct gs_workload *gs_admission_workload(const struct gs_admission *a, int32_t id)
{
    return id >= 0 && (size_t)id < a->n ? a->w[id] : NULL;
}

int32_t gs_admission_find(const struct gs_admission *a, const char *key)
{
    void *v = key ? gs__strmap_get(&a->by_key, key) : NULL;
    return v ? (int32_t)((intptr_t)v - 1) : -1;
}

size_t gs_admission_count(const struct gs_admission *a) { return a->n; }
const struct gs_queue_tree *gs_admission_tree(const struct gs_admission *a) { return a->t; }
const struct gs_quota *gs_admission_quota(const struct gs_admission *a) { return &a->q; }

int32_t gs_admission_position(const struct gs_admission *a, int32_t id)
{
    const struct gs_workload *w = gs_admission_workload(a, id);
    if (!w || w->state != GS_WL_PENDING) return 0;
    for (size_t i = 0; i < a->lq[w->queue].n; i++)
        if (a->lq[w->queue].v[i] == id) return (int32_t)i + 1;
    return 0;
}

int gs_admission_check(const struct gs_admission *a, char *why, size_t len)
{
    int rc = gs_quota_check(&a->q, why, len);
    if (rc) return rc;
    gs_qvec *sum = calloc(a->t->n ? (size_t)a->t->n : 1, sizeof *sum);
    if (!sum) return GS_ENOMEM;
    for (size_t i = 0; i < a->n; i++) {
        const struct gs_workload *w = a->w[i];
        if (w->state != GS_WL_ADMITTED) continue;
        gs_qvec req;
        request(a, w, w->flavor, req);
        for (int fr = 0; fr < GS_QT_NFR; fr++) sum[w->queue][fr] += req[fr];
    }
    for (size_t i = 0; !rc && i < a->n; i++) { /* the running lists hold exactly the admitted */
        const struct gs_workload *w = a->w[i];
        const struct runq *q = &a->runq[w->queue];
        size_t at = run_slot(a, q, w);
        bool listed = at < q->n && q->v[at] == w->id;
        if (listed != (w->state == GS_WL_ADMITTED)) {
            snprintf(why, len, "workload %s: %s the running list of its queue", w->key,
                     listed ? "not admitted but in" : "admitted but missing from");
            rc = GS_ESTATE;
        }
    }
    for (int32_t i = 0; !rc && i < a->t->n; i++) {
        size_t capped = 0;
        for (size_t k = 0; k < a->runq[i].n; k++) capped += run_capped(a, a->w[a->runq[i].v[k]]);
        if (capped != a->runq[i].capped) {
            snprintf(why, len, "queue %s: %zu running workloads at the eviction cap, counted %zu", a->t->nodes[i].name,
                     capped, a->runq[i].capped);
            rc = GS_ESTATE;
        }
    }
    for (size_t i = 0; !rc && i < a->n; i++) {
        const struct gs_workload *w = a->w[i];
        if (a->o.max_preemptions > 0 && w->window_preemptions > a->o.max_preemptions) {
            snprintf(why, len, "workload %s evicted %d times within one window (cap %d)", w->key,
                     w->window_preemptions, a->o.max_preemptions);
            rc = GS_ESTATE;
        }
    }
    for (int32_t i = 0; !rc && i < a->t->n; i++) {
        if (a->t->nodes[i].nchildren) continue;
        for (int fr = 0; fr < GS_QT_NFR && !rc; fr++)
            if (sum[i][fr] != a->q.usage[i][fr]) {
                snprintf(why, len, "queue %s: usage %lld of %s != sum of admitted %lld", a->t->nodes[i].name,
                         (long long)a->q.usage[i][fr], res_name(a, fr), (long long)sum[i][fr]);
                rc = GS_ESTATE;
            }
    }
    free(sum);
    return rc;
}

/*--- Observability ---*/

void gs_admission_stats(const struct gs_admission *a, struct gs_admission_stats *out) { *out = a->st; }

int gs_admission_queue_status(struct gs_admission *a, int32_t i, struct gs_queue_status *s)
{
    if (i < 0 || i >= a->t->n) return GS_ENOENT;
    const struct gs_qt_node *n = &a->t->nodes[i];
    gs_fairshare_advance(&a->fs, &a->q, now_ns(a));
    pending_demand(a);
    gs_fairshare_compute(&a->fs, &a->q, (const double(*)[GS_QT_MAX_RES])a->pend);
    memset(s, 0, sizeof *s);
    s->name = n->name;
    s->index = i;
    s->parent = n->parent;
    s->weight = n->weight;
    s->priority = n->priority;
    for (int r = 0; r < a->t->nres; r++) {
        for (int f = 0; f < a->t->nflavors; f++) {
            int fr = GS_QT_FR(f, r);
            s->nominal[r] += n->quota[fr].nominal;
            s->borrowed[r] += gs_quota_borrowed(&a->q, i, fr);
            s->lent[r] += gs_quota_lent(&a->q, i, fr);
        }
        s->usage[r] = (int64_t)a->fs.n[i].usage[r];
        s->fair_share[r] = a->fs.n[i].deserved[r];
    }
    s->decayed_gpu_hours = a->fs.n[i].ledger_gpu_hours;
    s->weighted_share = a->fs.n[i].share;
    s->key = a->fs.n[i].key;
    for (size_t k = 0; k < a->n; k++) {
        const struct gs_workload *w = a->w[k];
        for (int32_t j = w->queue; j >= 0; j = a->t->nodes[j].parent) {
            if (j != i) continue;
            s->pending += w->state == GS_WL_PENDING;
            s->admitted += w->state == GS_WL_ADMITTED;
        }
    }
    for (int32_t j = 0; j < a->t->n; j++)
        for (int32_t x = j; x >= 0; x = a->t->nodes[x].parent)
            if (x == i) s->preemptions += a->q_preempt[j];
    return 0;
}

static json_t *res_obj(const struct gs_admission *a, const int64_t *v, const double *dv)
{
    json_t *o = json_object();
    for (int r = 0; o && r < a->t->nres; r++)
        json_object_set_new(o, a->t->res_names[r], dv ? json_real(dv[r] / 1000.0) : json_real((double)v[r] / 1000.0));
    return o;
}

json_t *gs_admission_status_json(struct gs_admission *a)
{
    json_t *arr = json_array();
    for (int32_t i = 0; arr && i < a->t->n; i++) {
        struct gs_queue_status s;
        gs_admission_queue_status(a, i, &s);
        static const char *const kinds[] = {"Root", "Cohort", "ClusterQueue", "Queue"};
        json_t *o = json_pack("{s:s, s:s, s:s?, s:f, s:i}", "name", s.name, "kind", kinds[a->t->nodes[i].kind],
                              "parent", s.parent >= 0 ? a->t->nodes[s.parent].name : NULL, "weight", s.weight,
                              "priority", s.priority);
        if (!o) continue;
        json_object_set_new(o, "nominal", res_obj(a, s.nominal, NULL));
        json_object_set_new(o, "borrowed", res_obj(a, s.borrowed, NULL));
        json_object_set_new(o, "lent", res_obj(a, s.lent, NULL));
        json_object_set_new(o, "usage", res_obj(a, s.usage, NULL));
        json_object_set_new(o, "fairShare", res_obj(a, NULL, s.fair_share));
        json_object_set_new(o, "decayedGpuHours", json_real(s.decayed_gpu_hours));
        json_object_set_new(o, "weightedShare", json_real(s.weighted_share));
        json_object_set_new(o, "orderingKey", json_real(s.key));
        json_object_set_new(o, "pendingWorkloads", json_integer(s.pending));
        json_object_set_new(o, "admittedWorkloads", json_integer(s.admitted));
        json_object_set_new(o, "preemptions", json_integer(s.preemptions));
        int64_t caused = 0;
        for (int32_t j = 0; j < a->t->n; j++)
            for (int32_t x = j; x >= 0; x = a->t->nodes[x].parent)
                if (x == i) caused += a->q_caused[j];
        json_object_set_new(o, "evictionsCaused", json_integer(caused));
        json_array_append_new(arr, o);
    }
    return arr;
}

static json_t *stats_json(const struct gs_admission *a)
{
    const struct gs_admission_stats *s = &a->st;
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:f}", "admitted", (json_int_t)s->admitted,
                     "evictions", (json_int_t)s->evictions, "reclaims", (json_int_t)s->reclaims, "victimSearches",
                     (json_int_t)s->victim_searches, "victimSearchesWon", (json_int_t)s->victim_searches_won,
                     "sparedMinRuntime", (json_int_t)s->spared_min_runtime, "sparedFairShare",
                     (json_int_t)s->spared_fair_share, "sparedPreemptionCap", (json_int_t)s->spared_cap, "reclaimsDeferred", (json_int_t)s->reclaims_deferred,
                     "placementChecks", (json_int_t)s->placement_checks, "prefilterSkips",
                     (json_int_t)s->prefilter_skips, "maxWorkloadPreemptions", s->max_workload_preemptions,
                     "chargedGpuHours", s->charged_gpu_hours);
    if (o)
        json_object_update_new(o, json_pack("{s:I, s:I, s:I, s:I, s:I}", "reservations", (json_int_t)s->reservations,
                                            "reservationsBeyondHorizon", (json_int_t)s->reservations_beyond_horizon,
                                            "nodewiseWon", (json_int_t)s->nodewise_won, "nodewiseRefused",
                                            (json_int_t)s->nodewise_refused, "nodewiseUnproven",
                                            (json_int_t)s->nodewise_unproven));
    if (o)
        json_object_update_new(o, json_pack("{s:I, s:I, s:f}", "claimsUnplaced", (json_int_t)s->claims_unplaced,
                                            "evictionsUnplaced", (json_int_t)s->evictions_unplaced, "evictedGpus",
                                            (double)s->evicted_gpu_milli / 1000.0));
    return o;
}

/* The first max_listed pending workloads of leaf i, in line order. */
static json_t *pending_json(struct gs_admission *a, int32_t i, size_t max_listed, size_t *estimated, size_t max_est)
{
    json_t *arr = json_array();
    int64_t now = now_ns(a);
    for (size_t k = 0; arr && k < a->lq[i].n && k < max_listed; k++) {
        const struct gs_workload *w = a->w[a->lq[i].v[k]];
        int64_t start = -1;
        if (*estimated < max_est) start = gs_admission_estimate_start(a, w->id), ++*estimated;
        json_t *o = json_pack("{s:s, s:i, s:i, s:f, s:f, s:i, s:f, s:s, s:b}", "workload", w->key, "position",
                              (int)k + 1, "priority", w->priority, "gpus", (double)w->gpu_milli / 1000.0,
                              "waitingSeconds", (double)(now - w->created_ns) / GS_NS_PER_SEC, "preemptions",
                              w->preemptions, "estimatedStart",
                              start >= 0 ? (double)start / GS_NS_PER_SEC : -1.0, "reason", w->reason,
                              "reservation", a->res_wl == w->id);
        if (o) json_array_append_new(arr, o);
    }
    return arr;
}

json_t *gs_admission_queues_json(struct gs_admission *a, size_t max_listed, size_t max_estimated)
{
    json_t *qs = gs_admission_status_json(a);
    size_t estimated = 0;
    for (int32_t i = 0; qs && i < a->t->n; i++) {
        json_t *o = json_array_get(qs, (size_t)i);
        if (o && gs_queue_tree_is_leaf(a->t, i))
            json_object_set_new(o, "pending", pending_json(a, i, max_listed, &estimated, max_estimated));
    }
    json_t *drains = json_array();
    for (size_t k = 0; drains && k < a->ndrains; k++) {
        const struct drain *x = &a->drains[k];
        json_t *nodes = json_array();
        for (size_t i = 0; nodes && i < x->nodes.n; i++) {
            const struct gs_node_info *ni = gs_cache_node(a->cache, x->nodes.v[i]);
            json_array_append_new(nodes, json_string(ni && ni->name ? ni->name : "?"));
        }
        json_array_append_new(drains, json_pack("{s:s, s:f, s:o}", "workload", a->w[x->wl]->key, "start",
                                                (double)x->start / GS_NS_PER_SEC, "nodes", nodes ? nodes : json_array()));
    }
    json_t *res = json_null();
    if (a->res_wl >= 0)
        res = json_pack("{s:s, s:f}", "workload", a->w[a->res_wl]->key, "start",
                        (double)a->res_start / GS_NS_PER_SEC);
    json_t *out = json_pack("{s:f, s:o, s:o, s:o}", "time", (double)now_ns(a) / GS_NS_PER_SEC, "queues",
                            qs ? qs : json_array(), "reservation", res ? res : json_null(), "stats", stats_json(a));
    if (out && a->o.drain && drains) json_object_set(out, "drains", drains);
    json_decref(drains);
    return out;
}

json_t *gs_admission_explain_json(struct gs_admission *a, const char *key)
{
    int32_t id = gs_admission_find(a, key);
    if (id < 0) return NULL;
    const struct gs_workload *w = a->w[id];
    static const char *const states[] = {"Pending", "Admitted", "Finished", "Inadmissible"};
    int64_t start = w->state == GS_WL_PENDING ? gs_admission_estimate_start(a, id) : -1;
    return json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:s, s:i, s:b}", "workload", w->key, "queue",
                     a->t->nodes[w->queue].name, "state", states[w->state], "position", gs_admission_position(a, id),
                     "priority", w->priority, "estimatedStart",
                     start >= 0 ? (double)start / (double)GS_NS_PER_SEC : -1.0, "reason", w->reason, "preemptions",
                     w->preemptions, "reservation", a->res_wl == id);
}

/*--- Hold filter plugin ---*/

json_t *gs_admission_plugin_args(struct gs_admission *a)
{
    /* In-process wiring: the admission is named by its address. */
    return json_pack("{s:I}", "admission", (json_int_t)(intptr_t)a);
}

static int hold_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    (void)h;
    json_t *v = json_object_get(args, "admission");
    if (!json_is_integer(v)) {
        gs_diags_add(d, "args.admission", "AdmissionHold needs the admission from gs_admission_plugin_args()");
        return GS_EINVAL;
    }
    *state = (void *)(intptr_t)json_integer_value(v);
    return 0;
}

static void hold_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                        struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)cs;
    const struct gs_admission *a = state;
    if (!a->nholds) return;
    size_t at;
    const struct hold *p = pin_of(a, pod, &at); /* looked up once per pod, not per node */
    for (size_t i = 0; i < n; i++)
        if (p ? p->nodes[at] != nodes[i]->idx : held_for_other(a, nodes[i]->idx, pod)) reject[i] = 1;
}

/* Class-wise only when no hold can reject the pod: then the filter keeps every node. */
static bool hold_by_class(void *state, const struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)cs;
    return !gs_admission_holds_apply(state, pod);
}

static int hold_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)state, (void)pod, (void)code;
    return snprintf(buf, len, "node held for a workload admitted by reclaim");
}

const struct gs_plugin gs_admission_hold_plugin = {
    .name = "AdmissionHold",
    .init = hold_init,
    .filter = hold_filter,
    .reason = hold_reason,
    .by_class = hold_by_class,
};
