/*
 * node_resource_topology.c - "NodeResourceTopology": NUMA-aware filtering,
 * interconnect-aware GPU choice and a compactness score.
 *
 * Filter applies the node's TopologyManager policy (from its
 * NodeResourceTopology object, else the plugin's topologyManagerPolicy arg):
 * under single-numa-node the pod's GPUs and CPUs must come from one zone
 * (per container or for the whole pod, by scope); under restricted only the
 * narrowest alignment the node could ever give is accepted. A pod that
 * annotates gpusched.io/gpu-interconnect: nvlink (or numa) is admitted only
 * where one NVLink island (or NUMA node) holds all its GPUs.
 *
 * Zone CPU in use is attributed from the pods on the node whose GPUs sit in
 * one zone (CPU-only pods are not pinned and count only against the node);
 * it is computed once per cycle, and only when some node has a zonal policy.
 *
 * Reserve chooses the GPU set when no earlier reserve plugin did (enable it
 * before GpuShare): inside the zone the policy pins, the set with the best
 * interconnect (topology_core.c). The choice lives in the assignment, so
 * Unreserve has nothing to undo. Score: compactness of the best set, 0..100.
 *
 * Flat nodes. On a node without a NodeResourceTopology object, without an
 * NVLink island of two or more GPUs and with its GPUs in at most one NUMA
 * zone, no GPU set is better connected than another, and every policy and
 * interconnect ask is met by any set that fits. There the compactness score
 * is only "fewest free GPUs" and the choice only "least free share first",
 * a packing of its own. With args.leaveFlatNodes (the server's profile, whose
 * placement is FGDLearn's) Score gives such a node 0 and Reserve leaves its
 * GPUs to the next Reserve plugin; without it (the default) both act on
 * every node.
 */
#include "sched/plugin.h"
#include "sched/topology_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY "NodeResourceTopology"

enum { REJ_NUMA = 1, REJ_RESTRICTED = 2, REJ_NVLINK = 3, REJ_SAME_NUMA = 4 };

struct nrt_state {
    const struct gs_handle *h;
    struct gs_handle hcopy;
    enum gs_tm_policy policy;
    enum gs_tm_scope scope;
    bool leave_flat;           /* args.leaveFlatNodes: see "Flat nodes" above */
    struct gs_topo_memo *memo; /* Score by index: compactness per node and request until the node changes */
};

/* Per cycle: zone CPU/memory in use per node (lazily), and the pod's need. */
struct cyc {
    bool computed;
    int32_t nnodes;
    int64_t *cpu, *mem; /* nnodes x GS_NRT_MAX_ZONES */
    enum gs_link_level need_level;
};

static void cyc_free(void *p)
{
    struct cyc *c = p;
    if (!c) return;
    free(c->cpu);
    free(c->mem);
    free(c);
}

static int nrt_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    struct nrt_state *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->hcopy = *h;
    s->h = &s->hcopy;
    const char *pol = json_string_value(json_object_get(args, "topologyManagerPolicy"));
    if (pol && !gs_tm_policy_parse(pol, &s->policy)) {
        gs_diags_add(d, "args.topologyManagerPolicy", "unknown policy \"%s\" (want none, best-effort, restricted or single-numa-node)", pol);
        free(s);
        return GS_EINVAL;
    }
    const char *scope = json_string_value(json_object_get(args, "topologyManagerScope"));
    if (scope && strcmp(scope, "pod") && strcmp(scope, "container")) {
        gs_diags_add(d, "args.topologyManagerScope", "unknown scope \"%s\" (want container or pod)", scope);
        free(s);
        return GS_EINVAL;
    }
    s->scope = scope && !strcmp(scope, "pod") ? GS_TM_SCOPE_POD : GS_TM_SCOPE_CONTAINER;
    const json_t *flat = json_object_get(args, "leaveFlatNodes");
    if (flat && !json_is_boolean(flat)) {
        gs_diags_add(d, "args.leaveFlatNodes", "expected true or false");
        free(s);
        return GS_EINVAL;
    }
    s->leave_flat = json_is_true(flat);
    if (!(s->memo = gs_topo_memo_new())) {
        free(s);
        return GS_ENOMEM;
    }
    *state = s;
    return 0;
}

