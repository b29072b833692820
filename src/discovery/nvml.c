/*
 * nvml.c - the NVML backend, loaded at run time.
 *
 * libnvidia-ml.so.1 ships with the driver, not with a toolkit we could build
 * against, so we dlopen it and declare the handful of types and functions we
 * call ourselves (their layout is NVML's stable C ABI; each _v2/_v3 suffix is
 * named explicitly). The same binary then runs on GPU nodes and on machines
 * without a driver, where gs_disc_open_nvml fails cleanly and the caller falls
 * back to sysfs or the mock.
 *
 * Symbols are either required (without them we cannot describe a GPU: count,
 * handle, UUID, name, memory, PCI info, driver version) or optional (compute
 * capability, MIG, NVLink, metrics, events): an old driver lacking one just
 * leaves that field unknown. Every NVML call is checked; NOT_SUPPORTED means
 * "leave it out", other failures of required calls become GS_EIO with the
 * call, GPU and NVML's own message in d->err.
 *
 * Health: Xid and double-bit ECC events are registered on one event set and
 * read by poll_event, which the exporter's collector thread calls between
 * samples. A GPU whose memory query fails is "not answering" (GS_EIO).
 */
#include "discovery/discovery.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*--- The slice of nvml.h we use ---*/

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
};

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

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

#define NVML_EVENT_DBE 0x2ULL
#define NVML_EVENT_XID 0x8ULL
#define NVML_NVLINK_MAX_LINKS 18
#define NVML_TEMPERATURE_GPU 0
#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2
#define NVML_MEMORY_ERROR_CORRECTED 0
#define NVML_MEMORY_ERROR_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_AGGREGATE_ECC 1

struct api {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*driver_version)(char *, unsigned);
    nvmlReturn_t (*count)(unsigned *);
    nvmlReturn_t (*handle)(unsigned, nvmlDevice_t *);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *);
    /* optional from here */
    nvmlReturn_t (*cuda_version)(int *);
    nvmlReturn_t (*minor)(nvmlDevice_t, unsigned *);
    nvmlReturn_t (*cc)(nvmlDevice_t, int *, int *);
    nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned *, unsigned *);
    nvmlReturn_t (*max_mig)(nvmlDevice_t, unsigned *);
    nvmlReturn_t (*mig_handle)(nvmlDevice_t, unsigned, nvmlDevice_t *);
    nvmlReturn_t (*gi_id)(nvmlDevice_t, unsigned *);
    nvmlReturn_t (*ci_id)(nvmlDevice_t, unsigned *);
    nvmlReturn_t (*attrs)(nvmlDevice_t, nvmlDeviceAttributes_t *);
    nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, unsigned *);
    nvmlReturn_t (*link_remote)(nvmlDevice_t, unsigned, nvmlPciInfo_t *);
    nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*enc)(nvmlDevice_t, unsigned *, unsigned *);
    nvmlReturn_t (*dec)(nvmlDevice_t, unsigned *, unsigned *);
    nvmlReturn_t (*temp)(nvmlDevice_t, unsigned, unsigned *);
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned *);
    nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long *);
    nvmlReturn_t (*clock)(nvmlDevice_t, unsigned, unsigned *);
    nvmlReturn_t (*ecc)(nvmlDevice_t, unsigned, unsigned, unsigned long long *);
    nvmlReturn_t (*replay)(nvmlDevice_t, unsigned *);
    nvmlReturn_t (*remapped)(nvmlDevice_t, unsigned *, unsigned *, unsigned *, unsigned *);
    nvmlReturn_t (*ev_create)(nvmlEventSet_t *);
    nvmlReturn_t (*ev_register)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
    nvmlReturn_t (*ev_wait)(nvmlEventSet_t, nvmlEventData_t *, unsigned);
    nvmlReturn_t (*ev_free)(nvmlEventSet_t);
};

