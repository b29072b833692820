/*
 * test_admission.c - admission behaviour on small hand-made clusters:
 * all-or-nothing quota reservation, the placement check (and Kueue's
 * quota-only behaviour for contrast), reclaim victim choice with holds, no
 * ping-pong, priority preemption inside a queue, StrictFIFO, uncovered
 * resources, the backfill reservation, and the status/explain output;
 * then the rules that ration evictions: minimum runtime, reclaim only from
 * queues above their fair share, the per-window cap, the evictor paying for
 * lost work, the victim-search budget, the reservation horizon, the free-GPU
 * prefilter, and the per-queue JSON with pending workloads.
 * The test plays the scheduler: admitted pods are bound with
 * adm_bind_workload, finished ones removed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "admission_fixture.h"

#define GPU(n) ((int64_t)(n) * 1000)
#define SEC GS_NS_PER_SEC

/* A cluster of nnodes nodes with ngpus GPUs each, and the queues in yaml. */
static void env_init(struct adm_env *e, int nnodes, int ngpus, const char *yaml, const struct gs_admission_opts *o)
{
    /* The behaviour tests below run at small clock values: no minimum runtime unless a test asks. */
    struct gs_admission_opts def = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                    .reclaim_wait_ns = -1};
    adm_env_init(e, nnodes, ngpus, yaml, o ? o : &def);
}

/* A workload of npods pods with gpus GPUs (milli share each) in queue q. */
static int submit(struct adm_env *e, const char *name, const char *q, int npods, int gpus, int milli, int prio,
                  int64_t est_s)
{
    const struct gs_pod *pods[8];
    for (int i = 0; i < npods; i++) {
        char pn[64];
        snprintf(pn, sizeof pn, "%s-%d", name, i);
        e->pods[e->npods] = test_pod("ns", pn, 0, 0, gpus, milli);
        pods[i] = e->pods[e->npods++];
    }
    char key[64];
    snprintf(key, sizeof key, "ns/%s", name);
    struct gs_workload_spec s = {.key = key, .namespace_ = "ns", .queue = q, .priority = prio, .pods = pods,
                                 .npods = (size_t)npods, .est_duration_ns = est_s * SEC};
    return gs_admission_submit(e->a, &s);
}

/* One cycle; binds what was admitted; returns how many were admitted. */
static size_t cycle(struct adm_env *e)
{
    assert_int_equal(gs_admission_cycle(e->a, &e->res), 0);
    for (size_t i = 0; i < e->res.nadmitted; i++) {
        const struct gs_workload *w = gs_admission_workload(e->a, e->res.admitted[i]);
        int placed = adm_bind_workload(e->cache, w);
        if (placed != (int)w->npods) fail_msg("%s admitted at %lld but not placeable", w->key, (long long)e->clk.sim_now);
    }
    char why[256];
    assert_int_equal(gs_admission_check(e->a, why, sizeof why), 0);
    assert_int_equal(gs_cache_check(e->cache, why, sizeof why), 0);
    return e->res.nadmitted;
}

static void finish(struct adm_env *e, int id)
{
    adm_unbind_workload(e->cache, gs_admission_workload(e->a, id));
    assert_int_equal(gs_admission_finish(e->a, id), 0);
}

static enum gs_wl_state state(struct adm_env *e, int id) { return gs_admission_workload(e->a, id)->state; }

static int64_t usage_gpu(struct adm_env *e, const char *q)
{
    struct gs_queue_status s;
    int32_t i = gs_queue_tree_find(&e->t, q);
    assert_int_equal(gs_admission_queue_status(e->a, i, &s), 0);
    return s.usage[gs_queue_tree_res(&e->t, "nvidia.com/gpu")];
}

#define CQ(name, cohort, nominal, extra)                                                                   \
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: " name "}\nspec:\n"          \
    "  cohortName: " cohort "\n" extra "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n"       \
    "    flavors:\n    - name: gpu\n      resources: [{name: nvidia.com/gpu, nominalQuota: " nominal "}]\n"
#define LQ(name, cq) \
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: " name ", namespace: ns}\nspec: {clusterQueue: " cq "}\n"

static void gang_is_admitted_all_or_nothing(void **st)
{
    (void)st;
    struct adm_env e;
    env_init(&e, 4, 8, CQ("cq", "co", "6", "") "---\n" LQ("lq", "cq"), NULL);
    int g = submit(&e, "gang", "lq", 4, 2, 1000, 0, 0); /* 8 GPUs > quota 6 */
    assert_true(g >= 0);
    assert_int_equal(cycle(&e), 0);
    assert_int_equal(state(&e, g), GS_WL_PENDING);
    assert_int_equal(usage_gpu(&e, "cq"), 0); /* nothing reserved for part of it */
    assert_non_null(strstr(gs_admission_workload(e.a, g)->reason, "waiting for quota"));
    int s = submit(&e, "small", "lq", 3, 2, 1000, 0, 0); /* 6 GPUs: fits exactly */
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, s), GS_WL_ADMITTED);
    assert_int_equal(usage_gpu(&e, "cq"), GPU(6));
    adm_env_free(&e);
}

