/*
 * fgd_experiment.c - the FGD paper's experiment, run through the real
 * scheduling framework.
 *
 * The procedure is the one of the paper's public simulator
 * (hkust-adsl/kubernetes-scheduler-simulator, "-tune 1.3 --shuffle-pod"):
 *  1. pods sorted by name, then shuffled with the run's seed;
 *  2. inflation: pods drawn uniformly with replacement from the name-sorted
 *     list are appended until the requested GPU milli reaches tune x the
 *     cluster's capacity. Quirk kept on purpose: the stop test adds the
 *     candidate's per-GPU milli, the running total adds milli x GPU count;
 *  3. gpu_milli above 1000 clipped to 1000;
 *  4. every pod tried once, in order, through gs_framework_schedule +
 *     gs_framework_bind; failures are dropped, nothing departs. With
 *     gs_sim_opts.queue_window K the policy may read the next K pods of the
 *     sequence (gs_handle.queued), the pods a scheduler's queue would hold
 *     behind the current one when they arrive faster than it places them;
 *     the order and the set of pods tried do not change;
 *  5. node names get a seeded random 4-digit prefix and nodes enter the cache
 *     sorted by that name, so the framework's "ties go to the lowest node
 *     index" is the simulator's "lexicographically smallest node name".
 * The profile keeps the default profile's points but filters only with
 * NodeResourcesFit, GpuShare and GpuModel and scores only with the policy
 * (weight 1000); the policy's Reserve runs first so it picks the GPUs. FGD-
 * style policies get the target workload (classes covering >= 95% of the
 * original pods) in their args. Without a policy (or GS_SIM_PROFILE) the
 * placement is the server's: its profile (gs_sched_config_gpusched, or
 * --config's first) with the same three filters, no PostFilter (nothing is
 * preempted) and its own PreScore, Score and Reserve plugins, weights and
 * args, as the server's scheduler runs them on these pods.
 *
 * After every pod a sample goes to the sink: arrived and allocated milli,
 * fragmented milli (frag.c, incremental) and the percentages. With
 * gs_sim_opts.bound the upper bound of bound.c on the same pod sequence is
 * computed before the run (it does not touch the cache or the decisions).
 */
#include "sim/sim.h"

#include "core/clock.h"
#include "sim/bound.h"
#include "sched/frag.h"
#include "sched/framework.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const fgd_filters[] = {"NodeResourcesFit", "GpuShare", "GpuModel"};

struct run {
    const struct gs_trace *t;
    const struct gs_sim_opts *o;
    const struct gs_sim_sink *sink;
    struct gs_pod *pods;     /* shallow copies, experiment order */
    char **own_names;        /* names allocated here (inflated pods), else NULL */
    size_t npods;
    struct gs_node_spec *nodes; /* prefixed, sorted */
    char **node_names;
    size_t nnodes;
    int64_t capacity;        /* GPU milli */
    struct gs_clock clock;
    struct gs_handle handle; /* borrowed by the framework for its lifetime */
    struct gs_cache *cache;
    struct gs_sched_config cfg;
    struct gs_framework *fw;
    struct gs_frag_model *frag;
    size_t cur;              /* index of the pod being tried */
};

static int64_t pod_gpu_milli(const struct gs_pod *p)
{
    return p->demand.gpu_count > 0 ? (int64_t)p->demand.gpu_milli * p->demand.gpu_count : 0;
}

/*--- Workload: order and inflation ---*/

static int cmp_pod_name(const void *a, const void *b)
{
    const struct gs_pod *pa = *(const struct gs_pod *const *)a, *pb = *(const struct gs_pod *const *)b;
    return strcmp(pa->meta.name ? pa->meta.name : "", pb->meta.name ? pb->meta.name : "");
}

static void clip(struct gs_pod *p)
{
    if (p->demand.gpu_milli > GS_GPU_MILLI) p->demand.gpu_milli = GS_GPU_MILLI;
}

