/*
 * bench.c - `gpusched server --bench`: the control plane's numbers, measured
 * in one process over loopback HTTP with the library's own client.
 *
 *  1. pod creates/s: C client threads POST pods to a server without the scheduler;
 *  2. watch fan-out: W watchers on pods while pods are created; events
 *     delivered per second over all watchers, and the time until the last
 *     watcher has seen the last pod;
 *  3. end to end: N nodes, P pods created over HTTP by C clients, the
 *     in-server scheduler binding them through the store; pods bound per
 *     second from the first create to the last binding, each pod's time
 *     from its create being sent to its binding's commit (p50, p99), and
 *     the process's CPU time per pod (server and clients together: the
 *     steadier figure on a shared machine), and beside it the server's
 *     share: the same less the CPU of the benchmark's own threads (its
 *     HTTPS clients, the binding follower and the main thread, each timed
 *     by its thread CPU clock; named bench-client and bench-follow for
 *     perf and top), with the server's CPU by thread name; --runs N repeats
 *     it and prints the median;
 *  4. memory: 5,000 nodes and 50,000 pods written to the store and loaded by
 *     the scheduler; the process's resident set size, with the server's
 *     default change-stream ring (as `gpusched server` runs);
 *  5. scale (`--only scale`): a large cluster's numbers in one
 *     process - memory per node and per pod, the relist after a restart on
 *     the same data directory, and create to bound on that cluster.
 * --secure serves HTTPS with bearer tokens (as `gpusched server` does by
 * default) instead of plain HTTP without authentication; the load
 * generator then speaks TLS (GnuTLS, the server's CA) and sends the admin
 * token.
 * Each phase uses a fresh data directory under --dir (default /tmp).
 * With --store etcd --etcd-endpoints URL[,URL...] the server keeps its
 * objects in that etcd instead (bench/ha.py starts a cluster), each phase
 * under a fresh key prefix /gs-bench/<pid>-<n>, left behind for the
 * cluster's owner to drop.
 */
#include "control/apiserver.h"
#include "control/client.h"
#include "control/etcd.h"
#include "loops/sched_loop.h"
#include "control/server.h"
#include "core/log.h"
#include "sched/cache.h"

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <dirent.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int gs__server_bench(int argc, char **argv);

struct bopts {
    int nodes, pods, clients, watchers, rss_nodes, rss_pods;
    const char *dir;
    const char *only; /* one phase ("api", "e2e", "rss") or NULL for all */
    bool sync_full;
    bool curl; /* create with the library's libcurl client instead of the raw HTTP one */
    int runs;  /* end-to-end runs (the median is printed) */
    bool etcd; /* --store etcd */
    char **endpoints; /* --etcd-endpoints, parsed */
    size_t n_endpoints;
    bool secure; /* --secure: HTTPS and bearer tokens */
    int scale_nodes, scale_pods, scale_e2e_pods; /* the scale phase's cluster and its create-to-bound pods */
};

/* How the load generator reaches the server (one per server). */
struct target {
    const char *url;
    char auth[600];                       /* "Authorization: Bearer ...\r\n" or "" */
    gnutls_certificate_credentials_t tls; /* NULL: plain HTTP */
    const char *kubeconfig;               /* for the library's client (NULL: url alone) */
};

static int target_init(struct target *t, struct gs_server *s, const char *dir)
{
    *t = (struct target){.url = gs_server_url(s)};
    const char *tok = gs_server_admin_token(s);
    if (!strncmp(t->url, "http://", 7)) return 0;
    char ca[600];
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    if (gnutls_certificate_allocate_credentials(&t->tls) < 0) return -1;
    if (gnutls_certificate_set_x509_trust_file(t->tls, ca, GNUTLS_X509_FMT_PEM) <= 0) {
        fprintf(stderr, "gpusched server --bench: %s: no CA certificate to verify the server with\n", ca);
        gnutls_certificate_free_credentials(t->tls);
        t->tls = NULL;
        return -1;
    }
    if (tok) snprintf(t->auth, sizeof t->auth, "Authorization: Bearer %s\r\n", tok);
    t->kubeconfig = gs_server_kubeconfig(s);
    return 0;
}

static void target_free(struct target *t)
{
    if (t->tls) gnutls_certificate_free_credentials(t->tls);
    t->tls = NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* This thread's CPU seconds so far. */
static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* CPU seconds of the benchmark's own threads that ended (clients, the
 * binding follower), added by each as it ends: a thread that has exited
 * is gone from /proc/self/task, so its share is taken before. */
static _Atomic long long bench_thread_cpu_ns;

static void bench_thread_done(void)
{
    atomic_fetch_add(&bench_thread_cpu_ns, (long long)(thread_cpu_s() * 1e9));
}

/* CPU seconds (user + system) of the whole process so far: all threads, server and clients. */
static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

/* ring: change-stream events held (0: the server's default). The API and
 * end-to-end phases hold every change so no watcher has to relist mid-run. */
static struct gs_server *start_in(const struct bopts *b, const char *dir, bool sched, size_t ring);

static struct gs_server *start(const struct bopts *b, char *dir, size_t len, bool sched, size_t ring)
{
    snprintf(dir, len, "%s/gs-bench-XXXXXX", b->dir);
    if (!mkdtemp(dir)) return NULL;
    return start_in(b, dir, sched, ring);
}

