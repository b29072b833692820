/*
 * test_leader.c - Lease leader election (kube/leader.h) on a fake clock,
 * over the in-process source on a scratch store: two electors and one
 * leader; a silent leader replaced only after the lease duration as
 * observed by the follower; an update that loses the optimistic-concurrency
 * race gives no leadership; may_write turning false at the renew deadline
 * even before the elector notices; release on stop hands the lease over at
 * once; option errors that name the field; the thread on the real clock.
 *
 * The race is staged with a transport that does what a kube-apiserver
 * client does (read, decide, write with the resourceVersion read) and lets
 * the test slip another write in between.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/store.h"
#include "informer/source.h"
#include "kube/leader.h"
#include "tmpdir_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define S GS_NS_PER_SEC
#define MS GS_NS_PER_MS
#define KEY "leases.coordination.k8s.io/kube-system/gpusched"

/*--- A transport that reads, then writes with the version read ---*/

struct wrap {
    struct gs_source base;
    struct gs_source *inner;
    int fail_next;                  /* the next mutate fails with this code (0: none) */
    void (*between)(void *ctx);     /* run once between the read and the write */
    void *between_ctx;
};

#define W(s) ((struct wrap *)(s))

static int w_list(struct gs_source *s, const char *p, gs_store_list_fn fn, void *arg, int64_t *c)
{ return gs_source_list(W(s)->inner, p, fn, arg, c); }
static int w_events(struct gs_source *s, int64_t *after, const char *p, int t, const atomic_bool *stop,
                    struct gs_store_event **evs, size_t *n)
{ return gs_source_events(W(s)->inner, after, p, t, stop, evs, n); }
static int w_get(struct gs_source *s, const char *key, json_t **obj, int64_t *rv)
{ return gs_source_get(W(s)->inner, key, obj, rv); }
static int w_create(struct gs_source *s, const char *key, json_t *obj, int64_t *rv)
{ return gs_source_create(W(s)->inner, key, obj, rv); }
static int w_remove(struct gs_source *s, const char *key, const char *uid, int64_t rv, json_t **old)
{ return gs_source_remove(W(s)->inner, key, uid, rv, old); }
static int w_bind(struct gs_source *s, struct gs_source_bind *b, size_t n) { return gs_source_bind(W(s)->inner, b, n); }
static int w_preempt(struct gs_source *s, const char *key, const char *uid, const char *by, bool *re)
{ return gs_source_preempt(W(s)->inner, key, uid, by, re); }
static void w_interrupt(struct gs_source *s) { gs_source_interrupt(W(s)->inner); }
static void w_free(struct gs_source *s) { (void)s; }

static int w_mutate(struct gs_source *s, const char *key, const char *sub, gs_store_mutate_fn fn, void *arg,
                    json_t **out, int64_t *rv)
{
    (void)sub, (void)out, (void)rv;
    struct wrap *w = W(s);
    if (w->fail_next) {
        int e = w->fail_next;
        w->fail_next = 0;
        return e;
    }
    json_t *cur = NULL;
    int64_t read_rv = 0;
    int err = gs_source_get(w->inner, key, &cur, &read_rv);
    if (err && err != GS_ENOENT) return err;
    json_t *next = NULL;
    err = fn(cur, &next, arg);
    json_decref(cur);
    if (err) return err;
    if (w->between) {
        void (*b)(void *) = w->between;
        w->between = NULL;
        b(w->between_ctx);
    }
    struct gs_store *st = gs_source_local_store(w->inner);
    err = read_rv ? gs_store_update(st, key, next, read_rv, NULL) : gs_store_create(st, key, next, NULL);
    if (err == GS_EEXIST) err = GS_ECONFLICT; /* created meanwhile: kube answers 409 AlreadyExists */
    json_decref(next);
    return err;
}

static const struct gs_source_vtbl wrap_vtbl = {
    .kind = GS_SOURCE_KUBE, .list = w_list, .events = w_events, .get = w_get, .create = w_create,
    .mutate = w_mutate, .remove = w_remove, .bind = w_bind, .preempt = w_preempt, .interrupt = w_interrupt,
    .free = w_free,
};

/*--- Fixture ---*/

struct env {
    char dir[64];
    struct gs_store *store;
    struct gs_source *src;
    struct wrap wrap;
    struct gs_clock clock;
    int changes[2]; /* on_change calls: [0] false, [1] true */
};

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/gs-leader-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    struct gs_store_opts so = {.dir = e->dir};
    assert_int_equal(gs_store_open_sqlite(&so, &e->store), 0);
    assert_int_equal(gs_source_local_new(e->store, &e->src), 0);
    e->wrap = (struct wrap){.base.v = &wrap_vtbl, .inner = e->src};
    gs_clock_init_sim(&e->clock, 1700000000LL * S); /* also the wall time written */
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gs_source_free(e->src);
    gs_store_close(e->store);
    fx_rm_tree(e->dir);
    free(e);
    return 0;
}

