/*
 * resourceslice.c - a node's GPUs as DRA ResourceSlices; see resourceslice.h.
 */
#include "discovery/resourceslice.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*--- MIG geometry of 7-slice GPUs (A100, H100, H200, B200) ---*/

/* Per compute-slice count g: NVIDIA's profile id, the memory slices a
 * placement occupies, and where placements may start. */
static const struct mig_shape {
    unsigned g;
    int profile_id;
    int mem_slices;
    int starts[8];
    int nstarts;
} shapes[] = {
    {1, 19, 1, {0, 1, 2, 3, 4, 5, 6}, 7},
    {2, 14, 2, {0, 2, 4}, 3},
    {3, 9, 4, {0, 4}, 2},
    {4, 5, 4, {0}, 1},
    {7, 0, 8, {0}, 1},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])
#define MEM_SLICES 8

static const struct mig_shape *shape_of(unsigned g)
{
    for (size_t i = 0; i < NSHAPES; i++)
        if (shapes[i].g == g) return &shapes[i];
    return NULL;
}

/* Chooses a start for each MIG instance of g so none overlap (backtracking
 * over at most 8 instances); start[i] -1 where no placement fits (a layout the
 * table does not know). */
static bool place(const struct gs_disc_gpu *g, int i, unsigned used, int *start)
{
    if (i == g->n_mig) return true;
    const struct mig_shape *s = shape_of(g->mig[i].slices_gi);
    if (!s) {
        start[i] = -1;
        return place(g, i + 1, used, start);
    }
    for (int k = 0; k < s->nstarts; k++) {
        unsigned mask = ((1u << s->mem_slices) - 1) << s->starts[k];
        if (used & mask) continue;
        start[i] = s->starts[k];
        if (place(g, i + 1, used | mask, start)) return true;
    }
    return false;
}

static void mig_starts(const struct gs_disc_gpu *g, int *start)
{
    if (!place(g, 0, 0, start)) /* unknown geometry: in order, no overlap claimed */
        for (int i = 0; i < g->n_mig; i++) start[i] = -1;
}

/* SMs per compute slice: from an existing instance when there is one, else
 * the usual figure for the architecture (Hopper 16, Ampere 14). */
static unsigned sms_per_slice(const struct gs_disc_gpu *g)
{
    for (int i = 0; i < g->n_mig; i++)
        if (g->mig[i].slices_gi && g->mig[i].multiprocessors) return g->mig[i].multiprocessors / g->mig[i].slices_gi;
    return g->cc_major >= 9 ? 16 : 14;
}

/*--- Names and attribute values ---*/

void gs_dra_gpu_device_name(int minor, char *buf, size_t len)
{
    snprintf(buf, len, "gpu-%d", minor);
}

void gs_dra_mig_device_name(int minor, const char *profile, int profile_id, int start, char *buf, size_t len)
{
    char p[32];
    size_t n = 0;
    for (const char *c = profile; *c && n < sizeof p - 1; c++)
        if (isalnum((unsigned char)*c)) p[n++] = (char)tolower((unsigned char)*c);
    p[n] = 0;
    snprintf(buf, len, "gpu-%d-mig-%s-%d-%d", minor, p, profile_id, start < 0 ? 0 : start);
}

static int minor_of(const struct gs_disc_gpu *g)
{
    return g->minor >= 0 ? g->minor : g->index;
}

/* "535.104.05" -> "535.104.5", "550.54" -> "550.54.0": semantic versions
 * have three parts and no leading zeros. "" when s is not numeric. */
static void semver_of(const char *s, char *out, size_t len)
{
    unsigned long v[3] = {0, 0, 0};
    int n = 0;
    const char *p = s;
    while (n < 3 && isdigit((unsigned char)*p)) {
        char *end;
        v[n++] = strtoul(p, &end, 10);
        p = end;
        if (*p != '.') break;
        p++;
    }
    if (!n || (*p && *p != '-' && !(n == 3 && *p == '.'))) {
        if (len) out[0] = 0;
        return;
    }
    snprintf(out, len, "%lu.%lu.%lu", v[0], v[1], v[2]);
}

