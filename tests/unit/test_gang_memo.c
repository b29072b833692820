/*
 * test_gang_memo.c - what the gang core remembers between cycles must equal
 * what asking the cache again would say: preemptible capacity (sums by
 * priority rebuilt when bound pods change), which members are placed (kept
 * per cache pod version), free capacity, the pod -> group index, and the
 * QueueSort key comparison without printf. A random walk of assume, confirm,
 * forget, add-bound and remove on a real cache checks the admission numbers
 * against a count done here from the test's own record of the pods.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched/gang_core.h"
#include "sched_fixture.h"

#define NNODES 2
#define NGPUS 8
#define NPOOL 14

enum st { OUT, ASSUMED, BOUND };

struct env {
    struct gs_clock clock;
    struct gs_cache *cache;
    struct gs_gang *g;
    struct gs_object *pg;
    struct gs_pod *members[4]; /* group "big": 8 GPUs each, never fits whole */
    struct gs_pod *pool[NPOOL];
    enum st st[NPOOL];
    enum st mst[4];
    uint64_t used[NNODES]; /* GPUs taken, by the test's own account */
};

static void env_init(struct env *e)
{
    memset(e, 0, sizeof *e);
    gs_clock_init_sim(&e->clock, 0);
    e->cache = gs_cache_new(&e->clock);
    for (int i = 0; i < NNODES; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        assert_true(fx_add_node(e->cache, name, NGPUS, 64, 0, 0, NULL) >= 0);
    }
    struct gs_gang_opts o = {.whole_group_plan = true};
    e->g = gs_gang_new(&o, &e->clock, e->cache);
    assert_non_null(e->g);
    e->pg = fx_podgroup("big", 4, 0, NULL);
    assert_non_null(e->pg);
    assert_int_equal(gs_gang_add_podgroup(e->g, e->pg->u.podgroup), 0);
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "big-%d", i);
        assert_non_null(e->members[i] = fx_pod(name, NGPUS, 0, "big"));
        assert_int_equal(gs_gang_add_pod(e->g, e->members[i]), 0);
    }
    static const int prios[] = {-5, 0, 5, 10, 20};
    static const char *groups[] = {NULL, "big", "other"};
    for (int i = 0; i < NPOOL; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        assert_non_null(e->pool[i] = fx_pod(name, 1 + i % 2, prios[i % 5], groups[i % 3]));
        /* The last one names "big" without being registered: excluded by name alone. */
        if (groups[i % 3] && i != NPOOL - 1) assert_int_equal(gs_gang_add_pod(e->g, e->pool[i]), 0);
    }
}

static void env_free(struct env *e)
{
    gs_gang_free(e->g);
    gs_cache_free(e->cache);
    for (int i = 0; i < 4; i++) fx_pod_free(e->members[i]);
    for (int i = 0; i < NPOOL; i++) fx_pod_free(e->pool[i]);
    gs_object_free(e->pg);
}

static void key_of(const struct gs_pod *p, char *k) { snprintf(k, 64, "default/%s", p->meta.name); }

/* Takes n free GPUs on some node (the test's account); -1 when none has n. */
static int take(struct env *e, int n, struct gs_assignment *a)
{
    for (int node = 0; node < NNODES; node++) {
        uint64_t m = 0;
        for (int gpu = 0; gpu < NGPUS && __builtin_popcountll(m) < n; gpu++)
            if (!(e->used[node] >> gpu & 1)) m |= 1ULL << gpu;
        if (__builtin_popcountll(m) < n) continue;
        e->used[node] |= m;
        *a = (struct gs_assignment){node, m, 1000, 0};
        return 0;
    }
    return -1;
}

static void give_back(struct env *e, const struct gs_pod *p)
{
    char k[64];
    key_of(p, k);
    const struct gs_assignment *a = gs_cache_pod_assignment(e->cache, k);
    assert_non_null(a);
    e->used[a->node] &= ~a->gpu_mask;
}

