/*
 * client.c - the API client on libcurl; see client.h.
 *
 * One easy handle per client keeps its connection alive between calls (the
 * agent and the CLI make many small ones). The CA, client certificate and
 * key from a kubeconfig may arrive as base64 data; libcurl's GnuTLS backend
 * takes them only as files, so each is written to an anonymous memory file
 * (memfd, named by its /proc/self/fd path) that lives as long as the client
 * and leaves nothing behind, even when the process is killed; where memfd or
 * /proc is not available, to a private temporary file removed at free.
 *
 * Several servers (replicas on one store): the client talks to one at a
 * time and moves on to the next when a request cannot be answered
 * ("Several servers" below; client.h says which requests are tried again).
 */
#include "control/client.h"

#include "control/curlfd.h"
#include "core/codec.h"
#include "core/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct gs_client {
    char *server;               /* the server setting as given: one URL or URL,URL,... */
    char **servers;             /* each URL (trailing '/' removed) */
    size_t nservers;
    atomic_size_t cur;          /* the one in use: a failure moves it on, and it stays there */
    char *token;
    char *ca_file;
    bool ca_temp; /* ca_file is ours to unlink */
    char *cert_file, *key_file; /* client certificate and key (PEM files) */
    bool cert_temp, key_temp;   /* written here from -data fields: ours to unlink */
    int memfds[3];              /* the memory files behind /proc/self/fd paths above */
    int nmemfds;
    char *user_agent;           /* NULL: gpusched/<version> */
    int retry_after;            /* the last answer's Retry-After in seconds; -1: none */
    char *token_file;           /* where token came from: read again every minute (bound tokens rotate) */
    time_t token_read;
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

/* The data in a memory file; *path gets its /proc/self/fd name. false when
 * that cannot be done here (then a temporary file is used). */
static bool write_memfd(struct gs_client *c, const gnutls_datum_t *data, char **path)
{
    if ((size_t)c->nmemfds >= sizeof c->memfds / sizeof c->memfds[0]) return false;
    int fd = memfd_create("gpusched-cred", MFD_CLOEXEC);
    if (fd < 0) return false;
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    char *dup = NULL;
    if (write(fd, data->data, data->size) != (ssize_t)data->size || access(p, R_OK) || !(dup = strdup(p))) {
        close(fd);
        return false;
    }
    free(*path);
    *path = dup;
    c->memfds[c->nmemfds++] = fd;
    return true;
}

/* Decodes base64 data into a memory file, else a private temporary file
 * (0600); *path gets its name, *temp whether it is a file to remove. */
static int write_temp(struct gs_client *c, const char *b64, char **path, bool *temp)
{
    gnutls_datum_t in = {(unsigned char *)b64, (unsigned)strlen(b64)}, out;
    if (gnutls_base64_decode2(&in, &out) < 0) return GS_EINVAL;
    if (write_memfd(c, &out, path)) {
        gnutls_free(out.data);
        *temp = false;
        return 0;
    }
    char tmpl[] = "/tmp/gpusched-cred-XXXXXX";
    int fd = mkostemp(tmpl, O_CLOEXEC);
    int err = fd < 0 || write(fd, out.data, out.size) != (ssize_t)out.size ? GS_EIO : 0;
    gnutls_free(out.data);
    if (fd >= 0) close(fd);
    if (err) {
        if (fd >= 0) unlink(tmpl);
        return err;
    }
    free(*path);
    *path = strdup(tmpl);
    if (!*path) unlink(tmpl);
    *temp = *path != NULL;
    return *path ? 0 : GS_ENOMEM;
}

static int write_ca_temp(struct gs_client *c, const char *b64) { return write_temp(c, b64, &c->ca_file, &c->ca_temp); }

static char *read_token_file(const char *path, int *err)
{
    char *buf = NULL;
    size_t len = 0;
    *err = gs_read_file(path, &buf, &len);
    if (*err) return NULL;
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ')) buf[--len] = 0;
    if (!len) {
        free(buf);
        *err = GS_EINVAL;
        return NULL;
    }
    return buf;
}

