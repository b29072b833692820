/*
 * gang_checker.h - drives the scheduler (gang/topology profile, simulated
 * clock, 3 nodes x 4 GPUs) with a byte string of events - gangs arriving
 * whole or member by member, single pods of any priority, time passing, pods
 * completing - and checks after every step:
 *   - the cache's aggregates equal a recomputation (gs_cache_check), so every
 *     Unreserve and every undone preemption simulation restored it exactly;
 *   - no GPU is allocated beyond its capacity (no device given twice);
 *   - no gang is half started: bound members are 0 or at least minMember;
 *   - no pod waits at Permit longer than its group's timeout;
 * and at the end, with everything completing, that every gang ran (no two
 * groups deadlock). Shared by tests/unit/test_gang_invariants.c (bounded
 * random runs in `make test`) and the libFuzzer target fuzz_gang_events.c.
 */
#ifndef GS_TEST_GANG_CHECKER_H
#define GS_TEST_GANG_CHECKER_H

#include "core/codec.h"
#include "sched/gang_core.h"
#include "sched/scheduler.h"
#include "sched/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GC_MAX_PODS 48
#define GC_MAX_GROUPS 8
#define GC_WAIT_S 10

struct gc_pod {
    struct gs_pod *pod;
    int group;          /* -1 single */
    bool added, bound, gone;
    int64_t wait_since; /* -1 when not waiting */
};

struct gc_group {
    struct gs_object *pg;
    int min, size, first; /* members are pods[first .. first+size) */
    bool started;  /* ran at least once */
    bool running;  /* started and some member still bound (members may then complete one by one) */
};

struct gc {
    struct gs_clock clock;
    struct gs_cache *cache;
    struct gs_sched_config cfg;
    struct gs_scheduler *s;
    struct gc_pod pods[GC_MAX_PODS];
    int npods;
    struct gc_group groups[GC_MAX_GROUPS];
    int ngroups;
    char why[512];
    bool failed;
};

static int gc_fail(struct gc *g, const char *msg, const char *detail)
{
    if (!g->failed) snprintf(g->why, sizeof g->why, "%s%s%s", msg, detail ? ": " : "", detail ? detail : "");
    g->failed = true;
    return -1;
}

static struct gc_pod *gc_find(struct gc *g, const struct gs_pod *p)
{
    for (int i = 0; i < g->npods; i++)
        if (g->pods[i].pod == p) return &g->pods[i];
    return NULL;
}

static void gc_bound(void *ctx, const struct gs_pod *pod, const struct gs_assignment *a)
{
    (void)a;
    struct gc_pod *p = gc_find(ctx, pod);
    if (p) p->bound = true, p->wait_since = -1;
}

static void gc_rejected(void *ctx, const struct gs_pod *pod, const char *reason)
{
    (void)reason;
    struct gc_pod *p = gc_find(ctx, pod);
    if (p) p->wait_since = -1;
}

static void gc_evicted(void *ctx, const struct gs_pod *victim, const struct gs_pod *pre, const struct gs_assignment *a)
{
    (void)pre, (void)a;
    struct gc_pod *p = gc_find(ctx, victim);
    if (p) p->bound = false;
}

static struct gs_pod *gc_make_pod(const char *name, int gpus, int prio, const char *group)
{
    char doc[1024], lab[160] = "{}";
    if (group) snprintf(lab, sizeof lab, "{\"scheduling.x-k8s.io/pod-group\":\"%s\"}", group);
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"labels\":%s},\"spec\":{"
             "\"priority\":%d,\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"resources\":{\"limits\":{\"cpu\":\"1\""
             "%s%.*d%s}}}]}}",
             name, lab, prio, gpus ? ",\"nvidia.com/gpu\":\"" : "", gpus ? 1 : 0, gpus, gpus ? "\"" : "");
    json_t *j = json_loads(doc, 0, NULL);
    struct gs_pod *p = calloc(1, sizeof *p);
    struct gs_diags d = {0};
    if (!j || !p || gs_pod_decode(j, p, &d) != 0) free(p), p = NULL;
    gs_diags_free(&d);
    json_decref(j);
    return p;
}

static struct gs_object *gc_make_group(const char *name, int min)
{
    char doc[512];
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"kind\":\"PodGroup\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"default\"},\"spec\":{\"minMember\":%d,\"scheduleTimeoutSeconds\":%d}}",
             name, min, GC_WAIT_S);
    json_t *j = json_loads(doc, 0, NULL);
    struct gs_object *o = NULL;
    struct gs_diags d = {0};
    if (j) gs_object_decode(j, &o, &d);
    gs_diags_free(&d);
    json_decref(j);
    return o;
}