static const struct {
    const char *sym;
    size_t off;
    bool required;
} syms[] = {
#define REQ(f, s) {s, offsetof(struct api, f), true}
#define OPT(f, s) {s, offsetof(struct api, f), false}
    REQ(init, "nvmlInit_v2"),
    REQ(shutdown, "nvmlShutdown"),
    REQ(error_string, "nvmlErrorString"),
    REQ(driver_version, "nvmlSystemGetDriverVersion"),
    REQ(count, "nvmlDeviceGetCount_v2"),
    REQ(handle, "nvmlDeviceGetHandleByIndex_v2"),
    REQ(uuid, "nvmlDeviceGetUUID"),
    REQ(name, "nvmlDeviceGetName"),
    REQ(memory, "nvmlDeviceGetMemoryInfo"),
    REQ(pci, "nvmlDeviceGetPciInfo_v3"),
    OPT(cuda_version, "nvmlSystemGetCudaDriverVersion_v2"),
    OPT(minor, "nvmlDeviceGetMinorNumber"),
    OPT(cc, "nvmlDeviceGetCudaComputeCapability"),
    OPT(mig_mode, "nvmlDeviceGetMigMode"),
    OPT(max_mig, "nvmlDeviceGetMaxMigDeviceCount"),
    OPT(mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex"),
    OPT(gi_id, "nvmlDeviceGetGpuInstanceId"),
    OPT(ci_id, "nvmlDeviceGetComputeInstanceId"),
    OPT(attrs, "nvmlDeviceGetAttributes_v2"),
    OPT(link_state, "nvmlDeviceGetNvLinkState"),
    OPT(link_remote, "nvmlDeviceGetNvLinkRemotePciInfo_v2"),
    OPT(util, "nvmlDeviceGetUtilizationRates"),
    OPT(enc, "nvmlDeviceGetEncoderUtilization"),
    OPT(dec, "nvmlDeviceGetDecoderUtilization"),
    OPT(temp, "nvmlDeviceGetTemperature"),
    OPT(power, "nvmlDeviceGetPowerUsage"),
    OPT(energy, "nvmlDeviceGetTotalEnergyConsumption"),
    OPT(clock, "nvmlDeviceGetClockInfo"),
    OPT(ecc, "nvmlDeviceGetTotalEccErrors"),
    OPT(replay, "nvmlDeviceGetPcieReplayCounter"),
    OPT(remapped, "nvmlDeviceGetRemappedRows"),
    OPT(ev_create, "nvmlEventSetCreate"),
    OPT(ev_register, "nvmlDeviceRegisterEvents"),
    OPT(ev_wait, "nvmlEventSetWait_v2"),
    OPT(ev_free, "nvmlEventSetFree"),
#undef REQ
#undef OPT
};

struct nvml {
    void *lib;
    struct api f;
    char sysfs[256];
    unsigned n;
    nvmlDevice_t dev[GS_DISC_MAX_GPUS];
    nvmlEventSet_t events; /* NULL when the driver offers no events */
    bool inited;           /* nvmlInit_v2 succeeded: nvmlShutdown owed */
};

/*--- Loading ---*/

static const char *nv_err(struct nvml *v, nvmlReturn_t rc)
{
    const char *s = v->f.error_string ? v->f.error_string(rc) : NULL;
    return s ? s : "unknown NVML error";
}

static int load_symbols(struct gs_disc *d, struct nvml *v)
{
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *p = dlsym(v->lib, syms[i].sym);
        if (!p && syms[i].required) {
            snprintf(d->err, sizeof d->err, "NVML library lacks %s (driver too old?)", syms[i].sym);
            return GS_EUNSUPPORTED;
        }
        /* POSIX guarantees object and function pointers share a representation. */
        memcpy((char *)&v->f + syms[i].off, &p, sizeof p);
    }
    return 0;
}

static void setup_events(struct nvml *v)
{
    if (!v->f.ev_create || !v->f.ev_register || !v->f.ev_wait || !v->f.ev_free) return;
    if (v->f.ev_create(&v->events) != NVML_SUCCESS) {
        v->events = NULL;
        return;
    }
    unsigned registered = 0;
    for (unsigned i = 0; i < v->n; i++)
        /* Per device: some GPUs (or vGPUs) refuse event registration; they just get no events. */
        if (v->f.ev_register(v->dev[i], NVML_EVENT_XID | NVML_EVENT_DBE, v->events) == NVML_SUCCESS) registered++;
    if (!registered) {
        v->f.ev_free(v->events);
        v->events = NULL;
    }
}

