/*
 * test_api_logs.c - pod logs through the API server (src/control/api_logs.c)
 * and the agent's /logs (src/agent/agent_http.c).
 *
 * Pure parts: the query (kube-apiserver names, refusals naming the field),
 * the choice of container and its messages, the agent path. Over HTTP: the
 * server in-process with a small libmicrohttpd peer playing the agent (it
 * records what it was asked and answers per pod), driven with libcurl:
 * proxying, every error as a Status, the tenant rule, follow streaming.
 * Then the real agent endpoint on a hand-built pod table: tail, limits,
 * waiting containers, follow ending when the container stops.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/agent_int.h"
#include "api_fixture.h"
#include "control/apiserver_int.h"

#include <curl/curl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*--- Pure parts ---*/

struct kv {
    const char *k[8], *v[8];
};

static const char *kv_get(void *ctx, const char *key)
{
    struct kv *a = ctx;
    for (int i = 0; i < 8 && a->k[i]; i++)
        if (!strcmp(a->k[i], key)) return a->v[i];
    return NULL;
}

static void query_parse(void **state)
{
    (void)state;
    struct gs__log_query q;
    char why[512];
    struct kv ok = {{"container", "tailLines", "limitBytes", "follow", "timestamps"}, {"c", "0", "10", "true", "1"}};
    assert_int_equal(gs__log_query_parse(kv_get, &ok, &q, why, sizeof why), 0);
    assert_string_equal(q.container, "c");
    assert_int_equal(q.tail_lines, 0);
    assert_int_equal(q.limit_bytes, 10);
    assert_true(q.follow);
    assert_true(q.timestamps);
    struct kv none = {{0}, {0}};
    assert_int_equal(gs__log_query_parse(kv_get, &none, &q, why, sizeof why), 0);
    assert_null(q.container);
    assert_int_equal(q.tail_lines, -1);
    assert_int_equal(q.limit_bytes, -1);
    assert_false(q.follow);
    struct { const char *k, *v, *want; } bad[] = {
        {"tailLines", "-1", "tailLines: invalid value \"-1\""},
        {"tailLines", "3x", "tailLines: invalid value \"3x\""},
        {"limitBytes", "0", "limitBytes: invalid value \"0\": must be an integer greater than 0"},
        {"follow", "yes", "follow: invalid value \"yes\": must be true or false"},
        {"previous", "true", "previous=true is not supported"},
        {"sinceSeconds", "10", "sinceSeconds is not supported"},
        {"sinceTime", "2026-01-01T00:00:00Z", "sinceTime is not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct kv a = {{bad[i].k}, {bad[i].v}};
        why[0] = 0;
        assert_int_equal(gs__log_query_parse(kv_get, &a, &q, why, sizeof why), GS_EINVAL);
        if (!strstr(why, bad[i].want)) fail_msg("%s=%s: got \"%s\"", bad[i].k, bad[i].v, why);
    }
    struct kv prev_false = {{"previous"}, {"false"}};
    assert_int_equal(gs__log_query_parse(kv_get, &prev_false, &q, why, sizeof why), 0);
}

static void container_choice(void **state)
{
    (void)state;
    json_t *two = json_loads("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}}",
                             0, NULL);
    json_t *one = json_loads("{\"metadata\":{\"name\":\"q\"},\"spec\":{\"containers\":[{\"name\":\"main\"}]}}", 0, NULL);
    const char *name;
    char why[512];
    assert_int_equal(gs__log_container(one, NULL, &name, why, sizeof why), 0);
    assert_string_equal(name, "main");
    assert_int_equal(gs__log_container(two, "b", &name, why, sizeof why), 0);
    assert_string_equal(name, "b");
    assert_int_equal(gs__log_container(two, NULL, &name, why, sizeof why), GS_EINVAL);
    assert_string_equal(why, "a container name must be specified for pod p, choose one of: [a b]");
    assert_int_equal(gs__log_container(one, "x", &name, why, sizeof why), GS_EINVAL);
    assert_string_equal(why, "container x is not valid for pod q");
    json_decref(one);
    json_decref(two);
}

static void agent_path(void **state)
{
    (void)state;
    struct gs__log_query q = {.tail_lines = 5, .limit_bytes = -1, .follow = true};
    char buf[256];
    assert_int_equal(gs__log_agent_path("ns", "p", "c d", &q, buf, sizeof buf), 0);
    assert_string_equal(buf, "/logs/ns/p?container=c%20d&tailLines=5&follow=1");
    q = (struct gs__log_query){.tail_lines = -1, .limit_bytes = 7};
    assert_int_equal(gs__log_agent_path("ns", "p", "c", &q, buf, sizeof buf), 0);
    assert_string_equal(buf, "/logs/ns/p?container=c&limitBytes=7");
    assert_int_equal(gs__log_agent_path("ns", "p", "c", &q, buf, 20), GS_EINVAL);
}

/*--- The server with a peer playing the agent ---*/

struct peer {
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu;
    char last[1024]; /* the last URL with its query, as asked */
    char auth[256];  /* its Authorization header */
    atomic_int closed; /* endless streams torn down */
};

struct fstream {
    int sent;
};

static ssize_t follow_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos, (void)max;
    struct fstream *f = cls;
    if (f->sent == 3) return MHD_CONTENT_READER_END_OF_STREAM;
    if (f->sent) usleep(500000);
    int n = snprintf(out, max, "line %d\n", f->sent++);
    return n;
}

