/*
 * test_nodeclass.c - scheduling by node class gives exactly the decisions of
 * the full scan.
 *
 * Two identical caches and frameworks take the same random pod stream, one
 * choosing by class whenever the plugins allow and one with classes off (every node
 * filtered and scored). Clusters mix a few node shapes (so classes hold many
 * nodes and ties between classes are common), labels including a per-node
 * kubernetes.io/hostname, taints, cordons, pods bound before the run, GPU
 * health changes, node removal and re-adds, and pod departures. Every
 * decision must match: code, node, GPU mask, milli, feasible count and the
 * diagnosis line. The runs must also have decided most pods by class, or the
 * comparison proves nothing; and the class index must match a recomputation
 * from the cache along the way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plugins/recorder.h"
#include "sched/frag.h" /* gs_rand_below */
#include "sched/framework.h"
#include "sched/nodeclass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GiB (1LL << 30)
#define NNODES 160
#define NPODS 2400

struct side {
    struct gs_cache *cache;
    struct gs_framework *fw;
    struct gs_sched_config cfg;
};

struct world {
    struct gs_clock clock;
    struct side on, off;
    struct gs_node *nodes[NNODES];
    struct gs_pod *pods[NPODS];
    struct gs_pod *pre[NNODES];
    uint64_t rng;
};

/* Four shapes, a zone label, a per-node hostname label; some taints. */
static struct gs_node *make_node(int i, uint64_t *rng)
{
    char name[32];
    snprintf(name, sizeof name, "node-%03d", i);
    int shape = (int)gs_rand_below(rng, 4);
    static const int32_t gpus[] = {8, 8, 4, 0};
    static const int64_t cpu[] = {64000, 96000, 32000, 16000};
    struct gs_node *n = test_node(name, cpu[shape], (shape == 2 ? 256 : 512) * GiB, shape == 3 ? 20 : 110,
                                  gpus[shape], shape == 1 ? "V100M32" : "A100", shape == 1 ? 32768 : 40960);
    gs_labels_set(&n->meta.labels, "zone", gs_rand_below(rng, 3) ? "a" : "b");
    gs_labels_set(&n->meta.labels, GS_CLASS_IGNORED_LABEL, name);
    if (gs_rand_below(rng, 10) == 0) {
        n->taints = calloc(1, sizeof *n->taints);
        n->taints[0] = (struct gs_taint){strdup("dedicated"), strdup("infer"), GS_EFFECT_NOSCHEDULE};
        n->ntaints = 1;
    } else if (gs_rand_below(rng, 10) == 0) {
        n->taints = calloc(1, sizeof *n->taints);
        n->taints[0] = (struct gs_taint){strdup("spot"), strdup("true"), GS_EFFECT_PREFERNOSCHEDULE};
        n->ntaints = 1;
    }
    return n;
}

static void select_label(struct gs_pod *p, const char *key, const char *value, bool required, int32_t weight)
{
    struct gs_node_affinity *a = &p->node_affinity;
    struct gs_node_selector_term *t;
    if (required) {
        a->has_required = true;
        a->required = calloc(1, sizeof *a->required);
        a->nrequired = 1;
        t = &a->required[0];
    } else {
        a->preferred = calloc(1, sizeof *a->preferred);
        a->npreferred = 1;
        a->preferred[0].weight = weight;
        t = &a->preferred[0].term;
    }
    struct gs_selector *sel = &t->match_expressions;
    sel->reqs = calloc(1, sizeof *sel->reqs);
    sel->n = 1;
    sel->reqs[0].key = strdup(key);
    sel->reqs[0].op = GS_SEL_IN;
    sel->reqs[0].values = calloc(1, sizeof(char *));
    sel->reqs[0].values[0] = strdup(value);
    sel->reqs[0].nvalues = 1;
}

