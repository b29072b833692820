/*
 * test_fgd_look.c - FGDLook (src/sched/plugins/fgd_look.c), the placement
 * policy that reads the pods queued behind the current one: without a queue
 * it scores as FGDPlus; with one it keeps the only node a queued pod fits
 * for that pod; its args are checked with messages naming the field; and in
 * the FGD experiment (tests/data/openb_slice) the queue window changes
 * nothing for a policy that does not read it, changes FGDLook's decisions,
 * and runs are deterministic for a seed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sched/cache.h"
#include "sched/frag.h"
#include "sched/plugin.h"
#include "sim/sim.h"

#include <stdlib.h>
#include <string.h>

extern const struct gs_plugin gs_plugin_fgd_look, gs_plugin_fgd_plus;

struct env {
    struct gs_clock clock;
    struct gs_cache *c;
    struct gs_handle h;
    struct gs_cycle_state cs;
    struct gs_node_info *nodes[8];
    int n;
    const struct gs_pod *queue[8]; /* what handle.queued shows */
    size_t nqueue, asked;
};

static size_t show_queue(void *ctx, const struct gs_pod **out, size_t max)
{
    struct env *e = ctx;
    e->asked = max;
    size_t n = 0;
    for (; n < e->nqueue && n < max; n++) out[n] = e->queue[n];
    return n;
}

static int setup(void **st)
{
    struct env *e = calloc(1, sizeof *e);
    gs_clock_init_sim(&e->clock, 0);
    e->c = gs_cache_new(&e->clock);
    e->h = (struct gs_handle){.clock = &e->clock, .cache = e->c, .seed = 42, .queued = show_queue, .queue_ctx = e};
    gs_cycle_state_init(&e->cs);
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

static json_t *workload_args(void)
{
    /* 60% share-500, 40% whole single GPUs */
    return json_pack("{s:[{s:i,s:i,s:i,s:f},{s:i,s:i,s:i,s:f}]}", "targetWorkload", "cpuMilli", 1000, "gpuMilli",
                     500, "gpuCount", 1, "weight", 0.6, "cpuMilli", 1000, "gpuMilli", 1000, "gpuCount", 1, "weight",
                     0.4);
}

static void *init(struct env *e, const struct gs_plugin *p, json_t *args)
{
    void *state = NULL;
    struct gs_diags d = {0};
    assert_int_equal(p->init(&e->h, args, &state, &d), 0);
    assert_int_equal(d.n, 0);
    gs_diags_free(&d);
    return state;
}

static void score(struct env *e, const struct gs_plugin *p, void *state, const struct gs_pod *pod, int64_t *s)
{
    p->pre_score(state, &e->cs, pod, e->nodes, (size_t)e->n);
    p->score(state, &e->cs, pod, e->nodes, (size_t)e->n, s);
    p->normalize_score(state, &e->cs, pod, e->nodes, s, (size_t)e->n);
}

/* a: 2 idle GPUs, b: 1 idle GPU, c: 4 GPUs with 600, 200, 1000, 1000 free. */
static void three_nodes(struct env *e)
{
    add_node(e, "a", 16000, 2);
    add_node(e, "b", 16000, 1);
    int c = add_node(e, "c", 16000, 4);
    static struct gs_pod p1, p2;
    p1 = pod_of("p1", 1000, 1, 400);
    p2 = pod_of("p2", 1000, 1, 800);
    struct gs_assignment a1 = {.node = c, .gpu_mask = 1, .milli = 400}, a2 = {.node = c, .gpu_mask = 2, .milli = 800};
    assert_int_equal(gs_cache_assume(e->c, &p1, &a1, 0), 0);
    assert_int_equal(gs_cache_assume(e->c, &p2, &a2, 0), 0);
}

/* Without a queue FGDLook is FGDPlus for every pod but multi-GPU ones
 * (whose bucket is narrower). */
static void test_no_queue_scores_as_fgd_plus(void **st)
{
    struct env *e = *st;
    three_nodes(e);
    e->h.queued = NULL;
    json_t *args = workload_args();
    void *look = init(e, &gs_plugin_fgd_look, args), *plus = init(e, &gs_plugin_fgd_plus, args);
    /* pods that fit every node (the framework shows a plugin only those) */
    struct gs_pod pods[] = {pod_of("w", 1000, 1, 1000), pod_of("s", 1000, 1, 300), pod_of("cpu", 4000, 0, 0)};
    for (size_t i = 0; i < sizeof pods / sizeof *pods; i++) {
        int64_t sl[3], sp[3];
        score(e, &gs_plugin_fgd_look, look, &pods[i], sl);
        score(e, &gs_plugin_fgd_plus, plus, &pods[i], sp);
        for (int k = 0; k < 3; k++) assert_int_equal(sl[k], sp[k]);
    }
    /* the same GPUs at Reserve: the tightest GPU for a sharing pod */
    struct gs_assignment al = {.node = 2}, ap = {.node = 2};
    assert_int_equal(gs_plugin_fgd_look.reserve(look, &e->cs, &pods[1], e->nodes[2], &al).code, GS_SUCCESS);
    assert_int_equal(gs_plugin_fgd_plus.reserve(plus, &e->cs, &pods[1], e->nodes[2], &ap).code, GS_SUCCESS);
    assert_int_equal(al.gpu_mask, ap.gpu_mask);
    assert_int_equal(al.milli, 300);
    gs_plugin_fgd_look.fini(look);
    gs_plugin_fgd_plus.fini(plus);
    json_decref(args);
}

static void test_keeps_the_node_a_queued_pod_needs(void **st)
{
    struct env *e = *st;
    add_node(e, "a", 16000, 2);
    add_node(e, "b", 16000, 1);
    json_t *args = workload_args();
    void *look = init(e, &gs_plugin_fgd_look, args), *plus = init(e, &gs_plugin_fgd_plus, args);
    struct gs_pod one = pod_of("one", 1000, 1, 1000), two = pod_of("two", 1000, 2, 1000);
    int64_t s[2];
    /* FGDPlus: both nodes are as good (no fragment either way), so the first
     * name, a, wins the tie - and the 2-GPU pod queued next fits nowhere */
    score(e, &gs_plugin_fgd_plus, plus, &one, s);
    assert_int_equal(s[0], 100);
    /* FGDLook sees it in the queue: a is the only node it fits */
    e->queue[0] = &two;
    e->nqueue = 1;
    score(e, &gs_plugin_fgd_look, look, &one, s);
    assert_int_equal(e->asked, 8); /* its default window */
    assert_int_equal(s[1], 100);
    assert_true(s[0] < 100);
    /* a queued pod that fits nowhere now changes nothing */
    struct gs_pod four = pod_of("four", 1000, 4, 1000);
    e->queue[0] = &four;
    score(e, &gs_plugin_fgd_look, look, &one, s);
    assert_int_equal(s[0], 100);
    assert_int_equal(s[1], 100);
    gs_plugin_fgd_look.fini(look);
    gs_plugin_fgd_plus.fini(plus);
    /* lookahead 0 reads nothing */
    json_object_set_new(args, "lookahead", json_integer(0));
    look = init(e, &gs_plugin_fgd_look, args);
    e->queue[0] = &two;
    e->asked = 99;
    score(e, &gs_plugin_fgd_look, look, &one, s);
    assert_int_equal(e->asked, 99);
    assert_int_equal(s[0], 100);
    gs_plugin_fgd_look.fini(look);
    json_decref(args);
}

static void bad_args(struct env *e, const char *json, const char *field, const char *why)
{
    json_error_t err;
    json_t *args = json_loads(json, 0, &err);
    assert_non_null(args);
    void *state = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_plugin_fgd_look.init(&e->h, args, &state, &d), GS_EINVAL);
    assert_null(state);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, field);
    assert_non_null(strstr(d.v[0].msg, why));
    gs_diags_free(&d);
    json_decref(args);
}