/* A line every 100 ms until the reader goes away. */
struct endless {
    struct peer *p;
};

static ssize_t endless_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)cls;
    if (pos) usleep(100000);
    return snprintf(out, max, "x\n");
}

static void endless_free(void *cls)
{
    struct endless *e = cls;
    atomic_fetch_add(&e->p->closed, 1);
    free(e);
}

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    char *b = cls;
    size_t n = strlen(b);
    snprintf(b + n, 1024 - n, "%c%s=%s", strchr(b, '?') ? '&' : '?', key, value ? value : "");
    return MHD_YES;
}

static enum MHD_Result peer_req(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                const char *version, const char *upload, size_t *upload_size, void **st)
{
    (void)method, (void)version, (void)upload, (void)upload_size, (void)st;
    struct peer *p = cls;
    char last[1024];
    snprintf(last, sizeof last, "%s", url);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_arg, last);
    const char *au = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    pthread_mutex_lock(&p->mu);
    snprintf(p->last, sizeof p->last, "%s", last);
    snprintf(p->auth, sizeof p->auth, "%s", au ? au : "");
    pthread_mutex_unlock(&p->mu);
    struct MHD_Response *r;
    unsigned code = 200;
    if (strstr(url, "/endless")) {
        struct endless *en = calloc(1, sizeof *en);
        en->p = p;
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, endless_read, en, endless_free);
    } else if (strstr(url, "/follow")) {
        struct fstream *f = calloc(1, sizeof *f);
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, follow_read, f, free);
    } else if (strstr(url, "/waiting")) {
        code = 400;
        static const char m[] = "container \"main\" in pod \"waiting\" is waiting to start: ContainerCreating\n";
        r = MHD_create_response_from_buffer(strlen(m), (void *)m, MHD_RESPMEM_PERSISTENT);
    } else if (strstr(url, "/gone")) {
        code = 404;
        static const char m[] = "pod ns/gone is not on node n1\n";
        r = MHD_create_response_from_buffer(strlen(m), (void *)m, MHD_RESPMEM_PERSISTENT);
    } else {
        static const char m[] = "a\nb\n";
        r = MHD_create_response_from_buffer(strlen(m), (void *)m, MHD_RESPMEM_PERSISTENT);
    }
    MHD_add_response_header(r, "Content-Type", "text/plain");
    enum MHD_Result ok = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ok;
}

