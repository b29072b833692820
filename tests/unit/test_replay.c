/*
 * test_replay.c - the replay experiment on hand-made scenarios whose whole
 * timeline is known: which pod is scheduled, fails, completes when and where,
 * the queueing delays and their percentiles, and the samples. Also the
 * manifest trace loader (tests/data/sim) and its error messages.
 */
#include "sched/plugin.h"
#include "sim/sim.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "trace_fixture.h" /* trace_nodes */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POLICY "BestFit"

/* The registry refers to the placement policies weakly, which does not pull
 * them out of the static library; naming the one used here does. */
extern const struct gs_plugin gs_plugin_best_fit;
const struct gs_plugin *const test_replay_policy = &gs_plugin_best_fit;

/*--- Recording sink ---*/

struct rec_event {
    double t;
    enum gs_sim_event_type type;
    char pod[64], node[64], reason[512];
    uint64_t gpus;
    int32_t milli;
};

struct rec {
    struct rec_event ev[64];
    size_t nev;
    struct gs_sim_sample s[64];
    size_t ns;
    double last_progress;
};

static void rec_event(void *ctx, const struct gs_sim_event *e)
{
    struct rec *r = ctx;
    assert_true(r->nev < 64);
    struct rec_event *x = &r->ev[r->nev++];
    memset(x, 0, sizeof *x);
    x->t = e->t;
    x->type = e->type;
    x->gpus = e->gpus;
    x->milli = e->milli;
    snprintf(x->pod, sizeof x->pod, "%s", e->pod);
    snprintf(x->node, sizeof x->node, "%s", e->node ? e->node : "");
    snprintf(x->reason, sizeof x->reason, "%s", e->reason ? e->reason : "");
}

static void rec_sample(void *ctx, const struct gs_sim_sample *s)
{
    struct rec *r = ctx;
    assert_true(r->ns < 64);
    r->s[r->ns++] = *s;
}

static void rec_progress(void *ctx, double f) { ((struct rec *)ctx)->last_progress = f; }

static struct gs_sim_sink sink_for(struct rec *r)
{
    memset(r, 0, sizeof *r);
    return (struct gs_sim_sink){.event = rec_event, .sample = rec_sample, .progress = rec_progress, .ctx = r};
}

static void expect(const struct rec *r, size_t i, double t, enum gs_sim_event_type type, const char *pod,
                   const char *node, uint64_t gpus)
{
    assert_true(i < r->nev);
    const struct rec_event *e = &r->ev[i];
    if (e->t != t || e->type != type || strcmp(e->pod, pod) || (node && strcmp(e->node, node)) || e->gpus != gpus)
        fail_msg("event %zu: got t=%g type=%d pod=%s node=%s gpus=%#llx, want t=%g type=%d pod=%s node=%s "
                 "gpus=%#llx",
                 i, e->t, (int)e->type, e->pod, e->node, (unsigned long long)e->gpus, t, (int)type, pod,
                 node ? node : "*", (unsigned long long)gpus);
}

/*--- In-memory traces ---*/

static void trace_pod(struct gs_trace *t, const char *name, double arrival, double duration, int32_t ngpu,
                      int32_t milli)
{
    t->pods = realloc(t->pods, (t->npods + 1) * sizeof *t->pods);
    assert_non_null(t->pods);
    struct gs_pod *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->meta.name = strdup(name);
    p->meta.namespace_ = strdup("default");
    p->scheduler_name = strdup("default-scheduler");
    p->demand.cpu_milli = 1000;
    p->demand.mem_bytes = (int64_t)1 << 30;
    p->demand.gpu_count = ngpu;
    p->demand.gpu_milli = milli;
    t->pods[t->npods++] = (struct gs_trace_pod){.pod = p, .arrival = arrival, .duration = duration};
}

