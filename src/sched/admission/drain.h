/*
 * drain.h - whole-node drains for a queue below its fair share: which nodes
 * to stop filling so that one of its gangs can start on them soonest.
 *
 * A gang whose pods each need most of an 8-GPU node fits only on nodes that
 * are (nearly) empty. When GPUs free up one by one as workloads end, the
 * queues already at their share take them again at once and no node ever
 * becomes whole; reclaim rarely helps, since the running workloads are
 * protected (minimum runtime, the eviction cap). A drain instead picks, for
 * each pod of the gang, the node where enough GPUs will be free soonest
 * (from the declared end of what runs on each GPU: admission time plus the
 * workload's estimated duration), and admission then keeps those nodes for
 * the gang: other workloads may use them only when they end before the
 * drain's start (backfill), and are pinned elsewhere otherwise
 * (admission.h, pin_placement). The start is an estimate on GPU counts only;
 * admission's own placement check decides when the gang really fits.
 *
 * The planner works on plain arrays, so it is tested without a cache
 * (tests/unit/test_admission_drain.c); admission.c fills them.
 */
#ifndef GS_SCHED_ADMISSION_DRAIN_H
#define GS_SCHED_ADMISSION_DRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_DRAIN_NEVER INT64_MAX

struct gs__drain_node {
    bool usable;        /* live, schedulable, flavor labels match, not held/reserved/drained for another */
    int32_t model;      /* interned GPU model id, -1 none */
    int32_t ngpus;
    int64_t *gend;      /* ngpus entries: when the GPU is wholly free (<= now: free now), GS_DRAIN_NEVER
                         * when unknown or unhealthy; the planner books GPUs by setting GS_DRAIN_NEVER */
};

struct gs__drain_pod {
    int32_t gpus;       /* GPUs the pod needs on one node; 0: not planned (CPU only) */
    uint64_t models;    /* acceptable GPU model ids as bits; 0: any */
};

/* For each pod, largest first, the usable node where its GPUs are free
 * soonest (ties: a node already chosen for an earlier pod of the gang, then
 * the fewest GPUs left over free by then, then the lowest index); those GPUs
 * are booked before the next pod. 1 with node_out[i] for pod i (-1 for a pod
 * without GPUs) and *start the latest of the chosen times; 0 when some pod
 * has no node where its GPUs ever free up (then nothing is chosen; gend may
 * have been changed). */
int gs__drain_plan(struct gs__drain_node *nodes, size_t nnodes, const struct gs__drain_pod *pods, size_t npods,
                   int32_t *node_out, int64_t *start);

#endif
