/*
 * cmd_bench_gang.c - `gpusched bench --shape gang-<G>x<S>[-preempt]`: the
 * shapes of kube-scheduler's podgroup/gangscheduling benchmark on the
 * production profile (bench_gang.h says what the cluster and pods are).
 *
 * The driver is the simulator's: the scheduler driver (queue, framework,
 * cache) on a simulated clock. Every PodGroup and pod is added first, then
 * cycles run until the queue has nothing ready; when something is still
 * pending the clock jumps to the driver's next wake (a backoff ending, a
 * Permit wait timing out) and cycles run again, until every member is bound
 * or an hour of simulated time passed without one more bound. Only that loop
 * is timed (thread CPU time and wall clock); building the cluster, the pods
 * and, for the preemption variant, placing the filler is not.
 *
 * The whole-or-nothing check reads the cache, not the driver's reports: at
 * the end a gang with some but not all members in the cache (assumed or
 * bound) is partial. During the run the bound counts from the driver's
 * reports are checked after every drain of the queue, so a gang that was
 * bound in part and then completed is caught too.
 */
#include "cli/bench_gang.h"
#include "cli/bench_clock.h"
#include "cli/commands.h"

#include "core/codec.h"
#include "sched/framework.h" /* node-class mode and counter */
#include "sched/scheduler.h"
#include "sched/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define NODE_CPU_MILLI 4000          /* kube's node-default */
#define NODE_MEM_BYTES (32LL << 30)
#define NODE_PODS 110
#define POD_CPU_MILLI 100            /* kube's pod-default */
#define POD_MEM_BYTES (100LL << 20)
#define FILLER_PER_NODE 4            /* 1 CPU each: the node is full */
#define GANG_PRIORITY 1000
#define STALL_NS (3600LL * GS_NS_PER_SEC) /* give up after an hour of simulated time without progress */

/*--- Shapes ---*/

int gs__bench_gang_shape(const char *name, struct gs_bench_gang_opts *o, char *why, size_t whylen)
{
    if (strncmp(name, "gang-", 5)) return -1;
    char *end = NULL;
    long g = strtol(name + 5, &end, 10), s = 0;
    if (end != name + 5 && *end == 'x') {
        const char *at = end + 1;
        s = strtol(at, &end, 10);
        if (end == at) s = 0;
    }
    bool preempt = end && !strcmp(end, "-preempt");
    if (g < 1 || s < 1 || !end || (*end && !preempt) || g > 1000000 || s > 1000000) {
        snprintf(why, whylen, "shape \"%s\": want gang-<gangs>x<pods per gang>[-preempt], both 1..1000000 "
                 "(e.g. gang-1000x3, gang-10x5000-preempt)", name);
        return -1;
    }
    o->gangs = g, o->size = s, o->preempt = preempt;
    return 0;
}

/*--- The run ---*/

struct gbench {
    const struct gs_bench_gang_opts *o;
    struct gs_clock clock;
    struct gs_cache *cache;
    struct gs_sched_config cfg;
    struct gs_scheduler *s;
    struct gs_pod *pods, *filler;  /* gang members (gang i: [i*size, (i+1)*size)), filler */
    char (*names)[48];             /* pods then filler */
    struct gs_object **groups;
    int32_t *bound;                /* per gang: members bound, from the driver's reports */
    long nbound, partial_seen;
    uint64_t digest;               /* gs_bench_gang_result.decisions */
    char *why;
    size_t whylen;
};

static long gang_of(const struct gbench *b, const struct gs_pod *p)
{
    long n = b->o->gangs * b->o->size;
    if (p < b->pods || p >= b->pods + n) return -1;
    return (long)(p - b->pods) / b->o->size;
}

/* One decision into the digest: what happened (bind or eviction), to whom, where. */
static void digest(struct gbench *b, char what, const struct gs_pod *pod, const struct gs_assignment *a)
{
    char line[96];
    int n = snprintf(line, sizeof line, "%c %s %d %llx %d", what, pod->meta.name, a ? a->node : -1,
                     a ? (unsigned long long)a->gpu_mask : 0ULL, a ? a->milli : 0);
    for (int i = 0; i < n && i < (int)sizeof line; i++) b->digest = (b->digest ^ (uint8_t)line[i]) * 1099511628211ULL;
}

static void on_bound(void *ctx, const struct gs_pod *pod, const struct gs_assignment *a)
{
    struct gbench *b = ctx;
    digest(b, 'b', pod, a);
    long g = gang_of(b, pod);
    if (g >= 0) b->bound[g]++, b->nbound++;
}

