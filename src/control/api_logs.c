/*
 * api_logs.c - GET /api/v1/namespaces/{ns}/pods/{name}/log: a pod's log,
 * proxied from the agent of the pod's node, as kube-apiserver proxies to the
 * kubelet. `kubectl logs` and `gpusched logs` both come this way.
 *
 * The caller was authorised by the router like a GET of the pod (a tenant
 * only in its namespaces; a node only for pods bound to it, checked here
 * with the object in hand). The handler validates the query, picks the
 * container, finds the node's agent endpoint (gs_agent_endpoint) and opens
 * the agent's /logs with libcurl's multi interface, waiting for the agent's
 * answer in short slices so shutdown is never held up. An agent error
 * becomes a Status; a 200 becomes a text/plain stream that libmicrohttpd
 * pulls through proxy_read, which pumps curl when it has nothing buffered.
 *
 * The server runs a thread per connection (apiserver.c), so a slow agent or
 * a long follow holds only its own connection; follow streams are capped at
 * FOLLOW_MAX per process (429 beyond) so they cannot exhaust threads and
 * agent connections. The hop to the agent is plain HTTP on the address the
 * Node publishes: the agent belongs on a trusted network.
 */
#include "agent/fetch.h"
#include "control/apiserver_int.h"
#include "control/curlfd.h"
#include "core/endpoint.h"

#include <curl/curl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FOLLOW_MAX 128
#define CONNECT_MS 5000
#define ANSWER_MS 15000  /* the agent's status line and headers */
#define FETCH_MS 120000  /* a whole non-follow log */
#define SLICE_MS 250     /* how long one wait on the agent may block */
#define ERR_BODY_MAX 4096

static atomic_int follows;

/*--- Query ---*/

/* Go's strconv.ParseBool, which kube-apiserver uses for query flags. */
static int parse_bool(const char *v, bool *out)
{
    static const char *yes[] = {"1", "t", "T", "true", "TRUE", "True"};
    static const char *no[] = {"0", "f", "F", "false", "FALSE", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (!strcmp(v, yes[i])) return *out = true, 0;
        if (!strcmp(v, no[i])) return *out = false, 0;
    }
    return GS_EINVAL;
}

static int parse_int(const char *v, long long min, long long *out)
{
    char *end = NULL;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || n < min) return GS_EINVAL;
    *out = n;
    return 0;
}

int gs__log_query_parse(gs__arg_fn get, void *ctx, struct gs__log_query *q, char *why, size_t len)
{
    memset(q, 0, sizeof *q);
    q->tail_lines = q->limit_bytes = -1;
    const char *v;
    q->container = get(ctx, "container");
    if (q->container && !*q->container) q->container = NULL;
    const char *flags[] = {"follow", "previous", "timestamps"};
    bool *dst[] = {&q->follow, &q->previous, &q->timestamps};
    for (size_t i = 0; i < 3; i++)
        if ((v = get(ctx, flags[i])) && *v && parse_bool(v, dst[i])) {
            snprintf(why, len, "%s: invalid value \"%s\": must be true or false", flags[i], v);
            return GS_EINVAL;
        }
    if ((v = get(ctx, "tailLines")) && parse_int(v, 0, &q->tail_lines)) {
        snprintf(why, len, "tailLines: invalid value \"%s\": must be an integer greater than or equal to 0", v);
        return GS_EINVAL;
    }
    if ((v = get(ctx, "limitBytes")) && parse_int(v, 1, &q->limit_bytes)) {
        snprintf(why, len, "limitBytes: invalid value \"%s\": must be an integer greater than 0", v);
        return GS_EINVAL;
    }
    if (q->previous) {
        snprintf(why, len, "previous=true is not supported: the node agent keeps one log per container, restarts "
                           "appended, so there is no separate log of a previous instance");
        return GS_EINVAL;
    }
    const char *since[] = {"sinceSeconds", "sinceTime"};
    for (size_t i = 0; i < 2; i++)
        if ((v = get(ctx, since[i])) && *v) {
            snprintf(why, len, "%s is not supported: the node agent keeps no per-line times; use tailLines", since[i]);
            return GS_EINVAL;
        }
    return 0;
}

