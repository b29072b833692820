/*
 * nodelifecycle.h - the server-side node lifecycle: what Kubernetes' node
 * lifecycle controller and its taint-based eviction do for nodes whose agent
 * stopped answering.
 *
 * A node's heartbeat is its Lease (coordination.k8s.io/v1, namespace
 * kube-node-lease, named after the node: spec.renewTime), renewed by its
 * agent, or for agents without a lease its Ready condition's
 * lastHeartbeatTime; the later of the two counts. When it is older than the
 * grace period (counted from this controller's start at the earliest, so a
 * server that was down does not condemn every node at once), the node
 * becomes unreachable: Ready=Unknown and the taints
 * node.kubernetes.io/unreachable:NoSchedule (new pods stay away) and
 * node.kubernetes.io/unreachable:NoExecute (running pods are evicted once
 * their toleration of it runs out). A node whose agent reports Ready=False
 * gets node.kubernetes.io/not-ready with both effects instead. A fresh
 * heartbeat (or Ready=True) lifts them again.
 *
 * Eviction, per pod bound to a node with one of those NoExecute taints, not
 * finished: at the taint's timeAdded plus the smallest tolerationSeconds of
 * the pod's tolerations of it (at once when it does not tolerate the taint,
 * never when it tolerates it without tolerationSeconds; the API server gives
 * every pod 300 s, admit_defaults.h). An evicted pod gets the annotation
 * gpusched.io/evicted-at and the condition DisruptionTarget (reason
 * DeletionByTaintManager); restartPolicy Never pods are also marked Failed,
 * reason NodeLost. Its processes may still run on the partitioned node, so
 * its devices stay held (the scheduler counts them, sched_loop.c) and it is
 * not re-created until one of:
 *   - the node confirms: its returning agent stopped the processes and
 *     wrote the pod condition ProcessesStopped=True;
 *   - the node is declared lost: its Node object was deleted, or
 *     node-lost-timeout (5 minutes) passed since the eviction.
 * Then gpusched.io/devices-released is written (the devices are free) and
 * pods that restart (OnFailure, Always) are re-created - a new uid,
 * unbound, Pending, in the same store transaction, so never lost nor twice.
 * Pods already being deleted wait the same way and are then deleted.
 * At most one copy of a pod runs at any time, as for a StatefulSet's pods.
 *
 * Only nodes that ever posted a heartbeat are watched: a Node object applied
 * by hand (no agent) is left alone. Pods bound to a node name that has no
 * Node object at all (deleted, or never registered) are treated as a lost
 * node's once the name has been missing for 40 s, checked every 20 s (what
 * Kubernetes' pod garbage collector does for orphaned pods): there is no
 * node left that could run them.
 *
 * Reads and writes go through a source (source.h). A node's taints and its
 * Ready condition, and a pod's annotations and status, change in one
 * whole-object mutate: one transaction with the server's in-process source,
 * which is what the guarantees above rest on. (Kubernetes keeps status in a
 * subresource and runs its own node lifecycle controller; this one is not
 * meant for a kube source.)
 */
#ifndef GS_CONTROL_NODELIFECYCLE_H
#define GS_CONTROL_NODELIFECYCLE_H

#include "control/store.h"
#include "core/labels.h"
#include "informer/source.h"

#include <stdbool.h>
#include <stdint.h>

struct gs_nodelc_opts {
    struct gs_source *source; /* borrowed: every read and write (source.h) */
    int64_t grace_ms;         /* 0: $GPUSCHED_NODE_GRACE (seconds, may be fractional) or 40 s */
    int64_t period_ms;        /* scan period; 0: 500 ms */
    struct gs_recorder *events; /* borrowed (events.h): NodeNotReady, pod evictions; NULL: none */
    int64_t lost_ms;          /* node-lost-timeout past an eviction; 0: 5 minutes */
};

struct gs_nodelc_stats {
    uint64_t not_ready;       /* transitions to NotReady */
    uint64_t pods_failed;     /* pods marked Failed (NodeLost) */
    uint64_t pods_recreated;  /* pods re-created */
    uint64_t pods_deleted;    /* terminating pods deleted for their lost node */
    uint64_t orphan_nodes;    /* node names with pods bound but no Node object */
    uint64_t pods_evicted;    /* pods evicted for a NoExecute taint */
    uint64_t confirmed;       /* evictions whose node confirmed the processes stopped */
    uint64_t declared_lost;   /* evictions settled because the node was declared lost */
};

struct gs_nodelc;

int gs_nodelc_start(const struct gs_nodelc_opts *o, struct gs_nodelc **out);
void gs_nodelc_stop(struct gs_nodelc *l);
void gs_nodelc_stats(struct gs_nodelc *l, struct gs_nodelc_stats *out);

/* One scan at wall time now_s (tests drive it without the thread). */
void gs_nodelc_scan(struct gs_nodelc *l, double now_s);
/* A controller without a thread, for gs_nodelc_scan. */
int gs_nodelc_new(const struct gs_nodelc_opts *o, double start_s, struct gs_nodelc **out);

#define GS_TAINT_UNREACHABLE "node.kubernetes.io/unreachable"
#define GS_TAINT_NOT_READY "node.kubernetes.io/not-ready"
#define GS_ANN_EVICTED_AT "gpusched.io/evicted-at"              /* RFC 3339: when the taint manager evicted it */
#define GS_ANN_DEVICES_RELEASED "gpusched.io/devices-released"  /* how the eviction settled */
#define GS_COND_PROCESSES_STOPPED "ProcessesStopped"             /* the node's confirmation (pod condition) */
#define GS_NODE_LOST_DEFAULT_S 300

/* An evicted pod whose node has not confirmed nor been declared lost: its
 * devices are still held, whatever its phase. */
bool gs_nodelc_eviction_pending(const struct gs_labels *annotations);
bool gs_nodelc_eviction_pending_json(const json_t *pod);

#endif
