/*
 * apiserver.c - HTTP plumbing of the API: connections, body limits,
 * authentication, rate limits, routing, replies and watch streams; see
 * apiserver.h. The object handlers (create, update, patch, bind, delete,
 * get, list) live in api_objects.c.
 *
 * A request's body is collected across libmicrohttpd's calls into one
 * buffer (refused early with 413 when Content-Length says it is too big, cut
 * off when a chunked body grows past the limit), then the request is routed
 * and answered in one go. A watch answers with a callback response: the
 * callback blocks on the store's change stream for at most a second at a
 * time, so shutdown (a flag plus gs_store_interrupt) ends every stream
 * promptly and libmicrohttpd can join the connection threads.
 *
 * A watch also has a lifecycle of its own (see "Watch lifecycle" in
 * docs/CONTROL_PLANE.md): between waits the callback looks at the client's
 * socket and ends the stream as soon as the peer has closed it, since
 * libmicrohttpd would only notice on a failed write, which an idle or
 * never-matching watch never makes; it ends after timeoutSeconds (a random
 * 5-10 minutes by default) with a final BOOKMARK; and an idle one gets a
 * keep-alive (a BOOKMARK when the client allows them, else a blank line)
 * so a peer that vanished without closing is found by a failed write.
 * Before authentication a client is held to libmicrohttpd's connection
 * limits (total, per address) and idle timeout - lifted for answered
 * streams - and to netguard.c's bucket of failed authentications. Routing
 * itself is api_route.c, pure functions the request fuzzer drives.
 */
#include "control/dra_convert.h"
#include "control/apiserver_int.h"
#include "control/api_route.h"
#include "control/api_ui.h" /* the console's queue history */
#include "control/gridview.h"
#include "control/ui.h"     /* the console's files at /ui */

#include "core/codec.h"
#include "control/events.h" /* events.k8s.io view of watch lines */

#include "core/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_MAX_BODY GS_JSON_MAX_BODY_DEFAULT
#define WATCH_WAIT_MS 1000
/* A watch without timeoutSeconds ends after a random time in this range,
 * as kube-apiserver spreads its own (--min-request-timeout and twice it),
 * so the clients of a restarted server do not all come back at once. */
#define WATCH_DEFAULT_MIN_S 300
#define WATCH_DEFAULT_MAX_S 600
#define WATCH_KEEPALIVE_DEFAULT_MS 30000

static struct gs_principal anonymous_admin = {.user = "admin", .role = GS_ROLE_ADMIN};

/*--- Replies ---*/

enum MHD_Result gs__reply_text(struct gs__req *r, int code, const char *ctype, char *text)
{
    if (!text && !(text = strdup(""))) return MHD_NO;
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", ctype);
    MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
    if (code == 429) MHD_add_response_header(resp, "Retry-After", "1");
    gs__add_warnings(r, resp);
    enum MHD_Result ret = MHD_queue_response(r->c, (unsigned)code, resp);
    MHD_destroy_response(resp);
    r->answered = true;
    if (code >= 400) gs_log(GS_LOG_DEBUG, "api: refused", "method", r->method, "url", r->url, NULL);
    return ret;
}

enum MHD_Result gs__reply_json(struct gs__req *r, int code, json_t *doc)
{
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) return gs__reply_text(r, 500, "text/plain", strdup("out of memory"));
    return gs__reply_text(r, code, "application/json", text);
}

static void release_text(void *text) { gs_store_text_release(text); }

