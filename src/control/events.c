/*
 * events.c - the Event recorder, its store sink, the TTL sweep and the
 * events.k8s.io/v1 conversion; see events.h.
 *
 * Design. gs_event_record() builds the Event body (involvedObject, source,
 * reason, message, type, action, reporting fields) and its two keys in the
 * caller's thread, then appends it to a ring under a mutex held for a few
 * pointer moves: a producer (the scheduler loop between cycles) never waits
 * on SQLite. The recorder's thread pops records in order and runs the
 * correlator: the spam filter (token bucket per source + object), then the
 * aggregation table (key -> name, count, first and last time). Both tables
 * are jansson objects bounded at TABLE_MAX entries: stale entries are
 * pruned first, and if that is not enough the table starts again (an Event
 * then starts a new count, never a wrong one).
 *
 * Trade-offs: a full queue drops the newest record (counted) rather than
 * blocking; an aggregated write replaces the stored Event's fields by name
 * and, when the Event has expired meanwhile, creates a new one. Times are
 * the recorder's clock as wall nanoseconds, so a test can drive the windows
 * with a simulated clock.
 */
#include "control/events.h"

#include "control/api.h"
#include "control/apiserver.h"
#include "control/resources.h"
#include "control/store.h"
#include "core/log.h"
#include "govern/metrics.h" /* gs_mbuf */

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QUEUE_DEFAULT 1024
#define TABLE_MAX 4096
#define SWEEP_MAX_NS (60 * GS_NS_PER_SEC)
#define BATCH 256 /* records the thread takes from the queue at once */

/*--- Times ---*/

static void ts_text(int64_t ns, bool micro, char *buf, size_t len)
{
    time_t t = (time_t)(ns / GS_NS_PER_SEC);
    struct tm tm;
    gmtime_r(&t, &tm);
    char base[24];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    if (micro) snprintf(buf, len, "%s.%06lldZ", base, (long long)(ns % GS_NS_PER_SEC / 1000));
    else snprintf(buf, len, "%sZ", base);
}

/* RFC 3339 (fraction optional, Z) to wall ns; 0 when absent or malformed. */
static int64_t ts_parse(const char *s)
{
    struct tm tm = {0};
    const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!end) return 0;
    int64_t ns = (int64_t)timegm(&tm) * GS_NS_PER_SEC;
    if (*end == '.') {
        int64_t scale = GS_NS_PER_SEC / 10;
        for (end++; *end >= '0' && *end <= '9'; end++, scale /= 10) ns += (*end - '0') * scale;
    }
    return *end == 'Z' || *end == '+' || *end == '-' ? ns : 0;
}

/*--- The recorder ---*/

struct item {
    json_t *ev;      /* body without metadata, times or count */
    char *spam_key;  /* source + object */
    char *agg_key;   /* spam_key + type, reason, message */
    char *obj_name;  /* involvedObject.name */
    char *ns;        /* namespace of the Event */
    unsigned flags;
    int64_t t;       /* wall ns when recorded */
};

struct gs_recorder {
    struct gs_event_sink sink;
    struct gs_store *store;
    struct gs_clock real;
    const struct gs_clock *clock;
    int64_t wall_offset;
    bool sync;
    pthread_mutex_t mu; /* queue, counters, stop */
    pthread_cond_t cv, idle;
    struct item **q;
    size_t cap, head, n;
    uint64_t queued, done;
    bool stop, started;
    uint64_t errors_at_stop; /* write errors when stop was asked */
    pthread_t th;
    pthread_mutex_t wmu; /* correlator tables and the sink */
    json_t *agg;         /* agg_key -> {ns, name, count, first, last} */
    json_t *buckets;     /* spam_key -> {tokens, t} */
    int64_t ttl, sweep, next_sweep;
    int64_t last_name_t; /* time in the last name given (under wmu) */
    /* One batch's plans (under wmu), allocated once: a calloc this large
     * each batch has glibc consolidate its free lists each time. */
    struct plan *plans;
    struct gs_recorder_stats st;
};

static int64_t now_ns(const struct gs_recorder *r) { return gs_clock_now(r->clock) + r->wall_offset; }

