/*
 * cmd_scheduler.c - `gpusched scheduler`: the scheduler as a process of its
 * own, a secondary scheduler for any Kubernetes API server (ours included).
 *
 * It is the server's scheduler loop (loops/sched_loop.h) given a kube
 * source (informer/source_kube.h) instead of the in-process one: the same
 * profiles, cache, queue and plugins, one scheduler, not two. Pods whose
 * spec.schedulerName is --scheduler-name are scheduled; the others are only
 * accounted for once bound. Events go out as events.k8s.io/v1 through the
 * same source (kube/event_sink.h).
 *
 * With --leader-elect the replicas elect one leader on a Lease
 * (kube/leader.h); every replica follows the cluster so its cache is warm,
 * and the loop's may_write hook is the elector's: only the leader, within
 * its renew deadline, runs cycles and writes. SIGTERM stops the loop,
 * releases the lease (a follower takes over at its next retry) and exits 0.
 *
 * A small HTTP server answers probes and metrics: /healthz (the process
 * runs), /readyz (caches synced and, with --leader-elect, leading or a
 * follower whose last election attempt reached the API server within a
 * lease duration), /metrics (Prometheus text).
 */
#include "cli/commands.h"
#include "cli/signals.h"
#include "control/events.h"
#include "loops/claims.h" /* --claims-controller */
#include "loops/sched_loop.h"
#include "core/codec.h"
#include "core/log.h"
#include "govern/metrics.h"
#include "informer/source_kube.h"
#include "kube/event_sink.h"
#include "kube/goduration.h"
#include "kube/leader.h"
#include "sched/admission/admission.h"
#include "sched/framework.h"

#include <errno.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#define CMD "gpusched scheduler"

struct opts {
    const char *kubeconfig, *config, *name, *listen, *port_file, *request_log;
    const char *tls_cert, *tls_key;
    bool leader_elect;
    bool claims;          /* --claims-controller: run the resourceclaim controller too */
    int64_t lease_ns, renew_ns, retry_ns;
    const char *le_id, *le_ns, *le_name;
    uint64_t seed;
    bool name_given;
};

/*--- Flags ---*/

static void usage(FILE *f)
{
    fprintf(f, "usage: gpusched scheduler [options]\n\n"
               "Schedules the pods of a Kubernetes API server (1.29 or newer, or gpusched server)\n"
               "whose spec.schedulerName is --scheduler-name, as a secondary scheduler: binds\n"
               "through pods/NAME/binding with the GPUs chosen, writes PodScheduled=False with the\n"
               "diagnosis and events.k8s.io Events. See docs/KUBERNETES.md.\n\n"
               "  --kubeconfig FILE     where and as whom (default: the in-cluster service account\n"
               "                        when KUBERNETES_SERVICE_HOST is set)\n"
               "  --scheduler-name NAME pods it schedules (default gpusched); names the first profile\n"
               "  --config FILE         KubeSchedulerConfiguration (profiles, plugins)\n"
               "  --seed N              tie-breaking seed (default 0)\n"
               "  --claims-controller   also create the ResourceClaims of pods' templates and keep\n"
               "                        claims' reservedFor (where no kube-controller-manager does;\n"
               "                        docs/DRA.md)\n"
               "  --leader-elect        elect one active replica on a coordination.k8s.io Lease\n"
               "  --leader-elect-lease-duration DUR  (default 15s)\n"
               "  --leader-elect-renew-deadline DUR  (default 10s; less than the lease duration)\n"
               "  --leader-elect-retry-period DUR    (default 2s)\n"
               "  --leader-elect-id ID  this replica's identity (default HOSTNAME_<random>)\n"
               "  --leader-elect-namespace NS  the Lease's namespace (default kube-system)\n"
               "  --leader-elect-name NAME     the Lease's name (default gpusched)\n"
               "  --listen ADDR:PORT    /healthz, /readyz, /metrics (default 0.0.0.0:10259, plain HTTP)\n"
               "  --tls-cert-file FILE --tls-private-key-file FILE  serve them over HTTPS\n"
               "  --port-file FILE      write the probe port there once serving\n"
               "  --request-log FILE    append \"METHOD PATH CODE\" for every API request made\n"
               "  --log-level LEVEL     debug|info|warn|error (default info)\n"
               "  DUR: a Go duration, e.g. 15s, 1m30s, 500ms\n");
}

static int bad(const char *flag, const char *v, const char *why)
{
    fprintf(stderr, CMD ": --%s \"%s\": %s\n", flag, v, why);
    return 2;
}