static int run(const struct gs_trace *t, struct rec *r, struct gs_sim_result *res)
{
    struct gs_sim_sink sink = sink_for(r);
    struct gs_sim_opts o = {.mode = GS_SIM_REPLAY, .policy = POLICY, .seed = 42, .tune = 1.3};
    struct gs_diags d = {0};
    int rc = gs_sim_run(t, &o, &sink, res, &d);
    for (size_t i = 0; i < d.n; i++) print_message("diag: %s: %s\n", d.v[i].path, d.v[i].msg);
    gs_diags_free(&d);
    return rc;
}

/* 1 node, 2 GPUs, 3 one-GPU pods: the third waits until the second completes. */
static void test_third_pod_waits(void **state)
{
    (void)state;
    struct gs_trace t = {0};
    trace_nodes(&t, 1, 2);
    trace_pod(&t, "p0", 0, 100, 1, 1000);
    trace_pod(&t, "p1", 10, 50, 1, 1000);
    trace_pod(&t, "p2", 20, 30, 1, 1000);
    struct rec r;
    struct gs_sim_result res;
    assert_int_equal(run(&t, &r, &res), 0);

    assert_int_equal(r.nev, 7);
    expect(&r, 0, 0, GS_SIM_SCHEDULED, "default/p0", "n1", 0x1);
    expect(&r, 1, 10, GS_SIM_SCHEDULED, "default/p1", "n1", 0x2);
    expect(&r, 2, 20, GS_SIM_FAILED, "default/p2", "", 0);
    assert_non_null(strstr(r.ev[2].reason, "0/1 nodes are available"));
    expect(&r, 3, 60, GS_SIM_COMPLETED, "default/p1", "n1", 0x2);
    expect(&r, 4, 60, GS_SIM_SCHEDULED, "default/p2", "n1", 0x2);
    expect(&r, 5, 90, GS_SIM_COMPLETED, "default/p2", "n1", 0x2);
    expect(&r, 6, 100, GS_SIM_COMPLETED, "default/p0", "n1", 0x1);

    /* One sample per instant: 0, 10, 20, 60, 90, 100. */
    static const double ts[] = {0, 10, 20, 60, 90, 100}, alloc[] = {50, 100, 100, 100, 50, 0};
    static const int64_t pending[] = {0, 0, 1, 0, 0, 0}, running[] = {1, 2, 2, 2, 1, 0};
    assert_int_equal(r.ns, 6);
    for (size_t i = 0; i < 6; i++) {
        assert_true(r.s[i].t == ts[i]);
        assert_true(r.s[i].alloc_pct == alloc[i]);
        assert_int_equal(r.s[i].pods_pending, pending[i]);
        assert_int_equal(r.s[i].pods_running, running[i]);
        assert_int_equal(r.s[i].used_milli, (int64_t)(alloc[i] * 20));
    }
    assert_true(r.s[2].arrived_pct == 150);

    assert_string_equal(res.policy, POLICY);
    assert_int_equal(res.nodes, 1);
    assert_int_equal(res.gpus, 2);
    assert_int_equal(res.pods_arrived, 3);
    assert_int_equal(res.pods_scheduled, 3);
    /* Delays 0, 0, 40 (nearest rank). */
    assert_true(res.delay_p50 == 0);
    assert_true(res.delay_p90 == 40);
    assert_true(res.delay_p99 == 40);
    assert_true(res.alloc_pct_final == 0);
    assert_true(res.alloc_pct_at_100 == 100); /* arrived demand reaches 2 GPUs at t=10, both then in use */
    assert_true(r.last_progress == 1.0);
    gs_trace_free(&t);
}

/* A pod that failed is retried the moment resources free up, inside its
 * backoff (1 s): the completion is an event that could help it and nothing
 * else is queued (kube's SchedulerPopFromBackoffQ). */
