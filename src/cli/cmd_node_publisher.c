/*
 * cmd_node_publisher.c - `gpusched node-publisher`: publishes this node's
 * GPUs to a Kubernetes API server for the scheduler, where kubelet (not a
 * gpusched agent) owns the Node.
 *
 * Every period it re-reads the inventory (a MIG re-partition changes it),
 * runs one exporter collection on the same backend for GPU health (Xid
 * events, GPUs that stop answering: the same machine the exporter and the
 * agent use), then
 *   1. GETs the Node and, when anything differs, writes one JSON merge patch
 *      of its metadata: GFD labels, the gpusched.io/gpus annotation, the list
 *      of labels it owns (discovery/publish.h says why each);
 *   2. GETs the node's NodeResourceTopology and creates it, or PUTs it with
 *      the resourceVersion read when its zones changed. A server without
 *      the NRT CRD answers 404 to the create: said once, the labels and the
 *      annotation still go out;
 *   3. with --resource-slices, lists the node's DRA ResourceSlices (driver
 *      gpu.nvidia.com) and, when they differ from what the GPUs say now
 *      (discovery/resourceslice.h), writes them one pool generation higher
 *      and deletes the ones no longer produced; at resource.k8s.io/v1, or
 *      v1beta1 on a server that serves only that (Kubernetes 1.32). Off by
 *      default: where NVIDIA's DRA kubelet plugin runs it publishes them.
 * Nothing is written for an unchanged node. The client is made afresh each
 * period so a rotated service-account token is picked up.
 *
 * Verbs used, for the ClusterRole in deploy/: get and patch nodes; get,
 * create and update noderesourcetopologies; with --resource-slices list,
 * create, update and delete resourceslices. Exit codes: 0, 1 a publish
 * failed (--once), 2 usage error.
 */
#include "cli/commands.h"
#include "cli/signals.h"
#include "control/client.h"
#include "control/dra_convert.h"
#include "control/resources.h"
#include "core/log.h"
#include "discovery/discovery.h"
#include "discovery/exporter.h"
#include "discovery/health.h"
#include "discovery/outputs.h"
#include "discovery/publish.h"
#include "discovery/resourceslice.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CMD "gpusched node-publisher"

static void usage(FILE *f)
{
    fprintf(f, "usage: " CMD " --node-name NAME [--kubeconfig FILE] [--mock SPEC|--nvml] [options]\n\n"
               "Publishes this node's GPUs to the API server: GPU Feature Discovery labels and the\n"
               "per-GPU annotation gpusched.io/gpus on the Node, and its NodeResourceTopology.\n"
               "Runs until SIGINT or SIGTERM (or once with --once).\n\n"
               "options:\n"
               "  --kubeconfig FILE       connection settings (default $KUBECONFIG; in a pod the\n"
               "                          service account's in-cluster configuration)\n"
               "  --node-name NAME        the Node to publish to (default $NODE_NAME)\n"
               "  --mock SPEC|FILE        mock GPUs instead of probing, e.g. 8xH100-80GB,nvlink=all\n"
               "  --nvml                  probe with NVML only (fail when it does not load)\n"
               "  --backend NAME          auto (NVML, else sysfs; default), nvml, sysfs or mock\n"
               "  --sysfs-root DIR        where sysfs is mounted (default /sys)\n"
               "  --interval DURATION     publish period (default 30s)\n"
               "  --once                  publish once and exit: 0 done, 1 failed\n"
               "  --mig-strategy S        none (default), single or mixed, as GFD's\n"
               "  --topology-policy P     NRT topologyManagerPolicy (default none)\n"
               "  --topology-scope S      NRT topologyManagerScope (default container)\n"
               "  --no-nrt                do not write the NodeResourceTopology\n"
               "  --resource-slices       also publish the node's DRA ResourceSlices (gpu.nvidia.com)\n"
               "  --dra-partitionable     ...with MIG-capable GPUs as counter sets (docs/DRA.md)\n"
               "  --log-level LEVEL       debug, info (default), warn, error\n"
               "  -h, --help              show this help\n");
}

struct opts {
    const char *kubeconfig, *node, *mock, *backend, *sysfs, *policy, *scope;
    int64_t interval_ns;
    bool once, no_nrt, slices, partitionable;
    struct gs_label_opts labels;
};

enum { O_KUBECONFIG = 256, O_NODE, O_MOCK, O_NVML, O_BACKEND, O_SYSFS, O_INTERVAL, O_ONCE, O_MIG, O_POLICY, O_SCOPE,
       O_NO_NRT, O_LOG, O_SLICES, O_PARTITIONABLE };

