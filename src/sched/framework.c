/*
 * framework.c - runs one profile's plugins through the scheduling and binding
 * cycles; see framework.h for the contract.
 *
 * One runner per extension point decides what each status code means there
 * (nginx's phase handlers): Skip at PreFilter switches that plugin's Filter
 * off for the pod, Skip at PreScore its Score; a rejection at PreFilter fails
 * every node at once; any failure after Reserve unwinds every reserve plugin
 * in reverse order and forgets the cache assumption. The runner, not the
 * plugin, stamps the failing plugin's name on the status.
 *
 * The hot path is Filter and Score over every node. Candidates are node
 * numbers in cache order, which plugins' index forms use to read the cache's
 * dense hot records; node pointers are gathered only for a plugin without an
 * index form. The live, schedulable set is kept between cycles and rebuilt
 * only when the cache's epoch moves; a cycle reads it in place until some
 * Filter rejects a node, and only then compacts the survivors into its own
 * array (branch-free).
 * Each Filter's verdicts stay in the arena and are tallied per (plugin,
 * code) only when no node fits, so a pod that fits costs no diagnosis work.
 * Score runs only the plugins not skipped at PreScore; the weighted sum is
 * fused with the argmax, and with a single active plugin the argmax reads
 * its scores directly (weights are positive, so the order is the same).
 * All per-cycle arrays come from the arena, whose chunk size follows the
 * cluster size so one chunk serves a cycle.
 *
 * Pods that passed Reserve live in a record (keyed by pod) that owns the
 * cycle state until the binding cycle ends or the pod is rejected: a pod
 * waiting at Permit keeps its state while other pods are scheduled. Records
 * also sit in a list in creation order so gs_framework_tick() walks them
 * deterministically. A rejected record stays listed until tick reports it,
 * so callers learn about rejections made by plugins (gangs) as well as
 * timeouts; the pod is borrowed until then.
 */
#include "sched/framework.h"

#include "sched/strmap.h"
#include "sched/dra_plugin.h" /* pods with claims */
#include "sched/nodeclass.h" /* one candidate per class of equal nodes */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INST 31 /* skip masks in struct gs_cycle_state are int */

struct inst {
    const struct gs_plugin *pl;
    void *state;
};

struct slot {
    int inst;
    int64_t weight;
};

/* Rejection tally of one Filter slot. */
struct tally {
    bool touched;
    uint64_t seen[4]; /* bit c: count[c] was written this cycle (the rest is stale) */
    uint32_t count[256];
};

enum rec_state { REC_RESERVED, REC_WAITING, REC_READY, REC_REJECTED };

struct rec {
    char *key;
    const struct gs_pod *pod;
    struct gs_assignment a;
    struct gs_cycle_state cs;
    enum rec_state st;
    uint32_t pending; /* permit slots still waiting */
    int64_t deadline;
    struct gs_status status;
};

struct gs_framework {
    const struct gs_profile *prof;
    struct gs_handle h;
    struct inst inst[MAX_INST];
    int ninst;
    struct slot pts[GS_PT_COUNT][GS_MAX_PLUGINS_PER_POINT];
    int npts[GS_PT_COUNT];
    struct gs_arena arena;
    struct gs_cycle_state cs;
    struct tally tally[GS_MAX_PLUGINS_PER_POINT];
    /* This cycle's verdicts per Filter slot (NULL: it rejected nothing), tallied on failure. */
    const uint8_t *rej[GS_MAX_PLUGINS_PER_POINT];
    size_t rej_n[GS_MAX_PLUGINS_PER_POINT];
    const int32_t *rej_w[GS_MAX_PLUGINS_PER_POINT]; /* class sizes of those verdicts, NULL: one node each */
    enum gs_node_classes classes;    /* gs_framework_set_node_classes */
    bool no_text;                    /* gs_framework_set_diagnosis_text(false) */
    uint64_t class_cycles;           /* cycles whose node was chosen by class */
    struct gs__strmap recs;
    struct rec **list;
    size_t nlist, list_cap;
    /* Live, schedulable nodes in index order, rebuilt when the cache's epoch moves. */
    struct gs_node_info **cand;      /* pointers of cand_idx */
    int32_t *cand_idx;
    size_t ncand, cand_cap;
    struct gs_node_info **slot_ptr;  /* node pointer by slot (gathers) */
    int32_t cand_unsched;
    uint64_t cand_epoch;
    bool cand_valid;
    char last_reject[GS_STATUS_REASON_MAX]; /* reason of the rejection tick reported last */
    /* Tick has nothing to do while quiet (no pod allowed or rejected since its
     * last walk) and the clock is before next_due (no waiting pod's deadline
     * is earlier). */
    bool quiet;
    int64_t next_due;
    const int32_t *only;             /* gs_framework_schedule_on's nodes during its cycle, else NULL */
    size_t nonly;
    int32_t apart;                   /* gs_framework_class_apart's node for this cycle, -1 none */
};

static const char *const point_names[] = {
    [GS_PT_QUEUE_SORT] = "queueSort", [GS_PT_PRE_ENQUEUE] = "preEnqueue", [GS_PT_PRE_FILTER] = "preFilter",
    [GS_PT_FILTER] = "filter",        [GS_PT_POST_FILTER] = "postFilter", [GS_PT_PRE_SCORE] = "preScore",
    [GS_PT_SCORE] = "score",          [GS_PT_RESERVE] = "reserve",        [GS_PT_PERMIT] = "permit",
    [GS_PT_PRE_BIND] = "preBind",     [GS_PT_BIND] = "bind",              [GS_PT_POST_BIND] = "postBind",
};
_Static_assert(sizeof point_names / sizeof point_names[0] == GS_PT_COUNT, "point_names out of sync");

const char *gs_point_name(enum gs_point p)
{
    return (int)p >= 0 && p < GS_PT_COUNT ? point_names[p] : "unknown";
}

#define SLOT_PL(fw, pt, i) ((fw)->inst[(fw)->pts[pt][i].inst].pl)
#define SLOT_ST(fw, pt, i) ((fw)->inst[(fw)->pts[pt][i].inst].state)

static struct gs_status stamp(struct gs_status s, const struct gs_plugin *pl)
{
    s.plugin = pl->name;
    return s;
}

/*--- Construction ---*/

static const json_t *profile_args(const struct gs_profile *p, const char *name)
{
    for (int i = 0; i < p->nargs; i++)
        if (strcmp(p->args_names[i], name) == 0) return p->args[i];
    return NULL;
}

static int instance_of(struct gs_framework *fw, const struct gs_plugin *pl, struct gs_diags *d)
{
    for (int i = 0; i < fw->ninst; i++)
        if (fw->inst[i].pl == pl) return i;
    if (fw->ninst == MAX_INST) {
        if (d) gs_diags_add(d, "plugins", "more than %d distinct plugins in one profile", MAX_INST);
        return GS_ERANGE;
    }
    int i = fw->ninst++;
    fw->inst[i].pl = pl;
    if (!pl->init) return i;
    struct gs_diags local = {0};
    int err = pl->init(&fw->h, profile_args(fw->prof, pl->name), &fw->inst[i].state, &local);
    for (size_t k = 0; d && k < local.n; k++) {
        char path[256];
        snprintf(path, sizeof path, "pluginConfig[%s].%s", pl->name, local.v[k].path);
        gs_diags_add(d, path, "%s", local.v[k].msg);
    }
    gs_diags_free(&local);
    if (err) {
        fw->ninst--;
        if (d && !local.n) gs_diags_add(d, "pluginConfig", "plugin %s failed to start: %s", pl->name, gs_strerror(err));
        return err < 0 ? err : GS_EINVAL;
    }
    return i;
}

int gs_framework_new(const struct gs_profile *p, const struct gs_handle *h, struct gs_framework **out,
                     struct gs_diags *d)
{
    *out = NULL;
    struct gs_framework *fw = calloc(1, sizeof *fw);
    if (!fw) return GS_ENOMEM;
    fw->prof = p;
    fw->h = *h;
    fw->h.fw = fw;
    fw->apart = -1;
    gs_arena_init(&fw->arena, 0);
    gs_cycle_state_init(&fw->cs);
    gs__strmap_init(&fw->recs);
    for (int pt = 0; pt < GS_PT_COUNT; pt++) {
        for (int i = 0; i < p->npoints[pt] && i < GS_MAX_PLUGINS_PER_POINT; i++) {
            int k = instance_of(fw, p->points[pt][i].plugin, d);
            if (k < 0) {
                gs_framework_free(fw);
                return k;
            }
            fw->pts[pt][i] = (struct slot){k, p->points[pt][i].weight > 0 ? p->points[pt][i].weight : 1};
            fw->npts[pt] = i + 1;
        }
    }
    *out = fw;
    return 0;
}

