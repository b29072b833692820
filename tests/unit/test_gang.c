/*
 * test_gang.c - gang scheduling: the core alone (registry, QueueSort,
 * admission without holding anything, Permit and failure bookkeeping), and
 * the Coscheduling plugin through the scheduler driver (whole-group plans,
 * all-or-nothing starts, timeouts unreserving every member, Volcano groups).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched/gang_core.h"
#include "sched/scheduler.h"
#include "sched_fixture.h"

#define SEC GS_NS_PER_SEC

struct env {
    struct gs_clock clock;
    struct gs_cache *cache;
    struct gs_sched_config cfg;
    struct gs_scheduler *s;
    struct gs_pod *pods[32];
    int npods;
    struct gs_object *pgs[4];
    int npgs;
};

static void env_init(struct env *e, int nodes, int gpus, int wait_s, bool plan)
{
    memset(e, 0, sizeof *e);
    gs_clock_init_sim(&e->clock, 0);
    e->cache = gs_cache_new(&e->clock);
    char name[32];
    for (int i = 0; i < nodes; i++) {
        snprintf(name, sizeof name, "n%d", i);
        assert_true(fx_add_node(e->cache, name, gpus, 64, 0, 0, NULL) >= 0);
    }
    char cfgtext[4096];
    snprintf(cfgtext, sizeof cfgtext, FX_GANG_PROFILE, wait_s, plan ? "true" : "false");
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    assert_int_equal(gs_decode_stream(cfgtext, strlen(cfgtext), &docs, &d, NULL), 0);
    assert_int_equal(gs_sched_config_parse(docs.docs[0], &e->cfg, &d), 0);
    gs_docs_free(&docs);
    struct gs_scheduler_opts o = {.profile = &e->cfg.profiles[0]};
    assert_int_equal(gs_scheduler_new(&e->clock, e->cache, &o, &e->s, &d), 0);
    gs_diags_free(&d);
}

static void env_free(struct env *e)
{
    gs_scheduler_free(e->s);
    gs_cache_free(e->cache);
    gs_sched_config_free(&e->cfg);
    for (int i = 0; i < e->npods; i++) fx_pod_free(e->pods[i]);
    for (int i = 0; i < e->npgs; i++) gs_object_free(e->pgs[i]);
}

static struct gs_pod *add(struct env *e, struct gs_pod *p)
{
    assert_non_null(p);
    e->pods[e->npods++] = p;
    assert_int_equal(gs_scheduler_add_pod(e->s, p), 0);
    return p;
}

static void add_group(struct env *e, const char *name, int min, int timeout)
{
    struct gs_object *o = fx_podgroup(name, min, timeout, NULL);
    assert_non_null(o);
    e->pgs[e->npgs++] = o;
    gs_scheduler_add_podgroup(e->s, o->u.podgroup);
}

static int drain(struct env *e)
{
    struct gs_cycle_result r;
    int n = 0;
    while (gs_scheduler_run_one(e->s, &r) > 0) n++;
    return n;
}

static bool placed(struct env *e, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "default/%s", name);
    return gs_cache_pod_assignment(e->cache, key) != NULL;
}

static struct gs_gang *gang(struct env *e)
{
    return gs__gang_of(gs_framework_plugin_state(gs_scheduler_framework(e->s), "Coscheduling"));
}

/*--- Core ---*/

static void test_admission_holds_nothing(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 2, 4, 60, true);
    add_group(&e, "g", 3, 0);
    add(&e, fx_pod("g-0", 2, 0, "g"));
    add(&e, fx_pod("g-1", 2, 0, "g"));
    drain(&e);
    /* Two of three: rejected at PreFilter, nothing reserved, nothing waiting. */
    assert_false(placed(&e, "g-0"));
    assert_int_equal(gs_framework_waiting(gs_scheduler_framework(e.s)), 0);
    assert_int_equal(gs_cache_gpu_milli_used(e.cache), 0);
    struct gs_status s = gs_gang_admit(gang(&e), e.pods[0]);
    assert_int_equal(s.code, GS_UNSCHEDULABLE_AND_UNRESOLVABLE);
    assert_non_null(strstr(s.reason, "2 of minMember 3"));
    /* The third arrives: the group starts as a whole. */
    add(&e, fx_pod("g-2", 2, 0, "g"));
    gs_clock_set(&e.clock, 2 * SEC); /* the first two wait out their backoff */
    drain(&e);
    assert_true(placed(&e, "g-0") && placed(&e, "g-1") && placed(&e, "g-2"));
    fx_check_cache(e.cache);
    env_free(&e);
}

