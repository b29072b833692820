/*
 * test_fairshare.c - fair-share ordering over the queue tree and the decayed
 * usage ledger against its closed form.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/clock.h"
#include "sched/admission/fairshare.h"

#include <math.h>
#include <string.h>

#define GPU(n) ((int64_t)(n) * 1000)
#define HOUR (3600 * GS_NS_PER_SEC)

struct fx {
    struct gs_queue_tree t;
    struct gs_quota q;
    struct gs_fairshare fs;
    int32_t a, b, c;
    int gpu;
};

/* Three queues under the root with weights wa:wb:wc, no guarantees, 12 GPUs. */
static void fx_init(struct fx *x, double wa, double wb, double wc, int32_t prio_c)
{
    const char *res[] = {"nvidia.com/gpu"};
    int64_t zero[] = {0};
    gs_queue_tree_init(&x->t);
    struct gs_qt_queue_spec s = {.res = res, .guarantee = zero, .nres = 1};
    s.name = "a", s.weight = wa;
    assert_int_equal(gs_queue_tree_add_queue(&x->t, &s), 0);
    s.name = "b", s.weight = wb;
    assert_int_equal(gs_queue_tree_add_queue(&x->t, &s), 0);
    s.name = "c", s.weight = wc, s.priority = prio_c;
    assert_int_equal(gs_queue_tree_add_queue(&x->t, &s), 0);
    struct gs_diags d = {0};
    assert_int_equal(gs_queue_tree_finalize(&x->t, &d), 0);
    gs_queue_tree_set_capacity(&x->t, "nvidia.com/gpu", GPU(12));
    assert_int_equal(gs_quota_init(&x->q, &x->t), 0);
    assert_int_equal(gs_fairshare_init(&x->fs, &x->t, HOUR, 0.5, 0), 0);
    x->a = gs_queue_tree_find(&x->t, "a"), x->b = gs_queue_tree_find(&x->t, "b"), x->c = gs_queue_tree_find(&x->t, "c");
    x->gpu = GS_QT_FR(gs_queue_tree_flavor(&x->t, GS_QT_DEFAULT_FLAVOR), gs_queue_tree_res(&x->t, "nvidia.com/gpu"));
}

static void fx_free(struct fx *x)
{
    gs_fairshare_free(&x->fs);
    gs_quota_free(&x->q);
    gs_queue_tree_free(&x->t);
}

static void use(struct fx *x, int32_t leaf, int64_t milli)
{
    gs_qvec req = {0};
    req[x->gpu] = milli;
    gs_quota_apply(&x->q, leaf, req, +1);
}

static void decay_factor_halves_per_halflife(void **st)
{
    (void)st;
    assert_true(fabs(gs_fairshare_decay(HOUR, HOUR) - 0.5) < 1e-12);
    assert_true(fabs(gs_fairshare_decay(3 * HOUR, HOUR) - 0.125) < 1e-12);
    assert_true(gs_fairshare_decay(0, HOUR) == 1.0);
    assert_true(fabs(gs_fairshare_decay(HOUR / 2, HOUR) - M_SQRT1_2) < 1e-12);
}

/* Constant 4 GPUs from t=0, advanced in uneven steps: L(t) = g H/ln2 (1 - 2^(-t/H)). */
static void ledger_matches_closed_form(void **st)
{
    (void)st;
    struct fx x;
    fx_init(&x, 1, 1, 1, 0);
    use(&x, x.a, GPU(4));
    gs_fairshare_advance(&x.fs, &x.q, 0); /* usage starts now */
    int64_t t = 0, steps[] = {1, 7 * GS_NS_PER_SEC, 13 * 60 * GS_NS_PER_SEC, HOUR, 2 * HOUR + 5};
    for (int k = 0; k < 40; k++) {
        t += steps[k % 5];
        gs_fairshare_advance(&x.fs, &x.q, t);
        double h = (double)t / (double)HOUR;
        double want = 4.0 / M_LN2 * (1 - pow(2, -h)); /* GPU-hours, H = 1 hour */
        assert_true(fabs(x.fs.n[x.a].ledger_gpu_hours - want) < 1e-9 * (1 + want));
    }
    /* then no usage: pure decay, halving each half-life */
    gs_qvec req = {0};
    req[x.gpu] = GPU(4);
    gs_quota_apply(&x.q, x.a, req, -1);
    gs_fairshare_advance(&x.fs, &x.q, t);
    double before = x.fs.n[x.a].ledger_gpu_hours;
    gs_fairshare_advance(&x.fs, &x.q, t + HOUR);
    assert_true(fabs(x.fs.n[x.a].ledger_gpu_hours - before / 2) < 1e-9);
    assert_true(x.fs.n[x.b].ledger_gpu_hours == 0);
    fx_free(&x);
}