struct env {
    char dir[64];
    struct gs_server *srv;
    struct gs_client *adm;
    struct peer peer;
    char base[64];
};

static const char tokens[] = "adm,admin,,,admin\n"
                             "ten,alice,,team-a,tenant\n"
                             "nod,system:node:n2,,,node\n";

static void create(struct env *e, const char *path, const char *json)
{
    json_t *obj = json_loads(json, 0, NULL), *out = NULL;
    assert_non_null(obj);
    long code = 0;
    int err = gs_client_call(e->adm, "POST", path, "application/json", obj, NULL, &out, &code);
    if (err) fail_msg("POST %s: %ld %s", path, code, gs_client_status_message(out));
    json_decref(obj);
    json_decref(out);
}

static void pod(struct env *e, const char *ns, const char *name, const char *node, const char *ctrs)
{
    char path[128], body[1024];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", ns);
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"},"
             "\"spec\":{%s%s%s\"containers\":[%s]}}",
             name, ns, node ? "\"nodeName\":\"" : "", node ? node : "", node ? "\"," : "", ctrs);
    create(e, path, body);
}

static void node(struct env *e, const char *name, const char *endpoint)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\"%s%s%s}}", name,
             endpoint ? ",\"annotations\":{\"gpusched.io/agent-endpoint\":\"" : "", endpoint ? endpoint : "",
             endpoint ? "\"}" : "");
    create(e, "/api/v1/nodes", body);
}

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    struct gs_server_opts o = {.no_scheduler = true};
    e->srv = fx_server_start(e->dir, sizeof e->dir, "/tmp/gs-logs-XXXXXX", tokens, o);
    snprintf(e->base, sizeof e->base, "http://127.0.0.1:%d", gs_server_port(e->srv));
    e->adm = fx_client(e->srv, "adm");
    pthread_mutex_init(&e->peer.mu, NULL);
    e->peer.d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL,
                                 peer_req, &e->peer, MHD_OPTION_END);
    assert_non_null(e->peer.d);
    e->peer.port = MHD_get_daemon_info(e->peer.d, MHD_DAEMON_INFO_BIND_PORT)->port;
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", e->peer.port);
    node(e, "n1", ep);
    node(e, "n2", "http://127.0.0.1:1"); /* nothing listens there */
    node(e, "n3", NULL);
    create(e, "/api/v1/namespaces", "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"team-a\"}}");
    create(e, "/api/v1/namespaces", "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"ns\"}}");
    const char *one = "{\"name\":\"main\",\"image\":\"x\"}";
    pod(e, "ns", "one", "n1", one);
    pod(e, "ns", "two", "n1", "{\"name\":\"a\",\"image\":\"x\"},{\"name\":\"b\",\"image\":\"x\"}");
    pod(e, "ns", "follow", "n1", one);
    pod(e, "ns", "endless", "n1", one);
    pod(e, "ns", "waiting", "n1", one);
    pod(e, "ns", "gone", "n1", one);
    pod(e, "ns", "unbound", NULL, one);
    pod(e, "ns", "dark", "n2", one);
    pod(e, "ns", "noagent", "n3", one);
    pod(e, "team-a", "mine", "n1", one);
    /* A Node stored before endpoints were validated (the API refuses it now). */
    json_t *bad = json_loads("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n4\",\"annotations\":"
                             "{\"gpusched.io/agent-endpoint\":\"http://127.0.0.1:1/admin#\"}}}",
                             0, NULL);
    char nkey[256];
    gs_api_key(gs_api_resource_lookup("nodes"), NULL, "n4", nkey, sizeof nkey);
    assert_int_equal(gs_store_create(gs_server_store(e->srv), nkey, bad, NULL), 0);
    json_decref(bad);
    pod(e, "ns", "forged", "n4", one);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gs_client_free(e->adm);
    gs_server_stop(e->srv);
    MHD_stop_daemon(e->peer.d);
    pthread_mutex_destroy(&e->peer.mu);
    fx_rm_tree(e->dir);
    free(e);
    return 0;
}

