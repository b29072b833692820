/*
 * resources.c - the served resource table; see resources.h.
 */
#include "control/resources.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define CORE(pl, si, k, sh, ns, st) {"", "v1", pl, si, k, sh, ns, st, pl}
#define RES(g, v, pl, si, k, sh, ns, st) {g, v, pl, si, k, sh, ns, st, pl "." g}

static const struct gs_api_resource table[] = {
    CORE("pods", "pod", "Pod", "po", true, true),
    CORE("nodes", "node", "Node", "no", false, true),
    CORE("namespaces", "namespace", "Namespace", "ns", false, false),
    CORE("events", "event", "Event", "ev", true, false),
    RES("scheduling.x-k8s.io", "v1alpha1", "podgroups", "podgroup", "PodGroup", "pg", true, true),
    RES("scheduling.gpusched.io", "v1alpha1", "queues", "queue", "Queue", "q", false, true),
    RES("kueue.x-k8s.io", "v1beta1", "clusterqueues", "clusterqueue", "ClusterQueue", "cq", false, true),
    RES("kueue.x-k8s.io", "v1beta1", "localqueues", "localqueue", "LocalQueue", "lq", true, true),
    RES("kueue.x-k8s.io", "v1beta1", "resourceflavors", "resourceflavor", "ResourceFlavor", "rf,flavor", false,
        false),
    RES("kueue.x-k8s.io", "v1beta1", "workloadpriorityclasses", "workloadpriorityclass", "WorkloadPriorityClass",
        "wpc", false, false),
    /* Kueue v1beta2 (what Kueue v0.20 serves alone) over the same stored objects as
     * v1beta1: one id per resource, the object kept in the version it was written in. */
    RES("kueue.x-k8s.io", "v1beta2", "clusterqueues", "clusterqueue", "ClusterQueue", "cq", false, true),
    RES("kueue.x-k8s.io", "v1beta2", "localqueues", "localqueue", "LocalQueue", "lq", true, true),
    RES("kueue.x-k8s.io", "v1beta2", "resourceflavors", "resourceflavor", "ResourceFlavor", "rf,flavor", false,
        false),
    RES("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", "workloadpriorityclass", "WorkloadPriorityClass",
        "wpc", false, false),
    /* The other two PodGroup shapes, each its own resource so equal names do not collide. */
    RES("scheduling.volcano.sh", "v1beta1", "podgroups", "podgroup", "PodGroup", "podgroup-v1beta1", true, true),
    RES("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", "noderesourcetopology",
        "NodeResourceTopology", "nrt", false, false),
    RES("nvidia.com", "v1", "clusterpolicies", "clusterpolicy", "ClusterPolicy", NULL, false, true),
    /* DRA: v1 first (the group's preferred version and the one stored), then
     * v1beta2 and v1beta1 over the same stored objects, converted on the way
     * in and out (dra_convert.c). DeviceTaintRule, which v1beta1 never had, is at v1, v1beta2
     * and v1alpha3. */
#define DRA(v)                                                                                                      \
    RES("resource.k8s.io", v, "resourceclaims", "resourceclaim", "ResourceClaim", NULL, true, true),               \
        RES("resource.k8s.io", v, "resourceclaimtemplates", "resourceclaimtemplate", "ResourceClaimTemplate", NULL, \
            true, false),                                                                                           \
        RES("resource.k8s.io", v, "deviceclasses", "deviceclass", "DeviceClass", NULL, false, false),               \
        RES("resource.k8s.io", v, "resourceslices", "resourceslice", "ResourceSlice", NULL, false, false)
#define TAINTS(v) RES("resource.k8s.io", v, "devicetaintrules", "devicetaintrule", "DeviceTaintRule", NULL, false, true)
    DRA("v1"), TAINTS("v1"), DRA("v1beta2"), TAINTS("v1beta2"), DRA("v1beta1"), TAINTS("v1alpha3"),
#undef DRA
#undef TAINTS
    RES("nvidia.com", "v1alpha1", "gpuclusters", "gpucluster", "GPUCluster", NULL, false, true),
    RES("coordination.k8s.io", "v1", "leases", "lease", "Lease", NULL, true, false),
    /* The same stored Events as core v1's (id "events"), served converted (events.h). */
    {"events.k8s.io", "v1", "events", "event", "Event", "ev", true, false, "events"},
    RES("policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", "pdb", true, true),
    RES("scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass", "pc", false, false),
    RES("node.k8s.io", "v1", "runtimeclasses", "runtimeclass", "RuntimeClass", NULL, false, false),
    /* After v1's row: v1 stays the group's preferred version. */
    RES("scheduling.k8s.io", "v1beta1", "podgroups", "podgroup", "PodGroup", NULL, true, true),
    RES("scheduling.k8s.io", "v1beta1", "workloads", "workload", "Workload", NULL, true, false),
    /* Served by api_ui.c, never stored: who a token is, and the console's queue history. */
    RES("authentication.k8s.io", "v1", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", NULL, false,
        false),
    RES("ui.gpusched.io", "v1", "queuehistories", "queuehistory", "QueueHistory", NULL, true, false),
};
#define NTABLE (sizeof table / sizeof table[0])

