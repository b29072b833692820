/*
 * snapshot.h - a live cluster as simulator input: what `gpusched snapshot`
 * writes and `gpusched sim --from-cluster` replays forward.
 *
 * A snapshot is two manifest files the trace loader reads
 * (trace_manifest.h): cluster.yaml with the nodes (devices, conditions,
 * labels), NodeResourceTopologies, queues and their flavors, priority
 * classes, the ClusterPolicy and the DRA slices and classes; workload.yaml
 * with every pod that is running or waiting, and the objects pods refer to
 * (LocalQueues, PodGroups, Workloads, claims, PodDisruptionBudgets).
 *
 * Running pods keep spec.nodeName and their gpusched.io/devices annotation
 * and get sim.gpusched.io/running-for (the time since status.startTime);
 * pending pods get arrival 0. Finished pods and pods being deleted are left
 * out. Every pod needs a duration: its own sim.gpusched.io/duration
 * annotation, else the assumed one; without either the snapshot is refused,
 * naming the pods, since the replay cannot guess when a pod ends.
 *
 * The objects come from any API server through the REST client: ours or a
 * Kubernetes one (list items lack kind and apiVersion there, which are put
 * back from the resource). A kind whose API the server does not serve (no
 * Kueue installed) is simply absent.
 */
#ifndef GS_SIM_SNAPSHOT_H
#define GS_SIM_SNAPSHOT_H

#include "core/error.h"

#include <jansson.h>
#include <stdbool.h>

struct gs_client;

struct gs_snapshot_opts {
    double now;             /* seconds since the epoch at which the snapshot is taken */
    double assume_duration; /* seconds for pods without a duration annotation; < 0: none */
};

/* Every object the simulator uses, from c: a new JSON array of documents
 * with kind and apiVersion set. Errors other than an API the server does
 * not serve fail the whole fetch, with the resource named in d. */
int gs_snapshot_fetch(struct gs_client *c, json_t **objects, struct gs_diags *d);

/* Sorts objects (borrowed) into the two files' documents (new arrays) as
 * above. GS_EINVAL with d filled when a pod has no duration and none is
 * assumed, or a document is not an object. */
int gs_snapshot_build(const json_t *objects, const struct gs_snapshot_opts *o, json_t **cluster, json_t **workload,
                      struct gs_diags *d);

/* Writes DIR/cluster.yaml and DIR/workload.yaml (DIR is created when
 * missing), each document after a "---" line, with header, a comment line,
 * on top. */
int gs_snapshot_write(const char *dir, const char *header, const json_t *cluster, const json_t *workload,
                      struct gs_diags *d);

/* Connects with conn (control/client.h: server, kubeconfig, token...),
 * fetches and builds: the three steps above. */
struct gs_client_opts;
int gs_snapshot_take(const struct gs_client_opts *conn, const struct gs_snapshot_opts *o, json_t **cluster,
                     json_t **workload, struct gs_diags *d);

/* RFC 3339 text ("2026-01-02T03:04:05Z", fractions and offsets allowed) as
 * seconds since the epoch. GS_EINVAL when not one. */
int gs_rfc3339_seconds(const char *text, double *out);

#endif
