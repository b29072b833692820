/*
 * oci.c - the OCI runtime spec (config.json) of one container (oci.h).
 *
 * The builder works in one pass over its inputs, in the order a CRI runtime
 * and the CDI library apply them: the pod and image decide the process
 * (argv, env, cwd, user), the fixed part (namespaces, standard mounts,
 * masked paths) comes from runc's own defaults, then Allocate's device
 * specs, then the CDI devices' containerEdits. Everything lands in a small
 * struct of jansson arrays that is assembled into the spec at the end, so an
 * error anywhere frees one struct and returns.
 *
 * CDI specs are read from disk only when CDI devices are asked for. The spec
 * checker (gs_cdi_spec_parse) is the one parser here of outside input, with
 * its fuzz target tests/fuzz/fuzz_cdi_spec.c: it checks every field the
 * builder later reads, so the builder itself trusts the shapes.
 *
 * Device nodes are stat'ed on the host to fill in type, major and minor (a
 * CDI deviceNode may leave them out; Allocate's specs always do), so the
 * device cgroup allows exactly those numbers.
 */
#include "node/oci.h"

#include "core/codec.h"
#include "core/error.h"
#include "core/pod_security.h"
#include "core/quantity.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/*--- Errors ---*/

static int fail(char *err, size_t el, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t el, int code, const char *fmt, ...)
{
    if (err && el) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, el, fmt, ap);
        va_end(ap);
    }
    return code;
}

/*--- Checking a CDI spec ---*/

static bool name_ok(const char *s, const char *extra)
{
    if (!s || !*s) return false;
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9'))) return false;
    for (const char *p = s; *p; p++) {
        bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        if (!alnum && !strchr(extra, *p)) return false;
    }
    return true;
}

/* "vendor/class": vendor a domain-like name, class alnum with -_. */
static bool kind_ok(const char *k)
{
    const char *slash = k ? strchr(k, '/') : NULL;
    if (!slash || slash == k || strchr(slash + 1, '/')) return false;
    char vendor[256];
    size_t n = (size_t)(slash - k);
    if (n >= sizeof vendor) return false;
    memcpy(vendor, k, n);
    vendor[n] = 0;
    return name_ok(vendor, "-.") && name_ok(slash + 1, "-_.");
}

struct chk {
    const char *file;
    char *err;
    size_t el;
};

static int bad(struct chk *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int bad(struct chk *c, const char *path, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return fail(c->err, c->el, GS_EINVAL, "CDI spec %s: %s: %s", c->file, path, why);
}

static int chk_abs(struct chk *c, const char *path, const json_t *v, bool required)
{
    if (!v && !required) return 0;
    if (!json_is_string(v)) return bad(c, path, "must be a string");
    const char *s = json_string_value(v);
    if (s[0] != '/') return bad(c, path, "must be an absolute path, got \"%.200s\"", s);
    return 0;
}

static int chk_strings(struct chk *c, const char *path, const json_t *v, bool need_eq)
{
    if (!v) return 0;
    if (!json_is_array(v)) return bad(c, path, "must be a list of strings");
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        char p[256];
        snprintf(p, sizeof p, "%.200s[%zu]", path, i);
        if (!json_is_string(e)) return bad(c, p, "must be a string");
        const char *s = json_string_value(e);
        if (need_eq && (!strchr(s, '=') || s[0] == '=')) return bad(c, p, "\"%.200s\" is not of the form NAME=VALUE", s);
    }
    return 0;
}

static int chk_uint(struct chk *c, const char *path, const json_t *v, json_int_t max)
{
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
        return bad(c, path, "must be an integer in 0..%" JSON_INTEGER_FORMAT, max);
    return 0;
}

static const char *const hook_names[] = {"prestart", "createRuntime", "createContainer", "startContainer",
                                         "poststart", "poststop", NULL};

static int chk_node(struct chk *c, const char *path, const json_t *d)
{
    char p[320];
    if (!json_is_object(d)) return bad(c, path, "must be an object");
    int rc;
    snprintf(p, sizeof p, "%s.path", path);
    if ((rc = chk_abs(c, p, json_object_get(d, "path"), true))) return rc;
    snprintf(p, sizeof p, "%s.hostPath", path);
    if ((rc = chk_abs(c, p, json_object_get(d, "hostPath"), false))) return rc;
    json_t *t = json_object_get(d, "type");
    if (t) {
        const char *ts = json_string_value(t);
        snprintf(p, sizeof p, "%s.type", path);
        if (!ts || (strcmp(ts, "c") && strcmp(ts, "b") && strcmp(ts, "u") && strcmp(ts, "p")))
            return bad(c, p, "must be one of \"c\", \"b\", \"u\", \"p\"");
    }
    static const char *const nums[] = {"major", "minor", "uid", "gid", NULL};
    for (int i = 0; nums[i]; i++) {
        snprintf(p, sizeof p, "%.200s.%s", path, nums[i]);
        if ((rc = chk_uint(c, p, json_object_get(d, nums[i]), UINT32_MAX))) return rc;
    }
    snprintf(p, sizeof p, "%s.fileMode", path);
    if ((rc = chk_uint(c, p, json_object_get(d, "fileMode"), 07777))) return rc;
    json_t *perm = json_object_get(d, "permissions");
    if (perm) {
        const char *ps = json_string_value(perm);
        snprintf(p, sizeof p, "%s.permissions", path);
        if (!ps || !*ps || strspn(ps, "rwm") != strlen(ps) || strlen(ps) > 3)
            return bad(c, p, "must be made of the letters r, w, m, got \"%.20s\"", ps ? ps : "");
    }
    return 0;
}

