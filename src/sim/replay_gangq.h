/*
 * replay_gangq.h - gang queueing in the replay experiment: which gang (a
 * PodGroup's pods, or a single pod) may enter the scheduling queue next, and
 * the gang accounting the replay reports (queueing delay per gang, GPU idle
 * while gangs wait, partial gangs).
 *
 * Without a queue mode (GS_GANGQ_SCHEDULER: zeroed options, the CLI's
 * default, and what auto picks without pod groups or with admission queues) every pod goes to
 * the scheduler at arrival and Coscheduling alone decides, as on the server:
 * small gangs may pass a large one indefinitely. The other modes hold a
 * workload until an admission rule lets it in, in order of priority (the
 * highest of its pods'), then of completion (minMember members arrived):
 *
 *  - GS_GANGQ_FIFO: strict FIFO of gangs. The head is let in when all its
 *    pods can be placed now (admission's placement check, placement.h, with
 *    the profile's filters on the live cache); nothing behind it passes.
 *  - GS_GANGQ_VOLCANO: Volcano's enqueue action. A workload is let in when
 *    its resources (GPU milli, CPU, memory summed over its pods) fit in the
 *    cluster's idle total, less what earlier admitted, unbound workloads
 *    asked; a workload that does not fit is passed by later ones. Nodes are
 *    not looked at (a sum can fit where no node does).
 *  - GS_GANGQ_RESERVE: FIFO with backfill (EASY backfill). The head is let
 *    in when it can be placed now; else it gets a reservation: running pods
 *    are released in order of their known end (bind time + duration, known
 *    in the simulator) on per-node free whole GPUs until a best-fit
 *    decreasing packing of the head's pods fits; that end is its shadow
 *    start and the nodes of that packing are reserved. A later workload is
 *    let in when it can be placed now on the other nodes, or when it can be
 *    placed now and its run ends before the shadow start (the former is
 *    pinned to the checked nodes by GangQueuePin, below). CPU, memory and
 *    required topology are left to the placement check (the packing counts
 *    GPUs only), so a reservation can be optimistic; it is recomputed every
 *    cycle.
 *  - GS_GANGQ_RESERVE_EXACT: reserve, with the shadow start found by the
 *    placement check itself: running pods (and those this cycle's checks
 *    assumed) are taken out of the cache in order of their end until the
 *    check places the head; the nodes it chose are reserved and every pod
 *    goes back (the cache ends as it began). CPU, memory, topology and a
 *    gang's required domain are then the scheduler's own filters. Checks
 *    of a gang with a required domain (gpusched.io/required-topology, or
 *    the PodGroup's topology key) try each domain that has the GPUs,
 *    tightest first: the check's Coscheduling instance knows no PodGroup,
 *    so without this it places the members across domains and lets in a
 *    gang the scheduler cannot place.
 *  - GS_GANGQ_RESERVE_PINNED: reserve-exact, and every workload let in is
 *    pinned to the nodes its check chose (not only those beside the
 *    reservation), so the scheduler places what the queue planned.
 *  - GS_GANGQ_VOLCANO_RESERVE: Volcano's enqueue (unchecked) until the
 *    first workload in line that does not fit has waited 600 s; from that
 *    workload on, reserve-pinned's rules (it is the head).
 *  - GS_GANGQ_BACKFILL: reserve-pinned with a slack: a workload may also be
 *    let in when it ends within GS_GANGQ_SLACK_S of the head's first shadow
 *    start (its deadline, set once), so small gangs pass a large one by a
 *    bounded delay of the head. What `--gang-queue auto` (GS_GANGQ_AUTO)
 *    picks for a trace with pod groups and no admission queues.
 *
 * fifo's check searches the required domain as reserve-exact's does.
 * A workload let in enters the scheduling queue whole; Coscheduling then
 * binds it all or nothing. Placement checks of one cycle stay assumed in
 * the cache until the cycle ends, so later checks see earlier admissions;
 * the scheduler then places the pods with its own policy. Everything is
 * deterministic: orders are by arrival, ties by trace index.
 */
#ifndef GS_SIM_REPLAY_GANGQ_H
#define GS_SIM_REPLAY_GANGQ_H

#include "core/clock.h"
#include "sched/cache.h"
#include "sched/framework.h"
#include "sched/plugin.h"
#include "sim/sim.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gs_gangq_mode {
    GS_GANGQ_SCHEDULER,
    GS_GANGQ_FIFO,
    GS_GANGQ_VOLCANO,
    GS_GANGQ_RESERVE,
    GS_GANGQ_RESERVE_EXACT,
    GS_GANGQ_RESERVE_PINNED,
    GS_GANGQ_VOLCANO_RESERVE,
    GS_GANGQ_BACKFILL,
    GS_GANGQ_AUTO, /* backfill when the trace has pod groups and no admission queues, else scheduler */
    GS_GANGQ_NMODES
};

