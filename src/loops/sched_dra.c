/*
 * sched_dra.c - the scheduler loop's claim status writes; see sched_dra.h.
 */
#include "loops/sched_dra.h"

#include "core/log.h"
#include "loops/claims.h" /* gs_dra_claim_status_fn, gs_dra_claim_undo_fn */
#include "sched/cache_dra.h"

#include <stdlib.h>
#include <time.h>

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void gs_sched_dra_undo(struct gs_source *src, struct gs_cache *cache, struct gs_dra_claim_write *w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (w[i].written) {
            int err = gs_source_mutate(src, w[i].store_key, "status", gs_dra_claim_undo_fn, &w[i], NULL, NULL);
            if (err && err != GS_ENOENT)
                gs_log(GS_LOG_WARN, "scheduler: cannot undo a claim's reservation", "claim", w[i].claim_key, "error",
                       gs_strerror(err), NULL);
        }
        if (w[i].allocation) gs_cache_dra_unassume(cache, w[i].claim_key);
    }
    gs_dra_claim_writes_free(w, n);
}

void gs_sched_dra_done(struct gs_dra_claim_write *w, size_t n) { gs_dra_claim_writes_free(w, n); }

int gs_sched_dra_write(struct gs_source *src, struct gs_framework *fw, struct gs_cache *cache, const char *pod_key,
                       bool write, struct gs_dra_claim_write **w, size_t *n)
{
    *w = NULL;
    *n = 0;
    void *st = gs_framework_plugin_state(fw, GS_DRA_PLUGIN_NAME);
    if (!st) return 0;
    int err = gs_dra_plugin_take(st, pod_key, wall_s(), w, n);
    if (err || !write) return err;
    for (size_t i = 0; i < *n; i++) {
        err = gs_source_mutate(src, (*w)[i].store_key, "status", gs_dra_claim_status_fn, &(*w)[i], NULL, NULL);
        if (err) {
            gs_log(GS_LOG_INFO, "scheduler: claim status not written, pod queued again", "pod", pod_key, "claim",
                   (*w)[i].claim_key, "error", gs_strerror(err), NULL);
            gs_sched_dra_undo(src, cache, *w, *n);
            *w = NULL;
            *n = 0;
            return err;
        }
        (*w)[i].written = true;
    }
    return 0;
}
