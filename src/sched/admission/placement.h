/*
 * placement.h - "can this workload be placed right now?", answered with the
 * scheduler's own filter plugins on the live cache.
 *
 * Kueue admits on quota alone, so an admitted 8-GPU job can sit on GPUs
 * scattered over nodes while small jobs wait behind it. Admission asks this
 * instead: every pod of the workload, one after the other, must find a node
 * that passes the profile's PreFilter/Filter plugins (the same code the
 * scheduling cycle runs), plus the flavor's node labels and not a node held
 * for someone else. The chosen devices come from GpuShare's Reserve (the
 * same best fit the scheduler uses), and each pod is assumed in the cache so
 * the next pod sees what the earlier ones took; at the end every assumption
 * is forgotten, leaving the cache exactly as it was (the cache's
 * assume/forget contract, checked by gs_cache_check in the tests).
 *
 * Among passing nodes a pod goes to the one with the least free GPU that
 * still fits (then the lowest index): packing keeps whole nodes whole for
 * the gangs that come after, and makes the answer deterministic.
 */
#ifndef GS_SCHED_ADMISSION_PLACEMENT_H
#define GS_SCHED_ADMISSION_PLACEMENT_H

#include "sched/framework.h"

struct gs_placer;

/* Filters of profile p (borrowed; NULL: the built-in default profile) over
 * cache (borrowed). 0 or an error with d filled (plugin args). */
int gs_placer_new(struct gs_cache *cache, const struct gs_clock *clock, const struct gs_profile *p,
                  struct gs_placer **out, struct gs_diags *d);
void gs_placer_free(struct gs_placer *p);

struct gs_place_req {
    const struct gs_pod *const *pods;
    size_t npods;
    const struct gs_labels *labels; /* node labels every node must have (a flavor's); may be NULL */
    const uint8_t *excluded;        /* by node index, nonzero = not usable; may be NULL */
    int32_t *nodes_out;             /* npods entries, the node of each pod; may be NULL */
    bool keep;                      /* on success leave the pods assumed (the caller removes them) */
};

/* 1 when every pod fits at once, 0 when not (why names the first pod that
 * did not, may be NULL), or a negative GS_E*. The cache is left unchanged
 * unless r->keep and the answer is 1. */
int gs_placer_try(struct gs_placer *p, const struct gs_place_req *r, char *why, size_t len);

/* Does have carry every key=value of want (a flavor's node labels)? */
bool gs__labels_cover(const struct gs_labels *want, const struct gs_labels *have);

#endif