/* A path from a kubeconfig: relative ones are relative to the file's folder, as in client-go. */
static char *kc_path(const char *kubeconfig, const char *p)
{
    if (!p || !*p) return NULL;
    const char *slash = strrchr(kubeconfig, '/');
    char *out = NULL;
    if (p[0] == '/' || !slash) return strdup(p);
    return asprintf(&out, "%.*s/%s", (int)(slash - kubeconfig), kubeconfig, p) < 0 ? NULL : out;
}

/* A file the client will hand to libcurl later must be readable now: a
 * missing one is reported here, naming the field, not as a TLS failure. */
static int check_readable(const char *file, const char *field, const char *path, struct gs_diags *d)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    gs_diags_add(d, file, "%s: cannot read \"%s\": %s", field, path, strerror(errno));
    return GS_EINVAL;
}

/* One credential of a kubeconfig user given as a file (field) or as base64
 * data (field-data): *out gets the file to use, *temp whether it is ours. */
static int kc_cred(struct gs_client *c, const char *file, const json_t *us, const char *uname, const char *field,
                   char **out, bool *temp, struct gs_diags *d)
{
    char fname[160], dname[160], where[400];
    snprintf(fname, sizeof fname, "%s", field);
    snprintf(dname, sizeof dname, "%s-data", field);
    const char *data = json_string_value(json_object_get(us, dname));
    const char *f = json_string_value(json_object_get(us, fname));
    if (data) {
        snprintf(where, sizeof where, "users[%s].user.%s", uname ? uname : "", dname);
        int err = write_temp(c, data, out, temp);
        if (err) gs_diags_add(d, file, "%s: %s", where, err == GS_EINVAL ? "not base64" : gs_strerror(err));
        return err ? GS_EINVAL : 0;
    }
    if (!f) return 0;
    snprintf(where, sizeof where, "users[%s].user.%s", uname ? uname : "", fname);
    if (!(*out = kc_path(file, f))) return GS_ENOMEM;
    return check_readable(file, where, *out, d);
}

static int kc_user(struct gs_client *c, const char *path, const json_t *us, const char *uname, struct gs_diags *d)
{
    int err = 0;
    if (!c->token) c->token = dup_or_null(json_string_value(json_object_get(us, "token")));
    const char *tf = json_string_value(json_object_get(us, "tokenFile"));
    if (!c->token && tf) {
        char *full = kc_path(path, tf);
        if (!full) return GS_ENOMEM;
        c->token = read_token_file(full, &err);
        if (!err) c->token_file = strdup(full), c->token_read = time(NULL);
        if (err)
            gs_diags_add(d, path, "users[%s].user.tokenFile: cannot read \"%s\": %s", uname ? uname : "", full,
                         err == GS_EINVAL ? "the file is empty" : gs_strerror(err));
        free(full);
        if (err) return GS_EINVAL;
    }
    if (c->cert_file || c->key_file) return 0;
    err = kc_cred(c, path, us, uname, "client-certificate", &c->cert_file, &c->cert_temp, d);
    if (!err) err = kc_cred(c, path, us, uname, "client-key", &c->key_file, &c->key_temp, d);
    if (!err && !c->cert_file != !c->key_file) {
        const char *have = c->cert_file ? "client-certificate" : "client-key";
        const char *lack = c->cert_file ? "client-key" : "client-certificate";
        gs_diags_add(d, path, "users[%s].user: %s is given without %s", uname ? uname : "", have, lack);
        err = GS_EINVAL;
    }
    return err;
}

/*--- Several servers ---*/

/* c->server split at commas into c->servers; an empty entry is an error
 * naming the list (a stray comma must not silently mean "fewer replicas"). */
