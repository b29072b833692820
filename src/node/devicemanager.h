/*
 * devicemanager.h - the node's device manager: what kubelet's device-plugin
 * manager does, so gpusched's agent (and `gpusched kubelet-sim`) can host
 * device plugins, ours or anyone's speaking v1beta1.
 *
 *  - Registration server on <dir>/kubelet.sock. On start it creates the
 *    directory and deletes every socket in it (kubelet does the same, which
 *    is how plugins learn that they must register again). Register checks the
 *    version and the resource name, dials the plugin, asks for its options and
 *    only then answers.
 *  - Registry resourceName -> endpoint; a plugin registering a resource again
 *    replaces the old endpoint.
 *  - One ListAndWatch client thread per endpoint keeps that resource's
 *    devices with health and NUMA node. When the stream ends, every device of
 *    the resource becomes unhealthy (capacity stays, allocatable drops).
 *  - Admission of a pod before its processes start: the topology manager
 *    (topology.h) merges NUMA hints from every requested resource and the
 *    CPUs, then each container's devices are chosen: exactly the IDs the
 *    scheduler chose when it chose some (refused if any is unknown, unhealthy
 *    or taken), otherwise NUMA-aligned devices first and the plugin's
 *    GetPreferredAllocation among them, as kubelet does. Allocate is called
 *    per container and resource; a pod is admitted whole or not at all.
 *  - Allocations are checkpointed to a JSON file (replaced atomically) after
 *    every change and read back at start, so a restart keeps them.
 *
 * Threads: the registration server thread, one thread per endpoint, and the
 * callers of gs_dm_admit / gs_dm_remove_pod (serialised among themselves).
 */
#ifndef GS_NODE_DEVICEMANAGER_H
#define GS_NODE_DEVICEMANAGER_H

#include "node/topology.h"

#include <jansson.h>
#include <stddef.h>

#define GS_DM_CHECKPOINT "gpusched_internal_checkpoint"

struct gs_dm_config {
    const char *plugin_dir;      /* kubelet.sock and plugin sockets live here */
    const char *checkpoint;      /* NULL = <plugin_dir>/gpusched_internal_checkpoint */
    struct gs_topo_config topo;  /* policy, scope, NUMA nodes (0 = 1) */
    int cpus_per_numa;           /* > 0: "cpu" requests take part in topology hints */
};

struct gs_dm;

/* Loads the checkpoint, wipes stale sockets, serves kubelet.sock. 0, or
 * GS_EIO / GS_EPARSE (bad checkpoint) / GS_ENOMEM with err. */
int gs_dm_start(const struct gs_dm_config *cfg, struct gs_dm **out, char *err, size_t errlen);
/* Stops serving (kubelet.sock removed), ends every stream, frees. */
void gs_dm_stop(struct gs_dm *dm);

/* One container's requests: count units of each resource, or, when exact[i]
 * is non-NULL, exactly those n_exact[i] device IDs. */
struct gs_dm_container {
    const char *name;
    int n;
    const char *resource[GS_TOPO_MAX_RES];
    int count[GS_TOPO_MAX_RES];
    const char *const *exact[GS_TOPO_MAX_RES];
    size_t n_exact[GS_TOPO_MAX_RES];
};

/* Admits a pod. 0 and *result (new reference: an array of allocation records
 * {pod, container, resource, devices[], response{envs, mounts, devices,
 * annotations, cdi_devices}, affinity[]}), or a negative GS_E* with why:
 * GS_ENOENT unknown resource or device, GS_ESTATE unhealthy or taken device,
 * GS_EBUSY not enough devices, GS_EPERM topology refusal, GS_EIO plugin error.
 * Admitting a pod already admitted returns its records again. */
int gs_dm_admit(struct gs_dm *dm, const char *pod, const struct gs_dm_container *ctrs, size_t n, json_t **result,
                char *why, size_t whylen);
/* Releases a pod's devices. 0 or GS_ENOENT. */
int gs_dm_remove_pod(struct gs_dm *dm, const char *pod);

/* {resource: {endpoint, connected, preferred, healthy[], unhealthy[],
 * allocated[], numa{id: node}}} (new reference). */
json_t *gs_dm_resources(struct gs_dm *dm);
/* Every allocation record (new reference). */
json_t *gs_dm_allocations(struct gs_dm *dm);

/* Checks a resource name as kubelet does for device plugins: "<domain>/<name>",
 * the domain with a dot and outside kubernetes.io. */
int gs_dm_valid_resource(const char *name);

/* Parses a RegisterRequest (fuzzed); 0 and the fields copied, or GS_EINVAL. */
int gs_dm_parse_register(const unsigned char *buf, size_t len, char *version, size_t vlen, char *endpoint,
                         size_t elen, char *resource, size_t rlen);
/* Parses a ListAndWatchResponse into a JSON array of {id, healthy, numa}
 * (fuzzed). NULL when malformed. */
json_t *gs_dm_parse_list(const unsigned char *buf, size_t len);
/* Parses an AllocateResponse's first container into the record's JSON
 * response shape (fuzzed). NULL when malformed or empty. */
json_t *gs_dm_parse_allocate(const unsigned char *buf, size_t len);
/* Parses a PreferredAllocationResponse's first container's IDs (fuzzed). */
json_t *gs_dm_parse_preferred(const unsigned char *buf, size_t len);

#endif