static int chk_mount(struct chk *c, const char *path, const json_t *m)
{
    char p[320];
    int rc;
    if (!json_is_object(m)) return bad(c, path, "must be an object");
    json_t *hp = json_object_get(m, "hostPath");
    snprintf(p, sizeof p, "%s.hostPath", path);
    if (!json_is_string(hp) || !*json_string_value(hp)) return bad(c, p, "must be a non-empty string");
    snprintf(p, sizeof p, "%s.containerPath", path);
    if ((rc = chk_abs(c, p, json_object_get(m, "containerPath"), true))) return rc;
    snprintf(p, sizeof p, "%s.options", path);
    if ((rc = chk_strings(c, p, json_object_get(m, "options"), false))) return rc;
    json_t *t = json_object_get(m, "type");
    snprintf(p, sizeof p, "%s.type", path);
    if (t && !json_is_string(t)) return bad(c, p, "must be a string");
    return 0;
}

static int chk_hook(struct chk *c, const char *path, const json_t *h)
{
    char p[320];
    int rc;
    if (!json_is_object(h)) return bad(c, path, "must be an object");
    const char *name = json_string_value(json_object_get(h, "hookName"));
    snprintf(p, sizeof p, "%s.hookName", path);
    int i = 0;
    while (name && hook_names[i] && strcmp(name, hook_names[i])) i++;
    if (!name || !hook_names[i])
        return bad(c, p, "\"%.100s\" is not an OCI hook (prestart, createRuntime, createContainer, startContainer, "
                         "poststart, poststop)", name ? name : "");
    snprintf(p, sizeof p, "%s.path", path);
    if ((rc = chk_abs(c, p, json_object_get(h, "path"), true))) return rc;
    snprintf(p, sizeof p, "%s.args", path);
    if ((rc = chk_strings(c, p, json_object_get(h, "args"), false))) return rc;
    snprintf(p, sizeof p, "%s.env", path);
    if ((rc = chk_strings(c, p, json_object_get(h, "env"), true))) return rc;
    json_t *t = json_object_get(h, "timeout");
    snprintf(p, sizeof p, "%s.timeout", path);
    if (t && (!json_is_integer(t) || json_integer_value(t) <= 0 || json_integer_value(t) > INT32_MAX))
        return bad(c, p, "must be a positive integer (seconds)");
    return 0;
}

static int chk_list(struct chk *c, const char *path, const json_t *v, int (*one)(struct chk *, const char *,
                                                                                 const json_t *))
{
    if (!v) return 0;
    if (!json_is_array(v)) return bad(c, path, "must be a list");
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        char p[300];
        snprintf(p, sizeof p, "%.200s[%zu]", path, i);
        int rc = one(c, p, e);
        if (rc) return rc;
    }
    return 0;
}

static int chk_edits(struct chk *c, const char *path, const json_t *e)
{
    char p[280];
    int rc;
    if (!e) return 0;
    if (!json_is_object(e)) return bad(c, path, "must be an object");
    snprintf(p, sizeof p, "%s.env", path);
    if ((rc = chk_strings(c, p, json_object_get(e, "env"), true))) return rc;
    snprintf(p, sizeof p, "%s.deviceNodes", path);
    if ((rc = chk_list(c, p, json_object_get(e, "deviceNodes"), chk_node))) return rc;
    snprintf(p, sizeof p, "%s.mounts", path);
    if ((rc = chk_list(c, p, json_object_get(e, "mounts"), chk_mount))) return rc;
    snprintf(p, sizeof p, "%s.hooks", path);
    if ((rc = chk_list(c, p, json_object_get(e, "hooks"), chk_hook))) return rc;
    json_t *g = json_object_get(e, "additionalGids");
    if (g) {
        snprintf(p, sizeof p, "%s.additionalGids", path);
        if (!json_is_array(g)) return bad(c, p, "must be a list of integers");
        size_t i;
        json_t *x;
        json_array_foreach(g, i, x) {
            char q[300];
            snprintf(q, sizeof q, "%.200s[%zu]", p, i);
            if ((rc = chk_uint(c, q, x, UINT32_MAX))) return rc;
        }
    }
    return 0;
}

