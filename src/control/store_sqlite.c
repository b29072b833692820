/*
 * store_sqlite.c - the store (store.h) on SQLite in WAL mode.
 *
 * One table holds every object: key -> (resourceVersion, JSON text); one row
 * of a second table holds the global version counter. Each write is one
 * IMMEDIATE transaction on a writer connection that reads the current row,
 * checks the expected version, writes the row and the counter, and commits;
 * only then is the change appended to the event ring and the write
 * acknowledged. Gets use a second connection, lists one each from a small
 * pool (struct sq_lister): WAL lets them run beside a writer and beside one
 * another, and a list is one read transaction, so the version it reports
 * matches the rows it returned.
 *
 * The ring holds the last ring_events changes in version order. Versions are
 * contiguous (one per write), so finding where a watcher resumes is
 * arithmetic, and `floor` is the newest version no longer held: a watch from
 * before it must list again. After a restart the ring starts empty at the
 * stored counter.
 *
 * With the default size (ring_events 0) the ring starts at 10,000 events and
 * doubles, up to RING_MAX, whenever the event it would drop is younger than
 * RING_FRESH_NS, as kube-apiserver's watch cache sizes itself (75 s, 100 Ki
 * events): at 50,000 nodes a create and a binding per pod at a few thousand
 * pods/s passed 10,000 events in about 2 s, and every loop whose pass took
 * longer (the scheduler's, the claims controller's) fell behind, listed all
 * 500,000 pods again, and fell behind again. A size given in the options is
 * kept as it is.
 *
 * Self-checks (store.h "Self-checks"): a checkpointer thread with its own
 * connection records the committed version in store.hwm every record_ms
 * while writes happen and runs a PASSIVE checkpoint every checkpoint_commits
 * commits or once writes pause for checkpoint_idle_ms with commits left in
 * the WAL. PASSIVE
 * never waits for readers or writers, so it costs the writers nothing but
 * the copy; the WAL is reset by the next writer once the checkpoint caught
 * up. Counting commits (not a fixed timer alone) keeps the WAL to about a
 * thousand commits under load; the idle rule keeps a quiet server's data
 * file current. Recording is more frequent than checkpointing on purpose:
 * what a lost WAL takes away is exactly what was committed since the last
 * checkpoint, and the record is what shows it was there. Close runs a
 * TRUNCATE checkpoint and records the final version.
 */
#include "control/store.h"

#include "core/log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_EVENTS_PER_CALL 1024
#define RESERVE_BLOCK 10000 /* versions reserved per high-water rewrite */
#define RING_DEFAULT 10000
#define RING_MAX (100 * 1024)
#define RING_FRESH_NS (75 * (int64_t)1000000000)

struct ring_ev {
    enum gs_store_ev type;
    int64_t rv;
    char *key;
    char *value;
    int64_t at_ns; /* CLOCK_MONOTONIC when appended: whether the ring should grow */
};

/* A connection of its own for one list at a time (WAL readers do not block
 * one another): a list of every pod decodes hundreds of thousands of rows
 * and runs the caller's fn on each, seconds at 500,000 pods, and on the
 * shared read connection every get (the API's, a create's namespace
 * check) waited behind it. Kept in a small free list and reused. */
struct sq_lister {
    sqlite3 *db;
    sqlite3_stmt *list, *rv;
    struct sq_lister *next;
};
#define SQ_LISTERS_KEPT 8 /* idle list connections kept open; more are closed when done */

struct sq_store {
    struct gs_store base;
    sqlite3 *w, *r;
    pthread_mutex_t wmu, rmu;
    pthread_mutex_t lsmu;          /* the idle listers */
    struct sq_lister *listers;
    size_t nlisters;
    char *path;                    /* store.db, for new listers */
    bool sync_full;
    /* Group commit queue (see submit). */
    pthread_mutex_t qmu;
    struct sq_waiter *waiters;     /* callers waiting on a leader, in arrival order (see submit) */
    struct gs_store_mut *qhead, *qtail;
    size_t qlen;
    bool leader, lingering, cut;
    pthread_cond_t acv;     /* arrivals, for a lingering leader (CLOCK_MONOTONIC) */
    int64_t last_commit_ns; /* when the last group finished (under qmu) */
    double avg_group;       /* single requests (not batches) per group, moving average (under qmu) */
    size_t qsingles;        /* single requests queued */
    sqlite3_stmt *w_get, *w_ins, *w_upd, *w_del, *w_rv, *r_get, *r_rv;
    sqlite3_stmt *w_begin, *w_commit; /* prepared once: every write group runs both */
    int64_t rv; /* under wmu and emu for writes; read under either */
    /* Event ring. */
    pthread_mutex_t emu;
    pthread_cond_t ecv;
    struct ring_ev *ring;
    size_t cap, start, count;
    size_t cap_max; /* the ring may grow to this (cap itself: fixed size) */
    int64_t floor;
    unsigned interrupts;
    /* Self-checks. */
    char *dir;
    pthread_mutex_t hmu;     /* store.hwm and hwm (as last written) */
    struct gs_store_hwm hwm;
    sqlite3 *ck;             /* the checkpointer's connection */
    pthread_t ckt;
    bool ckt_on, ckstop;     /* ckstop under ckmu */
    pthread_mutex_t ckmu;
    pthread_cond_t ckcv;     /* CLOCK_MONOTONIC */
    int record_ms, idle_ms;
    unsigned ck_commits;
    _Atomic uint64_t commits;
    /* Health (under lmu). */
    pthread_mutex_t lmu;
    bool werr;
    char why[512];
    json_t *corrupt;         /* keys of rows that are not JSON, as a set */
};

const char *gs_store_ev_name(enum gs_store_ev t)
{
    return t == GS_STORE_ADDED ? "ADDED" : t == GS_STORE_MODIFIED ? "MODIFIED" : "DELETED";
}

/*--- Stored texts ---
 *
 * The JSON text of a written version is made once and shared, reference
 * counted, by the event ring, every copy of the event handed to a watcher
 * and the reply to a create: a watch fan-out would otherwise copy each
 * event once per watcher.
 */
struct text_hdr {
    atomic_size_t refs;
    size_t len;
};

static struct text_hdr *hdr_of(char *text) { return (struct text_hdr *)(void *)(text - sizeof(struct text_hdr)); }

static char *text_ref(char *text)
{
    atomic_fetch_add_explicit(&hdr_of(text)->refs, 1, memory_order_relaxed);
    return text;
}

