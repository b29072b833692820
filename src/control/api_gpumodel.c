/*
 * api_gpumodel.c - one GPU resource management model per cluster: a
 * ClusterPolicy (nvidia.com/v1, the device-plugin model) or a GPUCluster
 * (nvidia.com/v1alpha1, the DRA model), never both, as NVIDIA's GPU
 * Operator requires. The create of the second kind is refused (409) with
 * the name of the object of the first; the operator (govern/operator.c)
 * keeps the oldest should both exist anyway (two creates racing).
 */
#include "control/apiserver_int.h"

#include <stdio.h>
#include <string.h>

struct first {
    char name[256];
};

static int first_one(const char *key, json_t *obj, void *arg)
{
    (void)key;
    struct first *f = arg;
    const char *n = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (!f->name[0] && n) snprintf(f->name, sizeof f->name, "%s", n);
    return 1; /* one is enough */
}

int gs__gpu_model_check(struct gs__req *r)
{
    if (strcmp(r->res->group, "nvidia.com")) return 0;
    bool policy = !strcmp(r->res->plural, "clusterpolicies"), cluster = !strcmp(r->res->plural, "gpuclusters");
    if (!policy && !cluster) return 0;
    const char *other = policy ? "gpuclusters.nvidia.com/" : "clusterpolicies.nvidia.com/";
    struct first f = {""};
    int64_t rv;
    int err = gs_store_list(r->s->store, other, first_one, &f, &rv);
    if (err && err != 1) return 0; /* the write itself reports a store that does not answer */
    if (!f.name[0]) return 0;
    gs__reply_status(r, 409, "Conflict", r->name,
                     "%s cannot be created: %s \"%s\" exists, and a cluster uses one GPU resource management model "
                     "(ClusterPolicy for the device plugin, GPUCluster for DRA), not both; delete it first",
                     r->res->kind, policy ? "GPUCluster" : "ClusterPolicy", f.name);
    return GS_ECONFLICT;
}
