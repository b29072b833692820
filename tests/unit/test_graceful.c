/*
 * test_graceful.c - graceful deletion and node leases in the control plane:
 * a bound pod's DELETE sets deletionTimestamp (grace from the options, the
 * pod, or 30 s) and emits MODIFIED; a second DELETE never extends the
 * deadline but may shorten it; gracePeriodSeconds=0 and unbound or finished
 * pods are removed at once; bad grace periods are 400s naming the field;
 * finalizers hold any object until an update empties them; terminating pods
 * are never bound and keep their GPUs counted by the scheduler; node tokens
 * confirm deletions of their own pods and write only their own Lease; the
 * node lifecycle reads lease renewTime and force-deletes terminating pods of
 * a lost node.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "control/api.h"
#include "nodelc_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char tokens[] = "adm,admin,,,admin\n"
                             "nod,system:node:n1,,,node\n";

static int start(void **state, bool scheduler)
{
    struct gs_server_opts o = {.no_scheduler = !scheduler};
    return api_env_start(state, "/tmp/gs-grace-XXXXXX", tokens, false, o);
}

static int setup(void **state) { return start(state, false); }
static int setup_sched(void **state) { return start(state, true); }

static const struct gs_api_resource *R(const char *name) { return gs_api_resource_lookup(name); }

static json_t *J(const char *text)
{
    json_t *v = json_loads(text, 0, NULL);
    assert_non_null(v);
    return v;
}

static json_t *md_of(const json_t *o) { return json_object_get(o, "metadata"); }

static const char *md_str(const json_t *o, const char *k) { return json_string_value(json_object_get(md_of(o), k)); }

static time_t parse_ts(const char *s)
{
    struct tm tm = {0};
    assert_non_null(s);
    assert_non_null(strptime(s, "%Y-%m-%dT%H:%M:%S", &tm));
    return timegm(&tm);
}

/* A pod (grace < 0: no terminationGracePeriodSeconds), created, and bound to node when given. */
static void make_pod(struct api_env *e, const char *name, int grace, const char *gpus, const char *node)
{
    json_t *p = json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:s,s:s,s:{s:{s:s}}}]}}", "apiVersion", "v1", "kind", "Pod",
                          "metadata", "name", name, "spec", "containers", "name", "c", "image", "busybox", "resources",
                          "limits", "nvidia.com/gpu", gpus);
    if (grace >= 0) json_object_set_new(json_object_get(p, "spec"), "terminationGracePeriodSeconds", json_integer(grace));
    assert_int_equal(gs_client_create(e->adm, R("pods"), "default", p, NULL), 0);
    json_decref(p);
    if (node) assert_int_equal(gs_client_bind(e->adm, "default", name, node, NULL, NULL), 0);
}

/* DELETE with a query and/or a body; the HTTP code, *out the answer. */
static long del(struct gs_client *c, const char *name, const char *query, const char *body, json_t **out)
{
    char path[256];
    snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s%s", name, query ? query : "");
    json_t *b = body ? J(body) : NULL, *o = NULL;
    long code = 0;
    gs_client_call(c, "DELETE", path, b ? "application/json" : NULL, b, NULL, &o, &code);
    json_decref(b);
    if (out) *out = o;
    else json_decref(o);
    return code;
}

static bool exists(struct api_env *e, const char *name)
{
    json_t *o = NULL;
    int err = gs_client_get(e->adm, R("pods"), "default", name, &o);
    json_decref(o);
    assert_true(err == 0 || err == GS_ENOENT);
    return err == 0;
}

struct seen {
    char types[8][16];
    int n;
};

static int on_event(const char *type, json_t *obj, void *arg)
{
    (void)obj;
    struct seen *s = arg;
    if (!strcmp(type, "BOOKMARK")) return 0; /* a version to resume from, not an event of an object */
    snprintf(s->types[s->n++], sizeof s->types[0], "%s", type);
    return s->n == 8;
}

static char *current_rv(struct api_env *e)
{
    json_t *l = NULL;
    assert_int_equal(gs_client_list(e->adm, R("pods"), "default", NULL, NULL, false, &l), 0);
    char *rv = strdup(md_str(l, "resourceVersion"));
    json_decref(l);
    return rv;
}

