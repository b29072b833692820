/*
 * fragkey.c - the machinery FGDPack and FGDPlus share: a fragmentation key
 * per (request shape, node), remembered until the node or the target
 * workload's model changes, and the Score / NormalizeScore / Reserve built on
 * it. Each plugin supplies only its key function (fragkey.h).
 *
 * Keys are remembered per (CPU, milli, GPU count) request and node, with the
 * node generation and the model stamp they were computed at, as FGD does: a
 * key depends on nothing else, and one placement changes one node.
 */
#include "sched/fragkey.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SHAPES 4096

struct memo {
    uint64_t gen;
    const char *name; /* detects a reused node slot */
    int64_t key;
    uint32_t stamp;   /* f->stamp when computed; a zeroed slot is empty */
};

struct shape {
    int64_t cpu;
    int32_t milli, count;
    struct memo *row;
    size_t nrow;
};

struct gs_fragkey {
    gs_fragkey_fn key;
    struct gs_frag_source *src;
    struct gs_cache *cache;
    struct shape *shapes;
    size_t nshapes;
    uint64_t epoch;   /* the model's, when the rows were stamped */
    uint32_t stamp;
};

int gs_fragkey_new(const struct gs_handle *h, const json_t *args, gs_fragkey_fn key, void **state,
                   struct gs_diags *d)
{
    struct gs_fragkey *f = calloc(1, sizeof *f);
    if (!f) return GS_ENOMEM;
    f->key = key;
    f->cache = h->cache;
    f->stamp = 1;
    int rc = gs_frag_source_new(h->cache, args, d, &f->src);
    if (rc < 0) {
        free(f);
        return rc;
    }
    *state = f;
    return 0;
}

void gs_fragkey_free(void *state)
{
    struct gs_fragkey *f = state;
    gs_frag_source_free(f->src);
    for (size_t i = 0; i < f->nshapes; i++) free(f->shapes[i].row);
    free(f->shapes);
    free(f);
}

static bool is_share(const struct gs_demand *d) { return d->gpu_count == 1 && d->gpu_milli < GS_GPU_MILLI; }

/* Best key on the node; *mask gets the GPUs that reach it. */
static int64_t node_key(const struct gs_fragkey *f, struct gs_frag_model *m, const struct gs_node_info *nd, const struct gs_demand *d,
                        uint64_t *mask)
{
    double f0 = gs_frag_node(m, nd);
    if (!is_share(d)) {
        uint64_t mk = d->gpu_count > 0 ? gs_gpusel_best_fit(nd, d->gpu_count, d->gpu_milli) : 0;
        if (mask) *mask = mk;
        return f->key(f0, gs_frag_node_after(m, nd, d->cpu_milli, mk, d->gpu_milli), nd, false);
    }
    double best_f = 0;
    int32_t best = -1;
    for (int32_t i = 0; i < nd->ngpus && i < GS_MAX_GPUS_PER_NODE; i++) {
        int32_t l = gs_gpu_left(nd, i);
        if (l < d->gpu_milli) continue;
        double f1 = gs_frag_node_after(m, nd, d->cpu_milli, 1ULL << i, d->gpu_milli);
        if (best < 0 || f1 < best_f || (f1 == best_f && l < gs_gpu_left(nd, best))) {
            best = i;
            best_f = f1;
        }
    }
    if (mask) *mask = best < 0 ? 0 : 1ULL << best;
    return best < 0 ? INT64_MIN : f->key(f0, best_f, nd, true);
}

struct gs_status gs_fragkey_pre_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                     struct gs_node_info *const *nodes, size_t n)
{
    (void)cs, (void)nodes, (void)n;
    struct gs_fragkey *f = state;
    gs_frag_source_observe(f->src, pod);
    uint64_t epoch;
    gs_frag_source_model(f->src, &epoch);
    if (epoch != f->epoch) {
        f->stamp++; /* a new model: every remembered key is stale */
        f->epoch = epoch;
    }
    return (struct gs_status){0};
}

