/*
 * health.c - the per-GPU health machine (health.h).
 *
 * One mutex guards every GPU's state and the subscriber list. An operation
 * records the transitions it makes in a small local list while holding the
 * lock, then calls the subscribers after releasing it: a callback may call
 * back into the machine (gs_health_get) without deadlocking, and transitions
 * reach subscribers in the order they happened.
 */
#include "discovery/health.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SUBS 16

/*--- Configuration ---*/

static const unsigned app_xids[] = {13, 31, 43, 45, 68, 109};

void gs_health_config_default(struct gs_health_config *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < GS_XID_MAX; i++) c->xid_critical[i] = true;
    for (size_t i = 0; i < sizeof app_xids / sizeof app_xids[0]; i++) c->xid_critical[app_xids[i]] = false;
    c->other_xid_critical = true;
    c->dbe_critical = true;
    c->recovery_ns = 60 * GS_NS_PER_SEC;
}

/* Marks each Xid of "79,48,61-64" in marks. */
static int each_xid(const char *list, bool *marks)
{
    const char *p = list;
    if (!*p) return GS_EINVAL;
    while (*p) {
        char *end;
        if (!isdigit((unsigned char)*p)) return GS_EINVAL;
        errno = 0;
        unsigned long a = strtoul(p, &end, 10), b = a;
        if (*end == '-') {
            p = end + 1;
            if (!isdigit((unsigned char)*p)) return GS_EINVAL;
            b = strtoul(p, &end, 10);
        }
        if (errno || a == 0 || b < a || b >= GS_XID_MAX) return GS_EINVAL;
        for (unsigned long x = a; x <= b; x++) marks[x] = true;
        p = end;
        if (*p == ',' && p[1]) p++;
        else if (*p) return GS_EINVAL;
    }
    return 0;
}

int gs_health_config_set_critical(struct gs_health_config *c, const char *list)
{
    bool marks[GS_XID_MAX] = {0};
    if (!strcmp(list, "all")) {
        for (size_t i = 0; i < GS_XID_MAX; i++) c->xid_critical[i] = true;
        c->other_xid_critical = true;
        return 0;
    }
    if (strcmp(list, "none") && each_xid(list, marks)) return GS_EINVAL;
    memcpy(c->xid_critical, marks, sizeof marks);
    c->other_xid_critical = false;
    return 0;
}

int gs_health_config_set_ignored(struct gs_health_config *c, const char *list)
{
    bool marks[GS_XID_MAX] = {0};
    if (each_xid(list, marks)) return GS_EINVAL;
    for (size_t i = 0; i < GS_XID_MAX; i++)
        if (marks[i]) c->xid_critical[i] = false;
    return 0;
}

bool gs_health_xid_critical(const struct gs_health_config *c, uint64_t xid)
{
    return xid < GS_XID_MAX ? c->xid_critical[xid] : c->other_xid_critical;
}

const char *gs_xid_description(uint64_t xid)
{
    static const struct {
        unsigned xid;
        const char *what;
    } known[] = {
        {13, "Graphics Engine Exception"},      {31, "GPU memory page fault"},
        {32, "Invalid or corrupted push buffer stream"}, {43, "GPU stopped processing"},
        {45, "Preemptive cleanup, due to previous errors"}, {48, "Double Bit ECC Error"},
        {61, "Internal micro-controller breakpoint/warning"}, {62, "Internal micro-controller halt"},
        {63, "ECC page retirement or row remapping recording event"},
        {64, "ECC page retirement or row remapper recording failure"}, {68, "NVDEC0 Exception"},
        {74, "NVLINK Error"},                   {79, "GPU has fallen off the bus"},
        {92, "High single-bit ECC error rate"}, {94, "Contained ECC error"},
        {95, "Uncontained ECC error"},          {109, "Context Switch Timeout Error"},
        {119, "GSP RPC timeout"},               {120, "GSP error"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].xid == xid) return known[i].what;
    return "";
}

const char *gs_health_state_name(enum gs_health_state s)
{
    return s == GS_HEALTH_HEALTHY ? "Healthy" : "Unhealthy";
}

/*--- The machine ---*/

struct sub {
    gs_health_cb cb;
    void *arg;
};

struct gs_health {
    pthread_mutex_t mu;
    struct gs_health_config cfg;
    int n;
    struct gs_health_gpu gpu[GS_DISC_MAX_GPUS];
    struct sub subs[MAX_SUBS];
    int nsubs;
};

/* Transitions made under the lock, delivered after it. */
struct pending {
    struct gs_health_change c[GS_DISC_MAX_GPUS];
    char reason[GS_DISC_MAX_GPUS][160];
    int n;
    struct sub subs[MAX_SUBS];
    int nsubs;
};

int gs_health_create(const struct gs_health_config *c, int n_gpus, struct gs_health **out)
{
    if (n_gpus < 0 || n_gpus > GS_DISC_MAX_GPUS) return GS_EINVAL;
    struct gs_health *h = calloc(1, sizeof *h);
    if (!h) return GS_ENOMEM;
    if (c) h->cfg = *c;
    else gs_health_config_default(&h->cfg);
    h->n = n_gpus;
    for (int i = 0; i < n_gpus; i++) h->gpu[i].answering = true;
    pthread_mutex_init(&h->mu, NULL);
    *out = h;
    return 0;
}

