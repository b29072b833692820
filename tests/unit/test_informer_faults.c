/*
 * test_informer_faults.c - the kube source against the in-process API
 * server when things go wrong: the connection is cut while writes go on
 * (through a loopback proxy the test can cut), so the watch resumes from a
 * version the server's small ring no longer holds and gets 410; the relist
 * turns what was missed into ADDED / MODIFIED / DELETED events and the cache
 * ends equal to the server. Also: watches that time out every second end
 * with bookmarks that are counted and resumed from, and the server's rate
 * limiter's 429s are waited out as their Retry-After says. Connections cut
 * at random while writes go on: a consumer that follows source.h's contract
 * (list, go on from the cursor, keep the newest version per key, list again
 * on GS_ERANGE) ends with exactly the server's objects and versions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "informer/source_kube.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char tokens[] = "adm,admin,,,admin\n";

static const struct gs_api_resource *R(const char *name) { return gs_api_resource_lookup(name); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/*--- A proxy that can cut every connection ---*/

struct proxy {
    int fd, port, upstream;
    pthread_t th;
    atomic_bool stop, down; /* down: connections are cut and new ones closed at once */
    atomic_int active;
};

struct relay {
    struct proxy *p;
    int a, b;
};

static void *relay_main(void *arg)
{
    struct relay *r = arg;
    char buf[65536];
    while (!atomic_load(&r->p->stop) && !atomic_load(&r->p->down)) {
        struct pollfd f[2] = {{.fd = r->a, .events = POLLIN}, {.fd = r->b, .events = POLLIN}};
        if (poll(f, 2, 50) <= 0) continue;
        bool done = false;
        for (int i = 0; i < 2 && !done; i++) {
            if (!(f[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t k = recv(f[i].fd, buf, sizeof buf, 0);
            if (k <= 0 || send(i ? r->a : r->b, buf, (size_t)k, MSG_NOSIGNAL) != k) done = true;
        }
        if (done) break;
    }
    close(r->a);
    close(r->b);
    atomic_fetch_sub(&r->p->active, 1);
    free(r);
    return NULL;
}

static void *proxy_main(void *arg)
{
    struct proxy *p = arg;
    while (!atomic_load(&p->stop)) {
        struct pollfd f = {.fd = p->fd, .events = POLLIN};
        if (poll(&f, 1, 50) <= 0) continue;
        int c = accept(p->fd, NULL, NULL);
        if (c < 0) continue;
        if (atomic_load(&p->down)) {
            close(c);
            continue;
        }
        int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->upstream),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (connect(u, (struct sockaddr *)&sa, sizeof sa)) {
            close(u);
            close(c);
            continue;
        }
        struct relay *r = malloc(sizeof *r);
        *r = (struct relay){p, c, u};
        atomic_fetch_add(&p->active, 1);
        pthread_t t;
        pthread_create(&t, NULL, relay_main, r);
        pthread_detach(t);
    }
    return NULL;
}

static struct proxy *proxy_start(int upstream)
{
    struct proxy *p = calloc(1, sizeof *p);
    p->upstream = upstream;
    p->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    assert_int_equal(bind(p->fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(p->fd, 64), 0);
    assert_int_equal(getsockname(p->fd, (struct sockaddr *)&sa, &sl), 0);
    p->port = ntohs(sa.sin_port);
    pthread_create(&p->th, NULL, proxy_main, p);
    return p;
}

static void proxy_set_down(struct proxy *p, bool down)
{
    atomic_store(&p->down, down);
    if (down)
        while (atomic_load(&p->active) > 0) usleep(10 * 1000);
}

static void proxy_stop(struct proxy *p)
{
    atomic_store(&p->stop, true);
    pthread_join(p->th, NULL);
    while (atomic_load(&p->active) > 0) usleep(10 * 1000);
    close(p->fd);
    free(p);
}

/*--- Helpers ---*/

static const char *const follow[] = {"nodes/", NULL};

static struct gs_source *open_source(int port, int watch_timeout_s)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    struct gs_source_kube_opts o = {.client = {.server = url, .token = "adm"}, .follow = follow,
                                    .watch_timeout_s = watch_timeout_s, .seed = 11};
    struct gs_source *s = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_source_kube_new(&o, &s, &d), 0);
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

static void label_node(struct api_env *e, const char *name, const char *value)
{
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "v", value);
    assert_int_equal(gs_client_patch(e->adm, R("nodes"), NULL, name, NULL, false, patch, NULL), 0);
    json_decref(patch);
}

struct evlog {
    char line[256][96];
    int n;
};

/* Reads the stream for secs seconds (or until want lines matched), logging "TYPE key". */
static void read_stream(struct gs_source *s, int64_t *cur, double secs, struct evlog *l)
{
    for (double end = now_s() + secs; now_s() < end;) {
        struct gs_store_event *evs = NULL;
        size_t n = 0;
        assert_int_equal(gs_source_events(s, cur, "nodes/", 100, NULL, &evs, &n), 0);
        for (size_t i = 0; i < n && l->n < 256; i++)
            snprintf(l->line[l->n++], sizeof l->line[0], "%s %s", gs_store_ev_name(evs[i].type), evs[i].key);
        gs_store_events_free(evs, n);
    }
}

static bool has(const struct evlog *l, const char *line)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->line[i], line)) return true;
    return false;
}

