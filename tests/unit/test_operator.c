/*
 * test_operator.c - the GPU stack operator against a real store, with the
 * agent's answers written by hand and time on a simulated clock: nothing
 * governed without a policy, requests and answers, skipped components,
 * failure with backoff, the GPUStackReady condition and labels, events,
 * the scheduler gate, duplicate policies, metrics, and cleanup when the
 * policy goes; and restarts: a new operator on the same store puts each
 * node back where it was (ready stays ready with no new event, a node
 * mid-walk keeps its step and backoff), re-drives on a policy changed
 * meanwhile, and starts over, saying which field, on a corrupt saved state;
 * without a policy a pass lists the nodes again only when one changed, and
 * then still clears what an earlier policy left.
 */
#include "control/store.h"
#include "core/clock.h"
#include "core/object.h"
#include "core/log.h"
#include "govern/operator.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

struct fx {
    char dir[64];
    struct gs_store *st;
    struct gs_source *src; /* the operator's way to st */
    struct gs_clock clk;
    struct gs_operator *op;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/gs-operator-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    struct gs_store_opts so = {.dir = f->dir};
    if (gs_store_open_sqlite(&so, &f->st) || gs_source_local_new(f->st, &f->src)) return -1;
    gs_clock_init_sim(&f->clk, 1000 * GS_NS_PER_SEC);
    struct gs_operator_opts oo = {.source = f->src, .clock = &f->clk, .wall = &f->clk};
    if (gs_operator_new(&oo, &f->op)) return -1;
    json_t *node = json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{},s:{s:[{s:s,s:s}],s:{s:s,s:s,s:s},s:[{s:i,s:s,s:s,s:I}]}}",
                             "apiVersion", "v1", "kind", "Node", "metadata", "name", "n1", "labels", "zone", "a",
                             "spec", "status", "conditions", "type", "Ready", "status", "True", "allocatable", "cpu",
                             "8", "memory", "8Gi", "nvidia.com/gpu", "1", "devices", "index", 0, "uuid", "GPU-1",
                             "model", "NVIDIA-A100", "memoryMiB", (json_int_t)40960);
    int err = gs_store_create(f->st, "nodes/n1", node, NULL);
    json_decref(node);
    *state = f;
    return err;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    gs_operator_stop(f->op);
    gs_source_free(f->src);
    gs_store_close(f->st);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    if (system(cmd)) return -1;
    free(f);
    return 0;
}

static json_t *get(struct fx *f, const char *key)
{
    json_t *o = NULL;
    assert_int_equal(gs_store_get(f->st, key, &o, NULL), 0);
    return o;
}

static const json_t *cond(const json_t *node)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), i, c)
        if (!strcmp(json_string_value(json_object_get(c, "type")), GS_COND_GPU_STACK)) return c;
    return NULL;
}

static const char *label(const json_t *node, const char *k)
{
    return json_string_value(json_object_get(json_object_get(json_object_get(node, "metadata"), "labels"), k));
}

static json_t *request(struct fx *f)
{
    json_t *n = get(f, "nodes/n1");
    const char *t = json_string_value(
        json_object_get(json_object_get(json_object_get(n, "metadata"), "annotations"), GS_ANN_STACK_REQUEST));
    json_t *r = t ? json_loads(t, 0, NULL) : NULL;
    json_decref(n);
    return r;
}

static int answer_fn(json_t *cur, json_t **out, void *arg)
{
    json_t *n = json_deep_copy(cur);
    json_object_set(json_object_get(n, "status"), "gpuStack", arg);
    *out = n;
    return 0;
}

/* Answers the pending request like an agent would. */
static void answer(struct fx *f, bool ok, const char *msg)
{
    json_t *r = request(f);
    assert_non_null(r);
    json_t *a = json_pack("{s:O,s:O,s:O,s:b,s:s}", "generation", json_object_get(r, "generation"), "step",
                          json_object_get(r, "step"), "attempt", json_object_get(r, "attempt"), "ok", ok, "message", msg);
    json_t *out = NULL;
    assert_int_equal(gs_store_mutate(f->st, "nodes/n1", answer_fn, a, &out, NULL), 0);
    json_decref(out);
    json_decref(a);
    json_decref(r);
}

