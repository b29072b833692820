/*
 * test_claims_controller.c - the resourceclaim controller (loops/claims.c)
 * on a real store through the in-process source: claims from templates with
 * their name, annotation, owner and spec; the pod's resourceClaimStatuses;
 * nothing created twice; a missing template waited for; reservedFor kept to
 * live consumers and the allocation cleared after the last one; the
 * finalizer following the allocation; generated claims deleted with their
 * pod; extended resources served by a DeviceClass; deterministic names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "loops/claims.h"
#include "tmpdir_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct env {
    char dir[64];
    struct gs_store *s;
    struct gs_source *src;
    struct gs_claims *c;
};

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/gs-claims-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    struct gs_store_opts o = {.dir = e->dir};
    assert_int_equal(gs_store_open_sqlite(&o, &e->s), 0);
    assert_int_equal(gs_source_local_new(e->s, &e->src), 0);
    struct gs_claims_opts co = {.source = e->src, .seed = 7};
    assert_int_equal(gs_claims_new(&co, &e->c), 0);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gs_claims_stop(e->c);
    gs_source_free(e->src);
    gs_store_close(e->s);
    fx_rm_tree(e->dir);
    free(e);
    return 0;
}

static void put(struct env *e, const char *key, const char *text)
{
    json_error_t err;
    json_t *o = json_loads(text, 0, &err);
    if (!o) fail_msg("bad fixture: %s", err.text);
    assert_int_equal(gs_store_create(e->s, key, o, NULL), 0);
    json_decref(o);
}

static json_t *get(struct env *e, const char *key)
{
    json_t *o = NULL;
    return gs_store_get(e->s, key, &o, NULL) == 0 ? o : NULL;
}

static int phase_fn(json_t *cur, json_t **out, void *arg)
{
    if (!cur) return GS_ENOENT;
    json_t *next = json_deep_copy(cur);
    json_object_set_new(next, "status", json_pack("{s:s}", "phase", (const char *)arg));
    *out = next;
    return 0;
}

static void set_phase(struct env *e, const char *key, const char *phase)
{
    assert_int_equal(gs_store_mutate(e->s, key, phase_fn, (void *)phase, NULL, NULL), 0);
}

/* A pod with one template claim entry "gpu" -> template "one-gpu". */
static const char *POD_T = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"train\",\"namespace\":\"ml\","
                           "\"uid\":\"u-train\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}],"
                           "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"one-gpu\"}]}}";
static const char *TMPL = "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaimTemplate\",\"metadata\":"
                          "{\"name\":\"one-gpu\",\"namespace\":\"ml\"},\"spec\":{\"metadata\":{\"labels\":{\"team\":\"a\"}},"
                          "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"g\",\"exactly\":{\"deviceClassName\":"
                          "\"gpu.nvidia.com\"}}]}}}}";

struct found { int n; char name[256]; json_t *last; };