static const char *architecture_of(const struct gs_disc_gpu *g)
{
    int cc = g->cc_major * 10 + g->cc_minor;
    if (cc >= 100) return "Blackwell";
    if (cc >= 90) return "Hopper";
    if (cc == 89) return "Ada Lovelace";
    if (cc >= 80) return "Ampere";
    if (cc == 75) return "Turing";
    if (cc >= 70) return "Volta";
    if (cc >= 60) return "Pascal";
    return cc ? "Maxwell" : "";
}

/* nvmlDeviceGetBrand's names as NVIDIA's driver prints them. */
static const char *brand_of(const char *name)
{
    if (!strncmp(name, "Tesla", 5)) return "Tesla";
    if (!strncmp(name, "Quadro", 6)) return "Quadro";
    if (strstr(name, "GeForce")) return "GeForce";
    if (strstr(name, "RTX")) return "NvidiaRTX";
    return "Nvidia";
}

/* The NVLink island of each GPU position: the lowest index among the GPUs it
 * reaches over NVLink, -1 alone. */
static void islands(const struct gs_inventory *inv, int *island)
{
    int n = inv->n_gpus, comp[GS_DISC_MAX_GPUS];
    for (int i = 0; i < n; i++) comp[i] = i;
    for (bool changed = true; changed;) { /* label propagation: 32 GPUs at most */
        changed = false;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                int ij = inv->gpus[j].index;
                if (i == j || ij < 0 || ij >= GS_DISC_MAX_GPUS || !inv->gpus[i].nvlink[ij]) continue;
                int m = comp[i] < comp[j] ? comp[i] : comp[j];
                if (comp[i] != m || comp[j] != m) comp[i] = comp[j] = m, changed = true;
            }
    }
    for (int i = 0; i < n; i++) {
        bool linked = false;
        for (int j = 0; j < n && !linked; j++)
            linked = j != i && comp[j] == comp[i];
        island[i] = linked ? inv->gpus[comp[i]].index : -1;
    }
}

/*--- JSON pieces ---*/

static int set_str(json_t *attrs, const char *name, const char *v)
{
    if (!v || !*v) return 0;
    return json_object_set_new(attrs, name, json_pack("{s:s}", "string", v));
}

static int set_version(json_t *attrs, const char *name, const char *v)
{
    if (!v || !*v) return 0;
    return json_object_set_new(attrs, name, json_pack("{s:s}", "version", v));
}

static int set_int(json_t *attrs, const char *name, int64_t v)
{
    return json_object_set_new(attrs, name, json_pack("{s:I}", "int", (json_int_t)v));
}

static json_t *qty(const char *fmt, uint64_t v)
{
    char b[48];
    snprintf(b, sizeof b, fmt, v);
    return json_pack("{s:s}", "value", b);
}

/* The attributes every device of GPU g shares (its own and its MIG devices'). */
static void common_attrs(json_t *attrs, const struct gs_inventory *inv, const struct gs_disc_gpu *g, int island)
{
    char v[64];
    set_str(attrs, "productName", g->name);
    set_str(attrs, "brand", brand_of(g->name));
    set_str(attrs, "architecture", architecture_of(g));
    if (g->cc_major) {
        snprintf(v, sizeof v, "%d.%d.0", g->cc_major, g->cc_minor);
        set_version(attrs, "cudaComputeCapability", v);
    }
    semver_of(inv->driver_version, v, sizeof v);
    set_version(attrs, "driverVersion", v);
    if (inv->cuda_version > 0) {
        snprintf(v, sizeof v, "%d.%d.0", inv->cuda_version / 1000, inv->cuda_version % 1000 / 10);
        set_version(attrs, "cudaDriverVersion", v);
    }
    if (g->pci_bus_id[0]) {
        char bus[32];
        gs_pci_sysfs_name(g->pci_bus_id, bus, sizeof bus);
        set_str(attrs, "resource.kubernetes.io/pciBusID", bus);
        char root[40];
        const char *colon = strchr(bus, ':');
        if (colon && strlen(colon) >= 3) {
            snprintf(root, sizeof root, "pci%.*s:%.2s", (int)(colon - bus), bus, colon + 1);
            set_str(attrs, "resource.kubernetes.io/pcieRoot", root);
        }
    }
    if (g->numa_node >= 0) set_int(attrs, "resource.kubernetes.io/numaNode", g->numa_node);
    if (island >= 0) set_int(attrs, GS_DRA_NVIDIA_DRIVER "/nvlinkDomain", island);
}