/* Starts a server on dir as it is (a restart finds what the last one stored). */
static struct gs_server *start_in(const struct bopts *b, const char *dir, bool sched, size_t ring)
{
    struct gs_server_opts o = {.data_dir = dir, .listen = "127.0.0.1:0", .insecure = !b->secure,
                               .no_auth = !b->secure,
                               .no_scheduler = !sched, .qps = -1, .sync_full = b->sync_full,
                               .ring_events = ring};
    static int phase_no;
    char prefix[64];
    if (b->etcd) { /* a fresh prefix: no phase sees another's objects */
        snprintf(prefix, sizeof prefix, "/gs-bench/%ld-%d", (long)getpid(), ++phase_no);
        o.store_kind = GS_STORE_ETCD;
        o.etcd = (struct gs_store_etcd_opts){.endpoints = (const char *const *)b->endpoints,
                                             .n_endpoints = b->n_endpoints, .prefix = prefix,
                                             .compaction_interval_ms = -1};
    }
    struct gs_server *s = NULL;
    struct gs_diags d = {0};
    if (gs_server_start(&o, &s, &d))
        for (size_t i = 0; i < d.n; i++)
            fprintf(stderr, "gpusched server --bench: %s: %s\n", d.v[i].path, d.v[i].msg);
    gs_diags_free(&d);
    /* Pods are created only in an existing namespace. */
    json_t *ns = s ? json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata", "name", "bench")
                   : NULL;
    json_t *nsobj = NULL; /* a restart finds it stored */
    if (ns && gs_store_get(gs_server_store(s), "namespaces/bench", &nsobj, NULL) && !gs_apiserver_prepare_new(ns))
        gs_store_create(gs_server_store(s), "namespaces/bench", ns, NULL);
    json_decref(nsobj);
    json_decref(ns);
    return s;
}

static void stop(struct gs_server *s, const char *dir)
{
    gs_server_stop(s);
    nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

static json_t *pod(int i, int gpus)
{
    char name[32];
    snprintf(name, sizeof name, "p%d", i);
    json_t *p = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:[{s:s, s:s, s:{s:{s:s, s:s}}}]}}", "apiVersion", "v1",
                          "kind", "Pod", "metadata", "name", name, "namespace", "bench", "spec", "containers",
                          "name", "c", "image", "busybox", "resources", "requests", "cpu", "100m", "memory", "128Mi");
    if (gpus) {
        json_t *req = json_object_get(json_object_get(json_array_get(json_object_get(json_object_get(p, "spec"),
                                                                                      "containers"), 0), "resources"),
                                      "requests");
        json_object_set_new(req, "nvidia.com/gpu", json_integer(gpus));
        /* A 1/40 share of a GPU, so the 8-GPU nodes hold many pods each. */
        json_object_set_new(json_object_get(p, "metadata"), "annotations", json_pack("{s:s}", "gpusched.io/gpu-milli", "25"));
    }
    return p;
}

static json_t *node(int i, int gpus)
{
    char name[32];
    snprintf(name, sizeof name, "n%d", i);
    json_t *devs = json_array();
    for (int g = 0; g < gpus; g++) {
        char uuid[48];
        snprintf(uuid, sizeof uuid, "GPU-%d-%d", i, g);
        json_array_append_new(devs, json_pack("{s:i, s:s, s:s, s:i}", "index", g, "uuid", uuid, "model", "H100",
                                              "memoryMiB", 81920));
    }
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:s, s:s, s:s}, s:o}}", "apiVersion", "v1", "kind", "Node",
                     "metadata", "name", name, "status", "capacity", "cpu", "256", "memory", "2Ti", "pods", "1000",
                     "devices", devs);
}

/*--- Creating pods from C threads ---
 *
 * The load generator is a minimal HTTP/1.1 keep-alive client on a plain
 * socket, one connection per thread, one request in flight on each: it
 * writes a POST, reads the status line, the headers and Content-Length
 * bytes of body, and checks for 201. It runs in the server's process on the
 * same two cores, so it is kept cheap (no JSON decoding of the replies,
 * bodies formatted from a template); `--client curl` uses the library's
 * libcurl client instead (what `gpusched` commands use), to compare.
 */

struct creator {
    const struct target *t;
    int from, to, gpus, failures;
    bool curl;
    double *sent; /* per pod: when its create was sent (NULL: not kept) */
};

static int pod_body(char *buf, size_t len, int i, int gpus)
{
    if (gpus)
        return snprintf(buf, len,
                        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p%d\",\"namespace\":"
                        "\"bench\",\"annotations\":{\"gpusched.io/gpu-milli\":\"25\"}},\"spec\":{\"containers\":"
                        "[{\"name\":\"c\",\"image\":\"busybox\",\"resources\":{\"requests\":{\"cpu\":\"100m\","
                        "\"memory\":\"128Mi\",\"nvidia.com/gpu\":%d}}}]}}", i, gpus);
    return snprintf(buf, len,
                    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p%d\",\"namespace\":"
                    "\"bench\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\",\"resources\":"
                    "{\"requests\":{\"cpu\":\"100m\",\"memory\":\"128Mi\"}}}]}}", i);
}

/* One keep-alive connection, plain or TLS (the server's CA verified, the
 * handshake once per connection: the cost a real client pays). */
struct conn {
    int fd;
    gnutls_session_t tls; /* NULL: plain */
};

static void conn_close(struct conn *c)
{
    if (c->tls) gnutls_deinit(c->tls);
    if (c->fd >= 0) close(c->fd);
    *c = (struct conn){.fd = -1};
}

static int conn_open(struct conn *c, const struct target *t)
{
    *c = (struct conn){.fd = -1};
    const char *colon = strrchr(t->url, ':');
    int port = colon ? atoi(colon + 1) : 0;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a)) goto fail;
    if (!t->tls) return 0;
    if (gnutls_init(&c->tls, GNUTLS_CLIENT) < 0) {
        c->tls = NULL;
        goto fail;
    }
    if (gnutls_set_default_priority(c->tls) < 0 ||
        gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, t->tls) < 0)
        goto fail;
    gnutls_session_set_verify_cert(c->tls, "127.0.0.1", 0);
    gnutls_transport_set_int(c->tls, c->fd);
    int r;
    do r = gnutls_handshake(c->tls);
    while (r < 0 && !gnutls_error_is_fatal(r));
    if (r < 0) {
        fprintf(stderr, "gpusched server --bench: TLS handshake with %s: %s\n", t->url, gnutls_strerror(r));
        goto fail;
    }
    return 0;