int gs_cdi_spec_parse(const char *text, size_t len, const char *file, json_t **out, char *err, size_t errlen)
{
    struct chk c = {file ? file : "(text)", err, errlen};
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    *out = NULL;
    int rc = gs_yaml_decode_stream(text, len, &docs, &d, NULL);
    if (rc) {
        rc = fail(err, errlen, GS_EINVAL, "CDI spec %s does not parse: %s", c.file,
                  d.n ? d.v[0].msg : gs_strerror(rc));
        gs_diags_free(&d);
        gs_docs_free(&docs);
        return rc;
    }
    gs_diags_free(&d);
    if (docs.n != 1 || !json_is_object(docs.docs[0])) {
        rc = fail(err, errlen, GS_EINVAL, "CDI spec %s: must be one object, got %zu document(s)", c.file, docs.n);
        gs_docs_free(&docs);
        return rc;
    }
    json_t *s = json_incref(docs.docs[0]);
    gs_docs_free(&docs);
    json_t *v = json_object_get(s, "cdiVersion");
    if (!json_is_string(v) || !*json_string_value(v)) {
        rc = bad(&c, "cdiVersion", "must be a non-empty string");
        goto out;
    }
    const char *kind = json_string_value(json_object_get(s, "kind"));
    if (!kind_ok(kind)) {
        rc = bad(&c, "kind", "\"%.200s\" is not of the form vendor/class (vendor a domain name, class a name)",
                 kind ? kind : "");
        goto out;
    }
    json_t *devs = json_object_get(s, "devices");
    if (!json_is_array(devs) || !json_array_size(devs)) {
        rc = bad(&c, "devices", "must be a non-empty list");
        goto out;
    }
    size_t i;
    json_t *dev;
    json_array_foreach(devs, i, dev) {
        char p[64];
        snprintf(p, sizeof p, "devices[%zu]", i);
        if (!json_is_object(dev)) {
            rc = bad(&c, p, "must be an object");
            goto out;
        }
        const char *name = json_string_value(json_object_get(dev, "name"));
        if (!name_ok(name, "-_.:")) {
            char q[80];
            snprintf(q, sizeof q, "%s.name", p);
            rc = bad(&c, q, "\"%.200s\" is not a device name (letters, digits, -, _, ., :)", name ? name : "");
            goto out;
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(name, json_string_value(json_object_get(json_array_get(devs, j), "name")))) {
                char q[80];
                snprintf(q, sizeof q, "%s.name", p);
                rc = bad(&c, q, "\"%s\" is defined twice", name);
                goto out;
            }
        char q[80];
        snprintf(q, sizeof q, "%s.containerEdits", p);
        json_t *ed = json_object_get(dev, "containerEdits");
        if (!ed) {
            rc = bad(&c, q, "is required");
            goto out;
        }
        if ((rc = chk_edits(&c, q, ed))) goto out;
    }
    if ((rc = chk_edits(&c, "containerEdits", json_object_get(s, "containerEdits")))) goto out;
    *out = s;
    return 0;
out:
    json_decref(s);
    return rc;
}

/*--- The spec being built ---*/

struct bld {
    const struct gs_oci_input *in;
    char ctr_path[64];   /* "spec.containers[i]" for error messages */
    json_t *env;         /* name -> "NAME=VALUE", insertion order kept */
    json_t *mounts;      /* OCI mounts */
    json_t *devices;     /* linux.devices */
    json_t *allow;       /* linux.resources.devices */
    json_t *hooks;       /* OCI hooks object */
    json_t *gids;        /* additionalGids */
    char *err;
    size_t el;
};

static void env_put(struct bld *b, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) return;
    char name[256];
    size_t n = (size_t)(eq - kv);
    if (n >= sizeof name) return;
    memcpy(name, kv, n);
    name[n] = 0;
    json_object_set_new(b->env, name, json_string(kv));
}

static void env_put2(struct bld *b, const char *k, const char *v)
{
    size_t n = strlen(k) + strlen(v) + 2;
    char *kv = malloc(n);
    if (!kv) return;
    snprintf(kv, n, "%s=%s", k, v);
    env_put(b, kv);
    free(kv);
}

static void gid_add(struct bld *b, json_int_t g)
{
    size_t i;
    json_t *x;
    json_array_foreach(b->gids, i, x) if (json_integer_value(x) == g) return;
    json_array_append_new(b->gids, json_integer(g));
}

static json_t *strs(const char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; v && v[i]; i++) json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *mount(const char *dst, const char *type, const char *src, const char *const *opts)
{
    return json_pack("{s:s, s:s, s:s, s:o}", "destination", dst, "type", type, "source", src, "options", strs(opts));
}

/*--- Device nodes ---*/

/* Adds one device node: linux.devices (replacing one at the same path) and
 * an allow rule. type "c"/"b"/"u"/"p"; "u" counts as "c" in the cgroup. */
static void device_put(struct bld *b, const char *path, const char *type, json_int_t major, json_int_t minor,
                       json_int_t mode, json_int_t uid, json_int_t gid, const char *access)
{
    size_t i;
    json_t *x;
    json_array_foreach(b->devices, i, x) if (!strcmp(json_string_value(json_object_get(x, "path")), path)) {
        json_array_remove(b->devices, i);
        break;
    }
    json_t *d = json_pack("{s:s, s:s, s:I, s:I}", "path", path, "type", type, "major", major, "minor", minor);
    if (mode >= 0) json_object_set_new(d, "fileMode", json_integer(mode));
    json_object_set_new(d, "uid", json_integer(uid));
    json_object_set_new(d, "gid", json_integer(gid));
    json_array_append_new(b->devices, d);
    if (!strcmp(type, "p")) return; /* a FIFO is not a device to the cgroup */
    json_array_append_new(b->allow, json_pack("{s:b, s:s, s:I, s:I, s:s}", "allow", 1, "type",
                                              strcmp(type, "b") ? "c" : "b", "major", major, "minor", minor,
                                              "access", access && *access ? access : "rwm"));
}

/* stat() of a host device node: its type letter, numbers and mode bits. */
static int stat_node(struct bld *b, const char *what, const char *host, char *type, json_int_t *major,
                     json_int_t *minor, json_int_t *mode)
{
    struct stat st;
    if (stat(host, &st))
        return fail(b->err, b->el, GS_EIO, "%s: device node %s: %s", what, host, strerror(errno));
    if (S_ISCHR(st.st_mode)) *type = 'c';
    else if (S_ISBLK(st.st_mode)) *type = 'b';
    else if (S_ISFIFO(st.st_mode)) *type = 'p';
    else return fail(b->err, b->el, GS_EINVAL, "%s: %s is not a device node", what, host);
    *major = (json_int_t)major(st.st_rdev);
    *minor = (json_int_t)minor(st.st_rdev);
    *mode = (json_int_t)(st.st_mode & 07777);
    return 0;
}

