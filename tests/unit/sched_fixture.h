/*
 * sched_fixture.h - small builders shared by the gang, topology, spread,
 * preemption, explain and invariant tests: pods and PodGroups decoded from
 * JSON (the real decoders), nodes with NUMA/NVLink topology, and a framework
 * from a KubeSchedulerConfiguration text. Static functions: each test
 * executable includes its own copy.
 */
#ifndef GS_TEST_SCHED_FIXTURE_H
#define GS_TEST_SCHED_FIXTURE_H

#include "core/codec.h"
#include "core/object.h"
#include "sched/cache.h"
#include "sched/framework.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A pod: gpus whole GPUs (or milli share of one when milli < 1000), cpu cores,
 * priority, group (NULL none), extra JSON merged into spec (NULL none). */
__attribute__((unused)) static struct gs_pod *fx_pod_ex(const char *name, int gpus, int milli, int cpu, int prio, const char *group,
                                const char *labels_json, const char *spec_json, const char *ann_json)
{
    char doc[4096];
    char gpu[64] = "";
    if (gpus) snprintf(gpu, sizeof gpu, ",\"nvidia.com/gpu\":\"%d\"", gpus);
    char anns[512] = "{}";
    if (milli && milli < 1000) snprintf(anns, sizeof anns, "{\"gpusched.io/gpu-milli\":\"%d\"}", milli);
    if (ann_json) snprintf(anns, sizeof anns, "%s", ann_json);
    char labels[512] = "{}";
    if (group) snprintf(labels, sizeof labels, "{\"scheduling.x-k8s.io/pod-group\":\"%s\"}", group);
    if (labels_json) snprintf(labels, sizeof labels, "%s", labels_json);
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\","
             "\"labels\":%s,\"annotations\":%s},\"spec\":{\"priority\":%d,%s\"containers\":[{\"name\":\"c\","
             "\"image\":\"i\",\"resources\":{\"limits\":{\"cpu\":\"%d\",\"memory\":\"1Gi\"%s},"
             "\"requests\":{\"cpu\":\"%d\",\"memory\":\"1Gi\"%s}}}]}}",
             name, labels, anns, prio, spec_json ? spec_json : "", cpu, gpu, cpu, gpu);
    json_error_t e;
    json_t *j = json_loads(doc, 0, &e);
    if (!j) {
        fprintf(stderr, "fixture JSON: %s\n%s\n", e.text, doc);
        return NULL;
    }
    struct gs_pod *p = calloc(1, sizeof *p);
    struct gs_diags d = {0};
    if (gs_pod_decode(j, p, &d) != 0) {
        for (size_t i = 0; i < d.n; i++) fprintf(stderr, "fixture pod: %s: %s\n", d.v[i].path, d.v[i].msg);
        free(p);
        p = NULL;
    }
    gs_diags_free(&d);
    json_decref(j);
    return p;
}

__attribute__((unused)) static struct gs_pod *fx_pod(const char *name, int gpus, int prio, const char *group)
{
    return fx_pod_ex(name, gpus, 0, 1, prio, group, NULL, NULL, NULL);
}

__attribute__((unused)) static void fx_pod_free(struct gs_pod *p)
{
    if (!p) return;
    gs_pod_clear(p);
    free(p);
}

/* A PodGroup (gs_object: free with gs_object_free). */
__attribute__((unused)) static struct gs_object *fx_podgroup_kind(const char *api, const char *name, int min, int timeout_s,
                                          const char *annotations_json)
{
    char spec[128], doc[1024];
    snprintf(spec, sizeof spec, "\"minMember\":%d", min);
    if (timeout_s) snprintf(spec + strlen(spec), sizeof spec - strlen(spec), ",\"scheduleTimeoutSeconds\":%d", timeout_s);
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"%s\",\"kind\":\"PodGroup\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"default\",\"annotations\":%s},\"spec\":{%s}}",
             api, name, annotations_json ? annotations_json : "{}", spec);
    json_t *j = json_loads(doc, 0, NULL);
    struct gs_object *o = NULL;
    struct gs_diags d = {0};
    if (j) gs_object_decode(j, &o, &d);
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, "fixture podgroup: %s: %s\n", d.v[i].path, d.v[i].msg);
    gs_diags_free(&d);
    json_decref(j);
    return o;
}

/* A PodGroup (gs_object: free with gs_object_free). */
__attribute__((unused)) static struct gs_object *fx_podgroup(const char *name, int min, int timeout_s, const char *annotations_json)
{
    return fx_podgroup_kind("scheduling.x-k8s.io/v1alpha1", name, min, timeout_s, annotations_json);
}

