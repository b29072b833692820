/*
 * gang_core.c - the gang logic; see gang_core.h for the contract.
 *
 * Groups are records in a string map keyed "namespace/name", created by the
 * PodGroup or by the first pod naming it (a pod whose PodGroup never arrives
 * is rejected at PreFilter: minMember is unknown). Members are kept sorted by
 * key so plans and sibling lists come out in the same order every run.
 *
 * Why a plan. Member-by-member gangs (the Coscheduling anchor) reserve one
 * pod at a time and only learn at the last member that the group does not
 * fit, holding capacity meanwhile; two such groups can each hold half of what
 * both need until their timeouts. Planning places every pending member on
 * the cache first (assume, then forget: the cache ends exactly as it began),
 * so a group that does not fit is turned away before it holds anything, and
 * one that fits is steered member by member onto the planned nodes. The plan
 * stays valid while its nodes change only by the group's own reservations:
 * the sum of their generations is compared with what those reservations add.
 *
 * A group with a topology key (PodGroup annotation or args) is planned inside
 * one domain of that node label: the domain of members already placed, else
 * each domain in order of free GPU share until one holds the whole group;
 * "preferred" falls back to the whole cluster, "required" does not.
 */
#include "sched/gang_core.h"

#include "sched/nodeclass.h"
#include "sched/strmap.h"
#include "sched/topology_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct plan_entry {
    char *key;
    int32_t node;
};

struct name_rec;

struct gs_gang_group {
    char *key;
    struct name_rec *nr; /* sums of bound pods naming this group's name; NULL: look it up */
    const char *name; /* inside key, after "namespace/" */
    size_t nslen;
    const struct gs_podgroup *pg;
    int64_t created_ns;
    int64_t backoff_until;
    const struct gs_pod **pods; /* sorted by key */
    char **keys;
    size_t npods, cap;
    bool unwinding;
    /* Which members are in the cache, as of pod version placed_ver (the
     * cache's answer, remembered until its pods or the members change). */
    uint8_t *in_cache;
    int32_t nplaced;
    uint64_t placed_ver;
    bool placed_ok;
    /* Members the adapter is about to assume or forget (Reserve, Unreserve),
     * by index: placed_sync looks at these alone when the cache's pod
     * version moved by exactly as many flips as they show (placed_sync). */
    int32_t suspect[4];
    int nsuspect; /* -1: too many, look at every member */
    /* in_plan[i]: member i has a plan entry (valid while plan_idx_ok);
     * plan_missing: members neither in the cache nor planned (placed_sync). */
    uint8_t *in_plan;
    bool plan_idx_ok;
    int32_t plan_missing;
    /* The last capacity rejection: the same numbers give the same status. */
    bool cap_memo;
    int64_t cap_in[9];
    struct gs_status cap_st;
    /* The plan, its entries by key (index + 1) and its distinct nodes, sorted. */
    struct plan_entry *plan;
    size_t nplan;
    struct gs__strmap plan_ix;
    int32_t *pnodes;
    size_t npnodes;
    uint64_t plan_stamp, plan_bumps;
    /* The last failed plan: the cache's change count then, and why. */
    uint64_t fail_changes;
    bool failed;
    struct gs_status fail_status;
};

/* Pod -> group for registered pods: QueueSort asks for both pods' groups on
 * every comparison, and hashing a pointer beats building and hashing
 * "namespace/name". An entry is only a hint: it is used while the pod still
 * holds the same namespace and group name strings it was registered with
 * (objects are not edited in place while borrowed; a pod given new strings
 * falls back to the lookup by name). Open addressing, backward shift. */
struct pod_slot {
    const struct gs_pod *pod; /* NULL: empty */
    struct gs_gang_group *gr;
    const char *ns, *pod_group; /* the pod's strings when registered */
};

struct pod_index {
    struct pod_slot *slots;
    size_t cap, n; /* cap a power of two */
};

/* Preemptible capacity by priority: sums over bound pods, rebuilt only when
 * the bound pods change (gs_cache_bound_version), so admitting a group is a
 * lookup instead of a walk over every pod in the cache. */
struct prio_sum {
    int32_t prio;
    int64_t cpu, mem, milli;
};

struct prio_sums {
    struct prio_sum *v; /* sorted by prio */
    size_t n, cap;
};

/* Bound pods naming one pod group name (in any namespace). Records live as
 * long as the core; sums count only when stamp equals the current build. */
struct name_rec {
    char *name;
    struct prio_sums s;
    uint64_t stamp;
};

/* The preemptible sums. Once the cache tells the core of every bind and
 * unbind (gs_cache_watch_bound, from the first use on) they follow each
 * event; otherwise (no watcher slot left) they are rebuilt when the bound
 * pods changed (version). Integer sums either way: equal to a walk. */
struct pre_index {
    bool valid, watching;
    uint64_t version;
    uint64_t build;                 /* numbers the rebuilds, from 1 */
    struct prio_sums all;           /* every bound pod */
    struct gs__strmap by_name;      /* name -> struct name_rec (key owned by the record) */
};

struct gs_gang {
    struct gs_gang_opts o;
    const struct gs_clock *clock;
    struct gs_cache *cache;
    struct gs__strmap groups;
    struct gs_gang_group **list;
    size_t nlist, caplist;
    struct gs_gang_stats stats;
    bool planning;
    struct pod_index pods;
    struct pre_index pre;
    /* Free capacity over live schedulable nodes as of gs_cache_changes. */
    bool free_ok;
    uint64_t free_changes;
    int64_t free_cpu, free_mem, free_milli;
    /* Per node slot, the value of label dom_key, as of cache epoch
     * dom_epoch (labels change only with the epoch: node add, update, removal). */
    char *dom_key;
    const char **dom_vals;
    int32_t dom_n;
    uint64_t dom_epoch;
};

/*--- Registry ---*/

