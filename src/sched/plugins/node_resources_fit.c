/*
 * node_resources_fit.c - "NodeResourcesFit": does the pod's CPU, memory, pod
 * slot and extended-resource demand fit the node, and how full would the node
 * be (score).
 *
 * Filter follows kube's fitsRequest order (pods, cpu, memory, extended) and
 * reports the first shortfall. GPUs are not checked here: GpuShare owns them,
 * since a GPU demand is per device, not a node total.
 *
 * Score implements kube's three scoring strategies with the same integer
 * arithmetic, so scores match kube-scheduler's for the same numbers:
 *   LeastAllocated  (alloc - req) * 100 / alloc
 *   MostAllocated   req * 100 / alloc (req capped at alloc)
 *   RequestedToCapacityRatio  a broken-linear function of req * 100 / alloc
 * weighted over the configured resources, skipping resources the node does
 * not have and (for extended ones, nvidia.com/gpu included) resources the pod
 * does not request. nvidia.com/gpu is counted in milli-GPU: allocatable is
 * ngpus * 1000, requested what is no longer free on healthy GPUs (an
 * unhealthy GPU counts as taken) plus the pod's count * share. Kube's
 * "non-zero request" defaults for pods without CPU/memory requests are not
 * applied: the cache keeps exact requests only.
 */
#include "sched/plugin.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum strategy { LEAST, MOST, RTCR };
enum res_kind { RK_CPU, RK_MEM, RK_GPU, RK_EXT };

#define MAX_RES 8
#define MAX_SHAPE 16

struct nrf {
    struct gs_cache *cache;
    enum strategy type;
    int nres;
    struct {
        enum res_kind kind;
        char name[128];
        int64_t weight;
    } res[MAX_RES];
    int nshape;
    struct {
        int64_t util, score; /* score already scaled to 0..100 */
    } shape[MAX_SHAPE];
};

enum { REJ_PODS = 1, REJ_CPU, REJ_MEM, REJ_EXT0 }; /* REJ_EXT0 + i: pod's i-th extended resource */

/*--- Args ---*/

static int parse_resources(struct nrf *s, const json_t *arr, struct gs_diags *d)
{
    int err = 0;
    if (!json_is_array(arr)) {
        gs_diags_add(d, "args.scoringStrategy.resources", "must be a list of {name, weight}");
        return GS_EINVAL;
    }
    if (json_array_size(arr) > MAX_RES) {
        gs_diags_add(d, "args.scoringStrategy.resources", "at most %d resources", MAX_RES);
        return GS_EINVAL;
    }
    s->nres = 0;
    size_t i;
    const json_t *r;
    json_array_foreach(arr, i, r) {
        char path[96];
        const json_t *name = json_object_get(r, "name"), *w = json_object_get(r, "weight");
        if (!json_is_string(name) || !json_string_length(name) || json_string_length(name) >= sizeof s->res[0].name) {
            snprintf(path, sizeof path, "args.scoringStrategy.resources[%zu].name", i);
            gs_diags_add(d, path, "must be a resource name");
            err = GS_EINVAL;
            continue;
        }
        int64_t weight = 1;
        if (w && (!json_is_integer(w) || json_integer_value(w) < 1 || json_integer_value(w) > 100)) {
            snprintf(path, sizeof path, "args.scoringStrategy.resources[%zu].weight", i);
            gs_diags_add(d, path, "must be an integer between 1 and 100");
            err = GS_EINVAL;
            continue;
        }
        if (w) weight = json_integer_value(w);
        const char *n = json_string_value(name);
        int k = s->nres++;
        snprintf(s->res[k].name, sizeof s->res[k].name, "%s", n);
        s->res[k].weight = weight;
        s->res[k].kind = !strcmp(n, GS_RES_CPU) ? RK_CPU : !strcmp(n, GS_RES_MEMORY) ? RK_MEM
                         : !strcmp(n, GS_RES_GPU) ? RK_GPU : RK_EXT;
    }
    return err;
}

