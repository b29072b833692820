/*
 * test_informer_kube.c - the kube source against a scripted API server
 * (fake_kube.h) that answers as the Kubernetes API conventions say, for the
 * cases our own server does not produce on demand: lists paged with limit
 * and continue, a continue token that expired (410: the list starts over),
 * an ERROR 410 on a watch (a relist whose differences become events, the
 * vanished object's DELETED carrying its last state), 429 with Retry-After,
 * 500s backed off, a stream cut inside an event (resumed from the last
 * version), watches the server ends at once without an event (backed off), a resource not served (404: empty, asked again, logged once),
 * the Binding and DeleteOptions bodies, 409 answers to bindings told apart,
 * a batch of bindings spread over parallel connections, and one namespace
 * followed with the request hook and the user agent on every request.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/log.h"
#include "fake_kube.h"
#include "informer/informer.h"
#include "informer/source_kube.h"

#include <jansson.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The test's script state, shared with the handlers under f->mu. */
struct script {
    atomic_bool go;      /* the test lets the scripted event happen */
    atomic_int watches;  /* watch requests seen */
    atomic_int lists;
    atomic_bool served;
    double t[16];        /* when the first list requests came */
    int nt;
    int fails;           /* answers still to fail */
    bool expired_once;
    char bodies[64][1024];
    int nbodies;
};

static const char *NODE = "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\",\"resourceVersion\":\"%d\"}}";

/* A NodeList of names[from..to) with rv and continue token. */
static void node_page(int fd, int from, int to, const char *cont, int list_rv)
{
    char body[8192];
    int n = snprintf(body, sizeof body, "{\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"%d\"%s%s%s},\"items\":[",
                     list_rv, cont ? ",\"continue\":\"" : "", cont ? cont : "", cont ? "\"" : "");
    for (int i = from; i < to; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i + 1);
        if (i > from) body[n++] = ',';
        n += snprintf(body + n, sizeof body - (size_t)n, NODE, name, i + 1);
    }
    snprintf(body + n, sizeof body - (size_t)n, "]}");
    fk_reply(fd, 200, NULL, body);
}

static struct gs_source *open_at(struct fake_kube *f, const char *const *follow, int page, int workers)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", f->port);
    struct gs_source_kube_opts o = {.client = {.server = url, .token = "t"}, .follow = follow, .page_size = page,
                                    .seed = 3, .write_workers = workers};
    struct gs_source *s = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_source_kube_new(&o, &s, &d), 0);
    gs_diags_free(&d);
    return s;
}

static const char *const nodes_only[] = {"nodes/", NULL};

struct names {
    int n;
    char keys[16][32];
};

static int on_item(const char *key, json_t *obj, void *arg)
{
    (void)obj;
    struct names *s = arg;
    if (s->n < 16) snprintf(s->keys[s->n++], sizeof s->keys[0], "%s", key);
    return 0;
}

/* Waits for an event of type on key after *cur; its value (strdup) or NULL after 10 s. */
static char *wait_event(struct gs_source *s, int64_t *cur, const char *key, enum gs_store_ev type, int64_t *rv)
{
    for (double end = now_s() + 10; now_s() < end;) {
        struct gs_store_event *evs = NULL;
        size_t n = 0;
        assert_int_equal(gs_source_events(s, cur, NULL, 200, NULL, &evs, &n), 0);
        char *v = NULL;
        for (size_t i = 0; i < n && !v; i++)
            if (!strcmp(evs[i].key, key) && evs[i].type == type) {
                v = strdup(evs[i].value);
                if (rv) *rv = evs[i].rv;
            }
        gs_store_events_free(evs, n);
        if (v) return v;
    }
    return NULL;
}

/*--- Paging ---*/

