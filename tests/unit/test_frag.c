/*
 * test_frag.c - the FGD fragmentation model: target workload selection, F on
 * hand-computed states, the per-node cache and state memo, cluster totals,
 * args JSON, and the shared GPU choices.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sched/cache.h"
#include "sched/frag.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct env {
    struct gs_clock clock;
    struct gs_cache *c;
};

static int setup(void **st)
{
    struct env *e = calloc(1, sizeof *e);
    gs_clock_init_sim(&e->clock, 0);
    e->c = gs_cache_new(&e->clock);
    *st = e;
    return e->c ? 0 : -1;
}

static int teardown(void **st)
{
    struct env *e = *st;
    gs_cache_free(e->c);
    free(e);
    return 0;
}

static int add_node(struct gs_cache *c, const char *name, int64_t cpu, const char *model, int32_t ngpus)
{
    struct gs_node_spec s = {.name = name, .cpu_milli = cpu, .mem_bytes = 1LL << 40, .gpu_model = model,
                             .ngpus = ngpus};
    return gs_cache_add_node_spec(c, &s);
}

static struct gs_pod pod_of(const char *name, int64_t cpu, int32_t count, int32_t milli)
{
    struct gs_pod p;
    memset(&p, 0, sizeof p);
    p.meta.name = (char *)name;
    p.meta.namespace_ = (char *)"default";
    p.demand.cpu_milli = cpu;
    p.demand.gpu_count = count;
    p.demand.gpu_milli = milli;
    return p;
}

static void place(struct gs_cache *c, const struct gs_pod *p, int32_t node, uint64_t mask)
{
    struct gs_assignment a = {.node = node, .gpu_mask = mask, .milli = p->demand.gpu_milli};
    assert_int_equal(gs_cache_assume(c, p, &a, 0), 0);
}

/* 10 pods: 5 x share-500, 3 x whole-1, 1 x 2-GPU, 1 x CPU-only. */
static void test_target_workload(void **st)
{
    struct env *e = *st;
    struct gs_pod pods[10];
    const struct gs_pod *pp[10];
    for (int i = 0; i < 10; i++) {
        int32_t count = i < 5 ? 1 : i < 8 ? 1 : i < 9 ? 2 : 0;
        int32_t milli = i < 5 ? 500 : i < 9 ? 1000 : 0;
        pods[i] = pod_of("p", 1000, count, milli);
        pp[i] = &pods[i];
    }
    struct gs_frag_model *m;
    /* 80% coverage: share (50%) + whole-1 (30%) */
    assert_int_equal(gs_frag_model_new(e->c, pp, 10, 0.8, &m), 0);
    assert_int_equal(gs_frag_model_nclasses(m), 2);
    const struct gs_frag_class *c0 = gs_frag_model_class(m, 0), *c1 = gs_frag_model_class(m, 1);
    assert_int_equal(c0->gpu_milli, 500);
    assert_int_equal(c0->count, 5);
    assert_int_equal(c1->gpu_milli, 1000);
    assert_true(fabs(c0->p - 5.0 / 8) < 1e-12 && fabs(c1->p - 3.0 / 8) < 1e-12);
    assert_null(gs_frag_model_class(m, 2));
    gs_frag_model_free(m);
    /* 95% needs the 1-pod classes too; equal counts: larger key (2 GPUs) first */
    assert_int_equal(gs_frag_model_new(e->c, pp, 10, 0.95, &m), 0);
    assert_int_equal(gs_frag_model_nclasses(m), 4);
    assert_int_equal(gs_frag_model_class(m, 2)->gpu_count, 2);
    assert_int_equal(gs_frag_model_class(m, 3)->gpu_count, 0);
    gs_frag_model_free(m);
    assert_int_equal(gs_frag_model_new(e->c, pp, 10, 0.0, &m), GS_EINVAL);
    assert_int_equal(gs_frag_model_new(e->c, pp, 0, 0.95, &m), GS_EINVAL);
}

static struct gs_frag_model *two_class_model(struct gs_cache *c, double p_cpu)
{
    struct gs_frag_class cl[3] = {
        {.cpu_milli = 1000, .gpu_milli = 500, .gpu_count = 1, .p = 0.5},
        {.cpu_milli = 1000, .gpu_milli = 1000, .gpu_count = 1, .p = 0.5},
        {.cpu_milli = 1000, .gpu_milli = 0, .gpu_count = 0, .p = p_cpu},
    };
    struct gs_frag_model *m = NULL;
    assert_int_equal(gs_frag_model_from_classes(c, cl, p_cpu > 0 ? 3 : 2, 1.0, &m), 0);
    return m;
}

