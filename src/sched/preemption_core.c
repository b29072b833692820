/*
 * preemption_core.c - victim search, gang plans, nominations, loop guard;
 * see preemption_core.h.
 *
 * The search works on the real cache and undoes every step: taking a victim
 * out is gs_cache_remove_pod, putting it back is gs_cache_add_bound with the
 * assignment it had, so after a search gs_cache_check() holds and every
 * aggregate is bit-for-bit what it was (the unit and invariant tests check
 * this). Searching on the cache rather than on a model means the fit test is
 * the profile's own filters, whatever they are.
 *
 * Candidates are collected once per search into units sorted by key, so the
 * outcome does not depend on the cache's hash order.
 */
#include "sched/preemption_core.h"

#include "sched/strmap.h"
#include "sched/topology_core.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct vpod {
    const struct gs_pod *pod;
    struct gs_assignment a;
    char *key;
    char *unit; /* "g:ns/group" or "p:ns/name" */
};

struct unit {
    size_t first, n;
    int32_t prio;
    int64_t prio_sum;
    bool gang, removed, eligible;
};

struct history {
    char *key;
    int32_t cls;
    int64_t t;
};

struct nomination {
    char *key;
    const struct gs_pod *pod;
    int32_t node;
    int64_t t;
};

struct gs_preemption {
    struct gs_preempt_opts o;
    const struct gs_clock *clock;
    struct gs_cache *cache;
    struct history *hist;
    size_t nhist, caphist;
    struct nomination *nom;
    size_t nnom, capnom;
    struct gs_preempt_stats stats;
};

struct gs_preemption *gs_preemption_new(const struct gs_preempt_opts *o, const struct gs_clock *clock,
                                        struct gs_cache *cache)
{
    struct gs_preemption *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->o = *o;
    if (p->o.max_per_window <= 0) p->o.max_per_window = 3;
    if (p->o.window_ns <= 0) p->o.window_ns = 600 * GS_NS_PER_SEC;
    if (p->o.nomination_ttl_ns <= 0) p->o.nomination_ttl_ns = 60 * GS_NS_PER_SEC;
    p->clock = clock;
    p->cache = cache;
    return p;
}

void gs_preemption_free(struct gs_preemption *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->nhist; i++) free(p->hist[i].key);
    for (size_t i = 0; i < p->nnom; i++) free(p->nom[i].key);
    free(p->hist);
    free(p->nom);
    free(p);
}

const struct gs_preempt_stats *gs_preempt_stats(const struct gs_preemption *p) { return &p->stats; }
void gs_preempt_count_refusal(struct gs_preemption *p) { p->stats.refused_no_help++; }

/*--- Loop guard ---*/

static int evictions_in_window(const struct gs_preemption *p, const char *key, int32_t cls)
{
    int64_t since = gs_clock_now(p->clock) - p->o.window_ns;
    int n = 0;
    for (size_t i = 0; i < p->nhist; i++)
        n += p->hist[i].t >= since && p->hist[i].cls == cls && !strcmp(p->hist[i].key, key);
    return n;
}

void gs_preempt_record(struct gs_preemption *p, const struct gs_preempt_plan *pl, const struct gs_pod *preemptor)
{
    int64_t now = gs_clock_now(p->clock), since = now - p->o.window_ns;
    size_t w = 0;
    for (size_t i = 0; i < p->nhist; i++) { /* drop what left the window */
        if (p->hist[i].t >= since) p->hist[w++] = p->hist[i];
        else free(p->hist[i].key);
    }
    p->nhist = w;
    p->stats.successes++;
    for (size_t i = 0; i < pl->nvictims; i++) {
        p->stats.victims++;
        if (pl->victims[i]->pod_group) p->stats.gang_victims++;
        if (p->nhist == p->caphist) {
            size_t cap = p->caphist ? p->caphist * 2 : 32;
            struct history *nv = realloc(p->hist, cap * sizeof *nv);
            if (!nv) return;
            p->hist = nv;
            p->caphist = cap;
        }
        char key[GS__KEY_MAX];
        gs__pod_key(pl->victims[i], key, sizeof key);
        char *dup = strdup(key);
        if (dup) p->hist[p->nhist++] = (struct history){dup, preemptor->priority, now};
    }
}