static int split_servers(struct gs_client *c, struct gs_diags *d)
{
    size_t n = 1;
    for (const char *p = c->server; *p; p++) n += *p == ',';
    if (!(c->servers = calloc(n, sizeof *c->servers))) return GS_ENOMEM;
    const char *p = c->server;
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(p, ",");
        const char *a = p, *b = p + len;
        while (a < b && (*a == ' ' || *a == '\t')) a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '/')) b--;
        if (a == b) {
            gs_diags_add(d, "server", "\"%s\": entry %zu of the comma-separated list is empty", c->server, i + 1);
            return GS_EINVAL;
        }
        if (!(c->servers[c->nservers++] = strndup(a, (size_t)(b - a)))) return GS_ENOMEM;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* The cluster's server, or every server of its gpusched.io/servers
 * extension (kubeconfig has one server per cluster; kubectl ignores the
 * extension and uses server):
 *   extensions:
 *   - name: gpusched.io/servers
 *     extension: {servers: [https://a:6443, https://b:6443]}
 * c->server gets them joined with commas. */
static int kc_servers(struct gs_client *c, const char *path, const char *cname, const json_t *cl, struct gs_diags *d)
{
    size_t i, k;
    json_t *e, *u;
    json_array_foreach(json_object_get(cl, "extensions"), i, e) {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (!n || strcmp(n, GS_CLIENT_SERVERS_EXTENSION)) continue;
        json_t *list = json_object_get(json_object_get(e, "extension"), "servers");
        if (!json_array_size(list)) {
            gs_diags_add(d, path, "clusters[%s].cluster.extensions[%zu] (%s): extension.servers must be a non-empty "
                         "list of URLs", cname ? cname : "", i, GS_CLIENT_SERVERS_EXTENSION);
            return GS_EINVAL;
        }
        size_t len = 0;
        json_array_foreach(list, k, u) {
            const char *url = json_string_value(u);
            if (!url || !*url || strchr(url, ',')) {
                gs_diags_add(d, path, "clusters[%s].cluster.extensions[%zu] (%s): servers[%zu]: want a URL such as "
                             "https://host:6443 (no commas)", cname ? cname : "", i, GS_CLIENT_SERVERS_EXTENSION, k);
                return GS_EINVAL;
            }
            len += strlen(url) + 1;
        }
        if (!(c->server = calloc(1, len))) return GS_ENOMEM;
        json_array_foreach(list, k, u) {
            if (k) strcat(c->server, ",");
            strcat(c->server, json_string_value(u));
        }
        return 0;
    }
    c->server = dup_or_null(json_string_value(json_object_get(cl, "server")));
    return 0;
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
    if (!c->server) {
        err = kc_servers(c, path, cname, cl, d);
        if (err) {
            gs_docs_free(&docs);
            return err;
        }
    }
    err = kc_user(c, path, us, uname, d);
    if (json_is_true(json_object_get(cl, "insecure-skip-tls-verify"))) c->insecure = true;
    const char *cad = json_string_value(json_object_get(cl, "certificate-authority-data"));
    const char *caf = json_string_value(json_object_get(cl, "certificate-authority"));
    if (!err && !c->ca_file && cad && write_ca_temp(c, cad)) {
        gs_diags_add(d, path, "clusters[%s].cluster.certificate-authority-data: not base64", cname ? cname : "");
        err = GS_EINVAL;
    } else if (!err && !c->ca_file && caf) {
        char where[300];
        snprintf(where, sizeof where, "clusters[%s].cluster.certificate-authority", cname ? cname : "");
        c->ca_file = kc_path(path, caf);
        err = c->ca_file ? check_readable(path, where, c->ca_file, d) : GS_ENOMEM;
    }
    gs_docs_free(&docs);
    return err;
}

/* The in-cluster configuration of a pod: the API server from
 * KUBERNETES_SERVICE_HOST/PORT, the service account's token and CA from
 * its mounted folder (GPUSCHED_SERVICEACCOUNT_DIR overrides the standard
 * place, for tests). Both files must be there. */
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

static int from_cluster(struct gs_client *c, const char *host, struct gs_diags *d)
{
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    const char *dir = getenv("GPUSCHED_SERVICEACCOUNT_DIR");
    if (!dir || !*dir) dir = SA_DIR;
    if (!port || !*port) {
        gs_diags_add(d, "KUBERNETES_SERVICE_PORT", "in-cluster config: KUBERNETES_SERVICE_HOST is \"%s\" but "
                                                  "KUBERNETES_SERVICE_PORT is not set", host);
        return GS_EINVAL;
    }
    char path[4096];
    int err = 0;
    if (!c->token) {
        snprintf(path, sizeof path, "%s/token", dir);
        c->token = read_token_file(path, &err);
        if (err) {
            gs_diags_add(d, path, "in-cluster config: cannot read the service account token: %s",
                         err == GS_EINVAL ? "the file is empty" : gs_strerror(err));
            return GS_EINVAL;
        }
        c->token_file = strdup(path);
        c->token_read = time(NULL);
    }
    if (!c->ca_file && !c->insecure) {
        snprintf(path, sizeof path, "%s/ca.crt", dir);
        if (check_readable(path, "in-cluster config: the service account CA", path, d)) return GS_EINVAL;
        c->ca_file = strdup(path);
    }
    bool v6 = strchr(host, ':') != NULL;
    return asprintf(&c->server, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port) < 0 ? GS_ENOMEM : 0;
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
    c->retry_after = -1;
    int err = 0;
    char first[4096];
    const char *env = getenv("KUBECONFIG");
    if (o->kubeconfig) err = from_kubeconfig(c, o->kubeconfig, true, d);
    else if (env && *env) {
        snprintf(first, sizeof first, "%.*s", (int)strcspn(env, ":"), env);
        err = from_kubeconfig(c, first, true, d);
    } else if (!c->server && getenv("KUBERNETES_SERVICE_HOST") && *getenv("KUBERNETES_SERVICE_HOST")) {
        err = from_cluster(c, getenv("KUBERNETES_SERVICE_HOST"), d);
    } else if (!c->server || !c->token) {
        err = from_kubeconfig(c, "./gpusched-data/kubeconfig", false, d);
    }
    if (!err && !c->server) {
        gs_diags_add(d, "server", "no server: give --server, set GPUSCHED_SERVER, or point --kubeconfig/KUBECONFIG "
                                  "at the kubeconfig `gpusched server` wrote");
        err = GS_EINVAL;
    }
    if (!err) err = split_servers(c, d);
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
    if (c->cert_temp && c->cert_file) unlink(c->cert_file);
    if (c->key_temp && c->key_file) unlink(c->key_file);
    for (int i = 0; i < c->nmemfds; i++) close(c->memfds[i]);
    free(c->ca_file);
    free(c->cert_file);
    free(c->key_file);
    free(c->user_agent);
    free(c->token_file);
    free(c->server);
    for (size_t i = 0; i < c->nservers; i++) free(c->servers[i]);
    free(c->servers);
    free(c->token);
    free(c->auth_header);
    json_decref(c->warnings);
    free(c);
}

const char *gs_client_server(const struct gs_client *c) { return c->servers[atomic_load(&((struct gs_client *)c)->cur)]; }
size_t gs_client_nservers(const struct gs_client *c) { return c->nservers; }

void gs_client_set_cancel(struct gs_client *c, const atomic_bool *cancel) { c->cancel = cancel; }

int gs_client_set_user_agent(struct gs_client *c, const char *ua)
{
    char *n = ua ? strdup(ua) : NULL;
    if (ua && !n) return GS_ENOMEM;
    free(c->user_agent);
    c->user_agent = n;
    return 0;
}

int gs_client_retry_after(const struct gs_client *c) { return c->retry_after; }

/* A token from a file is read again once a minute: kubelet rotates bound
 * service-account tokens well before they expire. A failed read keeps the
 * token held. */
static void refresh_token(struct gs_client *c)
{
    if (!c->token_file || time(NULL) - c->token_read < 60) return;
    c->token_read = time(NULL);
    int err = 0;
    char *t = read_token_file(c->token_file, &err), *h = NULL;
    if (!t) return;
    if (strcmp(t, c->token ? c->token : "") && asprintf(&h, "Authorization: Bearer %s", t) >= 0) {
        free(c->token);
        free(c->auth_header);
        c->token = t;
        c->auth_header = h;
        return;
    }
    free(t);
}

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
    if (c->ca_file) {
        /* The kubeconfig's CA is the only root, as for kubectl; and not
         * loading the system directory saves ~11 MB per connection. */
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
        curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
    }
    if (c->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (c->cert_file) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
    }
    refresh_token(c);
    c->retry_after = -1;
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
    if (c->user_agent) {
        snprintf(line, sizeof line, "User-Agent: %s", c->user_agent);
        hd = curl_slist_append(hd, line);
    } else {
        hd = curl_slist_append(hd, "User-Agent: gpusched/" GS_VERSION);
    }
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
    if (n > 12 && !strncasecmp(data, "Retry-After:", 12)) { /* seconds; an HTTP date is taken as 1 */
        char v[32];
        snprintf(v, sizeof v, "%.*s", (int)(n - 12 < 31 ? n - 12 : 31), data + 12);
        char *end;
        long s = strtol(v, &end, 10);
        c->retry_after = end != v && s >= 0 ? (s > 3600 ? 3600 : (int)s) : 1;
        return n;
    }
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

static int call_once(struct gs_client *c, const char *method, const char *path, const char *content_type,
                     const json_t *body, const char *accept, json_t **out, long *code, CURLcode *ccp)
{
    if (out) *out = NULL;
    if (code) *code = 0;
    char *url = NULL, *text = NULL;
    if (asprintf(&url, "%s%s", gs_client_server(c), path) < 0) return GS_ENOMEM;
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
    *ccp = cc;
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

/*--- Several servers: which failures move on to the next ---
 *
 * A request that never reached a server (refused, unresolvable, no TLS
 * session) goes to the next one whatever it is. One that may have reached
 * it (cut off, timed out, a 5xx answer) is sent again only when sending it
 * twice does no harm: GET, HEAD, PUT, PATCH, DELETE, and a create, whose
 * second try answering AlreadyExists is taken as success when the stored
 * object carries everything we sent (it is the one the first try stored). Every
 * other POST (a binding, an eviction) is not sent again: its caller sees
 * the error and decides, as after any timeout. */

static bool not_sent(CURLcode cc)
{
    return cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_COULDNT_RESOLVE_PROXY ||
           cc == CURLE_SSL_CONNECT_ERROR;
}

/* Worth another server: no answer, or a server-side failure (not a refusal). */
static bool failed_over(CURLcode cc, long st)
{
    if (cc == CURLE_ABORTED_BY_CALLBACK) return false; /* cancelled by the caller */
    if (cc != CURLE_OK) return true;
    return st >= 500 && st != 501;
}

static void next_server(struct gs_client *c, size_t from)
{
    size_t to = (from + 1) % c->nservers;
    if (atomic_compare_exchange_strong(&c->cur, &from, to) && c->nservers > 1) {
        char why[48];
        snprintf(why, sizeof why, "%zu of %zu", to + 1, c->nservers);
        gs_log(GS_LOG_WARN, "client: server not answering, trying the next", "failed", c->servers[from], "next",
               c->servers[to], "server", why, NULL);
    }
}

/* sent is contained in stored: every field sent is there with the same
 * value; an array's elements each appear in the stored array (the server
 * may add defaults, e.g. tolerations). Server-set metadata is skipped. */
static bool contains(const json_t *sent, const json_t *stored, bool top_meta)
{
    if (json_is_object(sent)) {
        if (!json_is_object(stored)) return false;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)sent, k, v) {
            if (top_meta && (!strcmp(k, "resourceVersion") || !strcmp(k, "uid") || !strcmp(k, "creationTimestamp") ||
                             !strcmp(k, "generation") || !strcmp(k, "managedFields")))
                continue;
            if (!contains(v, json_object_get(stored, k), false)) return false;
        }
        return true;
    }
    if (json_is_array(sent)) {
        if (!json_is_array(stored)) return false;
        size_t i, j;
        json_t *a, *b;
        json_array_foreach(sent, i, a) {
            bool found = false;
            json_array_foreach(stored, j, b) if ((found = contains(a, b, false))) break;
            if (!found) return false;
        }
        return true;
    }
    return json_equal(sent, stored);
}

static bool ours(const json_t *sent, const json_t *stored)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)sent, k, v) {
        if (!strcmp(k, "status")) continue; /* the server resets a new object's status */
        if (!contains(v, json_object_get(stored, k), !strcmp(k, "metadata"))) return false;
    }
    return true;
}

