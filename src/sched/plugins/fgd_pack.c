/*
 * fgd_pack.c - FGDPack: fragmentation gradient descent that fills busy nodes
 * first (our policy; compared with FGD in bench/RESULTS.md).
 *
 * FGD scores int(sigmoid(dF / 1000) * 100) and sends ties to the first node
 * in name order. FGDPack makes two changes, both measured on the default
 * openb trace (same experiment, same seeds 42..51):
 *  - a wider bucket, int(sigmoid(dF / 2000) * 100): nodes whose placements
 *    change fragmentation by about the same amount are treated as equals
 *    rather than separated by noise-level differences in dF;
 *  - among equals, a node that already hosts pods beats an empty one, so
 *    empty nodes stay whole for the 4- and 8-GPU pods that come later; the
 *    remaining ties still go to the first node name.
 * Finer tie-breaks (exact dF, least free GPU, CPU/GPU balance) all did worse
 * than FGD in our runs: the first-name order among equals is itself a good
 * packing order. A sharing pod takes the GPU with the smallest dF, then the
 * tightest fit.
 *
 * The key (bucket, occupied) is mapped by NormalizeScore so the best node
 * gets 100 and every other node at most 99: with one score plugin the argmax
 * is exactly the best key.
 *
 * Keys are remembered per (CPU, milli, GPU count) request and node, with the
 * node generation and the model stamp they were computed at, as FGD does:
 * a key depends on nothing else, and one placement changes one node. That
 * memo and the extension points are sched/fragkey.c, shared with FGDPlus;
 * this file is the key.
 */
#include "sched/fragkey.h"

#include <math.h>
#include <stdbool.h>

/* Key of placing the pod on nd (F from f0 to f1): larger is better. */
static int64_t key_of(double f0, double f1, const struct gs_node_info *nd, bool share)
{
    (void)share;
    int64_t bucket = (int64_t)(1.0 / (1.0 + exp(-(f0 - f1) / 2000.0)) * GS_MAX_SCORE);
    return bucket * 2 + (nd->npods > 0);
}

static int init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    return gs_fragkey_new(h, args, key_of, state, d);
}

const struct gs_plugin gs_plugin_fgd_pack = {
    .name = "FGDPack",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .init = init,
    .fini = gs_fragkey_free,
    .pre_score = gs_fragkey_pre_score,
    .score = gs_fragkey_score,
    .normalize_score = gs_fragkey_normalize,
    .reserve = gs_fragkey_reserve,
};