/*--- Deletion ---*/

static void bound_pod_terminates(void **state)
{
    struct api_env *e = *state;
    make_pod(e, "web", 20, "0", "n1");
    char *rv = current_rv(e);
    time_t before = time(NULL);
    json_t *out = NULL;
    assert_int_equal(del(e->adm, "web", NULL, NULL, &out), 200);
    time_t ts = parse_ts(md_str(out, "deletionTimestamp"));
    assert_true(ts >= before + 20 && ts <= time(NULL) + 20);
    assert_int_equal(json_integer_value(json_object_get(md_of(out), "deletionGracePeriodSeconds")), 20);
    char first[40];
    snprintf(first, sizeof first, "%s", md_str(out, "deletionTimestamp"));
    json_decref(out);
    assert_true(exists(e, "web"));

    /* A second DELETE with a longer grace changes nothing... */
    assert_int_equal(del(e->adm, "web", "?gracePeriodSeconds=100", NULL, &out), 200);
    assert_string_equal(md_str(out, "deletionTimestamp"), first);
    assert_int_equal(json_integer_value(json_object_get(md_of(out), "deletionGracePeriodSeconds")), 20);
    json_decref(out);
    /* ...a shorter one moves the deadline closer. */
    assert_int_equal(del(e->adm, "web", NULL, "{\"kind\":\"DeleteOptions\",\"gracePeriodSeconds\":5}", &out), 200);
    assert_true(parse_ts(md_str(out, "deletionTimestamp")) < parse_ts(first));
    assert_int_equal(json_integer_value(json_object_get(md_of(out), "deletionGracePeriodSeconds")), 5);
    json_decref(out);

    /* A terminating pod is never bound (again). */
    json_t *st = NULL;
    make_pod(e, "late", 5, "0", NULL);
    json_t *fin = J("{\"metadata\":{\"finalizers\":[\"example.com/hold\"]}}");
    assert_int_equal(gs_client_patch(e->adm, R("pods"), "default", "late", NULL, false, fin, NULL), 0);
    assert_int_equal(del(e->adm, "late", NULL, NULL, NULL), 200);
    assert_int_equal(gs_client_bind(e->adm, "default", "late", "n1", NULL, &st), GS_ECONFLICT);
    assert_non_null(strstr(gs_client_status_message(st), "being deleted"));
    json_decref(st);
    json_decref(fin);

    /* The node confirms with grace 0: the pod is gone. The watch saw MODIFIED, then DELETED. */
    assert_int_equal(del(e->nod, "web", "?gracePeriodSeconds=0", NULL, NULL), 200);
    assert_false(exists(e, "web"));
    struct seen s = {0};
    json_t *none = NULL;
    gs_client_watch(e->adm, R("pods"), "default", NULL, "metadata.name=web", rv, 2, on_event, &s);
    json_decref(none);
    assert_true(s.n >= 2);
    for (int i = 0; i < s.n - 1; i++) assert_string_equal(s.types[i], "MODIFIED");
    assert_string_equal(s.types[s.n - 1], "DELETED");
    free(rv);
}

