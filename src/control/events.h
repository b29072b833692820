/*
 * events.h - Kubernetes Events: one recorder for every producer, the
 * events.k8s.io/v1 view of the same objects, and their expiry.
 *
 * Producers (the scheduler, admission, the node lifecycle, the GPU stack
 * operator in the server; the agent through the API) call gs_event_record()
 * with a gs_event_source naming their component. The call never blocks on
 * the store: it formats the Event and appends it to a bounded queue that the
 * recorder's thread writes (drops are counted when the queue is full).
 * Events are outputs only; nothing reads them back into a decision.
 *
 * The recorder aggregates as client-go's EventCorrelator does: an Event with
 * the same (source, involvedObject, type, reason, message) as one written
 * less than GS_EVENT_WINDOW_NS ago increments that Event's count and
 * lastTimestamp instead of creating another. A spam filter per (source,
 * involvedObject) - a token bucket of GS_EVENT_BURST, one token back every
 * GS_EVENT_REFILL_NS, client-go's defaults - drops what a pod failing every
 * cycle would otherwise write (counted). A source with GS_EVENT_DISTINCT
 * writes each record as its own Event and skips both (the operator: its
 * state machine backs off by itself, and its Events read as the walk).
 *
 * Stored objects are core v1 Events under "events/<ns>/<name>", name
 * "<object>.<hex of the wall time in ns>" as kube's recorder names them;
 * Events about cluster-scoped objects (nodes) live in "default". The API
 * serves the same storage as events.k8s.io/v1 (regarding, note, series,
 * reportingController, deprecated* fields) through gs_event_to_events_v1,
 * as kube-apiserver converts one storage for both groups.
 *
 * Expiry: a recorder with ttl_ns > 0 (the server's) deletes every stored
 * Event whose last write (lastTimestamp, series.lastObservedTime, eventTime,
 * else creationTimestamp) is older than the TTL, once a sweep period, as
 * kube-apiserver's --event-ttl (default 1 h) does through etcd leases.
 */
#ifndef GS_CONTROL_EVENTS_H
#define GS_CONTROL_EVENTS_H

#include "core/clock.h"
#include "core/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_store;
struct gs_api_resource;

#define GS_EVENT_WINDOW_NS (10 * 60 * GS_NS_PER_SEC) /* client-go: aggregate within 10 minutes */
#define GS_EVENT_BURST 25                             /* client-go spam filter burst */
#define GS_EVENT_REFILL_NS (5 * 60 * GS_NS_PER_SEC)  /* one token per 5 minutes */
#define GS_EVENT_TTL_DEFAULT_S 3600                   /* kube-apiserver --event-ttl */
#define GS_EVENT_MESSAGE_MAX 1024                     /* events.k8s.io note limit */

/* The object an Event is about (involvedObject / regarding). Borrowed. */
struct gs_event_ref {
    const char *kind;             /* "Pod", "Node" */
    const char *api_version;      /* NULL: "v1" */
    const char *ns;               /* NULL or "": cluster-scoped (the Event goes to "default") */
    const char *name;
    const char *uid;              /* NULL: none (kubectl describe matches on it) */
    const char *resource_version; /* NULL: none */
    const char *field_path;       /* NULL: none; "spec.containers{main}" for a container */
};

/* A Pod, a Node (core v1) as the object of gs_event_record (a pointer to a
 * compound literal: valid in the enclosing block). */
#define GS_EVENT_POD(ns_, name_, uid_) \
    (&(struct gs_event_ref){.kind = "Pod", .api_version = "v1", .ns = (ns_), .name = (name_), .uid = (uid_)})
#define GS_EVENT_NODE(name_, uid_) \
    (&(struct gs_event_ref){.kind = "Node", .api_version = "v1", .name = (name_), .uid = (uid_)})

#define GS_EVENT_DISTINCT 1u /* every record its own Event: no aggregation, no spam filter */

struct gs_recorder;

/* Who records: copied by value into each producer. rec NULL drops silently
 * (a producer run without a recorder, e.g. in a unit test of its logic). */
struct gs_event_source {
    struct gs_recorder *rec;
    const char *component; /* source.component and reportingComponent: "default-scheduler" */
    const char *host;      /* source.host (the node, for the agent); NULL: none */
    unsigned flags;        /* GS_EVENT_DISTINCT */
};

