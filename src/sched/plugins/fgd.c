/*
 * fgd.c - Fragmentation Gradient Descent (Weng et al., USENIX ATC 2023).
 *
 * A pod goes where the node's fragmentation F (frag.h) grows least:
 * score = int(sigmoid((F_before - F_after) / 1000) * 100), not normalised,
 * exactly as the paper's simulator scores it. A sharing pod is tried on each
 * GPU with room, the node scoring its best GPU; Reserve then takes the first
 * GPU (index order) reaching that integer score. Whole-GPU pods take the
 * first free GPUs.
 *
 * Cost. F_before comes from frag.c's per-node cache, F_after from its memo
 * by node-state signature. On top, scores are cached per (pod shape, node):
 * a row per distinct (CPU, milli, GPU count, models) request, one slot per
 * node holding the score and the node generation it was computed at. Only
 * one node changes per placed pod, so almost every node is a row hit, and a
 * row is scanned in node order, which keeps the Score loop in cache.
 *
 * The target workload comes from args ("targetWorkload") or is learned
 * online (gs_frag_source); a new model makes every row stale (a stamp per
 * slot) but keeps its memory, so a large cluster does not clear and refill
 * rows of every node each time the learned workload changes.
 */
#include "sched/frag.h"
#include "sched/plugin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SHAPES 4096

struct slot {
    uint64_t gen;
    const char *name; /* detects a reused node slot */
    int32_t score;
    uint32_t stamp;   /* the model's stamp when computed; a zeroed slot is empty */
};

struct shape {
    int64_t cpu;
    int32_t milli, count;
    char *models;
    struct slot *row;
    size_t nrow;
};

struct fgd {
    const struct gs_handle *h;
    struct gs_frag_source *src;
    uint64_t epoch;
    struct shape *shapes;
    size_t nshapes;
    int32_t cur; /* shape of the pod in this cycle, -1 none */
    uint32_t stamp; /* bumped with every new model: slots of older stamps are stale */
};

static int fgd_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    struct fgd *f = calloc(1, sizeof *f);
    if (!f) return GS_ENOMEM;
    f->h = h;
    f->cur = -1;
    f->stamp = 1;
    int rc = gs_frag_source_new(h->cache, args, d, &f->src);
    if (rc < 0) {
        free(f);
        return rc;
    }
    *state = f;
    return 0;
}

static void drop_rows(struct fgd *f)
{
    for (size_t i = 0; i < f->nshapes; i++) {
        free(f->shapes[i].row);
        f->shapes[i].row = NULL;
        f->shapes[i].nrow = 0;
    }
}

static void fgd_fini(void *state)
{
    struct fgd *f = state;
    drop_rows(f);
    for (size_t i = 0; i < f->nshapes; i++) free(f->shapes[i].models);
    free(f->shapes);
    gs_frag_source_free(f->src);
    free(f);
}

static int32_t shape_of(struct fgd *f, const struct gs_demand *d)
{
    for (size_t i = f->nshapes; i-- > 0;) {
        const struct shape *s = &f->shapes[i];
        if (s->cpu == d->cpu_milli && s->milli == d->gpu_milli && s->count == d->gpu_count && gs_demand_models_equal(d, s->models))
            return (int32_t)i;
    }
    if (f->nshapes >= MAX_SHAPES) return -1;
    struct shape *ns = realloc(f->shapes, (f->nshapes + 1) * sizeof *ns);
    if (!ns) return -1;
    f->shapes = ns;
    struct shape *s = &f->shapes[f->nshapes];
    memset(s, 0, sizeof *s);
    s->cpu = d->cpu_milli;
    s->milli = d->gpu_milli;
    s->count = d->gpu_count;
    s->models = gs_demand_models_join(d);
    if (d->ngpu_models && !s->models) return -1;
    return (int32_t)f->nshapes++;
}

static int32_t frag_score(double before, double after)
{
    double x = (before - after) / 1000.0;
    return (int32_t)(1.0 / (1.0 + exp(-x)) * GS_MAX_SCORE);
}

/* GPUs a non-sharing request takes for F_after: the tightest ones that fit,
 * as the simulator's node.Sub does (for whole GPUs: free GPUs). */
static uint64_t sub_mask(const struct gs_node_info *nd, int32_t count, int32_t milli)
{
    if (milli >= GS_GPU_MILLI) return gs_gpusel_first_free(nd, count);
    uint64_t mask = 0;
    for (int32_t got = 0; got < count;) {
        int32_t best = -1;
        for (int32_t i = 0; i < nd->ngpus && i < GS_MAX_GPUS_PER_NODE; i++) {
            int32_t l = gs_gpu_left(nd, i);
            if (!(mask >> i & 1) && l >= milli && (best < 0 || l < gs_gpu_left(nd, best))) best = i;
        }
        if (best < 0) return 0;
        mask |= 1ULL << best;
        got++;
    }
    return mask;
}

static bool is_share(const struct gs_demand *d) { return d->gpu_count == 1 && d->gpu_milli < GS_GPU_MILLI; }

/* The node's score for the pod; *gpu gets the chosen GPU index for a
 * sharing pod (first index reaching the best score). */
