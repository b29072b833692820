/*
 * cmd_server.c - `gpusched server`: the control plane (API, store, scheduler)
 * in the foreground until SIGINT/SIGTERM; `--bench` measures it instead.
 */
#include "cli/commands.h"
#include "cli/signals.h"
#include "control/server.h"
#include "core/log.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* In src/control/bench.c, which is always part of the library. */
int gs__server_bench(int argc, char **argv);

static void usage(FILE *f)
{
    fprintf(f, "usage: gpusched server [options]\n\n"
               "Serves the Kubernetes-shaped API (kubectl works against it), keeps objects in\n"
               "SQLite and runs the scheduler on the stored pods and nodes.\n\n"
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
               "  --port-file FILE      write the bound port there once serving\n"
               "  --log-level LEVEL     debug|info|warn|error (default info)\n"
               "  --bench               measure the API and the scheduler instead (see --bench --help)\n");
}

static int parse(int argc, char **argv, struct gs_server_opts *o, const char **port_file)
{
    static const struct option opts[] = {
        {"data-dir", required_argument, 0, 'd'}, {"listen", required_argument, 0, 'l'},
        {"insecure", no_argument, 0, 'i'},       {"tokens", required_argument, 0, 't'},
        {"no-auth", no_argument, 0, 'A'},        {"config", required_argument, 0, 'c'},
        {"no-scheduler", no_argument, 0, 'S'},   {"qps", required_argument, 0, 'q'},
        {"burst", required_argument, 0, 'b'},    {"max-body", required_argument, 0, 'm'},
        {"sync", required_argument, 0, 's'},     {"port-file", required_argument, 0, 'p'},
        {"log-level", required_argument, 0, 'L'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    optind = 1;
    int c;
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
        case 'q': o->qps = atof(optarg); break;
        case 'b': o->burst = atof(optarg); break;
        case 'm': o->max_body = strtoull(optarg, NULL, 10); break;
        case 's':
            if (strcmp(optarg, "full") && strcmp(optarg, "normal")) return 2;
            o->sync_full = !strcmp(optarg, "full");
            break;
        case 'p': *port_file = optarg; break;
        case 'L':
            if (gs_log_level_parse(optarg, &lvl)) return 2;
            gs_log_set_level(lvl);
            break;
        case 'h': usage(stdout); return 0;
        default: return 2;
        }
    }
    return optind < argc ? 2 : -1;
}

int gs_cmd_server(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--bench")) return gs__server_bench(argc, argv);
    struct gs_server_opts o = {0};
    const char *port_file = NULL;
    int rc = parse(argc, argv, &o, &port_file);
    if (rc >= 0) {
        if (rc == 2) usage(stderr);
        return rc;
    }
    /* Block the stop signals before any thread starts, so only sigwait sees them. */
    sigset_t set;
    gs_cli_block_stop_signals(&set, NULL);
    struct gs_server *s = NULL;
    struct gs_diags d = {0};
    int err = gs_server_start(&o, &s, &d);
    if (err) {
        for (size_t i = 0; i < d.n; i++) fprintf(stderr, "gpusched server: %s: %s\n", d.v[i].path, d.v[i].msg);
        if (!d.n) fprintf(stderr, "gpusched server: %s\n", gs_strerror(err));
        gs_diags_free(&d);
        return 1;
    }
    gs_diags_free(&d);
    printf("gpusched server listening on %s\nkubeconfig: %s\n", gs_server_url(s), gs_server_kubeconfig(s));
    fflush(stdout);
    if (port_file) {
        FILE *f = fopen(port_file, "w");
        if (f) {
            fprintf(f, "%d\n", gs_server_port(s));
            fclose(f);
        }
    }
    int sig = 0;
    sigwait(&set, &sig);
    gs_log(GS_LOG_INFO, "server: stopping", "signal", sig == SIGINT ? "SIGINT" : "SIGTERM", NULL);
    gs_server_stop(s);
    return 0;
}
