/*
 * replay_gangq.c - gang queueing modes of the replay and its gang
 * accounting; see replay_gangq.h for the rules of each mode.
 *
 * Data. Every trace pod belongs to one workload (its PodGroup's, or its
 * own). A workload is complete when minMember of its pods have arrived; it
 * then joins the line (`line`, in order of completion) unless the mode lets
 * every pod through. Per pod the queue keeps where it runs and when it ends
 * (the reservation's shadow start is computed from these), and per workload
 * how many of its pods run (the partial-gang check) and when its last pod
 * was first bound (the gang's queueing delay).
 *
 * Modes are rows of one table (MODES): a base cycle (fifo, volcano,
 * reserve) and flags for what a variant changes, so each variant measured
 * in bench/RESULTS.md stays runnable by name.
 *
 * The real shadow start (F_SHADOW_REAL) asks the placement check, which
 * reads the live cache, about a future state: it takes the pods that end
 * first out of the cache (gs_cache_remove_pod, or gs_cache_forget for this
 * cycle's own assumptions), checks, and puts them back with the devices
 * they had. A whole-GPU best fit per node (per domain) rules out most end
 * times before the check runs, so the check runs a few times per cycle.
 * Putting pods back moves the cache's change counters, so plugins' caches
 * keyed on them recompute; the decisions stay the same for a seed.
 */
#include "sim/replay_gangq.h"

#include "sched/admission/placement.h"
#include "sched/gang_core.h"
#include "sched/strmap.h"
#include "sched/topology_core.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct qpod {
    size_t wl;
    int32_t node, gpus;   /* where it runs now (node -1: not running) */
    int64_t end_ns;       /* -1: runs forever */
    int64_t dur_ns;       /* its run time, -1 forever */
    int32_t pin;          /* reserve: the node a backfill beside the reservation must take, -1 none */
    bool arrived, released, waiting_bind, bound_once;
};

struct wl {
    size_t *pods;         /* trace indices, in trace order */
    size_t n, arrived, nbound_once;
    int32_t min_member;
    int32_t priority;     /* the highest of its pods' */
    const char *topo_key; /* its PodGroup's required topology domain (a node label), NULL none; borrowed */
    int32_t on_node;
    int64_t first_arrival_ns, started_ns; /* started: the last pod's first bind, -1 until then */
    int64_t deadline_ns;  /* as the head: its first shadow start plus the mode's slack, -1 unset */
    int64_t queued_ns;    /* when it joined the line */
    int64_t gpu_milli, cpu_milli, mem_bytes, duration_ns;
    bool queued, released, ended, touched, held;
};

struct by_ptr {
    const struct gs_pod *p;
    size_t i;
};

/* A pod the real shadow start releases: running (bound) or assumed by this
 * cycle's checks, until end. */
struct relp {
    size_t i;
    int64_t end;
    struct gs_assignment a;
    bool assumed;
};

struct gs_gangq {
    enum gs_gangq_mode mode;
    enum gs_gangq_mode base;      /* the cycle the mode runs (MODES) */
    unsigned flags;               /* F_* */
    int64_t slack_ns;
    const struct gs_trace *t;
    struct gs_cache *cache;
    struct gs_placer *placer;
    gs_gangq_release_fn release;
    void *ctx;
    struct qpod *pods;
    struct wl *wls;
    size_t nwls;
    size_t *line, nline;          /* complete workloads not yet let in, in order */
    size_t *touched, ntouched;
    size_t *kept, nkept;          /* pods assumed by this cycle's placement checks */
    const struct gs_pod **buf;    /* one workload's pods for the placer */
    uint8_t *reserved;            /* by node slot */
    int32_t *freegpu, *tmp;       /* by node slot */
    size_t *order;                /* scratch: running pods by end */
    size_t *ord2;                 /* scratch: a workload's pods by GPUs */
    int32_t *nodes_out;           /* the placement check's node per pod */
    struct by_ptr *by_ptr;        /* trace pods sorted by address, for the pin filter */
    int64_t gang_waiting;         /* arrived gang pods not running */
    struct relp *rel;             /* scratch: pods the real shadow start releases */
    int32_t *sizes;               /* scratch: whole GPUs of a workload's pods, largest first */
    /* Domains of one required-topology key (F_DOMAINS): each node's domain, one node selector per domain. */
    char *dom_key;
    uint64_t dom_epoch;
    int32_t dom_nodes, ndom;
    int32_t *node_dom;            /* by node slot, -1: no value */
    struct gs_kv *dom_kv;         /* ndom entries: key dom_key (borrowed), value owned */
    struct gs_labels *dom_sel;    /* ndom selectors, each of one dom_kv */
    int64_t *dom_free;            /* free whole GPUs per domain */
    int32_t *dom_order;
    bool pin_beside;              /* reserve: backfills beside the reservation take the checked nodes */
    struct gs_gangq_stats st;
};

/*--- Modes ---*/

#define GATE_AGE_S 600 /* F_GATE: how long the first workload that does not fit waits before it is reserved for */

/* How a mode departs from its base cycle. */
enum {
    F_SHADOW_REAL = 1 << 0, /* shadow start by the placement check on the cluster with ended pods released */
    F_DOMAINS = 1 << 1,     /* checks of a gang with a required domain try each domain (tightest first);
                             * without, the check's Coscheduling knows no PodGroup and ignores the domain */
    F_PIN_ALL = 1 << 2,     /* every workload let in is pinned to the checked nodes, not only beside */
    F_GATE = 1 << 3,        /* Volcano's enqueue until a workload waited GATE_AGE_S: then it is the reserved head */
};

