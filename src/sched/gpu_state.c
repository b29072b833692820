/*
 * gpu_state.c - NodeResourceTopology zones onto count-only nodes, and the
 * count-only note of diagnoses; see gpu_state.h.
 */
#include "sched/gpu_state.h"

#include <stdio.h>
#include <string.h>

int gs_gpu_state_apply_nrt(struct gs_node *n, const struct gs_nrt *nrt)
{
    int32_t numa[GS_NRT_MAX_ZONES], gpus[GS_NRT_MAX_ZONES];
    int nz = nrt ? nrt->nzones : 0;
    for (int z = 0; z < nz; z++) numa[z] = nrt->zones[z].numa, gpus[z] = nrt->zones[z].gpus;
    return gs_node_gpus_from_zones(n, numa, gpus, nz);
}

bool gs_gpu_state_count_only(const struct gs_node_info *n)
{
    return n->live && n->node && n->node->gpu_source == GS_GPU_SRC_COUNT && n->ngpus > 0;
}

/* The note for the cache as it is (empty when no node is count-only). */
static void compute_note(const struct gs_cache *c, char *buf, size_t len)
{
    size_t off = 0;
    int shown = 0, more = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < gs_cache_node_count(c); i++) {
        const struct gs_node_info *n = gs_cache_node((struct gs_cache *)c, i);
        if (!n || !gs_gpu_state_count_only(n)) continue;
        if (shown == 3) {
            more++;
            continue;
        }
        int w = snprintf(buf + off, len - off, "%snode %s", shown ? ", " : "", n->name);
        if (w < 0 || (size_t)w >= len - off) break;
        off += (size_t)w;
        shown++;
    }
    if (!shown) {
        buf[0] = '\0';
        return;
    }
    if (more) snprintf(buf + off, len - off, " and %d more node(s): %s", more, GS_GPU_STATE_COUNT_ONLY);
    else snprintf(buf + off, len - off, ": %s", GS_GPU_STATE_COUNT_ONLY);
}

size_t gs_gpu_state_note(const struct gs_cache *c, struct gs_gpu_state_memo *memo, const struct gs_pod *pod,
                         char *buf, size_t len)
{
    if (!len) return 0;
    buf[0] = '\0';
    if (!pod->demand.gpu_count) return 0;
    uint64_t epoch = gs_cache_epoch(c);
    if (memo && memo->valid && memo->epoch == epoch) {
        snprintf(buf, len, "%s", memo->note);
        return strlen(buf);
    }
    char note[sizeof memo->note];
    compute_note(c, note, sizeof note);
    if (memo) {
        memcpy(memo->note, note, sizeof note);
        memo->epoch = epoch;
        memo->valid = true;
    }
    snprintf(buf, len, "%s", note);
    return strlen(buf);
}

const char *gs_gpu_state_diagnosis(const struct gs_cache *c, struct gs_gpu_state_memo *memo, const struct gs_pod *pod,
                                   const char *msg, char *buf, size_t len)
{
    char note[sizeof memo->note];
    if (!gs_gpu_state_note(c, memo, pod, note, sizeof note)) return msg;
    snprintf(buf, len, "%s %s", msg, note);
    return buf;
}
