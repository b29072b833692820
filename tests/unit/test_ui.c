/*
 * test_ui.c - the web console's server side: the files at /ui (embedded
 * byte for byte from web/, with their Content-Type, ETag revalidation, the
 * strict Content-Security-Policy, no token needed, GET/HEAD only, nothing
 * outside the embedded set), the SelfSubjectReview the login calls (each
 * role), and the queue history: sampled from ClusterQueue status and from
 * the pods of LocalQueues, bounded, and narrowed for a tenant to its
 * namespaces (node and scheduler refused).
 *
 * Requests go over a raw socket so headers and status lines are seen as sent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "control/api_ui.h"
#include "control/ui.h"
#include "core/codec.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WEB GS_TEST_DATA "/../../web"

static const char tokens[] = "adm,admin,,,admin\n"
                             "ten,alice,dev,team-a,tenant\n"
                             "nod,system:node:n1,,,node\n"
                             "sch,system:gpusched-scheduler,,,scheduler\n";

static int port;

struct resp {
    int code;
    char head[4096];
    char *body; /* malloc'd */
    size_t len;
};

/* One request; extra: more header lines ("K: V\r\n"). */
static void http(const char *token, const char *method, const char *path, const char *extra, const char *body,
                 struct resp *out)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char req[8192], auth[128] = "";
    if (token) snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
    size_t bl = body ? strlen(body) : 0;
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: t\r\n%s%s%sContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s",
                     method, path, auth, extra ? extra : "",
                     extra && strstr(extra, "Content-Type") ? "" : "Content-Type: application/json\r\n", bl,
                     body ? body : "");
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t cap = 1 << 16, got = 0;
    char *buf = malloc(cap);
    for (ssize_t k; (k = read(fd, buf + got, cap - got - 1)) > 0;) {
        got += (size_t)k;
        if (got + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    buf[got] = 0;
    close(fd);
    memset(out, 0, sizeof *out);
    sscanf(buf, "HTTP/1.%*d %d", &out->code);
    char *b = strstr(buf, "\r\n\r\n");
    assert_non_null(b);
    snprintf(out->head, sizeof out->head, "%.*s", (int)(b - buf), buf);
    out->len = got - (size_t)(b + 4 - buf);
    out->body = malloc(out->len + 1);
    memcpy(out->body, b + 4, out->len + 1);
    free(buf);
}

/* The value of header name in r (case-insensitive), or "" when absent. */
static const char *header(const struct resp *r, const char *name, char *buf, size_t len)
{
    buf[0] = 0;
    size_t nl = strlen(name);
    for (const char *p = strstr(r->head, "\r\n"); p; p = strstr(p + 2, "\r\n"))
        if (!strncasecmp(p + 2, name, nl) && p[2 + nl] == ':') {
            const char *v = p + 3 + nl;
            while (*v == ' ') v++;
            snprintf(buf, len, "%.*s", (int)strcspn(v, "\r"), v);
            break;
        }
    return buf;
}

static void resp_free(struct resp *r) { free(r->body); }

/*--- Files ---*/

static void files_are_web_byte_for_byte(void **state)
{
    (void)state;
    assert_true(gs_ui_nassets >= 5);
    const char *want[] = {"index.html", "app.js",   "api.js",    "style.css", "nodes.js",
                          "pods.js",    "queues.js", "reports.js", "util.js"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct gs_ui_asset *a = NULL;
        char url[64];
        snprintf(url, sizeof url, "/ui/%s", want[i]);
        assert_int_equal(gs_ui_find(url, &a), GS_UI_ASSET);
        char path[512], *text = NULL;
        size_t len = 0;
        snprintf(path, sizeof path, "%s/%s", WEB, want[i]);
        assert_int_equal(gs_read_file(path, &text, &len), 0);
        assert_int_equal(a->len, len);
        assert_memory_equal(a->data, text, len);
        assert_int_equal(strlen(a->etag), 18); /* quoted 16 hex digits */
        free(text);
    }
    const struct gs_ui_asset *a;
    assert_int_equal(gs_ui_find("/ui", &a), GS_UI_REDIRECT);
    assert_int_equal(gs_ui_find("/ui/", &a), GS_UI_ASSET);
    assert_string_equal(a->name, "index.html");
    assert_int_equal(gs_ui_find("/ui/../docs/CONSOLE.md", &a), GS_UI_NOT_FOUND);
    assert_null(a);
    assert_int_equal(gs_ui_find("/ui/embed.cmake", &a), GS_UI_NOT_FOUND); /* the build script is not served */
    assert_int_equal(gs_ui_find("/uix", &a), GS_UI_NOT_FOUND);
    assert_int_equal(gs_ui_find("/ui/app.js/", &a), GS_UI_NOT_FOUND);
    assert_false(gs_ui_is_path("/api/v1/pods"));
    assert_true(gs_ui_etag_matches("W/\"a\", \"b\"", "\"b\""));
    assert_true(gs_ui_etag_matches("*", "\"b\""));
    assert_false(gs_ui_etag_matches("\"bb\"", "\"b\""));
    assert_false(gs_ui_etag_matches(NULL, "\"b\""));
}

static void served_without_token_with_policy(void **state)
{
    struct api_env *e = *state;
    port = gs_server_port(e->srv);
    char v[1024];
    struct resp r;
    http(NULL, "GET", "/ui", NULL, NULL, &r);
    assert_int_equal(r.code, 308);
    assert_string_equal(header(&r, "Location", v, sizeof v), "/ui/");
    resp_free(&r);

    http(NULL, "GET", "/ui/", NULL, NULL, &r);
    assert_int_equal(r.code, 200);
    assert_string_equal(header(&r, "Content-Type", v, sizeof v), "text/html; charset=utf-8");
    assert_string_equal(header(&r, "Content-Security-Policy", v, sizeof v), GS_UI_CSP);
    assert_null(strstr(v, "unsafe-inline"));
    assert_null(strstr(v, "http"));
    assert_string_equal(header(&r, "X-Content-Type-Options", v, sizeof v), "nosniff");
    assert_string_equal(header(&r, "Cache-Control", v, sizeof v), "no-cache");
    /* The page's contract: the login form and the navigation exist, and no inline script. */
    assert_non_null(strstr(r.body, "<script type=\"module\" src=\"app.js\"></script>"));
    assert_null(strstr(r.body, "<script>"));
    assert_non_null(strstr(r.body, "href=\"#/nodes\""));
    assert_non_null(strstr(r.body, "id=\"live\""));
    resp_free(&r);

    http(NULL, "GET", "/ui/app.js", NULL, NULL, &r);
    assert_int_equal(r.code, 200);
    assert_string_equal(header(&r, "Content-Type", v, sizeof v), "text/javascript; charset=utf-8");
    char etag[64], inm[128];
    header(&r, "ETag", etag, sizeof etag);
    assert_int_equal(strlen(etag), 18);
    resp_free(&r);
    snprintf(inm, sizeof inm, "If-None-Match: %s\r\n", etag);
    http(NULL, "GET", "/ui/app.js", inm, NULL, &r);
    assert_int_equal(r.code, 304);
    assert_int_equal(r.len, 0);
    resp_free(&r);
    http(NULL, "GET", "/ui/app.js", "If-None-Match: \"0000000000000000\"\r\n", NULL, &r);
    assert_int_equal(r.code, 200);
    resp_free(&r);

    http(NULL, "GET", "/ui/nothing.js", NULL, NULL, &r);
    assert_int_equal(r.code, 404);
    resp_free(&r);
    http(NULL, "GET", "/ui/%2e%2e/CMakeLists.txt", NULL, NULL, &r);
    assert_int_equal(r.code, 404);
    resp_free(&r);
    http("adm", "POST", "/ui/", NULL, "{}", &r);
    assert_int_equal(r.code, 405);
    assert_string_equal(header(&r, "Allow", v, sizeof v), "GET, HEAD");
    resp_free(&r);
    http(NULL, "HEAD", "/ui/style.css", NULL, NULL, &r);
    assert_int_equal(r.code, 200);
    assert_int_equal(r.len, 0);
    resp_free(&r);
    /* The data is not public: the same server refuses the API without a token. */
    http(NULL, "GET", "/api/v1/pods", NULL, NULL, &r);
    assert_int_equal(r.code, 401);
    resp_free(&r);
}

/*--- SelfSubjectReview ---*/

static json_t *json_of(const struct resp *r)
{
    json_error_t err;
    json_t *doc = json_loads(r->body, 0, &err);
    if (!doc) fail_msg("not JSON: %s", r->body);
    return doc;
}

static void whoami_each_role(void **state)
{
    struct api_env *e = *state;
    port = gs_server_port(e->srv);
    const char *toks[] = {"adm", "ten", "nod", "sch"};
    const char *users[] = {"admin", "alice", "system:node:n1", "system:gpusched-scheduler"};
    const char *roles[] = {"admin", "tenant", "node", "scheduler"};
    const char *path = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    for (int i = 0; i < 4; i++) {
        struct resp r;
        http(toks[i], "POST", path, NULL, "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"SelfSubjectReview\"}",
             &r);
        assert_int_equal(r.code, 201);
        json_t *doc = json_of(&r), *u = json_object_get(json_object_get(doc, "status"), "userInfo");
        assert_string_equal(json_string_value(json_object_get(u, "username")), users[i]);
        json_t *extra = json_object_get(u, "extra");
        assert_string_equal(json_string_value(json_array_get(json_object_get(extra, "gpusched.io/role"), 0)), roles[i]);
        json_t *nss = json_object_get(extra, "gpusched.io/namespaces");
        if (i == 1) {
            assert_int_equal(json_array_size(nss), 1);
            assert_string_equal(json_string_value(json_array_get(nss, 0)), "team-a");
            assert_string_equal(json_string_value(json_array_get(json_object_get(u, "groups"), 0)), "dev");
        } else {
            assert_null(nss);
        }
        json_decref(doc);
        resp_free(&r);
    }
    struct resp r;
    http(NULL, "POST", path, NULL, "{}", &r);
    assert_int_equal(r.code, 401);
    resp_free(&r);
    http("bad-token", "POST", path, NULL, "{}", &r);
    assert_int_equal(r.code, 401);
    resp_free(&r);
    http("ten", "POST", path, NULL, "not json", &r);
    assert_int_equal(r.code, 400);
    assert_non_null(strstr(r.body, "SelfSubjectReview body must be a JSON object"));
    assert_non_null(strstr(r.body, "not json"));
    resp_free(&r);
    /* kubectl auth whoami sends protobuf: the review takes no input, so the body is not decoded. */
    http("ten", "POST", path, "Content-Type: application/vnd.kubernetes.protobuf\r\n", "k8s\001\002", &r);
    assert_int_equal(r.code, 201);
    assert_non_null(strstr(r.body, "\"username\":\"alice\""));
    resp_free(&r);
    http("ten", "GET", path, NULL, NULL, &r);
    assert_int_equal(r.code, 403); /* only create is served */
    resp_free(&r);
}

/*--- Queue history ---*/

static void post(const char *path, const char *body)
{
    struct resp r;
    http("adm", "POST", path, NULL, body, &r);
    if (r.code != 201) fail_msg("POST %s: %d %s", path, r.code, r.body);
    resp_free(&r);
}

static const char *const lq_pod = "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"kueue.x-k8s.io/queue-name\":\"%s\"}},"
                                  "\"spec\":{%s\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"resources\":"
                                  "{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}";

static void seed_queues(void)
{
    post("/api/v1/namespaces", "{\"metadata\":{\"name\":\"team-a\"}}");
    post("/api/v1/namespaces", "{\"metadata\":{\"name\":\"team-b\"}}");
    post("/apis/kueue.x-k8s.io/v1beta1/clusterqueues",
         "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"ClusterQueue\",\"metadata\":{\"name\":\"cq\"},"
         "\"spec\":{\"cohort\":\"all\",\"resourceGroups\":[{\"coveredResources\":[\"nvidia.com/gpu\"],\"flavors\":[{"
         "\"name\":\"default\",\"resources\":[{\"name\":\"nvidia.com/gpu\",\"nominalQuota\":\"4\"}]}]}]}}");
    struct resp r;
    http("adm", "PATCH", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/cq/status",
         "Content-Type: application/merge-patch+json\r\n",
         "{\"status\":{\"pendingWorkloads\":1,\"admittedWorkloads\":1,\"admission\":{\"usage\":{\"nvidia.com/gpu\":"
         "\"2\"},\"nominal\":{\"nvidia.com/gpu\":\"4\"},\"lent\":{\"nvidia.com/gpu\":\"500m\"},\"fairShare\":"
         "{\"nvidia.com/gpu\":\"3\"},\"weightedShare\":0.5}}}",
         &r);
    if (r.code != 200) fail_msg("status patch: %d %s", r.code, r.body);
    resp_free(&r);
    for (int k = 0; k < 2; k++) {
        char path[128], body[512];
        const char *ns = k ? "team-b" : "team-a";
        snprintf(path, sizeof path, "/apis/kueue.x-k8s.io/v1beta1/namespaces/%s/localqueues", ns);
        post(path, "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"LocalQueue\",\"metadata\":{\"name\":\"lq\"},"
                   "\"spec\":{\"clusterQueue\":\"cq\"}}");
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", ns);
        snprintf(body, sizeof body, lq_pod, "run", "lq", "\"nodeName\":\"n1\",");
        post(path, body);
        snprintf(body, sizeof body, lq_pod, "wait", "lq", "");
        post(path, body);
    }
}

/* The items of a history answer, by "<kind>/<ns>/<name>". */
static json_t *items_by_key(const struct resp *r)
{
    json_t *doc = json_of(r), *out = json_object();
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(doc, "items"), i, it) {
        json_t *md = json_object_get(it, "metadata");
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        char key[256];
        snprintf(key, sizeof key, "%s/%s/%s", json_string_value(json_object_get(it, "queueKind")), ns ? ns : "",
                 json_string_value(json_object_get(md, "name")));
        json_object_set(out, key, it);
    }
    json_decref(doc);
    return out;
}

