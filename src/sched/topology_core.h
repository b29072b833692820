/*
 * topology_core.h - node topology for placement: NUMA zones, NVLink islands,
 * TopologyManager policies and the choice of GPUs inside a node.
 *
 * A node's zones come from its NodeResourceTopology object
 * (topology.node.k8s.io/v1alpha2: zones of type Node with allocatable
 * resources, and the kubelet's topologyManagerPolicy/Scope attributes) or,
 * when it has none, from the NUMA node of each GPU its devices report. NVLink
 * islands are the connected groups of the GPUs' NVLink peer masks.
 *
 * The functions here are pure: they read a struct gs_node_info and answer.
 * The NodeResourceTopology plugin (plugins/node_resource_topology.c) and
 * explain use them; gang planning uses the topology-domain helper.
 */
#ifndef GS_SCHED_TOPOLOGY_CORE_H
#define GS_SCHED_TOPOLOGY_CORE_H

#include "core/error.h"
#include "core/object.h"
#include "sched/cache.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

enum gs_tm_policy { GS_TM_NONE, GS_TM_BEST_EFFORT, GS_TM_RESTRICTED, GS_TM_SINGLE_NUMA };
enum gs_tm_scope { GS_TM_SCOPE_CONTAINER, GS_TM_SCOPE_POD };

#define GS_NRT_MAX_ZONES 16

/* One NUMA zone: allocatable amounts (cpu milli, memory bytes, whole GPUs). */
struct gs_nrt_zone {
    int32_t numa;
    int64_t cpu_milli;
    int64_t mem_bytes;
    int32_t gpus;
};

struct gs_nrt {
    char *node;                 /* owned: the object's name is the node's */
    bool has_policy;            /* the object named a policy (else the plugin's default applies) */
    enum gs_tm_policy policy;
    enum gs_tm_scope scope;
    struct gs_nrt_zone zones[GS_NRT_MAX_ZONES];
    int nzones;
};

/* Parses a NodeResourceTopology document. Problems go to d with field paths.
 * 0 or GS_EINVAL / GS_ENOMEM. Free with gs_nrt_clear. */
int gs_nrt_parse(const json_t *doc, struct gs_nrt *out, struct gs_diags *d);
void gs_nrt_clear(struct gs_nrt *n);
/* "single-numa-node" -> GS_TM_SINGLE_NUMA ...; false when unknown. */
bool gs_tm_policy_parse(const char *s, enum gs_tm_policy *out);
const char *gs_tm_policy_name(enum gs_tm_policy p);

/*--- Zones ---*/

/* A zone's free capacity now. cpu/mem are known only from a NodeResourceTopology. */
struct gs_zone_free {
    int32_t numa;
    bool cpu_known;
    int64_t cpu_free, mem_free;
    uint64_t gpus;              /* the zone's GPUs (indices) */
};

/* The node's zones with free capacity: allocatable minus used_cpu[z]/used_mem[z]
 * (may be NULL: nothing used). Returns the number of zones (0 when the node
 * reports no NUMA information). */
int gs_topo_zones(const struct gs_node_info *n, const int64_t *used_cpu, const int64_t *used_mem,
                  struct gs_zone_free *out, int max);
/* The zone index (into gs_topo_zones' order) holding every GPU of mask, or -1. */
int gs_topo_zone_of(const struct gs_zone_free *z, int nz, uint64_t mask);

/* What a pod (or one container) needs from zones. */
struct gs_zone_need {
    int64_t cpu, mem;
    int32_t gpus, milli;
    int64_t gpu_mem;
};

/* Fewest zones that together hold need with their free capacity, or 0 when
 * need is empty, or -1 when even all zones do not. With total=true the zones'
 * whole allocatable counts (what the node could ever offer). */
int gs_topo_zones_needed(const struct gs_node_info *n, const struct gs_zone_free *z, int nz,
                         const struct gs_zone_need *need, bool total);
/* The best single zone for need (fewest fitting GPUs left over), or -1. */
int gs_topo_best_zone(const struct gs_node_info *n, const struct gs_zone_free *z, int nz,
                      const struct gs_zone_need *need);
/* Does the pod satisfy the node's policy and scope? zones as gs_topo_zones. */
bool gs_topo_admit(const struct gs_node_info *n, const struct gs_pod *pod, enum gs_tm_policy policy,
                   enum gs_tm_scope scope, const struct gs_zone_free *z, int nz);

/*--- NVLink islands and the GPU choice ---*/

