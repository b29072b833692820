/*
 * cmd_server.c - `gpusched server`: the control plane (API, store, scheduler)
 * in the foreground until SIGINT/SIGTERM; `--bench` measures it instead.
 *
 * It also owns the admission flags (reclaim patience, minimum runtime, hold,
 * caps: struct gs_admission_opts), which `gpusched up` (cmd_up.c) shares
 * through gs__adm_options_merge and gs__adm_option. A flag's value means
 * what it says: "--reclaim-wait 0" reclaims at once, where the library
 * would read a zero as "the default"; a zero that means nothing (a hold of 0) is refused.
 */
#include "cli/commands.h"
#include "cli/net_flags.h"
#include "cli/cmd_server_lc.h" /* node lifecycle flags */
#include "cli/cmd_server_store.h" /* --store, --etcd-* */
#include "cli/cmd_server_ha.h" /* replica flags */
#include "cli/signals.h"
#include "control/server.h"
#include "core/log.h"
#include "discovery/discovery.h"
#include "sched/admission/admission.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* In src/control/bench.c, which is always part of the library. */
int gs__server_bench(int argc, char **argv);

/*--- Admission flags, shared with `gpusched up` ---*/

enum {
    A_HALFLIFE = 0x1000, A_RECLAIM_WAIT, A_MIN_RUNTIME, A_HOLD, A_STARVATION, A_HORIZON,
    A_MAX_PREEMPT, A_WINDOW, A_CHARGE, A_FROM, A_VICTIMS, A_QUOTA_ONLY,
};

static const struct option adm_options[] = {
    {"admission-halflife", required_argument, 0, A_HALFLIFE},
    {"reclaim-wait", required_argument, 0, A_RECLAIM_WAIT},
    {"reclaim-min-runtime", required_argument, 0, A_MIN_RUNTIME},
    {"admission-hold", required_argument, 0, A_HOLD},
    {"starvation-wait", required_argument, 0, A_STARVATION},
    {"reserve-horizon", required_argument, 0, A_HORIZON},
    {"max-preemptions", required_argument, 0, A_MAX_PREEMPT},
    {"preemption-window", required_argument, 0, A_WINDOW},
    {"evict-charge", required_argument, 0, A_CHARGE},
    {"reclaim-from", required_argument, 0, A_FROM},
    {"victims", required_argument, 0, A_VICTIMS},
    {"admission-quota-only", no_argument, 0, A_QUOTA_ONLY},
    {0, 0, 0, 0},
};

const char gs__adm_usage[] =
    "\nadmission (pods in kueue/Volcano queues; see docs/QUEUES.md, \"Server options\"):\n"
    "  --reclaim-wait DUR    a queue reclaims what others borrow only after its workload\n"
    "                        waited this long (default 10m; 0: at once)\n"
    "  --reclaim-min-runtime DUR  no workload is evicted before it ran this long (default 10m; 0: none)\n"
    "  --admission-hold DUR  nodes freed by reclaim are kept for the claimant at most this long (default 60s)\n"
    "  --max-preemptions N|unlimited  evictions of one workload per window (default 1)\n"
    "  --preemption-window DUR  that window (default 1h)\n"
    "  --evict-charge F      share of a victim's lost GPU-hours charged to the reclaiming queue (default 1; 0: none)\n"
    "  --reclaim-from fairshare|nominal  victims from queues above their fair share (default) or above nominal\n"
    "  --victims nodewise|global  reclaim victims chosen per node for the claimant's pods (default) or in\n"
    "                        one global order\n"
    "  --admission-halflife DUR  half-life of the fair-share usage history (default 1h)\n"
    "  --starvation-wait DUR|never  wait before a workload of 8+ GPUs gets a reservation (default 30m; 0: at once)\n"
    "  --reserve-horizon DUR|any  reserve only for a start this close (default 1h)\n"
    "  --admission-quota-only  admit on quota alone, without the placement check (Kueue's behaviour)\n"
    "  DUR: 250ms, 30s, 10m, 1h (a plain number is seconds)\n";

static int adm_bad(const char *cmd, const char *flag, const char *v, const char *why)
{
    fprintf(stderr, "%s: --%s \"%s\": %s\n", cmd, flag, v, why);
    return 2;
}

