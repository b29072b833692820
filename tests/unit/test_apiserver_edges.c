/*
 * test_apiserver_edges.c - the API's answers at the edges of its input, over
 * HTTP against an in-process server: bad bytes in a path or a selector (400
 * naming it, never 500), malformed resourceVersions in PUT, patch and delete
 * preconditions (400 naming the field; a stale well-formed one still 409),
 * durations out of range (422 / 400 naming the field and the bound),
 * generateName collisions retried with a new suffix (409 only when every
 * attempt collides), a corrupt stored row (500 naming its key, lists go on),
 * and /readyz. Each assertion checks the message a client reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "control/api.h"
#include "control/apiserver_int.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char tokens[] = "adm,admin,,,admin\nnod,system:node:n1,,,node\n";

static int setup(void **state)
{
    struct gs_server_opts o = {.no_scheduler = true};
    return api_env_start(state, "/tmp/gs-edges-XXXXXX", tokens, false, o);
}

static int teardown(void **state) { return api_env_teardown(state); }

static const struct gs_api_resource *R(const char *name) { return gs_api_resource_lookup(name); }

static json_t *pod(const char *name)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1", "kind", "Pod", "metadata", "name",
                     name, "spec", "containers", "name", "c", "image", "busybox");
}

static const char *msg_of(const json_t *st) { return json_string_value(json_object_get(st, "message")); }

/* method path (body) answers code with a Status whose message holds want. */
static void expect(struct api_env *e, const char *method, const char *path, const char *ctype, const json_t *body,
                   long code, const char *want)
{
    json_t *out = NULL;
    long got = 0;
    gs_client_call(e->adm, method, path, ctype, body, NULL, &out, &got);
    const char *m = msg_of(out);
    if (got != code || !m || !strstr(m, want))
        fail_msg("%s %s: got %ld \"%s\", want %ld with \"%s\"", method, path, got, m ? m : "(no Status)", code, want);
    json_decref(out);
}

static void bad_bytes_in_paths_and_selectors(void **state)
{
    struct api_env *e = *state;
    expect(e, "GET", "/api/v1/namespaces/default/pods/a%ffb", NULL, NULL, 400,
           "invalid URL path \"/api/v1/namespaces/default/pods/a\\xffb\": byte 33 is not valid UTF-8");
    expect(e, "GET", "/api/v1/namespaces/default/pods/a%00b", NULL, NULL, 400,
           "byte 33 is a control character (or %00)");
    expect(e, "GET", "/api/v1/namespaces/de%0Afault/pods", NULL, NULL, 400, "a control character");
    expect(e, "GET", "/api/v1/namespaces/default/pods/%c0%af", NULL, NULL, 400, "not valid UTF-8"); /* overlong */
    expect(e, "GET", "/api/v1/pods?labelSelector=app%3D%ff", NULL, NULL, 400,
           "invalid labelSelector \"app=\\xff\": it is not valid UTF-8");
    expect(e, "GET", "/api/v1/pods?labelSelector=app%3Da%00b", NULL, NULL, 400,
           "invalid labelSelector \"app=a\\x7fb\": it contains a control character (or %00)");
    expect(e, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D%fe", NULL, NULL, 400,
           "invalid fieldSelector \"spec.nodeName=\\xfe\": it is not valid UTF-8");
    expect(e, "GET", "/api/v1/pods?watch=true&labelSelector=%01", NULL, NULL, 400, "invalid labelSelector");
    /* Valid UTF-8 still reaches the handlers: an unknown name is a plain 404. */
    expect(e, "GET", "/api/v1/namespaces/default/pods/caf%C3%A9", NULL, NULL, 404, "not found");
}