int gs__log_container(const json_t *pod, const char *want, const char **name, char *why, size_t len)
{
    const char *pname = json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
    const json_t *cs = json_object_get(json_object_get(pod, "spec"), "containers");
    char names[512] = "";
    size_t i, off = 0;
    json_t *c;
    *name = NULL;
    json_array_foreach(cs, i, c) {
        const char *n = json_string_value(json_object_get(c, "name"));
        if (!n) continue;
        if (want && !strcmp(want, n)) return *name = n, 0;
        if (off < sizeof names) off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", off ? " " : "", n);
        if (!*name) *name = n;
    }
    if (want) {
        snprintf(why, len, "container %s is not valid for pod %s", want, pname ? pname : "");
        return *name = NULL, GS_EINVAL;
    }
    if (json_array_size(cs) > 1) {
        snprintf(why, len, "a container name must be specified for pod %s, choose one of: [%s]", pname ? pname : "",
                 names);
        return *name = NULL, GS_EINVAL;
    }
    if (!*name) {
        snprintf(why, len, "pod %s has no containers", pname ? pname : "");
        return GS_EINVAL;
    }
    return 0;
}

int gs__log_agent_path(const char *ns, const char *pod, const char *container, const struct gs__log_query *q,
                       char *buf, size_t len)
{
    char *e_ns = curl_easy_escape(NULL, ns, 0), *e_pod = curl_easy_escape(NULL, pod, 0),
         *e_c = curl_easy_escape(NULL, container, 0);
    int n = -1;
    if (e_ns && e_pod && e_c) {
        n = snprintf(buf, len, "/logs/%s/%s?container=%s", e_ns, e_pod, e_c);
        if (n >= 0 && q->tail_lines >= 0 && (size_t)n < len)
            n += snprintf(buf + n, len - (size_t)n, "&tailLines=%lld", q->tail_lines);
        if (n >= 0 && q->limit_bytes > 0 && (size_t)n < len)
            n += snprintf(buf + n, len - (size_t)n, "&limitBytes=%lld", q->limit_bytes);
        if (n >= 0 && q->follow && (size_t)n < len) n += snprintf(buf + n, len - (size_t)n, "&follow=1");
    }
    curl_free(e_ns);
    curl_free(e_pod);
    curl_free(e_c);
    return n < 0 || (size_t)n >= len ? GS_EINVAL : 0;
}

/*--- Proxy ---*/

struct proxy {
    struct gs_apiserver *s;
    struct MHD_Connection *c;
    CURLM *m;
    CURL *h;
    char *buf; /* received from the agent, not yet sent */
    size_t len, off, cap;
    long long left; /* limitBytes still to send; -1: none */
    bool headers, done, follow;
    struct curl_slist *hd; /* the server's own token for the agent, never the caller's */
    CURLcode result;
    char err[CURL_ERROR_SIZE];
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct proxy *p = arg;
    size_t n = size * nmemb;
    if (p->off == p->len) p->off = p->len = 0;
    if (p->len + n > p->cap) {
        size_t cap = p->cap ? p->cap : 16384;
        while (cap < p->len + n) cap *= 2;
        char *nb = realloc(p->buf, cap);
        if (!nb) return 0;
        p->buf = nb;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, data, n);
    p->len += n;
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    struct proxy *p = arg;
    size_t n = size * nmemb;
    long code = 0;
    curl_easy_getinfo(p->h, CURLINFO_RESPONSE_CODE, &code);
    if ((n == 2 && data[0] == '\r') || (n == 1 && data[0] == '\n')) p->headers = code >= 200;
    return n;
}

/* Drives the transfer, waiting at most wait_ms for the agent. */
static void pump(struct proxy *p, int wait_ms)
{
    int running = 0;
    curl_multi_perform(p->m, &running);
    if (running && wait_ms > 0) {
        curl_multi_poll(p->m, NULL, 0, wait_ms, NULL);
        curl_multi_perform(p->m, &running);
    }
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(p->m, &left)))
        if (msg->msg == CURLMSG_DONE) {
            p->done = true;
            p->result = msg->data.result;
        }
    if (!running) p->done = true;
}

static void proxy_free(void *cls)
{
    struct proxy *p = cls;
    if (!p) return;
    if (p->follow) atomic_fetch_sub(&follows, 1);
    if (p->m && p->h) curl_multi_remove_handle(p->m, p->h);
    if (p->h) curl_easy_cleanup(p->h);
    if (p->m) curl_multi_cleanup(p->m);
    curl_slist_free_all(p->hd);
    free(p->buf);
    free(p);
}

