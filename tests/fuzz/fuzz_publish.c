/*
 * fuzz_publish.c - the Node and NodeResourceTopology a server answers, as
 * `gpusched node-publisher` reads them (discovery/publish.h).
 *
 * The bytes are JSON text taken as the server's current Node and as its
 * current NRT. Whatever they hold, building the patch and the NRT must not
 * crash, leak or trip a sanitizer, and the results must keep their
 * contract: a patch is {"metadata": {labels?, annotations?}} whose label
 * values are strings or null and whose annotations are strings; applying it
 * and building again yields no patch (the publisher converges in one write);
 * an NRT to write carries the node's name and, over an existing object, that
 * object's resourceVersion when it had one. The same bytes as the node's
 * ResourceSlices the server holds (discovery/resourceslice.h): the slices
 * to publish are above every generation seen when they changed, and once
 * written, the next look finds nothing to write.
 */
#include "discovery/discovery.h"
#include "discovery/outputs.h"
#include "discovery/publish.h"
#include "discovery/resourceslice.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct gs_inventory inv;
static bool ready;

static void check_patch(const json_t *patch)
{
    const json_t *md = json_object_get(patch, "metadata"), *v;
    if (!json_is_object(md) || json_object_size(patch) != 1) abort();
    const char *k;
    json_object_foreach(json_object_get(md, "labels"), k, v)
        if (!json_is_string(v) && !json_is_null(v)) abort();
    json_object_foreach(json_object_get(md, "annotations"), k, v)
        if (!json_is_string(v)) abort();
}

/* node + patch, as a merge patch applies to labels and annotations. */
static void apply(json_t *node, const json_t *patch)
{
    json_t *md = json_object_get(node, "metadata");
    if (!json_is_object(md)) json_object_set_new(node, "metadata", md = json_object());
    const char *maps[] = {"labels", "annotations"}, *k;
    json_t *v;
    for (int m = 0; m < 2; m++) {
        json_t *src = json_object_get(json_object_get(patch, "metadata"), maps[m]), *dst = json_object_get(md, maps[m]);
        if (!src) continue;
        if (!json_is_object(dst)) json_object_set_new(md, maps[m], dst = json_object());
        json_object_foreach(src, k, v) {
            if (json_is_null(v)) json_object_del(dst, k);
            else json_object_set(dst, k, v);
        }
    }
}

static void check_slices(const json_t *have)
{
    json_t *want = NULL, *again = NULL;
    bool changed = false, changed2 = true;
    struct gs_diags d = {0};
    int64_t max = 0, gen = -1;
    size_t i;
    json_t *x;
    json_array_foreach(json_is_array(have) ? have : NULL, i, x) {
        int64_t g = json_integer_value(json_object_get(json_object_get(json_object_get(x, "spec"), "pool"),
                                                       "generation"));
        if (g > max) max = g;
    }
    int rc = gs_resourceslices_next(json_is_array(have) ? have : NULL, &inv, "n1", false, NULL, &want, &changed, &d);
    if (rc == GS_ERANGE && max == INT64_MAX && d.n) {
        gs_diags_free(&d);
        return;
    }
    if (rc) abort();
    json_array_foreach(want, i, x) {
        gen = json_integer_value(json_object_get(json_object_get(json_object_get(x, "spec"), "pool"), "generation"));
        if (gen != (changed ? max + 1 : max)) abort();
    }
    if (gs_resourceslices_next(want, &inv, "n1", false, NULL, &again, &changed2, &d) || changed2)
        abort(); /* what was written is found unchanged */
    json_decref(want);
    json_decref(again);
    gs_diags_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ready) {
        char err[160];
        if (gs_mock_parse("2xA100-40GB,mig=1g.5gb*7,numa=2", &inv, NULL, NULL, err, sizeof err)) abort();
        ready = true;
    }
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!doc) return 0;
    struct gs_label_opts lo = {.mig = size & 1 ? GS_MIG_SINGLE : GS_MIG_NONE, .nvidia_pci_devices = -1};
    uint64_t unhealthy = size & 2 ? 1 : 0;
    json_t *patch = NULL, *nrt = NULL;
    if (gs_publish_node_patch(doc, &inv, unhealthy, &lo, &patch)) abort();
    if (patch && json_is_object(doc)) {
        check_patch(patch);
        json_t *node = json_deep_copy(doc), *again = NULL;
        apply(node, patch);
        if (gs_publish_node_patch(node, &inv, unhealthy, &lo, &again)) abort();
        if (again) abort(); /* one write converges, whatever the node held */
        json_decref(again);
        json_decref(node);
    } else if (patch) {
        check_patch(patch);
    }
    if (gs_publish_nrt(doc, "n1", &inv, unhealthy, NULL, &nrt)) abort();
    if (nrt) {
        const json_t *md = json_object_get(nrt, "metadata");
        if (strcmp(json_string_value(json_object_get(md, "name")), "n1")) abort();
        const json_t *rv = json_object_get(json_object_get(doc, "metadata"), "resourceVersion");
        if (rv && !json_equal((json_t *)rv, json_object_get(md, "resourceVersion"))) abort();
    }
    json_decref(nrt);
    json_decref(patch);
    check_slices(doc);
    json_decref(doc);
    return 0;
}
