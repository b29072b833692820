/*
 * test_store_selfcheck.c - the store's self-checks (store.h "Self-checks"):
 * the high-water mark file's parser and its error messages; a store whose
 * WAL was truncated after a crash refused at open with the story, then
 * started with accept_regression numbering above every version handed out
 * (a watch from before gets GS_ERANGE); no false alarm on an intact crash
 * image; checkpoints by commit count and by idle time keep store.db current
 * and a clean close leaves no WAL; a row that is not JSON skipped in lists,
 * counted, and GS_EPARSE for itself only; health false while writes fail
 * (a real file-size limit) and true again after a probe write.
 *
 * A "crash image" is a copy of store.db, store.db-wal and store.hwm taken
 * while the store is open and idle: what kill -9 leaves on disk.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/store.h"
#include "tmpdir_fixture.h"

#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct env {
    char dir[64], copy[64];
    struct gs_store *s;
};

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/gs-selfcheck-XXXXXX");
    snprintf(e->copy, sizeof e->copy, "/tmp/gs-selfcheck-copy-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    assert_non_null(mkdtemp(e->copy));
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gs_store_close(e->s);
    fx_rm_tree(e->dir);
    fx_rm_tree(e->copy);
    free(e);
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&t, NULL);
}

static json_t *obj(int i)
{
    char name[32];
    snprintf(name, sizeof name, "o%04d", i);
    return json_pack("{s:s, s:{s:s}}", "kind", "Thing", "metadata", "name", name);
}

static void put_many(struct gs_store *s, int from, int n)
{
    for (int i = from; i < from + n; i++) {
        char key[64];
        snprintf(key, sizeof key, "/things/o%04d", i);
        json_t *o = obj(i);
        assert_int_equal(gs_store_create(s, key, o, NULL), 0);
        json_decref(o);
    }
}

static void copy_file(const char *from_dir, const char *to_dir, const char *name)
{
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/%s", from_dir, name);
    snprintf(b, sizeof b, "%s/%s", to_dir, name);
    FILE *in = fopen(a, "rb"), *out = fopen(b, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

static long file_size(const char *dir, const char *name)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    return stat(p, &st) ? -1 : (long)st.st_size;
}

/* Waits (up to 5 s: fsyncs on a busy disk) until store.hwm records rv as committed. */
static void wait_recorded(const char *dir, int64_t rv)
{
    char p[128], why[256];
    snprintf(p, sizeof p, "%s/store.hwm", dir);
    struct gs_store_hwm h = {0};
    for (int i = 0; i < 100; i++) {
        if (gs_store_hwm_read(p, &h, why, sizeof why) == 0 && h.committed >= rv) return;
        sleep_ms(50);
    }
    fail_msg("store.hwm still records %lld, not %lld", (long long)h.committed, (long long)rv);
}

static int count_one(const char *key, json_t *o, void *arg)
{
    (void)key, (void)o;
    ++*(int *)arg;
    return 0;
}

