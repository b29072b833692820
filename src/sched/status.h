/*
 * status.h - scheduling verdicts (kube-scheduler's framework.Status).
 *
 * A zero-valued status is Success, so `return (struct gs_status){0};` means OK.
 * The runner of each extension point, not the plugin, stamps `plugin` with the
 * name of the plugin that returned a non-success status. Reasons are short
 * sentences for people ("Insufficient nvidia.com/gpu"); they end up in pod
 * conditions and `gpusched explain`.
 */
#ifndef GS_SCHED_STATUS_H
#define GS_SCHED_STATUS_H

#include <stdbool.h>
#include <stddef.h>

enum gs_code {
    GS_SUCCESS = 0,
    GS_ERROR,                          /* internal failure: retried with backoff */
    GS_UNSCHEDULABLE,                  /* does not fit now; preemption may help */
    GS_UNSCHEDULABLE_AND_UNRESOLVABLE, /* does not fit and preemption cannot help */
    GS_WAIT,                           /* Permit only: hold the reservation until allowed or timed out */
    GS_SKIP,                           /* PreFilter/PreScore: this plugin has nothing to do for the pod */
    GS_PENDING,                        /* waiting on something outside the scheduler (e.g. gang members) */
    GS_CODE_COUNT
};

#define GS_STATUS_REASON_MAX 192

struct gs_status {
    enum gs_code code;
    const char *plugin;                 /* static string: set by the runner */
    char reason[GS_STATUS_REASON_MAX];
};

/* "Success", "Unschedulable", ... */
const char *gs_code_name(enum gs_code c);
/* Builds a status with a printf-style reason. */
struct gs_status gs_status_make(enum gs_code c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline bool gs_status_ok(const struct gs_status *s) { return s->code == GS_SUCCESS; }
static inline bool gs_status_rejects(const struct gs_status *s)
{
    return s->code == GS_UNSCHEDULABLE || s->code == GS_UNSCHEDULABLE_AND_UNRESOLVABLE;
}

#endif
