/*
 * test_preemption.c - victim search on the cache: fewest and lowest-priority
 * victims, gang units (one member evicted means the gang), no eviction when
 * it would not help, multi-node plans for gang preemptors, the loop guard,
 * nominated capacity, and the exact restoration of the cache after every
 * search; then DefaultPreemption through the scheduler driver.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched/preemption_core.h"
#include "sched/scheduler.h"
#include "sched/topology_core.h"
#include "sched_fixture.h"

static struct gs_clock clk;

/* Resource fit alone: enough CPU and GPUs with the share. */
static bool fits(void *ctx, const struct gs_pod *pod, struct gs_node_info *n)
{
    (void)ctx;
    struct gs_gpu_choice ch;
    return pod->demand.cpu_milli <= n->cpu_alloc - n->cpu_used &&
           gs_topo_choose(n, pod->demand.gpu_count, pod->demand.gpu_milli, 0, ~0ULL, &ch);
}

struct env {
    struct gs_cache *c;
    struct gs_pod *pods[16];
    int n;
};

static struct gs_cache *cluster(int nodes)
{
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    for (int i = 0; i < nodes; i++) {
        char n[32];
        snprintf(n, sizeof n, "n%d", i);
        assert_int_equal(fx_add_node(c, n, 4, 64, 0, 0, NULL), i);
    }
    return c;
}

static struct gs_pod *bind(struct env *e, struct gs_pod *p, int node, uint64_t mask)
{
    struct gs_assignment a = {node, mask, 1000, 0};
    assert_int_equal(gs_cache_add_bound(e->c, p, &a), 0);
    return e->pods[e->n++] = p;
}

static void env_free(struct env *e)
{
    for (int i = 0; i < e->n; i++) fx_pod_free(e->pods[i]);
    gs_cache_free(e->c);
}

static void check_same(struct gs_cache *c, int64_t used)
{
    fx_check_cache(c);
    assert_int_equal(gs_cache_gpu_milli_used(c), used);
}

static void test_lowest_priority_victim(void **st)
{
    (void)st;
    struct env e = {.c = cluster(1)};
    bind(&e, fx_pod("l1", 2, 0, NULL), 0, 0x3);
    bind(&e, fx_pod("l2", 2, 5, NULL), 0, 0xc);
    struct gs_preempt_opts o = {0};
    struct gs_preemption *p = gs_preemption_new(&o, &clk, e.c);
    struct gs_pod *hp = fx_pod("hp", 2, 10, NULL);
    const struct gs_pod *m[1] = {hp};
    struct gs_preempt_plan plan;
    assert_int_equal(gs_preempt_find(p, m, 1, fits, NULL, &plan), 0);
    assert_int_equal(plan.nvictims, 1);
    assert_string_equal(plan.victims[0]->meta.name, "l1");
    assert_int_equal(plan.nodes[0], 0);
    assert_int_equal(plan.max_priority, 0);
    check_same(e.c, 4000);
    assert_int_equal(gs_cache_pod_assignment(e.c, "default/l2")->gpu_mask, 0xc);
    gs_preempt_plan_free(&plan);
    /* Equal priority cannot preempt. */
    struct gs_pod *eq = fx_pod("eq", 2, 0, NULL);
    m[0] = eq;
    assert_int_equal(gs_preempt_find(p, m, 1, fits, NULL, &plan), GS_ENOENT);
    check_same(e.c, 4000);
    fx_pod_free(hp), fx_pod_free(eq);
    gs_preemption_free(p);
    env_free(&e);
}

