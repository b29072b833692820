/*
 * store_etcd.c - the store (store.h) on etcd's v3 API, so that several
 * servers can share one replicated store (docs/CONTROL_PLANE.md "Store
 * backends: SQLite and etcd").
 *
 * Layout as kube-apiserver's: store key K lives at <prefix>/K, its value
 * the object's compact JSON without metadata.resourceVersion (etcd assigns
 * the revision only at commit); every object handed out carries
 * resourceVersion = the key's mod_revision. Writes are single Txns whose
 * compares make them conditional (create: create_revision == 0; update,
 * delete and mutate: mod_revision == the version expected or read); the
 * failure branch reads the key back, so a mutate that lost a race runs its
 * fn again on the new state without another round trip. No lock is held
 * across a network call: concurrent writers meet in etcd's compares.
 *
 * The change stream: one watch thread keeps one etcd Watch on <prefix>/
 * (prev_kv, progress notifications) from the revision the store started
 * at, and appends each event to a ring like the SQLite store's. `rv` is how
 * far the ring is complete (every event at or below it is in the ring or
 * older than `floor`); it moves with events and with progress
 * notifications, so watchers' bookmarks advance when writes elsewhere in
 * etcd move the revision. `known` is the highest revision any etcd answer
 * showed: a watcher asking for events after a revision it got from a list
 * or a write (above `rv`, at most `known`) waits for the watch to catch up
 * rather than being treated as asking from the future. When the watch
 * breaks (a member died), the thread reopens it on the next endpoint from
 * rv + 1: nothing lost, nothing twice. If etcd compacted past rv meanwhile,
 * the ring is emptied and `floor` raised: older watchers get GS_ERANGE and
 * relist, as with kube-apiserver.
 *
 * etcd 3.4 answers a progress request with the store's current revision,
 * which can overtake events still queued for the watcher; so a progress
 * revision is applied only after the stream stayed quiet for a moment, and
 * an event that still arrives at or below rv empties the ring (watchers
 * relist) instead of being lost silently.
 *
 * Compaction: every interval a thread compacts etcd to the revision it saw
 * one interval earlier and drops the ring's events at or below it.
 *
 * Fencing (gs_store_set_fence): every write's Txn also compares the fence
 * key's mod_revision; a failed fence compare is GS_EFENCED, never retried.
 */
#include "control/store_etcd.h"

#include "control/etcd.h"
#include "core/log.h"
#include "etcdserverpb/rpc.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_EVENTS_PER_CALL 1024
#define LIST_PAGE 500
#define MUTATE_TRIES 32
#define BATCH_THREADS 16               /* requests of one mutate_batch in flight at once */
#define BATCH_MAX_PARALLEL_KEYS 1024    /* larger batches run in order (no key check) */
#define PROGRESS_EVERY_NS 1000000000LL  /* ask for progress after this long without a message */
#define PROGRESS_SETTLE_NS 300000000LL  /* quiet time before a progress revision is trusted */
#define RETRY_PAUSE_NS 200000000LL      /* between watch reopen attempts */

struct ring_ev {
    enum gs_store_ev type;
    int64_t rv;
    char *key;
    char *value;
};

struct et_store {
    struct gs_store base;
    struct gs_etcd *c;
    char *prefix; /* "/registry/" */
    size_t plen;
    int call_ms;
    /* Event ring (under emu). */
    pthread_mutex_t emu;
    pthread_cond_t ecv; /* CLOCK_MONOTONIC */
    struct ring_ev *ring;
    size_t cap, start, count;
    int64_t floor, rv, known, compacted;
    int64_t ev_rv; /* the revision of the last watch event (held or skipped) */
    unsigned interrupts;
    /* Threads. */
    atomic_bool stop;
    pthread_mutex_t tmu; /* the open watch (for cancel at close) and the threads' sleeps */
    pthread_cond_t tcv;  /* CLOCK_MONOTONIC */
    struct gs_etcd_watch *w;
    pthread_t wt, ct;
    bool wt_on, ct_on;
    int64_t compact_ns;
    /* Fence (under fmu). */
    pthread_mutex_t fmu;
    char *fence_key;
    int64_t fence_rv;
    int64_t fence_logged; /* the fence value last logged as refusing (fmu): one line per fence, not per write */
    /* Health (under lmu). */
    pthread_mutex_t lmu;
    bool werr;
    char why[512];
    size_t corrupt;
};

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static struct timespec ts_at(int64_t ns) { return (struct timespec){ns / 1000000000, ns % 1000000000}; }

/*--- Objects and texts ---*/

static int set_rv(json_t *obj, int64_t rv)
{
    json_t *md = json_object_get(obj, "metadata");
    if (!json_is_object(md)) {
        md = json_object();
        if (!md || json_object_set_new(obj, "metadata", md)) return GS_ENOMEM;
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, rv);
    return json_object_set_new(md, "resourceVersion", json_string(buf)) ? GS_ENOMEM : 0;
}

/* obj as compact JSON in a shared text (one reference), or NULL. */
static char *obj_text(const json_t *obj)
{
    char *j = json_dumps(obj, JSON_COMPACT);
    if (!j) return NULL;
    char *t = gs_store_text_new(j, strlen(j));
    free(j);
    return t;
}

/* What etcd stores: obj's JSON without metadata.resourceVersion (malloc'd). */
static char *stored_json(json_t *obj)
{
    json_t *md = json_object_get(obj, "metadata");
    json_t *old = json_is_object(md) ? json_incref(json_object_get(md, "resourceVersion")) : NULL;
    if (old) json_object_del(md, "resourceVersion");
    char *j = json_dumps(obj, JSON_COMPACT);
    if (old) json_object_set_new(md, "resourceVersion", old);
    return j;
}

int gs__etcd_kv_object(const struct Mvccpb__KeyValue *kv, int64_t rv, json_t **out)
{
    *out = NULL;
    json_t *o = kv->value.data && kv->value.len ? json_loadb((const char *)kv->value.data, kv->value.len, 0, NULL)
                                                : NULL;
    if (!json_is_object(o)) {
        json_decref(o);
        return GS_EPARSE;
    }
    if (set_rv(o, rv)) {
        json_decref(o);
        return GS_ENOMEM;
    }
    *out = o;
    return 0;
}