static int parse_shape(struct nrf *s, const json_t *rtcr, struct gs_diags *d)
{
    const json_t *shape = json_object_get(rtcr, "shape");
    if (!json_is_array(shape) || !json_array_size(shape) || json_array_size(shape) > MAX_SHAPE) {
        gs_diags_add(d, "args.scoringStrategy.requestedToCapacityRatio.shape",
                     "must be a list of 1 to %d {utilization, score} points", MAX_SHAPE);
        return GS_EINVAL;
    }
    size_t i;
    const json_t *p;
    json_array_foreach(shape, i, p) {
        char path[96];
        const json_t *u = json_object_get(p, "utilization"), *sc = json_object_get(p, "score");
        int64_t uv = json_is_integer(u) ? json_integer_value(u) : -1, sv = json_is_integer(sc) ? json_integer_value(sc) : -1;
        if (uv < 0 || uv > 100 || (i > 0 && uv <= s->shape[i - 1].util)) {
            snprintf(path, sizeof path, "args.scoringStrategy.requestedToCapacityRatio.shape[%zu].utilization", i);
            gs_diags_add(d, path, "must be an integer 0..100, increasing");
            return GS_EINVAL;
        }
        if (sv < 0 || sv > 10) {
            snprintf(path, sizeof path, "args.scoringStrategy.requestedToCapacityRatio.shape[%zu].score", i);
            gs_diags_add(d, path, "must be an integer 0..10");
            return GS_EINVAL;
        }
        s->shape[i].util = uv;
        s->shape[i].score = sv * (GS_MAX_SCORE / 10);
        s->nshape = (int)i + 1;
    }
    return 0;
}

static int parse_args(struct nrf *s, const json_t *args, struct gs_diags *d)
{
    const json_t *ss = json_object_get(args, "scoringStrategy");
    if (!ss) return 0;
    if (!json_is_object(ss)) {
        gs_diags_add(d, "args.scoringStrategy", "must be an object");
        return GS_EINVAL;
    }
    const json_t *type = json_object_get(ss, "type");
    if (type) {
        const char *t = json_string_value(type);
        if (t && !strcmp(t, "LeastAllocated")) s->type = LEAST;
        else if (t && !strcmp(t, "MostAllocated")) s->type = MOST;
        else if (t && !strcmp(t, "RequestedToCapacityRatio")) s->type = RTCR;
        else {
            gs_diags_add(d, "args.scoringStrategy.type",
                         "unknown scoring strategy \"%s\" (want LeastAllocated, MostAllocated or RequestedToCapacityRatio)",
                         t ? t : "?");
            return GS_EINVAL;
        }
    }
    int err = 0;
    const json_t *res = json_object_get(ss, "resources");
    if (res) err = parse_resources(s, res, d);
    if (s->type == RTCR) {
        int e2 = parse_shape(s, json_object_get(ss, "requestedToCapacityRatio"), d);
        if (!err) err = e2;
    }
    return err;
}

static int nrf_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    struct nrf *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->cache = h->cache;
    s->type = LEAST;
    s->nres = 2;
    s->res[0].kind = RK_CPU;
    strcpy(s->res[0].name, GS_RES_CPU);
    s->res[0].weight = 1;
    s->res[1].kind = RK_MEM;
    strcpy(s->res[1].name, GS_RES_MEMORY);
    s->res[1].weight = 1;
    if (args && !json_is_object(args)) {
        gs_diags_add(d, "args", "must be an object");
        free(s);
        return GS_EINVAL;
    }
    int err = args ? parse_args(s, args, d) : 0;
    if (!err && s->type == RTCR && !s->nshape) {
        gs_diags_add(d, "args.scoringStrategy.requestedToCapacityRatio.shape", "required for RequestedToCapacityRatio");
        err = GS_EINVAL;
    }
    if (err) {
        free(s);
        return err;
    }
    *state = s;
    return 0;
}

static void nrf_fini(void *state)
{
    free(state);
}

/*--- Filter ---*/

static int64_t res_get(const struct gs_resources *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->v[i].name, name) == 0) return r->v[i].milli;
    return 0;
}

static uint8_t ext_fit(const struct gs_demand *d, const struct gs_node_info *ni)
{
    for (size_t k = 0; k < d->extended.n && k < 100; k++) {
        const struct gs_resource *r = &d->extended.v[k];
        if (r->milli > 0 && r->milli > res_get(&ni->ext_alloc, r->name) - res_get(&ni->ext_used, r->name))
            return (uint8_t)(REJ_EXT0 + k);
    }
    return 0;
}

static void nrf_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                       struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)state, (void)cs;
    const struct gs_demand *d = &pod->demand;
    const int64_t cpu = d->cpu_milli, mem = d->mem_bytes;
    const bool ext = d->extended.n > 0;
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_info *ni = nodes[i];
        if (ni->pods_alloc > 0 && ni->pods_used >= ni->pods_alloc) reject[i] = REJ_PODS;
        else if (cpu > 0 && cpu > ni->cpu_alloc - ni->cpu_used) reject[i] = REJ_CPU;
        else if (mem > 0 && mem > ni->mem_alloc - ni->mem_used) reject[i] = REJ_MEM;
        else if (ext) reject[i] = ext_fit(d, ni);
    }
}

/* True when the demand fits the least free node of the cluster, by pods,
 * CPU and memory (the cache keeps those minima): then no node fails here. */
