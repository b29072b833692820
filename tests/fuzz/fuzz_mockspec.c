/*
 * fuzz_mockspec.c - mock spec string parser fuzz target.
 *
 * Any byte string must parse or fail with a message; whatever parses must be
 * a sane inventory (GPU count in range, symmetric NVLink, NUMA nodes within
 * the node count, at most 7 MIG slices per GPU) whose faults name real GPUs.
 * Its ResourceSlices (discovery/resourceslice.h), plain and partitionable,
 * must pass the API's own validation, within the per-slice limits, with
 * resourceSliceCount equal to their number and device names unique.
 */
#include "core/object.h"
#include "discovery/discovery.h"
#include "discovery/resourceslice.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct gs_inventory *inv, const struct gs_fault *f, size_t nf)
{
    if (inv->n_gpus < 1 || inv->n_gpus > GS_DISC_MAX_GPUS || inv->n_numa < 1 || inv->n_numa > GS_DISC_MAX_NUMA) abort();
    for (int i = 0; i < inv->n_gpus; i++) {
        const struct gs_disc_gpu *g = &inv->gpus[i];
        unsigned slices = 0;
        if (g->numa_node < 0 || g->numa_node >= inv->n_numa || g->nvlink[i]) abort();
        for (int j = 0; j < inv->n_gpus; j++)
            if (g->nvlink[j] != inv->gpus[j].nvlink[i]) abort();
        for (int k = 0; k < g->n_mig; k++) slices += g->mig[k].slices_gi;
        if (slices > 7 || (g->n_mig && !g->mig_capable)) abort();
    }
    for (size_t k = 0; k < nf; k++) {
        if (f[k].gpu < -1 || f[k].gpu >= inv->n_gpus) abort();
        if (k && f[k].at_ns < f[k - 1].at_ns) abort();
    }
}

static void check_slices(const struct gs_inventory *inv, bool partitionable)
{
    struct gs_diags d = {0};
    json_t *sl = gs_resourceslices_build(inv, "fuzz-node", 1, partitionable, &d);
    if (!sl) abort(); /* a valid node name: only memory can fail */
    json_t *names = json_object();
    size_t i, j;
    json_t *s, *dev;
    json_array_foreach(sl, i, s) {
        json_t *spec = json_object_get(s, "spec");
        if (json_integer_value(json_object_get(json_object_get(spec, "pool"), "resourceSliceCount")) !=
            (json_int_t)json_array_size(sl))
            abort();
        if (json_array_size(json_object_get(spec, "devices")) > GS_DRA_SLICE_MAX_DEVICES) abort();
        json_array_foreach(json_object_get(spec, "devices"), j, dev) {
            const char *n = json_string_value(json_object_get(dev, "name"));
            if (!n || json_object_get(names, n)) abort();
            json_object_set_new(names, n, json_true());
        }
        struct gs_object *o = NULL;
        json_t *copy = json_deep_copy(s);
        if (gs_object_decode(copy, &o, &d) || d.n) abort();
        gs_object_free(o);
        json_decref(copy);
    }
    json_decref(names);
    json_decref(sl);
    gs_diags_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    struct gs_inventory *inv = malloc(sizeof *inv);
    if (!s || !inv) {
        free(s), free(inv);
        return 0;
    }
    memcpy(s, data, size);
    s[size] = 0;
    struct gs_fault *f = NULL;
    size_t nf = 0;
    char err[160] = "";
    int rc = gs_mock_parse(s, inv, &f, &nf, err, sizeof err);
    if (rc == 0) {
        check(inv, f, nf);
        check_slices(inv, false);
        check_slices(inv, true);
    }
    else if (rc == GS_EINVAL && !err[0]) abort();
    free(f);
    free(inv);
    free(s);
    return 0;
}
