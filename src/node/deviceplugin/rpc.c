/*
 * rpc.c - gRPC C core server and client (rpc.h).
 *
 * Tags on the completion queue are pointers to `struct op`, each embedded in
 * its call and naming which batch finished. A call is freed when no batch of
 * it is outstanding; the close-on-server batch is outstanding for the whole
 * life of a call, so "nothing outstanding" means "the call is over".
 */
#include "node/deviceplugin/rpc.h"

#include "core/error.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*--- Byte buffers ---*/

static grpc_byte_buffer *to_buffer(const uint8_t *p, size_t n)
{
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)(p ? p : (const uint8_t *)""), n);
    grpc_byte_buffer *b = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return b;
}

/* Copies a received buffer into malloc'd bytes (NULL for zero length). */
static int from_buffer(grpc_byte_buffer *b, uint8_t **out, size_t *len)
{
    grpc_byte_buffer_reader r;
    *out = NULL, *len = 0;
    if (!grpc_byte_buffer_reader_init(&r, b)) return GS_EIO;
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    size_t n = GRPC_SLICE_LENGTH(s);
    if (n) {
        *out = malloc(n);
        if (*out) memcpy(*out, GRPC_SLICE_START_PTR(s), n), *len = n;
    }
    grpc_slice_unref(s);
    return n && !*out ? GS_ENOMEM : 0;
}

static gpr_timespec in_ms(int ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

/*--- Server: calls ---*/

enum op_kind { OP_NEW, OP_RECV, OP_CLOSE, OP_SEND, OP_FINISH, OP_SHUTDOWN };

struct call;
struct op {
    enum op_kind kind;
    struct call *c;
};

struct gs_rpc_server {
    struct gs_rpc_server_cfg cfg;
    char path[256];
    grpc_server *server;
    grpc_completion_queue *cq;
    pthread_t thread;
    atomic_bool stop;
    atomic_int streams;
    int live;                 /* calls allocated (server thread only) */
    struct call *stream_list; /* open streams (server thread only) */
    struct op shutdown_op;
};

struct call {
    struct gs_rpc_server *srv;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
    grpc_byte_buffer *recv, *send;
    int cancelled, pending;
    bool closed, sending, md_sent, streaming;
    uint64_t version;
    const struct gs_rpc_method *m;
    struct call *next;
    struct op o_new, o_recv, o_close, o_send, o_finish;
    grpc_status_code code;
    grpc_slice detail;
};

static void post_request(struct gs_rpc_server *s)
{
    struct call *c = calloc(1, sizeof *c);
    if (!c) return; /* no memory: stop taking calls rather than crash */
    c->srv = s;
    c->o_new = (struct op){OP_NEW, c};
    c->o_recv = (struct op){OP_RECV, c};
    c->o_close = (struct op){OP_CLOSE, c};
    c->o_send = (struct op){OP_SEND, c};
    c->o_finish = (struct op){OP_FINISH, c};
    c->detail = grpc_empty_slice();
    grpc_call_details_init(&c->details);
    grpc_metadata_array_init(&c->md);
    s->live++;
    if (grpc_server_request_call(s->server, &c->call, &c->details, &c->md, s->cq, s->cq, &c->o_new) != GRPC_CALL_OK) {
        grpc_call_details_destroy(&c->details);
        grpc_metadata_array_destroy(&c->md);
        s->live--;
        free(c);
    }
}

static void unlink_stream(struct call *c)
{
    struct call **pp = &c->srv->stream_list;
    while (*pp && *pp != c) pp = &(*pp)->next;
    if (*pp) {
        *pp = c->next;
        atomic_fetch_sub(&c->srv->streams, 1);
    }
}

static void call_free(struct call *c)
{
    unlink_stream(c);
    if (c->call) grpc_call_unref(c->call);
    if (c->recv) grpc_byte_buffer_destroy(c->recv);
    if (c->send) grpc_byte_buffer_destroy(c->send);
    grpc_slice_unref(c->detail);
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->md);
    c->srv->live--;
    free(c);
}

static bool start_batch(struct call *c, const grpc_op *ops, size_t n, struct op *tag)
{
    if (grpc_call_start_batch(c->call, ops, n, tag, NULL) != GRPC_CALL_OK) return false;
    c->pending++;
    return true;
}

static const struct gs_rpc_method *route(struct gs_rpc_server *s, grpc_slice method)
{
    for (size_t i = 0; i < s->cfg.n_methods; i++) {
        const char *p = s->cfg.methods[i].path;
        if (strlen(p) == GRPC_SLICE_LENGTH(method) && !memcmp(p, GRPC_SLICE_START_PTR(method), strlen(p)))
            return &s->cfg.methods[i];
    }
    return NULL;
}

