/*
 * fake_nvml.c - a stand-in libnvidia-ml.so.1 for testing the NVML backend.
 *
 * Built by the test suite as libnvidia-ml.so.1 (and two variants), it exports
 * the NVML functions src/discovery/nvml.c calls, with canned answers set by
 * environment variables read at nvmlInit_v2, so the real dlopen path and
 * every error path run in CI without a GPU:
 *
 *   FAKE_NVML_GPUS=N          number of GPUs (default 2, at most 8)
 *   FAKE_NVML_FAIL=LIST       calls that fail: "nvmlDeviceGetUUID@1:999,nvmlInit_v2"
 *                             (function[@gpu][:nvml error code], default code 999 UNKNOWN)
 *   FAKE_NVML_MODEL=M         a100 (default: NVIDIA A100-SXM4-40GB) or h100 (NVIDIA H100 80GB HBM3)
 *   FAKE_NVML_MIG=1           GPU 0 has MIG on with two instances (A100: 1g.5gb, 3g.20gb)
 *   FAKE_NVML_MIG_PENDING=1   nvmlDeviceSetMigMode leaves the change pending a GPU reset
 *   FAKE_NVML_NVLINK=MODE     none (default), pairs (GPU 2k<->2k+1, 4 links), switch (6 links each to an NVSwitch)
 *   FAKE_NVML_EVENTS=LIST     events returned by nvmlEventSetWait_v2 in order: "xid:79@1,dbe@0,lost"
 *
 * MIG management (what mig-parted and src/govern/migmanager_nvml.c call) is
 * modelled with state: MIG mode per GPU, GPU instances of the model's real
 * profiles (index -> profile ID, slices, instance count, memory, as
 * `nvidia-smi mig -lgip` lists them), compute instances inside them, the
 * MIG devices discovery enumerates (name "<model> MIG <profile>", memory,
 * GPU/compute instance IDs, attributes), and the errors the driver gives:
 * unknown profile IDs, no room left, destroying a GPU instance that still
 * has compute instances, turning MIG off with instances left. nvmlInit_v2
 * is reference-counted as in NVML, so discovery and the MIG manager share
 * one state; the configuration is read when the count goes from zero.
 *
 * Variants (compile definitions): FAKE_NVML_MINIMAL exports only the required
 * functions; FAKE_NVML_BROKEN also lacks nvmlDeviceGetCount_v2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct { int gpu, mig; } fake_dev; /* mig: -1 for the GPU, else the index of its MIG device */
