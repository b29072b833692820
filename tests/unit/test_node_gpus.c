/*
 * test_node_gpus.c - where a Node's per-GPU state comes from: status.devices,
 * else the gpusched.io/gpus annotation (bad ones named and the node kept
 * count-only), else NodeResourceTopology zones, else count-only; and the
 * count-only note in the diagnosis and in explain.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched/explain.h"
#include "sched/gpu_state.h"
#include "sched/scheduler.h"
#include "sched_fixture.h"

/* A Node with allocatable nvidia.com/gpu = gpus, the annotation ann (NULL:
 * none, JSON-escaped text) and status.devices devs (NULL: none). */
static struct gs_node *node(const char *name, int gpus, const char *ann, const char *devs, const char *labels)
{
    char doc[4096], a[2048] = "{}";
    if (ann) snprintf(a, sizeof a, "{\"gpusched.io/gpus\":\"%s\"}", ann);
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"annotations\":%s,\"labels\":%s},"
             "\"status\":{\"capacity\":{\"cpu\":\"32\",\"memory\":\"128Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"%d\"}"
             "%s%s}}",
             name, a, labels ? labels : "{}", gpus, devs ? ",\"devices\":" : "", devs ? devs : "");
    json_error_t je;
    json_t *j = json_loads(doc, 0, &je);
    if (!j) fail_msg("test JSON: %s: %s", je.text, doc);
    struct gs_node *n = calloc(1, sizeof *n);
    struct gs_diags d = {0};
    int rc = gs_node_decode(j, n, &d);
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, "%s: %s\n", d.v[i].path, d.v[i].msg);
    assert_int_equal(rc, 0); /* whatever the annotation says, the node decodes */
    gs_diags_free(&d);
    json_decref(j);
    return n;
}

static void node_free(struct gs_node *n)
{
    gs_node_clear(n);
    free(n);
}

static void devices_first_then_annotation(void **st)
{
    (void)st;
    struct gs_node *n = node("n1", 2, "[{\\\"index\\\":5}]", "[{\"index\":0,\"uuid\":\"GPU-a\"},{\"index\":1}]", NULL);
    assert_int_equal(n->gpu_source, GS_GPU_SRC_DEVICES);
    assert_int_equal(n->ngpus, 2);
    assert_string_equal(n->gpus[0].uuid, "GPU-a");
    assert_null(n->gpu_note);
    node_free(n);
    n = node("n2", 2,
             "[{\\\"index\\\":0,\\\"uuid\\\":\\\"GPU-x\\\",\\\"model\\\":\\\"H100\\\",\\\"memoryMiB\\\":81920,"
             "\\\"numaNode\\\":1,\\\"nvlinkPeers\\\":[1]},{\\\"index\\\":1,\\\"health\\\":\\\"Unhealthy\\\"}]",
             NULL, NULL);
    assert_int_equal(n->gpu_source, GS_GPU_SRC_ANNOTATION);
    assert_int_equal(n->ngpus, 2);
    assert_string_equal(n->gpus[0].uuid, "GPU-x");
    assert_string_equal(n->gpus[0].model, "H100");
    assert_int_equal(n->gpus[0].memory_mib, 81920);
    assert_int_equal(n->gpus[0].numa_node, 1);
    assert_int_equal(n->gpus[0].nvlink_peers, 2);
    assert_false(n->gpus[1].healthy);
    assert_null(n->gpu_note);
    assert_string_equal(gs_gpu_source_name(n->gpu_source), "annotation gpusched.io/gpus");
    node_free(n);
}

