/*
 * test_leader_kube.c - the standalone scheduler's writers over the kube
 * transport against an in-process server, with the tenant-free scheduler
 * token: two electors each on its own kube source elect one leader on a
 * real coordination.k8s.io Lease (resourceVersion preconditions checked by
 * the server), the follower takes over after the leader's release, and an
 * elector whose Lease sits outside kube-system is refused (403) and never
 * leads. The Event sink creates events.k8s.io/v1 Events through
 * /apis/events.k8s.io and aggregates them with a PUT there; core v1 readers
 * (kubectl describe) see the same Event with its count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "control/events.h"
#include "informer/source_kube.h"
#include "kube/event_sink.h"
#include "kube/leader.h"

#include <string.h>

static const char tokens[] = "adm,admin,,,admin\n"
                             "nod,system:node:n1,,,node\n"
                             "sch,system:gpusched-scheduler,,,scheduler\n";

static const char *const follow[] = {"namespaces/", NULL};

static struct gs_source *open_source(struct api_env *e, const char *token)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", gs_server_port(e->srv));
    struct gs_source_kube_opts o = {.client = {.server = url, .token = token}, .follow = follow, .seed = 3};
    struct gs_source *s = NULL;
    struct gs_diags d = {0};
    int err = gs_source_kube_new(&o, &s, &d);
    if (err) fail_msg("gs_source_kube_new: %s (%s)", gs_strerror(err), d.n ? d.v[0].msg : "");
    gs_diags_free(&d);
    return s;
}

static struct gs_leader *elector(struct gs_source *src, const char *ns, const char *id, struct gs_clock *clk)
{
    struct gs_leader_opts o = {.source = src, .ns = ns, .name = "gpusched", .identity = id,
                               .lease_duration_ns = 2 * GS_NS_PER_SEC, .renew_deadline_ns = 1500 * GS_NS_PER_MS,
                               .retry_period_ns = 500 * GS_NS_PER_MS, .clock = clk};
    struct gs_leader *l = NULL;
    assert_int_equal(gs_leader_new(&o, &l, NULL), 0);
    return l;
}

static json_t *lease(struct api_env *e)
{
    json_t *out = NULL;
    long code = 0;
    gs_client_call(e->adm, "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpusched", NULL, NULL,
                   NULL, &out, &code);
    assert_int_equal(code, 200);
    json_t *spec = json_incref(json_object_get(out, "spec"));
    json_decref(out);
    return spec;
}

static void election_over_http(void **state)
{
    struct api_env *e = *state;
    struct gs_source *sa = open_source(e, "sch"), *sb = open_source(e, "sch");
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 1767225600LL * GS_NS_PER_SEC);
    struct gs_leader *a = elector(sa, "kube-system", "replica-a", &clk);
    struct gs_leader *b = elector(sb, "kube-system", "replica-b", &clk);
    assert_true(gs_leader_tick(a));
    assert_false(gs_leader_tick(b));
    json_t *spec = lease(e);
    assert_string_equal(json_string_value(json_object_get(spec, "holderIdentity")), "replica-a");
    assert_int_equal(json_integer_value(json_object_get(spec, "leaseDurationSeconds")), 2);
    assert_string_equal(json_string_value(json_object_get(spec, "renewTime")), "2026-01-01T00:00:00.000000Z");
    json_decref(spec);
    gs_clock_advance(&clk, 500 * GS_NS_PER_MS);
    assert_true(gs_leader_tick(a)); /* a renewal: a PUT with the version read */
    assert_false(gs_leader_tick(b));
    gs_leader_release(a);
    assert_true(gs_leader_tick(b)); /* at once: released */
    spec = lease(e);
    assert_string_equal(json_string_value(json_object_get(spec, "holderIdentity")), "replica-b");
    assert_int_equal(json_integer_value(json_object_get(spec, "leaseTransitions")), 1);
    json_decref(spec);
    assert_false(gs_leader_tick(a));
    /* Outside kube-system the scheduler token may not hold a Lease: never leading. */
    struct gs_leader *c = elector(sa, "default", "replica-c", &clk);
    assert_false(gs_leader_tick(c));
    assert_false(gs_leader_may_write(c));
    gs_leader_free(c);
    gs_leader_free(a);
    gs_leader_free(b);
    gs_source_free(sa);
    gs_source_free(sb);
}

static void events_v1_over_http(void **state)
{
    struct api_env *e = *state;
    struct gs_source *src = open_source(e, "sch");
    struct gs_kube_event_sink *s = NULL;
    struct gs_kube_event_sink_opts so = {.source = src, .controller = "gpusched-ext", .instance = "replica-a"};
    assert_int_equal(gs_kube_event_sink_new(&so, &s), 0);
    struct gs_recorder *rc = NULL;
    struct gs_recorder_opts ro = {.sink = gs_kube_event_sink(s), .sync = true};
    assert_int_equal(gs_recorder_new(&ro, &rc), 0);
    struct gs_event_source es = {rc, "gpusched-ext", NULL, 0};
    for (int i = 0; i < 3; i++)
        gs_event_record(&es, GS_EVENT_POD("default", "web", "u-9"), "Warning", "FailedScheduling", "Scheduling",
                        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.");
    struct gs_kube_event_sink_stats st;
    gs_kube_event_sink_stats(s, &st);
    assert_int_equal(st.created, 1);
    assert_int_equal(st.updated, 2);
    assert_int_equal(st.errors, 0);
    json_t *out = NULL;
    long code = 0;
    gs_client_call(e->adm, "GET", "/apis/events.k8s.io/v1/namespaces/default/events", NULL, NULL, NULL, &out, &code);
    assert_int_equal(code, 200);
    json_t *items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 1);
    json_t *ev = json_array_get(items, 0);
    assert_string_equal(json_string_value(json_object_get(ev, "reportingController")), "gpusched-ext");
    assert_string_equal(json_string_value(json_object_get(ev, "reportingInstance")), "replica-a");
    assert_string_equal(json_string_value(json_object_get(json_object_get(ev, "regarding"), "uid")), "u-9");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(ev, "series"), "count")), 3);
    json_decref(out);
    gs_client_call(e->adm, "GET", "/api/v1/namespaces/default/events", NULL, NULL, NULL, &out, &code);
    ev = json_array_get(json_object_get(out, "items"), 0);
    assert_int_equal(json_integer_value(json_object_get(ev, "count")), 3);
    assert_string_equal(json_string_value(json_object_get(ev, "message")),
                        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.");
    json_decref(out);
    gs_recorder_free(rc);
    gs_kube_event_sink_free(s);
    gs_source_free(src);
}

static int setup(void **state)
{
    return api_env_start(state, "/tmp/gs-leaderkube-XXXXXX", tokens, false,
                         (struct gs_server_opts){.no_scheduler = true});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(election_over_http, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(events_v1_over_http, setup, api_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