static void test_gang_unit_and_no_help(void **st)
{
    (void)st;
    struct env e = {.c = cluster(2)};
    bind(&e, fx_pod("g0", 2, 0, "g"), 0, 0x3);
    bind(&e, fx_pod("a", 2, 8, NULL), 0, 0xc);
    bind(&e, fx_pod("g1", 2, 0, "g"), 1, 0x3);
    bind(&e, fx_pod("s", 2, 3, NULL), 1, 0xc);
    struct gs_preempt_opts o = {0};
    struct gs_preemption *p = gs_preemption_new(&o, &clk, e.c);
    struct gs_pod *hp = fx_pod("hp", 2, 10, NULL);
    const struct gs_pod *m[2] = {hp};
    struct gs_preempt_plan plan;
    assert_int_equal(gs_preempt_find(p, m, 1, fits, NULL, &plan), 0);
    /* The gang (priority 0) beats s (priority 3) and is evicted whole, from both nodes. */
    assert_int_equal(plan.nvictims, 2);
    assert_string_equal(plan.victims[0]->meta.name, "g0");
    assert_string_equal(plan.victims[1]->meta.name, "g1");
    check_same(e.c, 8000);
    gs_preempt_record(p, &plan, hp);
    assert_int_equal(gs_preempt_stats(p)->gang_victims, 2);
    gs_preempt_plan_free(&plan);
    /* 8 GPUs on 4-GPU nodes: nothing helps and nothing moves. */
    struct gs_pod *huge = fx_pod("huge", 8, 10, NULL);
    m[0] = huge;
    assert_int_equal(gs_preempt_find(p, m, 1, fits, NULL, &plan), GS_ENOENT);
    check_same(e.c, 8000);
    /* A gang preemptor of two 4-GPU members: a plan over both nodes. */
    struct gs_pod *h0 = fx_pod("h0", 4, 10, "hg"), *h1 = fx_pod("h1", 4, 10, "hg");
    m[0] = h0, m[1] = h1;
    assert_int_equal(gs_preempt_find(p, m, 2, fits, NULL, &plan), 0);
    assert_int_equal(plan.nvictims, 4);
    assert_int_not_equal(plan.nodes[0], plan.nodes[1]);
    check_same(e.c, 8000);
    gs_preempt_plan_free(&plan);
    fx_pod_free(hp), fx_pod_free(huge), fx_pod_free(h0), fx_pod_free(h1);
    gs_preemption_free(p);
    env_free(&e);
}

static void test_loop_guard_and_nominations(void **st)
{
    (void)st;
    struct env e = {.c = cluster(1)};
    struct gs_pod *v = bind(&e, fx_pod("v", 4, 0, NULL), 0, 0xf);
    struct gs_preempt_opts o = {.max_per_window = 2, .window_ns = 100 * GS_NS_PER_SEC};
    struct gs_preemption *p = gs_preemption_new(&o, &clk, e.c);
    struct gs_pod *hp = fx_pod("hp", 1, 10, NULL), *other = fx_pod("other", 1, 20, NULL);
    const struct gs_pod *m[1] = {hp};
    struct gs_preempt_plan plan;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(gs_preempt_find(p, m, 1, fits, NULL, &plan), 0);
        gs_preempt_record(p, &plan, hp);
        gs_preempt_plan_free(&plan);
    }
    assert_int_equal(gs_preempt_find(p, m, 1, fits, NULL, &plan), GS_ENOENT); /* spared for class 10 */
    assert_true(gs_preempt_stats(p)->guard_skips >= 1);
    m[0] = other; /* another preemptor class may still choose it */
    assert_int_equal(gs_preempt_find(p, m, 1, fits, NULL, &plan), 0);
    gs_preempt_plan_free(&plan);
    gs_clock_set(&clk, 101 * GS_NS_PER_SEC); /* the window passed */
    m[0] = hp;
    assert_int_equal(gs_preempt_find(p, m, 1, fits, NULL, &plan), 0);
    gs_preempt_plan_free(&plan);

    /* Nominated capacity: node 0 held for a priority-10 pod needing all 4 GPUs. */
    gs_cache_remove_pod(e.c, "default/v");
    struct gs_pod *big = fx_pod("big", 4, 10, NULL), *small = fx_pod("small", 1, 0, NULL);
    assert_int_equal(gs_preempt_nominate(p, big, 0), 0);
    assert_int_equal(gs_preempt_nominated_node(p, "default/big"), 0);
    assert_true(gs_preempt_blocked(p, small, gs_cache_node(e.c, 0)));
    assert_false(gs_preempt_blocked(p, other, gs_cache_node(e.c, 0))); /* higher priority goes first */
    assert_false(gs_preempt_blocked(p, big, gs_cache_node(e.c, 0)));   /* its own nomination */
    gs_preempt_clear(p, "default/big");
    assert_false(gs_preempt_blocked(p, small, gs_cache_node(e.c, 0)));
    gs_cache_add_bound(e.c, v, &(struct gs_assignment){0, 0xf, 1000, 0});
    fx_pod_free(hp), fx_pod_free(other), fx_pod_free(big), fx_pod_free(small);
    gs_preemption_free(p);
    env_free(&e);
}