enum MHD_Result gs__reply_stored(struct gs__req *r, int code, char *text)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer_with_free_callback(gs_store_text_len(text), text, release_text);
    if (!resp) {
        gs_store_text_release(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
    gs__add_warnings(r, resp);
    enum MHD_Result ret = MHD_queue_response(r->c, (unsigned)code, resp);
    MHD_destroy_response(resp);
    r->answered = true;
    return ret;
}

enum MHD_Result gs__reply_status(struct gs__req *r, int code, const char *reason, const char *name,
                                 const char *fmt, ...)
{
    char msg[1024], clean[1024], cname[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Messages quote what the client sent: bytes JSON cannot carry are escaped, never a 500. */
    gs__text_printable(msg, clean, sizeof clean);
    if (name) name = gs__text_printable(name, cname, sizeof cname);
    return gs__reply_json(r, code, gs__status(code, reason, clean, r->res, name, NULL, 0));
}

enum MHD_Result gs__reply_err(struct gs__req *r, int err, const char *name)
{
    const char *what = r->res ? r->res->plural : "object";
    switch (err) {
    case GS_ENOENT: return gs__reply_status(r, 404, NULL, name, "%s \"%s\" not found", what, name ? name : "");
    case GS_EEXIST:
        return gs__reply_status(r, 409, "AlreadyExists", name, "%s \"%s\" already exists", what, name ? name : "");
    case GS_ECONFLICT:
        return gs__reply_status(r, 409, "Conflict", name,
                                "Operation cannot be fulfilled on %s \"%s\": the object has been modified; "
                                "please apply your changes to the latest version and try again",
                                what, name ? name : "");
    case GS_EPERM:
        return gs__reply_status(r, 403, NULL, name, "%s \"%s\" is forbidden: User \"%s\" may only reach pods bound "
                                "to its node", what, name ? name : "", r->who ? r->who->user : "");
    case GS_ENOMEM: return gs__reply_status(r, 500, NULL, name, "out of memory");
    case GS_EPARSE: { /* a stored row that is not JSON: only this object is unreadable */
        char key[1024] = "";
        if (r->res) gs_api_key(r->res, r->ns, name, key, sizeof key);
        return gs__reply_status(r, 500, NULL, name, "stored object %s is corrupt (not valid JSON): it is skipped in "
                                "lists; delete its row from the store or restore the store from a backup", key);
    }
    default: return gs__reply_status(r, 500, NULL, name, "store error: %s", gs_strerror(err));
    }
}

/*--- Small helpers shared with the handlers ---*/

const char *gs__arg(struct gs__req *r, const char *key)
{
    return MHD_lookup_connection_value(r->c, MHD_GET_ARGUMENT_KIND, key);
}

const char *gs__header(struct gs__req *r, const char *key)
{
    return MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, key);
}

bool gs__wants_table(struct gs__req *r)
{
    return gs__accept_table(gs__header(r, "Accept"));
}

double gs__wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int gs_apiserver_prepare_new(json_t *obj)
{
    json_t *md = json_object_get(obj, "metadata");
    if (!json_is_object(md)) return GS_EINVAL;
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) return GS_EIO;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    char uid[40], *u = uid; /* 8-4-4-4-12 hex digits; by hand: snprintf of 16 fields cost more than the rest */
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) *u++ = '-';
        *u++ = hex[b[i] >> 4];
        *u++ = hex[b[i] & 15];
    }
    *u = 0;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object_set_new(md, "uid", json_string(uid));
    json_object_set_new(md, "creationTimestamp", json_string(ts));
    json_object_del(md, "resourceVersion");
    json_object_del(md, "deletionTimestamp");
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    if (kind && !strcmp(kind, "Pod")) {
        json_t *st = json_object_get(obj, "status");
        if (!json_is_object(st)) json_object_set_new(obj, "status", st = json_object());
        if (!json_object_get(st, "phase")) json_object_set_new(st, "phase", json_string("Pending"));
    }
    return 0;
}

/*--- Watch streams ---*/

struct watch {
    struct gs_apiserver *s;
    struct gs__filter f;
    char prefix[512];
    int64_t rv;
    int64_t deadline_ns;   /* the stream ends then (timeoutSeconds or the default) */
    int64_t keepalive_ns;  /* next keep-alive when nothing was sent before it */
    int fd;                /* the client's socket, -1 when unknown */
    bool table, ended;
    bool bookmarks;        /* allowWatchBookmarks=true */
    char *buf;           /* pending output */
    size_t len, off, cap;
    /* Filtered watches: keys of objects the client holds as matching. An
     * object that stops matching (a pod re-created off this node, a label
     * removed) is then sent as DELETED, as Kubernetes' watch cache does, so
     * the client drops it at once instead of on its next list. */
    json_t *seen;
};

static int wbuf_add(struct watch *w, const char *text, size_t n)
{
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n) cap *= 2;
        char *nb = realloc(w->buf, cap);
        if (!nb) return GS_ENOMEM;
        w->buf = nb;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, text, n);
    w->len += n;
    return 0;
}

/* One event line; obj is the parsed object (NULL when the raw text can be used as is). */
static int wbuf_event(struct watch *w, const char *type, const char *raw, json_t *obj)
{
    char head[48];
    int hn = snprintf(head, sizeof head, "{\"type\":\"%s\",\"object\":", type);
    char *text = !w->table && strcmp(type, "ERROR") ? gs_event_text_for(w->f.res, raw) : NULL;
    if (!text && !w->table && strcmp(type, "ERROR")) text = gs_dra_text_for(w->f.res, raw); /* resource.k8s.io */
    if (text) raw = text;
    else if (w->table && obj) {
        json_t *arr = json_pack("[O]", obj);
        json_t *t = gs__table(w->f.res, arr, NULL, gs__wall_now(), GS_INCLUDE_METADATA);
        text = t ? json_dumps(t, JSON_COMPACT) : NULL;
        json_decref(t);
        json_decref(arr);
        if (!text) return GS_ENOMEM;
        raw = text;
    }
    int err = wbuf_add(w, head, (size_t)hn);
    if (!err) err = wbuf_add(w, raw, strlen(raw));
    if (!err) err = wbuf_add(w, "}\n", 2);
    free(text);
    return err;
}

