/*
 * preferred.h - GetPreferredAllocation: which of the available device IDs a
 * container should get, when kubelet lets the plugin choose.
 *
 * Whole GPUs: the chosen set spans as few NVLink islands as possible (an
 * NVSwitch machine is one island), then as few NUMA nodes, then fits the
 * island with the fewest free GPUs that can hold it (best fit: large free
 * islands stay whole for large requests), then has the most NVLinks among its
 * members, then the lowest indices. Candidates are grown greedily from every
 * available GPU as a seed and the best by that order wins: exact for the
 * usual shapes (islands, NUMA halves) and O(n^3) at worst for 32 GPUs.
 *
 * Replicas (time-slicing): replicas are spread over distinct GPUs, taking
 * first from the GPUs with the most free replicas (the least shared).
 *
 * Must-include IDs are always part of the answer.
 */
#ifndef GS_NODE_PREFERRED_H
#define GS_NODE_PREFERRED_H

#include "node/gpus.h"

#include <stddef.h>

/* Chooses `size` IDs among avail; every must ID found in avail is chosen
 * (kubelet's must-include IDs are always a subset of the available ones).
 * IDs that name no GPU of the table are ignored. Writes indices into avail to
 * pick[] (capacity size), in avail order, and returns how many were chosen:
 * fewer than size only when not enough known IDs are available. GS_EINVAL
 * when size < 1. */
int gs_preferred(const struct gs_node_gpus *g, const char *const *avail, size_t navail, const char *const *must,
                 size_t nmust, int size, int *pick);

#endif
