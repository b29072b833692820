/*
 * test_queue_status.c - queue status on queue objects: the Kueue and
 * Volcano shapes, quantities, estimated starts as timestamps, writes only on
 * change and at most once per interval, conditions keeping their transition
 * time, no object re-created, and status-only changes told apart from spec
 * changes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "loops/queue_status.h"
#include "tmpdir_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEC 1000000000LL

struct env {
    char dir[64];
    struct gs_store *s;
    struct gs_source *src; /* publish's way to s */
    struct gs_qstatus q;
};

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/gs-qstatus-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    struct gs_store_opts o = {.dir = e->dir};
    assert_int_equal(gs_store_open_sqlite(&o, &e->s), 0);
    assert_int_equal(gs_source_local_new(e->s, &e->src), 0);
    gs_qstatus_init(&e->q);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gs_qstatus_free(&e->q);
    gs_source_free(e->src);
    gs_store_close(e->s);
    fx_rm_tree(e->dir);
    free(e);
    return 0;
}

/* One entry as gs_admission_queues_json() writes it. */
static json_t *entry(const char *kind, const char *name, int pending, int admitted, double gpu_usage)
{
    return json_pack("{s:s, s:s, s:{s:f, s:f, s:f}, s:{s:f}, s:{s:f}, s:{s:f}, s:{s:f},"
                     " s:f, s:f, s:i, s:i, s:i, s:i, s:[{s:s, s:i, s:f, s:f, s:s, s:b}, {s:s, s:i, s:f, s:f, s:s, s:b}]}",
                     "kind", kind, "name", name, "nominal", "nvidia.com/gpu", 8.0, "cpu", 12.5, "memory",
                     (double)(64LL << 30), "borrowed", "nvidia.com/gpu", 2.0, "lent", "nvidia.com/gpu", 0.0, "usage",
                     "nvidia.com/gpu", gpu_usage, "fairShare", "nvidia.com/gpu", 5.25, "decayedGpuHours", 3.04,
                     "weightedShare", 1.2345, "pendingWorkloads", pending, "admittedWorkloads", admitted,
                     "preemptions", 1, "evictionsCaused", 2, "pending", "workload", "team-a/job1", "position", 1,
                     "gpus", 8.0, "estimatedStart", 1060.0, "reason", "insufficient quota", "reservation", 1,
                     "workload", "team-a/job2", "position", 2, "gpus", 1.0, "estimatedStart", -1.0, "reason",
                     "behind job1", "reservation", 0);
}

static json_t *view(json_t *queues) { return json_pack("{s:f, s:o}", "time", 1000.0, "queues", queues); }

static void put(struct gs_store *s, const char *key, const char *kind, const char *api, const char *name)
{
    json_t *o = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", api, "kind", kind, "metadata", "name", name,
                          "spec", "cohort", "all");
    assert_int_equal(gs_store_create(s, key, o, NULL), 0);
    json_decref(o);
}

static json_t *status_of(struct gs_store *s, const char *key, int64_t *rv)
{
    json_t *o = NULL;
    assert_int_equal(gs_store_get(s, key, &o, rv), 0);
    json_t *st = json_incref(json_object_get(o, "status"));
    json_decref(o);
    return st;
}

static void test_cluster_queue_shape(void **state)
{
    (void)state;
    json_t *e = entry("ClusterQueue", "cq-a", 3, 2, 6.5);
    json_t *s = gs_qstatus_build(e, 1000.0, 1.7e9);
    assert_non_null(s);
    assert_int_equal(json_integer_value(json_object_get(s, "pendingWorkloads")), 3);
    assert_int_equal(json_integer_value(json_object_get(s, "admittedWorkloads")), 2);
    assert_int_equal(json_integer_value(json_object_get(s, "reservingWorkloads")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "fairSharing"), "weightedShare")), 1235);
    const json_t *cond = json_array_get(json_object_get(s, "conditions"), 0);
    assert_string_equal(json_string_value(json_object_get(cond, "type")), "Active");
    assert_null(json_object_get(cond, "lastTransitionTime"));
    const json_t *a = json_object_get(s, "admission");
    const json_t *nom = json_object_get(a, "nominal");
    assert_string_equal(json_string_value(json_object_get(nom, "nvidia.com/gpu")), "8");
    assert_string_equal(json_string_value(json_object_get(nom, "cpu")), "12500m");
    assert_string_equal(json_string_value(json_object_get(nom, "memory")), "64Gi");
    assert_string_equal(json_string_value(json_object_get(json_object_get(a, "usage"), "nvidia.com/gpu")), "6500m");
    assert_true(json_real_value(json_object_get(a, "decayedGpuHours")) > 2.99 &&
                json_real_value(json_object_get(a, "decayedGpuHours")) < 3.01);
    const json_t *p = json_object_get(a, "pending");
    assert_int_equal(json_array_size(p), 2);
    /* 60 s after the clock's now, on the wall clock. */
    assert_string_equal(json_string_value(json_object_get(json_array_get(p, 0), "estimatedStart")),
                        "2023-11-14T22:14:20Z");
    assert_true(json_is_true(json_object_get(json_array_get(p, 0), "reservation")));
    assert_null(json_object_get(json_array_get(p, 1), "estimatedStart")); /* unknown: left out, not invented */
    json_decref(s);
    json_decref(e);
}