static struct gs_pod *make_pod(const char *prefix, int i, uint64_t *rng)
{
    char name[32];
    snprintf(name, sizeof name, "%s-%04d", prefix, i);
    uint64_t r = gs_rand_below(rng, 100);
    int32_t count = 1, milli = 1000;
    if (r < 45) milli = (int32_t)(100 * (1 + gs_rand_below(rng, 9)));
    else if (r < 60) count = 2;
    else if (r < 66) count = 4;
    else if (r < 70) count = 8;
    else if (r < 80) count = 0, milli = 0;
    int64_t cpu = 1000 * (int64_t)(1 + gs_rand_below(rng, 8));
    struct gs_pod *p = test_pod("ns", name, cpu, (int64_t)(1 + gs_rand_below(rng, 32)) * GiB, count, milli);
    if (count && gs_rand_below(rng, 10) == 0) p->demand.gpu_mem_mib = 4096 * (int64_t)(1 + gs_rand_below(rng, 8));
    if (count && gs_rand_below(rng, 10) == 0) {
        p->demand.gpu_models = calloc(1, sizeof(char *));
        p->demand.gpu_models[0] = strdup("V100M32");
        p->demand.ngpu_models = 1;
    }
    uint64_t k = gs_rand_below(rng, 20);
    if (k == 0) gs_labels_set(&p->node_selector, "zone", "b");
    else if (k == 1) select_label(p, "zone", "a", false, 1 + (int32_t)gs_rand_below(rng, 90));
    else if (k == 2) { /* by name: this pod must run per node */
        char host[32];
        snprintf(host, sizeof host, "node-%03d", (int)gs_rand_below(rng, NNODES));
        select_label(p, GS_CLASS_IGNORED_LABEL, host, gs_rand_below(rng, 2) == 0, 50);
    }
    if (gs_rand_below(rng, 4) == 0) {
        p->tolerations = calloc(1, sizeof *p->tolerations);
        p->tolerations[0] = (struct gs_toleration){strdup("dedicated"), GS_TOL_EQUAL, strdup("infer"),
                                                   GS_EFFECT_NOSCHEDULE, false, 0};
        p->ntolerations = 1;
    }
    return p;
}

static void side_start(struct world *w, struct side *s, const char *policy, enum gs_node_classes classes)
{
    s->cache = gs_cache_new(&w->clock);
    for (int i = 0; i < NNODES; i++) assert_int_equal(gs_cache_add_node(s->cache, w->nodes[i]), i);
    /* Pods bound before the run, on every third node. */
    for (int i = 0; i < NNODES; i += 3) {
        const struct gs_node_info *ni = gs_cache_node(s->cache, i);
        struct gs_assignment a = {i, ni->ngpus ? 1ULL << (i % ni->ngpus) : 0, ni->ngpus ? 500 : 0, 0};
        struct gs_demand *d = &w->pre[i]->demand; /* one share of one GPU, or none */
        d->gpu_count = ni->ngpus ? 1 : 0, d->gpu_milli = ni->ngpus ? 500 : 0, d->gpu_mem_mib = 0;
        d->cpu_milli = 1000;
        assert_int_equal(gs_cache_add_bound(s->cache, w->pre[i], &a), 0);
    }
    assert_int_equal(gs_sched_config_default(&s->cfg), 0);
    struct gs_profile *pr = &s->cfg.profiles[0];
    if (policy) { /* the policy replaces the score plugins, as `gpusched bench --profile` does */
        const struct gs_plugin *pl = gs_plugin_lookup(policy);
        assert_non_null(pl);
        pr->points[GS_PT_SCORE][0] = (struct gs_profile_plugin){pl, 1000};
        pr->npoints[GS_PT_SCORE] = 1;
        pr->npoints[GS_PT_PRE_SCORE] = 0;
        if (pl->pre_score) pr->points[GS_PT_PRE_SCORE][pr->npoints[GS_PT_PRE_SCORE]++] = (struct gs_profile_plugin){pl, 1};
        if (pl->reserve) {
            memmove(&pr->points[GS_PT_RESERVE][1], &pr->points[GS_PT_RESERVE][0],
                    (size_t)pr->npoints[GS_PT_RESERVE] * sizeof pr->points[GS_PT_RESERVE][0]);
            pr->points[GS_PT_RESERVE][0] = (struct gs_profile_plugin){pl, 1};
            pr->npoints[GS_PT_RESERVE]++;
        }
    }
    struct gs_handle h = {.clock = &w->clock, .cache = s->cache, .seed = 7};
    struct gs_diags d = {0};
    assert_int_equal(gs_framework_new(pr, &h, &s->fw, &d), 0);
    gs_diags_free(&d);
    gs_framework_set_node_classes(s->fw, classes);
}