static void on_evicted(void *ctx, const struct gs_pod *victim, const struct gs_pod *pre, const struct gs_assignment *a)
{
    (void)pre;
    struct gbench *b = ctx;
    digest(b, 'e', victim, a);
    long g = gang_of(b, victim);
    if (g >= 0) b->bound[g]--, b->nbound--;
}

static void make_pod(struct gs_pod *p, char *name, const char *group, int32_t prio, int64_t cpu)
{
    memset(p, 0, sizeof *p);
    p->meta.name = name;
    p->meta.namespace_ = "default";
    p->scheduler_name = GS_DEFAULT_SCHEDULER;
    p->priority = prio;
    p->pod_group = (char *)group;
    p->demand.cpu_milli = cpu;
    p->demand.mem_bytes = POD_MEM_BYTES;
}

static struct gs_object *make_group(const char *name, long min)
{
    char doc[512];
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"kind\":\"PodGroup\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"default\"},\"spec\":{\"minMember\":%ld}}",
             name, min);
    json_t *j = json_loads(doc, 0, NULL);
    struct gs_object *o = NULL;
    struct gs_diags d = {0};
    if (j && gs_object_decode(j, &o, &d) != 0) o = NULL;
    gs_diags_free(&d);
    json_decref(j);
    return o;
}

static int fail(struct gbench *b, int rc, const char *msg)
{
    snprintf(b->why, b->whylen, "%s", msg);
    return rc;
}

static int setup(struct gbench *b)
{
    const struct gs_bench_gang_opts *o = b->o;
    gs_clock_init_sim(&b->clock, 0);
    if (!(b->cache = gs_cache_new(&b->clock))) return fail(b, GS_ENOMEM, "out of memory");
    for (long i = 0; i < o->nodes; i++) {
        char name[64];
        snprintf(name, sizeof name, "bench-node-%05ld", i);
        struct gs_node_spec s = {.name = name, .cpu_milli = NODE_CPU_MILLI, .mem_bytes = NODE_MEM_BYTES,
                                 .pods = NODE_PODS, .gpu_model = o->gpus ? "A100" : NULL,
                                 .ngpus = (int32_t)o->gpus, .gpu_mem_mib = 81251};
        if (gs_cache_add_node_spec(b->cache, &s) < 0) return fail(b, GS_EINVAL, "cannot build the cluster");
    }
    if (gs_sched_config_gpusched(&b->cfg) < 0 || !b->cfg.nprofiles) return fail(b, GS_EINVAL, "the gpusched profile");
    struct gs_diags d = {0};
    struct gs_scheduler_opts so = {.profile = &b->cfg.profiles[0], .seed = o->seed,
                                   .hooks = {.bound = on_bound, .evicted = on_evicted, .ctx = b}};
    int rc = gs_scheduler_new(&b->clock, b->cache, &so, &b->s, &d);
    if (rc) {
        snprintf(b->why, b->whylen, "scheduler: %s: %s", d.n ? d.v[0].path : "", d.n ? d.v[0].msg : gs_strerror(rc));
        gs_diags_free(&d);
        return rc;
    }
    gs_framework_set_node_classes(gs_scheduler_framework(b->s), (enum gs_node_classes)o->classes);
    long n = o->gangs * o->size, nf = o->preempt ? o->nodes * FILLER_PER_NODE : 0;
    b->pods = calloc((size_t)n, sizeof *b->pods);
    b->filler = calloc((size_t)(nf ? nf : 1), sizeof *b->filler);
    b->names = calloc((size_t)(n + nf), sizeof *b->names);
    b->groups = calloc((size_t)o->gangs, sizeof *b->groups);
    b->bound = calloc((size_t)o->gangs, sizeof *b->bound);
    if (!b->pods || !b->filler || !b->names || !b->groups || !b->bound) return fail(b, GS_ENOMEM, "out of memory");
    return 0;
}

/* Runs cycles until nothing is ready. 0 or a negative GS_E*. */
static int drain(struct gbench *b, long *attempts)
{
    struct gs_cycle_result r;
    int rc;
    while ((rc = gs_scheduler_run_one(b->s, &r)) > 0) {
        (*attempts)++;
        long g = r.code == GS_SUCCESS ? gang_of(b, r.pod) : -1;
        if (g >= 0) b->bound[g]++, b->nbound++;
    }
    return rc;
}

/* The filler: single low-priority pods that fill every node's CPU, placed
 * through the scheduler (so preemption can evict them), not timed. */
