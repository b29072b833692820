/*
 * fairshare.c - water-filled fair shares, dominant shares and the decayed
 * GPU-hour ledger (the formulas are in fairshare.h).
 *
 * Everything is recomputed from the quota usage on demand: trees are small,
 * so a full pass (nodes x resources) is cheaper than keeping incremental
 * state right. Shares are doubles: they order queues and are shown to
 * people, they never decide whether quota is exceeded (quota.c does, in
 * exact integers).
 */
#include "sched/admission/fairshare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_HOUR 3.6e12
#define SHARE_INF 1e6 /* usage with nothing deserved */

double gs_fairshare_decay(int64_t dt_ns, int64_t halflife_ns)
{
    if (dt_ns <= 0) return 1.0;
    if (halflife_ns <= 0) return 0.0;
    /* exp(-ln2 * dt / halflife) = 2^(-dt / halflife) */
    return exp(-M_LN2 * (double)dt_ns / (double)halflife_ns);
}

int gs_fairshare_init(struct gs_fairshare *fs, const struct gs_queue_tree *t, int64_t halflife_ns,
                      double history_weight, int64_t now_ns)
{
    memset(fs, 0, sizeof *fs);
    fs->t = t;
    fs->n = calloc(t->n ? (size_t)t->n : 1, sizeof *fs->n);
    if (!fs->n) return GS_ENOMEM;
    fs->last_ns = now_ns;
    fs->halflife_ns = halflife_ns;
    fs->history_weight = history_weight < 0 ? 0 : history_weight > 1 ? 1 : history_weight;
    fs->gpu_res = gs_queue_tree_res(t, GS_RES_GPU);
    return 0;
}

void gs_fairshare_free(struct gs_fairshare *fs)
{
    free(fs->n);
    memset(fs, 0, sizeof *fs);
}

static double leaf_gpus(const struct gs_fairshare *fs, const struct gs_quota *q, int32_t i)
{
    if (fs->gpu_res < 0) return 0;
    double m = 0;
    for (int f = 0; f < fs->t->nflavors; f++) m += (double)q->usage[i][GS_QT_FR(f, fs->gpu_res)];
    return m / 1000.0;
}

void gs_fairshare_advance(struct gs_fairshare *fs, const struct gs_quota *q, int64_t now_ns)
{
    int64_t dt = now_ns - fs->last_ns;
    if (dt > 0) {
        double f = gs_fairshare_decay(dt, fs->halflife_ns);
        /* integral over the interval of g * exp(-ln2 (dt - s) / H) ds, in GPU-hours */
        double gain = fs->halflife_ns > 0 ? (double)fs->halflife_ns / M_LN2 * (1 - f) / NS_PER_HOUR : 0;
        for (int32_t i = 0; i < fs->t->n; i++) fs->n[i].ledger_gpu_hours = fs->n[i].ledger_gpu_hours * f + fs->n[i].gpus * gain;
        fs->last_ns = now_ns;
    }
    for (int32_t i = 0; i < fs->t->n; i++)
        fs->n[i].gpus = gs_queue_tree_is_leaf(fs->t, i) ? leaf_gpus(fs, q, i) : 0;
}

/*--- Aggregates ---*/

static void aggregate(struct gs_fairshare *fs, const struct gs_quota *q, const double (*pending)[GS_QT_MAX_RES], int32_t i)
{
    const struct gs_qt_node *n = &fs->t->nodes[i];
    struct gs_fs_node *x = &fs->n[i];
    for (int r = 0; r < GS_QT_MAX_RES; r++) {
        x->usage[r] = x->demand[r] = x->guarantee[r] = 0;
        x->limit[r] = 0;
        for (int f = 0; f < fs->t->nflavors; f++) {
            const struct gs_qt_quota *qq = &n->quota[GS_QT_FR(f, r)];
            x->guarantee[r] += (double)qq->nominal;
            x->limit[r] += qq->borrowing_limit == GS_QT_UNLIMITED ? HUGE_VAL : (double)(qq->nominal + qq->borrowing_limit);
            if (!n->nchildren) x->usage[r] += (double)q->usage[i][GS_QT_FR(f, r)];
        }
        if (!n->nchildren) x->demand[r] = x->usage[r] + (pending ? pending[i][r] : 0);
    }
    if (!n->nchildren) return;
    x->ledger_gpu_hours = 0;
    for (int32_t c = 0; c < n->nchildren; c++) {
        int32_t k = n->children[c];
        aggregate(fs, q, pending, k);
        x->ledger_gpu_hours += fs->n[k].ledger_gpu_hours;
        for (int r = 0; r < GS_QT_MAX_RES; r++) {
            x->usage[r] += fs->n[k].usage[r];
            x->demand[r] += fs->n[k].demand[r];
            x->guarantee[r] += fs->n[k].guarantee[r];
        }
    }
    for (int r = 0; r < GS_QT_MAX_RES; r++)
        if (x->limit[r] < x->guarantee[r]) x->limit[r] = x->guarantee[r]; /* own limit counts only above the children's */
}

