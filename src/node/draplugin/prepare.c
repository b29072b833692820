/*
 * prepare.c - the pure part of the DRA plugin (draplugin.h): the device
 * table from the node's ResourceSlices, which devices of a claim are ours,
 * the per-claim CDI spec, and the checkpoint of prepared claims. No I/O but
 * the checkpoint file.
 */
#include "node/draplugin/draplugin.h"

#include "core/error.h"
#include "node/cdi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- Device table ---*/

/* An attribute's string value: "name" or "<domain>/name", v1 ({"string": v})
 * or v1beta1 ({"basic": {"attributes": ...}}) layout. */
static const char *attr_str(const json_t *dev, const char *name)
{
    const json_t *attrs = json_object_get(dev, "attributes");
    if (!attrs) attrs = json_object_get(json_object_get(dev, "basic"), "attributes");
    char full[160];
    snprintf(full, sizeof full, GS_DRAP_DRIVER "/%s", name);
    const json_t *a = json_object_get(attrs, name);
    if (!a) a = json_object_get(attrs, full);
    const json_t *s = json_object_get(a, "string");
    return json_is_string(s) ? json_string_value(s) : NULL;
}

int gs_drap_table_from_slices(const json_t *slices, gs_drap_minor_fn minor_of, void *ud, struct gs_drap_table *t,
                              char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    size_t i, j;
    const json_t *sl, *dev;
    json_array_foreach(slices, i, sl) {
        const char *sname = json_string_value(json_object_get(json_object_get(sl, "metadata"), "name"));
        json_array_foreach(json_object_get(json_object_get(sl, "spec"), "devices"), j, dev) {
            const char *name = json_string_value(json_object_get(dev, "name"));
            const char *uuid = attr_str(dev, "uuid"), *type = attr_str(dev, "type");
            const char *parent = attr_str(dev, "parentUUID");
            if (!name || !*name || strlen(name) >= sizeof t->d[0].name) {
                snprintf(err, errlen, "ResourceSlice %s: spec.devices[%zu].name: missing or longer than %zu",
                         sname ? sname : "?", j, sizeof t->d[0].name - 1);
                return GS_EINVAL;
            }
            /* A partitionable GPU's MIG placement that does not exist yet: nothing to prepare. */
            if (!uuid && json_object_get(dev, "consumesCounters")) continue;
            if (!uuid || strlen(uuid) >= sizeof t->d[0].uuid) {
                snprintf(err, errlen, "ResourceSlice %s: device %s: attribute uuid: missing or too long",
                         sname ? sname : "?", name);
                return GS_EINVAL;
            }
            bool mig = type && !strcmp(type, "mig");
            if (mig && !parent) {
                snprintf(err, errlen, "ResourceSlice %s: device %s: a MIG device without attribute parentUUID",
                         sname ? sname : "?", name);
                return GS_EINVAL;
            }
            if (gs_drap_table_find(t, name)) {
                snprintf(err, errlen, "ResourceSlice %s: device %s: published twice", sname ? sname : "?", name);
                return GS_EINVAL;
            }
            if (t->n == GS_DRAP_MAX_DEVS) {
                snprintf(err, errlen, "more than %d devices on one node", GS_DRAP_MAX_DEVS);
                return GS_ERANGE;
            }
            struct gs_drap_dev *d = &t->d[t->n++];
            snprintf(d->name, sizeof d->name, "%s", name);
            snprintf(d->uuid, sizeof d->uuid, "%s", uuid);
            d->mig = mig;
            d->healthy = true;
            d->minor = minor_of ? minor_of(ud, mig ? parent : uuid) : -1;
        }
    }
    return 0;
}

const struct gs_drap_dev *gs_drap_table_find(const struct gs_drap_table *t, const char *name)
{
    for (int i = 0; name && i < t->n; i++)
        if (!strcmp(t->d[i].name, name)) return &t->d[i];
    return NULL;
}

/*--- Names ---*/

void gs_drap_cdi_path(const char *cdi_dir, const char *uid, char *buf, size_t len)
{
    char file[256];
    gs_cdi_file_name(GS_DRAP_CDI_KIND, file, sizeof file);
    file[strlen(file) - 5] = '\0'; /* drop ".json" */
    snprintf(buf, len, "%s/%s_%s.json", cdi_dir, file, uid);
}

void gs_drap_cdi_id(const char *uid, const char *device, char *buf, size_t len)
{
    snprintf(buf, len, GS_DRAP_CDI_KIND "=%s-%s", uid, device);
}

/*--- Choosing a claim's devices ---*/

/* The node a nodeSelector pins the allocation to (matchFields metadata.name
 * In [x], as the scheduler writes it), or NULL when it names none. */
