/*
 * topology.h - the topology manager: NUMA hints from each resource, merged
 * the way kubelet's TopologyManager merges them, and an admit decision per
 * policy (none, best-effort, restricted, single-numa-node) and scope
 * (container or pod).
 *
 * A hint is a NUMA bitmask plus a "preferred" flag. Every resource a container
 * asks for (GPUs from a device plugin, CPUs) offers a list of hints: every
 * set of NUMA nodes that could satisfy the request, preferred when the set is
 * as small as the request could ever need. The manager takes one hint from
 * each resource in every combination, ANDs the masks (preferred only if all
 * were), drops empty results, and keeps the best: preferred beats
 * non-preferred, then the narrower mask wins (fewer nodes, then the lower
 * node numbers). A resource that does not care (no topology) offers the
 * single hint {any, preferred}; one that cannot be satisfied at all offers
 * {any, not preferred}.
 *
 * Policies then decide: none admits without merging; best-effort admits
 * always; restricted admits only a preferred result; single-numa-node first
 * drops every hint spanning more than one node, then admits only a preferred
 * result. Scope container merges per container; scope pod merges the sum of
 * the pod's requests once and gives every container the same affinity.
 *
 * Pure functions, no allocation, no threads.
 */
#ifndef GS_NODE_TOPOLOGY_H
#define GS_NODE_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_TOPO_MAX_NUMA 8        /* kubelet refuses machines with more NUMA nodes */
#define GS_TOPO_MAX_HINTS 255     /* every non-empty subset of 8 nodes */
#define GS_TOPO_MAX_RES 8         /* resources per container */

enum gs_topo_policy { GS_TOPO_NONE, GS_TOPO_BEST_EFFORT, GS_TOPO_RESTRICTED, GS_TOPO_SINGLE_NUMA };
enum gs_topo_scope { GS_TOPO_SCOPE_CONTAINER, GS_TOPO_SCOPE_POD };

/* mask 0 means "no NUMA affinity" (kubelet's nil mask): any node. */
struct gs_topo_hint {
    uint32_t mask;
    bool preferred;
};

/* One resource's hints. n < 0: no preference (nil). n == 0: no possible
 * placement (an empty, non-nil list). */
struct gs_topo_hints {
    int n;
    const struct gs_topo_hint *v;
};

/* Parses "none", "best-effort", "restricted", "single-numa-node". 0 or GS_EINVAL. */
int gs_topo_policy_parse(const char *s, enum gs_topo_policy *p);
const char *gs_topo_policy_name(enum gs_topo_policy p);
/* Parses "container" or "pod". */
int gs_topo_scope_parse(const char *s, enum gs_topo_scope *sc);

/* Merges hint lists per the policy's rules on a machine with n_numa nodes.
 * *best gets the chosen hint (mask 0 only under policy none, or when
 * single-numa-node found nothing but "any"); returns true when admitted. */
bool gs_topo_merge(enum gs_topo_policy policy, int n_numa, const struct gs_topo_hints *providers, size_t n,
                   struct gs_topo_hint *best);

/* Hints for a request of `request` units of a resource, as kubelet's device
 * manager generates them: one hint per NUMA set whose available units cover
 * the request; preferred when the set has as few nodes as the smallest set
 * whose total (healthy, allocated or not) units could cover it. Writes at
 * most max hints into out and returns how many (0 = no possible placement). */
int gs_topo_hints_for(int n_numa, const int *avail, const int *total, int request, struct gs_topo_hint *out,
                      size_t max);

/*--- Admission of a pod ---*/

/* A resource on the node: units available and total per NUMA node.
 * no_topology: the resource has no NUMA information (offers "don't care"). */
struct gs_topo_resource {
    const char *name;
    int avail[GS_TOPO_MAX_NUMA];
    int total[GS_TOPO_MAX_NUMA];
    bool no_topology;
};

struct gs_topo_container {
    const char *name;
    int n;
    const char *res[GS_TOPO_MAX_RES];
    int count[GS_TOPO_MAX_RES];
};

struct gs_topo_config {
    enum gs_topo_policy policy;
    enum gs_topo_scope scope;
    int n_numa;
};

/* Decides whether a pod fits the policy. affinity[i] gets container i's hint
 * (its mask says where to allocate). Under container scope each admitted
 * container's units are taken from res (a copy) before the next container
 * is considered, nearest nodes first, as allocation would. Returns true when
 * admitted; otherwise why says which container failed. */
bool gs_node_topo_admit(const struct gs_topo_config *cfg, const struct gs_topo_resource *res, size_t nres,
                   const struct gs_topo_container *ctrs, size_t nctr, struct gs_topo_hint *affinity, char *why,
                   size_t whylen);

#endif