static int open_devices(struct gs_disc *d, struct nvml *v)
{
    unsigned n = 0;
    nvmlReturn_t rc = v->f.count(&n);
    if (rc != NVML_SUCCESS) {
        snprintf(d->err, sizeof d->err, "nvmlDeviceGetCount_v2: %s", nv_err(v, rc));
        return GS_EIO;
    }
    if (n > GS_DISC_MAX_GPUS) n = GS_DISC_MAX_GPUS;
    for (unsigned i = 0; i < n; i++)
        if ((rc = v->f.handle(i, &v->dev[i])) != NVML_SUCCESS) {
            snprintf(d->err, sizeof d->err, "nvmlDeviceGetHandleByIndex_v2(%u): %s", i, nv_err(v, rc));
            return GS_EIO;
        }
    v->n = n;
    return 0;
}

/*--- Inventory ---*/

/* Reports a failed required call on GPU i. */
static int fail(struct gs_disc *d, struct nvml *v, const char *call, unsigned i, nvmlReturn_t rc)
{
    snprintf(d->err, sizeof d->err, "%s(GPU %u): %s", call, i, nv_err(v, rc));
    return GS_EIO;
}

/* "NVIDIA A100-SXM4-40GB MIG 1g.5gb" -> "1g.5gb". */
static void mig_profile_from_name(const char *name, char *out, size_t len)
{
    const char *p = strstr(name, "MIG ");
    snprintf(out, len, "%.31s", p ? p + 4 : name);
}

static void read_mig(struct nvml *v, nvmlDevice_t dev, struct gs_disc_gpu *g)
{
    unsigned cur = 0, pend = 0, max = 0;
    if (!v->f.mig_mode || v->f.mig_mode(dev, &cur, &pend) != NVML_SUCCESS) return;
    g->mig_capable = true;
    g->mig_enabled = cur == 1;
    if (!g->mig_enabled || !v->f.max_mig || !v->f.mig_handle || v->f.max_mig(dev, &max) != NVML_SUCCESS) return;
    for (unsigned k = 0; k < max && g->n_mig < GS_DISC_MAX_MIG; k++) {
        nvmlDevice_t m;
        char name[96];
        nvmlMemory_t mem;
        if (v->f.mig_handle(dev, k, &m) != NVML_SUCCESS) continue; /* NOT_FOUND: slot unused */
        struct gs_disc_mig *mi = &g->mig[g->n_mig];
        memset(mi, 0, sizeof *mi);
        if (v->f.uuid(m, mi->uuid, sizeof mi->uuid) != NVML_SUCCESS) continue;
        if (v->f.name(m, name, sizeof name) == NVML_SUCCESS) mig_profile_from_name(name, mi->profile, sizeof mi->profile);
        if (v->f.memory(m, &mem) == NVML_SUCCESS) mi->memory_mib = mem.total >> 20;
        if (v->f.gi_id) v->f.gi_id(m, &mi->gi_id);
        if (v->f.ci_id) v->f.ci_id(m, &mi->ci_id);
        nvmlDeviceAttributes_t a;
        if (v->f.attrs && v->f.attrs(m, &a) == NVML_SUCCESS) {
            mi->multiprocessors = a.multiprocessorCount;
            mi->slices_gi = a.gpuInstanceSliceCount;
            mi->slices_ci = a.computeInstanceSliceCount;
            mi->engines_copy = a.sharedCopyEngineCount;
            mi->engines_decoder = a.sharedDecoderCount;
            mi->engines_encoder = a.sharedEncoderCount;
            mi->engines_jpeg = a.sharedJpegCount;
            mi->engines_ofa = a.sharedOfaCount;
        }
        g->n_mig++;
    }
}

/* Counts active links per peer; links to something that is not one of our GPUs
 * (an NVSwitch) are counted in *switched. */