void gs_store_text_release(char *text)
{
    if (text && atomic_fetch_sub_explicit(&hdr_of(text)->refs, 1, memory_order_acq_rel) == 1) free(hdr_of(text));
}

size_t gs_store_text_len(char *text) { return hdr_of(text)->len; }

char *gs_store_text_new(const char *json, size_t len)
{
    struct text_hdr *h = malloc(sizeof *h + len + 1);
    if (!h) return NULL;
    atomic_init(&h->refs, 1);
    h->len = len;
    char *t = (char *)(h + 1);
    memcpy(t, json, len);
    t[len] = 0;
    return t;
}

char *gs_store_text_ref(char *text) { return text_ref(text); }

struct dumpbuf {
    char *p; /* header, then text */
    size_t len, cap;
};

static int dump_cb(const char *buf, size_t n, void *arg)
{
    struct dumpbuf *b = arg;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap * 2 > b->len + n + 1 ? b->cap * 2 : b->len + n + 1;
        char *np = realloc(b->p, sizeof(struct text_hdr) + cap);
        if (!np) return -1;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + sizeof(struct text_hdr) + b->len, buf, n);
    b->len += n;
    return 0;
}

/* obj as compact JSON in a shared text (one reference), or NULL. */
static char *dump_text(const json_t *obj)
{
    struct dumpbuf b = {malloc(sizeof(struct text_hdr) + 2048), 0, 2048};
    if (!b.p || json_dump_callback(obj, dump_cb, &b, JSON_COMPACT)) {
        free(b.p);
        return NULL;
    }
    char *fit = realloc(b.p, sizeof(struct text_hdr) + b.len + 1); /* the ring holds thousands */
    if (fit) b.p = fit;
    struct text_hdr *h = (struct text_hdr *)(void *)b.p;
    atomic_init(&h->refs, 1);
    h->len = b.len;
    b.p[sizeof *h + b.len] = '\0';
    return b.p + sizeof *h;
}

void gs_store_events_free(struct gs_store_event *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(ev[i].key);
        gs_store_text_release(ev[i].value);
    }
    free(ev);
}

int64_t gs_store_obj_rv(const json_t *obj)
{
    const char *s = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (!s || !*s) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    return *end || errno || v < 0 ? 0 : v;
}

/*--- SQLite helpers ---*/

static int sq_err(sqlite3 *db, const char *what)
{
    gs_log(GS_LOG_ERROR, "store: sqlite failed", "op", what, "error", sqlite3_errmsg(db), NULL);
    return GS_EIO;
}

static int exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK) return 0;
    gs_log(GS_LOG_ERROR, "store: sqlite failed", "sql", sql, "error", msg ? msg : "?", NULL);
    sqlite3_free(msg);
    return GS_EIO;
}

static int prep(sqlite3 *db, const char *sql, sqlite3_stmt **st)
{
    return sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) == SQLITE_OK ? 0 : sq_err(db, sql);
}

/* Row of key on the writer connection: *rv and a malloc'd copy of the text (may be NULL). */
static int row_get(struct sq_store *s, sqlite3_stmt *st, const char *key, int64_t *rv, char **text)
{
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        sqlite3_reset(st);
        return GS_ENOENT;
    }
    if (rc != SQLITE_ROW) {
        sqlite3_reset(st);
        return sq_err(st == s->r_get ? s->r : s->w, "get");
    }
    *rv = sqlite3_column_int64(st, 0);
    if (text) {
        const char *t = (const char *)sqlite3_column_text(st, 1);
        *text = strdup(t ? t : "null");
    }
    sqlite3_reset(st);
    return text && !*text ? GS_ENOMEM : 0;
}

static void note_corrupt(struct sq_store *s, const char *key, const char *text);

/* Row of key decoded straight from SQLite's buffer: *rv and *obj (GS_EIO when not JSON). */
static int row_load(struct sq_store *s, sqlite3_stmt *st, const char *key, int64_t *rv, json_t **obj)
{
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    int err = rc == SQLITE_DONE ? GS_ENOENT : rc != SQLITE_ROW ? sq_err(st == s->r_get ? s->r : s->w, "get") : 0;
    if (!err) {
        *rv = sqlite3_column_int64(st, 0);
        const char *t = (const char *)sqlite3_column_text(st, 1);
        *obj = json_loadb(t ? t : "null", t ? (size_t)sqlite3_column_bytes(st, 1) : 4, JSON_DECODE_ANY, NULL);
        if (!*obj) {
            err = GS_EPARSE;
            note_corrupt(s, key, t);
        }
    }
    sqlite3_reset(st);
    return err;
}

/* A row whose value is not JSON: logged once per key and counted; lists
 * skip it, reads of it answer GS_EPARSE, everything else goes on. */
static void note_corrupt(struct sq_store *s, const char *key, const char *text)
{
    pthread_mutex_lock(&s->lmu);
    bool known = !s->corrupt || json_object_get(s->corrupt, key);
    if (!known) json_object_set_new(s->corrupt, key, json_true());
    pthread_mutex_unlock(&s->lmu);
    if (known) return;
    char head[64];
    snprintf(head, sizeof head, "%.60s", text ? text : "(null)");
    gs_log(GS_LOG_ERROR, "store: stored object is not valid JSON: skipped in lists, reads of it fail; delete the row "
           "or restore the store from a backup", "key", key, "value_starts", head, NULL);
}

/* Remembers why a write failed (cleared by the next commit): /readyz says it. */
static void note_write(struct sq_store *s, int err, const char *what, const char *detail)
{
    pthread_mutex_lock(&s->lmu);
    if (!err) s->werr = false;
    else {
        s->werr = true;
        snprintf(s->why, sizeof s->why, "store writes are failing: %s: %s", what, detail ? detail : gs_strerror(err));
    }
    pthread_mutex_unlock(&s->lmu);
}

/* Makes sure store.hwm reserves nrv before the commit that uses it. */
static int reserve(struct sq_store *s, int64_t nrv, char *why, size_t why_len)
{
    int err = 0;
    pthread_mutex_lock(&s->hmu);
    if (nrv > s->hwm.reserved) {
        struct gs_store_hwm h = {s->hwm.committed, nrv + RESERVE_BLOCK};
        if (!(err = gs_store_hwm_write(s->dir, &h, why, why_len))) s->hwm = h;
    }
    pthread_mutex_unlock(&s->hmu);
    if (err) gs_log(GS_LOG_ERROR, "store: cannot record the high-water mark", "error", why, NULL);
    return err;
}