static void rec_free(struct rec *r)
{
    gs_cycle_state_free(&r->cs);
    free(r->key);
    free(r);
}

void gs_framework_free(struct gs_framework *fw)
{
    if (!fw) return;
    for (size_t i = 0; i < fw->nlist; i++) rec_free(fw->list[i]);
    free(fw->list);
    gs__strmap_free(&fw->recs);
    for (int i = 0; i < fw->ninst; i++)
        if (fw->inst[i].pl->fini) fw->inst[i].pl->fini(fw->inst[i].state);
    gs_cycle_state_free(&fw->cs);
    gs_arena_free(&fw->arena);
    free(fw->cand);
    free(fw->cand_idx);
    free(fw->slot_ptr);
    free(fw);
}

struct gs_arena *gs_framework_arena(struct gs_framework *fw) { return &fw->arena; }

/*--- Queue-side points ---*/

bool gs_framework_less(struct gs_framework *fw, const struct gs_queued_pod *a, const struct gs_queued_pod *b)
{
    if (fw->npts[GS_PT_QUEUE_SORT])
        return SLOT_PL(fw, GS_PT_QUEUE_SORT, 0)->less(SLOT_ST(fw, GS_PT_QUEUE_SORT, 0), a, b);
    return a->seq < b->seq;
}

struct gs_status gs_framework_pre_enqueue(struct gs_framework *fw, const struct gs_pod *pod)
{
    for (int i = 0; i < fw->npts[GS_PT_PRE_ENQUEUE]; i++) {
        const struct gs_plugin *pl = SLOT_PL(fw, GS_PT_PRE_ENQUEUE, i);
        struct gs_status s = pl->pre_enqueue(SLOT_ST(fw, GS_PT_PRE_ENQUEUE, i), pod);
        if (!gs_status_ok(&s)) return stamp(s, pl);
    }
    return (struct gs_status){0};
}

/*--- Diagnosis ---*/

static int plugin_order(const struct gs_framework *fw, const struct gs_plugin *pl)
{
    if (!pl) return -1;
    for (int i = 0; i < fw->npts[GS_PT_FILTER]; i++)
        if (SLOT_PL(fw, GS_PT_FILTER, i) == pl) return i;
    return GS_MAX_PLUGINS_PER_POINT;
}

static bool entry_before(const struct gs_framework *fw, const struct gs_diag_entry *a, const struct gs_diag_entry *b)
{
    if (a->count != b->count) return a->count > b->count;
    int pa = plugin_order(fw, a->plugin), pb = plugin_order(fw, b->plugin);
    if (pa != pb) return pa < pb;
    return a->code < b->code;
}

static int diag_push(struct gs_diagnosis *d, const struct gs_plugin *pl, void *state, uint8_t code, uint32_t count)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        struct gs_diag_entry *nv = realloc(d->entries, cap * sizeof *nv);
        if (!nv) return GS_ENOMEM;
        d->entries = nv;
        d->cap = cap;
    }
    d->entries[d->n++] = (struct gs_diag_entry){pl, state, code, count};
    return 0;
}

/* Adds run verdicts of code c (weight already summed) to t. */
static inline void tally_add(struct tally *t, uint8_t c, uint32_t run)
{
    uint64_t bit = (uint64_t)1 << (c & 63);
    if (!(t->seen[c >> 6] & bit)) {
        t->seen[c >> 6] |= bit;
        t->count[c] = 0;
    }
    t->count[c] += run;
}

/* The OR of p[0..n), eight bytes a step. */
static uint8_t bytes_or(const uint8_t *p, size_t n)
{
    uint64_t acc = 0;
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        uint64_t x;
        memcpy(&x, p + j, 8);
        acc |= x;
    }
    acc |= acc >> 32;
    acc |= acc >> 16;
    acc |= acc >> 8;
    uint8_t r = (uint8_t)acc;
    for (; j < n; j++) r |= p[j];
    return r;
}

/* How many of p[0..n) equal c, eight bytes a step: a byte of x = word ^ c
 * is zero exactly when its high bit stays clear in (x & 7f) + 7f, x and 7f
 * ORed (no carry crosses a byte), and the flags are summed by a multiply. */
static uint32_t bytes_equal(const uint8_t *p, size_t n, uint8_t c)
{
    const uint64_t lo7 = 0x7f7f7f7f7f7f7f7full, ones = 0x0101010101010101ull, rep = ones * c;
    uint32_t k = 0;
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        uint64_t x;
        memcpy(&x, p + j, 8);
        x ^= rep;
        uint64_t zero = ~(((x & lo7) + lo7) | x | lo7); /* 0x80 in each byte that was c */
        k += (uint32_t)(((zero >> 7) * ones) >> 56);
    }
    for (; j < n; j++) k += p[j] == c;
    return k;
}

/* Codes up to this are counted one pass per code (see tally_rejects). */
#define TALLY_PASS_MAX 16

/* Fills the per-slot tallies from the verdicts the Filters left this cycle.
 * Incrementing count[code] per node chains every node through a store and a
 * load of the same counter (most nodes share a code), which made this loop
 * most of a failed cycle; with few codes, one branch-free pass per code
 * costs less. Class verdicts (weighted, few) are summed by runs. Only the
 * codes seen are cleared and later walked. */
static void tally_rejects(struct gs_framework *fw)
{
    for (int i = 0; i < fw->npts[GS_PT_FILTER]; i++) {
        struct tally *t = &fw->tally[i];
        t->touched = fw->rej[i] != NULL;
        if (!t->touched) continue;
        memset(t->seen, 0, sizeof t->seen);
        const uint8_t *rej = fw->rej[i];
        const int32_t *w = fw->rej_w[i];
        size_t n = fw->rej_n[i];
        if (!n) continue;
        if (w) {
            uint8_t cur = rej[0];
            uint32_t run = 0;
            for (size_t j = 0; j < n; j++) {
                if (rej[j] != cur) {
                    tally_add(t, cur, run);
                    cur = rej[j];
                    run = 0;
                }
                run += (uint32_t)w[j];
            }
            tally_add(t, cur, run);
            continue;
        }
        uint8_t top = bytes_or(rej, n); /* at least the highest code */
        if (top <= TALLY_PASS_MAX) {
            for (unsigned c = 1; c <= top; c++) {
                uint32_t k = bytes_equal(rej, n, (uint8_t)c);
                if (k) tally_add(t, (uint8_t)c, k);
            }
            continue;
        }
        memset(t->seen, 0xff, sizeof t->seen);
        memset(t->count, 0, sizeof t->count);
        for (size_t j = 0; j < n; j++) t->count[rej[j]]++;
    }
}

static int build_diagnosis(struct gs_framework *fw, struct gs_diagnosis *d, int32_t unschedulable)
{
    tally_rejects(fw);
    if (unschedulable && diag_push(d, NULL, NULL, 0, (uint32_t)unschedulable) != 0) return GS_ENOMEM;
    for (int i = 0; i < fw->npts[GS_PT_FILTER]; i++) {
        struct tally *t = &fw->tally[i];
        if (!t->touched) continue;
        for (int word = 0; word < 4; word++) /* codes in ascending order, as a walk over count[1..255] */
            for (uint64_t bits = t->seen[word] & (word ? ~0ull : ~1ull); bits; bits &= bits - 1) {
                int c = word * 64 + __builtin_ctzll(bits);
                if (t->count[c] &&
                    diag_push(d, SLOT_PL(fw, GS_PT_FILTER, i), SLOT_ST(fw, GS_PT_FILTER, i), (uint8_t)c, t->count[c]) != 0)
                    return GS_ENOMEM;
            }
    }
    /* A handful of entries: insertion sort, stable and without a global comparator context. */
    for (size_t i = 1; i < d->n; i++) {
        struct gs_diag_entry e = d->entries[i];
        size_t j = i;
        for (; j > 0 && entry_before(fw, &e, &d->entries[j - 1]); j--) d->entries[j] = d->entries[j - 1];
        d->entries[j] = e;
    }
    return 0;
}