struct gs_gang *gs_gang_new(const struct gs_gang_opts *o, const struct gs_clock *clock, struct gs_cache *cache)
{
    struct gs_gang *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->o = *o;
    if (g->o.permit_wait_s <= 0) g->o.permit_wait_s = GS_GANG_DEFAULT_WAIT_S;
    g->clock = clock;
    g->cache = cache;
    gs__strmap_init(&g->groups);
    return g;
}

static void pre_on_bound(void *ctx, const struct gs_pod *pod, const struct gs_assignment *a, bool added);

static void plan_clear(struct gs_gang_group *gr)
{
    for (size_t i = 0; i < gr->nplan; i++) free(gr->plan[i].key);
    free(gr->plan);
    gr->plan = NULL;
    gr->nplan = 0;
    gs__strmap_free(&gr->plan_ix);
    gs__strmap_init(&gr->plan_ix);
    free(gr->pnodes);
    gr->pnodes = NULL;
    gr->npnodes = 0;
    gr->plan_idx_ok = false, gr->placed_ok = false; /* in_plan and plan_missing are recounted */
}

static void group_free(struct gs_gang_group *gr)
{
    plan_clear(gr);
    for (size_t i = 0; i < gr->npods; i++) free(gr->keys[i]);
    free(gr->keys);
    free(gr->pods);
    free(gr->in_cache);
    free(gr->in_plan);
    gs__strmap_free(&gr->plan_ix);
    free(gr->pnodes);
    free(gr->key);
    free(gr);
}

void gs_gang_free(struct gs_gang *g)
{
    if (!g) return;
    if (g->pre.watching) gs_cache_unwatch_bound(g->cache, pre_on_bound, g);
    for (size_t i = 0; i < g->nlist; i++) group_free(g->list[i]);
    free(g->list);
    gs__strmap_free(&g->groups);
    free(g->pods.slots);
    free(g->pre.all.v);
    for (size_t i = 0; i < g->pre.by_name.cap; i++) {
        struct name_rec *nr = g->pre.by_name.slots[i].key ? g->pre.by_name.slots[i].val : NULL;
        if (!nr) continue;
        free(nr->name);
        free(nr->s.v);
        free(nr);
    }
    gs__strmap_free(&g->pre.by_name);
    free(g->dom_key);
    free(g->dom_vals);
    free(g);
}

/*--- Pod index ---*/

static size_t pod_hash(const struct gs_pod *pod) { return (size_t)gs__mix64((uint64_t)(uintptr_t)pod, 0); }

static struct pod_slot *pod_slot_find(const struct pod_index *ix, const struct gs_pod *pod)
{
    if (!ix->cap) return NULL;
    for (size_t i = pod_hash(pod) & (ix->cap - 1);; i = (i + 1) & (ix->cap - 1)) {
        if (ix->slots[i].pod == pod) return &ix->slots[i];
        if (!ix->slots[i].pod) return NULL;
    }
}

static void pod_slot_put_raw(struct pod_index *ix, struct pod_slot e)
{
    size_t i = pod_hash(e.pod) & (ix->cap - 1);
    while (ix->slots[i].pod && ix->slots[i].pod != e.pod) i = (i + 1) & (ix->cap - 1);
    if (!ix->slots[i].pod) ix->n++;
    ix->slots[i] = e;
}

/* A failure only loses the hint: lookups fall back to the name. */
static void pod_index_put(struct pod_index *ix, const struct gs_pod *pod, struct gs_gang_group *gr)
{
    if (2 * (ix->n + 1) > ix->cap) {
        size_t cap = ix->cap ? ix->cap * 2 : 64;
        struct pod_slot *nv = calloc(cap, sizeof *nv);
        if (!nv) return;
        struct pod_index old = *ix;
        *ix = (struct pod_index){nv, cap, 0};
        for (size_t i = 0; i < old.cap; i++)
            if (old.slots[i].pod) pod_slot_put_raw(ix, old.slots[i]);
        free(old.slots);
    }
    pod_slot_put_raw(ix, (struct pod_slot){pod, gr, pod->meta.namespace_, pod->pod_group});
}

static void pod_index_del(struct pod_index *ix, const struct gs_pod *pod)
{
    struct pod_slot *s = pod_slot_find(ix, pod);
    if (!s) return;
    size_t mask = ix->cap - 1, i = (size_t)(s - ix->slots);
    for (size_t j = (i + 1) & mask; ix->slots[j].pod; j = (j + 1) & mask) {
        size_t home = pod_hash(ix->slots[j].pod) & mask;
        /* j's entry may move back to i when i lies cyclically in [home, j). */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            ix->slots[i] = ix->slots[j];
            i = j;
        }
    }
    ix->slots[i] = (struct pod_slot){0};
    ix->n--;
}

static struct name_rec *name_rec_get(struct gs_gang *g, const char *name, bool create)
{
    struct name_rec *nr = gs__strmap_get(&g->pre.by_name, name);
    if (nr || !create) return nr;
    nr = calloc(1, sizeof *nr);
    if (!nr || !(nr->name = strdup(name)) || gs__strmap_put(&g->pre.by_name, nr->name, nr) != 0) {
        if (nr) free(nr->name);
        free(nr);
        return NULL;
    }
    return nr;
}

static struct gs_gang_group *group_get(struct gs_gang *g, const char *ns, const char *name, bool create)
{
    char key[GS__KEY_MAX];
    if (!ns) ns = "default";
    size_t a = strlen(ns), b = strlen(name);
    if (a + b + 2 > sizeof key) return NULL;
    memcpy(key, ns, a); /* QueueSort comes here on every comparison: no printf */
    key[a] = '/';
    memcpy(key + a + 1, name, b + 1);
    struct gs_gang_group *gr = gs__strmap_get(&g->groups, key);
    if (gr || !create) return gr;
    if (g->nlist == g->caplist) {
        size_t cap = g->caplist ? g->caplist * 2 : 16;
        struct gs_gang_group **nv = realloc(g->list, cap * sizeof *nv);
        if (!nv) return NULL;
        g->list = nv;
        g->caplist = cap;
    }
    gr = calloc(1, sizeof *gr);
    if (!gr || !(gr->key = strdup(key)) || gs__strmap_put(&g->groups, gr->key, gr) != 0) {
        if (gr) free(gr->key);
        free(gr);
        return NULL;
    }
    gr->nslen = a;
    gr->name = gr->key + a + 1;
    gr->nr = name_rec_get(g, gr->name, true); /* NULL only costs a lookup later */
    gr->created_ns = gs_clock_now(g->clock);
    g->list[g->nlist++] = gr;
    return gr;
}

