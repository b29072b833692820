/*
 * cmd_exporter.c - `gpusched exporter`: GPU metrics for Prometheus.
 *
 * Serves DCGM-Exporter-compatible /metrics and /healthz from a discovery
 * backend (NVML, or --mock with scripted faults) until SIGINT/SIGTERM (or
 * --duration). Signals are blocked in every thread and taken synchronously
 * with sigtimedwait in main, so shutdown is an ordinary code path: stop the
 * HTTP server, stop and join the collector, close the backend.
 *
 * --bench measures the exporter itself: CPU and wall time per scrape over
 * loopback HTTP, CPU per collection and resident memory, printed as JSON.
 */
#include "cli/commands.h"
#include "cli/signals.h"
#include "core/log.h"
#include "discovery/discovery.h"
#include "discovery/exporter.h"
#include "discovery/health.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: gpusched exporter [--mock SPEC|FILE] [--listen ADDR] [options]\n\n"
               "Serves GPU metrics with DCGM-Exporter's names and labels on /metrics,\n"
               "and /healthz. Runs until SIGINT or SIGTERM.\n\n"
               "options:\n"
               "  --mock SPEC|FILE       mock GPUs, e.g. 8xH100-80GB or 4xA100-40GB,xid=79@gpu3@t=5s\n"
               "  --backend NAME         auto (default), nvml, sysfs or mock\n"
               "  --sysfs-root DIR       where sysfs is mounted (default /sys)\n"
               "  --listen ADDR          HOST:PORT, :PORT or [V6]:PORT (default :9400)\n"
               "  --interval DURATION    collection period (default 30s, as dcgm-exporter)\n"
               "  --faults SCRIPT        extra mock faults: \"xid=79@gpu3@t=5s;lost@gpu1@t=9s@for=20s\"\n"
               "  --critical-xids LIST   only these Xids make a GPU unhealthy (\"79,48,94\", \"all\")\n"
               "  --ignore-xids LIST     these Xids never do (default 13,31,43,45,68,109)\n"
               "  --recovery DURATION    quiet time before an unhealthy GPU recovers (default 60s; \"never\")\n"
               "  --hostname NAME        Hostname label (default: this host)\n"
               "  --no-hostname          leave the Hostname label out\n"
               "  --duration DURATION    exit after this long (tests)\n"
               "  --bench                measure scrape cost and memory, print JSON, exit\n"
               "  --scrapes N            scrapes for --bench (default 2000)\n"
               "  --log-level LEVEL      debug, info (default), warn, error\n"
               "  -h, --help             show this help\n");
}

struct opts {
    const char *mock, *backend, *sysfs, *listen, *faults;
    struct gs_exporter_config cfg;
    struct gs_health_config health;
    int64_t duration_ns;
    bool bench;
    long scrapes;
};

static int bad(const char *what)
{
    fprintf(stderr, "gpusched exporter: %s\n", what);
    return 2;
}

