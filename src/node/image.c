/*
 * image.c - the node's image store (image.h): references, documents, blobs.
 *
 * The store is itself an OCI image layout, so any tool that reads one reads
 * it: <store>/oci-layout, <store>/index.json (one entry per reference, named
 * by `org.opencontainers.image.ref.name` with the normalised reference),
 * <store>/blobs/sha256/<hex>. Unpacked root file systems live beside them in
 * <store>/rootfs/<manifest hex>/, made on first resolve (image_unpack.c).
 *
 * Import copies every blob a manifest names (the manifest, its config, its
 * layers) while hashing it with GnuTLS's SHA-256, and refuses a blob whose
 * digest or size differs from the descriptor; blobs already in the store are
 * not copied again. The JSON documents are read with jansson; each field is
 * checked and a bad one named in the error ("index.json: manifests[0].digest
 * \"x\" is not sha256:<64 hex digits>").
 *
 * Writers (import, remove) hold an flock on <store>/.lock and replace
 * index.json by rename, so readers (resolve, list) never see half of one.
 * Resolve unpacks into <store>/rootfs/.tmp-* and renames the result into
 * place; when two processes race, the loser drops its copy. Remove deletes
 * the blobs and rootfs no remaining reference needs; a rootfs in use by a
 * running container is the caller's concern (the agent keeps its pods' images).
 */
#include "node/image.h"

#include "core/error.h"
#include "node/image_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DOC (16 << 20) /* the largest index, manifest or config read */
#define REF_NAME "org.opencontainers.image.ref.name"
#define CONTAINERD_NAME "io.containerd.image.name"
#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

/*--- References ---*/

static bool is_hex64(const char *s)
{
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return s[64] == '\0';
}

static bool is_digest(const char *s) { return !strncmp(s, "sha256:", 7) && is_hex64(s + 7); }

/* One path component of a repository: [a-z0-9]+ joined by ".", "_", "__" or "-"+. */
static bool repo_component_ok(const char *s, size_t n)
{
    if (!n || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9'))) return false;
    char last = s[n - 1];
    if (!((last >= 'a' && last <= 'z') || (last >= '0' && last <= '9'))) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) return false;
    }
    return true;
}

static bool tag_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > 128 || s[0] == '.' || s[0] == '-') return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return false;
    }
    return true;
}

int gs_image_ref_normalize(const char *ref, char *out, size_t outlen, char *err, size_t errlen)
{
    char buf[512], digest[80] = "", tag[160] = "", domain[256];
    if (!ref || !*ref) {
        snprintf(err, errlen, "image reference is empty");
        return GS_EINVAL;
    }
    if (strlen(ref) >= sizeof buf) {
        snprintf(err, errlen, "image reference \"%.40s...\" is longer than %zu characters", ref, sizeof buf - 1);
        return GS_EINVAL;
    }
    snprintf(buf, sizeof buf, "%s", ref);
    char *at = strchr(buf, '@');
    if (at) {
        if (!is_digest(at + 1)) {
            snprintf(err, errlen, "image reference \"%s\": digest \"%s\" is not sha256:<64 lowercase hex digits>", ref,
                     at + 1);
            return GS_EINVAL;
        }
        snprintf(digest, sizeof digest, "%s", at + 1);
        *at = '\0';
    }
    char *lastslash = strrchr(buf, '/');
    char *colon = strrchr(lastslash ? lastslash : buf, ':');
    if (colon) {
        if (!tag_ok(colon + 1)) {
            snprintf(err, errlen, "image reference \"%s\": tag \"%s\" is not [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", ref,
                     colon + 1);
            return GS_EINVAL;
        }
        snprintf(tag, sizeof tag, "%s", colon + 1);
        *colon = '\0';
    }
    char *name = buf;
    char *slash = strchr(buf, '/');
    if (slash && (memchr(buf, '.', (size_t)(slash - buf)) || memchr(buf, ':', (size_t)(slash - buf)) ||
                  !strncmp(buf, "localhost/", 10))) {
        snprintf(domain, sizeof domain, "%.*s", (int)(slash - buf), buf);
        name = slash + 1;
    } else {
        snprintf(domain, sizeof domain, "docker.io");
    }
    if (!*name) {
        snprintf(err, errlen, "image reference \"%s\" has no repository name", ref);
        return GS_EINVAL;
    }
    for (const char *p = name; *p;) {
        const char *s = strchr(p, '/');
        size_t n = s ? (size_t)(s - p) : strlen(p);
        if (!repo_component_ok(p, n)) {
            snprintf(err, errlen,
                     "image reference \"%s\": repository part \"%.*s\" must be lowercase letters and digits "
                     "joined by '.', '_' or '-'",
                     ref, (int)n, p);
            return GS_EINVAL;
        }
        p += n + (s ? 1 : 0);
        if (s && !*p) {
            snprintf(err, errlen, "image reference \"%s\" ends with '/'", ref);
            return GS_EINVAL;
        }
    }
    bool library = !strcmp(domain, "docker.io") && !strchr(name, '/');
    if (!*tag && !*digest) snprintf(tag, sizeof tag, "latest");
    int n = snprintf(out, outlen, "%s/%s%s%s%s%s%s", domain, library ? "library/" : "", name, *tag ? ":" : "", tag,
                     *digest ? "@" : "", digest);
    if (n < 0 || (size_t)n >= outlen) {
        snprintf(err, errlen, "image reference \"%s\" is too long once normalised", ref);
        return GS_EINVAL;
    }
    return 0;
}