static json_t *taints_of(const struct gs_slice_health *h, int pos)
{
    if (!h || !(h->unhealthy >> pos & 1)) return NULL;
    char ts[32];
    time_t t = (time_t)h->since_s[pos];
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_pack("[{s:s, s:s, s:s}]", "key", GS_DRA_TAINT_UNHEALTHY, "effect",
                     h->fatal >> pos & 1 ? "NoExecute" : "NoSchedule", "timeAdded", ts);
}

/* The memory of a placement of mem memory slices, in MiB. */
static uint64_t slice_mib(const struct gs_disc_gpu *g, int mem)
{
    return g->memory_mib * (uint64_t)mem / MEM_SLICES;
}

/* "1g.10gb" for a placement of shape s on g (what nvidia-smi calls it). */
static void profile_name(const struct gs_disc_gpu *g, const struct mig_shape *s, char *buf, size_t len)
{
    uint64_t gib10 = g->memory_mib * 10 * (uint64_t)s->mem_slices / MEM_SLICES / 1024; /* tenths of GiB */
    snprintf(buf, len, "%ug.%" PRIu64 "gb", s->g, (gib10 + 5) / 10);
}

struct dev_list {
    json_t *devs;   /* devices, in order */
    bool advanced;  /* any taint or counter */
};

static int add(struct dev_list *l, json_t *dev)
{
    if (!dev) return GS_ENOMEM;
    if (json_object_get(dev, "taints") || json_object_get(dev, "consumesCounters")) l->advanced = true;
    return json_array_append_new(l->devs, dev) ? GS_ENOMEM : 0;
}

/* The counters a device consumes from its GPU's set. */
static json_t *consumes(int minor, uint64_t mem_mib, unsigned sms, int start, int mem_slices)
{
    char set[48];
    snprintf(set, sizeof set, "gpu-%d-counter-set", minor);
    json_t *c = json_object();
    json_object_set_new(c, "memory", qty("%" PRIu64 "Mi", mem_mib));
    json_object_set_new(c, "multiprocessors", qty("%" PRIu64, sms));
    for (int i = start; i < start + mem_slices && i < MEM_SLICES; i++) {
        char k[32];
        snprintf(k, sizeof k, "memorySlice%d", i);
        json_object_set_new(c, k, qty("%" PRIu64, 1));
    }
    return json_pack("[{s:s, s:o}]", "counterSet", set, "counters", c);
}

static json_t *gpu_device(const struct gs_inventory *inv, int pos, int island, const struct gs_slice_health *h,
                          bool counters)
{
    const struct gs_disc_gpu *g = &inv->gpus[pos];
    char name[48];
    gs_dra_gpu_device_name(minor_of(g), name, sizeof name);
    json_t *attrs = json_object();
    set_str(attrs, "type", "gpu");
    set_str(attrs, "uuid", g->uuid);
    common_attrs(attrs, inv, g, island);
    json_t *dev = json_pack("{s:s, s:o, s:{s:o}}", "name", name, "attributes", attrs, "capacity", "memory",
                            qty("%" PRIu64 "Mi", g->memory_mib));
    json_t *t = taints_of(h, pos);
    if (t) json_object_set_new(dev, "taints", t);
    if (counters) json_object_set_new(dev, "consumesCounters", consumes(minor_of(g), g->memory_mib,
                                                                        7 * sms_per_slice(g), 0, MEM_SLICES));
    return dev;
}