/* Records rv as committed (it was: its event is published). */
static int record_committed(struct sq_store *s, int64_t rv)
{
    int err = 0;
    char why[512] = "";
    pthread_mutex_lock(&s->hmu);
    if (rv > s->hwm.committed) {
        struct gs_store_hwm h = {rv, s->hwm.reserved > rv ? s->hwm.reserved : rv};
        if (!(err = gs_store_hwm_write(s->dir, &h, why, sizeof why))) s->hwm = h;
    }
    pthread_mutex_unlock(&s->hmu);
    if (err) gs_log(GS_LOG_WARN, "store: cannot record the committed version", "error", why, NULL);
    return err;
}

static int step_done(sqlite3 *db, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE ? 0 : sq_err(db, what);
}

static int set_rv(json_t *obj, int64_t rv)
{
    json_t *md = json_object_get(obj, "metadata");
    if (!json_is_object(md)) {
        md = json_object();
        if (!md || json_object_set_new(obj, "metadata", md)) return GS_ENOMEM;
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)rv);
    return json_object_set_new(md, "resourceVersion", json_string(buf)) ? GS_ENOMEM : 0;
}

/*--- Event ring ---*/

/* Appends a change (takes key/value ownership). Called with wmu held, so versions arrive in order. */
static int64_t mono_ns(void);

/* Doubles the ring (up to cap_max), keeping the events in order; false when out of memory. */
static bool ring_grow(struct sq_store *s)
{
    size_t cap = s->cap * 2 < s->cap_max ? s->cap * 2 : s->cap_max;
    struct ring_ev *r = malloc(cap * sizeof *r);
    if (!r) return false;
    for (size_t i = 0; i < s->count; i++) r[i] = s->ring[(s->start + i) % s->cap];
    free(s->ring);
    s->ring = r, s->cap = cap, s->start = 0;
    return true;
}

static void ring_push(struct sq_store *s, enum gs_store_ev type, int64_t rv, char *key, char *value)
{
    int64_t now = mono_ns();
    pthread_mutex_lock(&s->emu);
    if (s->count == s->cap && s->cap < s->cap_max && now - s->ring[s->start].at_ns < RING_FRESH_NS) ring_grow(s);
    if (s->count == s->cap) {
        struct ring_ev *old = &s->ring[s->start];
        s->floor = old->rv;
        free(old->key);
        gs_store_text_release(old->value);
        s->start = (s->start + 1) % s->cap;
        s->count--;
    }
    s->ring[(s->start + s->count) % s->cap] = (struct ring_ev){type, rv, key, value, now};
    s->count++;
    s->rv = rv;
    pthread_cond_broadcast(&s->ecv);
    pthread_mutex_unlock(&s->emu);
}

static int collect(struct sq_store *s, int64_t *after, const char *prefix, struct gs_store_event **evs, size_t *n)
{
    if (*after < s->floor) return GS_ERANGE;
    size_t plen = prefix ? strlen(prefix) : 0;
    size_t cap = 0;
    for (int64_t v = *after + 1; v <= s->rv && *n < MAX_EVENTS_PER_CALL; v++) {
        struct ring_ev *e = &s->ring[(s->start + (size_t)(v - s->floor - 1)) % s->cap];
        *after = v;
        if (plen && strncmp(e->key, prefix, plen)) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            struct gs_store_event *nv = realloc(*evs, cap * sizeof *nv);
            if (!nv) return GS_ENOMEM;
            *evs = nv;
        }
        struct gs_store_event *o = &(*evs)[*n];
        o->type = e->type;
        o->rv = e->rv;
        o->key = strdup(e->key);
        o->value = text_ref(e->value);
        (*n)++;
        if (!o->key || !o->value) return GS_ENOMEM;
    }
    return 0;
}

static int sq_events(struct gs_store *base, int64_t *after, const char *prefix, int timeout_ms,
                     const atomic_bool *stop, struct gs_store_event **evs, size_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    *evs = NULL;
    *n = 0;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    int64_t ns = dl.tv_nsec + (int64_t)timeout_ms * 1000000;
    dl.tv_sec += ns / 1000000000;
    dl.tv_nsec = ns % 1000000000;
    pthread_mutex_lock(&s->emu);
    unsigned gen = s->interrupts;
    int err = 0;
    for (;;) {
        if (*after > s->rv) *after = s->rv; /* a version from the future: resume from now */
        err = collect(s, after, prefix, evs, n);
        if (err || *n || (stop && atomic_load(stop)) || gen != s->interrupts) break;
        if (pthread_cond_timedwait(&s->ecv, &s->emu, &dl) == ETIMEDOUT) {
            err = collect(s, after, prefix, evs, n);
            break;
        }
    }
    pthread_mutex_unlock(&s->emu);
    if (err) {
        gs_store_events_free(*evs, *n);
        *evs = NULL;
        *n = 0;
    }
    return err;
}

static void sq_interrupt(struct gs_store *base)
{
    struct sq_store *s = (struct sq_store *)base;
    pthread_mutex_lock(&s->emu);
    s->interrupts++;
    pthread_cond_broadcast(&s->ecv);
    pthread_mutex_unlock(&s->emu);
}

static int64_t sq_current_rv(struct gs_store *base)
{
    struct sq_store *s = (struct sq_store *)base;
    pthread_mutex_lock(&s->emu);
    int64_t rv = s->rv;
    pthread_mutex_unlock(&s->emu);
    return rv;
}

/*--- Writes ---*/

enum wop { W_CREATE, W_UPDATE, W_DELETE };

/* The body of every write, inside BEGIN IMMEDIATE under wmu. obj NULL for deletes. */
static int write_row(struct sq_store *s, enum wop op, const char *key, json_t *obj, int64_t nrv, char **text)
{
    if (op != W_DELETE) {
        int err = set_rv(obj, nrv);
        if (err) return err;
        *text = dump_text(obj);
        if (!*text) return GS_ENOMEM;
    }
    sqlite3_stmt *st = op == W_CREATE ? s->w_ins : op == W_UPDATE ? s->w_upd : s->w_del;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (op != W_DELETE) {
        sqlite3_bind_int64(st, 2, nrv);
        sqlite3_bind_text(st, 3, *text, -1, SQLITE_STATIC);
    }
    return step_done(s->w, st, "write");
}

static int write_counter(struct sq_store *s, int64_t nrv)
{
    sqlite3_bind_int64(s->w_rv, 1, nrv);
    return step_done(s->w, s->w_rv, "counter");
}