static void put_policy(struct fx *f, const char *name, const char *ts, json_t *spec)
{
    char key[128];
    snprintf(key, sizeof key, "clusterpolicies.nvidia.com/%s", name);
    json_t *p = json_pack("{s:s,s:s,s:{s:s,s:s},s:o}", "apiVersion", "nvidia.com/v1", "kind", "ClusterPolicy",
                          "metadata", "name", name, "creationTimestamp", ts, "spec", spec);
    assert_int_equal(gs_store_create(f->st, key, p, NULL), 0);
    json_decref(p);
}

static int count_events(const char *key, json_t *obj, void *arg)
{
    (void)key;
    const char *reason = json_string_value(json_object_get(obj, "reason"));
    json_array_append_new(arg, json_string(reason ? reason : ""));
    return 0;
}

static bool gated(struct fx *f)
{
    json_t *n = get(f, "nodes/n1");
    struct gs_object *o = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_object_decode(n, &o, &d), 0);
    bool g = gs_stack_gate_node(n, o->u.node);
    if (g) {
        assert_false(o->u.node->gpus[0].healthy);
        assert_int_equal(gs_resources_get(&o->u.node->allocatable, "nvidia.com/gpu"), 0);
    }
    gs_object_free(o);
    gs_diags_free(&d);
    json_decref(n);
    return g;
}