/* One MIG device: an existing instance m (uuid known) or a possible placement. */
static json_t *mig_device(const struct gs_inventory *inv, int pos, int island, const struct gs_slice_health *h,
                          const struct mig_shape *s, int start, const struct gs_disc_mig *m, bool counters)
{
    const struct gs_disc_gpu *g = &inv->gpus[pos];
    char profile[32], name[96];
    if (m) snprintf(profile, sizeof profile, "%s", m->profile);
    else profile_name(g, s, profile, sizeof profile);
    gs_dra_mig_device_name(minor_of(g), profile, s ? s->profile_id : 0, start, name, sizeof name);
    json_t *attrs = json_object();
    set_str(attrs, "type", "mig");
    if (m) set_str(attrs, "uuid", m->uuid);
    set_str(attrs, "parentUUID", g->uuid);
    set_str(attrs, "profile", profile);
    common_attrs(attrs, inv, g, island);
    unsigned sms = m ? m->multiprocessors : s->g * sms_per_slice(g);
    uint64_t mib = m ? m->memory_mib : slice_mib(g, s->mem_slices);
    unsigned gs = s ? s->g : (m ? m->slices_gi : 1);
    json_t *cap = json_object();
    json_object_set_new(cap, "memory", qty("%" PRIu64 "Mi", mib));
    json_object_set_new(cap, "multiprocessors", qty("%" PRIu64, sms));
    json_object_set_new(cap, "copyEngines", qty("%" PRIu64, m ? m->engines_copy : gs));
    json_object_set_new(cap, "decoders", qty("%" PRIu64, m ? m->engines_decoder : gs / 2));
    json_object_set_new(cap, "encoders", qty("%" PRIu64, m ? m->engines_encoder : 0));
    json_object_set_new(cap, "jpegEngines", qty("%" PRIu64, m ? m->engines_jpeg : gs == 7));
    json_object_set_new(cap, "ofaEngines", qty("%" PRIu64, m ? m->engines_ofa : gs == 7));
    int mem = s ? s->mem_slices : 0;
    for (int i = start; start >= 0 && i < start + mem && i < MEM_SLICES; i++) {
        char k[32];
        snprintf(k, sizeof k, "memorySlice%d", i);
        json_object_set_new(cap, k, qty("%" PRIu64, 1));
    }
    json_t *dev = json_pack("{s:s, s:o, s:o}", "name", name, "attributes", attrs, "capacity", cap);
    json_t *t = taints_of(h, pos);
    if (t) json_object_set_new(dev, "taints", t);
    if (counters && s && start >= 0)
        json_object_set_new(dev, "consumesCounters", consumes(minor_of(g), mib, sms, start, mem));
    return dev;
}

static json_t *counter_set(const struct gs_disc_gpu *g)
{
    char name[48];
    snprintf(name, sizeof name, "gpu-%d-counter-set", minor_of(g));
    json_t *c = json_object();
    json_object_set_new(c, "memory", qty("%" PRIu64 "Mi", g->memory_mib));
    json_object_set_new(c, "multiprocessors", qty("%" PRIu64, 7 * sms_per_slice(g)));
    for (int i = 0; i < MEM_SLICES; i++) {
        char k[32];
        snprintf(k, sizeof k, "memorySlice%d", i);
        json_object_set_new(c, k, qty("%" PRIu64, 1));
    }
    return json_pack("{s:s, s:o}", "name", name, "counters", c);
}

