/*
 * gpu_clustering.c - the GpuClustering placement policy.
 *
 * Pods asking the same kind of GPU request ("share-gpu", "1-gpu", "2-gpu",
 * ...) are kept together: nodes hosting only that kind score 75..100, nodes
 * hosting it among others 50..75, empty nodes 25..50, nodes hosting other
 * kinds 0..25; within a tier, less free GPU milli scores higher
 * (25 * (8000 - free) / 8000). CPU-only pods score 0. A sharing pod takes
 * the best-fitting GPU.
 *
 * The cache does not say which kinds of pods a node hosts, so the plugin
 * keeps its own record, filled at Reserve and undone at Unreserve. Pods also
 * leave without telling us (completion, eviction), so when a node's
 * generation moved since we last looked, its records are checked against the
 * cache's assignments and the stale ones dropped.
 */
#include "sched/frag.h"
#include "sched/plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTAGS (GS_MAX_GPUS_PER_NODE + 1) /* 0 = share-gpu, k = k whole GPUs */
#define MAX_SPEC_GPU 8000

struct rec {
    char *key;
    uint8_t tag;
};

struct cnode {
    uint64_t gen;
    bool fresh;
    int32_t kinds;             /* distinct tags present */
    uint16_t count[NTAGS];
    struct rec *v;
    size_t n, cap;
};

struct gc {
    const struct gs_handle *h;
    struct cnode *nodes;
    size_t nnodes;
};

/* The cache's pod key, "namespace/name". */
static void pod_key(const struct gs_pod *pod, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", pod->meta.namespace_ ? pod->meta.namespace_ : "default",
             pod->meta.name ? pod->meta.name : "");
}

static int pod_tag(const struct gs_demand *d)
{
    if (d->gpu_count <= 0 || d->gpu_milli <= 0) return -1;
    if (d->gpu_count == 1 && d->gpu_milli < GS_GPU_MILLI) return 0;
    return d->gpu_count < NTAGS ? d->gpu_count : NTAGS - 1;
}

static int gc_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    (void)args, (void)d;
    struct gc *g = calloc(1, sizeof *g);
    if (!g) return GS_ENOMEM;
    g->h = h;
    *state = g;
    return 0;
}

static void gc_fini(void *state)
{
    struct gc *g = state;
    for (size_t i = 0; i < g->nnodes; i++) {
        for (size_t k = 0; k < g->nodes[i].n; k++) free(g->nodes[i].v[k].key);
        free(g->nodes[i].v);
    }
    free(g->nodes);
    free(g);
}

static struct cnode *node_rec(struct gc *g, int32_t idx)
{
    if ((size_t)idx >= g->nnodes) {
        size_t nc = g->nnodes ? g->nnodes : 64;
        while (nc <= (size_t)idx) nc *= 2;
        struct cnode *nn = realloc(g->nodes, nc * sizeof *nn);
        if (!nn) return NULL;
        memset(nn + g->nnodes, 0, (nc - g->nnodes) * sizeof *nn);
        g->nodes = nn;
        g->nnodes = nc;
    }
    return &g->nodes[idx];
}

/* Drops records of pods no longer on the node; recounts. */
static void revalidate(struct gc *g, struct cnode *c, const struct gs_node_info *nd)
{
    if (c->fresh && c->gen == nd->generation) return;
    memset(c->count, 0, sizeof c->count);
    c->kinds = 0;
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++) {
        /* without a cache (unit tests) Reserve/Unreserve are the only truth */
        const struct gs_assignment *a = g->h->cache ? gs_cache_pod_assignment(g->h->cache, c->v[i].key) : NULL;
        if (g->h->cache && (!a || a->node != nd->idx)) {
            free(c->v[i].key);
            continue;
        }
        c->v[k++] = c->v[i];
    }
    c->n = k;
    for (size_t i = 0; i < c->n; i++)
        if (c->count[c->v[i].tag]++ == 0) c->kinds++;
    c->gen = nd->generation;
    c->fresh = true;
}

static void gc_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                     struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)cs;
    struct gc *g = state;
    int tag = pod_tag(&pod->demand);
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_info *nd = nodes[i];
        if (tag < 0) {
            scores[i] = 0;
            continue;
        }
        struct cnode *c = node_rec(g, nd->idx);
        int64_t base = 0, left = nd->gpu_milli_free;
        if (c) revalidate(g, c, nd);
        int32_t kinds = c ? c->kinds : 0;
        if (c && c->count[tag]) base = kinds == 1 ? 75 : 50;
        else base = kinds == 0 ? 25 : 0;
        int64_t s = GS_MAX_SCORE / 4 * (MAX_SPEC_GPU - left) / MAX_SPEC_GPU + base;
        scores[i] = s < 0 ? 0 : s > GS_MAX_SCORE ? GS_MAX_SCORE : s;
    }
}

static struct gs_status gc_reserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                   struct gs_node_info *node, struct gs_assignment *a)
{
    (void)cs;
    struct gc *g = state;
    const struct gs_demand *d = &pod->demand;
    int tag = pod_tag(d);
    if (tag < 0) return (struct gs_status){0};
    if (!a->gpu_mask) {
        a->gpu_mask = gs_gpusel_best_fit(node, d->gpu_count, d->gpu_milli);
        a->milli = d->gpu_milli;
        a->mem_mib = d->gpu_mem_mib;
        if (!a->gpu_mask)
            return gs_status_make(GS_UNSCHEDULABLE, "no GPU on node %s fits %d x %d milli", node->name,
                                  d->gpu_count, d->gpu_milli);
    }
    struct cnode *c = node_rec(g, node->idx);
    char key[512];
    pod_key(pod, key, sizeof key);
    if (!c) return gs_status_make(GS_ERROR, "out of memory");
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 4;
        struct rec *nv = realloc(c->v, nc * sizeof *nv);
        if (!nv) return gs_status_make(GS_ERROR, "out of memory");
        c->v = nv;
        c->cap = nc;
    }
    char *k = strdup(key);
    if (!k) return gs_status_make(GS_ERROR, "out of memory");
    c->v[c->n++] = (struct rec){k, (uint8_t)tag};
    c->fresh = false; /* the pod is not assumed yet: recount on the next look */
    return (struct gs_status){0};
}

static void gc_unreserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                         struct gs_node_info *node)
{
    (void)cs;
    struct gc *g = state;
    if ((size_t)node->idx >= g->nnodes) return;
    struct cnode *c = &g->nodes[node->idx];
    char key[512];
    pod_key(pod, key, sizeof key);
    for (size_t i = 0; i < c->n; i++) {
        if (strcmp(c->v[i].key, key)) continue;
        free(c->v[i].key);
        c->v[i] = c->v[--c->n];
        c->fresh = false;
        return;
    }
}

const struct gs_plugin gs_plugin_gpu_clustering = {
    .name = "GpuClustering",
    .init = gc_init,
    .fini = gc_fini,
    .score = gc_score,
    .reserve = gc_reserve,
    .unreserve = gc_unreserve,
};