static int32_t node_score(struct gs_frag_model *m, const struct gs_node_info *nd, const struct gs_demand *d,
                          int32_t *gpu)
{
    double f0 = gs_frag_node(m, nd);
    if (!is_share(d)) {
        uint64_t mask = d->gpu_count > 0 ? sub_mask(nd, d->gpu_count, d->gpu_milli) : 0;
        return frag_score(f0, gs_frag_node_after(m, nd, d->cpu_milli, mask, d->gpu_milli));
    }
    int32_t best = -1, seen[GS_MAX_GPUS_PER_NODE], sscore[GS_MAX_GPUS_PER_NODE], nseen = 0;
    for (int32_t i = 0; i < nd->ngpus && i < GS_MAX_GPUS_PER_NODE; i++) {
        int32_t l = gs_gpu_left(nd, i), s = -1;
        if (l < d->gpu_milli) continue;
        for (int32_t k = 0; k < nseen; k++)
            if (seen[k] == l) s = sscore[k]; /* same free milli: same state after */
        if (s < 0) {
            s = frag_score(f0, gs_frag_node_after(m, nd, d->cpu_milli, 1ULL << i, d->gpu_milli));
            seen[nseen] = l;
            sscore[nseen++] = s;
        }
        if (s > best) {
            best = s;
            if (gpu) *gpu = i;
        }
    }
    return best < 0 ? 0 : best;
}

static struct gs_status fgd_pre_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                      struct gs_node_info *const *nodes, size_t n)
{
    (void)cs, (void)nodes, (void)n;
    struct fgd *f = state;
    gs_frag_source_observe(f->src, pod);
    uint64_t epoch;
    gs_frag_source_model(f->src, &epoch);
    if (epoch != f->epoch) {
        f->stamp++; /* a new model: every row's scores go stale, their memory stays */
        f->epoch = epoch;
    }
    f->cur = shape_of(f, &pod->demand);
    return (struct gs_status){0};
}

static struct slot *row_for(struct fgd *f, int32_t shape, size_t nnodes)
{
    if (shape < 0) return NULL;
    struct shape *s = &f->shapes[shape];
    if (s->nrow < nnodes) {
        size_t nc = s->nrow ? s->nrow : 64;
        while (nc < nnodes) nc *= 2;
        /* Zeroed slots are empty (no node has a NULL name). A fresh row comes
         * from calloc, so only the pages of nodes actually scored are touched:
         * with node classes, the representatives. */
        struct slot *nr = s->nrow ? realloc(s->row, nc * sizeof *nr) : calloc(nc, sizeof *nr);
        if (!nr) return NULL;
        if (s->nrow) memset(nr + s->nrow, 0, (nc - s->nrow) * sizeof *nr);
        s->row = nr;
        s->nrow = nc;
    }
    return s->row;
}

static void fgd_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)cs;
    struct fgd *f = state;
    struct gs_frag_model *m = gs_frag_source_model(f->src, NULL);
    if (!m) {
        for (size_t i = 0; i < n; i++) scores[i] = GS_MAX_SCORE / 2;
        return;
    }
    struct slot *row = row_for(f, f->cur, f->h->cache ? (size_t)gs_cache_node_count(f->h->cache) : 0);
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_info *nd = nodes[i];
        struct slot *sl = row && (size_t)nd->idx < f->shapes[f->cur].nrow ? &row[nd->idx] : NULL;
        if (sl && sl->stamp == f->stamp && sl->gen == nd->generation && sl->name == nd->name) {
            scores[i] = sl->score;
            continue;
        }
        int32_t s = node_score(m, nd, &pod->demand, NULL);
        if (sl) *sl = (struct slot){nd->generation, nd->name, s, f->stamp};
        scores[i] = s;
    }
}

static struct gs_status fgd_reserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                    struct gs_node_info *node, struct gs_assignment *a)
{
    (void)cs;
    struct fgd *f = state;
    const struct gs_demand *d = &pod->demand;
    if (a->gpu_mask || d->gpu_count <= 0) return (struct gs_status){0};
    struct gs_frag_model *m = gs_frag_source_model(f->src, NULL);
    if (is_share(d) && m) {
        int32_t gpu = -1;
        node_score(m, node, d, &gpu);
        a->gpu_mask = gpu < 0 ? 0 : 1ULL << gpu;
    } else {
        a->gpu_mask = is_share(d) ? gs_gpusel_best_fit(node, 1, d->gpu_milli)
                                  : sub_mask(node, d->gpu_count, d->gpu_milli);
    }
    a->milli = d->gpu_milli;
    a->mem_mib = d->gpu_mem_mib;
    if (!a->gpu_mask) return gs_status_make(GS_UNSCHEDULABLE, "no GPU on node %s fits %d x %d milli", node->name,
                                            d->gpu_count, d->gpu_milli);
    return (struct gs_status){0};
}

const struct gs_plugin gs_plugin_fgd = {
    .name = "FGD",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .init = fgd_init,
    .fini = fgd_fini,
    .pre_score = fgd_pre_score,
    .score = fgd_score,
    .reserve = fgd_reserve,
};