static void immediate_deletions(void **state)
{
    struct api_env *e = *state;
    /* Unbound: at once. */
    make_pod(e, "queued", 20, "0", NULL);
    assert_int_equal(del(e->adm, "queued", NULL, NULL, NULL), 200);
    assert_false(exists(e, "queued"));
    /* Finished: at once. */
    make_pod(e, "done", 20, "0", "n1");
    json_t *ph = J("{\"status\":{\"phase\":\"Succeeded\"}}");
    assert_int_equal(gs_client_patch(e->adm, R("pods"), "default", "done", "status", false, ph, NULL), 0);
    json_decref(ph);
    assert_int_equal(del(e->adm, "done", NULL, NULL, NULL), 200);
    assert_false(exists(e, "done"));
    /* Bound and running, but gracePeriodSeconds=0 in the body: at once. */
    make_pod(e, "forced", 20, "0", "n1");
    assert_int_equal(del(e->adm, "forced", NULL, "{\"gracePeriodSeconds\":0}", NULL), 200);
    assert_false(exists(e, "forced"));
    /* No grace anywhere: 30 s. */
    make_pod(e, "dflt", -1, "0", "n1");
    json_t *out = NULL;
    assert_int_equal(del(e->adm, "dflt", NULL, NULL, &out), 200);
    assert_int_equal(json_integer_value(json_object_get(md_of(out), "deletionGracePeriodSeconds")), 30);
    json_decref(out);
    /* Other kinds without finalizers: at once. */
    json_t *q = J("{\"apiVersion\":\"scheduling.gpusched.io/v1alpha1\",\"kind\":\"Queue\",\"metadata\":{\"name\":\"q1\"},"
                  "\"spec\":{\"weight\":1}}");
    assert_int_equal(gs_client_create(e->adm, R("queues"), NULL, q, NULL), 0);
    assert_int_equal(gs_client_delete(e->adm, R("queues"), NULL, "q1", NULL), 0);
    assert_int_equal(gs_client_get(e->adm, R("queues"), NULL, "q1", &out), GS_ENOENT);
    json_decref(out);
    json_decref(q);
}

static void bad_grace_periods(void **state)
{
    struct api_env *e = *state;
    make_pod(e, "p", 20, "0", "n1");
    struct { const char *query, *body; } bad[] = {
        {"?gracePeriodSeconds=-1", NULL}, {"?gracePeriodSeconds=abc", NULL}, {"?gracePeriodSeconds=", NULL},
        {NULL, "{\"gracePeriodSeconds\":-3}"}, {NULL, "{\"gracePeriodSeconds\":\"10\"}"},
        {NULL, "{\"gracePeriodSeconds\":1.5}"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *out = NULL;
        assert_int_equal(del(e->adm, "p", bad[i].query, bad[i].body, &out), 400);
        assert_string_equal(json_string_value(json_object_get(out, "kind")), "Status");
        assert_non_null(strstr(gs_client_status_message(out), "gracePeriodSeconds"));
        json_t *cause = json_array_get(json_object_get(json_object_get(out, "details"), "causes"), 0);
        assert_string_equal(json_string_value(json_object_get(cause, "field")), "gracePeriodSeconds");
        json_decref(out);
    }
    /* Nothing happened to the pod. */
    json_t *p = NULL;
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "p", &p), 0);
    assert_null(md_str(p, "deletionTimestamp"));
    json_decref(p);
}

static void finalizers_hold_objects(void **state)
{
    struct api_env *e = *state;
    json_t *q = J("{\"apiVersion\":\"scheduling.gpusched.io/v1alpha1\",\"kind\":\"Queue\",\"metadata\":{\"name\":\"q2\","
                  "\"finalizers\":[\"example.com/a\",\"example.com/b\"]},\"spec\":{\"weight\":1}}");
    assert_int_equal(gs_client_create(e->adm, R("queues"), NULL, q, NULL), 0);
    json_t *out = NULL;
    assert_int_equal(gs_client_delete(e->adm, R("queues"), NULL, "q2", &out), 0);
    assert_non_null(md_str(out, "deletionTimestamp"));
    assert_int_equal(json_integer_value(json_object_get(md_of(out), "deletionGracePeriodSeconds")), 0);
    json_decref(out);
    /* Still there; no new finalizer may be added now. */
    assert_int_equal(gs_client_get(e->adm, R("queues"), NULL, "q2", &out), 0);
    json_decref(out);
    json_t *add = J("{\"metadata\":{\"finalizers\":[\"example.com/a\",\"example.com/b\",\"example.com/c\"]}}");
    assert_int_equal(gs_client_patch(e->adm, R("queues"), NULL, "q2", NULL, false, add, &out), GS_EINVAL);
    assert_non_null(strstr(gs_client_status_message(out), "metadata.finalizers"));
    json_decref(out);
    /* Removing one keeps it; removing the last removes it. */
    json_t *one = J("{\"metadata\":{\"finalizers\":[\"example.com/b\"]}}");
    assert_int_equal(gs_client_patch(e->adm, R("queues"), NULL, "q2", NULL, false, one, NULL), 0);
    assert_int_equal(gs_client_get(e->adm, R("queues"), NULL, "q2", &out), 0);
    assert_non_null(md_str(out, "deletionTimestamp"));
    json_decref(out);
    json_t *none = J("{\"metadata\":{\"finalizers\":null}}");
    assert_int_equal(gs_client_patch(e->adm, R("queues"), NULL, "q2", NULL, false, none, NULL), 0);
    assert_int_equal(gs_client_get(e->adm, R("queues"), NULL, "q2", &out), GS_ENOENT);
    json_decref(out);

    /* A terminating pod with a finalizer: the node's confirmation leaves it until the finalizer goes. */
    make_pod(e, "held", 10, "0", "n1");
    json_t *fin = J("{\"metadata\":{\"finalizers\":[\"example.com/a\"]}}");
    assert_int_equal(gs_client_patch(e->adm, R("pods"), "default", "held", NULL, false, fin, NULL), 0);
    assert_int_equal(del(e->adm, "held", NULL, NULL, NULL), 200);
    assert_int_equal(del(e->nod, "held", "?gracePeriodSeconds=0", NULL, &out), 200);
    assert_int_equal(json_integer_value(json_object_get(md_of(out), "deletionGracePeriodSeconds")), 0);
    json_decref(out);
    assert_true(exists(e, "held"));
    assert_int_equal(gs_client_patch(e->adm, R("pods"), "default", "held", NULL, false, none, NULL), 0);
    assert_false(exists(e, "held"));
    json_decref(fin);
    json_decref(q);
    json_decref(add);
    json_decref(one);
    json_decref(none);
}

