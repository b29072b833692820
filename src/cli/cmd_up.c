/*
 * cmd_up.c - `gpusched up`: the whole stack on one machine in one command:
 * the control plane (API, store, scheduler, node lifecycle) and one agent
 * per node, real GPUs when NVML finds them, mock ones otherwise.
 *
 * A mock spec may describe several nodes ("2x8xH100-80GB,nvlink=islands:4"
 * is two nodes of eight); each becomes an agent thread set in this process,
 * named gpu-node-1..N, with its state under <data-dir>/agent/<node>. The
 * agents reach the server through the kubeconfig it writes, like any
 * client, so what works here works across machines.
 *
 * On SIGINT/SIGTERM the agents stop their pods first, then the server.
 */
#include "agent/agent.h"
#include "cli/commands.h"
#include "cli/dra_plugin.h"
#include "cli/net_flags.h"
#include "cli/cmd_server_lc.h" /* node lifecycle flags */
#include "cli/signals.h"
#include "control/server.h"
#include "core/log.h"
#include "discovery/discovery.h"
#include "sched/admission/admission.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_NODES 256

struct up_opts {
    struct gs_server_opts srv;
    struct gs_admission_opts adm; /* the server's admission flags (cmd_server.c) */
    struct gs__lc_flags lc;       /* the server's node lifecycle flags (cmd_server_lc.c) */
    const char *mock;
    const char *node_prefix;
    int grace_ms, heartbeat_ms;
    int64_t metrics_ns;
    bool keep_pods;
    const char *info_file;
    long long pod_uid, pod_gid; /* 0: the agent's default (65534) */
    const char *default_runtime, *runc_bin, *cdi_dirs; /* the agents' runtimes (docs/NODE.md "Runtimes") */
};

static void usage(FILE *f)
{
    fprintf(f, "usage: gpusched up [options]\n\n"
               "Runs the server and a local agent per node in one process. Prints the address\n"
               "and an admin token and writes DATA/kubeconfig for kubectl and gpusched. Each\n"
               "agent gets a node token of its own (added to the tokens file), never the admin one.\n\n"
               "  --data-dir DIR        state (default ./gpusched-data)\n"
               "  --listen ADDR:PORT    API address (default 127.0.0.1:6443)\n"
               "  --mock SPEC           mock GPUs instead of NVML; \"2x8xH100-80GB,nvlink=islands:4\"\n"
               "                        is two nodes with eight GPUs each (see docs/RUNNING.md)\n"
               "  --node-prefix NAME    mock node names NAME-1..N (default gpu-node)\n"
               "  --insecure            plain http\n"
               "  --config FILE         KubeSchedulerConfiguration\n"
               "  --grace-ms N          pod stop grace period (default 3000)\n"
               "  --metrics-interval-ms N  GPU metric collection period (default 2000)\n"
               "  --info FILE           write {server, token, kubeconfig, nodes} as JSON once ready\n"
               "  --keep-pods           leave pods running on exit (a later `up` re-adopts them)\n"
               "  --pod-uid N --pod-gid N  ids pods run as when up runs as root and the pod asks\n"
               "                        for none (securityContext.runAsUser; default 65534)\n"
               "  --default-runtime R   process|runc for pods that name no RuntimeClass (default\n"
               "                        process: commands, no image needed; docs/NODE.md \"Runtimes\")\n"
               "  --runc PATH           the runc binary (default runc from PATH)\n"
               "  --cdi-dir DIRS        CDI spec directories of runc containers' devices (':'-separated)\n"
               "  --log-level LEVEL     debug|info|warn|error (default warn)\n"
               "  --event-ttl DUR       delete Events this long after their last occurrence (default 1h)\n"
               "  --accept-store-regression  start even though the store lost acknowledged writes\n"
               "                        (see docs/RUNNING.md: restore from a backup first if you can)\n");
    fputs(gs__adm_usage, f);
    fputs(gs__net_usage, f);
    fputs(gs__lc_usage, f);
}

enum { O_DATA = 256, O_LISTEN, O_MOCK, O_PREFIX, O_INSECURE, O_CONFIG, O_GRACE, O_METRICS, O_INFO, O_KEEP, O_LOG,
       O_POD_UID, O_POD_GID, O_EVENT_TTL, O_ACCEPT, O_RUNTIME, O_RUNC, O_CDI_DIRS };

