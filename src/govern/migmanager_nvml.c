/*
 * migmanager_nvml.c - the MIG manager's NVML backend: what `nvidia-smi mig`
 * and mig-parted do, through libnvidia-ml.so.1 loaded with dlopen (the build
 * needs no NVIDIA files, as in src/discovery/nvml.c).
 *
 * Applying a layout to one GPU: destroy its compute and GPU instances, set
 * MIG mode (a mode change the driver leaves pending until a GPU reset is
 * reported as such, not hidden), then create one GPU instance per wanted
 * device - the GPU instance profile whose slice count and memory name match
 * "<g>g.<m>gb" - each with the compute instance that spans it. NVML
 * initialises reference-counted, so this handle coexists with discovery's.
 *
 * Profiles are listed by index (NVML_GPU_INSTANCE_PROFILE_*, 0..) but
 * instances are created and listed by the profile's ID, which differs
 * (on A100 and H100 the 1-slice profile, index 0, has ID 19): every lookup
 * goes index -> info.id. The memory part of a profile's name is worked out
 * as NVIDIA's go-nvlib does (the instance's share of the GPU's memory
 * rounded up to eighths, times the GPU's memory in whole GiB), so 79.25 GiB
 * of an 80 GB H100 is "7g.80gb".
 *
 * Verified against the fake libnvidia-ml.so.1 of the tests (tests/fakenvml,
 * modelled on A100-40GB and H100-80GB profile tables); not yet on real GPUs.
 */
#include "govern/migmanager.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvret;
typedef void *nvdev, *nvgi, *nvci;

struct gi_info {
    unsigned id, p2p, slices, instances, sms, ce, dec, enc, jpg, ofa;
    unsigned long long mem_mb;
};
struct ci_info {
    unsigned id, slices, instances, sms, ce, dec, enc, jpg, ofa;
};
struct mem_info {
    unsigned long long total, free, used;
};

#define GI_PROFILES 16 /* NVML_GPU_INSTANCE_PROFILE_COUNT and some room */
#define CI_PROFILES 8
#define MAX_INST 8

struct nvm {
    void *lib;
    nvret (*init)(void);
    nvret (*shutdown)(void);
    const char *(*strerr)(nvret);
    nvret (*handle)(unsigned, nvdev *);
    nvret (*mem)(nvdev, struct mem_info *);
    nvret (*set_mode)(nvdev, unsigned, nvret *);
    nvret (*gi_profile)(nvdev, unsigned, struct gi_info *);
    nvret (*gis)(nvdev, unsigned, nvgi *, unsigned *);
    nvret (*gi_create)(nvdev, unsigned, nvgi *);
    nvret (*gi_destroy)(nvgi);
    nvret (*ci_profile)(nvgi, unsigned, unsigned, struct ci_info *);
    nvret (*cis)(nvgi, unsigned, nvci *, unsigned *);
    nvret (*ci_create)(nvgi, unsigned, nvci *);
    nvret (*ci_destroy)(nvci);
};

static const char *nverr(const struct nvm *n, nvret r)
{
    static __thread char buf[32];
    if (n->strerr) return n->strerr(r);
    snprintf(buf, sizeof buf, "NVML error %d", r);
    return buf;
}

#define SYM(f, name) (*(void **)&n->f = dlsym(n->lib, name))

static int load(struct nvm *n, const char *libpath, char *err, size_t len)
{
    n->lib = dlopen(libpath ? libpath : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) return snprintf(err, len, "cannot load NVML: %s", dlerror()), GS_ENOENT;
    SYM(strerr, "nvmlErrorString");
    bool ok = SYM(init, "nvmlInit_v2") && SYM(shutdown, "nvmlShutdown") &&
              SYM(handle, "nvmlDeviceGetHandleByIndex_v2") && SYM(mem, "nvmlDeviceGetMemoryInfo") &&
              SYM(set_mode, "nvmlDeviceSetMigMode") &&
              SYM(gi_profile, "nvmlDeviceGetGpuInstanceProfileInfo") && SYM(gis, "nvmlDeviceGetGpuInstances") &&
              SYM(gi_create, "nvmlDeviceCreateGpuInstance") && SYM(gi_destroy, "nvmlGpuInstanceDestroy") &&
              SYM(ci_profile, "nvmlGpuInstanceGetComputeInstanceProfileInfo") &&
              SYM(cis, "nvmlGpuInstanceGetComputeInstances") &&
              SYM(ci_create, "nvmlGpuInstanceCreateComputeInstance") && SYM(ci_destroy, "nvmlComputeInstanceDestroy");
    if (!ok) {
        snprintf(err, len, "this NVML has no MIG management functions");
        dlclose(n->lib);
        n->lib = NULL;
        return GS_EUNSUPPORTED;
    }
    nvret r = n->init();
    if (r) {
        snprintf(err, len, "nvmlInit: %s", nverr(n, r));
        dlclose(n->lib);
        n->lib = NULL;
        return GS_EIO;
    }
    return 0;
}

/* Destroys every compute instance of gi. */
static void clear_cis(struct nvm *n, nvgi gi)
{
    for (unsigned cp = 0; cp < CI_PROFILES; cp++) {
        struct ci_info info;
        memset(&info, 0, sizeof info);
        if (n->ci_profile(gi, cp, 0, &info)) continue; /* profile absent in this instance */
        nvci ci[MAX_INST];
        unsigned cc = 0;
        if (n->cis(gi, info.id, ci, &cc) || cc > MAX_INST) continue;
        for (unsigned k = 0; k < cc; k++) n->ci_destroy(ci[k]);
    }
}