static void side_stop(struct side *s)
{
    gs_framework_free(s->fw);
    gs_cache_free(s->cache);
    gs_sched_config_free(&s->cfg);
}

static void both_remove_pod(struct world *w, const struct gs_pod *p)
{
    char key[64];
    snprintf(key, sizeof key, "%s/%s", p->meta.namespace_, p->meta.name);
    assert_int_equal(gs_cache_remove_pod(w->on.cache, key), gs_cache_remove_pod(w->off.cache, key));
}

/* Cluster changes at fixed steps, the same on both sides. */
static void events(struct world *w, int step)
{
    struct side *s[2] = {&w->on, &w->off};
    for (int k = 0; k < 2; k++) {
        struct gs_cache *c = s[k]->cache;
        if (step == 300)
            for (int i = 5; i < NNODES; i += 11) assert_int_equal(gs_cache_set_schedulable(c, i, false), 0);
        if (step == 700)
            for (int i = 2; i < NNODES; i += 9)
                if (gs_cache_node(c, i)->ngpus) assert_int_equal(gs_cache_set_gpu_health(c, i, 1, false), 0);
        if (step == 900)
            for (int i = 4; i < NNODES; i += 13) assert_int_equal(gs_cache_remove_node(c, w->nodes[i]->meta.name), 0);
        if (step == 1200) {
            for (int i = 4; i < NNODES; i += 13) assert_true(gs_cache_add_node(c, w->nodes[i]) >= 0);
            for (int i = 5; i < NNODES; i += 11) assert_int_equal(gs_cache_set_schedulable(c, i, true), 0);
        }
        if (step == 1500)
            for (int i = 2; i < NNODES; i += 9)
                if (gs_cache_node(c, i)->ngpus) assert_int_equal(gs_cache_set_gpu_health(c, i, 1, true), 0);
    }
    if (step == 1800)
        for (int i = 7; i < NNODES; i += 17) {
            free(w->nodes[i]->taints ? w->nodes[i]->taints[0].key : NULL);
            if (w->nodes[i]->taints) free(w->nodes[i]->taints[0].value), free(w->nodes[i]->taints);
            w->nodes[i]->taints = NULL;
            w->nodes[i]->ntaints = 0;
            w->nodes[i]->unschedulable = i % 2;
            assert_int_equal(gs_cache_update_node(w->on.cache, w->nodes[i]), 0);
            assert_int_equal(gs_cache_update_node(w->off.cache, w->nodes[i]), 0);
        }
}

struct counts {
    int ok, fail;
};

static void compare_one(struct world *w, int i, struct counts *t)
{
    struct gs_schedule_result a, b;
    assert_int_equal(gs_framework_schedule(w->on.fw, w->pods[i], 0, &a), 0);
    assert_int_equal(gs_framework_schedule(w->off.fw, w->pods[i], 0, &b), 0);
    if (a.a.node != b.a.node || a.code != b.code)
        fprintf(stderr, "pod %s: by class %d on node %d, per node %d on node %d (%s)\n", w->pods[i]->meta.name,
                a.code, a.a.node, b.code, b.a.node, b.status.reason);
    assert_int_equal(a.code, b.code);
    assert_int_equal(a.a.node, b.a.node);
    assert_int_equal(a.a.gpu_mask, b.a.gpu_mask);
    assert_int_equal(a.a.milli, b.a.milli);
    assert_int_equal(a.feasible_nodes, b.feasible_nodes);
    assert_string_equal(a.status.reason, b.status.reason);
    if (a.code == GS_SUCCESS) {
        assert_int_equal(gs_framework_bind(w->on.fw, w->pods[i]).code, GS_SUCCESS);
        assert_int_equal(gs_framework_bind(w->off.fw, w->pods[i]).code, GS_SUCCESS);
        t->ok++;
    } else {
        t->fail++;
    }
    gs_schedule_result_free(&a);
    gs_schedule_result_free(&b);
}

