/*
 * test_trace_manifest.c - the manifest scenario loader (sim/trace_manifest.c):
 * every kind the server accepts is kept as an object, durations in seconds or
 * as Go durations, pods running at the start (node, devices, start time), the
 * GPU stack walk of a ClusterPolicy as node_ready_at, and the error message
 * of each bad input (file, line, field, value, why).
 */
#include "core/object.h"
#include "sim/sim.h"
#include "sim/trace_manifest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct gs_trace_pod *pod(const struct gs_trace *t, const char *name)
{
    for (size_t i = 0; i < t->npods; i++)
        if (!strcmp(t->pods[i].pod->meta.name, name)) return &t->pods[i];
    fail_msg("no pod %s", name);
    return NULL;
}

static size_t count_kind(const struct gs_trace *t, enum gs_kind k, const char *api_prefix)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nobjects; i++)
        n += t->objects[i]->kind == k && (!api_prefix || !strncmp(t->objects[i]->api_version, api_prefix,
                                                                  strlen(api_prefix)));
    return n;
}

static void test_every_kind(void **state)
{
    (void)state;
    struct gs_trace t;
    struct gs_diags d = {0};
    int rc = gs_trace_load_manifests(GS_TEST_DATA "/sim/kinds/cluster.yaml", GS_TEST_DATA "/sim/kinds/workload.yaml",
                                     &t, &d);
    for (size_t i = 0; i < d.n; i++) print_message("diag: %s: %s\n", d.v[i].path, d.v[i].msg);
    assert_int_equal(rc, 0);
    gs_diags_free(&d);
    assert_int_equal(t.nnodes, 2);
    assert_int_equal(count_kind(&t, GS_KIND_NODERESOURCETOPOLOGY, NULL), 1);
    assert_int_equal(count_kind(&t, GS_KIND_RESOURCEFLAVOR, NULL), 1);
    assert_int_equal(count_kind(&t, GS_KIND_CLUSTERQUEUE, NULL), 1);
    assert_int_equal(count_kind(&t, GS_KIND_LOCALQUEUE, NULL), 1);
    assert_int_equal(count_kind(&t, GS_KIND_WORKLOADPRIORITYCLASS, NULL), 1);
    assert_int_equal(count_kind(&t, GS_KIND_QUEUE, "scheduling.volcano.sh"), 1);
    assert_int_equal(count_kind(&t, GS_KIND_QUEUE, "scheduling.gpusched.io"), 1);
    assert_int_equal(count_kind(&t, GS_KIND_PRIORITYCLASS, NULL), 1);
    assert_int_equal(count_kind(&t, GS_KIND_CLUSTERPOLICY, NULL), 1);
    assert_int_equal(count_kind(&t, GS_KIND_WORKLOAD, NULL), 1);
    assert_int_equal(count_kind(&t, GS_KIND_PODGROUP, "scheduling.x-k8s.io"), 1);
    assert_int_equal(count_kind(&t, GS_KIND_PODGROUP, "scheduling.volcano.sh"), 1);
    assert_int_equal(count_kind(&t, GS_KIND_PODGROUP, "scheduling.k8s.io"), 1);
    assert_int_equal(t.nobjects, 13);

    assert_int_equal(t.npods, 4);
    const struct gs_trace_pod *p = pod(&t, "go-durations");
    assert_true(p->arrival == 90 && p->duration == 5400 && !p->node);
    p = pod(&t, "seconds");
    assert_true(p->arrival == 2.5 && p->duration == 0.5);
    p = pod(&t, "running-a"); /* devices by uuid, 10 minutes into a 1 h run */
    assert_string_equal(p->node, "n1");
    assert_int_equal(p->gpus, 0x2);
    assert_int_equal(p->milli, 1000);
    assert_true(p->started == -600 && p->duration == 3600);
    p = pod(&t, "running-b"); /* no devices given: the lowest GPU with room */
    assert_string_equal(p->node, "n1");
    assert_int_equal(p->gpus, 0x1);
    assert_int_equal(p->milli, 500);
    assert_true(p->started == 0 && p->duration == -1);

    /* n1 walks driver (3m), toolkit (20s), device-plugin (1m30s) and
     * monitoring (the default); MIG manager off; n2 already reports ready. */
    assert_non_null(t.node_ready_at);
    assert_true(fabs(t.node_ready_at[0] - (180 + 20 + 90 + GS_SIM_STEP_DEFAULT)) < 1e-9);
    assert_true(t.node_ready_at[1] == 0);
    gs_trace_free(&t);
}

static void test_no_policy_no_ready_times(void **state)
{
    (void)state;
    struct gs_trace t;
    struct gs_diags d = {0};
    assert_int_equal(gs_trace_load_manifests(GS_TEST_DATA "/sim/cluster.yaml", GS_TEST_DATA "/sim/workload.yaml", &t,
                                             &d),
                     0);
    assert_null(t.node_ready_at);
    assert_null(t.pods[0].node);
    gs_trace_free(&t);
}

static void test_duration_parse(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        double want;
    } ok[] = {{"0", 0},     {"90", 90},     {"1.5", 1.5},  {"30s", 30},     {"1m30s", 90},
              {"2h", 7200}, {"1.5h", 5400}, {"500ms", 0.5}, {"1h2m3s", 3723}, {"0s", 0}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        double v = -1;
        const char *why = NULL;
        assert_int_equal(gs_sim_duration_parse(ok[i].in, &v, &why), 0);
        assert_true(fabs(v - ok[i].want) < 1e-9);
    }
    static const struct {
        const char *in, *why;
    } bad[] = {{"", "empty"},   {"-3", ">= 0"}, {"-1m", ">= 0"}, {"soon", ""},  {"1e999", "out of range"},
               {"nan", ""},     {"inf", ""},    {"5 s", ""},     {"10x", ""},   {"1m30", ""}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double v = 0;
        const char *why = NULL;
        assert_int_equal(gs_sim_duration_parse(bad[i].in, &v, &why), GS_EINVAL);
        assert_non_null(why);
        assert_true(*why);
        if (*bad[i].why && !strstr(why, bad[i].why)) fail_msg("%s: %s", bad[i].in, why);
    }
}