/* The key member pods name the group by (object.h); in-memory groups may lack it. */
static const char *pg_group(const struct gs_podgroup *pg) { return pg->group ? pg->group : pg->meta.name; }

int gs_gang_add_podgroup(struct gs_gang *g, const struct gs_podgroup *pg)
{
    if (!pg_group(pg)) return GS_EINVAL;
    struct gs_gang_group *gr = group_get(g, pg->meta.namespace_, pg_group(pg), true);
    if (!gr) return GS_ENOMEM;
    gr->pg = pg;
    return 0;
}

void gs_gang_remove_podgroup(struct gs_gang *g, const struct gs_podgroup *pg)
{
    struct gs_gang_group *gr = pg_group(pg) ? group_get(g, pg->meta.namespace_, pg_group(pg), false) : NULL;
    if (gr && gr->pg == pg) gr->pg = NULL;
}

struct gs_gang_group *gs_gang_group_of(struct gs_gang *g, const struct gs_pod *pod)
{
    if (!pod->pod_group || !*pod->pod_group) return NULL;
    const struct pod_slot *s = pod_slot_find(&g->pods, pod);
    if (s && s->ns == pod->meta.namespace_ && s->pod_group == pod->pod_group) return s->gr;
    return group_get(g, pod->meta.namespace_, pod->pod_group, false);
}

int gs_gang_add_pod(struct gs_gang *g, const struct gs_pod *pod)
{
    if (!pod->pod_group || !*pod->pod_group) return 0;
    struct gs_gang_group *gr = group_get(g, pod->meta.namespace_, pod->pod_group, true);
    if (!gr) return GS_ENOMEM;
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    size_t at = 0;
    while (at < gr->npods && strcmp(gr->keys[at], key) < 0) at++;
    if (at < gr->npods && !strcmp(gr->keys[at], key)) {
        if (gr->pods[at] != pod) pod_index_del(&g->pods, gr->pods[at]);
        gr->pods[at] = pod;
        pod_index_put(&g->pods, pod, gr);
        return 0;
    }
    if (gr->npods == gr->cap) {
        size_t cap = gr->cap ? gr->cap * 2 : 8;
        const struct gs_pod **np = realloc(gr->pods, cap * sizeof *np);
        if (!np) return GS_ENOMEM;
        gr->pods = np;
        char **nk = realloc(gr->keys, cap * sizeof *nk);
        if (!nk) return GS_ENOMEM;
        gr->keys = nk;
        uint8_t *nf = realloc(gr->in_cache, cap);
        if (!nf) return GS_ENOMEM;
        gr->in_cache = nf;
        uint8_t *np2 = realloc(gr->in_plan, cap);
        if (!np2) return GS_ENOMEM;
        gr->in_plan = np2;
        gr->cap = cap;
    }
    char *dup = strdup(key);
    if (!dup) return GS_ENOMEM;
    memmove(gr->pods + at + 1, gr->pods + at, (gr->npods - at) * sizeof *gr->pods);
    memmove(gr->keys + at + 1, gr->keys + at, (gr->npods - at) * sizeof *gr->keys);
    gr->pods[at] = pod;
    gr->keys[at] = dup;
    gr->npods++;
    gr->placed_ok = false, gr->plan_idx_ok = false;
    pod_index_put(&g->pods, pod, gr);
    return 0;
}

void gs_gang_remove_pod(struct gs_gang *g, const struct gs_pod *pod)
{
    struct gs_gang_group *gr = gs_gang_group_of(g, pod);
    pod_index_del(&g->pods, pod);
    if (!gr) return;
    for (size_t i = 0; i < gr->npods; i++) {
        if (gr->pods[i] != pod) continue;
        free(gr->keys[i]);
        memmove(gr->pods + i, gr->pods + i + 1, (gr->npods - i - 1) * sizeof *gr->pods);
        memmove(gr->keys + i, gr->keys + i + 1, (gr->npods - i - 1) * sizeof *gr->keys);
        gr->npods--;
        gr->placed_ok = false, gr->plan_idx_ok = false;
        return;
    }
}

const char *gs_gang_group_key(const struct gs_gang_group *gr) { return gr->key; }
int32_t gs_gang_min_member(const struct gs_gang_group *gr) { return gr->pg ? gr->pg->min_member : 0; }

size_t gs_gang_members(const struct gs_gang_group *gr, const struct gs_pod *const **pods)
{
    if (pods) *pods = gr->pods;
    return gr->npods;
}

static bool placed(const struct gs_gang *g, const char *key) { return gs_cache_pod_assignment(g->cache, key) != NULL; }

static const struct plan_entry *plan_find(const struct gs_gang_group *gr, const char *key);

/* Every member looked up again; in_plan rebuilt when the plan or the
 * members changed; plan_missing recounted. */
static void placed_full(const struct gs_gang *g, struct gs_gang_group *gr)
{
    int32_t n = 0, missing = 0;
    for (size_t i = 0; i < gr->npods; i++) {
        n += gr->in_cache[i] = placed(g, gr->keys[i]);
        if (!gr->plan_idx_ok) gr->in_plan[i] = plan_find(gr, gr->keys[i]) != NULL;
        missing += !gr->in_cache[i] && !gr->in_plan[i];
    }
    gr->plan_idx_ok = true;
    gr->nplaced = n;
    gr->plan_missing = missing;
}

/*
 * Brings gr's in_cache flags up to date. The cache's pod version changes
 * whenever a pod enters or leaves it (by at least one per entry or exit),
 * and member changes clear placed_ok, so equal versions mean the same
 * answers as asking the cache again. When it moved by d and the suspects
 * (members the adapter reserved or unreserved since) show d flips between
 * them, those flips are all the entries and exits there were, so no other
 * member moved: only the suspects are looked up. Otherwise every member is.
 */