static json_t *last_sample(json_t *items, const char *key)
{
    json_t *s = json_object_get(json_object_get(items, key), "samples");
    if (!json_array_size(s)) fail_msg("no samples for %s", key);
    return json_array_get(s, json_array_size(s) - 1);
}

static void history_narrowed_for_tenants(void **state)
{
    struct api_env *e = *state;
    port = gs_server_port(e->srv);
    seed_queues();
    const char *all = "/apis/ui.gpusched.io/v1/queuehistories";
    json_t *items = NULL;
    struct resp r;
    /* Samples every 50 ms (setup): wait for one taken after the seeding. */
    for (int i = 0; i < 200; i++) {
        http("adm", "GET", all, NULL, NULL, &r);
        assert_int_equal(r.code, 200);
        json_decref(items);
        items = items_by_key(&r);
        resp_free(&r);
        json_t *s = json_object_get(json_object_get(items, "LocalQueue/team-b/lq"), "samples");
        json_t *cq = json_object_get(json_object_get(items, "ClusterQueue//cq"), "samples");
        if (json_array_size(s) && json_array_size(cq) &&
            json_integer_value(json_object_get(json_array_get(s, json_array_size(s) - 1), "pending")) == 1 &&
            json_number_value(json_object_get(json_array_get(cq, json_array_size(cq) - 1), "used")) == 2)
            break;
        usleep(20000);
    }
    assert_int_equal(json_object_size(items), 3);
    json_t *cs = last_sample(items, "ClusterQueue//cq");
    assert_true(json_number_value(json_object_get(cs, "used")) == 2);
    assert_true(json_number_value(json_object_get(cs, "nominal")) == 4);
    assert_true(json_number_value(json_object_get(cs, "lent")) == 0.5);
    assert_true(json_number_value(json_object_get(cs, "fairShare")) == 3);
    assert_int_equal(json_integer_value(json_object_get(cs, "pending")), 1);
    assert_string_equal(json_string_value(json_object_get(json_object_get(items, "ClusterQueue//cq"), "cohort")), "all");
    json_t *ls = last_sample(items, "LocalQueue/team-a/lq");
    assert_int_equal(json_integer_value(json_object_get(ls, "admitted")), 1);
    assert_int_equal(json_integer_value(json_object_get(ls, "pending")), 1);
    assert_true(json_number_value(json_object_get(ls, "used")) == 2);
    assert_string_equal(json_string_value(json_object_get(json_object_get(items, "LocalQueue/team-a/lq"),
                                                          "clusterQueue")), "cq");
    json_decref(items);

    /* The tenant: its namespace's LocalQueue and the cluster-scoped queue, never team-b's. */
    http("ten", "GET", all, NULL, NULL, &r);
    assert_int_equal(r.code, 200);
    items = items_by_key(&r);
    resp_free(&r);
    assert_int_equal(json_object_size(items), 2);
    assert_non_null(json_object_get(items, "LocalQueue/team-a/lq"));
    assert_non_null(json_object_get(items, "ClusterQueue//cq"));
    assert_null(json_object_get(items, "LocalQueue/team-b/lq"));
    json_decref(items);
    http("ten", "GET", "/apis/ui.gpusched.io/v1/namespaces/team-a/queuehistories", NULL, NULL, &r);
    assert_int_equal(r.code, 200);
    items = items_by_key(&r);
    resp_free(&r);
    assert_int_equal(json_object_size(items), 1);
    assert_non_null(json_object_get(items, "LocalQueue/team-a/lq"));
    json_decref(items);
    http("ten", "GET", "/apis/ui.gpusched.io/v1/namespaces/team-a/queuehistories/lq", NULL, NULL, &r);
    assert_int_equal(r.code, 200);
    assert_non_null(strstr(r.body, "\"kind\":\"QueueHistory\""));
    resp_free(&r);
    http("ten", "GET", "/apis/ui.gpusched.io/v1/namespaces/team-b/queuehistories", NULL, NULL, &r);
    assert_int_equal(r.code, 403);
    resp_free(&r);
    http("ten", "GET", "/apis/ui.gpusched.io/v1/namespaces/team-b/queuehistories/lq", NULL, NULL, &r);
    assert_int_equal(r.code, 403);
    resp_free(&r);
    http("ten", "GET", "/apis/ui.gpusched.io/v1/namespaces/team-a/queuehistories/nope", NULL, NULL, &r);
    assert_int_equal(r.code, 404);
    assert_non_null(strstr(r.body, "no LocalQueue of that name in namespace \\\"team-a\\\""));
    resp_free(&r);
    /* kubectl get: a Table with a row per queue the tenant may see. */
    http("ten", "GET", all, "Accept: application/json;as=Table;v=v1;g=meta.k8s.io\r\n", NULL, &r);
    assert_int_equal(r.code, 200);
    json_t *table = json_of(&r);
    resp_free(&r);
    assert_string_equal(json_string_value(json_object_get(table, "kind")), "Table");
    assert_int_equal(json_array_size(json_object_get(table, "rows")), 2);
    json_decref(table);
    /* Node and scheduler: refused; writes: refused for everyone. */
    http("nod", "GET", all, NULL, NULL, &r);
    assert_int_equal(r.code, 403);
    resp_free(&r);
    http("sch", "GET", all, NULL, NULL, &r);
    assert_int_equal(r.code, 403);
    resp_free(&r);
    http("adm", "POST", all, NULL, "{}", &r);
    assert_int_equal(r.code, 403);
    resp_free(&r);
    http(NULL, "GET", all, NULL, NULL, &r);
    assert_int_equal(r.code, 401);
    resp_free(&r);
}