static void run_policy(const char *policy, uint64_t seed)
{
    static struct world w;
    memset(&w, 0, sizeof w);
    gs_clock_init_sim(&w.clock, 0);
    w.rng = seed;
    for (int i = 0; i < NNODES; i++) w.nodes[i] = make_node(i, &w.rng);
    for (int i = 0; i < NNODES; i++) w.pre[i] = make_pod("pre", i, &w.rng);
    for (int i = 0; i < NPODS; i++) w.pods[i] = make_pod("pod", i, &w.rng);
    side_start(&w, &w.on, policy, GS_CLASSES_ALWAYS);
    side_start(&w, &w.off, policy, GS_CLASSES_OFF);
    struct counts t = {0};
    size_t fewest = SIZE_MAX;
    for (int i = 0; i < NPODS; i++) {
        events(&w, i);
        if (i >= 500 && i % 3) both_remove_pod(&w, w.pods[i - 500]); /* departures keep the cluster moving */
        compare_one(&w, i, &t);
        if (i % 150 == 0) {
            char why[256] = "";
            int rc = gs_nodeclass_check(w.on.cache, why, sizeof why);
            if (rc) fprintf(stderr, "%s\n", why);
            assert_int_equal(rc, 0);
            assert_int_equal(gs_cache_check(w.on.cache, why, sizeof why), 0);
            size_t n = gs_nodeclass_count(gs_cache_classes(w.on.cache));
            if (n < fewest) fewest = n;
        }
    }
    fprintf(stderr, "%s: %d placed, %d failed, %llu by class, fewest classes %zu of %d nodes\n",
            policy ? policy : "default", t.ok, t.fail, (unsigned long long)gs_framework_class_cycles(w.on.fw), fewest,
            NNODES);
    assert_true(t.ok > NPODS / 2);
    assert_true(t.fail > 10);
    /* Most cycles went by class (the hostname selectors did not), and classes grouped nodes. */
    assert_true(gs_framework_class_cycles(w.on.fw) > (uint64_t)NPODS * 3 / 4);
    assert_true(gs_framework_class_cycles(w.on.fw) < (uint64_t)NPODS);
    assert_int_equal(gs_framework_class_cycles(w.off.fw), 0);
    assert_true(fewest < NNODES / 2);
    side_stop(&w.on);
    side_stop(&w.off);
    for (int i = 0; i < NNODES; i++) test_node_free(w.nodes[i]), test_pod_free(w.pre[i]);
    for (int i = 0; i < NPODS; i++) test_pod_free(w.pods[i]);
}

static void default_profile_matches(void **st) { (void)st, run_policy(NULL, 42), run_policy(NULL, 43); }
static void best_fit_matches(void **st) { (void)st, run_policy("BestFit", 44); }
static void fgd_matches(void **st) { (void)st, run_policy("FGD", 45); }
static void fgd_pack_matches(void **st) { (void)st, run_policy("FGDPack", 46); }
static void fgd_plus_matches(void **st) { (void)st, run_policy("FGDPlus", 49); }
static void fgd_learn_matches(void **st) { (void)st, run_policy("FGDLearn", 50); }
static void dot_prod_matches(void **st) { (void)st, run_policy("DotProd", 47); }
static void gpu_packing_matches(void **st) { (void)st, run_policy("GpuPacking", 48); }

/* Classes follow placements: equal nodes share a class, a pod moves its node
 * out, forgetting the pod brings it back, the lowest index leads. */
