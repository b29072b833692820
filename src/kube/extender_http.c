/*
 * extender_http.c - the extender's HTTP(S) endpoint on libmicrohttpd; see
 * extender.h.
 *
 * kube-scheduler POSTs to <urlPrefix>/<verb> where both parts come from its
 * configuration, so the route is the last path segment alone: any prefix
 * works and the verb names are ours ("filter", "prioritize", "preempt",
 * "bind"). A body is gathered up to max_body (413 beyond) and answered in
 * one piece by gs_extender_handle. One MHD polling thread serves every
 * connection: requests are serialised by the extender anyway, and a
 * kube-scheduler sends one callout at a time per pod. TLS, when configured,
 * uses the files' PEM text (read once at start) through MHD's GnuTLS.
 */
#include "kube/extender.h"

#include "core/log.h"
#include "govern/metrics.h"

#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define JSON_TYPE "application/json"
#define PROM_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct gs_extender_http {
    struct MHD_Daemon *mhd;
    struct gs_extender *x;
    size_t max_body;
    char *cert, *key;
    int port;
};

/* One request's body as it arrives. */
struct upload {
    char *buf;
    size_t len, cap;
    bool too_big;
};

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type, char *body, bool owned)
{
    size_t len = body ? strlen(body) : 0;
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body ? body : (char *)"",
                                                             owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        if (owned) free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result serve_get(struct gs_extender_http *h, struct MHD_Connection *c, const char *url)
{
    if (!strcmp(url, "/healthz") || !strcmp(url, "/livez"))
        return send_text(c, MHD_HTTP_OK, "text/plain", "ok\n", false);
    if (!strcmp(url, "/readyz")) {
        struct gs_extender_stats st;
        gs_extender_stats(h->x, &st);
        return st.synced ? send_text(c, MHD_HTTP_OK, "text/plain", "ok\n", false)
                         : send_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", "cache not synced yet\n", false);
    }
    if (!strcmp(url, "/metrics")) {
        struct gs_mbuf b = {0};
        gs_extender_metrics(h->x, &b);
        if (b.err || !b.buf) {
            free(b.buf);
            return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "out of memory\n", false);
        }
        return send_text(c, MHD_HTTP_OK, PROM_TYPE, b.buf, true);
    }
    return send_text(c, MHD_HTTP_NOT_FOUND, "text/plain",
                     "not found: POST .../filter, .../prioritize, .../preempt, .../bind; GET /healthz, /readyz, /metrics\n",
                     false);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **state)
{
    struct gs_extender_http *h = cls;
    (void)version;
    if (strcmp(method, "POST")) {
        if (strcmp(method, "GET") && strcmp(method, "HEAD"))
            return send_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET or POST only\n", false);
        if (*data_size) return MHD_NO;
        return serve_get(h, c, url);
    }
    struct upload *u = *state;
    if (!u) { /* headers only: set up the body */
        if (!(u = calloc(1, sizeof *u))) return MHD_NO;
        *state = u;
        return MHD_YES;
    }
    if (*data_size) {
        if (!u->too_big && u->len + *data_size > h->max_body) {
            u->too_big = true;
            free(u->buf);
            u->buf = NULL;
            u->len = u->cap = 0;
        }
        if (!u->too_big) {
            if (u->len + *data_size > u->cap) {
                size_t cap = u->cap ? u->cap : 16384;
                while (cap < u->len + *data_size) cap *= 2;
                char *nb = realloc(u->buf, cap);
                if (!nb) return MHD_NO;
                u->buf = nb, u->cap = cap;
            }
            memcpy(u->buf + u->len, data, *data_size);
            u->len += *data_size;
        }
        *data_size = 0;
        return MHD_YES;
    }
    if (u->too_big) {
        char msg[160];
        snprintf(msg, sizeof msg, "{\"Error\":\"request body larger than %zu bytes\"}", h->max_body);
        return send_text(c, 413, JSON_TYPE, strdup(msg), true);
    }
    const char *slash = strrchr(url, '/');
    int v = gs_ext_verb_parse(slash ? slash + 1 : url);
    if (v < 0)
        return send_text(c, MHD_HTTP_NOT_FOUND, JSON_TYPE,
                         "{\"Error\":\"unknown extender verb: the path must end in /filter, /prioritize, /preempt "
                         "or /bind\"}",
                         false);
    struct gs_ext_reply rep;
    int err = gs_extender_handle(h->x, (enum gs_ext_verb)v, u->buf ? u->buf : "", u->len, &rep);
    if (err || !rep.body) {
        free(rep.body);
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, JSON_TYPE, "{\"Error\":\"out of memory\"}", false);
    }
    return send_text(c, (unsigned)rep.status, JSON_TYPE, rep.body, true);
}

