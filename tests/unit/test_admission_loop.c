/*
 * test_admission_loop.c - the server's admission stage on a real store:
 * a second job waits for quota with QuotaReserved=False written once (not
 * on every cycle), is admitted when the first finishes, a pod naming an
 * unknown LocalQueue waits with reason UnknownQueue until the queue
 * appears, and a quota change rebuilds the admission while the running
 * workload keeps its reservation. PodGroups: one workload, admitted all or
 * nothing once minMember pods exist, quota released when its pods end,
 * evicted whole by reclaim, a re-created member keeping its admission; the
 * AdmissionHold filter in the scheduler's profile, and explain's estimate.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "loops/admission_loop.h"
#include "core/codec.h"
#include "tmpdir_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct env {
    char dir[64];
    struct gs_store *store;
    struct gs_source *src; /* the loop's way to store */
    struct gs_clock clk;
    struct gs_cache *cache;
    struct gs_adm_loop *a;
    struct gs_object *pods[32];
    int npods;
    char admitted[32][64];
    int nadmitted;
    char evicted[32][64];
    int nevicted;
    int64_t rv;
};

static void on_evict(void *ctx, const char *key, const char *by)
{
    struct env *e = ctx;
    (void)by;
    snprintf(e->evicted[e->nevicted++], sizeof e->evicted[0], "%s", key);
}

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
    assert_int_equal(gs_source_local_new(e->store, &e->src), 0);
    gs_clock_init_sim(&e->clk, 0);
    e->cache = gs_cache_new(&e->clk);
    struct gs_node_spec n = {.name = "node0", .cpu_milli = 64000, .mem_bytes = 1LL << 38, .gpu_model = "H100",
                             .ngpus = 8, .gpu_mem_mib = 81920};
    assert_true(gs_cache_add_node_spec(e->cache, &n) >= 0);
    struct gs_adm_loop_opts o = {.source = e->src, .cache = e->cache, .clock = &e->clk, .ctx = e,
                                 .admitted = on_admitted, .evict = on_evict};
    assert_int_equal(gs_adm_loop_new(&o, &e->a), 0);
}

static void env_free(struct env *e)
{
    gs_adm_loop_free(e->a);
    for (int i = 0; i < e->npods; i++) gs_object_free(e->pods[i]);
    gs_cache_free(e->cache);
    gs_source_free(e->src);
    gs_store_close(e->store);
    fx_rm_tree(e->dir);
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

/* The usual start: a ClusterQueue cq of gpus GPUs and LocalQueue ns/lq pointing at it. */
static void env_with_queue(struct env *e, int gpus)
{
    env_init(e);
    queues(e, gpus);
    local_queue(e);
}

/* Stores a pod asking gpus GPUs in LocalQueue q (group: member of that
 * PodGroup; dur: seconds it says it runs, 0 none) and returns it decoded. */
static const struct gs_pod *store_pod(struct env *e, const char *name, int gpus, const char *q, const char *group,
                                      int dur)
{
    json_t *doc = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{}}, s:{s:[{s:s, s:{s:{s:i}}}]}}", "apiVersion", "v1",
                            "kind", "Pod", "metadata", "name", name, "namespace", "ns", "uid", name, "labels",
                            "spec", "containers", "name", "main", "resources", "limits", "nvidia.com/gpu", gpus);
    json_t *labels = json_object_get(json_object_get(doc, "metadata"), "labels");
    if (q) json_object_set_new(labels, GS_LABEL_QUEUE, json_string(q));
    if (group) json_object_set_new(labels, GS_LABEL_POD_GROUP, json_string(group));
    if (dur) json_object_set_new(json_object_get(doc, "spec"), "activeDeadlineSeconds", json_integer(dur));
    char key[128];
    snprintf(key, sizeof key, "pods/ns/%s", name);
    assert_int_equal(gs_store_create(e->store, key, doc, NULL), 0);
    struct gs_diags d = {0};
    struct gs_object *o = NULL;
    assert_int_equal(gs_object_decode(doc, &o, &d), 0);
    json_decref(doc);
    gs_diags_free(&d);
    e->pods[e->npods++] = o;
    return o->u.pod;
}

