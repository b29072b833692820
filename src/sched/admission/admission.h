/*
 * admission.h - layer 2 admission: which workload may enter the scheduling
 * queue next, on top of quotas, fair share, placement, reclaim and backfill.
 *
 * A workload is one pod or a whole PodGroup. It is submitted to a leaf of the
 * queue tree (label kueue.x-k8s.io/queue-name -> LocalQueue -> ClusterQueue,
 * or a Volcano queue by name) and stays pending until gs_admission_cycle()
 * admits it, all or nothing: quota for every pod is reserved at once and the
 * caller then hands the pods to the scheduler. Admission requires
 *   1. quota: the request fits the leaf's available quota on one flavor per
 *      resource group (flavors tried in order; uncovered resources of a
 *      ClusterQueue make it inadmissible), and
 *   2. placement: the pods can be placed now on nodes of that flavor, by the
 *      scheduler's own filters on the cache (placement.h).
 * Which workload goes first: the leaf picked by fairshare.h (priority, then
 * furthest below its fair share); inside a leaf by priority, then creation
 * order. StrictFIFO stops at a head that does not fit; BestEffortFIFO lets
 * later workloads past it.
 *
 * Reclaim and preemption, when a workload does not fit: victims are admitted
 * workloads that its queue's policies allow - lower priority in the same
 * queue (withinClusterQueue), or workloads of queues that borrow in the same
 * tree when the claimant stays within its own nominal quota
 * (reclaimWithinCohort). Candidates are ordered (other queues first, lowest
 * priority, most recently admitted) and taken one by one, each removal
 * simulated on the quota and on the cache, until the claimant fits; then
 * victims that turn out unnecessary are put back. Only if the simulated set
 * makes the claimant fit are they evicted (the caller's evict callback
 * removes their pods), and the claimant is admitted in the same step with
 * the nodes it will use held for it (gs_admission_hold_plugin keeps other
 * pods off them until its pods are bound or the hold expires).
 * No ping-pong: a workload evicted by reclaim is not readmitted to borrow in
 * its queue until the reclaiming queue's demand drops below what it was.
 *
 * Starvation guard: a large workload (>= large_gpu_milli) pending longer than
 * starvation_wait gets a reservation: the earliest time it can start if
 * running workloads end at their estimated times (simulated on the cache),
 * and the nodes it would take then. Until it starts, other workloads may use
 * those nodes only if they are estimated to end before that time (Slurm's
 * backfill); they may always use other nodes.
 *
 * Time comes from the clock given at creation; the result is deterministic
 * for the same inputs. Not thread-safe.
 */
#ifndef GS_SCHED_ADMISSION_ADMISSION_H
#define GS_SCHED_ADMISSION_ADMISSION_H

#include "sched/admission/fairshare.h"
#include "sched/framework.h"

#include <jansson.h>

struct gs_admission_opts {
    int64_t halflife_ns;        /* usage decay half-life; 0: 1 hour */
    double history_weight;      /* weight of the decayed history in the ordering key, 0..1; <0: 0.5 */
    int64_t starvation_wait_ns; /* wait before a large workload gets a reservation; 0: 30 min; <0: never */
    int64_t large_gpu_milli;    /* a "large" workload asks at least this much GPU; 0: 8000 (8 GPUs) */
    int64_t hold_ns;            /* how long freed capacity is held for a claimant; 0: 5 min */
    int max_checks;             /* placement checks per cycle; 0: 256 */
    bool quota_only;            /* skip the placement check (Kueue's behaviour) */
    const struct gs_profile *profile; /* filters for the placement check; NULL: the default profile */
    /* Removes an evicted workload's pod from the scheduler (and so the cache).
     * NULL: admission removes it from the cache itself. */
    void (*evict)(void *ctx, const struct gs_pod *pod);
    void *ctx;
};

enum gs_wl_state { GS_WL_PENDING, GS_WL_ADMITTED, GS_WL_FINISHED, GS_WL_INADMISSIBLE };

struct gs_workload {
    char *key;                  /* "ns/name" of the pod or PodGroup */
    int32_t id;
    int32_t queue;              /* leaf index in the tree */
    int32_t priority;
    const struct gs_pod **pods; /* borrowed until finished */
    size_t npods;
    int64_t demand[GS_QT_MAX_RES]; /* milli per resource, over all pods */
    int64_t gpu_milli;
    int64_t est_duration_ns;    /* 0 = unknown */
    enum gs_wl_state state;
    int8_t flavor[GS_QT_MAX_GROUPS]; /* chosen flavor per resource group when admitted */
    int64_t created_ns, admitted_ns;
    uint64_t seq;
    int32_t preemptions;        /* times evicted */
    int32_t blocked_by;         /* queue that reclaimed it, -1 none */
    int blocked_res;
    int64_t blocked_demand;     /* that queue's demand then */
    uint64_t fail_seq;          /* release counter at the last failed try (0 = none) */
    char reason[192];           /* why it is still pending */
};