/* The backfill mode's slack (s): how far past its first shadow start a
 * head may be pushed by workloads let in before it. */
#define GS_GANGQ_SLACK_S 450

/* A mode's name ("scheduler", "fifo", ...) -> mode; -1 when none of them. */
int gs_gangq_mode_parse(const char *s);
const char *gs_gangq_mode_name(enum gs_gangq_mode m);
/* "scheduler, fifo, ... or X" into buf (truncated to len). */
void gs_gangq_mode_list(char *buf, size_t len);
/* Does the mode pin workloads it lets in (needs GangQueuePin in the profile)? */
bool gs_gangq_mode_pins(enum gs_gangq_mode m);
/* GS_GANGQ_AUTO -> GS_GANGQ_BACKFILL when some pod of t names a pod group
 * and the trace has no admission queues (admission), else
 * GS_GANGQ_SCHEDULER; every other mode -> itself. */
enum gs_gangq_mode gs_gangq_resolve(enum gs_gangq_mode m, const struct gs_trace *t, bool admission);

struct gs_gangq;

/* Pod i was let in: queue it for scheduling. */
typedef void (*gs_gangq_release_fn)(void *ctx, size_t i);

/* Groups the trace's pods into workloads (PodGroup members by their group
 * key "ns/name", minMember from the trace's PodGroup, else the members the
 * trace has; every other pod alone). duration_ns: per pod, -1 = forever.
 * The placement check uses profile's filters over cache (both borrowed).
 * 0 or GS_E* with d filled. */
int gs_gangq_new(enum gs_gangq_mode mode, const struct gs_trace *t, const int64_t *duration_ns,
                 struct gs_cache *cache, const struct gs_clock *clock, const struct gs_profile *profile,
                 gs_gangq_release_fn release, void *ctx, struct gs_gangq **out, struct gs_diags *d);
void gs_gangq_free(struct gs_gangq *q);
/* Slack of a reserve-family mode in seconds (>= 0; the mode's own otherwise), before the first cycle. */
void gs_gangq_set_slack(struct gs_gangq *q, int64_t slack_s);

/* Pod i arrives at now. true: the queue holds it (do not schedule it). */
bool gs_gangq_arrive(struct gs_gangq *q, size_t i, int64_t now);
/* Pod i runs when the trace starts (on node, whole GPUs gpus, until end_ns, -1 never). */
void gs_gangq_prebound(struct gs_gangq *q, size_t i, int32_t node, int32_t gpus, int64_t end_ns);
/* Pod i was bound on node (whole GPUs gpus) at now. */
void gs_gangq_bound(struct gs_gangq *q, size_t i, int32_t node, int32_t gpus, int64_t now);
/* Pod i left its node: completed (done true) or evicted (it waits again, in the scheduler). */
void gs_gangq_left(struct gs_gangq *q, size_t i, bool done);
/* One admission cycle at now: releases workloads through the hook. Number
 * released, or GS_E*. */
int gs_gangq_cycle(struct gs_gangq *q, int64_t now);

/* End of an instant: counts gangs bound below minMember (none of whose pods
 * completed) among those touched since the last call. */
void gs_gangq_check(struct gs_gangq *q);

struct gs_gangq_stats {
    int64_t gangs;              /* workloads with more than one pod */
    int64_t partial;            /* instants a gang ran with fewer than minMember pods */
    int64_t held;               /* workloads held at least once by the queue */
    int64_t reservations;       /* cycles that made a reservation */
    int64_t backfilled;         /* workloads let in past a reserved head */
    double gang_delay_p50, gang_delay_p99; /* arrival of the first member to the last bound, s */
    int64_t gangs_started;
};

/* The filter GangQueuePin and its args (reserve mode): a workload let in
 * beside the reservation is pinned, for the instant it is let in, to the
 * nodes the placement check chose, so the scheduler does not put it on a
 * reserved node. Append the plugin to the scheduler's profile with these
 * args (the caller owns the reference); without it the pins are not kept. */
extern const struct gs_plugin gs_gangq_pin_plugin;
json_t *gs_gangq_plugin_args(struct gs_gangq *q);

/* Fills s; gang delays over the gangs that started. */
void gs_gangq_stats(const struct gs_gangq *q, struct gs_gangq_stats *s);
/* Arrived gang pods not bound now. */
int64_t gs_gangq_gang_pods_waiting(const struct gs_gangq *q);

#endif
