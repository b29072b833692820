/*
 * etcd.c - the etcd v3 client of etcd.h on the gRPC C core.
 *
 * One channel per endpoint, made at open; gRPC connects lazily and
 * reconnects by itself, with the reconnect backoff capped at 1 s so a
 * restarted member is used again within a second or two instead of after
 * gRPC's default of up to two minutes. `cur` is the endpoint that answered last:
 * every call starts there, so a healthy client sticks to one member and
 * moves on only when that one fails. Calls are not sent with
 * wait-for-ready: an unreachable member fails fast (UNAVAILABLE) and the
 * next one is tried at once.
 *
 * A unary call owns its completion queue (one batch with every op, as in
 * src/node/deviceplugin/rpc.c); a watch stream owns one too and is read by
 * one thread, with at most one send and one read in flight.
 */
#include "control/etcd.h"

#include "core/error.h"
#include "core/log.h"
#include "etcdserverpb/rpc.pb-c.h"

#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <protobuf-c/protobuf-c.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_TIMEOUT_MS 5000

struct gs_etcd {
    size_t n;
    char **urls;           /* as given */
    grpc_channel **ch;
    char *joined;          /* "URL,URL" for messages */
    atomic_size_t cur;     /* the endpoint that answered last */
    int timeout_ms;
};

static void setwhy(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void setwhy(char *why, size_t len, const char *fmt, ...)
{
    if (!why || !len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

/*--- Endpoints ---*/

int gs_etcd_endpoint_check(const char *url, char *why, size_t why_len)
{
    const char *hp = NULL;
    if (!strncmp(url, "http://", 7)) hp = url + 7;
    else if (!strncmp(url, "https://", 8)) hp = url + 8;
    if (!hp) {
        setwhy(why, why_len, "endpoint \"%s\": want http://HOST:PORT or https://HOST:PORT", url);
        return GS_EINVAL;
    }
    const char *colon;
    if (*hp == '[') { /* [v6]:port */
        const char *rb = strchr(hp, ']');
        if (!rb || rb == hp + 1 || rb[1] != ':') {
            setwhy(why, why_len, "endpoint \"%s\": an IPv6 host is written [ADDR]:PORT", url);
            return GS_EINVAL;
        }
        colon = rb + 1;
    } else {
        colon = strrchr(hp, ':');
        if (!colon || colon == hp) {
            setwhy(why, why_len, "endpoint \"%s\": want HOST:PORT after the scheme (etcd has no default port here)",
                   url);
            return GS_EINVAL;
        }
        for (const char *p = hp; p < colon; p++)
            if (*p == '/' || *p == '@' || *p == ' ' || *p == ':') {
                setwhy(why, why_len, "endpoint \"%s\": the host may not contain '%c'", url, *p);
                return GS_EINVAL;
            }
    }
    const char *port = colon + 1;
    char *end = NULL;
    errno = 0;
    long v = strtol(port, &end, 10);
    if (!*port || errno || (*end && strcmp(end, "/")) || v < 1 || v > 65535 || *port == '+' || *port == '-') {
        setwhy(why, why_len, "endpoint \"%s\": the port must be a number from 1 to 65535 (and no path follows)", url);
        return GS_EINVAL;
    }
    return 0;
}

void gs_etcd_endpoints_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

int gs_etcd_endpoints_parse(const char *list, char ***out, size_t *n, char *why, size_t why_len)
{
    *out = NULL;
    *n = 0;
    if (!list || !*list) {
        setwhy(why, why_len, "no endpoint given: want URL[,URL...] such as http://127.0.0.1:2379");
        return GS_EINVAL;
    }
    char **v = NULL;
    size_t k = 0;
    int err = 0;
    for (const char *p = list;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *one = strndup(p, len);
        char **nv = one ? realloc(v, (k + 1) * sizeof *v) : NULL;
        if (!nv) {
            free(one);
            err = GS_ENOMEM;
            break;
        }
        v = nv;
        v[k++] = one;
        if (!len) {
            setwhy(why, why_len, "\"%s\": an empty endpoint (two commas, or one at an end)", list);
            err = GS_EINVAL;
            break;
        }
        if ((err = gs_etcd_endpoint_check(one, why, why_len))) break;
        for (size_t i = 0; i + 1 < k; i++)
            if (!strcmp(v[i], one)) {
                setwhy(why, why_len, "endpoint \"%s\" is given twice", one);
                err = GS_EINVAL;
            }
        if (err || !e) break;
        p = e + 1;
    }
    if (err) {
        gs_etcd_endpoints_free(v, k);
        return err;
    }
    *out = v;
    *n = k;
    return 0;
}

static char *read_file(const char *path, const char *what, char *why, size_t why_len, int *err)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        setwhy(why, why_len, "%s \"%s\": cannot read: %s", what, path, strerror(errno));
        *err = GS_EIO;
        return NULL;
    }
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        *err = GS_ENOMEM;
        return NULL;
    }
    buf[len] = 0;
    if (!strstr(buf, "-----BEGIN ")) {
        setwhy(why, why_len, "%s \"%s\": not a PEM file (no -----BEGIN line)", what, path);
        free(buf);
        *err = GS_EINVAL;
        return NULL;
    }
    return buf;
}

