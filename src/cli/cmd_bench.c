/*
 * cmd_bench.c - `gpusched bench`: scheduling throughput on a synthetic cluster.
 *
 *   gpusched bench --nodes N --gpus-per-node G --pods P [--profile NAME] [--seed S]
 *   gpusched bench --shape dra-template [--nodes 500] [--gpus-per-node 8] [--pods 5000]
 *   gpusched bench --shape gang-<G>x<S>[-preempt] [--nodes 5000] [--gpus-per-node 8]
 *
 * --shape dra-template runs kube-scheduler's SchedulingWithResourceClaimTemplate
 * shape instead: one resource claim per pod from a template, allocated by the
 * DynamicResources plugin (cmd_bench_dra.c). --shape gang-... runs the shapes
 * of kube-scheduler's podgroup/gangscheduling benchmark on the gpusched
 * profile (cmd_bench_gang.c, bench_gang.h).
 *
 * Builds N identical nodes of G GPUs and P pods mixing whole (1, 2, 4, 8) and
 * fractional (0.1 .. 0.9) GPU requests, then schedules and binds each pod
 * once through the real framework: every node is filtered and scored (no
 * sampling). --profile names a profile of the built-in configuration
 * (default "default-scheduler"), "gpusched" (the server's profile,
 * gs_sched_config_gpusched) or a placement policy ("FGD", "BestFit", ...)
 * which then replaces the default profile's score plugins. A summary goes to
 * stderr; the last stdout line is JSON:
 *   {"nodes":..,"pods":..,"scheduled":..,"pods_per_second":..,
 *    "pods_per_cpu_second":..,"us_per_pod_p50":..,"us_per_pod_p99":..,
 *    "peak_rss_mb":..,"bytes_per_gpu":..}
 * Time is measured here, in the CLI, with CLOCK_MONOTONIC; pods_per_cpu_second
 * divides by the thread's CPU time instead, which a busy machine (other
 * processes taking turns on the core) does not inflate.
 */
#include "cli/bench_gang.h"
#include "cli/bench_clock.h"
#include "cli/commands.h"

#include "sched/frag.h"
#include "sched/framework.h"
#include "sched/nodeclass.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>


struct bench_opts {
    long nodes, gpus, pods;
    const char *profile;
    uint64_t seed;
    const char *shape; /* NULL: the GPU mix; "dra-template" */
    bool set_nodes, set_gpus, set_pods;
};

int gs__bench_dra(long nodes, long gpus, long pods, uint64_t seed); /* cmd_bench_dra.c */

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
    static const struct option lo[] = {
        {"nodes", required_argument, 0, 'n'}, {"gpus-per-node", required_argument, 0, 'g'},
        {"pods", required_argument, 0, 'p'},  {"profile", required_argument, 0, 'P'},
        {"seed", required_argument, 0, 's'},  {"help", no_argument, 0, 'h'},
        {"shape", required_argument, 0, 'S'},
        {0, 0, 0, 0},
    };
    *o = (struct bench_opts){1000, 8, 10000, GS_DEFAULT_SCHEDULER, 42, NULL, false, false, false};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'n': o->nodes = strtol(optarg, &end, 10), o->set_nodes = true; break;
        case 'g': o->gpus = strtol(optarg, &end, 10), o->set_gpus = true; break;
        case 'p': o->pods = strtol(optarg, &end, 10), o->set_pods = true; break;
        case 'S': {
            struct gs_bench_gang_opts g;
            char why[256] = "";
            if (strcmp(optarg, "dra-template") && gs__bench_gang_shape(optarg, &g, why, sizeof why) != 0) {
                if (why[0]) fprintf(stderr, "gpusched bench: --%s\n", why);
                else fprintf(stderr, "gpusched bench: --shape \"%s\": want dra-template or gang-<gangs>x<pods>[-preempt]\n", optarg);
                return -1;
            }
            o->shape = optarg;
            break;
        }
        case 's': o->seed = strtoull(optarg, &end, 10); break;
        case 'P': o->profile = optarg; break;
        case 'h':
            printf("usage: gpusched bench --nodes N --gpus-per-node G --pods P [--profile NAME] [--seed S]\n"
                   "       gpusched bench --shape dra-template [--nodes 500] [--gpus-per-node 8] [--pods 5000]\n"
                   "       gpusched bench --shape gang-<G>x<S>[-preempt] [--nodes 5000] [--gpus-per-node 8]\n"
                   "  --profile: a profile of the built-in configuration (default-scheduler), gpusched\n"
                   "             (the server's: Coscheduling, NodeResourceTopology, spread, preemption) or a policy\n"
                   "  gang shapes (kube's podgroup/gangscheduling, profile gpusched): gang-1000x3, gang-3000x3,\n"
                   "             gang-9x1000, gang-10x5000, each also with -preempt (low-priority filler first)\n");
            return 1;
        default: return -1;
        }
        if (end && *end) {
            fprintf(stderr, "gpusched bench: expected a number, got \"%s\"\n", optarg);
            return -1;
        }
    }
    if (optind < argc || o->nodes < 1 || o->gpus < 0 || o->gpus > GS_MAX_GPUS_PER_NODE || o->pods < 1) {
        fprintf(stderr, "gpusched bench: need --nodes >= 1, --gpus-per-node 0..%d, --pods >= 1\n",
                GS_MAX_GPUS_PER_NODE);
        return -1;
    }
    return 0;
}

