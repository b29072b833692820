/*
 * test_sched_fastpath.c - the scheduling cycle's fast paths change no
 * decision.
 *
 * The default profile takes shortcuts: PreFilter/PreScore Skip when a plugin
 * cannot matter (no tainted node, no cordon override, a pod without selector
 * or preferred terms), index forms of Filter/Score reading the cache's hot
 * records, NodeResourcesFit's "fits the least free node" answer, the score's
 * multiply-for-divide, lazy compaction and tallies, the fused argmax. A
 * reference profile runs the same plugins through their pointer forms only,
 * with every optimisation-only Skip turned into Success. Both schedule the
 * same pods on identical clusters while taints, cordons, overrides, GPU
 * health and pod departures change mid-run; every placement, device mask,
 * feasible count and diagnosis line must match.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plugins/recorder.h"
#include "sched/frag.h"
#include "sched/framework.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GiB (1LL << 30)
#define NNODES 48
#define NPODS 1600

/*--- Reference plugins: pointer forms, no optimisation-only Skip ---*/

enum { NU, NRF, GSH, GM, NA, TT, NREF };
static const char *const ref_names[NREF] = {"NodeUnschedulable", "NodeResourcesFit", "GpuShare",
                                            "GpuModel",          "NodeAffinity",     "TaintToleration"};
static struct gs_plugin ref[NREF];

static bool tolerates_cordon(const struct gs_pod *pod)
{
    struct gs_taint t = {.key = "node.kubernetes.io/unschedulable", .effect = GS_EFFECT_NOSCHEDULE};
    for (size_t i = 0; i < pod->ntolerations; i++)
        if (gs_toleration_tolerates(&pod->tolerations[i], &t)) return true;
    return false;
}

/* A Skip that only saves work becomes Success; a Skip that decides (GpuShare
 * for a pod without GPUs, GpuModel without a model list, NodeUnschedulable
 * for a pod tolerating the cordon) stays. */
static struct gs_status unskip(int which, struct gs_status s, const struct gs_pod *pod)
{
    if (s.code != GS_SKIP) return s;
    if (which == NU && tolerates_cordon(pod)) return s;
    if (which == GSH || which == GM) return s;
    return (struct gs_status){0};
}

#define WRAP(W)                                                                                            \
    static struct gs_status pf_##W(void *st, struct gs_cycle_state *cs, const struct gs_pod *p)            \
    {                                                                                                      \
        return unskip(W, gs_plugin_lookup(ref_names[W])->pre_filter(st, cs, p), p);                        \
    }                                                                                                      \
    static struct gs_status ps_##W(void *st, struct gs_cycle_state *cs, const struct gs_pod *p,            \
                                   struct gs_node_info *const *nodes, size_t n)                            \
    {                                                                                                      \
        return unskip(W, gs_plugin_lookup(ref_names[W])->pre_score(st, cs, p, nodes, n), p);               \
    }
WRAP(NU)
WRAP(NRF)
WRAP(GSH)
WRAP(GM)
WRAP(NA)
WRAP(TT)

static struct gs_status (*const pfs[NREF])(void *, struct gs_cycle_state *, const struct gs_pod *) = {
    pf_NU, pf_NRF, pf_GSH, pf_GM, pf_NA, pf_TT};
static struct gs_status (*const pss[NREF])(void *, struct gs_cycle_state *, const struct gs_pod *,
                                           struct gs_node_info *const *, size_t) = {ps_NU, ps_NRF,
                                                                                    ps_GSH, ps_GM, ps_NA, ps_TT};

static void make_reference(struct gs_profile *p)
{
    for (int i = 0; i < NREF; i++) {
        const struct gs_plugin *orig = gs_plugin_lookup(ref_names[i]);
        assert_non_null(orig);
        ref[i] = *orig;
        ref[i].filter_idx = NULL;
        ref[i].score_idx = NULL;
        ref[i].pre_score_idx = NULL;
        ref[i].by_class = NULL; /* every node, one by one */
        if (orig->pre_filter) ref[i].pre_filter = pfs[i];
        if (orig->pre_score) ref[i].pre_score = pss[i];
    }
    for (int pt = 0; pt < GS_PT_COUNT; pt++)
        for (int k = 0; k < p->npoints[pt]; k++)
            for (int i = 0; i < NREF; i++)
                if (p->points[pt][k].plugin == gs_plugin_lookup(ref_names[i])) p->points[pt][k].plugin = &ref[i];
}