enum call_kind { CALL_PLAIN, CALL_CREATE };

static int call_failover(struct gs_client *c, enum call_kind kind, const char *method, const char *path,
                         const char *content_type, const json_t *body, const char *accept, json_t **out, long *code)
{
    bool idempotent = !strcmp(method, "GET") || !strcmp(method, "HEAD") || !strcmp(method, "PUT") ||
                      !strcmp(method, "PATCH") || !strcmp(method, "DELETE");
    bool maybe_landed = false; /* a create that may have been stored by an earlier try */
    long st = 0;
    int err = 0;
    for (size_t try = 0; try < c->nservers; try++) {
        size_t at = atomic_load(&c->cur);
        CURLcode cc = CURLE_OK;
        json_t *doc = NULL;
        err = call_once(c, method, path, content_type, body, accept, &doc, &st, &cc);
        bool last = try + 1 == c->nservers;
        if (!last && failed_over(cc, st) && (not_sent(cc) || idempotent || kind == CALL_CREATE)) {
            if (!not_sent(cc)) maybe_landed = true;
            json_decref(doc);
            next_server(c, at);
            continue;
        }
        if (failed_over(cc, st) && c->nservers > 1) next_server(c, at); /* the next call starts elsewhere */
        if (err == GS_EEXIST && maybe_landed) { /* AlreadyExists: ours, from the try that seemed to fail? */
            const char *name = json_string_value(json_object_get(json_object_get(body, "metadata"), "name"));
            char *p = NULL;
            json_t *cur = NULL;
            if (name && asprintf(&p, "%s/%s", path, name) >= 0 &&
                !call_once(c, "GET", p, NULL, NULL, NULL, &cur, &st, &cc) && ours(body, cur)) {
                json_decref(doc);
                doc = cur, cur = NULL;
                err = 0;
                st = 201;
                gs_log(GS_LOG_INFO, "client: a create retried on another server had been stored", "path", p, NULL);
            }
            json_decref(cur);
            free(p);
        }
        if (out) *out = doc;
        else json_decref(doc);
        break;
    }
    if (code) *code = st;
    return err;
}

