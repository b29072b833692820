/*
 * pdb_budget.h - what the scheduler needs of a PodDisruptionBudget
 * (policy/v1): which pods it covers and how many may still be disrupted.
 *
 * Preemption orders its victims by these (kube's DefaultPreemption, best
 * effort): a victim that would take a budget below zero is evicted only when
 * no plan with fewer such victims exists. The numbers are the budget's own
 * status as the disruption controller (or our eviction endpoint) last wrote
 * it; a budget without status allows no disruption, as kube reads a zero
 * status. The full arithmetic of a budget is control/pdb.h's; this is the
 * scheduler's read-only view, decoded from the document once per change.
 */
#ifndef GS_CORE_PDB_BUDGET_H
#define GS_CORE_PDB_BUDGET_H

#include "core/error.h"
#include "core/labels.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_pdb_budget {
    char *ns;                    /* metadata.namespace ("default" when unset) */
    char *name;
    /* spec.selector; preemption treats an absent or empty selector as
     * selecting nothing (kube's filterPodsWithPDBViolation). */
    bool has_selector;
    struct gs_selector selector;
    int32_t disruptions_allowed; /* status.disruptionsAllowed, 0 when absent */
    char **disrupted;            /* status.disruptedPods names: already evicted, not counted again */
    size_t ndisrupted;
};

/* Decodes a PodDisruptionBudget document into *out (zeroed first). Problems
 * go to d with their field path ("status.disruptionsAllowed": "invalid value
 * -1: must be at least 0"). 0, GS_EINVAL (out cleared) or
 * GS_ENOMEM. The caller frees with gs_pdb_budget_clear. */
int gs_pdb_budget_decode(const json_t *doc, struct gs_pdb_budget *out, struct gs_diags *d);
void gs_pdb_budget_clear(struct gs_pdb_budget *b);
/* Clears and frees a malloc'd budget; NULL is fine. */
void gs_pdb_budget_free(struct gs_pdb_budget *b);

/* Does the budget cover pod (namespace ns, labels)? False for an empty selector. */
bool gs_pdb_budget_covers(const struct gs_pdb_budget *b, const char *ns, const struct gs_labels *labels);
/* Is name in status.disruptedPods? */
bool gs_pdb_budget_disrupted(const struct gs_pdb_budget *b, const char *name);

#endif
