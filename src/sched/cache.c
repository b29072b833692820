/*
 * cache.c - the scheduler's cluster view: node aggregates and pod placements.
 *
 * Nodes are individually allocated records reached through a slot array, so
 * a struct gs_node_info pointer stays valid for as long as the node exists
 * even when the array grows; a removed node's slot becomes a tombstone that
 * the next add reuses. Names map to slots through a hash table.
 *
 * Pods are records keyed by "namespace/name" in a hash table; each holds the
 * pod (borrowed), its assignment and whether it is only assumed. Assumed pods
 * with a deadline also sit in a small array, so gs_cache_expire() looks at
 * those alone instead of every pod in the cluster.
 *
 * Every placement change goes through apply(), which adds or subtracts one
 * pod's demand and recomputes the node's GPU aggregates; gs_cache_check()
 * recomputes all of it from the pod records to prove the incremental path.
 *
 * Alongside the records, a dense array of struct gs_node_hot (one 64-byte
 * line per slot) mirrors the fields Filter and Score passes read. Every path
 * that changes a node ends in sync_node(), which recomputes the GPU
 * aggregates and rewrites the node's hot record, so the two never disagree.
 * It also updates a min-tree over the slots (a complete binary tree in an
 * array, leaves in slot order) of free CPU, memory and pod slots, so the
 * cluster-wide minimum is known at every moment for O(log nodes) per change:
 * a demand within it fits every node, and a Filter can say so at once.
 */
#include "sched/cache.h"

#include "core/error.h"
#include "sched/strmap.h"
#include "sched/cache_dra.h" /* the DRA side */
#include "sched/nodeclass.h" /* classes of equal nodes */
#include "sched/dra_plugin.h" /* pods with claims */
#include "sched/topology_core.h" /* gs_topo_memo_islands */

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum pod_state { POD_ASSUMED, POD_BOUND };

struct minfree {
    int64_t cpu, mem;
    int32_t pods;
};

struct pod_rec {
    char *key;
    const struct gs_pod *pod;
    struct gs_assignment a;
    enum pod_state st;
    int64_t deadline;
    size_t assumed_pos; /* index in c->assumed, or SIZE_MAX */
    size_t aff_pos;     /* index in c->aff, or SIZE_MAX (no pod affinity terms) */
};

struct node_rec {
    _Alignas(64) struct gs_node_info info; /* first: node_rec and its info share an address */
    struct gs_labels own_labels;
    struct node_rec *next_free;
    bool tainted, override; /* as counted in the cache's totals */
};

/* Node records come from chunks so a cycle's passes over the nodes walk
 * mostly contiguous memory; a removed node's record is reused. */
#define REC_CHUNK 128
struct rec_chunk {
    struct rec_chunk *next;
    int used;
    struct node_rec recs[REC_CHUNK];
};

struct gs_cache {
    const struct gs_clock *clock;
    struct gs_node_info **nodes;
    struct gs_node_hot *hot; /* slots_cap records, 64-byte aligned */
    struct minfree *mins;    /* min-tree: [1] the root, [leaves + i] slot i */
    int32_t leaves;          /* power of two >= slots_cap */
    int32_t nslots, slots_cap;
    int32_t *free_slots;
    int32_t nfree, free_cap;
    struct gs__strmap by_name;
    struct gs__strmap pods;
    char **models;
    int32_t nmodels, models_cap;
    struct pod_rec **assumed;
    size_t nassumed, assumed_cap;
    struct rec_chunk *chunks;
    struct node_rec *free_recs;
    uint64_t epoch;
    int32_t tainted, overrides;
    int32_t live;
    int64_t gpus_total;
    int64_t milli_used;
    uint64_t changes; /* every node generation bump */
    uint64_t confirms; /* gs_cache_confirm calls: see gs_cache_pod_version */
    uint64_t bound_changes; /* see gs_cache_bound_version */
    struct {
        gs_cache_bound_fn fn;
        void *ctx;
    } watch[GS_CACHE_WATCHERS]; /* gs_cache_watch_bound */
    int nwatch;
    /* Pods with pod (anti-)affinity terms, and of those with required
     * anti-affinity: InterPodAffinity skips its passes when both are none. */
    struct pod_rec **aff;
    size_t naff, aff_cap;
    int32_t nreq_anti;
    struct gs__strmap ns_labels; /* namespace -> struct gs_labels * (owned) */
    struct gs_pdb_budget **pdbs; /* owned */
    size_t npdbs, pdbs_cap;
    struct gs_cache_dra *dra; /* DRA objects and holds (cache_dra.h), created on first use */
    struct gs_nodeclasses *classes; /* nodeclass.h, created on first use; told of every node change */
};

static const struct gs_labels empty_labels;
static void gs__cache_extra_free(struct gs_cache *c);
static void tell(const struct gs_cache *c, const struct gs_pod *pod, const struct gs_assignment *a, bool added);

_Static_assert(sizeof(struct gs_node_hot) == 64, "a hot record is one cache line");

/*--- Resource lists (name -> milli) ---*/

static int64_t res_get(const struct gs_resources *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->v[i].name, name) == 0) return r->v[i].milli;
    return 0;
}

static int res_add(struct gs_resources *r, const char *name, int64_t delta)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->v[i].name, name) == 0) {
            r->v[i].milli += delta;
            return 0;
        }
    struct gs_resource *nv = realloc(r->v, (r->n + 1) * sizeof *nv);
    if (!nv) return GS_ENOMEM;
    r->v = nv;
    char *dup = strdup(name);
    if (!dup) return GS_ENOMEM;
    r->v[r->n++] = (struct gs_resource){dup, delta};
    return 0;
}

static void res_free(struct gs_resources *r)
{
    for (size_t i = 0; i < r->n; i++) free(r->v[i].name);
    free(r->v);
    r->v = NULL;
    r->n = 0;
}

static bool is_core_resource(const char *name)
{
    return strcmp(name, GS_RES_CPU) == 0 || strcmp(name, GS_RES_MEMORY) == 0 || strcmp(name, GS_RES_PODS) == 0 ||
           strcmp(name, GS_RES_GPU) == 0;
}

static const char *label_get(const struct gs_labels *l, const char *key)
{
    for (size_t i = 0; l && i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0) return l->v[i].value;
    return NULL;
}

static int labels_copy(struct gs_labels *dst, const struct gs_labels *src)
{
    dst->v = NULL;
    dst->n = 0;
    if (!src || !src->n) return 0;
    dst->v = calloc(src->n, sizeof *dst->v);
    if (!dst->v) return GS_ENOMEM;
    for (size_t i = 0; i < src->n; i++) {
        dst->v[i].key = strdup(src->v[i].key);
        dst->v[i].value = strdup(src->v[i].value ? src->v[i].value : "");
        dst->n = i + 1;
        if (!dst->v[i].key || !dst->v[i].value) return GS_ENOMEM;
    }
    return 0;
}

static void labels_release(struct gs_labels *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].value);
    }
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/*--- Lifecycle ---*/