/* A stand-in for a deleted object whose last state etcd no longer has:
 * its name (and namespace) from the key "resource/[namespace/]name". */
static json_t *name_only(const char *key)
{
    const char *a = strchr(key, '/');
    const char *b = a ? strchr(a + 1, '/') : NULL;
    json_t *md = json_object();
    if (!md) return NULL;
    if (b) {
        json_object_set_new(md, "namespace", json_stringn(a + 1, (size_t)(b - a - 1)));
        json_object_set_new(md, "name", json_string(b + 1));
    } else {
        json_object_set_new(md, "name", json_string(a ? a + 1 : key));
    }
    return json_pack("{s:o}", "metadata", md);
}

int gs__etcd_event_convert(const char *prefix, size_t plen, const struct Mvccpb__Event *ev,
                           struct gs_store_event *out)
{
    *out = (struct gs_store_event){0};
    const Mvccpb__KeyValue *kv = ev->kv;
    if (!kv || !kv->key.data || kv->key.len <= plen || memcmp(kv->key.data, prefix, plen) || kv->mod_revision <= 0)
        return GS_EINVAL;
    if (memchr(kv->key.data, 0, kv->key.len)) return GS_EINVAL;
    char *key = strndup((const char *)kv->key.data + plen, kv->key.len - plen);
    if (!key) return GS_ENOMEM;
    json_t *o = NULL;
    int err = 0;
    enum gs_store_ev type;
    if (ev->type == MVCCPB__EVENT__EVENT_TYPE__DELETE) {
        type = GS_STORE_DELETED;
        if (ev->prev_kv) {
            err = gs__etcd_kv_object(ev->prev_kv, kv->mod_revision, &o);
        } else {
            o = name_only(key);
            err = !o ? GS_ENOMEM : set_rv(o, kv->mod_revision);
        }
    } else if (ev->type == MVCCPB__EVENT__EVENT_TYPE__PUT) {
        type = kv->create_revision == kv->mod_revision ? GS_STORE_ADDED : GS_STORE_MODIFIED;
        err = gs__etcd_kv_object(kv, kv->mod_revision, &o);
    } else {
        err = GS_EINVAL;
        type = GS_STORE_MODIFIED;
    }
    char *text = err ? NULL : obj_text(o);
    json_decref(o);
    if (!err && !text) err = GS_ENOMEM;
    if (err) {
        free(key);
        return err;
    }
    *out = (struct gs_store_event){type, kv->mod_revision, key, text};
    return 0;
}

/*--- Health ---*/

/* Remembers whether the last call reached etcd's quorum (cleared by the next that did). */
static void note_call(struct et_store *s, int err, const char *why)
{
    bool failed = err == GS_EIO || err == GS_ETIMEDOUT || err == GS_EPERM;
    pthread_mutex_lock(&s->lmu);
    if (!failed) {
        s->werr = false;
    } else {
        s->werr = true;
        snprintf(s->why, sizeof s->why, "etcd is failing: %s", why && *why ? why : gs_strerror(err));
    }
    pthread_mutex_unlock(&s->lmu);
}

/* Every answer's header moves `known` (see the top of the file). */
static void saw_rev(struct et_store *s, const Etcdserverpb__ResponseHeader *h)
{
    if (!h) return;
    pthread_mutex_lock(&s->emu);
    if (h->revision > s->known) s->known = h->revision;
    pthread_mutex_unlock(&s->emu);
}

static int call_resent(struct et_store *s, const char *method, const void *req, const ProtobufCMessageDescriptor *d,
                       void **resp, bool idempotent, bool *resent)
{
    char why[700] = "";
    int err = gs_etcd_unary(s->c, method, req, d, (ProtobufCMessage **)resp, idempotent, s->call_ms, resent, why,
                            sizeof why);
    note_call(s, err, why);
    if (err && err != GS_ERANGE)
        gs_log(GS_LOG_WARN, "store: etcd call failed", "method", method, "error", why, NULL);
    return err;
}

static int call(struct et_store *s, const char *method, const void *req, const ProtobufCMessageDescriptor *d,
                void **resp, bool idempotent)
{
    return call_resent(s, method, req, d, resp, idempotent, NULL);
}

/*--- Keys ---*/

/* <prefix><key> (malloc'd). */
static char *full_key(const struct et_store *s, const char *key, size_t *len)
{
    size_t kl = strlen(key);
    char *k = malloc(s->plen + kl + 1);
    if (!k) return NULL;
    memcpy(k, s->prefix, s->plen);
    memcpy(k + s->plen, key, kl + 1);
    *len = s->plen + kl;
    return k;
}

/* The end of the range of keys starting with p (len bytes): p with its last
 * byte below 0xff incremented, the rest dropped (etcd's "prefix end"). */
static char *prefix_end(const char *p, size_t len, size_t *out_len)
{
    char *e = malloc(len + 1);
    if (!e) return NULL;
    memcpy(e, p, len);
    for (size_t i = len; i-- > 0;) {
        if ((unsigned char)e[i] < 0xff) {
            e[i]++;
            *out_len = i + 1;
            return e;
        }
    }
    e[0] = 0; /* all 0xff: every key from p on */
    *out_len = 1;
    return e;
}

static ProtobufCBinaryData bin(const char *p, size_t n) { return (ProtobufCBinaryData){n, (uint8_t *)(uintptr_t)p}; }

/*--- Writes ---*/

enum cmp { CMP_ABSENT, CMP_PRESENT, CMP_MOD };

struct txn_res {
    Etcdserverpb__TxnResponse *r;
    int64_t rev;                     /* the write's revision (succeeded) */
    const Mvccpb__KeyValue *cur;     /* failed: the key now (NULL when absent) */
    const Mvccpb__KeyValue *prev;    /* a delete that succeeded: the state before */
    bool fenced;                     /* failed because the fence key changed */
    bool resent;                     /* sent again after a failed connection (gs_etcd_unary) */
};

