/*
 * api_ui.h - the read-only routes the web console needs beyond the
 * ordinary API, and the queue usage history behind one of them.
 *
 *  - POST /apis/authentication.k8s.io/v1/selfsubjectreviews: who the token
 *    is (Kubernetes' SelfSubjectReview, what `kubectl auth whoami` calls),
 *    with gpusched's role and a tenant's namespaces in userInfo.extra. The
 *    console's login checks a token with it.
 *  - GET /apis/ui.gpusched.io/v1/[namespaces/NS/]queuehistories[/NAME]: the
 *    last hours of each queue's usage, sampled by the server into a bounded
 *    in-memory ring (lost on restart; nothing is stored). ClusterQueues and
 *    Volcano-style Queues are cluster-scoped items (no namespace) and are
 *    read from their status.admission; LocalQueues are namespaced items
 *    counted from their pods. A tenant sees the LocalQueues of its
 *    namespaces and the cluster-scoped queues, which it may read anyway.
 *
 * The sampler is a thread of the API server (one store list per kind and
 * interval); its clock is the wall clock, since samples are shown to people.
 */
#ifndef GS_CONTROL_API_UI_H
#define GS_CONTROL_API_UI_H

#include "control/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_UI_HISTORY_INTERVAL_DEFAULT_MS 30000
#define GS_UI_HISTORY_SAMPLES_DEFAULT 480 /* four hours at 30 s */

struct gs_ui_history;

/* Starts sampling store every interval_ms (>= 10) keeping cap (>= 2)
 * samples per queue. 0 or GS_ENOMEM / GS_EIO (no thread). Free with
 * gs_ui_history_free, which stops the thread first. */
int gs_ui_history_new(struct gs_store *store, int64_t interval_ms, size_t cap, struct gs_ui_history **out);
void gs_ui_history_free(struct gs_ui_history *h);
/* Takes one sample now (the thread's work; tests call it to be deterministic). */
int gs_ui_history_sample(struct gs_ui_history *h, double now);
/* The history as a QueueHistoryList (new reference): items whose namespace
 * passes keep (ns "" for the cluster-scoped queues); keep NULL keeps all. */
/* The sampling interval in ms. */
int64_t gs_ui_history_interval_ms(const struct gs_ui_history *h);
json_t *gs_ui_history_list(struct gs_ui_history *h, bool (*keep)(const char *ns, void *arg), void *arg);

/* GPUSCHED_UI_HISTORY_INTERVAL (seconds, 0.01..3600) or the default, in ms;
 * GS_EINVAL with why filled when it is set to anything else. */
int gs_ui_history_interval_env(int64_t *ms, char *why, size_t len);

/* The console's GPU grid (GET /apis/ui.gpusched.io/v1/gpugrid, docs/CONSOLE.md
 * "The GPU grid"): every node's GPUs with their holders "ns/name" in name
 * order, the pending pods, the bound pods' PodGroups, and the resourceVersion
 * to watch from, read from store in one pass per kind; holders and pods of
 * the namespaces who may see only. NULL with *err on failure; the caller owns
 * the document. */
struct gs_principal;
json_t *gs_ui_gpugrid(struct gs_store *store, const struct gs_principal *who, int *err);

#endif
