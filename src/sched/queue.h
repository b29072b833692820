/*
 * queue.h - the scheduling queue: active heap, backoff queue, unschedulable set.
 *
 * activeQ is a binary heap ordered by the profile's QueueSort. A pod that
 * failed goes to backoffQ (failure with Error, or after a cluster event moved
 * it) with exponential backoff: initial 1 s, doubling per attempt, max 10 s
 * (kube's defaults; configurable), or to the unschedulable set when no node
 * fit. Cluster events (node added, pod deleted, device freed, ...) move
 * unschedulable pods back: to backoffQ when still backing off, else activeQ;
 * a pod an event moved into backoffQ is tried as soon as activeQ is empty
 * (kube's SchedulerPopFromBackoffQ). Pods staying unschedulable longer than
 * max_unschedulable_ns (default 5 min) are flushed back. All time through
 * the clock.
 */
#ifndef GS_SCHED_QUEUE_H
#define GS_SCHED_QUEUE_H

#include "core/clock.h"
#include "sched/plugin.h"

#include <stdbool.h>
#include <stddef.h>

enum gs_cluster_event {
    GS_EV_NODE_ADDED = 1 << 0,
    GS_EV_NODE_UPDATED = 1 << 1,
    GS_EV_POD_DELETED = 1 << 2,   /* resources freed */
    GS_EV_DEVICE_FREED = 1 << 3,  /* GPU share released or GPU healthy again */
    GS_EV_POD_ADDED = 1 << 4,     /* e.g. a gang member arrived */
    GS_EV_PODGROUP = 1 << 5,      /* a PodGroup was added or changed */
    GS_EV_POD_BOUND = 1 << 6,     /* a pod got a node (pod affinity may now be met) */
    GS_EV_ALL = 0xff,
};

struct gs_queue_opts {
    int64_t initial_backoff_ns;     /* default 1 s */
    int64_t max_backoff_ns;         /* default 10 s */
    int64_t max_unschedulable_ns;   /* default 300 s */
};

struct gs_sched_queue;

/* less orders activeQ (QueueSort); ctx is passed back. clock borrowed. */
struct gs_sched_queue *gs_sched_queue_new(const struct gs_clock *clock, const struct gs_queue_opts *opts,
                                          bool (*less)(void *ctx, const struct gs_queued_pod *,
                                                       const struct gs_queued_pod *),
                                          void *ctx);
void gs_sched_queue_free(struct gs_sched_queue *q);

/* Adds a new pod (borrowed until deleted or popped for good) to activeQ. GS_EEXIST if present. */
int gs_sched_queue_add(struct gs_sched_queue *q, const struct gs_pod *pod);
/* Removes a pod wherever it is. GS_ENOENT when absent. */
int gs_sched_queue_delete(struct gs_sched_queue *q, const char *pod_key);
/* gs_sched_queue_delete then gs_sched_queue_add of pod under the same key,
 * in place: the same heap operations in the same order and the same fresh
 * entry (new seq, enqueue time now, no attempts), without freeing and
 * allocating it. GS_ENOENT (nothing added) when the key is not queued. */
int gs_sched_queue_reactivate(struct gs_sched_queue *q, const struct gs_pod *pod, const char *pod_key);
/* gs_sched_queue_reactivate of each pods[i] in turn (each under its own key;
 * pods not queued are left alone), with the same result while QueueSort is
 * a strict order that reads seq only through its order (ties broken by seq,
 * as every QueueSort plugin does). A batch that repeats the previous one
 * less the entries that left activeQ since, at the same clock time and with
 * nothing added or reactivated in between (a gang's unplaced siblings, at
 * each member's Permit), renumbers their seqs in place: O(n) pointer
 * compares, no heap work. pods borrowed for the call. Returns how many were
 * reactivated. */
size_t gs_sched_queue_reactivate_many(struct gs_sched_queue *q, const struct gs_pod *const *pods, size_t n);
/* How many reactivate_many calls were answered by renumbering (for tests). */
size_t gs_sched_queue_batches_kept(const struct gs_sched_queue *q);
/* Pops the head of activeQ after flushing due backoffs; false when empty.
 * The popped pod is "in flight" until requeued or done. */
bool gs_sched_queue_pop(struct gs_sched_queue *q, struct gs_queued_pod *out);
/* After a failed attempt: unschedulable=true parks it in the unschedulable
 * set (until an event in event_mask), else backoffQ. */
int gs_sched_queue_requeue(struct gs_sched_queue *q, const struct gs_queued_pod *qp, bool unschedulable,
                           unsigned event_mask);
/* Queueing hints for pod events (kube's QueueingHintFn): may the event about
 * pod (arrived: it got a node; else it left one) make waiting schedulable? */
typedef bool (*gs_queue_hint_fn)(void *ctx, const struct gs_pod *waiting, const struct gs_pod *pod, bool arrived);
/* Sets the hint the queue asks for the events a pod waits for through it. */
void gs_sched_queue_set_hint(struct gs_sched_queue *q, gs_queue_hint_fn fn, void *ctx);
/* gs_sched_queue_requeue, and of the events in event_mask, those in checked
 * move the pod only when an event names a pod the hint says helps
 * (gs_sched_queue_on_pod_event); gs_sched_queue_on_event, which names no
 * pod, moves it as any other. */
int gs_sched_queue_requeue_hinted(struct gs_sched_queue *q, const struct gs_queued_pod *qp, bool unschedulable,
                                  unsigned event_mask, unsigned checked);
/* A cluster event about one pod: moves the unschedulable pods waiting for
 * it, asking the hint for those that wait through it. Costs O(1) when no
 * unschedulable pod waits for ev. Returns how many moved. */
size_t gs_sched_queue_on_pod_event(struct gs_sched_queue *q, enum gs_cluster_event ev, const struct gs_pod *pod,
                                   bool arrived);
/* Pod scheduled (or gone): drop in-flight tracking. */
void gs_sched_queue_done(struct gs_sched_queue *q, const char *pod_key);
/* A cluster event: moves the unschedulable pods waiting for it. Returns how many moved. */
size_t gs_sched_queue_on_event(struct gs_sched_queue *q, enum gs_cluster_event ev);
/* Earliest time a backoff pod becomes ready, or -1 when none (simulator's next wake-up). */
int64_t gs_sched_queue_next_ready(const struct gs_sched_queue *q);

size_t gs_sched_queue_active_len(const struct gs_sched_queue *q);
size_t gs_sched_queue_backoff_len(const struct gs_sched_queue *q);
size_t gs_sched_queue_unschedulable_len(const struct gs_sched_queue *q);

#endif
