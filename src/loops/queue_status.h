/*
 * queue_status.h - admission's per-queue numbers written onto the queue
 * objects themselves, as Kueue's controller writes ClusterQueue status.
 *
 * The admission loop (admission_loop.c) calls gs_qstatus_publish() after a
 * cycle with gs_admission_queues_json()'s "queues" array. Each ClusterQueue
 * (kueue.x-k8s.io) and Queue (scheduling.gpusched.io) that has an object in
 * the store gets a status in the shape its users know:
 *   ClusterQueue: pendingWorkloads, reservingWorkloads, admittedWorkloads,
 *                 fairSharing.weightedShare (Kueue's integer: share x 1000)
 *                 and an Active condition;
 *   Queue:        Volcano's state, pending, running, allocated;
 * and both an "admission" block with what neither project reports: nominal,
 * borrowed, lent and used quota, the fair share, the decayed GPU-hours
 * ledger, preemption counts, and the first pending workloads in line with
 * their estimated start.
 *
 * A status is written only when it differs from the one last written, and
 * at most once per interval, so a busy cluster does not turn queue status
 * into a write storm. Values that drift continuously (the decayed ledger)
 * are rounded for that comparison.
 *
 * Writing status emits MODIFIED events for the queue objects, which the
 * admission loop also follows: gs_qstatus_spec_equal() tells it that only
 * status or bookkeeping metadata changed, so it does not rebuild.
 */
#ifndef GS_CONTROL_QUEUE_STATUS_H
#define GS_CONTROL_QUEUE_STATUS_H

#include "control/store.h"
#include "informer/source.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct gs_qstatus {
    json_t *written;    /* store key -> status last written */
    int64_t next_ns;    /* no publish before this (clock ns) */
    int64_t interval_ns;/* 0: 2 s */
};

void gs_qstatus_init(struct gs_qstatus *q);
void gs_qstatus_free(struct gs_qstatus *q);

/* The status object for one entry of gs_admission_queues_json()'s "queues"
 * (kind "ClusterQueue" or "Queue"); NULL for other kinds (Root, Cohort).
 * Estimated starts are on admission's clock: clock_s is that clock's now
 * and wall_s the wall time at that instant, to turn them into timestamps.
 * Conditions carry no lastTransitionTime yet (publish adds it). New reference. */
json_t *gs_qstatus_build(const json_t *entry, double clock_s, double wall_s);

/* Writes the status of every queue in view (gs_admission_queues_json()'s
 * object) whose object exists and whose status changed; does nothing before
 * the interval since the last publish has passed (unless force). Returns the
 * number of objects written. */
int gs_qstatus_publish(struct gs_qstatus *q, struct gs_source *src, const json_t *view, int64_t now_ns, bool force);

/* Do two versions of a queue object differ only in status and in metadata
 * the store maintains (resourceVersion, generation, managedFields)? */
bool gs_qstatus_spec_equal(const json_t *a, const json_t *b);

#endif