static int alloc_devices(struct bld *b)
{
    const struct gs_alloc_resp *r = b->in->alloc;
    for (int i = 0; r && i < r->n_dev; i++) {
        const struct gs_alloc_devspec *d = &r->dev[i];
        char what[128], t[2] = {0};
        json_int_t maj, min, mode;
        snprintf(what, sizeof what, "Allocate device %s", d->container_path);
        if (d->container_path[0] != '/')
            return fail(b->err, b->el, GS_EINVAL, "%s: the container path must be absolute", what);
        if (strspn(d->permissions, "rwm") != strlen(d->permissions))
            return fail(b->err, b->el, GS_EINVAL, "%s: permissions \"%s\" are not made of r, w, m", what,
                        d->permissions);
        int rc = stat_node(b, what, d->host_path[0] ? d->host_path : d->container_path, t, &maj, &min, &mode);
        if (rc) return rc;
        device_put(b, d->container_path, t, maj, min, mode, 0, 0, d->permissions);
    }
    for (int i = 0; r && i < r->n_env; i++) env_put2(b, r->env[i].key, r->env[i].value);
    return 0;
}

/*--- CDI ---*/

struct cdi_spec {
    char *file;
    json_t *spec;
    bool applied;        /* its spec-wide containerEdits are in */
};

struct cdi_set {
    struct cdi_spec *v;
    size_t n;
};

static void cdi_set_free(struct cdi_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].file);
        json_decref(s->v[i].spec);
    }
    free(s->v);
}

static bool spec_file(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && ((n > 5 && !strcmp(name + n - 5, ".json")) || (n > 5 && !strcmp(name + n - 5, ".yaml")) ||
                              (n > 4 && !strcmp(name + n - 4, ".yml")));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every spec of every directory, in directory order, files sorted by name. */
static int cdi_load(struct bld *b, struct cdi_set *set)
{
    for (size_t di = 0; di < b->in->n_cdi_dirs; di++) {
        const char *dir = b->in->cdi_dirs[di];
        DIR *dp = opendir(dir);
        if (!dp) {
            if (errno == ENOENT) continue;
            return fail(b->err, b->el, GS_EIO, "CDI directory %s: %s", dir, strerror(errno));
        }
        char **names = NULL;
        size_t n = 0;
        struct dirent *de;
        int rc = 0;
        while ((de = readdir(dp))) {
            if (!spec_file(de->d_name)) continue;
            char **nv = realloc(names, (n + 1) * sizeof *nv);
            if (!nv || !(nv[n] = strdup(de->d_name))) {
                if (nv) names = nv;
                rc = GS_ENOMEM;
                break;
            }
            names = nv;
            n++;
        }
        closedir(dp);
        if (n) qsort(names, n, sizeof *names, cmp_str);
        for (size_t i = 0; i < n && !rc; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            char *text = NULL;
            size_t len = 0;
            if (gs_read_file(path, &text, &len)) {
                rc = fail(b->err, b->el, GS_EIO, "CDI spec %s: %s", path, strerror(errno));
                break;
            }
            json_t *spec = NULL;
            rc = gs_cdi_spec_parse(text, len, path, &spec, b->err, b->el);
            free(text);
            if (rc) break;
            struct cdi_spec *nv = realloc(set->v, (set->n + 1) * sizeof *nv);
            if (!nv) {
                json_decref(spec);
                rc = GS_ENOMEM;
                break;
            }
            set->v = nv;
            set->v[set->n++] = (struct cdi_spec){strdup(path), spec, false};
        }
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
        if (rc) return rc;
    }
    return 0;
}

static int cdi_node(struct bld *b, const char *what, const json_t *d)
{
    const char *path = json_string_value(json_object_get(d, "path"));
    const char *host = json_string_value(json_object_get(d, "hostPath"));
    if (!host) host = path;
    const char *type = json_string_value(json_object_get(d, "type"));
    json_t *jmaj = json_object_get(d, "major"), *jmin = json_object_get(d, "minor");
    json_t *jmode = json_object_get(d, "fileMode");
    char t[2] = {0};
    json_int_t maj = json_integer_value(jmaj), min = json_integer_value(jmin), mode = -1;
    /* As the CDI library: numbers given with a type are taken as they are;
     * anything missing comes from the host node. */
    if (!(type && (strcmp(type, "p") == 0 || jmaj))) {
        json_int_t smaj, smin;
        int rc = stat_node(b, what, host, t, &smaj, &smin, &mode);
        if (rc) return rc;
        char want = !type ? t[0] : !strcmp(type, "u") ? 'c' : type[0];
        if (want != t[0])
            return fail(b->err, b->el, GS_EINVAL, "%s: type \"%s\" but %s is of type \"%s\"", what, type, host, t);
        if (!type) type = t;
        maj = smaj;
        min = smin;
    }
    if (jmode) mode = json_integer_value(jmode);
    device_put(b, path, type, maj, min, mode, json_integer_value(json_object_get(d, "uid")),
               json_integer_value(json_object_get(d, "gid")), json_string_value(json_object_get(d, "permissions")));
    return 0;
}

static bool has_opt(const json_t *opts, const char *o)
{
    size_t i;
    json_t *x;
    json_array_foreach(opts, i, x) if (!strcmp(json_string_value(x), o)) return true;
    return false;
}

static int cdi_apply(struct bld *b, const char *what, const json_t *e)
{
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(e, "env"), i, x) env_put(b, json_string_value(x));
    json_array_foreach(json_object_get(e, "deviceNodes"), i, x) {
        int rc = cdi_node(b, what, x);
        if (rc) return rc;
    }
    json_array_foreach(json_object_get(e, "mounts"), i, x) {
        json_t *opts = json_object_get(x, "options");
        opts = opts ? json_deep_copy(opts) : json_array();
        if (!has_opt(opts, "bind") && !has_opt(opts, "rbind")) json_array_append_new(opts, json_string("rbind"));
        const char *type = json_string_value(json_object_get(x, "type"));
        json_array_append_new(b->mounts, json_pack("{s:s, s:s, s:s, s:o}", "destination",
                                                   json_string_value(json_object_get(x, "containerPath")), "type",
                                                   type && *type ? type : "bind", "source",
                                                   json_string_value(json_object_get(x, "hostPath")), "options",
                                                   opts));
    }
    json_array_foreach(json_object_get(e, "hooks"), i, x) {
        const char *stage = json_string_value(json_object_get(x, "hookName"));
        json_t *h = json_pack("{s:s}", "path", json_string_value(json_object_get(x, "path")));
        static const char *const opt[] = {"args", "env", "timeout", NULL};
        for (int k = 0; opt[k]; k++) {
            json_t *v = json_object_get(x, opt[k]);
            if (v) json_object_set(h, opt[k], v);
        }
        json_t *list = json_object_get(b->hooks, stage);
        if (!list) json_object_set_new(b->hooks, stage, list = json_array());
        json_array_append_new(list, h);
    }
    json_array_foreach(json_object_get(e, "additionalGids"), i, x) gid_add(b, json_integer_value(x));
    return 0;
}