/* Two nodes with 3 of 4 GPUs taken each: 2 GPUs free but no node has 2. */
static void placement_check_keeps_scattered_jobs_out(void **st)
{
    (void)st;
    for (int quota_only = 0; quota_only < 2; quota_only++) {
        struct adm_env e;
        struct gs_admission_opts o = {.starvation_wait_ns = -1, .quota_only = quota_only};
        env_init(&e, 2, 4, CQ("cq", "co", "100", "") "---\n" LQ("lq", "cq"), &o);
        submit(&e, "fill1", "lq", 1, 3, 1000, 0, 0);
        submit(&e, "fill2", "lq", 1, 3, 1000, 0, 0);
        assert_int_equal(cycle(&e), 2);
        assert_int_equal(gs_cache_gpu_milli_used(e.cache), GPU(6)); /* one GPU free on each node */
        int big = submit(&e, "big", "lq", 1, 2, 1000, 5, 0);
        int small = submit(&e, "small", "lq", 1, 1, 1000, 0, 0);
        if (!quota_only) {
            assert_int_equal(cycle(&e), 1); /* big waits, small goes past it */
            assert_int_equal(state(&e, big), GS_WL_PENDING);
            assert_int_equal(state(&e, small), GS_WL_ADMITTED);
            assert_non_null(strstr(gs_admission_workload(e.a, big)->reason, "no placement"));
        } else { /* Kueue: quota fits, so big is admitted and would sit unschedulable */
            assert_int_equal(gs_admission_cycle(e.a, &e.res), 0);
            assert_int_equal(state(&e, big), GS_WL_ADMITTED);
        }
        adm_env_free(&e);
    }
}

static const char *const RECLAIM = CQ("a", "co", "4", "  preemption: {reclaimWithinCohort: Any}\n") "---\n" CQ(
    "b", "co", "4", "") "---\n" LQ("qa", "a") "---\n" LQ("qb", "b");

static void reclaim_chooses_the_right_victim_and_holds_the_space(void **st)
{
    (void)st;
    struct adm_env e;
    env_init(&e, 1, 8, RECLAIM, NULL);
    int b1 = submit(&e, "b1", "qb", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1);
    e.clk.sim_now = 10 * SEC;
    int b2 = submit(&e, "b2", "qb", 1, 2, 1000, 5, 0);
    assert_int_equal(cycle(&e), 1);
    e.clk.sim_now = 20 * SEC;
    int b3 = submit(&e, "b3", "qb", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1);
    e.clk.sim_now = 30 * SEC;
    int b4 = submit(&e, "b4", "qb", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(usage_gpu(&e, "b"), GPU(8)); /* borrowing all of a's 4 */
    e.clk.sim_now = 40 * SEC;
    int a1 = submit(&e, "a1", "qa", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, a1), GS_WL_ADMITTED);
    /* one victim: lowest priority, most recently admitted */
    assert_int_equal(e.res.nevicted, 1);
    assert_int_equal(e.res.evicted[0], b4);
    assert_int_equal(state(&e, b4), GS_WL_PENDING);
    assert_int_equal(state(&e, b1), GS_WL_ADMITTED);
    assert_int_equal(state(&e, b2), GS_WL_ADMITTED);
    assert_int_equal(state(&e, b3), GS_WL_ADMITTED);
    assert_int_equal(gs_admission_workload(e.a, b4)->preemptions, 1);
    assert_int_equal(usage_gpu(&e, "a"), GPU(2));
    assert_int_equal(usage_gpu(&e, "b"), GPU(6));
    struct gs_queue_status s;
    gs_admission_queue_status(e.a, gs_queue_tree_find(&e.t, "b"), &s);
    assert_int_equal(s.preemptions, 1);
    gs_admission_queue_status(e.a, gs_queue_tree_find(&e.t, "a"), &s);
    assert_int_equal(s.lent[gs_queue_tree_res(&e.t, "nvidia.com/gpu")], GPU(2));
    adm_env_free(&e);
}