static int gpu_devices(struct dev_list *l, const struct gs_inventory *inv, int pos, int island,
                       const struct gs_slice_health *h, bool partitionable)
{
    const struct gs_disc_gpu *g = &inv->gpus[pos];
    int err = 0;
    if (partitionable && g->mig_capable) { /* the whole GPU and every placement, sharing one counter set */
        err = add(l, gpu_device(inv, pos, island, h, true));
        for (size_t k = 0; !err && k < NSHAPES; k++)
            for (int j = 0; !err && j < shapes[k].nstarts; j++) {
                const struct gs_disc_mig *m = NULL; /* an instance that exists there keeps its uuid */
                int start[GS_DISC_MAX_MIG];
                mig_starts(g, start);
                for (int i = 0; i < g->n_mig; i++)
                    if (g->mig[i].slices_gi == shapes[k].g && start[i] == shapes[k].starts[j]) m = &g->mig[i];
                err = add(l, mig_device(inv, pos, island, h, &shapes[k], shapes[k].starts[j], m, true));
            }
        return err;
    }
    if (!g->mig_enabled || !g->n_mig) return add(l, gpu_device(inv, pos, island, h, false));
    int start[GS_DISC_MAX_MIG];
    mig_starts(g, start);
    for (int i = 0; !err && i < g->n_mig; i++) {
        const struct mig_shape *s = shape_of(g->mig[i].slices_gi);
        int st = start[i] >= 0 ? start[i] : i; /* unknown geometry: distinct names all the same */
        err = add(l, mig_device(inv, pos, island, h, s, s && start[i] >= 0 ? start[i] : -1, &g->mig[i], false));
        if (!err && (!s || start[i] < 0)) { /* name it by position so names stay unique */
            json_t *d = json_array_get(l->devs, json_array_size(l->devs) - 1);
            char name[96];
            gs_dra_mig_device_name(minor_of(g), g->mig[i].profile, s ? s->profile_id : 0, st, name, sizeof name);
            json_object_set_new(d, "name", json_string(name));
        }
    }
    return err;
}

static json_t *slice(const char *node, int i, int64_t gen, int count)
{
    char name[320];
    snprintf(name, sizeof name, "%s-%s-%d", node, GS_DRA_NVIDIA_DRIVER, i);
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:{s:s, s:I, s:i}}}", "apiVersion", "resource.k8s.io/v1",
                     "kind", "ResourceSlice", "metadata", "name", name, "spec", "driver", GS_DRA_NVIDIA_DRIVER,
                     "nodeName", node, "pool", "name", node, "generation", (json_int_t)gen, "resourceSliceCount",
                     count);
}

json_t *gs_resourceslices_build_health(const struct gs_inventory *inv, const char *node, int64_t generation,
                                       bool partitionable, const struct gs_slice_health *h, struct gs_diags *d)
{
    const char *why = NULL;
    size_t nl = node ? strlen(node) : 0;
    if (!nl) why = "must not be empty";
    else if (nl > 200) why = "must be at most 200 characters (slice names add a suffix)";
    for (size_t i = 0; !why && i < nl; i++)
        if (!(islower((unsigned char)node[i]) || isdigit((unsigned char)node[i]) || node[i] == '-' || node[i] == '.'))
            why = "must consist of lower case alphanumeric characters, '-' or '.'";
    if (why) {
        gs_diags_add(d, "node", "invalid node name \"%.64s\": %s", node ? node : "", why);
        return NULL;
    }
    if (generation < 0) {
        gs_diags_add(d, "generation", "invalid generation %" PRId64 ": must be at least 0", generation);
        return NULL;
    }
    int island[GS_DISC_MAX_GPUS];
    islands(inv, island);
    struct dev_list l = {json_array(), false};
    json_t *sets = json_array();
    int err = l.devs && sets ? 0 : GS_ENOMEM;
    for (int i = 0; !err && i < inv->n_gpus; i++) {
        err = gpu_devices(&l, inv, i, island[i], h, partitionable);
        if (!err && partitionable && inv->gpus[i].mig_capable)
            err = json_array_append_new(sets, counter_set(&inv->gpus[i])) ? GS_ENOMEM : 0;
    }
    json_t *out = json_array();
    if (err || !out) {
        json_decref(l.devs);
        json_decref(sets);
        json_decref(out);
        gs_diags_add(d, "", "out of memory building ResourceSlices");
        return NULL;
    }
    size_t per = l.advanced || json_array_size(sets) ? GS_DRA_SLICE_MAX_DEVICES_ADVANCED : GS_DRA_SLICE_MAX_DEVICES;
    size_t nd = json_array_size(l.devs), ns = json_array_size(sets);
    size_t nset_slices = (ns + GS_DRA_SLICE_MAX_COUNTER_SETS - 1) / GS_DRA_SLICE_MAX_COUNTER_SETS;
    size_t ndev_slices = (nd + per - 1) / per;
    int count = (int)(nset_slices + ndev_slices), idx = 0;
    for (size_t k = 0; k < nset_slices; k++) { /* counter sets first, in slices of their own */
        json_t *s = slice(node, idx++, generation, count), *part = json_array();
        for (size_t j = k * GS_DRA_SLICE_MAX_COUNTER_SETS; j < ns && j < (k + 1) * GS_DRA_SLICE_MAX_COUNTER_SETS; j++)
            json_array_append(part, json_array_get(sets, j));
        json_object_set_new(json_object_get(s, "spec"), "sharedCounters", part);
        json_array_append_new(out, s);
    }
    for (size_t k = 0; k < ndev_slices; k++) {
        json_t *s = slice(node, idx++, generation, count), *part = json_array();
        for (size_t j = k * per; j < nd && j < (k + 1) * per; j++) json_array_append(part, json_array_get(l.devs, j));
        json_object_set_new(json_object_get(s, "spec"), "devices", part);
        json_array_append_new(out, s);
    }
    json_decref(l.devs);
    json_decref(sets);
    return out;
}

