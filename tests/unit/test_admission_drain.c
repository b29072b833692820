/*
 * test_admission_drain.c - whole-node drains and pinned placement
 * (admission.h: opts.drain, opts.pin_placement; drain.h): the planner on
 * plain arrays (soonest-free node, GPUs booked per pod, GPU models, no node
 * ever), then admission on small clusters: a drain keeps the nodes that
 * free soonest for the gang of a queue below its fair share, lets through
 * only work that ends before the drain starts (with drain_strict, the drained
 * queue's own work too), and the gang starts there;
 * a pinned workload may bind only where the placement check put it, until
 * it is bound (pin_large, pin_above: only while their condition holds);
 * consolidation moves a small workload that fits elsewhere off the node a
 * starved gang needs whole, and moves nothing when the mover fits nowhere;
 * own moves evict the starved queue's own small job even when it fits
 * nowhere else (it waits in line).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "admission_fixture.h"
#include "sched/admission/drain.h"

#define GPU(n) ((int64_t)(n) * 1000)
#define SEC GS_NS_PER_SEC
#define NEVER GS_DRAIN_NEVER

/*--- The planner ---*/

static void planner_takes_the_node_that_frees_soonest(void **st)
{
    (void)st;
    int64_t g0[4] = {0, 0, 300, 900}, g1[4] = {100, 200, 250, 400}, g2[4] = {0, 0, 0, NEVER};
    struct gs__drain_node n[3] = {{.usable = true, .model = -1, .ngpus = 4, .gend = g0},
                                  {.usable = true, .model = -1, .ngpus = 4, .gend = g1},
                                  {.usable = true, .model = -1, .ngpus = 4, .gend = g2}};
    struct gs__drain_pod pod = {.gpus = 4};
    int32_t where = -2;
    int64_t start = 0;
    /* node0 is whole at 900, node1 at 400, node2 never (a GPU without a known end) */
    assert_int_equal(gs__drain_plan(n, 3, &pod, 1, &where, &start), 1);
    assert_int_equal(where, 1);
    assert_int_equal(start, 400);
    for (int g = 0; g < 4; g++) assert_true(g1[g] == NEVER); /* booked */
    /* three GPUs: node2 has them now */
    struct gs__drain_pod three = {.gpus = 3};
    assert_int_equal(gs__drain_plan(n, 3, &three, 1, &where, &start), 1);
    assert_int_equal(where, 2);
    assert_int_equal(start, 0);
}

static void planner_books_gpus_across_a_gangs_pods(void **st)
{
    (void)st;
    int64_t g0[8] = {10, 10, 10, 10, 50, 50, 50, 50}, g1[8] = {20, 20, 20, 20, 20, 20, 20, 20};
    struct gs__drain_node n[2] = {{.usable = true, .model = -1, .ngpus = 8, .gend = g0},
                                  {.usable = true, .model = -1, .ngpus = 8, .gend = g1}};
    /* two 4-GPU pods: the first takes node0's four at 10, the second node1 at 20
     * (node0's other four only at 50) */
    struct gs__drain_pod pods[2] = {{.gpus = 4}, {.gpus = 4}};
    int32_t where[2];
    int64_t start;
    assert_int_equal(gs__drain_plan(n, 2, pods, 2, where, &start), 1);
    assert_int_equal(where[0], 0);
    assert_int_equal(where[1], 1);
    assert_int_equal(start, 20);
    /* an 8-GPU and a 2-GPU pod: the large one first */
    int64_t h0[8] = {5, 5, 5, 5, 5, 5, 5, 5}, h1[8] = {1, 1, 9, 9, 9, 9, 9, 9};
    n[0].gend = h0, n[1].gend = h1;
    struct gs__drain_pod mixed[2] = {{.gpus = 2}, {.gpus = 8}};
    assert_int_equal(gs__drain_plan(n, 2, mixed, 2, where, &start), 1);
    assert_int_equal(where[1], 0); /* 8 GPUs: node0 at 5, node1 at 9 */
    assert_int_equal(where[0], 1); /* 2 GPUs: node1 at 1 */
    assert_int_equal(start, 5);
}

