/*
 * apiserver.h - the Kubernetes-shaped HTTP API over the store.
 *
 * libmicrohttpd serves it, one thread per connection (a watch holds its
 * thread while it waits for changes; everything else is a short request).
 * Paths, objects, errors and discovery follow Kubernetes closely enough for
 * kubectl: /api/v1/{nodes,pods,...}, /apis/{group}/{version}/..., the pods'
 * binding and status subresources, list with labelSelector/fieldSelector,
 * get, create, update (409 on a stale resourceVersion), JSON merge patch and
 * strategic merge patch, delete, ?watch=true streams, Table answers for
 * `get`, Status objects for every error. docs/CONTROL_PLANE.md has the list.
 *
 * Every object written is validated by the core decoders first; a problem
 * comes back as 422 Invalid with one cause per field. Requests pass
 * authentication (bearer token), the per-token rate limit and the role rules
 * of auth.h before they touch the store; bodies over max_body are refused
 * with 413 without being read. Before authentication a client is bounded by
 * connection counts (total and per address), an idle timeout (watches and
 * log follows, answered streams, are exempt) and a per-address rate of
 * failed authentications (netguard.h).
 */
#ifndef GS_CONTROL_APISERVER_H
#define GS_CONTROL_APISERVER_H

#include "control/auth.h"
#include "control/store.h"
#include "control/tls.h"

#include <stddef.h>

struct gs_admit_defaults;

struct gs_apiserver_opts {
    const char *listen;        /* "127.0.0.1:6443"; port 0 picks a free one (see gs_apiserver_port) */
    struct gs_store *store;    /* borrowed; must outlive the server */
    struct gs_auth *auth;      /* borrowed; NULL: no authentication, every caller is admin */
    const struct gs_tls *tls;  /* borrowed; NULL: plain http */
    size_t max_body;           /* bytes; 0 = 3 MiB */
    /* GET /metrics (authenticated like the API): returns a malloc'd
     * Prometheus text page, or NULL. Optional; called on request threads. */
    char *(*metrics)(void *arg);
    void *metrics_arg;
    /* GET /api/v1/namespaces/NS/pods/NAME/explain: the scheduler's report as
     * text (*text freed by the server). NULL: the subresource answers 404. */
    int (*explain)(void *ctx, const char *ns, const char *name, char **text);
    void *explain_ctx;
    /* Hardening (docs/CONTROL_PLANE.md "Limits and hardening"); 0: default. */
    const char *agent_token;   /* bearer the pods/log proxy sends to agents; NULL: none */
    unsigned max_connections;  /* open connections in all; 0: 1024 */
    unsigned max_per_ip;       /* open connections per source address; 0: 512 */
    unsigned idle_timeout_s;   /* a connection silent this long is closed (streams exempt); 0: 30 */
    double fail_qps;           /* failed authentications per second per address; 0: 10, < 0: off */
    /* Default NoExecute toleration seconds added to new pods; NULL: 300 s each. */
    const struct gs_admit_defaults *admit_defaults;
    /* GET /readyz when ready: a malloc'd text to answer instead of "ok"
     * (which replica leads), or NULL for "ok". Optional; gets metrics_arg. */
    char *(*ready_note)(void *arg);
    const char *ui_reports;    /* /ui/reports/: simulator runs under this directory (ui.c); NULL: none */
};

struct gs_apiserver;

/* Binds and starts serving. 0, GS_EINVAL (bad listen address), GS_EIO (bind failed), GS_ENOMEM. */
int gs_apiserver_start(const struct gs_apiserver_opts *o, struct gs_apiserver **out);
/* The TCP port actually bound. */
int gs_apiserver_port(const struct gs_apiserver *s);
/* Ends every watch, closes every connection, joins every thread, frees s. */
void gs_apiserver_stop(struct gs_apiserver *s);

/* Fills server-side fields of a new object: uid, creationTimestamp, and for
 * pods status.phase Pending. Used by the API and by in-process writers. */
int gs_apiserver_prepare_new(json_t *obj);

#endif
