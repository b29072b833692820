/*
 * topology_core.c - NUMA zones, NVLink islands and GPU set choice; see
 * topology_core.h.
 *
 * Everything works on bit masks of GPU indices (nodes have at most 64), so a
 * choice inside a node is a handful of popcounts: the islands are computed
 * from the peer masks by a flood fill, zones by grouping GPUs on their NUMA
 * node. CPU and memory per zone are known only from a NodeResourceTopology;
 * without one a zone is its GPUs alone, which is what the GPU choice needs.
 *
 * The choice keeps the strongest interconnect first (one NVLink island, then
 * one NUMA node, then anything) and, inside a level, packs: the group with
 * the fewest fitting GPUs wins, so a 2-GPU pod lands in the island that is
 * already partly used and the last wholly free island stays whole for the
 * next 4-GPU pod.
 */
#include "sched/topology_core.h"

#include "core/quantity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int popc(uint64_t m) { return __builtin_popcountll(m); }

/*--- NodeResourceTopology ---*/

static const char *const policy_names[] = {"none", "best-effort", "restricted", "single-numa-node"};

const char *gs_tm_policy_name(enum gs_tm_policy p)
{
    return (unsigned)p < 4 ? policy_names[p] : "none";
}

bool gs_tm_policy_parse(const char *s, enum gs_tm_policy *out)
{
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, policy_names[i])) {
            *out = (enum gs_tm_policy)i;
            return true;
        }
    return false;
}

/* Legacy topologyPolicies values ("SingleNUMANodePodLevel"). */
static void legacy_policy(const char *v, struct gs_nrt *o)
{
    if (!v) return;
    o->has_policy = true;
    o->scope = strstr(v, "PodLevel") ? GS_TM_SCOPE_POD : GS_TM_SCOPE_CONTAINER;
    if (!strncmp(v, "SingleNUMANode", 14)) o->policy = GS_TM_SINGLE_NUMA;
    else if (!strncmp(v, "Restricted", 10)) o->policy = GS_TM_RESTRICTED;
    else if (!strncmp(v, "BestEffort", 10)) o->policy = GS_TM_BEST_EFFORT;
    else o->policy = GS_TM_NONE;
}

static int parse_attributes(const json_t *attrs, struct gs_nrt *o, struct gs_diags *d)
{
    size_t i;
    const json_t *a;
    int err = 0;
    json_array_foreach(attrs, i, a) {
        const char *name = json_string_value(json_object_get(a, "name"));
        const char *val = json_string_value(json_object_get(a, "value"));
        if (!name || !val) continue;
        if (!strcmp(name, "topologyManagerPolicy")) {
            o->has_policy = true;
            if (!gs_tm_policy_parse(val, &o->policy)) {
                char p[64];
                snprintf(p, sizeof p, "attributes[%zu].value", i);
                gs_diags_add(d, p, "unknown topologyManagerPolicy \"%s\" (want none, best-effort, restricted or single-numa-node)", val);
                err = GS_EINVAL;
            }
        } else if (!strcmp(name, "topologyManagerScope")) {
            o->scope = !strcmp(val, "pod") ? GS_TM_SCOPE_POD : GS_TM_SCOPE_CONTAINER;
        }
    }
    return err;
}

static int parse_zone(const json_t *z, size_t zi, struct gs_nrt_zone *out, struct gs_diags *d)
{
    const char *name = json_string_value(json_object_get(z, "name"));
    out->numa = (int32_t)zi;
    if (name && !strncmp(name, "node-", 5)) out->numa = atoi(name + 5);
    size_t i;
    const json_t *r;
    json_array_foreach(json_object_get(z, "resources"), i, r) {
        const char *rn = json_string_value(json_object_get(r, "name"));
        const json_t *q = json_object_get(r, "allocatable");
        if (!q) q = json_object_get(r, "capacity");
        char buf[64];
        const char *txt = json_string_value(q);
        if (json_is_integer(q)) snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(q)), txt = buf;
        int64_t milli = 0;
        const char *why = NULL;
        if (!rn || !txt) continue;
        if (gs_quantity_parse(txt, &milli, &why) != 0) {
            char p[96];
            snprintf(p, sizeof p, "zones[%zu].resources[%zu].allocatable", zi, i);
            gs_diags_add(d, p, "\"%s\": %s", txt, why ? why : "not a quantity");
            return GS_EINVAL;
        }
        if (!strcmp(rn, GS_RES_CPU)) out->cpu_milli = milli;
        else if (!strcmp(rn, GS_RES_MEMORY)) out->mem_bytes = milli / 1000;
        else if (!strcmp(rn, GS_RES_GPU)) out->gpus = (int32_t)(milli / 1000);
    }
    return 0;
}

