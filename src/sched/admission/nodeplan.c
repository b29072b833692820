/*
 * nodeplan.c - node-wise choice of reclaim victims (see nodeplan.h): per
 * claimant pod, the node whose cheapest sufficient set of victims costs
 * least, found by trying two orders on each node and pruning what is not
 * needed.
 */
#include "sched/admission/nodeplan.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

#define MAX_GPUS 64 /* GPUs per node the planner models (a gpu_mask's width) */

struct plan {
    const struct gs__np_req *r;
    size_t *off, *list;   /* victims with pods on node n: list[off[n] .. off[n + 1]) */
    bool *chosen;
    size_t *s, *best;     /* the set under evaluation and the best one found */
    size_t ns, nbest;
    double *key;          /* sort key per victim on the node being evaluated */
    bool *mine;           /* per node: a pod of the claimant is booked there */
};

struct cost {
    bool ok;
    int32_t prio;         /* highest priority evicted */
    bool fresh;           /* no pod of the claimant booked on the node yet */
    double lost;          /* work lost */
    size_t n;             /* victims */
    int64_t slack;        /* free GPU milli left on the node (tightest first) */
};

static bool cost_less(const struct cost *x, const struct cost *y, int how)
{
    if (x->ok != y->ok) return x->ok;
    if ((x->n == 0) != (y->n == 0)) return x->n == 0; /* room without evicting anyone */
    if (x->prio != y->prio) return x->prio < y->prio;
    if (x->fresh != y->fresh) return !x->fresh; /* keep the gang, and the evictions, on few nodes */
    if (how != GS_NP_COST_WORK) {
        if (x->n != y->n) return x->n < y->n;
        if (how == GS_NP_COST_ROOM && x->n && x->slack != y->slack) return x->slack > y->slack;
        if (x->lost != y->lost) return x->lost < y->lost;
        return x->slack < y->slack;
    }
    if (x->lost != y->lost) return x->lost < y->lost;
    if (x->n != y->n) return x->n < y->n;
    return x->slack < y->slack;
}

/* Node n as it would be: its current state plus what victims set[0..k) free there. */
struct view {
    int32_t g[MAX_GPUS];
    int32_t ng;
    int64_t cpu, mem;
};

static void view_of(const struct plan *p, size_t n, const size_t *set, size_t k, struct view *out)
{
    const struct gs__np_node *nd = &p->r->nodes[n];
    out->ng = nd->ngpus < MAX_GPUS ? nd->ngpus : MAX_GPUS;
    memcpy(out->g, nd->gfree, (size_t)out->ng * sizeof *out->g);
    out->cpu = nd->cpu_free, out->mem = nd->mem_free;
    for (size_t i = 0; i < k; i++) {
        const struct gs__np_victim *v = &p->r->v[set[i]];
        for (size_t j = 0; j < v->npods; j++) {
            const struct gs__np_vpod *vp = &v->pods[j];
            if (vp->node != (int32_t)n) continue;
            out->cpu += vp->cpu, out->mem += vp->mem;
            for (int32_t g = 0; g < out->ng; g++)
                if (vp->gpu_mask >> g & 1) out->g[g] += vp->milli;
        }
    }
}

static bool view_fits(const struct view *w, const struct gs__np_pod *pod)
{
    if (w->cpu < pod->cpu || w->mem < pod->mem) return false;
    int32_t have = 0;
    for (int32_t g = 0; g < w->ng && have < pod->gpus; g++) have += w->g[g] >= pod->milli;
    return have >= pod->gpus;
}

static int64_t view_slack(const struct view *w)
{
    int64_t s = 0;
    for (int32_t g = 0; g < w->ng; g++) s += w->g[g] > 0 ? w->g[g] : 0;
    return s;
}

