/*
 * interpodaffinity.c - "InterPodAffinity": kube's podAffinity and
 * podAntiAffinity, required (Filter) and preferred (Score).
 *
 * Semantics are kube-scheduler's plugin (framework/plugins/interpodaffinity),
 * counted per topology pair (key, value) over the pods in the cache, assumed
 * ones included:
 *
 *  PreFilter  affinity counts: for every existing pod that matches ALL the
 *             incoming pod's required affinity terms, +1 on each term's
 *             pair at the pod's node; anti-affinity counts: +1 on a term's
 *             pair for every existing pod that term matches; existing
 *             anti-affinity counts: +1 on the pair of each required
 *             anti-affinity term of an existing pod that matches the
 *             incoming pod. Counts are per pair, so two terms with the same
 *             key share them, as in kube.
 *  Filter     a node fails when it lacks a required affinity term's key or
 *             that pair has no match (unresolvable: adding pods is not what
 *             preemption does) - except for the first pod of a group whose
 *             terms match itself, allowed anywhere while no pair has any
 *             match; when an anti-affinity term's pair has a match; when any
 *             of its labels is a pair with an existing pod's anti-affinity.
 *  PreScore   per pair: + weight for each existing pod the incoming pod's
 *             preferred affinity terms match, - weight for its preferred
 *             anti-affinity; + hardPodAffinityWeight for each existing pod
 *             whose required affinity matches the incoming pod; +/- weight
 *             for existing pods' preferred (anti-)affinity matching it.
 *  Score      the sum over the node's pairs; NormalizeScore maps min..max to
 *             0..100 (all 0 when nothing counted), with kube's float math.
 *
 * Namespaces of a term: its namespaces list, those whose labels match its
 * namespaceSelector (labels from gs_cache_namespace_labels; {} matches all),
 * or, neither given, its own pod's namespace. matchLabelKeys are merged into
 * the selector at decode (core/pod_affinity.c).
 *
 * Cost. A cycle for a pod with required terms walks every pod in the cache
 * once and every node once per distinct topology key; the verdicts are
 * computed there, so Filter is one lookup per node. The common pod pays
 * nothing: with no terms of its own and no pod in the cache holding a
 * required anti-affinity term (an O(1) cache counter) PreFilter says Skip,
 * and with no preferred terms and no pod with any term PreScore says Skip.
 * Args: hardPodAffinityWeight (0..100, default 1),
 * ignorePreferredTermsOfExistingPods (default false).
 */
#include "sched/affinity_hint.h"
#include "sched/plugin.h"
#include "sched/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_FILTER "InterPodAffinity/filter"
#define KEY_SCORE "InterPodAffinity/score"

enum { REJ_AFFINITY = 1 | GS_REJECT_UNRESOLVABLE, REJ_ANTI = 2, REJ_EXISTING_ANTI = 3 };

struct ipa_state {
    struct gs_handle h;
    int64_t hard_weight;
    bool ignore_existing_preferred;
};

/*--- Matching ---*/

static const char *ns_of(const struct gs_pod *p) { return p->meta.namespace_ ? p->meta.namespace_ : "default"; }

/* Does term t of a pod in namespace owner_ns match pod target? */
static bool term_matches(const struct gs_cache *c, const struct gs_pod_affinity_term *t, const char *owner_ns,
                         const struct gs_pod *target)
{
    if (!t->has_selector) return false;
    const char *ns = ns_of(target);
    bool ns_ok = false;
    if (!t->nnamespaces && !t->has_ns_selector) ns_ok = !strcmp(owner_ns, ns);
    for (size_t i = 0; i < t->nnamespaces && !ns_ok; i++) ns_ok = !strcmp(t->namespaces[i], ns);
    if (!ns_ok && t->has_ns_selector) ns_ok = gs_selector_matches(&t->ns_selector, gs_cache_namespace_labels(c, ns));
    return ns_ok && gs_selector_matches(&t->selector, &target->meta.labels);
}

/* kube's podMatchesAllAffinityTerms: false for no terms. */
static bool matches_all(const struct gs_cache *c, const struct gs_pod_affinity_term *v, size_t n, const char *owner_ns,
                        const struct gs_pod *target)
{
    if (!n) return false;
    for (size_t i = 0; i < n; i++)
        if (!term_matches(c, &v[i], owner_ns, target)) return false;
    return true;
}

/*--- Topology keys: node slot -> domain (value of the key) ---*/

struct tkey {
    const char *key; /* borrowed from a term of a pod in the cache or the incoming pod */
    int32_t *dom;    /* per slot: domain index, -1 when the node lacks the key */
    int32_t ndom;
    int64_t *cnt[3]; /* per domain; meaning per user (filter: aff, anti, existing anti; score: [0]) */
    bool used;
};

