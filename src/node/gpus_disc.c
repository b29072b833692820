/*
 * gpus_disc.c - discovery inventory and health into the node layer
 * (gpus_disc.h): the GPU table, the resources of a MIG strategy, health.
 */
#include "node/gpus_disc.h"

#include "core/error.h"
#include "core/log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* The node-layer entry of discovered GPU s, inventory position i. */
static void whole_gpu(struct gs_node_gpu *d, const struct gs_disc_gpu *s, int i)
{
    snprintf(d->uuid, sizeof d->uuid, "%s", s->uuid);
    d->index = s->index;
    d->minor = s->minor >= 0 ? s->minor : s->index;
    d->numa = s->numa_node;
    d->parent = i;
    d->healthy = true;
}

void gs_node_gpus_from_inventory(struct gs_node_gpus *g, const struct gs_inventory *inv, int replicas)
{
    memset(g, 0, sizeof *g);
    g->n = inv->n_gpus < GS_NODE_MAX_GPUS ? inv->n_gpus : GS_NODE_MAX_GPUS;
    g->replicas = replicas;
    for (int i = 0; i < g->n; i++) {
        const struct gs_disc_gpu *s = &inv->gpus[i];
        whole_gpu(&g->gpu[i], s, i);
        for (int j = 0; j < g->n; j++) g->nvlink[i][j] = s->nvlink[j];
    }
    gs_node_gpus_finish(g);
}

/*--- Resources under a MIG strategy ---*/

static int fail(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    snprintf(err, errlen, fmt, a, b);
    return GS_EINVAL;
}