/* A node spec with ngpus GPUs, split into islands of island_size (0: no
 * NVLink) and NUMA zones of numa_size GPUs (0: unknown). Arrays are static
 * per call site index k (up to 16 nodes alive per test). */
__attribute__((unused)) static int fx_add_node(struct gs_cache *c, const char *name, int ngpus, int cpu, int island_size, int numa_size,
                       const struct gs_labels *labels)
{
    static int32_t numa[16][64];
    static uint64_t links[16][64];
    static int k;
    int s = k++ % 16;
    for (int g = 0; g < ngpus; g++) {
        numa[s][g] = numa_size ? g / numa_size : -1;
        links[s][g] = 0;
        if (island_size) {
            int base = g / island_size * island_size;
            for (int h = base; h < base + island_size && h < ngpus; h++)
                if (h != g) links[s][g] |= 1ULL << h;
        }
    }
    struct gs_node_spec sp = {.name = name, .cpu_milli = (int64_t)cpu * 1000, .mem_bytes = 512LL << 30, .pods = 110,
                              .gpu_model = ngpus ? "A100" : NULL, .ngpus = ngpus, .gpu_mem_mib = 81920,
                              .labels = labels, .gpu_numa = numa[s], .gpu_nvlink = links[s]};
    return gs_cache_add_node_spec(c, &sp);
}

/* A framework for the default profile of a configuration text (YAML/JSON). */
__attribute__((unused)) static struct gs_framework *fx_framework(const char *config, struct gs_sched_config *cfg, const struct gs_handle *h)
{
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    struct gs_framework *fw = NULL;
    if (gs_decode_stream(config, strlen(config), &docs, &d, NULL) == 0 && docs.n == 1 &&
        gs_sched_config_parse(docs.docs[0], cfg, &d) == 0)
        gs_framework_new(&cfg->profiles[0], h, &fw, &d);
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, "fixture config: %s: %s\n", d.v[i].path, d.v[i].msg);
    gs_diags_free(&d);
    gs_docs_free(&docs);
    return fw;
}

/* The gang/topology profile of examples/ (kept in sync by test_gang's check). */
__attribute__((unused)) static const char *const FX_GANG_PROFILE =
    "{\"apiVersion\":\"kubescheduler.config.k8s.io/v1\",\"kind\":\"KubeSchedulerConfiguration\",\"profiles\":[{"
    "\"plugins\":{"
    "\"queueSort\":{\"enabled\":[{\"name\":\"Coscheduling\"}],\"disabled\":[{\"name\":\"*\"}]},"
    "\"preFilter\":{\"enabled\":[{\"name\":\"Coscheduling\"},{\"name\":\"PodTopologySpread\"},{\"name\":\"NodeResourceTopology\"}]},"
    "\"filter\":{\"enabled\":[{\"name\":\"Coscheduling\"},{\"name\":\"PodTopologySpread\"},{\"name\":\"NodeResourceTopology\"},{\"name\":\"DefaultPreemption\"}]},"
    "\"postFilter\":{\"enabled\":[{\"name\":\"DefaultPreemption\"},{\"name\":\"Coscheduling\"}]},"
    "\"score\":{\"enabled\":[{\"name\":\"Coscheduling\",\"weight\":10},{\"name\":\"NodeResourceTopology\",\"weight\":3},"
    "{\"name\":\"PodTopologySpread\",\"weight\":2},{\"name\":\"DefaultPreemption\",\"weight\":5}]},"
    "\"reserve\":{\"enabled\":[{\"name\":\"NodeResourceTopology\"},{\"name\":\"GpuShare\"},{\"name\":\"Coscheduling\"},"
    "{\"name\":\"DefaultPreemption\"}],\"disabled\":[{\"name\":\"*\"}]},"
    "\"permit\":{\"enabled\":[{\"name\":\"Coscheduling\"}]}},"
    "\"pluginConfig\":[{\"name\":\"Coscheduling\",\"args\":{\"permitWaitingTimeSeconds\":%d,\"wholeGroupPlan\":%s}}]}]}";

__attribute__((unused)) static void fx_check_cache(struct gs_cache *c)
{
    char why[512];
    int rc = gs_cache_check(c, why, sizeof why);
    if (rc) fprintf(stderr, "cache check: %s\n", why);
    assert_int_equal(rc, 0);
}

#endif
