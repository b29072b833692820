/*
 * pod_topology_spread.c - "PodTopologySpread": kube's topologySpreadConstraints.
 *
 * For each constraint (maxSkew, topologyKey, whenUnsatisfiable, labelSelector,
 * minDomains) PreFilter counts, per domain (value of topologyKey), the pods in
 * the cache - assumed ones included, so a pod reserved a moment ago counts -
 * that live in the pod's namespace and match the selector. Domains are those
 * of the nodes that carry the key and pass the pod's nodeSelector and required
 * node affinity (kube's nodeAffinityPolicy: Honor). Counting from the cache
 * every cycle costs O(pods) but can never drift from reality, which counts
 * kept through Reserve/Unreserve could (pods also leave by completing).
 *
 * Filter (DoNotSchedule): a node without the key fails (unresolvable), and so
 * does one where count + 1 - min over domains would exceed maxSkew; with
 * fewer domains than minDomains the minimum is taken as 0. Score
 * (ScheduleAnyway): fewer matching pods in the node's domain is better,
 * normalised to 0..100.
 */
#include "sched/plugin.h"
#include "sched/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY "PodTopologySpread"

enum { REJ_NO_LABEL = 1 | GS_REJECT_UNRESOLVABLE, REJ_SKEW = 2 };

struct con {
    const struct gs_spread_constraint *c;
    int32_t *node_dom;    /* per node slot: domain index or -1 */
    int64_t *count;       /* per domain */
    size_t ndom;
    int64_t min;
    bool self_match;
};

struct cyc {
    struct con *v;
    size_t n;
    int32_t slots;
};

static void cyc_free(void *p)
{
    struct cyc *c = p;
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) free(c->v[i].node_dom), free(c->v[i].count);
    free(c->v);
    free(c);
}

struct count_ctx {
    const struct gs_pod *pod;
    struct cyc *c;
};

static bool same_ns(const struct gs_pod *a, const struct gs_pod *b)
{
    const char *x = a->meta.namespace_ ? a->meta.namespace_ : "default";
    const char *y = b->meta.namespace_ ? b->meta.namespace_ : "default";
    return !strcmp(x, y);
}

static void count_pod(void *arg, const struct gs_pod *pod, const struct gs_assignment *a, bool bound)
{
    (void)bound;
    struct count_ctx *x = arg;
    if (!same_ns(pod, x->pod) || a->node < 0 || a->node >= x->c->slots) return;
    for (size_t i = 0; i < x->c->n; i++) {
        struct con *k = &x->c->v[i];
        int32_t d = k->node_dom[a->node];
        if (d >= 0 && gs_selector_matches(&k->c->label_selector, &pod->meta.labels)) k->count[d]++;
    }
}

static bool eligible(const struct gs_pod *pod, const struct gs_node_info *n)
{
    if (!n->live || !n->schedulable) return false;
    for (size_t i = 0; i < pod->node_selector.n; i++) {
        const char *v = gs_labels_get(n->labels, pod->node_selector.v[i].key);
        if (!v || strcmp(v, pod->node_selector.v[i].value)) return false;
    }
    return gs_node_affinity_required_matches(&pod->node_affinity, n->labels, n->name);
}

static int build(struct gs_cache *cache, const struct gs_pod *pod, struct con *k, int32_t slots)
{
    struct gs__strmap doms;
    gs__strmap_init(&doms);
    k->node_dom = malloc((size_t)(slots ? slots : 1) * sizeof *k->node_dom);
    k->count = calloc((size_t)(slots ? slots : 1), sizeof *k->count);
    if (!k->node_dom || !k->count) return GS_ENOMEM;
    for (int32_t i = 0; i < slots; i++) {
        const struct gs_node_info *n = gs_cache_node(cache, i);
        const char *v = eligible(pod, n) ? gs_labels_get(n->labels, k->c->topology_key) : NULL;
        k->node_dom[i] = -1;
        if (!v) continue;
        void *got = gs__strmap_get(&doms, v);
        if (!got) {
            got = (void *)(uintptr_t)(++k->ndom);
            if (gs__strmap_put(&doms, v, got) != 0) {
                gs__strmap_free(&doms);
                return GS_ENOMEM;
            }
        }
        k->node_dom[i] = (int32_t)((uintptr_t)got - 1);
    }
    gs__strmap_free(&doms);
    k->self_match = gs_selector_matches(&k->c->label_selector, &pod->meta.labels);
    return 0;
}

