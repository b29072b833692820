/*
 * test_admission_dra.c - admission with DRA claims: devices counted against queue quotas and
 * workloads whose claims fit no node kept inadmissible (sched/admission/dra_admit.h).
 *
 * Each test builds a small cluster: ResourceSlices of whole GPUs per node, the DeviceClass
 * gpu.nvidia.com, claim templates and claims, fed as store events exactly as the admission
 * loop feeds them; pods name their claims in spec.resourceClaims. The assertions read the
 * workload state, the queue's usage and the reason admission gives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "admission_fixture.h"
#include "sched/admission/dra_admit.h"

#define SEC GS_NS_PER_SEC

struct env {
    struct adm_env e;
    struct gs_dra_admit *dra;
    struct gs_object *objs[32];
    int nobjs;
    int64_t rv;
};

static void feed(struct env *v, const char *key, const char *json)
{
    json_error_t je;
    json_t *doc = json ? json_loads(json, 0, &je) : NULL;
    if (json && !doc) fail_msg("bad test JSON for %s: %s", key, je.text);
    struct gs_diags d = {0};
    int rc = gs_dra_admit_event(v->dra, key, doc, ++v->rv, &d);
    if (rc) fail_msg("event %s: %d %s: %s", key, rc, d.n ? d.v[0].path : "", d.n ? d.v[0].msg : "");
    gs_diags_free(&d);
    json_decref(doc);
}

/* A slice of n GPUs on node (product "NVIDIA H100", nvlinkDomain by half), generation 1. */
static void slice(struct env *v, const char *node, int n, const char *product)
{
    char devs[8192] = "";
    size_t o = 0;
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(devs + o, sizeof devs - o,
                              "%s{\"name\":\"gpu-%d\",\"attributes\":{\"type\":{\"string\":\"gpu\"},"
                              "\"productName\":{\"string\":\"%s\"},\"uuid\":{\"string\":\"GPU-%s-%d\"}},"
                              "\"capacity\":{\"memory\":{\"value\":\"80Gi\"}}}",
                              i ? "," : "", i, product, node, i);
    char doc[9000], key[128];
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":\"%s-gpu.nvidia.com-0\"},"
             "\"spec\":{\"driver\":\"gpu.nvidia.com\",\"pool\":{\"name\":\"%s\",\"generation\":1,\"resourceSliceCount\":1},"
             "\"nodeName\":\"%s\",\"devices\":[%s]}}",
             node, node, node, devs);
    snprintf(key, sizeof key, "resourceslices.resource.k8s.io/%s-gpu.nvidia.com-0", node);
    feed(v, key, doc);
}

static void gpu_class(struct env *v, const char *extended)
{
    char doc[1024];
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":{\"name\":\"gpu.nvidia.com\"},"
             "\"spec\":{\"selectors\":[{\"cel\":{\"expression\":\"device.driver == 'gpu.nvidia.com' && "
             "device.attributes['gpu.nvidia.com'].type == 'gpu'\"}}]%s%s%s}}",
             extended ? ",\"extendedResourceName\":\"" : "", extended ? extended : "", extended ? "\"" : "");
    feed(v, "deviceclasses.resource.k8s.io/gpu.nvidia.com", doc);
}

/* A template in namespace ns whose one request is `request` (the JSON of a DeviceRequest). */
static void template_(struct env *v, const char *name, const char *request)
{
    char doc[2048], key[128];
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaimTemplate\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"ns\"},\"spec\":{\"spec\":{\"devices\":{\"requests\":[%s]}}}}",
             name, request);
    snprintf(key, sizeof key, "resourceclaimtemplates.resource.k8s.io/ns/%s", name);
    feed(v, key, doc);
}

static void claim(struct env *v, const char *name, const char *request)
{
    char doc[2048], key[128];
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"ns\",\"uid\":\"uid-%s\"},\"spec\":{\"devices\":{\"requests\":[%s]}}}",
             name, name, request);
    snprintf(key, sizeof key, "resourceclaims.resource.k8s.io/ns/%s", name);
    feed(v, key, doc);
}

#define EXACT(n) "{\"name\":\"gpus\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":" #n "}}"

