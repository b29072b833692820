/*
 * test_api_safety.c - the writes that must not write and the deletes that
 * must ask first: dryRun=All on create, update, patch, binding and delete
 * (answers what would be stored, the store's version does not move),
 * fieldValidation Strict/Warn/Ignore with kube's texts and Warning headers,
 * enum fields refused with kube's "Unsupported value", DeleteOptions as
 * JSON and as client-go's protobuf, and pods/eviction against
 * PodDisruptionBudgets (429 with the DisruptionBudget cause, status
 * written, the last allowed disruption spent once).
 */
#include "control/api.h"
#include "control/pdb.h"
#include "control/resources.h"
#include "core/codec.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "api_fixture.h"

static json_t *J(const char *text)
{
    json_t *d = NULL;
    struct gs_diags dg = {0};
    assert_int_equal(gs_json_decode(text, strlen(text), &d, &dg), 0);
    gs_diags_free(&dg);
    return d;
}

static const char *S(const json_t *o, const char *a, const char *b)
{
    return json_string_value(json_object_get(b ? json_object_get(o, a) : o, b ? b : a));
}

static const struct gs_api_resource *R(const char *name)
{
    return gs_api_resource_lookup(name);
}

static const char tokens[] = "adm,admin,,,admin\nnod,system:node:n1,,,node\n";

static int setup(void **state)
{
    struct gs_server_opts o = {.max_body = 64 * 1024, .no_scheduler = true};
    return api_env_start(state, "/tmp/gs-safety-XXXXXX", tokens, false, o);
}

static json_t *pod(const char *name, const char *app)
{
    return json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:s, s:[{s:s, s:s}]}}", "apiVersion", "v1", "kind", "Pod",
                     "metadata", "name", name, "labels", "app", app, "spec", "restartPolicy", "Never", "containers",
                     "name", "c", "image", "busybox");
}

/* The store's version as a list shows it. */
static long long store_rv(struct gs_client *c)
{
    json_t *out = NULL;
    assert_int_equal(gs_client_call(c, "GET", "/api/v1/pods", NULL, NULL, NULL, &out, NULL), 0);
    long long rv = atoll(S(out, "metadata", "resourceVersion"));
    json_decref(out);
    return rv;
}

static long call(struct gs_client *c, const char *method, const char *path, const char *ctype, const json_t *body,
                 json_t **out)
{
    long code = 0;
    gs_client_call(c, method, path, ctype, body, NULL, out, &code);
    return code;
}

/*--- dryRun ---*/

