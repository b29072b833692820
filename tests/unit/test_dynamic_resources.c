/*
 * test_dynamic_resources.c - the DynamicResources plugin and the cache's DRA
 * side through the real framework and allocator: claims allocated on the
 * chosen node with the claim status to write; the GPUs a claim takes marked
 * in the cache's GPU slots (a device-plugin pod cannot have them) and GPUs
 * of device-plugin pods never given to a claim; firstAvailable falling back
 * in order; matchAttribute keeping devices on one NVLink domain; `All`;
 * a tainted device never given without the toleration; a shared claim
 * allocated once and reused on its node; an impossible claim whose reason
 * names the claim, the request and the selector; a missing claim or
 * template named; a profile without the plugin refusing pods with claims;
 * assumed allocations surviving a stale claim version; deallocation freeing
 * the devices; pods from one template memoised without a changed verdict.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sched/cache_dra.h"
#include "sched/cache_feed.h"
#include "sched/dra_plugin.h"
#include "sched/framework.h"
#include "sched/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLASS_GPU                                                                                                    \
    "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":{\"name\":\"gpu.nvidia.com\"},"    \
    "\"spec\":{\"selectors\":[{\"cel\":{\"expression\":\"device.driver == 'gpu.nvidia.com' && "                   \
    "device.attributes['gpu.nvidia.com'].type == 'gpu'\"}}]}}"

struct env {
    struct gs_clock clock;
    struct gs_cache *cache;
    struct gs_sched_config cfg;
    struct gs_framework *fw;
    struct gs_pod *pods[16];
    int npods;
};

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j) fail_msg("fixture JSON: %s: %s", e.text, text);
    return j;
}

static void feed(struct env *e, const char *key, const char *text)
{
    json_t *j = text ? parse(text) : NULL;
    int rc = gs_cache_feed(e->cache, key, j);
    if (rc) fail_msg("feed %s: %s", key, gs_strerror(rc));
    json_decref(j);
}

/* A slice for node of ngpus GPUs; nvlink: GPUs [0, half) domain 0, the rest 1; taint_gpu: that GPU tainted. */
static void slice(struct env *e, const char *node, int ngpus, const char *product, int taint_gpu)
{
    char devs[8192] = "";
    size_t n = 0;
    for (int g = 0; g < ngpus; g++)
        n += (size_t)snprintf(devs + n, sizeof devs - n,
                              "%s{\"name\":\"gpu-%d\",\"attributes\":{\"type\":{\"string\":\"gpu\"},\"uuid\":{\"string\":"
                              "\"GPU-%s-%d\"},\"productName\":{\"string\":\"%s\"},\"nvlinkDomain\":{\"int\":%d}},"
                              "\"capacity\":{\"memory\":{\"value\":\"80Gi\"}}%s}",
                              g ? "," : "", g, node, g, product, g < ngpus / 2 ? 0 : 1,
                              g == taint_gpu ? ",\"taints\":[{\"key\":\"gpu.nvidia.com/unhealthy\",\"effect\":\"NoSchedule\"}]"
                                             : "");
    char doc[10000], key[256];
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":"
             "\"%s-gpu.nvidia.com-0\"},\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"%s\",\"pool\":{\"name\":"
             "\"%s\",\"generation\":1,\"resourceSliceCount\":1},\"devices\":[%s]}}",
             node, node, node, devs);
    snprintf(key, sizeof key, "resourceslices.resource.k8s.io/%s-gpu.nvidia.com-0", node);
    feed(e, key, doc);
}

static void claim(struct env *e, const char *name, const char *spec_devices, const char *status)
{
    char doc[4096], key[256];
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"default\",\"uid\":\"uid-%s\"},\"spec\":{\"devices\":%s}%s%s}",
             name, name, spec_devices, status ? ",\"status\":" : "", status ? status : "");
    snprintf(key, sizeof key, "resourceclaims.resource.k8s.io/default/%s", name);
    feed(e, key, doc);
}

/* count GPUs of the class as one claim spec's devices. */
static char *exactly(int count)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "{\"requests\":[{\"name\":\"gpus\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":%d}}]}",
             count);
    return buf;
}