static int collect(const char *key, json_t *obj, void *arg)
{
    (void)key;
    struct found *f = arg;
    f->n++;
    snprintf(f->name, sizeof f->name, "%s", json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")));
    json_decref(f->last);
    f->last = json_incref(obj);
    return 0;
}

static struct found claims_in(struct env *e, const char *ns)
{
    struct found f = {0};
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s%s/", GS_CLAIMS_PREFIX, ns);
    gs_store_list(e->s, prefix, collect, &f, NULL);
    return f;
}

static void test_claim_from_template(void **state)
{
    struct env *e = *state;
    put(e, "pods/ml/train", POD_T);
    put(e, GS_CLAIM_TEMPLATES_PREFIX "ml/one-gpu", TMPL);
    assert_int_equal(gs_claims_sync(e->c), 0);
    struct found f = claims_in(e, "ml");
    assert_int_equal(f.n, 1);
    char want[256];
    gs_claims_generated_name("train", "gpu", "u-train", 7, want, sizeof want);
    assert_string_equal(f.name, want);
    assert_int_equal(strncmp(f.name, "train-gpu-", 10), 0);
    json_t *md = json_object_get(f.last, "metadata");
    assert_string_equal(json_string_value(json_object_get(json_object_get(md, "annotations"), GS_ANN_POD_CLAIM_NAME)),
                        "gpu");
    assert_string_equal(json_string_value(json_object_get(json_object_get(md, "labels"), "team")), "a");
    json_t *own = json_array_get(json_object_get(md, "ownerReferences"), 0);
    assert_string_equal(json_string_value(json_object_get(own, "kind")), "Pod");
    assert_string_equal(json_string_value(json_object_get(own, "uid")), "u-train");
    assert_true(json_is_true(json_object_get(own, "controller")));
    assert_string_equal(json_string_value(json_object_get(f.last, "apiVersion")), "resource.k8s.io/v1");
    json_t *req = json_array_get(json_object_get(json_object_get(json_object_get(f.last, "spec"), "devices"), "requests"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(req, "exactly"), "deviceClassName")),
                        "gpu.nvidia.com");
    /* The pod names its claim. */
    json_t *pod = get(e, "pods/ml/train");
    json_t *st = json_array_get(json_object_get(json_object_get(pod, "status"), "resourceClaimStatuses"), 0);
    assert_string_equal(json_string_value(json_object_get(st, "name")), "gpu");
    assert_string_equal(json_string_value(json_object_get(st, "resourceClaimName")), want);
    json_decref(pod);
    json_decref(f.last);
    /* A second pass changes nothing. */
    assert_int_equal(gs_claims_sync(e->c), 0);
    f = claims_in(e, "ml");
    assert_int_equal(f.n, 1);
    json_decref(f.last);
    struct gs_claims_stats s;
    gs_claims_stats(e->c, &s);
    assert_int_equal(s.created, 1);
    assert_int_equal(s.pod_status, 1);
    assert_int_equal(s.errors, 0);
}

static void test_missing_template_waits(void **state)
{
    struct env *e = *state;
    put(e, "pods/ml/train", POD_T);
    assert_int_equal(gs_claims_sync(e->c), 0);
    struct found f = claims_in(e, "ml");
    assert_int_equal(f.n, 0);
    json_t *pod = get(e, "pods/ml/train");
    assert_null(json_object_get(json_object_get(pod, "status"), "resourceClaimStatuses"));
    json_decref(pod);
    put(e, GS_CLAIM_TEMPLATES_PREFIX "ml/one-gpu", TMPL);
    assert_int_equal(gs_claims_sync(e->c), 0);
    f = claims_in(e, "ml");
    assert_int_equal(f.n, 1);
    json_decref(f.last);
}

/* An allocated claim reserved for the given pod uids. */
static void put_allocated(struct env *e, const char *name, const char *owner_uid, const char *reserved_json)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"ml\",\"uid\":\"c-%s\"%s%s%s},\"spec\":{\"devices\":{\"requests\":[]}},\"status\":{"
             "\"allocation\":{\"devices\":{\"results\":[{\"request\":\"g\",\"driver\":\"gpu.nvidia.com\",\"pool\":"
             "\"n1\",\"device\":\"gpu-0\"}]}},\"reservedFor\":%s}}",
             name, name, owner_uid ? ",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"p\","
                                     "\"controller\":true,\"uid\":\"" : "",
             owner_uid ? owner_uid : "", owner_uid ? "\"}]" : "", reserved_json);
    char key[256];
    snprintf(key, sizeof key, "%sml/%s", GS_CLAIMS_PREFIX, name);
    put(e, key, text);
}

static bool has_finalizer(const json_t *o)
{
    size_t i;
    const json_t *f;
    json_array_foreach(json_object_get(json_object_get(o, "metadata"), "finalizers"), i, f)
        if (!strcmp(json_string_value(f), GS_FINALIZER_CLAIM)) return true;
    return false;
}

