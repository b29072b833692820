/*
 * dra_plugin.h - what the DynamicResources plugin (plugins/dynamic_resources.c)
 * offers its drivers beyond the framework's points: the claim status writes
 * a binding owes, and whether a pod needs the plugin at all.
 *
 * The plugin decides and reaches nothing outside the cache, like every
 * plugin; the loop that writes bindings (loops/sched_loop.c, the simulator)
 * takes, for each bound pod, the claims to write before the pod's binding:
 * a new allocation (status.allocation as Kubernetes writes it) plus the pod
 * in status.reservedFor, or for a claim allocated already only the pod in
 * reservedFor. Taking them leaves the claims' devices held as assumed in the
 * cache (cache_dra.h) until the claims' allocated versions come back; a
 * writer whose write or binding fails calls gs_cache_dra_unassume for each.
 */
#ifndef GS_SCHED_DRA_PLUGIN_H
#define GS_SCHED_DRA_PLUGIN_H

#include "core/object.h"
#include "sched/cache.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define GS_DRA_PLUGIN_NAME "DynamicResources"

/* Does the pod ask for devices through spec.resourceClaims? */
bool gs_pod_has_claims(const struct gs_pod *pod);

struct gs_dra_claim_write {
    char *store_key;     /* "resourceclaims.resource.k8s.io/NS/NAME" */
    char *claim_key;     /* "NS/NAME" (gs_cache_dra_unassume) */
    char *uid;           /* precondition */
    json_t *allocation;  /* status.allocation to write; NULL: allocated already, only reservedFor */
    char *pod_name, *pod_uid;
    bool written;        /* the driver's: the write landed */
};

/* The writes the binding of pod_key owes (see above), moved to the caller:
 * 0 with *w / *n (n 0: none), GS_ENOMEM. state: the plugin's
 * (gs_framework_plugin_state(fw, GS_DRA_PLUGIN_NAME)); NULL gives none.
 * now_s: wall-clock seconds for allocationTimestamp. */
int gs_dra_plugin_take(void *state, const char *pod_key, double now_s, struct gs_dra_claim_write **w, size_t *n);
void gs_dra_claim_writes_free(struct gs_dra_claim_write *w, size_t n);

#endif