static void history_ring_is_bounded(void **state)
{
    struct api_env *e = *state;
    port = gs_server_port(e->srv);
    seed_queues();
    struct gs_ui_history *h = NULL;
    /* A long interval: only the samples taken here (and the thread's first) count. */
    assert_int_equal(gs_ui_history_new(gs_server_store(e->srv), 3600 * 1000, 3, &h), 0);
    double t = (double)time(NULL);
    for (int i = 1; i <= 6; i++) assert_int_equal(gs_ui_history_sample(h, t + i), 0);
    json_t *doc = gs_ui_history_list(h, NULL, NULL);
    size_t i;
    json_t *it;
    assert_int_equal(json_array_size(json_object_get(doc, "items")), 3);
    json_array_foreach(json_object_get(doc, "items"), i, it) {
        json_t *s = json_object_get(it, "samples");
        assert_int_equal(json_array_size(s), 3);
        assert_true(json_number_value(json_object_get(json_array_get(s, 2), "t")) == t + 6);
    }
    assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "metadata"), "capacity")), 3);
    json_decref(doc);
    gs_ui_history_free(h);
    assert_int_equal(gs_ui_history_new(NULL, 5, 3, &h), GS_EINVAL); /* below 10 ms */
    assert_int_equal(gs_ui_history_new(NULL, 1000, 1, &h), GS_EINVAL);
}