json_t *gs_resourceslices_build(const struct gs_inventory *inv, const char *node, int64_t generation,
                                bool partitionable, struct gs_diags *d)
{
    return gs_resourceslices_build_health(inv, node, generation, partitionable, NULL, d);
}

/* obj's spec without pool.generation, or NULL. */
static json_t *content(const json_t *obj)
{
    json_t *spec = json_deep_copy(json_object_get(obj, "spec"));
    json_object_del(json_object_get(spec, "pool"), "generation");
    return spec;
}

bool gs_resourceslices_same(const json_t *a, const json_t *b)
{
    if (json_array_size(a) != json_array_size(b)) return false;
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *x = json_array_get(a, i), *y = json_array_get(b, i);
        const char *nx = json_string_value(json_object_get(json_object_get(x, "metadata"), "name"));
        const char *ny = json_string_value(json_object_get(json_object_get(y, "metadata"), "name"));
        if (!nx || !ny || strcmp(nx, ny)) return false;
        json_t *cx = content(x), *cy = content(y);
        bool eq = json_equal(cx, cy);
        json_decref(cx);
        json_decref(cy);
        if (!eq) return false;
    }
    return true;
}

static int by_name(const void *x, const void *y)
{
    const char *a = json_string_value(json_object_get(json_object_get(*(json_t *const *)x, "metadata"), "name"));
    const char *b = json_string_value(json_object_get(json_object_get(*(json_t *const *)y, "metadata"), "name"));
    return strcmp(a ? a : "", b ? b : "");
}

int gs_resourceslices_next(const json_t *have, const struct gs_inventory *inv, const char *node, bool partitionable,
                           const struct gs_slice_health *h, json_t **want, bool *changed, struct gs_diags *d)
{
    *want = NULL;
    *changed = false;
    int64_t max = 0;
    size_t n = json_array_size(have);
    json_t **v = calloc(n ? n : 1, sizeof *v), *hs = json_array();
    if (!v || !hs) {
        free(v);
        json_decref(hs);
        return GS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        v[i] = json_array_get(have, i);
        int64_t g = json_integer_value(json_object_get(json_object_get(json_object_get(v[i], "spec"), "pool"),
                                                       "generation"));
        if (g > max) max = g;
    }
    qsort(v, n, sizeof *v, by_name);
    for (size_t i = 0; i < n; i++) json_array_append(hs, v[i]);
    free(v);
    json_t *w = gs_resourceslices_build_health(inv, node, max, partitionable, h, d);
    if (w && !gs_resourceslices_same(hs, w) && max == INT64_MAX) { /* nothing above it to publish at */
        json_decref(w);
        json_decref(hs);
        gs_diags_add(d, "generation", "the pool's generation %" PRId64 " cannot go higher: delete the node's "
                     "ResourceSlices to start over", max);
        return GS_ERANGE;
    }
    if (w && !gs_resourceslices_same(hs, w)) {
        json_decref(w);
        w = gs_resourceslices_build_health(inv, node, max + 1, partitionable, h, d);
        *changed = true;
    }
    json_decref(hs);
    if (!w) return d && d->n ? GS_EINVAL : GS_ENOMEM;
    *want = w;
    return 0;
}
