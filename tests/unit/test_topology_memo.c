/*
 * test_topology_memo.c - NodeResourceTopology's compactness memo and the
 * production profile's shortcuts change no decision.
 *
 * 1. The memo against the pure function: random nodes (NVLink islands, NUMA
 *    zones, 4 or 8 GPUs) in a cache, random assume/forget/remove, GPU health
 *    flips and node replacement in a reused slot (the epoch guard), random
 *    requests (more kinds than the memo has columns, so columns are evicted);
 *    after every step every node's memoised compactness must equal
 *    gs_topo_compactness, and both hits and misses must have happened.
 * 2. Memo on and off: the same stream of pods through the gpusched profile
 *    on two identical caches, one with the plugins as they are, one whose
 *    NodeResourceTopology has no index form and no PreScore (every node
 *    computed, the reference, and no class form, so that profile scans every
 *    node) and whose PodTopologySpread normalises with the plain min/max
 *    pass; node, devices and feasible count must match for every pod while
 *    pods leave and GPUs fail mid-run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plugins/recorder.h"
#include "sched/frag.h"
#include "sched/framework.h"
#include "sched/topology_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GiB (1LL << 30)

/* A node spec with a random topology: islands of 2, 4 or 8 (or none), NUMA halves or quarters. */
static void random_topology(uint64_t *rng, int32_t ngpus, int32_t *numa, uint64_t *links)
{
    int isl = (int)(uint64_t[]){0, 2, 4, 8}[gs_rand_below(rng, 4)];
    int zones = gs_rand_below(rng, 2) ? 2 : 4;
    for (int g = 0; g < ngpus; g++) {
        numa[g] = gs_rand_below(rng, 8) ? g * zones / ngpus : -1;
        links[g] = 0;
        if (!isl) continue;
        int base = g / isl * isl;
        for (int h = base; h < base + isl && h < ngpus; h++)
            if (h != g && gs_rand_below(rng, 6)) links[g] |= 1ULL << h; /* some links one-sided or missing */
    }
}

static int add_random_node(struct gs_cache *c, uint64_t *rng, const char *name)
{
    int32_t ngpus = gs_rand_below(rng, 3) ? 8 : 4, numa[8];
    uint64_t links[8];
    random_topology(rng, ngpus, numa, links);
    struct gs_node_spec sp = {.name = name, .cpu_milli = 256000, .mem_bytes = 2048 * GiB, .pods = 110,
                              .gpu_model = "A100", .ngpus = ngpus, .gpu_mem_mib = 81920, .gpu_numa = numa,
                              .gpu_nvlink = links};
    return gs_cache_add_node_spec(c, &sp);
}

struct req {
    int32_t count, milli;
    int64_t mem;
};

static struct req random_req(uint64_t *rng)
{
    struct req r = {1, 1000, 0};
    uint64_t k = gs_rand_below(rng, 10);
    if (k < 4) r.milli = (int32_t)(50 + 50 * gs_rand_below(rng, 19)); /* 19 share sizes: more kinds than columns */
    else r.count = (int32_t)(uint32_t[]){1, 2, 3, 4, 8, 2}[k - 4];
    if (gs_rand_below(rng, 6) == 0) r.mem = 4096 * (int64_t)(1 + gs_rand_below(rng, 10));
    return r;
}

