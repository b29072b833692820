/*
 * test_policies.c - the FGD paper's placement policies (and FGDPack) on
 * hand-made nodes: Score values, NormalizeScore, and the GPU each Reserve
 * picks inside the chosen node.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sched/cache.h"
#include "sched/frag.h"
#include "sched/plugin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const struct gs_plugin gs_plugin_random, gs_plugin_dot_prod, gs_plugin_gpu_clustering,
    gs_plugin_gpu_packing, gs_plugin_best_fit, gs_plugin_fgd, gs_plugin_fgd_pack, gs_plugin_fgd_plus;

struct env {
    struct gs_clock clock;
    struct gs_cache *c;
    struct gs_handle h;
    struct gs_cycle_state cs;
    struct gs_node_info *nodes[8];
    int n;
};

static int setup(void **st)
{
    struct env *e = calloc(1, sizeof *e);
    gs_clock_init_sim(&e->clock, 0);
    e->c = gs_cache_new(&e->clock);
    e->h = (struct gs_handle){.clock = &e->clock, .cache = e->c, .seed = 42};
    gs_cycle_state_init(&e->cs);
    e->cs.seed = 1234;
    *st = e;
    return 0;
}

static int teardown(void **st)
{
    struct env *e = *st;
    gs_cycle_state_free(&e->cs);
    gs_cache_free(e->c);
    free(e);
    return 0;
}

static int add_node(struct env *e, const char *name, int64_t cpu, int32_t ngpus)
{
    struct gs_node_spec s = {.name = name, .cpu_milli = cpu, .mem_bytes = 1LL << 40, .gpu_model = "G2",
                             .ngpus = ngpus};
    int idx = gs_cache_add_node_spec(e->c, &s);
    assert_true(idx >= 0);
    e->nodes[e->n++] = gs_cache_node(e->c, idx);
    return idx;
}

static struct gs_pod pod_of(const char *name, int64_t cpu, int32_t count, int32_t milli)
{
    struct gs_pod p;
    memset(&p, 0, sizeof p);
    p.meta.name = (char *)name;
    p.meta.namespace_ = (char *)"default";
    p.demand.cpu_milli = cpu;
    p.demand.gpu_count = count;
    p.demand.gpu_milli = milli;
    return p;
}

static void place(struct env *e, const struct gs_pod *p, int node, uint64_t mask)
{
    struct gs_assignment a = {.node = node, .gpu_mask = mask, .milli = p->demand.gpu_milli};
    assert_int_equal(gs_cache_assume(e->c, p, &a, 0), 0);
}

static void *init(struct env *e, const struct gs_plugin *p, json_t *args)
{
    void *state = NULL;
    struct gs_diags d = {0};
    if (p->init) assert_int_equal(p->init(&e->h, args, &state, &d), 0);
    gs_diags_free(&d);
    return state;
}

static void score(struct env *e, const struct gs_plugin *p, void *state, const struct gs_pod *pod, int64_t *s)
{
    if (p->pre_score) p->pre_score(state, &e->cs, pod, e->nodes, (size_t)e->n);
    p->score(state, &e->cs, pod, e->nodes, (size_t)e->n, s);
    if (p->normalize_score) p->normalize_score(state, &e->cs, pod, e->nodes, s, (size_t)e->n);
}

static uint64_t reserve(struct env *e, const struct gs_plugin *p, void *state, const struct gs_pod *pod, int node)
{
    struct gs_assignment a = {.node = node};
    struct gs_status st = p->reserve(state, &e->cs, pod, gs_cache_node(e->c, node), &a);
    assert_int_equal(st.code, GS_SUCCESS);
    assert_int_equal(a.milli, pod->demand.gpu_milli);
    return a.gpu_mask;
}

/* a: 4 idle GPUs, 16 CPUs; b: GPU0 600 left, GPU1 200 left, 8 CPUs left. */
static void two_nodes(struct env *e, int *a, int *b)
{
    *a = add_node(e, "a", 16000, 4);
    *b = add_node(e, "b", 16000, 2);
    static struct gs_pod p1, p2;
    p1 = pod_of("used-1", 4000, 1, 400);
    p2 = pod_of("used-2", 4000, 1, 800);
    place(e, &p1, *b, 1);
    place(e, &p2, *b, 2);
}