/* One whole write with wmu held: begin, check, write, commit, publish. For
 * deletes, *old_out gets the row before (its version rewritten to the deletion's). */
static int write_locked(struct sq_store *s, enum wop op, const char *key, json_t *obj, int64_t expect_rv,
                        int64_t *rv, json_t **old_out)
{
    int err = exec(s->w, "BEGIN IMMEDIATE");
    if (err) {
        note_write(s, err, "begin", sqlite3_errmsg(s->w));
        return err;
    }
    int64_t cur_rv = 0;
    char *cur = NULL, *text = NULL;
    err = row_get(s, s->w_get, key, &cur_rv, op == W_DELETE ? &cur : NULL);
    if (op == W_CREATE) err = err == GS_ENOENT ? 0 : err ? err : GS_EEXIST;
    else if (!err && expect_rv && expect_rv != cur_rv) err = GS_ECONFLICT;
    int64_t nrv = s->rv + 1;
    json_t *old = NULL;
    if (!err && op == W_DELETE) {
        old = json_loads(cur, JSON_DECODE_ANY, NULL);
        err = !old ? GS_EIO : set_rv(old, nrv);
        if (!err && !(text = dump_text(old))) err = GS_ENOMEM;
    }
    free(cur);
    char why[512] = "";
    bool store_err = false; /* a failure of the store itself (not of this request) */
    if (!err) store_err = (err = write_row(s, op, key, obj, nrv, &text)) != 0;
    if (!err) store_err = (err = write_counter(s, nrv)) != 0;
    if (!err) store_err = (err = reserve(s, nrv, why, sizeof why)) != 0;
    if (!err) store_err = (err = exec(s->w, "COMMIT")) != 0;
    if (store_err) note_write(s, err, "delete", why[0] ? why : sqlite3_errmsg(s->w));
    else if (!err) note_write(s, 0, NULL, NULL);
    if (err) {
        sqlite3_exec(s->w, "ROLLBACK", NULL, NULL, NULL);
        gs_store_text_release(text);
        json_decref(old);
        return err;
    }
    char *k = strdup(key);
    enum gs_store_ev t = op == W_CREATE ? GS_STORE_ADDED : op == W_UPDATE ? GS_STORE_MODIFIED : GS_STORE_DELETED;
    if (k) {
        ring_push(s, t, nrv, k, text);
    } else { /* cannot publish: make watchers relist rather than miss it */
        gs_store_text_release(text);
        pthread_mutex_lock(&s->emu);
        for (size_t i = 0; i < s->count; i++) {
            free(s->ring[(s->start + i) % s->cap].key);
            gs_store_text_release(s->ring[(s->start + i) % s->cap].value);
        }
        s->rv = s->floor = nrv;
        s->count = 0;
        pthread_mutex_unlock(&s->emu);
    }
    if (rv) *rv = nrv;
    if (old_out) *old_out = old;
    else json_decref(old);
    return 0;
}

static int do_write(struct sq_store *s, enum wop op, const char *key, json_t *obj, int64_t expect_rv, int64_t *rv,
                    json_t **old_out)
{
    pthread_mutex_lock(&s->wmu);
    int err = write_locked(s, op, key, obj, expect_rv, rv, old_out);
    pthread_mutex_unlock(&s->wmu);
    return err;
}


static int sq_mutate(struct gs_store *b, const char *key, gs_store_mutate_fn fn, void *arg, json_t **out, int64_t *rv);
static void submit(struct sq_store *s, struct gs_store_mut *m, size_t n, bool batch);

/* Creates and updates go through the group commit too (the API's creates are
 * the busiest writes); obj itself is what is stored, so its
 * metadata.resourceVersion is set in place as before. */
struct put_arg {
    json_t *obj;
    int64_t expect_rv;
    bool create;
};

static int put_fn(json_t *cur, json_t **out, void *arg)
{
    struct put_arg *p = arg;
    if (p->create && cur) return GS_EEXIST;
    if (!p->create && !cur) return GS_ENOENT;
    if (!p->create && p->expect_rv && gs_store_obj_rv(cur) != p->expect_rv) return GS_ECONFLICT;
    *out = json_incref(p->obj);
    return 0;
}

static int sq_create(struct gs_store *b, const char *key, json_t *obj, int64_t *rv)
{
    struct put_arg p = {obj, 0, true};
    return sq_mutate(b, key, put_fn, &p, NULL, rv);
}

static int sq_create_text(struct gs_store *b, const char *key, json_t *obj, int64_t *rv, char **text)
{
    struct put_arg p = {obj, 0, true};
    struct gs_store_mut m = {.key = key, .fn = put_fn, .arg = &p, .want_text = true};
    submit((struct sq_store *)b, &m, 1, false);
    json_decref(m.out);
    if (rv && !m.err) *rv = m.rv;
    *text = m.text;
    return m.err;
}

static int sq_update(struct gs_store *b, const char *key, json_t *obj, int64_t expect_rv, int64_t *rv)
{
    struct put_arg p = {obj, expect_rv, false};
    return sq_mutate(b, key, put_fn, &p, NULL, rv);
}

static int sq_remove(struct gs_store *b, const char *key, int64_t expect_rv, json_t **old, int64_t *rv)
{
    if (old) *old = NULL;
    return do_write((struct sq_store *)b, W_DELETE, key, NULL, expect_rv, rv, old);
}

/*--- Read-modify-writes, committed in groups ---*/

/* One fn's stored outcome, kept until the group's commit publishes it. */
struct staged {
    enum gs_store_ev type;
    int64_t rv;
    char *text;
};

/* Applies one request inside the open transaction; nrv is the next free
 * version, advanced when it writes. Errors of fn stay with the request; an
 * SQLite error is returned (the whole group then rolls back). */
static int apply_one(struct sq_store *s, struct gs_store_mut *m, int64_t *nrv, struct staged *sg)
{
    int64_t cur_rv = 0;
    json_t *cur = NULL, *next = NULL;
    int err = row_load(s, s->w_get, m->key, &cur_rv, &cur);
    if (err && err != GS_ENOENT) return m->err = err, err == GS_EIO || err == GS_EPARSE ? 0 : err;
    bool exists = !err;
    err = m->fn(cur, &next, m->arg);
    if (err == GS_STORE_UNCHANGED) {
        m->err = exists ? 0 : GS_ENOENT;
        if (exists) m->out = json_incref(cur), m->rv = cur_rv;
        json_decref(cur);
        return 0;
    }
    json_decref(cur);
    if (!err && !next) err = GS_EINVAL;
    if (err) {
        json_decref(next);
        m->err = err;
        return 0;
    }
    enum wop op = exists ? W_UPDATE : W_CREATE;
    err = write_row(s, op, m->key, next, *nrv + 1, &sg->text);
    if (err) {
        json_decref(next);
        return err;
    }
    *sg = (struct staged){op == W_CREATE ? GS_STORE_ADDED : GS_STORE_MODIFIED, ++*nrv, sg->text};
    m->out = next;
    m->rv = *nrv;
    m->err = 0;
    return 0;
}