/* One random step on pod p with state *s. */
static void step(struct env *e, struct gs_pod *p, enum st *s, unsigned r)
{
    char k[64];
    key_of(p, k);
    struct gs_assignment a;
    if (*s == OUT) {
        if (take(e, p->demand.gpu_count, &a) != 0) return;
        if (r & 1) {
            assert_int_equal(gs_cache_assume(e->cache, p, &a, 0), 0);
            *s = ASSUMED;
        } else {
            assert_int_equal(gs_cache_add_bound(e->cache, p, &a), 0);
            *s = BOUND;
        }
    } else if (*s == ASSUMED && (r & 2)) {
        assert_int_equal(gs_cache_confirm(e->cache, k), 0);
        *s = BOUND;
    } else {
        give_back(e, p);
        assert_int_equal(*s == ASSUMED ? gs_cache_forget(e->cache, k) : gs_cache_remove_pod(e->cache, k), 0);
        *s = OUT;
    }
}

/* Preemptible milli-GPU for a "big" pod at prio, counted from the test's record. */
static int64_t want_preemptible(const struct env *e, int prio)
{
    int64_t m = 0;
    for (int i = 0; i < NPOOL; i++) {
        const struct gs_pod *p = e->pool[i];
        if (e->st[i] != BOUND || p->priority >= prio) continue;
        if (p->pod_group && !strcmp(p->pod_group, "big")) continue; /* the group's own */
        m += 1000LL * p->demand.gpu_count;
    }
    return m; /* members of "big" (e->mst) are the group's own too */
}

static void check(struct env *e, struct gs_pod *probe)
{
    struct gs_gang_group *gr = gs_gang_group_of(e->g, e->members[0]);
    assert_non_null(gr);
    int placed = 0, need = 0;
    for (int i = 0; i < 4; i++) {
        placed += e->mst[i] != OUT;
        need += e->mst[i] == OUT ? NGPUS : 0;
    }
    for (int i = 0; i < NPOOL - 1; i++) {
        const struct gs_pod *p = e->pool[i];
        if (!p->pod_group || strcmp(p->pod_group, "big")) continue;
        placed += e->st[i] != OUT;
        need += e->st[i] == OUT ? p->demand.gpu_count : 0;
    }
    assert_int_equal(gs_gang_placed(e->g, gr), placed);
    int64_t free_milli = 0;
    for (int n = 0; n < NNODES; n++) free_milli += 1000LL * (NGPUS - __builtin_popcountll(e->used[n]));
    static const int probes[] = {0, 10, 30};
    for (int i = 0; i < 3; i++) {
        probe->priority = probes[i];
        struct gs_status s = gs_gang_admit(e->g, probe);
        int64_t pre = want_preemptible(e, probes[i]);
        if (placed >= 4 || 1000LL * need <= free_milli + pre) { /* started, or fits (CPU and memory are plenty) */
            assert_int_equal(s.code, GS_SUCCESS);
            continue;
        }
        assert_int_equal(s.code, GS_UNSCHEDULABLE_AND_UNRESOLVABLE);
        char want[128];
        snprintf(want, sizeof want, "needs %.1f GPUs, %.1f free and %.1f preemptible", (double)need,
                 (double)free_milli / 1000, (double)pre / 1000);
        if (!strstr(s.reason, want)) fail_msg("got \"%s\", want \"%s\"", s.reason, want);
    }
}

static void test_admission_numbers_follow_the_cache(void **st)
{
    (void)st;
    struct env e;
    env_init(&e);
    struct gs_pod *probe = fx_pod("probe", 1, 0, "big"); /* not registered: found by name */
    unsigned seed = 12345;
    check(&e, probe);
    for (int it = 0; it < 3000; it++) {
        seed = seed * 1103515245u + 12345u;
        unsigned r = seed >> 8;
        if (r % 7 == 0) {
            int i = (int)(r / 7 % 4);
            step(&e, e.members[i], &e.mst[i], r >> 4);
        } else {
            int i = (int)(r / 7 % NPOOL);
            step(&e, e.pool[i], &e.st[i], r >> 4);
        }
        check(&e, probe);
        if (it % 500 == 0) fx_check_cache(e.cache);
    }
    fx_pod_free(probe);
    env_free(&e);
}

