/*
 * validators.c - the per-step checks of the GPU stack; see validators.h.
 *
 * Messages are written for the person reading `gpusched describe node`:
 * what was looked at, what was found, what was expected.
 */
#include "govern/validators.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(char *msg, size_t len, int err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *msg, size_t len, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return err;
}

/*--- Resources ---*/

static void add_count(json_t *o, const char *name, int n)
{
    json_object_set_new(o, name, json_integer(json_integer_value(json_object_get(o, name)) + n));
}

bool gs_gpu_has_layout(const struct gs_disc_gpu *g, const struct gs_mig_layout *l)
{
    if (!l->enabled || l->n == 0) return !g->mig_enabled || (l->enabled && g->n_mig == 0);
    if (!g->mig_enabled) return false;
    int seen = 0;
    for (int i = 0; i < l->n; i++) {
        int c = 0;
        for (int k = 0; k < g->n_mig; k++) c += !strcmp(g->mig[k].profile, l->v[i].profile);
        if (c != l->v[i].count) return false;
        seen += c;
    }
    return seen == g->n_mig;
}

/* Whether every MIG-enabled GPU has the same profiles as the first one. */
static bool uniform_mig(const struct gs_inventory *inv)
{
    const struct gs_disc_gpu *first = NULL;
    for (int i = 0; i < inv->n_gpus; i++) {
        const struct gs_disc_gpu *g = &inv->gpus[i];
        if (!g->mig_enabled) continue;
        if (!first) {
            first = g;
            continue;
        }
        struct gs_mig_layout l = {.enabled = true};
        for (int k = 0; k < first->n_mig && l.n < GS_MIG_LAYOUT_MAX; k++) {
            int j = 0;
            while (j < l.n && strcmp(l.v[j].profile, first->mig[k].profile)) j++;
            if (j == l.n) snprintf(l.v[l.n++].profile, sizeof l.v[0].profile, "%.23s", first->mig[k].profile);
            l.v[j].count++;
        }
        if (!gs_gpu_has_layout(g, &l)) return false;
    }
    return true;
}

json_t *gs_stack_resources(const struct gs_inventory *inv, enum gs_mig_strategy strategy)
{
    json_t *o = json_object();
    json_object_set_new(o, "nvidia.com/gpu", json_integer(0));
    bool uniform = strategy == GS_MIG_SINGLE && uniform_mig(inv);
    for (int i = 0; i < inv->n_gpus; i++) {
        const struct gs_disc_gpu *g = &inv->gpus[i];
        if (strategy == GS_MIG_NONE || !g->mig_enabled) {
            add_count(o, "nvidia.com/gpu", 1);
            continue;
        }
        for (int k = 0; k < g->n_mig; k++) {
            char name[96];
            snprintf(name, sizeof name, "nvidia.com/mig-%s", g->mig[k].profile);
            if (strategy == GS_MIG_MIXED) add_count(o, name, 1);
            else if (uniform) add_count(o, "nvidia.com/gpu", 1);
        }
    }
    return o;
}

/*--- driver ---*/

int gs_validate_driver(const struct gs_validate_in *in, char *msg, size_t len)
{
    if (!in->disc || !in->disc->ops) return fail(msg, len, GS_ENOENT, "no GPU discovery backend is open (NVML did not load)");
    struct gs_inventory *inv = malloc(sizeof *inv);
    if (!inv) return fail(msg, len, GS_ENOMEM, "out of memory");
    int err = gs_disc_inventory(in->disc, inv);
    if (err) {
        fail(msg, len, err, "%s backend cannot list GPUs: %s", in->disc->ops->name,
             in->disc->err[0] ? in->disc->err : gs_strerror(err));
    } else if (inv->n_gpus == 0) {
        err = fail(msg, len, GS_ENOENT, "%s backend initialised but lists no GPU", inv->backend);
    } else {
        snprintf(msg, len, "%s backend%s lists %d GPU%s (driver %s)", inv->backend,
                 strcmp(inv->backend, "mock") ? "" : " (mock GPUs, no NVIDIA driver involved)", inv->n_gpus,
                 inv->n_gpus == 1 ? "" : "s", inv->driver_version[0] ? inv->driver_version : "unknown");
    }
    free(inv);
    return err;
}