static void item_free(struct item *it)
{
    if (!it) return;
    json_decref(it->ev);
    free(it->spam_key);
    free(it->agg_key);
    free(it->obj_name);
    free(it->ns);
    free(it);
}

/*--- Store sink ---*/

/* An aggregated Event's new fields over the stored one's metadata. arg is
 * store_write's copy: stored as it is. */
static int replace_fn(json_t *cur, json_t **out, void *arg)
{
    if (!cur) return GS_ENOENT;
    json_object_set(arg, "metadata", json_object_get(cur, "metadata"));
    *out = json_incref(arg);
    return 0;
}

/* ev is borrowed, so what is stored is a shallow copy (no deep copy: the
 * store and prepare_new change only the metadata, which a create gets a
 * copy of and an update takes from the stored Event). */
static int store_write(void *ctx, const char *ns, const char *name, const json_t *ev, bool update)
{
    struct gs_store *s = ctx;
    char key[1024];
    if (snprintf(key, sizeof key, "events/%s/%s", ns, name) >= (int)sizeof key) return GS_EINVAL;
    json_t *doc = json_copy((json_t *)ev);
    if (!doc) return GS_ENOMEM;
    int err = 0;
    if (update) {
        err = gs_store_mutate(s, key, replace_fn, doc, NULL, NULL);
    } else {
        json_t *md = json_copy(json_object_get(doc, "metadata"));
        if (!md || json_object_set_new(doc, "metadata", md)) err = GS_ENOMEM;
        if (!err) err = gs_apiserver_prepare_new(doc);
        if (!err) err = gs_store_create(s, key, doc, NULL);
    }
    json_decref(doc);
    return err;
}

/*--- Correlator ---*/

/* Spam filter: true when the source + object still has a token. */
static bool spam_allow(struct gs_recorder *r, const struct item *it)
{
    json_t *b = json_object_get(r->buckets, it->spam_key);
    double tokens = GS_EVENT_BURST;
    if (b) {
        int64_t dt = it->t - json_integer_value(json_object_get(b, "t"));
        tokens = json_real_value(json_object_get(b, "tokens")) + (dt > 0 ? (double)dt / GS_EVENT_REFILL_NS : 0);
        if (tokens > GS_EVENT_BURST) tokens = GS_EVENT_BURST;
    } else if (json_object_size(r->buckets) >= TABLE_MAX) {
        /* Forget the buckets that have refilled: they hold no state worth keeping. */
        const char *k;
        json_t *v, *tmp;
        json_object_foreach_safe(r->buckets, tmp, k, v) {
            int64_t dt = it->t - json_integer_value(json_object_get(v, "t"));
            if (json_real_value(json_object_get(v, "tokens")) + (double)dt / GS_EVENT_REFILL_NS >= GS_EVENT_BURST)
                json_object_del(r->buckets, k);
        }
        if (json_object_size(r->buckets) >= TABLE_MAX) json_object_clear(r->buckets);
    }
    bool ok = tokens >= 1;
    if (ok) tokens -= 1;
    json_object_set_new(r->buckets, it->spam_key, json_pack("{s:f, s:I}", "tokens", tokens, "t", (json_int_t)it->t));
    return ok;
}

static void prune_agg(struct gs_recorder *r, int64_t now)
{
    const char *k;
    json_t *v, *tmp;
    json_object_foreach_safe(r->agg, tmp, k, v)
        if (now - json_integer_value(json_object_get(v, "last")) > GS_EVENT_WINDOW_NS) json_object_del(r->agg, k);
    if (json_object_size(r->agg) >= TABLE_MAX) json_object_clear(r->agg);
}

/* The whole Event to write: the body plus name, times and count. */
static json_t *full_event(const struct item *it, const char *name, int64_t first, int64_t last, json_int_t n)
{
    char f[48], l[48], fm[48], lm[48];
    ts_text(first, false, f, sizeof f);
    ts_text(first, true, fm, sizeof fm);
    if (last == first) { /* a create: one formatting of the time */
        memcpy(l, f, sizeof l);
        memcpy(lm, fm, sizeof lm);
    } else {
        ts_text(last, false, l, sizeof l);
        ts_text(last, true, lm, sizeof lm);
    }
    json_t *ev = json_copy(it->ev); /* shallow: the members shared are never changed */
    if (!ev) return NULL;
    json_object_set_new(ev, "metadata", json_pack("{s:s, s:s}", "name", name, "namespace", it->ns));
    json_object_set_new(ev, "firstTimestamp", json_string(f));
    json_object_set_new(ev, "lastTimestamp", json_string(l));
    json_object_set_new(ev, "eventTime", json_string(fm));
    json_object_set_new(ev, "count", json_integer(n));
    if (n > 1) json_object_set_new(ev, "series", json_pack("{s:I, s:s}", "count", n, "lastObservedTime", lm));
    return ev;
}