const struct gs_api_resource *gs_api_resources(size_t *n)
{
    *n = NTABLE;
    return table;
}

const struct gs_api_resource *gs_api_resource_find(const char *group, const char *version, const char *plural)
{
    for (size_t i = 0; i < NTABLE; i++)
        if (!strcmp(table[i].group, group) && !strcmp(table[i].version, version) && !strcmp(table[i].plural, plural))
            return &table[i];
    return NULL;
}

const struct gs_api_resource *gs_api_resource_by_kind(const char *api_version, const char *kind)
{
    if (!kind) return NULL;
    const struct gs_api_resource *any = NULL;
    for (size_t i = 0; i < NTABLE; i++) {
        if (strcmp(table[i].kind, kind)) continue;
        char gv[128];
        if (!api_version || !strcmp(gs_api_resource_gv(&table[i], gv, sizeof gv), api_version)) return &table[i];
        /* Same group, other version: served under ours (the object is stored as given). */
        const char *slash = strchr(api_version, '/');
        size_t glen = slash ? (size_t)(slash - api_version) : 0;
        if (glen == strlen(table[i].group) && !strncmp(api_version, table[i].group, glen)) any = &table[i];
    }
    return any;
}

static bool short_match(const char *list, const char *name)
{
    if (!list) return false;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !strncasecmp(p, name, n)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

const struct gs_api_resource *gs_api_resource_lookup(const char *name)
{
    if (!name || !*name) return NULL;
    char base[128];
    const char *dot = strchr(name, '.');
    size_t bl = dot ? (size_t)(dot - name) : strlen(name);
    if (bl >= sizeof base) return NULL;
    memcpy(base, name, bl);
    base[bl] = 0;
    for (size_t i = 0; i < NTABLE; i++) {
        const struct gs_api_resource *r = &table[i];
        if (dot && strcasecmp(dot + 1, r->group)) continue;
        if (!strcasecmp(base, r->plural) || !strcasecmp(base, r->singular) || !strcasecmp(base, r->kind) ||
            short_match(r->short_names, base))
            return r;
    }
    return NULL;
}

const char *gs_api_resource_gv(const struct gs_api_resource *r, char *buf, size_t len)
{
    if (r->group[0]) snprintf(buf, len, "%s/%s", r->group, r->version);
    else snprintf(buf, len, "%s", r->version);
    return buf;
}

int gs_api_key(const struct gs_api_resource *r, const char *ns, const char *name, char *buf, size_t len)
{
    int n;
    if (r->namespaced && ns) n = snprintf(buf, len, "%s/%s/%s", r->id, ns, name ? name : "");
    else n = snprintf(buf, len, "%s/%s", r->id, name ? name : "");
    return n < 0 || (size_t)n >= len ? -1 : n;
}

int gs_api_path(const struct gs_api_resource *r, const char *ns, const char *name, char *buf, size_t len)
{
    char gv[128];
    gs_api_resource_gv(r, gv, sizeof gv);
    const char *root = r->group[0] ? "/apis/" : "/api/";
    int n;
    if (r->namespaced && ns)
        n = snprintf(buf, len, "%s%s/namespaces/%s/%s%s%s", root, gv, ns, r->plural, name ? "/" : "", name ? name : "");
    else n = snprintf(buf, len, "%s%s/%s%s%s", root, gv, r->plural, name ? "/" : "", name ? name : "");
    return n < 0 || (size_t)n >= len ? -1 : n;
}