static void test_capacity_and_unknown_group(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 1, 4, 60, true);
    add_group(&e, "big", 3, 0);
    for (int i = 0; i < 3; i++) {
        char n[32];
        snprintf(n, sizeof n, "big-%d", i);
        add(&e, fx_pod(n, 2, 0, "big"));
    }
    struct gs_pod *orphan = add(&e, fx_pod("orphan", 1, 0, "nogroup"));
    drain(&e);
    struct gs_status s = gs_gang_admit(gang(&e), e.pods[0]);
    assert_int_equal(s.code, GS_UNSCHEDULABLE_AND_UNRESOLVABLE);
    assert_non_null(strstr(s.reason, "needs 6.0 GPUs, 4.0 free and 0.0 preemptible"));
    s = gs_gang_admit(gang(&e), orphan);
    assert_non_null(strstr(s.reason, "PodGroup default/nogroup not found"));
    assert_int_equal(gs_cache_gpu_milli_used(e.cache), 0);
    /* Lower-priority pods count as preemptible: a priority-10 group is admitted. */
    struct gs_pod *low = fx_pod("low", 4, -5, NULL);
    struct gs_assignment a = {0, 0xf, 1000, 0};
    assert_int_equal(gs_cache_add_bound(e.cache, low, &a), 0);
    struct gs_pod *hp = fx_pod("hp", 2, 10, "big");
    s = gs_gang_admit(gang(&e), hp);
    assert_non_null(strstr(s.reason, "4.0 preemptible"));
    gs_cache_remove_pod(e.cache, "default/low");
    fx_pod_free(low);
    fx_pod_free(hp);
    env_free(&e);
}

static void test_queue_sort_keeps_groups_together(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 1, 8, 60, true);
    struct gs_gang *g = gang(&e);
    add_group(&e, "g", 2, 0);
    gs_clock_set(&e.clock, 5 * SEC);
    struct gs_pod *a = fx_pod("a", 1, 0, "g"), *x = fx_pod("x", 1, 0, NULL), *b = fx_pod("b", 1, 0, "g");
    struct gs_pod *hi = fx_pod("hi", 1, 9, NULL);
    struct gs_queued_pod qa = {a, 1, 1, 0, 1}, qx = {x, 3 * SEC, 3 * SEC, 0, 2}, qb = {b, 9 * SEC, 9 * SEC, 0, 3};
    struct gs_queued_pod qh = {hi, 9 * SEC, 9 * SEC, 0, 4};
    /* Group created at t=0 sorts before a pod that arrived at 3 s, both members together. */
    assert_true(gs_gang_less(g, &qa, &qx));
    assert_true(gs_gang_less(g, &qb, &qx));
    assert_false(gs_gang_less(g, &qx, &qb));
    assert_true(gs_gang_less(g, &qa, &qb)); /* same group: insertion order */
    assert_true(gs_gang_less(g, &qh, &qa)); /* priority first */
    fx_pod_free(a), fx_pod_free(x), fx_pod_free(b), fx_pod_free(hi);
    env_free(&e);
}

/*--- Through the driver ---*/

static void test_whole_group_plan(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 2, 4, 60, true);
    add_group(&e, "g", 4, 0);
    for (int i = 0; i < 4; i++) {
        char n[32];
        snprintf(n, sizeof n, "g-%d", i);
        add(&e, fx_pod(n, 2, 0, "g"));
    }
    drain(&e);
    for (int i = 0; i < 4; i++) assert_true(placed(&e, e.pods[i]->meta.name));
    const struct gs_gang_stats *gst = gs_gang_stats(gang(&e));
    assert_int_equal(gst->plans, 1); /* one decision for the group, then steered */
    assert_int_equal(gst->groups_started, 1);
    assert_int_equal(gs_cache_gpu_milli_used(e.cache), 8000);
    fx_check_cache(e.cache);
    env_free(&e);
}

static void test_fragmented_group_rejected_before_holding(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 3, 2, 60, true); /* 6 GPUs, 2 per node */
    add_group(&e, "g", 2, 0);
    add(&e, fx_pod("g-0", 3, 0, "g")); /* 3 GPUs fit on no node, though 6 are free */
    add(&e, fx_pod("g-1", 1, 0, "g"));
    drain(&e);
    assert_false(placed(&e, "g-0") || placed(&e, "g-1"));
    assert_int_equal(gs_framework_waiting(gs_scheduler_framework(e.s)), 0);
    /* One plan: the second member gets the remembered failure (nothing changed). */
    assert_int_equal(gs_gang_stats(gang(&e))->plan_failures, 1);
    fx_check_cache(e.cache);
    env_free(&e);
}