/* GPU milli victim v frees on node n (its own key for ordering). */
static int64_t freed_on(const struct plan *p, size_t v, size_t n)
{
    const struct gs__np_victim *x = &p->r->v[v];
    int64_t f = 0;
    for (size_t j = 0; j < x->npods; j++)
        if (x->pods[j].node == (int32_t)n) f += (int64_t)x->pods[j].milli * __builtin_popcountll(x->pods[j].gpu_mask);
    return f;
}

/* Sorts the node's free victims by key, priority first (insertion: a node holds few). */
static size_t order_victims(struct plan *p, size_t n, size_t *out, bool by_size)
{
    size_t k = 0;
    for (size_t i = p->off[n]; i < p->off[n + 1]; i++) {
        size_t v = p->list[i];
        if (p->chosen[v]) continue;
        int64_t f = freed_on(p, v, n);
        double key = by_size ? -(double)f : p->r->v[v].cost / (double)(f > 0 ? f : 1);
        size_t j = k++;
        while (j > 0) {
            size_t u = out[j - 1];
            const struct gs__np_victim *a = &p->r->v[u], *b = &p->r->v[v];
            if (a->priority < b->priority || (a->priority == b->priority && p->key[u] <= key)) break;
            out[j] = u;
            j--;
        }
        out[j] = v;
        p->key[v] = key;
    }
    return k;
}

/* The cheapest set on node n for pod in one order: greedy until it fits, then
 * every victim whose return still lets the pod fit is dropped. */
static struct cost eval_order(struct plan *p, size_t n, const struct gs__np_pod *pod, bool by_size)
{
    struct cost c = {.ok = false};
    size_t k = order_victims(p, n, p->s, by_size), taken = 0;
    struct view w;
    bool fits = false;
    for (size_t i = 0; i < k && !fits; i++) {
        if (!p->r->take(p->r->ctx, p->s[i])) continue;
        p->s[taken++] = p->s[i];
        view_of(p, n, p->s, taken, &w);
        fits = view_fits(&w, pod);
    }
    for (size_t i = taken; i-- > 0;) p->r->untake(p->r->ctx, p->s[i]);
    if (!fits) return c;
    for (size_t i = taken; i-- > 0;) { /* prune, newest first */
        size_t keep = p->s[i];
        memmove(p->s + i, p->s + i + 1, (taken - i - 1) * sizeof *p->s);
        view_of(p, n, p->s, taken - 1, &w);
        if (view_fits(&w, pod)) {
            taken--;
            continue;
        }
        memmove(p->s + i + 1, p->s + i, (taken - i - 1) * sizeof *p->s);
        p->s[i] = keep;
    }
    view_of(p, n, p->s, taken, &w);
    c = (struct cost){.ok = true, .prio = INT32_MIN, .fresh = !p->mine[n], .n = taken, .slack = view_slack(&w)};
    for (size_t i = 0; i < taken; i++) {
        const struct gs__np_victim *v = &p->r->v[p->s[i]];
        if (v->priority > c.prio) c.prio = v->priority;
        c.lost += v->cost;
    }
    p->ns = taken;
    return c;
}

static struct cost eval_node(struct plan *p, size_t n, const struct gs__np_pod *pod)
{
    int32_t model = p->r->nodes[n].model;
    if (pod->gpus > 0 && pod->models && (model < 0 || model >= 64 || !(pod->models >> model & 1)))
        return (struct cost){.ok = false};
    struct view w;
    view_of(p, n, NULL, 0, &w);
    if (view_fits(&w, pod)) return (struct cost){.ok = true, .prio = INT32_MIN, .slack = view_slack(&w)};
    if (p->off[n] == p->off[n + 1]) return (struct cost){.ok = false};
    struct cost best = {.ok = false};
    for (int by_size = 0; by_size < 2; by_size++) {
        struct cost c = eval_order(p, n, pod, by_size);
        if (!c.ok || !cost_less(&c, &best, p->r->cost)) continue;
        best = c;
        memcpy(p->best, p->s, p->ns * sizeof *p->s);
        p->nbest = p->ns;
    }
    return best;
}