static void placed_sync(const struct gs_gang *g, struct gs_gang_group *gr)
{
    uint64_t v = gs_cache_pod_version(g->cache);
    if (gr->placed_ok && gr->placed_ver == v) {
        gr->nsuspect = 0;
        return;
    }
    bool done = false;
    if (gr->placed_ok && gr->plan_idx_ok && gr->nsuspect > 0 && v > gr->placed_ver) {
        uint8_t now[4];
        uint64_t flips = 0;
        for (int k = 0; k < gr->nsuspect; k++) {
            int32_t i = gr->suspect[k];
            bool dup = false;
            for (int j = 0; j < k; j++) dup = dup || gr->suspect[j] == i;
            now[k] = placed(g, gr->keys[i]);
            if (!dup) flips += now[k] != gr->in_cache[i];
        }
        if (flips == v - gr->placed_ver) {
            for (int k = 0; k < gr->nsuspect; k++) {
                int32_t i = gr->suspect[k];
                if (now[k] == gr->in_cache[i]) continue;
                int d = now[k] ? 1 : -1;
                gr->in_cache[i] = now[k];
                gr->nplaced += d;
                if (!gr->in_plan[i]) gr->plan_missing -= d;
            }
            done = true;
        }
    }
    if (!done) placed_full(g, gr);
    gr->nsuspect = 0;
    gr->placed_ver = v;
    gr->placed_ok = true;
}

/* Member pod of gr is about to enter or leave the cache (binary search: keys are sorted). */
static void suspect(struct gs_gang_group *gr, const struct gs_pod *pod)
{
    if (gr->nsuspect < 0) return;
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    size_t lo = 0, hi = gr->npods;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(gr->keys[mid], key) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo == gr->npods || gr->pods[lo] != pod || gr->nsuspect == 4) {
        gr->nsuspect = -1; /* unknown or too many: placed_sync looks at everyone */
        return;
    }
    gr->suspect[gr->nsuspect++] = (int32_t)lo;
}

int32_t gs_gang_placed(const struct gs_gang *g, const struct gs_gang_group *gr)
{
    struct gs_gang_group *m = (struct gs_gang_group *)gr; /* the memo only; groups are never const objects */
    placed_sync(g, m);
    return m->nplaced;
}

const uint8_t *gs_gang_placed_flags(struct gs_gang *g, struct gs_gang_group *gr)
{
    placed_sync(g, gr);
    return gr->in_cache;
}

int64_t gs_gang_timeout_ns(const struct gs_gang *g, const struct gs_gang_group *gr)
{
    int32_t s = gr->pg && gr->pg->schedule_timeout_seconds > 0 ? gr->pg->schedule_timeout_seconds : g->o.permit_wait_s;
    return (int64_t)s * GS_NS_PER_SEC;
}

const struct gs_gang_stats *gs_gang_stats(const struct gs_gang *g) { return &g->stats; }

/*--- QueueSort ---*/

/* The pod's key, as gs__pod_key writes it, without going through printf. */
static const char *pod_key_fast(const struct gs_pod *pod, char *buf)
{
    const char *ns = pod->meta.namespace_ ? pod->meta.namespace_ : "default";
    const char *name = pod->meta.name ? pod->meta.name : "";
    size_t a = strlen(ns), b = strlen(name);
    if (a + b + 2 > GS__KEY_MAX) {
        gs__pod_key(pod, buf, GS__KEY_MAX); /* truncates like it always did */
        return buf;
    }
    memcpy(buf, ns, a);
    buf[a] = '/';
    memcpy(buf + a + 1, name, b + 1);
    return buf;
}

/* Do both pods name the same group key (namespace and group name)? Groups
 * are found by that key and never replaced, so such pods share a group. */
static bool same_group_names(const struct gs_pod *a, const struct gs_pod *b)
{
    if (!a->pod_group || !b->pod_group || !*a->pod_group) return false;
    const char *na = a->meta.namespace_ ? a->meta.namespace_ : "default";
    const char *nb = b->meta.namespace_ ? b->meta.namespace_ : "default";
    return (a->pod_group == b->pod_group || !strcmp(a->pod_group, b->pod_group)) && (na == nb || !strcmp(na, nb));
}

bool gs_gang_less(struct gs_gang *g, const struct gs_queued_pod *a, const struct gs_queued_pod *b)
{
    if (a->pod->priority != b->pod->priority) return a->pod->priority > b->pod->priority;
    if (same_group_names(a->pod, b->pod)) { /* one key, so one group (or none): one lookup */
        struct gs_gang_group *gr = gs_gang_group_of(g, a->pod);
        if (gr) return a->seq < b->seq; /* equal creation times, same key */
    }
    struct gs_gang_group *ga = gs_gang_group_of(g, a->pod), *gb = gs_gang_group_of(g, b->pod);
    int64_t ta = ga ? ga->created_ns : a->enqueued_ns, tb = gb ? gb->created_ns : b->enqueued_ns;
    if (ta != tb) return ta < tb;
    if (ga && ga == gb) return a->seq < b->seq; /* same key */
    char ba[GS__KEY_MAX], bb[GS__KEY_MAX];
    const char *ka = ga ? ga->key : pod_key_fast(a->pod, ba); /* group keys are shorter than GS__KEY_MAX */
    const char *kb = gb ? gb->key : pod_key_fast(b->pod, bb);
    int c = strcmp(ka, kb);
    if (c) return c < 0;
    return a->seq < b->seq;
}

/*--- Admission ---*/

struct cap {
    int64_t cpu, mem, milli;
};

struct preempt_ctx {
    const struct gs_gang_group *gr;
    int32_t prio;
    struct cap *c;
};