static void malformed_resource_versions(void **state)
{
    struct api_env *e = *state;
    json_t *p = pod("web"), *out = NULL;
    assert_int_equal(gs_client_create(e->adm, R("pods"), "default", p, &out), 0);
    json_decref(out);
    const char *bad[] = {"abc", "-5", "1.5", " 7", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_object_set_new(json_object_get(p, "metadata"), "resourceVersion", json_string(bad[i]));
        char want[160];
        snprintf(want, sizeof want, "metadata.resourceVersion: Invalid value: \"%s\": must be a decimal integer >= 0",
                 bad[i]);
        expect(e, "PUT", "/api/v1/namespaces/default/pods/web", "application/json", p, 400, want);
    }
    json_object_set_new(json_object_get(p, "metadata"), "resourceVersion", json_integer(3));
    expect(e, "PUT", "/api/v1/namespaces/default/pods/web", "application/json", p, 400,
           "metadata.resourceVersion: Invalid value: 3: must be a decimal integer >= 0 in a string");
    /* Well-formed but stale: the ordinary conflict. */
    json_object_set_new(json_object_get(p, "metadata"), "resourceVersion", json_string("1000"));
    expect(e, "PUT", "/api/v1/namespaces/default/pods/web", "application/json", p, 409, "has been modified");
    json_t *patch = json_pack("{s:{s:s, s:{s:s}}}", "metadata", "resourceVersion", "abc", "labels", "a", "b");
    expect(e, "PATCH", "/api/v1/namespaces/default/pods/web", "application/merge-patch+json", patch, 400,
           "metadata.resourceVersion: Invalid value: \"abc\"");
    json_decref(patch);
    json_t *del = json_pack("{s:s, s:s, s:{s:s}}", "kind", "DeleteOptions", "apiVersion", "v1", "preconditions",
                            "resourceVersion", "x1");
    expect(e, "DELETE", "/api/v1/namespaces/default/pods/web", "application/json", del, 400,
           "preconditions.resourceVersion: Invalid value: \"x1\"");
    json_decref(del);
    /* Nothing of the above wrote: the pod is still at its first version. */
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "web", &out), 0);
    assert_null(json_object_get(json_object_get(out, "metadata"), "labels"));
    json_decref(out);
    json_decref(p);
}

static void durations_in_range(void **state)
{
    struct api_env *e = *state;
    struct {
        const char *field;
        json_int_t v;
        const char *want;
    } bad[] = {
        {"terminationGracePeriodSeconds", -5,
         "spec.terminationGracePeriodSeconds: invalid value -5: must be from 0 to 31536000 seconds"},
        {"terminationGracePeriodSeconds", 40000000, "must be from 0 to 31536000 seconds (at most one year)"},
        {"activeDeadlineSeconds", 0, "spec.activeDeadlineSeconds: invalid value 0: must be from 1 to 2147483647"},
        {"activeDeadlineSeconds", 3000000000LL, "must be from 1 to 2147483647 seconds"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *p = pod("d");
        json_object_set_new(json_object_get(p, "spec"), bad[i].field, json_integer(bad[i].v));
        expect(e, "POST", "/api/v1/namespaces/default/pods", "application/json", p, 422, bad[i].want);
        json_decref(p);
    }
    json_t *p = pod("d");
    json_object_set_new(json_object_get(p, "spec"), "terminationGracePeriodSeconds", json_integer(30));
    json_object_set_new(json_object_get(p, "spec"), "activeDeadlineSeconds", json_integer(600));
    json_t *out = NULL;
    assert_int_equal(gs_client_create(e->adm, R("pods"), "default", p, &out), 0);
    json_decref(out);
    json_decref(p);
    expect(e, "DELETE", "/api/v1/namespaces/default/pods/d?gracePeriodSeconds=99999999999", NULL, NULL, 400,
           "invalid gracePeriodSeconds \"99999999999\": must be a whole number of seconds from 0 to 31536000");
    expect(e, "DELETE", "/api/v1/namespaces/default/pods/d?gracePeriodSeconds=-1", NULL, NULL, 400,
           "invalid gracePeriodSeconds \"-1\"");
    expect(e, "GET", "/api/v1/pods?watch=true&timeoutSeconds=-1", NULL, NULL, 400,
           "invalid timeoutSeconds \"-1\": must be a whole number of seconds from 0 to 86400");
    expect(e, "GET", "/api/v1/pods?timeoutSeconds=abc", NULL, NULL, 400, "invalid timeoutSeconds \"abc\"");
    expect(e, "GET", "/api/v1/pods?watch=1&timeoutSeconds=100000", NULL, NULL, 400, "from 0 to 86400");
}

/* Suffixes from a script: collisions on demand. */
static const char *script;
static size_t script_at;

static void scripted_suffix(unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)script[script_at % strlen(script)];
    script_at++;
}

