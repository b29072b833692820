/*
 * podgroups.h - the three PodGroup shapes as the control loops see them:
 * where each is stored, which group a pod belongs to, and the status the
 * scheduler writes back.
 *
 * core/kinds.c decodes scheduler-plugins' scheduling.x-k8s.io/v1alpha1,
 * Volcano's scheduling.volcano.sh/v1beta1 and the native scheduling.k8s.io/v1beta1
 * PodGroup into one struct gs_podgroup whose `group` is the key members name
 * it by (object.h). Each shape is its own served resource, so its store key
 * prefix says the shape; the helpers here turn a pod's group key into its
 * PodGroup's store key and back, so the scheduler and admission follow all
 * three with one code path.
 *
 * Status: once a group is placed (a member is bound, which Coscheduling allows
 * only when minMember members are reserved) or cannot be (a member's
 * diagnosis), gs_podgroup_status_fn writes what each shape's own controller
 * would show:
 *   - native: condition PodGroupScheduled True (reason Scheduled) or False
 *     (reason Unschedulable, message = the diagnosis);
 *   - Volcano: status.phase Running with condition Scheduled, or condition
 *     Unschedulable (reason NotEnoughResources, message = the diagnosis; phase
 *     Pending when it had none); a Scheduled group drops its Unschedulable
 *     condition (stale ones are a known annoyance in other schedulers);
 *   - scheduler-plugins: status.phase Scheduled, or Pending when it had no
 *     phase (its status has no conditions).
 * A group once marked scheduled is not marked unschedulable again by a late
 * member's failure. The function is a gs_store_mutate_fn (the same shape as
 * gs_source_mutate's, for the "status" subresource) and returns
 * GS_STORE_UNCHANGED when nothing would change, so repeats cost no write.
 */
#ifndef GS_CONTROL_PODGROUPS_H
#define GS_CONTROL_PODGROUPS_H

#include "core/object.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The store key prefixes of the three PodGroup resources, NULL-terminated. */
extern const char *const gs_podgroup_prefixes[];

/* Store key of the PodGroup pod belongs to ("podgroups.scheduling.volcano.sh/ns/g").
 * 0, or -1 when the pod has no group or buf is too small. */
int gs_podgroup_store_key(const struct gs_pod *pod, char *buf, size_t len);
/* "ns/<group key>" (what gs_pod.pod_group holds, prefixed by the namespace)
 * from a PodGroup's store key of any shape. 0, or -1 when key is not one. */
int gs_podgroup_ns_group(const char *store_key, char *buf, size_t len);

/* What gs_podgroup_status_fn writes. message: the diagnosis (scheduled false);
 * now_s: wall-clock seconds for lastTransitionTime. */
struct gs_podgroup_status {
    bool scheduled;
    const char *message;
    double now_s;
};

/* gs_store_mutate_fn over the PodGroup's current document (see above). An
 * absent PodGroup is not created (GS_STORE_UNCHANGED). */
int gs_podgroup_status_fn(json_t *cur, json_t **out, void *arg);

#endif
