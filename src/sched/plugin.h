/*
 * plugin.h - the scheduling framework's extension points.
 *
 * A plugin is a `const struct gs_plugin` with a name and the extension points
 * it implements; every other member stays NULL. Plugins live one per file in
 * src/sched/plugins/ and are listed in the static registry (registry.c). A
 * profile (profile.h) says which plugins run at which point, in which order,
 * with which weight and args.
 *
 * The points, in the order a pod meets them:
 *
 *   QueueSort -> PreEnqueue -> [scheduling cycle, serial]
 *     PreFilter -> Filter -> (PostFilter on failure) -> PreScore -> Score ->
 *     NormalizeScore -> Reserve -> Permit
 *   -> [binding cycle] PreBind -> Bind -> PostBind
 *
 * Filter and Score are batched: a plugin sees all candidate nodes at once, as
 * an array, and writes one verdict or score per node. This keeps the hot loop
 * inside the plugin (no call per node), which is what lets the scheduler
 * filter and score every node of a 5000-node cluster at tens of thousands of
 * pods per second. Filter verdicts are small reason codes; the plugin turns a
 * code into text only when a diagnosis is printed.
 *
 * A plugin may also give Filter, PreScore and Score in an index form
 * (filter_idx, pre_score_idx, score_idx): the same verdicts and scores, but
 * the candidates arrive as node numbers, so the plugin reads the cache's dense hot records
 * (gs_cache_hot(cache)[idx[i]]) in one contiguous pass instead of following a
 * pointer per node. The framework prefers the index form when a plugin has
 * both, and builds the pointer array only for plugins without one; the
 * pointer form stays required and the reference (direct callers, tests), and
 * the two must agree on every node.
 *
 * Node classes. Nodes whose state is equal in everything a plugin may read
 * (sched/nodeclass.h lists it: free and allocatable resources, every GPU
 * slot, labels but kubernetes.io/hostname, taints, ...) form a class, kept
 * by the cache as pods and nodes change. A plugin sets by_class to say that
 * for a given pod its Filter, PreScore, Score and NormalizeScore are
 * functions of the node's class; when every Filter plugin not skipped at
 * PreFilter and every PreScore and Score plugin of the profile says so, the
 * framework shows each plugin one representative per class (the lowest
 * index) instead of every node, counts a class's rejections once per member
 * and sends equal totals to the lowest node index, as the full scan does:
 * the same decisions at a cost in classes, not nodes. Anything else runs
 * per node as before.
 *
 * Plugins keep per-profile state (args, caches) in the `state` pointer from
 * init, and reach the rest of the system only through struct gs_handle: no
 * globals.
 */
#ifndef GS_SCHED_PLUGIN_H
#define GS_SCHED_PLUGIN_H

#include "core/clock.h"
#include "core/error.h"
#include "core/object.h"
#include "sched/cache.h"
#include "sched/cycle_state.h"
#include "sched/status.h"

#include <jansson.h>
#include <stdint.h>

/* Filter reject codes: 0 = pass; 1..127 plugin-defined; OR with this bit
 * when preemption cannot help on that node (UnschedulableAndUnresolvable). */
#define GS_REJECT_UNRESOLVABLE 0x80u
#define GS_REJECT_CODE(r) ((r) & 0x7fu)

#define GS_MAX_SCORE 100

/* What a plugin may reach. Borrowed; valid for the plugin's lifetime. */
struct gs_handle {
    const struct gs_clock *clock;
    struct gs_cache *cache;
    uint64_t seed;              /* derive every random choice from this */
    struct gs_framework *fw;    /* waiting pods (Permit), may be NULL in unit tests */
    /* Evicts a bound pod to make room for preemptor (PostFilter): the driver
     * frees its resources and requeues it. NULL when evictions are not
     * possible (unit tests, explain). 0 or a negative GS_E*. */
    int (*evict)(void *evict_ctx, const struct gs_pod *victim, const struct gs_pod *preemptor);
    void *evict_ctx;
    /* Moves a queued pod (backing off or unschedulable) to the active queue now,
     * as kube's PodsToActivate: a gang member waiting at Permit brings its
     * siblings. NULL when there is no queue. Same ctx as evict. */
    void (*activate)(void *evict_ctx, const struct gs_pod *pod);
    /* activate of pods[0..n) in turn, in that order, in one call: the queue
     * then keeps a gang's siblings as one batch instead of moving each one
     * (sched/queue.h gs_sched_queue_reactivate_many). NULL when there is no
     * queue; pods borrowed for the call. Same ctx as evict. */
    void (*activate_many)(void *evict_ctx, const struct gs_pod *const *pods, size_t n);
    /* The pods queued behind the one being scheduled, in the order they will
     * be tried: writes at most max of them to out (borrowed, valid until the
     * cycle ends) and returns how many. Called from PreScore and Score. NULL
     * when the caller shows no queue (a plugin then sees none). */
    size_t (*queued)(void *queue_ctx, const struct gs_pod **out, size_t max);
    void *queue_ctx;
};

/* A pod as the queue holds it. */
struct gs_queued_pod {
    const struct gs_pod *pod;
    int64_t enqueued_ns;        /* first time it entered the queue */
    int64_t timestamp_ns;       /* last time it was (re)added to the active queue */
    int32_t attempts;
    uint64_t seq;               /* insertion order: the final tie-break */
};

struct gs_diagnosis;

/* PostFilter's answer: a node to nominate after preempting victims. */
struct gs_post_filter_result {
    int32_t nominated_node;     /* -1 none */
};