/*--- Documents ---*/

static json_t *load_doc(const char *text, size_t len, const char *what, const char *kind, char *err, size_t errlen)
{
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        snprintf(err, errlen, "%s: not valid JSON (line %d): %s", what, je.line, je.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        snprintf(err, errlen, "%s: %s must be a JSON object", what, kind);
        json_decref(j);
        return NULL;
    }
    return j;
}

static int check_schema(json_t *j, const char *what, char *err, size_t errlen)
{
    json_t *v = json_object_get(j, "schemaVersion");
    if (!json_is_integer(v) || json_integer_value(v) != 2) {
        snprintf(err, errlen, "%s: schemaVersion must be 2", what);
        return GS_EINVAL;
    }
    return 0;
}

/* A descriptor at field (e.g. "manifests[3]") of what. */
static int parse_desc(json_t *o, const char *what, const char *field, struct gs_image_desc *d, char *err,
                      size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (!json_is_object(o)) {
        snprintf(err, errlen, "%s: %s must be an object", what, field);
        return GS_EINVAL;
    }
    json_t *mt = json_object_get(o, "mediaType"), *dg = json_object_get(o, "digest"), *sz = json_object_get(o, "size");
    if (mt && (!json_is_string(mt) || json_string_length(mt) >= sizeof d->media_type)) {
        snprintf(err, errlen, "%s: %s.mediaType must be a string shorter than %zu", what, field, sizeof d->media_type);
        return GS_EINVAL;
    }
    if (!json_is_string(dg)) {
        snprintf(err, errlen, "%s: %s.digest is missing or not a string", what, field);
        return GS_EINVAL;
    }
    const char *ds = json_string_value(dg);
    if (!is_digest(ds)) {
        if (strchr(ds, ':') && strncmp(ds, "sha256:", 7))
            snprintf(err, errlen, "%s: %s.digest \"%.80s\": only sha256 digests are supported", what, field, ds);
        else
            snprintf(err, errlen, "%s: %s.digest \"%.80s\" is not sha256:<64 lowercase hex digits>", what, field, ds);
        return GS_EINVAL;
    }
    if (!json_is_integer(sz) || json_integer_value(sz) < 0) {
        snprintf(err, errlen, "%s: %s.size is missing or not a non-negative integer", what, field);
        return GS_EINVAL;
    }
    snprintf(d->media_type, sizeof d->media_type, "%s", mt ? json_string_value(mt) : "");
    snprintf(d->digest, sizeof d->digest, "%s", ds);
    d->size = json_integer_value(sz);
    return 0;
}

void gs__image_descs_free(struct gs_image_desc *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) free(v[i].ref);
    free(v);
}

int gs__image_parse_index(const char *text, size_t len, const char *what, struct gs_image_desc **out, size_t *n,
                          char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    json_t *j = load_doc(text, len, what, "an image index", err, errlen);
    if (!j) return GS_EINVAL;
    int rc = check_schema(j, what, err, errlen);
    json_t *ms = json_object_get(j, "manifests");
    if (!rc && !json_is_array(ms)) {
        snprintf(err, errlen, "%s: manifests is missing or not an array", what);
        rc = GS_EINVAL;
    }
    size_t cnt = rc ? 0 : json_array_size(ms);
    struct gs_image_desc *v = cnt ? calloc(cnt, sizeof *v) : NULL;
    if (cnt && !v) rc = GS_ENOMEM;
    for (size_t i = 0; !rc && i < cnt; i++) {
        char field[48];
        snprintf(field, sizeof field, "manifests[%zu]", i);
        json_t *m = json_array_get(ms, i);
        if ((rc = parse_desc(m, what, field, &v[i], err, errlen)) != 0) break;
        json_t *ann = json_object_get(m, "annotations");
        if (ann && !json_is_object(ann)) {
            snprintf(err, errlen, "%s: %s.annotations must be an object", what, field);
            rc = GS_EINVAL;
            break;
        }
        json_t *name = json_object_get(ann, CONTAINERD_NAME);
        if (!name) name = json_object_get(ann, REF_NAME);
        if (!name) continue;
        if (!json_is_string(name)) {
            snprintf(err, errlen, "%s: %s.annotations[\"%s\"] must be a string", what, field, REF_NAME);
            rc = GS_EINVAL;
            break;
        }
        char norm[600], why[400];
        if (gs_image_ref_normalize(json_string_value(name), norm, sizeof norm, why, sizeof why) != 0) {
            snprintf(err, errlen, "%s: %s names a bad reference: %s", what, field, why);
            rc = GS_EINVAL;
            break;
        }
        if (!(v[i].ref = strdup(norm))) rc = GS_ENOMEM;
    }
    json_decref(j);
    if (rc) {
        gs__image_descs_free(v, cnt);
        return rc;
    }
    *out = v;
    *n = cnt;
    return 0;
}