struct names {
    char v[64][32];
    int n;
};

static int on_item(const char *key, json_t *obj, void *arg)
{
    (void)obj;
    struct names *s = arg;
    if (s->n < 64) snprintf(s->v[s->n++], sizeof s->v[0], "%s", key);
    return 0;
}

static int on_server_item(struct api_env *e, struct names *out)
{
    json_t *list = NULL;
    assert_int_equal(gs_client_list(e->adm, R("nodes"), NULL, NULL, NULL, false, &list), 0);
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(list, "items"), i, it) {
        if (out->n < 64)
            snprintf(out->v[out->n++], sizeof out->v[0], "nodes/%s",
                     json_string_value(json_object_get(json_object_get(it, "metadata"), "name")));
    }
    json_decref(list);
    return out->n;
}

/*--- Tests ---*/

static int setup_small_ring(void **state)
{
    struct gs_server_opts o = {.no_scheduler = true, .ring_events = 16};
    return api_env_start(state, "/tmp/gs-infault-XXXXXX", tokens, false, o);
}

static void cut_connection_relists_after_410(void **state)
{
    struct api_env *e = *state;
    make_node(e, "a1");
    make_node(e, "a2");
    make_node(e, "a3");
    struct proxy *p = proxy_start(gs_server_port(e->srv));
    struct gs_source *s = open_source(p->port, 0);
    int64_t cur = 0;
    struct names before = {0};
    assert_int_equal(gs_source_list(s, "nodes/", on_item, &before, &cur), 0);
    assert_int_equal(before.n, 3);
    proxy_set_down(p, true);
    /* While the source is cut off: a delete, an update, a create, and churn
     * enough to push its version out of the server's 16-event ring. */
    assert_int_equal(gs_client_delete(e->adm, R("nodes"), NULL, "a1", NULL), 0);
    label_node(e, "a2", "new");
    make_node(e, "a4");
    for (int i = 0; i < 12; i++) {
        char n[16];
        snprintf(n, sizeof n, "churn%d", i);
        make_node(e, n);
        assert_int_equal(gs_client_delete(e->adm, R("nodes"), NULL, n, NULL), 0);
    }
    usleep(300 * 1000);
    proxy_set_down(p, false);
    struct evlog l = {0};
    struct gs_source_kube_stats st = {0};
    for (double end = now_s() + 40; now_s() < end && !(has(&l, "ADDED nodes/a4") && has(&l, "DELETED nodes/a1"));)
        read_stream(s, &cur, 0.3, &l);
    assert_true(has(&l, "DELETED nodes/a1"));
    assert_true(has(&l, "MODIFIED nodes/a2"));
    assert_true(has(&l, "ADDED nodes/a4"));
    assert_false(has(&l, "ADDED nodes/churn0")); /* came and went while nobody looked */
    assert_false(has(&l, "MODIFIED nodes/a3")); /* unchanged */
    gs_source_kube_stats(s, &st);
    assert_true(st.relists >= 1);
    assert_true(st.retries >= 1);
    /* The cache equals the server. */
    struct names mine = {0}, theirs = {0};
    assert_int_equal(gs_source_list(s, "nodes/", on_item, &mine, NULL), 0);
    on_server_item(e, &theirs);
    assert_int_equal(mine.n, theirs.n);
    for (int i = 0; i < mine.n; i++) assert_string_equal(mine.v[i], theirs.v[i]);
    json_t *a2 = NULL;
    assert_int_equal(gs_source_get(s, "nodes/a2", &a2, NULL), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(a2, "metadata"), "labels"),
                                                          "v")),
                        "new");
    json_decref(a2);
    gs_source_free(s);
    proxy_stop(p);
}

