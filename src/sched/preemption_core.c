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
 * Candidates are sorted into units by key, so the outcome does not depend on
 * the cache's hash order; they are kept per preemptor priority while the
 * cache's pods are unchanged (struct cands), and followed through binds and
 * evictions they can follow exactly (cands_follow). The search proper is the plain
 * one (remove every candidate on a node, test, give units back from the most
 * important) with shortcuts that each prove the skipped work would fail or
 * lose: arithmetic screens (may_fit, kept for a gang's later members on the
 * nodes not changed since), one batch fit test for "fits as things are"
 * (fit_now) and a lower bound on a node's cost (candidates, or a followed
 * node's summary). What the
 * plain search changed as a side effect is reproduced (touch_skipped), so
 * plans and every later decision are the same; docs/SCHED_PERFORMANCE.md.
 */
#include "sched/preemption_core.h"

#include "sched/strmap.h"
#include "sched/topology_core.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct history {
    char *key;
    int32_t cls;
    int64_t t;
};

struct nomination {
    char *key;
    char *grp; /* the gang counted in nom_grp for it (grp_key), or NULL */
    const struct gs_pod *pod;
    int32_t node;
    int64_t t;
};

struct nom_grp {
    char *key;
    size_t n;
};

/* Evictions in the window per pod key for one class: built from the
 * history when a search needs it and kept while it holds (no new record,
 * no entry has left the window since). */
struct guard {
    struct {
        const char *key;
        uint64_t h;
        int n;
    } *t;
    size_t cap;
    bool valid, empty;
    int most; /* the highest count: no key is spared while it is below the limit */
    int32_t cls;
    int64_t built, until; /* valid for clock times in [built, until] */
};

enum {
    BUF_UNITS, BUF_FIRST, BUF_BUMPED, BUF_MUST, BUF_CAND, BUF_OK, BUF_POS, BUF_NODE_UNITS, BUF_PICK, BUF_BEST, BUF_RM,
    BUF_BLIST, BUF_SCREEN, NBUF
};

struct gs_preemption {
    struct gs_preempt_opts o;
    const struct gs_clock *clock;
    struct gs_cache *cache;
    struct history *hist;
    size_t nhist, caphist;
    struct nomination *nom;
    size_t nnom, capnom;
    struct gs__strmap nom_ix; /* key -> 1 + index in nom (keys borrowed from nom) */
    struct gs__strmap nom_grp; /* gang (grp_key) -> struct nom_grp: how many nominations are its pods' */
    struct gs_preempt_stats stats;
    struct guard guard;
    struct cands *memo[4]; /* candidates per preemptor priority */
    unsigned memo_next;
    struct pindex *ix;     /* every bound pod in unit order, followed from the cache */
    uint32_t stamp;        /* the search under way (struct unit.mark) */
    bool no_follow;        /* gs__preempt_set_follow(false) */
    bool nom_grp_lost;     /* out of memory counting nom_grp: not read */
    /* A search's arrays, kept for the next one (sized by units or nodes:
     * allocating them afresh each time faulted their pages in again). */
    void *buf[NBUF];
    size_t bufcap[NBUF];
};

/* The search's array `which` of at least bytes (zeroed when zero), or NULL. */
static void *scratch(struct gs_preemption *p, int which, size_t bytes, bool zero)
{
    if (!bytes) bytes = 1;
    if (bytes > p->bufcap[which]) {
        size_t cap = p->bufcap[which] ? p->bufcap[which] : 256;
        while (cap < bytes) cap *= 2;
        free(p->buf[which]);
        p->bufcap[which] = 0;
        if (!(p->buf[which] = malloc(cap))) return NULL;
        p->bufcap[which] = cap;
    }
    if (zero) memset(p->buf[which], 0, bytes);
    return p->buf[which];
}

static void cands_free(struct cands *c);
static void ix_free(struct gs_preemption *p);

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
    gs__strmap_init(&p->nom_ix);
    gs__strmap_init(&p->nom_grp);
    return p;
}

void gs_preemption_free(struct gs_preemption *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->nhist; i++) free(p->hist[i].key);
    for (size_t i = 0; i < p->nnom; i++) free(p->nom[i].key), free(p->nom[i].grp);
    free(p->hist);
    free(p->nom);
    gs__strmap_free(&p->nom_ix);
    for (size_t i = 0; i < p->nom_grp.cap; i++)
        if (p->nom_grp.slots[i].key) {
            struct nom_grp *g = p->nom_grp.slots[i].val;
            free(g->key), free(g);
        }
    gs__strmap_free(&p->nom_grp);
    free(p->guard.t);
    for (size_t i = 0; i < sizeof p->memo / sizeof p->memo[0]; i++) cands_free(p->memo[i]);
    ix_free(p);
    for (int i = 0; i < NBUF; i++) free(p->buf[i]);
    free(p);
}

const struct gs_preempt_stats *gs_preempt_stats(const struct gs_preemption *p) { return &p->stats; }
void gs__preempt_set_follow(struct gs_preemption *p, bool follow) { p->no_follow = !follow; }
void gs_preempt_count_refusal(struct gs_preemption *p) { p->stats.refused_no_help++; }

/*--- Loop guard ---*/