static void walk_with_failure_and_cleanup(void **state)
{
    struct fx *f = *state;
    gs_operator_sync(f->op);
    json_t *n = get(f, "nodes/n1");
    assert_null(cond(n)); /* no policy: not governed */
    assert_null(label(n, GS_LABEL_STACK_STATE));
    json_decref(n);
    assert_false(gated(f));

    put_policy(f, "p", "2026-01-01T00:00:00Z",
               json_pack("{s:{s:b},s:{s:{s:f,s:f}}}", "toolkit", "enabled", 0, "validator", "retry",
                         "initialBackoffSeconds", 2.0, "maxBackoffSeconds", 4.0));
    gs_operator_sync(f->op);
    n = get(f, "nodes/n1");
    const json_t *c = cond(n);
    assert_non_null(c);
    assert_string_equal(json_string_value(json_object_get(c, "status")), "False");
    assert_string_equal(json_string_value(json_object_get(c, "reason")), "DriverValidating");
    assert_string_equal(label(n, GS_LABEL_STACK_STATE), "driver");
    assert_string_equal(label(n, "nvidia.com/gpu.deploy.container-toolkit"), "false");
    assert_string_equal(label(n, "nvidia.com/gpu.deploy.driver"), "true");
    assert_string_equal(label(n, "nvidia.com/gpu.present"), "true");
    json_decref(n);
    assert_true(gated(f));
    json_t *r = request(f);
    assert_string_equal(json_string_value(json_object_get(r, "step")), "driver");
    assert_int_equal(json_integer_value(json_object_get(r, "attempt")), 1);
    assert_false(json_is_true(json_object_get(json_object_get(r, "components"), "toolkit")));
    assert_string_equal(json_string_value(json_object_get(r, "migConfig")), "all-disabled");
    json_decref(r);

    /* driver ok: toolkit is disabled, so the next step is device-plugin. */
    answer(f, true, "mock");
    gs_operator_sync(f->op);
    r = request(f);
    assert_string_equal(json_string_value(json_object_get(r, "step")), "device-plugin");
    json_decref(r);
    /* A failure keeps the node there with the reason; the retry waits for the backoff. */
    answer(f, false, "resource nvidia.com/gpu advertises 0 devices, want 1");
    gs_operator_sync(f->op);
    n = get(f, "nodes/n1");
    c = cond(n);
    assert_string_equal(json_string_value(json_object_get(c, "reason")), "DevicePluginValidating");
    assert_non_null(strstr(json_string_value(json_object_get(c, "message")), "advertises 0 devices"));
    assert_non_null(strstr(json_string_value(json_object_get(c, "message")), "retry in 2s"));
    json_decref(n);
    r = request(f);
    json_int_t failed = json_integer_value(json_object_get(r, "attempt"));
    json_decref(r);
    gs_clock_advance(&f->clk, GS_NS_PER_SEC);
    gs_operator_sync(f->op);
    r = request(f);
    assert_int_equal(json_integer_value(json_object_get(r, "attempt")), failed); /* still in backoff */
    json_decref(r);
    gs_clock_advance(&f->clk, GS_NS_PER_SEC);
    gs_operator_sync(f->op);
    r = request(f);
    assert_int_equal(json_integer_value(json_object_get(r, "attempt")), failed + 1);
    json_decref(r);
    /* Fixed: the rest passes. */
    for (int i = 0; i < 3; i++) {
        answer(f, true, "ok");
        gs_operator_sync(f->op);
    }
    n = get(f, "nodes/n1");
    c = cond(n);
    assert_string_equal(json_string_value(json_object_get(c, "status")), "True");
    assert_string_equal(label(n, GS_LABEL_STACK_STATE), "ready");
    json_decref(n);
    assert_false(gated(f));

    /* Events: every transition and the failure. */
    json_t *reasons = json_array();
    int64_t rv;
    gs_store_list(f->st, "events/default/", count_events, reasons, &rv);
    char *all = json_dumps(reasons, 0);
    assert_non_null(strstr(all, "DriverValidating"));
    assert_non_null(strstr(all, "DevicePluginValidating"));
    assert_non_null(strstr(all, "ValidationFailed"));
    assert_non_null(strstr(all, "\"Ready\""));
    assert_null(strstr(all, "ToolkitValidating"));
    free(all);
    json_decref(reasons);

    /* Metrics. */
    char *buf = NULL;
    size_t len = 0, cap = 0;
    assert_int_equal(gs_operator_metrics(f->op, &buf, &len, &cap), 0);
    assert_non_null(strstr(buf, "gpusched_gpu_stack_state{node=\"n1\",state=\"ready\"} 1"));
    assert_non_null(strstr(buf, "gpusched_gpu_stack_validation_failures_total{node=\"n1\"} 1"));
    free(buf);
    struct gs_operator_stats st;
    gs_operator_stats(f->op, &st);
    assert_int_equal(st.nodes, 1);
    assert_int_equal(st.ready, 1);
    assert_int_equal(st.failures, 1);

    /* A second, younger policy is ignored; the first is ready. */
    put_policy(f, "q", "2026-02-01T00:00:00Z", json_object());
    gs_operator_sync(f->op);
    json_t *q = get(f, "clusterpolicies.nvidia.com/q"), *p = get(f, "clusterpolicies.nvidia.com/p");
    assert_string_equal(json_string_value(json_object_get(json_object_get(q, "status"), "state")), "ignored");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "status"), "state")), "ready");
    json_decref(q);
    json_decref(p);
    n = get(f, "nodes/n1");
    assert_string_equal(label(n, GS_LABEL_STACK_STATE), "ready"); /* the status write re-drove nothing */
    json_decref(n);

    /* No policy left: what the operator wrote goes. */
    assert_int_equal(gs_store_delete(f->st, "clusterpolicies.nvidia.com/p", 0, NULL, NULL), 0);
    assert_int_equal(gs_store_delete(f->st, "clusterpolicies.nvidia.com/q", 0, NULL, NULL), 0);
    gs_operator_sync(f->op);
    n = get(f, "nodes/n1");
    assert_null(cond(n));
    assert_null(label(n, GS_LABEL_STACK_STATE));
    assert_null(label(n, "nvidia.com/gpu.deploy.driver"));
    assert_null(json_object_get(json_object_get(json_object_get(n, "metadata"), "annotations"), GS_ANN_STACK_MACHINE));
    assert_string_equal(label(n, "zone"), "a");
    json_decref(n);
}

