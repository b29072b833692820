/*
 * publish.c - the Node metadata patch and the NodeResourceTopology a node
 * publisher writes; see publish.h.
 *
 * Ownership of labels is recorded on the Node itself (the
 * gpusched.io/published-labels annotation) rather than in a local file: a
 * DaemonSet pod restarts with an empty disk, and the Node is the one place
 * every run of the publisher, on whatever pod, reads anyway. NFD keeps its
 * own labels the same way (nfd.node.kubernetes.io/feature-labels).
 *
 * The gpus annotation is compact JSON with the agent's key order, so an
 * unchanged inventory gives byte-identical text and the comparison with
 * the server's copy is a string compare.
 */
#include "discovery/publish.h"

#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- Devices ---*/

static json_t *mig_of(const struct gs_disc_gpu *g)
{
    json_t *inst = json_array();
    for (int k = 0; inst && k < g->n_mig; k++)
        json_array_append_new(inst, json_pack("{s:s,s:s}", "profile", g->mig[k].profile, "uuid", g->mig[k].uuid));
    return json_pack("{s:b,s:o}", "enabled", 1, "instances", inst);
}

json_t *gs_inventory_devices(const struct gs_inventory *inv, uint64_t unhealthy)
{
    json_t *devs = json_array();
    char product[128];
    for (int i = 0; devs && i < inv->n_gpus; i++) {
        const struct gs_disc_gpu *g = &inv->gpus[i];
        gs_gfd_product(g->name, product, sizeof product);
        json_t *peers = json_array();
        for (int j = 0; peers && j < inv->n_gpus; j++) {
            int idx = inv->gpus[j].index;
            if (j != i && idx >= 0 && idx < GS_DISC_MAX_GPUS && g->nvlink[idx]) json_array_append_new(peers, json_integer(idx));
        }
        json_t *d = json_pack("{s:i,s:s,s:s,s:I,s:i,s:o,s:s}", "index", g->index, "uuid", g->uuid, "model", product,
                              "memoryMiB", (json_int_t)g->memory_mib, "numaNode", g->numa_node, "nvlinkPeers", peers,
                              "health", unhealthy >> i & 1 ? "Unhealthy" : "Healthy");
        if (d && g->mig_enabled) json_object_set_new(d, "mig", mig_of(g));
        if (!d || json_array_append_new(devs, d)) {
            json_decref(devs);
            return NULL;
        }
    }
    return devs;
}

/*--- Node metadata ---*/

static const char *str_at(const json_t *obj, const char *a, const char *b, const char *c)
{
    const json_t *v = json_object_get(json_object_get(json_object_get(obj, a), b), c);
    return json_string_value(v);
}