/* Sends the status (and, for a unary OK, the reply) and ends the call. */
static void finish(struct call *c, grpc_status_code code, const char *msg, grpc_byte_buffer *reply)
{
    grpc_op ops[3];
    size_t n = 0;
    memset(ops, 0, sizeof ops);
    if (!c->md_sent) {
        ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
        n++;
        c->md_sent = true;
    }
    if (reply) {
        c->send = reply;
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n].data.send_message.send_message = reply;
        n++;
    }
    grpc_slice_unref(c->detail);
    c->detail = grpc_slice_from_copied_string(msg ? msg : "");
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = code;
    ops[n].data.send_status_from_server.status_details = &c->detail;
    n++;
    start_batch(c, ops, n, &c->o_finish);
}

static void send_stream(struct call *c)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    uint64_t v = c->m->stream->version(c->srv->cfg.ud);
    if (c->m->stream->message(c->srv->cfg.ud, &buf, &len)) {
        free(buf);
        return;
    }
    grpc_op ops[2];
    size_t n = 0;
    memset(ops, 0, sizeof ops);
    if (!c->md_sent) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        c->md_sent = true;
    }
    c->send = to_buffer(buf, len);
    free(buf);
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n].data.send_message.send_message = c->send;
    n++;
    if (start_batch(c, ops, n, &c->o_send)) {
        c->sending = true;
        c->version = v;
    } else {
        grpc_byte_buffer_destroy(c->send);
        c->send = NULL;
    }
}

static void on_new(struct call *c, bool ok)
{
    struct gs_rpc_server *s = c->srv;
    if (!ok) {
        call_free(c);
        return;
    }
    if (!atomic_load(&s->stop)) post_request(s);
    c->m = route(s, c->details.method);
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->cancelled;
    start_batch(c, &op, 1, &c->o_close);
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &c->recv;
    start_batch(c, &op, 1, &c->o_recv);
}

static void run_unary(struct call *c)
{
    uint8_t *req = NULL, *resp = NULL;
    size_t len = 0, rlen = 0;
    char msg[512] = "";
    if (c->recv && from_buffer(c->recv, &req, &len)) {
        finish(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL);
        return;
    }
    int code = c->m->unary(c->srv->cfg.ud, req, len, &resp, &rlen, msg, sizeof msg);
    free(req);
    if (code == GS_RPC_OK) finish(c, GRPC_STATUS_OK, "", to_buffer(resp, rlen));
    else finish(c, (grpc_status_code)code, msg, NULL);
    free(resp);
}

static void on_recv(struct call *c, bool ok)
{
    if (!ok || c->closed) return;
    if (!c->m) {
        finish(c, GRPC_STATUS_UNIMPLEMENTED, "unknown method", NULL);
    } else if (c->m->unary) {
        run_unary(c);
    } else {
        c->streaming = true;
        c->next = c->srv->stream_list;
        c->srv->stream_list = c;
        atomic_fetch_add(&c->srv->streams, 1);
        send_stream(c);
    }
}

static void handle(struct gs_rpc_server *s, struct op *op, bool ok)
{
    if (op->kind == OP_SHUTDOWN) return;
    struct call *c = op->c;
    if (op->kind == OP_NEW) {
        on_new(c, ok);
        return;
    }
    c->pending--;
    switch (op->kind) {
    case OP_RECV: on_recv(c, ok); break;
    case OP_CLOSE:
        c->closed = true;
        unlink_stream(c);
        break;
    case OP_SEND:
        c->sending = false;
        grpc_byte_buffer_destroy(c->send);
        c->send = NULL;
        if (!ok) unlink_stream(c);
        break;
    default: break;
    }
    (void)s;
    if (c->pending == 0) call_free(c);
}

/*--- Server: loop ---*/

static void pump_streams(struct gs_rpc_server *s)
{
    for (struct call *c = s->stream_list; c; c = c->next)
        if (!c->sending && !c->closed && c->m->stream->version(s->cfg.ud) != c->version) send_stream(c);
}