static int add_stale_label(json_t *cur, json_t **out, void *arg)
{
    (void)arg;
    json_t *n = json_deep_copy(cur);
    json_object_set_new(json_object_get(json_object_get(n, "metadata"), "labels"), GS_LABEL_STACK_STATE,
                        json_string("ready"));
    *out = n;
    return 0;
}

/* Idle passes (no policy, no node changed) skip the node list; a node
 * changed afterwards (here: a label an earlier policy's operator left) is
 * still seen and cleaned by the next pass. */
static void idle_passes_follow_node_changes(void **state)
{
    struct fx *f = *state;
    gs_operator_sync(f->op);
    int64_t rv0 = gs_store_current_rv(f->st);
    for (int i = 0; i < 3; i++) gs_operator_sync(f->op);
    assert_int_equal(gs_store_current_rv(f->st), rv0); /* nothing written */
    assert_int_equal(gs_store_mutate(f->st, "nodes/n1", add_stale_label, NULL, NULL, NULL), 0);
    json_t *n = get(f, "nodes/n1");
    assert_string_equal(label(n, GS_LABEL_STACK_STATE), "ready");
    json_decref(n);
    gs_operator_sync(f->op);
    n = get(f, "nodes/n1");
    assert_null(label(n, GS_LABEL_STACK_STATE));
    assert_string_equal(label(n, "zone"), "a");
    json_decref(n);
}

static void agent_loss_and_admin_labels(void **state)
{
    struct fx *f = *state;
    put_policy(f, "p", "2026-01-01T00:00:00Z", json_object());
    gs_operator_sync(f->op);
    answer(f, true, "ok");
    gs_operator_sync(f->op);
    json_t *r = request(f);
    assert_string_equal(json_string_value(json_object_get(r, "step")), "toolkit");
    json_decref(r);
    /* An administrator switches the toolkit off on this node: re-driven, toolkit skipped. */
    json_t *n = get(f, "nodes/n1");
    json_object_set_new(json_object_get(json_object_get(n, "metadata"), "labels"),
                        "nvidia.com/gpu.deploy.container-toolkit", json_string("false"));
    assert_int_equal(gs_store_update(f->st, "nodes/n1", n, 0, NULL), 0);
    json_decref(n);
    gs_operator_sync(f->op);
    gs_operator_sync(f->op);
    answer(f, true, "ok"); /* driver */
    gs_operator_sync(f->op);
    r = request(f);
    assert_string_equal(json_string_value(json_object_get(r, "step")), "device-plugin");
    assert_false(json_is_true(json_object_get(json_object_get(r, "components"), "toolkit")));
    json_decref(r);
    n = get(f, "nodes/n1");
    assert_string_equal(label(n, "nvidia.com/gpu.deploy.container-toolkit"), "false"); /* left alone */
    /* The agent stops posting Ready: not-ready, saying why. */
    json_t *rc = json_array_get(json_object_get(json_object_get(n, "status"), "conditions"), 0);
    json_object_set_new(rc, "status", json_string("Unknown"));
    assert_int_equal(gs_store_update(f->st, "nodes/n1", n, 0, NULL), 0);
    json_decref(n);
    gs_operator_sync(f->op);
    n = get(f, "nodes/n1");
    assert_string_equal(json_string_value(json_object_get(cond(n), "reason")), "NotReady");
    assert_non_null(strstr(json_string_value(json_object_get(cond(n), "message")), "not posting Ready"));
    json_decref(n);
}

/*--- Restarts ---*/

static size_t nevents(struct fx *f, const char *reason)
{
    json_t *reasons = json_array();
    int64_t rv;
    gs_store_list(f->st, "events/default/", count_events, reasons, &rv);
    size_t n = 0, i;
    json_t *r;
    json_array_foreach(reasons, i, r) n += !reason || !strcmp(json_string_value(r), reason);
    json_decref(reasons);
    return n;
}