struct topo {
    struct gs_cache *cache;
    struct tkey *v;
    size_t n, cap;
    int32_t slots;
    int err;
};

static void topo_free(struct topo *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].dom);
        for (int k = 0; k < 3; k++) free(t->v[i].cnt[k]);
    }
    free(t->v);
}

/* Index of key's entry, built on first use; -1 when out of memory. */
static int topo_key(struct topo *t, const char *key)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].key, key)) return (int)i;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 4;
        struct tkey *nv = realloc(t->v, cap * sizeof *nv);
        if (!nv) return t->err = GS_ENOMEM, -1;
        t->v = nv, t->cap = cap;
    }
    struct tkey *k = &t->v[t->n];
    memset(k, 0, sizeof *k);
    k->key = key;
    size_t slots = (size_t)(t->slots > 0 ? t->slots : 1);
    if (!(k->dom = malloc(slots * sizeof *k->dom))) return t->err = GS_ENOMEM, -1;
    struct gs__strmap vals;
    gs__strmap_init(&vals);
    for (int32_t i = 0; i < t->slots; i++) {
        const struct gs_node_info *n = gs_cache_node(t->cache, i);
        const char *v = n->live ? gs_labels_get(n->labels, key) : NULL;
        k->dom[i] = -1;
        if (!v) continue;
        void *got = gs__strmap_get(&vals, v);
        if (!got && gs__strmap_put(&vals, v, got = (void *)(uintptr_t)(++k->ndom)) != 0) {
            gs__strmap_free(&vals);
            free(k->dom);
            return t->err = GS_ENOMEM, -1;
        }
        k->dom[i] = (int32_t)((uintptr_t)got - 1);
    }
    gs__strmap_free(&vals);
    t->n++;
    return (int)(t->n - 1);
}

/* Adds w to counter which of key's domain at node; marks the key used. */
static void topo_add(struct topo *t, const char *key, int which, int32_t node, int64_t w)
{
    int i = topo_key(t, key);
    if (i < 0 || node < 0 || node >= t->slots) return;
    struct tkey *k = &t->v[i];
    if (!k->cnt[which] && !(k->cnt[which] = calloc((size_t)(k->ndom ? k->ndom : 1), sizeof *k->cnt[which]))) {
        t->err = GS_ENOMEM;
        return;
    }
    int32_t d = k->dom[node];
    if (d < 0) return;
    k->cnt[which][d] += w;
    k->used = true;
}

static int64_t topo_get(const struct topo *t, int i, int which, int32_t node)
{
    const struct tkey *k = &t->v[i];
    int32_t d = node >= 0 && node < t->slots ? k->dom[node] : -1;
    return d >= 0 && k->cnt[which] ? k->cnt[which][d] : 0;
}

/*--- PreFilter / Filter ---*/

enum { C_AFF, C_ANTI, C_EXIST };

struct filt {
    uint8_t *verdict; /* per slot */
    int32_t slots;
};

static void filt_free(void *p)
{
    struct filt *f = p;
    if (!f) return;
    free(f->verdict);
    free(f);
}

struct count_ctx {
    struct topo *t;
    const struct gs_pod *pod;
    const struct gs_pod_affinity *pa; /* the incoming pod's, may be NULL */
};

/* Incoming terms against every existing pod. */
static void count_incoming(void *arg, const struct gs_pod *p, const struct gs_assignment *a, bool bound)
{
    (void)bound;
    struct count_ctx *x = arg;
    const struct gs_pod_affinity *pa = x->pa;
    const char *own = ns_of(x->pod);
    if (matches_all(x->t->cache, pa->req_aff, pa->nreq_aff, own, p))
        for (size_t i = 0; i < pa->nreq_aff; i++) topo_add(x->t, pa->req_aff[i].topology_key, C_AFF, a->node, 1);
    for (size_t i = 0; i < pa->nreq_anti; i++)
        if (term_matches(x->t->cache, &pa->req_anti[i], own, p))
            topo_add(x->t, pa->req_anti[i].topology_key, C_ANTI, a->node, 1);
}

/* Existing pods' required anti-affinity against the incoming pod. */
static void count_existing(void *arg, const struct gs_pod *p, const struct gs_assignment *a)
{
    struct count_ctx *x = arg;
    const struct gs_pod_affinity *ea = p->pod_affinity;
    for (size_t i = 0; i < ea->nreq_anti; i++)
        if (term_matches(x->t->cache, &ea->req_anti[i], ns_of(p), x->pod))
            topo_add(x->t, ea->req_anti[i].topology_key, C_EXIST, a->node, 1);
}

