/*
 * labels.c - node labels in GPU Feature Discovery's names and formats, and the
 * inventory as JSON.
 *
 * Schedulers, nodeSelectors and dashboards written for NVIDIA's GFD match on
 * these exact keys and value formats ("NVIDIA-H100-80GB-HBM3", memory in MiB,
 * family "hopper"), so we reproduce them rather than invent our own:
 *  - one resource label group, nvidia.com/gpu.*, from the first full GPU and
 *    the count of full GPUs (GFD labels a node as if its GPUs were alike);
 *  - MIG strategies: none (MIG ignored), single (every GPU split the same way:
 *    nvidia.com/gpu.* describe the slice), mixed (nvidia.com/mig-<profile>.*);
 *  - driver and CUDA versions, both the deprecated and the current keys;
 *  - NFD's feature.node.kubernetes.io/pci-10de.present, which the GPU
 *    Operator's own node selector uses.
 */
#include "discovery/outputs.h"

#include "core/error.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- Value formats ---*/

void gs_gfd_product(const char *name, char *out, size_t len)
{
    /* Keep [A-Za-z0-9-_. ], then join the space-separated words with '-'. */
    size_t o = 0;
    bool gap = false;
    for (const char *p = name; *p && o + 1 < len; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == ' ') {
            gap = o > 0;
            continue;
        }
        if (!isalnum(c) && c != '-' && c != '_' && c != '.') continue;
        if (gap && o + 2 < len) out[o++] = '-';
        gap = false;
        out[o++] = (char)c;
    }
    out[o] = 0;
}

const char *gs_gpu_family(int major, int minor)
{
    switch (major) {
    case 1: return "tesla";
    case 2: return "fermi";
    case 3: return "kepler";
    case 5: return "maxwell";
    case 6: return "pascal";
    case 7: return minor < 5 ? "volta" : minor == 5 ? "turing" : "undefined";
    case 8: return minor == 9 ? "ada-lovelace" : minor <= 8 ? "ampere" : "undefined";
    case 9: return "hopper";
    case 10:
    case 12: return "blackwell";
    case 13: return "rubin";
    default: return "undefined";
    }
}

int gs_mig_strategy_parse(const char *s, enum gs_mig_strategy *out)
{
    if (!strcmp(s, "none")) *out = GS_MIG_NONE;
    else if (!strcmp(s, "single")) *out = GS_MIG_SINGLE;
    else if (!strcmp(s, "mixed")) *out = GS_MIG_MIXED;
    else return GS_EINVAL;
    return 0;
}

/*--- Label groups ---*/

struct lb {
    struct gs_labels *l;
    int rc;
};