static void planner_respects_models_usability_and_never(void **st)
{
    (void)st;
    int64_t g0[2] = {0, 0}, g1[2] = {0, 0}, g2[2] = {0, NEVER};
    struct gs__drain_node n[3] = {{.usable = false, .model = 0, .ngpus = 2, .gend = g0},
                                  {.usable = true, .model = 1, .ngpus = 2, .gend = g1},
                                  {.usable = true, .model = 0, .ngpus = 2, .gend = g2}};
    struct gs__drain_pod pod = {.gpus = 2, .models = 1u << 0}; /* model 0 only */
    int32_t where;
    int64_t start;
    assert_int_equal(gs__drain_plan(n, 3, &pod, 1, &where, &start), 0); /* node0 unusable, node1 wrong model */
    pod.models = 0;
    assert_int_equal(gs__drain_plan(n, 3, &pod, 1, &where, &start), 1);
    assert_int_equal(where, 1);
    struct gs__drain_pod big = {.gpus = 4};
    assert_int_equal(gs__drain_plan(n, 3, &big, 1, &where, &start), 0); /* no node has four GPUs */
    struct gs__drain_pod cpu = {.gpus = 0};
    assert_int_equal(gs__drain_plan(n, 3, &cpu, 1, &where, &start), 1);
    assert_int_equal(where, -1);
}

/*--- Admission ---*/

#define CQ(name, cohort, nominal)                                                                          \
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: " name "}\nspec:\n"          \
    "  cohortName: " cohort "\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n"                \
    "    flavors:\n    - name: gpu\n      resources: [{name: nvidia.com/gpu, nominalQuota: " nominal "}]\n"
#define LQ(name, cq) \
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: " name ", namespace: ns}\nspec: {clusterQueue: " cq "}\n"
/* Nominal quotas above the cluster's 16 GPUs: b's quota fits while a fills the
 * nodes, so b's gang waits for placement, not quota. */
#define TWO_QUEUES CQ("a", "co", "16") "---\n" CQ("b", "co", "16") "---\n" LQ("qa", "a") "---\n" LQ("qb", "b")

static int submit(struct adm_env *e, const char *name, const char *q, int npods, int gpus, int64_t est_s)
{
    const struct gs_pod *pods[8];
    for (int i = 0; i < npods; i++) {
        char pn[64];
        snprintf(pn, sizeof pn, "%s-%d", name, i);
        e->pods[e->npods] = test_pod("ns", pn, 0, 0, gpus, 1000);
        pods[i] = e->pods[e->npods++];
    }
    char key[64];
    snprintf(key, sizeof key, "ns/%s", name);
    struct gs_workload_spec s = {.key = key, .namespace_ = "ns", .queue = q, .pods = pods, .npods = (size_t)npods,
                                 .est_duration_ns = est_s * SEC};
    return gs_admission_submit(e->a, &s);
}

/* Plays a scheduler that honours AdmissionHold: each pod on the first node
 * that is not held from it (pins included) and has the GPUs. */
static void bind_honouring_holds(struct adm_env *e, const struct gs_workload *w, int32_t *node_of)
{
    for (size_t i = 0; i < w->npods; i++) {
        const struct gs_pod *p = w->pods[i];
        bool done = false;
        for (int32_t n = 0; n < gs_cache_node_count(e->cache) && !done; n++) {
            if (gs_admission_node_held(e->a, n, p)) continue;
            const struct gs_node_info *ni = gs_cache_node(e->cache, n);
            struct gs_assignment as = {.node = n, .milli = 1000};
            int32_t need = p->demand.gpu_count;
            for (int32_t g = 0; g < ni->ngpus && need; g++)
                if (ni->gpus[g].milli_free >= 1000) as.gpu_mask |= 1ULL << g, need--;
            if (need || !gs_cache_fits(e->cache, p, &as)) continue;
            assert_int_equal(gs_cache_add_bound(e->cache, p, &as), 0);
            if (node_of) node_of[i] = n;
            done = true;
        }
        if (!done) fail_msg("%s pod %zu admitted but no node takes it", w->key, i);
    }
}

