/*
 * test_preempt_index.c - the incremental index of bound pods that the
 * preemption search draws its candidates from (preemption_core.c, "The
 * index of bound pods") against one built afresh from the cache.
 *
 * The index follows the cache's bind and unbind events
 * (gs_cache_watch_bound) and merges them only when a search needs it. A
 * random sequence of binds, assumes, confirms, forgets, evictions, node
 * removals, victim searches (which take pods out and put them back with the
 * index muted) and pod objects freed and made again (so a new pod may get a
 * departed pod's address) is applied, and after random stretches of it the
 * index must equal the sorted walk of the cache entry by entry
 * (gs__preempt_index_check): same pods, keys, assignments, in the same order.
 * Also: the cache's watchers themselves (who is told what), that a
 * search's plan is the same with the index as with a fresh core, and that
 * candidates followed event by event between searches (and a gang's kept
 * screen) give the plans and node changes of a core that draws them for
 * each search and follows nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched/preemption_core.h"
#include "sched/strmap.h"
#include "sched/topology_core.h"
#include "sched_fixture.h"

#define NPODS 80
#define NNODES 6

static struct gs_clock clk;

static bool fits(void *ctx, const struct gs_pod *pod, struct gs_node_info *n)
{
    (void)ctx;
    struct gs_gpu_choice ch;
    return pod->demand.cpu_milli <= n->cpu_alloc - n->cpu_used &&
           gs_topo_choose(n, pod->demand.gpu_count, pod->demand.gpu_milli, 0, ~0ULL, &ch);
}

enum st { ABSENT, ASSUMED, BOUND };

struct world {
    struct gs_cache *c;
    struct gs_pod *pod[NPODS];
    enum st st[NPODS];
    int gen[NPODS]; /* pod objects made for slot i so far */
    char names[NNODES][16];
    bool node_up[NNODES];
    uint64_t rng;
    int gang_every; /* every gang_every-th slot's pod is in a gang (0: none; world_init sets 3) */
};

static uint32_t rnd(struct world *w)
{
    w->rng = w->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(w->rng >> 33);
}

/* Slot i's pod: a GPU share or none, a priority from a few, every third in one of four gangs. */
static struct gs_pod *make(struct world *w, int i)
{
    char name[32], group[16];
    snprintf(name, sizeof name, "p%02d-%d", i, w->gen[i]++);
    snprintf(group, sizeof group, "g%d", i % 4);
    int prio = (int)(rnd(w) % 4) * 10;
    bool gang = w->gang_every && i % w->gang_every == 0;
    struct gs_pod *p = fx_pod_ex(name, i % 2 ? 1 : 0, i % 2 ? 100 : 0, 1, prio, gang ? group : NULL, NULL, NULL, NULL);
    assert_non_null(p);
    return p;
}

static char *key(const struct gs_pod *p, char *buf)
{
    gs__pod_key(p, buf, GS__KEY_MAX);
    return buf;
}

static bool place(struct world *w, int i, bool bound)
{
    int node = (int)(rnd(w) % NNODES);
    if (!w->node_up[node]) return false;
    const struct gs_pod *p = w->pod[i];
    struct gs_assignment a = {node, 0, 0, 0};
    if (p->demand.gpu_count) a.gpu_mask = 1ULL << (rnd(w) % 8), a.milli = p->demand.gpu_milli;
    int rc = bound ? gs_cache_add_bound(w->c, p, &a) : gs_cache_assume(w->c, p, &a, 0);
    if (rc == 0) w->st[i] = bound ? BOUND : ASSUMED;
    return rc == 0;
}

