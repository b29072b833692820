/*
 * client.c - the API client on libcurl; see client.h.
 *
 * One easy handle per client keeps its connection alive between calls (the
 * agent and the CLI make many small ones). The CA from a kubeconfig arrives
 * as base64 data; libcurl's GnuTLS backend takes a CA only as a file, so it
 * is written to a private temporary file that lives as long as the client.
 */
#include "control/client.h"

#include "control/curlfd.h"
#include "core/codec.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct gs_client {
    char *server;
    char *token;
    char *ca_file;
    bool ca_temp; /* ca_file is ours to unlink */
    bool insecure;
    long timeout_ms;
    CURL *h;
    char *auth_header;
    const atomic_bool *cancel; /* set: transfers end (see gs_client_set_cancel) */
    json_t *warnings; /* Warning headers of the last answer (texts) */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

/*--- Configuration ---*/

static const json_t *named(const json_t *list, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
        if (json_is_string(json_object_get(e, "name")) && name && !strcmp(json_string_value(json_object_get(e, "name")), name))
            return e;
    return NULL;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static int write_ca_temp(struct gs_client *c, const char *b64)
{
    gnutls_datum_t in = {(unsigned char *)b64, (unsigned)strlen(b64)}, out;
    if (gnutls_base64_decode2(&in, &out) < 0) return GS_EINVAL;
    char path[] = "/tmp/gpusched-ca-XXXXXX";
    int fd = mkostemp(path, O_CLOEXEC);
    int err = fd < 0 || write(fd, out.data, out.size) != (ssize_t)out.size ? GS_EIO : 0;
    gnutls_free(out.data);
    if (fd >= 0) close(fd);
    if (err) return err;
    free(c->ca_file);
    c->ca_file = strdup(path);
    c->ca_temp = true;
    return c->ca_file ? 0 : GS_ENOMEM;
}

static char *read_token_file(const char *path)
{
    char *buf = NULL;
    size_t len = 0;
    if (gs_read_file(path, &buf, &len)) return NULL;
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ')) buf[--len] = 0;
    return buf;
}

static int from_kubeconfig(struct gs_client *c, const char *path, bool required, struct gs_diags *d)
{
    char *buf = NULL;
    size_t len = 0;
    int err = gs_read_file(path, &buf, &len);
    if (err) {
        if (required) gs_diags_add(d, path, "cannot read the kubeconfig: %s", gs_strerror(err));
        return required ? err : 0;
    }
    struct gs_docs docs = {0};
    err = gs_yaml_decode_stream(buf, len, &docs, d, NULL);
    free(buf);
    if (err || docs.n != 1) {
        gs_docs_free(&docs);
        if (!err) gs_diags_add(d, path, "not a kubeconfig");
        return GS_EINVAL;
    }
    const json_t *kc = docs.docs[0];
    const char *cur = json_string_value(json_object_get(kc, "current-context"));
    const json_t *ctx = json_object_get(named(json_object_get(kc, "contexts"), cur), "context");
    if (!ctx && json_array_size(json_object_get(kc, "contexts")) == 1)
        ctx = json_object_get(json_array_get(json_object_get(kc, "contexts"), 0), "context");
    const char *cname = json_string_value(json_object_get(ctx, "cluster"));
    const char *uname = json_string_value(json_object_get(ctx, "user"));
    const json_t *cl = json_object_get(named(json_object_get(kc, "clusters"), cname), "cluster");
    const json_t *us = json_object_get(named(json_object_get(kc, "users"), uname), "user");
    if (!c->server) c->server = dup_or_null(json_string_value(json_object_get(cl, "server")));
    if (!c->token) c->token = dup_or_null(json_string_value(json_object_get(us, "token")));
    if (!c->token && json_string_value(json_object_get(us, "tokenFile")))
        c->token = read_token_file(json_string_value(json_object_get(us, "tokenFile")));
    if (json_is_true(json_object_get(cl, "insecure-skip-tls-verify"))) c->insecure = true;
    const char *cad = json_string_value(json_object_get(cl, "certificate-authority-data"));
    const char *caf = json_string_value(json_object_get(cl, "certificate-authority"));
    err = 0;
    if (!c->ca_file && cad) err = write_ca_temp(c, cad);
    else if (!c->ca_file && caf) c->ca_file = strdup(caf);
    if (err) gs_diags_add(d, path, "bad certificate-authority-data");
    gs_docs_free(&docs);
    return err;
}

int gs_client_new(const struct gs_client_opts *o, struct gs_client **out, struct gs_diags *d)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init);
    struct gs_client *c = calloc(1, sizeof *c);
    if (!c) return GS_ENOMEM;
    c->server = dup_or_null(o->server ? o->server : getenv("GPUSCHED_SERVER"));
    c->token = dup_or_null(o->token ? o->token : getenv("GPUSCHED_TOKEN"));
    c->ca_file = dup_or_null(o->ca_file);
    c->insecure = o->insecure_skip_verify;
    c->timeout_ms = o->timeout_ms ? o->timeout_ms : 30000;
    int err = 0;
    char first[4096];
    const char *env = getenv("KUBECONFIG");
    if (o->kubeconfig) err = from_kubeconfig(c, o->kubeconfig, true, d);
    else if (env && *env) {
        snprintf(first, sizeof first, "%.*s", (int)strcspn(env, ":"), env);
        err = from_kubeconfig(c, first, true, d);
    } else if (!c->server || !c->token) {
        err = from_kubeconfig(c, "./gpusched-data/kubeconfig", false, d);
    }
    if (!err && !c->server) {
        gs_diags_add(d, "server", "no server: give --server, set GPUSCHED_SERVER, or point --kubeconfig/KUBECONFIG "
                                  "at the kubeconfig `gpusched server` wrote");
        err = GS_EINVAL;
    }
    size_t sl = c->server ? strlen(c->server) : 0;
    while (sl && c->server[sl - 1] == '/') c->server[--sl] = 0;
    if (!err && !(c->h = curl_easy_init())) err = GS_ENOMEM;
    if (!err && c->token && asprintf(&c->auth_header, "Authorization: Bearer %s", c->token) < 0) err = GS_ENOMEM;
    if (err) {
        gs_client_free(c);
        return err;
    }
    *out = c;
    return 0;
}