static void test_group_index_follows_registration(void **st)
{
    (void)st;
    struct env e;
    env_init(&e);
    struct gs_gang_group *big = gs_gang_group_of(e.g, e.members[0]);
    const struct gs_pod *const *all;
    size_t n0 = gs_gang_members(big, &all);
    assert_int_equal(n0, 4 + 4); /* pool pods 1, 4, 7 and 10 name it too */
    /* A new object under a registered key replaces the old one in the group. */
    struct gs_pod *again = fx_pod("big-1", NGPUS, 0, "big");
    assert_int_equal(gs_gang_add_pod(e.g, again), 0);
    assert_ptr_equal(gs_gang_group_of(e.g, again), big);
    assert_int_equal(gs_gang_members(big, &all), n0);
    assert_ptr_equal(all[1], again); /* sorted by key: big-0, big-1, ... */
    /* Removed: the group is still found by name, and the member is gone. */
    gs_gang_remove_pod(e.g, again);
    assert_ptr_equal(gs_gang_group_of(e.g, again), big);
    assert_int_equal(gs_gang_members(big, &all), n0 - 1);
    /* A group never named by a registered pod does not exist; once it is, it does. */
    struct gs_pod *lone = fx_pod("lone", 1, 0, "solo");
    assert_null(gs_gang_group_of(e.g, lone));
    assert_int_equal(gs_gang_add_pod(e.g, lone), 0);
    struct gs_gang_group *solo = gs_gang_group_of(e.g, lone);
    assert_non_null(solo);
    assert_string_equal(gs_gang_group_key(solo), "default/solo");
    /* The placed count notices members leaving without a cache change. */
    struct gs_assignment a = {0, 1, 1000, 0};
    assert_int_equal(gs_cache_add_bound(e.cache, lone, &a), 0);
    assert_int_equal(gs_gang_placed(e.g, solo), 1);
    gs_gang_remove_pod(e.g, lone);
    assert_int_equal(gs_gang_placed(e.g, solo), 0);
    assert_int_equal(gs_cache_remove_pod(e.cache, "default/lone"), 0);
    fx_pod_free(lone);
    fx_pod_free(again);
    env_free(&e);
}

static void test_queue_sort_ties_compare_keys(void **st)
{
    (void)st;
    struct env e;
    env_init(&e); /* group "big" created at t=0 */
    struct gs_pod *a = fx_pod("a", 1, 0, NULL), *z = fx_pod("z", 1, 0, NULL);
    struct gs_queued_pod qm = {e.members[2], 0, 0, 0, 9}, qm2 = {e.members[0], 0, 0, 0, 10};
    struct gs_queued_pod qa = {a, 0, 0, 0, 1}, qz = {z, 0, 0, 0, 2};
    /* Same time: "default/a" < "default/big" < "default/z", whatever the sequence. */
    assert_true(gs_gang_less(e.g, &qa, &qm));
    assert_false(gs_gang_less(e.g, &qm, &qa));
    assert_true(gs_gang_less(e.g, &qm, &qz));
    assert_false(gs_gang_less(e.g, &qz, &qm));
    /* Members of one group: by sequence. */
    assert_true(gs_gang_less(e.g, &qm, &qm2));
    assert_false(gs_gang_less(e.g, &qm2, &qm));
    fx_pod_free(a), fx_pod_free(z);
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admission_numbers_follow_the_cache),
        cmocka_unit_test(test_group_index_follows_registration),
        cmocka_unit_test(test_queue_sort_ties_compare_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
