/*
 * client.h - an HTTP client for the API (libcurl), for the CLI and the agent.
 *
 * Where to connect and as whom, first match wins, field by field:
 *   1. the options (flags: --server, --token, --kubeconfig, --certificate-authority);
 *   2. the environment: GPUSCHED_SERVER, GPUSCHED_TOKEN;
 *   3. a kubeconfig: opts->kubeconfig, else $KUBECONFIG (first path) - its
 *      current context's server, certificate-authority(-data),
 *      insecure-skip-tls-verify, token or tokenFile, client-certificate(-data)
 *      and client-key(-data) (relative paths are relative to the kubeconfig's
 *      folder; a file named there that cannot be read is an error naming the
 *      field and the file). The file `gpusched server` writes is such a kubeconfig;
 *   4. in a pod (KUBERNETES_SERVICE_HOST set, no server so far): the
 *      in-cluster configuration, https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
 *      with the service account's token and ca.crt from
 *      /var/run/secrets/kubernetes.io/serviceaccount ($GPUSCHED_SERVICEACCOUNT_DIR
 *      overrides the folder); both files must be readable;
 *   5. else ./gpusched-data/kubeconfig when it exists.
 * A token read from a file (tokenFile, the service account) is read again
 * every minute, as kubelet rotates bound tokens.
 *
 * Several servers (replicas of `gpusched server` on one store): the server
 * setting may be a comma-separated list (--server a,b; GPUSCHED_SERVER), or
 * the kubeconfig cluster's extension named gpusched.io/servers may list
 * them (extension: {servers: [URL, ...]}; kubectl ignores it and uses
 * server). The client uses one at a time and moves to the next, staying
 * there, when one cannot answer: a connection refused or unresolvable, a
 * failed TLS handshake, a transfer cut off or timed out, or a 5xx (but
 * 501). What is sent again on the next server: anything that never reached
 * the first; GET, PUT, PATCH and DELETE in any case; a create, whose
 * AlreadyExists on the retry counts as success when the stored object holds
 * every field sent (the first try stored it); no other POST (bindings,
 * evictions). A watch that failed before its first event starts on the next
 * server from the same resourceVersion; one cut off later returns GS_EIO
 * as before and the caller's next request goes to the next server. Every
 * server must accept the same credentials and CA.
 *
 * Calls return 0 or a negative GS_E* mapped from the HTTP answer: 404
 * GS_ENOENT, 409 AlreadyExists GS_EEXIST, 409 Conflict GS_ECONFLICT, 401/403
 * GS_EPERM, 400/422 GS_EINVAL, 429 GS_EBUSY, anything else GS_EIO. A
 * success whose body is not JSON (or, for get and list, not an object / a
 * list with its items) is GS_EPARSE, never an empty answer. On an error
 * *out (when given) holds the server's Status object, or one made here
 * saying why the answer could not be read, so callers can print it. A client is one connection: use it from one thread at
 * a time (a watch opens its own).
 */
#ifndef GS_CONTROL_CLIENT_H
#define GS_CONTROL_CLIENT_H

#include "control/resources.h"
#include "core/error.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>

struct gs_client_opts {
    const char *server;      /* "https://127.0.0.1:6443" */
    const char *token;
    const char *kubeconfig;  /* path */
    const char *ca_file;     /* PEM file to verify the server with */
    bool insecure_skip_verify;
    long timeout_ms;         /* per request, not watches; 0 = 30 s */
};

struct gs_client;

/* Resolves the connection (see above); problems (unreadable kubeconfig, no
 * server anywhere) go to d. */
int gs_client_new(const struct gs_client_opts *o, struct gs_client **out, struct gs_diags *d);
void gs_client_free(struct gs_client *c);
/* The server in use now (borrowed; another one after a failover). */
const char *gs_client_server(const struct gs_client *c);
/* How many servers the client knows (1 unless given a list). */
size_t gs_client_nservers(const struct gs_client *c);
#define GS_CLIENT_SERVERS_EXTENSION "gpusched.io/servers"
/* When *cancel becomes true (another thread's stop flag, borrowed for the
 * client's life), every transfer of c ends within about a second with
 * GS_EIO: a long watch need not be short to be stoppable. NULL: never. */