static void seen_mark(struct watch *w, const char *key, bool present)
{
    if (!w->seen) return;
    if (present) json_object_set_new(w->seen, key, json_true());
    else json_object_del(w->seen, key);
}

static int seed_one(const char *key, json_t *obj, void *arg)
{
    struct watch *w = arg;
    if (gs__filter_matches(&w->f, obj)) seen_mark(w, key, true);
    return 0;
}

static int replay_one(const char *key, json_t *obj, void *arg)
{
    struct watch *w = arg;
    if (!gs__filter_matches(&w->f, obj)) return 0;
    seen_mark(w, key, true);
    char *text = json_dumps(obj, JSON_COMPACT);
    int err = text ? wbuf_event(w, "ADDED", text, obj) : GS_ENOMEM;
    free(text);
    return err;
}

static void watch_error(struct watch *w, int code, const char *msg)
{
    json_t *st = gs__status(code, NULL, msg, w->f.res, NULL, NULL, 0);
    char *text = st ? json_dumps(st, JSON_COMPACT) : NULL;
    if (text) wbuf_event(w, "ERROR", text, NULL);
    free(text);
    json_decref(st);
    w->ended = true;
}

/* {"type":"BOOKMARK","object":{"kind":K,"apiVersion":V,"metadata":{"resourceVersion":"N"}}}: every
 * event up to N that matches has been sent, so the client may resume from N. */
static int watch_bookmark(struct watch *w)
{
    const struct gs_api_resource *res = w->f.res;
    char text[320];
    int n = snprintf(text, sizeof text,
                     "{\"kind\":\"%s\",\"apiVersion\":\"%s%s%s\",\"metadata\":{\"resourceVersion\":\"%lld\"}}",
                     res->kind, res->group, res->group[0] ? "/" : "", res->version, (long long)w->rv);
    if (n < 0 || (size_t)n >= sizeof text) return GS_ERANGE;
    return wbuf_event(w, "BOOKMARK", text, NULL);
}

/* True when the client has closed its end (or the socket failed): the
 * stream is then torn down at once rather than on the next write. Data the
 * client sent (a pipelined request, a TLS alert) is left for libmicrohttpd. */