static void test_state_values(void **st)
{
    struct env *e = *st;
    struct gs_frag_model *m = two_class_model(e->c, 0);
    int32_t left[4] = {1000, 300, 600, 0};
    /* share-500: runs, GPUs below 500 hold 300 -> 0.5*300; whole: runs, below 1000: 900 -> 0.5*900 */
    assert_true(fabs(gs_frag_state(m, -1, 4000, left, 4) - 600.0) < 1e-9);
    /* not enough CPU: both classes see all 1900 idle milli as fragment */
    assert_true(fabs(gs_frag_state(m, -1, 500, left, 4) - 1900.0) < 1e-9);
    int32_t none[2] = {0, 0};
    assert_true(gs_frag_state(m, -1, 4000, none, 2) == 0.0);
    gs_frag_model_free(m);
    /* a CPU-only class counts all idle GPU milli (weights 0.5, 0.5, 1 -> 1/4, 1/4, 1/2) */
    m = two_class_model(e->c, 1.0);
    double want = 0.25 * 300 + 0.25 * 900 + 0.5 * 1900;
    assert_true(fabs(gs_frag_state(m, -1, 4000, left, 4) - want) < 1e-9);
    gs_frag_model_free(m);
}

static void test_model_constraint(void **st)
{
    struct env *e = *st;
    struct gs_frag_class cl = {.cpu_milli = 0, .gpu_milli = 1000, .gpu_count = 1, .models = "V100M16|V100M32",
                               .p = 1};
    struct gs_frag_model *m;
    assert_int_equal(gs_frag_model_from_classes(e->c, &cl, 1, 1.0, &m), 0);
    int32_t left[2] = {1000, 1000};
    assert_true(gs_frag_state(m, gs_cache_model_id(e->c, "T4"), 1000, left, 2) == 2000.0);
    assert_true(gs_frag_state(m, gs_cache_model_id(e->c, "V100M32"), 1000, left, 2) == 0.0);
    assert_true(gs_frag_state(m, -1, 1000, left, 2) == 2000.0);
    gs_frag_model_free(m);
}

static void test_node_cache_and_memo(void **st)
{
    struct env *e = *st;
    struct gs_frag_model *m = two_class_model(e->c, 0);
    int a = add_node(e->c, "a", 8000, "T4", 4), b = add_node(e->c, "b", 8000, "T4", 4);
    struct gs_node_info *na = gs_cache_node(e->c, a), *nb = gs_cache_node(e->c, b);
    struct gs_frag_stats s0, s1;
    assert_true(gs_frag_node(m, na) == 0.0);
    gs_frag_stats(m, &s0);
    assert_true(gs_frag_node(m, nb) == 0.0); /* identical state: memo hit, no evaluation */
    gs_frag_stats(m, &s1);
    assert_int_equal(s1.evals, s0.evals);
    assert_int_equal(s1.memo_hits, s0.memo_hits + 1);
    /* hypothetical share-500 on GPU 2 of a: leaves 500, which fits share but not whole */
    double after = gs_frag_node_after(m, na, 1000, 1ULL << 2, 500);
    assert_true(fabs(after - 0.5 * 500) < 1e-9);
    /* after placing for real, the node's F must equal the hypothetical one */
    struct gs_pod p = pod_of("p1", 1000, 1, 500);
    place(e->c, &p, a, 1ULL << 2);
    assert_true(fabs(gs_frag_node(m, na) - after) < 1e-9);
    int32_t left[4] = {1000, 1000, 500, 1000};
    assert_true(fabs(gs_frag_node(m, na) - gs_frag_state(m, na->gpu_model, 7000, left, 4)) < 1e-9);
    /* multi-GPU mask */
    double f2 = gs_frag_node_after(m, nb, 2000, 0x3, 1000);
    int32_t l2[4] = {0, 0, 1000, 1000};
    assert_true(fabs(f2 - gs_frag_state(m, nb->gpu_model, 6000, l2, 4)) < 1e-9);
    gs_frag_model_free(m);
}

static void test_cluster_total(void **st)
{
    struct env *e = *st;
    struct gs_frag_model *m = two_class_model(e->c, 0);
    int a = add_node(e->c, "a", 8000, "T4", 2);
    add_node(e->c, "b", 8000, "T4", 2);
    int64_t idle = 0;
    assert_int_equal(gs_frag_cluster_total(m, e->c, &idle), 0);
    assert_int_equal(idle, 4000);
    struct gs_pod p1 = pod_of("p1", 1000, 1, 700), p2 = pod_of("p2", 1000, 1, 200);
    place(e->c, &p1, a, 1);
    /* a: lefts 300,1000 -> share: 0.5*300, whole: 0.5*300 -> 300 */
    assert_int_equal(gs_frag_cluster_total(m, e->c, &idle), 300);
    assert_int_equal(idle, 3300);
    place(e->c, &p2, a, 1); /* lefts 100,1000 -> 100 */
    assert_int_equal(gs_frag_cluster_total(m, e->c, &idle), 100);
    assert_int_equal(gs_cache_remove_pod(e->c, "default/p2"), 0);
    assert_int_equal(gs_frag_cluster_total(m, e->c, &idle), 300);
    assert_int_equal(gs_cache_remove_node(e->c, "a"), 0);
    assert_int_equal(gs_frag_cluster_total(m, e->c, &idle), 0);
    assert_int_equal(idle, 2000);
    gs_frag_model_free(m);
}

