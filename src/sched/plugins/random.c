/*
 * random.c - the Random placement policy of the FGD paper's evaluation.
 *
 * PreScore draws one feasible node uniformly at random; Score gives it the
 * maximum and every other node 0. A sharing pod lands on a random GPU among
 * those with enough free milli ("-gpusel random"). Every draw comes from the
 * cycle's seed, so a run is reproducible.
 */
#include "sched/frag.h"
#include "sched/plugin.h"

#include <stdlib.h>

struct rnd {
    int32_t chosen; /* node index picked by PreScore, -1 none */
};

static int rnd_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    (void)h, (void)args, (void)d;
    struct rnd *r = calloc(1, sizeof *r);
    if (!r) return GS_ENOMEM;
    r->chosen = -1;
    *state = r;
    return 0;
}

static void rnd_fini(void *state) { free(state); }

static struct gs_status rnd_pre_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                      struct gs_node_info *const *nodes, size_t n)
{
    (void)pod;
    struct rnd *r = state;
    uint64_t s = cs->seed ^ 0x52414e444f4dULL;
    r->chosen = n ? nodes[gs_rand_below(&s, n)]->idx : -1;
    return (struct gs_status){0};
}

static void rnd_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)cs, (void)pod;
    const struct rnd *r = state;
    for (size_t i = 0; i < n; i++) scores[i] = nodes[i]->idx == r->chosen ? GS_MAX_SCORE : 0;
}

static struct gs_status rnd_reserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                    struct gs_node_info *node, struct gs_assignment *a)
{
    (void)state;
    const struct gs_demand *d = &pod->demand;
    if (a->gpu_mask || d->gpu_count <= 0) return (struct gs_status){0};
    uint64_t s = cs->seed ^ 0x475055534cULL;
    a->gpu_mask = gs_gpusel_random(node, d->gpu_count, d->gpu_milli, &s);
    a->milli = d->gpu_milli;
    a->mem_mib = d->gpu_mem_mib;
    if (!a->gpu_mask) return gs_status_make(GS_UNSCHEDULABLE, "no GPU on node %s fits %d x %d milli", node->name,
                                            d->gpu_count, d->gpu_milli);
    return (struct gs_status){0};
}

const struct gs_plugin gs_plugin_random = {
    .name = "Random",
    .init = rnd_init,
    .fini = rnd_fini,
    .pre_score = rnd_pre_score,
    .score = rnd_score,
    .reserve = rnd_reserve,
};