/* Finds vendor/class=name, the last directory's definition winning. */
static const json_t *cdi_find(struct cdi_set *set, const char *kind, const char *name, struct cdi_spec **owner)
{
    for (size_t i = set->n; i-- > 0;) {
        const json_t *s = set->v[i].spec;
        if (strcmp(json_string_value(json_object_get(s, "kind")), kind)) continue;
        size_t j;
        json_t *d;
        json_array_foreach(json_object_get(s, "devices"), j, d) if (!strcmp(json_string_value(json_object_get(d, "name")),
                                                                            name)) {
            *owner = &set->v[i];
            return d;
        }
    }
    return NULL;
}

static int cdi_devices(struct bld *b)
{
    if (!b->in->n_cdi) return 0;
    struct cdi_set set = {0};
    int rc = cdi_load(b, &set);
    for (size_t i = 0; !rc && i < b->in->n_cdi; i++) {
        const char *q = b->in->cdi_devices[i];
        const char *eq = q ? strchr(q, '=') : NULL;
        char kind[256];
        if (!eq || (size_t)(eq - q) >= sizeof kind) {
            rc = fail(b->err, b->el, GS_EINVAL, "CDI device \"%s\": not a qualified name vendor/class=name",
                      q ? q : "");
            break;
        }
        memcpy(kind, q, (size_t)(eq - q));
        kind[eq - q] = 0;
        if (!kind_ok(kind) || !name_ok(eq + 1, "-_.:")) {
            rc = fail(b->err, b->el, GS_EINVAL, "CDI device \"%s\": not a qualified name vendor/class=name", q);
            break;
        }
        struct cdi_spec *owner = NULL;
        const json_t *dev = cdi_find(&set, kind, eq + 1, &owner);
        if (!dev) {
            char dirs[1024] = "";
            for (size_t k = 0; k < b->in->n_cdi_dirs; k++) {
                size_t l = strlen(dirs);
                snprintf(dirs + l, sizeof dirs - l, "%s%s", k ? ", " : "", b->in->cdi_dirs[k]);
            }
            rc = fail(b->err, b->el, GS_EINVAL, "unknown CDI device \"%s\": no spec in %s defines it", q,
                      *dirs ? dirs : "(no CDI directories)");
            break;
        }
        char what[512];
        snprintf(what, sizeof what, "CDI device %s (%s)", q, owner->file);
        rc = cdi_apply(b, what, json_object_get(dev, "containerEdits"));
        if (!rc && !owner->applied) {
            owner->applied = true;
            rc = cdi_apply(b, what, json_object_get(owner->spec, "containerEdits"));
        }
    }
    cdi_set_free(&set);
    return rc;
}

/*--- Process ---*/

/* Appends the strings of a JSON list (the field at path) to argv. */
static int add_json_strs(struct bld *b, json_t *argv, const json_t *list, const char *field)
{
    if (!list) return 0;
    if (!json_is_array(list)) return fail(b->err, b->el, GS_EINVAL, "%s.%s: must be a list of strings", b->ctr_path, field);
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x) {
        if (!json_is_string(x))
            return fail(b->err, b->el, GS_EINVAL, "%s.%s[%zu]: must be a string", b->ctr_path, field, i);
        json_array_append(argv, x);
    }
    return 0;
}

static void add_strv(json_t *argv, char *const *v)
{
    for (size_t i = 0; v && v[i]; i++) json_array_append_new(argv, json_string(v[i]));
}

/* Kubernetes' rule: command replaces the entrypoint, args replace cmd, and
 * a command without args drops the image's cmd. */
static int process_args(struct bld *b, json_t **out)
{
    const json_t *c = b->in->container;
    const struct gs_image_config *im = b->in->image;
    json_t *cmd = json_object_get(c, "command"), *args = json_object_get(c, "args");
    json_t *argv = json_array(), *tail = json_array();
    int rc = add_json_strs(b, argv, cmd, "command");
    if (!rc) rc = add_json_strs(b, tail, args, "args");
    if (!rc && !json_array_size(argv) && im) add_strv(argv, im->entrypoint);
    if (!rc && !json_array_size(cmd) && !json_array_size(tail) && im) add_strv(tail, im->cmd);
    if (!rc) json_array_extend(argv, tail);
    json_decref(tail);
    if (!rc && !json_array_size(argv))
        rc = fail(b->err, b->el, GS_EINVAL, "%s: no command: the container sets no command and the image has no "
                                            "entrypoint or cmd", b->ctr_path);
    if (rc) {
        json_decref(argv);
        return rc;
    }
    *out = argv;
    return 0;
}