static void dry_run_writes_nothing(void **state)
{
    struct api_env *e = *state;
    json_t *p = pod("web", "web"), *out = NULL;
    assert_int_equal(gs_client_create(e->adm, R("pods"), "default", p, NULL), 0);
    long long rv = store_rv(e->adm);

    /* create: the answer is the object as it would be stored, nothing is */
    json_t *p2 = pod("web2", "web");
    assert_int_equal(call(e->adm, "POST", "/api/v1/namespaces/default/pods?dryRun=All", "application/json", p2, &out),
                     201);
    assert_non_null(S(out, "metadata", "uid"));
    assert_non_null(S(out, "metadata", "creationTimestamp"));
    assert_string_equal(S(out, "status", "phase"), "Pending");
    json_decref(out);
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "web2", &out), GS_ENOENT);
    json_decref(out);
    /* an existing name is still a conflict */
    assert_int_equal(call(e->adm, "POST", "/api/v1/namespaces/default/pods?dryRun=All", "application/json", p, &out),
                     409);
    json_decref(out);

    /* update and patch answer the new object; the stored one stays */
    json_object_set_new(json_object_get(json_object_get(p, "metadata"), "labels"), "app", json_string("v2"));
    assert_int_equal(call(e->adm, "PUT", "/api/v1/namespaces/default/pods/web?dryRun=All", "application/json", p, &out),
                     200);
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(out, "metadata"), "labels"),
                                                          "app")), "v2");
    json_decref(out);
    json_t *patch = J("{\"metadata\":{\"labels\":{\"app\":\"v3\"}}}");
    assert_int_equal(call(e->adm, "PATCH", "/api/v1/namespaces/default/pods/web?dryRun=All",
                          "application/strategic-merge-patch+json", patch, &out), 200);
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(out, "metadata"), "labels"),
                                                          "app")), "v3");
    json_decref(out);
    /* a dry-run write is still validated */
    json_t *bad = J("{\"spec\":{\"restartPolicy\":\"Sometimes\"}}");
    assert_int_equal(call(e->adm, "PATCH", "/api/v1/namespaces/default/pods/web?dryRun=All",
                          "application/merge-patch+json", bad, &out), 422);
    json_decref(out);

    /* binding */
    json_t *b = J("{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"target\":{\"name\":\"n1\"}}");
    assert_int_equal(call(e->adm, "POST", "/api/v1/namespaces/default/pods/web/binding?dryRun=All",
                          "application/json", b, &out), 201);
    json_decref(out);

    /* delete, by query and by DeleteOptions body */
    assert_int_equal(call(e->adm, "DELETE", "/api/v1/namespaces/default/pods/web?dryRun=All", NULL, NULL, &out), 200);
    assert_string_equal(S(out, "metadata", "name"), "web");
    json_decref(out);
    json_t *opts = J("{\"kind\":\"DeleteOptions\",\"apiVersion\":\"meta.k8s.io/v1\",\"dryRun\":[\"All\"]}");
    assert_int_equal(call(e->adm, "DELETE", "/api/v1/namespaces/default/pods/web", "application/json", opts, &out),
                     200);
    json_decref(out);

    assert_int_equal(store_rv(e->adm), rv);
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "web", &out), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(out, "metadata"), "labels"),
                                                          "app")), "web");
    assert_null(json_object_get(out, "spec") ? json_object_get(json_object_get(out, "spec"), "nodeName") : NULL);
    json_decref(out);

    /* what kube-apiserver refuses */
    assert_int_equal(call(e->adm, "DELETE", "/api/v1/namespaces/default/pods/web?dryRun=Yes", NULL, NULL, &out), 422);
    assert_string_equal(S(out, "message", NULL), "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: "
                                           "\"Yes\": supported values: \"All\"");
    json_decref(out);
    json_t *opts2 = J("{\"dryRun\":[\"Some\"]}");
    assert_int_equal(call(e->adm, "DELETE", "/api/v1/namespaces/default/pods/web", "application/json", opts2, &out),
                     422);
    json_decref(out);
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "web", NULL), 0);
    json_decref(opts2);
    json_decref(opts);
    json_decref(b);
    json_decref(bad);
    json_decref(patch);
    json_decref(p2);
    json_decref(p);
}

/*--- fieldValidation ---*/

