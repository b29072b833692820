/*
 * cmd_explain.c - `gpusched explain POD`: why a pod (or pod group) is pending.
 *
 *   gpusched explain POD --cluster nodes.yaml --workload pods.yaml [--at T]
 *       [--config sched.yaml] [--policy NAME] [--from out/DIR]
 *
 * The cluster as it was at time T (default: the end of the run) is rebuilt
 * from the simulator's events - a fresh replay of the manifests, or the
 * events.jsonl of an earlier `gpusched sim --out DIR` run with --from - by
 * placing every pod that was running at T on its node and GPUs. The
 * scheduler's framework (the --config profile or the server's) is then
 * asked about the pod: explain.h. POD is "namespace/name" or "name"; when no
 * pod has that name, a PodGroup of that name is explained member by member.
 *
 *   gpusched explain POD [-n NS] [--server URL | --kubeconfig FILE ...]
 *
 * Without --cluster the question goes to the server (the connection flags,
 * $KUBECONFIG or the default kubeconfig, as for get/describe): its
 * scheduler answers from its live cache (pods/NAME/explain). A pending pod
 * then also gets an ETA: the first start of that pod in a replay of a
 * snapshot of the cluster taken now (sim/whatif.h), pods without a duration
 * annotation running --assume-duration D; without it, and with such pods,
 * the ETA line says why there is none.
 */
#include "cli/commands.h"
#include "control/cli_common.h"
#include "core/codec.h"
#include "sched/explain.h"
#include "sched/strmap.h"
#include "sched/topology_core.h"
#include "sim/sim.h"
#include "sim/trace_manifest.h"
#include "sim/whatif.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ev {
    double t;
    char type[16];
    char pod[GS__KEY_MAX];
    char node[256];
    uint64_t gpus;
    int32_t milli;
};

struct evlist {
    struct ev *v;
    size_t n, cap;
    int err;
};

struct ex_args {
    const char *target, *cluster, *workload, *config, *from, *policy;
    double at;
    bool have_at;
};

static void usage(FILE *f)
{
    fputs("usage: gpusched explain POD --cluster nodes.yaml --workload pods.yaml [options]\n\n"
          "Explains why a pod (namespace/name or name) or a pod group is pending at a\n"
          "moment of a simulated run: per filter plugin how many nodes reject it and why,\n"
          "the closest node and what it lacks, and what preemption would change.\n\n"
          "options:\n"
          "  --at T          the moment, in seconds (default: the end of the run)\n"
          "  --from DIR      take the run's events from DIR/events.jsonl (gpusched sim --out)\n"
          "                  instead of replaying the workload\n"
          "  --config FILE   scheduler configuration (profiles), as for gpusched sim\n"
          "  --policy NAME   placement policy of the replay (default: the profile's own, as for gpusched sim)\n"
          "  -h, --help      show this help\n",
          f);
}

static int push(struct evlist *l, const struct ev *e)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct ev *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) return l->err = GS_ENOMEM;
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = *e;
    return 0;
}

static const char *type_name(enum gs_sim_event_type t)
{
    return t == GS_SIM_SCHEDULED ? "scheduled" : t == GS_SIM_FAILED ? "failed" : t == GS_SIM_PREEMPTED ? "preempted" : "completed";
}

static void on_event(void *ctx, const struct gs_sim_event *e)
{
    struct ev x = {.t = e->t, .gpus = e->gpus, .milli = e->milli};
    snprintf(x.type, sizeof x.type, "%s", type_name(e->type));
    snprintf(x.pod, sizeof x.pod, "%s", e->pod ? e->pod : "");
    snprintf(x.node, sizeof x.node, "%s", e->node ? e->node : "");
    push(ctx, &x);
}

