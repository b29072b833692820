/*
 * test_gridview.c - the console's in-memory GPU grid (gridview.c) against
 * the grid built from the store.
 *
 * A seeded random sequence of Node and Pod creates, updates and deletes goes
 * into a SQLite store while the view follows it; at checkpoints the view's
 * reply bytes (cached node entries for the admin, entries encoded from the
 * records' pieces for tenants) must equal json_dumps of gs_ui_gpugrid's
 * document, byte for byte, resourceVersion included, for an admin and two
 * tenants. The same with a small change-stream ring, where a view that falls
 * behind must list again. Separately: a change drops the cached entry of
 * its node only; a tenant's answer never lands in or comes from the cache;
 * a write acknowledged just before a request is in the answer.
 */
#include "control/api_ui.h"
#include "control/auth.h"
#include "control/gridview.h"
#include "control/resources.h"
#include "control/store.h"

#include "tmpdir_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

struct env {
    char dir[64];
    struct gs_store *s;
    struct gs_gridview *v;
};

static int open_env(void **state, size_t ring)
{
    struct env *e = calloc(1, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/gs-gridview-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    struct gs_store_opts o = {.dir = e->dir, .ring_events = ring};
    assert_int_equal(gs_store_open_sqlite(&o, &e->s), 0);
    assert_int_equal(gs_gridview_new(e->s, &e->v), 0);
    *state = e;
    return 0;
}

static int setup_small_ring(void **state) { return open_env(state, 16); }
static int setup(void **state) { return open_env(state, 0); }

static int teardown(void **state)
{
    struct env *e = *state;
    gs_gridview_free(e->v);
    gs_store_close(e->s);
    fx_rm_tree(e->dir);
    free(e);
    return 0;
}

static char *key_of(const char *plural, const char *ns, const char *name, char *buf, size_t len)
{
    const struct gs_api_resource *r = gs_api_resource_find("", "v1", plural);
    assert_non_null(r);
    assert_true(gs_api_key(r, ns, name, buf, len) > 0);
    return buf;
}

/* Creates or replaces key with obj (stolen). */
static int64_t put(struct gs_store *s, const char *key, json_t *obj)
{
    int64_t rv = 0;
    json_t *cur = NULL;
    int err = gs_store_get(s, key, &cur, &rv) == 0 ? gs_store_update(s, key, obj, 0, &rv) : gs_store_create(s, key, obj, &rv);
    json_decref(cur);
    json_decref(obj);
    assert_int_equal(err, 0);
    return rv;
}

static void del(struct gs_store *s, const char *key)
{
    int64_t rv;
    int err = gs_store_delete(s, key, 0, NULL, &rv);
    assert_true(err == 0 || err == GS_ENOENT);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned pick(unsigned n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static json_t *random_node(const char *name)
{
    json_t *devs = json_array();
    unsigned n = pick(5);
    for (unsigned i = 0; i < n; i++) {
        char uuid[32];
        snprintf(uuid, sizeof uuid, "GPU-%s-%u", name, i);
        json_t *d = json_pack("{s:i, s:s, s:s, s:s, s:i}", "index", (int)i, "uuid", uuid, "model",
                              pick(4) ? "H100" : "A100", "health", pick(5) ? "Healthy" : "Unhealthy", "numaNode",
                              (int)(i / 2));
        if (!pick(3)) json_object_set_new(d, "nvlinkPeers", json_pack("[i]", (int)(i ^ 1)));
        if (!pick(8)) json_object_set_new(d, "holders", json_pack("[s]", "stale")); /* the grid writes its own */
        if (!pick(10)) json_object_set_new(d, "index", json_integer(0)); /* two GPUs of one index */
        json_array_append_new(devs, d);
    }
    json_t *node = json_pack("{s:s, s:s, s:{s:s, s:{}}, s:{s:b}, s:{s:[{s:s, s:s}], s:o}}", "apiVersion", "v1", "kind",
                             "Node", "metadata", "name", name, "annotations", "spec", "unschedulable", !pick(4),
                             "status", "conditions", "type", "Ready", "status", pick(3) ? "True" : "False", "devices",
                             devs);
    if (!pick(3))
        json_object_set_new(json_object_get(node, "spec"), "taints",
                            json_pack("[{s:s, s:s, s:s}]", "key", "gpu \"dirty\"", "value", "é", "effect", "NoSchedule"));
    if (!pick(3))
        json_object_set_new(json_object_get(json_object_get(node, "metadata"), "annotations"),
                            "gpusched.io/gpu-stack-state", json_string(pick(2) ? "Ready" : "MIGConfiguring"));
    return node;
}

static json_t *random_pod(const char *ns, const char *name, unsigned nodes)
{
    json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{}, s:{}}, s:{s:[{s:s, s:s, s:{s:{s:s}}}]}, s:{}}",
                            "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", ns,
                            "creationTimestamp", "2026-01-01T00:00:00Z", "labels", "annotations", "spec",
                            "containers", "name", "c", "image", "i", "resources", "limits", "nvidia.com/gpu",
                            pick(2) ? "1" : "2", "status");
    json_t *md = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec"), *st = json_object_get(pod, "status");
    if (!pick(3)) json_object_set_new(json_object_get(md, "labels"), "scheduling.x-k8s.io/pod-group", json_string("g"));
    if (!pick(3)) json_object_set_new(json_object_get(md, "labels"), "kueue.x-k8s.io/queue-name", json_string("lq"));
    unsigned kind = pick(5);
    char node[32];
    snprintf(node, sizeof node, "node-%u", pick(nodes + 1)); /* now and then a node that does not exist */
    if (kind == 0) {
        json_object_set_new(st, "phase", json_string("Pending"));
    } else if (kind == 1) {
        json_object_set_new(spec, "nodeName", json_string(node));
        json_object_set_new(st, "phase", json_string("Running"));
        json_t *devs = json_array();
        for (unsigned i = 0, n = 1 + pick(2); i < n; i++)
            json_array_append_new(devs, json_pack("{s:i, s:i}", "index", (int)pick(5), "milli", pick(2) ? 1000 : 250 * (1 + (int)pick(3))));
        json_object_set_new(st, "devices", devs);
    } else if (kind == 2) {
        char ann[96];
        snprintf(ann, sizeof ann, "GPU-%s-%u, GPU-%s-%u", node, pick(4), node, pick(4));
        json_object_set_new(spec, "nodeName", json_string(node));
        json_object_set_new(json_object_get(md, "annotations"), "gpusched.io/devices", json_string(ann));
    } else if (kind == 3) {
        json_object_set_new(spec, "nodeName", json_string(node));
        json_object_set_new(st, "phase", json_string(pick(2) ? "Succeeded" : "Failed"));
    } else {
        json_object_set_new(st, "phase", json_string("Running")); /* unbound and not pending: not listed */
    }
    return pod;
}