static uint8_t verdict_of(const struct topo *t, const struct gs_pod *pod, int32_t node, int64_t aff_total,
                          bool self_all)
{
    const struct gs_pod_affinity *pa = pod->pod_affinity;
    if (pa && pa->nreq_aff) {
        bool exist = true;
        for (size_t i = 0; i < pa->nreq_aff; i++) {
            int k = -1;
            for (size_t j = 0; j < t->n && k < 0; j++)
                if (!strcmp(t->v[j].key, pa->req_aff[i].topology_key)) k = (int)j;
            if (k < 0 || t->v[k].dom[node] < 0) return REJ_AFFINITY;
            if (topo_get(t, k, C_AFF, node) <= 0) exist = false;
        }
        if (!exist && !(aff_total == 0 && self_all)) return REJ_AFFINITY;
    }
    for (size_t i = 0; pa && i < pa->nreq_anti; i++)
        for (size_t j = 0; j < t->n; j++)
            if (!strcmp(t->v[j].key, pa->req_anti[i].topology_key) && topo_get(t, (int)j, C_ANTI, node) > 0)
                return REJ_ANTI;
    for (size_t j = 0; j < t->n; j++)
        if (topo_get(t, (int)j, C_EXIST, node) > 0) return REJ_EXISTING_ANTI;
    return 0;
}

static struct gs_status ipa_pre_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    struct ipa_state *s = state;
    struct gs_cache *c = s->h.cache;
    const struct gs_pod_affinity *pa = pod->pod_affinity;
    bool own = pa && (pa->nreq_aff || pa->nreq_anti);
    if (!own && gs_cache_required_anti_affinity_pods(c) == 0) return gs_status_make(GS_SKIP, NULL);
    struct topo t = {.cache = c, .slots = gs_cache_node_count(c)};
    struct count_ctx x = {.t = &t, .pod = pod, .pa = pa};
    gs_cache_foreach_affinity_pod(c, count_existing, &x);
    bool exist_any = false;
    for (size_t j = 0; j < t.n && !exist_any; j++) exist_any = t.v[j].used;
    if (!own && !exist_any && !t.err) {
        topo_free(&t);
        return gs_status_make(GS_SKIP, NULL);
    }
    if (own) {
        /* Keys of the incoming terms exist even when nothing matches: Filter reads their domains. */
        for (size_t i = 0; i < pa->nreq_aff; i++) topo_key(&t, pa->req_aff[i].topology_key);
        for (size_t i = 0; i < pa->nreq_anti; i++) topo_key(&t, pa->req_anti[i].topology_key);
        gs_cache_foreach_pod(c, count_incoming, &x);
    }
    struct filt *f = calloc(1, sizeof *f);
    if (f) f->verdict = calloc((size_t)(t.slots > 0 ? t.slots : 1), 1);
    if (!f || !f->verdict || t.err) {
        filt_free(f);
        topo_free(&t);
        return gs_status_make(GS_ERROR, "out of memory");
    }
    f->slots = t.slots;
    int64_t aff_total = 0; /* kube's len(affinityCounts): pairs with a match */
    for (size_t j = 0; j < t.n; j++)
        for (int32_t d = 0; t.v[j].cnt[C_AFF] && d < t.v[j].ndom; d++) aff_total += t.v[j].cnt[C_AFF][d] > 0;
    bool self_all = pa && matches_all(c, pa->req_aff, pa->nreq_aff, ns_of(pod), pod);
    for (int32_t i = 0; i < t.slots; i++)
        if (gs_cache_node(c, i)->live) f->verdict[i] = verdict_of(&t, pod, i, aff_total, self_all);
    topo_free(&t);
    if (gs_cycle_state_write(cs, KEY_FILTER, f, NULL, filt_free) != 0) return gs_status_make(GS_ERROR, "out of memory");
    return (struct gs_status){0};
}

static void ipa_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                       struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)state, (void)pod;
    const struct filt *f = gs_cycle_state_read(cs, KEY_FILTER);
    for (size_t i = 0; f && i < n; i++) {
        int32_t k = nodes[i]->idx;
        reject[i] = k >= 0 && k < f->slots ? f->verdict[k] : REJ_AFFINITY;
    }
}

static void ipa_filter_idx(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod, const int32_t *idx,
                           size_t n, uint8_t *reject)
{
    (void)state, (void)pod;
    const struct filt *f = gs_cycle_state_read(cs, KEY_FILTER);
    for (size_t i = 0; f && i < n; i++) reject[i] = idx[i] >= 0 && idx[i] < f->slots ? f->verdict[idx[i]] : REJ_AFFINITY;
}