static grpc_channel_credentials *tls_creds(const struct gs_etcd_opts *o, char *why, size_t why_len, int *err)
{
    char *ca = NULL, *cert = NULL, *key = NULL;
    if (o->cafile && !(ca = read_file(o->cafile, "etcd CA file", why, why_len, err))) return NULL;
    if (o->certfile && !(cert = read_file(o->certfile, "etcd certificate file", why, why_len, err))) goto fail;
    if (o->keyfile && !(key = read_file(o->keyfile, "etcd key file", why, why_len, err))) goto fail;
    grpc_ssl_pem_key_cert_pair pair = {key, cert};
    grpc_channel_credentials *c = grpc_ssl_credentials_create(ca, cert ? &pair : NULL, NULL, NULL);
    if (!c) {
        setwhy(why, why_len, "the TLS credentials from the etcd CA, certificate and key files were refused");
        *err = GS_EINVAL;
    }
    free(ca);
    free(cert);
    free(key);
    return c;
fail:
    free(ca);
    free(cert);
    free(key);
    return NULL;
}

int gs_etcd_open(const struct gs_etcd_opts *o, struct gs_etcd **out, char *why, size_t why_len)
{
    *out = NULL;
    if (!o->n_endpoints) {
        setwhy(why, why_len, "no etcd endpoint given");
        return GS_EINVAL;
    }
    bool any_tls = false;
    for (size_t i = 0; i < o->n_endpoints; i++) {
        int err = gs_etcd_endpoint_check(o->endpoints[i], why, why_len);
        if (err) return err;
        any_tls |= !strncmp(o->endpoints[i], "https://", 8);
    }
    if (!o->certfile != !o->keyfile) {
        setwhy(why, why_len, "an etcd client certificate needs both the certificate file and the key file (got only "
               "the %s)", o->certfile ? "certificate" : "key");
        return GS_EINVAL;
    }
    if (!any_tls && (o->cafile || o->certfile)) {
        setwhy(why, why_len, "TLS files are given but no endpoint is https://: name the endpoints https://HOST:PORT");
        return GS_EINVAL;
    }
    if (o->call_timeout_ms < 0) {
        setwhy(why, why_len, "call timeout %d ms: must be positive", o->call_timeout_ms);
        return GS_EINVAL;
    }
    struct gs_etcd *c = calloc(1, sizeof *c);
    if (!c) return GS_ENOMEM;
    c->n = o->n_endpoints;
    c->timeout_ms = o->call_timeout_ms ? o->call_timeout_ms : DEFAULT_TIMEOUT_MS;
    c->urls = calloc(c->n, sizeof *c->urls);
    c->ch = calloc(c->n, sizeof *c->ch);
    size_t jl = 1;
    for (size_t i = 0; i < c->n; i++) jl += strlen(o->endpoints[i]) + 1;
    c->joined = calloc(1, jl);
    if (!c->urls || !c->ch || !c->joined) {
        free(c->urls);
        free(c->ch);
        free(c->joined);
        free(c);
        return GS_ENOMEM;
    }
    grpc_init();
    int err = 0;
    grpc_channel_credentials *tls = any_tls ? tls_creds(o, why, why_len, &err) : NULL;
    grpc_channel_credentials *plain = grpc_insecure_credentials_create();
    grpc_arg args[] = {
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, .value.integer = -1},
        /* Only the ceiling: gRPC 1.51 never reconnects to a restarted member
         * when GRPC_ARG_MIN_RECONNECT_BACKOFF_MS (also its connect timeout) is set. */
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, .value.integer = 1000},
        /* A member that stops answering (paused, partitioned) is noticed on an idle watch too.
         * etcd refuses pings more often than every 5 s. */
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_KEEPALIVE_TIME_MS, .value.integer = 10000},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_KEEPALIVE_TIMEOUT_MS, .value.integer = 5000},
    };
    grpc_channel_args cargs = {.num_args = sizeof args / sizeof args[0], .args = args};
    for (size_t i = 0; !err && i < c->n; i++) {
        const char *u = o->endpoints[i];
        bool https = !strncmp(u, "https://", 8);
        char target[512];
        snprintf(target, sizeof target, "%.*s", (int)strcspn(u + (https ? 8 : 7), "/"), u + (https ? 8 : 7));
        c->urls[i] = strdup(u);
        if (!c->urls[i]) {
            err = GS_ENOMEM;
            break;
        }
        strcat(c->joined, i ? "," : "");
        strcat(c->joined, u);
        c->ch[i] = grpc_channel_create(target, https ? tls : plain, &cargs);
        if (!c->ch[i]) {
            setwhy(why, why_len, "endpoint \"%s\": gRPC cannot make a channel to it", u);
            err = GS_EINVAL;
        }
    }
    if (tls) grpc_channel_credentials_release(tls);
    grpc_channel_credentials_release(plain);
    if (err) {
        gs_etcd_close(c);
        return err;
    }
    *out = c;
    return 0;
}