void gs_client_free(struct gs_client *c)
{
    if (!c) return;
    if (c->h) curl_easy_cleanup(c->h);
    if (c->ca_temp && c->ca_file) unlink(c->ca_file);
    free(c->ca_file);
    free(c->server);
    free(c->token);
    free(c->auth_header);
    json_decref(c->warnings);
    free(c);
}

const char *gs_client_server(const struct gs_client *c) { return c->server; }

void gs_client_set_cancel(struct gs_client *c, const atomic_bool *cancel) { c->cancel = cancel; }

/* libcurl calls this about once a second even on an idle transfer. */
static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    const atomic_bool *cancel = arg;
    return atomic_load(cancel) ? 1 : 0;
}

/*--- Requests ---*/

struct buf {
    char *p;
    size_t n, cap;
};

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
    struct buf *b = arg;
    size_t n = size * nmemb;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16384;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) return 0;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = 0;
    return n;
}

static struct curl_slist *setup(struct gs_client *c, CURL *h, const char *method, const char *url,
                                const char *ctype, const char *accept)
{
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https"); /* never file:// or others from a kubeconfig */
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, gs_curl_sockopt_cloexec); /* no socket reaches a pod */
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (c->ca_file) curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    if (c->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    struct curl_slist *hd = NULL;
    char line[512];
    if (c->auth_header) hd = curl_slist_append(hd, c->auth_header);
    snprintf(line, sizeof line, "Accept: %s", accept ? accept : "application/json");
    hd = curl_slist_append(hd, line);
    if (ctype) {
        snprintf(line, sizeof line, "Content-Type: %s", ctype);
        hd = curl_slist_append(hd, line);
    }
    hd = curl_slist_append(hd, "Expect:");
    hd = curl_slist_append(hd, "User-Agent: gpusched/" GS_VERSION);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    if (c->cancel) {
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)c->cancel);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    return hd;
}

/* A Status object for an answer the client could not use, so callers print
 * it like the server's own (gs_client_status_message). */
static json_t *local_status(const char *method, const char *path, const char *why)
{
    char msg[768];
    snprintf(msg, sizeof msg, "cannot read the server's answer to %s %.300s: %s", method, path, why);
    return json_pack("{s:s, s:s, s:s, s:s, s:s}", "kind", "Status", "apiVersion", "v1", "status", "Failure", "reason",
                     "InternalError", "message", msg);
}

static int err_of(long code, const json_t *body)
{
    if (code >= 200 && code < 300) return 0;
    const char *reason = json_string_value(json_object_get(body, "reason"));
    switch (code) {
    case 404: return GS_ENOENT;
    case 409: return reason && !strcmp(reason, "AlreadyExists") ? GS_EEXIST : GS_ECONFLICT;
    case 401:
    case 403: return GS_EPERM;
    case 400:
    case 413:
    case 422: return GS_EINVAL;
    case 429: return GS_EBUSY;
    default: return GS_EIO;
    }
}