/* ... and hands it to admission, which holds it. The decoded pod is freed
 * at once: admission keeps a copy of its own. */
static void gpod(struct env *e, const char *name, int gpus, const char *q, const char *group, int dur)
{
    const struct gs_pod *p = store_pod(e, name, gpus, q, group, dur);
    char key[128];
    snprintf(key, sizeof key, "pods/ns/%s", name);
    assert_true(gs_adm_loop_wants(p));
    assert_true(gs_adm_loop_claims(e->a, p));
    assert_true(gs_adm_loop_pod_add(e->a, key, p));
    gs_object_free(e->pods[--e->npods]);
}

static void pod(struct env *e, const char *name, int gpus, const char *q) { gpod(e, name, gpus, q, NULL, 0); }

/* Condition type on the object at key: its status ("" when none), "reason: message" in why, the object's version in rv
 * (NULL: not wanted). */
static const char *cond_rv(struct env *e, const char *key, const char *type, char *why, size_t len, int64_t *rv)
{
    json_t *doc = NULL;
    assert_int_equal(gs_store_get(e->store, key, &doc, rv), 0);
    static char status[16];
    status[0] = why[0] = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(doc, "status"), "conditions"), i, c)
        if (!strcmp(json_string_value(json_object_get(c, "type")), type)) {
            snprintf(status, sizeof status, "%s", json_string_value(json_object_get(c, "status")));
            const char *r = json_string_value(json_object_get(c, "reason"));
            const char *m = json_string_value(json_object_get(c, "message"));
            snprintf(why, len, "%s: %s", r ? r : "", m ? m : "");
        }
    json_decref(doc);
    return status;
}

/* The QuotaReserved condition stored on pod name ("" when none) and its version. */
static const char *cond(struct env *e, const char *name, char *reason, size_t len, int64_t *rv)
{
    char key[128];
    snprintf(key, sizeof key, "pods/ns/%s", name);
    return cond_rv(e, key, "QuotaReserved", reason, len, rv);
}

static void test_waits_for_quota_then_admitted(void **state)
{
    (void)state;
    struct env e;
    env_with_queue(&e, 4);
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
    env_with_queue(&e, 4);
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


/* Stores a PodGroup and tells admission about it (labels: JSON object text or NULL). */
static void podgroup(struct env *e, const char *name, int min, const char *labels)
{
    json_t *doc = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:{s:i}}", "apiVersion", "scheduling.x-k8s.io/v1alpha1",
                            "kind", "PodGroup", "metadata", "name", name, "namespace", "ns", "uid", name, "spec",
                            "minMember", min);
    if (labels) json_object_set_new(json_object_get(doc, "metadata"), "labels", json_loads(labels, 0, NULL));
    char key[160];
    snprintf(key, sizeof key, "podgroups.scheduling.x-k8s.io/ns/%s", name);
    assert_int_equal(gs_store_create(e->store, key, doc, NULL), 0);
    struct gs_diags d = {0};
    struct gs_object *o = NULL;
    assert_int_equal(gs_object_decode(doc, &o, &d), 0);
    gs_adm_loop_group_event(e->a, key, o->u.podgroup);
    gs_object_free(o);
    gs_diags_free(&d);
    json_decref(doc);
}

static const char *cond_at(struct env *e, const char *key, const char *type, char *why, size_t len)
{
    return cond_rv(e, key, type, why, len, NULL);
}

/* The object stored at key, decoded (as the scheduler loop holds it). */
static struct gs_object *stored(struct env *e, const char *key)
{
    json_t *doc = NULL;
    assert_int_equal(gs_store_get(e->store, key, &doc, NULL), 0);
    struct gs_diags d = {0};
    struct gs_object *o = NULL;
    assert_int_equal(gs_object_decode(doc, &o, &d), 0);
    json_decref(doc);
    gs_diags_free(&d);
    return o;
}

static char *explain(struct env *e, const char *key)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(gs_adm_loop_explain(e->a, key, f), 0);
    fclose(f);
    return text;
}