/*--- Node tokens ---*/

static json_t *lease(const char *name, const char *ns)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:i,s:s}}", "apiVersion", "coordination.k8s.io/v1", "kind", "Lease",
                     "metadata", "name", name, "namespace", ns, "spec", "holderIdentity", name,
                     "leaseDurationSeconds", 40, "renewTime", "2026-01-02T03:04:05.000000Z");
}

static void node_tokens_and_leases(void **state)
{
    struct api_env *e = *state;
    const struct gs_api_resource *L = R("leases");
    assert_non_null(L);
    assert_string_equal(L->group, "coordination.k8s.io");
    json_t *own = lease("n1", GS_NODE_LEASE_NS), *other = lease("n2", GS_NODE_LEASE_NS), *out = NULL;
    json_t *elsewhere = lease("n1", "default");
    assert_int_equal(gs_client_create(e->nod, L, GS_NODE_LEASE_NS, own, &out), 0);
    json_decref(out);
    assert_int_equal(gs_client_create(e->nod, L, GS_NODE_LEASE_NS, other, NULL), GS_EPERM);
    assert_int_equal(gs_client_create(e->nod, L, "default", elsewhere, NULL), GS_EPERM);
    assert_int_equal(gs_client_create(e->adm, L, GS_NODE_LEASE_NS, other, NULL), 0);
    /* Renew its own; never another node's; read any. */
    json_t *renew = J("{\"spec\":{\"renewTime\":\"2026-01-02T03:04:09.000000Z\"}}");
    assert_int_equal(gs_client_patch(e->nod, L, GS_NODE_LEASE_NS, "n1", NULL, false, renew, &out), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "spec"), "renewTime")),
                        "2026-01-02T03:04:09.000000Z");
    json_decref(out);
    assert_int_equal(gs_client_patch(e->nod, L, GS_NODE_LEASE_NS, "n2", NULL, false, renew, NULL), GS_EPERM);
    assert_int_equal(gs_client_get(e->nod, L, GS_NODE_LEASE_NS, "n2", &out), 0);
    json_decref(out);
    assert_int_equal(gs_client_delete(e->nod, L, GS_NODE_LEASE_NS, "n1", NULL), GS_EPERM);
    /* Discovery lists the group. */
    long code = 0;
    assert_int_equal(gs_client_call(e->adm, "GET", "/apis/coordination.k8s.io/v1", NULL, NULL, NULL, &out, &code), 0);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(out, "resources"), 0),
                                                          "name")), "leases");
    json_decref(out);
    /* A node deletes only the pods bound to it. */
    make_pod(e, "mine", 5, "0", "n1");
    make_pod(e, "theirs", 5, "0", "n2");
    assert_int_equal(del(e->nod, "theirs", "?gracePeriodSeconds=0", NULL, NULL), 403);
    assert_true(exists(e, "theirs"));
    assert_int_equal(del(e->nod, "mine", "?gracePeriodSeconds=0", NULL, NULL), 200);
    assert_false(exists(e, "mine"));
    json_decref(own);
    json_decref(other);
    json_decref(elsewhere);
    json_decref(renew);
}