/* One conditional write of key (put value, or delete when value is NULL). */
static int txn(struct et_store *s, const char *key, enum cmp how, int64_t mod, const char *value, size_t vlen,
               struct txn_res *res)
{
    *res = (struct txn_res){0};
    size_t kl = 0;
    char *k = full_key(s, key, &kl);
    if (!k) return GS_ENOMEM;
    pthread_mutex_lock(&s->fmu);
    char *fk = s->fence_key ? strdup(s->fence_key) : NULL;
    int64_t frv = s->fence_rv;
    pthread_mutex_unlock(&s->fmu);
    if (s->fence_key && !fk) {
        free(k);
        return GS_ENOMEM;
    }
    Etcdserverpb__Compare c[2] = {ETCDSERVERPB__COMPARE__INIT, ETCDSERVERPB__COMPARE__INIT};
    Etcdserverpb__Compare *cp[2] = {&c[0], &c[1]};
    c[0].key = bin(k, kl);
    if (how == CMP_MOD) {
        c[0].target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
        c[0].result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
        c[0].target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
        c[0].mod_revision = mod;
    } else {
        c[0].target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
        c[0].result = how == CMP_ABSENT ? ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL
                                        : ETCDSERVERPB__COMPARE__COMPARE_RESULT__GREATER;
        c[0].target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
        c[0].create_revision = 0;
    }
    if (fk) {
        c[1].key = bin(fk, strlen(fk));
        c[1].target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
        c[1].result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
        c[1].target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
        c[1].mod_revision = frv;
    }
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    Etcdserverpb__DeleteRangeRequest del = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    Etcdserverpb__RequestOp ok = ETCDSERVERPB__REQUEST_OP__INIT, *okp = &ok;
    if (value) {
        put.key = bin(k, kl);
        put.value = bin(value, vlen);
        ok.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
        ok.request_put = &put;
    } else {
        del.key = bin(k, kl);
        del.prev_kv = 1;
        ok.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
        ok.request_delete_range = &del;
    }
    Etcdserverpb__RangeRequest rk = ETCDSERVERPB__RANGE_REQUEST__INIT, rf = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rk.key = bin(k, kl);
    if (fk) rf.key = bin(fk, strlen(fk));
    Etcdserverpb__RequestOp f[2] = {ETCDSERVERPB__REQUEST_OP__INIT, ETCDSERVERPB__REQUEST_OP__INIT};
    Etcdserverpb__RequestOp *fp[2] = {&f[0], &f[1]};
    f[0].request_case = f[1].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    f[0].request_range = &rk;
    f[1].request_range = &rf;
    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    t.n_compare = fk ? 2 : 1;
    t.compare = cp;
    t.n_success = 1;
    t.success = &okp;
    t.n_failure = fk ? 2 : 1;
    t.failure = fp;
    int err = call_resent(s, "/etcdserverpb.KV/Txn", &t, &etcdserverpb__txn_response__descriptor, (void **)&res->r,
                          false, &res->resent);
    free(k);
    free(fk);
    if (err) return err;
    Etcdserverpb__TxnResponse *r = res->r;
    saw_rev(s, r->header);
    res->rev = r->header ? r->header->revision : 0;
    if (r->succeeded) {
        /* A success without the operation's result is not one: etcd 3.4
         * answered so, right after a restart, a Txn it never applied. The
         * write's outcome is unknown to the caller (as after a timeout). */
        int want = value ? ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT
                         : ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE;
        if (r->n_responses != 1 || (int)r->responses[0]->response_case != want) {
            gs_log(GS_LOG_WARN, "store: etcd answered a write without its result; reported as failed", "key", key,
                   NULL);
            note_call(s, GS_EIO, "etcd answered a write without its result");
            return GS_EIO;
        }
        if (!value) {
            Etcdserverpb__DeleteRangeResponse *d = r->responses[0]->response_delete_range;
            if (d->n_prev_kvs) res->prev = d->prev_kvs[0];
        }
        return 0;
    }
    for (size_t i = 0; i < r->n_responses; i++)
        if (r->responses[i]->response_case != ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE) return GS_EIO;
    if (r->n_responses >= 1 && r->responses[0]->response_range->n_kvs) res->cur = r->responses[0]->response_range->kvs[0];
    if (fk) {
        const Etcdserverpb__RangeResponse *fr = r->n_responses >= 2 ? r->responses[1]->response_range : NULL;
        res->fenced = !fr || !fr->n_kvs || fr->kvs[0]->mod_revision != frv;
    }
    return 0;
}

static void txn_done(struct txn_res *res)
{
    if (res->r) protobuf_c_message_free_unpacked(&res->r->base, NULL);
    res->r = NULL;
}

static void log_fenced(struct et_store *s, const char *key)
{
    pthread_mutex_lock(&s->fmu);
    bool first = s->fence_logged != s->fence_rv;
    s->fence_logged = s->fence_rv;
    pthread_mutex_unlock(&s->fmu);
    if (first)
        gs_log(GS_LOG_WARN,
               "store: write refused: this handle's fence key changed (another replica leads now); "
               "further refusals under this fence are not logged",
               "key", key, NULL);
}

/* create / update: obj is written; its metadata.resourceVersion set to the new version. */
static int put_obj(struct et_store *s, const char *key, json_t *obj, enum cmp how, int64_t mod, int64_t *rv)
{
    char *j = stored_json(obj);
    if (!j) return GS_ENOMEM;
    struct txn_res res;
    size_t jl = strlen(j);
    int err = txn(s, key, how, mod, j, jl, &res);
    /* Our own write, seen again: a Txn sent to a member that committed it
     * and then died before answering is sent once more to the next member
     * (gs_etcd_unary on UNAVAILABLE), whose compare then fails on the first
     * attempt's result. The value holds the object's uid and timestamps, so
     * byte equality names this very write, never another writer's. */
    bool echo = !err && res.resent && !res.r->succeeded && !res.fenced && res.cur && res.cur->value.len == jl &&
                !memcmp(res.cur->value.data, j, jl);
    free(j);
    if (echo) {
        gs_log(GS_LOG_INFO, "store: an etcd write retried on another member had been applied", "key", key, NULL);
        res.rev = res.cur->mod_revision;
    } else if (!err && !res.r->succeeded) {
        if (res.fenced) log_fenced(s, key), err = GS_EFENCED;
        else if (how == CMP_ABSENT) err = GS_EEXIST;
        else err = res.cur ? GS_ECONFLICT : GS_ENOENT;
    }
    if (!err) err = set_rv(obj, res.rev);
    if (!err && rv) *rv = res.rev;
    txn_done(&res);
    return err;
}

