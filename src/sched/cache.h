/*
 * cache.h - the scheduler's view of the cluster: per-node aggregates kept
 * up to date incrementally, and pods assumed onto nodes before binding.
 *
 * Design. Nodes live in one array (struct gs_node_info), in the order they
 * were added; a node's index never changes while it exists (removed nodes
 * leave a tombstone slot that is reused). Filter and Score plugins read the
 * aggregates directly - requested CPU/memory/extended resources and, per GPU,
 * free milli-GPU and free memory - so a scheduling cycle touches no hash table
 * and allocates nothing per node. Every change to a node bumps its
 * `generation`, which plugins use to keep their own per-node caches (FGD's
 * fragmentation) valid without recomputing the cluster.
 *
 * Pods. Placing a pod on a node goes through gs_cache_assume() with a
 * struct gs_assignment naming the exact GPUs (a bit mask of indices) and the
 * share taken on each (milli, memory). An assumed pod is confirmed by
 * gs_cache_confirm() when binding succeeds, or released by gs_cache_forget().
 * Assumed pods not confirmed before their deadline (clock time) are expired by
 * gs_cache_expire(). gs_cache_remove_pod() frees a bound pod's resources
 * (completion, deletion, eviction).
 *
 * Not thread-safe: the scheduling cycle is serial; callers serialise access.
 */
#ifndef GS_SCHED_CACHE_H
#define GS_SCHED_CACHE_H

#include "core/clock.h"
#include "core/object.h"
#include "core/pdb_budget.h"

#include <stdbool.h>
#include <stdint.h>

#define GS_MAX_GPUS_PER_NODE 64 /* fits the uint64_t masks below */

struct gs_nrt; /* NodeResourceTopology zones: sched/topology_core.h */
#define GS_GPU_MILLI 1000

/* Devices chosen for one pod on one node. Every chosen GPU gets the same
 * share: milli (1..1000) and mem_mib (0 = no memory accounting). */
struct gs_assignment {
    int32_t node;      /* node index in the cache, -1 when none */
    uint64_t gpu_mask; /* bit i: GPU index i */
    int32_t milli;
    int64_t mem_mib;
};

/* Live state of one GPU. */
struct gs_gpu_slot {
    int32_t milli_free;   /* 0..1000 */
    int32_t npods;        /* pods holding a share */
    int64_t mem_total_mib;
    int64_t mem_free_mib;
    int32_t numa_node;    /* -1 unknown */
    uint64_t nvlink;      /* peers by index */
    bool healthy;
    /* The NVLink island holding this GPU (its bit included), derived from
     * ngpus and every nvlink above whenever the cache writes them (node
     * add/update), so placement need not flood-fill per pod; 0 = not derived
     * (gs_topo_islands then computes). See sched/topology_core.h. */
    uint64_t island;
};

struct gs_node_info {
    /* Hot: read by every Filter/Score pass over the cluster. Kept together in
     * the first 64 bytes (the cache aligns records to 64) so one pass touches
     * one cache line per node and a 5000-node cluster stays in L2. */
    int64_t cpu_alloc, cpu_used;    /* milli-CPU */
    int64_t mem_alloc, mem_used;    /* bytes */
    int32_t pods_alloc, pods_used;  /* pods_alloc 0 = unlimited */
    int32_t gpu_model;         /* interned id (gs_cache_model_id), -1 when no GPUs */
    int32_t ngpus;
    int32_t gpu_milli_free;    /* sum over healthy GPUs */
    int32_t gpus_whole_free;   /* healthy GPUs with 1000 free */
    int32_t idx;               /* index in the cache (stable) */
    bool live;                 /* false for a removed node's slot */
    bool schedulable;          /* false when cordoned (spec.unschedulable) or not Ready */
    /* Cold. */
    struct gs_gpu_slot *gpus;  /* ngpus entries */
    const char *name;          /* owned by the cache */
    const struct gs_node *node; /* the object, when the node came from one (borrowed from the caller), else NULL */
    const struct gs_labels *labels; /* never NULL (empty set when none) */
    struct gs_resources ext_alloc; /* other extended resources (name -> milli) */
    struct gs_resources ext_used;
    uint64_t generation;       /* bumped on every change */
    int32_t npods;             /* pods assumed or bound here */
    const struct gs_nrt *nrt;  /* NodeResourceTopology (borrowed), NULL when none: gs_cache_set_nrt */
};

