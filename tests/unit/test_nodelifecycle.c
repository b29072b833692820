/*
 * test_nodelifecycle.c - the rules of taint-based eviction on a real SQLite
 * store, stepping the controller by hand (nodelc_fixture.h): which taint a
 * node gets (unreachable when its heartbeat is stale, not-ready when its
 * agent says Ready=False), when a pod is evicted (tolerationSeconds from
 * the taint's timeAdded, Kubernetes' smallest-seconds rule, never for a
 * toleration without seconds), how an eviction settles (the node's
 * confirmation, the node-lost timeout, the Node deleted) and what is held
 * meanwhile; and the API server's side: DefaultTolerationSeconds, the
 * flag values, and the rule that a terminal phase is final.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/admit_defaults.h"
#include "control/api.h"
#include "control/resources.h"
#include "nodelc_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A Running pod on node; tolerations is a JSON array text or NULL. */
static void put_pod(struct lc_fx *f, const char *name, const char *node, const char *policy, const char *tolerations)
{
    char key[128];
    json_t *p = json_pack("{s:s,s:s,s:{s:s,s:s,s:s},s:{s:s,s:s,s:[{s:s,s:[s]}]},s:{s:s}}", "apiVersion", "v1", "kind",
                          "Pod", "metadata", "name", name, "namespace", "default", "uid", name, "spec", "nodeName",
                          node, "restartPolicy", policy, "containers", "name", "c", "command", "true", "status",
                          "phase", "Running");
    if (tolerations) json_object_set_new(json_object_get(p, "spec"), "tolerations", json_loads(tolerations, 0, NULL));
    snprintf(key, sizeof key, "pods/default/%s", name);
    assert_int_equal(gs_store_create(f->store, key, p, NULL), 0);
    json_decref(p);
}

static json_t *get(struct lc_fx *f, const char *key)
{
    json_t *o = NULL;
    assert_int_equal(gs_store_get(f->store, key, &o, NULL), 0);
    return o;
}

static bool evicted(struct lc_fx *f, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "pods/default/%s", name);
    json_t *p = get(f, key);
    bool e = json_object_get(json_object_get(json_object_get(p, "metadata"), "annotations"), GS_ANN_EVICTED_AT) != NULL;
    json_decref(p);
    return e;
}

static bool pending(struct lc_fx *f, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "pods/default/%s", name);
    json_t *p = get(f, key);
    bool e = gs_nodelc_eviction_pending_json(p);
    json_decref(p);
    return e;
}

/* The node's taints as "key:effect" joined by ",". */
static void taints(struct lc_fx *f, const char *node, char *buf, size_t len)
{
    char key[128];
    snprintf(key, sizeof key, "nodes/%s", node);
    json_t *n = get(f, key), *t;
    size_t i, used = 0;
    buf[0] = 0;
    json_array_foreach(json_object_get(json_object_get(n, "spec"), "taints"), i, t)
        used += (size_t)snprintf(buf + used, len - used, "%s%s:%s", used ? "," : "",
                                 json_string_value(json_object_get(t, "key")),
                                 json_string_value(json_object_get(t, "effect")));
    json_decref(n);
}

static int setup(void **state) { return lc_fx_setup(state, "/tmp/gs-test-nodelc2-XXXXXX"); }

/* The taint goes on at f->now (the scan), so eviction times count from there. */
static void test_toleration_seconds(void **state)
{
    struct lc_fx *f = *state;
    lc_fx_put_node(f, "n", f->now - 60, "True");
    put_pod(f, "bare", "n", "Always", NULL);
    put_pod(f, "zero", "n", "Always",
            "[{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":\"NoExecute\","
            "\"tolerationSeconds\":0}]");
    put_pod(f, "thirty", "n", "Always",
            "[{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":\"NoExecute\","
            "\"tolerationSeconds\":30}]");
    put_pod(f, "forever", "n", "Always",
            "[{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":\"NoExecute\"}]");
    put_pod(f, "everything", "n", "Always", "[{\"operator\":\"Exists\"}]");
    /* Kubernetes' rule: the smallest tolerationSeconds among the matching tolerations. */
    put_pod(f, "both", "n", "Always",
            "[{\"operator\":\"Exists\"},{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\","
            "\"tolerationSeconds\":10}]");
    put_pod(f, "other", "n", "Always",
            "[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\"}]");
    gs_nodelc_scan(f->lc, f->now);
    char t[256];
    taints(f, "n", t, sizeof t);
    assert_string_equal(t, "node.kubernetes.io/unreachable:NoSchedule,node.kubernetes.io/unreachable:NoExecute");
    assert_true(evicted(f, "bare"));
    assert_true(evicted(f, "zero"));
    assert_true(evicted(f, "other")); /* tolerates another taint only */
    assert_false(evicted(f, "thirty"));
    assert_false(evicted(f, "both"));
    gs_nodelc_scan(f->lc, f->now + 9);
    assert_false(evicted(f, "both"));
    gs_nodelc_scan(f->lc, f->now + 10);
    assert_true(evicted(f, "both"));
    gs_nodelc_scan(f->lc, f->now + 29);
    assert_false(evicted(f, "thirty"));
    gs_nodelc_scan(f->lc, f->now + 30);
    assert_true(evicted(f, "thirty"));
    gs_nodelc_scan(f->lc, f->now + 100000);
    assert_false(evicted(f, "forever"));
    assert_false(evicted(f, "everything"));
    struct gs_nodelc_stats st;
    gs_nodelc_stats(f->lc, &st);
    assert_int_equal(st.pods_evicted, 5);
}