static void test_volcano_queue_and_others(void **state)
{
    (void)state;
    json_t *e = entry("Queue", "tenant-b", 1, 4, 4.0);
    json_t *s = gs_qstatus_build(e, 1000.0, 1.7e9);
    assert_string_equal(json_string_value(json_object_get(s, "state")), "Open");
    assert_int_equal(json_integer_value(json_object_get(s, "pending")), 1);
    assert_int_equal(json_integer_value(json_object_get(s, "running")), 4);
    assert_string_equal(json_string_value(json_object_get(json_object_get(s, "allocated"), "nvidia.com/gpu")), "4");
    assert_non_null(json_object_get(s, "admission"));
    json_decref(s);
    json_decref(e);
    json_t *c = json_pack("{s:s, s:s}", "kind", "Cohort", "name", "all");
    assert_null(gs_qstatus_build(c, 0, 0));
    json_decref(c);
}

static void test_publish_writes_on_change_only(void **state)
{
    struct env *e = *state;
    const char *key = "clusterqueues.kueue.x-k8s.io/cq-a";
    put(e->s, key, "ClusterQueue", "kueue.x-k8s.io/v1beta1", "cq-a");
    json_t *v = view(json_pack("[o, o, {s:s, s:s}]", entry("ClusterQueue", "cq-a", 3, 2, 6.0),
                               entry("ClusterQueue", "no-object", 0, 0, 0.0), "kind", "Cohort", "name", "all"));
    assert_int_equal(gs_qstatus_publish(&e->q, e->src, v, 10 * SEC, false), 1);
    int64_t rv1;
    json_t *st = status_of(e->s, key, &rv1);
    assert_int_equal(json_integer_value(json_object_get(st, "pendingWorkloads")), 3);
    const char *t1 = json_string_value(
        json_object_get(json_array_get(json_object_get(st, "conditions"), 0), "lastTransitionTime"));
    assert_non_null(t1);
    char t1c[64];
    snprintf(t1c, sizeof t1c, "%s", t1);
    json_decref(st);
    /* The queue without an object was not created. */
    json_t *none = NULL;
    assert_int_equal(gs_store_get(e->s, "clusterqueues.kueue.x-k8s.io/no-object", &none, NULL), GS_ENOENT);

    /* Within the interval: nothing, even forced-free changes wait. */
    json_decref(v);
    v = view(json_pack("[o]", entry("ClusterQueue", "cq-a", 1, 4, 6.0)));
    assert_int_equal(gs_qstatus_publish(&e->q, e->src, v, 11 * SEC, false), 0);
    /* After it: written, the condition's time kept. */
    sleep(1);
    assert_int_equal(gs_qstatus_publish(&e->q, e->src, v, 13 * SEC, false), 1);
    int64_t rv2;
    st = status_of(e->s, key, &rv2);
    assert_true(rv2 > rv1);
    assert_int_equal(json_integer_value(json_object_get(st, "admittedWorkloads")), 4);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(st, "conditions"), 0),
                                                          "lastTransitionTime")),
                        t1c);
    json_decref(st);
    /* Same numbers again: no write. */
    assert_int_equal(gs_qstatus_publish(&e->q, e->src, v, 20 * SEC, true), 0);
    int64_t rv3;
    st = status_of(e->s, key, &rv3);
    assert_int_equal(rv3, rv2);
    json_decref(st);
    json_decref(v);
}

static void test_spec_equal(void **state)
{
    (void)state;
    json_t *a = json_pack("{s:s, s:{s:s, s:s}, s:{s:s}}", "kind", "ClusterQueue", "metadata", "name", "x",
                          "resourceVersion", "5", "spec", "cohort", "all");
    json_t *b = json_deep_copy(a);
    json_object_set_new(json_object_get(b, "metadata"), "resourceVersion", json_string("9"));
    json_object_set_new(b, "status", json_pack("{s:i}", "pendingWorkloads", 3));
    assert_true(gs_qstatus_spec_equal(a, b));
    json_object_set_new(json_object_get(b, "spec"), "cohort", json_string("other"));
    assert_false(gs_qstatus_spec_equal(a, b));
    assert_false(gs_qstatus_spec_equal(a, NULL));
    json_decref(a);
    json_decref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cluster_queue_shape),
        cmocka_unit_test(test_volcano_queue_and_others),
        cmocka_unit_test_setup_teardown(test_publish_writes_on_change_only, setup, teardown),
        cmocka_unit_test(test_spec_equal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