static void history_interval_errors(void **state)
{
    (void)state;
    char why[200] = "";
    int64_t ms;
    const char *bad[] = {"0", "abc", "5000", "1s", "nan"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("GPUSCHED_UI_HISTORY_INTERVAL", bad[i], 1);
        assert_int_equal(gs_ui_history_interval_env(&ms, why, sizeof why), GS_EINVAL);
        char want[200];
        snprintf(want, sizeof want, "GPUSCHED_UI_HISTORY_INTERVAL \"%s\": must be seconds between 0.01 and 3600", bad[i]);
        assert_string_equal(why, want);
    }
    setenv("GPUSCHED_UI_HISTORY_INTERVAL", "2.5", 1);
    assert_int_equal(gs_ui_history_interval_env(&ms, why, sizeof why), 0);
    assert_int_equal(ms, 2500);
    unsetenv("GPUSCHED_UI_HISTORY_INTERVAL");
    assert_int_equal(gs_ui_history_interval_env(&ms, why, sizeof why), 0);
    assert_int_equal(ms, GS_UI_HISTORY_INTERVAL_DEFAULT_MS);
}

/*--- The GPU grid ---*/

static const char *const grid_pod = "{\"metadata\":{\"name\":\"%s\"%s},\"spec\":{%s\"containers\":[{\"name\":\"c\","
                                    "\"image\":\"i\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"%s\"}}}]}%s}";

