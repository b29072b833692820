/*
 * oci.c - config.json of one container from the pod, the image config, the
 * Allocate answer and the CDI specs' containerEdits; see oci.h.
 *
 * The skeleton is runc's own default spec (`runc spec`): namespaces pid, ipc,
 * uts and mount (the host network namespace is kept, as with hostNetwork, so
 * pods reach the node's loopback), /proc, a tmpfs /dev with /dev/pts,
 * /dev/shm and /dev/mqueue, /sys read-only, its maskedPaths and
 * readonlyPaths; plus a tmpfs /tmp and the container's scratch directory at
 * /scratch. The device cgroup denies everything and allows the standard
 * nodes (null, zero, full, random, urandom, tty, the pts) and exactly the
 * device nodes the Allocate answer and the CDI edits name; those nodes are
 * also created in the container's /dev (linux.devices), with the major and
 * minor of the host node they point at.
 *
 * CDI edits are applied as the CDI library does: the spec-wide
 * containerEdits of every spec file that defines a requested device, then
 * the device's own; env, deviceNodes (path, hostPath, permissions), mounts
 * and hooks. Spec files are the *.json of each CDI directory, read with
 * jansson (gpusched's own cdi.c writes JSON).
 */
#include "node/oci.h"
#include "core/error.h"
#include "core/quantity.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/*--- Environment: image, pod, agent, CDI (later wins by name) ---*/

static void env_set(json_t *env, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) return;
    char k[256];
    snprintf(k, sizeof k, "%.*s", (int)(eq - kv), kv);
    json_object_set_new(env, k, json_string(eq + 1));
}

static json_t *env_array(json_t *env)
{
    json_t *a = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v) {
        size_t n = strlen(k) + strlen(json_string_value(v)) + 2;
        char *s = malloc(n);
        if (!s) continue;
        snprintf(s, n, "%s=%s", k, json_string_value(v));
        json_array_append_new(a, json_string(s));
        free(s);
    }
    return a;
}

/*--- Devices ---*/

struct devs {
    json_t *nodes;  /* linux.devices */
    json_t *allow;  /* linux.resources.devices */
};

static int add_dev(struct devs *d, const char *path, const char *host, const char *perm, char *err, size_t el)
{
    struct stat st;
    if (stat(host ? host : path, &st)) {
        snprintf(err, el, "device node %s: %s", host ? host : path, strerror(errno));
        return GS_EIO;
    }
    if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
        snprintf(err, el, "device node %s: not a character or block device", host ? host : path);
        return GS_EINVAL;
    }
    const char *type = S_ISCHR(st.st_mode) ? "c" : "b";
    json_int_t maj = major(st.st_rdev), min = minor(st.st_rdev);
    size_t i;
    json_t *e;
    json_array_foreach(d->nodes, i, e) if (!strcmp(jstr(e, "path"), path)) return 0;
    json_array_append_new(d->nodes, json_pack("{s:s,s:s,s:I,s:I,s:i}", "path", path, "type", type, "major", maj,
                                              "minor", min, "fileMode", 0666));
    json_array_append_new(d->allow, json_pack("{s:b,s:s,s:I,s:I,s:s}", "allow", 1, "type", type, "major", maj,
                                              "minor", min, "access", perm && *perm ? perm : "rwm"));
    return 0;
}

static void allow_std(json_t *allow)
{
    static const int std[][2] = {{1, 3}, {1, 5}, {1, 7}, {1, 8}, {1, 9}, {5, 0}, {5, 2}};
    json_array_append_new(allow, json_pack("{s:b,s:s}", "allow", 0, "access", "rwm"));
    for (size_t i = 0; i < sizeof std / sizeof std[0]; i++)
        json_array_append_new(allow, json_pack("{s:b,s:s,s:i,s:i,s:s}", "allow", 1, "type", "c", "major", std[i][0],
                                               "minor", std[i][1], "access", "rwm"));
    json_array_append_new(allow, json_pack("{s:b,s:s,s:i,s:s}", "allow", 1, "type", "c", "major", 136, "access", "rwm"));
}

/*--- CDI ---*/