static void pages_handler(struct fake_kube *f, int fd, const struct fk_req *r)
{
    struct script *sc = f->arg;
    char cont[64], w[16];
    fk_query(r->path, "continue", cont, sizeof cont);
    if (strcmp(fk_query(r->path, "watch", w, sizeof w), "true")) {
        atomic_fetch_add(&sc->lists, 1);
        pthread_mutex_lock(&f->mu);
        bool expire = !strcmp(cont, "c4") && sc->fails > 0 && sc->fails--;
        pthread_mutex_unlock(&f->mu);
        if (expire) return fk_status(fd, 410, NULL, "Expired", "The provided continue parameter is too old");
        if (!cont[0]) return node_page(fd, 0, 2, "c2", 10);
        if (!strcmp(cont, "c2")) return node_page(fd, 2, 4, "c4", 10);
        if (!strcmp(cont, "c4")) return node_page(fd, 4, 6, "c6", 10);
        return node_page(fd, 6, 7, NULL, 10);
    }
    if (atomic_fetch_add(&sc->watches, 1) == 0) {
        fk_stream_head(fd);
        fk_line(fd, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"11\"}}}");
        fk_line(fd, "");
        char ev[512];
        snprintf(ev, sizeof ev, "{\"type\":\"ADDED\",\"object\":");
        snprintf(ev + strlen(ev), sizeof ev - strlen(ev), NODE, "n8", 12);
        strcat(ev, "}");
        fk_line(fd, ev);
    } else {
        fk_stream_head(fd);
    }
    fk_hold(f, fd, 30);
}

static void lists_page_by_page(void **state)
{
    (void)state;
    struct script sc = {0};
    struct fake_kube *f = fk_start(pages_handler, &sc);
    struct gs_source *s = open_at(f, nodes_only, 2, 0);
    assert_true(gs_source_kube_wait_synced(s, 10000));
    struct names got = {0};
    int64_t cur = 0;
    assert_int_equal(gs_source_list(s, "nodes/", on_item, &got, &cur), 0);
    assert_true(got.n >= 7);
    for (int i = 0; i < 7; i++) {
        char want[16];
        snprintf(want, sizeof want, "nodes/n%d", i + 1);
        assert_string_equal(got.keys[i], want);
    }
    assert_int_equal(fk_count(f, "limit=2"), 4);
    assert_int_equal(fk_count(f, "continue=c6"), 1);
    /* The watch starts at the list's version, asks for bookmarks and a timeout. */
    assert_int_equal(fk_count(f, "watch=true&allowWatchBookmarks=true&timeoutSeconds="), atomic_load(&sc.watches));
    char *v = wait_event(s, &(int64_t){0}, "nodes/n8", GS_STORE_ADDED, NULL);
    assert_non_null(v);
    free(v);
    assert_int_equal(fk_count(f, "watch=true&allowWatchBookmarks=true&timeoutSeconds="), atomic_load(&sc.watches));
    assert_int_equal(fk_count(f, "&resourceVersion=10"), 1);
    struct gs_source_kube_stats st;
    gs_source_kube_stats(s, &st);
    assert_int_equal(st.lists, 4);
    assert_int_equal(st.bookmarks, 1);
    assert_int_equal(st.relists, 0);
    gs_source_free(s);
    fk_stop(f);
}

static void expired_continue_starts_over(void **state)
{
    (void)state;
    struct script sc = {.fails = 1};
    struct fake_kube *f = fk_start(pages_handler, &sc);
    struct gs_source *s = open_at(f, nodes_only, 2, 0);
    assert_true(gs_source_kube_wait_synced(s, 10000));
    struct names got = {0};
    assert_int_equal(gs_source_list(s, "nodes/", on_item, &got, NULL), 0);
    assert_true(got.n >= 7);
    assert_string_equal(got.keys[6], "nodes/n7");
    assert_int_equal(fk_count(f, "continue=c4"), 2); /* expired once, then reached again from the start */
    assert_int_equal(fk_count(f, "continue=c2"), 2);
    assert_int_equal(atomic_load(&sc.lists), 7);
    struct gs_source_kube_stats st;
    gs_source_kube_stats(s, &st);
    assert_int_equal(st.lists, 6); /* pages read: 2 before the 410, 4 after */
    gs_source_free(s);
    fk_stop(f);
}

/*--- Relist after 410 ---*/