static void test_backoff_delays_retry(void **state)
{
    (void)state;
    struct gs_trace t = {0};
    trace_nodes(&t, 1, 1);
    trace_pod(&t, "first", 0, 0.5, 1, 1000);
    trace_pod(&t, "second", 0, 2, 1, 1000);
    struct rec r;
    struct gs_sim_result res;
    assert_int_equal(run(&t, &r, &res), 0);
    assert_int_equal(r.nev, 5);
    expect(&r, 0, 0, GS_SIM_SCHEDULED, "default/first", "n1", 0x1);
    expect(&r, 1, 0, GS_SIM_FAILED, "default/second", "", 0);
    expect(&r, 2, 0.5, GS_SIM_COMPLETED, "default/first", "n1", 0x1);
    expect(&r, 3, 0.5, GS_SIM_SCHEDULED, "default/second", "n1", 0x1);
    expect(&r, 4, 2.5, GS_SIM_COMPLETED, "default/second", "n1", 0x1);
    assert_true(res.delay_p50 == 0);
    assert_true(res.delay_p99 == 0.5);
    gs_trace_free(&t);
}

/* A pod that can never fit does not keep the replay going, and a pod with no
 * duration never completes. Fractional pods share a GPU. */
static void test_never_fits_and_sharing(void **state)
{
    (void)state;
    struct gs_trace t = {0};
    trace_nodes(&t, 2, 1);
    trace_pod(&t, "huge", 0, 10, 4, 1000);
    trace_pod(&t, "half-a", 1, -1, 1, 500);
    trace_pod(&t, "half-b", 2, 5, 1, 500);
    struct rec r;
    struct gs_sim_result res;
    assert_int_equal(run(&t, &r, &res), 0);
    assert_int_equal(r.nev, 4);
    expect(&r, 0, 0, GS_SIM_FAILED, "default/huge", "", 0);
    expect(&r, 1, 1, GS_SIM_SCHEDULED, "default/half-a", NULL, 0x1);
    assert_int_equal(r.ev[1].milli, 500);
    /* BestFit puts the second half on the GPU already half used. */
    expect(&r, 2, 2, GS_SIM_SCHEDULED, "default/half-b", r.ev[1].node, 0x1);
    expect(&r, 3, 7, GS_SIM_COMPLETED, "default/half-b", r.ev[1].node, 0x1);
    assert_int_equal(res.pods_arrived, 3);
    assert_int_equal(res.pods_scheduled, 2);
    assert_int_equal(r.s[r.ns - 1].pods_pending, 1);
    assert_int_equal(r.s[r.ns - 1].pods_running, 1);
    assert_true(res.alloc_pct_final == 25);
    gs_trace_free(&t);
}

/*--- Manifests ---*/

