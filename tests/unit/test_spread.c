/*
 * test_spread.c - PodTopologySpread: DoNotSchedule skew against the
 * per-domain counts (assumed pods included), nodes without the key,
 * minDomains, namespaces and selectors, and ScheduleAnyway scoring.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched_fixture.h"

static struct gs_clock clk;

struct env {
    struct gs_cache *c;
    struct gs_sched_config cfg;
    struct gs_framework *fw;
    struct gs_labels zl[4];
};

static void env_init(struct env *e, int zones, bool extra_unlabelled)
{
    memset(e, 0, sizeof *e);
    gs_clock_init_sim(&clk, 0);
    e->c = gs_cache_new(&clk);
    for (int i = 0; i < zones; i++) {
        char z[32], n[32];
        snprintf(z, sizeof z, "zone-%d", i);
        snprintf(n, sizeof n, "n%d", i);
        gs_labels_set(&e->zl[i], "topology.kubernetes.io/zone", z);
        assert_int_equal(fx_add_node(e->c, n, 8, 64, 0, 0, &e->zl[i]), i);
    }
    if (extra_unlabelled) assert_true(fx_add_node(e->c, "bare", 8, 64, 0, 0, NULL) >= 0);
    struct gs_handle h = {.clock = &clk, .cache = e->c};
    e->fw = fx_framework("{\"profiles\":[{\"plugins\":{\"preFilter\":{\"enabled\":[{\"name\":\"PodTopologySpread\"}]},"
                         "\"filter\":{\"enabled\":[{\"name\":\"PodTopologySpread\"}]},"
                         "\"score\":{\"enabled\":[{\"name\":\"PodTopologySpread\",\"weight\":50}]}}}]}",
                         &e->cfg, &h);
    assert_non_null(e->fw);
}

static void env_free(struct env *e)
{
    gs_framework_free(e->fw);
    gs_sched_config_free(&e->cfg);
    gs_cache_free(e->c);
    for (int i = 0; i < 4; i++) gs_labels_free(&e->zl[i]);
}

static struct gs_pod *web(const char *name, const char *when, int min_domains)
{
    char spec[512];
    snprintf(spec, sizeof spec,
             "\"topologySpreadConstraints\":[{\"maxSkew\":1,\"topologyKey\":\"topology.kubernetes.io/zone\","
             "\"whenUnsatisfiable\":\"%s\",\"labelSelector\":{\"matchLabels\":{\"app\":\"web\"}}%s}],",
             when, min_domains ? ",\"minDomains\":3" : "");
    return fx_pod_ex(name, 0, 0, 1, 0, NULL, "{\"app\":\"web\"}", spec, NULL);
}

static void place(struct env *e, struct gs_pod *p, int node)
{
    struct gs_assignment a = {node, 0, 0, 0};
    assert_int_equal(gs_cache_assume(e->c, p, &a, 0), 0);
}

/* Nodes (indices) a pod may go to, as a bit mask. */
static unsigned feasible(struct env *e, struct gs_pod *p)
{
    struct gs_node_info *nodes[8];
    uint8_t rej[8];
    int n = gs_cache_node_count(e->c);
    for (int i = 0; i < n; i++) nodes[i] = gs_cache_node(e->c, i);
    struct gs_filter_run run = {.nodes = nodes, .n = (size_t)n, .reject = rej};
    assert_true(gs_framework_run_filters(e->fw, p, &run) >= 0);
    unsigned m = 0;
    for (int i = 0; i < n; i++) m |= rej[i] ? 0 : 1u << i;
    return m;
}

static void test_do_not_schedule(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 3, true);
    struct gs_pod *p[6];
    for (int i = 0; i < 6; i++) {
        char n[32];
        snprintf(n, sizeof n, "web-%d", i);
        p[i] = web(n, "DoNotSchedule", 0);
    }
    assert_int_equal(feasible(&e, p[0]), 0x7); /* the unlabelled node never qualifies */
    place(&e, p[0], 0);
    assert_int_equal(feasible(&e, p[1]), 0x6); /* zone-0 would be at skew 2 */
    place(&e, p[1], 1);
    assert_int_equal(feasible(&e, p[2]), 0x4);
    place(&e, p[2], 2);
    assert_int_equal(feasible(&e, p[3]), 0x7); /* balanced again */
    /* A pod of another app or namespace does not count. */
    struct gs_pod *other = fx_pod_ex("db", 0, 0, 1, 0, NULL, "{\"app\":\"db\"}", NULL, NULL);
    place(&e, other, 0);
    place(&e, p[3], 0);
    assert_int_equal(feasible(&e, p[4]), 0x6);
    struct gs_schedule_result r;
    assert_int_equal(gs_framework_schedule(e.fw, p[4], 0, &r), 0);
    assert_int_equal(r.code, GS_SUCCESS);
    assert_true(r.a.node == 1 || r.a.node == 2);
    gs_schedule_result_free(&r);
    gs_framework_reject(e.fw, "default/web-4", NULL, "test");
    gs_framework_tick(e.fw, NULL, NULL);
    fx_check_cache(e.c);
    for (int i = 0; i < 6; i++) fx_pod_free(p[i]);
    fx_pod_free(other);
    env_free(&e);
}

static void test_min_domains_and_reason(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 2, false);
    struct gs_pod *a = web("a", "DoNotSchedule", 1), *b = web("b", "DoNotSchedule", 1);
    place(&e, a, 0);
    /* Two domains, minDomains 3: the global minimum is taken as 0, so a domain
     * already holding one pod is at skew 2 for the next. */
    assert_int_equal(feasible(&e, b), 0x2);
    place(&e, b, 1);
    struct gs_pod *c = web("c", "DoNotSchedule", 0), *d = web("d", "DoNotSchedule", 1);
    assert_int_equal(feasible(&e, c), 0x3); /* without minDomains: balanced, either zone */
    assert_int_equal(feasible(&e, d), 0x0);
    struct gs_schedule_result r;
    assert_int_equal(gs_framework_schedule(e.fw, d, 0, &r), 0);
    assert_non_null(strstr(r.status.reason, "didn't match pod topology spread constraints"));
    gs_schedule_result_free(&r);
    fx_pod_free(a), fx_pod_free(b), fx_pod_free(c), fx_pod_free(d);
    env_free(&e);
}

static void test_schedule_anyway_scores(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 3, false);
    struct gs_pod *p[4];
    for (int i = 0; i < 4; i++) {
        char n[32];
        snprintf(n, sizeof n, "s-%d", i);
        p[i] = web(n, "ScheduleAnyway", 0);
    }
    place(&e, p[0], 0);
    place(&e, p[1], 0);
    place(&e, p[2], 1);
    assert_int_equal(feasible(&e, p[3]), 0x7); /* soft: no node filtered */
    struct gs_schedule_result r;
    assert_int_equal(gs_framework_schedule(e.fw, p[3], 0, &r), 0);
    assert_int_equal(r.a.node, 2); /* the emptiest zone */
    gs_schedule_result_free(&r);
    gs_framework_reject(e.fw, "default/s-3", NULL, "test");
    gs_framework_tick(e.fw, NULL, NULL);
    for (int i = 0; i < 4; i++) fx_pod_free(p[i]);
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_do_not_schedule),
        cmocka_unit_test(test_min_domains_and_reason),
        cmocka_unit_test(test_schedule_anyway_scores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
