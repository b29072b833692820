/*
 * fgd_learn.c - FGDLearn: fragmentation gradient descent against a target
 * workload learned online and weighted by how hard each class is to place
 * (our policy; compared with FGD on every openb variant in bench/RESULTS.md,
 * "Learned fragmentation").
 *
 * The target workload is not given: sched/fgd_learn_core.c learns it from the
 * pods seen so far (decayed counts), and weights each class by its share of
 * the GPU demand over the share of the free GPU capacity it can use now
 * (GPU count, per-GPU milli, CPU, memory and models against every node's free
 * shape). F is frag.h's measure under those weights. A node's key is a
 * ladder: FGD's score bucket int(sigmoid(dF / width) * 100), then, among
 * equal buckets, the tie-break selected by args, then the lowest node index
 * (the framework's order). A sharing pod takes the GPU with the smallest F
 * after, then the tightest fit; whole GPUs are the best-fit ones.
 *
 * Cost. Keys are remembered per (CPU, milli, GPU count, models) request and
 * node with the node generation and the model epoch (a rebuild every few
 * hundred pods), as FGD does: between rebuilds one placement changes one
 * node, so a pod costs one node's key per request shape seen.
 *
 * Args (all optional): halfLife, beta, usableFloor, coverage, rebuildEvery
 * (fgd_learn_core.h), shareWidth and wholeWidth (the dF divisor of the
 * bucket for sharing and for other pods), tieBreak ("none", "busy": a node
 * already running pods first, "tight": least free GPU milli left after).
 * The FGD experiment's targetWorkload is ignored: nothing is known ahead.
 */
#include "sched/fgd_learn_core.h"
#include "sched/frag.h"
#include "sched/plugin.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SHAPES 4096
#define TIE_SPAN 4096 /* tie-break values lie in [0, TIE_SPAN) */

enum tie { TIE_NONE, TIE_BUSY, TIE_TIGHT };

struct memo {
    uint64_t gen;
    const char *name; /* detects a reused node slot */
    int64_t key;
    uint64_t epoch;   /* model epoch + 1 when computed; a zeroed slot is empty */
};

struct shape {
    int64_t cpu;
    int32_t milli, count;
    char *models; /* the pod's models joined by '|' in its order, NULL = any */
    struct memo *row;
    size_t nrow;
};

struct learn {
    struct gs_cache *cache;
    struct gs_fgdl *l;
    double share_width, whole_width;
    enum tie tie;
    struct shape *shapes;
    size_t nshapes;
    int32_t cur; /* shape of this cycle's pod, -1 none */
};

/*--- Args ---*/

static int width_arg(const json_t *args, const char *key, double *out, struct gs_diags *d)
{
    const json_t *v = json_object_get(args, key);
    if (!v) return 0;
    if (!json_is_number(v) || !(json_number_value(v) > 0) || !(json_number_value(v) <= 1e9)) {
        gs_diags_add(d, key[0] == 's' ? "args.shareWidth" : "args.wholeWidth",
                     "expected a number in (0, 1e9] (milli of fragmentation per score step)");
        return GS_EINVAL;
    }
    *out = json_number_value(v);
    return 0;
}

static int parse_args(struct learn *f, const json_t *args, struct gs_fgdl_params *p, struct gs_diags *d)
{
    f->share_width = 1000;
    f->whole_width = 4000;
    f->tie = TIE_NONE;
    int rc = gs_fgdl_params_parse(args, p, d);
    if (!args || !json_is_object(args)) return rc;
    if (width_arg(args, "shareWidth", &f->share_width, d) < 0) rc = GS_EINVAL;
    if (width_arg(args, "wholeWidth", &f->whole_width, d) < 0) rc = GS_EINVAL;
    const json_t *t = json_object_get(args, "tieBreak");
    if (t) {
        const char *s = json_is_string(t) ? json_string_value(t) : "";
        if (!strcmp(s, "none")) f->tie = TIE_NONE;
        else if (!strcmp(s, "busy")) f->tie = TIE_BUSY;
        else if (!strcmp(s, "tight")) f->tie = TIE_TIGHT;
        else {
            gs_diags_add(d, "args.tieBreak", "\"%s\" is not a tie-break: expected none, busy or tight",
                         json_is_string(t) ? s : "(not a string)");
            rc = GS_EINVAL;
        }
    }
    return rc;
}