static int parse_id(const char *s, json_int_t *v)
{
    if (!*s) return -1;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end || x < 0 || x > INT32_MAX || s[0] == '-' || s[0] == '+') return -1;
    *v = x;
    return 0;
}

static int process_user(struct bld *b, json_t **out)
{
    const json_t *spec = json_object_get(b->in->pod, "spec");
    struct gs_run_as ra;
    gs_pod_run_as(spec, b->in->container, &ra);
    json_int_t uid = 0, gid = 0;
    const char *iu = b->in->image ? b->in->image->user : NULL;
    if ((ra.user < 0 || ra.group < 0) && iu && *iu) {
        char u[256];
        snprintf(u, sizeof u, "%s", iu);
        char *colon = strchr(u, ':');
        if (colon) *colon++ = 0;
        json_int_t iuid = 0, igid = 0;
        if (parse_id(u, &iuid) || (colon && parse_id(colon, &igid)))
            return fail(b->err, b->el, GS_EINVAL,
                        "%s: the image's user \"%s\" is not numeric uid[:gid] (names are not looked up in the "
                        "image): set securityContext.runAsUser and runAsGroup",
                        b->ctr_path, iu);
        uid = iuid;
        gid = igid;
    }
    if (ra.user >= 0) uid = ra.user;
    if (ra.group >= 0) gid = ra.group;
    if (ra.non_root && uid == 0)
        return fail(b->err, b->el, GS_EINVAL, "%s: securityContext.runAsNonRoot is true but the container would "
                                              "run as uid 0 (set runAsUser, or an image user other than root)",
                    b->ctr_path);
    json_t *sg = json_object_get(json_object_get(spec, "securityContext"), "supplementalGroups");
    size_t i;
    json_t *x;
    json_array_foreach(sg, i, x) {
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
            return fail(b->err, b->el, GS_EINVAL, "spec.securityContext.supplementalGroups[%zu]: must be an integer in "
                                                  "0..2147483647", i);
        gid_add(b, json_integer_value(x));
    }
    *out = json_pack("{s:I, s:I}", "uid", uid, "gid", gid);
    return 0;
}

static int process_env(struct bld *b)
{
    const struct gs_image_config *im = b->in->image;
    for (size_t i = 0; im && im->env && im->env[i]; i++) env_put(b, im->env[i]);
    json_t *env = json_object_get(b->in->container, "env");
    if (env && !json_is_array(env)) return fail(b->err, b->el, GS_EINVAL, "%s.env: must be a list", b->ctr_path);
    size_t i;
    json_t *e;
    json_array_foreach(env, i, e) {
        const char *k = json_string_value(json_object_get(e, "name"));
        json_t *v = json_object_get(e, "value");
        if (!k || !*k || strchr(k, '='))
            return fail(b->err, b->el, GS_EINVAL, "%s.env[%zu].name: \"%s\" is not a variable name", b->ctr_path, i,
                        k ? k : "");
        if (v && !json_is_string(v))
            return fail(b->err, b->el, GS_EINVAL, "%s.env[%zu].value: must be a string", b->ctr_path, i);
        if (gs_pod_env_reserved(k)) continue; /* the node sets those */
        env_put2(b, k, v ? json_string_value(v) : "");
    }
    for (size_t k = 0; b->in->extra_env && b->in->extra_env[k]; k++) env_put(b, b->in->extra_env[k]);
    return 0;
}

/*--- Resources ---*/

