/*
 * cache_dra.h - the scheduler cache's Dynamic Resource Allocation side: every
 * ResourceSlice, DeviceClass, DeviceTaintRule and ResourceClaim of the
 * cluster, decoded (core/dra.h) into one device pool view (sched/dra_alloc.h)
 * that the DynamicResources plugin allocates from, plus what ties a DRA
 * device to the cache's GPU slots.
 *
 * Feeding. A control loop hands each change by store key
 * ("resourceslices.resource.k8s.io/NAME", "resourceclaims.resource.k8s.io/NS/NAME",
 * ...) with its document, NULL when deleted (gs_cache_dra_feed, reached
 * through gs_cache_feed). An allocated claim holds its devices in the view;
 * an unallocated or deleted one releases them. A document that does not
 * decode is logged with the field and value and its older version dropped.
 *
 * Assumed allocations. Between the plugin's Reserve and the claim's
 * allocated status coming back through the stream, the claim's devices are
 * held as assumed: an older, unallocated version of the claim arriving
 * meanwhile does not free them. The stream's allocated version replaces the
 * assumption; gs_cache_dra_unassume drops it (Unreserve, a failed write).
 *
 * GPU slots. A device maps to the cache's GPU slot of its node by the whole
 * GPU's `uuid` attribute (MIG devices by `parentUUID`), or, for nodes
 * without uuids (simulator, benchmark), by the device name "gpu-<minor>".
 * The slots each node's held claims cover are counted here, so the plugin
 * can tell GPUs taken by device-plugin pods (busy in the cache, not held by
 * a claim) from its own.
 *
 * Generated claims are found by their owner pod's uid and the
 * resource.kubernetes.io/pod-claim-name annotation (claims.h), extended
 * resource claims by the owner and resource.kubernetes.io/extended-resource-claim.
 *
 * Not thread-safe, like the cache.
 */
#ifndef GS_SCHED_CACHE_DRA_H
#define GS_SCHED_CACHE_DRA_H

#include "core/dra.h"
#include "sched/cache.h"
#include "sched/dra_alloc.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct gs_cache_dra;

/* The cache's DRA side, created on first use (NULL only on GS_ENOMEM). */
struct gs_cache_dra *gs_cache_dra(struct gs_cache *c);
void gs_cache_dra_free(struct gs_cache_dra *d);
/* For cache.c, which keeps the pointer: a new empty side, NULL on GS_ENOMEM. */
struct gs_cache_dra *gs__cache_dra_new(void);

/* True for the store keys of the five DRA kinds. */
bool gs_cache_dra_key(const char *key);
/* Applies one change (see above). 0; GS_EINVAL for a document that does not
 * decode; GS_ENOENT for another kind; GS_ENOMEM. doc borrowed. */
int gs_cache_dra_feed(struct gs_cache *c, const char *key, const json_t *doc);

struct gs_dra_pool_view *gs_cache_dra_view(struct gs_cache_dra *d);
/* Changes whenever anything DRA changes: the view, a claim, an assumption. */
uint64_t gs_cache_dra_epoch(const struct gs_cache_dra *d);
/* Changes whenever what can be allocated on node changes (its slices, holds
 * there), or anything cluster-wide (classes, taint rules). */
uint64_t gs_cache_dra_node_version(const struct gs_cache_dra *d, const char *node);

/* One ResourceClaim the cache knows. */
struct gs_cache_claim {
    struct gs_dra_claim c;   /* decoded */
    char *key;               /* "NS/NAME" */
    char *api_version;
    uint64_t spec_hash;      /* of spec as canonical JSON: equal specs, equal hash */
    char *owner_uid;         /* controller Pod owner, NULL none */
    char *pod_claim_name;    /* resource.kubernetes.io/pod-claim-name, NULL none */
    bool extended;           /* resource.kubernetes.io/extended-resource-claim */
    bool assumed;            /* holds an assumed allocation (see above) */
    char *assumed_node;
    struct gs_dra_result *assumed_res; size_t nassumed_res;
    char *held_node;         /* where its hold (allocated or assumed) counts GPU slots, NULL none */
    uint64_t held_mask;
};

/* Claim ns/name, or NULL. Borrowed until the next feed. */
const struct gs_cache_claim *gs_cache_dra_claim(const struct gs_cache_dra *d, const char *ns, const char *name);
/* The claim generated for pod_uid's entry (entry NULL: its extended-resource claim), or NULL. */
const struct gs_cache_claim *gs_cache_dra_pod_claim(const struct gs_cache_dra *d, const char *ns,
                                                    const char *pod_uid, const char *entry);
/* Whether a ResourceClaimTemplate ns/name exists. */
bool gs_cache_dra_has_template(const struct gs_cache_dra *d, const char *ns, const char *name);
/* Every DeviceClass (borrowed until the next feed). */
const struct gs_dra_class *const *gs_cache_dra_classes(const struct gs_cache_dra *d, size_t *n);
/* The DeviceClass whose extendedResourceName is res, or NULL. */
const struct gs_dra_class *gs_cache_dra_class_for(const struct gs_cache_dra *d, const char *res);

/* Holds res for claim ns/name (uid) on node as assumed. 0, GS_ENOENT (no such claim), GS_ENOMEM. */
int gs_cache_dra_assume(struct gs_cache *c, const char *claim_key, const char *node, const struct gs_dra_result *res,
                        size_t n);
/* Drops the assumption (and its hold unless the claim is allocated by now). Idempotent. */
void gs_cache_dra_unassume(struct gs_cache *c, const char *claim_key);

/* The GPU slots of node idx that res covers; *mig_only when every device is
 * a MIG device (a share of its parent). */
uint64_t gs_cache_dra_slots(struct gs_cache *c, int32_t node, const struct gs_dra_result *res, size_t n,
                            bool *mig_only);
/* Slots of node covered by claims held (allocated or assumed). */
uint64_t gs_cache_dra_held_slots(const struct gs_cache_dra *d, const char *node);
/* The device names of node's slices that sit on slot g (the GPU and its MIG
 * devices), as results of driver/pool for gs_dra_view_hold; *n set. Borrowed
 * until the next feed. */
const struct gs_dra_result *gs_cache_dra_slot_devices(struct gs_cache *c, int32_t node, int32_t g, size_t *n);

#endif
