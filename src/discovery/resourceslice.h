/*
 * resourceslice.h - a node's GPUs as DRA ResourceSlices (resource.k8s.io/v1),
 * with the device names, attributes and capacities of NVIDIA's DRA driver, so
 * DeviceClasses and CEL selectors written for that driver work unchanged.
 *
 * Who uses it: the agent publishes its node's slices to our server
 * (agent_slices.c), `gpusched node-publisher --resource-slices` to a
 * Kubernetes API server, and the DRA kubelet plugin reads the device names
 * and UUIDs it prepares from the same function. The scheduler (sched/dra*)
 * only reads the published objects.
 *
 * The slices of one node (driver gpu.nvidia.com, pool = the node's name,
 * spec.nodeName = the node):
 *   - names "<node>-gpu.nvidia.com-<i>", i from 0; pool.resourceSliceCount is
 *     their number and pool.generation the caller's (bump it whenever the
 *     content changes: consumers use only the highest generation);
 *   - at most 128 devices per slice, 64 when any device carries taints or
 *     consumes counters; more devices make more slices;
 *   - whole GPUs `gpu-<minor>` (type "gpu"), except MIG-enabled ones, which
 *     offer their MIG instances instead: `gpu-<minor>-mig-<profile>-<profileID>-<start>`
 *     (type "mig"; the profile without its dot, "1g10gb", because a device
 *     name is a DNS label; start is the first memory slice of the placement);
 *   - attributes (domain gpu.nvidia.com, written unqualified as NVIDIA's driver
 *     does): type, uuid, productName, brand, architecture (strings),
 *     cudaComputeCapability, driverVersion, cudaDriverVersion (semantic
 *     versions), MIG parentUUID and profile; resource.kubernetes.io/pciBusID
 *     ("0000:3b:00.0"), resource.kubernetes.io/pcieRoot ("pci0000:3b", from the
 *     bus id: the root complex is not in the inventory),
 *     resource.kubernetes.io/numaNode (int, when known), and
 *     gpu.nvidia.com/nvlinkDomain (int: the NVLink island on the node, the
 *     lowest GPU index in it; absent for a GPU without NVLink peers);
 *   - capacity memory (bytes, as a Mi quantity); MIG devices also
 *     multiprocessors, copyEngines, decoders, encoders, jpegEngines,
 *     ofaEngines and memorySlice<i> = 1 for each memory slice they occupy;
 *   - taints from health: an unhealthy GPU and its MIG devices get
 *     gpu.nvidia.com/unhealthy with effect NoSchedule, or NoExecute when the
 *     fault is fatal (the GPU stopped answering, Xid 48 / 79 / 95), timeAdded
 *     from when it became unhealthy;
 *   - partitionable: each MIG-capable GPU is a counter set
 *     `gpu-<minor>-counter-set` (memory, multiprocessors, memorySlice0..7) in
 *     slices of their own (at most 8 sets each, first), and its devices are
 *     the whole GPU plus every MIG placement NVIDIA defines for 7-slice GPUs
 *     (1g at 0..6, 2g at 0/2/4, 3g at 0/4, 4g and 7g at 0), each consuming
 *     its share; placements that do not exist yet have no uuid.
 */
#ifndef GS_DISCOVERY_RESOURCESLICE_H
#define GS_DISCOVERY_RESOURCESLICE_H

#include "core/error.h"
#include "discovery/discovery.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define GS_DRA_NVIDIA_DRIVER "gpu.nvidia.com"
#define GS_DRA_TAINT_UNHEALTHY "gpu.nvidia.com/unhealthy"
#define GS_DRA_SLICE_MAX_DEVICES 128
#define GS_DRA_SLICE_MAX_DEVICES_ADVANCED 64
#define GS_DRA_SLICE_MAX_COUNTER_SETS 8

/* Health of the inventory's GPUs, by position in inv->gpus (not index). */
struct gs_slice_health {
    uint64_t unhealthy;                 /* bit i: GPU i is unhealthy */
    uint64_t fatal;                     /* bit i: ...and the fault is fatal (NoExecute) */
    int64_t since_s[GS_DISC_MAX_GPUS];  /* wall seconds it became unhealthy (timeAdded) */
};

struct gs_diags;

/* The ResourceSlice objects (a JSON array, new reference) of inv's GPUs on
 * node; empty for a node without GPUs. NULL with d filled when node is not a
 * valid node name or out of memory. */
json_t *gs_resourceslices_build(const struct gs_inventory *inv, const char *node, int64_t generation,
                                bool partitionable, struct gs_diags *d);
/* The same with device taints from h (NULL: all healthy). */
json_t *gs_resourceslices_build_health(const struct gs_inventory *inv, const char *node, int64_t generation,
                                       bool partitionable, const struct gs_slice_health *h, struct gs_diags *d);

/* Do two slice arrays say the same apart from pool.generation (and server
 * metadata)? What tells a publisher whether to bump the generation. */
bool gs_resourceslices_same(const json_t *a, const json_t *b);

/* What a stateless publisher writes: given the slices the server holds for
 * this node and driver (have, any order; NULL = none), *want (new reference)
 * are inv's slices at the highest generation in have when their content is
 * the same (*changed false: write nothing), else one generation above it
 * (*changed true: create or replace each, delete those of have not in want).
 * 0, or GS_EINVAL / GS_ENOMEM / GS_ERANGE (the generation is at INT64_MAX)
 * with d filled. */
int gs_resourceslices_next(const json_t *have, const struct gs_inventory *inv, const char *node, bool partitionable,
                           const struct gs_slice_health *h, json_t **want, bool *changed, struct gs_diags *d);

/* Device names: "gpu-<minor>", "gpu-<minor>-mig-<profile w/o dots>-<profileID>-<start>". */
void gs_dra_gpu_device_name(int minor, char *buf, size_t len);
void gs_dra_mig_device_name(int minor, const char *profile, int profile_id, int start, char *buf, size_t len);

#endif
