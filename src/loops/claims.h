/*
 * claims.h - the resourceclaim controller: what kube-controller-manager's
 * resourceclaim controller does for pods with spec.resourceClaims, as a
 * control loop over a source (source.h), run by the server and by the
 * standalone scheduler beside the scheduler loop.
 *
 * For every pod that is not finished nor being deleted:
 *   - each spec.resourceClaims[] entry naming a resourceClaimTemplateName
 *     gets its own ResourceClaim, created from the template's spec.spec
 *     (and spec.metadata labels and annotations) in the pod's namespace,
 *     named "<pod>-<claim>-<5 chars>" (the chars derived from the seed, the
 *     pod's uid and the entry's name, so the same inputs give the same
 *     name), with the annotation resource.kubernetes.io/pod-claim-name =
 *     the entry's name and a controller ownerReference to the pod;
 *   - the pod's status.resourceClaimStatuses[] names the claim of each such
 *     entry ({name, resourceClaimName}), written when it differs;
 *   - a pod asking an extended resource (say nvidia.com/gpu: 2) that a
 *     DeviceClass serves through spec.extendedResourceName gets one
 *     generated claim "<pod>-extended-resources-<5 chars>" with one request
 *     per container and resource (exactly count = the amount, that class),
 *     annotated resource.kubernetes.io/extended-resource-claim=true, and
 *     status.extendedResourceClaimStatus {resourceClaimName,
 *     requestMappings[{containerName, resourceName, requestName}]}.
 *
 * For every ResourceClaim:
 *   - status.reservedFor keeps only pods that still exist and have not
 *     finished (Succeeded / Failed); entries of other resources are kept;
 *   - when the last consumer is gone the allocation is cleared
 *     (deallocation), so its devices are free for others;
 *   - an allocated claim carries the finalizer
 *     resource.kubernetes.io/delete-protection, removed once it is no
 *     longer allocated;
 *   - a generated claim whose owning pod no longer exists is deleted (with
 *     a uid precondition), after being deallocated.
 *
 * Lists are read claims first, then pods: a consumer a claim names that is
 * missing from the later pod list is truly gone, while a pod the scheduler
 * reserved a claim for after the lists is untouched (every status write is
 * a read-modify-write that only removes the uids found dead).
 */
#ifndef GS_LOOPS_CLAIMS_H
#define GS_LOOPS_CLAIMS_H

#include "informer/source.h"
#include "sched/dra_plugin.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_CLAIMS_PREFIX "resourceclaims.resource.k8s.io/"
#define GS_CLAIM_TEMPLATES_PREFIX "resourceclaimtemplates.resource.k8s.io/"
#define GS_DEVICECLASSES_PREFIX "deviceclasses.resource.k8s.io/"
#define GS_RESOURCESLICES_PREFIX "resourceslices.resource.k8s.io/"
#define GS_DEVICETAINTRULES_PREFIX "devicetaintrules.resource.k8s.io/"

#define GS_ANN_POD_CLAIM_NAME "resource.kubernetes.io/pod-claim-name"
#define GS_ANN_EXTENDED_CLAIM "resource.kubernetes.io/extended-resource-claim"
#define GS_FINALIZER_CLAIM "resource.kubernetes.io/delete-protection"

struct gs_claims_opts {
    struct gs_source *source; /* borrowed: every read and write */
    uint64_t seed;            /* generated names */
    int64_t period_ms;        /* the longest wait between passes; 0: 1000 ms (changes wake it sooner) */
    const char *api_version;  /* of the claims it creates; NULL: "resource.k8s.io/v1beta1" */
};

struct gs_claims_stats {
    uint64_t passes;
    uint64_t created;         /* claims created from templates or for extended resources */
    uint64_t deleted;         /* generated claims deleted with their pod */
    uint64_t deallocated;     /* allocations cleared after the last consumer left */
    uint64_t pruned;          /* reservedFor entries dropped */
    uint64_t pod_status;      /* pod status writes (resourceClaimStatuses / extendedResourceClaimStatus) */
    uint64_t errors;          /* writes that failed (retried on the next pass) */
};

struct gs_claims;

/* A controller not yet running: gs_claims_sync drives it (tests), or
 * gs_claims_start runs it on its own thread. 0 or GS_ENOMEM. */
int gs_claims_new(const struct gs_claims_opts *o, struct gs_claims **out);
/* One pass over every pod, claim, template and class (see above). 0, or the
 * first list error (nothing then written). */
int gs_claims_sync(struct gs_claims *c);
/* Starts the thread: a pass at once, then one after each batch of changes
 * to pods, claims, templates or classes, and at least every period_ms. */
int gs_claims_start(const struct gs_claims_opts *o, struct gs_claims **out);
/* Stops the thread (if any) and frees. NULL is fine. */
void gs_claims_stop(struct gs_claims *c);
void gs_claims_stats(struct gs_claims *c, struct gs_claims_stats *out);

/* The generated name "<pod>-<claim>-<5 chars>" into buf: the 5 chars from
 * kube's alphabet ("bcdfghjklmnpqrstvwxz2456789"), drawn from seed, pod_uid
 * and claim. Returns the length (snprintf). */
int gs_claims_generated_name(const char *pod, const char *claim, const char *pod_uid, uint64_t seed, char *buf,
                             size_t len);

/* gs_store_mutate_fn for the claim's status subresource: writes
 * allocation (when given) and adds the pod to reservedFor; GS_ENOENT when
 * the claim is gone or has another uid, GS_ECONFLICT when it is allocated
 * differently meanwhile. arg: a struct gs_dra_claim_write
 * (sched/dra_plugin.h): what the scheduler loop writes before a binding. */
int gs_dra_claim_status_fn(json_t *cur, json_t **out, void *arg);
/* The undo for a failed binding: the pod out of reservedFor, and the
 * allocation cleared when this write made it and no one else is reserved. */
int gs_dra_claim_undo_fn(json_t *cur, json_t **out, void *arg);

#endif