void gs_etcd_close(struct gs_etcd *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        if (c->ch[i]) grpc_channel_destroy(c->ch[i]);
        free(c->urls[i]);
    }
    free(c->ch);
    free(c->urls);
    free(c->joined);
    free(c);
    grpc_shutdown();
}

const char *gs_etcd_endpoints(const struct gs_etcd *c) { return c->joined; }

/*--- Messages ---*/

/* m packed into a slice (one reference). */
static grpc_slice pack_slice(const struct ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    grpc_slice s = grpc_slice_malloc(len);
    protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
    return s;
}

/* A byte buffer for one send: the call takes its contents, so an attempt on
 * another endpoint needs a new one. */
static grpc_byte_buffer *buffer_of(grpc_slice s)
{
    return grpc_raw_byte_buffer_create(&s, 1);
}

static grpc_byte_buffer *pack(const struct ProtobufCMessage *m)
{
    grpc_slice s = pack_slice(m);
    grpc_byte_buffer *b = buffer_of(s);
    grpc_slice_unref(s);
    return b;
}

static struct ProtobufCMessage *unpack(grpc_byte_buffer *b, const struct ProtobufCMessageDescriptor *d)
{
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, b)) return NULL;
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    struct ProtobufCMessage *m =
        protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
    grpc_slice_unref(s);
    return m;
}

static gpr_timespec at_ns(int64_t mono_ns)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_nanos(mono_ns, GPR_TIMESPAN));
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* etcd's status for a failed call, as one of our codes. */
static int map_status(grpc_status_code code, const char *msg)
{
    switch (code) {
    case GRPC_STATUS_OK: return 0;
    case GRPC_STATUS_DEADLINE_EXCEEDED: return GS_ETIMEDOUT;
    case GRPC_STATUS_OUT_OF_RANGE: return strstr(msg, "compacted") ? GS_ERANGE : GS_EINVAL;
    case GRPC_STATUS_INVALID_ARGUMENT:
    case GRPC_STATUS_FAILED_PRECONDITION: return GS_EINVAL;
    case GRPC_STATUS_NOT_FOUND: return GS_ENOENT;
    case GRPC_STATUS_PERMISSION_DENIED:
    case GRPC_STATUS_UNAUTHENTICATED: return GS_EPERM;
    default: return GS_EIO;
    }
}