static void bad_annotations_are_named_and_count_only(void **st)
{
    (void)st;
    static const struct {
        const char *ann, *want;
    } cases[] = {
        {"[{\\\"index\\\":0", "node n1: annotation gpusched.io/gpus: not JSON: "},
        {"{\\\"index\\\":0}", "node n1: annotation gpusched.io/gpus: expected a JSON array of devices (as "
                              "status.devices), got object; using the count-only GPU state"},
        {"[{\\\"uuid\\\":\\\"GPU-1\\\"}]", "node n1: annotation gpusched.io/gpus: [0].index: is required"},
        {"[{\\\"index\\\":0},{\\\"index\\\":0}]", "node n1: annotation gpusched.io/gpus: [1].index: duplicate GPU index 0"},
        {"[{\\\"index\\\":70}]", "node n1: annotation gpusched.io/gpus: [0].index: "},
        {"[{\\\"index\\\":0,\\\"health\\\":\\\"Sick\\\"}]", "[0].health: invalid value \"Sick\""},
        {"[]", "node n1: annotation gpusched.io/gpus: the array lists no devices"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gs_node *n = node("n1", 4, cases[i].ann, NULL, NULL);
        if (!n->gpu_note || !strstr(n->gpu_note, cases[i].want))
            fail_msg("case %zu: note \"%s\", want \"%s\"", i, n->gpu_note ? n->gpu_note : "(none)", cases[i].want);
        assert_int_equal(n->gpu_source, GS_GPU_SRC_COUNT);
        assert_int_equal(n->ngpus, 0);
        assert_int_equal(gs_resources_get(&n->allocatable, GS_RES_GPU), 4000);
        node_free(n);
    }
    /* no annotation: count-only without a note; no GPUs at all: none */
    struct gs_node *n = node("n3", 4, NULL, NULL, NULL);
    assert_int_equal(n->gpu_source, GS_GPU_SRC_COUNT);
    assert_null(n->gpu_note);
    node_free(n);
    n = node("n4", 0, NULL, NULL, NULL);
    assert_int_equal(n->gpu_source, GS_GPU_SRC_NONE);
    node_free(n);
}

static struct gs_nrt *nrt(const char *name, int g0, int g1)
{
    char doc[1024];
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"topology.node.k8s.io/v1alpha2\",\"kind\":\"NodeResourceTopology\",\"metadata\":"
             "{\"name\":\"%s\"},\"zones\":[{\"name\":\"node-0\",\"type\":\"Node\",\"resources\":[{\"name\":"
             "\"nvidia.com/gpu\",\"capacity\":\"%d\",\"allocatable\":\"%d\",\"available\":\"%d\"}]},"
             "{\"name\":\"node-1\",\"type\":\"Node\",\"resources\":[{\"name\":\"nvidia.com/gpu\",\"capacity\":\"%d\","
             "\"allocatable\":\"%d\",\"available\":\"%d\"}]}]}",
             name, g0, g0, g0, g1, g1, g1);
    json_t *j = json_loads(doc, 0, NULL);
    struct gs_nrt *t = calloc(1, sizeof *t);
    struct gs_diags d = {0};
    assert_int_equal(gs_nrt_parse(j, t, &d), 0);
    json_decref(j);
    return t;
}

static void nrt_free(struct gs_nrt *t)
{
    gs_nrt_clear(t);
    free(t);
}

static void nrt_zones_number_the_gpus(void **st)
{
    (void)st;
    struct gs_node *n = node("n1", 4, NULL, NULL, "{\"nvidia.com/gpu.product\":\"A100\",\"nvidia.com/gpu.memory\":\"40960\"}");
    struct gs_nrt *t = nrt("n1", 2, 2);
    assert_int_equal(gs_gpu_state_apply_nrt(n, t), 0);
    assert_int_equal(n->gpu_source, GS_GPU_SRC_NRT);
    assert_int_equal(n->ngpus, 4);
    int want[] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(n->gpus[i].index, i);
        assert_int_equal(n->gpus[i].numa_node, want[i]);
        assert_string_equal(n->gpus[i].model, "A100");
        assert_int_equal(n->gpus[i].memory_mib, 40960);
        assert_true(n->gpus[i].healthy);
        assert_null(n->gpus[i].uuid);
    }
    /* the cache places them in their zones */
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    int32_t idx = gs_cache_add_node(c, n);
    assert_true(idx >= 0);
    assert_int_equal(gs_cache_node(c, idx)->ngpus, 4);
    assert_int_equal(gs_cache_node(c, idx)->gpus[2].numa_node, 1);
    assert_false(gs_gpu_state_count_only(gs_cache_node(c, idx)));
    /* the topology goes: count-only again */
    assert_int_equal(gs_gpu_state_apply_nrt(n, NULL), 0);
    assert_int_equal(n->gpu_source, GS_GPU_SRC_COUNT);
    assert_int_equal(n->ngpus, 0);
    assert_int_equal(gs_cache_update_node(c, n), 0);
    assert_int_equal(gs_cache_node(c, idx)->ngpus, 4); /* from allocatable */
    assert_true(gs_gpu_state_count_only(gs_cache_node(c, idx)));
    gs_cache_free(c);
    /* fewer allocatable than the zones hold: the count wins, zones fill in order */
    node_free(n);
    n = node("n1", 3, NULL, NULL, NULL);
    nrt_free(t);
    t = nrt("n1", 1, 4);
    assert_int_equal(gs_gpu_state_apply_nrt(n, t), 0);
    assert_int_equal(n->ngpus, 3);
    assert_int_equal(n->gpus[0].numa_node, 0);
    assert_int_equal(n->gpus[1].numa_node, 1);
    assert_int_equal(n->gpus[2].numa_node, 1);
    assert_null(n->gpus[0].model);
    node_free(n);
    /* zones without GPUs, or a node with its own devices: nothing changes */
    n = node("n1", 2, NULL, NULL, NULL);
    nrt_free(t);
    t = nrt("n1", 0, 0);
    assert_int_equal(gs_gpu_state_apply_nrt(n, t), 0);
    assert_int_equal(n->gpu_source, GS_GPU_SRC_COUNT);
    node_free(n);
    n = node("n1", 1, NULL, "[{\"index\":0,\"numaNode\":3}]", NULL);
    nrt_free(t);
    t = nrt("n1", 1, 0);
    assert_int_equal(gs_gpu_state_apply_nrt(n, t), 0);
    assert_int_equal(n->gpu_source, GS_GPU_SRC_DEVICES);
    assert_int_equal(n->gpus[0].numa_node, 3);
    node_free(n);
    nrt_free(t);
}