fail:
    conn_close(c);
    return -1;
}

static int conn_write(struct conn *c, const char *p, size_t n)
{
    while (n) {
        ssize_t w = c->tls ? gnutls_record_send(c->tls, p, n) : send(c->fd, p, n, MSG_NOSIGNAL);
        if (c->tls && (w == GNUTLS_E_AGAIN || w == GNUTLS_E_INTERRUPTED)) continue;
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

static ssize_t conn_read(struct conn *c, char *buf, size_t cap)
{
    if (!c->tls) return recv(c->fd, buf, cap, 0);
    ssize_t r;
    do r = gnutls_record_recv(c->tls, buf, cap);
    while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
    return r;
}

/* Reads one response; returns its status code, or -1 when the connection failed. */
static int read_reply(struct conn *c, char *buf, size_t cap)
{
    size_t have = 0;
    char *eoh = NULL;
    while (!eoh) {
        if (have + 1 >= cap) return -1;
        ssize_t r = conn_read(c, buf + have, cap - 1 - have);
        if (r <= 0) return -1;
        have += (size_t)r;
        buf[have] = 0;
        eoh = strstr(buf, "\r\n\r\n");
    }
    int code = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1) return -1;
    const char *cl = strcasestr(buf, "\r\ncontent-length:");
    if (!cl || cl > eoh) return -1; /* the server answers with a length */
    size_t want = (size_t)strtoull(cl + 17, NULL, 10), got = have - (size_t)(eoh + 4 - buf);
    while (got < want) {
        ssize_t r = conn_read(c, buf, cap - 1);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return got == want ? code : -1; /* nothing is pipelined: more would be a framing error */
}

/* GET path on a fresh connection; its status code, or -1. */
static int get_status(const struct target *t, const char *path)
{
    struct conn c;
    char req[1024], reply[16384];
    if (conn_open(&c, t)) return -1;
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sAccept: */*\r\n\r\n", path, t->auth);
    int code = conn_write(&c, req, (size_t)n) ? -1 : read_reply(&c, reply, sizeof reply);
    conn_close(&c);
    return code;
}

static void create_raw(struct creator *c)
{
    struct conn k;
    int open = conn_open(&k, c->t);
    char req[2048], reply[16384];
    for (int i = c->from; i < c->to; i++) {
        char body[1024];
        int bn = pod_body(body, sizeof body, i, c->gpus);
        int n = snprintf(req, sizeof req, "POST /api/v1/namespaces/bench/pods HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
                         "Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: %d\r\n\r\n%s",
                         c->t->auth, bn, body);
        if (c->sent) c->sent[i] = now_s();
        if (open || conn_write(&k, req, (size_t)n) || read_reply(&k, reply, sizeof reply) != 201) {
            c->failures++;
            conn_close(&k);
            open = conn_open(&k, c->t); /* a fresh connection for the next one */
        }
    }
    conn_close(&k);
}

static void create_curl(struct creator *c)
{
    struct gs_client_opts o = {.server = c->t->kubeconfig ? NULL : c->t->url, .kubeconfig = c->t->kubeconfig};
    struct gs_client *cl = NULL;
    struct gs_diags d = {0};
    if (gs_client_new(&o, &cl, &d)) {
        c->failures = c->to - c->from;
        gs_diags_free(&d);
        return;
    }
    const struct gs_api_resource *pods = gs_api_resource_lookup("pods");
    for (int i = c->from; i < c->to; i++) {
        json_t *p = pod(i, c->gpus);
        if (c->sent) c->sent[i] = now_s();
        if (gs_client_create(cl, pods, "bench", p, NULL)) c->failures++;
        json_decref(p);
    }
    gs_client_free(cl);
}

static void *create_pods(void *arg)
{
    struct creator *c = arg;
    pthread_setname_np(pthread_self(), "bench-client");
    if (c->curl) create_curl(c);
    else create_raw(c);
    bench_thread_done();
    return NULL;
}

/* Creates pods [0, n) with `clients` threads; returns the seconds taken. */
static double create_all(const struct bopts *b, const struct target *url, int n, int gpus, double *sent,
                         int *failures)
{
    pthread_t th[64];
    struct creator cr[64];
    int clients = b->clients > 64 ? 64 : b->clients;
    double t0 = now_s();
    for (int i = 0; i < clients; i++) {
        cr[i] = (struct creator){url, n * i / clients, n * (i + 1) / clients, gpus, 0, b->curl, sent};
        pthread_create(&th[i], NULL, create_pods, &cr[i]);
    }
    *failures = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(th[i], NULL);
        *failures += cr[i].failures;
    }
    return now_s() - t0;
}

/*--- Watchers ---*/

struct watcher {
    const struct target *t;
    char from[32]; /* the seed's version: etcd's revisions do not start at 1 */
    int want;
    atomic_int seen;
    double done_at;
};

static int on_event(const char *type, json_t *obj, void *arg)
{
    (void)obj;
    struct watcher *w = arg;
    if (!strcmp(type, "ADDED") && atomic_fetch_add(&w->seen, 1) + 1 >= w->want) {
        w->done_at = now_s();
        return 1;
    }
    return 0;
}