/* The server stops; after dt it starts again on the same store. */
static void restart(struct fx *f, int64_t dt)
{
    gs_operator_stop(f->op);
    gs_clock_advance(&f->clk, dt);
    struct gs_operator_opts oo = {.source = f->src, .clock = &f->clk, .wall = &f->clk};
    assert_int_equal(gs_operator_new(&oo, &f->op), 0);
}

static const char *req_step(struct fx *f, json_int_t *attempt)
{
    static char step[32];
    json_t *r = request(f);
    assert_non_null(r);
    snprintf(step, sizeof step, "%s", json_string_value(json_object_get(r, "step")));
    if (attempt) *attempt = json_integer_value(json_object_get(r, "attempt"));
    json_decref(r);
    return step;
}

static const char *cond_field(struct fx *f, const char *k)
{
    static char v[300];
    json_t *n = get(f, "nodes/n1");
    snprintf(v, sizeof v, "%s", json_string_value(json_object_get(cond(n), k)) ?: "");
    json_decref(n);
    return v;
}

static void walk_to_ready(struct fx *f)
{
    gs_operator_sync(f->op);
    for (int i = 0; i < 5; i++) {
        answer(f, true, "ok");
        gs_operator_sync(f->op);
    }
    assert_string_equal(cond_field(f, "status"), "True");
}

static double metric(struct fx *f, const char *prefix)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    assert_int_equal(gs_operator_metrics(f->op, &buf, &len, &cap), 0);
    const char *p = strstr(buf, prefix);
    assert_non_null(p);
    double v = strtod(p + strlen(prefix), NULL);
    free(buf);
    return v;
}

static void restart_keeps_ready(void **state)
{
    struct fx *f = *state;
    put_policy(f, "p", "2026-01-01T00:00:00Z", json_object());
    walk_to_ready(f);
    json_int_t last;
    assert_string_equal(req_step(f, &last), "ready");
    size_t events = nevents(f, NULL);
    assert_int_equal(nevents(f, "Ready"), 1);
    gs_clock_advance(&f->clk, 20 * GS_NS_PER_SEC);

    restart(f, 10 * GS_NS_PER_SEC);
    gs_operator_sync(f->op);
    /* Still ready, still schedulable, and nothing published. */
    assert_string_equal(cond_field(f, "status"), "True");
    assert_false(gated(f));
    assert_int_equal(nevents(f, NULL), events);
    struct gs_operator_stats st;
    gs_operator_stats(f->op, &st);
    assert_int_equal(st.restored, 1);
    assert_int_equal(st.transitions, 0);
    assert_int_equal(st.ready, 1);
    /* Time in state continues from when the node became ready. */
    double secs = metric(f, "gpusched_gpu_stack_state_seconds{node=\"n1\",state=\"ready\"} ");
    assert_true(secs >= 29.9 && secs <= 30.1);
    json_t *p = get(f, "clusterpolicies.nvidia.com/p");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(p, "status"), "generation")), 1);
    json_decref(p);

    /* Checked once more in the background, step by step, without leaving ready. */
    json_int_t a;
    assert_string_equal(req_step(f, &a), "driver");
    assert_true(a > last);
    assert_non_null(strstr(cond_field(f, "message"), "checking again"));
    for (int i = 0; i < 5; i++) {
        assert_false(gated(f));
        answer(f, true, "ok");
        gs_operator_sync(f->op);
    }
    assert_string_equal(req_step(f, NULL), "ready");
    assert_string_equal(cond_field(f, "status"), "True");
    assert_non_null(strstr(cond_field(f, "message"), "checked again"));
    assert_int_equal(nevents(f, NULL), events);

    /* A second restart; this time a check fails: the node leaves ready for that step. */
    restart(f, GS_NS_PER_SEC);
    gs_operator_sync(f->op);
    answer(f, true, "ok"); /* driver */
    gs_operator_sync(f->op);
    assert_string_equal(req_step(f, NULL), "toolkit");
    answer(f, false, "no CDI spec names GPU-1");
    gs_operator_sync(f->op);
    assert_string_equal(cond_field(f, "status"), "False");
    assert_string_equal(cond_field(f, "reason"), "ToolkitValidating");
    assert_non_null(strstr(cond_field(f, "message"), "no CDI spec names GPU-1"));
    assert_true(gated(f));
    assert_int_equal(nevents(f, NULL), events + 1);
    assert_int_equal(nevents(f, "ToolkitValidating"), 2);
}