static void nrt_fini(void *state)
{
    struct nrt_state *s = state;
    if (s) gs_topo_memo_free(s->memo);
    free(s);
}

static void node_policy(const struct nrt_state *s, const struct gs_node_info *n, enum gs_tm_policy *p,
                        enum gs_tm_scope *sc)
{
    *p = n->nrt && n->nrt->has_policy ? n->nrt->policy : s->policy;
    *sc = n->nrt && n->nrt->has_policy ? n->nrt->scope : s->scope;
}

/* No GPU set of n is better connected than another ("Flat nodes" above). */
static bool flat_node(const struct gs_node_info *n)
{
    if (n->nrt) return false;
    uint64_t isl[GS_MAX_GPUS_PER_NODE];
    int k = gs_topo_islands(n, isl, GS_MAX_GPUS_PER_NODE);
    for (int i = 0; i < k; i++)
        if (isl[i] & (isl[i] - 1)) return false;
    int32_t numa = -1;
    for (int32_t g = 0; g < n->ngpus; g++) {
        int32_t z = n->gpus[g].numa_node;
        if (z < 0) continue;
        if (numa >= 0 && z != numa) return false;
        numa = z;
    }
    return true;
}

static enum gs_link_level wanted_level(const struct gs_pod *pod)
{
    const char *v = gs_labels_get(&pod->meta.annotations, GS_ANN_GPU_INTERCONNECT);
    if (!v || pod->demand.gpu_count < 2) return GS_LINK_NONE;
    return !strcmp(v, "nvlink") ? GS_LINK_NVLINK : !strcmp(v, "numa") ? GS_LINK_NUMA : GS_LINK_NONE;
}

static struct gs_status nrt_pre_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)state;
    struct cyc *c = calloc(1, sizeof *c);
    if (!c) return gs_status_make(GS_ERROR, "out of memory");
    c->need_level = wanted_level(pod);
    if (gs_cycle_state_write(cs, KEY, c, NULL, cyc_free) != 0) return gs_status_make(GS_ERROR, "out of memory");
    return (struct gs_status){0};
}

struct usage_ctx {
    struct gs_cache *cache;
    struct cyc *c;
};

static void add_usage(void *arg, const struct gs_pod *pod, const struct gs_assignment *a, bool bound)
{
    (void)bound;
    struct usage_ctx *u = arg;
    if (!a->gpu_mask || a->node < 0 || a->node >= u->c->nnodes) return;
    struct gs_node_info *n = gs_cache_node(u->cache, a->node);
    if (!n || !n->nrt) return;
    for (int z = 0; z < n->nrt->nzones; z++) {
        uint64_t zone = 0;
        for (int32_t g = 0; g < n->ngpus; g++)
            if (n->gpus[g].numa_node == n->nrt->zones[z].numa) zone |= 1ULL << g;
        if ((zone & a->gpu_mask) != a->gpu_mask) continue;
        u->c->cpu[(size_t)a->node * GS_NRT_MAX_ZONES + (size_t)z] += pod->demand.cpu_milli;
        u->c->mem[(size_t)a->node * GS_NRT_MAX_ZONES + (size_t)z] += pod->demand.mem_bytes;
        return;
    }
}

static int compute_usage(struct nrt_state *s, struct cyc *c)
{
    if (c->computed) return 0;
    c->nnodes = gs_cache_node_count(s->h->cache);
    size_t cells = (size_t)(c->nnodes ? c->nnodes : 1) * GS_NRT_MAX_ZONES;
    c->cpu = calloc(cells, sizeof *c->cpu);
    c->mem = calloc(cells, sizeof *c->mem);
    if (!c->cpu || !c->mem) return GS_ENOMEM;
    struct usage_ctx u = {s->h->cache, c};
    gs_cache_foreach_pod(s->h->cache, add_usage, &u);
    c->computed = true;
    return 0;
}