/* Applies victim v's removal to every node it runs on. */
static void free_victim(struct plan *p, size_t v)
{
    const struct gs__np_victim *x = &p->r->v[v];
    for (size_t j = 0; j < x->npods; j++) {
        const struct gs__np_vpod *vp = &x->pods[j];
        if (vp->node < 0 || (size_t)vp->node >= p->r->nnodes) continue;
        struct gs__np_node *nd = &p->r->nodes[vp->node];
        nd->cpu_free += vp->cpu, nd->mem_free += vp->mem;
        for (int32_t g = 0; g < nd->ngpus && g < MAX_GPUS; g++)
            if (vp->gpu_mask >> g & 1) nd->gfree[g] += vp->milli;
    }
}

/* Books pod on node n: the tightest GPUs that take it. */
static void book(struct gs__np_node *nd, const struct gs__np_pod *pod)
{
    nd->cpu_free -= pod->cpu, nd->mem_free -= pod->mem;
    for (int32_t k = 0; k < pod->gpus; k++) {
        int32_t best = -1;
        for (int32_t g = 0; g < nd->ngpus && g < MAX_GPUS; g++)
            if (nd->gfree[g] >= pod->milli && (best < 0 || nd->gfree[g] < nd->gfree[best])) best = g;
        if (best >= 0) nd->gfree[best] -= pod->milli;
    }
}

