/*
 * admission_loop.h - multi-tenant admission (sched/admission) inside the
 * server's scheduler loop.
 *
 * The scheduler loop (sched_loop.c) hands this module every queue object it
 * sees on the store's change stream (ClusterQueue, LocalQueue,
 * ResourceFlavor, gpusched Queue) and every pending pod that carries the
 * label kueue.x-k8s.io/queue-name. Such a pod is a workload: it does not
 * enter the scheduling queue until gs_adm_loop_cycle() admits it, then the
 * admitted hook queues it as usual. Meanwhile its condition QuotaReserved is
 * written to the store (False with the reason it waits, True once admitted),
 * only when it changes. A pod that finishes or is deleted gives its quota
 * back. Workloads that admission's reclaim or preemption evicts go to the
 * evict hook, which writes them back like the scheduler's own preemption.
 *
 * The queue tree is read-only once built, so a change to any queue object
 * rebuilds it and a fresh admission: live workloads are submitted again in
 * their original order and those already admitted are restored as admitted
 * (gs_admission_restore), so running pods keep their quota. Fair-share
 * history starts over on such a rebuild.
 *
 * Runs on the scheduler loop's thread only; times come from its clock.
 */
#ifndef GS_CONTROL_ADMISSION_LOOP_H
#define GS_CONTROL_ADMISSION_LOOP_H

#include "control/store.h"
#include "core/clock.h"
#include "sched/cache.h"
#include "sched/framework.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

struct gs_adm_loop_opts {
    struct gs_store *store;           /* borrowed: QuotaReserved conditions are written here */
    struct gs_cache *cache;           /* borrowed: the placement check runs on it */
    const struct gs_clock *clock;     /* borrowed */
    const struct gs_profile *profile; /* filters for the placement check; NULL: the default profile */
    void *ctx;
    /* The pod (store key "pods/ns/name") was admitted: queue it for scheduling. */
    void (*admitted)(void *ctx, const char *key);
    /* Admission evicted the pod (reclaim or preemption by workload `by`). */
    void (*evict)(void *ctx, const char *key, const char *by);
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

/* Does this pod go through admission (it has the queue label)? */
bool gs_adm_loop_wants(const struct gs_pod *pod);
/* A pending pod (key "pods/ns/name", pod borrowed until gs_adm_loop_pod_gone).
 * true: admission holds it, do not queue it; false: admitted already (after
 * a requeue), queue it. */
bool gs_adm_loop_pod_add(struct gs_adm_loop *a, const char *key, const struct gs_pod *pod);
/* The pod is running already (bound): its quota counts as reserved. */
void gs_adm_loop_pod_running(struct gs_adm_loop *a, const char *key, const struct gs_pod *pod);
/* The pod finished, was deleted or is about to be replaced: quota released,
 * the borrowed pod forgotten. */
void gs_adm_loop_pod_gone(struct gs_adm_loop *a, const char *key);

/* Rebuilds if queues changed, runs an admission cycle, writes conditions,
 * calls the hooks. Number of workloads admitted, or GS_E*. */
int gs_adm_loop_cycle(struct gs_adm_loop *a);
/* Workloads waiting for admission. */
size_t gs_adm_loop_pending(const struct gs_adm_loop *a);

/* Admission's view of a held pod for `gpusched explain`: writes lines to f.
 * GS_ENOENT when admission does not hold it. */
int gs_adm_loop_explain(struct gs_adm_loop *a, const char *key, FILE *f);

#endif