/*--- toolkit ---*/

static bool hook_found(const char *search, char *where, size_t len)
{
    static const char *const hooks[] = {"nvidia-container-runtime-hook", "nvidia-ctk"};
    const char *path = search ? search : getenv("PATH");
    if (!path) return false;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save))
        for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++) {
            snprintf(where, len, "%s/%s", d, hooks[i]);
            if (access(where, X_OK) == 0) return true;
        }
    return false;
}

/* Whether the file is a CDI spec of kind nvidia.com/gpu naming every GPU. */
static bool spec_covers(const char *path, const struct gs_inventory *inv, int *missing)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    bool ok = kind && !strcmp(kind, "nvidia.com/gpu");
    *missing = -1;
    for (int i = 0; ok && i < inv->n_gpus; i++) {
        bool named = false;
        size_t k;
        json_t *d;
        json_array_foreach(json_object_get(doc, "devices"), k, d) {
            const char *n = json_string_value(json_object_get(d, "name"));
            if (n && !strcmp(n, inv->gpus[i].uuid)) named = true;
        }
        if (!named) *missing = inv->gpus[i].index, ok = false;
    }
    json_decref(doc);
    return ok;
}

static int cdi_found(const char *dirs, const struct gs_inventory *inv, char *where, size_t len, char *why, size_t wlen)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dirs ? dirs : "/etc/cdi:/var/run/cdi");
    snprintf(why, wlen, "no CDI spec of kind nvidia.com/gpu in %s", dirs ? dirs : "/etc/cdi:/var/run/cdi");
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        DIR *dir = opendir(d);
        if (!dir) continue;
        struct dirent *e;
        while ((e = readdir(dir))) {
            size_t n = strlen(e->d_name);
            if (n < 6 || strcmp(e->d_name + n - 5, ".json")) continue;
            snprintf(where, len, "%s/%s", d, e->d_name);
            int missing;
            if (spec_covers(where, inv, &missing)) {
                closedir(dir);
                return 0;
            }
            if (missing >= 0) snprintf(why, wlen, "CDI spec %s does not name GPU %d", where, missing);
        }
        closedir(dir);
    }
    return GS_ENOENT;
}

int gs_validate_toolkit(const struct gs_validate_in *in, char *msg, size_t len)
{
    char where[1200], why[1400];
    if (hook_found(in->hook_path, where, sizeof where))
        return snprintf(msg, len, "container runtime hook %s", where), 0;
    struct gs_inventory *inv = malloc(sizeof *inv);
    if (!inv) return fail(msg, len, GS_ENOMEM, "out of memory");
    int err = in->disc && in->disc->ops ? gs_disc_inventory(in->disc, inv) : GS_ENOENT;
    if (!err) err = cdi_found(in->cdi_dirs, inv, where, sizeof where, why, sizeof why);
    else snprintf(why, sizeof why, "cannot list the node's GPUs to check the CDI spec");
    free(inv);
    if (err) return fail(msg, len, err, "no container runtime hook on the search path and %s", why);
    snprintf(msg, len, "CDI spec %s", where);
    return 0;
}

/*--- device-plugin ---*/

static int64_t allocatable(const json_t *node, const char *name)
{
    json_t *v = json_object_get(json_object_get(json_object_get(node, "status"), "allocatable"), name);
    if (!v) v = json_object_get(json_object_get(json_object_get(node, "status"), "capacity"), name);
    if (json_is_integer(v)) return json_integer_value(v);
    return json_is_string(v) ? atoll(json_string_value(v)) : -1;
}

