/*
 * test_reclaim.c - node-wise choice of reclaim victims (nodeplan.h) through
 * admission on small clusters of 8-GPU nodes: a gang gets the victims that
 * empty one node for it where the global order (most recently admitted
 * first) spends the borrower's fair-share budget on GPUs scattered over
 * every node and admits nothing; no victims at all when no set makes the
 * claimant fit; never a workload of a queue within its guarantee. Then the
 * planner alone on plain arrays (node choice, allowed victims, GPU models,
 * the ranking by work, count or room), and the needless-eviction counter.
 * The test plays the scheduler (first fit).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "admission_fixture.h"
#include "sched/admission/nodeplan.h"

#define SEC GS_NS_PER_SEC

static void env_init(struct adm_env *e, int nnodes, const char *yaml, const struct gs_admission_opts *o)
{
    adm_env_init(e, nnodes, 8, yaml, o);
}

static int submit(struct adm_env *e, const char *name, const char *q, int npods, int gpus)
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
    struct gs_workload_spec s = {.key = key, .namespace_ = "ns", .queue = q, .pods = pods, .npods = (size_t)npods};
    return gs_admission_submit(e->a, &s);
}

/* One cycle; binds what was admitted (first fit) and checks the invariants. */
static size_t cycle(struct adm_env *e)
{
    assert_int_equal(gs_admission_cycle(e->a, &e->res), 0);
    for (size_t i = 0; i < e->res.nadmitted; i++) {
        const struct gs_workload *w = gs_admission_workload(e->a, e->res.admitted[i]);
        assert_int_equal(adm_bind_workload(e->cache, w), (int)w->npods);
    }
    char why[256];
    assert_int_equal(gs_admission_check(e->a, why, sizeof why), 0);
    assert_int_equal(gs_cache_check(e->cache, why, sizeof why), 0);
    return e->res.nadmitted;
}

/* Submits a one-GPU workload at second t and binds it. */
static int one_gpu(struct adm_env *e, const char *q, const char *name, int t)
{
    e->clk.sim_now = t * SEC;
    int id = submit(e, name, q, 1, 1);
    assert_true(id >= 0);
    assert_int_equal(cycle(e), 1);
    return id;
}

static int node_of(struct adm_env *e, int id)
{
    const struct gs_workload *w = gs_admission_workload(e->a, id);
    char key[256];
    gs_meta_key(&w->pods[0]->meta, key, sizeof key);
    const struct gs_assignment *as = gs_cache_pod_assignment(e->cache, key);
    return as ? as->node : -1;
}

static enum gs_wl_state state(struct adm_env *e, int id) { return gs_admission_workload(e->a, id)->state; }

#define CQ(name, nominal, extra)                                                                           \
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: " name "}\nspec:\n"          \
    "  cohortName: co\n" extra "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n"               \
    "    flavors:\n    - name: gpu\n      resources: [{name: nvidia.com/gpu, nominalQuota: " nominal "}]\n"
#define LQ(name, cq) \
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: " name ", namespace: ns}\nspec: {clusterQueue: " cq "}\n"
#define RECLAIMS "  preemption: {reclaimWithinCohort: Any}\n"

static const char *const TWO = CQ("a", "12", RECLAIMS) "---\n" CQ("b", "12", "") "---\n" LQ("qa", "a") "---\n" LQ(
    "qb", "b");

/* Three 8-GPU nodes full of b's one-GPU workloads (b borrows all of a's 12),
 * the three most recent ones on three different nodes. */
