/*
 * preemption_core.h - priority preemption without the framework: victim
 * search by simulation on the cache, gang-aware victims, multi-node plans
 * for gang preemptors, nominated capacity and a loop guard.
 *
 * Victims are chosen in units: a single pod, or every bound pod of a gang
 * (evicting one member of a running gang evicts the gang). For each member
 * of the preemptor (one pod, or a gang's pending members) the search removes
 * the eligible units touching a node, asks fits(), and gives back units in
 * priority order while the member still fits; the node with the cheapest
 * victim set wins (lowest highest-priority victim, then fewest pods, then
 * lowest priority sum, then node index; with PodDisruptionBudgets in the
 * cache, fewest budget violations first, as kube does). Members are placed one after the
 * other on the simulated state, so a gang's plan is proven to fit on all its
 * nodes before anything is evicted. The cache is always restored exactly:
 * removed pods go back with gs_cache_add_bound and their own assignment,
 * temporary placements are forgotten.
 *
 * The candidates come from an index of the bound pods in unit order that
 * follows the cache's bind and unbind events (gs_cache_watch_bound), so a
 * search after a bind does not collect and sort every pod again; once drawn
 * for a priority they are followed event by event too (a departed single
 * pod's unit dies in place), so a search after evictions draws nothing.
 * The core must be freed before its cache.
 */
#ifndef GS_SCHED_PREEMPTION_CORE_H
#define GS_SCHED_PREEMPTION_CORE_H

#include "core/clock.h"
#include "core/object.h"
#include "sched/cache.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_preempt_opts {
    int32_t max_per_window;   /* a pod evicted this often in the window is spared (default 3) */
    int64_t window_ns;        /* default 600 s */
    int64_t nomination_ttl_ns; /* nominations lapse after this (default 60 s) */
};

struct gs_preempt_stats {
    int64_t attempts;         /* PostFilter calls that looked for victims */
    int64_t successes;        /* plans carried out */
    int64_t victims;          /* pods evicted */
    int64_t gang_victims;     /* of which members of gangs */
    int64_t refused_no_help;  /* no plan: evicting would not make the preemptor fit */
    int64_t guard_skips;      /* units spared by the loop guard */
    int64_t followed;         /* searches on candidates followed event by event since an earlier one */
};

/* Can pod run on node as the cache is now (every filter)? */
typedef bool (*gs_preempt_fits_fn)(void *ctx, const struct gs_pod *pod, struct gs_node_info *node);
/* The same for n nodes at once, on the same cache: ok[i] must be what
 * fits(nodes[i]) would answer (Filter judges each node on its own). */
typedef void (*gs_preempt_fits_many_fn)(void *ctx, const struct gs_pod *pod, struct gs_node_info *const *nodes,
                                        size_t n, bool *ok);

struct gs_preempt_fit {
    gs_preempt_fits_fn fits;           /* required */
    gs_preempt_fits_many_fn fits_many; /* optional: one PreFilter for many nodes */
    void *ctx;
    /* fits() rejects a node short of CPU, memory or pod slots by
     * NodeResourcesFit's rule: the search may then rule nodes out by
     * arithmetic before calling it. GPUs are always ruled out that way
     * (a member needs a GPU set, gs_topo_choose). */
    bool checks_resources;
};

struct gs_preempt_plan {
    const struct gs_pod **victims; /* borrowed pods, sorted by key */
    size_t nvictims;
    int32_t *nodes;                /* per member: the node it was placed on */
    size_t nmembers;
    int32_t max_priority;          /* highest victim priority (INT32_MIN when none) */
};

struct gs_preemption;

struct gs_preemption *gs_preemption_new(const struct gs_preempt_opts *o, const struct gs_clock *clock,
                                        struct gs_cache *cache);
void gs_preemption_free(struct gs_preemption *p);

/* Finds victims so that every member (members[0] the preemptor, then its
 * pending gang siblings) fits, all with the preemptor's priority. 0 with the
 * plan (caller frees with gs_preempt_plan_free), GS_ENOENT when no plan
 * exists (evicting would not help, or nothing may be evicted), GS_ENOMEM.
 * The cache is unchanged. */
int gs_preempt_find(struct gs_preemption *p, const struct gs_pod *const *members, size_t n, gs_preempt_fits_fn fits,
                    void *ctx, struct gs_preempt_plan *out);
/* The same with a batch fit test and the resource hint: same plan. */
int gs_preempt_find_with(struct gs_preemption *p, const struct gs_pod *const *members, size_t n,
                         const struct gs_preempt_fit *fit, struct gs_preempt_plan *out);
void gs_preempt_plan_free(struct gs_preempt_plan *pl);

/* Records a plan carried out: loop-guard history and counts. */
void gs_preempt_record(struct gs_preemption *p, const struct gs_preempt_plan *pl, const struct gs_pod *preemptor);
void gs_preempt_count_refusal(struct gs_preemption *p);

/* Nominated capacity. The pod is borrowed until its nomination is cleared. */
int gs_preempt_nominate(struct gs_preemption *p, const struct gs_pod *pod, int32_t node);
void gs_preempt_clear(struct gs_preemption *p, const char *pod_key);
int32_t gs_preempt_nominated_node(const struct gs_preemption *p, const char *pod_key);
/* Nominations held, expired ones included (0: no node is held for anyone). */
size_t gs_preempt_nomination_count(const struct gs_preemption *p);
/* Would placing pod on node eat into capacity nominated to another pod of at
 * least its priority? */
bool gs_preempt_blocked(struct gs_preemption *p, const struct gs_pod *pod, const struct gs_node_info *node);
/* Is gs_preempt_blocked false for pod on every node but `node` (-1: on
 * every node)? True when no nomination that could block it lies elsewhere:
 * then the Filter is the same on every node outside `node`, whatever the
 * node's state (a node class's members all answer alike). */
bool gs_preempt_blocks_only(struct gs_preemption *p, const struct gs_pod *pod, int32_t node);

const struct gs_preempt_stats *gs_preempt_stats(const struct gs_preemption *p);

/* Brings the index of bound pods the search draws its candidates from up to
 * date and compares it with one built afresh from the cache (tests): 0, or
 * GS_ESTATE with the first difference in why, or GS_ENOMEM. */
int gs__preempt_index_check(struct gs_preemption *p, char *why, size_t len);

/* Tests: with follow false the candidates are drawn for each search as
 * before they were followed (select_units, per-node lists per search) and
 * every member screens every node, the reference the followed candidates
 * and the kept screen are held to. On by default. */
void gs__preempt_set_follow(struct gs_preemption *p, bool follow);

/* The core behind an enabled "DefaultPreemption" plugin's state, or NULL. */
struct gs_preemption *gs__preemption_of(void *default_preemption_state);
/* Dry run of that plugin's PostFilter on fw (explain): the plan and the
 * members it places (*members malloc'd, caller frees). 0, GS_ENOENT, GS_ENOMEM. */
struct gs_framework;
int gs__preempt_plan_for(void *default_preemption_state, struct gs_framework *fw, const struct gs_pod *pod,
                         struct gs_preempt_plan *plan, const struct gs_pod ***members, size_t *nmembers);

#endif
