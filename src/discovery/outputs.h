/*
 * outputs.h - what layer 1 tells the rest of the system about a node:
 * GPU Feature Discovery labels (labels.c), the NodeResourceTopology object
 * (nrt.c) and a plain JSON description of the inventory (labels.c).
 *
 * All are pure functions of a struct gs_inventory (plus options), so the same
 * code labels a real node, a mock node and a simulated one.
 */
#ifndef GS_DISCOVERY_OUTPUTS_H
#define GS_DISCOVERY_OUTPUTS_H

#include "core/labels.h"
#include "discovery/discovery.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* GFD's --mig-strategy. */
enum gs_mig_strategy { GS_MIG_NONE, GS_MIG_SINGLE, GS_MIG_MIXED };

/* "none" | "single" | "mixed". 0 or GS_EINVAL. */
int gs_mig_strategy_parse(const char *s, enum gs_mig_strategy *out);

struct gs_label_opts {
    enum gs_mig_strategy mig;
    int64_t timestamp;       /* nvidia.com/gfd.timestamp in Unix seconds; 0 = leave the label out */
    int nvidia_pci_devices;  /* NVIDIA PCI functions seen in sysfs (-1 = unknown); the label needs this or a GPU */
};

/* Adds GFD's labels (nvidia.com/...) and NFD's feature.node.kubernetes.io/pci-10de.present
 * to *out (which may already hold labels). Values follow GFD's formats exactly:
 * product names sanitised, memory in MiB, family from the compute capability.
 * A node without GPUs gets no labels. 0 or GS_ENOMEM. */
int gs_gfd_labels(const struct gs_inventory *inv, const struct gs_label_opts *o, struct gs_labels *out);
/* "NVIDIA H100 80GB HBM3" -> "NVIDIA-H100-80GB-HBM3" (GFD's sanitiser). */
void gs_gfd_product(const char *name, char *out, size_t len);
/* GFD's family name for a compute capability: "hopper", "ampere", ... "undefined". */
const char *gs_gpu_family(int major, int minor);

/* The inventory as a JSON object (gpusched discover -o json|yaml). New reference or NULL. */
json_t *gs_inventory_to_json(const struct gs_inventory *inv);

struct gs_nrt_opts {
    const char *policy;          /* topologyManagerPolicy; NULL = "none" */
    const char *scope;           /* topologyManagerScope; NULL = "container" */
    uint64_t allocated;          /* bit i: GPU i is in use (not available) */
    uint64_t unhealthy;          /* bit i: GPU i is unhealthy (not allocatable) */
    int64_t cpus_allocated[GS_DISC_MAX_NUMA]; /* per NUMA node, whole CPUs in use */
};

/* The NodeResourceTopology (topology.node.k8s.io/v1alpha2) of the node: one
 * zone "node-<N>" of type Node per NUMA node, with costs (SLIT distances) and
 * resources cpu, nvidia.com/gpu and, for MIG-enabled GPUs, nvidia.com/mig-<profile>
 * (capacity / allocatable / available). o may be NULL. New reference or NULL. */
json_t *gs_nrt_build(const struct gs_inventory *inv, const struct gs_nrt_opts *o);

#endif
