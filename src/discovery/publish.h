/*
 * publish.h - what a node tells a Kubernetes API server about its GPUs when
 * no gpusched agent runs on it (`gpusched node-publisher`, the node
 * DaemonSet of deploy/).
 *
 * A real cluster's Nodes belong to kubelet: their status has no devices[]
 * and a second writer of the status would fight kubelet's. So the per-GPU
 * state travels in metadata instead, next to GPU Feature Discovery's labels:
 *
 *   metadata.labels       GFD's labels (labels.c), exactly what `gpusched
 *                         discover` prints, minus the timestamp;
 *   metadata.annotations  gpusched.io/gpus: the JSON text of exactly the
 *                         array an agent writes in status.devices (the shape
 *                         core/node.c decodes; gs_inventory_devices builds
 *                         both), and gpusched.io/published-labels: the keys
 *                         of the labels the publisher set, comma-separated,
 *                         so a later run removes those it no longer produces
 *                         and never touches labels someone else set;
 *
 * plus the node's NodeResourceTopology object (nrt.c), created or updated.
 *
 * The functions here are pure: they compute the merge patch of the Node's
 * metadata and the NRT to write from the inventory and what the server
 * holds now, and say when nothing needs writing (a Node write wakes every
 * watcher of Nodes, so an unchanged node costs one read per period, no
 * write). The HTTP side is cmd_node_publisher.c.
 */
#ifndef GS_DISCOVERY_PUBLISH_H
#define GS_DISCOVERY_PUBLISH_H

#include "discovery/discovery.h"
#include "discovery/outputs.h"

#include <jansson.h>
#include <stdint.h>

#define GS_ANN_GPUS "gpusched.io/gpus"
#define GS_ANN_PUBLISHED_LABELS "gpusched.io/published-labels"

/* The Node status.devices array of inv: index, uuid, model (GFD product
 * name), memoryMiB, numaNode, nvlinkPeers, health, and mig {enabled,
 * instances[{profile, uuid}]} for MIG-enabled GPUs. Bit i of unhealthy marks
 * the i-th GPU of inv (its position, not its index) Unhealthy. New reference,
 * or NULL when out of memory. */
json_t *gs_inventory_devices(const struct gs_inventory *inv, uint64_t unhealthy);

/* The merge patch (application/merge-patch+json) of the Node's metadata
 * that makes `node` (the server's current Node; NULL = none known) carry the
 * labels of inv (lo as for gs_gfd_labels) and the two annotations above:
 * changed or new labels set, labels listed in the node's
 * gpusched.io/published-labels but no longer produced set to null. *patch
 * is NULL when the node already says all of it. 0 or GS_ENOMEM. */
int gs_publish_node_patch(const json_t *node, const struct gs_inventory *inv, uint64_t unhealthy,
                          const struct gs_label_opts *lo, json_t **patch);

/* The NodeResourceTopology named `node_name` for inv (GPUs of `unhealthy`,
 * positions as above, not allocatable), to create when cur is NULL or to PUT
 * over cur (its resourceVersion copied in). *obj is NULL when cur already
 * holds the same zones, policies and attributes. o may be NULL (defaults of
 * gs_nrt_build); its allocated and unhealthy masks are ignored. 0 or
 * GS_ENOMEM. */
int gs_publish_nrt(const json_t *cur, const char *node_name, const struct gs_inventory *inv, uint64_t unhealthy,
                   const struct gs_nrt_opts *o, json_t **obj);

#endif
