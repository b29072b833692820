/*
 * exporter.c - DCGM-Exporter-compatible metrics (exporter.h).
 *
 * Threads: the collector thread (or a test calling gs_exporter_collect) owns
 * the samples and renders; `mu` guards only what other threads touch - the
 * current page, the pod labels and the counters - so a scrape holds it just
 * long enough to take a reference. Label text that never changes (gpu, UUID,
 * pci_bus_id, device, modelName, Hostname, driver) is escaped once at create.
 */
#include "discovery/exporter.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LABEL_MAX 128  /* longest label value we emit, in bytes */
#define WAIT_SLICE_MS 100

/*--- MIG instances ---*/

#define MAX_INST (GS_DISC_MAX_GPUS * GS_DISC_MAX_MIG)

struct inst {
    int gpu;              /* inventory slot of its GPU (fixed labels) */
    char uuid[96];
    char profile[32];
    unsigned gi;
    uint64_t memory_mib;
};

struct inst_pod {
    char uuid[96];
    char *labels;         /* ",pod=...,namespace=...,container=..." */
};

/*--- The metric table (dcgm-exporter's default-counters.csv, in its order) ---*/

enum field {
    F_SM_CLOCK, F_MEM_CLOCK, F_MEM_TEMP, F_GPU_TEMP, F_POWER, F_ENERGY, F_PCIE_REPLAY, F_GPU_UTIL,
    F_MEM_COPY_UTIL, F_ENC_UTIL, F_DEC_UTIL, F_XID, F_FB_FREE, F_FB_USED, F_FB_RESERVED, F_SBE_VOL,
    F_DBE_VOL, F_SBE_AGG, F_DBE_AGG, F_NVLINK_BW, F_REMAP_UNC, F_REMAP_COR, F_REMAP_FAIL, F_HEALTHY,
};