int gs_diagnosis_format(const struct gs_diagnosis *d, const struct gs_pod *pod, char *buf, size_t len)
{
    size_t off = 0;
#define PUT(...)                                                                   \
    do {                                                                           \
        int w_ = snprintf(buf + (off < len ? off : len), off < len ? len - off : 0, __VA_ARGS__); \
        if (w_ > 0) off += (size_t)w_;                                             \
    } while (0)
    PUT("0/%d nodes are available", d->nodes_total);
    if (d->prefilter.code != GS_SUCCESS) {
        PUT(": %s", d->prefilter.reason);
    } else {
        for (size_t i = 0; i < d->n; i++) {
            const struct gs_diag_entry *e = &d->entries[i];
            char reason[GS_STATUS_REASON_MAX + 64];
            if (!e->plugin)
                snprintf(reason, sizeof reason, "node(s) were unschedulable");
            else if (!e->plugin->reason || e->plugin->reason(e->state, pod, e->code, reason, sizeof reason) < 0)
                snprintf(reason, sizeof reason, "%s rejected the node (code %u)", e->plugin->name, GS_REJECT_CODE(e->code));
            PUT("%s %u %s", i ? "," : ":", e->count, reason);
        }
    }
    PUT(".");
#undef PUT
    return (int)off;
}

void gs_diagnosis_free(struct gs_diagnosis *d)
{
    free(d->entries);
    d->entries = NULL;
    d->n = d->cap = 0;
}

void gs_schedule_result_free(struct gs_schedule_result *r) { gs_diagnosis_free(&r->diag); }

/*--- Scheduling cycle ---*/

static void unreserve_all(struct gs_framework *fw, struct gs_cycle_state *cs, const struct gs_pod *pod,
                          struct gs_node_info *node)
{
    for (int i = fw->npts[GS_PT_RESERVE] - 1; i >= 0; i--) {
        const struct gs_plugin *pl = SLOT_PL(fw, GS_PT_RESERVE, i);
        if (pl->unreserve) pl->unreserve(SLOT_ST(fw, GS_PT_RESERVE, i), cs, pod, node);
    }
}

/* Does the profile allocate claims (DynamicResources at PreFilter and Reserve)? */
static bool runs_dra(const struct gs_framework *fw)
{
    bool pf = false, rs = false;
    for (int i = 0; i < fw->npts[GS_PT_PRE_FILTER]; i++)
        pf |= !strcmp(SLOT_PL(fw, GS_PT_PRE_FILTER, i)->name, GS_DRA_PLUGIN_NAME);
    for (int i = 0; i < fw->npts[GS_PT_RESERVE]; i++)
        rs |= !strcmp(SLOT_PL(fw, GS_PT_RESERVE, i)->name, GS_DRA_PLUGIN_NAME);
    return pf && rs;
}

static int run_pre_filter(struct gs_framework *fw, const struct gs_pod *pod, struct gs_schedule_result *res)
{
    if (gs_pod_has_claims(pod) && !runs_dra(fw)) { /* never bound without its devices */
        res->status = gs_status_make(GS_UNSCHEDULABLE_AND_UNRESOLVABLE,
                                     "pod has spec.resourceClaims but the profile does not run the %s plugin",
                                     GS_DRA_PLUGIN_NAME);
        res->code = res->status.code;
        return -1;
    }
    for (int i = 0; i < fw->npts[GS_PT_PRE_FILTER]; i++) {
        const struct gs_plugin *pl = SLOT_PL(fw, GS_PT_PRE_FILTER, i);
        if (!pl->pre_filter) continue;
        struct gs_status s = pl->pre_filter(SLOT_ST(fw, GS_PT_PRE_FILTER, i), &fw->cs, pod);
        if (s.code == GS_SUCCESS) continue;
        if (s.code == GS_SKIP) {
            fw->cs.skip_filter_mask |= 1 << fw->pts[GS_PT_PRE_FILTER][i].inst;
            continue;
        }
        res->status = stamp(s, pl);
        res->code = gs_status_rejects(&s) ? s.code : GS_ERROR;
        return -1;
    }
    return 0;
}

static int refresh_candidates(struct gs_framework *fw)
{
    struct gs_cache *c = fw->h.cache;
    if (fw->cand_valid && fw->cand_epoch == gs_cache_epoch(c)) return 0;
    size_t slots = (size_t)gs_cache_node_count(c);
    if (slots > fw->cand_cap) {
        struct gs_node_info **nv = realloc(fw->cand, slots * sizeof *nv);
        if (nv) fw->cand = nv;
        int32_t *iv = realloc(fw->cand_idx, slots * sizeof *iv);
        if (iv) fw->cand_idx = iv;
        struct gs_node_info **pv = realloc(fw->slot_ptr, slots * sizeof *pv);
        if (pv) fw->slot_ptr = pv;
        if (!nv || !iv || !pv) return GS_ENOMEM;
        fw->cand_cap = slots;
    }
    fw->ncand = 0;
    fw->cand_unsched = 0;
    for (size_t i = 0; i < slots; i++) {
        struct gs_node_info *ni = gs_cache_node(c, (int32_t)i);
        fw->slot_ptr[i] = ni;
        if (!ni->live) continue;
        if (!ni->schedulable) {
            fw->cand_unsched++;
            continue;
        }
        fw->cand_idx[fw->ncand] = (int32_t)i;
        fw->cand[fw->ncand++] = ni;
    }
    fw->cand_epoch = gs_cache_epoch(c);
    fw->cand_valid = true;
    return 0;
}

/* True when some reject[i] is set; reads eight verdicts at a time. */
static bool any_reject(const uint8_t *reject, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, reject + i, sizeof w);
        if (w) return true;
    }
    for (; i < n; i++)
        if (reject[i]) return true;
    return false;
}

/* The candidates of one cycle, in cache order: node numbers, and their
 * pointers when already gathered (else NULL). */
struct cands {
    const int32_t *idx;
    struct gs_node_info *const *nodes;
    size_t n;
};

/* Keeps the nodes with reject[j] == 0, in order; out may alias the input. */
static size_t compact(const int32_t *idx, size_t n, const uint8_t *reject, int32_t *out)
{
    size_t m = 0;
    for (size_t j = 0; j < n; j++) {
        out[m] = idx[j];
        m += !reject[j];
    }
    return m;
}

/* The candidates' pointers, for a plugin without an index form; NULL when out of memory. */
static struct gs_node_info *const *cand_nodes(struct gs_framework *fw, struct cands *c)
{
    if (c->nodes) return c->nodes;
    struct gs_node_info **v = gs_arena_alloc(&fw->arena, c->n * sizeof *v + 1);
    if (!v) return NULL;
    for (size_t i = 0; i < c->n; i++) v[i] = fw->slot_ptr[c->idx[i]];
    c->nodes = v;
    return v;
}

/* The i-th Filter plugin over c: 1 with *reject set (one verdict per
 * candidate, in the arena) when it rejects any, 0 when it is skipped or keeps
 * every one, GS_ENOMEM. Shared by the per-node and the per-class passes. */
static int filter_one(struct gs_framework *fw, const struct gs_pod *pod, struct cands *c, int i, uint8_t **reject)
{
    int k = fw->pts[GS_PT_FILTER][i].inst;
    const struct gs_plugin *pl = fw->inst[k].pl;
    if (!pl->filter || (fw->cs.skip_filter_mask & (1 << k))) return 0;
    uint8_t *rej = gs_arena_alloc(&fw->arena, c->n + 8);
    if (!rej) return GS_ENOMEM;
    memset(rej, 0, c->n);
    if (pl->filter_idx) {
        pl->filter_idx(fw->inst[k].state, &fw->cs, pod, c->idx, c->n, rej);
    } else {
        struct gs_node_info *const *nodes = cand_nodes(fw, c);
        if (!nodes) return GS_ENOMEM;
        pl->filter(fw->inst[k].state, &fw->cs, pod, nodes, c->n, rej);
    }
    if (!any_reject(rej, c->n)) return 0;
    *reject = rej;
    return 1;
}