static int ipa_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)state, (void)pod;
    /* The code arrives with or without the unresolvable bit (diagnosis, explain). */
    if (GS_REJECT_CODE(code) == GS_REJECT_CODE(REJ_AFFINITY)) return snprintf(buf, len, "node(s) didn't match pod affinity rules");
    if (GS_REJECT_CODE(code) == REJ_ANTI) return snprintf(buf, len, "node(s) didn't match pod anti-affinity rules");
    return snprintf(buf, len, "node(s) didn't satisfy existing pods anti-affinity rules");
}

/*--- PreScore / Score ---*/

struct sc {
    struct topo t;
};

static void sc_free(void *p)
{
    struct sc *s = p;
    if (!s) return;
    topo_free(&s->t);
    free(s);
}

struct score_ctx {
    struct ipa_state *s;
    struct topo *t;
    const struct gs_pod *pod;
};

static void add_terms(struct score_ctx *x, const struct gs_pod_affinity_term *v, size_t n, const char *owner_ns,
                      const struct gs_pod *target, int32_t node, int64_t sign, int64_t fixed)
{
    for (size_t i = 0; i < n; i++)
        if (term_matches(x->t->cache, &v[i], owner_ns, target))
            topo_add(x->t, v[i].topology_key, 0, node, sign * (fixed ? fixed : v[i].weight));
}

/* kube's processExistingPod. */
static void score_pod(void *arg, const struct gs_pod *p, const struct gs_assignment *a)
{
    struct score_ctx *x = arg;
    const struct gs_pod_affinity *pa = x->pod->pod_affinity, *ea = p->pod_affinity;
    const char *own = ns_of(x->pod), *theirs = ns_of(p);
    const struct gs_node_info *n = gs_cache_node(x->t->cache, a->node);
    if (!n->live || !n->labels->n) return;
    if (pa) {
        add_terms(x, pa->pref_aff, pa->npref_aff, own, p, a->node, 1, 0);
        add_terms(x, pa->pref_anti, pa->npref_anti, own, p, a->node, -1, 0);
    }
    if (!ea) return;
    if (x->s->hard_weight > 0) add_terms(x, ea->req_aff, ea->nreq_aff, theirs, x->pod, a->node, 1, x->s->hard_weight);
    add_terms(x, ea->pref_aff, ea->npref_aff, theirs, x->pod, a->node, 1, 0);
    add_terms(x, ea->pref_anti, ea->npref_anti, theirs, x->pod, a->node, -1, 0);
}

static void score_any(void *arg, const struct gs_pod *p, const struct gs_assignment *a, bool bound)
{
    (void)bound;
    score_pod(arg, p, a);
}

static struct gs_status ipa_pre_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                      struct gs_node_info *const *nodes, size_t n)
{
    (void)nodes;
    struct ipa_state *s = state;
    struct gs_cache *c = s->h.cache;
    const struct gs_pod_affinity *pa = pod->pod_affinity;
    bool own = pa && (pa->npref_aff || pa->npref_anti);
    if (!n) return (struct gs_status){0};
    if (!own && (s->ignore_existing_preferred || gs_cache_affinity_pods(c) == 0)) return gs_status_make(GS_SKIP, NULL);
    struct sc *sc = calloc(1, sizeof *sc);
    if (!sc) return gs_status_make(GS_ERROR, "out of memory");
    sc->t = (struct topo){.cache = c, .slots = gs_cache_node_count(c)};
    struct score_ctx x = {s, &sc->t, pod};
    /* Only pods with terms can count unless the incoming pod has preferred terms of its own. */
    if (own) gs_cache_foreach_pod(c, score_any, &x);
    else gs_cache_foreach_affinity_pod(c, score_pod, &x);
    bool any = false;
    for (size_t i = 0; i < sc->t.n && !any; i++) any = sc->t.v[i].used;
    if (sc->t.err || !any) {
        int err = sc->t.err;
        sc_free(sc);
        return err ? gs_status_make(GS_ERROR, "out of memory") : gs_status_make(GS_SKIP, NULL);
    }
    if (gs_cycle_state_write(cs, KEY_SCORE, sc, NULL, sc_free) != 0) return gs_status_make(GS_ERROR, "out of memory");
    return (struct gs_status){0};
}

static struct gs_status ipa_pre_score_idx(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                          const int32_t *idx, size_t n)
{
    (void)idx;
    return ipa_pre_score(state, cs, pod, NULL, n);
}

