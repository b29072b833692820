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
 * (reclaimWithinCohort). For a claimant that asks for GPUs the victims are
 * chosen node-wise (nodeplan.h): per pod, the node where the cheapest set of
 * victims makes room, so a gang gets whole nodes instead of GPUs scattered
 * everywhere; none are chosen when no set makes it fit. Otherwise, or when
 * that set is not confirmed by the placement check, candidates are ordered
 * (other queues first, lowest priority, most recently admitted) and taken
 * one by one until the claimant fits. Every removal is simulated on the
 * quota and on the cache, and victims that turn out unnecessary are put
 * back. Only if the simulated set
 * makes the claimant fit are they evicted (the caller's evict callback
 * removes their pods), and the claimant is admitted in the same step with
 * the nodes it will use held for it (gs_admission_hold_plugin keeps other
 * pods off them until its pods are bound or the hold expires).
 * No ping-pong: a workload evicted by reclaim is not readmitted to borrow in
 * its queue until the reclaiming queue's demand drops below what it was.
 *
 * Eviction is costly (the victim restarts from scratch), so it is rationed:
 *  - patience: a claimant reclaims from other queues only after it has been
 *    pending reclaim_wait (YARN's fair-share preemption timeout): most
 *    capacity frees itself as workloads end, without throwing work away;
 *  - minimum runtime: a workload admitted less than reclaim_min_runtime ago
 *    is never a victim (KAI's minRuntime), so work is not thrown away just
 *    after it started;
 *  - fair share, not nominal: reclaim takes only from queues above their
 *    fair share, and only while the victim's queue stays at or above it
 *    after the eviction (a queue that merely borrows beyond its guarantee
 *    while under its fair share keeps what it runs);
 *  - a cap: a workload is evicted at most max_preemptions times per
 *    preemption_window; the per-workload and per-queue counters are exposed
 *    (gs_admission_stats, the status JSON);
 *  - the evictor pays: the GPU-hours the victims had run, and lose, are
 *    added (times evict_charge) to the claimant queue's usage ledger, so a
 *    queue that reclaims drops in the fair-share order;
 *  - at most max_victim_searches victim searches per cycle, so searching for
 *    victims does not use up the placement checks small workloads need.
 * A workload that cannot be placed even with every GPU of the cluster free
 * for it is not tried at all (a free-GPU count, before the filters run).
 *
 * Starvation guard: a large workload (>= large_gpu_milli) pending longer than
 * starvation_wait gets a reservation: the earliest time it can start if
 * running workloads end at their estimated times (simulated on the cache),
 * and the nodes it would take then. Until it starts, other workloads may use
 * those nodes only if they are estimated to end before that time (Slurm's
 * backfill); they may always use other nodes. A reservation is only made
 * when its start is within reserve_horizon: holding nodes for a workload that
 * cannot start for hours would leave capacity idle for nothing.
 *
 * Two options aim at gangs that need whole nodes (both off by default):
 * pin_placement binds admitted GPU workloads where the placement check put
 * them (it packs), and drain keeps, for a large workload of a queue below
 * its fair share, the nodes whose GPUs free up soonest (drain.h).
 *
 * Pods of an admitted workload that finish early give their quota back
 * (gs_admission_pod_finished); the rest stays reserved until the workload
 * finishes or is evicted.
 *
 * Time comes from the clock given at creation; the result is deterministic
 * for the same inputs. Not thread-safe.
 */
#ifndef GS_SCHED_ADMISSION_ADMISSION_H
#define GS_SCHED_ADMISSION_ADMISSION_H

#include "sched/admission/fairshare.h"
#include "sched/framework.h"

#include <jansson.h>

struct gs_dra_admit;

struct gs_admission_opts {
    int64_t halflife_ns;        /* usage decay half-life; 0: 1 hour */
    double history_weight;      /* weight of the decayed history in the ordering key, 0..1; <0: 0.5 */
    int64_t starvation_wait_ns; /* wait before a large workload gets a reservation; 0: 30 min; <0: never */
    int64_t large_gpu_milli;    /* a "large" workload asks at least this much GPU; 0: 8000 (8 GPUs) */
    int64_t hold_ns;            /* how long freed capacity is held for a claimant; 0: 60 s */
    int64_t reclaim_min_runtime_ns; /* no eviction before a workload ran this long; 0: 10 min; <0: none */
    int64_t reclaim_wait_ns;    /* a claimant reclaims only after pending this long; 0: 10 min; <0: at once */
    /* A claimant whose queue's weighted share is below this reclaims without
     * the patience of reclaim_wait: a queue whose burst found the cluster
     * taken gets its share back at once, one near its share still waits for
     * capacity to free itself. 0: off (patience for everyone). */
    double impatient_share;
    int max_preemptions;        /* evictions of one workload per window; 0: 1; <0: unlimited */
    int64_t preemption_window_ns; /* 0: 1 hour */
    double evict_charge;        /* share of the victims' lost GPU-hours charged to the claimant; 0: 1; <0: none */
    bool reclaim_above_nominal; /* old rule: reclaim from any queue borrowing, ignoring fair share */
    bool global_victims;        /* old victim choice: one global order, not node-wise (nodeplan.h) */
    /* How node-wise victims rank a node's set (nodeplan.h): GS_NP_COST_WORK
     * (0, least work lost), GS_NP_COST_COUNT (fewest victims, then least
     * work) or GS_NP_COST_ROOM (fewest victims, then the most GPU room left
     * for the next workload): fewer evictions for a burst that reclaims
     * much at once. */
    int victim_cost;
    int max_victim_searches;    /* victim searches per cycle; 0: 8; <0: unlimited */
    int64_t reserve_horizon_ns; /* reserve only when the start is this close; 0: 1 hour; <0: any */
    /* The reservation goes to the large workload of the queue furthest below
     * its fair share (weighted share < 1), without the starvation wait; the
     * oldest starving one only when no such queue has one. */
    bool reserve_under_share;
    /* Share gate: while a queue below its fair share (weighted share < 1)
     * has a workload that fits its quota but finds no placement, queues at or
     * above their fair share admit no GPU workloads, so capacity that frees
     * up is not taken again before the starved queue's gang fits. */
    bool share_gate;
    /* Pin: the pods of a GPU workload admitted are bound where the placement
     * check put them (the AdmissionHold filter refuses them every other node
     * until they are bound or hold_ns passes). The check packs (placement.h):
     * a scheduler whose scoring spreads would otherwise take a node that
     * admission left whole for a gang, and place nothing where the check
     * kept reserved nodes free. */
    bool pin_placement;
    /* With pin_placement: pin only while the waiting workload is large
     * (large_gpu_milli), a gang that needs whole nodes; smaller ones find
     * room wherever the scheduler's spreading leaves it. */
    bool pin_large;
    /* With pin_placement: pin only while some queue uses at least a GPU more
     * than its fair share: a queue below its share alone (the others at or
     * under theirs) is better served by the scheduler's spreading, which
     * strands no GPUs on nodes whose CPU or memory the packing filled. */
    bool pin_above;
    /* Drain (drain.h): a large workload of a queue below its fair share that
     * fits its quota but finds no placement gets the nodes where its GPUs
     * will be free soonest (by the declared ends of what runs there), kept
     * for it as a reservation is (backfill only by workloads ending before
     * the drain's start); the queue's drained GPUs stay within what it lacks
     * of its share; the start must lie within reserve_horizon. Meant with
     * pin_placement, so the scheduler does not fill drained nodes. */
    bool drain;
    /* With drain: the drained queue's other workloads backfill its drained
     * nodes only as other queues' do (ending before the drain's start), so
     * its own small jobs do not fill the nodes its gang waits for. */
    bool drain_strict;
    /* Consolidate: while no queue is above its fair share (so reclaim may
     * take nothing), a large workload of a queue below its fair share that
     * fits its quota but no node, while the free GPUs summed over the usable
     * nodes would hold it, gets whole nodes by moving the few small
     * single-pod workloads that keep them from being whole, only when each
     * of them fits now on another node without displacing anything: the
     * mover is evicted (counted as an eviction) and admitted again at once,
     * pinned to its new node, so its queue loses no share beyond the
     * restart. Per gang pod the node needing the fewest moves (then the
     * fewest GPUs moved), at most consolidate_moves per pod (0: off). */
    int consolidate_moves;
    /* Own moves: as consolidate_moves (same conditions), with the claimant's
     * own queue's small single-pod workloads as movers, at most
     * consolidate_own per gang pod, and without the proof that each fits
     * elsewhere: the queue trades its own small work for its gang (no other
     * queue loses share), and a mover that fits nowhere at once waits in line
     * like any evicted workload (counted as an eviction). With both set, the
     * movers of every queue and the larger of the two limits. 0: off. */
    int consolidate_own;
    int max_checks;             /* placement checks per cycle; 0: 256 */
    bool quota_only;            /* skip the placement check (Kueue's behaviour) */
    const struct gs_profile *profile; /* filters for the placement check; NULL: the default profile */
    /* DRA objects (dra_admit.h), borrowed: pods' ResourceClaims count against quota and
     * workloads whose claims fit no node stay inadmissible. NULL: claims are not looked at. */
    const struct gs_dra_admit *dra;
    /* Kueue's deviceClassMappings as "RESOURCE=CLASS[,CLASS...]" (the server's
     * --dra-device-class-mapping), borrowed; the admission loop loads them into its dra. */
    const char *dra_class_mappings[8];
    size_t ndra_class_mappings;
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
    int64_t released[GS_QT_MAX_RES]; /* of demand, held by pods that already finished (admitted only) */
    uint8_t *pod_done;          /* npods flags: pod finished while admitted */
    int64_t est_duration_ns;    /* 0 = unknown */
    enum gs_wl_state state;
    int8_t flavor[GS_QT_MAX_GROUPS]; /* chosen flavor per resource group when admitted */
    int64_t created_ns, admitted_ns;
    uint64_t seq;
    int32_t preemptions;        /* times evicted */
    int32_t window_preemptions; /* evictions since window_start_ns */
    int64_t window_start_ns;
    uint64_t evicted_cycle;     /* cycle of the last eviction: not readmitted in that cycle */
    int32_t blocked_by;         /* queue that reclaimed it, -1 none */
    int blocked_res;
    int64_t blocked_demand;     /* that queue's demand then */
    uint64_t fail_seq;          /* release counter at the last failed try (0 = none) */
    char reason[256];           /* why it is still pending (a QuotaReserved message) */
    bool has_claims;            /* some pod names a ResourceClaim (opts.dra set) */
    bool dra_wait;              /* inadmissible for its claims: looked at again when DRA objects change */
    bool placement_failed;      /* its last try fit quota but could not be placed */
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
/* One pod of an admitted workload finished while others still run: its
 * share of the quota is released now (Kueue's reclaimablePods), so a gang
 * whose members end at different times does not hold quota for idle GPUs.
 * If the workload is evicted later it restarts whole and asks for all of it
 * again. 0, GS_ENOENT (unknown id or pod not in it) or GS_ESTATE (not admitted). */
int gs_admission_pod_finished(struct gs_admission *a, int32_t id, const struct gs_pod *pod);
/* Nodes were added or freed outside admission's knowledge: retry everyone. */
void gs_admission_capacity_changed(struct gs_admission *a);
/* Marks a pending workload admitted without checks (it already runs: a
 * server rebuilding its admission state). 0, GS_ENOENT or GS_ESTATE. */
int gs_admission_restore(struct gs_admission *a, int32_t id);

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

/* Counters since creation. */
struct gs_admission_stats {
    int64_t admitted;             /* admissions (a readmission counts again) */
    int64_t evictions;            /* workloads evicted, reclaim + preemption */
    int64_t reclaims;             /* of which from another queue */
    int64_t victim_searches;      /* searches run */
    int64_t victim_searches_won;  /* searches that found a set making the claimant fit */
    int64_t spared_min_runtime;   /* claims in which a candidate victim was spared: ran less than the minimum runtime */
    int64_t spared_fair_share;    /* ... their queue would drop below its fair share */
    int64_t spared_cap;           /* ... already evicted max_preemptions times in the window */
    int64_t reclaims_deferred;    /* claims that did not reclaim yet: the claimant had not waited reclaim_wait */
    int64_t placement_checks;     /* filter runs */
    int64_t prefilter_skips;      /* placement checks avoided by the free-GPU count */
    int32_t max_workload_preemptions; /* most evictions of one workload */
    double charged_gpu_hours;     /* lost work charged to claimants */
    int64_t reservations;         /* backfill reservations made */
    int64_t reservations_beyond_horizon; /* starving workloads not reserved for: the start was past the horizon */
    int64_t share_gated;        /* share_gate: leaves served with their GPU workloads held back */
    int64_t drains;               /* drain: whole-node drains made */
    int64_t drains_beyond_horizon; /* drain: plans dropped, the start past the horizon */
    int64_t consolidations;       /* consolidate_moves: gangs admitted on nodes made whole by moves */
    int64_t consolidation_moves;  /* ... the small workloads moved for them (also in evictions) */
    int64_t consolidation_own;    /* consolidate_own: of those, the claimant queue's own */
    int64_t consolidation_own_waiting; /* ... own movers that fit nowhere at once (back in line) */
    int64_t pins_expired;         /* pin_placement: pins that ran out (hold_ns) before their pods were bound */
    int64_t nodewise_won;         /* searches won by the node-wise plan */
    int64_t nodewise_refused;     /* node-wise searches where no set of allowed victims makes room */
    int64_t nodewise_unproven;    /* node-wise plans the placement check did not confirm (fell back) */
    int64_t claims_unplaced;      /* won claims whose claimant was not bound when its hold ended, or evicted first */
    int64_t evictions_unplaced;   /* the evictions those claims made: work thrown away for nothing */
    int64_t evicted_gpu_milli;    /* GPUs the evicted workloads held, summed over evictions */
};
void gs_admission_stats(const struct gs_admission *a, struct gs_admission_stats *out);

/* Everything an operator asks about queues, as one JSON object (new
 * reference, NULL on ENOMEM): {"time": s, "queues": [status of each queue
 * plus "pending": the first max_listed pending workloads of a leaf in line
 * order with position, waiting seconds, GPUs, reason and estimatedStart
 * (seconds, -1 unknown; estimated for the first max_estimated only, it runs
 * placement checks)], "reservation": {...} or null, "stats": {...}}. */
json_t *gs_admission_queues_json(struct gs_admission *a, size_t max_listed, size_t max_estimated);

/* Invariants: quota never exceeded (quota.h), each leaf's usage equals
 * the sum of its admitted workloads' requests, and no workload was evicted
 * more than max_preemptions times within one window. 0 or GS_ESTATE with why. */
int gs_admission_check(const struct gs_admission *a, char *why, size_t len);

/* Filter plugin keeping pods off nodes held for a claimant. Its args (from
 * gs_admission_plugin_args) carry this admission; add it to a profile's
 * filter point. */
extern const struct gs_plugin gs_admission_hold_plugin;
json_t *gs_admission_plugin_args(struct gs_admission *a);
/* Is node idx held for a workload other than pod's? */
bool gs_admission_node_held(const struct gs_admission *a, int32_t node, const struct gs_pod *pod);
/* May a hold keep the pod off any node? False: node_held is false on every node
 * for it, so a hold filter's verdict is the same on all nodes (a class-wise scan
 * may run). */
bool gs_admission_holds_apply(const struct gs_admission *a, const struct gs_pod *pod);

#endif