/*--- Candidates ---*/

struct search {
    struct gs_preemption *p;
    struct vpod *v;
    size_t nv, capv;
    struct unit *u;
    size_t nu;
    int err;
};

static void collect(void *arg, const struct gs_pod *pod, const struct gs_assignment *a, bool bound)
{
    struct search *s = arg;
    if (!bound || s->err) return;
    if (s->nv == s->capv) {
        size_t cap = s->capv ? s->capv * 2 : 64;
        struct vpod *nv = realloc(s->v, cap * sizeof *nv);
        if (!nv) {
            s->err = GS_ENOMEM;
            return;
        }
        s->v = nv;
        s->capv = cap;
    }
    char key[GS__KEY_MAX], unit[GS__KEY_MAX + 8];
    gs__pod_key(pod, key, sizeof key);
    if (pod->pod_group && *pod->pod_group)
        snprintf(unit, sizeof unit, "g:%s/%s", pod->meta.namespace_ ? pod->meta.namespace_ : "default", pod->pod_group);
    else snprintf(unit, sizeof unit, "p:%s", key);
    struct vpod *v = &s->v[s->nv];
    v->pod = pod;
    v->a = *a;
    v->key = strdup(key);
    v->unit = strdup(unit);
    if (!v->key || !v->unit) {
        free(v->key), free(v->unit);
        s->err = GS_ENOMEM;
        return;
    }
    s->nv++;
}

static int cmp_vpod(const void *a, const void *b)
{
    const struct vpod *x = a, *y = b;
    int c = strcmp(x->unit, y->unit);
    return c ? c : strcmp(x->key, y->key);
}

static void search_free(struct search *s)
{
    for (size_t i = 0; i < s->nv; i++) free(s->v[i].key), free(s->v[i].unit);
    free(s->v);
    free(s->u);
}

static bool guard_ok(struct search *s, const struct unit *u, int32_t cls)
{
    for (size_t i = u->first; i < u->first + u->n; i++)
        if (evictions_in_window(s->p, s->v[i].key, cls) >= s->p->o.max_per_window) return false;
    return true;
}

static int build_units(struct search *s, const struct gs_pod *preemptor)
{
    gs_cache_foreach_pod(s->p->cache, collect, s);
    if (s->err) return s->err;
    qsort(s->v, s->nv, sizeof *s->v, cmp_vpod);
    s->u = calloc(s->nv ? s->nv : 1, sizeof *s->u);
    if (!s->u) return GS_ENOMEM;
    char own[GS__KEY_MAX + 8] = "";
    if (preemptor->pod_group && *preemptor->pod_group)
        snprintf(own, sizeof own, "g:%s/%s", preemptor->meta.namespace_ ? preemptor->meta.namespace_ : "default",
                 preemptor->pod_group);
    for (size_t i = 0; i < s->nv;) {
        struct unit *u = &s->u[s->nu++];
        u->first = i;
        u->prio = INT32_MIN;
        u->gang = s->v[i].unit[0] == 'g';
        for (; i < s->nv && !strcmp(s->v[i].unit, s->v[u->first].unit); i++) {
            u->n++;
            u->prio_sum += s->v[i].pod->priority;
            if (s->v[i].pod->priority > u->prio) u->prio = s->v[i].pod->priority;
        }
        u->eligible = u->prio < preemptor->priority && strcmp(s->v[u->first].unit, own) != 0;
        if (u->eligible && !guard_ok(s, u, preemptor->priority)) {
            u->eligible = false;
            s->p->stats.guard_skips++;
        }
    }
    return 0;
}

static void unit_remove(struct search *s, struct unit *u)
{
    for (size_t i = u->first; i < u->first + u->n; i++) gs_cache_remove_pod(s->p->cache, s->v[i].key);
    u->removed = true;
}

