/*
 * best_fit.c - the BestFit placement policy.
 *
 * The node left with the least free resources after the placement wins:
 * raw = int(100 * (1 - 0.5 * cpu_left/128 CPUs - 0.5 * gpu_left/8 GPUs))
 * (after subtracting the pod), then min-max normalised to 0..100 across the
 * feasible nodes (all 0 when they tie), as the FGD paper's simulator does. A
 * sharing pod takes the best-fitting GPU.
 */
#include "sched/frag.h"
#include "sched/plugin.h"

#include <limits.h>

#define MAX_SPEC_CPU 128000.0
#define MAX_SPEC_GPU 8000.0

static void bf_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                     struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)state, (void)cs;
    const struct gs_demand *d = &pod->demand;
    int64_t gpu_req = (int64_t)d->gpu_milli * d->gpu_count;
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_info *nd = nodes[i];
        double s = (double)(nd->cpu_alloc - nd->cpu_used - d->cpu_milli) / MAX_SPEC_CPU * 0.5;
        s += (double)(nd->gpu_milli_free - gpu_req) / MAX_SPEC_GPU * 0.5;
        scores[i] = (int64_t)((1.0 - s) * GS_MAX_SCORE);
    }
}

static void bf_normalize(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                         struct gs_node_info *const *nodes, int64_t *scores, size_t n)
{
    (void)state, (void)cs, (void)pod, (void)nodes;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        if (scores[i] < lo) lo = scores[i];
        if (scores[i] > hi) hi = scores[i];
    }
    for (size_t i = 0; i < n; i++) scores[i] = hi == lo ? 0 : (scores[i] - lo) * GS_MAX_SCORE / (hi - lo);
}

const struct gs_plugin gs_plugin_best_fit = {
    .name = "BestFit",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .score = bf_score,
    .normalize_score = bf_normalize,
    .reserve = gs_gpusel_reserve_best_fit, /* GPU choice: best fit */
};
