/*
 * leader.h - leader election on a coordination.k8s.io/v1 Lease, with
 * client-go's semantics, through a gs_source.
 *
 * Several replicas of `gpusched scheduler` run; one binds. Each replica is
 * an elector with its own identity. The Lease's spec is the election record:
 * holderIdentity, leaseDurationSeconds, acquireTime, renewTime (RFC 3339
 * micro times), leaseTransitions. Every retry period an elector reads the
 * Lease and writes it back with the resourceVersion it read (the source's
 * mutate: a 409 means another replica wrote first, and the read-modify-write
 * runs again on the new state):
 *
 *   - absent: it creates the Lease holding it (leaseTransitions 0);
 *   - held by another: it waits. A lease counts as expired only when its
 *     record has not changed for leaseDurationSeconds as observed HERE: the
 *     local time at which this elector last saw the record change, never the
 *     remote renewTime (clocks of replicas need not agree, as in client-go);
 *   - expired, released (holderIdentity empty) or its own: it writes itself
 *     as holder with renewTime now; acquireTime now and leaseTransitions + 1
 *     when the holder changes.
 *
 * The leader renews every retry period. If no renewal succeeded for
 * renewDeadline it steps down. gs_leader_may_write answers true only while
 * leading AND now < (start of the last successful renewal) + renewDeadline:
 * since renewDeadline < leaseDuration, and another replica can take over
 * only leaseDuration after it saw our last renewal, a replica cut off from
 * the API server has stopped writing before anyone else can start. That
 * function is the scheduler loop's may_write hook.
 *
 * Stopping releases a held lease as client-go's ReleaseOnCancel: holder
 * cleared, leaseDurationSeconds 1, renewTime and acquireTime now,
 * leaseTransitions kept, so a follower takes over at its next retry instead
 * of waiting out the lease.
 *
 * Time comes only from the clock (core/clock.h), so the unit tests drive two
 * electors on a fake clock with gs_leader_tick; gs_leader_start runs ticks
 * on a thread (retry period, with client-go's 1.2 jitter while following).
 */
#ifndef GS_KUBE_LEADER_H
#define GS_KUBE_LEADER_H

#include "core/clock.h"
#include "core/error.h"

#include <stdbool.h>
#include <stdint.h>

struct gs_source;

struct gs_leader_opts {
    struct gs_source *source;     /* borrowed: where the Lease lives */
    const char *ns, *name;        /* the Lease: kube-system/gpusched by default (copied) */
    const char *identity;         /* this replica, unique among them (copied) */
    int64_t lease_duration_ns;    /* 0: 15 s; whole seconds on the Lease */
    int64_t renew_deadline_ns;    /* 0: 10 s; < lease duration */
    int64_t retry_period_ns;      /* 0: 2 s; renew deadline > 1.2 x this */
    const struct gs_clock *clock; /* NULL: the real clock; else its time is also the wall time written (tests) */
    uint64_t seed;                /* jitter of the follower's retries */
    /* Called on the elector's thread when leadership starts (true) or ends. Optional. */
    void (*on_change)(void *ctx, bool leading);
    void *ctx;
    /* Called on the elector's thread after each successful write of the
     * Lease (acquire or renew) with the resourceVersion it got, before
     * may_write answers true for that write: what fences the leader's other
     * writes to this term (control/replica.h). Optional; gets ctx. */
    void (*on_renew)(void *ctx, int64_t rv);
};

struct gs_leader_stats {
    bool leading;
    uint64_t acquired;          /* times this elector became leader */
    uint64_t lost;              /* times it stopped leading (deadline, another holder, release) */
    uint64_t renew_failures;    /* writes that failed while leading */
    int64_t lease_transitions;  /* leaseTransitions of the record last seen */
    char holder[256];           /* holderIdentity last seen ("" none) */
    int64_t last_contact_ns;    /* clock time of the last attempt the API server answered (0: none) */
};

struct gs_leader;

/* Checks the options (each problem into d, naming the flag's field) and
 * makes an elector; no request yet. 0, GS_EINVAL, GS_ENOMEM. */
int gs_leader_new(const struct gs_leader_opts *o, struct gs_leader **out, struct gs_diags *d);
/* One attempt to acquire or renew, at the clock's now. true: leading after it. */
bool gs_leader_tick(struct gs_leader *l);
/* Starts the thread that ticks every retry period. 0 or GS_ENOMEM. */
int gs_leader_start(struct gs_leader *l);
/* Stops the thread (if started) and releases a held lease. Idempotent. */
void gs_leader_stop(struct gs_leader *l);
/* Gives up leadership now (stops writing first, then clears the holder). */
void gs_leader_release(struct gs_leader *l);
/* Stops, releases and frees. NULL is fine. */
void gs_leader_free(struct gs_leader *l);

bool gs_leader_is_leader(struct gs_leader *l);
/* The may_write hook: ctx is the struct gs_leader. See above. */
bool gs_leader_may_write(void *ctx);
void gs_leader_stats(struct gs_leader *l, struct gs_leader_stats *out);

#endif
