/*
 * agent_http.c - the agent's HTTP endpoint (libmicrohttpd, a thread per
 * connection): container logs, GPU metrics with pod attribution, the
 * agent's own report, health.
 *
 *   GET /logs/<ns>/<pod>[?container=C][&tailLines=N][&limitBytes=N][&follow=1]
 *   GET /containerLogs/<ns>/<pod>/<container>[?tailLines=N][&follow=true]   (kubelet's path)
 *   GET /metrics   the exporter's latest page (DCGM-Exporter names)
 *   GET /pods      gs_agent_report() as JSON
 *   GET /healthz
 *
 * Logs take kubelet's query names (tailLines, limitBytes, follow; `tail` is
 * an alias of tailLines): tailLines absent means the whole log, 0 nothing.
 * A log is streamed from its file, so its size is not limited; follow keeps
 * the response open, sending what the container appends, until the
 * container stops running, the client goes away or the agent stops. Each
 * connection has its own thread, so a follow stream never holds up the
 * others; at most FOLLOW_MAX follow at once (429 beyond).
 *
 * It reads the pod table under a->mu and copies what it needs (a log path,
 * a state) before touching the disk, so the sync loop is never held up by a
 * reader. Logs are served from the file, finished pods included, until the
 * pod is deleted on the server.
 *
 * Every route but /metrics and /healthz wants "Authorization: Bearer T"
 * with the agent's token (gs_agent_opts.http_token: the API server's
 * <data-dir>/agent.token, which its log proxy sends); otherwise any local
 * user could read any pod's log. /metrics stays open for Prometheus and
 * `gpusched top`: it shows GPU figures and pod names, no pod output.
 */
#include "agent/agent_int.h"
#include "control/secret.h"
#include "core/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define FOLLOW_MAX 32   /* concurrent follow streams */
#define WAIT_SLICE_MS 100 /* how often a follow stream looks at its file */
#define WAIT_ROUND_MS 1000

struct gs__agent_http {
    struct MHD_Daemon *mhd;
    atomic_bool stopping;
    atomic_int follows;
};

static enum MHD_Result reply_buf(struct MHD_Connection *c, unsigned code, const char *type, char *buf, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(buf);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ok = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *fmt, ...)
{
    char *buf = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&buf, fmt, ap);
    va_end(ap);
    if (n < 0) return MHD_NO;
    return reply_buf(c, code, "text/plain; charset=utf-8", buf, (size_t)n);
}

/*--- Logs ---*/

struct logq {
    const char *container;
    long long tail;  /* -1: all */
    long long limit; /* -1: none */
    bool follow;
};

/* Where the last n lines of a file of size bytes start (n < 0: 0). A final
 * newline ends the last line rather than starting an empty one. */
static off_t tail_offset(int fd, off_t size, long long n)
{
    if (n < 0 || fd < 0) return 0;
    if (n == 0) return size;
    char buf[16384];
    long long seen = 0;
    for (off_t end = size; end > 0;) {
        size_t len = end > (off_t)sizeof buf ? sizeof buf : (size_t)end;
        off_t at = end - (off_t)len;
        if (pread(fd, buf, len, at) != (ssize_t)len) return 0;
        for (size_t i = len; i > 0; i--)
            if (buf[i - 1] == '\n' && at + (off_t)i != size && ++seen == n) return at + (off_t)i;
        end = at;
    }
    return 0;
}

/* What a log request needs from the pod table, copied under a->mu. */
struct ctr_view {
    bool pod_found, ctr_found, pending;
    enum gs__cstate state;
    int restarts;
    char ctr[256], path[4096], phase[32], reason[64];
};

static void view(struct gs_agent *a, const char *key, const char *ctr, struct ctr_view *v)
{
    memset(v, 0, sizeof *v);
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->npods; i++) {
        struct gs__pod *p = a->pods[i];
        if (strcmp(p->key, key) || (v->pod_found && p->gone)) continue;
        v->pod_found = true;
        v->ctr_found = false;
        v->pending = p->phase == GS_P_PENDING;
        snprintf(v->phase, sizeof v->phase, "%s", gs__phase_name(p->phase));
        snprintf(v->reason, sizeof v->reason, "%s", p->reason);
        for (size_t k = 0; k < p->nc; k++)
            if (!ctr || !*ctr || !strcmp(p->c[k].name, ctr)) {
                v->ctr_found = true;
                v->state = p->c[k].state;
                v->restarts = p->c[k].restarts;
                snprintf(v->ctr, sizeof v->ctr, "%s", p->c[k].name);
                snprintf(v->path, sizeof v->path, "%s/%s/log", p->dir, p->c[k].name);
                break;
            }
    }
    pthread_mutex_unlock(&a->mu);
}

