/*
 * test_informer.c - the kube source (source_kube.c, informer.c) against the
 * in-process API server over HTTP: lists answered from the synced caches in
 * key order, the change stream in the order the server wrote, reads of
 * single objects, and the writes with Kubernetes' semantics (a second
 * binding is GS_EEXIST, a delete with another uid GS_ECONFLICT, a mutate
 * that loses a race is read and tried again, a preemption marks
 * DisruptionTarget before it deletes); a cursor older than the merged
 * ring is GS_ERANGE; interrupt() and free() are prompt.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "informer/source_kube.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char tokens[] = "adm,admin,,,admin\n";

static int setup(void **state)
{
    struct gs_server_opts o = {.no_scheduler = true};
    return api_env_start(state, "/tmp/gs-informer-XXXXXX", tokens, false, o);
}

static const struct gs_api_resource *R(const char *name) { return gs_api_resource_lookup(name); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *const follow[] = {"nodes/", "pods/", NULL};

static struct gs_source *open_source(struct api_env *e, int page_size)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", gs_server_port(e->srv));
    struct gs_source_kube_opts o = {.client = {.server = url, .token = "adm"}, .follow = follow,
                                    .page_size = page_size, .seed = 7};
    struct gs_source *s = NULL;
    struct gs_diags d = {0};
    int err = gs_source_kube_new(&o, &s, &d);
    if (err) fail_msg("gs_source_kube_new: %s (%s)", gs_strerror(err), d.n ? d.v[0].msg : "");
    gs_diags_free(&d);
    assert_true(gs_source_kube_wait_synced(s, 10000));
    return s;
}

static void make_node(struct api_env *e, const char *name)
{
    json_t *n = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Node", "metadata", "name", name);
    assert_int_equal(gs_client_create(e->adm, R("nodes"), NULL, n, NULL), 0);
    json_decref(n);
}

static json_t *pod(const char *name)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:[{s:s,s:s}]}}", "apiVersion", "v1", "kind", "Pod", "metadata", "name",
                     name, "namespace", "default", "spec", "containers", "name", "c", "image", "busybox");
}

struct seen {
    char keys[32][64];
    int n;
};

static int on_item(const char *key, json_t *obj, void *arg)
{
    struct seen *s = arg;
    assert_true(json_is_object(obj));
    if (s->n < 32) snprintf(s->keys[s->n++], sizeof s->keys[0], "%s", key);
    return 0;
}

/* Events for key after *cur, until want of them arrived (10 s at most): their types in order. */
static int collect_for(struct gs_source *s, int64_t *cur, const char *key, enum gs_store_ev *types, int64_t *rvs,
                       char **values, int want)
{
    int got = 0;
    for (double end = now_s() + 10; got < want && now_s() < end;) {
        struct gs_store_event *evs = NULL;
        size_t n = 0;
        assert_int_equal(gs_source_events(s, cur, NULL, 200, NULL, &evs, &n), 0);
        for (size_t i = 0; i < n; i++)
            if (!strcmp(evs[i].key, key) && got < want) {
                types[got] = evs[i].type;
                rvs[got] = evs[i].rv;
                if (values) values[got] = strdup(evs[i].value);
                got++;
            }
        gs_store_events_free(evs, n);
    }
    return got;
}