/* The memo row of the pod's request covering nnodes slots, or NULL (then
 * every key is computed). */
static struct memo *row_of(struct gs_fragkey *f, const struct gs_demand *d, size_t nnodes)
{
    struct shape *s = NULL;
    for (size_t i = f->nshapes; i-- > 0 && !s;)
        if (f->shapes[i].cpu == d->cpu_milli && f->shapes[i].milli == d->gpu_milli && f->shapes[i].count == d->gpu_count)
            s = &f->shapes[i];
    if (!s) {
        if (f->nshapes >= MAX_SHAPES) return NULL;
        struct shape *ns = realloc(f->shapes, (f->nshapes + 1) * sizeof *ns);
        if (!ns) return NULL;
        f->shapes = ns;
        s = &f->shapes[f->nshapes++];
        *s = (struct shape){d->cpu_milli, d->gpu_milli, d->gpu_count, NULL, 0};
    }
    if (s->nrow < nnodes) {
        size_t nc = s->nrow ? s->nrow : 64;
        while (nc < nnodes) nc *= 2;
        struct memo *nr = s->nrow ? realloc(s->row, nc * sizeof *nr) : calloc(nc, sizeof *nr);
        if (!nr) return NULL;
        if (s->nrow) memset(nr + s->nrow, 0, (nc - s->nrow) * sizeof *nr);
        s->row = nr;
        s->nrow = nc;
    }
    return s->row;
}

void gs_fragkey_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                     struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)cs;
    struct gs_fragkey *f = state;
    struct gs_frag_model *m = gs_frag_source_model(f->src, NULL);
    struct memo *row = m && f->cache ? row_of(f, &pod->demand, (size_t)gs_cache_node_count(f->cache)) : NULL;
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_info *nd = nodes[i];
        struct memo *e = row && nd->idx >= 0 && nd->idx < gs_cache_node_count(f->cache) ? &row[nd->idx] : NULL;
        if (e && e->stamp == f->stamp && e->gen == nd->generation && e->name == nd->name) {
            scores[i] = e->key;
            continue;
        }
        scores[i] = m ? node_key(f, m, nd, &pod->demand, NULL) : 0;
        if (e) *e = (struct memo){nd->generation, nd->name, scores[i], f->stamp};
    }
}

void gs_fragkey_normalize(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                         struct gs_node_info *const *nodes, int64_t *scores, size_t n)
{
    (void)state, (void)cs, (void)pod, (void)nodes;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        if (scores[i] < lo) lo = scores[i];
        if (scores[i] > hi) hi = scores[i];
    }
    /* (hi - lo) may not fit in int64 for pathological keys: scale in double */
    double range = (double)hi - (double)lo;
    for (size_t i = 0; i < n; i++) {
        if (scores[i] == hi) scores[i] = GS_MAX_SCORE;
        else scores[i] = (int64_t)(((double)scores[i] - (double)lo) / range * (GS_MAX_SCORE - 1));
        if (scores[i] > GS_MAX_SCORE - 1 && scores[i] != GS_MAX_SCORE) scores[i] = GS_MAX_SCORE - 1;
    }
}

struct gs_status gs_fragkey_reserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                   struct gs_node_info *node, struct gs_assignment *a)
{
    (void)cs;
    struct gs_fragkey *f = state;
    const struct gs_demand *d = &pod->demand;
    if (a->gpu_mask || d->gpu_count <= 0) return (struct gs_status){0};
    struct gs_frag_model *m = gs_frag_source_model(f->src, NULL);
    uint64_t mask = 0;
    if (m) node_key(f, m, node, d, &mask);
    else mask = gs_gpusel_best_fit(node, d->gpu_count, d->gpu_milli);
    a->gpu_mask = mask;
    a->milli = d->gpu_milli;
    a->mem_mib = d->gpu_mem_mib;
    if (!a->gpu_mask) return gs_status_make(GS_UNSCHEDULABLE, "no GPU on node %s fits %d x %d milli", node->name,
                                            d->gpu_count, d->gpu_milli);
    return (struct gs_status){0};
}