struct got {
    char body[8192];
    size_t n;
    int64_t first_ms; /* when the first byte came */
    char ctype[128];
};

static size_t got_data(char *d, size_t s, size_t nm, void *arg)
{
    struct got *g = arg;
    size_t n = s * nm;
    if (!g->n && n) g->first_ms = now_ms();
    size_t room = sizeof g->body - 1 - g->n;
    memcpy(g->body + g->n, d, n < room ? n : room);
    g->n += n < room ? n : room;
    g->body[g->n] = 0;
    return n;
}

/* GET base+path as token; the HTTP status. */
static long get(struct env *e, const char *token, const char *path, struct got *g)
{
    memset(g, 0, sizeof *g);
    char url[512], auth[128];
    snprintf(url, sizeof url, "%s%s", e->base, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    CURL *h = curl_easy_init();
    struct curl_slist *hd = curl_slist_append(NULL, auth);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, got_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, g);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    assert_int_equal(curl_easy_perform(h), CURLE_OK);
    long code = 0;
    char *ct = NULL;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
    snprintf(g->ctype, sizeof g->ctype, "%s", ct ? ct : "");
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    return code;
}

/* A Status with this code whose message contains want. */
static void status_is(const struct got *g, long code, const char *want)
{
    json_t *st = json_loads(g->body, 0, NULL);
    if (!st) fail_msg("not JSON: %s", g->body);
    assert_string_equal(json_string_value(json_object_get(st, "kind")), "Status");
    assert_int_equal(json_integer_value(json_object_get(st, "code")), code);
    const char *m = json_string_value(json_object_get(st, "message"));
    if (!m || !strstr(m, want)) fail_msg("message \"%s\" lacks \"%s\"", m ? m : "", want);
    json_decref(st);
}

static void last_asked(struct env *e, const char *want)
{
    pthread_mutex_lock(&e->peer.mu);
    char last[1024];
    snprintf(last, sizeof last, "%s", e->peer.last);
    pthread_mutex_unlock(&e->peer.mu);
    assert_string_equal(last, want);
}

static void proxies(void **state)
{
    struct env *e = *state;
    struct got g;
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/one/log", &g), 200);
    assert_string_equal(g.body, "a\nb\n");
    assert_string_equal(g.ctype, "text/plain");
    last_asked(e, "/logs/ns/one?container=main");
    /* The agent gets the server's own token, never the caller's. */
    char want[300];
    snprintf(want, sizeof want, "Bearer %s", gs_server_agent_token(e->srv));
    assert_true(strlen(gs_server_agent_token(e->srv)) >= 32);
    pthread_mutex_lock(&e->peer.mu);
    assert_string_equal(e->peer.auth, want);
    pthread_mutex_unlock(&e->peer.mu);
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/one/log?tailLines=1&timestamps=true", &g), 200);
    last_asked(e, "/logs/ns/one?container=main&tailLines=1");
    /* limitBytes is also enforced here, whatever the agent sends */
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/one/log?limitBytes=3", &g), 200);
    assert_string_equal(g.body, "a\nb");
    last_asked(e, "/logs/ns/one?container=main&limitBytes=3");
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/two/log?container=b", &g), 200);
    last_asked(e, "/logs/ns/two?container=b");
    /* a tenant in its namespace */
    assert_int_equal(get(e, "ten", "/api/v1/namespaces/team-a/pods/mine/log", &g), 200);
    assert_string_equal(g.body, "a\nb\n");
}