struct gs_cache *gs_cache_new(const struct gs_clock *clock)
{
    struct gs_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->clock = clock;
    gs__strmap_init(&c->by_name);
    gs__strmap_init(&c->pods);
    return c;
}

static struct node_rec *rec_alloc(struct gs_cache *c)
{
    struct node_rec *r = c->free_recs;
    if (r) {
        c->free_recs = r->next_free;
    } else {
        if (!c->chunks || c->chunks->used == REC_CHUNK) {
            struct rec_chunk *k = aligned_alloc(64, (sizeof *k + 63) & ~(size_t)63);
            if (!k) return NULL;
            k->next = c->chunks;
            k->used = 0;
            c->chunks = k;
        }
        r = &c->chunks->recs[c->chunks->used++];
    }
    memset(r, 0, sizeof *r);
    return r;
}

static void node_release(struct gs_cache *c, struct gs_node_info *n)
{
    struct node_rec *r = (struct node_rec *)n;
    free((char *)n->name);
    free(n->gpus);
    res_free(&n->ext_alloc);
    res_free(&n->ext_used);
    labels_release(&r->own_labels);
    r->info.live = false;
    r->next_free = c->free_recs;
    c->free_recs = r;
}

/* Keeps the tainted / override counters; sign 1 counts the node in, -1 out.
 * What was counted is remembered on the record: when a node is updated the
 * old object may already be gone. */
static void count_flags(struct gs_cache *c, struct gs_node_info *n, int sign)
{
    struct node_rec *r = (struct node_rec *)n;
    if (sign < 0) {
        c->tainted -= r->tainted;
        c->overrides -= r->override;
        r->tainted = r->override = false;
        return;
    }
    r->tainted = n->node && n->node->ntaints;
    r->override = n->node && n->node->unschedulable && n->schedulable;
    c->tainted += r->tainted;
    c->overrides += r->override;
}

static void pod_rec_free(struct pod_rec *p)
{
    free(p->key);
    free(p);
}

void gs_cache_free(struct gs_cache *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->pods.cap; i++)
        if (c->pods.slots[i].key) pod_rec_free(c->pods.slots[i].val);
    for (int32_t i = 0; i < c->nslots; i++)
        if (c->nodes[i]) node_release(c, c->nodes[i]);
    while (c->chunks) {
        struct rec_chunk *k = c->chunks;
        c->chunks = k->next;
        free(k);
    }
    for (int32_t i = 0; i < c->nmodels; i++) free(c->models[i]);
    gs__strmap_free(&c->by_name);
    gs__strmap_free(&c->pods);
    gs__cache_extra_free(c);
    gs__nodeclass_free(c->classes);
    free(c->models);
    free(c->nodes);
    free(c->hot);
    free(c->mins);
    free(c->free_slots);
    free(c->assumed);
    free(c);
}

/*--- Models ---*/

int32_t gs_cache_model_id(struct gs_cache *c, const char *model)
{
    if (!model) return -1;
    for (int32_t i = 0; i < c->nmodels; i++)
        if (strcmp(c->models[i], model) == 0) return i;
    if (c->nmodels == c->models_cap) {
        int32_t cap = c->models_cap ? c->models_cap * 2 : 8;
        char **nv = realloc(c->models, (size_t)cap * sizeof *nv);
        if (!nv) return -1;
        c->models = nv;
        c->models_cap = cap;
    }
    char *dup = strdup(model);
    if (!dup) return -1;
    c->models[c->nmodels] = dup;
    return c->nmodels++;
}

const char *gs_cache_model_name(const struct gs_cache *c, int32_t id)
{
    return id >= 0 && id < c->nmodels ? c->models[id] : NULL;
}

/*--- Node aggregates ---*/

/*
 * Multiplier for floor(100 x / d), 0 <= x < 2^46 (after Granlund and
 * Montgomery): with l = ceil(log2 d), K = max(46 + l, 64) and
 * m = ceil(100 * 2^K / d), m d = 100 * 2^K + e with 0 <= e < d, so
 * x m / 2^K = 100 x / d + x e / (d 2^K), and x e < 2^(46 + l) <= 2^K keeps
 * the excess below 1/d: it cannot carry 100 x / d past the next integer.
 * m < 100 * 2^(K - l + 1) + 1 fits 64 bits once l >= 8 (d > 128).
 * K >= 64, so the quotient is the product's high word shifted by K - 64.
 */
static void pct_magic(int64_t d, uint64_t *magic, uint8_t *shift)
{
    __extension__ typedef unsigned __int128 u128;
    *magic = 0;
    *shift = 0;
    if (d <= 128) return;
    int l = 64 - __builtin_clzll((uint64_t)d - 1);
    int k = 46 + l > 64 ? 46 + l : 64;
    *magic = (uint64_t)((((u128)100 << k) + (u128)d - 1) / (u128)d);
    *shift = (uint8_t)(k - 64);
}

static const struct minfree no_node = {INT64_MAX, INT64_MAX, INT32_MAX};

static struct minfree minfree_of(const struct gs_node_hot *h)
{
    return h->live ? (struct minfree){h->cpu_free, h->mem_free, h->pods_free} : no_node;
}

static struct minfree minfree_meet(struct minfree a, struct minfree b)
{
    return (struct minfree){a.cpu < b.cpu ? a.cpu : b.cpu, a.mem < b.mem ? a.mem : b.mem,
                            a.pods < b.pods ? a.pods : b.pods};
}

/* Slot i's leaf from its hot record, then every ancestor. */
static void mins_update(struct gs_cache *c, int32_t i)
{
    int32_t k = c->leaves + i;
    c->mins[k] = minfree_of(&c->hot[i]);
    for (k >>= 1; k >= 1; k >>= 1) c->mins[k] = minfree_meet(c->mins[2 * k], c->mins[2 * k + 1]);
}

/* Rebuilds the tree for cap slots (the hot array already holds cap). */
static int mins_build(struct gs_cache *c, int32_t cap)
{
    int32_t leaves = 1;
    while (leaves < cap) leaves <<= 1;
    struct minfree *m = malloc(2 * (size_t)leaves * sizeof *m);
    if (!m) return GS_ENOMEM;
    for (int32_t i = 0; i < leaves; i++) m[leaves + i] = i < c->nslots ? minfree_of(&c->hot[i]) : no_node;
    for (int32_t k = leaves - 1; k >= 1; k--) m[k] = minfree_meet(m[2 * k], m[2 * k + 1]);
    m[0] = no_node;
    free(c->mins);
    c->mins = m;
    c->leaves = leaves;
    return 0;
}