struct evicted {
    char names[8][32];
    int n;
};

/* Nominations held by pods of the asking pod's own gang never block it
 * (answered from per-gang counts without a pass over them), those of
 * another gang do, and the counts follow a key nominated again for a pod
 * of another gang, and clears. */
static void test_nominations_of_own_gang(void **st)
{
    (void)st;
    struct env e = {.c = cluster(2)};
    struct gs_preempt_opts o = {0};
    struct gs_preemption *p = gs_preemption_new(&o, &clk, e.c);
    struct gs_pod *a1 = fx_pod("a1", 4, 10, "ga"), *a2 = fx_pod("a2", 4, 10, "ga"), *b1 = fx_pod("b1", 4, 10, "gb");
    struct gs_pod *b1a = fx_pod("b1", 4, 10, "ga"); /* the same key, now of gang ga */
    struct gs_pod *q = fx_pod("q", 1, 0, "ga"), *r = fx_pod("r", 1, 0, "gb"), *single = fx_pod("s", 1, 0, NULL);
    struct gs_node_info *n0 = gs_cache_node(e.c, 0);
    assert_int_equal(gs_preempt_nominate(p, a1, 0), 0);
    assert_int_equal(gs_preempt_nominate(p, a2, 1), 0);
    assert_false(gs_preempt_blocked(p, q, n0)); /* its own gang's room */
    assert_true(gs_preempt_blocks_only(p, q, -1));
    assert_true(gs_preempt_blocked(p, r, n0)); /* another gang's room: 4 GPUs held of 4 */
    assert_true(gs_preempt_blocked(p, single, n0));
    assert_false(gs_preempt_blocks_only(p, r, -1));
    assert_false(gs_preempt_blocks_only(p, r, 0)); /* a2 holds node 1 */
    assert_int_equal(gs_preempt_nominate(p, b1, 0), 0);
    assert_true(gs_preempt_blocked(p, q, n0));
    assert_false(gs_preempt_blocks_only(p, q, -1));
    assert_true(gs_preempt_blocks_only(p, q, 0)); /* only b1 can block q, and on node 0 */
    assert_int_equal(gs_preempt_nominate(p, b1a, 0), 0); /* the key moves to gang ga */
    assert_int_equal(gs_preempt_nomination_count(p), 3);
    assert_false(gs_preempt_blocked(p, q, n0));
    assert_true(gs_preempt_blocks_only(p, q, -1));
    assert_true(gs_preempt_blocked(p, r, n0));
    gs_preempt_clear(p, "default/a1");
    gs_preempt_clear(p, "default/b1");
    assert_false(gs_preempt_blocked(p, r, n0)); /* a2 alone, on node 1 */
    assert_false(gs_preempt_blocks_only(p, r, -1));
    assert_true(gs_preempt_blocks_only(p, r, 1));
    assert_int_equal(gs_preempt_nominate(p, b1, 1), 0); /* gb again: q blocked on node 1 only */
    assert_true(gs_preempt_blocked(p, q, gs_cache_node(e.c, 1)));
    assert_false(gs_preempt_blocked(p, q, n0));
    gs_preempt_clear(p, "default/a2");
    gs_preempt_clear(p, "default/b1");
    assert_int_equal(gs_preempt_nomination_count(p), 0);
    assert_false(gs_preempt_blocked(p, r, gs_cache_node(e.c, 1)));
    assert_true(gs_preempt_blocks_only(p, r, -1));
    fx_pod_free(a1), fx_pod_free(a2), fx_pod_free(b1), fx_pod_free(b1a);
    fx_pod_free(q), fx_pod_free(r), fx_pod_free(single);
    gs_preemption_free(p);
    env_free(&e);
}

static void on_evicted(void *ctx, const struct gs_pod *victim, const struct gs_pod *preemptor,
                       const struct gs_assignment *a)
{
    (void)preemptor, (void)a;
    struct evicted *ev = ctx;
    snprintf(ev->names[ev->n++ % 8], 32, "%s", victim->meta.name);
}