static const struct mode_def {
    const char *name;
    enum gs_gangq_mode base; /* the cycle it runs */
    unsigned flags;
    int64_t slack_s; /* backfill may delay the head past its first shadow start by this much */
} MODES[] = {
    [GS_GANGQ_SCHEDULER] = {"scheduler", GS_GANGQ_SCHEDULER, 0},
    [GS_GANGQ_FIFO] = {"fifo", GS_GANGQ_FIFO, F_DOMAINS},
    [GS_GANGQ_VOLCANO] = {"volcano", GS_GANGQ_VOLCANO, 0},
    [GS_GANGQ_RESERVE] = {"reserve", GS_GANGQ_RESERVE, 0},
    [GS_GANGQ_RESERVE_EXACT] = {"reserve-exact", GS_GANGQ_RESERVE, F_SHADOW_REAL | F_DOMAINS},
    [GS_GANGQ_RESERVE_PINNED] = {"reserve-pinned", GS_GANGQ_RESERVE, F_SHADOW_REAL | F_DOMAINS | F_PIN_ALL},
    [GS_GANGQ_VOLCANO_RESERVE] = {"volcano-reserve", GS_GANGQ_RESERVE, F_GATE | F_SHADOW_REAL | F_DOMAINS | F_PIN_ALL},
    [GS_GANGQ_BACKFILL] = {"backfill", GS_GANGQ_RESERVE, F_SHADOW_REAL | F_DOMAINS | F_PIN_ALL, GS_GANGQ_SLACK_S},
    [GS_GANGQ_AUTO] = {"auto", GS_GANGQ_SCHEDULER, 0, 0}, /* resolved before use: gs_gangq_resolve */
};
static_assert(sizeof MODES / sizeof MODES[0] == GS_GANGQ_NMODES, "a name for every gang queue mode");

int gs_gangq_mode_parse(const char *s)
{
    for (int i = 0; s && i < GS_GANGQ_NMODES; i++)
        if (!strcmp(s, MODES[i].name)) return i;
    return -1;
}

const char *gs_gangq_mode_name(enum gs_gangq_mode m)
{
    return (unsigned)m < GS_GANGQ_NMODES ? MODES[m].name : MODES[GS_GANGQ_SCHEDULER].name;
}

void gs_gangq_mode_list(char *buf, size_t len)
{
    size_t n = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < GS_GANGQ_NMODES && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? (i + 1 == GS_GANGQ_NMODES ? " or " : ", ") : "",
                              MODES[i].name);
}

enum gs_gangq_mode gs_gangq_resolve(enum gs_gangq_mode m, const struct gs_trace *t, bool admission)
{
    if (m != GS_GANGQ_AUTO) return m;
    for (size_t i = 0; !admission && i < t->npods; i++)
        if (t->pods[i].pod->pod_group && *t->pods[i].pod->pod_group) return GS_GANGQ_BACKFILL;
    return GS_GANGQ_SCHEDULER;
}

bool gs_gangq_mode_pins(enum gs_gangq_mode m)
{
    return (unsigned)m < GS_GANGQ_NMODES && MODES[m].base == GS_GANGQ_RESERVE;
}

static int32_t whole_gpus(const struct gs_pod *p)
{
    return p->demand.gpu_count; /* a shared GPU still takes one device of a node */
}

static int build_workloads(struct gs_gangq *q, const int64_t *duration_ns, struct gs_diags *d)
{
    const struct gs_trace *t = q->t;
    struct gs__strmap by_group, min_of;
    gs__strmap_init(&by_group);
    gs__strmap_init(&min_of);
    int rc = 0;
    char key[512];
    /* The maps borrow their keys: each is a copy kept until the end. */
    size_t nkeys = 0;
    char **keys = calloc(t->nobjects + t->npods + 1, sizeof *keys);
    if (!keys) rc = GS_ENOMEM;
#define KEEP_KEY() (keys[nkeys] = strdup(key), keys[nkeys] ? keys[nkeys++] : NULL)
    for (size_t i = 0; !rc && i < t->nobjects; i++) {
        if (t->objects[i]->kind != GS_KIND_PODGROUP) continue;
        const struct gs_podgroup *pg = t->objects[i]->u.podgroup;
        snprintf(key, sizeof key, "%s/%s", pg->meta.namespace_ ? pg->meta.namespace_ : "default",
                 pg->meta.name ? pg->meta.name : "");
        const char *k = KEEP_KEY();
        rc = k ? gs__strmap_put(&min_of, k, (void *)pg) : GS_ENOMEM;
    }
    size_t *count = calloc(t->npods ? t->npods : 1, sizeof *count);
    q->wls = calloc(t->npods ? t->npods : 1, sizeof *q->wls);
    if (!count || !q->wls) rc = GS_ENOMEM;
    /* Pass 1: workload of every pod. */
    for (size_t i = 0; !rc && i < t->npods; i++) {
        const struct gs_pod *p = t->pods[i].pod;
        size_t w;
        if (p->pod_group && *p->pod_group) {
            const char *g = strrchr(p->pod_group, '/');
            snprintf(key, sizeof key, "%s/%s", p->meta.namespace_ ? p->meta.namespace_ : "default",
                     g ? g + 1 : p->pod_group);
            void *v = gs__strmap_get(&by_group, key);
            if (v) w = (size_t)(uintptr_t)v - 1;
            else {
                w = q->nwls++;
                const struct gs_podgroup *pg = gs__strmap_get(&min_of, key);
                q->wls[w].min_member = pg ? (pg->min_member > 0 ? pg->min_member : 1) : 0; /* 0: all its pods */
                if (pg) {
                    const char *tk = gs_labels_get(&pg->meta.annotations, GS_ANN_GANG_REQUIRED_TOPOLOGY);
                    q->wls[w].topo_key = tk && *tk ? tk : pg->topology_key;
                }
                const char *k = KEEP_KEY();
                if (!k) rc = GS_ENOMEM;
                else rc = gs__strmap_put(&by_group, k, (void *)(uintptr_t)(w + 1));
                if (rc) break;
            }
        } else {
            w = q->nwls++;
            q->wls[w].min_member = 1;
        }
        q->pods[i].wl = w;
        count[w]++;
    }
    for (size_t w = 0; !rc && w < q->nwls; w++) {
        struct wl *x = &q->wls[w];
        if (!(x->pods = malloc(count[w] * sizeof *x->pods))) rc = GS_ENOMEM;
        if (!x->min_member || x->min_member > (int32_t)count[w]) x->min_member = (int32_t)count[w];
        x->started_ns = -1;
        x->first_arrival_ns = -1;
        x->deadline_ns = -1;
    }
    for (size_t i = 0; !rc && i < t->npods; i++) {
        struct wl *x = &q->wls[q->pods[i].wl];
        const struct gs_demand *dm = &t->pods[i].pod->demand;
        if (!x->n || t->pods[i].pod->priority > x->priority) x->priority = t->pods[i].pod->priority;
        x->pods[x->n++] = i;
        x->gpu_milli += (int64_t)dm->gpu_count * dm->gpu_milli;
        x->cpu_milli += dm->cpu_milli;
        x->mem_bytes += dm->mem_bytes;
        int64_t du = duration_ns ? duration_ns[i] : -1;
        q->pods[i].dur_ns = du;
        if (du < 0 || x->duration_ns < 0) x->duration_ns = -1;
        else if (du > x->duration_ns) x->duration_ns = du;
    }
    for (size_t w = 0; !rc && w < q->nwls; w++)
        if (q->wls[w].n > 1) q->st.gangs++;
    if (rc == GS_ENOMEM) gs_diags_add(d, "replay", "gang queue: out of memory");
    free(count);
    gs__strmap_free(&by_group);
    gs__strmap_free(&min_of);
    for (size_t k = 0; k < nkeys; k++) free(keys[k]);
    free(keys);
#undef KEEP_KEY
    return rc;
}