static bool layer_type_ok(const char *mt)
{
    static const char *const ok[] = {
        "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.oci.image.layer.nondistributable.v1.tar",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcmp(mt, ok[i])) return true;
    return false;
}

void gs__image_manifest_free(struct gs_image_manifest *m)
{
    if (!m) return;
    free(m->layers);
    m->layers = NULL;
    m->n_layers = 0;
}

int gs__image_parse_manifest(const char *text, size_t len, const char *what, struct gs_image_manifest *out,
                             char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    json_t *j = load_doc(text, len, what, "an image manifest", err, errlen);
    if (!j) return GS_EINVAL;
    int rc = check_schema(j, what, err, errlen);
    json_t *mt = json_object_get(j, "mediaType");
    if (!rc && mt && (!json_is_string(mt) || (strcmp(json_string_value(mt), MT_OCI_MANIFEST) &&
                                              strcmp(json_string_value(mt), MT_DOCKER_MANIFEST)))) {
        snprintf(err, errlen, "%s: mediaType %s is not an image manifest (%s or %s)", what,
                 json_is_string(mt) ? json_string_value(mt) : "(not a string)", MT_OCI_MANIFEST, MT_DOCKER_MANIFEST);
        rc = GS_EINVAL;
    }
    if (!rc) rc = parse_desc(json_object_get(j, "config"), what, "config", &out->config, err, errlen);
    json_t *ls = json_object_get(j, "layers");
    if (!rc && !json_is_array(ls)) {
        snprintf(err, errlen, "%s: layers is missing or not an array", what);
        rc = GS_EINVAL;
    }
    size_t cnt = rc ? 0 : json_array_size(ls);
    if (cnt && !(out->layers = calloc(cnt, sizeof *out->layers))) rc = GS_ENOMEM;
    for (size_t i = 0; !rc && i < cnt; i++) {
        char field[48];
        snprintf(field, sizeof field, "layers[%zu]", i);
        if ((rc = parse_desc(json_array_get(ls, i), what, field, &out->layers[i], err, errlen)) != 0) break;
        if (!layer_type_ok(out->layers[i].media_type)) {
            snprintf(err, errlen, "%s: %s.mediaType \"%s\" is not a layer type this store unpacks (tar, tar+gzip, "
                     "tar+zstd)", what, field, out->layers[i].media_type);
            rc = GS_EUNSUPPORTED;
        }
        out->n_layers = i + 1;
    }
    json_decref(j);
    if (rc) gs__image_manifest_free(out);
    return rc;
}

static void strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}

void gs_image_config_free(struct gs_image_config *c)
{
    if (!c) return;
    strv_free(c->entrypoint);
    strv_free(c->cmd);
    strv_free(c->env);
    free(c->workdir);
    free(c->user);
    memset(c, 0, sizeof *c);
}

/* A list of strings (null or absent: NULL). */
static int strv_parse(json_t *cfg, const char *key, const char *what, char ***out, char *err, size_t errlen)
{
    json_t *a = json_object_get(cfg, key);
    *out = NULL;
    if (!a || json_is_null(a)) return 0;
    if (!json_is_array(a)) {
        snprintf(err, errlen, "%s: config.%s must be an array of strings", what, key);
        return GS_EINVAL;
    }
    size_t n = json_array_size(a);
    char **v = calloc(n + 1, sizeof *v);
    if (!v) return GS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(a, i);
        if (!json_is_string(s)) {
            snprintf(err, errlen, "%s: config.%s[%zu] is not a string", what, key, i);
            strv_free(v);
            return GS_EINVAL;
        }
        if (!(v[i] = strdup(json_string_value(s)))) {
            strv_free(v);
            return GS_ENOMEM;
        }
    }
    *out = v;
    return 0;
}

static int str_parse(json_t *cfg, const char *key, const char *what, char **out, char *err, size_t errlen)
{
    json_t *s = json_object_get(cfg, key);
    *out = NULL;
    if (!s || json_is_null(s)) return 0;
    if (!json_is_string(s)) {
        snprintf(err, errlen, "%s: config.%s must be a string", what, key);
        return GS_EINVAL;
    }
    if (!json_string_length(s)) return 0;
    return (*out = strdup(json_string_value(s))) ? 0 : GS_ENOMEM;
}