int gs_client_call(struct gs_client *c, const char *method, const char *path, const char *content_type,
                   const json_t *body, const char *accept, json_t **out, long *code)
{
    return call_failover(c, CALL_PLAIN, method, path, content_type, body, accept, out, code);
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
    return err ? err : call_failover(c, CALL_CREATE, "POST", p, "application/json", obj, NULL, out, NULL);
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
    size_t delivered; /* events handed to fn */
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
    w->delivered++;
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

static int watch_once(struct gs_client *c, const struct gs_api_resource *r, const char *ns,
                      const char *label_selector, const char *field_selector, const char *resource_version,
                      int timeout_s, gs_watch_fn fn, void *arg, CURLcode *ccp, bool *delivered)
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
    size_t at = atomic_load(&c->cur);
    snprintf(url, sizeof url, "%s%s", c->servers[at], p);
    struct curl_slist *hd = setup(c, h, "GET", url, NULL, NULL);
    struct wstate w = {.fn = fn, .arg = arg};
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_watch_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &w);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)(timeout_s > 0 ? timeout_s : WATCH_SERVER_MAX_S) + WATCH_CLIENT_GRACE_S);
    CURLcode cc = curl_easy_perform(h);
    *ccp = cc;
    long st = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    *delivered = w.delivered > 0;
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    if (st >= 500 && st != 501) *ccp = CURLE_RECV_ERROR; /* a server-side failure: worth the next server */
    bool partial = w.line.n && w.line.p[strspn(w.line.p, " \t\r")];
    free(w.line.p);
    if (w.stopped) return w.stopped;
    if (st && st != 200) return err_of(st, NULL);
    if (w.broken) return w.broken;
    if (cc == CURLE_OPERATION_TIMEDOUT) return 0;
    /* The server ends a stream between events; one that stops inside an event was cut short. */
    return cc == CURLE_OK && !partial ? 0 : GS_EIO;
}

