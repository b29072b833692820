/*
 * sched_loop.h - the scheduler loop, fed by a source (source.h): the
 * server's own store in process, or any Kubernetes API server.
 *
 * One thread. It lists nodes and pods from the source and loads them all into
 * the scheduler's cache (bound pods with the devices their annotation names)
 * before the first decision, then follows the source's change stream: nodes
 * added, updated, removed; pods created, changed, finished, deleted. Pods
 * whose spec.schedulerName matches a profile of the configuration are
 * queued with that profile's scheduler (one gs_scheduler per profile, all on
 * one cache); others are only accounted for once bound.
 *
 * A decision is written back as one binding of the pod (one store
 * transaction per round for the in-process source):
 * spec.nodeName, the annotation gpusched.io/devices ("GPU-<uuid>" per chosen
 * GPU, with ":<milli>" for a share), status.devices and the condition
 * PodScheduled=True. A pod that fits nowhere gets PodScheduled=False, reason
 * Unschedulable, message = the diagnosis line ("0/3 nodes are available:
 * ..."), written only when it changed. Status-only changes to a queued pod
 * (its own condition coming back through the stream, an agent's report) do
 * not requeue it.
 *
 * Without a configuration the loop runs the "gpusched" profile
 * (gs_sched_config_gpusched: gang, topology, spread, preemption). PodGroups
 * and NodeResourceTopology objects are followed too: groups go to every
 * profile's scheduler, topologies to the cache. Gang members that the
 * Permit stage releases later are bound through the driver's hooks; pods
 * that preemption evicts are marked Failed, reason Preempted
 * (restartPolicy Never) or re-created unbound under a new uid, with an
 * Event "Preempted" either way. Each binding and each failed attempt is
 * also recorded as an Event (Scheduled, FailedScheduling with the
 * diagnosis) through opts.events, which never blocks the loop (events.h).
 *
 * Everything is read and written through a struct gs_source (source.h):
 * the server hands it its in-process source, the standalone scheduler a
 * Kubernetes one, and this loop is the same for both. Writes: bindings
 * through gs_source_bind (one call per round), victims of preemption
 * through gs_source_preempt, conditions and status.nominatedNodeName
 * through status-only mutates.
 *
 * As kube-scheduler: a pod with a non-empty spec.schedulingGates is not
 * queued; it gets PodScheduled=False, reason SchedulingGated, and enters the
 * queue when its gates are removed. A preemptor gets
 * status.nominatedNodeName (the node its victims ran on), cleared when it
 * binds elsewhere or a later attempt finds it unschedulable without
 * preempting. A binding answered "already bound" (another replica won the
 * pod) is forgotten, and the stream tells where the pod went.
 *
 * Pods labelled kueue.x-k8s.io/queue-name pass admission first
 * (admission_loop.h): they enter the queue only once their ClusterQueue or
 * Queue has quota for them, and carry the condition QuotaReserved.
 */
#ifndef GS_CONTROL_SCHED_LOOP_H
#define GS_CONTROL_SCHED_LOOP_H

#include "control/store.h"
#include "informer/source.h"
#include "sched/framework.h"

#include <stdbool.h>
#include <stdint.h>

struct gs_admission_opts;

struct gs_sched_loop_opts {
    struct gs_source *source;             /* borrowed: every read and write (source.h) */
    const struct gs_sched_config *config; /* borrowed; NULL: the built-in default profile */
    uint64_t seed;
    struct gs_hist *cycle_latency;        /* optional (govern/metrics.h): each cycle's seconds are observed */
    const struct gs_admission_opts *admission; /* admission tuning, copied; NULL: defaults (admission_loop.h) */
    struct gs_recorder *events;           /* borrowed (events.h): Scheduled, FailedScheduling, Preempted; NULL: none */
    /* Leadership: false keeps the loop following the stream (its cache
     * current) but it runs no cycles and writes nothing; bindings assumed
     * but not yet written when it turns false are forgotten and requeued.
     * Asked before each round and right before each bind. NULL: always. */
    bool (*may_write)(void *ctx);
    void *may_write_ctx;
    const char *component;                /* Events' reportingComponent; NULL: "default-scheduler" */
};

struct gs_sched_loop_stats {
    uint64_t bound;          /* bindings written */
    uint64_t unschedulable;  /* Unschedulable conditions written */
    uint64_t attempts;       /* scheduling cycles */
    uint64_t write_failures; /* bindings the store refused (pod changed or deleted meanwhile) */
    bool synced;             /* the initial load is done */
    /* Queue depth after the last round, all profiles (for /metrics). */
    uint64_t queue_active, queue_backoff, queue_unschedulable;
    uint64_t bind_conflicts;   /* of write_failures: the pod was bound already (another scheduler) */
    uint64_t binds_dropped;    /* assumed bindings forgotten unwritten because may_write turned false */
    uint64_t nominations;      /* status.nominatedNodeName written for a preemptor */
};

struct gs_sched_loop;

/* Starts the thread. 0, GS_ENOMEM, or an error from the profile (d filled). */
int gs_sched_loop_start(const struct gs_sched_loop_opts *o, struct gs_sched_loop **out, struct gs_diags *d);
/* The key prefixes the loop lists and follows (kinds[]): what a kube source
 * must inform for it. Into out (cap entries, NULL-terminated); the count. */
size_t gs_sched_loop_prefixes(const char **out, size_t cap);
/* Stops and joins the thread, frees everything. */
void gs_sched_loop_stop(struct gs_sched_loop *l);
void gs_sched_loop_stats(struct gs_sched_loop *l, struct gs_sched_loop_stats *out);

/* The loop's Prometheus text (queue depth, attempts by result, binding
 * failures, the cycle-latency histogram when given) appended to b: the same
 * lines for `gpusched server` and `gpusched scheduler`. */
struct gs_mbuf;
struct gs_hist;
void gs_sched_loop_metrics(struct gs_sched_loop *l, struct gs_hist *cycle_hist, struct gs_mbuf *b);

/* The explain report (sched/explain.h) for pod ns/name, computed by the loop
 * thread from its live cache between cycles; callable from any thread. 0 with
 * *text (free it), GS_ENOENT when the loop does not know the pod, GS_ESTATE
 * when the loop is stopping. */
int gs_sched_loop_explain(struct gs_sched_loop *l, const char *ns, const char *name, char **text);
/* Runs fn(cache, arg) on the loop thread between rounds, as explain does:
 * what the tests use to hold the cache's accounting against the store.
 * GS_ESTATE when the loop stopped. */
struct gs_cache;
int gs_sched_loop_inspect(struct gs_sched_loop *l, void (*fn)(struct gs_cache *c, void *arg), void *arg);

/* "GPU-a,GPU-b" (":<milli>" appended for shares) for the GPUs of mask on node;
 * GPUs without a uuid are named by index. Returns the length (snprintf). */
int gs_devices_format(const struct gs_node *node, uint64_t mask, int32_t milli, char *buf, size_t len);
/* The inverse: GPU mask and per-GPU milli (1000 when not given) from an
 * annotation, against node's devices. GS_EINVAL when a name matches no GPU. */
int gs_devices_parse(const struct gs_node *node, int32_t ngpus, const char *text, uint64_t *mask, int32_t *milli);

#endif
