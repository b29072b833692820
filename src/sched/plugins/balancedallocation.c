/*
 * balancedallocation.c - "NodeResourcesBalancedAllocation": prefer nodes on
 * which the pod leaves the requested fractions of the resources close to
 * each other, as kube-scheduler's plugin does.
 *
 * For each configured resource the node has: fraction = (requested on the
 * node + the pod's request) / allocatable, capped at 1. With two fractions
 * std = |f0 - f1| / 2, with more the population standard deviation; score =
 * (1 - std) * 100, truncated. The arithmetic is kube's, in doubles, so the
 * same numbers give the same score. Requests are exact (kube's useRequested:
 * no non-zero defaults). An extended resource the pod does not request is
 * left out (kube's rule), so nvidia.com/gpu, when configured, only weighs in
 * for GPU pods: allocatable ngpus * 1000 milli, requested what is no longer
 * free on healthy GPUs plus the pod's count * share (NodeResourcesFit's
 * accounting). A pod requesting nothing of the configured resources skips
 * the plugin (kube's best-effort rule, so they are not all packed onto one
 * node).
 *
 * Args: resources, a list of {name, weight} (weights are accepted as kube
 * does and do not change the score); default cpu and memory. The default
 * pair is scored from the cache's hot records in one pass.
 */
#include "sched/plugin.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RES 8

enum res_kind { RK_CPU, RK_MEM, RK_GPU, RK_EXT };

struct ba {
    struct gs_cache *cache;
    int nres;
    struct {
        enum res_kind kind;
        char name[128];
    } res[MAX_RES];
};

/*--- Args ---*/

static int parse_resources(struct ba *s, const json_t *arr, struct gs_diags *d)
{
    if (!json_is_array(arr) || !json_array_size(arr)) {
        gs_diags_add(d, "args.resources", "must be a non-empty list of {name, weight}");
        return GS_EINVAL;
    }
    int err = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(arr, i, e) {
        char p[96];
        const char *name = json_string_value(json_object_get(e, "name"));
        snprintf(p, sizeof p, "args.resources[%zu].name", i);
        if (!name || !*name) {
            gs_diags_add(d, p, "required");
            err = GS_EINVAL;
            continue;
        }
        if (strlen(name) >= sizeof s->res[0].name) {
            gs_diags_add(d, p, "\"%.40s...\" is longer than %zu characters", name, sizeof s->res[0].name - 1);
            err = GS_EINVAL;
            continue;
        }
        const json_t *w = json_object_get(e, "weight");
        if (w && (!json_is_integer(w) || json_integer_value(w) < 1 || json_integer_value(w) > 100)) {
            snprintf(p, sizeof p, "args.resources[%zu].weight", i);
            gs_diags_add(d, p, "must be an integer from 1 to 100");
            err = GS_EINVAL;
            continue;
        }
        for (int k = 0; k < s->nres; k++)
            if (!strcmp(s->res[k].name, name)) {
                gs_diags_add(d, p, "duplicate resource \"%s\"", name);
                err = GS_EINVAL;
            }
        if (err) continue;
        if (s->nres == MAX_RES) {
            gs_diags_add(d, "args.resources", "at most %d resources", MAX_RES);
            return GS_EINVAL;
        }
        int k = s->nres++;
        snprintf(s->res[k].name, sizeof s->res[k].name, "%s", name);
        s->res[k].kind = !strcmp(name, GS_RES_CPU) ? RK_CPU : !strcmp(name, GS_RES_MEMORY) ? RK_MEM
                       : !strcmp(name, GS_RES_GPU) ? RK_GPU : RK_EXT;
    }
    return err;
}

static int ba_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    struct ba *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->cache = h->cache;
    const json_t *r = json_object_get(args, "resources");
    int err = r ? parse_resources(s, r, d) : 0;
    if (!r) {
        s->nres = 2;
        s->res[0].kind = RK_CPU, snprintf(s->res[0].name, sizeof s->res[0].name, "%s", GS_RES_CPU);
        s->res[1].kind = RK_MEM, snprintf(s->res[1].name, sizeof s->res[1].name, "%s", GS_RES_MEMORY);
    }
    if (err) {
        free(s);
        return err;
    }
    *state = s;
    return 0;
}

/*--- Scoring ---*/

/* The pod's request of resource k (kube's calculatePodResourceRequest). */
static int64_t pod_request(const struct ba *s, int k, const struct gs_pod *pod)
{
    const struct gs_demand *d = &pod->demand;
    switch (s->res[k].kind) {
    case RK_CPU: return d->cpu_milli;
    case RK_MEM: return d->mem_bytes;
    case RK_GPU: return (int64_t)d->gpu_count * d->gpu_milli;
    case RK_EXT: return gs_resources_get(&d->extended, s->res[k].name);
    }
    return 0;
}