static void on_change(void *ctx, bool leading)
{
    struct env *e = ctx;
    e->changes[leading]++;
}

static struct gs_leader *elector(struct env *e, const char *id, struct gs_source *src)
{
    struct gs_leader_opts o = {.source = src ? src : e->src, .ns = "kube-system", .name = "gpusched", .identity = id,
                               .lease_duration_ns = 15 * S, .renew_deadline_ns = 10 * S, .retry_period_ns = 2 * S,
                               .clock = &e->clock, .on_change = on_change, .ctx = e};
    struct gs_leader *l = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_leader_new(&o, &l, &d), 0);
    assert_int_equal(d.n, 0);
    return l;
}

/* The stored Lease's spec field (a string, or the integer as text). */
static const char *spec_of(struct env *e, const char *field, char *buf, size_t len)
{
    json_t *obj = NULL;
    assert_int_equal(gs_store_get(e->store, KEY, &obj, NULL), 0);
    json_t *v = json_object_get(json_object_get(obj, "spec"), field);
    if (json_is_string(v)) snprintf(buf, len, "%s", json_string_value(v));
    else if (json_is_integer(v)) snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else snprintf(buf, len, "<none>");
    json_decref(obj);
    return buf;
}

/*--- Tests ---*/

static void two_electors_one_leads(void **state)
{
    struct env *e = *state;
    struct gs_leader *a = elector(e, "a", NULL), *b = elector(e, "b", NULL);
    char buf[64];
    assert_true(gs_leader_tick(a));
    assert_false(gs_leader_tick(b));
    assert_true(gs_leader_is_leader(a));
    assert_false(gs_leader_is_leader(b));
    assert_true(gs_leader_may_write(a));
    assert_false(gs_leader_may_write(b));
    assert_string_equal(spec_of(e, "holderIdentity", buf, sizeof buf), "a");
    assert_string_equal(spec_of(e, "leaseDurationSeconds", buf, sizeof buf), "15");
    assert_string_equal(spec_of(e, "leaseTransitions", buf, sizeof buf), "0");
    assert_string_equal(spec_of(e, "renewTime", buf, sizeof buf), "2023-11-14T22:13:20.000000Z");
    assert_string_equal(spec_of(e, "acquireTime", buf, sizeof buf), "2023-11-14T22:13:20.000000Z");
    /* Renewals move renewTime only; the follower keeps following. */
    for (int i = 0; i < 5; i++) {
        gs_clock_advance(&e->clock, 2 * S);
        assert_true(gs_leader_tick(a));
        assert_false(gs_leader_tick(b));
    }
    assert_string_equal(spec_of(e, "renewTime", buf, sizeof buf), "2023-11-14T22:13:30.000000Z");
    assert_string_equal(spec_of(e, "acquireTime", buf, sizeof buf), "2023-11-14T22:13:20.000000Z");
    assert_string_equal(spec_of(e, "leaseTransitions", buf, sizeof buf), "0");
    struct gs_leader_stats st;
    gs_leader_stats(b, &st);
    assert_string_equal(st.holder, "a");
    assert_false(st.leading);
    assert_int_equal(e->changes[1], 1);
    gs_leader_free(b);
    gs_leader_free(a);
}

static void takeover_only_after_lease_duration(void **state)
{
    struct env *e = *state;
    struct gs_leader *a = elector(e, "a", NULL), *b = elector(e, "b", NULL);
    char buf[64];
    assert_true(gs_leader_tick(a));
    gs_clock_advance(&e->clock, 1 * S);
    assert_false(gs_leader_tick(b)); /* b first sees a's record at t = 1 s */
    /* a falls silent. The remote renewTime says t = 0; b counts from what it saw, at 1 s. */
    gs_clock_advance(&e->clock, 15 * S - 1); /* t = 16 s - 1 ns: 15 s after the write, not after b's sight */
    assert_false(gs_leader_tick(b));
    assert_false(gs_leader_may_write(a)); /* a's renew deadline (10 s) has long passed */
    assert_true(gs_leader_is_leader(a));  /* ... though it has not noticed yet */
    gs_clock_advance(&e->clock, 1);
    assert_true(gs_leader_tick(b));
    assert_string_equal(spec_of(e, "holderIdentity", buf, sizeof buf), "b");
    assert_string_equal(spec_of(e, "leaseTransitions", buf, sizeof buf), "1");
    assert_string_equal(spec_of(e, "acquireTime", buf, sizeof buf), "2023-11-14T22:13:36.000000Z");
    /* a comes back: it steps down and follows. */
    assert_false(gs_leader_tick(a));
    assert_false(gs_leader_is_leader(a));
    struct gs_leader_stats st;
    gs_leader_stats(a, &st);
    assert_int_equal(st.lost, 1);
    assert_string_equal(st.holder, "b");
    assert_int_equal(st.lease_transitions, 1);
    assert_int_equal(e->changes[0], 1);
    gs_leader_free(a);
    gs_leader_free(b);
}