static bool peer_gone(const struct watch *w)
{
    if (w->fd < 0) return false;
    struct pollfd p = {.fd = w->fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return true;
    char b;
    return (p.revents & POLLIN) && recv(w->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static int watch_wait_ms(const struct watch *w, int64_t now)
{
    int64_t until = w->deadline_ns < w->keepalive_ns ? w->deadline_ns : w->keepalive_ns;
    int64_t ms = (until - now) / 1000000 + 1;
    return ms < 1 ? 1 : ms > WATCH_WAIT_MS ? WATCH_WAIT_MS : (int)ms;
}

static void watch_fill(struct watch *w, int wait_ms)
{
    struct gs_store_event *evs = NULL;
    size_t n = 0;
    int err = gs_store_events(w->s->store, &w->rv, w->prefix, wait_ms, &w->s->stopping, &evs, &n);
    if (err == GS_ERANGE) {
        watch_error(w, 410, "too old resource version: the watch must start from a fresh list");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        bool parse = w->table || gs__filter_needs_object(&w->f);
        json_t *obj = parse ? json_loads(evs[i].value, 0, NULL) : NULL;
        const char *type = gs_store_ev_name(evs[i].type);
        if (parse && (!obj || !gs__filter_matches(&w->f, obj))) {
            bool held = obj && w->seen && json_object_get(w->seen, evs[i].key);
            if (held) wbuf_event(w, "DELETED", evs[i].value, obj); /* it left the client's view */
            seen_mark(w, evs[i].key, false);
            json_decref(obj);
            continue;
        }
        seen_mark(w, evs[i].key, evs[i].type != GS_STORE_DELETED);
        wbuf_event(w, type, evs[i].value, obj);
        json_decref(obj);
    }
    gs_store_events_free(evs, n);
}

static ssize_t watch_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct watch *w = cls;
    if (w->off == w->len) {
        w->off = w->len = 0;
        if (w->ended || atomic_load(&w->s->stopping)) return MHD_CONTENT_READER_END_OF_STREAM;
        /* The end of the stream, not _WITH_ERROR (which libmicrohttpd logs for
         * every dropped watch): the last chunk's write or the next read then
         * fails on the closed socket and the connection and its thread end. */
        if (peer_gone(w)) return MHD_CONTENT_READER_END_OF_STREAM;
        int64_t now = mono_ns();
        if (now >= w->deadline_ns) { /* timeoutSeconds: the client re-watches from the bookmark's version */
            w->ended = true;
            if (!w->bookmarks || watch_bookmark(w) || w->len == 0) return MHD_CONTENT_READER_END_OF_STREAM;
        } else {
            watch_fill(w, watch_wait_ms(w, now));
            now = mono_ns();
            if (w->len == 0 && now >= w->keepalive_ns) {
                if (w->bookmarks) watch_bookmark(w);
                else wbuf_add(w, "\n", 1); /* blank lines are skipped by JSON stream readers */
            }
        }
        if (w->len == 0) return 0; /* waited for nothing: libmicrohttpd calls again */
        w->keepalive_ns = now + w->s->watch_keepalive_ns;
    }
    size_t n = w->len - w->off < max ? w->len - w->off : max;
    memcpy(out, w->buf + w->off, n);
    w->off += n;
    return (ssize_t)n;
}

static void watch_free(void *cls)
{
    struct watch *w = cls;
    gs__filter_free(&w->f);
    json_decref(w->seen);
    free(w->buf);
    free(w);
}

/* The idle watch keep-alive period: GPUSCHED_WATCH_KEEPALIVE (seconds) or
 * 30 s; GS_EINVAL (logged) when the variable is not a sane number. */
static int watch_keepalive_env(int64_t *out_ns)
{
    const char *env = getenv("GPUSCHED_WATCH_KEEPALIVE");
    *out_ns = (int64_t)WATCH_KEEPALIVE_DEFAULT_MS * 1000000;
    if (!env) return 0;
    char *end = NULL;
    double sec = strtod(env, &end);
    if (end == env || *end || !isfinite(sec) || sec < 0.05 || sec > 3600) {
        gs_log(GS_LOG_ERROR, "api: GPUSCHED_WATCH_KEEPALIVE must be seconds between 0.05 and 3600", "value", env,
               NULL);
        return GS_EINVAL;
    }
    *out_ns = (int64_t)(sec * 1e9);
    return 0;
}

/* timeoutSeconds (0 or absent: the random default) and allowWatchBookmarks;
 * nonzero with why on a bad value. */
static int watch_options(struct gs__req *r, struct watch *w, char *why, size_t len)
{
    const char *tos = gs__arg(r, "timeoutSeconds");
    const char *bms = gs__arg(r, "allowWatchBookmarks");
    char *end = NULL;
    long long to = tos && *tos ? strtoll(tos, &end, 10) : 0;
    if (tos && (!*tos || *end || to < 0 || to > 365LL * 86400)) {
        snprintf(why, len, "invalid timeoutSeconds \"%.40s\": want a whole number of seconds, 0 to 31536000", tos);
        return GS_EINVAL;
    }
    if (bms && strcmp(bms, "true") && strcmp(bms, "1") && strcmp(bms, "false") && strcmp(bms, "0")) {
        snprintf(why, len, "invalid allowWatchBookmarks \"%.40s\": want true or false", bms);
        return GS_EINVAL;
    }
    w->bookmarks = bms && (!strcmp(bms, "true") || !strcmp(bms, "1"));
    if (to == 0) {
        uint32_t rnd = 0;
        if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) rnd = (uint32_t)mono_ns();
        to = WATCH_DEFAULT_MIN_S + rnd % (WATCH_DEFAULT_MAX_S - WATCH_DEFAULT_MIN_S + 1);
    }
    int64_t now = mono_ns();
    w->deadline_ns = now + (int64_t)to * 1000000000;
    w->keepalive_ns = now + w->s->watch_keepalive_ns;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->c, MHD_CONNECTION_INFO_CONNECTION_FD);
    w->fd = ci ? ci->connect_fd : -1;
    return 0;
}

