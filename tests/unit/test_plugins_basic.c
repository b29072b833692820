/*
 * test_plugins_basic.c - each built-in plugin on hand-made nodes: Filter
 * verdicts and reason texts, Score values computed as kube-scheduler computes
 * them, args validation, and GpuShare's device choice.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plugins/recorder.h"
#include "sched/framework.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const struct gs_plugin gs_plugin_priority_sort, gs_plugin_node_unschedulable, gs_plugin_node_resources_fit,
    gs_plugin_gpu_share, gs_plugin_gpu_model, gs_plugin_node_affinity, gs_plugin_taint_toleration,
    gs_plugin_default_binder;

/* A cache of spec nodes plus the plugin under test, started with args (JSON text or NULL). */
struct pt {
    struct gs_clock clk;
    struct gs_cache *cache;
    struct gs_handle h;
    const struct gs_plugin *pl;
    void *state;
    struct gs_cycle_state cs;
    struct gs_node_info *nodes[64];
    size_t n;
    uint8_t reject[64];
    int64_t scores[64];
};

static int pt_start(struct pt *t, const struct gs_plugin *pl, const char *args, struct gs_diags *d)
{
    memset(t, 0, sizeof *t);
    gs_clock_init_sim(&t->clk, 0);
    t->cache = gs_cache_new(&t->clk);
    t->h = (struct gs_handle){.clock = &t->clk, .cache = t->cache, .seed = 1};
    t->pl = pl;
    gs_cycle_state_init(&t->cs);
    json_t *a = args ? json_loads(args, 0, NULL) : NULL;
    if (args) assert_non_null(a);
    int err = pl->init ? pl->init(&t->h, a, &t->state, d) : 0;
    json_decref(a);
    return err;
}

static void pt_end(struct pt *t)
{
    if (t->pl->fini) t->pl->fini(t->state);
    gs_cycle_state_free(&t->cs);
    gs_cache_free(t->cache);
}

static int add_spec(struct pt *t, const char *name, int64_t cpu, int64_t mem, int32_t ngpus, const char *model)
{
    struct gs_node_spec s = {.name = name, .cpu_milli = cpu, .mem_bytes = mem, .gpu_model = model, .ngpus = ngpus,
                             .gpu_mem_mib = 16384};
    int idx = gs_cache_add_node_spec(t->cache, &s);
    assert_true(idx >= 0);
    t->nodes[t->n++] = gs_cache_node(t->cache, idx);
    return idx;
}

static int add_obj(struct pt *t, struct gs_node *n)
{
    int idx = gs_cache_add_node(t->cache, n);
    assert_true(idx >= 0);
    t->nodes[t->n++] = gs_cache_node(t->cache, idx);
    return idx;
}

static enum gs_code pre_filter(struct pt *t, const struct gs_pod *p)
{
    gs_cycle_state_reset(&t->cs);
    return t->pl->pre_filter ? t->pl->pre_filter(t->state, &t->cs, p).code : GS_SUCCESS;
}

static void filter(struct pt *t, const struct gs_pod *p)
{
    memset(t->reject, 0, sizeof t->reject);
    t->pl->filter(t->state, &t->cs, p, t->nodes, t->n, t->reject);
}

static void score(struct pt *t, const struct gs_pod *p)
{
    memset(t->scores, 0, sizeof t->scores);
    t->pl->score(t->state, &t->cs, p, t->nodes, t->n, t->scores);
    if (t->pl->normalize_score) t->pl->normalize_score(t->state, &t->cs, p, t->nodes, t->scores, t->n);
}

static const char *reason(struct pt *t, const struct gs_pod *p, uint8_t code)
{
    static char buf[256];
    t->pl->reason(t->state, p, code, buf, sizeof buf);
    return buf;
}

#define GiB (1LL << 30)

/*--- NodeResourcesFit ---*/