static void test_driver_preempts_and_nominates(void **st)
{
    (void)st;
    struct env e = {.c = cluster(1)};
    struct gs_sched_config cfg;
    char text[4096];
    snprintf(text, sizeof text, FX_GANG_PROFILE, 60, "true");
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    assert_int_equal(gs_decode_stream(text, strlen(text), &docs, &d, NULL), 0);
    assert_int_equal(gs_sched_config_parse(docs.docs[0], &cfg, &d), 0);
    gs_docs_free(&docs);
    struct evicted ev = {0};
    struct gs_scheduler_opts o = {.profile = &cfg.profiles[0], .hooks = {.evicted = on_evicted, .ctx = &ev}};
    struct gs_scheduler *s;
    assert_int_equal(gs_scheduler_new(&clk, e.c, &o, &s, &d), 0);
    struct gs_pod *l1 = e.pods[e.n++] = fx_pod("l1", 2, 0, NULL), *l2 = e.pods[e.n++] = fx_pod("l2", 2, 0, NULL);
    struct gs_pod *hp = e.pods[e.n++] = fx_pod("hp", 2, 10, NULL), *mid = e.pods[e.n++] = fx_pod("mid", 2, 0, NULL);
    gs_scheduler_add_pod(s, l1);
    gs_scheduler_add_pod(s, l2);
    struct gs_cycle_result r;
    while (gs_scheduler_run_one(s, &r) > 0) {}
    gs_scheduler_add_pod(s, hp);
    assert_int_equal(gs_scheduler_run_one(s, &r), 1);
    assert_int_not_equal(r.code, GS_SUCCESS); /* evicted now, placed after backoff */
    assert_int_equal(ev.n, 1);
    assert_int_equal(gs_scheduler_evictions(s), 1);
    /* mid (priority 0, cannot preempt) arrives first but must not take the nominated room. */
    gs_scheduler_add_pod(s, mid);
    gs_clock_set(&clk, 2 * GS_NS_PER_SEC);
    while (gs_scheduler_run_one(s, &r) > 0) {}
    assert_non_null(gs_cache_pod_assignment(e.c, "default/hp"));
    assert_null(gs_cache_pod_assignment(e.c, "default/mid"));
    struct gs_preemption *p = gs__preemption_of(gs_framework_plugin_state(gs_scheduler_framework(s), "DefaultPreemption"));
    assert_int_equal(gs_preempt_stats(p)->successes, 1);
    assert_int_equal(gs_preempt_nominated_node(p, "default/hp"), -1); /* cleared at Reserve */
    fx_check_cache(e.c);
    gs_scheduler_free(s);
    gs_sched_config_free(&cfg);
    gs_diags_free(&d);
    env_free(&e);
}

/* preemptionPolicy Never: as important as before, but it waits instead of evicting. */
static void test_never_policy_does_not_preempt(void **st)
{
    (void)st;
    struct env e = {.c = cluster(1)};
    struct gs_sched_config cfg;
    char text[4096];
    snprintf(text, sizeof text, FX_GANG_PROFILE, 60, "true");
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    assert_int_equal(gs_decode_stream(text, strlen(text), &docs, &d, NULL), 0);
    assert_int_equal(gs_sched_config_parse(docs.docs[0], &cfg, &d), 0);
    gs_docs_free(&docs);
    struct evicted ev = {0};
    struct gs_scheduler_opts o = {.profile = &cfg.profiles[0], .hooks = {.evicted = on_evicted, .ctx = &ev}};
    struct gs_scheduler *s;
    assert_int_equal(gs_scheduler_new(&clk, e.c, &o, &s, &d), 0);
    struct gs_pod *l1 = e.pods[e.n++] = fx_pod("l1", 2, 0, NULL), *l2 = e.pods[e.n++] = fx_pod("l2", 2, 0, NULL);
    struct gs_pod *hp = e.pods[e.n++] = fx_pod_ex("hp", 2, 0, 1, 10, NULL, NULL, "\"preemptionPolicy\":\"Never\",", NULL);
    assert_true(hp->preempt_never);
    gs_scheduler_add_pod(s, l1);
    gs_scheduler_add_pod(s, l2);
    struct gs_cycle_result r;
    while (gs_scheduler_run_one(s, &r) > 0) {}
    gs_scheduler_add_pod(s, hp);
    assert_int_equal(gs_scheduler_run_one(s, &r), 1);
    assert_int_not_equal(r.code, GS_SUCCESS);
    assert_int_equal(ev.n, 0);
    assert_int_equal(gs_scheduler_evictions(s), 0);
    assert_non_null(gs_cache_pod_assignment(e.c, "default/l1"));
    assert_non_null(gs_cache_pod_assignment(e.c, "default/l2"));
    fx_check_cache(e.c);
    gs_scheduler_free(s);
    gs_sched_config_free(&cfg);
    gs_diags_free(&d);
    env_free(&e);
}

