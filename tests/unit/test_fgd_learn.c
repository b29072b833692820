/*
 * test_fgd_learn.c - the FGDLearn policy: its learned, hardness-weighted
 * target workload (sched/fgd_learn_core.c) on hand-made nodes - copies of a
 * class a node takes, decayed popularity, hardness, the rebuild schedule, the
 * error message of every bad arg - and the plugin's keys, NormalizeScore and
 * GPU choice.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sched/cache.h"
#include "sched/fgd_learn_core.h"
#include "sched/frag.h"
#include "sched/plugin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const struct gs_plugin gs_plugin_fgd_learn;

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
    *st = e;
    return e->c ? 0 : -1;
}

static int teardown(void **st)
{
    struct env *e = *st;
    gs_cycle_state_free(&e->cs);
    gs_cache_free(e->c);
    free(e);
    return 0;
}

static int add_node(struct env *e, const char *name, int64_t cpu, int64_t mem, const char *model, int32_t ngpus)
{
    struct gs_node_spec s = {.name = name, .cpu_milli = cpu, .mem_bytes = mem, .gpu_model = model, .ngpus = ngpus};
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

/* The learned class with this request, or fail. */
static struct gs_fgdl_class class_of(const struct gs_fgdl *l, int64_t cpu, int32_t count, int32_t milli)
{
    struct gs_fgdl_class c;
    for (size_t i = 0; i < gs_fgdl_nclasses(l); i++) {
        assert_int_equal(gs_fgdl_class(l, i, &c), 0);
        if (c.cpu_milli == cpu && c.gpu_count == count && c.gpu_milli == milli) return c;
    }
    fail_msg("no class cpu %lld, %d x %d", (long long)cpu, count, milli);
    return c;
}

/*--- Core ---*/

static void test_copies(void **st)
{
    struct env *e = *st;
    int a = add_node(e, "a", 32000, 64LL << 30, "V100", 8);
    struct gs_pod used = pod_of("u", 8000, 1, 700);
    place(e, &used, a, 1); /* GPU0: 300 left; 24 CPUs left */
    const struct gs_node_info *n = gs_cache_node(e->c, a);
    int32_t v100 = gs_cache_model_id(e->c, "V100"), t4 = gs_cache_model_id(e->c, "T4");
    assert_int_equal(gs_fgdl_copies(n, 0, 0, 2, 1000, NULL, 0), 3);      /* 7 whole GPUs */
    assert_int_equal(gs_fgdl_copies(n, 0, 0, 1, 300, NULL, 0), 3 * 7 + 1); /* shares of 300 */
    assert_int_equal(gs_fgdl_copies(n, 10000, 0, 1, 1000, NULL, 0), 2);  /* CPU binds */
    assert_int_equal(gs_fgdl_copies(n, 0, 30LL << 30, 1, 1000, NULL, 0), 2); /* memory binds */
    assert_int_equal(gs_fgdl_copies(n, 0, 0, 1, 1000, &t4, 1), 0);       /* wrong model */
    assert_int_equal(gs_fgdl_copies(n, 0, 0, 1, 1000, &v100, 1), 7);
    assert_int_equal(gs_fgdl_copies(n, 4000, 0, 0, 0, NULL, 0), 6);      /* CPU-only */
}

