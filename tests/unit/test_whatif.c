/*
 * test_whatif.c - the snapshot's build step (sim/snapshot.c) on hand-made
 * listings at a fixed time, and the what-if changes (sim/whatif.c): their
 * flag syntax and error messages, what each does to the documents, and a
 * replay of a changed snapshot whose answer is known.
 */
#include "core/codec.h"
#include "sim/snapshot.h"
#include "sim/trace_manifest.h"
#include "sim/whatif.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOW 1767225600.0 /* 2026-01-01T00:00:00Z */

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    if (!v) fail_msg("bad test JSON: %s", e.text);
    return v;
}

static const char *ann(const json_t *doc, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(doc, "metadata"), "annotations"), key));
}

static const json_t *by_name(const json_t *docs, const char *name)
{
    size_t i;
    const json_t *d;
    json_array_foreach(docs, i, d) if (!strcmp(json_string_value(json_object_get(json_object_get(d, "metadata"),
                                                                                "name")),
                                               name)) return d;
    fail_msg("no %s", name);
    return NULL;
}

#define NODE(n) "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"" n "\",\"resourceVersion\":\"7\"," \
                "\"managedFields\":[{}]},\"status\":{\"allocatable\":{\"cpu\":\"8\",\"memory\":\"8Gi\",\"pods\":\"10\"," \
                "\"nvidia.com/gpu\":\"2\"},\"devices\":[{\"index\":0,\"uuid\":\"GPU-" n "-0\"}," \
                "{\"index\":1,\"uuid\":\"GPU-" n "-1\"}]}}"
#define POD(n, extra) "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"" n "\",\"namespace\":\"default\"" \
                      extra "},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"resources\":{\"limits\":" \
                      "{\"nvidia.com/gpu\":\"2\"}}}]"
#define CQ "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"ClusterQueue\",\"metadata\":{\"name\":\"cq\"}," \
           "\"spec\":{\"namespaceSelector\":{},\"resourceGroups\":[{\"coveredResources\":[\"nvidia.com/gpu\"]," \
           "\"flavors\":[{\"name\":\"f\",\"resources\":[{\"name\":\"nvidia.com/gpu\",\"nominalQuota\":2}]}]}]}}"

static json_t *listing(void)
{
    return parse("[" NODE("n1") "," NODE("n2") "," CQ ","
                 POD("run", ",\"annotations\":{\"sim.gpusched.io/duration\":\"1h\"}")
                 ",\"nodeName\":\"n1\"},\"status\":{\"phase\":\"Running\",\"startTime\":\"2025-12-31T23:50:00Z\"}},"
                 POD("wait", "") "},\"status\":{\"phase\":\"Pending\"}},"
                 POD("done", "") ",\"nodeName\":\"n2\"},\"status\":{\"phase\":\"Succeeded\"}}]");
}