int gs_nrt_parse(const json_t *doc, struct gs_nrt *o, struct gs_diags *d)
{
    memset(o, 0, sizeof *o);
    const char *name = json_string_value(json_object_get(json_object_get(doc, "metadata"), "name"));
    if (!name) {
        gs_diags_add(d, "metadata.name", "required (the node's name)");
        return GS_EINVAL;
    }
    if (!(o->node = strdup(name))) return GS_ENOMEM;
    int err = 0;
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(doc, "topologyPolicies"), i, v) legacy_policy(json_string_value(v), o);
    err |= parse_attributes(json_object_get(doc, "attributes"), o, d);
    json_array_foreach(json_object_get(doc, "zones"), i, v) {
        const char *type = json_string_value(json_object_get(v, "type"));
        if (type && strcmp(type, "Node")) continue;
        if (o->nzones == GS_NRT_MAX_ZONES) {
            gs_diags_add(d, "zones", "more than %d NUMA zones", GS_NRT_MAX_ZONES);
            err = GS_EINVAL;
            break;
        }
        err |= parse_zone(v, i, &o->zones[o->nzones++], d);
    }
    if (err) gs_nrt_clear(o);
    return err ? GS_EINVAL : 0;
}

void gs_nrt_clear(struct gs_nrt *n)
{
    free(n->node);
    memset(n, 0, sizeof *n);
}

/*--- Zones ---*/

static int zone_index(struct gs_zone_free *z, int nz, int32_t numa)
{
    for (int i = 0; i < nz; i++)
        if (z[i].numa == numa) return i;
    return -1;
}

int gs_topo_zones(const struct gs_node_info *n, const int64_t *used_cpu, const int64_t *used_mem,
                  struct gs_zone_free *out, int max)
{
    int nz = 0;
    if (n->nrt) {
        for (int i = 0; i < n->nrt->nzones && nz < max; i++, nz++) {
            const struct gs_nrt_zone *z = &n->nrt->zones[i];
            out[nz] = (struct gs_zone_free){z->numa, true, z->cpu_milli - (used_cpu ? used_cpu[i] : 0),
                                            z->mem_bytes - (used_mem ? used_mem[i] : 0), 0};
        }
    }
    for (int32_t g = 0; g < n->ngpus; g++) {
        int32_t numa = n->gpus[g].numa_node;
        if (numa < 0) continue;
        int k = zone_index(out, nz, numa);
        if (k < 0 && nz < max) out[k = nz++] = (struct gs_zone_free){numa, false, 0, 0, 0};
        if (k >= 0) out[k].gpus |= 1ULL << g;
    }
    return nz;
}

int gs_topo_zone_of(const struct gs_zone_free *z, int nz, uint64_t mask)
{
    for (int i = 0; i < nz && mask; i++)
        if ((z[i].gpus & mask) == mask) return i;
    return -1;
}

static bool zone_holds(const struct gs_node_info *n, const struct gs_zone_free *z, const struct gs_zone_need *need,
                       bool total, int zi)
{
    if (z->cpu_known) {
        int64_t cpu = total ? n->nrt->zones[zi].cpu_milli : z->cpu_free;
        int64_t mem = total ? n->nrt->zones[zi].mem_bytes : z->mem_free;
        if (need->cpu > cpu || (need->mem > 0 && mem > 0 && need->mem > mem)) return false;
    }
    if (need->gpus <= 0) return true;
    uint64_t fit = total ? z->gpus : (z->gpus & gs_topo_fit_mask(n, need->milli, need->gpu_mem));
    return popc(fit) >= need->gpus;
}