static void field_validation_modes(void **state)
{
    struct api_env *e = *state;
    json_t *p = pod("typo", "t"), *out = NULL;
    json_object_set_new(json_object_get(p, "spec"), "nodeSelecter", json_pack("{s:s}", "a", "b"));
    const char *w = NULL;

    assert_int_equal(call(e->adm, "POST", "/api/v1/namespaces/default/pods?fieldValidation=Strict",
                          "application/json", p, &out), 400);
    assert_string_equal(S(out, "message", NULL), "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: "
                                           "unknown field \"spec.nodeSelecter\"");
    assert_string_equal(S(out, "reason", NULL), "BadRequest");
    json_decref(out);
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "typo", NULL), GS_ENOENT);

    assert_int_equal(call(e->adm, "POST", "/api/v1/namespaces/default/pods?fieldValidation=Bogus",
                          "application/json", p, &out), 422);
    assert_string_equal(S(out, "message", NULL), "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported "
                                           "value: \"Bogus\": supported values: \"Ignore\", \"Strict\", \"Warn\"");
    json_decref(out);

    /* default Warn: stored as given, with kube's Warning header */
    assert_int_equal(call(e->adm, "POST", "/api/v1/namespaces/default/pods", "application/json", p, &out), 201);
    json_decref(out);
    assert_int_equal(gs_client_warnings(e->adm, 0, &w), 1);
    assert_string_equal(w, "unknown field \"spec.nodeSelecter\"");
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "typo", &out), 0);
    assert_non_null(json_object_get(json_object_get(out, "spec"), "nodeSelecter"));
    assert_int_equal(gs_client_warnings(e->adm, 0, &w), 0); /* a read has none */
    json_decref(out);

    /* patches: the patch's own fields, directives aside */
    json_t *patch = J("{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"c\"}],\"containers\":[{\"name\":\"c\","
                      "\"imagePullPolicyy\":\"Always\"}]}}");
    assert_int_equal(call(e->adm, "PATCH", "/api/v1/namespaces/default/pods/typo?fieldValidation=Strict",
                          "application/strategic-merge-patch+json", patch, &out), 400);
    assert_non_null(strstr(S(out, "message", NULL), "unknown field \"spec.containers[0].imagePullPolicyy\""));
    json_decref(out);
    json_decref(patch);
    /* Ignore: nothing said. (Shown on metadata: an unknown field in the spec is a spec change, which
     * pod updates may not make.) */
    patch = J("{\"metadata\":{\"labelz\":{\"a\":\"b\"}}}");
    assert_int_equal(call(e->adm, "PATCH", "/api/v1/namespaces/default/pods/typo?fieldValidation=Ignore",
                          "application/strategic-merge-patch+json", patch, &out), 200);
    json_decref(out);
    assert_int_equal(gs_client_warnings(e->adm, 0, &w), 0);

    /* enums are validated whatever fieldValidation says */
    json_t *some = pod("sometimes", "s");
    json_object_set_new(json_object_get(some, "spec"), "restartPolicy", json_string("Sometimes"));
    assert_int_equal(call(e->adm, "POST", "/api/v1/namespaces/default/pods?fieldValidation=Ignore",
                          "application/json", some, &out), 422);
    assert_non_null(strstr(S(out, "message", NULL), "spec.restartPolicy: Unsupported value: \"Sometimes\": supported "
                                              "values: \"Always\", \"Never\", \"OnFailure\""));
    json_t *cause = json_array_get(json_object_get(json_object_get(out, "details"), "causes"), 0);
    assert_string_equal(S(cause, "field", NULL), "spec.restartPolicy");
    json_decref(out);
    json_decref(some);
    json_decref(patch);
    json_decref(p);
}

/*--- DeleteOptions ---*/

static void delete_options_encodings(void **state)
{
    struct api_env *e = *state;
    json_t *out = NULL;
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "d%d", i);
        json_t *p = pod(name, "d");
        assert_int_equal(gs_client_create(e->adm, R("pods"), "default", p, NULL), 0);
        json_decref(p);
    }
    json_t *v1 = J("{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"propagationPolicy\":\"Background\"}");
    json_t *meta = J("{\"kind\":\"DeleteOptions\",\"apiVersion\":\"meta.k8s.io/v1\",\"gracePeriodSeconds\":0}");
    json_t *policy = J("{\"kind\":\"DeleteOptions\",\"apiVersion\":\"policy/v1\"}");
    assert_int_equal(call(e->adm, "DELETE", "/api/v1/namespaces/default/pods/d0", "application/json", v1, &out), 200);
    json_decref(out);
    assert_int_equal(call(e->adm, "DELETE", "/api/v1/namespaces/default/pods/d1", "application/json", meta, &out), 200);
    json_decref(out);
    assert_int_equal(call(e->adm, "DELETE", "/api/v1/namespaces/default/pods/d2", "application/json", policy, &out),
                     200);
    json_decref(out);
    assert_int_equal(call(e->adm, "DELETE", "/api/v1/namespaces/default/pods/d3?gracePeriodSeconds=0", NULL, NULL,
                          &out), 200);
    json_decref(out);
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "d%d", i);
        assert_int_equal(gs_client_get(e->adm, R("pods"), "default", name, NULL), GS_ENOENT);
    }
    json_t *p = pod("keep", "k");
    assert_int_equal(gs_client_create(e->adm, R("pods"), "default", p, NULL), 0);
    json_t *wrong = J("{\"kind\":\"Pod\",\"apiVersion\":\"v1\"}");
    assert_int_equal(call(e->adm, "DELETE", "/api/v1/namespaces/default/pods/keep", "application/json", wrong, &out),
                     400);
    assert_string_equal(S(out, "message", NULL), "the body of a delete must be DeleteOptions, got kind \"Pod\"");
    json_decref(out);
    json_t *prop = J("{\"propagationPolicy\":\"Sideways\"}");
    assert_int_equal(call(e->adm, "DELETE", "/api/v1/namespaces/default/pods/keep", "application/json", prop, &out),
                     400);
    assert_string_equal(S(out, "message", NULL), "invalid DeleteOptions: propagationPolicy: Unsupported value: \"Sideways\": "
                                           "supported values: \"Background\", \"Foreground\", \"Orphan\"");
    json_decref(out);
    assert_int_equal(call(e->adm, "DELETE", "/api/v1/namespaces/default/pods/keep?propagationPolicy=Up", NULL, NULL,
                          &out), 400);
    assert_string_equal(S(out, "message", NULL), "invalid propagationPolicy \"Up\": supported values: \"Background\", "
                                                 "\"Foreground\", \"Orphan\"");
    json_decref(out);
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "keep", NULL), 0);
    json_decref(prop);
    json_decref(wrong);
    json_decref(p);
    json_decref(v1);
    json_decref(meta);
    json_decref(policy);
}

