/*
 * nodelifecycle.h - the server-side node lifecycle: what Kubernetes' node
 * lifecycle controller does for nodes whose agent stopped answering.
 *
 * A node's heartbeat is its Lease (coordination.k8s.io/v1, namespace
 * kube-node-lease, named after the node: spec.renewTime), renewed by its
 * agent, or for agents without a lease its Ready condition's
 * lastHeartbeatTime; the later of the two counts. When it is older than the grace period (counted from this
 * controller's start at the earliest, so a server that was down does not
 * condemn every node at once), the node becomes NotReady: Ready=Unknown and
 * the taint node.kubernetes.io/unreachable:NoSchedule keeps new pods away.
 * Each pod still bound to it and not finished is then
 *   - restartPolicy Never: marked Failed, reason NodeLost;
 *   - otherwise: re-created - a new uid, unbound, Pending, devices and status
 *     cleared, in the same store transaction, so it is never lost nor twice;
 *   - already being deleted (deletionTimestamp): deleted now, since the
 *     node cannot confirm that its processes stopped (finalizers still hold it).
 * A fresh heartbeat lifts the taint again.
 *
 * Only nodes that ever posted a heartbeat are watched: a Node object applied
 * by hand (no agent) is left alone. Pods bound to a node name that has no
 * Node object at all (deleted, or never registered) are treated as a lost
 * node's once the name has been missing for 40 s, checked every 20 s (what
 * Kubernetes' pod garbage collector does for orphaned pods).
 */
#ifndef GS_CONTROL_NODELIFECYCLE_H
#define GS_CONTROL_NODELIFECYCLE_H

#include "control/store.h"

#include <stdint.h>

struct gs_nodelc_opts {
    struct gs_store *store;   /* borrowed */
    int64_t grace_ms;         /* 0: $GPUSCHED_NODE_GRACE (seconds, may be fractional) or 40 s */
    int64_t period_ms;        /* scan period; 0: 500 ms */
    struct gs_recorder *events; /* borrowed (events.h): NodeNotReady, pod evictions; NULL: none */
};

struct gs_nodelc_stats {
    uint64_t not_ready;       /* transitions to NotReady */
    uint64_t pods_failed;     /* pods marked Failed (NodeLost) */
    uint64_t pods_recreated;  /* pods re-created */
    uint64_t pods_deleted;    /* terminating pods deleted for their lost node */
    uint64_t orphan_nodes;    /* node names with pods bound but no Node object */
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

#endif