static bool fits_everywhere(const struct nrf *s, const struct gs_demand *d)
{
    int64_t cpu, mem;
    int32_t pods;
    gs_cache_min_free(s->cache, &cpu, &mem, &pods);
    return !d->extended.n && pods > 0 && (d->cpu_milli <= 0 || d->cpu_milli <= cpu) &&
           (d->mem_bytes <= 0 || d->mem_bytes <= mem);
}

/* The same verdicts from the hot records: the common verdict (fits) costs
 * three compares on one cache line, and nothing at all when the pod fits the
 * least free node (reject[] arrives zeroed). */
static void nrf_filter_idx(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod, const int32_t *idx,
                           size_t n, uint8_t *reject)
{
    (void)cs;
    const struct nrf *s = state;
    const struct gs_node_hot *hot = gs_cache_hot(s->cache);
    const struct gs_demand *d = &pod->demand;
    if (fits_everywhere(s, d)) return;
    /* A demand of 0 or less never rejects: INT64_MIN exceeds no amount. */
    const int64_t cpu = d->cpu_milli > 0 ? d->cpu_milli : INT64_MIN, mem = d->mem_bytes > 0 ? d->mem_bytes : INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_hot *h = &hot[idx[i]];
        uint8_t r = mem > h->mem_free ? REJ_MEM : 0;
        r = cpu > h->cpu_free ? REJ_CPU : r;
        reject[i] = h->pods_free <= 0 ? REJ_PODS : r;
    }
    if (d->extended.n)
        for (size_t i = 0; i < n; i++)
            if (!reject[i]) reject[i] = ext_fit(d, gs_cache_node(s->cache, idx[i]));
}

static int nrf_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)state;
    switch (GS_REJECT_CODE(code)) {
    case REJ_PODS: return snprintf(buf, len, "Too many pods");
    case REJ_CPU: return snprintf(buf, len, "Insufficient cpu");
    case REJ_MEM: return snprintf(buf, len, "Insufficient memory");
    default: {
        size_t k = GS_REJECT_CODE(code) - REJ_EXT0;
        const char *name = k < pod->demand.extended.n ? pod->demand.extended.v[k].name : "extended resource";
        return snprintf(buf, len, "Insufficient %s", name);
    }
    }
}

/*--- Score ---*/

/*
 * floor(num / den) for 0 <= num, 0 < den. A 64-bit integer division costs
 * tens of cycles and the score loop does two per node; a double division
 * is a few, and while both operands are exact doubles (< 2^53) the
 * correctly rounded quotient is off by at most one, which the multiply
 * check repairs. The result is exactly the integer quotient.
 */
static inline int64_t div_floor(int64_t num, int64_t den)
{
    if (num >= (1LL << 53) || den >= (1LL << 53)) return num / den;
    int64_t q = (int64_t)((double)num / (double)den);
    if (q * den > num) q--;
    else if ((q + 1) * den <= num) q++;
    return q;
}

static inline int64_t least_score(int64_t req, int64_t cap)
{
    if (cap == 0 || req > cap) return 0;
    return div_floor((cap - req) * GS_MAX_SCORE, cap);
}

static int64_t most_score(int64_t req, int64_t cap)
{
    if (cap == 0) return 0;
    if (req > cap) req = cap;
    if (req < 0) req = 0;
    return div_floor(req * GS_MAX_SCORE, cap);
}

static int64_t broken_linear(const struct nrf *s, int64_t p)
{
    for (int i = 0; i < s->nshape; i++) {
        if (p <= s->shape[i].util) {
            if (i == 0) return s->shape[0].score;
            return s->shape[i - 1].score + (s->shape[i].score - s->shape[i - 1].score) * (p - s->shape[i - 1].util) /
                                               (s->shape[i].util - s->shape[i - 1].util);
        }
    }
    return s->shape[s->nshape - 1].score;
}

static int64_t rtcr_score(const struct nrf *s, int64_t req, int64_t cap)
{
    if (cap == 0 || req > cap) return broken_linear(s, 100);
    return broken_linear(s, req * 100 / cap);
}

/* Allocatable and requested (with the pod) of resource k on node ni; false to skip it. */
static bool amounts(const struct nrf *s, int k, const struct gs_pod *pod, const struct gs_node_info *ni, int64_t *alloc,
                    int64_t *req)
{
    const struct gs_demand *d = &pod->demand;
    switch (s->res[k].kind) {
    case RK_CPU: *alloc = ni->cpu_alloc, *req = ni->cpu_used + d->cpu_milli; break;
    case RK_MEM: *alloc = ni->mem_alloc, *req = ni->mem_used + d->mem_bytes; break;
    case RK_GPU: {
        int64_t want = (int64_t)d->gpu_count * d->gpu_milli;
        if (!want) return false;
        *alloc = (int64_t)ni->ngpus * GS_GPU_MILLI;
        *req = *alloc - ni->gpu_milli_free + want;
        break;
    }
    case RK_EXT: {
        int64_t want = res_get(&d->extended, s->res[k].name);
        if (!want) return false;
        *alloc = res_get(&ni->ext_alloc, s->res[k].name);
        *req = res_get(&ni->ext_used, s->res[k].name) + want;
        break;
    }
    }
    return *alloc != 0;
}

