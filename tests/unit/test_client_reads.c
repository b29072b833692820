/*
 * test_client_reads.c - answers a client cannot use are errors, never empty
 * views: lists and watch streams that are not JSON, cut short, nested too
 * deep or without their items, from a fake server (fake_http.h), through
 * the client (control/client.c) and the agent's relist (agent_watch.c),
 * which must keep its pods when a relist fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/agent_int.h"
#include "agent/fetch.h"
#include "control/client.h"
#include "fake_http.h"

#include <string.h>

static struct gs_client *client_of(struct fake_http *f)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", f->port);
    struct gs_client_opts o = {.server = url, .token = "t", .timeout_ms = 5000};
    struct gs_client *c = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_client_new(&o, &c, &d), 0);
    return c;
}

static const struct gs_api_resource *pods(void) { return gs_api_resource_lookup("pods"); }

/* A JSON text nested depth levels deep inside a PodList's items. */
static char *deep_list(int depth)
{
    size_t n = 64 + 2 * (size_t)depth;
    char *s = malloc(n), *p = s;
    p += sprintf(p, "{\"kind\":\"PodList\",\"items\":[");
    for (int i = 0; i < depth; i++) *p++ = '[';
    for (int i = 0; i < depth; i++) *p++ = ']';
    strcpy(p, "]}");
    return s;
}

/* GS_EPARSE (or want) with a Status whose message holds part. */
static void expect_list_error(struct gs_client *c, int want, const char *part)
{
    json_t *out = NULL;
    int err = gs_client_list(c, pods(), NULL, NULL, NULL, false, &out);
    if (err != want) fail_msg("list returned %d (%s), want %d", err, gs_strerror(err), want);
    if (part && !strstr(gs_client_status_message(out), part))
        fail_msg("message \"%s\" lacks \"%s\"", gs_client_status_message(out), part);
    assert_false(json_array_size(json_object_get(out, "items"))); /* no list handed back */
    json_decref(out);
}