/*
 * The fields every Filter/Score pass reads, copied into one dense array in
 * slot order (gs_cache_hot): a pass over the cluster then walks contiguous
 * 64-byte records, one cache line per node, indexed by node number, instead
 * of chasing a pointer to each node's larger record. The cache rewrites a
 * node's record on every change to it, so it always equals what the
 * struct gs_node_info fields say (gs_cache_check verifies it). Dead slots
 * hold zeros.
 */
struct gs_node_hot {
    int64_t cpu_free, mem_free;   /* alloc - used (milli-CPU, bytes) */
    int64_t cpu_alloc, mem_alloc;
    /* Percent of allocatable without a divide (kube's resource scores are
     * integer percentages): for 0 <= x < 2^46, x * 100 / cpu_alloc ==
     * gs_pct(x, cpu_pct, cpu_pct_shift). 0 when alloc <= 128: divide instead. */
    uint64_t cpu_pct, mem_pct;
    int32_t pods_free;            /* pods_alloc - pods_used; INT32_MAX when unlimited */
    int32_t gpu_model;            /* as in gs_node_info */
    int8_t ngpus;
    uint8_t gpus_whole_free;
    int16_t gpu_milli_max;        /* most free milli on one healthy GPU; -1 when none is healthy */
    uint8_t gpus_unhealthy;       /* unhealthy GPUs */
    uint8_t live;
    uint8_t cpu_pct_shift, mem_pct_shift;
};

/* floor(x * 100 / alloc) for 0 <= x < 2^46 from a record's multiplier and
 * shift: one 128-bit multiply (see cache.c for why it is exact). */
static inline uint64_t gs_pct(uint64_t x, uint64_t magic, uint8_t shift)
{
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)(((u128)x * magic) >> 64) >> shift;
}

/* A node described without a Node object (simulator, benchmark). */
struct gs_node_spec {
    const char *name;
    int64_t cpu_milli;
    int64_t mem_bytes;
    int32_t pods;              /* 0 = unlimited */
    const char *gpu_model;     /* NULL when no GPUs */
    int32_t ngpus;
    int64_t gpu_mem_mib;       /* per GPU */
    const struct gs_labels *labels; /* copied; may be NULL */
    const int32_t *gpu_numa;   /* ngpus NUMA nodes (copied); NULL: unknown */
    const uint64_t *gpu_nvlink; /* ngpus NVLink peer masks (copied); NULL: none */
};

struct gs_cache;

/* New empty cache on the given clock (borrowed; must outlive the cache). */
struct gs_cache *gs_cache_new(const struct gs_clock *clock);
void gs_cache_free(struct gs_cache *c);

/* Adds a node from its object (borrowed: must stay valid until the node is
 * removed or updated). Returns the node index (>= 0) or a negative GS_E*
 * (GS_EEXIST for a duplicate name). GPUs come from node->gpus; allocatable
 * cpu/memory/pods/extended resources from node->allocatable. */
int gs_cache_add_node(struct gs_cache *c, const struct gs_node *node);
/* Same from a plain spec (name and labels copied). */
int gs_cache_add_node_spec(struct gs_cache *c, const struct gs_node_spec *spec);
/* Replaces a node's static description keeping the pods on it. */
int gs_cache_update_node(struct gs_cache *c, const struct gs_node *node);
/* Removes a node; its pods are forgotten. GS_ENOENT when unknown. */
int gs_cache_remove_node(struct gs_cache *c, const char *name);
/* Marks a GPU (un)healthy; bumps generation. */
int gs_cache_set_gpu_health(struct gs_cache *c, int32_t node, int32_t gpu, bool healthy);
int gs_cache_set_schedulable(struct gs_cache *c, int32_t node, bool schedulable);
/* Bumps a node's generation and the change count and nothing else: for a
 * caller that skipped a change-and-undo it stands in for (the preemption
 * search), so memos keyed on them look again as they would have. GS_ENOENT. */
int gs_cache_touch_node(struct gs_cache *c, int32_t node);