static void fit_filter_reasons(void **st)
{
    (void)st;
    struct pt t;
    assert_int_equal(pt_start(&t, &gs_plugin_node_resources_fit, NULL, NULL), 0);
    add_spec(&t, "ok", 4000, 8 * GiB, 0, NULL);
    add_spec(&t, "cpu", 500, 8 * GiB, 0, NULL);
    add_spec(&t, "mem", 4000, GiB, 0, NULL);
    struct gs_node *full = test_node("pods", 4000, 8 * GiB, 1, 0, NULL, 0);
    struct gs_node *ext = test_node("ext", 4000, 8 * GiB, 0, 0, NULL, 0);
    ext->allocatable.v = realloc(ext->allocatable.v, 3 * sizeof *ext->allocatable.v);
    ext->allocatable.v[ext->allocatable.n++] = (struct gs_resource){strdup("example.com/fpga"), 1000};
    add_obj(&t, full);
    add_obj(&t, ext);
    struct gs_pod *filler = test_pod("ns", "filler", 0, 0, 0, 0);
    gs_cache_add_bound(t.cache, filler, &(struct gs_assignment){3, 0, 0, 0});
    struct gs_pod *p = test_pod("ns", "p", 1000, 2 * GiB, 0, 0);
    p->demand.extended.v = calloc(1, sizeof *p->demand.extended.v);
    p->demand.extended.v[0] = (struct gs_resource){strdup("example.com/fpga"), 2000};
    p->demand.extended.n = 1;
    filter(&t, p);
    assert_int_equal(t.reject[0] != 0, 1); /* no fpga on "ok" */
    assert_string_equal(reason(&t, p, t.reject[0]), "Insufficient example.com/fpga");
    assert_string_equal(reason(&t, p, t.reject[1]), "Insufficient cpu");
    assert_string_equal(reason(&t, p, t.reject[2]), "Insufficient memory");
    assert_string_equal(reason(&t, p, t.reject[3]), "Too many pods");
    assert_string_equal(reason(&t, p, t.reject[4]), "Insufficient example.com/fpga");
    p->demand.extended.v[0].milli = 1000;
    filter(&t, p);
    assert_int_equal(t.reject[0] != 0, 1);
    assert_int_equal(t.reject[4], 0);
    /* Shortfalls are resolvable (preemption may help). */
    assert_int_equal(t.reject[1] & GS_REJECT_UNRESOLVABLE, 0);
    pt_end(&t);
    test_node_free(full);
    test_node_free(ext);
    test_pod_free(p);
    test_pod_free(filler);
}

static int64_t kube_least(int64_t req, int64_t cap) { return cap == 0 || req > cap ? 0 : (cap - req) * 100 / cap; }

static void fit_least_allocated_matches_kube(void **st)
{
    (void)st;
    struct pt t;
    assert_int_equal(pt_start(&t, &gs_plugin_node_resources_fit, NULL, NULL), 0);
    uint64_t x = 99;
    for (int i = 0; i < 60; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i);
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t cpu = 1 + (int64_t)((x >> 20) % 200000), mem = 1 + (int64_t)((x >> 7) % (1LL << 42));
        if (i == 0) cpu = 3000, mem = 10 * GiB;
        add_spec(&t, name, cpu, mem, 0, NULL);
        t.nodes[i]->cpu_used = i ? (int64_t)((x >> 30) % (uint64_t)cpu) : 0;
        t.nodes[i]->mem_used = i ? (int64_t)((x >> 3) % (uint64_t)mem) : 3 * GiB;
    }
    struct gs_pod *p = test_pod("ns", "p", 1000, 0, 0, 0);
    score(&t, p);
    /* cpu (3000-1000)*100/3000 = 66, memory 7/10 -> 70, mean 68 */
    assert_int_equal(t.scores[0], 68);
    for (size_t i = 0; i < t.n; i++) {
        const struct gs_node_info *ni = t.nodes[i];
        int64_t want = (kube_least(ni->cpu_used + 1000, ni->cpu_alloc) + kube_least(ni->mem_used, ni->mem_alloc)) / 2;
        assert_int_equal(t.scores[i], want);
    }
    pt_end(&t);
    test_pod_free(p);
}