/* The view's reply bytes equal json_dumps of the document built fresh from the store. */
static void assert_same(struct env *e, const struct gs_principal *who, const char *when)
{
    int err;
    size_t len = 0;
    char *view = gs_gridview_text(e->v, who, 5000, &len, &err);
    if (!view) fail_msg("%s: the view answered %s", when, gs_strerror(err));
    assert_int_equal(len, strlen(view));
    json_t *store = gs_ui_gpugrid(e->s, who, &err);
    assert_non_null(store);
    char *fresh = json_dumps(store, JSON_COMPACT);
    if (strcmp(view, fresh)) {
        size_t at = 0;
        while (view[at] && view[at] == fresh[at]) at++;
        fail_msg("%s: the view differs from the store at byte %zu\nview:  %.300s\nstore: %.300s", when, at,
                 view + (at > 100 ? at - 100 : 0), fresh + (at > 100 ? at - 100 : 0));
    }
    json_t *doc = json_loadb(view, len, 0, NULL); /* and it is JSON, the same document */
    assert_non_null(doc);
    assert_true(json_equal(doc, store));
    json_decref(doc);
    free(view);
    free(fresh);
    json_decref(store);
}

static void random_sequence(void **state, unsigned steps)
{
    struct env *e = *state;
    char *tns[] = {"ns-a"}, *tns2[] = {"ns-b", "ns-\"c\""};
    struct gs_principal admin = {.user = "admin", .role = GS_ROLE_ADMIN};
    struct gs_principal tenant = {.user = "t", .role = GS_ROLE_TENANT, .namespaces = tns, .nnamespaces = 1};
    struct gs_principal tenant2 = {.user = "u", .role = GS_ROLE_TENANT, .namespaces = tns2, .nnamespaces = 2};
    const char *nss[] = {"ns-a", "ns-b", "ns-\"c\""};
    const unsigned nodes = 6;
    char key[256], name[32];
    for (unsigned i = 0; i < nodes; i++) {
        snprintf(name, sizeof name, "node-%u", i);
        put(e->s, key_of("nodes", NULL, name, key, sizeof key), random_node(name));
    }
    size_t pending_seen = 0, holders_seen = 0;
    for (unsigned step = 1; step <= steps; step++) {
        unsigned op = pick(10);
        if (op < 1) { /* a node changes, goes or comes back */
            snprintf(name, sizeof name, "node-%u", pick(nodes));
            key_of("nodes", NULL, name, key, sizeof key);
            if (pick(4)) put(e->s, key, random_node(name));
            else del(e->s, key);
        } else {
            const char *ns = nss[pick(3)];
            snprintf(name, sizeof name, pick(10) ? "p%02u" : "q\"%02u\u00e9", pick(30)); /* now and then one to escape */
            key_of("pods", ns, name, key, sizeof key);
            if (op < 8) put(e->s, key, random_pod(ns, name, nodes));
            else del(e->s, key);
        }
        if (step % 5 == 0) { /* the admin's cached entries, checked after every few changes */
            char when[64];
            snprintf(when, sizeof when, "after step %u (admin)", step);
            assert_same(e, &admin, when);
        }
        if (step % 20 == 0 || step == steps) {
            char when[64];
            snprintf(when, sizeof when, "after step %u (tenant)", step);
            assert_same(e, &tenant, when);
            snprintf(when, sizeof when, "after step %u (second tenant)", step);
            assert_same(e, &tenant2, when);
            snprintf(when, sizeof when, "after step %u (admin after the tenants)", step);
            assert_same(e, &admin, when);
            int err;
            json_t *doc = gs_gridview_grid(e->v, &admin, 5000, &err);
            pending_seen += json_array_size(json_object_get(doc, "pending"));
            size_t i, j;
            json_t *n, *g;
            json_array_foreach(json_object_get(doc, "nodes"), i, n) json_array_foreach(json_object_get(n, "gpus"), j, g)
                holders_seen += json_array_size(json_object_get(g, "holders"));
            json_decref(doc);
        }
    }
    /* The sequence really had pending pods and holders to compare. */
    assert_true(pending_seen > 0);
    assert_true(holders_seen > 0);
    struct gs_gridview_stats st;
    gs_gridview_stats(e->v, &st);
    assert_true(st.nodes <= nodes);
    assert_true(st.rv == gs_store_current_rv(e->s));
    assert_true(st.bytes > 0);
}