/* A duration of at least min_ns. 0 or 2 (said why). */
static int adm_duration(const char *cmd, const char *flag, const char *v, int64_t min_ns, const char *zero_why,
                        int64_t *ns)
{
    int rc = gs_duration_parse(v, ns);
    if (rc == GS_ERANGE) return adm_bad(cmd, flag, v, "too large");
    if (rc && v[0] == '-') return adm_bad(cmd, flag, v, "must not be negative");
    if (rc) return adm_bad(cmd, flag, v, "want a duration like 30s, 10m or 1h (a plain number is seconds)");
    if (*ns < min_ns) return adm_bad(cmd, flag, v, zero_why);
    return 0;
}

static int adm_count(const char *cmd, const char *flag, const char *v, int *out)
{
    if (!strcmp(v, "unlimited")) {
        *out = -1;
        return 0;
    }
    errno = 0;
    char *end;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n > 1000000)
        return adm_bad(cmd, flag, v, "want a whole number from 1 to 1000000, or unlimited");
    if (n < 1)
        return adm_bad(cmd, flag, v, "must be at least 1, or unlimited (to turn reclaim off, leave the "
                                     "ClusterQueues' preemption policies at Never)");
    *out = (int)n;
    return 0;
}

static int adm_charge(const char *cmd, const char *flag, const char *v, double *out)
{
    errno = 0;
    char *end;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x)) return adm_bad(cmd, flag, v, "want a number such as 1 or 0.5");
    if (x < 0) return adm_bad(cmd, flag, v, "must not be negative");
    *out = x > 0 ? x : -1; /* the library's "none" */
    return 0;
}

int gs__adm_option(struct gs_admission_opts *o, int code, const char *v, const char *cmd)
{
    const struct option *f = adm_options;
    while (f->name && f->val != code) f++;
    if (!f->name) return 2;
    int rc = 0;
    switch (code) {
    case A_HALFLIFE: return adm_duration(cmd, f->name, v, 1, "must be more than 0", &o->halflife_ns);
    case A_RECLAIM_WAIT:
        rc = adm_duration(cmd, f->name, v, 0, "", &o->reclaim_wait_ns);
        if (!rc && !o->reclaim_wait_ns) o->reclaim_wait_ns = -1; /* the library's "at once" */
        return rc;
    case A_MIN_RUNTIME:
        rc = adm_duration(cmd, f->name, v, 0, "", &o->reclaim_min_runtime_ns);
        if (!rc && !o->reclaim_min_runtime_ns) o->reclaim_min_runtime_ns = -1; /* the library's "none" */
        return rc;
    case A_HOLD:
        return adm_duration(cmd, f->name, v, 1,
                            "must be more than 0: the claimant's pods need the freed nodes until they bind",
                            &o->hold_ns);
    case A_STARVATION:
        if (!strcmp(v, "never")) return o->starvation_wait_ns = -1, 0;
        rc = adm_duration(cmd, f->name, v, 0, "", &o->starvation_wait_ns);
        if (!rc && !o->starvation_wait_ns) o->starvation_wait_ns = 1; /* at once: the library reads 0 as 30 min */
        return rc;
    case A_HORIZON:
        if (!strcmp(v, "any")) return o->reserve_horizon_ns = -1, 0;
        return adm_duration(cmd, f->name, v, 1, "must be more than 0 (or any)", &o->reserve_horizon_ns);
    case A_MAX_PREEMPT: return adm_count(cmd, f->name, v, &o->max_preemptions);
    case A_WINDOW: return adm_duration(cmd, f->name, v, 1, "must be more than 0", &o->preemption_window_ns);
    case A_CHARGE: return adm_charge(cmd, f->name, v, &o->evict_charge);
    case A_FROM:
        if (strcmp(v, "fairshare") && strcmp(v, "nominal")) return adm_bad(cmd, f->name, v, "want fairshare or nominal");
        o->reclaim_above_nominal = !strcmp(v, "nominal");
        return 0;
    case A_VICTIMS:
        if (strcmp(v, "nodewise") && strcmp(v, "global")) return adm_bad(cmd, f->name, v, "want nodewise or global");
        o->global_victims = !strcmp(v, "global");
        return 0;
    case A_QUOTA_ONLY: o->quota_only = true; return 0;
    }
    return 2;
}

