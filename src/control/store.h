/*
 * store.h - the control plane's object store: keys to JSON objects, a global
 * resourceVersion, and a change stream for watches.
 *
 * Every write is one transaction that takes the next value of one global,
 * monotonically increasing counter as the object's resourceVersion (written
 * into metadata.resourceVersion as a string, as Kubernetes does). Writes are
 * conditional when the caller gives an expected version: a mismatch is
 * GS_ECONFLICT, which the API turns into 409 Conflict. A write returns only
 * after its transaction committed, so an acknowledged change survives a
 * crash of the process (and, with sync = full, of the machine).
 *
 * The change stream: every committed write also appends an event (ADDED,
 * MODIFIED, DELETED with the object's JSON text) to an in-memory ring of the
 * most recent events. Watchers read events after a version they already
 * have; a version older than the ring reaches back is GS_ERANGE (the API's
 * 410 Expired: the client lists again), as after a compaction in etcd.
 *
 * The interface is a small vtable so another backend (etcd) can follow; the
 * SQLite one (store_sqlite.c) keeps objects in one table of a WAL database in
 * the data directory. Thread-safe: any thread may call any function.
 */
#ifndef GS_CONTROL_STORE_H
#define GS_CONTROL_STORE_H

#include "core/error.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gs_store_ev { GS_STORE_ADDED, GS_STORE_MODIFIED, GS_STORE_DELETED };
const char *gs_store_ev_name(enum gs_store_ev t); /* "ADDED", "MODIFIED", "DELETED" */

struct gs_store_event {
    enum gs_store_ev type;
    int64_t rv;
    char *key;
    char *value; /* the object as JSON text (for DELETED: its last state, with the deletion's version);
                    a shared stored text (below): read-only */
};
void gs_store_events_free(struct gs_store_event *ev, size_t n);

/* A stored text: the compact JSON of one written version, shared by
 * reference between the change stream, the events handed out and a
 * create's reply. Read-only; released (not freed) by its holder. */
void gs_store_text_release(char *text);
size_t gs_store_text_len(char *text);
/* A new stored text: a copy of len bytes (NUL added), one reference; NULL
 * when out of memory. For other producers of change streams (the kube
 * source's informers), whose events are freed with gs_store_events_free. */
char *gs_store_text_new(const char *json, size_t len);
/* Another reference to text (returned). */
char *gs_store_text_ref(char *text);

/* Read-modify-write step for gs_store_mutate: cur is the stored object (a
 * private copy, NULL when absent); return 0 with *out set to the new object
 * (a new reference; may be cur itself, increfed), GS_STORE_UNCHANGED to write
 * nothing (the change would be a no-op), or a negative code to abort (passed
 * on). Runs under the store's write lock: keep it short. */
#define GS_STORE_UNCHANGED 1
typedef int (*gs_store_mutate_fn)(json_t *cur, json_t **out, void *arg);

/* One request of gs_store_mutate_batch: key, fn and arg in; out (a new
 * reference or NULL), rv and err (what gs_store_mutate would have returned)
 * out; with want_text, text is the stored text of what was written (NULL
 * when nothing was; release it). next_ and done_ are the store's. */
struct gs_store_mut {
    const char *key;
    gs_store_mutate_fn fn;
    void *arg;
    bool want_text;
    json_t *out;
    char *text;
    int64_t rv;
    int err;
    struct gs_store_mut *next_;
    bool done_;
};

/* Called by gs_store_list for each object in key order; nonzero stops. */
typedef int (*gs_store_list_fn)(const char *key, json_t *obj, void *arg);

struct gs_store_opts {
    const char *dir;        /* data directory (created when absent) */
    bool sync_full;         /* fsync every commit (power-loss safe); else crash-of-process safe */
    size_t ring_events;     /* change-stream memory in events; 0: 10000, growing (store_sqlite.c) */
    /* Start even when the store is older than its high-water mark (see
     * "Self-checks" below): number new writes above every version ever
     * handed out. */
    bool accept_regression;
    int record_ms;               /* how often the committed version is recorded; 0 = 200 ms */
    unsigned checkpoint_commits; /* commits between WAL checkpoints; 0 = 1000 */
    int checkpoint_idle_ms;      /* checkpoint what is left once writes pause this long; 0 = 10 s */
    struct gs_diags *diags;      /* why the store refused to open, for the operator; may be NULL */
};

