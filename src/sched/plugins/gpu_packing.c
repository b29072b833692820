/*
 * gpu_packing.c - the GpuPacking placement policy.
 *
 * Prefers, in tiers, (1) nodes where the pod fits on already partly used
 * GPUs - tighter is better, (2) partly used nodes where it needs fully free
 * GPUs, (3) idle nodes - those with fewer GPUs first; CPU-only pods score 0.
 * Scores follow the FGD paper's simulator: tier 3 = max(33 - free, free),
 * tier 2 = max(50 - whole GPUs taken, 33), tier 1 = max(100 - sum of the
 * chosen GPUs' free percent / 10, 50). A sharing pod takes the best-fitting GPU.
 */
#include "sched/frag.h"
#include "sched/plugin.h"

static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

static int64_t packing_score(const struct gs_node_info *nd, const struct gs_demand *d)
{
    int32_t ng = nd->ngpus > GS_MAX_GPUS_PER_NODE ? GS_MAX_GPUS_PER_NODE : nd->ngpus, full = 0;
    int32_t order[GS_MAX_GPUS_PER_NODE];
    for (int32_t i = 0; i < ng; i++) {
        full += gs_gpu_left(nd, i) == GS_GPU_MILLI;
        /* stable insertion by free milli, ascending */
        int32_t j = i;
        while (j > 0 && gs_gpu_left(nd, order[j - 1]) > gs_gpu_left(nd, i)) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    if (full == nd->ngpus) return imax(GS_MAX_SCORE / 3 - full, full);
    int32_t want = d->gpu_count, whole = 0;
    int64_t free_pct = 0;
    for (int32_t k = 0; k < ng && want > 0; k++) {
        int32_t l = gs_gpu_left(nd, order[k]);
        if (l < d->gpu_milli) continue;
        want--;
        whole += l == GS_GPU_MILLI;
        free_pct += (int64_t)l * 100 / GS_GPU_MILLI;
    }
    if (want) return 0;
    if (whole) return imax(GS_MAX_SCORE / 2 - whole, GS_MAX_SCORE / 3);
    return imax(GS_MAX_SCORE - free_pct / 10, GS_MAX_SCORE / 2);
}

static void gp_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                     struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)state, (void)cs;
    const struct gs_demand *d = &pod->demand;
    for (size_t i = 0; i < n; i++)
        scores[i] = d->gpu_count <= 0 || d->gpu_milli <= 0 ? 0 : packing_score(nodes[i], d);
}

const struct gs_plugin gs_plugin_gpu_packing = {
    .name = "GpuPacking",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .score = gp_score,
    .reserve = gs_gpusel_reserve_best_fit, /* GPU choice: best fit */
};
