/*
 * fgd_learn_core.h - the learned target workload of the FGDLearn placement
 * policy (src/sched/plugins/fgd_learn.c), kept apart from the plugin so it is
 * tested without the framework.
 *
 * FGD measures fragmentation against a fixed distribution of pod classes.
 * This learner builds that distribution from the pods seen so far only (no
 * later pod is known): each class's count decays with a half-life in pods,
 * and its weight in the fragmentation measure is its decayed popularity
 * times a hardness that compares the share of the GPU demand the class makes
 * with the share of the cluster's free GPU capacity it can use right now
 * (its GPU count, per-GPU milli, CPU and memory and GPU models against every
 * node's free shape):
 *
 *   demand_m = p_m * count_m * milli_m / sum_k p_k * count_k * milli_k
 *   usable_m = milli placeable by copies of m on the free cluster / free milli
 *   w_m      = p_m * (demand_m / max(usable_m, floor)) ^ beta
 *
 * beta = 0 is FGD's weighting (popularity only). The model (frag.h) is rebuilt
 * from the weights when the observed pods double (up to 256 pods, in steps of
 * at most `rebuild`) and after every `rebuild` further pods, so the callers'
 * memoised scores stay valid between rebuilds.
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
    double half_life;   /* pods; a class's count halves after this many later pods (> 0) */
    double beta;        /* hardness exponent, >= 0 (0: popularity only, as FGD) */
    double size_exp, usable_exp, pop_exp;
    double threshold;   /* hardness above which a class is weighted up, > 0 */
    double floor;       /* smallest usable share counted, in (0, 1] */
    double coverage;    /* classes kept, most weighted first, in (0, 1] */
    uint32_t rebuild;   /* pods between two rebuilds once past the doubling phase, >= 1 */
};

/* Defaults of every parameter (the ones measured best, bench/RESULTS.md). */
void gs_fgdl_params_default(struct gs_fgdl_params *p);
/* Reads halfLife, beta, usableFloor, coverage, rebuildEvery from args (all
 * optional; unknown keys are ignored so FGD's targetWorkload may be there).
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
    double hardness;    /* (demand_m / max(usable_m, floor)); 1 for CPU-only classes */
    double weight;      /* p * hardness^beta, before the model's renormalisation */
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