/* A pod in ns whose claim "gpu" comes from a template (tmpl) or names a claim (cl). */
static const struct gs_pod *pod(struct env *v, const char *name, const char *tmpl, const char *cl)
{
    char doc[1024];
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\","
             "\"labels\":{\"kueue.x-k8s.io/queue-name\":\"lq\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
             "\"image\":\"x\",\"resources\":{\"claims\":[{\"name\":\"gpu\"}]}}],"
             "\"resourceClaims\":[{\"name\":\"gpu\",\"%s\":\"%s\"}]}}",
             name, tmpl ? "resourceClaimTemplateName" : "resourceClaimName", tmpl ? tmpl : cl);
    json_t *j = json_loads(doc, 0, NULL);
    assert_non_null(j);
    struct gs_object *o = NULL;
    struct gs_diags d = {0};
    int rc = gs_object_decode(j, &o, &d);
    if (rc) fail_msg("pod %s: %s", name, d.n ? d.v[0].msg : "");
    json_decref(j);
    gs_diags_free(&d);
    v->objs[v->nobjs++] = o;
    return o->u.pod;
}

static int submit(struct env *v, const char *key, const struct gs_pod *const *pods, size_t n)
{
    struct gs_workload_spec s = {.key = key, .namespace_ = "ns", .queue = "lq", .pods = pods, .npods = n};
    return gs_admission_submit(v->e.a, &s);
}