/* The next name "<object>.<hex ns>": names from one recorder never repeat. */
static void next_name(struct gs_recorder *r, const struct item *it, char *name, size_t len)
{
    r->last_name_t = it->t > r->last_name_t ? it->t : r->last_name_t + 1;
    snprintf(name, len, "%s.%llx", it->obj_name, (unsigned long long)r->last_name_t);
}

/* A new Event, one write at a time: a clash with another writer's name
 * takes the next nanosecond. */
static int create_one(struct gs_recorder *r, const struct item *it, char *name, size_t len)
{
    int err = GS_EEXIST;
    for (int tries = 0; err == GS_EEXIST && tries < 8; tries++) {
        next_name(r, it, name, len);
        json_t *ev = full_event(it, name, it->t, it->t, 1);
        err = ev ? r->sink.write(r->sink.ctx, it->ns, name, ev, false) : GS_ENOMEM;
        json_decref(ev);
    }
    return err;
}

enum { P_DROP, P_CREATE, P_UPDATE };

/* What one record becomes: dropped, a new Event, or count + 1 of one. */
struct plan {
    int kind;
    char name[600];
    json_t *ev;
    int err;
};

static void set_agg(struct gs_recorder *r, const struct item *it, const char *name)
{
    if (json_object_size(r->agg) >= TABLE_MAX) prune_agg(r, it->t);
    json_object_set_new(r->agg, it->agg_key,
                        json_pack("{s:s, s:I, s:I, s:I}", "name", name, "count", (json_int_t)1, "first",
                                  (json_int_t)it->t, "last", (json_int_t)it->t));
}

/* The correlator, under wmu. The table is updated as if the write will
 * succeed (a later record of the same batch aggregates into it); settle()
 * repairs it when it did not. */
static void decide(struct gs_recorder *r, const struct item *it, struct plan *p)
{
    bool distinct = it->flags & GS_EVENT_DISTINCT;
    p->ev = NULL;
    p->err = 0;
    if (!distinct && !spam_allow(r, it)) {
        p->kind = P_DROP;
        return;
    }
    json_t *a = distinct ? NULL : json_object_get(r->agg, it->agg_key);
    if (a && it->t - json_integer_value(json_object_get(a, "last")) <= GS_EVENT_WINDOW_NS) {
        json_int_t n = json_integer_value(json_object_get(a, "count")) + 1;
        p->kind = P_UPDATE;
        snprintf(p->name, sizeof p->name, "%s", json_string_value(json_object_get(a, "name")));
        p->ev = full_event(it, p->name, json_integer_value(json_object_get(a, "first")), it->t, n);
        json_object_set_new(a, "count", json_integer(n));
        json_object_set_new(a, "last", json_integer(it->t));
        return;
    }
    p->kind = P_CREATE;
    next_name(r, it, p->name, sizeof p->name);
    p->ev = full_event(it, p->name, it->t, it->t, 1);
    if (!distinct) set_agg(r, it, p->name);
}

/* One write each: a store create joins the group commit of the API's
 * concurrent writers (store.h). A batch of its own (one
 * gs_store_mutate_batch per batch taken) was measured: fewer commits, but
 * more CPU over the process, the more so the larger the batches (it ends the
 * API writers' commit delay and holds the write lock for the whole batch);
 * bench/RESULTS.md "Create to bound: the Event recorder's writes". */
static void write_plans(struct gs_recorder *r, const struct item *const *its, struct plan *ps, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ps[i].kind != P_DROP)
            ps[i].err = ps[i].ev ? r->sink.write(r->sink.ctx, its[i]->ns, ps[i].name, ps[i].ev,
                                                 ps[i].kind == P_UPDATE)
                                 : GS_ENOMEM;
}