/* A quantity at resources.<section>.<name>; 0 with *set false when absent. */
static int quantity(struct bld *b, const char *section, const char *name, int64_t *milli, bool *set)
{
    *set = false;
    const json_t *v = json_object_get(json_object_get(json_object_get(b->in->container, "resources"), section), name);
    if (!v) return 0;
    char text[64];
    if (json_is_string(v)) snprintf(text, sizeof text, "%s", json_string_value(v));
    else if (json_is_integer(v)) snprintf(text, sizeof text, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else return fail(b->err, b->el, GS_EINVAL, "%s.resources.%s.%s: must be a quantity string", b->ctr_path, section, name);
    const char *why = NULL;
    int rc = gs_quantity_parse(text, milli, &why);
    if (rc)
        return fail(b->err, b->el, GS_EINVAL, "%s.resources.%s.%s: \"%s\" is not a quantity: %s", b->ctr_path, section,
                    name, text, why ? why : gs_strerror(rc));
    if (*milli < 0)
        return fail(b->err, b->el, GS_EINVAL, "%s.resources.%s.%s: \"%s\" must not be negative", b->ctr_path, section,
                    name, text);
    *set = true;
    return 0;
}

#define CPU_PERIOD 100000

static int resources(struct bld *b, json_t **out)
{
    int64_t req = 0, lim = 0, mem = 0, memreq = 0;
    bool has_req, has_lim, has_mem, has_memreq;
    int rc = quantity(b, "requests", "cpu", &req, &has_req);
    if (!rc) rc = quantity(b, "limits", "cpu", &lim, &has_lim);
    if (!rc) rc = quantity(b, "limits", "memory", &mem, &has_mem);
    if (!rc) rc = quantity(b, "requests", "memory", &memreq, &has_memreq);
    if (rc) return rc;
    if (has_mem && mem % 1000)
        return fail(b->err, b->el, GS_EINVAL, "%s.resources.limits.memory: not a whole number of bytes", b->ctr_path);
    if (has_mem && mem < 1000 * 4096LL)
        return fail(b->err, b->el, GS_EINVAL, "%s.resources.limits.memory: %" PRId64 " bytes is below one page (4096)",
                    b->ctr_path, mem / 1000);
    json_t *r = json_object();
    json_object_set(r, "devices", b->allow);
    /* kubelet's MilliCPUToShares and MilliCPUToQuota. */
    int64_t shares_from = has_req ? req : has_lim ? lim : 0;
    int64_t shares = shares_from ? shares_from * 1024 / 1000 : 2;
    if (shares < 2) shares = 2;
    if (shares > 262144) shares = 262144;
    json_t *cpu = json_pack("{s:I}", "shares", (json_int_t)shares);
    if (has_lim && lim > 0) {
        int64_t quota = lim > INT64_MAX / CPU_PERIOD ? INT64_MAX : lim * CPU_PERIOD / 1000;
        if (quota < 1000) quota = 1000;
        json_object_set_new(cpu, "quota", json_integer(quota));
        json_object_set_new(cpu, "period", json_integer(CPU_PERIOD));
    }
    json_object_set_new(r, "cpu", cpu);
    if (has_mem) json_object_set_new(r, "memory", json_pack("{s:I}", "limit", (json_int_t)(mem / 1000)));
    if (b->in->default_pids_limit > 0)
        json_object_set_new(r, "pids", json_pack("{s:I}", "limit", (json_int_t)b->in->default_pids_limit));
    *out = r;
    return 0;
}

/*--- The fixed part ---*/

static void standard_mounts(struct bld *b)
{
    static const char *const proc[] = {"nosuid", "noexec", "nodev", NULL};
    static const char *const dev[] = {"nosuid", "strictatime", "mode=755", "size=65536k", NULL};
    static const char *const pts[] = {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5", NULL};
    static const char *const shm[] = {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k", NULL};
    static const char *const ro[] = {"nosuid", "noexec", "nodev", "ro", NULL};
    static const char *const cg[] = {"nosuid", "noexec", "nodev", "relatime", "ro", NULL};
    static const char *const tmp[] = {"nosuid", "nodev", "mode=1777", NULL};
    static const char *const rw[] = {"rbind", "rw", "nosuid", "nodev", NULL};
    json_array_append_new(b->mounts, mount("/proc", "proc", "proc", proc));
    json_array_append_new(b->mounts, mount("/dev", "tmpfs", "tmpfs", dev));
    json_array_append_new(b->mounts, mount("/dev/pts", "devpts", "devpts", pts));
    json_array_append_new(b->mounts, mount("/dev/shm", "tmpfs", "shm", shm));
    json_array_append_new(b->mounts, mount("/dev/mqueue", "mqueue", "mqueue", proc));
    json_array_append_new(b->mounts, mount("/sys", "sysfs", "sysfs", ro));
    json_array_append_new(b->mounts, mount("/sys/fs/cgroup", "cgroup", "cgroup", cg));
    json_array_append_new(b->mounts, mount("/tmp", "tmpfs", "tmpfs", tmp));
    if (b->in->scratch_dir) json_array_append_new(b->mounts, mount(GS_OCI_SCRATCH_PATH, "bind", b->in->scratch_dir, rw));
}

static void standard_devices(struct bld *b)
{
    json_array_append_new(b->allow, json_pack("{s:b, s:s}", "allow", 0, "access", "rwm"));
    static const int nodes[][2] = {{1, 3}, {1, 5}, {1, 7}, {1, 8}, {1, 9}, {5, 0}}; /* null zero full random urandom tty */
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++)
        json_array_append_new(b->allow, json_pack("{s:b, s:s, s:i, s:i, s:s}", "allow", 1, "type", "c", "major",
                                                  nodes[i][0], "minor", nodes[i][1], "access", "rwm"));
}

static size_t depth(const char *p)
{
    size_t n = 0;
    for (; *p; p++)
        if (*p == '/' && p[1] && p[1] != '/') n++;
    return n;
}

/* Parents before children, otherwise in the order given (a stable sort). */
static void sort_mounts(json_t *mounts)
{
    size_t n = json_array_size(mounts);
    for (size_t i = 1; i < n; i++) {
        for (size_t j = i; j > 0; j--) {
            json_t *a = json_array_get(mounts, j - 1), *c = json_array_get(mounts, j);
            if (depth(json_string_value(json_object_get(a, "destination"))) <=
                depth(json_string_value(json_object_get(c, "destination"))))
                break;
            json_incref(a);
            json_array_set(mounts, j - 1, c);
            json_array_set_new(mounts, j, a);
        }
    }
}

static json_t *linux_part(json_t *res)
{
    static const char *const masked[] = {"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
                                         "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                                         "/proc/sched_debug", "/sys/firmware", "/proc/scsi", NULL};
    static const char *const ro[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", NULL};
    json_t *ns = json_array();
    static const char *const kinds[] = {"pid", "ipc", "uts", "mount", "cgroup", NULL};
    for (int i = 0; kinds[i]; i++) json_array_append_new(ns, json_pack("{s:s}", "type", kinds[i]));
    return json_pack("{s:o, s:o, s:o, s:o}", "resources", res, "namespaces", ns, "maskedPaths", strs(masked),
                     "readonlyPaths", strs(ro));
}

static json_t *capabilities(void)
{
    static const char *const caps[] = {"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE", NULL};
    return json_pack("{s:o, s:o, s:o}", "bounding", strs(caps), "effective", strs(caps), "permitted", strs(caps));
}

/*--- Assembly ---*/

static int container_path(struct bld *b)
{
    const json_t *ctrs = json_object_get(json_object_get(b->in->pod, "spec"), "containers");
    size_t i;
    json_t *c;
    json_array_foreach(ctrs, i, c) if (c == b->in->container) {
        snprintf(b->ctr_path, sizeof b->ctr_path, "spec.containers[%zu]", i);
        return 0;
    }
    const char *name = json_string_value(json_object_get(b->in->container, "name"));
    json_array_foreach(ctrs, i, c) if (name && !strcmp(name, json_string_value(json_object_get(c, "name")) ? json_string_value(json_object_get(c, "name")) : "")) {
        snprintf(b->ctr_path, sizeof b->ctr_path, "spec.containers[%zu]", i);
        return 0;
    }
    snprintf(b->ctr_path, sizeof b->ctr_path, "container %.40s", name ? name : "");
    return 0;
}

static int security(struct bld *b, bool *nnp)
{
    const json_t *sc = json_object_get(b->in->container, "securityContext");
    if (json_is_true(json_object_get(sc, "privileged")))
        return fail(b->err, b->el, GS_EINVAL, "%s.securityContext.privileged: privileged containers are not supported "
                                              "by the runc runtime", b->ctr_path);
    *nnp = !json_is_true(json_object_get(sc, "allowPrivilegeEscalation"));
    return 0;
}

static int build(struct bld *b, json_t **out)
{
    const struct gs_oci_input *in = b->in;
    container_path(b);
    if (!in->rootfs || in->rootfs[0] != '/')
        return fail(b->err, b->el, GS_EINVAL, "rootfs: \"%s\" must be an absolute path", in->rootfs ? in->rootfs : "");
    if (in->scratch_dir && in->scratch_dir[0] != '/')
        return fail(b->err, b->el, GS_EINVAL, "scratch dir: \"%s\" must be an absolute path", in->scratch_dir);
    bool nnp = true;
    int rc = security(b, &nnp);
    json_t *argv = NULL, *user = NULL, *res = NULL;
    if (!rc) rc = process_args(b, &argv);
    if (!rc) rc = process_user(b, &user);
    if (!rc) rc = process_env(b);
    if (!rc) {
        standard_mounts(b);
        standard_devices(b);
        rc = alloc_devices(b);
    }
    if (!rc) rc = cdi_devices(b);
    if (!rc) rc = resources(b, &res);
    if (rc) {
        json_decref(argv);
        json_decref(user);
        return rc;
    }
    if (json_array_size(b->gids)) json_object_set(user, "additionalGids", b->gids);
    json_t *env = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(b->env, k, v) json_array_append(env, v);
    const char *wd = json_string_value(json_object_get(in->container, "workingDir"));
    if (!wd || !*wd) wd = in->image && in->image->workdir && *in->image->workdir ? in->image->workdir : NULL;
    if (!wd) wd = in->scratch_dir ? GS_OCI_SCRATCH_PATH : "/";
    if (wd[0] != '/') {
        json_decref(argv);
        json_decref(user);
        json_decref(env);
        json_decref(res);
        return fail(b->err, b->el, GS_EINVAL, "%s.workingDir: \"%s\" must be an absolute path", b->ctr_path, wd);
    }
    const json_t *spec = json_object_get(in->pod, "spec");
    const char *host = in->hostname;
    if (!host || !*host) host = json_string_value(json_object_get(spec, "hostname"));
    if (!host || !*host) host = json_string_value(json_object_get(json_object_get(in->pod, "metadata"), "name"));
    if (!host) host = "";
    json_t *proc = json_pack("{s:b, s:o, s:o, s:o, s:s, s:o, s:[{s:s, s:i, s:i}], s:b}", "terminal", 0, "user", user,
                             "args", argv, "env", env, "cwd", wd, "capabilities", capabilities(), "rlimits", "type",
                             "RLIMIT_NOFILE", "hard", 1024, "soft", 1024, "noNewPrivileges", nnp);
    sort_mounts(b->mounts);
    json_t *lin = linux_part(res);
    json_object_set(lin, "devices", b->devices);
    json_t *s = json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:O}", "ociVersion", "1.0.2", "process", proc, "root", "path",
                          in->rootfs, "readonly", 1, "hostname", host, "mounts", b->mounts);
    if (json_object_size(b->hooks)) json_object_set(s, "hooks", b->hooks);
    json_object_set_new(s, "linux", lin);
    if (!s) return GS_ENOMEM;
    *out = s;
    return 0;
}

int gs_oci_spec_build(const struct gs_oci_input *in, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen) err[0] = 0;
    if (!in || !json_is_object(in->pod) || !json_is_object(in->container))
        return fail(err, errlen, GS_EINVAL, "pod and container: both must be objects");
    struct bld b = {.in = in, .err = err, .el = errlen, .env = json_object(), .mounts = json_array(),
                    .devices = json_array(), .allow = json_array(), .hooks = json_object(), .gids = json_array()};
    int rc = (b.env && b.mounts && b.devices && b.allow && b.hooks && b.gids) ? build(&b, out) : GS_ENOMEM;
    json_decref(b.env);
    json_decref(b.mounts);
    json_decref(b.devices);
    json_decref(b.allow);
    json_decref(b.hooks);
    json_decref(b.gids);
    return rc;
}