void gs_preempt_record(struct gs_preemption *p, const struct gs_preempt_plan *pl, const struct gs_pod *preemptor)
{
    int64_t now = gs_clock_now(p->clock), since = now - p->o.window_ns;
    size_t w = 0;
    for (size_t i = 0; i < p->nhist; i++) { /* drop what left the window */
        if (p->hist[i].t >= since) p->hist[w++] = p->hist[i];
        else free(p->hist[i].key);
    }
    p->nhist = w;
    p->guard.valid = false;
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

/* A bound pod below the preemptor's priority, outside its own gang. */
struct vpod {
    const struct gs_pod *pod;
    struct gs_assignment a;
    const char *ns;    /* namespace, "default" when unset */
    const char *group; /* pod group when in one, else NULL */
    const char *key;   /* "ns/name": owned by the index (struct pindex) */
    int32_t prio;      /* pod->priority, kept here so a pass over the index reads no pod */
    bool first;        /* in the index: the first pod of its unit (a gang's members are adjacent) */
};

struct unit {
    size_t first, n;
    int32_t prio;
    int64_t prio_sum;
    uint32_t mark; /* the search that marked its nodes (mark_candidates) */
    bool removed;
    bool dead;     /* followed candidates: the pod left since the build (not a candidate) */
    bool multi;    /* pods on more than one node */
};

/* A gang with a bound member at or above the preemptor's priority: none of it may go. */
struct blocked {
    uint64_t h;
    const char *ns, *group;
};

/* The candidates for one preemptor priority, drawn from the index of bound
 * pods (struct pindex) in its order, so without sorting. They depend only on
 * the bound pods, so they are kept while the index is unchanged (its
 * version): a queue of pending pods retried against an unchanged cluster
 * draws them once. A search undoes its own changes and the index does not
 * follow them (it is muted meanwhile), so the candidates outlive the search. */
struct cands {
    int32_t prio;
    uint64_t version;
    bool valid, built;
    const struct vpod **low; /* every bound pod below prio: entries of the index */
    size_t nlow, caplow;
    struct vpod *hi; /* bound gang members at or above it */
    size_t nhi, caphi;
    struct blocked *bl; /* gangs of hi: open addressing, capbl a power of two */
    size_t capbl;
    struct vpod *v; /* built: low without the gangs of hi, in unit order */
    size_t nv;
    struct unit *u; /* built: the units of v */
    size_t capv;    /* v and u hold this many */
    size_t nu;
    int err;
    /* Followed (live): built from the index and kept since, event by event
     * (cands_follow), so a search after binds and evictions neither merges
     * the index nor draws the candidates again. Only while the index is
     * followed, and only when nothing was dropped for a blocked gang (a
     * departure could then bring candidates back). Per node (nslots of
     * them) the units with a pod there (nfirst/nunits, every unit of u, in
     * unit order) and, over the ones not dead: how many, the least
     * (priority, pods, priority sum), whether one has pods elsewhere too. */
    bool live;
    size_t nblocked, ngang; /* at the build: pods dropped for a blocked gang, gang units */
    size_t nalive;          /* units not dead */
    struct pmap *at;        /* pod -> its unit (index in u), the candidates not dead */
    int32_t nslots;
    size_t *nfirst, *nunits;
    size_t capnunits;
    int32_t nslotscap;
    int32_t *nlive;
    struct nleast {
        int32_t prio;
        int64_t pods, sum;
    } *nleast;
    uint8_t *nmulti;
};

struct search {
    struct gs_preemption *p;
    const struct gs_preempt_fit *fit;
    const struct gs_pod *pre;
    struct cands *c;
    const struct vpod *v; /* c->v */
    struct unit *u;       /* the units that may be evicted by this preemptor */
    size_t nu;
    bool fast;            /* u and the node lists are the followed candidates' own (every unit may be evicted) */
    size_t *rm;           /* units removed at some point (indices in u), p->buf[BUF_RM] */
    size_t nrm;
    bool rm_lost;         /* out of memory for rm: every unit is looked at instead */
    /* Units touching each node: node_units[node_first[i] .. node_first[i + 1]). */
    int32_t nslots;
    size_t *node_first, *node_units;
    /* Nodes this search changed in the cache, and those the plain search
     * (remove every candidate on every node, then give back one by one)
     * would have changed: see touch_skipped(). */
    uint8_t *bumped, *must_bump;
    /* The nodes bumped so far, in index order; and the nodes that passed
     * fit_now's screen for demand screen_d before any node was bumped (in
     * index order): a node not bumped since is as it was then, so a later
     * member of the same demand screens only the bumped ones again. */
    int32_t *blist, *screen;
    size_t nblist, nscreen;
    struct gs_demand screen_d;
    bool screen_ok;
    struct gs_node_info **cand; /* scratch: nodes for a batch fit */
    bool *ok;
    /* PodDisruptionBudgets (the cache's, borrowed) and a scratch copy of
     * their disruptionsAllowed per victim set; viol per unit of pick[]. */
    const struct gs_pdb_budget *const *pdbs;
    size_t npdbs;
    int64_t *allowed;
    int32_t *viol;
    size_t *cand_units; /* scratch of pdb_order */
    int32_t *cand_viol;
};

static const char *ns_of(const struct gs_pod *pod) { return pod->meta.namespace_ ? pod->meta.namespace_ : "default"; }
static const char *group_of(const struct gs_pod *pod) { return pod->pod_group && *pod->pod_group ? pod->pod_group : NULL; }

struct jcur {
    const char *seg[3];
    int i;
    const char *c;
};

static unsigned char jpeek(struct jcur *j)
{
    while (!*j->c && j->i < 2) j->c = j->seg[++j->i];
    return (unsigned char)*j->c;
}

/* strcmp(a0 "/" a1, b0 "/" b1) in sign, without building either string:
 * candidates are ordered by these names, as keys and unit names. */
static int join_cmp(const char *a0, const char *a1, const char *b0, const char *b1)
{
    if (a0 == b0 || !strcmp(a0, b0)) return strcmp(a1, b1);
    struct jcur x = {{a0, "/", a1}, 0, a0}, y = {{b0, "/", b1}, 0, b0};
    for (;;) {
        unsigned char cx = jpeek(&x), cy = jpeek(&y);
        if (cx != cy) return cx < cy ? -1 : 1;
        if (!cx) return 0;
        x.c++, y.c++;
    }
}

static const char *name_of(const struct gs_pod *pod) { return pod->meta.name ? pod->meta.name : ""; }

/* Units named "g:ns/group" (gangs) before "p:ns/name" (single pods), by
 * name, then members by key: the order the outcome is defined in. */
static int cmp_vpod(const void *a, const void *b)
{
    const struct vpod *x = a, *y = b;
    if (!x->group != !y->group) return x->group ? -1 : 1;
    int c = join_cmp(x->ns, x->group ? x->group : name_of(x->pod), y->ns, y->group ? y->group : name_of(y->pod));
    if (c || !x->group) return c;
    return join_cmp(x->ns, name_of(x->pod), y->ns, name_of(y->pod));
}

static int cmp_unit(const struct vpod *x, const struct vpod *y)
{
    if (!x->group != !y->group) return 1;
    return join_cmp(x->ns, x->group ? x->group : name_of(x->pod), y->ns, y->group ? y->group : name_of(y->pod));
}

static bool blocked_find(const struct cands *s, const char *ns, const char *group, uint64_t h, size_t *slot)
{
    size_t mask = s->capbl - 1, i = (size_t)h & mask;
    for (; s->bl[i].ns; i = (i + 1) & mask)
        if (s->bl[i].h == h && !strcmp(s->bl[i].group, group) && !strcmp(s->bl[i].ns, ns)) break;
    if (slot) *slot = i;
    return s->bl[i].ns != NULL;
}

/* The gangs with a bound member at or above the preemptor's priority (from
 * search.hi), as a set; a candidate in one of them is dropped. */
static int block_gangs(struct cands *s)
{
    for (s->capbl = 16; s->capbl < 2 * s->nhi; s->capbl *= 2) {}
    if (!(s->bl = calloc(s->capbl, sizeof *s->bl))) return GS_ENOMEM;
    for (size_t i = 0; i < s->nhi; i++) {
        uint64_t h = gs__fnv1a(s->hi[i].group);
        size_t j;
        if (!blocked_find(s, s->hi[i].ns, s->hi[i].group, h, &j)) s->bl[j] = (struct blocked){h, s->hi[i].ns, s->hi[i].group};
    }
    return 0;
}

static bool blocked(const struct cands *s, const struct vpod *v)
{
    return v->group && s->nhi && blocked_find(s, v->ns, v->group, gs__fnv1a(v->group), NULL);
}

static bool same_group(const struct gs_pod *a, const struct gs_pod *b)
{
    if (!a->pod_group || !b->pod_group || strcmp(a->pod_group, b->pod_group)) return false;
    return !strcmp(ns_of(a), ns_of(b));
}

static int vgrow(struct vpod **v, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    struct vpod *nv = realloc(*v, nc * sizeof *nv);
    if (!nv) return GS_ENOMEM;
    *v = nv, *cap = nc;
    return 0;
}

/* One bound pod of the index into the candidates of s->prio. */
static void collect(struct cands *s, const struct vpod *e)
{
    if (s->err) return;
    bool hi = e->prio >= s->prio;
    if (hi && !e->group) return;
    if (!hi) {
        if (s->nlow == s->caplow) {
            size_t nc = s->caplow ? s->caplow * 2 : 64;
            const struct vpod **nv = realloc(s->low, nc * sizeof *nv);
            if (!nv) {
                s->err = GS_ENOMEM;
                return;
            }
            s->low = nv, s->caplow = nc;
        }
        s->low[s->nlow++] = e;
        return;
    }
    if (vgrow(&s->hi, &s->caphi, s->nhi + 1) != 0) {
        s->err = GS_ENOMEM;
        return;
    }
    s->hi[s->nhi++] = *e;
}

static void pmap_free(struct pmap *m);

static void cands_free(struct cands *c)
{
    if (!c) return;
    free(c->low), free(c->hi), free(c->bl), free(c->v), free(c->u);
    pmap_free(c->at);
    free(c->nfirst), free(c->nunits), free(c->nlive), free(c->nleast), free(c->nmulti);
    free(c);
}

/* The units, node arrays and picks are the core's scratch (kept). */
static void search_free(struct search *s)
{
    free(s->allowed), free(s->viol), free(s->cand_units), free(s->cand_viol);
}

static const char *key_of(const struct search *s, const struct vpod *v)
{
    (void)s;
    return v->key;
}

/* "ns/name" of v's pod as the cache keys it (gs__pod_key, truncation
 * included, so the key still names the cache entry). malloc'd, or NULL. */
static char *dup_key(const struct vpod *v)
{
    char buf[GS__KEY_MAX];
    const char *name = name_of(v->pod);
    size_t a = strlen(v->ns), b = strlen(name), len = a + 1 + b;
    if (len >= GS__KEY_MAX) len = (size_t)gs__pod_key(v->pod, buf, sizeof buf), len = len < GS__KEY_MAX ? len : GS__KEY_MAX - 1;
    char *k = malloc(len + 1);
    if (!k) return NULL;
    if (len < a + 1 + b) {
        memcpy(k, buf, len);
    } else {
        memcpy(k, v->ns, a);
        k[a] = '/';
        memcpy(k + a + 1, name, b);
    }
    k[len] = 0;
    return k;
}

/*--- The index of bound pods ---*/

/* Pointer -> size_t, open addressing with backward-shift deletion. Keys are
 * pod addresses used as identities only (a departed pod is never read). */
struct pmap {
    struct {
        const void *k;
        size_t v;
    } *t;
    size_t cap, n; /* cap a power of two, 0 before the first put */
};

static size_t pmap_home(const struct pmap *m, const void *k)
{
    return (size_t)gs__mix64((uint64_t)(uintptr_t)k, 0) & (m->cap - 1);
}

static size_t *pmap_get(const struct pmap *m, const void *k)
{
    if (!m->n) return NULL;
    for (size_t i = pmap_home(m, k);; i = (i + 1) & (m->cap - 1)) {
        if (m->t[i].k == k) return &m->t[i].v;
        if (!m->t[i].k) return NULL;
    }
}

static int pmap_put(struct pmap *m, const void *k, size_t v)
{
    if (2 * (m->n + 1) > m->cap) {
        struct pmap bigger = {.cap = m->cap ? 2 * m->cap : 64};
        if (!(bigger.t = calloc(bigger.cap, sizeof *bigger.t))) return GS_ENOMEM;
        for (size_t i = 0; i < m->cap; i++)
            if (m->t[i].k) {
                size_t j = pmap_home(&bigger, m->t[i].k);
                while (bigger.t[j].k) j = (j + 1) & (bigger.cap - 1);
                bigger.t[j] = m->t[i];
            }
        bigger.n = m->n;
        free(m->t);
        *m = bigger;
    }
    size_t i = pmap_home(m, k);
    while (m->t[i].k && m->t[i].k != k) i = (i + 1) & (m->cap - 1);
    if (!m->t[i].k) m->n++;
    m->t[i].k = k, m->t[i].v = v;
    return 0;
}

static bool pmap_del(struct pmap *m, const void *k, size_t *v)
{
    size_t *at = pmap_get(m, k);
    if (!at) return false;
    if (v) *v = *at;
    size_t mask = m->cap - 1, i = (size_t)((char *)at - (char *)&m->t[0].v) / sizeof m->t[0];
    for (size_t j = (i + 1) & mask; m->t[j].k; j = (j + 1) & mask) {
        size_t home = pmap_home(m, m->t[j].k);
        if (((j - home) & mask) >= ((j - i) & mask)) m->t[i] = m->t[j], i = j;
    }
    m->t[i].k = NULL;
    m->n--;
    return true;
}

static void pmap_clear(struct pmap *m)
{
    if (m->n) memset(m->t, 0, m->cap * sizeof *m->t);
    m->n = 0;
}

static void pmap_free(struct pmap *m)
{
    if (!m) return;
    free(m->t);
    free(m);
}

/* Every bound pod of the cache in unit order (cmp_vpod), each with its key.
 * The cache tells of each pod that becomes bound or leaves
 * (gs_cache_watch_bound); those are held aside (add: the pods bound since;
 * gone: pods of e that left) and merged in when a search needs the index,
 * so a run of binds costs one sort of the newcomers and one pass over e,
 * not a sort of every pod. A pod that comes and goes before the merge
 * cancels out; a departed pod's address is compared, never read (the pod
 * may be freed), and e drops it before anything is compared by name. The
 * result is the array a walk of the cache sorted by cmp_vpod gives
 * (gs__preempt_index_check compares the two): the order is total, pod keys
 * being unique. */
struct pindex {
    struct gs_preemption *p;
    bool watching, valid;
    bool muted;       /* during a search, which puts back what it takes out */
    uint64_t version; /* bumped whenever e changes */
    uint64_t bound;   /* gs_cache_bound_version at the last rebuild, when not watching */
    struct vpod *e;   /* keys owned */
    size_t n, cap;
    struct vpod *add; /* keys NULL until merged */
    size_t nadd, capadd;
    struct pmap addpos; /* pod -> index in add */
    struct pmap gone;   /* pods of e that are no longer bound */
    struct vpod *tmp;   /* merge scratch */
    size_t captmp;
};

static void cands_follow(struct cands *c, const struct gs_pod *pod, bool added);

/* The followed candidates stop being followed (drawn again at the next use). */
static void cands_drop_live(struct gs_preemption *p)
{
    for (size_t i = 0; i < sizeof p->memo / sizeof p->memo[0]; i++)
        if (p->memo[i] && p->memo[i]->live) p->memo[i]->valid = p->memo[i]->live = false;
}

/* The index misses an event (or is about to be rebuilt, which frees the
 * keys the candidates borrow): so do the followed candidates. */
static void ix_invalidate(struct pindex *x)
{
    x->valid = false;
    cands_drop_live(x->p);
}

static void on_bound(void *ctx, const struct gs_pod *pod, const struct gs_assignment *a, bool added)
{
    struct pindex *x = ctx;
    if (x->muted || !x->valid) return;
    for (size_t i = 0; i < sizeof x->p->memo / sizeof x->p->memo[0]; i++) {
        struct cands *c = x->p->memo[i];
        if (c && c->valid && c->live) cands_follow(c, pod, added);
    }
    if (added) {
        if (vgrow(&x->add, &x->capadd, x->nadd + 1) != 0 || pmap_put(&x->addpos, pod, x->nadd) != 0) {
            ix_invalidate(x); /* rebuilt from the cache at the next use */
            return;
        }
        x->add[x->nadd++] = (struct vpod){pod, *a, ns_of(pod), group_of(pod), NULL, pod->priority, true};
        return;
    }
    size_t i;
    if (pmap_del(&x->addpos, pod, &i)) { /* came and went before a merge */
        if (i != --x->nadd) {
            x->add[i] = x->add[x->nadd];
            *pmap_get(&x->addpos, x->add[i].pod) = i;
        }
        return;
    }
    if (pmap_put(&x->gone, pod, 0) != 0) ix_invalidate(x);
}

static void ix_clear(struct pindex *x)
{
    for (size_t i = 0; i < x->n; i++) free((char *)x->e[i].key);
    x->n = x->nadd = 0;
    pmap_clear(&x->addpos);
    pmap_clear(&x->gone);
}

static void ix_free(struct gs_preemption *p)
{
    struct pindex *x = p->ix;
    if (!x) return;
    if (x->watching) gs_cache_unwatch_bound(p->cache, on_bound, x);
    ix_clear(x);
    free(x->e), free(x->add), free(x->tmp), free(x->addpos.t), free(x->gone.t);
    free(x);
}

static void collect_bound(void *arg, const struct gs_pod *pod, const struct gs_assignment *a, bool bound)
{
    struct pindex *x = arg;
    if (!bound || !x->valid) return;
    if (vgrow(&x->e, &x->cap, x->n + 1) != 0) {
        x->valid = false;
        return;
    }
    x->e[x->n] = (struct vpod){pod, *a, ns_of(pod), group_of(pod), NULL, pod->priority, true};
    if (!(x->e[x->n].key = dup_key(&x->e[x->n]))) x->valid = false;
    else x->n++;
}

/* Marks the first pod of each unit: a single pod, or a gang member after
 * a pod of another unit (cmp_unit). Gang members sort before single pods
 * (cmp_vpod), and a single pod's entry is made with first set, so the walk
 * stops at the first single pod. */
static void ix_mark_units(struct vpod *e, size_t n)
{
    for (size_t i = 0; i < n && e[i].group; i++) e[i].first = !(i && e[i - 1].group && !cmp_unit(&e[i - 1], &e[i]));
}

/* Every bound pod from the cache, sorted. */
static int ix_rebuild(struct gs_preemption *p)
{
    struct pindex *x = p->ix;
    cands_drop_live(p); /* their keys are the index's */
    ix_clear(x);
    x->valid = true;
    gs_cache_foreach_pod(p->cache, collect_bound, x);
    x->version++;
    x->bound = gs_cache_bound_version(p->cache);
    if (!x->valid) {
        ix_clear(x);
        return GS_ENOMEM;
    }
    if (x->n) qsort(x->e, x->n, sizeof *x->e, cmp_vpod); /* no bound pod: e may be NULL */
    ix_mark_units(x->e, x->n);
    return 0;
}

static size_t gone_bit(const void *pod)
{
    uintptr_t a = (uintptr_t)pod;
    return (size_t)((a >> 4) ^ (a >> 14)) & 1023;
}

/* The index as the cache's bound pods are now. 0 or GS_ENOMEM. */
static int ix_sync(struct gs_preemption *p)
{
    if (!p->ix && !(p->ix = calloc(1, sizeof *p->ix))) return GS_ENOMEM;
    struct pindex *x = p->ix;
    x->p = p;
    if (!x->watching && gs_cache_watch_bound(p->cache, on_bound, x) == 0) x->watching = true, x->valid = false;
    if (!x->valid || (!x->watching && x->bound != gs_cache_bound_version(p->cache))) return ix_rebuild(p);
    if (!x->gone.n && !x->nadd) return 0;
    if (x->gone.n) {
        /* A filter of the departed addresses first: most entries are ruled out by one bit. */
        uint64_t bits[16] = {0};
        for (size_t i = 0; i < x->gone.cap; i++)
            if (x->gone.t[i].k) {
                size_t b = gone_bit(x->gone.t[i].k);
                bits[b / 64] |= 1ULL << (b % 64);
            }
        size_t w = 0;
        for (size_t i = 0; i < x->n; i++) {
            size_t b = gone_bit(x->e[i].pod);
            if ((bits[b / 64] >> (b % 64) & 1) && pmap_get(&x->gone, x->e[i].pod)) free((char *)x->e[i].key);
            else x->e[w++] = x->e[i];
        }
        x->n = w;
        pmap_clear(&x->gone);
    }
    if (x->nadd) {
        if (vgrow(&x->tmp, &x->captmp, x->n + x->nadd) != 0) return ix_invalidate(x), GS_ENOMEM;
        for (size_t i = 0; i < x->nadd; i++)
            if (!(x->add[i].key = dup_key(&x->add[i]))) {
                for (size_t j = 0; j < i; j++) free((char *)x->add[j].key);
                return ix_invalidate(x), GS_ENOMEM;
            }
        qsort(x->add, x->nadd, sizeof *x->add, cmp_vpod);
        /* Each newcomer after the pods of e before it (binary search), the
         * runs of e between them copied whole: the merge of two sorted
         * arrays at O(newcomers log n) comparisons. */
        size_t i = 0, w = 0;
        for (size_t j = 0; j < x->nadd; j++) {
            size_t lo = i, hi = x->n;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (cmp_vpod(&x->e[mid], &x->add[j]) < 0) lo = mid + 1;
                else hi = mid;
            }
            if (lo > i) memcpy(x->tmp + w, x->e + i, (lo - i) * sizeof *x->e);
            w += lo - i, i = lo;
            x->tmp[w++] = x->add[j];
        }
        if (x->n > i) memcpy(x->tmp + w, x->e + i, (x->n - i) * sizeof *x->e);
        w += x->n - i;
        struct vpod *t = x->e;
        size_t tc = x->cap;
        x->e = x->tmp, x->cap = x->captmp, x->n = w;
        x->tmp = t, x->captmp = tc;
        x->nadd = 0;
        pmap_clear(&x->addpos);
    }
    ix_mark_units(x->e, x->n);
    x->version++;
    return 0;
}