/* Node slots [0, gs_cache_node_count) - some may be !live. Borrowed. */
int32_t gs_cache_node_count(const struct gs_cache *c);
struct gs_node_info *gs_cache_node(struct gs_cache *c, int32_t idx);
/* The hot records of slots [0, gs_cache_node_count). Borrowed: valid until
 * the next node is added (the array may move). */
const struct gs_node_hot *gs_cache_hot(const struct gs_cache *c);
/* Smallest free CPU (milli), memory (bytes) and pod slots (INT32_MAX when
 * unlimited) over live nodes, each taken on its own; INT64_MAX/INT32_MAX
 * without nodes. A demand within all three fits every node's totals.
 * O(1): the cache keeps them up to date. */
void gs_cache_min_free(const struct gs_cache *c, int64_t *cpu, int64_t *mem, int32_t *pods);
/* Index of the node named name, or -1. */
int32_t gs_cache_find_node(const struct gs_cache *c, const char *name);
/* Interned id of a GPU model name (creates it); -1 for NULL. */
int32_t gs_cache_model_id(struct gs_cache *c, const char *model);
/* Model name for an id, or NULL. Borrowed. */
const char *gs_cache_model_name(const struct gs_cache *c, int32_t id);
/* Counts: live nodes, GPUs, total milli-GPU allocated. */
int32_t gs_cache_live_nodes(const struct gs_cache *c);
int64_t gs_cache_gpu_count(const struct gs_cache *c);
int64_t gs_cache_gpu_milli_used(const struct gs_cache *c);

/* Changes whenever the set of nodes, a node's schedulable flag or its taints
 * change (not on pod placement): lets the framework and plugins keep lists
 * of candidate nodes between cycles. */
uint64_t gs_cache_epoch(const struct gs_cache *c);
/* Changes whenever anything in the cache changes (any node's generation or
 * the epoch): lets plugins remember a negative answer until the cluster moves. */
uint64_t gs_cache_changes(const struct gs_cache *c);
/* Changes whenever gs_cache_changes does or an assumed pod is confirmed:
 * equal values mean the same pods, bound or assumed, on the same devices. */
uint64_t gs_cache_pod_version(const struct gs_cache *c);
/* Changes whenever a pod becomes bound, a bound pod leaves or a bound pod's
 * devices change (not on assume/forget): equal values mean the same bound
 * pods on the same devices, so sums over them can be kept between cycles. */
uint64_t gs_cache_bound_version(const struct gs_cache *c);
/* Live nodes whose object has taints; live schedulable nodes whose object
 * says spec.unschedulable (an override by gs_cache_set_schedulable). Plugins
 * use these to skip whole passes when nothing can be rejected. */
int32_t gs_cache_tainted_nodes(const struct gs_cache *c);
int32_t gs_cache_cordon_overrides(const struct gs_cache *c);

/* Does the assignment fit node now (cpu, memory, pods, GPUs' free milli and
 * memory, health)? Pure check, no change. */
bool gs_cache_fits(const struct gs_cache *c, const struct gs_pod *pod, const struct gs_assignment *a);

/* Takes the pod's resources on a->node. The pod is identified by its key
 * (namespace/name) and borrowed until removed/forgotten. deadline_ns: when
 * the assumption expires unless confirmed (0 = never). GS_EEXIST when the pod
 * is already in the cache, GS_EINVAL when it does not fit. */
int gs_cache_assume(struct gs_cache *c, const struct gs_pod *pod, const struct gs_assignment *a, int64_t deadline_ns);
/* Binding succeeded: the pod is bound and no longer expires. */
int gs_cache_confirm(struct gs_cache *c, const char *pod_key);
/* Releases an assumed (not yet confirmed) pod. Idempotent: GS_ENOENT when absent. */
int gs_cache_forget(struct gs_cache *c, const char *pod_key);
/* Adds an already-bound pod (e.g. loaded from the store) with its assignment. */
int gs_cache_add_bound(struct gs_cache *c, const struct gs_pod *pod, const struct gs_assignment *a);
/* Releases a pod's resources whatever its state. GS_ENOENT when absent. */
int gs_cache_remove_pod(struct gs_cache *c, const char *pod_key);
/* Assignment of a pod in the cache, or NULL. Borrowed. */
const struct gs_assignment *gs_cache_pod_assignment(const struct gs_cache *c, const char *pod_key);
/* Forgets every assumed pod whose deadline has passed on the clock; calls
 * cb(pod, arg) for each (may be NULL). Returns how many expired. */
