/*
 * test_store_etcd.c - the etcd store (store_etcd.c) against a real
 * single-member etcd (etcd_fixture.h; the test fails when etcd is not
 * installed): keys and values as kube-apiserver lays them out, versions and
 * conditional writes, GS_EEXIST / GS_ECONFLICT / GS_ENOENT, a list snapshot
 * followed by a watch from its version, GS_ERANGE after compaction, paging
 * over more than one page, read-modify-write retried under a concurrent
 * writer, fencing, interrupt, a watch that survives etcd being killed and
 * restarted, health, TLS with client certificates, a dead endpoint passed
 * over for a live one, and the errors for bad
 * options and an unreachable etcd.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/etcd.h"
#include "control/store.h"
#include "control/store_etcd.h"
#include "core/error.h"
#include "etcd_fixture.h"
#include "etcdserverpb/rpc.pb-c.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct fx_etcd etcd;
static int prefix_no;

struct env {
    char prefix[32];
    struct gs_store *s;
};

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

static int open_store(const char *prefix, int64_t compact_ms, size_t ring, struct gs_store **s)
{
    const char *eps[] = {etcd.url};
    struct gs_diags d = {0};
    struct gs_store_etcd_opts o = {.endpoints = eps, .n_endpoints = 1, .prefix = prefix,
                                   .compaction_interval_ms = compact_ms, .ring_events = ring, .diags = &d};
    int err = gs_store_open_etcd(&o, s);
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, "open: %s: %s\n", d.v[i].path, d.v[i].msg);
    gs_diags_free(&d);
    return err;
}

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    snprintf(e->prefix, sizeof e->prefix, "/t%d", ++prefix_no);
    assert_int_equal(open_store(e->prefix, -1, 0, &e->s), 0);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gs_store_close(e->s);
    free(e);
    return 0;
}

static json_t *obj(const char *name, const char *val)
{
    return json_pack("{s:s, s:{s:s}, s:s}", "kind", "Thing", "metadata", "name", name, "v", val);
}

static const char *v_of(const json_t *o) { return json_string_value(json_object_get(o, "v")); }

static int64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The raw value etcd holds at key (malloc'd), or NULL; *mod its mod_revision. */
static char *raw_get(const char *key, int64_t *mod)
{
    const char *eps[] = {etcd.url};
    struct gs_etcd_opts o = {.endpoints = eps, .n_endpoints = 1};
    struct gs_etcd *c = NULL;
    char why[512];
    assert_int_equal(gs_etcd_open(&o, &c, why, sizeof why), 0);
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = (ProtobufCBinaryData){strlen(key), (uint8_t *)(uintptr_t)key};
    ProtobufCMessage *m = NULL;
    assert_int_equal(gs_etcd_unary(c, "/etcdserverpb.KV/Range", &r.base, &etcdserverpb__range_response__descriptor,
                                   &m, true, 0, NULL, why, sizeof why), 0);
    Etcdserverpb__RangeResponse *resp = (Etcdserverpb__RangeResponse *)m;
    char *v = NULL;
    if (resp->n_kvs) {
        v = strndup((const char *)resp->kvs[0]->value.data, resp->kvs[0]->value.len);
        *mod = resp->kvs[0]->mod_revision;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    gs_etcd_close(c);
    return v;
}

static void crud_versions_and_conflicts(void **state)
{
    struct env *e = *state;
    json_t *a = obj("a", "1");
    int64_t rv1 = 0, rv2 = 0, rv3 = 0, rvd = 0;
    assert_int_equal(gs_store_create(e->s, "things/ns/a", a, &rv1), 0);
    assert_true(rv1 > 0);
    assert_int_equal(gs_store_obj_rv(a), rv1);
    /* kube-apiserver's layout: <prefix>/<key>, compact JSON, resourceVersion = mod_revision (not stored). */
    char key[64];
    snprintf(key, sizeof key, "%s/things/ns/a", e->prefix);
    int64_t mod = 0;
    char *raw = raw_get(key, &mod);
    assert_non_null(raw);
    assert_int_equal(mod, rv1);
    assert_null(strstr(raw, "resourceVersion"));
    assert_non_null(strstr(raw, "\"v\":\"1\""));
    free(raw);
    assert_int_equal(gs_store_create(e->s, "things/ns/a", a, NULL), GS_EEXIST);
    json_object_set_new(a, "v", json_string("2"));
    assert_int_equal(gs_store_update(e->s, "things/ns/a", a, rv1, &rv2), 0);
    assert_true(rv2 > rv1);
    assert_int_equal(gs_store_obj_rv(a), rv2);
    json_object_set_new(a, "v", json_string("3"));
    assert_int_equal(gs_store_update(e->s, "things/ns/a", a, rv1, NULL), GS_ECONFLICT); /* stale: 409 */
    assert_int_equal(gs_store_update(e->s, "things/ns/zz", a, 0, NULL), GS_ENOENT);
    assert_int_equal(gs_store_update(e->s, "things/ns/zz", a, 5, NULL), GS_ENOENT);
    json_t *got = NULL;
    assert_int_equal(gs_store_get(e->s, "things/ns/a", &got, &rv3), 0);
    assert_int_equal(rv3, rv2);
    assert_string_equal(v_of(got), "2");
    assert_int_equal(gs_store_obj_rv(got), rv2);
    json_decref(got);
    /* Unconditional update (expect 0) of an existing key. */
    assert_int_equal(gs_store_update(e->s, "things/ns/a", a, 0, &rv3), 0);
    assert_true(rv3 > rv2);
    assert_int_equal(gs_store_delete(e->s, "things/ns/a", rv1, NULL, NULL), GS_ECONFLICT);
    json_t *old = NULL;
    assert_int_equal(gs_store_delete(e->s, "things/ns/a", rv3, &old, &rvd), 0);
    assert_true(rvd > rv3);
    assert_string_equal(v_of(old), "3");
    assert_int_equal(gs_store_obj_rv(old), rvd); /* the last state, with the deletion's version */
    json_decref(old);
    assert_int_equal(gs_store_get(e->s, "things/ns/a", &got, NULL), GS_ENOENT);
    assert_int_equal(gs_store_delete(e->s, "things/ns/a", 0, NULL, NULL), GS_ENOENT);
    assert_null(raw_get(key, &mod));
    /* Created again after the delete: a new object. */
    assert_int_equal(gs_store_create(e->s, "things/ns/a", a, &rv1), 0);
    assert_true(rv1 > rvd);
    json_decref(a);
    struct gs_store_health h;
    gs_store_health(e->s, true, &h);
    assert_true(h.writable);
}

struct collect {
    json_t *names;
};

static int collect_fn(const char *key, json_t *o, void *arg)
{
    struct collect *c = arg;
    assert_int_equal(gs_store_obj_rv(o) > 0, 1);
    json_array_append_new(c->names, json_string(key));
    return 0;
}

/* Events after *after until want arrived (or 10 s). */
static size_t wait_events(struct gs_store *s, int64_t *after, const char *prefix, size_t want,
                          struct gs_store_event **all)
{
    size_t n = 0;
    *all = NULL;
    int64_t end = mono_ms() + 10000;
    while (n < want && mono_ms() < end) {
        struct gs_store_event *ev = NULL;
        size_t k = 0;
        assert_int_equal(gs_store_events(s, after, prefix, 500, NULL, &ev, &k), 0);
        *all = realloc(*all, (n + k + 1) * sizeof **all);
        memcpy(*all + n, ev, k * sizeof *ev);
        free(ev); /* the entries moved into *all */
        n += k;
    }
    return n;
}

static void list_snapshot_then_watch_sees_every_change(void **state)
{
    struct env *e = *state;
    char k[32];
    for (int i = 0; i < 5; i++) {
        snprintf(k, sizeof k, "pods/ns/p%d", i);
        json_t *o = obj(k, "x");
        assert_int_equal(gs_store_create(e->s, k, o, NULL), 0);
        json_decref(o);
    }
    json_t *n = obj("n1", "node");
    assert_int_equal(gs_store_create(e->s, "nodes/n1", n, NULL), 0);
    struct collect c = {json_array()};
    int64_t lrv = 0;
    assert_int_equal(gs_store_list(e->s, "pods/", collect_fn, &c, &lrv), 0);
    assert_int_equal(json_array_size(c.names), 5);
    assert_string_equal(json_string_value(json_array_get(c.names, 0)), "pods/ns/p0");
    assert_string_equal(json_string_value(json_array_get(c.names, 4)), "pods/ns/p4");
    json_decref(c.names);
    assert_true(lrv > 0);
    /* Changes after the list: exactly these, in order, with their versions. */
    json_t *o = obj("p1", "changed");
    int64_t r1 = 0, r2 = 0, r3 = 0, rn = 0;
    assert_int_equal(gs_store_update(e->s, "pods/ns/p1", o, 0, &r1), 0);
    assert_int_equal(gs_store_delete(e->s, "pods/ns/p2", 0, NULL, &r2), 0);
    assert_int_equal(gs_store_update(e->s, "nodes/n1", n, 0, &rn), 0); /* another prefix */
    json_t *p9 = obj("p9", "new");
    assert_int_equal(gs_store_create(e->s, "pods/ns/p9", p9, &r3), 0);
    int64_t after = lrv;
    struct gs_store_event *ev = NULL;
    size_t got = wait_events(e->s, &after, "pods/", 3, &ev);
    assert_int_equal(got, 3);
    assert_int_equal(ev[0].type, GS_STORE_MODIFIED);
    assert_string_equal(ev[0].key, "pods/ns/p1");
    assert_int_equal(ev[0].rv, r1);
    json_t *v0 = json_loads(ev[0].value, 0, NULL);
    assert_string_equal(v_of(v0), "changed");
    assert_int_equal(gs_store_obj_rv(v0), r1);
    json_decref(v0);
    assert_int_equal(ev[1].type, GS_STORE_DELETED);
    assert_string_equal(ev[1].key, "pods/ns/p2");
    assert_int_equal(ev[1].rv, r2);
    json_t *v1 = json_loads(ev[1].value, 0, NULL);
    assert_string_equal(v_of(v1), "x"); /* the last state ... */
    assert_int_equal(gs_store_obj_rv(v1), r2); /* ... with the delete's version */
    json_decref(v1);
    assert_int_equal(ev[2].type, GS_STORE_ADDED);
    assert_int_equal(ev[2].rv, r3);
    assert_true(after >= r3);
    gs_store_events_free(ev, got);
    /* Without a prefix the node's change is there too, between them. */
    after = lrv;
    got = wait_events(e->s, &after, NULL, 4, &ev);
    assert_int_equal(got, 4);
    assert_string_equal(ev[2].key, "nodes/n1");
    assert_int_equal(ev[2].rv, rn);
    gs_store_events_free(ev, got);
    /* Nothing more: a short wait returns empty, after stays put. */
    int64_t before = after;
    assert_int_equal(gs_store_events(e->s, &after, NULL, 100, NULL, &ev, &got), 0);
    assert_int_equal(got, 0);
    assert_int_equal(after, before);
    assert_int_equal(gs_store_current_rv(e->s), r3);
    /* A watch from before the store started is gone: 410. */
    after = 0;
    assert_int_equal(gs_store_events(e->s, &after, NULL, 10, NULL, &ev, &got), GS_ERANGE);
    json_decref(o);
    json_decref(n);
    json_decref(p9);
}

static void watch_from_a_fresh_write_waits_for_it(void **state)
{
    /* A version from a write's answer may be ahead of the watch: the caller
     * waits for the event instead of being moved back (or forward) past it. */
    struct env *e = *state;
    int64_t after = gs_store_current_rv(e->s);
    json_t *o = obj("w", "1");
    int64_t r = 0;
    assert_int_equal(gs_store_create(e->s, "things/w", o, &r), 0);
    int64_t a2 = r - 1;
    struct gs_store_event *ev = NULL;
    size_t got = wait_events(e->s, &a2, NULL, 1, &ev);
    assert_int_equal(got, 1);
    assert_int_equal(ev[0].rv, r);
    gs_store_events_free(ev, got);
    got = wait_events(e->s, &after, NULL, 1, &ev);
    assert_int_equal(got, 1);
    gs_store_events_free(ev, got);
    /* A version no answer ever showed: from the future, resumes from now. */
    int64_t far = r + 1000000;
    assert_int_equal(gs_store_events(e->s, &far, NULL, 10, NULL, &ev, &got), 0);
    assert_int_equal(got, 0);
    assert_int_equal(far, r);
    json_decref(o);
}

/* Puts key=value straight into etcd; the write's revision. */
static int64_t raw_put(const char *key, const char *value)
{
    const char *eps[] = {etcd.url};
    struct gs_etcd_opts o = {.endpoints = eps, .n_endpoints = 1};
    struct gs_etcd *c = NULL;
    char why[512];
    assert_int_equal(gs_etcd_open(&o, &c, why, sizeof why), 0);
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = (ProtobufCBinaryData){strlen(key), (uint8_t *)(uintptr_t)key};
    p.value = (ProtobufCBinaryData){strlen(value), (uint8_t *)(uintptr_t)value};
    ProtobufCMessage *m = NULL;
    assert_int_equal(gs_etcd_unary(c, "/etcdserverpb.KV/Put", &p.base, &etcdserverpb__put_response__descriptor, &m,
                                   false, 0, NULL, why, sizeof why), 0);
    int64_t rev = ((Etcdserverpb__PutResponse *)m)->header->revision;
    protobuf_c_message_free_unpacked(m, NULL);
    gs_etcd_close(c);
    return rev;
}

static void progress_moves_the_version_without_events(void **state)
{
    /* A write elsewhere in etcd moves the revision; progress notifications
     * move the store's version (and so watch bookmarks) with it. */
    struct env *e = *state;
    int64_t before = gs_store_current_rv(e->s);
    int64_t rev = raw_put("/elsewhere/x", "1");
    assert_true(rev > before);
    int64_t end = mono_ms() + 8000;
    while (gs_store_current_rv(e->s) < rev && mono_ms() < end) usleep(50000);
    assert_int_equal(gs_store_current_rv(e->s), rev);
    /* A watcher asking from there gets nothing (nothing of ours changed) and stays there. */
    int64_t after = rev;
    struct gs_store_event *ev = NULL;
    size_t n = 0;
    assert_int_equal(gs_store_events(e->s, &after, NULL, 50, NULL, &ev, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(after, rev);
    /* A version another server on this etcd handed out (here: a raw write this
     * store never saw an answer for) is waited for, not taken for the future. */
    struct gs_store *other = NULL;
    assert_int_equal(open_store(e->prefix, -1, 0, &other), 0);
    json_t *o = obj("o", "1");
    int64_t orv = 0;
    assert_int_equal(gs_store_create(other, "things/o", o, &orv), 0);
    after = orv;
    assert_int_equal(gs_store_events(e->s, &after, NULL, 50, NULL, &ev, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(after, orv); /* not moved back to before the create */
    json_decref(o);
    gs_store_close(other);
}

static void a_value_that_is_not_json_is_skipped(void **state)
{
    struct env *e = *state;
    int64_t before = gs_store_current_rv(e->s);
    /* One Txn writing a garbage value and a good one (one revision, two events). */
    char k1[64], k2[64];
    snprintf(k1, sizeof k1, "%s/bad/a", e->prefix);
    snprintf(k2, sizeof k2, "%s/bad/b", e->prefix);
    const char *v1 = "not json", *v2 = "{\"kind\":\"Thing\",\"metadata\":{\"name\":\"b\"}}";
    Etcdserverpb__PutRequest put[2] = {ETCDSERVERPB__PUT_REQUEST__INIT, ETCDSERVERPB__PUT_REQUEST__INIT};
    put[0].key = (ProtobufCBinaryData){strlen(k1), (uint8_t *)k1};
    put[0].value = (ProtobufCBinaryData){strlen(v1), (uint8_t *)(uintptr_t)v1};
    put[1].key = (ProtobufCBinaryData){strlen(k2), (uint8_t *)k2};
    put[1].value = (ProtobufCBinaryData){strlen(v2), (uint8_t *)(uintptr_t)v2};
    Etcdserverpb__RequestOp op[2] = {ETCDSERVERPB__REQUEST_OP__INIT, ETCDSERVERPB__REQUEST_OP__INIT};
    Etcdserverpb__RequestOp *ops[2] = {&op[0], &op[1]};
    for (int i = 0; i < 2; i++) {
        op[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
        op[i].request_put = &put[i];
    }
    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    t.n_success = 2;
    t.success = ops;
    const char *eps[] = {etcd.url};
    struct gs_etcd_opts o = {.endpoints = eps, .n_endpoints = 1};
    struct gs_etcd *c = NULL;
    char why[512];
    assert_int_equal(gs_etcd_open(&o, &c, why, sizeof why), 0);
    ProtobufCMessage *m = NULL;
    assert_int_equal(gs_etcd_unary(c, "/etcdserverpb.KV/Txn", &t.base, &etcdserverpb__txn_response__descriptor, &m,
                                   false, 0, NULL, why, sizeof why), 0);
    protobuf_c_message_free_unpacked(m, NULL);
    gs_etcd_close(c);
    /* The good one reaches watchers; the bad one is skipped without making them relist. */
    int64_t after = before;
    struct gs_store_event *ev = NULL;
    size_t n = wait_events(e->s, &after, NULL, 1, &ev);
    assert_int_equal(n, 1);
    assert_string_equal(ev[0].key, "bad/b");
    gs_store_events_free(ev, n);
    after = before;
    assert_int_equal(gs_store_events(e->s, &after, NULL, 10, NULL, &ev, &n), 0); /* still held: no 410 */
    assert_int_equal(n, 1);
    gs_store_events_free(ev, n);
    /* Lists skip it, a read of it fails, health counts it. */
    struct collect col = {json_array()};
    assert_int_equal(gs_store_list(e->s, "bad/", collect_fn, &col, NULL), 0);
    assert_int_equal(json_array_size(col.names), 1);
    json_decref(col.names);
    json_t *got = NULL;
    assert_int_equal(gs_store_get(e->s, "bad/a", &got, NULL), GS_EPARSE);
    struct gs_store_health h;
    gs_store_health(e->s, false, &h);
    assert_true(h.corrupt >= 1);
}

static void list_pages_over_many_keys(void **state)
{
    struct env *e = *state;
    int64_t from = gs_store_current_rv(e->s);
    /* 1200 keys written straight to etcd, 100 per Txn (etcd allows 128 operations). */
    const char *eps[] = {etcd.url};
    struct gs_etcd_opts o = {.endpoints = eps, .n_endpoints = 1};
    struct gs_etcd *c = NULL;
    char why[512];
    assert_int_equal(gs_etcd_open(&o, &c, why, sizeof why), 0);
    static char keys[100][64];
    const char *val = "{\"kind\":\"Thing\",\"metadata\":{\"name\":\"x\"}}";
    for (int b = 0; b < 12; b++) {
        Etcdserverpb__PutRequest put[100];
        Etcdserverpb__RequestOp op[100], *ops[100];
        for (int i = 0; i < 100; i++) {
            snprintf(keys[i], sizeof keys[i], "%s/many/k%05d", e->prefix, b * 100 + i);
            put[i] = (Etcdserverpb__PutRequest)ETCDSERVERPB__PUT_REQUEST__INIT;
            put[i].key = (ProtobufCBinaryData){strlen(keys[i]), (uint8_t *)keys[i]};
            put[i].value = (ProtobufCBinaryData){strlen(val), (uint8_t *)(uintptr_t)val};
            op[i] = (Etcdserverpb__RequestOp)ETCDSERVERPB__REQUEST_OP__INIT;
            op[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
            op[i].request_put = &put[i];
            ops[i] = &op[i];
        }
        Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
        t.n_success = 100;
        t.success = ops;
        ProtobufCMessage *m = NULL;
        assert_int_equal(gs_etcd_unary(c, "/etcdserverpb.KV/Txn", &t.base, &etcdserverpb__txn_response__descriptor,
                                       &m, false, 0, NULL, why, sizeof why), 0);
        protobuf_c_message_free_unpacked(m, NULL);
    }
    gs_etcd_close(c);
    struct collect col = {json_array()};
    int64_t rv = 0;
    assert_int_equal(gs_store_list(e->s, "many/", collect_fn, &col, &rv), 0);
    assert_int_equal(json_array_size(col.names), 1200);
    for (size_t i = 0; i < 1200; i++) { /* every key once, in key order, across the pages */
        char want[32];
        snprintf(want, sizeof want, "many/k%05zu", i);
        assert_string_equal(json_string_value(json_array_get(col.names, i)), want);
    }
    json_decref(col.names);
    /* The 1200 events (12 revisions of 100) reach a watcher in calls of
     * about 1024, never with a revision split between two calls. */
    size_t total = 0;
    for (int calls = 0; total < 1200 && calls < 50; calls++) {
        struct gs_store_event *ev = NULL;
        size_t k = 0;
        assert_int_equal(gs_store_events(e->s, &from, "many/", 500, NULL, &ev, &k), 0);
        assert_int_equal(k % 100, 0);
        assert_true(k <= 1100);
        if (k) assert_int_equal(from, ev[k - 1].rv);
        total += k;
        gs_store_events_free(ev, k);
    }
    assert_int_equal(total, 1200);
}

static void compaction_expires_old_watches(void **state)
{
    struct env *e = *state;
    struct gs_store *s = NULL;
    char prefix[48];
    snprintf(prefix, sizeof prefix, "%s-c", e->prefix);
    assert_int_equal(open_store(prefix, 300, 0, &s), 0);
    int64_t start = gs_store_current_rv(s), r = 0;
    json_t *o = obj("c", "1");
    assert_int_equal(gs_store_create(s, "things/c", o, &r), 0);
    for (int i = 0; i < 3; i++) assert_int_equal(gs_store_update(s, "things/c", o, 0, &r), 0);
    struct gs_store_event *ev = NULL;
    size_t n = 0;
    int64_t after = start;
    size_t got = wait_events(s, &after, NULL, 4, &ev);
    assert_int_equal(got, 4);
    gs_store_events_free(ev, got);
    /* Within two intervals the history up to r is compacted: a watch from before it is 410. */
    int err = 0;
    int64_t end = mono_ms() + 5000;
    while (mono_ms() < end) {
        after = start;
        err = gs_store_events(s, &after, NULL, 10, NULL, &ev, &n);
        if (err == GS_ERANGE) break;
        gs_store_events_free(ev, n);
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(err, GS_ERANGE);
    /* etcd itself refuses a read at a compacted revision with its own message. */
    const char *eps[] = {etcd.url};
    struct gs_etcd_opts eo = {.endpoints = eps, .n_endpoints = 1};
    struct gs_etcd *c = NULL;
    char why[512] = "";
    assert_int_equal(gs_etcd_open(&eo, &c, why, sizeof why), 0);
    Etcdserverpb__RangeRequest rq = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rq.key = (ProtobufCBinaryData){1, (uint8_t *)"/"};
    rq.revision = start;
    ProtobufCMessage *m = NULL;
    assert_int_equal(gs_etcd_unary(c, "/etcdserverpb.KV/Range", &rq.base, &etcdserverpb__range_response__descriptor,
                                   &m, true, 0, NULL, why, sizeof why), GS_ERANGE);
    assert_non_null(strstr(why, "required revision has been compacted"));
    gs_etcd_close(c);
    /* Later changes still flow to a watch from now. */
    after = gs_store_current_rv(s);
    assert_int_equal(gs_store_update(s, "things/c", o, 0, &r), 0);
    got = wait_events(s, &after, NULL, 1, &ev);
    assert_int_equal(got, 1);
    assert_int_equal(ev[0].rv, r);
    gs_store_events_free(ev, got);
    json_decref(o);
    gs_store_close(s);
}

/* mutate fn: v = v + 1; on its first call (once per test) another handle writes the key first. */
struct bump {
    struct gs_store *other;
    int calls;
    bool race_once;
};

static int bump_fn(json_t *cur, json_t **out, void *arg)
{
    struct bump *b = arg;
    __atomic_add_fetch(&b->calls, 1, __ATOMIC_SEQ_CST);
    long v = cur ? strtol(v_of(cur), NULL, 10) : 0;
    if (b->race_once) {
        b->race_once = false;
        json_t *o = obj("m", "100");
        assert_int_equal(gs_store_update(b->other, "things/m", o, 0, NULL), 0);
        json_decref(o);
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", v + 1);
    *out = obj("m", buf);
    return 0;
}

static int same_fn(json_t *cur, json_t **out, void *arg)
{
    (void)cur, (void)out, (void)arg;
    return GS_STORE_UNCHANGED;
}

struct worker {
    struct gs_store *s;
    struct bump b;
    int errors;
};

static void *worker(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < 40; i++)
        if (gs_store_mutate(w->s, "things/m", bump_fn, &w->b, NULL, NULL)) w->errors++;
    return NULL;
}

static void mutate_retries_on_a_concurrent_writer(void **state)
{
    struct env *e = *state;
    struct gs_store *other = NULL;
    assert_int_equal(open_store(e->prefix, -1, 0, &other), 0);
    json_t *o = obj("m", "1");
    assert_int_equal(gs_store_create(e->s, "things/m", o, NULL), 0);
    json_decref(o);
    /* The other writer gets in between the read and the Txn: fn runs again on its state. */
    struct bump b = {.other = other, .race_once = true};
    json_t *out = NULL;
    int64_t rv = 0;
    assert_int_equal(gs_store_mutate(e->s, "things/m", bump_fn, &b, &out, &rv), 0);
    assert_int_equal(b.calls, 2);
    assert_string_equal(v_of(out), "101"); /* built on the other writer's 100, not on the 1 read first */
    assert_int_equal(gs_store_obj_rv(out), rv);
    json_decref(out);
    /* Unchanged: nothing written, the current object and version. */
    int64_t rv2 = 0;
    assert_int_equal(gs_store_mutate(e->s, "things/m", same_fn, NULL, &out, &rv2), 0);
    assert_int_equal(rv2, rv);
    json_decref(out);
    assert_int_equal(gs_store_mutate(e->s, "things/none", same_fn, NULL, &out, &rv2), GS_ENOENT);
    /* Two threads on two handles, 40 increments each: none lost. */
    struct worker w1 = {.s = e->s}, w2 = {.s = other};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, worker, &w1);
    pthread_create(&t2, NULL, worker, &w2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert_int_equal(w1.errors + w2.errors, 0);
    json_t *got = NULL;
    assert_int_equal(gs_store_get(e->s, "things/m", &got, NULL), 0);
    assert_string_equal(v_of(got), "181");
    json_decref(got);
    fprintf(stderr, "mutate: %d fn calls for 80 increments from two threads\n", w1.b.calls + w2.b.calls);
    /* mutate_batch: one result per request, text when asked. */
    struct bump bb = {0};
    struct gs_store_mut m[2] = {{.key = "things/m", .fn = bump_fn, .arg = &bb, .want_text = true},
                                {.key = "things/none", .fn = same_fn}};
    assert_int_equal(gs_store_mutate_batch(e->s, m, 2), 0);
    assert_int_equal(m[0].err, 0);
    assert_non_null(m[0].text);
    assert_non_null(strstr(m[0].text, "\"182\""));
    assert_int_equal(m[1].err, GS_ENOENT);
    json_decref(m[0].out);
    gs_store_text_release(m[0].text);
    gs_store_close(other);
}

static void fenced_writes_fail_once_the_fence_key_moved(void **state)
{
    struct env *e = *state;
    struct gs_store *loops = NULL;
    assert_int_equal(open_store(e->prefix, -1, 0, &loops), 0);
    json_t *lease = obj("l", "me");
    int64_t lrv = 0;
    assert_int_equal(gs_store_create(e->s, "leases/kube-system/l", lease, &lrv), 0);
    assert_int_equal(gs_store_set_fence(loops, "leases/kube-system/l", lrv), 0);
    json_t *x = obj("x", "1");
    int64_t xrv = 0;
    assert_int_equal(gs_store_create(loops, "things/x", x, &xrv), 0); /* fence holds: written */
    assert_int_equal(gs_store_update(loops, "things/x", x, xrv, &xrv), 0);
    /* Another replica takes the lease. */
    json_object_set_new(lease, "v", json_string("other"));
    assert_int_equal(gs_store_update(e->s, "leases/kube-system/l", lease, 0, NULL), 0);
    json_t *y = obj("y", "1");
    assert_int_equal(gs_store_create(loops, "things/y", y, NULL), GS_EFENCED);
    assert_int_equal(gs_store_update(loops, "things/x", x, xrv, NULL), GS_EFENCED);
    assert_int_equal(gs_store_update(loops, "things/x", x, 0, NULL), GS_EFENCED);
    assert_int_equal(gs_store_delete(loops, "things/x", 0, NULL, NULL), GS_EFENCED);
    struct bump b = {0};
    assert_int_equal(gs_store_mutate(loops, "things/x", bump_fn, &b, NULL, NULL), GS_EFENCED);
    assert_int_equal(b.calls, 1); /* a fence is not retried */
    json_t *got = NULL;
    assert_int_equal(gs_store_get(e->s, "things/y", &got, NULL), GS_ENOENT); /* nothing written */
    int64_t now = 0;
    assert_int_equal(gs_store_get(e->s, "things/x", &got, &now), 0);
    assert_int_equal(now, xrv);
    json_decref(got);
    /* Reads are never fenced; the API's handle was never fenced. */
    assert_int_equal(gs_store_get(loops, "things/x", &got, NULL), 0);
    json_decref(got);
    assert_int_equal(gs_store_update(e->s, "things/x", x, 0, NULL), 0);
    /* A fence at the lease's new version (this replica renewed) lets writes through again; 0 turns it off. */
    assert_int_equal(gs_store_get(e->s, "leases/kube-system/l", &got, &lrv), 0);
    json_decref(got);
    assert_int_equal(gs_store_set_fence(loops, "leases/kube-system/l", lrv), 0);
    assert_int_equal(gs_store_create(loops, "things/y", y, NULL), 0);
    assert_int_equal(gs_store_update(e->s, "leases/kube-system/l", lease, 0, NULL), 0);
    assert_int_equal(gs_store_update(loops, "things/y", y, 0, NULL), GS_EFENCED);
    assert_int_equal(gs_store_set_fence(loops, NULL, 0), 0);
    assert_int_equal(gs_store_update(loops, "things/y", y, 0, NULL), 0);
    assert_int_equal(gs_store_set_fence(loops, "", 5), GS_EINVAL);
    json_decref(lease);
    json_decref(x);
    json_decref(y);
    gs_store_close(loops);
}

static void sqlite_has_no_fence(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/gs-store-XXXXXX");
    assert_non_null(mkdtemp(dir));
    struct gs_store_opts o = {.dir = dir};
    struct gs_store *s = NULL;
    assert_int_equal(gs_store_open_sqlite(&o, &s), 0);
    assert_int_equal(gs_store_set_fence(s, "leases/a/b", 3), GS_EUNSUPPORTED);
    gs_store_close(s);
    fx_rm_tree(dir);
}

struct waiter {
    struct gs_store *s;
    int err;
    size_t n;
    int64_t ms;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    int64_t after = gs_store_current_rv(w->s), t0 = mono_ms();
    struct gs_store_event *ev = NULL;
    w->err = gs_store_events(w->s, &after, NULL, 20000, NULL, &ev, &w->n);
    w->ms = mono_ms() - t0;
    gs_store_events_free(ev, w->n);
    return NULL;
}

static void interrupt_wakes_a_blocked_watcher(void **state)
{
    struct env *e = *state;
    struct waiter w = {.s = e->s};
    pthread_t t;
    pthread_create(&t, NULL, wait_thread, &w);
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
    gs_store_interrupt(e->s);
    pthread_join(t, NULL);
    assert_int_equal(w.err, 0);
    assert_int_equal(w.n, 0);
    assert_true(w.ms < 5000);
}

static void watch_survives_an_etcd_restart(void **state)
{
    struct env *e = *state;
    int64_t after = gs_store_current_rv(e->s);
    json_t *o = obj("r", "0");
    int64_t rvs[6];
    assert_int_equal(gs_store_create(e->s, "things/r", o, &rvs[0]), 0);
    for (int i = 1; i < 3; i++) assert_int_equal(gs_store_update(e->s, "things/r", o, 0, &rvs[i]), 0);
    struct gs_store_event *ev = NULL;
    int64_t seen = after;
    size_t got = wait_events(e->s, &seen, NULL, 3, &ev);
    assert_int_equal(got, 3);
    gs_store_events_free(ev, got);
    fx_etcd_kill(&etcd);
    /* While etcd is down: writes fail with etcd's error, health says so. */
    assert_int_not_equal(gs_store_update(e->s, "things/r", o, 0, NULL), 0);
    struct gs_store_health h;
    gs_store_health(e->s, true, &h);
    assert_false(h.writable);
    assert_non_null(strstr(h.why, etcd.url));
    assert_int_equal(fx_etcd_restart(&etcd), 0);
    for (int i = 3; i < 6; i++) {
        int err = -1;
        for (int t = 0; t < 50 && err; t++) err = gs_store_update(e->s, "things/r", o, 0, &rvs[i]);
        assert_int_equal(err, 0);
    }
    gs_store_health(e->s, true, &h);
    assert_true(h.writable);
    /* Every change once, in order, across the restart. */
    got = wait_events(e->s, &after, NULL, 6, &ev);
    if (got != 6) {
        for (int i = 0; i < 6; i++) fprintf(stderr, "wrote %lld\n", (long long)rvs[i]);
        for (size_t i = 0; i < got; i++) fprintf(stderr, "event %lld\n", (long long)ev[i].rv);
    }
    assert_int_equal(got, 6);
    for (int i = 0; i < 6; i++) assert_int_equal(ev[i].rv, rvs[i]);
    gs_store_events_free(ev, got);
    struct gs_store_event *more = NULL;
    size_t k = 0;
    assert_int_equal(gs_store_events(e->s, &after, NULL, 300, NULL, &more, &k), 0);
    assert_int_equal(k, 0);
    json_decref(o);
}

static void a_small_ring_expires_old_watchers(void **state)
{
    struct env *e = *state;
    struct gs_store *s = NULL;
    char prefix[48];
    snprintf(prefix, sizeof prefix, "%s-r", e->prefix);
    assert_int_equal(open_store(prefix, -1, 4, &s), 0);
    int64_t start = gs_store_current_rv(s), r = 0;
    json_t *o = obj("q", "1");
    assert_int_equal(gs_store_create(s, "things/q", o, &r), 0);
    for (int i = 0; i < 7; i++) assert_int_equal(gs_store_update(s, "things/q", o, 0, &r), 0);
    int64_t end = mono_ms() + 5000;
    while (gs_store_current_rv(s) < r && mono_ms() < end) usleep(20000);
    assert_int_equal(gs_store_current_rv(s), r);
    struct gs_store_event *ev = NULL;
    size_t n = 0;
    int64_t after = start;
    assert_int_equal(gs_store_events(s, &after, NULL, 10, NULL, &ev, &n), GS_ERANGE);
    after = r - 3; /* the last three are held */
    assert_int_equal(gs_store_events(s, &after, NULL, 10, NULL, &ev, &n), 0);
    assert_int_equal(n, 3);
    gs_store_events_free(ev, n);
    json_decref(o);
    gs_store_close(s);
}

static void bad_options_and_unreachable_etcd_are_clear_errors(void **state)
{
    (void)state;
    char why[512];
    char **v = NULL;
    size_t n = 0;
    assert_int_equal(gs_etcd_endpoints_parse("127.0.0.1:2379", &v, &n, why, sizeof why), GS_EINVAL);
    assert_non_null(strstr(why, "\"127.0.0.1:2379\""));
    assert_non_null(strstr(why, "http://HOST:PORT"));
    assert_int_equal(gs_etcd_endpoints_parse("http://a:2379,,http://b:2379", &v, &n, why, sizeof why), GS_EINVAL);
    assert_non_null(strstr(why, "empty endpoint"));
    assert_int_equal(gs_etcd_endpoints_parse("http://a:99999", &v, &n, why, sizeof why), GS_EINVAL);
    assert_non_null(strstr(why, "1 to 65535"));
    assert_int_equal(gs_etcd_endpoints_parse("http://a", &v, &n, why, sizeof why), GS_EINVAL);
    assert_non_null(strstr(why, "HOST:PORT"));
    assert_int_equal(gs_etcd_endpoints_parse("http://a:1/x", &v, &n, why, sizeof why), GS_EINVAL);
    assert_int_equal(gs_etcd_endpoints_parse("http://a:1,http://a:1", &v, &n, why, sizeof why), GS_EINVAL);
    assert_non_null(strstr(why, "twice"));
    assert_int_equal(gs_etcd_endpoints_parse("http://a:1,https://[::1]:2", &v, &n, why, sizeof why), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[1], "https://[::1]:2");
    gs_etcd_endpoints_free(v, n);
    /* TLS files that do not exist, or without https endpoints. */
    const char *https[] = {"https://127.0.0.1:1"};
    struct gs_etcd *c = NULL;
    struct gs_etcd_opts o = {.endpoints = https, .n_endpoints = 1, .cafile = "/nonexistent/ca.pem"};
    assert_int_equal(gs_etcd_open(&o, &c, why, sizeof why), GS_EIO);
    assert_non_null(strstr(why, "/nonexistent/ca.pem"));
    o = (struct gs_etcd_opts){.endpoints = https, .n_endpoints = 1, .certfile = "/etc/hostname"};
    assert_int_equal(gs_etcd_open(&o, &c, why, sizeof why), GS_EINVAL);
    assert_non_null(strstr(why, "key file"));
    const char *plain[] = {"http://127.0.0.1:1"};
    o = (struct gs_etcd_opts){.endpoints = plain, .n_endpoints = 1, .cafile = "/etc/hostname"};
    assert_int_equal(gs_etcd_open(&o, &c, why, sizeof why), GS_EINVAL);
    assert_non_null(strstr(why, "https://"));
    /* A bad prefix names the field. */
    struct gs_diags d = {0};
    struct gs_store *s = NULL;
    struct gs_store_etcd_opts so = {.endpoints = plain, .n_endpoints = 1, .prefix = "registry/", .diags = &d};
    assert_int_equal(gs_store_open_etcd(&so, &s), GS_EINVAL);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, "etcd-prefix");
    assert_non_null(strstr(d.v[0].msg, "\"registry/\""));
    gs_diags_free(&d);
    /* Nothing listening: refused after the bounded wait, naming the endpoint and the error. */
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", fx_free_port());
    const char *dead[] = {url};
    so = (struct gs_store_etcd_opts){.endpoints = dead, .n_endpoints = 1, .open_timeout_ms = 1500, .diags = &d};
    int64_t t0 = mono_ms();
    int err = gs_store_open_etcd(&so, &s);
    int64_t took = mono_ms() - t0;
    assert_true(err == GS_EIO || err == GS_ETIMEDOUT);
    assert_null(s);
    assert_true(took >= 1000 && took < 6000);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].msg, url));
    fprintf(stderr, "unreachable etcd: %s\n", d.v[0].msg);
    gs_diags_free(&d);
}

struct creator {
    struct gs_store *s;
    int id, n, errors;
};

static void *creator(void *arg)
{
    struct creator *c = arg;
    for (int i = 0; i < c->n; i++) {
        char k[48];
        snprintf(k, sizeof k, "bench/c%d-%d", c->id, i);
        json_t *o = obj(k, "x");
        if (gs_store_create(c->s, k, o, NULL)) c->errors++;
        json_decref(o);
    }
    return NULL;
}

static void concurrent_creates_get_distinct_versions(void **state)
{
    struct env *e = *state;
    enum { T = 4, N = 100 };
    struct creator c[T];
    pthread_t t[T];
    int64_t t0 = mono_ms();
    for (int i = 0; i < T; i++) {
        c[i] = (struct creator){e->s, i, N, 0};
        pthread_create(&t[i], NULL, creator, &c[i]);
    }
    for (int i = 0; i < T; i++) pthread_join(t[i], NULL);
    int64_t ms = mono_ms() - t0;
    for (int i = 0; i < T; i++) assert_int_equal(c[i].errors, 0);
    fprintf(stderr, "creates: %d in %lld ms from %d threads (%.0f/s)\n", T * N, (long long)ms, T,
            ms ? T * N * 1000.0 / (double)ms : 0.0);
    /* Each its own version: the watch saw T*N distinct, ascending ones. */
    int64_t after = 0;
    struct collect col = {json_array()};
    assert_int_equal(gs_store_list(e->s, "bench/", collect_fn, &col, &after), 0);
    assert_int_equal(json_array_size(col.names), T * N);
    json_decref(col.names);
}

static void a_dead_endpoint_is_passed_over(void **state)
{
    (void)state;
    char dead[64];
    snprintf(dead, sizeof dead, "http://127.0.0.1:%d", fx_free_port());
    const char *eps[] = {dead, etcd.url};
    struct gs_diags d = {0};
    struct gs_store *s = NULL;
    struct gs_store_etcd_opts o = {.endpoints = eps, .n_endpoints = 2, .prefix = "/failover",
                                   .compaction_interval_ms = -1, .diags = &d};
    assert_int_equal(gs_store_open_etcd(&o, &s), 0);
    gs_diags_free(&d);
    int64_t after = gs_store_current_rv(s), rv = 0;
    json_t *x = obj("x", "1");
    int64_t t0 = mono_ms();
    assert_int_equal(gs_store_create(s, "things/x", x, &rv), 0);
    assert_int_equal(gs_store_update(s, "things/x", x, rv, &rv), 0);
    assert_true(mono_ms() - t0 < 3000); /* the live member answers at once: no waiting on the dead one */
    struct gs_store_event *ev = NULL;
    size_t n = wait_events(s, &after, NULL, 2, &ev); /* the watch found the live member too */
    assert_int_equal(n, 2);
    assert_int_equal(ev[1].rv, rv);
    gs_store_events_free(ev, n);
    json_decref(x);
    gs_store_close(s);
}

static void tls_with_client_certificates(void **state)
{
    (void)state;
    struct fx_etcd t;
    int started = fx_etcd_start_tls(&t);
    if (started) fx_etcd_stop(&t);
    assert_int_equal(started, 0);
    const char *eps[] = {t.url};
    struct gs_diags d = {0};
    struct gs_store *s = NULL;
    struct gs_store_etcd_opts o = {.endpoints = eps, .n_endpoints = 1, .cafile = t.ca, .certfile = t.cert,
                                   .keyfile = t.key, .compaction_interval_ms = -1, .diags = &d};
    int err = gs_store_open_etcd(&o, &s);
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, "open: %s: %s\n", d.v[i].path, d.v[i].msg);
    gs_diags_free(&d);
    if (err) fx_etcd_stop(&t);
    assert_int_equal(err, 0);
    int64_t after = gs_store_current_rv(s), rv = 0;
    json_t *x = obj("x", "tls");
    assert_int_equal(gs_store_create(s, "things/x", x, &rv), 0);
    json_t *got = NULL;
    assert_int_equal(gs_store_get(s, "things/x", &got, NULL), 0);
    assert_string_equal(v_of(got), "tls");
    json_decref(got);
    struct gs_store_event *ev = NULL;
    size_t n = wait_events(s, &after, NULL, 1, &ev);
    assert_int_equal(n, 1);
    assert_int_equal(ev[0].rv, rv);
    gs_store_events_free(ev, n);
    gs_store_close(s);
    json_decref(x);
    /* Without the client certificate etcd refuses the handshake: no store. */
    o.certfile = o.keyfile = NULL;
    o.open_timeout_ms = 2000;
    o.diags = &d;
    assert_int_not_equal(gs_store_open_etcd(&o, &s), 0);
    assert_null(s);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].msg, t.url));
    gs_diags_free(&d);
    fx_etcd_stop(&t);
}