static int push_copy(struct run *r, size_t *cap, const struct gs_pod *src, char *own_name)
{
    if (r->npods == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        struct gs_pod *np = realloc(r->pods, nc * sizeof *np);
        if (!np) return GS_ENOMEM;
        r->pods = np;
        char **nn = realloc(r->own_names, nc * sizeof *nn);
        if (!nn) return GS_ENOMEM;
        r->own_names = nn;
        *cap = nc;
    }
    r->pods[r->npods] = *src;
    r->own_names[r->npods] = own_name;
    if (own_name) r->pods[r->npods].meta.name = own_name;
    clip(&r->pods[r->npods]);
    r->npods++;
    return 0;
}

static int build_workload(struct run *r, const struct gs_pod **sorted, size_t n, uint64_t *rng)
{
    size_t cap = 0;
    /* shuffle a copy of the sorted order (Fisher-Yates, back to front) */
    const struct gs_pod **order = malloc(n * sizeof *order);
    if (!order) return GS_ENOMEM;
    memcpy(order, sorted, n * sizeof *order);
    for (size_t i = n; i > 1; i--) {
        size_t j = gs_rand_below(rng, i);
        const struct gs_pod *tmp = order[i - 1];
        order[i - 1] = order[j];
        order[j] = tmp;
    }
    int64_t total = 0;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        rc = push_copy(r, &cap, order[i], NULL);
        total += pod_gpu_milli(&r->pods[r->npods - 1]);
    }
    free(order);
    double target = r->o->tune * (double)r->capacity;
    if (rc || r->o->tune <= 0) return rc;
    while ((double)total > target && r->npods) { /* shrink: drop random pods */
        size_t k = gs_rand_below(rng, r->npods);
        total -= pod_gpu_milli(&r->pods[k]);
        free(r->own_names[k]);
        memmove(&r->pods[k], &r->pods[k + 1], (r->npods - k - 1) * sizeof *r->pods);
        memmove(&r->own_names[k], &r->own_names[k + 1], (r->npods - k - 1) * sizeof *r->own_names);
        r->npods--;
    }
    for (size_t i = 0; (double)total < target; i++) {
        const struct gs_pod *src = sorted[gs_rand_below(rng, n)];
        int32_t milli = src->demand.gpu_count > 0 ? src->demand.gpu_milli : 0;
        if (milli > GS_GPU_MILLI) milli = GS_GPU_MILLI;
        if ((double)(total + milli) > target) break;
        char buf[512];
        snprintf(buf, sizeof buf, "%s-tuned-%zu", src->meta.name ? src->meta.name : "pod", i);
        char *name = strdup(buf);
        if (!name || push_copy(r, &cap, src, name) < 0) {
            free(name);
            return GS_ENOMEM;
        }
        total += pod_gpu_milli(&r->pods[r->npods - 1]);
    }
    return 0;
}

/*--- Cluster ---*/

static int cmp_spec_name(const void *a, const void *b)
{
    return strcmp(((const struct gs_node_spec *)a)->name, ((const struct gs_node_spec *)b)->name);
}

static int build_cluster(struct run *r, uint64_t *rng, struct gs_diags *d)
{
    r->nnodes = r->t->nnodes;
    r->nodes = calloc(r->nnodes ? r->nnodes : 1, sizeof *r->nodes);
    r->node_names = calloc(r->nnodes ? r->nnodes : 1, sizeof *r->node_names);
    if (!r->nodes || !r->node_names) return GS_ENOMEM;
    for (size_t i = 0; i < r->nnodes; i++) {
        char buf[512];
        snprintf(buf, sizeof buf, "%04u-%s", (unsigned)gs_rand_below(rng, 10000), r->t->nodes[i].name);
        r->node_names[i] = strdup(buf);
        if (!r->node_names[i]) return GS_ENOMEM;
        r->nodes[i] = r->t->nodes[i];
        r->nodes[i].name = r->node_names[i];
        r->capacity += (int64_t)r->nodes[i].ngpus * GS_GPU_MILLI;
    }
    qsort(r->nodes, r->nnodes, sizeof *r->nodes, cmp_spec_name);
    gs_clock_init_sim(&r->clock, 0);
    r->cache = gs_cache_new(&r->clock);
    if (!r->cache) return GS_ENOMEM;
    for (size_t i = 0; i < r->nnodes; i++) {
        int rc = gs_cache_add_node_spec(r->cache, &r->nodes[i]);
        if (rc < 0) {
            gs_diags_add(d, r->nodes[i].name, "cannot add node: %s", gs_strerror(rc));
            return rc;
        }
    }
    return 0;
}