/*--- Lifecycle ---*/

static int learn_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    struct learn *f = calloc(1, sizeof *f);
    if (!f) return GS_ENOMEM;
    f->cache = h->cache;
    f->cur = -1;
    struct gs_fgdl_params p;
    int rc = parse_args(f, args, &p, d);
    if (!rc) rc = gs_fgdl_new(h->cache, &p, &f->l);
    if (rc < 0) {
        free(f);
        return rc;
    }
    *state = f;
    return 0;
}

static void learn_fini(void *state)
{
    struct learn *f = state;
    for (size_t i = 0; i < f->nshapes; i++) {
        free(f->shapes[i].row);
        free(f->shapes[i].models);
    }
    free(f->shapes);
    gs_fgdl_free(f->l);
    free(f);
}

/*--- Request shapes and their memo rows ---*/

static bool same_models(const struct gs_demand *d, const char *models)
{
    const char *p = models ? models : "";
    for (size_t i = 0; i < d->ngpu_models; i++) {
        size_t l = strlen(d->gpu_models[i]);
        if (i && *p++ != '|') return false;
        if (strncmp(p, d->gpu_models[i], l)) return false;
        p += l;
    }
    return *p == 0;
}

static char *join_models(const struct gs_demand *d)
{
    if (!d->ngpu_models) return NULL;
    size_t len = 1;
    for (size_t i = 0; i < d->ngpu_models; i++) len += strlen(d->gpu_models[i]) + 1;
    char *s = malloc(len);
    if (!s) return NULL;
    s[0] = 0;
    for (size_t i = 0; i < d->ngpu_models; i++) {
        if (i) strcat(s, "|");
        strcat(s, d->gpu_models[i]);
    }
    return s;
}

static int32_t shape_of(struct learn *f, const struct gs_demand *d)
{
    for (size_t i = f->nshapes; i-- > 0;) {
        const struct shape *s = &f->shapes[i];
        if (s->cpu == d->cpu_milli && s->milli == d->gpu_milli && s->count == d->gpu_count && same_models(d, s->models))
            return (int32_t)i;
    }
    if (f->nshapes >= MAX_SHAPES) return -1;
    struct shape *ns = realloc(f->shapes, (f->nshapes + 1) * sizeof *ns);
    if (!ns) return -1;
    f->shapes = ns;
    struct shape *s = &f->shapes[f->nshapes];
    *s = (struct shape){.cpu = d->cpu_milli, .milli = d->gpu_milli, .count = d->gpu_count, .models = join_models(d)};
    if (d->ngpu_models && !s->models) return -1;
    return (int32_t)f->nshapes++;
}