/* A `Warning: 299 - "text"` header line: text (unquoted) joins c->warnings. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    struct gs_client *c = arg;
    size_t n = size * nmemb;
    if (n < 9 || strncasecmp(data, "Warning:", 8)) return n;
    const char *q = memchr(data, '"', n), *end = data + n;
    while (end > data && end[-1] != '"') end--;
    if (!q || end <= q + 1) return n;
    char text[1024];
    size_t k = 0;
    for (const char *p = q + 1; p < end - 1 && k + 1 < sizeof text; p++) {
        if (*p == '\\' && p + 1 < end - 1) p++;
        text[k++] = *p;
    }
    text[k] = 0;
    if (!c->warnings) c->warnings = json_array();
    if (c->warnings) json_array_append_new(c->warnings, json_string(text));
    return n;
}

size_t gs_client_warnings(const struct gs_client *c, size_t i, const char **text)
{
    *text = json_string_value(json_array_get(c->warnings, i));
    return json_array_size(c->warnings);
}

int gs_client_call(struct gs_client *c, const char *method, const char *path, const char *content_type,
                   const json_t *body, const char *accept, json_t **out, long *code)
{
    if (out) *out = NULL;
    if (code) *code = 0;
    char *url = NULL, *text = NULL;
    if (asprintf(&url, "%s%s", c->server, path) < 0) return GS_ENOMEM;
    CURL *h = c->h;
    curl_easy_reset(h);
    struct curl_slist *hd = setup(c, h, method, url, body ? content_type : NULL, accept);
    struct buf b = {0};
    if (body) {
        text = json_dumps(body, JSON_COMPACT);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, text ? text : "");
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    json_array_clear(c->warnings);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    CURLcode cc = curl_easy_perform(h);
    long st = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    curl_slist_free_all(hd);
    free(url);
    free(text);
    int err = 0;
    json_error_t je;
    json_t *doc = b.n ? json_loadb(b.p, b.n, 0, &je) : NULL;
    free(b.p);
    if (cc != CURLE_OK) err = GS_EIO; /* a body cut short is CURLE_PARTIAL_FILE */
    else err = err_of(st, doc);
    if (!err && b.n && !doc) { /* a success that cannot be read is never taken as empty */
        char why[300];
        snprintf(why, sizeof why, "not JSON: line %d column %d: %s", je.line, je.column, je.text);
        doc = local_status(method, path, why);
        err = GS_EPARSE;
    }
    if (code) *code = st;
    if (out) *out = doc;
    else json_decref(doc);
    return err;
}

/*--- Objects ---*/

static int path_of(const struct gs_api_resource *r, const char *ns, const char *name, const char *sub, char *buf,
                   size_t len)
{
    int n = gs_api_path(r, ns, name, buf, len);
    if (n < 0) return GS_EINVAL;
    if (sub && *sub && snprintf(buf + n, len - (size_t)n, "/%s", sub) >= (int)(len - (size_t)n)) return GS_EINVAL;
    return 0;
}

/* A successful read must hold an object (a list: with its items or rows
 * array); anything else is GS_EPARSE with a local Status in *out. */
static int want_shape(const char *path, const char *array, int err, json_t **out)
{
    const char *why = NULL;
    if (err) return err;
    if (!json_is_object(*out)) why = "no JSON object in the answer";
    else if (array && !json_is_array(json_object_get(*out, array)))
        why = !strcmp(array, "rows") ? "a Table without a rows array" : "a list without an items array";
    if (!why) return 0;
    json_decref(*out);
    *out = local_status("GET", path, why);
    return GS_EPARSE;
}

int gs_client_get(struct gs_client *c, const struct gs_api_resource *r, const char *ns, const char *name,
                  json_t **out)
{
    char p[1024];
    json_t *doc = NULL;
    int err = path_of(r, ns, name, NULL, p, sizeof p);
    if (!err) err = want_shape(p, NULL, gs_client_call(c, "GET", p, NULL, NULL, NULL, &doc, NULL), &doc);
    if (out) *out = doc;
    else json_decref(doc);
    return err;
}