static void test_shared_claim_deallocated_after_last(void **state)
{
    struct env *e = *state;
    put(e, "pods/ml/a", "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ml\",\"uid\":\"u-a\"},\"spec\":{}}");
    put(e, "pods/ml/b", "{\"metadata\":{\"name\":\"b\",\"namespace\":\"ml\",\"uid\":\"u-b\"},\"spec\":{}}");
    put_allocated(e, "shared", NULL,
                  "[{\"resource\":\"pods\",\"name\":\"a\",\"uid\":\"u-a\"},{\"resource\":\"pods\",\"name\":\"b\",\"uid\":\"u-b\"}]");
    const char *key = GS_CLAIMS_PREFIX "ml/shared";
    assert_int_equal(gs_claims_sync(e->c), 0);
    json_t *cl = get(e, key);
    assert_true(has_finalizer(cl)); /* allocated: protected */
    assert_int_equal(json_array_size(json_object_get(json_object_get(cl, "status"), "reservedFor")), 2);
    json_decref(cl);
    set_phase(e, "pods/ml/a", "Succeeded");
    assert_int_equal(gs_claims_sync(e->c), 0);
    cl = get(e, key);
    json_t *rf = json_object_get(json_object_get(cl, "status"), "reservedFor");
    assert_int_equal(json_array_size(rf), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(rf, 0), "uid")), "u-b");
    assert_non_null(json_object_get(json_object_get(cl, "status"), "allocation"));
    json_decref(cl);
    /* The last consumer is deleted: deallocated, finalizer gone, the claim stays (not generated). */
    assert_int_equal(gs_store_delete(e->s, "pods/ml/b", 0, NULL, NULL), 0);
    assert_int_equal(gs_claims_sync(e->c), 0);
    cl = get(e, key);
    assert_non_null(cl);
    assert_null(json_object_get(json_object_get(cl, "status"), "allocation"));
    assert_null(json_object_get(json_object_get(cl, "status"), "reservedFor"));
    json_decref(cl);
    assert_int_equal(gs_claims_sync(e->c), 0);
    cl = get(e, key);
    assert_false(has_finalizer(cl));
    json_decref(cl);
    struct gs_claims_stats s;
    gs_claims_stats(e->c, &s);
    assert_int_equal(s.deallocated, 1);
    assert_int_equal(s.pruned, 2);
    assert_int_equal(s.deleted, 0);
}

static void test_reserved_for_new_pod_kept(void **state)
{
    struct env *e = *state;
    /* Reserved for a pod that exists and has not started: nothing changes. */
    put(e, "pods/ml/a", "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ml\",\"uid\":\"u-a\"},\"spec\":{}}");
    put_allocated(e, "c1", NULL, "[{\"resource\":\"pods\",\"name\":\"a\",\"uid\":\"u-a\"}]");
    assert_int_equal(gs_claims_sync(e->c), 0);
    json_t *cl = get(e, GS_CLAIMS_PREFIX "ml/c1");
    assert_int_equal(json_array_size(json_object_get(json_object_get(cl, "status"), "reservedFor")), 1);
    assert_non_null(json_object_get(json_object_get(cl, "status"), "allocation"));
    json_decref(cl);
}

static void test_generated_claim_deleted_with_pod(void **state)
{
    struct env *e = *state;
    put(e, "pods/ml/train", POD_T);
    put(e, GS_CLAIM_TEMPLATES_PREFIX "ml/one-gpu", TMPL);
    assert_int_equal(gs_claims_sync(e->c), 0);
    struct found f = claims_in(e, "ml");
    assert_int_equal(f.n, 1);
    json_decref(f.last);
    assert_int_equal(gs_store_delete(e->s, "pods/ml/train", 0, NULL, NULL), 0);
    assert_int_equal(gs_claims_sync(e->c), 0);
    f = claims_in(e, "ml");
    assert_int_equal(f.n, 0);
    /* An allocated orphan is deallocated first, then deleted. */
    put_allocated(e, "orphan", "u-gone", "[{\"resource\":\"pods\",\"name\":\"p\",\"uid\":\"u-gone\"}]");
    assert_int_equal(gs_claims_sync(e->c), 0);
    assert_int_equal(gs_claims_sync(e->c), 0);
    f = claims_in(e, "ml");
    assert_int_equal(f.n, 0);
    struct gs_claims_stats s;
    gs_claims_stats(e->c, &s);
    assert_int_equal(s.deleted, 2);
    assert_int_equal(s.deallocated, 1);
}