static void memo_matches_pure_function(void **st)
{
    (void)st;
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_cache *c = gs_cache_new(&clock);
    assert_non_null(c);
    uint64_t rng = 20261202;
    enum { NODES = 24, STEPS = 1500 };
    for (int i = 0; i < NODES; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%02d", i);
        assert_int_equal(add_random_node(c, &rng, name), i);
    }
    struct gs_topo_memo *m = gs_topo_memo_new();
    assert_non_null(m);
    struct gs_pod *pods[STEPS] = {0};
    int npods = 0, replaced = 0;
    for (int step = 0; step < STEPS; step++) {
        uint64_t op = gs_rand_below(&rng, 20);
        if (op < 9 && npods < STEPS) { /* place a pod on a random node where its GPUs fit */
            struct req r = random_req(&rng);
            int32_t node = (int32_t)gs_rand_below(&rng, NODES);
            struct gs_node_info *n = gs_cache_node(c, node);
            struct gs_gpu_choice ch;
            if (n && gs_topo_choose(n, r.count, r.milli, r.mem, ~0ULL, &ch)) {
                char name[16];
                snprintf(name, sizeof name, "p%04d", npods);
                struct gs_pod *p = test_pod("ns", name, 100, GiB, r.count, r.milli);
                p->demand.gpu_mem_mib = r.mem;
                struct gs_assignment a = {node, ch.mask, r.milli, r.mem};
                if (gs_cache_assume(c, p, &a, 0) == 0) pods[npods++] = p;
                else test_pod_free(p);
            }
        } else if (op < 13 && npods) { /* a pod leaves */
            int k = (int)gs_rand_below(&rng, (uint64_t)npods);
            char key[64];
            snprintf(key, sizeof key, "ns/%s", pods[k]->meta.name);
            gs_cache_remove_pod(c, key); /* may be gone with its node already */
            test_pod_free(pods[k]);
            pods[k] = pods[--npods];
        } else if (op < 15) { /* a GPU fails or heals */
            int32_t node = (int32_t)gs_rand_below(&rng, NODES);
            struct gs_node_info *n = gs_cache_node(c, node);
            if (n) gs_cache_set_gpu_health(c, node, (int32_t)gs_rand_below(&rng, (uint64_t)n->ngpus),
                                           gs_rand_below(&rng, 3) != 0);
        } else if (op == 15) { /* a node is replaced by another topology in the same slot */
            int32_t node = (int32_t)gs_rand_below(&rng, NODES);
            char name[16];
            snprintf(name, sizeof name, "r%03d", replaced++);
            assert_int_equal(gs_cache_remove_node(c, gs_cache_node(c, node)->name), 0);
            for (int k = 0; k < npods;) { /* its pods are gone from the cache */
                char key[64];
                snprintf(key, sizeof key, "ns/%s", pods[k]->meta.name);
                if (gs_cache_pod_assignment(c, key)) {
                    k++;
                    continue;
                }
                test_pod_free(pods[k]);
                pods[k] = pods[--npods];
            }
            assert_int_equal(add_random_node(c, &rng, name), node);
        }
        struct req r = random_req(&rng);
        for (int q = 0; q < 4; q++) { /* a new request, asked twice, then another one, twice */
            if (q == 2) r = random_req(&rng);
            assert_int_equal(gs_topo_memo_select(m, c, r.count, r.milli, r.mem), 0);
            for (int32_t i = 0; i < NODES; i++) {
                struct gs_node_info *n = gs_cache_node(c, i);
                int64_t want = gs_topo_compactness(n, r.count, r.milli, r.mem);
                int64_t got = gs_topo_memo_compactness(m, n);
                if (got != want)
                    fail_msg("step %d node %d request %d x %d milli %lld MiB: memo %lld, fresh %lld", step, i, r.count,
                             r.milli, (long long)r.mem, (long long)got, (long long)want);
            }
        }
    }
    uint64_t hits, misses;
    gs_topo_memo_stats(m, &hits, &misses);
    assert_true(hits > misses); /* it does remember */
    assert_true(misses > 0);
    assert_true(replaced > 0);
    gs_topo_memo_free(m);
    for (int k = 0; k < npods; k++) test_pod_free(pods[k]);
    gs_cache_free(c);
}

/*--- Memo on and off through the framework ---*/

static struct gs_plugin ref_nrt, ref_pts;

static void ref_pts_normalize(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                              struct gs_node_info *const *nodes, int64_t *scores, size_t n)
{
    (void)state, (void)cs, (void)pod, (void)nodes;
    if (!n) return;
    int64_t lo = scores[0], hi = scores[0];
    for (size_t i = 1; i < n; i++) lo = scores[i] < lo ? scores[i] : lo, hi = scores[i] > hi ? scores[i] : hi;
    for (size_t i = 0; i < n; i++) scores[i] = hi == lo ? GS_MAX_SCORE : (scores[i] - lo) * GS_MAX_SCORE / (hi - lo);
}

static void make_reference(struct gs_profile *p)
{
    const struct gs_plugin *nrt = gs_plugin_lookup("NodeResourceTopology"), *pts = gs_plugin_lookup("PodTopologySpread");
    assert_non_null(nrt);
    assert_non_null(pts);
    assert_non_null(nrt->score_idx); /* the fast side runs the memo */
    ref_nrt = *nrt;
    ref_nrt.score_idx = NULL;
    ref_nrt.pre_score = NULL;
    ref_nrt.pre_score_idx = NULL;
    ref_nrt.by_class = NULL; /* the reference scans every node: the profile's classes are off */
    ref_pts = *pts;
    ref_pts.normalize_score = ref_pts_normalize;
    for (int pt = 0; pt < GS_PT_COUNT; pt++)
        for (int k = 0; k < p->npoints[pt]; k++) {
            if (p->points[pt][k].plugin == nrt) p->points[pt][k].plugin = &ref_nrt;
            if (p->points[pt][k].plugin == pts) p->points[pt][k].plugin = &ref_pts;
        }
}

struct side {
    struct gs_cache *cache;
    struct gs_framework *fw;
};