int gs__preempt_index_check(struct gs_preemption *p, char *why, size_t len)
{
    int rc = ix_sync(p);
    if (rc) return rc;
    struct pindex fresh = {.valid = true};
    gs_cache_foreach_pod(p->cache, collect_bound, &fresh);
    if (fresh.valid && fresh.n) qsort(fresh.e, fresh.n, sizeof *fresh.e, cmp_vpod), ix_mark_units(fresh.e, fresh.n);
    const struct pindex *x = p->ix;
    rc = fresh.valid ? 0 : GS_ENOMEM;
    if (!rc && fresh.n != x->n) {
        snprintf(why, len, "index holds %zu bound pods, the cache %zu", x->n, fresh.n);
        rc = GS_ESTATE;
    }
    for (size_t i = 0; !rc && i < x->n; i++) {
        const struct vpod *a = &x->e[i], *b = &fresh.e[i];
        if (a->pod != b->pod || strcmp(a->key, b->key) || a->a.node != b->a.node || a->a.gpu_mask != b->a.gpu_mask ||
            a->a.milli != b->a.milli || a->a.mem_mib != b->a.mem_mib || a->ns != b->ns || a->group != b->group ||
            a->prio != b->prio || a->first != b->first) {
            snprintf(why, len, "index entry %zu is %s on node %d, a fresh walk has %s on node %d", i, a->key,
                     a->a.node, b->key, b->a.node);
            rc = GS_ESTATE;
        }
    }
    ix_clear(&fresh);
    free(fresh.e);
    return rc;
}

