/*
 * sched_dra.h - the scheduler loop's Dynamic Resource Allocation side: the
 * DRA kinds it follows (fed into the cache, sched/cache_dra.h) and the claim
 * status writes a binding owes (sched/dra_plugin.h).
 *
 * Before a pod with claims is bound, each claim's status is written through
 * the source's status subresource: a new allocation (results, config,
 * nodeSelector, allocationTimestamp, as Kubernetes writes it) and the pod in
 * reservedFor, or only the pod in reservedFor for a claim allocated already
 * (a shared claim). A write that fails leaves the pod unbound: the ones
 * already written are undone and the pod goes back to the queue. A binding
 * that fails afterwards undoes them the same way (the pod out of
 * reservedFor, the allocation cleared when this binding made it and no one
 * else holds the claim). The claims' devices stay held as assumed in the
 * cache until their allocated versions come back through the stream.
 */
#ifndef GS_LOOPS_SCHED_DRA_H
#define GS_LOOPS_SCHED_DRA_H

#include "informer/source.h"
#include "sched/dra_plugin.h"
#include "sched/framework.h"

/* The kinds[] rows of sched_loop.c for the five DRA kinds, all handled by fn. */
#define GS_SCHED_DRA_KINDS(fn)                                                                              \
    {"deviceclasses.resource.k8s.io/", fn}, {"devicetaintrules.resource.k8s.io/", fn},                       \
        {"resourceslices.resource.k8s.io/", fn}, {"resourceclaimtemplates.resource.k8s.io/", fn},            \
        {"resourceclaims.resource.k8s.io/", fn}

/* Takes the writes pod's binding owes from fw's DynamicResources plugin and
 * writes them (write=false: takes them only, for a replica that may not
 * write). 0 with *w / *n (the caller keeps them for gs_sched_dra_undo /
 * gs_sched_dra_done), or the first write's error with everything undone
 * and nothing left in *w. */
int gs_sched_dra_write(struct gs_source *src, struct gs_framework *fw, struct gs_cache *cache, const char *pod_key,
                       bool write, struct gs_dra_claim_write **w, size_t *n);
/* The binding failed or was dropped: undoes what was written, drops the
 * assumptions, frees. */
void gs_sched_dra_undo(struct gs_source *src, struct gs_cache *cache, struct gs_dra_claim_write *w, size_t n);
/* The binding was written: frees (the assumptions end with the claims' echo). */
void gs_sched_dra_done(struct gs_dra_claim_write *w, size_t n);

#endif