static void group_pods(struct env *e, const char *group, int from, int to, int gpus)
{
    for (int i = from; i < to; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s-%d", group, i);
        gpod(e, name, gpus, "lq", group, 0);
    }
}

static void test_group_all_or_nothing_and_quota_release(void **state)
{
    (void)state;
    struct env e;
    env_with_queue(&e, 8);
    podgroup(&e, "g1", 4, NULL);
    group_pods(&e, "g1", 0, 3, 2);
    /* 3 of minMember 4: not submitted, though quota and GPUs are free. */
    assert_int_equal(gs_adm_loop_cycle(e.a), 0);
    assert_int_equal(e.nadmitted, 0);
    char why[512];
    assert_string_equal(cond_at(&e, "pods/ns/g1-0", "QuotaReserved", why, sizeof why), "False");
    assert_string_equal(why, "WaitingForPods: PodGroup ns/g1 has 3 of minMember 4 pods");
    assert_string_equal(cond_at(&e, "podgroups.scheduling.x-k8s.io/ns/g1", "Admitted", why, sizeof why), "False");
    assert_non_null(strstr(why, "WaitingForPods"));
    /* The 4th: the whole group in one admission, every pod queued. */
    group_pods(&e, "g1", 3, 4, 2);
    assert_int_equal(gs_adm_loop_cycle(e.a), 1);
    assert_int_equal(e.nadmitted, 4);
    for (int i = 0; i < 4; i++) {
        char key[64];
        snprintf(key, sizeof key, "pods/ns/g1-%d", i);
        assert_string_equal(cond_at(&e, key, "QuotaReserved", why, sizeof why), "True");
    }
    assert_string_equal(cond_at(&e, "podgroups.scheduling.x-k8s.io/ns/g1", "Admitted", why, sizeof why), "True");
    assert_string_equal(why, "Admitted: quota reserved in cq for 4 pods");
    /* A second such group: its 8 GPUs wait for the first's. */
    podgroup(&e, "g2", 4, NULL);
    group_pods(&e, "g2", 0, 4, 2);
    assert_int_equal(gs_adm_loop_cycle(e.a), 0);
    assert_string_equal(cond_at(&e, "pods/ns/g2-2", "QuotaReserved", why, sizeof why), "False");
    assert_non_null(strstr(why, "waiting for quota in ClusterQueue cq: nvidia.com/gpu 8 > 0 available"));
    char *text = explain(&e, "pods/ns/g2-1");
    assert_non_null(strstr(text, "position in line: 1"));
    assert_non_null(strstr(text, "PodGroup: ns/g2, 4 pods (minMember 4)"));
    assert_non_null(strstr(text, "estimated start: unknown: 1 running workload has no known end"));
    free(text);
    /* A member re-created under its name keeps the group's admission: queued at once. */
    gs_adm_loop_pod_gone(e.a, "pods/ns/g1-1");
    struct gs_object *again = stored(&e, "pods/ns/g1-1");
    assert_false(gs_adm_loop_pod_add(e.a, "pods/ns/g1-1", again->u.pod));
    gs_object_free(again);
    /* One member ends: its share comes back, not enough for g2 (8). */
    gs_adm_loop_pod_gone(e.a, "pods/ns/g1-0");
    assert_int_equal(gs_adm_loop_cycle(e.a), 0);
    assert_int_equal(gs_adm_loop_pending(e.a), 1);
    /* The rest ends: g2 is admitted whole. */
    for (int i = 1; i < 4; i++) {
        char key[64];
        snprintf(key, sizeof key, "pods/ns/g1-%d", i);
        gs_adm_loop_pod_gone(e.a, key);
    }
    assert_int_equal(gs_adm_loop_cycle(e.a), 1);
    assert_int_equal(e.nadmitted, 8);
    for (int i = 4; i < 8; i++) assert_non_null(strstr(e.admitted[i], "pods/ns/g2-"));
    assert_int_equal(gs_adm_loop_pending(e.a), 0);
    assert_int_equal(e.nevicted, 0);
    env_free(&e);
}