/* Recomputes the node's GPU aggregates and rewrites its hot record. */
static void sync_node(struct gs_cache *c, struct gs_node_info *n)
{
    int32_t milli = 0, whole = 0, max = -1, unhealthy = 0;
    for (int32_t g = 0; g < n->ngpus; g++) {
        const struct gs_gpu_slot *s = &n->gpus[g];
        if (!s->healthy) {
            unhealthy++;
            continue;
        }
        milli += s->milli_free;
        whole += s->milli_free == GS_GPU_MILLI;
        if (s->milli_free > max) max = s->milli_free;
    }
    n->gpu_milli_free = milli;
    n->gpus_whole_free = whole;
    struct gs_node_hot *h = &c->hot[n->idx];
    *h = (struct gs_node_hot){
        .cpu_free = n->cpu_alloc - n->cpu_used,
        .mem_free = n->mem_alloc - n->mem_used,
        .cpu_alloc = n->cpu_alloc,
        .mem_alloc = n->mem_alloc,
        .pods_free = n->pods_alloc > 0 ? n->pods_alloc - n->pods_used : INT32_MAX,
        .gpu_model = n->gpu_model,
        .ngpus = (int8_t)n->ngpus,
        .gpus_whole_free = (uint8_t)whole,
        .gpu_milli_max = (int16_t)(max > INT16_MAX ? INT16_MAX : max),
        .gpus_unhealthy = (uint8_t)unhealthy,
        .live = n->live,
    };
    pct_magic(n->cpu_alloc, &h->cpu_pct, &h->cpu_pct_shift);
    pct_magic(n->mem_alloc, &h->mem_pct, &h->mem_pct_shift);
    mins_update(c, n->idx);
    gs__nodeclass_mark(c->classes, n->idx);
}

static int popcount64(uint64_t m) { return __builtin_popcountll(m); }

/* Adds (sign 1) or removes (sign -1) one pod's demand on its node. */
static void apply(struct gs_cache *c, struct gs_node_info *n, const struct gs_pod *pod, const struct gs_assignment *a,
                  int sign)
{
    const struct gs_demand *d = &pod->demand;
    n->cpu_used += sign * d->cpu_milli;
    n->mem_used += sign * d->mem_bytes;
    n->pods_used += sign;
    n->npods += sign;
    for (size_t i = 0; i < d->extended.n; i++)
        (void)res_add(&n->ext_used, d->extended.v[i].name, sign * d->extended.v[i].milli);
    uint64_t m = a->gpu_mask;
    while (m) {
        int g = __builtin_ctzll(m);
        m &= m - 1;
        if (g >= n->ngpus) continue;
        n->gpus[g].milli_free -= sign * a->milli;
        n->gpus[g].mem_free_mib -= sign * a->mem_mib;
        n->gpus[g].npods += sign;
        c->milli_used += sign * a->milli;
    }
    sync_node(c, n);
    n->generation++;
    c->changes++;
}

/* Grows the slot and hot arrays and the min-tree to cap entries. */
static int grow_slots(struct gs_cache *c, int32_t cap)
{
    struct gs_node_info **nv = realloc(c->nodes, (size_t)cap * sizeof *nv);
    if (!nv) return GS_ENOMEM;
    c->nodes = nv;
    struct gs_node_hot *hv = aligned_alloc(64, (size_t)cap * sizeof *hv);
    if (!hv) return GS_ENOMEM;
    if (c->nslots) memcpy(hv, c->hot, (size_t)c->nslots * sizeof *hv);
    struct gs_node_hot *old = c->hot;
    c->hot = hv;
    if (mins_build(c, cap) != 0) {
        c->hot = old;
        free(hv);
        return GS_ENOMEM;
    }
    free(old);
    c->slots_cap = cap;
    return 0;
}

static int node_slot(struct gs_cache *c)
{
    if (c->nfree) return c->free_slots[--c->nfree];
    if (c->nslots == c->slots_cap && grow_slots(c, c->slots_cap ? c->slots_cap * 2 : 64) != 0) return GS_ENOMEM;
    c->nodes[c->nslots] = NULL;
    memset(&c->hot[c->nslots], 0, sizeof c->hot[0]);
    mins_update(c, c->nslots);
    return c->nslots++;
}

static void gpu_slots_blank(struct gs_gpu_slot *s, int32_t n, int64_t mem_mib)
{
    for (int32_t g = 0; g < n; g++)
        s[g] = (struct gs_gpu_slot){GS_GPU_MILLI, 0, mem_mib, mem_mib, -1, 0, true, 0};
}

/*--- MIG single strategy ---
 * nvidia.com/gpu then counts MIG devices (src/govern/validators.c,
 * gs_stack_resources), so each instance is offered as one more GPU slot past
 * the physical ones, in GPU order then instance order. gpusched.io/devices
 * names such a slot by its number (the node has no GPU of that index) and the
 * node agent turns each into a free MIG instance (src/agent/agent_mig.c).
 * Only on nodes labelled nvidia.com/mig.strategy=single whose allocatable
 * says so: a gated node (allocatable 0) or a layout the strategy rejects
 * advertises no MIG devices and gets no slots. */
static int32_t single_mig_slots(const struct gs_node *node)
{
    const char *st = label_get(&node->meta.labels, "nvidia.com/mig.strategy");
    if (!st || strcmp(st, "single")) return 0;
    int64_t whole = 0, inst = 0;
    for (size_t g = 0; g < node->ngpus; g++) {
        if (node->gpus[g].mig_enabled) inst += (int64_t)node->gpus[g].nmig;
        else whole++;
    }
    int64_t extra = res_get(&node->allocatable, GS_RES_GPU) / 1000 - whole;
    return extra <= 0 ? 0 : (int32_t)(extra < inst ? extra : inst);
}

static void single_mig_fill(struct gs_node_info *n, const struct gs_node *node)
{
    int32_t s = (int32_t)node->ngpus;
    for (size_t g = 0; g < node->ngpus && s < n->ngpus; g++) {
        const struct gs_gpu *src = &node->gpus[g];
        for (size_t k = 0; src->mig_enabled && k < src->nmig && s < n->ngpus; k++, s++) {
            const char *dot = src->mig[k].profile ? strchr(src->mig[k].profile, '.') : NULL;
            int64_t mib = dot ? (int64_t)atoi(dot + 1) * 1024 : src->memory_mib / (int64_t)src->nmig;
            n->gpus[s].mem_total_mib = n->gpus[s].mem_free_mib = mib;
            n->gpus[s].numa_node = src->numa_node;
            n->gpus[s].healthy = src->healthy;
        }
    }
}