/*--- Profile ---*/

static bool wanted_filter(const struct gs_plugin *p)
{
    for (size_t i = 0; i < sizeof fgd_filters / sizeof fgd_filters[0]; i++)
        if (!strcmp(p->name, fgd_filters[i])) return true;
    return false;
}

static void set_point(struct gs_profile *pr, enum gs_point pt, const struct gs_plugin *first,
                      bool (*keep)(const struct gs_plugin *))
{
    struct gs_profile_plugin v[GS_MAX_PLUGINS_PER_POINT];
    int n = 0;
    if (first) v[n++] = (struct gs_profile_plugin){first, 1000};
    for (int i = 0; i < pr->npoints[pt] && n < GS_MAX_PLUGINS_PER_POINT; i++) {
        const struct gs_plugin *p = pr->points[pt][i].plugin;
        if (p == first || (keep && !keep(p))) continue;
        v[n++] = pr->points[pt][i];
    }
    memcpy(pr->points[pt], v, sizeof v);
    pr->npoints[pt] = n;
}

/* No policy: the server's placement (see the header). */
static bool server_placement(const struct gs_sim_opts *o)
{
    return !o->policy || !*o->policy || !strcmp(o->policy, GS_SIM_PROFILE);
}

static int build_profile(struct run *r, const struct gs_plugin *policy, struct gs_diags *d)
{
    int rc;
    if (r->o->config_path) {
        json_error_t err;
        json_t *doc = json_load_file(r->o->config_path, 0, &err);
        if (!doc) {
            gs_diags_add(d, r->o->config_path, "line %d: %s", err.line, err.text);
            return GS_EPARSE;
        }
        rc = gs_sched_config_parse(doc, &r->cfg, d);
        json_decref(doc);
    } else {
        rc = policy ? gs_sched_config_default(&r->cfg) : gs_sched_config_gpusched(&r->cfg);
    }
    if (rc < 0) return rc;
    if (!r->cfg.nprofiles) return GS_EINVAL;
    struct gs_profile *pr = &r->cfg.profiles[0];
    set_point(pr, GS_PT_FILTER, NULL, wanted_filter);
    pr->npoints[GS_PT_POST_FILTER] = 0; /* a pod that does not fit is dropped: nothing is preempted */
    if (!policy) return 0;              /* the profile's own placement */
    pr->npoints[GS_PT_SCORE] = 0;
    set_point(pr, GS_PT_SCORE, policy, NULL);
    if (policy->pre_score) set_point(pr, GS_PT_PRE_SCORE, policy, NULL);
    else pr->npoints[GS_PT_PRE_SCORE] = 0;
    if (policy->reserve) set_point(pr, GS_PT_RESERVE, policy, NULL);
    if (!strncmp(policy->name, "FGD", 3) && pr->nargs < (int)(sizeof pr->args / sizeof pr->args[0])) {
        json_t *args = json_object();
        json_t *tw = gs_frag_model_to_json(r->frag);
        if (!args || !tw || json_object_set_new(args, "targetWorkload", tw) < 0) {
            json_decref(args);
            return GS_ENOMEM;
        }
        for (int i = 0; i < pr->nargs; i++)
            if (!strcmp(pr->args_names[i], policy->name)) { /* replace user args for the policy */
                json_decref(pr->args[i]);
                pr->args[i] = args;
                return 0;
            }
        pr->args[pr->nargs] = args;
        pr->args_names[pr->nargs++] = policy->name;
    }
    return 0;
}

/*--- Run ---*/

struct progress {
    int64_t arrived, used, scheduled;
    bool at80, at100;
};