static void hold_keeps_other_pods_off_until_the_claimant_binds(void **st)
{
    (void)st;
    struct adm_env e;
    env_init(&e, 1, 8, RECLAIM, NULL);
    for (int i = 0; i < 4; i++) {
        char n[8];
        snprintf(n, sizeof n, "b%d", i);
        submit(&e, n, "qb", 1, 2, 1000, 0, 0);
    }
    assert_int_equal(cycle(&e), 4);
    int a1 = submit(&e, "a1", "qa", 1, 2, 1000, 0, 0);
    assert_int_equal(gs_admission_cycle(e.a, &e.res), 0); /* admitted, not bound yet */
    assert_int_equal(state(&e, a1), GS_WL_ADMITTED);
    struct gs_pod *other = test_pod("ns", "intruder", 0, 0, 1, 1000);
    const struct gs_workload *w = gs_admission_workload(e.a, a1);
    assert_true(gs_admission_node_held(e.a, 0, other));
    assert_false(gs_admission_node_held(e.a, 0, w->pods[0]));
    /* the filter plugin says the same */
    json_t *args = gs_admission_plugin_args(e.a);
    struct gs_handle h = {.clock = &e.clk, .cache = e.cache};
    void *state_ = NULL;
    assert_int_equal(gs_admission_hold_plugin.init(&h, args, &state_, NULL), 0);
    struct gs_node_info *nodes[1] = {gs_cache_node(e.cache, 0)};
    uint8_t rej[1] = {0};
    gs_admission_hold_plugin.filter(state_, NULL, other, nodes, 1, rej);
    assert_int_not_equal(rej[0], 0);
    rej[0] = 0;
    gs_admission_hold_plugin.filter(state_, NULL, w->pods[0], nodes, 1, rej);
    assert_int_equal(rej[0], 0);
    /* class-wise only for the pod no hold can reject */
    assert_false(gs_admission_hold_plugin.by_class(state_, NULL, other));
    assert_true(gs_admission_hold_plugin.by_class(state_, NULL, w->pods[0]));
    json_decref(args);
    /* once its pods are bound the hold ends */
    assert_int_equal(adm_bind_workload(e.cache, w), 1);
    cycle(&e);
    assert_false(gs_admission_node_held(e.a, 0, other));
    assert_true(gs_admission_hold_plugin.by_class(state_, NULL, other));
    test_pod_free(other);
    adm_env_free(&e);
}

static void no_ping_pong_after_reclaim(void **st)
{
    (void)st;
    struct adm_env e;
    env_init(&e, 1, 8, RECLAIM, NULL);
    int b[4];
    for (int i = 0; i < 4; i++) {
        char n[8];
        snprintf(n, sizeof n, "b%d", i);
        e.clk.sim_now = i * SEC;
        b[i] = submit(&e, n, "qb", 1, 2, 1000, 0, 0);
        assert_int_equal(cycle(&e), 1);
    }
    int a1 = submit(&e, "a1", "qa", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, b[3]), GS_WL_PENDING);
    /* b's own job ends: 2 GPUs free, but b3 would borrow again while a's demand stands */
    finish(&e, b[0]);
    assert_int_equal(cycle(&e), 0);
    assert_int_equal(state(&e, b[3]), GS_WL_PENDING);
    assert_non_null(strstr(gs_admission_workload(e.a, b[3])->reason, "demand drops"));
    /* a's demand drops: b3 may borrow again */
    finish(&e, a1);
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, b[3]), GS_WL_ADMITTED);
    adm_env_free(&e);
}

static void higher_priority_preempts_lower_within_a_queue(void **st)
{
    (void)st;
    struct adm_env e;
    env_init(&e, 1, 8,
             CQ("cq", "co", "4", "  preemption: {withinClusterQueue: LowerPriority}\n") "---\n" LQ("lq", "cq"), NULL);
    int lo1 = submit(&e, "lo1", "lq", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1);
    e.clk.sim_now = 5 * SEC;
    int lo2 = submit(&e, "lo2", "lq", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1);
    int eq = submit(&e, "eq", "lq", 1, 2, 1000, 0, 0); /* same priority: no preemption */
    assert_int_equal(cycle(&e), 0);
    assert_int_equal(state(&e, eq), GS_WL_PENDING);
    int hi = submit(&e, "hi", "lq", 1, 2, 1000, 10, 0);
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, hi), GS_WL_ADMITTED);
    assert_int_equal(e.res.nevicted, 1);
    assert_int_equal(e.res.evicted[0], lo2); /* the more recently admitted */
    assert_int_equal(state(&e, lo1), GS_WL_ADMITTED);
    adm_env_free(&e);
}

static void strict_fifo_head_blocks(void **st)
{
    (void)st;
    for (int strict = 0; strict < 2; strict++) {
        struct adm_env e;
        const char *y = strict ? CQ("cq", "co", "4", "  queueingStrategy: StrictFIFO\n") "---\n" LQ("lq", "cq")
                               : CQ("cq", "co", "4", "") "---\n" LQ("lq", "cq");
        env_init(&e, 1, 8, y, NULL);
        int big = submit(&e, "big", "lq", 1, 6, 1000, 0, 0);
        int small = submit(&e, "small", "lq", 1, 1, 1000, 0, 0);
        cycle(&e);
        assert_int_equal(state(&e, big), GS_WL_PENDING);
        assert_int_equal(state(&e, small), strict ? GS_WL_PENDING : GS_WL_ADMITTED);
        assert_int_equal(gs_admission_position(e.a, big), 1);
        adm_env_free(&e);
    }
}

static void uncovered_resource_is_inadmissible(void **st)
{
    (void)st;
    struct adm_env e;
    env_init(&e, 1, 8, CQ("cq", "co", "4", "") "---\n" LQ("lq", "cq"), NULL);
    e.pods[e.npods] = test_pod("ns", "cpu-pod", 2000, 0, 0, 0);
    const struct gs_pod *p = e.pods[e.npods++];
    struct gs_workload_spec s = {.key = "ns/cpu-pod", .namespace_ = "ns", .queue = "lq", .pods = &p, .npods = 1};
    int id = gs_admission_submit(e.a, &s);
    assert_int_equal(state(&e, id), GS_WL_INADMISSIBLE);
    assert_int_equal(cycle(&e), 0);
    s.queue = "missing";
    s.key = "ns/other";
    assert_int_equal(gs_admission_submit(e.a, &s), GS_ENOENT);
    adm_env_free(&e);
}