static int guard_build(struct gs_preemption *p, int32_t cls)
{
    struct guard *g = &p->guard;
    int64_t now = gs_clock_now(p->clock), since = now - p->o.window_ns;
    if (g->valid && g->cls == cls && now >= g->built && now <= g->until) return 0;
    size_t n = 0;
    g->valid = false;
    g->until = INT64_MAX;
    for (size_t i = 0; i < p->nhist; i++) {
        if (p->hist[i].t < since || p->hist[i].cls != cls) continue;
        n++;
        if (p->hist[i].t + p->o.window_ns < g->until) g->until = p->hist[i].t + p->o.window_ns;
    }
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > g->cap) {
        free(g->t);
        g->cap = 0;
        if (!(g->t = malloc(cap * sizeof *g->t))) return GS_ENOMEM;
    }
    g->cap = cap;
    g->most = 0;
    memset(g->t, 0, cap * sizeof *g->t);
    for (size_t i = 0; i < p->nhist; i++) {
        if (p->hist[i].t < since || p->hist[i].cls != cls) continue;
        uint64_t h = gs__fnv1a(p->hist[i].key);
        size_t j = (size_t)h & (g->cap - 1);
        while (g->t[j].key && (g->t[j].h != h || strcmp(g->t[j].key, p->hist[i].key))) j = (j + 1) & (g->cap - 1);
        g->t[j].key = p->hist[i].key, g->t[j].h = h, g->t[j].n++;
        if (g->t[j].n > g->most) g->most = g->t[j].n;
    }
    g->valid = true, g->cls = cls, g->built = now;
    g->empty = n == 0;
    return 0;
}

static int guard_count(const struct guard *g, const char *key)
{
    if (g->empty) return 0;
    uint64_t h = gs__fnv1a(key);
    size_t j = (size_t)h & (g->cap - 1);
    while (g->t[j].key && (g->t[j].h != h || strcmp(g->t[j].key, key))) j = (j + 1) & (g->cap - 1);
    return g->t[j].key ? g->t[j].n : 0;
}

/* Drops the gangs of hi and groups what is left (in unit order already) into units. */
static int cands_build(struct cands *c)
{
    if (c->nhi && block_gangs(c) != 0) return GS_ENOMEM;
    if (c->nlow > c->capv) {
        free(c->v), free(c->u);
        c->capv = 0;
        c->v = malloc(c->nlow * sizeof *c->v);
        c->u = malloc(c->nlow * sizeof *c->u);
        if (!c->v || !c->u) return GS_ENOMEM;
        c->capv = c->nlow;
    }
    c->nv = c->nu = c->nblocked = c->ngang = 0;
    for (size_t i = 0; i < c->nlow; i++)
        if (!c->nhi || !blocked(c, c->low[i])) c->v[c->nv++] = *c->low[i];
        else c->nblocked++;
    /* A gang is in v whole or not at all (one member at or above prio blocks
     * it), and its members are adjacent in the index: v's units start where
     * the index's do. */
    for (size_t i = 0; i < c->nv;) {
        struct unit *u = &c->u[c->nu++];
        *u = (struct unit){.first = i, .prio = INT32_MIN};
        c->ngang += c->v[i].group != NULL;
        do {
            u->n++;
            u->prio_sum += c->v[i].prio;
            if (c->v[i].prio > u->prio) u->prio = c->v[i].prio;
            u->multi |= c->v[i].a.node != c->v[u->first].a.node;
        } while (++i < c->nv && !c->v[i].first);
    }
    c->nalive = c->nu;
    c->built = true;
    return 0;
}

/* The units this preemptor may evict: not its own gang, not spared by the loop guard. */
static int select_units(struct search *s)
{
    const struct cands *c = s->c;
    const char *own = group_of(s->pre), *own_ns = ns_of(s->pre);
    s->u = scratch(s->p, BUF_UNITS, c->nu * sizeof *s->u, false);
    if (!s->u || guard_build(s->p, s->pre->priority) != 0) return GS_ENOMEM;
    const struct guard *g = &s->p->guard;
    bool may_spare = !g->empty && g->most >= s->p->o.max_per_window;
    for (size_t i = 0; i < c->nu; i++) {
        const struct unit *u = &c->u[i];
        if (u->dead) continue;
        const struct vpod *v0 = &c->v[u->first];
        if (own && v0->group && !strcmp(v0->group, own) && !strcmp(v0->ns, own_ns)) continue;
        bool spared = false;
        for (size_t k = u->first; may_spare && k < u->first + u->n && !spared; k++)
            spared = guard_count(g, c->v[k].key) >= s->p->o.max_per_window;
        if (spared) s->p->stats.guard_skips++;
        else s->u[s->nu++] = *u;
    }
    return 0;
}

/* The search's per-node arrays but the unit lists. 0 or GS_ENOMEM. */
static int node_scratch(struct search *s, int32_t ns)
{
    size_t slots = (size_t)(ns > 0 ? ns : 1);
    s->nslots = ns;
    s->bumped = scratch(s->p, BUF_BUMPED, slots, true);
    s->must_bump = scratch(s->p, BUF_MUST, slots, true);
    s->cand = scratch(s->p, BUF_CAND, slots * sizeof *s->cand, false);
    s->ok = scratch(s->p, BUF_OK, slots * sizeof *s->ok, false);
    s->blist = scratch(s->p, BUF_BLIST, slots * sizeof *s->blist, false);
    s->screen = scratch(s->p, BUF_SCREEN, slots * sizeof *s->screen, false);
    return s->bumped && s->must_bump && s->cand && s->ok && s->blist && s->screen ? 0 : GS_ENOMEM;
}

/* One pass of building the per-node unit lists (the units with a pod on node
 * i, in unit order: units[first[i] .. first[i + 1])), shared by a search's
 * lists and the followed candidates'. Pass 0 counts into first (slots + 1
 * entries, zeroed by the caller) and returns the total, for the caller to
 * size units; pass 1 fills units. pos: slots entries of scratch. */
static size_t node_lists_pass(int pass, const struct unit *u, size_t nu, const struct vpod *v, int32_t ns,
                              size_t *first, size_t *units, size_t *pos)
{
    size_t slots = (size_t)(ns > 0 ? ns : 1);
    for (size_t i = 0; i < slots; i++) pos[i] = SIZE_MAX;
    for (size_t i = 0; i < nu; i++)
        for (size_t k = u[i].first; k < u[i].first + u[i].n; k++) {
            int32_t nd = v[k].a.node;
            if (nd < 0 || nd >= ns || pos[nd] == i) continue;
            pos[nd] = i;
            if (pass == 0) first[nd + 1]++;
            else units[first[nd + 1]++] = i;
        }
    if (pass == 1) return first[slots];
    /* first[i + 1] becomes the fill cursor of node i and ends as its end. */
    for (size_t i = 0; i < slots; i++) first[i + 1] += first[i];
    size_t total = first[slots];
    for (size_t i = slots; i > 0; i--) first[i] = first[i - 1];
    return total;
}