static void test_group_queue_from_podgroup(void **state)
{
    (void)state;
    struct env e;
    env_with_queue(&e, 8);
    const struct gs_pod *p = store_pod(&e, "u-0", 1, NULL, "u", 0);
    assert_false(gs_adm_loop_claims(e.a, p)); /* no label, group unknown */
    podgroup(&e, "u", 1, "{\"" GS_LABEL_QUEUE "\": \"lq\"}");
    assert_true(gs_adm_loop_claims(e.a, p));
    assert_true(gs_adm_loop_pod_add(e.a, "pods/ns/u-0", p));
    assert_int_equal(gs_adm_loop_cycle(e.a), 1);
    assert_string_equal(e.admitted[0], "pods/ns/u-0");
    env_free(&e);
}

static void test_group_deleted_while_pending(void **state)
{
    (void)state;
    struct env e;
    env_with_queue(&e, 4);
    queues(&e, 0); /* no quota yet: the group waits in line */
    podgroup(&e, "gd", 2, NULL);
    group_pods(&e, "gd", 0, 2, 1);
    assert_int_equal(gs_adm_loop_cycle(e.a), 0);
    char why[512];
    assert_string_equal(cond_at(&e, "pods/ns/gd-0", "QuotaReserved", why, sizeof why), "False");
    assert_non_null(strstr(why, "Pending: "));
    /* The PodGroup goes: withdrawn, its pods say why. */
    gs_adm_loop_group_event(e.a, "podgroups.scheduling.x-k8s.io/ns/gd", NULL);
    queues(&e, 4);
    assert_int_equal(gs_adm_loop_cycle(e.a), 0);
    assert_string_equal(cond_at(&e, "pods/ns/gd-1", "QuotaReserved", why, sizeof why), "False");
    assert_string_equal(why, "PodGroupNotFound: PodGroup ns/gd not found (2 pods name it)");
    /* Back: admitted whole. */
    struct gs_object *o = stored(&e, "podgroups.scheduling.x-k8s.io/ns/gd");
    gs_adm_loop_group_event(e.a, "podgroups.scheduling.x-k8s.io/ns/gd", o->u.podgroup);
    gs_object_free(o);
    assert_int_equal(gs_adm_loop_cycle(e.a), 1);
    assert_int_equal(e.nadmitted, 2);
    env_free(&e);
}

static void cohort_queues(struct env *e)
{
    queue_doc(e, "resourceflavors.kueue.x-k8s.io/f",
              "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"ResourceFlavor\",\"metadata\":{\"name\":\"f\"}}");
    const char *names[] = {"a", "b"};
    for (int i = 0; i < 2; i++) {
        char key[128], doc[1024];
        snprintf(key, sizeof key, "clusterqueues.kueue.x-k8s.io/cq-%s", names[i]);
        snprintf(doc, sizeof doc,
                 "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"ClusterQueue\",\"metadata\":{\"name\":\"cq-%s\"},"
                 "\"spec\":{\"cohort\":\"co\",\"preemption\":{\"reclaimWithinCohort\":\"Any\"},\"resourceGroups\":[{"
                 "\"coveredResources\":[\"nvidia.com/gpu\"],\"flavors\":[{\"name\":\"f\",\"resources\":[{\"name\":"
                 "\"nvidia.com/gpu\",\"nominalQuota\":4}]}]}]}}", names[i]);
        queue_doc(e, key, doc);
        snprintf(key, sizeof key, "localqueues.kueue.x-k8s.io/ns/lq%s", names[i]);
        snprintf(doc, sizeof doc,
                 "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"LocalQueue\",\"metadata\":{\"name\":\"lq%s\","
                 "\"namespace\":\"ns\"},\"spec\":{\"clusterQueue\":\"cq-%s\"}}", names[i], names[i]);
        queue_doc(e, key, doc);
    }
}