static void *server_main(void *arg)
{
    struct gs_rpc_server *s = arg;
    int poll_ms = s->cfg.poll_ms > 0 ? s->cfg.poll_ms : 20;
    bool shutting = false, notified = false;
    while (!notified || s->live > 0) {
        if (!shutting && atomic_load(&s->stop)) {
            shutting = true;
            grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_op);
            grpc_server_cancel_all_calls(s->server);
        }
        grpc_event ev = grpc_completion_queue_next(s->cq, in_ms(poll_ms), NULL);
        if (ev.type == GRPC_OP_COMPLETE) {
            struct op *op = ev.tag;
            if (op->kind == OP_SHUTDOWN) notified = true;
            else handle(s, op, ev.success);
        }
        if (!shutting) pump_streams(s);
    }
    grpc_server_destroy(s->server);
    grpc_completion_queue_shutdown(s->cq);
    while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(s->cq);
    unlink(s->path);
    return NULL;
}

int gs_rpc_server_start(const struct gs_rpc_server_cfg *cfg, struct gs_rpc_server **out, char *err,
                        size_t errlen)
{
    struct gs_rpc_server *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->cfg = *cfg;
    s->shutdown_op.kind = OP_SHUTDOWN;
    snprintf(s->path, sizeof s->path, "%s", cfg->socket_path);
    char addr[300];
    snprintf(addr, sizeof addr, "unix:%s", cfg->socket_path);
    grpc_init();
    s->cq = grpc_completion_queue_create_for_next(NULL);
    s->server = grpc_server_create(NULL, NULL);
    grpc_server_register_completion_queue(s->server, s->cq, NULL);
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(s->server, addr, creds);
    grpc_server_credentials_release(creds);
    if (!port) {
        snprintf(err, errlen, "cannot listen on %s", cfg->socket_path);
        grpc_server_destroy(s->server);
        grpc_completion_queue_shutdown(s->cq);
        while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN) {
        }
        grpc_completion_queue_destroy(s->cq);
        grpc_shutdown();
        free(s);
        return GS_EIO;
    }
    grpc_server_start(s->server);
    post_request(s);
    if (pthread_create(&s->thread, NULL, server_main, s)) {
        atomic_store(&s->stop, true);
        server_main(s);
        grpc_shutdown();
        free(s);
        snprintf(err, errlen, "cannot start the server thread");
        return GS_ENOMEM;
    }
    *out = s;
    return 0;
}

void gs_rpc_server_stop(struct gs_rpc_server *s)
{
    if (!s) return;
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    grpc_shutdown();
    free(s);
}

int gs_rpc_server_streams(struct gs_rpc_server *s)
{
    return atomic_load(&s->streams);
}

/*--- Client ---*/

struct gs_rpc_conn {
    grpc_channel *ch;
};

int gs_rpc_dial(const char *socket_path, struct gs_rpc_conn **out)
{
    struct gs_rpc_conn *c = calloc(1, sizeof *c);
    if (!c) return GS_ENOMEM;
    char addr[300];
    snprintf(addr, sizeof addr, "unix:%s", socket_path);
    grpc_init();
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    /* kubelet dials with authority "localhost"; do the same for servers that check. */
    grpc_arg arg = {.type = GRPC_ARG_STRING, .key = GRPC_ARG_DEFAULT_AUTHORITY, .value.string = "localhost"};
    grpc_channel_args args = {.num_args = 1, .args = &arg};
    c->ch = grpc_channel_create(addr, creds, &args);
    grpc_channel_credentials_release(creds);
    *out = c;
    return 0;
}

void gs_rpc_close(struct gs_rpc_conn *c)
{
    if (!c) return;
    grpc_channel_destroy(c->ch);
    free(c);
    grpc_shutdown();
}

static void drain_destroy(grpc_completion_queue *cq)
{
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
}

int gs_rpc_unary(struct gs_rpc_conn *c, const char *method, const uint8_t *req, size_t len, uint8_t **resp,
                 size_t *resp_len, int timeout_ms, bool wait_for_ready, int *status, char *err, size_t errlen)
{
    *resp = NULL, *resp_len = 0;
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_slice mslice = grpc_slice_from_static_string(method);
    grpc_call *call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, mslice, NULL,
                                               in_ms(timeout_ms), NULL);
    grpc_byte_buffer *send = to_buffer(req, len), *recv = NULL;
    grpc_metadata_array md_init, md_trail;
    grpc_metadata_array_init(&md_init);
    grpc_metadata_array_init(&md_trail);
    grpc_status_code code = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].flags = wait_for_ready ? GRPC_INITIAL_METADATA_WAIT_FOR_READY : 0;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &md_init;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &md_trail;
    ops[5].data.recv_status_on_client.status = &code;
    ops[5].data.recv_status_on_client.status_details = &details;
    int rc = GS_EIO;
    if (grpc_call_start_batch(call, ops, 6, call, NULL) == GRPC_CALL_OK) {
        /* The only batch on this queue; the deadline bounds it. */
        grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (code == GRPC_STATUS_OK) rc = recv ? from_buffer(recv, resp, resp_len) : 0;
        else rc = code == GRPC_STATUS_DEADLINE_EXCEEDED ? GS_ETIMEDOUT : GS_EIO;
    }
    if (status) *status = (int)code;
    if (err && errlen) {
        size_t n = GRPC_SLICE_LENGTH(details) < errlen - 1 ? GRPC_SLICE_LENGTH(details) : errlen - 1;
        memcpy(err, GRPC_SLICE_START_PTR(details), n);
        err[n] = '\0';
    }
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&md_init);
    grpc_metadata_array_destroy(&md_trail);
    grpc_byte_buffer_destroy(send);
    if (recv) grpc_byte_buffer_destroy(recv);
    grpc_call_unref(call);
    drain_destroy(cq);
    return rc;
}