static void relist_handler(struct fake_kube *f, int fd, const struct fk_req *r)
{
    struct script *sc = f->arg;
    char w[16];
    if (strcmp(fk_query(r->path, "watch", w, sizeof w), "true")) {
        if (atomic_fetch_add(&sc->lists, 1) == 0)
            return fk_reply(fd, 200, NULL,
                            "{\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"10\"},\"items\":["
                            "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"1\"}},"
                            "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n2\",\"resourceVersion\":\"2\"}},"
                            "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n3\",\"resourceVersion\":\"3\",\"labels\":{\"last\":\"state\"}}}]}");
        return fk_reply(fd, 200, NULL,
                        "{\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"20\"},\"items\":["
                        "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"1\"}},"
                        "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n2\",\"resourceVersion\":\"15\"}},"
                        "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n4\",\"resourceVersion\":\"16\"}}]}");
    }
    fk_stream_head(fd);
    if (atomic_fetch_add(&sc->watches, 1) == 0) {
        while (!atomic_load(&sc->go) && !fk_stopping(f)) usleep(10 * 1000);
        fk_line(fd, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                    "\"code\":410,\"reason\":\"Expired\",\"message\":\"too old resource version: 10 (17)\"}}");
        return;
    }
    fk_hold(f, fd, 30);
}

static void expired_watch_relists_with_differences(void **state)
{
    (void)state;
    struct script sc = {0};
    struct fake_kube *f = fk_start(relist_handler, &sc);
    struct gs_source *s = open_at(f, nodes_only, 0, 0);
    struct names got = {0};
    int64_t cur = 0;
    assert_int_equal(gs_source_list(s, "nodes/", on_item, &got, &cur), 0); /* waits for the first list */
    assert_int_equal(got.n, 3);
    atomic_store(&sc.go, true);
    int64_t rv = 0, c2 = cur, c3 = cur, c4 = cur;
    char *v = wait_event(s, &c2, "nodes/n2", GS_STORE_MODIFIED, &rv);
    assert_non_null(v);
    assert_int_equal(rv, 15);
    free(v);
    assert_non_null(v = wait_event(s, &c4, "nodes/n4", GS_STORE_ADDED, &rv));
    assert_int_equal(rv, 16);
    free(v);
    assert_non_null(v = wait_event(s, &c3, "nodes/n3", GS_STORE_DELETED, &rv));
    assert_non_null(strstr(v, "\"last\":\"state\"")); /* the last state the cache knew */
    assert_true(rv >= 20);                            /* newer than anything seen of n3 */
    free(v);
    /* n1 did not change: no event for it. */
    struct gs_store_event *evs = NULL;
    size_t n = 0;
    int64_t c1 = cur;
    assert_int_equal(gs_source_events(s, &c1, "nodes/n1", 100, NULL, &evs, &n), 0);
    assert_int_equal(n, 0);
    gs_store_events_free(evs, n);
    memset(&got, 0, sizeof got);
    assert_int_equal(gs_source_list(s, "nodes/", on_item, &got, NULL), 0);
    assert_int_equal(got.n, 3);
    assert_string_equal(got.keys[2], "nodes/n4");
    struct gs_source_kube_stats st;
    gs_source_kube_stats(s, &st);
    assert_int_equal(st.relists, 1);
    gs_source_free(s);
    fk_stop(f);
}

/*--- Errors: 429, 500, a cut stream ---*/

static void flaky_handler(struct fake_kube *f, int fd, const struct fk_req *r)
{
    struct script *sc = f->arg;
    char w[16];
    if (strcmp(fk_query(r->path, "watch", w, sizeof w), "true")) {
        pthread_mutex_lock(&f->mu);
        if (sc->nt < 16) sc->t[sc->nt++] = now_s();
        int fail = sc->fails > 0 ? sc->fails-- : 0;
        pthread_mutex_unlock(&f->mu);
        if (fail && sc->served) return fk_status(fd, 500, NULL, "InternalError", "etcd is sulking");
        if (fail) return fk_status(fd, 429, "Retry-After: 1\r\n", "TooManyRequests", "slow down");
        return node_page(fd, 0, 2, NULL, 10);
    }
    fk_stream_head(fd);
    if (atomic_fetch_add(&sc->watches, 1) == 0) {
        char ev[512];
        snprintf(ev, sizeof ev, "{\"type\":\"ADDED\",\"object\":");
        snprintf(ev + strlen(ev), sizeof ev - strlen(ev), NODE, "n8", 12);
        strcat(ev, "}");
        fk_line(fd, ev);
        fk_write(fd, "{\"type\":\"ADDED\",\"obj", 19); /* cut inside the next event */
        return;
    }
    fk_hold(f, fd, 30);
}

