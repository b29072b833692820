/*
 * informer.h - client-go's reflector and shared cache, for the kube source
 * (source_kube.c): one informer per followed resource keeps a local copy of
 * that resource's objects in step with an API server, and every informer of
 * a hub appends what changed to one merged change stream.
 *
 * What the cache promises (as client-go's shared_informer.go):
 *   - it is eventually consistent with the server: every change the server
 *     makes reaches it, possibly late;
 *   - per object, states appear in the order the server wrote them, though
 *     some may be skipped (several writes between two reads, or a relist);
 *   - there is no order across objects or across resources;
 *   - a delete carries the last state the cache knew; when it was learned
 *     by a relist (the object vanished while no watch ran) the event's rv is
 *     the new list's version, so consumers that drop versions they have seen
 *     still take it;
 *   - readers of the stream must return quickly and hand long work to a
 *     queue: one slow reader never blocks an informer, but it can fall out
 *     of the ring (GS_ERANGE) and must then list again.
 *
 * How an informer keeps up (one thread each):
 *   1. a paged list (limit, continue; a 410 on a continue token restarts the
 *      list from the beginning); a 404 means the server does not serve the
 *      resource (a CRD not installed): reported once, taken as empty and
 *      listed again every minute;
 *   2. a watch from the list's resourceVersion with allowWatchBookmarks and
 *      timeoutSeconds, re-opened from the last version seen (BOOKMARKs
 *      included) when it ends or breaks;
 *   3. on 410 Expired (an ERROR event or the answer's status) a relist whose
 *      differences from the cache become ADDED / MODIFIED / DELETED events
 *      (client-go's Replace);
 *   4. errors (5xx, transport, a bad answer) back off exponentially from
 *      100 ms to 30 s with jitter drawn from the seed; a 429's Retry-After
 *      is honoured.
 *
 * The decoders of what a server sends (a list page, one watch line) are
 * exposed for the fuzz target: outside input, checked field by field.
 *
 * Thread-safe: any thread may call any hub function.
 */
#ifndef GS_INFORMER_INFORMER_H
#define GS_INFORMER_INFORMER_H

#include "control/client.h"
#include "control/resources.h"
#include "control/store.h"
#include "core/error.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*--- Decoders ---*/

enum gs_watch_type { GS_WATCH_ADDED, GS_WATCH_MODIFIED, GS_WATCH_DELETED, GS_WATCH_BOOKMARK, GS_WATCH_ERROR };

/* One event of a watch stream. */
struct gs_watch_event {
    enum gs_watch_type type;
    json_t *object; /* new reference: the object (ADDED/MODIFIED/DELETED), the bookmark, or the Status (ERROR) */
    char rv[64];    /* metadata.resourceVersion ("" for ERROR) */
    long code;      /* ERROR: the Status's code (410: Expired); else 0 */
};

/* Decodes one line of a watch stream (without its newline) for resource r:
 * 0 with *ev filled (free ev->object); 1 for a blank keep-alive line
 * (nothing set); GS_EPARSE with why naming the field and value. An object
 * must be of r's kind with a name (and a namespace when r is namespaced)
 * and a resourceVersion. */
int gs_watch_event_decode(const struct gs_api_resource *r, const char *line, size_t len, struct gs_watch_event *ev,
                          char *why, size_t why_len);

/* One page of a list. */
struct gs_list_page {
    json_t *items; /* new reference: the items array, each checked as above */
    char rv[64];   /* metadata.resourceVersion of the list */
    char cont[4096]; /* metadata.continue ("" on the last page) */
};

/* Checks a list answer (a parsed document) for r: 0 with *p filled (free
 * with gs_list_page_free), GS_EPARSE with why naming the field. */
int gs_list_page_decode(const struct gs_api_resource *r, const json_t *doc, struct gs_list_page *p, char *why,
                        size_t why_len);
void gs_list_page_free(struct gs_list_page *p);

/* The store key of a decoded object of r (gs_api_key); 0 or GS_ERANGE. */
int gs_informer_key_of(const struct gs_api_resource *r, const json_t *obj, char *buf, size_t len);

/*--- Hub and informers ---*/

struct gs_informer_stats {
    uint64_t requests, lists, relists, watches, bookmarks, retries;
    bool synced; /* every informer listed once */
};

/* The informers' shared options. */
struct gs_informer_opts {
    const struct gs_client_opts *client; /* each informer opens its own connection with these */
    int page_size;                       /* list limit; 0 = 500 */
    int watch_timeout_s;                 /* 0: random in [300, 600) */
    uint64_t seed;                       /* jitter and watch timeouts */
    const char *user_agent;              /* NULL: the client's */
    int not_served_recheck_ms;           /* how soon a resource answered 404 is listed again; 0 = 60000 */
    /* Called once per request sent (method, path with query, status; 0: no
     * answer), from the informer threads. NULL: none. */
    void (*on_request)(void *ctx, const char *method, const char *path, long code);
    void *on_request_ctx;
};

struct gs_informer_hub;

/* A hub with a merged stream of ring_events events (0 = 100000); o is copied
 * (the client options and strings in it are borrowed for the hub's life). */
int gs_informer_hub_new(const struct gs_informer_opts *o, size_t ring_events, struct gs_informer_hub **out);
/* Stops every informer (within about a second) and frees everything. */
void gs_informer_hub_free(struct gs_informer_hub *h);

/* Starts an informer for prefix ("pods/", "pods/default/", "nodes/"): its
 * connection is made now (problems into d: GS_EINVAL), its thread lists
 * and watches. GS_EEXIST when the prefix is already informed. */
int gs_informer_hub_follow(struct gs_informer_hub *h, const char *prefix, struct gs_diags *d);

/* Every cached object under prefix, in key order (fn gets a private copy),
 * after the covering informer's first list; *cursor: the merged stream's
 * position at that moment. GS_ENOENT when no informer covers prefix,
 * GS_ESTATE when interrupted while waiting. */
int gs_informer_hub_list(struct gs_informer_hub *h, const char *prefix, gs_store_list_fn fn, void *arg,
                         int64_t *cursor);
/* The merged stream, with gs_store_events' contract (store.h). */
int gs_informer_hub_events(struct gs_informer_hub *h, int64_t *after, const char *prefix, int timeout_ms,
                           const atomic_bool *stop, struct gs_store_event **evs, size_t *n);
/* The cached object at key (new reference) and its rv: GS_ENOENT when
 * absent, GS_EUNSUPPORTED when no informer covers key (ask the server). */
int gs_informer_hub_get(struct gs_informer_hub *h, const char *key, json_t **obj, int64_t *rv);
/* Waits for every informer's first list; true when synced. */
bool gs_informer_hub_wait_synced(struct gs_informer_hub *h, int timeout_ms);
/* Wakes every thread blocked in events() or list(). */
void gs_informer_hub_interrupt(struct gs_informer_hub *h);
void gs_informer_hub_stats(struct gs_informer_hub *h, struct gs_informer_stats *out);

/* The resource of a store key or prefix ("pods/..." -> pods; a resource
 * served as a view of another's storage by "<plural>.<group>/...", e.g.
 * "events.events.k8s.io/NS/NAME" -> events.k8s.io's Events), with the
 * namespace and name parts split off into ns / name (NULL when absent;
 * pointers into key, not terminated: lengths in nsl / namel). NULL when the
 * first part names no served resource. */
const struct gs_api_resource *gs_informer_resource_of_key(const char *key, const char **ns, size_t *nsl,
                                                          const char **name, size_t *namel);

#endif