void gs_health_free(struct gs_health *h)
{
    if (!h) return;
    pthread_mutex_destroy(&h->mu);
    free(h);
}

int gs_health_subscribe(struct gs_health *h, gs_health_cb cb, void *arg)
{
    pthread_mutex_lock(&h->mu);
    int rc = GS_ERANGE;
    if (h->nsubs < MAX_SUBS) {
        h->subs[h->nsubs++] = (struct sub){cb, arg};
        rc = 0;
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static void transition(struct gs_health *h, struct pending *p, int i, enum gs_health_state to, int64_t now,
                       const char *reason)
{
    struct gs_health_gpu *g = &h->gpu[i];
    enum gs_health_state from = g->state;
    g->state = to;
    g->since_ns = now;
    snprintf(g->reason, sizeof g->reason, "%s", reason);
    if (p->n < GS_DISC_MAX_GPUS) {
        snprintf(p->reason[p->n], sizeof p->reason[0], "%s", reason);
        p->c[p->n] = (struct gs_health_change){i, from, to, p->reason[p->n], now};
        p->n++;
    }
}

/* Marks GPU i unhealthy for `reason` (or refreshes the quiet window if it already is). */
static void critical(struct gs_health *h, struct pending *p, int i, int64_t now, const char *reason)
{
    h->gpu[i].last_critical_ns = now;
    if (h->gpu[i].state == GS_HEALTH_HEALTHY) transition(h, p, i, GS_HEALTH_UNHEALTHY, now, reason);
}

static void apply(struct gs_health *h, struct pending *p, int i, const struct gs_event *ev, int64_t now)
{
    char reason[160];
    struct gs_health_gpu *g = &h->gpu[i];
    switch (ev->kind) {
    case GS_EV_XID: {
        g->last_xid = ev->value;
        g->xid_count++;
        if (!gs_health_xid_critical(&h->cfg, ev->value)) return;
        const char *what = gs_xid_description(ev->value);
        snprintf(reason, sizeof reason, "Xid %llu%s%s", (unsigned long long)ev->value, *what ? ": " : "", what);
        critical(h, p, i, now, reason);
        return;
    }
    case GS_EV_ECC_DBE:
        if (h->cfg.dbe_critical) critical(h, p, i, now, "double-bit ECC error");
        return;
    case GS_EV_LOST:
        g->answering = false;
        critical(h, p, i, now, "GPU is not answering queries");
        return;
    }
}

static void deliver(struct gs_health *h, struct pending *p)
{
    p->nsubs = h->nsubs;
    memcpy(p->subs, h->subs, sizeof p->subs);
    pthread_mutex_unlock(&h->mu);
    for (int k = 0; k < p->n; k++)
        for (int s = 0; s < p->nsubs; s++) p->subs[s].cb(&p->c[k], p->subs[s].arg);
}

int gs_health_event(struct gs_health *h, const struct gs_event *ev, int64_t now)
{
    if (ev->gpu < -1 || ev->gpu >= h->n) return GS_EINVAL;
    struct pending p;
    p.n = 0;
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < h->n; i++)
        if (ev->gpu == -1 || ev->gpu == i) apply(h, &p, i, ev, now);
    deliver(h, &p);
    return 0;
}

int gs_health_observe(struct gs_health *h, int gpu, bool answering, int64_t now)
{
    if (gpu < 0 || gpu >= h->n) return GS_EINVAL;
    struct pending p;
    p.n = 0;
    pthread_mutex_lock(&h->mu);
    struct gs_health_gpu *g = &h->gpu[gpu];
    if (!answering) {
        g->answering = false;
        critical(h, &p, gpu, now, "GPU is not answering queries");
    } else {
        g->answering = true;
        if (g->state == GS_HEALTH_UNHEALTHY && h->cfg.recovery_ns >= 0 && now - g->last_critical_ns >= h->cfg.recovery_ns) {
            char reason[160];
            snprintf(reason, sizeof reason, "recovered: answering, no critical event for %llds (was: %.80s)",
                     (long long)(h->cfg.recovery_ns / GS_NS_PER_SEC), g->reason);
            transition(h, &p, gpu, GS_HEALTH_HEALTHY, now, reason);
        }
    }
    deliver(h, &p);
    return 0;
}

int gs_health_get(struct gs_health *h, int gpu, struct gs_health_gpu *out)
{
    if (gpu < 0 || gpu >= h->n) return GS_EINVAL;
    pthread_mutex_lock(&h->mu);
    *out = h->gpu[gpu];
    pthread_mutex_unlock(&h->mu);
    return 0;
}

uint64_t gs_health_unhealthy_mask(struct gs_health *h)
{
    uint64_t m = 0;
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < h->n; i++)
        if (h->gpu[i].state == GS_HEALTH_UNHEALTHY) m |= 1ULL << i;
    pthread_mutex_unlock(&h->mu);
    return m;
}