int gs_validate_device_plugin(const struct gs_validate_in *in, char *msg, size_t len)
{
    if (!in->node) return fail(msg, len, GS_ENOENT, "the node is not registered with the server");
    struct gs_inventory *inv = malloc(sizeof *inv);
    if (!inv) return fail(msg, len, GS_ENOMEM, "out of memory");
    int err = in->disc && in->disc->ops ? gs_disc_inventory(in->disc, inv) : GS_ENOENT;
    if (err) {
        free(inv);
        return fail(msg, len, err, "cannot list the node's GPUs");
    }
    json_t *want = gs_stack_resources(inv, in->strategy);
    free(inv);
    const char *name;
    json_t *v;
    int w = 0;
    msg[0] = 0;
    json_object_foreach(want, name, v) {
        int64_t have = allocatable(in->node, name), exp = json_integer_value(v);
        if (have == exp || (have < 0 && exp == 0)) {
            if ((size_t)w < len) w += snprintf(msg + w, len - w, "%s%s=%lld", w ? ", " : "", name, (long long)exp);
            continue;
        }
        if (have < 0) err = fail(msg, len, GS_ENOENT, "resource %s is not registered (want %lld devices)", name, (long long)exp);
        else err = fail(msg, len, GS_ESTATE, "resource %s advertises %lld devices, want %lld (MIG strategy %s)", name,
                        (long long)have, (long long)exp, gs_mig_strategy_name(in->strategy));
        break;
    }
    json_decref(want);
    return err;
}

/*--- dra-plugin ---*/

/* Does a device of slices carry uuid as its uuid attribute? */
static bool offered(const json_t *slices, const char *uuid)
{
    size_t i, j;
    json_t *s, *d;
    json_array_foreach(slices, i, s) json_array_foreach(json_object_get(json_object_get(s, "spec"), "devices"), j, d) {
        const char *u = json_string_value(json_object_get(json_object_get(json_object_get(d, "attributes"), "uuid"),
                                                          "string"));
        if (u && !strcmp(u, uuid)) return true;
    }
    return false;
}

int gs_validate_dra_plugin(const struct gs_validate_in *in, char *msg, size_t len)
{
    if (!json_array_size(in->slices))
        return fail(msg, len, GS_ENOENT, "the server holds no ResourceSlices of driver gpu.nvidia.com for this node");
    struct gs_inventory *inv = malloc(sizeof *inv);
    if (!inv) return fail(msg, len, GS_ENOMEM, "out of memory");
    int err = in->disc && in->disc->ops ? gs_disc_inventory(in->disc, inv) : GS_ENOENT;
    if (err) fail(msg, len, err, "cannot list the node's GPUs");
    int n = 0;
    for (int i = 0; !err && i < inv->n_gpus; i++) {
        const struct gs_disc_gpu *g = &inv->gpus[i];
        if (g->mig_enabled && g->n_mig) {
            for (int k = 0; !err && k < g->n_mig; k++, n++)
                if (!offered(in->slices, g->mig[k].uuid))
                    err = fail(msg, len, GS_ESTATE, "MIG device %s of GPU %d is in no ResourceSlice", g->mig[k].uuid,
                               g->index);
        } else if (!offered(in->slices, g->uuid)) {
            err = fail(msg, len, GS_ESTATE, "GPU %d (%s) is in no ResourceSlice", g->index, g->uuid);
        } else {
            n++;
        }
    }
    if (!err) snprintf(msg, len, "%zu ResourceSlice%s offer all %d devices", json_array_size(in->slices),
                       json_array_size(in->slices) == 1 ? "" : "s", n);
    free(inv);
    return err;
}

/*--- mig ---*/

static void describe(const struct gs_disc_gpu *g, char *buf, size_t len)
{
    int w = snprintf(buf, len, "%s", g->mig_enabled ? "" : "MIG off");
    for (int k = 0; k < g->n_mig && (size_t)w < len; k++) w += snprintf(buf + w, len - w, "%s%s", k ? "+" : "", g->mig[k].profile);
    if (g->mig_enabled && !g->n_mig) snprintf(buf, len, "MIG on, no instances");
}

