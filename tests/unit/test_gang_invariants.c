/*
 * test_gang_invariants.c - the gang invariant checker (tests/fuzz/
 * gang_checker.h) on a bounded number of seeded random event strings, both
 * with whole-group plans and member by member, and on a few fixed strings:
 * two groups competing for the same capacity, late members, preemptions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../fuzz/gang_checker.h"
#include "sched/preemption_core.h"

#define ITERATIONS 400
#define LEN 96

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint8_t next_byte(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint8_t)(rng >> 32);
}

static void run_ok(const uint8_t *d, size_t n, int iter)
{
    char why[512] = "";
    int rc = gc_run(d, n, why, sizeof why);
    if (rc) fprintf(stderr, "iteration %d: %s\n", iter, why);
    assert_int_equal(rc, 0);
}

static void test_fixed(void **st)
{
    (void)st;
    /* Two 4 x 2-GPU groups at once on 12 GPUs, then a third; time passes, pods complete. */
    const uint8_t two[] = {1, 0, 6, 0, 6, 0, 6, 4, 15, 5, 0, 5, 1, 4, 15};
    run_ok(two, sizeof two, -1);
    /* Member by member, groups arriving one pod at a time, with high-priority singles. */
    const uint8_t late[] = {0, 1, 2, 1, 6, 2, 0, 3, 28, 2, 0, 2, 0, 4, 11, 3, 20, 2, 0, 4, 11};
    run_ok(late, sizeof late, -2);
    const uint8_t late100[] = {2, 1, 2, 1, 6, 2, 0, 3, 28, 2, 0, 4, 12, 2, 0, 4, 12};
    run_ok(late100, sizeof late100, -3);
}

/* The fuzzer's deadlock (tests/fuzz/corpus/gang_events/nominated_siblings):
 * a 4 x 2-GPU group of priority 2 preempts lower-priority gangs, and every
 * member is nominated to its node. Planning the group then assumed member
 * after member while the nominations of the members already assumed still
 * held their room, so the last member found no node; the failed plan was
 * remembered, and the group never ran although 8 of 12 GPUs were free. */
static void test_nominated_siblings_plan_their_gang(void **st)
{
    (void)st;
    const uint8_t d[] = {3,  3,  127, 0, 32,  32,  32,  14, 59, 1, 92, 152,
                         0,  48, 96,  0, 0,   47,  103, 53, 15, 0, 0,  33};
    run_ok(d, sizeof d, -4);
}

/* The rule that fixes it: a nominated pod the cache holds counts once. */
static void test_nomination_of_a_placed_pod_holds_nothing(void **st)
{
    (void)st;
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_cache *c = gs_cache_new(&clock);
    assert_non_null(c);
    struct gs_node_spec sp = {.name = "n0", .cpu_milli = 64000, .mem_bytes = 256LL << 30, .gpu_model = "A100",
                              .ngpus = 4};
    assert_int_equal(gs_cache_add_node_spec(c, &sp), 0);
    struct gs_pod *a = gc_make_pod("a", 2, 1, NULL), *b = gc_make_pod("b", 2, 1, NULL);
    assert_non_null(a);
    assert_non_null(b);
    struct gs_preempt_opts o = {0};
    struct gs_preemption *p = gs_preemption_new(&o, &clock, c);
    assert_non_null(p);
    const struct gs_node_info *n0 = gs_cache_node(c, 0);
    assert_int_equal(gs_preempt_nominate(p, a, 0), 0);
    assert_false(gs_preempt_blocked(p, b, n0)); /* 2 nominated + 2 asked of 4 free */
    struct gs_assignment as = {.node = 0, .gpu_mask = 0x3, .milli = 1000};
    assert_int_equal(gs_cache_assume(c, a, &as, 0), 0);
    /* a holds GPUs 0-1 in the cache; its nomination must not hold 2 more. */
    assert_false(gs_preempt_blocked(p, b, n0));
    assert_int_equal(gs_cache_forget(c, "default/a"), 0);
    struct gs_pod *big = gc_make_pod("big", 3, 1, NULL);
    assert_non_null(big);
    assert_true(gs_preempt_blocked(p, big, n0)); /* unplaced again: its room is held */
    gs_preemption_free(p);
    gs_cache_free(c);
    struct gs_pod *pods[] = {a, b, big};
    for (size_t i = 0; i < 3; i++) {
        gs_pod_clear(pods[i]);
        free(pods[i]);
    }
}

/* The room a gang's preemption made belongs to the group: a member may take
 * a sibling's nominated room, a pod of another group may not. Without this
 * the group's plan (siblings assumed) and its members' own cycles (siblings
 * not yet placed) disagreed, and a gang-heavy replay retried one group at
 * one instant without end. */
static void test_gang_siblings_share_their_nominated_room(void **st)
{
    (void)st;
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_cache *c = gs_cache_new(&clock);
    assert_non_null(c);
    struct gs_node_spec sp = {.name = "n0", .cpu_milli = 64000, .mem_bytes = 256LL << 30, .gpu_model = "A100",
                              .ngpus = 4};
    assert_int_equal(gs_cache_add_node_spec(c, &sp), 0);
    struct gs_pod *a = gc_make_pod("a", 3, 1, "g"), *b = gc_make_pod("b", 2, 1, "g"), *x = gc_make_pod("x", 2, 1, "h");
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(x);
    struct gs_preempt_opts o = {0};
    struct gs_preemption *p = gs_preemption_new(&o, &clock, c);
    assert_non_null(p);
    const struct gs_node_info *n0 = gs_cache_node(c, 0);
    assert_int_equal(gs_preempt_nominate(p, a, 0), 0);
    assert_false(gs_preempt_blocked(p, b, n0)); /* its sibling's room */
    assert_true(gs_preempt_blocked(p, x, n0));  /* 3 nominated + 2 asked of 4 free */
    gs_preemption_free(p);
    gs_cache_free(c);
    struct gs_pod *pods[] = {a, b, x};
    for (size_t i = 0; i < 3; i++) {
        gs_pod_clear(pods[i]);
        free(pods[i]);
    }
}

static void test_random(void **st)
{
    (void)st;
    uint8_t d[LEN];
    for (int it = 0; it < ITERATIONS; it++) {
        for (size_t i = 0; i < LEN; i++) d[i] = next_byte();
        run_ok(d, LEN, it);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed),
        cmocka_unit_test(test_nominated_siblings_plan_their_gang),
        cmocka_unit_test(test_nomination_of_a_placed_pod_holds_nothing),
        cmocka_unit_test(test_gang_siblings_share_their_nominated_room),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