static int parse_opt(struct opts *o, int c, const char *arg)
{
    enum gs_log_level lvl;
    switch (c) {
    case 'm': o->mock = arg; return -1;
    case 'b': o->backend = arg; return -1;
    case 's': o->sysfs = arg; return -1;
    case 'l': o->listen = arg; return -1;
    case 'f': o->faults = arg; return -1;
    case 'H': o->cfg.hostname = arg; return -1;
    case 'N': o->cfg.no_hostname = true; return -1;
    case 'B': o->bench = true; return -1;
    case 'i': return gs_duration_parse(arg, &o->cfg.interval_ns) || o->cfg.interval_ns < GS_NS_PER_MS
                         ? bad("--interval wants a duration of at least 1ms, e.g. 5s") : -1;
    case 'd': return gs_duration_parse(arg, &o->duration_ns) ? bad("--duration wants a duration, e.g. 10s") : -1;
    case 'c': return gs_health_config_set_critical(&o->health, arg) ? bad("--critical-xids wants a list like 79,48,61-64") : -1;
    case 'x': return gs_health_config_set_ignored(&o->health, arg) ? bad("--ignore-xids wants a list like 13,31") : -1;
    case 'r':
        if (!strcmp(arg, "never")) o->health.recovery_ns = -1;
        else if (gs_duration_parse(arg, &o->health.recovery_ns)) return bad("--recovery wants a duration or never");
        return -1;
    case 'n': o->scrapes = strtol(arg, NULL, 10); return o->scrapes < 1 || o->scrapes > 10000000 ? bad("--scrapes wants 1..10000000") : -1;
    case 'L': return gs_log_level_parse(arg, &lvl) ? bad("--log-level wants debug, info, warn or error") : (gs_log_set_level(lvl), -1);
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
}

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        {"mock", required_argument, NULL, 'm'},      {"backend", required_argument, NULL, 'b'},
        {"sysfs-root", required_argument, NULL, 's'}, {"listen", required_argument, NULL, 'l'},
        {"interval", required_argument, NULL, 'i'},  {"faults", required_argument, NULL, 'f'},
        {"critical-xids", required_argument, NULL, 'c'}, {"ignore-xids", required_argument, NULL, 'x'},
        {"recovery", required_argument, NULL, 'r'},  {"hostname", required_argument, NULL, 'H'},
        {"no-hostname", no_argument, NULL, 'N'},     {"duration", required_argument, NULL, 'd'},
        {"bench", no_argument, NULL, 'B'},           {"scrapes", required_argument, NULL, 'n'},
        {"log-level", required_argument, NULL, 'L'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    o->listen = ":9400";
    o->scrapes = 2000;
    gs_health_config_default(&o->health);
    o->cfg.health = &o->health;
    optind = 0;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "h", longs, NULL)) != -1;) {
        int rc = parse_opt(o, c == '?' ? 0 : c, optarg);
        if (rc >= 0) return rc;
    }
    if (optind < argc) return bad("unexpected argument");
    if (o->bench && !o->mock && !o->backend) o->mock = "8xH100-80GB";
    return -1;
}

/*--- Serving ---*/

static void on_health(const struct gs_health_change *c, void *arg)
{
    char gpu[16];
    (void)arg;
    snprintf(gpu, sizeof gpu, "%d", c->gpu);
    gs_log(c->to == GS_HEALTH_HEALTHY ? GS_LOG_INFO : GS_LOG_WARN, "gpu health changed", "gpu", gpu, "from",
           gs_health_state_name(c->from), "to", gs_health_state_name(c->to), "reason", c->reason, NULL);
}

static int add_faults(struct gs_disc *d, const char *script)
{
    struct gs_fault *f;
    size_t n;
    char err[160];
    if (gs_fault_script_parse(script, &f, &n, err, sizeof err)) {
        fprintf(stderr, "gpusched exporter: --faults: %s\n", err);
        return 2;
    }
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) rc = gs_disc_mock_inject(d, &f[i]);
    free(f);
    if (rc) fprintf(stderr, "gpusched exporter: --faults needs the mock backend and existing GPUs\n");
    return rc ? 2 : 0;
}

/* Waits for SIGINT/SIGTERM (blocked in all threads) or the deadline. */
static void wait_for_signal(const sigset_t *set, int64_t duration_ns)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        struct timespec ts = {1, 0};
        if (duration_ns > 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            int64_t left = duration_ns - ((now.tv_sec - start.tv_sec) * GS_NS_PER_SEC + now.tv_nsec - start.tv_nsec);
            if (left <= 0) return;
            if (left < GS_NS_PER_SEC) ts = (struct timespec){0, (long)left};
        }
        int sig = sigtimedwait(set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM) {
            gs_log(GS_LOG_INFO, "exporter stopping", "signal", sig == SIGINT ? "SIGINT" : "SIGTERM", NULL);
            return;
        }
    }
}

static int serve(struct gs_disc *d, const struct opts *o)
{
    struct gs_exporter *e;
    struct gs_http *h = NULL;
    char err[200];
    int rc = gs_exporter_create(d, &o->cfg, &e);
    if (rc) {
        fprintf(stderr, "gpusched exporter: %s\n", d->err[0] ? d->err : gs_strerror(rc));
        return 1;
    }
    gs_health_subscribe(gs_exporter_health(e), on_health, NULL);
    if ((rc = gs_http_start(o->listen, e, &h, err, sizeof err))) {
        fprintf(stderr, "gpusched exporter: %s\n", err);
        gs_exporter_free(e);
        return rc == GS_EINVAL ? 2 : 1;
    }
    rc = gs_exporter_start(e);
    if (!rc) {
        printf("gpusched exporter: serving http://%s/metrics (port %d)\n", o->listen, gs_http_port(h));
        fflush(stdout);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        wait_for_signal(&set, o->duration_ns);
    }
    gs_http_stop(h);
    gs_exporter_free(e);
    return rc ? 1 : 0;
}