static int read_events(const char *dir, struct evlist *l)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    FILE *f = fopen(path, "re");
    if (!f) {
        fprintf(stderr, "gpusched explain: --from %s: cannot read %s\n", dir, path);
        return GS_EIO;
    }
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        json_t *o = json_loads(line, 0, NULL);
        if (!o) continue;
        struct ev x = {.t = json_number_value(json_object_get(o, "t")),
                       .milli = (int32_t)json_integer_value(json_object_get(o, "milli"))};
        const char *s;
        snprintf(x.type, sizeof x.type, "%s", (s = json_string_value(json_object_get(o, "event"))) ? s : "");
        snprintf(x.pod, sizeof x.pod, "%s", (s = json_string_value(json_object_get(o, "pod"))) ? s : "");
        snprintf(x.node, sizeof x.node, "%s", (s = json_string_value(json_object_get(o, "node"))) ? s : "");
        size_t i;
        json_t *g;
        json_array_foreach(json_object_get(o, "gpus"), i, g) x.gpus |= 1ULL << (json_integer_value(g) & 63);
        json_decref(o);
        push(l, &x);
    }
    fclose(f);
    return l->err;
}

static int parse(int argc, char **argv, struct ex_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) return 1;
        if (f[0] != '-') {
            if (a->target) return fprintf(stderr, "gpusched explain: more than one POD given\n"), 2;
            a->target = f;
            continue;
        }
        if (i + 1 >= argc) return fprintf(stderr, "gpusched explain: %s needs a value\n", f), 2;
        const char *v = argv[++i];
        if (!strcmp(f, "--cluster")) a->cluster = v;
        else if (!strcmp(f, "--workload")) a->workload = v;
        else if (!strcmp(f, "--config")) a->config = v;
        else if (!strcmp(f, "--from")) a->from = v;
        else if (!strcmp(f, "--policy")) a->policy = v;
        else if (!strcmp(f, "--at")) {
            char *end;
            a->at = strtod(v, &end);
            if (*end || end == v || a->at < 0) return fprintf(stderr, "gpusched explain: --at \"%s\": want seconds >= 0\n", v), 2;
            a->have_at = true;
        } else {
            return fprintf(stderr, "gpusched explain: unknown option %s\n", f), 2;
        }
    }
    if (!a->target || !a->cluster || !a->workload)
        return fprintf(stderr, "gpusched explain: POD, --cluster and --workload are required\n"), 2;
    return 0;
}

/* The scheduler configuration's default profile; without --config the
 * server's own (kube's default set when a --policy is given), so the pod is
 * judged by the profile the replay ran, as gpusched sim chooses it. */
static int load_profile(const char *path, const char *policy, struct gs_sched_config *cfg)
{
    if (!path) return policy ? gs_sched_config_default(cfg) : gs_sched_config_gpusched(cfg);
    char *buf = NULL;
    size_t len = 0;
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    int rc = gs_read_file(path, &buf, &len);
    if (!rc) rc = gs_decode_stream(buf, len, &docs, &d, NULL);
    free(buf);
    if (!rc) rc = docs.n == 1 ? gs_sched_config_parse(docs.docs[0], cfg, &d) : GS_EINVAL;
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, "gpusched explain: %s: %s: %s\n", path, d.v[i].path, d.v[i].msg);
    if (rc && !d.n) fprintf(stderr, "gpusched explain: %s: %s\n", path, gs_strerror(rc));
    gs_diags_free(&d);
    gs_docs_free(&docs);
    return rc;
}

struct world {
    struct gs_clock clock;
    struct gs_cache *cache;
    struct gs_sched_config cfg;
    bool have_cfg;
    struct gs_framework *fw;
    struct gs_nrt *nrts;
    size_t nnrts;
};

static void world_free(struct world *w)
{
    gs_framework_free(w->fw);
    if (w->cache) gs_cache_free(w->cache);
    if (w->have_cfg) gs_sched_config_free(&w->cfg);
    for (size_t i = 0; i < w->nnrts; i++) gs_nrt_clear(&w->nrts[i]);
    free(w->nrts);
}

static const struct gs_trace_pod *find_pod(const struct gs_trace *t, const char *key)
{
    for (size_t i = 0; i < t->npods; i++) {
        char k[GS__KEY_MAX];
        gs__pod_key(t->pods[i].pod, k, sizeof k);
        if (!strcmp(k, key)) return &t->pods[i];
    }
    return NULL;
}