static void unreadable_lists_are_errors(void **state)
{
    (void)state;
    struct fake_http *f = fake_http_start();
    struct gs_client *c = client_of(f);
    /* Control: a readable empty list is an empty list. */
    fake_http_set_body(f, "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[]}");
    json_t *out = NULL;
    assert_int_equal(gs_client_list(c, pods(), NULL, NULL, NULL, false, &out), 0);
    assert_true(json_is_array(json_object_get(out, "items")));
    json_decref(out);

    fake_http_set_body(f, "<html>502 Bad Gateway</html>");
    expect_list_error(c, GS_EPARSE, "not JSON");
    fake_http_set_body(f, "{\"kind\":\"PodList\",\"items\":[{\"metadata\":");
    expect_list_error(c, GS_EPARSE, "not JSON");
    fake_http_set_body(f, "{\"kind\":\"PodList\"}");
    expect_list_error(c, GS_EPARSE, "without an items array");
    fake_http_set_body(f, "[]");
    expect_list_error(c, GS_EPARSE, "no JSON object");
    char *deep = deep_list(2100); /* past the parse depth of jansson (2048) */
    fake_http_set_body(f, deep);
    free(deep);
    expect_list_error(c, GS_EPARSE, "not JSON");
    /* Content-Length promises more than arrives: cut short. */
    const char cut[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n"
                       "Connection: close\r\n\r\n{\"kind\":\"PodList\",\"items\":[";
    fake_http_set(f, cut, sizeof cut - 1);
    expect_list_error(c, GS_EIO, NULL);
    /* A get that is not an object. */
    fake_http_set_body(f, "[1, 2]");
    assert_int_equal(gs_client_get(c, pods(), "default", "p", &out), GS_EPARSE);
    assert_non_null(strstr(gs_client_status_message(out), "no JSON object"));
    json_decref(out);
    gs_client_free(c);
    fake_http_stop(f);
}

struct evlog {
    char types[8][12];
    char rv[32];
    int n;
};

static int on_event(const char *type, json_t *obj, void *arg)
{
    struct evlog *l = arg;
    if (l->n < 8) snprintf(l->types[l->n++], sizeof l->types[0], "%s", type);
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (rv) snprintf(l->rv, sizeof l->rv, "%s", rv);
    return 0;
}

/* A chunked watch answer with body as one chunk, optionally without the final chunk. */
static void set_stream(struct fake_http *f, const char *body, bool finished)
{
    char r[4096];
    int n = snprintf(r, sizeof r, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                                  "Connection: close\r\n\r\n%zx\r\n%s\r\n%s", strlen(body), body,
                     finished ? "0\r\n\r\n" : "");
    fake_http_set(f, r, (size_t)n);
}

static int watch(struct gs_client *c, struct evlog *l)
{
    memset(l, 0, sizeof *l);
    return gs_client_watch(c, pods(), NULL, NULL, NULL, "5", 5, on_event, l);
}

static void unreadable_watch_streams_are_errors(void **state)
{
    (void)state;
    struct fake_http *f = fake_http_start();
    struct gs_client *c = client_of(f);
    struct evlog l;
    /* Blank keep-alive lines are skipped; a BOOKMARK reaches fn with its version; a clean end is 0. */
    set_stream(f, "\n{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"6\"}}}\n\n"
                  "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\","
                  "\"metadata\":{\"resourceVersion\":\"9\"}}}\n", true);
    assert_int_equal(watch(c, &l), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.types[0], "ADDED");
    assert_string_equal(l.types[1], "BOOKMARK");
    assert_string_equal(l.rv, "9");
    /* A line that is not JSON ends the watch with GS_EPARSE after the good events. */
    set_stream(f, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\nnot json\n", true);
    assert_int_equal(watch(c, &l), GS_EPARSE);
    assert_int_equal(l.n, 1);
    /* An event without a type or without an object. */
    set_stream(f, "{\"object\":{}}\n", true);
    assert_int_equal(watch(c, &l), GS_EPARSE);
    set_stream(f, "{\"type\":\"ADDED\"}\n", true);
    assert_int_equal(watch(c, &l), GS_EPARSE);
    assert_int_equal(l.n, 0);
    /* A stream that stops inside an event, and one cut without its last chunk. */
    set_stream(f, "{\"type\":\"ADDED\",\"object\":{\"metadata\":", true);
    assert_int_equal(watch(c, &l), GS_EIO);
    set_stream(f, "{\"type\":\"ADDED\",\"object\":{}}\n", false);
    assert_int_equal(watch(c, &l), GS_EIO);
    gs_client_free(c);
    fake_http_stop(f);
}

/* The agent's relist against answers it cannot use: its desired map (what
 * keeps its pods running) is untouched; a good list then replaces it. */
static void failed_relist_keeps_pods(void **state)
{
    (void)state;
    struct fake_http *f = fake_http_start();
    struct gs_client *c = client_of(f);
    struct gs_agent a = {0};
    snprintf(a.node, sizeof a.node, "n1");
    pthread_mutex_init(&a.wmu, NULL);
    a.desired = json_pack("{s:{s:{s:s,s:s,s:s}}}", "default/web", "metadata", "name", "web", "uid", "u1",
                          "resourceVersion", "3");
    a.changed = json_object();
    a.desired_synced = true;
    char rv[32] = "3";
    const char *bad[] = {"garbage", "{\"kind\":\"PodList\",\"items\":[{\"metadata\":", "{\"kind\":\"PodList\"}", "{}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fake_http_set_body(f, bad[i]);
        assert_int_equal(gs__agent_relist(&a, c, rv, sizeof rv), GS_EPARSE);
        assert_non_null(json_object_get(a.desired, "default/web"));
        assert_int_equal(json_object_size(a.desired), 1);
        assert_int_equal(json_object_size(a.changed), 0);
        assert_string_equal(rv, "3");
    }
    char *deep = deep_list(2100);
    fake_http_set_body(f, deep);
    free(deep);
    assert_int_equal(gs__agent_relist(&a, c, rv, sizeof rv), GS_EPARSE);
    assert_int_equal(json_object_size(a.desired), 1);
    /* The server gone: same. */
    fake_http_set(f, "", 0);
    assert_int_equal(gs__agent_relist(&a, c, rv, sizeof rv), GS_EIO);
    assert_int_equal(json_object_size(a.desired), 1);
    assert_int_equal(json_object_size(a.changed), 0);
    /* A real empty list does remove the pod (marked changed, so the loop stops it). */
    fake_http_set_body(f, "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"8\"},\"items\":[]}");
    assert_int_equal(gs__agent_relist(&a, c, rv, sizeof rv), 0);
    assert_int_equal(json_object_size(a.desired), 0);
    assert_non_null(json_object_get(a.changed, "default/web"));
    assert_string_equal(rv, "8");
    json_decref(a.desired);
    json_decref(a.changed);
    pthread_mutex_destroy(&a.wmu);
    gs_client_free(c);
    fake_http_stop(f);
}

/* The agent endpoint GET (fetch.c): an answer cut short is an error, not a shorter page. */
static void agent_fetch_cut_short_is_an_error(void **state)
{
    (void)state;
    struct fake_http *f = fake_http_start();
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", f->port);
    const char cut[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\ngpu_util 1\n";
    fake_http_set(f, cut, sizeof cut - 1);
    char *body = NULL;
    size_t len = 0;
    long code = 0;
    assert_int_equal(gs_agent_get(ep, "/metrics", 3000, &body, &len, &code), GS_EIO);
    assert_null(body);
    fake_http_set_body(f, "gpu_util 1\n");
    assert_int_equal(gs_agent_get(ep, "/metrics", 3000, &body, &len, &code), 0);
    assert_int_equal(code, 200);
    assert_string_equal(body, "gpu_util 1\n");
    free(body);
    fake_http_stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unreadable_lists_are_errors),
        cmocka_unit_test(unreadable_watch_streams_are_errors),
        cmocka_unit_test(failed_relist_keeps_pods),
        cmocka_unit_test(agent_fetch_cut_short_is_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