/*--- The scheduler keeps a terminating pod's GPUs ---*/

static json_t *gpu_node(const char *name)
{
    return json_pack("{s:s,s:s,s:{s:s},s:{s:{s:s,s:s,s:s},s:[{s:i,s:s,s:s,s:i}]}}", "apiVersion", "v1", "kind",
                     "Node", "metadata", "name", name, "status", "capacity", "cpu", "8", "memory", "64Gi", "pods",
                     "110", "devices", "index", 0, "uuid", "GPU-only", "model", "H100", "memoryMiB", 81920);
}

static bool bound(struct api_env *e, const char *name)
{
    json_t *o = NULL;
    bool b = gs_client_get(e->adm, R("pods"), "default", name, &o) == 0 &&
             json_object_get(json_object_get(o, "spec"), "nodeName");
    json_decref(o);
    return b;
}

static void scheduler_waits_for_termination(void **state)
{
    struct api_env *e = *state;
    json_t *n = gpu_node("n1");
    assert_int_equal(gs_client_create(e->adm, R("nodes"), NULL, n, NULL), 0);
    make_pod(e, "old", 30, "1", NULL);
    for (int i = 0; i < 250 && !bound(e, "old"); i++) usleep(20000);
    assert_true(bound(e, "old"));
    assert_int_equal(del(e->adm, "old", NULL, NULL, NULL), 200);
    make_pod(e, "new", 30, "1", NULL);
    /* The only GPU still belongs to the terminating pod. */
    usleep(1500000);
    assert_false(bound(e, "new"));
    assert_true(exists(e, "old"));
    /* The node confirms: now the new pod gets it. */
    assert_int_equal(del(e->nod, "old", "?gracePeriodSeconds=0", NULL, NULL), 200);
    for (int i = 0; i < 250 && !bound(e, "new"); i++) usleep(20000);
    assert_true(bound(e, "new"));
    json_decref(n);
}

/* The taint manager's eviction as nodelifecycle.c writes it: the pod is
 * Failed (NodeLost) but its GPU stays held until the eviction settles; a
 * status write cannot take it out of Failed; new pods got the default
 * NoExecute tolerations. */
