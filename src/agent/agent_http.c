/*
 * agent_http.c - the agent's HTTP endpoint (libmicrohttpd, one internal
 * thread): container logs, GPU metrics with pod attribution, the agent's
 * own report, health.
 *
 *   GET /logs/<ns>/<pod>[?container=C][&tail=N]
 *   GET /containerLogs/<ns>/<pod>/<container>[?tailLines=N]   (kubelet's path)
 *   GET /metrics   the exporter's latest page (DCGM-Exporter names)
 *   GET /pods      gs_agent_report() as JSON
 *   GET /healthz
 *
 * It reads the pod table under a->mu and copies what it needs (a log path)
 * before touching the disk, so the sync loop is never held up by a reader.
 * Logs are served from the file, finished pods included, until the pod is
 * deleted on the server. Bound to loopback by default: it has no auth.
 */
#include "agent/agent_int.h"
#include "core/log.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LOG_MAX (4u << 20) /* the most of a log one answer carries (its end) */

struct gs__agent_http {
    struct MHD_Daemon *mhd;
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
{
    char *buf = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&buf, fmt, ap);
    va_end(ap);
    if (n < 0) return MHD_NO;
    return reply_buf(c, code, "text/plain; charset=utf-8", buf, (size_t)n);
}

/* The last `tail` lines (0: all) of at most LOG_MAX bytes of path. */
static char *read_log(const char *path, long tail, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat st;
    size_t size = fstat(fileno(f), &st) == 0 ? (size_t)st.st_size : 0;
    size_t want = size > LOG_MAX ? LOG_MAX : size;
    fseek(f, (long)(size - want), SEEK_SET);
    char *buf = malloc(want + 1);
    size_t n = buf ? fread(buf, 1, want, f) : 0;
    fclose(f);
    if (!buf) return NULL;
    buf[n] = 0;
    size_t start = 0;
    if (tail > 0) {
        long seen = 0;
        for (size_t i = n; i > 0; i--) {
            if (buf[i - 1] == '\n' && i != n && ++seen == tail) {
                start = i;
                break;
            }
        }
    }
    memmove(buf, buf + start, n - start + 1);
    *len = n - start;
    return buf;
}

static enum MHD_Result serve_logs(struct gs_agent *a, struct MHD_Connection *c, const char *ns, const char *pod,
                                  const char *ctr, long tail)
{
    char path[4096] = "", key[512];
    snprintf(key, sizeof key, "%s/%s", ns, pod);
    bool found = false;
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->npods; i++) {
        struct gs__pod *p = a->pods[i];
        if (strcmp(p->key, key) || (found && p->gone)) continue;
        found = true;
        for (size_t k = 0; k < p->nc; k++)
            if (!ctr || !*ctr || !strcmp(p->c[k].name, ctr)) {
                snprintf(path, sizeof path, "%s/%s/log", p->dir, p->c[k].name);
                break;
            }
    }
    pthread_mutex_unlock(&a->mu);
    if (!found) return reply(c, MHD_HTTP_NOT_FOUND, "pod %s is not on node %s\n", key, a->node);
    if (!path[0]) return reply(c, MHD_HTTP_NOT_FOUND, "pod %s has no container %s\n", key, ctr ? ctr : "");
    size_t len = 0;
    char *buf = read_log(path, tail, &len);
    if (!buf) return reply_buf(c, MHD_HTTP_OK, "text/plain; charset=utf-8", strdup(""), 0);
    return reply_buf(c, MHD_HTTP_OK, "text/plain; charset=utf-8", buf, len);
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
    if (!strcmp(url, "/pods")) {
        json_t *r = gs_agent_report(a);
        char *text = r ? json_dumps(r, JSON_COMPACT) : NULL;
        json_decref(r);
        return text ? reply_buf(c, MHD_HTTP_OK, "application/json", text, strlen(text)) : MHD_NO;
    }
    if ((n = segments(url, "/logs/", seg)) == 2) {
        const char *tail = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "tail");
        return serve_logs(a, c, seg[0], seg[1], MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "container"),
                          tail ? atol(tail) : 0);
    }
    if ((n = segments(url, "/containerLogs/", seg)) == 3) {
        const char *tail = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "tailLines");
        return serve_logs(a, c, seg[0], seg[1], seg[2], tail ? atol(tail) : 0);
    }
    return reply(c, MHD_HTTP_NOT_FOUND, "not found: see /logs/<ns>/<pod>, /metrics, /pods, /healthz\n");
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[256];
    (void)cls;
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = 0;
    gs_log(GS_LOG_WARN, "agent http", "detail", line, NULL);
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
    struct gs__agent_http *h = calloc(1, sizeof *h);
    if (h)
        h->mhd = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, a,
                                  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_SOCK_ADDR, res->ai_addr,
                                  MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    freeaddrinfo(res);
    if (!h || !h->mhd) {
        free(h);
        snprintf(err, errlen, "cannot listen on %.64s (address in use or not permitted)", listen);
        return GS_EIO;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
    a->port = info ? info->port : 0;
    a->http = h;
    return 0;
}

void gs__http_stop(struct gs_agent *a)
{
    if (!a->http) return;
    MHD_stop_daemon(a->http->mhd);
    free(a->http);
    a->http = NULL;
}
