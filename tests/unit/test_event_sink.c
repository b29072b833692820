/*
 * test_event_sink.c - the recorder's sink over a gs_source (kube/event_sink.h):
 * a recorder's core v1 Event becomes a valid events.k8s.io/v1 Event (our
 * server's own validator accepts it) with the sink's reporter; through a
 * kube-kind transport creates go to "events.events.k8s.io/NS/NAME" in v1
 * form and an aggregation updates the same Event with series.count 2;
 * through the in-process source the core Event is stored under "events/".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/events.h"
#include "control/store.h"
#include "informer/source.h"
#include "kube/event_sink.h"
#include "tmpdir_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 (1767225600LL * GS_NS_PER_SEC) /* 2026-01-01T00:00:00Z */

static const char *sget(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    if (b) v = json_object_get(v, b);
    return json_string_value(v);
}

/*--- A kube-kind transport that keeps what it is asked to write ---*/

struct rec {
    struct gs_source base;
    json_t *objs; /* key -> object */
    json_t *ops;  /* ["create KEY", "mutate KEY"] */
};

static int r_create(struct gs_source *s, const char *key, json_t *obj, int64_t *rv)
{
    struct rec *r = (struct rec *)s;
    (void)rv;
    json_array_append_new(r->ops, json_sprintf("create %s", key));
    if (json_object_get(r->objs, key)) return GS_EEXIST;
    json_object_set_new(r->objs, key, json_deep_copy(obj));
    return 0;
}

static int r_mutate(struct gs_source *s, const char *key, const char *sub, gs_store_mutate_fn fn, void *arg,
                    json_t **out, int64_t *rv)
{
    struct rec *r = (struct rec *)s;
    (void)sub, (void)out, (void)rv;
    json_array_append_new(r->ops, json_sprintf("mutate %s", key));
    json_t *cur = json_deep_copy(json_object_get(r->objs, key)), *next = NULL;
    int err = fn(cur, &next, arg);
    json_decref(cur);
    if (!err) json_object_set_new(r->objs, key, next);
    return err;
}

static void r_free(struct gs_source *s) { (void)s; }

static const struct gs_source_vtbl rec_vtbl = {.kind = GS_SOURCE_KUBE, .create = r_create, .mutate = r_mutate,
                                               .free = r_free};

/*--- Tests ---*/

static void v1_form_passes_validation(void **state)
{
    (void)state;
    json_t *core = json_pack(
        "{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s}, s:s, s:s, s:s, s:s, s:{s:s}, s:s, s:s, s:s, s:s, s:s, s:I,"
        " s:{s:I, s:s}}",
        "apiVersion", "v1", "kind", "Event", "metadata", "name", "web.1", "namespace", "team", "involvedObject", "kind",
        "Pod", "name", "web", "namespace", "team", "uid", "u-1", "reason", "FailedScheduling", "message",
        "0/3 nodes are available", "type", "Warning", "action", "Scheduling", "source", "component", "gpusched",
        "reportingComponent", "gpusched", "reportingInstance", "gpusched", "firstTimestamp", "2026-01-01T00:00:00Z",
        "lastTimestamp", "2026-01-01T00:00:05Z", "eventTime", "2026-01-01T00:00:00.000000Z", "count", (json_int_t)2,
        "series", "count", (json_int_t)2, "lastObservedTime", "2026-01-01T00:00:05.000000Z");
    json_t *v1 = gs_kube_event_v1(core, "gpusched-ext", "gpusched-ext-host-1");
    assert_non_null(v1);
    assert_string_equal(sget(v1, "apiVersion", NULL), "events.k8s.io/v1");
    assert_string_equal(sget(v1, "regarding", "name"), "web");
    assert_string_equal(sget(v1, "regarding", "uid"), "u-1");
    assert_string_equal(sget(v1, "note", NULL), "0/3 nodes are available");
    assert_string_equal(sget(v1, "reportingController", NULL), "gpusched-ext");
    assert_string_equal(sget(v1, "reportingInstance", NULL), "gpusched-ext-host-1");
    assert_string_equal(sget(v1, "eventTime", NULL), "2026-01-01T00:00:00.000000Z");
    assert_string_equal(sget(v1, "deprecatedSource", "component"), "gpusched");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(v1, "series"), "count")), 2);
    assert_null(json_object_get(v1, "involvedObject"));
    assert_null(json_object_get(v1, "message"));
    struct gs_diags d = {0};
    json_t *back = NULL;
    assert_int_equal(gs_event_from_events_v1(v1, &back, &d), 0); /* what our server checks on a POST */
    assert_int_equal(d.n, 0);
    assert_string_equal(sget(back, "message", NULL), "0/3 nodes are available");
    json_decref(back);
    json_decref(v1);
    /* A first occurrence carries no series (events.k8s.io wants count >= 2 there). */
    json_object_set_new(json_object_get(core, "series"), "count", json_integer(1));
    v1 = gs_kube_event_v1(core, NULL, NULL);
    assert_null(json_object_get(v1, "series"));
    assert_string_equal(sget(v1, "reportingController", NULL), "gpusched");
    json_decref(v1);
    json_decref(core);
}