static void too_many_requests_waits_retry_after(void **state)
{
    (void)state;
    struct script sc = {.fails = 1};
    struct fake_kube *f = fk_start(flaky_handler, &sc);
    struct gs_source *s = open_at(f, nodes_only, 0, 0);
    assert_true(gs_source_kube_wait_synced(s, 10000));
    pthread_mutex_lock(&f->mu);
    assert_int_equal(sc.nt, 2);
    double gap = sc.t[1] - sc.t[0];
    pthread_mutex_unlock(&f->mu);
    if (gap < 0.95 || gap > 2.5) fail_msg("the list was asked again %.2f s after a 429 with Retry-After: 1", gap);
    /* The stream was cut inside an event: the watch goes on from the last whole one, no relist. */
    char *v = wait_event(s, &(int64_t){0}, "nodes/n8", GS_STORE_ADDED, NULL);
    assert_non_null(v);
    free(v);
    for (double end = now_s() + 5; fk_count(f, "resourceVersion=12") < 1 && now_s() < end;) usleep(20 * 1000);
    assert_int_equal(fk_count(f, "resourceVersion=12"), 1);
    struct gs_source_kube_stats st;
    gs_source_kube_stats(s, &st);
    assert_int_equal(st.relists, 0);
    assert_int_equal(st.lists, 1);
    assert_true(st.retries >= 2); /* the 429 and the cut stream */
    gs_source_free(s);
    fk_stop(f);
}

static void server_errors_back_off(void **state)
{
    (void)state;
    struct script sc = {.fails = 3, .served = true};
    struct fake_kube *f = fk_start(flaky_handler, &sc);
    struct gs_source *s = open_at(f, nodes_only, 0, 0);
    assert_true(gs_source_kube_wait_synced(s, 10000));
    pthread_mutex_lock(&f->mu);
    assert_int_equal(sc.nt, 4);
    double g1 = sc.t[1] - sc.t[0], g2 = sc.t[2] - sc.t[1], g3 = sc.t[3] - sc.t[2];
    pthread_mutex_unlock(&f->mu);
    /* 100 ms doubling, each step jittered within its upper half */
    if (g1 < 0.045 || g1 > 0.5 || g2 < 0.095 || g2 > 0.6 || g3 < 0.195 || g3 > 0.8)
        fail_msg("back-off gaps %.3f %.3f %.3f s", g1, g2, g3);
    struct gs_source_kube_stats st;
    gs_source_kube_stats(s, &st);
    assert_true(st.retries >= 3);
    gs_source_free(s);
    fk_stop(f);
}

/*--- Watches the server ends at once ---*/

static void silent_handler(struct fake_kube *f, int fd, const struct fk_req *r)
{
    struct script *sc = f->arg;
    char w[16];
    if (strcmp(fk_query(r->path, "watch", w, sizeof w), "true")) return node_page(fd, 0, 1, NULL, 10);
    atomic_fetch_add(&sc->watches, 1);
    fk_stream_head(fd); /* and nothing: the stream ends at once */
}

static void silent_watches_back_off(void **state)
{
    (void)state;
    struct script sc = {0};
    struct fake_kube *f = fk_start(silent_handler, &sc);
    struct gs_source *s = open_at(f, nodes_only, 0, 0);
    assert_true(gs_source_kube_wait_synced(s, 10000));
    usleep(1500 * 1000);
    int n = atomic_load(&sc.watches);
    /* 100, 200, 400, 800 ms steps (jittered down to half): a handful, not thousands */
    if (n < 2 || n > 12) fail_msg("%d watches in 1.5 s against a server that ends each at once", n);
    struct gs_source_kube_stats st;
    gs_source_kube_stats(s, &st);
    assert_true(st.retries >= (uint64_t)n - 1);
    gs_source_free(s);
    fk_stop(f);
}

/*--- A resource not served ---*/

