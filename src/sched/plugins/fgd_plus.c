/*
 * fgd_plus.c - FGDPlus: fragmentation gradient descent with a bucket width
 * that depends on the pod's kind (our policy; compared with FGD on every
 * openb variant in bench/RESULTS.md, "Every policy on every openb variant").
 *
 * FGD scores int(sigmoid(dF / 1000) * 100) and sends ties to the first node
 * in name order. FGDPlus keeps that for sharing pods (one GPU, < 1000
 * milli) and widens the bucket to dF / 4000 for whole-GPU and CPU-only pods:
 * more nodes count as equal and the first-name order, itself a good packing
 * order, decides among them. A sharing pod takes the GPU with the smallest
 * dF, then the tightest fit; whole GPUs are the best-fit ones. It uses only
 * the pod being placed, the cluster state and the target workload FGD gets
 * (no knowledge of later pods).
 *
 * Measured (FGD experiment, alloc % at 100% arrived, mean of seeds 42-45,
 * on a loaded machine; FGD in brackets) while choosing the widths:
 *  - FGDPack's key (dF / 2000, busy node first) on gpuspec20: 94.63 (94.68);
 *  - extra tie-breaks after FGDPack's key on gpuspec20: most-used GPUs
 *    88.55, CPU use 94.22, exact dF 94.11 - all worse;
 *  - one width for every pod, no busy-node preference, gpuspec20: /1000 is
 *    FGD, /4000 95.13, /8000 94.98; with the busy-node preference /4000
 *    94.80, /8000 94.86, /16000 94.68;
 *  - the same on gpushare40: /4000 93.69, /8000 93.64 (93.91), and /4000
 *    for whole GPUs with FGDPack's key for sharing pods 93.70: sharing pods
 *    want FGD's narrow bucket, hence the split (gpushare40 93.92);
 *  - the split on the default trace: 95.18 (95.21), on gpuspec20 95.04;
 *  - the split plus FGDPack's key for CPU-only pods: cpu100 95.23 (95.16),
 *    default 95.18 - no clear gain, not kept.
 * The target of +0.3 over FGD on every variant is not met; see RESULTS.
 *
 * The key is mapped by NormalizeScore so the best node gets 100 and every
 * other node at most 99: with one score plugin the argmax is exactly the
 * best key. Keys are remembered per (CPU, milli, GPU count) request and
 * node, with the node generation and the model stamp they were computed at,
 * as FGD does: a key depends on nothing else, and one placement changes one
 * node (sched/fragkey.c, shared with FGDPack; this file is the key).
 */
#include "sched/fragkey.h"

#include <math.h>
#include <stdbool.h>

/* Key of placing the pod on nd (F from f0 to f1): larger is better. A
 * sharing pod keeps FGD's bucket (dF / 1000); a whole-GPU or CPU-only pod
 * gets a bucket four times as wide. Ties go to the first node name. */
static int64_t key_of(double f0, double f1, const struct gs_node_info *nd, bool share)
{
    (void)nd;
    return (int64_t)(1.0 / (1.0 + exp(-(f0 - f1) / (share ? 1000.0 : 4000.0))) * GS_MAX_SCORE);
}

static int init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    return gs_fragkey_new(h, args, key_of, state, d);
}

const struct gs_plugin gs_plugin_fgd_plus = {
    .name = "FGDPlus",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .init = init,
    .fini = gs_fragkey_free,
    .pre_score = gs_fragkey_pre_score,
    .score = gs_fragkey_score,
    .normalize_score = gs_fragkey_normalize,
    .reserve = gs_fragkey_reserve,
};