static void emit_event(struct run *r, const struct gs_pod *pod, const struct gs_schedule_result *res, bool ok,
                       const char *reason, double t)
{
    if (!r->sink || !r->sink->event) return;
    char key[512];
    snprintf(key, sizeof key, "%s/%s", pod->meta.namespace_ ? pod->meta.namespace_ : "default", pod->meta.name);
    struct gs_sim_event e = {.t = t, .type = ok ? GS_SIM_SCHEDULED : GS_SIM_FAILED, .pod = key};
    if (ok) {
        const struct gs_node_info *n = gs_cache_node(r->cache, res->a.node);
        e.node = n ? n->name : NULL;
        e.gpus = res->a.gpu_mask;
        e.milli = res->a.milli;
    } else {
        e.reason = reason;
    }
    r->sink->event(r->sink->ctx, &e);
}

/* gs_handle.queued: the next pods of the sequence, at most the window. */
static size_t queued(void *ctx, const struct gs_pod **out, size_t max)
{
    const struct run *r = ctx;
    size_t w = r->o->queue_window > 0 ? (size_t)r->o->queue_window : 0, n = 0;
    if (max > w) max = w;
    for (size_t i = r->cur + 1; i < r->npods && n < max; i++) out[n++] = &r->pods[i];
    return n;
}

static bool try_pod(struct run *r, const struct gs_pod *pod, double t)
{
    struct gs_schedule_result res;
    memset(&res, 0, sizeof res);
    res.a.node = -1;
    int rc = gs_framework_schedule(r->fw, pod, 0, &res);
    bool ok = rc == 0 && res.code == GS_SUCCESS;
    char reason[1024] = "";
    if (ok) {
        struct gs_status st = gs_framework_bind(r->fw, pod);
        ok = gs_status_ok(&st);
        if (!ok) snprintf(reason, sizeof reason, "bind: %s", st.reason);
    } else if (r->sink && r->sink->event) {
        if (res.diag.nodes_total || res.diag.n) gs_diagnosis_format(&res.diag, pod, reason, sizeof reason);
        else snprintf(reason, sizeof reason, "%s", rc < 0 ? gs_strerror(rc) : res.status.reason);
    }
    emit_event(r, pod, &res, ok, reason, t);
    gs_schedule_result_free(&res);
    return ok;
}

static void sample(struct run *r, struct progress *pg, size_t i, struct gs_sim_result *res)
{
    int64_t idle = 0;
    int64_t frag = gs_frag_cluster_total(r->frag, r->cache, &idle);
    double cap = r->capacity ? (double)r->capacity : 1.0;
    struct gs_sim_sample s = {
        .t = (double)(i + 1),
        .pods_arrived = (int64_t)i + 1,
        .pods_scheduled = pg->scheduled,
        .pods_running = pg->scheduled,
        .arrived_milli = pg->arrived,
        .used_milli = pg->used,
        .frag_milli = frag,
        .arrived_pct = 100.0 * (double)pg->arrived / cap,
        .alloc_pct = 100.0 * (double)pg->used / cap,
        .frag_ratio = idle > 0 ? 100.0 * (double)frag / (double)idle : 0.0,
    };
    if (!pg->at80 && s.arrived_pct >= 80.0) {
        pg->at80 = true;
        res->frag_ratio_at_80 = s.frag_ratio;
    }
    if (!pg->at100 && s.arrived_pct >= 100.0) {
        pg->at100 = true;
        res->alloc_pct_at_100 = s.alloc_pct;
    }
    res->alloc_pct_final = s.alloc_pct;
    if (r->sink && r->sink->sample) r->sink->sample(r->sink->ctx, &s);
}

static int run_pods(struct run *r, struct gs_sim_result *res)
{
    struct progress pg = {0};
    size_t step = r->npods / 100 + 1;
    for (size_t i = 0; i < r->npods; i++) {
        const struct gs_pod *pod = &r->pods[i];
        pg.arrived += pod_gpu_milli(pod);
        gs_clock_set(&r->clock, (int64_t)(i + 1) * GS_NS_PER_SEC);
        r->cur = i;
        if (try_pod(r, pod, (double)(i + 1))) pg.scheduled++;
        pg.used = gs_cache_gpu_milli_used(r->cache);
        sample(r, &pg, i, res);
        if (r->sink && r->sink->progress && i % step == 0) r->sink->progress(r->sink->ctx, (double)i / (double)r->npods);
    }
    if (r->sink && r->sink->progress) r->sink->progress(r->sink->ctx, 1.0);
    res->pods_arrived = (int64_t)r->npods;
    res->pods_scheduled = pg.scheduled;
    if (!pg.at100) res->alloc_pct_at_100 = res->alloc_pct_final;
    return 0;
}