static void scheduler_holds_evicted_devices(void **state)
{
    struct api_env *e = *state;
    json_t *n = gpu_node("n1");
    assert_int_equal(gs_client_create(e->adm, R("nodes"), NULL, n, NULL), 0);
    make_pod(e, "old", 30, "1", NULL);
    for (int i = 0; i < 250 && !bound(e, "old"); i++) usleep(20000);
    assert_true(bound(e, "old"));
    json_t *p = NULL, *t;
    size_t i;
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "old", &p), 0);
    int defaults = 0;
    json_array_foreach(json_object_get(json_object_get(p, "spec"), "tolerations"), i, t)
        defaults += json_integer_value(json_object_get(t, "tolerationSeconds")) == 300 &&
                    !strcmp(json_string_value(json_object_get(t, "effect")), "NoExecute");
    assert_int_equal(defaults, 2);
    json_decref(p);
    /* Retried on 409: the scheduler may still be writing the pod after binding it. */
    int err = GS_ECONFLICT;
    for (int k = 0; k < 20 && err == GS_ECONFLICT; k++) {
        assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "old", &p), 0);
        json_object_set_new(json_object_get(md_of(p), "annotations"), GS_ANN_EVICTED_AT,
                            json_string("2026-01-02T03:04:05Z"));
        err = gs_client_update(e->adm, R("pods"), "default", "old", NULL, p, NULL);
        json_decref(p);
    }
    assert_int_equal(err, 0);
    err = GS_ECONFLICT;
    for (int k = 0; k < 20 && err == GS_ECONFLICT; k++) {
        assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "old", &p), 0);
        json_t *st = json_object_get(p, "status");
        json_object_set_new(st, "phase", json_string("Failed"));
        json_object_set_new(st, "reason", json_string("NodeLost"));
        err = gs_client_update(e->adm, R("pods"), "default", "old", "status", p, NULL);
        json_decref(p);
    }
    assert_int_equal(err, 0);
    make_pod(e, "new", 30, "1", NULL);
    usleep(1500000);
    assert_false(bound(e, "new"));
    /* Out of Failed: refused, naming the field. */
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "old", &p), 0);
    json_object_set_new(json_object_get(p, "status"), "phase", json_string("Succeeded"));
    json_t *out = NULL;
    long code = 0;
    assert_int_equal(gs_client_call(e->adm, "PUT", "/api/v1/namespaces/default/pods/old/status", "application/json", p,
                                    NULL, &out, &code),
                     GS_EINVAL);
    assert_int_equal(code, 422);
    const char *msg = json_string_value(json_object_get(out, "message"));
    assert_non_null(msg);
    assert_non_null(strstr(msg, "status.phase: Invalid value: \"Succeeded\": the pod is in the terminal phase Failed"));
    json_decref(out);
    json_decref(p);
    /* The eviction settles: the GPU is free. */
    err = GS_ECONFLICT;
    for (int k = 0; k < 20 && err == GS_ECONFLICT; k++) {
        assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "old", &p), 0);
        json_object_set_new(json_object_get(md_of(p), "annotations"), GS_ANN_DEVICES_RELEASED,
                            json_string("node lost"));
        err = gs_client_update(e->adm, R("pods"), "default", "old", NULL, p, NULL);
        json_decref(p);
    }
    assert_int_equal(err, 0);
    for (int k = 0; k < 250 && !bound(e, "new"); k++) usleep(20000);
    assert_true(bound(e, "new"));
    json_decref(n);
}

/*--- Node lifecycle on leases ---*/

static int lc_setup(void **state) { return lc_fx_setup(state, "/tmp/gs-grace-lc-XXXXXX"); }

static void stamp(double t, bool micro, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    char s[24];
    strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, micro ? "%s.250000Z" : "%sZ", s);
}

static void lc_node(struct lc_fx *f, const char *name, double hb)
{
    char ts[40], key[128];
    stamp(hb, false, ts, sizeof ts);
    json_t *n = json_pack("{s:s,s:s,s:{s:s},s:{},s:{s:[{s:s,s:s,s:s}]}}", "apiVersion", "v1", "kind", "Node",
                          "metadata", "name", name, "spec", "status", "conditions", "type", "Ready", "status", "True",
                          "lastHeartbeatTime", ts);
    snprintf(key, sizeof key, "nodes/%s", name);
    assert_int_equal(gs_store_create(f->store, key, n, NULL), 0);
    json_decref(n);
}

static void lc_lease(struct lc_fx *f, const char *name, double renew)
{
    char ts[40], key[160];
    stamp(renew, true, ts, sizeof ts);
    json_t *l = lease(name, GS_NODE_LEASE_NS);
    json_object_set_new(json_object_get(l, "spec"), "renewTime", json_string(ts));
    gs_api_key(R("leases"), GS_NODE_LEASE_NS, name, key, sizeof key);
    json_t *old = NULL;
    if (gs_store_get(f->store, key, &old, NULL) == 0) assert_int_equal(gs_store_update(f->store, key, l, 0, NULL), 0);
    else assert_int_equal(gs_store_create(f->store, key, l, NULL), 0);
    json_decref(old);
    json_decref(l);
}

static void lc_pod(struct lc_fx *f, const char *name, const char *node, bool terminating)
{
    char key[128];
    json_t *p = json_pack("{s:s,s:s,s:{s:s,s:s,s:s},s:{s:s,s:s},s:{s:s}}", "apiVersion", "v1", "kind", "Pod",
                          "metadata", "name", name, "namespace", "default", "uid", name, "spec", "nodeName", node,
                          "restartPolicy", "Always", "status", "phase", "Running");
    if (terminating) {
        json_object_set_new(md_of(p), "deletionTimestamp", json_string("2026-01-02T03:04:05Z"));
        json_object_set_new(md_of(p), "deletionGracePeriodSeconds", json_integer(30));
    }
    snprintf(key, sizeof key, "pods/default/%s", name);
    assert_int_equal(gs_store_create(f->store, key, p, NULL), 0);
    json_decref(p);
}