/* Zones of n with this cycle's usage; computes the usage on first need. */
static int zones_of(struct nrt_state *s, struct cyc *c, const struct gs_node_info *n, struct gs_zone_free *z)
{
    if (n->nrt && compute_usage(s, c) != 0) return -1;
    size_t off = (size_t)n->idx * GS_NRT_MAX_ZONES;
    bool have = n->nrt && c->cpu && n->idx < c->nnodes;
    return gs_topo_zones(n, have ? c->cpu + off : NULL, have ? c->mem + off : NULL, z, GS_MAX_GPUS_PER_NODE);
}

/* The verdict on one node: 0 (fits) or a reject code. */
static uint8_t filter_one(struct nrt_state *s, struct cyc *c, const struct gs_pod *pod, const struct gs_node_info *ni)
{
    enum gs_tm_policy pol;
    enum gs_tm_scope sc;
    node_policy(s, ni, &pol, &sc);
    const struct gs_demand *d = &pod->demand;
    if (c && c->need_level == GS_LINK_NVLINK && gs_topo_largest_free_island(ni, d->gpu_milli, d->gpu_mem_mib) < d->gpu_count)
        return REJ_NVLINK;
    if (c && c->need_level == GS_LINK_NUMA) {
        struct gs_gpu_choice ch;
        if (!gs_topo_choose(ni, d->gpu_count, d->gpu_milli, d->gpu_mem_mib, ~0ULL, &ch) || ch.level < GS_LINK_NUMA)
            return REJ_SAME_NUMA;
    }
    if (pol != GS_TM_SINGLE_NUMA && pol != GS_TM_RESTRICTED) return 0;
    struct gs_zone_free z[GS_MAX_GPUS_PER_NODE];
    int nz = c ? zones_of(s, c, ni, z) : gs_topo_zones(ni, NULL, NULL, z, GS_MAX_GPUS_PER_NODE);
    if (nz > 0 && !gs_topo_admit(ni, pod, pol, sc, z, nz)) return pol == GS_TM_SINGLE_NUMA ? REJ_NUMA : REJ_RESTRICTED;
    return 0;
}

static bool zonal(enum gs_tm_policy p) { return p == GS_TM_SINGLE_NUMA || p == GS_TM_RESTRICTED; }

static void nrt_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                       struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    struct nrt_state *s = state;
    struct cyc *c = gs_cycle_state_read(cs, KEY);
    if (!zonal(s->policy) && (!c || c->need_level == GS_LINK_NONE)) {
        /* No interconnect ask and a non-zonal default: only a node's own zonal
         * policy can reject, so look at those nodes alone. */
        for (size_t i = 0; i < n; i++) {
            const struct gs_nrt *t = nodes[i]->nrt;
            if (t && t->has_policy && zonal(t->policy)) reject[i] = filter_one(s, c, pod, nodes[i]);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) reject[i] = filter_one(s, c, pod, nodes[i]);
}

static int nrt_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)state;
    switch (GS_REJECT_CODE(code)) {
    case REJ_NUMA: return snprintf(buf, len, "node(s) cannot fit the pod in a single NUMA zone (TopologyManager single-numa-node)");
    case REJ_RESTRICTED: return snprintf(buf, len, "node(s) cannot give the pod its narrowest NUMA alignment (TopologyManager restricted)");
    case REJ_NVLINK: return snprintf(buf, len, "node(s) have no NVLink island with %d free GPUs", pod->demand.gpu_count);
    case REJ_SAME_NUMA: return snprintf(buf, len, "node(s) have no NUMA node with %d free GPUs", pod->demand.gpu_count);
    }
    return snprintf(buf, len, "NodeResourceTopology rejected the node");
}

/* A pod without GPUs scores 0 everywhere: Skip spares the pass (adding zeros
 * changes no total). */
static struct gs_status nrt_pre_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                      struct gs_node_info *const *nodes, size_t n)
{
    (void)state, (void)cs, (void)nodes, (void)n;
    return (struct gs_status){.code = pod->demand.gpu_count > 0 ? GS_SUCCESS : GS_SKIP};
}