/* Protobuf as client-go writes it: "k8s\0" + runtime.Unknown{typeMeta, raw}. */
struct pbuf {
    unsigned char b[512];
    size_t n;
};

static void pb_varint(struct pbuf *p, uint64_t v)
{
    do {
        p->b[p->n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}

static void pb_bytes(struct pbuf *p, unsigned field, const void *data, size_t len)
{
    pb_varint(p, field << 3 | 2);
    pb_varint(p, len);
    memcpy(p->b + p->n, data, len);
    p->n += len;
}

static void envelope(struct pbuf *out, const char *api, const char *kind, const struct pbuf *raw)
{
    struct pbuf tm = {0};
    pb_bytes(&tm, 1, api, strlen(api));
    pb_bytes(&tm, 2, kind, strlen(kind));
    memcpy(out->b, "k8s", 4);
    out->n = 4;
    pb_bytes(out, 1, tm.b, tm.n);
    pb_bytes(out, 2, raw->b, raw->n);
}

static void protobuf_bodies(void **state)
{
    (void)state;
    struct pbuf opts = {0}, pre = {0}, env = {0};
    pb_varint(&opts, 1 << 3 | 0);
    pb_varint(&opts, 30);
    pb_bytes(&pre, 1, "u1", 2);
    pb_bytes(&opts, 2, pre.b, pre.n);
    pb_bytes(&opts, 4, "Background", 10);
    pb_bytes(&opts, 5, "All", 3);
    pb_varint(&opts, 9 << 3 | 0); /* an unknown field: skipped */
    pb_varint(&opts, 1);
    envelope(&env, "v1", "DeleteOptions", &opts);
    json_t *o = NULL;
    char why[256];
    assert_int_equal(gs__proto_decode((const char *)env.b, env.n, &o, why, sizeof why), 0);
    json_t *want = J("{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\",\"gracePeriodSeconds\":30,\"preconditions\":"
                     "{\"uid\":\"u1\"},\"propagationPolicy\":\"Background\",\"dryRun\":[\"All\"]}");
    assert_true(json_equal(o, want));
    json_decref(o);
    json_decref(want);

    struct pbuf ev = {0}, md = {0}, env2 = {0};
    pb_bytes(&md, 1, "web", 3);
    pb_bytes(&md, 3, "default", 7);
    pb_bytes(&ev, 1, md.b, md.n);
    pb_bytes(&ev, 2, opts.b, opts.n);
    envelope(&env2, "policy/v1", "Eviction", &ev);
    assert_int_equal(gs__proto_decode((const char *)env2.b, env2.n, &o, why, sizeof why), 0);
    assert_string_equal(S(o, "metadata", "name"), "web");
    assert_string_equal(S(o, "metadata", "namespace"), "default");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "deleteOptions"), "gracePeriodSeconds")), 30);
    json_decref(o);

    /* what is refused, and why */
    struct pbuf podraw = {0}, env3 = {0};
    envelope(&env3, "v1", "Pod", &podraw);
    assert_int_equal(gs__proto_decode((const char *)env3.b, env3.n, &o, why, sizeof why), GS_EINVAL);
    assert_string_equal(why, "protobuf bodies are accepted only for DeleteOptions and Eviction, got kind \"Pod\"; "
                             "send JSON");
    assert_int_equal(gs__proto_decode("{}", 2, &o, why, sizeof why), GS_EINVAL);
    assert_string_equal(why, "a protobuf body must start with the 4 bytes \"k8s\\0\"");
    assert_int_equal(gs__proto_decode((const char *)env.b, env.n - 3, &o, why, sizeof why), GS_EINVAL);
    assert_string_equal(why, "malformed protobuf envelope");
    assert_null(o);
}

