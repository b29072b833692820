/*
 * allocate.c - Allocate answers (allocate.h).
 *
 * Validation happens first and covers every ID, so a refused request leaves
 * no half-built answer behind and the message names the first bad ID.
 */
#include "node/allocate.h"

#include "core/error.h"
#include "node/migcaps.h"

#include <stdio.h>
#include <string.h>

int gs_dls_parse(const char *s, unsigned *bits)
{
    *bits = 0;
    if (!s || !*s) return GS_EINVAL;
    const char *p = s;
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len == 6 && !strncmp(p, "envvar", 6)) *bits |= GS_DLS_ENVVAR;
        else if (len == 15 && !strncmp(p, "cdi-annotations", 15)) *bits |= GS_DLS_CDI_ANNOTATIONS;
        else if (len == 7 && !strncmp(p, "cdi-cri", 7)) *bits |= GS_DLS_CDI_CRI;
        else return GS_EINVAL;
        p += len;
        if (*p == ',') p++;
    }
    return *bits ? 0 : GS_EINVAL;
}

/*--- Validation ---*/

static int check_ids(const struct gs_node_gpus *g, const char *const *ids, size_t n, struct gs_alloc_resp *out,
                     char *err, size_t errlen)
{
    if (n == 0) {
        snprintf(err, errlen, "no device IDs requested");
        return GS_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        int slot = gs_node_gpus_find(g, ids[i], NULL);
        if (slot < 0) {
            snprintf(err, errlen, "unknown device ID \"%s\"", ids[i]);
            return GS_ENOENT;
        }
        if (!g->gpu[slot].healthy) {
            snprintf(err, errlen, "device %s is unhealthy", ids[i]);
            return GS_ESTATE;
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(ids[i], ids[j])) {
                snprintf(err, errlen, "device ID \"%s\" requested twice", ids[i]);
                return GS_EINVAL;
            }
        bool seen = false;
        for (int k = 0; k < out->n_gpus; k++) seen = seen || out->gpus[k] == slot;
        if (!seen) out->gpus[out->n_gpus++] = slot;
    }
    return 0;
}

/*--- Pieces of the answer ---*/

static void add_dev(struct gs_alloc_resp *out, const char *path)
{
    struct gs_alloc_devspec *d = &out->dev[out->n_dev++];
    snprintf(d->container_path, sizeof d->container_path, "%s", path);
    snprintf(d->host_path, sizeof d->host_path, "%s", path);
    snprintf(d->permissions, sizeof d->permissions, "rw");
}

static void envvar(const struct gs_node_gpus *g, struct gs_alloc_resp *out)
{
    struct gs_alloc_kv *e = &out->env[out->n_env++];
    snprintf(e->key, sizeof e->key, "NVIDIA_VISIBLE_DEVICES");
    size_t off = 0;
    for (int k = 0; k < out->n_gpus; k++)
        off += (size_t)snprintf(e->value + off, sizeof e->value - off, "%s%s", k ? "," : "",
                                g->gpu[out->gpus[k]].uuid);
    add_dev(out, "/dev/nvidiactl");
    add_dev(out, "/dev/nvidia-uvm");
    add_dev(out, "/dev/nvidia-uvm-tools");
    for (int k = 0; k < out->n_gpus; k++) {
        char path[64];
        bool seen = false; /* MIG devices of one GPU share its device node */
        for (int j = 0; j < k; j++) seen |= g->gpu[out->gpus[j]].minor == g->gpu[out->gpus[k]].minor;
        if (seen) continue;
        snprintf(path, sizeof path, "/dev/nvidia%d", g->gpu[out->gpus[k]].minor);
        add_dev(out, path);
    }
}

/* The capability nodes of every MIG device asked for, after their parents'
 * nodes. Checked before anything is added, so a refusal leaves no specs. */