/* Per node, the units with a pod there, in unit order. */
static int index_nodes(struct search *s)
{
    int32_t ns = gs_cache_node_count(s->p->cache);
    size_t slots = (size_t)(ns > 0 ? ns : 1);
    s->node_first = scratch(s->p, BUF_FIRST, (slots + 1) * sizeof *s->node_first, true);
    size_t *pos = scratch(s->p, BUF_POS, slots * sizeof *pos, false);
    if (node_scratch(s, ns) || !s->node_first || !pos) return GS_ENOMEM;
    size_t total = node_lists_pass(0, s->u, s->nu, s->v, ns, s->node_first, NULL, pos);
    if (!(s->node_units = scratch(s->p, BUF_NODE_UNITS, total * sizeof *s->node_units, false))) return GS_ENOMEM;
    node_lists_pass(1, s->u, s->nu, s->v, ns, s->node_first, s->node_units, pos);
    return 0;
}

static void mark(uint8_t *set, int32_t nslots, int32_t node)
{
    if (node >= 0 && node < nslots) set[node] = 1;
}

/* Node changed by this search: into bumped and, the first time, into blist in index order. */
static void bump(struct search *s, int32_t node)
{
    if (node < 0 || node >= s->nslots || s->bumped[node]) return;
    s->bumped[node] = 1;
    size_t lo = 0, hi = s->nblist;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->blist[mid] < node) lo = mid + 1;
        else hi = mid;
    }
    memmove(s->blist + lo + 1, s->blist + lo, (s->nblist - lo) * sizeof *s->blist);
    s->blist[lo] = node;
    s->nblist++;
}

/* Unit ui into the list of units removed at some point (restored at the end). */
static void rm_push(struct search *s, size_t ui)
{
    if (s->rm_lost) return;
    struct gs_preemption *p = s->p;
    if ((s->nrm + 1) * sizeof *s->rm > p->bufcap[BUF_RM]) {
        size_t cap = p->bufcap[BUF_RM] ? 2 * p->bufcap[BUF_RM] : 256 * sizeof *s->rm;
        void *nb = realloc(p->buf[BUF_RM], cap);
        if (!nb) {
            s->rm_lost = true;
            return;
        }
        p->buf[BUF_RM] = nb, p->bufcap[BUF_RM] = cap;
    }
    s->rm = p->buf[BUF_RM];
    s->rm[s->nrm++] = ui;
}

static void unit_remove(struct search *s, struct unit *u)
{
    rm_push(s, (size_t)(u - s->u));
    for (size_t i = u->first; i < u->first + u->n; i++) {
        gs_cache_remove_pod(s->p->cache, key_of(s, &s->v[i]));
        bump(s, s->v[i].a.node);
    }
    u->removed = true;
}

static void unit_restore(struct search *s, struct unit *u)
{
    for (size_t i = u->first; i < u->first + u->n; i++) {
        gs_cache_add_bound(s->p->cache, s->v[i].pod, &s->v[i].a);
        bump(s, s->v[i].a.node);
    }
    u->removed = false;
}

/* The plain search takes every candidate unit off a node before testing it,
 * which changes each node those units run on, even where nothing comes of
 * it; memos keyed on the cache's change counts (a gang's plan, a failed
 * search) are invalidated by that. The screens below skip most of those
 * changes, so the nodes the plain search would have changed are recorded
 * here and touched at the end: decisions stay exactly those of the plain search. */
static void mark_candidates(struct search *s, size_t ui)
{
    struct unit *u = &s->u[ui];
    if (u->mark == s->p->stamp) return;
    u->mark = s->p->stamp;
    for (size_t k = u->first; k < u->first + u->n; k++) mark(s->must_bump, s->nslots, s->v[k].a.node);
}

static void touch_skipped(struct search *s)
{
    for (int32_t i = 0; i < s->nslots; i++)
        if (s->must_bump[i] && !s->bumped[i]) gs_cache_touch_node(s->p->cache, i);
}

/*--- Search ---*/

/* Necessary conditions of place_on() for m on n after the given units'
 * pods on n leave it (sign 1) or come back (sign -1): enough GPUs with the
 * share (gs_topo_choose's own test) and, when the fit test enforces them,
 * CPU, memory and pod slots (NodeResourcesFit's rule). Cheap arithmetic on
 * the node; false means place_on() would fail. */
static bool may_fit(const struct search *s, const struct gs_pod *m, const struct gs_node_info *n,
                    const size_t *units, size_t k, int sign)
{
    const struct gs_demand *d = &m->demand;
    if (s->fit->checks_resources) { /* first: a full node is ruled out before its GPUs are read */
        int64_t cpu_used = n->cpu_used, mem_used = n->mem_used;
        int32_t pods_used = n->pods_used;
        for (size_t i = 0; i < k; i++) {
            const struct unit *u = &s->u[units[i]];
            for (size_t j = u->first; j < u->first + u->n; j++) {
                const struct vpod *v = &s->v[j];
                if (v->a.node != n->idx) continue;
                cpu_used -= sign * v->pod->demand.cpu_milli;
                mem_used -= sign * v->pod->demand.mem_bytes;
                pods_used -= sign;
            }
        }
        if (n->pods_alloc > 0 && pods_used >= n->pods_alloc) return false;
        if (d->cpu_milli > 0 && d->cpu_milli > n->cpu_alloc - cpu_used) return false;
        if (d->mem_bytes > 0 && d->mem_bytes > n->mem_alloc - mem_used) return false;
    }
    if (d->gpu_count <= 0) return true;
    int32_t ng = n->ngpus < GS_MAX_GPUS_PER_NODE ? n->ngpus : GS_MAX_GPUS_PER_NODE;
    int32_t milli[GS_MAX_GPUS_PER_NODE];
    int64_t mem[GS_MAX_GPUS_PER_NODE];
    for (int32_t g = 0; g < ng; g++) milli[g] = n->gpus[g].milli_free, mem[g] = n->gpus[g].mem_free_mib;
    for (size_t i = 0; i < k; i++) {
        const struct unit *u = &s->u[units[i]];
        for (size_t j = u->first; j < u->first + u->n; j++) {
            const struct vpod *v = &s->v[j];
            if (v->a.node != n->idx) continue;
            for (uint64_t b = v->a.gpu_mask; b; b &= b - 1) {
                int g = __builtin_ctzll(b);
                if (g < ng) milli[g] += sign * v->a.milli, mem[g] += sign * v->a.mem_mib;
            }
        }
    }
    int32_t fit = 0;
    for (int32_t g = 0; g < ng; g++)
        fit += n->gpus[g].healthy && milli[g] >= d->gpu_milli && (d->gpu_mem_mib <= 0 || mem[g] >= d->gpu_mem_mib);
    return fit >= d->gpu_count;
}

/* A GPU set for m on n (gs_topo_choose) as an assignment. */
static bool choose(const struct gs_node_info *n, const struct gs_pod *m, struct gs_assignment *a)
{
    const struct gs_demand *d = &m->demand;
    struct gs_gpu_choice ch;
    if (!gs_topo_choose(n, d->gpu_count, d->gpu_milli, d->gpu_mem_mib, ~0ULL, &ch)) return false;
    *a = (struct gs_assignment){n->idx, ch.mask, d->gpu_count ? d->gpu_milli : 0, d->gpu_count ? d->gpu_mem_mib : 0};
    return true;
}

/* Does m fit on n now (every filter), with a GPU set? Fills a. */
static bool place_on(const struct search *s, const struct gs_pod *m, struct gs_node_info *n, struct gs_assignment *a)
{
    return s->fit->fits(s->fit->ctx, m, n) && choose(n, m, a);
}

/* kube's pickOneNodeForPreemption order: fewest PodDisruptionBudget
 * violations, then the lowest highest victim priority, fewest pods, lowest
 * priority sum, node index. */
struct cost {
    int32_t viol;
    int32_t max_prio;
    int64_t pods, sum;
    int32_t node;
};

static bool cheaper(const struct cost *a, const struct cost *b)
{
    if (a->viol != b->viol) return a->viol < b->viol;
    if (a->max_prio != b->max_prio) return a->max_prio < b->max_prio;
    if (a->pods != b->pods) return a->pods < b->pods;
    if (a->sum != b->sum) return a->sum < b->sum;
    return a->node < b->node;
}

/*--- Followed candidates ---*/

/* Node nd's summary over its units that are not dead. */
static void node_sum(struct cands *c, int32_t nd)
{
    int32_t live = 0;
    uint8_t multi = 0;
    struct cost least = {0, INT32_MAX, INT64_MAX, INT64_MAX, nd};
    for (size_t j = c->nfirst[nd]; j < c->nfirst[nd + 1]; j++) {
        const struct unit *u = &c->u[c->nunits[j]];
        if (u->dead) continue;
        live++;
        multi |= u->multi;
        struct cost k = {0, u->prio, (int64_t)u->n, u->prio_sum, nd};
        if (cheaper(&k, &least)) least = k;
    }
    c->nlive[nd] = live, c->nmulti[nd] = multi;
    c->nleast[nd] = (struct nleast){least.max_prio, least.pods, least.sum};
}

/* The node lists, node summaries and pod map of built candidates, which
 * are followed from then on (live). On failure they are not (drawn again
 * whenever the index changes, as before). */