typedef fake_dev *nvmlDevice_t;
typedef struct { int open; } *nvmlEventSet_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;
typedef struct {
    unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount,
        sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

#define EXPORT __attribute__((visibility("default")))
#define MAXG 8
#define OK 0
#define E_INVALID 2
#define E_NOT_SUPPORTED 3
#define E_NOT_FOUND 6
#define E_TIMEOUT 10
#define E_UNINIT 1
#define E_LOST 15
#define E_RESET_REQUIRED 16
#define E_IN_USE 19
#define E_NO_ROOM 23 /* NVML_ERROR_INSUFFICIENT_RESOURCES */

/* GPU instance profiles by NVML_GPU_INSTANCE_PROFILE_* index (0x0 1 slice,
 * 0x1 2, 0x2 3, 0x3 4, 0x4 7, 0x7 1 slice REV1 (+me), 0x9 1 slice REV2). */
struct gi_prof {
    int index;
    unsigned id, slices, instances, sms, ce, dec;
    unsigned long long mem_mb;
    const char *name;
};
static const struct model {
    const char *key, *name;
    unsigned long long mem_mib;
    struct gi_prof gi[8];
} models[] = {
    {"a100", "NVIDIA A100-SXM4-40GB", 40960,
     {{0, 19, 1, 7, 14, 1, 0, 4864, "1g.5gb"}, {1, 14, 2, 3, 28, 2, 1, 9984, "2g.10gb"},
      {2, 9, 3, 2, 42, 3, 1, 20096, "3g.20gb"}, {3, 5, 4, 1, 56, 4, 2, 20096, "4g.20gb"},
      {4, 0, 7, 1, 98, 7, 3, 40192, "7g.40gb"}, {7, 20, 1, 1, 14, 1, 1, 4864, "1g.5gb+me"},
      {9, 15, 1, 4, 14, 1, 0, 9984, "1g.10gb"}, {-1, 0, 0, 0, 0, 0, 0, 0, NULL}}},
    {"h100", "NVIDIA H100 80GB HBM3", 81559,
     {{0, 19, 1, 7, 16, 1, 1, 9984, "1g.10gb"}, {1, 14, 2, 3, 32, 2, 2, 20096, "2g.20gb"},
      {2, 9, 3, 2, 60, 3, 3, 40448, "3g.40gb"}, {3, 5, 4, 1, 64, 4, 4, 40448, "4g.40gb"},
      {4, 0, 7, 1, 132, 8, 7, 81152, "7g.80gb"}, {7, 20, 1, 1, 16, 1, 1, 9984, "1g.10gb+me"},
      {9, 15, 1, 4, 26, 1, 1, 20096, "1g.20gb"}, {-1, 0, 0, 0, 0, 0, 0, 0, NULL}}},
};

#define MAXGI 7
#define MAXCI 7
struct fake_ci {
    int used;
    unsigned id, slices;
    unsigned serial; /* makes the MIG device's UUID */
    struct fake_gi *gi;
};
struct fake_gi {
    int used, gpu;
    unsigned id;
    const struct gi_prof *prof;
    struct fake_ci ci[MAXCI];
};
typedef struct fake_gi *nvmlGpuInstance_t;
typedef struct fake_ci *nvmlComputeInstance_t;
typedef struct {
    unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount, copyEngineCount, decoderCount,
        encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;
typedef struct {
    unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount,
        sharedEncoderCount, sharedJpegCount, sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

static struct {
    int inited; /* nvmlInit_v2 count */
    int gpus, mig_pending;
    const struct model *model;
    char nvlink[16];
    char fail[512];
    char events[256];
    size_t event_pos;
    fake_dev dev[MAXG], migdev[MAXG][MAXCI];
    unsigned mig_mode[MAXG], mig_pend[MAXG];
    struct fake_gi gi[MAXG][MAXGI];
    unsigned serial;
    struct { int open; } set;
} S;

static void cfg_str(const char *env, char *out, size_t len, const char *def)
{
    const char *v = getenv(env);
    snprintf(out, len, "%s", v ? v : def);
}

/* Configured failure for fn on gpu (-1 = not device-specific), else OK. */
static nvmlReturn_t failing(const char *fn, int gpu)
{
    char buf[sizeof S.fail];
    snprintf(buf, sizeof buf, "%s", S.fail);
    for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        int code = 999, at = -1;
        char *colon = strchr(it, ':');
        if (colon) *colon = 0, code = atoi(colon + 1);
        char *a = strchr(it, '@');
        if (a) *a = 0, at = atoi(a + 1);
        if (!strcmp(it, fn) && (at < 0 || at == gpu)) return code;
    }
    return OK;
}

#define CHECK(dev)                                                   \
    do {                                                             \
        if (!S.inited) return E_UNINIT;                              \
        nvmlReturn_t r_ = failing(__func__, (dev) ? (dev)->gpu : -1); \
        if (r_) return r_;                                           \
    } while (0)

/*--- Required ---*/

static int env_on(const char *name) { return getenv(name) && !strcmp(getenv(name), "1"); }

static const struct gi_prof *prof_by(int gpu, int index, unsigned id)
{
    (void)gpu;
    for (const struct gi_prof *p = S.model->gi; p->name; p++)
        if (index >= 0 ? p->index == index : p->id == id) return p;
    return NULL;
}

static struct fake_gi *gi_new(int gpu, const struct gi_prof *p);
static struct fake_ci *ci_new(struct fake_gi *g, unsigned slices);

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    if (S.inited) { /* reference-counted, as NVML is */
        S.inited++;
        return OK;
    }
    char fail[512];
    cfg_str("FAKE_NVML_FAIL", fail, sizeof fail, "");
    memset(&S, 0, sizeof S);
    snprintf(S.fail, sizeof S.fail, "%s", fail);
    nvmlReturn_t r = failing(__func__, -1);
    if (r) return r;
    const char *g = getenv("FAKE_NVML_GPUS");
    S.gpus = g ? atoi(g) : 2;
    if (S.gpus < 0 || S.gpus > MAXG) S.gpus = MAXG;
    S.model = &models[0];
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (getenv("FAKE_NVML_MODEL") && !strcmp(getenv("FAKE_NVML_MODEL"), models[i].key)) S.model = &models[i];
    S.mig_pending = env_on("FAKE_NVML_MIG_PENDING");
    cfg_str("FAKE_NVML_NVLINK", S.nvlink, sizeof S.nvlink, "none");
    cfg_str("FAKE_NVML_EVENTS", S.events, sizeof S.events, "");
    for (int i = 0; i < MAXG; i++) {
        S.dev[i] = (fake_dev){i, -1};
        for (int k = 0; k < MAXCI; k++) S.migdev[i][k] = (fake_dev){i, k};
    }
    if (env_on("FAKE_NVML_MIG")) {
        /* GPU 0: a 1-slice instance (GPU instance 7) and a 3-slice one (GPU instance 1). */
        S.mig_mode[0] = S.mig_pend[0] = 1;
        struct fake_gi *a = gi_new(0, prof_by(0, 0, 0)), *b = gi_new(0, prof_by(0, 2, 0));
        a->id = 7, b->id = 1;
        ci_new(a, 1);
        ci_new(b, 3);
    }
    S.inited = 1;
    return OK;
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    if (!S.inited) return E_UNINIT;
    S.inited--;
    return failing(__func__, -1);
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case OK: return "Success";
    case E_UNINIT: return "Uninitialized";
    case E_NOT_SUPPORTED: return "Not Supported";
    case E_NOT_FOUND: return "Not Found";
    case E_LOST: return "GPU is lost";
    case E_INVALID: return "Invalid Argument";
    case E_RESET_REQUIRED: return "GPU requires reset";
    case E_IN_USE: return "In use by another client";
    case E_NO_ROOM: return "Insufficient resources";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned len)
{
    CHECK((fake_dev *)NULL);
    snprintf(buf, len, "550.54.15");
    return OK;
}

#ifndef FAKE_NVML_BROKEN
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n)
{
    CHECK((fake_dev *)NULL);
    *n = (unsigned)S.gpus;
    return OK;
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d)
{
    if (!S.inited) return E_UNINIT;
    nvmlReturn_t r = failing(__func__, (int)i);
    if (r) return r;
    if (i >= (unsigned)S.gpus) return E_INVALID;
    *d = &S.dev[i];
    return OK;
}