static void test_best_fit(void **st)
{
    struct env *e = *st;
    int a, b;
    two_nodes(e, &a, &b);
    struct gs_pod pod = pod_of("p", 1000, 1, 500);
    int64_t s[2];
    score(e, &gs_plugin_best_fit, NULL, &pod, s);
    assert_int_equal(s[0], 0); /* a is left with more: min-max -> 0 */
    assert_int_equal(s[1], 100);
    assert_int_equal(reserve(e, &gs_plugin_best_fit, NULL, &pod, b), 1ULL << 0); /* only GPU0 has 500 */
    struct gs_pod small = pod_of("s", 1000, 1, 150);
    assert_int_equal(reserve(e, &gs_plugin_best_fit, NULL, &small, b), 1ULL << 1); /* tightest: 200 */
    struct gs_pod whole = pod_of("w", 1000, 2, 1000);
    assert_int_equal(reserve(e, &gs_plugin_best_fit, NULL, &whole, a), 0x3);
}

static void test_best_fit_ties_normalise_to_zero(void **st)
{
    struct env *e = *st;
    add_node(e, "a", 16000, 4);
    add_node(e, "b", 16000, 4);
    struct gs_pod pod = pod_of("p", 1000, 1, 1000);
    int64_t s[2];
    score(e, &gs_plugin_best_fit, NULL, &pod, s);
    assert_int_equal(s[0], 0);
    assert_int_equal(s[1], 0);
}

static void test_dot_prod(void **st)
{
    struct env *e = *st;
    int a, b;
    two_nodes(e, &a, &b);
    struct gs_pod pod = pod_of("p", 1000, 1, 1000);
    int64_t s[2];
    score(e, &gs_plugin_dot_prod, NULL, &pod, s);
    /* a: dot = 16000/128000*1000/128000 + 4000/8000*1000/8000 -> int(100*(1-dot/2)) = 96 */
    assert_int_equal(s[0], 96);
    /* b: 8000/128000*1000/128000 + 800/8000*1000/8000 -> 99 */
    assert_int_equal(s[1], 99);
    struct gs_pod share = pod_of("s", 1000, 1, 100);
    assert_int_equal(reserve(e, &gs_plugin_dot_prod, NULL, &share, b), 1ULL << 1);
}

static void test_gpu_packing(void **st)
{
    struct env *e = *st;
    int a, b;
    two_nodes(e, &a, &b);
    int64_t s[2];
    struct gs_pod share = pod_of("s", 1000, 1, 500);
    score(e, &gs_plugin_gpu_packing, NULL, &share, s);
    assert_int_equal(s[0], 29);  /* idle node: max(33 - 4, 4) */
    assert_int_equal(s[1], 94);  /* fits on GPU0 (60% free): 100 - 60/10 */
    struct gs_pod cpu = pod_of("c", 1000, 0, 0);
    score(e, &gs_plugin_gpu_packing, NULL, &cpu, s);
    assert_int_equal(s[0], 0);
    int c = add_node(e, "c", 16000, 4);
    struct gs_pod u = pod_of("u", 0, 1, 300);
    place(e, &u, c, 1);
    struct gs_pod whole = pod_of("w", 1000, 2, 1000);
    int64_t s3[3];
    score(e, &gs_plugin_gpu_packing, NULL, &whole, s3);
    assert_int_equal(s3[2], 48); /* partly used node, 2 whole GPUs: max(50 - 2, 33) */
    assert_int_equal(reserve(e, &gs_plugin_gpu_packing, NULL, &whole, c), 0x6);
}