static void cands_index(struct cands *c, int32_t nslots)
{
    c->live = false;
    size_t slots = (size_t)(nslots > 0 ? nslots : 1);
    if (!c->at && !(c->at = calloc(1, sizeof *c->at))) return;
    pmap_clear(c->at);
    if (nslots > c->nslotscap || !c->nfirst) {
        free(c->nfirst), free(c->nlive), free(c->nleast), free(c->nmulti);
        c->nslotscap = 0;
        c->nfirst = malloc((slots + 1) * sizeof *c->nfirst);
        c->nlive = malloc(slots * sizeof *c->nlive);
        c->nleast = malloc(slots * sizeof *c->nleast);
        c->nmulti = malloc(slots);
        if (!c->nfirst || !c->nlive || !c->nleast || !c->nmulti) {
            free(c->nfirst), free(c->nlive), free(c->nleast), free(c->nmulti);
            c->nfirst = NULL, c->nlive = NULL, c->nleast = NULL, c->nmulti = NULL;
            return;
        }
        c->nslotscap = nslots > 0 ? nslots : 1;
    }
    size_t *pos = malloc(slots * sizeof *pos);
    if (!pos) return;
    memset(c->nfirst, 0, (slots + 1) * sizeof *c->nfirst);
    /* As index_nodes, over every unit. */
    size_t total = node_lists_pass(0, c->u, c->nu, c->v, nslots, c->nfirst, NULL, pos);
    if (total > c->capnunits || !c->nunits) {
        free(c->nunits);
        c->capnunits = 0;
        if (!(c->nunits = malloc((total ? total : 1) * sizeof *c->nunits))) {
            free(pos);
            return;
        }
        c->capnunits = total;
    }
    node_lists_pass(1, c->u, c->nu, c->v, nslots, c->nfirst, c->nunits, pos);
    free(pos);
    for (int32_t i = 0; i < nslots; i++) node_sum(c, i);
    for (size_t i = 0; i < c->nu; i++)
        for (size_t k = c->u[i].first; k < c->u[i].first + c->u[i].n; k++)
            if (pmap_put(c->at, c->v[k].pod, i) != 0) return;
    c->nslots = nslots;
    c->live = true;
}

/* One bound pod come or gone, into followed candidates: a single pod that
 * leaves is its unit's death (its node summary made again); anything the
 * candidates cannot follow exactly makes them drawn again at the next use:
 * a new pod below their priority (a new candidate), a gang member at or
 * above it while gangs are among them (it may block one), a member of a
 * gang unit of several pods leaving. A pod that is not a candidate leaving
 * changes nothing: it blocked no gang (nblocked is 0). The pod that leaves
 * is not read (its address is looked up). */
static void cands_follow(struct cands *c, const struct gs_pod *pod, bool added)
{
    if (added) {
        if (pod->priority < c->prio || (group_of(pod) && c->ngang)) c->valid = c->live = false;
        return;
    }
    size_t ui;
    if (!pmap_del(c->at, pod, &ui)) return;
    struct unit *u = &c->u[ui];
    if (u->n != 1) {
        c->valid = c->live = false;
        return;
    }
    u->dead = true;
    c->nalive--;
    int32_t nd = c->v[u->first].a.node;
    if (nd >= 0 && nd < c->nslots) node_sum(c, nd);
}

/* kube's filterPodsWithPDBViolation over the units in pick[0..k), most
 * important first: each pod a budget covers spends one of its allowed
 * disruptions (a pod already in its disruptedPods spends none), and a pod
 * that takes a budget below zero violates it. viol[i] counts the violating
 * pods of pick[i]; the violating units are moved first, each group keeping
 * its order, so that they are the first reprieved. Nothing to do without
 * budgets. */
static void pdb_order(struct search *s, size_t *pick, size_t k)
{
    if (!s->npdbs) return;
    for (size_t b = 0; b < s->npdbs; b++) s->allowed[b] = s->pdbs[b]->disruptions_allowed;
    for (size_t i = 0; i < k; i++) {
        const struct unit *u = &s->u[pick[i]];
        s->viol[i] = 0;
        for (size_t j = u->first; j < u->first + u->n; j++) {
            const struct gs_pod *pod = s->v[j].pod;
            bool violated = false;
            for (size_t b = 0; b < s->npdbs; b++) {
                const struct gs_pdb_budget *pdb = s->pdbs[b];
                if (!gs_pdb_budget_covers(pdb, s->v[j].ns, &pod->meta.labels) ||
                    gs_pdb_budget_disrupted(pdb, pod->meta.name))
                    continue;
                if (--s->allowed[b] < 0) violated = true;
            }
            s->viol[i] += violated;
        }
    }
    /* Stable partition: violating units first. */
    size_t w = 0;
    for (size_t pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < k; i++) {
            bool v = s->viol[i] > 0;
            if (v != (pass == 0)) continue;
            s->cand_units[w] = pick[i], s->cand_viol[w++] = s->viol[i];
        }
    memcpy(pick, s->cand_units, k * sizeof *pick);
    memcpy(s->viol, s->cand_viol, k * sizeof *s->viol);
}

/* Victims on node for m: fills pick[] (unit indices) and returns how many, or -1.
 * The k candidates are already in pick[]. */