/* Fills the static part of a node record from an object. */
static int describe_from_object(struct gs_cache *c, struct node_rec *r, const struct gs_node *node)
{
    struct gs_node_info *n = &r->info;
    const struct gs_resources *al = &node->allocatable;
    n->node = node;
    n->labels = &node->meta.labels;
    n->schedulable = !node->unschedulable;
    n->cpu_alloc = res_get(al, GS_RES_CPU);
    n->mem_alloc = res_get(al, GS_RES_MEMORY) / 1000;
    n->pods_alloc = (int32_t)(res_get(al, GS_RES_PODS) / 1000);
    int64_t count = node->ngpus ? (int64_t)node->ngpus : res_get(al, GS_RES_GPU) / 1000;
    count += single_mig_slots(node); /* MIG single strategy: one slot per instance */
    if (count > GS_MAX_GPUS_PER_NODE) count = GS_MAX_GPUS_PER_NODE;
    n->ngpus = (int32_t)count;
    n->gpus = count ? calloc((size_t)count, sizeof *n->gpus) : NULL;
    if (count && !n->gpus) return GS_ENOMEM;
    gpu_slots_blank(n->gpus, n->ngpus, 0);
    for (int32_t g = 0; g < n->ngpus && (size_t)g < node->ngpus; g++) {
        const struct gs_gpu *src = &node->gpus[g];
        n->gpus[g].mem_total_mib = n->gpus[g].mem_free_mib = src->memory_mib;
        n->gpus[g].numa_node = src->numa_node;
        n->gpus[g].nvlink = src->nvlink_peers;
        /* A MIG-enabled GPU is offered only as its MIG devices (extended resources nvidia.com/mig-*). */
        n->gpus[g].healthy = src->healthy && !src->mig_enabled;
    }
    single_mig_fill(n, node); /* MIG single strategy */
    const char *model = node->ngpus && node->gpus[0].model ? node->gpus[0].model : NULL;
    if (!model) model = label_get(&node->meta.labels, GS_LABEL_GPU_PRODUCT);
    n->gpu_model = n->ngpus ? gs_cache_model_id(c, model) : -1;
    for (size_t i = 0; i < al->n; i++)
        if (!is_core_resource(al->v[i].name) && res_add(&n->ext_alloc, al->v[i].name, al->v[i].milli) != 0)
            return GS_ENOMEM;
    gs_topo_memo_islands(n); /* ngpus and nvlink are final: the islands follow from them alone */
    return 0;
}

static int describe_from_spec(struct gs_cache *c, struct node_rec *r, const struct gs_node_spec *s)
{
    struct gs_node_info *n = &r->info;
    if (labels_copy(&r->own_labels, s->labels) != 0) return GS_ENOMEM;
    n->labels = &r->own_labels;
    n->schedulable = true;
    n->cpu_alloc = s->cpu_milli;
    n->mem_alloc = s->mem_bytes;
    n->pods_alloc = s->pods;
    n->ngpus = s->ngpus > GS_MAX_GPUS_PER_NODE ? GS_MAX_GPUS_PER_NODE : (s->ngpus < 0 ? 0 : s->ngpus);
    n->gpus = n->ngpus ? calloc((size_t)n->ngpus, sizeof *n->gpus) : NULL;
    if (n->ngpus && !n->gpus) return GS_ENOMEM;
    gpu_slots_blank(n->gpus, n->ngpus, s->gpu_mem_mib);
    for (int32_t g = 0; g < n->ngpus; g++) {
        if (s->gpu_numa) n->gpus[g].numa_node = s->gpu_numa[g];
        if (s->gpu_nvlink) n->gpus[g].nvlink = s->gpu_nvlink[g];
    }
    const char *model = s->gpu_model ? s->gpu_model : label_get(s->labels, GS_LABEL_GPU_PRODUCT);
    n->gpu_model = n->ngpus ? gs_cache_model_id(c, model) : -1;
    gs_topo_memo_islands(n); /* ngpus and nvlink are final: the islands follow from them alone */
    return 0;
}

static int insert_node(struct gs_cache *c, const char *name, const struct gs_node *node,
                       const struct gs_node_spec *spec)
{
    if (!name) return GS_EINVAL;
    if (gs__strmap_get(&c->by_name, name)) return GS_EEXIST;
    struct node_rec *r = rec_alloc(c);
    if (!r) return GS_ENOMEM;
    struct gs_node_info *n = &r->info;
    n->name = strdup(name);
    int err = n->name ? 0 : GS_ENOMEM;
    if (!err) err = node ? describe_from_object(c, r, node) : describe_from_spec(c, r, spec);
    if (!err) err = gs__strmap_put(&c->by_name, n->name, n);
    int slot = err ? err : node_slot(c);
    if (slot < 0) {
        if (!err) gs__strmap_del(&c->by_name, n->name);
        node_release(c, n);
        return slot;
    }
    n->idx = slot;
    n->live = true;
    sync_node(c, n);
    c->nodes[slot] = n;
    count_flags(c, n, 1);
    c->epoch++;
    c->live++;
    c->gpus_total += n->ngpus;
    return slot;
}

int gs_cache_add_node(struct gs_cache *c, const struct gs_node *node)
{
    return insert_node(c, node->meta.name, node, NULL);
}

int gs_cache_add_node_spec(struct gs_cache *c, const struct gs_node_spec *spec)
{
    return insert_node(c, spec->name, NULL, spec);
}

/* Releases every pod placed on node idx. */
static void drop_pods_on(struct gs_cache *c, int32_t idx)
{
    for (size_t i = 0; i < c->pods.cap;) {
        struct pod_rec *p = c->pods.slots[i].key ? c->pods.slots[i].val : NULL;
        if (p && p->a.node == idx)
            gs_cache_remove_pod(c, p->key); /* backward shift may refill slot i: look at it again */
        else
            i++;
    }
}

int gs_cache_remove_node(struct gs_cache *c, const char *name)
{
    struct gs_node_info *n = gs__strmap_get(&c->by_name, name);
    if (!n) return GS_ENOENT;
    drop_pods_on(c, n->idx);
    if (c->nfree == c->free_cap) {
        int32_t cap = c->free_cap ? c->free_cap * 2 : 16;
        int32_t *nv = realloc(c->free_slots, (size_t)cap * sizeof *nv);
        if (!nv) return GS_ENOMEM;
        c->free_slots = nv;
        c->free_cap = cap;
    }
    gs__strmap_del(&c->by_name, name);
    c->free_slots[c->nfree++] = n->idx;
    c->nodes[n->idx] = NULL;
    memset(&c->hot[n->idx], 0, sizeof c->hot[0]);
    mins_update(c, n->idx);
    gs__nodeclass_mark(c->classes, n->idx);
    c->live--;
    c->gpus_total -= n->ngpus;
    count_flags(c, n, -1);
    c->epoch++;
    node_release(c, n);
    return 0;
}

/*
 * The static description is rebuilt in a fresh record and the pods on the node
 * are re-applied to it; the old record's address is kept (plugins hold it).
 */