static int64_t node_score(const struct sc *sc, int32_t node)
{
    int64_t v = 0;
    for (size_t k = 0; k < sc->t.n; k++)
        if (sc->t.v[k].used) v += topo_get(&sc->t, (int)k, 0, node);
    return v;
}

static void ipa_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)state, (void)pod;
    const struct sc *sc = gs_cycle_state_read(cs, KEY_SCORE);
    for (size_t i = 0; i < n; i++) scores[i] = sc ? node_score(sc, nodes[i]->idx) : 0;
}

static void ipa_score_idx(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod, const int32_t *idx,
                          size_t n, int64_t *scores)
{
    (void)state, (void)pod;
    const struct sc *sc = gs_cycle_state_read(cs, KEY_SCORE);
    for (size_t i = 0; i < n; i++) scores[i] = sc ? node_score(sc, idx[i]) : 0;
}

static void ipa_normalize(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                          struct gs_node_info *const *nodes, int64_t *scores, size_t n)
{
    (void)state, (void)pod, (void)nodes;
    if (!gs_cycle_state_read(cs, KEY_SCORE) || !n) return;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < n; i++) lo = scores[i] < lo ? scores[i] : lo, hi = scores[i] > hi ? scores[i] : hi;
    int64_t diff = hi - lo;
    for (size_t i = 0; i < n; i++) {
        double f = 0;
        if (diff > 0) f = (double)GS_MAX_SCORE * ((double)(scores[i] - lo) / (double)diff);
        scores[i] = (int64_t)f;
    }
}

/*--- Queueing hint ---*/

bool gs_affinity_pod_event_helps(const struct gs_cache *c, const struct gs_pod *waiting, const struct gs_pod *changed,
                                 bool arrived)
{
    const struct gs_pod_affinity *pa = waiting->pod_affinity, *ea = changed->pod_affinity;
    const char *own = ns_of(waiting);
    if (arrived) /* a pod on a node can satisfy a required affinity term */
        return pa && matches_all(c, pa->req_aff, pa->nreq_aff, own, changed);
    /* A pod that left can lift an anti-affinity in either direction. */
    for (size_t i = 0; pa && i < pa->nreq_anti; i++)
        if (term_matches(c, &pa->req_anti[i], own, changed)) return true;
    for (size_t i = 0; ea && i < ea->nreq_anti; i++)
        if (term_matches(c, &ea->req_anti[i], ns_of(changed), waiting)) return true;
    /* The last match of a self-affine group leaving can let its first-pod rule apply again. */
    return pa && matches_all(c, pa->req_aff, pa->nreq_aff, own, changed) &&
           matches_all(c, pa->req_aff, pa->nreq_aff, own, waiting);
}

/*--- Lifecycle ---*/

static int ipa_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    int err = 0;
    int64_t hard = 1;
    bool ignore = false;
    const json_t *v = json_object_get(args, "hardPodAffinityWeight");
    if (v && (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 100)) {
        gs_diags_add(d, "args.hardPodAffinityWeight", "must be an integer from 0 to 100");
        err = GS_EINVAL;
    } else if (v) {
        hard = json_integer_value(v);
    }
    v = json_object_get(args, "ignorePreferredTermsOfExistingPods");
    if (v && !json_is_boolean(v)) {
        gs_diags_add(d, "args.ignorePreferredTermsOfExistingPods", "must be true or false");
        err = GS_EINVAL;
    } else if (v) {
        ignore = json_is_true(v);
    }
    if (err) return err;
    struct ipa_state *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->h = *h;
    s->hard_weight = hard;
    s->ignore_existing_preferred = ignore;
    *state = s;
    return 0;
}

/* Node classes (plugin.h): only when every pass would be skipped, as then
 * no node's topology domain matters. */
static bool ipa_by_class(void *state, const struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)cs;
    const struct ipa_state *s = state;
    const struct gs_pod_affinity *pa = pod->pod_affinity;
    bool own = pa && (pa->nreq_aff || pa->nreq_anti || pa->npref_aff || pa->npref_anti);
    return !own && gs_cache_affinity_pods(s->h.cache) == 0;
}

const struct gs_plugin gs_plugin_inter_pod_affinity = {
    .name = "InterPodAffinity",
    .by_class = ipa_by_class,
    .init = ipa_init,
    .fini = free,
    .pre_filter = ipa_pre_filter,
    .filter = ipa_filter,
    .filter_idx = ipa_filter_idx,
    .reason = ipa_reason,
    .pre_score = ipa_pre_score,
    .pre_score_idx = ipa_pre_score_idx,
    .score = ipa_score,
    .score_idx = ipa_score_idx,
    .normalize_score = ipa_normalize,
};
