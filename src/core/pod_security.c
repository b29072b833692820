/*
 * pod_security.c - reserved environment variables and securityContext
 * checks of a pod; see pod_security.h.
 *
 * The reserved names are exactly what the agent writes into every
 * container's environment (src/agent/agent_pods.c env_build, the Allocate
 * answer of src/node/allocate.c, MIG instances of agent_mig.c): a pod that
 * could set them would choose its own GPUs or impersonate another pod.
 * Kubernetes rejects nothing here, since its device plugins inject into an
 * isolated container; our processes run on the host, so the API must.
 */
#include "core/pod_security.h"
#include "core/decode.h"

#include <stdint.h>
#include <string.h>

static const char *const reserved[] = {
    "NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_MIG_CONFIG_DEVICES",
    "NVIDIA_MIG_MONITOR_DEVICES", "GPUSCHED_GPU_MILLI", "GPUSCHED_POD", "GPUSCHED_NAMESPACE", "GPUSCHED_POD_UID",
    "GPUSCHED_NODE", "GPUSCHED_CONTAINER", NULL,
};

bool gs_pod_env_reserved(const char *name)
{
    for (int i = 0; name && reserved[i]; i++)
        if (!strcmp(name, reserved[i])) return true;
    return false;
}

static void run_as_of(const json_t *sc, struct gs_run_as *out)
{
    json_t *u = json_object_get(sc, "runAsUser"), *g = json_object_get(sc, "runAsGroup");
    json_t *nr = json_object_get(sc, "runAsNonRoot");
    if (json_is_integer(u)) out->user = json_integer_value(u);
    if (json_is_integer(g)) out->group = json_integer_value(g);
    if (json_is_boolean(nr)) out->non_root = json_is_true(nr);
}

void gs_pod_run_as(const json_t *spec, const json_t *ctr, struct gs_run_as *out)
{
    out->user = out->group = -1;
    out->non_root = false;
    run_as_of(json_object_get(spec, "securityContext"), out);
    run_as_of(json_object_get(ctr, "securityContext"), out);
}

/* runAsUser/runAsGroup in [0, 2^31-1] and runAsNonRoot a boolean, at dc's path. */
static void check_context(struct gs_dec *dc, const json_t *holder)
{
    json_t *sc = gs__dec_get(dc, holder, "securityContext", JSON_OBJECT);
    if (!sc) return;
    size_t m = gs__dec_key(dc, "securityContext");
    int64_t v;
    bool b;
    gs__dec_int(dc, sc, "runAsUser", 0, INT32_MAX, &v);
    gs__dec_int(dc, sc, "runAsGroup", 0, INT32_MAX, &v);
    gs__dec_bool(dc, sc, "runAsNonRoot", &b);
    gs__dec_pop(dc, m);
}

static void check_containers(struct gs_dec *dc, const json_t *spec, const char *key)
{
    json_t *arr = json_object_get(spec, key);
    if (!json_is_array(arr)) return; /* the container decoder reports the type */
    size_t m = gs__dec_key(dc, key), i;
    json_t *c;
    json_array_foreach(arr, i, c) {
        if (!json_is_object(c)) continue;
        size_t m2 = gs__dec_idx(dc, i);
        check_context(dc, c);
        struct gs_run_as ra;
        gs_pod_run_as(spec, c, &ra);
        if (ra.non_root && ra.user == 0)
            gs__dec_err_at(dc, "securityContext",
                           "runAsUser 0 runs the container as root, which runAsNonRoot: true forbids");
        json_t *env = json_object_get(c, "env");
        if (json_is_array(env)) {
            size_t m3 = gs__dec_key(dc, "env"), j;
            json_t *e;
            json_array_foreach(env, j, e) {
                const char *name = json_string_value(json_object_get(e, "name"));
                if (!gs_pod_env_reserved(name)) continue;
                size_t m4 = gs__dec_idx(dc, j);
                gs__dec_err_at(dc, "name",
                               "\"%s\" is set by the node agent from the devices and identity given to the pod; "
                               "a pod may not set it",
                               name);
                gs__dec_pop(dc, m4);
            }
            gs__dec_pop(dc, m3);
        }
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

void gs__pod_check_security(struct gs_dec *dc, const json_t *spec)
{
    /* terminationGracePeriodSeconds is bounded by the pod decoder (pod.c). */
    check_context(dc, spec);
    check_containers(dc, spec, "containers");
    check_containers(dc, spec, "initContainers");
}
