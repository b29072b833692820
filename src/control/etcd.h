/*
 * etcd.h - a small etcd v3 client on the gRPC C core, for the etcd store
 * (store_etcd.c): blocking unary calls (KV, Lease, Maintenance) and Watch
 * streams, over one or more endpoints with failover, plain or TLS.
 *
 * Messages are etcd's own protobufs (proto/etcd/, generated with protoc-c);
 * this header only forward-declares protobuf-c's types so it compiles
 * without the generated headers. A call packs the request, tries the
 * endpoint that answered last, and moves on to the next endpoint when one is
 * unreachable (gRPC UNAVAILABLE), until every endpoint was tried or the
 * call's deadline passed. Errors carry etcd's own message (e.g. "etcdserver:
 * mvcc: required revision has been compacted") and the endpoint.
 *
 * Thread-safe: any thread may make unary calls at once (gRPC channels are
 * shared). A watch stream belongs to the thread that reads it, except
 * gs_etcd_watch_cancel, which any thread may call to wake that reader.
 */
#ifndef GS_CONTROL_ETCD_H
#define GS_CONTROL_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ProtobufCMessage;
struct ProtobufCMessageDescriptor;

struct gs_etcd_opts {
    const char *const *endpoints; /* "http://host:port" or "https://host:port" */
    size_t n_endpoints;
    const char *cafile;   /* PEM CA bundle for https endpoints; NULL: the system's roots */
    const char *certfile; /* client certificate (PEM) for mutual TLS; with keyfile */
    const char *keyfile;
    int call_timeout_ms;  /* one call, all endpoints together; 0: 5000 */
};

struct gs_etcd;

/* Checks one endpoint URL: 0, or GS_EINVAL with why (what is wrong with it). */
int gs_etcd_endpoint_check(const char *url, char *why, size_t why_len);
/* Splits "URL[,URL...]" into a malloc'd vector of malloc'd copies (free with
 * gs_etcd_endpoints_free); each is checked. GS_EINVAL with why, GS_ENOMEM. */
int gs_etcd_endpoints_parse(const char *list, char ***out, size_t *n, char *why, size_t why_len);
void gs_etcd_endpoints_free(char **v, size_t n);

/* Checks the options (endpoints, readable TLS files) and makes the channels;
 * no call is made yet. 0, GS_EINVAL / GS_EIO with why, GS_ENOMEM. */
int gs_etcd_open(const struct gs_etcd_opts *o, struct gs_etcd **out, char *why, size_t why_len);
void gs_etcd_close(struct gs_etcd *c);
/* "http://a:2379,http://b:2379" (borrowed), for messages. */
const char *gs_etcd_endpoints(const struct gs_etcd *c);

/* A unary call: method is the gRPC path ("/etcdserverpb.KV/Range"), req a
 * protobuf-c message; *resp is unpacked with resp_desc (free it with
 * protobuf_c_message_free_unpacked). idempotent calls (reads) are also
 * retried on the next endpoint after a timeout, writes only when the
 * endpoint could not be reached. timeout_ms 0: the client's default.
 * 0; GS_ERANGE (the revision was compacted), GS_ETIMEDOUT, GS_EINVAL (etcd
 * refused the request), GS_EIO (unreachable or failing), GS_ENOMEM; why
 * says etcd's message and the endpoint. *resent (may be NULL) is true on a
 * success that followed an attempt whose connection failed: that attempt may
 * have been applied too, which a non-idempotent caller must allow for. */
int gs_etcd_unary(struct gs_etcd *c, const char *method, const struct ProtobufCMessage *req,
                  const struct ProtobufCMessageDescriptor *resp_desc, struct ProtobufCMessage **resp, bool idempotent,
                  int timeout_ms, bool *resent, char *why, size_t why_len);

/*--- Watch streams ---*/

struct gs_etcd_watch;

/* Opens a Watch stream on the endpoint that answered last and sends req (a
 * packed etcdserverpb.WatchRequest with a create_request). The answer comes
 * through gs_etcd_watch_next. 0 or GS_ENOMEM / GS_EIO with why. */
int gs_etcd_watch_open(struct gs_etcd *c, const struct ProtobufCMessage *req, struct gs_etcd_watch **out, char *why,
                       size_t why_len);
/* The next WatchResponse (unpacked; free with protobuf_c_message_free_unpacked).
 * GS_ETIMEDOUT when none came within timeout_ms; GS_EIO with why when the
 * stream ended (the endpoint died, or it was cancelled): close it then and
 * open another (the client has moved on to the next endpoint). */
int gs_etcd_watch_next(struct gs_etcd_watch *w, int timeout_ms, struct ProtobufCMessage **resp, char *why,
                       size_t why_len);
/* Sends another WatchRequest on the stream (a progress_request); skipped
 * (0) while the previous send is still in flight. */
int gs_etcd_watch_send(struct gs_etcd_watch *w, const struct ProtobufCMessage *req);
/* Ends the stream; the reader's gs_etcd_watch_next returns GS_EIO. Any thread. */
void gs_etcd_watch_cancel(struct gs_etcd_watch *w);
void gs_etcd_watch_close(struct gs_etcd_watch *w);

#endif