int gs_cache_update_node(struct gs_cache *c, const struct gs_node *node)
{
    struct gs_node_info *n = gs__strmap_get(&c->by_name, node->meta.name);
    if (!n) return GS_ENOENT;
    struct node_rec fresh = {0};
    int err = describe_from_object(c, &fresh, node);
    if (err) {
        free(fresh.info.gpus);
        res_free(&fresh.info.ext_alloc);
        return err;
    }
    struct node_rec *r = (struct node_rec *)n;
    count_flags(c, n, -1);
    c->epoch++;
    c->gpus_total += fresh.info.ngpus - n->ngpus;
    free(n->gpus);
    res_free(&n->ext_alloc);
    res_free(&n->ext_used);
    labels_release(&r->own_labels);
    uint64_t gen = n->generation;
    const char *name = n->name;
    int32_t idx = n->idx;
    const struct gs_nrt *nrt = n->nrt; /* attached separately: survives the update */
    r->info = fresh.info;
    n->nrt = nrt;
    n->name = name;
    n->idx = idx;
    n->live = true;
    n->generation = gen;
    c->bound_changes++; /* masks below may shrink */
    for (size_t i = 0; i < c->pods.cap; i++) {
        struct pod_rec *p = c->pods.slots[i].key ? c->pods.slots[i].val : NULL;
        if (!p || p->a.node != idx) continue;
        /* apply() counts the pod's GPU share again: take the old one out first. */
        c->milli_used -= (int64_t)p->a.milli * popcount64(p->a.gpu_mask);
        uint64_t was = p->a.gpu_mask;
        if (n->ngpus < 64) p->a.gpu_mask &= (1ULL << n->ngpus) - 1;
        if (p->st == POD_BOUND && p->a.gpu_mask != was) {
            struct gs_assignment old = p->a;
            old.gpu_mask = was;
            tell(c, p->pod, &old, false);
            tell(c, p->pod, &p->a, true);
        }
        apply(c, n, p->pod, &p->a, 1);
    }
    sync_node(c, n);
    count_flags(c, n, 1);
    n->generation++;
    c->changes++;
    return 0;
}

static struct gs_node_info *node_at(const struct gs_cache *c, int32_t idx)
{
    return idx >= 0 && idx < c->nslots ? c->nodes[idx] : NULL;
}

int gs_cache_set_gpu_health(struct gs_cache *c, int32_t node, int32_t gpu, bool healthy)
{
    struct gs_node_info *n = node_at(c, node);
    if (!n || gpu < 0 || gpu >= n->ngpus) return GS_ENOENT;
    n->gpus[gpu].healthy = healthy;
    sync_node(c, n);
    n->generation++;
    c->changes++;
    return 0;
}

int gs_cache_set_schedulable(struct gs_cache *c, int32_t node, bool schedulable)
{
    struct gs_node_info *n = node_at(c, node);
    if (!n) return GS_ENOENT;
    count_flags(c, n, -1);
    n->schedulable = schedulable;
    count_flags(c, n, 1);
    gs__nodeclass_mark(c->classes, node);
    c->epoch++;
    n->generation++;
    c->changes++;
    return 0;
}

int gs_cache_touch_node(struct gs_cache *c, int32_t node)
{
    struct gs_node_info *n = node_at(c, node);
    if (!n) return GS_ENOENT;
    n->generation++;
    c->changes++;
    return 0;
}

/*--- Lookups ---*/

struct gs_nodeclasses *gs_cache_classes(struct gs_cache *c)
{
    if (!c->classes && !(c->classes = gs__nodeclass_new())) return NULL; /* a new index keys every slot */
    return gs__nodeclass_sync(c->classes, c) == 0 ? c->classes : NULL;
}

int32_t gs_cache_node_count(const struct gs_cache *c) { return c->nslots; }
const struct gs_node_hot *gs_cache_hot(const struct gs_cache *c) { return c->hot; }

void gs_cache_min_free(const struct gs_cache *c, int64_t *cpu, int64_t *mem, int32_t *pods)
{
    struct minfree m = c->mins ? c->mins[1] : no_node;
    *cpu = m.cpu;
    *mem = m.mem;
    *pods = m.pods;
}

/* A tombstone slot has no record: callers check `live`, so hand them a dead one. */
static const struct gs_node_info dead_node = {.idx = -1, .live = false, .labels = &empty_labels, .gpu_model = -1};

struct gs_node_info *gs_cache_node(struct gs_cache *c, int32_t idx)
{
    struct gs_node_info *n = node_at(c, idx);
    if (n) return n;
    /* Callers only read a dead slot's `live`; the cast keeps the accessor's signature. */
    return idx >= 0 && idx < c->nslots ? (struct gs_node_info *)&dead_node : NULL;
}

int32_t gs_cache_find_node(const struct gs_cache *c, const char *name)
{
    const struct gs_node_info *n = gs__strmap_get(&c->by_name, name);
    return n ? n->idx : -1;
}

int32_t gs_cache_live_nodes(const struct gs_cache *c) { return c->live; }
uint64_t gs_cache_epoch(const struct gs_cache *c) { return c->epoch; }
uint64_t gs_cache_changes(const struct gs_cache *c) { return c->changes + c->epoch; }
uint64_t gs_cache_pod_version(const struct gs_cache *c) { return c->changes + c->epoch + c->confirms; }
uint64_t gs_cache_bound_version(const struct gs_cache *c) { return c->bound_changes; }
int32_t gs_cache_tainted_nodes(const struct gs_cache *c) { return c->tainted; }
int32_t gs_cache_cordon_overrides(const struct gs_cache *c) { return c->overrides; }
int64_t gs_cache_gpu_count(const struct gs_cache *c) { return c->gpus_total; }
int64_t gs_cache_gpu_milli_used(const struct gs_cache *c) { return c->milli_used; }

/*--- Pods ---*/

static bool mask_valid(const struct gs_node_info *n, const struct gs_pod *pod, const struct gs_assignment *a)
{
    if (n->ngpus < 64 && (a->gpu_mask >> n->ngpus)) return false;
    if (a->gpu_mask && gs_pod_has_claims(pod)) /* the GPUs of its claims' devices (cache_dra.h) */
        return a->milli > 0 && a->milli <= GS_GPU_MILLI;
    if (pod->demand.gpu_count == 0) return a->gpu_mask == 0;
    return popcount64(a->gpu_mask) == pod->demand.gpu_count && a->milli > 0 && a->milli <= GS_GPU_MILLI;
}

bool gs_cache_fits(const struct gs_cache *c, const struct gs_pod *pod, const struct gs_assignment *a)
{
    const struct gs_node_info *n = node_at(c, a->node);
    if (!n || !mask_valid(n, pod, a)) return false;
    const struct gs_demand *d = &pod->demand;
    if (d->cpu_milli > 0 && d->cpu_milli > n->cpu_alloc - n->cpu_used) return false;
    if (d->mem_bytes > 0 && d->mem_bytes > n->mem_alloc - n->mem_used) return false;
    if (n->pods_alloc > 0 && n->pods_used + 1 > n->pods_alloc) return false;
    for (size_t i = 0; i < d->extended.n; i++) {
        const struct gs_resource *r = &d->extended.v[i];
        if (r->milli > 0 && r->milli > res_get(&n->ext_alloc, r->name) - res_get(&n->ext_used, r->name))
            return false;
    }
    for (uint64_t m = a->gpu_mask; m; m &= m - 1) {
        const struct gs_gpu_slot *s = &n->gpus[__builtin_ctzll(m)];
        if (!s->healthy || s->milli_free < a->milli) return false;
        if (a->mem_mib > 0 && s->mem_free_mib < a->mem_mib) return false;
    }
    return true;
}

