/*
 * fgd_learn_core.h - the learned target workload of the FGDLearn placement
 * policy (src/sched/plugins/fgd_learn.c), kept apart from the plugin so it is
 * tested without the framework.
 *
 * FGD measures fragmentation against a fixed distribution of pod classes.
 * This learner builds the classes from the pods seen so far only (no later
 * pod is known): each class's count decays with a half-life in pods, the
 * classes kept are the most popular ones up to `coverage` of the pods, and
 * each kept GPU class m weighs
 *
 *   w_m = p_m^popExp * (milli_m / 1000)^-sizeExp * count_m^-countExp
 *         * usable_m^usableExp * max(1, hard_m / threshold)^beta
 *         * (shareScale if milli_m < 1000)
 *
 *   p_m      decayed popularity
 *   usable_m share of the cluster's free GPU milli that copies of m can take
 *            now (GPU count, per-GPU milli, CPU, memory, models against every
 *            node's free shape), at least `floor`
 *   demand_m p_m * count_m * milli_m / sum_k p_k * count_k * milli_k
 *   hard_m   demand_m / usable_m: how much more of the free capacity m wants
 *            than it can use
 *
 * then the GPU classes' weights are rescaled to their total popularity, so
 * the size of F (and of FGD's score buckets) is that of popularity weights.
 * popExp 1 and the other exponents 0 is FGD's weighting. The measured best
 * (the defaults) ignores popularity beyond the choice of classes and weighs
 * a class by its request size to the power -1.1 (the sharing classes
 * times shareScale 0.8): F counts, roughly, how
 * many pods of each class the idle GPUs can no longer take, so the small
 * sharing classes that fill the holes count as much as they help; the
 * hardness terms are off by default (measured: no gain, see fgd_learn.c).
 *
 * The model (frag.h) is rebuilt from the weights when the observed pods
 * double and then every `rebuild` pods; a rebuild whose weights moved by
 * less than 2% keeps the model in use, and a class near the coverage cut
 * stays kept while its popularity is at least half the cut's, so the callers'
 * memoised scores survive most rebuilds.
 *
 * Not thread-safe; one learner per plugin instance.
 */
#ifndef GS_SCHED_FGD_LEARN_CORE_H
#define GS_SCHED_FGD_LEARN_CORE_H

#include "core/object.h"
#include "sched/cache.h"
#include "sched/frag.h"

#include <jansson.h>
#include <stdint.h>

struct gs_fgdl_params {
    double half_life;   /* halfLife: pods after which a class's count weighs half (> 0) */
    double pop_exp;     /* popExp, in [-8, 8] */
    double size_exp;    /* sizeExp: of the per-GPU milli, in [-8, 8] */
    double count_exp;   /* countExp: of the GPU count, in [0, 8]; < 0 (default): sizeExp */
    double usable_exp;  /* usableExp, in [-8, 8] */
    double beta;        /* beta: of the hardness above threshold, in [-8, 8] */
    double threshold;   /* threshold: hardness above which a class is weighted up, > 0 */
    double floor;       /* usableFloor: smallest usable share counted, in (0, 1] */
    double coverage;    /* coverage: classes kept, most popular first, in (0, 1] */
    double share_scale; /* shareScale: factor on the sharing classes' (milli < 1000) w_m, in (0, 100] */
    uint32_t rebuild;   /* rebuildEvery: pods between rebuilds after the doubling, >= 1 */
};

/* Defaults of every parameter (the ones measured best, bench/RESULTS.md). */
void gs_fgdl_params_default(struct gs_fgdl_params *p);
/* Reads the fields above from args by their names (all optional; unknown
 * keys are ignored so FGD's targetWorkload may be there).
 * Every bad value goes to d under "args.<field>" with the value and why.
 * 0 or GS_EINVAL. */
int gs_fgdl_params_parse(const json_t *args, struct gs_fgdl_params *p, struct gs_diags *d);

struct gs_fgdl;

/* cache borrowed (nodes read at each rebuild; model ids interned in it). */
int gs_fgdl_new(struct gs_cache *cache, const struct gs_fgdl_params *p, struct gs_fgdl **out);
void gs_fgdl_free(struct gs_fgdl *l);
/* Counts the pod (its demand only) and rebuilds the model when one is due. */
void gs_fgdl_observe(struct gs_fgdl *l, const struct gs_demand *d);
/* Current model, borrowed until the next observe; NULL before any pod. *epoch
 * changes whenever the model is replaced. */
struct gs_frag_model *gs_fgdl_model(struct gs_fgdl *l, uint64_t *epoch);

/* One learned class as of the last rebuild (tests, explain). */
struct gs_fgdl_class {
    int64_t cpu_milli;
    double mem_bytes;   /* mean memory of the class's pods (decayed like p) */
    int32_t gpu_milli, gpu_count;
    const char *models; /* borrowed, NULL = any */
    double p;           /* decayed popularity, the classes' p sum to 1 */
    double hardness;    /* demand_m / usable_m; 1 for CPU-only classes and when unused */
    double weight;      /* w_m after the rescaling (CPU-only classes: p), 0 when not kept */
};
size_t gs_fgdl_nclasses(const struct gs_fgdl *l);
/* 0, or GS_EINVAL when i is out of range. */
int gs_fgdl_class(const struct gs_fgdl *l, size_t i, struct gs_fgdl_class *out);

/* Copies of a class (GPU count, per-GPU milli, CPU, memory, models) that fit
 * on the node's free resources at once; cpu-only classes count CPU and
 * memory only. Exposed for tests. */
int64_t gs_fgdl_copies(const struct gs_node_info *n, int64_t cpu_milli, int64_t mem_bytes, int32_t gpu_count,
                       int32_t gpu_milli, const int32_t *models, size_t nmodels);

#endif