static void test_build(void **state)
{
    (void)state;
    json_t *objs = listing(), *cluster, *workload;
    struct gs_diags d = {0};
    struct gs_snapshot_opts o = {.now = NOW, .assume_duration = -1};
    assert_int_equal(gs_snapshot_build(objs, &o, &cluster, &workload, &d), GS_EINVAL);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, "metadata.annotations[\"sim.gpusched.io/duration\"]");
    assert_non_null(strstr(d.v[0].msg, "1 pod(s) have no duration (default/wait)"));
    assert_non_null(strstr(d.v[0].msg, "--assume-duration"));
    gs_diags_free(&d);

    o.assume_duration = 1800;
    assert_int_equal(gs_snapshot_build(objs, &o, &cluster, &workload, &d), 0);
    assert_int_equal(json_array_size(cluster), 3); /* two nodes, the ClusterQueue */
    assert_int_equal(json_array_size(workload), 2); /* the finished pod is left out */
    const json_t *n1 = by_name(cluster, "n1");
    assert_null(json_object_get(json_object_get(n1, "metadata"), "managedFields"));
    assert_null(json_object_get(json_object_get(n1, "metadata"), "resourceVersion"));
    const json_t *run = by_name(workload, "run"), *wait = by_name(workload, "wait");
    assert_string_equal(ann(run, GS_ANN_SIM_RUNNING_FOR), "10m0s");
    assert_string_equal(ann(run, GS_ANN_SIM_DURATION), "1h"); /* its own, not the assumed one */
    assert_null(ann(run, GS_ANN_SIM_ARRIVAL));
    assert_string_equal(ann(wait, GS_ANN_SIM_ARRIVAL), "0");
    assert_string_equal(ann(wait, GS_ANN_SIM_DURATION), "30m0s");
    assert_string_equal(json_string_value(json_object_get(json_object_get(run, "status"), "phase")), "Running");
    assert_null(json_object_get(json_object_get(run, "status"), "startTime"));

    /* The replay: wait needs n2's two GPUs, which are free. */
    struct gs_whatif_result r;
    struct gs_sim_opts so = {.mode = GS_SIM_REPLAY, .seed = 42};
    assert_int_equal(gs_whatif_run(cluster, workload, &so, &r, &d), 0);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.v[0].pod, "default/wait");
    assert_true(r.v[0].start == 0);
    assert_string_equal(r.v[0].node, "n2");
    gs_whatif_result_free(&r);

    /* Without n2, wait gets n1 when run's hour ends (50 minutes from now). */
    struct gs_whatif_change c;
    const char *why;
    assert_int_equal(gs_whatif_change_parse("remove-node", "n2", &c, &why), 0);
    assert_int_equal(gs_whatif_apply(cluster, workload, &c, 1, NULL, &d), 0);
    assert_int_equal(gs_whatif_run(cluster, workload, &so, &r, &d), 0);
    for (size_t i = 0; i < d.n; i++) print_message("diag: %s: %s\n", d.v[i].path, d.v[i].msg);
    assert_int_equal(r.n, 1);
    assert_true(r.v[0].start == 3000);
    assert_string_equal(r.v[0].node, "n1");
    gs_whatif_result_free(&r);
    gs_diags_free(&d);
    json_decref(cluster);
    json_decref(workload);
    json_decref(objs);
}

static void test_changes(void **state)
{
    (void)state;
    json_t *objs = listing(), *cluster, *workload;
    struct gs_diags d = {0};
    struct gs_snapshot_opts o = {.now = NOW, .assume_duration = 60};
    assert_int_equal(gs_snapshot_build(objs, &o, &cluster, &workload, &d), 0);
    struct gs_whatif_change c[4];
    const char *why;
    assert_int_equal(gs_whatif_change_parse("add-nodes", "2:n1", &c[0], &why), 0);
    assert_int_equal(gs_whatif_change_parse("set-quota", "cq:nvidia.com/gpu=8", &c[1], &why), 0);
    assert_int_equal(gs_whatif_change_parse("set-weight", "cq=3", &c[2], &why), 0);
    assert_int_equal(gs_whatif_change_parse("remove-node", "n1", &c[3], &why), 0);
    assert_int_equal(gs_whatif_apply(cluster, workload, c, 4, NULL, &d), 0);
    const json_t *copy = by_name(cluster, "n1-new-2");
    const json_t *dev = json_array_get(json_object_get(json_object_get(copy, "status"), "devices"), 1);
    assert_string_equal(json_string_value(json_object_get(dev, "uuid")), "GPU-n1-1-new-2");
    const json_t *cq = by_name(cluster, "cq");
    json_t *spec = json_object_get(cq, "spec");
    json_t *res = json_array_get(
        json_object_get(json_array_get(json_object_get(json_array_get(json_object_get(spec, "resourceGroups"), 0),
                                                       "flavors"),
                                       0),
                        "resources"),
        0);
    assert_string_equal(json_string_value(json_object_get(res, "nominalQuota")), "8");
    assert_string_equal(json_string_value(json_object_get(json_object_get(spec, "fairSharing"), "weight")), "3");
    /* n1 is gone; the pod that ran there waits again from the start */
    const json_t *run = by_name(workload, "run");
    assert_null(json_object_get(json_object_get(run, "spec"), "nodeName"));
    assert_null(ann(run, GS_ANN_SIM_RUNNING_FOR));
    assert_string_equal(ann(run, GS_ANN_SIM_ARRIVAL), "0");
    size_t nodes = 0, i;
    const json_t *x;
    json_array_foreach(cluster, i, x) nodes += !strcmp(json_string_value(json_object_get(x, "kind")), "Node");
    assert_int_equal(nodes, 3); /* n2 and the two copies */

    /* An overlay replaces by kind, namespace and name, or adds. */
    json_t *overlay = parse("[" POD("wait", ",\"annotations\":{\"sim.gpusched.io/duration\":\"5s\"}") "}},"
                            POD("extra", "") "}}]");
    assert_int_equal(gs_whatif_apply(cluster, workload, NULL, 0, overlay, &d), 0);
    assert_string_equal(ann(by_name(workload, "wait"), GS_ANN_SIM_DURATION), "5s");
    assert_int_equal(json_array_size(workload), 3);

    /* Changes naming what is not there */
    assert_int_equal(gs_whatif_change_parse("set-quota", "nope:cpu=1", &c[0], &why), 0);
    assert_int_equal(gs_whatif_apply(cluster, workload, c, 1, NULL, &d), GS_EINVAL);
    assert_int_equal(gs_whatif_change_parse("set-quota", "cq:cpu=1", &c[0], &why), 0);
    assert_int_equal(gs_whatif_apply(cluster, workload, c, 1, NULL, &d), GS_EINVAL);
    assert_int_equal(gs_whatif_change_parse("add-nodes", "1:n9", &c[0], &why), 0);
    assert_int_equal(gs_whatif_apply(cluster, workload, c, 1, NULL, &d), GS_EINVAL);
    assert_int_equal(d.n, 3);
    assert_string_equal(d.v[0].path, "--set-quota");
    assert_string_equal(d.v[0].msg, "no ClusterQueue or Queue \"nope\" in the snapshot");
    assert_string_equal(d.v[1].msg, "ClusterQueue \"cq\" has no quota of cpu in any flavor");
    assert_string_equal(d.v[2].msg, "no node \"n9\" in the snapshot to copy");
    gs_diags_free(&d);
    json_decref(overlay);
    json_decref(cluster);
    json_decref(workload);
    json_decref(objs);
}