static int duration(const char *flag, const char *v, int64_t *ns)
{
    const char *why = NULL;
    int rc = gs_go_duration_parse(v, ns, &why);
    if (rc) return bad(flag, v, why);
    if (*ns <= 0) return bad(flag, v, "must be more than 0");
    return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
    enum { O_KUBECONFIG = 0x100, O_NAME, O_CONFIG, O_CLAIMS, O_LE, O_LEASE, O_RENEW, O_RETRY, O_ID, O_NS, O_LNAME, O_LISTEN,
           O_SEED, O_PORTFILE, O_REQLOG, O_LOG, O_CERT, O_KEY };
    static const struct option opts[] = {
        {"kubeconfig", required_argument, 0, O_KUBECONFIG},
        {"scheduler-name", required_argument, 0, O_NAME},
        {"config", required_argument, 0, O_CONFIG},
        {"leader-elect", no_argument, 0, O_LE},
        {"claims-controller", no_argument, 0, O_CLAIMS},
        {"leader-elect-lease-duration", required_argument, 0, O_LEASE},
        {"leader-elect-renew-deadline", required_argument, 0, O_RENEW},
        {"leader-elect-retry-period", required_argument, 0, O_RETRY},
        {"leader-elect-id", required_argument, 0, O_ID},
        {"leader-elect-namespace", required_argument, 0, O_NS},
        {"leader-elect-name", required_argument, 0, O_LNAME},
        {"listen", required_argument, 0, O_LISTEN},
        {"seed", required_argument, 0, O_SEED},
        {"port-file", required_argument, 0, O_PORTFILE},
        {"request-log", required_argument, 0, O_REQLOG},
        {"log-level", required_argument, 0, O_LOG},
        {"tls-cert-file", required_argument, 0, O_CERT},
        {"tls-private-key-file", required_argument, 0, O_KEY},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    optind = 1;
    int c, rc = 0;
    char *end;
    enum gs_log_level lvl;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_KUBECONFIG: o->kubeconfig = optarg; break;
        case O_NAME:
            if (!*optarg || strlen(optarg) > 253) rc = bad("scheduler-name", optarg, "want 1 to 253 characters");
            o->name = optarg;
            o->name_given = true;
            break;
        case O_CONFIG: o->config = optarg; break;
        case O_LE: o->leader_elect = true; break;
        case O_CLAIMS: o->claims = true; break;
        case O_LEASE: rc = duration("leader-elect-lease-duration", optarg, &o->lease_ns); break;
        case O_RENEW: rc = duration("leader-elect-renew-deadline", optarg, &o->renew_ns); break;
        case O_RETRY: rc = duration("leader-elect-retry-period", optarg, &o->retry_ns); break;
        case O_ID: o->le_id = optarg; break;
        case O_NS: o->le_ns = optarg; break;
        case O_LNAME: o->le_name = optarg; break;
        case O_LISTEN: o->listen = optarg; break;
        case O_SEED:
            errno = 0;
            o->seed = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-') rc = bad("seed", optarg, "want a whole number");
            break;
        case O_PORTFILE: o->port_file = optarg; break;
        case O_REQLOG: o->request_log = optarg; break;
        case O_CERT: o->tls_cert = optarg; break;
        case O_KEY: o->tls_key = optarg; break;
        case O_LOG:
            if (gs_log_level_parse(optarg, &lvl)) rc = bad("log-level", optarg, "want debug, info, warn or error");
            else gs_log_set_level(lvl);
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2; /* getopt said which option */
        }
        if (rc) return rc;
    }
    if (optind < argc) {
        fprintf(stderr, CMD ": unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    if (!o->tls_cert != !o->tls_key) {
        fprintf(stderr, CMD ": --tls-cert-file and --tls-private-key-file go together\n");
        return 2;
    }
    /* client-go's rules, said with the flags' names (leader.c checks them again) */
    int64_t lease = o->lease_ns ? o->lease_ns : 15 * GS_NS_PER_SEC;
    int64_t renew = o->renew_ns ? o->renew_ns : 10 * GS_NS_PER_SEC;
    int64_t retry = o->retry_ns ? o->retry_ns : 2 * GS_NS_PER_SEC;
    char a[32], b[32];
    gs_go_duration_format(renew, a, sizeof a);
    if (lease < GS_NS_PER_SEC) {
        gs_go_duration_format(lease, b, sizeof b);
        return bad("leader-elect-lease-duration", b, "must be at least 1s (the Lease holds whole seconds)");
    }
    if (renew >= lease) {
        gs_go_duration_format(lease, b, sizeof b);
        fprintf(stderr, CMD ": --leader-elect-renew-deadline \"%s\": must be less than --leader-elect-lease-duration "
                "(%s), or another replica could take over while this one still binds\n", a, b);
        return 2;
    }
    if ((double)renew <= 1.2 * (double)retry) {
        gs_go_duration_format(retry, b, sizeof b);
        fprintf(stderr, CMD ": --leader-elect-renew-deadline \"%s\": must be more than 1.2 x "
                "--leader-elect-retry-period (%s)\n", a, b);
        return 2;
    }
    return -1;
}