static struct gs_status pts_pre_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    const struct gs_handle *h = state;
    if (!pod->nspread) return (struct gs_status){.code = GS_SKIP};
    struct cyc *c = calloc(1, sizeof *c);
    if (!c || !(c->v = calloc(pod->nspread, sizeof *c->v))) {
        free(c);
        return gs_status_make(GS_ERROR, "out of memory");
    }
    c->slots = gs_cache_node_count(h->cache);
    int err = 0;
    for (size_t i = 0; i < pod->nspread && !err; i++) {
        c->v[c->n].c = &pod->spread[i];
        err = build(h->cache, pod, &c->v[c->n++], c->slots);
    }
    if (err) {
        cyc_free(c);
        return gs_status_make(GS_ERROR, "out of memory");
    }
    struct count_ctx x = {pod, c};
    gs_cache_foreach_pod(h->cache, count_pod, &x);
    for (size_t i = 0; i < c->n; i++) {
        struct con *k = &c->v[i];
        k->min = k->ndom ? INT64_MAX : 0;
        for (size_t d = 0; d < k->ndom; d++)
            if (k->count[d] < k->min) k->min = k->count[d];
        if ((int64_t)k->ndom < k->c->min_domains) k->min = 0;
    }
    if (gs_cycle_state_write(cs, KEY, c, NULL, cyc_free) != 0) return gs_status_make(GS_ERROR, "out of memory");
    return (struct gs_status){0};
}

static void pts_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                       struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)state, (void)pod;
    const struct cyc *c = gs_cycle_state_read(cs, KEY);
    for (size_t k = 0; c && k < c->n; k++) {
        const struct con *x = &c->v[k];
        if (x->c->when_unsatisfiable != GS_DO_NOT_SCHEDULE) continue;
        for (size_t i = 0; i < n; i++) {
            if (reject[i]) continue;
            int32_t d = nodes[i]->idx < c->slots ? x->node_dom[nodes[i]->idx] : -1;
            if (d < 0) reject[i] = REJ_NO_LABEL;
            else if (x->count[d] + (x->self_match ? 1 : 0) - x->min > x->c->max_skew) reject[i] = REJ_SKEW;
        }
    }
}

static int pts_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)state, (void)pod;
    if (code == REJ_NO_LABEL) return snprintf(buf, len, "node(s) didn't match pod topology spread constraints (missing required label)");
    return snprintf(buf, len, "node(s) didn't match pod topology spread constraints");
}

static void pts_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)state, (void)pod;
    const struct cyc *c = gs_cycle_state_read(cs, KEY);
    for (size_t k = 0; c && k < c->n; k++) {
        const struct con *x = &c->v[k];
        if (x->c->when_unsatisfiable != GS_SCHEDULE_ANYWAY) continue;
        for (size_t i = 0; i < n; i++) {
            int32_t d = nodes[i]->idx < c->slots ? x->node_dom[nodes[i]->idx] : -1;
            scores[i] -= d < 0 ? x->min + x->c->max_skew + 1 : x->count[d];
        }
    }
}

/* Does the pod have a ScheduleAnyway constraint (else every score is 0)? */
static bool has_soft(const struct gs_pod *pod)
{
    for (size_t i = 0; i < pod->nspread; i++)
        if (pod->spread[i].when_unsatisfiable == GS_SCHEDULE_ANYWAY) return true;
    return false;
}

static void pts_normalize(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                          struct gs_node_info *const *nodes, int64_t *scores, size_t n)
{
    (void)state, (void)cs, (void)nodes;
    if (!n) return;
    if (!has_soft(pod)) { /* all scores 0, so hi == lo below: every node gets the maximum */
        for (size_t i = 0; i < n; i++) scores[i] = GS_MAX_SCORE;
        return;
    }
    int64_t lo = scores[0], hi = scores[0];
    for (size_t i = 1; i < n; i++) lo = scores[i] < lo ? scores[i] : lo, hi = scores[i] > hi ? scores[i] : hi;
    for (size_t i = 0; i < n; i++) scores[i] = hi == lo ? GS_MAX_SCORE : (scores[i] - lo) * GS_MAX_SCORE / (hi - lo);
}

static int pts_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    (void)args, (void)d;
    struct gs_handle *copy = malloc(sizeof *copy);
    if (!copy) return GS_ENOMEM;
    *copy = *h;
    *state = copy;
    return 0;
}

/* Without constraints Filter is skipped and every node scores the maximum.
 * With them the domains come from the topology key (often the hostname, left
 * out of a class) and eligibility may match the node's name: per node. */
static bool pts_by_class(void *state, const struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)state, (void)cs;
    return pod->nspread == 0;
}

const struct gs_plugin gs_plugin_pod_topology_spread = {
    .name = "PodTopologySpread",
    .init = pts_init,
    .fini = free,
    .pre_filter = pts_pre_filter,
    .filter = pts_filter,
    .reason = pts_reason,
    .score = pts_score,
    .normalize_score = pts_normalize,
    .by_class = pts_by_class,
};