/* Pod mix: 55% fractional (100..900 milli), 25% 1 GPU, 10% 2, 6% 4, 4% 8. */
static void make_pod(struct gs_pod *p, long i, uint64_t *rng, char *name, size_t len)
{
    memset(p, 0, sizeof *p);
    snprintf(name, len, "bench-pod-%06ld", i);
    p->meta.name = name;
    p->meta.namespace_ = "default";
    p->scheduler_name = GS_DEFAULT_SCHEDULER;
    uint64_t r = gs_rand_below(rng, 100);
    struct gs_demand *d = &p->demand;
    d->gpu_count = 1;
    d->gpu_milli = GS_GPU_MILLI;
    if (r < 55) d->gpu_milli = (int32_t)(100 * (1 + gs_rand_below(rng, 9)));
    else if (r < 80) d->gpu_count = 1;
    else if (r < 90) d->gpu_count = 2;
    else if (r < 96) d->gpu_count = 4;
    else d->gpu_count = 8;
    d->cpu_milli = 1000 * (int64_t)(1 + gs_rand_below(rng, 4)) * d->gpu_count;
    d->mem_bytes = (int64_t)d->cpu_milli / 1000 * 4 * (1LL << 30);
}

static int setup_profile(struct gs_sched_config *cfg, const char *name, const struct gs_profile **out)
{
    if (!strcmp(name, GS_BENCH_PROFILE_GPUSCHED)) { /* the server's profile (Coscheduling, topology, spread, preemption) */
        if (gs_sched_config_gpusched(cfg) < 0 || !cfg->nprofiles) return -1;
        *out = &cfg->profiles[0];
        return 0;
    }
    if (gs_sched_config_default(cfg) < 0 || !cfg->nprofiles) return -1;
    const struct gs_profile *p = gs_sched_config_profile(cfg, name);
    if (p) {
        *out = p;
        return 0;
    }
    const struct gs_plugin *pl = gs_plugin_lookup(name);
    if (!pl || !pl->score) return -1;
    struct gs_profile *pr = &cfg->profiles[0];
    pr->points[GS_PT_SCORE][0] = (struct gs_profile_plugin){pl, 1000};
    pr->npoints[GS_PT_SCORE] = 1;
    if (pl->pre_score) {
        pr->points[GS_PT_PRE_SCORE][0] = (struct gs_profile_plugin){pl, 1};
        pr->npoints[GS_PT_PRE_SCORE] = 1;
    }
    if (pl->reserve && pr->npoints[GS_PT_RESERVE] < GS_MAX_PLUGINS_PER_POINT) {
        memmove(&pr->points[GS_PT_RESERVE][1], &pr->points[GS_PT_RESERVE][0],
                (size_t)pr->npoints[GS_PT_RESERVE] * sizeof pr->points[GS_PT_RESERVE][0]);
        pr->points[GS_PT_RESERVE][0] = (struct gs_profile_plugin){pl, 1};
        pr->npoints[GS_PT_RESERVE]++;
    }
    *out = pr;
    return 0;
}

