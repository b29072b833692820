/*
 * gpu_model.c - "GpuModel": the pod's acceptable GPU models
 * (gpusched.io/gpu-model "V100M16|V100M32") against the node's model.
 *
 * The node's model is interned by the cache when the node is added (from its
 * devices, else its nvidia.com/gpu.product label), so PreFilter turns the
 * pod's list into a bit mask of interned ids once per cycle and Filter is one
 * shift and test per node (read from the cache's hot records in the index
 * form): no string comparison in the loop. Ids past 63
 * (more than 64 distinct models) fall back to comparing names. A mismatch is
 * unresolvable: preemption cannot change a node's GPUs.
 */
#include "sched/plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_KEY "GpuModel"

enum { REJ_MODEL = 1 | GS_REJECT_UNRESOLVABLE };

struct gm {
    struct gs_cache *cache;
};

struct gm_cycle {
    uint64_t mask;
    bool overflow; /* some wanted model has an id >= 64 */
};

static int gm_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    (void)args, (void)d;
    struct gm *s = malloc(sizeof *s);
    if (!s) return GS_ENOMEM;
    s->cache = h->cache;
    *state = s;
    return 0;
}

static void gm_fini(void *state) { free(state); }

static void *gm_clone(const void *p)
{
    struct gm_cycle *c = malloc(sizeof *c);
    if (c) *c = *(const struct gm_cycle *)p;
    return c;
}

static struct gs_status gm_pre_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    struct gm *s = state;
    if (!pod->demand.ngpu_models) return gs_status_make(GS_SKIP, NULL);
    struct gm_cycle *c = calloc(1, sizeof *c);
    if (!c) return gs_status_make(GS_ERROR, "out of memory");
    for (size_t i = 0; i < pod->demand.ngpu_models; i++) {
        int32_t id = gs_cache_model_id(s->cache, pod->demand.gpu_models[i]);
        if (id < 0) continue;
        if (id < 64) c->mask |= 1ULL << id;
        else c->overflow = true;
    }
    if (gs_cycle_state_write(cs, STATE_KEY, c, gm_clone, free) != 0) return gs_status_make(GS_ERROR, "out of memory");
    return (struct gs_status){0};
}

static bool wanted_by_name(const struct gm *s, const struct gs_pod *pod, int32_t id)
{
    const char *name = gs_cache_model_name(s->cache, id);
    for (size_t i = 0; name && i < pod->demand.ngpu_models; i++)
        if (strcmp(pod->demand.gpu_models[i], name) == 0) return true;
    return false;
}

static void gm_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    const struct gm_cycle *c = gs_cycle_state_read(cs, STATE_KEY);
    if (!c) return; /* PreFilter did not run: nothing to enforce */
    const uint64_t mask = c->mask;
    for (size_t i = 0; i < n; i++) {
        int32_t id = nodes[i]->gpu_model;
        bool ok = id >= 0 && (id < 64 ? (mask >> id) & 1 : c->overflow && wanted_by_name(state, pod, id));
        if (!ok) reject[i] = REJ_MODEL;
    }
}

static void gm_filter_idx(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod, const int32_t *idx,
                          size_t n, uint8_t *reject)
{
    const struct gm *s = state;
    const struct gm_cycle *c = gs_cycle_state_read(cs, STATE_KEY);
    if (!c) return;
    const struct gs_node_hot *hot = gs_cache_hot(s->cache);
    const uint64_t mask = c->mask;
    for (size_t i = 0; i < n; i++) {
        int32_t id = hot[idx[i]].gpu_model;
        bool ok = id >= 0 && (id < 64 ? (mask >> id) & 1 : c->overflow && wanted_by_name(s, pod, id));
        reject[i] = ok ? 0 : REJ_MODEL;
    }
}

static int gm_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)state, (void)code;
    int off = snprintf(buf, len, "GPU model mismatch (want ");
    for (size_t i = 0; i < pod->demand.ngpu_models; i++) {
        size_t at = (size_t)off < len ? (size_t)off : len;
        off += snprintf(buf + at, len - at, "%s%s", i ? "|" : "", pod->demand.gpu_models[i]);
    }
    size_t at = (size_t)off < len ? (size_t)off : len;
    off += snprintf(buf + at, len - at, ")");
    return off;
}

const struct gs_plugin gs_plugin_gpu_model = {
    .name = "GpuModel",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .init = gm_init,
    .fini = gm_fini,
    .pre_filter = gm_pre_filter,
    .filter = gm_filter,
    .filter_idx = gm_filter_idx,
    .reason = gm_reason,
};