/* Nodes, topologies, the profile, PodGroups, arrived pods, and the pods running at T. */
static int build_world(struct world *w, const struct gs_trace *t, const struct ex_args *a, const struct evlist *l,
                       double at)
{
    gs_clock_init_sim(&w->clock, (int64_t)(at * GS_NS_PER_SEC));
    if (!(w->cache = gs_cache_new(&w->clock))) return GS_ENOMEM;
    for (size_t i = 0; i < t->nnodes; i++)
        if (gs_cache_add_node_spec(w->cache, &t->nodes[i]) < 0) return GS_EINVAL;
    if (!(w->nrts = calloc(t->nobjects ? t->nobjects : 1, sizeof *w->nrts))) return GS_ENOMEM;
    for (size_t i = 0; i < t->nobjects; i++) {
        if (t->objects[i]->kind != GS_KIND_NODERESOURCETOPOLOGY) continue;
        if (gs_nrt_parse(gs_object_to_json(t->objects[i]), &w->nrts[w->nnrts], NULL) != 0) continue;
        int32_t idx = gs_cache_find_node(w->cache, w->nrts[w->nnrts].node);
        if (idx >= 0) gs_cache_set_nrt(w->cache, idx, &w->nrts[w->nnrts]);
        w->nnrts++;
    }
    int rc = load_profile(a->config, a->policy, &w->cfg);
    if (rc) return rc;
    w->have_cfg = true;
    const struct gs_profile *p = gs_sched_config_profile(&w->cfg, GS_DEFAULT_SCHEDULER);
    if (!p) p = &w->cfg.profiles[0];
    struct gs_handle h = {.clock = &w->clock, .cache = w->cache};
    struct gs_diags d = {0};
    rc = gs_framework_new(p, &h, &w->fw, &d);
    gs_diags_free(&d);
    if (rc) return rc;
    for (size_t i = 0; i < t->nobjects; i++)
        if (t->objects[i]->kind == GS_KIND_PODGROUP) gs_framework_notify_podgroup(w->fw, t->objects[i]->u.podgroup, true);
    for (size_t i = 0; i < t->npods; i++)
        if (t->pods[i].arrival <= at) gs_framework_notify_pod(w->fw, t->pods[i].pod, true);
    /* Replay the events up to T; place what is still running. */
    for (size_t i = 0; i < l->n; i++) {
        const struct ev *e = &l->v[i];
        if (e->t > at + 1e-9) break;
        if (!strcmp(e->type, "completed") || !strcmp(e->type, "preempted")) gs_cache_remove_pod(w->cache, e->pod);
        if (strcmp(e->type, "scheduled")) continue;
        const struct gs_trace_pod *tp = find_pod(t, e->pod);
        int32_t node = gs_cache_find_node(w->cache, e->node);
        if (!tp || node < 0) continue;
        struct gs_assignment as = {node, e->gpus, e->milli, tp->pod->demand.gpu_count ? tp->pod->demand.gpu_mem_mib : 0};
        gs_cache_add_bound(w->cache, tp->pod, &as);
    }
    return 0;
}

