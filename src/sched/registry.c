/*
 * registry.c - the static registry of every plugin, looked up by name.
 *
 * Profiles name plugins; this table turns the names into the plugin structs.
 * Adding a plugin means one extern line and one table row here.
 *
 * The references are ordinary (strong) ones on purpose: they are what pulls
 * each plugin's object file out of the static library into every program
 * that can look plugins up by name.
 */
#include "sched/plugin.h"

#include <string.h>

extern const struct gs_plugin gs_plugin_priority_sort;
extern const struct gs_plugin gs_plugin_node_unschedulable;
extern const struct gs_plugin gs_plugin_node_resources_fit;
extern const struct gs_plugin gs_plugin_gpu_share;
extern const struct gs_plugin gs_plugin_gpu_model;
extern const struct gs_plugin gs_plugin_node_affinity;
extern const struct gs_plugin gs_plugin_taint_toleration;
extern const struct gs_plugin gs_plugin_default_binder;

/* Gang, topology, spread and preemption (docs/SCHEDULING.md). */
extern const struct gs_plugin gs_plugin_coscheduling;
extern const struct gs_plugin gs_plugin_node_resource_topology;
extern const struct gs_plugin gs_plugin_pod_topology_spread;
extern const struct gs_plugin gs_plugin_default_preemption;
extern const struct gs_plugin gs_plugin_inter_pod_affinity;
extern const struct gs_plugin gs_plugin_balanced_allocation;
extern const struct gs_plugin gs_plugin_dynamic_resources; /* DRA (docs/DRA.md) */

extern const struct gs_plugin gs_plugin_random;
extern const struct gs_plugin gs_plugin_dot_prod;
extern const struct gs_plugin gs_plugin_gpu_clustering;
extern const struct gs_plugin gs_plugin_gpu_packing;
extern const struct gs_plugin gs_plugin_best_fit;
extern const struct gs_plugin gs_plugin_fgd;
extern const struct gs_plugin gs_plugin_fgd_pack;
extern const struct gs_plugin gs_plugin_fgd_plus;
extern const struct gs_plugin gs_plugin_fgd_look;
extern const struct gs_plugin gs_plugin_fgd_learn;

static const struct gs_plugin *const table[] = {
    &gs_plugin_priority_sort,
    &gs_plugin_node_unschedulable,
    &gs_plugin_node_resources_fit,
    &gs_plugin_gpu_share,
    &gs_plugin_gpu_model,
    &gs_plugin_node_affinity,
    &gs_plugin_taint_toleration,
    &gs_plugin_default_binder,
    &gs_plugin_coscheduling,
    &gs_plugin_node_resource_topology,
    &gs_plugin_pod_topology_spread,
    &gs_plugin_default_preemption,
    &gs_plugin_inter_pod_affinity,
    &gs_plugin_balanced_allocation,
    &gs_plugin_dynamic_resources,
    &gs_plugin_random,
    &gs_plugin_dot_prod,
    &gs_plugin_gpu_clustering,
    &gs_plugin_gpu_packing,
    &gs_plugin_best_fit,
    &gs_plugin_fgd,
    &gs_plugin_fgd_pack,
    &gs_plugin_fgd_plus,
    &gs_plugin_fgd_look,
    &gs_plugin_fgd_learn,
};
#define NTABLE (sizeof table / sizeof table[0])

const struct gs_plugin *gs_plugin_lookup(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < NTABLE; i++)
        if (table[i] && strcmp(table[i]->name, name) == 0) return table[i];
    return NULL;
}

const struct gs_plugin *const *gs_plugin_all(void)
{
    /* Filled on every call with the same values, so concurrent callers agree. */
    static const struct gs_plugin *present[NTABLE + 1];
    size_t n = 0;
    for (size_t i = 0; i < NTABLE; i++)
        if (table[i]) present[n++] = table[i];
    present[n] = NULL;
    return present;
}
