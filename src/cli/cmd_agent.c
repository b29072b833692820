/*
 * cmd_agent.c - `gpusched agent`: the node agent in the foreground until
 * SIGINT/SIGTERM. Pods keep running when it stops (a new agent re-adopts
 * them) unless --kill-pods-on-exit says otherwise.
 */
#include "agent/agent.h"
#include "cli/commands.h"
#include "cli/net_flags.h"
#include "control/secret.h"
#include "core/error.h"
#include "cli/signals.h"
#include "core/log.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: gpusched agent [options]\n\n"
               "Registers this node with the server, runs the pods bound to it as processes\n"
               "with the GPUs the scheduler chose, and serves their logs and GPU metrics.\n\n"
               "  --server URL[,URL...] API server (else GPUSCHED_SERVER or the kubeconfig); with\n"
               "                        several (replicas), the next is used when one does not answer\n"
               "  --token-file FILE     the node's bearer token (else GPUSCHED_TOKEN in the\n"
               "                        environment, else the kubeconfig); never on the command line,\n"
               "                        where every process on the host (the pods too) can read it\n"
               "  --kubeconfig FILE     connection settings (default $KUBECONFIG, ./gpusched-data/kubeconfig)\n"
               "  --certificate-authority FILE   CA to verify the server with\n"
               "  --insecure-skip-tls-verify\n"
               "  --node-name NAME      node name (default: the hostname)\n"
               "  --mock SPEC           mock GPUs, e.g. 8xH100-80GB,nvlink=islands:4 (no NVML needed)\n"
               "  --backend NAME        auto|nvml|sysfs|mock (default auto)\n"
               "  --state-dir DIR       pods' directories and logs (default ./gpusched-data/agent/NODE)\n"
               "  --listen ADDR:PORT    logs and /metrics endpoint (default 127.0.0.1:0)\n"
               "  --advertise HOST      host put in the node's endpoint (default: the listen host)\n"
               "  --heartbeat-ms N      heartbeat period (default 2000)\n"
               "  --grace-ms N          SIGTERM to SIGKILL (default 3000)\n"
               "  --metrics-interval-ms N  GPU metric collection period (default 5000)\n"
               "  --labels k=v,...      extra node labels\n"
               "  --kill-pods-on-exit   stop every pod when the agent stops\n"
               "  --agent-token-file FILE  bearer token required on every route but /metrics and\n"
               "                        /healthz: the server's DATA/agent.token, so its log proxy\n"
               "                        gets in (default: a random one; logs then unreachable)\n"
               "  --pod-uid N --pod-gid N  ids pods run as when the agent is root and the pod asks\n"
               "                        for none (securityContext.runAsUser; default 65534)\n"
               "  --dra-registry-dir DIR  kubelet plugin registry where DRA plugins are found, for pods\n"
               "                        with resource claims (gpusched dra-plugin --registry-dir)\n"
               "  --dra-cdi-dir DIR     the DRA plugins' CDI specs (default /var/run/cdi)\n"
               "  --no-resource-slices  publish no DRA ResourceSlices for this node's GPUs\n"
               "  --dra-partitionable   publish MIG-capable GPUs as counter sets with every MIG\n"
               "                        placement (partitionable devices; docs/DRA.md)\n"
               "  --default-runtime R   process|runc: the handler for pods that name no RuntimeClass\n"
               "                        (default process; docs/NODE.md \"Runtimes\")\n"
               "  --runc PATH           the runc binary (default runc from PATH)\n"
               "  --cdi-dir DIRS        CDI spec directories runc containers get their devices from,\n"
               "                        ':'-separated (default STATE/cdi:/etc/cdi:/var/run/cdi)\n"
               "  --log-level LEVEL     debug|info|warn|error\n");
}

enum { O_SERVER = 256, O_TOKEN, O_TOKEN_FILE, O_KUBECONFIG, O_CA, O_INSECURE, O_NODE, O_MOCK, O_BACKEND, O_STATE, O_LISTEN,
       O_ADVERTISE, O_HB, O_GRACE, O_METRICS, O_LABELS, O_KILL, O_LOG, O_AGENT_TOKEN_FILE, O_POD_UID, O_POD_GID,
       O_DRA_REGISTRY, O_DRA_CDI, O_NO_SLICES, O_PARTITIONABLE, O_RUNTIME, O_RUNC, O_CDI_DIRS };

/* The token in path (one line, surrounding blanks dropped) into buf. */
static int read_token(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "gpusched agent: --token-file \"%s\": %s\n", path, strerror(errno));
        return GS_EIO;
    }
    size_t n = fread(buf, 1, len - 1, f);
    bool more = n == len - 1 && fgetc(f) != EOF;
    fclose(f);
    buf[n] = 0;
    while (n && isspace((unsigned char)buf[n - 1])) buf[--n] = 0;
    size_t skip = strspn(buf, " \t\r\n");
    memmove(buf, buf + skip, n - skip + 1);
    if (more || !*buf || strpbrk(buf, " \t\r\n")) {
        fprintf(stderr, "gpusched agent: --token-file \"%s\": %s\n", path,
                more ? "too long for a token" : !*buf ? "the file is empty" : "want one token on one line");
        return GS_EINVAL;
    }
    return 0;
}