static int place_filler(struct gbench *b, struct gs_bench_gang_result *res)
{
    long nf = b->o->nodes * FILLER_PER_NODE, n = b->o->gangs * b->o->size, attempts = 0;
    for (long i = 0; i < nf; i++) {
        snprintf(b->names[n + i], sizeof b->names[0], "filler-%07ld", i);
        make_pod(&b->filler[i], b->names[n + i], NULL, 0, NODE_CPU_MILLI / FILLER_PER_NODE);
        if (gs_scheduler_add_pod(b->s, &b->filler[i]) != 0) return fail(b, GS_ENOMEM, "cannot queue the filler");
    }
    int rc = drain(b, &attempts);
    if (rc < 0) return fail(b, rc, "scheduling the filler failed");
    int64_t cpu_free, mem_free;
    int32_t pods_free;
    gs_cache_min_free(b->cache, &cpu_free, &mem_free, &pods_free);
    int64_t most = 0;
    for (int32_t i = 0; i < gs_cache_node_count(b->cache); i++) {
        const struct gs_node_info *ni = gs_cache_node(b->cache, i);
        if (ni && ni->live && ni->cpu_alloc - ni->cpu_used > most) most = ni->cpu_alloc - ni->cpu_used;
    }
    if (most >= POD_CPU_MILLI) return fail(b, GS_ESTATE, "the filler left room for a gang member");
    res->filler = nf;
    return 0;
}

static int add_gangs(struct gbench *b)
{
    const struct gs_bench_gang_opts *o = b->o;
    for (long g = 0; g < o->gangs; g++) {
        char gname[24];
        snprintf(gname, sizeof gname, "gang-%06ld", g % 10000000);
        if (!(b->groups[g] = make_group(gname, o->size))) return fail(b, GS_ENOMEM, "cannot build a PodGroup");
        if (gs_scheduler_add_podgroup(b->s, b->groups[g]->u.podgroup) != 0) return fail(b, GS_ENOMEM, "PodGroup");
        const char *group = b->groups[g]->u.podgroup->meta.name; /* the label value: the group's name */
        for (long k = 0; k < o->size; k++) {
            long i = g * o->size + k;
            snprintf(b->names[i], sizeof b->names[0], "gang-%06ld-%05ld", g, k);
            make_pod(&b->pods[i], b->names[i], group, o->preempt ? GANG_PRIORITY : 0, POD_CPU_MILLI);
            if (gs_scheduler_add_pod(b->s, &b->pods[i]) != 0) return fail(b, GS_ENOMEM, "cannot queue a gang member");
        }
    }
    return 0;
}

/* Gangs bound in part right now (from the driver's reports). */
static long partial_now(const struct gbench *b)
{
    long p = 0;
    for (long g = 0; g < b->o->gangs; g++) p += b->bound[g] > 0 && b->bound[g] < b->o->size;
    return p;
}

static int run_loop(struct gbench *b, struct gs_bench_gang_result *res)
{
    long n = b->o->gangs * b->o->size;
    int64_t last_progress = gs_clock_now(&b->clock);
    long last_bound = -1;
    double t0 = gs_bench_wall_us(), c0 = gs_bench_cpu_us();
    int64_t s0 = gs_clock_now(&b->clock);
    for (;;) {
        int rc = drain(b, &res->attempts);
        if (rc < 0) return fail(b, rc, "a scheduling cycle failed");
        long p = partial_now(b);
        if (p > b->partial_seen) b->partial_seen = p;
        if (b->nbound >= n) break;
        int64_t now = gs_clock_now(&b->clock);
        if (b->nbound != last_bound) last_bound = b->nbound, last_progress = now;
        int64_t wake = gs_scheduler_next_wake(b->s);
        if (wake < 0 || now - last_progress > STALL_NS) break; /* nothing will change, or nothing does */
        gs_clock_set(&b->clock, wake > now ? wake : now + 1);
    }
    res->wall_us = gs_bench_wall_us() - t0;
    res->cpu_us = gs_bench_cpu_us() - c0;
    res->sim_s = (double)(gs_clock_now(&b->clock) - s0) / (double)GS_NS_PER_SEC;
    return 0;
}

/* Whole or nothing, from the cache. */
static void count_gangs(struct gbench *b, struct gs_bench_gang_result *res)
{
    for (long g = 0; g < b->o->gangs; g++) {
        long placed = 0, bound = 0;
        for (long k = 0; k < b->o->size; k++) {
            char key[GS__KEY_MAX];
            gs__pod_key(&b->pods[g * b->o->size + k], key, sizeof key);
            placed += gs_cache_pod_assignment(b->cache, key) != NULL;
        }
        bound = b->bound[g];
        res->bound += bound;
        if (placed == b->o->size && bound == b->o->size) res->gangs_whole++;
        else if (placed == 0 && bound == 0) res->gangs_none++;
        else res->gangs_partial++;
    }
    if (b->partial_seen && !res->gangs_partial) res->gangs_partial = b->partial_seen; /* bound in part, for a while */
    res->evictions = gs_scheduler_evictions(b->s);
    res->decisions = b->digest;
    res->class_cycles = gs_framework_class_cycles(gs_scheduler_framework(b->s));
}