static int64_t node_score(const struct nrf *s, const struct gs_pod *pod, const struct gs_node_info *ni)
{
    int64_t sum = 0, wsum = 0;
    for (int k = 0; k < s->nres; k++) {
        int64_t alloc = 0, req = 0;
        if (!amounts(s, k, pod, ni, &alloc, &req)) continue;
        int64_t r = s->type == LEAST ? least_score(req, alloc) : s->type == MOST ? most_score(req, alloc)
                                                                                : rtcr_score(s, req, alloc);
        /* kube's RequestedToCapacityRatio leaves zero scores out of the average. */
        if (s->type == RTCR && r <= 0) continue;
        sum += r * s->res[k].weight;
        wsum += s->res[k].weight;
    }
    if (!wsum) return 0;
    if (s->type == RTCR) return (int64_t)llround((double)sum / (double)wsum);
    return sum / wsum;
}

static void nrf_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)cs;
    const struct nrf *s = state;
    for (size_t i = 0; i < n; i++) scores[i] = node_score(s, pod, nodes[i]);
}

/*
 * The default strategy (LeastAllocated over cpu and memory, weights 1) is what
 * nearly every pod meets, on every node, and its two 64-bit divisions per node
 * would dominate a cycle. The hot record carries a multiplier for each
 * allocatable amount, so floor(free * 100 / cap) is one 128-bit multiply and a
 * shift, exact for free < 2^46 (cache.h); larger amounts, and caps without a
 * multiplier (cap <= 128), divide.
 */
static int64_t least_hot(int64_t free_after, int64_t cap, uint64_t magic, uint8_t shift)
{
    if ((uint64_t)free_after >= (1ULL << 46) || !magic) return free_after < 0 ? 0 : least_score(cap - free_after, cap);
    return (int64_t)gs_pct((uint64_t)free_after, magic, shift);
}

/* kube's mean over the resources the node has, for one hot record. */
static int64_t least_mean(const struct gs_node_hot *h, int64_t cpu, int64_t mem)
{
    int64_t sum = 0, w = 0;
    if (h->cpu_alloc) sum += least_hot(h->cpu_free - cpu, h->cpu_alloc, h->cpu_pct, h->cpu_pct_shift), w++;
    if (h->mem_alloc) sum += least_hot(h->mem_free - mem, h->mem_alloc, h->mem_pct, h->mem_pct_shift), w++;
    return w == 2 ? sum >> 1 : sum;
}

static bool is_default(const struct nrf *s)
{
    return s->type == LEAST && s->nres == 2 && s->res[0].kind == RK_CPU && s->res[1].kind == RK_MEM &&
           s->res[0].weight == 1 && s->res[1].weight == 1;
}

static void nrf_score_idx(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod, const int32_t *idx,
                          size_t n, int64_t *scores)
{
    (void)cs;
    const struct nrf *s = state;
    if (!is_default(s)) {
        for (size_t i = 0; i < n; i++) scores[i] = node_score(s, pod, gs_cache_node(s->cache, idx[i]));
        return;
    }
    const struct gs_node_hot *hot = gs_cache_hot(s->cache);
    const int64_t cpu = pod->demand.cpu_milli, mem = pod->demand.mem_bytes;
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_hot *h = &hot[idx[i]];
        /* Usual case in one test: both amounts left in [0, 2^46) and both
         * allocatables with a multiplier (so both > 128 and both counted). */
        uint64_t fc = (uint64_t)(h->cpu_free - cpu), fm = (uint64_t)(h->mem_free - mem);
        if (__builtin_expect((fc | fm) < (1ULL << 46) && h->cpu_pct && h->mem_pct, 1))
            scores[i] = (int64_t)((gs_pct(fc, h->cpu_pct, h->cpu_pct_shift) + gs_pct(fm, h->mem_pct, h->mem_pct_shift)) >> 1);
        else
            scores[i] = least_mean(h, cpu, mem);
    }
}

const struct gs_plugin gs_plugin_node_resources_fit = {
    .name = "NodeResourcesFit",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .init = nrf_init,
    .fini = nrf_fini,
    .filter = nrf_filter,
    .filter_idx = nrf_filter_idx,
    .reason = nrf_reason,
    .score = nrf_score,
    .score_idx = nrf_score_idx,
};