static void test_gpu_clustering(void **st)
{
    struct env *e = *st;
    void *state = init(e, &gs_plugin_gpu_clustering, NULL);
    int a = add_node(e, "a", 64000, 8), b = add_node(e, "b", 64000, 8), c = add_node(e, "c", 64000, 8);
    struct gs_pod s1 = pod_of("s1", 1000, 1, 500), w1 = pod_of("w1", 1000, 1, 1000), w2 = pod_of("w2", 1000, 1, 1000);
    /* s1 on a (share only); w1 and then s... on c: mixed */
    uint64_t m = reserve(e, &gs_plugin_gpu_clustering, state, &s1, a);
    place(e, &s1, a, m);
    m = reserve(e, &gs_plugin_gpu_clustering, state, &w1, c);
    place(e, &w1, c, m);
    struct gs_pod s2 = pod_of("s2", 1000, 1, 200);
    m = reserve(e, &gs_plugin_gpu_clustering, state, &s2, c);
    place(e, &s2, c, m);
    struct gs_pod pod = pod_of("p", 1000, 1, 300);
    int64_t s[3];
    score(e, &gs_plugin_gpu_clustering, state, &pod, s);
    assert_int_equal(s[0], 25 * (8000 - 7500) / 8000 + 75); /* only share pods */
    assert_int_equal(s[1], 25 * (8000 - 8000) / 8000 + 25); /* empty */
    assert_int_equal(s[2], 25 * (8000 - 6800) / 8000 + 50); /* share among others */
    score(e, &gs_plugin_gpu_clustering, state, &w2, s);
    assert_int_equal(s[0], 25 * 500 / 8000 + 0);           /* other kinds only */
    assert_int_equal(s[2], 25 * 1200 / 8000 + 50);
    /* a pod leaving the cache is noticed through the node generation */
    assert_int_equal(gs_cache_remove_pod(e->c, "default/s1"), 0);
    score(e, &gs_plugin_gpu_clustering, state, &pod, s);
    assert_int_equal(s[0], 25);
    (void)b;
    gs_plugin_gpu_clustering.fini(state);
}

static void test_random(void **st)
{
    struct env *e = *st;
    for (int i = 0; i < 6; i++) {
        char name[8] = {'n', (char)('0' + i), 0};
        add_node(e, name, 16000, 4);
    }
    void *state = init(e, &gs_plugin_random, NULL);
    struct gs_pod pod = pod_of("p", 1000, 1, 500);
    int64_t s[6], s2[6];
    int seen[6] = {0};
    for (unsigned long long seed = 1; seed <= 60; seed++) {
        e->cs.seed = seed;
        score(e, &gs_plugin_random, state, &pod, s);
        int hundreds = 0, which = -1;
        for (int i = 0; i < 6; i++)
            if (s[i] == 100) hundreds++, which = i;
            else assert_int_equal(s[i], 0);
        assert_int_equal(hundreds, 1);
        seen[which]++;
        score(e, &gs_plugin_random, state, &pod, s2);
        assert_memory_equal(s, s2, sizeof s); /* same seed, same choice */
    }
    for (int i = 0; i < 6; i++) assert_true(seen[i] > 0);
    uint64_t m = reserve(e, &gs_plugin_random, state, &pod, 0);
    assert_true(m && !(m & (m - 1)));
    gs_plugin_random.fini(state);
}

static json_t *workload_args(void)
{
    /* 60% share-500, 40% whole single GPUs */
    return json_pack("{s:[{s:i,s:i,s:i,s:f},{s:i,s:i,s:i,s:f}]}", "targetWorkload", "cpuMilli", 1000, "gpuMilli",
                     500, "gpuCount", 1, "weight", 0.6, "cpuMilli", 1000, "gpuMilli", 1000, "gpuCount", 1, "weight",
                     0.4);
}