static void crd_handler(struct fake_kube *f, int fd, const struct fk_req *r)
{
    struct script *sc = f->arg;
    char w[16];
    if (!atomic_load(&sc->served)) return fk_status(fd, 404, NULL, "NotFound", "the server could not find the requested resource");
    if (strcmp(fk_query(r->path, "watch", w, sizeof w), "true"))
        return fk_reply(fd, 200, NULL,
                        "{\"kind\":\"PodGroupList\",\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"metadata\":"
                        "{\"resourceVersion\":\"5\"},\"items\":[{\"kind\":\"PodGroup\",\"metadata\":{\"name\":\"g\","
                        "\"namespace\":\"default\",\"resourceVersion\":\"4\"}}]}");
    fk_stream_head(fd);
    fk_hold(f, fd, 30);
}

static void not_served_is_empty_and_asked_again(void **state)
{
    (void)state;
    struct script sc = {0};
    struct fake_kube *f = fk_start(crd_handler, &sc);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", f->port);
    struct gs_client_opts co = {.server = url};
    struct gs_informer_opts o = {.client = &co, .not_served_recheck_ms = 150};
    struct gs_informer_hub *h = NULL;
    assert_int_equal(gs_informer_hub_new(&o, 0, &h), 0);
    char logbuf[65536] = "";
    FILE *log = fmemopen(logbuf, sizeof logbuf - 1, "w");
    setvbuf(log, NULL, _IONBF, 0);
    gs_log_set_stream(log);
    struct gs_diags d = {0};
    assert_int_equal(gs_informer_hub_follow(h, "podgroups.scheduling.x-k8s.io/", &d), 0);
    assert_int_equal(gs_informer_hub_follow(h, "podgroups.scheduling.x-k8s.io/", &d), GS_EEXIST);
    assert_true(gs_informer_hub_wait_synced(h, 5000));
    struct names got = {0};
    int64_t cur = 0;
    assert_int_equal(gs_informer_hub_list(h, "podgroups.scheduling.x-k8s.io/", on_item, &got, &cur), 0);
    assert_int_equal(got.n, 0);
    for (double end = now_s() + 5; fk_count(f, "GET") < 4 && now_s() < end;) usleep(20 * 1000);
    assert_true(fk_count(f, "/apis/scheduling.x-k8s.io/v1alpha1/podgroups?limit=500") >= 4);
    atomic_store(&sc.served, true);
    bool seen = false;
    for (double end = now_s() + 5; !seen && now_s() < end;) {
        struct gs_store_event *evs = NULL;
        size_t n = 0;
        assert_int_equal(gs_informer_hub_events(h, &cur, NULL, 200, NULL, &evs, &n), 0);
        for (size_t i = 0; i < n; i++)
            seen = seen || (evs[i].type == GS_STORE_ADDED &&
                            !strcmp(evs[i].key, "podgroups.scheduling.x-k8s.io/default/g"));
        gs_store_events_free(evs, n);
    }
    assert_true(seen);
    gs_informer_hub_free(h);
    gs_log_set_stream(stderr);
    fclose(log);
    const char *p = strstr(logbuf, "does not serve");
    assert_non_null(p);
    assert_null(strstr(p + 1, "does not serve")); /* said once, however often it was asked */
    assert_non_null(strstr(logbuf, "resource=podgroups.scheduling.x-k8s.io/"));
    assert_non_null(strstr(logbuf, "the resource is served now"));
    fk_stop(f);
}

/*--- One namespace, the request hook, the user agent ---*/

static void team_handler(struct fake_kube *f, int fd, const struct fk_req *r)
{
    char w[16];
    if (strcmp(r->agent, "gpusched-test/1")) return fk_status(fd, 403, NULL, "Forbidden", "unknown agent");
    if (!strcmp(r->method, "DELETE"))
        return fk_reply(fd, 200, NULL, "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"namespace\":\"team\"}}");
    if (strcmp(fk_query(r->path, "watch", w, sizeof w), "true"))
        return fk_reply(fd, 200, NULL,
                        "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"3\"},"
                        "\"items\":[{\"metadata\":{\"name\":\"a\",\"namespace\":\"team\",\"resourceVersion\":\"2\"}}]}");
    fk_stream_head(fd);
    fk_hold(f, fd, 30);
}

struct hooked {
    pthread_mutex_t mu;
    char seen[16][160];
    int n;
};