static void view_equals_store_after_random_changes(void **state) { random_sequence(state, 600); }

/* A ring of 16 events: a view that falls behind lists again, and still answers the same. */
static void view_equals_store_with_a_small_ring(void **state) { random_sequence(state, 300); }

/* A write acknowledged just before the request is in the answer, every time. */
static void write_before_request_is_visible(void **state)
{
    struct env *e = *state;
    struct gs_principal admin = {.user = "admin", .role = GS_ROLE_ADMIN};
    char key[256];
    json_t *n = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:i, s:s}]}}", "apiVersion", "v1", "kind", "Node", "metadata",
                          "name", "n1", "status", "devices", "index", 0, "uuid", "GPU-0");
    put(e->s, key_of("nodes", NULL, "n1", key, sizeof key), n);
    for (int i = 0; i < 50; i++) {
        char name[32];
        snprintf(name, sizeof name, "w%02d", i);
        json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}, s:{s:[{s:i}]}}", "apiVersion", "v1", "kind", "Pod",
                                "metadata", "name", name, "namespace", "ns", "spec", "nodeName", "n1", "status",
                                "devices", "index", 0);
        int64_t rv = put(e->s, key_of("pods", "ns", name, key, sizeof key), pod);
        int err;
        json_t *doc = gs_gridview_grid(e->v, &admin, 5000, &err);
        assert_non_null(doc);
        const char *drv = json_string_value(json_object_get(json_object_get(doc, "metadata"), "resourceVersion"));
        assert_true(strtoll(drv, NULL, 10) >= rv);
        json_t *h = json_object_get(json_array_get(json_object_get(json_array_get(json_object_get(doc, "nodes"), 0), "gpus"), 0), "holders");
        assert_int_equal(json_array_size(h), (size_t)i + 1);
        char want[64];
        snprintf(want, sizeof want, "ns/%s", name);
        assert_string_equal(json_string_value(json_array_get(h, (size_t)i)), want);
        json_decref(doc);
    }
    struct gs_gridview_stats st;
    gs_gridview_stats(e->v, &st);
    assert_int_equal(st.nodes, 1);
    assert_int_equal(st.pods, 50);
}