static json_t *load_spec(const char *path, char *err, size_t el)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc) snprintf(err, el, "CDI spec %s: line %d: %s", path, je.line, je.text);
    else if (!json_is_object(doc)) {
        snprintf(err, el, "CDI spec %s: want a JSON object", path);
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

struct edits {
    json_t *env;
    struct devs *devs;
    json_t *mounts, *hooks;
};

static int apply_edits(const json_t *ce, struct edits *ed, const char *where, char *err, size_t el)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(ce, "env"), i, e) if (json_is_string(e)) env_set(ed->env, json_string_value(e));
    json_array_foreach(json_object_get(ce, "deviceNodes"), i, e) {
        const char *path = jstr(e, "path");
        if (!path || path[0] != '/') {
            snprintf(err, el, "%s: deviceNodes[%zu].path: want an absolute path", where, i);
            return GS_EINVAL;
        }
        int rc = add_dev(ed->devs, path, jstr(e, "hostPath"), jstr(e, "permissions"), err, el);
        if (rc) return rc;
    }
    json_array_foreach(json_object_get(ce, "mounts"), i, e) {
        const char *hp = jstr(e, "hostPath"), *cp = jstr(e, "containerPath");
        if (!hp || !cp || cp[0] != '/') {
            snprintf(err, el, "%s: mounts[%zu]: want hostPath and an absolute containerPath", where, i);
            return GS_EINVAL;
        }
        json_t *opts = json_object_get(e, "options");
        json_array_append_new(ed->mounts, json_pack("{s:s,s:s,s:s,s:o}", "destination", cp, "type",
                                                    jstr(e, "type") ? jstr(e, "type") : "bind", "source", hp,
                                                    "options", opts ? json_deep_copy(opts)
                                                                    : json_pack("[s,s,s]", "rbind", "rprivate", "ro")));
    }
    json_array_foreach(json_object_get(ce, "hooks"), i, e) {
        const char *name = jstr(e, "hookName"), *path = jstr(e, "path");
        if (!name || !path) {
            snprintf(err, el, "%s: hooks[%zu]: want hookName and path", where, i);
            return GS_EINVAL;
        }
        json_t *h = json_object_get(ed->hooks, name);
        if (!h) json_object_set_new(ed->hooks, name, h = json_array());
        json_t *copy = json_deep_copy(e);
        json_object_del(copy, "hookName");
        json_array_append_new(h, copy);
    }
    return 0;
}

/* Applies the CDI device "vendor/class=name" from the first spec that has it. */
static int apply_cdi(const struct gs_oci_input *in, const char *qname, struct edits *ed, char *err, size_t el)
{
    const char *eq = strchr(qname, '=');
    if (!eq || eq == qname || !eq[1]) {
        snprintf(err, el, "CDI device \"%s\": want vendor/class=name", qname);
        return GS_EINVAL;
    }
    char kind[200];
    snprintf(kind, sizeof kind, "%.*s", (int)(eq - qname), qname);
    for (size_t d = 0; d < in->n_cdi_dirs; d++) {
        DIR *dir = opendir(in->cdi_dirs[d]);
        if (!dir) continue;
        struct dirent *de;
        while ((de = readdir(dir))) {
            size_t n = strlen(de->d_name);
            if (de->d_name[0] == '.' || !(n > 5 && !strcmp(de->d_name + n - 5, ".json"))) continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", in->cdi_dirs[d], de->d_name);
            json_t *spec = load_spec(path, err, el);
            if (!spec) {
                closedir(dir);
                return GS_EINVAL;
            }
            const char *k = jstr(spec, "kind");
            size_t i;
            json_t *dev;
            int rc = 1;
            if (k && !strcmp(k, kind))
                json_array_foreach(json_object_get(spec, "devices"), i, dev) {
                    const char *nm = jstr(dev, "name");
                    if (!nm || strcmp(nm, eq + 1)) continue;
                    rc = apply_edits(json_object_get(spec, "containerEdits"), ed, path, err, el);
                    if (!rc) rc = apply_edits(json_object_get(dev, "containerEdits"), ed, path, err, el);
                    break;
                }
            json_decref(spec);
            if (rc <= 0) {
                closedir(dir);
                return rc;
            }
        }
        closedir(dir);
    }
    snprintf(err, el, "unknown CDI device \"%s\": no spec in the CDI directories defines it", qname);
    return GS_EINVAL;
}

/*--- Resources, user ---*/

static int quantity(const json_t *res, const char *which, const char *name, int64_t *milli, char *err, size_t el)
{
    const char *v = jstr(json_object_get(res, which), name);
    *milli = 0;
    if (!v) return 0;
    const char *why = NULL;
    if (gs_quantity_parse(v, milli, &why)) {
        snprintf(err, el, "resources.%s.%s \"%s\": %s", which, name, v, why ? why : "not a quantity");
        return GS_EINVAL;
    }
    return 0;
}

