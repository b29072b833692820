/*
 * test_cache.c - the cache's aggregates and pod life cycle: assume, confirm,
 * forget, expire, remove; node add/update/remove with pods on them; and
 * gs_cache_check after long random sequences of operations (seeded).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plugins/recorder.h"
#include "sched/cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(const struct gs_cache *c)
{
    char why[256] = "";
    if (gs_cache_check(c, why, sizeof why) != 0) fail_msg("cache check: %s", why);
}

static struct gs_assignment on(int32_t node, uint64_t mask, int32_t milli)
{
    return (struct gs_assignment){node, mask, milli, 0};
}

static void nodes_from_objects_and_specs(void **st)
{
    (void)st;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    struct gs_node *n = test_node("a", 4000, 1LL << 33, 10, 4, "A10", 24576);
    assert_int_equal(gs_cache_add_node(c, n), 0);
    assert_int_equal(gs_cache_add_node(c, n), GS_EEXIST);
    struct gs_labels lab = {0};
    gs_labels_set(&lab, GS_LABEL_GPU_PRODUCT, "T4");
    struct gs_node_spec sp = {.name = "b", .cpu_milli = 8000, .mem_bytes = 1LL << 34, .ngpus = 2, .gpu_mem_mib = 15360,
                              .labels = &lab};
    assert_int_equal(gs_cache_add_node_spec(c, &sp), 1);
    gs_labels_free(&lab); /* the cache copied them */
    struct gs_node_info *a = gs_cache_node(c, 0), *b = gs_cache_node(c, 1);
    assert_int_equal(a->cpu_alloc, 4000);
    assert_int_equal(a->mem_alloc, 1LL << 33);
    assert_int_equal(a->pods_alloc, 10);
    assert_int_equal(a->ngpus, 4);
    assert_int_equal(a->gpu_milli_free, 4000);
    assert_int_equal(a->gpus_whole_free, 4);
    assert_string_equal(gs_cache_model_name(c, a->gpu_model), "A10");
    /* A spec without a model takes the product label. */
    assert_string_equal(gs_cache_model_name(c, b->gpu_model), "T4");
    assert_string_equal(gs_labels_get(b->labels, GS_LABEL_GPU_PRODUCT), "T4");
    assert_int_equal(b->gpus[1].mem_total_mib, 15360);
    assert_int_equal(gs_cache_find_node(c, "b"), 1);
    assert_int_equal(gs_cache_find_node(c, "zz"), -1);
    assert_int_equal(gs_cache_live_nodes(c), 2);
    assert_int_equal(gs_cache_gpu_count(c), 6);
    check(c);
    gs_cache_free(c);
    test_node_free(n);
}

static void assume_confirm_forget_remove(void **st)
{
    (void)st;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    struct gs_node *n = test_node("a", 4000, 1LL << 33, 3, 2, "A10", 24576);
    gs_cache_add_node(c, n);
    struct gs_pod *p1 = test_pod("ns", "p1", 1000, 1LL << 30, 1, 300);
    struct gs_pod *p2 = test_pod("ns", "p2", 1000, 1LL << 30, 1, 800);
    struct gs_assignment a1 = on(0, 0x1, 300), a2 = on(0, 0x1, 800);
    assert_true(gs_cache_fits(c, p1, &a1));
    assert_int_equal(gs_cache_assume(c, p1, &a1, 0), 0);
    assert_int_equal(gs_cache_assume(c, p1, &a1, 0), GS_EEXIST);
    /* GPU 0 has 700 left: 800 does not fit there, but fits on GPU 1. */
    assert_false(gs_cache_fits(c, p2, &a2));
    assert_int_equal(gs_cache_assume(c, p2, &a2, 0), GS_EINVAL);
    a2.gpu_mask = 0x2;
    assert_int_equal(gs_cache_assume(c, p2, &a2, 0), 0);
    struct gs_node_info *ni = gs_cache_node(c, 0);
    assert_int_equal(ni->gpus[0].milli_free, 700);
    assert_int_equal(ni->gpus[1].milli_free, 200);
    assert_int_equal(ni->gpu_milli_free, 900);
    assert_int_equal(ni->gpus_whole_free, 0);
    assert_int_equal(ni->cpu_used, 2000);
    assert_int_equal(gs_cache_gpu_milli_used(c), 1100);
    uint64_t gen = ni->generation;
    assert_int_equal(gs_cache_confirm(c, "ns/p1"), 0);
    /* A confirmed pod cannot be forgotten, only removed. */
    assert_int_equal(gs_cache_forget(c, "ns/p1"), GS_ESTATE);
    assert_int_equal(gs_cache_forget(c, "ns/p2"), 0);
    assert_int_equal(gs_cache_forget(c, "ns/p2"), GS_ENOENT);
    assert_true(ni->generation > gen);
    assert_int_equal(ni->gpus[1].milli_free, 1000);
    assert_int_equal(ni->gpus_whole_free, 1);
    check(c);
    assert_int_equal(gs_cache_remove_pod(c, "ns/p1"), 0);
    assert_int_equal(gs_cache_remove_pod(c, "ns/p1"), GS_ENOENT);
    assert_int_equal(ni->cpu_used, 0);
    assert_int_equal(ni->gpu_milli_free, 2000);
    assert_int_equal(gs_cache_gpu_milli_used(c), 0);
    check(c);
    gs_cache_free(c);
    test_node_free(n);
    test_pod_free(p1);
    test_pod_free(p2);
}