/* Runs the Filter plugins over c, narrowing it to the survivors. 0 or GS_ENOMEM. */
static int run_filter(struct gs_framework *fw, const struct gs_pod *pod, struct cands *c)
{
    int32_t *own_idx = NULL;
    for (int i = 0; i < fw->npts[GS_PT_FILTER] && c->n; i++) {
        uint8_t *reject = NULL;
        int rc = filter_one(fw, pod, c, i, &reject);
        if (rc < 0) return rc;
        if (!rc) continue;
        fw->rej[i] = reject;
        fw->rej_n[i] = c->n;
        if (!own_idx && !(own_idx = gs_arena_alloc(&fw->arena, c->n * sizeof *own_idx + 1))) return GS_ENOMEM;
        c->n = compact(c->idx, c->n, reject, own_idx);
        c->idx = own_idx;
        c->nodes = NULL;
    }
    return 0;
}

static void run_post_filter(struct gs_framework *fw, const struct gs_pod *pod, struct gs_schedule_result *res)
{
    for (int i = 0; i < fw->npts[GS_PT_POST_FILTER]; i++) {
        const struct gs_plugin *pl = SLOT_PL(fw, GS_PT_POST_FILTER, i);
        if (!pl->post_filter) continue;
        struct gs_post_filter_result pfr = {-1};
        struct gs_status s = pl->post_filter(SLOT_ST(fw, GS_PT_POST_FILTER, i), &fw->cs, pod, &res->diag, &pfr);
        if (s.code == GS_SUCCESS) {
            res->nominated_node = pfr.nominated_node;
            return;
        }
        if (!gs_status_rejects(&s) && s.code != GS_SKIP) return;
    }
}

/* Fills res for "no node fits"; the status carries the diagnosis line. */
static int no_fit(struct gs_framework *fw, const struct gs_pod *pod, struct gs_schedule_result *res, int32_t unsched)
{
    res->diag.nodes_total = gs_cache_live_nodes(fw->h.cache);
    if (res->diag.prefilter.code == GS_SUCCESS && build_diagnosis(fw, &res->diag, unsched) != 0) return GS_ENOMEM;
    if (res->code == GS_SUCCESS) res->code = GS_UNSCHEDULABLE;
    struct gs_status s = {.code = res->code};
    if (!fw->no_text) gs_diagnosis_format(&res->diag, pod, s.reason, sizeof s.reason);
    s.plugin = res->diag.prefilter.code != GS_SUCCESS ? res->diag.prefilter.plugin
               : res->diag.n && res->diag.entries[0].plugin ? res->diag.entries[0].plugin->name
                                                            : NULL;
    res->status = s;
    run_post_filter(fw, pod, res);
    return 0;
}

/* First index of the highest value. The running maximum stays in a register:
 * reloading v[best] would chain a load per node. */
static size_t argmax(const int64_t *v, size_t n)
{
    size_t best = 0;
    int64_t top = v[0];
    for (size_t j = 1; j < n; j++) {
        if (v[j] > top) {
            top = v[j];
            best = j;
        }
    }
    return best;
}

/* argmax(total + w * last), without storing the sum. */
static size_t argmax_sum(const int64_t *total, const int64_t *last, int64_t w, size_t n)
{
    size_t best = 0;
    int64_t top = total[0] + w * last[0];
    for (size_t j = 1; j < n; j++) {
        int64_t t = total[j] + w * last[j];
        if (t > top) {
            top = t;
            best = j;
        }
    }
    return best;
}

/* One Score slot's scores (normalised) into scores[]. 0 or GS_ENOMEM. */
static int score_slot(struct gs_framework *fw, int i, const struct gs_pod *pod, struct cands *c, int64_t *scores)
{
    int k = fw->pts[GS_PT_SCORE][i].inst;
    const struct gs_plugin *pl = fw->inst[k].pl;
    struct gs_node_info *const *nodes = NULL;
    if ((!pl->score_idx || pl->normalize_score) && !(nodes = cand_nodes(fw, c))) return GS_ENOMEM;
    if (pl->score_idx) {
        pl->score_idx(fw->inst[k].state, &fw->cs, pod, c->idx, c->n, scores);
    } else {
        memset(scores, 0, c->n * sizeof *scores);
        pl->score(fw->inst[k].state, &fw->cs, pod, nodes, c->n, scores);
    }
    if (pl->normalize_score) pl->normalize_score(fw->inst[k].state, &fw->cs, pod, nodes, scores, c->n);
    return 0;
}

/* PreScore over c: 0, -1 on an error (res filled), -2 when out of memory. */
static int run_pre_score(struct gs_framework *fw, const struct gs_pod *pod, struct cands *c,
                         struct gs_schedule_result *res)
{
    for (int i = 0; i < fw->npts[GS_PT_PRE_SCORE]; i++) {
        int k = fw->pts[GS_PT_PRE_SCORE][i].inst;
        const struct gs_plugin *pl = fw->inst[k].pl;
        if (!pl->pre_score) continue;
        struct gs_status s;
        if (pl->pre_score_idx) {
            s = pl->pre_score_idx(fw->inst[k].state, &fw->cs, pod, c->idx, c->n);
        } else {
            struct gs_node_info *const *nodes = cand_nodes(fw, c);
            if (!nodes) return -2;
            s = pl->pre_score(fw->inst[k].state, &fw->cs, pod, nodes, c->n);
        }
        if (s.code == GS_SKIP) fw->cs.skip_score_mask |= 1 << k;
        else if (s.code != GS_SUCCESS) {
            res->status = stamp(s, pl);
            res->code = GS_ERROR;
            return -1;
        }
    }
    return 0;
}

/* Active Score slots (not skipped at PreScore) into active[]; their count. */
static int active_scores(const struct gs_framework *fw, int *active)
{
    int na = 0;
    for (int i = 0; i < fw->npts[GS_PT_SCORE]; i++) {
        int k = fw->pts[GS_PT_SCORE][i].inst;
        if (fw->inst[k].pl->score && !(fw->cs.skip_score_mask & (1 << k))) active[na++] = i;
    }
    return na;
}

/* PreScore + Score + NormalizeScore; returns the index into the candidates of
 * the winner, -1 on a PreScore error (res filled), -2 when out of memory. */
static int run_score(struct gs_framework *fw, const struct gs_pod *pod, struct cands *c, struct gs_schedule_result *res)
{
    int pre = run_pre_score(fw, pod, c, res);
    if (pre) return pre;
    size_t n = c->n;
    if (n == 1) return 0; /* nothing to compare: kube skips scoring as well */
    int active[GS_MAX_PLUGINS_PER_POINT], na = active_scores(fw, active);
    if (!na) return 0; /* every total is 0: the first node wins */
    int64_t *scores = gs_arena_alloc(&fw->arena, n * sizeof *scores);
    int64_t *total = na > 1 ? gs_arena_alloc(&fw->arena, n * sizeof *total) : NULL;
    if (!scores || (na > 1 && !total)) return -2;
    for (int a = 0; a < na - 1; a++) {
        if (score_slot(fw, active[a], pod, c, scores) != 0) return -2;
        int64_t w = fw->pts[GS_PT_SCORE][active[a]].weight;
        if (a == 0)
            for (size_t j = 0; j < n; j++) total[j] = w * scores[j];
        else
            for (size_t j = 0; j < n; j++) total[j] += w * scores[j];
    }
    if (score_slot(fw, active[na - 1], pod, c, scores) != 0) return -2;
    if (na == 1) return (int)argmax(scores, n);
    return (int)argmax_sum(total, scores, fw->pts[GS_PT_SCORE][active[na - 1]].weight, n);
}

/* Devices for a GPU pod when no reserve plugin chose them: lowest indices that fit. */
static uint64_t first_fit(const struct gs_node_info *n, const struct gs_assignment *a, int32_t count)
{
    uint64_t mask = 0;
    for (int32_t g = 0; g < n->ngpus && count > 0; g++) {
        const struct gs_gpu_slot *s = &n->gpus[g];
        if (s->healthy && s->milli_free >= a->milli && (a->mem_mib <= 0 || s->mem_free_mib >= a->mem_mib)) {
            mask |= 1ULL << g;
            count--;
        }
    }
    return count ? 0 : mask;
}

