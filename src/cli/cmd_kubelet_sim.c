/*
 * cmd_kubelet_sim.c - `gpusched kubelet-sim`: the device manager alone, as
 * the kubelet side of the device plugin API, driven line by line.
 *
 * It serves kubelet.sock in --plugin-dir, accepts plugin registrations and
 * follows their devices; admission requests come on stdin as one JSON object
 * per line and each gets one JSON line on stdout:
 *
 *   {"op":"resources"}
 *   {"op":"allocations"}
 *   {"op":"admit","pod":"uid","containers":[{"name":"c","requests":{"nvidia.com/gpu":2,"cpu":4},
 *                                            "devices":{"nvidia.com/gpu":["GPU-..."]}}]}
 *   {"op":"remove","pod":"uid"}
 *   {"op":"quit"}
 *
 * The first line out is {"ready":true,"socket":...}. It is how the agent's
 * node side is exercised against any device plugin, and how the integration
 * tests prove it against an independent one. Exits 0 on quit, end of input,
 * SIGTERM or SIGINT, with kubelet.sock removed.
 */
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "node/devicemanager.h"

#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: gpusched kubelet-sim --plugin-dir DIR [options]\n\n"
               "Runs kubelet's device manager alone: device plugins register on DIR/kubelet.sock;\n"
               "pods are admitted through JSON lines on stdin (see docs/NODE.md).\n\n"
               "options:\n"
               "  --plugin-dir DIR          device-plugin directory (created; its sockets are removed)\n"
               "  --checkpoint FILE         allocation checkpoint (default DIR/%s)\n"
               "  --topology-policy P       none, best-effort, restricted, single-numa-node (default none)\n"
               "  --topology-scope S        container or pod (default container)\n"
               "  --numa N                  NUMA nodes of this machine (default 1)\n"
               "  --cpus-per-numa K         CPUs per NUMA node; cpu requests then give topology hints\n"
               "  --log-level L             debug, info, warn, error (default info)\n"
               "  -h, --help                show this help\n",
               GS_DM_CHECKPOINT);
}