static void add_query(char *p, size_t len, const char *key, const char *val, CURL *h)
{
    if (!val || !*val) return;
    char *esc = curl_easy_escape(h, val, 0);
    size_t n = strlen(p);
    snprintf(p + n, len - n, "%c%s=%s", strchr(p, '?') ? '&' : '?', key, esc ? esc : "");
    curl_free(esc);
}

int gs_client_list(struct gs_client *c, const struct gs_api_resource *r, const char *ns, const char *label_selector,
                   const char *field_selector, bool table, json_t **out)
{
    char p[4096];
    int err = path_of(r, ns, NULL, NULL, p, sizeof p);
    if (err) return err;
    add_query(p, sizeof p, "labelSelector", label_selector, c->h);
    add_query(p, sizeof p, "fieldSelector", field_selector, c->h);
    json_t *doc = NULL;
    err = gs_client_call(c, "GET", p, NULL, NULL,
                         table ? "application/json;as=Table;v=v1;g=meta.k8s.io,application/json" : NULL, &doc, NULL);
    err = want_shape(p, table ? "rows" : "items", err, &doc);
    if (out) *out = doc;
    else json_decref(doc);
    return err;
}

int gs_client_create(struct gs_client *c, const struct gs_api_resource *r, const char *ns, const json_t *obj,
                     json_t **out)
{
    char p[1024];
    int err = path_of(r, ns, NULL, NULL, p, sizeof p);
    return err ? err : gs_client_call(c, "POST", p, "application/json", obj, NULL, out, NULL);
}

int gs_client_update(struct gs_client *c, const struct gs_api_resource *r, const char *ns, const char *name,
                     const char *subresource, const json_t *obj, json_t **out)
{
    char p[1024];
    int err = path_of(r, ns, name, subresource, p, sizeof p);
    return err ? err : gs_client_call(c, "PUT", p, "application/json", obj, NULL, out, NULL);
}

int gs_client_patch(struct gs_client *c, const struct gs_api_resource *r, const char *ns, const char *name,
                    const char *subresource, bool strategic, const json_t *patch, json_t **out)
{
    char p[1024];
    int err = path_of(r, ns, name, subresource, p, sizeof p);
    const char *ct = strategic ? "application/strategic-merge-patch+json" : "application/merge-patch+json";
    return err ? err : gs_client_call(c, "PATCH", p, ct, patch, NULL, out, NULL);
}

int gs_client_delete(struct gs_client *c, const struct gs_api_resource *r, const char *ns, const char *name,
                     json_t **out)
{
    char p[1024];
    int err = path_of(r, ns, name, NULL, p, sizeof p);
    return err ? err : gs_client_call(c, "DELETE", p, NULL, NULL, NULL, out, NULL);
}

int gs_client_bind(struct gs_client *c, const char *ns, const char *name, const char *node,
                   const json_t *annotations, json_t **out)
{
    const struct gs_api_resource *pods = gs_api_resource_find("", "v1", "pods");
    char p[1024];
    int err = path_of(pods, ns, name, "binding", p, sizeof p);
    if (err) return err;
    json_t *b = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "Binding", "metadata",
                          "name", name, "target", "kind", "Node", "name", node);
    if (!b) return GS_ENOMEM;
    if (annotations) json_object_set(json_object_get(b, "metadata"), "annotations", (json_t *)annotations);
    err = gs_client_call(c, "POST", p, "application/json", b, NULL, out, NULL);
    json_decref(b);
    return err;
}

const char *gs_client_status_message(const json_t *status)
{
    const char *m = json_string_value(json_object_get(status, "message"));
    return m ? m : "";
}

/*--- Watch ---*/

/* A watch without timeoutSeconds ends on the server within 10 minutes
 * (apiserver.c); the client gives up a little after that, or after
 * timeoutSeconds plus this grace, so a server that vanished is noticed. */
#define WATCH_CLIENT_GRACE_S 15
#define WATCH_SERVER_MAX_S 600
/* The longest event line taken: an object is at most the server's
 * --max-body; this leaves room for servers started with a larger one. */
#define WATCH_MAX_LINE ((size_t)64 << 20)

struct wstate {
    struct buf line;
    gs_watch_fn fn;
    void *arg;
    int stopped;
    int broken; /* GS_EPARSE: an event that cannot be read ends the watch */
};