static int add_rec(struct gs_framework *fw, struct rec *r)
{
    if (fw->nlist == fw->list_cap) {
        size_t cap = fw->list_cap ? fw->list_cap * 2 : 16;
        struct rec **nv = realloc(fw->list, cap * sizeof *nv);
        if (!nv) return GS_ENOMEM;
        fw->list = nv;
        fw->list_cap = cap;
    }
    if (gs__strmap_put(&fw->recs, r->key, r) != 0) return GS_ENOMEM;
    fw->list[fw->nlist++] = r;
    return 0;
}

static void drop_rec(struct gs_framework *fw, struct rec *r)
{
    gs__strmap_del(&fw->recs, r->key);
    for (size_t i = 0; i < fw->nlist; i++)
        if (fw->list[i] == r) {
            memmove(&fw->list[i], &fw->list[i + 1], (fw->nlist - i - 1) * sizeof *fw->list);
            fw->nlist--;
            break;
        }
    rec_free(r);
}

/* Reserve plugins, then the cache assumption. 0, or -1 with res filled (already unwound). */
static int run_reserve(struct gs_framework *fw, const struct gs_pod *pod, struct gs_node_info *node,
                       int64_t ttl, struct gs_schedule_result *res)
{
    struct gs_assignment *a = &res->a;
    for (int i = 0; i < fw->npts[GS_PT_RESERVE]; i++) {
        const struct gs_plugin *pl = SLOT_PL(fw, GS_PT_RESERVE, i);
        if (!pl->reserve) continue;
        struct gs_status s = pl->reserve(SLOT_ST(fw, GS_PT_RESERVE, i), &fw->cs, pod, node, a);
        if (s.code != GS_SUCCESS) {
            unreserve_all(fw, &fw->cs, pod, node);
            res->status = stamp(s, pl);
            res->code = gs_status_rejects(&s) ? s.code : GS_ERROR;
            return -1;
        }
    }
    const char *why = NULL;
    if (pod->demand.gpu_count == 0 && !(a->gpu_mask && gs_pod_has_claims(pod))) { /* a claim's GPUs: DynamicResources */
        a->gpu_mask = 0;
        a->milli = 0;
        a->mem_mib = 0;
    } else if (!a->gpu_mask && !(a->gpu_mask = first_fit(node, a, pod->demand.gpu_count))) {
        why = "no GPU combination fits on the chosen node";
    }
    int64_t deadline = ttl > 0 ? gs_clock_now(fw->h.clock) + ttl : 0;
    if (!why && gs_cache_assume(fw->h.cache, pod, a, deadline) != 0) why = "the cache refused the assumption";
    if (why) {
        unreserve_all(fw, &fw->cs, pod, node);
        res->status = gs_status_make(GS_ERROR, "%s", why);
        res->code = GS_ERROR;
        return -1;
    }
    return 0;
}

/* Permit plugins. Returns 0 with the waiting slots and deadline set, or -1 (unwound, res filled). */
static int run_permit(struct gs_framework *fw, const struct gs_pod *pod, struct gs_node_info *node, const char *key,
                      uint32_t *pending, int64_t *deadline, struct gs_schedule_result *res)
{
    int64_t now = gs_clock_now(fw->h.clock);
    for (int i = 0; i < fw->npts[GS_PT_PERMIT]; i++) {
        const struct gs_plugin *pl = SLOT_PL(fw, GS_PT_PERMIT, i);
        if (!pl->permit) continue;
        int64_t timeout = 0;
        struct gs_status s = pl->permit(SLOT_ST(fw, GS_PT_PERMIT, i), &fw->cs, pod, node, &timeout);
        if (s.code == GS_SUCCESS) continue;
        if (s.code == GS_WAIT) {
            *pending |= 1u << i;
            if (now + timeout < *deadline) *deadline = now + timeout;
            continue;
        }
        unreserve_all(fw, &fw->cs, pod, node);
        gs_cache_forget(fw->h.cache, key);
        res->status = stamp(s, pl);
        res->code = gs_status_rejects(&s) ? s.code : GS_ERROR;
        return -1;
    }
    return 0;
}

/*--- One candidate per node class ---*/

static bool slot_by_class(struct gs_framework *fw, enum gs_point pt, int i, const struct gs_pod *pod)
{
    const struct inst *in = &fw->inst[fw->pts[pt][i].inst];
    return in->pl->by_class && in->pl->by_class(in->state, &fw->cs, pod);
}

/* May this cycle run on one node per class? Every Filter plugin PreFilter
 * left on, and every PreScore and Score plugin, must say so for the pod. */
static bool classes_apply(struct gs_framework *fw, const struct gs_pod *pod)
{
    if (fw->classes == GS_CLASSES_OFF || fw->only) return false;
    for (int i = 0; i < fw->npts[GS_PT_FILTER]; i++) {
        int k = fw->pts[GS_PT_FILTER][i].inst;
        if (!fw->inst[k].pl->filter || (fw->cs.skip_filter_mask & (1 << k))) continue;
        if (!slot_by_class(fw, GS_PT_FILTER, i, pod)) return false;
    }
    for (int i = 0; i < fw->npts[GS_PT_PRE_SCORE]; i++)
        if (SLOT_PL(fw, GS_PT_PRE_SCORE, i)->pre_score && !slot_by_class(fw, GS_PT_PRE_SCORE, i, pod)) return false;
    for (int i = 0; i < fw->npts[GS_PT_SCORE]; i++)
        if (SLOT_PL(fw, GS_PT_SCORE, i)->score && !slot_by_class(fw, GS_PT_SCORE, i, pod)) return false;
    return true;
}

/* run_filter over class representatives: c and the class sizes *w narrow
 * together, and each Filter's verdicts keep the sizes they were made on, so
 * a diagnosis counts nodes, not classes. 0 or GS_ENOMEM. */
static int class_filter(struct gs_framework *fw, const struct gs_pod *pod, struct cands *c, const int32_t **w)
{
    for (int i = 0; i < fw->npts[GS_PT_FILTER] && c->n; i++) {
        uint8_t *reject = NULL;
        int rc = filter_one(fw, pod, c, i, &reject);
        if (rc < 0) return rc;
        if (!rc) continue;
        fw->rej[i] = reject;
        fw->rej_n[i] = c->n;
        fw->rej_w[i] = *w;
        int32_t *idx = gs_arena_alloc(&fw->arena, c->n * sizeof *idx + 1);
        int32_t *nw = gs_arena_alloc(&fw->arena, c->n * sizeof *nw + 1);
        if (!idx || !nw) return GS_ENOMEM;
        size_t m = 0;
        for (size_t j = 0; j < c->n; j++) {
            idx[m] = c->idx[j];
            nw[m] = (*w)[j];
            m += !reject[j];
        }
        c->idx = idx;
        c->n = m;
        c->nodes = NULL;
        *w = nw;
    }
    return 0;
}

/* Lowest node index among the candidates whose total is the highest: what
 * the full scan's first-highest pick in index order gives. */
static int32_t class_winner(const struct cands *c, const int64_t *total)
{
    int64_t top = total[0];
    int32_t won = c->idx[0];
    for (size_t j = 1; j < c->n; j++)
        if (total[j] > top || (total[j] == top && c->idx[j] < won)) top = total[j], won = c->idx[j];
    return won;
}

/* Chooses the node with one candidate per class: 1 with *won set, 0 when the
 * cycle ended (res filled: nothing fits, or PreScore failed), -1 when this
 * pod runs per node, GS_ENOMEM. */
