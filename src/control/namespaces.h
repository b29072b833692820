/*
 * namespaces.h - namespaces as Kubernetes keeps them: the built-in ones, and
 * the controller that empties a Terminating namespace before it goes.
 *
 * At server start the namespaces default, kube-system, kube-public and
 * kube-node-lease and the PriorityClasses system-cluster-critical and
 * system-node-critical are created when absent (idempotent). Objects are
 * created only in an existing namespace (api_fields.h). DELETE of a
 * namespace marks it (deletionTimestamp, status.phase Terminating); this
 * controller then deletes what is in it - pods first, gracefully (a bound
 * pod waits for its agent, as any pod DELETE does), then every other
 * namespaced object once no pod is left - and removes the namespace when
 * nothing is left. It rescans every period, so work cut short by a restart
 * is picked up again.
 */
#ifndef GS_CONTROL_NAMESPACES_H
#define GS_CONTROL_NAMESPACES_H

#include "control/store.h"

#include <stdbool.h>
#include <stdint.h>

/* The namespaces Kubernetes never lets go (DELETE is refused). */
bool gs_namespace_builtin(const char *name);

/* Creates the built-in namespaces and priority classes that are missing. */
int gs_namespaces_bootstrap(struct gs_store *st);

struct gs_nsctl_opts {
    struct gs_store *store; /* borrowed */
    int64_t period_ms;      /* 0: 250 ms */
};
struct gs_nsctl;

int gs_nsctl_start(const struct gs_nsctl_opts *o, struct gs_nsctl **out);
void gs_nsctl_stop(struct gs_nsctl *c);
/* One pass over the Terminating namespaces (tests drive it without the
 * thread); returns how many namespaces were removed. */
int gs_nsctl_scan(struct gs_store *st);

#endif
