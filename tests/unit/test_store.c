/*
 * test_store.c - the SQLite store: versions, conditional writes, atomic
 * read-modify-write, prefix lists, the change stream (order, prefixes,
 * resume, overflow -> GS_ERANGE), persistence across reopen, and
 * concurrent writers getting distinct, gap-free versions, batches and
 * group-committed read-modify-writes; the default ring growing while its
 * events are young, and lists running beside gets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/store.h"
#include "tmpdir_fixture.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct env {
    char dir[64];
    struct gs_store *s;
};

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/gs-store-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    struct gs_store_opts o = {.dir = e->dir, .ring_events = 8};
    assert_int_equal(gs_store_open_sqlite(&o, &e->s), 0);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gs_store_close(e->s);
    fx_rm_tree(e->dir);
    free(e);
    return 0;
}

static json_t *obj(const char *name, const char *val)
{
    return json_pack("{s:s, s:{s:s}, s:s}", "kind", "Thing", "metadata", "name", name, "v", val);
}

static const char *v_of(const json_t *o)
{
    return json_string_value(json_object_get(o, "v"));
}

static void versions_and_conflicts(void **state)
{
    struct env *e = *state;
    json_t *a = obj("a", "1");
    int64_t rv1 = 0, rv2 = 0, rv3 = 0;
    assert_int_equal(gs_store_create(e->s, "things/a", a, &rv1), 0);
    assert_int_equal(rv1, 1);
    assert_int_equal(gs_store_obj_rv(a), 1); /* written into metadata.resourceVersion as text */
    assert_string_equal(json_string_value(json_object_get(json_object_get(a, "metadata"), "resourceVersion")), "1");
    assert_int_equal(gs_store_create(e->s, "things/a", a, NULL), GS_EEXIST);
    json_object_set_new(a, "v", json_string("2"));
    assert_int_equal(gs_store_update(e->s, "things/a", a, rv1, &rv2), 0);
    assert_true(rv2 > rv1);
    json_object_set_new(a, "v", json_string("3"));
    assert_int_equal(gs_store_update(e->s, "things/a", a, rv1, NULL), GS_ECONFLICT); /* stale version */
    assert_int_equal(gs_store_update(e->s, "things/zz", a, 0, NULL), GS_ENOENT);
    json_t *got = NULL;
    assert_int_equal(gs_store_get(e->s, "things/a", &got, &rv3), 0);
    assert_int_equal(rv3, rv2);
    assert_string_equal(v_of(got), "2");
    json_decref(got);
    assert_int_equal(gs_store_delete(e->s, "things/a", rv1, NULL, NULL), GS_ECONFLICT);
    json_t *old = NULL;
    int64_t rv4 = 0;
    assert_int_equal(gs_store_delete(e->s, "things/a", rv2, &old, &rv4), 0);
    assert_string_equal(v_of(old), "2");
    assert_int_equal(gs_store_obj_rv(old), rv4); /* the deletion's version */
    json_decref(old);
    assert_int_equal(gs_store_get(e->s, "things/a", &got, NULL), GS_ENOENT);
    assert_int_equal(gs_store_current_rv(e->s), rv4);
    json_decref(a);
}

static int bump(json_t *cur, json_t **out, void *arg)
{
    const char *want = arg;
    if (cur && !strcmp(v_of(cur), want)) return GS_STORE_UNCHANGED;
    *out = cur ? json_deep_copy(cur) : obj("m", "x");
    json_object_set_new(*out, "v", json_string(want));
    return 0;
}

static void mutate_is_atomic_and_skips_no_ops(void **state)
{
    struct env *e = *state;
    json_t *out = NULL;
    int64_t rv = 0;
    assert_int_equal(gs_store_mutate(e->s, "things/m", bump, "x", &out, &rv), 0); /* creates */
    assert_string_equal(v_of(out), "x");
    json_decref(out);
    int64_t before = gs_store_current_rv(e->s);
    assert_int_equal(gs_store_mutate(e->s, "things/m", bump, "x", &out, &rv), 0); /* no-op: nothing written */
    assert_int_equal(gs_store_current_rv(e->s), before);
    assert_int_equal(rv, before);
    json_decref(out);
    assert_int_equal(gs_store_mutate(e->s, "things/m", bump, "y", NULL, &rv), 0);
    assert_int_equal(rv, before + 1);
}