static int setup(void **state)
{
    struct gs_server_opts o = {.no_scheduler = true};
    return api_env_start(state, "/tmp/gs-infault-XXXXXX", tokens, false, o);
}

static void watches_end_with_bookmarks_and_resume(void **state)
{
    struct api_env *e = *state;
    struct gs_source *s = open_source(gs_server_port(e->srv), 1);
    int64_t cur = 0;
    struct names none = {0};
    assert_int_equal(gs_source_list(s, "nodes/", on_item, &none, &cur), 0);
    usleep(2600 * 1000); /* two or three watches of one second */
    make_node(e, "after-bookmarks");
    struct evlog l = {0};
    for (double end = now_s() + 5; now_s() < end && !has(&l, "ADDED nodes/after-bookmarks");) read_stream(s, &cur, 0.2, &l);
    assert_true(has(&l, "ADDED nodes/after-bookmarks"));
    struct gs_source_kube_stats st;
    gs_source_kube_stats(s, &st);
    assert_true(st.bookmarks >= 2);
    assert_true(st.watches >= 3);
    assert_int_equal(st.relists, 0); /* each watch went on from the bookmark */
    assert_int_equal(st.lists, 1);
    gs_source_free(s);
}

/* The fixture turns the rate limiter off; this server keeps it at 5/s. */
static int setup_limited(void **state)
{
    struct api_env *e = calloc(1, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/gs-infault-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    char tok[128];
    snprintf(tok, sizeof tok, "%s/tokens.csv", e->dir);
    FILE *f = fopen(tok, "w");
    fputs(tokens, f);
    fclose(f);
    struct gs_server_opts o = {.no_scheduler = true, .data_dir = e->dir, .listen = "127.0.0.1:0", .insecure = true,
                               .tokens_file = tok, .qps = 5, .burst = 5, .fail_qps = -1};
    struct gs_diags d = {0};
    assert_int_equal(gs_server_start(&o, &e->srv, &d), 0);
    e->adm = fx_client(e->srv, "adm");
    e->nod = fx_client(e->srv, "adm");
    *state = e;
    return 0;
}

static void rate_limited_requests_wait_retry_after(void **state)
{
    struct api_env *e = *state;
    struct gs_source *s = open_source(gs_server_port(e->srv), 0);
    double t0 = now_s();
    for (int i = 0; i < 15; i++) { /* not followed: each is a GET to the server */
        json_t *ns = NULL;
        assert_int_equal(gs_source_get(s, "namespaces/default", &ns, NULL), 0);
        json_decref(ns);
    }
    double took = now_s() - t0;
    struct gs_source_kube_stats st;
    gs_source_kube_stats(s, &st);
    assert_true(st.retries >= 1);
    if (took < 0.95) fail_msg("15 reads at 5/s took only %.2f s: Retry-After was not waited for", took);
    gs_source_free(s);
}

/*--- Random cuts: a consumer that follows the contract ends equal to the server ---*/

struct cutter {
    struct proxy *p;
    atomic_bool stop;
    unsigned seed;
    int cuts;
};

static void *cut_at_random(void *arg)
{
    struct cutter *c = arg;
    while (!atomic_load(&c->stop)) {
        usleep((useconds_t)(50 + rand_r(&c->seed) % 100) * 1000);
        proxy_set_down(c->p, true);
        c->cuts++;
        usleep((useconds_t)(20 + rand_r(&c->seed) % 60) * 1000);
        proxy_set_down(c->p, false);
    }
    return NULL;
}

/* What a control loop holds: per key the newest version taken, deletions kept as tombstones. */
struct replica {
    char key[64][32];
    int64_t rv[64];
    bool live[64];
    int n;
};

static void replica_apply(struct replica *r, const char *key, int64_t rv, bool live)
{
    int i = 0;
    while (i < r->n && strcmp(r->key[i], key)) i++;
    if (i == r->n) {
        assert_true(r->n < 64);
        snprintf(r->key[r->n++], sizeof r->key[0], "%s", key);
        r->rv[i] = 0;
    }
    if (rv <= r->rv[i]) return; /* seen already: told apart by version */
    r->rv[i] = rv;
    r->live[i] = live;
}

static int replica_list(const char *key, json_t *obj, void *arg)
{
    replica_apply(arg, key, gs_store_obj_rv(obj), true);
    return 0;
}

/* The live keys and versions of r equal the server's. */
static bool replica_equals_server(struct api_env *e, const struct replica *r, char *why, size_t len)
{
    json_t *list = NULL;
    assert_int_equal(gs_client_list(e->adm, R("nodes"), NULL, NULL, NULL, false, &list), 0);
    int live = 0;
    for (int i = 0; i < r->n; i++) live += r->live[i];
    bool same = (int)json_array_size(json_object_get(list, "items")) == live;
    snprintf(why, len, "%d live in the replica, %zu on the server", live, json_array_size(json_object_get(list, "items")));
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(list, "items"), i, it) {
        char key[64];
        snprintf(key, sizeof key, "nodes/%s", json_string_value(json_object_get(json_object_get(it, "metadata"), "name")));
        int j = 0;
        while (j < r->n && strcmp(r->key[j], key)) j++;
        if (j == r->n || !r->live[j] || r->rv[j] != gs_store_obj_rv(it)) {
            snprintf(why, len, "%s: replica %s at %lld, server at %lld", key, j == r->n ? "lacks it" : r->live[j] ? "has it" : "deleted it",
                     j == r->n ? 0LL : (long long)r->rv[j], (long long)gs_store_obj_rv(it));
            same = false;
            break;
        }
    }
    json_decref(list);
    return same;
}

