/*
 * kinds.c - gang and queue objects, and the checks for kinds we keep generic.
 *
 * PodGroup is read in the three shapes users bring, into one struct the gang
 * plugin uses:
 *   - scheduler-plugins' scheduling.x-k8s.io/v1alpha1 (minMember required,
 *     minResources, scheduleTimeoutSeconds); pods join with the label
 *     scheduling.x-k8s.io/pod-group;
 *   - Volcano's scheduling.volcano.sh/v1beta1 (minMember defaulting to 1,
 *     queue, minResources, minTaskMember, priorityClassName); pods join with
 *     the annotation scheduling.k8s.io/group-name;
 *   - native scheduling.k8s.io/v1beta1 (Kubernetes 1.37): spec.schedulingPolicy
 *     is exactly one of basic {} (no gang: minCount 1) or gang {minCount};
 *     schedulingConstraints.topology[0].key puts every member in one domain
 *     of that node label (as the annotation gpusched.io/required-topology);
 *     workloadRef names the Workload template it came from; pods join with
 *     spec.schedulingGroup.podGroupName.
 * The group key (gs_podgroup.group, what a member's gs_pod.pod_group holds) is
 * the bare name for the first shape, as before, and "<api group>/<name>" for
 * the other two, so a Volcano and a native PodGroup both called "train" in one
 * namespace are two groups.
 *
 * Workload (scheduling.k8s.io/v1beta1) is validated here: podGroupTemplates
 * (at most 8, unique names) each with a schedulingPolicy as above, at most one
 * topology constraint and at most 4 resourceClaims. Its whole spec is
 * immutable in Kubernetes; we check shape only.
 *
 * Queue is Volcano's shape (weight 1..65535, capability, deserved,
 * guarantee.resource, parent, priority), also served as our own
 * scheduling.gpusched.io/v1alpha1 where `guarantee` may be a plain
 * ResourceList and `limit` stands for `capability`. The guarantee we keep is
 * `deserved` when given (what the queue is entitled to), else guarantee.
 *
 * PriorityClass (scheduling.k8s.io/v1) has no spec: value (at most one
 * billion, Kubernetes' highest user-definable priority; the built-in
 * "system-" classes go above), globalDefault, preemptionPolicy
 * PreemptLowerPriority|Never, description. The API server resolves a pod's
 * class into spec.priority (control/api_fields.c). Kueue's
 * WorkloadPriorityClass (v1beta1 and v1beta2 alike) is value (int32) and
 * description (at most 2048 characters).
 *
 * Kueue is accepted at v1beta1 and v1beta2. What v1beta2 renamed is refused
 * under its old name with the new one in the message: ClusterQueue
 * spec.cohort (now cohortName), flavorFungibility whenCanBorrow: Borrow and
 * whenCanPreempt: Preempt (now MayStopSearch), and the list
 * spec.admissionChecks (now admissionChecksStrategy). v1beta1 takes both the
 * old and the new value names, as Kueue's last v1beta1 releases do.
 *
 * The resource.k8s.io kinds are checked in kinds_dra.c. The
 * NodeResourceTopology and ClusterPolicy kinds have no typed
 * struct yet; their documents are kept whole and checked here for the fields
 * the scheduler and operator rely on, so a malformed quota or device request
 * is refused at validate time rather than ignored later.
 */
#include "core/decode.h"
#include "core/quantity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- PodGroup ---*/

void gs__podgroup_clear(struct gs_podgroup *p)
{
    gs_meta_clear(&p->meta);
    json_decref(p->doc);
    gs_resources_free(&p->min_resources);
    free(p->queue);
    free(p->group);
    free(p->priority_class_name);
    free(p->topology_key);
    memset(p, 0, sizeof *p);
}

static void dec_int_map(struct gs_dec *dc, const json_t *obj, const char *key, int64_t min)
{
    json_t *map = gs__dec_get(dc, obj, key, JSON_OBJECT);
    const char *k;
    json_t *v;
    size_t m = gs__dec_key(dc, key);
    json_object_foreach(map, k, v) {
        int64_t x;
        gs__dec_int(dc, map, k, min, INT32_MAX, &x);
    }
    gs__dec_pop(dc, m);
}

/* schedulingPolicy {basic: {} | gang: {minCount}} of a native PodGroup or a
 * Workload template; *min gets minCount (1 for basic). */