/*--- The screened search against the plain one ---*/

static int nfits_calls;

/* The fit test plus NodeResourcesFit's rule, so checks_resources holds. */
static bool fits_counted(void *ctx, const struct gs_pod *pod, struct gs_node_info *n)
{
    (void)ctx;
    nfits_calls++;
    if (n->pods_alloc > 0 && n->pods_used >= n->pods_alloc) return false;
    if (pod->demand.mem_bytes > n->mem_alloc - n->mem_used) return false;
    return fits(NULL, pod, n);
}

static void fits_batch(void *ctx, const struct gs_pod *pod, struct gs_node_info *const *nodes, size_t n, bool *ok)
{
    for (size_t i = 0; i < n; i++) ok[i] = fits_counted(ctx, pod, nodes[i]);
}

/* Which nodes a search changed (generation moved). */
static uint32_t run_search(struct gs_cache *c, struct gs_preemption *p, const struct gs_pod *const *m, size_t n,
                           const struct gs_preempt_fit *fit, struct gs_preempt_plan *plan, int *rc)
{
    uint64_t gen[8];
    int32_t nn = gs_cache_node_count(c);
    for (int32_t i = 0; i < nn; i++) gen[i] = gs_cache_node(c, i)->generation;
    *rc = gs_preempt_find_with(p, m, n, fit, plan);
    uint32_t moved = 0;
    for (int32_t i = 0; i < nn; i++) moved |= (gs_cache_node(c, i)->generation != gen[i]) << i;
    fx_check_cache(c);
    return moved;
}

/* Random clusters: with the batch fit test and the resource hint (more of
 * the search decided by arithmetic) the plan is the one found with single
 * fit calls and the GPU screen alone, the same nodes are changed (memos
 * keyed on node generations see the same thing), never with more fit calls. */