static void test_change_syntax(void **state)
{
    (void)state;
    static const struct {
        const char *flag, *value, *why;
    } bad[] = {
        {"add-nodes", "n1", "want N:TEMPLATE_NODE"},       {"add-nodes", "0:n1", "from 1 to 10000"},
        {"add-nodes", "3:", "want N:TEMPLATE_NODE"},       {"remove-node", "", "want a node name"},
        {"set-quota", "cq", "want QUEUE:RESOURCE=QUANTITY"}, {"set-quota", "cq:gpu=", "want QUEUE:RESOURCE"},
        {"set-quota", "cq:gpu=lots", ""},                  {"set-weight", "q", "want QUEUE=WEIGHT"},
        {"set-weight", "q=0", "> 0"},                      {"shrink", "x", "not a what-if change"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gs_whatif_change c;
        const char *why = NULL;
        assert_int_equal(gs_whatif_change_parse(bad[i].flag, bad[i].value, &c, &why), GS_EINVAL);
        assert_non_null(why);
        if (!strstr(why, bad[i].why)) fail_msg("%s %s: %s", bad[i].flag, bad[i].value, why);
    }
    struct gs_whatif_change c;
    const char *why;
    assert_int_equal(gs_whatif_change_parse("add-nodes", "12:gpu:a", &c, &why), GS_EINVAL);
    assert_int_equal(gs_whatif_change_parse("add-nodes", "12:gpu-a", &c, &why), 0);
    assert_int_equal(c.count, 12);
    assert_string_equal(c.name, "gpu-a");
    assert_int_equal(gs_whatif_change_parse("set-quota", "team:nvidia.com/gpu=16", &c, &why), 0);
    assert_string_equal(c.name, "team");
    assert_string_equal(c.resource, "nvidia.com/gpu");
    assert_string_equal(c.value, "16");
}

static void test_rfc3339(void **state)
{
    (void)state;
    double t;
    assert_int_equal(gs_rfc3339_seconds("2026-01-01T00:00:00Z", &t), 0);
    assert_true(t == NOW);
    assert_int_equal(gs_rfc3339_seconds("2026-01-01T01:00:00.5+01:00", &t), 0);
    assert_true(t == NOW + 0.5);
    static const char *const bad[] = {"", "2026-01-01", "2026-01-01T00:00:00", "2026-13-01T00:00:00Z",
                                      "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00Zx", "1969-01-01T00:00:00Z"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_int_equal(gs_rfc3339_seconds(bad[i], &t), GS_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build),
        cmocka_unit_test(test_changes),
        cmocka_unit_test(test_change_syntax),
        cmocka_unit_test(test_rfc3339),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