static void starving_large_job_gets_a_backfill_reservation(void **st)
{
    (void)st;
    struct adm_env e;
    struct gs_admission_opts o = {.starvation_wait_ns = 10 * SEC, .large_gpu_milli = GPU(8)};
    env_init(&e, 1, 8, CQ("cq", "co", "100", "") "---\n" LQ("lq", "cq"), &o);
    int r1 = submit(&e, "r1", "lq", 1, 4, 1000, 0, 100);
    assert_int_equal(cycle(&e), 1);
    int big = submit(&e, "big", "lq", 1, 8, 1000, 0, 600);
    assert_int_equal(cycle(&e), 0);
    int64_t start;
    assert_int_equal(gs_admission_reservation(e.a, &start), -1); /* not waited long enough */
    e.clk.sim_now = 20 * SEC;
    cycle(&e);
    assert_int_equal(gs_admission_reservation(e.a, &start), big);
    assert_int_equal(start, 100 * SEC); /* when r1 is estimated to end */
    int s1 = submit(&e, "s1", "lq", 1, 2, 1000, 0, 50);   /* ends at 70 s: backfills */
    int s2 = submit(&e, "s2", "lq", 1, 2, 1000, 0, 200);  /* would end at 220 s: must not */
    cycle(&e);
    assert_int_equal(state(&e, s1), GS_WL_ADMITTED);
    assert_int_equal(state(&e, s2), GS_WL_PENDING);
    json_t *x = gs_admission_explain_json(e.a, "ns/big");
    assert_non_null(x);
    assert_true(json_is_true(json_object_get(x, "reservation")));
    assert_true(json_real_value(json_object_get(x, "estimatedStart")) == 100.0);
    json_decref(x);
    e.clk.sim_now = 100 * SEC;
    finish(&e, r1);
    finish(&e, s1);
    cycle(&e);
    assert_int_equal(state(&e, big), GS_WL_ADMITTED);
    assert_int_equal(gs_admission_reservation(e.a, NULL), -1);
    adm_env_free(&e);
}

static void status_json_reports_every_queue(void **st)
{
    (void)st;
    struct adm_env e;
    env_init(&e, 1, 8, RECLAIM, NULL);
    submit(&e, "b1", "qb", 1, 2, 1000, 0, 0);
    submit(&e, "b2", "qb", 1, 8, 1000, 0, 0);
    cycle(&e);
    json_t *j = gs_admission_status_json(e.a);
    assert_int_equal(json_array_size(j), 3); /* a, b and the cohort */
    json_t *b = NULL, *v;
    size_t i;
    json_array_foreach(j, i, v) if (!strcmp(json_string_value(json_object_get(v, "name")), "b")) b = v;
    assert_non_null(b);
    assert_true(json_real_value(json_object_get(json_object_get(b, "usage"), "nvidia.com/gpu")) == 2.0);
    assert_true(json_real_value(json_object_get(json_object_get(b, "nominal"), "nvidia.com/gpu")) == 4.0);
    assert_int_equal(json_integer_value(json_object_get(b, "pendingWorkloads")), 1);
    assert_int_equal(json_integer_value(json_object_get(b, "admittedWorkloads")), 1);
    assert_string_equal(json_string_value(json_object_get(b, "parent")), "co");
    assert_non_null(json_object_get(b, "weightedShare"));
    assert_non_null(json_object_get(b, "fairShare"));
    assert_non_null(json_object_get(b, "decayedGpuHours"));
    json_decref(j);
    json_t *x = gs_admission_explain_json(e.a, "ns/b2");
    assert_int_equal(json_integer_value(json_object_get(x, "position")), 1);
    assert_string_equal(json_string_value(json_object_get(x, "state")), "Pending");
    json_decref(x);
    assert_null(gs_admission_explain_json(e.a, "ns/none"));
    adm_env_free(&e);
}

/*--- Eviction rationing ---*/

static const struct gs_admission_opts RATION = {.starvation_wait_ns = -1, .history_weight = 0,
                                                .reclaim_min_runtime_ns = 600 * SEC, .reclaim_wait_ns = -1};

/* b fills the 8-GPU node with four 2-GPU workloads at t = 0..3 s. */
static void fill_b(struct adm_env *e, int *b)
{
    for (int i = 0; i < 4; i++) {
        char n[8];
        snprintf(n, sizeof n, "b%d", i);
        e->clk.sim_now = i * SEC;
        b[i] = submit(e, n, "qb", 1, 2, 1000, 0, 0);
        assert_int_equal(cycle(e), 1);
    }
}

/* One node, queues from RECLAIM with options o, b filling it (fill_b); the clock then set to now. */
static void filled(struct adm_env *e, const struct gs_admission_opts *o, int *b, int64_t now)
{
    env_init(e, 1, 8, RECLAIM, o);
    fill_b(e, b);
    e->clk.sim_now = now;
}