int gs__image_parse_config(const char *text, size_t len, const char *what, struct gs_image_config *out, char *err,
                           size_t errlen)
{
    memset(out, 0, sizeof *out);
    json_t *j = load_doc(text, len, what, "an image config", err, errlen);
    if (!j) return GS_EINVAL;
    json_t *cfg = json_object_get(j, "config");
    int rc = 0;
    if (cfg && !json_is_null(cfg) && !json_is_object(cfg)) {
        snprintf(err, errlen, "%s: config must be an object", what);
        rc = GS_EINVAL;
    }
    if (!rc && json_is_object(cfg)) {
        rc = strv_parse(cfg, "Entrypoint", what, &out->entrypoint, err, errlen);
        if (!rc) rc = strv_parse(cfg, "Cmd", what, &out->cmd, err, errlen);
        if (!rc) rc = strv_parse(cfg, "Env", what, &out->env, err, errlen);
        for (size_t i = 0; !rc && out->env && out->env[i]; i++) {
            if (!strchr(out->env[i], '=') || out->env[i][0] == '=') {
                snprintf(err, errlen, "%s: config.Env[%zu] \"%.60s\" is not NAME=VALUE", what, i, out->env[i]);
                rc = GS_EINVAL;
            }
        }
        if (!rc) rc = str_parse(cfg, "WorkingDir", what, &out->workdir, err, errlen);
        if (!rc) rc = str_parse(cfg, "User", what, &out->user, err, errlen);
        if (!rc && out->workdir && out->workdir[0] != '/') {
            snprintf(err, errlen, "%s: config.WorkingDir \"%.80s\" is not an absolute path", what, out->workdir);
            rc = GS_EINVAL;
        }
    }
    json_decref(j);
    if (rc) gs_image_config_free(out);
    return rc;
}

/*--- Files ---*/

static int read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    *buf = NULL;
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return errno == ENOENT ? GS_ENOENT : GS_EIO;
    }
    char *b = malloc(MAX_DOC + 1);
    size_t n = b ? fread(b, 1, MAX_DOC + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!b) return GS_ENOMEM;
    if (bad || n > MAX_DOC) {
        snprintf(err, errlen, "%s: %s", path, bad ? "read error" : "larger than 16 MiB");
        free(b);
        return bad ? GS_EIO : GS_EINVAL;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

static int mkdir_p(const char *dir)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return GS_ERANGE;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) return GS_EIO;
        *s = '/';
    }
    return (mkdir(p, 0755) != 0 && errno != EEXIST) ? GS_EIO : 0;
}

static int write_atomic(const char *path, const char *data, size_t len, char *err, size_t errlen)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fflush(f) != 0 || fsync(fileno(f)) != 0) {
        snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
        if (f) fclose(f);
        unlink(tmp);
        return GS_EIO;
    }
    fclose(f);
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: cannot replace: %s", path, strerror(errno));
        unlink(tmp);
        return GS_EIO;
    }
    return 0;
}

static void blob_path(const char *dir, const char *digest, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/blobs/sha256/%s", dir, digest + 7);
}

/* Copies the blob d from layout src into the store, checking its size and
 * SHA-256 on the way. A blob the store has is kept as it is. */
static int copy_blob(const char *store, const char *src, const struct gs_image_desc *d, char *err, size_t errlen)
{
    char from[PATH_MAX], to[PATH_MAX], tmp[PATH_MAX + 32];
    blob_path(store, d->digest, to, sizeof to);
    if (access(to, F_OK) == 0) return 0;
    blob_path(src, d->digest, from, sizeof from);
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        snprintf(err, errlen, "%s: blob %s named by the layout is missing: %s", src, d->digest, strerror(errno));
        return GS_EINVAL;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", to, (long)getpid());
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        close(in);
        return GS_EIO;
    }
    gnutls_hash_hd_t h;
    int rc = gnutls_hash_init(&h, GNUTLS_DIG_SHA256) == 0 ? 0 : GS_ENOMEM;
    static __thread char buf[1 << 16];
    int64_t total = 0;
    ssize_t n = 0;
    while (!rc && (n = read(in, buf, sizeof buf)) > 0) {
        gnutls_hash(h, buf, (size_t)n);
        total += n;
        if (write(out, buf, (size_t)n) != n) {
            snprintf(err, errlen, "%s: write failed: %s", tmp, strerror(errno));
            rc = GS_EIO;
        }
    }
    if (!rc && n < 0) {
        snprintf(err, errlen, "%s: read failed: %s", from, strerror(errno));
        rc = GS_EIO;
    }
    unsigned char md[32];
    if (rc != GS_ENOMEM) gnutls_hash_deinit(h, md);
    close(in);
    if (close(out) != 0 && !rc) rc = GS_EIO;
    if (!rc && total != d->size) {
        snprintf(err, errlen, "%s: blob %s is %lld bytes, its descriptor says %lld", src, d->digest, (long long)total,
                 (long long)d->size);
        rc = GS_EINVAL;
    }
    if (!rc) {
        char hex[65];
        for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
        if (strcmp(hex, d->digest + 7)) {
            snprintf(err, errlen, "%s: blob %s has digest sha256:%s: the content does not match", src, d->digest,
                     hex);
            rc = GS_EINVAL;
        }
    }
    if (!rc && rename(tmp, to) != 0) {
        snprintf(err, errlen, "%s: cannot rename into place: %s", to, strerror(errno));
        rc = GS_EIO;
    }
    if (rc) unlink(tmp);
    return rc;
}

