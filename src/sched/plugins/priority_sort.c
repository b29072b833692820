/*
 * priority_sort.c - QueueSort "PrioritySort": higher spec.priority first,
 * then the pod that entered the active queue earlier, then insertion order
 * (so equal pods never compare equal and the heap stays deterministic).
 */
#include "sched/plugin.h"

static bool ps_less(void *state, const struct gs_queued_pod *a, const struct gs_queued_pod *b)
{
    (void)state;
    if (a->pod->priority != b->pod->priority) return a->pod->priority > b->pod->priority;
    if (a->timestamp_ns != b->timestamp_ns) return a->timestamp_ns < b->timestamp_ns;
    return a->seq < b->seq;
}

const struct gs_plugin gs_plugin_priority_sort = {
    .name = "PrioritySort",
    .less = ps_less,
};