static void dec_sched_policy(struct gs_dec *dc, const json_t *obj, int32_t *min)
{
    json_t *pol = gs__dec_get(dc, obj, "schedulingPolicy", JSON_OBJECT);
    if (!pol) {
        if (!json_object_get(obj, "schedulingPolicy")) gs__dec_err_at(dc, "schedulingPolicy", "is required");
        return;
    }
    size_t m = gs__dec_key(dc, "schedulingPolicy");
    json_t *basic = json_object_get(pol, "basic"), *gang = json_object_get(pol, "gang");
    if ((basic != NULL) == (gang != NULL))
        gs__dec_err(dc, "exactly one of basic or gang must be set, got %s", basic ? "both" : "neither");
    gs__dec_get(dc, pol, "basic", JSON_OBJECT);
    json_t *g = gs__dec_get(dc, pol, "gang", JSON_OBJECT);
    *min = 1;
    if (g) {
        size_t m2 = gs__dec_key(dc, "gang");
        int64_t v;
        if (gs__dec_int(dc, g, "minCount", 1, INT32_MAX, &v)) *min = (int32_t)v;
        else if (!json_object_get(g, "minCount")) gs__dec_err_at(dc, "minCount", "is required");
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

static void each(struct gs_dec *dc, const json_t *obj, const char *key, size_t max,
                 void (*fn)(struct gs_dec *, const json_t *, void *), void *arg);
static const char *required_str(struct gs_dec *dc, const json_t *obj, const char *key);

/* schedulingConstraints {topology: [{key}]}: one topology key at most. */
static void topo_key(struct gs_dec *dc, const json_t *t, void *arg)
{
    (void)arg;
    required_str(dc, t, "key");
}

static void pg_claim(struct gs_dec *dc, const json_t *c, void *arg)
{
    (void)arg;
    required_str(dc, c, "name");
    bool a = gs__dec_str(dc, c, "resourceClaimName") != NULL, b = gs__dec_str(dc, c, "resourceClaimTemplateName") != NULL;
    if (a == b) gs__dec_err(dc, "exactly one of resourceClaimName or resourceClaimTemplateName must be set");
}

static void dec_native_common(struct gs_dec *dc, const json_t *spec)
{
    json_t *sc = gs__dec_get(dc, spec, "schedulingConstraints", JSON_OBJECT);
    if (sc) {
        size_t m = gs__dec_key(dc, "schedulingConstraints");
        each(dc, sc, "topology", 1, topo_key, NULL);
        gs__dec_pop(dc, m);
    }
    each(dc, spec, "resourceClaims", 4, pg_claim, NULL);
    gs__dec_str(dc, spec, "disruptionMode");
}

static void dec_native_podgroup(struct gs_dec *dc, const json_t *spec, struct gs_podgroup *p)
{
    dec_sched_policy(dc, spec, &p->min_member);
    dec_native_common(dc, spec);
    /* every member in one domain of the key: the gang plugin's required topology */
    const json_t *topo = json_object_get(json_object_get(spec, "schedulingConstraints"), "topology");
    const char *key = json_string_value(json_object_get(json_array_get(topo, 0), "key"));
    if (key && *key && !(p->topology_key = strdup(key))) dc->oom = true;
    json_t *ref = gs__dec_get(dc, spec, "workloadRef", JSON_OBJECT);
    if (ref) {
        size_t m = gs__dec_key(dc, "workloadRef");
        required_str(dc, ref, "workloadName");
        required_str(dc, ref, "templateName");
        gs__dec_pop(dc, m);
    }
    gs__dec_str(dc, spec, "parentCompositePodGroupName");
    static const char *const policies[] = {"PreemptLowerPriority", "Never", NULL};
    if (json_object_get(spec, "preemptionPolicy")) gs__dec_enum(dc, spec, "preemptionPolicy", policies, NULL);
}

int gs__podgroup_decode(json_t *doc, struct gs_podgroup *p, struct gs_dec *dc)
{
    const char *api = json_string_value(json_object_get(doc, "apiVersion"));
    bool volcano = api && !strncmp(api, "scheduling.volcano.sh/", 22);
    bool native = api && !strncmp(api, "scheduling.k8s.io/", 18);
    p->shape = native ? GS_PG_NATIVE : volcano ? GS_PG_VOLCANO : GS_PG_COSCHED;
    gs__dec_meta(dc, doc, true, &p->meta);
    json_t *spec = gs__dec_get(dc, doc, "spec", JSON_OBJECT);
    if (native && !spec && !json_object_get(doc, "spec")) gs__dec_err_at(dc, "spec", "is required");
    size_t m = gs__dec_key(dc, "spec");
    int64_t v;
    p->min_member = 1;
    if (native) {
        if (spec) dec_native_podgroup(dc, spec, p);
    } else {
        if (gs__dec_int(dc, spec, "minMember", 1, INT32_MAX, &v)) p->min_member = (int32_t)v;
        else if (!volcano && !(spec && json_object_get(spec, "minMember"))) gs__dec_err_at(dc, "minMember", "is required");
        gs__dec_resources(dc, spec, "minResources", &p->min_resources);
        if (gs__dec_int(dc, spec, "scheduleTimeoutSeconds", 1, INT32_MAX, &v)) p->schedule_timeout_seconds = (int32_t)v;
        p->queue = gs__dec_strdup(dc, spec, "queue");
        dec_int_map(dc, spec, "minTaskMember", 0);
    }
    if (gs__dec_int(dc, spec, "priority", INT32_MIN, INT32_MAX, &v)) p->priority = (int32_t)v;
    p->priority_class_name = gs__dec_strdup(dc, spec, "priorityClassName");
    gs__dec_pop(dc, m);
    if (p->meta.name) {
        const char *prefix = native ? "scheduling.k8s.io/" : volcano ? "scheduling.volcano.sh/" : "";
        if (asprintf(&p->group, "%s%s", prefix, p->meta.name) < 0) p->group = NULL, dc->oom = true;
    }
    p->doc = json_incref(doc);
    return dc->oom ? GS_ENOMEM : 0;
}

/*--- Queue ---*/

void gs__queue_clear(struct gs_queue *q)
{
    gs_meta_clear(&q->meta);
    json_decref(q->doc);
    free(q->parent);
    gs_resources_free(&q->guarantee);
    gs_resources_free(&q->limit);
    memset(q, 0, sizeof *q);
}

int gs__queue_decode(json_t *doc, struct gs_queue *q, struct gs_dec *dc)
{
    gs__dec_meta(dc, doc, false, &q->meta);
    json_t *spec = gs__dec_get(dc, doc, "spec", JSON_OBJECT);
    size_t m = gs__dec_key(dc, "spec");
    int64_t v;
    q->parent = gs__dec_strdup(dc, spec, "parent");
    if (q->parent && q->meta.name && !strcmp(q->parent, q->meta.name))
        gs__dec_err_at(dc, "parent", "a queue cannot be its own parent");
    q->weight = 1;
    if (gs__dec_int(dc, spec, "weight", 1, 65535, &v)) q->weight = (int32_t)v;
    if (gs__dec_int(dc, spec, "priority", 0, INT32_MAX, &v)) q->priority = (int32_t)v;
    gs__dec_resources(dc, spec, "capability", &q->limit);
    gs__dec_resources(dc, spec, "limit", &q->limit);
    struct gs_resources guarantee = {0};
    json_t *g = spec ? json_object_get(spec, "guarantee") : NULL;
    if (json_is_object(g) && json_object_get(g, "resource")) {
        size_t m2 = gs__dec_key(dc, "guarantee");
        gs__dec_resources(dc, g, "resource", &guarantee);
        gs__dec_pop(dc, m2);
    } else {
        gs__dec_resources(dc, spec, "guarantee", &guarantee);
    }
    gs__dec_resources(dc, spec, "deserved", &q->guarantee);
    if (!json_object_get(spec, "deserved")) {
        q->guarantee = guarantee;
        guarantee = (struct gs_resources){0};
    }
    gs_resources_free(&guarantee);
    for (size_t i = 0; i < q->guarantee.n; i++) {
        bool has_cap = false;
        for (size_t j = 0; j < q->limit.n; j++) has_cap |= !strcmp(q->limit.v[j].name, q->guarantee.v[i].name);
        if (has_cap && q->guarantee.v[i].milli > gs_resources_get(&q->limit, q->guarantee.v[i].name))
            gs__dec_err(dc, "guaranteed %s exceeds the queue's capability", q->guarantee.v[i].name);
    }
    static const char *const strategies[] = {"fifo", "traverse", NULL};
    if (spec && json_object_get(spec, "dequeueStrategy")) gs__dec_enum(dc, spec, "dequeueStrategy", strategies, NULL);
    bool b;
    gs__dec_bool(dc, spec, "reclaimable", &b);
    gs__dec_pop(dc, m);
    q->doc = json_incref(doc);
    return dc->oom ? GS_ENOMEM : 0;
}

/*--- Shared little checks ---*/

/* Runs fn on each element of obj[key] (an array) with the path set. */
static void each(struct gs_dec *dc, const json_t *obj, const char *key, size_t max,
                 void (*fn)(struct gs_dec *, const json_t *, void *), void *arg)
{
    json_t *arr = gs__dec_get(dc, obj, key, JSON_ARRAY);
    if (!arr) return;
    size_t m = gs__dec_key(dc, key), i;
    if (max && json_array_size(arr) > max) gs__dec_err(dc, "must have at most %zu items, got %zu", max, json_array_size(arr));
    json_t *e;
    json_array_foreach(arr, i, e) {
        size_t m2 = gs__dec_idx(dc, i);
        if (gs__dec_is(dc, e, JSON_OBJECT)) fn(dc, e, arg);
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

static const char *required_str(struct gs_dec *dc, const json_t *obj, const char *key)
{
    const char *s = gs__dec_str(dc, obj, key);
    if (!s && !json_object_get(obj, key)) gs__dec_err_at(dc, key, "is required");
    else if (s && !*s) gs__dec_err_at(dc, key, "must not be empty");
    return s && *s ? s : NULL;
}

static void check_quantity(struct gs_dec *dc, const json_t *obj, const char *key, bool required)
{
    int64_t q;
    if (!gs__dec_quantity_at(dc, obj, key, &q) && required && !json_object_get(obj, key))
        gs__dec_err_at(dc, key, "is required");
}

/*--- Kueue ---*/

struct rg_ctx {
    char **covered;
    size_t ncovered;
    bool cohort;
};

static void cq_resource(struct gs_dec *dc, const json_t *r, void *arg)
{
    struct rg_ctx *c = arg;
    size_t idx = 0;
    /* the path ends in "[i]": recover i to compare with coveredResources order */
    const char *br = strrchr(dc->path, '[');
    if (br) idx = strtoul(br + 1, NULL, 10);
    const char *name = required_str(dc, r, "name");
    if (name && idx < c->ncovered && strcmp(name, c->covered[idx]))
        gs__dec_err_at(dc, "name", "resource \"%s\" must be \"%s\": each flavor lists coveredResources in order", name,
                       c->covered[idx]);
    else if (name && idx >= c->ncovered)
        gs__dec_err_at(dc, "name", "resource \"%s\" is not in coveredResources", name);
    check_quantity(dc, r, "nominalQuota", true);
    check_quantity(dc, r, "borrowingLimit", false);
    check_quantity(dc, r, "lendingLimit", false);
    if (!c->cohort && json_object_get(r, "borrowingLimit"))
        gs__dec_err_at(dc, "borrowingLimit", "must not be set when the ClusterQueue has no cohort");
    if (!c->cohort && json_object_get(r, "lendingLimit"))
        gs__dec_err_at(dc, "lendingLimit", "must not be set when the ClusterQueue has no cohort");
}

static void cq_flavor(struct gs_dec *dc, const json_t *f, void *arg)
{
    struct rg_ctx *c = arg;
    required_str(dc, f, "name");
    json_t *rs = gs__dec_get(dc, f, "resources", JSON_ARRAY);
    if (rs && json_array_size(rs) != c->ncovered)
        gs__dec_err_at(dc, "resources", "must list the %zu coveredResources, got %zu", c->ncovered, json_array_size(rs));
    each(dc, f, "resources", 64, cq_resource, c);
}

static void cq_group(struct gs_dec *dc, const json_t *g, void *arg)
{
    struct rg_ctx c = {.cohort = *(bool *)arg};
    c.covered = gs__dec_strv(dc, g, "coveredResources", &c.ncovered);
    if (!c.ncovered) gs__dec_err_at(dc, "coveredResources", "must list at least one resource");
    if (!json_array_size(json_object_get(g, "flavors"))) gs__dec_err_at(dc, "flavors", "must list at least one flavor");
    each(dc, g, "flavors", 64, cq_flavor, &c);
    gs__strv_free(c.covered, c.ncovered);
}

/* What v1beta2 renamed, refused under the old name (see the header). */
static void clusterqueue_version(const json_t *spec, bool v1beta2, struct gs_dec *dc)
{
    if (v1beta2 && json_object_get(spec, "cohort"))
        gs__dec_err_at(dc, "cohort", "unknown field in kueue.x-k8s.io/v1beta2: it is called cohortName since v1beta2");
    if (v1beta2 && json_object_get(spec, "admissionChecks"))
        gs__dec_err_at(dc, "admissionChecks",
                       "unknown field in kueue.x-k8s.io/v1beta2: list the checks in admissionChecksStrategy.admissionChecks");
    json_t *ff = gs__dec_get(dc, spec, "flavorFungibility", JSON_OBJECT);
    if (!ff) return;
    size_t m = gs__dec_key(dc, "flavorFungibility");
    static const char *const borrow1[] = {"Borrow", "MayStopSearch", "TryNextFlavor", NULL};
    static const char *const preempt1[] = {"Preempt", "MayStopSearch", "TryNextFlavor", NULL};
    static const char *const both2[] = {"MayStopSearch", "TryNextFlavor", NULL};
    static const char *const pref[] = {"BorrowingOverPreemption", "PreemptionOverBorrowing", NULL};
    const char *keys[] = {"whenCanBorrow", "whenCanPreempt"}, *old[] = {"Borrow", "Preempt"};
    const char *const *words1[] = {borrow1, preempt1};
    for (int i = 0; i < 2; i++) {
        const char *val = gs__dec_str(dc, ff, keys[i]);
        if (!val) continue;
        if (v1beta2 && !strcmp(val, old[i]))
            gs__dec_err_at(dc, keys[i], "invalid value \"%s\": kueue.x-k8s.io/v1beta2 calls it \"MayStopSearch\"", val);
        else gs__dec_enum(dc, ff, keys[i], v1beta2 ? both2 : words1[i], NULL);
    }
    if (json_object_get(ff, "preference")) gs__dec_enum(dc, ff, "preference", pref, NULL);
    gs__dec_pop(dc, m);
}

static void validate_clusterqueue(const json_t *spec, const char *api, struct gs_dec *dc)
{
    clusterqueue_version(spec, api && !strcmp(api, "kueue.x-k8s.io/v1beta2"), dc);
    bool cohort = gs__dec_str(dc, spec, "cohort") || gs__dec_str(dc, spec, "cohortName");
    each(dc, spec, "resourceGroups", 16, cq_group, &cohort);
    static const char *const strategies[] = {"BestEffortFIFO", "StrictFIFO", NULL};
    if (json_object_get(spec, "queueingStrategy")) gs__dec_enum(dc, spec, "queueingStrategy", strategies, NULL);
    json_t *pre = gs__dec_get(dc, spec, "preemption", JSON_OBJECT);
    if (pre) {
        size_t m = gs__dec_key(dc, "preemption");
        static const char *const reclaim[] = {"Never", "LowerPriority", "Any", NULL};
        static const char *const within[] = {"Never", "LowerPriority", "LowerOrNewerEqualPriority", NULL};
        if (json_object_get(pre, "reclaimWithinCohort")) gs__dec_enum(dc, pre, "reclaimWithinCohort", reclaim, NULL);
        if (json_object_get(pre, "withinClusterQueue")) gs__dec_enum(dc, pre, "withinClusterQueue", within, NULL);
        gs__dec_pop(dc, m);
    }
    struct gs_selector sel = {0};
    gs__dec_label_selector(dc, spec, "namespaceSelector", &sel);
    gs_selector_free(&sel);
    json_t *fs = gs__dec_get(dc, spec, "fairSharing", JSON_OBJECT);
    if (fs) {
        size_t m = gs__dec_key(dc, "fairSharing");
        check_quantity(dc, fs, "weight", false);
        gs__dec_pop(dc, m);
    }
    static const char *const stops[] = {"None", "Hold", "HoldAndDrain", NULL};
    if (json_object_get(spec, "stopPolicy")) gs__dec_enum(dc, spec, "stopPolicy", stops, NULL);
}

static void validate_resourceflavor(const json_t *spec, struct gs_dec *dc)
{
    struct gs_labels l = {0};
    gs__dec_labels(dc, spec, "nodeLabels", &l, true);
    gs_labels_free(&l);
    struct gs_taint *t = NULL;
    size_t nt = 0;
    gs__dec_taints(dc, spec, "nodeTaints", &t, &nt);
    for (size_t i = 0; i < nt; i++) gs_taint_free(&t[i]);
    free(t);
    struct gs_toleration *tol = NULL;
    size_t ntol = 0;
    gs__dec_tolerations(dc, spec, "tolerations", &tol, &ntol);
    for (size_t i = 0; i < ntol; i++) gs_toleration_free(&tol[i]);
    free(tol);
    gs__dec_str(dc, spec, "topologyName");
}

/*--- resource.k8s.io: kinds_dra.c ---*/

/*--- NodeResourceTopology ---*/

static void nrt_resource(struct gs_dec *dc, const json_t *r, void *arg)
{
    (void)arg;
    required_str(dc, r, "name");
    check_quantity(dc, r, "capacity", false);
    check_quantity(dc, r, "allocatable", false);
    check_quantity(dc, r, "available", false);
}

static void nrt_cost(struct gs_dec *dc, const json_t *c, void *arg)
{
    (void)arg;
    int64_t v;
    required_str(dc, c, "name");
    if (!gs__dec_int(dc, c, "value", 0, INT64_MAX, &v) && !json_object_get(c, "value"))
        gs__dec_err_at(dc, "value", "is required");
}

static void name_value(struct gs_dec *dc, const json_t *a, void *arg)
{
    (void)arg;
    const char *name = required_str(dc, a, "name");
    const char *val = gs__dec_str(dc, a, "value");
    static const char *const policies[] = {"none", "best-effort", "restricted", "single-numa-node", NULL};
    static const char *const scopes[] = {"container", "pod", NULL};
    if (name && val && !strcmp(name, "topologyManagerPolicy")) gs__dec_enum(dc, a, "value", policies, NULL);
    if (name && val && !strcmp(name, "topologyManagerScope")) gs__dec_enum(dc, a, "value", scopes, NULL);
}

static void nrt_zone(struct gs_dec *dc, const json_t *z, void *arg)
{
    (void)arg;
    required_str(dc, z, "name");
    required_str(dc, z, "type");
    gs__dec_str(dc, z, "parent");
    each(dc, z, "costs", 0, nrt_cost, NULL);
    each(dc, z, "attributes", 0, name_value, NULL);
    each(dc, z, "resources", 0, nrt_resource, NULL);
}

static void validate_nrt(const json_t *doc, struct gs_dec *dc)
{
    if (!json_object_get(doc, "zones")) gs__dec_err_at(dc, "zones", "is required");
    each(dc, doc, "zones", 0, nrt_zone, NULL);
    each(dc, doc, "attributes", 0, name_value, NULL);
    size_t n;
    char **pol = gs__dec_strv(dc, doc, "topologyPolicies", &n);
    static const char *const known[] = {"SingleNUMANodeContainerLevel", "SingleNUMANodePodLevel", "Restricted",
                                        "RestrictedContainerLevel", "RestrictedPodLevel", "BestEffort",
                                        "BestEffortContainerLevel", "BestEffortPodLevel", "None", NULL};
    for (size_t i = 0; i < n; i++) {
        bool ok = false;
        for (const char *const *k = known; *k; k++) ok |= !strcmp(*k, pol[i]);
        if (ok) continue;
        size_t m = gs__dec_key(dc, "topologyPolicies");
        gs__dec_idx(dc, i);
        gs__dec_err(dc, "unknown topology policy \"%s\"", pol[i]);
        gs__dec_pop(dc, m);
    }
    gs__strv_free(pol, n);
}

/*--- ClusterPolicy ---*/

static void validate_clusterpolicy(const json_t *spec, struct gs_dec *dc)
{
    static const char *const components[] = {
        "driver", "toolkit", "devicePlugin", "dcgmExporter", "dcgm", "gfd", "migManager", "nodeStatusExporter",
        "psp", "psa", "gds", "gdrcopy", "sandboxWorkloads", "vfioManager", "sandboxDevicePlugin", "vgpuManager",
        "vgpuDeviceManager", "kataManager", "kataSandboxDevicePlugin", "ccManager", "cdi", "operator", "daemonsets",
        "validator", "mig", "hostPaths", "draDriver", NULL};
    for (const char *const *c = components; *c; c++) {
        json_t *o = gs__dec_get(dc, spec, *c, JSON_OBJECT);
        if (!o) continue;
        size_t m = gs__dec_key(dc, *c);
        bool b;
        gs__dec_bool(dc, o, "enabled", &b);
        gs__dec_pop(dc, m);
    }
    json_t *mig = json_object_get(spec, "mig");
    static const char *const strategies[] = {"none", "single", "mixed", NULL};
    if (json_is_object(mig) && json_object_get(mig, "strategy")) {
        size_t m = gs__dec_key(dc, "mig");
        gs__dec_enum(dc, mig, "strategy", strategies, NULL);
        gs__dec_pop(dc, m);
    }
}

/* GPUCluster (nvidia.com/v1alpha1): the DRA model's operands (the DRA
 * driver, DCGM, its exporter); what only the device-plugin model has is
 * refused by name (govern/policy.h, gs_gpucluster_parse, reads the rest). */
static void validate_gpucluster(const json_t *spec, struct gs_dec *dc)
{
    static const char *const components[] = {"draDriver", "dcgm", "dcgmExporter", "driver", "toolkit", "validator",
                                             "operator", "daemonsets", "hostPaths", "cdi", "gfd", NULL};
    for (const char *const *c = components; *c; c++) {
        json_t *o = gs__dec_get(dc, spec, *c, JSON_OBJECT);
        if (!o) continue;
        size_t m = gs__dec_key(dc, *c);
        bool b = true;
        if (gs__dec_bool(dc, o, "enabled", &b) && !b && !strcmp(*c, "driver"))
            gs__dec_err_at(dc, "enabled", "false: a GPUCluster does not install the driver, it only checks it "
                           "(pre-installed or from an NVIDIADriver); leave it out");
        gs__dec_pop(dc, m);
    }
    static const char *const refused[] = {"devicePlugin", "migManager", "mig", NULL};
    for (const char *const *c = refused; *c; c++)
        if (json_object_get(spec, *c))
            gs__dec_err_at(dc, *c, "not managed by a GPUCluster: GPUs and MIG devices reach pods through DRA "
                           "(spec.draDriver); use a ClusterPolicy for the device-plugin model");
}

/*--- PriorityClass ---*/

#define GS_PRIORITY_USER_MAX 1000000000LL
#define GS_PRIORITY_SYSTEM_MAX 2000001000LL

static void validate_priorityclass(const json_t *doc, struct gs_dec *dc)
{
    const char *name = json_string_value(json_object_get(json_object_get(doc, "metadata"), "name"));
    bool sys = name && !strncmp(name, "system-", 7);
    int64_t v;
    if (!json_object_get(doc, "value")) gs__dec_err_at(dc, "value", "is required");
    else gs__dec_int(dc, doc, "value", INT32_MIN, sys ? GS_PRIORITY_SYSTEM_MAX : GS_PRIORITY_USER_MAX, &v);
    bool b;
    gs__dec_bool(dc, doc, "globalDefault", &b);
    gs__dec_str(dc, doc, "description");
    const char *p = gs__dec_str(dc, doc, "preemptionPolicy");
    if (p && strcmp(p, "PreemptLowerPriority") && strcmp(p, "Never"))
        gs__dec_err_at(dc, "preemptionPolicy", "Unsupported value: \"%s\": supported values: \"Never\", "
                       "\"PreemptLowerPriority\"", p);
}

/*--- Workload (scheduling.k8s.io/v1beta1) and Kueue's WorkloadPriorityClass ---*/

struct tmpl_ctx {
    const char *names[8];
    size_t n;
};

static void pg_template(struct gs_dec *dc, const json_t *t, void *arg)
{
    struct tmpl_ctx *c = arg;
    const char *name = required_str(dc, t, "name"), *why;
    if (name && (why = gs__dns_check(name, true))) gs__dec_err_at(dc, "name", "invalid name \"%s\": %s", name, why);
    for (size_t i = 0; name && i < c->n; i++)
        if (!strcmp(c->names[i], name)) gs__dec_err_at(dc, "name", "duplicate template name \"%s\"", name);
    if (name && c->n < 8) c->names[c->n++] = name;
    int32_t min;
    dec_sched_policy(dc, t, &min);
    dec_native_common(dc, t);
    int64_t v;
    gs__dec_int(dc, t, "priority", INT32_MIN, INT32_MAX, &v);
    gs__dec_str(dc, t, "priorityClassName");
}

static void validate_workload(const json_t *spec, struct gs_dec *dc)
{
    json_t *ref = gs__dec_get(dc, spec, "controllerRef", JSON_OBJECT);
    if (ref) {
        size_t m = gs__dec_key(dc, "controllerRef");
        gs__dec_str(dc, ref, "apiGroup");
        required_str(dc, ref, "kind");
        required_str(dc, ref, "name");
        gs__dec_pop(dc, m);
    }
    struct tmpl_ctx c = {0};
    json_t *t = json_object_get(spec, "podGroupTemplates"), *ct = json_object_get(spec, "compositePodGroupTemplates");
    if (!json_array_size(t) && !json_array_size(ct))
        gs__dec_err_at(dc, "podGroupTemplates", "must list at least one template");
    each(dc, spec, "podGroupTemplates", 8, pg_template, &c);
    gs__dec_get(dc, spec, "compositePodGroupTemplates", JSON_ARRAY);
}

static void validate_workloadpriorityclass(const json_t *doc, struct gs_dec *dc)
{
    int64_t v;
    if (!json_object_get(doc, "value")) gs__dec_err_at(dc, "value", "is required");
    else gs__dec_int(dc, doc, "value", INT32_MIN, INT32_MAX, &v);
    const char *d = gs__dec_str(dc, doc, "description");
    if (d && strlen(d) > 2048) gs__dec_err_at(dc, "description", "must be at most 2048 characters, got %zu", strlen(d));
}

/*--- RuntimeClass (node.k8s.io/v1) ---*/

/* As kube-apiserver: handler is required, immutable (api_fields.c) and a
 * DNS label; its value is not checked against a list, since which handlers
 * exist (runc, process) is the node's business, which refuses a pod whose
 * handler it lacks. overhead.podFixed is a resource list of quantities. */
static void validate_runtimeclass(const json_t *doc, struct gs_dec *dc)
{
    const char *h = json_object_get(doc, "handler") ? gs__dec_str(dc, doc, "handler") : NULL, *why;
    if (!json_object_get(doc, "handler")) gs__dec_err_at(dc, "handler", "Required value");
    else if (h && (why = gs__dns_check(h, true)))
        gs__dec_err_at(dc, "handler", "Invalid value: \"%s\": %s", h, why);
    json_t *ov = gs__dec_get(dc, doc, "overhead", JSON_OBJECT);
    if (ov) {
        size_t m = gs__dec_key(dc, "overhead");
        json_t *pf = gs__dec_get(dc, ov, "podFixed", JSON_OBJECT);
        if (pf) {
            size_t m2 = gs__dec_key(dc, "podFixed");
            const char *k;
            json_t *v;
            json_object_foreach(pf, k, v) {
                int64_t milli;
                const char *qwhy = NULL;
                if (!json_is_string(v) && !json_is_integer(v)) {
                    gs__dec_err_at(dc, k, "must be a quantity");
                    continue;
                }
                char text[64];
                if (json_is_string(v)) snprintf(text, sizeof text, "%s", json_string_value(v));
                else snprintf(text, sizeof text, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                if (gs_quantity_parse(text, &milli, &qwhy))
                    gs__dec_err_at(dc, k, "Invalid value: \"%s\": %s", text, qwhy ? qwhy : "not a quantity");
                else if (milli < 0) gs__dec_err_at(dc, k, "Invalid value: \"%s\": must be greater than or equal to 0", text);
            }
            gs__dec_pop(dc, m2);
        }
        gs__dec_pop(dc, m);
    }
    json_t *sc = gs__dec_get(dc, doc, "scheduling", JSON_OBJECT);
    if (sc) {
        size_t m = gs__dec_key(dc, "scheduling");
        json_t *ns = gs__dec_get(dc, sc, "nodeSelector", JSON_OBJECT);
        if (ns) {
            size_t m2 = gs__dec_key(dc, "nodeSelector");
            const char *k;
            json_t *v;
            json_object_foreach(ns, k, v) if (!json_is_string(v)) gs__dec_err_at(dc, k, "must be a string");
            gs__dec_pop(dc, m2);
        }
        gs__dec_get(dc, sc, "tolerations", JSON_ARRAY);
        gs__dec_pop(dc, m);
    }
}

/*--- Dispatch ---*/

void gs__generic_validate(enum gs_kind k, const char *api_version, const json_t *doc, struct gs_dec *dc)
{
    if (k == GS_KIND_UNKNOWN) return;
    if (k == GS_KIND_NODERESOURCETOPOLOGY) {
        validate_nrt(doc, dc);
        return;
    }
    if (k == GS_KIND_PRIORITYCLASS) {
        validate_priorityclass(doc, dc);
        return;
    }
    if (k == GS_KIND_WORKLOADPRIORITYCLASS) {
        validate_workloadpriorityclass(doc, dc);
        return;
    }
    if (k == GS_KIND_RUNTIMECLASS) {
        validate_runtimeclass(doc, dc);
        return;
    }
    json_t *spec = json_object_get(doc, "spec");
    if (!spec || json_is_null(spec)) {
        if (k != GS_KIND_RESOURCEFLAVOR && k != GS_KIND_CLUSTERPOLICY && k != GS_KIND_GPUCLUSTER)
            gs__dec_err_at(dc, "spec", "is required");
        return;
    }
    if (!(spec = gs__dec_get(dc, doc, "spec", JSON_OBJECT))) return;
    size_t m = gs__dec_key(dc, "spec");
    switch (k) {
    case GS_KIND_CLUSTERQUEUE: validate_clusterqueue(spec, api_version, dc); break;
    case GS_KIND_WORKLOAD: validate_workload(spec, dc); break;
    case GS_KIND_LOCALQUEUE: required_str(dc, spec, "clusterQueue"); break;
    case GS_KIND_RESOURCEFLAVOR: validate_resourceflavor(spec, dc); break;
    case GS_KIND_RESOURCECLAIM:
    case GS_KIND_DEVICECLASS:
    case GS_KIND_RESOURCESLICE:
    case GS_KIND_RESOURCECLAIMTEMPLATE:
    case GS_KIND_DEVICETAINTRULE: gs__dra_validate(k, api_version, spec, dc); break;
    case GS_KIND_CLUSTERPOLICY: validate_clusterpolicy(spec, dc); break;
    case GS_KIND_GPUCLUSTER: validate_gpucluster(spec, dc); break;
    default: break;
    }
    gs__dec_pop(dc, m);
    gs__dra_validate_status(k, doc, dc);
}