static void read_links(struct nvml *v, struct gs_inventory *inv, int i, unsigned *switched)
{
    *switched = 0;
    if (!v->f.link_state || !v->f.link_remote) return;
    for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
        unsigned active = 0;
        nvmlPciInfo_t pci;
        if (v->f.link_state(v->dev[i], l, &active) != NVML_SUCCESS || !active) continue;
        if (v->f.link_remote(v->dev[i], l, &pci) != NVML_SUCCESS) continue;
        int peer = -1;
        for (int j = 0; j < inv->n_gpus; j++)
            if (j != i && !strcasecmp(inv->gpus[j].pci_bus_id, pci.busId)) peer = j;
        if (peer >= 0 && inv->gpus[i].nvlink[peer] < 255) inv->gpus[i].nvlink[peer]++;
        else if (peer < 0) (*switched)++;
    }
}

/* GPUs behind NVSwitches reach each other all-to-all. */
static void read_nvlink(struct nvml *v, struct gs_inventory *inv)
{
    unsigned sw[GS_DISC_MAX_GPUS];
    for (int i = 0; i < inv->n_gpus; i++) read_links(v, inv, i, &sw[i]);
    for (int i = 0; i < inv->n_gpus; i++)
        for (int j = 0; j < inv->n_gpus; j++)
            if (i != j && sw[i] && sw[j] && !inv->gpus[i].nvlink[j]) inv->gpus[i].nvlink[j] = (uint8_t)(sw[i] > 255 ? 255 : sw[i]);
}

static int read_gpu(struct gs_disc *d, struct nvml *v, unsigned i, struct gs_disc_gpu *g)
{
    nvmlDevice_t dev = v->dev[i];
    nvmlReturn_t rc;
    nvmlMemory_t mem;
    nvmlPciInfo_t pci;
    memset(g, 0, sizeof *g);
    g->index = (int)i;
    g->minor = -1;
    if ((rc = v->f.uuid(dev, g->uuid, sizeof g->uuid)) != NVML_SUCCESS) return fail(d, v, "nvmlDeviceGetUUID", i, rc);
    if ((rc = v->f.name(dev, g->name, sizeof g->name)) != NVML_SUCCESS) return fail(d, v, "nvmlDeviceGetName", i, rc);
    if ((rc = v->f.memory(dev, &mem)) != NVML_SUCCESS) return fail(d, v, "nvmlDeviceGetMemoryInfo", i, rc);
    if ((rc = v->f.pci(dev, &pci)) != NVML_SUCCESS) return fail(d, v, "nvmlDeviceGetPciInfo_v3", i, rc);
    g->uuid[sizeof g->uuid - 1] = g->name[sizeof g->name - 1] = 0;
    pci.busId[sizeof pci.busId - 1] = 0;
    g->memory_mib = mem.total >> 20;
    snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%s", pci.busId);
    g->pci_device_id = pci.pciDeviceId;
    unsigned minor;
    if (v->f.minor && v->f.minor(dev, &minor) == NVML_SUCCESS) g->minor = (int)minor;
    int major = 0, mnr = 0;
    if (v->f.cc && v->f.cc(dev, &major, &mnr) == NVML_SUCCESS) g->cc_major = major, g->cc_minor = mnr;
    g->numa_node = gs__sysfs_gpu_numa(v->sysfs, g->pci_bus_id);
    read_mig(v, dev, g);
    return 0;
}