static json_t *gpu_node(const char *name, int gpus)
{
    json_t *devs = json_array();
    for (int i = 0; i < gpus; i++) {
        char uuid[64];
        snprintf(uuid, sizeof uuid, "GPU-%s-%d", name, i);
        json_array_append_new(devs, json_pack("{s:i, s:s, s:s}", "index", i, "uuid", uuid, "health", "Healthy"));
    }
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:o}}", "apiVersion", "v1", "kind", "Node", "metadata", "name", name,
                     "status", "devices", devs);
}

static json_t *bound_pod(const char *ns, const char *name, const char *node, int gpu)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}, s:{s:s, s:[{s:i}]}}", "apiVersion", "v1", "kind", "Pod",
                     "metadata", "name", name, "namespace", ns, "spec", "nodeName", node, "status", "phase", "Running",
                     "devices", "index", gpu);
}

static size_t cached(struct env *e)
{
    struct gs_gridview_stats st;
    gs_gridview_stats(e->v, &st);
    return st.cached;
}

/* A change drops the cached entry of its own node only; a pod's move drops both nodes' entries. */
static void change_drops_only_its_nodes_entry(void **state)
{
    struct env *e = *state;
    struct gs_principal admin = {.user = "admin", .role = GS_ROLE_ADMIN};
    char key[256], name[32];
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "n%d", i);
        put(e->s, key_of("nodes", NULL, name, key, sizeof key), gpu_node(name, 2));
        put(e->s, key_of("pods", "ns", name, key, sizeof key), bound_pod("ns", name, name, 0));
    }
    assert_same(e, &admin, "filled");
    assert_int_equal(cached(e), 8);
    /* a pod holding a GPU of n3 changes */
    put(e->s, key_of("pods", "ns", "n3", key, sizeof key), bound_pod("ns", "n3", "n3", 1));
    assert_same(e, &admin, "a pod of n3 changed");
    assert_int_equal(cached(e), 8); /* n3's entry encoded again, the other seven kept */
    /* a pod without GPUs, bound to n4, changes nothing cached */
    json_t *plain = bound_pod("ns", "plain", "n4", 0);
    json_object_del(json_object_get(plain, "status"), "devices");
    put(e->s, key_of("pods", "ns", "plain", key, sizeof key), plain);
    int err;
    json_decref(gs_gridview_grid(e->v, &admin, 5000, &err)); /* caught up */
    assert_int_equal(cached(e), 8);
    /* a pod moves from n5 to n6: both entries dropped until the next request */
    put(e->s, key_of("pods", "ns", "n5", key, sizeof key), bound_pod("ns", "n5", "n6", 1));
    json_t *two = gpu_node("n7", 4); /* and a Node changes */
    put(e->s, key_of("nodes", NULL, "n7", key, sizeof key), two);
    size_t len;
    char *t = gs_gridview_text(e->v, &(struct gs_principal){.user = "t", .role = GS_ROLE_TENANT}, 5000, &len, &err);
    assert_non_null(t);
    free(t);
    assert_int_equal(cached(e), 5); /* the tenant's request read none of them into the cache */
    assert_same(e, &admin, "a pod moved, a node changed");
    assert_int_equal(cached(e), 8);
    /* a Node deleted: its entry goes; its pod's holders show again when it comes back */
    del(e->s, key_of("nodes", NULL, "n2", key, sizeof key));
    assert_same(e, &admin, "n2 deleted");
    assert_int_equal(cached(e), 7);
    put(e->s, key_of("nodes", NULL, "n2", key, sizeof key), gpu_node("n2", 2));
    assert_same(e, &admin, "n2 back");
    json_t *doc = gs_gridview_grid(e->v, &admin, 5000, &err);
    json_t *g = json_array_get(json_object_get(json_array_get(json_object_get(doc, "nodes"), 2), "gpus"), 0);
    assert_string_equal(json_string_value(json_array_get(json_object_get(g, "holders"), 0)), "ns/n2");
    json_decref(doc);
}