static int32_t fgd_expected(double f0, double f1)
{
    return (int32_t)(1.0 / (1.0 + exp(-(f0 - f1) / 1000.0)) * 100);
}

static void test_fgd(void **st)
{
    struct env *e = *st;
    int a, b;
    two_nodes(e, &a, &b);
    json_t *args = workload_args();
    void *state = init(e, &gs_plugin_fgd, args);
    struct gs_pod pod = pod_of("p", 1000, 1, 500);
    int64_t s[2];
    score(e, &gs_plugin_fgd, state, &pod, s);
    /* a: idle 4 GPUs, F=0; after share-500 on one GPU: share fits, whole: 500 fragment -> 0.4*500 */
    assert_int_equal(s[0], fgd_expected(0, 0.4 * 500));
    /* b: lefts 600,200: F = 0.6*200 + 0.4*800 = 440; after (100,200): share can't run -> 300 */
    assert_int_equal(s[1], fgd_expected(440, 300));
    assert_true(s[1] > s[0]);
    assert_int_equal(reserve(e, &gs_plugin_fgd, state, &pod, b), 1ULL << 0);
    /* scores are cached per shape and node: a second look gives the same, and a
     * placement on b changes b's score */
    int64_t s2[2];
    score(e, &gs_plugin_fgd, state, &pod, s2);
    assert_memory_equal(s, s2, sizeof s);
    struct gs_pod q = pod_of("q", 1000, 1, 600);
    place(e, &q, b, 1);
    score(e, &gs_plugin_fgd, state, &pod, s2);
    assert_int_equal(s2[0], s[0]);
    assert_int_equal(s2[1], 0); /* no GPU has 500 left any more: the row slot was recomputed */
    struct gs_pod whole = pod_of("w", 1000, 2, 1000);
    assert_int_equal(reserve(e, &gs_plugin_fgd, state, &whole, a), 0x3);
    gs_plugin_fgd.fini(state);
    json_decref(args);
}

static void test_fgd_share_gpu_choice(void **st)
{
    struct env *e = *st;
    int a = add_node(e, "a", 16000, 3);
    struct gs_pod u1 = pod_of("u1", 0, 1, 500), u2 = pod_of("u2", 0, 1, 200);
    place(e, &u1, a, 1ULL << 1); /* GPU1 500 left */
    place(e, &u2, a, 1ULL << 2); /* GPU2 800 left */
    json_t *args = workload_args();
    void *state = init(e, &gs_plugin_fgd, args);
    /* a 300-milli pod: on GPU1 it leaves 200 (fragment for both classes), on
     * GPU2 it leaves 500 (still fits share-500), on GPU0 it breaks a whole GPU */
    struct gs_pod pod = pod_of("p", 0, 1, 300);
    assert_int_equal(reserve(e, &gs_plugin_fgd, state, &pod, a), 1ULL << 2);
    gs_plugin_fgd.fini(state);
    json_decref(args);
}

static void test_fgd_pack(void **st)
{
    struct env *e = *st;
    int a = add_node(e, "a", 16000, 4), b = add_node(e, "b", 16000, 4);
    struct gs_pod cpu = pod_of("c", 1000, 0, 0);
    place(e, &cpu, b, 0); /* b hosts a pod but its GPUs are as idle as a's */
    json_t *args = workload_args();
    void *state = init(e, &gs_plugin_fgd_pack, args);
    struct gs_pod pod = pod_of("p", 1000, 1, 1000);
    int64_t s[2];
    score(e, &gs_plugin_fgd_pack, state, &pod, s);
    assert_int_equal(s[1], 100); /* same fragmentation change: the busy node wins */
    assert_true(s[0] < 100);
    assert_int_equal(reserve(e, &gs_plugin_fgd_pack, state, &pod, a), 1ULL << 0);
    gs_plugin_fgd_pack.fini(state);
    json_decref(args);
}

