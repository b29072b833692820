/*
 * explain.h - "why is my pod pending": a report for a pending pod or group.
 *
 * Given a framework over a cache holding the cluster as it is (the
 * simulator rebuilds it at a moment from its events), the report says, per
 * Filter plugin, how many nodes it rejected and why (each plugin judged on
 * every node, not only on the survivors of the earlier ones); the closest
 * node and what it lacks; and counterfactuals: the victims whose preemption
 * would make the pod fit ("would fit on node-17 if pods a, b were
 * preempted") or that none would, and for multi-GPU pods the largest free
 * NVLink island. For a gang, the group's state comes first.
 *
 * Reports are text written to a caller's stream; nothing in the cluster
 * changes (preemption is simulated and undone).
 */
#ifndef GS_SCHED_EXPLAIN_H
#define GS_SCHED_EXPLAIN_H

#include "sched/framework.h"

#include <stdio.h>

/* Explains pod (not in the cache) against fw's cache. 0 or GS_ENOMEM. */
int gs_explain_pod(struct gs_framework *fw, struct gs_cache *cache, const struct gs_pod *pod, FILE *out);
/* Explains a pod group: its state (when Coscheduling is enabled), then each
 * member of pods[] that is not placed. */
int gs_explain_group(struct gs_framework *fw, struct gs_cache *cache, const char *group_key,
                     const struct gs_pod *const *pods, size_t n, FILE *out);

#endif
