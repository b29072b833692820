/*
 * operator.h - the GPU stack operator inside the server (what NVIDIA's GPU
 * Operator controller does): one ClusterPolicy, one state machine per GPU
 * node, node labels and conditions written through the store, an Event on
 * every transition, and the scheduler's gate.
 *
 * The ClusterPolicy kept is the oldest one (creation time, then name);
 * others get status.state "ignored", as the GPU Operator does with
 * duplicates. A GPUCluster (nvidia.com/v1alpha1, policy.h) takes the place
 * of a ClusterPolicy: the same walk with the DRA kubelet plugin step instead
 * of the device plugin's; the API refuses the second of the two kinds, and
 * should both exist the oldest object of either kind is kept. Without any, nothing is governed and nodes keep no stack
 * condition (so clusters that never apply one behave as before). A policy
 * whose spec changed re-drives every node from not-ready.
 *
 * Per GPU node (status.devices non-empty, or nvidia.com/gpu.present=true)
 * the operator writes, in one store transaction when anything differs:
 *   labels      gpusched.io/gpu-stack-state=<step>, nvidia.com/gpu.present,
 *               nvidia.com/gpu.deploy.<operand>=true|false for the operands
 *               it manages (a value an administrator set is left alone and
 *               switches the component off on that node when "false");
 *   annotation  gpusched.io/gpu-stack-request: the validation it wants from
 *               the agent (policy generation, step, attempt, MIG strategy
 *               and layout, drain timeout, enabled components), as JSON;
 *   condition   GPUStackReady: True at ready, else False with reason = the
 *               step (e.g. MIGConfiguring) and message = why.
 *   annotation  gpusched.io/gpu-stack-machine: the state machine's position
 *               (policy generation and spec hash, step, attempt, request
 *               out, failures, entered and retry times in wall time, enabled
 *               steps, MIG layout, last failure), as JSON;
 * The agent answers in status.gpuStack {generation, step, attempt, ok,
 * message}; see agentstack.c.
 *
 * Restarts: the operator's generation counter and the spec's hash are kept
 * in the ClusterPolicy's status (generation, specHash), the machine's
 * position on each Node. A restarted server puts each machine back where it
 * was, publishing nothing: a ready node stays ready (its GPUs stay
 * schedulable) and is checked once more in the background, a node mid-walk
 * resumes at its step with its backoff deadline, and a policy, component set
 * or MIG layout that changed meanwhile re-drives the node as it would have
 * live. A saved position that cannot be read is logged with the field and
 * the node starts from not-ready.
 *
 * Scheduling: gs_stack_gate_node() is applied by the scheduler loop to each
 * node it loads: while GPUStackReady is False the node offers no GPU and
 * no MIG device, so GPU pods wait and CPU-only pods are unaffected.
 *
 * Reads and writes go through a source (source.h); ClusterPolicy status is a
 * status-only write. A node's labels, annotations and GPUStackReady
 * condition are one whole-object mutate, one transaction with the server's
 * in-process source.
 */
#ifndef GS_GOVERN_OPERATOR_H
#define GS_GOVERN_OPERATOR_H

#include "control/store.h"
#include "informer/source.h"
#include "core/clock.h"
#include "core/object.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define GS_COND_GPU_STACK "GPUStackReady"
#define GS_GPUCLUSTER_PREFIX "gpuclusters.nvidia.com/" /* store keys of GPUClusters */
#define GS_LABEL_STACK_STATE "gpusched.io/gpu-stack-state"
#define GS_ANN_STACK_REQUEST "gpusched.io/gpu-stack-request"
#define GS_ANN_DEPLOY_MANAGED "gpusched.io/gpu-deploy-managed"
#define GS_ANN_STACK_MACHINE "gpusched.io/gpu-stack-machine"

struct gs_operator_opts {
    struct gs_source *source;     /* borrowed: every read and write (source.h) */
    const struct gs_clock *clock; /* borrowed; NULL: the real clock */
    const struct gs_clock *wall;  /* borrowed; wall time for what is saved; NULL: CLOCK_REALTIME */
    int64_t period_ms;            /* pass period of the thread; 0: 200 */
    struct gs_recorder *events;   /* borrowed (control/events.h); NULL: a private one writing at once */
};

struct gs_operator_stats {
    uint64_t passes, transitions, failures, events, writes, redrives;
    uint64_t restored, restore_errors; /* machines put back from the Node / unreadable saved positions */
    int nodes, ready;
    bool policy;                  /* a ClusterPolicy is in force */
};

struct gs_operator;

/* Without a thread (tests call gs_operator_sync). */
int gs_operator_new(const struct gs_operator_opts *o, struct gs_operator **out);
/* With its thread. */
int gs_operator_start(const struct gs_operator_opts *o, struct gs_operator **out);
void gs_operator_stop(struct gs_operator *op);
/* One pass over the policy and every node. */
void gs_operator_sync(struct gs_operator *op);
void gs_operator_stats(struct gs_operator *op, struct gs_operator_stats *out);
/* Appends the operator's Prometheus metrics to a malloc'd text (see
 * metrics.h): per-node state, time in state, validation failures. */
int gs_operator_metrics(struct gs_operator *op, char **buf, size_t *len, size_t *cap);

/* The scheduler's gate: when doc's GPUStackReady condition is present and
 * not True, every GPU of node is offered as unavailable and its MIG
 * resources as zero. Returns whether it gated. */
bool gs_stack_gate_node(const json_t *doc, struct gs_node *node);

#endif
