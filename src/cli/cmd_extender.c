/*
 * cmd_extender.c - `gpusched extender`: the kube-scheduler extender
 * (kube/extender.h) for clusters that keep kube-scheduler.
 *
 * It informs nodes, pods and NodeResourceTopologies from the API server of
 * --kubeconfig (ours or any kube-apiserver; the in-cluster service account
 * when no kubeconfig is given and KUBERNETES_SERVICE_HOST is set) through
 * the Kubernetes transport of the source interface, and answers
 * kube-scheduler's filter, prioritize, preempt and bind callouts on
 * --listen until SIGINT or SIGTERM. The shutdown runs on the main thread:
 * HTTP first (no request in flight), then the extender, then the source.
 */
#include "cli/commands.h"
#include "cli/signals.h"
#include "core/codec.h"
#include "core/log.h"
#include "discovery/discovery.h" /* gs_duration_parse */
#include "informer/source_kube.h"
#include "kube/extender.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: gpusched extender [--kubeconfig FILE] [--listen ADDR] [options]\n\n"
               "The kube-scheduler extender: answers kube-scheduler's filter, prioritize,\n"
               "preempt and bind callouts (POST <urlPrefix>/filter, .../prioritize,\n"
               ".../preempt, .../bind) with gpusched's plugins, on a cache of the cluster's\n"
               "nodes, NodeResourceTopologies and bound pods. See docs/EXTENDER.md.\n\n"
               "  --kubeconfig FILE          the API server and credentials (default: in-cluster\n"
               "                             service account when KUBERNETES_SERVICE_HOST is set)\n"
               "  --listen ADDR              HOST:PORT, :PORT or [V6]:PORT (default :8888; port 0 = any)\n"
               "  --config FILE              KubeSchedulerConfiguration whose profile answers\n"
               "                             (default: the server's gpusched profile)\n"
               "  --scheduler-name NAME      which profile of --config (default: its first)\n"
               "  --tls-cert-file FILE       serve HTTPS with this certificate (PEM) ...\n"
               "  --tls-private-key-file FILE  ... and key (both or neither)\n"
               "  --max-body BYTES           request body limit (default 67108864)\n"
               "  --sync-timeout DURATION    give up (exit 1) when the API server's first lists are not\n"
               "                             in after this long (default 60s; 0 = wait for ever)\n"
               "  --port-file FILE           write the bound port there once serving\n"
               "  --log-level LEVEL          debug, info (default), warn, error\n"
               "  -h, --help                 show this help\n");
}

struct opts {
    const char *kubeconfig, *listen, *config, *profile, *cert, *key, *port_file;
    size_t max_body;
    int64_t sync_ns;
};

static int bad(const char *flag, const char *v, const char *why)
{
    fprintf(stderr, "gpusched extender: --%s \"%s\": %s\n", flag, v, why);
    return 2;
}

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        {"kubeconfig", required_argument, NULL, 'k'},  {"listen", required_argument, NULL, 'l'},
        {"config", required_argument, NULL, 'c'},      {"scheduler-name", required_argument, NULL, 'n'},
        {"tls-cert-file", required_argument, NULL, 'C'}, {"tls-private-key-file", required_argument, NULL, 'K'},
        {"max-body", required_argument, NULL, 'm'},    {"sync-timeout", required_argument, NULL, 's'},
        {"port-file", required_argument, NULL, 'p'},   {"log-level", required_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},              {NULL, 0, NULL, 0},
    };
    o->listen = ":8888";
    o->sync_ns = 60 * GS_NS_PER_SEC;
    optind = 0;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "h", longs, NULL)) != -1;) {
        enum gs_log_level lvl;
        char *end;
        unsigned long long v;
        switch (c) {
        case 'k': o->kubeconfig = optarg; break;
        case 'l': o->listen = optarg; break;
        case 'c': o->config = optarg; break;
        case 'n': o->profile = optarg; break;
        case 'C': o->cert = optarg; break;
        case 'K': o->key = optarg; break;
        case 'p': o->port_file = optarg; break;
        case 'm':
            errno = 0;
            v = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || v < 1024 || v > (1ull << 32))
                return bad("max-body", optarg, "want a number of bytes from 1024 to 4294967296");
            o->max_body = (size_t)v;
            break;
        case 's':
            if (gs_duration_parse(optarg, &o->sync_ns) || o->sync_ns < 0)
                return bad("sync-timeout", optarg, "want a duration, e.g. 60s");
            break;
        case 'L':
            if (gs_log_level_parse(optarg, &lvl)) return bad("log-level", optarg, "want debug, info, warn or error");
            gs_log_set_level(lvl);
            break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "gpusched extender: unknown option or missing value: %s\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpusched extender: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    if (!o->cert != !o->key) {
        fprintf(stderr, "gpusched extender: --tls-cert-file and --tls-private-key-file go together\n");
        return 2;
    }
    if (o->profile && !o->config) {
        fprintf(stderr, "gpusched extender: --scheduler-name picks a profile of --config; give --config too\n");
        return 2;
    }
    return -1;
}