/* Has the client closed its end? Checked while a follow stream waits, since
 * nothing else would notice before the next write. */
static bool client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

struct lstream {
    struct gs_agent *a;
    struct MHD_Connection *c;
    char key[512], ctr[256], path[4096];
    int fd;
    off_t off;
    long long left; /* limitBytes still to send; -1: no limit */
    bool follow, ended;
};

static bool still_running(struct lstream *s)
{
    struct ctr_view v;
    view(s->a, s->key, s->ctr, &v);
    return v.pod_found && v.ctr_found && (v.state == GS_C_RUNNING || (v.state == GS_C_WAITING && !v.restarts));
}

static ssize_t lstream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct lstream *s = cls;
    if (s->left == 0) return MHD_CONTENT_READER_END_OF_STREAM;
    if (s->left > 0 && (long long)max > s->left) max = (size_t)s->left;
    for (int waited = 0;; waited += WAIT_SLICE_MS) {
        if (s->fd < 0) s->fd = open(s->path, O_RDONLY | O_CLOEXEC); /* the container may not have written yet */
        ssize_t n = s->fd >= 0 ? pread(s->fd, out, max, s->off) : 0;
        if (n < 0) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (n > 0) {
            s->off += n;
            if (s->left > 0) s->left -= n;
            return n;
        }
        if (!s->follow || s->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        if (atomic_load(&s->a->http->stopping)) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (client_gone(s->c)) return MHD_CONTENT_READER_END_OF_STREAM; /* nobody to tell */
        if (!still_running(s)) {
            s->ended = true; /* one more read: what it wrote before exiting */
            continue;
        }
        if (waited >= WAIT_ROUND_MS) return 0; /* libmicrohttpd calls again */
        usleep(WAIT_SLICE_MS * 1000);
    }
}

static void lstream_free(void *cls)
{
    struct lstream *s = cls;
    if (s->fd >= 0) close(s->fd);
    if (s->follow) atomic_fetch_sub(&s->a->http->follows, 1);
    free(s);
}

/* kubelet's words for a container with nothing to show yet. */
static enum MHD_Result waiting(struct MHD_Connection *c, const char *ctr, const char *pod, const char *ns)
{
    if (ctr && *ctr)
        return reply(c, MHD_HTTP_BAD_REQUEST, "container \"%s\" in pod \"%s\" is waiting to start: ContainerCreating\n",
                     ctr, pod);
    return reply(c, MHD_HTTP_BAD_REQUEST, "pod \"%s/%s\" is waiting to start: ContainerCreating\n", ns, pod);
}

static enum MHD_Result serve_logs(struct gs_agent *a, struct MHD_Connection *c, const char *ns, const char *pod,
                                  const struct logq *q)
{
    struct ctr_view v;
    char key[512];
    snprintf(key, sizeof key, "%s/%s", ns, pod);
    view(a, key, q->container, &v);
    if (!v.pod_found) return reply(c, MHD_HTTP_NOT_FOUND, "pod %s is not on node %s\n", key, a->node);
    if (v.pending) return waiting(c, q->container, pod, ns);
    if (!v.ctr_found && q->container && *q->container)
        return reply(c, MHD_HTTP_NOT_FOUND, "pod %s has no container %s\n", key, q->container);
    if (!v.ctr_found)
        return reply(c, MHD_HTTP_BAD_REQUEST, "pod \"%s\" has no container to show: it is %s%s%s\n", pod, v.phase,
                     v.reason[0] ? ", " : "", v.reason);
    if (v.state == GS_C_WAITING && !v.restarts) return waiting(c, v.ctr, pod, ns);
    struct gs__agent_http *h = a->http;
    if (q->follow && atomic_fetch_add(&h->follows, 1) >= FOLLOW_MAX) {
        atomic_fetch_sub(&h->follows, 1);
        return reply(c, MHD_HTTP_TOO_MANY_REQUESTS, "too many log streams follow on node %s (%d): try again later\n",
                     a->node, FOLLOW_MAX);
    }
    struct lstream *s = calloc(1, sizeof *s);
    if (!s) {
        if (q->follow) atomic_fetch_sub(&h->follows, 1);
        return MHD_NO;
    }
    s->a = a;
    s->c = c;
    s->follow = q->follow;
    s->left = q->limit;
    snprintf(s->key, sizeof s->key, "%s", key);
    snprintf(s->ctr, sizeof s->ctr, "%s", v.ctr);
    snprintf(s->path, sizeof s->path, "%s", v.path);
    s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    s->off = s->fd >= 0 && fstat(s->fd, &st) == 0 ? tail_offset(s->fd, st.st_size, q->tail) : 0;
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, lstream_read, s, lstream_free);
    if (!r) {
        lstream_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    if (q->follow) MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u); /* quiet containers are fine */
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