enum MHD_Result gs__serve_watch(struct gs__req *r, struct gs__filter *f, const char *prefix)
{
    struct watch *w = calloc(1, sizeof *w);
    if (!w) return gs__reply_err(r, GS_ENOMEM, NULL);
    w->s = r->s;
    w->f = *f;
    memset(f, 0, sizeof *f);
    w->table = gs__wants_table(r);
    snprintf(w->prefix, sizeof w->prefix, "%s", prefix);
    const char *rvs = gs__arg(r, "resourceVersion");
    char *end = NULL;
    long long rv = rvs && *rvs ? strtoll(rvs, &end, 10) : 0;
    if (rvs && *rvs && (*end || rv < 0)) {
        watch_free(w);
        return gs__reply_status(r, 400, NULL, NULL, "invalid resourceVersion \"%s\"", rvs);
    }
    char why[160];
    if (watch_options(r, w, why, sizeof why)) {
        watch_free(w);
        return gs__reply_status(r, 400, NULL, NULL, "%s", why);
    }
    int err = gs__filter_needs_object(&w->f) && !(w->seen = json_object()) ? GS_ENOMEM : 0;
    if (!err && rv == 0) {
        err = gs_store_list(r->s->store, prefix, replay_one, w, &w->rv);
    } else if (!err) {
        /* The client listed at rv: what matches now is what it holds, up to
         * the few changes between its list and this watch. */
        w->rv = rv;
        int64_t now_rv;
        if (w->seen) err = gs_store_list(r->s->store, prefix, seed_one, w, &now_rv);
    }
    if (err) {
        watch_free(w);
        return gs__reply_err(r, err, NULL);
    }
    return gs__reply_stream(r, "application/json", 64 * 1024, watch_read, w, watch_free);
}

