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
 *     second from the first create to the last binding;
 *  4. memory: 5,000 nodes and 50,000 pods written to the store and loaded by
 *     the scheduler; the process's resident set size, with the server's
 *     default change-stream ring (as `gpusched server` runs).
 * Each phase uses a fresh data directory under --dir (default /tmp).
 */
#include "control/apiserver.h"
#include "control/client.h"
#include "control/sched_loop.h"
#include "control/server.h"
#include "core/log.h"

#include <ftw.h>
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
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

/* ring: change-stream events held (0: the server's default). The API and
 * end-to-end phases hold every change so no watcher has to relist mid-run. */
static struct gs_server *start(const struct bopts *b, char *dir, size_t len, bool sched, size_t ring)
{
    snprintf(dir, len, "%s/gs-bench-XXXXXX", b->dir);
    if (!mkdtemp(dir)) return NULL;
    struct gs_server_opts o = {.data_dir = dir, .listen = "127.0.0.1:0", .insecure = true, .no_auth = true,
                               .no_scheduler = !sched, .qps = -1, .sync_full = b->sync_full,
                               .ring_events = ring};
    struct gs_server *s = NULL;
    struct gs_diags d = {0};
    gs_server_start(&o, &s, &d);
    gs_diags_free(&d);
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

/*--- Creating pods from C threads ---*/

struct creator {
    const char *url;
    int from, to, gpus, failures;
};

static void *create_pods(void *arg)
{
    struct creator *c = arg;
    struct gs_client_opts o = {.server = c->url};
    struct gs_client *cl = NULL;
    struct gs_diags d = {0};
    if (gs_client_new(&o, &cl, &d)) {
        c->failures = c->to - c->from;
        gs_diags_free(&d);
        return NULL;
    }
    const struct gs_api_resource *pods = gs_api_resource_lookup("pods");
    for (int i = c->from; i < c->to; i++) {
        json_t *p = pod(i, c->gpus);
        if (gs_client_create(cl, pods, "bench", p, NULL)) c->failures++;
        json_decref(p);
    }
    gs_client_free(cl);
    return NULL;
}

/* Creates pods [0, n) with `clients` threads; returns the seconds taken. */
static double create_all(const char *url, int n, int clients, int gpus, int *failures)
{
    pthread_t th[64];
    struct creator cr[64];
    if (clients > 64) clients = 64;
    double t0 = now_s();
    for (int i = 0; i < clients; i++) {
        cr[i] = (struct creator){url, n * i / clients, n * (i + 1) / clients, gpus, 0};
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
    const char *url;
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
    struct gs_client_opts o = {.server = w->url};
    struct gs_client *cl = NULL;
    struct gs_diags d = {0};
    if (gs_client_new(&o, &cl, &d) == 0) {
        gs_client_watch(cl, gs_api_resource_lookup("pods"), NULL, NULL, NULL, "1", 120, on_event, w);
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
    double t = create_all(gs_server_url(s), b->pods, b->clients, 0, &fail);
    printf("creates      %d pods, %d clients: %.0f pods/s (%d failed)\n", b->pods, b->clients, b->pods / t, fail);
    stop(s, dir);

    s = start(b, dir, sizeof dir, false, 200000);
    if (!s) return;
    int nw = b->watchers > 256 ? 256 : b->watchers;
    struct watcher *w = calloc((size_t)nw, sizeof *w);
    pthread_t *th = calloc((size_t)nw, sizeof *th);
    /* A first object gives the watchers a version to start after. */
    struct gs_store *st = gs_server_store(s);
    json_t *seed = json_pack("{s:s}", "kind", "Seed");
    gs_store_create(st, "seeds/x", seed, NULL);
    json_decref(seed);
    for (int i = 0; i < nw; i++) {
        w[i].url = gs_server_url(s);
        w[i].want = b->pods;
        pthread_create(&th[i], NULL, watch_pods, &w[i]);
    }
    usleep(300000);
    double t0 = now_s();
    create_all(gs_server_url(s), b->pods, b->clients, 0, &fail);
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
    stop(s, dir);
}

static void wait_bound(struct gs_server *s, uint64_t want, double limit_s)
{
    struct gs_sched_loop_stats st;
    double t0 = now_s(), progress = t0;
    uint64_t last = 0;
    do {
        usleep(2000);
        gs_server_sched_stats(s, &st);
        if (st.bound != last) last = st.bound, progress = now_s();
    } while (st.bound < want && now_s() - t0 < limit_s && now_s() - progress < 10);
}

static void phase_e2e(const struct bopts *b)
{
    char dir[512];
    struct gs_server *s = start(b, dir, sizeof dir, true, 200000);
    if (!s) return;
    struct gs_store *st = gs_server_store(s);
    for (int i = 0; i < b->nodes; i++) {
        json_t *n = node(i, 8);
        char key[64];
        snprintf(key, sizeof key, "nodes/n%d", i);
        gs_apiserver_prepare_new(n);
        gs_store_create(st, key, n, NULL);
        json_decref(n);
    }
    usleep(200000);
    int fail = 0;
    double t0 = now_s();
    create_all(gs_server_url(s), b->pods, b->clients, 1, &fail);
    wait_bound(s, (uint64_t)(b->pods - fail), 300);
    double t = now_s() - t0;
    struct gs_sched_loop_stats ss;
    gs_server_sched_stats(s, &ss);
    printf("end to end   %d nodes x 8 GPUs, %d 1/40-GPU pods over HTTP: %llu bound in %.2f s = %.0f pods/s "
           "(create to binding)\n", b->nodes, b->pods, (unsigned long long)ss.bound, t, ss.bound / t);
    stop(s, dir);
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
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
    for (int i = 0; i < b->rss_nodes; i++) {
        json_t *n = node(i, 8);
        char key[64];
        snprintf(key, sizeof key, "nodes/n%d", i);
        gs_apiserver_prepare_new(n);
        gs_store_create(st, key, n, NULL);
        json_decref(n);
    }
    for (int i = 0; i < b->rss_pods; i++) {
        json_t *p = pod(i, 0);
        char key[64];
        snprintf(key, sizeof key, "pods/bench/p%d", i);
        gs_apiserver_prepare_new(p);
        gs_store_create(st, key, p, NULL);
        json_decref(p);
    }
    wait_bound(s, (uint64_t)b->rss_pods, 600);
    struct gs_sched_loop_stats ss;
    gs_server_sched_stats(s, &ss);
    printf("memory       %d nodes + %d pods stored and scheduled (%llu bound) in %.1f s: RSS %.0f MiB "
           "(process before the server: %.0f MiB)\n", b->rss_nodes, b->rss_pods, (unsigned long long)ss.bound,
           now_s() - t0, rss_kib() / 1024.0, before / 1024.0);
    stop(s, dir);
}

int gs__server_bench(int argc, char **argv)
{
    struct bopts b = {.nodes = 100, .pods = 20000, .clients = 8, .watchers = 50, .rss_nodes = 5000,
                      .rss_pods = 50000, .dir = "/tmp"};
    static const struct option opts[] = {
        {"bench", no_argument, 0, 'B'},        {"nodes", required_argument, 0, 'n'},
        {"pods", required_argument, 0, 'p'},   {"clients", required_argument, 0, 'c'},
        {"watchers", required_argument, 0, 'w'}, {"rss-nodes", required_argument, 0, 'N'},
        {"rss-pods", required_argument, 0, 'P'}, {"dir", required_argument, 0, 'd'},
        {"sync", required_argument, 0, 's'},   {"only", required_argument, 0, 'o'},
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
        case 'h':
            printf("usage: gpusched server --bench [--nodes 100] [--pods 20000] [--clients 8] [--watchers 50]\n"
                   "       [--rss-nodes 5000] [--rss-pods 50000] [--dir /tmp] [--sync normal|full]\n"
                   "       [--only api|e2e|rss]\n");
            return 0;
        default: return 2;
        }
    }
    gs_log_set_level(GS_LOG_WARN);
    printf("gpusched server --bench (sync=%s)\n", b.sync_full ? "full" : "normal");
    bool all = !b.only;
    if (all || !strcmp(b.only, "api")) phase_api(&b);
    if (all || !strcmp(b.only, "e2e")) phase_e2e(&b);
    if (b.rss_nodes > 0 && (all || !strcmp(b.only, "rss"))) phase_rss(&b);
    return 0;
}
