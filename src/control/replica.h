/*
 * replica.h - one leader among several `gpusched server` replicas on one
 * shared store (etcd): who runs the control loops, and the fence that keeps
 * a deposed leader from writing.
 *
 * Every replica serves the API from its own watch cache of the store. Only
 * one runs the loops that write on their own initiative (node lifecycle,
 * the GPU stack operator, the namespace controller, the Event TTL sweep,
 * and the scheduler's bindings and conditions). The replicas elect it with
 * kube/leader.h on the Lease kube-system/gpusched-control-plane, written
 * through the API's store handle, so the election has client-go's rules:
 * a holder is replaced only after its record stayed unchanged for the lease
 * duration as seen by the replica taking over, and a leader stops writing
 * (may_write) at its renew deadline, before anyone can take over.
 *
 * That timing argument needs a process that runs. A leader paused longer
 * than its lease (SIGSTOP, a stalled VM) wakes with threads in the middle of
 * writes. So the loops write through a second store handle carrying a
 * fence: after each successful write of the Lease this replica sets the
 * fence to the Lease's new resourceVersion (etcd: its mod_revision), and
 * from then on every write through that handle also requires the Lease to
 * still be at that version. Once another replica writes the Lease, every
 * write of the old leader fails as a conflict, whatever its threads think.
 * While not leading the fence is closed (GS_REPLICA_FENCE_CLOSED, a version
 * the Lease never has), so a follower's handle writes nothing at all.
 *
 * The loops start on a worker thread when this replica becomes leader and
 * stop when it stops leading (the fence is closed first, synchronously, on
 * the elector's thread). They list and watch from scratch on every start.
 *
 * Tests drive it without threads on a fake clock: gs_replica_tick makes one
 * election attempt and applies the start or stop it implies at once.
 */
#ifndef GS_CONTROL_REPLICA_H
#define GS_CONTROL_REPLICA_H

#include "core/clock.h"
#include "core/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_source;
struct gs_mbuf;
struct gs_leader;

#define GS_REPLICA_LEASE_NS "kube-system"
#define GS_REPLICA_LEASE_NAME "gpusched-control-plane"
/* The Lease's store key (resources.h), what the fence compares. */
#define GS_REPLICA_LEASE_KEY "leases.coordination.k8s.io/" GS_REPLICA_LEASE_NS "/" GS_REPLICA_LEASE_NAME
/* A fence no write passes: no key ever reaches this version. */
#define GS_REPLICA_FENCE_CLOSED INT64_MAX

struct gs_replica_opts {
    struct gs_source *lease_source; /* borrowed: where the Lease is read and written (never fenced) */
    const char *identity;           /* unique among the replicas (copied); NULL: HOSTNAME_PID */
    int64_t lease_duration_ns;      /* 0: 15 s */
    int64_t renew_deadline_ns;      /* 0: 10 s */
    int64_t retry_period_ns;        /* 0: 2 s */
    const struct gs_clock *clock;   /* NULL: the real clock; a fake one for gs_replica_tick */
    uint64_t seed;
    /* Sets the fence of the loops' store handle to the Lease (key) at
     * version rv; GS_REPLICA_FENCE_CLOSED: nothing passes. Called on the
     * elector's thread; a failure is logged (the loops' writes then fail
     * on their own). NULL: no fence (a store without one). */
    int (*set_fence)(void *ctx, const char *key, int64_t rv);
    /* Start and stop the leader's loops. start runs when this replica
     * becomes leader (an error is logged and start is tried again at the
     * next renewal); stop when it stops leading or the replica is freed,
     * only after a successful start. Called on the worker thread, or in
     * gs_replica_tick. */
    int (*start)(void *ctx);
    void (*stop)(void *ctx);
    void *ctx;
};

struct gs_replica;

/* Checks the options (each problem into d, naming the flag) and makes the
 * replica; no request yet. 0, GS_EINVAL, GS_ENOMEM. */
int gs_replica_new(const struct gs_replica_opts *o, struct gs_replica **out, struct gs_diags *d);
/* Starts the elector and the worker threads. 0 or GS_ENOMEM. */
int gs_replica_start(struct gs_replica *r);
/* Tests: one election attempt at the clock's now, then the loops' start
 * or stop it implies, in this thread. true: leading after it. */
bool gs_replica_tick(struct gs_replica *r);
/* Stops the loops (if running), closes the fence, releases the Lease,
 * joins the threads and frees. NULL is fine. */
void gs_replica_free(struct gs_replica *r);

/* The scheduler loop's may_write hook (ctx: the struct gs_replica). */
bool gs_replica_may_write(void *ctx);
bool gs_replica_leading(struct gs_replica *r);
/* This replica's identity and the holder last seen ("" none), borrowed
 * until the next call from the same thread. */
const char *gs_replica_identity(const struct gs_replica *r);
void gs_replica_holder(struct gs_replica *r, char *buf, size_t len);
/* The elector (borrowed), for its counters. */
struct gs_leader *gs_replica_leader(struct gs_replica *r);
/* The fence value last set (0 before any). */
int64_t gs_replica_fence(struct gs_replica *r);
/* Appends gpusched_leader{replica="ID"} 1|0 and the elector's counters. */
void gs_replica_metrics(struct gs_replica *r, struct gs_mbuf *b);
/* /readyz's note: "leader ID" or "follower ID (leader: HOLDER)" (malloc'd). */
char *gs_replica_ready_note(struct gs_replica *r);

#endif