static void fits_checks_every_limit(void **st)
{
    (void)st;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    struct gs_node *n = test_node("a", 2000, 1LL << 30, 1, 2, "A10", 1000);
    gs_cache_add_node(c, n);
    struct gs_pod *p = test_pod("ns", "p", 3000, 0, 0, 0);
    struct gs_assignment none = on(0, 0, 0);
    assert_false(gs_cache_fits(c, p, &none)); /* cpu */
    p->demand.cpu_milli = 100;
    p->demand.mem_bytes = 2LL << 30;
    assert_false(gs_cache_fits(c, p, &none)); /* memory */
    p->demand.mem_bytes = 0;
    assert_true(gs_cache_fits(c, p, &none));
    struct gs_assignment bad = on(0, 0x1, 0);
    assert_false(gs_cache_fits(c, p, &bad)); /* GPUs for a pod without GPUs */
    p->demand.gpu_count = 1;
    p->demand.gpu_milli = 500;
    p->demand.gpu_mem_mib = 2000;
    struct gs_assignment g = {0, 0x4, 500, 2000};
    assert_false(gs_cache_fits(c, p, &g)); /* no GPU 2 */
    g.gpu_mask = 0x1;
    assert_false(gs_cache_fits(c, p, &g)); /* GPU memory */
    g.mem_mib = 500;
    assert_true(gs_cache_fits(c, p, &g));
    gs_cache_set_gpu_health(c, 0, 0, false);
    assert_false(gs_cache_fits(c, p, &g)); /* unhealthy */
    assert_int_equal(gs_cache_node(c, 0)->gpu_milli_free, 1000);
    g.gpu_mask = 0x2;
    assert_int_equal(gs_cache_assume(c, p, &g, 0), 0);
    struct gs_pod *q = test_pod("ns", "q", 100, 0, 0, 0);
    assert_false(gs_cache_fits(c, q, &none)); /* pods: 1 allowed */
    check(c);
    gs_cache_free(c);
    test_node_free(n);
    test_pod_free(p);
    test_pod_free(q);
}

static int expired;
static void on_expire(const struct gs_pod *p, void *arg)
{
    (void)arg;
    assert_string_equal(p->meta.name, "late");
    expired++;
}

static void assumed_pods_expire_on_the_clock(void **st)
{
    (void)st;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 100);
    struct gs_cache *c = gs_cache_new(&clk);
    struct gs_node *n = test_node("a", 4000, 1LL << 33, 0, 2, "A10", 0);
    gs_cache_add_node(c, n);
    struct gs_pod *late = test_pod("ns", "late", 100, 0, 1, 1000), *ok = test_pod("ns", "ok", 100, 0, 1, 1000);
    struct gs_pod *forever = test_pod("ns", "forever", 100, 0, 0, 0);
    assert_int_equal(gs_cache_assume(c, late, &(struct gs_assignment){0, 1, 1000, 0}, 1000), 0);
    assert_int_equal(gs_cache_assume(c, ok, &(struct gs_assignment){0, 2, 1000, 0}, 1000), 0);
    assert_int_equal(gs_cache_assume(c, forever, &(struct gs_assignment){0, 0, 0, 0}, 0), 0);
    gs_cache_confirm(c, "ns/ok");
    gs_clock_set(&clk, 999);
    assert_int_equal(gs_cache_expire(c, on_expire, NULL), 0);
    gs_clock_set(&clk, 1000);
    expired = 0;
    assert_int_equal(gs_cache_expire(c, on_expire, NULL), 1);
    assert_int_equal(expired, 1);
    assert_null(gs_cache_pod_assignment(c, "ns/late"));
    assert_non_null(gs_cache_pod_assignment(c, "ns/ok"));
    assert_non_null(gs_cache_pod_assignment(c, "ns/forever"));
    assert_int_equal(gs_cache_node(c, 0)->gpus[0].milli_free, 1000);
    check(c);
    gs_cache_free(c);
    test_node_free(n);
    test_pod_free(late);
    test_pod_free(ok);
    test_pod_free(forever);
}

