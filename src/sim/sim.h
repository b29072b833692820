/*
 * sim.h - the trace simulator: the real scheduler on a simulated clock.
 *
 * A trace (nodes + pods) comes from the openb CSVs or from Kubernetes
 * manifests. Two experiments run it through the same framework code the
 * server uses:
 *  - fgd: the FGD paper's procedure (seeded shuffle, inflation to tune x GPU
 *    capacity, each pod tried once, no departures), sampling allocation and
 *    fragmentation after every pod;
 *  - replay: pods arrive and leave at their trace times, failures wait in the
 *    scheduling queue and are retried as resources free up.
 * Results stream to a sink (events, samples) so outputs (events.jsonl,
 * series.csv, report.html) are written by the caller without holding the run
 * in memory, and a summary is returned.
 */
#ifndef GS_SIM_SIM_H
#define GS_SIM_SIM_H

#include "core/error.h"
#include "core/object.h"
#include "sched/cache.h"

#include <stdbool.h>
#include <stdint.h>

/* A loaded trace. Pods are in-memory objects (doc may be NULL); arrival and
 * duration in seconds (-1 duration: never leaves). */
struct gs_trace_pod {
    struct gs_pod *pod;     /* owned */
    double arrival;         /* seconds from trace start */
    double duration;        /* seconds, -1 = runs forever */
    /* A pod already running when the trace starts (a snapshot of a live
     * cluster): the node it runs on and its devices, placed before the first
     * instant without a decision. NULL node: a pod still to arrive. started:
     * seconds (<= 0) relative to the trace start; duration then counts from it. */
    char *node;             /* owned, NULL = not bound */
    uint64_t gpus;          /* GPU indices mask on node */
    int32_t milli;          /* share per GPU */
    double started;
};

struct gs_object;

struct gs_trace {
    struct gs_node_spec *nodes; /* owned, including name/model/labels/gpu_numa/gpu_nvlink */
    struct gs_labels *node_labels; /* owned, one per node (nodes[i].labels points here) */
    size_t nnodes;
    struct gs_trace_pod *pods;  /* owned */
    size_t npods;
    /* Other objects of a manifest scenario (PodGroup, NodeResourceTopology),
     * owned; replay hands PodGroups to the scheduler and NRTs to the cache. */
    struct gs_object **objects;
    size_t nobjects;
    /* ResourceSlice, DeviceClass, ResourceClaim, ResourceClaimTemplate and
     * DeviceTaintRule documents of a manifest scenario (owned references),
     * checked by the DRA decoders at load; replay feeds them to the cache
     * (sim_dra.c). */
    json_t **dra;
    size_t ndra;
    /* Seconds after the start at which each node becomes schedulable (its
     * GPU stack walked under a ClusterPolicy); NULL = every node is ready
     * from the start. Owned, nnodes entries. */
    double *node_ready_at;
};

/* openb: node CSV (sn,cpu_milli,memory_mib,gpu,model) and pod CSV
 * (name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,...,creation_time,
 * deletion_time,...). Problems reported as "FILE:LINE: column: message". */
int gs_trace_load_openb(const char *node_csv, const char *pod_csv, struct gs_trace *out, struct gs_diags *d);
/* Manifests: Node documents (cluster file), Pod documents with the
 * sim.gpusched.io/ annotations (workload file), and in either every other
 * kind the server accepts (trace_manifest.c, trace_manifest.h). */
int gs_trace_load_manifests(const char *cluster_path, const char *workload_path, struct gs_trace *out,
                            struct gs_diags *d);
void gs_trace_free(struct gs_trace *t);

enum gs_sim_mode { GS_SIM_FGD, GS_SIM_REPLAY };

struct gs_sim_opts {
    enum gs_sim_mode mode;
    /* Placement policy plugin name (e.g. "FGD", "BestFit"). NULL, "" or
     * GS_SIM_PROFILE runs the profile as the server does (the server's
     * default profile, or --config's), placement included: replay runs all
     * of it, fgd its PreScore, Score and Reserve plugins with the
     * experiment's filters (fgd_experiment.c). */
    const char *policy;
    uint64_t seed;
    double tune;               /* fgd: inflate GPU demand to tune x capacity (default 1.3) */
    const char *config_path;   /* optional scheduler config (profiles); NULL = built-in */
    int gang_queue;            /* replay: enum gs_gangq_mode (sim/replay_gangq.h), 0 = the scheduler's own */
    int64_t gang_slack_s;      /* replay: a reserve-family gang queue's slack, s; 0 = the mode's own */
    /* fgd: also compute the upper bound on allocation at 100% arrived
     * (sim/bound.h) into gs_sim_result.bound_pct. */
    bool bound;
    /* fgd: how many pods queued behind the current one a policy may read
     * (gs_handle.queued): the next ones of the sequence, as a scheduler whose
     * queue holds that many waiting pods sees them. 0: no queue shown. */
    int queue_window;
};