struct gs_admission;

/* tree: finalized, borrowed; cache and clock borrowed; all must outlive the
 * admission. 0 or an error with d filled. */
int gs_admission_new(const struct gs_queue_tree *tree, struct gs_cache *cache, const struct gs_clock *clock,
                     const struct gs_admission_opts *o, struct gs_admission **out, struct gs_diags *d);
void gs_admission_free(struct gs_admission *a);

struct gs_workload_spec {
    const char *key;            /* "ns/name"; copied */
    const char *namespace_;     /* for LocalQueue lookup; NULL: "default" */
    const char *queue;          /* LocalQueue or leaf queue name */
    int32_t priority;
    const struct gs_pod *const *pods; /* borrowed until the workload finishes */
    size_t npods;
    int64_t est_duration_ns;
};

/* Submits a pending workload. Its id (>= 0), GS_ENOENT when the queue is
 * unknown, GS_EEXIST for a duplicate key. */
int gs_admission_submit(struct gs_admission *a, const struct gs_workload_spec *s);
/* One pod as a workload: queue from its kueue.x-k8s.io/queue-name label. */
int gs_admission_submit_pod(struct gs_admission *a, const struct gs_pod *pod, int64_t est_duration_ns);

/* What one cycle did: ids, valid until the next cycle. */
struct gs_admission_result {
    const int32_t *admitted;
    size_t nadmitted;
    const int32_t *evicted;
    size_t nevicted;
};

/* Admits what it can now (and evicts for reclaim/preemption). 0 or GS_E*. */
int gs_admission_cycle(struct gs_admission *a, struct gs_admission_result *out);
/* The workload finished (all its pods left): its quota is released. */
int gs_admission_finish(struct gs_admission *a, int32_t id);
/* Nodes were added or freed outside admission's knowledge: retry everyone. */
void gs_admission_capacity_changed(struct gs_admission *a);

const struct gs_workload *gs_admission_workload(const struct gs_admission *a, int32_t id);
int32_t gs_admission_find(const struct gs_admission *a, const char *key);
size_t gs_admission_count(const struct gs_admission *a);
const struct gs_queue_tree *gs_admission_tree(const struct gs_admission *a);
const struct gs_quota *gs_admission_quota(const struct gs_admission *a);

/*--- Observability ---*/

struct gs_queue_status {
    const char *name;
    int32_t index, parent;
    double weight;
    int32_t priority;
    int64_t nominal[GS_QT_MAX_RES];  /* summed over flavors, milli */
    int64_t borrowed[GS_QT_MAX_RES];
    int64_t lent[GS_QT_MAX_RES];
    int64_t usage[GS_QT_MAX_RES];
    double decayed_gpu_hours;
    double fair_share[GS_QT_MAX_RES]; /* deserved, milli */
    double weighted_share;            /* usage / fair share, dominant resource */
    double key;                       /* ordering key (lower goes first) */
    int32_t pending, admitted;
    int64_t preemptions;              /* evictions of its workloads */
};

/* Status of tree node i (fair share recomputed now). 0 or GS_ENOENT. */
int gs_admission_queue_status(struct gs_admission *a, int32_t i, struct gs_queue_status *out);
/* Every queue as a JSON array of objects (new reference, NULL on ENOMEM). */
json_t *gs_admission_status_json(struct gs_admission *a);
/* For one workload: state, queue, position in line, estimated start
 * (seconds on the clock, -1 unknown), reason, preemptions, reservation.
 * NULL when unknown. New reference. */
json_t *gs_admission_explain_json(struct gs_admission *a, const char *key);
/* Position (1-based) of a pending workload in its queue, 0 when not pending. */
int32_t gs_admission_position(const struct gs_admission *a, int32_t id);
/* Estimated start of a pending workload (clock ns): now when it fits now,
 * else when enough running workloads will have ended; -1 when unknown. */
int64_t gs_admission_estimate_start(struct gs_admission *a, int32_t id);
/* The reserved workload (-1 none) and its start time. */
int32_t gs_admission_reservation(const struct gs_admission *a, int64_t *start_ns);

/* Invariants: quota never exceeded (quota.h) and each leaf's usage equals
 * the sum of its admitted workloads' requests. 0 or GS_ESTATE with why. */
int gs_admission_check(const struct gs_admission *a, char *why, size_t len);

/* Filter plugin keeping pods off nodes held for a claimant. Its args (from
 * gs_admission_plugin_args) carry this admission; add it to a profile's
 * filter point. */
extern const struct gs_plugin gs_admission_hold_plugin;
json_t *gs_admission_plugin_args(struct gs_admission *a);
/* Is node idx held for a workload other than pod's? */
bool gs_admission_node_held(const struct gs_admission *a, int32_t node, const struct gs_pod *pod);

#endif