static int mig_caps(const struct gs_node_gpus *g, const struct gs_alloc_opts *o, struct gs_alloc_resp *out,
                    char *err, size_t errlen)
{
    struct gs_migcaps c;
    char why[512];
    int rc = 0;
    if (o && o->mock_caps) gs_migcaps_mock(&c);
    else if ((rc = gs_migcaps_load(o ? o->proc_root : NULL, &c, why, sizeof why))) {
        snprintf(err, errlen, "MIG capability minors: %s", why);
        return GS_EUNSUPPORTED;
    }
    int minors[GS_NODE_MAX_GPUS][2];
    for (int k = 0; !rc && k < out->n_gpus; k++) {
        const struct gs_node_gpu *d = &g->gpu[out->gpus[k]];
        minors[k][0] = gs_migcaps_minor(&c, d->minor, d->gi, -1);
        minors[k][1] = gs_migcaps_minor(&c, d->minor, d->gi, d->ci);
        if (minors[k][0] < 0 || minors[k][1] < 0) {
            char line[96];
            if (minors[k][0] < 0) snprintf(line, sizeof line, "gpu%d/gi%d/access", d->minor, d->gi);
            else snprintf(line, sizeof line, "gpu%d/gi%d/ci%d/access", d->minor, d->gi, d->ci);
            snprintf(err, errlen, "MIG device %s: %s/%s has no line \"%s\"", d->uuid,
                     o && o->proc_root ? o->proc_root : "/proc", GS_MIGCAPS_FILE, line);
            rc = GS_EUNSUPPORTED;
        }
    }
    gs_migcaps_free(&c);
    for (int k = 0; !rc && k < out->n_gpus; k++)
        for (int j = 0; j < 2; j++) {
            char path[64];
            snprintf(path, sizeof path, GS_MIGCAPS_DEV_DIR "/nvidia-cap%d", minors[k][j]);
            add_dev(out, path);
        }
    return rc;
}

static void cdi_names(const struct gs_node_gpus *g, const char *kind, struct gs_alloc_resp *out)
{
    out->n_cdi = out->n_gpus;
    for (int k = 0; k < out->n_gpus; k++)
        snprintf(out->cdi[k], sizeof out->cdi[k], "%s=%s", kind, g->gpu[out->gpus[k]].uuid);
}

/* CDI's annotation key: "cdi.k8s.io/" + plugin + "_" + device ID, where the
 * name part must be at most 63 characters of [A-Za-z0-9_.-]. */
static void cdi_annotation(const char *plugin, const char *id, struct gs_alloc_resp *out)
{
    struct gs_alloc_kv *a = &out->ann[out->n_ann++];
    char name[64];
    int len = snprintf(name, sizeof name, "%s_%s", plugin, id);
    if (len > 63) len = 63;
    for (int i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '.' || c == '-';
        if (!ok) name[i] = '_';
    }
    name[len] = '\0';
    snprintf(a->key, sizeof a->key, "cdi.k8s.io/%s", name);
    size_t off = 0;
    for (int k = 0; k < out->n_cdi; k++)
        off += (size_t)snprintf(a->value + off, sizeof a->value - off, "%s%s", k ? "," : "", out->cdi[k]);
}

int gs_alloc_container(const struct gs_node_gpus *g, const struct gs_alloc_opts *o, const char *const *ids,
                       size_t n, struct gs_alloc_resp *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int rc = check_ids(g, ids, n, out, err, errlen);
    if (rc) return rc;
    unsigned s = o && o->strategy ? o->strategy : GS_DLS_ENVVAR;
    const char *kind = o && o->cdi_kind ? o->cdi_kind : "nvidia.com/gpu";
    const char *plugin = o && o->plugin ? o->plugin : "gpusched";
    if (s & GS_DLS_ENVVAR) {
        envvar(g, out);
        if (g->mig && (rc = mig_caps(g, o, out, err, errlen))) {
            memset(out, 0, sizeof *out);
            return rc;
        }
    }
    if (s & (GS_DLS_CDI_ANNOTATIONS | GS_DLS_CDI_CRI)) cdi_names(g, kind, out);
    if (s & GS_DLS_CDI_ANNOTATIONS) cdi_annotation(plugin, ids[0], out);
    if (!(s & GS_DLS_CDI_CRI)) out->n_cdi = 0;
    return 0;
}
