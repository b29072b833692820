/*
 * main.c - the gpusched binary: dispatches to a subcommand (commands.h).
 */
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"up", gs_cmd_up, "server and local agents in one command (mock GPUs with --mock)"},
    {"server", gs_cmd_server, "run the control plane: API server, store and scheduler"},
    {"scheduler", gs_cmd_scheduler, "schedule a Kubernetes cluster's pods as a secondary scheduler (leader election)"},
    {"agent", gs_cmd_agent, "run this node's agent: register, run bound pods as processes, serve logs and metrics"},
    {"apply", gs_cmd_apply, "create or update objects from manifests"},
    {"get", gs_cmd_get, "list or show objects"},
    {"describe", gs_cmd_describe, "show an object in detail: status, devices, scheduling diagnosis"},
    {"delete", gs_cmd_delete, "delete objects"},
    {"store", gs_cmd_store, "move a stopped server's SQLite store into etcd (store migrate)"},
    {"extender", gs_cmd_extender, "answer kube-scheduler's extender callouts (filter, prioritize, preempt, bind)"},
    {"logs", gs_cmd_logs, "print a pod's log (from its node's agent)"},
    {"top", gs_cmd_top, "GPU allocation and utilisation per node (top nodes)"},
    {"explain", gs_cmd_explain, "say why a pod or pod group is pending, and what would make it fit"},
    {"validate", gs_cmd_validate, "check manifests (YAML/JSON) and report every problem by field"},
    {"snapshot", gs_cmd_snapshot, "write the live cluster as simulator input (what-if replays)"},
    {"sim", gs_cmd_sim, "replay a cluster trace through the scheduler on a simulated clock"},
    {"bench", gs_cmd_bench, "measure scheduling throughput on a synthetic cluster"},
    {"discover", gs_cmd_discover, "print this node's GPUs, labels (GFD) and topology (NRT)"},
    {"exporter", gs_cmd_exporter, "serve GPU metrics in DCGM-Exporter's format on /metrics"},
    {"node-publisher", gs_cmd_node_publisher, "publish this node's GPUs to a Kubernetes API: GFD labels, gpus annotation, NRT"},
    {"device-plugin", gs_cmd_device_plugin, "serve the node's GPUs to kubelet (device plugin API v1beta1)"},
    {"dra-plugin", gs_cmd_dra_plugin, "serve the node's GPUs to kubelet as a DRA driver (gpu.nvidia.com)"},
    {"image", gs_cmd_image, "the node's image store: import OCI image layouts, list, remove (image import|ls|rm)"},
    {"kubelet-sim", gs_cmd_kubelet_sim, "kubelet's device manager alone: registration, allocation, topology"},
    {"version", gs_cmd_version, "print the version"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: gpusched <command> [options]\n\n"
               "gpusched is a GPU cluster scheduler: discovery, placement (gang, topology,\n"
               "quota, fragmentation-aware), node execution and governance in one binary.\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nRun 'gpusched <command> --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) cmd = "version";
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "gpusched: unknown command \"%s\"\n\n", cmd);
    usage(stderr);
    return 2;
}