static void test_not_ready_taint(void **state)
{
    struct lc_fx *f = *state;
    char t[256];
    lc_fx_put_node(f, "sick", f->now, "False");
    gs_nodelc_scan(f->lc, f->now + 1);
    taints(f, "sick", t, sizeof t);
    assert_string_equal(t, "node.kubernetes.io/not-ready:NoSchedule,node.kubernetes.io/not-ready:NoExecute");
    /* Silent as well: unreachable replaces not-ready. */
    gs_nodelc_scan(f->lc, f->now + 20);
    taints(f, "sick", t, sizeof t);
    assert_string_equal(t, "node.kubernetes.io/unreachable:NoSchedule,node.kubernetes.io/unreachable:NoExecute");
    /* Back and Ready: none of ours stay, an administrator's taint does. */
    json_t *n = get(f, "nodes/sick");
    json_array_append_new(json_object_get(json_object_get(n, "spec"), "taints"),
                          json_pack("{s:s,s:s}", "key", "team", "effect", "NoSchedule"));
    assert_int_equal(gs_store_update(f->store, "nodes/sick", n, 0, NULL), 0);
    json_decref(n);
    lc_fx_put_node(f, "sick", f->now + 21, "True");
    gs_nodelc_scan(f->lc, f->now + 22);
    taints(f, "sick", t, sizeof t);
    assert_string_equal(t, "team:NoSchedule");
}

static void confirm(struct lc_fx *f, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "pods/default/%s", name);
    json_t *p = get(f, key);
    json_t *conds = json_object_get(json_object_get(p, "status"), "conditions");
    json_array_append_new(conds, json_pack("{s:s,s:s}", "type", GS_COND_PROCESSES_STOPPED, "status", "True"));
    assert_int_equal(gs_store_update(f->store, key, p, 0, NULL), 0);
    json_decref(p);
}

static void test_settling(void **state)
{
    struct lc_fx *f = *state;
    lc_fx_put_node(f, "n", f->now - 60, "True");
    put_pod(f, "never", "n", "Never", NULL);
    put_pod(f, "again", "n", "OnFailure", NULL);
    put_pod(f, "waits", "n", "Never", NULL);
    gs_nodelc_scan(f->lc, f->now);
    assert_true(pending(f, "never") && pending(f, "again") && pending(f, "waits"));
    /* The Never pod is Failed but its devices still held: pending until settled. */
    json_t *p = get(f, "pods/default/never");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "status"), "phase")), "Failed");
    struct gs_labels l = {0};
    assert_int_equal(gs_labels_set(&l, GS_ANN_EVICTED_AT, "x"), 0);
    assert_true(gs_nodelc_eviction_pending(&l));
    assert_int_equal(gs_labels_set(&l, GS_ANN_DEVICES_RELEASED, "y"), 0);
    assert_false(gs_nodelc_eviction_pending(&l));
    gs_labels_free(&l);
    json_decref(p);
    /* The node confirms one of them. */
    confirm(f, "never");
    gs_nodelc_scan(f->lc, f->now + 1);
    assert_false(pending(f, "never"));
    assert_true(pending(f, "again"));
    /* Nothing is re-created before the node-lost timeout (5 minutes)... */
    gs_nodelc_scan(f->lc, f->now + 299);
    p = get(f, "pods/default/again");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "metadata"), "uid")), "again");
    json_decref(p);
    /* ...then the node is declared lost: devices released, the OnFailure pod re-created. */
    gs_nodelc_scan(f->lc, f->now + 300);
    p = get(f, "pods/default/again");
    assert_string_not_equal(json_string_value(json_object_get(json_object_get(p, "metadata"), "uid")), "again");
    assert_null(json_object_get(json_object_get(p, "spec"), "nodeName"));
    assert_false(gs_nodelc_eviction_pending_json(p));
    json_decref(p);
    p = get(f, "pods/default/waits");
    const char *how = json_string_value(
        json_object_get(json_object_get(json_object_get(p, "metadata"), "annotations"), GS_ANN_DEVICES_RELEASED));
    assert_non_null(how);
    assert_non_null(strstr(how, "node lost"));
    json_decref(p);
    struct gs_nodelc_stats st;
    gs_nodelc_stats(f->lc, &st);
    assert_int_equal(st.confirmed, 1);
    assert_int_equal(st.declared_lost, 2);
    assert_int_equal(st.pods_recreated, 1);
}