enum MHD_Result gs__reply_stream(struct gs__req *r, const char *ctype, size_t block, MHD_ContentReaderCallback read,
                                 void *arg, MHD_ContentReaderFreeCallback done)
{
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, block, read, arg, done);
    if (!resp) {
        done(arg);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", ctype);
    MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
    /* A stream may stay silent for long (a watch with no changes, a quiet log):
     * the idle timeout is for clients that have not been answered. */
    MHD_set_connection_option(r->c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    enum MHD_Result ret = MHD_queue_response(r->c, 200, resp);
    MHD_destroy_response(resp);
    r->answered = true;
    return ret;
}

/*--- Routing ---*/

static enum MHD_Result discovery(struct gs__req *r, char **seg, int n)
{
    json_t *doc = NULL;
    if (n == 1 && !strcmp(seg[0], "version")) doc = gs__doc_version();
    else if (n == 1 && !strcmp(seg[0], "api")) doc = gs__doc_api_versions();
    else if (n == 2 && !strcmp(seg[0], "api")) doc = gs__doc_resource_list("", seg[1]);
    else if (n == 1 && !strcmp(seg[0], "apis")) doc = gs__doc_group_list();
    else if (n == 2 && !strcmp(seg[0], "apis")) doc = gs__doc_group(seg[1]);
    else if (n == 3 && !strcmp(seg[0], "apis")) doc = gs__doc_resource_list(seg[1], seg[2]);
    if (!doc) return gs__reply_status(r, 404, NULL, NULL, "the server could not find the requested resource");
    return gs__reply_json(r, 200, doc);
}

static const char *verb_of(struct gs__req *r)
{
    return gs__route_verb(r->method, r->name != NULL, gs__arg(r, "watch"));
}

/* Applies the role rules; true when the request was refused (answered). */
static bool refused(struct gs__req *r, const char *verb)
{
    const char *why = "";
    struct gs_authz_req az = {verb, r->res, r->sub, r->ns, r->name};
    enum gs_authz d = gs_authorize(r->who, &az, &why);
    r->if_bound = d == GS_AUTHZ_IF_BOUND;
    r->if_named = d == GS_AUTHZ_IF_NAMED; /* node lease: checked against the body in gs__handle_create */
    if (d != GS_AUTHZ_DENY) return false;
    gs__reply_status(r, 403, NULL, r->name,
                     "%s%s%s%s is forbidden: User \"%s\" cannot %s resource \"%s%s%s\" in API group \"%s\"%s%s%s: %s",
                     r->res->plural, r->name ? " \"" : "", r->name ? r->name : "", r->name ? "\"" : "", r->who->user,
                     verb, r->res->plural, r->sub[0] ? "/" : "", r->sub, r->res->group,
                     r->ns ? " in the namespace \"" : "", r->ns ? r->ns : "", r->ns ? "\"" : "", why);
    return true;
}

static enum MHD_Result dispatch_resource(struct gs__req *r)
{
    const char *verb = verb_of(r);
    if (!verb) return gs__reply_status(r, 405, NULL, NULL, "method %s not allowed", r->method);
    if (r->sub[0] && strcmp(r->sub, "status") && strcmp(r->sub, "binding") && strcmp(r->sub, "log") &&
        strcmp(r->sub, "explain") && strcmp(r->sub, "eviction"))
        return gs__reply_status(r, 404, NULL, r->name, "no subresource \"%s\"", r->sub);
    if (!strcmp(r->sub, "status") && !r->res->has_status)
        return gs__reply_status(r, 404, NULL, r->name, "%s have no status subresource", r->res->plural);
    if (!strcmp(r->sub, "binding") && strcmp(r->res->plural, "pods"))
        return gs__reply_status(r, 404, NULL, r->name, "only pods have a binding subresource");
    if (!strcmp(r->sub, "eviction") && (strcmp(r->res->plural, "pods") || r->res->group[0]))
        return gs__reply_status(r, 404, NULL, r->name, "only pods have an eviction subresource");
    if (refused(r, verb)) return MHD_YES;
    if (gs__ui_api_resource(r->res)) return gs__handle_ui_api(r, verb); /* api_ui.c: read-only */
    if (strcmp(r->method, "GET") && gs__write_options(r)) return MHD_YES; /* dryRun, fieldValidation */
    if (!strcmp(verb, "create") && !strcmp(r->sub, "eviction") && r->name) return gs__handle_eviction(r);
    if (!strcmp(r->sub, "log")) return gs__handle_log(r); /* api_logs.c: proxied to the node's agent */
    if (!strcmp(r->sub, "explain")) return gs__handle_explain(r);
    if (!strcmp(verb, "watch")) return gs__handle_list(r, true);
    if (!strcmp(verb, "list")) return gs__handle_list(r, false);
    if (!strcmp(verb, "get")) return gs__handle_get(r);
    if (!strcmp(verb, "create") && !strcmp(r->sub, "binding") && r->name) return gs__handle_bind(r);
    if (!strcmp(verb, "create") && !r->name) return gs__handle_create(r);
    if (!strcmp(verb, "update") && r->name) return gs__handle_update(r);
    if (!strcmp(verb, "patch") && r->name) return gs__handle_patch(r);
    if (!strcmp(verb, "delete") && r->name && !r->sub[0]) return gs__handle_delete(r);
    return gs__reply_status(r, 405, NULL, r->name, "method %s not allowed here", r->method);
}

static bool public_path(const char *url)
{
    return gs_ui_is_path(url) || !strcmp(url, "/version") || !strcmp(url, "/healthz") || !strcmp(url, "/livez") || !strcmp(url, "/readyz");
}

static enum MHD_Result route(struct gs__req *r)
{
    if (!strcmp(r->url, "/readyz")) { /* not ready while writes fail: a probe write tells when they work again */
        struct gs_store_health h;
        gs_store_health(r->s->store, true, &h);
        if (!h.writable) {
            char *msg = NULL;
            return gs__reply_text(r, 500, "text/plain", asprintf(&msg, "not ready: %s\n", h.why) < 0 ? NULL : msg);
        }
    }
    if (gs_ui_is_path(r->url)) return gs__handle_ui(r); /* ui.c: the console's files, no data */
    if (gs__ui_gpugrid_path(r->url)) return gs__handle_ui_gpugrid(r); /* api_ui.c: the console's first read */
    long bad = strlen(r->url) < sizeof ((struct gs_route *)0)->path ? gs__text_bad_byte(r->url) : -1; /* longer: 414 below */
    if (bad >= 0)
        return gs__reply_status(r, 400, "BadRequest", NULL, "invalid URL path \"%s\": byte %ld is %s", r->url, bad,
                                (unsigned char)r->url[bad] < 0x20 || r->url[bad] == 0x7f
                                    ? "a control character (or %00): no name may contain one"
                                    : "not valid UTF-8");
    struct gs_route rt; /* api_route.c; r's ns/name/sub point into it while the request is routed */
    gs__route_parse(r->url, &rt);
    switch (rt.kind) {
    case GS_RT_HEALTH: {
        char *note = !strcmp(r->url, "/readyz") && r->s->ready_note ? r->s->ready_note(r->s->metrics_arg) : NULL;
        return gs__reply_text(r, 200, "text/plain", note ? note : strdup("ok"));
    }
    case GS_RT_METRICS:
        if (!r->s->metrics) break;
        { /* /metrics hook: Prometheus text from govern/ */
            char *page = r->s->metrics(r->s->metrics_arg);
            if (!page) return gs__reply_status(r, 503, NULL, NULL, "metrics are not available");
            return gs__reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", page);
        }
    case GS_RT_OPENAPI: /* empty: kubectl then skips client-side validation */
        return gs__reply_text(r, 200, "application/octet-stream", NULL);
    case GS_RT_TOO_LONG: return gs__reply_status(r, 414, "RequestURITooLong", NULL, "URL too long");
    case GS_RT_ROOT:
        return gs__reply_json(r, 200, json_pack("{s:[s,s,s,s]}", "paths", "/api", "/api/v1", "/apis", "/version"));
    case GS_RT_DISCOVERY:
        if (strcmp(r->method, "GET")) return gs__reply_status(r, 405, NULL, NULL, "method %s not allowed", r->method);
        return discovery(r, rt.seg, rt.n);
    case GS_RT_RESOURCE:
        r->res = rt.res, r->ns = rt.ns, r->name = rt.name, r->sub = rt.sub;
        return dispatch_resource(r);
    case GS_RT_NOT_FOUND: r->res = rt.res, r->ns = rt.ns, r->name = rt.name, r->sub = rt.sub; break;
    }
    return gs__reply_status(r, 404, NULL, NULL, "the server could not find the requested resource");
}

/*--- Connections ---*/

/* libmicrohttpd's URL decoding (path and query arguments) with one change:
 * %00 becomes DEL (0x7f) instead of ending the C string there, which would
 * silently cut "a%00b" to "a" and serve another object. DEL is a control
 * character, so the path and selector checks then refuse it with 400. */
static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls, (void)c;
    char *w = s;
    for (const char *p = s; *p;) {
        int hi, lo;
        if (p[0] == '%' && (hi = hexval(p[1])) >= 0 && (lo = hexval(p[2])) >= 0) {
            int v = hi * 16 + lo;
            *w++ = (char)(v ? v : 0x7f);
            p += 3;
        } else {
            *w++ = *p++;
        }
    }
    *w = 0;
    return (size_t)(w - s);
}