/*--- The store's index ---*/

static int store_open(const char *store, bool create, int *lockfd, char *err, size_t errlen)
{
    char p[PATH_MAX];
    *lockfd = -1;
    if (create) {
        snprintf(p, sizeof p, "%s/blobs/sha256", store);
        if (mkdir_p(p) != 0) {
            snprintf(err, errlen, "image store %s: cannot create %s: %s", store, p, strerror(errno));
            return GS_EIO;
        }
        snprintf(p, sizeof p, "%s/oci-layout", store);
        if (access(p, F_OK) != 0) {
            static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}\n";
            int rc = write_atomic(p, layout, sizeof layout - 1, err, errlen);
            if (rc) return rc;
        }
    }
    snprintf(p, sizeof p, "%s/.lock", store);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        snprintf(err, errlen, "image store %s: cannot lock %s: %s", store, p, strerror(errno));
        if (fd >= 0) close(fd);
        return errno == ENOENT ? GS_ENOENT : GS_EIO;
    }
    *lockfd = fd;
    return 0;
}

static int load_index(const char *dir, struct gs_image_desc **v, size_t *n, bool absent_ok, char *err, size_t errlen)
{
    char p[PATH_MAX], *text;
    size_t len;
    snprintf(p, sizeof p, "%s/index.json", dir);
    int rc = read_file(p, &text, &len, err, errlen);
    if (rc == GS_ENOENT && absent_ok) {
        *v = NULL;
        *n = 0;
        return 0;
    }
    if (rc) return rc;
    rc = gs__image_parse_index(text, len, p, v, n, err, errlen);
    free(text);
    return rc;
}

static int save_index(const char *store, const struct gs_image_desc *v, size_t n, char *err, size_t errlen)
{
    json_t *ms = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_pack("{s:s,s:s,s:I}", "mediaType", v[i].media_type[0] ? v[i].media_type : MT_OCI_MANIFEST,
                              "digest", v[i].digest, "size", (json_int_t)v[i].size);
        if (v[i].ref) json_object_set_new(m, "annotations", json_pack("{s:s}", REF_NAME, v[i].ref));
        json_array_append_new(ms, m);
    }
    json_t *j = json_pack("{s:i,s:s,s:o}", "schemaVersion", 2, "mediaType", MT_OCI_INDEX, "manifests", ms);
    char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
    json_decref(j);
    if (!text) return GS_ENOMEM;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/index.json", store);
    int rc = write_atomic(p, text, strlen(text), err, errlen);
    free(text);
    return rc;
}

static int load_manifest(const char *store, const char *digest, struct gs_image_manifest *m, char *err,
                         size_t errlen)
{
    char p[PATH_MAX], *text;
    size_t len;
    blob_path(store, digest, p, sizeof p);
    int rc = read_file(p, &text, &len, err, errlen);
    if (rc) return rc == GS_ENOENT ? GS_EIO : rc;
    rc = gs__image_parse_manifest(text, len, p, m, err, errlen);
    free(text);
    return rc;
}

static int load_config(const char *store, const char *digest, struct gs_image_config *c, char *err, size_t errlen)
{
    char p[PATH_MAX], *text;
    size_t len;
    blob_path(store, digest, p, sizeof p);
    int rc = read_file(p, &text, &len, err, errlen);
    if (rc) return rc == GS_ENOENT ? GS_EIO : rc;
    rc = gs__image_parse_config(text, len, p, c, err, errlen);
    free(text);
    return rc;
}

/*--- Import ---*/

/* Copies one manifest and what it names from src, checking each document. */
static int import_manifest(const char *store, const char *src, const struct gs_image_desc *d, char *err,
                           size_t errlen)
{
    if (!strcmp(d->media_type, MT_OCI_INDEX) || !strcmp(d->media_type, MT_DOCKER_LIST)) {
        snprintf(err, errlen, "%s: index.json entry %s is a nested image index (multi-platform image); import a "
                 "single-platform layout", src, d->digest);
        return GS_EUNSUPPORTED;
    }
    int rc = copy_blob(store, src, d, err, errlen);
    struct gs_image_manifest m;
    if (!rc) rc = load_manifest(store, d->digest, &m, err, errlen);
    if (rc) return rc;
    rc = copy_blob(store, src, &m.config, err, errlen);
    struct gs_image_config c;
    if (!rc && (rc = load_config(store, m.config.digest, &c, err, errlen)) == 0) gs_image_config_free(&c);
    for (size_t i = 0; !rc && i < m.n_layers; i++) rc = copy_blob(store, src, &m.layers[i], err, errlen);
    gs__image_manifest_free(&m);
    return rc;
}