/* A non-negative integer argument; false (and a 400 queued) when malformed. */
static bool int_arg(struct MHD_Connection *c, const char *name, long long min, long long *out, enum MHD_Result *ret)
{
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
    if (!v) return true;
    char *end = NULL;
    long long n = strtoll(v, &end, 10);
    if (*v && !*end && n >= min) {
        *out = n;
        return true;
    }
    *ret = reply(c, MHD_HTTP_BAD_REQUEST, "%s \"%s\" must be an integer >= %lld\n", name, v, min);
    return false;
}

static enum MHD_Result logs_request(struct gs_agent *a, struct MHD_Connection *c, const char *ns, const char *pod,
                                    const char *ctr)
{
    struct logq q = {.container = ctr, .tail = -1, .limit = -1};
    enum MHD_Result ret = MHD_NO;
    if (!q.container) q.container = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "container");
    if (!int_arg(c, "tail", 0, &q.tail, &ret) || !int_arg(c, "tailLines", 0, &q.tail, &ret) ||
        !int_arg(c, "limitBytes", 1, &q.limit, &ret))
        return ret;
    const char *f = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "follow");
    q.follow = f && (!strcmp(f, "1") || !strcmp(f, "true"));
    return serve_logs(a, c, ns, pod, &q);
}

static enum MHD_Result serve_metrics(struct gs_agent *a, struct MHD_Connection *c)
{
    struct gs_metrics_text *t = a->exp ? gs_exporter_text(a->exp) : NULL;
    if (!t) return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "no collection yet\n");
    char *buf = malloc(t->len + 1);
    if (buf) memcpy(buf, t->data, t->len);
    size_t len = t->len;
    gs_metrics_text_unref(t);
    if (!buf) return MHD_NO;
    return reply_buf(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", buf, len);
}

static bool authorized(struct gs_agent *a, struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) || !a->http_token[0]) return false;
    return gs_secret_equal(h + 7, a->http_token);
}

/* Splits "/a/b/c" after prefix into at most 3 segments. */
static int segments(const char *url, const char *prefix, char seg[3][256])
{
    size_t pl = strlen(prefix);
    if (strncmp(url, prefix, pl)) return -1;
    int n = 0;
    const char *p = url + pl;
    while (*p && n < 3) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (!l || l >= 256) return -1;
        memcpy(seg[n], p, l);
        seg[n++][l] = 0;
        p += l + (e ? 1 : 0);
        if (!e) break;
    }
    return *p ? -1 : n;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state)
{
    struct gs_agent *a = cls;
    (void)version, (void)upload, (void)state;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
    if (*upload_size) return MHD_NO;
    char seg[3][256];
    int n;
    if (!strcmp(url, "/metrics")) return serve_metrics(a, c);
    if (!strcmp(url, "/healthz")) return reply(c, MHD_HTTP_OK, "ok\n");
    if (!authorized(a, c)) return reply(c, MHD_HTTP_UNAUTHORIZED, "unauthorized: this route needs the agent's bearer token\n");
    if (!strcmp(url, "/pods")) {
        json_t *r = gs_agent_report(a);
        char *text = r ? json_dumps(r, JSON_COMPACT) : NULL;
        json_decref(r);
        return text ? reply_buf(c, MHD_HTTP_OK, "application/json", text, strlen(text)) : MHD_NO;
    }
    if ((n = segments(url, "/logs/", seg)) == 2) return logs_request(a, c, seg[0], seg[1], NULL);
    if ((n = segments(url, "/containerLogs/", seg)) == 3) return logs_request(a, c, seg[0], seg[1], seg[2]);
    return reply(c, MHD_HTTP_NOT_FOUND, "not found: see /logs/<ns>/<pod>, /metrics, /pods, /healthz\n");
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[256];
    (void)cls;
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = 0;
    /* A follower that went away ends its stream with an "application error". */
    bool routine = strstr(line, "application error generating response") != NULL;
    gs_log(routine ? GS_LOG_DEBUG : GS_LOG_WARN, "agent http", "detail", line, NULL);
}

