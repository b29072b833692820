/*
 * cmd_discover.c - `gpusched discover`: what layer 1 sees on this machine.
 *
 * Opens a discovery backend (NVML when it loads, else sysfs; or --mock) and
 * prints one of: GFD-style labels as key=value lines (the format of GFD's
 * features.d file, ready for NFD's local source), the inventory as JSON or
 * YAML, or the node's NodeResourceTopology manifest. Exit: 0 done, 1 the
 * backend failed, 2 usage error.
 */
#include "cli/commands.h"
#include "core/codec.h"
#include "discovery/discovery.h"
#include "discovery/outputs.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: gpusched discover [--mock SPEC|FILE] [-o labels|json|yaml|nrt] [options]\n\n"
               "Prints what this node has: GPUs, NUMA layout, NVLink, MIG, node labels.\n\n"
               "options:\n"
               "  --mock SPEC|FILE       describe GPUs instead of probing (e.g. 8xH100-80GB,numa=2)\n"
               "  --backend NAME         auto (NVML, else sysfs), nvml, sysfs or mock\n"
               "  --sysfs-root DIR       where sysfs is mounted (default /sys)\n"
               "  -o, --output FORMAT    labels (default), json, yaml or nrt\n"
               "  --mig-strategy S       none (default), single or mixed, as GFD's\n"
               "  --no-timestamp         leave out nvidia.com/gfd.timestamp\n"
               "  --topology-policy P    NRT topologyManagerPolicy (default none)\n"
               "  --topology-scope S     NRT topologyManagerScope (default container)\n"
               "  -h, --help             show this help\n");
}

struct opts {
    const char *mock, *backend, *sysfs, *output, *policy, *scope;
    struct gs_label_opts labels;
};

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        {"mock", required_argument, NULL, 'm'},         {"backend", required_argument, NULL, 'b'},
        {"sysfs-root", required_argument, NULL, 's'},   {"output", required_argument, NULL, 'o'},
        {"mig-strategy", required_argument, NULL, 'g'}, {"no-timestamp", no_argument, NULL, 'T'},
        {"topology-policy", required_argument, NULL, 'p'}, {"topology-scope", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},               {NULL, 0, NULL, 0},
    };
    o->output = "labels";
    o->labels.nvidia_pci_devices = -1;
    o->labels.timestamp = (int64_t)time(NULL);
    optind = 0;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "o:h", longs, NULL)) != -1;) {
        switch (c) {
        case 'm': o->mock = optarg; break;
        case 'b': o->backend = optarg; break;
        case 's': o->sysfs = optarg; break;
        case 'o': o->output = optarg; break;
        case 'T': o->labels.timestamp = 0; break;
        case 'p': o->policy = optarg; break;
        case 'S': o->scope = optarg; break;
        case 'g':
            if (gs_mig_strategy_parse(optarg, &o->labels.mig)) {
                fprintf(stderr, "gpusched discover: --mig-strategy must be none, single or mixed\n");
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "gpusched discover: bad option \"%s\"\n\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpusched discover: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    if (strcmp(o->output, "labels") && strcmp(o->output, "json") && strcmp(o->output, "yaml") && strcmp(o->output, "nrt")) {
        fprintf(stderr, "gpusched discover: -o must be labels, json, yaml or nrt\n");
        return 2;
    }
    return -1;
}

static int print_json(json_t *v, bool yaml)
{
    char *text = yaml ? gs_yaml_encode(v) : gs_json_encode(v, 1);
    json_decref(v);
    if (!text) return 1;
    fputs(text, stdout);
    if (!yaml) fputc('\n', stdout);
    free(text);
    return 0;
}

static int emit(const struct opts *o, const struct gs_inventory *inv)
{
    if (!strcmp(o->output, "labels")) {
        struct gs_labels l = {0};
        int rc = gs_gfd_labels(inv, &o->labels, &l);
        for (size_t i = 0; !rc && i < l.n; i++) printf("%s=%s\n", l.v[i].key, l.v[i].value);
        gs_labels_free(&l);
        return rc ? 1 : 0;
    }
    if (!strcmp(o->output, "nrt")) {
        struct gs_nrt_opts n = {.policy = o->policy, .scope = o->scope};
        return print_json(gs_nrt_build(inv, &n), true);
    }
    json_t *v = gs_inventory_to_json(inv);
    struct gs_labels l = {0};
    if (v && !gs_gfd_labels(inv, &o->labels, &l)) {
        json_t *lj = json_object();
        for (size_t i = 0; i < l.n; i++) json_object_set_new(lj, l.v[i].key, json_string(l.v[i].value));
        json_object_set_new(v, "labels", lj);
    }
    gs_labels_free(&l);
    return v ? print_json(v, !strcmp(o->output, "yaml")) : 1;
}

int gs_cmd_discover(int argc, char **argv)
{
    struct opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    struct gs_clock clock;
    gs_clock_init_real(&clock);
    struct gs_disc d;
    if ((rc = gs_disc_open_named(&d, o.backend, o.mock, o.sysfs, &clock))) {
        fprintf(stderr, "gpusched discover: %s\n", d.err[0] ? d.err : gs_strerror(rc));
        return rc == GS_EINVAL ? 2 : 1;
    }
    struct gs_inventory *inv = malloc(sizeof *inv);
    rc = inv ? gs_disc_inventory(&d, inv) : GS_ENOMEM;
    if (rc) fprintf(stderr, "gpusched discover: %s\n", d.err[0] ? d.err : gs_strerror(rc));
    else {
        if (strcmp(inv->backend, "mock")) o.labels.nvidia_pci_devices = gs_sysfs_nvidia_present(o.sysfs);
        if (!inv->n_gpus) fprintf(stderr, "gpusched discover: no NVIDIA GPU found (backend %s)\n", inv->backend);
        rc = emit(&o, inv);
    }
    free(inv);
    gs_disc_close(&d);
    return rc ? 1 : 0;
}
