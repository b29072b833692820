/*
 * test_events.c - the Event recorder (control/events.h): aggregation by
 * key, the spam filter, the bounded queue, expiry on a simulated clock, the
 * events.k8s.io/v1 conversion both ways with its error messages, the
 * table row, and one producer (the node lifecycle) on a real store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/events.h"
#include "loops/nodelifecycle.h"
#include "control/resources.h"
#include "control/store.h"
#include "tmpdir_fixture.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define T0 (1790000000LL * GS_NS_PER_SEC) /* a wall time in 2026, as ns */

/*--- A sink that keeps every write ---*/

struct fake {
    json_t *writes;  /* [{ns, name, update, ev}] */
    json_t *stored;  /* "ns/name" -> ev */
    bool gate;       /* writes wait while set */
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static int fake_write(void *ctx, const char *ns, const char *name, const json_t *ev, bool update)
{
    struct fake *f = ctx;
    pthread_mutex_lock(&f->mu);
    while (f->gate) pthread_cond_wait(&f->cv, &f->mu);
    char key[700];
    snprintf(key, sizeof key, "%s/%s", ns, name);
    int err = 0;
    if (update && !json_object_get(f->stored, key)) err = GS_ENOENT;
    else if (!update && json_object_get(f->stored, key)) err = GS_EEXIST;
    else json_object_set_new(f->stored, key, json_deep_copy(ev));
    if (!err)
        json_array_append_new(f->writes, json_pack("{s:s, s:s, s:b, s:O}", "ns", ns, "name", name, "update", update,
                                                   "ev", ev));
    pthread_mutex_unlock(&f->mu);
    return err;
}

struct fx {
    struct fake f;
    struct gs_clock clk;
    struct gs_recorder *rec;
    struct gs_event_source src;
};

static int setup(void **state)
{
    struct fx *x = calloc(1, sizeof *x);
    x->f.writes = json_array();
    x->f.stored = json_object();
    pthread_mutex_init(&x->f.mu, NULL);
    pthread_cond_init(&x->f.cv, NULL);
    gs_clock_init_sim(&x->clk, T0);
    struct gs_recorder_opts o = {.sink = {fake_write, &x->f}, .clock = &x->clk, .sync = true};
    assert_int_equal(gs_recorder_new(&o, &x->rec), 0);
    x->src = (struct gs_event_source){x->rec, "default-scheduler", NULL, 0};
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    struct fx *x = *state;
    gs_recorder_free(x->rec);
    json_decref(x->f.writes);
    json_decref(x->f.stored);
    pthread_mutex_destroy(&x->f.mu);
    pthread_cond_destroy(&x->f.cv);
    free(x);
    return 0;
}

static const struct gs_event_ref pod_a = {.kind = "Pod", .ns = "team", .name = "a", .uid = "uid-a"};

static const json_t *write_at(struct fx *x, size_t i) { return json_array_get(x->f.writes, i); }
static const char *wstr(const json_t *w, const char *k) { return json_string_value(json_object_get(w, k)); }
static const json_t *wev(const json_t *w) { return json_object_get(w, "ev"); }
static const char *estr(const json_t *w, const char *k) { return json_string_value(json_object_get(wev(w), k)); }

static void fail_scheduling(struct fx *x, const char *msg)
{
    gs_event_record(&x->src, &pod_a, "Warning", "FailedScheduling", "Scheduling", "%s", msg);
}

/*--- Aggregation ---*/

static void same_event_aggregates_into_one(void **state)
{
    struct fx *x = *state;
    fail_scheduling(x, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.");
    gs_clock_advance(&x->clk, 30 * GS_NS_PER_SEC);
    fail_scheduling(x, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.");
    gs_clock_advance(&x->clk, 30 * GS_NS_PER_SEC);
    fail_scheduling(x, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.");
    assert_int_equal(json_array_size(x->f.writes), 3);
    assert_int_equal(json_object_size(x->f.stored), 1); /* one Event */
    const json_t *first = write_at(x, 0), *last = write_at(x, 2);
    assert_false(json_is_true(json_object_get(first, "update")));
    assert_true(json_is_true(json_object_get(last, "update")));
    assert_string_equal(wstr(first, "name"), wstr(last, "name"));
    assert_string_equal(wstr(first, "ns"), "team");
    /* kube's name: "<object>.<hex of the time in ns>" */
    char want[64];
    snprintf(want, sizeof want, "a.%llx", (unsigned long long)T0);
    assert_string_equal(wstr(first, "name"), want);
    assert_int_equal(json_integer_value(json_object_get(wev(last), "count")), 3);
    assert_string_equal(estr(last, "firstTimestamp"), estr(first, "firstTimestamp"));
    assert_string_not_equal(estr(last, "lastTimestamp"), estr(first, "lastTimestamp"));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(wev(last), "series"), "count")), 3);
    const json_t *io = json_object_get(wev(last), "involvedObject");
    assert_string_equal(json_string_value(json_object_get(io, "uid")), "uid-a");
    assert_string_equal(json_string_value(json_object_get(io, "namespace")), "team");
    assert_string_equal(json_string_value(json_object_get(io, "apiVersion")), "v1");
    assert_string_equal(estr(last, "reportingComponent"), "default-scheduler");
    assert_string_equal(estr(last, "action"), "Scheduling");
    assert_string_equal(estr(last, "type"), "Warning");
    struct gs_recorder_stats st;
    gs_recorder_stats(x->rec, &st);
    assert_int_equal(st.created, 1);
    assert_int_equal(st.aggregated, 2);
}

static void different_key_or_old_event_starts_anew(void **state)
{
    struct fx *x = *state;
    fail_scheduling(x, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.");
    fail_scheduling(x, "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."); /* another message */
    struct gs_event_ref other_uid = pod_a;
    other_uid.uid = "uid-b"; /* a new pod of the same name */
    gs_event_record(&x->src, &other_uid, "Warning", "FailedScheduling", NULL, "0/2 nodes are available: 2 "
                    "Insufficient nvidia.com/gpu.");
    assert_int_equal(json_object_size(x->f.stored), 3);
    /* Past the 10-minute window: a new Event, not count 2. */
    gs_clock_advance(&x->clk, GS_EVENT_WINDOW_NS + GS_NS_PER_SEC);
    fail_scheduling(x, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.");
    assert_int_equal(json_object_size(x->f.stored), 4);
    assert_int_equal(json_integer_value(json_object_get(wev(write_at(x, 3)), "count")), 1);
    /* action defaults to the reason */
    assert_string_equal(estr(write_at(x, 2), "action"), "FailedScheduling");
}

static void expired_event_is_created_again(void **state)
{
    struct fx *x = *state;
    fail_scheduling(x, "no nodes");
    json_object_clear(x->f.stored); /* the TTL sweep removed it */
    fail_scheduling(x, "no nodes");
    assert_int_equal(json_array_size(x->f.writes), 2);
    const json_t *w = write_at(x, 1);
    assert_false(json_is_true(json_object_get(w, "update")));
    assert_int_equal(json_integer_value(json_object_get(wev(w), "count")), 1);
}

/*--- Spam filter ---*/

static void spam_filter_per_object(void **state)
{
    struct fx *x = *state;
    for (int i = 0; i < GS_EVENT_BURST + 5; i++) {
        char msg[32];
        snprintf(msg, sizeof msg, "attempt %d", i); /* distinct messages: no aggregation */
        fail_scheduling(x, msg);
    }
    struct gs_recorder_stats st;
    gs_recorder_stats(x->rec, &st);
    assert_int_equal(st.created, GS_EVENT_BURST);
    assert_int_equal(st.dropped_rate, 5);
    /* Another object has its own bucket. */
    struct gs_event_ref b = {.kind = "Pod", .ns = "team", .name = "b", .uid = "uid-b"};
    gs_event_record(&x->src, &b, "Normal", "Scheduled", NULL, "Successfully assigned team/b to n1");
    gs_recorder_stats(x->rec, &st);
    assert_int_equal(st.created, GS_EVENT_BURST + 1);
    /* One token back per refill period. */
    gs_clock_advance(&x->clk, GS_EVENT_REFILL_NS);
    fail_scheduling(x, "later 1");
    fail_scheduling(x, "later 2");
    gs_recorder_stats(x->rec, &st);
    assert_int_equal(st.created, GS_EVENT_BURST + 2);
    assert_int_equal(st.dropped_rate, 6);
}

static void distinct_source_writes_each(void **state)
{
    struct fx *x = *state;
    struct gs_event_source op = {x->rec, "gpusched-operator", NULL, GS_EVENT_DISTINCT};
    struct gs_event_ref node = {.kind = "Node", .name = "n1", .uid = "node-uid"};
    for (int i = 0; i < GS_EVENT_BURST + 5; i++)
        gs_event_record(&op, &node, "Normal", "DriverValidating", NULL, "GPU stack not-ready -> driver");
    assert_int_equal(json_object_size(x->f.stored), GS_EVENT_BURST + 5);
    /* Cluster-scoped objects: the Event lives in default, involvedObject has no namespace. */
    const json_t *w = write_at(x, 0);
    assert_string_equal(wstr(w, "ns"), "default");
    assert_null(json_object_get(json_object_get(wev(w), "involvedObject"), "namespace"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(wev(w), "source"), "component")),
                        "gpusched-operator");
}

static void source_host_and_field_path(void **state)
{
    struct fx *x = *state;
    struct gs_event_source kubelet = {x->rec, "kubelet", "gpu-node-1", 0};
    struct gs_event_ref ctr = pod_a;
    ctr.field_path = "spec.containers{main}";
    gs_event_record(&kubelet, &ctr, "Normal", "Started", NULL, "Started container %s", "main");
    const json_t *ev = wev(write_at(x, 0));
    assert_string_equal(json_string_value(json_object_get(json_object_get(ev, "source"), "host")), "gpu-node-1");
    assert_string_equal(json_string_value(json_object_get(ev, "reportingInstance")), "gpu-node-1");
    assert_string_equal(json_string_value(json_object_get(json_object_get(ev, "involvedObject"), "fieldPath")),
                        "spec.containers{main}");
    assert_string_equal(json_string_value(json_object_get(ev, "message")), "Started container main");
}

/*--- The queue ---*/

static void full_queue_drops_and_counts(void **state)
{
    struct fx *x = *state;
    struct gs_recorder *r;
    struct gs_recorder_opts o = {.sink = {fake_write, &x->f}, .clock = &x->clk, .queue_len = 2};
    assert_int_equal(gs_recorder_new(&o, &r), 0);
    struct gs_event_source src = {r, "default-scheduler", NULL, GS_EVENT_DISTINCT};
    pthread_mutex_lock(&x->f.mu);
    x->f.gate = true; /* the sink stalls: the recorder's thread holds at most one record */
    pthread_mutex_unlock(&x->f.mu);
    for (int i = 0; i < 10; i++) gs_event_record(&src, &pod_a, "Normal", "Scheduled", NULL, "bound %d", i);
    struct gs_recorder_stats st;
    gs_recorder_stats(r, &st);
    /* The sink opens again before any assertion, so a failing one cannot
     * leave the recorder's thread waiting on a gate that teardown frees. */
    pthread_mutex_lock(&x->f.mu);
    x->f.gate = false;
    pthread_cond_broadcast(&x->f.cv);
    pthread_mutex_unlock(&x->f.mu);
    assert_true(st.dropped_full >= 6); /* 2 queued, at most 2 more taken by the thread in one batch */
    assert_int_equal(st.recorded + st.dropped_full, 10);
    gs_recorder_flush(r);
    gs_recorder_stats(r, &st);
    assert_int_equal(st.created, st.recorded);
    assert_int_equal(json_array_size(x->f.writes), st.recorded);
    gs_recorder_free(r);
}

/*--- Expiry, on a real store ---*/

/* A SQLite store in a new scratch directory (its name into dir). */
static struct gs_store *scratch_store(char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/gs-events-XXXXXX");
    assert_non_null(mkdtemp(dir));
    struct gs_store *s = NULL;
    struct gs_store_opts so = {.dir = dir};
    assert_int_equal(gs_store_open_sqlite(&so, &s), 0);
    return s;
}

static int count_events(const char *key, json_t *obj, void *arg)
{
    (void)key, (void)obj;
    (*(int *)arg)++;
    return 0;
}

static int stored_events(struct gs_store *s)
{
    int n = 0;
    int64_t rv;
    assert_int_equal(gs_store_list(s, "events/", count_events, &n, &rv), 0);
    return n;
}

static void expiry_after_last_write(void **state)
{
    (void)state;
    char dir[64];
    struct gs_store *s = scratch_store(dir, sizeof dir);
    struct gs_clock clk;
    gs_clock_init_sim(&clk, T0);
    struct gs_recorder *r;
    struct gs_recorder_opts o = {.store = s, .clock = &clk, .sync = true, .ttl_ns = 3600 * GS_NS_PER_SEC};
    assert_int_equal(gs_recorder_new(&o, &r), 0);
    struct gs_event_source src = {r, "default-scheduler", NULL, 0};
    gs_event_record(&src, &pod_a, "Normal", "Scheduled", NULL, "Successfully assigned team/a to n1");
    gs_event_record(&src, &pod_a, "Warning", "FailedScheduling", NULL, "no nodes");
    assert_int_equal(stored_events(s), 2);
    json_t *ev = NULL;
    char key[128];
    snprintf(key, sizeof key, "events/team/a.%llx", (unsigned long long)T0);
    assert_int_equal(gs_store_get(s, key, &ev, NULL), 0);
    assert_string_equal(json_string_value(json_object_get(ev, "kind")), "Event");
    assert_non_null(json_object_get(json_object_get(ev, "metadata"), "uid"));
    json_decref(ev);
    /* 9 minutes on, the failure happens again: its Event is refreshed (aggregated). */
    gs_clock_advance(&clk, 9 * 60 * GS_NS_PER_SEC);
    gs_event_record(&src, &pod_a, "Warning", "FailedScheduling", NULL, "no nodes");
    assert_int_equal(stored_events(s), 2);
    gs_clock_advance(&clk, 50 * 60 * GS_NS_PER_SEC);
    size_t removed = 99;
    assert_int_equal(gs_events_expire(s, gs_clock_now(&clk), 3600 * GS_NS_PER_SEC, &removed), 0);
    assert_int_equal(removed, 0); /* 59 minutes: both kept */
    /* At 61 minutes the first is an hour past its last write; the refreshed one is not. */
    gs_clock_advance(&clk, 2 * 60 * GS_NS_PER_SEC);
    gs_recorder_sweep(r);
    assert_int_equal(stored_events(s), 1);
    struct gs_recorder_stats st;
    gs_recorder_stats(r, &st);
    assert_int_equal(st.expired, 1);
    /* And an hour after that, nothing is left. */
    gs_clock_advance(&clk, 3600 * GS_NS_PER_SEC);
    gs_recorder_sweep(r);
    assert_int_equal(stored_events(s), 0);
    gs_recorder_free(r);
    gs_store_close(s);
    fx_rm_tree(dir);
}

static int collect_scheduled(const char *key, json_t *obj, void *arg)
{
    const char *reason = json_string_value(json_object_get(obj, "reason"));
    if (reason && !strcmp(reason, "Scheduled")) json_object_set_new(arg, key, json_true());
    return 0;
}

/* The store sink under a burst: a name taken by another writer, or an
 * Event deleted before its update, falls back to creating one more. */
static void store_batches_and_recovers(void **state)
{
    (void)state;
    char dir[64];
    struct gs_store *s = scratch_store(dir, sizeof dir);
    struct gs_clock clk;
    gs_clock_init_sim(&clk, T0);
    char key[128];
    snprintf(key, sizeof key, "events/team/a.%llx", (unsigned long long)T0);
    json_t *squatter = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "Event", "metadata", "name",
                                 key + strlen("events/team/"), "namespace", "team");
    assert_int_equal(gs_store_create(s, key, squatter, NULL), 0);
    json_decref(squatter);
    struct gs_recorder *r;
    struct gs_recorder_opts o = {.store = s, .clock = &clk};
    assert_int_equal(gs_recorder_new(&o, &r), 0);
    struct gs_event_source src = {r, "default-scheduler", NULL, 0};
    for (int i = 0; i < 40; i++) {
        struct gs_event_ref ref = pod_a;
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        if (i) ref.name = name; /* the first takes the squatted name */
        gs_event_record(&src, &ref, "Normal", "Scheduled", NULL, "Successfully assigned team/%s to n1", ref.name);
    }
    gs_recorder_flush(r);
    assert_int_equal(stored_events(s), 41);
    struct gs_recorder_stats st;
    gs_recorder_stats(r, &st);
    assert_int_equal(st.created, 40);
    assert_int_equal(st.write_errors, 0);
    /* The squatter stays as it was; pod a's Event took a later name. */
    json_t *mine = json_object();
    int64_t rv;
    assert_int_equal(gs_store_list(s, "events/team/a.", collect_scheduled, mine, &rv), 0);
    assert_int_equal(json_object_size(mine), 1);
    const char *k = json_object_iter_key(json_object_iter(mine));
    assert_string_not_equal(k, key);
    snprintf(key, sizeof key, "%s", k);
    json_decref(mine);
    /* Deleted before the next occurrence: created again, count 1. */
    assert_int_equal(gs_store_delete(s, key, 0, NULL, NULL), 0);
    gs_event_record(&src, &pod_a, "Normal", "Scheduled", NULL, "Successfully assigned team/a to n1");
    gs_recorder_flush(r);
    gs_recorder_stats(r, &st);
    assert_int_equal(st.created, 41);
    assert_int_equal(st.aggregated, 0);
    assert_int_equal(stored_events(s), 41);
    gs_recorder_free(r);
    gs_store_close(s);
    fx_rm_tree(dir);
}

/*--- The store sink under the thread's batches ---*/

/* A store that forwards the recorder's writes to a real one, notes each
 * (c: create, u: update), can hold a write until released, and can fail
 * writes as a failed commit does. */
struct wrap {
    struct gs_store base; /* first: the recorder's calls come back as this */
    struct gs_store *real;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool gate, fail;
    int calls;
    char ops[64];
};

/* Notes the call and waits at the gate; true when it is to fail. */
static bool wrap_enter(struct wrap *w, char op)
{
    pthread_mutex_lock(&w->mu);
    if (w->calls < (int)sizeof w->ops - 1) w->ops[w->calls] = op;
    w->calls++;
    pthread_cond_broadcast(&w->cv);
    while (w->gate) pthread_cond_wait(&w->cv, &w->mu);
    bool fail = w->fail;
    pthread_mutex_unlock(&w->mu);
    return fail;
}

static int w_create(struct gs_store *b, const char *key, json_t *obj, int64_t *rv)
{
    struct wrap *w = (struct wrap *)b;
    return wrap_enter(w, 'c') ? GS_EIO : gs_store_create(w->real, key, obj, rv);
}

static int w_mutate(struct gs_store *b, const char *key, gs_store_mutate_fn fn, void *arg, json_t **out, int64_t *rv)
{
    struct wrap *w = (struct wrap *)b;
    return wrap_enter(w, 'u') ? GS_EIO : gs_store_mutate(w->real, key, fn, arg, out, rv);
}

static const struct gs_store_vtbl wrap_vtbl = {.create = w_create, .mutate = w_mutate};

static void wrap_set(struct wrap *w, bool gate, bool fail)
{
    pthread_mutex_lock(&w->mu);
    w->gate = gate;
    w->fail = fail;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Waits until the recorder's thread is in its calls-th write. */
static void wrap_wait_calls(struct wrap *w, int calls)
{
    pthread_mutex_lock(&w->mu);
    while (w->calls < calls) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

static void record_scheduled(struct gs_event_source *src, const char *pod)
{
    struct gs_event_ref ref = pod_a;
    ref.name = pod;
    gs_event_record(src, &ref, "Normal", "Scheduled", NULL, "Successfully assigned team/%s to n1", pod);
}

static json_int_t stored_count(struct gs_store *s, const char *key)
{
    json_t *ev = NULL;
    assert_int_equal(gs_store_get(s, key, &ev, NULL), 0);
    json_int_t n = json_integer_value(json_object_get(ev, "count"));
    json_decref(ev);
    return n;
}

/* What the thread takes from the queue at once (here an aggregated update
 * and a create, then a create and its aggregation) is written in record
 * order; writes that fail (a failed commit) count an error for each record
 * and forget the aggregation, so the next record creates a new Event rather
 * than updating one that was never written. */
static void store_sink_takes_batches_in_order(void **state)
{
    (void)state;
    char dir[64];
    struct wrap w = {.base = {&wrap_vtbl}, .real = scratch_store(dir, sizeof dir)};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    struct gs_clock clk;
    gs_clock_init_sim(&clk, T0);
    struct gs_recorder *r;
    struct gs_recorder_opts o = {.store = &w.base, .clock = &clk};
    assert_int_equal(gs_recorder_new(&o, &r), 0);
    struct gs_event_source src = {r, "default-scheduler", NULL, 0};
    char key_a[128];
    snprintf(key_a, sizeof key_a, "events/team/a.%llx", (unsigned long long)T0);

    /* a's first Event is held in the store; a again and b queue meanwhile. */
    wrap_set(&w, true, false);
    record_scheduled(&src, "a");
    wrap_wait_calls(&w, 1);
    gs_clock_advance(&clk, GS_NS_PER_SEC);
    record_scheduled(&src, "a");
    record_scheduled(&src, "b");
    wrap_set(&w, false, false);
    gs_recorder_flush(r);
    assert_string_equal(w.ops, "cuc"); /* a's create; then a's update and b's create */
    struct gs_recorder_stats st;
    gs_recorder_stats(r, &st);
    assert_int_equal(st.created, 2);
    assert_int_equal(st.aggregated, 1);
    assert_int_equal(st.write_errors, 0);
    assert_int_equal(stored_events(w.real), 2);
    assert_int_equal(stored_count(w.real, key_a), 2);

    /* An Event created and aggregated within one batch: one row, count 2. */
    wrap_set(&w, true, false);
    record_scheduled(&src, "b");
    wrap_wait_calls(&w, 4);
    gs_clock_advance(&clk, GS_NS_PER_SEC);
    record_scheduled(&src, "c");
    gs_clock_advance(&clk, GS_NS_PER_SEC);
    record_scheduled(&src, "c");
    wrap_set(&w, false, false);
    gs_recorder_flush(r);
    assert_string_equal(w.ops, "cucucu");
    char key_c[128];
    snprintf(key_c, sizeof key_c, "events/team/c.%llx", (unsigned long long)(T0 + 2 * GS_NS_PER_SEC));
    assert_int_equal(stored_count(w.real, key_c), 2);
    assert_int_equal(stored_events(w.real), 3);

    /* Failed writes: e's create, a's update and d's create are lost and counted. */
    wrap_set(&w, true, true);
    record_scheduled(&src, "e");
    wrap_wait_calls(&w, 7);
    record_scheduled(&src, "a");
    record_scheduled(&src, "d");
    wrap_set(&w, false, true);
    gs_recorder_flush(r);
    assert_string_equal(w.ops, "cucucucuc");
    gs_recorder_stats(r, &st);
    assert_int_equal(st.write_errors, 3);
    assert_int_equal(stored_events(w.real), 3);
    assert_int_equal(stored_count(w.real, key_a), 2);
    /* The store is back: a starts a new Event (its count was not written). */
    wrap_set(&w, false, false);
    gs_clock_advance(&clk, GS_NS_PER_SEC);
    record_scheduled(&src, "a");
    gs_recorder_flush(r);
    gs_recorder_stats(r, &st);
    assert_int_equal(st.write_errors, 3);
    assert_int_equal(st.created, 4);
    assert_int_equal(stored_events(w.real), 4);
    assert_int_equal(stored_count(w.real, key_a), 2);

    gs_recorder_free(r);
    gs_store_close(w.real);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    fx_rm_tree(dir);
}

/*--- A producer: the node lifecycle ---*/

static int collect_reasons(const char *key, json_t *obj, void *arg)
{
    (void)key;
    json_array_append_new(arg, json_pack("{s:s, s:s, s:s}", "reason", json_string_value(json_object_get(obj, "reason")),
                                         "kind", json_string_value(json_object_get(json_object_get(obj,
                                         "involvedObject"), "kind")), "name", json_string_value(json_object_get(
                                         json_object_get(obj, "involvedObject"), "name"))));
    return 0;
}

static void lost_node_is_recorded(void **state)
{
    (void)state;
    char dir[64];
    struct gs_store *s = scratch_store(dir, sizeof dir);
    struct gs_recorder *r;
    struct gs_recorder_opts ro = {.store = s, .sync = true};
    assert_int_equal(gs_recorder_new(&ro, &r), 0);
    double now = (double)time(NULL);
    time_t hb = (time_t)now - 60;
    struct tm tm;
    gmtime_r(&hb, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *n = json_pack("{s:s,s:s,s:{s:s,s:s},s:{},s:{s:[{s:s,s:s,s:s}]}}", "apiVersion", "v1", "kind", "Node",
                          "metadata", "name", "lost", "uid", "node-uid", "spec", "status", "conditions", "type",
                          "Ready", "status", "True", "lastHeartbeatTime", ts);
    assert_int_equal(gs_store_create(s, "nodes/lost", n, NULL), 0);
    json_decref(n);
    json_t *p = json_pack("{s:s,s:s,s:{s:s,s:s,s:s},s:{s:s,s:s},s:{s:s}}", "apiVersion", "v1", "kind", "Pod",
                          "metadata", "name", "job", "namespace", "default", "uid", "job-uid", "spec", "nodeName",
                          "lost", "restartPolicy", "Never", "status", "phase", "Running");
    assert_int_equal(gs_store_create(s, "pods/default/job", p, NULL), 0);
    json_decref(p);
    struct gs_nodelc *lc;
    struct gs_source *src;
    assert_int_equal(gs_source_local_new(s, &src), 0);
    struct gs_nodelc_opts o = {.source = src, .grace_ms = 10000, .events = r};
    assert_int_equal(gs_nodelc_new(&o, now - 3600, &lc), 0);
    gs_nodelc_scan(lc, now);
    gs_nodelc_scan(lc, now + 1); /* nothing new to say */
    json_t *all = json_array();
    int64_t rv;
    assert_int_equal(gs_store_list(s, "events/", collect_reasons, all, &rv), 0);
    char *text = json_dumps(all, JSON_SORT_KEYS | JSON_COMPACT);
    assert_int_equal(json_array_size(all), 2);
    assert_non_null(strstr(text, "{\"kind\":\"Node\",\"name\":\"lost\",\"reason\":\"NodeNotReady\"}"));
    /* The pod tolerates nothing: the taint manager evicts it at once; it is
     * failed or re-created (NodeControllerEviction) only once the eviction settles. */
    assert_non_null(strstr(text, "{\"kind\":\"Pod\",\"name\":\"job\",\"reason\":\"TaintManagerEviction\"}"));
    free(text);
    json_decref(all);
    gs_nodelc_stop(lc);
    gs_recorder_free(r);
    gs_source_free(src);
    gs_store_close(s);
    fx_rm_tree(dir);
}

/*--- events.k8s.io/v1 ---*/

static void conversion_to_events_v1(void **state)
{
    struct fx *x = *state;
    fail_scheduling(x, "no nodes");
    fail_scheduling(x, "no nodes");
    const json_t *core = wev(write_at(x, 1));
    json_t *v1 = gs_event_to_events_v1(core);
    assert_non_null(v1);
    assert_string_equal(json_string_value(json_object_get(v1, "apiVersion")), "events.k8s.io/v1");
    assert_string_equal(json_string_value(json_object_get(v1, "note")), "no nodes");
    assert_string_equal(json_string_value(json_object_get(json_object_get(v1, "regarding"), "name")), "a");
    assert_string_equal(json_string_value(json_object_get(v1, "reportingController")), "default-scheduler");
    assert_int_equal(json_integer_value(json_object_get(v1, "deprecatedCount")), 2);
    assert_string_equal(json_string_value(json_object_get(v1, "deprecatedLastTimestamp")),
                        json_string_value(json_object_get(core, "lastTimestamp")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(v1, "series"), "count")), 2);
    assert_null(json_object_get(v1, "involvedObject"));
    assert_null(json_object_get(v1, "message"));
    /* And back: the same core object. */
    struct gs_diags d = {0};
    json_t *back = NULL;
    assert_int_equal(gs_event_from_events_v1(v1, &back, &d), 0);
    assert_true(json_equal(back, core));
    json_decref(back);
    json_decref(v1);
    /* Only the events.k8s.io resource is served converted. */
    size_t n;
    const struct gs_api_resource *t = gs_api_resources(&n);
    const struct gs_api_resource *core_res = gs_api_resource_find("", "v1", "events");
    const struct gs_api_resource *v1_res = gs_api_resource_find("events.k8s.io", "v1", "events");
    assert_non_null(t);
    assert_non_null(v1_res);
    assert_string_equal(v1_res->id, core_res->id); /* one storage */
    assert_false(gs_event_res_is_v1(core_res));
    assert_true(gs_event_res_is_v1(v1_res));
    assert_null(gs_event_text_for(core_res, "{}"));
    char *text = gs_event_text_for(v1_res, "{\"message\":\"m\",\"count\":3}");
    assert_non_null(strstr(text, "\"note\":\"m\""));
    assert_non_null(strstr(text, "\"deprecatedCount\":3"));
    free(text);
}

static bool has_diag(const struct gs_diags *d, const char *path, const char *part)
{
    for (size_t i = 0; i < d->n; i++)
        if (!strcmp(d->v[i].path, path) && strstr(d->v[i].msg, part)) return true;
    return false;
}

static void events_v1_errors_name_the_field(void **state)
{
    (void)state;
    struct gs_diags d = {0};
    json_t *out = NULL;
    json_t *in = json_pack("{s:s, s:i}", "note", "x", "regarding", 3);
    assert_int_equal(gs_event_from_events_v1(in, &out, &d), GS_EINVAL);
    assert_true(has_diag(&d, "regarding", "must be an object"));
    assert_null(out);
    json_decref(in);
    gs_diags_free(&d);

    in = json_pack("{s:s, s:s, s:{s:s}}", "type", "Fatal", "eventTime", "yesterday", "regarding", "kind", "Pod");
    assert_int_equal(gs_event_from_events_v1(in, &out, &d), GS_EINVAL);
    assert_true(has_diag(&d, "type", "Unsupported value: \"Fatal\""));
    assert_true(has_diag(&d, "regarding.name", "Required value"));
    assert_true(has_diag(&d, "reason", "Required value"));
    assert_true(has_diag(&d, "reportingController", "Required value"));
    assert_true(has_diag(&d, "eventTime", "Invalid value: \"yesterday\""));
    json_decref(in);
    gs_diags_free(&d);

    char big[GS_EVENT_MESSAGE_MAX + 10];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    in = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s}}", "type", "Normal", "reason", "Started",
                   "action", "Start", "eventTime", "2026-01-02T03:04:05.000000Z", "reportingController", "me",
                   "reportingInstance", "me-1", "note", big, "regarding", "kind", "Pod", "name", "p");
    assert_int_equal(gs_event_from_events_v1(in, &out, &d), GS_EINVAL);
    assert_true(has_diag(&d, "note", "Too long"));
    gs_diags_free(&d);
    json_object_set_new(in, "note", json_string("fine"));
    assert_int_equal(gs_event_from_events_v1(in, &out, &d), 0);
    assert_string_equal(json_string_value(json_object_get(out, "message")), "fine");
    assert_string_equal(json_string_value(json_object_get(out, "reportingComponent")), "me");
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "involvedObject"), "name")), "p");
    assert_string_equal(json_string_value(json_object_get(out, "apiVersion")), "v1");
    json_decref(out);
    json_decref(in);
    gs_diags_free(&d);

    in = json_string("not an object");
    assert_int_equal(gs_event_from_events_v1(in, &out, &d), GS_EINVAL);
    assert_true(has_diag(&d, "", "JSON object"));
    json_decref(in);
    gs_diags_free(&d);
}

