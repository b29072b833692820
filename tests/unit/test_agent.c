/*
 * test_agent.c - the agent's pure parts and the server-side node lifecycle
 * it relies on: mock multi-node specs, agent endpoints from Node objects,
 * and nodes whose heartbeat stopped (NotReady, taint, pods without
 * tolerations evicted at once, re-created exactly once after the node
 * confirmed, taint lifted when the heartbeat returns), run on a real SQLite
 * store. test_nodelifecycle.c has the toleration and settling rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/agent.h"
#include "agent/fetch.h"
#include "nodelc_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void test_mock_nodes(void **state)
{
    (void)state;
    int n;
    const char *rest;
    assert_int_equal(gs_agent_mock_nodes("2x8xH100-80GB,nvlink=islands:4", &n, &rest), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rest, "8xH100-80GB,nvlink=islands:4");
    assert_int_equal(gs_agent_mock_nodes("8xH100-80GB", &n, &rest), 0);
    assert_int_equal(n, 1);
    assert_string_equal(rest, "8xH100-80GB");
    assert_int_equal(gs_agent_mock_nodes("T4", &n, &rest), 0);
    assert_int_equal(n, 1);
    assert_int_equal(gs_agent_mock_nodes("0x8xA100-40GB", &n, &rest), GS_EINVAL);
}

static void test_endpoint(void **state)
{
    (void)state;
    char buf[128];
    json_t *n = json_loads("{\"metadata\":{\"annotations\":{\"gpusched.io/agent-endpoint\":\"http://10.0.0.5:1234\"}}}",
                           0, NULL);
    gs_agent_endpoint(n, buf, sizeof buf);
    assert_string_equal(buf, "http://10.0.0.5:1234");
    json_decref(n);
    n = json_loads("{\"status\":{\"addresses\":[{\"type\":\"Hostname\",\"address\":\"h\"},{\"type\":\"InternalIP\","
                   "\"address\":\"10.1.2.3\"}],\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":10250}}}}",
                   0, NULL);
    gs_agent_endpoint(n, buf, sizeof buf);
    assert_string_equal(buf, "http://10.1.2.3:10250");
    json_decref(n);
    n = json_object();
    gs_agent_endpoint(n, buf, sizeof buf);
    assert_string_equal(buf, "");
    json_decref(n);
}

/*--- Node lifecycle on a store ---*/

static void put_pod(struct lc_fx *f, const char *name, const char *node, const char *policy, const char *phase)
{
    char key[128];
    json_t *p = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:{s:s}},s:{s:s,s:s},s:{s:s}}", "apiVersion", "v1", "kind", "Pod",
                          "metadata", "name", name, "namespace", "default", "uid", name, "annotations",
                          "gpusched.io/devices", "GPU-x", "spec", "nodeName", node, "restartPolicy", policy, "status",
                          "phase", phase);
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

static int setup(void **state) { return lc_fx_setup(state, "/tmp/gs-test-nodelc-XXXXXX"); }

static bool tainted(json_t *node)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(json_object_get(node, "spec"), "taints"), i, t)
        if (!strcmp(json_string_value(json_object_get(t, "key")), GS_TAINT_UNREACHABLE)) return true;
    return false;
}

static const char *ready_status(json_t *node)
{
    json_t *c = json_array_get(json_object_get(json_object_get(node, "status"), "conditions"), 0);
    return json_string_value(json_object_get(c, "status"));
}