static int parse(int argc, char **argv, struct up_opts *o)
{
    static const struct option base[] = {
        {"data-dir", required_argument, 0, O_DATA},   {"listen", required_argument, 0, O_LISTEN},
        {"mock", required_argument, 0, O_MOCK},       {"node-prefix", required_argument, 0, O_PREFIX},
        {"insecure", no_argument, 0, O_INSECURE},     {"config", required_argument, 0, O_CONFIG},
        {"grace-ms", required_argument, 0, O_GRACE},  {"metrics-interval-ms", required_argument, 0, O_METRICS},
        {"info", required_argument, 0, O_INFO},       {"keep-pods", no_argument, 0, O_KEEP},
        {"log-level", required_argument, 0, O_LOG},   {"help", no_argument, 0, 'h'},
        {"pod-uid", required_argument, 0, O_POD_UID}, {"pod-gid", required_argument, 0, O_POD_GID},
        {"event-ttl", required_argument, 0, O_EVENT_TTL},
        {"accept-store-regression", no_argument, 0, O_ACCEPT},
        {"default-runtime", required_argument, 0, O_RUNTIME}, {"runc", required_argument, 0, O_RUNC},
        {"cdi-dir", required_argument, 0, O_CDI_DIRS},
        {0, 0, 0, 0},
    };
    struct option opts[64];
    gs__adm_options_merge(base, opts, sizeof opts / sizeof opts[0]);
    gs__net_options_append(opts, sizeof opts / sizeof opts[0]); /* hardening flags (net_flags.c) */
    gs__lc_options_append(opts, sizeof opts / sizeof opts[0]);
    optind = 1;
    int c, rc;
    enum gs_log_level lvl;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_DATA: o->srv.data_dir = optarg; break;
        case O_LISTEN: o->srv.listen = optarg; break;
        case O_MOCK: o->mock = optarg; break;
        case O_PREFIX: o->node_prefix = optarg; break;
        case O_INSECURE: o->srv.insecure = true; break;
        case O_CONFIG: o->srv.sched_config = optarg; break;
        case O_GRACE: o->grace_ms = atoi(optarg); break;
        case O_METRICS: o->metrics_ns = atoll(optarg) * 1000000LL; break;
        case O_INFO: o->info_file = optarg; break;
        case O_KEEP: o->keep_pods = true; break;
        case O_POD_UID:
            if ((rc = gs__pod_id_flag("up", "pod-uid", optarg, &o->pod_uid))) return rc;
            break;
        case O_POD_GID:
            if ((rc = gs__pod_id_flag("up", "pod-gid", optarg, &o->pod_gid))) return rc;
            break;
        case O_EVENT_TTL:
            if ((rc = gs__event_ttl_option("gpusched up", optarg, &o->srv.event_ttl_s))) return rc;
            break;
        case O_ACCEPT: o->srv.accept_store_regression = true; break;
        case O_RUNTIME:
            if (strcmp(optarg, "process") && strcmp(optarg, "runc")) {
                fprintf(stderr, "gpusched up: --default-runtime \"%s\": want process or runc\n", optarg);
                return 2;
            }
            o->default_runtime = optarg;
            break;
        case O_RUNC: o->runc_bin = optarg; break;
        case O_CDI_DIRS: o->cdi_dirs = optarg; break;
        case O_LOG:
            if (gs_log_level_parse(optarg, &lvl)) {
                fprintf(stderr, "gpusched up: --log-level \"%s\": want debug, info, warn or error\n", optarg);
                return 2;
            }
            gs_log_set_level(lvl);
            break;
        case 'h': usage(stdout); return 0;
        case '?': usage(stderr); return 2; /* getopt said which option */
        default: /* hardening, node lifecycle, then admission flags */
            if ((rc = gs__net_option(&o->srv, c, optarg, "up")) < 0 &&
                (rc = gs__lc_option(&o->lc, &o->srv, c, optarg, "gpusched up")) < 0)
                rc = gs__adm_option(&o->adm, c, optarg, "gpusched up");
            if (rc) return rc;
            break;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpusched up: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    return -1;
}

/* Does NVML see a GPU here? Otherwise up needs --mock to have GPUs at all. */
static bool nvml_has_gpus(void)
{
    struct gs_clock clk;
    gs_clock_init_real(&clk);
    struct gs_disc d = {0};
    if (gs_disc_open_nvml(&d, NULL, NULL, &clk)) return false;
    struct gs_inventory inv;
    bool yes = gs_disc_inventory(&d, &inv) == 0 && inv.n_gpus > 0;
    gs_disc_close(&d);
    return yes;
}