static void lists_then_watches_in_order(void **state)
{
    struct api_env *e = *state;
    const char *names[] = {"n3", "n1", "n7", "n2", "n5", "n4", "n6"};
    for (int i = 0; i < 7; i++) make_node(e, names[i]);
    struct gs_source *s = open_source(e, 2);
    assert_int_equal(gs_source_kind(s), GS_SOURCE_KUBE);
    struct seen seen = {0};
    int64_t cur = -1;
    assert_int_equal(gs_source_list(s, "nodes/", on_item, &seen, &cur), 0);
    assert_int_equal(seen.n, 7);
    for (int i = 0; i < 7; i++) {
        char want[16];
        snprintf(want, sizeof want, "nodes/n%d", i + 1);
        assert_string_equal(seen.keys[i], want); /* key order, as the store lists */
    }
    assert_true(cur >= 0);
    /* The first list fills the cache only: no event holds the listed texts in the ring. */
    {
        struct gs_store_event *evs = NULL;
        size_t n = 0;
        int64_t from = 0;
        assert_int_equal(gs_source_events(s, &from, "nodes/", 100, NULL, &evs, &n), 0);
        assert_int_equal(n, 0);
        gs_store_events_free(evs, n);
    }
    /* Reads from the cache. */
    json_t *obj = NULL;
    int64_t rv = 0;
    assert_int_equal(gs_source_get(s, "nodes/n4", &obj, &rv), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")), "n4");
    assert_true(rv > 0);
    json_decref(obj);
    assert_int_equal(gs_source_get(s, "nodes/absent", &obj, &rv), GS_ENOENT);
    /* A create, an update and a delete come in that order, with rising versions. */
    make_node(e, "n8");
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "tier", "gold");
    assert_int_equal(gs_client_patch(e->adm, R("nodes"), NULL, "n8", NULL, false, patch, NULL), 0);
    json_decref(patch);
    assert_int_equal(gs_client_delete(e->adm, R("nodes"), NULL, "n8", NULL), 0);
    enum gs_store_ev types[3];
    int64_t rvs[3];
    char *values[3] = {0};
    assert_int_equal(collect_for(s, &cur, "nodes/n8", types, rvs, values, 3), 3);
    assert_int_equal(types[0], GS_STORE_ADDED);
    assert_int_equal(types[1], GS_STORE_MODIFIED);
    assert_int_equal(types[2], GS_STORE_DELETED);
    assert_true(rvs[0] < rvs[1] && rvs[1] < rvs[2]);
    assert_non_null(strstr(values[1], "\"gold\""));
    assert_non_null(strstr(values[2], "\"n8\"")); /* a delete carries the last state */
    for (int i = 0; i < 3; i++) free(values[i]);
    assert_int_equal(gs_source_get(s, "nodes/n8", &obj, &rv), GS_ENOENT);
    struct gs_source_kube_stats st;
    gs_source_kube_stats(s, &st);
    assert_true(st.synced);
    assert_true(st.lists >= 2); /* at least a page per resource */
    assert_true(st.watches >= 2);
    assert_true(st.requests >= st.lists + st.watches);
    /* A prefix no informer covers is refused, not answered empty. */
    assert_int_equal(gs_source_list(s, "queues.scheduling.gpusched.io/", on_item, &seen, NULL), GS_EINVAL);
    gs_source_free(s);
}

static void writes_have_kubernetes_semantics(void **state)
{
    struct api_env *e = *state;
    make_node(e, "w-node");
    struct gs_source *s = open_source(e, 0);
    json_t *p = pod("w1");
    int64_t rv = 0;
    assert_int_equal(gs_source_create(s, "pods/default/w1", p, &rv), 0);
    assert_true(rv > 0);
    const char *uid = json_string_value(json_object_get(json_object_get(p, "metadata"), "uid"));
    assert_non_null(uid); /* the server's metadata came back onto the object */
    char uidb[64];
    snprintf(uidb, sizeof uidb, "%s", uid);
    assert_int_equal(gs_source_create(s, "pods/default/w1", p, NULL), GS_EEXIST);
    json_decref(p);
    /* Bindings: the first wins, the second is GS_EEXIST; a missing pod GS_ENOENT. */
    json_t *ann = json_pack("{s:s}", "gpusched.io/devices", "[]");
    struct gs_source_bind b[3] = {{.key = "pods/default/w1", .uid = uidb, .node = "w-node", .annotations = ann},
                                  {.key = "pods/default/w1", .uid = uidb, .node = "w-node"},
                                  {.key = "pods/default/nobody", .node = "w-node"}};
    assert_int_equal(gs_source_bind(s, b, 1), 0);
    assert_int_equal(b[0].err, 0);
    assert_int_equal(gs_source_bind(s, b + 1, 2), 0);
    assert_int_equal(b[1].err, GS_EEXIST);
    assert_int_equal(b[2].err, GS_ENOENT);
    json_decref(ann);
    json_t *live = NULL;
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "w1", &live), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(live, "spec"), "nodeName")), "w-node");
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(live, "metadata"),
                                                                          "annotations"), "gpusched.io/devices")),
                        "[]");
    json_decref(live);
    /* A delete names the pod it means: another uid is a conflict, and nothing is deleted. */
    json_t *old = NULL;
    assert_int_equal(gs_source_remove(s, "pods/default/w1", "not-the-uid", 0, &old), GS_ECONFLICT);
    assert_null(old);
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "w1", NULL), 0);
    assert_int_equal(gs_source_remove(s, "pods/default/w1", uidb, 0, &old), 0);
    assert_non_null(old); /* a bound pod: graceful, the object with its deletionTimestamp */
    assert_non_null(json_object_get(json_object_get(old, "metadata"), "deletionTimestamp"));
    json_decref(old);
    assert_int_equal(gs_source_remove(s, "nodes/never-there", NULL, 0, NULL), GS_ENOENT);
    gs_source_free(s);
}