/*--- Profiles ---*/

/* --config (or the server's default profile set), the first profile named --scheduler-name. */
static int load_config(const struct opts *o, struct gs_sched_config *cfg)
{
    struct gs_diags d = {0};
    int err;
    if (o->config) {
        char *buf = NULL;
        size_t len = 0;
        struct gs_docs docs = {0};
        err = gs_read_file(o->config, &buf, &len);
        if (err == GS_ENOENT) gs_diags_add(&d, o->config, "file not found");
        else if (err) gs_diags_add(&d, o->config, "cannot read: %s", gs_strerror(err));
        if (!err) err = gs_decode_stream(buf, len, &docs, &d, NULL);
        free(buf);
        if (!err && docs.n != 1) {
            gs_diags_add(&d, o->config, "want one KubeSchedulerConfiguration document, found %zu", docs.n);
            err = GS_EINVAL;
        }
        if (!err) err = gs_sched_config_parse(docs.docs[0], cfg, &d);
        gs_docs_free(&docs);
    } else {
        err = gs_sched_config_gpusched(cfg);
    }
    if (!err && (o->name_given || !o->config) && cfg->nprofiles) {
        for (size_t i = 1; i < cfg->nprofiles; i++)
            if (!strcmp(cfg->profiles[i].scheduler_name, o->name)) {
                gs_diags_add(&d, "scheduler-name", "\"%s\" is also profiles[%zu].schedulerName in %s", o->name, i,
                             o->config);
                err = GS_EINVAL;
            }
        char *n = err ? NULL : strdup(o->name);
        if (!err && !n) err = GS_ENOMEM;
        if (!err) {
            free(cfg->profiles[0].scheduler_name);
            cfg->profiles[0].scheduler_name = n;
        }
    }
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, CMD ": %s: %s\n", d.v[i].path, d.v[i].msg);
    if (err && !d.n) fprintf(stderr, CMD ": configuration: %s\n", gs_strerror(err));
    gs_diags_free(&d);
    return err;
}

/*--- Probes and metrics ---*/

struct app {
    struct opts o;
    struct gs_source *src;
    struct gs_sched_loop *loop;
    struct gs_claims *claims; /* --claims-controller */
    struct gs_leader *leader;
    struct gs_recorder *rec;
    struct gs_kube_event_sink *sink;
    struct gs_hist cycle_hist;
    struct gs_clock clock;
    FILE *reqlog;
    pthread_mutex_t reqlog_mu;
    struct MHD_Daemon *mhd;
    char *cert, *key;
};

static void on_request(void *ctx, const char *method, const char *path, long code)
{
    struct app *a = ctx;
    pthread_mutex_lock(&a->reqlog_mu);
    fprintf(a->reqlog, "%s %s %ld\n", method, path, code);
    fflush(a->reqlog);
    pthread_mutex_unlock(&a->reqlog_mu);
}

static bool ready(struct app *a, const char **why)
{
    struct gs_source_kube_stats ks;
    gs_source_kube_stats(a->src, &ks);
    struct gs_sched_loop_stats ls;
    gs_sched_loop_stats(a->loop, &ls);
    if (!ks.synced || !ls.synced) return *why = "caches not synced yet", false;
    if (!a->leader) return true;
    struct gs_leader_stats st;
    gs_leader_stats(a->leader, &st);
    if (st.leading) return true;
    int64_t lease = a->o.lease_ns ? a->o.lease_ns : 15 * GS_NS_PER_SEC;
    if (st.last_contact_ns && gs_clock_now(&a->clock) - st.last_contact_ns < lease) return true;
    return *why = "following, but the last election attempt did not reach the API server", false;
}