/* Adds (or replaces by reference) entry d in the index v of *n entries. */
static int index_put(struct gs_image_desc **v, size_t *n, const struct gs_image_desc *d)
{
    for (size_t i = 0; i < *n; i++) {
        bool same = d->ref ? ((*v)[i].ref && !strcmp((*v)[i].ref, d->ref))
                           : (!(*v)[i].ref && !strcmp((*v)[i].digest, d->digest));
        if (!same) continue;
        free((*v)[i].ref);
        (*v)[i] = *d;
        (*v)[i].ref = d->ref ? strdup(d->ref) : NULL;
        return (d->ref && !(*v)[i].ref) ? GS_ENOMEM : 0;
    }
    struct gs_image_desc *nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv) return GS_ENOMEM;
    *v = nv;
    nv[*n] = *d;
    nv[*n].ref = d->ref ? strdup(d->ref) : NULL;
    if (d->ref && !nv[*n].ref) return GS_ENOMEM;
    (*n)++;
    return 0;
}

static int check_layout(const char *src, char *err, size_t errlen)
{
    char p[PATH_MAX], *text;
    size_t len;
    snprintf(p, sizeof p, "%s/oci-layout", src);
    if (read_file(p, &text, &len, err, errlen) != 0) {
        snprintf(err, errlen, "%s is not an OCI image layout: it has no oci-layout file", src);
        return GS_EINVAL;
    }
    json_error_t je;
    json_t *j = json_loadb(text, len, 0, &je);
    free(text);
    json_t *v = json_object_get(j, "imageLayoutVersion");
    int rc = 0;
    if (!json_is_string(v) || strncmp(json_string_value(v), "1.", 2)) {
        snprintf(err, errlen, "%s/oci-layout: imageLayoutVersion must be a string \"1.x.y\"", src);
        rc = GS_EINVAL;
    }
    json_decref(j);
    return rc;
}

static int import_layout(const char *store, const char *src, size_t *n_refs, char *err, size_t errlen)
{
    int rc = check_layout(src, err, errlen);
    struct gs_image_desc *in = NULL, *idx = NULL;
    size_t n_in = 0, n_idx = 0;
    if (!rc) rc = load_index(src, &in, &n_in, false, err, errlen);
    if (rc == GS_ENOENT) {
        snprintf(err, errlen, "%s is not an OCI image layout: it has no index.json", src);
        rc = GS_EINVAL;
    }
    if (rc) return rc;
    if (!n_in) {
        snprintf(err, errlen, "%s/index.json lists no manifests", src);
        gs__image_descs_free(in, n_in);
        return GS_EINVAL;
    }
    int lockfd;
    if ((rc = store_open(store, true, &lockfd, err, errlen)) == 0) {
        rc = load_index(store, &idx, &n_idx, true, err, errlen);
        for (size_t i = 0; !rc && i < n_in; i++) rc = import_manifest(store, src, &in[i], err, errlen);
        for (size_t i = 0; !rc && i < n_in; i++) rc = index_put(&idx, &n_idx, &in[i]);
        if (!rc) rc = save_index(store, idx, n_idx, err, errlen);
        close(lockfd);
    }
    if (!rc && n_refs) *n_refs = n_in;
    gs__image_descs_free(in, n_in);
    gs__image_descs_free(idx, n_idx);
    return rc;
}

int gs_image_import(const char *store_dir, const char *path, size_t *n_refs, char *err, size_t errlen)
{
    struct stat st;
    if (n_refs) *n_refs = 0;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return errno == ENOENT ? GS_ENOENT : GS_EIO;
    }
    if (S_ISDIR(st.st_mode)) return import_layout(store_dir, path, n_refs, err, errlen);
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s is neither a directory nor a tar file", path);
        return GS_EINVAL;
    }
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/tmp", store_dir);
    if (mkdir_p(tmp) != 0) {
        snprintf(err, errlen, "image store %s: cannot create %s: %s", store_dir, tmp, strerror(errno));
        return GS_EIO;
    }
    snprintf(tmp, sizeof tmp, "%s/tmp/import-XXXXXX", store_dir);
    if (!mkdtemp(tmp)) {
        snprintf(err, errlen, "image store %s: cannot make a temporary directory: %s", store_dir, strerror(errno));
        return GS_EIO;
    }
    int rc = gs__image_extract_tar(path, tmp, err, errlen);
    if (!rc) {
        rc = import_layout(store_dir, tmp, n_refs, err, errlen);
        /* Name the tar the user gave, not the temporary directory. */
        if (rc && !strncmp(err, tmp, strlen(tmp))) {
            char e2[1024];
            snprintf(e2, sizeof e2, "%s%s", path, err + strlen(tmp));
            snprintf(err, errlen, "%s", e2);
        }
    }
    gs__image_rm_rf(tmp);
    return rc;
}

