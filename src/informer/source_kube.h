/*
 * source_kube.h - the Kubernetes transport of source.h: informers over a
 * kube-apiserver (or ours) reached with a kubeconfig or in-cluster config.
 *
 * One informer per followed resource (informer.h): a paged list (limit /
 * continue), then a watch from the list's resourceVersion with
 * allowWatchBookmarks and a timeoutSeconds, re-watched from the last
 * version seen (bookmarks included) when it ends, relisted on 410 Expired
 * (the differences between the old cache and the new list become ordinary
 * ADDED / MODIFIED / DELETED events), retried with exponential backoff and
 * jitter on errors, honouring Retry-After on 429. A resource the server does
 * not serve (404 on the list: a CRD not installed) is reported once, treated
 * as empty and looked at again every minute.
 *
 * Every informer appends to one merged change stream (a ring) numbered by
 * its own cursor; list() answers from the informers' caches once they are
 * synced (it waits for the first list), get() from the cache too; writes are
 * REST calls (source.h). Requests carry the configured user agent; every
 * request made can be reported to a hook (the RBAC contract test records
 * them).
 */
#ifndef GS_INFORMER_SOURCE_KUBE_H
#define GS_INFORMER_SOURCE_KUBE_H

#include "control/client.h"
#include "informer/source.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_source_kube_opts {
    struct gs_client_opts client; /* where and as whom: kubeconfig, server, token, CA (client.h);
                                     in-cluster config when nothing is given and KUBERNETES_SERVICE_HOST is set */
    const char *const *follow;    /* store-key prefixes of the resources to inform ("nodes/", "pods/"), NULL-terminated */
    int page_size;                /* list limit; 0 = 500 */
    int watch_timeout_s;          /* a watch's timeoutSeconds; 0 = random in [300, 600) as client-go */
    size_t ring_events;           /* merged stream memory in events; 0 = 100000 */
    uint64_t seed;                /* backoff jitter and watch timeouts */
    int write_workers;            /* connections for batched binds; 0 = 8 */
    const char *user_agent;       /* NULL: "gpusched/<version>" */
    /* Called (from any thread) once per request sent: method, path with query,
     * HTTP status (0: no answer). NULL: none. */
    void (*on_request)(void *ctx, const char *method, const char *path, long code);
    void *on_request_ctx;
};

struct gs_source_kube_stats {
    uint64_t requests;       /* every request sent */
    uint64_t lists;          /* list pages fetched */
    uint64_t relists;        /* after 410 Expired or a lost stream */
    uint64_t watches;        /* watch requests started */
    uint64_t bookmarks;      /* BOOKMARK events received */
    uint64_t retries;        /* requests repeated after 429, 5xx or a transport error */
    uint64_t conflicts;      /* 409 Conflict answers to writes */
    bool synced;             /* every followed resource listed once */
};

/* Resolves the client (problems into d), starts one informer thread per
 * followed resource and returns at once; list() blocks until a resource's
 * first list is in. 0, GS_EINVAL (bad options, with d filled), GS_ENOMEM. */
int gs_source_kube_new(const struct gs_source_kube_opts *o, struct gs_source **out, struct gs_diags *d);
/* Waits up to timeout_ms for every informer's first list. true when synced. */
bool gs_source_kube_wait_synced(struct gs_source *s, int timeout_ms);
void gs_source_kube_stats(struct gs_source *s, struct gs_source_kube_stats *out);

#endif