static struct gs_pod *pod(struct env *e, const char *name, const char *claims_json, int dp_gpus)
{
    char doc[4096], gpu[64] = "";
    if (dp_gpus) snprintf(gpu, sizeof gpu, ",\"nvidia.com/gpu\":\"%d\"", dp_gpus);
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\","
             "\"uid\":\"uid-%s\"},\"spec\":{%s%s%s\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"resources\":{"
             "\"limits\":{\"cpu\":\"1\"%s},\"requests\":{\"cpu\":\"1\"%s}}}]}}",
             name, name, claims_json ? "\"resourceClaims\":" : "", claims_json ? claims_json : "",
             claims_json ? "," : "", gpu, gpu);
    json_t *j = parse(doc);
    struct gs_pod *p = calloc(1, sizeof *p);
    struct gs_diags d = {0};
    assert_int_equal(gs_pod_decode(j, p, &d), 0);
    gs_diags_free(&d);
    json_decref(j);
    e->pods[e->npods++] = p;
    return p;
}

static struct gs_pod *claim_pod(struct env *e, const char *name, const char *claim_name)
{
    char c[256];
    snprintf(c, sizeof c, "[{\"name\":\"gpu\",\"resourceClaimName\":\"%s\"}]", claim_name);
    return pod(e, name, c, 0);
}

static int make_fw(struct env *e, const char *config)
{
    struct gs_diags d = {0};
    int rc;
    if (config) {
        json_t *doc = parse(config);
        rc = gs_sched_config_parse(doc, &e->cfg, &d);
        json_decref(doc);
    } else {
        rc = gs_sched_config_default(&e->cfg);
    }
    assert_int_equal(rc, 0);
    struct gs_handle h = {.clock = &e->clock, .cache = e->cache, .seed = 1};
    rc = gs_framework_new(&e->cfg.profiles[0], &h, &e->fw, &d);
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, "%s: %s\n", d.v[i].path, d.v[i].msg);
    gs_diags_free(&d);
    return rc;
}

static int setup_n(void **state, int nodes, int gpus, const char *config)
{
    struct env *e = calloc(1, sizeof *e);
    gs_clock_init_sim(&e->clock, 1000000000LL);
    e->cache = gs_cache_new(&e->clock);
    for (int i = 0; i < nodes; i++) {
        char name[32];
        snprintf(name, sizeof name, "n%d", i + 1);
        struct gs_node_spec ns = {.name = name, .cpu_milli = 64000, .mem_bytes = 256LL << 30, .pods = 110,
                                  .gpu_model = "H100", .ngpus = gpus, .gpu_mem_mib = 81920};
        assert_true(gs_cache_add_node_spec(e->cache, &ns) >= 0);
        slice(e, name, gpus, i == 0 ? "A100" : "H100", -1);
    }
    feed(e, "deviceclasses.resource.k8s.io/gpu.nvidia.com", CLASS_GPU);
    assert_int_equal(make_fw(e, config), 0);
    *state = e;
    return 0;
}

static int setup(void **state) { return setup_n(state, 2, 4, NULL); }

static int teardown(void **state)
{
    struct env *e = *state;
    gs_framework_free(e->fw);
    for (int i = 0; i < e->npods; i++) {
        char key[GS__KEY_MAX];
        gs_meta_key(&e->pods[i]->meta, key, sizeof key);
        gs_cache_remove_pod(e->cache, key);
    }
    gs_cache_free(e->cache);
    gs_sched_config_free(&e->cfg);
    for (int i = 0; i < e->npods; i++) {
        gs_pod_clear(e->pods[i]);
        free(e->pods[i]);
    }
    free(e);
    return 0;
}

/* Schedules and binds; the node's name, or NULL with the diagnosis in why. */
static const char *place(struct env *e, const struct gs_pod *p, char *why, size_t len)
{
    struct gs_schedule_result r;
    assert_int_equal(gs_framework_schedule(e->fw, p, 0, &r), 0);
    if (r.code != GS_SUCCESS) {
        if (why) {
            if (r.diag.nodes_total || r.diag.prefilter.code) gs_diagnosis_format(&r.diag, p, why, len);
            else snprintf(why, len, "%s", r.status.reason);
        }
        gs_schedule_result_free(&r);
        return NULL;
    }
    struct gs_status b = gs_framework_bind(e->fw, p);
    assert_int_equal(b.code, GS_SUCCESS);
    const char *name = gs_cache_node(e->cache, r.a.node)->name;
    gs_schedule_result_free(&r);
    return name;
}