static void test_lost_node(void **state)
{
    struct lc_fx *f = *state;
    lc_fx_put_node(f, "lost", f->now - 60, "True");
    lc_fx_put_node(f, "alive", f->now - 2, "True");
    put_pod(f, "never", "lost", "Never", "Running");
    put_pod(f, "again", "lost", "OnFailure", "Running");
    put_pod(f, "done", "lost", "OnFailure", "Succeeded");
    put_pod(f, "elsewhere", "alive", "Never", "Running");
    gs_nodelc_scan(f->lc, f->now);

    json_t *n = get(f, "nodes/lost");
    assert_true(tainted(n));
    assert_string_equal(ready_status(n), "Unknown");
    json_decref(n);
    n = get(f, "nodes/alive");
    assert_false(tainted(n));
    json_decref(n);

    json_t *p = get(f, "pods/default/never");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "status"), "phase")), "Failed");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "status"), "reason")), "NodeLost");
    json_decref(p);

    /* Evicted, not re-created: its processes may still run on the silent node. */
    p = get(f, "pods/default/again");
    json_t *md = json_object_get(p, "metadata");
    assert_string_equal(json_string_value(json_object_get(md, "uid")), "again");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName")), "lost");
    assert_non_null(json_object_get(json_object_get(md, "annotations"), GS_ANN_EVICTED_AT));
    assert_true(gs_nodelc_eviction_pending_json(p));
    json_decref(p);

    p = get(f, "pods/default/done");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "status"), "phase")), "Succeeded");
    assert_non_null(json_object_get(json_object_get(p, "spec"), "nodeName"));
    assert_false(gs_nodelc_eviction_pending_json(p));
    json_decref(p);
    p = get(f, "pods/default/elsewhere");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "status"), "phase")), "Running");
    json_decref(p);

    /* A second scan changes nothing: evicted once. */
    int64_t rv = gs_store_current_rv(f->store);
    gs_nodelc_scan(f->lc, f->now + 1);
    assert_int_equal(gs_store_current_rv(f->store), rv);

    /* The node confirms the processes stopped: re-created once, not twice. */
    p = get(f, "pods/default/again");
    json_t *conds = json_pack("[{s:s,s:s}]", "type", GS_COND_PROCESSES_STOPPED, "status", "True");
    json_object_set_new(json_object_get(p, "status"), "conditions", conds);
    assert_int_equal(gs_store_update(f->store, "pods/default/again", p, 0, NULL), 0);
    json_decref(p);
    gs_nodelc_scan(f->lc, f->now + 2);
    p = get(f, "pods/default/again");
    md = json_object_get(p, "metadata");
    assert_string_not_equal(json_string_value(json_object_get(md, "uid")), "again");
    assert_null(json_object_get(json_object_get(p, "spec"), "nodeName"));
    assert_null(json_object_get(json_object_get(md, "annotations"), "gpusched.io/devices"));
    assert_null(json_object_get(json_object_get(md, "annotations"), GS_ANN_EVICTED_AT));
    assert_string_equal(json_string_value(json_object_get(json_object_get(md, "annotations"), "gpusched.io/recreated-from")),
                        "again");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "status"), "phase")), "Pending");
    char *uid1 = strdup(json_string_value(json_object_get(md, "uid")));
    json_decref(p);
    gs_nodelc_scan(f->lc, f->now + 3);
    p = get(f, "pods/default/again");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "metadata"), "uid")), uid1);
    json_decref(p);
    free(uid1);

    struct gs_nodelc_stats st;
    gs_nodelc_stats(f->lc, &st);
    assert_int_equal(st.not_ready, 1);
    assert_int_equal(st.pods_evicted, 2);
    assert_int_equal(st.pods_failed, 1);
    assert_int_equal(st.pods_recreated, 1);
    assert_int_equal(st.confirmed, 1);

    /* The heartbeat comes back: the taint goes. */
    lc_fx_put_node(f, "lost", f->now + 3, "True");
    gs_nodelc_scan(f->lc, f->now + 4);
    n = get(f, "nodes/lost");
    assert_false(tainted(n));
    json_decref(n);
}

static void test_grace_counts_from_controller_start(void **state)
{
    struct lc_fx *f = *state;
    struct gs_nodelc *fresh;
    struct gs_nodelc_opts o = {.source = f->src, .grace_ms = 10000};
    assert_int_equal(gs_nodelc_new(&o, f->now, &fresh), 0);
    lc_fx_put_node(f, "old", f->now - 3600, "True");
    gs_nodelc_scan(fresh, f->now + 5); /* within grace of the controller's start */
    json_t *n = get(f, "nodes/old");
    assert_false(tainted(n));
    json_decref(n);
    gs_nodelc_scan(fresh, f->now + 11);
    n = get(f, "nodes/old");
    assert_true(tainted(n));
    json_decref(n);
    gs_nodelc_stop(fresh);
}

static void test_nodes_without_heartbeat_are_ignored(void **state)
{
    struct lc_fx *f = *state;
    json_t *n = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Node", "metadata", "name", "manual");
    assert_int_equal(gs_store_create(f->store, "nodes/manual", n, NULL), 0);
    json_decref(n);
    put_pod(f, "static", "manual", "Never", "Running");
    gs_nodelc_scan(f->lc, f->now);
    json_t *p = get(f, "pods/default/static");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "status"), "phase")), "Running");
    json_decref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mock_nodes),
        cmocka_unit_test(test_endpoint),
        cmocka_unit_test_setup_teardown(test_lost_node, setup, lc_fx_teardown),
        cmocka_unit_test_setup_teardown(test_grace_counts_from_controller_start, setup, lc_fx_teardown),
        cmocka_unit_test_setup_teardown(test_nodes_without_heartbeat_are_ignored, setup, lc_fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