static int parse(int argc, char **argv, struct gs_dm_config *c)
{
    static const struct option longs[] = {
        {"plugin-dir", required_argument, 0, 'd'},      {"checkpoint", required_argument, 0, 'c'},
        {"topology-policy", required_argument, 0, 'p'}, {"topology-scope", required_argument, 0, 's'},
        {"numa", required_argument, 0, 'n'},            {"cpus-per-numa", required_argument, 0, 'k'},
        {"log-level", required_argument, 0, 'l'},       {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    enum gs_log_level lvl;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (ch) {
        case 'd': c->plugin_dir = optarg; break;
        case 'c': c->checkpoint = optarg; break;
        case 'p':
            if (gs_topo_policy_parse(optarg, &c->topo.policy)) {
                fprintf(stderr, "kubelet-sim: --topology-policy: want none, best-effort, restricted or single-numa-node\n");
                return 2;
            }
            break;
        case 's':
            if (gs_topo_scope_parse(optarg, &c->topo.scope)) {
                fprintf(stderr, "kubelet-sim: --topology-scope: want container or pod\n");
                return 2;
            }
            break;
        case 'n':
            c->topo.n_numa = atoi(optarg);
            if (c->topo.n_numa < 1 || c->topo.n_numa > GS_TOPO_MAX_NUMA) {
                fprintf(stderr, "kubelet-sim: --numa: want 1..%d\n", GS_TOPO_MAX_NUMA);
                return 2;
            }
            break;
        case 'k': c->cpus_per_numa = atoi(optarg); break;
        case 'l':
            if (gs_log_level_parse(optarg, &lvl)) return fprintf(stderr, "kubelet-sim: bad --log-level\n"), 2;
            gs_log_set_level(lvl);
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!c->plugin_dir) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/*--- Requests ---*/

static void reply(json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT);
    if (s) printf("%s\n", s);
    fflush(stdout);
    free(s);
    json_decref(v);
}

static json_t *fail(int rc, const char *why)
{
    return json_pack("{s:b, s:s, s:s}", "ok", 0, "code", gs_strerror(rc), "error", why);
}

/* Fills one container from its JSON; strings stay owned by the document. */
static int container_of(json_t *jc, struct gs_dm_container *c, const char **idbuf, size_t *used, size_t cap)
{
    memset(c, 0, sizeof *c);
    c->name = json_string_value(json_object_get(jc, "name"));
    json_t *req = json_object_get(jc, "requests"), *devs = json_object_get(jc, "devices"), *v;
    const char *key;
    json_object_foreach(req, key, v) {
        if (c->n >= GS_TOPO_MAX_RES || !json_is_integer(v)) return GS_EINVAL;
        c->resource[c->n] = key;
        c->count[c->n++] = (int)json_integer_value(v);
    }
    json_object_foreach(devs, key, v) {
        int j = 0;
        while (j < c->n && strcmp(c->resource[j], key)) j++;
        if (j == c->n) {
            if (c->n >= GS_TOPO_MAX_RES) return GS_EINVAL;
            c->resource[c->n] = key, c->count[c->n++] = 0;
        }
        c->exact[j] = idbuf + *used;
        size_t i;
        json_t *id;
        json_array_foreach(v, i, id) {
            if (*used >= cap || !json_is_string(id)) return GS_EINVAL;
            idbuf[(*used)++] = json_string_value(id);
        }
        c->n_exact[j] = json_array_size(v);
        c->count[j] = (int)c->n_exact[j];
    }
    return 0;
}

static json_t *admit(struct gs_dm *dm, json_t *req)
{
    const char *pod = json_string_value(json_object_get(req, "pod"));
    json_t *jcs = json_object_get(req, "containers");
    size_t n = json_array_size(jcs);
    if (!pod || !n || n > 64) return fail(GS_EINVAL, "admit needs \"pod\" and 1..64 \"containers\"");
    struct gs_dm_container ctrs[64];
    static const char *ids[4096];
    size_t used = 0;
    for (size_t i = 0; i < n; i++)
        if (container_of(json_array_get(jcs, i), &ctrs[i], ids, &used, 4096))
            return fail(GS_EINVAL, "bad container: want {name, requests{res: n}, devices{res: [ids]}}");
    json_t *result;
    char why[512] = "";
    int rc = gs_dm_admit(dm, pod, ctrs, n, &result, why, sizeof why);
    if (rc) return fail(rc, why);
    return json_pack("{s:b, s:o}", "ok", 1, "allocations", result);
}

static json_t *handle(struct gs_dm *dm, json_t *req, bool *quit)
{
    const char *op = json_string_value(json_object_get(req, "op"));
    if (!op) return fail(GS_EINVAL, "missing \"op\"");
    if (!strcmp(op, "resources")) return json_pack("{s:b, s:o}", "ok", 1, "resources", gs_dm_resources(dm));
    if (!strcmp(op, "allocations")) return json_pack("{s:b, s:o}", "ok", 1, "allocations", gs_dm_allocations(dm));
    if (!strcmp(op, "admit")) return admit(dm, req);
    if (!strcmp(op, "remove")) {
        const char *pod = json_string_value(json_object_get(req, "pod"));
        int rc = pod ? gs_dm_remove_pod(dm, pod) : GS_EINVAL;
        return rc ? fail(rc, "no such pod") : json_pack("{s:b}", "ok", 1);
    }
    if (!strcmp(op, "quit")) {
        *quit = true;
        return json_pack("{s:b}", "ok", 1);
    }
    return fail(GS_EINVAL, "unknown op");
}

static void serve_lines(struct gs_dm *dm)
{
    char *line = NULL;
    size_t cap = 0;
    bool quit = false;
    while (!quit && !stop_flag) {
        struct pollfd pfd = {.fd = 0, .events = POLLIN};
        int r = poll(&pfd, 1, 100);
        if (r <= 0) continue;
        if (getline(&line, &cap, stdin) < 0) break;
        json_error_t je;
        json_t *req = json_loads(line, 0, &je);
        reply(req ? handle(dm, req, &quit) : fail(GS_EPARSE, je.text));
        json_decref(req);
    }
    free(line);
}

int gs_cmd_kubelet_sim(int argc, char **argv)
{
    struct gs_dm_config cfg = {.topo = {.policy = GS_TOPO_NONE, .scope = GS_TOPO_SCOPE_CONTAINER, .n_numa = 1}};
    int rc = parse(argc, argv, &cfg);
    if (rc >= 0) return rc;
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct gs_dm *dm;
    char err[512] = "";
    rc = gs_dm_start(&cfg, &dm, err, sizeof err);
    if (rc) {
        fprintf(stderr, "kubelet-sim: %s\n", err[0] ? err : gs_strerror(rc));
        return 1;
    }
    char sock[600];
    snprintf(sock, sizeof sock, "%s/kubelet.sock", cfg.plugin_dir);
    reply(json_pack("{s:b, s:s}", "ready", 1, "socket", sock));
    serve_lines(dm);
    gs_dm_stop(dm);
    return 0;
}