struct racer {
    struct api_env *e;
    int calls;
};

/* Adds label mine=yes; on its first call another client writes the object
 * in between, so the PUT carries a stale version. */
static int racing_fn(json_t *cur, json_t **out, void *arg)
{
    struct racer *r = arg;
    assert_non_null(cur);
    if (r->calls++ == 0) {
        json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "theirs", "yes");
        assert_int_equal(gs_client_patch(r->e->adm, R("nodes"), NULL, "race", NULL, false, patch, NULL), 0);
        json_decref(patch);
    }
    json_t *md = json_object_get(cur, "metadata"), *l = json_object_get(md, "labels");
    if (!json_is_object(l)) json_object_set_new(md, "labels", l = json_object());
    json_object_set_new(l, "mine", json_string("yes"));
    *out = json_incref(cur);
    return 0;
}

static int unchanged_fn(json_t *cur, json_t **out, void *arg)
{
    (void)cur, (void)out, (void)arg;
    return GS_STORE_UNCHANGED;
}

static int refuse_fn(json_t *cur, json_t **out, void *arg)
{
    (void)cur, (void)out, (void)arg;
    return GS_ESTATE;
}

static void mutate_retries_on_conflict(void **state)
{
    struct api_env *e = *state;
    make_node(e, "race");
    struct gs_source *s = open_source(e, 0);
    struct racer r = {e, 0};
    json_t *out = NULL;
    int64_t rv = 0;
    assert_int_equal(gs_source_mutate(s, "nodes/race", NULL, racing_fn, &r, &out, &rv), 0);
    assert_int_equal(r.calls, 2); /* read again after the 409 */
    json_t *labels = json_object_get(json_object_get(out, "metadata"), "labels");
    assert_string_equal(json_string_value(json_object_get(labels, "mine")), "yes");
    assert_string_equal(json_string_value(json_object_get(labels, "theirs")), "yes");
    assert_int_equal(rv, gs_store_obj_rv(out));
    json_decref(out);
    struct gs_source_kube_stats st;
    gs_source_kube_stats(s, &st);
    assert_int_equal(st.conflicts, 1);
    /* Unchanged writes nothing and answers the current object; a refusal is passed on. */
    assert_int_equal(gs_source_mutate(s, "nodes/race", NULL, unchanged_fn, NULL, &out, &rv), 0);
    assert_int_equal(gs_store_obj_rv(out), rv);
    json_decref(out);
    assert_int_equal(gs_source_mutate(s, "nodes/race", NULL, refuse_fn, NULL, NULL, NULL), GS_ESTATE);
    assert_int_equal(gs_source_mutate(s, "nodes/none", NULL, unchanged_fn, NULL, NULL, NULL), GS_ENOENT);
    gs_source_free(s);
}

static void preempt_marks_then_deletes(void **state)
{
    struct api_env *e = *state;
    struct gs_source *s = open_source(e, 0);
    int64_t cur = 0;
    struct seen seen = {0};
    assert_int_equal(gs_source_list(s, "pods/", on_item, &seen, &cur), 0);
    json_t *p = pod("victim");
    assert_int_equal(gs_source_create(s, "pods/default/victim", p, NULL), 0);
    char uid[64];
    snprintf(uid, sizeof uid, "%s", json_string_value(json_object_get(json_object_get(p, "metadata"), "uid")));
    json_decref(p);
    bool recreated = true;
    assert_int_equal(gs_source_preempt(s, "pods/default/victim", "other-uid", "default/big", &recreated), GS_ENOENT);
    assert_int_equal(gs_source_preempt(s, "pods/default/victim", uid, "default/big", &recreated), 0);
    assert_false(recreated);
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "victim", NULL), GS_ENOENT);
    enum gs_store_ev types[3];
    int64_t rvs[3];
    char *values[3] = {0};
    assert_int_equal(collect_for(s, &cur, "pods/default/victim", types, rvs, values, 3), 3);
    assert_int_equal(types[0], GS_STORE_ADDED);
    assert_int_equal(types[1], GS_STORE_MODIFIED);
    assert_int_equal(types[2], GS_STORE_DELETED);
    assert_non_null(strstr(values[1], "\"DisruptionTarget\""));
    assert_non_null(strstr(values[1], "\"PreemptionByScheduler\""));
    assert_non_null(strstr(values[1], "preempted by default/big"));
    for (int i = 0; i < 3; i++) free(values[i]);
    gs_source_free(s);
}