static struct gs_dra_claim_write *take(struct env *e, const struct gs_pod *p, size_t *n)
{
    char key[GS__KEY_MAX];
    gs_meta_key(&p->meta, key, sizeof key);
    struct gs_dra_claim_write *w = NULL;
    assert_int_equal(gs_dra_plugin_take(gs_framework_plugin_state(e->fw, GS_DRA_PLUGIN_NAME), key, 1000.0, &w, n), 0);
    return w;
}

static int popcount(uint64_t m) { return __builtin_popcountll(m); }

static const struct gs_assignment *assignment(struct env *e, const struct gs_pod *p)
{
    char key[GS__KEY_MAX];
    gs_meta_key(&p->meta, key, sizeof key);
    return gs_cache_pod_assignment(e->cache, key);
}

/* The results' device names of an allocation JSON, comma-joined. */
static void devices_of(const json_t *alloc, char *buf, size_t len)
{
    size_t n = 0, i;
    const json_t *r;
    buf[0] = 0;
    json_array_foreach(json_object_get(json_object_get(alloc, "devices"), "results"), i, r)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", json_string_value(json_object_get(r, "device")));
}

static void test_allocates_and_takes_gpu_slots(void **state)
{
    struct env *e = *state;
    claim(e, "c1", exactly(2), NULL);
    struct gs_pod *p = claim_pod(e, "p1", "c1");
    const char *node = place(e, p, NULL, 0);
    assert_non_null(node);
    const struct gs_assignment *a = assignment(e, p);
    assert_non_null(a);
    assert_int_equal(popcount(a->gpu_mask), 2);
    assert_int_equal(a->milli, 1000);
    size_t n;
    struct gs_dra_claim_write *w = take(e, p, &n);
    assert_int_equal(n, 1);
    assert_string_equal(w[0].store_key, "resourceclaims.resource.k8s.io/default/c1");
    assert_string_equal(w[0].pod_name, "p1");
    assert_string_equal(w[0].pod_uid, "uid-p1");
    assert_non_null(w[0].allocation);
    char devs[256];
    devices_of(w[0].allocation, devs, sizeof devs);
    assert_string_equal(devs, "gpu-0,gpu-1");
    /* A device-plugin pod wanting all 4 GPUs of that node does not fit there any more. */
    struct gs_pod *dp = pod(e, "dp", NULL, 4);
    const char *dn = place(e, dp, NULL, 0);
    assert_non_null(dn);
    assert_string_not_equal(dn, node);
    gs_dra_claim_writes_free(w, n);
    char why[256];
    assert_int_equal(gs_cache_check(e->cache, why, sizeof why), 0);
}

static void test_device_plugin_gpus_not_given(void **state)
{
    struct env *e = *state;
    /* Device-plugin pods take 3 GPUs on each node: a claim for 2 fits nowhere, one for 1 takes the free one. */
    struct gs_pod *a = pod(e, "dpa", NULL, 3), *b = pod(e, "dpb", NULL, 3);
    assert_non_null(place(e, a, NULL, 0));
    assert_non_null(place(e, b, NULL, 0));
    claim(e, "two", exactly(2), NULL);
    char why[512];
    assert_null(place(e, claim_pod(e, "p2", "two"), why, sizeof why));
    assert_non_null(strstr(why, "claim two request gpus"));
    claim(e, "one", exactly(1), NULL);
    struct gs_pod *p = claim_pod(e, "p1", "one");
    const char *node = place(e, p, NULL, 0);
    assert_non_null(node);
    const struct gs_assignment *da = assignment(e, !strcmp(node, "n1") ? a : b), *pa = assignment(e, p);
    assert_int_equal(da->gpu_mask & pa->gpu_mask, 0);
}

