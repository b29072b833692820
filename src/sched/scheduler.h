/*
 * scheduler.h - a small driver tying the queue, the framework and the cache
 * together: the loop the simulator's replay mode and the server run.
 *
 * Cluster changes come in as calls (pod added/deleted, node added/removed);
 * each one updates the cache and tells the queue which cluster event it was,
 * so unschedulable pods come back when something they wait for changed.
 * gs_scheduler_run_one() pops the next pod, runs one scheduling cycle and,
 * when a node was reserved, the binding cycle right away (synchronously).
 * Failed pods are requeued: to the unschedulable set when no node fit, to
 * backoff on errors. Pods waiting at Permit are finished (bound or requeued)
 * by gs_scheduler_tick(), which run_one also calls first.
 *
 * Everything is borrowed from the caller: the clock, the cache, the profile,
 * and each pod until it is deleted.
 */
#ifndef GS_SCHED_SCHEDULER_H
#define GS_SCHED_SCHEDULER_H

#include "sched/framework.h"
#include "sched/queue.h"

/* What the driver reports outside gs_scheduler_run_one's result (all optional). */
struct gs_scheduler_hooks {
    /* A pod that waited at Permit (a gang member) was bound. */
    void (*bound)(void *ctx, const struct gs_pod *pod, const struct gs_assignment *a);
    /* A pod waiting at Permit was rejected (timeout, a gang sibling failed) and requeued. */
    void (*rejected)(void *ctx, const struct gs_pod *pod, const char *reason);
    /* A bound pod was evicted for preemptor; it has been requeued. Called before
     * its resources are freed, so a->node still names its node. */
    void (*evicted)(void *ctx, const struct gs_pod *victim, const struct gs_pod *preemptor,
                    const struct gs_assignment *a);
    void *ctx;
};

struct gs_scheduler_opts {
    const struct gs_profile *profile; /* borrowed; NULL: the built-in default profile */
    uint64_t seed;
    struct gs_queue_opts queue;       /* zeros: kube's defaults */
    int64_t assumed_ttl_ns;           /* cache assumption lifetime; 0 = no expiry */
    struct gs_scheduler_hooks hooks;
};

/* What happened to one pod in gs_scheduler_run_one(). */
struct gs_cycle_result {
    const struct gs_pod *pod;   /* NULL when the queue had nothing ready */
    enum gs_code code;          /* SUCCESS: bound; WAIT: reserved, waiting at Permit; else requeued */
    struct gs_assignment a;     /* node and devices on SUCCESS/WAIT */
    const char *reason;         /* failure text (the diagnosis when no node fit); borrowed until the next call */
    int32_t attempts;           /* attempts before this one */
    int64_t enqueued_ns;        /* when the pod first entered the queue */
    int32_t feasible_nodes;
};

struct gs_scheduler;

/* 0, or an error with d filled (bad plugin args). */
int gs_scheduler_new(const struct gs_clock *clock, struct gs_cache *cache, const struct gs_scheduler_opts *o,
                     struct gs_scheduler **out, struct gs_diags *d);
void gs_scheduler_free(struct gs_scheduler *s);

struct gs_framework *gs_scheduler_framework(struct gs_scheduler *s);
struct gs_sched_queue *gs_scheduler_queue(struct gs_scheduler *s);

/* A pod to schedule (borrowed until deleted). GS_EEXIST when queued already. */
int gs_scheduler_add_pod(struct gs_scheduler *s, const struct gs_pod *pod);
/* A pod left (deleted or completed): out of the queue and the cache; frees its resources. */
int gs_scheduler_delete_pod(struct gs_scheduler *s, const char *pod_key);
/* PodGroups (borrowed until removed), passed to the plugins (Coscheduling). */
int gs_scheduler_add_podgroup(struct gs_scheduler *s, const struct gs_podgroup *pg);
void gs_scheduler_remove_podgroup(struct gs_scheduler *s, const struct gs_podgroup *pg);
/* Earliest clock time at which something becomes due by itself (a backoff
 * ends, a Permit wait times out), or -1 when nothing is. */
int64_t gs_scheduler_next_wake(const struct gs_scheduler *s);
/* Evictions made by preemption so far. */
int64_t gs_scheduler_evictions(const struct gs_scheduler *s);
/* Node changes; return the cache's answer (node index for adds). */
int gs_scheduler_add_node(struct gs_scheduler *s, const struct gs_node *node);
int gs_scheduler_add_node_spec(struct gs_scheduler *s, const struct gs_node_spec *spec);
int gs_scheduler_update_node(struct gs_scheduler *s, const struct gs_node *node);
int gs_scheduler_remove_node(struct gs_scheduler *s, const char *name);

/* Runs one cycle. Returns 1 when a pod was attempted, 0 when none was ready, or a negative GS_E*. */
int gs_scheduler_run_one(struct gs_scheduler *s, struct gs_cycle_result *out);
/* Finishes pods waiting at Permit that were allowed, rejected or timed out, and expires
 * stale cache assumptions. Returns how many pods it bound. */
int gs_scheduler_tick(struct gs_scheduler *s);

#endif
