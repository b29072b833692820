/*
 * rpc.h - the small part of gRPC that the device plugin API needs, on the
 * gRPC C core: a unix-socket server with unary and server-streaming methods,
 * and a client with unary calls and one server stream. Messages travel as
 * packed protobuf bytes; packing is the caller's business (protobuf-c).
 *
 * Server: one thread per server runs the completion queue. Every call is a
 * small state machine (arrived -> message received -> answered, plus a
 * close-on-server watch that tells when the peer went away). The C core has
 * no timers, so the thread wakes every poll_ms, checks each open stream's
 * source version and sends the current message when it changed: a health
 * change reaches kubelet within poll_ms. Handlers run on that thread; a slow
 * handler delays the others, which is fine for the few calls a device plugin
 * sees (kubelet's Register handler dials the plugin back; the plugin's own
 * server is another thread, so that never deadlocks).
 *
 * Shutdown is orderly: shutdown_and_notify, cancel every call, wait for the
 * notification and for every call to finish, destroy the server, drain and
 * destroy the queue, unlink the socket (gRPC unlinks a stale socket when it
 * binds, not when it stops).
 */
#ifndef GS_NODE_DEVICEPLUGIN_RPC_H
#define GS_NODE_DEVICEPLUGIN_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* gRPC status codes we return (same numbers as grpc_status_code). */
enum {
    GS_RPC_OK = 0,
    GS_RPC_INVALID_ARGUMENT = 3,
    GS_RPC_NOT_FOUND = 5,
    GS_RPC_FAILED_PRECONDITION = 9,
    GS_RPC_UNIMPLEMENTED = 12,
    GS_RPC_INTERNAL = 13,
    GS_RPC_UNAVAILABLE = 14,
};

/*--- Server ---*/

/* A unary method: req/len is the request; on GS_RPC_OK *resp is a malloc'd
 * packed reply (may be NULL with *resp_len 0 for an empty message). Any other
 * return is a gRPC status with msg as its details. Server thread. */
typedef int (*gs_rpc_unary_fn)(void *ud, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len,
                               char *msg, size_t msglen);

/* A server stream's source. version() is cheap and called on every wake-up;
 * when it differs from what a stream last sent, message() packs the current
 * state (malloc'd) and it is sent. Both run on the server thread. */
struct gs_rpc_stream_src {
    uint64_t (*version)(void *ud);
    int (*message)(void *ud, uint8_t **buf, size_t *len);
};

struct gs_rpc_method {
    const char *path;                     /* "/v1beta1.DevicePlugin/Allocate" */
    gs_rpc_unary_fn unary;                /* exactly one of unary / stream */
    const struct gs_rpc_stream_src *stream;
};

struct gs_rpc_server_cfg {
    const char *socket_path;              /* unix socket file */
    const struct gs_rpc_method *methods;
    size_t n_methods;
    void *ud;
    int poll_ms;                          /* 0 = 20 */
};

struct gs_rpc_server;

/* Binds and starts serving. 0, or GS_EIO (bind failed) / GS_ENOMEM, with err. */
int gs_rpc_server_start(const struct gs_rpc_server_cfg *cfg, struct gs_rpc_server **out, char *err,
                        size_t errlen);
/* Stops (see above), joins the thread, removes the socket, frees. NULL is a no-op. */
void gs_rpc_server_stop(struct gs_rpc_server *s);
/* Open server streams right now. */
int gs_rpc_server_streams(struct gs_rpc_server *s);

/*--- Client ---*/

struct gs_rpc_conn;

/* A channel to a unix socket (it need not exist yet). 0 or GS_ENOMEM. */
int gs_rpc_dial(const char *socket_path, struct gs_rpc_conn **out);
void gs_rpc_close(struct gs_rpc_conn *c);

/* One unary call. wait_for_ready: wait (up to the timeout) for the socket to
 * accept rather than fail at once. 0 with *resp malloc'd (may be NULL for an
 * empty reply); GS_ETIMEDOUT; GS_EIO for any other failure. *status (may be
 * NULL) gets the gRPC status code; err its details. */
int gs_rpc_unary(struct gs_rpc_conn *c, const char *method, const uint8_t *req, size_t len, uint8_t **resp,
                 size_t *resp_len, int timeout_ms, bool wait_for_ready, int *status, char *err, size_t errlen);

struct gs_rpc_stream;

/* Starts a server-streaming call with one request message. 0 or GS_ENOMEM. */
int gs_rpc_stream_open(struct gs_rpc_conn *c, const char *method, const uint8_t *req, size_t len,
                       struct gs_rpc_stream **out);
/* The next message: 0 with *buf malloc'd (NULL and *len 0 for an empty
 * one); GS_ETIMEDOUT when none arrived within timeout_ms; GS_EIO once the
 * stream has ended (peer gone, error, or cancelled). */
int gs_rpc_stream_next(struct gs_rpc_stream *s, int timeout_ms, uint8_t **buf, size_t *len);
/* Cancels if still open, waits for the call to wind down, frees. */
void gs_rpc_stream_close(struct gs_rpc_stream *s);

#endif