static int explain_target(struct world *w, const struct gs_trace *t, const char *target, double at)
{
    char key[GS__KEY_MAX];
    snprintf(key, sizeof key, "%s%s", strchr(target, '/') ? "" : "default/", target);
    const struct gs_trace_pod *tp = find_pod(t, key);
    if (tp) {
        if (tp->arrival > at) {
            printf("pod %s has not arrived by t=%g (arrives at %g)\n", key, at, tp->arrival);
            return 0;
        }
        const struct gs_assignment *a = gs_cache_pod_assignment(w->cache, key);
        if (a) {
            printf("pod %s is running on %s at t=%g\n", key, gs_cache_node(w->cache, a->node)->name, at);
            return 0;
        }
        printf("at t=%g:\n", at);
        return gs_explain_pod(w->fw, w->cache, tp->pod, stdout);
    }
    const char *slash = strchr(key, '/');
    const struct gs_pod **members = calloc(t->npods ? t->npods : 1, sizeof *members);
    if (!members) return GS_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < t->npods; i++) {
        const struct gs_pod *p = t->pods[i].pod;
        const char *ns = p->meta.namespace_ ? p->meta.namespace_ : "default";
        if (p->pod_group && t->pods[i].arrival <= at && !strcmp(p->pod_group, slash + 1) &&
            !strncmp(ns, key, (size_t)(slash - key)) && strlen(ns) == (size_t)(slash - key))
            members[n++] = p;
    }
    int rc = 0;
    if (!n) {
        fprintf(stderr, "gpusched explain: no pod or pod group %s (arrived by t=%g) in the workload\n", key, at);
        rc = 1;
    } else {
        printf("at t=%g:\n", at);
        rc = gs_explain_group(w->fw, w->cache, key, members, n, stdout);
    }
    free(members);
    return rc;
}

static int explain_server_args(int argc, char **argv, double assume);

static const char server_usage[] =
    "usage: gpusched explain POD [-n NAMESPACE] [connection flags]\n\n"
    "Asks the server's scheduler why a pod (namespace/name or name) is pending:\n"
    "per filter plugin how many nodes reject it and why, the closest node and\n"
    "what it lacks, and what preemption would change. A gang member explains\n"
    "its whole pod group. With --cluster/--workload the question goes to the\n"
    "simulator instead (gpusched explain --cluster x --help).\n\n"
    "A pending pod also gets an ETA from a replay of the cluster as it is now:\n"
    "      --assume-duration D     how long pods without a sim.gpusched.io/duration\n"
    "                              annotation run in that replay (30m, 2h, seconds)\n";

/* The ETA line: when a replay of the cluster as it is now starts the pod. */
static void print_eta(const struct gs_client_opts *conn, const char *key, double assume)
{
    struct gs_whatif_pod p;
    bool running = false;
    struct gs_diags d = {0};
    int rc = gs_whatif_eta(conn, assume, NULL, key, &p, &running, &d);
    char dur[64] = "";
    if (assume >= 0) snprintf(dur, sizeof dur, "; pods without a duration assumed to run %gs", assume);
    if (rc == 0 && p.start >= 0)
        printf("ETA: starts in %gs on %s (replay of the cluster as it is now, running pods ending at their "
               "durations%s)\n", p.start, p.node, dur);
    else if (rc == 0)
        printf("ETA: none: a replay of the cluster as it is now does not start it (%s)%s\n", p.reason, dur);
    else if (rc == GS_ENOENT)
        printf("ETA: none: the pod is %s\n", running ? "already bound to a node" : "not in the cluster's snapshot");
    else {
        printf("ETA: none: %s\n", d.n ? d.v[0].msg : gs_strerror(rc));
    }
    gs_diags_free(&d);
}

static int explain_server(int argc, char **argv)
{
    /* --assume-duration is explain's own; the rest are the shared client flags. */
    double assume = -1;
    char **av = calloc((size_t)argc + 1, sizeof *av);
    if (!av) return 1;
    int ac = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--assume-duration")) {
            av[ac++] = argv[i];
            continue;
        }
        const char *why = "needs a value";
        if (i + 1 >= argc || gs_sim_duration_parse(argv[++i], &assume, &why)) {
            fprintf(stderr, "gpusched explain: --assume-duration \"%s\": %s (want 30m, 2h or seconds)\n",
                    i < argc ? argv[i] : "", why);
            free(av);
            return 2;
        }
    }
    int rc = explain_server_args(ac, av, assume);
    free(av);
    return rc;
}

