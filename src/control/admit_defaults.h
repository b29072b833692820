/*
 * admit_defaults.h - what the API server adds to, and refuses in, pod writes
 * for the node lifecycle's taint-based eviction (nodelifecycle.h).
 *
 * DefaultTolerationSeconds, as the Kubernetes admission plugin of that name:
 * every pod created through the API gets
 *   {key: node.kubernetes.io/not-ready,   operator: Exists, effect: NoExecute, tolerationSeconds: N}
 *   {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: M}
 * unless it already tolerates that taint with effect NoExecute (or any
 * effect, or any key). N and M are 300 unless the server is told otherwise
 * (--default-not-ready-toleration-seconds, --default-unreachable-toleration-seconds,
 * kube-apiserver's flags). So a pod on a node that stops answering is evicted
 * five minutes after the taint went on, and a pod that tolerates the taint
 * without tolerationSeconds is never evicted for it.
 *
 * Terminal phases are final: a status write that moves a pod out of
 * Succeeded or Failed is refused (422, status.phase), as Kubernetes' pod
 * status validation does. That is what keeps a finished orphan on a node
 * that came back from flipping Failed -> Succeeded.
 */
#ifndef GS_CONTROL_ADMIT_DEFAULTS_H
#define GS_CONTROL_ADMIT_DEFAULTS_H

#include "loops/nodelifecycle.h" /* the taint keys */
#include "core/error.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define GS_DEFAULT_TOLERATION_S 300 /* Kubernetes' DefaultTolerationSeconds */

struct gs_admit_defaults {
    int64_t not_ready_s;   /* tolerationSeconds of the added not-ready toleration */
    int64_t unreachable_s; /* ... of the added unreachable toleration */
};

/* *d from from, or 300 s each when from is NULL. */
void gs_admit_defaults_init(struct gs_admit_defaults *d, const struct gs_admit_defaults *from);

/* Parses a seconds flag value (a whole number, 0 or more). On error err
 * names the flag, the value and why; returns GS_EINVAL. */
int gs_admit_seconds_parse(const char *flag, const char *text, int64_t *out, char *err, size_t errlen);

/* Adds the default NoExecute tolerations to obj when it is a core v1 Pod
 * whose spec.tolerations is absent or an array (anything else is left for
 * validation to refuse). */
void gs_admit_default_tolerations(const struct gs_admit_defaults *d, json_t *obj);

/* A pod status write from cur to next: adds a status.phase diagnostic to diags
 * when cur is Succeeded or Failed and next has another phase. */
void gs_admit_phase_check(const json_t *cur, const json_t *next, struct gs_diags *diags);

#endif
