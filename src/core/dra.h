/*
 * dra.h - the resource.k8s.io kinds (Dynamic Resource Allocation), decoded.
 *
 * ResourceSlice, DeviceClass, ResourceClaim (and a ResourceClaimTemplate's
 * spec.spec), and DeviceTaintRule arrive as JSON in three shapes: v1, v1beta2
 * (the same layout) and v1beta1 (device data under `basic`, request fields
 * directly on the request with no `exactly`). The decoders read all three into
 * one C shape, so the allocator (sched/dra_alloc.h), admission and the node
 * side never look at JSON or API versions. CEL selectors are compiled here,
 * once per object, with core/cel.h.
 *
 * Every problem is reported to a struct gs_diags under its field path, with
 * the value and why; a decoder fails (GS_EINVAL, or GS_EPARSE for a selector
 * that does not compile) when there was any, and leaves *out empty then.
 * Everything a decoded struct points to is owned by it; free with the
 * matching gs_dra_*_free, which also accepts a zeroed struct.
 */
#ifndef GS_CORE_DRA_H
#define GS_CORE_DRA_H

#include "core/cel.h"
#include "core/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { GS_DRA_EFFECT_NONE = 0, GS_DRA_EFFECT_NO_SCHEDULE = 1, GS_DRA_EFFECT_NO_EXECUTE = 2 };

struct gs_dra_device {            /* one device of a ResourceSlice */
    char *name;                   /* "gpu-0", "gpu-0-mig-1g.10gb-19-0" */
    struct gs_cel_attr *attrs; size_t nattrs;      /* strings owned */
    struct gs_cel_attr *capacity; size_t ncapacity;
    struct gs_dra_taint { char *key, *value; int effect; /* 0 None,1 NoSchedule,2 NoExecute */ int64_t time_added_s; } *taints; size_t ntaints;
    struct gs_dra_counter_use { char *counter_set; char **names; int64_t *values_milli; size_t n; } *consumes; size_t nconsumes;
    bool allow_multiple_allocations;
    /* perDeviceNodeSelection slices: the device's own nodeName / allNodes. */
    char *node_name; bool all_nodes;
};
struct gs_dra_slice {             /* a ResourceSlice */
    char *name, *driver, *pool, *node_name;  /* node_name NULL for allNodes / nodeSelector */
    bool all_nodes; int64_t generation, slice_count;
    struct gs_dra_device *devices; size_t ndevices;
    struct gs_dra_counter_set { char *name; char **names; int64_t *values_milli; size_t n; } *counters; size_t ncounters;
    /* nodeSelector given as matchFields metadata.name In [...]: those nodes. */
    char **selector_nodes; size_t nselector_nodes;
    bool per_device_nodes;        /* perDeviceNodeSelection: see each device's node_name / all_nodes */
};
struct gs_dra_selector { char *expr; struct gs_cel_program *prog; };
struct gs_dra_toleration { char *key, *op, *value; int effect; /* -1 any */ };
struct gs_dra_subrequest {        /* an `exactly`, or one `firstAvailable` entry */
    char *name;                   /* the request's name, or the sub-request's */
    char *class_name;
    struct gs_dra_selector *selectors; size_t nselectors;
    bool all;                     /* allocationMode All */
    int64_t count;                /* ExactCount: >= 1 */
    bool admin_access;
    struct gs_dra_toleration *tolerations; size_t ntolerations;
};
struct gs_dra_request {
    char *name;
    struct gs_dra_subrequest *alts; size_t nalts;   /* 1 for `exactly`, else firstAvailable in order */
    bool first_available;
};
struct gs_dra_constraint { char **requests; size_t nrequests; char *match_attr, *distinct_attr; /* "domain/name" */ };
struct gs_dra_claim_spec {
    struct gs_dra_request *requests; size_t nrequests;
    struct gs_dra_constraint *constraints; size_t nconstraints;
    json_t *config;               /* spec.devices.config as given (owned ref), copied to status */
};
struct gs_dra_result { char *request; char *driver, *pool, *device; bool admin_access; }; /* request "main/sub" for firstAvailable */
struct gs_dra_claim {             /* a ResourceClaim */
    char *ns, *name, *uid;
    struct gs_dra_claim_spec spec;
    bool allocated;               /* status.allocation present */
    struct gs_dra_result *results; size_t nresults;
    char *alloc_node;             /* from status.allocation.nodeSelector (a node name), NULL if none */
    struct gs_dra_reserved { char *name, *uid; } *reserved; size_t nreserved;
};
struct gs_dra_class { char *name; struct gs_dra_selector *selectors; size_t nselectors; json_t *config; char *extended_resource; };
struct gs_dra_taint_rule { char *name, *driver, *pool, *device; struct gs_dra_taint taint; };
/* Decoders: 0, or GS_EINVAL/GS_EPARSE with d naming the field path, value and why
 * ("spec.devices.requests[0].exactly.count: -1: must be at least 1"). CEL is compiled here. */
int gs_dra_slice_decode(const json_t *obj, struct gs_dra_slice *out, struct gs_diags *d);
int gs_dra_class_decode(const json_t *obj, struct gs_dra_class *out, struct gs_diags *d);
int gs_dra_claim_decode(const json_t *obj, struct gs_dra_claim *out, struct gs_diags *d);   /* ResourceClaim */
int gs_dra_claim_spec_decode(const json_t *spec, struct gs_dra_claim_spec *out, const char *path, struct gs_diags *d); /* also for templates' spec.spec */
int gs_dra_taint_rule_decode(const json_t *obj, struct gs_dra_taint_rule *out, struct gs_diags *d);
void gs_dra_slice_free(struct gs_dra_slice *); void gs_dra_class_free(struct gs_dra_class *);
void gs_dra_claim_free(struct gs_dra_claim *); void gs_dra_claim_spec_free(struct gs_dra_claim_spec *);
void gs_dra_taint_rule_free(struct gs_dra_taint_rule *);
/* The status JSON Kubernetes writes for an allocation on node (results, config, nodeSelector
 * matching metadata.name, allocationTimestamp from now_s), a new reference. */
json_t *gs_dra_allocation_json(const struct gs_dra_claim *c, const struct gs_dra_result *res, size_t nres,
                               const struct gs_dra_class *const *classes, size_t nclasses, const char *node, int64_t now_s);

/*--- Additions ---*/

/* Deep copies (CEL programs recompiled from their text, so the copy owns its
 * own). 0 or GS_ENOMEM (out left empty). */
int gs_dra_slice_copy(struct gs_dra_slice *out, const struct gs_dra_slice *in);
int gs_dra_class_copy(struct gs_dra_class *out, const struct gs_dra_class *in);
int gs_dra_taint_rule_copy(struct gs_dra_taint_rule *out, const struct gs_dra_taint_rule *in);
/* A ResourceClaimTemplate: its spec.spec, at path "spec.spec". */
int gs_dra_template_decode(const json_t *obj, struct gs_dra_claim_spec *out, struct gs_diags *d);
/* "NoSchedule" etc. for an effect value. */
const char *gs_dra_effect_name(int effect);

#endif