static int explain_server_args(int argc, char **argv, double assume)
{
    struct gs_cli c;
    int rc = gs_cli_parse(argc, argv, server_usage, &c);
    if (rc >= 0) return rc;
    if (c.nargs != 1) {
        fputs(server_usage, stderr);
        gs_cli_free(&c);
        return 2;
    }
    char ns[256], name[256];
    const char *slash = strchr(c.args[0], '/');
    snprintf(ns, sizeof ns, "%.*s", slash ? (int)(slash - c.args[0]) : 255,
             slash ? c.args[0] : c.ns ? c.ns : "default");
    snprintf(name, sizeof name, "%s", slash ? slash + 1 : c.args[0]);
    struct gs_client *cl = gs_cli_connect(&c, "explain");
    rc = 1;
    if (cl) {
        char path[700];
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/explain", ns, name);
        json_t *out = NULL;
        long code = 0;
        int err = gs_client_call(cl, "GET", path, NULL, NULL, NULL, &out, &code);
        const char *report = json_string_value(json_object_get(out, "report"));
        if (!err && code == 200 && report) {
            fputs(report, stdout);
            char key[600];
            snprintf(key, sizeof key, "%s/%s", ns, name);
            print_eta(&c.conn, key, assume);
            rc = 0;
        } else {
            gs_cli_report("explain", err ? err : GS_EIO, out);
        }
        json_decref(out);
    }
    gs_client_free(cl);
    gs_cli_free(&c);
    return rc;
}

/* The simulator's flags select it; else the server, when one is configured
 * (a connection flag, GPUSCHED_SERVER, KUBECONFIG or ./gpusched-data/kubeconfig). */
static bool wants_sim(int argc, char **argv)
{
    bool server = getenv("GPUSCHED_SERVER") || getenv("KUBECONFIG");
    FILE *kc = fopen("gpusched-data/kubeconfig", "re");
    if (kc) {
        server = true;
        fclose(kc);
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cluster") || !strncmp(argv[i], "--cluster=", 10) || !strcmp(argv[i], "--workload") ||
            !strcmp(argv[i], "--from") || !strncmp(argv[i], "--workload=", 11))
            return true;
        if (!strncmp(argv[i], "--server", 8) || !strncmp(argv[i], "--kubeconfig", 12)) server = true;
    }
    return !server;
}

int gs_cmd_explain(int argc, char **argv)
{
    if (!wants_sim(argc, argv)) {
        bool help = false;
        for (int i = 1; i < argc; i++) help |= !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help");
        if (!help || argc > 2) return explain_server(argc, argv);
    }
    struct ex_args a = {0};
    int rc = parse(argc, argv, &a);
    if (rc == 1) {
        usage(stdout);
        return 0;
    }
    if (rc) {
        usage(stderr);
        return 2;
    }
    struct gs_trace t;
    struct gs_diags d = {0};
    if ((rc = gs_trace_load_manifests(a.cluster, a.workload, &t, &d))) {
        for (size_t i = 0; i < d.n; i++) fprintf(stderr, "gpusched explain: %s: %s\n", d.v[i].path, d.v[i].msg);
        gs_diags_free(&d);
        return 1;
    }
    struct evlist l = {0};
    if (a.from) {
        rc = read_events(a.from, &l);
    } else {
        struct gs_sim_opts o = {.mode = GS_SIM_REPLAY, .policy = a.policy, .seed = 42, .config_path = a.config};
        struct gs_sim_sink sink = {.event = on_event, .ctx = &l};
        struct gs_sim_result res;
        rc = gs_sim_run_replay(&t, &o, &sink, &res, &d);
        if (!rc) rc = l.err;
    }
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, "gpusched explain: %s: %s\n", d.v[i].path, d.v[i].msg);
    gs_diags_free(&d);
    double at = a.at;
    if (!a.have_at) at = l.n ? l.v[l.n - 1].t : 0;
    struct world w = {0};
    if (!rc) rc = build_world(&w, &t, &a, &l, at);
    if (!rc) rc = explain_target(&w, &t, a.target, at);
    else fprintf(stderr, "gpusched explain: %s\n", gs_strerror(rc));
    world_free(&w);
    free(l.v);
    gs_trace_free(&t);
    return rc ? 1 : 0;
}