/*--- Resolve, list, remove ---*/

/* Finds ref (a name, name@digest or a bare digest) in the index: the entry's
 * position, or -1. key receives the normalised form to report. */
static int find_ref(const struct gs_image_desc *v, size_t n, const char *ref, char *key, size_t keylen, char *err,
                    size_t errlen)
{
    const char *digest = NULL;
    if (is_digest(ref)) {
        snprintf(key, keylen, "%s", ref);
        digest = ref;
    } else {
        int rc = gs_image_ref_normalize(ref, key, keylen, err, errlen);
        if (rc) return rc;
        const char *at = strchr(key, '@');
        digest = at ? at + 1 : NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (digest ? !strcmp(v[i].digest, digest) : (v[i].ref && !strcmp(v[i].ref, key))) return (int)i;
    }
    return -1;
}

/* Fills img from the index entry d; rootfs only when it is unpacked. */
static int fill_image(const char *store, const char *abs_store, const struct gs_image_desc *d, struct gs_image *img,
                      char *err, size_t errlen)
{
    memset(img, 0, sizeof *img);
    snprintf(img->digest, sizeof img->digest, "%s", d->digest);
    img->ref = strdup(d->ref ? d->ref : d->digest);
    struct gs_image_manifest m;
    int rc = img->ref ? load_manifest(store, d->digest, &m, err, errlen) : GS_ENOMEM;
    if (rc) {
        gs_image_free(img);
        return rc;
    }
    for (size_t i = 0; i < m.n_layers; i++) img->size += m.layers[i].size;
    rc = load_config(store, m.config.digest, &img->config, err, errlen);
    gs__image_manifest_free(&m);
    char p[PATH_MAX];
    struct stat st;
    snprintf(p, sizeof p, "%s/rootfs/%s", abs_store, d->digest + 7);
    if (!rc && stat(p, &st) == 0 && S_ISDIR(st.st_mode) && !(img->rootfs = strdup(p))) rc = GS_ENOMEM;
    if (rc) gs_image_free(img);
    return rc;
}

static int unpack_rootfs(const char *store, const char *abs_store, struct gs_image *img, char *err, size_t errlen)
{
    static int seq;
    char tmp[PATH_MAX], final[PATH_MAX], what[160];
    struct gs_image_manifest m;
    int rc = load_manifest(store, img->digest, &m, err, errlen);
    if (rc) return rc;
    if (snprintf(final, sizeof final, "%s/rootfs/%s", abs_store, img->digest + 7) >= (int)sizeof final ||
        snprintf(tmp, sizeof tmp, "%s/rootfs/.tmp-%.12s-%ld-%d", abs_store, img->digest + 7, (long)getpid(),
                 __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED)) >= (int)sizeof tmp ||
        mkdir_p(tmp) != 0) {
        snprintf(err, errlen, "image store %s: cannot create %s: %s", store, tmp, strerror(errno));
        gs__image_manifest_free(&m);
        return GS_EIO;
    }
    chmod(tmp, 0755);
    for (size_t i = 0; !rc && i < m.n_layers; i++) {
        char p[PATH_MAX];
        blob_path(store, m.layers[i].digest, p, sizeof p);
        snprintf(what, sizeof what, "image %s layer %zu (%.19s)", img->ref, i, m.layers[i].digest);
        rc = gs__image_unpack_layer(tmp, p, what, err, errlen);
    }
    gs__image_manifest_free(&m);
    if (!rc && rename(tmp, final) != 0) {
        if (errno != EEXIST && errno != ENOTEMPTY) {
            snprintf(err, errlen, "image store %s: cannot move %s into place: %s", store, final, strerror(errno));
            rc = GS_EIO;
        }
        gs__image_rm_rf(tmp); /* another process unpacked it first */
    } else if (rc) {
        gs__image_rm_rf(tmp);
    }
    if (!rc && !(img->rootfs = strdup(final))) rc = GS_ENOMEM;
    return rc;
}

int gs_image_resolve(const char *store_dir, const char *ref, struct gs_image *out, char *err, size_t errlen)
{
    struct gs_image_desc *v = NULL;
    size_t n = 0;
    char key[600], abs_store[PATH_MAX];
    memset(out, 0, sizeof *out);
    int rc = load_index(store_dir, &v, &n, true, err, errlen);
    if (rc) return rc;
    int at = find_ref(v, n, ref, key, sizeof key, err, errlen);
    if (at < -1) rc = at;
    else if (at == -1) {
        snprintf(err, errlen, "image \"%s\" is not in the node's image store", ref);
        rc = GS_ENOENT;
    } else if (!realpath(store_dir, abs_store)) {
        snprintf(err, errlen, "image store %s: %s", store_dir, strerror(errno));
        rc = GS_EIO;
    }
    if (!rc) rc = fill_image(store_dir, abs_store, &v[at], out, err, errlen);
    if (!rc && !out->rootfs && (rc = unpack_rootfs(store_dir, abs_store, out, err, errlen)) != 0) gs_image_free(out);
    gs__image_descs_free(v, n);
    return rc;
}

