/*
 * gpu_share.c - "GpuShare": per-device GPU fit and device choice.
 *
 * A pod asks for gpu_count GPUs, each with a share gpu_milli (1000 = the whole
 * GPU) and optionally gpu_mem_mib of its memory. A node fits when that many
 * healthy GPUs each have the share and the memory free. Whole-GPU pods without
 * a memory demand are answered from the node's gpus_whole_free aggregate; a
 * node with a wholly free GPU fits any single share; only the remaining nodes
 * walk their GPUs, so the common cases cost a few loads per node. The index
 * form answers the same from the cache's hot records, where the most free
 * share on one healthy GPU also settles single shares and, on a node without
 * unhealthy GPUs, every rejection of a memory-less demand; only the rest
 * walk the GPUs.
 *
 * Rejections say which limit bit: no GPUs with the share ("Insufficient
 * nvidia.com/gpu"), the share is there but not the memory ("Insufficient GPU
 * memory"), or it would fit only by counting unhealthy GPUs ("Unhealthy
 * GPU", which preemption cannot fix).
 *
 * Reserve picks the devices when no earlier plugin did: best fit, i.e. the
 * fitting GPUs with the least free share (ties to the lowest index), which
 * keeps whole GPUs whole for later pods. The choice lives in the assignment
 * the framework assumes in the cache, so Unreserve has nothing to undo.
 */
#include "sched/plugin.h"

#include <stdio.h>

static int gs_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    (void)args, (void)d;
    *state = h->cache;
    return 0;
}

enum { REJ_GPU = 1, REJ_MEM = 2, REJ_UNHEALTHY = 3 | GS_REJECT_UNRESOLVABLE };

static struct gs_status gs_pre_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)state, (void)cs;
    if (pod->demand.gpu_count <= 0) return gs_status_make(GS_SKIP, NULL);
    return (struct gs_status){0};
}

static bool slot_fits(const struct gs_gpu_slot *s, int32_t milli, int64_t mem)
{
    return s->milli_free >= milli && (mem <= 0 || s->mem_free_mib >= mem);
}

/* Walks the GPUs: 0 when count of them fit, else the reason code. */
static uint8_t classify(const struct gs_node_info *ni, int32_t count, int32_t milli, int64_t mem)
{
    int32_t fit = 0, share_only = 0, any = 0;
    for (int32_t g = 0; g < ni->ngpus; g++) {
        const struct gs_gpu_slot *s = &ni->gpus[g];
        if (s->milli_free < milli) continue;
        any++;
        if (!s->healthy) continue;
        share_only++;
        fit += mem <= 0 || s->mem_free_mib >= mem;
    }
    if (fit >= count) return 0;
    if (share_only >= count) return REJ_MEM;
    if (any >= count) return REJ_UNHEALTHY;
    return REJ_GPU;
}

static void gs_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)state, (void)cs;
    const int32_t count = pod->demand.gpu_count, milli = pod->demand.gpu_milli;
    const int64_t mem = pod->demand.gpu_mem_mib;
    const bool whole = milli >= GS_GPU_MILLI && mem <= 0;
    const bool one_share = count == 1 && mem <= 0;
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_info *ni = nodes[i];
        if (ni->ngpus < count) {
            reject[i] = REJ_GPU;
            continue;
        }
        if (whole ? ni->gpus_whole_free >= count : one_share && ni->gpus_whole_free > 0) continue;
        reject[i] = classify(ni, count, milli, mem);
    }
}

/*
 * Verdict from the hot record alone, or -1 when the GPUs must be walked. For
 * a demand without memory, classify() can only say "fits" when count healthy
 * GPUs have the share; otherwise, with no unhealthy GPU, it says REJ_GPU.
 */
static int hot_verdict(const struct gs_node_hot *h, int32_t count, int32_t milli, bool whole, bool one_share)
{
    if (h->ngpus < count) return REJ_GPU;
    if (whole) return h->gpus_whole_free >= count ? 0 : h->gpus_unhealthy ? -1 : REJ_GPU;
    if (!one_share) return -1;
    if (h->gpus_whole_free > 0 || (h->gpu_milli_max >= 0 && h->gpu_milli_max >= milli)) return 0;
    return h->gpus_unhealthy ? -1 : REJ_GPU;
}