static const char *selector_node(const json_t *sel)
{
    size_t i, j;
    const json_t *term, *f;
    json_array_foreach(json_object_get(sel, "nodeSelectorTerms"), i, term) {
        json_array_foreach(json_object_get(term, "matchFields"), j, f) {
            const char *key = json_string_value(json_object_get(f, "key"));
            const char *op = json_string_value(json_object_get(f, "operator"));
            const json_t *vals = json_object_get(f, "values");
            if (key && op && !strcmp(key, "metadata.name") && !strcmp(op, "In") && json_array_size(vals) == 1)
                return json_string_value(json_array_get(vals, 0));
        }
    }
    return NULL;
}

int gs_drap_choose(const struct gs_drap_state *st, const struct gs_drap_table *t, const json_t *claim, const char *ns,
                   const char *name, const char *uid, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    const json_t *md = json_object_get(claim, "metadata");
    const char *have = json_string_value(json_object_get(md, "uid"));
    if (!have || strcmp(have, uid)) {
        snprintf(err, errlen, "ResourceClaim %s/%s: uid is %s, the kubelet asked for %s", ns, name,
                 have ? have : "(none)", uid);
        return GS_ENOENT;
    }
    const json_t *alloc = json_object_get(json_object_get(claim, "status"), "allocation");
    if (!json_is_object(alloc)) {
        snprintf(err, errlen, "ResourceClaim %s/%s: not allocated (status.allocation is missing)", ns, name);
        return GS_EINVAL;
    }
    const char *pinned = selector_node(json_object_get(alloc, "nodeSelector"));
    if (pinned && strcmp(pinned, st->node)) {
        snprintf(err, errlen, "ResourceClaim %s/%s: allocated to node %s, this is node %s", ns, name, pinned,
                 st->node);
        return GS_EINVAL;
    }
    json_t *devs = json_array();
    size_t i;
    const json_t *r;
    int other_pool = 0;
    char other[128] = "";
    json_array_foreach(json_object_get(json_object_get(alloc, "devices"), "results"), i, r) {
        const char *drv = json_string_value(json_object_get(r, "driver"));
        const char *pool = json_string_value(json_object_get(r, "pool"));
        const char *dev = json_string_value(json_object_get(r, "device"));
        const char *req = json_string_value(json_object_get(r, "request"));
        if (!drv || strcmp(drv, st->driver)) continue;
        if (!pool || strcmp(pool, st->node)) {
            if (!other_pool++) snprintf(other, sizeof other, "%s", pool ? pool : "(none)");
            continue;
        }
        if (!gs_drap_table_find(t, dev)) {
            snprintf(err, errlen, "ResourceClaim %s/%s: status.allocation.devices.results[%zu].device: %s is not a "
                                  "device of driver %s on node %s",
                     ns, name, i, dev ? dev : "(none)", st->driver, st->node);
            json_decref(devs);
            return GS_EINVAL;
        }
        char id[512];
        gs_drap_cdi_id(uid, dev, id, sizeof id);
        /* "main/sub" of firstAvailable: the kubelet matches containers' claims by the main request. */
        char main_req[128] = "";
        if (req) {
            snprintf(main_req, sizeof main_req, "%s", req);
            char *slash = strchr(main_req, '/');
            if (slash) *slash = '\0';
        }
        json_array_append_new(devs, json_pack("{s:[s],s:s,s:s,s:[s]}", "requests", main_req, "pool", pool, "device",
                                              dev, "cdi", id));
    }
    if (!json_array_size(devs) && other_pool) {
        snprintf(err, errlen, "ResourceClaim %s/%s: its %s devices are in pool %s, this is node %s", ns, name,
                 st->driver, other, st->node);
        json_decref(devs);
        return GS_EINVAL;
    }
    *out = json_pack("{s:s,s:s,s:o}", "namespace", ns, "name", name, "devices", devs);
    return *out ? 0 : GS_ENOMEM;
}

/*--- CDI spec ---*/

static json_t *dev_node(const char *path)
{
    return json_pack("{s:s,s:s,s:s}", "path", path, "hostPath", path, "permissions", "rw");
}

