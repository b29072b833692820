/*
 * sim_dra.h - Dynamic Resource Allocation in the simulator: the DRA
 * documents of a manifest scenario, and what the server's resourceclaim
 * controller and scheduler loop do with claims, on the replay's cache.
 *
 * Cluster and workload files may hold ResourceSlice, DeviceClass,
 * ResourceClaim, ResourceClaimTemplate and DeviceTaintRule documents
 * (resource.k8s.io v1, v1beta2, v1beta1), checked at load by the same
 * decoders the scheduler uses (core/dra.h). At the start of a replay they
 * go to the cache (sched/cache_dra.h); a node without any ResourceSlice gets
 * one built from its GPUs as the node agent publishes them (driver
 * gpu.nvidia.com, pool and slice named after the node, devices "gpu-<i>"
 * with type, productName and memory), so a scenario of plain Nodes can run
 * claims; and each pod entry naming a resourceClaimTemplateName gets its
 * claim, named and owned as the resourceclaim controller does
 * (loops/claims.h). When a pod is bound, its claims' allocations (as
 * Kubernetes writes them) and reservedFor are applied to the cache, and the
 * scheduled event carries them; when it completes it leaves reservedFor and
 * a claim without consumers is deallocated.
 */
#ifndef GS_SIM_SIM_DRA_H
#define GS_SIM_SIM_DRA_H

#include "core/object.h"
#include "sched/framework.h"
#include "sim/sim.h"

#include <jansson.h>
#include <stdbool.h>

/* Is kind one of the five DRA kinds? */
bool gs_sim_dra_kind(const char *kind);
/* Checks a DRA document with its decoder: 0, or GS_EINVAL with d filled
 * (paths relative to the document). */
int gs_sim_dra_check(const json_t *doc, struct gs_diags *d);
/* Gives a pod without a uid the uid "sim-<namespace>-<name>". 0 or GS_ENOMEM. */
int gs_sim_dra_pod_uid(struct gs_pod *p);

struct gs_sim_dra;

/* Feeds t's DRA documents (and built slices, generated claims) to cache.
 * *out is NULL when the trace holds no DRA document and no pod has claims.
 * 0, or an error with d filled. */
int gs_sim_dra_new(struct gs_cache *cache, const struct gs_trace *t, uint64_t seed, struct gs_sim_dra **out,
                   struct gs_diags *d);
void gs_sim_dra_free(struct gs_sim_dra *s);
/* pod was bound through fw: applies its claim writes; the event's claims
 * array (borrowed until the next call), or NULL when it has none. */
const json_t *gs_sim_dra_bound(struct gs_sim_dra *s, struct gs_framework *fw, const struct gs_pod *pod, double now_s);
/* pod completed or was evicted: out of its claims' reservedFor, claims without consumers deallocated. */
void gs_sim_dra_left(struct gs_sim_dra *s, const struct gs_pod *pod);

#endif