static void restart_mid_walk_resumes(void **state)
{
    struct fx *f = *state;
    put_policy(f, "p", "2026-01-01T00:00:00Z",
               json_pack("{s:{s:{s:f,s:f}}}", "validator", "retry", "initialBackoffSeconds", 8.0,
                         "maxBackoffSeconds", 60.0));
    gs_operator_sync(f->op);
    answer(f, true, "ok"); /* driver */
    gs_operator_sync(f->op);
    answer(f, false, "nvidia-ctk is not on PATH");
    gs_operator_sync(f->op);
    json_int_t failed;
    assert_string_equal(req_step(f, &failed), "toolkit");
    char msg[300];
    snprintf(msg, sizeof msg, "%s", cond_field(f, "message"));
    assert_non_null(strstr(msg, "retry in 8s"));
    size_t events = nevents(f, NULL);

    restart(f, 3 * GS_NS_PER_SEC);
    gs_operator_sync(f->op);
    json_int_t a;
    assert_string_equal(req_step(f, &a), "toolkit");
    assert_int_equal(a, failed); /* the backoff deadline survived: no retry yet */
    assert_string_equal(cond_field(f, "reason"), "ToolkitValidating");
    assert_string_equal(cond_field(f, "message"), msg);
    assert_int_equal(nevents(f, NULL), events);
    double secs = metric(f, "gpusched_gpu_stack_state_seconds{node=\"n1\",state=\"toolkit\"} ");
    assert_true(secs >= 2.9 && secs <= 3.1);
    gs_clock_advance(&f->clk, 4 * GS_NS_PER_SEC);
    gs_operator_sync(f->op);
    assert_string_equal(req_step(f, &a), "toolkit");
    assert_int_equal(a, failed);
    gs_clock_advance(&f->clk, 2 * GS_NS_PER_SEC); /* 9s after the failure */
    gs_operator_sync(f->op);
    assert_string_equal(req_step(f, &a), "toolkit");
    assert_int_equal(a, failed + 1);

    /* A request out when the server stopped, answered while it was down. */
    restart(f, GS_NS_PER_SEC);
    answer(f, true, "ok");
    gs_operator_sync(f->op);
    assert_string_equal(req_step(f, NULL), "device-plugin");
    assert_int_equal(nevents(f, "DevicePluginValidating"), 1);
    assert_int_equal(nevents(f, "ToolkitValidating"), 1);
}

static void restart_after_policy_change_redrives(void **state)
{
    struct fx *f = *state;
    put_policy(f, "p", "2026-01-01T00:00:00Z", json_object());
    walk_to_ready(f);
    gs_operator_stop(f->op);
    /* The policy changes while the server is down. */
    json_t *p = get(f, "clusterpolicies.nvidia.com/p");
    json_object_set_new(p, "spec", json_pack("{s:{s:b}}", "dcgmExporter", "enabled", 0));
    assert_int_equal(gs_store_update(f->st, "clusterpolicies.nvidia.com/p", p, 0, NULL), 0);
    json_decref(p);
    gs_clock_advance(&f->clk, GS_NS_PER_SEC);
    struct gs_operator_opts oo = {.source = f->src, .clock = &f->clk, .wall = &f->clk};
    assert_int_equal(gs_operator_new(&oo, &f->op), 0);
    gs_operator_sync(f->op);
    assert_string_equal(cond_field(f, "status"), "False");
    assert_string_equal(cond_field(f, "reason"), "DriverValidating");
    assert_true(gated(f));
    json_t *r = request(f);
    assert_int_equal(json_integer_value(json_object_get(r, "generation")), 2);
    json_decref(r);
    assert_int_equal(nevents(f, "NotReady"), 1); /* ready -> not-ready, saying why */
    assert_int_equal(nevents(f, "DriverValidating"), 2);
    p = get(f, "clusterpolicies.nvidia.com/p");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(p, "status"), "generation")), 2);
    json_decref(p);
}