static void side_start(struct side *s, const struct gs_clock *clock, const struct gs_profile *prof)
{
    s->cache = gs_cache_new(clock);
    assert_non_null(s->cache);
    uint64_t rng = 7; /* the same nodes on both sides */
    for (int i = 0; i < 40; i++) {
        char name[16];
        snprintf(name, sizeof name, "node-%02d", i);
        assert_int_equal(add_random_node(s->cache, &rng, name), i);
    }
    struct gs_handle h = {.clock = clock, .cache = s->cache, .seed = 5};
    struct gs_diags d = {0};
    assert_int_equal(gs_framework_new(prof, &h, &s->fw, &d), 0);
    gs_diags_free(&d);
}

static void memo_on_and_off_decide_alike(void **st)
{
    (void)st;
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_sched_config fast_cfg, ref_cfg;
    assert_int_equal(gs_sched_config_gpusched(&fast_cfg), 0);
    assert_int_equal(gs_sched_config_gpusched(&ref_cfg), 0);
    make_reference(&ref_cfg.profiles[0]);
    struct side fast, slow;
    side_start(&fast, &clock, &fast_cfg.profiles[0]);
    side_start(&slow, &clock, &ref_cfg.profiles[0]);
    enum { PODS = 1200 };
    struct gs_pod *pods[PODS];
    uint64_t rng = 99;
    int bound = 0;
    for (int i = 0; i < PODS; i++) {
        char name[16];
        snprintf(name, sizeof name, "pod-%04d", i);
        struct req r = random_req(&rng);
        bool cpu_only = gs_rand_below(&rng, 8) == 0;
        pods[i] = test_pod("ns", name, 1000 * (int64_t)(1 + gs_rand_below(&rng, 8)), GiB, cpu_only ? 0 : r.count,
                           cpu_only ? 0 : r.milli);
        if (!cpu_only) pods[i]->demand.gpu_mem_mib = r.mem;
        if (!cpu_only && r.count > 1 && gs_rand_below(&rng, 5) == 0)
            gs_labels_set(&pods[i]->meta.annotations, GS_ANN_GPU_INTERCONNECT, gs_rand_below(&rng, 2) ? "nvlink" : "numa");
        struct gs_schedule_result a, b;
        assert_int_equal(gs_framework_schedule(fast.fw, pods[i], 0, &a), 0);
        assert_int_equal(gs_framework_schedule(slow.fw, pods[i], 0, &b), 0);
        if (a.code != b.code || a.a.node != b.a.node || a.a.gpu_mask != b.a.gpu_mask ||
            a.feasible_nodes != b.feasible_nodes)
            fail_msg("pod %d: memo code %d node %d mask %llx feasible %d; reference code %d node %d mask %llx "
                     "feasible %d", i, a.code, a.a.node, (unsigned long long)a.a.gpu_mask, a.feasible_nodes, b.code,
                     b.a.node, (unsigned long long)b.a.gpu_mask, b.feasible_nodes);
        if (a.code == GS_SUCCESS) {
            struct gs_status x = gs_framework_bind(fast.fw, pods[i]), y = gs_framework_bind(slow.fw, pods[i]);
            assert_int_equal(x.code, GS_SUCCESS);
            assert_int_equal(y.code, GS_SUCCESS);
            bound++;
        }
        gs_schedule_result_free(&a);
        gs_schedule_result_free(&b);
        if (i % 5 == 4) { /* a random earlier pod leaves */
            char key[64];
            snprintf(key, sizeof key, "ns/%s", pods[gs_rand_below(&rng, (uint64_t)i)]->meta.name);
            assert_int_equal(gs_cache_remove_pod(fast.cache, key), gs_cache_remove_pod(slow.cache, key));
        }
        if (i % 97 == 50) { /* a GPU fails or heals */
            int32_t node = (int32_t)gs_rand_below(&rng, 40), g = (int32_t)gs_rand_below(&rng, 4);
            bool healthy = gs_rand_below(&rng, 2);
            assert_int_equal(gs_cache_set_gpu_health(fast.cache, node, g, healthy), 0);
            assert_int_equal(gs_cache_set_gpu_health(slow.cache, node, g, healthy), 0);
        }
    }
    assert_true(bound > PODS / 3);
    assert_true(bound < PODS); /* the cluster filled up: failures were compared too */
    gs_framework_free(fast.fw);
    gs_framework_free(slow.fw);
    gs_cache_free(fast.cache);
    gs_cache_free(slow.cache);
    for (int i = 0; i < PODS; i++) {
        gs_labels_free(&pods[i]->meta.annotations); /* test_pod_free leaves them */
        test_pod_free(pods[i]);
    }
    gs_sched_config_free(&fast_cfg);
    gs_sched_config_free(&ref_cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(memo_matches_pure_function),
        cmocka_unit_test(memo_on_and_off_decide_alike),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