static int nvml_inventory(struct gs_disc *d, struct gs_inventory *inv)
{
    struct nvml *v = d->impl;
    nvmlReturn_t rc;
    memset(inv, 0, sizeof *inv);
    snprintf(inv->backend, sizeof inv->backend, "nvml");
    if ((rc = v->f.driver_version(inv->driver_version, sizeof inv->driver_version)) != NVML_SUCCESS) {
        snprintf(d->err, sizeof d->err, "nvmlSystemGetDriverVersion: %s", nv_err(v, rc));
        return GS_EIO;
    }
    inv->driver_version[sizeof inv->driver_version - 1] = 0;
    int cuda = 0;
    if (v->f.cuda_version && v->f.cuda_version(&cuda) == NVML_SUCCESS) inv->cuda_version = cuda;
    for (unsigned i = 0; i < v->n; i++) {
        int err = read_gpu(d, v, i, &inv->gpus[i]);
        if (err) return err;
    }
    inv->n_gpus = (int)v->n;
    read_nvlink(v, inv);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    gs__sysfs_numa(v->sysfs, inv, cpus > 0 ? (int)cpus : 1);
    gs__sysfs_machine(v->sysfs, inv->machine, sizeof inv->machine);
    gs__inventory_defaults(inv);
    return 0;
}

/*--- Samples and events ---*/

static void sample_clocks_ecc(struct nvml *v, nvmlDevice_t dev, struct gs_sample *s)
{
    unsigned a, b, c, e;
    if (v->f.clock && v->f.clock(dev, NVML_CLOCK_SM, &a) == NVML_SUCCESS &&
        v->f.clock(dev, NVML_CLOCK_MEM, &b) == NVML_SUCCESS) {
        s->sm_clock_mhz = a, s->mem_clock_mhz = b;
        s->have |= GS_SF_CLOCKS;
    }
    if (v->f.ecc && v->f.ecc(dev, NVML_MEMORY_ERROR_CORRECTED, NVML_VOLATILE_ECC, (unsigned long long *)&s->ecc_sbe_vol) == NVML_SUCCESS &&
        v->f.ecc(dev, NVML_MEMORY_ERROR_UNCORRECTED, NVML_VOLATILE_ECC, (unsigned long long *)&s->ecc_dbe_vol) == NVML_SUCCESS &&
        v->f.ecc(dev, NVML_MEMORY_ERROR_CORRECTED, NVML_AGGREGATE_ECC, (unsigned long long *)&s->ecc_sbe_agg) == NVML_SUCCESS &&
        v->f.ecc(dev, NVML_MEMORY_ERROR_UNCORRECTED, NVML_AGGREGATE_ECC, (unsigned long long *)&s->ecc_dbe_agg) == NVML_SUCCESS)
        s->have |= GS_SF_ECC;
    if (v->f.replay && v->f.replay(dev, &a) == NVML_SUCCESS) s->pcie_replay = a, s->have |= GS_SF_PCIE_REPLAY;
    if (v->f.remapped && v->f.remapped(dev, &a, &b, &c, &e) == NVML_SUCCESS) {
        s->remap_corr = a, s->remap_uncorr = b, s->remap_failure = e != 0;
        s->have |= GS_SF_REMAP;
    }
}

static int nvml_sample(struct gs_disc *d, int gpu, struct gs_sample *s)
{
    struct nvml *v = d->impl;
    if (gpu < 0 || (unsigned)gpu >= v->n) return GS_EINVAL;
    nvmlDevice_t dev = v->dev[gpu];
    nvmlMemory_t mem;
    memset(s, 0, sizeof *s);
    nvmlReturn_t rc = v->f.memory(dev, &mem);
    if (rc != NVML_SUCCESS) { /* the query every GPU supports: failing it means "not answering" */
        snprintf(d->err, sizeof d->err, "nvmlDeviceGetMemoryInfo(GPU %d): %s", gpu, nv_err(v, rc));
        return GS_EIO;
    }
    s->fb_used_mib = mem.used >> 20, s->fb_free_mib = mem.free >> 20;
    s->fb_reserved_mib = (mem.total - mem.free - mem.used) >> 20;
    s->have = GS_SF_MEMORY;
    nvmlUtilization_t u;
    unsigned a, b, period;
    unsigned long long e;
    if (v->f.util && v->f.util(dev, &u) == NVML_SUCCESS) s->util_gpu = u.gpu, s->util_mem = u.memory, s->have |= GS_SF_UTIL;
    if (v->f.enc && v->f.dec && v->f.enc(dev, &a, &period) == NVML_SUCCESS && v->f.dec(dev, &b, &period) == NVML_SUCCESS)
        s->util_enc = a, s->util_dec = b, s->have |= GS_SF_ENCDEC;
    if (v->f.temp && v->f.temp(dev, NVML_TEMPERATURE_GPU, &a) == NVML_SUCCESS) s->temp_c = a, s->have |= GS_SF_TEMP;
    if (v->f.power && v->f.power(dev, &a) == NVML_SUCCESS) s->power_w = a / 1000.0, s->have |= GS_SF_POWER;
    if (v->f.energy && v->f.energy(dev, &e) == NVML_SUCCESS) s->energy_mj = e, s->have |= GS_SF_ENERGY;
    sample_clocks_ecc(v, dev, s);
    return 0;
}