static void test_reclaim_evicts_whole_group_and_holds(void **state)
{
    (void)state;
    struct env e;
    env_init(&e);
    cohort_queues(&e);
    gpod(&e, "pb", 4, "lqb", NULL, 0);
    podgroup(&e, "g", 2, NULL);
    gpod(&e, "g-0", 2, "lqb", "g", 0);
    gpod(&e, "g-1", 2, "lqb", "g", 0);
    assert_int_equal(gs_adm_loop_cycle(e.a), 2); /* pb, then the group borrowing cq-a's 4 */
    assert_int_equal(e.nadmitted, 3);
    gpod(&e, "ca", 4, "lqa", NULL, 0);
    assert_int_equal(gs_adm_loop_cycle(e.a), 0); /* reclaim waits: patience, minimum runtime */
    e.clk.sim_now += 11 * 60 * GS_NS_PER_SEC;
    assert_int_equal(gs_adm_loop_cycle(e.a), 1);
    /* Both members evicted, never one; pb (within cq-b's nominal) kept. */
    assert_int_equal(e.nevicted, 2);
    assert_non_null(strstr(e.evicted[0], "pods/ns/g-"));
    assert_non_null(strstr(e.evicted[1], "pods/ns/g-"));
    assert_string_not_equal(e.evicted[0], e.evicted[1]);
    assert_string_equal(e.admitted[e.nadmitted - 1], "pods/ns/ca");
    char why[512];
    assert_string_equal(cond_at(&e, "podgroups.scheduling.x-k8s.io/ns/g", "Admitted", why, sizeof why), "False");
    char *text = explain(&e, "pods/ns/g-0");
    assert_non_null(strstr(text, "evicted by reclaim of ns/ca"));
    free(text);
    /* The evicted members come back re-created: still one pending workload, held. */
    for (int i = 0; i < 2; i++) {
        char key[32];
        snprintf(key, sizeof key, "pods/ns/g-%d", i);
        struct gs_object *o = stored(&e, key);
        gs_adm_loop_pod_gone(e.a, key);
        assert_true(gs_adm_loop_pod_add(e.a, key, o->u.pod));
        gs_object_free(o);
    }
    assert_int_equal(gs_adm_loop_cycle(e.a), 0);
    assert_int_equal(gs_adm_loop_pending(e.a), 1);

    /* The scheduler's profile carries AdmissionHold: the claimant's node is kept from others. */
    struct gs_sched_config cfg;
    assert_int_equal(gs_sched_config_default(&cfg), 0);
    const struct gs_profile *p = gs_adm_loop_profile(e.a, &cfg.profiles[0]);
    assert_ptr_not_equal(p, &cfg.profiles[0]);
    int nf = p->npoints[GS_PT_FILTER];
    assert_int_equal(nf, cfg.profiles[0].npoints[GS_PT_FILTER] + 1);
    const struct gs_plugin *hold = p->points[GS_PT_FILTER][nf - 1].plugin;
    assert_string_equal(hold->name, "AdmissionHold");
    const json_t *args = NULL;
    for (int i = 0; i < p->nargs; i++)
        if (!strcmp(p->args_names[i], "AdmissionHold")) args = p->args[i];
    void *st = NULL;
    struct gs_diags d = {0};
    assert_int_equal(hold->init(NULL, args, &st, &d), 0);
    struct gs_node_info *node = gs_cache_node(e.cache, 0);
    struct gs_object *claimant = stored(&e, "pods/ns/ca"); /* the scheduler's object, not admission's copy */
    const struct gs_pod *other = store_pod(&e, "other", 1, "lqb", NULL, 0);
    uint8_t reject = 0;
    hold->filter(st, NULL, other, &node, 1, &reject);
    assert_int_equal(reject, 1);
    reject = 0;
    hold->filter(st, NULL, claimant->u.pod, &node, 1, &reject);
    assert_int_equal(reject, 0);
    char reason[128];
    assert_true(hold->reason(st, other, 1, reason, sizeof reason) > 0);
    gs_object_free(claimant);
    gs_diags_free(&d);
    gs_sched_config_free(&cfg);
    env_free(&e);
}