/*--- Cluster and workload ---*/

struct side {
    struct gs_cache *cache;
    struct gs_framework *fw;
};

struct world {
    struct gs_clock clock;
    struct gs_sched_config fast_cfg, ref_cfg;
    struct side fast, slow;
    struct gs_node *nodes[NNODES];
    struct gs_pod *pods[NPODS];
};

static void add_taint(struct gs_node *n, const char *key, const char *value, enum gs_taint_effect effect)
{
    n->taints = realloc(n->taints, (n->ntaints + 1) * sizeof *n->taints);
    n->taints[n->ntaints++] = (struct gs_taint){strdup(key), value ? strdup(value) : NULL, effect};
}

static void clear_taints(struct gs_node *n)
{
    for (size_t i = 0; i < n->ntaints; i++) gs_taint_free(&n->taints[i]);
    free(n->taints);
    n->taints = NULL;
    n->ntaints = 0;
}

static struct gs_node *make_node(int i)
{
    char name[16];
    snprintf(name, sizeof name, "node-%02d", i);
    int32_t gpus = i % 6 == 5 ? 0 : i % 3 == 0 ? 4 : 8;
    int64_t cpu = (i % 4 == 1 ? 12000 : 64000) + 1000 * (i % 5);
    struct gs_node *n = test_node(name, cpu, (i % 7 == 2 ? 48 : 512) * GiB + i * GiB, i % 9 == 4 ? 6 : 110, gpus,
                                  i % 2 ? "A100" : "V100M32", i % 2 ? 40960 : 32768);
    gs_labels_set(&n->meta.labels, "zone", i % 3 == 1 ? "b" : "a");
    if (i % 8 == 3) gs_labels_set(&n->meta.labels, "tier", "gold");
    return n;
}

static void add_toleration(struct gs_pod *p, const char *key, enum gs_tol_op op, const char *value,
                           enum gs_taint_effect effect)
{
    p->tolerations = realloc(p->tolerations, (p->ntolerations + 1) * sizeof *p->tolerations);
    p->tolerations[p->ntolerations++] =
        (struct gs_toleration){strdup(key), op, value ? strdup(value) : NULL, effect, false, 0};
}

static void prefer_gold(struct gs_pod *p, int32_t weight)
{
    struct gs_node_affinity *a = &p->node_affinity;
    a->preferred = calloc(1, sizeof *a->preferred);
    a->npreferred = 1;
    a->preferred[0].weight = weight;
    struct gs_selector *sel = &a->preferred[0].term.match_expressions;
    sel->reqs = calloc(1, sizeof *sel->reqs);
    sel->n = 1;
    sel->reqs[0].key = strdup("tier");
    sel->reqs[0].op = GS_SEL_IN;
    sel->reqs[0].values = calloc(1, sizeof(char *));
    sel->reqs[0].values[0] = strdup("gold");
    sel->reqs[0].nvalues = 1;
}

