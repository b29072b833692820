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
 *   FAKE_NVML_MIG=1           GPU 0 has MIG on with two instances (1g.10gb, 3g.40gb)
 *   FAKE_NVML_NVLINK=MODE     none (default), pairs (GPU 2k<->2k+1, 4 links), switch (6 links each to an NVSwitch)
 *   FAKE_NVML_EVENTS=LIST     events returned by nvmlEventSetWait_v2 in order: "xid:79@1,dbe@0,lost"
 *
 * Variants (compile definitions): FAKE_NVML_MINIMAL exports only the required
 * functions; FAKE_NVML_BROKEN also lacks nvmlDeviceGetCount_v2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct { int gpu, mig; } fake_dev;
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

static struct {
    int inited, gpus, mig;
    char nvlink[16];
    char fail[512];
    char events[256];
    size_t event_pos;
    fake_dev dev[MAXG], migdev[2];
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

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    char fail[512];
    cfg_str("FAKE_NVML_FAIL", fail, sizeof fail, "");
    memset(&S, 0, sizeof S);
    snprintf(S.fail, sizeof S.fail, "%s", fail);
    nvmlReturn_t r = failing(__func__, -1);
    if (r) return r;
    const char *g = getenv("FAKE_NVML_GPUS");
    S.gpus = g ? atoi(g) : 2;
    if (S.gpus < 0 || S.gpus > MAXG) S.gpus = MAXG;
    S.mig = getenv("FAKE_NVML_MIG") && !strcmp(getenv("FAKE_NVML_MIG"), "1");
    cfg_str("FAKE_NVML_NVLINK", S.nvlink, sizeof S.nvlink, "none");
    cfg_str("FAKE_NVML_EVENTS", S.events, sizeof S.events, "");
    for (int i = 0; i < MAXG; i++) S.dev[i] = (fake_dev){i, -1};
    S.migdev[0] = (fake_dev){0, 0};
    S.migdev[1] = (fake_dev){0, 1};
    S.inited = 1;
    return OK;
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    if (!S.inited) return E_UNINIT;
    S.inited = 0;
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

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned len)
{
    CHECK(d);
    if (d->mig >= 0) snprintf(buf, len, "MIG-0000000%d-aaaa-bbbb-cccc-00000000000%d", d->gpu, d->mig);
    else snprintf(buf, len, "GPU-1111111%d-2222-3333-4444-55555555555%d", d->gpu, d->gpu);
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned len)
{
    CHECK(d);
    if (d->mig >= 0) snprintf(buf, len, "NVIDIA A100-SXM4-40GB MIG %s", d->mig ? "3g.20gb" : "1g.5gb");
    else snprintf(buf, len, "NVIDIA A100-SXM4-40GB");
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    CHECK(d);
    unsigned long long mib = d->mig < 0 ? 40960 : d->mig ? 20096 : 4864;
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
    *cur = *pend = S.mig && d->gpu == 0;
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
    if (!S.mig || d->gpu != 0 || k >= 2) return E_NOT_FOUND;
    *m = &S.migdev[k];
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned *id)
{
    CHECK(d);
    if (d->mig < 0) return E_INVALID;
    *id = d->mig ? 1u : 7u;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned *id)
{
    CHECK(d);
    if (d->mig < 0) return E_INVALID;
    *id = 0;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t d, nvmlDeviceAttributes_t *a)
{
    CHECK(d);
    memset(a, 0, sizeof *a);
    unsigned g = d->mig ? 3 : 1;
    a->multiprocessorCount = 14 * g;
    a->sharedCopyEngineCount = g;
    a->sharedDecoderCount = g / 2;
    a->gpuInstanceSliceCount = a->computeInstanceSliceCount = g;
    a->memorySizeMB = d->mig ? 20096 : 4864;
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
