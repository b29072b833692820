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
static void recorder_profile(struct gs_profile *p)
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
        {
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


/*--- Recorder contracts ---*/

static struct gs_schedule_result sched(struct env *e, struct gs_pod *p)
{
    struct gs_schedule_result r;
    assert_int_equal(gs_framework_schedule(e->fw, p, 0, &r), 0);
    return r;
}

static void rec_env(struct env *e, int nodes)
{
    rec_reset();
    env_nodes(e, nodes, 2);
    recorder_profile(&e->prof);
    env_start(e, 7);
}

static void points_run_in_order(void **st)
{
    (void)st;
    struct env e = {0};
    rec_env(&e, 3);
    struct gs_pod *p = test_pod("ns", "a", 100, 0, 0, 0);
    struct gs_schedule_result r = sched(&e, p);
    assert_int_equal(r.code, GS_SUCCESS);
    assert_string_equal(rec_log(), "RecA.preFilter RecB.preFilter RecA.filter RecB.filter RecA.preScore RecB.preScore "
                                   "RecA.score RecB.score RecA.reserve RecB.reserve RecA.permit RecB.permit");
    rec_reset();
    struct gs_status b = gs_framework_bind(e.fw, p);
    assert_int_equal(b.code, GS_SUCCESS);
    /* The first Bind that does not Skip wins: RecB.bind never runs. */
    assert_string_equal(rec_log(), "RecA.preBind RecB.preBind RecA.bind RecA.postBind RecB.postBind");
    assert_non_null(gs_cache_pod_assignment(e.cache, "ns/a"));
    gs_schedule_result_free(&r);
    env_free(&e);
    test_pod_free(p);
}

static void bind_skip_passes_to_next_binder(void **st)
{
    (void)st;
    struct env e = {0};
    rec_env(&e, 2);
    rec_configure("RecA", &(struct rec_behaviour){.fail_at = GS_PT_BIND, .fail_code = GS_SKIP});
    struct gs_pod *p = test_pod("ns", "a", 100, 0, 0, 0);
    struct gs_schedule_result r = sched(&e, p);
    rec_reset();
    rec_configure("RecA", &(struct rec_behaviour){.fail_at = GS_PT_BIND, .fail_code = GS_SKIP});
    assert_int_equal(gs_framework_bind(e.fw, p).code, GS_SUCCESS);
    assert_string_equal(rec_log(), "RecA.preBind RecB.preBind RecA.bind RecB.bind RecA.postBind RecB.postBind");
    gs_schedule_result_free(&r);
    env_free(&e);
    test_pod_free(p);
}

static void prefilter_skip_turns_filter_off(void **st)
{
    (void)st;
    struct env e = {0};
    rec_env(&e, 3);
    rec_configure("RecA", &(struct rec_behaviour){.fail_at = GS_PT_PRE_FILTER, .fail_code = GS_SKIP,
                                                  .reject_nodes = 0x7});
    struct gs_pod *p = test_pod("ns", "a", 100, 0, 0, 0);
    struct gs_schedule_result r = sched(&e, p);
    /* RecA would reject every node, but its Filter is off for this pod. */
    assert_int_equal(r.code, GS_SUCCESS);
    assert_null(strstr(rec_log(), "RecA.filter"));
    assert_non_null(strstr(rec_log(), "RecB.filter"));
    assert_non_null(strstr(rec_log(), "RecA.score"));
    gs_schedule_result_free(&r);
    env_free(&e);
    test_pod_free(p);
}

static void prescore_skip_turns_score_off(void **st)
{
    (void)st;
    struct env e = {0};
    rec_env(&e, 3);
    rec_configure("RecB", &(struct rec_behaviour){.fail_at = GS_PT_PRE_SCORE, .fail_code = GS_SKIP,
                                                  .score_base = 0, .score_step = 50});
    struct gs_pod *p = test_pod("ns", "a", 100, 0, 0, 0);
    struct gs_schedule_result r = sched(&e, p);
    assert_int_equal(r.code, GS_SUCCESS);
    assert_null(strstr(rec_log(), "RecB.score"));
    assert_non_null(strstr(rec_log(), "RecA.score"));
    /* RecB's scores would have picked node 2; without them all tie and node 0 wins. */
    assert_int_equal(r.a.node, 0);
    gs_schedule_result_free(&r);
    env_free(&e);
    test_pod_free(p);
}

static void highest_weighted_total_wins(void **st)
{
    (void)st;
    struct env e = {0};
    rec_env(&e, 3);
    rec_configure("RecA", &(struct rec_behaviour){.fail_at = GS_PT_COUNT, .score_base = 100, .score_step = -50});
    rec_configure("RecB", &(struct rec_behaviour){.fail_at = GS_PT_COUNT, .score_base = 0, .score_step = 40});
    struct gs_pod *p = test_pod("ns", "a", 100, 0, 0, 0);
    /* weights 1/1: totals 100, 90, 80 -> node 0 */
    struct gs_schedule_result r = sched(&e, p);
    assert_int_equal(r.a.node, 0);
    gs_schedule_result_free(&r);
    gs_framework_free(e.fw);
    /* RecB weight 3: totals 100, 170, 240 -> node 2 */
    e.prof.points[GS_PT_SCORE][1].weight = 3;
    env_start(&e, 7);
    struct gs_pod *q = test_pod("ns", "b", 100, 0, 0, 0);
    r = sched(&e, q);
    assert_int_equal(r.a.node, 2);
    gs_schedule_result_free(&r);
    env_free(&e);
    test_pod_free(p);
    test_pod_free(q);
}

static void filter_sees_only_survivors(void **st)
{
    (void)st;
    struct env e = {0};
    rec_env(&e, 4);
    rec_configure("RecA", &(struct rec_behaviour){.fail_at = GS_PT_COUNT, .reject_nodes = 0x5});
    rec_configure("RecB", &(struct rec_behaviour){.fail_at = GS_PT_COUNT, .reject_nodes = 0xf});
    struct gs_pod *p = test_pod("ns", "a", 100, 0, 0, 0);
    struct gs_schedule_result r = sched(&e, p);
    assert_int_equal(r.code, GS_UNSCHEDULABLE);
    assert_int_equal(r.feasible_nodes, 0);
    char buf[256];
    gs_diagnosis_format(&r.diag, p, buf, sizeof buf);
    /* RecB rejected only the two nodes RecA let through. */
    assert_string_equal(buf, "0/4 nodes are available: 2 RecA rejected (code 1), 2 RecB rejected (code 1).");
    /* No node fit: PostFilter ran, nothing after it did. */
    assert_non_null(strstr(rec_log(), "RecA.postFilter RecB.postFilter"));
    assert_null(strstr(rec_log(), "score"));
    assert_null(strstr(rec_log(), "reserve"));
    gs_schedule_result_free(&r);
    env_free(&e);
    test_pod_free(p);
}

static void prefilter_rejection_fails_every_node(void **st)
{
    (void)st;
    struct env e = {0};
    rec_env(&e, 3);
    rec_configure("RecB", &(struct rec_behaviour){.fail_at = GS_PT_PRE_FILTER, .fail_code = GS_UNSCHEDULABLE});
    struct gs_pod *p = test_pod("ns", "a", 100, 0, 0, 0);
    struct gs_schedule_result r = sched(&e, p);
    assert_int_equal(r.code, GS_UNSCHEDULABLE);
    assert_string_equal(r.status.plugin, "RecB");
    assert_null(strstr(rec_log(), "filter "));
    char buf[256];
    gs_diagnosis_format(&r.diag, p, buf, sizeof buf);
    assert_string_equal(buf, "0/3 nodes are available: RecB says Unschedulable at preFilter.");
    gs_schedule_result_free(&r);
    env_free(&e);
    test_pod_free(p);
}

static void reserve_failure_unreserves_all_in_reverse(void **st)
{
    (void)st;
    struct env e = {0};
    rec_env(&e, 2);
    e.prof.points[GS_PT_RESERVE][2] = (struct gs_profile_plugin){&rec_plugin_c, 1};
    e.prof.npoints[GS_PT_RESERVE] = 3;
    gs_framework_free(e.fw);
    env_start(&e, 7);
    rec_configure("RecB", &(struct rec_behaviour){.fail_at = GS_PT_RESERVE, .fail_code = GS_UNSCHEDULABLE});
    struct gs_pod *p = test_pod("ns", "a", 100, 0, 0, 0);
    struct gs_schedule_result r = sched(&e, p);
    assert_int_equal(r.code, GS_UNSCHEDULABLE);
    assert_string_equal(r.status.plugin, "RecB");
    /* RecC never reserved, yet every reserve plugin is unwound, the failing one included. */
    assert_non_null(strstr(rec_log(), "RecA.reserve RecB.reserve RecC.unreserve RecB.unreserve RecA.unreserve"));
    assert_null(strstr(rec_log(), "RecC.reserve"));
    assert_null(strstr(rec_log(), "permit"));
    assert_null(gs_cache_pod_assignment(e.cache, "ns/a"));
    check_cache(e.cache);
    gs_schedule_result_free(&r);
    env_free(&e);
    test_pod_free(p);
}

static void failure_after_reserve(struct env *e, enum gs_point pt, const char *plugin, bool at_bind)
{
    rec_env(e, 2);
    rec_configure(plugin, &(struct rec_behaviour){.fail_at = pt, .fail_code = GS_UNSCHEDULABLE});
    struct gs_pod *p = test_pod("ns", "a", 100, 0, 0, 0);
    struct gs_schedule_result r = sched(e, p);
    if (at_bind) {
        assert_int_equal(r.code, GS_SUCCESS);
        assert_non_null(gs_cache_pod_assignment(e->cache, "ns/a"));
        struct gs_status b = gs_framework_bind(e->fw, p);
        assert_int_equal(b.code, GS_UNSCHEDULABLE);
        assert_string_equal(b.plugin, plugin);
    } else {
        assert_int_equal(r.code, GS_UNSCHEDULABLE);
        assert_string_equal(r.status.plugin, plugin);
    }
    assert_non_null(strstr(rec_log(), "RecB.unreserve RecA.unreserve"));
    assert_int_equal(rec_unreserve_count("RecA"), 1);
    assert_int_equal(rec_unreserve_count("RecB"), 1);
    assert_null(gs_cache_pod_assignment(e->cache, "ns/a"));
    assert_int_equal(gs_cache_node(e->cache, r.a.node)->npods, 0);
    check_cache(e->cache);
    /* A second bind finds nothing reserved and unwinds nothing again. */
    assert_int_equal(gs_framework_bind(e->fw, p).code, GS_ERROR);
    assert_int_equal(rec_unreserve_count("RecA"), 1);
    gs_schedule_result_free(&r);
    env_free(e);
    test_pod_free(p);
}

static void every_failure_after_reserve_unreserves(void **st)
{
    (void)st;
    struct env e1 = {0}, e2 = {0}, e3 = {0}, e4 = {0};
    failure_after_reserve(&e1, GS_PT_PERMIT, "RecB", false);
    failure_after_reserve(&e2, GS_PT_PRE_BIND, "RecA", true);
    failure_after_reserve(&e3, GS_PT_BIND, "RecA", true);
    failure_after_reserve(&e4, GS_PT_PERMIT, "RecA", false);
}

static int ticked_ok, ticked_fail;
static void tick_cb(const struct gs_pod *p, bool ok, void *arg)
{
    (void)p, (void)arg;
    if (ok) ticked_ok++;
    else ticked_fail++;
}

static void permit_wait_times_out(void **st)
{
    (void)st;
    struct env e = {0};
    rec_env(&e, 2);
    rec_configure("RecA", &(struct rec_behaviour){.fail_at = GS_PT_PERMIT, .fail_code = GS_WAIT,
                                                  .wait_ns = 5 * GS_NS_PER_SEC});
    struct gs_pod *p = test_pod("ns", "a", 100, 0, 0, 0);
    struct gs_schedule_result r = sched(&e, p);
    assert_int_equal(r.code, GS_WAIT);
    assert_int_equal(gs_framework_waiting(e.fw), 1);
    assert_non_null(gs_cache_pod_assignment(e.cache, "ns/a"));
    /* Binding a waiting pod is refused. */
    assert_int_equal(gs_framework_bind(e.fw, p).code, GS_ERROR);
    ticked_ok = ticked_fail = 0;
    gs_clock_advance(&e.clock, 4 * GS_NS_PER_SEC);
    assert_int_equal(gs_framework_tick(e.fw, tick_cb, NULL), 0);
    assert_int_equal(rec_unreserve_count("RecA"), 0);
    gs_clock_advance(&e.clock, 2 * GS_NS_PER_SEC);
    assert_int_equal(gs_framework_tick(e.fw, tick_cb, NULL), 1);
    assert_int_equal(ticked_fail, 1);
    assert_int_equal(ticked_ok, 0);
    assert_int_equal(gs_framework_waiting(e.fw), 0);
    assert_int_equal(rec_unreserve_count("RecA"), 1);
    assert_int_equal(rec_unreserve_count("RecB"), 1);
    assert_null(gs_cache_pod_assignment(e.cache, "ns/a"));
    check_cache(e.cache);
    /* Rejecting again is a no-op: Unreserve does not run twice. */
    assert_int_equal(gs_framework_reject(e.fw, "ns/a", "RecA", "again"), GS_ENOENT);
    assert_int_equal(gs_framework_tick(e.fw, tick_cb, NULL), 0);
    assert_int_equal(rec_unreserve_count("RecA"), 1);
    gs_schedule_result_free(&r);
    env_free(&e);
    test_pod_free(p);
}

static void permit_wait_allowed_by_every_waiter(void **st)
{
    (void)st;
    struct env e = {0};
    rec_env(&e, 2);
    struct rec_behaviour w = {.fail_at = GS_PT_PERMIT, .fail_code = GS_WAIT, .wait_ns = 10 * GS_NS_PER_SEC};
    rec_configure("RecA", &w);
    rec_configure("RecB", &w);
    struct gs_pod *p = test_pod("ns", "a", 100, 0, 0, 0);
    struct gs_schedule_result r = sched(&e, p);
    assert_int_equal(r.code, GS_WAIT);
    ticked_ok = ticked_fail = 0;
    assert_int_equal(gs_framework_allow(e.fw, "ns/a", "RecA"), 0);
    gs_framework_tick(e.fw, tick_cb, NULL);
    assert_int_equal(ticked_ok, 0);
    assert_int_equal(gs_framework_waiting(e.fw), 1);
    assert_int_equal(gs_framework_allow(e.fw, "ns/a", "RecB"), 0);
    assert_int_equal(gs_framework_waiting(e.fw), 0);
    gs_framework_tick(e.fw, tick_cb, NULL);
    assert_int_equal(ticked_ok, 1);
    /* Allowed pods do not time out any more. */
    gs_clock_advance(&e.clock, 20 * GS_NS_PER_SEC);
    assert_int_equal(gs_framework_tick(e.fw, tick_cb, NULL), 0);
    assert_int_equal(gs_framework_bind(e.fw, p).code, GS_SUCCESS);
    assert_int_equal(rec_unreserve_count("RecA"), 0);
    assert_non_null(gs_cache_pod_assignment(e.cache, "ns/a"));
    gs_schedule_result_free(&r);
    env_free(&e);
    test_pod_free(p);
}

static void permit_reject_by_plugin(void **st)
{
    (void)st;
    struct env e = {0};
    rec_env(&e, 2);
    rec_configure("RecB", &(struct rec_behaviour){.fail_at = GS_PT_PERMIT, .fail_code = GS_WAIT,
                                                  .wait_ns = 10 * GS_NS_PER_SEC});
    struct gs_pod *p = test_pod("ns", "a", 100, 0, 0, 0);
    struct gs_schedule_result r = sched(&e, p);
    assert_int_equal(gs_framework_reject(e.fw, "ns/a", "RecB", "gang failed"), 0);
    assert_int_equal(gs_framework_reject(e.fw, "ns/a", "RecB", "gang failed"), 0);
    assert_int_equal(rec_unreserve_count("RecB"), 1);
    assert_null(gs_cache_pod_assignment(e.cache, "ns/a"));
    ticked_ok = ticked_fail = 0;
    gs_framework_tick(e.fw, tick_cb, NULL);
    assert_int_equal(ticked_fail, 1);
    check_cache(e.cache);
    gs_schedule_result_free(&r);
    env_free(&e);
    test_pod_free(p);
}

/*--- Diagnosis, defaults ---*/

static void set_models(struct gs_pod *p, const char *a, const char *b)
{
    p->demand.gpu_models = calloc(2, sizeof(char *));
    p->demand.gpu_models[0] = strdup(a);
    p->demand.gpu_models[1] = strdup(b);
    p->demand.ngpu_models = 2;
}

static void diagnosis_counts_and_orders(void **st)
{
    (void)st;
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_cache *c = gs_cache_new(&clock);
    struct gs_node *nodes[7];
    const char *models[7] = {NULL, NULL, NULL, "T4", "T4", "V100M16", "V100M16"};
    for (int i = 0; i < 7; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i);
        nodes[i] = test_node(name, 8000, 1LL << 34, 0, models[i] ? 2 : 0, models[i], 16384);
        gs_cache_add_node(c, nodes[i]);
    }
    gs_cache_set_schedulable(c, 5, false);
    gs_cache_set_gpu_health(c, 6, 0, false);
    gs_cache_set_gpu_health(c, 6, 1, false);
    struct gs_sched_config cfg;
    gs_sched_config_default(&cfg);
    struct gs_handle h = {.clock = &clock, .cache = c, .seed = 1};
    struct gs_framework *fw;
    assert_int_equal(gs_framework_new(&cfg.profiles[0], &h, &fw, NULL), 0);
    struct gs_pod *p = test_pod("ns", "gpu", 1000, 0, 1, 1000);
    set_models(p, "V100M16", "V100M32");
    struct gs_schedule_result r;
    assert_int_equal(gs_framework_schedule(fw, p, 0, &r), 0);
    assert_int_equal(r.code, GS_UNSCHEDULABLE);
    char buf[512];
    gs_diagnosis_format(&r.diag, p, buf, sizeof buf);
    assert_string_equal(buf, "0/7 nodes are available: 3 Insufficient nvidia.com/gpu, 2 GPU model mismatch (want "
                             "V100M16|V100M32), 1 node(s) were unschedulable, 1 Unhealthy GPU.");
    /* The status carries the same line (truncated to the status size when long). */
    assert_string_equal(r.status.reason, buf);
    gs_schedule_result_free(&r);
    /* With the text off the status has none, and the diagnosis still gives the line. */
    gs_framework_set_diagnosis_text(fw, false);
    assert_int_equal(gs_framework_schedule(fw, p, 0, &r), 0);
    assert_int_equal(r.code, GS_UNSCHEDULABLE);
    assert_string_equal(r.status.reason, "");
    char again[512];
    gs_diagnosis_format(&r.diag, p, again, sizeof again);
    assert_string_equal(again, buf);
    gs_schedule_result_free(&r);
    gs_framework_free(fw);
    gs_sched_config_free(&cfg);
    gs_cache_free(c);
    for (int i = 0; i < 7; i++) test_node_free(nodes[i]);
    test_pod_free(p);
}

