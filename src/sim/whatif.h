/*
 * whatif.h - "when would each pending pod start, and what would change it":
 * a snapshot of the cluster (snapshot.h) replayed forward, before and after
 * a change to the question.
 *
 * Changes work on the snapshot's documents, so the changed cluster is
 * validated by the same loader as the original:
 *   --add-nodes N:TEMPLATE    N copies of node TEMPLATE (TEMPLATE-new-1..N),
 *                             with a copy of its NodeResourceTopology
 *   --remove-node NAME        the node and its topology go; the pods running
 *                             there wait again (from arrival 0, for their
 *                             whole duration: a restarted pod starts over)
 *   --set-quota CQ:RES=QTY    ClusterQueue CQ's nominalQuota of RES in every
 *                             flavor that lists it; for a Volcano or gpusched
 *                             Queue, its capability of RES
 *   --set-weight QUEUE=W      a ClusterQueue's fairSharing.weight, or a
 *                             Queue's spec.weight
 *   --overlay FILE            manifests replacing the objects of the same kind,
 *                             namespace and name, or added
 * The policy (placement score) and --config of the replay may change too;
 * they are the replay's options (sim.h).
 *
 * Each pending pod (no spec.nodeName in the snapshot) gets the first
 * instant the replay schedules it, seconds from the snapshot, and its node;
 * or, when the replay never does, the last reason it gave.
 */
#ifndef GS_SIM_WHATIF_H
#define GS_SIM_WHATIF_H

#include "core/error.h"
#include "sim/sim.h"

#include <jansson.h>

enum gs_whatif_kind { GS_WHATIF_ADD_NODES, GS_WHATIF_REMOVE_NODE, GS_WHATIF_SET_QUOTA, GS_WHATIF_SET_WEIGHT };

struct gs_whatif_change {
    enum gs_whatif_kind kind;
    char name[256];     /* template node, node, ClusterQueue or queue */
    char resource[256]; /* set-quota */
    char value[64];     /* quantity (set-quota) or weight (set-weight) */
    int count;          /* add-nodes */
};

/* The value of --add-nodes, --remove-node, --set-quota or --set-weight
 * (flag without the leading dashes: "add-nodes"). 0, or GS_EINVAL with
 * *why (static text). */
int gs_whatif_change_parse(const char *flag, const char *value, struct gs_whatif_change *out, const char **why);

/* Applies the changes, then the overlay documents (borrowed array, may be
 * NULL), to the snapshot's documents in place. A change naming an object
 * the snapshot does not have is an error naming the flag and the object. */
int gs_whatif_apply(json_t *cluster, json_t *workload, const struct gs_whatif_change *c, size_t n,
                    const json_t *overlay, struct gs_diags *d);

struct gs_whatif_pod {
    char pod[320];      /* "ns/name" */
    double start;       /* seconds from the snapshot; < 0: not started in the replay */
    char node[256];     /* "" when not started */
    char reason[512];   /* not started: the replay's last reason */
};

struct gs_whatif_result {
    struct gs_whatif_pod *v; /* owned, in the workload's order */
    size_t n;
};

/* Writes the documents to a temporary directory, loads them with the trace
 * loader (problems in d, named by that directory's files), replays with o
 * (mode forced to replay) and fills out. Free with gs_whatif_result_free. */
int gs_whatif_run(const json_t *cluster, const json_t *workload, const struct gs_sim_opts *o,
                  struct gs_whatif_result *out, struct gs_diags *d);
void gs_whatif_result_free(struct gs_whatif_result *r);

/* The pod of r named key ("ns/name"), or NULL. */
const struct gs_whatif_pod *gs_whatif_find(const struct gs_whatif_result *r, const char *key);

/* explain's ETA: a snapshot through conn (assumed duration as in
 * gs_snapshot_opts), replayed with o (NULL: the server's default profile);
 * *out the pod key ("ns/name"). GS_ENOENT when the snapshot has the pod
 * running or not at all (*running says which); other errors with d filled. */
struct gs_client_opts;
int gs_whatif_eta(const struct gs_client_opts *conn, double assume_duration, const struct gs_sim_opts *o,
                  const char *key, struct gs_whatif_pod *out, bool *running, struct gs_diags *d);

#endif