static void fit_strategies_and_weights(void **st)
{
    (void)st;
    struct pt t;
    const char *most = "{\"scoringStrategy\":{\"type\":\"MostAllocated\",\"resources\":[{\"name\":\"cpu\",\"weight\":3},"
                       "{\"name\":\"memory\",\"weight\":1},{\"name\":\"nvidia.com/gpu\",\"weight\":2}]}}";
    assert_int_equal(pt_start(&t, &gs_plugin_node_resources_fit, most, NULL), 0);
    add_spec(&t, "a", 4000, 8 * GiB, 8, "A100");
    add_spec(&t, "b", 4000, 8 * GiB, 0, NULL);
    t.nodes[0]->cpu_used = 1000;
    t.nodes[0]->mem_used = 4 * GiB;
    t.nodes[0]->gpu_milli_free = 6000;
    t.nodes[1]->cpu_used = 3000;
    struct gs_pod *p = test_pod("ns", "p", 1000, 0, 1, 1000);
    score(&t, p);
    /* a: cpu 2000/4000 -> 50 (x3), memory 4/8 -> 50, gpu 3000/8000 -> 37 (x2): (150+50+74)/6 = 45 */
    assert_int_equal(t.scores[0], 45);
    /* b has no GPUs: that resource is left out: (100*3 + 0)/4 = 75 */
    assert_int_equal(t.scores[1], 75);
    pt_end(&t);

    const char *rtcr = "{\"scoringStrategy\":{\"type\":\"RequestedToCapacityRatio\",\"requestedToCapacityRatio\":"
                       "{\"shape\":[{\"utilization\":0,\"score\":0},{\"utilization\":100,\"score\":10}]}}}";
    assert_int_equal(pt_start(&t, &gs_plugin_node_resources_fit, rtcr, NULL), 0);
    add_spec(&t, "a", 4000, 8 * GiB, 0, NULL);
    add_spec(&t, "b", 4000, 8 * GiB, 0, NULL);
    t.nodes[0]->cpu_used = 1000;
    t.nodes[0]->mem_used = 3 * GiB;
    p->demand.gpu_count = 0;
    score(&t, p);
    /* a: cpu 50% -> 50, memory 37% -> 37: round(87/2) = 44; b: cpu 25 and memory 0 (left out) -> 25 */
    assert_int_equal(t.scores[0], 44);
    assert_int_equal(t.scores[1], 25);
    pt_end(&t);
    test_pod_free(p);
}