static void test_node_deleted_settles_at_once(void **state)
{
    struct lc_fx *f = *state;
    lc_fx_put_node(f, "n", f->now - 60, "True");
    put_pod(f, "again", "n", "Always", NULL);
    gs_nodelc_scan(f->lc, f->now);
    assert_true(pending(f, "again"));
    assert_int_equal(gs_store_delete(f->store, "nodes/n", 0, NULL, NULL), 0);
    gs_nodelc_scan(f->lc, f->now + 1);
    json_t *p = get(f, "pods/default/again");
    assert_string_not_equal(json_string_value(json_object_get(json_object_get(p, "metadata"), "uid")), "again");
    json_decref(p);
}

/*--- The API server's side ---*/

static size_t count_key(const json_t *tols, const char *key)
{
    size_t n = 0, i;
    json_t *t;
    json_array_foreach(tols, i, t) n += !strcmp(json_string_value(json_object_get(t, "key")) ? json_string_value(json_object_get(t, "key")) : "", key);
    return n;
}

static void test_default_tolerations(void **state)
{
    (void)state;
    struct gs_admit_defaults d;
    gs_admit_defaults_init(&d, NULL);
    assert_int_equal(d.unreachable_s, 300);
    assert_int_equal(d.not_ready_s, 300);
    d.unreachable_s = 7;
    json_t *pod = json_loads("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"spec\":{}}", 0, NULL);
    gs_admit_default_tolerations(&d, pod);
    json_t *tols = json_object_get(json_object_get(pod, "spec"), "tolerations");
    assert_int_equal(json_array_size(tols), 2);
    json_t *u = json_array_get(tols, 1);
    assert_string_equal(json_string_value(json_object_get(u, "key")), GS_TAINT_UNREACHABLE);
    assert_string_equal(json_string_value(json_object_get(u, "operator")), "Exists");
    assert_string_equal(json_string_value(json_object_get(u, "effect")), "NoExecute");
    assert_int_equal(json_integer_value(json_object_get(u, "tolerationSeconds")), 7);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(tols, 0), "tolerationSeconds")), 300);
    /* Twice: nothing more (the pod now tolerates both). */
    gs_admit_default_tolerations(&d, pod);
    assert_int_equal(json_array_size(tols), 2);
    json_decref(pod);
    /* Its own toleration (any effect) stands; an Exists-everything one covers both. */
    pod = json_loads("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"spec\":{\"tolerations\":[{\"key\":"
                     "\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\"}]}}",
                     0, NULL);
    gs_admit_default_tolerations(&d, pod);
    tols = json_object_get(json_object_get(pod, "spec"), "tolerations");
    assert_int_equal(count_key(tols, GS_TAINT_UNREACHABLE), 1);
    assert_int_equal(count_key(tols, GS_TAINT_NOT_READY), 1);
    assert_null(json_object_get(json_array_get(tols, 0), "tolerationSeconds"));
    json_decref(pod);
    pod = json_loads("{\"kind\":\"Pod\",\"spec\":{\"tolerations\":[{\"operator\":\"Exists\"}]}}", 0, NULL);
    gs_admit_default_tolerations(&d, pod);
    assert_int_equal(json_array_size(json_object_get(json_object_get(pod, "spec"), "tolerations")), 1);
    json_decref(pod);
    /* A NoSchedule toleration does not cover the NoExecute taint. */
    pod = json_loads("{\"kind\":\"Pod\",\"spec\":{\"tolerations\":[{\"key\":\"node.kubernetes.io/unreachable\","
                     "\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]}}",
                     0, NULL);
    gs_admit_default_tolerations(&d, pod);
    assert_int_equal(count_key(json_object_get(json_object_get(pod, "spec"), "tolerations"), GS_TAINT_UNREACHABLE), 2);
    json_decref(pod);
    /* Not a pod, or tolerations that validation will refuse: untouched. */
    pod = json_loads("{\"kind\":\"Node\",\"spec\":{}}", 0, NULL);
    gs_admit_default_tolerations(&d, pod);
    assert_null(json_object_get(json_object_get(pod, "spec"), "tolerations"));
    json_decref(pod);
    pod = json_loads("{\"kind\":\"Pod\",\"spec\":{\"tolerations\":\"all\"}}", 0, NULL);
    gs_admit_default_tolerations(&d, pod);
    assert_string_equal(json_string_value(json_object_get(json_object_get(pod, "spec"), "tolerations")), "all");
    json_decref(pod);
}