/* A Filter rejecting node i with code_of[i] (0 keeps it): tallies of every
 * shape of verdicts (one code, a few, codes above the per-code passes, runs
 * cut at an odd count of nodes) must equal a plain count. */
static uint8_t code_of[45];

static void code_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                        struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)state, (void)cs, (void)pod;
    for (size_t i = 0; i < n; i++) reject[i] = code_of[nodes[i]->idx];
}

static const struct gs_plugin code_plugin = {.name = "Codes", .filter = code_filter};
static const struct gs_plugin code_plugin_by_class = {
    .name = "CodesByClass", .filter = code_filter, .by_class = gs_plugin_by_class_always};

static void check_tally(const struct gs_plugin *pl, enum gs_node_classes mode)
{
    enum { N = 45 };
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_cache *c = gs_cache_new(&clock);
    struct gs_node *nodes[N];
    for (int i = 0; i < N; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i);
        nodes[i] = test_node(name, 8000, 1LL << 34, 110, 2, "T4", 16384);
        assert_int_equal(gs_cache_add_node(c, nodes[i]), i);
    }
    struct gs_profile prof = {0};
    prof.points[GS_PT_FILTER][prof.npoints[GS_PT_FILTER]++] = (struct gs_profile_plugin){pl, 1};
    struct gs_handle h = {.clock = &clock, .cache = c, .seed = 1};
    struct gs_framework *fw;
    assert_int_equal(gs_framework_new(&prof, &h, &fw, NULL), 0);
    gs_framework_set_node_classes(fw, mode);
    struct gs_pod *p = test_pod("ns", "p", 1000, 0, 0, 0);
    for (int shape = 0; shape < 6; shape++) {
        for (int i = 0; i < N; i++) {
            switch (shape) {
            case 0: code_of[i] = 3; break;                                  /* one code */
            case 1: code_of[i] = (uint8_t)(1 + i % 5); break;               /* a few, alternating */
            case 2: code_of[i] = (uint8_t)(i < 40 ? 16 : 17); break;        /* at the pass limit and past it */
            case 3: code_of[i] = (uint8_t)(1 + (i * 37) % 255); break;      /* many, large */
            case 4: code_of[i] = (uint8_t)(i % 9 == 0 ? 200 : 1 + i / 20); break;
            default: code_of[i] = (uint8_t)(1 + (i % 2) * 128); break;      /* the top bit */
            }
            if (pl->by_class) code_of[i] = code_of[0]; /* one class: one verdict */
        }
        uint32_t want[256] = {0};
        for (int i = 0; i < N; i++) want[code_of[i]]++;
        struct gs_schedule_result r;
        assert_int_equal(gs_framework_schedule(fw, p, 0, &r), 0);
        assert_int_equal(r.code, GS_UNSCHEDULABLE);
        uint32_t got[256] = {0}, total = 0;
        for (size_t k = 0; k < r.diag.n; k++) {
            assert_ptr_equal(r.diag.entries[k].plugin, pl);
            assert_int_equal(got[r.diag.entries[k].code], 0); /* each code once */
            got[r.diag.entries[k].code] = r.diag.entries[k].count;
            total += r.diag.entries[k].count;
            if (k) { /* most nodes first, then the lower code */
                const struct gs_diag_entry *a = &r.diag.entries[k - 1], *b = &r.diag.entries[k];
                assert_true(a->count > b->count || (a->count == b->count && a->code < b->code));
            }
        }
        assert_int_equal(total, N);
        assert_memory_equal(got, want, sizeof want);
        gs_schedule_result_free(&r);
    }
    gs_framework_free(fw);
    gs_cache_free(c);
    for (int i = 0; i < N; i++) test_node_free(nodes[i]);
    test_pod_free(p);
}

