/*
 * test_replica.c - one leader among server replicas (control/replica.h) on
 * a fake clock over one scratch store: the leader-only loops start on the
 * replica that wins the Lease and on no other; the fence follows the
 * Lease's version at every renewal and is closed while following; a leader
 * that falls silent is replaced only after the lease duration, and stops
 * its loops (fence closed first) when it notices; a failed start is tried
 * again; freeing releases the Lease so the other takes over at once; flag
 * errors name the server's flags; /metrics and /readyz texts. Then a real
 * server (gs_server with leader_elect) on the real clock: it leads, writes
 * the Lease and runs its loops.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/replica.h"
#include "control/server.h"
#include "control/store.h"
#include "govern/metrics.h"
#include "informer/source.h"
#include "kube/leader.h"
#include "tmpdir_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define S GS_NS_PER_SEC

struct side {
    int starts, stops, fence_calls;
    int fail_starts; /* this many starts fail first */
    int64_t fence;
    bool running;
    char order[64]; /* 'F' fence closed, 'S' stop, 's' start */
    size_t norder;
};

static int s_start(void *ctx)
{
    struct side *x = ctx;
    x->starts++;
    if (x->fail_starts > 0) {
        x->fail_starts--;
        return GS_EIO;
    }
    x->running = true;
    if (x->norder < sizeof x->order - 1) x->order[x->norder++] = 's';
    return 0;
}

static void s_stop(void *ctx)
{
    struct side *x = ctx;
    x->stops++;
    x->running = false;
    if (x->norder < sizeof x->order - 1) x->order[x->norder++] = 'S';
}

static int s_fence(void *ctx, const char *key, int64_t rv)
{
    struct side *x = ctx;
    assert_string_equal(key, GS_REPLICA_LEASE_KEY);
    x->fence_calls++;
    x->fence = rv;
    if (rv == GS_REPLICA_FENCE_CLOSED && x->norder < sizeof x->order - 1) x->order[x->norder++] = 'F';
    return 0;
}

struct env {
    char dir[64];
    struct gs_store *store;
    struct gs_source *src;
    struct gs_clock clock;
    struct side sa, sb;
    struct gs_replica *a, *b;
};

static struct gs_replica *make(struct env *e, const char *id, struct side *x)
{
    struct gs_replica_opts o = {.lease_source = e->src, .identity = id, .clock = &e->clock, .set_fence = s_fence,
                                .start = s_start, .stop = s_stop, .ctx = x};
    struct gs_replica *r = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_replica_new(&o, &r, &d), 0);
    assert_int_equal(d.n, 0);
    gs_diags_free(&d);
    return r;
}

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/gs-replica-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    struct gs_store_opts so = {.dir = e->dir};
    assert_int_equal(gs_store_open_sqlite(&so, &e->store), 0);
    assert_int_equal(gs_source_local_new(e->store, &e->src), 0);
    gs_clock_init_sim(&e->clock, 1700000000LL * S);
    e->a = make(e, "replica-a", &e->sa);
    e->b = make(e, "replica-b", &e->sb);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gs_replica_free(e->a);
    gs_replica_free(e->b);
    gs_source_free(e->src);
    gs_store_close(e->store);
    fx_rm_tree(e->dir);
    free(e);
    return 0;
}

/* The Lease's resourceVersion and holder as stored. */
static int64_t lease_rv(struct env *e, char *holder, size_t len)
{
    json_t *obj = NULL;
    int64_t rv = 0;
    assert_int_equal(gs_store_get(e->store, GS_REPLICA_LEASE_KEY, &obj, &rv), 0);
    const char *h = json_string_value(json_object_get(json_object_get(obj, "spec"), "holderIdentity"));
    if (holder) snprintf(holder, len, "%s", h ? h : "");
    json_decref(obj);
    return rv;
}