int gs_topo_zones_needed(const struct gs_node_info *n, const struct gs_zone_free *z, int nz,
                         const struct gs_zone_need *need, bool total)
{
    if (need->cpu <= 0 && need->mem <= 0 && need->gpus <= 0) return 0;
    for (int i = 0; i < nz; i++)
        if (zone_holds(n, &z[i], need, total, i)) return 1;
    /* Several zones: add the largest ones (by fitting GPUs, then CPU) until the need is met. */
    bool used[GS_NRT_MAX_ZONES * 4] = {0};
    int64_t cpu = 0, gpus = 0;
    uint64_t fitmask = total ? ~0ULL : gs_topo_fit_mask(n, need->milli, need->gpu_mem);
    for (int k = 1; k <= nz; k++) {
        int best = -1;
        int64_t bg = -1, bc = -1;
        for (int i = 0; i < nz; i++) {
            if (used[i]) continue;
            int64_t g = popc(z[i].gpus & fitmask);
            int64_t c = z[i].cpu_known ? (total ? n->nrt->zones[i].cpu_milli : z[i].cpu_free) : 0;
            if (g > bg || (g == bg && c > bc)) best = i, bg = g, bc = c;
        }
        used[best] = true;
        gpus += bg;
        cpu += bc;
        bool cpu_ok = !z[0].cpu_known || cpu >= need->cpu;
        if (gpus >= need->gpus && cpu_ok) return k;
    }
    return -1;
}

int gs_topo_best_zone(const struct gs_node_info *n, const struct gs_zone_free *z, int nz,
                      const struct gs_zone_need *need)
{
    int best = -1, best_left = 1 << 30;
    for (int i = 0; i < nz; i++) {
        if (!zone_holds(n, &z[i], need, false, i)) continue;
        int left = popc(z[i].gpus & gs_topo_fit_mask(n, need->milli, need->gpu_mem)) - need->gpus;
        if (left < best_left) best = i, best_left = left;
    }
    return best;
}

static void container_need(const struct gs_pod *pod, const struct gs_container *c, struct gs_zone_need *need)
{
    int64_t g = gs_resources_get(&c->limits, GS_RES_GPU);
    if (!g) g = gs_resources_get(&c->requests, GS_RES_GPU);
    *need = (struct gs_zone_need){gs_resources_get(&c->requests, GS_RES_CPU),
                                  gs_resources_get(&c->requests, GS_RES_MEMORY) / 1000, (int32_t)(g / 1000),
                                  pod->demand.gpu_milli, pod->demand.gpu_mem_mib};
}

static void pod_need(const struct gs_pod *pod, struct gs_zone_need *need)
{
    *need = (struct gs_zone_need){pod->demand.cpu_milli, pod->demand.mem_bytes, pod->demand.gpu_count,
                                  pod->demand.gpu_milli, pod->demand.gpu_mem_mib};
}

/* Container scope under single-numa-node: each container in one zone, zones
 * filled greedily (best fit) as containers are placed. */
static bool admit_containers(const struct gs_node_info *n, const struct gs_pod *pod, const struct gs_zone_free *z0,
                             int nz)
{
    struct gs_zone_free z[GS_NRT_MAX_ZONES * 4];
    memcpy(z, z0, (size_t)nz * sizeof *z);
    if (pod->ncontainers == 0) {
        struct gs_zone_need need;
        pod_need(pod, &need);
        return gs_topo_zones_needed(n, z, nz, &need, false) <= 1;
    }
    for (size_t i = 0; i < pod->ncontainers; i++) {
        struct gs_zone_need need;
        container_need(pod, &pod->containers[i], &need);
        if (need.cpu <= 0 && need.mem <= 0 && need.gpus <= 0) continue;
        int k = gs_topo_best_zone(n, z, nz, &need);
        if (k < 0) return false;
        z[k].cpu_free -= need.cpu;
        z[k].mem_free -= need.mem;
        uint64_t fit = z[k].gpus & gs_topo_fit_mask(n, need.milli, need.gpu_mem);
        for (int32_t t = 0; t < need.gpus && fit; t++) {
            uint64_t low = fit & -fit;
            z[k].gpus &= ~low; /* taken by this container */
            fit &= fit - 1;
        }
    }
    return true;
}