static void hwm_parser_messages(void **state)
{
    (void)state;
    struct gs_store_hwm h;
    char why[256];
    const char ok[] = "# comment\ncommitted 300\nreserved 10300\n";
    assert_int_equal(gs_store_hwm_parse(ok, strlen(ok), &h, why, sizeof why), 0);
    assert_int_equal(h.committed, 300);
    assert_int_equal(h.reserved, 10300);
    char buf[256];
    int n = gs_store_hwm_format(&h, buf, sizeof buf);
    assert_true(n > 0);
    struct gs_store_hwm back;
    assert_int_equal(gs_store_hwm_parse(buf, (size_t)n, &back, why, sizeof why), 0);
    assert_int_equal(back.committed, 300);
    assert_int_equal(back.reserved, 10300);

    const struct {
        const char *text, *msg;
    } bad[] = {
        {"committed 3\nreserved x\n", "line 2: want \"committed N\" or \"reserved N\" with N a decimal integer"},
        {"committed -3\nreserved 5\n", "line 1: want"},
        {"committed 3\n", "missing the \"reserved\" line"},
        {"reserved 3\n", "missing the \"committed\" line"},
        {"committed 9\nreserved 5\n", "reserved 5 is below committed 9"},
        {"committed 1\ncommitted 2\nreserved 5\n", "line 2: unknown or repeated key \"committed\""},
        {"colour 1\n", "line 1: unknown or repeated key \"colour\""},
        {"committed 99999999999999999999\nreserved 1\n", "line 1: want"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = 0;
        assert_int_equal(gs_store_hwm_parse(bad[i].text, strlen(bad[i].text), &h, why, sizeof why), GS_EPARSE);
        if (!strstr(why, bad[i].msg)) fail_msg("%s: got \"%s\", want \"%s\"", bad[i].text, why, bad[i].msg);
    }
}

/* No checkpoint while the test runs; the committed version recorded every 20 ms. */
static const struct gs_store_opts quiet = {.record_ms = 20, .checkpoint_commits = 1000000,
                                           .checkpoint_idle_ms = 1000000};

static void truncated_wal_refused_then_accepted(void **state)
{
    struct env *e = *state;
    struct gs_store_opts o = quiet;
    o.dir = e->dir;
    assert_int_equal(gs_store_open_sqlite(&o, &e->s), 0);
    put_many(e->s, 0, 120);
    assert_int_equal(gs_store_current_rv(e->s), 120);
    wait_recorded(e->dir, 120);
    copy_file(e->dir, e->copy, "store.db");
    copy_file(e->dir, e->copy, "store.db-wal");
    copy_file(e->dir, e->copy, "store.hwm");
    long wal = file_size(e->copy, "store.db-wal");
    assert_true(wal > 100000); /* everything is still in the WAL */
    char p[128];
    snprintf(p, sizeof p, "%s/store.db-wal", e->copy);
    assert_int_equal(truncate(p, wal / 2), 0);

    struct gs_diags d = {0};
    struct gs_store *c = NULL;
    struct gs_store_opts co = {.dir = e->copy, .diags = &d};
    assert_int_equal(gs_store_open_sqlite(&co, &c), GS_ESTATE);
    assert_null(c);
    assert_int_equal(d.n, 1);
    const char *m = d.v[0].msg;
    if (!strstr(m, "but resourceVersion 120 was acknowledged before") || !strstr(m, "store.db-wal was truncated") ||
        !strstr(m, "Restore the data directory from a backup") || !strstr(m, "--accept-store-regression") ||
        !strstr(m, "numbering new writes above 10000"))
        fail_msg("refusal message: %s", m);
    gs_diags_free(&d);

    co.accept_regression = true;
    assert_int_equal(gs_store_open_sqlite(&co, &c), 0);
    int n = 0;
    int64_t rv = 0;
    assert_int_equal(gs_store_list(c, "/things/", count_one, &n, &rv), 0);
    assert_true(n < 120); /* what the truncation took is gone ... */
    assert_int_equal(rv, 10000); /* ... and the versions go on above every one handed out */
    int64_t nrv = 0;
    json_t *o2 = obj(999);
    assert_int_equal(gs_store_create(c, "/things/o0999", o2, &nrv), 0);
    json_decref(o2);
    assert_int_equal(nrv, 10001);
    int64_t after = 120; /* a watcher that had seen version 120 */
    struct gs_store_event *evs = NULL;
    size_t nev = 0;
    assert_int_equal(gs_store_events(c, &after, NULL, 0, NULL, &evs, &nev), GS_ERANGE);
    gs_store_close(c);
    /* Accepted once: later starts are normal. */
    co.accept_regression = false;
    assert_int_equal(gs_store_open_sqlite(&co, &c), 0);
    assert_int_equal(gs_store_current_rv(c), 10001);
    gs_store_close(c);
}

static void intact_crash_image_opens(void **state)
{
    struct env *e = *state;
    struct gs_store_opts o = quiet;
    o.dir = e->dir;
    assert_int_equal(gs_store_open_sqlite(&o, &e->s), 0);
    put_many(e->s, 0, 60);
    wait_recorded(e->dir, 60);
    put_many(e->s, 60, 5); /* committed after the last record: still fine */
    copy_file(e->dir, e->copy, "store.db");
    copy_file(e->dir, e->copy, "store.db-wal");
    copy_file(e->dir, e->copy, "store.hwm");
    struct gs_store *c = NULL;
    struct gs_store_opts co = {.dir = e->copy};
    assert_int_equal(gs_store_open_sqlite(&co, &c), 0);
    assert_int_equal(gs_store_current_rv(c), 65);
    gs_store_close(c);
    /* An older store.db put back (the WAL and all): refused too. */
    gs_store_close(e->s);
    e->s = NULL;
    char p[128];
    snprintf(p, sizeof p, "%s/store.db", e->copy);
    remove(p);
    snprintf(p, sizeof p, "%s/store.db-wal", e->copy);
    remove(p);
    copy_file(e->dir, e->copy, "store.hwm"); /* says 65 */
    struct gs_diags d = {0};
    co.diags = &d;
    assert_int_equal(gs_store_open_sqlite(&co, &c), GS_ESTATE);
    assert_non_null(strstr(d.v[0].msg, "the store is at resourceVersion 0 but resourceVersion 65"));
    gs_diags_free(&d);
}

static void unreadable_hwm_refused(void **state)
{
    struct env *e = *state;
    char p[128];
    snprintf(p, sizeof p, "%s/store.hwm", e->dir);
    FILE *f = fopen(p, "w");
    fputs("committed 12\nreserved banana\n", f);
    fclose(f);
    struct gs_diags d = {0};
    struct gs_store_opts o = {.dir = e->dir, .diags = &d};
    assert_int_equal(gs_store_open_sqlite(&o, &e->s), GS_EPARSE);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].path, "store.hwm"));
    if (!strstr(d.v[0].msg, "line 2: want") || !strstr(d.v[0].msg, "remove this file to start without the check"))
        fail_msg("message: %s", d.v[0].msg);
    gs_diags_free(&d);
}