static int et_create(struct gs_store *b, const char *key, json_t *obj, int64_t *rv)
{
    return put_obj((struct et_store *)b, key, obj, CMP_ABSENT, 0, rv);
}

static int et_update(struct gs_store *b, const char *key, json_t *obj, int64_t expect_rv, int64_t *rv)
{
    return put_obj((struct et_store *)b, key, obj, expect_rv ? CMP_MOD : CMP_PRESENT, expect_rv, rv);
}

static int et_remove(struct gs_store *b, const char *key, int64_t expect_rv, json_t **old, int64_t *rv)
{
    struct et_store *s = (struct et_store *)b;
    if (old) *old = NULL;
    struct txn_res res;
    int err = txn(s, key, expect_rv ? CMP_MOD : CMP_PRESENT, expect_rv, NULL, 0, &res);
    if (!err && !res.r->succeeded) {
        if (res.fenced) log_fenced(s, key), err = GS_EFENCED;
        else err = res.cur ? GS_ECONFLICT : GS_ENOENT;
    }
    if (!err && old && res.prev) {
        err = gs__etcd_kv_object(res.prev, res.rev, old);
        if (err == GS_EPARSE) err = 0; /* deleted all the same; nothing to show of it */
    }
    if (!err && rv) *rv = res.rev;
    txn_done(&res);
    return err;
}

/* Reads key: *kv (in *resp, free it) or NULL when absent. */
static int get_kv(struct et_store *s, const char *key, Etcdserverpb__RangeResponse **resp, const Mvccpb__KeyValue **kv)
{
    *resp = NULL;
    *kv = NULL;
    size_t kl = 0;
    char *k = full_key(s, key, &kl);
    if (!k) return GS_ENOMEM;
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = bin(k, kl);
    int err = call(s, "/etcdserverpb.KV/Range", &r, &etcdserverpb__range_response__descriptor, (void **)resp, true);
    free(k);
    if (err) return err;
    saw_rev(s, (*resp)->header);
    if ((*resp)->n_kvs) *kv = (*resp)->kvs[0];
    return 0;
}

static void note_corrupt(struct et_store *s, const char *key)
{
    pthread_mutex_lock(&s->lmu);
    s->corrupt++;
    pthread_mutex_unlock(&s->lmu);
    gs_log(GS_LOG_ERROR, "store: the value in etcd is not a JSON object: skipped in lists, reads of it fail; "
           "delete the key or put a valid object there", "key", key, NULL);
}

static int et_get(struct gs_store *b, const char *key, json_t **obj, int64_t *rv)
{
    struct et_store *s = (struct et_store *)b;
    *obj = NULL;
    Etcdserverpb__RangeResponse *resp = NULL;
    const Mvccpb__KeyValue *kv = NULL;
    int err = get_kv(s, key, &resp, &kv);
    if (!err && !kv) err = GS_ENOENT;
    if (!err && (err = gs__etcd_kv_object(kv, kv->mod_revision, obj)) == GS_EPARSE) note_corrupt(s, key);
    if (!err && rv) *rv = kv->mod_revision;
    if (resp) protobuf_c_message_free_unpacked(&resp->base, NULL);
    return err;
}

static int et_mutate(struct gs_store *b, const char *key, gs_store_mutate_fn fn, void *arg, json_t **out, int64_t *rv)
{
    struct et_store *s = (struct et_store *)b;
    if (out) *out = NULL;
    Etcdserverpb__RangeResponse *got = NULL;
    const Mvccpb__KeyValue *kv = NULL;
    int err = get_kv(s, key, &got, &kv);
    struct txn_res res = {0};
    for (int tries = 0; !err; tries++) {
        if (tries == MUTATE_TRIES) {
            gs_log(GS_LOG_WARN, "store: read-modify-write kept losing to other writers; giving up", "key", key, NULL);
            err = GS_ECONFLICT;
            break;
        }
        json_t *cur = NULL, *next = NULL;
        int64_t cur_rv = kv ? kv->mod_revision : 0;
        if (kv && (err = gs__etcd_kv_object(kv, cur_rv, &cur))) {
            if (err == GS_EPARSE) note_corrupt(s, key);
            break;
        }
        err = fn(cur, &next, arg);
        if (err == GS_STORE_UNCHANGED) {
            err = cur ? 0 : GS_ENOENT;
            if (cur && rv) *rv = cur_rv;
            if (cur && out) *out = json_incref(cur);
            json_decref(cur);
            json_decref(next);
            break;
        }
        json_decref(cur);
        if (!err && !next) err = GS_EINVAL;
        if (err) {
            json_decref(next);
            break;
        }
        char *j = stored_json(next);
        txn_done(&res);
        err = j ? txn(s, key, kv ? CMP_MOD : CMP_ABSENT, cur_rv, j, strlen(j), &res) : GS_ENOMEM;
        free(j);
        if (!err && res.r->succeeded) {
            err = set_rv(next, res.rev);
            if (!err && rv) *rv = res.rev;
            if (!err && out) *out = next;
            else json_decref(next);
            break;
        }
        json_decref(next);
        if (err) break;
        if (res.fenced) {
            log_fenced(s, key);
            err = GS_EFENCED;
            break;
        }
        kv = res.cur; /* lost a race: again on what won, read back by the same Txn */
    }
    txn_done(&res);
    if (got) protobuf_c_message_free_unpacked(&got->base, NULL);
    return err;
}

static void batch_one(struct gs_store *b, struct gs_store_mut *m)
{
    m->out = NULL;
    m->text = NULL;
    m->rv = 0;
    m->err = et_mutate(b, m->key, m->fn, m->arg, &m->out, &m->rv);
    if (!m->err && m->want_text && m->out) m->text = obj_text(m->out);
}

