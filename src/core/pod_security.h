/*
 * pod_security.h - what a pod may not ask of the node: the environment
 * variables the agent sets itself (device visibility above all), and the
 * identity its processes run as (securityContext runAsUser, runAsGroup,
 * runAsNonRoot, at pod or container level, as Kubernetes).
 *
 * The API refuses a pod that sets a reserved variable (422 naming
 * spec.containers[i].env[j].name) so a pod cannot pick GPUs it was not
 * given; the agent, in defence, applies its own variables after the pod's.
 * The agent reads the effective identity with gs_pod_run_as().
 */
#ifndef GS_CORE_POD_SECURITY_H
#define GS_CORE_POD_SECURITY_H

#include <jansson.h>
#include <stdbool.h>

struct gs_dec;

/* Longest grace period accepted (terminationGracePeriodSeconds, a delete's
 * gracePeriodSeconds): one year. Larger values would overflow the deletion
 * deadline (now + grace) into a date in the past. */
#define GS_GRACE_MAX_S 31536000LL

/* True when name is set by the agent for every container (NVIDIA_VISIBLE_DEVICES,
 * CUDA_VISIBLE_DEVICES, GPUSCHED_POD, ...) and a pod's env may not set it. */
bool gs_pod_env_reserved(const char *name);

/* The effective securityContext of container ctr (a spec.containers[] item)
 * in pod spec: the container's fields over the pod's. -1 when absent. */
struct gs_run_as {
    long long user, group;
    bool non_root;
};
void gs_pod_run_as(const json_t *spec, const json_t *ctr, struct gs_run_as *out);

/* Checks env names, securityContext and terminationGracePeriodSeconds of spec (at the decoder's current
 * path, "spec"); problems go to the decoder's diagnostics. */
void gs__pod_check_security(struct gs_dec *dc, const json_t *spec);

#endif
