/*
 * quota.c - Kueue-style hierarchical quota accounting (see quota.h for the
 * formulas).
 *
 * The static sums (subtree, guaranteed) are computed once, children before
 * parents. Usage changes only at leaves; each change walks the path to the
 * root recomputing the parent's pool usage from its children, so an update
 * costs depth x children per touched (flavor, resource), and queries walk
 * the path once. Trees are small (tens of queues), so this is simpler and
 * as fast as keeping deltas.
 */
#include "sched/admission/quota.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t max0(int64_t x) { return x > 0 ? x : 0; }

static void compute_static(struct gs_quota *q, int32_t i)
{
    const struct gs_qt_node *n = &q->t->nodes[i];
    for (int32_t c = 0; c < n->nchildren; c++) compute_static(q, n->children[c]);
    for (int fr = 0; fr < GS_QT_NFR; fr++) {
        int64_t s = n->quota[fr].nominal;
        for (int32_t c = 0; c < n->nchildren; c++) {
            int32_t k = n->children[c];
            s = gs_sat_add(s, q->subtree[k][fr] - q->guaranteed[k][fr]);
        }
        q->subtree[i][fr] = s;
        int64_t lend = n->quota[fr].lending_limit;
        q->guaranteed[i][fr] = lend == GS_QT_UNLIMITED || n->parent < 0 ? 0 : max0(s - lend);
    }
}

void gs_quota_refresh(struct gs_quota *q)
{
    for (int32_t i = 0; i < q->t->n; i++)
        if (q->t->nodes[i].parent < 0) compute_static(q, i);
}

int gs_quota_init(struct gs_quota *q, const struct gs_queue_tree *t)
{
    memset(q, 0, sizeof *q);
    q->t = t;
    size_t n = t->n ? (size_t)t->n : 1;
    q->usage = calloc(n, sizeof *q->usage);
    q->subtree = calloc(n, sizeof *q->subtree);
    q->guaranteed = calloc(n, sizeof *q->guaranteed);
    if (!q->usage || !q->subtree || !q->guaranteed) {
        gs_quota_free(q);
        return GS_ENOMEM;
    }
    gs_quota_refresh(q);
    return 0;
}

void gs_quota_free(struct gs_quota *q)
{
    free(q->usage);
    free(q->subtree);
    free(q->guaranteed);
    memset(q, 0, sizeof *q);
}

int64_t gs_quota_available(const struct gs_quota *q, int32_t i, int fr)
{
    const struct gs_qt_node *n = &q->t->nodes[i];
    int64_t u = q->usage[i][fr], s = q->subtree[i][fr], g = q->guaranteed[i][fr];
    if (n->parent < 0) return s - u;
    int64_t local = max0(g - u);
    int64_t parent = gs_quota_available(q, n->parent, fr);
    int64_t bl = n->quota[fr].borrowing_limit;
    if (bl != GS_QT_UNLIMITED) {
        int64_t with_max = gs_sat_add(s - g - max0(u - g), bl);
        if (with_max < parent) parent = with_max;
    }
    return gs_sat_add(local, parent);
}

bool gs_quota_fits(const struct gs_quota *q, int32_t leaf, const int64_t *req, int *bad_fr)
{
    for (int fr = 0; fr < GS_QT_NFR; fr++) {
        if (req[fr] <= 0) continue;
        if (req[fr] > gs_quota_available(q, leaf, fr)) {
            if (bad_fr) *bad_fr = fr;
            return false;
        }
    }
    return true;
}

static int64_t pool_usage(const struct gs_quota *q, int32_t i, int fr)
{
    const struct gs_qt_node *n = &q->t->nodes[i];
    int64_t u = 0;
    for (int32_t c = 0; c < n->nchildren; c++) {
        int32_t k = n->children[c];
        u = gs_sat_add(u, max0(q->usage[k][fr] - q->guaranteed[k][fr]));
    }
    return u;
}

void gs_quota_apply(struct gs_quota *q, int32_t leaf, const int64_t *req, int sign)
{
    for (int fr = 0; fr < GS_QT_NFR; fr++) {
        if (!req[fr]) continue;
        q->usage[leaf][fr] += sign > 0 ? req[fr] : -req[fr];
        for (int32_t p = q->t->nodes[leaf].parent; p >= 0; p = q->t->nodes[p].parent)
            q->usage[p][fr] = pool_usage(q, p, fr);
    }
}

int64_t gs_quota_borrowed(const struct gs_quota *q, int32_t i, int fr)
{
    return max0(q->usage[i][fr] - q->subtree[i][fr]);
}

int64_t gs_quota_lent(const struct gs_quota *q, int32_t i, int fr)
{
    const struct gs_qt_node *n = &q->t->nodes[i];
    if (n->parent < 0) return 0;
    int64_t g = q->guaranteed[i][fr];
    int64_t unused = max0((q->subtree[i][fr] - g) - max0(q->usage[i][fr] - g));
    const struct gs_qt_node *p = &q->t->nodes[n->parent];
    int64_t others = 0;
    for (int32_t c = 0; c < p->nchildren; c++)
        if (p->children[c] != i) others = gs_sat_add(others, gs_quota_borrowed(q, p->children[c], fr));
    return unused < others ? unused : others;
}

int gs_quota_check(const struct gs_quota *q, char *why, size_t len)
{
    const struct gs_queue_tree *t = q->t;
    for (int32_t i = 0; i < t->n; i++) {
        const struct gs_qt_node *n = &t->nodes[i];
        for (int fr = 0; fr < GS_QT_NFR; fr++) {
            int64_t u = q->usage[i][fr], s = q->subtree[i][fr], bl = n->quota[fr].borrowing_limit;
            const char *res = t->res_names[fr % GS_QT_MAX_RES];
            if (u < 0) {
                snprintf(why, len, "queue %s: negative usage %lld of %s", n->name, (long long)u, res ? res : "?");
                return GS_ESTATE;
            }
            if (n->nchildren && u != pool_usage(q, i, fr)) {
                snprintf(why, len, "queue %s: pool usage %lld of %s != sum of children %lld", n->name, (long long)u,
                         res ? res : "?", (long long)pool_usage(q, i, fr));
                return GS_ESTATE;
            }
            if (n->parent < 0 && u > s) {
                snprintf(why, len, "root %s: usage %lld of %s over its quota %lld", n->name, (long long)u,
                         res ? res : "?", (long long)s);
                return GS_ESTATE;
            }
            if (n->parent >= 0 && bl != GS_QT_UNLIMITED && u > gs_sat_add(s, bl)) {
                snprintf(why, len, "queue %s: usage %lld of %s over nominal %lld + borrowingLimit %lld", n->name,
                         (long long)u, res ? res : "?", (long long)s, (long long)bl);
                return GS_ESTATE;
            }
        }
    }
    return 0;
}