static void grid_pod_post(const char *ns, const char *name, const char *md, const char *spec, const char *gpus,
                          const char *status)
{
    char path[128], body[1024];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", ns);
    snprintf(body, sizeof body, grid_pod, name, md, spec, gpus, status);
    post(path, body);
}

static json_t *grid_get(const char *token, int want)
{
    struct resp r;
    http(token, "GET", "/apis/ui.gpusched.io/v1/gpugrid", NULL, NULL, &r);
    if (r.code != want) fail_msg("gpugrid with token %s: %d %s, want %d", token ? token : "(none)", r.code, r.body, want);
    json_t *doc = want == 200 ? json_of(&r) : NULL;
    if (want == 403) assert_non_null(strstr(r.body, "the console's GPU grid is read by admins and tenants only"));
    resp_free(&r);
    return doc;
}

static const char *holders_of(json_t *doc, size_t gpu, char *buf, size_t len)
{
    json_t *g = json_array_get(json_object_get(json_array_get(json_object_get(doc, "nodes"), 0), "gpus"), gpu);
    buf[0] = 0;
    size_t i;
    json_t *h;
    json_array_foreach(json_object_get(g, "holders"), i, h)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? "," : "", json_string_value(h));
    return buf;
}

static void gpugrid_per_role(void **state)
{
    struct api_env *e = *state;
    port = gs_server_port(e->srv);
    post("/api/v1/namespaces", "{\"metadata\":{\"name\":\"team-a\"}}");
    post("/api/v1/namespaces", "{\"metadata\":{\"name\":\"team-b\"}}");
    post("/api/v1/nodes", "{\"metadata\":{\"name\":\"n1\",\"annotations\":{\"gpusched.io/gpu-stack-state\":\"ready\"}},"
                          "\"spec\":{\"unschedulable\":true,\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]}}");
    struct resp r;
    http("adm", "PATCH", "/api/v1/nodes/n1/status", "Content-Type: application/merge-patch+json\r\n",
         "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],\"devices\":["
         "{\"index\":0,\"uuid\":\"GPU-0\",\"model\":\"H100\",\"health\":\"Healthy\",\"numaNode\":0,\"nvlinkPeers\":[1]},"
         "{\"index\":1,\"uuid\":\"GPU-1\",\"model\":\"H100\",\"health\":\"Unhealthy\",\"numaNode\":0,\"nvlinkPeers\":[0]},"
         "{\"index\":2,\"uuid\":\"GPU-2\",\"model\":\"H100\",\"health\":\"Healthy\",\"numaNode\":1}]}}",
         &r);
    if (r.code != 200) fail_msg("node status: %d %s", r.code, r.body);
    resp_free(&r);
    /* GPU 0 shared by two pods of two namespaces (created out of name order), GPU 2 by the devices annotation */
    grid_pod_post("team-b", "zeta", "", "\"nodeName\":\"n1\",", "1",
                  ",\"status\":{\"phase\":\"Running\",\"devices\":[{\"index\":0,\"milli\":500}]}");
    grid_pod_post("team-a", "alpha", "", "\"nodeName\":\"n1\",", "1",
                  ",\"status\":{\"phase\":\"Running\",\"devices\":[{\"index\":0,\"milli\":250}]}");
    grid_pod_post("team-a", "ann", ",\"annotations\":{\"gpusched.io/devices\":\"GPU-2\"},\"labels\":"
                  "{\"scheduling.x-k8s.io/pod-group\":\"g1\"}", "\"nodeName\":\"n1\",", "1", "");
    grid_pod_post("team-a", "done", "", "\"nodeName\":\"n1\",", "1",
                  ",\"status\":{\"phase\":\"Succeeded\",\"devices\":[{\"index\":1}]}");
    grid_pod_post("team-a", "wait", ",\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"g1\",\"kueue.x-k8s.io/queue-name\":"
                  "\"lq\"}", "", "2", "");
    grid_pod_post("team-b", "wait-b", "", "", "4", "");

    json_t *doc = grid_get("adm", 200);
    char buf[256];
    json_t *n = json_array_get(json_object_get(doc, "nodes"), 0);
    assert_int_equal(json_array_size(json_object_get(doc, "nodes")), 1);
    assert_string_equal(json_string_value(json_object_get(n, "name")), "n1");
    assert_true(json_is_true(json_object_get(n, "ready")));
    assert_true(json_is_true(json_object_get(n, "unschedulable")));
    assert_string_equal(json_string_value(json_object_get(n, "stack")), "ready");
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(n, "taints"), 0), "key")), "k");
    json_t *g1 = json_array_get(json_object_get(n, "gpus"), 1);
    assert_string_equal(json_string_value(json_object_get(g1, "health")), "Unhealthy");
    assert_null(json_object_get(g1, "uuid")); /* holders come resolved */
    assert_string_equal(json_string_value(json_object_get(n, "model")), "H100"); /* once per node when shared */
    assert_null(json_object_get(g1, "model"));
    assert_int_equal(json_integer_value(json_array_get(json_object_get(g1, "nvlinkPeers"), 0)), 0);
    assert_string_equal(holders_of(doc, 0, buf, sizeof buf), "team-a/alpha,team-b/zeta"); /* name order */
    json_t *m = json_object_get(json_array_get(json_object_get(n, "gpus"), 0), "milli");
    assert_int_equal(json_integer_value(json_array_get(m, 0)), 250); /* each share stays with its pod */
    assert_int_equal(json_integer_value(json_array_get(m, 1)), 500);
    assert_string_equal(holders_of(doc, 1, buf, sizeof buf), ""); /* a finished pod holds nothing */
    assert_string_equal(holders_of(doc, 2, buf, sizeof buf), "team-a/ann");
    assert_null(json_object_get(json_array_get(json_object_get(n, "gpus"), 2), "milli"));
    json_t *pend = json_object_get(doc, "pending");
    assert_int_equal(json_array_size(pend), 2);
    json_t *w = json_array_get(pend, 0);
    assert_string_equal(json_string_value(json_object_get(w, "namespace")), "team-a");
    assert_string_equal(json_string_value(json_object_get(w, "name")), "wait");
    assert_true(json_number_value(json_object_get(w, "gpus")) == 2);
    assert_string_equal(json_string_value(json_object_get(w, "podGroup")), "g1");
    assert_string_equal(json_string_value(json_object_get(w, "queue")), "lq");
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "grouped"), "team-a/ann")), "g1");
    /* One resourceVersion, that of the latest write before the read: a Pod watch from it starts after every pod above. */
    const char *rv = json_string_value(json_object_get(json_object_get(doc, "metadata"), "resourceVersion"));
    assert_non_null(rv);
    http("adm", "GET", "/api/v1/pods", NULL, NULL, &r);
    json_t *pods = json_of(&r);
    resp_free(&r);
    assert_string_equal(rv, json_string_value(json_object_get(json_object_get(pods, "metadata"), "resourceVersion")));
    json_decref(pods);
    json_decref(doc);

    /* The tenant: every node, but only its namespace's holders and pending pods. */
    doc = grid_get("ten", 200);
    assert_string_equal(holders_of(doc, 0, buf, sizeof buf), "team-a/alpha");
    assert_string_equal(holders_of(doc, 2, buf, sizeof buf), "team-a/ann");
    pend = json_object_get(doc, "pending");
    assert_int_equal(json_array_size(pend), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(pend, 0), "name")), "wait");
    char *text = json_dumps(doc, JSON_COMPACT);
    assert_null(strstr(text, "team-b"));
    free(text);
    json_decref(doc);
    grid_get("nod", 403);
    grid_get("sch", 403);
    grid_get(NULL, 401);
    http("adm", "POST", "/apis/ui.gpusched.io/v1/gpugrid", NULL, "{}", &r);
    assert_int_equal(r.code, 405);
    assert_non_null(strstr(r.body, "gpugrid is read-only: POST is not served"));
    resp_free(&r);
}

