/*
 * dra_alloc.h - the structured-parameters allocator of Dynamic Resource
 * Allocation: which exact devices of which ResourceSlices a claim gets.
 *
 * A pool view holds every ResourceSlice of the cluster (only the latest
 * generation of each pool counts, and only complete pools), the
 * DeviceClasses, the DeviceTaintRules and which devices allocated claims hold.
 * gs_dra_allocate answers for one pod on one node: it reads the view and its
 * arguments only (no clock, no I/O, no globals), so the same inputs give the
 * same devices. The view is not thread-safe for writes; gs_dra_allocate and
 * gs_dra_feasible only read it and may run concurrently with each other.
 * Rules, limits and the why texts are described in docs/DRA.md "Scheduling".
 */
#ifndef GS_SCHED_DRA_ALLOC_H
#define GS_SCHED_DRA_ALLOC_H

#include "core/dra.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_dra_pool_view;          /* every slice of the cluster, by node, latest generation only,
                                     plus devices in use (by which claim) and counters consumed */
struct gs_dra_pool_view *gs_dra_view_new(void);
void gs_dra_view_free(struct gs_dra_pool_view *);
int gs_dra_view_set_slice(struct gs_dra_pool_view *, const struct gs_dra_slice *s);   /* copied; replaces by name */
void gs_dra_view_remove_slice(struct gs_dra_pool_view *, const char *slice_name);
int gs_dra_view_set_class(struct gs_dra_pool_view *, const struct gs_dra_class *c);
void gs_dra_view_remove_class(struct gs_dra_pool_view *, const char *name);
int gs_dra_view_set_taint_rule(struct gs_dra_pool_view *, const struct gs_dra_taint_rule *r);
void gs_dra_view_remove_taint_rule(struct gs_dra_pool_view *, const char *name);
/* Devices held by an allocated claim (adminAccess results do not hold). */
int gs_dra_view_hold(struct gs_dra_pool_view *, const char *claim_uid, const struct gs_dra_result *r, size_t n);
void gs_dra_view_release(struct gs_dra_pool_view *, const char *claim_uid);
uint64_t gs_dra_view_generation(const struct gs_dra_pool_view *);   /* bumps on every change */

/* Why a claim cannot be allocated on a node: for explain and the Filter reason. */
struct gs_dra_why {
    char request[128];            /* the request (or "main/sub") that failed, "" when a constraint did */
    char what[256];               /* "selector device.attributes[\"gpu.nvidia.com\"].productName == \"H100\" matched 0 of 8 devices",
                                     "constraint matchAttribute gpu.nvidia.com/nvlinkDomain: no 4 devices share a value",
                                     "class \"gpu.nvidia.com\" does not exist", "tainted gpu.nvidia.com/unhealthy:NoSchedule (2 devices)" */
    int devices_considered, devices_matching;
};
/* Allocates every claim of one pod on one node, in order, taking devices held by others and
 * by earlier claims of this call into account: 0 with res[i]/nres[i] per claim (caller frees
 * with gs_dra_results_free), GS_ENOENT when it does not fit (why filled), GS_EINVAL on a CEL
 * runtime error (why filled). Deterministic: devices are tried in slice-name then device-name
 * order; the search backtracks over choices so matchAttribute / distinctAttribute / counters
 * are satisfied when any assignment satisfies them. Already-allocated claims are checked to be
 * usable on node (their nodeSelector) and not re-allocated. Reads nothing but its arguments. */
int gs_dra_allocate(const struct gs_dra_pool_view *v, const char *node,
                    const struct gs_dra_claim *const *claims, size_t nclaims,
                    struct gs_dra_result **res, size_t *nres, struct gs_dra_why *why);
void gs_dra_results_free(struct gs_dra_result *res, size_t n);
/* Could the claim be satisfied on some node if nothing were in use? (admission feasibility) */
bool gs_dra_feasible(const struct gs_dra_pool_view *v, const struct gs_dra_claim_spec *spec, struct gs_dra_why *why);

/*--- Additions ---*/

/* The bound on the search: device choices tried per gs_dra_allocate call.
 * Past it the call returns GS_ERANGE with why saying the search was cut off
 * (not that the claim cannot fit). */
#define GS_DRA_SEARCH_STEPS 200000

/* The class by name (borrowed, valid until the view changes), or NULL. */
const struct gs_dra_class *gs_dra_view_class(const struct gs_dra_pool_view *v, const char *name);
/* Number of usable devices (complete pools, latest generation) on node, all-nodes slices included. */
size_t gs_dra_view_node_devices(const struct gs_dra_pool_view *v, const char *node);
/* The GPU uuid attribute (gpu.nvidia.com/uuid, or parentUUID for a MIG device) of a device,
 * borrowed, or NULL: how the scheduler maps a DRA device to a GPU slot of its cache. */
const char *gs_dra_view_device_uuid(const struct gs_dra_pool_view *v, const char *driver, const char *pool,
                                    const char *device);
/* Whether claim_uid holds any device, and how many devices are held in all. */
bool gs_dra_view_holds(const struct gs_dra_pool_view *v, const char *claim_uid);

#endif