static void test_extended_resource_claim(void **state)
{
    struct env *e = *state;
    put(e, GS_DEVICECLASSES_PREFIX "gpu.nvidia.com",
        "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":{\"name\":\"gpu.nvidia.com\"},"
        "\"spec\":{\"extendedResourceName\":\"nvidia.com/gpu\"}}");
    put(e, "pods/ml/plain",
        "{\"metadata\":{\"name\":\"plain\",\"namespace\":\"ml\",\"uid\":\"u-plain\"},\"spec\":{\"containers\":[{"
        "\"name\":\"main\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\",\"cpu\":\"1\"}}}]}}");
    assert_int_equal(gs_claims_sync(e->c), 0);
    struct found f = claims_in(e, "ml");
    assert_int_equal(f.n, 1);
    assert_int_equal(strncmp(f.name, "plain-extended-resources-", 25), 0);
    json_t *req = json_array_get(json_object_get(json_object_get(json_object_get(f.last, "spec"), "devices"), "requests"), 0);
    assert_int_equal(json_integer_value(json_object_get(req, "count")), 2);
    assert_string_equal(json_string_value(json_object_get(req, "deviceClassName")), "gpu.nvidia.com");
    assert_string_equal(json_string_value(json_object_get(req, "name")), "container-0-request-0");
    json_t *pod = get(e, "pods/ml/plain");
    json_t *ext = json_object_get(json_object_get(pod, "status"), "extendedResourceClaimStatus");
    assert_string_equal(json_string_value(json_object_get(ext, "resourceClaimName")), f.name);
    json_t *m = json_array_get(json_object_get(ext, "requestMappings"), 0);
    assert_string_equal(json_string_value(json_object_get(m, "containerName")), "main");
    assert_string_equal(json_string_value(json_object_get(m, "resourceName")), "nvidia.com/gpu");
    assert_string_equal(json_string_value(json_object_get(m, "requestName")), "container-0-request-0");
    json_decref(pod);
    json_decref(f.last);
    assert_int_equal(gs_claims_sync(e->c), 0);
    f = claims_in(e, "ml");
    assert_int_equal(f.n, 1);
    json_decref(f.last);
}

/* The scheduler's claim writes (gs_dra_claim_status_fn / gs_dra_claim_undo_fn). */
static void test_claim_status_write_and_undo(void **state)
{
    (void)state;
    json_t *cur = json_pack("{s:{s:s, s:s}, s:{}}", "metadata", "name", "c", "uid", "u-c", "spec");
    json_t *alloc = json_pack("{s:{s:[{s:s, s:s, s:s, s:s}]}}", "devices", "results", "request", "g", "driver",
                              "gpu.nvidia.com", "pool", "n1", "device", "gpu-0");
    struct gs_dra_claim_write w = {.uid = "u-c", .allocation = alloc, .pod_name = "p", .pod_uid = "u-p"};
    json_t *out = NULL;
    assert_int_equal(gs_dra_claim_status_fn(cur, &out, &w), 0);
    json_t *st = json_object_get(out, "status");
    assert_true(json_equal(json_object_get(st, "allocation"), alloc));
    json_t *r = json_array_get(json_object_get(st, "reservedFor"), 0);
    assert_string_equal(json_string_value(json_object_get(r, "resource")), "pods");
    assert_string_equal(json_string_value(json_object_get(r, "name")), "p");
    assert_string_equal(json_string_value(json_object_get(r, "uid")), "u-p");
    /* Again: nothing to change. A claim with another uid, or allocated differently, is refused. */
    json_t *again = NULL;
    assert_int_equal(gs_dra_claim_status_fn(out, &again, &w), GS_STORE_UNCHANGED);
    struct gs_dra_claim_write other = w;
    other.uid = "u-other";
    assert_int_equal(gs_dra_claim_status_fn(out, &again, &other), GS_ENOENT);
    json_t *alloc2 = json_pack("{s:{s:[{s:s, s:s, s:s, s:s}]}}", "devices", "results", "request", "g", "driver",
                               "gpu.nvidia.com", "pool", "n2", "device", "gpu-1");
    struct gs_dra_claim_write w2 = {.uid = "u-c", .allocation = alloc2, .pod_name = "q", .pod_uid = "u-q"};
    assert_int_equal(gs_dra_claim_status_fn(out, &again, &w2), GS_ECONFLICT);
    /* A second consumer of the allocated claim only joins reservedFor. */
    struct gs_dra_claim_write join = {.uid = "u-c", .pod_name = "q", .pod_uid = "u-q"};
    json_t *two = NULL;
    assert_int_equal(gs_dra_claim_status_fn(out, &two, &join), 0);
    assert_int_equal(json_array_size(json_object_get(json_object_get(two, "status"), "reservedFor")), 2);
    /* Undo of the first binding: p leaves; q still holds it, so the allocation stays. */
    json_t *undone = NULL;
    assert_int_equal(gs_dra_claim_undo_fn(two, &undone, &w), 0);
    st = json_object_get(undone, "status");
    assert_int_equal(json_array_size(json_object_get(st, "reservedFor")), 1);
    assert_non_null(json_object_get(st, "allocation"));
    /* Undo of p alone on the first write: the allocation it made goes too. */
    json_t *bare = NULL;
    assert_int_equal(gs_dra_claim_undo_fn(out, &bare, &w), 0);
    assert_null(json_object_get(json_object_get(bare, "status"), "allocation"));
    assert_null(json_object_get(json_object_get(bare, "status"), "reservedFor"));
    json_t *cur_del = json_deep_copy(cur);
    json_object_set_new(json_object_get(cur_del, "metadata"), "deletionTimestamp", json_string("2026-01-01T00:00:00Z"));
    assert_int_equal(gs_dra_claim_status_fn(cur_del, &again, &w), GS_ENOENT); /* being deleted: not allocated */
    json_decref(cur_del);
    json_decref(bare);
    json_decref(undone);
    json_decref(two);
    json_decref(alloc2);
    json_decref(out);
    json_decref(alloc);
    json_decref(cur);
}

static bool never(void *ctx)
{
    (void)ctx;
    return false;
}

/* A replica that does not lead writes nothing. */
static void test_follower_writes_nothing(void **state)
{
    struct env *e = *state;
    gs_claims_stop(e->c);
    struct gs_claims_opts co = {.source = e->src, .seed = 7, .may_write = never};
    assert_int_equal(gs_claims_new(&co, &e->c), 0);
    put(e, "pods/ml/train", POD_T);
    put(e, GS_CLAIM_TEMPLATES_PREFIX "ml/one-gpu", TMPL);
    assert_int_equal(gs_claims_sync(e->c), 0);
    struct found f = claims_in(e, "ml");
    assert_int_equal(f.n, 0);
    struct gs_claims_stats s;
    gs_claims_stats(e->c, &s);
    assert_int_equal(s.passes, 0);
}

static void test_generated_names(void **state)
{
    (void)state;
    char a[256], b[256], c[256];
    gs_claims_generated_name("p", "gpu", "uid1", 1, a, sizeof a);
    gs_claims_generated_name("p", "gpu", "uid1", 1, b, sizeof b);
    gs_claims_generated_name("p", "gpu", "uid2", 1, c, sizeof c);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    assert_int_equal(strlen(a), strlen("p-gpu-") + 5);
    for (const char *s = a + 6; *s; s++) assert_non_null(strchr("bcdfghjklmnpqrstvwxz2456789", *s));
    char longp[200];
    memset(longp, 'x', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    assert_true(gs_claims_generated_name(longp, longp, "u", 1, a, sizeof a) <= 63 + 1 + 63 + 1 + 5);
}

/* An idle controller (nothing that names claims) looks at the pods without
 * keeping them, and still takes up a pod that names a claim once one comes. */
static void test_idle_then_claim(void **state)
{
    struct env *e = *state;
    put(e, "pods/ml/plain", "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"plain\","
                            "\"namespace\":\"ml\",\"uid\":\"u-plain\"},\"spec\":{\"containers\":[{\"name\":\"c\","
                            "\"image\":\"x\"}]}}");
    assert_int_equal(gs_claims_sync(e->c), 0); /* idle from the start: a look */
    assert_int_equal(gs_claims_sync(e->c), 0); /* and again */
    struct gs_claims_stats s;
    gs_claims_stats(e->c, &s);
    assert_int_equal(s.passes, 2);
    assert_int_equal(claims_in(e, "ml").n, 0);
    put(e, GS_CLAIM_TEMPLATES_PREFIX "ml/one-gpu", TMPL);
    put(e, "pods/ml/train", POD_T);
    assert_int_equal(gs_claims_sync(e->c), 0);
    struct found f = claims_in(e, "ml");
    assert_int_equal(f.n, 1);
    json_decref(f.last);
    gs_claims_stats(e->c, &s);
    assert_int_equal(s.created, 1);
    assert_int_equal(s.pod_status, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_claim_from_template, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_template_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_claim_deallocated_after_last, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reserved_for_new_pod_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_generated_claim_deleted_with_pod, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extended_resource_claim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follower_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_then_claim, setup, teardown),
        cmocka_unit_test(test_claim_status_write_and_undo),
        cmocka_unit_test(test_generated_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