static void add_preemptible(void *arg, const struct gs_pod *pod, const struct gs_assignment *a, bool bound)
{
    struct preempt_ctx *p = arg;
    if (!bound || pod->priority >= p->prio) return;
    if (p->gr && pod->pod_group && !strcmp(pod->pod_group, strchr(p->gr->key, '/') + 1)) return;
    p->c->cpu += pod->demand.cpu_milli;
    p->c->mem += pod->demand.mem_bytes;
    p->c->milli += (int64_t)a->milli * __builtin_popcountll(a->gpu_mask);
}

static struct cap free_capacity(struct gs_gang *g)
{
    uint64_t v = gs_cache_changes(g->cache); /* every node change moves it */
    if (g->free_ok && g->free_changes == v) return (struct cap){g->free_cpu, g->free_mem, g->free_milli};
    struct cap c = {0};
    struct gs_nodeclasses *x = gs_cache_classes(g->cache);
    if (x) { /* members of a class are live and hold equal amounts: one node's times the count */
        for (size_t k = 0; k < gs_nodeclass_count(x); k++) {
            struct gs_nodeclass cl = gs_nodeclass_get(x, k);
            const struct gs_node_info *n = gs_cache_node(g->cache, cl.min);
            if (!cl.schedulable || !n) continue;
            c.cpu += (n->cpu_alloc - n->cpu_used) * cl.n;
            c.mem += (n->mem_alloc - n->mem_used) * cl.n;
            c.milli += (int64_t)n->gpu_milli_free * cl.n;
        }
    } else {
        for (int32_t i = 0; i < gs_cache_node_count(g->cache); i++) {
            const struct gs_node_info *n = gs_cache_node(g->cache, i);
            if (!n->live || !n->schedulable) continue;
            c.cpu += n->cpu_alloc - n->cpu_used;
            c.mem += n->mem_alloc - n->mem_used;
            c.milli += n->gpu_milli_free;
        }
    }
    g->free_ok = true;
    g->free_changes = v;
    g->free_cpu = c.cpu, g->free_mem = c.mem, g->free_milli = c.milli;
    return c;
}

static int sums_add(struct prio_sums *s, int32_t prio, const struct cap *c)
{
    size_t i = 0;
    while (i < s->n && s->v[i].prio < prio) i++;
    if (i == s->n || s->v[i].prio != prio) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 4;
            struct prio_sum *nv = realloc(s->v, cap * sizeof *nv);
            if (!nv) return GS_ENOMEM;
            s->v = nv;
            s->cap = cap;
        }
        memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof *s->v);
        s->v[i] = (struct prio_sum){.prio = prio};
        s->n++;
    }
    s->v[i].cpu += c->cpu, s->v[i].mem += c->mem, s->v[i].milli += c->milli;
    return 0;
}

/* Adds (sign 1) or takes away (sign -1) the sums of priorities below prio. */
static void sums_below(const struct prio_sums *s, int32_t prio, int sign, struct cap *c)
{
    for (size_t i = 0; i < s->n && s->v[i].prio < prio; i++)
        c->cpu += sign * s->v[i].cpu, c->mem += sign * s->v[i].mem, c->milli += sign * s->v[i].milli;
}

struct pre_build {
    struct gs_gang *g;
    int err;
};

/* The name record of a pod's group name: through the pod index for a
 * registered pod (no string hashing), else by name. */
static struct name_rec *name_rec_of_pod(struct gs_gang *g, const struct gs_pod *pod)
{
    const struct pod_slot *s = pod_slot_find(&g->pods, pod);
    if (s && s->ns == pod->meta.namespace_ && s->pod_group == pod->pod_group && s->gr->nr) return s->gr->nr;
    return name_rec_get(g, pod->pod_group, true);
}

/* Adds (sign 1) or takes away (sign -1) one bound pod from the sums. */
static int sums_pod(struct gs_gang *g, const struct gs_pod *pod, const struct gs_assignment *a, int64_t sign)
{
    struct cap c = {sign * pod->demand.cpu_milli, sign * pod->demand.mem_bytes,
                    sign * (int64_t)a->milli * __builtin_popcountll(a->gpu_mask)};
    if (sums_add(&g->pre.all, pod->priority, &c) != 0) return GS_ENOMEM;
    if (!pod->pod_group || !*pod->pod_group) return 0;
    struct name_rec *nr = name_rec_of_pod(g, pod);
    if (!nr) return GS_ENOMEM;
    if (nr->stamp != g->pre.build) nr->stamp = g->pre.build, nr->s.n = 0;
    return sums_add(&nr->s, pod->priority, &c);
}

static void pre_on_bound(void *ctx, const struct gs_pod *pod, const struct gs_assignment *a, bool added)
{
    struct gs_gang *g = ctx;
    if (g->pre.valid && sums_pod(g, pod, a, added ? 1 : -1) != 0) g->pre.valid = false; /* rebuilt at the next use */
}

static void collect_bound(void *arg, const struct gs_pod *pod, const struct gs_assignment *a, bool bound)
{
    struct pre_build *b = arg;
    if (!bound || b->err) return;
    struct cap c = {pod->demand.cpu_milli, pod->demand.mem_bytes, (int64_t)a->milli * __builtin_popcountll(a->gpu_mask)};
    if (sums_add(&b->g->pre.all, pod->priority, &c) != 0) b->err = GS_ENOMEM;
    if (b->err || !pod->pod_group || !*pod->pod_group) return;
    struct name_rec *nr = name_rec_of_pod(b->g, pod);
    if (!nr) {
        b->err = GS_ENOMEM;
        return;
    }
    if (nr->stamp != b->g->pre.build) nr->stamp = b->g->pre.build, nr->s.n = 0;
    if (sums_add(&nr->s, pod->priority, &c) != 0) b->err = GS_ENOMEM;
}

/* Preemptible capacity for gr at prio from the sums (rebuilt when the bound
 * pods changed): every bound pod below prio, less those naming gr's group
 * (by name, in any namespace, as the walk in add_preemptible does). Integer
 * sums, so the total equals the walk's. False when the sums could not be
 * built: the caller walks the pods instead. */