static void diagnosis_tally_matches_plain_count(void **st)
{
    (void)st;
    check_tally(&code_plugin, GS_CLASSES_AUTO);
    check_tally(&code_plugin_by_class, GS_CLASSES_ALWAYS); /* verdicts weighted by class size */
}

static void seed_is_per_pod_and_profile(void **st)
{
    (void)st;
    struct env e = {0};
    rec_env(&e, 2);
    struct gs_pod *a = test_pod("ns", "a", 100, 0, 0, 0), *b = test_pod("ns", "b", 100, 0, 0, 0);
    struct gs_schedule_result r = sched(&e, a);
    uint64_t sa = rec_last_seed();
    gs_schedule_result_free(&r);
    r = sched(&e, b);
    uint64_t sb = rec_last_seed();
    gs_schedule_result_free(&r);
    assert_true(sa != sb);
    /* Same profile seed and pod key on a fresh framework: same seed. */
    gs_framework_free(e.fw);
    env_start(&e, 7);
    gs_cache_remove_pod(e.cache, "ns/a");
    r = sched(&e, a);
    assert_true(rec_last_seed() == sa);
    gs_schedule_result_free(&r);
    gs_framework_free(e.fw);
    env_start(&e, 8);
    gs_cache_remove_pod(e.cache, "ns/a");
    r = sched(&e, a);
    assert_true(rec_last_seed() != sa);
    gs_schedule_result_free(&r);
    env_free(&e);
    test_pod_free(a);
    test_pod_free(b);
}

