/*
 * test_bound.c - the upper bound of sim/bound.c: exact on hand-made
 * clusters whose optimum is known, never below the optimum found by brute
 * force on random small instances, never below any policy's result in the
 * FGD experiment on the openb slice (tests/data/openb_slice), and a clear
 * error for every malformed input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sim/bound.h"
#include "sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t bound_of(const struct gs_bound_class *c, size_t n, int64_t gpus, struct gs_bound *b)
{
    struct gs_diags d = {0};
    assert_int_equal(gs_bound_classes(c, n, gpus, b, &d), 0);
    assert_int_equal(d.n, 0);
    gs_diags_free(&d);
    return b->bound_milli;
}

/*--- Known optima ---*/

static void test_two_big_shares_one_gpu(void **st)
{
    (void)st;
    /* 600 + 600 > 1000: the best is one of them. min(C, D) says 1000. */
    struct gs_bound_class c[] = {{600, 1, 2}};
    struct gs_bound b;
    assert_int_equal(bound_of(c, 1, 1, &b), 600);
    assert_int_equal(b.demand_milli, 1200);
    assert_int_equal(b.capacity_milli, 1000);
}

static void test_pairs_of_470(void **st)
{
    (void)st;
    /* five 470s on two GPUs: two per GPU, 1880; the trivial bound says 2000 */
    struct gs_bound_class c[] = {{470, 1, 5}};
    struct gs_bound b;
    assert_int_equal(bound_of(c, 1, 2, &b), 1880);
    assert_non_null(strstr(b.function, "fs"));
}

static void test_810_with_few_fillers(void **st)
{
    (void)st;
    /* four GPUs, four 810s, one 160, a 1000: best 3 x 810 + 160 + 1000 = 3590
     * (the 1000 takes a GPU of its own); D = 4400 */
    struct gs_bound_class c[] = {{810, 1, 4}, {160, 1, 1}, {1000, 1, 1}};
    struct gs_bound b;
    assert_int_equal(bound_of(c, 3, 4, &b), 3590);
    assert_non_null(strstr(b.function, "threshold"));
}

static void test_trivial_cases(void **st)
{
    (void)st;
    struct gs_bound b;
    struct gs_bound_class whole[] = {{1000, 2, 3}}; /* 6 GPUs asked, 4 there */
    assert_int_equal(bound_of(whole, 1, 4, &b), 4000);
    struct gs_bound_class few[] = {{300, 1, 2}, {1000, 1, 1}}; /* everything fits */
    assert_int_equal(bound_of(few, 2, 4, &b), 1600);
    assert_int_equal(bound_of(NULL, 0, 4, &b), 0); /* no GPU pods */
    struct gs_bound_class none[] = {{500, 1, 0}};
    assert_int_equal(bound_of(none, 1, 1, &b), 0);
}

/*--- Brute force on random small instances ---*/

struct inst {
    int n, gpus;
    int32_t m[8], k[8];
};

static int64_t best_from(const struct inst *in, int i, int32_t *load)
{
    if (i == in->n) return 0;
    int64_t best = best_from(in, i + 1, load); /* skip pod i */
    int g = in->gpus, k = in->k[i];
    /* every set of k distinct GPUs, as a bit mask */
    for (unsigned mask = 0; mask < (1u << g); mask++) {
        if (__builtin_popcount(mask) != k) continue;
        bool ok = true;
        for (int j = 0; j < g; j++)
            if ((mask >> j & 1) && load[j] + in->m[i] > 1000) ok = false;
        if (!ok) continue;
        for (int j = 0; j < g; j++)
            if (mask >> j & 1) load[j] += in->m[i];
        int64_t v = (int64_t)k * in->m[i] + best_from(in, i + 1, load);
        if (v > best) best = v;
        for (int j = 0; j < g; j++)
            if (mask >> j & 1) load[j] -= in->m[i];
    }
    return best;
}