static void count_only_is_said(void **st)
{
    (void)st;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    struct gs_node *nodes[6];
    nodes[0] = node("dev", 2, NULL, "[{\"index\":0},{\"index\":1}]", NULL);
    nodes[1] = node("n1", 2, NULL, NULL, NULL);
    for (int i = 0; i < 2; i++) assert_true(gs_cache_add_node(c, nodes[i]) >= 0);
    struct gs_pod *gpu = fx_pod("p", 4, 0, NULL), *cpu = fx_pod("q", 0, 0, NULL);
    char buf[1024];
    assert_int_equal(gs_gpu_state_note(c, NULL, cpu, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    assert_true(gs_gpu_state_note(c, NULL, gpu, buf, sizeof buf) > 0);
    assert_string_equal(buf, "node n1: count-only GPU state (no status.devices, gpusched.io/gpus annotation or "
                             "NodeResourceTopology)");
    assert_string_equal(gs_gpu_state_diagnosis(c, NULL, gpu, "0/2 nodes are available.", buf, sizeof buf),
                        "0/2 nodes are available. node n1: count-only GPU state (no status.devices, "
                        "gpusched.io/gpus annotation or NodeResourceTopology)");
    assert_string_equal(gs_gpu_state_diagnosis(c, NULL, cpu, "x", buf, sizeof buf), "x");
    struct gs_gpu_state_memo memo = {0};
    gs_gpu_state_note(c, &memo, gpu, buf, sizeof buf);
    assert_true(memo.valid);
    assert_string_equal(memo.note, "node n1: " GS_GPU_STATE_COUNT_ONLY);
    for (int i = 2; i < 6; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        nodes[i] = node(name, 1, NULL, NULL, NULL);
        assert_true(gs_cache_add_node(c, nodes[i]) >= 0);
    }
    gs_gpu_state_note(c, &memo, gpu, buf, sizeof buf); /* the epoch moved: computed again */
    assert_string_equal(buf, "node n1, node n2, node n3 and 2 more node(s): " GS_GPU_STATE_COUNT_ONLY);
    strcpy(memo.note, "remembered"); /* the same epoch: the memo answers */
    gs_gpu_state_note(c, &memo, gpu, buf, sizeof buf);
    assert_string_equal(buf, "remembered");
    assert_int_equal(gs_cache_update_node(c, nodes[1]), 0);
    gs_gpu_state_note(c, &memo, gpu, buf, sizeof buf);
    assert_string_equal(buf, "node n1, node n2, node n3 and 2 more node(s): " GS_GPU_STATE_COUNT_ONLY);
    /* explain prints it under the filter summary */
    struct gs_sched_config cfg;
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    char text[4096];
    snprintf(text, sizeof text, FX_GANG_PROFILE, 60, "true");
    assert_int_equal(gs_decode_stream(text, strlen(text), &docs, &d, NULL), 0);
    assert_int_equal(gs_sched_config_parse(docs.docs[0], &cfg, &d), 0);
    gs_docs_free(&docs);
    struct gs_scheduler *s = NULL;
    struct gs_scheduler_opts o = {.profile = &cfg.profiles[0]};
    assert_int_equal(gs_scheduler_new(&clk, c, &o, &s, &d), 0);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_int_equal(gs_explain_pod(gs_scheduler_framework(s), c, gpu, f), 0);
    fclose(f);
    assert_non_null(strstr(out, "\n  node n1, node n2, node n3 and 2 more node(s): count-only GPU state"));
    free(out);
    gs_scheduler_free(s);
    gs_sched_config_free(&cfg);
    gs_diags_free(&d);
    gs_cache_free(c);
    for (int i = 0; i < 6; i++) node_free(nodes[i]);
    fx_pod_free(gpu);
    fx_pod_free(cpu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(devices_first_then_annotation),
        cmocka_unit_test(bad_annotations_are_named_and_count_only),
        cmocka_unit_test(nrt_zones_number_the_gpus),
        cmocka_unit_test(count_only_is_said),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