static void fit_args_errors_name_the_field(void **st)
{
    (void)st;
    struct {
        const char *args, *path;
    } cases[] = {
        {"{\"scoringStrategy\":{\"type\":\"Fewest\"}}", "args.scoringStrategy.type"},
        {"{\"scoringStrategy\":{\"resources\":[{\"name\":\"cpu\",\"weight\":0}]}}",
         "args.scoringStrategy.resources[0].weight"},
        {"{\"scoringStrategy\":{\"resources\":[{\"weight\":1}]}}", "args.scoringStrategy.resources[0].name"},
        {"{\"scoringStrategy\":{\"type\":\"RequestedToCapacityRatio\"}}",
         "args.scoringStrategy.requestedToCapacityRatio.shape"},
        {"{\"scoringStrategy\":{\"type\":\"RequestedToCapacityRatio\",\"requestedToCapacityRatio\":{\"shape\":["
         "{\"utilization\":50,\"score\":1},{\"utilization\":40,\"score\":2}]}}}",
         "args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization"},
        {"{\"scoringStrategy\":{\"type\":\"RequestedToCapacityRatio\",\"requestedToCapacityRatio\":{\"shape\":["
         "{\"utilization\":50,\"score\":11}]}}}",
         "args.scoringStrategy.requestedToCapacityRatio.shape[0].score"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct pt t;
        struct gs_diags d = {0};
        assert_int_equal(pt_start(&t, &gs_plugin_node_resources_fit, cases[i].args, &d), GS_EINVAL);
        assert_true(d.n >= 1);
        assert_string_equal(d.v[0].path, cases[i].path);
        gs_diags_free(&d);
        gs_cache_free(t.cache);
        gs_cycle_state_free(&t.cs);
    }
}

/*--- GpuShare ---*/

static void gpu_share_filter_reasons(void **st)
{
    (void)st;
    struct pt t;
    pt_start(&t, &gs_plugin_gpu_share, NULL, NULL);
    add_spec(&t, "none", 8000, GiB, 0, NULL);
    add_spec(&t, "two", 8000, GiB, 2, "V100M16");
    add_spec(&t, "busy", 8000, GiB, 2, "V100M16");
    add_spec(&t, "sick", 8000, GiB, 2, "V100M16");
    struct gs_pod *fill = test_pod("ns", "fill", 0, 0, 1, 700), *fill2 = test_pod("ns", "fill2", 0, 0, 1, 700);
    gs_cache_add_bound(t.cache, fill, &(struct gs_assignment){2, 0x1, 700, 0});
    gs_cache_add_bound(t.cache, fill2, &(struct gs_assignment){2, 0x2, 700, 0});
    gs_cache_set_gpu_health(t.cache, 3, 0, false);
    struct gs_pod *p = test_pod("ns", "p", 0, 0, 0, 0);
    assert_int_equal(pre_filter(&t, p), GS_SKIP);
    p->demand.gpu_count = 2;
    p->demand.gpu_milli = 1000;
    assert_int_equal(pre_filter(&t, p), GS_SUCCESS);
    filter(&t, p);
    assert_string_equal(reason(&t, p, t.reject[0]), "Insufficient nvidia.com/gpu");
    assert_int_equal(t.reject[1], 0);
    assert_string_equal(reason(&t, p, t.reject[2]), "Insufficient nvidia.com/gpu");
    assert_string_equal(reason(&t, p, t.reject[3]), "Unhealthy GPU");
    assert_true(t.reject[3] & GS_REJECT_UNRESOLVABLE);
    /* A 300-milli share fits next to the 700 on a busy GPU. */
    p->demand.gpu_count = 1;
    p->demand.gpu_milli = 300;
    filter(&t, p);
    assert_int_equal(t.reject[2], 0);
    assert_int_equal(t.reject[3], 0); /* one healthy GPU is enough */
    p->demand.gpu_milli = 301;
    filter(&t, p);
    assert_string_equal(reason(&t, p, t.reject[2]), "Insufficient nvidia.com/gpu");
    /* Memory: 16384 MiB per GPU. */
    p->demand.gpu_milli = 100;
    p->demand.gpu_mem_mib = 20000;
    filter(&t, p);
    assert_string_equal(reason(&t, p, t.reject[1]), "Insufficient GPU memory");
    pt_end(&t);
    test_pod_free(fill);
    test_pod_free(fill2);
    test_pod_free(p);
}

static void gpu_share_reserve_best_fit(void **st)
{
    (void)st;
    struct pt t;
    pt_start(&t, &gs_plugin_gpu_share, NULL, NULL);
    add_spec(&t, "n", 8000, GiB, 5, "A10");
    /* free milli per GPU: 1000, 300, 600, 200, 300 */
    int32_t used[5] = {0, 700, 400, 800, 700};
    struct gs_pod *fill[5];
    for (int g = 1; g < 5; g++) {
        char name[8];
        snprintf(name, sizeof name, "f%d", g);
        fill[g] = test_pod("ns", name, 0, 0, 1, used[g]);
        gs_cache_add_bound(t.cache, fill[g], &(struct gs_assignment){0, 1ULL << g, used[g], 0});
    }
    struct gs_pod *p = test_pod("ns", "p", 0, 0, 1, 250);
    struct gs_assignment a = {0, 0, 250, 0};
    assert_int_equal(t.pl->reserve(t.state, &t.cs, p, t.nodes[0], &a).code, GS_SUCCESS);
    assert_int_equal(a.gpu_mask, 1ULL << 1); /* 300 free, lowest index among ties */
    assert_int_equal(a.milli, 250);
    /* Already chosen devices are left alone. */
    a.gpu_mask = 1ULL << 0;
    t.pl->reserve(t.state, &t.cs, p, t.nodes[0], &a);
    assert_int_equal(a.gpu_mask, 1ULL << 0);
    /* Two shares of 500: GPUs 2 (600) and 0 (1000). */
    p->demand.gpu_count = 2;
    p->demand.gpu_milli = 500;
    a = (struct gs_assignment){0, 0, 500, 0};
    t.pl->reserve(t.state, &t.cs, p, t.nodes[0], &a);
    assert_int_equal(a.gpu_mask, (1ULL << 2) | (1ULL << 0));
    p->demand.gpu_count = 3;
    a = (struct gs_assignment){0, 0, 500, 0};
    assert_int_equal(t.pl->reserve(t.state, &t.cs, p, t.nodes[0], &a).code, GS_UNSCHEDULABLE);
    pt_end(&t);
    for (int g = 1; g < 5; g++) test_pod_free(fill[g]);
    test_pod_free(p);
}

/*--- GpuModel ---*/

static void gpu_model_mask(void **st)
{
    (void)st;
    struct pt t;
    pt_start(&t, &gs_plugin_gpu_model, NULL, NULL);
    add_spec(&t, "v16", 8000, GiB, 1, "V100M16");
    add_spec(&t, "t4", 8000, GiB, 1, "T4");
    add_spec(&t, "cpu", 8000, GiB, 0, NULL);
    add_spec(&t, "v32", 8000, GiB, 1, "V100M32");
    struct gs_pod *p = test_pod("ns", "p", 0, 0, 1, 1000);
    assert_int_equal(pre_filter(&t, p), GS_SKIP);
    p->demand.gpu_models = calloc(2, sizeof(char *));
    p->demand.gpu_models[0] = strdup("V100M16");
    p->demand.gpu_models[1] = strdup("V100M32");
    p->demand.ngpu_models = 2;
    assert_int_equal(pre_filter(&t, p), GS_SUCCESS);
    filter(&t, p);
    assert_int_equal(t.reject[0], 0);
    assert_int_not_equal(t.reject[1], 0);
    assert_int_not_equal(t.reject[2], 0);
    assert_int_equal(t.reject[3], 0);
    assert_true(t.reject[1] & GS_REJECT_UNRESOLVABLE);
    assert_string_equal(reason(&t, p, t.reject[1]), "GPU model mismatch (want V100M16|V100M32)");
    /* The mask survives a CycleState clone (preemption simulates on a copy). */
    struct gs_cycle_state copy;
    assert_int_equal(gs_cycle_state_clone(&t.cs, &copy), 0);
    memset(t.reject, 0, sizeof t.reject);
    t.pl->filter(t.state, &copy, p, t.nodes, t.n, t.reject);
    assert_int_not_equal(t.reject[1], 0);
    assert_int_equal(t.reject[3], 0);
    gs_cycle_state_free(&copy);
    pt_end(&t);
    test_pod_free(p);
}

/*--- NodeAffinity ---*/

static struct gs_sel_req req(const char *key, enum gs_sel_op op, const char *v)
{
    struct gs_sel_req r = {.key = strdup(key), .op = op};
    if (v) {
        r.values = calloc(1, sizeof(char *));
        r.values[0] = strdup(v);
        r.nvalues = 1;
    }
    return r;
}

static void node_affinity_filter_and_score(void **st)
{
    (void)st;
    struct pt t;
    pt_start(&t, &gs_plugin_node_affinity, NULL, NULL);
    struct gs_node *n[3];
    const char *zones[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i);
        n[i] = test_node(name, 1000, GiB, 0, 0, NULL, 0);
        gs_labels_set(&n[i]->meta.labels, "zone", zones[i]);
        gs_labels_set(&n[i]->meta.labels, "disk", i == 2 ? "hdd" : "ssd");
        add_obj(&t, n[i]);
    }
    struct gs_pod *p = test_pod("ns", "p", 0, 0, 0, 0);
    assert_int_equal(pre_filter(&t, p), GS_SKIP);
    assert_int_equal(t.pl->pre_score(t.state, &t.cs, p, t.nodes, t.n).code, GS_SKIP);
    gs_labels_set(&p->node_selector, "disk", "ssd");
    p->node_affinity.has_required = true;
    p->node_affinity.required = calloc(1, sizeof *p->node_affinity.required);
    p->node_affinity.nrequired = 1;
    p->node_affinity.required[0].match_expressions.reqs = calloc(1, sizeof(struct gs_sel_req));
    p->node_affinity.required[0].match_expressions.reqs[0] = req("zone", GS_SEL_NOTIN, "a");
    p->node_affinity.required[0].match_expressions.n = 1;
    assert_int_equal(pre_filter(&t, p), GS_SUCCESS);
    filter(&t, p);
    assert_int_not_equal(t.reject[0], 0); /* zone a excluded */
    assert_int_equal(t.reject[1], 0);
    assert_int_not_equal(t.reject[2], 0); /* hdd */
    assert_string_equal(reason(&t, p, t.reject[0]), "node(s) didn't match Pod's node affinity/selector");
    p->node_affinity.preferred = calloc(2, sizeof *p->node_affinity.preferred);
    p->node_affinity.npreferred = 2;
    p->node_affinity.preferred[0].weight = 30;
    p->node_affinity.preferred[0].term.match_expressions.reqs = calloc(1, sizeof(struct gs_sel_req));
    p->node_affinity.preferred[0].term.match_expressions.reqs[0] = req("zone", GS_SEL_IN, "b");
    p->node_affinity.preferred[0].term.match_expressions.n = 1;
    p->node_affinity.preferred[1].weight = 10;
    p->node_affinity.preferred[1].term.match_expressions.reqs = calloc(1, sizeof(struct gs_sel_req));
    p->node_affinity.preferred[1].term.match_expressions.reqs[0] = req("disk", GS_SEL_EXISTS, NULL);
    p->node_affinity.preferred[1].term.match_expressions.n = 1;
    assert_int_equal(t.pl->pre_score(t.state, &t.cs, p, t.nodes, t.n).code, GS_SUCCESS);
    score(&t, p);
    /* raw 10, 40, 10 -> normalised to the best: 25, 100, 25 */
    assert_int_equal(t.scores[0], 25);
    assert_int_equal(t.scores[1], 100);
    assert_int_equal(t.scores[2], 25);
    pt_end(&t);
    for (int i = 0; i < 3; i++) test_node_free(n[i]);
    test_pod_free(p);
}

