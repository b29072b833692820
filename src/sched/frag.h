/*
 * frag.h - GPU fragmentation against a target workload (the FGD model).
 *
 * The FGD paper (Weng et al., USENIX ATC 2023) measures how much of a node's
 * idle GPU capacity the expected pods cannot use. The expected pods are the
 * "target workload": pod classes (CPU, per-GPU milli, GPU count, acceptable
 * GPU models), most frequent first until they cover >= 95% of pods, with
 * popularities renormalised to sum to 1. For a node n and a class m:
 *
 *   frag(n, m) = all idle GPU milli      if m needs no GPU, or m cannot run on
 *                                        n (model, CPU, too few GPUs with
 *                                        enough free milli);
 *              = sum of the idle milli   otherwise, over the GPUs whose idle
 *                on too-small GPUs       milli is below m's per-GPU request.
 *
 *   F_n = sum_m p_m * frag(n, m)
 *
 * FGD places a pod where F grows least. Evaluating F is O(classes x GPUs), so
 * a cluster of thousands of nodes must not recompute it per pod. Two layers
 * keep it incremental:
 *  - a per-node cache keyed on the node's generation (struct gs_node_info):
 *    the node's state signature, idle milli and F, recomputed only when the
 *    node changed;
 *  - a memo of F by node-state signature. The signature is a 128-bit multiset
 *    hash of (GPU model, free CPU, free milli of every GPU), built as a sum of
 *    per-element hashes, so the state after a hypothetical placement is a
 *    constant-time update of the current one, and identical nodes (all empty
 *    8-GPU G2 nodes, say) share one evaluation.
 *
 * The same file holds the GPU choices inside a node the placement policies
 * share (best fit, first free whole GPUs, random fit).
 *
 * Not thread-safe; one model per plugin instance or experiment.
 */
#ifndef GS_SCHED_FRAG_H
#define GS_SCHED_FRAG_H

#include "core/object.h"
#include "sched/cache.h"
#include "sched/cycle_state.h"
#include "sched/status.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define GS_FRAG_DEFAULT_COVERAGE 0.95

/* One pod class of the target workload. */
struct gs_frag_class {
    int64_t cpu_milli;
    int32_t gpu_milli;   /* per GPU, 0..1000; 0 = needs no GPU */
    int32_t gpu_count;
    char *models;        /* acceptable models "A|B" (sorted), NULL = any */
    double p;            /* popularity; the classes' p sum to 1 */
    int64_t count;       /* pods of this class in the input */
};

struct gs_frag_model;

/* Target workload from pods (borrowed; only their demand is read): classes by
 * (cpu, per-GPU milli, GPU count, models), most frequent first (ties: larger
 * cpu, milli, count, models first), taken until they cover >= coverage of the
 * pods (0 < coverage <= 1), renormalised. GPU model names are interned in the
 * cache (borrowed; must outlive the model). *out freed with gs_frag_model_free.
 * 0, GS_EINVAL (no pods, bad coverage) or GS_ENOMEM. */
int gs_frag_model_new(struct gs_cache *cache, const struct gs_pod *const *pods, size_t npods, double coverage,
                      struct gs_frag_model **out);
/* Same from explicit classes weighted by p (not necessarily normalised):
 * sorted by p as above, kept until they cover >= coverage of the total
 * weight, renormalised. Strings are copied. */
int gs_frag_model_from_classes(struct gs_cache *cache, const struct gs_frag_class *classes, size_t n,
                               double coverage, struct gs_frag_model **out);
/* Classes as JSON [{"cpuMilli","gpuMilli","gpuCount","gpuModels","weight"}],
 * the shape FGD's pluginConfig args take under "targetWorkload". New ref. */
json_t *gs_frag_model_to_json(const struct gs_frag_model *m);
/* Parses that array; problems go to d under path. 0 or GS_EINVAL/GS_ENOMEM. */
int gs_frag_model_from_json(struct gs_cache *cache, const json_t *arr, const char *path, struct gs_diags *d,
                            struct gs_frag_model **out);
void gs_frag_model_free(struct gs_frag_model *m);

size_t gs_frag_model_nclasses(const struct gs_frag_model *m);
/* Class i, most popular first. Borrowed. */
const struct gs_frag_class *gs_frag_model_class(const struct gs_frag_model *m, size_t i);

/* F of an explicit state (no cache, no memo): gpu_model is a cache model id
 * (-1 none), gpu_left the free milli of each GPU. */