static void on_request(void *ctx, const char *method, const char *path, long code)
{
    struct hooked *h = ctx;
    pthread_mutex_lock(&h->mu);
    if (h->n < 16) snprintf(h->seen[h->n++], sizeof h->seen[0], "%s %.120s %ld", method, path, code);
    pthread_mutex_unlock(&h->mu);
}

static void one_namespace_hook_and_agent(void **state)
{
    (void)state;
    struct script sc = {0};
    struct fake_kube *f = fk_start(team_handler, &sc);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", f->port);
    const char *const follow[] = {"pods/team/", NULL};
    struct hooked h = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct gs_source_kube_opts o = {.client = {.server = url}, .follow = follow, .user_agent = "gpusched-test/1",
                                    .on_request = on_request, .on_request_ctx = &h};
    struct gs_source *s = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_source_kube_new(&o, &s, &d), 0);
    struct names got = {0};
    assert_int_equal(gs_source_list(s, "pods/team/", on_item, &got, NULL), 0);
    assert_int_equal(got.n, 1);
    assert_string_equal(got.keys[0], "pods/team/a");
    /* Another namespace is not followed: refused, not answered empty. */
    assert_int_equal(gs_source_list(s, "pods/other/", on_item, &got, NULL), GS_EINVAL);
    /* A write through the pool carries the agent too (403 otherwise). */
    json_t *old = NULL;
    assert_int_equal(gs_source_remove(s, "pods/team/a", "uid-a", 0, &old), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(old, "metadata"), "name")), "a");
    json_decref(old);
    /* The watch follows the list on the informer's thread: give it time to be sent. */
    for (int i = 0; i < 500 && fk_count(f, "GET /api/v1/namespaces/team/pods?watch=true") < 1; i++) usleep(10000);
    gs_source_free(s);
    pthread_mutex_lock(&h.mu);
    bool listed = false;
    for (int i = 0; i < h.n; i++) listed = listed || !strcmp(h.seen[i], "GET /api/v1/namespaces/team/pods?limit=500 200");
    pthread_mutex_unlock(&h.mu);
    assert_true(listed);
    assert_int_equal(fk_count(f, "GET /api/v1/namespaces/team/pods?watch=true"), 1);
    fk_stop(f);
}

/*--- Writes ---*/

static void writes_handler(struct fake_kube *f, int fd, const struct fk_req *r)
{
    struct script *sc = f->arg;
    char w[16];
    if (!strcmp(r->method, "GET")) {
        if (!strcmp(fk_query(r->path, "watch", w, sizeof w), "true")) {
            fk_stream_head(fd);
            return fk_hold(f, fd, 30);
        }
        return node_page(fd, 0, 0, NULL, 1);
    }
    pthread_mutex_lock(&f->mu);
    if (sc->nbodies < 64) snprintf(sc->bodies[sc->nbodies++], sizeof sc->bodies[0], "%s %.200s %.800s", r->method, r->path, r->body);
    pthread_mutex_unlock(&f->mu);
    if (strstr(r->path, "/pods/taken/binding"))
        return fk_status(fd, 409, NULL, "Conflict", "pod taken is already assigned to node \\\"n1\\\"");
    if (strstr(r->path, "/pods/renamed/binding"))
        return fk_status(fd, 409, NULL, "Conflict",
                         "Operation cannot be fulfilled on pods/binding \\\"renamed\\\": Precondition failed: UID in "
                         "precondition: u1, UID in object meta: u2");
    if (strstr(r->path, "/binding")) {
        usleep(50 * 1000); /* a round trip to a far server */
        return fk_status(fd, 201, NULL, "", "");
    }
    if (!strcmp(r->method, "DELETE")) return fk_status(fd, 409, NULL, "Conflict", "Precondition failed: UID in precondition");
    fk_status(fd, 500, NULL, "InternalError", "unexpected");
}

