/*
 * commands.h - the gpusched subcommands.
 *
 * Each subcommand lives in its own cmd_<name>.c and is a function with
 * main()'s shape. They are part of the library so tests can call them; only
 * main.c (the dispatcher) is outside it. Exit codes: 0 success, 1 the command
 * ran and found a problem (invalid manifest, failed run), 2 usage error.
 */
#ifndef GS_CLI_COMMANDS_H
#define GS_CLI_COMMANDS_H

#include <stddef.h>
#include <stdint.h>

/* Manifests and the scheduler offline. */
int gs_cmd_version(int argc, char **argv);
int gs_cmd_validate(int argc, char **argv);
int gs_cmd_sim(int argc, char **argv);
int gs_cmd_bench(int argc, char **argv);
int gs_cmd_explain(int argc, char **argv);
int gs_cmd_snapshot(int argc, char **argv);
/* Layer 1: discovery and metrics (src/discovery). */
int gs_cmd_discover(int argc, char **argv);
int gs_cmd_exporter(int argc, char **argv);
int gs_cmd_node_publisher(int argc, char **argv);
/* Layer 3: node execution (src/node). */
int gs_cmd_device_plugin(int argc, char **argv);
int gs_cmd_dra_plugin(int argc, char **argv);
int gs_cmd_kubelet_sim(int argc, char **argv);
int gs_cmd_image(int argc, char **argv); /* cmd_image.c: the node's image store */
/* Control plane and its client (src/control). */
int gs_cmd_server(int argc, char **argv);
int gs_cmd_scheduler(int argc, char **argv); /* cmd_scheduler.c: the standalone scheduler */
int gs_cmd_apply(int argc, char **argv);
int gs_cmd_get(int argc, char **argv);
int gs_cmd_describe(int argc, char **argv);
int gs_cmd_delete(int argc, char **argv);
int gs_cmd_store(int argc, char **argv); /* cmd_store.c: `store migrate` from SQLite to etcd */
/* Kubernetes-facing (src/kube): the kube-scheduler extender. */
int gs_cmd_extender(int argc, char **argv);
/* Node agent, all-in-one, client views (src/agent). */
int gs_cmd_agent(int argc, char **argv);
int gs_cmd_up(int argc, char **argv);
int gs_cmd_logs(int argc, char **argv);
int gs_cmd_top(int argc, char **argv);

/* Admission flags of `server` and `up` (cmd_server.c): their help text; one
 * flag (a getopt code from the merged table) applied to o -> 0, or 2 after
 * saying on stderr what is wrong with the value, prefixed by cmd; base (a
 * terminated getopt_long table) + these options into out (cap entries,
 * terminated). */
struct gs_admission_opts;
struct option;
extern const char gs__adm_usage[];
int gs__adm_option(struct gs_admission_opts *o, int code, const char *value, const char *cmd);
void gs__adm_options_merge(const struct option *base, struct option *out, size_t cap);
/* --event-ttl DUR of server and up (cmd_server.c): 0 or 2 (said why). */
int gs__event_ttl_option(const char *cmd, const char *value, int64_t *seconds);

#endif