/* Destroys every compute and GPU instance of dev. */
static int clear(struct nvm *n, nvdev dev, char *err, size_t len)
{
    for (unsigned p = 0; p < GI_PROFILES; p++) {
        struct gi_info info;
        memset(&info, 0, sizeof info);
        if (n->gi_profile(dev, p, &info)) continue; /* profile absent on this GPU, or MIG off */
        nvgi gi[MAX_INST];
        unsigned cnt = 0;
        if (n->gis(dev, info.id, gi, &cnt) || cnt > MAX_INST) continue;
        for (unsigned i = 0; i < cnt; i++) {
            clear_cis(n, gi[i]);
            nvret r = n->gi_destroy(gi[i]);
            if (r) return snprintf(err, len, "cannot destroy a GPU instance: %s (is a process using it?)", nverr(n, r)), GS_EBUSY;
        }
    }
    return 0;
}

/* The "<m>gb" of a profile's name (go-nvlib's getMigMemorySizeGB). */
static unsigned long long name_gb(unsigned long long total_bytes, unsigned long long mem_mb)
{
    const double gib = 1024.0 * 1024 * 1024;
    if (!total_bytes) return (mem_mb + 1023) / 1024;
    double frac = ceil((double)mem_mb * 1024 * 1024 / (double)total_bytes * 8) / 8;
    double total_gb = (double)((total_bytes + (unsigned long long)gib - 1) / (unsigned long long)gib);
    return (unsigned long long)llround(frac * total_gb);
}

/* The GPU instance profile named "<g>g.<m>gb"; the first by index when
 * several match (the plain one before its "+me" media variant). */
static int find_gi(struct nvm *n, nvdev dev, const char *profile, struct gi_info *out)
{
    unsigned g = 0, gb = 0;
    char rest = 0;
    if (sscanf(profile, "%ug.%ugb%c", &g, &gb, &rest) != 2) return GS_EINVAL;
    struct mem_info mem;
    memset(&mem, 0, sizeof mem);
    n->mem(dev, &mem);
    for (unsigned p = 0; p < GI_PROFILES; p++) {
        struct gi_info info;
        memset(&info, 0, sizeof info);
        if (n->gi_profile(dev, p, &info)) continue;
        if (info.slices == g && name_gb(mem.total, info.mem_mb) == gb) {
            *out = info;
            return 0;
        }
    }
    return GS_ENOENT;
}

static int create_one(struct nvm *n, nvdev dev, const char *profile, char *err, size_t len)
{
    struct gi_info gi;
    if (find_gi(n, dev, profile, &gi)) return snprintf(err, len, "this GPU has no MIG profile %s", profile), GS_EINVAL;
    nvgi h;
    nvret r = n->gi_create(dev, gi.id, &h);
    if (r) return snprintf(err, len, "cannot create GPU instance %s: %s", profile, nverr(n, r)), GS_EIO;
    for (unsigned cp = 0; cp < CI_PROFILES; cp++) {
        struct ci_info ci;
        memset(&ci, 0, sizeof ci);
        if (n->ci_profile(h, cp, 0, &ci) || ci.slices != gi.slices) continue;
        /* ci.id, not cp: creation takes the profile's ID. */
        nvci c;
        if ((r = n->ci_create(h, ci.id, &c)))
            return snprintf(err, len, "cannot create the compute instance of %s: %s", profile, nverr(n, r)), GS_EIO;
        return 0;
    }
    return snprintf(err, len, "no compute instance profile spans %s", profile), GS_EINVAL;
}

static int nvml_apply(struct gs_mig_backend *b, int gpu, const struct gs_mig_layout *l, char *err, size_t len)
{
    struct nvm *n = b->impl;
    nvdev dev;
    nvret r = n->handle((unsigned)gpu, &dev);
    if (r) return snprintf(err, len, "no NVML device %d: %s", gpu, nverr(n, r)), GS_ENOENT;
    int e = clear(n, dev, err, len);
    if (e) return e;
    nvret act = 0;
    if ((r = n->set_mode(dev, l->enabled ? 1 : 0, &act)))
        return snprintf(err, len, "cannot set MIG mode: %s", nverr(n, r)), GS_EIO;
    if (act) return snprintf(err, len, "MIG mode change is pending a GPU reset (%s)", nverr(n, act)), GS_ESTATE;
    for (int i = 0; l->enabled && i < l->n; i++)
        for (int k = 0; k < l->v[i].count; k++)
            if ((e = create_one(n, dev, l->v[i].profile, err, len))) return e;
    return 0;
}

static void nvml_close(struct gs_mig_backend *b)
{
    struct nvm *n = b->impl;
    if (!n) return;
    if (n->lib) {
        n->shutdown();
        dlclose(n->lib);
    }
    free(n);
    b->impl = NULL;
}

int gs_mig_backend_open_nvml(struct gs_disc *d, const char *libpath, struct gs_mig_backend *b)
{
    memset(b, 0, sizeof *b);
    b->disc = d;
    struct nvm *n = calloc(1, sizeof *n);
    if (!n) return GS_ENOMEM;
    char err[200];
    int e = load(n, libpath, err, sizeof err);
    if (e) {
        if (d) snprintf(d->err, sizeof d->err, "%.150s", err);
        free(n);
        return e;
    }
    b->name = "nvml";
    b->impl = n;
    b->apply = nvml_apply;
    b->close = nvml_close;
    return 0;
}