static void domains_clear(struct gs_gangq *q);

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct by_ptr *)a)->p, y = (uintptr_t)((const struct by_ptr *)b)->p;
    return x < y ? -1 : x > y;
}

int gs_gangq_new(enum gs_gangq_mode mode, const struct gs_trace *t, const int64_t *duration_ns,
                 struct gs_cache *cache, const struct gs_clock *clock, const struct gs_profile *profile,
                 gs_gangq_release_fn release, void *ctx, struct gs_gangq **out, struct gs_diags *d)
{
    *out = NULL;
    if ((unsigned)mode >= GS_GANGQ_NMODES || mode == GS_GANGQ_AUTO) {
        gs_diags_add(d, "gang_queue", "%d is not a gang queue mode (auto: gs_gangq_resolve first)", (int)mode);
        return GS_EINVAL;
    }
    struct gs_gangq *q = calloc(1, sizeof *q);
    if (!q) return GS_ENOMEM;
    q->mode = mode;
    q->base = MODES[mode].base;
    q->flags = MODES[mode].flags;
    q->slack_ns = MODES[mode].slack_s * GS_NS_PER_SEC;
    q->t = t;
    q->cache = cache;
    q->release = release;
    q->ctx = ctx;
    size_t n = t->npods ? t->npods : 1;
    size_t nn = (size_t)gs_cache_node_count(cache) + 1;
    q->pods = calloc(n, sizeof *q->pods);
    q->line = calloc(n, sizeof *q->line);
    q->touched = calloc(n, sizeof *q->touched);
    q->kept = calloc(n, sizeof *q->kept);
    q->buf = calloc(n, sizeof *q->buf);
    q->order = calloc(n, sizeof *q->order);
    q->ord2 = calloc(n, sizeof *q->ord2);
    q->nodes_out = calloc(n, sizeof *q->nodes_out);
    q->rel = calloc(n, sizeof *q->rel);
    q->sizes = calloc(n, sizeof *q->sizes);
    q->by_ptr = calloc(n, sizeof *q->by_ptr);
    q->reserved = calloc(nn, 1);
    q->freegpu = calloc(nn, sizeof *q->freegpu);
    q->tmp = calloc(nn, sizeof *q->tmp);
    int rc = 0;
    if (!q->pods || !q->line || !q->touched || !q->kept || !q->buf || !q->order || !q->ord2 || !q->reserved ||
        !q->freegpu || !q->tmp ||
        !q->nodes_out || !q->by_ptr || !q->rel || !q->sizes)
        rc = GS_ENOMEM;
    for (size_t i = 0; !rc && i < t->npods; i++) {
        q->pods[i].node = q->pods[i].pin = -1;
        q->by_ptr[i] = (struct by_ptr){t->pods[i].pod, i};
    }
    if (!rc) qsort(q->by_ptr, t->npods, sizeof *q->by_ptr, cmp_ptr);
    if (!rc) rc = build_workloads(q, duration_ns, d);
    if (!rc && q->base != GS_GANGQ_SCHEDULER) rc = gs_placer_new(cache, clock, profile, &q->placer, d);
    if (rc) {
        gs_gangq_free(q);
        return rc;
    }
    *out = q;
    return 0;
}

void gs_gangq_set_slack(struct gs_gangq *q, int64_t slack_s)
{
    if (slack_s >= 0) q->slack_ns = slack_s * GS_NS_PER_SEC;
}

void gs_gangq_free(struct gs_gangq *q)
{
    if (!q) return;
    for (size_t w = 0; q->wls && w < q->nwls; w++) free(q->wls[w].pods);
    free(q->wls);
    gs_placer_free(q->placer);
    free(q->pods), free(q->line), free(q->touched), free(q->kept), free(q->buf);
    free(q->order), free(q->ord2), free(q->reserved), free(q->freegpu), free(q->tmp);
    free(q->nodes_out), free(q->by_ptr), free(q->rel), free(q->sizes);
    domains_clear(q);
    free(q);
}

static void touch(struct gs_gangq *q, struct wl *w)
{
    if (w->touched) return;
    w->touched = true;
    q->touched[q->ntouched++] = (size_t)(w - q->wls);
}