static uint64_t next(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static void test_never_below_brute_force(void **st)
{
    (void)st;
    static const int32_t sizes[] = {50, 110, 160, 190, 230, 320, 350, 460, 470, 500, 550, 650, 810, 1000};
    uint64_t seed = 19;
    int exact = 0;
    for (int t = 0; t < 1000; t++) {
        struct inst in = {.n = 2 + (int)(next(&seed) % 6), .gpus = 1 + (int)(next(&seed) % 3)};
        struct gs_bound_class c[8];
        for (int i = 0; i < in.n; i++) {
            in.m[i] = sizes[next(&seed) % (sizeof sizes / sizeof *sizes)];
            in.k[i] = next(&seed) % 4 == 0 ? 1 + (int)(next(&seed) % (unsigned)in.gpus) : 1;
            c[i] = (struct gs_bound_class){in.m[i], in.k[i], 1};
        }
        int32_t load[3] = {0};
        int64_t opt = best_from(&in, 0, load);
        struct gs_bound b;
        int64_t ub = bound_of(c, (size_t)in.n, in.gpus, &b);
        if (ub < opt) fail_msg("instance %d: bound %lld below the optimum %lld (%s)", t, (long long)ub,
                               (long long)opt, b.function);
        exact += ub == opt;
    }
    /* the bound is not just min(C, D): it meets the optimum on most of them */
    printf("bound equal to the optimum on %d of 1000 instances\n", exact);
    assert_true(exact > 650);
}

/*--- The experiment's prefix ---*/

static void test_fgd_prefix(void **st)
{
    (void)st;
    struct gs_pod pods[5];
    memset(pods, 0, sizeof pods);
    int32_t milli[] = {600, 0, 600, 1000, 1000};
    for (int i = 0; i < 5; i++) {
        pods[i].demand.gpu_count = milli[i] ? 1 : 0;
        pods[i].demand.gpu_milli = milli[i];
    }
    pods[2].demand.gpu_milli = 1400; /* clipped to 1000 like the experiment */
    struct gs_bound b;
    struct gs_diags d = {0};
    /* two GPUs: 600 + 1000 reach 2000 at pod 3 (600+1000+1000 > 2000) */
    assert_int_equal(gs_bound_fgd(pods, 5, 2000, &b, &d), 0);
    assert_int_equal(b.demand_milli, 2600);
    assert_int_equal(b.bound_milli, 2000);
    assert_int_equal(gs_bound_fgd(pods, 1, 2000, &b, &d), 0); /* never reaches 100%: all pods */
    assert_int_equal(b.demand_milli, 600);
    assert_int_equal(b.bound_milli, 600);
    gs_diags_free(&d);
}

/*--- Errors ---*/

static void expect_error(const struct gs_bound_class *c, size_t n, int64_t gpus, const char *path, const char *text)
{
    struct gs_diags d = {0};
    struct gs_bound b;
    assert_int_equal(gs_bound_classes(c, n, gpus, &b, &d), GS_EINVAL);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, path);
    if (!strstr(d.v[0].msg, text)) fail_msg("message \"%s\" lacks \"%s\"", d.v[0].msg, text);
    gs_diags_free(&d);
}

static void test_errors(void **st)
{
    (void)st;
    struct gs_bound_class ok = {500, 1, 1};
    expect_error(&ok, 1, 0, "gpus", "invalid value 0: the cluster needs at least one GPU");
    struct gs_bound_class c[2] = {{500, 1, 1}, {0, 1, 1}};
    expect_error(c, 2, 1, "classes[1]", "milli: invalid value 0: a GPU share is 1..1000");
    c[1] = (struct gs_bound_class){1001, 1, 1};
    expect_error(c, 2, 1, "classes[1]", "milli: invalid value 1001");
    c[1] = (struct gs_bound_class){500, 0, 1};
    expect_error(c, 2, 1, "classes[1]", "gpus: invalid value 0: a GPU pod asks for at least one GPU");
    c[1] = (struct gs_bound_class){500, 1, -2};
    expect_error(c, 2, 1, "classes[1]", "pods: invalid value -2: a count is not negative");
    struct gs_diags d = {0};
    struct gs_bound b;
    assert_int_equal(gs_bound_fgd(NULL, 0, 999, &b, &d), GS_EINVAL);
    assert_string_equal(d.v[0].path, "capacity");
    assert_non_null(strstr(d.v[0].msg, "invalid value 999 milli"));
    gs_diags_free(&d);
}

/*--- Every policy on the openb slice ---*/

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

static void test_slice_policies_below_bound(void **st)
{
    (void)st;
    static const char *const policies[] = {"Random", "DotProd", "GpuClustering", "GpuPacking",
                                           "BestFit", "FGD",     "FGDPack"};
    for (uint64_t seed = 42; seed <= 45; seed++) {
        double bound = -1;
        for (size_t i = 0; i < sizeof policies / sizeof *policies; i++) {
            struct gs_sim_opts o = {.mode = GS_SIM_FGD, .policy = policies[i], .seed = seed, .tune = 1.3,
                                    .bound = true};
            struct gs_sim_result with, without;
            struct gs_diags d = {0};
            assert_int_equal(gs_sim_run_fgd(&trace, &o, NULL, &with, &d), 0);
            o.bound = false;
            assert_int_equal(gs_sim_run_fgd(&trace, &o, NULL, &without, &d), 0);
            gs_diags_free(&d);
            assert_true(with.has_bound);
            assert_false(without.has_bound);
            /* the bound changes no decision */
            assert_true(with.alloc_pct_at_100 == without.alloc_pct_at_100);
            assert_int_equal(with.pods_scheduled, without.pods_scheduled);
            if (with.alloc_pct_at_100 > with.bound_pct)
                fail_msg("%s seed %llu: alloc %.4f above the bound %.4f", policies[i], (unsigned long long)seed,
                         with.alloc_pct_at_100, with.bound_pct);
            assert_true(with.bound_pct <= 100.0);
            /* one value per seed: it depends on the trace and seed only */
            if (bound < 0) bound = with.bound_pct;
            assert_true(bound == with.bound_pct);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_big_shares_one_gpu),
        cmocka_unit_test(test_pairs_of_470),
        cmocka_unit_test(test_810_with_few_fillers),
        cmocka_unit_test(test_trivial_cases),
        cmocka_unit_test(test_never_below_brute_force),
        cmocka_unit_test(test_fgd_prefix),
        cmocka_unit_test(test_errors),
        cmocka_unit_test_setup_teardown(test_slice_policies_below_bound, load, unload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