static void run_free(struct run *r)
{
    if (r->fw) gs_framework_free(r->fw);
    if (r->cfg.profiles) gs_sched_config_free(&r->cfg);
    gs_frag_model_free(r->frag);
    if (r->cache) gs_cache_free(r->cache);
    for (size_t i = 0; i < r->npods; i++) free(r->own_names[i]);
    free(r->own_names);
    free(r->pods);
    for (size_t i = 0; i < r->nnodes && r->node_names; i++) free(r->node_names[i]);
    free(r->node_names);
    free(r->nodes);
}

static int prepare(struct run *r, const struct gs_plugin *policy, struct gs_diags *d)
{
    const struct gs_trace *t = r->t;
    const struct gs_pod **sorted = malloc(t->npods * sizeof *sorted);
    if (!sorted) return GS_ENOMEM;
    for (size_t i = 0; i < t->npods; i++) sorted[i] = t->pods[i].pod;
    qsort(sorted, t->npods, sizeof *sorted, cmp_pod_name);
    uint64_t node_rng = r->o->seed ^ 0x4e4f444553ULL, pod_rng = r->o->seed;
    int rc = build_cluster(r, &node_rng, d);
    if (!rc) rc = build_workload(r, sorted, t->npods, &pod_rng);
    if (!rc) rc = gs_frag_model_new(r->cache, (const struct gs_pod *const *)sorted, t->npods,
                                    GS_FRAG_DEFAULT_COVERAGE, &r->frag);
    free(sorted);
    if (!rc) rc = build_profile(r, policy, d);
    r->handle = (struct gs_handle){.clock = &r->clock, .cache = r->cache, .seed = r->o->seed,
                                   .queued = r->o->queue_window > 0 ? queued : NULL, .queue_ctx = r};
    if (!rc) rc = gs_framework_new(&r->cfg.profiles[0], &r->handle, &r->fw, d);
    return rc;
}

int gs_sim_run_fgd(const struct gs_trace *t, const struct gs_sim_opts *o, const struct gs_sim_sink *sink,
                   struct gs_sim_result *res, struct gs_diags *d)
{
    memset(res, 0, sizeof *res);
    const struct gs_plugin *policy = server_placement(o) ? NULL : gs_plugin_lookup(o->policy);
    if (!server_placement(o) && (!policy || !policy->score)) {
        gs_diags_add(d, "policy", "unknown placement policy \"%s\"", o->policy);
        return GS_EINVAL;
    }
    if (!t->nnodes || !t->npods) {
        gs_diags_add(d, "trace", "needs at least one node and one pod");
        return GS_EINVAL;
    }
    struct gs_clock wall;
    gs_clock_init_real(&wall);
    int64_t t0 = gs_clock_now(&wall);
    struct run r = {.t = t, .o = o, .sink = sink};
    int rc = prepare(&r, policy, d);
    if (!rc && o->bound) {
        struct gs_bound b;
        rc = gs_bound_fgd(r.pods, r.npods, r.capacity, &b, d);
        res->has_bound = rc == 0;
        res->bound_pct = b.bound_pct;
    }
    if (!rc) rc = run_pods(&r, res);
    snprintf(res->policy, sizeof res->policy, "%s", policy ? policy->name : GS_SIM_PROFILE);
    res->seed = o->seed;
    res->nodes = (int64_t)t->nnodes;
    res->gpus = r.capacity / GS_GPU_MILLI;
    run_free(&r);
    res->wall_seconds = (double)(gs_clock_now(&wall) - t0) / 1e9;
    return rc;
}