/* One line of the stream: blank (a keep-alive) or one event. */
static int watch_line(struct wstate *w, const char *text)
{
    if (!text[strspn(text, " \t\r")]) return 0;
    json_t *ev = json_loads(text, 0, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    if (!type || !json_is_object(obj)) {
        json_decref(ev);
        w->broken = GS_EPARSE;
        return 1;
    }
    w->stopped = w->fn(type, obj, w->arg);
    json_decref(ev);
    return w->stopped;
}

static size_t on_watch_data(char *data, size_t size, size_t nmemb, void *arg)
{
    struct wstate *w = arg;
    size_t n = size * nmemb;
    if (w->line.n + n > WATCH_MAX_LINE) {
        w->broken = GS_ERANGE;
        return 0;
    }
    if (on_data(data, 1, n, &w->line) != n) return 0;
    char *start = w->line.p, *nl;
    while ((nl = memchr(start, '\n', w->line.n - (size_t)(start - w->line.p)))) {
        *nl = 0;
        int stop = watch_line(w, start);
        start = nl + 1;
        if (stop) return 0; /* aborts the transfer */
    }
    size_t rest = w->line.n - (size_t)(start - w->line.p);
    memmove(w->line.p, start, rest);
    w->line.n = rest;
    return n;
}

int gs_client_watch(struct gs_client *c, const struct gs_api_resource *r, const char *ns,
                    const char *label_selector, const char *field_selector, const char *resource_version,
                    int timeout_s, gs_watch_fn fn, void *arg)
{
    char p[4096], url[4400];
    int err = path_of(r, ns, NULL, NULL, p, sizeof p);
    if (err) return err;
    CURL *h = curl_easy_init();
    if (!h) return GS_ENOMEM;
    snprintf(p + strlen(p), sizeof p - strlen(p), "?watch=true&allowWatchBookmarks=true");
    if (timeout_s > 0) snprintf(p + strlen(p), sizeof p - strlen(p), "&timeoutSeconds=%d", timeout_s);
    add_query(p, sizeof p, "resourceVersion", resource_version, h);
    add_query(p, sizeof p, "labelSelector", label_selector, h);
    add_query(p, sizeof p, "fieldSelector", field_selector, h);
    snprintf(url, sizeof url, "%s%s", c->server, p);
    struct curl_slist *hd = setup(c, h, "GET", url, NULL, NULL);
    struct wstate w = {.fn = fn, .arg = arg};
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_watch_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &w);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)(timeout_s > 0 ? timeout_s : WATCH_SERVER_MAX_S) + WATCH_CLIENT_GRACE_S);
    CURLcode cc = curl_easy_perform(h);
    long st = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    bool partial = w.line.n && w.line.p[strspn(w.line.p, " \t\r")];
    free(w.line.p);
    if (w.stopped) return w.stopped;
    if (st && st != 200) return err_of(st, NULL);
    if (w.broken) return w.broken;
    if (cc == CURLE_OPERATION_TIMEDOUT) return 0;
    /* The server ends a stream between events; one that stops inside an event was cut short. */
    return cc == CURLE_OK && !partial ? 0 : GS_EIO;
}

/*--- Streamed GET (pod logs) ---*/

struct sstate {
    gs_stream_fn fn;
    void *arg;
    CURL *h;
    struct buf err; /* the body of a non-200 answer */
    int stopped;
};

static size_t on_stream_data(char *data, size_t size, size_t nmemb, void *arg)
{
    struct sstate *s = arg;
    size_t n = size * nmemb;
    long code = 0;
    curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200) return s->err.n < 65536 ? on_data(data, 1, n, &s->err) : n;
    if ((s->stopped = s->fn(data, n, s->arg))) return 0;
    return n;
}

int gs_client_stream(struct gs_client *c, const char *path, gs_stream_fn fn, void *arg, json_t **status)
{
    if (status) *status = NULL;
    char *url = NULL;
    if (asprintf(&url, "%s%s", c->server, path) < 0) return GS_ENOMEM;
    CURL *h = curl_easy_init();
    if (!h) {
        free(url);
        return GS_ENOMEM;
    }
    struct curl_slist *hd = setup(c, h, "GET", url, NULL, "text/plain, application/json");
    struct sstate s = {.fn = fn, .arg = arg, .h = h};
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->timeout_ms);
    CURLcode cc = curl_easy_perform(h);
    long st = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    free(url);
    json_t *doc = s.err.n ? json_loadb(s.err.p, s.err.n, 0, NULL) : NULL;
    free(s.err.p);
    int err = s.stopped ? s.stopped : st && st != 200 ? err_of(st, doc) : cc == CURLE_OK ? 0 : GS_EIO;
    if (status) *status = doc;
    else json_decref(doc);
    return err;
}
/*--- end streamed GET ---*/