static size_t cycle(struct adm_env *e, int32_t *node_of)
{
    assert_int_equal(gs_admission_cycle(e->a, &e->res), 0);
    for (size_t i = 0; i < e->res.nadmitted; i++)
        bind_honouring_holds(e, gs_admission_workload(e->a, e->res.admitted[i]), node_of);
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

/* Queue a fills two 8-GPU nodes with 4-GPU jobs (node0's end at 100 and 500 s,
 * node1's at 200 and 600 s); queue b, below its share, asks for a gang of
 * one 8-GPU pod. With a drain, node0 (whole at 500 s) is kept for b: a's next
 * 4-GPU job may use the GPUs freed at 100 s only if it ends by 500 s; the
 * gang starts at 500 s. Without, a's job takes them and b still waits. */
static void drain_keeps_the_soonest_node_for_the_starved_gang(void **st)
{
    (void)st;
    for (int on = 0; on < 2; on++) {
        struct adm_env e;
        struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                      .reclaim_wait_ns = -1, .large_gpu_milli = GPU(8), .reserve_horizon_ns = -1,
                                      .drain = on, .pin_placement = on};
        adm_env_init(&e, 2, 8, TWO_QUEUES, &o);
        int a1 = submit(&e, "a1", "qa", 1, 4, 100), a2 = submit(&e, "a2", "qa", 1, 4, 500);
        int a3 = submit(&e, "a3", "qa", 1, 4, 200), a4 = submit(&e, "a4", "qa", 1, 4, 600);
        int32_t node[1];
        assert_int_equal(cycle(&e, NULL), 4);
        int b = submit(&e, "b", "qb", 1, 8, 1000);
        assert_int_equal(cycle(&e, NULL), 0); /* b fails placement... */
        assert_int_equal(cycle(&e, NULL), 0); /* ...and the next cycle drains for it */
        assert_true(gs_admission_workload(e.a, b)->placement_failed);
        struct gs_admission_stats s;
        gs_admission_stats(e.a, &s);
        assert_int_equal(s.drains, on);
        e.clk.sim_now = 100 * SEC;
        finish(&e, a1);
        int along = submit(&e, "along", "qa", 1, 4, 1000); /* would end at 1100 s: not on node0 */
        int ashort = submit(&e, "ashort", "qa", 1, 4, 300); /* ends at 400 s: backfills */
        node[0] = -1;
        assert_int_equal(cycle(&e, node), 1);
        assert_int_equal(state(&e, along), on ? GS_WL_PENDING : GS_WL_ADMITTED);
        assert_int_equal(state(&e, ashort), on ? GS_WL_ADMITTED : GS_WL_PENDING);
        assert_int_equal(node[0], 0);
        e.clk.sim_now = 200 * SEC;
        finish(&e, a3); /* node1 has 4 free: along may go there, drained or not */
        cycle(&e, NULL);
        assert_int_equal(state(&e, along), GS_WL_ADMITTED);
        e.clk.sim_now = 500 * SEC;
        finish(&e, a2);
        if (on) finish(&e, ashort);
        cycle(&e, node);
        assert_int_equal(state(&e, b), on ? GS_WL_ADMITTED : GS_WL_PENDING);
        if (on) assert_int_equal(node[0], 0);
        (void)a4;
        adm_env_free(&e);
    }
}

/* A drain is only made for a queue below its fair share, for a large
 * workload that fit quota, and only within the horizon. */
static void no_drain_past_the_horizon_or_at_the_share(void **st)
{
    (void)st;
    struct adm_env e;
    struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                  .reclaim_wait_ns = -1, .large_gpu_milli = GPU(8), .reserve_horizon_ns = 300 * SEC,
                                  .drain = true, .pin_placement = true};
    adm_env_init(&e, 2, 8, TWO_QUEUES, &o);
    submit(&e, "a1", "qa", 1, 8, 1000);
    submit(&e, "a2", "qa", 1, 8, 2000);
    assert_int_equal(cycle(&e, NULL), 2);
    int b = submit(&e, "b", "qb", 1, 8, 100);
    cycle(&e, NULL);
    cycle(&e, NULL);
    struct gs_admission_stats s;
    gs_admission_stats(e.a, &s);
    assert_int_equal(s.drains, 0); /* node0 is whole only at 1000 s, past 300 s */
    assert_int_equal(s.drains_beyond_horizon, 1);
    json_t *q = gs_admission_queues_json(e.a, 5, 0);
    assert_int_equal(json_array_size(json_object_get(q, "drains")), 0);
    json_decref(q);
    e.clk.sim_now = 800 * SEC; /* now node0 frees within the horizon */
    gs_admission_capacity_changed(e.a);
    cycle(&e, NULL);
    gs_admission_stats(e.a, &s);
    assert_int_equal(s.drains, 1);
    q = gs_admission_queues_json(e.a, 5, 0);
    json_t *d = json_array_get(json_object_get(q, "drains"), 0);
    assert_string_equal(json_string_value(json_object_get(d, "workload")), "ns/b");
    assert_true(json_real_value(json_object_get(d, "start")) == 1000.0);
    json_decref(q);
    assert_int_equal(state(&e, b), GS_WL_PENDING);
    adm_env_free(&e);
}