struct batch_job {
    struct gs_store *b;
    struct gs_store_mut *m;
    size_t n;
    atomic_size_t next;
};

static void *batch_worker(void *arg)
{
    struct batch_job *j = arg;
    for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < j->n;) batch_one(j->b, &j->m[i]);
    return NULL;
}

/* True when no two requests name the same key (small batches only: the
 * scheduler's round of bindings). */
static bool keys_distinct(const struct gs_store_mut *m, size_t n)
{
    if (n > BATCH_MAX_PARALLEL_KEYS) return false;
    for (size_t i = 1; i < n; i++)
        for (size_t k = 0; k < i; k++)
            if (!strcmp(m[i].key, m[k].key)) return false;
    return true;
}

/* etcd cannot commit several read-modify-writes as one (each is its own
 * Txn on its own revision), so a batch is about latency: each request is a
 * read and a Txn through Raft, and one at a time a round of bindings waits
 * for every quorum fsync in turn. Requests on distinct keys therefore run
 * on up to BATCH_THREADS threads at once (etcd folds concurrent proposals
 * into one Raft entry); a batch that names a key twice runs in order. */
static int et_mutate_batch(struct gs_store *b, struct gs_store_mut *m, size_t n)
{
    size_t nt = n < BATCH_THREADS ? n : BATCH_THREADS;
    if (nt < 2 || !keys_distinct(m, n)) {
        for (size_t i = 0; i < n; i++) batch_one(b, &m[i]);
        return 0;
    }
    struct batch_job j = {.b = b, .m = m, .n = n};
    atomic_init(&j.next, 0);
    pthread_t th[BATCH_THREADS];
    size_t started = 0;
    for (; started + 1 < nt; started++)
        if (pthread_create(&th[started], NULL, batch_worker, &j)) break; /* fewer helpers: the rest runs here */
    batch_worker(&j);
    for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
    return 0;
}

/*--- Lists ---*/

static int et_list(struct gs_store *b, const char *prefix, gs_store_list_fn fn, void *arg, int64_t *rv)
{
    struct et_store *s = (struct et_store *)b;
    size_t kl = 0, el = 0;
    char *from = full_key(s, prefix ? prefix : "", &kl);
    char *end = from ? prefix_end(from, kl, &el) : NULL;
    if (!end) {
        free(from);
        return GS_ENOMEM;
    }
    int64_t at = 0;
    int err = 0;
    bool stop = false;
    while (!err && !stop) {
        Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
        r.key = bin(from, kl);
        r.range_end = bin(end, el);
        r.limit = LIST_PAGE;
        r.revision = at; /* every page at the first page's revision: one snapshot */
        Etcdserverpb__RangeResponse *resp = NULL;
        if ((err = call(s, "/etcdserverpb.KV/Range", &r, &etcdserverpb__range_response__descriptor, (void **)&resp,
                        true)))
            break;
        saw_rev(s, resp->header);
        if (!at) at = resp->header ? resp->header->revision : 0;
        for (size_t i = 0; i < resp->n_kvs && !stop; i++) {
            const Mvccpb__KeyValue *kv = resp->kvs[i];
            if (kv->key.len < s->plen) continue;
            char *key = strndup((const char *)kv->key.data + s->plen, kv->key.len - s->plen);
            json_t *o = NULL;
            int e = key ? gs__etcd_kv_object(kv, kv->mod_revision, &o) : GS_ENOMEM;
            if (e == GS_EPARSE) note_corrupt(s, key);
            else if (e) err = e;
            else stop = fn(key, o, arg) != 0;
            json_decref(o);
            free(key);
        }
        if (!err && !stop && resp->more && resp->n_kvs) { /* the next page starts just after the last key */
            const Mvccpb__KeyValue *last = resp->kvs[resp->n_kvs - 1];
            char *nf = malloc(last->key.len + 1);
            if (!nf) err = GS_ENOMEM;
            else {
                memcpy(nf, last->key.data, last->key.len);
                nf[last->key.len] = 0;
                free(from);
                from = nf;
                kl = last->key.len + 1;
            }
        } else {
            stop = true;
        }
        protobuf_c_message_free_unpacked(&resp->base, NULL);
    }
    free(from);
    free(end);
    if (!err && rv) *rv = at;
    return err;
}

/*--- The event ring ---*/

static struct ring_ev *ring_at(struct et_store *s, size_t i) { return &s->ring[(s->start + i) % s->cap]; }

static void ring_drop_head(struct et_store *s)
{
    struct ring_ev *old = ring_at(s, 0);
    if (old->rv > s->floor) s->floor = old->rv;
    free(old->key);
    gs_store_text_release(old->value);
    s->start = (s->start + 1) % s->cap;
    s->count--;
}

/* Forgets every held event: watchers from before `to` must list again. Under emu. */
static void ring_reset(struct et_store *s, int64_t to)
{
    while (s->count) ring_drop_head(s);
    if (to > s->floor) s->floor = to;
    if (to > s->rv) s->rv = to;
    if (s->rv > s->known) s->known = s->rv;
    pthread_cond_broadcast(&s->ecv);
}

/* Appends one converted event (takes its key and value). Under emu. */
static void ring_push(struct et_store *s, struct gs_store_event *e)
{
    bool same_rev = s->ev_rv == e->rv; /* more of one Txn's events */
    s->ev_rv = e->rv;
    if (e->rv < s->rv || (e->rv == s->rv && !same_rev)) {
        /* An event below what the ring already claimed complete: some
         * watcher may have gone past it. Make them all list again. */
        char a[32], b[32];
        snprintf(a, sizeof a, "%" PRId64, e->rv);
        snprintf(b, sizeof b, "%" PRId64, s->rv);
        gs_log(GS_LOG_WARN, "store: etcd delivered an event below the watch's progress; watchers will list again",
               "event_rv", a, "progress_rv", b, NULL);
        ring_reset(s, s->rv);
        free(e->key);
        gs_store_text_release(e->value);
        return;
    }
    if (s->count == s->cap) ring_drop_head(s);
    *ring_at(s, s->count) = (struct ring_ev){e->type, e->rv, e->key, e->value};
    s->count++;
    s->rv = e->rv;
    if (s->rv > s->known) s->known = s->rv;
    pthread_cond_broadcast(&s->ecv);
}