static bool client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd pf = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static ssize_t proxy_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct proxy *p = cls;
    if (p->left == 0) return MHD_CONTENT_READER_END_OF_STREAM;
    for (int waited = 0; p->off == p->len; waited += SLICE_MS) {
        if (p->done)
            return p->result == CURLE_OK ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
        if (atomic_load(&p->s->stopping)) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (client_gone(p->c)) return MHD_CONTENT_READER_END_OF_STREAM; /* nobody to tell; and quietly */
        if (waited >= 1000) return 0; /* libmicrohttpd calls again */
        pump(p, SLICE_MS);
    }
    size_t n = p->len - p->off < max ? p->len - p->off : max;
    if (p->left > 0 && (long long)n > p->left) n = (size_t)p->left;
    memcpy(out, p->buf + p->off, n);
    p->off += n;
    if (p->left > 0) p->left -= (long long)n;
    return (ssize_t)n;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct proxy *proxy_open(struct gs__req *r, const char *url, const struct gs__log_query *q)
{
    struct proxy *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->s = r->s;
    p->c = r->c;
    p->left = q->limit_bytes;
    if (!(p->m = curl_multi_init()) || !(p->h = curl_easy_init())) {
        proxy_free(p);
        return NULL;
    }
    curl_easy_setopt(p->h, CURLOPT_URL, url);
    curl_easy_setopt(p->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(p->h, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_MS);
    if (!q->follow) curl_easy_setopt(p->h, CURLOPT_TIMEOUT_MS, (long)FETCH_MS);
    curl_easy_setopt(p->h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(p->h, CURLOPT_WRITEDATA, p);
    curl_easy_setopt(p->h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(p->h, CURLOPT_HEADERDATA, p);
    curl_easy_setopt(p->h, CURLOPT_ERRORBUFFER, p->err);
    curl_easy_setopt(p->h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(p->h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(p->h, CURLOPT_SOCKOPTFUNCTION, gs_curl_sockopt_cloexec);
    if (r->s->agent_token[0]) {
        char line[300];
        snprintf(line, sizeof line, "Authorization: Bearer %s", r->s->agent_token);
        p->hd = curl_slist_append(NULL, line);
        curl_easy_setopt(p->h, CURLOPT_HTTPHEADER, p->hd);
    }
    curl_multi_add_handle(p->m, p->h);
    int64_t deadline = mono_ms() + ANSWER_MS;
    while (!p->headers && !p->done && !atomic_load(&r->s->stopping) && mono_ms() < deadline) pump(p, SLICE_MS);
    return p;
}

/* The agent's error text, trimmed, once the transfer ends. */
static const char *agent_text(struct proxy *p)
{
    int64_t deadline = mono_ms() + 2000;
    while (!p->done && p->len < ERR_BODY_MAX && mono_ms() < deadline) pump(p, SLICE_MS);
    if (on_body("", 1, 1, p) != 1) return "";
    p->buf[--p->len] = 0;
    while (p->len && (p->buf[p->len - 1] == '\n' || p->buf[p->len - 1] == '\r')) p->buf[--p->len] = 0;
    if (p->len > ERR_BODY_MAX) p->buf[ERR_BODY_MAX] = 0;
    return p->buf;
}

static enum MHD_Result stream(struct gs__req *r, struct proxy *p)
{
    return gs__reply_stream(r, "text/plain", 32 * 1024, proxy_read, p, proxy_free);
}

/* Maps what the agent said (or that it said nothing) to the caller's answer. */
static enum MHD_Result relay(struct gs__req *r, struct proxy *p, const json_t *pod, const char *ctr, const char *node,
                             const char *ep)
{
    long code = 0;
    curl_easy_getinfo(p->h, CURLINFO_RESPONSE_CODE, &code);
    if (!p->headers || code == 0) {
        const char *why = p->err[0] ? p->err : p->done ? curl_easy_strerror(p->result) : "no answer in time";
        if (atomic_load(&r->s->stopping)) why = "the server is stopping";
        enum MHD_Result ret = gs__reply_status(r, 502, "BadGateway", r->name,
                                               "cannot reach the agent of node \"%s\" at %s: %s", node, ep, why);
        proxy_free(p);
        return ret;
    }
    if (code == 200) return stream(r, p);
    const char *text = agent_text(p);
    const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    enum MHD_Result ret;
    if (code == 400) ret = gs__reply_status(r, 400, "BadRequest", r->name, "%s", text);
    else if (code == 404 && phase && !strcmp(phase, "Pending")) /* bound, but the agent has not taken it yet */
        ret = gs__reply_status(r, 400, "BadRequest", r->name,
                               "container \"%s\" in pod \"%s\" is waiting to start: ContainerCreating", ctr, r->name);
    else if (code == 404) ret = gs__reply_status(r, 404, NULL, r->name, "%s", text);
    else if (code == 429) ret = gs__reply_status(r, 429, NULL, r->name, "%s", text);
    else
        ret = gs__reply_status(r, 502, "BadGateway", r->name, "the agent of node \"%s\" at %s answered %ld: %s", node,
                               ep, code, text);
    proxy_free(p);
    return ret;
}

static const char *req_arg(void *ctx, const char *key) { return gs__arg(ctx, key); }

static json_t *load(struct gs__req *r, const struct gs_api_resource *res, const char *ns, const char *name, int *err)
{
    char key[1024];
    gs_api_key(res, ns, name, key, sizeof key);
    json_t *obj = NULL;
    *err = gs_store_get(r->s->store, key, &obj, NULL);
    return obj;
}

static enum MHD_Result proxy_to(struct gs__req *r, const json_t *pod, const char *ctr, const struct gs__log_query *q)
{
    const char *node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    int err;
    json_t *nobj = load(r, gs_api_resource_lookup("nodes"), NULL, node, &err);
    char ep[512] = "", path[2048], url[2600];
    if (!err) gs_agent_endpoint(nobj, ep, sizeof ep);
    json_decref(nobj);
    if (!ep[0])
        return gs__reply_status(r, 503, "ServiceUnavailable", r->name,
                                "node \"%s\" of pod \"%s\" has no agent endpoint (%s): its agent is not registered",
                                node, r->name, err ? "no such Node" : "no gpusched.io/agent-endpoint annotation");
    char why[400];
    if (gs_endpoint_check(ep, why, sizeof why)) /* never a URL someone else chose (core/endpoint.h) */
        return gs__reply_status(r, 502, "BadGateway", r->name, "node \"%s\" of pod \"%s\": %s", node, r->name, why);
    if (gs__log_agent_path(r->ns, r->name, ctr, q, path, sizeof path) ||
        snprintf(url, sizeof url, "%s%s", ep, path) >= (int)sizeof url)
        return gs__reply_status(r, 400, "BadRequest", r->name, "log request too long");
    if (q->follow && atomic_fetch_add(&follows, 1) >= FOLLOW_MAX) {
        atomic_fetch_sub(&follows, 1);
        return gs__reply_status(r, 429, "TooManyRequests", r->name,
                                "too many log streams are following (%d): close one or try again later", FOLLOW_MAX);
    }
    struct proxy *p = proxy_open(r, url, q);
    if (!p) {
        if (q->follow) atomic_fetch_sub(&follows, 1);
        return gs__reply_err(r, GS_ENOMEM, r->name);
    }
    p->follow = q->follow;
    return relay(r, p, pod, ctr, node, ep);
}

enum MHD_Result gs__handle_log(struct gs__req *r)
{
    if (strcmp(r->res->plural, "pods") || r->res->group[0])
        return gs__reply_status(r, 404, NULL, r->name, "%s have no log subresource", r->res->plural);
    if (strcmp(r->method, "GET"))
        return gs__reply_status(r, 405, NULL, r->name, "method %s not allowed on pods/log", r->method);
    char why[768];
    struct gs__log_query q;
    if (gs__log_query_parse(req_arg, r, &q, why, sizeof why))
        return gs__reply_status(r, 400, "BadRequest", r->name, "%s", why);
    int err;
    json_t *pod = load(r, r->res, r->ns, r->name, &err);
    const char *node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    if (!err && r->if_bound && !(r->who && r->who->node && node && !strcmp(node, r->who->node))) err = GS_EPERM;
    if (err) {
        json_decref(pod);
        return gs__reply_err(r, err, r->name);
    }
    const char *ctr = NULL;
    enum MHD_Result ret;
    if (gs__log_container(pod, q.container, &ctr, why, sizeof why))
        ret = gs__reply_status(r, 400, "BadRequest", r->name, "%s", why);
    else if (!node || !*node)
        ret = gs__reply_status(r, 400, "BadRequest", r->name,
                               "container \"%s\" in pod \"%s\" is waiting to start: "
                               "the pod is not scheduled to a node yet",
                               ctr, r->name);
    else ret = proxy_to(r, pod, ctr, &q);
    json_decref(pod);
    return ret;
}