static void test_first_available_falls_back(void **state)
{
    struct env *e = *state;
    /* H100 is wanted first but only n1 (A100) has 4 free: the second choice wins there. */
    claim(e, "fa",
          "{\"requests\":[{\"name\":\"gpus\",\"firstAvailable\":[{\"name\":\"big\",\"deviceClassName\":\"gpu.nvidia.com\","
          "\"count\":8},{\"name\":\"small\",\"deviceClassName\":\"gpu.nvidia.com\",\"count\":2}]}]}",
          NULL);
    struct gs_pod *p = claim_pod(e, "p", "fa");
    assert_non_null(place(e, p, NULL, 0));
    size_t n;
    struct gs_dra_claim_write *w = take(e, p, &n);
    const json_t *r0 = json_array_get(json_object_get(json_object_get(w[0].allocation, "devices"), "results"), 0);
    assert_string_equal(json_string_value(json_object_get(r0, "request")), "gpus/small");
    gs_dra_claim_writes_free(w, n);
}

static void test_match_attribute_one_nvlink_domain(void **state)
{
    struct env *e = *state;
    /* GPU 1 of n1 and n2 taken by earlier claims: 2 GPUs on one domain remain only as {2,3}. */
    claim(e, "x1", "{\"requests\":[{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\","
                   "\"selectors\":[{\"cel\":{\"expression\":\"device.attributes['gpu.nvidia.com'].uuid == 'GPU-n1-1'\"}}]}}]}",
          NULL);
    assert_non_null(place(e, claim_pod(e, "px", "x1"), NULL, 0));
    claim(e, "nv", "{\"requests\":[{\"name\":\"gpus\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":2}}],"
                   "\"constraints\":[{\"requests\":[\"gpus\"],\"matchAttribute\":\"gpu.nvidia.com/nvlinkDomain\"}]}",
          NULL);
    char why[512] = "";
    struct gs_pod *p = claim_pod(e, "p", "nv");
    /* Both nodes can; the scorers pick; whichever it is, the two devices share a domain. */
    const char *node = place(e, p, why, sizeof why);
    assert_non_null(node);
    size_t n;
    struct gs_dra_claim_write *w = take(e, p, &n);
    char devs[256];
    devices_of(w[0].allocation, devs, sizeof devs);
    if (!strcmp(node, "n1")) assert_string_equal(devs, "gpu-2,gpu-3");
    else assert_string_equal(devs, "gpu-0,gpu-1");
    gs_dra_claim_writes_free(w, n);
}

static void test_all_mode(void **state)
{
    struct env *e = *state;
    claim(e, "all", "{\"requests\":[{\"name\":\"gpus\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\","
                    "\"allocationMode\":\"All\"}}]}",
          NULL);
    struct gs_pod *p = claim_pod(e, "p", "all");
    assert_non_null(place(e, p, NULL, 0));
    assert_int_equal(popcount(assignment(e, p)->gpu_mask), 4);
    /* A second All claim: every node with free devices would need all of them, and one node is full. */
    claim(e, "all2", "{\"requests\":[{\"name\":\"gpus\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\","
                     "\"allocationMode\":\"All\"}}]}",
          NULL);
    struct gs_pod *q = claim_pod(e, "q", "all2");
    const char *n1 = gs_cache_node(e->cache, assignment(e, p)->node)->name;
    const char *n2 = place(e, q, NULL, 0);
    assert_non_null(n2);
    assert_string_not_equal(n1, n2);
}

static void test_tainted_device_needs_toleration(void **state)
{
    struct env *e = *state;
    slice(e, "n1", 4, "A100", 0);
    slice(e, "n2", 4, "H100", 0);
    /* Four GPUs: each node has only three untainted. */
    claim(e, "four", exactly(4), NULL);
    char why[512];
    assert_null(place(e, claim_pod(e, "p", "four"), why, sizeof why));
    assert_non_null(strstr(why, "claim four"));
    claim(e, "tol", "{\"requests\":[{\"name\":\"gpus\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":4,"
                    "\"tolerations\":[{\"key\":\"gpu.nvidia.com/unhealthy\",\"operator\":\"Exists\"}]}}]}",
          NULL);
    assert_non_null(place(e, claim_pod(e, "q", "tol"), NULL, 0));
}