int gs_validate_mig(const struct gs_validate_in *in, char *msg, size_t len)
{
    if (!in->layout) return snprintf(msg, len, "MIG left as it is"), 0;
    struct gs_inventory *inv = malloc(sizeof *inv);
    if (!inv) return fail(msg, len, GS_ENOMEM, "out of memory");
    int err = in->disc && in->disc->ops ? gs_disc_inventory(in->disc, inv) : GS_ENOENT;
    if (err) fail(msg, len, err, "cannot list the node's GPUs");
    int capable = 0;
    char want[128], have[160];
    gs_mig_layout_text(in->layout, want, sizeof want);
    for (int i = 0; !err && i < inv->n_gpus; i++) {
        const struct gs_disc_gpu *g = &inv->gpus[i];
        if (!g->mig_capable) continue;
        capable++;
        if (gs_gpu_has_layout(g, in->layout)) continue;
        describe(g, have, sizeof have);
        err = fail(msg, len, GS_ESTATE, "GPU %d has %s, layout %s wants %s", g->index, have, in->layout->name,
                   want[0] ? want : "MIG off");
    }
    free(inv);
    if (!err) snprintf(msg, len, "%d MIG-capable GPU%s carry layout %s (%s)", capable, capable == 1 ? "" : "s",
                       in->layout->name, want[0] ? want : "MIG off");
    return err;
}

/*--- monitoring ---*/

/* Whether page has a DCGM device sample (not the Xid counter) labelled with uuid. */
static bool sampled(const char *page, const char *uuid)
{
    char needle[128];
    snprintf(needle, sizeof needle, "UUID=\"%s\"", uuid);
    for (const char *p = page; (p = strstr(p, needle)); p++) {
        const char *line = p;
        while (line > page && line[-1] != '\n') line--;
        if (!strncmp(line, "DCGM_FI_DEV_", 12) && strncmp(line, "DCGM_FI_DEV_XID_ERRORS", 22)) return true;
    }
    return false;
}

int gs_validate_monitoring(const struct gs_validate_in *in, char *msg, size_t len)
{
    if (!in->metrics) return fail(msg, len, GS_ENOENT, "the GPU exporter has not answered with a page yet");
    struct gs_inventory *inv = malloc(sizeof *inv);
    if (!inv) return fail(msg, len, GS_ENOMEM, "out of memory");
    int err = in->disc && in->disc->ops ? gs_disc_inventory(in->disc, inv) : GS_ENOENT;
    if (err) fail(msg, len, err, "cannot list the node's GPUs");
    for (int i = 0; !err && i < inv->n_gpus; i++)
        if (!sampled(in->metrics, inv->gpus[i].uuid))
            err = fail(msg, len, GS_ESTATE, "the GPU exporter has no samples for GPU %d (%s): it does not answer",
                       inv->gpus[i].index, inv->gpus[i].uuid);
    if (!err) snprintf(msg, len, "the GPU exporter samples all %d GPUs", inv->n_gpus);
    free(inv);
    return err;
}

int gs_validate_step(enum gs_step s, const struct gs_validate_in *in, char *msg, size_t len)
{
    switch (s) {
    case GS_STEP_DRIVER: return gs_validate_driver(in, msg, len);
    case GS_STEP_TOOLKIT: return gs_validate_toolkit(in, msg, len);
    case GS_STEP_DEVICE_PLUGIN: return gs_validate_device_plugin(in, msg, len);
    case GS_STEP_DRA_PLUGIN: return gs_validate_dra_plugin(in, msg, len);
    case GS_STEP_MIG: return gs_validate_mig(in, msg, len);
    case GS_STEP_MONITORING: return gs_validate_monitoring(in, msg, len);
    default: return fail(msg, len, GS_EINVAL, "%s has no validator", gs_step_name(s));
    }
}