bool gs_gangq_arrive(struct gs_gangq *q, size_t i, int64_t now)
{
    struct wl *w = &q->wls[q->pods[i].wl];
    if (w->first_arrival_ns < 0) w->first_arrival_ns = now;
    q->pods[i].arrived = true;
    w->arrived++;
    if (w->n > 1) q->gang_waiting++;
    if (q->base == GS_GANGQ_SCHEDULER || w->released) return false; /* a late member goes through */
    if (!w->queued && w->arrived >= (size_t)w->min_member) {
        /* Behind every workload of its priority or higher: priority, then completion. */
        w->queued = true;
        w->queued_ns = now;
        size_t k = q->nline;
        while (k > 0 && q->wls[q->line[k - 1]].priority < w->priority) {
            q->line[k] = q->line[k - 1];
            k--;
        }
        q->line[k] = (size_t)(w - q->wls);
        q->nline++;
    }
    return true;
}

void gs_gangq_bound(struct gs_gangq *q, size_t i, int32_t node, int32_t gpus, int64_t now)
{
    struct qpod *p = &q->pods[i];
    struct wl *w = &q->wls[p->wl];
    p->node = node;
    p->gpus = gpus;
    int64_t du = p->dur_ns;
    p->end_ns = du >= 0 ? now + du : -1;
    p->waiting_bind = false;
    p->pin = -1;
    if (!p->bound_once) {
        p->bound_once = true;
        if (++w->nbound_once == w->n) w->started_ns = now;
    }
    w->on_node++;
    if (w->n > 1) q->gang_waiting--;
    touch(q, w);
}

void gs_gangq_prebound(struct gs_gangq *q, size_t i, int32_t node, int32_t gpus, int64_t end_ns)
{
    struct qpod *p = &q->pods[i];
    struct wl *w = &q->wls[p->wl];
    p->arrived = p->released = p->bound_once = true;
    p->node = node;
    p->gpus = gpus;
    p->end_ns = end_ns;
    w->arrived++;
    w->released = w->queued = true; /* it runs: later members go straight through */
    w->on_node++;
    w->nbound_once++;
}

void gs_gangq_left(struct gs_gangq *q, size_t i, bool done)
{
    struct qpod *p = &q->pods[i];
    struct wl *w = &q->wls[p->wl];
    if (p->node < 0) return;
    p->node = -1;
    w->on_node--;
    if (done) w->ended = true;
    else if (w->n > 1) q->gang_waiting++;
    if (w->on_node == 0) w->ended = false;
    touch(q, w);
}

void gs_gangq_check(struct gs_gangq *q)
{
    for (size_t k = 0; k < q->ntouched; k++) {
        struct wl *w = &q->wls[q->touched[k]];
        w->touched = false;
        if (w->n > 1 && w->on_node > 0 && w->on_node < w->min_member && !w->ended) q->st.partial++;
    }
    q->ntouched = 0;
}

/*--- Domains of a required topology ---*/

static void domains_clear(struct gs_gangq *q)
{
    for (int32_t d = 0; d < q->ndom; d++) free(q->dom_kv[d].value);
    free(q->dom_key), free(q->node_dom), free(q->dom_kv), free(q->dom_sel), free(q->dom_free), free(q->dom_order);
    q->dom_key = NULL, q->node_dom = NULL, q->dom_kv = NULL, q->dom_sel = NULL, q->dom_free = NULL;
    q->dom_order = NULL;
    q->ndom = q->dom_nodes = 0;
}

/* The domains of key (a node label): each node's, in order of first node,
 * kept until key or the set of nodes changes. 0 or GS_ENOMEM. */
static int domains_of(struct gs_gangq *q, const char *key)
{
    int32_t nn = gs_cache_node_count(q->cache);
    uint64_t e = gs_cache_epoch(q->cache);
    if (q->dom_key && !strcmp(q->dom_key, key) && q->dom_epoch == e && q->dom_nodes == nn) return 0;
    domains_clear(q);
    size_t m = (size_t)(nn ? nn : 1);
    q->dom_key = strdup(key);
    q->node_dom = malloc(m * sizeof *q->node_dom);
    q->dom_kv = calloc(m, sizeof *q->dom_kv);
    q->dom_sel = calloc(m, sizeof *q->dom_sel);
    q->dom_free = calloc(m, sizeof *q->dom_free);
    q->dom_order = calloc(m, sizeof *q->dom_order);
    if (!q->dom_key || !q->node_dom || !q->dom_kv || !q->dom_sel || !q->dom_free || !q->dom_order) goto oom;
    for (int32_t j = 0; j < nn; j++) {
        const char *v = gs_topo_domain(gs_cache_node(q->cache, j), key);
        int32_t d = 0;
        while (v && d < q->ndom && strcmp(q->dom_kv[d].value, v)) d++;
        if (v && d == q->ndom) {
            if (!(q->dom_kv[d].value = strdup(v))) goto oom;
            q->dom_kv[d].key = q->dom_key;
            q->dom_sel[d] = (struct gs_labels){.v = &q->dom_kv[d], .n = 1};
            q->ndom++;
        }
        q->node_dom[j] = v ? d : -1;
    }
    q->dom_epoch = e;
    q->dom_nodes = nn;
    return 0;
oom:
    domains_clear(q);
    return GS_ENOMEM;
}

/*--- Admission checks ---*/

static bool in_cache(const struct gs_gangq *q, size_t i)
{
    char key[512];
    gs_meta_key(&q->t->pods[i].pod->meta, key, sizeof key);
    return gs_cache_pod_assignment(q->cache, key) != NULL;
}

/* The pods of w a check places: arrived, not running, and not let in (or,
 * with released, let in but not in the cache yet: a head still to bind).
 * Into q->buf; *need: the whole GPUs they take at least (pods sharing a GPU
 * count none). */
