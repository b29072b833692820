/*
 * cmd_sim_whatif.c - `gpusched sim --from-cluster` and `sim --snapshot DIR`:
 * when would each pending pod of a live cluster start, and what would
 * change it (sim/whatif.h).
 *
 *   gpusched sim --from-cluster [--kubeconfig FILE | --server URL] [--assume-duration D] [changes]
 *   gpusched sim --snapshot DIR [changes]
 *
 * --from-cluster takes the snapshot in memory (what `gpusched snapshot`
 * would write); --snapshot reads one written earlier. Without changes each
 * pending pod's start (seconds from the snapshot) and node are printed; with
 * changes the replay runs twice and each pod's before and after are shown
 * with what changed. --json prints one JSON object instead.
 */
#include "cli/commands.h"
#include "control/client.h"
#include "core/codec.h"
#include "sim/snapshot.h"
#include "sim/trace_manifest.h"
#include "sim/whatif.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CHANGES 64
#define MAX_OVERLAYS 16

struct wargs {
    bool from_cluster, json;
    const char *snapshot, *policy, *config;
    const char *overlays[MAX_OVERLAYS];
    size_t noverlays;
    struct gs_client_opts conn;
    double assume;
    const char *assume_text;
    uint64_t seed;
    struct gs_whatif_change changes[MAX_CHANGES];
    size_t nchanges;
};

static const char usage_text[] =
    "usage: gpusched sim --from-cluster [connection flags] [--assume-duration D] [changes] [--json]\n"
    "       gpusched sim --snapshot DIR [changes] [--json]\n\n"
    "Replays a live cluster forward (its nodes, running pods with their devices and\n"
    "time running, pending pods, queues) and says when each pending pod would start\n"
    "and on which node. With changes, the replay runs before and after them and each\n"
    "pod's difference is shown.\n\n"
    "input:\n"
    "  --from-cluster              snapshot the cluster now (gpusched snapshot, in memory)\n"
    "  --snapshot DIR              a snapshot written by gpusched snapshot -o DIR\n"
    "  --server URL, --kubeconfig FILE, --token T, --certificate-authority FILE,\n"
    "  --insecure-skip-tls-verify  the connection of --from-cluster (else as for get)\n"
    "  --assume-duration D         --from-cluster: how long pods without a\n"
    "                              sim.gpusched.io/duration annotation run (30m, 2h, seconds)\n\n"
    "changes (repeatable):\n"
    "  --add-nodes N:NODE          N more nodes like NODE\n"
    "  --remove-node NAME          NAME gone; its pods wait again\n"
    "  --set-quota CQ:RES=QTY      a ClusterQueue's nominalQuota (a Queue's capability) of RES\n"
    "  --set-weight QUEUE=W        a ClusterQueue's fairSharing.weight or a Queue's weight\n"
    "  --overlay FILE              manifests replacing (same kind, namespace, name) or adding objects\n"
    "  --policy NAME               placement score of the changed run (default: the server's profile)\n"
    "  --config FILE               scheduler configuration of the changed run\n\n"
    "  --seed N                    random seed (default 42)\n"
    "  --json                      one JSON object on stdout\n"
    "  -h, --help                  this help\n";

static int bad(const char *flag, const char *value, const char *why)
{
    fprintf(stderr, "gpusched sim: %s \"%s\": %s\n", flag, value, why);
    return 2;
}