enum gs_link_level { GS_LINK_NONE = 0, GS_LINK_ANY = 1, GS_LINK_NUMA = 2, GS_LINK_NVLINK = 3 };

/* Connected groups of NVLink peers (GPUs without links are their own group),
 * in the order of each group's lowest GPU. Returns how many masks were
 * written. Reads the per-GPU islands the cache derived (gs_topo_memo_islands)
 * and flood-fills only when they are absent. */
int gs_topo_islands(const struct gs_node_info *n, uint64_t *islands, int max);
/* The same, always computed from ngpus and the nvlink masks (no memo). */
int gs_topo_islands_fresh(const struct gs_node_info *n, uint64_t *islands, int max);
/* Stores each GPU's island in n->gpus[g].island. The cache calls it whenever
 * it writes a node's ngpus or nvlink masks (node add and update), the only
 * inputs of the islands, so the stored ones always match a fresh computation. */
void gs_topo_memo_islands(struct gs_node_info *n);
/* GPUs of n with share milli and mem_mib free (healthy). */
uint64_t gs_topo_fit_mask(const struct gs_node_info *n, int32_t milli, int64_t mem_mib);
/* Most GPUs with the share free inside one NVLink island. */
int32_t gs_topo_largest_free_island(const struct gs_node_info *n, int32_t milli, int64_t mem_mib);

struct gs_gpu_choice {
    uint64_t mask;
    enum gs_link_level level;   /* interconnect of the chosen set */
    int32_t group_free;         /* fitting GPUs in the group the set came from */
};

/* Picks count GPUs with the share among allowed: one NVLink island when one
 * can hold them, else one NUMA node, else any; inside the level the group
 * with the fewest fitting GPUs, never splitting the last wholly free island
 * when another group of the same level fits; inside a group the GPUs with the
 * least free share first. false when fewer than count fit. */
bool gs_topo_choose(const struct gs_node_info *n, int32_t count, int32_t milli, int64_t mem_mib, uint64_t allowed,
                    struct gs_gpu_choice *out);
/* Compactness 0..100 of the best choice for count GPUs (0 when none fits). */
int64_t gs_topo_compactness(const struct gs_node_info *n, int32_t count, int32_t milli, int64_t mem_mib);

/*--- Compactness memo ---*/

/*
 * gs_topo_compactness of cache nodes, remembered per node and request until
 * the node changes. The score reads only the node's GPU slots (share and
 * memory free, health, pods, NUMA node, island) and the request (count,
 * milli, memory), and the cache bumps a node's generation on every change to
 * those slots; a node's identity at an index changes only with the cache's
 * epoch (node add, remove, update). An entry is therefore kept under (epoch,
 * generation, request) and is exactly what a fresh call would return. Rows
 * hold GS_TOPO_MEMO_KINDS requests; a further request evicts the least
 * recently used one (one pass over the rows). Only for records the cache
 * owns (n->idx names the slot): a copy of a record must use
 * gs_topo_compactness.
 */
#define GS_TOPO_MEMO_KINDS 16
struct gs_topo_memo;
/* NULL on allocation failure; free with gs_topo_memo_free. */
struct gs_topo_memo *gs_topo_memo_new(void);
void gs_topo_memo_free(struct gs_topo_memo *m);
/* Selects the request for the following lookups, on cache c (drops every
 * entry when c's epoch moved). 0 or GS_ENOMEM (then lookups compute). */
int gs_topo_memo_select(struct gs_topo_memo *m, const struct gs_cache *c, int32_t count, int32_t milli,
                        int64_t mem_mib);
/* gs_topo_compactness(n, request of the last select). */
int64_t gs_topo_memo_compactness(struct gs_topo_memo *m, const struct gs_node_info *n);
/* Lookups answered from the memo and computed, since the memo was made. */
void gs_topo_memo_stats(const struct gs_topo_memo *m, uint64_t *hits, uint64_t *misses);

/* The node's value of a topology-domain label (topology.gpusched.io/rack), or NULL. */
const char *gs_topo_domain(const struct gs_node_info *n, const char *key);

#define GS_LABEL_TOPO_RACK "topology.gpusched.io/rack"
#define GS_LABEL_TOPO_BLOCK "topology.gpusched.io/block"
/* Pod annotation: interconnect the pod requires ("nvlink" or "numa"). */
#define GS_ANN_GPU_INTERCONNECT "gpusched.io/gpu-interconnect"

#endif