static void b_takes_it(void *ctx)
{
    struct gs_leader *b = ctx;
    assert_true(gs_leader_tick(b));
}

static void lost_race_gives_no_leadership(void **state)
{
    struct env *e = *state;
    struct gs_leader *a = elector(e, "a", &e->wrap.base), *b = elector(e, "b", NULL);
    /* Both see the lease absent; b's create lands between a's read and a's write. */
    e->wrap.between = b_takes_it;
    e->wrap.between_ctx = b;
    assert_false(gs_leader_tick(a));
    assert_false(gs_leader_is_leader(a));
    assert_false(gs_leader_may_write(a));
    assert_true(gs_leader_is_leader(b));
    char buf[64];
    assert_string_equal(spec_of(e, "holderIdentity", buf, sizeof buf), "b");
    /* Again on an existing lease: a's renewal after b took an expired lease from it. */
    gs_clock_advance(&e->clock, 2 * S);
    assert_false(gs_leader_tick(a)); /* a now sees b's record: valid, not ours */
    gs_clock_advance(&e->clock, 20 * S); /* b silent: expired for a too */
    e->wrap.between = b_takes_it;       /* ... but b renews between a's read and write */
    assert_false(gs_leader_tick(a));
    assert_false(gs_leader_is_leader(a));
    assert_true(gs_leader_is_leader(b));
    assert_string_equal(spec_of(e, "holderIdentity", buf, sizeof buf), "b");
    assert_string_equal(spec_of(e, "leaseTransitions", buf, sizeof buf), "0");
    assert_int_equal(e->changes[1], 1); /* b once; a never */
    gs_leader_free(a);
    gs_leader_free(b);
}

static void may_write_ends_at_the_renew_deadline(void **state)
{
    struct env *e = *state;
    struct gs_leader *a = elector(e, "a", &e->wrap.base);
    assert_true(gs_leader_tick(a));
    gs_clock_advance(&e->clock, 2 * S);
    assert_true(gs_leader_tick(a)); /* renewed at t = 2 s */
    /* The API server stops answering. */
    for (int i = 0; i < 4; i++) {
        gs_clock_advance(&e->clock, 2 * S);
        e->wrap.fail_next = GS_EIO;
        assert_true(gs_leader_tick(a)); /* still within the deadline: still leading */
        assert_true(gs_leader_may_write(a));
    }
    gs_clock_advance(&e->clock, 2 * S - 1); /* t = 12 s - 1 ns */
    assert_true(gs_leader_may_write(a));
    gs_clock_advance(&e->clock, 1); /* t = 12 s = last renewal + renew deadline */
    assert_false(gs_leader_may_write(a)); /* before any tick notices */
    e->wrap.fail_next = GS_EIO;
    assert_false(gs_leader_tick(a));
    struct gs_leader_stats st;
    gs_leader_stats(a, &st);
    assert_int_equal(st.renew_failures, 4); /* the failure after the deadline is no renewal */
    assert_int_equal(st.lost, 1);
    /* The lease is still ours when the server answers again: leading again. */
    assert_true(gs_leader_tick(a));
    assert_true(gs_leader_may_write(a));
    char buf[64];
    assert_string_equal(spec_of(e, "leaseTransitions", buf, sizeof buf), "0");
    gs_leader_free(a);
}

