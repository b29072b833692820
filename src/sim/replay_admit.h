/*
 * replay_admit.h - admission in the replay experiment: the server's own
 * admission loop (loops/admission_loop.h) in front of the replay's
 * scheduling queue, on the simulated clock.
 *
 * The replay (replay.c) asks here before it queues a pod. A pod that goes
 * through admission (the label kueue.x-k8s.io/queue-name on it, or on or in
 * spec.queue of its PodGroup) is held until its workload is admitted; then
 * the admitted hook hands it to the scheduler, as the server's scheduler
 * loop does. Queue objects of the trace (ClusterQueue, LocalQueue,
 * ResourceFlavor, WorkloadPriorityClass, gpusched and Volcano Queues), its
 * PodGroups and its DRA objects reach the admission loop under the store
 * keys the server would give them, before the first instant. Quotas,
 * cohorts, fair share, reclaim and preemption are therefore the server's
 * code, not a model of it; only the status writes go nowhere (the loop is
 * given a source that accepts and drops them).
 *
 * Time. The admission loop retries everyone once a second of its clock
 * (capacity it does not see, patience and hold timers); the replay wakes
 * for that tick while workloads wait (gs_replay_admit_next_tick).
 *
 * Pods are named by their index in the trace. Nothing here is built when
 * the trace has no queue objects and no pod or PodGroup names a queue:
 * gs_replay_admit_new() then sets *out to NULL and the replay runs as
 * before, without the AdmissionHold filter.
 */
#ifndef GS_SIM_REPLAY_ADMIT_H
#define GS_SIM_REPLAY_ADMIT_H

#include "core/clock.h"
#include "sched/cache.h"
#include "sched/framework.h"
#include "sim/sim.h"

#include <stdbool.h>
#include <stddef.h>

struct gs_replay_admit;

struct gs_replay_admit_hooks {
    /* Pod i's workload was admitted: queue the pod for scheduling. */
    void (*admitted)(void *ctx, size_t i);
    /* Admission evicted pod i (reclaim or preemption by workload `by`):
     * take it out of the scheduler (and cache); it waits for admission again. */
    void (*evicted)(void *ctx, size_t i, const char *by);
    void *ctx;
};

/* Does the trace use admission: queue objects, or a pod or PodGroup naming a queue? */
bool gs_replay_admit_wanted(const struct gs_trace *t);

/* Builds the admission loop over cache and clock (borrowed, they outlive it)
 * with profile's filters for its placement check, and feeds it the trace's
 * queue objects, PodGroups and DRA objects. *out NULL when the trace does not
 * use admission. 0 or GS_E* with d filled. */
int gs_replay_admit_new(const struct gs_trace *t, struct gs_cache *cache, const struct gs_clock *clock,
                        const struct gs_profile *profile, const struct gs_replay_admit_hooks *hooks,
                        struct gs_replay_admit **out, struct gs_diags *d);
void gs_replay_admit_free(struct gs_replay_admit *a);

/* base with AdmissionHold added, for the scheduler (admission_loop.h). */
const struct gs_profile *gs_replay_admit_profile(struct gs_replay_admit *a, const struct gs_profile *base);

/* Pod i arrives. true: admission holds it (do not queue it); false: queue it. */
bool gs_replay_admit_arrive(struct gs_replay_admit *a, size_t i);
/* Pod i runs already when the trace starts: its workload's quota counts as reserved. */
void gs_replay_admit_running(struct gs_replay_admit *a, size_t i);
/* Pod i completed (or left): its share of the quota is released at the next cycle. */
void gs_replay_admit_gone(struct gs_replay_admit *a, size_t i);

/* One admission cycle at the clock's now: admitted pods go to the admitted
 * hook, evicted ones to the evicted hook and then back to admission, held
 * as a re-created pod is on the server. Workloads admitted, or GS_E*. */
int gs_replay_admit_cycle(struct gs_replay_admit *a);
/* Workloads waiting for admission. */
size_t gs_replay_admit_pending(const struct gs_replay_admit *a);
/* When the next admission tick is due after now (a cycle ran at now), or -1
 * when no workload waits. */
int64_t gs_replay_admit_next_tick(const struct gs_replay_admit *a, int64_t now);
/* Why admission still holds pod i, as one line (the lines of
 * gs_adm_loop_explain joined by "; "), malloc'd; NULL when admission does not
 * hold it. The replay logs it for pods never admitted, which would otherwise
 * end the run without a single event. */
char *gs_replay_admit_why(struct gs_replay_admit *a, size_t i);

/* The queue pod i names (its label, else its PodGroup's label or spec.queue),
 * or NULL when it does not go through admission. Borrowed from the trace. */
const char *gs_replay_admit_queue(const struct gs_replay_admit *a, size_t i);

#endif