static void on_done(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode code)
{
    (void)cls, (void)c, (void)code;
    struct upload *u = *state;
    if (u) free(u->buf);
    free(u);
    *state = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[256];
    (void)cls;
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = 0;
    gs_log(GS_LOG_WARN, "extender http server", "detail", line, NULL);
}

static char *read_file(const char *path, char *err, size_t errlen, const char *what)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0;
    if (f) {
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        if (n > 0 && n < (1 << 20) && (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            len = (size_t)n;
            buf[len] = 0;
        } else {
            free(buf);
            buf = NULL;
        }
        fclose(f);
    }
    if (!buf) snprintf(err, errlen, "%s %s: cannot be read (missing, empty or over 1 MiB)", what, path);
    return buf;
}

/* "HOST:PORT", ":PORT" or "[V6]:PORT" into a socket address. */
static int parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len, char *err, size_t errlen)
{
    char host[256] = "", port[16] = "";
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    if (!colon || !colon[1] || strlen(colon + 1) >= sizeof port || (size_t)(colon - listen) >= sizeof host) {
        snprintf(err, errlen, "--listen: \"%.64s\" is not HOST:PORT, :PORT or [V6]:PORT", listen ? listen : "");
        return GS_EINVAL;
    }
    snprintf(port, sizeof port, "%s", colon + 1);
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = 0;
    char *hp = host;
    if (hp[0] == '[') {
        char *end = strchr(++hp, ']');
        if (!end || end[1]) {
            snprintf(err, errlen, "--listen: bad IPv6 address in \"%.64s\"", listen);
            return GS_EINVAL;
        }
        *end = 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res = NULL;
    int rc = getaddrinfo(*hp ? hp : "0.0.0.0", port, &hints, &res);
    if (rc || !res) {
        snprintf(err, errlen, "--listen: cannot resolve \"%.64s\": %s", listen, gai_strerror(rc));
        return GS_EINVAL;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int gs_extender_http_start(struct gs_extender *x, const struct gs_extender_http_opts *o,
                           struct gs_extender_http **out, char *err, size_t errlen)
{
    *out = NULL;
    struct sockaddr_storage ss;
    socklen_t sslen;
    int rc = parse_listen(o->listen, &ss, &sslen, err, errlen);
    if (rc) return rc;
    if (!o->tls_cert_file != !o->tls_key_file) {
        snprintf(err, errlen, "--tls-cert-file and --tls-private-key-file go together (%s given alone)",
                 o->tls_cert_file ? "--tls-cert-file" : "--tls-private-key-file");
        return GS_EINVAL;
    }
    struct gs_extender_http *h = calloc(1, sizeof *h);
    if (!h) return GS_ENOMEM;
    h->x = x;
    h->max_body = o->max_body ? o->max_body : (size_t)64 << 20;
    if (o->tls_cert_file && (!(h->cert = read_file(o->tls_cert_file, err, errlen, "--tls-cert-file")) ||
                             !(h->key = read_file(o->tls_key_file, err, errlen, "--tls-private-key-file")))) {
        free(h->cert);
        free(h);
        return GS_EINVAL;
    }
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    if (h->cert) flags |= MHD_USE_TLS;
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_KEY, 0, h->key},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, h->cert},
        {MHD_OPTION_END, 0, NULL},
    };
    h->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, on_done,
                              NULL, MHD_OPTION_CONNECTION_LIMIT, 256u, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
                              MHD_OPTION_ARRAY, h->cert ? tls : tls + 2, MHD_OPTION_END);
    if (!h->mhd) {
        snprintf(err, errlen, "cannot listen on %.64s (address in use, not permitted, or a bad TLS key pair)",
                 o->listen);
        free(h->cert);
        free(h->key);
        free(h);
        return GS_EIO;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : 0;
    *out = h;
    return 0;
}

int gs_extender_http_port(const struct gs_extender_http *h) { return h->port; }

void gs_extender_http_stop(struct gs_extender_http *h)
{
    if (!h) return;
    MHD_stop_daemon(h->mhd);
    free(h->cert);
    free(h->key);
    free(h);
}