static void no_reclaim_before_the_minimum_runtime(void **st)
{
    (void)st;
    struct adm_env e;
    int b[4];
    filled(&e, &RATION, b, 300 * SEC); /* every b has run under 600 s */
    int a1 = submit(&e, "a1", "qa", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 0);
    assert_int_equal(state(&e, a1), GS_WL_PENDING);
    for (int i = 0; i < 4; i++) assert_int_equal(state(&e, b[i]), GS_WL_ADMITTED);
    struct gs_admission_stats s;
    gs_admission_stats(e.a, &s);
    assert_true(s.spared_min_runtime >= 1);
    assert_int_equal(s.evictions, 0);
    e.clk.sim_now = 602 * SEC; /* b0..b2 are old enough, b3 (admitted at 3 s) is not */
    gs_admission_capacity_changed(e.a);
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, a1), GS_WL_ADMITTED);
    assert_int_equal(e.res.nevicted, 1);
    assert_int_equal(e.res.evicted[0], b[2]); /* the most recent of those old enough */
    assert_int_equal(state(&e, b[3]), GS_WL_ADMITTED);
    gs_admission_stats(e.a, &s);
    assert_int_equal(s.evictions, 1);
    assert_int_equal(s.reclaims, 1);
    adm_env_free(&e);
}

static void a_claimant_reclaims_only_after_waiting(void **st)
{
    (void)st;
    struct gs_admission_opts o = RATION;
    o.reclaim_min_runtime_ns = -1;
    o.reclaim_wait_ns = 300 * SEC;
    struct adm_env e;
    int b[4];
    filled(&e, &o, b, 10 * SEC);
    int a1 = submit(&e, "a1", "qa", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 0);
    e.clk.sim_now = 309 * SEC; /* pending 299 s */
    gs_admission_capacity_changed(e.a);
    assert_int_equal(cycle(&e), 0);
    struct gs_admission_stats s;
    gs_admission_stats(e.a, &s);
    assert_int_equal(s.reclaims_deferred, 2);
    assert_int_equal(s.evictions, 0);
    e.clk.sim_now = 310 * SEC;
    gs_admission_capacity_changed(e.a);
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, a1), GS_WL_ADMITTED);
    assert_int_equal(e.res.nevicted, 1);
    adm_env_free(&e);
}

static void reclaim_spares_a_queue_at_its_fair_share(void **st)
{
    (void)st;
    /* b borrows (6 > nominal 2) with one 6-GPU workload; c lends its unused 2. Fair share of b:
     * 2 + half of what a and c leave = 4, so evicting the 6-GPU workload would put b below it. */
    static const char *const Y = CQ("a", "co", "4", "  preemption: {reclaimWithinCohort: Any}\n") "---\n" CQ(
        "b", "co", "2", "") "---\n" CQ("c", "co", "2", "") "---\n" LQ("qa", "a") "---\n" LQ("qb", "b");
    for (int old_rule = 0; old_rule < 2; old_rule++) {
        struct gs_admission_opts o = RATION;
        o.reclaim_min_runtime_ns = -1;
        o.reclaim_above_nominal = old_rule;
        struct adm_env e;
        env_init(&e, 1, 8, Y, &o);
        int b1 = submit(&e, "b1", "qb", 1, 6, 1000, 0, 0);
        int a1 = submit(&e, "a1", "qa", 1, 2, 1000, 0, 0);
        assert_int_equal(cycle(&e), 2);
        e.clk.sim_now = 10 * SEC;
        int a2 = submit(&e, "a2", "qa", 1, 2, 1000, 0, 0); /* a within its nominal 4: may reclaim */
        cycle(&e);
        struct gs_admission_stats s;
        gs_admission_stats(e.a, &s);
        if (old_rule) {
            assert_int_equal(state(&e, b1), GS_WL_PENDING); /* evicted although b is not above its fair share */
            assert_int_equal(state(&e, a2), GS_WL_ADMITTED);
        } else {
            assert_int_equal(state(&e, b1), GS_WL_ADMITTED);
            assert_int_equal(state(&e, a2), GS_WL_PENDING);
            assert_true(s.spared_fair_share >= 1);
            assert_int_equal(s.evictions, 0);
        }
        assert_int_equal(state(&e, a1), GS_WL_ADMITTED);
        adm_env_free(&e);
    }
}