/* Two gangs of the starved queue get two drains on different nodes: the
 * soonest (node0 at 100 s) and the next (node1 at 200 s), not both node0. */
static void two_gangs_drain_different_nodes(void **st)
{
    (void)st;
    struct adm_env e;
    struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                  .reclaim_wait_ns = -1, .large_gpu_milli = GPU(8), .reserve_horizon_ns = -1,
                                  .drain = true, .pin_placement = true};
    adm_env_init(&e, 3, 8, CQ("a", "co", "24") "---\n" CQ("b", "co", "24") "---\n" LQ("qa", "a") "---\n" LQ("qb", "b"),
                 &o);
    submit(&e, "a1", "qa", 1, 8, 100);
    submit(&e, "a2", "qa", 1, 8, 200);
    submit(&e, "a3", "qa", 1, 8, 300);
    assert_int_equal(cycle(&e, NULL), 3);
    submit(&e, "b1", "qb", 1, 8, 100);
    submit(&e, "b2", "qb", 1, 8, 100);
    cycle(&e, NULL);
    cycle(&e, NULL);
    json_t *q = gs_admission_queues_json(e.a, 5, 0);
    json_t *d = json_object_get(q, "drains");
    assert_int_equal(json_array_size(d), 2);
    const char *n0 = json_string_value(json_array_get(json_object_get(json_array_get(d, 0), "nodes"), 0));
    const char *n1 = json_string_value(json_array_get(json_object_get(json_array_get(d, 1), "nodes"), 0));
    assert_non_null(n0);
    assert_non_null(n1);
    assert_string_not_equal(n0, n1);
    double s0 = json_real_value(json_object_get(json_array_get(d, 0), "start"));
    double s1 = json_real_value(json_object_get(json_array_get(d, 1), "start"));
    assert_true((s0 == 100.0 && s1 == 200.0) || (s0 == 200.0 && s1 == 100.0));
    json_decref(q);
    adm_env_free(&e);
}

/* A pinned workload's pods may bind only on the nodes the check chose (it
 * packs: the fuller node), until they are bound, and only while a queue
 * below its share waits for room (b's 16-GPU gang here); unpinned, the
 * scheduler's own choice is free. Other pods are not kept off anything.
 * Variants: 0 pins off, 1 pins on, 2 pins on but nobody starved. */