static void random_cuts_lose_nothing(void **state)
{
    struct api_env *e = *state;
    struct proxy *p = proxy_start(gs_server_port(e->srv));
    struct gs_source *s = open_source(p->port, 0);
    struct replica rep = {0};
    int64_t cur = 0;
    assert_int_equal(gs_source_list(s, "nodes/", replica_list, &rep, &cur), 0);
    struct cutter c = {.p = p, .seed = 5};
    pthread_t th;
    pthread_create(&th, NULL, cut_at_random, &c);
    unsigned seed = 17;
    bool present[24] = {0};
    double end = now_s() + 3;
    for (int op = 0; now_s() < end; op++) {
        int k = (int)(rand_r(&seed) % 24);
        char name[16];
        snprintf(name, sizeof name, "r%d", k);
        if (!present[k]) make_node(e, name), present[k] = true;
        else if (rand_r(&seed) % 3) label_node(e, name, op % 2 ? "a" : "b");
        else assert_int_equal(gs_client_delete(e->adm, R("nodes"), NULL, name, NULL), 0), present[k] = false;
        /* the consumer reads as it goes, and lists again when it fell out of the ring */
        struct gs_store_event *evs = NULL;
        size_t n = 0;
        int err = gs_source_events(s, &cur, "nodes/", 0, NULL, &evs, &n);
        if (err == GS_ERANGE) assert_int_equal(gs_source_list(s, "nodes/", replica_list, &rep, &cur), 0);
        for (size_t i = 0; i < n; i++) replica_apply(&rep, evs[i].key, evs[i].rv, evs[i].type != GS_STORE_DELETED);
        gs_store_events_free(evs, n);
    }
    atomic_store(&c.stop, true);
    pthread_join(th, NULL);
    char why[256] = "";
    bool same = false;
    for (double until = now_s() + 30; !same && now_s() < until;) {
        struct gs_store_event *evs = NULL;
        size_t n = 0;
        assert_int_equal(gs_source_events(s, &cur, "nodes/", 200, NULL, &evs, &n), 0);
        for (size_t i = 0; i < n; i++) replica_apply(&rep, evs[i].key, evs[i].rv, evs[i].type != GS_STORE_DELETED);
        gs_store_events_free(evs, n);
        same = replica_equals_server(e, &rep, why, sizeof why);
    }
    struct gs_source_kube_stats st;
    gs_source_kube_stats(s, &st);
    print_message("%d cuts: %llu watches, %llu relists, %llu retries\n", c.cuts, (unsigned long long)st.watches,
                  (unsigned long long)st.relists, (unsigned long long)st.retries);
    if (!same) fail_msg("after %d cuts the replica differs from the server: %s", c.cuts, why);
    assert_true(c.cuts >= 10);
    assert_true(st.watches >= 5);
    gs_source_free(s);
    proxy_stop(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(cut_connection_relists_after_410, setup_small_ring, api_env_teardown),
        cmocka_unit_test_setup_teardown(random_cuts_lose_nothing, setup_small_ring, api_env_teardown),
        cmocka_unit_test_setup_teardown(watches_end_with_bookmarks_and_resume, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(rate_limited_requests_wait_retry_after, setup_limited, api_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
