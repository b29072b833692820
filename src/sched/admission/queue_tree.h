/*
 * queue_tree.h - the tree of queues that admission reasons about.
 *
 * One model for three families of queue objects. A node of the tree has a
 * parent, a weight, a priority and, per (flavor, resource), a quota: the
 * nominal (guaranteed) amount, how much more it may borrow from its parent
 * (borrowingLimit, nil = unlimited) and how much of its nominal it lends
 * (lendingLimit, nil = all of it). Workloads are submitted to leaves.
 *
 *  - Kueue: a ClusterQueue is a leaf; its resourceGroups give, per flavor,
 *    nominalQuota / borrowingLimit / lendingLimit; `cohortName` (v1beta2) or
 *    `cohort` (v1beta1) makes it the child of a cohort node (created on first
 *    mention, quota 0). A LocalQueue maps (namespace, name) to a ClusterQueue;
 *    a ResourceFlavor names node labels. Kueue's defaults are kept: preemption
 *    Never/Never, BestEffortFIFO, fairSharing.weight 1, and a workload asking
 *    for a resource its ClusterQueue does not cover is inadmissible.
 *  - Volcano / gpusched Queue: `parent`, `weight`, `priority`, guarantee
 *    (deserved) as nominal and capability as nominal + borrowing limit, on the
 *    implicit "default" flavor (no node labels). Queues without a parent hang
 *    under an implicit root whose quota is the cluster's capacity
 *    (gs_queue_tree_set_capacity). Uncovered resources fall back to that
 *    capacity; reclaim defaults to Any and within-queue preemption to
 *    LowerPriority, as Volcano's reclaim/preempt actions behave.
 *
 * Quotas are exact integers in milli-units as gs_quantity_parse gives them
 * (8 GPUs = 8000, "1Gi" = 2^30 * 1000); sums saturate at GS_QT_UNLIMITED.
 * Resources and flavors are interned into small ids so accounting is a flat
 * array indexed by GS_QT_FR(flavor, resource).
 *
 * Build: add objects or specs in any order, then gs_queue_tree_finalize()
 * links parents by name, refuses cycles and unknown parents, and fills the
 * derived fields. The tree is read-only after that.
 */
#ifndef GS_SCHED_ADMISSION_QUEUE_TREE_H
#define GS_SCHED_ADMISSION_QUEUE_TREE_H

#include "core/error.h"
#include "core/labels.h"
#include "core/object.h"

#include <stdbool.h>
#include <stdint.h>

#define GS_QT_MAX_RES 8
#define GS_QT_MAX_FLAVORS 16
#define GS_QT_MAX_GROUPS 16
#define GS_QT_NFR (GS_QT_MAX_RES * GS_QT_MAX_FLAVORS)
#define GS_QT_FR(f, r) ((f) * GS_QT_MAX_RES + (r))
#define GS_QT_UNLIMITED INT64_MAX
#define GS_QT_DEFAULT_FLAVOR "default-flavor"
#define GS_QT_ROOT_NAME "gpusched-root"

enum gs_qt_kind {
    GS_QT_ROOT,         /* implicit root of Volcano-style queues */
    GS_QT_COHORT,       /* Kueue cohort (interior, no own quota) */
    GS_QT_CLUSTERQUEUE, /* Kueue ClusterQueue (leaf) */
    GS_QT_QUEUE,        /* Volcano / gpusched Queue (leaf or interior) */
};

enum gs_qt_strategy { GS_QT_BEST_EFFORT_FIFO, GS_QT_STRICT_FIFO };

/* Who may be preempted. withinClusterQueue uses NEVER, LOWER_PRIORITY,
 * LOWER_OR_NEWER_EQUAL; reclaimWithinCohort uses NEVER, LOWER_PRIORITY, ANY. */
enum gs_qt_preempt { GS_PREEMPT_NEVER, GS_PREEMPT_LOWER_PRIORITY, GS_PREEMPT_LOWER_OR_NEWER_EQUAL, GS_PREEMPT_ANY };

struct gs_qt_quota {
    bool set;                /* this (flavor, resource) is covered */
    int64_t nominal;
    int64_t borrowing_limit; /* GS_QT_UNLIMITED = nil */
    int64_t lending_limit;   /* GS_QT_UNLIMITED = nil */
};

/* A Kueue resourceGroup: the covered resources and flavors to try, in order. */
struct gs_qt_group {
    uint8_t res[GS_QT_MAX_RES];
    int nres;
    uint8_t flavors[GS_QT_MAX_FLAVORS];
    int nflavors;
};