static void kube_transport_gets_events_v1(void **state)
{
    (void)state;
    struct rec r = {.base.v = &rec_vtbl, .objs = json_object(), .ops = json_array()};
    struct gs_kube_event_sink *s = NULL;
    struct gs_kube_event_sink_opts so = {.source = &r.base, .controller = "gpusched-ext", .instance = "replica-a"};
    assert_int_equal(gs_kube_event_sink_new(&so, &s), 0);
    struct gs_clock clk;
    gs_clock_init_sim(&clk, T0);
    struct gs_recorder *rc = NULL;
    struct gs_recorder_opts ro = {.sink = gs_kube_event_sink(s), .clock = &clk, .sync = true};
    assert_int_equal(gs_recorder_new(&ro, &rc), 0);
    struct gs_event_source src = {rc, "gpusched-ext", NULL, 0};
    gs_event_record(&src, GS_EVENT_POD("team", "web", "u-1"), "Warning", "FailedScheduling", "Scheduling", "no fit");
    gs_clock_advance(&clk, 5 * GS_NS_PER_SEC);
    gs_event_record(&src, GS_EVENT_POD("team", "web", "u-1"), "Warning", "FailedScheduling", "Scheduling", "no fit");
    assert_int_equal(json_array_size(r.ops), 2);
    const char *op0 = json_string_value(json_array_get(r.ops, 0)), *op1 = json_string_value(json_array_get(r.ops, 1));
    assert_true(!strncmp(op0, "create events.events.k8s.io/team/web.", 37));
    assert_string_equal(op1 + 7, op0 + 7); /* the same Event updated */
    assert_true(!strncmp(op1, "mutate ", 7));
    json_t *ev = json_object_get(r.objs, op0 + 7);
    assert_string_equal(sget(ev, "apiVersion", NULL), "events.k8s.io/v1");
    assert_string_equal(sget(ev, "regarding", "name"), "web");
    assert_string_equal(sget(ev, "note", NULL), "no fit");
    assert_string_equal(sget(ev, "action", NULL), "Scheduling");
    assert_string_equal(sget(ev, "reportingController", NULL), "gpusched-ext");
    assert_string_equal(sget(ev, "reportingInstance", NULL), "replica-a");
    assert_string_equal(sget(ev, "metadata", "namespace"), "team");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(ev, "series"), "count")), 2);
    assert_string_equal(sget(ev, "series", "lastObservedTime"), "2026-01-01T00:00:05.000000Z");
    struct gs_kube_event_sink_stats st;
    gs_kube_event_sink_stats(s, &st);
    assert_int_equal(st.created, 1);
    assert_int_equal(st.updated, 1);
    assert_int_equal(st.errors, 0);
    /* The Event vanished (expired): the update answers GS_ENOENT and the recorder creates anew. */
    json_object_clear(r.objs);
    gs_clock_advance(&clk, GS_NS_PER_SEC);
    gs_event_record(&src, GS_EVENT_POD("team", "web", "u-1"), "Warning", "FailedScheduling", "Scheduling", "no fit");
    assert_int_equal(json_object_size(r.objs), 1);
    gs_kube_event_sink_stats(s, &st);
    assert_int_equal(st.errors, 1);
    assert_int_equal(st.created, 2);
    gs_recorder_free(rc);
    gs_kube_event_sink_free(s);
    json_decref(r.objs);
    json_decref(r.ops);
}

static int first_event(const char *key, json_t *obj, void *arg)
{
    (void)key;
    json_t **out = arg;
    if (!*out) *out = json_incref(obj);
    return 0;
}

static void local_source_stores_core_events(void **state)
{
    (void)state;
    char dir[64] = "/tmp/gs-evsink-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct gs_store *st = NULL;
    struct gs_store_opts sto = {.dir = dir};
    assert_int_equal(gs_store_open_sqlite(&sto, &st), 0);
    struct gs_source *src = NULL;
    assert_int_equal(gs_source_local_new(st, &src), 0);
    struct gs_kube_event_sink *s = NULL;
    struct gs_kube_event_sink_opts so = {.source = src, .instance = "replica-a"};
    assert_int_equal(gs_kube_event_sink_new(&so, &s), 0);
    struct gs_recorder *rc = NULL;
    struct gs_recorder_opts ro = {.sink = gs_kube_event_sink(s), .sync = true};
    assert_int_equal(gs_recorder_new(&ro, &rc), 0);
    struct gs_event_source es = {rc, "gpusched", NULL, 0};
    gs_event_record(&es, GS_EVENT_POD("default", "web", "u-2"), "Normal", "Scheduled", "Binding",
                    "Successfully assigned default/web to n1");
    gs_event_record(&es, GS_EVENT_POD("default", "web", "u-2"), "Normal", "Scheduled", "Binding",
                    "Successfully assigned default/web to n1");
    json_t *ev = NULL;
    int64_t rv;
    assert_int_equal(gs_store_list(st, "events/default/", first_event, &ev, &rv), 0);
    assert_non_null(ev);
    assert_string_equal(sget(ev, "apiVersion", NULL), "v1");
    assert_string_equal(sget(ev, "involvedObject", "name"), "web");
    assert_string_equal(sget(ev, "reportingComponent", NULL), "gpusched");
    assert_string_equal(sget(ev, "reportingInstance", NULL), "replica-a");
    assert_non_null(sget(ev, "metadata", "uid"));
    assert_int_equal(json_integer_value(json_object_get(ev, "count")), 2);
    json_decref(ev);
    gs_recorder_free(rc);
    gs_kube_event_sink_free(s);
    gs_source_free(src);
    gs_store_close(st);
    fx_rm_tree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(v1_form_passes_validation),
        cmocka_unit_test(kube_transport_gets_events_v1),
        cmocka_unit_test(local_source_stores_core_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