static size_t pending_pods(struct gs_gangq *q, const struct wl *w, bool released, int64_t *need)
{
    size_t n = 0;
    *need = 0;
    for (size_t k = 0; k < w->n; k++) {
        size_t i = w->pods[k];
        const struct qpod *p = &q->pods[i];
        if (!p->arrived || p->node >= 0 || (p->released && (!released || in_cache(q, i)))) continue;
        const struct gs_demand *dm = &q->t->pods[i].pod->demand;
        if (dm->gpu_milli >= GS_GPU_MILLI) *need += dm->gpu_count;
        q->buf[n++] = q->t->pods[i].pod;
    }
    return n;
}

/* Free whole GPUs on usable nodes, per domain into q->dom_free when dom. */
static int64_t free_whole(struct gs_gangq *q, const uint8_t *excluded, bool dom)
{
    int64_t sum = 0;
    if (dom) memset(q->dom_free, 0, (size_t)q->ndom * sizeof *q->dom_free);
    for (int32_t j = 0, nn = gs_cache_node_count(q->cache); j < nn; j++) {
        const struct gs_node_info *ni = gs_cache_node(q->cache, j);
        if (!ni->live || !ni->schedulable || (excluded && excluded[j])) continue;
        sum += ni->gpus_whole_free;
        if (dom && q->node_dom[j] >= 0) q->dom_free[q->node_dom[j]] += ni->gpus_whole_free;
    }
    return sum;
}