/* Runs 60 mixed pods through the default profile; writes node and mask per pod. */
static void run_mixed(uint64_t seed, int32_t *node_out, uint64_t *mask_out)
{
    struct env e = {0};
    env_nodes(&e, 6, 4);
    struct gs_sched_config cfg;
    gs_sched_config_default(&cfg);
    e.prof = cfg.profiles[0];
    env_start(&e, seed);
    struct gs_pod *pods[60];
    uint64_t x = 12345;
    for (int i = 0; i < 60; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        int32_t milli = (int32_t)((x >> 33) % 1000) + 1;
        pods[i] = test_pod("ns", name, (int64_t)((x >> 20) % 2000), 1LL << 28, (x >> 40) % 3 ? 1 : 0, milli);
        struct gs_schedule_result r = sched(&e, pods[i]);
        node_out[i] = r.a.node;
        mask_out[i] = r.a.gpu_mask;
        if (r.code == GS_SUCCESS) assert_int_equal(gs_framework_bind(e.fw, pods[i]).code, GS_SUCCESS);
        gs_schedule_result_free(&r);
    }
    check_cache(e.cache);
    env_free(&e);
    gs_sched_config_free(&cfg);
    for (int i = 0; i < 60; i++) test_pod_free(pods[i]);
}

static void same_inputs_same_decisions(void **st)
{
    (void)st;
    int32_t n1[60], n2[60];
    uint64_t m1[60], m2[60];
    run_mixed(42, n1, m1);
    run_mixed(42, n2, m2);
    assert_memory_equal(n1, n2, sizeof n1);
    assert_memory_equal(m1, m2, sizeof m1);
}