static void errors(void **state)
{
    struct env *e = *state;
    struct got g;
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/two/log", &g), 400);
    status_is(&g, 400, "a container name must be specified for pod two, choose one of: [a b]");
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/two/log?container=zz", &g), 400);
    status_is(&g, 400, "container zz is not valid for pod two");
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/nosuch/log", &g), 404);
    status_is(&g, 404, "pods \"nosuch\" not found");
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/unbound/log", &g), 400);
    status_is(&g, 400, "container \"main\" in pod \"unbound\" is waiting to start");
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/waiting/log", &g), 400);
    status_is(&g, 400, "container \"main\" in pod \"waiting\" is waiting to start: ContainerCreating");
    /* the agent does not know the pod: still Pending, it has not taken it yet */
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/gone/log", &g), 400);
    status_is(&g, 400, "container \"main\" in pod \"gone\" is waiting to start: ContainerCreating");
    json_t *patch = json_loads("{\"status\":{\"phase\":\"Running\"}}", 0, NULL), *out = NULL;
    assert_int_equal(gs_client_patch(e->adm, gs_api_resource_lookup("pods"), "ns", "gone", "status", false, patch, &out), 0);
    json_decref(patch);
    json_decref(out);
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/gone/log", &g), 404);
    status_is(&g, 404, "pod ns/gone is not on node n1");
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/dark/log", &g), 502);
    status_is(&g, 502, "cannot reach the agent of node \"n2\" at http://127.0.0.1:1");
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/noagent/log", &g), 503);
    status_is(&g, 503, "node \"n3\" of pod \"noagent\" has no agent endpoint");
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/forged/log", &g), 502);
    status_is(&g, 502, "invalid agent endpoint \"http://127.0.0.1:1/admin#\": must be exactly http(s)://HOST:PORT");
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/one/log?previous=true", &g), 400);
    status_is(&g, 400, "previous=true is not supported");
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/one/log?tailLines=x", &g), 400);
    status_is(&g, 400, "tailLines: invalid value \"x\"");
    assert_int_equal(get(e, "adm", "/api/v1/nodes/n1/log", &g), 404);
    /* the tenant rule, as for GET pod; a node only for pods bound to it */
    assert_int_equal(get(e, "ten", "/api/v1/namespaces/ns/pods/one/log", &g), 403);
    status_is(&g, 403, "User \"alice\" cannot get resource \"pods/log\"");
    assert_int_equal(get(e, "nod", "/api/v1/namespaces/ns/pods/one/log", &g), 403);
    assert_int_equal(get(e, "nod", "/api/v1/namespaces/ns/pods/dark/log", &g), 502);
}

static void follow(void **state)
{
    struct env *e = *state;
    struct got g;
    int64_t t0 = now_ms();
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/follow/log?follow=true", &g), 200);
    int64_t end = now_ms();
    assert_string_equal(g.body, "line 0\nline 1\nline 2\n");
    last_asked(e, "/logs/ns/follow?container=main&follow=1");
    /* the first line arrived while the peer was still writing (two 500 ms gaps) */
    if (end - g.first_ms < 500) fail_msg("first line only %lld ms before the end", (long long)(end - g.first_ms));
    assert_true(end - t0 < 10000);
}

/* Other requests are answered while a follow stream is open. */
struct bg {
    struct env *e;
    long code;
};

static void *bg_follow(void *arg)
{
    struct bg *b = arg;
    struct got g;
    b->code = get(b->e, "adm", "/api/v1/namespaces/ns/pods/follow/log?follow=true", &g);
    return NULL;
}

static void follow_does_not_block(void **state)
{
    struct env *e = *state;
    pthread_t th[4];
    struct bg b[4];
    for (int i = 0; i < 4; i++) {
        b[i] = (struct bg){e, 0};
        pthread_create(&th[i], NULL, bg_follow, &b[i]);
    }
    usleep(100000);
    struct got g;
    int64_t t0 = now_ms();
    assert_int_equal(get(e, "adm", "/api/v1/namespaces/ns/pods/one/log", &g), 200);
    assert_true(now_ms() - t0 < 400); /* not queued behind the streams */
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(b[i].code, 200);
    }
}

static size_t stop_at_once(char *d, size_t s, size_t nm, void *arg)
{
    (void)d, (void)s, (void)nm, (void)arg;
    return 0;
}

