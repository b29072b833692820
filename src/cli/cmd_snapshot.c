/*
 * cmd_snapshot.c - `gpusched snapshot -o DIR`: the live cluster as simulator
 * input (sim/snapshot.h), from our server or a Kubernetes API server.
 *
 *   gpusched snapshot -o DIR [--assume-duration D] [--server URL | --kubeconfig FILE]
 *
 * DIR/cluster.yaml and DIR/workload.yaml are what `gpusched sim --snapshot
 * DIR` (or --cluster/--workload) replays forward; they are plain manifests,
 * so a question can also be changed by editing them.
 */
#include "cli/commands.h"
#include "control/client.h"
#include "core/codec.h"
#include "sim/snapshot.h"
#include "sim/trace_manifest.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage_text[] =
    "usage: gpusched snapshot -o DIR [--assume-duration D] [connection flags]\n\n"
    "Writes the live cluster as simulator input: DIR/cluster.yaml (nodes with their\n"
    "devices and conditions, NodeResourceTopologies, queues, flavors, priority classes,\n"
    "the ClusterPolicy, DRA slices and classes) and DIR/workload.yaml (running pods with\n"
    "their node, devices and time running, pending pods arriving at 0, LocalQueues,\n"
    "PodGroups, Workloads, claims). Replay it with gpusched sim --snapshot DIR.\n\n"
    "options:\n"
    "  -o, --output DIR            the directory to write (created when missing)\n"
    "      --assume-duration D     how long a pod without a sim.gpusched.io/duration\n"
    "                              annotation runs (30m, 2h, or seconds); required when\n"
    "                              any pod has none\n"
    "      --server URL            API server: ours or a Kubernetes one (else $GPUSCHED_SERVER,\n"
    "                              else the kubeconfig)\n"
    "      --kubeconfig FILE       kubeconfig (else $KUBECONFIG, else ./gpusched-data/kubeconfig)\n"
    "      --token TOKEN           bearer token\n"
    "      --certificate-authority FILE   CA to verify the server with\n"
    "      --insecure-skip-tls-verify     do not verify the server's certificate\n"
    "  -h, --help                  show this help\n";

static void print_diags(const struct gs_diags *d)
{
    for (size_t i = 0; i < d->n; i++)
        fprintf(stderr, "gpusched snapshot: %s%s%s\n", d->v[i].path, d->v[i].path[0] ? ": " : "", d->v[i].msg);
}

static size_t count_pods(const json_t *docs, bool running)
{
    size_t n = 0, i;
    const json_t *doc;
    json_array_foreach(docs, i, doc)
    {
        if (strcmp(json_string_value(json_object_get(doc, "kind")) ?: "", "Pod")) continue;
        bool bound = json_object_get(json_object_get(doc, "spec"), "nodeName") != NULL;
        n += bound == running;
    }
    return n;
}

int gs_cmd_snapshot(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, 0, 'o'},     {"assume-duration", required_argument, 0, 'd'},
        {"server", required_argument, 0, 's'},     {"kubeconfig", required_argument, 0, 'k'},
        {"token", required_argument, 0, 't'},      {"certificate-authority", required_argument, 0, 'c'},
        {"insecure-skip-tls-verify", no_argument, 0, 'I'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    struct gs_client_opts conn = {0};
    struct gs_snapshot_opts so = {.now = (double)time(NULL), .assume_duration = -1};
    const char *dir = NULL;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        const char *why = NULL;
        switch (ch) {
        case 'o': dir = optarg; break;
        case 'd':
            if (gs_sim_duration_parse(optarg, &so.assume_duration, &why)) {
                fprintf(stderr, "gpusched snapshot: --assume-duration \"%s\": %s (want 30m, 2h or seconds)\n", optarg,
                        why);
                return 2;
            }
            break;
        case 's': conn.server = optarg; break;
        case 'k': conn.kubeconfig = optarg; break;
        case 't': conn.token = optarg; break;
        case 'c': conn.ca_file = optarg; break;
        case 'I': conn.insecure_skip_verify = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (!dir || optind < argc) {
        fprintf(stderr, "gpusched snapshot: %s\n", dir ? "unexpected arguments" : "-o DIR is required");
        fputs(usage_text, stderr);
        return 2;
    }
    json_t *cluster = NULL, *workload = NULL;
    struct gs_diags d = {0};
    int rc = gs_snapshot_take(&conn, &so, &cluster, &workload, &d);
    char header[512];
    char when[32];
    time_t now = (time_t)so.now;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    snprintf(header, sizeof header, "gpusched snapshot at %s; replay with: gpusched sim --snapshot %s", when, dir);
    if (!rc) rc = gs_snapshot_write(dir, header, cluster, workload, &d);
    print_diags(&d);
    if (!rc)
        printf("wrote %s/cluster.yaml (%zu objects) and %s/workload.yaml (%zu running pods, %zu pending, %zu other "
               "objects)\n",
               dir, json_array_size(cluster), dir, count_pods(workload, true), count_pods(workload, false),
               json_array_size(workload) - count_pods(workload, true) - count_pods(workload, false));
    else if (!d.n) fprintf(stderr, "gpusched snapshot: %s\n", gs_strerror(rc));
    gs_diags_free(&d);
    json_decref(cluster);
    json_decref(workload);
    return rc ? 1 : 0;
}