static void a_workload_is_evicted_at_most_max_preemptions_per_window(void **st)
{
    (void)st;
    struct gs_admission_opts o = RATION;
    o.reclaim_min_runtime_ns = -1;
    o.max_preemptions = 1;
    o.preemption_window_ns = 3600 * SEC;
    struct adm_env e;
    int b[4];
    filled(&e, &o, b, 10 * SEC);
    int a1 = submit(&e, "a1", "qa", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, b[3]), GS_WL_PENDING);
    finish(&e, a1); /* a's demand drops: b3 comes back, the most recently admitted again */
    e.clk.sim_now = 20 * SEC;
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, b[3]), GS_WL_ADMITTED);
    e.clk.sim_now = 30 * SEC;
    int a2 = submit(&e, "a2", "qa", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, a2), GS_WL_ADMITTED);
    assert_int_equal(state(&e, b[3]), GS_WL_ADMITTED); /* spared: already evicted this hour */
    assert_int_equal(e.res.nevicted, 1);
    assert_int_equal(e.res.evicted[0], b[2]);
    struct gs_admission_stats s;
    gs_admission_stats(e.a, &s);
    assert_true(s.spared_cap >= 1);
    assert_int_equal(s.max_workload_preemptions, 1);
    for (int i = 0; i < 4; i++) assert_true(gs_admission_workload(e.a, b[i])->window_preemptions <= 1);
    /* an hour later the window has passed: b3 may be chosen again */
    finish(&e, a2);
    e.clk.sim_now = 40 * SEC;
    cycle(&e);
    e.clk.sim_now = 3700 * SEC;
    int a3 = submit(&e, "a3", "qa", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, a3), GS_WL_ADMITTED);
    assert_int_equal(e.res.nevicted, 1);
    assert_int_equal(e.res.evicted[0], b[2]); /* readmitted last, at 40 s: the most recent again */
    assert_int_equal(gs_admission_workload(e.a, b[2])->preemptions, 2);
    adm_env_free(&e);
}

static void the_claimant_pays_for_the_lost_work(void **st)
{
    (void)st;
    for (int charge = 0; charge < 2; charge++) {
        struct gs_admission_opts o = RATION;
        o.reclaim_min_runtime_ns = -1;
        o.evict_charge = charge ? 1 : -1;
        o.halflife_ns = 1000000 * SEC; /* practically no decay over the test */
        struct adm_env e;
        int b[4];
        filled(&e, &o, b, 3 * SEC + 3600 * SEC); /* b3 ran exactly one hour */
        submit(&e, "a1", "qa", 1, 2, 1000, 0, 0);
        assert_int_equal(cycle(&e), 1);
        assert_int_equal(e.res.evicted[0], b[3]);
        struct gs_queue_status s;
        assert_int_equal(gs_admission_queue_status(e.a, gs_queue_tree_find(&e.t, "a"), &s), 0);
        if (charge) assert_true(s.decayed_gpu_hours > 1.99 && s.decayed_gpu_hours < 2.01); /* 2 GPUs x 1 h */
        else assert_true(s.decayed_gpu_hours < 1e-6);
        struct gs_admission_stats st;
        gs_admission_stats(e.a, &st);
        assert_true(charge ? st.charged_gpu_hours > 1.99 : st.charged_gpu_hours == 0);
        adm_env_free(&e);
    }
}

static void victim_searches_per_cycle_are_capped(void **st)
{
    (void)st;
    struct gs_admission_opts o = RATION;
    o.reclaim_min_runtime_ns = -1;
    o.max_victim_searches = 1;
    struct adm_env e;
    int b[4];
    filled(&e, &o, b, 10 * SEC);
    int a1 = submit(&e, "a1", "qa", 1, 2, 1000, 0, 0);
    int a2 = submit(&e, "a2", "qa", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1); /* one search this cycle */
    assert_int_equal(state(&e, a1), GS_WL_ADMITTED);
    assert_int_equal(state(&e, a2), GS_WL_PENDING);
    gs_admission_capacity_changed(e.a);
    assert_int_equal(cycle(&e), 1); /* the next cycle has a new budget */
    assert_int_equal(state(&e, a2), GS_WL_ADMITTED);
    struct gs_admission_stats s;
    gs_admission_stats(e.a, &s);
    assert_int_equal(s.victim_searches, 2);
    assert_int_equal(s.victim_searches_won, 2);
    adm_env_free(&e);
}

static void no_reservation_beyond_the_horizon(void **st)
{
    (void)st;
    for (int far = 0; far < 2; far++) {
        struct gs_admission_opts o = {.starvation_wait_ns = 10 * SEC, .large_gpu_milli = GPU(8),
                                      .reserve_horizon_ns = 1000 * SEC, .reclaim_min_runtime_ns = -1};
        struct adm_env e;
        env_init(&e, 1, 8, CQ("cq", "co", "100", "") "---\n" LQ("lq", "cq"), &o);
        submit(&e, "r1", "lq", 1, 4, 1000, 0, far ? 5000 : 500);
        assert_int_equal(cycle(&e), 1);
        int big = submit(&e, "big", "lq", 1, 8, 1000, 0, 600);
        e.clk.sim_now = 20 * SEC;
        cycle(&e);
        /* ends at 5000 s, 4980 s away: no reservation, so a long small job still gets the free half */
        assert_int_equal(gs_admission_reservation(e.a, NULL), far ? -1 : big);
        int s1 = submit(&e, "s1", "lq", 1, 2, 1000, 0, 3000);
        cycle(&e);
        assert_int_equal(state(&e, s1), far ? GS_WL_ADMITTED : GS_WL_PENDING);
        adm_env_free(&e);
    }
}