/* The CLI's default queue window of the fgd experiment. */
#define GS_SIM_QUEUE_WINDOW 8

/* The policy name of a run that places with the server's profile (no policy). */
#define GS_SIM_PROFILE "profile"

enum gs_sim_event_type { GS_SIM_SCHEDULED, GS_SIM_FAILED, GS_SIM_PREEMPTED, GS_SIM_COMPLETED };

struct gs_sim_event {
    double t;                  /* seconds */
    enum gs_sim_event_type type;
    const char *pod;           /* "ns/name" */
    const char *node;          /* NULL when none */
    uint64_t gpus;             /* GPU indices mask */
    int32_t milli;             /* share per GPU */
    const char *reason;        /* diagnosis for failed, NULL otherwise */
    const json_t *claims;      /* scheduled: [{claim, allocation}] of the pod's resource claims, NULL none */
    const char *queue;         /* the pod's queue when admission runs (LocalQueue or Queue name), NULL otherwise */
    const char *group;         /* its PodGroup or Workload "ns/name", NULL when none */
};

/* One point of the time series (after every pod in fgd, per event time in replay). */
struct gs_sim_sample {
    double t;
    int64_t pods_arrived, pods_scheduled, pods_running, pods_pending;
    int64_t arrived_milli;     /* GPU milli requested by arrived pods */
    int64_t used_milli;        /* GPU milli allocated */
    int64_t frag_milli;        /* fragmented GPU milli for the target workload */
    double arrived_pct, alloc_pct, frag_ratio; /* 0..100 */
};

struct gs_sim_sink {
    void (*event)(void *ctx, const struct gs_sim_event *e);   /* may be NULL */
    void (*sample)(void *ctx, const struct gs_sim_sample *s); /* may be NULL */
    void (*progress)(void *ctx, double fraction);             /* may be NULL */
    void *ctx;
};

struct gs_sim_result {
    char policy[64];
    uint64_t seed;
    int64_t nodes, gpus;
    int64_t pods_arrived, pods_scheduled;
    double alloc_pct_at_100;   /* allocation % when arrived reaches 100% of capacity (fgd) */
    double alloc_pct_final;
    double frag_ratio_at_80;   /* fragmentation ratio % when arrived reaches 80% */
    double wall_seconds;
    double delay_p50, delay_p90, delay_p99; /* replay: queueing delay seconds */
    int64_t pods_preempted;    /* replay: evictions by preemption */
    /* replay, gangs (sim/replay_gangq.h): workloads of more than one pod,
     * arrival of the first member to the last bound (s), GPU-hours idle
     * while a gang pod waited and those hours' share of the capacity, and
     * instants a gang ran below minMember (must be 0). */
    int64_t gangs, gangs_started, partial_gangs, gang_reservations, gang_backfilled;
    int gang_queue;            /* the gang queue mode that ran (gs_sim_opts.gang_queue, auto resolved) */
    double gang_delay_p50, gang_delay_p99, gang_wait_hours, gang_idle_gpu_hours, gang_idle_frac;
    bool has_bound;            /* fgd with gs_sim_opts.bound: bound_pct is set */
    double bound_pct;          /* upper bound on alloc_pct_at_100 for any placer (sim/bound.h) */
};

/* Runs o->mode (dispatch to the two below). */
int gs_sim_run(const struct gs_trace *t, const struct gs_sim_opts *o, const struct gs_sim_sink *sink,
               struct gs_sim_result *res, struct gs_diags *d);

/* The two experiments (fgd_experiment.c, replay.c). Same contract as gs_sim_run. */
int gs_sim_run_fgd(const struct gs_trace *t, const struct gs_sim_opts *o, const struct gs_sim_sink *sink,
                   struct gs_sim_result *res, struct gs_diags *d);
int gs_sim_run_replay(const struct gs_trace *t, const struct gs_sim_opts *o, const struct gs_sim_sink *sink,
                      struct gs_sim_result *res, struct gs_diags *d);

/* Features of the trace the chosen experiment and profile do not run
 * (PodGroups without Coscheduling, queues named but never defined, claims
 * without DynamicResources, pods for a scheduler the replay does not run,
 * gangs or queues in the fgd experiment): one
 * line each in warnings (path: the feature; msg: the line to show, naming
 * the profile and what to do). 0 when it could check (warnings or not), or
 * the error building the profile would give, with d filled. */
int gs_sim_check(const struct gs_trace *t, const struct gs_sim_opts *o, struct gs_diags *warnings,
                 struct gs_diags *d);

#endif