static struct gs_status nrt_pre_score_idx(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                          const int32_t *idx, size_t n)
{
    (void)idx;
    return nrt_pre_score(state, cs, pod, NULL, n);
}

/* The reference: computed on every node. */
static void nrt_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)cs;
    const struct gs_demand *d = &pod->demand;
    if (d->gpu_count <= 0) return;
    struct nrt_state *s = state;
    for (size_t i = 0; i < n; i++)
        scores[i] = s->leave_flat && flat_node(nodes[i])
                        ? 0
                        : gs_topo_compactness(nodes[i], d->gpu_count, d->gpu_milli, d->gpu_mem_mib);
}

/* The cycle's form: the same compactness, remembered per node and request
 * until the node changes (topology_core.h "Compactness memo"). */
static void nrt_score_idx(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod, const int32_t *idx,
                          size_t n, int64_t *scores)
{
    (void)cs;
    struct nrt_state *s = state;
    const struct gs_demand *d = &pod->demand;
    struct gs_cache *c = s->h->cache;
    if (d->gpu_count <= 0) {
        memset(scores, 0, n * sizeof *scores);
        return;
    }
    (void)gs_topo_memo_select(s->memo, c, d->gpu_count, d->gpu_milli, d->gpu_mem_mib); /* on failure: computes */
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_info *nd = gs_cache_node(c, idx[i]);
        scores[i] = s->leave_flat && flat_node(nd) ? 0 : gs_topo_memo_compactness(s->memo, nd);
    }
}

static struct gs_status nrt_reserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                    struct gs_node_info *node, struct gs_assignment *a)
{
    struct nrt_state *s = state;
    const struct gs_demand *d = &pod->demand;
    if (a->gpu_mask || d->gpu_count <= 0 || (s->leave_flat && flat_node(node))) return (struct gs_status){0};
    uint64_t allowed = ~0ULL;
    enum gs_tm_policy pol;
    enum gs_tm_scope sc;
    node_policy(s, node, &pol, &sc);
    struct cyc *c = gs_cycle_state_read(cs, KEY);
    if (pol == GS_TM_SINGLE_NUMA || pol == GS_TM_RESTRICTED || pol == GS_TM_BEST_EFFORT) {
        struct gs_zone_free z[GS_MAX_GPUS_PER_NODE];
        int nz = c ? zones_of(s, c, node, z) : gs_topo_zones(node, NULL, NULL, z, GS_MAX_GPUS_PER_NODE);
        struct gs_zone_need need = {d->cpu_milli, d->mem_bytes, d->gpu_count, d->gpu_milli, d->gpu_mem_mib};
        int k = nz > 0 ? gs_topo_best_zone(node, z, nz, &need) : -1;
        if (k >= 0) allowed = z[k].gpus;
    }
    struct gs_gpu_choice ch;
    if (!gs_topo_choose(node, d->gpu_count, d->gpu_milli, d->gpu_mem_mib, allowed, &ch) &&
        !gs_topo_choose(node, d->gpu_count, d->gpu_milli, d->gpu_mem_mib, ~0ULL, &ch))
        return (struct gs_status){0}; /* leave the choice to the next plugin */
    a->gpu_mask = ch.mask;
    return (struct gs_status){0};
}

const struct gs_plugin gs_plugin_node_resource_topology = {
    .name = "NodeResourceTopology",
    .init = nrt_init,
    .fini = nrt_fini,
    .pre_filter = nrt_pre_filter,
    .filter = nrt_filter,
    .reason = nrt_reason,
    .pre_score = nrt_pre_score,
    .pre_score_idx = nrt_pre_score_idx,
    .score = nrt_score,
    .score_idx = nrt_score_idx,
    /* Filter and Score read the GPU slots, the node's NodeResourceTopology
     * (by identity) and, for a node with one, its zones' usage this cycle:
     * all in the class, since an NRT names one node and is attached to it
     * alone, so such a node's class is itself. */
    .by_class = gs_plugin_by_class_always,
    .reserve = nrt_reserve,
};