static void *watch_pods(void *arg)
{
    struct watcher *w = arg;
    struct gs_client_opts o = {.server = w->t->kubeconfig ? NULL : w->t->url, .kubeconfig = w->t->kubeconfig};
    struct gs_client *cl = NULL;
    struct gs_diags d = {0};
    if (gs_client_new(&o, &cl, &d) == 0) {
        gs_client_watch(cl, gs_api_resource_lookup("pods"), NULL, NULL, NULL, w->from, 120, on_event, w);
        gs_client_free(cl);
    }
    gs_diags_free(&d);
    return NULL;
}

static void phase_api(const struct bopts *b)
{
    char dir[512];
    struct gs_server *s = start(b, dir, sizeof dir, false, 200000);
    if (!s) return;
    int fail = 0;
    struct target tg;
    if (target_init(&tg, s, dir)) {
        stop(s, dir);
        return;
    }
    double t = create_all(b, &tg, b->pods, 0, NULL, &fail);
    printf("creates      %d pods, %d clients (%s%s): %.0f pods/s (%d failed)\n", b->pods, b->clients,
           b->curl ? "libcurl" : "raw HTTP", tg.tls ? ", TLS + token" : "", b->pods / t, fail);
    target_free(&tg);
    stop(s, dir);

    s = start(b, dir, sizeof dir, false, 200000);
    if (!s) return;
    if (target_init(&tg, s, dir)) {
        stop(s, dir);
        return;
    }
    int nw = b->watchers > 256 ? 256 : b->watchers;
    struct watcher *w = calloc((size_t)nw, sizeof *w);
    pthread_t *th = calloc((size_t)nw, sizeof *th);
    /* A first object gives the watchers a version to start after. */
    struct gs_store *st = gs_server_store(s);
    json_t *seed = json_pack("{s:s}", "kind", "Seed");
    int64_t seed_rv = 1;
    gs_store_create(st, "seeds/x", seed, &seed_rv);
    json_decref(seed);
    for (int i = 0; i < nw; i++) {
        w[i].t = &tg;
        snprintf(w[i].from, sizeof w[i].from, "%lld", (long long)seed_rv);
        w[i].want = b->pods;
        pthread_create(&th[i], NULL, watch_pods, &w[i]);
    }
    usleep(300000);
    double t0 = now_s();
    create_all(b, &tg, b->pods, 0, NULL, &fail);
    double last = t0;
    long total = 0;
    for (int i = 0; i < nw; i++) {
        pthread_join(th[i], NULL);
        total += atomic_load(&w[i].seen);
        if (w[i].done_at > last) last = w[i].done_at;
    }
    printf("watch        %d watchers x %d pods: %ld events in %.2f s = %.0f events/s delivered\n", nw, b->pods, total,
           last - t0, total / (last - t0));
    free(w);
    free(th);
    target_free(&tg);
    stop(s, dir);
}

/* Waits until want pods are bound, limit_s passes, or stall_s pass without progress. */
static void wait_bound(struct gs_server *s, uint64_t want, double limit_s, double stall_s)
{
    struct gs_sched_loop_stats st;
    double t0 = now_s(), progress = t0;
    uint64_t last = 0;
    do {
        usleep(2000);
        gs_server_sched_stats(s, &st);
        if (st.bound != last) last = st.bound, progress = now_s();
    } while (st.bound < want && now_s() - t0 < limit_s && now_s() - progress < stall_s);
}

/* Follows the store's change stream in-process (no HTTP, so it costs the
 * server nothing but copies of the events) and notes when each pod's
 * binding was committed: its first MODIFIED event with a nodeName. */
struct binds {
    struct gs_store *st;
    int64_t after;
    int pods;
    atomic_int want;
    double *bound; /* per pod: when its binding was seen; 0 = not yet */
    int nbound;
    double last;
    double stall_s; /* give up after this long without a new binding */
};

static void *follow_binds(void *arg)
{
    struct binds *f = arg;
    pthread_setname_np(pthread_self(), "bench-follow");
    double progress = now_s(), t0 = progress;
    while (f->nbound < atomic_load(&f->want) && now_s() - progress < f->stall_s && now_s() - t0 < 600) {
        struct gs_store_event *ev = NULL;
        size_t n = 0;
        if (gs_store_events(f->st, &f->after, "pods/bench/p", 100, NULL, &ev, &n)) break;
        double t = now_s();
        for (size_t i = 0; i < n; i++) {
            int idx = atoi(ev[i].key + strlen("pods/bench/p"));
            if (ev[i].type != GS_STORE_MODIFIED || idx < 0 || idx >= f->pods || f->bound[idx] > 0 ||
                !strstr(ev[i].value, "\"nodeName\":"))
                continue;
            f->bound[idx] = t;
            f->nbound++;
            f->last = t;
            progress = t;
        }
        gs_store_events_free(ev, n);
    }
    bench_thread_done();
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Writes n 8-GPU nodes straight into the store (no HTTP: not what is measured). */
static void store_nodes(struct gs_store *st, int n)
{
    for (int i = 0; i < n; i++) {
        json_t *node_obj = node(i, 8);
        char key[64];
        snprintf(key, sizeof key, "nodes/n%d", i);
        gs_apiserver_prepare_new(node_obj);
        gs_store_create(st, key, node_obj, NULL);
        json_decref(node_obj);
    }
}

/* CPU seconds by thread name of the live threads (/proc/self/task/<tid>/stat,
 * utime + stime): a JSON object name -> seconds; NULL when unreadable. */
static json_t *cpu_by_name(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return NULL;
    json_t *o = json_object();
    long hz = sysconf(_SC_CLK_TCK);
    struct dirent *e;
    while (o && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        unsigned long long ut = 0, st = 0;
        /* after "(comm) ": state, then fields 4..13, then utime (14) and stime (15) */
        if (!open || !close || close < open ||
            sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
            continue;
        *close = 0;
        const char *name = open + 1;
        double sec = (double)(ut + st) / (double)hz;
        json_object_set_new(o, name, json_real(json_real_value(json_object_get(o, name)) + sec));
    }
    closedir(d);
    return o;
}

/* The server's CPU by thread name, "name ms, ..." per pod: what each live
 * name used between before and after (the main thread, named as the
 * process, less main_s: it is the benchmark's), and what the server used
 * in threads that ended meanwhile (the API's connection threads,
 * libmicrohttpd's MHD-connection, end with their connections). Ticks of 10 ms:
 * a coarse view. */
static void cpu_names_text(const json_t *before, const json_t *after, const char *main_name, double main_s,
                           double server_s, int pods, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    double live = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)after, k, v) {
        double d = json_real_value(v) - json_real_value(json_object_get(before, k));
        if (!strcmp(k, main_name)) d -= main_s;
        if (!strncmp(k, "bench-", 6) || d <= 0 || at >= len) continue;
        live += d;
        int w = snprintf(buf + at, len - at, "%s%s %.3f", at ? ", " : "", k, d * 1e3 / pods);
        if (w > 0) at += (size_t)w;
    }
    if (at < len)
        snprintf(buf + at, len - at, "%sthreads ended since %.3f", at ? ", " : "",
                 (server_s - live > 0 ? server_s - live : 0) * 1e3 / pods);
}