/* After the writes, under wmu: counts, and the slow path for what failed. */
static void settle(struct gs_recorder *r, const struct item *it, struct plan *p, struct gs_recorder_stats *st)
{
    if (p->kind == P_DROP) {
        st->dropped_rate++;
        return;
    }
    if (!p->err) {
        if (p->kind == P_UPDATE) st->aggregated++;
        else st->created++;
        return;
    }
    bool distinct = it->flags & GS_EVENT_DISTINCT;
    if (!distinct) json_object_del(r->agg, it->agg_key);
    /* Gone (expired) before its update, or a name another writer took: a new one. */
    if ((p->kind == P_UPDATE && p->err == GS_ENOENT) || (p->kind == P_CREATE && p->err == GS_EEXIST)) {
        p->err = create_one(r, it, p->name, sizeof p->name);
        if (!p->err) {
            if (!distinct) set_agg(r, it, p->name);
            st->created++;
            return;
        }
    }
    st->write_errors++;
    gs_log(GS_LOG_DEBUG, "events: write failed", "object", it->obj_name, "reason",
           json_string_value(json_object_get(it->ev, "reason")), "error", gs_strerror(p->err), NULL);
}

static void process(struct gs_recorder *r, struct item *const *its, size_t n)
{
    struct gs_recorder_stats st = {0};
    pthread_mutex_lock(&r->wmu);
    struct plan *ps = r->plans; /* n <= BATCH */
    for (size_t i = 0; i < n; i++) decide(r, its[i], &ps[i]);
    write_plans(r, (const struct item *const *)its, ps, n);
    for (size_t i = 0; i < n; i++) {
        settle(r, its[i], &ps[i], &st);
        json_decref(ps[i].ev);
    }
    pthread_mutex_unlock(&r->wmu);
    pthread_mutex_lock(&r->mu);
    r->st.created += st.created;
    r->st.aggregated += st.aggregated;
    r->st.dropped_rate += st.dropped_rate;
    r->st.write_errors += st.write_errors;
    pthread_mutex_unlock(&r->mu);
}

void gs_recorder_sweep(struct gs_recorder *r)
{
    if (!r || !r->store || r->ttl <= 0) return;
    int64_t now = now_ns(r);
    size_t n = 0;
    gs_events_expire(r->store, now, r->ttl, &n);
    pthread_mutex_lock(&r->wmu);
    prune_agg(r, now);
    pthread_mutex_unlock(&r->wmu);
    pthread_mutex_lock(&r->mu);
    r->st.expired += n;
    pthread_mutex_unlock(&r->mu);
}