static void test_one_leader_runs_the_loops(void **state)
{
    struct env *e = *state;
    /* Both start closed: a follower's handle writes nothing. */
    assert_int_equal(e->sa.fence, GS_REPLICA_FENCE_CLOSED);
    assert_int_equal(e->sb.fence, GS_REPLICA_FENCE_CLOSED);
    assert_true(gs_replica_tick(e->a));
    assert_false(gs_replica_tick(e->b));
    char holder[64];
    int64_t rv = lease_rv(e, holder, sizeof holder);
    assert_string_equal(holder, "replica-a");
    assert_int_equal(e->sa.starts, 1);
    assert_true(e->sa.running);
    assert_int_equal(e->sb.starts, 0);
    assert_int_equal(e->sa.fence, rv); /* the fence is the Lease at the acquiring write */
    assert_int_equal(e->sb.fence, GS_REPLICA_FENCE_CLOSED);
    assert_true(gs_replica_may_write(e->a));
    assert_false(gs_replica_may_write(e->b));

    /* Each renewal moves the fence to the Lease's new version; the loops keep running. */
    for (int i = 0; i < 3; i++) {
        gs_clock_advance(&e->clock, 2 * S);
        assert_true(gs_replica_tick(e->a));
        assert_false(gs_replica_tick(e->b));
        int64_t now_rv = lease_rv(e, NULL, 0);
        assert_true(now_rv > rv);
        assert_int_equal(e->sa.fence, now_rv);
        rv = now_rv;
    }
    assert_int_equal(e->sa.starts, 1);
    assert_int_equal(e->sa.stops, 0);
    assert_int_equal(e->sb.starts, 0);
}

static void test_silent_leader_replaced_and_stops(void **state)
{
    struct env *e = *state;
    assert_true(gs_replica_tick(e->a));
    assert_false(gs_replica_tick(e->b));
    /* a falls silent (paused): b sees the record unchanged, but only for 15 s takes over. */
    gs_clock_advance(&e->clock, 14 * S);
    assert_false(gs_replica_tick(e->b));
    assert_false(gs_replica_may_write(e->a)); /* past its renew deadline: a writes nothing even before it notices */
    gs_clock_advance(&e->clock, 2 * S);
    assert_true(gs_replica_tick(e->b));
    char holder[64];
    int64_t rv = lease_rv(e, holder, sizeof holder);
    assert_string_equal(holder, "replica-b");
    assert_int_equal(e->sb.starts, 1);
    assert_int_equal(e->sb.fence, rv);
    /* a wakes: its fence still holds its old term's version, which the Lease no longer has. */
    assert_true(e->sa.fence < rv);
    assert_true(e->sa.running);
    assert_false(gs_replica_tick(e->a));
    assert_false(e->sa.running);
    assert_int_equal(e->sa.stops, 1);
    assert_int_equal(e->sa.fence, GS_REPLICA_FENCE_CLOSED);
    /* closed from the start, opened by the acquiring write; closed again before the loops were stopped */
    assert_string_equal(e->sa.order, "FsFS");
    assert_string_equal(holder, "replica-b");
}

static void test_free_releases_at_once(void **state)
{
    struct env *e = *state;
    assert_true(gs_replica_tick(e->a));
    assert_false(gs_replica_tick(e->b));
    gs_replica_free(e->a);
    e->a = NULL;
    assert_int_equal(e->sa.stops, 1);
    assert_int_equal(e->sa.fence, GS_REPLICA_FENCE_CLOSED);
    char holder[64];
    lease_rv(e, holder, sizeof holder);
    assert_string_equal(holder, ""); /* released */
    gs_clock_advance(&e->clock, 2 * S);
    assert_true(gs_replica_tick(e->b)); /* no wait for the lease duration */
    assert_int_equal(e->sb.starts, 1);
}

static void test_failed_start_is_retried(void **state)
{
    struct env *e = *state;
    e->sa.fail_starts = 1;
    assert_true(gs_replica_tick(e->a));
    assert_int_equal(e->sa.starts, 1);
    assert_false(e->sa.running);
    assert_int_equal(e->sa.stops, 1); /* what part of it started is stopped */
    gs_clock_advance(&e->clock, 2 * S);
    assert_true(gs_replica_tick(e->a));
    assert_int_equal(e->sa.starts, 2);
    assert_true(e->sa.running);
}