/*--- Client streams ---*/

struct gs_rpc_stream {
    grpc_call *call;
    grpc_completion_queue *cq;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array md_init, md_trail;
    grpc_status_code code;
    grpc_slice details;
    int pending;
    bool reading, ended;
    char t_start, t_status, t_read; /* their addresses are the tags */
};

int gs_rpc_stream_open(struct gs_rpc_conn *c, const char *method, const uint8_t *req, size_t len,
                       struct gs_rpc_stream **out)
{
    struct gs_rpc_stream *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->cq = grpc_completion_queue_create_for_next(NULL);
    s->call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq,
                                       grpc_slice_from_static_string(method), NULL,
                                       gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    s->send = to_buffer(req, len);
    s->details = grpc_empty_slice();
    grpc_metadata_array_init(&s->md_init);
    grpc_metadata_array_init(&s->md_trail);
    grpc_op ops[4];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = s->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->md_init;
    if (grpc_call_start_batch(s->call, ops, 4, &s->t_start, NULL) == GRPC_CALL_OK) s->pending++;
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &s->md_trail;
    ops[0].data.recv_status_on_client.status = &s->code;
    ops[0].data.recv_status_on_client.status_details = &s->details;
    if (grpc_call_start_batch(s->call, ops, 1, &s->t_status, NULL) == GRPC_CALL_OK) s->pending++;
    else s->ended = true;
    *out = s;
    return 0;
}

/* Handles one completion; returns 1 when a read finished (message in s->recv
 * or end of stream). */
static int stream_event(struct gs_rpc_stream *s, grpc_event ev)
{
    s->pending--;
    if (ev.tag == &s->t_status) s->ended = true;
    if (ev.tag != &s->t_read) return 0;
    s->reading = false;
    if (!ev.success || !s->recv) s->ended = true;
    return 1;
}

int gs_rpc_stream_next(struct gs_rpc_stream *s, int timeout_ms, uint8_t **buf, size_t *len)
{
    *buf = NULL, *len = 0;
    gpr_timespec deadline = in_ms(timeout_ms);
    for (;;) {
        if (s->ended && !s->reading) return GS_EIO;
        if (!s->reading) {
            grpc_op op;
            memset(&op, 0, sizeof op);
            op.op = GRPC_OP_RECV_MESSAGE;
            op.data.recv_message.recv_message = &s->recv;
            if (grpc_call_start_batch(s->call, &op, 1, &s->t_read, NULL) != GRPC_CALL_OK) {
                s->ended = true;
                return GS_EIO;
            }
            s->pending++;
            s->reading = true;
        }
        grpc_event ev = grpc_completion_queue_next(s->cq, deadline, NULL);
        if (ev.type == GRPC_QUEUE_TIMEOUT) return GS_ETIMEDOUT;
        if (ev.type != GRPC_OP_COMPLETE || !stream_event(s, ev)) continue;
        if (!s->recv) return GS_EIO;
        int rc = from_buffer(s->recv, buf, len);
        grpc_byte_buffer_destroy(s->recv);
        s->recv = NULL;
        return rc;
    }
}

void gs_rpc_stream_close(struct gs_rpc_stream *s)
{
    if (!s) return;
    grpc_call_cancel(s->call, NULL);
    while (s->pending > 0) {
        grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_OP_COMPLETE) stream_event(s, ev);
    }
    if (s->recv) grpc_byte_buffer_destroy(s->recv);
    grpc_byte_buffer_destroy(s->send);
    grpc_slice_unref(s->details);
    grpc_metadata_array_destroy(&s->md_init);
    grpc_metadata_array_destroy(&s->md_trail);
    grpc_call_unref(s->call);
    drain_destroy(s->cq);
    free(s);
}