static int64_t db_only_rv(struct env *e)
{
    fx_rm_tree(e->copy);
    assert_int_equal(mkdir(e->copy, 0700), 0);
    copy_file(e->dir, e->copy, "store.db"); /* the data file alone: what checkpoints put there */
    struct gs_store *c = NULL;
    struct gs_store_opts co = {.dir = e->copy};
    assert_int_equal(gs_store_open_sqlite(&co, &c), 0);
    int64_t rv = gs_store_current_rv(c);
    gs_store_close(c);
    return rv;
}

static void checkpoints_keep_the_data_file_current(void **state)
{
    struct env *e = *state;
    struct gs_store_opts o = {.dir = e->dir, .record_ms = 20, .checkpoint_commits = 40,
                              .checkpoint_idle_ms = 1000000};
    assert_int_equal(gs_store_open_sqlite(&o, &e->s), 0);
    put_many(e->s, 0, 200);
    /* at most one count of commits left in the WAL (polled: the checkpointer's fsyncs take their time) */
    int64_t drv = 0;
    for (int i = 0; i < 100 && (drv = db_only_rv(e)) < 160; i++) sleep_ms(50);
    if (drv < 160) fail_msg("store.db alone is at %lld", (long long)drv);
    gs_store_close(e->s);

    o.checkpoint_commits = 1000000; /* now only the idle rule */
    o.checkpoint_idle_ms = 100;
    assert_int_equal(gs_store_open_sqlite(&o, &e->s), 0);
    put_many(e->s, 200, 30);
    for (int i = 0; i < 100 && (drv = db_only_rv(e)) < 230; i++) sleep_ms(50);
    assert_int_equal(drv, 230);

    gs_store_close(e->s); /* a clean close: no WAL left */
    e->s = NULL;
    long wal = file_size(e->dir, "store.db-wal");
    assert_true(wal <= 0);
    char p[128];
    snprintf(p, sizeof p, "%s/store.hwm", e->dir);
    struct gs_store_hwm h;
    char why[256];
    assert_int_equal(gs_store_hwm_read(p, &h, why, sizeof why), 0);
    assert_int_equal(h.committed, 230);
}