static int victims_on(struct search *s, const struct gs_pod *m, struct gs_node_info *n, size_t *pick, size_t k,
                      struct cost *cost)
{
    struct gs_assignment a;
    if (!may_fit(s, m, n, pick, k, 1)) return -1;
    for (size_t i = 0; i < k; i++) unit_remove(s, &s->u[pick[i]]);
    if (!place_on(s, m, n, &a)) {
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
    pdb_order(s, pick, k);
    size_t w = 0;
    int32_t viol = 0;
    for (size_t i = 0; i < k; i++) {
        if (may_fit(s, m, n, &pick[i], 1, -1)) {
            unit_restore(s, &s->u[pick[i]]);
            if (place_on(s, m, n, &a)) continue;
            unit_remove(s, &s->u[pick[i]]);
        }
        viol += s->npdbs ? s->viol[i] : 0;
        pick[w++] = pick[i];
    }
    *cost = (struct cost){viol, INT32_MIN, 0, 0, n->idx};
    for (size_t i = 0; i < w; i++) {
        const struct unit *u = &s->u[pick[i]];
        if (u->prio > cost->max_prio) cost->max_prio = u->prio;
        cost->pods += (int64_t)u->n;
        cost->sum += u->prio_sum;
        unit_restore(s, &s->u[pick[i]]);
    }
    return (int)w;
}

/* Does node i pass fit_now's screen for m: may_fit's resource rule read
 * from the dense hot records first (equal to the node's fields,
 * gs_cache_check: a full node costs no visit), then the node's own test. */
static bool screened(const struct search *s, const struct gs_pod *m, const struct gs_node_hot *hot, int32_t i)
{
    const struct gs_demand *d = &m->demand;
    if (hot && (!hot[i].live || hot[i].pods_free <= 0 || (d->cpu_milli > 0 && d->cpu_milli > hot[i].cpu_free) ||
                (d->mem_bytes > 0 && d->mem_bytes > hot[i].mem_free)))
        return false;
    struct gs_node_info *n = gs_cache_node(s->p->cache, i);
    return n->live && n->schedulable && may_fit(s, m, n, NULL, 0, 1);
}

/* Where m fits as things are: the node with the least free GPU share
 * (lowest index on ties), or NULL. One batch of filters over the nodes that
 * pass the screen, which gives each node the verdict a call of its own would. */
static struct gs_node_info *fit_now(struct search *s, const struct gs_pod *m, struct gs_assignment *out)
{
    struct gs_cache *c = s->p->cache;
    size_t nc = 0;
    const struct gs_node_hot *hot = s->fit->checks_resources ? gs_cache_hot(c) : NULL;
    const struct gs_demand *d = &m->demand;
    bool again = s->screen_ok && !s->p->no_follow && d->cpu_milli == s->screen_d.cpu_milli &&
                 d->mem_bytes == s->screen_d.mem_bytes && d->gpu_count == s->screen_d.gpu_count &&
                 d->gpu_milli == s->screen_d.gpu_milli && d->gpu_mem_mib == s->screen_d.gpu_mem_mib &&
                 gs_cache_node_count(c) == s->nslots;
    if (again) {
        /* The screen of the nodes not bumped since is the one kept; the
         * bumped ones are screened now; both lists in index order, merged. */
        size_t a = 0, b = 0;
        while (a < s->nscreen || b < s->nblist) {
            int32_t i;
            if (b == s->nblist || (a < s->nscreen && s->screen[a] < s->blist[b])) {
                i = s->screen[a++];
                if (s->bumped[i]) continue;
            } else {
                i = s->blist[b++];
                if (a < s->nscreen && s->screen[a] == i) a++;
                if (!screened(s, m, hot, i)) continue;
            }
            s->cand[nc++] = gs_cache_node(c, i);
        }
    } else {
        for (int32_t i = 0; i < gs_cache_node_count(c); i++)
            if (screened(s, m, hot, i)) s->cand[nc++] = gs_cache_node(c, i);
        if (!s->nblist && !s->screen_ok && s->screen && gs_cache_node_count(c) == s->nslots) {
            for (size_t k = 0; k < nc; k++) s->screen[k] = s->cand[k]->idx;
            s->nscreen = nc, s->screen_d = *d, s->screen_ok = true;
        }
    }
    if (!nc) return NULL;
    if (s->fit->fits_many) s->fit->fits_many(s->fit->ctx, m, s->cand, nc, s->ok);
    else
        for (size_t i = 0; i < nc; i++) s->ok[i] = s->fit->fits(s->fit->ctx, m, s->cand[i]);
    struct gs_node_info *best = NULL;
    struct gs_assignment a;
    for (size_t i = 0; i < nc; i++) {
        struct gs_node_info *n = s->cand[i];
        if (!s->ok[i] || !choose(n, m, &a)) continue;
        if (!best || n->gpu_milli_free < best->gpu_milli_free) best = n, *out = a;
    }
    return best;
}

/* The candidates on node i (units not yet taken) into pick[], and the least
 * cost any victim set drawn from them can have: a set's cost is at least
 * that of its highest-priority unit alone (more pods only add), so at least
 * the smallest (priority, pods, priority sum) over the candidates. */
static size_t candidates(struct search *s, int32_t i, size_t *pick, struct cost *least)
{
    size_t k = 0;
    /* No violation is the least a set can have: the bound stays a bound with budgets. */
    *least = (struct cost){0, INT32_MAX, INT64_MAX, INT64_MAX, i};
    for (size_t j = s->node_first[i]; j < s->node_first[i + 1]; j++) {
        const struct unit *u = &s->u[s->node_units[j]];
        if (u->removed || u->dead) continue;
        pick[k++] = s->node_units[j];
        struct cost c = {0, u->prio, (int64_t)u->n, u->prio_sum, i};
        if (cheaper(&c, least)) *least = c;
    }
    return k;
}

/* Places member m on the simulated state (evicting when needed); 0 or -1. */
static int place_member(struct search *s, const struct gs_pod *m, struct gs_assignment *out, size_t *pick,
                        size_t *best_pick)
{
    struct gs_cache *c = s->p->cache;
    if (fit_now(s, m, out)) return 0;
    struct cost bc = {0}, cost, least;
    int bw = -1;
    int32_t bnode = -1;
    const struct cands *fc = s->fast ? s->c : NULL;
    for (int32_t i = 0; i < gs_cache_node_count(c) && i < s->nslots; i++) {
        if (s->node_first[i] == s->node_first[i + 1] || (fc && !fc->nlive[i])) continue; /* no candidate there */
        struct gs_node_info *n = gs_cache_node(c, i);
        if (!n->live || !n->schedulable) continue;
        size_t k;
        bool listed = false;
        if (fc && !s->bumped[i] && !fc->nmulti[i]) {
            /* Followed candidates, none taken out here (that would have
             * changed the node) and each only here: the node's summary is
             * what candidates() would find, and marking them marks this node. */
            k = (size_t)fc->nlive[i];
            least = (struct cost){0, fc->nleast[i].prio, fc->nleast[i].pods, fc->nleast[i].sum, i};
            mark(s->must_bump, s->nslots, i);
        } else {
            k = candidates(s, i, pick, &least), listed = true;
            for (size_t j = 0; j < k; j++) mark_candidates(s, pick[j]);
        }
        /* Evaluated from node 0 up and every victim set is non-empty (m fits
         * nowhere as things are), so a node whose least cost is not below
         * the best so far cannot win: ties go to the lower index. */
        if (!k || (bw >= 0 && !cheaper(&least, &(struct cost){bc.viol, bc.max_prio, bc.pods, bc.sum, i}))) continue;
        if (!listed) k = candidates(s, i, pick, &least);
        int w = victims_on(s, m, n, pick, k, &cost);
        if (w < 0 || (bw >= 0 && !cheaper(&cost, &bc))) continue;
        bw = w, bc = cost, bnode = i;
        memcpy(best_pick, pick, (size_t)w * sizeof *pick);
    }
    if (bw < 0) return -1;
    for (int i = 0; i < bw; i++) unit_remove(s, &s->u[best_pick[i]]);
    return place_on(s, m, gs_cache_node(c, bnode), out) ? 0 : -1;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* The units removed at some point, in unit order, once each (s->rm); all
 * of them when that list was lost. Returns how many are listed. */
static size_t removed_units(struct search *s)
{
    if (s->rm_lost || !s->nrm) return 0;
    qsort(s->rm, s->nrm, sizeof *s->rm, cmp_size);
    size_t w = 0;
    for (size_t i = 0; i < s->nrm; i++)
        if (!w || s->rm[w - 1] != s->rm[i]) s->rm[w++] = s->rm[i];
    return s->nrm = w;
}

/* The i-th unit that may have been removed: every unit when the list was lost. */
static size_t rm_count(const struct search *s) { return s->rm_lost ? s->nu : s->nrm; }
static size_t rm_at(const struct search *s, size_t i) { return s->rm_lost ? i : s->rm[i]; }

static int make_plan(struct search *s, size_t nmembers, const int32_t *nodes, struct gs_preempt_plan *out)
{
    size_t nvict = 0;
    for (size_t r = 0; r < rm_count(s); r++) nvict += s->u[rm_at(s, r)].removed ? s->u[rm_at(s, r)].n : 0;
    out->victims = calloc(nvict ? nvict : 1, sizeof *out->victims);
    out->nodes = calloc(nmembers ? nmembers : 1, sizeof *out->nodes);
    if (!out->victims || !out->nodes) return GS_ENOMEM;
    out->max_priority = INT32_MIN;
    for (size_t r = 0; r < rm_count(s); r++) {
        size_t i = rm_at(s, r);
        if (!s->u[i].removed) continue;
        for (size_t k = s->u[i].first; k < s->u[i].first + s->u[i].n; k++) out->victims[out->nvictims++] = s->v[k].pod;
        if (s->u[i].prio > out->max_priority) out->max_priority = s->u[i].prio;
    }
    memcpy(out->nodes, nodes, nmembers * sizeof *nodes);
    out->nmembers = nmembers;
    return 0;
}

/* The candidates for priority prio, drawn again from the index unless it
 * is what they were drawn from. NULL when out of memory. */
static struct cands *cands_for(struct gs_preemption *p, int32_t prio)
{
    const size_t nmemo = sizeof p->memo / sizeof p->memo[0];
    struct cands *c = NULL;
    for (size_t i = 0; i < nmemo && !c; i++)
        if (p->memo[i] && p->memo[i]->prio == prio) c = p->memo[i];
    /* Followed since they were built: the index need not be merged. */
    if (c && c->valid && c->live) {
        if (c->nslots == gs_cache_node_count(p->cache)) return c;
        c->valid = c->live = false; /* nodes were added: the node lists are drawn again */
    }
    if (ix_sync(p) != 0) return NULL;
    const struct pindex *x = p->ix;
    if (c && c->valid && c->version == x->version) return c;
    if (!c) {
        size_t slot = p->memo_next++ % nmemo;
        if (!p->memo[slot] && !(p->memo[slot] = calloc(1, sizeof *p->memo[slot]))) return NULL;
        c = p->memo[slot];
    }
    c->prio = prio, c->version = x->version;
    c->valid = c->built = c->live = false;
    c->nlow = c->nhi = c->nv = c->nu = 0;
    c->err = 0;
    free(c->bl), c->bl = NULL, c->capbl = 0;
    for (size_t i = 0; i < x->n; i++) collect(c, &x->e[i]);
    if (c->err) return NULL;
    c->valid = true;
    return c;
}

/* Collects and indexes the candidates; GS_ENOENT when nobody may be evicted. */
static int prepare(struct search *s)
{
    struct cands *c = s->c = cands_for(s->p, s->pre->priority);
    if (!c) return GS_ENOMEM;
    if (!c->built) {
        /* Most failing pods have nobody below them: say so before building
         * anything. (Once built, the units say it: none that is not the
         * pod's own gang, and the search ends as here, having changed nothing.) */
        bool any_lower = false;
        for (size_t i = 0; i < c->nlow && !any_lower; i++) any_lower = !same_group(c->low[i]->pod, s->pre);
        if (!any_lower) return GS_ENOENT;
        if (cands_build(c) != 0) {
            c->valid = false;
            return GS_ENOMEM;
        }
        /* Followed from now on when the index is (and nothing was dropped
         * for a blocked gang); otherwise drawn again when the index changes. */
        if (s->p->ix->watching && !c->nblocked && !s->p->no_follow) cands_index(c, gs_cache_node_count(s->p->cache));
    }
    s->v = c->v;
    /* Followed candidates are the search's units as they are when every
     * unit may be evicted: none is the pod's own gang and the loop guard
     * spares nobody. */
    const char *own = group_of(s->pre);
    if (c->live && (!own || !c->ngang)) {
        if (guard_build(s->p, s->pre->priority) != 0) return GS_ENOMEM;
        const struct guard *g = &s->p->guard;
        s->fast = g->empty || g->most < s->p->o.max_per_window;
    }
    int rc = 0;
    if (s->fast) {
        s->p->stats.followed++;
        s->u = c->u, s->nu = c->nu;
        s->node_first = c->nfirst, s->node_units = c->nunits;
        if (!c->nalive) rc = GS_ENOENT;
    } else {
        rc = select_units(s);
    }
    if (!rc && !s->nu) rc = GS_ENOENT; /* a plan evicts someone: with no candidate there is none */
    s->pdbs = gs_cache_pdbs(s->p->cache, &s->npdbs);
    if (!rc && s->npdbs) {
        s->allowed = calloc(s->npdbs, sizeof *s->allowed);
        s->viol = calloc(s->nu, sizeof *s->viol);
        s->cand_units = calloc(s->nu, sizeof *s->cand_units);
        s->cand_viol = calloc(s->nu, sizeof *s->cand_viol);
        if (!s->allowed || !s->viol || !s->cand_units || !s->cand_viol) rc = GS_ENOMEM;
    }
    return rc ? rc : s->fast ? node_scratch(s, c->nslots) : index_nodes(s);
}

int gs_preempt_find_with(struct gs_preemption *p, const struct gs_pod *const *members, size_t n,
                         const struct gs_preempt_fit *fit, struct gs_preempt_plan *out)
{
    memset(out, 0, sizeof *out);
    p->stats.attempts++;
    if (!n) return GS_ENOENT;
    struct search s = {.p = p, .fit = fit, .pre = members[0]};
    if (!++p->stamp) p->stamp = 1; /* 0 is no search's */
    int rc = prepare(&s);
    if (p->ix) p->ix->muted = true; /* what the search takes out it puts back */
    size_t *pick = scratch(p, BUF_PICK, s.nu * sizeof *pick, false), *best = scratch(p, BUF_BEST, s.nu * sizeof *best, false);
    int32_t *nodes = calloc(n, sizeof *nodes);
    size_t placed = 0;
    if (!rc && (!pick || !best || !nodes)) rc = GS_ENOMEM;
    for (; !rc && placed < n; placed++) {
        struct gs_assignment a;
        /* Members of the preemptor compete with its priority. */
        if (place_member(&s, members[placed], &a, pick, best) != 0 ||
            gs_cache_assume(p->cache, members[placed], &a, 0) != 0) {
            rc = GS_ENOENT;
            break;
        }
        bump(&s, a.node);
        nodes[placed] = a.node;
    }
    removed_units(&s);
    if (!rc) rc = make_plan(&s, n, nodes, out);
    for (size_t i = 0; i < placed; i++) {
        char key[GS__KEY_MAX];
        gs__pod_key(members[i], key, sizeof key);
        gs_cache_forget(p->cache, key);
    }
    for (size_t r = 0; r < rm_count(&s); r++)
        if (s.u[rm_at(&s, r)].removed) unit_restore(&s, &s.u[rm_at(&s, r)]);
    if (s.must_bump) touch_skipped(&s);
    if (p->ix) p->ix->muted = false;
    if (rc) gs_preempt_plan_free(out);
    free(nodes);
    search_free(&s);
    return rc;
}

int gs_preempt_find(struct gs_preemption *p, const struct gs_pod *const *members, size_t n, gs_preempt_fits_fn fits,
                    void *ctx, struct gs_preempt_plan *out)
{
    struct gs_preempt_fit f = {.fits = fits, .ctx = ctx};
    return gs_preempt_find_with(p, members, n, &f, out);
}

void gs_preempt_plan_free(struct gs_preempt_plan *pl)
{
    free(pl->victims);
    free(pl->nodes);
    memset(pl, 0, sizeof *pl);
}

/*--- Nominations ---*/

/* The gang of pod as same_group() tells gangs apart ("<len of ns>:ns/group",
 * unambiguous whatever the names hold), or NULL when it is in none. */
static const char *grp_key(const struct gs_pod *pod, char *buf, size_t len)
{
    if (!pod->pod_group) return NULL;
    const char *ns = ns_of(pod);
    int n = snprintf(buf, len, "%zu:%s/%s", strlen(ns), ns, pod->pod_group);
    return n >= 0 && (size_t)n < len ? buf : NULL;
}

/* One nomination more (d 1) or less (d -1) for gang k (NULL: none). */
static void grp_count(struct gs_preemption *p, const char *k, int d)
{
    if (!k) return;
    struct nom_grp *g = gs__strmap_get(&p->nom_grp, k);
    if (d > 0) {
        if (!g) {
            if (!(g = calloc(1, sizeof *g)) || !(g->key = strdup(k)) || gs__strmap_put(&p->nom_grp, g->key, g) != 0) {
                if (g) free(g->key);
                free(g);
                p->nom_grp_lost = true; /* counts no longer trusted */
                return;
            }
        }
        g->n++;
    } else if (g && !--g->n) {
        gs__strmap_del(&p->nom_grp, g->key);
        free(g->key), free(g);
    }
}

/* Is every nomination held by a pod of pod's own gang? Then none holds
 * room against it (holds_against: the room a gang's preemption made is the
 * group's), whatever the node. */
static bool nom_all_own(const struct gs_preemption *p, const struct gs_pod *pod)
{
    char buf[2 * GS__KEY_MAX];
    const char *k = !p->nom_grp_lost && p->nnom ? grp_key(pod, buf, sizeof buf) : NULL;
    const struct nom_grp *g = k ? gs__strmap_get(&p->nom_grp, k) : NULL;
    return g && g->n == p->nnom;
}

static struct nomination *nom_find(const struct gs_preemption *p, const char *key)
{
    void *v = gs__strmap_get(&p->nom_ix, key);
    return v ? &p->nom[(uintptr_t)v - 1] : NULL;
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
        if (!dup || gs__strmap_put(&p->nom_ix, dup, (void *)(uintptr_t)(p->nnom + 1)) != 0) {
            free(dup);
            return GS_ENOMEM;
        }
        e = &p->nom[p->nnom++];
        e->key = dup;
    } else {
        grp_count(p, e->grp, -1);
        free(e->grp);
    }
    /* Counted under the key it was counted with, whatever the pod holds later. */
    char buf[2 * GS__KEY_MAX];
    const char *gk = grp_key(pod, buf, sizeof buf);
    e->grp = NULL;
    if (gk && !(e->grp = strdup(gk))) p->nom_grp_lost = true;
    grp_count(p, e->grp, 1);
    e->pod = pod;
    e->node = node;
    e->t = gs_clock_now(p->clock);
    return 0;
}

void gs_preempt_clear(struct gs_preemption *p, const char *pod_key)
{
    struct nomination *e = nom_find(p, pod_key);
    if (!e) return;
    grp_count(p, e->grp, -1);
    gs__strmap_del(&p->nom_ix, e->key);
    free(e->key), free(e->grp);
    *e = p->nom[--p->nnom];
    /* The last entry moved into e's place: a replacement in the map, no allocation. */
    if (e != &p->nom[p->nnom]) gs__strmap_put(&p->nom_ix, e->key, (void *)(uintptr_t)(e - p->nom + 1));
}

int32_t gs_preempt_nominated_node(const struct gs_preemption *p, const char *pod_key)
{
    const struct nomination *e = nom_find(p, pod_key);
    return e && gs_clock_now(p->clock) - e->t <= p->o.nomination_ttl_ns ? e->node : -1;
}

size_t gs_preempt_nomination_count(const struct gs_preemption *p) { return p->nnom; }

/* Does nomination e hold room against pod at time now (whatever the node)? */
static bool holds_against(const struct gs_preemption *p, const struct nomination *e, const struct gs_pod *pod,
                          int64_t now)
{
    if (now - e->t > p->o.nomination_ttl_ns || e->pod == pod || e->pod->priority < pod->priority) return false;
    /* The room a gang's preemption made is the group's: a member may use
     * a sibling's. Otherwise the whole-group plan (members assumed in key
     * order) and the members' own cycles (queue order) would see
     * different nominations and disagree about where members fit.
     * (Tested before the cache lookup below: the answer is the same.) */
    if (same_group(e->pod, pod)) return false;
    /* A nominated pod the cache already holds (a gang plan assumes the
     * members one by one) is counted there: holding its room as well
     * would count it twice, and a gang whose members were all nominated
     * could then never plan itself (kube drops a nomination once the pod
     * is assumed). */
    return !gs_cache_pod_assignment(p->cache, e->key);
}

bool gs_preempt_blocks_only(struct gs_preemption *p, const struct gs_pod *pod, int32_t node)
{
    if (nom_all_own(p, pod)) return true;
    int64_t now = p->nnom ? gs_clock_now(p->clock) : 0;
    for (size_t i = 0; i < p->nnom; i++)
        if (p->nom[i].node != node && holds_against(p, &p->nom[i], pod, now)) return false;
    return true;
}

bool gs_preempt_blocked(struct gs_preemption *p, const struct gs_pod *pod, const struct gs_node_info *node)
{
    if (!p->nnom || nom_all_own(p, pod)) return false;
    int64_t now = gs_clock_now(p->clock), cpu = 0, mem = 0, milli = 0;
    int32_t whole = 0;
    bool any = false;
    for (size_t i = 0; i < p->nnom; i++) {
        const struct nomination *e = &p->nom[i];
        if (e->node != node->idx || !holds_against(p, e, pod, now)) continue;
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
