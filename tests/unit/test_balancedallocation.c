/*
 * test_balancedallocation.c - NodeResourcesBalancedAllocation's scores
 * against values computed by hand from kube's formula (std of the
 * requested fractions, score = (1 - std) * 100 truncated), for cpu+memory,
 * with nvidia.com/gpu configured (three fractions: population std), the
 * cap at 1, the rule that an extended resource the pod does not request is
 * left out, the best-effort Skip, and agreement of the pointer and index
 * forms on many random nodes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched/plugin.h"
#include "sched_fixture.h"

#include <math.h>

static struct gs_clock clk;

struct env {
    struct gs_cache *c;
    const struct gs_plugin *pl;
    void *state;
};

static void env_init(struct env *e, const char *args_json)
{
    gs_clock_init_sim(&clk, 0);
    e->c = gs_cache_new(&clk);
    e->pl = gs_plugin_lookup("NodeResourcesBalancedAllocation");
    assert_non_null(e->pl);
    struct gs_handle h = {.clock = &clk, .cache = e->c};
    struct gs_diags d = {0};
    json_t *args = args_json ? json_loads(args_json, 0, NULL) : NULL;
    assert_int_equal(e->pl->init(&h, args, &e->state, &d), 0);
    json_decref(args);
}

static void env_free(struct env *e)
{
    e->pl->fini(e->state);
    gs_cache_free(e->c);
}

/* A node of cpu milli-CPU, mem bytes and gpus GPUs. */
static int add(struct env *e, const char *name, int64_t cpu, int64_t mem, int gpus)
{
    struct gs_node_spec s = {.name = name, .cpu_milli = cpu, .mem_bytes = mem, .pods = 110,
                             .gpu_model = gpus ? "A100" : NULL, .ngpus = gpus, .gpu_mem_mib = 81920};
    return gs_cache_add_node_spec(e->c, &s);
}

/* An in-memory pod with exact requests. */
static void pod_init(struct gs_pod *p, const char *name, int64_t cpu, int64_t mem, int gpus)
{
    memset(p, 0, sizeof *p);
    p->meta.name = (char *)name;
    p->meta.namespace_ = (char *)"default";
    p->demand.cpu_milli = cpu;
    p->demand.mem_bytes = mem;
    p->demand.gpu_count = gpus;
    p->demand.gpu_milli = gpus ? GS_GPU_MILLI : 0;
}

/* Scores of every node for pod (both forms must agree); PreScore's code. */
static enum gs_code scores_of(struct env *e, const struct gs_pod *pod, int64_t *out)
{
    struct gs_cycle_state cs;
    gs_cycle_state_init(&cs);
    int32_t n = gs_cache_node_count(e->c);
    struct gs_node_info **nodes = calloc((size_t)n, sizeof *nodes);
    int32_t *idx = calloc((size_t)n, sizeof *idx);
    int64_t *s2 = calloc((size_t)n, sizeof *s2);
    for (int32_t i = 0; i < n; i++) nodes[i] = gs_cache_node(e->c, i), idx[i] = i;
    struct gs_status st = e->pl->pre_score(e->state, &cs, pod, nodes, (size_t)n);
    struct gs_status st2 = e->pl->pre_score_idx(e->state, &cs, pod, idx, (size_t)n);
    assert_int_equal(st.code, st2.code);
    if (st.code == GS_SUCCESS) {
        e->pl->score(e->state, &cs, pod, nodes, (size_t)n, out);
        e->pl->score_idx(e->state, &cs, pod, idx, (size_t)n, s2);
        for (int32_t i = 0; i < n; i++)
            if (out[i] != s2[i]) fail_msg("node %d: pointer form %lld, index form %lld", i, (long long)out[i], (long long)s2[i]);
    }
    free(nodes), free(idx), free(s2);
    gs_cycle_state_free(&cs);
    return st.code;
}

static void test_cpu_memory_by_hand(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, NULL);
    add(&e, "a", 4000, 10000, 0);  /* empty */
    add(&e, "b", 4000, 10000, 0);  /* 2000m, 1000 bytes in use */
    add(&e, "c", 4000, 10000, 0);  /* over-requested memory: capped at 1 */
    struct gs_pod used, big, p;
    pod_init(&used, "used", 2000, 1000, 0);
    pod_init(&big, "big", 0, 9500, 0);
    assert_int_equal(gs_cache_add_bound(e.c, &used, &(struct gs_assignment){1, 0, 0, 0}), 0);
    assert_int_equal(gs_cache_add_bound(e.c, &big, &(struct gs_assignment){2, 0, 0, 0}), 0);
    pod_init(&p, "p", 1000, 5000, 0);
    int64_t s[3];
    assert_int_equal(scores_of(&e, &p, s), GS_SUCCESS);
    /* a: 0.25 vs 0.5 -> std 0.125 -> 87.5 -> 87 */
    assert_int_equal(s[0], 87);
    /* b: 3000/4000 = 0.75 vs 6000/10000 = 0.6 -> std 0.075 -> 92.5 -> 92 */
    assert_int_equal(s[1], 92);
    /* c: 0.25 vs min(14500/10000, 1) = 1 -> std 0.375 -> 62.5 -> 62 */
    assert_int_equal(s[2], 62);
    env_free(&e);
}