static void assumed_remove(struct gs_cache *c, struct pod_rec *p)
{
    if (p->assumed_pos == SIZE_MAX) return;
    struct pod_rec *last = c->assumed[--c->nassumed];
    c->assumed[p->assumed_pos] = last;
    last->assumed_pos = p->assumed_pos;
    p->assumed_pos = SIZE_MAX;
}

/* The pods with affinity terms, as a dense array for InterPodAffinity's passes. */
static int aff_add(struct gs_cache *c, struct pod_rec *p)
{
    if (c->naff == c->aff_cap) {
        size_t cap = c->aff_cap ? c->aff_cap * 2 : 16;
        struct pod_rec **nv = realloc(c->aff, cap * sizeof *nv);
        if (!nv) return GS_ENOMEM;
        c->aff = nv, c->aff_cap = cap;
    }
    p->aff_pos = c->naff;
    c->aff[c->naff++] = p;
    if (p->pod->pod_affinity->nreq_anti) c->nreq_anti++;
    return 0;
}

static void aff_remove(struct gs_cache *c, struct pod_rec *p)
{
    if (p->aff_pos == SIZE_MAX) return;
    struct pod_rec *last = c->aff[--c->naff];
    c->aff[p->aff_pos] = last;
    last->aff_pos = p->aff_pos;
    p->aff_pos = SIZE_MAX;
    if (p->pod->pod_affinity->nreq_anti) c->nreq_anti--;
}

/*--- Bound-pod watchers ---*/

static void tell(const struct gs_cache *c, const struct gs_pod *pod, const struct gs_assignment *a, bool added)
{
    for (int i = 0; i < c->nwatch; i++) c->watch[i].fn(c->watch[i].ctx, pod, a, added);
}

int gs_cache_watch_bound(struct gs_cache *c, gs_cache_bound_fn fn, void *ctx)
{
    if (c->nwatch == GS_CACHE_WATCHERS) return GS_EBUSY;
    c->watch[c->nwatch].fn = fn;
    c->watch[c->nwatch++].ctx = ctx;
    return 0;
}

void gs_cache_unwatch_bound(struct gs_cache *c, gs_cache_bound_fn fn, void *ctx)
{
    for (int i = 0; i < c->nwatch; i++)
        if (c->watch[i].fn == fn && c->watch[i].ctx == ctx) {
            c->watch[i] = c->watch[--c->nwatch];
            return;
        }
}

static int insert_pod(struct gs_cache *c, const struct gs_pod *pod, const struct gs_assignment *a,
                      enum pod_state st, int64_t deadline)
{
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    if (gs__strmap_get(&c->pods, key)) return GS_EEXIST;
    struct gs_node_info *n = node_at(c, a->node);
    if (!n) return GS_EINVAL;
    if (st == POD_ASSUMED ? !gs_cache_fits(c, pod, a) : !mask_valid(n, pod, a)) return GS_EINVAL;
    if (deadline > 0 && c->nassumed == c->assumed_cap) {
        size_t cap = c->assumed_cap ? c->assumed_cap * 2 : 16;
        struct pod_rec **nv = realloc(c->assumed, cap * sizeof *nv);
        if (!nv) return GS_ENOMEM;
        c->assumed = nv;
        c->assumed_cap = cap;
    }
    struct pod_rec *p = calloc(1, sizeof *p);
    if (!p || !(p->key = strdup(key))) {
        free(p);
        return GS_ENOMEM;
    }
    p->pod = pod;
    p->a = *a;
    p->st = st;
    p->deadline = deadline;
    p->assumed_pos = SIZE_MAX;
    if (gs__strmap_put(&c->pods, p->key, p) != 0) {
        pod_rec_free(p);
        return GS_ENOMEM;
    }
    if (deadline > 0) {
        p->assumed_pos = c->nassumed;
        c->assumed[c->nassumed++] = p;
    }
    p->aff_pos = SIZE_MAX;
    if (pod->pod_affinity && aff_add(c, p) != 0) {
        gs__strmap_del(&c->pods, p->key);
        assumed_remove(c, p);
        pod_rec_free(p);
        return GS_ENOMEM;
    }
    apply(c, n, pod, &p->a, 1);
    if (st == POD_BOUND) c->bound_changes++, tell(c, pod, &p->a, true);
    return 0;
}

int gs_cache_assume(struct gs_cache *c, const struct gs_pod *pod, const struct gs_assignment *a, int64_t deadline_ns)
{
    return insert_pod(c, pod, a, POD_ASSUMED, deadline_ns);
}

int gs_cache_add_bound(struct gs_cache *c, const struct gs_pod *pod, const struct gs_assignment *a)
{
    return insert_pod(c, pod, a, POD_BOUND, 0);
}

int gs_cache_confirm(struct gs_cache *c, const char *pod_key)
{
    struct pod_rec *p = gs__strmap_get(&c->pods, pod_key);
    if (!p) return GS_ENOENT;
    bool was_bound = p->st == POD_BOUND;
    p->st = POD_BOUND;
    p->deadline = 0;
    assumed_remove(c, p);
    c->confirms++;
    c->bound_changes++;
    if (!was_bound) tell(c, p->pod, &p->a, true);
    return 0;
}

static void release(struct gs_cache *c, struct pod_rec *p)
{
    if (p->st == POD_BOUND) c->bound_changes++, tell(c, p->pod, &p->a, false);
    gs__strmap_del(&c->pods, p->key);
    assumed_remove(c, p);
    aff_remove(c, p);
    struct gs_node_info *n = node_at(c, p->a.node);
    if (n) apply(c, n, p->pod, &p->a, -1);
    pod_rec_free(p);
}

int gs_cache_forget(struct gs_cache *c, const char *pod_key)
{
    struct pod_rec *p = gs__strmap_get(&c->pods, pod_key);
    if (!p) return GS_ENOENT;
    if (p->st != POD_ASSUMED) return GS_ESTATE;
    release(c, p);
    return 0;
}

int gs_cache_remove_pod(struct gs_cache *c, const char *pod_key)
{
    struct pod_rec *p = gs__strmap_get(&c->pods, pod_key);
    if (!p) return GS_ENOENT;
    release(c, p);
    return 0;
}

const struct gs_assignment *gs_cache_pod_assignment(const struct gs_cache *c, const char *pod_key)
{
    const struct pod_rec *p = gs__strmap_get(&c->pods, pod_key);
    return p ? &p->a : NULL;
}

int gs_cache_expire(struct gs_cache *c, void (*cb)(const struct gs_pod *, void *), void *arg)
{
    int64_t now = gs_clock_now(c->clock);
    int count = 0;
    for (size_t i = 0; i < c->nassumed;) {
        struct pod_rec *p = c->assumed[i];
        if (p->deadline > now) {
            i++;
            continue;
        }
        const struct gs_pod *pod = p->pod;
        release(c, p); /* swaps the last entry into i */
        count++;
        if (cb) cb(pod, arg);
    }
    return count;
}

