/*
 * test_watch_lifecycle.c - watches on the in-process API server end when
 * they should: a client that drops its connection frees the server's thread
 * and descriptor at once (2,000 of them, some on a selector that never
 * matches), timeoutSeconds ends a watch with a BOOKMARK, an idle watch gets
 * keep-alives, and bodies the clients could not read back are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "core/codec.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char tokens[] = "adm,admin,,,admin\n";

static int start_with(void **state, const char *keepalive)
{
    if (keepalive) setenv("GPUSCHED_WATCH_KEEPALIVE", keepalive, 1);
    else unsetenv("GPUSCHED_WATCH_KEEPALIVE");
    struct gs_server_opts o = {.no_scheduler = true};
    int rc = api_env_start(state, "/tmp/gs-watchlc-XXXXXX", tokens, false, o);
    unsetenv("GPUSCHED_WATCH_KEEPALIVE");
    return rc;
}

static int setup(void **state) { return start_with(state, NULL); }
static int setup_fast_keepalive(void **state) { return start_with(state, "0.3"); }

static const struct gs_api_resource *R(const char *name) { return gs_api_resource_lookup(name); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int count_dir(const char *path)
{
    DIR *d = opendir(path);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n - (strcmp(path, "/proc/self/fd") == 0); /* the one opendir holds */
}

/* Sends a request (body with its content type, or none) and reads the
 * answer's headers; the socket, ready for the rest. */
static int open_req(struct api_env *e, const char *method, const char *path, const char *ctype, const char *body,
                    char *head, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)gs_server_port(e->srv)),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char req[1024];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer adm\r\n", method, path);
    if (body) n += snprintf(req + n, sizeof req - (size_t)n, "Content-Type: %s\r\nContent-Length: %zu\r\n", ctype,
                            strlen(body));
    n += snprintf(req + n, sizeof req - (size_t)n, "\r\n");
    assert_int_equal(write(fd, req, (size_t)n), n);
    if (body) assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    size_t got = 0;
    head[0] = 0;
    while (!strstr(head, "\r\n\r\n")) {
        ssize_t k = read(fd, head + got, len - 1 - got);
        if (k <= 0) fail_msg("no answer headers for %s (got \"%s\")", path, head);
        got += (size_t)k;
        head[got] = 0;
    }
    return fd;
}

static int open_get(struct api_env *e, const char *path, char *head, size_t len)
{
    return open_req(e, "GET", path, NULL, NULL, head, len);
}