static int count(const char *key, json_t *o, void *arg)
{
    (void)o;
    (void)key;
    (*(int *)arg)++;
    return 0;
}

static void list_by_prefix(void **state)
{
    struct env *e = *state;
    const char *keys[] = {"pods/a/x", "pods/a/y", "pods/b/x", "podgroups.s/a/x", "nodes/n"};
    for (int i = 0; i < 5; i++) {
        json_t *o = obj(keys[i], "1");
        assert_int_equal(gs_store_create(e->s, keys[i], o, NULL), 0);
        json_decref(o);
    }
    int n = 0;
    int64_t rv = 0;
    assert_int_equal(gs_store_list(e->s, "pods/", count, &n, &rv), 0);
    assert_int_equal(n, 3);
    assert_int_equal(rv, 5);
    n = 0;
    assert_int_equal(gs_store_list(e->s, "pods/a/", count, &n, NULL), 0);
    assert_int_equal(n, 2);
    n = 0;
    assert_int_equal(gs_store_list(e->s, "", count, &n, NULL), 0);
    assert_int_equal(n, 5);
}

static void events_in_order_with_prefix_and_resume(void **state)
{
    struct env *e = *state;
    json_t *o = obj("p", "1");
    gs_store_create(e->s, "pods/p", o, NULL);
    gs_store_create(e->s, "nodes/n", o, NULL);
    gs_store_update(e->s, "pods/p", o, 0, NULL);
    gs_store_delete(e->s, "pods/p", 0, NULL, NULL);
    json_decref(o);
    struct gs_store_event *ev = NULL;
    size_t n = 0;
    int64_t after = 0;
    assert_int_equal(gs_store_events(e->s, &after, "pods/", 0, NULL, &ev, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(ev[0].type, GS_STORE_ADDED);
    assert_int_equal(ev[1].type, GS_STORE_MODIFIED);
    assert_int_equal(ev[2].type, GS_STORE_DELETED);
    assert_true(ev[0].rv < ev[1].rv && ev[1].rv < ev[2].rv);
    assert_non_null(strstr(ev[2].value, "\"resourceVersion\":\"4\""));
    assert_int_equal(after, 4); /* moved past the node event too */
    gs_store_events_free(ev, n);
    /* Nothing new: a short wait returns empty. */
    assert_int_equal(gs_store_events(e->s, &after, NULL, 10, NULL, &ev, &n), 0);
    assert_int_equal(n, 0);
    gs_store_events_free(ev, n);
    /* Overflow the ring (8 events): an old version must relist. */
    for (int i = 0; i < 10; i++) {
        char k[32];
        snprintf(k, sizeof k, "pods/q%d", i);
        json_t *x = obj(k, "1");
        gs_store_create(e->s, k, x, NULL);
        json_decref(x);
    }
    int64_t old = 1;
    assert_int_equal(gs_store_events(e->s, &old, NULL, 0, NULL, &ev, &n), GS_ERANGE);
    int64_t recent = gs_store_current_rv(e->s) - 2;
    assert_int_equal(gs_store_events(e->s, &recent, NULL, 0, NULL, &ev, &n), 0);
    assert_int_equal(n, 2);
    gs_store_events_free(ev, n);
}

static void *interrupter(void *arg)
{
    usleep(50000);
    gs_store_interrupt(arg);
    return NULL;
}

static void interrupt_wakes_waiters(void **state)
{
    struct env *e = *state;
    pthread_t t;
    pthread_create(&t, NULL, interrupter, e->s);
    struct gs_store_event *ev = NULL;
    size_t n = 0;
    int64_t after = gs_store_current_rv(e->s);
    assert_int_equal(gs_store_events(e->s, &after, NULL, 10000, NULL, &ev, &n), 0); /* returns long before 10 s */
    assert_int_equal(n, 0);
    pthread_join(t, NULL);
}

static void reopen_keeps_everything(void **state)
{
    struct env *e = *state;
    json_t *o = obj("k", "kept");
    int64_t rv = 0;
    assert_int_equal(gs_store_create(e->s, "things/k", o, &rv), 0);
    json_decref(o);
    gs_store_close(e->s);
    struct gs_store_opts so = {.dir = e->dir};
    assert_int_equal(gs_store_open_sqlite(&so, &e->s), 0);
    json_t *got = NULL;
    assert_int_equal(gs_store_get(e->s, "things/k", &got, NULL), 0);
    assert_string_equal(v_of(got), "kept");
    json_decref(got);
    assert_int_equal(gs_store_current_rv(e->s), rv); /* the counter survives */
    o = obj("k2", "1");
    int64_t rv2 = 0;
    assert_int_equal(gs_store_create(e->s, "things/k2", o, &rv2), 0);
    assert_int_equal(rv2, rv + 1);
    json_decref(o);
    struct gs_store_event *ev = NULL;
    size_t n = 0;
    int64_t before = rv - 1; /* history before the restart is gone */
    assert_int_equal(gs_store_events(e->s, &before, NULL, 0, NULL, &ev, &n), GS_ERANGE);
}

struct writer {
    struct gs_store *s;
    int id;
    int64_t rvs[100];
};

static void *write_many(void *arg)
{
    struct writer *w = arg;
    for (int i = 0; i < 100; i++) {
        char k[64];
        snprintf(k, sizeof k, "w/%d/%d", w->id, i);
        json_t *o = obj(k, "1");
        if (gs_store_create(w->s, k, o, &w->rvs[i])) w->rvs[i] = -1;
        json_decref(o);
    }
    return NULL;
}

/* Four threads of 100 writes each through fn: all 400 versions handed out once. */
static void run_writers(struct env *e, void *(*fn)(void *))
{
    struct writer w[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct writer){.s = e->s, .id = i};
        pthread_create(&t[i], NULL, fn, &w[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    char seen[401] = {0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 100; j++) {
            assert_true(w[i].rvs[j] >= 1 && w[i].rvs[j] <= 400);
            assert_false(seen[w[i].rvs[j]]);
            seen[w[i].rvs[j]] = 1;
        }
    assert_int_equal(gs_store_current_rv(e->s), 400);
}

static void concurrent_writers_get_distinct_versions(void **state)
{
    struct env *e = *state;
    run_writers(e, write_many);
}

/* A batch larger than one commit group (512 requests), beside single writers. */
struct big_batch {
    struct gs_store *s;
    int id;
    int err;
};

static void *write_big_batches(void *arg)
{
    struct big_batch *b = arg;
    enum { N = 700 };
    static char keys[2][N][32];
    struct gs_store_mut *m = calloc(N, sizeof *m);
    for (int round = 0; round < 2 && m; round++) {
        for (int i = 0; i < N; i++) {
            snprintf(keys[b->id][i], sizeof keys[b->id][i], "b/%d/%d", b->id, i);
            m[i] = (struct gs_store_mut){.key = keys[b->id][i], .fn = bump, .arg = round ? "y" : "x"};
        }
        if (gs_store_mutate_batch(b->s, m, N)) b->err = 1;
        for (int i = 0; i < N; i++) {
            if (m[i].err || m[i].rv <= 0) b->err = 1;
            json_decref(m[i].out);
        }
    }
    if (!m) b->err = 1;
    free(m);
    return NULL;
}

/* Single writers and batches over several groups at once: every request is
 * acknowledged with its own version and nothing waits forever (a commit
 * wakes the callers it finished and one more to lead the rest). */
static void batches_over_groups_beside_writers(void **state)
{
    struct env *e = *state;
    struct writer w[4];
    struct big_batch b[2];
    pthread_t t[6];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct writer){.s = e->s, .id = i};
        pthread_create(&t[i], NULL, write_many, &w[i]);
    }
    for (int i = 0; i < 2; i++) {
        b[i] = (struct big_batch){.s = e->s, .id = i};
        pthread_create(&t[4 + i], NULL, write_big_batches, &b[i]);
    }
    for (int i = 0; i < 6; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) assert_int_equal(b[i].err, 0);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 100; j++) assert_true(w[i].rvs[j] > 0);
    assert_int_equal(gs_store_current_rv(e->s), 400 + 2 * 2 * 700);
}

static int missing_only(json_t *cur, json_t **out, void *arg)
{
    (void)out;
    (void)arg;
    return cur ? GS_EEXIST : GS_ENOENT;
}

/* One batch: two writes to the same key see each other, a failing fn and a
 * no-op leave the rest alone, events come in version order, all is durable. */
static void batch_applies_in_order_and_persists(void **state)
{
    struct env *e = *state;
    assert_int_equal(gs_store_mutate(e->s, "things/a", bump, "x", NULL, NULL), 0);
    int64_t base = gs_store_current_rv(e->s);
    struct gs_store_mut m[4] = {
        {.key = "things/a", .fn = bump, .arg = "y"},
        {.key = "things/a", .fn = bump, .arg = "y"}, /* no-op after the first */
        {.key = "things/zz", .fn = missing_only},
        {.key = "things/b", .fn = bump, .arg = "z"},
    };
    assert_int_equal(gs_store_mutate_batch(e->s, m, 4), 0);
    assert_int_equal(m[0].err, 0);
    assert_int_equal(m[0].rv, base + 1);
    assert_int_equal(m[1].err, 0);
    assert_int_equal(m[1].rv, base + 1);
    assert_string_equal(v_of(m[1].out), "y");
    assert_int_equal(m[2].err, GS_ENOENT);
    assert_null(m[2].out);
    assert_int_equal(m[3].err, 0);
    assert_int_equal(m[3].rv, base + 2);
    assert_int_equal(gs_store_current_rv(e->s), base + 2);
    for (int i = 0; i < 4; i++) json_decref(m[i].out);
    int64_t after = base;
    struct gs_store_event *ev = NULL;
    size_t n = 0;
    assert_int_equal(gs_store_events(e->s, &after, NULL, 0, NULL, &ev, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(ev[0].key, "things/a");
    assert_int_equal(ev[0].type, GS_STORE_MODIFIED);
    assert_string_equal(ev[1].key, "things/b");
    assert_int_equal(ev[1].type, GS_STORE_ADDED);
    gs_store_events_free(ev, n);
    gs_store_close(e->s);
    struct gs_store_opts o = {.dir = e->dir, .ring_events = 8};
    assert_int_equal(gs_store_open_sqlite(&o, &e->s), 0);
    json_t *got = NULL;
    int64_t rv = 0;
    assert_int_equal(gs_store_get(e->s, "things/b", &got, &rv), 0);
    assert_int_equal(rv, base + 2);
    assert_string_equal(v_of(got), "z");
    json_decref(got);
    assert_int_equal(gs_store_current_rv(e->s), base + 2);
}

static void *mutate_many(void *arg)
{
    struct writer *w = arg;
    for (int i = 0; i < 100; i++) {
        char k[64], v[16];
        snprintf(k, sizeof k, "m/%d", i % 10);
        snprintf(v, sizeof v, "%d-%d", w->id, i);
        if (gs_store_mutate(w->s, k, bump, v, NULL, &w->rvs[i])) w->rvs[i] = -1;
    }
    return NULL;
}

/* Concurrent read-modify-writes share commits but still get one version each. */
static void concurrent_mutates_share_commits(void **state)
{
    struct env *e = *state;
    run_writers(e, mutate_many);
}

/* The default ring (ring_events 0) grows while its events are young: a
 * watcher 25,000 events behind still resumes; a ring of a given size does
 * not grow (the other tests' 8 events overflow). */
static void default_ring_grows_while_young(void **state)
{
    struct env *e = *state;
    gs_store_close(e->s);
    struct gs_store_opts o = {.dir = e->dir};
    assert_int_equal(gs_store_open_sqlite(&o, &e->s), 0);
    int64_t from = gs_store_current_rv(e->s);
    enum { N = 25000, BATCH = 500 };
    for (int i = 0; i < N; i += BATCH) {
        struct gs_store_mut m[BATCH];
        char keys[BATCH][32], vals[BATCH][16];
        for (int j = 0; j < BATCH; j++) {
            snprintf(keys[j], sizeof keys[j], "things/r%d", (i + j) % 100);
            snprintf(vals[j], sizeof vals[j], "%d", i + j); /* a change every time */
            m[j] = (struct gs_store_mut){.key = keys[j], .fn = bump, .arg = vals[j]};
        }
        assert_int_equal(gs_store_mutate_batch(e->s, m, BATCH), 0);
        for (int j = 0; j < BATCH; j++) {
            assert_int_equal(m[j].err, 0);
            json_decref(m[j].out);
        }
    }
    int64_t after = from;
    size_t seen = 0;
    for (;;) {
        struct gs_store_event *ev = NULL;
        size_t n = 0;
        assert_int_equal(gs_store_events(e->s, &after, NULL, 0, NULL, &ev, &n), 0);
        if (n) assert_int_equal(ev[0].rv, from + (int64_t)seen + 1); /* none skipped */
        seen += n;
        gs_store_events_free(ev, n);
        if (!n) break;
    }
    assert_int_equal(seen, N);
}

struct lister_arg {
    struct gs_store *s;
    int rows;
};

static int slow_row(const char *key, json_t *o, void *arg)
{
    (void)key, (void)o;
    ((struct lister_arg *)arg)->rows++;
    usleep(20000);
    return 0;
}

static void *list_slowly(void *arg)
{
    struct lister_arg *a = arg;
    int64_t rv;
    gs_store_list(a->s, "things/", slow_row, a, &rv);
    return NULL;
}

/* A get does not wait for a list in progress (it has a connection of its own). */
static void get_beside_a_slow_list(void **state)
{
    struct env *e = *state;
    for (int i = 0; i < 20; i++) {
        char k[32];
        snprintf(k, sizeof k, "things/l%02d", i);
        json_t *o = obj(k, "v");
        assert_int_equal(gs_store_create(e->s, k, o, NULL), 0);
        json_decref(o);
    }
    struct lister_arg a = {e->s, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, list_slowly, &a), 0);
    usleep(50000); /* the list is under way: 20 rows x 20 ms */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    json_t *got = NULL;
    assert_int_equal(gs_store_get(e->s, "things/l05", &got, NULL), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    json_decref(got);
    double waited = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(waited < 0.2); /* behind the list it would be about 0.35 s */
    pthread_join(th, NULL);
    assert_int_equal(a.rows, 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(versions_and_conflicts, setup, teardown),
        cmocka_unit_test_setup_teardown(mutate_is_atomic_and_skips_no_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(list_by_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(events_in_order_with_prefix_and_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(interrupt_wakes_waiters, setup, teardown),
        cmocka_unit_test_setup_teardown(reopen_keeps_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(concurrent_writers_get_distinct_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(batches_over_groups_beside_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(batch_applies_in_order_and_persists, setup, teardown),
        cmocka_unit_test_setup_teardown(concurrent_mutates_share_commits, setup, teardown),
        cmocka_unit_test_setup_teardown(default_ring_grows_while_young, setup, teardown),
        cmocka_unit_test_setup_teardown(get_beside_a_slow_list, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