static void test_params(void **st)
{
    (void)st;
    struct gs_fgdl_params p;
    struct gs_diags d = {0};
    assert_int_equal(gs_fgdl_params_parse(NULL, &p, &d), 0);
    struct gs_fgdl_params def;
    gs_fgdl_params_default(&def);
    assert_true(p.beta == def.beta && p.half_life == def.half_life && p.rebuild == def.rebuild);
    assert_true(def.share_scale > 0 && def.share_scale <= 100);
    json_t *ok = json_pack("{s:f,s:f,s:i,s:f,s:[]}", "beta", 2.0, "halfLife", 100.0, "rebuildEvery", 8,
                           "shareScale", 0.25, "targetWorkload");
    assert_int_equal(gs_fgdl_params_parse(ok, &p, &d), 0);
    assert_true(p.beta == 2.0 && p.half_life == 100.0 && p.rebuild == 8 && p.share_scale == 0.25);
    json_decref(ok);
    struct {
        const char *json, *path, *says;
    } bad[] = {
        {"{\"beta\": 9}", "args.beta", "9 is out of range"},
        {"{\"beta\": \"x\"}", "args.beta", "expected a number"},
        {"{\"halfLife\": 0}", "args.halfLife", "0 is out of range"},
        {"{\"usableFloor\": 2}", "args.usableFloor", "2 is out of range"},
        {"{\"coverage\": 0}", "args.coverage", "0 is out of range"},
        {"{\"rebuildEvery\": 2.5}", "args.rebuildEvery", "2.5 is not a whole number"},
        {"{\"rebuildEvery\": 0}", "args.rebuildEvery", "0 is out of range"},
        {"{\"shareScale\": 0}", "args.shareScale", "0 is out of range"},
        {"{\"shareScale\": 101}", "args.shareScale", "101 is out of range"},
        {"{\"shareScale\": true}", "args.shareScale", "expected a number"},
        {"[1]", "args", "expected an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = json_loads(bad[i].json, JSON_DECODE_ANY, NULL);
        assert_non_null(j);
        assert_int_equal(gs_fgdl_params_parse(j, &p, &d), GS_EINVAL);
        assert_int_equal(d.n, 1);
        assert_string_equal(d.v[0].path, bad[i].path);
        if (!strstr(d.v[0].msg, bad[i].says)) fail_msg("%s: \"%s\" lacks \"%s\"", bad[i].json, d.v[0].msg, bad[i].says);
        gs_diags_free(&d);
        memset(&d, 0, sizeof d);
        json_decref(j);
    }
}

static void test_decayed_popularity(void **st)
{
    struct env *e = *st;
    add_node(e, "a", 64000, 1LL << 40, "V100", 8);
    struct gs_fgdl_params p;
    gs_fgdl_params_default(&p);
    p.half_life = 4; /* the first class's pods weigh half after 4 more pods */
    p.rebuild = 1;
    p.coverage = 1;
    p.pop_exp = 1; /* FGD's popularity weights: they move with every y pod */
    struct gs_fgdl *l;
    assert_int_equal(gs_fgdl_new(e->c, &p, &l), 0);
    assert_null(gs_fgdl_model(l, NULL));
    struct gs_pod x = pod_of("x", 1000, 1, 1000), y = pod_of("y", 2000, 1, 1000);
    for (int i = 0; i < 4; i++) gs_fgdl_observe(l, &x.demand);
    for (int i = 0; i < 4; i++) gs_fgdl_observe(l, &y.demand);
    /* x's weights: 2^0..2^0.75, y's: 2^1..2^1.75, so p_y = 2 p_x */
    struct gs_fgdl_class cx = class_of(l, 1000, 1, 1000), cy = class_of(l, 2000, 1, 1000);
    assert_true(fabs(cy.p / cx.p - 2.0) < 1e-9);
    assert_true(fabs(cx.p + cy.p - 1.0) < 1e-9);
    uint64_t ep;
    assert_non_null(gs_fgdl_model(l, &ep));
    /* rebuildEvery 1: a rebuild per pod; x alone (pods 2-4) keeps the same
     * weights and the model, each y pod moves them */
    assert_int_equal(ep, 5);
    gs_fgdl_free(l);
}

static void test_rebuild_schedule(void **st)
{
    struct env *e = *st;
    add_node(e, "a", 64000, 1LL << 40, "V100", 8);
    struct gs_fgdl_params p;
    gs_fgdl_params_default(&p);
    p.rebuild = 100;
    struct gs_fgdl *l;
    assert_int_equal(gs_fgdl_new(e->c, &p, &l), 0);
    p.coverage = 1;
    gs_fgdl_free(l);
    assert_int_equal(gs_fgdl_new(e->c, &p, &l), 0);
    uint64_t ep = 0;
    for (int i = 1; i <= 656; i++) { /* a new class every pod: every rebuild has new weights */
        struct gs_pod x = pod_of("x", 1000 + i, 1, 500);
        gs_fgdl_observe(l, &x.demand);
    }
    gs_fgdl_model(l, &ep);
    /* 1, 2, 4, ..., 128 (8 models), then steps of 100: 228, 328, ..., 628 */
    assert_int_equal(ep, 13);
    gs_fgdl_free(l);
    /* one class only: its weight never moves, the first model stays */
    assert_int_equal(gs_fgdl_new(e->c, &p, &l), 0);
    struct gs_pod y = pod_of("y", 1000, 1, 500);
    for (int i = 1; i <= 656; i++) gs_fgdl_observe(l, &y.demand);
    assert_non_null(gs_fgdl_model(l, &ep));
    assert_int_equal(ep, 1);
    gs_fgdl_free(l);
}

/* Two 8-GPU nodes, one nearly full: 8-GPU pods fit on one node only, while
 * 1-GPU pods fit almost anywhere, so the 8-GPU class is the harder one and
 * beta raises its weight against popularity. */
static void test_hardness(void **st)
{
    struct env *e = *st;
    int a = add_node(e, "a", 96000, 1LL << 40, "V100", 8);
    add_node(e, "b", 96000, 1LL << 40, "V100", 8);
    struct gs_pod fill = pod_of("f", 1000, 6, 1000);
    place(e, &fill, a, 0x3f); /* a: 2 whole GPUs left */
    for (int beta = 0; beta <= 2; beta++) {
        struct gs_fgdl_params p;
        gs_fgdl_params_default(&p);
        p.beta = beta;
        p.coverage = 1;
        p.pop_exp = 1;      /* popularity times hardness^beta, no size term */
        p.size_exp = 0;
        p.threshold = 1e-9; /* every class above the threshold */
        struct gs_fgdl *l;
        assert_int_equal(gs_fgdl_new(e->c, &p, &l), 0);
        struct gs_pod one = pod_of("one", 1000, 1, 1000), eight = pod_of("eight", 1000, 8, 1000);
        for (int i = 0; i < 8; i++) gs_fgdl_observe(l, i < 7 ? &one.demand : &eight.demand);
        struct gs_fgdl_class c1 = class_of(l, 1000, 1, 1000), c8 = class_of(l, 1000, 8, 1000);
        assert_true(fabs(c1.p - 7.0 / 8) < 1e-3 && fabs(c8.p - 1.0 / 8) < 1e-3);
        if (beta == 0) { /* no hardness term: not computed, popularity weights */
            assert_true(c1.hardness == 1 && c8.hardness == 1);
            assert_true(fabs(c8.weight - c8.p) < 1e-9);
            gs_fgdl_free(l);
            continue;
        }
        /* demand shares 7/15 and 8/15; usable 10/10 and 8/10 of the free GPUs */
        assert_true(fabs(c1.hardness - 7.0 / 15) < 1e-3);
        assert_true(fabs(c8.hardness - (8.0 / 15) / 0.8) < 1e-3);
        /* GPU-class weights keep the GPU classes' total popularity */
        assert_true(fabs(c1.weight + c8.weight - 1.0) < 1e-9);
        assert_true(c8.hardness > c1.hardness);
        double raised = (c8.weight / c1.weight) / (c8.p / c1.p);
        assert_true(fabs(raised - pow(c8.hardness / c1.hardness, beta)) < 1e-9);
        gs_fgdl_free(l);
    }
}

/* The defaults: popularity only picks the classes; a class weighs its
 * request size to the power -1.25, whatever its popularity. */
static void test_size_weights(void **st)
{
    struct env *e = *st;
    add_node(e, "a", 96000, 1LL << 40, "V100", 8);
    struct gs_fgdl_params p;
    gs_fgdl_params_default(&p);
    p.coverage = 1;
    p.size_exp = 1.25;
    p.count_exp = -1; /* the GPU count's exponent follows sizeExp */
    p.share_scale = 1;
    struct gs_fgdl *l;
    assert_int_equal(gs_fgdl_new(e->c, &p, &l), 0);
    struct gs_pod whole = pod_of("w", 1000, 1, 1000), half = pod_of("h", 1000, 1, 500),
                  two = pod_of("t", 1000, 2, 1000), cpu = pod_of("c", 1000, 0, 0);
    for (int i = 0; i < 16; i++) gs_fgdl_observe(l, i < 10 ? &whole.demand : i < 12 ? &half.demand : i < 15 ? &two.demand : &cpu.demand);
    struct gs_fgdl_class cw = class_of(l, 1000, 1, 1000), ch = class_of(l, 1000, 1, 500), ct = class_of(l, 1000, 2, 1000),
                         cc = class_of(l, 1000, 0, 0);
    assert_true(fabs(ch.weight / cw.weight - pow(2, 1.25)) < 1e-9);
    assert_true(fabs(ct.weight / cw.weight - pow(2, -1.25)) < 1e-9);
    assert_true(fabs(cc.weight - cc.p) < 1e-9); /* CPU-only: its popularity */
    assert_true(fabs(cw.weight + ch.weight + ct.weight - (cw.p + ch.p + ct.p)) < 1e-9);
    gs_fgdl_free(l);
    /* shareScale weighs the sharing classes (milli < 1000) only; the GPU
     * classes' total stays their popularity */
    p.share_scale = 0.5;
    p.count_exp = 1.5;
    assert_int_equal(gs_fgdl_new(e->c, &p, &l), 0);
    for (int i = 0; i < 16; i++) gs_fgdl_observe(l, i < 10 ? &whole.demand : i < 12 ? &half.demand : i < 15 ? &two.demand : &cpu.demand);
    cw = class_of(l, 1000, 1, 1000), ch = class_of(l, 1000, 1, 500), ct = class_of(l, 1000, 2, 1000);
    assert_true(fabs(ch.weight / cw.weight - 0.5 * pow(2, 1.25)) < 1e-9);
    assert_true(fabs(ct.weight / cw.weight - pow(2, -1.5)) < 1e-9);
    assert_true(fabs(cw.weight + ch.weight + ct.weight - (cw.p + ch.p + ct.p)) < 1e-9);
    gs_fgdl_free(l);
}

/*--- Plugin ---*/

static void *init(struct env *e, const char *args_json)
{
    json_t *args = args_json ? json_loads(args_json, 0, NULL) : NULL;
    void *state = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_plugin_fgd_learn.init(&e->h, args, &state, &d), 0);
    gs_diags_free(&d);
    json_decref(args);
    return state;
}