struct agents {
    struct gs_agent *v[MAX_NODES];
    int n;
    char names[MAX_NODES][64];
    char dirs[MAX_NODES][1100];
    const char *name_ptrs[MAX_NODES];
    int planned;
    /* One DRA plugin per node (cmd_dra_plugin.c) on a thread, in <data>/dra/<node>/. */
    struct gs_dra_plugin_opts dra[MAX_NODES];
    char dra_dir[MAX_NODES][1100], dra_plugins[MAX_NODES][1200], dra_reg[MAX_NODES][1200], dra_cdi[MAX_NODES][1200];
    pthread_t dra_th[MAX_NODES];
    bool dra_started[MAX_NODES];
};

static volatile sig_atomic_t dra_stop;

static void *dra_main(void *arg)
{
    gs_dra_plugin_main(arg, &dra_stop);
    return NULL;
}

/* The node's DRA plugin, talking to the server with the node's own token. */
static void start_dra(struct agents *ag, int i, const char *data, const char *spec, const struct gs_agent_opts *ao)
{
    snprintf(ag->dra_dir[i], sizeof ag->dra_dir[i], "%s/dra/%s", data, ag->names[i]);
    snprintf(ag->dra_plugins[i], sizeof ag->dra_plugins[i], "%s/plugins", ag->dra_dir[i]);
    snprintf(ag->dra_reg[i], sizeof ag->dra_reg[i], "%s/plugins_registry", ag->dra_dir[i]);
    snprintf(ag->dra_cdi[i], sizeof ag->dra_cdi[i], "%s/cdi", ag->dra_dir[i]);
    struct gs_dra_plugin_opts *d = &ag->dra[i];
    *d = (struct gs_dra_plugin_opts){.mock = spec, .nvml = !spec, .node = ag->names[i],
                                     .plugins_dir = ag->dra_plugins[i], .registry_dir = ag->dra_reg[i],
                                     .cdi_dir = ag->dra_cdi[i], .conn = ao->conn, .api = true,
                                     .publish = false}; /* the agent publishes its node's slices */
    ag->dra_started[i] = !pthread_create(&ag->dra_th[i], NULL, dra_main, d);
    if (!ag->dra_started[i]) fprintf(stderr, "gpusched up: node %s: cannot start its DRA plugin\n", ag->names[i]);
}

static void stop_dra(struct agents *ag)
{
    dra_stop = 1;
    for (int i = 0; i < ag->planned; i++)
        if (ag->dra_started[i]) pthread_join(ag->dra_th[i], NULL);
}

/* The agents' node names, known before the server starts so that it can
 * mint each a node token: an agent never holds the admin token. */
static int plan_agents(struct up_opts *o, struct agents *ag, const char **spec_out)
{
    int nodes = 1;
    const char *spec = o->mock;
    if (spec && gs_agent_mock_nodes(o->mock, &nodes, &spec)) {
        fprintf(stderr, "gpusched up: bad --mock node count in \"%s\"\n", o->mock);
        return 2;
    }
    if (!spec && !nvml_has_gpus())
        fprintf(stderr, "gpusched up: NVML found no GPU; the local node has none (use --mock SPEC for mock GPUs)\n");
    if (nodes > MAX_NODES) nodes = MAX_NODES;
    for (int i = 0; i < nodes; i++) {
        if (spec) snprintf(ag->names[i], sizeof ag->names[i], "%s-%d", o->node_prefix ? o->node_prefix : "gpu-node", i + 1);
        else {
            char host[64] = "localhost";
            gethostname(host, sizeof host - 1);
            snprintf(ag->names[i], sizeof ag->names[i], "%s", host);
        }
        ag->name_ptrs[i] = ag->names[i];
    }
    ag->planned = nodes;
    *spec_out = spec;
    return 0;
}