static void test_shared_claim_reused_on_its_node(void **state)
{
    struct env *e = *state;
    claim(e, "shared", exactly(1),
          "{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpus\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"n2\","
          "\"device\":\"gpu-3\"}]},\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\","
          "\"operator\":\"In\",\"values\":[\"n2\"]}]}]}},\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"a\","
          "\"uid\":\"uid-a\"}]}");
    struct gs_pod *b = claim_pod(e, "b", "shared");
    const char *node = place(e, b, NULL, 0);
    assert_non_null(node);
    assert_string_equal(node, "n2");
    size_t n;
    struct gs_dra_claim_write *w = take(e, b, &n);
    assert_int_equal(n, 1);
    assert_null(w[0].allocation); /* only reservedFor */
    gs_dra_claim_writes_free(w, n);
    /* gpu-3 of n2 is held: a claim for all 4 of n2's GPUs cannot go there. */
    claim(e, "c4", "{\"requests\":[{\"name\":\"gpus\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":4,"
                   "\"selectors\":[{\"cel\":{\"expression\":\"device.attributes['gpu.nvidia.com'].productName == 'H100'\"}}]}}]}",
          NULL);
    char why[512];
    assert_null(place(e, claim_pod(e, "c", "c4"), why, sizeof why));
}

static void test_impossible_claim_reason(void **state)
{
    struct env *e = *state;
    claim(e, "gpu-claim", "{\"requests\":[{\"name\":\"gpus\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\","
                          "\"selectors\":[{\"cel\":{\"expression\":\"device.attributes['gpu.nvidia.com'].productName == 'B200'\"}}]}}]}",
          NULL);
    char why[1024];
    assert_null(place(e, claim_pod(e, "p", "gpu-claim"), why, sizeof why));
    assert_non_null(strstr(why, "0/2 nodes are available"));
    assert_non_null(strstr(why, "claim gpu-claim request gpus"));
    assert_non_null(strstr(why, "B200"));
}

static void test_missing_claim_and_template_named(void **state)
{
    struct env *e = *state;
    char why[512];
    assert_null(place(e, claim_pod(e, "p", "nope"), why, sizeof why));
    assert_non_null(strstr(why, "resourceclaim \"nope\" not found"));
    assert_null(place(e, pod(e, "q", "[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"tmpl\"}]", 0), why, sizeof why));
    assert_non_null(strstr(why, "resourceclaimtemplate \"tmpl\" not found"));
    feed(e, "resourceclaimtemplates.resource.k8s.io/default/tmpl",
         "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaimTemplate\",\"metadata\":{\"name\":\"tmpl\","
         "\"namespace\":\"default\"},\"spec\":{\"spec\":{\"devices\":{\"requests\":[]}}}}");
    struct gs_pod *r = pod(e, "r", "[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"tmpl\"}]", 0);
    assert_null(place(e, r, why, sizeof why));
    assert_non_null(strstr(why, "waiting for the claim"));
    /* The generated claim appears (owner and annotation): the pod is placed. */
    feed(e, "resourceclaims.resource.k8s.io/default/r-gpu-bcdfg",
         "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"r-gpu-bcdfg\","
         "\"namespace\":\"default\",\"uid\":\"uid-gen\",\"annotations\":{\"resource.kubernetes.io/pod-claim-name\":"
         "\"gpu\"},\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"r\",\"uid\":\"uid-r\","
         "\"controller\":true}]},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpus\",\"exactly\":{"
         "\"deviceClassName\":\"gpu.nvidia.com\"}}]}}}");
    assert_non_null(place(e, r, NULL, 0));
    size_t n;
    struct gs_dra_claim_write *w = take(e, r, &n);
    assert_int_equal(n, 1);
    assert_string_equal(w[0].claim_key, "default/r-gpu-bcdfg");
    gs_dra_claim_writes_free(w, n);
}

static int setup_no_plugin(void **state)
{
    return setup_n(state, 1, 4,
                   "{\"profiles\":[{\"schedulerName\":\"default-scheduler\",\"plugins\":{\"preFilter\":{\"disabled\":"
                   "[{\"name\":\"DynamicResources\"}]},\"reserve\":{\"disabled\":[{\"name\":\"DynamicResources\"}]}}}]}");
}

static void test_profile_without_plugin_refuses(void **state)
{
    struct env *e = *state;
    claim(e, "c", exactly(1), NULL);
    char why[512];
    assert_null(place(e, claim_pod(e, "p", "c"), why, sizeof why));
    assert_non_null(strstr(why, "does not run the DynamicResources plugin"));
    assert_non_null(place(e, pod(e, "plain", NULL, 1), NULL, 0)); /* others are untouched */
}