static void step(struct world *w, struct gs_preemption *pre)
{
    int i = (int)(rnd(w) % NPODS);
    char k[GS__KEY_MAX];
    switch (rnd(w) % 9) {
    case 0:
    case 1: /* bind */
        if (w->st[i] == ABSENT) place(w, i, true);
        break;
    case 2: /* assume */
        if (w->st[i] == ABSENT) place(w, i, false);
        break;
    case 3: /* confirm */
        if (w->st[i] == ASSUMED) {
            assert_int_equal(gs_cache_confirm(w->c, key(w->pod[i], k)), 0);
            w->st[i] = BOUND;
        }
        break;
    case 4: /* forget or remove */
        if (w->st[i] == ASSUMED) assert_int_equal(gs_cache_forget(w->c, key(w->pod[i], k)), 0);
        else if (w->st[i] == BOUND) assert_int_equal(gs_cache_remove_pod(w->c, key(w->pod[i], k)), 0);
        w->st[i] = ABSENT;
        break;
    case 5: /* a new object for an absent slot: the allocator may hand back a departed pod's address */
        if (w->st[i] == ABSENT) {
            fx_pod_free(w->pod[i]);
            w->pod[i] = make(w, i);
            if (rnd(w) % 2) place(w, i, true);
        }
        break;
    case 6: { /* a search: takes pods out and puts them back */
        struct gs_pod *hp = fx_pod("hp", 8, 100, NULL);
        const struct gs_pod *m[1] = {hp};
        struct gs_preempt_plan plan;
        if (gs_preempt_find(pre, m, 1, fits, NULL, &plan) == 0) gs_preempt_plan_free(&plan);
        fx_pod_free(hp);
        fx_check_cache(w->c);
        break;
    }
    case 7: /* a node goes and comes back, its pods dropped */
        if (rnd(w) % 8 == 0) {
            int n = (int)(rnd(w) % NNODES);
            if (!w->node_up[n]) break;
            int32_t idx = gs_cache_find_node(w->c, w->names[n]);
            for (int j = 0; j < NPODS; j++) {
                const struct gs_assignment *a = w->st[j] != ABSENT ? gs_cache_pod_assignment(w->c, key(w->pod[j], k)) : NULL;
                if (a && a->node == idx) w->st[j] = ABSENT;
            }
            assert_int_equal(gs_cache_remove_node(w->c, w->names[n]), 0);
            assert_true(fx_add_node(w->c, w->names[n], 8, 64, 0, 0, NULL) >= 0);
        }
        break;
    default: /* evict a random bound pod, as a carried-out plan does */
        if (w->st[i] == BOUND) {
            assert_int_equal(gs_cache_remove_pod(w->c, key(w->pod[i], k)), 0);
            w->st[i] = ABSENT;
        }
        break;
    }
}

static void world_init(struct world *w, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    w->rng = seed;
    w->gang_every = 3;
    gs_clock_init_sim(&clk, 0);
    w->c = gs_cache_new(&clk);
    for (int n = 0; n < NNODES; n++) {
        snprintf(w->names[n], sizeof w->names[n], "n%d", n);
        assert_int_equal(fx_add_node(w->c, w->names[n], 8, 64, 0, 0, NULL), n);
        w->node_up[n] = true;
    }
    for (int i = 0; i < NPODS; i++) w->pod[i] = make(w, i);
}

static void world_free(struct world *w)
{
    gs_cache_free(w->c);
    for (int i = 0; i < NPODS; i++) fx_pod_free(w->pod[i]);
}

static void check(struct gs_preemption *p)
{
    char why[512] = "";
    int rc = gs__preempt_index_check(p, why, sizeof why);
    if (rc) fprintf(stderr, "index check: %s\n", why);
    assert_int_equal(rc, 0);
}

static void test_index_equals_a_fresh_walk(void **st)
{
    (void)st;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        struct world w;
        world_init(&w, seed);
        /* Some pods bound before the core exists: the first use walks the cache. */
        for (int i = 0; i < NPODS / 4; i++) place(&w, i, true);
        struct gs_preempt_opts o = {0};
        struct gs_preemption *p = gs_preemption_new(&o, &clk, w.c);
        assert_non_null(p);
        for (int k = 0; k < 600; k++) {
            step(&w, p);
            if (rnd(&w) % 23 == 0) check(p);
        }
        check(p);
        gs_preemption_free(p);
        world_free(&w);
    }
}

/* The same searches from a core that followed the cache and from one made
 * just now (which walks and sorts the cache): the same victims. */
static void test_plans_match_a_fresh_core(void **st)
{
    (void)st;
    struct world w;
    world_init(&w, 99);
    struct gs_preempt_opts o = {0};
    struct gs_preemption *p = gs_preemption_new(&o, &clk, w.c);
    int compared = 0, with_victims = 0;
    for (int k = 0; k < 400; k++) {
        step(&w, p);
        if (k % 10) continue;
        struct gs_pod *hp = fx_pod("hp", 8, 100, NULL);
        const struct gs_pod *m[1] = {hp};
        struct gs_preemption *fresh = gs_preemption_new(&o, &clk, w.c);
        struct gs_preempt_plan a, b;
        int ra = gs_preempt_find(p, m, 1, fits, NULL, &a), rb = gs_preempt_find(fresh, m, 1, fits, NULL, &b);
        assert_int_equal(ra, rb);
        if (!ra) {
            assert_int_equal(a.nvictims, b.nvictims);
            for (size_t i = 0; i < a.nvictims; i++) assert_ptr_equal(a.victims[i], b.victims[i]);
            assert_int_equal(a.nodes[0], b.nodes[0]);
            with_victims += a.nvictims > 0;
            gs_preempt_plan_free(&a), gs_preempt_plan_free(&b);
        }
        compared++;
        gs_preemption_free(fresh);
        fx_pod_free(hp);
    }
    assert_int_equal(compared, 40);
    assert_true(with_victims > 0); /* the comparison saw real plans */
    gs_preemption_free(p);
    world_free(&w);
}