static void *bg_endless(void *arg)
{
    struct env *e = arg;
    char url[256];
    snprintf(url, sizeof url, "%s/api/v1/namespaces/ns/pods/endless/log?follow=true", e->base);
    CURL *h = curl_easy_init();
    struct curl_slist *hd = curl_slist_append(NULL, "Authorization: Bearer adm");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, got_data);
    struct got *g = calloc(1, sizeof *g);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, g);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    curl_easy_perform(h); /* ends when the server stops */
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    return g;
}

/* A follower that leaves closes the agent side; stopping the server ends
 * the streams still open, promptly. */
static void follow_teardown(void **state)
{
    struct env *e = *state;
    char url[256];
    snprintf(url, sizeof url, "%s/api/v1/namespaces/ns/pods/endless/log?follow=true", e->base);
    for (int i = 0; i < 3; i++) {
        CURL *h = curl_easy_init();
        struct curl_slist *hd = curl_slist_append(NULL, "Authorization: Bearer adm");
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, stop_at_once);
        assert_int_equal(curl_easy_perform(h), CURLE_WRITE_ERROR);
        curl_slist_free_all(hd);
        curl_easy_cleanup(h);
    }
    int64_t deadline = now_ms() + 10000;
    while (atomic_load(&e->peer.closed) < 3 && now_ms() < deadline) usleep(50000);
    assert_int_equal(atomic_load(&e->peer.closed), 3);
    pthread_t th;
    pthread_create(&th, NULL, bg_endless, e);
    while (atomic_load(&e->peer.closed) == 3 && now_ms() < deadline) {
        pthread_mutex_lock(&e->peer.mu);
        bool asked = strstr(e->peer.last, "endless") != NULL;
        pthread_mutex_unlock(&e->peer.mu);
        if (asked) break;
        usleep(50000);
    }
    usleep(300000); /* lines are flowing */
    int64_t t0 = now_ms();
    gs_server_stop(e->srv);
    e->srv = NULL;
    assert_true(now_ms() - t0 < 3000);
    struct got *g;
    pthread_join(th, (void **)&g);
    assert_non_null(strstr(g->body, "x\nx\n"));
    free(g);
    deadline = now_ms() + 10000;
    while (atomic_load(&e->peer.closed) < 4 && now_ms() < deadline) usleep(50000);
    assert_int_equal(atomic_load(&e->peer.closed), 4);
}

/*--- The agent's endpoint ---*/

struct afx {
    char dir[64];
    struct gs_agent a;
    struct gs__pod pod, pending;
    struct gs__ctr ctr[2];
    char log[256];
    char base[64];
};

static int agent_setup(void **state)
{
    struct afx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/gs-alogs-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->a.node, sizeof f->a.node, "n1");
    pthread_mutex_init(&f->a.mu, NULL);
    f->pod = (struct gs__pod){.ns = "ns", .name = "p", .key = "ns/p", .c = f->ctr, .nc = 2, .phase = GS_P_RUNNING};
    snprintf(f->pod.dir, sizeof f->pod.dir, "%s", f->dir);
    f->ctr[0] = (struct gs__ctr){.name = "main", .state = GS_C_RUNNING};
    f->ctr[1] = (struct gs__ctr){.name = "side", .state = GS_C_WAITING};
    f->pending = (struct gs__pod){.ns = "ns", .name = "pend", .key = "ns/pend", .phase = GS_P_PENDING};
    static struct gs__pod *pods[2];
    pods[0] = &f->pod;
    pods[1] = &f->pending;
    f->a.pods = pods;
    f->a.npods = 2;
    char d[128];
    snprintf(d, sizeof d, "%s/main", f->dir);
    mkdir(d, 0755);
    snprintf(f->log, sizeof f->log, "%s/main/log", f->dir);
    FILE *l = fopen(f->log, "w");
    fputs("one\ntwo\nthree\n", l);
    fclose(l);
    snprintf(f->a.http_token, sizeof f->a.http_token, "agent-secret");
    char err[256];
    assert_int_equal(gs__http_start(&f->a, "127.0.0.1:0", err, sizeof err), 0);
    snprintf(f->base, sizeof f->base, "http://127.0.0.1:%d", f->a.port);
    *state = f;
    return 0;
}