static int parse(int argc, char **argv, struct wargs *a)
{
    static const struct option opts[] = {
        {"from-cluster", no_argument, 0, 'F'},     {"snapshot", required_argument, 0, 'S'},
        {"server", required_argument, 0, 's'},     {"kubeconfig", required_argument, 0, 'k'},
        {"token", required_argument, 0, 't'},      {"certificate-authority", required_argument, 0, 'c'},
        {"insecure-skip-tls-verify", no_argument, 0, 'I'}, {"assume-duration", required_argument, 0, 'd'},
        {"add-nodes", required_argument, 0, 'a'},  {"remove-node", required_argument, 0, 'r'},
        {"set-quota", required_argument, 0, 'q'},  {"set-weight", required_argument, 0, 'w'},
        {"overlay", required_argument, 0, 'o'},    {"policy", required_argument, 0, 'p'},
        {"config", required_argument, 0, 'C'},     {"seed", required_argument, 0, 'e'},
        {"json", no_argument, 0, 'j'},             {"experiment", required_argument, 0, 'x'},
        {"help", no_argument, 0, 'h'},             {0, 0, 0, 0},
    };
    optind = 1;
    int ch, idx = 0;
    while ((ch = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        const char *why = NULL;
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", opts[idx].name);
        switch (ch) {
        case 'F': a->from_cluster = true; break;
        case 'S': a->snapshot = optarg; break;
        case 's': a->conn.server = optarg; break;
        case 'k': a->conn.kubeconfig = optarg; break;
        case 't': a->conn.token = optarg; break;
        case 'c': a->conn.ca_file = optarg; break;
        case 'I': a->conn.insecure_skip_verify = true; break;
        case 'd':
            if (gs_sim_duration_parse(optarg, &a->assume, &why)) return bad(flag, optarg, why);
            a->assume_text = optarg;
            break;
        case 'a': case 'r': case 'q': case 'w':
            if (a->nchanges == MAX_CHANGES) return bad(flag, optarg, "too many changes (64 at most)");
            if (gs_whatif_change_parse(opts[idx].name, optarg, &a->changes[a->nchanges], &why))
                return bad(flag, optarg, why);
            a->nchanges++;
            break;
        case 'o':
            if (a->noverlays == MAX_OVERLAYS) return bad(flag, optarg, "too many overlays (16 at most)");
            a->overlays[a->noverlays++] = optarg;
            break;
        case 'p': a->policy = optarg; break;
        case 'C': a->config = optarg; break;
        case 'e': {
            char *end;
            a->seed = strtoull(optarg, &end, 10);
            if (*end || end == optarg) return bad(flag, optarg, "want a whole number");
            break;
        }
        case 'j': a->json = true; break;
        case 'x':
            if (strcmp(optarg, "replay")) return bad(flag, optarg, "a what-if is a replay (--experiment replay)");
            break;
        case 'h': fputs(usage_text, stdout); return 1;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (optind < argc) return bad("argument", argv[optind], "unexpected");
    if (a->from_cluster == (a->snapshot != NULL)) {
        fprintf(stderr, "gpusched sim: give one of --from-cluster and --snapshot DIR\n");
        return 2;
    }
    if (a->snapshot && a->assume >= 0)
        return bad("--assume-duration", a->assume_text,
                   "only for --from-cluster: a snapshot's pods already carry durations");
    return 0;
}

static void print_diags(const struct gs_diags *d)
{
    for (size_t i = 0; i < d->n; i++)
        fprintf(stderr, "gpusched sim: %s%s%s\n", d->v[i].path, d->v[i].path[0] ? ": " : "", d->v[i].msg);
}

/* Every document of path appended to docs. */
static int read_into(const char *path, json_t *docs, struct gs_diags *d)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = gs_read_file(path, &buf, &len);
    if (rc) return gs_diags_add(d, path, "cannot read: %s", gs_strerror(rc)), rc;
    struct gs_docs v = {0};
    struct gs_diags inner = {0};
    rc = gs_decode_stream(buf, len, &v, &inner, NULL);
    free(buf);
    for (size_t i = 0; i < inner.n; i++) gs_diags_add(d, path, "%s%s%s", inner.v[i].path, inner.v[i].path[0] ? ": " : "", inner.v[i].msg);
    gs_diags_free(&inner);
    for (size_t i = 0; !rc && i < v.n; i++)
        if (json_array_append(docs, v.docs[i])) rc = GS_ENOMEM;
    gs_docs_free(&v);
    return rc;
}

static int load_snapshot(const struct wargs *a, json_t **cluster, json_t **workload, struct gs_diags *d)
{
    if (a->from_cluster) {
        struct gs_snapshot_opts so = {.now = (double)time(NULL), .assume_duration = a->assume};
        return gs_snapshot_take(&a->conn, &so, cluster, workload, d);
    }
    *cluster = json_array();
    *workload = json_array();
    if (!*cluster || !*workload) return GS_ENOMEM;
    char path[4200];
    snprintf(path, sizeof path, "%s/cluster.yaml", a->snapshot);
    int rc = read_into(path, *cluster, d);
    snprintf(path, sizeof path, "%s/workload.yaml", a->snapshot);
    if (!rc) rc = read_into(path, *workload, d);
    return rc;
}

static void when(double t, char *buf, size_t len)
{
    if (t < 0) snprintf(buf, len, "never");
    else if (t == 0) snprintf(buf, len, "now");
    else snprintf(buf, len, "in %gs", t);
}

static const char *change(const struct gs_whatif_pod *b, const struct gs_whatif_pod *f, char *buf, size_t len)
{
    if (!f) return "gone";
    if (b->start < 0 && f->start < 0) return "still does not start";
    if (b->start < 0) return "now starts";
    if (f->start < 0) return "no longer starts";
    if (f->start < b->start) snprintf(buf, len, "%gs earlier", b->start - f->start);
    else if (f->start > b->start) snprintf(buf, len, "%gs later", f->start - b->start);
    else snprintf(buf, len, strcmp(b->node, f->node) ? "another node" : "same");
    return buf;
}

static json_t *pod_json(const struct gs_whatif_pod *p)
{
    if (!p) return json_null();
    json_t *o = json_pack("{s:s}", "pod", p->pod);
    json_object_set_new(o, "start", p->start >= 0 ? json_real(p->start) : json_null());
    json_object_set_new(o, "node", p->node[0] ? json_string(p->node) : json_null());
    if (p->start < 0) json_object_set_new(o, "reason", json_string(p->reason));
    return o;
}

static void print_result(const struct wargs *a, const struct gs_whatif_result *before,
                         const struct gs_whatif_result *after)
{
    char b1[32], b2[32], c[64];
    if (a->json) {
        json_t *pods = json_array();
        for (size_t i = 0; i < before->n; i++) {
            json_t *o = pod_json(&before->v[i]);
            if (after) {
                const struct gs_whatif_pod *f = gs_whatif_find(after, before->v[i].pod);
                json_t *fa = pod_json(f);
                json_object_del(fa, "pod");
                json_object_set_new(o, "after", fa);
                json_object_set_new(o, "change", json_string(change(&before->v[i], f, c, sizeof c)));
            }
            json_array_append_new(pods, o);
        }
        json_t *top = json_pack("{s:o}", "pods", pods);
        if (a->assume >= 0) json_object_set_new(top, "assumed_duration", json_real(a->assume));
        char *text = gs_json_encode(top, 0);
        if (text) printf("%s\n", text);
        free(text);
        json_decref(top);
        return;
    }
    if (a->assume >= 0) printf("pods without a %s annotation are assumed to run %gs\n", GS_ANN_SIM_DURATION, a->assume);
    if (!before->n) printf("no pending pods\n");
    else if (!after) printf("%-40s %-12s %s\n", "POD", "START", "NODE");
    else printf("%-40s %-12s %-20s %-12s %-20s %s\n", "POD", "BEFORE", "NODE", "AFTER", "NODE", "CHANGE");
    for (size_t i = 0; i < before->n; i++) {
        const struct gs_whatif_pod *p = &before->v[i];
        when(p->start, b1, sizeof b1);
        if (!after) {
            printf("%-40s %-12s %s\n", p->pod, b1, p->start >= 0 ? p->node : p->reason);
            continue;
        }
        const struct gs_whatif_pod *f = gs_whatif_find(after, p->pod);
        when(f ? f->start : -1, b2, sizeof b2);
        printf("%-40s %-12s %-20s %-12s %-20s %s\n", p->pod, b1, p->start >= 0 ? p->node : "-", b2,
               f && f->start >= 0 ? f->node : "-", change(p, f, c, sizeof c));
    }
}

int gs_cmd_sim_whatif(int argc, char **argv)
{
    struct wargs a = {.assume = -1, .seed = 42};
    int rc = parse(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    json_t *cluster = NULL, *workload = NULL, *overlay = json_array();
    struct gs_diags d = {0};
    struct gs_whatif_result before = {0}, after = {0};
    bool changed = a.nchanges || a.noverlays || a.policy || a.config;
    rc = overlay ? load_snapshot(&a, &cluster, &workload, &d) : GS_ENOMEM;
    for (size_t i = 0; !rc && i < a.noverlays; i++) rc = read_into(a.overlays[i], overlay, &d);
    struct gs_sim_opts base = {.mode = GS_SIM_REPLAY, .seed = a.seed};
    if (!rc) rc = gs_whatif_run(cluster, workload, &base, &before, &d);
    if (!rc && changed) {
        struct gs_sim_opts o = base;
        o.policy = a.policy;
        o.config_path = a.config;
        rc = gs_whatif_apply(cluster, workload, a.changes, a.nchanges, overlay, &d);
        if (!rc) rc = gs_whatif_run(cluster, workload, &o, &after, &d);
    }
    print_diags(&d);
    if (!rc) print_result(&a, &before, changed ? &after : NULL);
    else if (!d.n) fprintf(stderr, "gpusched sim: %s\n", gs_strerror(rc));
    gs_diags_free(&d);
    gs_whatif_result_free(&before);
    gs_whatif_result_free(&after);
    json_decref(cluster);
    json_decref(workload);
    json_decref(overlay);
    return rc ? 1 : 0;
}
