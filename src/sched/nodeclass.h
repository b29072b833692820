/*
 * nodeclass.h - nodes grouped into classes of equal state, kept up to date
 * as the cache changes, so a scheduling cycle filters and scores each class
 * once instead of each node.
 *
 * A node's class is everything a class-aware plugin may read of it (see
 * "Node classes" in plugin.h): its hot record; its allocatable and used CPU,
 * memory, pods and extended resources; its GPU model and every GPU slot in
 * index order (free milli and memory, pods, total memory, NUMA node, NVLink
 * peers and island, health); its labels except kubernetes.io/hostname; the
 * node object's spec.unschedulable and taints (whether it has an object at
 * all); its schedulable flag, pod count and NodeResourceTopology (by
 * identity). Two nodes of one class differ only in name, index, generation,
 * that one label and the rest of their objects, so a plugin whose verdict or
 * score is a function of the above gives every member the same answer.
 *
 * The key is a byte string written from those fields (length-prefixed, so
 * equal bytes mean equal fields); classes are found by its hash and compared
 * byte for byte, so a hash collision never merges two classes. Each class
 * keeps its members in a min-heap of node indices: the framework's
 * tie-break (equal totals go to the lowest node index) reads the heap top.
 *
 * The cache owns one index (created on the first gs_cache_classes call) and
 * tells it which slots changed (gs__nodeclass_mark, from every path that
 * changes a node); the index re-keys only those slots when it is next read.
 * Not thread-safe, like the cache.
 */
#ifndef GS_SCHED_NODECLASS_H
#define GS_SCHED_NODECLASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_cache;
struct gs_nodeclasses;

/* The label left out of a node's class: it names the node, so keeping it
 * would give every node a class of its own. A plugin reading it (or the
 * node's name) must not claim to be class-aware for that pod. */
#define GS_CLASS_IGNORED_LABEL "kubernetes.io/hostname"

/* One class: n > 0 live member nodes, min = the lowest member index (also
 * the representative a plugin is shown), schedulable as the members' flag. */
struct gs_nodeclass {
    int32_t min;
    int32_t n;
    bool schedulable;
};

/* The cache's classes, brought up to date (borrowed; valid until the cache
 * next changes). NULL when out of memory. Defined in nodeclass.c. */
struct gs_nodeclasses *gs_cache_classes(struct gs_cache *c);
/* Number of classes with live members, and class i of them (0 <= i < count).
 * The order is unspecified and may change whenever the cache does. */
size_t gs_nodeclass_count(const struct gs_nodeclasses *x);
struct gs_nodeclass gs_nodeclass_get(const struct gs_nodeclasses *x, size_t i);
/* The lowest member of class i but its min (the next representative when
 * the min is judged apart), or -1 for a class of one node. */
int32_t gs_nodeclass_runner_up(const struct gs_nodeclasses *x, size_t i);
/* The class number (an index for gs_nodeclass_get) of node slot idx, or -1
 * for a dead slot. */
int32_t gs_nodeclass_of(const struct gs_nodeclasses *x, int32_t idx);
/* Checks every member against a fresh key (tests): 0 or GS_ESTATE. */
int gs_nodeclass_check(struct gs_cache *c, char *why, size_t len);

/* For the cache: a new empty index; free; slot idx changed (added, removed,
 * any field above). 0 or GS_ENOMEM (the index then rebuilds everything). */
struct gs_nodeclasses *gs__nodeclass_new(void);
void gs__nodeclass_free(struct gs_nodeclasses *x);
void gs__nodeclass_mark(struct gs_nodeclasses *x, int32_t idx);
/* Re-keys the marked slots (every slot after an out-of-memory). 0 or GS_ENOMEM. */
int gs__nodeclass_sync(struct gs_nodeclasses *x, struct gs_cache *c);

#endif