static const char *ready(struct lc_fx *f, const char *name, json_t **keep)
{
    char key[128];
    snprintf(key, sizeof key, "nodes/%s", name);
    assert_int_equal(gs_store_get(f->store, key, keep, NULL), 0);
    json_t *c = json_array_get(json_object_get(json_object_get(*keep, "status"), "conditions"), 0);
    return json_string_value(json_object_get(c, "status"));
}

static void lifecycle_reads_leases(void **state)
{
    struct lc_fx *f = *state;
    /* Old Ready heartbeats everywhere; a fresh lease keeps leased alive, nothing keeps silent alive. */
    lc_node(f, "leased", f->now - 300);
    lc_lease(f, "leased", f->now - 1);
    lc_node(f, "silent", f->now - 300);
    lc_lease(f, "silent", f->now - 60);
    lc_node(f, "legacy", f->now - 2); /* no lease: the Ready heartbeat counts */
    lc_pod(f, "leaving", "silent", true);
    lc_pod(f, "staying", "leased", true);
    gs_nodelc_scan(f->lc, f->now);
    json_t *n = NULL;
    assert_string_equal(ready(f, "leased", &n), "True");
    json_decref(n);
    assert_string_equal(ready(f, "legacy", &n), "True");
    json_decref(n);
    assert_string_equal(ready(f, "silent", &n), "Unknown");
    json_decref(n);
    /* The terminating pod of the silent node is evicted but stays: only its
     * node can confirm that its processes stopped. The other is untouched. */
    json_t *p = NULL;
    assert_int_equal(gs_store_get(f->store, "pods/default/leaving", &p, NULL), 0);
    assert_true(gs_nodelc_eviction_pending_json(p));
    json_decref(p);
    assert_int_equal(gs_store_get(f->store, "pods/default/staying", &p, NULL), 0);
    assert_false(gs_nodelc_eviction_pending_json(p));
    json_decref(p);
    struct gs_nodelc_stats st;
    gs_nodelc_stats(f->lc, &st);
    assert_int_equal(st.pods_evicted, 1);
    assert_int_equal(st.pods_deleted, 0);
    assert_int_equal(st.pods_recreated, 0);
    /* Later, the stale lease goes stale too. */
    gs_nodelc_scan(f->lc, f->now + 20);
    assert_string_equal(ready(f, "leased", &n), "Unknown");
    json_decref(n);
    /* Past the node-lost timeout (5 minutes after the eviction) the silent node is
     * declared lost and the terminating pod deleted; the later eviction still waits. */
    gs_nodelc_scan(f->lc, f->now + 301);
    assert_int_equal(gs_store_get(f->store, "pods/default/leaving", &p, NULL), GS_ENOENT);
    assert_int_equal(gs_store_get(f->store, "pods/default/staying", &p, NULL), 0);
    assert_true(gs_nodelc_eviction_pending_json(p));
    json_decref(p);
    gs_nodelc_stats(f->lc, &st);
    assert_int_equal(st.pods_deleted, 1);
    assert_int_equal(st.declared_lost, 1);
}

