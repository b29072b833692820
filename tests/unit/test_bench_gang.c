/*
 * test_bench_gang.c - the gang shapes of `gpusched bench` at a small scale:
 * shape names and their errors, every gang whole when the cluster holds
 * them (with and without the low-priority filler that forces preemption),
 * and whole-or-nothing when it does not: some gangs complete, the rest get
 * no member, none is partial; and the same binds and evictions with node
 * classes off and forced on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cli/bench_gang.h"
#include "core/error.h"
#include "sched/framework.h" /* enum gs_node_classes */

#include <string.h>

static void shapes_parse(void **st)
{
    (void)st;
    struct gs_bench_gang_opts o = {0};
    char why[256];
    assert_int_equal(gs__bench_gang_shape("gang-1000x3", &o, why, sizeof why), 0);
    assert_int_equal(o.gangs, 1000);
    assert_int_equal(o.size, 3);
    assert_false(o.preempt);
    assert_int_equal(gs__bench_gang_shape("gang-10x5000-preempt", &o, why, sizeof why), 0);
    assert_int_equal(o.gangs, 10);
    assert_int_equal(o.size, 5000);
    assert_true(o.preempt);
    const char *bad[] = {"gang-0x3", "gang-3", "gang-3x", "gang-x3", "gang-3x3-later", "gang-3x3preempt",
                         "gang-2000000x1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = 0;
        assert_int_equal(gs__bench_gang_shape(bad[i], &o, why, sizeof why), -1);
        assert_non_null(strstr(why, bad[i])); /* names the value */
        assert_non_null(strstr(why, "gang-<gangs>x<pods per gang>[-preempt]")); /* and what is wanted */
    }
    why[0] = 0;
    assert_int_equal(gs__bench_gang_shape("dra-template", &o, why, sizeof why), -1);
    assert_string_equal(why, ""); /* not a gang shape: the caller tries the others */
}

static void run(long nodes, const char *shape, struct gs_bench_gang_result *r)
{
    struct gs_bench_gang_opts o = {.nodes = nodes, .gpus = 8, .seed = 42};
    char why[256] = "";
    assert_int_equal(gs__bench_gang_shape(shape, &o, why, sizeof why), 0);
    int rc = gs__bench_gang_run(&o, r, why, sizeof why);
    if (rc) fail_msg("%s: %s", shape, why);
    assert_int_equal(r->pods, o.gangs * o.size);
    assert_int_equal(r->gangs_whole + r->gangs_partial + r->gangs_none, o.gangs);
}

/* kube's shapes scaled down: many small gangs, a few large ones. */
static void gangs_fit_whole(void **st)
{
    (void)st;
    const char *shapes[] = {"gang-40x3", "gang-3x40", "gang-2x100"};
    for (size_t i = 0; i < 3; i++) {
        struct gs_bench_gang_result r;
        run(20, shapes[i], &r);
        assert_int_equal(r.gangs_partial, 0);
        assert_int_equal(r.bound, r.pods);
        assert_int_equal(r.gangs_none, 0);
        assert_int_equal(r.evictions, 0);
        assert_int_equal(r.filler, 0);
        assert_true(r.attempts >= r.pods);
    }
}

/* Every node full of low-priority pods: each gang preempts its room. */
static void gangs_preempt_whole(void **st)
{
    (void)st;
    struct gs_bench_gang_result r;
    run(20, "gang-40x3-preempt", &r);
    assert_int_equal(r.filler, 80);
    assert_int_equal(r.gangs_partial, 0);
    assert_int_equal(r.bound, 120);
    /* 120 pods of 100m need 12 of the 1-CPU filler pods gone at least */
    assert_true(r.evictions >= 12);
    assert_true(r.evictions < 80);
    run(4, "gang-3x15-preempt", &r);
    assert_int_equal(r.gangs_partial, 0);
    assert_int_equal(r.bound, 45);
    assert_true(r.evictions >= 5);
}

/* 2 nodes hold 80 pods of 100m: of four gangs of 30, two run whole and two get nothing. */
static void too_little_room_is_all_or_nothing(void **st)
{
    (void)st;
    struct gs_bench_gang_result r;
    run(2, "gang-4x30", &r);
    assert_int_equal(r.gangs_partial, 0);
    assert_int_equal(r.gangs_whole, 2);
    assert_int_equal(r.gangs_none, 2);
    assert_int_equal(r.bound, 60);
}

/* The same shapes judged on every node and by node class (a planned member's
 * node apart from its class, the plan on class representatives): every bind
 * and eviction equal, in the same order. */
static void classes_decide_the_same(void **st)
{
    (void)st;
    const struct {
        long nodes;
        const char *shape;
    } runs[] = {{20, "gang-40x3"}, {20, "gang-3x40"}, {2, "gang-4x30"}, {20, "gang-40x3-preempt"}, {4, "gang-3x15-preempt"}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct gs_bench_gang_result r[2];
        for (int k = 0; k < 2; k++) {
            struct gs_bench_gang_opts o = {.nodes = runs[i].nodes, .gpus = 8, .seed = 42,
                                           .classes = k ? GS_CLASSES_ALWAYS : GS_CLASSES_OFF};
            char why[256] = "";
            assert_int_equal(gs__bench_gang_shape(runs[i].shape, &o, why, sizeof why), 0);
            if (gs__bench_gang_run(&o, &r[k], why, sizeof why)) fail_msg("%s: %s", runs[i].shape, why);
        }
        assert_int_equal(r[0].class_cycles, 0);
        /* Most binds chosen by class; with preemption, cycles run per node while a nomination is held. */
        bool preempt = strstr(runs[i].shape, "preempt") != NULL;
        if (preempt ? !r[1].class_cycles : r[1].class_cycles * 2 <= (uint64_t)r[1].bound)
            fail_msg("%s: %llu of %ld cycles (%ld bound) by class", runs[i].shape,
                     (unsigned long long)r[1].class_cycles, r[1].attempts, r[1].bound);
        if (r[0].decisions != r[1].decisions) fail_msg("%s: decisions differ by class", runs[i].shape);
        assert_int_equal(r[0].bound, r[1].bound);
        assert_int_equal(r[0].evictions, r[1].evictions);
        assert_int_equal(r[0].attempts, r[1].attempts);
        assert_int_equal(r[1].gangs_partial, 0);
    }
}

static void bad_options(void **st)
{
    (void)st;
    struct gs_bench_gang_opts o = {.nodes = 0, .gpus = 8, .gangs = 1, .size = 1};
    struct gs_bench_gang_result r;
    char why[256] = "";
    assert_int_equal(gs__bench_gang_run(&o, &r, why, sizeof why), GS_EINVAL);
    assert_non_null(strstr(why, "nodes >= 1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shapes_parse),
        cmocka_unit_test(gangs_fit_whole),
        cmocka_unit_test(gangs_preempt_whole),
        cmocka_unit_test(too_little_room_is_all_or_nothing),
        cmocka_unit_test(classes_decide_the_same),
        cmocka_unit_test(bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
