/*
 * gang_core.h - gang scheduling (Coscheduling) without the framework.
 *
 * A group is a PodGroup (scheduling.x-k8s.io/v1alpha1, Volcano's
 * scheduling.volcano.sh/v1beta1 or the native scheduling.k8s.io/v1beta1) and
 * the pods naming it (label scheduling.x-k8s.io/pod-group, annotation
 * scheduling.k8s.io/group-name or spec.schedulingGroup.podGroupName, same
 * namespace), matched by the group key of core/object.h ("ns/<pod_group>")
 * so equal names of two shapes are two groups. The core keeps the registry, orders the queue so a
 * group's pods come out together, admits a group only when all minMember
 * pods are there and its demand fits free + preemptible capacity, plans a
 * whole group at once (every pending member placed on the cache, then the
 * plan is undone and each member is steered to its planned node), and tells
 * the adapter which siblings to allow or reject at Permit and Unreserve.
 *
 * Membership in the cache (assumed or bound) is the source of truth for
 * "reserved": what the core remembers from the cache (placed members,
 * preemptible and free capacity, node label domains) is keyed on the
 * cache's version counters, so it is dropped as soon as the cache moves.
 *
 * The adapter (plugins/gang.c) maps this onto the framework; unit tests
 * drive it directly with a cache and a clock.
 */
#ifndef GS_SCHED_GANG_CORE_H
#define GS_SCHED_GANG_CORE_H

#include "core/clock.h"
#include "core/object.h"
#include "sched/cache.h"
#include "sched/plugin.h"
#include "sched/status.h"

#include <stdbool.h>
#include <stdint.h>

#define GS_GANG_DEFAULT_WAIT_S 60
/* PodGroup annotations naming a node label that all members must share
 * (required) or should share (preferred), e.g. topology.gpusched.io/rack. */
#define GS_ANN_GANG_REQUIRED_TOPOLOGY "gpusched.io/required-topology"
#define GS_ANN_GANG_PREFERRED_TOPOLOGY "gpusched.io/preferred-topology"

struct gs_gang_opts {
    int32_t permit_wait_s;       /* default wait when the PodGroup has no scheduleTimeoutSeconds (60) */
    int32_t backoff_s;           /* group backoff after a failure (0) */
    int32_t reject_percentage;   /* a member failing rejects the waiting siblings when the
                                  * unassigned share of minMember exceeds this (0: always) */
    bool whole_group_plan;       /* plan all members in one decision (true) */
    const char *topology_key;    /* default domain label for groups without an annotation; NULL none */
    bool topology_required;
};

struct gs_gang_stats {
    int64_t admitted, rejected_incomplete, rejected_capacity, rejected_backoff;
    int64_t plans, plan_failures, permits_waited, groups_started, timeouts_or_failures;
};

struct gs_gang;
struct gs_gang_group;

/* clock and cache borrowed. NULL on allocation failure. */
struct gs_gang *gs_gang_new(const struct gs_gang_opts *o, const struct gs_clock *clock, struct gs_cache *cache);
void gs_gang_free(struct gs_gang *g);

/* Registry. PodGroups and pods are borrowed until removed. */
int gs_gang_add_podgroup(struct gs_gang *g, const struct gs_podgroup *pg);
void gs_gang_remove_podgroup(struct gs_gang *g, const struct gs_podgroup *pg);
int gs_gang_add_pod(struct gs_gang *g, const struct gs_pod *pod);
void gs_gang_remove_pod(struct gs_gang *g, const struct gs_pod *pod);

/* The pod's group, or NULL (no group label). */
struct gs_gang_group *gs_gang_group_of(struct gs_gang *g, const struct gs_pod *pod);
const char *gs_gang_group_key(const struct gs_gang_group *gr);
int32_t gs_gang_min_member(const struct gs_gang_group *gr);
/* Members known (arrived), and how many are in the cache (reserved or bound). */
size_t gs_gang_members(const struct gs_gang_group *gr, const struct gs_pod *const **pods);
int32_t gs_gang_placed(const struct gs_gang *g, const struct gs_gang_group *gr);
/* Per member, in gs_gang_members' order: 1 when it is in the cache (assumed
 * or bound), as gs_cache_pod_assignment would say now. Borrowed until the
 * members or the cache change. */
