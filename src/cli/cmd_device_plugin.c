/*
 * cmd_device_plugin.c - `gpusched device-plugin`: a kubelet device plugin
 * (API v1beta1) for the GPUs that discovery sees, or for mock GPUs.
 *
 * Writes the CDI spec, serves v1beta1.DevicePlugin on a socket in the
 * device-plugin directory, registers with kubelet, follows GPU health and
 * kubelet restarts, and exits 0 on SIGTERM or SIGINT with its socket removed.
 * With --mig-strategy mixed or single the node's MIG devices are offered as
 * NVIDIA's plugin offers them (src/node/gpus_disc.h): one plugin, socket and
 * registration per resource. Logs go to stderr; nothing is printed to stdout.
 */
#include "cli/commands.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "discovery/discovery.h"
#include "discovery/outputs.h"
#include "govern/policy.h" /* gs_mig_strategy_name */
#include "node/cdi.h"
#include "node/deviceplugin/plugin.h"
#include "node/gpus_disc.h"

#include <getopt.h>
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
    fprintf(f, "usage: gpusched device-plugin [options]\n\n"
               "Serves the node's GPUs to kubelet through the device plugin API v1beta1.\n\n"
               "options:\n"
               "  --mock SPEC                 mock GPUs instead of NVML/sysfs (e.g. 8xH100-80GB,nvlink=islands:2)\n"
               "  --plugin-dir DIR            kubelet's device-plugin directory (default %s)\n"
               "  --resource-name NAME        extended resource (default nvidia.com/gpu)\n"
               "  --endpoint FILE             socket file name in the directory (default gpusched-gpu.sock)\n"
               "  --device-list-strategy S    envvar, cdi-annotations, cdi-cri, or a comma list (default envvar)\n"
               "  --replicas N                time-slicing: expose each GPU as N devices UUID::0..N-1 (default 1)\n"
               "  --mig-strategy S            none, single or mixed: how MIG devices are offered (default none)\n"
               "  --proc-root DIR             read MIG capability minors from DIR/driver/nvidia-caps/mig-minors\n"
               "                              (default /proc; mock nodes use fixed minors unless given)\n"
               "  --cdi-spec-dir DIR          where to write nvidia.com-gpu.json (default %s)\n"
               "  --cdi-mount HOST[:CTR]      add a read-only bind mount to the CDI spec (repeatable)\n"
               "  --log-level L               debug, info, warn, error (default info)\n"
               "  -h, --help                  show this help\n",
               GS_DP_DEFAULT_DIR, GS_CDI_DEFAULT_DIR);
}

#define MAX_MOUNTS 16

struct dp_opts {
    const char *mock, *plugin_dir, *resource, *endpoint, *cdi_dir;
    const char *proc_root; /* MIG capability minors (node/migcaps.h) */
    unsigned strategy;
    enum gs_mig_strategy mig;
    int replicas;
    bool cdi_dir_given;
    struct gs_cdi_mount mounts[MAX_MOUNTS];
    char mount_buf[MAX_MOUNTS][512];
    size_t n_mounts;
};

static int add_mount(struct dp_opts *o, const char *arg)
{
    if (o->n_mounts >= MAX_MOUNTS || !*arg) return -1;
    char *b = o->mount_buf[o->n_mounts];
    snprintf(b, 512, "%s", arg);
    char *colon = strchr(b, ':');
    if (colon) *colon = '\0';
    o->mounts[o->n_mounts++] = (struct gs_cdi_mount){b, colon ? colon + 1 : NULL};
    return 0;
}