static void *run(void *arg)
{
    struct gs_recorder *r = arg;
    pthread_setname_np(pthread_self(), "gs-events"); /* its share in perf, top and the server benchmark */
    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (r->n) {
            struct item *its[BATCH];
            size_t k = 0;
            for (; r->n && k < BATCH; k++, r->n--) {
                its[k] = r->q[r->head];
                r->head = (r->head + 1) % r->cap;
            }
            /* Stopping with a failing sink (the agent's server gone): what is
             * left is dropped, not tried for a client timeout each. */
            bool give_up = r->stop && r->st.write_errors > r->errors_at_stop;
            if (give_up) r->st.dropped_full += k;
            pthread_mutex_unlock(&r->mu);
            if (!give_up) process(r, its, k);
            for (size_t i = 0; i < k; i++) item_free(its[i]);
            pthread_mutex_lock(&r->mu);
            r->done += k;
            pthread_cond_broadcast(&r->idle);
            continue;
        }
        if (r->stop) break;
        int64_t now = now_ns(r);
        if (r->ttl > 0 && now >= r->next_sweep) {
            r->next_sweep = now + r->sweep;
            pthread_mutex_unlock(&r->mu);
            gs_recorder_sweep(r);
            pthread_mutex_lock(&r->mu);
            continue;
        }
        /* The condition variable waits on CLOCK_REALTIME: a bounded nap,
         * re-checked against the recorder's own clock. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int gs_recorder_new(const struct gs_recorder_opts *o, struct gs_recorder **out)
{
    *out = NULL;
    if (!o->sink.write && !o->store) return GS_EINVAL;
    struct gs_recorder *r = calloc(1, sizeof *r);
    if (!r) return GS_ENOMEM;
    r->sink = o->sink.write ? o->sink : (struct gs_event_sink){store_write, o->store};
    r->store = o->sink.write ? NULL : o->store;
    gs_clock_init_real(&r->real);
    r->clock = o->clock ? o->clock : &r->real;
    if (!o->clock) r->wall_offset = (int64_t)(gs_wall_time() * GS_NS_PER_SEC) - gs_clock_now(&r->real);
    r->sync = o->sync;
    r->cap = o->queue_len ? o->queue_len : QUEUE_DEFAULT;
    r->ttl = o->ttl_ns;
    r->sweep = o->sweep_ns ? o->sweep_ns : r->ttl / 4 < SWEEP_MAX_NS ? r->ttl / 4 : SWEEP_MAX_NS;
    if (r->sweep <= 0) r->sweep = SWEEP_MAX_NS;
    r->next_sweep = now_ns(r) + r->sweep;
    r->q = calloc(r->cap, sizeof *r->q);
    r->agg = json_object();
    r->buckets = json_object();
    r->plans = calloc(BATCH, sizeof *r->plans);
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->wmu, NULL);
    pthread_cond_init(&r->cv, NULL);
    pthread_cond_init(&r->idle, NULL);
    if (!r->q || !r->agg || !r->buckets || !r->plans) {
        gs_recorder_free(r);
        return GS_ENOMEM;
    }
    if (!r->sync) {
        if (pthread_create(&r->th, NULL, run, r)) {
            gs_recorder_free(r);
            return GS_ENOMEM;
        }
        r->started = true;
    }
    *out = r;
    return 0;
}

void gs_recorder_free(struct gs_recorder *r)
{
    if (!r) return;
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        r->errors_at_stop = r->st.write_errors;
        pthread_cond_signal(&r->cv);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->th, NULL);
    }
    for (size_t i = 0; i < r->n; i++) item_free(r->q[(r->head + i) % r->cap]);
    free(r->q);
    free(r->plans);
    json_decref(r->agg);
    json_decref(r->buckets);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->wmu);
    pthread_cond_destroy(&r->cv);
    pthread_cond_destroy(&r->idle);
    free(r);
}

void gs_recorder_flush(struct gs_recorder *r)
{
    if (!r || r->sync) return;
    pthread_mutex_lock(&r->mu);
    uint64_t want = r->queued;
    while (r->done < want) pthread_cond_wait(&r->idle, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

void gs_recorder_stats(struct gs_recorder *r, struct gs_recorder_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    pthread_mutex_unlock(&r->mu);
}

/*--- Recording ---*/

static char *join_key(const char *const *parts, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++) len += strlen(parts[i] ? parts[i] : "") + 1;
    char *k = malloc(len), *p = k;
    if (!k) return NULL;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(parts[i] ? parts[i] : "");
        memcpy(p, parts[i] ? parts[i] : "", l);
        p += l;
        *p++ = '\x1f'; /* a byte no name or reason holds */
    }
    *p = 0;
    return k;
}

static void set_str(json_t *o, const char *k, const char *v)
{
    if (v && *v) json_object_set_new(o, k, json_string(v));
}

static struct item *make_item(const struct gs_event_source *src, const struct gs_event_ref *obj, const char *type,
                              const char *reason, const char *action, const char *msg, int64_t t)
{
    struct item *it = calloc(1, sizeof *it);
    if (!it) return NULL;
    const char *api = obj->api_version ? obj->api_version : "v1";
    bool cluster = !obj->ns || !*obj->ns;
    json_t *io = json_pack("{s:s, s:s, s:s}", "kind", obj->kind, "name", obj->name, "apiVersion", api);
    if (io) {
        set_str(io, "namespace", cluster ? NULL : obj->ns);
        set_str(io, "uid", obj->uid);
        set_str(io, "resourceVersion", obj->resource_version);
        set_str(io, "fieldPath", obj->field_path);
    }
    json_t *source = json_pack("{s:s}", "component", src->component);
    if (source) set_str(source, "host", src->host);
    it->ev = io && source ? json_pack("{s:s, s:s, s:O, s:s, s:s, s:s, s:s, s:O, s:s, s:s}", "apiVersion", "v1",
                                      "kind", "Event", "involvedObject", io, "reason", reason, "message", msg,
                                      "type", type, "action", action ? action : reason, "source", source,
                                      "reportingComponent", src->component, "reportingInstance",
                                      src->host ? src->host : src->component)
                          : NULL;
    json_decref(io);
    json_decref(source);
    const char *parts[] = {src->component, src->host,   obj->kind, cluster ? "" : obj->ns, obj->name,
                           obj->field_path, obj->uid,   api,       type,                   reason,
                           msg};
    it->spam_key = join_key(parts, 8);
    it->agg_key = join_key(parts, sizeof parts / sizeof parts[0]);
    it->obj_name = strdup(obj->name);
    it->ns = strdup(cluster ? "default" : obj->ns);
    it->flags = src->flags;
    it->t = t;
    if (!it->ev || !it->spam_key || !it->agg_key || !it->obj_name || !it->ns) {
        item_free(it);
        return NULL;
    }
    return it;
}