static void test_metrics_and_ready_note(void **state)
{
    struct env *e = *state;
    assert_true(gs_replica_tick(e->a));
    assert_false(gs_replica_tick(e->b));
    struct gs_mbuf b = {0};
    gs_replica_metrics(e->a, &b);
    assert_non_null(strstr(b.buf, "gpusched_leader{replica=\"replica-a\"} 1\n"));
    assert_non_null(strstr(b.buf, "gpusched_leader_loops_running 1\n"));
    free(b.buf);
    b = (struct gs_mbuf){0};
    gs_replica_metrics(e->b, &b);
    assert_non_null(strstr(b.buf, "gpusched_leader{replica=\"replica-b\"} 0\n"));
    assert_non_null(strstr(b.buf, "gpusched_leader_loops_running 0\n"));
    free(b.buf);
    char *t = gs_replica_ready_note(e->a);
    assert_string_equal(t, "ok\nleader replica-a\n");
    free(t);
    t = gs_replica_ready_note(e->b);
    assert_string_equal(t, "ok\nfollower replica-b (leader: replica-a)\n");
    free(t);
}

static void test_option_errors_name_the_flags(void **state)
{
    struct env *e = *state;
    struct gs_replica_opts o = {.lease_source = e->src, .identity = "x", .lease_duration_ns = 5 * S,
                                .renew_deadline_ns = 5 * S, .retry_period_ns = 1 * S};
    struct gs_replica *r = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_replica_new(&o, &r, &d), GS_EINVAL);
    assert_null(r);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, "--leader-elect-renew-deadline");
    assert_non_null(strstr(d.v[0].msg, "less than the lease duration"));
    gs_diags_free(&d);
    o.renew_deadline_ns = 0, o.lease_duration_ns = 0, o.identity = "";
    assert_int_equal(gs_replica_new(&o, &r, &d), GS_EINVAL);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, "--replica-id");
    gs_diags_free(&d);
}

static void test_default_identity(void **state)
{
    struct env *e = *state;
    struct gs_replica_opts o = {.lease_source = e->src};
    struct gs_replica *r = NULL;
    assert_int_equal(gs_replica_new(&o, &r, NULL), 0);
    char want[32];
    snprintf(want, sizeof want, "_%ld", (long)getpid());
    const char *id = gs_replica_identity(r);
    assert_true(strlen(id) > strlen(want));
    assert_string_equal(id + strlen(id) - strlen(want), want);
    gs_replica_free(r);
}

/*--- A real server electing itself ---*/

static void test_server_leads_and_writes_the_lease(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/gs-replica-srv-XXXXXX");
    assert_non_null(mkdtemp(dir));
    struct gs_server_opts o = {.data_dir = dir, .listen = "127.0.0.1:0", .insecure = true, .no_auth = true,
                               .leader_elect = true, .replica_id = "only-one", .lease_duration_ns = 3 * S,
                               .renew_deadline_ns = 2 * S, .retry_period_ns = S / 2};
    struct gs_server *s = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_server_start(&o, &s, &d), 0);
    gs_diags_free(&d);
    bool led = false;
    for (int i = 0; i < 100 && !led; i++) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
        led = gs_server_leading(s) && gs_leader_may_write(gs_replica_leader(gs_server_replica(s)));
    }
    assert_true(led);
    json_t *lease = NULL;
    assert_int_equal(gs_store_get(gs_server_store(s), GS_REPLICA_LEASE_KEY, &lease, NULL), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(lease, "spec"), "holderIdentity")),
                        "only-one");
    json_decref(lease);
    gs_server_stop(s);
    fx_rm_tree(dir);
}

static void test_server_without_election_writes_no_lease(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/gs-replica-one-XXXXXX");
    assert_non_null(mkdtemp(dir));
    struct gs_server_opts o = {.data_dir = dir, .listen = "127.0.0.1:0", .insecure = true, .no_auth = true};
    struct gs_server *s = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_server_start(&o, &s, &d), 0);
    gs_diags_free(&d);
    assert_null(gs_server_replica(s));
    assert_true(gs_server_leading(s));
    json_t *lease = NULL;
    assert_int_equal(gs_store_get(gs_server_store(s), GS_REPLICA_LEASE_KEY, &lease, NULL), GS_ENOENT);
    gs_server_stop(s);
    fx_rm_tree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_leader_runs_the_loops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_silent_leader_replaced_and_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_releases_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_start_is_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_and_ready_note, setup, teardown),
        cmocka_unit_test_setup_teardown(test_option_errors_name_the_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_identity, setup, teardown),
        cmocka_unit_test(test_server_leads_and_writes_the_lease),
        cmocka_unit_test(test_server_without_election_writes_no_lease),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