static struct gs_pod *make_pod(int i, uint64_t *rng)
{
    char name[16];
    snprintf(name, sizeof name, "pod-%04d", i);
    uint64_t r = gs_rand_below(rng, 100);
    int32_t count = 1, milli = 1000;
    if (r < 40) milli = (int32_t)(100 * (1 + gs_rand_below(rng, 9)));
    else if (r < 55) count = 2;
    else if (r < 62) count = 4;
    else if (r < 66) count = 8;
    else if (r < 76) count = 0, milli = 0;
    int64_t cpu = 1000 * (int64_t)(1 + gs_rand_below(rng, 12));
    struct gs_pod *p = test_pod("ns", name, cpu, (int64_t)(1 + gs_rand_below(rng, 40)) * GiB, count, milli);
    if (gs_rand_below(rng, 12) == 0) p->demand.gpu_mem_mib = 2048 * (int64_t)(1 + gs_rand_below(rng, 12));
    if (count && gs_rand_below(rng, 8) == 0) {
        p->demand.gpu_models = calloc(1, sizeof(char *));
        p->demand.gpu_models[0] = strdup("A100");
        p->demand.ngpu_models = 1;
    }
    if (gs_rand_below(rng, 10) == 0) gs_labels_set(&p->node_selector, "zone", "b");
    if (gs_rand_below(rng, 7) == 0) prefer_gold(p, 1 + (int32_t)gs_rand_below(rng, 50));
    if (gs_rand_below(rng, 5) == 0) add_toleration(p, "dedicated", GS_TOL_EQUAL, "infer", GS_EFFECT_NOSCHEDULE);
    if (gs_rand_below(rng, 6) == 0) add_toleration(p, "spot", GS_TOL_EXISTS, NULL, GS_EFFECT_PREFERNOSCHEDULE);
    if (gs_rand_below(rng, 9) == 0)
        add_toleration(p, "node.kubernetes.io/unschedulable", GS_TOL_EXISTS, NULL, GS_EFFECT_NOSCHEDULE);
    return p;
}

static void side_start(struct world *w, struct side *s, const struct gs_profile *prof)
{
    s->cache = gs_cache_new(&w->clock);
    for (int i = 0; i < NNODES; i++) assert_int_equal(gs_cache_add_node(s->cache, w->nodes[i]), i);
    struct gs_handle h = {.clock = &w->clock, .cache = s->cache, .seed = 11};
    struct gs_diags d = {0};
    assert_int_equal(gs_framework_new(prof, &h, &s->fw, &d), 0);
    gs_diags_free(&d);
}

/* Both sides see the same change. */
static void both_update(struct world *w, int i)
{
    assert_int_equal(gs_cache_update_node(w->fast.cache, w->nodes[i]), 0);
    assert_int_equal(gs_cache_update_node(w->slow.cache, w->nodes[i]), 0);
}

static void both_schedulable(struct world *w, int i, bool on)
{
    assert_int_equal(gs_cache_set_schedulable(w->fast.cache, i, on), 0);
    assert_int_equal(gs_cache_set_schedulable(w->slow.cache, i, on), 0);
}

static void both_health(struct world *w, int i, int g, bool healthy)
{
    if (gs_cache_node(w->fast.cache, i)->ngpus <= g) return;
    assert_int_equal(gs_cache_set_gpu_health(w->fast.cache, i, g, healthy), 0);
    assert_int_equal(gs_cache_set_gpu_health(w->slow.cache, i, g, healthy), 0);
}

static void both_remove(struct world *w, const struct gs_pod *p)
{
    char key[64];
    snprintf(key, sizeof key, "%s/%s", p->meta.namespace_, p->meta.name);
    int a = gs_cache_remove_pod(w->fast.cache, key), b = gs_cache_remove_pod(w->slow.cache, key);
    assert_int_equal(a, b);
}

/* Cluster events at fixed steps: taints, cordons (object and flag), an
 * override (object cordoned, flag schedulable), untaints, GPU health. */
static void events(struct world *w, int step)
{
    if (step == 250)
        for (int i = 0; i < NNODES; i += 5) {
            add_taint(w->nodes[i], "dedicated", "infer", GS_EFFECT_NOSCHEDULE);
            both_update(w, i);
        }
    if (step == 400)
        for (int i = 2; i < NNODES; i += 7) {
            add_taint(w->nodes[i], "spot", "true", GS_EFFECT_PREFERNOSCHEDULE);
            both_update(w, i);
        }
    if (step == 550)
        for (int i = 1; i < NNODES; i += 6) {
            w->nodes[i]->unschedulable = true;
            both_update(w, i);
        }
    if (step == 650) {
        both_schedulable(w, 7, true); /* override: the object still says cordoned */
        both_schedulable(w, 13, true);
        both_schedulable(w, 9, false);
    }
    if (step == 800)
        for (int i = 0; i < NNODES; i += 10) {
            clear_taints(w->nodes[i]);
            both_update(w, i);
        }
    if (step == 950)
        for (int i = 3; i < NNODES; i += 4) both_health(w, i, i % 4, false);
    if (step == 1100) {
        for (int i = 1; i < NNODES; i += 6) {
            w->nodes[i]->unschedulable = false;
            both_update(w, i);
        }
        both_schedulable(w, 9, true);
        for (int i = 3; i < NNODES; i += 8) both_health(w, i, i % 4, true);
    }
    if (step == 1300) { /* a single tainted node: the cluster-wide skip must not hide it */
        for (int i = 0; i < NNODES; i++) {
            clear_taints(w->nodes[i]);
            if (i == 12) add_taint(w->nodes[i], "dedicated", "train", GS_EFFECT_NOSCHEDULE);
            both_update(w, i);
        }
    }
    if (step == 1450) {
        clear_taints(w->nodes[12]);
        add_taint(w->nodes[12], "spot", "true", GS_EFFECT_PREFERNOSCHEDULE);
        both_update(w, 12);
    }
}