/* Verdict REJ_GPU from the hot record may need the GPU walk when the node has
 * unhealthy GPUs (they turn it into REJ_UNHEALTHY). */
static uint8_t settle(struct gs_cache *c, const struct gs_node_hot *h, int32_t idx, uint8_t r, int32_t count,
                      int32_t milli, int64_t mem)
{
    return r && h->gpus_unhealthy ? classify(gs_cache_node(c, idx), count, milli, mem) : r;
}

static void gs_filter_idx(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod, const int32_t *idx,
                          size_t n, uint8_t *reject)
{
    (void)cs;
    struct gs_cache *c = state;
    const struct gs_node_hot *hot = gs_cache_hot(c);
    const int32_t count = pod->demand.gpu_count, milli = pod->demand.gpu_milli;
    const int64_t mem = pod->demand.gpu_mem_mib;
    const bool whole = milli >= GS_GPU_MILLI && mem <= 0;
    const bool one_share = count == 1 && mem <= 0;
    /* The two usual demands get their own loops: a compare per node. A node
     * with fewer GPUs than count has fewer whole ones too, and for a share
     * in [0, 1000) a wholly free GPU is also the most free one. */
    if (whole) {
        for (size_t i = 0; i < n; i++) {
            const struct gs_node_hot *h = &hot[idx[i]];
            uint8_t r = h->gpus_whole_free < count ? REJ_GPU : 0;
            reject[i] = __builtin_expect(r && h->gpus_unhealthy, 0) ? settle(c, h, idx[i], r, count, milli, mem) : r;
        }
        return;
    }
    if (one_share && milli >= 0) {
        for (size_t i = 0; i < n; i++) {
            const struct gs_node_hot *h = &hot[idx[i]];
            uint8_t r = h->gpu_milli_max < milli ? REJ_GPU : 0;
            reject[i] = __builtin_expect(r && h->gpus_unhealthy, 0) ? settle(c, h, idx[i], r, count, milli, mem) : r;
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        int v = hot_verdict(&hot[idx[i]], count, milli, whole, one_share);
        reject[i] = v >= 0 ? (uint8_t)v : classify(gs_cache_node(c, idx[i]), count, milli, mem);
    }
}

static int gs_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)state, (void)pod;
    switch (code) {
    case REJ_MEM: return snprintf(buf, len, "Insufficient GPU memory");
    case REJ_UNHEALTHY: return snprintf(buf, len, "Unhealthy GPU");
    default: return snprintf(buf, len, "Insufficient nvidia.com/gpu");
    }
}

/* Best fit: repeatedly take the fitting, unchosen GPU with the least free share. */
static uint64_t best_fit(const struct gs_node_info *ni, int32_t count, int32_t milli, int64_t mem)
{
    uint64_t mask = 0;
    for (int32_t k = 0; k < count; k++) {
        int32_t best = -1;
        for (int32_t g = 0; g < ni->ngpus; g++) {
            const struct gs_gpu_slot *s = &ni->gpus[g];
            if ((mask >> g) & 1 || !s->healthy || !slot_fits(s, milli, mem)) continue;
            if (best < 0 || s->milli_free < ni->gpus[best].milli_free) best = g;
        }
        if (best < 0) return 0;
        mask |= 1ULL << best;
    }
    return mask;
}

static struct gs_status gs_reserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                   struct gs_node_info *node, struct gs_assignment *a)
{
    (void)state, (void)cs;
    const struct gs_demand *d = &pod->demand;
    if (d->gpu_count <= 0 || a->gpu_mask) return (struct gs_status){0};
    uint64_t mask = best_fit(node, d->gpu_count, d->gpu_milli, d->gpu_mem_mib);
    if (!mask) return gs_status_make(GS_UNSCHEDULABLE, "Insufficient nvidia.com/gpu");
    a->gpu_mask = mask;
    a->milli = d->gpu_milli;
    a->mem_mib = d->gpu_mem_mib;
    return (struct gs_status){0};
}

const struct gs_plugin gs_plugin_gpu_share = {
    .name = "GpuShare",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .init = gs_init,
    .pre_filter = gs_pre_filter,
    .filter = gs_filter,
    .filter_idx = gs_filter_idx,
    .reason = gs_reason,
    .reserve = gs_reserve,
};