static bool preemptible(struct gs_gang *g, const struct gs_gang_group *gr, int32_t prio, struct cap *out)
{
    struct pre_index *p = &g->pre;
    uint64_t v = gs_cache_bound_version(g->cache);
    if (!p->watching && gs_cache_watch_bound(g->cache, pre_on_bound, g) == 0) p->watching = true, p->valid = false;
    if (!p->valid || (!p->watching && p->version != v)) {
        p->all.n = 0;
        p->build++;
        struct pre_build b = {g, 0};
        gs_cache_foreach_pod(g->cache, collect_bound, &b);
        p->valid = !b.err;
        p->version = v;
        if (!p->valid) return false;
    }
    *out = (struct cap){0};
    sums_below(&p->all, prio, 1, out);
    const struct name_rec *nr = gr->nr ? gr->nr : name_rec_get(g, gr->name, false);
    if (nr && nr->stamp == p->build) sums_below(&nr->s, prio, -1, out);
    return true;
}

static struct gs_status check_capacity(struct gs_gang *g, struct gs_gang_group *gr, const struct gs_pod *pod)
{
    struct cap need = {0};
    placed_sync(g, gr);
    for (size_t i = 0; i < gr->npods; i++) {
        if (gr->in_cache[i]) continue;
        const struct gs_demand *d = &gr->pods[i]->demand;
        need.cpu += d->cpu_milli;
        need.mem += d->mem_bytes;
        need.milli += (int64_t)d->gpu_count * d->gpu_milli;
    }
    if (gr->pg && gs_gang_placed(g, gr) == 0) {
        const struct gs_resources *mr = &gr->pg->min_resources;
        int64_t v;
        if ((v = gs_resources_get(mr, GS_RES_CPU)) > need.cpu) need.cpu = v;
        if ((v = gs_resources_get(mr, GS_RES_MEMORY) / 1000) > need.mem) need.mem = v;
        if ((v = gs_resources_get(mr, GS_RES_GPU)) > need.milli) need.milli = v;
    }
    struct cap fr = free_capacity(g), pre = {0};
    /* Preemptible amounts are sums of requests (never negative): when free
     * capacity alone holds the need they cannot change the answer. */
    if (need.milli <= fr.milli && need.cpu <= fr.cpu && need.mem <= fr.mem) return (struct gs_status){0};
    if (!preemptible(g, gr, pod->priority, &pre)) {
        struct preempt_ctx pc = {gr, pod->priority, &pre};
        gs_cache_foreach_pod(g->cache, add_preemptible, &pc);
    }
    const char *what = need.milli > fr.milli + pre.milli ? "GPU"
                       : need.cpu > fr.cpu + pre.cpu    ? "CPU"
                       : need.mem > fr.mem + pre.mem    ? "memory"
                                                        : NULL;
    if (!what) return (struct gs_status){0};
    g->stats.rejected_capacity++;
    /* Retries of a group that stays short mostly see the same numbers: the
     * reason is a function of them (and the group's key), so reuse it. */
    int64_t in[9] = {need.cpu, need.mem, need.milli, fr.cpu, fr.mem, fr.milli, pre.cpu, pre.mem, pre.milli};
    if (gr->cap_memo && !memcmp(in, gr->cap_in, sizeof in)) return gr->cap_st;
    gr->cap_st = gs_status_make(GS_UNSCHEDULABLE_AND_UNRESOLVABLE,
                                "pod group %s needs %.1f GPUs, %.1f free and %.1f preemptible (%s short)", gr->key,
                                (double)need.milli / 1000, (double)fr.milli / 1000, (double)pre.milli / 1000, what);
    memcpy(gr->cap_in, in, sizeof in);
    gr->cap_memo = true;
    return gr->cap_st;
}

struct gs_status gs_gang_admit(struct gs_gang *g, const struct gs_pod *pod)
{
    struct gs_gang_group *gr = gs_gang_group_of(g, pod);
    if (!gr) return (struct gs_status){0};
    if (!gr->pg) {
        g->stats.rejected_incomplete++;
        return gs_status_make(GS_UNSCHEDULABLE_AND_UNRESOLVABLE, "PodGroup %s not found", gr->key);
    }
    int32_t min = gr->pg->min_member > 0 ? gr->pg->min_member : 1;
    if (gs_gang_placed(g, gr) >= min) return (struct gs_status){0}; /* started: later members go alone */
    int64_t now = gs_clock_now(g->clock);
    if (now < gr->backoff_until) {
        g->stats.rejected_backoff++;
        return gs_status_make(GS_UNSCHEDULABLE, "pod group %s is backing off for %.0f s", gr->key,
                              (double)(gr->backoff_until - now) / GS_NS_PER_SEC);
    }
    if ((int32_t)gr->npods < min) {
        g->stats.rejected_incomplete++;
        return gs_status_make(GS_UNSCHEDULABLE_AND_UNRESOLVABLE, "pod group %s has %zu of minMember %d pods",
                              gr->key, gr->npods, min);
    }
    struct gs_status s = check_capacity(g, gr, pod);
    if (s.code == GS_SUCCESS) g->stats.admitted++;
    return s;
}

/*--- Planning ---*/

const char *gs_gang_domain(struct gs_gang *g, const struct gs_pod *pod, bool *required, const char **domain)
{
    struct gs_gang_group *gr = gs_gang_group_of(g, pod);
    *required = false;
    *domain = NULL;
    if (!gr) return NULL;
    const char *key = NULL;
    if (gr->pg) {
        key = gs_labels_get(&gr->pg->meta.annotations, GS_ANN_GANG_REQUIRED_TOPOLOGY);
        if (key) *required = true;
        else if ((key = gr->pg->topology_key)) *required = true; /* native schedulingConstraints */
        else key = gs_labels_get(&gr->pg->meta.annotations, GS_ANN_GANG_PREFERRED_TOPOLOGY);
    }
    if (!key && g->o.topology_key) key = g->o.topology_key, *required = g->o.topology_required;
    if (!key) return NULL;
    placed_sync(g, gr);
    for (size_t i = 0; i < gr->npods && !*domain; i++) {
        if (!gr->in_cache[i]) continue;
        const struct gs_assignment *a = gs_cache_pod_assignment(g->cache, gr->keys[i]);
        if (a) *domain = gs_topo_domain(gs_cache_node(g->cache, a->node), key);
    }
    return key;
}