static void test_estimated_start_from_deadline(void **state)
{
    (void)state;
    struct env e;
    env_with_queue(&e, 4);
    gpod(&e, "a", 4, "lq", NULL, 100);
    assert_int_equal(gs_adm_loop_cycle(e.a), 1);
    gpod(&e, "b", 4, "lq", NULL, 0);
    assert_int_equal(gs_adm_loop_cycle(e.a), 0);
    char *text = explain(&e, "pods/ns/b");
    assert_non_null(strstr(text, "estimated start: in 100 s"));
    free(text);
    e.clk.sim_now += 30 * GS_NS_PER_SEC;
    text = explain(&e, "pods/ns/b");
    assert_non_null(strstr(text, "estimated start: in 70 s"));
    free(text);
    env_free(&e);
}

/* The simulator's duration annotation in Go's form counts as the run time,
 * as in seconds. */
static void test_estimated_start_from_go_duration(void **state)
{
    (void)state;
    struct env e;
    env_with_queue(&e, 4);
    const struct gs_pod *p = store_pod(&e, "a", 4, "lq", NULL, 0);
    json_t *doc = json_deep_copy(p->doc);
    json_object_set_new(json_object_get(doc, "metadata"), "annotations",
                        json_pack("{s:s}", GS_ANN_SIM_DURATION, "1m40s"));
    struct gs_diags d = {0};
    struct gs_object *o = NULL;
    assert_int_equal(gs_object_decode(doc, &o, &d), 0);
    json_decref(doc);
    gs_diags_free(&d);
    assert_true(gs_adm_loop_pod_add(e.a, "pods/ns/a", o->u.pod));
    gs_object_free(o);
    gs_object_free(e.pods[--e.npods]);
    assert_int_equal(gs_adm_loop_cycle(e.a), 1);
    gpod(&e, "b", 4, "lq", NULL, 0);
    assert_int_equal(gs_adm_loop_cycle(e.a), 0);
    char *text = explain(&e, "pods/ns/b");
    assert_non_null(strstr(text, "estimated start: in 100 s"));
    free(text);
    env_free(&e);
}

/* Kueue's label kueue.x-k8s.io/priority-class: the WorkloadPriorityClass's
 * value (v1beta2 here) orders the workloads, so the later one goes first. */
static void test_workload_priority_class(void **state)
{
    (void)state;
    struct env e;
    env_with_queue(&e, 4);
    queue_doc(&e, "workloadpriorityclasses.kueue.x-k8s.io/urgent",
              "{\"apiVersion\":\"kueue.x-k8s.io/v1beta2\",\"kind\":\"WorkloadPriorityClass\","
              "\"metadata\":{\"name\":\"urgent\"},\"value\":1000}");
    pod(&e, "a", 4, "lq");
    const struct gs_pod *b = store_pod(&e, "b", 4, "lq", NULL, 0);
    (void)b;
    /* b again, labelled with the class (store_pod has no label argument) */
    json_t *doc = NULL;
    assert_int_equal(gs_store_get(e.store, "pods/ns/b", &doc, NULL), 0);
    json_object_set_new(json_object_get(json_object_get(doc, "metadata"), "labels"), GS_LABEL_KUEUE_PRIORITY_CLASS,
                        json_string("urgent"));
    struct gs_diags d = {0};
    struct gs_object *o = NULL;
    assert_int_equal(gs_object_decode(doc, &o, &d), 0);
    json_decref(doc);
    assert_true(gs_adm_loop_pod_add(e.a, "pods/ns/b", o->u.pod));
    gs_object_free(o);
    assert_int_equal(gs_adm_loop_cycle(e.a), 1);
    assert_int_equal(e.nadmitted, 1);
    assert_string_equal(e.admitted[0], "pods/ns/b");
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waits_for_quota_then_admitted),
        cmocka_unit_test(test_workload_priority_class),
        cmocka_unit_test(test_unknown_queue_then_created),
        cmocka_unit_test(test_quota_change_keeps_running_reservation),
        cmocka_unit_test(test_group_all_or_nothing_and_quota_release),
        cmocka_unit_test(test_group_queue_from_podgroup),
        cmocka_unit_test(test_group_deleted_while_pending),
        cmocka_unit_test(test_reclaim_evicts_whole_group_and_holds),
        cmocka_unit_test(test_estimated_start_from_deadline),
        cmocka_unit_test(test_estimated_start_from_go_duration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