/*--- Simulator reports ---*/

static char repdir[64];

static void put(const char *rel, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", repdir, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void reports_listed_and_served(void **state)
{
    struct api_env *e = *state;
    port = gs_server_port(e->srv);
    char v[512];
    struct resp r;
    http("adm", "GET", "/ui/reports/", NULL, NULL, &r);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.body, "{\"runs\":[\"run-1\",\"run_2.b\"]}"); /* sorted; no .hidden, no run without a report */
    resp_free(&r);
    http("adm", "GET", "/ui/reports/run-1/report.html", NULL, NULL, &r);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.body, "<html><style>b{}</style>hello</html>");
    assert_string_equal(header(&r, "Content-Type", v, sizeof v), "text/html; charset=utf-8");
    header(&r, "Content-Security-Policy", v, sizeof v);
    assert_non_null(strstr(v, "default-src 'none'"));
    assert_null(strstr(v, "script-src")); /* no script at all in a report */
    resp_free(&r);
    http("adm", "GET", "/ui/reports/run-1/series.csv", NULL, NULL, &r);
    assert_int_equal(r.code, 200);
    assert_string_equal(header(&r, "Content-Type", v, sizeof v), "text/csv; charset=utf-8");
    assert_string_equal(r.body, "t,x\n0,1\n");
    resp_free(&r);
    const char *refused[] = {"/ui/reports/run-1/secret.txt", "/ui/reports/../tokens.csv", "/ui/reports/.hidden/report.html",
                             "/ui/reports/run-1/../run-1/report.html", "/ui/reports/run-1"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        http("adm", "GET", refused[i], NULL, NULL, &r);
        if (r.code != 404) fail_msg("%s: %d %s", refused[i], r.code, r.body);
        assert_non_null(strstr(r.body, "no such report: want /ui/reports/RUN/report.html"));
        resp_free(&r);
    }
    http("adm", "GET", "/ui/reports/run_2.b/events.jsonl", NULL, NULL, &r);
    assert_int_equal(r.code, 404);
    assert_string_equal(r.body, "run \"run_2.b\" has no such file\n");
    resp_free(&r);
    char run[256];
    const char *file;
    assert_true(gs_ui_report_path("/ui/reports", run, &file));
    assert_string_equal(file, "");
    assert_true(gs_ui_report_path("/ui/reports/a.b/events.jsonl", run, &file));
    assert_string_equal(run, "a.b");
    assert_string_equal(file, "events.jsonl");
    assert_false(gs_ui_report_path("/ui/reportsx", run, &file));
}