struct e2e_result {
    double rate;      /* pods bound per second, first create to last binding */
    double cpu_ms;    /* process CPU per pod */
    double server_cpu_ms; /* cpu_ms less the benchmark's own threads */
    double p50, p99;  /* create to bound, ms */
    int bound, failed;
};

/* Creates n 1/40-GPU pods over HTTP(S) on s (its nodes stored already) and
 * follows their bindings; prints one line and fills *r. 0, or -1 when the
 * run could not be set up. */
static int measure_e2e(const struct bopts *b, struct gs_server *s, const char *dir, int nodes, int n,
                       struct e2e_result *r)
{
    *r = (struct e2e_result){0};
    struct gs_store *st = gs_server_store(s);
    struct target tg;
    if (target_init(&tg, s, dir)) return -1;
    double *sent = calloc((size_t)n, sizeof *sent);
    struct binds f = {.st = st, .after = gs_store_current_rv(st), .pods = n,
                      .bound = calloc((size_t)n, sizeof(double)), .stall_s = nodes > 5000 ? 60 : 10};
    atomic_store(&f.want, n);
    pthread_t th;
    if (!sent || !f.bound || pthread_create(&th, NULL, follow_binds, &f)) {
        free(sent);
        free(f.bound);
        target_free(&tg);
        return -1;
    }
    int fail = 0;
    struct gs_sched_loop_stats ss0, ss;
    gs_server_sched_stats(s, &ss0);
    json_t *names0 = cpu_by_name();
    double t0 = now_s(), c0 = cpu_s(), m0 = thread_cpu_s();
    long long b0 = atomic_load(&bench_thread_cpu_ns);
    double tc = create_all(b, &tg, n, 1, sent, &fail);
    atomic_store(&f.want, n - fail);
    pthread_join(th, NULL);
    wait_bound(s, ss0.bound + (uint64_t)(n - fail), 30, 10); /* the loop's own count, to cross-check */
    gs_server_sched_stats(s, &ss);
    double t = (f.nbound ? f.last : now_s()) - t0, cpu = cpu_s() - c0;
    double main_cpu = thread_cpu_s() - m0;
    double bench_cpu = (double)(atomic_load(&bench_thread_cpu_ns) - b0) / 1e9 + main_cpu;
    json_t *names1 = cpu_by_name();
    char by_name[512] = "";
    if (names0 && names1) {
        char main_name[32] = ""; /* this thread's: the process's name, which the server's threads inherit */
        pthread_getname_np(pthread_self(), main_name, sizeof main_name);
        cpu_names_text(names0, names1, main_name, main_cpu, cpu - bench_cpu, n, by_name, sizeof by_name);
    }
    json_decref(names0);
    json_decref(names1);
    double *lat = calloc((size_t)n + 1, sizeof *lat);
    size_t nl = 0;
    for (int i = 0; lat && i < n; i++)
        if (f.bound[i] > 0 && sent[i] > 0) lat[nl++] = (f.bound[i] - sent[i]) * 1e3;
    if (lat) qsort(lat, nl, sizeof *lat, cmp_double);
    r->p50 = nl ? lat[nl / 2] : 0, r->p99 = nl ? lat[nl * 99 / 100] : 0;
    r->bound = f.nbound, r->failed = fail, r->cpu_ms = cpu * 1e3 / n;
    r->server_cpu_ms = (cpu - bench_cpu) * 1e3 / n;
    r->rate = f.nbound == n - fail && !fail ? f.nbound / t : 0;
    printf("end to end   %d nodes x 8 GPUs, %d 1/40-GPU pods over %s (%s): %d bound in %.2f s = %.0f pods/s "
           "(create to binding); creates %.0f/s (%d failed); create to bound p50 %.0f ms, p99 %.0f ms; "
           "CPU %.3f ms per pod (all threads); scheduler counted %llu bound\n"
           "             server threads %.3f ms of CPU per pod (the benchmark's clients, follower and main thread, "
           "%.3f, left out); by thread name, ms per pod: %s\n", nodes, n,
           tg.tls ? "HTTPS with a bearer token" : "HTTP", b->curl ? "libcurl" : "raw HTTP", f.nbound, t,
           f.nbound / t, n / tc, fail, r->p50, r->p99, r->cpu_ms, (unsigned long long)(ss.bound - ss0.bound),
           r->server_cpu_ms, bench_cpu * 1e3 / n, by_name);
    fflush(stdout);
    free(lat);
    free(sent);
    free(f.bound);
    target_free(&tg);
    return 0;
}