static int agent_teardown(void **state)
{
    struct afx *f = *state;
    gs__http_stop(&f->a);
    pthread_mutex_destroy(&f->a.mu);
    fx_rm_tree(f->dir);
    free(f);
    return 0;
}

static struct curl_slist *agent_auth(void)
{
    return curl_slist_append(NULL, "Authorization: Bearer agent-secret");
}

static long aget_as(struct afx *f, const char *path, const char *auth, struct got *g)
{
    memset(g, 0, sizeof *g);
    char url[512];
    snprintf(url, sizeof url, "%s%s", f->base, path);
    CURL *h = curl_easy_init();
    struct curl_slist *hd = auth ? curl_slist_append(NULL, auth) : NULL;
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, got_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, g);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    assert_int_equal(curl_easy_perform(h), CURLE_OK);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    curl_slist_free_all(hd);
    return code;
}

static long aget(struct afx *f, const char *path, struct got *g)
{
    return aget_as(f, path, "Authorization: Bearer agent-secret", g);
}

/* Every route but /metrics and /healthz wants the agent's token. */
static void agent_needs_token(void **state)
{
    struct afx *f = *state;
    struct got g;
    const char *paths[] = {"/logs/ns/p", "/containerLogs/ns/p/main", "/pods", "/nothing"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        assert_int_equal(aget_as(f, paths[i], NULL, &g), 401);
        assert_non_null(strstr(g.body, "bearer token"));
        assert_int_equal(aget_as(f, paths[i], "Authorization: Bearer agent-secreT", &g), 401);
        assert_int_equal(aget_as(f, paths[i], "Authorization: Bearer agent-secret-and-more", &g), 401);
        assert_int_equal(aget_as(f, paths[i], "Authorization: Basic agent-secret", &g), 401);
    }
    assert_int_equal(aget_as(f, "/healthz", NULL, &g), 200);
    assert_int_not_equal(aget_as(f, "/metrics", NULL, &g), 401); /* 503 here: no exporter */
    assert_int_equal(aget(f, "/logs/ns/p", &g), 200);
}

static void agent_logs(void **state)
{
    struct afx *f = *state;
    struct got g;
    assert_int_equal(aget(f, "/logs/ns/p", &g), 200);
    assert_string_equal(g.body, "one\ntwo\nthree\n");
    assert_int_equal(aget(f, "/logs/ns/p?tailLines=2", &g), 200);
    assert_string_equal(g.body, "two\nthree\n");
    assert_int_equal(aget(f, "/logs/ns/p?tail=1", &g), 200);
    assert_string_equal(g.body, "three\n");
    assert_int_equal(aget(f, "/logs/ns/p?tailLines=0", &g), 200);
    assert_string_equal(g.body, "");
    assert_int_equal(aget(f, "/logs/ns/p?tailLines=99&limitBytes=5", &g), 200);
    assert_string_equal(g.body, "one\nt");
    assert_int_equal(aget(f, "/containerLogs/ns/p/main?tailLines=1", &g), 200);
    assert_string_equal(g.body, "three\n");
    assert_int_equal(aget(f, "/logs/ns/p?tailLines=-2", &g), 400);
    assert_non_null(strstr(g.body, "tailLines \"-2\" must be an integer >= 0"));
    assert_int_equal(aget(f, "/logs/ns/p?container=side", &g), 400);
    assert_string_equal(g.body, "container \"side\" in pod \"p\" is waiting to start: ContainerCreating\n");
    assert_int_equal(aget(f, "/logs/ns/pend?container=main", &g), 400);
    assert_non_null(strstr(g.body, "is waiting to start"));
    assert_int_equal(aget(f, "/logs/ns/p?container=zz", &g), 404);
    assert_int_equal(aget(f, "/logs/ns/nope", &g), 404);
    assert_non_null(strstr(g.body, "not on node n1"));
}