static int start_agents(struct up_opts *o, struct gs_server *s, struct agents *ag, const char *spec)
{
    const char *data = o->srv.data_dir ? o->srv.data_dir : "gpusched-data";
    for (int i = 0; i < ag->planned; i++) {
        struct gs_agent_opts ao = {0};
        snprintf(ag->dirs[i], sizeof ag->dirs[i], "%s/agent/%s", data, ag->names[i]);
        ao.node_name = ag->names[i];
        ao.mock_spec = spec;
        ao.backend = spec ? "mock" : "auto";
        ao.state_dir = ag->dirs[i];
        ao.conn.kubeconfig = gs_server_kubeconfig(s); /* server URL and CA; the token is the node's own */
        ao.conn.token = gs_server_node_token(s, ag->names[i]);
        if (!ao.conn.token && gs_server_admin_token(s)) {
            fprintf(stderr, "gpusched up: agent %s: no node token in the tokens file\n", ag->names[i]);
            return 1;
        }
        ao.grace_ms = o->grace_ms;
        ao.pod_uid = o->pod_uid;
        ao.pod_gid = o->pod_gid;
        ao.default_runtime = o->default_runtime;
        ao.runc_bin = o->runc_bin;
        ao.cdi_dirs = o->cdi_dirs;
        const char *tok = gs_server_agent_token(s); /* what the server's log proxy sends */
        ao.http_token = tok && *tok ? tok : NULL;
        ao.metrics_interval_ns = o->metrics_ns ? o->metrics_ns : 2000000000LL;
        start_dra(ag, i, data, spec, &ao);
        ao.dra_registry_dir = ag->dra_reg[i];
        ao.dra_cdi_dir = ag->dra_cdi[i];
        char err[512] = "";
        if (gs_agent_start(&ao, &ag->v[i], err, sizeof err)) {
            fprintf(stderr, "gpusched up: agent %s: %s\n", ag->names[i], err);
            return 1;
        }
        ag->n++;
    }
    return 0;
}

static void write_info(const char *path, struct gs_server *s, struct agents *ag)
{
    json_t *nodes = json_array();
    for (int i = 0; i < ag->n; i++)
        json_array_append_new(nodes, json_pack("{s:s,s:i}", "name", gs_agent_node(ag->v[i]), "port",
                                               gs_agent_port(ag->v[i])));
    const char *tok = gs_server_admin_token(s);
    json_t *doc = json_pack("{s:s,s:s?,s:s,s:o}", "server", gs_server_url(s), "token", tok, "kubeconfig",
                            gs_server_kubeconfig(s), "nodes", nodes);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (doc && !json_dump_file(doc, tmp, JSON_INDENT(2))) rename(tmp, path);
    json_decref(doc);
}

/* Waits (up to 10 s) until every agent registered its Node. */
static void wait_registered(struct agents *ag)
{
    for (int t = 0; t < 200; t++) {
        bool all = true;
        for (int i = 0; i < ag->n; i++) all &= gs_agent_registered(ag->v[i]);
        if (all) return;
        usleep(50000);
    }
    fprintf(stderr, "gpusched up: some agents have not registered yet\n");
}

int gs_cmd_up(int argc, char **argv)
{
    struct up_opts o = {.adm = {.history_weight = -1}}; /* admission: the library's defaults */
    o.srv.admission = &o.adm;
    gs__lc_flags_init(&o.lc, &o.srv);
    gs_log_set_level(GS_LOG_WARN);
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    sigset_t set;
    gs_cli_block_stop_signals(&set, NULL);
    struct agents *ag = calloc(1, sizeof *ag);
    const char *spec = NULL;
    if (!ag) return 1;
    if ((rc = plan_agents(&o, ag, &spec))) {
        free(ag);
        return rc;
    }
    o.srv.node_names = ag->name_ptrs;
    o.srv.nnode_names = (size_t)ag->planned;
    struct gs_server *s = NULL;
    struct gs_diags d = {0};
    if (gs_server_start(&o.srv, &s, &d)) {
        free(ag);
        for (size_t i = 0; i < d.n; i++) fprintf(stderr, "gpusched up: %s: %s\n", d.v[i].path, d.v[i].msg);
        if (!d.n) fprintf(stderr, "gpusched up: cannot start the server\n");
        gs_diags_free(&d);
        return 1;
    }
    gs_diags_free(&d);
    rc = start_agents(&o, s, ag, spec);
    if (!rc) {
        wait_registered(ag);
        const char *tok = gs_server_admin_token(s);
        printf("gpusched is up\n  server:     %s\n  token:      %s\n  kubeconfig: %s\n  nodes:     ", gs_server_url(s),
               tok ? tok : "(none: --no-auth)", gs_server_kubeconfig(s));
        for (int i = 0; i < ag->n; i++) printf(" %s", gs_agent_node(ag->v[i]));
        printf("\n  try:        KUBECONFIG=%s gpusched get nodes\n", gs_server_kubeconfig(s));
        fflush(stdout);
        if (o.info_file) write_info(o.info_file, s, ag);
        int sig = 0;
        sigwait(&set, &sig);
    }
    for (int i = 0; ag && i < ag->n; i++) gs_agent_stop(ag->v[i], !o.keep_pods);
    if (ag) stop_dra(ag);
    free(ag);
    gs_server_stop(s);
    return rc;
}