struct gs_plugin {
    const char *name;

    /* Called once per profile that enables the plugin, with its pluginConfig
     * args (borrowed, may be NULL). Report bad args to d with the field path
     * ("args.scoringStrategy.type") and return GS_EINVAL. Optional. */
    int (*init)(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d);
    /* Frees what init allocated. Optional. */
    void (*fini)(void *state);

    /* QueueSort: true when a should be tried before b. Exactly one per profile. */
    bool (*less)(void *state, const struct gs_queued_pod *a, const struct gs_queued_pod *b);

    /* PreEnqueue: may the pod enter the active queue? Non-success parks it as
     * unschedulable until a cluster event moves it back. Optional. */
    struct gs_status (*pre_enqueue)(void *state, const struct gs_pod *pod);

    /* PreFilter: once per cycle, before Filter. Skip turns this plugin's Filter
     * off for the pod; a rejection ends the cycle (every node fails). */
    struct gs_status (*pre_filter)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod);

    /* Filter: for each nodes[i] write reject[i] = 0 (fits) or a reject code.
     * Only nodes that passed the earlier filters are given; reject[] is zeroed
     * on entry. Must not change the cache. */
    void (*filter)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                   struct gs_node_info *const *nodes, size_t n, uint8_t *reject);
    /* Optional index form of filter: idx[i] is the cache index of the i-th
     * candidate (ascending). Same contract and verdicts as filter, which must
     * also be set. */
    void (*filter_idx)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                       const int32_t *idx, size_t n, uint8_t *reject);
    /* Text for a reject code, for diagnoses ("Insufficient nvidia.com/gpu").
     * Required when filter is set. Returns the length written (snprintf). */
    int (*reason)(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len);

    /* PostFilter: after no node fits (preemption). Success with a nominated
     * node means the pod should be retried there. Optional. */
    struct gs_status (*post_filter)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                    const struct gs_diagnosis *diag, struct gs_post_filter_result *res);

    /* PreScore: once per cycle with the feasible nodes; Skip turns Score off. */
    struct gs_status (*pre_score)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                  struct gs_node_info *const *nodes, size_t n);
    /* Optional index form of pre_score (see filter_idx): the same answer. */
    struct gs_status (*pre_score_idx)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                      const int32_t *idx, size_t n);
    /* Score: write scores[i] for nodes[i] (any int64; higher is better). */
    void (*score)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                  struct gs_node_info *const *nodes, size_t n, int64_t *scores);
    /* Optional index form of score (see filter_idx); must write every
     * scores[i] (the framework does not clear the array for it). */
    void (*score_idx)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      const int32_t *idx, size_t n, int64_t *scores);
    /* NormalizeScore: map this plugin's scores into 0..GS_MAX_SCORE. Optional;
     * without it scores must already lie in that range. */
    void (*normalize_score)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                            struct gs_node_info *const *nodes, int64_t *scores, size_t n);
    /* Node classes (see above), after PreFilter: true when, for this pod, the
     * plugin's Filter verdict, Score and PreScore answer on a node depend only
     * on the node's class (not its name, index, kubernetes.io/hostname label
     * or how many candidates there are), and NormalizeScore only on the set
     * of scores (a max or min, not a count); then the candidates may be one
     * node per class, in any order. NULL or false: run on every node.
     * gs_plugin_by_class_always suits a plugin that reads nothing else. */
    bool (*by_class)(void *state, const struct gs_cycle_state *cs, const struct gs_pod *pod);

    /* Reserve: the node is chosen. A plugin that picks devices fills a->gpu_mask
     * (when still 0) with GPUs that fit. Must be undoable by Unreserve. */
    struct gs_status (*reserve)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                struct gs_node_info *node, struct gs_assignment *a);
    /* Unreserve: undo Reserve. Called on every failure after Reserve (for every
     * reserve plugin, in reverse order, including the one that failed), and
     * must be idempotent. */
    void (*unreserve)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *node);

    /* Permit: Success, Unschedulable (reject), or Wait with *timeout_ns set;
     * a waiting pod is allowed or rejected later through gs_framework_allow /
     * gs_framework_reject, and rejected automatically at the timeout. */
    struct gs_status (*permit)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                               struct gs_node_info *node, int64_t *timeout_ns);

    /* PreBind / Bind / PostBind: binding cycle. Bind may return Skip to let the
     * next bind plugin act; the first non-Skip answer wins. */
    struct gs_status (*pre_bind)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                 const struct gs_node_info *node, const struct gs_assignment *a);
    struct gs_status (*bind)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                             const struct gs_node_info *node, const struct gs_assignment *a);
    void (*post_bind)(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      const struct gs_node_info *node, const struct gs_assignment *a);

    /* Cluster events, from the driver, outside any cycle (the informers of
     * kube's plugins): a pod entered the scheduler (added) or left it for
     * good (deleted or completed; the pod is valid during the call). Optional. */
    void (*on_pod)(void *state, const struct gs_pod *pod, bool added);
    /* A PodGroup was added (borrowed until removed) or removed. Optional. */
    void (*on_podgroup)(void *state, const struct gs_podgroup *pg, bool added);
};

/* A by_class that answers true: for plugins reading only a node's class. */
bool gs_plugin_by_class_always(void *state, const struct gs_cycle_state *cs, const struct gs_pod *pod);

/* The static registry: plugin by name, or NULL. */
const struct gs_plugin *gs_plugin_lookup(const char *name);
/* All registered plugins (NULL-terminated). */
const struct gs_plugin *const *gs_plugin_all(void);

#endif