static void a_pinned_workload_binds_where_the_check_put_it(void **st)
{
    (void)st;
    for (int v = 0; v < 3; v++) {
        bool pinned = v == 1;
        struct adm_env e;
        struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                      .reclaim_wait_ns = -1, .pin_placement = v > 0};
        adm_env_init(&e, 2, 8, TWO_QUEUES, &o);
        /* node1 gets 6 GPUs used outside admission: the check packs the next pod there */
        e.pods[e.npods] = test_pod("ns", "outside", 0, 0, 6, 1000);
        struct gs_assignment as = {.node = 1, .milli = 1000, .gpu_mask = 0x3f};
        assert_int_equal(gs_cache_add_bound(e.cache, e.pods[e.npods++], &as), 0);
        int gang = v < 2 ? submit(&e, "gang", "qb", 2, 8, 100) : -1; /* fits quota, never the nodes now */
        assert_int_equal(gs_admission_cycle(e.a, &e.res), 0);
        assert_int_equal(e.res.nadmitted, 0);
        int x = submit(&e, "x", "qa", 1, 2, 100);
        assert_int_equal(gs_admission_cycle(e.a, &e.res), 0);
        assert_int_equal(e.res.nadmitted, 1);
        if (gang >= 0) assert_true(gs_admission_workload(e.a, gang)->placement_failed);
        const struct gs_pod *p = gs_admission_workload(e.a, x)->pods[0];
        assert_int_equal(gs_admission_node_held(e.a, 0, p), pinned); /* a first-fit binder would take node0 */
        assert_false(gs_admission_node_held(e.a, 1, p));
        assert_int_equal(gs_admission_holds_apply(e.a, p), pinned);
        assert_false(gs_admission_node_held(e.a, 0, e.pods[0])); /* others: no hold */
        bind_honouring_holds(&e, gs_admission_workload(e.a, x), NULL);
        char key[64];
        gs_meta_key(&p->meta, key, sizeof key);
        assert_int_equal(gs_cache_pod_assignment(e.cache, key)->node, pinned ? 1 : 0);
        cycle(&e, NULL); /* bound: the pin is gone */
        assert_false(gs_admission_holds_apply(e.a, p));
        assert_false(gs_admission_node_held(e.a, 0, p));
        adm_env_free(&e);
    }
}

/* The narrower pins. pin_large: only while the waiting workload is large
 * (b's 16-GPU gang is, with large_gpu_milli 8 GPUs; not with 32). pin_above:
 * only while some queue uses a GPU more than its fair share (8 GPUs each of
 * the 16 here): qa's 2-GPU job alone is not pinned, the same job beside
 * qa's 7-GPU one (9 in use) is. */
static void narrower_pins_only_when_their_condition_holds(void **st)
{
    (void)st;
    for (int v = 0; v < 4; v++) {
        bool large = v < 2, with_y = v == 3, pinned = v == 0 || v == 3;
        struct adm_env e;
        struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                      .reclaim_wait_ns = -1, .pin_placement = true, .pin_large = large,
                                      .pin_above = !large, .large_gpu_milli = v == 1 ? GPU(32) : GPU(8)};
        adm_env_init(&e, 2, 8, CQ("a", "co", "8") "---\n" CQ("b", "co", "8") "---\n" LQ("qa", "a") "---\n" LQ("qb", "b"),
                     &o);
        e.pods[e.npods] = test_pod("ns", "outside", 0, 0, 6, 1000);
        struct gs_assignment as = {.node = 1, .milli = 1000, .gpu_mask = 0x3f};
        assert_int_equal(gs_cache_add_bound(e.cache, e.pods[e.npods++], &as), 0);
        int gang = submit(&e, "gang", "qb", 2, 8, 100);
        assert_int_equal(cycle(&e, NULL), 0);
        assert_true(gs_admission_workload(e.a, gang)->placement_failed);
        if (with_y) {
            int y = submit(&e, "y", "qa", 1, 7, 100);
            assert_int_equal(cycle(&e, NULL), 1);
            assert_false(gs_admission_holds_apply(e.a, gs_admission_workload(e.a, y)->pods[0])); /* 7 of 8: not above */
        }
        int x = submit(&e, "x", "qa", 1, 2, 100);
        assert_int_equal(gs_admission_cycle(e.a, &e.res), 0);
        assert_int_equal(e.res.nadmitted, 1);
        assert_int_equal(gs_admission_holds_apply(e.a, gs_admission_workload(e.a, x)->pods[0]), pinned);
        adm_env_free(&e);
    }
}

/* drain_strict: the drained queue's own other work backfills the drained node
 * only when it ends before the drain starts (500 s), as other queues' does; by
 * default it may use it whenever. Same cluster as above: at 100 s node0 has 4
 * GPUs free and node1 none; b's own 4-GPU job ends at 1100 s (long) or 400 s. */