static void test_screened_search_matches_single(void **st)
{
    (void)st;
    uint64_t seed = 12345;
    long plain_calls = 0, fast_calls = 0, plans = 0;
    for (int trial = 0; trial < 300; trial++) {
        gs_clock_init_sim(&clk, 0);
        struct gs_cache *c = gs_cache_new(&clk);
        for (int i = 0; i < 6; i++) {
            char nm[16];
            snprintf(nm, sizeof nm, "n%d", i);
            assert_int_equal(fx_add_node(c, nm, 4, 8, 2, 2, NULL), i);
        }
        struct gs_pod *pods[40];
        int np = 0;
        uint64_t used[6] = {0};
        for (int k = 0; k < 30; k++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            int gpus = 1 + (int)((seed >> 33) % 2), node = (int)((seed >> 40) % 6), prio = (int)((seed >> 20) % 4);
            const char *groups[] = {NULL, NULL, "ga", "gb", "gc"};
            const char *grp = groups[(seed >> 50) % 5];
            uint64_t mask = 0;
            for (int g = 0; g < 4 && __builtin_popcountll(mask) < gpus; g++)
                if (!(used[node] >> g & 1)) mask |= 1ULL << g;
            if (__builtin_popcountll(mask) < gpus) continue;
            char nm[16];
            snprintf(nm, sizeof nm, "p%02d", k);
            struct gs_pod *pod = fx_pod(nm, gpus, prio, grp);
            struct gs_assignment a = {node, mask, 1000, 0};
            assert_int_equal(gs_cache_add_bound(c, pod, &a), 0);
            used[node] |= mask;
            pods[np++] = pod;
        }
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        int members = 1 + (int)((seed >> 30) % 3), want = 1 + (int)((seed >> 40) % 4);
        struct gs_pod *pre[3];
        const struct gs_pod *m[3];
        for (int i = 0; i < members; i++) {
            char nm[16];
            snprintf(nm, sizeof nm, "hp%d", i);
            m[i] = pre[i] = fx_pod(nm, want, 3 + (int)((seed >> 50) % 3), members > 1 ? "hg" : NULL);
        }
        struct gs_preempt_opts o = {0};
        struct gs_preemption *p = gs_preemption_new(&o, &clk, c);
        struct gs_preempt_fit plain = {.fits = fits_counted}, fast = {fits_counted, fits_batch, NULL, true};
        struct gs_preempt_plan a, b;
        int ra, rb;
        nfits_calls = 0;
        uint32_t ma = run_search(c, p, m, (size_t)members, &plain, &a, &ra);
        plain_calls += nfits_calls, nfits_calls = 0;
        uint32_t mb = run_search(c, p, m, (size_t)members, &fast, &b, &rb);
        fast_calls += nfits_calls;
        assert_int_equal(ra, rb);
        assert_int_equal(ma, mb);
        if (ra == 0) {
            plans++;
            assert_int_equal(a.nvictims, b.nvictims);
            for (size_t i = 0; i < a.nvictims; i++) assert_ptr_equal(a.victims[i], b.victims[i]);
            for (int i = 0; i < members; i++) assert_int_equal(a.nodes[i], b.nodes[i]);
            gs_preempt_plan_free(&a), gs_preempt_plan_free(&b);
        }
        gs_preemption_free(p);
        for (int i = 0; i < members; i++) fx_pod_free(pre[i]);
        for (int i = 0; i < np; i++) fx_pod_free(pods[i]);
        gs_cache_free(c);
    }
    assert_true(plans > 30);
    assert_true(plain_calls > 0 && fast_calls <= plain_calls);
}

/* Candidates kept between searches follow the cache: a pod confirmed
 * (assumed -> bound) or removed since is seen by the next search. */
static void test_candidates_follow_the_cache(void **st)
{
    (void)st;
    struct env e = {.c = cluster(1)};
    struct gs_pod *l = fx_pod("l", 4, 0, NULL);
    struct gs_assignment a = {0, 0xf, 1000, 0};
    assert_int_equal(gs_cache_assume(e.c, l, &a, 0), 0);
    struct gs_preempt_opts o = {0};
    struct gs_preemption *p = gs_preemption_new(&o, &clk, e.c);
    struct gs_pod *hp = fx_pod("hp", 4, 10, NULL);
    const struct gs_pod *m[1] = {hp};
    struct gs_preempt_plan plan;
    assert_int_equal(gs_preempt_find(p, m, 1, fits, NULL, &plan), GS_ENOENT); /* only bound pods are victims */
    assert_int_equal(gs_cache_confirm(e.c, "default/l"), 0);
    assert_int_equal(gs_preempt_find(p, m, 1, fits, NULL, &plan), 0);
    assert_int_equal(plan.nvictims, 1);
    assert_ptr_equal(plan.victims[0], l);
    gs_preempt_plan_free(&plan);
    /* The same answer again from the kept candidates, then none once l is gone. */
    assert_int_equal(gs_preempt_find(p, m, 1, fits, NULL, &plan), 0);
    assert_ptr_equal(plan.victims[0], l);
    gs_preempt_plan_free(&plan);
    assert_int_equal(gs_cache_remove_pod(e.c, "default/l"), 0);
    assert_int_equal(gs_preempt_find(p, m, 1, fits, NULL, &plan), GS_ENOENT); /* nobody below it now */
    check_same(e.c, 0);
    fx_pod_free(hp), fx_pod_free(l);
    gs_preemption_free(p);
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lowest_priority_victim),
        cmocka_unit_test(test_gang_unit_and_no_help),
        cmocka_unit_test(test_loop_guard_and_nominations),
        cmocka_unit_test(test_nominations_of_own_gang),
        cmocka_unit_test(test_driver_preempts_and_nominates),
        cmocka_unit_test(test_never_policy_does_not_preempt),
        cmocka_unit_test(test_screened_search_matches_single),
        cmocka_unit_test(test_candidates_follow_the_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