void gs_event_record(const struct gs_event_source *src, const struct gs_event_ref *obj, const char *type,
                     const char *reason, const char *action, const char *fmt, ...)
{
    struct gs_recorder *r = src ? src->rec : NULL;
    if (!r || !obj || !obj->kind || !obj->name || !type || !reason || !src->component) return;
    char msg[GS_EVENT_MESSAGE_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct item *it = make_item(src, obj, type, reason, action, msg, now_ns(r));
    pthread_mutex_lock(&r->mu);
    if (!it || r->n == r->cap) {
        r->st.dropped_full++;
        pthread_mutex_unlock(&r->mu);
        item_free(it);
        return;
    }
    r->st.recorded++;
    if (r->sync) {
        pthread_mutex_unlock(&r->mu);
        process(r, &it, 1);
        item_free(it);
        return;
    }
    r->q[(r->head + r->n) % r->cap] = it;
    r->n++;
    r->queued++;
    /* The thread waits only on an empty queue: the first record wakes it. */
    if (r->n == 1) pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/*--- Expiry ---*/

struct expire_ctx {
    int64_t cutoff;
    json_t *doomed; /* key -> resourceVersion */
};

static int64_t last_write(const json_t *ev)
{
    int64_t t = 0, v;
    const char *cands[] = {json_string_value(json_object_get(ev, "lastTimestamp")),
                           json_string_value(json_object_get(json_object_get(ev, "series"), "lastObservedTime")),
                           json_string_value(json_object_get(ev, "eventTime")),
                           json_string_value(json_object_get(json_object_get(ev, "metadata"), "creationTimestamp"))};
    for (size_t i = 0; i < 3; i++)
        if ((v = ts_parse(cands[i])) > t) t = v;
    return t ? t : ts_parse(cands[3]); /* an Event written without times */
}

static int expire_one(const char *key, json_t *obj, void *arg)
{
    struct expire_ctx *c = arg;
    if (last_write(obj) < c->cutoff) {
        const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
        json_object_set_new(c->doomed, key, json_integer(rv ? strtoll(rv, NULL, 10) : 0));
    }
    return 0;
}

int gs_events_expire(struct gs_store *s, int64_t now_ns_, int64_t ttl_ns, size_t *removed)
{
    if (removed) *removed = 0;
    struct expire_ctx c = {now_ns_ - ttl_ns, json_object()};
    if (!c.doomed) return GS_ENOMEM;
    int64_t rv;
    int err = gs_store_list(s, "events/", expire_one, &c, &rv);
    const char *k;
    json_t *v;
    json_object_foreach(c.doomed, k, v) {
        /* Conditional: an Event aggregated since the list stays. */
        if (gs_store_delete(s, k, json_integer_value(v), NULL, NULL) == 0 && removed) (*removed)++;
    }
    json_decref(c.doomed);
    return err;
}

/*--- events.k8s.io/v1 ---*/

bool gs_event_res_is_v1(const struct gs_api_resource *res)
{
    return res && !strcmp(res->group, "events.k8s.io") && !strcmp(res->kind, "Event");
}

/* (core name, events.k8s.io name) of the fields that only change name. */
static const char *const renames[][2] = {
    {"involvedObject", "regarding"},     {"message", "note"},
    {"reportingComponent", "reportingController"}, {"source", "deprecatedSource"},
    {"firstTimestamp", "deprecatedFirstTimestamp"}, {"lastTimestamp", "deprecatedLastTimestamp"},
    {"count", "deprecatedCount"},
};
#define NRENAMES (sizeof renames / sizeof renames[0])

static json_t *rename_fields(const json_t *in, int from, const char *api)
{
    json_t *out = json_object();
    if (!out) return NULL;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)in, k, v) {
        const char *name = k;
        for (size_t i = 0; i < NRENAMES; i++) {
            if (!strcmp(k, renames[i][from])) name = renames[i][1 - from];
            else if (!strcmp(k, renames[i][1 - from])) name = NULL; /* the other group's name: not a field here */
        }
        if (name) json_object_set(out, name, v);
    }
    json_object_set_new(out, "apiVersion", json_string(api));
    json_object_set_new(out, "kind", json_string("Event"));
    return out;
}