bool gs_topo_admit(const struct gs_node_info *n, const struct gs_pod *pod, enum gs_tm_policy policy,
                   enum gs_tm_scope scope, const struct gs_zone_free *z, int nz)
{
    if (policy == GS_TM_NONE || policy == GS_TM_BEST_EFFORT || nz == 0) return true;
    if (policy == GS_TM_SINGLE_NUMA && scope == GS_TM_SCOPE_CONTAINER) return admit_containers(n, pod, z, nz);
    struct gs_zone_need need;
    pod_need(pod, &need);
    int now = gs_topo_zones_needed(n, z, nz, &need, false);
    if (policy == GS_TM_SINGLE_NUMA) return now >= 0 && now <= 1;
    /* restricted: only the narrowest alignment the node could ever give is acceptable. */
    int best = gs_topo_zones_needed(n, z, nz, &need, true);
    return now >= 0 && (best < 0 || now <= best);
}

/*--- Islands and the GPU choice ---*/

int gs_topo_islands_fresh(const struct gs_node_info *n, uint64_t *islands, int max)
{
    uint64_t seen = 0;
    int k = 0;
    for (int32_t g = 0; g < n->ngpus && k < max; g++) {
        if (seen & (1ULL << g)) continue;
        uint64_t isl = 1ULL << g, frontier = isl;
        while (frontier) {
            int h = __builtin_ctzll(frontier);
            frontier &= frontier - 1;
            uint64_t peers = n->gpus[h].nvlink;
            for (int32_t j = 0; j < n->ngpus; j++) /* links may be listed on one side only */
                if (n->gpus[j].nvlink & (1ULL << h)) peers |= 1ULL << j;
            if (n->ngpus < 64) peers &= (1ULL << n->ngpus) - 1;
            frontier |= peers & ~isl;
            isl |= peers;
        }
        seen |= isl;
        islands[k++] = isl;
    }
    return k;
}

/*
 * Every GPU's stored island is its connected component, the same whichever
 * GPU a flood fill starts from; walking GPUs upwards and emitting the island
 * of each one not yet seen therefore gives exactly the fresh computation's
 * masks in its order, in O(ngpus) instead of O(ngpus^2) per call. A GPU
 * whose stored island lacks its own bit was never derived (a record the
 * cache did not build): compute instead.
 */
int gs_topo_islands(const struct gs_node_info *n, uint64_t *islands, int max)
{
    uint64_t seen = 0;
    int k = 0;
    for (int32_t g = 0; g < n->ngpus && k < max; g++) {
        if (seen & (1ULL << g)) continue;
        uint64_t isl = n->gpus[g].island;
        if (!(isl & (1ULL << g))) return gs_topo_islands_fresh(n, islands, max);
        seen |= isl;
        islands[k++] = isl;
    }
    return k;
}

void gs_topo_memo_islands(struct gs_node_info *n)
{
    uint64_t isl[GS_MAX_GPUS_PER_NODE];
    for (int32_t g = 0; g < n->ngpus; g++) n->gpus[g].island = 0; /* not derived: the fresh path below */
    int k = gs_topo_islands_fresh(n, isl, GS_MAX_GPUS_PER_NODE);
    for (int i = 0; i < k; i++)
        for (uint64_t m = isl[i]; m; m &= m - 1) n->gpus[__builtin_ctzll(m)].island = isl[i];
}

uint64_t gs_topo_fit_mask(const struct gs_node_info *n, int32_t milli, int64_t mem_mib)
{
    uint64_t m = 0;
    for (int32_t g = 0; g < n->ngpus; g++) {
        const struct gs_gpu_slot *s = &n->gpus[g];
        if (s->healthy && s->milli_free >= milli && (mem_mib <= 0 || s->mem_free_mib >= mem_mib)) m |= 1ULL << g;
    }
    return m;
}

int32_t gs_topo_largest_free_island(const struct gs_node_info *n, int32_t milli, int64_t mem_mib)
{
    uint64_t isl[GS_MAX_GPUS_PER_NODE];
    int k = gs_topo_islands(n, isl, GS_MAX_GPUS_PER_NODE);
    uint64_t fit = gs_topo_fit_mask(n, milli, mem_mib);
    int32_t best = 0;
    for (int i = 0; i < k; i++)
        if (popc(isl[i] & fit) > best) best = popc(isl[i] & fit);
    return best;
}