static enum MHD_Result authenticate(struct gs__req *r)
{
    if (!r->s->auth) {
        r->who = &anonymous_admin;
        return MHD_NO;
    }
    r->who = gs_auth_authenticate(r->s->auth, gs__header(r, "Authorization"));
    if (!r->who && !public_path(r->url)) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;
        if (!gs_netguard_fail_take(r->s->guard, sa, mono_ns())) {
            char ip[64];
            gs_netguard_addr_text(sa, ip, sizeof ip);
            return gs__reply_status(r, 429, NULL, NULL, "too many failed authentications from %s: slow down", ip);
        }
        return gs__reply_status(r, 401, NULL, NULL, "Unauthorized");
    }
    if (r->who && !gs_auth_rate_take(r->s->auth, r->who, mono_ns()))
        return gs__reply_status(r, 429, NULL, NULL, "too many requests from \"%s\": slow down", r->who->user);
    return MHD_NO;
}

static int append_body(struct gs__req *r, const char *data, size_t n)
{
    if (r->too_big || r->len + n > r->s->max_body) {
        r->too_big = true;
        return 0;
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1) cap *= 2;
        char *nb = realloc(r->body, cap);
        if (!nb) return GS_ENOMEM;
        r->body = nb;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = 0;
    return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    struct gs_apiserver *s = cls;
    struct gs__req *r = *con_cls;
    if (!r) {
        if (!(r = calloc(1, sizeof *r))) return MHD_NO;
        *con_cls = r;
        r->s = s;
        r->c = c;
        r->url = url;
        r->method = method;
        r->sub = "";
        /* A body somewhat over the limit is read and dropped so the client (which
         * is still sending) gets the 413; an absurd one is refused at once. */
        const char *cl = gs__header(r, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > 16 * (unsigned long long)s->max_body + (64u << 20))
            return gs__reply_status(r, 413, NULL, NULL, "request body of %s bytes exceeds the limit of %zu", cl,
                                    s->max_body);
        return MHD_YES;
    }
    if (r->answered) { /* refused early: swallow what the client still sends */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        if (append_body(r, upload, *upload_size)) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->too_big)
        return gs__reply_status(r, 413, NULL, NULL, "request body exceeds the limit of %zu bytes", s->max_body);
    if (authenticate(r) == MHD_YES || r->answered) return MHD_YES;
    return route(r);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode tc)
{
    (void)cls;
    (void)c;
    (void)tc;
    struct gs__req *r = *con_cls;
    if (!r) return;
    free(r->body);
    json_decref(r->warnings);
    free(r);
    *con_cls = NULL;
}

static int listen_socket(const char *listen_addr, int *port_out)
{
    char host[256];
    const char *colon = strrchr(listen_addr, ':');
    if (!colon || (size_t)(colon - listen_addr) >= sizeof host) return GS_EINVAL;
    memcpy(host, listen_addr, (size_t)(colon - listen_addr));
    host[colon - listen_addr] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535) return GS_EINVAL;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (!strcmp(host, "localhost")) snprintf(host, sizeof host, "127.0.0.1");
    if (inet_pton(AF_INET, host[0] ? host : "0.0.0.0", &sa.sin_addr) != 1) return GS_EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return GS_EIO;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t sl = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 512) || getsockname(fd, (struct sockaddr *)&sa, &sl)) {
        gs_log(GS_LOG_ERROR, "api: cannot listen", "addr", listen_addr, "error", strerror(errno), NULL);
        close(fd);
        return GS_EIO;
    }
    *port_out = ntohs(sa.sin_port);
    return fd;
}