json_t *gs_event_to_events_v1(const json_t *core) { return rename_fields(core, 0, "events.k8s.io/v1"); }

static bool want_type(const json_t *in, const char *field, json_type t, struct gs_diags *d)
{
    json_t *v = json_object_get(in, field);
    if (!v || json_typeof(v) == t || (t == JSON_INTEGER && json_is_integer(v))) return true;
    static const char *const names[] = {"an object", "an array", "a string", "an integer", "a number",
                                        "a boolean", "a boolean", "null"};
    gs_diags_add(d, field, "must be %s", names[t]);
    return false;
}

int gs_event_from_events_v1(const json_t *in, json_t **out, struct gs_diags *d)
{
    *out = NULL;
    if (!json_is_object(in)) {
        gs_diags_add(d, "", "an Event must be a JSON object");
        return GS_EINVAL;
    }
    size_t before = d->n;
    static const struct {
        const char *field;
        json_type t;
    } types[] = {{"regarding", JSON_OBJECT}, {"related", JSON_OBJECT},       {"note", JSON_STRING},
                 {"reason", JSON_STRING},    {"type", JSON_STRING},          {"action", JSON_STRING},
                 {"eventTime", JSON_STRING}, {"reportingController", JSON_STRING},
                 {"reportingInstance", JSON_STRING}, {"series", JSON_OBJECT}, {"deprecatedCount", JSON_INTEGER},
                 {"deprecatedSource", JSON_OBJECT}, {"deprecatedFirstTimestamp", JSON_STRING},
                 {"deprecatedLastTimestamp", JSON_STRING}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) want_type(in, types[i].field, types[i].t, d);
    if (d->n > before) return GS_EINVAL;
    const char *type = json_string_value(json_object_get(in, "type"));
    if (!type) gs_diags_add(d, "type", "Required value: Normal or Warning");
    else if (strcmp(type, "Normal") && strcmp(type, "Warning"))
        gs_diags_add(d, "type", "Unsupported value: \"%s\": supported values: \"Normal\", \"Warning\"", type);
    const json_t *reg = json_object_get(in, "regarding");
    if (!json_string_value(json_object_get(reg, "name")) || !*json_string_value(json_object_get(reg, "name")))
        gs_diags_add(d, "regarding.name", "Required value: the object the Event is about");
    static const char *const required[] = {"reason", "action", "eventTime", "reportingController", "reportingInstance"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        const char *v = json_string_value(json_object_get(in, required[i]));
        if (!v || !*v) gs_diags_add(d, required[i], "Required value");
    }
    const char *et = json_string_value(json_object_get(in, "eventTime"));
    if (et && *et && !ts_parse(et))
        gs_diags_add(d, "eventTime", "Invalid value: \"%s\": want RFC 3339 (2026-01-02T03:04:05.000000Z)", et);
    const char *note = json_string_value(json_object_get(in, "note"));
    if (note && strlen(note) > GS_EVENT_MESSAGE_MAX)
        gs_diags_add(d, "note", "Too long: may not be more than %d bytes", GS_EVENT_MESSAGE_MAX);
    if (d->n > before) return GS_EINVAL;
    *out = rename_fields(in, 1, "v1");
    return *out ? 0 : GS_ENOMEM;
}