static char *metrics_text(struct app *a)
{
    struct gs_mbuf b = {0};
    gs_sched_loop_metrics(a->loop, &a->cycle_hist, &b);
    struct gs_leader_stats ls = {0};
    if (a->leader) gs_leader_stats(a->leader, &ls);
    bool leading = a->leader ? ls.leading : true;
    gs_mbuf_help(&b, "gpusched_leader_is_leader", "gauge",
                 "1 while this replica leads (always 1 without --leader-elect).");
    gs_mbuf_printf(&b, "gpusched_leader_is_leader %d\n", leading ? 1 : 0);
    gs_mbuf_help(&b, "leader_election_master_status", "gauge", "client-go's name for the same.");
    gs_mbuf_printf(&b, "leader_election_master_status{name=\"%s\"} %d\n", a->o.le_name, leading ? 1 : 0);
    if (a->leader) {
        gs_mbuf_help(&b, "gpusched_leader_lease_transitions", "gauge", "leaseTransitions of the Lease last seen.");
        gs_mbuf_printf(&b, "gpusched_leader_lease_transitions %lld\n", (long long)ls.lease_transitions);
        gs_mbuf_help(&b, "gpusched_leader_acquired_total", "counter", "Times this replica became leader.");
        gs_mbuf_printf(&b, "gpusched_leader_acquired_total %llu\n", (unsigned long long)ls.acquired);
        gs_mbuf_help(&b, "gpusched_leader_lost_total", "counter", "Times this replica stopped leading.");
        gs_mbuf_printf(&b, "gpusched_leader_lost_total %llu\n", (unsigned long long)ls.lost);
        gs_mbuf_help(&b, "gpusched_leader_renew_failures_total", "counter", "Lease writes that failed while leading.");
        gs_mbuf_printf(&b, "gpusched_leader_renew_failures_total %llu\n", (unsigned long long)ls.renew_failures);
    }
    struct gs_source_kube_stats ks;
    gs_source_kube_stats(a->src, &ks);
    gs_mbuf_help(&b, "gpusched_source_requests_total", "counter", "API requests, by kind.");
    gs_mbuf_printf(&b, "gpusched_source_requests_total{kind=\"any\"} %llu\n"
                       "gpusched_source_requests_total{kind=\"list_page\"} %llu\n"
                       "gpusched_source_requests_total{kind=\"watch\"} %llu\n"
                       "gpusched_source_requests_total{kind=\"retry\"} %llu\n",
                   (unsigned long long)ks.requests, (unsigned long long)ks.lists, (unsigned long long)ks.watches,
                   (unsigned long long)ks.retries);
    gs_mbuf_help(&b, "gpusched_source_relists_total", "counter", "Lists again after 410 Expired or a lost stream.");
    gs_mbuf_printf(&b, "gpusched_source_relists_total %llu\n", (unsigned long long)ks.relists);
    gs_mbuf_help(&b, "gpusched_source_bookmarks_total", "counter", "Watch BOOKMARK events received.");
    gs_mbuf_printf(&b, "gpusched_source_bookmarks_total %llu\n", (unsigned long long)ks.bookmarks);
    gs_mbuf_help(&b, "gpusched_source_conflicts_total", "counter", "409 Conflict answers to writes.");
    gs_mbuf_printf(&b, "gpusched_source_conflicts_total %llu\n", (unsigned long long)ks.conflicts);
    gs_mbuf_help(&b, "gpusched_source_synced", "gauge", "1 once every followed resource was listed.");
    gs_mbuf_printf(&b, "gpusched_source_synced %d\n", ks.synced ? 1 : 0);
    gs_recorder_metrics(a->rec, false, &b);
    if (b.err || !b.buf) {
        free(b.buf);
        return NULL;
    }
    return b.buf;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *ctype, char *body /* taken */)
{
    if (!body) {
        code = 500;
        body = strdup("out of memory\n");
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(body ? strlen(body) : 0, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result http(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                            const char *version, const char *upload, size_t *upload_len, void **con_cls)
{
    (void)version, (void)upload, (void)upload_len, (void)con_cls;
    struct app *a = cls;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) return reply(c, 405, "text/plain", strdup("GET only\n"));
    if (!strcmp(url, "/healthz") || !strcmp(url, "/livez")) return reply(c, 200, "text/plain", strdup("ok"));
    if (!strcmp(url, "/readyz")) {
        const char *why = "";
        if (ready(a, &why)) return reply(c, 200, "text/plain", strdup("ok"));
        char *msg = NULL;
        return reply(c, 503, "text/plain", asprintf(&msg, "not ready: %s\n", why) < 0 ? NULL : msg);
    }
    if (!strcmp(url, "/metrics")) return reply(c, 200, "text/plain; version=0.0.4", metrics_text(a));
    return reply(c, 404, "text/plain", strdup("not found: /healthz, /readyz, /metrics\n"));
}

static int serve(struct app *a, int *port)
{
    const char *listen = a->o.listen ? a->o.listen : "0.0.0.0:10259";
    const char *colon = strrchr(listen, ':');
    char host[256];
    if (!colon || !colon[1] || (size_t)(colon - listen) >= sizeof host) {
        fprintf(stderr, CMD ": --listen \"%s\": want HOST:PORT\n", listen);
        return 2;
    }
    snprintf(host, sizeof host, "%.*s", (int)(colon - listen), listen);
    char *h = host;
    if (h[0] == '[' && h[strlen(h) - 1] == ']') h[strlen(h) - 1] = 0, h++;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV | AI_NUMERICHOST}, *res = NULL;
    int rc = getaddrinfo(*h ? h : "0.0.0.0", colon + 1, &hints, &res);
    if (rc || !res) {
        fprintf(stderr, CMD ": --listen \"%s\": %s\n", listen, gai_strerror(rc));
        return 2;
    }
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (res->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    if (a->o.tls_cert) {
        size_t n;
        int err = gs_read_file(a->o.tls_cert, &a->cert, &n);
        if (!err) err = gs_read_file(a->o.tls_key, &a->key, &n);
        if (err) {
            fprintf(stderr, CMD ": --tls-cert-file / --tls-private-key-file: cannot read: %s\n", gs_strerror(err));
            freeaddrinfo(res);
            return 1;
        }
        flags |= MHD_USE_TLS;
    }
    a->mhd = a->cert ? MHD_start_daemon(flags, 0, NULL, NULL, http, a, MHD_OPTION_SOCK_ADDR, res->ai_addr,
                                        MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT, 10u,
                                        MHD_OPTION_HTTPS_MEM_CERT, a->cert, MHD_OPTION_HTTPS_MEM_KEY, a->key,
                                        MHD_OPTION_END)
                     : MHD_start_daemon(flags, 0, NULL, NULL, http, a, MHD_OPTION_SOCK_ADDR, res->ai_addr,
                                        MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT, 10u,
                                        MHD_OPTION_END);
    freeaddrinfo(res);
    if (!a->mhd) {
        fprintf(stderr, CMD ": --listen \"%s\": cannot listen (address in use, not permitted%s)\n", listen,
                a->cert ? ", or a bad certificate or key" : "");
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(a->mhd, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : 0;
    return 0;
}

/*--- The command ---*/

/* client-go's default identity: the host name and something unique. */
static void default_identity(char *buf, size_t len)
{
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    unsigned char r[8] = {0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) memset(r, 0, sizeof r);
    snprintf(buf, len, "%s_%02x%02x%02x%02x%02x%02x%02x%02x", host, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}

static void teardown(struct app *a)
{
    gs_claims_stop(a->claims);
    gs_sched_loop_stop(a->loop); /* no more writes ... */
    gs_leader_free(a->leader);   /* ... then the lease goes */
    gs_recorder_free(a->rec); /* writes what is queued */
    gs_kube_event_sink_free(a->sink);
    gs_source_free(a->src);
    if (a->mhd) MHD_stop_daemon(a->mhd);
    if (a->reqlog) fclose(a->reqlog);
    pthread_mutex_destroy(&a->reqlog_mu);
    gs_hist_destroy(&a->cycle_hist);
    free(a->cert);
    free(a->key);
}

static int run(struct app *a, struct gs_sched_config *cfg, const sigset_t *set)
{
    struct opts *o = &a->o;
    char identity[320];
    if (o->le_id) snprintf(identity, sizeof identity, "%s", o->le_id);
    else default_identity(identity, sizeof identity);
    if (o->request_log && !(a->reqlog = fopen(o->request_log, "ae"))) {
        fprintf(stderr, CMD ": --request-log \"%s\": %s\n", o->request_log, strerror(errno));
        return 1;
    }
    struct gs_diags d = {0};
    const char *follow[64]; /* exactly what the loop lists: the ClusterRole grants no more */
    gs_sched_loop_prefixes(follow, sizeof follow / sizeof follow[0]);
    struct gs_source_kube_opts ko = {.client = {.kubeconfig = o->kubeconfig}, .follow = follow, .seed = o->seed,
                                     .on_request = a->reqlog ? on_request : NULL, .on_request_ctx = a};
    int err = gs_source_kube_new(&ko, &a->src, &d);
    if (!err && o->leader_elect) {
        struct gs_leader_opts lo = {.source = a->src, .ns = o->le_ns, .name = o->le_name, .identity = identity,
                                    .lease_duration_ns = o->lease_ns, .renew_deadline_ns = o->renew_ns,
                                    .retry_period_ns = o->retry_ns, .seed = o->seed};
        size_t before = d.n;
        err = gs_leader_new(&lo, &a->leader, &d);
        static const char *const flag[][2] = {{"leaseDuration", "--leader-elect-lease-duration"},
                                              {"renewDeadline", "--leader-elect-renew-deadline"},
                                              {"retryPeriod", "--leader-elect-retry-period"},
                                              {"identity", "--leader-elect-id"},
                                              {"namespace", "--leader-elect-namespace"},
                                              {"name", "--leader-elect-name"}};
        for (size_t i = before; i < d.n; i++) /* say which flag */
            for (size_t k = 0; k < sizeof flag / sizeof flag[0]; k++)
                if (!strcmp(d.v[i].path, flag[k][0])) {
                    free(d.v[i].path);
                    d.v[i].path = strdup(flag[k][1]);
                }
    }
    struct gs_kube_event_sink_opts so = {.source = a->src, .controller = o->name, .instance = identity};
    if (!err) err = gs_kube_event_sink_new(&so, &a->sink);
    struct gs_recorder_opts ro = {.sink = a->sink ? gs_kube_event_sink(a->sink) : (struct gs_event_sink){0}};
    if (!err) err = gs_recorder_new(&ro, &a->rec);
    struct gs_sched_loop_opts lo = {.config = cfg, .seed = o->seed, .cycle_latency = &a->cycle_hist,
                                    .events = a->rec, .source = a->src, .component = o->name};
    if (a->leader) {
        lo.may_write = gs_leader_may_write;
        lo.may_write_ctx = a->leader;
    }
    if (!err) err = gs_sched_loop_start(&lo, &a->loop, &d);
    if (!err && o->claims) { /* the resourceclaim controller, under the same leadership */
        struct gs_claims_opts co = {.source = a->src, .seed = o->seed,
                                    .may_write = a->leader ? gs_leader_may_write : NULL, .may_write_ctx = a->leader};
        err = gs_claims_start(&co, &a->claims);
    }
    if (!err && a->leader) err = gs_leader_start(a->leader);
    int port = 0;
    int rc = err ? 1 : serve(a, &port);
    for (size_t i = 0; i < d.n; i++)
        fprintf(stderr, CMD ": %s: %s\n", d.v[i].path ? d.v[i].path : "", d.v[i].msg);
    if (err && !d.n) fprintf(stderr, CMD ": %s\n", gs_strerror(err));
    gs_diags_free(&d);
    if (rc) return rc;
    printf("gpusched scheduler \"%s\" serving probes on port %d%s%s\n", o->name, port,
           a->leader ? ", electing as " : "", a->leader ? identity : "");
    fflush(stdout);
    if (o->port_file) {
        FILE *f = fopen(o->port_file, "we");
        if (f) {
            fprintf(f, "%d\n", port);
            fclose(f);
        }
    }
    int sig = 0;
    sigwait(set, &sig);
    gs_log(GS_LOG_INFO, "scheduler: stopping", "signal", sig == SIGINT ? "SIGINT" : "SIGTERM", NULL);
    return 0;
}

int gs_cmd_scheduler(int argc, char **argv)
{
    struct app a = {.o = {.name = "gpusched", .le_ns = "kube-system", .le_name = "gpusched"}};
    int rc = parse(argc, argv, &a.o);
    if (rc >= 0) return rc;
    struct gs_sched_config cfg = {0};
    if (load_config(&a.o, &cfg)) return 1;
    sigset_t set;
    gs_cli_block_stop_signals(&set, NULL); /* before any thread starts */
    pthread_mutex_init(&a.reqlog_mu, NULL);
    gs_hist_init(&a.cycle_hist, 0.0001, 2, 16);
    gs_clock_init_real(&a.clock);
    rc = run(&a, &cfg, &set);
    teardown(&a);
    gs_sched_config_free(&cfg);
    return rc;
}