static int add_nodes(struct gs_cache *c, const struct bench_opts *o)
{
    for (long i = 0; i < o->nodes; i++) {
        char name[64];
        snprintf(name, sizeof name, "bench-node-%05ld", i);
        struct gs_node_spec s = {.name = name, .cpu_milli = 16000 * (o->gpus ? o->gpus : 1),
                                 .pods = 110,
                                 .gpu_model = o->gpus ? "A100" : NULL, .ngpus = (int32_t)o->gpus,
                                 .gpu_mem_mib = 81251};
        s.mem_bytes = (int64_t)(o->gpus ? o->gpus : 1) * 128 * (1LL << 30);
        if (gs_cache_add_node_spec(c, &s) < 0) return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct bench_run {
    struct gs_pod *pods;
    char (*names)[32];
    double *lat;
    long scheduled;
    double total_us, cpu_us;
};

static void run_pods(struct gs_framework *fw, const struct bench_opts *o, struct bench_run *b)
{
    double t0 = gs_bench_wall_us(), c0 = gs_bench_cpu_us();
    for (long i = 0; i < o->pods; i++) {
        double s = gs_bench_wall_us();
        struct gs_schedule_result res;
        memset(&res, 0, sizeof res);
        if (gs_framework_schedule(fw, &b->pods[i], 0, &res) == 0 && res.code == GS_SUCCESS) {
            struct gs_status st = gs_framework_bind(fw, &b->pods[i]);
            if (gs_status_ok(&st)) b->scheduled++;
        }
        gs_schedule_result_free(&res);
        b->lat[i] = gs_bench_wall_us() - s;
    }
    b->total_us = gs_bench_wall_us() - t0;
    b->cpu_us = gs_bench_cpu_us() - c0;
}

int gs_cmd_bench(int argc, char **argv)
{
    struct bench_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc) return prc > 0 ? 0 : 2;
    if (o.shape && !strncmp(o.shape, "gang-", 5)) {
        if (o.set_pods || strcmp(o.profile, GS_DEFAULT_SCHEDULER)) {
            fprintf(stderr, "gpusched bench: --shape %s sets its own pods and runs the gpusched profile (no --pods, --profile)\n", o.shape);
            return 2;
        }
        return gs__bench_gang(o.shape, o.set_nodes ? o.nodes : 5000, o.set_gpus ? o.gpus : 8, o.seed);
    }
    if (o.shape) /* kube's SchedulingWithResourceClaimTemplate/5000pods_500nodes */
        return gs__bench_dra(o.set_nodes ? o.nodes : 500, o.set_gpus ? o.gpus : 8, o.set_pods ? o.pods : 5000, o.seed);
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_cache *cache = gs_cache_new(&clock);
    struct gs_sched_config cfg = {0};
    const struct gs_profile *prof = NULL;
    struct gs_framework *fw = NULL;
    struct gs_diags d = {0};
    struct bench_run b = {0};
    int rc = 1;
    if (!cache || add_nodes(cache, &o) < 0) {
        fprintf(stderr, "gpusched bench: cannot build the cluster\n");
        goto out;
    }
    if (setup_profile(&cfg, o.profile, &prof) < 0) {
        fprintf(stderr, "gpusched bench: unknown profile or policy \"%s\"\n", o.profile);
        rc = 2;
        goto out;
    }
    struct gs_handle h = {.clock = &clock, .cache = cache, .seed = o.seed};
    if (gs_framework_new(prof, &h, &fw, &d) < 0) {
        for (size_t i = 0; i < d.n; i++) fprintf(stderr, "gpusched bench: %s: %s\n", d.v[i].path, d.v[i].msg);
        goto out;
    }
    b.pods = calloc((size_t)o.pods, sizeof *b.pods);
    b.names = calloc((size_t)o.pods, sizeof *b.names);
    b.lat = calloc((size_t)o.pods, sizeof *b.lat);
    if (!b.pods || !b.names || !b.lat) goto out;
    uint64_t rng = o.seed;
    for (long i = 0; i < o.pods; i++) make_pod(&b.pods[i], i, &rng, b.names[i], sizeof b.names[i]);
    run_pods(fw, &o, &b);
    qsort(b.lat, (size_t)o.pods, sizeof *b.lat, cmp_double);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double pps = (double)o.pods / (b.total_us / 1e6), cpps = (double)o.pods / (b.cpu_us / 1e6);
    double p50 = b.lat[(size_t)(o.pods - 1) / 2], p99 = b.lat[(size_t)((double)(o.pods - 1) * 0.99)];
    double rss = (double)ru.ru_maxrss / 1024.0;
    double per_gpu = o.gpus ? rss * 1048576.0 / (double)(o.nodes * o.gpus) : 0.0;
    fprintf(stderr,
            "bench: %ld nodes x %ld GPUs, %ld pods (%ld scheduled), profile %s\n"
            "bench: %.0f pods/s (%.0f per CPU second), %.1f us/pod p50, %.1f us/pod p99, peak RSS %.1f MiB "
            "(%.0f bytes/GPU)\n",
            o.nodes, o.gpus, o.pods, b.scheduled, o.profile, pps, cpps, p50, p99, rss, per_gpu);
    struct gs_nodeclasses *classes = gs_cache_classes(cache);
    fprintf(stderr, "bench: %llu of %ld cycles decided by node class; %zu classes at the end\n",
            (unsigned long long)gs_framework_class_cycles(fw), o.pods, classes ? gs_nodeclass_count(classes) : 0);
    printf("{\"nodes\":%ld,\"pods\":%ld,\"scheduled\":%ld,\"pods_per_second\":%.1f,\"pods_per_cpu_second\":%.1f,"
           "\"us_per_pod_p50\":%.2f,\"us_per_pod_p99\":%.2f,\"peak_rss_mb\":%.1f,\"bytes_per_gpu\":%.0f}\n",
           o.nodes, o.pods, b.scheduled, pps, cpps, p50, p99, rss, per_gpu);
    rc = 0;
out:
    if (fw) gs_framework_free(fw);
    if (cfg.profiles) gs_sched_config_free(&cfg);
    if (cache) gs_cache_free(cache);
    free(b.pods);
    free(b.names);
    free(b.lat);
    gs_diags_free(&d);
    return rc;
}