static void gpu_pods_get_devices_without_gpushare(void **st)
{
    (void)st;
    /* A profile without a device-choosing reserve plugin still gets GPUs (lowest indices). */
    struct env e = {0};
    rec_env(&e, 1);
    struct gs_pod *p = test_pod("ns", "a", 100, 0, 2, 1000);
    struct gs_schedule_result r = sched(&e, p);
    assert_int_equal(r.code, GS_SUCCESS);
    assert_int_equal(r.a.gpu_mask, 0x3);
    assert_int_equal(r.a.milli, 1000);
    gs_schedule_result_free(&r);
    struct gs_pod *q = test_pod("ns", "b", 100, 0, 1, 1000);
    r = sched(&e, q);
    /* Both GPUs of the only node are taken: the cache refuses, everything is unwound. */
    assert_int_equal(r.code, GS_ERROR);
    assert_int_equal(rec_unreserve_count("RecA"), 1);
    gs_schedule_result_free(&r);
    env_free(&e);
    test_pod_free(p);
    test_pod_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_profile_schedules_and_binds),
        cmocka_unit_test(points_run_in_order),
        cmocka_unit_test(bind_skip_passes_to_next_binder),
        cmocka_unit_test(prefilter_skip_turns_filter_off),
        cmocka_unit_test(prescore_skip_turns_score_off),
        cmocka_unit_test(highest_weighted_total_wins),
        cmocka_unit_test(filter_sees_only_survivors),
        cmocka_unit_test(prefilter_rejection_fails_every_node),
        cmocka_unit_test(reserve_failure_unreserves_all_in_reverse),
        cmocka_unit_test(every_failure_after_reserve_unreserves),
        cmocka_unit_test(permit_wait_times_out),
        cmocka_unit_test(permit_wait_allowed_by_every_waiter),
        cmocka_unit_test(permit_reject_by_plugin),
        cmocka_unit_test(diagnosis_counts_and_orders),
        cmocka_unit_test(diagnosis_tally_matches_plain_count),
        cmocka_unit_test(seed_is_per_pod_and_profile),
        cmocka_unit_test(same_inputs_same_decisions),
        cmocka_unit_test(gpu_pods_get_devices_without_gpushare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
