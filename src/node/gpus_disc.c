/*
 * gpus_disc.c - discovery inventory and health into the node layer
 * (gpus_disc.h).
 */
#include "node/gpus_disc.h"

#include "core/error.h"
#include "core/log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

void gs_node_gpus_from_inventory(struct gs_node_gpus *g, const struct gs_inventory *inv, int replicas)
{
    memset(g, 0, sizeof *g);
    g->n = inv->n_gpus < GS_NODE_MAX_GPUS ? inv->n_gpus : GS_NODE_MAX_GPUS;
    g->replicas = replicas;
    for (int i = 0; i < g->n; i++) {
        const struct gs_disc_gpu *s = &inv->gpus[i];
        struct gs_node_gpu *d = &g->gpu[i];
        snprintf(d->uuid, sizeof d->uuid, "%s", s->uuid);
        d->index = s->index;
        d->minor = s->minor >= 0 ? s->minor : s->index;
        d->numa = s->numa_node;
        d->healthy = true;
        for (int j = 0; j < g->n; j++) g->nvlink[i][j] = s->nvlink[j];
    }
    gs_node_gpus_finish(g);
}

static void on_change(const struct gs_health_change *c, void *arg)
{
    struct gs_node_health *nh = arg;
    char gpu[16];
    snprintf(gpu, sizeof gpu, "%d", c->gpu);
    gs_log(c->to == GS_HEALTH_HEALTHY ? GS_LOG_INFO : GS_LOG_WARN, "GPU health changed", "gpu", gpu, "to",
           gs_health_state_name(c->to), "reason", c->reason ? c->reason : "", NULL);
    gs_dp_set_health(nh->dp, c->gpu, c->to == GS_HEALTH_HEALTHY);
}

int gs_node_health_open(struct gs_node_health *nh, struct gs_disc *d, const struct gs_health_config *cfg, int n_gpus,
                        struct gs_dp *dp)
{
    memset(nh, 0, sizeof *nh);
    nh->disc = d, nh->dp = dp, nh->n_gpus = n_gpus;
    struct gs_health_config def;
    if (!cfg) gs_health_config_default(&def), cfg = &def;
    int rc = gs_health_create(cfg, n_gpus, &nh->health);
    if (!rc) rc = gs_health_subscribe(nh->health, on_change, nh);
    return rc;
}

void gs_node_health_close(struct gs_node_health *nh)
{
    gs_health_free(nh->health);
    nh->health = NULL;
}

int gs_node_health_poll(void *ud, struct gs_dp *dp, int timeout_ms)
{
    struct gs_node_health *nh = ud;
    (void)dp;
    int64_t now = gs_clock_now(nh->disc->clock);
    if (nh->disc->ops->sample && now >= nh->next_sample_ns) {
        for (int i = 0; i < nh->n_gpus; i++) {
            struct gs_sample s;
            bool answering = nh->disc->ops->sample(nh->disc, i, &s) == 0;
            gs_health_observe(nh->health, i, answering, now);
        }
        nh->next_sample_ns = now + GS_NS_PER_SEC;
    }
    struct gs_event ev;
    int rc = nh->disc->ops->poll_event ? nh->disc->ops->poll_event(nh->disc, timeout_ms, &ev) : GS_EUNSUPPORTED;
    if (rc == GS_ETIMEDOUT) return 0;
    if (rc) {
        /* No event source, or a backend hiccup: not a reason to stop serving. */
        struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        return 0;
    }
    gs_health_event(nh->health, &ev, gs_clock_now(nh->disc->clock));
    return 0;
}