static void fill_three_nodes(struct adm_env *e, int *b)
{
    for (int i = 0; i < 24; i++) {
        char n[8];
        snprintf(n, sizeof n, "b%d", i);
        b[i] = one_gpu(e, "qb", n, i);
    }
    e->clk.sim_now = 100 * SEC;
    for (int i = 0; i < 24; i += 8) { /* one ends per node; the newcomers land one per node */
        adm_unbind_workload(e->cache, gs_admission_workload(e->a, b[i]));
        assert_int_equal(gs_admission_finish(e->a, b[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        char n[8];
        snprintf(n, sizeof n, "b%d", 24 + i);
        b[24 + i] = one_gpu(e, "qb", n, 100 + i);
        assert_int_equal(node_of(e, b[24 + i]), i);
    }
}

static void nodewise_victims_empty_one_node_for_a_gang(void **st)
{
    (void)st;
    for (int global = 0; global < 2; global++) {
        struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                      .reclaim_wait_ns = -1, .global_victims = global};
        struct adm_env e;
        env_init(&e, 3, TWO, &o);
        int b[27];
        fill_three_nodes(&e, b);
        int where[27];
        for (int i = 0; i < 27; i++) where[i] = state(&e, b[i]) == GS_WL_ADMITTED ? node_of(&e, b[i]) : -1;
        /* a's gang: two pods of 4 GPUs. b's fair share is 16 of 24, so at most 8 of its workloads may go. */
        e.clk.sim_now = 200 * SEC;
        int g = submit(&e, "gang", "qa", 2, 4);
        size_t admitted = cycle(&e);
        struct gs_admission_stats s;
        gs_admission_stats(e.a, &s);
        assert_true(s.victim_searches >= 1);
        if (global) { /* most recent first: b26, b25, b24, b23..b19 - scattered, the budget is spent, no fit */
            assert_int_equal(admitted, 0);
            assert_int_equal(state(&e, g), GS_WL_PENDING);
            assert_int_equal(s.evictions, 0);
            adm_env_free(&e);
            continue;
        }
        assert_int_equal(admitted, 1);
        assert_int_equal(state(&e, g), GS_WL_ADMITTED);
        assert_int_equal(e.res.nevicted, 8);
        assert_int_equal(s.nodewise_won, 1);
        for (size_t i = 0; i < e.res.nevicted; i++) { /* every victim ran on the node now emptied */
            int v = e.res.evicted[i];
            int k = 0;
            while (k < 27 && b[k] != v) k++;
            assert_true(k < 27);
            assert_int_equal(where[k], 2);
        }
        for (int i = 0; i < 27; i++)
            if (where[i] >= 0 && where[i] != 2) assert_int_equal(state(&e, b[i]), GS_WL_ADMITTED);
        assert_int_equal(node_of(&e, g), 2);
        adm_env_free(&e);
    }
}

/* The evictions made for a claimant count as needless when its pods are not
 * bound before its hold ends (the scheduler could not use the freed room),
 * not when they are; evicted GPUs are counted either way. */
static void evictions_for_an_unbound_claimant_are_needless(void **st)
{
    (void)st;
    for (int bind = 0; bind < 2; bind++) {
        struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                      .reclaim_wait_ns = -1};
        struct adm_env e;
        env_init(&e, 3, TWO, &o);
        int b[27];
        fill_three_nodes(&e, b);
        e.clk.sim_now = 200 * SEC;
        int g = submit(&e, "gang", "qa", 2, 4);
        assert_int_equal(gs_admission_cycle(e.a, &e.res), 0);
        assert_int_equal(e.res.nadmitted, 1);
        assert_int_equal(e.res.nevicted, 8);
        if (bind) assert_int_equal(adm_bind_workload(e.cache, gs_admission_workload(e.a, g)), 2);
        e.clk.sim_now = 300 * SEC; /* past the 60 s hold */
        assert_int_equal(gs_admission_cycle(e.a, &e.res), 0);
        struct gs_admission_stats s;
        gs_admission_stats(e.a, &s);
        assert_int_equal(s.evicted_gpu_milli, 8000);
        assert_int_equal(s.claims_unplaced, bind ? 0 : 1);
        assert_int_equal(s.evictions_unplaced, bind ? 0 : 8);
        json_t *q = gs_admission_queues_json(e.a, 0, 0);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(q, "stats"), "evictionsUnplaced")),
                         bind ? 0 : 8);
        json_decref(q);
        adm_env_free(&e);
    }
}

static void no_victims_when_no_set_makes_the_gang_fit(void **st)
{
    (void)st;
    /* The newest workload on each node is too young to evict: no node can be emptied for an 8-GPU pod. */
    struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = 50 * SEC,
                                  .reclaim_wait_ns = -1};
    struct adm_env e;
    env_init(&e, 3, TWO, &o);
    int b[27];
    fill_three_nodes(&e, b);
    e.clk.sim_now = 120 * SEC;
    int g = submit(&e, "big", "qa", 1, 8);
    assert_int_equal(cycle(&e), 0);
    struct gs_admission_stats s;
    gs_admission_stats(e.a, &s);
    assert_int_equal(state(&e, g), GS_WL_PENDING);
    assert_int_equal(s.evictions, 0);
    assert_int_equal(e.res.nevicted, 0);
    assert_true(s.nodewise_refused >= 1);
    for (int i = 0; i < 27; i++)
        if (i % 8) assert_int_equal(state(&e, b[i]), GS_WL_ADMITTED);
    /* once they are old enough, one node is emptied */
    e.clk.sim_now = 200 * SEC;
    gs_admission_capacity_changed(e.a);
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, g), GS_WL_ADMITTED);
    assert_int_equal(e.res.nevicted, 8);
    adm_env_free(&e);
}