/* The reports row of the authorization table: admin and tenant read, node
 * and scheduler do not, nobody without a token (a frame cannot send one: the
 * page fetches with its token, reports.js). */
static void reports_authorized_per_role(void **state)
{
    struct api_env *e = *state;
    port = gs_server_port(e->srv);
    const char *paths[] = {"/ui/reports/", "/ui/reports/run-1/report.html", "/ui/reports/run-1/series.csv",
                           "/ui/reports/nope/report.html"};
    const char *toks[] = {NULL, "not-a-token", "adm", "ten", "nod", "sch"};
    /* per token: the code for an existing file (the last path: 404 where it is read) */
    const int want[] = {401, 401, 200, 200, 403, 403};
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++)
        for (size_t t = 0; t < sizeof toks / sizeof toks[0]; t++) {
            struct resp r;
            http(toks[t], "GET", paths[p], NULL, NULL, &r);
            int code = want[t] == 200 && p == 3 ? 404 : want[t];
            if (r.code != code) fail_msg("%s with token %s: got %d %s, want %d", paths[p], toks[t] ? toks[t] : "(none)",
                                         r.code, r.body, code);
            if (code == 401) assert_non_null(strstr(r.body, "simulator reports need the API's Bearer token"));
            if (code == 403) {
                assert_non_null(strstr(r.body, "cannot "));
                assert_non_null(strstr(r.body, "simulator reports are read by admins and tenants only"));
                assert_null(strstr(r.body, "hello")); /* nothing of the report */
            }
            if (code == 200 && p == 1) assert_string_equal(r.body, "<html><style>b{}</style>hello</html>");
            resp_free(&r);
        }
    /* The console's own files still need no token; the page's policy lets it frame a blob: report. */
    struct resp r;
    char v[512];
    http(NULL, "GET", "/ui/", NULL, NULL, &r);
    assert_int_equal(r.code, 200);
    header(&r, "Content-Security-Policy", v, sizeof v);
    assert_non_null(strstr(v, "frame-src 'self' blob:"));
    resp_free(&r);
}