/*--- Topology and pod listing ---*/

int gs_cache_set_nrt(struct gs_cache *c, int32_t node, const struct gs_nrt *nrt)
{
    struct gs_node_info *n = node_at(c, node);
    if (!n) return GS_ENOENT;
    n->nrt = nrt;
    gs__nodeclass_mark(c->classes, node);
    n->generation++;
    c->changes++;
    return 0;
}

void gs_cache_foreach_pod(const struct gs_cache *c,
                          void (*cb)(void *arg, const struct gs_pod *pod, const struct gs_assignment *a, bool bound),
                          void *arg)
{
    for (size_t i = 0; i < c->pods.cap; i++) {
        const struct pod_rec *p = c->pods.slots[i].key ? c->pods.slots[i].val : NULL;
        if (p) cb(arg, p->pod, &p->a, p->st == POD_BOUND);
    }
}

/*--- Pods with affinity, namespaces, disruption budgets ---*/

int32_t gs_cache_affinity_pods(const struct gs_cache *c) { return (int32_t)c->naff; }
int32_t gs_cache_required_anti_affinity_pods(const struct gs_cache *c) { return c->nreq_anti; }

void gs_cache_foreach_affinity_pod(const struct gs_cache *c,
                                   void (*cb)(void *arg, const struct gs_pod *pod, const struct gs_assignment *a),
                                   void *arg)
{
    for (size_t i = 0; i < c->naff; i++) cb(arg, c->aff[i]->pod, &c->aff[i]->a);
}

struct ns_rec {
    char *name; /* the map's key */
    struct gs_labels labels;
};

static void ns_rec_free(struct ns_rec *r)
{
    if (!r) return;
    labels_release(&r->labels);
    free(r->name);
    free(r);
}

int gs_cache_set_namespace_labels(struct gs_cache *c, const char *ns, const struct gs_labels *labels)
{
    ns_rec_free(gs__strmap_del(&c->ns_labels, ns));
    if (!labels) return 0;
    struct ns_rec *r = calloc(1, sizeof *r);
    if (!r || !(r->name = strdup(ns)) || labels_copy(&r->labels, labels) != 0 ||
        gs__strmap_put(&c->ns_labels, r->name, r) != 0) {
        ns_rec_free(r);
        return GS_ENOMEM;
    }
    return 0;
}

const struct gs_labels *gs_cache_namespace_labels(const struct gs_cache *c, const char *ns)
{
    const struct ns_rec *r = ns ? gs__strmap_get(&c->ns_labels, ns) : NULL;
    return r ? &r->labels : &empty_labels;
}

static long pdb_find(const struct gs_cache *c, const char *ns, const char *name)
{
    for (size_t i = 0; i < c->npdbs; i++)
        if (!strcmp(c->pdbs[i]->ns, ns) && !strcmp(c->pdbs[i]->name, name)) return (long)i;
    return -1;
}

int gs_cache_put_pdb(struct gs_cache *c, struct gs_pdb_budget *b)
{
    long i = pdb_find(c, b->ns, b->name);
    if (i >= 0) {
        gs_pdb_budget_free(c->pdbs[i]);
        c->pdbs[i] = b;
        return 0;
    }
    if (c->npdbs == c->pdbs_cap) {
        size_t cap = c->pdbs_cap ? c->pdbs_cap * 2 : 8;
        struct gs_pdb_budget **nv = realloc(c->pdbs, cap * sizeof *nv);
        if (!nv) {
            gs_pdb_budget_free(b);
            return GS_ENOMEM;
        }
        c->pdbs = nv, c->pdbs_cap = cap;
    }
    c->pdbs[c->npdbs++] = b;
    return 0;
}

int gs_cache_remove_pdb(struct gs_cache *c, const char *ns, const char *name)
{
    long i = pdb_find(c, ns, name);
    if (i < 0) return GS_ENOENT;
    gs_pdb_budget_free(c->pdbs[i]);
    memmove(&c->pdbs[i], &c->pdbs[i + 1], (c->npdbs - (size_t)i - 1) * sizeof *c->pdbs);
    c->npdbs--;
    return 0;
}

const struct gs_pdb_budget *const *gs_cache_pdbs(const struct gs_cache *c, size_t *n)
{
    *n = c->npdbs;
    return (const struct gs_pdb_budget *const *)c->pdbs;
}

static void gs__cache_extra_free(struct gs_cache *c)
{
    for (size_t i = 0; i < c->ns_labels.cap; i++)
        if (c->ns_labels.slots[i].key) ns_rec_free(c->ns_labels.slots[i].val);
    gs__strmap_free(&c->ns_labels);
    for (size_t i = 0; i < c->npdbs; i++) gs_pdb_budget_free(c->pdbs[i]);
    free(c->pdbs);
    free(c->aff);
    gs_cache_dra_free(c->dra);
}

struct gs_cache_dra *gs_cache_dra(struct gs_cache *c)
{
    if (!c->dra) c->dra = gs__cache_dra_new();
    return c->dra;
}

/*--- Invariant check ---*/

static int bad(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (why && len) vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return GS_ESTATE;
}

struct expect {
    int64_t cpu, mem;
    int32_t pods;
    int32_t *milli, *npods;
    int64_t *mem_gpu;
    struct gs_resources ext;
};

static int check_node(const struct gs_node_info *n, const struct expect *e, char *why, size_t len)
{
#define FAIL(...) return bad(why, len, __VA_ARGS__)
    if (n->cpu_used != e->cpu) FAIL("node %s: cpu_used %lld, pods sum %lld", n->name, (long long)n->cpu_used, (long long)e->cpu);
    if (n->mem_used != e->mem) FAIL("node %s: mem_used %lld, pods sum %lld", n->name, (long long)n->mem_used, (long long)e->mem);
    if (n->pods_used != e->pods || n->npods != e->pods)
        FAIL("node %s: pods_used %d npods %d, pods %d", n->name, n->pods_used, n->npods, e->pods);
    int32_t milli = 0, whole = 0;
    for (int32_t g = 0; g < n->ngpus; g++) {
        const struct gs_gpu_slot *s = &n->gpus[g];
        if (s->milli_free != GS_GPU_MILLI - e->milli[g])
            FAIL("node %s gpu %d: milli_free %d, expected %d", n->name, g, s->milli_free, GS_GPU_MILLI - e->milli[g]);
        if (s->mem_free_mib != s->mem_total_mib - e->mem_gpu[g])
            FAIL("node %s gpu %d: mem_free %lld, expected %lld", n->name, g, (long long)s->mem_free_mib,
                 (long long)(s->mem_total_mib - e->mem_gpu[g]));
        if (s->npods != e->npods[g]) FAIL("node %s gpu %d: npods %d, expected %d", n->name, g, s->npods, e->npods[g]);
        if (s->healthy) {
            milli += s->milli_free;
            whole += s->milli_free == GS_GPU_MILLI;
        }
    }
    if (n->gpu_milli_free != milli || n->gpus_whole_free != whole)
        FAIL("node %s: gpu_milli_free %d whole %d, expected %d %d", n->name, n->gpu_milli_free, n->gpus_whole_free,
             milli, whole);
    for (size_t i = 0; i < n->ext_used.n; i++)
        if (n->ext_used.v[i].milli != res_get(&e->ext, n->ext_used.v[i].name))
            FAIL("node %s: %s used %lld, expected %lld", n->name, n->ext_used.v[i].name,
                 (long long)n->ext_used.v[i].milli, (long long)res_get(&e->ext, n->ext_used.v[i].name));
    for (size_t i = 0; i < e->ext.n; i++)
        if (e->ext.v[i].milli != res_get(&n->ext_used, e->ext.v[i].name))
            FAIL("node %s: %s not accounted", n->name, e->ext.v[i].name);
#undef FAIL
    return 0;
}

