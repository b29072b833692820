/*
 * nodelc_fixture.h - a node lifecycle controller on a real SQLite store in
 * a scratch directory, shared by the agent and graceful-deletion tests that
 * write Nodes, Leases and Pods straight into the store and step the
 * controller by hand. Include after <cmocka.h>: the helpers assert. Static
 * functions: each test executable includes its own copy.
 */
#ifndef GS_TEST_NODELC_FIXTURE_H
#define GS_TEST_NODELC_FIXTURE_H

#include "loops/nodelifecycle.h"
#include "control/store.h"
#include "tmpdir_fixture.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct lc_fx {
    char dir[64];
    struct gs_store *store;
    struct gs_source *src; /* the controller's way to store */
    struct gs_nodelc *lc;
    double now;
};

/* A cmocka setup body: store and controller in a directory from the mkdtemp template tmpl. */
__attribute__((unused)) static int lc_fx_setup(void **state, const char *tmpl)
{
    struct lc_fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "%s", tmpl);
    assert_non_null(mkdtemp(f->dir));
    struct gs_store_opts so = {.dir = f->dir};
    assert_int_equal(gs_store_open_sqlite(&so, &f->store), 0);
    assert_int_equal(gs_source_local_new(f->store, &f->src), 0);
    f->now = (double)time(NULL);
    struct gs_nodelc_opts o = {.source = f->src, .grace_ms = 10000};
    /* The controller started long ago, so an old heartbeat counts as old. */
    assert_int_equal(gs_nodelc_new(&o, f->now - 3600, &f->lc), 0);
    *state = f;
    return 0;
}

__attribute__((unused)) static int lc_fx_teardown(void **state)
{
    struct lc_fx *f = *state;
    gs_nodelc_stop(f->lc);
    gs_source_free(f->src);
    gs_store_close(f->store);
    fx_rm_tree(f->dir);
    free(f);
    return 0;
}

/* t (seconds since the epoch) as RFC 3339, as agents write heartbeats. */
__attribute__((unused)) static void lc_fx_stamp(double t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Writes Node name with a Ready condition (ready: "True", "False", "Unknown")
 * last heard from at hb; an existing Node keeps its spec (taints). */
__attribute__((unused)) static void lc_fx_put_node(struct lc_fx *f, const char *name, double hb, const char *ready)
{
    char ts[32], key[128];
    lc_fx_stamp(hb, ts, sizeof ts);
    json_t *n = json_pack("{s:s,s:s,s:{s:s},s:{},s:{s:[{s:s,s:s,s:s}]}}", "apiVersion", "v1", "kind", "Node",
                          "metadata", "name", name, "spec", "status", "conditions", "type", "Ready", "status", ready,
                          "lastHeartbeatTime", ts);
    snprintf(key, sizeof key, "nodes/%s", name);
    json_t *old = NULL;
    if (gs_store_get(f->store, key, &old, NULL) == 0) {
        json_object_set(n, "spec", json_object_get(old, "spec"));
        json_decref(old);
        assert_int_equal(gs_store_update(f->store, key, n, 0, NULL), 0);
    } else {
        assert_int_equal(gs_store_create(f->store, key, n, NULL), 0);
    }
    json_decref(n);
}

#endif