/* count GPUs of group, least free share first (then lowest index). */
static uint64_t take(const struct gs_node_info *n, uint64_t group, int32_t count)
{
    uint64_t out = 0;
    for (int32_t t = 0; t < count; t++) {
        int best = -1;
        for (uint64_t m = group & ~out; m; m &= m - 1) {
            int g = __builtin_ctzll(m);
            if (best < 0 || n->gpus[g].milli_free < n->gpus[best].milli_free) best = g;
        }
        if (best < 0) return 0;
        out |= 1ULL << best;
    }
    return out;
}

static bool wholly_free(const struct gs_node_info *n, uint64_t group)
{
    for (uint64_t m = group; m; m &= m - 1) {
        const struct gs_gpu_slot *s = &n->gpus[__builtin_ctzll(m)];
        if (!s->healthy || s->npods) return false;
    }
    return true;
}

/* Among groups, the one to take count GPUs from (-1 when none holds them). */
static int pick_group(const struct gs_node_info *n, const uint64_t *groups, int k, uint64_t fit, int32_t count)
{
    int whole = 0;
    for (int i = 0; i < k; i++) whole += popc(groups[i]) > 1 && wholly_free(n, groups[i]) && popc(groups[i] & fit) >= count;
    int best = -1, best_split = 0, best_free = 0;
    for (int i = 0; i < k; i++) {
        int f = popc(groups[i] & fit);
        if (f < count) continue;
        /* Splitting the last whole island is a last resort within the level. */
        int split = whole == 1 && popc(groups[i]) > count && popc(groups[i]) > 1 && wholly_free(n, groups[i]);
        if (best < 0 || split < best_split || (split == best_split && f < best_free))
            best = i, best_split = split, best_free = f;
    }
    return best;
}

bool gs_topo_choose(const struct gs_node_info *n, int32_t count, int32_t milli, int64_t mem_mib, uint64_t allowed,
                    struct gs_gpu_choice *out)
{
    memset(out, 0, sizeof *out);
    uint64_t fit = gs_topo_fit_mask(n, milli, mem_mib) & allowed;
    if (count <= 0) return true;
    if (popc(fit) < count) return false;
    uint64_t groups[GS_MAX_GPUS_PER_NODE];
    int k = gs_topo_islands(n, groups, GS_MAX_GPUS_PER_NODE);
    int g = pick_group(n, groups, k, fit, count);
    if (g >= 0) {
        *out = (struct gs_gpu_choice){take(n, groups[g] & fit, count), GS_LINK_NVLINK, popc(groups[g] & fit)};
        return true;
    }
    struct gs_zone_free z[GS_MAX_GPUS_PER_NODE];
    int nz = gs_topo_zones(n, NULL, NULL, z, GS_MAX_GPUS_PER_NODE);
    for (int i = 0; i < nz; i++) groups[i] = z[i].gpus;
    g = pick_group(n, groups, nz, fit, count);
    if (g >= 0) {
        *out = (struct gs_gpu_choice){take(n, groups[g] & fit, count), GS_LINK_NUMA, popc(groups[g] & fit)};
        return true;
    }
    *out = (struct gs_gpu_choice){take(n, fit, count), GS_LINK_ANY, popc(fit)};
    return true;
}

int64_t gs_topo_compactness(const struct gs_node_info *n, int32_t count, int32_t milli, int64_t mem_mib)
{
    struct gs_gpu_choice c;
    if (count <= 0 || !gs_topo_choose(n, count, milli, mem_mib, ~0ULL, &c)) return 0;
    return (int64_t)(c.level - 1) * 40 + 20 * count / (c.group_free > 0 ? c.group_free : 1);
}

/*--- Compactness memo ---*/

struct memo_kind {
    int32_t count, milli;
    int64_t mem_mib;
    uint64_t last_used; /* 0: free */
};

