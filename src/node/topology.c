/*
 * topology.c - hint generation, hint merging and pod admission (topology.h).
 *
 * The merge walks every combination of one hint per resource. With at most
 * 8 NUMA nodes a resource offers at most 255 hints, and a container has a
 * handful of resources, so the walk is small in practice; it stays exact
 * rather than greedy because kubelet's answers are the contract.
 */
#include "node/topology.h"

#include "core/error.h"

#include <stdio.h>
#include <string.h>

/*--- Names ---*/

static const char *const policy_names[] = {"none", "best-effort", "restricted", "single-numa-node"};

int gs_topo_policy_parse(const char *s, enum gs_topo_policy *p)
{
    for (int i = 0; i < 4; i++)
        if (s && !strcmp(s, policy_names[i])) {
            *p = (enum gs_topo_policy)i;
            return 0;
        }
    return GS_EINVAL;
}

const char *gs_topo_policy_name(enum gs_topo_policy p)
{
    return (unsigned)p < 4 ? policy_names[p] : "?";
}

int gs_topo_scope_parse(const char *s, enum gs_topo_scope *sc)
{
    if (s && !strcmp(s, "container")) *sc = GS_TOPO_SCOPE_CONTAINER;
    else if (s && !strcmp(s, "pod")) *sc = GS_TOPO_SCOPE_POD;
    else return GS_EINVAL;
    return 0;
}

/*--- Bitmask helpers ---*/

static int popcount(uint32_t m)
{
    return __builtin_popcount(m);
}

/* kubelet's IsNarrowerThan: fewer nodes, or as many and the lowest differing
 * node set in a. */
static bool narrower(uint32_t a, uint32_t b)
{
    if (popcount(a) != popcount(b)) return popcount(a) < popcount(b);
    uint32_t diff = a ^ b;
    return diff && (a & (diff & -diff));
}

static uint32_t all_nodes(int n_numa)
{
    if (n_numa < 1) n_numa = 1;
    if (n_numa > GS_TOPO_MAX_NUMA) n_numa = GS_TOPO_MAX_NUMA;
    return (uint32_t)((1u << n_numa) - 1);
}

/*--- Merging ---*/

/* The lists after kubelet's filterProvidersHints (nil -> {any, true},
 * empty -> {any, false}) and, for single-numa-node, its single-node filter. */
struct lists {
    size_t n;
    int len[GS_TOPO_MAX_RES * 4];
    const struct gs_topo_hint *v[GS_TOPO_MAX_RES * 4];
};

static const struct gs_topo_hint any_preferred = {0, true};
static const struct gs_topo_hint any_impossible = {0, false};

struct walk {
    uint32_t all;
    struct gs_topo_hint best;
    int idx[GS_TOPO_MAX_RES * 4];
};

static void consider(struct walk *w, const struct lists *l)
{
    uint32_t m = w->all;
    bool pref = true;
    for (size_t i = 0; i < l->n; i++) {
        const struct gs_topo_hint *h = &l->v[i][w->idx[i]];
        m &= h->mask ? h->mask : w->all;
        pref = pref && h->preferred;
    }
    if (!m) return;
    if (pref != w->best.preferred) {
        if (pref) w->best = (struct gs_topo_hint){m, true};
        return;
    }
    if (narrower(m, w->best.mask)) w->best = (struct gs_topo_hint){m, pref};
}

static void iterate(struct walk *w, const struct lists *l, size_t i)
{
    if (i == l->n) {
        consider(w, l);
        return;
    }
    for (int j = 0; j < l->len[i]; j++) {
        w->idx[i] = j;
        iterate(w, l, i + 1);
    }
}

static struct gs_topo_hint merge_lists(int n_numa, const struct lists *l)
{
    struct walk w = {.all = all_nodes(n_numa)};
    w.best = (struct gs_topo_hint){w.all, false};
    iterate(&w, l, 0);
    return w.best;
}

/* single-numa-node keeps only preferred hints that are "any" or one node.
 * Filtered copies live in buf. */
static void filter_single(struct lists *l, struct gs_topo_hint (*buf)[GS_TOPO_MAX_HINTS])
{
    for (size_t i = 0; i < l->n; i++) {
        int k = 0;
        for (int j = 0; j < l->len[i] && k < GS_TOPO_MAX_HINTS; j++) {
            const struct gs_topo_hint *h = &l->v[i][j];
            if (h->preferred && (h->mask == 0 || popcount(h->mask) == 1)) buf[i][k++] = *h;
        }
        l->len[i] = k;
        l->v[i] = buf[i];
    }
}

bool gs_topo_merge(enum gs_topo_policy policy, int n_numa, const struct gs_topo_hints *providers, size_t n,
                   struct gs_topo_hint *best)
{
    if (policy == GS_TOPO_NONE) {
        *best = any_preferred;
        return true;
    }
    struct lists l = {0};
    for (size_t i = 0; i < n && l.n < GS_TOPO_MAX_RES * 4; i++, l.n++) {
        if (providers[i].n < 0) l.v[l.n] = &any_preferred, l.len[l.n] = 1;
        else if (providers[i].n == 0) l.v[l.n] = &any_impossible, l.len[l.n] = 1;
        else l.v[l.n] = providers[i].v, l.len[l.n] = providers[i].n;
    }
    if (policy == GS_TOPO_SINGLE_NUMA) {
        static _Thread_local struct gs_topo_hint buf[GS_TOPO_MAX_RES * 4][GS_TOPO_MAX_HINTS];
        filter_single(&l, buf);
        *best = merge_lists(n_numa, &l);
        if (best->mask == all_nodes(n_numa)) best->mask = 0;
        return best->preferred;
    }
    *best = merge_lists(n_numa, &l);
    return policy == GS_TOPO_BEST_EFFORT || best->preferred;
}