static void classes_follow_the_cache(void **st)
{
    (void)st;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    struct gs_node *n[6];
    for (int i = 0; i < 6; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        n[i] = test_node(name, 32000, 64 * GiB, 110, 4, "A100", 40960);
        gs_labels_set(&n[i]->meta.labels, GS_CLASS_IGNORED_LABEL, name);
        if (i == 5) gs_labels_set(&n[i]->meta.labels, "zone", "b");
        assert_int_equal(gs_cache_add_node(c, n[i]), i);
    }
    struct gs_nodeclasses *x = gs_cache_classes(c);
    assert_non_null(x);
    assert_int_equal(gs_nodeclass_count(x), 2); /* the zone label splits; the hostname does not */
    assert_int_equal(gs_nodeclass_of(x, 0), gs_nodeclass_of(x, 4));
    assert_int_not_equal(gs_nodeclass_of(x, 0), gs_nodeclass_of(x, 5));
    struct gs_pod *p = test_pod("ns", "p", 1000, GiB, 1, 1000);
    assert_int_equal(gs_cache_assume(c, p, &(struct gs_assignment){0, 1, 1000, 0}, 0), 0);
    x = gs_cache_classes(c);
    assert_int_equal(gs_nodeclass_count(x), 3);
    struct gs_nodeclass k = gs_nodeclass_get(x, (size_t)gs_nodeclass_of(x, 1));
    assert_int_equal(k.min, 1);
    assert_int_equal(k.n, 4);
    assert_int_equal(gs_cache_forget(c, "ns/p"), 0);
    x = gs_cache_classes(c);
    assert_int_equal(gs_nodeclass_count(x), 2);
    k = gs_nodeclass_get(x, (size_t)gs_nodeclass_of(x, 3));
    assert_int_equal(k.min, 0);
    assert_int_equal(k.n, 5);
    assert_int_equal(gs_cache_set_schedulable(c, 2, false), 0);
    x = gs_cache_classes(c);
    assert_int_equal(gs_nodeclass_count(x), 3);
    assert_false(gs_nodeclass_get(x, (size_t)gs_nodeclass_of(x, 2)).schedulable);
    assert_int_equal(gs_cache_remove_node(c, "n0"), 0);
    x = gs_cache_classes(c);
    assert_int_equal(gs_nodeclass_of(x, 0), -1);
    assert_int_equal(gs_nodeclass_get(x, (size_t)gs_nodeclass_of(x, 1)).min, 1);
    char why[256];
    assert_int_equal(gs_nodeclass_check(c, why, sizeof why), 0);
    gs_cache_free(c);
    for (int i = 0; i < 6; i++) test_node_free(n[i]);
    test_pod_free(p);
}

/*--- A node judged apart from its class ---*/

/* A Score plugin that favours one node (its state) and says it is a class
 * function on every other node. */
struct favour {
    struct gs_framework *fw;
    int32_t node;
};

static void favour_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                         struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)cs, (void)pod;
    const struct favour *f = state;
    for (size_t i = 0; i < n; i++) scores[i] = nodes[i]->idx == f->node ? GS_MAX_SCORE : 0;
}

static bool favour_by_class(void *state, const struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)cs, (void)pod;
    struct favour *f = state;
    gs_framework_class_apart(f->fw, f->node);
    return true;
}

static int favour_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    (void)args, (void)d;
    struct favour *f = calloc(1, sizeof *f);
    if (!f) return GS_ENOMEM;
    *f = (struct favour){h->fw, -1};
    *state = f;
    return 0;
}

static const struct gs_plugin favour_plugin = {
    .name = "Favour", .init = favour_init, .fini = free, .score = favour_score, .by_class = favour_by_class};

/* 12 equal nodes, each pod placed splitting the classes further: the node
 * set apart wins by class exactly as on every node, whether it is its
 * class's lowest member, a middle one, the last, alone in its class, or
 * cordoned (then the classes decide without it). */
