/*
 * admission_loop.h - multi-tenant admission (sched/admission) inside the
 * server's scheduler loop.
 *
 * The scheduler loop (sched_loop.c) hands this module every queue object it
 * sees on the store's change stream (ClusterQueue, LocalQueue,
 * ResourceFlavor, gpusched Queue), every PodGroup, and every pending pod that
 * goes through admission: it carries the label kueue.x-k8s.io/queue-name, or
 * its PodGroup does. Such a pod belongs to a workload: the pod alone, or the
 * whole PodGroup it names (label scheduling.x-k8s.io/pod-group). It does not
 * enter the scheduling queue until gs_adm_loop_cycle() admits its workload;
 * then the admitted hook queues every pod of it. A PodGroup is submitted once
 * minMember of its pods exist, with all of its pods present then, so quota
 * is reserved for all of them at once and all of them are queued together;
 * a pod that joins a group after its admission is a workload of its own.
 * Meanwhile the condition QuotaReserved of each pod (and Admitted of the
 * PodGroup) is written through the source, as a status-only write (False with the reason it waits, True
 * once admitted), only when it changes. Pods that finish give their share of
 * the quota back; the rest is released when the last pod of the workload
 * has gone. Workloads that admission's reclaim or preemption evicts go, pod
 * by pod and always whole, to the evict hook, which writes them back like
 * the scheduler's own preemption.
 *
 * Admission keeps its own decoded copy of every pod it holds, so the
 * scheduler loop may free or replace its objects at any time. A pod that is
 * replaced under the same name (gs_adm_loop_pod_gone then _pod_add, as the
 * loop does for a re-created pod) keeps its workload and place in line when
 * it asks for the same thing; what it left is settled at the next cycle.
 *
 * The queue tree is read-only once built, so a change to any queue object
 * rebuilds it and a fresh admission: live workloads are submitted again in
 * their original order and those already admitted are restored as admitted
 * (gs_admission_restore), so running pods keep their quota. Fair-share
 * history starts over on such a rebuild.
 *
 * Capacity that reclaim frees is held for the claimant: gs_adm_loop_profile()
 * gives the scheduler a copy of its profile with the filter AdmissionHold
 * added (inert while nothing is held).
 *
 * Runs on the scheduler loop's thread only; times come from its clock.
 */
#ifndef GS_CONTROL_ADMISSION_LOOP_H
#define GS_CONTROL_ADMISSION_LOOP_H

#include "control/store.h"
#include "core/clock.h"
#include "informer/source.h"
#include "sched/cache.h"
#include "sched/framework.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

struct gs_admission_opts;

struct gs_adm_loop_opts {
    struct gs_source *source;         /* borrowed: QuotaReserved / Admitted conditions and queue status are written here */
    struct gs_cache *cache;           /* borrowed: the placement check runs on it */
    const struct gs_clock *clock;     /* borrowed */
    const struct gs_profile *profile; /* filters for the placement check; NULL: the default profile */
    void *ctx;
    /* The pod (store key "pods/ns/name") was admitted: queue it for scheduling. */
    void (*admitted)(void *ctx, const char *key);
    /* Admission evicted the pod (reclaim or preemption by workload `by`). */
    void (*evict)(void *ctx, const char *key, const char *by);
    /* Tuning for every admission built (patience, minimum runtime, hold,
     * caps...), copied at creation; its profile, evict and ctx are replaced
     * by the loop's own. NULL: the library's defaults, history weight 0.5. */
    const struct gs_admission_opts *tuning;
    struct gs_recorder *events; /* borrowed (events.h): QuotaReserved, Admitted, Preempted; NULL: none */
};

struct gs_adm_loop;

int gs_adm_loop_new(const struct gs_adm_loop_opts *o, struct gs_adm_loop **out);
void gs_adm_loop_free(struct gs_adm_loop *a);

/* Is this store key one of the queue kinds admission follows? */
bool gs_adm_loop_is_queue_key(const char *key);
/* A queue object was created, changed (doc) or deleted (doc NULL) at store
 * version rv; versions not newer than the last seen for key are ignored. */
void gs_adm_loop_queue_event(struct gs_adm_loop *a, const char *key, const json_t *doc, int64_t rv);
/* Store key prefixes of the queue kinds, NULL-terminated (for the initial list). */
extern const char *const gs_adm_loop_prefixes[];

/* Does this pod carry the queue label itself? */
bool gs_adm_loop_wants(const struct gs_pod *pod);
/* Does this pod go through admission: the queue label on it, or on (or
 * spec.queue of) its PodGroup as last seen? */
bool gs_adm_loop_claims(const struct gs_adm_loop *a, const struct gs_pod *pod);
/* A PodGroup (store key "podgroups.scheduling.x-k8s.io/ns/name") was created
 * or changed (pg, read now, not kept) or deleted (pg NULL). */
void gs_adm_loop_group_event(struct gs_adm_loop *a, const char *key, const struct gs_podgroup *pg);
/* A pending pod (key "pods/ns/name"; pod read now: admission decodes its own
 * copy from pod->doc). true: admission holds it, do not queue it; false:
 * its workload is admitted already (after a requeue), queue it. */
bool gs_adm_loop_pod_add(struct gs_adm_loop *a, const char *key, const struct gs_pod *pod);
/* The pod is running already (bound): its workload's quota counts as reserved. */
void gs_adm_loop_pod_running(struct gs_adm_loop *a, const char *key, const struct gs_pod *pod);
/* The pod finished, was deleted or is about to be replaced. Settled at the
 * next cycle: its share of the quota is released then, all of it when it
 * was the workload's last pod, unless the pod was added again meanwhile. */
void gs_adm_loop_pod_gone(struct gs_adm_loop *a, const char *key);

/* Rebuilds if queues changed, runs an admission cycle, writes conditions,
 * calls the hooks. Number of workloads admitted, or GS_E*. */
int gs_adm_loop_cycle(struct gs_adm_loop *a);
/* Workloads waiting for admission. */
size_t gs_adm_loop_pending(const struct gs_adm_loop *a);

/* Admission's view of a held pod for `gpusched explain`: queue, PodGroup,
 * position in line and estimated start (or why there is none), as lines to
 * f. GS_ENOENT when admission does not hold it. */
int gs_adm_loop_explain(struct gs_adm_loop *a, const char *key, FILE *f);

/* base with the filter AdmissionHold appended (nodes held for a claimant
 * are refused to other pods), owned by a and valid until it is freed; base
 * itself when there is no room. For the scheduler's profiles; the
 * placement check keeps opts.profile. */
const struct gs_profile *gs_adm_loop_profile(struct gs_adm_loop *a, const struct gs_profile *base);
/* The filter behind it: args {"admissionLoop": <address>}. */
extern const struct gs_plugin gs_adm_loop_hold_plugin;

#endif