static int class_pick(struct gs_framework *fw, const struct gs_pod *pod, struct gs_schedule_result *res, int32_t *won)
{
    if (!classes_apply(fw, pod)) return -1;
    struct gs_nodeclasses *x = gs_cache_classes(fw->h.cache);
    if (!x) return -1; /* out of memory keying the classes: the full scan still works */
    size_t nc = gs_nodeclass_count(x);
    /* Nearly a class per node: the full scan's sequential passes cost less
     * than a pass over scattered representatives. Either way, the same node. */
    if (fw->classes == GS_CLASSES_AUTO && nc * 4 > fw->ncand * 3) return -1;
    size_t want = nc * (3 * sizeof(int32_t) + sizeof(void *) + 2 * sizeof(int64_t) + GS_MAX_PLUGINS_PER_POINT) + 8192;
    if (fw->arena.chunk_size < want) fw->arena.chunk_size = want;
    /* One slot more than the classes: the node set apart (gs_framework_class_apart). */
    int32_t *idx = gs_arena_alloc(&fw->arena, (nc + 1) * sizeof *idx), *size = gs_arena_alloc(&fw->arena, (nc + 1) * sizeof *size);
    if (!idx || !size) return GS_ENOMEM;
    int32_t apart = fw->apart, apart_cls = apart >= 0 ? gs_nodeclass_of(x, apart) : -1;
    size_t m = 0;
    int32_t unsched = 0;
    for (size_t i = 0; i < nc; i++) {
        struct gs_nodeclass k = gs_nodeclass_get(x, i);
        if (!k.schedulable) {
            unsched += k.n;
            continue;
        }
        if ((int32_t)i == apart_cls) { /* the class less that node, then the node alone */
            if (k.n > 1) {
                idx[m] = k.min == apart ? gs_nodeclass_runner_up(x, i) : k.min;
                size[m++] = k.n - 1;
            }
            idx[m] = apart;
            size[m++] = 1;
            continue;
        }
        idx[m] = k.min;
        size[m++] = k.n;
    }
    struct cands c = {idx, NULL, m};
    const int32_t *w = size;
    if (class_filter(fw, pod, &c, &w) != 0) return GS_ENOMEM;
    int64_t feasible = 0;
    for (size_t j = 0; j < c.n; j++) feasible += w[j];
    res->feasible_nodes = (int32_t)feasible;
    if (!c.n) return no_fit(fw, pod, res, unsched);
    int pre = run_pre_score(fw, pod, &c, res);
    if (pre == -2) return GS_ENOMEM;
    if (pre) return 0;
    int active[GS_MAX_PLUGINS_PER_POINT], na = active_scores(fw, active);
    int64_t *scores = gs_arena_alloc(&fw->arena, c.n * sizeof *scores);
    int64_t *total = gs_arena_alloc(&fw->arena, c.n * sizeof *total);
    if (!scores || !total) return GS_ENOMEM;
    memset(total, 0, c.n * sizeof *total);
    for (int a = 0; a < na && c.n > 1; a++) {
        if (score_slot(fw, active[a], pod, &c, scores) != 0) return GS_ENOMEM;
        int64_t wt = fw->pts[GS_PT_SCORE][active[a]].weight;
        for (size_t j = 0; j < c.n; j++) total[j] += wt * scores[j];
    }
    *won = class_winner(&c, total);
    fw->class_cycles++;
    return 1;
}

void gs_framework_class_apart(struct gs_framework *fw, int32_t node) { fw->apart = node; }
int32_t gs_framework_class_apart_node(const struct gs_framework *fw) { return fw->apart; }
void gs_framework_set_node_classes(struct gs_framework *fw, enum gs_node_classes mode) { fw->classes = mode; }
enum gs_node_classes gs_framework_node_classes(const struct gs_framework *fw) { return fw->classes; }
void gs_framework_set_diagnosis_text(struct gs_framework *fw, bool on) { fw->no_text = !on; }
uint64_t gs_framework_class_cycles(const struct gs_framework *fw) { return fw->class_cycles; }

static int finish_cycle(struct gs_framework *fw, const struct gs_pod *pod, struct gs_node_info *node, const char *key,
                        int64_t assumed_ttl_ns, struct gs_schedule_result *res);

int gs_framework_schedule(struct gs_framework *fw, const struct gs_pod *pod, int64_t assumed_ttl_ns,
                          struct gs_schedule_result *res)
{
    memset(res, 0, sizeof *res);
    res->a.node = -1;
    res->nominated_node = -1;
    gs_arena_reset(&fw->arena);
    gs_cycle_state_reset(&fw->cs);
    for (int i = 0; i < fw->npts[GS_PT_FILTER]; i++) {
        fw->tally[i].touched = false;
        fw->rej[i] = NULL;
        fw->rej_w[i] = NULL;
    }
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    fw->cs.seed = gs__mix64(fw->h.seed, gs__fnv1a(key));
    if (gs__strmap_get(&fw->recs, key)) {
        res->code = GS_ERROR;
        res->status = gs_status_make(GS_ERROR, "pod %s is already reserved", key);
        return 0;
    }
    if (run_pre_filter(fw, pod, res) != 0) {
        if (res->code == GS_ERROR) return 0;
        res->diag.prefilter = res->status;
        return no_fit(fw, pod, res, 0);
    }

    if (refresh_candidates(fw) != 0) return GS_ENOMEM;
    int32_t won = -1;
    fw->apart = -1; /* a plugin's by_class may set it for this cycle */
    int by_class = class_pick(fw, pod, res, &won);
    if (by_class < -1) return by_class;
    if (by_class == 0) return 0;
    if (by_class == 1) {
        struct gs_node_info *node = fw->slot_ptr[won];
        res->a = (struct gs_assignment){node->idx, 0, pod->demand.gpu_milli, pod->demand.gpu_mem_mib};
        return finish_cycle(fw, pod, node, key, assumed_ttl_ns, res);
    }
    struct cands c = {fw->cand_idx, fw->cand, fw->ncand};
    int32_t unsched = fw->cand_unsched;
    if (fw->only) { /* gs_framework_schedule_on: the caller's nodes instead of every candidate */
        c = (struct cands){fw->only, NULL, fw->nonly};
        unsched = 0;
    }
    /* Worst case per node: both compacted arrays, a verdict per Filter, scores and totals. */
    size_t want = c.n * (sizeof(int32_t) + sizeof(void *) + 2 * sizeof(int64_t) + GS_MAX_PLUGINS_PER_POINT) + 8192;
    if (fw->arena.chunk_size < want) fw->arena.chunk_size = want;
    if (run_filter(fw, pod, &c) != 0) return GS_ENOMEM;
    res->feasible_nodes = (int32_t)c.n;
    if (c.n == 0) return no_fit(fw, pod, res, unsched);

    int best = run_score(fw, pod, &c, res);
    if (best == -2) return GS_ENOMEM;
    if (best < 0) return 0;
    struct gs_node_info *node = fw->slot_ptr[c.idx[best]];
    res->a = (struct gs_assignment){node->idx, 0, pod->demand.gpu_milli, pod->demand.gpu_mem_mib};
    return finish_cycle(fw, pod, node, key, assumed_ttl_ns, res);
}

/* Reserve, Permit and the record of a pod whose node is chosen. */
static int finish_cycle(struct gs_framework *fw, const struct gs_pod *pod, struct gs_node_info *node, const char *key,
                        int64_t assumed_ttl_ns, struct gs_schedule_result *res)
{
    if (run_reserve(fw, pod, node, assumed_ttl_ns, res) != 0) return 0;

    uint32_t pending = 0;
    int64_t deadline = INT64_MAX;
    if (run_permit(fw, pod, node, key, &pending, &deadline, res) != 0) return 0;

    struct rec *r = calloc(1, sizeof *r);
    if (!r || !(r->key = strdup(key))) {
        free(r);
        unreserve_all(fw, &fw->cs, pod, node);
        gs_cache_forget(fw->h.cache, key);
        return GS_ENOMEM;
    }
    r->pod = pod;
    r->a = res->a;
    r->cs = fw->cs; /* the record takes the cycle state over */
    gs_cycle_state_init(&fw->cs);
    r->st = pending ? REC_WAITING : REC_RESERVED;
    r->pending = pending;
    r->deadline = deadline;
    if (r->st == REC_WAITING && deadline < fw->next_due) fw->next_due = deadline;
    if (add_rec(fw, r) != 0) {
        unreserve_all(fw, &r->cs, pod, node);
        gs_cache_forget(fw->h.cache, key);
        rec_free(r);
        return GS_ENOMEM;
    }
    res->code = pending ? GS_WAIT : GS_SUCCESS;
    return 0;
}

/*--- Binding cycle ---*/

static struct gs_status fail_rec(struct gs_framework *fw, struct rec *r, struct gs_status s)
{
    struct gs_node_info *node = gs_cache_node(fw->h.cache, r->a.node);
    unreserve_all(fw, &r->cs, r->pod, node);
    gs_cache_forget(fw->h.cache, r->key);
    drop_rec(fw, r);
    return s;
}