static void water_filling_by_weight(void **st)
{
    (void)st;
    struct fx x;
    fx_init(&x, 1, 2, 1, 0);
    double pend[16][GS_QT_MAX_RES] = {{0}};
    int r = x.gpu % GS_QT_MAX_RES;
    pend[x.a][r] = pend[x.b][r] = pend[x.c][r] = GPU(100);
    gs_fairshare_compute(&x.fs, &x.q, (const double(*)[GS_QT_MAX_RES])pend);
    assert_true(fabs(x.fs.n[x.a].deserved[r] - GPU(3)) < 1e-6);
    assert_true(fabs(x.fs.n[x.b].deserved[r] - GPU(6)) < 1e-6);
    assert_true(fabs(x.fs.n[x.c].deserved[r] - GPU(3)) < 1e-6);
    /* a wants only 1: the other 11 go 2:1 to b and c */
    pend[x.a][r] = GPU(1);
    gs_fairshare_compute(&x.fs, &x.q, (const double(*)[GS_QT_MAX_RES])pend);
    assert_true(fabs(x.fs.n[x.a].deserved[r] - GPU(1)) < 1e-6);
    assert_true(fabs(x.fs.n[x.b].deserved[r] - GPU(11) * 2 / 3.0) < 1e-3);
    assert_true(fabs(x.fs.n[x.c].deserved[r] - GPU(11) / 3.0) < 1e-3);
    fx_free(&x);
}

static void furthest_below_fair_share_goes_first(void **st)
{
    (void)st;
    struct fx x;
    fx_init(&x, 1, 2, 1, 0);
    x.fs.history_weight = 0; /* current shares only */
    double pend[16][GS_QT_MAX_RES] = {{0}};
    int r = x.gpu % GS_QT_MAX_RES;
    pend[x.a][r] = pend[x.b][r] = pend[x.c][r] = GPU(20);
    bool cand[16] = {0};
    cand[x.a] = cand[x.b] = cand[x.c] = true;
    use(&x, x.a, GPU(3));
    use(&x, x.b, GPU(3));
    gs_fairshare_compute(&x.fs, &x.q, (const double(*)[GS_QT_MAX_RES])pend);
    assert_int_equal(gs_fairshare_pick(&x.fs, cand), x.c); /* 0 of its share */
    use(&x, x.c, GPU(3));
    gs_fairshare_compute(&x.fs, &x.q, (const double(*)[GS_QT_MAX_RES])pend);
    assert_true(fabs(x.fs.n[x.b].share - 0.5) < 1e-6); /* 3 of 6 */
    assert_true(fabs(x.fs.n[x.a].share - 1.0) < 1e-6);
    assert_int_equal(gs_fairshare_pick(&x.fs, cand), x.b); /* weight 2: furthest below */
    cand[x.b] = false;
    assert_int_equal(gs_fairshare_pick(&x.fs, cand), x.a); /* ties go to the lower index */
    cand[x.a] = cand[x.c] = false;
    assert_int_equal(gs_fairshare_pick(&x.fs, cand), -1);
    fx_free(&x);
}

static void history_breaks_ties_of_current_usage(void **st)
{
    (void)st;
    struct fx x;
    fx_init(&x, 1, 1, 1, 0);
    use(&x, x.a, GPU(8));
    gs_fairshare_advance(&x.fs, &x.q, 0);
    gs_fairshare_advance(&x.fs, &x.q, 2 * HOUR); /* a ran 8 GPUs for two hours */
    gs_qvec req = {0};
    req[x.gpu] = GPU(8);
    gs_quota_apply(&x.q, x.a, req, -1);
    gs_fairshare_advance(&x.fs, &x.q, 2 * HOUR);
    bool cand[16] = {0};
    cand[x.a] = cand[x.b] = true;
    gs_fairshare_compute(&x.fs, &x.q, NULL);
    assert_true(x.fs.n[x.a].hist > 1 && x.fs.n[x.b].hist == 0);
    assert_int_equal(gs_fairshare_pick(&x.fs, cand), x.b);
    /* after many half-lives the history has faded to nothing that matters */
    gs_fairshare_advance(&x.fs, &x.q, 200 * HOUR);
    assert_true(x.fs.n[x.a].ledger_gpu_hours < 1e-30);
    fx_free(&x);
}

static void priority_comes_before_share(void **st)
{
    (void)st;
    struct fx x;
    fx_init(&x, 1, 1, 1, 10);
    use(&x, x.c, GPU(6));
    bool cand[16] = {0};
    cand[x.a] = cand[x.c] = true;
    gs_fairshare_compute(&x.fs, &x.q, NULL);
    assert_int_equal(gs_fairshare_pick(&x.fs, cand), x.c);
    fx_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decay_factor_halves_per_halflife),
        cmocka_unit_test(ledger_matches_closed_form),
        cmocka_unit_test(water_filling_by_weight),
        cmocka_unit_test(furthest_below_fair_share_goes_first),
        cmocka_unit_test(history_breaks_ties_of_current_usage),
        cmocka_unit_test(priority_comes_before_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