/* How the store is doing, for /readyz and /metrics. */
struct gs_store_health {
    bool writable;  /* the last write (or probe) committed */
    char why[512];  /* when not writable: what failed */
    size_t corrupt; /* stored objects that are not valid JSON (skipped in lists) */
};

struct gs_store;

struct gs_store_vtbl {
    int (*create)(struct gs_store *s, const char *key, json_t *obj, int64_t *rv);
    int (*create_text)(struct gs_store *s, const char *key, json_t *obj, int64_t *rv, char **text); /* may be NULL */
    int (*update)(struct gs_store *s, const char *key, json_t *obj, int64_t expect_rv, int64_t *rv);
    int (*mutate)(struct gs_store *s, const char *key, gs_store_mutate_fn fn, void *arg, json_t **out, int64_t *rv);
    int (*mutate_batch)(struct gs_store *s, struct gs_store_mut *m, size_t n); /* NULL: one mutate each */
    int (*remove)(struct gs_store *s, const char *key, int64_t expect_rv, json_t **old, int64_t *rv);
    int (*get)(struct gs_store *s, const char *key, json_t **obj, int64_t *rv);
    int (*list)(struct gs_store *s, const char *prefix, gs_store_list_fn fn, void *arg, int64_t *rv);
    int (*events)(struct gs_store *s, int64_t *after, const char *prefix, int timeout_ms, const atomic_bool *stop,
                  struct gs_store_event **evs, size_t *n);
    int64_t (*current_rv)(struct gs_store *s);
    void (*interrupt)(struct gs_store *s);
    void (*close)(struct gs_store *s);
    void (*health)(struct gs_store *s, bool probe, struct gs_store_health *out); /* may be NULL */
    int (*set_fence)(struct gs_store *s, const char *key, int64_t mod_rv); /* may be NULL */
};

struct gs_store {
    const struct gs_store_vtbl *v;
};

/* Opens (or creates) the SQLite store in o->dir. 0, GS_EIO (with errno-ish
 * detail logged) or GS_ENOMEM. */
int gs_store_open_sqlite(const struct gs_store_opts *o, struct gs_store **out);

/* The etcd backend (store_etcd.c; docs/CONTROL_PLANE.md "Store backends:
 * SQLite and etcd"): every key is stored under <prefix>/<key> in etcd as the
 * object's compact JSON; resourceVersion is the key's mod_revision, the
 * store's version etcd's revision. Writes are Txns comparing the key's
 * revision (create: create_revision == 0; update, delete, mutate:
 * mod_revision == the one read), so several servers can share one etcd.
 * One etcd Watch on <prefix>/ feeds the same kind of event ring as SQLite's. */
enum gs_store_kind { GS_STORE_SQLITE = 0, GS_STORE_ETCD };

struct gs_store_etcd_opts {
    const char *const *endpoints; /* "http://host:port" / "https://host:port" */
    size_t n_endpoints;
    const char *cafile, *certfile, *keyfile; /* TLS; NULL: none (certfile and keyfile together) */
    const char *prefix;           /* key prefix; NULL: "/registry" */
    /* Every interval, compact etcd's history to the revision seen one interval
     * earlier (as kube-apiserver does); watches from before it get GS_ERANGE.
     * 0: 5 minutes; < 0: never. */
    int64_t compaction_interval_ms;
    size_t ring_events;           /* change-stream memory in events; 0 = 10000 */
    int call_timeout_ms;          /* one etcd call, all endpoints together; 0: 5000 */
    int open_timeout_ms;          /* how long open waits for etcd to answer; 0: 10000 */
    struct gs_diags *diags;       /* why the store refused to open; may be NULL */
};

