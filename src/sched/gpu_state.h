/*
 * gpu_state.h - where a node's per-GPU state comes from, as the scheduler
 * sees it, and what a diagnosis says when it is only a count.
 *
 * core/node.c decides it at decode: status.devices, else the annotation
 * gpusched.io/gpus our node DaemonSet writes on real Kubernetes Nodes, else
 * count-only (allocatable nvidia.com/gpu). A count-only node whose
 * NodeResourceTopology is known gets per-GPU NUMA nodes from its zones
 * (gs_gpu_state_apply_nrt, called by the scheduler loop when either object
 * changes). What is left count-only is said in the diagnosis and in explain,
 * so "why is my pod pending" does not blame NUMA or NVLink rules that had
 * nothing to work with.
 */
#ifndef GS_SCHED_GPU_STATE_H
#define GS_SCHED_GPU_STATE_H

#include "core/object.h"
#include "sched/cache.h"
#include "sched/topology_core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_GPU_STATE_COUNT_ONLY \
    "count-only GPU state (no status.devices, " GS_ANN_NODE_GPUS " annotation or NodeResourceTopology)"

/* Re-derives n's GPUs from nrt's zones (nrt NULL: count-only again) when n
 * has no devices of its own; other nodes are untouched. 0 or GS_ENOMEM. */
int gs_gpu_state_apply_nrt(struct gs_node *n, const struct gs_nrt *nrt);
/* True when the cache's node has GPUs known only by their count. */
bool gs_gpu_state_count_only(const struct gs_node_info *n);
/* The note of one cache as of its epoch (which every node add, update and
 * removal moves): a walk over 5,000 nodes costs ~0.3 ms, too much for every
 * unschedulable attempt. Owned by the caller, zeroed with each new cache. */
struct gs_gpu_state_memo {
    bool valid;
    uint64_t epoch;
    char note[512];
};

/* For a pod that wants GPUs: "node n1: count-only GPU state (...)", up to
 * three nodes by name then "and N more node(s)", into buf. memo may be NULL.
 * Returns the length (0: nothing to say, buf ""). */
size_t gs_gpu_state_note(const struct gs_cache *c, struct gs_gpu_state_memo *memo, const struct gs_pod *pod,
                         char *buf, size_t len);
/* msg, or msg followed by the note in buf (when there is one). */
const char *gs_gpu_state_diagnosis(const struct gs_cache *c, struct gs_gpu_state_memo *memo, const struct gs_pod *pod,
                                   const char *msg, char *buf, size_t len);

#endif