static uint64_t plan_sum(const struct gs_gang *g, const struct gs_gang_group *gr)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < gr->npnodes; i++) {
        const struct gs_node_info *n = gs_cache_node(g->cache, gr->pnodes[i]);
        if (n) sum += n->generation;
    }
    return sum;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* The plan's key index and distinct nodes. 0 or GS_ENOMEM. */
static int plan_index(struct gs_gang_group *gr)
{
    int32_t *nodes = malloc((gr->nplan ? gr->nplan : 1) * sizeof *nodes);
    if (!nodes) return GS_ENOMEM;
    for (size_t i = 0; i < gr->nplan; i++) {
        nodes[i] = gr->plan[i].node;
        if (gs__strmap_put(&gr->plan_ix, gr->plan[i].key, (void *)(uintptr_t)(i + 1)) != 0) {
            free(nodes);
            return GS_ENOMEM;
        }
    }
    qsort(nodes, gr->nplan, sizeof *nodes, cmp_i32);
    size_t k = 0;
    for (size_t i = 0; i < gr->nplan; i++)
        if (!k || nodes[k - 1] != nodes[i]) nodes[k++] = nodes[i];
    gr->pnodes = nodes;
    gr->npnodes = k;
    return 0;
}

static bool plan_has_node(const struct gs_gang_group *gr, int32_t node)
{
    return gr->npnodes && bsearch(&node, gr->pnodes, gr->npnodes, sizeof node, cmp_i32);
}

/* Places every unplaced member inside domain (NULL: anywhere); on success
 * records the plan. Leaves the cache as it found it. */
static bool try_plan(struct gs_gang *g, struct gs_gang_group *gr, gs_gang_place_fn place, void *ctx, const char *key,
                     const char *domain, const char **failed)
{
    struct plan_entry *pl = calloc(gr->npods ? gr->npods : 1, sizeof *pl);
    const struct gs_pod **assumed = calloc(gr->npods ? gr->npods : 1, sizeof *assumed);
    size_t np = 0;
    bool ok = pl && assumed;
    for (size_t i = 0; ok && i < gr->npods; i++) {
        if (placed(g, gr->keys[i])) continue;
        struct gs_assignment a;
        if (place(ctx, gr->pods[i], key, domain, &a) != 0 || gs_cache_assume(g->cache, gr->pods[i], &a, 0) != 0) {
            *failed = gr->keys[i];
            ok = false;
            break;
        }
        assumed[np] = gr->pods[i];
        pl[np++] = (struct plan_entry){gr->keys[i], a.node};
    }
    for (size_t i = 0; i < np; i++) {
        char k[GS__KEY_MAX];
        gs__pod_key(assumed[i], k, sizeof k);
        gs_cache_forget(g->cache, k);
    }
    free(assumed);
    if (!ok) {
        free(pl);
        return false;
    }
    plan_clear(gr);
    for (size_t i = 0; i < np; i++) pl[i].key = strdup(pl[i].key);
    gr->plan = pl;
    gr->nplan = np;
    bool keys_ok = true;
    for (size_t i = 0; i < np; i++) keys_ok = keys_ok && pl[i].key;
    if (!keys_ok || plan_index(gr) != 0) { /* out of memory: no plan, members go one by one */
        plan_clear(gr);
        return true;
    }
    gr->plan_stamp = plan_sum(g, gr);
    gr->plan_bumps = 0;
    return true;
}

const char *const *gs__gang_node_domains(struct gs_gang *g, const char *key)
{
    int32_t n = gs_cache_node_count(g->cache);
    uint64_t e = gs_cache_epoch(g->cache);
    if (g->dom_key && g->dom_n == n && g->dom_epoch == e && !strcmp(g->dom_key, key)) return g->dom_vals;
    free(g->dom_key);
    g->dom_key = NULL;
    const char **v = realloc(g->dom_vals, (size_t)(n ? n : 1) * sizeof *v);
    if (!v) return NULL;
    g->dom_vals = v;
    if (!(g->dom_key = strdup(key))) return NULL;
    for (int32_t i = 0; i < n; i++) v[i] = gs_topo_domain(gs_cache_node(g->cache, i), key);
    g->dom_n = n;
    g->dom_epoch = e;
    return v;
}

/* Domains of key in node order, most free GPU share first. */
static size_t domains(struct gs_gang *g, const char *key, const char **out, int64_t *free_milli, size_t max)
{
    size_t n = 0;
    const char *const *dv = gs__gang_node_domains(g, key);
    for (int32_t i = 0; i < gs_cache_node_count(g->cache); i++) {
        const struct gs_node_info *ni = gs_cache_node(g->cache, i);
        const char *v = !ni->live || !ni->schedulable ? NULL : dv ? dv[i] : gs_topo_domain(ni, key);
        if (!v) continue;
        size_t k = 0;
        while (k < n && out[k] != v && strcmp(out[k], v)) k++;
        if (k == n) {
            if (n == max) continue;
            out[n] = v, free_milli[n++] = 0;
        }
        free_milli[k] += ni->gpu_milli_free;
    }
    for (size_t i = 1; i < n; i++) /* stable insertion sort: more free first */
        for (size_t j = i; j > 0 && free_milli[j] > free_milli[j - 1]; j--) {
            const char *t = out[j];
            out[j] = out[j - 1], out[j - 1] = t;
            int64_t f = free_milli[j];
            free_milli[j] = free_milli[j - 1], free_milli[j - 1] = f;
        }
    return n;
}

#define MAX_DOMAINS 256