static void old_cursor_is_out_of_range(void **state)
{
    struct api_env *e = *state;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", gs_server_port(e->srv));
    struct gs_source_kube_opts o = {.client = {.server = url, .token = "adm"}, .follow = follow, .ring_events = 4};
    struct gs_source *s = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_source_kube_new(&o, &s, &d), 0);
    struct seen seen = {0};
    int64_t cur = -1;
    assert_int_equal(gs_source_list(s, "nodes/", on_item, &seen, &cur), 0);
    for (int i = 0; i < 10; i++) {
        char n[16];
        snprintf(n, sizeof n, "o%d", i);
        make_node(e, n);
    }
    json_t *obj = NULL;
    for (double end = now_s() + 10; gs_source_get(s, "nodes/o9", &obj, NULL) && now_s() < end;) usleep(20 * 1000);
    assert_non_null(obj);
    json_decref(obj);
    /* Ten events went into a ring of four: the cursor from before them is no longer served. */
    struct gs_store_event *evs = NULL;
    size_t n = 0;
    int64_t old = cur;
    assert_int_equal(gs_source_events(s, &old, NULL, 0, NULL, &evs, &n), GS_ERANGE);
    assert_null(evs);
    assert_int_equal(n, 0);
    /* A fresh list gives a cursor that is, and the list already holds all ten. */
    memset(&seen, 0, sizeof seen);
    assert_int_equal(gs_source_list(s, "nodes/", on_item, &seen, &cur), 0);
    assert_int_equal(seen.n, 10);
    assert_int_equal(gs_source_events(s, &cur, NULL, 0, NULL, &evs, &n), 0);
    assert_int_equal(n, 0);
    gs_store_events_free(evs, n);
    gs_source_free(s);
}

struct waiter {
    struct gs_source *s;
    double took;
    int err;
    size_t n;
};

static void *wait_events(void *arg)
{
    struct waiter *w = arg;
    int64_t after = INT64_MAX;
    struct gs_store_event *evs = NULL;
    double t0 = now_s();
    w->err = gs_source_events(w->s, &after, NULL, 10000, NULL, &evs, &w->n);
    w->took = now_s() - t0;
    gs_store_events_free(evs, w->n);
    return NULL;
}

static void interrupt_and_free_are_prompt(void **state)
{
    struct api_env *e = *state;
    struct gs_source *s = open_source(e, 0);
    struct waiter w = {.s = s};
    pthread_t th;
    pthread_create(&th, NULL, wait_events, &w);
    usleep(200 * 1000);
    gs_source_interrupt(s);
    pthread_join(th, NULL);
    assert_int_equal(w.err, 0);
    assert_int_equal(w.n, 0);
    if (w.took > 1.0) fail_msg("events() returned %.2f s after interrupt()", w.took);
    double t0 = now_s();
    gs_source_free(s); /* two watches open */
    double took = now_s() - t0;
    if (took > 1.5) fail_msg("free() took %.2f s", took);
}

static void bad_options_are_named(void **state)
{
    struct api_env *e = *state;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", gs_server_port(e->srv));
    const char *const bad[] = {"widgets/", NULL};
    struct gs_source_kube_opts o = {.client = {.server = url, .token = "adm"}, .follow = bad};
    struct gs_source *s = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_source_kube_new(&o, &s, &d), GS_EINVAL);
    assert_null(s);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, "follow");
    assert_non_null(strstr(d.v[0].msg, "\"widgets/\""));
    gs_diags_free(&d);
    o.follow = NULL;
    assert_int_equal(gs_source_kube_new(&o, &s, &d), GS_EINVAL);
    assert_non_null(strstr(d.v[0].msg, "no resource to follow"));
    gs_diags_free(&d);
    o.follow = follow;
    o.page_size = -3;
    assert_int_equal(gs_source_kube_new(&o, &s, &d), GS_EINVAL);
    assert_string_equal(d.v[0].path, "page_size");
    assert_non_null(strstr(d.v[0].msg, "-3"));
    gs_diags_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(lists_then_watches_in_order, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(writes_have_kubernetes_semantics, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(mutate_retries_on_conflict, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(preempt_marks_then_deletes, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(old_cursor_is_out_of_range, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(interrupt_and_free_are_prompt, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(bad_options_are_named, setup, api_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