/*--- PodDisruptionBudget arithmetic ---*/

static json_t *running_pod(const char *name, const char *app, bool ready)
{
    json_t *p = pod(name, app);
    json_object_set_new(json_object_get(p, "metadata"), "namespace", json_string("default"));
    json_object_set_new(p, "status", json_pack("{s:s, s:[{s:s, s:s}]}", "phase", "Running", "conditions", "type",
                                               "Ready", "status", ready ? "True" : "False"));
    return p;
}

static void pdb_arithmetic(void **state)
{
    (void)state;
    json_t *pods[5] = {running_pod("a", "w", true), running_pod("b", "w", true), running_pod("c", "w", true),
                       running_pod("d", "w", false), running_pod("x", "other", true)};
    json_t *pdb = J("{\"metadata\":{\"name\":\"b\",\"namespace\":\"default\"},\"spec\":{\"minAvailable\":2,"
                    "\"selector\":{\"matchLabels\":{\"app\":\"w\"}}}}");
    struct gs_pdb_eval ev;
    gs_pdb_evaluate(pdb, pods, 5, NULL, &ev);
    assert_int_equal(ev.expected, 4);
    assert_int_equal(ev.current_healthy, 3);
    assert_int_equal(ev.desired_healthy, 2);
    assert_int_equal(ev.disruptions_allowed, 1);
    json_t *disrupted = json_pack("{s:s}", "a", "2026-01-01T00:00:00Z");
    gs_pdb_evaluate(pdb, pods, 5, disrupted, &ev);
    assert_int_equal(ev.current_healthy, 2);
    assert_int_equal(ev.disruptions_allowed, 0);
    /* percentages round up, as Kubernetes scales them */
    json_object_set_new(json_object_get(pdb, "spec"), "minAvailable", json_string("60%"));
    gs_pdb_evaluate(pdb, pods, 5, NULL, &ev);
    assert_int_equal(ev.desired_healthy, 3); /* ceil(0.6 * 4) */
    assert_int_equal(ev.disruptions_allowed, 0);
    json_object_del(json_object_get(pdb, "spec"), "minAvailable");
    json_object_set_new(json_object_get(pdb, "spec"), "maxUnavailable", json_string("25%"));
    gs_pdb_evaluate(pdb, pods, 5, NULL, &ev);
    assert_int_equal(ev.desired_healthy, 3); /* 4 - ceil(0.25 * 4) */
    /* an empty selector selects every pod of the namespace */
    json_t *all = J("{\"metadata\":{\"namespace\":\"default\"},\"spec\":{\"selector\":{}}}");
    assert_true(gs_pdb_selects(all, pods[4]));
    json_t *expr = J("{\"metadata\":{\"namespace\":\"default\"},\"spec\":{\"selector\":{\"matchExpressions\":"
                     "[{\"key\":\"app\",\"operator\":\"NotIn\",\"values\":[\"w\"]}]}}}");
    assert_false(gs_pdb_selects(expr, pods[0]));
    assert_true(gs_pdb_selects(expr, pods[4]));
    json_t *other_ns = J("{\"metadata\":{\"namespace\":\"prod\"},\"spec\":{}}");
    assert_false(gs_pdb_selects(other_ns, pods[0]));
    assert_false(gs_pdb_pod_healthy(pods[3]));

    struct gs_diags d = {0};
    json_t *bad = J("{\"spec\":{\"minAvailable\":1,\"maxUnavailable\":\"10%\"}}");
    assert_int_equal(gs_pdb_validate(bad, &d), GS_EINVAL);
    assert_string_equal(d.v[0].path, "spec");
    assert_string_equal(d.v[0].msg, "minAvailable and maxUnavailable cannot be both set");
    gs_diags_free(&d);
    json_t *pct = J("{\"spec\":{\"maxUnavailable\":\"150%\"}}");
    assert_int_equal(gs_pdb_validate(pct, &d), GS_EINVAL);
    assert_string_equal(d.v[0].path, "spec.maxUnavailable");
    assert_string_equal(d.v[0].msg, "Invalid value: \"150%\": must not be greater than 100%");
    gs_diags_free(&d);
    json_t *neg = J("{\"spec\":{\"minAvailable\":-1}}");
    assert_int_equal(gs_pdb_validate(neg, &d), GS_EINVAL);
    assert_string_equal(d.v[0].msg, "Invalid value: -1: must be greater than or equal to 0");
    gs_diags_free(&d);
    json_t *word = J("{\"spec\":{\"minAvailable\":\"half\"}}");
    assert_int_equal(gs_pdb_validate(word, &d), GS_EINVAL);
    assert_string_equal(d.v[0].msg, "Invalid value: \"half\": a valid percent string must be a numeric string "
                                    "followed by an ending '%'");
    gs_diags_free(&d);
    assert_int_equal(gs_pdb_validate(pdb, &d), 0);
    for (int i = 0; i < 5; i++) json_decref(pods[i]);
    json_decref(word);
    json_decref(neg);
    json_decref(pct);
    json_decref(bad);
    json_decref(other_ns);
    json_decref(expr);
    json_decref(all);
    json_decref(disrupted);
    json_decref(pdb);
}

