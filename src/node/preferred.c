/*
 * preferred.c - the best-connected device set (preferred.h).
 *
 * Works on candidate entries (one per available ID that names a known GPU);
 * a set is a bit vector over those entries. The ordering key is compared
 * field by field, so each criterion only breaks ties of the ones before it.
 */
#include "node/preferred.h"

#include "core/error.h"

#include <stdbool.h>
#include <string.h>

#define MAXC (GS_NODE_MAX_GPUS * GS_NODE_MAX_REPLICAS)

struct cand {
    int n;
    int idx[MAXC];    /* index into avail */
    int slot[MAXC];   /* GPU slot */
};

struct key {
    int islands, numas, leftover, links;
};

static int cmp_key(const struct key *a, const struct key *b)
{
    if (a->islands != b->islands) return a->islands - b->islands;
    if (a->numas != b->numas) return a->numas - b->numas;
    if (a->leftover != b->leftover) return a->leftover - b->leftover;
    return b->links - a->links;
}

/* Key of a set of whole-GPU entries (in[i] true = chosen). */
static struct key key_of(const struct gs_node_gpus *g, const struct cand *c, const bool *in)
{
    struct key k = {0};
    bool isl[GS_NODE_MAX_GPUS] = {0}, numa[64] = {0};
    for (int i = 0; i < c->n; i++) {
        if (!in[i]) continue;
        const struct gs_node_gpu *d = &g->gpu[c->slot[i]];
        if (!isl[d->island]) isl[d->island] = true, k.islands++;
        int nn = d->numa < 0 ? 0 : d->numa & 63;
        if (!numa[nn]) numa[nn] = true, k.numas++;
        for (int j = 0; j < i; j++)
            if (in[j]) k.links += g->nvlink[c->slot[i]][c->slot[j]];
    }
    for (int i = 0; i < c->n; i++)
        if (!in[i] && isl[g->gpu[c->slot[i]].island]) k.leftover++;
    return k;
}

/* Cost of adding entry e to a partial set: a new island, then a new NUMA
 * node, cost more; more links to the set cost less. */
static long add_cost(const struct gs_node_gpus *g, const struct cand *c, const bool *in, int e)
{
    const struct gs_node_gpu *d = &g->gpu[c->slot[e]];
    bool new_isl = true, new_numa = true;
    long links = 0;
    for (int i = 0; i < c->n; i++) {
        if (!in[i]) continue;
        const struct gs_node_gpu *o = &g->gpu[c->slot[i]];
        if (o->island == d->island) new_isl = false;
        if (o->numa == d->numa) new_numa = false;
        links += g->nvlink[c->slot[i]][c->slot[e]];
    }
    return (new_isl ? 1000000L : 0) + (new_numa ? 10000L : 0) - links;
}

static int grow(const struct gs_node_gpus *g, const struct cand *c, bool *in, int have, int size)
{
    while (have < size) {
        int best = -1;
        long bc = 0;
        for (int e = 0; e < c->n; e++) {
            if (in[e]) continue;
            long cost = add_cost(g, c, in, e);
            if (best < 0 || cost < bc) best = e, bc = cost;
        }
        if (best < 0) break;
        in[best] = true;
        have++;
    }
    return have;
}

static int whole_gpus(const struct gs_node_gpus *g, const struct cand *c, const bool *must, int nmust, int size,
                      int *pick)
{
    bool best[MAXC], cur[MAXC];
    struct key bk = {0};
    int bn = -1;
    for (int seed = -1; seed < c->n; seed++) {
        if (seed >= 0 && (must[seed] || nmust >= size)) continue;
        if (seed < 0 && nmust == 0) continue;
        memcpy(cur, must, sizeof(bool) * (size_t)c->n);
        int have = nmust;
        if (seed >= 0) cur[seed] = true, have++;
        have = grow(g, c, cur, have, size);
        struct key k = key_of(g, c, cur);
        if (bn < 0 || have > bn || (have == bn && cmp_key(&k, &bk) < 0)) {
            memcpy(best, cur, sizeof(bool) * (size_t)c->n);
            bk = k, bn = have;
        }
    }
    int n = 0;
    for (int i = 0; i < c->n && bn > 0; i++)
        if (best[i]) pick[n++] = c->idx[i];
    return n;
}

/* Replicas: spread over GPUs, least shared GPUs first. */
static int replicas(const struct gs_node_gpus *g, const struct cand *c, bool *in, int have, int size, int *pick)
{
    int free_of[GS_NODE_MAX_GPUS] = {0}, used[GS_NODE_MAX_GPUS] = {0};
    for (int i = 0; i < c->n; i++) {
        if (in[i]) used[c->slot[i]]++;
        else free_of[c->slot[i]]++;
    }
    while (have < size) {
        int best = -1;
        for (int i = 0; i < c->n; i++) {
            if (in[i]) continue;
            int s = c->slot[i], b = best < 0 ? -1 : c->slot[best];
            if (best < 0 || used[s] < used[b] || (used[s] == used[b] && free_of[s] > free_of[b])) best = i;
        }
        if (best < 0) break;
        in[best] = true;
        used[c->slot[best]]++, free_of[c->slot[best]]--;
        have++;
    }
    int n = 0;
    for (int i = 0; i < c->n; i++)
        if (in[i]) pick[n++] = c->idx[i];
    (void)g;
    return n;
}

int gs_preferred(const struct gs_node_gpus *g, const char *const *avail, size_t navail, const char *const *must,
                 size_t nmust, int size, int *pick)
{
    if (size < 1) return GS_EINVAL;
    static _Thread_local struct cand c;
    bool in[MAXC] = {0};
    c.n = 0;
    for (size_t i = 0; i < navail && c.n < MAXC; i++) {
        int slot = gs_node_gpus_find(g, avail[i], NULL);
        bool dup = false;
        for (int j = 0; j < c.n; j++) dup = dup || !strcmp(avail[c.idx[j]], avail[i]);
        if (slot < 0 || dup) continue;
        c.idx[c.n] = (int)i, c.slot[c.n] = slot, c.n++;
    }
    int have = 0;
    for (size_t m = 0; m < nmust; m++)
        for (int i = 0; i < c.n; i++)
            if (!in[i] && !strcmp(avail[c.idx[i]], must[m]) && have < size) in[i] = true, have++;
    if (g->replicas > 1) return replicas(g, &c, in, have, size, pick);
    return whole_gpus(g, &c, in, have, size, pick);
}