static void strict_drain_keeps_the_own_queues_long_work_off(void **st)
{
    (void)st;
    for (int v = 0; v < 3; v++) {
        bool strict = v > 0, long_job = v < 2;
        struct adm_env e;
        struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                      .reclaim_wait_ns = -1, .large_gpu_milli = GPU(8), .reserve_horizon_ns = -1,
                                      .drain = true, .drain_strict = strict, .pin_placement = true};
        adm_env_init(&e, 2, 8, TWO_QUEUES, &o);
        int a1 = submit(&e, "a1", "qa", 1, 4, 100);
        submit(&e, "a2", "qa", 1, 4, 500);
        submit(&e, "a3", "qa", 1, 4, 200);
        submit(&e, "a4", "qa", 1, 4, 600);
        assert_int_equal(cycle(&e, NULL), 4);
        int b = submit(&e, "b", "qb", 1, 8, 1000);
        cycle(&e, NULL);
        cycle(&e, NULL);
        struct gs_admission_stats s;
        gs_admission_stats(e.a, &s);
        assert_int_equal(s.drains, 1);
        e.clk.sim_now = 100 * SEC;
        finish(&e, a1);
        int own = submit(&e, "own", "qb", 1, 4, long_job ? 1000 : 300);
        int32_t node[1] = {-1};
        bool goes = !strict || !long_job;
        assert_int_equal(cycle(&e, node), goes ? 1 : 0);
        assert_int_equal(state(&e, own), goes ? GS_WL_ADMITTED : GS_WL_PENDING);
        if (goes) assert_int_equal(node[0], 0);
        assert_int_equal(state(&e, b), GS_WL_PENDING);
        adm_env_free(&e);
    }
}

/* Queue a runs 6 (or 7) GPUs on node0 and on node1 and a 2-GPU job a4 on
 * node2; b, below its share, asks for one 8-GPU pod. a is at its fair share,
 * so reclaim takes nothing, and no node is whole. With consolidation, a4 fits
 * on node0 or node1 (2 GPUs free each): it is moved (one eviction, admitted
 * again at once, pinned to its new node) and b starts on node2. When node0
 * and node1 have one GPU free each, a4 fits nowhere else: nothing moves. */
static void consolidation_moves_a_small_job_that_fits_elsewhere(void **st)
{
    (void)st;
    for (int v = 0; v < 3; v++) {
        bool on = v > 0, fits = v < 2;
        struct adm_env e;
        struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                      .reclaim_wait_ns = -1, .large_gpu_milli = GPU(8), .reserve_horizon_ns = -1,
                                      .consolidate_moves = on ? 2 : 0};
        adm_env_init(&e, 3, 8, CQ("a", "co", "24") "---\n" CQ("b", "co", "24") "---\n" LQ("qa", "a") "---\n"
                     LQ("qb", "b"), &o);
        int big = fits ? 6 : 7;
        submit(&e, "a1", "qa", 1, big, 1000);
        submit(&e, "a3", "qa", 1, big, 1000);
        int x = submit(&e, "x", "qa", 1, 8 - big, 10), y = submit(&e, "y", "qa", 1, 8 - big, 10);
        int a4 = submit(&e, "a4", "qa", 1, 2, 1000);
        int32_t node[1] = {-1};
        assert_int_equal(cycle(&e, node), 5);
        assert_int_equal(node[0], 2); /* the binder's first fit: a4 on node2 */
        e.clk.sim_now = 10 * SEC;
        finish(&e, x);
        finish(&e, y);
        int b = submit(&e, "b", "qb", 1, 8, 1000);
        bool moves = on && fits;
        assert_int_equal(cycle(&e, NULL), moves ? 2 : 0); /* b, and a4 again */
        struct gs_admission_stats s;
        gs_admission_stats(e.a, &s);
        assert_int_equal(s.consolidations, moves);
        assert_int_equal(s.consolidation_moves, moves);
        assert_int_equal(s.evictions, moves);
        assert_int_equal(e.res.nevicted, moves);
        assert_int_equal(state(&e, b), moves ? GS_WL_ADMITTED : GS_WL_PENDING);
        assert_int_equal(state(&e, a4), GS_WL_ADMITTED);
        assert_int_equal(gs_admission_workload(e.a, a4)->preemptions, moves);
        char key[64];
        gs_meta_key(&gs_admission_workload(e.a, b)->pods[0]->meta, key, sizeof key);
        const struct gs_assignment *as = gs_cache_pod_assignment(e.cache, key);
        if (moves) assert_int_equal(as->node, 2);
        gs_meta_key(&gs_admission_workload(e.a, a4)->pods[0]->meta, key, sizeof key);
        as = gs_cache_pod_assignment(e.cache, key);
        assert_non_null(as);
        assert_int_equal(as->node == 2, !moves); /* moved off node2, or left there */
        adm_env_free(&e);
    }
}