struct tally {
    int ok, fail, tainted, cordoned;
};

static void compare_one(struct world *w, int i, struct tally *t)
{
    struct gs_schedule_result a, b;
    assert_int_equal(gs_framework_schedule(w->fast.fw, w->pods[i], 0, &a), 0);
    assert_int_equal(gs_framework_schedule(w->slow.fw, w->pods[i], 0, &b), 0);
    assert_int_equal(a.code, b.code);
    assert_int_equal(a.a.node, b.a.node);
    assert_int_equal(a.a.gpu_mask, b.a.gpu_mask);
    assert_int_equal(a.feasible_nodes, b.feasible_nodes);
    assert_string_equal(a.status.reason, b.status.reason);
    if (a.code == GS_SUCCESS) {
        assert_int_equal(gs_framework_bind(w->fast.fw, w->pods[i]).code, GS_SUCCESS);
        assert_int_equal(gs_framework_bind(w->slow.fw, w->pods[i]).code, GS_SUCCESS);
        t->ok++;
    } else {
        t->fail++;
        t->tainted += strstr(a.status.reason, "untolerated taint") != NULL;
        t->cordoned += strstr(a.status.reason, "unschedulable") != NULL;
    }
    gs_schedule_result_free(&a);
    gs_schedule_result_free(&b);
}

static void fast_paths_match_reference(void **st)
{
    (void)st;
    static struct world w;
    memset(&w, 0, sizeof w);
    gs_clock_init_sim(&w.clock, 0);
    for (int i = 0; i < NNODES; i++) w.nodes[i] = make_node(i);
    uint64_t rng = 5;
    for (int i = 0; i < NPODS; i++) w.pods[i] = make_pod(i, &rng);
    assert_int_equal(gs_sched_config_default(&w.fast_cfg), 0);
    assert_int_equal(gs_sched_config_default(&w.ref_cfg), 0);
    make_reference(&w.ref_cfg.profiles[0]);
    side_start(&w, &w.fast, &w.fast_cfg.profiles[0]);
    side_start(&w, &w.slow, &w.ref_cfg.profiles[0]);

    struct tally t = {0};
    for (int i = 0; i < NPODS; i++) {
        events(&w, i);
        if (i >= 300) both_remove(&w, w.pods[i - 300]);
        compare_one(&w, i, &t);
        if (i % 200 == 0) {
            char why[256];
            assert_int_equal(gs_cache_check(w.fast.cache, why, sizeof why), 0);
        }
    }
    /* The run must have met what the fast paths skip or shortcut. */
    assert_true(t.ok > NPODS / 2);
    assert_true(t.fail > 20);
    assert_true(t.tainted > 0);
    assert_true(t.cordoned > 0);

    gs_framework_free(w.fast.fw);
    gs_framework_free(w.slow.fw);
    gs_cache_free(w.fast.cache);
    gs_cache_free(w.slow.cache);
    gs_sched_config_free(&w.fast_cfg);
    gs_sched_config_free(&w.ref_cfg);
    for (int i = 0; i < NNODES; i++) test_node_free(w.nodes[i]);
    for (int i = 0; i < NPODS; i++) test_pod_free(w.pods[i]);
}

/*--- The multiply-for-divide percentage ---*/

