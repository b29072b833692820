/*
 * http.c - the exporter's HTTP endpoint on libmicrohttpd.
 *
 * MHD runs one internal polling thread (epoll where available); every
 * request is answered from memory: /metrics hands MHD a reference to the
 * exporter's latest page (released by MHD's free callback when the response
 * is sent), so a scrape copies nothing and never waits for the collector.
 * Connections are capped and time out, so a slow or hostile client cannot
 * pile up memory. MHD's own log lines go through core/log.h, not stderr.
 */
#include "discovery/exporter.h"

#include "core/log.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct gs_http {
    struct MHD_Daemon *mhd;
    struct gs_exporter *e;
    int port;
};

static void release_text(void *cls)
{
    gs_metrics_text_unref(cls);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *body)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result serve_metrics(struct gs_http *h, struct MHD_Connection *c)
{
    struct gs_metrics_text *t = gs_exporter_text(h->e);
    if (!t) return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "no collection yet\n");
    struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback_cls(t->len, t->data, release_text, t);
    if (!r) {
        gs_metrics_text_unref(t);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, PROM_CONTENT_TYPE);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state)
{
    struct gs_http *h = cls;
    (void)version, (void)upload;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
    if (*upload_size) return MHD_NO;
    (void)state;
    if (!strcmp(url, "/metrics")) return serve_metrics(h, c);
    if (!strcmp(url, "/healthz") || !strcmp(url, "/health"))
        return gs_exporter_fresh(h->e) ? reply(c, MHD_HTTP_OK, "ok\n")
                                       : reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "collector stalled\n");
    if (!strcmp(url, "/"))
        return reply(c, MHD_HTTP_OK, "gpusched exporter: see /metrics and /healthz\n");
    return reply(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[256];
    (void)cls;
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = 0;
    gs_log(GS_LOG_WARN, "http server", "detail", line, NULL);
}

/* "HOST:PORT", ":PORT" or "[V6]:PORT" into a socket address. */
static int parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len, char *err, size_t errlen)
{
    char host[256] = "", port[16] = "";
    const char *colon = strrchr(listen, ':');
    if (!colon || strlen(colon + 1) == 0 || strlen(colon + 1) >= sizeof port || (size_t)(colon - listen) >= sizeof host) {
        snprintf(err, errlen, "listen address \"%.64s\" is not HOST:PORT", listen);
        return GS_EINVAL;
    }
    snprintf(port, sizeof port, "%s", colon + 1);
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = 0;
    char *h = host;
    if (h[0] == '[') {
        h++;
        char *end = strchr(h, ']');
        if (!end || end[1]) {
            snprintf(err, errlen, "bad IPv6 address in \"%.64s\"", listen);
            return GS_EINVAL;
        }
        *end = 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res = NULL;
    int rc = getaddrinfo(*h ? h : "0.0.0.0", port, &hints, &res);
    if (rc || !res) {
        snprintf(err, errlen, "cannot resolve \"%.64s\": %s", listen, gai_strerror(rc));
        return GS_EINVAL;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int gs_http_start(const char *listen, struct gs_exporter *e, struct gs_http **out, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    int rc = parse_listen(listen, &ss, &sslen, err, errlen);
    if (rc) return rc;
    struct gs_http *h = calloc(1, sizeof *h);
    if (!h) return GS_ENOMEM;
    h->e = e;
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, 64u,
                              MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!h->mhd) {
        snprintf(err, errlen, "cannot listen on %.64s (address in use or not permitted)", listen);
        free(h);
        return GS_EIO;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : 0;
    *out = h;
    return 0;
}

int gs_http_port(const struct gs_http *h)
{
    return h->port;
}

void gs_http_stop(struct gs_http *h)
{
    if (!h) return;
    MHD_stop_daemon(h->mhd);
    free(h);
}