static void never_a_queue_within_its_guarantee(void **st)
{
    (void)st;
    /* c borrows 4 (12 of nominal 8); b runs 4, within its nominal 4, on node1 next to four of c's. b's are
     * the most recent (cheapest to lose) but not borrowed: the four GPUs come from c. */
    static const char *const Y = CQ("a", "4", RECLAIMS) "---\n" CQ("b", "4", "") "---\n" CQ("c", "8", "") "---\n" LQ(
        "qa", "a") "---\n" LQ("qb", "b") "---\n" LQ("qc", "c");
    struct gs_admission_opts o = {.starvation_wait_ns = -1, .history_weight = 0, .reclaim_min_runtime_ns = -1,
                                  .reclaim_wait_ns = -1};
    struct adm_env e;
    env_init(&e, 2, Y, &o);
    int c[12], b[4];
    for (int i = 0; i < 12; i++) {
        char n[8];
        snprintf(n, sizeof n, "c%d", i);
        c[i] = one_gpu(&e, "qc", n, i);
    }
    for (int i = 0; i < 4; i++) {
        char n[8];
        snprintf(n, sizeof n, "b%d", i);
        b[i] = one_gpu(&e, "qb", n, 50 + i);
        assert_int_equal(node_of(&e, b[i]), 1);
    }
    e.clk.sim_now = 100 * SEC;
    int g = submit(&e, "a4", "qa", 1, 4);
    assert_int_equal(cycle(&e), 1);
    assert_int_equal(state(&e, g), GS_WL_ADMITTED);
    assert_int_equal(e.res.nevicted, 4);
    for (int i = 0; i < 4; i++) assert_int_equal(state(&e, b[i]), GS_WL_ADMITTED);
    for (size_t i = 0; i < e.res.nevicted; i++)
        assert_int_equal(gs_admission_workload(e.a, e.res.evicted[i])->queue, gs_queue_tree_find(&e.t, "c"));
    int evicted_c = 0;
    for (int i = 0; i < 12; i++) evicted_c += state(&e, c[i]) == GS_WL_PENDING;
    assert_int_equal(evicted_c, 4);
    adm_env_free(&e);
}

/*--- The planner alone ---*/

struct book {
    bool allowed[8];
    int taken[8], n;
};

static bool take(void *ctx, size_t v)
{
    struct book *b = ctx;
    if (!b->allowed[v]) return false;
    b->taken[b->n++] = (int)v;
    return true;
}

static void untake(void *ctx, size_t v)
{
    struct book *b = ctx;
    assert_true(b->n > 0);
    assert_int_equal(b->taken[b->n - 1], (int)v); /* LIFO */
    b->n--;
}