static void unit_restore(struct search *s, struct unit *u)
{
    for (size_t i = u->first; i < u->first + u->n; i++) gs_cache_add_bound(s->p->cache, s->v[i].pod, &s->v[i].a);
    u->removed = false;
}

static bool touches(const struct search *s, const struct unit *u, int32_t node)
{
    for (size_t i = u->first; i < u->first + u->n; i++)
        if (s->v[i].a.node == node) return true;
    return false;
}

/*--- Search ---*/

/* Does m fit on n now, with a GPU set? Fills a. */
static bool place_on(const struct gs_pod *m, struct gs_node_info *n, gs_preempt_fits_fn fits, void *ctx,
                     struct gs_assignment *a)
{
    if (!fits(ctx, m, n)) return false;
    const struct gs_demand *d = &m->demand;
    struct gs_gpu_choice ch;
    if (!gs_topo_choose(n, d->gpu_count, d->gpu_milli, d->gpu_mem_mib, ~0ULL, &ch)) return false;
    *a = (struct gs_assignment){n->idx, ch.mask, d->gpu_count ? d->gpu_milli : 0, d->gpu_count ? d->gpu_mem_mib : 0};
    return true;
}

struct cost {
    int32_t max_prio;
    int64_t pods, sum;
    int32_t node;
};

static bool cheaper(const struct cost *a, const struct cost *b)
{
    if (a->max_prio != b->max_prio) return a->max_prio < b->max_prio;
    if (a->pods != b->pods) return a->pods < b->pods;
    if (a->sum != b->sum) return a->sum < b->sum;
    return a->node < b->node;
}

/* Victims on node for m: fills pick[] (unit indices) and returns how many, or -1. */
static int victims_on(struct search *s, const struct gs_pod *m, struct gs_node_info *n, gs_preempt_fits_fn fits,
                      void *ctx, size_t *pick, struct cost *cost)
{
    size_t k = 0;
    struct gs_assignment a;
    for (size_t i = 0; i < s->nu; i++)
        if (s->u[i].eligible && !s->u[i].removed && touches(s, &s->u[i], n->idx)) pick[k++] = i;
    if (!k) return -1;
    for (size_t i = 0; i < k; i++) unit_remove(s, &s->u[pick[i]]);
    if (!place_on(m, n, fits, ctx, &a)) {
        for (size_t i = 0; i < k; i++) unit_restore(s, &s->u[pick[i]]);
        return -1;
    }
    /* Reprieve the most important units first; those that no longer fit stay victims. */
    for (size_t i = 1; i < k; i++)
        for (size_t j = i; j > 0; j--) {
            const struct unit *x = &s->u[pick[j]], *y = &s->u[pick[j - 1]];
            if (x->prio < y->prio || (x->prio == y->prio && x->n >= y->n)) break;
            size_t t = pick[j];
            pick[j] = pick[j - 1], pick[j - 1] = t;
        }
    size_t w = 0;
    for (size_t i = 0; i < k; i++) {
        unit_restore(s, &s->u[pick[i]]);
        if (place_on(m, n, fits, ctx, &a)) continue;
        unit_remove(s, &s->u[pick[i]]);
        pick[w++] = pick[i];
    }
    *cost = (struct cost){INT32_MIN, 0, 0, n->idx};
    for (size_t i = 0; i < w; i++) {
        const struct unit *u = &s->u[pick[i]];
        if (u->prio > cost->max_prio) cost->max_prio = u->prio;
        cost->pods += (int64_t)u->n;
        cost->sum += u->prio_sum;
        unit_restore(s, &s->u[pick[i]]);
    }
    return (int)w;
}