/* Reads from fd for secs seconds (or until it closes) into buf. */
static size_t read_for(int fd, double secs, char *buf, size_t len)
{
    struct timeval tv = {.tv_usec = 100 * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t got = 0;
    for (double end = now_s() + secs; now_s() < end && got < len - 1;) {
        ssize_t k = read(fd, buf + got, len - 1 - got);
        if (k == 0) break;
        if (k > 0) got += (size_t)k;
    }
    buf[got] = 0;
    return got;
}

#define WATCHES 2000
#define BATCH 200

static void dropped_watches_free_threads_and_fds(void **state)
{
    struct api_env *e = *state;
    json_t *out = NULL;
    assert_int_equal(gs_client_list(e->adm, R("nodes"), NULL, NULL, NULL, false, &out), 0); /* warm */
    json_decref(out);
    usleep(200 * 1000);
    int threads0 = count_dir("/proc/self/task"), fds0 = count_dir("/proc/self/fd");
    const char *paths[] = {"/api/v1/pods?watch=true&labelSelector=never%3Dmatches",
                           "/api/v1/nodes?watch=true&resourceVersion=0",
                           "/api/v1/namespaces/default/pods?watch=true&fieldSelector=spec.nodeName%3Dnowhere"};
    int fds[BATCH], peak = 0, threads = 0, fdn = 0;
    double slowest = 0;
    char head[4096];
    for (int done = 0; done < WATCHES; done += BATCH) {
        for (int i = 0; i < BATCH; i++) {
            fds[i] = open_get(e, paths[(done + i) % 3], head, sizeof head);
            if (!strstr(head, " 200 ")) fail_msg("watch refused: %s", head);
        }
        int t = count_dir("/proc/self/task");
        if (t > peak) peak = t;
        for (int i = 0; i < BATCH; i++) close(fds[i]);
        /* Each batch is gone again within a few seconds (the server looks at its sockets every second). */
        double t0 = now_s();
        for (; now_s() - t0 < 5; usleep(50 * 1000)) {
            threads = count_dir("/proc/self/task"), fdn = count_dir("/proc/self/fd");
            if (threads <= threads0 + 2 && fdn <= fds0 + 2) break;
        }
        if (threads > threads0 + 2 || fdn > fds0 + 2)
            fail_msg("%d watches dropped: %d threads (baseline %d), %d descriptors (baseline %d) after 5 s",
                     done + BATCH, threads, threads0, fdn, fds0);
        if (now_s() - t0 > slowest) slowest = now_s() - t0;
    }
    /* The watches were really open, one thread each. */
    if (peak < threads0 + BATCH / 2) fail_msg("only %d threads at the peak over a baseline of %d", peak, threads0);
    print_message("%d watches dropped in batches of %d: peak %d threads, back to %d (baseline %d) within %.2f s; "
                  "%d descriptors (baseline %d)\n", WATCHES, BATCH, peak, threads, threads0, slowest, fdn, fds0);
    /* A legitimate request is still answered. */
    assert_int_equal(gs_client_list(e->adm, R("nodes"), NULL, NULL, NULL, false, &out), 0);
    json_decref(out);
}

struct bookmarks {
    int n, other;
    char rv[32], kind[32], api[32];
    bool only_version;
};

static int on_event(const char *type, json_t *obj, void *arg)
{
    struct bookmarks *b = arg;
    if (strcmp(type, "BOOKMARK")) {
        b->other++;
        return 0;
    }
    b->n++;
    json_t *md = json_object_get(obj, "metadata");
    snprintf(b->rv, sizeof b->rv, "%s", json_string_value(json_object_get(md, "resourceVersion")) ?: "");
    snprintf(b->kind, sizeof b->kind, "%s", json_string_value(json_object_get(obj, "kind")) ?: "");
    snprintf(b->api, sizeof b->api, "%s", json_string_value(json_object_get(obj, "apiVersion")) ?: "");
    b->only_version = json_object_size(md) == 1 && json_object_size(obj) == 3;
    return 0;
}

static void timeout_ends_watch_with_bookmark(void **state)
{
    struct api_env *e = *state;
    json_t *n = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Node", "metadata", "name", "b1");
    assert_int_equal(gs_client_create(e->adm, R("nodes"), NULL, n, NULL), 0);
    json_decref(n);
    struct bookmarks b = {0};
    double t0 = now_s();
    assert_int_equal(gs_client_watch(e->adm, R("nodes"), NULL, "never=matches", NULL, "0", 1, on_event, &b), 0);
    double took = now_s() - t0;
    if (took < 0.9 || took > 3) fail_msg("a 1 s watch took %.2f s", took);
    assert_int_equal(b.other, 0);
    assert_int_equal(b.n, 1); /* the final one; keep-alives come every 30 s here */
    assert_string_equal(b.kind, "Node");
    assert_string_equal(b.api, "v1");
    assert_true(b.only_version);
    assert_true(atoll(b.rv) > 0);
    /* Bad options are refused, naming them. */
    json_t *st = NULL;
    assert_int_equal(gs_client_call(e->adm, "GET", "/api/v1/nodes?watch=true&timeoutSeconds=soon", NULL, NULL, NULL,
                                    &st, NULL),
                     GS_EINVAL);
    assert_non_null(strstr(gs_client_status_message(st), "timeoutSeconds \"soon\""));
    json_decref(st);
    assert_int_equal(gs_client_call(e->adm, "GET", "/api/v1/nodes?watch=true&allowWatchBookmarks=maybe", NULL, NULL,
                                    NULL, &st, NULL),
                     GS_EINVAL);
    assert_non_null(strstr(gs_client_status_message(st), "allowWatchBookmarks \"maybe\""));
    json_decref(st);
}

static void idle_watch_gets_keepalives(void **state)
{
    struct api_env *e = *state;
    /* With bookmarks allowed: BOOKMARKs every 0.3 s, then the final one. */
    struct bookmarks b = {0};
    assert_int_equal(gs_client_watch(e->adm, R("pods"), NULL, "never=matches", NULL, "0", 2, on_event, &b), 0);
    assert_int_equal(b.other, 0);
    if (b.n < 4) fail_msg("%d bookmarks in a 2 s watch with keep-alives every 0.3 s", b.n);
    assert_string_equal(b.kind, "Pod");
    /* Without: blank lines (a chunk holding "\n"), never a BOOKMARK. */
    char head[4096], body[8192];
    int fd = open_get(e, "/api/v1/pods?watch=true&labelSelector=never%3Dmatches", head, sizeof head);
    read_for(fd, 1.0, body, sizeof body);
    close(fd);
    assert_non_null(strstr(body, "1\r\n\n\r\n"));
    assert_null(strstr(body, "BOOKMARK"));
}

/* A pod with spec.x nested so that the whole object is depth levels deep. */
static json_t *deep_pod(const char *name, int depth)
{
    int k = depth - 2; /* the pod and its spec */
    size_t cap = 512 + 2 * (size_t)k;
    char *s = malloc(cap), *p = s;
    p += sprintf(p, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\"},\"spec\":{\"containers\":"
                    "[{\"name\":\"c\",\"image\":\"busybox\"}],\"x\":", name);
    for (int i = 0; i < k; i++) *p++ = '[';
    for (int i = 0; i < k; i++) *p++ = ']';
    strcpy(p, "}}");
    json_t *v = json_loads(s, 0, NULL);
    free(s);
    assert_non_null(v);
    return v;
}

static void bodies_too_deep_to_read_back_are_refused(void **state)
{
    struct api_env *e = *state;
    json_t *p = deep_pod("at-limit", GS_JSON_MAX_DEPTH), *st = NULL;
    assert_int_equal(gs_client_create(e->adm, R("pods"), "default", p, &st), 0);
    json_decref(st);
    json_decref(p);
    int depths[] = {GS_JSON_MAX_DEPTH + 1, 2046};
    for (size_t i = 0; i < 2; i++) {
        p = deep_pod("deep", depths[i]);
        long code = 0;
        int err = gs_client_call(e->adm, "POST", "/api/v1/namespaces/default/pods", "application/json", p, NULL, &st,
                                 &code);
        assert_int_equal(err, GS_EINVAL);
        assert_int_equal(code, 422);
        if (!strstr(gs_client_status_message(st), "limited to 64 levels of nesting"))
            fail_msg("depth %d: \"%s\"", depths[i], gs_client_status_message(st));
        json_decref(st);
        json_decref(p);
    }
    /* A patch that would make the stored pod too deep. */
    json_t *patch = deep_pod("at-limit", GS_JSON_MAX_DEPTH + 1);
    long code = 0;
    gs_client_call(e->adm, "PATCH", "/api/v1/namespaces/default/pods/at-limit", "application/merge-patch+json", patch,
                   NULL, &st, &code);
    assert_int_equal(code, 422);
    json_decref(st);
    json_decref(patch);
    /* A YAML body: checked on the parsed tree. */
    char yaml[2048], head[4096], rest[4096];
    int n = snprintf(yaml, sizeof yaml, "apiVersion: v1\nkind: Pod\nmetadata: {name: yaml}\nspec:\n  containers: "
                                        "[{name: c, image: b}]\n  x: ");
    for (int i = 0; i < GS_JSON_MAX_DEPTH; i++) yaml[n++] = '[';
    for (int i = 0; i < GS_JSON_MAX_DEPTH; i++) yaml[n++] = ']';
    yaml[n] = 0;
    int fd = open_req(e, "POST", "/api/v1/namespaces/default/pods", "application/yaml", yaml, head, sizeof head);
    read_for(fd, 0.5, rest, sizeof rest);
    close(fd);
    const char *why = "limited to 64 levels of nesting"; /* the body may come with the headers */
    if (!strstr(head, " 422 ") || (!strstr(head, why) && !strstr(rest, why))) fail_msg("%s%s", head, rest);
    /* Everything stored reads back in a list. */
    json_t *out = NULL;
    assert_int_equal(gs_client_list(e->adm, R("pods"), "default", NULL, NULL, false, &out), 0);
    assert_int_equal(json_array_size(json_object_get(out, "items")), 1);
    json_decref(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(dropped_watches_free_threads_and_fds, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(timeout_ends_watch_with_bookmark, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(idle_watch_gets_keepalives, setup_fast_keepalive, api_env_teardown),
        cmocka_unit_test_setup_teardown(bodies_too_deep_to_read_back_are_refused, setup, api_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