/* The hot record must be what sync_node() would write now. */
static int check_hot(const struct gs_cache *c, int32_t i, char *why, size_t len)
{
    const struct gs_node_info *n = c->nodes[i];
    const struct gs_node_hot *h = &c->hot[i];
    if (!n) return h->live ? bad(why, len, "slot %d: dead slot has a live hot record", i) : 0;
    int32_t max = -1, unhealthy = 0;
    for (int32_t g = 0; g < n->ngpus; g++) {
        if (!n->gpus[g].healthy) unhealthy++;
        else if (n->gpus[g].milli_free > max) max = n->gpus[g].milli_free;
    }
    if (h->cpu_free != n->cpu_alloc - n->cpu_used || h->mem_free != n->mem_alloc - n->mem_used ||
        h->cpu_alloc != n->cpu_alloc || h->mem_alloc != n->mem_alloc ||
        h->pods_free != (n->pods_alloc > 0 ? n->pods_alloc - n->pods_used : INT32_MAX) ||
        h->gpu_model != n->gpu_model || h->ngpus != n->ngpus || h->gpus_whole_free != n->gpus_whole_free ||
        h->gpu_milli_max != max || h->gpus_unhealthy != unhealthy || !h->live)
        return bad(why, len, "node %s: hot record out of date", n->name);
    return 0;
}

static int accumulate(const struct gs_cache *c, struct expect *ex, int64_t *milli_used, char *why, size_t len)
{
    for (size_t i = 0; i < c->pods.cap; i++) {
        const struct pod_rec *p = c->pods.slots[i].key ? c->pods.slots[i].val : NULL;
        if (!p) continue;
        const struct gs_node_info *n = node_at(c, p->a.node);
        if (!n) return bad(why, len, "pod %s on missing node %d", p->key, p->a.node);
        struct expect *e = &ex[p->a.node];
        const struct gs_demand *d = &p->pod->demand;
        e->cpu += d->cpu_milli;
        e->mem += d->mem_bytes;
        e->pods++;
        for (size_t k = 0; k < d->extended.n; k++)
            if (res_add(&e->ext, d->extended.v[k].name, d->extended.v[k].milli) != 0) return GS_ENOMEM;
        for (uint64_t m = p->a.gpu_mask; m; m &= m - 1) {
            int g = __builtin_ctzll(m);
            if (g >= n->ngpus) return bad(why, len, "pod %s holds missing gpu %d", p->key, g);
            e->milli[g] += p->a.milli;
            e->mem_gpu[g] += p->a.mem_mib;
            e->npods[g]++;
            *milli_used += p->a.milli;
        }
    }
    return 0;
}

int gs_cache_check(const struct gs_cache *c, char *why, size_t len)
{
    int err = 0;
    struct expect *ex = calloc((size_t)c->nslots + 1, sizeof *ex);
    if (!ex) return GS_ENOMEM;
    int32_t live = 0;
    int64_t gpus = 0, milli_used = 0;
    for (int32_t i = 0; i < c->nslots && !err; i++) {
        const struct gs_node_info *n = c->nodes[i];
        if (!n) continue;
        size_t g = (size_t)n->ngpus + 1;
        ex[i].milli = calloc(g, sizeof *ex[i].milli);
        ex[i].npods = calloc(g, sizeof *ex[i].npods);
        ex[i].mem_gpu = calloc(g, sizeof *ex[i].mem_gpu);
        if (!ex[i].milli || !ex[i].npods || !ex[i].mem_gpu) err = GS_ENOMEM;
        live++;
        gpus += n->ngpus;
        if (n->idx != i || !n->live) err = bad(why, len, "slot %d: node %s has idx %d", i, n->name, n->idx);
        else if (gs__strmap_get(&c->by_name, n->name) != n) err = bad(why, len, "node %s not indexed by name", n->name);
    }
    if (!err) err = accumulate(c, ex, &milli_used, why, len);
    for (int32_t i = 0; i < c->nslots && !err; i++)
        if (c->nodes[i]) err = check_node(c->nodes[i], &ex[i], why, len);
    for (int32_t i = 0; i < c->nslots && !err; i++) err = check_hot(c, i, why, len);
    if (!err && c->mins) {
        struct minfree want = no_node;
        for (int32_t i = 0; i < c->nslots; i++) want = minfree_meet(want, minfree_of(&c->hot[i]));
        const struct minfree *got = &c->mins[1];
        if (got->cpu != want.cpu || got->mem != want.mem || got->pods != want.pods)
            err = bad(why, len, "min-tree root out of date");
    }
    if (!err && (live != c->live || gpus != c->gpus_total || milli_used != c->milli_used))
        err = bad(why, len, "totals: live %d/%d gpus %lld/%lld milli %lld/%lld", c->live, live,
                  (long long)c->gpus_total, (long long)gpus, (long long)c->milli_used, (long long)milli_used);
    if (!err && c->by_name.n != (size_t)live) err = bad(why, len, "name index holds %zu, live %d", c->by_name.n, live);
    if (!err) { /* the affinity list holds exactly the pods with terms */
        size_t naff = 0;
        int32_t anti = 0;
        for (size_t i = 0; i < c->pods.cap; i++) {
            const struct pod_rec *p = c->pods.slots[i].key ? c->pods.slots[i].val : NULL;
            if (!p || !p->pod->pod_affinity) continue;
            naff++;
            anti += p->pod->pod_affinity->nreq_anti > 0;
            if (p->aff_pos >= c->naff || c->aff[p->aff_pos] != p) err = bad(why, len, "pod %s not in the affinity list", p->key);
        }
        if (!err && (naff != c->naff || anti != c->nreq_anti))
            err = bad(why, len, "affinity pods %zu/%zu, with required anti-affinity %d/%d", c->naff, naff, c->nreq_anti, anti);
    }
    for (int32_t i = 0; i < c->nslots; i++) {
        free(ex[i].milli);
        free(ex[i].npods);
        free(ex[i].mem_gpu);
        res_free(&ex[i].ext);
    }
    free(ex);
    return err;
}