static void test_json_args(void **st)
{
    struct env *e = *st;
    struct gs_frag_model *m = two_class_model(e->c, 0), *m2 = NULL;
    json_t *j = gs_frag_model_to_json(m);
    assert_int_equal(json_array_size(j), 2);
    struct gs_diags d = {0};
    assert_int_equal(gs_frag_model_from_json(e->c, j, "args.targetWorkload", &d, &m2), 0);
    int32_t left[3] = {1000, 250, 700};
    assert_true(fabs(gs_frag_state(m, -1, 5000, left, 3) - gs_frag_state(m2, -1, 5000, left, 3)) < 1e-9);
    gs_frag_model_free(m2);
    json_decref(j);
    json_t *bad = json_loads("[{\"gpuMilli\": 2000, \"gpuCount\": 1, \"weight\": 1}, {\"weight\": \"x\"}]", 0, NULL);
    assert_int_equal(gs_frag_model_from_json(e->c, bad, "args.targetWorkload", &d, &m2), GS_EINVAL);
    assert_int_equal(d.n, 2);
    assert_string_equal(d.v[0].path, "args.targetWorkload");
    assert_non_null(strstr(d.v[0].msg, "[0].gpuMilli"));
    assert_non_null(strstr(d.v[1].msg, "[1].weight"));
    json_decref(bad);
    gs_diags_free(&d);
    /* sources: fixed from args, learned online otherwise */
    struct gs_frag_source *src;
    json_t *args = json_pack("{s:o}", "targetWorkload", gs_frag_model_to_json(m));
    assert_int_equal(gs_frag_source_new(e->c, args, &d, &src), 0);
    uint64_t ep;
    assert_non_null(gs_frag_source_model(src, &ep));
    gs_frag_source_free(src);
    json_decref(args);
    assert_int_equal(gs_frag_source_new(e->c, NULL, &d, &src), 0);
    assert_null(gs_frag_source_model(src, &ep));
    struct gs_pod p = pod_of("p", 1000, 1, 500);
    gs_frag_source_observe(src, &p);
    uint64_t ep2;
    struct gs_frag_model *lm = gs_frag_source_model(src, &ep2);
    assert_non_null(lm);
    assert_true(ep2 != ep);
    assert_int_equal(gs_frag_model_class(lm, 0)->gpu_milli, 500);
    gs_frag_source_free(src);
    json_t *badcov = json_pack("{s:f}", "coverage", 1.5);
    assert_int_equal(gs_frag_source_new(e->c, badcov, &d, &src), GS_EINVAL);
    json_decref(badcov);
    gs_diags_free(&d);
    gs_frag_model_free(m);
}

static void test_gpusel(void **st)
{
    struct env *e = *st;
    int a = add_node(e->c, "a", 64000, "T4", 4);
    struct gs_node_info *n = gs_cache_node(e->c, a);
    struct gs_pod p1 = pod_of("p1", 0, 1, 400), p2 = pod_of("p2", 0, 1, 700);
    place(e->c, &p1, a, 1ULL << 1); /* GPU1: 600 left */
    place(e->c, &p2, a, 1ULL << 3); /* GPU3: 300 left */
    assert_int_equal(gs_gpusel_best_fit(n, 1, 250), 1ULL << 3);
    assert_int_equal(gs_gpusel_best_fit(n, 1, 500), 1ULL << 1);
    assert_int_equal(gs_gpusel_best_fit(n, 1, 1000), 1ULL << 0);
    assert_int_equal(gs_gpusel_best_fit(n, 2, 1000), (1ULL << 0) | (1ULL << 2));
    assert_int_equal(gs_gpusel_first_free(n, 3), 0);
    assert_int_equal(gs_gpus_fitting(n, 500), 3);
    uint64_t rng = 7, hits[4] = {0};
    for (int i = 0; i < 400; i++) {
        uint64_t m = gs_gpusel_random(n, 1, 500, &rng);
        assert_true(m == 1 || m == 2 || m == 4);
        hits[__builtin_ctzll(m)]++;
    }
    assert_true(hits[0] > 80 && hits[1] > 80 && hits[2] > 80 && hits[3] == 0);
    uint64_t s1 = 42, s2 = 42;
    for (int i = 0; i < 100; i++) assert_true(gs_rand_below(&s1, 1000) == gs_rand_below(&s2, 1000));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_target_workload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_model_constraint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_cache_and_memo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cluster_total, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpusel, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