static int resources(const struct gs_oci_input *in, json_t *res_out, char *err, size_t el)
{
    const json_t *res = json_object_get(in->container, "resources");
    int64_t creq, clim, mlim;
    int rc = quantity(res, "requests", "cpu", &creq, err, el);
    if (!rc) rc = quantity(res, "limits", "cpu", &clim, err, el);
    if (!rc) rc = quantity(res, "limits", "memory", &mlim, err, el);
    if (rc) return rc;
    json_t *cpu = json_object();
    int64_t shares = (creq ? creq : clim) * 1024 / 1000;
    json_object_set_new(cpu, "shares", json_integer(shares < 2 ? 2 : shares));
    if (clim) {
        json_object_set_new(cpu, "quota", json_integer(clim * 100000 / 1000 < 1000 ? 1000 : clim * 100000 / 1000));
        json_object_set_new(cpu, "period", json_integer(100000));
    }
    json_object_set_new(res_out, "cpu", cpu);
    if (mlim) {
        int64_t bytes = mlim / 1000;
        json_object_set_new(res_out, "memory", json_pack("{s:I,s:I}", "limit", (json_int_t)bytes, "swap", (json_int_t)bytes));
    }
    if (in->default_pids_limit > 0)
        json_object_set_new(res_out, "pids", json_pack("{s:I}", "limit", (json_int_t)in->default_pids_limit));
    return 0;
}

static int user(const struct gs_oci_input *in, json_t **out, char *err, size_t el)
{
    const json_t *psc = json_object_get(json_object_get(in->pod, "spec"), "securityContext");
    const json_t *csc = json_object_get(in->container, "securityContext");
    json_int_t uid = -1, gid = -1;
    const json_t *v;
    if (json_is_integer(v = json_object_get(csc, "runAsUser")) || json_is_integer(v = json_object_get(psc, "runAsUser")))
        uid = json_integer_value(v);
    if (json_is_integer(v = json_object_get(csc, "runAsGroup")) ||
        json_is_integer(v = json_object_get(psc, "runAsGroup")))
        gid = json_integer_value(v);
    if (uid < 0 && in->image && in->image->user && *in->image->user) {
        char *end;
        long u = strtol(in->image->user, &end, 10);
        if (end == in->image->user || (*end && *end != ':')) {
            snprintf(err, el, "image config User \"%s\": only numeric uid[:gid] is supported (no /etc/passwd lookup)",
                     in->image->user);
            return GS_EINVAL;
        }
        uid = u;
        if (*end == ':' && gid < 0) gid = strtol(end + 1, NULL, 10);
    }
    *out = json_pack("{s:I,s:I}", "uid", uid < 0 ? 0 : uid, "gid", gid < 0 ? 0 : gid);
    return 0;
}

/*--- The spec ---*/

static json_t *strv_json(char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; v && v[i]; i++) json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *std_mounts(void)
{
    return json_pack(
        "[{s:s,s:s,s:s},{s:s,s:s,s:s,s:[s,s,s,s]},{s:s,s:s,s:s,s:[s,s,s,s,s,s]},"
        "{s:s,s:s,s:s,s:[s,s,s,s,s]},{s:s,s:s,s:s,s:[s,s,s]},{s:s,s:s,s:s,s:[s,s,s,s]},"
        "{s:s,s:s,s:s,s:[s,s,s,s]}]",
        "destination", "/proc", "type", "proc", "source", "proc", "destination", "/dev", "type", "tmpfs", "source",
        "tmpfs", "options", "nosuid", "strictatime", "mode=755", "size=65536k", "destination", "/dev/pts", "type",
        "devpts", "source", "devpts", "options", "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620",
        "gid=5", "destination", "/dev/shm", "type", "tmpfs", "source", "shm", "options", "nosuid", "noexec", "nodev",
        "mode=1777", "size=65536k", "destination", "/dev/mqueue", "type", "mqueue", "source", "mqueue", "options",
        "nosuid", "noexec", "nodev", "destination", "/sys", "type", "sysfs", "source", "sysfs", "options", "nosuid",
        "noexec", "nodev", "ro", "destination", "/tmp", "type", "tmpfs", "source", "tmpfs", "options", "nosuid",
        "nodev", "mode=1777", "size=65536k");
}

static json_t *args(const struct gs_oci_input *in)
{
    const json_t *cmd = json_object_get(in->container, "command"), *arg = json_object_get(in->container, "args");
    json_t *a = json_array();
    /* Kubernetes: command replaces ENTRYPOINT (and drops CMD); args replace CMD. */
    if (json_array_size(cmd)) json_array_extend(a, (json_t *)cmd);
    else if (in->image) {
        json_t *ep = strv_json(in->image->entrypoint);
        json_array_extend(a, ep);
        json_decref(ep);
    }
    if (json_array_size(arg)) json_array_extend(a, (json_t *)arg);
    else if (!json_array_size(cmd) && in->image) {
        json_t *c = strv_json(in->image->cmd);
        json_array_extend(a, c);
        json_decref(c);
    }
    return a;
}