static const struct metric {
    enum field f;
    unsigned need; /* GS_SF_* bit the sample must have; 0 = always */
    const char *name, *type, *help;
} metrics[] = {
    {F_SM_CLOCK, GS_SF_CLOCKS, "DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."},
    {F_MEM_CLOCK, GS_SF_CLOCKS, "DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."},
    {F_MEM_TEMP, GS_SF_MEMTEMP, "DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."},
    {F_GPU_TEMP, GS_SF_TEMP, "DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."},
    {F_POWER, GS_SF_POWER, "DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."},
    {F_ENERGY, GS_SF_ENERGY, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
     "Total energy consumption since boot (in mJ)."},
    {F_PCIE_REPLAY, GS_SF_PCIE_REPLAY, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."},
    {F_GPU_UTIL, GS_SF_UTIL, "DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."},
    {F_MEM_COPY_UTIL, GS_SF_UTIL, "DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."},
    {F_ENC_UTIL, GS_SF_ENCDEC, "DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."},
    {F_DEC_UTIL, GS_SF_ENCDEC, "DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."},
    {F_XID, 0, "DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."},
    {F_FB_FREE, GS_SF_MEMORY, "DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."},
    {F_FB_USED, GS_SF_MEMORY, "DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."},
    {F_FB_RESERVED, GS_SF_MEMORY, "DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."},
    {F_SBE_VOL, GS_SF_ECC, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."},
    {F_DBE_VOL, GS_SF_ECC, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."},
    {F_SBE_AGG, GS_SF_ECC, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Total number of single-bit persistent ECC errors."},
    {F_DBE_AGG, GS_SF_ECC, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Total number of double-bit persistent ECC errors."},
    {F_NVLINK_BW, GS_SF_NVLINK_BW, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
     "Total number of NVLink bandwidth counters for all lanes."},
    {F_REMAP_UNC, GS_SF_REMAP, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
     "Number of remapped rows for uncorrectable errors"},
    {F_REMAP_COR, GS_SF_REMAP, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
     "Number of remapped rows for correctable errors"},
    {F_REMAP_FAIL, GS_SF_REMAP, "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"},
    {F_HEALTHY, 0, "gpusched_gpu_healthy", "gauge", "1 if the GPU is Healthy, 0 if Unhealthy (gpusched health machine)."},
};

/*--- A growable text buffer ---*/

struct sb {
    char *p;
    size_t len, cap;
    bool oom;
};

static void sb_printf(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sb *b, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !b->oom; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap <= b->len + (size_t)n) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np, b->cap = cap;
    }
}

/* Appends value escaped for a Prometheus label (\\, \", \n), cut at LABEL_MAX bytes. */
static void sb_label(struct sb *b, const char *name, const char *value, bool comma)
{
    char esc[2 * LABEL_MAX + 1];
    size_t o = 0;
    for (size_t i = 0; value[i] && i < LABEL_MAX; i++) {
        char c = value[i];
        if (c == '\\' || c == '"') esc[o++] = '\\', esc[o++] = c;
        else if (c == '\n') esc[o++] = '\\', esc[o++] = 'n';
        else esc[o++] = c;
    }
    esc[o] = 0;
    sb_printf(b, "%s%s=\"%s\"", comma ? "," : "", name, esc);
}

/*--- The exporter ---*/

struct gs_exporter {
    struct gs_disc *d;
    struct gs_inventory inv;
    struct gs_exporter_config cfg;
    struct gs_health *health;
    struct gs_clock real;
    const struct gs_clock *clock;
    /* collector-owned */
    struct gs_sample sample[GS_DISC_MAX_GPUS];
    bool answering[GS_DISC_MAX_GPUS];
    char *labels[GS_DISC_MAX_GPUS]; /* fixed label text, escaped */
    /* guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *pod[GS_DISC_MAX_GPUS];    /* ",pod=...,namespace=...,container=..." or NULL */
    struct inst inst[MAX_INST];     /* MIG instances of the current layout */
    int n_inst;
    struct inst_pod ipod[MAX_INST]; /* pods holding MIG instances, by MIG UUID */
    int n_ipod;
    struct gs_metrics_text *text;
    uint64_t collections, sample_errors;
    int64_t last_ns, last_cost_ns;
    bool running, stop;
    pthread_t thread;
};

void gs_metrics_text_unref(struct gs_metrics_text *t)
{
    if (t && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0) free(t);
}

static int64_t now_ns(const struct gs_exporter *e)
{
    return gs_clock_now(e->clock);
}

static char *fixed_labels(const struct gs_exporter *e, const struct gs_disc_gpu *g)
{
    struct sb b = {0};
    char num[16], dev[32];
    snprintf(num, sizeof num, "%d", g->index);
    snprintf(dev, sizeof dev, "nvidia%d", g->minor >= 0 ? g->minor : g->index);
    sb_label(&b, "gpu", num, false);
    sb_label(&b, "UUID", g->uuid, true);
    sb_label(&b, "pci_bus_id", g->pci_bus_id, true);
    sb_label(&b, "device", dev, true);
    sb_label(&b, "modelName", g->name, true);
    if (!e->cfg.no_hostname) sb_label(&b, "Hostname", e->cfg.hostname ? e->cfg.hostname : e->inv.hostname, true);
    if (e->inv.driver_version[0]) sb_label(&b, "DCGM_FI_DRIVER_VERSION", e->inv.driver_version, true);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int gs_exporter_create(struct gs_disc *d, const struct gs_exporter_config *c, struct gs_exporter **out)
{
    struct gs_exporter *e = calloc(1, sizeof *e);
    if (!e) return GS_ENOMEM;
    e->d = d;
    if (c) e->cfg = *c;
    if (e->cfg.interval_ns <= 0) e->cfg.interval_ns = 30 * GS_NS_PER_SEC;
    gs_clock_init_real(&e->real);
    e->clock = d->clock ? d->clock : &e->real;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    int rc = gs_disc_inventory(d, &e->inv);
    if (!rc) rc = gs_health_create(e->cfg.health, e->inv.n_gpus, &e->health);
    for (int i = 0; !rc && i < e->inv.n_gpus; i++) {
        e->answering[i] = true;
        if (!(e->labels[i] = fixed_labels(e, &e->inv.gpus[i]))) rc = GS_ENOMEM;
    }
    if (!rc) gs_exporter_set_mig(e, &e->inv);
    if (rc) {
        gs_exporter_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

/*--- Collection ---*/

/* Feeds one event to the health machine. */
static void on_event(struct gs_exporter *e, const struct gs_event *ev)
{
    if (ev->gpu < -1 || ev->gpu >= e->inv.n_gpus) return;
    gs_health_event(e->health, ev, now_ns(e));
}

static void drain_events(struct gs_exporter *e)
{
    struct gs_event ev;
    if (!e->d->ops->poll_event) return;
    for (int k = 0; k < 1024 && e->d->ops->poll_event(e->d, 0, &ev) == 0; k++) on_event(e, &ev);
}

static void sample_all(struct gs_exporter *e)
{
    uint64_t errors = 0;
    int64_t t = now_ns(e);
    for (int i = 0; i < e->inv.n_gpus; i++) {
        int rc = e->d->ops->sample ? e->d->ops->sample(e->d, i, &e->sample[i]) : GS_EUNSUPPORTED;
        if (rc == GS_EUNSUPPORTED) { /* no metrics from this backend: not a health signal */
            memset(&e->sample[i], 0, sizeof e->sample[i]);
            continue;
        }
        e->answering[i] = rc == 0;
        errors += rc != 0;
        gs_health_observe(e->health, i, rc == 0, t);
    }
    pthread_mutex_lock(&e->mu);
    e->sample_errors += errors;
    pthread_mutex_unlock(&e->mu);
}

static uint64_t field_value(const struct gs_sample *s, enum field f, double *real, bool *is_real)
{
    *is_real = false;
    switch (f) {
    case F_SM_CLOCK: return s->sm_clock_mhz;
    case F_MEM_CLOCK: return s->mem_clock_mhz;
    case F_MEM_TEMP: return s->mem_temp_c;
    case F_GPU_TEMP: return s->temp_c;
    case F_POWER: *is_real = true, *real = s->power_w; return 0;
    case F_ENERGY: return s->energy_mj;
    case F_PCIE_REPLAY: return s->pcie_replay;
    case F_GPU_UTIL: return s->util_gpu;
    case F_MEM_COPY_UTIL: return s->util_mem;
    case F_ENC_UTIL: return s->util_enc;
    case F_DEC_UTIL: return s->util_dec;
    case F_FB_FREE: return s->fb_free_mib;
    case F_FB_USED: return s->fb_used_mib;
    case F_FB_RESERVED: return s->fb_reserved_mib;
    case F_SBE_VOL: return s->ecc_sbe_vol;
    case F_DBE_VOL: return s->ecc_dbe_vol;
    case F_SBE_AGG: return s->ecc_sbe_agg;
    case F_DBE_AGG: return s->ecc_dbe_agg;
    case F_NVLINK_BW: return s->nvlink_bw_total;
    case F_REMAP_UNC: return s->remap_uncorr;
    case F_REMAP_COR: return s->remap_corr;
    case F_REMAP_FAIL: return s->remap_failure;
    case F_XID:
    case F_HEALTHY: return 0;
    }
    return 0;
}

/* One series line of metric m for GPU i. Caller holds mu (pod labels). */
static void render_series(struct gs_exporter *e, struct sb *b, const struct metric *m, int i)
{
    const struct gs_sample *s = &e->sample[i];
    const char *pod = e->pod[i] ? e->pod[i] : "";
    if (m->f == F_XID || m->f == F_HEALTHY) {
        struct gs_health_gpu h;
        gs_health_get(e->health, i, &h);
        if (m->f == F_HEALTHY) {
            sb_printf(b, "%s{%s%s} %d\n", m->name, e->labels[i], pod, h.state == GS_HEALTH_HEALTHY);
            return;
        }
        char code[24];
        snprintf(code, sizeof code, "%llu", (unsigned long long)h.last_xid);
        sb_printf(b, "%s{%s", m->name, e->labels[i]);
        sb_label(b, "err_code", code, true);
        sb_label(b, "err_msg", h.last_xid ? gs_xid_description(h.last_xid) : "", true);
        sb_printf(b, "%s} %llu\n", pod, (unsigned long long)h.last_xid);
        return;
    }
    if (!e->answering[i] || (s->have & m->need) != m->need) return;
    double real;
    bool is_real;
    uint64_t v = field_value(s, m->f, &real, &is_real);
    if (is_real) sb_printf(b, "%s{%s%s} %.3f\n", m->name, e->labels[i], pod, real);
    else sb_printf(b, "%s{%s%s} %llu\n", m->name, e->labels[i], pod, (unsigned long long)v);
}

static const char *inst_pod(const struct gs_exporter *e, const char *uuid)
{
    for (int i = 0; i < e->n_ipod; i++)
        if (!strcmp(e->ipod[i].uuid, uuid)) return e->ipod[i].labels;
    return NULL;
}

/* Per MIG instance, as dcgm-exporter labels them (GPU_I_PROFILE, GPU_I_ID on
 * the parent GPU's labels), plus the MIG UUID and the pod holding it: which
 * pod has which instance, and what is free. Caller holds mu. */
static void render_mig(struct gs_exporter *e, struct sb *b)
{
    static const struct {
        const char *name, *help;
    } m[] = {
        {"gpusched_mig_instance_allocated", "1 when a pod holds the MIG instance (named by pod, namespace, container)."},
        {"gpusched_mig_instance_fb_total", "Framebuffer memory of the MIG instance (in MiB)."},
    };
    if (!e->n_inst) return;
    for (size_t k = 0; k < sizeof m / sizeof m[0]; k++) {
        sb_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", m[k].name, m[k].help, m[k].name);
        for (int i = 0; i < e->n_inst; i++) {
            const struct inst *in = &e->inst[i];
            const char *pod = inst_pod(e, in->uuid);
            char gi[16];
            snprintf(gi, sizeof gi, "%u", in->gi);
            sb_printf(b, "%s{%s", m[k].name, e->labels[in->gpu]);
            sb_label(b, "GPU_I_PROFILE", in->profile, true);
            sb_label(b, "GPU_I_ID", gi, true);
            sb_label(b, "mig_uuid", in->uuid, true);
            unsigned long long v = k == 0 ? pod != NULL : (unsigned long long)in->memory_mib;
            sb_printf(b, "%s} %llu\n", pod ? pod : "", v);
        }
    }
}

static void render_self(struct gs_exporter *e, struct sb *b)
{
    sb_printf(b, "# HELP gpusched_exporter_collections_total Collections done since start.\n"
                 "# TYPE gpusched_exporter_collections_total counter\n"
                 "gpusched_exporter_collections_total %llu\n"
                 "# HELP gpusched_exporter_sample_errors_total GPU queries that failed.\n"
                 "# TYPE gpusched_exporter_sample_errors_total counter\n"
                 "gpusched_exporter_sample_errors_total %llu\n"
                 "# HELP gpusched_exporter_collection_duration_seconds Time the last collection took.\n"
                 "# TYPE gpusched_exporter_collection_duration_seconds gauge\n"
                 "gpusched_exporter_collection_duration_seconds %.6f\n",
              (unsigned long long)e->collections, (unsigned long long)e->sample_errors, e->last_cost_ns / 1e9);
}

/* Renders the page and publishes it. Caller holds mu. */
static int render(struct gs_exporter *e)
{
    struct sb b = {0};
    for (size_t k = 0; k < sizeof metrics / sizeof metrics[0]; k++) {
        const struct metric *m = &metrics[k];
        size_t mark = b.len;
        sb_printf(&b, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name, m->type);
        size_t head = b.len;
        for (int i = 0; i < e->inv.n_gpus; i++) render_series(e, &b, m, i);
        if (b.len == head && !b.oom) b.len = mark, b.p[mark] = 0; /* no series: no header either */
    }
    render_mig(e, &b);
    render_self(e, &b);
    struct gs_metrics_text *t = b.oom ? NULL : malloc(sizeof *t + b.len + 1);
    if (!t) {
        free(b.p);
        return GS_ENOMEM;
    }
    t->refs = 1;
    t->len = b.len;
    memcpy(t->data, b.p, b.len + 1);
    free(b.p);
    gs_metrics_text_unref(e->text);
    e->text = t;
    return 0;
}

int gs_exporter_collect(struct gs_exporter *e)
{
    struct timespec c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &c0);
    drain_events(e);
    sample_all(e);
    clock_gettime(CLOCK_MONOTONIC, &c1);
    pthread_mutex_lock(&e->mu);
    e->collections++;
    e->last_ns = now_ns(e);
    e->last_cost_ns = (c1.tv_sec - c0.tv_sec) * GS_NS_PER_SEC + (c1.tv_nsec - c0.tv_nsec);
    int rc = render(e);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/*--- The collector thread ---*/

static bool should_stop(struct gs_exporter *e)
{
    pthread_mutex_lock(&e->mu);
    bool s = e->stop;
    pthread_mutex_unlock(&e->mu);
    return s;
}

/* Sleeps up to ms on the condition variable, waking at once on stop. */
static void nap(struct gs_exporter *e, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&e->mu);
    if (!e->stop) pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    pthread_mutex_unlock(&e->mu);
}

/* Waits for events until `until` (real monotonic ns), in slices so stop is quick. */
static void wait_events(struct gs_exporter *e, int64_t until)
{
    for (;;) {
        if (should_stop(e)) return;
        int64_t left = until - gs_clock_now(&e->real);
        if (left <= 0) return;
        int ms = left / GS_NS_PER_MS < WAIT_SLICE_MS ? (int)(left / GS_NS_PER_MS) + 1 : WAIT_SLICE_MS;
        struct gs_event ev;
        int rc = e->d->ops->poll_event ? e->d->ops->poll_event(e->d, ms, &ev) : GS_EUNSUPPORTED;
        if (rc == 0) {
            on_event(e, &ev);
            pthread_mutex_lock(&e->mu);
            render(e); /* an Xid shows on the next scrape, not the next collection */
            pthread_mutex_unlock(&e->mu);
        } else if (rc != GS_ETIMEDOUT) {
            nap(e, ms); /* no events from this backend (or it failed): just wait */
        }
    }
}

static void *collector(void *arg)
{
    struct gs_exporter *e = arg;
    while (!should_stop(e)) {
        int64_t next = gs_clock_now(&e->real) + e->cfg.interval_ns;
        gs_exporter_collect(e);
        wait_events(e, next);
    }
    return NULL;
}

int gs_exporter_start(struct gs_exporter *e)
{
    pthread_mutex_lock(&e->mu);
    int rc = e->running ? GS_ESTATE : 0;
    if (!rc) {
        e->stop = false;
        if (pthread_create(&e->thread, NULL, collector, e) != 0) rc = GS_ENOMEM;
        else e->running = true;
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

void gs_exporter_stop(struct gs_exporter *e)
{
    pthread_mutex_lock(&e->mu);
    bool running = e->running;
    e->stop = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (!running) return;
    pthread_join(e->thread, NULL);
    pthread_mutex_lock(&e->mu);
    e->running = false;
    pthread_mutex_unlock(&e->mu);
}

void gs_exporter_free(struct gs_exporter *e)
{
    if (!e) return;
    gs_exporter_stop(e);
    for (int i = 0; i < GS_DISC_MAX_GPUS; i++) {
        free(e->labels[i]);
        free(e->pod[i]);
    }
    for (int i = 0; i < e->n_ipod; i++) free(e->ipod[i].labels);
    gs_metrics_text_unref(e->text);
    gs_health_free(e->health);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/*--- Accessors ---*/

struct gs_metrics_text *gs_exporter_text(struct gs_exporter *e)
{
    pthread_mutex_lock(&e->mu);
    struct gs_metrics_text *t = e->text;
    if (t) __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&e->mu);
    return t;
}

/* ",pod=...,namespace=...,container=..." (malloc'd), or NULL on no memory. */
static char *pod_labels(const char *ns, const char *pod, const char *container)
{
    struct sb b = {0};
    sb_label(&b, "pod", pod, true);
    sb_label(&b, "namespace", ns ? ns : "", true);
    sb_label(&b, "container", container ? container : "", true);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int gs_exporter_set_pod(struct gs_exporter *e, int gpu, const char *ns, const char *pod, const char *container)
{
    if (gpu < 0 || gpu >= e->inv.n_gpus) return GS_EINVAL;
    char *text = NULL;
    if (pod && !(text = pod_labels(ns, pod, container))) return GS_ENOMEM;
    pthread_mutex_lock(&e->mu);
    free(e->pod[gpu]);
    e->pod[gpu] = text;
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int gs_exporter_set_mig_pod(struct gs_exporter *e, const char *mig_uuid, const char *ns, const char *pod,
                            const char *container)
{
    if (!mig_uuid || !*mig_uuid || strlen(mig_uuid) >= sizeof e->ipod[0].uuid) return GS_EINVAL;
    char *text = NULL;
    if (pod && !(text = pod_labels(ns, pod, container))) return GS_ENOMEM;
    int rc = 0;
    pthread_mutex_lock(&e->mu);
    int i = 0;
    while (i < e->n_ipod && strcmp(e->ipod[i].uuid, mig_uuid)) i++;
    if (i < e->n_ipod) {
        free(e->ipod[i].labels);
        if (text) e->ipod[i].labels = text;
        else e->ipod[i] = e->ipod[--e->n_ipod];
    } else if (text && e->n_ipod == MAX_INST) {
        free(text);
        rc = GS_ERANGE;
    } else if (text) {
        snprintf(e->ipod[e->n_ipod].uuid, sizeof e->ipod[0].uuid, "%s", mig_uuid);
        e->ipod[e->n_ipod++].labels = text;
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

void gs_exporter_set_mig(struct gs_exporter *e, const struct gs_inventory *inv)
{
    pthread_mutex_lock(&e->mu);
    e->n_inst = 0;
    for (int i = 0; i < inv->n_gpus && i < e->inv.n_gpus; i++) {
        const struct gs_disc_gpu *g = &inv->gpus[i];
        for (int k = 0; g->mig_enabled && k < g->n_mig && k < GS_DISC_MAX_MIG; k++) {
            struct inst *in = &e->inst[e->n_inst++];
            in->gpu = i;
            snprintf(in->uuid, sizeof in->uuid, "%s", g->mig[k].uuid);
            snprintf(in->profile, sizeof in->profile, "%s", g->mig[k].profile);
            in->gi = g->mig[k].gi_id;
            in->memory_mib = g->mig[k].memory_mib;
        }
    }
    pthread_mutex_unlock(&e->mu);
}

struct gs_health *gs_exporter_health(struct gs_exporter *e)
{
    return e->health;
}

uint64_t gs_exporter_collections(struct gs_exporter *e, int64_t *last_ns)
{
    pthread_mutex_lock(&e->mu);
    uint64_t n = e->collections;
    if (last_ns) *last_ns = e->last_ns;
    pthread_mutex_unlock(&e->mu);
    return n;
}

bool gs_exporter_fresh(struct gs_exporter *e)
{
    int64_t last;
    uint64_t n = gs_exporter_collections(e, &last);
    return n > 0 && now_ns(e) - last <= 3 * e->cfg.interval_ns;
}