/* One end-to-end run; returns its create-to-binding rate (0 when it failed). */
static double run_e2e(const struct bopts *b)
{
    char dir[512];
    struct gs_server *s = start(b, dir, sizeof dir, true, 200000);
    if (!s) return 0;
    store_nodes(gs_server_store(s), b->nodes);
    usleep(200000);
    struct e2e_result r;
    int e = measure_e2e(b, s, dir, b->nodes, b->pods, &r);
    stop(s, dir);
    return e ? 0 : r.rate;
}

static void phase_e2e(const struct bopts *b)
{
    int runs = b->runs > 0 ? (b->runs > 15 ? 15 : b->runs) : 1;
    double rate[15];
    for (int i = 0; i < runs; i++) rate[i] = run_e2e(b);
    if (runs < 2) return;
    qsort(rate, (size_t)runs, sizeof *rate, cmp_double);
    printf("end to end   median of %d runs: %.0f pods/s (min %.0f, max %.0f; 0 = a run lost pods)\n", runs,
           rate[runs / 2], rate[0], rate[runs - 1]);
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = atol(line + 6);
    if (f) fclose(f);
    return kib;
}

static void phase_rss(const struct bopts *b)
{
    char dir[512];
    long before = rss_kib();
    struct gs_server *s = start(b, dir, sizeof dir, true, 0);
    if (!s) return;
    struct gs_store *st = gs_server_store(s);
    double t0 = now_s();
    store_nodes(st, b->rss_nodes);
    for (int i = 0; i < b->rss_pods; i++) {
        json_t *p = pod(i, 0);
        char key[64];
        snprintf(key, sizeof key, "pods/bench/p%d", i);
        gs_apiserver_prepare_new(p);
        gs_store_create(st, key, p, NULL);
        json_decref(p);
    }
    /* A scheduler that fell behind the 10,000-event ring reloads everything
     * (tens of seconds at this size on a loaded machine) before it binds again. */
    wait_bound(s, (uint64_t)b->rss_pods, 600, 90);
    struct gs_sched_loop_stats ss;
    gs_server_sched_stats(s, &ss);
    printf("memory       %d nodes + %d pods stored and scheduled (%llu bound) in %.1f s: RSS %.0f MiB "
           "(process before the server: %.0f MiB)\n", b->rss_nodes, b->rss_pods, (unsigned long long)ss.bound,
           now_s() - t0, rss_kib() / 1024.0, before / 1024.0);
    stop(s, dir);
}

/*--- Scale ---
 *
 * One cluster of scale_nodes 8-GPU nodes and scale_pods running pods (bound
 * already: spec.nodeName set, 100m CPU each, no GPU, so they fill no node),
 * written straight into the store in batches (the load is not what is
 * measured). The phase prints:
 *   - memory: RSS after the server started, after the nodes, after the pods,
 *     each step waited out until the scheduler's cache holds them; per node
 *     and per pod the deltas (whole process: the scheduler's cache, the
 *     change-stream ring, SQLite's page cache, malloc's free lists);
 *   - relist: the server stopped and started on the same data directory;
 *     seconds until gs_server_start returned, until /readyz answered 200
 *     over the server's own transport, and until the scheduler's cache held
 *     every node and pod;
 *   - create to bound on that cluster: scale_e2e_pods new 1/40-GPU pods over
 *     HTTP(S) as the end-to-end phase does;
 *   - peak RSS (VmHWM) of the whole run.
 * The last line, "scale-result k=v ...", is for bench/scale.sh. */

struct cache_count {
    int32_t nodes;
    int64_t pods;
};

static void count_cache(struct gs_cache *c, void *arg)
{
    struct cache_count *k = arg;
    k->nodes = gs_cache_live_nodes(c);
    k->pods = 0;
    for (int32_t i = 0; i < gs_cache_node_count(c); i++) {
        const struct gs_node_info *n = gs_cache_node(c, i);
        if (n->live) k->pods += n->npods;
    }
}

/* Waits until the scheduler's cache holds nodes nodes and pods pods (limit_s
 * at most); the seconds waited, or -1 on timeout. */
static double wait_cache(struct gs_server *s, int32_t nodes, int64_t pods, double limit_s)
{
    struct gs_sched_loop *l = gs_server_sched_loop(s);
    double t0 = now_s();
    while (l && now_s() - t0 < limit_s) {
        struct gs_sched_loop_stats st;
        struct cache_count k = {0};
        gs_server_sched_stats(s, &st);
        if (st.synced && !gs_sched_loop_inspect(l, count_cache, &k) && k.nodes >= nodes && k.pods >= pods)
            return now_s() - t0;
        usleep(20000);
    }
    return -1;
}

static int put_new(json_t *cur, json_t **out, void *arg)
{
    if (cur) return GS_EEXIST;
    *out = json_incref(arg);
    return 0;
}

/* Writes objects [0, n) made by mk under key pattern fmt, 1,000 per commit. */
static int store_batched(struct gs_store *st, const char *fmt, int n, int nodes, json_t *(*mk)(int i, int nodes))
{
    enum { BATCH = 1000 };
    struct gs_store_mut m[BATCH];
    char keys[BATCH][64];
    for (int from = 0; from < n; from += BATCH) {
        int k = n - from < BATCH ? n - from : BATCH;
        for (int j = 0; j < k; j++) {
            json_t *o = mk(from + j, nodes);
            gs_apiserver_prepare_new(o);
            snprintf(keys[j], sizeof keys[j], fmt, from + j);
            m[j] = (struct gs_store_mut){.key = keys[j], .fn = put_new, .arg = o};
        }
        int e = gs_store_mutate_batch(st, m, (size_t)k);
        for (int j = 0; j < k; j++) {
            if (!e && m[j].err) e = m[j].err;
            json_decref(m[j].out);
            json_decref(m[j].arg);
        }
        if (e) {
            fprintf(stderr, "gpusched server --bench: writing %s (from %d): %s\n", fmt, from, gs_strerror(e));
            return e;
        }
    }
    return 0;
}