static void bindings_and_deletes_as_kubernetes_writes_them(void **state)
{
    (void)state;
    struct script sc = {0};
    struct fake_kube *f = fk_start(writes_handler, &sc);
    const char *const follow[] = {"nodes/", NULL};
    struct gs_source *s = open_at(f, follow, 0, 4);
    assert_true(gs_source_kube_wait_synced(s, 10000));
    json_t *ann = json_pack("{s:s}", "gpusched.io/devices", "[\"GPU-1\"]");
    struct gs_source_bind b[3] = {{.key = "pods/team/ok", .uid = "u1", .node = "n1", .annotations = ann},
                                  {.key = "pods/team/taken", .uid = "u1", .node = "n1"},
                                  {.key = "pods/team/renamed", .uid = "u1", .node = "n1"}};
    assert_int_equal(gs_source_bind(s, b, 3), 0);
    assert_int_equal(b[0].err, 0);
    assert_int_equal(b[1].err, GS_EEXIST);
    assert_int_equal(b[2].err, GS_ENOENT);
    json_decref(ann);
    json_t *body = NULL;
    pthread_mutex_lock(&f->mu);
    for (int i = 0; i < sc.nbodies; i++)
        if (strstr(sc.bodies[i], "/api/v1/namespaces/team/pods/ok/binding "))
            body = json_loads(strchr(strchr(sc.bodies[i], ' ') + 1, ' ') + 1, 0, NULL);
    pthread_mutex_unlock(&f->mu);
    assert_non_null(body);
    assert_string_equal(json_string_value(json_object_get(body, "kind")), "Binding");
    json_t *md = json_object_get(body, "metadata");
    assert_string_equal(json_string_value(json_object_get(md, "name")), "ok");
    assert_string_equal(json_string_value(json_object_get(md, "namespace")), "team");
    assert_string_equal(json_string_value(json_object_get(md, "uid")), "u1");
    assert_string_equal(json_string_value(json_object_get(json_object_get(md, "annotations"), "gpusched.io/devices")),
                        "[\"GPU-1\"]");
    assert_string_equal(json_string_value(json_object_get(json_object_get(body, "target"), "kind")), "Node");
    assert_string_equal(json_string_value(json_object_get(json_object_get(body, "target"), "name")), "n1");
    json_decref(body);
    /* A delete sends its preconditions in DeleteOptions; a 409 is GS_ECONFLICT. */
    assert_int_equal(gs_source_remove(s, "pods/team/ok", "u9", 42, NULL), GS_ECONFLICT);
    body = NULL;
    pthread_mutex_lock(&f->mu);
    for (int i = 0; i < sc.nbodies; i++)
        if (!strncmp(sc.bodies[i], "DELETE /api/v1/namespaces/team/pods/ok ", 39))
            body = json_loads(sc.bodies[i] + 39, 0, NULL);
    pthread_mutex_unlock(&f->mu);
    assert_non_null(body);
    assert_string_equal(json_string_value(json_object_get(body, "kind")), "DeleteOptions");
    json_t *pre = json_object_get(body, "preconditions");
    assert_string_equal(json_string_value(json_object_get(pre, "uid")), "u9");
    assert_string_equal(json_string_value(json_object_get(pre, "resourceVersion")), "42");
    json_decref(body);
    /* 32 bindings of 50 ms each over 4 connections take about a quarter of 1.6 s. */
    struct gs_source_bind many[32];
    char keys[32][32];
    for (int i = 0; i < 32; i++) {
        snprintf(keys[i], sizeof keys[i], "pods/team/p%d", i);
        many[i] = (struct gs_source_bind){.key = keys[i], .node = "n1"};
    }
    double t0 = now_s();
    assert_int_equal(gs_source_bind(s, many, 32), 0);
    double took = now_s() - t0;
    for (int i = 0; i < 32; i++) assert_int_equal(many[i].err, 0);
    if (took > 1.0) fail_msg("32 bindings over 4 connections took %.2f s", took);
    gs_source_free(s);
    fk_stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lists_page_by_page),
        cmocka_unit_test(expired_continue_starts_over),
        cmocka_unit_test(expired_watch_relists_with_differences),
        cmocka_unit_test(too_many_requests_waits_retry_after),
        cmocka_unit_test(server_errors_back_off),
        cmocka_unit_test(silent_watches_back_off),
        cmocka_unit_test(not_served_is_empty_and_asked_again),
        cmocka_unit_test(bindings_and_deletes_as_kubernetes_writes_them),
        cmocka_unit_test(one_namespace_hook_and_agent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