static void generate_name_retried(void **state)
{
    struct api_env *e = *state;
    void (*orig)(unsigned char *, size_t) = gs__name_suffix_source;
    gs__name_suffix_source = scripted_suffix;
    script = "aab";
    script_at = 0;
    json_t *p = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1", "kind", "Pod", "metadata",
                          "generateName", "job-", "spec", "containers", "name", "c", "image", "busybox");
    json_t *a = NULL, *b = NULL;
    assert_int_equal(gs_client_create(e->adm, R("pods"), "default", p, &a), 0); /* suffix from 'a' */
    assert_int_equal(gs_client_create(e->adm, R("pods"), "default", p, &b), 0); /* 'a' taken, then 'b' */
    const char *na = json_string_value(json_object_get(json_object_get(a, "metadata"), "name"));
    const char *nb = json_string_value(json_object_get(json_object_get(b, "metadata"), "name"));
    assert_non_null(na);
    assert_non_null(nb);
    assert_true(!strncmp(na, "job-", 4) && !strncmp(nb, "job-", 4));
    assert_string_not_equal(na, nb);
    assert_int_equal(script_at, 3);
    json_decref(a);
    json_decref(b);
    /* Every attempt collides: 409, saying so. */
    script = "a";
    script_at = 0;
    expect(e, "POST", "/api/v1/namespaces/default/pods", "application/json", p, 409,
           "8 names generated from generateName \"job-\" were all taken");
    assert_int_equal(script_at, 8);
    gs__name_suffix_source = orig;
    /* An explicit name is never changed: a plain AlreadyExists. */
    json_t *named = pod("fixed"), *out = NULL;
    assert_int_equal(gs_client_create(e->adm, R("pods"), "default", named, &out), 0);
    json_decref(out);
    expect(e, "POST", "/api/v1/namespaces/default/pods", "application/json", named, 409,
           "pods \"fixed\" already exists");
    json_decref(named);
    json_decref(p);
}

static void corrupt_row_answers_500_for_itself(void **state)
{
    struct api_env *e = *state;
    const char *names[] = {"p1", "p2", "p3"};
    for (int i = 0; i < 3; i++) {
        json_t *p = pod(names[i]), *out = NULL;
        assert_int_equal(gs_client_create(e->adm, R("pods"), "default", p, &out), 0);
        json_decref(out);
        json_decref(p);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/store.db", e->dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    assert_int_equal(sqlite3_exec(db, "UPDATE objects SET value = 'not json' WHERE key LIKE '%/p2'", NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_changes(db), 1);
    sqlite3_close(db);
    expect(e, "GET", "/api/v1/namespaces/default/pods/p2", NULL, NULL, 500, "pods/default/p2 is corrupt");
    json_t *out = NULL;
    assert_int_equal(gs_client_list(e->adm, R("pods"), "default", NULL, NULL, false, &out), 0);
    assert_int_equal(json_array_size(json_object_get(out, "items")), 2);
    json_decref(out);
    assert_int_equal(gs_client_get(e->adm, R("pods"), "default", "p3", &out), 0);
    json_decref(out);
    struct gs_store_health h;
    gs_store_health(gs_server_store(e->srv), false, &h);
    assert_int_equal(h.corrupt, 1);
}

static void readyz_says_ok(void **state)
{
    struct api_env *e = *state;
    json_t *out = NULL;
    long code = 0;
    gs_client_call(e->adm, "GET", "/readyz", NULL, NULL, NULL, &out, &code);
    assert_int_equal(code, 200);
    json_decref(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(bad_bytes_in_paths_and_selectors, setup, teardown),
        cmocka_unit_test_setup_teardown(malformed_resource_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(durations_in_range, setup, teardown),
        cmocka_unit_test_setup_teardown(generate_name_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(corrupt_row_answers_500_for_itself, setup, teardown),
        cmocka_unit_test_setup_teardown(readyz_says_ok, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