static int load_config(const char *path, struct gs_sched_config *cfg)
{
    char *buf = NULL;
    size_t len = 0;
    struct gs_diags d = {0};
    struct gs_docs docs = {0};
    int err = gs_read_file(path, &buf, &len);
    if (err) fprintf(stderr, "gpusched extender: --config %s: %s\n", path, err == GS_ENOENT ? "file not found" : gs_strerror(err));
    if (!err) err = gs_decode_stream(buf, len, &docs, &d, NULL);
    free(buf);
    if (!err && docs.n != 1) {
        gs_diags_add(&d, path, "want one KubeSchedulerConfiguration document, found %zu", docs.n);
        err = GS_EINVAL;
    }
    if (!err) err = gs_sched_config_parse(docs.docs[0], cfg, &d);
    for (size_t i = 0; i < d.n; i++)
        fprintf(stderr, "gpusched extender: --config %s: %s%s%s\n", path, d.v[i].path ? d.v[i].path : "",
                d.v[i].path ? ": " : "", d.v[i].msg);
    gs_diags_free(&d);
    gs_docs_free(&docs);
    return err;
}

static void print_diags(const char *what, struct gs_diags *d, int err)
{
    for (size_t i = 0; i < d->n; i++)
        fprintf(stderr, "gpusched extender: %s: %s%s%s\n", what, d->v[i].path ? d->v[i].path : "",
                d->v[i].path && *d->v[i].path ? ": " : "", d->v[i].msg);
    if (!d->n) fprintf(stderr, "gpusched extender: %s: %s\n", what, gs_strerror(err));
    gs_diags_free(d);
}

int gs_cmd_extender(int argc, char **argv)
{
    struct opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    struct gs_sched_config cfg = {0};
    bool has_cfg = false;
    if (o.config) {
        if (load_config(o.config, &cfg)) return 1;
        has_cfg = true;
    }
    sigset_t set;
    gs_cli_block_stop_signals(&set, NULL); /* before any thread starts */
    static const char *const follow[] = {"nodes/", "pods/", "noderesourcetopologies.topology.node.k8s.io/", NULL};
    struct gs_source_kube_opts so = {.client = {.kubeconfig = o.kubeconfig}, .follow = follow,
                                     .user_agent = "gpusched-extender/" GS_VERSION};
    struct gs_source *src = NULL;
    struct gs_extender *x = NULL;
    struct gs_extender_http *h = NULL;
    struct gs_diags d = {0};
    int err = gs_source_kube_new(&so, &src, &d);
    if (err) {
        print_diags("--kubeconfig", &d, err);
        rc = 1;
        goto out;
    }
    /* The first lists before anything serves (a kube source's list waits for them);
     * a stop signal meanwhile ends the command cleanly. */
    int64_t waited = 0;
    struct timespec poll = {0, 0};
    while (!gs_source_kube_wait_synced(src, 200)) {
        if (sigtimedwait(&set, NULL, &poll) > 0) {
            rc = 0;
            goto out;
        }
        waited += 200 * GS_NS_PER_MS;
        if (o.sync_ns && waited >= o.sync_ns) {
            fprintf(stderr, "gpusched extender: the API server's lists are not in after %llds (see the log)\n",
                    (long long)(o.sync_ns / GS_NS_PER_SEC));
            rc = 1;
            goto out;
        }
    }
    struct gs_extender_opts xo = {.source = src, .config = has_cfg ? &cfg : NULL, .profile = o.profile};
    if ((err = gs_extender_new(&xo, &x, &d))) {
        print_diags(o.config ? "--config" : "profile", &d, err);
        rc = 1;
        goto out;
    }
    gs_diags_free(&d);
    if (!gs_extender_wait_synced(x, 10000))
        gs_log(GS_LOG_WARN, "extender: the cache is not loaded yet; serving 503 until it is", NULL);
    char msg[256];
    struct gs_extender_http_opts ho = {.listen = o.listen, .tls_cert_file = o.cert, .tls_key_file = o.key,
                                       .max_body = o.max_body};
    if ((err = gs_extender_http_start(x, &ho, &h, msg, sizeof msg))) {
        fprintf(stderr, "gpusched extender: %s\n", msg);
        rc = 1;
        goto out;
    }
    printf("gpusched extender listening on %s://%s (port %d)\n", o.cert ? "https" : "http", o.listen,
           gs_extender_http_port(h));
    fflush(stdout);
    if (o.port_file) {
        FILE *f = fopen(o.port_file, "we");
        if (f) {
            fprintf(f, "%d\n", gs_extender_http_port(h));
            fclose(f);
        }
    }
    int sig = 0;
    sigwait(&set, &sig);
    gs_log(GS_LOG_INFO, "extender: stopping", "signal", sig == SIGINT ? "SIGINT" : "SIGTERM", NULL);
    rc = 0;
out:
    gs_extender_http_stop(h);
    gs_extender_free(x);
    gs_source_free(src);
    if (has_cfg) gs_sched_config_free(&cfg);
    return rc;
}