/*--- MIG state ---*/

static struct fake_gi *gi_new(int gpu, const struct gi_prof *p)
{
    for (int i = 0; p && i < MAXGI; i++)
        if (!S.gi[gpu][i].used) {
            struct fake_gi *g = &S.gi[gpu][i];
            memset(g, 0, sizeof *g);
            g->used = 1, g->gpu = gpu, g->prof = p;
            /* Lowest free ID from where the driver starts each size (7g 0, 4g/3g 1, 2g 3, 1g 7). */
            unsigned id = p->slices >= 7 ? 0 : p->slices >= 3 ? 1 : p->slices == 2 ? 3 : 7;
            for (int busy = 1; busy; id++) {
                busy = 0;
                for (int k = 0; k < MAXGI; k++)
                    busy |= S.gi[gpu][k].used && &S.gi[gpu][k] != g && S.gi[gpu][k].id == id;
                if (!busy) break;
            }
            g->id = id;
            return g;
        }
    return NULL;
}

static struct fake_ci *ci_new(struct fake_gi *g, unsigned slices)
{
    for (int i = 0; i < MAXCI; i++)
        if (!g->ci[i].used) {
            g->ci[i] = (struct fake_ci){1, (unsigned)i, slices, S.serial++, g};
            return &g->ci[i];
        }
    return NULL;
}