/*--- Hint generation ---*/

int gs_topo_hints_for(int n_numa, const int *avail, const int *total, int request, struct gs_topo_hint *out,
                      size_t max)
{
    uint32_t all = all_nodes(n_numa);
    int min_size = popcount(all);
    size_t k = 0;
    for (uint32_t m = 1; m <= all; m++) {
        int have = 0, could = 0;
        for (int i = 0; i < GS_TOPO_MAX_NUMA; i++)
            if (m & (1u << i)) have += avail[i], could += total[i];
        if (could >= request && popcount(m) < min_size) min_size = popcount(m);
        if (have < request || k >= max) continue;
        out[k++] = (struct gs_topo_hint){m, false};
    }
    for (size_t i = 0; i < k; i++) out[i].preferred = popcount(out[i].mask) == min_size;
    return (int)k;
}

/*--- Admission ---*/

static int find_res(const struct gs_topo_resource *res, size_t nres, const char *name)
{
    for (size_t i = 0; i < nres; i++)
        if (!strcmp(res[i].name, name)) return (int)i;
    return -1;
}

/* Merges the hints for `want[r]` units of every resource r. */
static bool admit_one(const struct gs_topo_config *cfg, const struct gs_topo_resource *res, size_t nres,
                      const int *want, struct gs_topo_hint *out)
{
    static _Thread_local struct gs_topo_hint hints[GS_TOPO_MAX_RES * 4][GS_TOPO_MAX_HINTS];
    struct gs_topo_hints prov[GS_TOPO_MAX_RES * 4];
    size_t np = 0;
    for (size_t r = 0; r < nres && np < GS_TOPO_MAX_RES * 4; r++) {
        if (want[r] <= 0) continue;
        if (res[r].no_topology) {
            prov[np++] = (struct gs_topo_hints){-1, NULL};
            continue;
        }
        int k = gs_topo_hints_for(cfg->n_numa, res[r].avail, res[r].total, want[r], hints[np], GS_TOPO_MAX_HINTS);
        prov[np] = (struct gs_topo_hints){k, hints[np]};
        np++;
    }
    return gs_topo_merge(cfg->policy, cfg->n_numa, prov, np, out);
}

/* Takes `count` units of a resource, nodes of the affinity first. */
static void take(struct gs_topo_resource *r, uint32_t mask, int count)
{
    for (int pass = 0; pass < 2 && count > 0; pass++)
        for (int i = 0; i < GS_TOPO_MAX_NUMA && count > 0; i++) {
            bool in = mask == 0 || (mask & (1u << i));
            if (in != (pass == 0)) continue;
            int t = r->avail[i] < count ? r->avail[i] : count;
            r->avail[i] -= t;
            count -= t;
        }
}

static void want_of(const struct gs_topo_resource *res, size_t nres, const struct gs_topo_container *c,
                    int *want)
{
    for (int j = 0; j < c->n && j < GS_TOPO_MAX_RES; j++) {
        int r = find_res(res, nres, c->res[j]);
        if (r >= 0) want[r] += c->count[j];
    }
}

bool gs_node_topo_admit(const struct gs_topo_config *cfg, const struct gs_topo_resource *res, size_t nres,
                   const struct gs_topo_container *ctrs, size_t nctr, struct gs_topo_hint *affinity, char *why,
                   size_t whylen)
{
    struct gs_topo_resource copy[GS_TOPO_MAX_RES * 4];
    if (nres > GS_TOPO_MAX_RES * 4) nres = GS_TOPO_MAX_RES * 4;
    memcpy(copy, res, nres * sizeof *res);
    int want[GS_TOPO_MAX_RES * 4];
    if (cfg->scope == GS_TOPO_SCOPE_POD) {
        memset(want, 0, sizeof want);
        for (size_t c = 0; c < nctr; c++) want_of(copy, nres, &ctrs[c], want);
        struct gs_topo_hint h;
        bool ok = admit_one(cfg, copy, nres, want, &h);
        for (size_t c = 0; c < nctr; c++) affinity[c] = h;
        if (!ok && why) snprintf(why, whylen, "pod: resources cannot be allocated with topology locality (%s)",
                                 gs_topo_policy_name(cfg->policy));
        return ok;
    }
    for (size_t c = 0; c < nctr; c++) {
        memset(want, 0, sizeof want);
        want_of(copy, nres, &ctrs[c], want);
        if (!admit_one(cfg, copy, nres, want, &affinity[c])) {
            if (why) snprintf(why, whylen, "container %s: resources cannot be allocated with topology locality (%s)",
                              ctrs[c].name ? ctrs[c].name : "?", gs_topo_policy_name(cfg->policy));
            return false;
        }
        for (size_t r = 0; r < nres; r++)
            if (want[r] > 0) take(&copy[r], affinity[c].mask, want[r]);
    }
    return true;
}