struct writer {
    struct afx *f;
};

/* Appends two lines, then marks the container exited. */
static void *write_then_exit(void *arg)
{
    struct afx *f = arg;
    for (int i = 0; i < 2; i++) {
        usleep(400000);
        FILE *l = fopen(f->log, "a");
        fprintf(l, "more %d\n", i);
        fclose(l);
    }
    usleep(300000);
    pthread_mutex_lock(&f->a.mu);
    f->ctr[0].state = GS_C_EXITED;
    pthread_mutex_unlock(&f->a.mu);
    return NULL;
}

static void agent_follow(void **state)
{
    struct afx *f = *state;
    pthread_t th;
    pthread_create(&th, NULL, write_then_exit, f);
    struct got g;
    int64_t t0 = now_ms();
    assert_int_equal(aget(f, "/logs/ns/p?tailLines=1&follow=1", &g), 200);
    int64_t end = now_ms();
    pthread_join(th, NULL);
    assert_string_equal(g.body, "three\nmore 0\nmore 1\n");
    assert_true(end - g.first_ms >= 700); /* the tail came at once, the rest as written */
    assert_true(end - t0 < 10000);        /* and the stream ended with the container */
    /* an exited container: follow returns what there is and ends */
    t0 = now_ms();
    assert_int_equal(aget(f, "/logs/ns/p?follow=1&tailLines=1", &g), 200);
    assert_string_equal(g.body, "more 1\n");
    assert_true(now_ms() - t0 < 3000);
}

/* A follower that goes away is noticed while the container is quiet. */
static size_t abort_after_first(char *d, size_t s, size_t nm, void *arg)
{
    (void)d, (void)arg;
    (void)s, (void)nm;
    return 0;
}

static void agent_follow_client_gone(void **state)
{
    struct afx *f = *state;
    char url[256];
    snprintf(url, sizeof url, "%s/logs/ns/p?follow=1", f->base);
    struct curl_slist *hd = agent_auth();
    for (int i = 0; i < 40; i++) { /* more than the follow cap: closed streams give their slot back */
        CURL *h = curl_easy_init();
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, abort_after_first);
        assert_int_equal(curl_easy_perform(h), CURLE_WRITE_ERROR);
        curl_easy_cleanup(h);
    }
    /* every slot came back: a new follow is served, not refused with 429 */
    struct got g;
    long code = 0;
    for (int64_t deadline = now_ms() + 10000; now_ms() < deadline; usleep(100000))
        if ((code = aget(f, "/logs/ns/p?follow=1&limitBytes=3", &g)) == 200) break;
    assert_int_equal(code, 200);
    assert_string_equal(g.body, "one");
    assert_int_equal(aget(f, "/healthz", &g), 200);
    curl_slist_free_all(hd);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(query_parse),
        cmocka_unit_test(container_choice),
        cmocka_unit_test(agent_path),
        cmocka_unit_test_setup_teardown(proxies, setup, teardown),
        cmocka_unit_test_setup_teardown(errors, setup, teardown),
        cmocka_unit_test_setup_teardown(follow, setup, teardown),
        cmocka_unit_test_setup_teardown(follow_does_not_block, setup, teardown),
        cmocka_unit_test_setup_teardown(follow_teardown, setup, teardown),
        cmocka_unit_test_setup_teardown(agent_needs_token, agent_setup, agent_teardown),
        cmocka_unit_test_setup_teardown(agent_logs, agent_setup, agent_teardown),
        cmocka_unit_test_setup_teardown(agent_follow, agent_setup, agent_teardown),
        cmocka_unit_test_setup_teardown(agent_follow_client_gone, agent_setup, agent_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
