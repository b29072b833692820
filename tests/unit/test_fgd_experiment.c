/*
 * test_fgd_experiment.c - the FGD experiment on a slice of the openb trace
 * (tests/data/openb_slice: 40 nodes, 200 pods): exact pinned allocations for
 * a fixed seed, determinism, and the per-pod samples.
 *
 * The pinned numbers were computed once by this code; a change to them means
 * a placement decision changed and must be explained.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rec {
    uint64_t hash;   /* over every event, in order */
    int64_t events, scheduled, failed;
    int64_t samples, last_arrived, last_used, capacity_violations, frag_bad;
    struct gs_sim_sample last;
};

static uint64_t mix(uint64_t h, const char *s, uint64_t v)
{
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return (h ^ v) * 0x100000001b3ULL;
}

static void on_event(void *ctx, const struct gs_sim_event *e)
{
    struct rec *r = ctx;
    r->events++;
    if (e->type == GS_SIM_SCHEDULED) r->scheduled++;
    if (e->type == GS_SIM_FAILED) {
        r->failed++;
        assert_non_null(e->reason);
        assert_non_null(strstr(e->reason, "nodes are available"));
    }
    r->hash = mix(mix(r->hash, e->pod, e->gpus), e->node, (uint64_t)e->type);
}

static void on_sample(void *ctx, const struct gs_sim_sample *s)
{
    struct rec *r = ctx;
    if (s->arrived_milli < r->last_arrived) r->capacity_violations++;
    if (s->used_milli < r->last_used) r->capacity_violations++; /* nothing departs */
    if (s->alloc_pct > 100.0 || s->used_milli > s->arrived_milli) r->capacity_violations++;
    if (s->frag_ratio < 0 || s->frag_ratio > 100.0 || s->frag_milli < 0) r->frag_bad++;
    r->last_arrived = s->arrived_milli;
    r->last_used = s->used_milli;
    r->samples++;
    r->last = *s;
}

static struct gs_trace trace;

static int load(void **st)
{
    (void)st;
    struct gs_diags d = {0};
    int rc = gs_trace_load_openb(GS_TEST_DATA "/openb_slice/nodes.csv", GS_TEST_DATA "/openb_slice/pods.csv", &trace,
                                 &d);
    gs_diags_free(&d);
    return rc;
}

static int unload(void **st)
{
    (void)st;
    gs_trace_free(&trace);
    return 0;
}

static void run(const char *policy, uint64_t seed, struct gs_sim_result *res, struct rec *r)
{
    memset(r, 0, sizeof *r);
    r->hash = 1469598103934665603ULL;
    struct gs_sim_opts o = {.mode = GS_SIM_FGD, .policy = policy, .seed = seed, .tune = 1.3};
    struct gs_sim_sink sink = {.event = on_event, .sample = on_sample, .ctx = r};
    struct gs_diags d = {0};
    assert_int_equal(gs_sim_run_fgd(&trace, &o, &sink, res, &d), 0);
    assert_int_equal(d.n, 0);
    gs_diags_free(&d);
}

static void test_slice_loaded(void **st)
{
    (void)st;
    assert_int_equal(trace.nnodes, 40);
    assert_int_equal(trace.npods, 200);
}

static void check_pinned(const char *policy, int64_t arrived, int64_t scheduled, double at100, double final)
{
    struct gs_sim_result res;
    struct rec r;
    run(policy, 42, &res, &r);
    fprintf(stderr, "%s: arrived %lld scheduled %lld at100 %.4f final %.4f\n", policy, (long long)res.pods_arrived,
            (long long)res.pods_scheduled, res.alloc_pct_at_100, res.alloc_pct_final);
    assert_string_equal(res.policy, policy);
    assert_int_equal(res.nodes, 40);
    assert_int_equal(res.gpus, 186);
    assert_int_equal(res.pods_arrived, arrived);
    assert_int_equal(res.pods_scheduled, scheduled);
    assert_true(fabs(res.alloc_pct_at_100 - at100) < 1e-3);
    assert_true(fabs(res.alloc_pct_final - final) < 1e-3);
    assert_int_equal(r.events, res.pods_arrived);
    assert_int_equal(r.scheduled, res.pods_scheduled);
    assert_int_equal(r.failed, res.pods_arrived - res.pods_scheduled);
    assert_int_equal(r.samples, res.pods_arrived);
    assert_int_equal(r.capacity_violations, 0);
    assert_int_equal(r.frag_bad, 0);
    assert_true(fabs(r.last.alloc_pct - res.alloc_pct_final) < 1e-9);
    /* inflation stops once another pod would pass 130% of capacity */
    assert_true(r.last.arrived_milli <= 186000 * 13 / 10);
    assert_true(r.last.arrived_milli > 186000 * 12 / 10);
}

static void test_fgd_pinned(void **st)
{
    (void)st;
    check_pinned("FGD", 287, 225, 98.3333, 98.6505);
}

static void test_best_fit_pinned(void **st)
{
    (void)st;
    check_pinned("BestFit", 287, 220, 96.2204, 96.5376);
}

static void test_deterministic(void **st)
{
    (void)st;
    const char *policies[] = {"Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD", "FGDPack", "FGDPlus", "FGDLearn"};
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
        struct gs_sim_result a, b;
        struct rec ra, rb;
        run(policies[i], 7, &a, &ra);
        run(policies[i], 7, &b, &rb);
        assert_true(ra.hash == rb.hash);
        assert_int_equal(a.pods_scheduled, b.pods_scheduled);
        assert_true(a.alloc_pct_at_100 == b.alloc_pct_at_100);
        assert_true(a.frag_ratio_at_80 == b.frag_ratio_at_80);
        run(policies[i], 8, &b, &rb);
        assert_true(ra.hash != rb.hash); /* another seed, another order */
    }
}

static void test_bad_policy(void **st)
{
    (void)st;
    struct gs_sim_opts o = {.mode = GS_SIM_FGD, .policy = "NoSuchPolicy", .seed = 1, .tune = 1.3};
    struct gs_sim_result res;
    struct gs_diags d = {0};
    assert_int_equal(gs_sim_run_fgd(&trace, &o, NULL, &res, &d), GS_EINVAL);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].msg, "NoSuchPolicy"));
    gs_diags_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slice_loaded),
        cmocka_unit_test(test_fgd_pinned),
        cmocka_unit_test(test_best_fit_pinned),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_bad_policy),
    };
    return cmocka_run_group_tests(tests, load, unload);
}