struct gs_topo_memo {
    const struct gs_cache *cache; /* the cache the rows describe */
    uint64_t epoch;
    bool have_epoch;
    int32_t cap;      /* rows */
    uint64_t *gen;    /* per row: generation + 1 of the node the row holds, 0 none */
    int8_t *score;    /* cap x GS_TOPO_MEMO_KINDS, -1 unknown */
    struct memo_kind kinds[GS_TOPO_MEMO_KINDS];
    int kind;         /* selected kind, -1 when not memoised */
    int32_t count, milli;
    int64_t mem_mib;  /* the selected request */
    uint64_t tick, hits, misses;
};

struct gs_topo_memo *gs_topo_memo_new(void)
{
    struct gs_topo_memo *m = calloc(1, sizeof *m);
    if (m) m->kind = -1;
    return m;
}

void gs_topo_memo_free(struct gs_topo_memo *m)
{
    if (!m) return;
    free(m->gen);
    free(m->score);
    free(m);
}

static int memo_fit(struct gs_topo_memo *m, int32_t rows)
{
    if (rows <= m->cap) return 0;
    int32_t cap = m->cap ? m->cap : 64;
    while (cap < rows) cap *= 2;
    uint64_t *gen = realloc(m->gen, (size_t)cap * sizeof *gen);
    if (gen) m->gen = gen;
    int8_t *score = realloc(m->score, (size_t)cap * GS_TOPO_MEMO_KINDS);
    if (score) m->score = score;
    if (!gen || !score) return GS_ENOMEM;
    memset(m->gen + m->cap, 0, (size_t)(cap - m->cap) * sizeof *gen);
    m->cap = cap;
    return 0;
}

int gs_topo_memo_select(struct gs_topo_memo *m, const struct gs_cache *c, int32_t count, int32_t milli,
                        int64_t mem_mib)
{
    m->count = count, m->milli = milli, m->mem_mib = mem_mib;
    m->kind = -1;
    uint64_t epoch = gs_cache_epoch(c);
    if (!m->have_epoch || epoch != m->epoch || c != m->cache) { /* nodes may have moved between slots */
        if (m->cap) memset(m->gen, 0, (size_t)m->cap * sizeof *m->gen);
        m->epoch = epoch, m->have_epoch = true, m->cache = c;
    }
    if (memo_fit(m, gs_cache_node_count(c)) != 0) return GS_ENOMEM;
    int k = -1, lru = 0;
    for (int i = 0; i < GS_TOPO_MEMO_KINDS && k < 0; i++) {
        const struct memo_kind *e = &m->kinds[i];
        if (e->last_used && e->count == count && e->milli == milli && e->mem_mib == mem_mib) k = i;
        else if (e->last_used < m->kinds[lru].last_used) lru = i;
    }
    if (k < 0) { /* a new request takes the least recently used column */
        k = lru;
        m->kinds[k] = (struct memo_kind){count, milli, mem_mib, 0};
        for (int32_t r = 0; r < m->cap; r++) m->score[(size_t)r * GS_TOPO_MEMO_KINDS + (size_t)k] = -1;
    }
    m->kinds[k].last_used = ++m->tick;
    m->kind = k;
    return 0;
}

int64_t gs_topo_memo_compactness(struct gs_topo_memo *m, const struct gs_node_info *n)
{
    if (m->kind < 0 || n->idx < 0 || n->idx >= m->cap) {
        m->misses++;
        return gs_topo_compactness(n, m->count, m->milli, m->mem_mib);
    }
    size_t row = (size_t)n->idx;
    int8_t *s = m->score + row * GS_TOPO_MEMO_KINDS;
    if (m->gen[row] != n->generation + 1) {
        m->gen[row] = n->generation + 1;
        memset(s, -1, GS_TOPO_MEMO_KINDS);
    }
    if (s[m->kind] >= 0) {
        m->hits++;
        return s[m->kind];
    }
    m->misses++;
    int64_t v = gs_topo_compactness(n, m->count, m->milli, m->mem_mib);
    s[m->kind] = (int8_t)v; /* 0..100 */
    return v;
}

void gs_topo_memo_stats(const struct gs_topo_memo *m, uint64_t *hits, uint64_t *misses)
{
    *hits = m->hits;
    *misses = m->misses;
}

const char *gs_topo_domain(const struct gs_node_info *n, const char *key)
{
    return key ? gs_labels_get(n->labels, key) : NULL;
}
