/*
 * node_unschedulable.c - Filter "NodeUnschedulable": keeps pods off cordoned
 * nodes (spec.unschedulable), unless the pod tolerates the
 * node.kubernetes.io/unschedulable:NoSchedule taint, as in Kubernetes.
 *
 * The cache already marks cordoned nodes unschedulable and the framework
 * leaves those out of Filter; this plugin covers nodes whose object says
 * cordoned while the cache flag was set otherwise (e.g. by an operator that
 * re-enabled scheduling before the object caught up). A pod that tolerates
 * the taint skips the filter.
 */
#include "sched/plugin.h"

#include <stdio.h>
#include <string.h>

#define TAINT_UNSCHEDULABLE "node.kubernetes.io/unschedulable"

enum { REJECT_CORDONED = 1 | GS_REJECT_UNRESOLVABLE };

static bool tolerates_cordon(const struct gs_pod *pod)
{
    struct gs_taint t = {.key = TAINT_UNSCHEDULABLE, .value = NULL, .effect = GS_EFFECT_NOSCHEDULE};
    for (size_t i = 0; i < pod->ntolerations; i++)
        if (gs_toleration_tolerates(&pod->tolerations[i], &t)) return true;
    return false;
}

static int nu_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    (void)args, (void)d;
    *state = h->cache;
    return 0;
}

static struct gs_status nu_pre_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)cs;
    if (!gs_cache_cordon_overrides(state) || tolerates_cordon(pod)) return gs_status_make(GS_SKIP, NULL);
    return (struct gs_status){0};
}

static void nu_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)state, (void)cs, (void)pod;
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_info *ni = nodes[i];
        if (!ni->schedulable || (ni->node && ni->node->unschedulable)) reject[i] = REJECT_CORDONED;
    }
}

static int nu_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)state, (void)pod, (void)code;
    return snprintf(buf, len, "node(s) were unschedulable");
}

const struct gs_plugin gs_plugin_node_unschedulable = {
    .name = "NodeUnschedulable",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .init = nu_init,
    .pre_filter = nu_pre_filter,
    .filter = nu_filter,
    .reason = nu_reason,
};
