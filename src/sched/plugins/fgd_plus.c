/*
 * fgd_plus.c - FGDPlus: fragmentation gradient descent with a bucket width
 * that depends on the pod's kind (our policy; compared with FGD on every
 * openb variant in bench/RESULTS.md, "Every policy on every openb variant").
 *
 * FGD scores int(sigmoid(dF / 1000) * 100) and sends ties to the first node
 * in name order. FGDPlus keeps that for sharing pods (one GPU, < 1000
 * milli) and widens the bucket to dF / 4000 for whole-GPU and CPU-only pods:
 * more nodes count as equal and the first-name order, itself a good packing
 * order, decides among them. A sharing pod takes the GPU with the smallest
 * dF, then the tightest fit; whole GPUs are the best-fit ones. It uses only
 * the pod being placed, the cluster state and the target workload FGD gets
 * (no knowledge of later pods).
 *
 * Measured (FGD experiment, alloc % at 100% arrived, mean of seeds 42-45,
 * on a loaded machine; FGD in brackets) while choosing the widths:
 *  - FGDPack's key (dF / 2000, busy node first) on gpuspec20: 94.63 (94.68);
 *  - extra tie-breaks after FGDPack's key on gpuspec20: most-used GPUs
 *    88.55, CPU use 94.22, exact dF 94.11 - all worse;
 *  - one width for every pod, no busy-node preference, gpuspec20: /1000 is
 *    FGD, /4000 95.13, /8000 94.98; with the busy-node preference /4000
 *    94.80, /8000 94.86, /16000 94.68;
 *  - the same on gpushare40: /4000 93.69, /8000 93.64 (93.91), and /4000
 *    for whole GPUs with FGDPack's key for sharing pods 93.70: sharing pods
 *    want FGD's narrow bucket, hence the split (gpushare40 93.92);
 *  - the split on the default trace: 95.18 (95.21), on gpuspec20 95.04;
 *  - the split plus FGDPack's key for CPU-only pods: cpu100 95.23 (95.16),
 *    default 95.18 - no clear gain, not kept.
 * The target of +0.3 over FGD on every variant is not met; see RESULTS.
 *
 * The key is mapped by NormalizeScore so the best node gets 100 and every
 * other node at most 99: with one score plugin the argmax is exactly the
 * best key. Keys are remembered per (CPU, milli, GPU count) request and
 * node, with the node generation and the model stamp they were computed at,
 * as FGD does: a key depends on nothing else, and one placement changes one
 * node.
 */
#include "sched/frag.h"
#include "sched/plugin.h"

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

struct fp {
    struct gs_frag_source *src;
    struct gs_cache *cache;
    struct shape *shapes;
    size_t nshapes;
    uint64_t epoch;   /* the model's, when the rows were stamped */
    uint32_t stamp;
};

static int fp_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    struct fp *f = calloc(1, sizeof *f);
    if (!f) return GS_ENOMEM;
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

static void fp_fini(void *state)
{
    struct fp *f = state;
    gs_frag_source_free(f->src);
    for (size_t i = 0; i < f->nshapes; i++) free(f->shapes[i].row);
    free(f->shapes);
    free(f);
}

static bool is_share(const struct gs_demand *d) { return d->gpu_count == 1 && d->gpu_milli < GS_GPU_MILLI; }

/* Key of placing the pod on nd (F from f0 to f1): larger is better. */
/* Key of placing the pod on nd (F from f0 to f1): larger is better. A
 * sharing pod keeps FGD's bucket (dF / 1000); a whole-GPU or CPU-only pod
 * gets a bucket four times as wide. Ties go to the first node name. */
static int64_t key_of(double f0, double f1, bool share)
{
    return (int64_t)(1.0 / (1.0 + exp(-(f0 - f1) / (share ? 1000.0 : 4000.0))) * GS_MAX_SCORE);
}

/* Best key on the node; *mask gets the GPUs that reach it. */
static int64_t node_key(struct gs_frag_model *m, const struct gs_node_info *nd, const struct gs_demand *d,
                        uint64_t *mask)
{
    double f0 = gs_frag_node(m, nd);
    if (!is_share(d)) {
        uint64_t mk = d->gpu_count > 0 ? gs_gpusel_best_fit(nd, d->gpu_count, d->gpu_milli) : 0;
        if (mask) *mask = mk;
        return key_of(f0, gs_frag_node_after(m, nd, d->cpu_milli, mk, d->gpu_milli), false);
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
    return best < 0 ? INT64_MIN : key_of(f0, best_f, true);
}

static struct gs_status fp_pre_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                     struct gs_node_info *const *nodes, size_t n)
{
    (void)cs, (void)nodes, (void)n;
    struct fp *f = state;
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
static struct memo *row_of(struct fp *f, const struct gs_demand *d, size_t nnodes)
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

static void fp_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                     struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)cs;
    struct fp *f = state;
    struct gs_frag_model *m = gs_frag_source_model(f->src, NULL);
    struct memo *row = m && f->cache ? row_of(f, &pod->demand, (size_t)gs_cache_node_count(f->cache)) : NULL;
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_info *nd = nodes[i];
        struct memo *e = row && nd->idx >= 0 && nd->idx < gs_cache_node_count(f->cache) ? &row[nd->idx] : NULL;
        if (e && e->stamp == f->stamp && e->gen == nd->generation && e->name == nd->name) {
            scores[i] = e->key;
            continue;
        }
        scores[i] = m ? node_key(m, nd, &pod->demand, NULL) : 0;
        if (e) *e = (struct memo){nd->generation, nd->name, scores[i], f->stamp};
    }
}

static void fp_normalize(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
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

static struct gs_status fp_reserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                   struct gs_node_info *node, struct gs_assignment *a)
{
    (void)cs;
    struct fp *f = state;
    const struct gs_demand *d = &pod->demand;
    if (a->gpu_mask || d->gpu_count <= 0) return (struct gs_status){0};
    struct gs_frag_model *m = gs_frag_source_model(f->src, NULL);
    uint64_t mask = 0;
    if (m) node_key(m, node, d, &mask);
    else mask = gs_gpusel_best_fit(node, d->gpu_count, d->gpu_milli);
    a->gpu_mask = mask;
    a->milli = d->gpu_milli;
    a->mem_mib = d->gpu_mem_mib;
    if (!a->gpu_mask) return gs_status_make(GS_UNSCHEDULABLE, "no GPU on node %s fits %d x %d milli", node->name,
                                            d->gpu_count, d->gpu_milli);
    return (struct gs_status){0};
}

const struct gs_plugin gs_plugin_fgd_plus = {
    .name = "FGDPlus",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .init = fp_init,
    .fini = fp_fini,
    .pre_score = fp_pre_score,
    .score = fp_score,
    .normalize_score = fp_normalize,
    .reserve = fp_reserve,
};
