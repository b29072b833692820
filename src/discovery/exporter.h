/*
 * exporter.h - GPU metrics in DCGM-Exporter's names, served over HTTP.
 *
 * Grafana dashboards and alerts written for NVIDIA's dcgm-exporter query
 * DCGM_FI_DEV_GPU_UTIL{gpu, UUID, pci_bus_id, device, modelName, Hostname, ...};
 * we emit the same metric names, types, HELP texts and label names and order,
 * so those dashboards work unchanged (docs/DISCOVERY.md lists the metrics).
 *
 * Design: a collector thread samples the backend every interval and renders
 * the whole Prometheus text once per collection into an immutable,
 * reference-counted buffer. A scrape only takes a reference to the latest
 * buffer: it never calls NVML, never waits for a slow GPU, and costs the same
 * however often Prometheus asks. Between collections the thread waits on the
 * backend's health events, feeding the health machine (health.h) as they come
 * and re-rendering so an Xid shows on the next scrape.
 *
 * Cardinality is bounded by construction: one series per GPU and metric (at
 * most GS_DISC_MAX_GPUS GPUs), one pod/namespace/container per GPU, the Xid
 * labels describe only the last Xid, and label values are cut at 128 bytes.
 *
 * MIG: each instance of the current layout gets its own series
 * (gpusched_mig_instance_allocated, gpusched_mig_instance_fb_total) with the
 * parent GPU's labels, dcgm-exporter's GPU_I_PROFILE and GPU_I_ID, the MIG
 * UUID (mig_uuid) and the pod holding it, at most GS_DISC_MAX_MIG per GPU.
 */
#ifndef GS_DISCOVERY_EXPORTER_H
#define GS_DISCOVERY_EXPORTER_H

#include "discovery/discovery.h"
#include "discovery/health.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_exporter_config {
    int64_t interval_ns;                     /* collection period; <= 0 means 30 s (dcgm-exporter's) */
    const char *hostname;                    /* Hostname label; NULL = the inventory's */
    bool no_hostname;                        /* leave the Hostname label out (--no-hostname) */
    const struct gs_health_config *health;   /* NULL = defaults */
};

/* An immutable rendered page; hold it with _ref, drop it with _unref. */
struct gs_metrics_text {
    int refs; /* atomic */
    size_t len;
    char data[];
};
void gs_metrics_text_unref(struct gs_metrics_text *t);

struct gs_exporter;

/* Creates an exporter over an open backend (borrowed: it must outlive the
 * exporter) and reads its inventory. Nothing runs until gs_exporter_start or
 * gs_exporter_collect. 0, GS_ENOMEM or the backend's error. */
int gs_exporter_create(struct gs_disc *d, const struct gs_exporter_config *c, struct gs_exporter **out);
/* One collection on the caller's thread: drains pending events without
 * waiting, samples every GPU, updates health, renders. Not to be mixed with a
 * running collector thread. 0 or GS_ENOMEM. */
int gs_exporter_collect(struct gs_exporter *e);
/* Starts the collector thread (first collection at once). 0, GS_ESTATE if running. */
int gs_exporter_start(struct gs_exporter *e);
/* Stops and joins the collector thread; idempotent. Returns within about 100 ms. */
void gs_exporter_stop(struct gs_exporter *e);
/* Stops the thread if it runs and frees everything. */
void gs_exporter_free(struct gs_exporter *e);

/* The latest page: a new reference (caller unrefs), or NULL before the first collection. */
struct gs_metrics_text *gs_exporter_text(struct gs_exporter *e);
/* Marks GPU gpu as used by a container (the pod/namespace/container labels);
 * pod NULL clears it. Shown from the next collection. 0 or GS_EINVAL. */
int gs_exporter_set_pod(struct gs_exporter *e, int gpu, const char *ns, const char *pod, const char *container);
/* Marks the MIG instance with this UUID as used by a container; pod NULL
 * clears it. Kept by UUID, so it survives a layout change until cleared.
 * Shown from the next collection. 0, GS_EINVAL (no UUID), GS_ERANGE (more
 * held instances than a node can have) or GS_ENOMEM. */
int gs_exporter_set_mig_pod(struct gs_exporter *e, const char *mig_uuid, const char *ns, const char *pod,
                            const char *container);
/* Takes the MIG layout of inv (same GPUs as at create; re-read after a
 * re-partition) for the per-instance series, from the next collection. */
void gs_exporter_set_mig(struct gs_exporter *e, const struct gs_inventory *inv);
/* The health machine (borrowed), to subscribe to transitions. */
struct gs_health *gs_exporter_health(struct gs_exporter *e);
/* Collections done so far, and the clock time of the last one (0 before any). */
uint64_t gs_exporter_collections(struct gs_exporter *e, int64_t *last_ns);
/* True when a collection finished within the last three intervals. */
bool gs_exporter_fresh(struct gs_exporter *e);

/*--- HTTP endpoint (http.c, libmicrohttpd) ---*/

struct gs_http;

/* Serves GET /metrics (the exporter's latest page) and /healthz, /health
 * ("ok", or 503 when the collector has stalled) on listen = "HOST:PORT",
 * ":PORT" (all IPv4 interfaces) or "[V6ADDR]:PORT"; port 0 picks a free one.
 * The exporter is borrowed. 0, GS_EINVAL (bad address), GS_EIO (cannot bind),
 * with a message in err. */
int gs_http_start(const char *listen, struct gs_exporter *e, struct gs_http **out, char *err, size_t errlen);
/* The port actually bound. */
int gs_http_port(const struct gs_http *h);
/* Stops the server (joins its thread) and frees it. NULL is fine. */
void gs_http_stop(struct gs_http *h);

#endif