json_t *gs_event_serve(const struct gs_api_resource *res, json_t *obj)
{
    if (!gs_event_res_is_v1(res) || !obj) return obj;
    json_t *v1 = gs_event_to_events_v1(obj);
    json_decref(obj);
    return v1;
}

char *gs_event_text_for(const struct gs_api_resource *res, const char *stored)
{
    if (!gs_event_res_is_v1(res)) return NULL;
    json_t *core = json_loads(stored, 0, NULL);
    json_t *v1 = core ? gs_event_to_events_v1(core) : NULL;
    char *text = v1 ? json_dumps(v1, JSON_COMPACT) : NULL;
    json_decref(core);
    json_decref(v1);
    return text;
}

/*--- Tables ---*/

static json_t *column(const char *name, const char *format, int priority, const char *desc)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:i}", "name", name, "type", "string", "format", format, "description",
                     desc, "priority", priority);
}

json_t *gs_event_table_columns(void)
{
    return json_pack("[o,o,o,o,o,o,o,o,o,o]", column("Last Seen", "", 0, "Time of the last occurrence."),
                     column("Type", "", 0, "Normal or Warning."), column("Reason", "", 0, "Why, in one word."),
                     column("Object", "", 0, "The object the Event is about."),
                     column("Subobject", "", 1, "The part of the object (fieldPath)."),
                     column("Source", "", 1, "The component that reported it."),
                     column("Message", "", 0, "What happened."), column("First Seen", "", 1, "First occurrence."),
                     column("Count", "", 1, "Occurrences."), column("Name", "name", 1, "The Event's name."));
}

static const char *sget(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

json_t *gs_event_table_row(const json_t *ev, double now)
{
    const json_t *io = json_object_get(ev, "involvedObject");
    const char *first = sget(ev, "firstTimestamp"), *last = sget(ev, "lastTimestamp");
    if (!*last) last = sget(ev, "eventTime");
    if (!*first) first = last;
    char fa[32], la[96], obj[600], lower[64], src[300], cnt[24];
    gs__age(first, now, fa, sizeof fa);
    gs__age(last, now, la, sizeof la);
    json_int_t n = json_integer_value(json_object_get(ev, "count"));
    if (n > 1) {
        char tmp[32];
        memcpy(tmp, la, sizeof tmp);
        tmp[sizeof tmp - 1] = 0;
        snprintf(la, sizeof la, "%s (x%lld over %s)", tmp, (long long)n, fa);
    }
    snprintf(lower, sizeof lower, "%s", sget(io, "kind"));
    for (char *p = lower; *p; p++) *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
    snprintf(obj, sizeof obj, "%s/%s", lower, sget(io, "name"));
    const json_t *s = json_object_get(ev, "source");
    snprintf(src, sizeof src, "%s%s%s", sget(s, "component"), *sget(s, "host") ? ", " : "", sget(s, "host"));
    snprintf(cnt, sizeof cnt, "%lld", (long long)(n ? n : 1));
    return json_pack("[s,s,s,s,s,s,s,s,s,s]", la, sget(ev, "type"), sget(ev, "reason"), obj, sget(io, "fieldPath"),
                     src, sget(ev, "message"), fa, cnt, sget(json_object_get(ev, "metadata"), "name"));
}

void gs_recorder_metrics(struct gs_recorder *r, bool with_expired, struct gs_mbuf *b)
{
    struct gs_recorder_stats es;
    gs_recorder_stats(r, &es);
    gs_mbuf_help(b, "gpusched_events_total", "counter", "Event records, by what became of them.");
    gs_mbuf_printf(b, "gpusched_events_total{result=\"created\"} %llu\n"
                      "gpusched_events_total{result=\"aggregated\"} %llu\n"
                      "gpusched_events_total{result=\"dropped_queue_full\"} %llu\n"
                      "gpusched_events_total{result=\"dropped_rate_limited\"} %llu\n"
                      "gpusched_events_total{result=\"write_error\"} %llu\n",
                   (unsigned long long)es.created, (unsigned long long)es.aggregated,
                   (unsigned long long)es.dropped_full, (unsigned long long)es.dropped_rate,
                   (unsigned long long)es.write_errors);
    if (with_expired) gs_mbuf_printf(b, "gpusched_events_total{result=\"expired\"} %llu\n", (unsigned long long)es.expired);
}