static void table_row_shows_counts(void **state)
{
    struct fx *x = *state;
    fail_scheduling(x, "no nodes");
    gs_clock_advance(&x->clk, 120 * GS_NS_PER_SEC);
    fail_scheduling(x, "no nodes");
    gs_clock_advance(&x->clk, 120 * GS_NS_PER_SEC);
    fail_scheduling(x, "no nodes");
    double now = (double)gs_clock_now(&x->clk) / GS_NS_PER_SEC + 60;
    json_t *row = gs_event_table_row(wev(write_at(x, 2)), now);
    json_t *cols = gs_event_table_columns();
    assert_int_equal(json_array_size(row), json_array_size(cols));
    assert_string_equal(json_string_value(json_array_get(row, 0)), "60s (x3 over 5m)");
    assert_string_equal(json_string_value(json_array_get(row, 1)), "Warning");
    assert_string_equal(json_string_value(json_array_get(row, 2)), "FailedScheduling");
    assert_string_equal(json_string_value(json_array_get(row, 3)), "pod/a");
    assert_string_equal(json_string_value(json_array_get(row, 8)), "3");
    json_decref(row);
    json_decref(cols);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(same_event_aggregates_into_one, setup, teardown),
        cmocka_unit_test_setup_teardown(different_key_or_old_event_starts_anew, setup, teardown),
        cmocka_unit_test_setup_teardown(expired_event_is_created_again, setup, teardown),
        cmocka_unit_test_setup_teardown(spam_filter_per_object, setup, teardown),
        cmocka_unit_test_setup_teardown(distinct_source_writes_each, setup, teardown),
        cmocka_unit_test_setup_teardown(source_host_and_field_path, setup, teardown),
        cmocka_unit_test_setup_teardown(full_queue_drops_and_counts, setup, teardown),
        cmocka_unit_test(expiry_after_last_write),
        cmocka_unit_test(store_batches_and_recovers),
        cmocka_unit_test(store_sink_takes_batches_in_order),
        cmocka_unit_test(lost_node_is_recorded),
        cmocka_unit_test_setup_teardown(conversion_to_events_v1, setup, teardown),
        cmocka_unit_test(events_v1_errors_name_the_field),
        cmocka_unit_test_setup_teardown(table_row_shows_counts, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
