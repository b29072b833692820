/*
 * default_binder.c - Bind "DefaultBinder": accepts every binding.
 *
 * In the simulator and the benchmark there is nothing outside the scheduler
 * to tell; the framework confirms the cache assumption after Bind succeeds.
 * The server's binder (writing spec.nodeName and the devices annotation
 * through the store) is a different plugin placed before this one.
 */
#include "sched/plugin.h"

static struct gs_status db_bind(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                const struct gs_node_info *node, const struct gs_assignment *a)
{
    (void)state, (void)cs, (void)pod, (void)node, (void)a;
    return (struct gs_status){0};
}

const struct gs_plugin gs_plugin_default_binder = {
    .name = "DefaultBinder",
    .bind = db_bind,
};