static json_t *mk_node(int i, int nodes)
{
    (void)nodes;
    return node(i, 8);
}

static json_t *mk_running(int i, int nodes)
{
    json_t *p = pod(i, 0);
    char name[32], host[32];
    snprintf(name, sizeof name, "r%d", i); /* not p%d: the create-to-bound pods' names */
    snprintf(host, sizeof host, "n%d", i % nodes);
    json_object_set_new(json_object_get(p, "metadata"), "name", json_string(name));
    json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string(host));
    json_object_set_new(p, "status", json_pack("{s:s}", "phase", "Running"));
    return p;
}

static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long kib = -1;
    size_t fl = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl)) kib = atol(line + fl);
    if (f) fclose(f);
    return kib;
}

static void phase_scale(const struct bopts *b)
{
    char dir[512];
    int N = b->scale_nodes, P = b->scale_pods;
    long rss0 = status_kib("VmRSS:");
    struct gs_server *s = start(b, dir, sizeof dir, true, 0);
    if (!s) return;
    double limit = 600 + (N + P) / 500.0; /* generous: a loaded 2-core box */
    long rss_start = status_kib("VmRSS:");
    double t0 = now_s();
    int e = store_batched(gs_server_store(s), "nodes/n%d", N, N, mk_node);
    double w_nodes = e ? -1 : wait_cache(s, N, 0, limit);
    long rss_nodes = status_kib("VmRSS:");
    double t_nodes = now_s() - t0;
    t0 = now_s();
    if (!e && w_nodes >= 0) e = store_batched(gs_server_store(s), "pods/bench/r%d", P, N, mk_running);
    double w_pods = e || w_nodes < 0 ? -1 : wait_cache(s, N, P, limit);
    long rss_pods = status_kib("VmRSS:");
    double t_pods = now_s() - t0;
    printf("scale load   %d nodes in %.1f s, %d running pods in %.1f s (scheduler cache %s); RSS %.0f MiB before "
           "the server, %.0f started, %.0f with nodes, %.0f with pods\n", N, t_nodes, P, t_pods,
           w_pods >= 0 ? "holds them" : "did NOT catch up", rss0 / 1024.0, rss_start / 1024.0, rss_nodes / 1024.0,
           rss_pods / 1024.0);
    fflush(stdout);
    if (e || w_pods < 0) {
        stop(s, dir);
        return;
    }
    gs_server_stop(s);

    /* The restart: everything comes back from the data directory. */
    t0 = now_s();
    s = start_in(b, dir, true, 0);
    if (!s) {
        nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
        return;
    }
    double t_open = now_s() - t0;
    struct target tg; /* /readyz first: it does not wait for the scheduler's cache */
    double t_ready = -1;
    if (!target_init(&tg, s, dir)) {
        while (now_s() - t0 < limit && get_status(&tg, "/readyz") != 200) usleep(20000);
        t_ready = now_s() - t0;
        target_free(&tg);
    }
    double w = wait_cache(s, N, P, limit);
    double t_cache = w < 0 ? -1 : now_s() - t0;
    long rss_restart = status_kib("VmRSS:");
    printf("relist       restart on the same data: server started in %.2f s, scheduler cache holds %d nodes + %d "
           "pods after %.2f s, /readyz 200 after %.2f s; RSS %.0f MiB\n", t_open, N, P, t_cache, t_ready,
           rss_restart / 1024.0);
    fflush(stdout);

    struct e2e_result r = {0};
    if (t_cache >= 0) measure_e2e(b, s, dir, N, b->scale_e2e_pods, &r);
    long hwm = status_kib("VmHWM:");
    printf("scale-result nodes=%d pods=%d secure=%d rss_start_mib=%.1f rss_nodes_mib=%.1f rss_pods_mib=%.1f "
           "bytes_per_node=%.0f bytes_per_pod=%.0f load_nodes_s=%.2f load_pods_s=%.2f restart_open_s=%.3f "
           "relist_s=%.3f ready_s=%.3f e2e_pods=%d e2e_pods_per_s=%.0f e2e_cpu_ms_per_pod=%.3f e2e_server_cpu_ms_per_pod=%.3f e2e_p50_ms=%.1f "
           "e2e_p99_ms=%.1f peak_rss_mib=%.1f\n", N, P, b->secure, rss_start / 1024.0, rss_nodes / 1024.0,
           rss_pods / 1024.0, N ? (rss_nodes - rss_start) * 1024.0 / N : 0, P ? (rss_pods - rss_nodes) * 1024.0 / P : 0,
           t_nodes, t_pods, t_open, t_cache, t_ready, b->scale_e2e_pods, r.rate, r.cpu_ms, r.server_cpu_ms, r.p50, r.p99,
           hwm / 1024.0);
    fflush(stdout);
    stop(s, dir);
}