static int bad(const char *flag, const char *value, const char *why)
{
    fprintf(stderr, CMD ": %s \"%s\": %s\n", flag, value, why);
    return 2;
}

static int parse_opt(struct opts *o, int c, const char *arg)
{
    enum gs_log_level lvl;
    switch (c) {
    case O_KUBECONFIG: o->kubeconfig = arg; return -1;
    case O_NODE: o->node = arg; return -1;
    case O_MOCK: o->mock = arg; return -1;
    case O_NVML: o->backend = "nvml"; return -1;
    case O_BACKEND: o->backend = arg; return -1;
    case O_SYSFS: o->sysfs = arg; return -1;
    case O_ONCE: o->once = true; return -1;
    case O_NO_NRT: o->no_nrt = true; return -1;
    case O_SLICES: o->slices = true; return -1;
    case O_PARTITIONABLE: o->partitionable = true; return -1;
    case O_POLICY: o->policy = arg; return -1;
    case O_SCOPE: o->scope = arg; return -1;
    case O_INTERVAL:
        if (gs_duration_parse(arg, &o->interval_ns) || o->interval_ns < GS_NS_PER_SEC)
            return bad("--interval", arg, "want a duration of at least 1s, e.g. 30s");
        return -1;
    case O_MIG:
        return gs_mig_strategy_parse(arg, &o->labels.mig) ? bad("--mig-strategy", arg, "want none, single or mixed")
                                                          : -1;
    case O_LOG:
        if (gs_log_level_parse(arg, &lvl)) return bad("--log-level", arg, "want debug, info, warn or error");
        gs_log_set_level(lvl);
        return -1;
    case 'h': usage(stdout); return 0;
    default: return -2;
    }
}

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        {"kubeconfig", required_argument, NULL, O_KUBECONFIG}, {"node-name", required_argument, NULL, O_NODE},
        {"mock", required_argument, NULL, O_MOCK},             {"nvml", no_argument, NULL, O_NVML},
        {"backend", required_argument, NULL, O_BACKEND},       {"sysfs-root", required_argument, NULL, O_SYSFS},
        {"interval", required_argument, NULL, O_INTERVAL},     {"once", no_argument, NULL, O_ONCE},
        {"mig-strategy", required_argument, NULL, O_MIG},      {"topology-policy", required_argument, NULL, O_POLICY},
        {"topology-scope", required_argument, NULL, O_SCOPE},  {"no-nrt", no_argument, NULL, O_NO_NRT},
        {"resource-slices", no_argument, NULL, O_SLICES}, {"dra-partitionable", no_argument, NULL, O_PARTITIONABLE},
        {"log-level", required_argument, NULL, O_LOG},         {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    o->interval_ns = 30 * GS_NS_PER_SEC;
    o->labels.nvidia_pci_devices = -1;
    optind = 0;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "h", longs, NULL)) != -1;) {
        int rc = parse_opt(o, c, optarg);
        if (rc == -2) {
            fprintf(stderr, CMD ": bad option \"%s\" (unknown, or missing its value)\n\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
        if (rc >= 0) return rc;
    }
    if (optind < argc) {
        fprintf(stderr, CMD ": unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    if (!o->node) o->node = getenv("NODE_NAME");
    if (!o->node || !*o->node) {
        fprintf(stderr, CMD ": --node-name is required (or set NODE_NAME; in a DaemonSet from spec.nodeName)\n");
        return 2;
    }
    if (o->mock && o->backend && strcmp(o->backend, "mock"))
        return bad("--mock", o->mock, "cannot be combined with another backend (--nvml or --backend)");
    return -1;
}

/*--- One publish ---*/

struct publisher {
    const struct opts *o;
    struct gs_disc disc;
    struct gs_exporter *exp; /* health: one collection per period, no HTTP */
    struct gs_inventory inv;
    bool nrt_unserved_said;
    uint64_t unhealthy;                /* as of the last period, by position */
    int64_t since_s[GS_DISC_MAX_GPUS]; /* when each went unhealthy: the taints' timeAdded */
};

/* The Status message of an error answer, or the error's name. */
static const char *why(int err, const json_t *status)
{
    const char *m = gs_client_status_message(status);
    return m && *m ? m : gs_strerror(err);
}

static int publish_node(struct publisher *p, struct gs_client *c, uint64_t unhealthy)
{
    const struct gs_api_resource *nodes = gs_api_resource_lookup("nodes");
    json_t *node = NULL, *patch = NULL, *out = NULL;
    int err = gs_client_get(c, nodes, NULL, p->o->node, &node);
    if (err == GS_ENOENT) {
        gs_log(GS_LOG_ERROR, "node-publisher: the Node does not exist (kubelet registers it; check --node-name)",
               "node", p->o->node, NULL);
    } else if (err) {
        gs_log(GS_LOG_ERROR, "node-publisher: cannot read the Node", "node", p->o->node, "error", why(err, node), NULL);
    } else if ((err = gs_publish_node_patch(node, &p->inv, unhealthy, &p->o->labels, &patch))) {
        gs_log(GS_LOG_ERROR, "node-publisher: cannot build the Node patch", "error", gs_strerror(err), NULL);
    } else if (patch) {
        err = gs_client_patch(c, nodes, NULL, p->o->node, NULL, false, patch, &out);
        if (err) gs_log(GS_LOG_ERROR, "node-publisher: patching the Node failed", "node", p->o->node, "error",
                        why(err, out), NULL);
        else gs_log(GS_LOG_INFO, "node-publisher: Node labels and gpus annotation written", "node", p->o->node, NULL);
    }
    json_decref(node);
    json_decref(patch);
    json_decref(out);
    return err;
}

static int publish_nrt(struct publisher *p, struct gs_client *c, uint64_t unhealthy)
{
    const struct gs_api_resource *r = gs_api_resource_lookup("noderesourcetopologies");
    struct gs_nrt_opts no = {.policy = p->o->policy, .scope = p->o->scope};
    int err = GS_ECONFLICT;
    for (int attempt = 0; attempt < 2 && err == GS_ECONFLICT; attempt++) {
        json_t *cur = NULL, *obj = NULL, *out = NULL;
        err = gs_client_get(c, r, NULL, p->o->node, &cur);
        if (err == GS_ENOENT) {
            json_decref(cur); /* the 404's Status */
            cur = NULL;
            err = 0;
        }
        if (!err) err = gs_publish_nrt(cur, p->o->node, &p->inv, unhealthy, &no, &obj);
        if (!err && obj)
            err = cur ? gs_client_update(c, r, NULL, p->o->node, NULL, obj, &out) : gs_client_create(c, r, NULL, obj, &out);
        if (err == GS_ENOENT && !cur) {
            if (!p->nrt_unserved_said)
                gs_log(GS_LOG_WARN, "node-publisher: the server does not serve noderesourcetopologies "
                                    "(topology.node.k8s.io/v1alpha2): install its CRD or pass --no-nrt; "
                                    "the gpus annotation still carries the per-GPU state", NULL);
            p->nrt_unserved_said = true;
            err = 0;
        } else if (err && err != GS_ECONFLICT) {
            gs_log(GS_LOG_ERROR, "node-publisher: writing the NodeResourceTopology failed", "node", p->o->node,
                   "error", why(err, out ? out : cur), NULL);
        } else if (!err && obj) {
            gs_log(GS_LOG_INFO, cur ? "node-publisher: NodeResourceTopology updated"
                                    : "node-publisher: NodeResourceTopology created", "node", p->o->node, NULL);
        }
        json_decref(cur);
        json_decref(obj);
        json_decref(out);
    }
    if (err == GS_ECONFLICT)
        gs_log(GS_LOG_WARN, "node-publisher: the NodeResourceTopology changed under every write; next period",
               "node", p->o->node, NULL);
    return err;
}

static const char *slice_name(const json_t *o)
{
    const char *n = json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
    return n ? n : "";
}

/* The node's slices at r's version, converted to v1; GS_ENOENT when the version is not served. */
static int list_slices(struct gs_client *c, const struct gs_api_resource *r, const char *node, json_t **have)
{
    char fs[320];
    snprintf(fs, sizeof fs, "spec.nodeName=%s,spec.driver=%s", node, GS_DRA_NVIDIA_DRIVER);
    json_t *list = NULL;
    int err = gs_client_list(c, r, NULL, NULL, fs, false, &list);
    *have = err ? NULL : json_array();
    size_t i;
    json_t *s;
    json_array_foreach(err ? NULL : json_object_get(list, "items"), i, s) {
        json_t *copy = json_deep_copy(s); /* list items may omit apiVersion and kind: the list's */
        char gv[64];
        if (!copy) continue;
        json_object_set_new(copy, "apiVersion", json_string(gs_api_resource_gv(r, gv, sizeof gv)));
        json_object_set_new(copy, "kind", json_string("ResourceSlice"));
        gs_dra_to_storage(copy);
        json_array_append_new(*have, copy);
    }
    json_decref(list);
    return err;
}

/* When the server's slices say GPU uuid became unhealthy (its taint's timeAdded), 0 if they do not: a
 * restarted publisher keeps the time, and so writes nothing for a node that did not change. */
static int64_t tainted_since(const json_t *have, const char *uuid)
{
    size_t i, j, k;
    json_t *s, *d, *t;
    json_array_foreach(have, i, s) json_array_foreach(json_object_get(json_object_get(s, "spec"), "devices"), j, d) {
        const char *u = json_string_value(json_object_get(json_object_get(json_object_get(d, "attributes"), "uuid"),
                                                          "string"));
        if (!u || strcmp(u, uuid)) continue;
        json_array_foreach(json_object_get(d, "taints"), k, t) {
            const char *key = json_string_value(json_object_get(t, "key"));
            const char *at = json_string_value(json_object_get(t, "timeAdded"));
            struct tm tm = {0};
            if (key && at && !strcmp(key, GS_DRA_TAINT_UNHEALTHY) && strptime(at, "%Y-%m-%dT%H:%M:%SZ", &tm))
                return (int64_t)timegm(&tm);
        }
    }
    return 0;
}

static int publish_slices(struct publisher *p, struct gs_client *c, uint64_t unhealthy)
{
    const struct gs_api_resource *r = gs_api_resource_find("resource.k8s.io", "v1", "resourceslices");
    json_t *have = NULL, *want = NULL;
    int err = list_slices(c, r, p->o->node, &have);
    if (err == GS_ENOENT) { /* Kubernetes 1.32 serves resource.k8s.io/v1beta1 only */
        r = gs_api_resource_find("resource.k8s.io", "v1beta1", "resourceslices");
        err = list_slices(c, r, p->o->node, &have);
    }
    if (err) {
        gs_log(GS_LOG_ERROR, "node-publisher: cannot list the node's ResourceSlices", "node", p->o->node, "error",
               gs_strerror(err), NULL);
        return err;
    }
    struct gs_slice_health h = {.unhealthy = unhealthy};
    int64_t now = (int64_t)time(NULL);
    for (int i = 0; i < p->inv.n_gpus && i < GS_DISC_MAX_GPUS; i++) {
        if ((unhealthy >> i & 1) && !(p->unhealthy >> i & 1)) {
            int64_t was = p->since_s[i] ? 0 : tainted_since(have, p->inv.gpus[i].uuid);
            p->since_s[i] = was ? was : now;
        }
        h.since_s[i] = p->since_s[i];
        struct gs_health_gpu hg;
        if ((unhealthy >> i & 1) && gs_health_get(gs_exporter_health(p->exp), p->inv.gpus[i].index, &hg) == 0 &&
            (!hg.answering || hg.last_xid == 48 || hg.last_xid == 79 || hg.last_xid == 95))
            h.fatal |= 1ull << i;
    }
    p->unhealthy = unhealthy;
    bool changed = false;
    struct gs_diags d = {0};
    if ((err = gs_resourceslices_next(have, &p->inv, p->o->node, p->o->partitionable, &h, &want, &changed, &d)))
        gs_log(GS_LOG_ERROR, "node-publisher: cannot build the ResourceSlices", "node", p->o->node, "error",
               d.n ? d.v[0].msg : gs_strerror(err), NULL);
    gs_diags_free(&d);
    size_t i, j;
    json_t *w, *x;
    json_array_foreach(changed ? want : NULL, i, w) {
        const json_t *cur = NULL;
        json_array_foreach(have, j, x) if (!strcmp(slice_name(x), slice_name(w))) cur = x;
        json_t *obj = gs_dra_serve(r, json_deep_copy(w)), *out = NULL; /* in the version the server speaks */
        if (cur) json_object_set(json_object_get(obj, "metadata"), "resourceVersion",
                                 json_object_get(json_object_get(cur, "metadata"), "resourceVersion"));
        err = cur ? gs_client_update(c, r, NULL, slice_name(w), NULL, obj, &out)
                  : gs_client_create(c, r, NULL, obj, &out);
        if (err) gs_log(GS_LOG_ERROR, "node-publisher: writing a ResourceSlice failed", "slice", slice_name(w), "error",
                        why(err, out), NULL);
        json_decref(obj);
        json_decref(out);
        if (err) break;
    }
    json_array_foreach(changed && !err ? have : NULL, j, x) {
        bool wanted = false;
        json_array_foreach(want, i, w) wanted |= !strcmp(slice_name(x), slice_name(w));
        if (!wanted && (err = gs_client_delete(c, r, NULL, slice_name(x), NULL)) == GS_ENOENT) err = 0;
    }
    if (changed && !err)
        gs_log(GS_LOG_INFO, "node-publisher: ResourceSlices written", "node", p->o->node, "version", r->version, NULL);
    json_decref(have);
    json_decref(want);
    return err;
}

/* A client for the API: --kubeconfig, else client.h's resolution (the
 * environment, in-cluster configuration). Problems are logged. */
static int connect_api(const struct opts *o, struct gs_client **c)
{
    struct gs_client_opts co = {.kubeconfig = o->kubeconfig};
    struct gs_diags d = {0};
    int err = gs_client_new(&co, c, &d);
    for (size_t i = 0; err && i < d.n; i++)
        gs_log(GS_LOG_ERROR, "node-publisher: no API connection", "where", d.v[i].path, "error", d.v[i].msg, NULL);
    gs_diags_free(&d);
    return err;
}

static int publish_once(struct publisher *p)
{
    int err = gs_disc_inventory(&p->disc, &p->inv);
    if (err) {
        gs_log(GS_LOG_ERROR, "node-publisher: discovery failed", "error", p->disc.err[0] ? p->disc.err : gs_strerror(err),
               NULL);
        return err;
    }
    gs_exporter_set_mig(p->exp, &p->inv);
    gs_exporter_collect(p->exp);
    uint64_t unhealthy = gs_health_unhealthy_mask(gs_exporter_health(p->exp));
    if (p->inv.n_gpus < 64) unhealthy &= (1ull << p->inv.n_gpus) - 1;
    struct gs_client *c = NULL;
    if ((err = connect_api(p->o, &c))) return err;
    err = publish_node(p, c, unhealthy);
    if (!err && !p->o->no_nrt) err = publish_nrt(p, c, unhealthy);
    if (!err && p->o->slices) err = publish_slices(p, c, unhealthy);
    gs_client_free(c);
    return err;
}

/* Sleeps up to ns, or less when SIGINT/SIGTERM (blocked in every thread) comes: true then. */
static bool stop_within(const sigset_t *set, int64_t ns)
{
    struct timespec ts = {(time_t)(ns / GS_NS_PER_SEC), (long)(ns % GS_NS_PER_SEC)};
    int sig = sigtimedwait(set, NULL, &ts);
    return sig == SIGINT || sig == SIGTERM;
}

static int run(struct publisher *p, const sigset_t *set)
{
    if (p->o->once) return publish_once(p) ? 1 : 0;
    gs_log(GS_LOG_INFO, "node-publisher: started", "node", p->o->node, "backend", p->inv.backend, NULL);
    do publish_once(p); /* failures are logged and retried next period */
    while (!stop_within(set, p->o->interval_ns));
    gs_log(GS_LOG_INFO, "node-publisher: stopping", "node", p->o->node, NULL);
    return 0;
}

int gs_cmd_node_publisher(int argc, char **argv)
{
    struct opts o;
    memset(&o, 0, sizeof o);
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    sigset_t set, old;
    gs_cli_block_stop_signals(&set, &old);
    struct gs_clock clock;
    gs_clock_init_real(&clock);
    struct publisher *p = calloc(1, sizeof *p);
    if (!p) return 1;
    p->o = &o;
    if ((rc = gs_disc_open_named(&p->disc, o.backend, o.mock, o.sysfs, &clock))) {
        fprintf(stderr, CMD ": %s\n", p->disc.err[0] ? p->disc.err : gs_strerror(rc));
        rc = rc == GS_EINVAL ? 2 : 1;
    } else {
        struct gs_exporter_config ec = {.no_hostname = true};
        if ((rc = gs_exporter_create(&p->disc, &ec, &p->exp))) {
            fprintf(stderr, CMD ": %s\n", p->disc.err[0] ? p->disc.err : gs_strerror(rc));
            rc = 1;
        } else {
            if (!gs_disc_inventory(&p->disc, &p->inv) && strcmp(p->inv.backend, "mock"))
                o.labels.nvidia_pci_devices = gs_sysfs_nvidia_present(o.sysfs);
            /* A configuration that cannot work is said now, not retried every period. */
            struct gs_client *c = NULL;
            rc = connect_api(&o, &c) ? 1 : run(p, &set);
            gs_client_free(c);
            gs_exporter_free(p->exp);
        }
        gs_disc_close(&p->disc);
    }
    free(p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
