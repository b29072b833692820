/*
 * nodeplan.h - node-wise reclaim victims: which running workloads to evict
 * so that a claimant's pods find room on as few nodes as possible.
 *
 * Taking victims in a global order (lowest priority, most recently admitted)
 * frees GPUs wherever those victims happen to run: a gang whose pods each
 * need most of a node then never fits, however many are evicted. The plan
 * instead works per claimant pod, largest first: on every usable node it
 * computes the cheapest set of candidate victims on that node whose removal
 * lets the pod fit there (per-GPU free share, CPU and memory), picks the
 * node where that set costs least (a node that already fits costs nothing,
 * and the tightest such node is preferred, as the placement check packs),
 * and books the pod there before planning the next one. The answer is a
 * proposal: admission then removes the victims in simulation on the quota
 * and the cache and runs the real placement check before evicting anyone.
 *
 * The planner works on plain arrays so it can be tested without a cache.
 * Victims are offered through take(): it answers whether the victim may
 * still be taken given those taken so far (a reclaim victim's queue must
 * keep borrowing and stay at its fair share) and books it; untake() undoes
 * the booking. Both are called in strict LIFO order.
 */
#ifndef GS_SCHED_ADMISSION_NODEPLAN_H
#define GS_SCHED_ADMISSION_NODEPLAN_H

#include "sched/framework.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs__np_node {
    bool usable;      /* live, schedulable, not held or reserved for another, flavor labels match */
    int32_t ngpus;
    int32_t model;    /* interned GPU model id, -1 none */
    int32_t *gfree;   /* ngpus entries: free milli per GPU (< 0: not usable) */
    int64_t cpu_free, mem_free;
};

/* One pod of a victim where it runs now. */
struct gs__np_vpod {
    int32_t node;     /* -1: not in the cache (frees nothing) */
    uint64_t gpu_mask;
    int32_t milli;    /* per GPU in the mask */
    int64_t cpu, mem;
};

struct gs__np_victim {
    const struct gs__np_vpod *pods;
    size_t npods;
    int32_t priority;
    double cost;      /* work lost by evicting it (GPU-seconds run) */
};

/* One claimant pod. */
struct gs__np_pod {
    int32_t gpus, milli; /* gpus GPUs with milli free each; 0 GPUs: CPU/memory only */
    int64_t cpu, mem;
    uint64_t models;     /* acceptable GPU model ids as bits; 0: any */
};

struct gs__np_req {
    struct gs__np_node *nodes; /* gfree/cpu_free/mem_free are worked on and left changed */
    size_t nnodes;
    const struct gs__np_victim *v;
    size_t nv;
    const struct gs__np_pod *pods;
    size_t npods;
    bool (*take)(void *ctx, size_t victim);
    void (*untake)(void *ctx, size_t victim);
    void *ctx;
    /* How a node's set is ranked after priority: GS_NP_COST_WORK (0) least
     * work lost, then fewest victims; GS_NP_COST_COUNT fewest victims, then
     * least work lost; GS_NP_COST_ROOM fewest victims, then the most GPU
     * milli left free on the node (what the claimant does not use is room
     * for the next workload, without another eviction), then least work. */
    int cost;
};

enum { GS_NP_COST_WORK = 0, GS_NP_COST_COUNT = 1, GS_NP_COST_ROOM = 2 };

/* Plans victims for every claimant pod: 1 with *nout victims chosen (their
 * indices in out, which has room for nv; 0 when no pod needed any), 0 when
 * some pod fits no node even with every allowed victim there removed
 * (nothing is to be evicted), or GS_ENOMEM. On 1 the chosen victims stay
 * booked through take(); otherwise nothing does. */
int gs__nodeplan(const struct gs__np_req *r, size_t *out, size_t *nout);

/*--- The input, read from the cache ---*/

/* Node ni: free share per GPU in gfree (room for ni->ngpus; an unhealthy
 * GPU never has room), free CPU and memory. */
void gs__np_node_of(const struct gs_node_info *ni, bool usable, int32_t *gfree, struct gs__np_node *out);
/* Where each of a running workload's pods is in the cache (vp: npods
 * entries; node -1 for a pod the cache does not have). */
void gs__np_vpods_of(struct gs_cache *c, const struct gs_pod *const *pods, size_t npods, struct gs__np_vpod *vp);
/* A claimant pod, with its GPU models as interned ids (exact names, as the
 * GpuModel filter; a model past the mask's 64 bits leaves it "any"). */
void gs__np_pod_of(struct gs_cache *c, const struct gs_pod *pod, struct gs__np_pod *out);

#endif
