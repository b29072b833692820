/*
 * tenants.h - the multi-tenant experiment: a trace split across tenants,
 * replayed through admission (queues, fair share, reclaim) and the
 * scheduler, or through the scheduler alone as a FIFO baseline.
 *
 * Scenario, derived from any trace (openb in the evaluation): arrivals are
 * compressed by `speedup` and the cluster may be thinned to `node_fraction`
 * of its nodes, so the trace contends for GPUs; pod i goes to
 * tenant hash(seed, i) mod n; each tenant's arrivals are bunched into bursts
 * (every pod of a burst window arrives at the window's start, windows
 * shifted per tenant); a share of the multi-GPU pods of a tenant are grouped
 * with the next 1-3 such pods into a gang admitted all or nothing. Each
 * tenant is a queue under one root with weight w_k and a guarantee of
 * w_k / sum(w) of the cluster's GPUs, CPU and memory; borrowing is
 * unlimited, reclaim Any, and durations are known (the trace's), so backfill
 * estimates are exact.
 *
 * Metrics: per tenant the GPU share over time against its entitlement (the
 * water-filled fair share given the demand at that moment), Jain's fairness
 * index of used / entitled over tenants with demand (time-averaged over the
 * samples), waiting time (arrival to the last pod bound) percentiles for
 * small (<= 1 GPU) and large (>= 4 GPUs or a gang) workloads, preemptions.
 */
#ifndef GS_SIM_TENANTS_H
#define GS_SIM_TENANTS_H

#include "sim/sim.h"

#include <jansson.h>
#include <stdbool.h>

#define GS_TENANTS_MAX 8

struct gs_tenants_opts {
    int ntenants;                  /* 2..GS_TENANTS_MAX; 0: 3 */
    double weights[GS_TENANTS_MAX];/* 0: 1, 2, 1, 1, ... */
    uint64_t seed;
    bool admission;                /* false: every pod goes straight to the scheduler (FIFO baseline) */
    const char *policy;            /* placement policy; NULL: the default profile's scoring */
    double burst_s;                /* burst window; 0: 1800 */
    double gang_fraction;          /* multi-GPU pods starting a gang; 0: 0.3; <0: no gangs */
    double sample_s;               /* share sampling period; 0: 600 */
    double halflife_s;             /* fair-share usage half-life; 0: 3600 */
    double history_weight;         /* decayed history's weight in the queue order (admission.h); 0: 0.5, < 0: none */
    double starvation_s;           /* starvation guard wait; 0: 1800 */
    double speedup;                /* arrival times divided by this (load x speedup); 0: 1 */
    double node_fraction;          /* keep this share of the nodes (evenly spread); 0: 1 */
    /* Eviction rationing (admission.h); 0 takes admission's default, < 0 turns the rule off. */
    double min_runtime_s;          /* no eviction before a workload ran this long */
    double reclaim_wait_s;         /* a claimant reclaims only after pending this long */
    double impatient_share;        /* ... unless its queue's weighted share is below this (0: off) */
    int max_preemptions;           /* evictions of one workload per hour */
    double evict_charge;           /* share of the lost GPU-hours charged to the claimant */
    double hold_s;                 /* how long nodes freed by reclaim are held */
    double reserve_horizon_s;      /* reserve only for a start this close */
    bool reserve_under_share;      /* the reservation goes to the queue furthest below its share (admission.h) */
    bool share_gate;               /* queues at or above their share wait while one below finds no placement */
    bool pin_placement;            /* admitted GPU workloads bind where admission's check put them */
    bool pin_large;                /* ... only while a large workload waits for room (admission.h) */
    bool pin_above;                /* ... only while some queue is above its fair share (admission.h) */
    bool drain;                    /* whole-node drains for a queue below its share (admission.h) */
    bool drain_strict;             /* ... its own queue's other work backfills them only when ending before */
    int consolidate_moves;         /* moves of small workloads per gang pod to make whole nodes; 0: off */
    int consolidate_own;           /* ... moves of the gang's own queue's small workloads, unproven (admission.h) */
    bool reclaim_above_nominal;    /* the old reclaim rule: from any borrowing queue */
    bool global_victims;           /* the old victim choice: one global order, not node-wise */
    int victim_cost;               /* node-wise victims' ranking (admission.h); 0: least work lost */
    /* Per-queue status: a snapshot at queues_at_s (< 0: at the end) in the result. */
    bool want_queues;
    double queues_at_s;
};

struct gs_tenants_point {
    double t;
    int ntenants;
    double used[GS_TENANTS_MAX];     /* GPUs in use */
    double entitled[GS_TENANTS_MAX]; /* water-filled fair share, GPUs */
    double demand[GS_TENANTS_MAX];   /* GPUs used + pending */
    double jain;                     /* -1 when fewer than two tenants have demand */
};

struct gs_tenants_result {
    int ntenants;
    int64_t gpus, workloads, gangs, finished, preemptions;
    double weight[GS_TENANTS_MAX];
    double mean_share[GS_TENANTS_MAX];    /* time-averaged used / capacity while contended */
    double mean_entitled[GS_TENANTS_MAX]; /* time-averaged entitled / capacity while contended */
    double jain_mean, jain_min;
    double wait_small[3], wait_large[3];  /* p50, p90, p99 seconds */
    double wall_seconds;
    int64_t spared_min_runtime, spared_fair_share, spared_cap; /* claims where the rules protected a victim */
    int64_t reclaims_deferred;            /* claims that waited instead of reclaiming */
    int32_t max_workload_preemptions;
    double charged_gpu_hours;
    int64_t evictions, victim_searches, victim_searches_won; /* admission's counters */
    int64_t nodewise_won, nodewise_refused, nodewise_unproven;
    int64_t reservations, reservations_beyond_horizon;
    int64_t share_gated;           /* share gate: queue turns with GPU workloads held back */
    int64_t drains, drains_beyond_horizon; /* drain: made, and dropped past the horizon */
    int64_t consolidations, consolidation_moves; /* consolidate: gangs admitted, small workloads moved */
    int64_t consolidation_own, consolidation_own_waiting; /* ... of them the gang's own queue's; not placed at once */
    int64_t pins_expired;          /* pins that ran out before their pods were bound */
    int64_t claims_unplaced, evictions_unplaced; /* won claims not bound within their hold, and their evictions */
    double evicted_gpus;           /* GPUs the evicted workloads held, summed over evictions */
    double idle_share;                    /* time-averaged idle GPU share while contended */
    json_t *queues;                       /* gs_admission_queues_json snapshot when asked; caller decrefs */
};

/* Runs the scenario; sample (may be NULL) gets every sample point. 0 or GS_E* with d filled. */
int gs_tenants_run(const struct gs_trace *t, const struct gs_tenants_opts *o,
                   void (*sample)(void *ctx, const struct gs_tenants_point *p), void *ctx,
                   struct gs_tenants_result *res, struct gs_diags *d);

#endif