struct gs_qt_node {
    char *name;
    enum gs_qt_kind kind;
    char *parent_name;        /* as written; resolved by finalize */
    int32_t parent;           /* -1 for a root */
    int32_t *children;
    int32_t nchildren;
    int32_t depth;
    double weight;            /* fair-sharing weight, >= 0 (0: never gets more than its guarantee) */
    int32_t priority;         /* higher: served first, reclaimed last */
    enum gs_qt_strategy strategy;
    enum gs_qt_preempt within;  /* preemption inside the queue */
    enum gs_qt_preempt reclaim; /* reclaim of borrowed capacity in the tree */
    bool strict_cover;        /* Kueue: uncovered resources are inadmissible */
    struct gs_qt_group groups[GS_QT_MAX_GROUPS];
    int ngroups;
    struct gs_qt_quota quota[GS_QT_NFR];
};

struct gs_qt_flavor {
    char *name;
    struct gs_labels node_labels;
};

struct gs_qt_local {
    char *namespace_, *name, *cluster_queue;
    int32_t target; /* node index after finalize, -1 when unknown */
};

struct gs_queue_tree {
    struct gs_qt_node *nodes;
    int32_t n, cap;
    char *res_names[GS_QT_MAX_RES];
    int nres;
    struct gs_qt_flavor flavors[GS_QT_MAX_FLAVORS];
    int nflavors;
    struct gs_qt_local *locals;
    size_t nlocals, caplocals;
    bool finalized;
};

/* A queue given programmatically (tests, the simulator). Quotas are on the
 * default flavor; a resource absent from guarantee has nominal 0, absent
 * from limit is unlimited. */
struct gs_qt_queue_spec {
    const char *name;
    const char *parent;       /* NULL: under the implicit root */
    double weight;            /* 0 is taken as 1 */
    int32_t priority;
    const char *const *res;   /* resource names */
    const int64_t *guarantee; /* milli per res[i] */
    const int64_t *limit;     /* milli per res[i]; GS_QT_UNLIMITED for none; NULL: all unlimited */
    size_t nres;
    enum gs_qt_strategy strategy;
    enum gs_qt_preempt within, reclaim;
};

void gs_queue_tree_init(struct gs_queue_tree *t);
void gs_queue_tree_free(struct gs_queue_tree *t);

/* Adds a Queue, ClusterQueue, LocalQueue or ResourceFlavor object (borrowed;
 * nothing is kept pointing into it). Other kinds: GS_EINVAL with a diag.
 * Problems are reported with the object's name and the field path. */
int gs_queue_tree_add_object(struct gs_queue_tree *t, const struct gs_object *o, struct gs_diags *d);
/* Adds a Volcano-style queue. GS_EEXIST for a duplicate name. */
int gs_queue_tree_add_queue(struct gs_queue_tree *t, const struct gs_qt_queue_spec *s);
/* Adds a ResourceFlavor / LocalQueue by value. */
int gs_queue_tree_add_flavor(struct gs_queue_tree *t, const char *name, const struct gs_labels *node_labels);
int gs_queue_tree_add_local(struct gs_queue_tree *t, const char *ns, const char *name, const char *cluster_queue);

/* Links parents, checks the tree (unknown parent, cycles, leaves), fills
 * defaults. 0 or GS_EINVAL with every problem in d. */
int gs_queue_tree_finalize(struct gs_queue_tree *t, struct gs_diags *d);

/* Sets the implicit root's quota for a resource on the default flavor (the
 * cluster's capacity); its own nominal becomes what the children's
 * guarantees leave. Call after finalize; a no-op without Volcano queues. */
int gs_queue_tree_set_capacity(struct gs_queue_tree *t, const char *res, int64_t milli);

/* Ids: node by name, resource and flavor by name (-1 when unknown). */
int32_t gs_queue_tree_find(const struct gs_queue_tree *t, const char *name);
int gs_queue_tree_res(const struct gs_queue_tree *t, const char *name);
int gs_queue_tree_flavor(const struct gs_queue_tree *t, const char *name);
/* Interns a resource name (may be called before finalize). Id or GS_ERANGE when full. */
int gs_queue_tree_intern_res(struct gs_queue_tree *t, const char *name);

/* The leaf a workload goes to: the LocalQueue `name` in namespace ns, else a
 * leaf queue called `name`. -1 when none. */
int32_t gs_queue_tree_resolve(const struct gs_queue_tree *t, const char *ns, const char *name);

static inline bool gs_queue_tree_is_leaf(const struct gs_queue_tree *t, int32_t i)
{
    return t->nodes[i].nchildren == 0 && (t->nodes[i].kind == GS_QT_CLUSTERQUEUE || t->nodes[i].kind == GS_QT_QUEUE);
}

const char *gs_qt_preempt_name(enum gs_qt_preempt p);
const char *gs_qt_strategy_name(enum gs_qt_strategy s);

#endif