static void test_assumed_survives_stale_version_and_release(void **state)
{
    struct env *e = *state;
    /* One 4-GPU node's worth: c1 takes 3 of n1's or n2's GPUs. */
    claim(e, "c1", exactly(3), NULL);
    struct gs_pod *p = claim_pod(e, "p", "c1");
    const char *node = place(e, p, NULL, 0);
    assert_non_null(node);
    size_t n;
    struct gs_dra_claim_write *w = take(e, p, &n);
    /* A stale, unallocated version of c1 arrives: the devices stay held. */
    claim(e, "c1", exactly(3), NULL);
    claim(e, "big", exactly(3), NULL);
    claim(e, "big2", exactly(2), NULL);
    assert_non_null(place(e, claim_pod(e, "q1", "big"), NULL, 0));
    char why[512];
    assert_null(place(e, claim_pod(e, "q2", "big2"), why, sizeof why)); /* 1 + 1 left: no node has 2 */
    /* Writing failed: the assumption goes, the devices are free, q2 fits. */
    gs_cache_dra_unassume(e->cache, w[0].claim_key);
    gs_dra_claim_writes_free(w, n);
    char key[GS__KEY_MAX];
    gs_meta_key(&p->meta, key, sizeof key);
    gs_cache_remove_pod(e->cache, key);
    assert_non_null(place(e, claim_pod(e, "q3", "big2"), NULL, 0));
}

static void test_deallocation_frees_devices(void **state)
{
    struct env *e = *state;
    const char *alloc =
        "{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpus\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"%s\","
        "\"device\":\"gpu-0\"},{\"request\":\"gpus\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"%s\",\"device\":\"gpu-1\"},"
        "{\"request\":\"gpus\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"%s\",\"device\":\"gpu-2\"}]},\"nodeSelector\":{"
        "\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"%s\"]}]}]}}}";
    char s1[2048], s2[2048];
    snprintf(s1, sizeof s1, alloc, "n1", "n1", "n1", "n1");
    snprintf(s2, sizeof s2, alloc, "n2", "n2", "n2", "n2");
    claim(e, "h1", exactly(3), s1);
    claim(e, "h2", exactly(3), s2);
    claim(e, "two", exactly(2), NULL);
    char why[512];
    struct gs_pod *p = claim_pod(e, "p", "two");
    assert_null(place(e, p, why, sizeof why));
    claim(e, "h2", exactly(3), NULL); /* deallocated */
    const char *node = place(e, p, why, sizeof why);
    assert_non_null(node);
    assert_string_equal(node, "n2");
}

/* Many pods of one claim shape: the memo changes no verdict (same answers as without it). */
static void test_memo_same_decisions(void **state)
{
    struct env *e = *state;
    char name[32], cl[32];
    int placed = 0;
    for (int i = 0; i < 6; i++) {
        snprintf(cl, sizeof cl, "m%d", i);
        snprintf(name, sizeof name, "pm%d", i);
        claim(e, cl, exactly(1), NULL);
        placed += place(e, claim_pod(e, name, cl), NULL, 0) != NULL;
    }
    assert_int_equal(placed, 6);
    claim(e, "m6", exactly(3), NULL); /* 8 - 6 = 2 left */
    char why[512];
    assert_null(place(e, claim_pod(e, "pm6", "m6"), why, sizeof why));
    claim(e, "m7", exactly(1), NULL);
    claim(e, "m8", exactly(1), NULL);
    claim(e, "m9", exactly(1), NULL);
    assert_non_null(place(e, claim_pod(e, "pm7", "m7"), NULL, 0));
    assert_non_null(place(e, claim_pod(e, "pm8", "m8"), NULL, 0));
    assert_null(place(e, claim_pod(e, "pm9", "m9"), why, sizeof why));
    assert_int_equal(gs_cache_gpu_milli_used(e->cache), 8000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_allocates_and_takes_gpu_slots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_plugin_gpus_not_given, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_available_falls_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_match_attribute_one_nvlink_domain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_all_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tainted_device_needs_toleration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_claim_reused_on_its_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_impossible_claim_reason, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_claim_and_template_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profile_without_plugin_refuses, setup_no_plugin, teardown),
        cmocka_unit_test_setup_teardown(test_assumed_survives_stale_version_and_release, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deallocation_frees_devices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memo_same_decisions, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