static void check_pct(struct gs_cache *c, int64_t cap, int64_t used)
{
    struct gs_node_spec s = {.name = "p", .cpu_milli = cap, .mem_bytes = cap};
    int idx = gs_cache_add_node_spec(c, &s);
    assert_true(idx >= 0);
    const struct gs_node_hot *h = &gs_cache_hot(c)[idx];
    int64_t xs[] = {0, 1, cap - used, cap / 3, cap / 100, cap - 1, cap, (1LL << 46) - 1, used};
    for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) {
        int64_t x = xs[k];
        if (x < 0 || x >= (1LL << 46) || cap <= 128) continue;
        __extension__ unsigned __int128 want = (unsigned __int128)x * 100 / (unsigned __int128)cap;
        assert_int_equal(gs_pct((uint64_t)x, h->cpu_pct, h->cpu_pct_shift), (uint64_t)want);
        /* Just below and at each multiple of cap / 100: where a wrong estimate would show. */
        int64_t step = x * 100 / cap;
        int64_t edge = (step * cap + 99) / 100;
        for (int64_t y = edge - 1; y <= edge + 1; y++)
            if (y >= 0 && y < (1LL << 46))
                assert_int_equal(gs_pct((uint64_t)y, h->cpu_pct, h->cpu_pct_shift),
                                 (uint64_t)((unsigned __int128)y * 100 / (unsigned __int128)cap));
    }
    if (cap <= 128) assert_int_equal(h->cpu_pct, 0);
    assert_int_equal(gs_cache_remove_node(c, "p"), 0);
}

static void pct_is_exact(void **st)
{
    (void)st;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    int64_t caps[] = {1, 100, 128, 129, 1000, 3000, 128000, 1LL << 20, (1LL << 20) + 1, 999983,
                      1LL << 37, 549755813888LL + 12345, 1LL << 46, (1LL << 52) + 7, INT64_MAX / 3};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) check_pct(c, caps[i], caps[i] / 7);
    uint64_t x = 77;
    for (int i = 0; i < 3000; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t cap = 129 + (int64_t)((x >> 11) % (1ULL << (8 + i % 50)));
        check_pct(c, cap, (int64_t)((x >> 3) % (uint64_t)cap));
    }
    gs_cache_free(c);
}

/* The min-tree follows placements, removals and node churn. */
static void min_free_tracks_the_cluster(void **st)
{
    (void)st;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    int64_t cpu, mem;
    int32_t pods;
    gs_cache_min_free(c, &cpu, &mem, &pods);
    assert_int_equal(cpu, INT64_MAX);
    struct gs_node *n[70];
    for (int i = 0; i < 70; i++) {
        char name[16];
        snprintf(name, sizeof name, "m%d", i);
        n[i] = test_node(name, 10000 + 100 * i, 64 * GiB, i == 40 ? 0 : 20, 0, NULL, 0);
        assert_true(gs_cache_add_node(c, n[i]) >= 0);
    }
    gs_cache_min_free(c, &cpu, &mem, &pods);
    assert_int_equal(cpu, 10000);
    assert_int_equal(mem, 64 * GiB);
    assert_int_equal(pods, 20);
    struct gs_pod *p = test_pod("ns", "big", 9000, GiB, 0, 0);
    assert_int_equal(gs_cache_assume(c, p, &(struct gs_assignment){55, 0, 0, 0}, 0), 0);
    gs_cache_min_free(c, &cpu, &mem, &pods);
    assert_int_equal(cpu, 10000 + 5500 - 9000);
    assert_int_equal(mem, 63 * GiB);
    assert_int_equal(pods, 19);
    assert_int_equal(gs_cache_remove_node(c, "m55"), 0); /* its pod goes with it */
    gs_cache_min_free(c, &cpu, &mem, &pods);
    assert_int_equal(cpu, 10000);
    assert_int_equal(pods, 20);
    char why[256];
    assert_int_equal(gs_cache_check(c, why, sizeof why), 0);
    gs_cache_free(c);
    for (int i = 0; i < 70; i++) test_node_free(n[i]);
    test_pod_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fast_paths_match_reference),
        cmocka_unit_test(pct_is_exact),
        cmocka_unit_test(min_free_tracks_the_cluster),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