int gs_apiserver_start(const struct gs_apiserver_opts *o, struct gs_apiserver **out)
{
    *out = NULL;
    struct gs_apiserver *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->store = o->store;
    s->auth = o->auth;
    s->metrics = o->metrics, s->metrics_arg = o->metrics_arg; /* /metrics hook */
    s->ready_note = o->ready_note;                            /* /readyz: which replica leads */
    s->max_body = o->max_body ? o->max_body : DEFAULT_MAX_BODY;
    s->explain = o->explain;
    s->explain_ctx = o->explain_ctx;
    if (watch_keepalive_env(&s->watch_keepalive_ns)) {
        free(s);
        return GS_EINVAL;
    }
    int64_t ui_ms;
    char why[160] = "no memory or thread for the sampler";
    if (gs_ui_history_interval_env(&ui_ms, why, sizeof why) ||
        gs_ui_history_new(o->store, ui_ms, GS_UI_HISTORY_SAMPLES_DEFAULT, &s->ui_history)) {
        gs_log(GS_LOG_ERROR, "api: cannot keep the console's queue history", "why", why, NULL);
        free(s);
        return GS_EINVAL;
    }
    if (gs_gridview_new(o->store, &s->gridview)) /* without it the grid is read from the store */
        gs_log(GS_LOG_WARN, "api: no in-memory view for the console's GPU grid", NULL);
    if (o->ui_reports) snprintf(s->ui_reports, sizeof s->ui_reports, "%s", o->ui_reports);
    if (o->agent_token) snprintf(s->agent_token, sizeof s->agent_token, "%s", o->agent_token);
    struct gs_netguard_opts go = {.fail_qps = o->fail_qps};
    if (gs_netguard_new(&go, &s->guard)) {
        gs_ui_history_free(s->ui_history);
        gs_gridview_free(s->gridview);
        free(s);
        return GS_ENOMEM;
    }
    gs_admit_defaults_init(&s->admit_defaults, o->admit_defaults); /* admit_defaults.c */
    int fd = listen_socket(o->listen ? o->listen : "127.0.0.1:6443", &s->port);
    if (fd < 0) {
        gs_netguard_free(s->guard);
        gs_ui_history_free(s->ui_history);
        gs_gridview_free(s->gridview);
        free(s);
        return fd;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (o->tls) flags |= MHD_USE_TLS;
    struct MHD_OptionItem tls_opts[] = {
        {MHD_OPTION_HTTPS_MEM_KEY, 0, o->tls ? o->tls->key_pem : NULL},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, o->tls ? o->tls->cert_pem : NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    /* The connection pool holds only headers and the read buffer (bodies are
     * copied out, see append_body); libmicrohttpd zeroes it between requests,
     * so a large one costs every request on a kept-alive connection. */
    /* One thread per connection: the limits bound threads as well as sockets;
     * the idle timeout frees those held by clients that never finish a request. */
    unsigned max_conn = o->max_connections ? o->max_connections : 1024;
    unsigned per_ip = o->max_per_ip ? o->max_per_ip : 512;
    unsigned idle = o->idle_timeout_s ? o->idle_timeout_s : 30;
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, fd,
                            MHD_OPTION_NOTIFY_COMPLETED, on_done, s, MHD_OPTION_CONNECTION_TIMEOUT, idle,
                            MHD_OPTION_CONNECTION_LIMIT, max_conn, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024, MHD_OPTION_UNESCAPE_CALLBACK,
                            unescape, NULL, MHD_OPTION_ARRAY,
                            o->tls ? tls_opts : tls_opts + 2, MHD_OPTION_END);
    if (!s->d) {
        gs_log(GS_LOG_ERROR, "api: libmicrohttpd failed to start", NULL);
        close(fd);
        gs_netguard_free(s->guard);
        gs_ui_history_free(s->ui_history);
        gs_gridview_free(s->gridview);
        free(s);
        return GS_EIO;
    }
    s->fd = fd;
    *out = s;
    return 0;
}

int gs_apiserver_port(const struct gs_apiserver *s)
{
    return s->port;
}

void gs_apiserver_stop(struct gs_apiserver *s)
{
    if (!s) return;
    atomic_store(&s->stopping, true);
    gs_store_interrupt(s->store);
    MHD_stop_daemon(s->d);
    close(s->fd);
    gs_ui_history_free(s->ui_history);
    gs_gridview_free(s->gridview);
    gs_netguard_free(s->guard);
    gs__fields_cache_free(atomic_load(&s->fields_cache));
    free(s);
}