/* One attempt on endpoint i: the status code, details in msg. */
static grpc_status_code call_once(struct gs_etcd *c, size_t i, const char *method, grpc_slice req,
                                  int64_t budget_ns, grpc_byte_buffer **recv, char *msg, size_t msg_len)
{
    *recv = NULL;
    grpc_byte_buffer *send = buffer_of(req);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_call *call = grpc_channel_create_call(c->ch[i], NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                               grpc_slice_from_static_string(method), NULL, at_ns(budget_ns), NULL);
    grpc_metadata_array md_init, md_trail;
    grpc_metadata_array_init(&md_init);
    grpc_metadata_array_init(&md_trail);
    grpc_status_code code = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &md_init;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &md_trail;
    ops[5].data.recv_status_on_client.status = &code;
    ops[5].data.recv_status_on_client.status_details = &details;
    if (grpc_call_start_batch(call, ops, 6, call, NULL) == GRPC_CALL_OK) {
        grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL); /* the deadline bounds it */
    } else {
        snprintf(msg, msg_len, "gRPC refused to start the call");
    }
    size_t n = GRPC_SLICE_LENGTH(details) < msg_len - 1 ? GRPC_SLICE_LENGTH(details) : msg_len - 1;
    if (code != GRPC_STATUS_UNKNOWN || n) {
        memcpy(msg, GRPC_SLICE_START_PTR(details), n);
        msg[n] = 0;
    }
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&md_init);
    grpc_metadata_array_destroy(&md_trail);
    grpc_call_unref(call);
    grpc_byte_buffer_destroy(send);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
    if (code != GRPC_STATUS_OK && *recv) {
        grpc_byte_buffer_destroy(*recv);
        *recv = NULL;
    }
    return code;
}

int gs_etcd_unary(struct gs_etcd *c, const char *method, const struct ProtobufCMessage *req,
                  const struct ProtobufCMessageDescriptor *resp_desc, struct ProtobufCMessage **resp, bool idempotent,
                  int timeout_ms, bool *resent, char *why, size_t why_len)
{
    *resp = NULL;
    if (resent) *resent = false;
    bool failed_before = false;
    grpc_slice send = pack_slice(req);
    int64_t start = now_ns(), end = start + (int64_t)(timeout_ms > 0 ? timeout_ms : c->timeout_ms) * 1000000;
    size_t first = atomic_load(&c->cur);
    char msg[400] = "";
    int err = GS_EIO;
    for (size_t tries = 0;; tries++) {
        size_t i = (first + tries) % c->n;
        int64_t left = end - now_ns();
        if (left <= 0) {
            if (!msg[0]) snprintf(msg, sizeof msg, "deadline passed");
            err = err == GS_EIO ? GS_ETIMEDOUT : err;
            break;
        }
        /* A member that hangs (paused, cut off) must not take the whole
         * budget: share what is left among the endpoints not yet tried in
         * this round. */
        size_t round_left = c->n - tries % c->n;
        int64_t budget = idempotent && round_left > 1 ? left / (int64_t)round_left : left;
        if (budget < 200000000 && left > 200000000) budget = 200000000;
        grpc_byte_buffer *recv = NULL;
        char one[300] = "";
        grpc_status_code code = call_once(c, i, method, send, budget, &recv, one, sizeof one);
        if (code == GRPC_STATUS_OK) {
            if (resent) *resent = failed_before;
            atomic_store(&c->cur, i);
            *resp = recv ? unpack(recv, resp_desc) : protobuf_c_message_unpack(resp_desc, NULL, 0, (const uint8_t *)"");
            if (recv) grpc_byte_buffer_destroy(recv);
            grpc_slice_unref(send);
            if (!*resp) {
                setwhy(why, why_len, "%s at %s: the answer is not a valid %s message", method, c->urls[i],
                       resp_desc->name);
                return GS_EIO;
            }
            return 0;
        }
        snprintf(msg, sizeof msg, "%s: %s (gRPC status %d)", c->urls[i], one[0] ? one : "no detail", (int)code);
        err = map_status(code, one);
        bool next = code == GRPC_STATUS_UNAVAILABLE || (idempotent && code == GRPC_STATUS_DEADLINE_EXCEEDED);
        if (!next) {
            if (code == GRPC_STATUS_DEADLINE_EXCEEDED) atomic_store(&c->cur, (i + 1) % c->n);
            break;
        }
        failed_before = true;
        atomic_store(&c->cur, (i + 1) % c->n);
        if ((tries + 1) % c->n == 0) { /* every endpoint failed once: a short pause, then another round */
            struct timespec ts = {0, 100000000};
            nanosleep(&ts, NULL);
        }
    }
    grpc_slice_unref(send);
    setwhy(why, why_len, "%s failed on every etcd endpoint (%s); last: %s", method, c->joined, msg);
    return err;
}