const uint8_t *gs_gang_placed_flags(struct gs_gang *g, struct gs_gang_group *gr);
/* Permit wait of the group in ns. */
int64_t gs_gang_timeout_ns(const struct gs_gang *g, const struct gs_gang_group *gr);

/* QueueSort: priority, then group (or pod) creation time, then name. */
bool gs_gang_less(struct gs_gang *g, const struct gs_queued_pod *a, const struct gs_queued_pod *b);

/* PreFilter checks that hold nothing: group known, not backing off, minMember
 * pods present, demand within free + preemptible capacity. Success (also for
 * a group already started), or a rejection with a reason. */
struct gs_status gs_gang_admit(struct gs_gang *g, const struct gs_pod *pod);

/* Finds a node for pod on the cache as it is now, restricted to nodes whose
 * label domain_key equals domain (when domain is non-NULL). Fills a (node,
 * GPUs, share) and returns 0, or returns -1 when no node fits. */
typedef int (*gs_gang_place_fn)(void *ctx, const struct gs_pod *pod, const char *domain_key, const char *domain,
                                struct gs_assignment *a);
/* Plans every member not yet placed. Success (plan stored), or Unschedulable
 * with the member that did not fit. The cache is left exactly as it was. */
struct gs_status gs_gang_plan(struct gs_gang *g, const struct gs_pod *pod, gs_gang_place_fn place, void *ctx);
/* True while gs_gang_plan runs (the adapter's PreFilter then steps aside:
 * planning runs the profile's filters, this plugin's included). */
bool gs_gang_planning(const struct gs_gang *g);
/* Is the stored plan still valid for the pod's group (nothing else changed
 * the planned nodes since)? */
bool gs_gang_plan_valid(const struct gs_gang *g, const struct gs_pod *pod);
/* The planned node of pod, or -1. */
int32_t gs_gang_planned_node(const struct gs_gang *g, const struct gs_pod *pod);
/* The group's domain constraint: label key (NULL none) and whether required;
 * *domain gets the domain of already placed members (NULL when none). */
const char *gs_gang_domain(struct gs_gang *g, const struct gs_pod *pod, bool *required, const char **domain);

/* Reserve done for pod on node (keeps the plan's bookkeeping). */
void gs_gang_reserved(struct gs_gang *g, const struct gs_pod *pod, int32_t node);
/* Permit: GS_SUCCESS when minMember members are placed (the adapter then
 * allows every sibling in *allow), else GS_WAIT with *timeout_ns. *allow
 * (malloc'd keys array, caller frees with gs_gang_keys_free) may be NULL. */
enum gs_code gs_gang_permit(struct gs_gang *g, const struct gs_pod *pod, int64_t *timeout_ns, char ***allow,
                            size_t *nallow);
/* A member failed after Reserve (Unreserve: timeout, rejection) or could
 * not be placed (PostFilter, member_failed with reserved=false). Returns the
 * siblings to reject (in the cache, not bound) in *reject, sets the group's
 * backoff. Returns 0 and nothing to reject while the group is already
 * unwinding or when the reject percentage says keep waiting. */
size_t gs_gang_member_failed(struct gs_gang *g, const struct gs_pod *pod, bool reserved, char ***reject);
void gs_gang_keys_free(char **keys, size_t n);
/* Marks the group as unwinding (set while the adapter rejects siblings, so
 * their own Unreserve does not cascade again). */
void gs_gang_set_unwinding(struct gs_gang *g, const struct gs_pod *pod, bool on);

const struct gs_gang_stats *gs_gang_stats(const struct gs_gang *g);

/* Per node slot (gs_cache_node_count entries), the value of node label key
 * or NULL; kept until the cache's epoch moves. Borrowed: valid until the next
 * call. NULL on allocation failure (then ask gs_topo_domain per node). */
const char *const *gs__gang_node_domains(struct gs_gang *g, const char *key);

/* The core behind an enabled "Coscheduling" plugin's state
 * (gs_framework_plugin_state), or NULL. For preemption and explain. */
struct gs_gang *gs__gang_of(void *coscheduling_state);

#endif