/* kube's balancedResourceScorer over the fractions that were taken. */
static int64_t score_of(const double *f, int n, double total)
{
    double std = 0;
    if (n == 2) {
        std = fabs((f[0] - f[1]) / 2);
    } else if (n > 2) {
        double mean = total / n, sum = 0;
        for (int i = 0; i < n; i++) sum = sum + (f[i] - mean) * (f[i] - mean);
        std = sqrt(sum / n);
    }
    return (int64_t)((1 - std) * (double)GS_MAX_SCORE);
}

static int64_t node_score(const struct ba *s, const struct gs_pod *pod, const struct gs_node_info *ni)
{
    double f[MAX_RES], total = 0;
    int n = 0;
    for (int k = 0; k < s->nres; k++) {
        int64_t want = pod_request(s, k, pod), alloc = 0, req = 0;
        switch (s->res[k].kind) {
        case RK_CPU: alloc = ni->cpu_alloc, req = ni->cpu_used + want; break;
        case RK_MEM: alloc = ni->mem_alloc, req = ni->mem_used + want; break;
        case RK_GPU:
            if (!want) continue; /* an extended resource the pod does not request */
            alloc = (int64_t)ni->ngpus * GS_GPU_MILLI;
            req = alloc - ni->gpu_milli_free + want;
            break;
        case RK_EXT:
            if (!want) continue;
            alloc = gs_resources_get(&ni->ext_alloc, s->res[k].name);
            req = gs_resources_get(&ni->ext_used, s->res[k].name) + want;
            break;
        }
        if (!alloc) continue;
        double x = (double)req / (double)alloc;
        if (x > 1) x = 1;
        total += x;
        f[n++] = x;
    }
    return score_of(f, n, total);
}

static bool is_default(const struct ba *s)
{
    return s->nres == 2 && s->res[0].kind == RK_CPU && s->res[1].kind == RK_MEM;
}

static struct gs_status ba_pre_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                     struct gs_node_info *const *nodes, size_t n)
{
    (void)cs, (void)nodes, (void)n;
    const struct ba *s = state;
    for (int k = 0; k < s->nres; k++)
        if (pod_request(s, k, pod)) return (struct gs_status){0};
    return gs_status_make(GS_SKIP, NULL); /* best effort for these resources */
}

static struct gs_status ba_pre_score_idx(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                         const int32_t *idx, size_t n)
{
    (void)idx;
    return ba_pre_score(state, cs, pod, NULL, n);
}

static void ba_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                     struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)cs;
    const struct ba *s = state;
    for (size_t i = 0; i < n; i++) scores[i] = node_score(s, pod, nodes[i]);
}

/* cpu and memory from the hot records: used = alloc - free, exactly. */
static void ba_score_idx(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod, const int32_t *idx,
                         size_t n, int64_t *scores)
{
    (void)cs;
    const struct ba *s = state;
    if (!is_default(s)) {
        for (size_t i = 0; i < n; i++) scores[i] = node_score(s, pod, gs_cache_node(s->cache, idx[i]));
        return;
    }
    const struct gs_node_hot *hot = gs_cache_hot(s->cache);
    const int64_t cpu = pod->demand.cpu_milli, mem = pod->demand.mem_bytes;
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_hot *h = &hot[idx[i]];
        double f[2], total = 0;
        int m = 0;
        if (h->cpu_alloc) {
            double x = (double)(h->cpu_alloc - h->cpu_free + cpu) / (double)h->cpu_alloc;
            f[m++] = x > 1 ? 1 : x;
            total += f[m - 1];
        }
        if (h->mem_alloc) {
            double x = (double)(h->mem_alloc - h->mem_free + mem) / (double)h->mem_alloc;
            f[m++] = x > 1 ? 1 : x;
            total += f[m - 1];
        }
        scores[i] = m == 2 ? (int64_t)((1 - fabs((f[0] - f[1]) / 2)) * (double)GS_MAX_SCORE) : score_of(f, m, total);
    }
}

const struct gs_plugin gs_plugin_balanced_allocation = {
    .name = "NodeResourcesBalancedAllocation",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .init = ba_init,
    .fini = free,
    .pre_score = ba_pre_score,
    .pre_score_idx = ba_pre_score_idx,
    .score = ba_score,
    .score_idx = ba_score_idx,
};