static void planner_prefers_room_then_the_cheapest_node(void **st)
{
    (void)st;
    /* node0: 6 free; node1: 2 free + victim 0 (2 GPUs) + victim 1 (4 GPUs, cheap); node2: victim 2 holds all 8. */
    int32_t g0[8] = {1000, 1000, 1000, 1000, 1000, 1000, 0, 0}, g1[8] = {1000, 1000, 0, 0, 0, 0, 0, 0}, g2[8] = {0};
    struct gs__np_node nodes[3] = {{.usable = true, .ngpus = 8, .gfree = g0, .cpu_free = 1000, .mem_free = 1000},
                                   {.usable = true, .ngpus = 8, .gfree = g1, .cpu_free = 1000, .mem_free = 1000},
                                   {.usable = true, .ngpus = 8, .gfree = g2, .cpu_free = 1000, .mem_free = 1000}};
    struct gs__np_vpod p0 = {.node = 1, .gpu_mask = 0x0c, .milli = 1000};
    struct gs__np_vpod p1 = {.node = 1, .gpu_mask = 0xf0, .milli = 1000};
    struct gs__np_vpod p2 = {.node = 2, .gpu_mask = 0xff, .milli = 1000};
    struct gs__np_victim v[3] = {{.pods = &p0, .npods = 1, .cost = 500}, {.pods = &p1, .npods = 1, .cost = 100},
                                 {.pods = &p2, .npods = 1, .cost = 50}};
    struct gs__np_pod six = {.gpus = 6, .milli = 1000}, eight = {.gpus = 8, .milli = 1000};
    struct book bk = {.allowed = {true, true, true}};
    size_t out[3], n = 9;
    /* 6 GPUs: node0 fits as it is, no victim */
    struct gs__np_req r = {.nodes = nodes, .nnodes = 3, .v = v, .nv = 3, .pods = &six, .npods = 1, .take = take,
                           .untake = untake, .ctx = &bk};
    assert_int_equal(gs__nodeplan(&r, out, &n), 1);
    assert_int_equal(n, 0);
    /* 8 GPUs: node1 needs victims 0 and 1 (cost 600), node2 victim 2 (cost 50) */
    memcpy(g0, (int32_t[8]){0}, sizeof g0);
    r.pods = &eight;
    assert_int_equal(gs__nodeplan(&r, out, &n), 1);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 2);
    assert_int_equal(bk.n, 1); /* stays booked */
    /* victim 2 not allowed: node1's pair */
    bk = (struct book){.allowed = {true, true, false}};
    memcpy(g2, (int32_t[8]){0}, sizeof g2);
    assert_int_equal(gs__nodeplan(&r, out, &n), 1);
    assert_int_equal(n, 2);
    assert_true((out[0] == 0 && out[1] == 1) || (out[0] == 1 && out[1] == 0));
    /* victim 1 not allowed either: nothing can make room, nothing stays booked */
    bk = (struct book){.allowed = {true, false, false}};
    memcpy(g1, (int32_t[8]){1000, 1000, 0, 0, 0, 0, 0, 0}, sizeof g1);
    memcpy(g2, (int32_t[8]){0}, sizeof g2);
    assert_int_equal(gs__nodeplan(&r, out, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(bk.n, 0);
    /* a pod that wants another GPU model than the nodes have (all model 0) gets no node, even an empty one */
    bk = (struct book){.allowed = {true, true, true}};
    memcpy(g0, (int32_t[8]){1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}, sizeof g0);
    struct gs__np_pod other_model = {.gpus = 1, .milli = 1000, .models = 1ULL << 1};
    r.pods = &other_model;
    assert_int_equal(gs__nodeplan(&r, out, &n), 0);
    other_model.models = 1ULL << 0 | 1ULL << 1;
    assert_int_equal(gs__nodeplan(&r, out, &n), 1);
    assert_int_equal(n, 0);
}

/* The ranking of a node's set (gs__np_req.cost) for a 2-GPU pod on three full
 * nodes: node0 frees it by two 1-GPU victims (work 10 each), node1 by one
 * 4-GPU victim (work 100), node2 by one 8-GPU victim (work 500). Least work
 * lost takes node0's pair; fewest victims the 4-GPU one (less work than the
 * 8-GPU one); fewest victims then most room the 8-GPU one. */
static void planner_ranks_sets_by_work_count_or_room(void **st)
{
    (void)st;
    struct gs__np_vpod pa = {.node = 0, .gpu_mask = 0x01, .milli = 1000}, pb = {.node = 0, .gpu_mask = 0x02, .milli = 1000};
    struct gs__np_vpod pc = {.node = 1, .gpu_mask = 0x0f, .milli = 1000}, pd = {.node = 2, .gpu_mask = 0xff, .milli = 1000};
    struct gs__np_victim v[4] = {{.pods = &pa, .npods = 1, .cost = 10}, {.pods = &pb, .npods = 1, .cost = 10},
                                 {.pods = &pc, .npods = 1, .cost = 100}, {.pods = &pd, .npods = 1, .cost = 500}};
    struct gs__np_pod two = {.gpus = 2, .milli = 1000};
    const int costs[3] = {GS_NP_COST_WORK, GS_NP_COST_COUNT, GS_NP_COST_ROOM};
    for (int k = 0; k < 3; k++) {
        int32_t g0[8] = {0}, g1[8] = {0}, g2[8] = {0};
        struct gs__np_node nodes[3] = {{.usable = true, .ngpus = 8, .gfree = g0, .cpu_free = 1000, .mem_free = 1000},
                                       {.usable = true, .ngpus = 8, .gfree = g1, .cpu_free = 1000, .mem_free = 1000},
                                       {.usable = true, .ngpus = 8, .gfree = g2, .cpu_free = 1000, .mem_free = 1000}};
        struct book bk = {.allowed = {true, true, true, true}};
        size_t out[4], n = 9;
        struct gs__np_req r = {.nodes = nodes, .nnodes = 3, .v = v, .nv = 4, .pods = &two, .npods = 1, .take = take,
                               .untake = untake, .ctx = &bk, .cost = costs[k]};
        assert_int_equal(gs__nodeplan(&r, out, &n), 1);
        if (costs[k] == GS_NP_COST_WORK) {
            assert_int_equal(n, 2);
            assert_true((out[0] == 0 && out[1] == 1) || (out[0] == 1 && out[1] == 0));
        } else {
            assert_int_equal(n, 1);
            assert_int_equal(out[0], costs[k] == GS_NP_COST_COUNT ? 2 : 3);
        }
        assert_int_equal(bk.n, (int)n); /* the chosen stay booked */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nodewise_victims_empty_one_node_for_a_gang),
        cmocka_unit_test(evictions_for_an_unbound_claimant_are_needless),
        cmocka_unit_test(no_victims_when_no_set_makes_the_gang_fit),
        cmocka_unit_test(never_a_queue_within_its_guarantee),
        cmocka_unit_test(planner_prefers_room_then_the_cheapest_node),
        cmocka_unit_test(planner_ranks_sets_by_work_count_or_room),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