int gs__server_bench(int argc, char **argv)
{
    struct bopts b = {.nodes = 100, .pods = 20000, .clients = 8, .watchers = 50, .rss_nodes = 5000,
                      .rss_pods = 50000, .dir = "/tmp",
                      .scale_nodes = 50000, .scale_pods = 500000, .scale_e2e_pods = 50000};
    static const struct option opts[] = {
        {"bench", no_argument, 0, 'B'},        {"nodes", required_argument, 0, 'n'},
        {"pods", required_argument, 0, 'p'},   {"clients", required_argument, 0, 'c'},
        {"watchers", required_argument, 0, 'w'}, {"rss-nodes", required_argument, 0, 'N'},
        {"rss-pods", required_argument, 0, 'P'}, {"dir", required_argument, 0, 'd'},
        {"sync", required_argument, 0, 's'},   {"only", required_argument, 0, 'o'},
        {"client", required_argument, 0, 'C'}, {"runs", required_argument, 0, 'r'},
        {"store", required_argument, 0, 'S'},  {"etcd-endpoints", required_argument, 0, 'E'},
        {"secure", no_argument, 0, 'T'},       {"scale-nodes", required_argument, 0, '1'},
        {"scale-pods", required_argument, 0, '2'}, {"scale-e2e-pods", required_argument, 0, '3'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'B': break;
        case 'n': b.nodes = atoi(optarg); break;
        case 'p': b.pods = atoi(optarg); break;
        case 'c': b.clients = atoi(optarg); break;
        case 'w': b.watchers = atoi(optarg); break;
        case 'N': b.rss_nodes = atoi(optarg); break;
        case 'P': b.rss_pods = atoi(optarg); break;
        case 'd': b.dir = optarg; break;
        case 's': b.sync_full = !strcmp(optarg, "full"); break;
        case 'o': b.only = optarg; break;
        case 'C':
            if (strcmp(optarg, "raw") && strcmp(optarg, "curl")) {
                fprintf(stderr, "gpusched server --bench: --client %s: want raw or curl\n", optarg);
                return 2;
            }
            b.curl = !strcmp(optarg, "curl");
            break;
        case 'r': b.runs = atoi(optarg); break;
        case 'T': b.secure = true; break;
        case '1':
        case '2':
        case '3': {
            char *end = NULL;
            long v = strtol(optarg, &end, 10);
            const char *name = ch == '1' ? "--scale-nodes" : ch == '2' ? "--scale-pods" : "--scale-e2e-pods";
            if (!*optarg || *end || v < (ch == '2' ? 0 : 1) || v > 10000000) {
                fprintf(stderr, "gpusched server --bench: %s \"%s\": want a whole number from %d to 10000000\n",
                        name, optarg, ch == '2' ? 0 : 1);
                return 2;
            }
            *(ch == '1' ? &b.scale_nodes : ch == '2' ? &b.scale_pods : &b.scale_e2e_pods) = (int)v;
            break;
        }
        case 'S':
            if (strcmp(optarg, "sqlite") && strcmp(optarg, "etcd")) {
                fprintf(stderr, "gpusched server --bench: --store \"%s\": want sqlite or etcd\n", optarg);
                return 2;
            }
            b.etcd = !strcmp(optarg, "etcd");
            break;
        case 'E': {
            char why[256];
            gs_etcd_endpoints_free(b.endpoints, b.n_endpoints);
            b.endpoints = NULL, b.n_endpoints = 0;
            if (gs_etcd_endpoints_parse(optarg, &b.endpoints, &b.n_endpoints, why, sizeof why)) {
                fprintf(stderr, "gpusched server --bench: --etcd-endpoints \"%s\": %s\n", optarg, why);
                return 2;
            }
            break;
        }
        case 'h':
            printf("usage: gpusched server --bench [--nodes 100] [--pods 20000] [--clients 8] [--watchers 50]\n"
                   "       [--rss-nodes 5000] [--rss-pods 50000] [--dir /tmp] [--sync normal|full]\n"
                   "       [--only api|e2e|rss|scale] [--client raw|curl] [--runs 1] [--secure]\n"
                   "       [--scale-nodes 50000] [--scale-pods 500000] [--scale-e2e-pods 50000]\n"
                   "       [--store sqlite|etcd --etcd-endpoints URL[,URL...]]\n");
            gs_etcd_endpoints_free(b.endpoints, b.n_endpoints);
            return 0;
        default: gs_etcd_endpoints_free(b.endpoints, b.n_endpoints); return 2;
        }
    }
    if (b.etcd != (b.n_endpoints > 0)) {
        fprintf(stderr, "gpusched server --bench: %s\n", b.etcd ? "--store etcd needs --etcd-endpoints URL[,URL...]"
                                                              : "--etcd-endpoints is for --store etcd");
        gs_etcd_endpoints_free(b.endpoints, b.n_endpoints);
        return 2;
    }
    gs_log_set_level(GS_LOG_WARN);
    if (b.only && strcmp(b.only, "api") && strcmp(b.only, "e2e") && strcmp(b.only, "rss") && strcmp(b.only, "scale")) {
        fprintf(stderr, "gpusched server --bench: --only \"%s\": want api, e2e, rss or scale\n", b.only);
        gs_etcd_endpoints_free(b.endpoints, b.n_endpoints);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* each result as it comes, also into a file */
    printf("gpusched server --bench (%s%s)\n", b.etcd ? "store etcd" : b.sync_full ? "sync=full" : "sync=normal",
           b.secure ? ", HTTPS + bearer tokens" : ", plain HTTP, no authentication");
    bool all = !b.only;
    if (all || !strcmp(b.only, "api")) phase_api(&b);
    if (all || !strcmp(b.only, "e2e")) phase_e2e(&b);
    if (b.rss_nodes > 0 && (all || !strcmp(b.only, "rss"))) phase_rss(&b);
    if (b.only && !strcmp(b.only, "scale")) phase_scale(&b); /* minutes at its default size: only when asked */
    gs_etcd_endpoints_free(b.endpoints, b.n_endpoints);
    return 0;
}