/* Publishes a committed group's changes in version order under one lock. */
static void publish(struct sq_store *s, struct gs_store_mut **ms, struct staged *sg, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!sg[i].text) continue;
        if (ms[i]->want_text) ms[i]->text = text_ref(sg[i].text);
        char *k = strdup(ms[i]->key);
        if (!k) { /* cannot publish: make watchers relist rather than miss it */
            pthread_mutex_lock(&s->emu);
            for (size_t j = 0; j < s->count; j++) {
                free(s->ring[(s->start + j) % s->cap].key);
                gs_store_text_release(s->ring[(s->start + j) % s->cap].value);
            }
            s->rv = s->floor = sg[i].rv;
            s->count = 0;
            pthread_mutex_unlock(&s->emu);
            gs_store_text_release(sg[i].text);
            continue;
        }
        ring_push(s, sg[i].type, sg[i].rv, k, sg[i].text);
    }
}

/* Runs a group of requests as one transaction with wmu held: each request's
 * outcome is visible (event, reply) only after the commit that stores it. */
static void run_group(struct sq_store *s, struct gs_store_mut **ms, size_t n)
{
    struct staged *sg = calloc(n, sizeof *sg);
    int err = sg ? step_done(s->w, s->w_begin, "begin") : GS_ENOMEM;
    int64_t nrv = s->rv;
    for (size_t i = 0; i < n; i++) ms[i]->err = GS_EIO; /* until applied */
    for (size_t i = 0; !err && i < n; i++) err = apply_one(s, ms[i], &nrv, &sg[i]);
    char why[512] = "";
    if (!err && nrv != s->rv) err = write_counter(s, nrv);
    if (!err && nrv != s->rv) err = reserve(s, nrv, why, sizeof why);
    if (!err) err = step_done(s->w, s->w_commit, "commit");
    note_write(s, err, "commit", why[0] ? why : sqlite3_errmsg(s->w));
    if (!err) atomic_fetch_add(&s->commits, 1);
    if (err) {
        if (sg) sqlite3_exec(s->w, "ROLLBACK", NULL, NULL, NULL);
        for (size_t i = 0; i < n; i++) {
            if (sg) gs_store_text_release(sg[i].text);
            if (!ms[i]->err) json_decref(ms[i]->out);
            ms[i]->out = NULL;
            ms[i]->err = err;
        }
    } else {
        publish(s, ms, sg, n);
    }
    free(sg);
}

/* Group commit: a caller queues its requests; whoever finds no group running
 * takes everything queued (up to GROUP_MAX), runs it as one transaction and
 * wakes the waiters. Concurrent writers thus share one commit (and one WAL
 * append) instead of queueing for one each. */
#define GROUP_MAX 512

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Under a stream of writes a new leader waits a little for more requests
 * before it commits, as PostgreSQL's commit_delay does: each commit costs
 * about as much CPU as a whole small write (the WAL append, a share of the
 * checkpoint), so fuller groups leave more of the CPU to the requests
 * themselves. Only while several writers stream in (recent groups held more
 * than one single request on average and the last ended under
 * LINGER_WINDOW_NS ago: a lone writer never waits, even beside batches), only while the group is smaller than
 * LINGER_GROUP, and never longer than LINGER_NS; an arrival wakes it. A
 * batch (the scheduler's bindings) is a loop's critical path: it never
 * waits, and its arrival ends a wait. */
#define LINGER_NS 200000
#define LINGER_WINDOW_NS 2000000
#define LINGER_GROUP 4

static void linger(struct sq_store *s)
{
    int64_t now = mono_ns();
    if (s->qlen >= LINGER_GROUP || s->avg_group < 1.5 || now - s->last_commit_ns > LINGER_WINDOW_NS) return;
    int64_t end = now + LINGER_NS;
    struct timespec dl = {end / 1000000000, end % 1000000000};
    s->lingering = true;
    s->cut = false;
    while (s->qlen < LINGER_GROUP && !s->cut && pthread_cond_timedwait(&s->acv, &s->qmu, &dl) != ETIMEDOUT) {
    }
    s->lingering = false;
}

/* A caller of submit waiting while another leads: woken by its own
 * condition variable once all its requests committed, or to lead the next
 * group, so a commit wakes the callers it finished (and one more to lead)
 * rather than every waiting writer. */
struct sq_waiter {
    pthread_cond_t cv;
    struct sq_waiter *next;
    const struct gs_store_mut *m;
    size_t n;
    bool listed;
};

static bool all_done(const struct gs_store_mut *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!m[i].done_) return false;
    return true;
}