/* The k-th MIG device of gpu: its compute instances, GPU instance by GPU instance. */
static struct fake_ci *mig_dev(int gpu, int k)
{
    for (int i = 0; S.mig_mode[gpu] && i < MAXGI; i++)
        for (int c = 0; S.gi[gpu][i].used && c < MAXCI; c++)
            if (S.gi[gpu][i].ci[c].used && k-- == 0) return &S.gi[gpu][i].ci[c];
    return NULL;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned len)
{
    CHECK(d);
    if (d->mig >= 0) {
        const struct fake_ci *c = mig_dev(d->gpu, d->mig);
        if (!c) return E_INVALID;
        snprintf(buf, len, "MIG-0000000%d-aaaa-bbbb-cccc-%012x", d->gpu, c->serial);
    } else {
        snprintf(buf, len, "GPU-1111111%d-2222-3333-4444-55555555555%d", d->gpu, d->gpu);
    }
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned len)
{
    CHECK(d);
    if (d->mig >= 0) {
        const struct fake_ci *c = mig_dev(d->gpu, d->mig);
        if (!c) return E_INVALID;
        snprintf(buf, len, "%s MIG %s", S.model->name, c->gi->prof->name);
    } else {
        snprintf(buf, len, "%s", S.model->name);
    }
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    CHECK(d);
    const struct fake_ci *c = d->mig >= 0 ? mig_dev(d->gpu, d->mig) : NULL;
    if (d->mig >= 0 && !c) return E_INVALID;
    unsigned long long mib = c ? c->gi->prof->mem_mb : S.model->mem_mib;
    m->total = mib << 20;
    m->used = (unsigned long long)(1000 + 100 * d->gpu) << 20;
    m->free = m->total - m->used - (512ULL << 20);
    return OK;
}

static void bus_id(int gpu, char *out, size_t len)
{
    snprintf(out, len, "00000000:%02X:00.0", 0x10 + gpu * 0x10);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p)
{
    CHECK(d);
    memset(p, 0, sizeof *p);
    bus_id(d->gpu, p->busId, sizeof p->busId);
    p->bus = (unsigned)(0x10 + d->gpu * 0x10);
    p->pciDeviceId = 0x20b010de;
    return OK;
}

#ifndef FAKE_NVML_MINIMAL
/*--- Optional ---*/

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    CHECK((fake_dev *)NULL);
    *v = 12040;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned *m)
{
    CHECK(d);
    *m = (unsigned)d->gpu;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor)
{
    CHECK(d);
    *major = 8, *minor = 0;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned *cur, unsigned *pend)
{
    CHECK(d);
    *cur = S.mig_mode[d->gpu];
    *pend = S.mig_pend[d->gpu];
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned *n)
{
    CHECK(d);
    *n = 7;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned k, nvmlDevice_t *m)
{
    CHECK(d);
    if (d->mig >= 0 || k >= MAXCI || !mig_dev(d->gpu, (int)k)) return E_NOT_FOUND;
    *m = &S.migdev[d->gpu][k];
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned *id)
{
    CHECK(d);
    const struct fake_ci *c = d->mig >= 0 ? mig_dev(d->gpu, d->mig) : NULL;
    if (!c) return E_INVALID;
    *id = c->gi->id;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned *id)
{
    CHECK(d);
    const struct fake_ci *c = d->mig >= 0 ? mig_dev(d->gpu, d->mig) : NULL;
    if (!c) return E_INVALID;
    *id = c->id;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t d, nvmlDeviceAttributes_t *a)
{
    CHECK(d);
    const struct fake_ci *c = d->mig >= 0 ? mig_dev(d->gpu, d->mig) : NULL;
    if (!c) return E_INVALID;
    const struct gi_prof *p = c->gi->prof;
    memset(a, 0, sizeof *a);
    a->multiprocessorCount = p->sms * c->slices / p->slices;
    a->sharedCopyEngineCount = p->ce;
    a->sharedDecoderCount = p->dec;
    a->gpuInstanceSliceCount = p->slices;
    a->computeInstanceSliceCount = c->slices;
    a->memorySizeMB = p->mem_mb;
    return OK;
}

/*--- MIG management ---*/