static void node_apart_from_its_class(void **st)
{
    (void)st;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_node *n[12];
    struct side sd[2];
    for (int i = 0; i < 12; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        n[i] = test_node(name, 32000, 64 * GiB, 110, 4, "A100", 40960);
        gs_labels_set(&n[i]->meta.labels, GS_CLASS_IGNORED_LABEL, name);
    }
    for (int k = 0; k < 2; k++) {
        sd[k].cache = gs_cache_new(&clk);
        for (int i = 0; i < 12; i++) assert_int_equal(gs_cache_add_node(sd[k].cache, n[i]), i);
        assert_int_equal(gs_sched_config_default(&sd[k].cfg), 0);
        struct gs_profile *pr = &sd[k].cfg.profiles[0];
        assert_true(pr->npoints[GS_PT_SCORE] < GS_MAX_PLUGINS_PER_POINT);
        pr->points[GS_PT_SCORE][pr->npoints[GS_PT_SCORE]++] = (struct gs_profile_plugin){&favour_plugin, 1000};
        struct gs_handle h = {.clock = &clk, .cache = sd[k].cache, .seed = 7};
        struct gs_diags d = {0};
        assert_int_equal(gs_framework_new(pr, &h, &sd[k].fw, &d), 0);
        gs_diags_free(&d);
        gs_framework_set_node_classes(sd[k].fw, k ? GS_CLASSES_ALWAYS : GS_CLASSES_OFF);
    }
    struct gs_pod *p = test_pod("ns", "p", 1000, GiB, 0, 0);
    const int32_t favoured[] = {0, 5, 11, 3, 0, 7};
    struct gs_pod *q[6];
    for (size_t t = 0; t < sizeof favoured / sizeof favoured[0]; t++) {
        if (t == 3) /* a pod on node 0: node 0 a class of its own, 1..11 another */
            for (int k = 0; k < 2; k++)
                assert_int_equal(gs_cache_assume(sd[k].cache, p, &(struct gs_assignment){0, 0, 0, 0}, 0), 0);
        if (t == 5)
            for (int k = 0; k < 2; k++) assert_int_equal(gs_cache_set_schedulable(sd[k].cache, 7, false), 0);
        struct gs_schedule_result r[2];
        char qn[16];
        snprintf(qn, sizeof qn, "q%zu", t);
        q[t] = test_pod("ns", qn, 1000, GiB, 0, 0);
        for (int k = 0; k < 2; k++) {
            struct favour *f = gs_framework_plugin_state(sd[k].fw, "Favour");
            assert_non_null(f);
            f->node = favoured[t];
            assert_int_equal(gs_framework_schedule(sd[k].fw, q[t], 0, &r[k]), 0);
        }
        assert_int_equal(r[0].code, GS_SUCCESS);
        assert_int_equal(r[1].code, r[0].code);
        assert_int_equal(r[1].a.node, r[0].a.node);
        assert_int_equal(r[1].feasible_nodes, r[0].feasible_nodes);
        if (t != 5) assert_int_equal(r[0].a.node, favoured[t]); /* it wins on every node */
        else assert_int_not_equal(r[0].a.node, 7);
        for (int k = 0; k < 2; k++) gs_schedule_result_free(&r[k]);
    }
    assert_true(gs_framework_class_cycles(sd[1].fw) >= 5);
    for (int k = 0; k < 2; k++) {
        gs_framework_free(sd[k].fw);
        gs_sched_config_free(&sd[k].cfg);
        gs_cache_free(sd[k].cache);
    }
    for (int i = 0; i < 12; i++) test_node_free(n[i]);
    for (int t = 0; t < 6; t++) test_pod_free(q[t]);
    test_pod_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(classes_follow_the_cache), cmocka_unit_test(default_profile_matches),
        cmocka_unit_test(best_fit_matches),         cmocka_unit_test(fgd_matches),
        cmocka_unit_test(fgd_pack_matches),         cmocka_unit_test(fgd_plus_matches),
        cmocka_unit_test(fgd_learn_matches),
        cmocka_unit_test(dot_prod_matches),
        cmocka_unit_test(gpu_packing_matches),
        cmocka_unit_test(node_apart_from_its_class),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