int gs__event_ttl_option(const char *cmd, const char *v, int64_t *seconds)
{
    int64_t ns = 0;
    int rc = adm_duration(cmd, "event-ttl", v, GS_NS_PER_SEC, "must be at least 1s (Events are kept this long)", &ns);
    *seconds = rc ? 0 : ns / GS_NS_PER_SEC;
    return rc;
}

void gs__adm_options_merge(const struct option *base, struct option *out, size_t cap)
{
    size_t n = 0;
    for (; base->name && n + 1 < cap; base++) out[n++] = *base;
    for (const struct option *a = adm_options; a->name && n + 1 < cap; a++) out[n++] = *a;
    out[n] = (struct option){0};
}

/*--- The command ---*/

static void usage(FILE *f)
{
    fprintf(f, "usage: gpusched server [options]\n\n"
               "Serves the Kubernetes-shaped API (kubectl works against it), keeps objects in\n"
               "SQLite (or etcd: --store etcd) and runs the scheduler on the stored pods and nodes.\n\n"
               "  --data-dir DIR        state directory (default ./gpusched-data)\n"
               "  --listen ADDR:PORT    address (default 127.0.0.1:6443; port 0 = any free port)\n"
               "  --insecure            plain http instead of https\n"
               "  --tokens FILE         token,user,groups,namespaces,role lines\n"
               "                        (default DIR/tokens.csv, created with an admin token)\n"
               "  --no-auth             every caller is admin (local tests only)\n"
               "  --config FILE         KubeSchedulerConfiguration (profiles, plugins)\n"
               "  --no-scheduler        serve the API only\n"
               "  --qps N --burst N     per-token rate limit (default 2000/s; --qps -1 turns it off)\n"
               "  --max-body BYTES      request body limit (default 3145728)\n"
               "  --sync full|normal    fsync every commit (full) or survive process crashes only (default)\n"
               "  --accept-store-regression  start even though the store lost acknowledged writes\n"
               "                        (see docs/RUNNING.md: restore from a backup first if you can)\n"
               "  --port-file FILE      write the bound port there once serving\n"
               "  --log-level LEVEL     debug|info|warn|error (default info)\n"
               "  --event-ttl DUR       delete Events this long after their last occurrence (default 1h)\n"
               "  --bench               measure the API and the scheduler instead (see --bench --help)\n");
    fputs(gs__adm_usage, f);
    fputs(gs__net_usage, f);
    fputs(gs__lc_usage, f);
    fputs(gs__store_usage, f);
    fputs(gs__ha_usage, f); /* replica flags */
}

static int bad(const char *flag, const char *v, const char *why)
{
    fprintf(stderr, "gpusched server: --%s \"%s\": %s\n", flag, v, why);
    return 2;
}

static int number(const char *flag, const char *v, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(v, &end);
    return errno || end == v || *end || !isfinite(*out) ? bad(flag, v, "want a number") : 0;
}