static void test_manifest_scenario(void **state)
{
    (void)state;
    struct gs_trace t;
    struct gs_diags d = {0};
    int rc = gs_trace_load_manifests(GS_TEST_DATA "/sim/cluster.yaml", GS_TEST_DATA "/sim/workload.yaml", &t, &d);
    for (size_t i = 0; i < d.n; i++) print_message("diag: %s: %s\n", d.v[i].path, d.v[i].msg);
    assert_int_equal(rc, 0);
    gs_diags_free(&d);
    assert_int_equal(t.nnodes, 2);
    assert_string_equal(t.nodes[0].name, "gpu-a");
    assert_int_equal(t.nodes[0].cpu_milli, 32000);
    assert_int_equal(t.nodes[0].mem_bytes, (int64_t)128 << 30);
    assert_int_equal(t.nodes[0].pods, 110);
    assert_int_equal(t.nodes[0].ngpus, 2);
    assert_string_equal(t.nodes[0].gpu_model, "T4");
    assert_string_equal(t.nodes[1].gpu_model, "V100M32");
    assert_int_equal(t.npods, 6);
    assert_true(t.pods[1].arrival == 5 && t.pods[1].duration == -1); /* forever-e */
    assert_true(t.pods[2].arrival == 10 && t.pods[2].duration == 50);
    assert_int_equal(t.pods[2].pod->demand.gpu_milli, 500);

    struct rec r;
    struct gs_sim_result res;
    assert_int_equal(run(&t, &r, &res), 0);
    assert_int_equal(r.nev, 11);
    expect(&r, 0, 0, GS_SIM_SCHEDULED, "default/train-a", "gpu-a", 0x3);
    expect(&r, 1, 5, GS_SIM_SCHEDULED, "default/forever-e", NULL, 0);
    expect(&r, 2, 10, GS_SIM_SCHEDULED, "default/infer-b", "gpu-b", 0x1);
    expect(&r, 3, 20, GS_SIM_SCHEDULED, "default/infer-c", "gpu-b", 0x1);
    expect(&r, 4, 30, GS_SIM_FAILED, "default/big-d", "", 0);
    expect(&r, 5, 40, GS_SIM_FAILED, "default/model-f", "", 0);
    expect(&r, 6, 50, GS_SIM_COMPLETED, "default/infer-c", "gpu-b", 0x1);
    expect(&r, 7, 60, GS_SIM_COMPLETED, "default/infer-b", "gpu-b", 0x1);
    expect(&r, 8, 60, GS_SIM_SCHEDULED, "default/big-d", "gpu-b", 0x1);
    expect(&r, 9, 100, GS_SIM_COMPLETED, "default/train-a", "gpu-a", 0x3);
    expect(&r, 10, 100, GS_SIM_COMPLETED, "default/big-d", "gpu-b", 0x1);
    assert_non_null(strstr(r.ev[5].reason, "0/2 nodes are available"));
    assert_int_equal(res.pods_arrived, 6);
    assert_int_equal(res.pods_scheduled, 5);
    assert_true(res.delay_p50 == 0);
    assert_true(res.delay_p90 == 30);
    gs_trace_free(&t);
}

static char *write_tmp(const char *text)
{
    char tmpl[] = "/tmp/gs_test_replay_XXXXXX";
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
    return false;
}

static void test_manifest_errors(void **state)
{
    (void)state;
    char *nodes = write_tmp("apiVersion: v1\nkind: Node\nmetadata: {name: a}\n"
                            "status: {allocatable: {cpu: '4', memory: 8Gi}}\n"
                            "---\napiVersion: v1\nkind: Pod\nmetadata: {name: stray}\n"
                            "spec: {containers: [{name: c, image: i}]}\n");
    char *pods = write_tmp("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n"
                           "    sim.gpusched.io/arrival: soon\nspec: {containers: [{name: c, image: i}]}\n"
                           "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: q\n  annotations:\n"
                           "    sim.gpusched.io/duration: '-3'\nspec: {containers: [{name: c, image: i}]}\n");
    struct gs_trace t;
    struct gs_diags d = {0};
    assert_int_equal(gs_trace_load_manifests(nodes, pods, &t, &d), GS_EINVAL);
    assert_true(diag_has(&d, ": kind", "holds only Node documents"));
    assert_true(diag_has(&d, ":1: metadata.annotations[\"sim.gpusched.io/arrival\"]", "\"soon\""));
    assert_true(diag_has(&d, ": metadata.annotations[\"sim.gpusched.io/duration\"]", "\"-3\""));
    assert_int_equal(t.nnodes, 0); /* nothing half-loaded is handed back */
    assert_null(t.pods);
    gs_diags_free(&d);
    assert_true(gs_trace_load_manifests("/nonexistent/nodes.yaml", pods, &t, &d) < 0);
    assert_true(diag_has(&d, "/nonexistent/nodes.yaml", "cannot read"));
    gs_diags_free(&d);
    unlink(nodes);
    unlink(pods);
    free(nodes);
    free(pods);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_third_pod_waits),
        cmocka_unit_test(test_backoff_delays_retry),
        cmocka_unit_test(test_never_fits_and_sharing),
        cmocka_unit_test(test_manifest_scenario),
        cmocka_unit_test(test_manifest_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