EXPORT nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t d, unsigned mode, nvmlReturn_t *activation)
{
    CHECK(d);
    if (d->mig >= 0 || mode > 1 || !activation) return E_INVALID;
    for (int i = 0; i < MAXGI; i++)
        if (S.gi[d->gpu][i].used) return E_IN_USE; /* instances must go first */
    S.mig_pend[d->gpu] = mode;
    *activation = OK;
    if (S.mig_pending && S.mig_mode[d->gpu] != mode) *activation = E_RESET_REQUIRED;
    else S.mig_mode[d->gpu] = mode;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t d, unsigned profile,
                                                        nvmlGpuInstanceProfileInfo_t *info)
{
    CHECK(d);
    if (d->mig >= 0 || !info) return E_INVALID;
    const struct gi_prof *p = prof_by(d->gpu, (int)profile, 0);
    if (!p) return E_NOT_SUPPORTED;
    memset(info, 0, sizeof *info);
    info->id = p->id;
    info->sliceCount = p->slices;
    info->instanceCount = p->instances;
    info->multiprocessorCount = p->sms;
    info->copyEngineCount = p->ce;
    info->decoderCount = p->dec;
    info->memorySizeMB = p->mem_mb;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t d, unsigned id, nvmlGpuInstance_t *out, unsigned *count)
{
    CHECK(d);
    if (d->mig >= 0 || !out || !count) return E_INVALID;
    if (!S.mig_mode[d->gpu]) return E_NOT_SUPPORTED;
    const struct gi_prof *p = prof_by(d->gpu, -1, id);
    if (!p) return E_INVALID; /* a profile ID, not an index */
    unsigned n = 0;
    for (int i = 0; i < MAXGI; i++)
        if (S.gi[d->gpu][i].used && S.gi[d->gpu][i].prof == p) out[n++] = &S.gi[d->gpu][i];
    *count = n;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t d, unsigned id, nvmlGpuInstance_t *out)
{
    CHECK(d);
    if (d->mig >= 0 || !out) return E_INVALID;
    if (!S.mig_mode[d->gpu]) return E_NOT_SUPPORTED;
    const struct gi_prof *p = prof_by(d->gpu, -1, id);
    if (!p) return E_INVALID;
    unsigned slices = 0, same = 0;
    unsigned long long mem = 0;
    for (int i = 0; i < MAXGI; i++) {
        const struct fake_gi *g = &S.gi[d->gpu][i];
        if (!g->used) continue;
        slices += g->prof->slices, mem += g->prof->mem_mb, same += g->prof == p;
    }
    const struct gi_prof *whole = prof_by(d->gpu, 4, 0);
    if (same >= p->instances || slices + p->slices > 7 || mem + p->mem_mb > whole->mem_mb) return E_NO_ROOM;
    *out = gi_new(d->gpu, p);
    return *out ? OK : E_NO_ROOM;
}

EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t g)
{
    CHECK((fake_dev *)NULL);
    if (!g || !g->used) return E_INVALID;
    for (int c = 0; c < MAXCI; c++)
        if (g->ci[c].used) return E_IN_USE;
    g->used = 0;
    return OK;
}

/* Compute instance profiles: index = ID = 0..4 for 1, 2, 3, 4, 7 slices. */
static const unsigned ci_slices[] = {1, 2, 3, 4, 7};

EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t g, unsigned profile,
                                                                 unsigned eng, nvmlComputeInstanceProfileInfo_t *info)
{
    CHECK((fake_dev *)NULL);
    if (!g || !g->used || !info || eng != 0) return E_INVALID;
    if (profile >= sizeof ci_slices / sizeof ci_slices[0] || ci_slices[profile] > g->prof->slices)
        return E_NOT_SUPPORTED;
    memset(info, 0, sizeof *info);
    info->id = profile;
    info->sliceCount = ci_slices[profile];
    info->instanceCount = g->prof->slices / ci_slices[profile];
    info->multiprocessorCount = g->prof->sms * ci_slices[profile] / g->prof->slices;
    return OK;
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t g, unsigned id, nvmlComputeInstance_t *out,
                                                       unsigned *count)
{
    CHECK((fake_dev *)NULL);
    if (!g || !g->used || !out || !count || id >= sizeof ci_slices / sizeof ci_slices[0]) return E_INVALID;
    unsigned n = 0;
    for (int c = 0; c < MAXCI; c++)
        if (g->ci[c].used && g->ci[c].slices == ci_slices[id]) out[n++] = &g->ci[c];
    *count = n;
    return OK;
}

EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t g, unsigned id, nvmlComputeInstance_t *out)
{
    CHECK((fake_dev *)NULL);
    if (!g || !g->used || !out || id >= sizeof ci_slices / sizeof ci_slices[0]) return E_INVALID;
    unsigned used = 0;
    for (int c = 0; c < MAXCI; c++) used += g->ci[c].used ? g->ci[c].slices : 0;
    if (used + ci_slices[id] > g->prof->slices) return E_NO_ROOM;
    *out = ci_new(g, ci_slices[id]);
    return *out ? OK : E_NO_ROOM;
}

EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t c)
{
    CHECK((fake_dev *)NULL);
    if (!c || !c->used) return E_INVALID;
    c->used = 0;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link, unsigned *active)
{
    CHECK(d);
    if (link >= 18) return E_INVALID;
    *active = (!strcmp(S.nvlink, "pairs") && link < 4) || (!strcmp(S.nvlink, "switch") && link < 6);
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned link, nvmlPciInfo_t *p)
{
    CHECK(d);
    (void)link;
    memset(p, 0, sizeof *p);
    if (!strcmp(S.nvlink, "pairs")) bus_id(d->gpu ^ 1, p->busId, sizeof p->busId);
    else snprintf(p->busId, sizeof p->busId, "00000000:C0:00.0"); /* an NVSwitch */
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    CHECK(d);
    u->gpu = 40u + (unsigned)d->gpu, u->memory = 20u + (unsigned)d->gpu;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t d, unsigned *u, unsigned *p)
{
    CHECK(d);
    *u = 3, *p = 1000;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t d, unsigned *u, unsigned *p)
{
    CHECK(d);
    *u = 4, *p = 1000;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, unsigned sensor, unsigned *t)
{
    CHECK(d);
    if (sensor != 0) return E_INVALID;
    *t = 50u + (unsigned)d->gpu;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *mw)
{
    CHECK(d);
    *mw = 123456;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj)
{
    CHECK(d);
    *mj = 987654321ULL;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, unsigned type, unsigned *mhz)
{
    CHECK(d);
    *mhz = type == 1 ? 1410 : 1215;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, unsigned type, unsigned counter, unsigned long long *n)
{
    CHECK(d);
    *n = type * 10 + counter; /* sbe vol 0, sbe agg 1, dbe vol 10, dbe agg 11 */
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned *n)
{
    CHECK(d);
    *n = 7;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned *c, unsigned *u, unsigned *p, unsigned *f)
{
    CHECK(d);
    *c = 2, *u = 1, *p = 0, *f = 0;
    return OK;
}

/*--- Events ---*/

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    CHECK((fake_dev *)NULL);
    S.set.open = 1;
    *set = (nvmlEventSet_t)&S.set;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set)
{
    CHECK(d);
    return types && set && set->open ? OK : E_INVALID;
}

/* Next event of FAKE_NVML_EVENTS: "xid:79@1", "dbe@0", "lost", "error". */
EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *ev, unsigned timeout)
{
    CHECK((fake_dev *)NULL);
    (void)timeout;
    if (!set || !set->open) return E_INVALID;
    const char *p = S.events + S.event_pos;
    if (!*p) return E_TIMEOUT;
    size_t len = strcspn(p, ",");
    char item[64];
    snprintf(item, sizeof item, "%.*s", (int)(len < sizeof item ? len : sizeof item - 1), p);
    S.event_pos += len + (p[len] == ',');
    if (!strcmp(item, "lost")) return E_LOST;
    if (!strcmp(item, "error")) return 999;
    char *at = strchr(item, '@');
    int gpu = at ? atoi(at + 1) : 0;
    memset(ev, 0, sizeof *ev);
    ev->device = &S.dev[gpu < MAXG ? gpu : 0];
    if (!strncmp(item, "xid:", 4)) ev->eventType = 0x8, ev->eventData = strtoull(item + 4, NULL, 10);
    else if (!strncmp(item, "dbe", 3)) ev->eventType = 0x2;
    else ev->eventType = 0x4; /* a type nobody asked for */
    return OK;
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    if (!set || !set->open) return E_INVALID;
    set->open = 0;
    return OK;
}
#endif