struct gs_status gs_framework_bind(struct gs_framework *fw, const struct gs_pod *pod)
{
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    struct rec *r = gs__strmap_get(&fw->recs, key);
    if (!r) return gs_status_make(GS_ERROR, "pod %s is not reserved", key);
    if (r->st == REC_WAITING) return gs_status_make(GS_ERROR, "pod %s is waiting at Permit", key);
    if (r->st == REC_REJECTED) {
        struct gs_status s = r->status;
        drop_rec(fw, r);
        return s;
    }
    struct gs_node_info *node = gs_cache_node(fw->h.cache, r->a.node);
    for (int i = 0; i < fw->npts[GS_PT_PRE_BIND]; i++) {
        const struct gs_plugin *pl = SLOT_PL(fw, GS_PT_PRE_BIND, i);
        if (!pl->pre_bind) continue;
        struct gs_status s = pl->pre_bind(SLOT_ST(fw, GS_PT_PRE_BIND, i), &r->cs, pod, node, &r->a);
        if (s.code != GS_SUCCESS) return fail_rec(fw, r, stamp(s, pl));
    }
    struct gs_status bound = gs_status_make(GS_ERROR, "no bind plugin bound pod %s", key);
    for (int i = 0; i < fw->npts[GS_PT_BIND]; i++) {
        const struct gs_plugin *pl = SLOT_PL(fw, GS_PT_BIND, i);
        if (!pl->bind) continue;
        struct gs_status s = pl->bind(SLOT_ST(fw, GS_PT_BIND, i), &r->cs, pod, node, &r->a);
        if (s.code == GS_SKIP) continue;
        bound = stamp(s, pl);
        break;
    }
    if (bound.code != GS_SUCCESS) return fail_rec(fw, r, bound);
    gs_cache_confirm(fw->h.cache, key);
    for (int i = 0; i < fw->npts[GS_PT_POST_BIND]; i++) {
        const struct gs_plugin *pl = SLOT_PL(fw, GS_PT_POST_BIND, i);
        if (pl->post_bind) pl->post_bind(SLOT_ST(fw, GS_PT_POST_BIND, i), &r->cs, pod, node, &r->a);
    }
    drop_rec(fw, r);
    return (struct gs_status){0};
}

/*--- Waiting pods ---*/

static int permit_slot(const struct gs_framework *fw, const char *plugin)
{
    for (int i = 0; i < fw->npts[GS_PT_PERMIT]; i++)
        if (strcmp(SLOT_PL(fw, GS_PT_PERMIT, i)->name, plugin) == 0) return i;
    return -1;
}

int gs_framework_allow(struct gs_framework *fw, const char *pod_key, const char *plugin)
{
    struct rec *r = gs__strmap_get(&fw->recs, pod_key);
    if (!r) return GS_ENOENT;
    if (r->st != REC_WAITING) return GS_ESTATE;
    int i = permit_slot(fw, plugin);
    if (i < 0) return GS_ENOENT;
    r->pending &= ~(1u << i);
    if (!r->pending) r->st = REC_READY, fw->quiet = false;
    return 0;
}

static void reject_rec(struct gs_framework *fw, struct rec *r, struct gs_status s)
{
    struct gs_node_info *node = gs_cache_node(fw->h.cache, r->a.node);
    unreserve_all(fw, &r->cs, r->pod, node);
    gs_cache_forget(fw->h.cache, r->key);
    r->st = REC_REJECTED;
    r->status = s;
    fw->quiet = false;
}

int gs_framework_reject(struct gs_framework *fw, const char *pod_key, const char *plugin, const char *reason)
{
    struct rec *r = gs__strmap_get(&fw->recs, pod_key);
    if (!r) return GS_ENOENT;
    if (r->st == REC_REJECTED) return 0;
    struct gs_status s = gs_status_make(GS_UNSCHEDULABLE, "%s", reason ? reason : "rejected at Permit");
    int i = plugin ? permit_slot(fw, plugin) : -1;
    s.plugin = i >= 0 ? SLOT_PL(fw, GS_PT_PERMIT, i)->name : NULL;
    reject_rec(fw, r, s);
    return 0;
}

int gs_framework_tick(struct gs_framework *fw, void (*cb)(const struct gs_pod *, bool ok, void *), void *arg)
{
    int64_t now = gs_clock_now(fw->h.clock);
    int timeouts = 0;
    if (fw->quiet && now < fw->next_due) return 0; /* the walk would find nothing to do */
    fw->quiet = true, fw->next_due = INT64_MAX;
    for (size_t i = 0; i < fw->nlist;) {
        struct rec *r = fw->list[i];
        if (r->st == REC_WAITING && r->deadline <= now) {
            int k = __builtin_ctz(r->pending);
            struct gs_status s = gs_status_make(GS_UNSCHEDULABLE, "rejected due to timeout after waiting at Permit");
            s.plugin = SLOT_PL(fw, GS_PT_PERMIT, k)->name;
            reject_rec(fw, r, s);
            timeouts++;
        }
        if (r->st == REC_READY) {
            r->st = REC_RESERVED;
            if (cb) cb(r->pod, true, arg);
            if (i >= fw->nlist || fw->list[i] != r) continue; /* the callback bound it: the list moved up */
        } else if (r->st == REC_REJECTED) {
            const struct gs_pod *pod = r->pod;
            snprintf(fw->last_reject, sizeof fw->last_reject, "%s", r->status.reason);
            drop_rec(fw, r);
            if (cb) cb(pod, false, arg);
            continue;
        }
        if (r->st == REC_WAITING && r->deadline < fw->next_due) fw->next_due = r->deadline;
        i++;
    }
    return timeouts;
}

size_t gs_framework_waiting(const struct gs_framework *fw)
{
    size_t n = 0;
    for (size_t i = 0; i < fw->nlist; i++) n += fw->list[i]->st == REC_WAITING;
    return n;
}

/*--- Events, lookups and out-of-cycle filtering ---*/

const char *gs_framework_last_rejection(const struct gs_framework *fw) { return fw->last_reject; }

int64_t gs_framework_next_deadline(const struct gs_framework *fw)
{
    int64_t best = -1;
    for (size_t i = 0; i < fw->nlist; i++) {
        const struct rec *r = fw->list[i];
        if (r->st == REC_WAITING && (best < 0 || r->deadline < best)) best = r->deadline;
    }
    return best;
}

void gs_framework_notify_pod(struct gs_framework *fw, const struct gs_pod *pod, bool added)
{
    for (int i = 0; i < fw->ninst; i++)
        if (fw->inst[i].pl->on_pod) fw->inst[i].pl->on_pod(fw->inst[i].state, pod, added);
}

void gs_framework_notify_podgroup(struct gs_framework *fw, const struct gs_podgroup *pg, bool added)
{
    for (int i = 0; i < fw->ninst; i++)
        if (fw->inst[i].pl->on_podgroup) fw->inst[i].pl->on_podgroup(fw->inst[i].state, pg, added);
}

void *gs_framework_plugin_state(struct gs_framework *fw, const char *name)
{
    for (int i = 0; i < fw->ninst; i++)
        if (!strcmp(fw->inst[i].pl->name, name)) return fw->inst[i].state;
    return NULL;
}

int gs_framework_filter_count(const struct gs_framework *fw) { return fw->npts[GS_PT_FILTER]; }

const struct gs_plugin *gs_framework_filter_plugin(const struct gs_framework *fw, int i, void **state)
{
    if (i < 0 || i >= fw->npts[GS_PT_FILTER]) return NULL;
    if (state) *state = SLOT_ST(fw, GS_PT_FILTER, i);
    return SLOT_PL(fw, GS_PT_FILTER, i);
}

/* PreFilter into a private state; 0, or -1 with run->prefilter set. */
static int sim_pre_filter(struct gs_framework *fw, struct gs_cycle_state *cs, const struct gs_pod *pod,
                          struct gs_filter_run *run)
{
    for (int i = 0; i < fw->npts[GS_PT_PRE_FILTER]; i++) {
        const struct gs_plugin *pl = SLOT_PL(fw, GS_PT_PRE_FILTER, i);
        if (!pl->pre_filter || (run->skip && !strcmp(run->skip, pl->name))) continue;
        struct gs_status s = pl->pre_filter(SLOT_ST(fw, GS_PT_PRE_FILTER, i), cs, pod);
        if (s.code == GS_SKIP) cs->skip_filter_mask |= 1 << fw->pts[GS_PT_PRE_FILTER][i].inst;
        else if (s.code != GS_SUCCESS) {
            run->prefilter = stamp(s, pl);
            return -1;
        }
    }
    return 0;
}