static void test_timeout_unreserves_all(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 1, 4, 10, false); /* member by member, 10 s wait */
    add_group(&e, "g", 3, 0);
    add(&e, fx_pod("g-0", 1, 0, "g"));
    add(&e, fx_pod("g-1", 1, 0, "g"));
    /* Wants a model the node lacks: fails Filter though the group's demand fits the capacity. */
    add(&e, fx_pod_ex("g-2", 1, 0, 1, 0, "g", NULL, NULL, "{\"gpusched.io/gpu-model\":\"H100\"}"));
    struct gs_cycle_result r;
    assert_int_equal(gs_scheduler_run_one(e.s, &r), 1);
    assert_int_equal(r.code, GS_WAIT);
    assert_true(placed(&e, "g-0"));
    drain(&e);
    /* g-2 fits nowhere: its PostFilter rejected the waiting siblings at once
     * (reject percentage 0), so nothing stays held. */
    assert_false(placed(&e, "g-0") || placed(&e, "g-1"));
    assert_int_equal(gs_framework_waiting(gs_scheduler_framework(e.s)), 0);
    assert_int_equal(gs_cache_gpu_milli_used(e.cache), 0);
    assert_true(gs_gang_stats(gang(&e))->timeouts_or_failures >= 1);
    fx_check_cache(e.cache);
    env_free(&e);

    /* Without a failing member: the wait itself times out. */
    env_init(&e, 1, 4, 10, false);
    add_group(&e, "h", 3, 0);
    add(&e, fx_pod("h-0", 1, 0, "h"));
    add(&e, fx_pod("h-1", 1, 0, "h"));
    add(&e, fx_pod("h-2", 1, 0, "h"));
    assert_int_equal(gs_scheduler_run_one(e.s, &r), 1);
    assert_int_equal(r.code, GS_WAIT);
    assert_int_equal(gs_framework_next_deadline(gs_scheduler_framework(e.s)), 10 * SEC);
    gs_scheduler_delete_pod(e.s, "default/h-2"); /* the last member leaves */
    gs_scheduler_delete_pod(e.s, "default/h-1");
    drain(&e);
    assert_true(placed(&e, "h-0"));
    gs_clock_set(&e.clock, 10 * SEC);
    gs_scheduler_tick(e.s);
    assert_false(placed(&e, "h-0"));
    assert_int_equal(gs_framework_waiting(gs_scheduler_framework(e.s)), 0);
    fx_check_cache(e.cache);
    env_free(&e);
}

static void test_volcano_group(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 1, 4, 60, true);
    struct gs_object *o = fx_podgroup_kind("scheduling.volcano.sh/v1beta1", "vg", 2, 0, NULL);
    assert_non_null(o);
    e.pgs[e.npgs++] = o;
    gs_scheduler_add_podgroup(e.s, o->u.podgroup);
    add(&e, fx_pod_ex("v-0", 1, 0, 1, 0, NULL, NULL, NULL, "{\"scheduling.k8s.io/group-name\":\"vg\"}"));
    drain(&e);
    assert_false(placed(&e, "v-0")); /* 1 of 2 */
    add(&e, fx_pod_ex("v-1", 1, 0, 1, 0, NULL, NULL, NULL, "{\"scheduling.k8s.io/group-name\":\"vg\"}"));
    gs_clock_set(&e.clock, 2 * SEC);
    drain(&e);
    assert_true(placed(&e, "v-0") && placed(&e, "v-1"));
    env_free(&e);
}

static void test_bad_args(void **st)
{
    (void)st;
    const char *cfg = "{\"profiles\":[{\"plugins\":{\"permit\":{\"enabled\":[{\"name\":\"Coscheduling\"}]}},"
                      "\"pluginConfig\":[{\"name\":\"Coscheduling\",\"args\":{\"topologyMode\":\"sometimes\","
                      "\"podGroupRejectPercentage\":300}}]}]}";
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    struct gs_sched_config c;
    assert_int_equal(gs_decode_stream(cfg, strlen(cfg), &docs, &d, NULL), 0);
    assert_int_not_equal(gs_sched_config_parse(docs.docs[0], &c, &d), 0);
    bool mode = false, pct = false;
    for (size_t i = 0; i < d.n; i++) {
        mode = mode || strstr(d.v[i].path, "args.topologyMode");
        pct = pct || strstr(d.v[i].path, "args.podGroupRejectPercentage");
    }
    assert_true(mode && pct);
    gs_diags_free(&d);
    gs_docs_free(&docs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admission_holds_nothing),
        cmocka_unit_test(test_capacity_and_unknown_group),
        cmocka_unit_test(test_queue_sort_keeps_groups_together),
        cmocka_unit_test(test_whole_group_plan),
        cmocka_unit_test(test_fragmented_group_rejected_before_holding),
        cmocka_unit_test(test_timeout_unreserves_all),
        cmocka_unit_test(test_volcano_group),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