/* Connects to etcd (waiting up to open_timeout_ms for a quorum's answer)
 * and starts the watch and compaction threads. 0; GS_EINVAL (bad options,
 * named in diags); GS_EIO / GS_ETIMEDOUT with the endpoints and etcd's
 * error in diags; GS_ENOMEM. */
int gs_store_open_etcd(const struct gs_store_etcd_opts *o, struct gs_store **out);

/* Fencing for a leader's writes: from now on every write through s is also
 * conditional on key's mod_revision being mod_rv (key as given to the
 * store, e.g. "leases/kube-system/gpusched-control-plane"); once another
 * writer changed key, writes fail with GS_EFENCED and change nothing
 * (not GS_ECONFLICT: the object itself did not change, so a caller that
 * waits for news of the object after a conflict must retry instead).
 * mod_rv 0 turns it off. GS_EUNSUPPORTED for backends without it (SQLite:
 * one process owns the store). */
static inline int gs_store_set_fence(struct gs_store *s, const char *key, int64_t mod_rv);

/* Creates key; sets obj's metadata.resourceVersion. GS_EEXIST when present. */
static inline int gs_store_create(struct gs_store *s, const char *key, json_t *obj, int64_t *rv)
{ return s->v->create(s, key, obj, rv); }
/* gs_store_create that also hands back the stored text (release it): the
 * API's reply to a create is exactly that text. *text is NULL on error or
 * when the backend cannot share it (the caller then encodes obj itself). */
static inline int gs_store_create_text(struct gs_store *s, const char *key, json_t *obj, int64_t *rv, char **text)
{
    *text = NULL;
    return s->v->create_text ? s->v->create_text(s, key, obj, rv, text) : s->v->create(s, key, obj, rv);
}
/* Replaces key when its version is expect_rv (0: any). GS_ENOENT, GS_ECONFLICT. Sets metadata.resourceVersion. */
static inline int gs_store_update(struct gs_store *s, const char *key, json_t *obj, int64_t expect_rv, int64_t *rv)
{ return s->v->update(s, key, obj, expect_rv, rv); }
/* Atomic read-modify-write (see gs_store_mutate_fn). Creates the key when it was
 * absent and fn returned an object. *out (may be NULL) gets the stored object;
 * when fn answered GS_STORE_UNCHANGED it is the current one, *rv its version, and 0 is returned. */
static inline int gs_store_mutate(struct gs_store *s, const char *key, gs_store_mutate_fn fn, void *arg,
                                  json_t **out, int64_t *rv)
{ return s->v->mutate(s, key, fn, arg, out, rv); }
/* Several read-modify-writes applied in order, committed together (SQLite;
 * on etcd each is its own Txn, and requests on distinct keys run at once on
 * several threads, so their fns must not share unguarded state): each is
 * acknowledged (its err and out set, its event visible) only after the one
 * commit that stores it, so a crash loses none that was reported done. A
 * failed fn affects only its own request; a failed commit fails them all
 * (returned: GS_EIO or GS_ENOMEM; else 0, with per-request codes in err). */
static inline int gs_store_mutate_batch(struct gs_store *s, struct gs_store_mut *m, size_t n)
{
    if (s->v->mutate_batch) return s->v->mutate_batch(s, m, n);
    for (size_t i = 0; i < n; i++) {
        m[i].out = NULL;
        m[i].err = s->v->mutate(s, m[i].key, m[i].fn, m[i].arg, &m[i].out, &m[i].rv);
    }
    return 0;
}
/* Deletes key when its version is expect_rv (0: any). *old (may be NULL) gets the last state. */
static inline int gs_store_delete(struct gs_store *s, const char *key, int64_t expect_rv, json_t **old, int64_t *rv)
{ return s->v->remove(s, key, expect_rv, old, rv); }
/* The object (new reference) and its version. GS_ENOENT when absent. */
static inline int gs_store_get(struct gs_store *s, const char *key, json_t **obj, int64_t *rv)
{ return s->v->get(s, key, obj, rv); }
/* Every object whose key starts with prefix, and the store's version at that
 * moment (a consistent snapshot: a watch from *rv sees every later change). */