/*--- Eviction over HTTP ---*/

/* A pod bound to n1, Running and Ready, as its agent would report it. */
static void make_running(struct api_env *e, const char *name)
{
    json_t *p = pod(name, "w");
    assert_int_equal(gs_client_create(e->adm, R("pods"), "default", p, NULL), 0);
    assert_int_equal(gs_client_bind(e->adm, "default", name, "n1", NULL, NULL), 0);
    json_t *st = json_pack("{s:{s:s, s:[{s:s, s:s}]}}", "status", "phase", "Running", "conditions", "type", "Ready",
                           "status", "True");
    assert_int_equal(gs_client_patch(e->adm, R("pods"), "default", name, "status", false, st, NULL), 0);
    json_decref(st);
    json_decref(p);
}

static long evict(struct api_env *e, const char *name, const char *query, json_t **out)
{
    char path[256];
    snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s/eviction%s", name, query);
    json_t *ev = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "policy/v1", "kind", "Eviction", "metadata",
                           "name", name, "namespace", "default");
    long code = call(e->adm, "POST", path, "application/json", ev, out);
    json_decref(ev);
    return code;
}

static bool terminating(struct api_env *e, const char *name)
{
    json_t *out = NULL;
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", name, &out), 0);
    bool t = S(out, "metadata", "deletionTimestamp") != NULL;
    json_decref(out);
    return t;
}