static char *write_tmp(const char *text)
{
    char tmpl[] = "/tmp/gs_test_manifest_XXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return strdup(tmpl);
}

static bool diag_has(const struct gs_diags *d, const char *path_part, const char *msg_part)
{
    for (size_t i = 0; i < d->n; i++)
        if (strstr(d->v[i].path, path_part) && strstr(d->v[i].msg, msg_part)) return true;
    for (size_t i = 0; i < d->n; i++) print_message("have: %s: %s\n", d->v[i].path, d->v[i].msg);
    return false;
}

#define NODE_N1 "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n" \
                "status:\n  allocatable: {cpu: '8', memory: 8Gi, nvidia.com/gpu: '2'}\n" \
                "  devices:\n  - {index: 0, uuid: GPU-x0}\n  - {index: 1, uuid: GPU-x1}\n"
#define POD(name, extra) "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: " name "\n" extra \
                         "spec:\n  containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]\n"

static void test_errors(void **state)
{
    (void)state;
    char *nodes = write_tmp(NODE_N1 "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\n"
                                    "metadata: {name: cq}\nspec: {resourceGroups: 3}\n"
                                    "---\napiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n"
                                    "  name: p\n  annotations: {sim.gpusched.io/step-durations: 'driver=soon,cook=1s'}\n");
    char *pods = write_tmp(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n9}\n"
        POD("dur", "  annotations: {sim.gpusched.io/duration: 10parsecs}\n")
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: nowhere}\nspec:\n  nodeName: n7\n"
        "  containers: [{name: c, image: i}]\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: baddev\n  annotations: {gpusched.io/devices: GPU-zz}\n"
        "spec:\n  nodeName: n1\n  containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: arrives\n  annotations: {sim.gpusched.io/arrival: '5'}\n"
        "spec:\n  nodeName: n1\n  containers: [{name: c, image: i}]\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: short\n  annotations:\n"
        "    sim.gpusched.io/running-for: 1h\n    sim.gpusched.io/duration: 30m\n"
        "spec:\n  nodeName: n1\n  containers: [{name: c, image: i}]\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: enum}\nspec:\n  restartPolicy: Sometimes\n"
        "  containers: [{name: c, image: i}]\n");
    struct gs_trace t;
    struct gs_diags d = {0};
    assert_int_equal(gs_trace_load_manifests(nodes, pods, &t, &d), GS_EINVAL);
    assert_true(diag_has(&d, ":1: kind", "nodes go in the cluster file"));
    assert_true(diag_has(&d, ": metadata.annotations[\"sim.gpusched.io/duration\"]", "\"10parsecs\" is not a duration"));
    assert_true(diag_has(&d, ": spec.nodeName", "node \"n7\" is not in the cluster file"));
    assert_true(diag_has(&d, ": metadata.annotations[\"gpusched.io/devices\"]", "\"GPU-zz\" names a GPU node \"n1\""));
    assert_true(diag_has(&d, ": metadata.annotations[\"sim.gpusched.io/arrival\"]", "running at the start"));
    assert_true(diag_has(&d, ": metadata.annotations[\"sim.gpusched.io/duration\"]", "already run"));
    assert_true(diag_has(&d, ": spec.restartPolicy", "Unsupported value: \"Sometimes\""));
    assert_true(diag_has(&d, ": spec.resourceGroups", "")); /* the server's ClusterQueue decoder */
    assert_true(diag_has(&d, "step-durations\"]", "driver=\"soon\""));
    assert_true(diag_has(&d, "step-durations\"]", "\"cook\": each item is STEP=DURATION"));
    assert_int_equal(t.nnodes, 0);
    gs_diags_free(&d);
    unlink(nodes);
    unlink(pods);
    free(nodes);
    free(pods);
}

static void test_gpus_held_twice(void **state)
{
    (void)state;
    char *nodes = write_tmp(NODE_N1);
    char *pods = write_tmp("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  annotations: {gpusched.io/devices: GPU-x0}\n"
                           "spec:\n  nodeName: n1\n  containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]\n"
                           "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n  annotations: {gpusched.io/devices: '0'}\n"
                           "spec:\n  nodeName: n1\n  containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]\n"
                           "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: c\n"
                           "spec:\n  nodeName: n1\n  containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 2}}}]\n");
    struct gs_trace t;
    struct gs_diags d = {0};
    assert_int_equal(gs_trace_load_manifests(nodes, pods, &t, &d), GS_EINVAL);
    assert_true(diag_has(&d, ":9: metadata.annotations[\"gpusched.io/devices\"]", "GPU 0 of node \"n1\" is already held"));
    assert_true(diag_has(&d, ":18: metadata.annotations[\"gpusched.io/devices\"]", "has no 2 GPUs left"));
    gs_diags_free(&d);
    unlink(nodes);
    unlink(pods);
    free(nodes);
    free(pods);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind),
        cmocka_unit_test(test_no_policy_no_ready_times),
        cmocka_unit_test(test_duration_parse),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_gpus_held_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