static int parse(int argc, char **argv, struct gs_agent_opts *o, bool *kill_pods, char *token, size_t token_len)
{
    static const struct option opts[] = {
        {"server", required_argument, 0, O_SERVER},       {"token", required_argument, 0, O_TOKEN},
        {"token-file", required_argument, 0, O_TOKEN_FILE},
        {"kubeconfig", required_argument, 0, O_KUBECONFIG}, {"certificate-authority", required_argument, 0, O_CA},
        {"insecure-skip-tls-verify", no_argument, 0, O_INSECURE}, {"node-name", required_argument, 0, O_NODE},
        {"mock", required_argument, 0, O_MOCK},           {"backend", required_argument, 0, O_BACKEND},
        {"state-dir", required_argument, 0, O_STATE},     {"listen", required_argument, 0, O_LISTEN},
        {"advertise", required_argument, 0, O_ADVERTISE}, {"heartbeat-ms", required_argument, 0, O_HB},
        {"grace-ms", required_argument, 0, O_GRACE},      {"metrics-interval-ms", required_argument, 0, O_METRICS},
        {"labels", required_argument, 0, O_LABELS},       {"kill-pods-on-exit", no_argument, 0, O_KILL},
        {"log-level", required_argument, 0, O_LOG},       {"help", no_argument, 0, 'h'},
        {"agent-token-file", required_argument, 0, O_AGENT_TOKEN_FILE}, {"pod-uid", required_argument, 0, O_POD_UID},
        {"pod-gid", required_argument, 0, O_POD_GID},
        {"dra-registry-dir", required_argument, 0, O_DRA_REGISTRY}, {"dra-cdi-dir", required_argument, 0, O_DRA_CDI},
        {"no-resource-slices", no_argument, 0, O_NO_SLICES}, {"dra-partitionable", no_argument, 0, O_PARTITIONABLE},
        {"default-runtime", required_argument, 0, O_RUNTIME}, {"runc", required_argument, 0, O_RUNC},
        {"cdi-dir", required_argument, 0, O_CDI_DIRS},
        {0, 0, 0, 0},
    };
    optind = 1;
    int c;
    enum gs_log_level lvl;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_SERVER: o->conn.server = optarg; break;
        case O_TOKEN:
            fprintf(stderr, "gpusched agent: --token: a token on the command line is readable by every process on "
                            "the host (/proc/PID/cmdline); use --token-file FILE or GPUSCHED_TOKEN in the environment\n");
            return 2;
        case O_TOKEN_FILE:
            if (read_token(optarg, token, token_len)) return 2;
            o->conn.token = token;
            break;
        case O_KUBECONFIG: o->conn.kubeconfig = optarg; break;
        case O_CA: o->conn.ca_file = optarg; break;
        case O_INSECURE: o->conn.insecure_skip_verify = true; break;
        case O_NODE: o->node_name = optarg; break;
        case O_MOCK: o->mock_spec = optarg; break;
        case O_BACKEND: o->backend = optarg; break;
        case O_STATE: o->state_dir = optarg; break;
        case O_LISTEN: o->listen = optarg; break;
        case O_ADVERTISE: o->advertise = optarg; break;
        case O_HB: o->heartbeat_ms = atoi(optarg); break;
        case O_GRACE: o->grace_ms = atoi(optarg); break;
        case O_METRICS: o->metrics_interval_ns = atoll(optarg) * 1000000LL; break;
        case O_LABELS: o->extra_labels = optarg; break;
        case O_DRA_REGISTRY: o->dra_registry_dir = optarg; break;
        case O_DRA_CDI: o->dra_cdi_dir = optarg; break;
        case O_KILL: *kill_pods = true; break;
        case O_NO_SLICES: o->no_resource_slices = true; break;
        case O_PARTITIONABLE: o->dra_partitionable = true; break;
        case O_RUNTIME:
            if (strcmp(optarg, "process") && strcmp(optarg, "runc")) {
                fprintf(stderr, "gpusched agent: --default-runtime \"%s\": want process or runc\n", optarg);
                return 2;
            }
            o->default_runtime = optarg;
            break;
        case O_RUNC: o->runc_bin = optarg; break;
        case O_CDI_DIRS: o->cdi_dirs = optarg; break;
        case O_AGENT_TOKEN_FILE: {
            static char tok[128];
            int err = gs_secret_read(optarg, tok, sizeof tok);
            if (err) {
                fprintf(stderr, "gpusched agent: --agent-token-file \"%s\": %s\n", optarg,
                        err == GS_EPARSE ? "want one line of printable characters (at most 127)" : gs_strerror(err));
                return 1;
            }
            o->http_token = tok;
            break;
        }
        case O_POD_UID:
            if (gs__pod_id_flag("agent", "pod-uid", optarg, &o->pod_uid)) return 2;
            break;
        case O_POD_GID:
            if (gs__pod_id_flag("agent", "pod-gid", optarg, &o->pod_gid)) return 2;
            break;
        case O_LOG:
            if (gs_log_level_parse(optarg, &lvl)) return 2;
            gs_log_set_level(lvl);
            break;
        case 'h': usage(stdout); return 0;
        default: return 2;
        }
    }
    return optind < argc ? 2 : -1;
}

int gs_cmd_agent(int argc, char **argv)
{
    struct gs_agent_opts o = {0};
    bool kill_pods = false;
    static char token[4096]; /* --token-file's contents, for the whole run */
    int rc = parse(argc, argv, &o, &kill_pods, token, sizeof token);
    if (rc >= 0) {
        if (rc == 2) usage(stderr);
        return rc;
    }
    sigset_t set;
    gs_cli_block_stop_signals(&set, NULL);
    struct gs_agent *a = NULL;
    char err[512] = "";
    if ((rc = gs_agent_start(&o, &a, err, sizeof err))) {
        fprintf(stderr, "gpusched agent: %s\n", err[0] ? err : "cannot start");
        return 1;
    }
    printf("gpusched agent for node %s serving logs and metrics on port %d\n", gs_agent_node(a), gs_agent_port(a));
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    gs_log(GS_LOG_INFO, "agent: stopping", "node", gs_agent_node(a), NULL);
    gs_agent_stop(a, kill_pods);
    return 0;
}