static void corrupt_row_is_skipped_and_named(void **state)
{
    struct env *e = *state;
    struct gs_store_opts o = {.dir = e->dir};
    assert_int_equal(gs_store_open_sqlite(&o, &e->s), 0);
    put_many(e->s, 0, 3);
    char p[128];
    snprintf(p, sizeof p, "%s/store.db", e->dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    assert_int_equal(sqlite3_exec(db, "UPDATE objects SET value = '{\"kind\": broken' WHERE key = '/things/o0001'",
                                  NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    int n = 0;
    assert_int_equal(gs_store_list(e->s, "/things/", count_one, &n, NULL), 0);
    assert_int_equal(n, 2);
    struct gs_store_health h;
    gs_store_health(e->s, false, &h);
    assert_int_equal(h.corrupt, 1);
    assert_true(h.writable);
    json_t *got = NULL;
    assert_int_equal(gs_store_get(e->s, "/things/o0001", &got, NULL), GS_EPARSE);
    assert_null(got);
    assert_int_equal(gs_store_get(e->s, "/things/o0002", &got, NULL), 0);
    json_decref(got);
    json_t *x = obj(1);
    assert_int_equal(gs_store_update(e->s, "/things/o0001", x, 0, NULL), GS_EPARSE);
    json_decref(x);
    put_many(e->s, 3, 1); /* other writes go on */
    n = 0;
    assert_int_equal(gs_store_list(e->s, "/things/", count_one, &n, NULL), 0);
    assert_int_equal(n, 3);
    gs_store_health(e->s, false, &h);
    assert_int_equal(h.corrupt, 1); /* counted once, however often it is met */
}

static void health_follows_failing_writes(void **state)
{
    struct env *e = *state;
    struct gs_store_opts o = {.dir = e->dir};
    assert_int_equal(gs_store_open_sqlite(&o, &e->s), 0);
    put_many(e->s, 0, 2);
    struct gs_store_health h;
    gs_store_health(e->s, true, &h);
    assert_true(h.writable);
    /* A full disk, for real: no file may grow past 1 byte (EFBIG instead of SIGXFSZ). */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, tiny;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    tiny = (struct rlimit){1, old.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &tiny), 0);
    json_t *x = obj(7);
    int err = gs_store_create(e->s, "/things/o0007", x, NULL);
    gs_store_health(e->s, true, &h); /* the probe fails as well */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_int_equal(err, GS_EIO);
    assert_false(h.writable);
    if (!strstr(h.why, "store writes are failing: ")) fail_msg("why: %s", h.why);
    gs_store_health(e->s, false, &h); /* no probe: still the last word */
    assert_false(h.writable);
    gs_store_health(e->s, true, &h); /* the probe goes through now */
    assert_true(h.writable);
    assert_string_equal(h.why, "");
    assert_int_equal(gs_store_create(e->s, "/things/o0007", x, NULL), 0);
    json_decref(x);
    assert_int_equal(gs_store_current_rv(e->s), 3); /* the probe took no version */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hwm_parser_messages),
        cmocka_unit_test_setup_teardown(truncated_wal_refused_then_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(intact_crash_image_opens, setup, teardown),
        cmocka_unit_test_setup_teardown(unreadable_hwm_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(checkpoints_keep_the_data_file_current, setup, teardown),
        cmocka_unit_test_setup_teardown(corrupt_row_is_skipped_and_named, setup, teardown),
        cmocka_unit_test_setup_teardown(health_follows_failing_writes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