/* Expected FGDPlus key of placing (cpu, mask, milli) on node i: FGD's bucket
 * for a sharing pod, a bucket four times as wide otherwise. */
static int64_t plus_key(struct env *e, struct gs_frag_model *m, int i, int64_t cpu, uint64_t mask, int32_t milli,
                        bool share)
{
    double f0 = gs_frag_node(m, e->nodes[i]), f1 = gs_frag_node_after(m, e->nodes[i], cpu, mask, milli);
    return (int64_t)(1.0 / (1.0 + exp(-(f0 - f1) / (share ? 1000.0 : 4000.0))) * 100);
}

static void test_fgd_plus(void **st)
{
    struct env *e = *st;
    int a, b;
    two_nodes(e, &a, &b);
    int c = add_node(e, "c", 2500, 2);
    (void)a;
    static struct gs_pod half;
    half = pod_of("half", 1000, 1, 500);
    place(e, &half, c, 1); /* c: GPU0 500 left, GPU1 idle, 1500 CPU left */
    json_t *args = workload_args();
    struct gs_diags d = {0};
    struct gs_frag_model *m = NULL;
    assert_int_equal(gs_frag_model_from_json(e->c, json_object_get(args, "targetWorkload"), "t", &d, &m), 0);
    void *state = init(e, &gs_plugin_fgd_plus, args);
    /* whole GPU: best-fit GPUs, wide bucket; the argmax of the keys gets 100 */
    struct gs_pod whole = pod_of("w", 1000, 1, 1000);
    int64_t s[3], k[3], hi = INT64_MIN;
    struct gs_node_info *nb = e->nodes[1];
    e->nodes[1] = e->nodes[2]; /* b has no whole GPU: Filter drops it, so score a and c */
    e->n = 2;
    score(e, &gs_plugin_fgd_plus, state, &whole, s);
    for (int i = 0; i < 2; i++) {
        k[i] = plus_key(e, m, i, 1000, gs_gpusel_best_fit(e->nodes[i], 1, 1000), 1000, false);
        if (k[i] > hi) hi = k[i];
    }
    for (int i = 0; i < 2; i++) assert_true((s[i] == 100) == (k[i] == hi));
    /* on c the pod leaves too little CPU for GPU0's 500 milli: a wins */
    assert_true(k[1] < k[0]);
    assert_int_equal(s[0], 100);
    assert_true(s[1] < 100);
    e->nodes[2] = e->nodes[1];
    e->nodes[1] = nb;
    e->n = 3;
    /* sharing pod: FGD's bucket over the GPU with the smallest F after */
    struct gs_pod share = pod_of("s", 1000, 1, 500);
    score(e, &gs_plugin_fgd_plus, state, &share, s);
    hi = INT64_MIN;
    for (int i = 0; i < 3; i++) {
        k[i] = INT64_MIN;
        for (int g = 0; g < e->nodes[i]->ngpus; g++)
            if (gs_gpu_left(e->nodes[i], g) >= 500) {
                int64_t kg = plus_key(e, m, i, 1000, 1ULL << g, 500, true);
                if (kg > k[i]) k[i] = kg;
            }
        if (k[i] > hi) hi = k[i];
    }
    for (int i = 0; i < 3; i++) assert_true((s[i] == 100) == (k[i] == hi));
    assert_false(s[0] == 100 && s[1] == 100 && s[2] == 100);
    /* b's GPU0 (600 left) is the tightest GPU that takes 500 */
    assert_int_equal(reserve(e, &gs_plugin_fgd_plus, state, &share, b), 1ULL << 0);
    gs_plugin_fgd_plus.fini(state);
    gs_frag_model_free(m);
    gs_diags_free(&d);
    json_decref(args);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_best_fit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_best_fit_ties_normalise_to_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dot_prod, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_packing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_clustering, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fgd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fgd_share_gpu_choice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fgd_pack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fgd_plus, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
