/*
 * test_admission_loop.c - the server's admission stage on a real store:
 * a second job waits for quota with QuotaReserved=False written once (not
 * on every cycle), is admitted when the first finishes, a pod naming an
 * unknown LocalQueue waits with reason UnknownQueue until the queue
 * appears, and a quota change rebuilds the admission while the running
 * workload keeps its reservation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/admission_loop.h"
#include "core/codec.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

struct env {
    char dir[64];
    struct gs_store *store;
    struct gs_clock clk;
    struct gs_cache *cache;
    struct gs_adm_loop *a;
    struct gs_object *pods[8];
    int npods;
    char admitted[8][64];
    int nadmitted;
    int64_t rv;
};

static void on_admitted(void *ctx, const char *key)
{
    struct env *e = ctx;
    snprintf(e->admitted[e->nadmitted++], sizeof e->admitted[0], "%s", key);
}

static void env_init(struct env *e)
{
    memset(e, 0, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/gs-admloop-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    struct gs_store_opts so = {.dir = e->dir};
    assert_int_equal(gs_store_open_sqlite(&so, &e->store), 0);
    gs_clock_init_sim(&e->clk, 0);
    e->cache = gs_cache_new(&e->clk);
    struct gs_node_spec n = {.name = "node0", .cpu_milli = 64000, .mem_bytes = 1LL << 38, .gpu_model = "H100",
                             .ngpus = 8, .gpu_mem_mib = 81920};
    assert_true(gs_cache_add_node_spec(e->cache, &n) >= 0);
    struct gs_adm_loop_opts o = {.store = e->store, .cache = e->cache, .clock = &e->clk, .ctx = e,
                                 .admitted = on_admitted};
    assert_int_equal(gs_adm_loop_new(&o, &e->a), 0);
}

static void env_free(struct env *e)
{
    gs_adm_loop_free(e->a);
    for (int i = 0; i < e->npods; i++) gs_object_free(e->pods[i]);
    gs_cache_free(e->cache);
    gs_store_close(e->store);
    nftw(e->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

static void queue_doc(struct env *e, const char *key, const char *json)
{
    json_t *doc = json_loads(json, 0, NULL);
    assert_non_null(doc);
    gs_adm_loop_queue_event(e->a, key, doc, ++e->rv);
    json_decref(doc);
}

static void queues(struct env *e, int gpus)
{
    char cq[512];
    snprintf(cq, sizeof cq,
             "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"ClusterQueue\",\"metadata\":{\"name\":\"cq\"},"
             "\"spec\":{\"resourceGroups\":[{\"coveredResources\":[\"nvidia.com/gpu\"],\"flavors\":[{\"name\":\"f\","
             "\"resources\":[{\"name\":\"nvidia.com/gpu\",\"nominalQuota\":%d}]}]}]}}", gpus);
    queue_doc(e, "resourceflavors.kueue.x-k8s.io/f",
              "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"ResourceFlavor\",\"metadata\":{\"name\":\"f\"}}");
    queue_doc(e, "clusterqueues.kueue.x-k8s.io/cq", cq);
}

static void local_queue(struct env *e)
{
    queue_doc(e, "localqueues.kueue.x-k8s.io/ns/lq",
              "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"LocalQueue\",\"metadata\":{\"name\":\"lq\","
              "\"namespace\":\"ns\"},\"spec\":{\"clusterQueue\":\"cq\"}}");
}

/* Stores a pod asking gpus GPUs in LocalQueue q and hands it to admission. */
static const struct gs_pod *pod(struct env *e, const char *name, int gpus, const char *q)
{
    json_t *doc = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}}, s:{s:[{s:s, s:{s:{s:i}}}]}}", "apiVersion", "v1",
                            "kind", "Pod", "metadata", "name", name, "namespace", "ns", "uid", name, "labels",
                            GS_LABEL_QUEUE, q, "spec", "containers", "name", "main", "resources", "limits",
                            "nvidia.com/gpu", gpus);
    char key[128];
    snprintf(key, sizeof key, "pods/ns/%s", name);
    assert_int_equal(gs_store_create(e->store, key, doc, NULL), 0);
    struct gs_diags d = {0};
    struct gs_object *o = NULL;
    assert_int_equal(gs_object_decode(doc, &o, &d), 0);
    json_decref(doc);
    gs_diags_free(&d);
    e->pods[e->npods++] = o;
    assert_true(gs_adm_loop_wants(o->u.pod));
    assert_true(gs_adm_loop_pod_add(e->a, key, o->u.pod));
    return o->u.pod;
}