static int cmp_dom(const void *a, const void *b, void *ctx)
{
    const struct gs_gangq *q = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (q->dom_free[x] != q->dom_free[y]) return q->dom_free[x] < q->dom_free[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The placement check of q->buf[0..n) for w: 1 (nodes in q->nodes_out, the
 * pods assumed when keep), 0 or GS_E*. A gang with a required domain tries
 * each domain that has the GPUs, tightest first (F_DOMAINS); else the placer
 * puts its first pod anywhere and the rest beside it. */
static int check_pods(struct gs_gangq *q, const struct wl *w, size_t n, int64_t need, const uint8_t *excluded,
                      bool keep)
{
    if (!n) return 1;
    bool dom = (q->flags & F_DOMAINS) && w->topo_key;
    if (dom && domains_of(q, w->topo_key)) return GS_ENOMEM;
    if (free_whole(q, excluded, dom) < need) return 0; /* what every answer below needs */
    struct gs_place_req r = {.pods = q->buf, .npods = n, .excluded = excluded, .nodes_out = q->nodes_out,
                             .keep = keep};
    if (!dom) return gs_placer_try(q->placer, &r, NULL, 0);
    int32_t m = 0;
    for (int32_t d = 0; d < q->ndom; d++)
        if (q->dom_free[d] >= need) q->dom_order[m++] = d;
    qsort_r(q->dom_order, (size_t)m, sizeof *q->dom_order, cmp_dom, q);
    for (int32_t k = 0; k < m; k++) {
        r.labels = &q->dom_sel[q->dom_order[k]];
        int rc = gs_placer_try(q->placer, &r, NULL, 0);
        if (rc) return rc;
    }
    return 0;
}

/* Can every arrived pod of w be placed now (nodes with excluded[i] set left
 * out)? On yes the pods stay assumed until the cycle ends, and with pin
 * (or F_PIN_ALL) each is pinned to its node (the pin filter). 1, 0 or GS_E*. */
static int fits_now_pin(struct gs_gangq *q, struct wl *w, const uint8_t *excluded, bool pin)
{
    int64_t need;
    size_t n = pending_pods(q, w, false, &need);
    int rc = check_pods(q, w, n, need, excluded, true);
    pin = q->pin_beside && (pin || (q->flags & F_PIN_ALL));
    if (rc == 1)
        for (size_t k = 0, j = 0; k < w->n && j < n; k++) {
            size_t i = w->pods[k];
            if (q->t->pods[i].pod != q->buf[j]) continue;
            q->kept[q->nkept++] = i;
            if (pin) q->pods[i].pin = q->nodes_out[j];
            j++;
        }
    return rc;
}

static int fits_now(struct gs_gangq *q, struct wl *w, const uint8_t *excluded)
{
    return fits_now_pin(q, w, excluded, false);
}

static void forget_kept(struct gs_gangq *q)
{
    char key[512];
    for (size_t k = 0; k < q->nkept; k++) {
        gs_meta_key(&q->t->pods[q->kept[k]].pod->meta, key, sizeof key);
        gs_cache_forget(q->cache, key);
    }
    q->nkept = 0;
}

static void let_in(struct gs_gangq *q, struct wl *w, size_t *released)
{
    w->released = true;
    for (size_t k = 0; k < w->n; k++) {
        struct qpod *p = &q->pods[w->pods[k]];
        if (!p->arrived || p->released || p->node >= 0) continue;
        p->released = true;
        p->waiting_bind = true;
    }
    (*released)++;
}

static void hand_over(struct gs_gangq *q, const struct wl *w)
{
    for (size_t k = 0; k < w->n; k++) {
        size_t i = w->pods[k];
        if (q->pods[i].waiting_bind && q->pods[i].released) q->release(q->ctx, i);
    }
}

static int cmp_end(const void *a, const void *b, void *ctx)
{
    const struct gs_gangq *q = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int64_t ex = q->pods[x].end_ns, ey = q->pods[y].end_ns;
    if (ex != ey) return ex < ey ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int cmp_gpus_desc(const void *a, const void *b, void *ctx)
{
    const struct gs_gangq *q = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int32_t gx = whole_gpus(q->t->pods[x].pod), gy = whole_gpus(q->t->pods[y].pod);
    if (gx != gy) return gx > gy ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Best-fit decreasing of w's pods (by GPUs) on free; marks the nodes used in
 * q->reserved when mark. true when all fit. */
static bool pack(struct gs_gangq *q, const struct wl *w, const int32_t *free_, int32_t nn, bool mark)
{
    memcpy(q->tmp, free_, (size_t)nn * sizeof *q->tmp);
    size_t n = 0;
    for (size_t k = 0; k < w->n; k++) q->ord2[n++] = w->pods[k];
    qsort_r(q->ord2, n, sizeof *q->ord2, cmp_gpus_desc, q);
    if (mark) memset(q->reserved, 0, (size_t)nn);
    for (size_t k = 0; k < n; k++) {
        int32_t g = whole_gpus(q->t->pods[q->ord2[k]].pod), best = -1;
        if (g <= 0) continue;
        for (int32_t j = 0; j < nn; j++)
            if (q->tmp[j] >= g && (best < 0 || q->tmp[j] < q->tmp[best])) best = j;
        if (best < 0) return false;
        q->tmp[best] -= g;
        if (mark) q->reserved[best] = 1;
    }
    return true;
}

/* The head's shadow start: when, releasing running pods by their end, its
 * pods pack on whole free GPUs; q->reserved marks the nodes. INT64_MAX (and
 * nothing reserved) when it never packs. */
static int64_t shadow_start(struct gs_gangq *q, const struct wl *head, int64_t now)
{
    int32_t nn = gs_cache_node_count(q->cache);
    for (int32_t j = 0; j < nn; j++) {
        const struct gs_node_info *ni = gs_cache_node(q->cache, j);
        q->freegpu[j] = ni->live && ni->schedulable ? ni->gpus_whole_free : -1;
    }
    if (pack(q, head, q->freegpu, nn, true)) return now;
    size_t n = 0;
    for (size_t i = 0; i < q->t->npods; i++)
        if (q->pods[i].node >= 0 && q->pods[i].end_ns >= 0) q->order[n++] = i;
    qsort_r(q->order, n, sizeof *q->order, cmp_end, q);
    for (size_t k = 0; k < n; k++) {
        const struct qpod *p = &q->pods[q->order[k]];
        if (q->freegpu[p->node] >= 0) q->freegpu[p->node] += p->gpus;
        if (k + 1 < n && q->pods[q->order[k + 1]].end_ns == p->end_ns) continue;
        if (pack(q, head, q->freegpu, nn, true)) return p->end_ns;
    }
    memset(q->reserved, 0, (size_t)nn);
    return INT64_MAX;
}

/*--- The shadow start by the placement check (F_SHADOW_REAL) ---*/

static int cmp_rel(const void *a, const void *b)
{
    const struct relp *x = a, *y = b;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int cmp_i32_desc(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x > y ? -1 : x < y;
}

/* Best fit decreasing of sizes[0..n) (largest first) on free whole GPUs per
 * node, on the nodes of domain dom (-1: all). true when all fit. */
static bool pack_sizes(struct gs_gangq *q, const int32_t *sizes, size_t n, int32_t nn, int32_t dom)
{
    for (int32_t j = 0; j < nn; j++) q->tmp[j] = dom < 0 || q->node_dom[j] == dom ? q->freegpu[j] : -1;
    for (size_t k = 0; k < n; k++) {
        int32_t g = sizes[k], best = -1;
        for (int32_t j = 0; j < nn; j++)
            if (q->tmp[j] >= g && (best < 0 || q->tmp[j] < q->tmp[best])) best = j;
        if (best < 0) return false;
        q->tmp[best] -= g;
    }
    return true;
}

/* Could the head's pods go on q->freegpu by whole GPUs alone (in one of its
 * domains when it has a required one)? A quick test before the real check. */
static bool might_fit(struct gs_gangq *q, const struct wl *head, size_t n, int32_t nn)
{
    if (!(q->flags & F_DOMAINS) || !head->topo_key) return pack_sizes(q, q->sizes, n, nn, -1);
    for (int32_t d = 0; d < q->ndom; d++)
        if (pack_sizes(q, q->sizes, n, nn, d)) return true;
    return false;
}

/* Takes rel's pod out of the cache (its resources free), or puts it back. */
static int release_pod(struct gs_gangq *q, struct relp *r, bool back)
{
    char key[512];
    const struct gs_pod *pod = q->t->pods[r->i].pod;
    gs_meta_key(&pod->meta, key, sizeof key);
    if (back) return r->assumed ? gs_cache_assume(q->cache, pod, &r->a, 0) : gs_cache_add_bound(q->cache, pod, &r->a);
    const struct gs_assignment *a = gs_cache_pod_assignment(q->cache, key);
    if (!a) return GS_ESTATE;
    r->a = *a;
    return r->assumed ? gs_cache_forget(q->cache, key) : gs_cache_remove_pod(q->cache, key);
}

/* The head's shadow start with the profile's filters: running pods (and
 * those this cycle's checks assumed, from now on) are taken out of the
 * cache in order of their end until the placement check places the head's
 * pods; that end is the shadow start and q->reserved marks the nodes the
 * check chose. Every pod taken out is put back, so the cache ends as it
 * began. INT64_MAX (nothing reserved) when the head never fits; *err GS_E*. */
static int64_t shadow_real(struct gs_gangq *q, const struct wl *head, int64_t now, int *err)
{
    int32_t nn = gs_cache_node_count(q->cache);
    memset(q->reserved, 0, (size_t)nn);
    int64_t need;
    size_t np = pending_pods(q, head, true, &need);
    if (!np) return now;
    for (size_t k = 0; k < np; k++) {
        const struct gs_demand *dm = &q->buf[k]->demand;
        q->sizes[k] = dm->gpu_milli >= GS_GPU_MILLI ? dm->gpu_count : 0;
    }
    qsort(q->sizes, np, sizeof *q->sizes, cmp_i32_desc);
    if ((q->flags & F_DOMAINS) && head->topo_key && (*err = domains_of(q, head->topo_key))) return INT64_MAX;
    for (int32_t j = 0; j < nn; j++) {
        const struct gs_node_info *ni = gs_cache_node(q->cache, j);
        q->freegpu[j] = ni->live && ni->schedulable ? ni->gpus_whole_free : -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < q->t->npods; i++)
        if (q->pods[i].node >= 0 && q->pods[i].end_ns >= 0)
            q->rel[n++] = (struct relp){.i = i, .end = q->pods[i].end_ns};
    for (size_t k = 0; k < q->nkept; k++) {
        size_t i = q->kept[k];
        if (q->pods[i].dur_ns >= 0) q->rel[n++] = (struct relp){.i = i, .end = now + q->pods[i].dur_ns, .assumed = true};
    }
    qsort(q->rel, n, sizeof *q->rel, cmp_rel);
    int64_t start = INT64_MAX;
    size_t out = 0; /* rel[0..out) are out of the cache */
    /* now, then after each end */
    for (size_t k = 0; k <= n && start == INT64_MAX && !*err; k++) {
        if (k > 0) {
            struct relp *r = &q->rel[k - 1];
            const struct gs_assignment *a = NULL;
            char key[512];
            gs_meta_key(&q->t->pods[r->i].pod->meta, key, sizeof key);
            if ((a = gs_cache_pod_assignment(q->cache, key)) && q->freegpu[a->node] >= 0)
                q->freegpu[a->node] += __builtin_popcountll(a->gpu_mask);
            if (k < n && q->rel[k].end == r->end) continue;
        }
        if (!might_fit(q, head, np, nn)) continue;
        for (; out < k && !*err; out++) *err = release_pod(q, &q->rel[out], false);
        if (*err) break;
        pending_pods(q, head, true, &need); /* q->buf again: the quick test did not touch it */
        int rc = check_pods(q, head, np, need, NULL, true);
        if (rc < 0) *err = rc;
        if (rc != 1) continue;
        start = k ? q->rel[k - 1].end : now;
        char key[512];
        for (size_t j = 0; j < np; j++) {
            q->reserved[q->nodes_out[j]] = 1;
            gs_meta_key(&q->buf[j]->meta, key, sizeof key);
            gs_cache_forget(q->cache, key);
        }
    }
    while (out > 0) {
        int rc = release_pod(q, &q->rel[--out], true);
        if (rc && !*err) *err = rc;
    }
    return start;
}

static int cycle_fifo(struct gs_gangq *q, size_t *released)
{
    /* Strict: a workload let in earlier and not yet bound is still ahead. */
    for (size_t i = 0; i < q->t->npods; i++)
        if (q->pods[i].waiting_bind) return 0;
    size_t k = 0;
    for (; k < q->nline; k++) {
        struct wl *w = &q->wls[q->line[k]];
        int rc = fits_now(q, w, NULL);
        if (rc < 0) return rc;
        if (!rc) {
            w->held = true;
            break;
        }
        let_in(q, w, released);
    }
    return 0;
}

static int cycle_volcano(struct gs_gangq *q, size_t *released)
{
    int64_t gpu = 0, cpu = 0, mem = 0;
    int32_t nn = gs_cache_node_count(q->cache);
    for (int32_t j = 0; j < nn; j++) {
        const struct gs_node_info *ni = gs_cache_node(q->cache, j);
        if (!ni->live || !ni->schedulable) continue;
        gpu += ni->gpu_milli_free;
        cpu += ni->cpu_alloc - ni->cpu_used;
        mem += ni->mem_alloc - ni->mem_used;
    }
    for (size_t i = 0; i < q->t->npods; i++) { /* admitted, not yet running: reserved (Inqueue) */
        if (!q->pods[i].waiting_bind) continue;
        const struct gs_demand *dm = &q->t->pods[i].pod->demand;
        gpu -= (int64_t)dm->gpu_count * dm->gpu_milli;
        cpu -= dm->cpu_milli;
        mem -= dm->mem_bytes;
    }
    for (size_t k = 0; k < q->nline; k++) {
        struct wl *w = &q->wls[q->line[k]];
        if (w->gpu_milli <= gpu && w->cpu_milli <= cpu && w->mem_bytes <= mem) {
            gpu -= w->gpu_milli, cpu -= w->cpu_milli, mem -= w->mem_bytes;
            let_in(q, w, released);
        } else {
            w->held = true;
        }
    }
    return 0;
}

/* Volcano's enqueue budget: the idle totals less what admitted, unbound
 * workloads asked. */
static void volcano_budget(struct gs_gangq *q, int64_t *gpu, int64_t *cpu, int64_t *mem)
{
    *gpu = *cpu = *mem = 0;
    int32_t nn = gs_cache_node_count(q->cache);
    for (int32_t j = 0; j < nn; j++) {
        const struct gs_node_info *ni = gs_cache_node(q->cache, j);
        if (!ni->live || !ni->schedulable) continue;
        *gpu += ni->gpu_milli_free;
        *cpu += ni->cpu_alloc - ni->cpu_used;
        *mem += ni->mem_alloc - ni->mem_used;
    }
    for (size_t i = 0; i < q->t->npods; i++) {
        if (!q->pods[i].waiting_bind) continue;
        const struct gs_demand *dm = &q->t->pods[i].pod->demand;
        *gpu -= (int64_t)dm->gpu_count * dm->gpu_milli;
        *cpu -= dm->cpu_milli;
        *mem -= dm->mem_bytes;
    }
}

static int cycle_reserve(struct gs_gangq *q, int64_t now, size_t *released);

/* F_GATE: Volcano's enqueue (each workload whose summed request fits the
 * budget goes, unchecked) until the first workload in line that does not
 * fit has waited GATE_AGE_S; from it on, the reserve cycle's rules. */
static int cycle_gate(struct gs_gangq *q, int64_t now, size_t *released)
{
    int64_t gpu, cpu, mem;
    volcano_budget(q, &gpu, &cpu, &mem);
    for (size_t k = 0; k < q->nline; k++) {
        struct wl *w = &q->wls[q->line[k]];
        if (w->gpu_milli <= gpu && w->cpu_milli <= cpu && w->mem_bytes <= mem) {
            gpu -= w->gpu_milli, cpu -= w->cpu_milli, mem -= w->mem_bytes;
            let_in(q, w, released);
            continue;
        }
        w->held = true;
        if (now - w->queued_ns >= GATE_AGE_S * GS_NS_PER_SEC) return cycle_reserve(q, now, released);
    }
    return 0;
}

static int cycle_reserve(struct gs_gangq *q, int64_t now, size_t *released)
{
    /* The head: the oldest workload let in and not bound, else the line's first that does not fit now. */
    struct wl *head = NULL;
    for (size_t i = 0; i < q->t->npods && !head && !(q->flags & F_GATE); i++)
        if (q->pods[i].waiting_bind) head = &q->wls[q->pods[i].wl];
    size_t k = 0;
    for (; !head && k < q->nline; k++) {
        struct wl *w = &q->wls[q->line[k]];
        if (w->released) continue; /* let in by the gate this cycle */
        int rc = fits_now(q, w, NULL);
        if (rc < 0) return rc;
        if (rc) {
            let_in(q, w, released);
            continue;
        }
        w->held = true;
        head = w;
    }
    if (!head) return 0;
    int err = 0;
    int64_t start = (q->flags & F_SHADOW_REAL) ? shadow_real(q, head, now, &err) : shadow_start(q, head, now);
    if (err) return err;
    q->st.reservations++;
    if (start != INT64_MAX && head->deadline_ns < 0 && q->slack_ns > 0) head->deadline_ns = start + q->slack_ns;
    int64_t until = start != INT64_MAX && head->deadline_ns > start ? head->deadline_ns : start;
    for (; k < q->nline; k++) {
        struct wl *w = &q->wls[q->line[k]];
        if (w == head || w->released) continue;
        int rc = fits_now_pin(q, w, q->reserved, q->pin_beside);
        if (!rc && w->duration_ns >= 0 && start != INT64_MAX && now + w->duration_ns <= until)
            rc = fits_now(q, w, NULL);
        else if (!rc && start == INT64_MAX)
            rc = fits_now(q, w, NULL);
        if (rc < 0) return rc;
        if (rc) {
            let_in(q, w, released);
            q->st.backfilled++;
        } else {
            w->held = true;
        }
    }
    return 0;
}

int gs_gangq_cycle(struct gs_gangq *q, int64_t now)
{
    if (q->base == GS_GANGQ_SCHEDULER) return 0;
    for (size_t i = 0; q->pin_beside && i < q->t->npods; i++) q->pods[i].pin = -1; /* pins last one instant */
    if (!q->nline) return 0;
    size_t released = 0;
    int rc = q->base == GS_GANGQ_FIFO      ? cycle_fifo(q, &released)
             : q->base == GS_GANGQ_VOLCANO ? cycle_volcano(q, &released)
             : (q->flags & F_GATE)         ? cycle_gate(q, now, &released)
                                           : cycle_reserve(q, now, &released);
    forget_kept(q);
    if (rc < 0) return rc;
    /* Hand over in line order, then drop them from the line. */
    size_t m = 0;
    for (size_t k = 0; k < q->nline; k++) {
        struct wl *w = &q->wls[q->line[k]];
        if (w->released) {
            if (w->held) q->st.held++;
            hand_over(q, w);
        } else {
            q->line[m++] = q->line[k];
        }
    }
    q->nline = m;
    return (int)released;
}

/*--- Results ---*/

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_s(const int64_t *v, size_t n, double p)
{
    if (!n) return 0;
    size_t rank = (size_t)ceil(p / 100.0 * (double)n);
    return (double)v[rank ? rank - 1 : 0] / (double)GS_NS_PER_SEC;
}

void gs_gangq_stats(const struct gs_gangq *q, struct gs_gangq_stats *s)
{
    *s = q->st;
    int64_t *d = malloc((q->nwls ? q->nwls : 1) * sizeof *d);
    size_t n = 0;
    for (size_t w = 0; d && w < q->nwls; w++) {
        const struct wl *x = &q->wls[w];
        if (x->n > 1 && x->started_ns >= 0) d[n++] = x->started_ns - x->first_arrival_ns;
    }
    if (d) qsort(d, n, sizeof *d, cmp_i64);
    s->gangs_started = (int64_t)n;
    s->gang_delay_p50 = d ? pct_s(d, n, 50) : 0;
    s->gang_delay_p99 = d ? pct_s(d, n, 99) : 0;
    free(d);
}

int64_t gs_gangq_gang_pods_waiting(const struct gs_gangq *q) { return q->gang_waiting; }

/*--- The pin filter ---*/

json_t *gs_gangq_plugin_args(struct gs_gangq *q)
{
    q->pin_beside = true;
    return json_pack("{s:I}", "gangQueue", (json_int_t)(intptr_t)q); /* in-process wiring by address */
}

static int pin_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    (void)h;
    json_t *v = json_object_get(args, "gangQueue");
    if (!json_is_integer(v)) {
        gs_diags_add(d, "args.gangQueue", "GangQueuePin needs the gang queue from gs_gangq_plugin_args()");
        return GS_EINVAL;
    }
    *state = (void *)(intptr_t)json_integer_value(v);
    return 0;
}

static int32_t pin_of(const struct gs_gangq *q, const struct gs_pod *pod)
{
    struct by_ptr key = {.p = pod};
    const struct by_ptr *hit = bsearch(&key, q->by_ptr, q->t->npods, sizeof *q->by_ptr, cmp_ptr);
    return hit ? q->pods[hit->i].pin : -1;
}

static void pin_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                       struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)cs;
    int32_t pin = pin_of(state, pod);
    if (pin < 0) return;
    for (size_t i = 0; i < n; i++)
        if (nodes[i]->idx != pin) reject[i] = 1;
}

static bool pin_by_class(void *state, const struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)cs;
    return pin_of(state, pod) < 0;
}

static int pin_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)state, (void)pod, (void)code;
    return snprintf(buf, len, "not the node the gang queue let this backfill in on (beside a reservation)");
}

const struct gs_plugin gs_gangq_pin_plugin = {
    .name = "GangQueuePin",
    .init = pin_init,
    .filter = pin_filter,
    .reason = pin_reason,
    .by_class = pin_by_class,
};