static void score(struct env *e, void *state, const struct gs_pod *pod, int64_t *s)
{
    gs_plugin_fgd_learn.pre_score(state, &e->cs, pod, e->nodes, (size_t)e->n);
    gs_plugin_fgd_learn.score(state, &e->cs, pod, e->nodes, (size_t)e->n, s);
    gs_plugin_fgd_learn.normalize_score(state, &e->cs, pod, e->nodes, s, (size_t)e->n);
}

static void test_plugin_bad_args(void **st)
{
    struct env *e = *st;
    struct {
        const char *json, *path, *says;
    } bad[] = {
        {"{\"tieBreak\": \"left\"}", "args.tieBreak", "\"left\" is not a tie-break"},
        {"{\"shareWidth\": 0}", "args.shareWidth", "0 is out of range: expected a number in (0, 1e9]"},
        {"{\"wholeWidth\": \"x\"}", "args.wholeWidth", "expected a number"},
        {"{\"multiWidth\": -5}", "args.multiWidth", "-5 is out of range: expected a number in (0, 1e9]"},
        {"{\"multiWidth\": null}", "args.multiWidth", "expected a number in (0, 1e9]"},
        {"{\"beta\": 9}", "args.beta", "9 is out of range"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = json_loads(bad[i].json, 0, NULL);
        void *state = NULL;
        struct gs_diags d = {0};
        assert_int_equal(gs_plugin_fgd_learn.init(&e->h, j, &state, &d), GS_EINVAL);
        assert_null(state);
        assert_true(d.n >= 1);
        assert_string_equal(d.v[0].path, bad[i].path);
        if (!strstr(d.v[0].msg, bad[i].says)) fail_msg("%s: \"%s\" lacks \"%s\"", bad[i].json, d.v[0].msg, bad[i].says);
        gs_diags_free(&d);
        json_decref(j);
    }
}

/* After 8-GPU pods were seen, a 1-GPU pod keeps the empty 8-GPU node whole
 * and goes to the node already broken; the GPU choice is the best fit. */
static void test_plugin_keeps_big_node(void **st)
{
    struct env *e = *st;
    int a = add_node(e, "a", 96000, 1LL << 40, "V100", 8);
    int b = add_node(e, "b", 96000, 1LL << 40, "V100", 8);
    struct gs_pod fill = pod_of("f", 1000, 1, 1000);
    place(e, &fill, b, 0x1);
    void *state = init(e, "{\"rebuildEvery\": 1}");
    struct gs_pod eight = pod_of("eight", 1000, 8, 1000), one = pod_of("one", 1000, 1, 1000);
    int64_t s[2];
    for (int i = 0; i < 3; i++) score(e, state, &eight, s);
    assert_int_equal(s[a], 100); /* only a takes 8 GPUs; b cannot (Filter's job) but scores low */
    score(e, state, &one, s);
    assert_int_equal(s[b], 100);
    assert_true(s[a] < 100);
    struct gs_assignment as = {.node = b};
    struct gs_status stt = gs_plugin_fgd_learn.reserve(state, &e->cs, &one, gs_cache_node(e->c, b), &as);
    assert_int_equal(stt.code, GS_SUCCESS);
    assert_int_equal(as.gpu_mask, 1ULL << 1); /* first free whole GPU */
    /* a sharing pod takes the tightest GPU that fits */
    struct gs_pod half = pod_of("h", 1000, 1, 500), small = pod_of("s", 1000, 1, 300);
    place(e, &half, b, 1ULL << 2); /* b's GPU2: 500 left */
    score(e, state, &small, s);
    struct gs_assignment as2 = {.node = b};
    stt = gs_plugin_fgd_learn.reserve(state, &e->cs, &small, gs_cache_node(e->c, b), &as2);
    assert_int_equal(stt.code, GS_SUCCESS);
    assert_int_equal(as2.gpu_mask, 1ULL << 2);
    gs_plugin_fgd_learn.fini(state);
}

/* Raw keys (bucket * 4096 + tie-break) of the pod on the nodes. */
static void raw_keys(struct env *e, void *state, const struct gs_pod *pod, int64_t *s)
{
    gs_plugin_fgd_learn.pre_score(state, &e->cs, pod, e->nodes, (size_t)e->n);
    gs_plugin_fgd_learn.score(state, &e->cs, pod, e->nodes, (size_t)e->n, s);
}

/* multiWidth is the bucket width of multi-GPU pods only: so wide that every
 * node falls within one score step, the 2-GPU pod's nodes are a step apart
 * at most (the default width puts them further), while a 1-GPU pod (the
 * whole-GPU width) still tells them apart. */
static void test_plugin_multi_width(void **st)
{
    struct env *e = *st;
    int a = add_node(e, "a", 96000, 1LL << 40, "V100", 8);
    int b = add_node(e, "b", 96000, 1LL << 40, "V100", 8);
    struct gs_pod fill = pod_of("f", 1000, 1, 1000);
    place(e, &fill, b, 0x1);
    struct gs_pod eight = pod_of("eight", 1000, 8, 1000), two = pod_of("two", 1000, 2, 1000),
                  one = pod_of("one", 1000, 1, 1000);
    int64_t s[2];
    void *narrow = init(e, "{\"rebuildEvery\": 1}");
    void *wide = init(e, "{\"rebuildEvery\": 1, \"multiWidth\": 1e9}");
    for (int i = 0; i < 3; i++) {
        raw_keys(e, narrow, &eight, s);
        raw_keys(e, wide, &eight, s);
    }
    raw_keys(e, narrow, &two, s);
    assert_true(s[b] - s[a] > 4096);
    raw_keys(e, wide, &two, s);
    assert_true(s[b] - s[a] <= 4096 && s[b] >= s[a]);
    raw_keys(e, wide, &one, s);
    assert_true(s[b] - s[a] > 4096);
    gs_plugin_fgd_learn.fini(narrow);
    gs_plugin_fgd_learn.fini(wide);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_copies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_params, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decayed_popularity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rebuild_schedule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hardness, setup, teardown),
        cmocka_unit_test_setup_teardown(test_size_weights, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plugin_bad_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plugin_keeps_big_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plugin_multi_width, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