static struct memo *row_for(struct learn *f, size_t nnodes)
{
    if (f->cur < 0) return NULL;
    struct shape *s = &f->shapes[f->cur];
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

/*--- Keys ---*/

static bool is_share(const struct gs_demand *d) { return d->gpu_count == 1 && d->gpu_milli < GS_GPU_MILLI; }

static int64_t tie_value(const struct learn *f, const struct gs_node_info *nd, const struct gs_demand *d)
{
    switch (f->tie) {
    case TIE_BUSY: return nd->npods > 0;
    case TIE_TIGHT: {
        int64_t left = nd->gpu_milli_free - (int64_t)d->gpu_count * d->gpu_milli;
        int64_t v = TIE_SPAN - 1 - left / 4;
        return v < 0 ? 0 : v;
    }
    default: return 0;
    }
}

static int64_t ladder(const struct learn *f, double f0, double f1, const struct gs_node_info *nd,
                      const struct gs_demand *d)
{
    double w = is_share(d) ? f->share_width : f->whole_width;
    int64_t bucket = (int64_t)(1.0 / (1.0 + exp(-(f0 - f1) / w)) * GS_MAX_SCORE);
    return bucket * TIE_SPAN + tie_value(f, nd, d);
}

/* Best key on the node; *mask gets the GPUs that reach it. */
static int64_t node_key(const struct learn *f, struct gs_frag_model *m, const struct gs_node_info *nd,
                        const struct gs_demand *d, uint64_t *mask)
{
    double f0 = gs_frag_node(m, nd);
    if (!is_share(d)) {
        uint64_t mk = d->gpu_count > 0 ? gs_gpusel_best_fit(nd, d->gpu_count, d->gpu_milli) : 0;
        if (mask) *mask = mk;
        return ladder(f, f0, gs_frag_node_after(m, nd, d->cpu_milli, mk, d->gpu_milli), nd, d);
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
    return best < 0 ? INT64_MIN : ladder(f, f0, best_f, nd, d);
}

/*--- Extension points ---*/

static struct gs_status learn_pre_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                        struct gs_node_info *const *nodes, size_t n)
{
    (void)cs, (void)nodes, (void)n;
    struct learn *f = state;
    gs_fgdl_observe(f->l, &pod->demand);
    f->cur = shape_of(f, &pod->demand);
    return (struct gs_status){0};
}

static void learn_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                        struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)cs;
    struct learn *f = state;
    uint64_t epoch = 0;
    struct gs_frag_model *m = gs_fgdl_model(f->l, &epoch);
    int32_t nn = f->cache ? gs_cache_node_count(f->cache) : 0;
    struct memo *row = m ? row_for(f, (size_t)nn) : NULL;
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_info *nd = nodes[i];
        struct memo *e = row && nd->idx >= 0 && nd->idx < nn ? &row[nd->idx] : NULL;
        if (e && e->epoch == epoch + 1 && e->gen == nd->generation && e->name == nd->name) {
            scores[i] = e->key;
            continue;
        }
        scores[i] = m ? node_key(f, m, nd, &pod->demand, NULL) : 0;
        if (e) *e = (struct memo){nd->generation, nd->name, scores[i], epoch + 1};
    }
}

/* The best key gets GS_MAX_SCORE, every other at most one less, so with one
 * score plugin the argmax is exactly the best key. */
static void learn_normalize(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                            struct gs_node_info *const *nodes, int64_t *scores, size_t n)
{
    (void)state, (void)cs, (void)pod, (void)nodes;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        if (scores[i] < lo) lo = scores[i];
        if (scores[i] > hi) hi = scores[i];
    }
    double range = (double)hi - (double)lo;
    for (size_t i = 0; i < n; i++) {
        if (scores[i] == hi) {
            scores[i] = GS_MAX_SCORE;
            continue;
        }
        int64_t s = (int64_t)(((double)scores[i] - (double)lo) / range * (GS_MAX_SCORE - 1));
        scores[i] = s > GS_MAX_SCORE - 1 ? GS_MAX_SCORE - 1 : s;
    }
}

static struct gs_status learn_reserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                      struct gs_node_info *node, struct gs_assignment *a)
{
    (void)cs;
    struct learn *f = state;
    const struct gs_demand *d = &pod->demand;
    if (a->gpu_mask || d->gpu_count <= 0) return (struct gs_status){0};
    struct gs_frag_model *m = gs_fgdl_model(f->l, NULL);
    uint64_t mask = 0;
    if (m) node_key(f, m, node, d, &mask);
    else mask = gs_gpusel_best_fit(node, d->gpu_count, d->gpu_milli);
    a->gpu_mask = mask;
    a->milli = d->gpu_milli;
    a->mem_mib = d->gpu_mem_mib;
    if (!a->gpu_mask)
        return gs_status_make(GS_UNSCHEDULABLE, "no GPU on node %s fits %d x %d milli", node->name, d->gpu_count,
                              d->gpu_milli);
    return (struct gs_status){0};
}

const struct gs_plugin gs_plugin_fgd_learn = {
    .name = "FGDLearn",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .init = learn_init,
    .fini = learn_fini,
    .pre_score = learn_pre_score,
    .score = learn_score,
    .normalize_score = learn_normalize,
    .reserve = learn_reserve,
};