/* Driver files a container needs when they exist on this host. */
static void default_mounts(struct dp_opts *o)
{
    static const char *const files[] = {
        "/usr/bin/nvidia-smi",
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (!access(files[i], R_OK)) add_mount(o, files[i]);
}

static int parse(int argc, char **argv, struct dp_opts *o)
{
    static const struct option longs[] = {
        {"mock", required_argument, 0, 'm'},          {"plugin-dir", required_argument, 0, 'd'},
        {"resource-name", required_argument, 0, 'r'}, {"endpoint", required_argument, 0, 'e'},
        {"device-list-strategy", required_argument, 0, 's'},
        {"replicas", required_argument, 0, 'n'},      {"cdi-spec-dir", required_argument, 0, 'c'},
        {"cdi-mount", required_argument, 0, 'M'},     {"log-level", required_argument, 0, 'l'},
        {"mig-strategy", required_argument, 0, 'S'}, {"proc-root", required_argument, 0, 'P'},
        {"help", no_argument, 0, 'h'},                {0, 0, 0, 0},
    };
    enum gs_log_level lvl;
    char *end;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (c) {
        case 'm': o->mock = optarg; break;
        case 'd': o->plugin_dir = optarg; break;
        case 'r': o->resource = optarg; break;
        case 'e': o->endpoint = optarg; break;
        case 'c': o->cdi_dir = optarg, o->cdi_dir_given = true; break;
        case 'P': o->proc_root = optarg; break;
        case 's':
            if (gs_dls_parse(optarg, &o->strategy)) {
                fprintf(stderr, "device-plugin: --device-list-strategy: want envvar, cdi-annotations or cdi-cri\n");
                return 2;
            }
            break;
        case 'n':
            o->replicas = (int)strtol(optarg, &end, 10);
            if (*end || o->replicas < 1 || o->replicas > GS_NODE_MAX_REPLICAS) {
                fprintf(stderr, "device-plugin: --replicas: want 1..%d\n", GS_NODE_MAX_REPLICAS);
                return 2;
            }
            break;
        case 'S':
            if (gs_mig_strategy_parse(optarg, &o->mig)) {
                fprintf(stderr, "device-plugin: --mig-strategy: invalid value \"%s\" (want none, single or mixed)\n",
                        optarg);
                return 2;
            }
            break;
        case 'M':
            if (add_mount(o, optarg)) {
                fprintf(stderr, "device-plugin: --cdi-mount: at most %d mounts of HOST[:CONTAINER]\n", MAX_MOUNTS);
                return 2;
            }
            break;
        case 'l':
            if (gs_log_level_parse(optarg, &lvl)) {
                fprintf(stderr, "device-plugin: --log-level: want debug, info, warn or error\n");
                return 2;
            }
            gs_log_set_level(lvl);
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "device-plugin: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    return -1;
}

static int open_disc(const struct dp_opts *o, struct gs_disc *d, const struct gs_clock *clk)
{
    int rc = o->mock ? gs_disc_open_mock(d, o->mock, clk) : gs_disc_open_auto(d, NULL, clk);
    if (rc) fprintf(stderr, "device-plugin: discovery: %s\n", d->err[0] ? d->err : gs_strerror(rc));
    return rc;
}

static void write_cdi(const struct dp_opts *o, const struct gs_node_gpus *g)
{
    struct gs_cdi_opts co = {.kind = "nvidia.com/gpu", .mounts = o->mounts, .n_mounts = o->n_mounts};
    char path[4096];
    if (gs_cdi_write(o->cdi_dir, g, &co, path, sizeof path))
        gs_log(o->cdi_dir_given ? GS_LOG_ERROR : GS_LOG_WARN, "cannot write the CDI spec", "dir", o->cdi_dir, NULL);
    else
        gs_log(GS_LOG_INFO, "wrote CDI spec", "path", path, NULL);
}

/* One plugin per resource; --resource-name and --endpoint rename the whole-GPU one. */
static int serve(const struct dp_opts *o, struct gs_disc *d, int n_gpus, const struct gs_node_resource *res, int n)
{
    struct gs_dp *dps[GS_NODE_MAX_RESOURCES] = {0};
    int rc = 0, made = 0;
    for (; !rc && made < n; made++) {
        const struct gs_node_resource *r = &res[made];
        bool whole = !strcmp(r->name, "nvidia.com/gpu");
        struct gs_dp_config cfg = {
            .plugin_dir = o->plugin_dir,
            .resource_name = whole && o->resource ? o->resource : r->name,
            .endpoint = whole ? o->endpoint : r->endpoint,
            .alloc = {.strategy = o->strategy, .proc_root = o->proc_root, .mock_caps = o->mock && !o->proc_root},
        };
        rc = gs_dp_create(&cfg, &r->gpus, &dps[made]);
        if (!rc) gs_log(GS_LOG_INFO, "serving", "resource", cfg.resource_name, "socket", gs_dp_socket(dps[made]), NULL);
    }
    struct gs_node_health nh;
    if (!rc) rc = gs_node_health_open(&nh, d, NULL, n_gpus, dps, n);
    if (!rc) {
        rc = gs_dp_run_all(dps, n, gs_node_health_poll, &nh, &stop_flag);
        gs_node_health_close(&nh);
    }
    gs_log(GS_LOG_INFO, rc ? "device plugin failed" : "device plugin stopped", "dir",
           o->plugin_dir ? o->plugin_dir : GS_DP_DEFAULT_DIR, NULL);
    for (int i = 0; i < made; i++) gs_dp_destroy(dps[i]);
    return rc ? 1 : 0;
}

/* The resources of the MIG strategy; 0 or an exit status. */
static int resources(const struct dp_opts *o, const struct gs_inventory *inv, struct gs_node_resource *res, int *n)
{
    char err[256];
    *n = gs_node_resources(inv, o->mig, o->replicas, res, err, sizeof err);
    if (*n < 0) {
        fprintf(stderr, "device-plugin: --mig-strategy %s: %s\n", gs_mig_strategy_name(o->mig), err);
        return 1;
    }
    for (int i = 0; i < *n; i++)
        if (res[i].gpus.mig && res[i].gpus.n && (o->strategy & (GS_DLS_CDI_ANNOTATIONS | GS_DLS_CDI_CRI))) {
            fprintf(stderr, "device-plugin: --device-list-strategy: cdi-annotations and cdi-cri name whole GPUs only; "
                            "use envvar with --mig-strategy %s on a node with MIG devices\n",
                    gs_mig_strategy_name(o->mig));
            return 2;
        }
    return 0;
}

int gs_cmd_device_plugin(int argc, char **argv)
{
    struct dp_opts o = {.cdi_dir = GS_CDI_DEFAULT_DIR, .replicas = 1, .strategy = GS_DLS_ENVVAR};
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    if (!o.n_mounts) default_mounts(&o);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct gs_clock clk;
    gs_clock_init_real(&clk);
    struct gs_disc d;
    if (open_disc(&o, &d, &clk)) return 1;
    static struct gs_inventory inv;
    static struct gs_node_gpus g;
    rc = gs_disc_inventory(&d, &inv);
    if (rc) {
        fprintf(stderr, "device-plugin: inventory: %s\n", d.err[0] ? d.err : gs_strerror(rc));
        gs_disc_close(&d);
        return 1;
    }
    gs_node_gpus_from_inventory(&g, &inv, o.replicas);
    struct gs_node_resource *res = calloc(GS_NODE_MAX_RESOURCES, sizeof *res);
    int n = 0;
    rc = res ? resources(&o, &inv, res, &n) : 1;
    if (!rc) {
        write_cdi(&o, &g);
        rc = serve(&o, &d, inv.n_gpus, res, n);
    }
    free(res);
    gs_disc_close(&d);
    return rc;
}