/* Adds to labels a null for each key of `owned` (the node's previous list) that is not in l. */
static int drop_stale(json_t *labels, const char *owned, const json_t *cur_labels, const struct gs_labels *l,
                      bool *changed)
{
    for (const char *p = owned; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char key[320];
        if (len && len < sizeof key) {
            memcpy(key, p, len);
            key[len] = 0;
            if (!gs_labels_get(l, key) && json_object_get(cur_labels, key)) {
                if (json_object_set_new(labels, key, json_null())) return GS_ENOMEM;
                *changed = true;
            }
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}

static char *key_list(const struct gs_labels *l)
{
    size_t len = 1;
    for (size_t i = 0; i < l->n; i++) len += strlen(l->v[i].key) + 1;
    char *s = malloc(len), *w = s;
    if (!s) return NULL;
    *w = 0;
    for (size_t i = 0; i < l->n; i++) w += sprintf(w, "%s%s", i ? "," : "", l->v[i].key);
    return s;
}

int gs_publish_node_patch(const json_t *node, const struct gs_inventory *inv, uint64_t unhealthy,
                          const struct gs_label_opts *lo, json_t **patch)
{
    *patch = NULL;
    struct gs_labels l = {0};
    struct gs_label_opts opts = *lo;
    opts.timestamp = 0; /* a label that changes every run would rewrite the Node every period */
    if (gs_gfd_labels(inv, &opts, &l)) return GS_ENOMEM;
    json_t *devs = gs_inventory_devices(inv, unhealthy);
    char *devs_text = devs ? json_dumps(devs, JSON_COMPACT) : NULL, *keys = key_list(&l);
    json_decref(devs);
    json_t *labels = json_object(), *ann = json_object();
    int err = devs_text && keys && labels && ann ? 0 : GS_ENOMEM;
    const json_t *cur_labels = json_object_get(json_object_get(node, "metadata"), "labels");
    bool changed = false;
    for (size_t i = 0; !err && i < l.n; i++) {
        const char *have = json_string_value(json_object_get(cur_labels, l.v[i].key));
        if (have && !strcmp(have, l.v[i].value)) continue;
        changed = true;
        if (json_object_set_new(labels, l.v[i].key, json_string(l.v[i].value))) err = GS_ENOMEM;
    }
    const char *owned = str_at(node, "metadata", "annotations", GS_ANN_PUBLISHED_LABELS);
    if (!err) err = drop_stale(labels, owned, cur_labels, &l, &changed);
    const char *have_devs = str_at(node, "metadata", "annotations", GS_ANN_GPUS);
    if (!err && (!have_devs || strcmp(have_devs, devs_text))) {
        changed = true;
        if (json_object_set_new(ann, GS_ANN_GPUS, json_string(devs_text))) err = GS_ENOMEM;
    }
    if (!err && (!owned || strcmp(owned, keys))) {
        changed = true;
        if (json_object_set_new(ann, GS_ANN_PUBLISHED_LABELS, json_string(keys))) err = GS_ENOMEM;
    }
    if (!err && changed) {
        json_t *md = json_object();
        if (!md) err = GS_ENOMEM;
        if (md && json_object_size(labels)) json_object_set(md, "labels", labels);
        if (md && json_object_size(ann)) json_object_set(md, "annotations", ann);
        if (md && !(*patch = json_pack("{s:o}", "metadata", md))) err = GS_ENOMEM;
    }
    json_decref(labels);
    json_decref(ann);
    free(devs_text);
    free(keys);
    gs_labels_free(&l);
    return err;
}

/*--- NodeResourceTopology ---*/

static bool same_nrt(const json_t *a, const json_t *b)
{
    static const char *const fields[] = {"zones", "attributes", "topologyPolicies"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const json_t *x = json_object_get(a, fields[i]), *y = json_object_get(b, fields[i]);
        if (!(x == y || (x && y && json_equal((json_t *)x, (json_t *)y)))) return false;
    }
    return true;
}

int gs_publish_nrt(const json_t *cur, const char *node_name, const struct gs_inventory *inv, uint64_t unhealthy,
                   const struct gs_nrt_opts *o, json_t **obj)
{
    *obj = NULL;
    struct gs_nrt_opts no = {0};
    if (o) no = *o;
    no.allocated = 0; /* what pods hold is the scheduler's to count: the publisher sees no pods */
    no.unhealthy = unhealthy; /* nrt.c reads both masks by position in the inventory */
    json_t *nrt = gs_nrt_build(inv, &no);
    json_t *md = json_object_get(nrt, "metadata");
    if (!nrt || !md || json_object_set_new(md, "name", json_string(node_name))) {
        json_decref(nrt);
        return GS_ENOMEM;
    }
    if (cur && same_nrt(cur, nrt)) {
        json_decref(nrt);
        return 0;
    }
    const json_t *rv = json_object_get(json_object_get(cur, "metadata"), "resourceVersion");
    if (rv && json_object_set(md, "resourceVersion", (json_t *)rv)) {
        json_decref(nrt);
        return GS_ENOMEM;
    }
    *obj = nrt;
    return 0;
}