static inline int gs_store_list(struct gs_store *s, const char *prefix, gs_store_list_fn fn, void *arg, int64_t *rv)
{ return s->v->list(s, prefix, fn, arg, rv); }
/* Events with version > *after and key starting with prefix (NULL: all), in
 * order, at most 1024 at a time. *after moves to the last version looked at,
 * matching or not, so the next call goes on from there. Waits up to
 * timeout_ms for the first; returns 0 with *n == 0 on timeout, on
 * gs_store_interrupt() or when *stop is set. GS_ERANGE when events after
 * *after are no longer held. Free with gs_store_events_free. */
static inline int gs_store_events(struct gs_store *s, int64_t *after, const char *prefix, int timeout_ms,
                                  const atomic_bool *stop, struct gs_store_event **evs, size_t *n)
{ return s->v->events(s, after, prefix, timeout_ms, stop, evs, n); }
static inline int64_t gs_store_current_rv(struct gs_store *s) { return s->v->current_rv(s); }
/* Wakes every thread blocked in gs_store_events (shutdown). */
static inline void gs_store_interrupt(struct gs_store *s) { s->v->interrupt(s); }
static inline void gs_store_close(struct gs_store *s) { if (s) s->v->close(s); }

/* The store's health. With probe, a store whose last write failed tries a
 * tiny write (no new version, no event) to learn whether it works again. */
static inline void gs_store_health(struct gs_store *s, bool probe, struct gs_store_health *out)
{
    *out = (struct gs_store_health){.writable = true};
    if (s->v->health) s->v->health(s, probe, out);
}

static inline int gs_store_set_fence(struct gs_store *s, const char *key, int64_t mod_rv)
{ return s->v->set_fence ? s->v->set_fence(s, key, mod_rv) : GS_EUNSUPPORTED; }

/*--- Self-checks ---
 *
 * The SQLite store checkpoints its WAL into store.db every
 * checkpoint_commits commits (and once writes pause for checkpoint_idle_ms
 * with commits left in the WAL), with a TRUNCATE checkpoint at close, so the WAL stays small and
 * the data file holds nearly everything.
 *
 * It also keeps a high-water mark in <dir>/store.hwm (store_hwm.c), outside
 * the SQLite files: `committed`, the last committed version (recorded every
 * record_ms while writes happen, and at close), and `reserved`, a version no
 * write ever passed (moved up a block at a time, before the commit that
 * would pass it). At open, a store whose counter is below `committed` lost
 * acknowledged writes (its WAL was truncated, corrupted or deleted, or an
 * older store.db was put back): it is refused (GS_ESTATE, with the story in
 * o->diags and the log) unless accept_regression, which starts it with the
 * counter moved above `reserved`, so no version a client saw is reused and
 * every older watch gets 410.
 *
 * A stored row whose value is not JSON is reported by key in the log (once),
 * counted (gs_store_health), skipped by lists, and read as GS_EPARSE. */
struct gs_store_hwm {
    int64_t committed, reserved;
};
/* Parses the file's text: 0, or GS_EPARSE with why (line and problem). */
int gs_store_hwm_parse(const char *text, size_t len, struct gs_store_hwm *out, char *why, size_t why_len);
/* The file's text into buf: its length, or GS_ERANGE when buf is too small. */
int gs_store_hwm_format(const struct gs_store_hwm *h, char *buf, size_t len);
/* Reads <path>: 0, GS_ENOENT when absent, GS_EIO / GS_EPARSE with why. */
int gs_store_hwm_read(const char *path, struct gs_store_hwm *out, char *why, size_t why_len);
/* Replaces <dir>/store.hwm atomically (temporary file, fsync, rename, directory fsync). */
int gs_store_hwm_write(const char *dir, const struct gs_store_hwm *h, char *why, size_t why_len);

/* metadata.resourceVersion of obj as a number; 0 when absent or not a number. */
int64_t gs_store_obj_rv(const json_t *obj);

#endif