static void put(struct lb *b, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(struct lb *b, const char *key, const char *fmt, ...)
{
    char val[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    if (!b->rc) b->rc = gs_labels_set(b->l, key, val);
}

/* Puts "<prefix>.<name>" = value. */
static void putp(struct lb *b, const char *prefix, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void putp(struct lb *b, const char *prefix, const char *name, const char *fmt, ...)
{
    char key[160], val[128];
    snprintf(key, sizeof key, "%s.%s", prefix, name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    if (!b->rc) b->rc = gs_labels_set(b->l, key, val);
}

static void versions(struct lb *b, const struct gs_inventory *inv)
{
    if (inv->driver_version[0]) {
        char major[16] = "", minor[16] = "", rev[16] = "";
        sscanf(inv->driver_version, "%15[^.].%15[^.].%15s", major, minor, rev);
        put(b, "nvidia.com/cuda.driver.major", "%s", major);
        put(b, "nvidia.com/cuda.driver.minor", "%s", minor);
        put(b, "nvidia.com/cuda.driver.rev", "%s", rev);
        put(b, "nvidia.com/cuda.driver-version.major", "%s", major);
        put(b, "nvidia.com/cuda.driver-version.minor", "%s", minor);
        put(b, "nvidia.com/cuda.driver-version.revision", "%s", rev);
        put(b, "nvidia.com/cuda.driver-version.full", "%s", inv->driver_version);
    }
    if (inv->cuda_version > 0) {
        int major = inv->cuda_version / 1000, minor = inv->cuda_version % 1000 / 10;
        put(b, "nvidia.com/cuda.runtime.major", "%d", major);
        put(b, "nvidia.com/cuda.runtime.minor", "%d", minor);
        put(b, "nvidia.com/cuda.runtime-version.major", "%d", major);
        put(b, "nvidia.com/cuda.runtime-version.minor", "%d", minor);
        put(b, "nvidia.com/cuda.runtime-version.full", "%d.%d", major, minor);
    }
}

/* The attributes shared by the single strategy's gpu.* and mixed's mig-<p>.*. */
static void mig_attrs(struct lb *b, const char *prefix, const struct gs_disc_mig *m)
{
    putp(b, prefix, "multiprocessors", "%u", m->multiprocessors);
    putp(b, prefix, "slices.gi", "%u", m->slices_gi);
    putp(b, prefix, "slices.ci", "%u", m->slices_ci);
    putp(b, prefix, "engines.copy", "%u", m->engines_copy);
    putp(b, prefix, "engines.decoder", "%u", m->engines_decoder);
    putp(b, prefix, "engines.encoder", "%u", m->engines_encoder);
    putp(b, prefix, "engines.jpeg", "%u", m->engines_jpeg);
    putp(b, prefix, "engines.ofa", "%u", m->engines_ofa);
}

static void full_gpus(struct lb *b, const struct gs_disc_gpu *g, int count)
{
    char product[128];
    gs_gfd_product(g->name, product, sizeof product);
    put(b, "nvidia.com/gpu.product", "%s", product);
    put(b, "nvidia.com/gpu.count", "%d", count);
    if (g->memory_mib) put(b, "nvidia.com/gpu.memory", "%llu", (unsigned long long)g->memory_mib);
    put(b, "nvidia.com/gpu.replicas", "%d", count ? 1 : 0);
    put(b, "nvidia.com/gpu.sharing-strategy", "none");
}

/* Single strategy: valid only if every GPU is MIG-enabled with one profile. */
static void single_mig(struct lb *b, const struct gs_inventory *inv)
{
    const struct gs_disc_mig *first = NULL;
    int count = 0;
    bool valid = true;
    for (int i = 0; i < inv->n_gpus; i++) {
        const struct gs_disc_gpu *g = &inv->gpus[i];
        if (!g->mig_enabled || !g->n_mig) valid = false;
        for (int k = 0; k < g->n_mig; k++, count++) {
            if (!first) first = &g->mig[k];
            else if (strcmp(first->profile, g->mig[k].profile)) valid = false;
        }
    }
    char model[128];
    gs_gfd_product(inv->gpus[0].name, model, sizeof model);
    if (!valid || !first) {
        put(b, "nvidia.com/gpu.product", "%s-MIG-INVALID", model);
        put(b, "nvidia.com/gpu.count", "0");
        put(b, "nvidia.com/gpu.replicas", "0");
        put(b, "nvidia.com/gpu.memory", "0");
        return;
    }
    put(b, "nvidia.com/gpu.product", "%s-MIG-%s", model, first->profile);
    put(b, "nvidia.com/gpu.count", "%d", count);
    put(b, "nvidia.com/gpu.replicas", "1");
    put(b, "nvidia.com/gpu.sharing-strategy", "none");
    put(b, "nvidia.com/gpu.memory", "%llu", (unsigned long long)first->memory_mib);
    mig_attrs(b, "nvidia.com/gpu", first);
}

static void mixed_mig(struct lb *b, const struct gs_inventory *inv)
{
    const struct gs_disc_gpu *full = NULL;
    int nfull = 0;
    for (int i = 0; i < inv->n_gpus; i++) {
        const struct gs_disc_gpu *g = &inv->gpus[i];
        if (!g->mig_enabled) {
            if (!full) full = g;
            nfull++;
            continue;
        }
        for (int k = 0; k < g->n_mig; k++) {
            const struct gs_disc_mig *m = &g->mig[k];
            char prefix[96], model[128];
            snprintf(prefix, sizeof prefix, "nvidia.com/mig-%s", m->profile);
            const char *have = gs_labels_get(b->l, (snprintf(model, sizeof model, "%s.count", prefix), model));
            int count = have ? atoi(have) + 1 : 1;
            gs_gfd_product(g->name, model, sizeof model);
            putp(b, prefix, "count", "%d", count);
            putp(b, prefix, "product", "%s-MIG-%s", model, m->profile);
            putp(b, prefix, "replicas", "1");
            putp(b, prefix, "sharing-strategy", "none");
            putp(b, prefix, "memory", "%llu", (unsigned long long)m->memory_mib);
            mig_attrs(b, prefix, m);
        }
    }
    full_gpus(b, full ? full : &inv->gpus[0], nfull);
}

static void node_facts(struct lb *b, const struct gs_inventory *inv, const struct gs_label_opts *o)
{
    const struct gs_disc_gpu *g0 = &inv->gpus[0];
    bool mig_capable = false, mig_enabled = false, graphics = g0->pci_graphics, mixed_mode = false;
    for (int i = 0; i < inv->n_gpus; i++) {
        mig_capable |= inv->gpus[i].mig_capable;
        mig_enabled |= inv->gpus[i].mig_enabled;
        mixed_mode |= inv->gpus[i].pci_graphics != graphics;
    }
    put(b, "nvidia.com/gpu.family", "%s", gs_gpu_family(g0->cc_major, g0->cc_minor));
    if (g0->cc_major > 0) {
        put(b, "nvidia.com/gpu.compute.major", "%d", g0->cc_major);
        put(b, "nvidia.com/gpu.compute.minor", "%d", g0->cc_minor);
    }
    put(b, "nvidia.com/mig.capable", "%s", mig_capable ? "true" : "false");
    if (o->mig != GS_MIG_NONE) put(b, "nvidia.com/mig.strategy", "%s", o->mig == GS_MIG_SINGLE ? "single" : "mixed");
    put(b, "nvidia.com/mps.capable", "false");
    char machine[80];
    gs_gfd_product(inv->machine[0] ? inv->machine : "unknown", machine, sizeof machine);
    put(b, "nvidia.com/gpu.machine", "%s", machine[0] ? machine : "unknown");
    put(b, "nvidia.com/gpu.mode", "%s", mixed_mode ? "unknown" : graphics ? "graphics" : "compute");
    if (o->timestamp > 0) put(b, "nvidia.com/gfd.timestamp", "%lld", (long long)o->timestamp);
    (void)mig_enabled;
}

int gs_gfd_labels(const struct gs_inventory *inv, const struct gs_label_opts *o, struct gs_labels *out)
{
    static const struct gs_label_opts defaults = {.nvidia_pci_devices = -1};
    if (!o) o = &defaults;
    struct lb b = {out, 0};
    int pci = o->nvidia_pci_devices > inv->n_gpus ? o->nvidia_pci_devices : inv->n_gpus;
    if (pci > 0) put(&b, "feature.node.kubernetes.io/pci-10de.present", "true");
    if (inv->n_gpus == 0) return b.rc;
    bool any_mig = false;
    for (int i = 0; i < inv->n_gpus; i++) any_mig |= inv->gpus[i].mig_enabled;
    if (o->mig == GS_MIG_SINGLE && any_mig) single_mig(&b, inv);
    else if (o->mig == GS_MIG_MIXED) mixed_mig(&b, inv);
    else full_gpus(&b, &inv->gpus[0], inv->n_gpus);
    versions(&b, inv);
    node_facts(&b, inv, o);
    return b.rc;
}

/*--- Inventory as JSON ---*/

static json_t *mig_json(const struct gs_disc_mig *m)
{
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "profile", m->profile, "uuid", m->uuid, "gpuInstanceId",
                     (json_int_t)m->gi_id, "computeInstanceId", (json_int_t)m->ci_id, "memoryMiB",
                     (json_int_t)m->memory_mib, "multiprocessors", (json_int_t)m->multiprocessors, "slices",
                     (json_int_t)m->slices_gi);
}

static json_t *gpu_json(const struct gs_inventory *inv, const struct gs_disc_gpu *g)
{
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
    json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:i, s:i, s:s, s:I, s:b, s:b}", "index", g->index, "uuid", g->uuid,
                          "name", g->name, "pciBusId", g->pci_bus_id, "minor", g->minor, "numaNode", g->numa_node,
                          "computeCapability", cc, "memoryMiB", (json_int_t)g->memory_mib, "migCapable",
                          g->mig_capable, "migEnabled", g->mig_enabled);
    json_t *mig = json_array(), *links = json_array();
    for (int k = 0; k < g->n_mig; k++) json_array_append_new(mig, mig_json(&g->mig[k]));
    for (int j = 0; j < inv->n_gpus; j++)
        if (g->nvlink[j]) json_array_append_new(links, json_pack("{s:i, s:i}", "peer", j, "links", g->nvlink[j]));
    if (!o || !mig || !links || json_object_set_new(o, "mig", mig) || json_object_set_new(o, "nvlink", links)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *gs_inventory_to_json(const struct gs_inventory *inv)
{
    char cuda[16] = "";
    if (inv->cuda_version > 0) snprintf(cuda, sizeof cuda, "%d.%d", inv->cuda_version / 1000, inv->cuda_version % 1000 / 10);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "backend", inv->backend, "hostname", inv->hostname,
                          "machine", inv->machine, "driverVersion", inv->driver_version, "cudaVersion", cuda,
                          "gpuCount", inv->n_gpus);
    json_t *numa = json_array(), *gpus = json_array();
    if (!o || !numa || !gpus) goto fail;
    for (int n = 0; n < inv->n_numa; n++) {
        json_t *dist = json_array();
        for (int m = 0; m < inv->n_numa; m++) json_array_append_new(dist, json_integer(inv->numa_distance[n][m]));
        if (json_array_append_new(numa, json_pack("{s:i, s:i, s:o}", "node", n, "cpus", inv->numa_cpus[n], "distances", dist)))
            goto fail;
    }
    for (int i = 0; i < inv->n_gpus; i++)
        if (json_array_append_new(gpus, gpu_json(inv, &inv->gpus[i]))) goto fail;
    /* json_object_set_new takes the value even when it fails. */
    int bad = json_object_set_new(o, "numa", numa);
    numa = NULL;
    bad |= json_object_set_new(o, "gpus", gpus);
    gpus = NULL;
    if (bad) goto fail;
    return o;
fail:
    json_decref(numa);
    json_decref(gpus);
    json_decref(o);
    return NULL;
}