static void node_removal_and_update_keep_books(void **st)
{
    (void)st;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    struct gs_node *a = test_node("a", 4000, 1LL << 33, 0, 2, "A10", 0);
    struct gs_node *b = test_node("b", 4000, 1LL << 33, 0, 4, "A10", 0);
    struct gs_node *b2 = test_node("b", 8000, 1LL << 33, 0, 2, "A100", 0);
    gs_cache_add_node(c, a);
    gs_cache_add_node(c, b);
    struct gs_pod *p = test_pod("ns", "p", 1000, 0, 1, 500), *q = test_pod("ns", "q", 1000, 0, 1, 1000);
    assert_int_equal(gs_cache_add_bound(c, p, &(struct gs_assignment){1, 0x2, 500, 0}), 0);
    assert_int_equal(gs_cache_assume(c, q, &(struct gs_assignment){0, 0x1, 1000, 0}, 0), 0);
    struct gs_node_info *bi = gs_cache_node(c, 1);
    assert_int_equal(gs_cache_update_node(c, b2), 0);
    assert_ptr_equal(gs_cache_node(c, 1), bi); /* address is stable */
    assert_int_equal(bi->cpu_alloc, 8000);
    assert_int_equal(bi->cpu_used, 1000);
    assert_int_equal(bi->gpus[1].milli_free, 500);
    assert_string_equal(gs_cache_model_name(c, bi->gpu_model), "A100");
    assert_int_equal(gs_cache_gpu_count(c), 4);
    check(c);
    assert_int_equal(gs_cache_remove_node(c, "a"), 0);
    assert_int_equal(gs_cache_remove_node(c, "a"), GS_ENOENT);
    assert_null(gs_cache_pod_assignment(c, "ns/q"));
    assert_false(gs_cache_node(c, 0)->live);
    assert_int_equal(gs_cache_gpu_milli_used(c), 500);
    check(c);
    /* The tombstone slot is reused. */
    assert_int_equal(gs_cache_add_node(c, a), 0);
    assert_true(gs_cache_node(c, 0)->live);
    check(c);
    gs_cache_free(c);
    test_node_free(a);
    test_node_free(b);
    test_node_free(b2);
    test_pod_free(p);
    test_pod_free(q);
}

static uint32_t rnd(uint64_t *x)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*x >> 33);
}