static Mvccpb__KeyValue kv_of(const char *key, const char *val, int64_t cr, int64_t mod)
{
    Mvccpb__KeyValue kv = MVCCPB__KEY_VALUE__INIT;
    kv.key = (ProtobufCBinaryData){strlen(key), (uint8_t *)(uintptr_t)key};
    kv.value = (ProtobufCBinaryData){val ? strlen(val) : 0, (uint8_t *)(uintptr_t)val};
    kv.create_revision = cr;
    kv.mod_revision = mod;
    return kv;
}

static void events_convert_from_etcd(void **state)
{
    (void)state;
    const char *pfx = "/registry/";
    size_t pl = strlen(pfx);
    Mvccpb__KeyValue kv = kv_of("/registry/pods/ns/p", "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"}}", 7, 7);
    Mvccpb__Event ev = MVCCPB__EVENT__INIT;
    ev.kv = &kv;
    struct gs_store_event out;
    assert_int_equal(gs__etcd_event_convert(pfx, pl, &ev, &out), 0);
    assert_int_equal(out.type, GS_STORE_ADDED); /* created in this revision */
    assert_string_equal(out.key, "pods/ns/p");
    assert_int_equal(out.rv, 7);
    assert_non_null(strstr(out.value, "\"resourceVersion\":\"7\""));
    free(out.key);
    gs_store_text_release(out.value);
    kv.mod_revision = 9;
    assert_int_equal(gs__etcd_event_convert(pfx, pl, &ev, &out), 0);
    assert_int_equal(out.type, GS_STORE_MODIFIED);
    free(out.key);
    gs_store_text_release(out.value);
    /* A delete without its previous state (compacted): the name from the key. */
    Mvccpb__KeyValue dk = kv_of("/registry/pods/ns/p", NULL, 0, 11);
    ev.type = MVCCPB__EVENT__EVENT_TYPE__DELETE;
    ev.kv = &dk;
    assert_int_equal(gs__etcd_event_convert(pfx, pl, &ev, &out), 0);
    assert_int_equal(out.type, GS_STORE_DELETED);
    json_t *o = json_loads(out.value, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "metadata"), "name")), "p");
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "metadata"), "namespace")), "ns");
    assert_int_equal(gs_store_obj_rv(o), 11);
    json_decref(o);
    free(out.key);
    gs_store_text_release(out.value);
    /* With it: the last state, with the delete's version. */
    ev.prev_kv = &kv;
    assert_int_equal(gs__etcd_event_convert(pfx, pl, &ev, &out), 0);
    assert_non_null(strstr(out.value, "\"kind\":\"Pod\""));
    assert_non_null(strstr(out.value, "\"resourceVersion\":\"11\""));
    free(out.key);
    gs_store_text_release(out.value);
    /* Not ours or not an object. */
    Mvccpb__KeyValue other = kv_of("/other/x", "{}", 3, 3), bad = kv_of("/registry/x/y", "[1]", 3, 3),
                     norev = kv_of("/registry/x/y", "{}", 0, 0);
    ev.type = MVCCPB__EVENT__EVENT_TYPE__PUT;
    ev.prev_kv = NULL;
    ev.kv = &other;
    assert_int_equal(gs__etcd_event_convert(pfx, pl, &ev, &out), GS_EINVAL);
    ev.kv = &bad;
    assert_int_equal(gs__etcd_event_convert(pfx, pl, &ev, &out), GS_EPARSE);
    ev.kv = &norev;
    assert_int_equal(gs__etcd_event_convert(pfx, pl, &ev, &out), GS_EINVAL);
    ev.kv = NULL;
    assert_int_equal(gs__etcd_event_convert(pfx, pl, &ev, &out), GS_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(crud_versions_and_conflicts, setup, teardown),
        cmocka_unit_test_setup_teardown(list_snapshot_then_watch_sees_every_change, setup, teardown),
        cmocka_unit_test_setup_teardown(watch_from_a_fresh_write_waits_for_it, setup, teardown),
        cmocka_unit_test_setup_teardown(progress_moves_the_version_without_events, setup, teardown),
        cmocka_unit_test_setup_teardown(a_value_that_is_not_json_is_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(list_pages_over_many_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(compaction_expires_old_watches, setup, teardown),
        cmocka_unit_test_setup_teardown(mutate_retries_on_a_concurrent_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(fenced_writes_fail_once_the_fence_key_moved, setup, teardown),
        cmocka_unit_test(sqlite_has_no_fence),
        cmocka_unit_test_setup_teardown(interrupt_wakes_a_blocked_watcher, setup, teardown),
        cmocka_unit_test_setup_teardown(a_small_ring_expires_old_watchers, setup, teardown),
        cmocka_unit_test_setup_teardown(concurrent_creates_get_distinct_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(watch_survives_an_etcd_restart, setup, teardown),
        cmocka_unit_test(bad_options_and_unreachable_etcd_are_clear_errors),
        cmocka_unit_test(events_convert_from_etcd),
        cmocka_unit_test(tls_with_client_certificates),
        cmocka_unit_test(a_dead_endpoint_is_passed_over),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