json_t *gs_drap_cdi_spec(const struct gs_drap_table *t, const char *uid, const json_t *prepared)
{
    json_t *devices = json_array();
    size_t i;
    const json_t *d;
    json_array_foreach(json_object_get(prepared, "devices"), i, d) {
        const char *name = json_string_value(json_object_get(d, "device"));
        const struct gs_drap_dev *dev = gs_drap_table_find(t, name);
        if (!dev) continue;
        char cname[256], env[160], node[64];
        snprintf(cname, sizeof cname, "%s-%s", uid, name);
        snprintf(env, sizeof env, "NVIDIA_VISIBLE_DEVICES=%s", dev->uuid);
        json_t *nodes = json_array();
        if (dev->minor >= 0) {
            snprintf(node, sizeof node, "/dev/nvidia%d", dev->minor);
            json_array_append_new(nodes, dev_node(node));
        }
        json_array_append_new(devices, json_pack("{s:s,s:{s:[s],s:o}}", "name", cname, "containerEdits", "env", env,
                                                 "deviceNodes", nodes));
    }
    /* The control devices any CUDA process needs, once per spec. */
    json_t *common = json_pack("{s:[o,o,o]}", "deviceNodes", dev_node("/dev/nvidiactl"), dev_node("/dev/nvidia-uvm"),
                               dev_node("/dev/nvidia-uvm-tools"));
    return json_pack("{s:s,s:s,s:o,s:o}", "cdiVersion", GS_CDI_VERSION, "kind", GS_DRAP_CDI_KIND, "devices", devices,
                     "containerEdits", common);
}

/*--- Checkpoint ---*/

int gs_drap_checkpoint_save(const char *path, const struct gs_drap_state *st)
{
    json_t *doc = json_pack("{s:i,s:s,s:s,s:O}", "version", 1, "driver", st->driver, "node", st->node, "claims",
                            st->claims);
    char *text = doc ? json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    json_decref(doc);
    if (!text) return GS_ENOMEM;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *file = path;
    if (slash) *slash = '\0', file = slash + 1;
    int rc = gs_cdi_write_text(slash ? dir : ".", file, text, NULL, 0);
    free(text);
    return rc;
}

static bool strings(const json_t *a)
{
    size_t i;
    const json_t *v;
    if (!json_is_array(a)) return false;
    json_array_foreach(a, i, v) if (!json_is_string(v)) return false;
    return true;
}

int gs_drap_checkpoint_parse(const char *text, size_t len, struct gs_drap_state *st, char *err, size_t errlen)
{
    json_error_t je;
    json_t *doc = json_loadb(text, len, 0, &je);
    if (!doc) {
        snprintf(err, errlen, "line %d: %s", je.line, je.text);
        return GS_EPARSE;
    }
    int rc = GS_EINVAL;
    const json_t *v = json_object_get(doc, "version"), *claims = json_object_get(doc, "claims");
    const char *drv = json_string_value(json_object_get(doc, "driver"));
    const char *node = json_string_value(json_object_get(doc, "node"));
    const char *uid;
    json_t *c;
    if (!json_is_integer(v) || json_integer_value(v) != 1) {
        snprintf(err, errlen, "version: want 1");
        goto out;
    }
    if (!drv || strcmp(drv, st->driver) || !node || strcmp(node, st->node)) {
        snprintf(err, errlen, "driver/node: %s/%s, this plugin is %s/%s", drv ? drv : "?", node ? node : "?",
                 st->driver, st->node);
        goto out;
    }
    if (!json_is_object(claims)) {
        snprintf(err, errlen, "claims: want an object");
        goto out;
    }
    json_object_foreach((json_t *)claims, uid, c) {
        size_t i;
        const json_t *d;
        if (!*uid || !json_is_string(json_object_get(c, "namespace")) || !json_is_string(json_object_get(c, "name")) ||
            !json_is_array(json_object_get(c, "devices"))) {
            snprintf(err, errlen, "claims.%.64s: want namespace, name and devices", uid);
            goto out;
        }
        json_array_foreach(json_object_get(c, "devices"), i, d) {
            if (!json_is_string(json_object_get(d, "device")) || !json_is_string(json_object_get(d, "pool")) ||
                !strings(json_object_get(d, "cdi")) || !strings(json_object_get(d, "requests"))) {
                snprintf(err, errlen, "claims.%.64s.devices[%zu]: want pool, device, requests[] and cdi[]", uid, i);
                goto out;
            }
        }
    }
    json_decref(st->claims);
    st->claims = json_incref((json_t *)claims);
    rc = 0;
out:
    json_decref(doc);
    return rc;
}

int gs_drap_checkpoint_load(const char *path, struct gs_drap_state *st, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return GS_EIO;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n > cap) {
            cap = (len + n) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return GS_ENOMEM;
            }
            buf = nb;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    char why[256];
    int rc = gs_drap_checkpoint_parse(buf ? buf : "", len, st, why, sizeof why);
    if (rc) snprintf(err, errlen, "checkpoint %s: %s", path, why);
    free(buf);
    return rc;
}