/*--- TaintToleration ---*/

static void add_taint(struct gs_node *n, const char *k, const char *v, enum gs_taint_effect e)
{
    n->taints = realloc(n->taints, (n->ntaints + 1) * sizeof *n->taints);
    n->taints[n->ntaints++] = (struct gs_taint){strdup(k), v ? strdup(v) : NULL, e};
}

static void taint_toleration_filter_and_score(void **st)
{
    (void)st;
    struct pt t;
    pt_start(&t, &gs_plugin_taint_toleration, NULL, NULL);
    struct gs_node *n[4];
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i);
        n[i] = test_node(name, 1000, GiB, 0, 0, NULL, 0);
    }
    struct gs_pod *p = test_pod("ns", "p", 0, 0, 0, 0);
    add_obj(&t, n[0]);
    /* No tainted node in the cache: both passes skipped. */
    assert_int_equal(pre_filter(&t, p), GS_SKIP);
    add_taint(n[1], "dedicated", "gpu", GS_EFFECT_NOSCHEDULE);
    add_taint(n[2], "maintenance", NULL, GS_EFFECT_NOEXECUTE);
    add_taint(n[3], "spot", "true", GS_EFFECT_PREFERNOSCHEDULE);
    add_taint(n[3], "old", "true", GS_EFFECT_PREFERNOSCHEDULE);
    add_taint(n[2], "spot", "true", GS_EFFECT_PREFERNOSCHEDULE);
    for (int i = 1; i < 4; i++) add_obj(&t, n[i]);
    assert_int_equal(pre_filter(&t, p), GS_SUCCESS);
    filter(&t, p);
    assert_int_equal(t.reject[0], 0);
    assert_string_equal(reason(&t, p, t.reject[1]), "node(s) had untolerated taint {dedicated: gpu}");
    assert_string_equal(reason(&t, p, t.reject[2]), "node(s) had untolerated taint {maintenance: }");
    assert_true(t.reject[1] & GS_REJECT_UNRESOLVABLE);
    assert_int_equal(t.reject[3], 0); /* PreferNoSchedule does not filter */
    p->tolerations = calloc(1, sizeof *p->tolerations);
    p->tolerations[0] = (struct gs_toleration){.key = strdup("dedicated"), .op = GS_TOL_EQUAL,
                                               .value = strdup("gpu"), .effect = GS_EFFECT_NOSCHEDULE};
    p->ntolerations = 1;
    filter(&t, p);
    assert_int_equal(t.reject[1], 0);
    assert_int_not_equal(t.reject[2], 0);
    score(&t, p);
    /* untolerated PreferNoSchedule: 0, 0, 1, 2 -> reversed: 100, 100, 50, 0 */
    assert_int_equal(t.scores[0], 100);
    assert_int_equal(t.scores[1], 100);
    assert_int_equal(t.scores[2], 50);
    assert_int_equal(t.scores[3], 0);
    pt_end(&t);
    for (int i = 0; i < 4; i++) test_node_free(n[i]);
    test_pod_free(p);
}