static void test_seconds_flags(void **state)
{
    (void)state;
    char err[256];
    int64_t v = -1;
    assert_int_equal(gs_admit_seconds_parse("default-unreachable-toleration-seconds", "0", &v, err, sizeof err), 0);
    assert_int_equal(v, 0);
    assert_int_equal(gs_admit_seconds_parse("default-unreachable-toleration-seconds", "45", &v, err, sizeof err), 0);
    assert_int_equal(v, 45);
    assert_int_equal(gs_admit_seconds_parse("default-not-ready-toleration-seconds", "5m", &v, err, sizeof err),
                     GS_EINVAL);
    assert_string_equal(err, "--default-not-ready-toleration-seconds: \"5m\" is not a whole number of seconds");
    assert_int_equal(gs_admit_seconds_parse("default-not-ready-toleration-seconds", "-3", &v, err, sizeof err),
                     GS_EINVAL);
    assert_string_equal(err, "--default-not-ready-toleration-seconds: -3 must be 0 or more seconds");
    assert_int_equal(gs_admit_seconds_parse("x", "", &v, err, sizeof err), GS_EINVAL);
    assert_int_equal(gs_admit_seconds_parse("x", " 5", &v, err, sizeof err), GS_EINVAL);
    assert_int_equal(gs_admit_seconds_parse("x", "-", &v, err, sizeof err), GS_EINVAL);
    assert_int_equal(gs_admit_seconds_parse("x", "99999999999999999999", &v, err, sizeof err), GS_EINVAL);
    assert_int_equal(v, 45);
}

static void test_terminal_phase_is_final(void **state)
{
    (void)state;
    struct gs_diags d = {0};
    json_t *failed = json_loads("{\"status\":{\"phase\":\"Failed\",\"reason\":\"NodeLost\"}}", 0, NULL);
    json_t *succeeded = json_loads("{\"status\":{\"phase\":\"Succeeded\"}}", 0, NULL);
    json_t *running = json_loads("{\"status\":{\"phase\":\"Running\"}}", 0, NULL);
    json_t *none = json_loads("{\"status\":{}}", 0, NULL);
    gs_admit_phase_check(failed, succeeded, &d);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, "status.phase");
    assert_string_equal(d.v[0].msg,
                        "Invalid value: \"Succeeded\": the pod is in the terminal phase Failed, which cannot change");
    gs_diags_free(&d);
    gs_admit_phase_check(succeeded, none, &d);
    assert_int_equal(d.n, 1);
    gs_diags_free(&d);
    gs_admit_phase_check(failed, failed, &d);
    gs_admit_phase_check(running, succeeded, &d);
    gs_admit_phase_check(running, failed, &d);
    gs_admit_phase_check(none, running, &d);
    assert_int_equal(d.n, 0);
    json_decref(failed);
    json_decref(succeeded);
    json_decref(running);
    json_decref(none);
}

/* A small change-stream ring (8 events), so the controller falls behind it. */
static int setup_small_ring(void **state)
{
    struct lc_fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/gs-test-nodelc3-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    struct gs_store_opts so = {.dir = f->dir, .ring_events = 8};
    assert_int_equal(gs_store_open_sqlite(&so, &f->store), 0);
    assert_int_equal(gs_source_local_new(f->store, &f->src), 0);
    f->now = (double)time(NULL);
    struct gs_nodelc_opts o = {.source = f->src, .grace_ms = 10000};
    assert_int_equal(gs_nodelc_new(&o, f->now - 3600, &f->lc), 0);
    *state = f;
    return 0;
}