/* Node generations, to compare what two searches changed. */
static void gens(struct gs_cache *c, uint64_t *g)
{
    for (int32_t i = 0; i < gs_cache_node_count(c); i++) g[i] = gs_cache_node(c, i)->generation;
}

/* Candidates followed event by event (evictions, binds at or above the
 * preemptor's priority, single and gang, cordons, with some changes they
 * cannot follow in between) against a core made just now that draws them for the
 * search and follows nothing (the way before they were followed): the same plans, and
 * the same nodes changed by the search (the memos read them), search
 * after search. */
static void test_followed_candidates_match_a_fresh_core(void **st)
{
    (void)st;
    int64_t followed = 0, plans = 0;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        struct world w;
        world_init(&w, seed * 7919);
        /* Without gangs, with a few, with many (gang units span nodes: those nodes are looked at unit by unit). */
        w.gang_every = (int[]){0, 16, 3}[seed % 3];
        for (int i = 0; i < NPODS; i++) fx_pod_free(w.pod[i]), w.pod[i] = make(&w, i);
        for (int i = 0; i < NPODS; i++) place(&w, i, true);
        struct gs_preempt_opts o = {0};
        struct gs_preemption *p = gs_preemption_new(&o, &clk, w.c);
        struct gs_pod *hi[64];
        int nhi = 0;
        char k[GS__KEY_MAX];
        for (int step_no = 0; step_no < 300; step_no++) {
            int i = (int)(rnd(&w) % NPODS), r = (int)(rnd(&w) % 40);
            if (r < 18) { /* an eviction */
                if (w.st[i] == BOUND) {
                    assert_int_equal(gs_cache_remove_pod(w.c, key(w.pod[i], k)), 0);
                    w.st[i] = ABSENT;
                }
            } else if (r < 24) { /* a pod at or above the preemptor's priority, alone or in a gang */
                if (nhi == 64) continue;
                char name[16];
                snprintf(name, sizeof name, "h%02d", nhi);
                int node = (int)(rnd(&w) % NNODES);
                /* A whole GPU: a node it runs on does not fit the preemptor, candidates or not. */
                hi[nhi] = fx_pod_ex(name, 1, 0, 1, 100 + (int)(rnd(&w) % 2) * 100, rnd(&w) % 3 ? NULL : "gh", NULL,
                                    NULL, NULL);
                assert_non_null(hi[nhi]);
                struct gs_assignment a = {node, 1ULL << (rnd(&w) % 8), 1000, 0};
                if (!w.node_up[node] || gs_cache_add_bound(w.c, hi[nhi], &a) != 0) fx_pod_free(hi[nhi]);
                else nhi++;
            } else if (r < 25) { /* a new candidate */
                if (w.st[i] == ABSENT) place(&w, i, true);
            } else if (r < 26) {
                step(&w, p);
            } else if (r < 28) { /* a node cordoned or back: a gang's pods there are still marked from its other nodes */
                int32_t n = (int32_t)(rnd(&w) % NNODES);
                if (w.node_up[n]) gs_cache_set_schedulable(w.c, gs_cache_find_node(w.c, w.names[n]), rnd(&w) % 2);
            } else {
                /* A pod, or a gang of three whose members after the first reuse the first one's screen. */
                bool gang = rnd(&w) % 2;
                struct gs_pod *hp = gang ? fx_pod("hp", 4, 100, "hpg") : fx_pod("hp", 8, 100, NULL);
                struct gs_pod *hq = fx_pod("hq", 4, 100, "hpg"), *hr = fx_pod("hr", 4, 100, "hpg");
                const struct gs_pod *m[3] = {hp, hq, hr};
                size_t nm = gang ? 3 : 1;
                uint64_t g0[NNODES], g1[NNODES], g2[NNODES];
                int64_t before = gs_preempt_stats(p)->followed;
                gens(w.c, g0);
                struct gs_preempt_plan a, b;
                int ra = gs_preempt_find(p, m, nm, fits, NULL, &a);
                gens(w.c, g1);
                struct gs_preemption *fresh = gs_preemption_new(&o, &clk, w.c);
                gs__preempt_set_follow(fresh, false);
                int rb = gs_preempt_find(fresh, m, nm, fits, NULL, &b);
                gens(w.c, g2);
                followed += gs_preempt_stats(p)->followed - before;
                assert_int_equal(ra, rb);
                if (!ra) {
                    assert_int_equal(a.nvictims, b.nvictims);
                    for (size_t v = 0; v < a.nvictims; v++) assert_ptr_equal(a.victims[v], b.victims[v]);
                    for (size_t k = 0; k < nm; k++) assert_int_equal(a.nodes[k], b.nodes[k]);
                    assert_int_equal(a.max_priority, b.max_priority);
                    plans += a.nvictims > 0;
                    gs_preempt_plan_free(&a), gs_preempt_plan_free(&b);
                }
                for (int32_t n = 0; n < gs_cache_node_count(w.c) && n < NNODES; n++)
                    assert_int_equal(g1[n] - g0[n], g2[n] - g1[n]);
                gs_preemption_free(fresh);
                fx_pod_free(hp), fx_pod_free(hq), fx_pod_free(hr);
                fx_check_cache(w.c);
                if (rnd(&w) % 5 == 0) check(p);
            }
        }
        gs_preemption_free(p);
        world_free(&w);
        for (int h = 0; h < nhi; h++) fx_pod_free(hi[h]);
    }
    assert_true(followed > 100); /* most searches ran on followed candidates */
    assert_true(plans > 100);    /* and found victims */
}