/* Splits amount of resource r among i's children (see fairshare.h). */
static void fill(struct gs_fairshare *fs, int32_t i, int r, double amount)
{
    const struct gs_qt_node *n = &fs->t->nodes[i];
    fs->n[i].deserved[r] = amount;
    if (!n->nchildren) return;
    double given = 0;
    for (int32_t c = 0; c < n->nchildren; c++) {
        struct gs_fs_node *k = &fs->n[n->children[c]];
        k->deserved[r] = fmin(k->guarantee[r], k->demand[r]);
        given += k->deserved[r];
    }
    if (given > amount && given > 0) /* guarantees over what there is: scale them down */
        for (int32_t c = 0; c < n->nchildren; c++) fs->n[n->children[c]].deserved[r] *= amount / given;
    double rem = amount - given;
    for (int32_t round = 0; round <= n->nchildren && rem > 1e-9; round++) {
        double w = 0;
        for (int32_t c = 0; c < n->nchildren; c++) {
            const struct gs_fs_node *k = &fs->n[n->children[c]];
            if (k->deserved[r] < fmin(k->demand[r], k->limit[r])) w += fs->t->nodes[n->children[c]].weight;
        }
        if (w <= 0) break;
        double spent = 0;
        bool saturated = false;
        for (int32_t c = 0; c < n->nchildren; c++) {
            struct gs_fs_node *k = &fs->n[n->children[c]];
            double room = fmin(k->demand[r], k->limit[r]) - k->deserved[r];
            if (room <= 0) continue;
            double give = rem * fs->t->nodes[n->children[c]].weight / w;
            if (give >= room) give = room, saturated = true;
            k->deserved[r] += give;
            spent += give;
        }
        rem -= spent;
        if (!saturated) break;
    }
    for (int32_t c = 0; c < n->nchildren; c++) fill(fs, n->children[c], r, fs->n[n->children[c]].deserved[r]);
}

static void entitle(struct gs_fairshare *fs, int32_t i, double e)
{
    const struct gs_qt_node *n = &fs->t->nodes[i];
    fs->n[i].entitlement = e;
    double w = 0;
    for (int32_t c = 0; c < n->nchildren; c++) w += fs->t->nodes[n->children[c]].weight;
    for (int32_t c = 0; c < n->nchildren; c++)
        entitle(fs, n->children[c], w > 0 ? e * fs->t->nodes[n->children[c]].weight / w : e / n->nchildren);
}

static int32_t root_of(const struct gs_queue_tree *t, int32_t i)
{
    while (t->nodes[i].parent >= 0) i = t->nodes[i].parent;
    return i;
}

void gs_fairshare_compute(struct gs_fairshare *fs, const struct gs_quota *q, const double (*pending)[GS_QT_MAX_RES])
{
    const struct gs_queue_tree *t = fs->t;
    for (int32_t i = 0; i < t->n; i++) {
        if (t->nodes[i].parent >= 0) continue;
        aggregate(fs, q, pending, i);
        for (int r = 0; r < t->nres; r++) fill(fs, i, r, fs->n[i].guarantee[r]);
        entitle(fs, i, 1.0);
    }
    for (int32_t i = 0; i < t->n; i++) {
        struct gs_fs_node *x = &fs->n[i];
        x->share = 0;
        for (int r = 0; r < t->nres; r++) {
            if (x->usage[r] <= 0) continue;
            double s = x->deserved[r] >= 1 ? x->usage[r] / x->deserved[r] : SHARE_INF;
            if (s > x->share) x->share = s;
        }
        double total = fs->n[root_of(t, i)].ledger_gpu_hours;
        x->hist = total > 0 && x->entitlement > 0 ? x->ledger_gpu_hours / total / x->entitlement : 0;
        x->key = (1 - fs->history_weight) * x->share + fs->history_weight * x->hist;
    }
}

/*--- Picking ---*/

static bool better(const struct gs_fairshare *fs, int32_t a, int32_t b)
{
    if (b < 0) return true;
    const struct gs_qt_node *x = &fs->t->nodes[a], *y = &fs->t->nodes[b];
    if (x->priority != y->priority) return x->priority > y->priority;
    if (fs->n[a].key != fs->n[b].key) return fs->n[a].key < fs->n[b].key;
    return a < b;
}

int32_t gs_fairshare_pick(const struct gs_fairshare *fs, const bool *candidate)
{
    const struct gs_queue_tree *t = fs->t;
    bool *sub = calloc(t->n ? (size_t)t->n : 1, sizeof *sub);
    if (!sub) return -1;
    for (int32_t i = 0; i < t->n; i++)
        if (candidate[i] && gs_queue_tree_is_leaf(t, i))
            for (int32_t j = i; j >= 0 && !sub[j]; j = t->nodes[j].parent) sub[j] = true;
    int32_t cur = -1;
    for (int32_t i = 0; i < t->n; i++)
        if (t->nodes[i].parent < 0 && sub[i] && better(fs, i, cur)) cur = i;
    while (cur >= 0 && t->nodes[cur].nchildren) {
        int32_t next = -1;
        for (int32_t c = 0; c < t->nodes[cur].nchildren; c++) {
            int32_t k = t->nodes[cur].children[c];
            if (sub[k] && better(fs, k, next)) next = k;
        }
        cur = next;
    }
    free(sub);
    return cur;
}