/* Where the recorder writes. ev is a whole core v1 Event (borrowed).
 * update false: create ns/name, GS_EEXIST when the name is taken; update
 * true: replace the named Event's fields, GS_ENOENT when it is gone
 * (expired or deleted: the recorder then creates a new one). Called from
 * the recorder's thread only (or the caller's, with sync). */
struct gs_event_sink {
    int (*write)(void *ctx, const char *ns, const char *name, const json_t *ev, bool update);
    void *ctx;
};

struct gs_recorder_opts {
    struct gs_store *store;       /* the store sink, when sink.write is NULL */
    struct gs_event_sink sink;    /* e.g. the agent's API client */
    const struct gs_clock *clock; /* NULL: the real clock; else its time is taken as wall ns (tests) */
    size_t queue_len;             /* 0: 1024 */
    int64_t ttl_ns;               /* > 0 (store sink only): expire Events older than this */
    int64_t sweep_ns;             /* sweep period; 0: min(ttl / 4, 60 s) */
    bool sync;                    /* no thread: each record is written in the caller's thread */
};

struct gs_recorder_stats {
    uint64_t recorded;     /* gs_event_record calls that reached the recorder */
    uint64_t created;      /* Events created */
    uint64_t aggregated;   /* records folded into an existing Event (count + 1) */
    uint64_t dropped_full; /* the queue was full */
    uint64_t dropped_rate; /* the spam filter said no */
    uint64_t write_errors; /* the sink failed */
    uint64_t expired;      /* Events deleted by the TTL sweep */
};

/* The recorder's counters as Prometheus text (gpusched_events_total by
 * result) appended to b; expired only when with_expired (the store sink). */
struct gs_mbuf;
struct gs_recorder;
void gs_recorder_metrics(struct gs_recorder *r, bool with_expired, struct gs_mbuf *b);

/* Caller frees with gs_recorder_free. 0, GS_EINVAL (no sink), GS_ENOMEM. */
int gs_recorder_new(const struct gs_recorder_opts *o, struct gs_recorder **out);
/* Writes what is queued, stops the thread, frees. NULL is fine. */
void gs_recorder_free(struct gs_recorder *r);
/* Waits until everything recorded before the call is written. */
void gs_recorder_flush(struct gs_recorder *r);
void gs_recorder_stats(struct gs_recorder *r, struct gs_recorder_stats *out);
/* One TTL sweep now (the thread runs it every sweep period). */
void gs_recorder_sweep(struct gs_recorder *r);

/* Records an Event: type "Normal" or "Warning", reason a CamelCase word,
 * action what was done (NULL: the reason), then the message. Never blocks
 * on the store. */
void gs_event_record(const struct gs_event_source *src, const struct gs_event_ref *obj, const char *type,
                     const char *reason, const char *action, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Deletes stored Events whose last write is older than now - ttl (wall ns);
 * *removed (may be NULL) gets the count. */
int gs_events_expire(struct gs_store *s, int64_t now_ns, int64_t ttl_ns, size_t *removed);

/*--- The events.k8s.io/v1 view ---*/

/* Whether res is events.k8s.io's Event (served converted). */
bool gs_event_res_is_v1(const struct gs_api_resource *res);
/* A core v1 Event as events.k8s.io/v1 (new reference; NULL on ENOMEM). */
json_t *gs_event_to_events_v1(const json_t *core);
/* An events.k8s.io/v1 Event (a request body) as the core v1 object to
 * store: *out a new reference. GS_EINVAL with one diag per bad field
 * (a field of the wrong type, type not Normal|Warning, a missing
 * regarding.name or reason). */
int gs_event_from_events_v1(const json_t *in, json_t **out, struct gs_diags *d);
/* What res serves for a stored object: obj itself (taken) for every
 * resource but events.k8s.io's, whose view replaces it. */
json_t *gs_event_serve(const struct gs_api_resource *res, json_t *obj);
/* For a watch line: the stored text as res serves it (malloc'd), or NULL
 * when res serves the stored text unchanged. */
char *gs_event_text_for(const struct gs_api_resource *res, const char *stored);

/* Table columns and one row (kubectl's LAST SEEN TYPE REASON OBJECT MESSAGE). */
json_t *gs_event_table_columns(void);
json_t *gs_event_table_row(const json_t *ev, double now);

#endif