struct gs_status gs_gang_plan(struct gs_gang *g, const struct gs_pod *pod, gs_gang_place_fn place, void *ctx)
{
    struct gs_gang_group *gr = gs_gang_group_of(g, pod);
    if (!gr || !g->o.whole_group_plan) return (struct gs_status){0}; /* member by member */
    g->stats.plans++;
    /* Nothing moved since the last failure: the answer is the same. */
    if (gr->failed && gr->fail_changes == gs_cache_changes(g->cache)) return gr->fail_status;
    bool required;
    const char *domain, *failed = NULL;
    const char *key = gs_gang_domain(g, pod, &required, &domain);
    g->planning = true;
    bool ok = false;
    if (key && domain) {
        ok = try_plan(g, gr, place, ctx, key, domain, &failed);
    } else if (key) {
        const char *doms[MAX_DOMAINS];
        int64_t fm[MAX_DOMAINS];
        size_t nd = domains(g, key, doms, fm, MAX_DOMAINS);
        for (size_t i = 0; i < nd && !ok; i++) ok = try_plan(g, gr, place, ctx, key, doms[i], &failed);
    }
    if (!ok && (!key || !required)) ok = try_plan(g, gr, place, ctx, NULL, NULL, &failed);
    g->planning = false;
    gr->failed = !ok;
    if (ok) return (struct gs_status){0};
    g->stats.plan_failures++;
    gr->fail_changes = gs_cache_changes(g->cache);
    if (key && required)
        gr->fail_status = gs_status_make(GS_UNSCHEDULABLE, "no %s%s%s can hold all members of pod group %s", key,
                                         domain ? " other than " : " domain", domain ? domain : "", gr->key);
    else
        gr->fail_status = gs_status_make(GS_UNSCHEDULABLE,
                                         "pod group %s does not fit as a whole: %s has no node once the others are placed",
                                         gr->key, failed ? failed : "a member");
    return gr->fail_status;
}

bool gs_gang_planning(const struct gs_gang *g) { return g->planning; }

static const struct plan_entry *plan_find(const struct gs_gang_group *gr, const char *key)
{
    uintptr_t i = gr->nplan ? (uintptr_t)gs__strmap_get(&gr->plan_ix, key) : 0;
    return i ? &gr->plan[i - 1] : NULL;
}

bool gs_gang_plan_valid(const struct gs_gang *g, const struct gs_pod *pod)
{
    struct gs_gang_group *gr = gs_gang_group_of((struct gs_gang *)g, pod);
    if (!gr || !gr->nplan) return false;
    placed_sync(g, gr);
    if (gr->plan_missing) return false; /* a member neither placed nor planned */
    return plan_sum(g, gr) == gr->plan_stamp + gr->plan_bumps;
}

int32_t gs_gang_planned_node(const struct gs_gang *g, const struct gs_pod *pod)
{
    struct gs_gang_group *gr = gs_gang_group_of((struct gs_gang *)g, pod);
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    const struct plan_entry *e = gr ? plan_find(gr, key) : NULL;
    return e ? e->node : -1;
}

/*--- Reserve, Permit, failures ---*/

void gs_gang_reserved(struct gs_gang *g, const struct gs_pod *pod, int32_t node)
{
    struct gs_gang_group *gr = gs_gang_group_of(g, pod);
    if (!gr) return;
    suspect(gr, pod); /* the framework assumes it next */
    if (plan_has_node(gr, node)) {
        gr->plan_bumps++;
        return;
    }
    if (gr->nplan) plan_clear(gr); /* reserved off plan: whatever was planned no longer holds */
}

static char **siblings(struct gs_gang *g, struct gs_gang_group *gr, const struct gs_pod *pod, size_t *n)
{
    *n = 0;
    char **out = calloc(gr->npods ? gr->npods : 1, sizeof *out);
    if (!out) return NULL;
    placed_sync(g, gr);
    for (size_t i = 0; i < gr->npods; i++)
        if (gr->pods[i] != pod && gr->in_cache[i] && (out[*n] = strdup(gr->keys[i]))) (*n)++;
    return out;
}

enum gs_code gs_gang_permit(struct gs_gang *g, const struct gs_pod *pod, int64_t *timeout_ns, char ***allow,
                            size_t *nallow)
{
    *allow = NULL;
    *nallow = 0;
    struct gs_gang_group *gr = gs_gang_group_of(g, pod);
    if (!gr || !gr->pg) return GS_SUCCESS;
    int32_t min = gr->pg->min_member > 0 ? gr->pg->min_member : 1;
    if (gs_gang_placed(g, gr) < min) {
        *timeout_ns = gs_gang_timeout_ns(g, gr);
        g->stats.permits_waited++;
        return GS_WAIT;
    }
    *allow = siblings(g, gr, pod, nallow);
    g->stats.groups_started++;
    plan_clear(gr);
    return GS_SUCCESS;
}

size_t gs_gang_member_failed(struct gs_gang *g, const struct gs_pod *pod, bool reserved, char ***reject)
{
    *reject = NULL;
    struct gs_gang_group *gr = gs_gang_group_of(g, pod);
    if (gr && reserved) suspect(gr, pod); /* the framework forgets it next */
    if (!gr || !gr->pg || gr->unwinding) return 0;
    int32_t min = gr->pg->min_member > 0 ? gr->pg->min_member : 1;
    int32_t have = gs_gang_placed(g, gr);
    if (have >= min + (reserved ? 1 : 0)) return 0; /* started without this one */
    if (!reserved && have == 0) return 0;
    if (!reserved && 100 * (min - have) <= g->o.reject_percentage * min) return 0;
    g->stats.timeouts_or_failures++;
    gr->backoff_until = gs_clock_now(g->clock) + (int64_t)g->o.backoff_s * GS_NS_PER_SEC;
    plan_clear(gr);
    size_t n;
    *reject = siblings(g, gr, pod, &n);
    return *reject ? n : 0;
}

void gs_gang_keys_free(char **keys, size_t n)
{
    for (size_t i = 0; keys && i < n; i++) free(keys[i]);
    free(keys);
}

void gs_gang_set_unwinding(struct gs_gang *g, const struct gs_pod *pod, bool on)
{
    struct gs_gang_group *gr = gs_gang_group_of(g, pod);
    if (gr) gr->unwinding = on;
}