double gs_frag_state(const struct gs_frag_model *m, int32_t gpu_model, int64_t cpu_left, const int32_t *gpu_left,
                     int32_t ngpus);

/* F of a node as it is now (per-node cache + memo). */
double gs_frag_node(struct gs_frag_model *m, const struct gs_node_info *n);
/* F of the node after taking cpu milli-CPU and milli on every GPU in mask
 * (mask 0: CPU only). The GPUs in mask must have milli free. */
double gs_frag_node_after(struct gs_frag_model *m, const struct gs_node_info *n, int64_t cpu, uint64_t mask,
                          int32_t milli);

/* Cluster totals over live nodes: fragmented milli (F summed, rounded) and,
 * when idle_milli is not NULL, the idle milli of healthy GPUs. Only nodes
 * whose generation changed since the last call are re-evaluated. */
int64_t gs_frag_cluster_total(struct gs_frag_model *m, struct gs_cache *c, int64_t *idle_milli);

/* Memo statistics (tests, profiling). */
struct gs_frag_stats {
    uint64_t evals;      /* full O(classes x GPUs) evaluations */
    uint64_t memo_hits;
    uint64_t memo_size;
};
void gs_frag_stats(const struct gs_frag_model *m, struct gs_frag_stats *out);

/*--- Where a plugin gets its target workload ---*/

/* FGD-style plugins take the target workload from their pluginConfig args,
 *   {"targetWorkload": [classes as in gs_frag_model_to_json], "coverage": 0.95}
 * or, without "targetWorkload", learn it online from the pods they see: the
 * model is rebuilt from the pod classes observed so far each time their
 * number doubles, so early decisions use few pods and later ones converge on
 * the real mix at a logarithmic rebuild cost. */
struct gs_frag_source;

int gs_frag_source_new(struct gs_cache *cache, const json_t *args, struct gs_diags *d,
                       struct gs_frag_source **out);
void gs_frag_source_free(struct gs_frag_source *s);
/* Counts the pod towards the learned workload (no-op with a fixed one). */
void gs_frag_source_observe(struct gs_frag_source *s, const struct gs_pod *pod);
/* Current model (borrowed; NULL before anything was learned). *epoch changes
 * whenever the model is replaced, so callers can drop what they cached. */
struct gs_frag_model *gs_frag_source_model(struct gs_frag_source *s, uint64_t *epoch);

/*--- GPU choice inside a node ---*/

/* Free milli of GPU i as placement sees it (0 when unhealthy). */
static inline int32_t gs_gpu_left(const struct gs_node_info *n, int32_t i)
{
    return n->gpus[i].healthy ? n->gpus[i].milli_free : 0;
}
/* Share pod (milli < 1000): the GPU with the least free milli >= milli, lowest
 * index on ties. Whole GPUs: the first count GPUs with 1000 free. 0 when they
 * do not fit. */
uint64_t gs_gpusel_best_fit(const struct gs_node_info *n, int32_t count, int32_t milli);
/* A Reserve extension point that picks the pod's GPUs by gs_gpusel_best_fit
 * when no earlier plugin chose them: the GPU choice of the BestFit, DotProd
 * and GpuPacking policies. */
struct gs_status gs_gpusel_reserve_best_fit(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                            struct gs_node_info *node, struct gs_assignment *a);
/* First count GPUs (index order) with all 1000 free; 0 when too few. */
uint64_t gs_gpusel_first_free(const struct gs_node_info *n, int32_t count);
/* Share pod: uniformly random GPU among those with >= milli free (reservoir
 * over index order, driven by *rng); whole GPUs as best fit. */
uint64_t gs_gpusel_random(const struct gs_node_info *n, int32_t count, int32_t milli, uint64_t *rng);
/* Number of GPUs with at least milli free. */
int32_t gs_gpus_fitting(const struct gs_node_info *n, int32_t milli);

/* splitmix64: the seeded generator every policy and the experiment use. */
static inline uint64_t gs_rand_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
/* A request shape's GPU models as one string: the pod's list joined by '|'
 * in its own order (NULL when any model will do; NULL on no memory too, so
 * callers that memoise by shape treat both as "any"), and the test of a
 * pod's list against such a join. Order differences only cost a second shape. */
char *gs_demand_models_join(const struct gs_demand *d);
bool gs_demand_models_equal(const struct gs_demand *d, const char *joined);

/* Uniform in [0, n) (n > 0), without modulo bias. */
uint64_t gs_rand_below(uint64_t *s, uint64_t n);

#endif