/*--- NodeUnschedulable, PrioritySort, DefaultBinder ---*/

static void node_unschedulable_override(void **st)
{
    (void)st;
    struct pt t;
    pt_start(&t, &gs_plugin_node_unschedulable, NULL, NULL);
    struct gs_node *a = test_node("a", 1000, GiB, 0, 0, NULL, 0), *b = test_node("b", 1000, GiB, 0, 0, NULL, 0);
    b->unschedulable = true;
    add_obj(&t, a);
    int bi = add_obj(&t, b);
    assert_false(t.nodes[1]->schedulable); /* the cache honours spec.unschedulable */
    struct gs_pod *p = test_pod("ns", "p", 0, 0, 0, 0);
    assert_int_equal(pre_filter(&t, p), GS_SKIP);
    gs_cache_set_schedulable(t.cache, bi, true); /* an override the object disagrees with */
    assert_int_equal(gs_cache_cordon_overrides(t.cache), 1);
    assert_int_equal(pre_filter(&t, p), GS_SUCCESS);
    filter(&t, p);
    assert_int_equal(t.reject[0], 0);
    assert_string_equal(reason(&t, p, t.reject[1]), "node(s) were unschedulable");
    p->tolerations = calloc(1, sizeof *p->tolerations);
    p->tolerations[0] = (struct gs_toleration){.key = strdup("node.kubernetes.io/unschedulable"), .op = GS_TOL_EXISTS};
    p->ntolerations = 1;
    assert_int_equal(pre_filter(&t, p), GS_SKIP);
    pt_end(&t);
    test_node_free(a);
    test_node_free(b);
    test_pod_free(p);
}