/* Is every Filter that runs for pod under cs (not skipped at PreFilter, not
 * the caller's) a function of the node's class? */
static bool filters_by_class(struct gs_framework *fw, struct gs_cycle_state *cs, const struct gs_pod *pod,
                             const char *skip)
{
    for (int i = 0; i < fw->npts[GS_PT_FILTER]; i++) {
        int k = fw->pts[GS_PT_FILTER][i].inst;
        const struct gs_plugin *pl = fw->inst[k].pl;
        if (!pl->filter || (cs->skip_filter_mask & (1 << k)) || (skip && !strcmp(skip, pl->name))) continue;
        if (!pl->by_class || !pl->by_class(fw->inst[k].state, cs, pod)) return false;
    }
    return true;
}

int gs_framework_run_filters(struct gs_framework *fw, const struct gs_pod *pod, struct gs_filter_run *run)
{
    size_t n = run->n, nf = (size_t)fw->npts[GS_PT_FILTER];
    memset(&run->prefilter, 0, sizeof run->prefilter);
    memset(run->reject, 0, run->each ? nf * n : n);
    if (run->by) memset(run->by, -1, n);
    struct gs_cycle_state cs;
    gs_cycle_state_init(&cs);
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    cs.seed = gs__mix64(fw->h.seed, gs__fnv1a(key));
    cs.filters_only = true; /* a by_class asked below answers for the Filters only */
    struct gs_node_info **live = malloc((n ? n : 1) * sizeof *live);
    size_t *pos = malloc((n ? n : 1) * sizeof *pos);
    uint8_t *rej = malloc(n ? n : 1);
    if (!live || !pos || !rej) {
        free(live), free(pos), free(rej);
        gs_cycle_state_free(&cs);
        return GS_ENOMEM;
    }
    size_t m = n;
    run->not_by_class = false;
    /* No node is set apart here: a by_class asked below reads none. */
    int32_t apart = fw->apart;
    fw->apart = -1;
    if (sim_pre_filter(fw, &cs, pod, run) != 0) {
        for (size_t j = 0; j < (run->each ? nf * n : n); j++) run->reject[j] = GS_REJECT_UNRESOLVABLE | 1;
        m = 0;
    } else if (run->classes && !filters_by_class(fw, &cs, pod, run->skip)) {
        run->not_by_class = true;
        m = 0;
    }
    for (size_t j = 0; j < n && m; j++) live[j] = run->nodes[j], pos[j] = j;
    for (size_t i = 0; i < nf && m; i++) {
        int k = fw->pts[GS_PT_FILTER][i].inst;
        const struct gs_plugin *pl = fw->inst[k].pl;
        if (!pl->filter || (cs.skip_filter_mask & (1 << k)) || (run->skip && !strcmp(run->skip, pl->name))) continue;
        if (run->each) {
            pl->filter(fw->inst[k].state, &cs, pod, run->nodes, n, run->reject + i * n);
            continue;
        }
        memset(rej, 0, m);
        pl->filter(fw->inst[k].state, &cs, pod, live, m, rej);
        size_t w = 0;
        for (size_t j = 0; j < m; j++) {
            if (!rej[j]) {
                live[w] = live[j], pos[w++] = pos[j];
                continue;
            }
            run->reject[pos[j]] = rej[j];
            if (run->by) run->by[pos[j]] = (int8_t)i;
        }
        m = w;
    }
    if (run->each && !run->prefilter.code) {
        m = 0;
        for (size_t j = 0; j < n; j++) {
            bool ok = true;
            for (size_t i = 0; i < nf; i++) ok = ok && !run->reject[i * n + j];
            m += ok;
        }
    }
    free(live), free(pos), free(rej);
    gs_cycle_state_free(&cs);
    fw->apart = apart;
    return (int)m;
}

/*--- One pod on given nodes (the kube-scheduler extender) ---*/

int gs_framework_schedule_on(struct gs_framework *fw, const struct gs_pod *pod, const int32_t *idx, size_t n,
                             int64_t assumed_ttl_ns, struct gs_schedule_result *res)
{
    struct gs_cache *c = fw->h.cache;
    int32_t *own = malloc((n ? n : 1) * sizeof *own);
    if (!own) return GS_ENOMEM;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) { /* the same nodes a full cycle would consider, in cache order */
        struct gs_node_info *ni = idx[i] >= 0 && idx[i] < gs_cache_node_count(c) ? gs_cache_node(c, idx[i]) : NULL;
        if (ni && ni->live && ni->schedulable) own[m++] = idx[i];
    }
    for (size_t i = 1; i < m; i++)
        for (size_t j = i; j > 0 && own[j - 1] > own[j]; j--) {
            int32_t t = own[j];
            own[j] = own[j - 1], own[j - 1] = t;
        }
    fw->only = own;
    fw->nonly = m;
    int err = gs_framework_schedule(fw, pod, assumed_ttl_ns, res);
    fw->only = NULL;
    fw->nonly = 0;
    free(own);
    return err;
}

int gs_framework_run_scores(struct gs_framework *fw, const struct gs_pod *pod, struct gs_node_info *const *nodes,
                            size_t n, int64_t *total, struct gs_status *failed)
{
    memset(failed, 0, sizeof *failed);
    memset(total, 0, n * sizeof *total);
    if (!n) return 0;
    gs_arena_reset(&fw->arena);
    gs_cycle_state_reset(&fw->cs);
    size_t want = n * (sizeof(int32_t) + sizeof(void *) + 2 * sizeof(int64_t)) + 8192;
    if (fw->arena.chunk_size < want) fw->arena.chunk_size = want;
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    fw->cs.seed = gs__mix64(fw->h.seed, gs__fnv1a(key));
    struct gs_filter_run pre = {0};
    int32_t *idx = gs_arena_alloc(&fw->arena, n * sizeof *idx);
    int64_t *scores = gs_arena_alloc(&fw->arena, n * sizeof *scores);
    if (!idx || !scores) return GS_ENOMEM;
    if (sim_pre_filter(fw, &fw->cs, pod, &pre) != 0) {
        *failed = pre.prefilter;
        gs_cycle_state_reset(&fw->cs);
        return 0;
    }
    for (size_t i = 0; i < n; i++) idx[i] = nodes[i]->idx;
    struct cands c = {idx, nodes, n};
    struct gs_schedule_result res = {0};
    for (int i = 0; i < fw->npts[GS_PT_PRE_SCORE]; i++) {
        int k = fw->pts[GS_PT_PRE_SCORE][i].inst;
        const struct gs_plugin *pl = fw->inst[k].pl;
        if (!pl->pre_score) continue;
        struct gs_status s = pl->pre_score(fw->inst[k].state, &fw->cs, pod, nodes, n);
        if (s.code == GS_SKIP) fw->cs.skip_score_mask |= 1 << k;
        else if (s.code != GS_SUCCESS) res.status = stamp(s, pl);
        if (res.status.code) {
            *failed = res.status;
            gs_cycle_state_reset(&fw->cs);
            return 0;
        }
    }
    for (int i = 0; i < fw->npts[GS_PT_SCORE]; i++) {
        int k = fw->pts[GS_PT_SCORE][i].inst;
        if (!fw->inst[k].pl->score || (fw->cs.skip_score_mask & (1 << k))) continue;
        if (score_slot(fw, i, pod, &c, scores) != 0) return GS_ENOMEM;
        int64_t w = fw->pts[GS_PT_SCORE][i].weight;
        for (size_t j = 0; j < n; j++) total[j] += w * scores[j];
    }
    gs_cycle_state_reset(&fw->cs);
    return 0;
}

int64_t gs_framework_max_total_score(const struct gs_framework *fw)
{
    int64_t sum = 0;
    for (int i = 0; i < fw->npts[GS_PT_SCORE]; i++)
        if (fw->inst[fw->pts[GS_PT_SCORE][i].inst].pl->score) sum += fw->pts[GS_PT_SCORE][i].weight * GS_MAX_SCORE;
    return sum;
}