static void test_gpu_configured(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, "{\"resources\":[{\"name\":\"cpu\",\"weight\":1},{\"name\":\"memory\",\"weight\":1},"
                 "{\"name\":\"nvidia.com/gpu\",\"weight\":3}]}");
    add(&e, "g", 4000, 10000, 8);
    struct gs_pod p, cpu_only;
    pod_init(&p, "p", 1000, 5000, 2);
    int64_t s[1];
    assert_int_equal(scores_of(&e, &p, s), GS_SUCCESS);
    /* 0.25, 0.5, 0.25: mean 1/3, variance (1/144 + 4/144 + 1/144) / 3 = 1/72,
     * std 0.117851 -> 88.21 -> 88 */
    double want = (1 - sqrt(1.0 / 72)) * 100;
    assert_int_equal(s[0], (int64_t)want);
    assert_int_equal(s[0], 88);
    /* A pod without GPUs leaves nvidia.com/gpu out: cpu and memory only -> 87. */
    pod_init(&cpu_only, "c", 1000, 5000, 0);
    assert_int_equal(scores_of(&e, &cpu_only, s), GS_SUCCESS);
    assert_int_equal(s[0], 87);
    env_free(&e);
}

static void test_best_effort_skips_and_bad_args(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, NULL);
    add(&e, "a", 4000, 10000, 0);
    struct gs_pod be;
    pod_init(&be, "be", 0, 0, 0);
    int64_t s[1];
    assert_int_equal(scores_of(&e, &be, s), GS_SKIP);
    env_free(&e);
    static const struct {
        const char *args, *path, *msg;
    } bad[] = {
        {"{\"resources\":[]}", "args.resources", "must be a non-empty list"},
        {"{\"resources\":[{\"weight\":1}]}", "args.resources[0].name", "required"},
        {"{\"resources\":[{\"name\":\"cpu\",\"weight\":0}]}", "args.resources[0].weight", "from 1 to 100"},
        {"{\"resources\":[{\"name\":\"cpu\"},{\"name\":\"cpu\"}]}", "args.resources[1].name", "duplicate resource \"cpu\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gs_handle h = {.clock = &clk};
        struct gs_diags d = {0};
        void *state = NULL;
        json_t *args = json_loads(bad[i].args, 0, NULL);
        assert_int_equal(gs_plugin_lookup("NodeResourcesBalancedAllocation")->init(&h, args, &state, &d), GS_EINVAL);
        assert_true(d.n >= 1);
        assert_string_equal(d.v[0].path, bad[i].path);
        if (!strstr(d.v[0].msg, bad[i].msg)) fail_msg("case %zu: %s", i, d.v[0].msg);
        json_decref(args);
        gs_diags_free(&d);
    }
}

/* The index form's fast pass against kube's divisions, on many random nodes. */
static void test_forms_agree_on_random_nodes(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, NULL);
    uint64_t x = 12345;
    enum { N = 400 };
    static struct gs_pod used[N];
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t cpu = 1000 + (int64_t)(x >> 40) % 64000, mem = (1LL << 30) + (int64_t)(x >> 20) % (256LL << 30);
        assert_int_equal(add(&e, name, cpu, mem, 0), i);
        pod_init(&used[i], "u", (int64_t)(x >> 33) % cpu, (int64_t)(x >> 7) % mem, 0);
        char *pn = malloc(16);
        snprintf(pn, 16, "u%d", i);
        used[i].meta.name = pn;
        assert_int_equal(gs_cache_add_bound(e.c, &used[i], &(struct gs_assignment){i, 0, 0, 0}), 0);
    }
    int64_t s[N];
    for (int k = 0; k < 20; k++) {
        struct gs_pod p;
        pod_init(&p, "p", 100 * (k + 1), (int64_t)(k + 1) << 28, 0);
        assert_int_equal(scores_of(&e, &p, s), GS_SUCCESS);
        for (int i = 0; i < N; i++) assert_true(s[i] >= 50 && s[i] <= 100);
    }
    env_free(&e);
    for (int i = 0; i < N; i++) free(used[i].meta.name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_memory_by_hand),
        cmocka_unit_test(test_gpu_configured),
        cmocka_unit_test(test_best_effort_skips_and_bad_args),
        cmocka_unit_test(test_forms_agree_on_random_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