static void test_bad_args(void **st)
{
    struct env *e = *st;
    bad_args(e, "{\"lookahead\": -1}", "args.lookahead", "got -1");
    bad_args(e, "{\"lookahead\": 33}", "args.lookahead", "0..32");
    bad_args(e, "{\"lookahead\": \"4\"}", "args.lookahead", "expected an integer");
    bad_args(e, "{\"alpha\": -0.5}", "args.alpha", "got -0.5");
    bad_args(e, "{\"alpha\": true}", "args.alpha", "expected a number");
    bad_args(e, "{\"coverage\": 2}", "args.coverage", "(0, 1]");
}

/*--- In the FGD experiment ---*/

static struct gs_trace trace;

static int load(void **st)
{
    (void)st;
    struct gs_diags d = {0};
    int rc = gs_trace_load_openb(GS_TEST_DATA "/openb_slice/nodes.csv", GS_TEST_DATA "/openb_slice/pods.csv", &trace,
                                 &d);
    gs_diags_free(&d);
    return rc;
}

static int unload(void **st)
{
    (void)st;
    gs_trace_free(&trace);
    return 0;
}

static void on_event(void *ctx, const struct gs_sim_event *ev)
{
    uint64_t *h = ctx;
    for (const char *s = ev->pod; *s; s++) *h = (*h ^ (unsigned char)*s) * 0x100000001b3ULL;
    for (const char *s = ev->node ? ev->node : "-"; *s; s++) *h = (*h ^ (unsigned char)*s) * 0x100000001b3ULL;
    *h = (*h ^ ev->gpus) * 0x100000001b3ULL;
}

/* Digest of every decision of one run. */
static uint64_t run(const char *policy, uint64_t seed, int window, struct gs_sim_result *res)
{
    uint64_t h = 1469598103934665603ULL;
    struct gs_sim_opts o = {.mode = GS_SIM_FGD, .policy = policy, .seed = seed, .tune = 1.3, .queue_window = window};
    struct gs_sim_sink sink = {.event = on_event, .ctx = &h};
    struct gs_diags d = {0};
    assert_int_equal(gs_sim_run_fgd(&trace, &o, &sink, res, &d), 0);
    assert_int_equal(d.n, 0);
    gs_diags_free(&d);
    return h;
}

static void test_experiment(void **st)
{
    (void)st;
    struct gs_sim_result a, b;
    int differ = 0;
    for (uint64_t seed = 42; seed < 45; seed++) {
        /* FGD does not read the queue: the window changes none of its decisions */
        assert_true(run("FGD", seed, 0, &a) == run("FGD", seed, 8, &b));
        /* same seed, same decisions */
        uint64_t l1 = run("FGDLook", seed, 8, &a), l2 = run("FGDLook", seed, 8, &b);
        assert_true(l1 == l2);
        assert_true(a.alloc_pct_at_100 == b.alloc_pct_at_100);
        assert_true(a.pods_scheduled > 0 && a.pods_scheduled <= a.pods_arrived);
        /* FGDLook reads the queue: without it some decision differs */
        if (run("FGDLook", seed, 0, &b) != l1) differ++;
    }
    assert_true(differ > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_queue_scores_as_fgd_plus, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keeps_the_node_a_queued_pod_needs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_experiment, load, unload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