static void waiter_unlist(struct sq_store *s, struct sq_waiter *w)
{
    for (struct sq_waiter **p = &s->waiters; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    w->listed = false;
}

/* After a group committed (under qmu): wake the callers it finished and,
 * when requests are still queued, the first waiter left to lead them. */
static void wake_after_commit(struct sq_store *s)
{
    struct sq_waiter **p = &s->waiters;
    while (*p) {
        struct sq_waiter *w = *p;
        if (all_done(w->m, w->n)) {
            *p = w->next;
            w->listed = false;
            pthread_cond_signal(&w->cv);
        } else {
            p = &w->next;
        }
    }
    if (s->qhead && s->waiters) pthread_cond_signal(&s->waiters->cv);
}

static void submit(struct sq_store *s, struct gs_store_mut *m, size_t n, bool batch)
{
    struct sq_waiter me = {.m = m, .n = n};
    pthread_cond_init(&me.cv, NULL);
    pthread_mutex_lock(&s->qmu);
    for (size_t i = 0; i < n; i++) {
        m[i].done_ = false; /* set under qmu once the group that holds it committed */
        m[i].out = NULL;
        m[i].rv = 0;
        m[i].text = NULL;
        m[i].next_ = NULL;
        if (s->qtail) s->qtail->next_ = &m[i];
        else s->qhead = &m[i];
        s->qtail = &m[i];
    }
    s->qlen += n;
    s->qsingles += !batch;
    if (s->lingering) {
        s->cut |= batch;
        pthread_cond_signal(&s->acv);
    }
    for (;;) {
        if (all_done(m, n)) break;
        if (s->leader) {
            if (!me.listed) {
                struct sq_waiter **p = &s->waiters;
                while (*p) p = &(*p)->next;
                *p = &me;
                me.next = NULL;
                me.listed = true;
            }
            pthread_cond_wait(&me.cv, &s->qmu);
            continue;
        }
        if (me.listed) waiter_unlist(s, &me);
        s->leader = true;
        if (!batch) linger(s);
        struct gs_store_mut *g[GROUP_MAX];
        size_t k = 0;
        s->avg_group = s->avg_group * 0.875 + (double)s->qsingles * 0.125;
        s->qsingles = 0; /* all taken unless over GROUP_MAX: the rest then go uncounted (errs to not waiting) */
        while (s->qhead && k < GROUP_MAX) {
            g[k++] = s->qhead;
            s->qhead = s->qhead->next_;
        }
        s->qlen -= k;
        if (!s->qhead) s->qtail = NULL;
        pthread_mutex_unlock(&s->qmu);
        pthread_mutex_lock(&s->wmu);
        run_group(s, g, k);
        pthread_mutex_unlock(&s->wmu);
        pthread_mutex_lock(&s->qmu);
        for (size_t i = 0; i < k; i++) g[i]->done_ = true;
        s->leader = false;
        s->last_commit_ns = mono_ns();
        wake_after_commit(s);
    }
    if (me.listed) waiter_unlist(s, &me);
    pthread_mutex_unlock(&s->qmu);
    pthread_cond_destroy(&me.cv);
}

static int sq_mutate_batch(struct gs_store *b, struct gs_store_mut *m, size_t n)
{
    if (n) submit((struct sq_store *)b, m, n, true);
    for (size_t i = 0; i < n; i++)
        if (m[i].err == GS_EIO || m[i].err == GS_ENOMEM) return m[i].err;
    return 0;
}

static int sq_mutate(struct gs_store *b, const char *key, gs_store_mutate_fn fn, void *arg, json_t **out, int64_t *rv)
{
    struct gs_store_mut m = {.key = key, .fn = fn, .arg = arg};
    submit((struct sq_store *)b, &m, 1, false);
    if (out) *out = m.out;
    else json_decref(m.out);
    if (rv && !m.err) *rv = m.rv;
    return m.err;
}

/*--- Reads ---*/

static int sq_get(struct gs_store *b, const char *key, json_t **obj, int64_t *rv)
{
    struct sq_store *s = (struct sq_store *)b;
    *obj = NULL;
    int64_t v = 0;
    pthread_mutex_lock(&s->rmu);
    int err = row_load(s, s->r_get, key, &v, obj);
    pthread_mutex_unlock(&s->rmu);
    if (!err && rv) *rv = v;
    return err;
}

static int open_db(const char *path, bool sync_full, sqlite3 **db);

static void lister_close(struct sq_lister *l)
{
    if (!l) return;
    sqlite3_finalize(l->list);
    sqlite3_finalize(l->rv);
    sqlite3_close(l->db);
    free(l);
}

/* An idle lister, or a new one (NULL when it cannot be opened). */
static struct sq_lister *lister_get(struct sq_store *s)
{
    pthread_mutex_lock(&s->lsmu);
    struct sq_lister *l = s->listers;
    if (l) s->listers = l->next, s->nlisters--;
    pthread_mutex_unlock(&s->lsmu);
    if (l) return l;
    if (!(l = calloc(1, sizeof *l))) return NULL;
    if (open_db(s->path, s->sync_full, &l->db) ||
        prep(l->db, "SELECT key, value FROM objects WHERE key >= ?1 AND key < ?2 ORDER BY key", &l->list) ||
        prep(l->db, "SELECT v FROM meta WHERE k = 'rv'", &l->rv)) {
        lister_close(l);
        return NULL;
    }
    return l;
}

static void lister_put(struct sq_store *s, struct sq_lister *l)
{
    pthread_mutex_lock(&s->lsmu);
    bool keep = s->nlisters < SQ_LISTERS_KEPT;
    if (keep) l->next = s->listers, s->listers = l, s->nlisters++;
    pthread_mutex_unlock(&s->lsmu);
    if (!keep) lister_close(l);
}

static int sq_list(struct gs_store *b, const char *prefix, gs_store_list_fn fn, void *arg, int64_t *rv)
{
    struct sq_store *s = (struct sq_store *)b;
    size_t plen = prefix ? strlen(prefix) : 0;
    char *hi = malloc(plen + 2);
    if (!hi) return GS_ENOMEM;
    memcpy(hi, prefix ? prefix : "", plen + 1);
    if (plen && (unsigned char)hi[plen - 1] < 0xff) hi[plen - 1]++;
    else memcpy(hi + plen, "\xff", 2);
    struct sq_lister *l = lister_get(s);
    if (!l) {
        free(hi);
        return GS_EIO; /* open_db logged why */
    }
    int err = exec(l->db, "BEGIN"); /* one snapshot: the version and the rows agree */
    if (!err) {
        sqlite3_reset(l->rv);
        err = sqlite3_step(l->rv) == SQLITE_ROW ? 0 : sq_err(l->db, "rv");
        if (!err && rv) *rv = sqlite3_column_int64(l->rv, 0);
        sqlite3_reset(l->rv);
    }
    sqlite3_stmt *st = l->list;
    sqlite3_bind_text(st, 1, prefix ? prefix : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, hi, -1, SQLITE_STATIC);
    int rc = SQLITE_DONE;
    while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 1);
        json_t *o = t ? json_loadb(t, (size_t)sqlite3_column_bytes(st, 1), JSON_DECODE_ANY, NULL) : NULL;
        if (!o) { /* one bad row must not make the whole list unreadable */
            note_corrupt(s, (const char *)sqlite3_column_text(st, 0), t);
            continue;
        }
        int stop = fn((const char *)sqlite3_column_text(st, 0), o, arg);
        json_decref(o);
        if (stop) break;
    }
    if (!err && rc != SQLITE_ROW && rc != SQLITE_DONE) err = sq_err(l->db, "list");
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    sqlite3_exec(l->db, "COMMIT", NULL, NULL, NULL);
    lister_put(s, l);
    free(hi);
    return err;
}

/*--- Health and checkpoints ---*/