/* The QuotaReserved condition stored on pod name ("" when none) and its version. */
static const char *cond(struct env *e, const char *name, char *reason, size_t len, int64_t *rv)
{
    char key[128];
    snprintf(key, sizeof key, "pods/ns/%s", name);
    json_t *doc = NULL;
    assert_int_equal(gs_store_get(e->store, key, &doc, rv), 0);
    static char status[16];
    status[0] = reason[0] = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(doc, "status"), "conditions"), i, c)
        if (!strcmp(json_string_value(json_object_get(c, "type")), "QuotaReserved")) {
            snprintf(status, sizeof status, "%s", json_string_value(json_object_get(c, "status")));
            const char *r = json_string_value(json_object_get(c, "reason"));
            const char *m = json_string_value(json_object_get(c, "message"));
            snprintf(reason, len, "%s: %s", r ? r : "", m ? m : "");
        }
    json_decref(doc);
    return status;
}

static void test_waits_for_quota_then_admitted(void **state)
{
    (void)state;
    struct env e;
    env_init(&e);
    queues(&e, 4);
    local_queue(&e);
    pod(&e, "a", 4, "lq");
    pod(&e, "b", 4, "lq");
    assert_int_equal(gs_adm_loop_cycle(e.a), 1);
    assert_int_equal(e.nadmitted, 1);
    assert_string_equal(e.admitted[0], "pods/ns/a");
    char why[512];
    int64_t rv1, rv2;
    assert_string_equal(cond(&e, "a", why, sizeof why, &rv1), "True");
    assert_string_equal(cond(&e, "b", why, sizeof why, &rv1), "False");
    assert_non_null(strstr(why, "Pending: "));
    assert_non_null(strstr(why, "cq"));
    assert_int_equal(gs_adm_loop_pending(e.a), 1);
    /* Nothing changed: no second write, even on the periodic retry. */
    e.clk.sim_now += 2 * GS_NS_PER_SEC;
    assert_int_equal(gs_adm_loop_cycle(e.a), 0);
    cond(&e, "b", why, sizeof why, &rv2);
    assert_int_equal(rv1, rv2);
    /* Explain: position in line. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(gs_adm_loop_explain(e.a, "pods/ns/b", f), 0);
    fclose(f);
    assert_non_null(strstr(text, "position in line: 1"));
    free(text);
    assert_int_equal(gs_adm_loop_explain(e.a, "pods/ns/a", stderr), GS_ENOENT);
    /* The first finishes: its quota goes to the second. */
    gs_adm_loop_pod_gone(e.a, "pods/ns/a");
    assert_int_equal(gs_adm_loop_cycle(e.a), 1);
    assert_string_equal(e.admitted[1], "pods/ns/b");
    assert_string_equal(cond(&e, "b", why, sizeof why, &rv1), "True");
    assert_int_equal(gs_adm_loop_pending(e.a), 0);
    env_free(&e);
}

static void test_unknown_queue_then_created(void **state)
{
    (void)state;
    struct env e;
    env_init(&e);
    queues(&e, 4);
    pod(&e, "x", 1, "lq");
    assert_int_equal(gs_adm_loop_cycle(e.a), 0);
    char why[512];
    int64_t rv;
    assert_string_equal(cond(&e, "x", why, sizeof why, &rv), "False");
    assert_non_null(strstr(why, "UnknownQueue: "));
    assert_non_null(strstr(why, "lq"));
    local_queue(&e);
    assert_int_equal(gs_adm_loop_cycle(e.a), 1);
    assert_string_equal(cond(&e, "x", why, sizeof why, &rv), "True");
    env_free(&e);
}

static void test_quota_change_keeps_running_reservation(void **state)
{
    (void)state;
    struct env e;
    env_init(&e);
    queues(&e, 4);
    local_queue(&e);
    pod(&e, "a", 4, "lq");
    assert_int_equal(gs_adm_loop_cycle(e.a), 1);
    pod(&e, "b", 4, "lq");
    pod(&e, "c", 4, "lq");
    assert_int_equal(gs_adm_loop_cycle(e.a), 0);
    /* 8 GPUs now: a keeps its 4 after the rebuild, so only b fits (not a second admission of a). */
    queues(&e, 8);
    assert_int_equal(gs_adm_loop_cycle(e.a), 1);
    assert_int_equal(e.nadmitted, 2);
    assert_string_equal(e.admitted[1], "pods/ns/b");
    char why[512];
    int64_t rv;
    assert_string_equal(cond(&e, "c", why, sizeof why, &rv), "False");
    /* A stale version of a queue object changes nothing. */
    json_t *old = json_loads("{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"ResourceFlavor\","
                             "\"metadata\":{\"name\":\"f\"}}", 0, NULL);
    gs_adm_loop_queue_event(e.a, "resourceflavors.kueue.x-k8s.io/f", old, 1);
    json_decref(old);
    assert_int_equal(gs_adm_loop_cycle(e.a), 0);
    assert_int_equal(e.nadmitted, 2);
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waits_for_quota_then_admitted),
        cmocka_unit_test(test_unknown_queue_then_created),
        cmocka_unit_test(test_quota_change_keeps_running_reservation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