static int set_ann_fn(json_t *cur, json_t **out, void *arg)
{
    json_t *n = json_deep_copy(cur);
    json_object_set_new(json_object_get(json_object_get(n, "metadata"), "annotations"), GS_ANN_STACK_MACHINE,
                        json_string(arg));
    *out = n;
    return 0;
}

/* Restarts with the saved state replaced by text; returns what was logged. */
static char *restart_with_saved(struct fx *f, const char *text)
{
    gs_operator_stop(f->op);
    json_t *out = NULL;
    assert_int_equal(gs_store_mutate(f->st, "nodes/n1", set_ann_fn, (void *)text, &out, NULL), 0);
    json_decref(out);
    struct gs_operator_opts oo = {.source = f->src, .clock = &f->clk, .wall = &f->clk};
    assert_int_equal(gs_operator_new(&oo, &f->op), 0);
    char *log = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&log, &len);
    gs_log_set_stream(mem);
    gs_operator_sync(f->op);
    gs_log_set_stream(stderr);
    fclose(mem);
    return log;
}

static void restart_with_corrupt_state_starts_over(void **state)
{
    struct fx *f = *state;
    put_policy(f, "p", "2026-01-01T00:00:00Z", json_object());
    walk_to_ready(f);
    json_t *n = get(f, "nodes/n1");
    const char *saved =
        json_string_value(json_object_get(json_object_get(json_object_get(n, "metadata"), "annotations"),
                                          GS_ANN_STACK_MACHINE));
    assert_non_null(saved);
    json_t *o = json_loads(saved, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(o, "step")), "ready");
    json_object_set_new(o, "step", json_string("sideways"));
    char *bad_step = json_dumps(o, JSON_COMPACT);
    json_object_set_new(o, "step", json_string("ready"));
    json_object_set_new(o, "enteredAt", json_string("yesterday"));
    char *bad_time = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    json_decref(n);

    char *log = restart_with_saved(f, bad_step);
    assert_non_null(strstr(log, "cannot restore"));
    assert_non_null(strstr(log, "field=step"));
    assert_non_null(strstr(log, "sideways"));
    free(log);
    /* From not-ready: the walk starts again (the agent posts Ready, so at driver). */
    assert_string_equal(cond_field(f, "reason"), "DriverValidating");
    assert_true(gated(f));
    struct gs_operator_stats st;
    gs_operator_stats(f->op, &st);
    assert_int_equal(st.restored, 0);
    assert_int_equal(st.restore_errors, 1);
    walk_to_ready(f);

    log = restart_with_saved(f, bad_time);
    assert_non_null(strstr(log, "field=enteredAt"));
    assert_non_null(strstr(log, "yesterday"));
    free(log);
    assert_string_equal(cond_field(f, "reason"), "DriverValidating");
    walk_to_ready(f);

    log = restart_with_saved(f, "{\"generation\":");
    assert_non_null(strstr(log, "field=" GS_ANN_STACK_MACHINE));
    assert_non_null(strstr(log, "not a JSON object"));
    free(log);
    assert_string_equal(cond_field(f, "reason"), "DriverValidating");
    free(bad_step);
    free(bad_time);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(walk_with_failure_and_cleanup, setup, teardown),
        cmocka_unit_test_setup_teardown(idle_passes_follow_node_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(agent_loss_and_admin_labels, setup, teardown),
        cmocka_unit_test_setup_teardown(restart_keeps_ready, setup, teardown),
        cmocka_unit_test_setup_teardown(restart_mid_walk_resumes, setup, teardown),
        cmocka_unit_test_setup_teardown(restart_after_policy_change_redrives, setup, teardown),
        cmocka_unit_test_setup_teardown(restart_with_corrupt_state_starts_over, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
