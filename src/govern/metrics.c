/*
 * metrics.c - Prometheus text helpers; see metrics.h.
 */
#include "govern/metrics.h"

#include "control/store.h"
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gs_mbuf_printf(struct gs_mbuf *b, const char *fmt, ...)
{
    if (b->err) return b->err;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->buf ? b->buf + b->len : NULL, b->buf ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return b->err = GS_EINVAL;
        if (b->buf && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return 0;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap <= b->len + (size_t)n) cap *= 2;
        char *nb = realloc(b->buf, cap);
        if (!nb) return b->err = GS_ENOMEM;
        b->buf = nb, b->cap = cap;
    }
}

void gs_mbuf_help(struct gs_mbuf *b, const char *name, const char *type, const char *help)
{
    gs_mbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void gs_metrics_store(struct gs_mbuf *b, struct gs_store *s)
{
    if (!s) return;
    struct gs_store_health h;
    gs_store_health(s, false, &h);
    gs_mbuf_help(b, "gpusched_store_corrupt_objects", "gauge",
                 "Stored objects that are not valid JSON: skipped in lists, named in the server log.");
    gs_mbuf_printf(b, "gpusched_store_corrupt_objects %zu\n", h.corrupt);
    gs_mbuf_help(b, "gpusched_store_writable", "gauge",
                 "1 while the store's last write committed, 0 while writes fail.");
    gs_mbuf_printf(b, "gpusched_store_writable %d\n", h.writable ? 1 : 0);
}

void gs_hist_init(struct gs_hist *h, double start, double factor, int n)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
    h->n = n > GS_HIST_BUCKETS ? GS_HIST_BUCKETS : n;
    for (int i = 0; i < h->n; i++, start *= factor) h->bounds[i] = start;
}

void gs_hist_destroy(struct gs_hist *h) { pthread_mutex_destroy(&h->mu); }

void gs_hist_observe(struct gs_hist *h, double v)
{
    pthread_mutex_lock(&h->mu);
    int i = 0;
    while (i < h->n && v > h->bounds[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
    pthread_mutex_unlock(&h->mu);
}

void gs_hist_write(struct gs_hist *h, struct gs_mbuf *b, const char *name, const char *help)
{
    gs_mbuf_help(b, name, "histogram", help);
    pthread_mutex_lock(&h->mu);
    uint64_t cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->counts[i];
        gs_mbuf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], (unsigned long long)cum);
    }
    cum += h->counts[h->n];
    gs_mbuf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name, (unsigned long long)cum, name,
                   h->sum, name, (unsigned long long)h->count);
    pthread_mutex_unlock(&h->mu);
}