static int parse(int argc, char **argv, struct gs_server_opts *o, struct gs_admission_opts *adm,
                 struct gs__lc_flags *lc, struct gs__store_flags *sf, const char **port_file)
{
    static const struct option base[] = {
        {"data-dir", required_argument, 0, 'd'}, {"listen", required_argument, 0, 'l'},
        {"insecure", no_argument, 0, 'i'},       {"tokens", required_argument, 0, 't'},
        {"no-auth", no_argument, 0, 'A'},        {"config", required_argument, 0, 'c'},
        {"no-scheduler", no_argument, 0, 'S'},   {"qps", required_argument, 0, 'q'},
        {"burst", required_argument, 0, 'b'},    {"max-body", required_argument, 0, 'm'},
        {"sync", required_argument, 0, 's'},     {"port-file", required_argument, 0, 'p'},
        {"log-level", required_argument, 0, 'L'}, {"help", no_argument, 0, 'h'},
        {"event-ttl", required_argument, 0, 'E'},
        {"accept-store-regression", no_argument, 0, 'R'},
        {0, 0, 0, 0},
    };
    struct option opts[64];
    gs__adm_options_merge(base, opts, sizeof opts / sizeof opts[0]);
    gs__net_options_append(opts, sizeof opts / sizeof opts[0]); /* hardening flags (net_flags.c) */
    gs__lc_options_append(opts, sizeof opts / sizeof opts[0]);
    gs__store_options_append(opts, sizeof opts / sizeof opts[0]);
    gs__ha_options_append(opts, sizeof opts / sizeof opts[0]); /* replica flags (cmd_server_ha.c) */
    optind = 1;
    int c, rc = 0;
    double x;
    enum gs_log_level lvl;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': o->data_dir = optarg; break;
        case 'l': o->listen = optarg; break;
        case 'i': o->insecure = true; break;
        case 't': o->tokens_file = optarg; break;
        case 'A': o->no_auth = true; break;
        case 'c': o->sched_config = optarg; break;
        case 'S': o->no_scheduler = true; break;
        case 'q': rc = number("qps", optarg, &o->qps); break;
        case 'b': rc = number("burst", optarg, &o->burst); break;
        case 'm':
            if (!(rc = number("max-body", optarg, &x)) && (x < 1 || x > 1e12 || x != floor(x)))
                rc = bad("max-body", optarg, "want a whole number of bytes, at least 1");
            o->max_body = rc ? 0 : (size_t)x;
            break;
        case 's':
            if (strcmp(optarg, "full") && strcmp(optarg, "normal")) rc = bad("sync", optarg, "want full or normal");
            o->sync_full = !strcmp(optarg, "full");
            break;
        case 'p': *port_file = optarg; break;
        case 'E': rc = gs__event_ttl_option("gpusched server", optarg, &o->event_ttl_s); break;
        case 'R': o->accept_store_regression = true; break;
        case 'L':
            if (gs_log_level_parse(optarg, &lvl)) rc = bad("log-level", optarg, "want debug, info, warn or error");
            else gs_log_set_level(lvl);
            break;
        case 'h': usage(stdout); return 0;
        case '?': usage(stderr); return 2; /* getopt said which option */
        default:
            /* hardening, node lifecycle, then admission flags */
            if ((rc = gs__net_option(o, c, optarg, "server")) < 0 && (rc = gs__lc_option(lc, o, c, optarg, "gpusched server")) < 0 &&
                (rc = gs__store_option(sf, o, c, optarg, "gpusched server")) < 0 &&
                (rc = gs__ha_option(o, c, optarg, "gpusched server")) < 0) /* replica flags */
                rc = gs__adm_option(adm, c, optarg, "gpusched server");
            break;
        }
        if (rc) return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "gpusched server: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    if ((rc = gs__store_flags_check(sf, o, "gpusched server"))) return rc;
    if (gs__ha_check(o, "gpusched server")) return 2; /* replica flags */
    return -1;
}

int gs_cmd_server(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--bench")) return gs__server_bench(argc, argv);
    struct gs_server_opts o = {0};
    struct gs_admission_opts adm = {.history_weight = -1}; /* the library's defaults */
    o.admission = &adm;
    const char *port_file = NULL;
    struct gs__lc_flags lc;
    gs__lc_flags_init(&lc, &o);
    struct gs__store_flags sf = {0};
    int rc = parse(argc, argv, &o, &adm, &lc, &sf, &port_file);
    if (rc >= 0) {
        gs__store_flags_free(&sf);
        return rc;
    }
    /* Block the stop signals before any thread starts, so only sigwait sees them. */
    sigset_t set;
    gs_cli_block_stop_signals(&set, NULL);
    signal(SIGXFSZ, SIG_IGN); /* a file-size limit must fail the write (the store reports it), not kill the server */
    struct gs_server *s = NULL;
    struct gs_diags d = {0};
    int err = gs_server_start(&o, &s, &d);
    if (err) {
        for (size_t i = 0; i < d.n; i++) fprintf(stderr, "gpusched server: %s: %s\n", d.v[i].path, d.v[i].msg);
        if (!d.n) fprintf(stderr, "gpusched server: %s\n", gs_strerror(err));
        gs_diags_free(&d);
        gs__store_flags_free(&sf);
        return 1;
    }
    gs_diags_free(&d);
    printf("gpusched server listening on %s\nkubeconfig: %s\n", gs_server_url(s), gs_server_kubeconfig(s));
    fflush(stdout);
    if (port_file) {
        FILE *f = fopen(port_file, "we");
        if (f) {
            fprintf(f, "%d\n", gs_server_port(s));
            fclose(f);
        }
    }
    int sig = 0;
    sigwait(&set, &sig);
    gs_log(GS_LOG_INFO, "server: stopping", "signal", sig == SIGINT ? "SIGINT" : "SIGTERM", NULL);
    gs_server_stop(s);
    gs__store_flags_free(&sf);
    return 0;
}