static int head_rev(struct et_store *s, int64_t *rev);

/* Events after *after (see gs_store_events). Under emu. */
static int collect(struct et_store *s, int64_t *after, const char *prefix, struct gs_store_event **evs, size_t *n)
{
    if (*after < s->floor) return GS_ERANGE;
    /* First held event above *after (binary search: versions ascend). */
    size_t lo = 0, hi = s->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ring_at(s, mid)->rv <= *after) lo = mid + 1;
        else hi = mid;
    }
    size_t plen = prefix ? strlen(prefix) : 0, cap = 0;
    size_t i = lo;
    for (; i < s->count; i++) {
        struct ring_ev *e = ring_at(s, i);
        if (*n >= MAX_EVENTS_PER_CALL && e->rv != *after) break; /* never split one revision */
        *after = e->rv;
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
        o->value = gs_store_text_ref(e->value);
        (*n)++;
        if (!o->key) return GS_ENOMEM;
    }
    if (i == s->count && s->rv > *after) *after = s->rv;
    return 0;
}

static int et_events(struct gs_store *b, int64_t *after, const char *prefix, int timeout_ms, const atomic_bool *stop,
                     struct gs_store_event **evs, size_t *n)
{
    struct et_store *s = (struct et_store *)b;
    *evs = NULL;
    *n = 0;
    struct timespec dl = ts_at(mono_ns() + (int64_t)timeout_ms * 1000000);
    pthread_mutex_lock(&s->emu);
    bool ahead = *after > s->known;
    pthread_mutex_unlock(&s->emu);
    /* A version above any this server saw may come from another server on
     * the same etcd (a list there, a watch here): ask etcd before calling
     * it the future. */
    int64_t head;
    if (ahead) head_rev(s, &head);
    pthread_mutex_lock(&s->emu);
    unsigned gen = s->interrupts;
    int err = 0;
    for (;;) {
        /* From the future (above every revision etcd showed us): resume from now. */
        if (*after > s->known) *after = s->rv;
        err = collect(s, after, prefix, evs, n);
        if (err || *n || (stop && atomic_load(stop)) || gen != s->interrupts || atomic_load(&s->stop)) break;
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

static int64_t et_current_rv(struct gs_store *b)
{
    struct et_store *s = (struct et_store *)b;
    pthread_mutex_lock(&s->emu);
    int64_t rv = s->rv;
    pthread_mutex_unlock(&s->emu);
    return rv;
}

static void et_interrupt(struct gs_store *b)
{
    struct et_store *s = (struct et_store *)b;
    pthread_mutex_lock(&s->emu);
    s->interrupts++;
    pthread_cond_broadcast(&s->ecv);
    pthread_mutex_unlock(&s->emu);
}

/*--- The watch thread ---*/

/* Sleeps up to ns unless the store is closing; false when it is. */
static bool nap(struct et_store *s, int64_t ns)
{
    struct timespec dl = ts_at(mono_ns() + ns);
    pthread_mutex_lock(&s->tmu);
    while (!atomic_load(&s->stop) && pthread_cond_timedwait(&s->tcv, &s->tmu, &dl) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&s->tmu);
    return !atomic_load(&s->stop);
}

/* The store's current revision from etcd (a quorum read of nothing). */
static int head_rev(struct et_store *s, int64_t *rev)
{
    size_t el = 0;
    char *end = prefix_end(s->prefix, s->plen, &el);
    if (!end) return GS_ENOMEM;
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = bin(s->prefix, s->plen);
    r.range_end = bin(end, el);
    r.count_only = 1;
    Etcdserverpb__RangeResponse *resp = NULL;
    int err = call(s, "/etcdserverpb.KV/Range", &r, &etcdserverpb__range_response__descriptor, (void **)&resp, true);
    free(end);
    if (err) return err;
    *rev = resp->header ? resp->header->revision : 0;
    saw_rev(s, resp->header);
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    return 0;
}

/* A watch cancelled because its start was compacted: the ring restarts
 * above the compaction and older watchers relist. */
static void watch_compacted(struct et_store *s, int64_t compact_rev)
{
    char a[32];
    snprintf(a, sizeof a, "%" PRId64, compact_rev);
    gs_log(GS_LOG_WARN, "store: etcd compacted past the watch's position; watchers will list again",
           "compact_revision", a, NULL);
    pthread_mutex_lock(&s->emu);
    if (compact_rev > s->compacted) s->compacted = compact_rev;
    ring_reset(s, compact_rev - 1);
    pthread_mutex_unlock(&s->emu);
}

/* Handles one WatchResponse; false when the stream must be reopened. */
static bool watch_response(struct et_store *s, const Etcdserverpb__WatchResponse *r, int64_t *progress)
{
    if (r->canceled) {
        if (r->compact_revision > 0) watch_compacted(s, r->compact_revision);
        else
            gs_log(GS_LOG_WARN, "store: etcd cancelled the watch", "reason",
                   r->cancel_reason && *r->cancel_reason ? r->cancel_reason : "none given", NULL);
        return false;
    }
    if (r->created && !r->n_events) return true;
    if (!r->n_events) { /* a progress notification: trusted once the stream stays quiet */
        if (r->header && r->header->revision > *progress) *progress = r->header->revision;
        return true;
    }
    pthread_mutex_lock(&s->emu);
    for (size_t i = 0; i < r->n_events; i++) {
        struct gs_store_event e;
        int err = gs__etcd_event_convert(s->prefix, s->plen, r->events[i], &e);
        if (err) {
            const Mvccpb__KeyValue *kv = r->events[i]->kv;
            char k[200];
            snprintf(k, sizeof k, "%.*s", kv && kv->key.data ? (int)(kv->key.len < 190 ? kv->key.len : 190) : 0,
                     kv && kv->key.data ? (const char *)kv->key.data : "");
            gs_log(GS_LOG_ERROR, "store: an etcd event that is not a stored object was skipped", "key", k, "error",
                   gs_strerror(err), NULL);
            if (kv && kv->mod_revision > s->rv) s->rv = s->ev_rv = kv->mod_revision; /* the revision was seen */
            continue;
        }
        ring_push(s, &e);
    }
    if (*progress <= s->rv) *progress = 0;
    pthread_mutex_unlock(&s->emu);
    return true;
}

static void *watcher(void *arg)
{
    struct et_store *s = arg;
    bool down = false;
    while (!atomic_load(&s->stop)) {
        pthread_mutex_lock(&s->emu);
        int64_t from = s->rv + 1;
        pthread_mutex_unlock(&s->emu);
        size_t el = 0;
        char *end = prefix_end(s->prefix, s->plen, &el);
        if (!end) {
            nap(s, RETRY_PAUSE_NS);
            continue;
        }
        Etcdserverpb__WatchCreateRequest cr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
        cr.key = bin(s->prefix, s->plen);
        cr.range_end = bin(end, el);
        cr.start_revision = from;
        cr.progress_notify = 1;
        cr.prev_kv = 1;
        Etcdserverpb__WatchRequest wr = ETCDSERVERPB__WATCH_REQUEST__INIT;
        wr.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
        wr.create_request = &cr;
        struct gs_etcd_watch *w = NULL;
        char why[600] = "";
        int err = gs_etcd_watch_open(s->c, &wr.base, &w, why, sizeof why);
        free(end);
        if (!err) {
            pthread_mutex_lock(&s->tmu);
            if (atomic_load(&s->stop)) err = GS_ESTATE;
            else s->w = w;
            pthread_mutex_unlock(&s->tmu);
        }
        int64_t progress = 0, last_msg = mono_ns(), last_ask = 0;
        bool created = false;
        while (!err && !atomic_load(&s->stop)) {
            ProtobufCMessage *m = NULL;
            err = gs_etcd_watch_next(w, 250, &m, why, sizeof why);
            int64_t now = mono_ns();
            if (err == GS_ETIMEDOUT) {
                err = 0;
                if (progress && now - last_msg >= PROGRESS_SETTLE_NS) {
                    pthread_mutex_lock(&s->emu);
                    if (progress > s->rv) {
                        s->rv = progress;
                        if (s->rv > s->known) s->known = s->rv;
                        pthread_cond_broadcast(&s->ecv);
                    }
                    pthread_mutex_unlock(&s->emu);
                    progress = 0;
                }
                if (created && now - last_msg >= PROGRESS_EVERY_NS && now - last_ask >= PROGRESS_EVERY_NS) {
                    Etcdserverpb__WatchProgressRequest pr = ETCDSERVERPB__WATCH_PROGRESS_REQUEST__INIT;
                    Etcdserverpb__WatchRequest q = ETCDSERVERPB__WATCH_REQUEST__INIT;
                    q.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_PROGRESS_REQUEST;
                    q.progress_request = &pr;
                    gs_etcd_watch_send(w, &q.base);
                    last_ask = now;
                }
                continue;
            }
            if (err) break;
            last_msg = now;
            const Etcdserverpb__WatchResponse *r = (const Etcdserverpb__WatchResponse *)m;
            if (r->created && !created) {
                created = true;
                if (down) gs_log(GS_LOG_INFO, "store: etcd watch resumed", "endpoints", gs_etcd_endpoints(s->c), NULL);
                down = false;
            }
            if (!watch_response(s, r, &progress)) err = GS_EIO;
            protobuf_c_message_free_unpacked(m, NULL);
        }
        pthread_mutex_lock(&s->tmu);
        s->w = NULL;
        pthread_mutex_unlock(&s->tmu);
        gs_etcd_watch_close(w);
        if (atomic_load(&s->stop)) break;
        if (err && !down && why[0]) {
            gs_log(GS_LOG_WARN, "store: etcd watch broke; reopening it from the last revision seen", "error", why,
                   NULL);
            down = true;
        }
        nap(s, created ? RETRY_PAUSE_NS / 4 : RETRY_PAUSE_NS);
    }
    return NULL;
}

/*--- Compaction ---*/

static int compact(struct et_store *s, int64_t rev)
{
    Etcdserverpb__CompactionRequest r = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    r.revision = rev;
    Etcdserverpb__CompactionResponse *resp = NULL;
    int err = call(s, "/etcdserverpb.KV/Compact", &r, &etcdserverpb__compaction_response__descriptor, (void **)&resp,
                   true);
    if (resp) protobuf_c_message_free_unpacked(&resp->base, NULL);
    if (err == GS_ERANGE) err = 0; /* another replica compacted as far already */
    if (err) return err;
    pthread_mutex_lock(&s->emu);
    if (rev > s->compacted) s->compacted = rev;
    while (s->count && ring_at(s, 0)->rv <= rev) ring_drop_head(s);
    if (rev > s->floor) s->floor = rev;
    pthread_mutex_unlock(&s->emu);
    return 0;
}

static void *compactor(void *arg)
{
    struct et_store *s = arg;
    int64_t seen = 0; /* the revision one interval ago */
    while (nap(s, s->compact_ns)) {
        int64_t now = 0;
        if (head_rev(s, &now)) continue;
        if (seen > 0 && compact(s, seen) == 0) {
            char a[32];
            snprintf(a, sizeof a, "%" PRId64, seen);
            gs_log(GS_LOG_DEBUG, "store: compacted etcd's history", "revision", a, NULL);
        }
        seen = now;
    }
    return NULL;
}

/*--- Health, fence, close ---*/

static void et_health(struct gs_store *b, bool probe, struct gs_store_health *out)
{
    struct et_store *s = (struct et_store *)b;
    pthread_mutex_lock(&s->lmu);
    bool failing = s->werr;
    pthread_mutex_unlock(&s->lmu);
    int64_t rev;
    if (failing && probe) head_rev(s, &rev); /* a linearizable read needs the quorum, as a write does */
    pthread_mutex_lock(&s->lmu);
    out->writable = !s->werr;
    snprintf(out->why, sizeof out->why, "%s", s->werr ? s->why : "");
    out->corrupt = s->corrupt;
    pthread_mutex_unlock(&s->lmu);
}

static int et_set_fence(struct gs_store *b, const char *key, int64_t mod_rv)
{
    struct et_store *s = (struct et_store *)b;
    if (mod_rv < 0 || (mod_rv && (!key || !*key))) return GS_EINVAL;
    size_t kl = 0;
    char *k = mod_rv ? full_key(s, key, &kl) : NULL;
    if (mod_rv && !k) return GS_ENOMEM;
    pthread_mutex_lock(&s->fmu);
    free(s->fence_key);
    s->fence_key = k;
    s->fence_rv = mod_rv;
    pthread_mutex_unlock(&s->fmu);
    return 0;
}

static void et_close(struct gs_store *b)
{
    struct et_store *s = (struct et_store *)b;
    pthread_mutex_lock(&s->tmu);
    atomic_store(&s->stop, true);
    if (s->w) gs_etcd_watch_cancel(s->w);
    pthread_cond_broadcast(&s->tcv);
    pthread_mutex_unlock(&s->tmu);
    et_interrupt(b);
    if (s->wt_on) pthread_join(s->wt, NULL);
    if (s->ct_on) pthread_join(s->ct, NULL);
    gs_etcd_close(s->c);
    while (s->count) ring_drop_head(s);
    free(s->ring);
    free(s->prefix);
    free(s->fence_key);
    pthread_mutex_destroy(&s->emu);
    pthread_cond_destroy(&s->ecv);
    pthread_mutex_destroy(&s->tmu);
    pthread_cond_destroy(&s->tcv);
    pthread_mutex_destroy(&s->fmu);
    pthread_mutex_destroy(&s->lmu);
    free(s);
}

static const struct gs_store_vtbl et_vtbl = {
    .create = et_create,
    .update = et_update,
    .mutate = et_mutate,
    .mutate_batch = et_mutate_batch,
    .remove = et_remove,
    .get = et_get,
    .list = et_list,
    .events = et_events,
    .current_rv = et_current_rv,
    .interrupt = et_interrupt,
    .close = et_close,
    .health = et_health,
    .set_fence = et_set_fence,
};

static int check_prefix(const char *p, struct gs_diags *d)
{
    const char *why = NULL;
    if (!*p) why = "is empty";
    else if (p[0] != '/') why = "must start with '/'";
    else if (p[strlen(p) - 1] == '/') why = "must not end with '/' (the store adds it)";
    else if (strstr(p, "//")) why = "must not contain an empty segment (\"//\")";
    else
        for (const char *q = p; *q && !why; q++)
            if ((unsigned char)*q < 0x21 || *q == 0x7f) why = "must not contain spaces or control characters";
    if (!why) return 0;
    if (d) gs_diags_add(d, "etcd-prefix", "\"%s\" %s, e.g. /registry", p, why);
    return GS_EINVAL;
}

int gs_store_open_etcd(const struct gs_store_etcd_opts *o, struct gs_store **out)
{
    *out = NULL;
    const char *prefix = o->prefix ? o->prefix : "/registry";
    int err = check_prefix(prefix, o->diags);
    if (err) return err;
    struct et_store *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->base.v = &et_vtbl;
    s->cap = o->ring_events ? o->ring_events : 10000;
    s->call_ms = o->call_timeout_ms;
    s->compact_ns = (o->compaction_interval_ms ? o->compaction_interval_ms : 5 * 60 * 1000) * 1000000;
    pthread_mutex_init(&s->emu, NULL);
    pthread_mutex_init(&s->tmu, NULL);
    pthread_mutex_init(&s->fmu, NULL);
    pthread_mutex_init(&s->lmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->ecv, &ca);
    pthread_cond_init(&s->tcv, &ca);
    pthread_condattr_destroy(&ca);
    s->ring = calloc(s->cap, sizeof *s->ring);
    s->plen = strlen(prefix) + 1;
    s->prefix = malloc(s->plen + 1);
    if (!s->ring || !s->prefix) {
        et_close(&s->base);
        return GS_ENOMEM;
    }
    snprintf(s->prefix, s->plen + 1, "%s/", prefix);
    char why[700] = "";
    struct gs_etcd_opts eo = {o->endpoints, o->n_endpoints, o->cafile, o->certfile, o->keyfile, o->call_timeout_ms};
    if ((err = gs_etcd_open(&eo, &s->c, why, sizeof why))) {
        if (o->diags) gs_diags_add(o->diags, "etcd", "%s", why);
        et_close(&s->base);
        return err;
    }
    /* The first answer, within open_timeout_ms: etcd may still be electing a leader. */
    int saved = s->call_ms;
    s->call_ms = o->open_timeout_ms > 0 ? o->open_timeout_ms : 10000;
    int64_t rev = 0;
    err = head_rev(s, &rev);
    s->call_ms = saved;
    if (err) {
        pthread_mutex_lock(&s->lmu);
        if (o->diags)
            gs_diags_add(o->diags, "etcd", "cannot use etcd at %s: %s", gs_etcd_endpoints(s->c),
                         s->why[0] ? s->why : gs_strerror(err));
        pthread_mutex_unlock(&s->lmu);
        et_close(&s->base);
        return err;
    }
    s->rv = s->floor = s->known = rev;
    if (pthread_create(&s->wt, NULL, watcher, s)) err = GS_ENOMEM;
    else s->wt_on = true;
    if (!err && o->compaction_interval_ms >= 0) {
        if (pthread_create(&s->ct, NULL, compactor, s)) err = GS_ENOMEM;
        else s->ct_on = true;
    }
    if (err) {
        et_close(&s->base);
        return err;
    }
    char a[32];
    snprintf(a, sizeof a, "%" PRId64, rev);
    gs_log(GS_LOG_INFO, "store: on etcd", "endpoints", gs_etcd_endpoints(s->c), "prefix", prefix, "revision", a, NULL);
    *out = &s->base;
    return 0;
}