int gs_oci_spec_build(const struct gs_oci_input *in, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!in->rootfs || in->rootfs[0] != '/') {
        snprintf(err, errlen, "rootfs \"%s\": want an absolute path", in->rootfs ? in->rootfs : "");
        return GS_EINVAL;
    }
    json_t *argv = args(in);
    if (!json_array_size(argv)) {
        json_decref(argv);
        snprintf(err, errlen, "container %s: no command: neither command/args nor the image's Entrypoint/Cmd",
                 jstr(in->container, "name") ? jstr(in->container, "name") : "?");
        return GS_EINVAL;
    }
    json_t *env = json_object();
    env_set(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    for (size_t i = 0; in->image && in->image->env && in->image->env[i]; i++) env_set(env, in->image->env[i]);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(in->container, "env"), i, e) {
        const char *k = jstr(e, "name"), *v = jstr(e, "value");
        if (k && *k) json_object_set_new(env, k, json_string(v ? v : ""));
    }
    for (size_t k = 0; in->extra_env && in->extra_env[k]; k++) env_set(env, in->extra_env[k]);
    struct devs devs = {json_array(), json_array()};
    allow_std(devs.allow);
    struct edits ed = {env, &devs, std_mounts(), json_object()};
    int rc = 0;
    for (int k = 0; in->alloc && !rc && k < in->alloc->n_dev; k++)
        rc = add_dev(&devs, in->alloc->dev[k].container_path, in->alloc->dev[k].host_path,
                     in->alloc->dev[k].permissions, err, errlen);
    for (size_t k = 0; !rc && k < in->n_cdi; k++) rc = apply_cdi(in, in->cdi_devices[k], &ed, err, errlen);
    json_t *res = json_object(), *usr = NULL;
    if (!rc) rc = resources(in, res, err, errlen);
    if (!rc) rc = user(in, &usr, err, errlen);
    if (!rc && in->scratch_dir)
        json_array_append_new(ed.mounts, json_pack("{s:s,s:s,s:s,s:[s,s]}", "destination", "/scratch", "type", "bind",
                                                   "source", in->scratch_dir, "options", "rbind", "rw"));
    if (rc) {
        json_decref(argv);
        json_decref(env);
        json_decref(devs.nodes);
        json_decref(devs.allow);
        json_decref(ed.mounts);
        json_decref(ed.hooks);
        json_decref(res);
        return rc;
    }
    json_object_set_new(res, "devices", devs.allow);
    const char *wd = jstr(in->container, "workingDir");
    if (!wd || !*wd) wd = in->image && in->image->workdir && *in->image->workdir ? in->image->workdir : "/";
    const char *host = in->hostname ? in->hostname : jstr(json_object_get(in->pod, "metadata"), "name");
    json_t *caps = json_pack("[s,s,s]", "CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE");
    json_t *spec = json_pack(
        "{s:s,s:{s:b,s:o,s:o,s:o,s:s,s:{s:o,s:o,s:o,s:o},s:b,s:[{s:s,s:i,s:i}]},s:{s:s,s:b},s:s,s:o,"
        "s:{s:o,s:o,s:[{s:s},{s:s},{s:s},{s:s}],s:[s,s,s,s,s,s,s,s,s,s],s:[s,s,s,s,s]}}",
        "ociVersion", "1.0.2-dev", "process", "terminal", 0, "user", usr, "args", argv, "env", env_array(env), "cwd",
        wd, "capabilities", "bounding", json_deep_copy(caps), "effective", json_deep_copy(caps), "permitted",
        json_deep_copy(caps), "ambient", json_deep_copy(caps), "noNewPrivileges", 1, "rlimits", "type",
        "RLIMIT_NOFILE", "hard", 1024, "soft", 1024, "root", "path", in->rootfs, "readonly", 1, "hostname",
        host ? host : "pod", "mounts", ed.mounts, "linux", "resources", res, "devices", devs.nodes, "namespaces",
        "type", "pid", "type", "ipc", "type", "uts", "type", "mount", "maskedPaths", "/proc/acpi", "/proc/asound",
        "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
        "/proc/sched_debug", "/sys/firmware", "/proc/scsi", "readonlyPaths", "/proc/bus", "/proc/fs", "/proc/irq",
        "/proc/sys", "/proc/sysrq-trigger");
    json_decref(caps);
    json_decref(env);
    if (spec && json_object_size(ed.hooks)) json_object_set_new(spec, "hooks", ed.hooks);
    else json_decref(ed.hooks);
    if (!spec) {
        snprintf(err, errlen, "out of memory building the spec");
        return GS_ENOMEM;
    }
    *out = spec;
    return 0;
}