/* A tenant's answer holds only its namespaces' pods, before and after the admin's entries are cached, and the
 * admin's answer after a tenant's still holds everyone's. */
static void tenant_never_sees_cached_entries(void **state)
{
    struct env *e = *state;
    char *a_ns[] = {"team-a"}, *b_ns[] = {"team-b"};
    struct gs_principal admin = {.user = "admin", .role = GS_ROLE_ADMIN};
    struct gs_principal ta = {.user = "a", .role = GS_ROLE_TENANT, .namespaces = a_ns, .nnamespaces = 1};
    struct gs_principal tb = {.user = "b", .role = GS_ROLE_TENANT, .namespaces = b_ns, .nnamespaces = 1};
    char key[256];
    put(e->s, key_of("nodes", NULL, "n1", key, sizeof key), gpu_node("n1", 2));
    put(e->s, key_of("pods", "team-a", "pa", key, sizeof key), bound_pod("team-a", "pa", "n1", 0));
    put(e->s, key_of("pods", "team-b", "pb", key, sizeof key), bound_pod("team-b", "pb", "n1", 0));
    for (int round = 0; round < 2; round++) { /* round 1: the admin's entry is cached by then */
        size_t len;
        int err;
        char *t = gs_gridview_text(e->v, &ta, 5000, &len, &err);
        assert_non_null(t);
        assert_non_null(strstr(t, "\"team-a/pa\""));
        assert_null(strstr(t, "team-b"));
        free(t);
        t = gs_gridview_text(e->v, &tb, 5000, &len, &err);
        assert_non_null(strstr(t, "\"team-b/pb\""));
        assert_null(strstr(t, "team-a"));
        free(t);
        assert_same(e, &ta, "tenant a");
        assert_same(e, &tb, "tenant b");
        t = gs_gridview_text(e->v, &admin, 5000, &len, &err);
        assert_non_null(strstr(t, "\"holders\":[\"team-a/pa\",\"team-b/pb\"]"));
        free(t);
        assert_int_equal(cached(e), 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(view_equals_store_after_random_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(view_equals_store_with_a_small_ring, setup_small_ring, teardown),
        cmocka_unit_test_setup_teardown(write_before_request_is_visible, setup, teardown),
        cmocka_unit_test_setup_teardown(change_drops_only_its_nodes_entry, setup, teardown),
        cmocka_unit_test_setup_teardown(tenant_never_sees_cached_entries, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