/* A watch that failed on one server before any event starts on the next,
 * from the same resourceVersion (every replica numbers versions alike: they
 * are the shared store's). One cut off after events came returns GS_EIO as
 * before, and the caller's next watch or list goes to the next server. */
int gs_client_watch(struct gs_client *c, const struct gs_api_resource *r, const char *ns,
                    const char *label_selector, const char *field_selector, const char *resource_version,
                    int timeout_s, gs_watch_fn fn, void *arg)
{
    int err = 0;
    for (size_t try = 0; try < c->nservers; try++) {
        size_t at = atomic_load(&c->cur);
        CURLcode cc = CURLE_OK;
        bool delivered = false;
        err = watch_once(c, r, ns, label_selector, field_selector, resource_version, timeout_s, fn, arg, &cc,
                         &delivered);
        bool failed = cc != CURLE_OK && cc != CURLE_OPERATION_TIMEDOUT && cc != CURLE_ABORTED_BY_CALLBACK &&
                      cc != CURLE_WRITE_ERROR; /* a write error: fn stopped it, or an event too long */
        if (!failed) break;
        if (c->nservers > 1) next_server(c, at);
        if (delivered) break; /* events came: the caller goes on from the last it saw (or relists) */
    }
    return err;
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

static int stream_once(struct gs_client *c, const char *path, const char *accept, long timeout_s, gs_stream_fn fn,
                       void *arg, json_t **status, long *code, CURLcode *ccp)
{
    if (status) *status = NULL;
    if (code) *code = 0;
    char *url = NULL;
    size_t at = atomic_load(&c->cur);
    if (asprintf(&url, "%s%s", c->servers[at], path) < 0) return GS_ENOMEM;
    CURL *h = curl_easy_init();
    if (!h) {
        free(url);
        return GS_ENOMEM;
    }
    struct curl_slist *hd = setup(c, h, "GET", url, NULL, accept);
    struct sstate s = {.fn = fn, .arg = arg, .h = h};
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    json_array_clear(c->warnings);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->timeout_ms);
    if (timeout_s > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
    CURLcode cc = curl_easy_perform(h);
    *ccp = cc;
    long st = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    free(url);
    json_t *doc = s.err.n ? json_loadb(s.err.p, s.err.n, 0, NULL) : NULL;
    free(s.err.p);
    int err = s.stopped                              ? s.stopped
              : st && st != 200                      ? err_of(st, doc)
              : cc == CURLE_OK                       ? 0
              : cc == CURLE_OPERATION_TIMEDOUT && st ? GS_ETIMEDOUT
                                                     : GS_EIO;
    if (code) *code = st;
    if (status) *status = doc;
    else json_decref(doc);
    return err;
}

/* Only a stream that reached no server goes to the next (data may have
 * been handed to fn otherwise). */
static int stream(struct gs_client *c, const char *path, const char *accept, long timeout_s, gs_stream_fn fn,
                  void *arg, json_t **status, long *code)
{
    int err = 0;
    for (size_t try = 0; try < c->nservers; try++) {
        size_t at = atomic_load(&c->cur);
        CURLcode cc = CURLE_OK;
        err = stream_once(c, path, accept, timeout_s, fn, arg, status, code, &cc);
        if (!not_sent(cc)) break;
        if (c->nservers > 1) next_server(c, at);
        if (try + 1 < c->nservers && status) json_decref(*status), *status = NULL;
    }
    return err;
}

int gs_client_stream(struct gs_client *c, const char *path, gs_stream_fn fn, void *arg, json_t **status)
{
    return stream(c, path, "text/plain, application/json", 0, fn, arg, status, NULL);
}

int gs_client_stream_timed(struct gs_client *c, const char *path, long timeout_s, gs_stream_fn fn, void *arg,
                           json_t **status, long *code)
{
    return stream(c, path, NULL, timeout_s, fn, arg, status, code);
}
/*--- end streamed GET ---*/