/* Places member m on the simulated state (evicting when needed); 0 or -1. */
static int place_member(struct search *s, const struct gs_pod *m, gs_preempt_fits_fn fits, void *ctx,
                        struct gs_assignment *out, size_t *pick, size_t *best_pick)
{
    struct gs_cache *c = s->p->cache;
    struct gs_node_info *best = NULL;
    struct gs_assignment a;
    for (int32_t i = 0; i < gs_cache_node_count(c); i++) {
        struct gs_node_info *n = gs_cache_node(c, i);
        if (!n->live || !n->schedulable || !place_on(m, n, fits, ctx, &a)) continue;
        if (!best || n->gpu_milli_free < best->gpu_milli_free) best = n, *out = a;
    }
    if (best) return 0;
    struct cost bc = {0}, cost;
    int bw = -1;
    int32_t bnode = -1;
    for (int32_t i = 0; i < gs_cache_node_count(c); i++) {
        struct gs_node_info *n = gs_cache_node(c, i);
        if (!n->live || !n->schedulable) continue;
        int w = victims_on(s, m, n, fits, ctx, pick, &cost);
        if (w < 0 || (bw >= 0 && !cheaper(&cost, &bc))) continue;
        bw = w, bc = cost, bnode = i;
        memcpy(best_pick, pick, (size_t)w * sizeof *pick);
    }
    if (bw < 0) return -1;
    for (int i = 0; i < bw; i++) unit_remove(s, &s->u[best_pick[i]]);
    return place_on(m, gs_cache_node(c, bnode), fits, ctx, out) ? 0 : -1;
}

static int make_plan(struct search *s, size_t nmembers, const int32_t *nodes, struct gs_preempt_plan *out)
{
    size_t nvict = 0;
    for (size_t i = 0; i < s->nu; i++) nvict += s->u[i].removed ? s->u[i].n : 0;
    out->victims = calloc(nvict ? nvict : 1, sizeof *out->victims);
    out->nodes = calloc(nmembers ? nmembers : 1, sizeof *out->nodes);
    if (!out->victims || !out->nodes) return GS_ENOMEM;
    out->max_priority = INT32_MIN;
    for (size_t i = 0; i < s->nu; i++) {
        if (!s->u[i].removed) continue;
        for (size_t k = s->u[i].first; k < s->u[i].first + s->u[i].n; k++) out->victims[out->nvictims++] = s->v[k].pod;
        if (s->u[i].prio > out->max_priority) out->max_priority = s->u[i].prio;
    }
    memcpy(out->nodes, nodes, nmembers * sizeof *nodes);
    out->nmembers = nmembers;
    return 0;
}

struct any_ctx {
    const struct gs_pod *pre;
    bool any;
};

static bool same_group(const struct gs_pod *a, const struct gs_pod *b)
{
    if (!a->pod_group || !b->pod_group || strcmp(a->pod_group, b->pod_group)) return false;
    const char *x = a->meta.namespace_ ? a->meta.namespace_ : "default";
    const char *y = b->meta.namespace_ ? b->meta.namespace_ : "default";
    return !strcmp(x, y);
}

static void any_lower(void *arg, const struct gs_pod *pod, const struct gs_assignment *a, bool bound)
{
    (void)a;
    struct any_ctx *x = arg;
    if (!x->any && bound && pod->priority < x->pre->priority && !same_group(pod, x->pre)) x->any = true;
}

int gs_preempt_find(struct gs_preemption *p, const struct gs_pod *const *members, size_t n, gs_preempt_fits_fn fits,
                    void *ctx, struct gs_preempt_plan *out)
{
    memset(out, 0, sizeof *out);
    p->stats.attempts++;
    /* Most failing pods have nobody below them: say so without building anything. */
    struct any_ctx ax = {n ? members[0] : NULL, false};
    if (n) gs_cache_foreach_pod(p->cache, any_lower, &ax);
    if (!ax.any) return GS_ENOENT;
    struct search s = {.p = p};
    int rc = n ? build_units(&s, members[0]) : GS_ENOENT;
    bool any = false;
    for (size_t i = 0; !rc && i < s.nu && !any; i++) any = s.u[i].eligible;
    if (!rc && !any) rc = GS_ENOENT; /* a plan evicts someone: with no candidate there is none */
    size_t *pick = calloc(s.nu ? s.nu : 1, sizeof *pick), *best = calloc(s.nu ? s.nu : 1, sizeof *best);
    int32_t *nodes = calloc(n ? n : 1, sizeof *nodes);
    size_t placed = 0;
    if (!rc && (!pick || !best || !nodes)) rc = GS_ENOMEM;
    for (; !rc && placed < n; placed++) {
        struct gs_assignment a;
        /* Members of the preemptor compete with its priority. */
        if (place_member(&s, members[placed], fits, ctx, &a, pick, best) != 0 ||
            gs_cache_assume(p->cache, members[placed], &a, 0) != 0) {
            rc = GS_ENOENT;
            break;
        }
        nodes[placed] = a.node;
    }
    if (!rc) rc = make_plan(&s, n, nodes, out);
    for (size_t i = 0; i < placed; i++) {
        char key[GS__KEY_MAX];
        gs__pod_key(members[i], key, sizeof key);
        gs_cache_forget(p->cache, key);
    }
    for (size_t i = 0; i < s.nu; i++)
        if (s.u[i].removed) unit_restore(&s, &s.u[i]);
    if (rc) gs_preempt_plan_free(out);
    free(pick), free(best), free(nodes);
    search_free(&s);
    return rc;
}

