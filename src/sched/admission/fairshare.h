/*
 * fairshare.h - who is furthest below their fair share: weighted dominant
 * resource shares over the queue tree, with a decaying usage history.
 *
 * Three numbers per queue:
 *  - deserved[r]: the queue's fair share of resource r, by water-filling as
 *    Volcano's proportion plugin and KAI do: at each node of the tree the
 *    amount (a root: the sum of every nominal quota under it) first gives
 *    each child min(guarantee, demand), then splits the rest by weight,
 *    capped at each child's demand (usage + pending) and limit, until it is
 *    spent or every child is satisfied; children split theirs recursively;
 *  - share: the weighted dominant share now, max over resources of
 *    usage / deserved (1 = exactly its fair share; Volcano's share);
 *  - hist: the history share, (decayed GPU-hours of the queue / those of its
 *    whole tree) / entitlement, where the entitlement is the product of
 *    weight / sum of sibling weights down the path.
 * The ordering key is (1 - h) * share + h * hist with h the history weight.
 * The next queue to admit from is found by descending from the roots, at
 * each level taking the candidate child with the highest priority, then the
 * lowest key (KAI: priority first, then fairness).
 *
 * The ledger: GPU-hours decaying with half-life H. Between two updates dt
 * apart, with g GPUs in use throughout,
 *     L <- L * exp(-ln2 * dt / H) + g * (H / ln2) * (1 - exp(-ln2 * dt / H)),
 * which is exact for piecewise-constant usage (the integral of g decayed
 * to the end of the interval); with constant g from 0 it gives the closed
 * form L(t) = g * H / ln2 * (1 - 2^(-t/H)), tending to g * H / ln2.
 * Time comes only from the caller (a struct gs_clock reading).
 */
#ifndef GS_SCHED_ADMISSION_FAIRSHARE_H
#define GS_SCHED_ADMISSION_FAIRSHARE_H

#include "sched/admission/quota.h"

struct gs_fs_node {
    double ledger_gpu_hours;        /* decayed */
    double gpus;                    /* GPUs in use at the last update */
    double usage[GS_QT_MAX_RES];    /* milli, over flavors, whole subtree */
    double demand[GS_QT_MAX_RES];   /* usage + pending */
    double deserved[GS_QT_MAX_RES]; /* milli */
    double guarantee[GS_QT_MAX_RES];
    double limit[GS_QT_MAX_RES];    /* HUGE_VAL when unlimited */
    double entitlement;             /* static weight fraction of its tree */
    double share, hist, key;
};

struct gs_fairshare {
    const struct gs_queue_tree *t;
    struct gs_fs_node *n;
    int64_t last_ns;
    int64_t halflife_ns;
    double history_weight;
    int gpu_res;                    /* resource id of nvidia.com/gpu, -1 when absent */
};

/* The decay factor over dt: exp(-ln2 * dt / halflife). */
double gs_fairshare_decay(int64_t dt_ns, int64_t halflife_ns);

int gs_fairshare_init(struct gs_fairshare *fs, const struct gs_queue_tree *t, int64_t halflife_ns,
                      double history_weight, int64_t now_ns);
void gs_fairshare_free(struct gs_fairshare *fs);

/* Integrates every queue's GPU usage since the last call up to now, then
 * reads the current usage from q. Call before every usage change. */
void gs_fairshare_advance(struct gs_fairshare *fs, const struct gs_quota *q, int64_t now_ns);

/* Recomputes deserved, share, hist and key. pending[i][r]: milli asked by
 * leaf i's pending workloads (may be NULL). */
void gs_fairshare_compute(struct gs_fairshare *fs, const struct gs_quota *q, const double (*pending)[GS_QT_MAX_RES]);

/* The leaf to serve next among those with candidate[leaf] true; -1 when none. */
int32_t gs_fairshare_pick(const struct gs_fairshare *fs, const bool *candidate);

#endif