/*--- Watch streams ---*/

struct gs_etcd_watch {
    struct gs_etcd *c;
    size_t ep;
    grpc_call *call;
    grpc_completion_queue *cq;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array md_init, md_trail;
    grpc_status_code code;
    grpc_slice details;
    int pending;
    bool reading, sending, got_md, ended, status_done;
    char t_send, t_status, t_read; /* their addresses are the tags */
};

int gs_etcd_watch_open(struct gs_etcd *c, const struct ProtobufCMessage *req, struct gs_etcd_watch **out, char *why,
                       size_t why_len)
{
    *out = NULL;
    struct gs_etcd_watch *w = calloc(1, sizeof *w);
    if (!w) return GS_ENOMEM;
    w->c = c;
    w->ep = atomic_load(&c->cur);
    w->send = pack(req);
    if (!w->send) {
        free(w);
        return GS_ENOMEM;
    }
    w->cq = grpc_completion_queue_create_for_next(NULL);
    w->call = grpc_channel_create_call(c->ch[w->ep], NULL, GRPC_PROPAGATE_DEFAULTS, w->cq,
                                       grpc_slice_from_static_string("/etcdserverpb.Watch/Watch"), NULL,
                                       gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    w->details = grpc_empty_slice();
    grpc_metadata_array_init(&w->md_init);
    grpc_metadata_array_init(&w->md_trail);
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = w->send;
    int err = 0;
    if (grpc_call_start_batch(w->call, ops, 2, &w->t_send, NULL) == GRPC_CALL_OK) w->pending++, w->sending = true;
    else err = GS_EIO;
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &w->md_trail;
    ops[0].data.recv_status_on_client.status = &w->code;
    ops[0].data.recv_status_on_client.status_details = &w->details;
    if (!err && grpc_call_start_batch(w->call, ops, 1, &w->t_status, NULL) == GRPC_CALL_OK) w->pending++;
    else err = GS_EIO;
    if (err) {
        setwhy(why, why_len, "watch at %s: gRPC refused to start the stream", c->urls[w->ep]);
        w->ended = true;
        gs_etcd_watch_close(w);
        return err;
    }
    *out = w;
    return 0;
}

static void watch_event(struct gs_etcd_watch *w, grpc_event ev)
{
    w->pending--;
    if (ev.tag == &w->t_status) {
        w->status_done = w->ended = true;
    } else if (ev.tag == &w->t_send) {
        w->sending = false;
        grpc_byte_buffer_destroy(w->send);
        w->send = NULL;
    } else if (ev.tag == &w->t_read) {
        w->reading = false;
        if (!ev.success || !w->recv) w->ended = true;
    }
}

static int watch_ended(struct gs_etcd_watch *w, char *why, size_t why_len)
{
    /* The endpoint failed (or the stream was cancelled): the next stream goes elsewhere. */
    size_t cur = atomic_load(&w->c->cur);
    if (cur == w->ep && !(w->status_done && w->code == GRPC_STATUS_CANCELLED))
        atomic_compare_exchange_strong(&w->c->cur, &cur, (w->ep + 1) % w->c->n);
    setwhy(why, why_len, "watch at %s ended: %.*s (gRPC status %d)", w->c->urls[w->ep],
           (int)GRPC_SLICE_LENGTH(w->details), (const char *)GRPC_SLICE_START_PTR(w->details),
           w->status_done ? (int)w->code : -1);
    return GS_EIO;
}

int gs_etcd_watch_next(struct gs_etcd_watch *w, int timeout_ms, struct ProtobufCMessage **resp, char *why,
                       size_t why_len)
{
    *resp = NULL;
    gpr_timespec dl = at_ns((int64_t)timeout_ms * 1000000);
    for (;;) {
        if (w->ended && !w->reading) {
            /* Wait a little for the status, which says why. */
            while (!w->status_done && w->pending) {
                grpc_event ev = grpc_completion_queue_next(w->cq, dl, NULL);
                if (ev.type != GRPC_OP_COMPLETE) break;
                watch_event(w, ev);
            }
            return watch_ended(w, why, why_len);
        }
        if (!w->reading) {
            grpc_op ops[2];
            memset(ops, 0, sizeof ops);
            size_t k = 0;
            if (!w->got_md) {
                ops[k].op = GRPC_OP_RECV_INITIAL_METADATA;
                ops[k++].data.recv_initial_metadata.recv_initial_metadata = &w->md_init;
            }
            ops[k].op = GRPC_OP_RECV_MESSAGE;
            ops[k++].data.recv_message.recv_message = &w->recv;
            if (grpc_call_start_batch(w->call, ops, k, &w->t_read, NULL) != GRPC_CALL_OK) {
                w->ended = true;
                continue;
            }
            w->got_md = true;
            w->pending++;
            w->reading = true;
        }
        grpc_event ev = grpc_completion_queue_next(w->cq, dl, NULL);
        if (ev.type == GRPC_QUEUE_TIMEOUT) return GS_ETIMEDOUT;
        if (ev.type != GRPC_OP_COMPLETE) continue;
        bool was_read = ev.tag == &w->t_read;
        watch_event(w, ev);
        if (!was_read || !w->recv) continue;
        struct ProtobufCMessage *m = unpack(w->recv, &etcdserverpb__watch_response__descriptor);
        grpc_byte_buffer_destroy(w->recv);
        w->recv = NULL;
        if (!m) {
            setwhy(why, why_len, "watch at %s: an answer that is not a WatchResponse", w->c->urls[w->ep]);
            gs_etcd_watch_cancel(w);
            continue;
        }
        atomic_store(&w->c->cur, w->ep);
        *resp = m;
        return 0;
    }
}

int gs_etcd_watch_send(struct gs_etcd_watch *w, const struct ProtobufCMessage *req)
{
    if (w->sending || w->ended) return 0;
    w->send = pack(req);
    if (!w->send) return GS_ENOMEM;
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = w->send;
    if (grpc_call_start_batch(w->call, &op, 1, &w->t_send, NULL) != GRPC_CALL_OK) {
        grpc_byte_buffer_destroy(w->send);
        w->send = NULL;
        return GS_EIO;
    }
    w->pending++;
    w->sending = true;
    return 0;
}

void gs_etcd_watch_cancel(struct gs_etcd_watch *w)
{
    if (w && w->call) grpc_call_cancel(w->call, NULL);
}

void gs_etcd_watch_close(struct gs_etcd_watch *w)
{
    if (!w) return;
    if (w->call) {
        if (!w->status_done) grpc_call_cancel(w->call, NULL);
        while (w->pending > 0) {
            grpc_event ev = grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
            if (ev.type != GRPC_OP_COMPLETE) break;
            watch_event(w, ev);
        }
        grpc_call_unref(w->call);
    }
    if (w->send) grpc_byte_buffer_destroy(w->send);
    if (w->recv) grpc_byte_buffer_destroy(w->recv);
    grpc_slice_unref(w->details);
    grpc_metadata_array_destroy(&w->md_init);
    grpc_metadata_array_destroy(&w->md_trail);
    grpc_completion_queue_shutdown(w->cq);
    while (grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(w->cq);
    free(w);
}