static void reports_not_configured(void **state)
{
    struct api_env *e = *state;
    port = gs_server_port(e->srv);
    struct resp r;
    http("adm", "GET", "/ui/reports/", NULL, NULL, &r);
    assert_int_equal(r.code, 404);
    assert_string_equal(r.body, "no simulator reports here: start the server with --ui-reports DIR\n");
    resp_free(&r);
}

static int setup_reports(void **state)
{
    snprintf(repdir, sizeof repdir, "/tmp/gs-ui-reports-XXXXXX");
    assert_non_null(mkdtemp(repdir));
    const char *dirs[] = {"run-1", "run_2.b", ".hidden", "empty"};
    for (size_t i = 0; i < 4; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", repdir, dirs[i]);
        assert_int_equal(mkdir(path, 0700), 0);
    }
    put("run-1/report.html", "<html><style>b{}</style>hello</html>");
    put("run-1/series.csv", "t,x\n0,1\n");
    put("run-1/secret.txt", "no");
    put("run_2.b/report.html", "<html>two</html>");
    put(".hidden/report.html", "<html>hidden</html>");
    put("tokens.csv", "adm,admin,,,admin\n");
    return api_env_start(state, "/tmp/gs-ui-XXXXXX", tokens, true,
                         (struct gs_server_opts){.no_scheduler = true, .ui_reports = repdir});
}

static int teardown_reports(void **state)
{
    api_env_teardown(state);
    fx_rm_tree(repdir);
    return 0;
}

static int setup(void **state)
{
    setenv("GPUSCHED_UI_HISTORY_INTERVAL", "0.05", 1);
    int rc = api_env_start(state, "/tmp/gs-ui-XXXXXX", tokens, true, (struct gs_server_opts){.no_scheduler = true});
    unsetenv("GPUSCHED_UI_HISTORY_INTERVAL");
    return rc;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(files_are_web_byte_for_byte),
        cmocka_unit_test_setup_teardown(served_without_token_with_policy, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(whoami_each_role, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(history_narrowed_for_tenants, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(history_ring_is_bounded, setup, api_env_teardown),
        cmocka_unit_test(history_interval_errors),
        cmocka_unit_test_setup_teardown(gpugrid_per_role, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(reports_listed_and_served, setup_reports, teardown_reports),
        cmocka_unit_test_setup_teardown(reports_authorized_per_role, setup_reports, teardown_reports),
        cmocka_unit_test_setup_teardown(reports_not_configured, setup, api_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