struct told {
    int added, removed;
    const struct gs_pod *last;
};

static void count(void *ctx, const struct gs_pod *pod, const struct gs_assignment *a, bool added)
{
    (void)a;
    struct told *t = ctx;
    if (added) t->added++;
    else t->removed++;
    t->last = pod;
}

/* Binds and unbinds are told, assumes and forgets are not; an unwatched
 * watcher hears nothing; the slots are limited. */
static void test_watchers_are_told_of_bound_pods_only(void **st)
{
    (void)st;
    struct world w;
    world_init(&w, 5);
    struct told t = {0}, u = {0};
    assert_int_equal(gs_cache_watch_bound(w.c, count, &t), 0);
    assert_int_equal(gs_cache_watch_bound(w.c, count, &u), 0);
    struct gs_assignment a = {0, 0, 0, 0};
    char k[GS__KEY_MAX];
    assert_int_equal(gs_cache_assume(w.c, w.pod[0], &a, 0), 0);
    assert_int_equal(t.added, 0);
    assert_int_equal(gs_cache_confirm(w.c, key(w.pod[0], k)), 0);
    assert_int_equal(t.added, 1);
    assert_ptr_equal(t.last, w.pod[0]);
    assert_int_equal(gs_cache_confirm(w.c, k), 0); /* already bound: nothing new */
    assert_int_equal(t.added, 1);
    assert_int_equal(gs_cache_assume(w.c, w.pod[2], &a, 0), 0);
    assert_int_equal(gs_cache_forget(w.c, key(w.pod[2], k)), 0);
    assert_int_equal(t.added + t.removed, 1);
    assert_int_equal(gs_cache_add_bound(w.c, w.pod[4], &a), 0);
    gs_cache_unwatch_bound(w.c, count, &u);
    assert_int_equal(gs_cache_remove_node(w.c, "n0"), 0); /* drops pod 0 and pod 4 */
    assert_int_equal(t.added, 2);
    assert_int_equal(t.removed, 2);
    assert_int_equal(u.added, 2);
    assert_int_equal(u.removed, 0);
    gs_cache_unwatch_bound(w.c, count, &t);
    struct told many[GS_CACHE_WATCHERS + 1];
    for (int i = 0; i < GS_CACHE_WATCHERS; i++) assert_int_equal(gs_cache_watch_bound(w.c, count, &many[i]), 0);
    assert_int_equal(gs_cache_watch_bound(w.c, count, &many[GS_CACHE_WATCHERS]), GS_EBUSY);
    for (int i = 0; i < GS_CACHE_WATCHERS; i++) gs_cache_unwatch_bound(w.c, count, &many[i]);
    world_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_equals_a_fresh_walk),
        cmocka_unit_test(test_plans_match_a_fresh_core),
        cmocka_unit_test(test_followed_candidates_match_a_fresh_core),
        cmocka_unit_test(test_watchers_are_told_of_bound_pods_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
