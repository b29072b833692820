/*
 * placement.c - the admission placement check: the profile's filters run
 * over the cache for each pod of a workload, with the pods assumed one by
 * one and forgotten at the end (see placement.h).
 */
#include "sched/admission/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct filter_inst {
    const struct gs_plugin *plugin;
    void *state;
};

struct gs_placer {
    struct gs_cache *cache;
    struct gs_handle h;
    struct gs_sched_config cfg; /* the default profile when none was given */
    bool have_cfg;
    struct filter_inst f[GS_MAX_PLUGINS_PER_POINT];
    int nf;
    const struct gs_plugin *reserve; /* GpuShare: device choice */
    struct gs_cycle_state cs;
    struct gs_node_info **cand;
    int32_t *idx; /* cand[i]'s slot, for filters in the index form */
    uint8_t *reject;
    size_t cap;
};

static const json_t *args_for(const struct gs_profile *p, const char *name)
{
    for (int i = 0; i < p->nargs; i++)
        if (p->args_names[i] && !strcmp(p->args_names[i], name)) return p->args[i];
    return NULL;
}

int gs_placer_new(struct gs_cache *cache, const struct gs_clock *clock, const struct gs_profile *prof,
                  struct gs_placer **out, struct gs_diags *d)
{
    struct gs_placer *p = calloc(1, sizeof *p);
    if (!p) return GS_ENOMEM;
    p->cache = cache;
    p->h = (struct gs_handle){.clock = clock, .cache = cache};
    gs_cycle_state_init(&p->cs);
    int rc = 0;
    if (!prof) {
        rc = gs_sched_config_default(&p->cfg);
        p->have_cfg = rc == 0;
        prof = rc ? NULL : gs_sched_config_profile(&p->cfg, GS_DEFAULT_SCHEDULER);
        if (!rc && !prof) prof = &p->cfg.profiles[0];
    }
    for (int i = 0; !rc && i < prof->npoints[GS_PT_FILTER]; i++) {
        const struct gs_plugin *pl = prof->points[GS_PT_FILTER][i].plugin;
        if (!pl->filter) continue;
        /* Devices of claims are dra_admit.c's question (gs_dra_feasible): claims
         * from templates need not exist yet when a workload is admitted. */
        if (!strcmp(pl->name, "DynamicResources")) continue;
        p->f[p->nf].plugin = pl;
        if (pl->init) rc = pl->init(&p->h, args_for(prof, pl->name), &p->f[p->nf].state, d);
        if (!rc) p->nf++;
    }
    p->reserve = gs_plugin_lookup("GpuShare");
    if (rc) {
        gs_placer_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void gs_placer_free(struct gs_placer *p)
{
    if (!p) return;
    for (int i = 0; i < p->nf; i++)
        if (p->f[i].plugin->fini) p->f[i].plugin->fini(p->f[i].state);
    if (p->have_cfg) gs_sched_config_free(&p->cfg);
    gs_cycle_state_free(&p->cs);
    free(p->cand);
    free(p->idx);
    free(p->reject);
    free(p);
}

bool gs__labels_cover(const struct gs_labels *want, const struct gs_labels *have)
{
    for (size_t i = 0; want && i < want->n; i++) {
        const char *v = gs_labels_get(have, want->v[i].key);
        if (!v || strcmp(v, want->v[i].value)) return false;
    }
    return true;
}

static int grow(struct gs_placer *p, size_t n)
{
    if (n <= p->cap) return 0;
    struct gs_node_info **c = realloc(p->cand, n * sizeof *c);
    if (!c) return GS_ENOMEM;
    p->cand = c;
    int32_t *ix = realloc(p->idx, n * sizeof *ix);
    if (!ix) return GS_ENOMEM;
    p->idx = ix;
    uint8_t *r = realloc(p->reject, n);
    if (!r) return GS_ENOMEM;
    p->reject = r;
    p->cap = n;
    return 0;
}

/* Candidate nodes for one pod after every filter; returns how many. */
static size_t filter_pod(struct gs_placer *p, const struct gs_pod *pod, const struct gs_place_req *r)
{
    size_t n = 0;
    int32_t total = gs_cache_node_count(p->cache);
    for (int32_t i = 0; i < total; i++) {
        struct gs_node_info *ni = gs_cache_node(p->cache, i);
        if (!ni->live || !ni->schedulable || (r->excluded && r->excluded[i])) continue;
        if (r->labels && r->labels->n && !gs__labels_cover(r->labels, ni->labels)) continue;
        p->idx[n] = i;
        p->cand[n++] = ni;
    }
    gs_cycle_state_reset(&p->cs);
    for (int k = 0; k < p->nf && n; k++) {
        const struct gs_plugin *pl = p->f[k].plugin;
        if (pl->pre_filter) {
            struct gs_status st = pl->pre_filter(p->f[k].state, &p->cs, pod);
            if (st.code == GS_SKIP) continue;
            if (st.code != GS_SUCCESS) return 0;
        }
        memset(p->reject, 0, n);
        /* The index form reads the cache's dense hot records; same verdicts
         * by the plugin contract (candidates stay in ascending slot order). */
        if (pl->filter_idx) pl->filter_idx(p->f[k].state, &p->cs, pod, p->idx, n, p->reject);
        else pl->filter(p->f[k].state, &p->cs, pod, p->cand, n, p->reject);
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (!p->reject[i]) {
                p->idx[m] = p->idx[i];
                p->cand[m++] = p->cand[i];
            }
        n = m;
    }
    return n;
}

/* Assumes pod on the tightest candidate that takes it. */
static int place_one(struct gs_placer *p, const struct gs_pod *pod, size_t n, int32_t *node)
{
    size_t order[8];
    size_t k = 0;
    /* The few tightest candidates by free GPU, then by index: a reserve may still fail on one. */
    for (size_t i = 0; i < n; i++) {
        size_t j = k < 8 ? k++ : 8;
        if (j == 8) {
            if (p->cand[i]->gpu_milli_free >= p->cand[order[7]]->gpu_milli_free) continue;
            j = 7;
        }
        while (j > 0 && p->cand[order[j - 1]]->gpu_milli_free > p->cand[i]->gpu_milli_free) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (size_t i = 0; i < k; i++) {
        struct gs_node_info *ni = p->cand[order[i]];
        struct gs_assignment a = {.node = ni->idx};
        if (pod->demand.gpu_count > 0 && p->reserve && p->reserve->reserve) {
            struct gs_status st = p->reserve->reserve(NULL, &p->cs, pod, ni, &a);
            if (st.code != GS_SUCCESS) continue;
        }
        if (!gs_cache_fits(p->cache, pod, &a)) continue;
        int rc = gs_cache_assume(p->cache, pod, &a, 0);
        if (rc == GS_EINVAL) continue;
        if (rc) return rc;
        *node = ni->idx;
        return 1;
    }
    return 0;
}

int gs_placer_try(struct gs_placer *p, const struct gs_place_req *r, char *why, size_t len)
{
    int rc = grow(p, (size_t)gs_cache_node_count(p->cache) + 1);
    size_t placed = 0;
    for (; !rc && placed < r->npods; placed++) {
        const struct gs_pod *pod = r->pods[placed];
        int32_t node = -1;
        size_t n = filter_pod(p, pod, r);
        rc = n ? place_one(p, pod, n, &node) : 0;
        if (rc == 1) {
            rc = 0;
            if (r->nodes_out) r->nodes_out[placed] = node;
            continue;
        }
        if (rc == 0) {
            if (why) snprintf(why, len, "pod %s/%s fits no node now (%zu of %zu pods placed)",
                              pod->meta.namespace_ ? pod->meta.namespace_ : "default", pod->meta.name, placed,
                              r->npods);
            rc = 1; /* not placed: stop, forget, answer 0 */
        }
        break;
    }
    if (r->keep && rc == 0 && placed == r->npods) return 1;
    for (size_t i = 0; i < placed; i++) {
        char key[512];
        gs_meta_key(&r->pods[i]->meta, key, sizeof key);
        gs_cache_forget(p->cache, key);
    }
    if (rc == 1) return 0;
    return rc ? rc : 1;
}