void gs_client_set_cancel(struct gs_client *c, const atomic_bool *cancel);
/* The User-Agent header of later requests (copied); NULL: gpusched/<version>. */
int gs_client_set_user_agent(struct gs_client *c, const char *ua);
/* The Retry-After of the last answer in seconds (an HTTP date counts as 1,
 * at most 3600); -1 when it had none. */
int gs_client_retry_after(const struct gs_client *c);

/* One request: path with query ("/api/v1/pods?limit=1"), optional body and
 * content type, optional Accept. *out: the JSON answer (NULL when not JSON),
 * *code: the HTTP status. */
int gs_client_call(struct gs_client *c, const char *method, const char *path, const char *content_type,
                   const json_t *body, const char *accept, json_t **out, long *code);

int gs_client_get(struct gs_client *c, const struct gs_api_resource *r, const char *ns, const char *name,
                  json_t **out);
/* ns NULL: every namespace. Selectors may be NULL. table: ask for a Table. */
int gs_client_list(struct gs_client *c, const struct gs_api_resource *r, const char *ns, const char *label_selector,
                   const char *field_selector, bool table, json_t **out);
int gs_client_create(struct gs_client *c, const struct gs_api_resource *r, const char *ns, const json_t *obj,
                     json_t **out);
/* PUT; subresource NULL or "status". */
int gs_client_update(struct gs_client *c, const struct gs_api_resource *r, const char *ns, const char *name,
                     const char *subresource, const json_t *obj, json_t **out);
/* strategic: strategic merge patch, else JSON merge patch. */
int gs_client_patch(struct gs_client *c, const struct gs_api_resource *r, const char *ns, const char *name,
                    const char *subresource, bool strategic, const json_t *patch, json_t **out);
int gs_client_delete(struct gs_client *c, const struct gs_api_resource *r, const char *ns, const char *name,
                     json_t **out);
/* POST pods/{name}/binding to node, with annotations copied onto the pod (may be NULL). */
int gs_client_bind(struct gs_client *c, const char *ns, const char *name, const char *node,
                   const json_t *annotations, json_t **out);

/* Called per watch event; type "ADDED", "MODIFIED", "DELETED", "ERROR" or
 * "BOOKMARK"; obj borrowed. A BOOKMARK's obj is not an object of the
 * resource: it holds only kind, apiVersion and metadata.resourceVersion, the
 * version to resume from; take nothing else from it. Nonzero ends the watch
 * (and is returned by gs_client_watch). */
typedef int (*gs_watch_fn)(const char *type, json_t *obj, void *arg);
/* Streams events from resource_version ("" or "0": current objects first)
 * until fn says stop or the server ends the stream: after timeout_s (sent as
 * timeoutSeconds; 0: the server's default, 5 to 10 minutes) with a final
 * BOOKMARK (allowWatchBookmarks is always sent). 0 when it ended that way (the
 * caller re-watches from the last resourceVersion it saw); GS_EPARSE when an
 * event could not be read, GS_EIO when the stream was cut inside an event or
 * the server went away - the caller must then relist, never guess. */
int gs_client_watch(struct gs_client *c, const struct gs_api_resource *r, const char *ns,
                    const char *label_selector, const char *field_selector, const char *resource_version,
                    int timeout_s, gs_watch_fn fn, void *arg);

/* Streamed GET (pod logs): fn gets the body of a 200 answer as it arrives;
 * nonzero from fn ends the transfer and is returned. No overall timeout.
 * Errors as above, with the server's Status in *status (when given). */
typedef int (*gs_stream_fn)(const char *data, size_t n, void *arg);
int gs_client_stream(struct gs_client *c, const char *path, gs_stream_fn fn, void *arg, json_t **status);
/* gs_client_stream asking for JSON, ended after timeout_s (0: never) with
 * GS_ETIMEDOUT, and the HTTP status in *code (0: no answer): a watch. */
int gs_client_stream_timed(struct gs_client *c, const char *path, long timeout_s, gs_stream_fn fn, void *arg,
                           json_t **status, long *code);

/* The Warning headers of the last answer (kube's `299 - "text"`, unquoted):
 * returns how many there are and sets *text to the i-th (borrowed, valid
 * until the next call; NULL past the end). */
size_t gs_client_warnings(const struct gs_client *c, size_t i, const char **text);

/* The message of a Status object, or "" */
const char *gs_client_status_message(const json_t *status);

#endif