/*--- The listening socket ---*/

/* The shims are forked without an exec (runtime.c), so close-on-exec alone
 * does not keep the listening socket out of them: a child of fork() closes
 * every agent listening socket at once (pthread_atfork), under a lock the
 * parent holds across the fork so the list is never half-written. */
#define LISTEN_MAX 1024
static pthread_mutex_t listen_mu = PTHREAD_MUTEX_INITIALIZER;
static int listen_fds[LISTEN_MAX];
static int listen_n;
static pthread_once_t listen_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void) { pthread_mutex_lock(&listen_mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&listen_mu); }
static void atfork_child(void)
{
    for (int i = 0; i < listen_n; i++) close(listen_fds[i]);
    listen_n = 0;
    pthread_mutex_unlock(&listen_mu);
}
static void atfork_register(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

static void listen_track(int fd, bool add)
{
    pthread_once(&listen_once, atfork_register);
    pthread_mutex_lock(&listen_mu);
    for (int i = 0; i < listen_n; i++)
        if (listen_fds[i] == fd) listen_fds[i--] = listen_fds[--listen_n];
    if (add && listen_n < LISTEN_MAX) listen_fds[listen_n++] = fd;
    pthread_mutex_unlock(&listen_mu);
}

/* The listening socket, opened here rather than by libmicrohttpd so that it
 * is close-on-exec (a pod's processes must never hold the agent's port: a
 * restarted agent could not bind it again while they run) and reuses the
 * address (connections of the previous agent may linger in TIME_WAIT). */
static int listen_fd(const struct sockaddr *sa, socklen_t len, const char *addr, char *err, size_t errlen)
{
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    int port = ntohs(in->sin_port), one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) || bind(fd, sa, len) ||
        listen(fd, 64)) {
        int e = errno;
        if (fd >= 0) close(fd);
        char ps[16];
        snprintf(ps, sizeof ps, "%d", port);
        snprintf(err, errlen, "cannot listen on %.64s (port %d): %s", addr, port, strerror(e));
        gs_log(GS_LOG_ERROR, "agent: cannot listen", "addr", addr, "port", ps, "error", strerror(e), NULL);
        return -1;
    }
    return fd;
}

int gs__http_start(struct gs_agent *a, const char *listen, char *err, size_t errlen)
{
    char host[256] = "";
    const char *colon = strrchr(listen, ':');
    if (!colon || (size_t)(colon - listen) >= sizeof host) {
        snprintf(err, errlen, "listen address \"%.64s\" is not HOST:PORT", listen);
        return GS_EINVAL;
    }
    memcpy(host, listen, (size_t)(colon - listen));
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *res = NULL;
    if (getaddrinfo(*host ? host : "0.0.0.0", colon + 1, &hints, &res) || !res) {
        snprintf(err, errlen, "cannot resolve \"%.64s\"", listen);
        return GS_EINVAL;
    }
    int fd = listen_fd(res->ai_addr, res->ai_addrlen, listen, err, errlen);
    freeaddrinfo(res);
    if (fd < 0) return GS_EIO;
    listen_track(fd, true);
    struct sockaddr_in bound = {0};
    socklen_t bl = sizeof bound;
    a->port = getsockname(fd, (struct sockaddr *)&bound, &bl) == 0 ? ntohs(bound.sin_port) : 0;
    struct gs__agent_http *h = calloc(1, sizeof *h);
    a->http = h; /* before the first request can arrive */
    if (h)
        h->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
                                  0, NULL, NULL, on_request, a, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                  MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, 64u,
                                  MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!h || !h->mhd) {
        listen_track(fd, false);
        close(fd); /* not adopted by a daemon that did not start */
        free(h);
        a->http = NULL;
        snprintf(err, errlen, "cannot serve HTTP on %.64s (port %d)", listen, a->port);
        return GS_EIO;
    }
    return 0;
}

void gs__http_stop(struct gs_agent *a)
{
    if (!a->http) return;
    atomic_store(&a->http->stopping, true);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(a->http->mhd, MHD_DAEMON_INFO_LISTEN_FD);
    if (info) listen_track(info->listen_fd, false); /* before the daemon closes it: the number may be reused */
    MHD_stop_daemon(a->http->mhd);
    free(a->http);
    a->http = NULL;
}
