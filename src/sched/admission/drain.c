/*
 * drain.c - the whole-node drain planner (see drain.h): per gang pod, the
 * node whose k-th soonest-free GPU frees first, GPUs booked as it goes.
 */
#include "sched/admission/drain.h"

#include <string.h>

#define MAX_GPUS 64 /* GPUs per node the planner models */

/* The time pod's GPUs are all free on node n (the gpus-th smallest end), or
 * GS_DRAIN_NEVER; *spare: GPUs beyond the pod's that are free by then. */
static int64_t ready_at(const struct gs__drain_node *nd, const struct gs__drain_pod *pod, int32_t *spare)
{
    int32_t ng = nd->ngpus < MAX_GPUS ? nd->ngpus : MAX_GPUS;
    if (!nd->usable || pod->gpus > ng) return GS_DRAIN_NEVER;
    if (pod->models && (nd->model < 0 || nd->model >= 64 || !(pod->models >> nd->model & 1))) return GS_DRAIN_NEVER;
    int64_t e[MAX_GPUS];
    memcpy(e, nd->gend, (size_t)ng * sizeof *e);
    for (int32_t i = 1; i < ng; i++) /* insertion sort: a node has a handful of GPUs */
        for (int32_t j = i; j > 0 && e[j - 1] > e[j]; j--) {
            int64_t t = e[j];
            e[j] = e[j - 1];
            e[j - 1] = t;
        }
    int64_t t = e[pod->gpus - 1];
    int32_t k = 0;
    for (int32_t i = 0; i < ng; i++) k += e[i] <= t;
    *spare = k - pod->gpus;
    return t;
}

/* Books the pod's GPUs on nd: the soonest-free ones. */
static void book(struct gs__drain_node *nd, const struct gs__drain_pod *pod)
{
    int32_t ng = nd->ngpus < MAX_GPUS ? nd->ngpus : MAX_GPUS;
    for (int32_t k = 0; k < pod->gpus; k++) {
        int32_t best = -1;
        for (int32_t g = 0; g < ng; g++)
            if (nd->gend[g] != GS_DRAIN_NEVER && (best < 0 || nd->gend[g] < nd->gend[best])) best = g;
        if (best >= 0) nd->gend[best] = GS_DRAIN_NEVER;
    }
}

int gs__drain_plan(struct gs__drain_node *nodes, size_t nnodes, const struct gs__drain_pod *pods, size_t npods,
                   int32_t *node_out, int64_t *start)
{
    *start = INT64_MIN;
    bool done[64] = {0};
    if (npods > 64) return 0; /* a gang that large is not planned */
    for (size_t i = 0; i < npods; i++) node_out[i] = -1;
    for (size_t round = 0; round < npods; round++) {
        size_t p = npods; /* the largest pod not yet placed */
        for (size_t i = 0; i < npods; i++)
            if (!done[i] && pods[i].gpus > 0 && (p == npods || pods[i].gpus > pods[p].gpus)) p = i;
        if (p == npods) break;
        done[p] = true;
        int64_t best_t = GS_DRAIN_NEVER;
        int32_t best = -1, best_spare = 0;
        bool best_mine = false;
        for (size_t n = 0; n < nnodes; n++) {
            int32_t spare = 0;
            int64_t t = ready_at(&nodes[n], &pods[p], &spare);
            if (t == GS_DRAIN_NEVER) continue;
            bool mine = false;
            for (size_t i = 0; i < npods && !mine; i++) mine = node_out[i] == (int32_t)n;
            bool better = best < 0 || t < best_t ||
                          (t == best_t && (mine != best_mine ? mine : spare < best_spare));
            if (better) best = (int32_t)n, best_t = t, best_spare = spare, best_mine = mine;
        }
        if (best < 0) return 0;
        book(&nodes[best], &pods[p]);
        node_out[p] = best;
        if (best_t > *start) *start = best_t;
    }
    return 1;
}
