/*
 * migmanager.c - drain-then-repartition of a node's GPUs; see migmanager.h.
 *
 * The manager keeps one piece of state: which layout it is driving towards
 * and since when, so the drain deadline survives the state machine's retries
 * (each retry is one gs_migmgr_step) and restarts only for a new layout.
 */
#include "govern/migmanager.h"
#include "govern/validators.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- Mock backend ---*/

static int mock_apply(struct gs_mig_backend *b, int gpu, const struct gs_mig_layout *l, char *err, size_t errlen)
{
    char text[160];
    gs_mig_layout_text(l, text, sizeof text);
    return gs_disc_mock_set_mig(b->disc, gpu, text, err, errlen);
}

int gs_mig_backend_open(struct gs_disc *d, struct gs_mig_backend *b)
{
    memset(b, 0, sizeof *b);
    b->disc = d;
    if (d && d->ops && !strcmp(d->ops->name, "mock")) {
        b->name = "mock";
        b->apply = mock_apply;
        return 0;
    }
    if (d && d->ops && !strcmp(d->ops->name, "nvml")) return gs_mig_backend_open_nvml(d, NULL, b);
    return GS_EUNSUPPORTED;
}

void gs_mig_backend_close(struct gs_mig_backend *b)
{
    if (b && b->close) b->close(b);
    if (b) b->close = NULL;
}

/*--- Manager ---*/

void gs_migmgr_init(struct gs_migmgr *m) { memset(m, 0, sizeof *m); }

static void busy_list(const struct gs_mig_step_in *in, uint64_t waiting, char *buf, size_t len)
{
    int w = 0;
    buf[0] = 0;
    for (int i = 0; i < 64 && (size_t)w < len; i++)
        if (waiting >> i & 1)
            w += snprintf(buf + w, len - w, "%sGPU %d (%s)", w ? ", " : "", i,
                          in->busy_pods && in->busy_pods[i] ? in->busy_pods[i] : "a pod");
}

int gs_migmgr_step(struct gs_migmgr *m, const struct gs_mig_step_in *in, bool *changed, char *msg, size_t len)
{
    *changed = false;
    char want[128], target[256];
    gs_mig_layout_text(in->want, want, sizeof want);
    snprintf(target, sizeof target, "%s=%s", in->want->name, want);
    if (strcmp(target, m->target)) {
        snprintf(m->target, sizeof m->target, "%s", target);
        m->drain_started_ns = in->now;
    }
    struct gs_inventory *inv = malloc(sizeof *inv);
    if (!inv) return GS_ENOMEM;
    int err = gs_disc_inventory(in->backend->disc, inv);
    if (err) snprintf(msg, len, "cannot list the node's GPUs: %s", gs_strerror(err));
    uint64_t waiting = 0;
    int done = 0;
    for (int i = 0; !err && i < inv->n_gpus; i++) {
        const struct gs_disc_gpu *g = &inv->gpus[i];
        if (!g->mig_capable || gs_gpu_has_layout(g, in->want)) continue;
        if (in->busy >> i & 1) {
            waiting |= 1ull << i;
            continue;
        }
        char why[200] = "";
        err = in->backend->apply(in->backend, i, in->want, why, sizeof why);
        if (err) snprintf(msg, len, "cannot apply layout %s to GPU %d through %s: %s", in->want->name, g->index,
                          in->backend->name, why[0] ? why : gs_strerror(err));
        else done++, m->gpus_applied++, *changed = true;
    }
    free(inv);
    if (err) return err;
    if (!waiting) {
        snprintf(msg, len, "layout %s (%s) in place%s", in->want->name, want[0] ? want : "MIG off",
                 done ? "; GPUs re-partitioned" : "");
        return 0;
    }
    char pods[600];
    busy_list(in, waiting, pods, sizeof pods);
    int64_t left = m->drain_started_ns + in->drain_timeout_ns - in->now;
    if (left > 0) {
        snprintf(msg, len, "draining for layout %s: waiting for pods to finish on %s (deadline in %.0fs)",
                 in->want->name, pods, (double)left / 1e9);
        return GS_EBUSY;
    }
    m->drain_timeouts++;
    snprintf(msg, len, "drain deadline (%.0fs) passed for layout %s: %s still in use; delete those pods or raise "
             "migManager.drainTimeoutSeconds", (double)in->drain_timeout_ns / 1e9, in->want->name, pods);
    return GS_ETIMEDOUT;
}