static void sq_health(struct gs_store *b, bool probe, struct gs_store_health *out)
{
    struct sq_store *s = (struct sq_store *)b;
    pthread_mutex_lock(&s->lmu);
    bool failing = s->werr;
    pthread_mutex_unlock(&s->lmu);
    if (failing && probe) { /* no new version, no event: only whether a commit goes through */
        pthread_mutex_lock(&s->wmu);
        int err = exec(s->w, "BEGIN IMMEDIATE; INSERT INTO meta VALUES('probe', 1) "
                             "ON CONFLICT(k) DO UPDATE SET v = v + 1; COMMIT");
        if (err) {
            note_write(s, err, "probe write", sqlite3_errmsg(s->w));
            sqlite3_exec(s->w, "ROLLBACK", NULL, NULL, NULL);
        } else {
            note_write(s, 0, NULL, NULL);
        }
        pthread_mutex_unlock(&s->wmu);
    }
    pthread_mutex_lock(&s->lmu);
    out->writable = !s->werr;
    snprintf(out->why, sizeof out->why, "%s", s->werr ? s->why : "");
    out->corrupt = json_object_size(s->corrupt);
    pthread_mutex_unlock(&s->lmu);
}

/* True when the whole WAL is now in store.db. */
static bool checkpoint(struct sq_store *s, sqlite3 *db, int mode)
{
    int nlog = 0, ndone = 0;
    int rc = sqlite3_wal_checkpoint_v2(db, "main", mode, &nlog, &ndone);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
        gs_log(GS_LOG_WARN, "store: WAL checkpoint failed", "dir", s->dir, "error", sqlite3_errmsg(db), NULL);
    return rc == SQLITE_OK && nlog == ndone;
}

static void *checkpointer(void *arg)
{
    struct sq_store *s = arg;
    uint64_t ck_at = 0, seen = 0; /* commits at the last checkpoint, at the last look (counted from the open) */
    int64_t quiet_since = mono_ns();
    pthread_mutex_lock(&s->ckmu);
    while (!s->ckstop) {
        int64_t end = mono_ns() + (int64_t)s->record_ms * 1000000;
        struct timespec dl = {end / 1000000000, end % 1000000000};
        pthread_cond_timedwait(&s->ckcv, &s->ckmu, &dl);
        if (s->ckstop) break;
        pthread_mutex_unlock(&s->ckmu);
        record_committed(s, sq_current_rv(&s->base));
        uint64_t c = atomic_load(&s->commits);
        int64_t now = mono_ns();
        if (c != seen) seen = c, quiet_since = now;
        if (c != ck_at && (c - ck_at >= s->ck_commits || now - quiet_since >= (int64_t)s->idle_ms * 1000000)) {
            if (checkpoint(s, s->ck, SQLITE_CHECKPOINT_PASSIVE)) ck_at = c; /* else again at the next look */
        }
        pthread_mutex_lock(&s->ckmu);
    }
    pthread_mutex_unlock(&s->ckmu);
    return NULL;
}

/*--- Open and close ---*/

static void sq_close(struct gs_store *b)
{
    struct sq_store *s = (struct sq_store *)b;
    if (s->ckt_on) {
        pthread_mutex_lock(&s->ckmu);
        s->ckstop = true;
        pthread_cond_signal(&s->ckcv);
        pthread_mutex_unlock(&s->ckmu);
        pthread_join(s->ckt, NULL);
        /* A clean stop leaves everything in store.db and an empty WAL. */
        checkpoint(s, s->w, SQLITE_CHECKPOINT_TRUNCATE);
        record_committed(s, s->rv);
    }
    sqlite3_close(s->ck);
    sqlite3_stmt *sts[] = {s->w_get, s->w_ins, s->w_upd, s->w_del, s->w_rv, s->r_get, s->r_rv,
                           s->w_begin, s->w_commit};
    for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++) sqlite3_finalize(sts[i]);
    while (s->listers) {
        struct sq_lister *l = s->listers;
        s->listers = l->next;
        lister_close(l);
    }
    free(s->path);
    sqlite3_close(s->r);
    sqlite3_close(s->w);
    for (size_t i = 0; i < s->count; i++) {
        free(s->ring[(s->start + i) % s->cap].key);
        gs_store_text_release(s->ring[(s->start + i) % s->cap].value);
    }
    free(s->ring);
    pthread_mutex_destroy(&s->wmu);
    pthread_mutex_destroy(&s->rmu);
    pthread_mutex_destroy(&s->lsmu);
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->acv);
    pthread_mutex_destroy(&s->emu);
    pthread_cond_destroy(&s->ecv);
    pthread_mutex_destroy(&s->hmu);
    pthread_mutex_destroy(&s->ckmu);
    pthread_cond_destroy(&s->ckcv);
    pthread_mutex_destroy(&s->lmu);
    json_decref(s->corrupt);
    free(s->dir);
    free(s);
}

static const struct gs_store_vtbl sq_vtbl = {
    .create = sq_create,
    .create_text = sq_create_text,
    .update = sq_update,
    .mutate = sq_mutate,
    .mutate_batch = sq_mutate_batch,
    .remove = sq_remove,
    .get = sq_get,
    .list = sq_list,
    .events = sq_events,
    .current_rv = sq_current_rv,
    .interrupt = sq_interrupt,
    .close = sq_close,
    .health = sq_health,
};

static int mkdirs(const char *dir)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return GS_ERANGE;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0700) && errno != EEXIST) return GS_EIO;
        *p = '/';
    }
    return mkdir(buf, 0700) && errno != EEXIST ? GS_EIO : 0;
}

