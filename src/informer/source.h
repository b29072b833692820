/*
 * source.h - where every control loop reads and writes the cluster: one
 * interface, two transports.
 *
 * The scheduler, admission, the operator and node lifecycle never touch the
 * store or an HTTP client directly: they take a struct gs_source. Two
 * implementations exist:
 *
 *   - local (source_local.c): the server's own store, in process, no HTTP.
 *     What `gpusched server` and `gpusched up` run. Reads are the store's
 *     lists and change stream; writes are store transactions.
 *   - kube (source_kube.c): any Kubernetes API server (ours or a real
 *     kube-apiserver >= 1.29) reached through a kubeconfig or the in-cluster
 *     service account. One informer per followed resource (informer.h) lists
 *     with paging, watches with bookmarks and timeouts, relists on 410 and
 *     backs off with jitter; they all feed one local change stream with the
 *     same contract as the store's, and lists are answered from the
 *     informers' caches. Writes are REST calls through the same client.
 *
 * Keys are store keys (resources.h): "pods/default/web", "nodes/n1",
 * "podgroups.scheduling.x-k8s.io/default/g". A key prefix selects one
 * resource ("pods/"), or one resource in one namespace.
 *
 * The change stream: events(after, ...) has exactly the contract of
 * gs_store_events (store.h): events after the cursor *after, in order, with
 * their object's JSON text; GS_ERANGE when the cursor is older than what is
 * held, and the caller lists again. For the local source the cursor is the
 * store's resourceVersion; for the kube source it is the position in the
 * merged stream (an opaque, increasing number), while each event's rv is the
 * object's own metadata.resourceVersion. A consumer lists every resource it
 * follows and resumes from the smallest cursor the lists returned; events it
 * already saw come again and are told apart by rv, as today.
 *
 * Writes are semantic where Kubernetes makes them so:
 *   - mutate: read-modify-write with optimistic concurrency (local: one
 *     transaction; kube: GET, fn, PUT with the resourceVersion read, again on
 *     409 up to a few times). sub "status" writes the status subresource.
 *   - bind: the scheduler's decision. Local: one transaction setting
 *     spec.nodeName, the annotations, PodScheduled=True and status.devices;
 *     kube: POST pods/NAME/binding with metadata.uid (precondition) and the
 *     annotations (which the API server copies onto the pod).
 *   - preempt: a victim of preemption. Local: Failed/Preempted for
 *     restartPolicy Never, else re-created unbound (as before); kube: the
 *     DisruptionTarget condition on its status, then DELETE with a uid
 *     precondition, as kube-scheduler does.
 *   - remove: DELETE with uid and resourceVersion preconditions.
 *
 * Thread-safe: any thread may call any function. Errors are GS_E* codes
 * (GS_ENOENT, GS_EEXIST, GS_ECONFLICT, GS_EPERM, GS_EBUSY after retries of
 * 429s, GS_EIO); a kube source never exits or aborts on a bad answer.
 */
#ifndef GS_INFORMER_SOURCE_H
#define GS_INFORMER_SOURCE_H

#include "control/store.h"
#include "core/error.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gs_source_kind { GS_SOURCE_LOCAL, GS_SOURCE_KUBE };

/* One binding for bind(): in key, uid (precondition; NULL: none), node,
 * annotations (borrowed object or NULL), status_devices (borrowed array or
 * NULL: local only, kube ignores it). Out: err (0, GS_ENOENT pod gone or a
 * new uid, GS_EEXIST already bound, GS_ESTATE being deleted, ...), rv of the
 * write, out (local only: the stored pod, a new reference, or NULL). */
struct gs_source_bind {
    const char *key, *uid, *node;
    const json_t *annotations;
    const json_t *status_devices;
    int err;
    int64_t rv;
    json_t *out;
};

struct gs_source;