static void eviction_respects_budgets(void **state)
{
    struct api_env *e = *state;
    json_t *out = NULL;
    make_running(e, "w1");
    make_running(e, "w2");
    make_running(e, "w3");

    /* no budget: evicted at once (gracefully: the pod runs on a node) */
    assert_int_equal(evict(e, "w3", "", &out), 201);
    assert_string_equal(S(out, "status", NULL), "Success");
    json_decref(out);
    assert_true(terminating(e, "w3"));

    json_t *pdb = J("{\"apiVersion\":\"policy/v1\",\"kind\":\"PodDisruptionBudget\",\"metadata\":{\"name\":\"w-pdb\"},"
                    "\"spec\":{\"minAvailable\":2,\"selector\":{\"matchLabels\":{\"app\":\"w\"}}}}");
    assert_int_equal(gs_client_create(e->adm, R("pdb"), "default", pdb, NULL), 0);
    assert_int_equal(evict(e, "w1", "", &out), 429);
    assert_string_equal(S(out, "message", NULL), "Cannot evict pod as it would violate the pod's disruption budget.");
    assert_string_equal(S(out, "reason", NULL), "TooManyRequests");
    json_t *cause = json_array_get(json_object_get(json_object_get(out, "details"), "causes"), 0);
    assert_string_equal(S(cause, "reason", NULL), "DisruptionBudget");
    assert_string_equal(S(cause, "message", NULL), "The disruption budget w-pdb needs 2 healthy pods and has 2 currently");
    json_decref(out);
    assert_false(terminating(e, "w1"));
    assert_int_equal(gs_client_get(e->adm, R("pdb"), "default", "w-pdb", &out), 0);
    json_t *st = json_object_get(out, "status");
    assert_int_equal(json_integer_value(json_object_get(st, "expectedPods")), 3); /* w3 too: going, not gone */
    assert_int_equal(json_integer_value(json_object_get(st, "currentHealthy")), 2);
    assert_int_equal(json_integer_value(json_object_get(st, "desiredHealthy")), 2);
    assert_int_equal(json_integer_value(json_object_get(st, "disruptionsAllowed")), 0);
    json_decref(out);

    /* room for one: the first eviction spends it, the second is refused */
    json_t *one = J("{\"spec\":{\"minAvailable\":1}}");
    assert_int_equal(gs_client_patch(e->adm, R("pdb"), "default", "w-pdb", NULL, false, one, NULL), 0);
    long long rv = store_rv(e->adm);
    assert_int_equal(evict(e, "w1", "?dryRun=All", &out), 201);
    json_decref(out);
    assert_int_equal(store_rv(e->adm), rv); /* decided, nothing written */
    assert_false(terminating(e, "w1"));
    assert_int_equal(evict(e, "w1", "", &out), 201);
    json_decref(out);
    assert_true(terminating(e, "w1"));
    assert_int_equal(evict(e, "w2", "", &out), 429);
    json_decref(out);
    assert_false(terminating(e, "w2"));

    /* a pod under two budgets cannot be evicted */
    json_t *pdb2 = J("{\"apiVersion\":\"policy/v1\",\"kind\":\"PodDisruptionBudget\",\"metadata\":{\"name\":\"all\"},"
                     "\"spec\":{\"maxUnavailable\":\"100%\"}}");
    assert_int_equal(gs_client_create(e->adm, R("pdb"), "default", pdb2, NULL), 0);
    assert_int_equal(evict(e, "w2", "", &out), 500);
    assert_string_equal(S(out, "message", NULL), "This pod has more than one PodDisruptionBudget, which the eviction "
                                           "subresource does not support.");
    json_decref(out);

    /* bodies that do not say what the URL says; budgets that cannot be */
    json_t *ev = J("{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{\"name\":\"other\"}}");
    assert_int_equal(call(e->adm, "POST", "/api/v1/namespaces/default/pods/w2/eviction", "application/json", ev, &out),
                     400);
    assert_string_equal(S(out, "message", NULL), "name in URL does not match name in Eviction object");
    json_decref(out);
    assert_int_equal(evict(e, "nosuch", "", &out), 404);
    json_decref(out);
    json_t *both = J("{\"apiVersion\":\"policy/v1\",\"kind\":\"PodDisruptionBudget\",\"metadata\":{\"name\":\"x\"},"
                     "\"spec\":{\"minAvailable\":1,\"maxUnavailable\":1}}");
    assert_int_equal(gs_client_create(e->adm, R("pdb"), "default", both, &out), GS_EINVAL);
    assert_non_null(strstr(S(out, "message", NULL), "minAvailable and maxUnavailable cannot be both set"));
    json_decref(out);
    /* a node may not evict */
    assert_int_equal(call(e->nod, "POST", "/api/v1/namespaces/default/pods/w2/eviction", "application/json", ev, &out),
                     403);
    json_decref(out);

    /* discovery: what kubectl drain looks for */
    assert_int_equal(call(e->adm, "GET", "/api/v1", NULL, NULL, &out), 200);
    bool found = false;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(out, "resources"), i, r)
        found |= !strcmp(S(r, "name", NULL), "pods/eviction") && !strcmp(S(r, "kind", NULL), "Eviction") &&
                 !strcmp(S(r, "group", NULL), "policy") && !strcmp(S(r, "version", NULL), "v1");
    assert_true(found);
    json_decref(out);
    json_decref(both);
    json_decref(ev);
    json_decref(pdb2);
    json_decref(one);
    json_decref(pdb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(dry_run_writes_nothing, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(field_validation_modes, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(delete_options_encodings, setup, api_env_teardown),
        cmocka_unit_test(protobuf_bodies),
        cmocka_unit_test(pdb_arithmetic),
        cmocka_unit_test_setup_teardown(eviction_respects_budgets, setup, api_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