static struct gs_node_resource *new_res(struct gs_node_resource *res, int *n, const char *name, int replicas)
{
    struct gs_node_resource *r = &res[(*n)++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->gpus.replicas = replicas;
    return r;
}

/* The GPUs without MIG mode (all of them when all_gpus), NVLink kept among them. */
static int whole_gpus(const struct gs_inventory *inv, bool all_gpus, struct gs_node_gpus *g)
{
    int slot_of[GS_DISC_MAX_GPUS];
    for (int i = 0; i < inv->n_gpus && i < GS_DISC_MAX_GPUS; i++) {
        const struct gs_disc_gpu *s = &inv->gpus[i];
        slot_of[i] = -1;
        if (!all_gpus && s->mig_enabled) continue;
        if (g->n == GS_NODE_MAX_GPUS) return GS_EINVAL;
        whole_gpu(&g->gpu[slot_of[i] = g->n++], s, i);
    }
    for (int i = 0; i < inv->n_gpus && i < GS_DISC_MAX_GPUS; i++)
        for (int j = 0; j < inv->n_gpus && j < GS_DISC_MAX_GPUS; j++)
            if (slot_of[i] >= 0 && slot_of[j] >= 0) g->nvlink[slot_of[i]][slot_of[j]] = inv->gpus[i].nvlink[j];
    return 0;
}

/* The MIG instances of profile (NULL: every profile), in GPU then instance order. */
static int mig_devices(const struct gs_inventory *inv, const char *profile, struct gs_node_gpus *g)
{
    g->mig = true;
    for (int i = 0; i < inv->n_gpus && i < GS_DISC_MAX_GPUS; i++) {
        const struct gs_disc_gpu *s = &inv->gpus[i];
        for (int k = 0; s->mig_enabled && k < s->n_mig && k < GS_DISC_MAX_MIG; k++) {
            if (profile && strcmp(s->mig[k].profile, profile)) continue;
            if (g->n == GS_NODE_MAX_GPUS) return GS_EINVAL;
            struct gs_node_gpu *d = &g->gpu[g->n++];
            snprintf(d->uuid, sizeof d->uuid, "%s", s->mig[k].uuid);
            d->index = s->index;
            d->minor = s->minor >= 0 ? s->minor : s->index;
            d->numa = s->numa_node;
            d->parent = i;
            d->healthy = true;
            d->gi = (int)s->mig[k].gi_id, d->ci = (int)s->mig[k].ci_id; /* capability nodes (migcaps.h) */
        }
    }
    return 0;
}

/* Distinct MIG profiles, sorted; GS_ERANGE past max. */
static int profiles(const struct gs_inventory *inv, char (*out)[32], int max)
{
    int n = 0;
    for (int i = 0; i < inv->n_gpus && i < GS_DISC_MAX_GPUS; i++) {
        const struct gs_disc_gpu *s = &inv->gpus[i];
        for (int k = 0; s->mig_enabled && k < s->n_mig && k < GS_DISC_MAX_MIG; k++) {
            const char *p = s->mig[k].profile;
            int j = 0;
            while (j < n && strcmp(out[j], p) < 0) j++;
            if (j < n && !strcmp(out[j], p)) continue;
            if (n == max) return GS_ERANGE;
            memmove(out[j + 1], out[j], (size_t)(n - j) * sizeof out[0]);
            snprintf(out[j], sizeof out[0], "%s", p);
            n++;
        }
    }
    return n;
}

static int mixed(const struct gs_inventory *inv, int replicas, struct gs_node_resource *res, int *n, char *err,
                 size_t errlen)
{
    char prof[GS_NODE_MAX_RESOURCES - 1][32];
    int np = profiles(inv, prof, GS_NODE_MAX_RESOURCES - 1);
    if (np < 0) {
        snprintf(err, errlen, "more than %d MIG profiles on the node", GS_NODE_MAX_RESOURCES - 1);
        return GS_EINVAL;
    }
    struct gs_node_resource *whole = new_res(res, n, "nvidia.com/gpu", replicas);
    whole_gpus(inv, false, &whole->gpus); /* fewer entries than the inventory: cannot overflow */
    if (!whole->gpus.n) (*n)--;           /* NVIDIA's plugin serves no empty resource either */
    for (int i = 0; i < np; i++) {
        char name[64];
        snprintf(name, sizeof name, "nvidia.com/mig-%.31s", prof[i]);
        struct gs_node_resource *r = new_res(res, n, name, replicas);
        snprintf(r->endpoint, sizeof r->endpoint, "gpusched-mig-%.31s.sock", prof[i]);
        if (mig_devices(inv, prof[i], &r->gpus)) return fail(err, errlen, "more than %s devices of %s", "64", name);
    }
    return 0;
}

static int single(const struct gs_inventory *inv, int replicas, struct gs_node_resource *res, int *n, char *err,
                  size_t errlen)
{
    const struct gs_disc_gpu *on = NULL, *off = NULL;
    for (int i = 0; i < inv->n_gpus && i < GS_DISC_MAX_GPUS; i++) {
        if (inv->gpus[i].mig_enabled) on = on ? on : &inv->gpus[i];
        else off = off ? off : &inv->gpus[i];
    }
    struct gs_node_resource *r = new_res(res, n, "nvidia.com/gpu", replicas);
    if (!on) return whole_gpus(inv, true, &r->gpus);
    char a[16], b[16];
    if (off) {
        snprintf(a, sizeof a, "%d", on->index), snprintf(b, sizeof b, "%d", off->index);
        return fail(err, errlen, "all GPUs must have the same MIG mode (GPU %s has MIG enabled, GPU %s has not)", a, b);
    }
    char prof[2][32];
    if (profiles(inv, prof, 1) < 0) {
        profiles(inv, prof, 2); /* the first two, sorted */
        return fail(err, errlen, "all MIG devices must have one MIG profile (found %s and %s)", prof[0], prof[1]);
    }
    if (mig_devices(inv, NULL, &r->gpus)) return fail(err, errlen, "more than %s MIG devices for %s", "64", r->name);
    return 0;
}

int gs_node_resources(const struct gs_inventory *inv, enum gs_mig_strategy s, int replicas,
                      struct gs_node_resource *res, char *err, size_t errlen)
{
    int n = 0, rc = 0;
    err[0] = 0;
    if (s == GS_MIG_MIXED) rc = mixed(inv, replicas, res, &n, err, errlen);
    else if (s == GS_MIG_SINGLE) rc = single(inv, replicas, res, &n, err, errlen);
    else gs_node_gpus_from_inventory(&new_res(res, &n, "nvidia.com/gpu", replicas)->gpus, inv, replicas);
    if (rc) return rc;
    if (!n) new_res(res, &n, "nvidia.com/gpu", replicas); /* nothing to offer: still say so to kubelet */
    for (int i = 0; i < n; i++) gs_node_gpus_finish(&res[i].gpus);
    return n;
}

/*--- Health ---*/

static void on_change(const struct gs_health_change *c, void *arg)
{
    struct gs_node_health *nh = arg;
    char gpu[16];
    snprintf(gpu, sizeof gpu, "%d", c->gpu);
    gs_log(c->to == GS_HEALTH_HEALTHY ? GS_LOG_INFO : GS_LOG_WARN, "GPU health changed", "gpu", gpu, "to",
           gs_health_state_name(c->to), "reason", c->reason ? c->reason : "", NULL);
    for (int i = 0; i < nh->n_dps; i++) gs_dp_set_parent_health(nh->dps[i], c->gpu, c->to == GS_HEALTH_HEALTHY);
}

int gs_node_health_open(struct gs_node_health *nh, struct gs_disc *d, const struct gs_health_config *cfg, int n_gpus,
                        struct gs_dp *const *dps, int n_dps)
{
    memset(nh, 0, sizeof *nh);
    nh->disc = d, nh->dps = dps, nh->n_dps = n_dps, nh->n_gpus = n_gpus;
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