static const char GC_PROFILE[] =
    "{\"profiles\":[{\"plugins\":{"
    "\"queueSort\":{\"enabled\":[{\"name\":\"Coscheduling\"}],\"disabled\":[{\"name\":\"*\"}]},"
    "\"preFilter\":{\"enabled\":[{\"name\":\"Coscheduling\"},{\"name\":\"NodeResourceTopology\"}]},"
    "\"filter\":{\"enabled\":[{\"name\":\"Coscheduling\"},{\"name\":\"NodeResourceTopology\"},{\"name\":\"DefaultPreemption\"}]},"
    "\"postFilter\":{\"enabled\":[{\"name\":\"DefaultPreemption\"},{\"name\":\"Coscheduling\"}]},"
    "\"score\":{\"enabled\":[{\"name\":\"Coscheduling\",\"weight\":10},{\"name\":\"DefaultPreemption\",\"weight\":5}]},"
    "\"reserve\":{\"enabled\":[{\"name\":\"NodeResourceTopology\"},{\"name\":\"GpuShare\"},{\"name\":\"Coscheduling\"},"
    "{\"name\":\"DefaultPreemption\"}],\"disabled\":[{\"name\":\"*\"}]},"
    "\"permit\":{\"enabled\":[{\"name\":\"Coscheduling\"}]}},"
    "\"pluginConfig\":[{\"name\":\"Coscheduling\",\"args\":{\"wholeGroupPlan\":%s,\"podGroupRejectPercentage\":%d}}]}]}";

static int gc_init(struct gc *g, bool plan, int reject_pct)
{
    memset(g, 0, sizeof *g);
    gs_clock_init_sim(&g->clock, 0);
    if (!(g->cache = gs_cache_new(&g->clock))) return -1;
    for (int i = 0; i < 3; i++) {
        char n[32];
        snprintf(n, sizeof n, "n%d", i);
        int32_t numa[4] = {0, 0, 1, 1};
        uint64_t links[4] = {0x2, 0x1, 0x8, 0x4};
        struct gs_node_spec sp = {.name = n, .cpu_milli = 64000, .mem_bytes = 256LL << 30, .gpu_model = "A100",
                                  .ngpus = 4, .gpu_numa = numa, .gpu_nvlink = links};
        if (gs_cache_add_node_spec(g->cache, &sp) < 0) return -1;
    }
    char text[sizeof GC_PROFILE + 32];
    snprintf(text, sizeof text, GC_PROFILE, plan ? "true" : "false", reject_pct);
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    int rc = gs_decode_stream(text, strlen(text), &docs, &d, NULL);
    if (!rc) rc = gs_sched_config_parse(docs.docs[0], &g->cfg, &d);
    gs_docs_free(&docs);
    struct gs_scheduler_opts o = {.profile = &g->cfg.profiles[0],
                                  .hooks = {.bound = gc_bound, .rejected = gc_rejected, .evicted = gc_evicted, .ctx = g}};
    if (!rc) rc = gs_scheduler_new(&g->clock, g->cache, &o, &g->s, &d);
    gs_diags_free(&d);
    return rc;
}

static void gc_free(struct gc *g)
{
    gs_scheduler_free(g->s);
    gs_sched_config_free(&g->cfg);
    if (g->cache) gs_cache_free(g->cache);
    for (int i = 0; i < g->npods; i++) {
        gs_pod_clear(g->pods[i].pod);
        free(g->pods[i].pod);
    }
    for (int i = 0; i < g->ngroups; i++) gs_object_free(g->groups[i].pg);
}

static int gc_drain(struct gc *g)
{
    struct gs_cycle_result r;
    int rc, guard = 0;
    while ((rc = gs_scheduler_run_one(g->s, &r)) > 0 && guard++ < 4 * GC_MAX_PODS) {
        struct gc_pod *p = gc_find(g, r.pod);
        if (!p) continue;
        if (r.code == GS_SUCCESS) p->bound = true, p->wait_since = -1;
        else if (r.code == GS_WAIT) p->wait_since = gs_clock_now(&g->clock);
    }
    return rc < 0 ? gc_fail(g, "scheduling cycle failed", gs_strerror(rc)) : 0;
}

static int gc_check(struct gc *g)
{
    if (gs_cache_check(g->cache, g->why, sizeof g->why) != 0) return gc_fail(g, "cache check", NULL);
    for (int32_t i = 0; i < gs_cache_node_count(g->cache); i++) {
        const struct gs_node_info *n = gs_cache_node(g->cache, i);
        for (int32_t k = 0; k < n->ngpus; k++)
            if (n->gpus[k].milli_free < 0 || n->gpus[k].milli_free > GS_GPU_MILLI)
                return gc_fail(g, "GPU allocated twice", n->name);
    }
    int64_t now = gs_clock_now(&g->clock);
    for (int i = 0; i < g->npods; i++) {
        struct gc_pod *p = &g->pods[i];
        if (p->wait_since >= 0 && now - p->wait_since >= (int64_t)GC_WAIT_S * GS_NS_PER_SEC)
            return gc_fail(g, "held at Permit past the group's timeout", p->pod->meta.name);
    }
    for (int k = 0; k < g->ngroups; k++) {
        struct gc_group *gr = &g->groups[k];
        int bound = 0;
        for (int i = gr->first; i < gr->first + gr->size; i++) bound += g->pods[i].bound && !g->pods[i].gone;
        if (bound > 0 && bound < gr->min && !gr->running)
            return gc_fail(g, "gang half started", gr->pg->u.podgroup->meta.name);
        if (bound >= gr->min) gr->started = gr->running = true;
        if (bound == 0) gr->running = false;
    }
    return 0;
}

