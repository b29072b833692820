/*
 * test_replica_etcd.c - two replicas (control/replica.h) on a real
 * single-member etcd (etcd_fixture.h), each with the API's store handle
 * for the Lease and a second, fenced handle for its loops, as server.c
 * wires them, on a fake clock. What it proves: the leader's loop handle
 * binds; a follower's binds nothing (closed fence); a leader paused past
 * its lease that wakes with a binding in hand cannot write it once the
 * other replica took the Lease, even before its elector notices; the new
 * leader binds the pod once; and a renewal moves the fence with it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/apiserver.h"
#include "control/replica.h"
#include "control/store.h"
#include "etcd_fixture.h"
#include "informer/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S GS_NS_PER_SEC

static struct fx_etcd etcd;

struct rep {
    struct gs_store *api, *loops;
    struct gs_source *lease_src, *loop_src;
    struct gs_replica *r;
    int starts, stops;
};

struct env {
    char prefix[64];
    struct gs_clock clock;
    struct rep a, b;
};

static int open_handle(const char *prefix, struct gs_store **out)
{
    const char *eps[] = {etcd.url};
    struct gs_store_etcd_opts o = {.endpoints = eps, .n_endpoints = 1, .prefix = prefix, .compaction_interval_ms = -1};
    return gs_store_open_etcd(&o, out);
}

static int r_start(void *ctx) { return ((struct rep *)ctx)->starts++, 0; }
static void r_stop(void *ctx) { ((struct rep *)ctx)->stops++; }
static int r_fence(void *ctx, const char *key, int64_t rv) { return gs_store_set_fence(((struct rep *)ctx)->loops, key, rv); }

static void make(struct env *e, struct rep *p, const char *id)
{
    assert_int_equal(open_handle(e->prefix, &p->api), 0);
    assert_int_equal(open_handle(e->prefix, &p->loops), 0);
    assert_int_equal(gs_source_local_new(p->api, &p->lease_src), 0);
    assert_int_equal(gs_source_local_new(p->loops, &p->loop_src), 0);
    struct gs_replica_opts o = {.lease_source = p->lease_src, .identity = id, .clock = &e->clock,
                                .set_fence = r_fence, .start = r_start, .stop = r_stop, .ctx = p};
    assert_int_equal(gs_replica_new(&o, &p->r, NULL), 0);
}

static void unmake(struct rep *p)
{
    gs_replica_free(p->r);
    gs_source_free(p->loop_src);
    gs_source_free(p->lease_src);
    gs_store_close(p->loops);
    gs_store_close(p->api);
}

static int group_setup(void **state)
{
    (void)state;
    return fx_etcd_start(&etcd);
}

static int group_teardown(void **state)
{
    (void)state;
    fx_etcd_stop(&etcd);
    return 0;
}

static int setup(void **state)
{
    static int n;
    struct env *e = calloc(1, sizeof *e);
    snprintf(e->prefix, sizeof e->prefix, "/replica-test-%d", ++n);
    gs_clock_init_sim(&e->clock, 1700000000LL * S);
    make(e, &e->a, "replica-a");
    make(e, &e->b, "replica-b");
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    unmake(&e->a);
    unmake(&e->b);
    free(e);
    return 0;
}

/* A pending pod, created through the API's handle (clients' writes are never fenced). */
static void pending_pod(struct rep *p, const char *name)
{
    json_t *pod = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:[{s:s}]}}", "apiVersion", "v1", "kind", "Pod", "metadata", "name",
                            name, "namespace", "default", "spec", "containers", "name", "c");
    assert_int_equal(gs_apiserver_prepare_new(pod), 0);
    char key[128];
    snprintf(key, sizeof key, "pods/default/%s", name);
    assert_int_equal(gs_store_create(p->api, key, pod, NULL), 0);
    json_decref(pod);
}

static int bind_pod(struct rep *p, const char *name, const char *node)
{
    char key[128];
    snprintf(key, sizeof key, "pods/default/%s", name);
    struct gs_source_bind b = {.key = key, .node = node};
    int err = gs_source_bind(p->loop_src, &b, 1);
    json_decref(b.out);
    return err ? err : b.err;
}

static const char *node_of(struct rep *p, const char *name)
{
    static char buf[64];
    char key[128];
    snprintf(key, sizeof key, "pods/default/%s", name);
    json_t *pod = NULL;
    assert_int_equal(gs_store_get(p->api, key, &pod, NULL), 0);
    const char *n = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    snprintf(buf, sizeof buf, "%s", n ? n : "");
    json_decref(pod);
    return buf;
}

static void test_paused_leader_cannot_bind_after_takeover(void **state)
{
    struct env *e = *state;
    assert_true(gs_replica_tick(e->a.r));
    assert_false(gs_replica_tick(e->b.r));
    assert_int_equal(e->a.starts, 1);
    assert_int_equal(e->b.starts, 0);

    pending_pod(&e->a, "p1");
    assert_int_equal(bind_pod(&e->b, "p1", "n-b"), GS_EFENCED); /* a follower's handle writes nothing */
    assert_string_equal(node_of(&e->a, "p1"), "");
    assert_int_equal(bind_pod(&e->a, "p1", "n-a"), 0); /* the leader's does */
    assert_string_equal(node_of(&e->a, "p1"), "n-a");

    /* Renewals move the fence: the leader keeps writing across them. */
    for (int i = 0; i < 3; i++) {
        gs_clock_advance(&e->clock, 2 * S);
        assert_true(gs_replica_tick(e->a.r));
        assert_false(gs_replica_tick(e->b.r));
    }
    pending_pod(&e->a, "p2");
    assert_int_equal(bind_pod(&e->a, "p2", "n-a"), 0);

    /* a is paused (no ticks) past its lease; b takes over. */
    pending_pod(&e->a, "p3");
    gs_clock_advance(&e->clock, 16 * S);
    assert_true(gs_replica_tick(e->b.r));
    assert_int_equal(e->b.starts, 1);
    /* a wakes with a binding in hand: its elector has not noticed yet, the fence refuses it. */
    assert_int_equal(bind_pod(&e->a, "p3", "n-a"), GS_EFENCED);
    assert_string_equal(node_of(&e->a, "p3"), "");
    assert_int_equal(bind_pod(&e->b, "p3", "n-b"), 0);
    assert_string_equal(node_of(&e->b, "p3"), "n-b");
    /* Now a notices, stops its loops; its handle stays closed. */
    assert_false(gs_replica_tick(e->a.r));
    assert_int_equal(e->a.stops, 1);
    pending_pod(&e->a, "p4");
    assert_int_equal(bind_pod(&e->a, "p4", "n-a"), GS_EFENCED);
    assert_int_equal(bind_pod(&e->b, "p4", "n-b"), 0);
    assert_int_equal(bind_pod(&e->b, "p4", "n-b"), GS_EEXIST); /* bound once */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_paused_leader_cannot_bind_after_takeover, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