static int nvml_poll_event(struct gs_disc *d, int timeout_ms, struct gs_event *ev)
{
    struct nvml *v = d->impl;
    if (!v->events) return GS_EUNSUPPORTED;
    nvmlEventData_t data;
    memset(&data, 0, sizeof data);
    nvmlReturn_t rc = v->f.ev_wait(v->events, &data, timeout_ms < 0 ? 0 : (unsigned)timeout_ms);
    if (rc == NVML_ERROR_TIMEOUT) return GS_ETIMEDOUT;
    int64_t now = d->clock ? gs_clock_now(d->clock) : 0;
    if (rc == NVML_ERROR_GPU_IS_LOST) {
        *ev = (struct gs_event){.kind = GS_EV_LOST, .gpu = -1, .t_ns = now};
        return 0;
    }
    if (rc != NVML_SUCCESS) {
        snprintf(d->err, sizeof d->err, "nvmlEventSetWait_v2: %s", nv_err(v, rc));
        return GS_EIO;
    }
    int gpu = -1;
    for (unsigned i = 0; i < v->n; i++)
        if (v->dev[i] == data.device) gpu = (int)i;
    if (data.eventType & NVML_EVENT_XID) *ev = (struct gs_event){GS_EV_XID, gpu, data.eventData, now};
    else if (data.eventType & NVML_EVENT_DBE) *ev = (struct gs_event){GS_EV_ECC_DBE, gpu, 1, now};
    else return GS_ETIMEDOUT; /* a type we did not ask for */
    return 0;
}

/*--- Open and close ---*/

static void nvml_close(struct gs_disc *d)
{
    struct nvml *v = d->impl;
    if (!v) return;
    if (v->events) v->f.ev_free(v->events);
    if (v->inited) v->f.shutdown();
    if (v->lib) dlclose(v->lib);
    free(v);
}

static const struct gs_disc_ops nvml_ops = {
    .name = "nvml",
    .inventory = nvml_inventory,
    .sample = nvml_sample,
    .poll_event = nvml_poll_event,
    .close = nvml_close,
};

int gs_disc_open_nvml(struct gs_disc *d, const char *libpath, const char *sysfs_root, const struct gs_clock *clock)
{
    memset(d, 0, sizeof *d);
    d->clock = clock;
    struct nvml *v = calloc(1, sizeof *v);
    if (!v) return GS_ENOMEM;
    snprintf(v->sysfs, sizeof v->sysfs, "%s", sysfs_root ? sysfs_root : "/sys");
    v->lib = dlopen(libpath ? libpath : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!v->lib) {
        const char *e = dlerror();
        snprintf(d->err, sizeof d->err, "cannot load NVML: %.120s", e ? e : "not found");
        free(v);
        return GS_ENOENT;
    }
    int rc = load_symbols(d, v);
    if (!rc) {
        nvmlReturn_t nrc = v->f.init();
        if (nrc != NVML_SUCCESS) {
            snprintf(d->err, sizeof d->err, "nvmlInit_v2: %s", nv_err(v, nrc));
            rc = GS_EIO;
        } else {
            v->inited = true;
        }
    }
    if (!rc) rc = open_devices(d, v);
    if (rc) {
        d->impl = v;
        nvml_close(d);
        d->impl = NULL;
        return rc;
    }
    setup_events(v);
    d->ops = &nvml_ops;
    d->impl = v;
    return 0;
}