static void gc_add(struct gc *g, struct gc_pod *p)
{
    if (p->added) return;
    p->added = true;
    gs_scheduler_add_pod(g->s, p->pod);
}

static void gc_new_group(struct gc *g, uint8_t b, bool all_now)
{
    int size = 2 + b % 3, gpus = 1 + (b >> 2) % 2, prio = (b >> 3) % 3;
    if (g->ngroups == GC_MAX_GROUPS || g->npods + size > GC_MAX_PODS) return;
    struct gc_group *gr = &g->groups[g->ngroups];
    char name[32];
    snprintf(name, sizeof name, "g%d", g->ngroups);
    if (!(gr->pg = gc_make_group(name, size))) return;
    g->ngroups++;
    gr->min = gr->size = size;
    gr->first = g->npods;
    gs_scheduler_add_podgroup(g->s, gr->pg->u.podgroup);
    for (int i = 0; i < size; i++) {
        char pn[48];
        snprintf(pn, sizeof pn, "%s-%d", name, i);
        struct gc_pod *p = &g->pods[g->npods];
        *p = (struct gc_pod){gc_make_pod(pn, gpus, prio, name), g->ngroups - 1, false, false, false, -1};
        if (!p->pod) return;
        g->npods++;
        if (all_now || i == 0) gc_add(g, p);
    }
}

static void gc_single(struct gc *g, uint8_t b)
{
    if (g->npods == GC_MAX_PODS) return;
    char pn[48];
    snprintf(pn, sizeof pn, "s%d", g->npods);
    struct gc_pod *p = &g->pods[g->npods];
    *p = (struct gc_pod){gc_make_pod(pn, b % 5, (b >> 3) % 4, NULL), -1, false, false, false, -1};
    if (!p->pod) return;
    g->npods++;
    gc_add(g, p);
}

static void gc_complete(struct gc *g, struct gc_pod *p)
{
    char key[GS__KEY_MAX];
    gs__pod_key(p->pod, key, sizeof key);
    gs_scheduler_delete_pod(g->s, key);
    p->gone = true;
    p->bound = false;
    p->wait_since = -1;
}

static int gc_step(struct gc *g, uint8_t op, uint8_t arg)
{
    switch (op % 6) {
    case 0: gc_new_group(g, arg, true); break;
    case 1: gc_new_group(g, arg, false); break;
    case 2:
        for (int i = 0; i < g->npods; i++) /* the next missing member of some group */
            if (!g->pods[i].added && g->pods[i].group >= 0) {
                gc_add(g, &g->pods[i]);
                break;
            }
        break;
    case 3: gc_single(g, arg); break;
    case 4: gs_clock_set(&g->clock, gs_clock_now(&g->clock) + (int64_t)(arg % 16) * GS_NS_PER_SEC); break;
    case 5: {
        int bound[GC_MAX_PODS], n = 0;
        for (int i = 0; i < g->npods; i++)
            if (g->pods[i].bound && !g->pods[i].gone) bound[n++] = i;
        if (n) gc_complete(g, &g->pods[bound[arg % n]]);
        break;
    }
    }
    if (gc_drain(g) || gc_check(g)) return -1;
    return 0;
}

/* The end: every member arrives, and rounds of "everything running completes,
 * time passes" until every gang has run. */
static int gc_finish(struct gc *g)
{
    for (int i = 0; i < g->npods; i++)
        if (!g->pods[i].added && g->pods[i].group >= 0) gc_add(g, &g->pods[i]);
    for (int round = 0; round < 64; round++) {
        if (gc_drain(g) || gc_check(g)) return -1;
        bool all = true;
        for (int k = 0; k < g->ngroups; k++) all = all && g->groups[k].started;
        if (all) return 0;
        for (int i = 0; i < g->npods; i++)
            if (g->pods[i].bound && !g->pods[i].gone) gc_complete(g, &g->pods[i]);
        gs_clock_set(&g->clock, gs_clock_now(&g->clock) + 11 * GS_NS_PER_SEC);
    }
    for (int k = 0; k < g->ngroups; k++)
        if (!g->groups[k].started) return gc_fail(g, "gang never ran (deadlock)", g->groups[k].pg->u.podgroup->meta.name);
    return 0;
}

/* One run over data. 0, or -1 with the broken invariant in why. */
static int gc_run(const uint8_t *data, size_t len, char *why, size_t whylen)
{
    struct gc *g = calloc(1, sizeof *g);
    if (!g) return 0;
    bool plan = len ? data[0] & 1 : true;
    int rc = gc_init(g, plan, len ? (data[0] >> 1) % 2 * 100 : 0);
    if (rc) {
        snprintf(why, whylen, "setup failed");
        gc_free(g);
        free(g);
        return -1;
    }
    for (size_t i = 1; i + 1 < len && rc == 0 && i < 240; i += 2) rc = gc_step(g, data[i], data[i + 1]);
    if (rc == 0) rc = gc_finish(g);
    if (rc) snprintf(why, whylen, "%s", g->why);
    gc_free(g);
    free(g);
    return rc;
}

#endif
