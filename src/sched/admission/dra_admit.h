/*
 * dra_admit.h - what admission knows of Dynamic Resource Allocation: device counts charged to
 * queue quotas, and whether a workload's claims can be satisfied anywhere at all.
 *
 * A pod asks for devices through spec.resourceClaims: claims by name (shared, possibly by
 * several pods) or ResourceClaimTemplates (one claim per pod). Kueue turns those into quota by
 * mapping DeviceClasses to a resource name (its Configuration's resources.deviceClassMappings:
 * [{name: example.com/gpus, deviceClassNames: [gpu.example.com]}]); a request of `count`
 * devices of a mapped class is `count` units of that resource. Without a mapping the class's
 * extendedResourceName is used (a class mapped to nvidia.com/gpu makes a claim count as that
 * many GPUs, like a device-plugin request), else the name Kubernetes gives every class,
 * deviceclass.resource.kubernetes.io/<class>. A ClusterQueue that does not cover the name makes
 * the workload inadmissible, as Kueue does for any uncovered resource.
 *
 * Counting rules: an `exactly` request counts `count` devices; allocationMode All counts the
 * devices that would match on the largest node (the most it can take); a firstAvailable request
 * counts, per resource, the largest of its alternatives (the scheduler may fall back to any of
 * them, and quota must hold whichever it takes). A claim named by several pods of one workload
 * is counted once; a pod's template claims are its own share, released when the pod finishes.
 *
 * Feasibility (Kueue's KueueDRADeviceFeasibility): a workload whose claims could not be
 * allocated on any node even if every device were free - an unknown class, a selector no
 * device matches, devices tainted NoSchedule/NoExecute (by the slice or a DeviceTaintRule)
 * without a toleration, more devices than any node has - stays inadmissible with a reason
 * naming the claim and request, instead of taking quota to wait forever. The verdict is the
 * allocator's (gs_dra_feasible, sched/dra_alloc.h), on this module's own pool view.
 *
 * Objects arrive as store events (gs_dra_admit_event) and are decoded once; every change bumps
 * the generation, which admission watches to look again at workloads waiting on DRA. Not
 * thread-safe; the admission loop's thread only.
 */
#ifndef GS_SCHED_ADMISSION_DRA_ADMIT_H
#define GS_SCHED_ADMISSION_DRA_ADMIT_H

#include "core/error.h"
#include "core/object.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define GS_DRA_NEED_MAX 8          /* distinct resource names one workload may charge */
#define GS_DRA_IMPLICIT_PREFIX "deviceclass.resource.kubernetes.io/"

struct gs_dra_admit;

/* Store key prefixes of the DRA kinds admission follows, NULL-terminated. */
extern const char *const gs_dra_admit_prefixes[];
bool gs_dra_admit_is_key(const char *key);

int gs_dra_admit_new(struct gs_dra_admit **out);
void gs_dra_admit_free(struct gs_dra_admit *a);

/* One Kueue deviceClassMappings entry as text, "RESOURCE=CLASS[,CLASS...]"
 * ("example.com/gpus=gpu.example.com"). 0, or GS_EINVAL with d naming the text and why
 * (a class mapped twice, an empty name). */
int gs_dra_admit_add_mapping(struct gs_dra_admit *a, const char *text, struct gs_diags *d);
/* Kueue's Configuration (JSON), its resources.deviceClassMappings replacing every mapping.
 * 0, or GS_EINVAL with d naming the field. */
int gs_dra_admit_set_config(struct gs_dra_admit *a, const json_t *config, struct gs_diags *d);

/* A ResourceSlice, DeviceClass, ResourceClaim, ResourceClaimTemplate or DeviceTaintRule
 * (store key "<plural>.resource.k8s.io/...") was created or changed (doc, read now, not kept)
 * or deleted (doc NULL) at version rv; versions not newer than the last seen are ignored.
 * 0; GS_EINVAL when doc does not decode (d says why; the object counts as absent);
 * GS_ENOENT for a key of another kind; GS_ENOMEM. */
int gs_dra_admit_event(struct gs_dra_admit *a, const char *key, const json_t *doc, int64_t rv, struct gs_diags *d);
/* Bumps on every change to the objects or the mappings. */
uint64_t gs_dra_admit_generation(const struct gs_dra_admit *a);

/* Does the pod name any claim (spec.resourceClaims)? */
bool gs_dra_admit_pod_has_claims(const struct gs_pod *pod);

struct gs_dra_need {
    struct { char resource[160]; int64_t devices; } v[GS_DRA_NEED_MAX];
    size_t n;
};

enum {
    GS_DRA_NEED_SHARED = 1,   /* count claims named by pods (once per workload), not only templates */
    GS_DRA_NEED_FEASIBLE = 2, /* check that every claim can be satisfied on some node */
};

/* The devices the pods' claims ask for, added to need (zero it first). 0; GS_ENOENT when a
 * claim, template or class the pods name is not known (why says which); GS_EINVAL when a claim
 * can never be satisfied (GS_DRA_NEED_FEASIBLE; why names the pod's claim, the request and
 * the reason); GS_ERANGE when more than GS_DRA_NEED_MAX resource names are charged. */
int gs_dra_admit_need(const struct gs_dra_admit *a, const struct gs_pod *const *pods, size_t npods, int flags,
                      struct gs_dra_need *need, char *why, size_t len);

#endif