static void free_gpu_count_skips_hopeless_placement_checks(void **st)
{
    (void)st;
    struct adm_env e;
    env_init(&e, 2, 4, CQ("cq", "co", "100", "") "---\n" LQ("lq", "cq"), NULL);
    submit(&e, "s", "lq", 1, 3, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1);
    struct gs_admission_stats s0, s1;
    gs_admission_stats(e.a, &s0);
    int big = submit(&e, "big", "lq", 2, 4, 1000, 0, 0); /* 8 GPUs, 5 free */
    int odd = submit(&e, "odd", "lq", 1, 5, 1000, 0, 0); /* 5 free, but no node has 5 */
    int ok = submit(&e, "ok", "lq", 1, 2, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, ok), GS_WL_ADMITTED);
    gs_admission_stats(e.a, &s1);
    assert_int_equal(s1.prefilter_skips - s0.prefilter_skips, 2);
    assert_int_equal(s1.placement_checks - s0.placement_checks, 1); /* only "ok" ran the filters */
    assert_int_equal(state(&e, big), GS_WL_PENDING);
    assert_int_equal(state(&e, odd), GS_WL_PENDING);
    assert_non_null(strstr(gs_admission_workload(e.a, big)->reason, "free GPUs"));
    adm_env_free(&e);
}

static void a_finished_gang_member_gives_its_quota_back(void **st)
{
    (void)st;
    struct adm_env e;
    env_init(&e, 2, 4, CQ("cq", "co", "6", "") "---\n" LQ("lq", "cq"), NULL);
    int g = submit(&e, "gang", "lq", 2, 3, 1000, 0, 0);
    assert_int_equal(cycle(&e), 1);
    int next = submit(&e, "next", "lq", 1, 3, 1000, 0, 0);
    assert_int_equal(cycle(&e), 0); /* quota 6 all taken */
    const struct gs_workload *w = gs_admission_workload(e.a, g);
    char key[64];
    gs_meta_key(&w->pods[0]->meta, key, sizeof key);
    gs_cache_remove_pod(e.cache, key); /* member 0 ends, member 1 runs on */
    assert_int_equal(gs_admission_pod_finished(e.a, g, w->pods[0]), 0);
    assert_int_equal(gs_admission_pod_finished(e.a, g, w->pods[0]), 0); /* twice: released once */
    assert_int_equal(usage_gpu(&e, "cq"), GPU(3));
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, next), GS_WL_ADMITTED);
    assert_int_equal(usage_gpu(&e, "cq"), GPU(6));
    assert_int_equal(gs_admission_pod_finished(e.a, next, w->pods[1]), GS_ENOENT); /* not its pod */
    e.pods[e.npods] = test_pod("ns", "stray", 0, 0, 1, 1000);
    assert_int_equal(gs_admission_pod_finished(e.a, g, e.pods[e.npods++]), GS_ENOENT);
    finish(&e, g); /* the rest of the gang: only member 1's 3 GPUs come back */
    assert_int_equal(usage_gpu(&e, "cq"), GPU(3));
    char why[256];
    assert_int_equal(gs_admission_check(e.a, why, sizeof why), 0);
    adm_env_free(&e);
}

static void queues_json_lists_pending_workloads_in_line(void **st)
{
    (void)st;
    struct adm_env e;
    env_init(&e, 1, 8, RECLAIM, NULL);
    submit(&e, "b1", "qb", 1, 6, 1000, 0, 100);
    cycle(&e);
    submit(&e, "b2", "qb", 1, 4, 1000, 0, 50);
    submit(&e, "b3", "qb", 1, 8, 1000, 0, 50);
    e.clk.sim_now = 30 * SEC;
    cycle(&e);
    json_t *j = gs_admission_queues_json(e.a, 10, 1);
    assert_non_null(j);
    assert_true(json_real_value(json_object_get(j, "time")) == 30.0);
    json_t *qs = json_object_get(j, "queues"), *b = NULL, *v;
    size_t i;
    json_array_foreach(qs, i, v) if (!strcmp(json_string_value(json_object_get(v, "name")), "b")) b = v;
    assert_non_null(b);
    json_t *pend = json_object_get(b, "pending");
    assert_int_equal(json_array_size(pend), 2);
    json_t *p0 = json_array_get(pend, 0), *p1 = json_array_get(pend, 1);
    assert_string_equal(json_string_value(json_object_get(p0, "workload")), "ns/b2");
    assert_int_equal(json_integer_value(json_object_get(p0, "position")), 1);
    assert_true(json_real_value(json_object_get(p0, "estimatedStart")) == 100.0); /* when b1 ends */
    assert_true(json_real_value(json_object_get(p0, "waitingSeconds")) == 30.0);
    assert_true(json_real_value(json_object_get(p1, "estimatedStart")) == -1.0); /* past max_estimated */
    assert_int_equal(json_integer_value(json_object_get(p1, "position")), 2);
    assert_non_null(json_object_get(b, "borrowed"));
    assert_non_null(json_object_get(b, "evictionsCaused"));
    assert_true(json_is_object(json_object_get(j, "stats")));
    assert_non_null(json_object_get(json_object_get(j, "stats"), "sparedMinRuntime"));
    json_decref(j);
    adm_env_free(&e);
}

/* share_gate: b (below its fair share) has a workload that fits its quota
 * but not the nodes (one GPU free on each); a (at its share) then asks for
 * one GPU. Without the gate a takes it; with it a waits until b's job fits. */