/* Random operations; gs_cache_check after each one. */
static void random_operations_keep_invariants(void **st)
{
    (void)st;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    enum { NN = 6, NP = 80 };
    struct gs_node *nodes[NN];
    for (int i = 0; i < NN; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i);
        nodes[i] = test_node(name, 16000, 1LL << 36, 0, 1 + i % 8, "V100M16", 16384);
        gs_cache_add_node(c, nodes[i]);
    }
    struct gs_pod *pods[NP];
    bool placed[NP] = {0};
    uint64_t x = 20240601;
    for (int i = 0; i < NP; i++) {
        char name[8];
        snprintf(name, sizeof name, "p%d", i);
        int32_t gpus = rnd(&x) % 3;
        pods[i] = test_pod("ns", name, rnd(&x) % 3000, (int64_t)(rnd(&x) % 4096) << 20, gpus,
                           gpus == 1 ? (int32_t)(rnd(&x) % 1000) + 1 : 1000);
        pods[i]->demand.gpu_mem_mib = gpus && rnd(&x) % 2 ? rnd(&x) % 4096 : 0;
    }
    int ops = 0, assumed = 0;
    for (int step = 0; step < 3000; step++) {
        int i = (int)(rnd(&x) % NP);
        char key[16];
        snprintf(key, sizeof key, "ns/p%d", i);
        uint32_t op = rnd(&x) % 10;
        gs_clock_advance(&clk, 10);
        if (!placed[i]) {
            int32_t node = (int32_t)(rnd(&x) % NN);
            const struct gs_node_info *ni = gs_cache_node(c, node);
            struct gs_assignment a = {node, 0, pods[i]->demand.gpu_milli, pods[i]->demand.gpu_mem_mib};
            for (int32_t g = 0, k = pods[i]->demand.gpu_count; g < ni->ngpus && k; g++)
                if (rnd(&x) % 2 || ni->ngpus - g == k) a.gpu_mask |= 1ULL << g, k--;
            bool fits = gs_cache_fits(c, pods[i], &a);
            int r = gs_cache_assume(c, pods[i], &a, op < 3 ? gs_clock_now(&clk) + 50 : 0);
            assert_int_equal(r, fits ? 0 : GS_EINVAL);
            placed[i] = fits;
            assumed += fits;
        } else if (op < 4) {
            gs_cache_confirm(c, key);
        } else if (op < 7) {
            int r = gs_cache_forget(c, key);
            if (r == 0) placed[i] = false;
        } else if (op < 9) {
            assert_int_equal(gs_cache_remove_pod(c, key), 0);
            placed[i] = false;
        } else {
            gs_cache_expire(c, NULL, NULL);
            for (int k = 0; k < NP; k++) {
                char kk[16];
                snprintf(kk, sizeof kk, "ns/p%d", k);
                placed[k] = gs_cache_pod_assignment(c, kk) != NULL;
            }
        }
        if (rnd(&x) % 50 == 0) gs_cache_set_gpu_health(c, (int32_t)(rnd(&x) % NN), 0, rnd(&x) % 2);
        check(c);
        ops++;
    }
    assert_true(assumed > 100);
    /* Everything released: aggregates back to the empty cluster. */
    for (int i = 0; i < NP; i++) {
        char key[16];
        snprintf(key, sizeof key, "ns/p%d", i);
        gs_cache_remove_pod(c, key);
    }
    assert_int_equal(gs_cache_gpu_milli_used(c), 0);
    for (int i = 0; i < NN; i++) {
        const struct gs_node_info *ni = gs_cache_node(c, i);
        assert_int_equal(ni->cpu_used, 0);
        for (int g = 0; g < ni->ngpus; g++) assert_int_equal(ni->gpus[g].mem_free_mib, 16384);
    }
    check(c);
    gs_cache_free(c);
    for (int i = 0; i < NN; i++) test_node_free(nodes[i]);
    for (int i = 0; i < NP; i++) test_pod_free(pods[i]);
}

static void check_detects_corruption(void **st)
{
    (void)st;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    struct gs_node *n = test_node("a", 4000, 1LL << 33, 0, 2, "A10", 0);
    gs_cache_add_node(c, n);
    struct gs_pod *p = test_pod("ns", "p", 1000, 0, 1, 500);
    gs_cache_assume(c, p, &(struct gs_assignment){0, 1, 500, 0}, 0);
    gs_cache_node(c, 0)->gpus[0].milli_free = 600;
    char why[256] = "";
    assert_int_equal(gs_cache_check(c, why, sizeof why), GS_ESTATE);
    assert_non_null(strstr(why, "milli_free"));
    gs_cache_node(c, 0)->gpus[0].milli_free = 500;
    gs_cache_node(c, 0)->cpu_used = 1;
    assert_int_equal(gs_cache_check(c, why, sizeof why), GS_ESTATE);
    assert_non_null(strstr(why, "cpu_used"));
    gs_cache_node(c, 0)->cpu_used = 1000;
    check(c);
    gs_cache_free(c);
    test_node_free(n);
    test_pod_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nodes_from_objects_and_specs),
        cmocka_unit_test(assume_confirm_forget_remove),
        cmocka_unit_test(fits_checks_every_limit),
        cmocka_unit_test(assumed_pods_expire_on_the_clock),
        cmocka_unit_test(node_removal_and_update_keep_books),
        cmocka_unit_test(random_operations_keep_invariants),
        cmocka_unit_test(check_detects_corruption),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