static void lifecycle_collects_orphans(void **state)
{
    struct lc_fx *f = *state;
    lc_node(f, "here", f->now);
    lc_pod(f, "on-here", "here", false);
    lc_pod(f, "orphan", "gone", false);            /* no Node named gone */
    lc_pod(f, "orphan-leaving", "gone", true);
    lc_pod(f, "early", "coming", false);           /* its Node appears within the quarantine */
    gs_nodelc_scan(f->lc, f->now);                 /* first sighting: quarantine starts */
    json_t *p = NULL;
    assert_int_equal(gs_store_get(f->store, "pods/default/orphan", &p, NULL), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName")), "gone");
    json_decref(p);
    lc_node(f, "coming", f->now + 10);
    lc_lease(f, "here", f->now + 24);
    lc_lease(f, "coming", f->now + 24);
    gs_nodelc_scan(f->lc, f->now + 25);            /* next pass, still quarantined */
    assert_int_equal(gs_store_get(f->store, "pods/default/orphan-leaving", &p, NULL), 0);
    json_decref(p);
    lc_lease(f, "here", f->now + 49);              /* the existing nodes stay alive */
    lc_lease(f, "coming", f->now + 49);
    gs_nodelc_scan(f->lc, f->now + 50);            /* past 40 s missing: handled as a lost node's */
    assert_int_equal(gs_store_get(f->store, "pods/default/orphan-leaving", &p, NULL), GS_ENOENT);
    assert_int_equal(gs_store_get(f->store, "pods/default/orphan", &p, NULL), 0);
    assert_null(json_object_get(json_object_get(p, "spec"), "nodeName")); /* re-created, unbound */
    json_decref(p);
    assert_int_equal(gs_store_get(f->store, "pods/default/early", &p, NULL), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName")), "coming");
    json_decref(p);
    assert_int_equal(gs_store_get(f->store, "pods/default/on-here", &p, NULL), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName")), "here");
    json_decref(p);
    struct gs_nodelc_stats st;
    gs_nodelc_stats(f->lc, &st);
    assert_int_equal(st.orphan_nodes, 1);
    assert_int_equal(st.pods_recreated, 1);
    assert_int_equal(st.pods_deleted, 1);
}

static const char *node_of(struct lc_fx *f, const char *pod, json_t **keep)
{
    char key[128];
    snprintf(key, sizeof key, "pods/default/%s", pod);
    assert_int_equal(gs_store_get(f->store, key, keep, NULL), 0);
    return json_string_value(json_object_get(json_object_get(*keep, "spec"), "nodeName"));
}

/* After a look that found no orphan the pods are listed again only when the
 * change stream shows one may have appeared; both ways still lead there: a
 * pod bound later to a node that does not exist, and a Node deleted under
 * its pods. Pods on live nodes are left alone. */
static void lifecycle_orphans_after_a_clean_look(void **state)
{
    struct lc_fx *f = *state;
    lc_node(f, "here", f->now);
    lc_node(f, "doomed", f->now);
    lc_pod(f, "on-here", "here", false);
    lc_pod(f, "on-doomed", "doomed", false);
    gs_nodelc_scan(f->lc, f->now); /* a clean look */
    for (int i = 1; i <= 8; i++) {
        lc_lease(f, "here", f->now + 25.0 * i - 1);
        if (i <= 2) lc_lease(f, "doomed", f->now + 25.0 * i - 1);
        if (i == 2) {
            lc_pod(f, "late", "gone", false);
            assert_int_equal(gs_store_delete(f->store, "nodes/doomed", 0, NULL, NULL), 0);
        }
        gs_nodelc_scan(f->lc, f->now + 25.0 * i);
    }
    json_t *p = NULL;
    assert_null(node_of(f, "late", &p)); /* re-created unbound: its node never existed */
    json_decref(p);
    assert_null(node_of(f, "on-doomed", &p));
    json_decref(p);
    assert_string_equal(node_of(f, "on-here", &p), "here");
    json_decref(p);
    struct gs_nodelc_stats st;
    gs_nodelc_stats(f->lc, &st);
    assert_int_equal(st.orphan_nodes, 2);
    assert_int_equal(st.pods_recreated, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(bound_pod_terminates, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(immediate_deletions, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(bad_grace_periods, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(finalizers_hold_objects, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(node_tokens_and_leases, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(scheduler_waits_for_termination, setup_sched, api_env_teardown),
        cmocka_unit_test_setup_teardown(scheduler_holds_evicted_devices, setup_sched, api_env_teardown),
        cmocka_unit_test_setup_teardown(lifecycle_reads_leases, lc_setup, lc_fx_teardown),
        cmocka_unit_test_setup_teardown(lifecycle_collects_orphans, lc_setup, lc_fx_teardown),
        cmocka_unit_test_setup_teardown(lifecycle_orphans_after_a_clean_look, lc_setup, lc_fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