static int open_db(const char *path, bool sync_full, sqlite3 **db)
{
    if (sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        gs_log(GS_LOG_ERROR, "store: cannot open", "path", path, "error", *db ? sqlite3_errmsg(*db) : "?", NULL);
        return GS_EIO;
    }
    sqlite3_busy_timeout(*db, 10000);
    int err = exec(*db, "PRAGMA journal_mode=WAL");
    if (!err) err = exec(*db, sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
    return err;
}

/* Refuses a store that went back in time (see store.h "Self-checks"). */
static int check_hwm(struct sq_store *s, const struct gs_store_opts *o)
{
    char path[4200], why[512] = "";
    snprintf(path, sizeof path, "%s/store.hwm", o->dir);
    struct gs_store_hwm h = {0};
    int err = gs_store_hwm_read(path, &h, why, sizeof why);
    if (err && err != GS_ENOENT) {
        gs_log(GS_LOG_ERROR, "store: unreadable high-water mark", "path", path, "error", why, NULL);
        if (o->diags)
            gs_diags_add(o->diags, path, "%s; the store cannot tell whether it lost acknowledged writes: restore the "
                         "data directory from a backup, or remove this file to start without the check", why);
        return err;
    }
    if (!err && s->rv < h.committed) {
        char msg[6144];
        snprintf(msg, sizeof msg, "the store is at resourceVersion %" PRId64 " but resourceVersion %" PRId64
                 " was acknowledged before (recorded in %s): acknowledged writes were lost - the write-ahead log "
                 "store.db-wal was truncated, corrupted or deleted while the server was stopped, or an older "
                 "store.db was put back. Restore the data directory from a backup; or start with "
                 "--accept-store-regression to serve what is left, numbering new writes above %" PRId64
                 " so that no version is reused (clients watching from before get 410 and list again)",
                 s->rv, h.committed, path, h.reserved);
        if (!o->accept_regression) {
            gs_log(GS_LOG_ERROR, "store: refusing a store that lost acknowledged writes", "dir", o->dir, "detail",
                   msg, NULL);
            if (o->diags) gs_diags_add(o->diags, o->dir, "%s", msg);
            return GS_ESTATE;
        }
        int64_t next = h.reserved > h.committed ? h.reserved : h.committed;
        char sql[96], from[32], to[32];
        snprintf(sql, sizeof sql, "UPDATE meta SET v = %" PRId64 " WHERE k = 'rv'", next);
        if ((err = exec(s->w, sql))) return err;
        snprintf(from, sizeof from, "%" PRId64, s->rv);
        snprintf(to, sizeof to, "%" PRId64, next);
        gs_log(GS_LOG_WARN, "store: accepted a store that lost acknowledged writes; new writes are numbered above "
               "every version handed out before", "store_rv", from, "acknowledged_rv", to, "dir", o->dir, NULL);
        s->rv = s->floor = next;
    }
    /* Reserve a first block now: from here on no commit passes hwm.reserved unrecorded. */
    s->hwm = (struct gs_store_hwm){s->rv, s->rv + RESERVE_BLOCK};
    if ((err = gs_store_hwm_write(o->dir, &s->hwm, why, sizeof why))) {
        gs_log(GS_LOG_ERROR, "store: cannot record the high-water mark", "error", why, NULL);
        if (o->diags) gs_diags_add(o->diags, path, "%s", why);
    }
    return err;
}

static int setup(struct sq_store *s, const struct gs_store_opts *o)
{
    char path[4200];
    int err = mkdirs(o->dir);
    if (err) {
        gs_log(GS_LOG_ERROR, "store: cannot create data directory", "dir", o->dir, "error", strerror(errno), NULL);
        return err;
    }
    snprintf(path, sizeof path, "%s/store.db", o->dir);
    if (!(s->path = strdup(path))) return GS_ENOMEM;
    s->sync_full = o->sync_full;
    if ((err = open_db(path, o->sync_full, &s->w))) return err;
    err = exec(s->w, "CREATE TABLE IF NOT EXISTS objects(key TEXT PRIMARY KEY, rv INTEGER NOT NULL, "
                     "value TEXT NOT NULL) WITHOUT ROWID;"
                     "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL);"
                     "INSERT OR IGNORE INTO meta VALUES('rv', 0);");
    if (!err) err = open_db(path, o->sync_full, &s->r);
    if (!err) err = prep(s->w, "SELECT rv, value FROM objects WHERE key = ?1", &s->w_get);
    if (!err) err = prep(s->w, "INSERT INTO objects(key, rv, value) VALUES(?1, ?2, ?3)", &s->w_ins);
    if (!err) err = prep(s->w, "UPDATE objects SET rv = ?2, value = ?3 WHERE key = ?1", &s->w_upd);
    if (!err) err = prep(s->w, "DELETE FROM objects WHERE key = ?1", &s->w_del);
    if (!err) err = prep(s->w, "UPDATE meta SET v = ?1 WHERE k = 'rv'", &s->w_rv);
    if (!err) err = prep(s->w, "BEGIN IMMEDIATE", &s->w_begin);
    if (!err) err = prep(s->w, "COMMIT", &s->w_commit);
    if (!err) err = prep(s->r, "SELECT rv, value FROM objects WHERE key = ?1", &s->r_get);
    if (!err) err = prep(s->r, "SELECT v FROM meta WHERE k = 'rv'", &s->r_rv);
    if (err) return err;
    if (sqlite3_step(s->r_rv) != SQLITE_ROW) return sq_err(s->r, "rv");
    s->rv = s->floor = sqlite3_column_int64(s->r_rv, 0);
    sqlite3_reset(s->r_rv);
    if ((err = check_hwm(s, o))) return err;
    return open_db(path, o->sync_full, &s->ck);
}

int gs_store_open_sqlite(const struct gs_store_opts *o, struct gs_store **out)
{
    *out = NULL;
    struct sq_store *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->base.v = &sq_vtbl;
    s->cap = o->ring_events ? o->ring_events : RING_DEFAULT;
    s->cap_max = o->ring_events ? s->cap : RING_MAX;
    pthread_mutex_init(&s->wmu, NULL);
    pthread_mutex_init(&s->rmu, NULL);
    pthread_mutex_init(&s->lsmu, NULL);
    pthread_mutex_init(&s->qmu, NULL);
    pthread_mutex_init(&s->emu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->ecv, &ca);
    pthread_cond_init(&s->acv, &ca);
    pthread_cond_init(&s->ckcv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&s->hmu, NULL);
    pthread_mutex_init(&s->ckmu, NULL);
    pthread_mutex_init(&s->lmu, NULL);
    s->record_ms = o->record_ms > 0 ? o->record_ms : 200;
    s->idle_ms = o->checkpoint_idle_ms > 0 ? o->checkpoint_idle_ms : 10000;
    s->ck_commits = o->checkpoint_commits ? o->checkpoint_commits : 1000;
    s->ring = calloc(s->cap, sizeof *s->ring);
    s->corrupt = json_object();
    s->dir = strdup(o->dir);
    int err = s->ring && s->corrupt && s->dir ? setup(s, o) : GS_ENOMEM;
    if (!err) err = pthread_create(&s->ckt, NULL, checkpointer, s) ? GS_ENOMEM : 0;
    s->ckt_on = !err;
    if (err) {
        sq_close(&s->base);
        return err;
    }
    *out = &s->base;
    return 0;
}