struct gs_source_vtbl {
    enum gs_source_kind kind;
    /* Every object under prefix (a resource, or a resource in a namespace);
     * *cursor: where the change stream goes on from (see above). */
    int (*list)(struct gs_source *s, const char *prefix, gs_store_list_fn fn, void *arg, int64_t *cursor);
    /* The change stream (see above; as gs_store_events). */
    int (*events)(struct gs_source *s, int64_t *after, const char *prefix, int timeout_ms, const atomic_bool *stop,
                  struct gs_store_event **evs, size_t *n);
    /* One object (new reference) and its rv. GS_ENOENT when absent. */
    int (*get)(struct gs_source *s, const char *key, json_t **obj, int64_t *rv);
    /* Creates the object at key (metadata must name it). GS_EEXIST. */
    int (*create)(struct gs_source *s, const char *key, json_t *obj, int64_t *rv);
    /* Read-modify-write (gs_store_mutate_fn); sub NULL or "status". Absent
     * objects are created only when fn returns one for cur == NULL. */
    int (*mutate)(struct gs_source *s, const char *key, const char *sub, gs_store_mutate_fn fn, void *arg,
                  json_t **out, int64_t *rv);
    /* Several mutates (whole objects); local: one transaction. NULL: one mutate each. */
    int (*mutate_batch)(struct gs_source *s, struct gs_store_mut *m, size_t n);
    /* Deletes key when its uid is uid and its version expect_rv (NULL / 0: any). *old: last state (may be NULL). */
    int (*remove)(struct gs_source *s, const char *key, const char *uid, int64_t expect_rv, json_t **old);
    /* Writes n bindings (per-item results in b[i]); returns 0 unless the
     * whole batch failed (GS_EIO: none written). */
    int (*bind)(struct gs_source *s, struct gs_source_bind *b, size_t n);
    /* Preempts the pod at key (uid precondition) for preemptor "ns/name";
     * *recreated: the local source re-created it unbound. */
    int (*preempt)(struct gs_source *s, const char *key, const char *uid, const char *preemptor, bool *recreated);
    /* Wakes every thread blocked in events() (shutdown). */
    void (*interrupt)(struct gs_source *s);
    void (*free)(struct gs_source *s);
};

struct gs_source {
    const struct gs_source_vtbl *v;
};

/* The in-process transport over store (borrowed; outlives the source). */
int gs_source_local_new(struct gs_store *store, struct gs_source **out);
/* The store under a local source, NULL for any other (for what only the
 * server does: TTL sweeps, bootstrap). */
struct gs_store *gs_source_local_store(struct gs_source *s);

static inline enum gs_source_kind gs_source_kind(const struct gs_source *s) { return s->v->kind; }
static inline int gs_source_list(struct gs_source *s, const char *prefix, gs_store_list_fn fn, void *arg,
                                 int64_t *cursor)
{ return s->v->list(s, prefix, fn, arg, cursor); }
static inline int gs_source_events(struct gs_source *s, int64_t *after, const char *prefix, int timeout_ms,
                                   const atomic_bool *stop, struct gs_store_event **evs, size_t *n)
{ return s->v->events(s, after, prefix, timeout_ms, stop, evs, n); }
static inline int gs_source_get(struct gs_source *s, const char *key, json_t **obj, int64_t *rv)
{ return s->v->get(s, key, obj, rv); }
static inline int gs_source_create(struct gs_source *s, const char *key, json_t *obj, int64_t *rv)
{ return s->v->create(s, key, obj, rv); }
static inline int gs_source_mutate(struct gs_source *s, const char *key, const char *sub, gs_store_mutate_fn fn,
                                   void *arg, json_t **out, int64_t *rv)
{ return s->v->mutate(s, key, sub, fn, arg, out, rv); }
static inline int gs_source_mutate_batch(struct gs_source *s, struct gs_store_mut *m, size_t n)
{
    if (s->v->mutate_batch) return s->v->mutate_batch(s, m, n);
    for (size_t i = 0; i < n; i++) {
        m[i].out = NULL;
        m[i].err = s->v->mutate(s, m[i].key, NULL, m[i].fn, m[i].arg, &m[i].out, &m[i].rv);
    }
    return 0;
}
static inline int gs_source_remove(struct gs_source *s, const char *key, const char *uid, int64_t expect_rv,
                                   json_t **old)
{ return s->v->remove(s, key, uid, expect_rv, old); }
static inline int gs_source_bind(struct gs_source *s, struct gs_source_bind *b, size_t n)
{ return s->v->bind(s, b, n); }
static inline int gs_source_preempt(struct gs_source *s, const char *key, const char *uid, const char *preemptor,
                                    bool *recreated)
{ return s->v->preempt(s, key, uid, preemptor, recreated); }
static inline void gs_source_interrupt(struct gs_source *s) { s->v->interrupt(s); }
static inline void gs_source_free(struct gs_source *s) { if (s) s->v->free(s); }

#endif
