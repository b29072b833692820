/*
 * pdb.h - PodDisruptionBudget (policy/v1) arithmetic, as Kubernetes'
 * disruption controller and eviction subresource do it.
 *
 * A budget selects pods of its namespace (spec.selector; an empty selector
 * selects every pod, as policy/v1 says) and says how many must stay healthy:
 * spec.minAvailable, or spec.maxUnavailable of the expected pods, each an
 * integer or a percentage rounded up. A pod is healthy when its Ready
 * condition is True and it is not being deleted. The numbers kube keeps in
 * status - expectedPods, currentHealthy, desiredHealthy, disruptionsAllowed
 * - are computed here from the pods the caller lists; pods already evicted
 * but not yet gone are named in status.disruptedPods and count as not
 * healthy, which is what keeps two concurrent evictions from both spending
 * the last allowed disruption (the budget's status is written with each
 * eviction, in one read-modify-write).
 *
 * Pure functions over JSON documents, no store: api_eviction.c calls them
 * and tests/unit/test_pdb.c checks them.
 */
#ifndef GS_CONTROL_PDB_H
#define GS_CONTROL_PDB_H

#include "core/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct gs_pdb_eval {
    int64_t expected;         /* pods the budget selects (not finished) */
    int64_t current_healthy;  /* of those, Ready and not being deleted nor already evicted */
    int64_t desired_healthy;  /* what minAvailable / maxUnavailable ask for */
    int64_t disruptions_allowed;
};

/* Problems of a budget's spec into d (field paths "spec.minAvailable"...):
 * both minAvailable and maxUnavailable, a negative number, a percentage
 * that is not 0..100%, a selector requirement without values. 0, GS_EINVAL
 * when d got entries, GS_ENOMEM. */
int gs_pdb_validate(const json_t *pdb, struct gs_diags *d);

/* Whether pdb's selector selects pod (same namespace, labels match). */
bool gs_pdb_selects(const json_t *pdb, const json_t *pod);

/* Ready condition True and no deletionTimestamp. */
bool gs_pdb_pod_healthy(const json_t *pod);

/* The budget's numbers over pods (the pods of its namespace; those it does
 * not select are skipped). disrupted: status.disruptedPods (pod name ->
 * time), may be NULL. */
void gs_pdb_evaluate(const json_t *pdb, json_t *const *pods, size_t npods, const json_t *disrupted,
                     struct gs_pdb_eval *out);

#endif