int gs_image_list(const char *store_dir, struct gs_image **out, size_t *n_out, char *err, size_t errlen)
{
    struct gs_image_desc *v = NULL;
    size_t n = 0;
    char abs_store[PATH_MAX];
    *out = NULL;
    *n_out = 0;
    int rc = load_index(store_dir, &v, &n, true, err, errlen);
    if (rc || !n) return rc;
    if (!realpath(store_dir, abs_store)) snprintf(abs_store, sizeof abs_store, "%s", store_dir);
    struct gs_image *imgs = calloc(n, sizeof *imgs);
    if (!imgs) rc = GS_ENOMEM;
    size_t k = 0;
    for (; !rc && k < n; k++) rc = fill_image(store_dir, abs_store, &v[k], &imgs[k], err, errlen);
    gs__image_descs_free(v, n);
    if (rc) {
        gs_image_list_free(imgs, k); /* the failed entry was cleared */
        return rc;
    }
    *out = imgs;
    *n_out = n;
    return 0;
}

static bool in_set(char *const *set, size_t n, const char *hex)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(set[i], hex)) return true;
    return false;
}

/* Deletes the blobs and rootfs directories that no entry of v needs. */
static int collect(const char *store, const struct gs_image_desc *v, size_t n, char *err, size_t errlen)
{
    char **live = NULL;
    size_t n_live = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        struct gs_image_manifest m;
        if ((rc = load_manifest(store, v[i].digest, &m, err, errlen)) != 0) break;
        for (size_t j = 0; !rc && j < m.n_layers + 2; j++) {
            const char *d = j == 0 ? v[i].digest : j == 1 ? m.config.digest : m.layers[j - 2].digest;
            if (n_live == cap) {
                char **nl = realloc(live, (cap = cap ? 2 * cap : 16) * sizeof *nl);
                if (!nl) { rc = GS_ENOMEM; break; }
                live = nl;
            }
            if (!(live[n_live] = strdup(d + 7))) rc = GS_ENOMEM;
            else n_live++;
        }
        gs__image_manifest_free(&m);
    }
    const char *sub[2] = {"blobs/sha256", "rootfs"};
    for (int s = 0; !rc && s < 2; s++) {
        char dir[PATH_MAX], p[PATH_MAX + 80];
        snprintf(dir, sizeof dir, "%s/%s", store, sub[s]);
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.' || !is_hex64(e->d_name) || in_set(live, n_live, e->d_name)) continue;
            if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < (int)sizeof p) gs__image_rm_rf(p);
        }
        if (d) closedir(d);
    }
    for (size_t i = 0; i < n_live; i++) free(live[i]);
    free(live);
    return rc;
}

int gs_image_remove(const char *store_dir, const char *ref, char *err, size_t errlen)
{
    struct gs_image_desc *v = NULL;
    size_t n = 0;
    char key[600];
    int lockfd;
    int rc = store_open(store_dir, false, &lockfd, err, errlen);
    if (rc == GS_ENOENT) {
        snprintf(err, errlen, "image \"%s\" is not in the node's image store", ref);
        return rc;
    }
    if (rc) return rc;
    rc = load_index(store_dir, &v, &n, true, err, errlen);
    int at = rc ? -1 : find_ref(v, n, ref, key, sizeof key, err, errlen);
    if (!rc && at < -1) rc = at;
    else if (!rc && at == -1) {
        snprintf(err, errlen, "image \"%s\" is not in the node's image store", ref);
        rc = GS_ENOENT;
    }
    if (!rc) {
        /* A digest removes every reference to that manifest; a name only itself. */
        bool by_digest = is_digest(ref) || strchr(key, '@');
        char digest[80];
        snprintf(digest, sizeof digest, "%s", v[at].digest);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            bool drop = by_digest ? !strcmp(v[i].digest, digest) : (int)i == at;
            if (drop) free(v[i].ref);
            else v[k++] = v[i];
        }
        n = k;
        rc = save_index(store_dir, v, n, err, errlen);
        if (!rc) rc = collect(store_dir, v, n, err, errlen);
    }
    gs__image_descs_free(v, n);
    close(lockfd);
    return rc;
}

void gs_image_free(struct gs_image *img)
{
    if (!img) return;
    free(img->ref);
    free(img->rootfs);
    gs_image_config_free(&img->config);
    memset(img, 0, sizeof *img);
}

void gs_image_list_free(struct gs_image *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) gs_image_free(&v[i]);
    free(v);
}