static void teardown(struct gbench *b)
{
    gs_scheduler_free(b->s);
    if (b->cfg.profiles) gs_sched_config_free(&b->cfg);
    if (b->cache) gs_cache_free(b->cache);
    for (long g = 0; b->groups && g < b->o->gangs; g++) gs_object_free(b->groups[g]);
    free(b->groups);
    free(b->pods);
    free(b->filler);
    free(b->names);
    free(b->bound);
}

int gs__bench_gang_run(const struct gs_bench_gang_opts *o, struct gs_bench_gang_result *r, char *why, size_t whylen)
{
    memset(r, 0, sizeof *r);
    if (o->nodes < 1 || o->gangs < 1 || o->size < 1 || o->gpus < 0 || o->gpus > GS_MAX_GPUS_PER_NODE) {
        snprintf(why, whylen, "need nodes >= 1, gangs >= 1, pods per gang >= 1, GPUs per node 0..%d",
                 GS_MAX_GPUS_PER_NODE);
        return GS_EINVAL;
    }
    struct gbench b = {.o = o, .digest = 14695981039346656037ULL, .why = why, .whylen = whylen};
    r->pods = o->gangs * o->size;
    int rc = setup(&b);
    if (!rc && o->preempt) rc = place_filler(&b, r);
    if (!rc) rc = add_gangs(&b);
    if (!rc) rc = run_loop(&b, r);
    if (!rc) count_gangs(&b, r);
    teardown(&b);
    return rc;
}

int gs__bench_gang(const char *shape, long nodes, long gpus, uint64_t seed)
{
    struct gs_bench_gang_opts o = {.nodes = nodes, .gpus = gpus, .seed = seed};
    char why[256] = "";
    if (gs__bench_gang_shape(shape, &o, why, sizeof why) != 0) {
        fprintf(stderr, "gpusched bench: %s\n", why[0] ? why : "not a gang shape");
        return 2;
    }
    struct gs_bench_gang_result r;
    int rc = gs__bench_gang_run(&o, &r, why, sizeof why);
    if (rc) {
        fprintf(stderr, "gpusched bench: %s: %s\n", shape, why);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double pps = r.wall_us > 0 ? (double)r.bound / (r.wall_us / 1e6) : 0;
    double cpps = r.cpu_us > 0 ? (double)r.bound / (r.cpu_us / 1e6) : 0;
    double rss = (double)ru.ru_maxrss / 1024.0;
    fprintf(stderr,
            "bench: %s on %ld nodes x %ld GPUs, profile gpusched: %ld gangs of %ld, %ld filler pods\n"
            "bench: %ld of %ld pods bound, gangs whole %ld, partial %ld, unscheduled %ld; %lld evictions, "
            "%ld cycles, %.1f s simulated\n"
            "bench: %.0f pods/s (%.0f per CPU second), peak RSS %.1f MiB\n",
            shape, nodes, gpus, o.gangs, o.size, r.filler, r.bound, r.pods, r.gangs_whole, r.gangs_partial,
            r.gangs_none, (long long)r.evictions, r.attempts, r.sim_s, pps, cpps, rss);
    printf("{\"shape\":\"%s\",\"nodes\":%ld,\"gangs\":%ld,\"gang_size\":%ld,\"pods\":%ld,\"filler\":%ld,"
           "\"scheduled\":%ld,\"gangs_whole\":%ld,\"gangs_partial\":%ld,\"gangs_unscheduled\":%ld,\"evictions\":%lld,"
           "\"cycles\":%ld,\"sim_seconds\":%.1f,\"pods_per_second\":%.1f,\"pods_per_cpu_second\":%.1f,"
           "\"peak_rss_mb\":%.1f,\"class_cycles\":%llu,\"decisions\":\"%016llx\"}\n",
           shape, nodes, o.gangs, o.size, r.pods, r.filler, r.bound, r.gangs_whole, r.gangs_partial, r.gangs_none,
           (long long)r.evictions, r.attempts, r.sim_s, pps, cpps, rss, (unsigned long long)r.class_cycles,
           (unsigned long long)r.decisions);
    if (r.gangs_partial) {
        fprintf(stderr, "gpusched bench: %ld gang(s) scheduled in part: Coscheduling's all-or-nothing broke\n",
                r.gangs_partial);
        return 1;
    }
    return 0;
}
