/*
 * metrics.h - Prometheus text exposition for the server's /metrics: a
 * growable text buffer with HELP/TYPE helpers, fixed-bucket histograms,
 * and the page itself (the operator's GPU stack metrics and the
 * scheduler's counters, queue depth and latency histograms).
 *
 * Text format 0.0.4: one "# HELP" and "# TYPE" line per family, then its
 * samples; histograms as _bucket{le=...} (cumulative), _sum and _count.
 */
#ifndef GS_GOVERN_METRICS_H
#define GS_GOVERN_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct gs_mbuf {
    char *buf;
    size_t len, cap;
    int err; /* GS_ENOMEM once an append failed */
};

int gs_mbuf_printf(struct gs_mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gs_mbuf_help(struct gs_mbuf *b, const char *name, const char *type, const char *help);

#define GS_HIST_BUCKETS 16

/* A latency histogram; thread-safe. Bounds in seconds, ascending. */
struct gs_hist {
    pthread_mutex_t mu;
    int n;
    double bounds[GS_HIST_BUCKETS];
    uint64_t counts[GS_HIST_BUCKETS + 1]; /* last: +Inf */
    double sum;
    uint64_t count;
};

/* Exponential buckets: start, start*factor, ... (n <= GS_HIST_BUCKETS). */
struct gs_store;
/* The store's health: gpusched_store_corrupt_objects (rows skipped because
 * they are not JSON) and gpusched_store_writable. s may be NULL. */
void gs_metrics_store(struct gs_mbuf *b, struct gs_store *s);

void gs_hist_init(struct gs_hist *h, double start, double factor, int n);
void gs_hist_destroy(struct gs_hist *h);
void gs_hist_observe(struct gs_hist *h, double v);
/* Writes the family (HELP, TYPE, buckets, sum, count); labels may be "" or "k=\"v\"". */
void gs_hist_write(struct gs_hist *h, struct gs_mbuf *b, const char *name, const char *help);

#endif
