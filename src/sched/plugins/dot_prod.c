/*
 * dot_prod.c - the DotProd placement policy (Tetris-style alignment).
 *
 * As the FGD paper's simulator runs it ("-dimext merge -norm max"): the
 * node's free (CPU, total GPU milli) and the pod's request, each divided by
 * the largest node spec (128 CPUs, 8 GPUs), are multiplied; a smaller dot
 * product is better: score = int(100 * (1 - dot / 2)). A sharing pod takes
 * the best-fitting GPU ("-gpusel best").
 */
#include "sched/frag.h"
#include "sched/plugin.h"

#define MAX_SPEC_CPU 128000.0
#define MAX_SPEC_GPU 8000.0

static void dp_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                     struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)state, (void)cs;
    const struct gs_demand *d = &pod->demand;
    double pc = (double)d->cpu_milli / MAX_SPEC_CPU;
    double pg = (double)((int64_t)d->gpu_milli * d->gpu_count) / MAX_SPEC_GPU;
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_info *nd = nodes[i];
        int64_t cpu_left = nd->cpu_alloc - nd->cpu_used;
        if (cpu_left < d->cpu_milli) {
            scores[i] = 0;
            continue;
        }
        double dot = (double)cpu_left / MAX_SPEC_CPU * pc + (double)nd->gpu_milli_free / MAX_SPEC_GPU * pg;
        double s = 1.0 - dot / 2.0;
        int64_t v = (int64_t)(GS_MAX_SCORE * s);
        scores[i] = v < 0 ? 0 : v > GS_MAX_SCORE ? GS_MAX_SCORE : v;
    }
}

const struct gs_plugin gs_plugin_dot_prod = {
    .name = "DotProd",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .score = dp_score,
    .reserve = gs_gpusel_reserve_best_fit, /* GPU choice: best fit */
};