static void release_on_stop(void **state)
{
    struct env *e = *state;
    struct gs_leader *a = elector(e, "a", NULL), *b = elector(e, "b", NULL);
    char buf[64];
    assert_true(gs_leader_tick(a));
    assert_false(gs_leader_tick(b));
    gs_clock_advance(&e->clock, 1 * S);
    gs_leader_stop(a);
    assert_false(gs_leader_is_leader(a));
    assert_false(gs_leader_may_write(a));
    assert_string_equal(spec_of(e, "holderIdentity", buf, sizeof buf), "");
    assert_string_equal(spec_of(e, "leaseDurationSeconds", buf, sizeof buf), "1");
    assert_string_equal(spec_of(e, "leaseTransitions", buf, sizeof buf), "0");
    assert_string_equal(spec_of(e, "renewTime", buf, sizeof buf), "2023-11-14T22:13:21.000000Z");
    gs_leader_stop(a); /* idempotent: nothing more is written */
    assert_string_equal(spec_of(e, "renewTime", buf, sizeof buf), "2023-11-14T22:13:21.000000Z");
    /* b takes it at once, not after 15 s. */
    assert_true(gs_leader_tick(b));
    assert_string_equal(spec_of(e, "holderIdentity", buf, sizeof buf), "b");
    assert_string_equal(spec_of(e, "leaseTransitions", buf, sizeof buf), "1");
    assert_string_equal(spec_of(e, "leaseDurationSeconds", buf, sizeof buf), "15");
    /* A release by one that no longer holds the lease leaves it alone. */
    gs_leader_release(a);
    assert_string_equal(spec_of(e, "holderIdentity", buf, sizeof buf), "b");
    gs_leader_free(a);
    gs_leader_free(b);
}

static void bad_options_are_named(void **state)
{
    struct env *e = *state;
    struct {
        struct gs_leader_opts o;
        const char *path, *msg;
    } cases[] = {
        {{.ns = "kube-system", .name = "g", .identity = "a", .renew_deadline_ns = 20 * S}, "renewDeadline",
         "20.000s: must be less than the lease duration (15.000s)"},
        {{.ns = "kube-system", .name = "g", .identity = "a", .renew_deadline_ns = 2 * S, .retry_period_ns = 2 * S},
         "renewDeadline", "2.000s: must be more than 1.2 x the retry period (2.000s)"},
        {{.ns = "kube-system", .name = "g", .identity = "a", .lease_duration_ns = 500 * MS,
          .renew_deadline_ns = 400 * MS, .retry_period_ns = 100 * MS},
         "leaseDuration", "0.500s: must be at least 1s"},
        {{.ns = "Kube_System", .name = "g", .identity = "a"}, "namespace", "\"Kube_System\": want a namespace name"},
        {{.ns = "kube-system", .name = "g/x", .identity = "a"}, "name", "\"g/x\": want a Lease name"},
        {{.ns = "kube-system", .name = "g", .identity = ""}, "identity", "must be 1 to 250 characters"},
        {{.ns = "kube-system", .name = "g", .identity = "a", .retry_period_ns = -1}, "retryPeriod",
         "must be more than 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cases[i].o.source = e->src;
        struct gs_leader *l = NULL;
        struct gs_diags d = {0};
        assert_int_equal(gs_leader_new(&cases[i].o, &l, &d), GS_EINVAL);
        assert_null(l);
        bool found = false;
        for (size_t k = 0; k < d.n; k++)
            if (!strcmp(d.v[k].path, cases[i].path) && strstr(d.v[k].msg, cases[i].msg)) found = true;
        if (!found) fail_msg("case %zu: no \"%s: %s\" (first: %s: %s)", i, cases[i].path, cases[i].msg,
                             d.n ? d.v[0].path : "-", d.n ? d.v[0].msg : "-");
        gs_diags_free(&d);
    }
}

static void thread_on_the_real_clock(void **state)
{
    struct env *e = *state;
    struct gs_leader_opts o = {.source = e->src, .ns = "kube-system", .name = "gpusched", .identity = "t",
                               .lease_duration_ns = 1 * S, .renew_deadline_ns = 600 * MS, .retry_period_ns = 50 * MS,
                               .on_change = on_change, .ctx = e};
    struct gs_leader *l = NULL;
    assert_int_equal(gs_leader_new(&o, &l, NULL), 0);
    assert_int_equal(gs_leader_start(l), 0);
    for (int i = 0; i < 200 && !gs_leader_is_leader(l); i++) usleep(10000);
    assert_true(gs_leader_is_leader(l));
    usleep(200000); /* a few renewals */
    assert_true(gs_leader_may_write(l));
    gs_leader_free(l); /* stops the thread, releases */
    char buf[64];
    assert_string_equal(spec_of(e, "holderIdentity", buf, sizeof buf), "");
    assert_int_equal(e->changes[1], 1);
    assert_int_equal(e->changes[0], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(two_electors_one_leads, setup, teardown),
        cmocka_unit_test_setup_teardown(takeover_only_after_lease_duration, setup, teardown),
        cmocka_unit_test_setup_teardown(lost_race_gives_no_leadership, setup, teardown),
        cmocka_unit_test_setup_teardown(may_write_ends_at_the_renew_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(release_on_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_options_are_named, setup, teardown),
        cmocka_unit_test_setup_teardown(thread_on_the_real_clock, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