static void put_lease(struct lc_fx *f, const char *name, double renew)
{
    char ts[32], key[160];
    lc_fx_stamp(renew, ts, sizeof ts);
    json_t *l = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s}}", "apiVersion", "coordination.k8s.io/v1", "kind",
                          "Lease", "metadata", "name", name, "namespace", GS_NODE_LEASE_NS, "spec", "holderIdentity",
                          name, "renewTime", ts);
    gs_api_key(gs_api_resource_lookup("leases"), GS_NODE_LEASE_NS, name, key, sizeof key);
    json_t *old = NULL;
    if (gs_store_get(f->store, key, &old, NULL) == 0) assert_int_equal(gs_store_update(f->store, key, l, 0, NULL), 0);
    else assert_int_equal(gs_store_create(f->store, key, l, NULL), 0);
    json_decref(old);
    json_decref(l);
}

/* The controller keeps Nodes and Leases from the change stream between
 * scans: a node changed after a scan, a lease renewed or stopped, a node
 * deleted, and (the ring being 8 events) changes it missed because it fell
 * behind the ring, which it lists again for. */
static void test_follows_the_stream(void **state)
{
    struct lc_fx *f = *state;
    char t[256];
    lc_fx_put_node(f, "a", f->now, "True");
    lc_fx_put_node(f, "c", f->now - 60, "True"); /* alive through its lease only */
    put_lease(f, "c", f->now);
    gs_nodelc_scan(f->lc, f->now);
    taints(f, "a", t, sizeof t);
    assert_string_equal(t, "");
    taints(f, "c", t, sizeof t);
    assert_string_equal(t, "");
    /* A change after the scan, seen on the stream. */
    lc_fx_put_node(f, "a", f->now, "False");
    gs_nodelc_scan(f->lc, f->now + 1);
    taints(f, "a", t, sizeof t);
    assert_string_equal(t, "node.kubernetes.io/not-ready:NoSchedule,node.kubernetes.io/not-ready:NoExecute");
    /* The lease renewed keeps c alive past its condition's stale heartbeat... */
    put_lease(f, "c", f->now + 8);
    gs_nodelc_scan(f->lc, f->now + 15);
    taints(f, "c", t, sizeof t);
    assert_string_equal(t, "");
    /* ...and its lease gone, c is unreachable. */
    char key[160];
    gs_api_key(gs_api_resource_lookup("leases"), GS_NODE_LEASE_NS, "c", key, sizeof key);
    assert_int_equal(gs_store_delete(f->store, key, 0, NULL, NULL), 0);
    gs_nodelc_scan(f->lc, f->now + 16);
    taints(f, "c", t, sizeof t);
    assert_string_equal(t, "node.kubernetes.io/unreachable:NoSchedule,node.kubernetes.io/unreachable:NoExecute");
    /* Fallen behind the ring: a is well again and b is new and silent, among
     * more writes than the ring holds. */
    lc_fx_put_node(f, "a", f->now + 16, "True");
    lc_fx_put_node(f, "b", f->now - 60, "True");
    for (int i = 0; i < 20; i++) {
        char k[64];
        snprintf(k, sizeof k, "configmaps/default/x%d", i);
        json_t *cm = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "v1", "kind", "ConfigMap", "metadata", "name",
                               k + 19, "namespace", "default");
        assert_int_equal(gs_store_create(f->store, k, cm, NULL), 0);
        json_decref(cm);
    }
    gs_nodelc_scan(f->lc, f->now + 17);
    taints(f, "a", t, sizeof t);
    assert_string_equal(t, "");
    taints(f, "b", t, sizeof t);
    assert_string_equal(t, "node.kubernetes.io/unreachable:NoSchedule,node.kubernetes.io/unreachable:NoExecute");
    /* A deleted node is gone from the controller's view: a pod bound to it
     * with an unsettled eviction settles at once as lost. */
    put_pod(f, "on-b", "b", "Always", NULL);
    gs_nodelc_scan(f->lc, f->now + 18);
    assert_true(evicted(f, "on-b"));
    assert_true(pending(f, "on-b"));
    assert_int_equal(gs_store_delete(f->store, "nodes/b", 0, NULL, NULL), 0);
    gs_nodelc_scan(f->lc, f->now + 19);
    assert_false(pending(f, "on-b"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_toleration_seconds, setup, lc_fx_teardown),
        cmocka_unit_test_setup_teardown(test_not_ready_taint, setup, lc_fx_teardown),
        cmocka_unit_test_setup_teardown(test_settling, setup, lc_fx_teardown),
        cmocka_unit_test_setup_teardown(test_node_deleted_settles_at_once, setup, lc_fx_teardown),
        cmocka_unit_test_setup_teardown(test_follows_the_stream, setup_small_ring, lc_fx_teardown),
        cmocka_unit_test(test_default_tolerations),
        cmocka_unit_test(test_seconds_flags),
        cmocka_unit_test(test_terminal_phase_is_final),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