/* Queue a runs 5 GPUs on node0 and 7 on node2, b a 4-GPU job b1 on node1;
 * b, below its share, asks for one 8-GPU pod. a is at its fair share (no
 * reclaim) and 8 GPUs are free in all, none of the nodes whole. b1 fits on no
 * other node (3 and 1 free), so consolidation of every queue's movers moves
 * nothing; with own moves (consolidate_own) b1, b's own small job, is
 * evicted without that proof, b's gang starts on node1 and b1 waits in line. */
static void own_moves_trade_the_queues_small_job_for_its_gang(void **st)
{
    (void)st;
    for (int v = 0; v < 3; v++) { /* off, other queues' moves only, own moves */
        bool own = v == 2;
        struct adm_env e;
        struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                      .reclaim_wait_ns = -1, .large_gpu_milli = GPU(8), .reserve_horizon_ns = -1,
                                      .consolidate_moves = v == 1 ? 2 : 0, .consolidate_own = own ? 2 : 0};
        adm_env_init(&e, 3, 8, CQ("a", "co", "12") "---\n" CQ("b", "co", "12") "---\n" LQ("qa", "a") "---\n"
                     LQ("qb", "b"), &o);
        submit(&e, "a1", "qa", 1, 5, 1000);
        submit(&e, "a2", "qa", 1, 7, 1000);
        int b1 = submit(&e, "b1", "qb", 1, 4, 1000);
        assert_int_equal(cycle(&e, NULL), 3);
        char key[64];
        gs_meta_key(&gs_admission_workload(e.a, b1)->pods[0]->meta, key, sizeof key);
        /* b, below its share, goes first: b1 on node1 (after a1 on node0), a2 on node2 */
        assert_int_equal(gs_cache_pod_assignment(e.cache, key)->node, 1);
        e.clk.sim_now = 10 * SEC;
        int b = submit(&e, "b", "qb", 1, 8, 1000);
        assert_int_equal(cycle(&e, NULL), own ? 1 : 0);
        struct gs_admission_stats s;
        gs_admission_stats(e.a, &s);
        assert_int_equal(s.consolidations, own);
        assert_int_equal(s.consolidation_moves, own);
        assert_int_equal(s.consolidation_own, own);
        assert_int_equal(s.consolidation_own_waiting, own);
        assert_int_equal(s.evictions, own);
        assert_int_equal(e.res.nevicted, own);
        assert_int_equal(state(&e, b), own ? GS_WL_ADMITTED : GS_WL_PENDING);
        assert_int_equal(state(&e, b1), own ? GS_WL_PENDING : GS_WL_ADMITTED);
        gs_meta_key(&gs_admission_workload(e.a, b)->pods[0]->meta, key, sizeof key);
        const struct gs_assignment *as = gs_cache_pod_assignment(e.cache, key);
        if (own) assert_int_equal(as->node, 1);
        adm_env_free(&e);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(planner_takes_the_node_that_frees_soonest),
        cmocka_unit_test(planner_books_gpus_across_a_gangs_pods),
        cmocka_unit_test(planner_respects_models_usability_and_never),
        cmocka_unit_test(drain_keeps_the_soonest_node_for_the_starved_gang),
        cmocka_unit_test(no_drain_past_the_horizon_or_at_the_share),
        cmocka_unit_test(two_gangs_drain_different_nodes),
        cmocka_unit_test(a_pinned_workload_binds_where_the_check_put_it),
        cmocka_unit_test(narrower_pins_only_when_their_condition_holds),
        cmocka_unit_test(strict_drain_keeps_the_own_queues_long_work_off),
        cmocka_unit_test(consolidation_moves_a_small_job_that_fits_elsewhere),
        cmocka_unit_test(own_moves_trade_the_queues_small_job_for_its_gang),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