static void priority_sort_and_binder(void **st)
{
    (void)st;
    struct gs_pod *hi = test_pod("ns", "hi", 0, 0, 0, 0), *lo = test_pod("ns", "lo", 0, 0, 0, 0);
    hi->priority = 5;
    struct gs_queued_pod a = {.pod = lo, .timestamp_ns = 1, .seq = 0}, b = {.pod = hi, .timestamp_ns = 2, .seq = 1};
    assert_true(gs_plugin_priority_sort.less(NULL, &b, &a));
    assert_false(gs_plugin_priority_sort.less(NULL, &a, &b));
    hi->priority = 0;
    assert_true(gs_plugin_priority_sort.less(NULL, &a, &b)); /* earlier timestamp */
    b.timestamp_ns = 1;
    assert_true(gs_plugin_priority_sort.less(NULL, &a, &b)); /* then insertion order */
    assert_false(gs_plugin_priority_sort.less(NULL, &b, &a));
    assert_int_equal(gs_plugin_default_binder.bind(NULL, NULL, hi, NULL, NULL).code, GS_SUCCESS);
    test_pod_free(hi);
    test_pod_free(lo);
}

static void registry_lists_every_builtin(void **st)
{
    (void)st;
    const char *names[] = {"PrioritySort", "NodeUnschedulable", "NodeResourcesFit", "GpuShare", "GpuModel",
                           "NodeAffinity", "TaintToleration", "DefaultBinder"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const struct gs_plugin *p = gs_plugin_lookup(names[i]);
        assert_non_null(p);
        assert_string_equal(p->name, names[i]);
        bool listed = false;
        for (const struct gs_plugin *const *q = gs_plugin_all(); *q; q++) listed |= *q == p;
        assert_true(listed);
        if (p->filter) assert_non_null(p->reason);
    }
    assert_null(gs_plugin_lookup("NoSuchPlugin"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fit_filter_reasons),
        cmocka_unit_test(fit_least_allocated_matches_kube),
        cmocka_unit_test(fit_strategies_and_weights),
        cmocka_unit_test(fit_args_errors_name_the_field),
        cmocka_unit_test(gpu_share_filter_reasons),
        cmocka_unit_test(gpu_share_reserve_best_fit),
        cmocka_unit_test(gpu_model_mask),
        cmocka_unit_test(node_affinity_filter_and_score),
        cmocka_unit_test(taint_toleration_filter_and_score),
        cmocka_unit_test(node_unschedulable_override),
        cmocka_unit_test(priority_sort_and_binder),
        cmocka_unit_test(registry_lists_every_builtin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