static void share_gate_holds_queues_at_their_share_back(void **st)
{
    (void)st;
    for (int gate = 0; gate < 2; gate++) {
        struct adm_env e;
        struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                      .reclaim_wait_ns = -1, .share_gate = gate};
        env_init(&e, 2, 4, CQ("a", "co", "4", "") "---\n" CQ("b", "co", "4", "") "---\n" LQ("qa", "a") "---\n"
                 LQ("qb", "b"), &o);
        int a1 = submit(&e, "a1", "qa", 1, 3, 1000, 0, 0);
        submit(&e, "a2", "qa", 1, 3, 1000, 0, 0);
        assert_int_equal(cycle(&e), 2); /* one GPU free on each node */
        int b1 = submit(&e, "b1", "qb", 1, 2, 1000, 0, 0);
        int a3 = submit(&e, "a3", "qa", 1, 1, 1000, 0, 0);
        cycle(&e);
        assert_int_equal(state(&e, b1), GS_WL_PENDING);
        assert_non_null(strstr(gs_admission_workload(e.a, b1)->reason, "no placement"));
        assert_int_equal(state(&e, a3), gate ? GS_WL_PENDING : GS_WL_ADMITTED);
        struct gs_admission_stats sts;
        gs_admission_stats(e.a, &sts);
        assert_int_equal(sts.share_gated > 0, gate);
        finish(&e, a1); /* node0 free but for a3 when it was admitted */
        cycle(&e);
        assert_int_equal(state(&e, b1), GS_WL_ADMITTED);
        cycle(&e);
        assert_int_equal(state(&e, a3), GS_WL_ADMITTED);
        adm_env_free(&e);
    }
}

/* reserve_under_share: the reservation goes at once to the large workload
 * of the queue below its fair share, not to the oldest large one. */
static void reservation_goes_to_the_queue_below_its_share(void **st)
{
    (void)st;
    for (int under = 0; under < 2; under++) {
        struct adm_env e;
        struct gs_admission_opts o = {.starvation_wait_ns = 10 * SEC, .large_gpu_milli = GPU(8), .history_weight = 0,
                                      .reclaim_min_runtime_ns = -1, .reclaim_wait_ns = -1,
                                      .reserve_under_share = under};
        env_init(&e, 2, 8, CQ("a", "co", "8", "") "---\n" CQ("b", "co", "8", "") "---\n" LQ("qa", "a") "---\n"
                 LQ("qb", "b"), &o);
        submit(&e, "a1", "qa", 1, 8, 1000, 0, 100);
        submit(&e, "a2", "qa", 1, 4, 1000, 0, 200);
        assert_int_equal(cycle(&e), 2);
        int abig = submit(&e, "abig", "qa", 1, 8, 1000, 0, 100); /* the oldest large one */
        int bbig = submit(&e, "bbig", "qb", 1, 8, 1000, 0, 100);
        cycle(&e); /* a runs 12 GPUs of its fair 8, b none of its 8 */
        int64_t start;
        if (under) { /* b is below its share: reserved for at once, where a1 ends */
            assert_int_equal(gs_admission_reservation(e.a, &start), bbig);
            assert_int_equal(start, 100 * SEC);
        } else { /* nobody has waited 10 s yet */
            assert_int_equal(gs_admission_reservation(e.a, &start), -1);
            e.clk.sim_now = 11 * SEC;
            cycle(&e);
            assert_int_equal(gs_admission_reservation(e.a, &start), abig);
        }
        adm_env_free(&e);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gang_is_admitted_all_or_nothing),
        cmocka_unit_test(placement_check_keeps_scattered_jobs_out),
        cmocka_unit_test(reclaim_chooses_the_right_victim_and_holds_the_space),
        cmocka_unit_test(hold_keeps_other_pods_off_until_the_claimant_binds),
        cmocka_unit_test(no_ping_pong_after_reclaim),
        cmocka_unit_test(higher_priority_preempts_lower_within_a_queue),
        cmocka_unit_test(strict_fifo_head_blocks),
        cmocka_unit_test(uncovered_resource_is_inadmissible),
        cmocka_unit_test(starving_large_job_gets_a_backfill_reservation),
        cmocka_unit_test(status_json_reports_every_queue),
        cmocka_unit_test(no_reclaim_before_the_minimum_runtime),
        cmocka_unit_test(a_claimant_reclaims_only_after_waiting),
        cmocka_unit_test(reclaim_spares_a_queue_at_its_fair_share),
        cmocka_unit_test(a_workload_is_evicted_at_most_max_preemptions_per_window),
        cmocka_unit_test(the_claimant_pays_for_the_lost_work),
        cmocka_unit_test(victim_searches_per_cycle_are_capped),
        cmocka_unit_test(no_reservation_beyond_the_horizon),
        cmocka_unit_test(free_gpu_count_skips_hopeless_placement_checks),
        cmocka_unit_test(a_finished_gang_member_gives_its_quota_back),
        cmocka_unit_test(share_gate_holds_queues_at_their_share_back),
        cmocka_unit_test(reservation_goes_to_the_queue_below_its_share),
        cmocka_unit_test(queues_json_lists_pending_workloads_in_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