static int index_nodes(struct plan *p)
{
    const struct gs__np_req *r = p->r;
    p->off = calloc(r->nnodes + 2, sizeof *p->off);
    size_t total = 0;
    for (size_t v = 0; p->off && v < r->nv; v++) total += r->v[v].npods;
    p->list = malloc((total ? total : 1) * sizeof *p->list);
    if (!p->off || !p->list) return GS_ENOMEM;
    /* Count then fill; a victim with several pods on one node is listed once there. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t v = 0; v < r->nv; v++)
            for (size_t j = 0; j < r->v[v].npods; j++) {
                int32_t n = r->v[v].pods[j].node;
                bool dup = false;
                for (size_t i = 0; i < j && !dup; i++) dup = r->v[v].pods[i].node == n;
                if (n < 0 || (size_t)n >= r->nnodes || dup || !r->nodes[n].usable) continue;
                if (pass == 0) p->off[n + 2]++;
                else p->list[p->off[n + 1]++] = v;
            }
        if (pass == 0)
            for (size_t n = 0; n < r->nnodes; n++) p->off[n + 2] += p->off[n + 1];
    }
    return 0;
}

/* Claimant pods, largest first. */
static int cmp_pod(const void *x, const void *y)
{
    const struct gs__np_pod *a = *(const struct gs__np_pod *const *)x, *b = *(const struct gs__np_pod *const *)y;
    int64_t ga = (int64_t)a->gpus * a->milli, gb = (int64_t)b->gpus * b->milli;
    if (ga != gb) return ga > gb ? -1 : 1;
    return a->cpu > b->cpu ? -1 : a->cpu < b->cpu;
}

static int plan_pods(struct plan *p, size_t *out, size_t *nout)
{
    const struct gs__np_req *r = p->r;
    const struct gs__np_pod **pods = malloc((r->npods ? r->npods : 1) * sizeof *pods);
    size_t *pick = malloc((r->nv ? r->nv : 1) * sizeof *pick);
    if (!pods || !pick) {
        free(pods), free(pick);
        return GS_ENOMEM;
    }
    for (size_t i = 0; i < r->npods; i++) pods[i] = &r->pods[i];
    qsort(pods, r->npods, sizeof *pods, cmp_pod);
    int rc = 0;
    for (size_t i = 0; i < r->npods && !rc; i++) {
        struct cost best = {.ok = false};
        size_t where = 0, npick = 0;
        for (size_t n = 0; n < r->nnodes; n++) {
            if (!r->nodes[n].usable) continue;
            p->nbest = 0;
            struct cost c = eval_node(p, n, pods[i]);
            if (!c.ok || !cost_less(&c, &best, r->cost)) continue;
            best = c, where = n, npick = p->nbest;
            memcpy(pick, p->best, npick * sizeof *pick);
        }
        if (!best.ok) {
            rc = 1; /* no node for this pod */
            break;
        }
        for (size_t k = 0; k < npick && !rc; k++) {
            if (!r->take(r->ctx, pick[k])) { /* a smaller set than one allowed before: cannot happen */
                rc = 1;
                break;
            }
            p->chosen[pick[k]] = true;
            out[(*nout)++] = pick[k];
            free_victim(p, pick[k]);
        }
        if (!rc) book(&r->nodes[where], pods[i]), p->mine[where] = true;
    }
    free(pods), free(pick);
    return rc;
}

int gs__nodeplan(const struct gs__np_req *r, size_t *out, size_t *nout)
{
    struct plan p = {.r = r};
    size_t nv = r->nv ? r->nv : 1;
    *nout = 0;
    p.chosen = calloc(nv, sizeof *p.chosen);
    p.s = malloc(nv * sizeof *p.s);
    p.best = malloc(nv * sizeof *p.best);
    p.key = malloc(nv * sizeof *p.key);
    p.mine = calloc(r->nnodes ? r->nnodes : 1, sizeof *p.mine);
    int rc = p.chosen && p.s && p.best && p.key && p.mine ? index_nodes(&p) : GS_ENOMEM;
    if (!rc) rc = plan_pods(&p, out, nout); /* 1: some pod has no node */
    if (rc) { /* nothing stays booked */
        for (size_t i = *nout; i-- > 0;) r->untake(r->ctx, out[i]);
        *nout = 0;
    }
    free(p.off), free(p.list), free(p.chosen), free(p.s), free(p.best), free(p.key), free(p.mine);
    return rc < 0 ? rc : !rc;
}

/*--- The input, read from the cache ---*/

void gs__np_node_of(const struct gs_node_info *ni, bool usable, int32_t *gfree, struct gs__np_node *out)
{
    *out = (struct gs__np_node){.usable = usable, .ngpus = ni->ngpus, .model = ni->gpu_model, .gfree = gfree,
                                .cpu_free = ni->cpu_alloc - ni->cpu_used, .mem_free = ni->mem_alloc - ni->mem_used};
    for (int32_t g = 0; g < ni->ngpus; g++) gfree[g] = ni->gpus[g].healthy ? ni->gpus[g].milli_free : INT32_MIN / 2;
}

void gs__np_vpods_of(struct gs_cache *c, const struct gs_pod *const *pods, size_t npods, struct gs__np_vpod *vp)
{
    for (size_t j = 0; j < npods; j++) {
        char key[512];
        gs_meta_key(&pods[j]->meta, key, sizeof key);
        const struct gs_assignment *as = gs_cache_pod_assignment(c, key);
        const struct gs_demand *d = &pods[j]->demand;
        vp[j] = as ? (struct gs__np_vpod){.node = as->node, .gpu_mask = as->gpu_mask, .milli = as->milli,
                                          .cpu = d->cpu_milli, .mem = d->mem_bytes}
                   : (struct gs__np_vpod){.node = -1};
    }
}

void gs__np_pod_of(struct gs_cache *c, const struct gs_pod *pod, struct gs__np_pod *out)
{
    const struct gs_demand *d = &pod->demand;
    *out = (struct gs__np_pod){.gpus = d->gpu_count > 0 ? d->gpu_count : 0, .milli = d->gpu_milli,
                               .cpu = d->cpu_milli, .mem = d->mem_bytes};
    for (size_t m = 0; m < d->ngpu_models; m++) {
        int32_t id = gs_cache_model_id(c, d->gpu_models[m]);
        if (id >= 64) {
            out->models = 0;
            break;
        }
        if (id >= 0) out->models |= 1ULL << id;
    }
}