void gs_preempt_plan_free(struct gs_preempt_plan *pl)
{
    free(pl->victims);
    free(pl->nodes);
    memset(pl, 0, sizeof *pl);
}

/*--- Nominations ---*/

static struct nomination *nom_find(const struct gs_preemption *p, const char *key)
{
    for (size_t i = 0; i < p->nnom; i++)
        if (!strcmp(p->nom[i].key, key)) return &p->nom[i];
    return NULL;
}

int gs_preempt_nominate(struct gs_preemption *p, const struct gs_pod *pod, int32_t node)
{
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    struct nomination *e = nom_find(p, key);
    if (!e) {
        if (p->nnom == p->capnom) {
            size_t cap = p->capnom ? p->capnom * 2 : 8;
            struct nomination *nv = realloc(p->nom, cap * sizeof *nv);
            if (!nv) return GS_ENOMEM;
            p->nom = nv;
            p->capnom = cap;
        }
        char *dup = strdup(key);
        if (!dup) return GS_ENOMEM;
        e = &p->nom[p->nnom++];
        e->key = dup;
    }
    e->pod = pod;
    e->node = node;
    e->t = gs_clock_now(p->clock);
    return 0;
}

void gs_preempt_clear(struct gs_preemption *p, const char *pod_key)
{
    struct nomination *e = nom_find(p, pod_key);
    if (!e) return;
    free(e->key);
    *e = p->nom[--p->nnom];
}

int32_t gs_preempt_nominated_node(const struct gs_preemption *p, const char *pod_key)
{
    const struct nomination *e = nom_find(p, pod_key);
    return e && gs_clock_now(p->clock) - e->t <= p->o.nomination_ttl_ns ? e->node : -1;
}

bool gs_preempt_blocked(struct gs_preemption *p, const struct gs_pod *pod, const struct gs_node_info *node)
{
    if (!p->nnom) return false;
    int64_t now = gs_clock_now(p->clock), cpu = 0, mem = 0, milli = 0;
    int32_t whole = 0;
    bool any = false;
    for (size_t i = 0; i < p->nnom; i++) {
        const struct nomination *e = &p->nom[i];
        if (e->node != node->idx || now - e->t > p->o.nomination_ttl_ns || e->pod == pod ||
            e->pod->priority < pod->priority)
            continue;
        any = true;
        const struct gs_demand *d = &e->pod->demand;
        cpu += d->cpu_milli;
        mem += d->mem_bytes;
        milli += (int64_t)d->gpu_count * d->gpu_milli;
        if (d->gpu_milli == GS_GPU_MILLI) whole += d->gpu_count;
    }
    if (!any) return false;
    const struct gs_demand *d = &pod->demand;
    if (cpu + d->cpu_milli > node->cpu_alloc - node->cpu_used) return true;
    if (mem + d->mem_bytes > node->mem_alloc - node->mem_used) return true;
    if (milli + (int64_t)d->gpu_count * d->gpu_milli > node->gpu_milli_free) return true;
    return d->gpu_milli == GS_GPU_MILLI && whole + d->gpu_count > node->gpus_whole_free;
}
