/*
 * allocate.h - what a container gets for a set of device IDs: the answer to
 * a device plugin Allocate call, built from the node GPU table (gpus.h).
 *
 * Three ways to hand GPUs to a container runtime, chosen with
 * --device-list-strategy (several may be combined, "envvar,cdi-cri"):
 *  - envvar:          env NVIDIA_VISIBLE_DEVICES=<UUID,...> for the NVIDIA
 *                     container runtime, plus device specs for
 *                     /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools
 *                     and each /dev/nvidia<minor>, so a plain runtime works too;
 *  - cdi-annotations: one annotation "cdi.k8s.io/<plugin>_<id>" whose value
 *                     lists the CDI names, for runtimes that read annotations;
 *  - cdi-cri:         the CDI names in the CRI field cdi_devices.
 * CDI names are "<kind>=<UUID>" (kind nvidia.com/gpu), matching the spec file
 * cdi.c writes. Replicas of one GPU collapse to that GPU.
 *
 * MIG devices (a table with mig set) get, under envvar, the parent GPU's
 * /dev/nvidia<minor> and the two capability nodes of each instance,
 * /dev/nvidia-caps/nvidia-cap<minor> for its GPU instance and its compute
 * instance (migcaps.h), read from the proc root's mig-minors file at each
 * Allocate, or from the fixed mock layout. A missing file or line refuses
 * the container with a message naming the file: a MIG device without its
 * capability nodes cannot be opened.
 *
 * Unknown, duplicate or unhealthy IDs refuse the whole container: a device
 * that failed must not reach a workload (kubelet then fails the pod).
 */
#ifndef GS_NODE_ALLOCATE_H
#define GS_NODE_ALLOCATE_H

#include "node/gpus.h"

#include <stdbool.h>
#include <stddef.h>

enum gs_dls {
    GS_DLS_ENVVAR = 1u << 0,
    GS_DLS_CDI_ANNOTATIONS = 1u << 1,
    GS_DLS_CDI_CRI = 1u << 2,
};

/* Parses a comma-separated list of strategy names into GS_DLS_* bits. */
int gs_dls_parse(const char *s, unsigned *bits);

struct gs_alloc_opts {
    unsigned strategy;      /* GS_DLS_* bits; 0 means envvar */
    const char *cdi_kind;   /* NULL = "nvidia.com/gpu" */
    const char *plugin;     /* annotation key prefix; NULL = "gpusched" */
    const char *proc_root;  /* MIG capability minors under <proc_root>/driver/...; NULL = "/proc" */
    bool mock_caps;         /* mock node: MIG capability minors from the fixed layout */
};

#define GS_ALLOC_MAX_KV 4
#define GS_ALLOC_MAX_DEVS (3 * GS_NODE_MAX_GPUS + 3) /* MIG: parent node + 2 capability nodes each */

struct gs_alloc_kv {
    char key[128];
    char value[GS_NODE_MAX_GPUS * 112];
};

struct gs_alloc_devspec {
    char container_path[64];
    char host_path[64];
    char permissions[4];
};

/* One container's answer. Plain arrays: about 40 KiB, allocate it on the heap. */
struct gs_alloc_resp {
    int n_env, n_ann, n_dev, n_cdi;
    struct gs_alloc_kv env[GS_ALLOC_MAX_KV];
    struct gs_alloc_kv ann[GS_ALLOC_MAX_KV];
    struct gs_alloc_devspec dev[GS_ALLOC_MAX_DEVS];
    char cdi[GS_NODE_MAX_GPUS][160];
    int n_gpus;
    int gpus[GS_NODE_MAX_GPUS];  /* table slots, in request order */
};

/* Builds the answer for `ids`. 0; GS_ENOENT for an unknown ID, GS_ESTATE for
 * an unhealthy one, GS_EINVAL for an empty or duplicate list, GS_EUNSUPPORTED
 * when MIG capability minors cannot be read or lack a device; err says which. */
int gs_alloc_container(const struct gs_node_gpus *g, const struct gs_alloc_opts *o, const char *const *ids,
                       size_t n, struct gs_alloc_resp *out, char *err, size_t errlen);

#endif
