/*
 * quota.h - quota accounting over the queue tree: usage per queue per flavor
 * per resource, borrowing and lending limits, cohort sums.
 *
 * The model is Kueue's hierarchical one. For a node n and one (flavor,
 * resource):
 *   guaranteed(n) = subtree(n) - lendingLimit(n)  (0 when lendingLimit is nil):
 *                   what n keeps for itself and never lends;
 *   subtree(n)    = nominal(n) + sum over children c of (subtree(c) - guaranteed(c)):
 *                   the quota n holds, counting only what its children lend;
 *   usage(n)      = admitted requests for a leaf; for an interior node the
 *                   sum over children of max(0, usage(c) - guaranteed(c)),
 *                   i.e. what they take from the shared pool;
 *   available(n)  = subtree - usage at a root; elsewhere
 *                   max(0, guaranteed - usage) + min(available(parent),
 *                   subtree - guaranteed - max(0, usage - guaranteed) + borrowingLimit)
 *                   (the second term without the min when borrowingLimit is nil).
 * A request fits a leaf when it is <= available(leaf) for every (flavor,
 * resource) it asks; then, at every node, usage <= subtree + borrowingLimit
 * (never over nominal + borrowing) and at every root usage <= subtree, which
 * gs_quota_check verifies.
 *
 * Requests are full vectors indexed by GS_QT_FR(flavor, resource).
 */
#ifndef GS_SCHED_ADMISSION_QUOTA_H
#define GS_SCHED_ADMISSION_QUOTA_H

#include "sched/admission/queue_tree.h"

#include <stddef.h>

typedef int64_t gs_qvec[GS_QT_NFR];

struct gs_quota {
    const struct gs_queue_tree *t; /* borrowed, finalized */
    gs_qvec *usage;
    gs_qvec *subtree;
    gs_qvec *guaranteed;
};

/* Accounting for a finalized tree (borrowed; must outlive q). Recomputes the
 * static sums, so call it again after gs_queue_tree_set_capacity. */
int gs_quota_init(struct gs_quota *q, const struct gs_queue_tree *t);
void gs_quota_free(struct gs_quota *q);
/* Recomputes subtree/guaranteed after the tree's quotas changed; keeps usage. */
void gs_quota_refresh(struct gs_quota *q);

int64_t gs_quota_available(const struct gs_quota *q, int32_t node, int fr);
/* Does req fit leaf? On failure *bad_fr (may be NULL) is the first
 * (flavor, resource) that does not. */
bool gs_quota_fits(const struct gs_quota *q, int32_t leaf, const int64_t *req, int *bad_fr);
/* Adds (sign +1) or removes (sign -1) req to leaf's usage and the sums up the tree. */
void gs_quota_apply(struct gs_quota *q, int32_t leaf, const int64_t *req, int sign);

/* Amount above the node's own quota (subtree), and an upper bound of its
 * unused lendable quota that siblings are using. */
int64_t gs_quota_borrowed(const struct gs_quota *q, int32_t node, int fr);
int64_t gs_quota_lent(const struct gs_quota *q, int32_t node, int fr);

/* Checks the invariants above and the interior sums. 0 or GS_ESTATE with why. */
int gs_quota_check(const struct gs_quota *q, char *why, size_t len);

static inline int64_t gs_sat_add(int64_t a, int64_t b)
{
    return a > GS_QT_UNLIMITED - b ? GS_QT_UNLIMITED : a + b;
}

#endif