#define CQ(res, nominal)                                                                                       \
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n"                    \
    "  resourceGroups:\n  - coveredResources: [" res "]\n"                                                     \
    "    flavors:\n    - name: default\n      resources: [{name: \"" res "\", nominalQuota: " nominal "}]\n" \
    "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: default}\n"             \
    "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns}\n"        \
    "spec: {clusterQueue: cq}\n"

static void env_init(struct env *v, const char *yaml, const char *const *mappings, size_t nmap)
{
    memset(v, 0, sizeof *v);
    assert_int_equal(gs_dra_admit_new(&v->dra), 0);
    for (size_t i = 0; i < nmap; i++) {
        struct gs_diags d = {0};
        assert_int_equal(gs_dra_admit_add_mapping(v->dra, mappings[i], &d), 0);
        gs_diags_free(&d);
    }
    struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                  .reclaim_wait_ns = -1, .dra = v->dra};
    adm_env_init(&v->e, 2, 8, yaml, &o); /* GPUs for the plain pods; claims use the slices */
}

static void env_free(struct env *v)
{
    adm_env_free(&v->e);
    for (int i = 0; i < v->nobjs; i++) gs_object_free(v->objs[i]);
    gs_dra_admit_free(v->dra);
}

static void run(struct env *v)
{
    assert_int_equal(gs_admission_cycle(v->e.a, &v->e.res), 0);
}

static enum gs_wl_state state(struct env *v, int id) { return gs_admission_workload(v->e.a, id)->state; }
static const char *reason(struct env *v, int id) { return gs_admission_workload(v->e.a, id)->reason; }

static int64_t usage(struct env *v, const char *res)
{
    struct gs_queue_status s;
    assert_int_equal(gs_admission_queue_status(v->e.a, gs_queue_tree_find(&v->e.t, "cq"), &s), 0);
    return s.usage[gs_queue_tree_res(&v->e.t, res)];
}

/*--- Counting ---*/

/* Template claims of 2 GPUs each, the class mapped to nvidia.com/gpu by extendedResourceName:
 * two pods take the quota of 4, the third waits naming the resource. */
static void template_claims_count_as_gpus(void **st)
{
    (void)st;
    struct env v;
    env_init(&v, CQ("nvidia.com/gpu", "4"), NULL, 0);
    gpu_class(&v, "nvidia.com/gpu");
    slice(&v, "node0", 8, "NVIDIA H100");
    template_(&v, "two", EXACT(2));
    const struct gs_pod *a[] = {pod(&v, "a", "two", NULL)}, *b[] = {pod(&v, "b", "two", NULL)},
                        *c[] = {pod(&v, "c", "two", NULL)};
    int wa = submit(&v, "ns/a", a, 1), wb = submit(&v, "ns/b", b, 1), wc = submit(&v, "ns/c", c, 1);
    assert_true(wa >= 0 && wb >= 0 && wc >= 0);
    assert_int_equal(gs_admission_workload(v.e.a, wa)->demand[gs_queue_tree_res(&v.e.t, "nvidia.com/gpu")], 2000);
    run(&v);
    assert_int_equal(state(&v, wa), GS_WL_ADMITTED);
    assert_int_equal(state(&v, wb), GS_WL_ADMITTED);
    assert_int_equal(state(&v, wc), GS_WL_PENDING);
    assert_int_equal(usage(&v, "nvidia.com/gpu"), 4000);
    assert_non_null(strstr(reason(&v, wc), "waiting for quota in ClusterQueue cq: nvidia.com/gpu 2 > 0 available"));
    /* a's pod finishes: its template claim's 2 GPUs come back and c fits */
    assert_int_equal(gs_admission_pod_finished(v.e.a, wa, a[0]), 0);
    assert_int_equal(usage(&v, "nvidia.com/gpu"), 2000);
    run(&v);
    assert_int_equal(state(&v, wc), GS_WL_ADMITTED);
    env_free(&v);
}

/* Kueue's deviceClassMappings win over extendedResourceName; without either, the implicit
 * name is uncovered by a strict ClusterQueue and the workload is inadmissible, naming it. */
static void mappings_choose_the_resource(void **st)
{
    (void)st;
    const char *maps[] = {"example.com/gpus=gpu.nvidia.com"};
    struct env v;
    env_init(&v, CQ("example.com/gpus", "3"), maps, 1);
    gpu_class(&v, "nvidia.com/gpu");
    slice(&v, "node0", 8, "NVIDIA H100");
    template_(&v, "four", EXACT(4));
    template_(&v, "three", EXACT(3));
    const struct gs_pod *a[] = {pod(&v, "a", "four", NULL)}, *b[] = {pod(&v, "b", "three", NULL)};
    int wa = submit(&v, "ns/a", a, 1), wb = submit(&v, "ns/b", b, 1);
    run(&v);
    assert_int_equal(state(&v, wa), GS_WL_PENDING);
    assert_non_null(strstr(reason(&v, wa), "example.com/gpus 4 > "));
    assert_int_equal(state(&v, wb), GS_WL_ADMITTED);
    assert_int_equal(usage(&v, "example.com/gpus"), 3000);
    env_free(&v);

    env_init(&v, CQ("nvidia.com/gpu", "8"), NULL, 0);
    gpu_class(&v, NULL); /* no extendedResourceName: deviceclass.resource.kubernetes.io/gpu.nvidia.com */
    slice(&v, "node0", 8, "NVIDIA H100");
    template_(&v, "one", EXACT(1));
    const struct gs_pod *c[] = {pod(&v, "c", "one", NULL)};
    int wc = submit(&v, "ns/c", c, 1);
    run(&v);
    assert_int_equal(state(&v, wc), GS_WL_INADMISSIBLE);
    assert_non_null(strstr(reason(&v, wc), "deviceclass.resource.kubernetes.io/gpu.nvidia.com"));
    assert_non_null(strstr(reason(&v, wc), "ClusterQueue cq does not cover"));
    env_free(&v);
}

/* allocationMode All counts what the largest node would give; firstAvailable the largest
 * alternative; a claim named by two pods of one gang counts once. */
static void all_first_available_and_shared(void **st)
{
    (void)st;
    struct env v;
    env_init(&v, CQ("nvidia.com/gpu", "64"), NULL, 0);
    gpu_class(&v, "nvidia.com/gpu");
    slice(&v, "node0", 8, "NVIDIA H100");
    slice(&v, "node1", 4, "NVIDIA H100");
    template_(&v, "all", "{\"name\":\"gpus\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"allocationMode\":\"All\"}}");
    template_(&v, "fa", "{\"name\":\"gpus\",\"firstAvailable\":["
                        "{\"name\":\"big\",\"deviceClassName\":\"gpu.nvidia.com\",\"count\":2},"
                        "{\"name\":\"bigger\",\"deviceClassName\":\"gpu.nvidia.com\",\"count\":3},"
                        "{\"name\":\"small\",\"deviceClassName\":\"gpu.nvidia.com\",\"count\":1}]}");
    claim(&v, "shared", EXACT(2));
    const struct gs_pod *a[] = {pod(&v, "a", "all", NULL)}, *b[] = {pod(&v, "b", "fa", NULL)};
    const struct gs_pod *g[] = {pod(&v, "g0", NULL, "shared"), pod(&v, "g1", NULL, "shared")};
    int gpu = gs_queue_tree_res(&v.e.t, "nvidia.com/gpu");
    int wa = submit(&v, "ns/a", a, 1), wb = submit(&v, "ns/b", b, 1), wg = submit(&v, "ns/g", g, 2);
    assert_int_equal(gs_admission_workload(v.e.a, wa)->demand[gpu], 8000);
    assert_int_equal(gs_admission_workload(v.e.a, wb)->demand[gpu], 3000);
    assert_int_equal(gs_admission_workload(v.e.a, wg)->demand[gpu], 2000);
    run(&v);
    assert_int_equal(usage(&v, "nvidia.com/gpu"), 13000);
    /* a pod of the gang finishing keeps the shared claim's devices charged */
    assert_int_equal(gs_admission_pod_finished(v.e.a, wg, g[0]), 0);
    assert_int_equal(usage(&v, "nvidia.com/gpu"), 13000);
    env_free(&v);
}

/*--- Feasibility ---*/

/* A selector no device matches: inadmissible naming the pod's claim, the request and the
 * selector; a node with such devices appearing makes it admissible. */
static void impossible_claim_waits_until_devices_exist(void **st)
{
    (void)st;
    struct env v;
    env_init(&v, CQ("nvidia.com/gpu", "8"), NULL, 0);
    gpu_class(&v, "nvidia.com/gpu");
    slice(&v, "node0", 8, "NVIDIA H100");
    template_(&v, "b200", "{\"name\":\"gpus\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":2,"
                          "\"selectors\":[{\"cel\":{\"expression\":\"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'\"}}]}}");
    const struct gs_pod *a[] = {pod(&v, "a", "b200", NULL)};
    int wa = submit(&v, "ns/a", a, 1);
    run(&v);
    assert_int_equal(state(&v, wa), GS_WL_INADMISSIBLE);
    const char *r = reason(&v, wa);
    assert_non_null(strstr(r, "pod ns/a claim gpu (ResourceClaimTemplate b200) request gpus cannot be satisfied on any node"));
    assert_non_null(strstr(r, "NVIDIA B200"));
    assert_int_equal(usage(&v, "nvidia.com/gpu"), 0);
    slice(&v, "node1", 4, "NVIDIA B200");
    run(&v);
    assert_int_equal(state(&v, wa), GS_WL_ADMITTED);
    assert_int_equal(usage(&v, "nvidia.com/gpu"), 2000);
    env_free(&v);
}

/* More devices than any one node has: infeasible, though the cluster has enough in total. */
static void count_beyond_the_largest_node(void **st)
{
    (void)st;
    struct env v;
    env_init(&v, CQ("nvidia.com/gpu", "64"), NULL, 0);
    gpu_class(&v, "nvidia.com/gpu");
    slice(&v, "node0", 8, "NVIDIA H100");
    slice(&v, "node1", 8, "NVIDIA H100");
    template_(&v, "nine", EXACT(9));
    const struct gs_pod *a[] = {pod(&v, "a", "nine", NULL)};
    int wa = submit(&v, "ns/a", a, 1);
    run(&v);
    assert_int_equal(state(&v, wa), GS_WL_INADMISSIBLE);
    assert_non_null(strstr(reason(&v, wa), "request gpus cannot be satisfied on any node"));
    /* the same workload found running (a server rebuilding its state) is restored, charged */
    const struct gs_pod *b[] = {pod(&v, "b", "nine", NULL)};
    int wb = submit(&v, "ns/b", b, 1);
    assert_int_equal(state(&v, wb), GS_WL_INADMISSIBLE);
    assert_int_equal(gs_admission_restore(v.e.a, wb), 0);
    assert_int_equal(state(&v, wb), GS_WL_ADMITTED);
    assert_int_equal(usage(&v, "nvidia.com/gpu"), 9000);
    env_free(&v);
}

/* A DeviceTaintRule tainting every GPU NoSchedule: inadmissible without a toleration,
 * admissible with one, and again for all once the rule is deleted. */
static void taint_rules_and_tolerations(void **st)
{
    (void)st;
    struct env v;
    env_init(&v, CQ("nvidia.com/gpu", "16"), NULL, 0);
    gpu_class(&v, "nvidia.com/gpu");
    slice(&v, "node0", 8, "NVIDIA H100");
    feed(&v, "devicetaintrules.resource.k8s.io/drain",
         "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceTaintRule\",\"metadata\":{\"name\":\"drain\"},"
         "\"spec\":{\"deviceSelector\":{\"driver\":\"gpu.nvidia.com\"},"
         "\"taint\":{\"key\":\"example.com/maintenance\",\"value\":\"yes\",\"effect\":\"NoSchedule\"}}}");
    template_(&v, "one", EXACT(1));
    template_(&v, "tol", "{\"name\":\"gpus\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":1,"
                         "\"tolerations\":[{\"key\":\"example.com/maintenance\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]}}");
    const struct gs_pod *a[] = {pod(&v, "a", "one", NULL)}, *b[] = {pod(&v, "b", "tol", NULL)};
    int wa = submit(&v, "ns/a", a, 1), wb = submit(&v, "ns/b", b, 1);
    run(&v);
    assert_int_equal(state(&v, wa), GS_WL_INADMISSIBLE);
    assert_non_null(strstr(reason(&v, wa), "cannot be satisfied on any node"));
    assert_int_equal(state(&v, wb), GS_WL_ADMITTED);
    feed(&v, "devicetaintrules.resource.k8s.io/drain", NULL);
    run(&v);
    assert_int_equal(state(&v, wa), GS_WL_ADMITTED);
    env_free(&v);
}

/* A template or class that does not exist yet: inadmissible saying which, admitted once it
 * arrives; a pending workload whose class disappears becomes inadmissible. */
static void missing_objects(void **st)
{
    (void)st;
    struct env v;
    env_init(&v, CQ("nvidia.com/gpu", "1"), NULL, 0);
    slice(&v, "node0", 8, "NVIDIA H100");
    const struct gs_pod *a[] = {pod(&v, "a", "later", NULL)};
    int wa = submit(&v, "ns/a", a, 1);
    run(&v);
    assert_int_equal(state(&v, wa), GS_WL_INADMISSIBLE);
    assert_non_null(strstr(reason(&v, wa), "ResourceClaimTemplate ns/later not found"));
    template_(&v, "later", EXACT(1));
    run(&v);
    assert_int_equal(state(&v, wa), GS_WL_INADMISSIBLE);
    assert_non_null(strstr(reason(&v, wa), "request gpus: DeviceClass \"gpu.nvidia.com\" not found"));
    gpu_class(&v, "nvidia.com/gpu");
    run(&v);
    assert_int_equal(state(&v, wa), GS_WL_ADMITTED);
    /* b waits for quota; the class goes away: it can no longer be satisfied */
    template_(&v, "two", EXACT(2));
    const struct gs_pod *b[] = {pod(&v, "b", "two", NULL)};
    int wb = submit(&v, "ns/b", b, 1);
    run(&v);
    assert_int_equal(state(&v, wb), GS_WL_PENDING);
    feed(&v, "deviceclasses.resource.k8s.io/gpu.nvidia.com", NULL);
    run(&v);
    assert_int_equal(state(&v, wb), GS_WL_INADMISSIBLE);
    assert_int_equal(state(&v, wa), GS_WL_ADMITTED); /* admitted work keeps its quota */
    assert_int_equal(usage(&v, "nvidia.com/gpu"), 1000);
    /* a named claim that does not exist */
    const struct gs_pod *c[] = {pod(&v, "c", NULL, "nope")};
    int wc = submit(&v, "ns/c", c, 1);
    assert_int_equal(state(&v, wc), GS_WL_INADMISSIBLE);
    assert_non_null(strstr(reason(&v, wc), "ResourceClaim ns/nope not found"));
    env_free(&v);
}

/* Pods without claims are untouched by the DRA module, and claims are ignored without it. */
static void pods_without_claims_and_no_module(void **st)
{
    (void)st;
    struct env v;
    env_init(&v, CQ("nvidia.com/gpu", "2"), NULL, 0);
    v.e.pods[v.e.npods] = test_pod("ns", "plain", 0, 0, 2, 1000);
    const struct gs_pod *p[] = {v.e.pods[v.e.npods++]};
    int w = submit(&v, "ns/plain", p, 1);
    run(&v);
    assert_int_equal(state(&v, w), GS_WL_ADMITTED);
    assert_false(gs_admission_workload(v.e.a, w)->has_claims);
    env_free(&v);
}

/*--- Inputs and their errors ---*/

static void mapping_and_event_errors(void **st)
{
    (void)st;
    struct gs_dra_admit *a;
    assert_int_equal(gs_dra_admit_new(&a), 0);
    struct gs_diags d = {0};
    assert_int_equal(gs_dra_admit_add_mapping(a, "no-equals", &d), GS_EINVAL);
    assert_non_null(strstr(d.v[0].msg, "\"no-equals\": want RESOURCE=CLASS"));
    gs_diags_free(&d);
    assert_int_equal(gs_dra_admit_add_mapping(a, "=gpu.example.com", &d), GS_EINVAL);
    gs_diags_free(&d);
    assert_int_equal(gs_dra_admit_add_mapping(a, "example.com/gpus=a,,b", &d), GS_EINVAL);
    assert_non_null(strstr(d.v[0].msg, "empty DeviceClass name"));
    gs_diags_free(&d);
    assert_int_equal(gs_dra_admit_add_mapping(a, "example.com/gpus=a,b", &d), 0);
    assert_int_equal(gs_dra_admit_add_mapping(a, "example.com/other=b", &d), GS_EINVAL);
    assert_non_null(strstr(d.v[0].msg, "DeviceClass \"b\" is mapped twice (to example.com/gpus and example.com/other)"));
    gs_diags_free(&d);

    /* Kueue's Configuration shape */
    json_t *cfg = json_loads("{\"resources\":{\"deviceClassMappings\":[{\"name\":\"example.com/gpus\","
                             "\"deviceClassNames\":[\"gpu.example.com\"]},{\"name\":\"x\",\"deviceClassNames\":[]}]}}",
                             0, NULL);
    assert_int_equal(gs_dra_admit_set_config(a, cfg, &d), GS_EINVAL);
    assert_string_equal(d.v[0].path, "resources.deviceClassMappings[1]");
    assert_non_null(strstr(d.v[0].msg, "deviceClassNames: must list at least one DeviceClass"));
    gs_diags_free(&d);
    json_decref(cfg);
    cfg = json_loads("{\"resources\":{\"deviceClassMappings\":[{\"deviceClassNames\":[\"a\"]}]}}", 0, NULL);
    assert_int_equal(gs_dra_admit_set_config(a, cfg, &d), GS_EINVAL);
    assert_non_null(strstr(d.v[0].msg, "name: required"));
    gs_diags_free(&d);
    json_decref(cfg);

    /* a class whose selector does not compile: refused with the decoder's message, counted absent */
    uint64_t g0 = gs_dra_admit_generation(a);
    json_t *cls = json_loads("{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":{\"name\":\"bad\"},"
                             "\"spec\":{\"selectors\":[{\"cel\":{\"expression\":\"device.drivr == 'x'\"}}]}}",
                             0, NULL);
    assert_int_equal(gs_dra_admit_event(a, "deviceclasses.resource.k8s.io/bad", cls, 1, &d), GS_EINVAL);
    assert_true(d.n > 0);
    assert_non_null(strstr(d.v[0].msg, "undefined field 'drivr'"));
    gs_diags_free(&d);
    assert_int_equal(gs_dra_admit_generation(a), g0);
    /* a key of another kind; an old version after a newer one */
    assert_int_equal(gs_dra_admit_event(a, "pods/ns/x", cls, 2, &d), GS_ENOENT);
    json_decref(cls);
    assert_true(gs_dra_admit_is_key("resourceclaimtemplates.resource.k8s.io/ns/t"));
    assert_false(gs_dra_admit_is_key("resourceclaimtemplate/ns/t"));
    gs_dra_admit_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(template_claims_count_as_gpus),
        cmocka_unit_test(mappings_choose_the_resource),
        cmocka_unit_test(all_first_available_and_shared),
        cmocka_unit_test(impossible_claim_waits_until_devices_exist),
        cmocka_unit_test(count_beyond_the_largest_node),
        cmocka_unit_test(taint_rules_and_tolerations),
        cmocka_unit_test(missing_objects),
        cmocka_unit_test(pods_without_claims_and_no_module),
        cmocka_unit_test(mapping_and_event_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