/*--- Benchmark ---*/

/* One HTTP/1.0 GET of /metrics over loopback; returns the bytes read or -1. */
static long scrape_once(int port, char *buf, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    static const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    long total = -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
        total = 0;
        for (ssize_t n; (n = read(fd, buf, len)) > 0;) total += n;
    }
    close(fd);
    return total;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double mono_seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') v = strtol(line + kl + 1, NULL, 10);
    if (f) fclose(f);
    return v;
}

/* CPU per collection, measured on this thread with a second exporter. */
static double collect_cost(struct gs_disc *d, const struct opts *o, int rounds)
{
    struct gs_exporter *e;
    if (gs_exporter_create(d, &o->cfg, &e)) return -1;
    double t0 = mono_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < rounds; i++) gs_exporter_collect(e);
    double t = (mono_seconds(CLOCK_THREAD_CPUTIME_ID) - t0) / rounds;
    gs_exporter_free(e);
    return t;
}

static int bench(struct gs_disc *d, const struct opts *o)
{
    struct gs_exporter *e;
    struct gs_http *h = NULL;
    char err[200];
    static char buf[1 << 16];
    if (gs_exporter_create(d, &o->cfg, &e)) return 1;
    if (gs_http_start("127.0.0.1:0", e, &h, err, sizeof err) || gs_exporter_collect(e)) {
        fprintf(stderr, "gpusched exporter: %s\n", err);
        gs_exporter_free(e);
        return 1;
    }
    long page = 0;
    for (int i = 0; i < 20; i++) page = scrape_once(gs_http_port(h), buf, sizeof buf);
    double c0 = cpu_seconds(), w0 = mono_seconds(CLOCK_MONOTONIC);
    long failed = 0;
    for (long i = 0; i < o->scrapes; i++) failed += scrape_once(gs_http_port(h), buf, sizeof buf) <= 0;
    double cpu = (cpu_seconds() - c0) / o->scrapes, wall = (mono_seconds(CLOCK_MONOTONIC) - w0) / o->scrapes;
    double collect = collect_cost(d, o, 200);
    struct gs_inventory inv;
    gs_disc_inventory(d, &inv);
    printf("{\"gpus\": %d, \"scrapes\": %ld, \"failed\": %ld, \"page_bytes\": %ld, "
           "\"cpu_us_per_scrape\": %.1f, \"wall_us_per_scrape\": %.1f, \"cpu_us_per_collection\": %.1f, "
           "\"rss_kib\": %ld, \"rss_peak_kib\": %ld}\n",
           inv.n_gpus, o->scrapes, failed, page, cpu * 1e6, wall * 1e6, collect * 1e6, status_kib("VmRSS"),
           status_kib("VmHWM"));
    gs_http_stop(h);
    gs_exporter_free(e);
    return failed ? 1 : 0;
}

int gs_cmd_exporter(int argc, char **argv)
{
    struct opts o;
    memset(&o, 0, sizeof o);
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    /* Block before any thread starts, so only sigtimedwait in main sees them. */
    sigset_t set, old;
    gs_cli_block_stop_signals(&set, &old);
    struct gs_clock clock;
    gs_clock_init_real(&clock);
    struct gs_disc d;
    if ((rc = gs_disc_open_named(&d, o.backend, o.mock, o.sysfs, &clock))) {
        fprintf(stderr, "gpusched exporter: %s\n", d.err[0] ? d.err : gs_strerror(rc));
        rc = rc == GS_EINVAL ? 2 : 1;
    } else {
        rc = o.faults ? add_faults(&d, o.faults) : 0;
        if (!rc) rc = o.bench ? bench(&d, &o) : serve(&d, &o);
        gs_disc_close(&d);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