int gs_cache_expire(struct gs_cache *c, void (*cb)(const struct gs_pod *, void *), void *arg);

/* Attaches a node's NodeResourceTopology (borrowed: must outlive the node
 * or the next call; NULL detaches). Bumps the generation. GS_ENOENT. */
int gs_cache_set_nrt(struct gs_cache *c, int32_t node, const struct gs_nrt *nrt);
/* Calls cb once for every pod in the cache, assumed (bound=false) or bound.
 * The order is unspecified; cb must not change the cache. */
void gs_cache_foreach_pod(const struct gs_cache *c,
                          void (*cb)(void *arg, const struct gs_pod *pod, const struct gs_assignment *a, bool bound),
                          void *arg);

/*--- Bound-pod watchers ---*/

/* Told as it happens of every pod that becomes bound (added: gs_cache_add_bound,
 * gs_cache_confirm) and every bound pod that leaves (added false: removed,
 * evicted, dropped with its node), and of a node update that narrows a bound
 * pod's GPU mask (the old assignment leaves, the new one comes). Assumed pods
 * are not told of. pod and a are borrowed for the call only (a departing pod
 * may be freed right after); fn must not change the cache. Lets an index over
 * the bound pods (preemption's victims, Coscheduling's preemptible sums) follow
 * each change instead of walking every pod after each bind. */
typedef void (*gs_cache_bound_fn)(void *ctx, const struct gs_pod *pod, const struct gs_assignment *a, bool added);
#define GS_CACHE_WATCHERS 8
/* 0, or GS_EBUSY when GS_CACHE_WATCHERS are registered. The watcher must be
 * unwatched before the cache is freed or before ctx goes. */
int gs_cache_watch_bound(struct gs_cache *c, gs_cache_bound_fn fn, void *ctx);
/* Forgets fn with ctx (nothing when not registered). */
void gs_cache_unwatch_bound(struct gs_cache *c, gs_cache_bound_fn fn, void *ctx);

/*--- Pods with affinity, namespaces, disruption budgets ---*/

/* Pods in the cache (assumed or bound) with any pod (anti-)affinity term,
 * and of those with a required anti-affinity term. O(1): InterPodAffinity
 * skips its passes when the incoming pod has no terms and these are 0. */
int32_t gs_cache_affinity_pods(const struct gs_cache *c);
int32_t gs_cache_required_anti_affinity_pods(const struct gs_cache *c);
/* Calls cb for each pod with affinity terms (assumed or bound). Order
 * unspecified; cb must not change the cache. */
void gs_cache_foreach_affinity_pod(const struct gs_cache *c,
                                   void (*cb)(void *arg, const struct gs_pod *pod, const struct gs_assignment *a),
                                   void *arg);

/* A namespace's labels (for namespaceSelector), copied; NULL forgets the
 * namespace. 0 or GS_ENOMEM. */
int gs_cache_set_namespace_labels(struct gs_cache *c, const char *ns, const struct gs_labels *labels);
/* Borrowed; an empty set for a namespace the cache was not told of. */
const struct gs_labels *gs_cache_namespace_labels(const struct gs_cache *c, const char *ns);

/* PodDisruptionBudgets (policy/v1), for preemption's victim order. put takes
 * ownership of b (malloc'd, freed with gs_pdb_budget_free, also on error) and
 * replaces a budget of the same namespace and name. 0 or GS_ENOMEM. */
int gs_cache_put_pdb(struct gs_cache *c, struct gs_pdb_budget *b);
/* GS_ENOENT when unknown. */
int gs_cache_remove_pdb(struct gs_cache *c, const char *ns, const char *name);
/* Every budget, borrowed until the next put/remove. */
const struct gs_pdb_budget *const *gs_cache_pdbs(const struct gs_cache *c, size_t *n);

/* Checks every aggregate against a recomputation from the pods in the cache
 * (tests and the invariant fuzzer). 0 or GS_ESTATE with a description in why. */
int gs_cache_check(const struct gs_cache *c, char *why, size_t len);

#endif
