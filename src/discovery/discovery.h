/*
 * discovery.h - layer 1: what GPUs a node has, how they are connected, how
 * they are doing.
 *
 * "What a GPU is" (struct gs_disc_gpu, struct gs_inventory) is kept apart from "how
 * to probe it": three backends fill the same structs through one small vtable
 * (struct gs_disc_ops), like Slurm's gres/gpu versus gpu/nvml:
 *  - nvml.c   loads libnvidia-ml.so.1 with dlopen at run time, so the build and
 *             the binary never need NVIDIA's headers or libraries;
 *  - sysfs.c  PCI devices of vendor 0x10de and their NUMA nodes (no names or
 *             metrics), for the NFD label and as a cross-check without NVML;
 *  - mock.c   GPUs described by a spec string or a YAML/JSON file, with
 *             scripted faults, so the whole stack runs without a GPU.
 * Consumers (labels.c, nrt.c, health.c, exporter.c) only see the structs.
 *
 * Threads: one backend handle may be used from one thread at a time, except
 * that poll_event may run concurrently with sample (NVML is thread-safe and
 * the mock guards its state); the exporter's collector thread does both.
 */
#ifndef GS_DISCOVERY_DISCOVERY_H
#define GS_DISCOVERY_DISCOVERY_H

#include "core/clock.h"
#include "core/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_DISC_MAX_GPUS 32   /* per node; more are refused, keeping metric cardinality bounded */
#define GS_DISC_MAX_MIG 8     /* MIG instances per GPU (7 on A100/H100) */
#define GS_DISC_MAX_NUMA 16
#define GS_XID_MAX 1024       /* Xid codes above this are folded into "other" */

/*--- Static facts ---*/

struct gs_disc_mig {
    char profile[32];      /* "1g.10gb" */
    char uuid[96];         /* "MIG-..." */
    unsigned gi_id, ci_id; /* GPU / compute instance ids */
    uint64_t memory_mib;
    unsigned multiprocessors, slices_gi, slices_ci;
    unsigned engines_copy, engines_decoder, engines_encoder, engines_jpeg, engines_ofa;
};

struct gs_disc_gpu {
    int index;                 /* NVML index, 0-based */
    char uuid[96];             /* "GPU-8f6b..." */
    char name[96];             /* NVML name, "NVIDIA H100 80GB HBM3" */
    char pci_bus_id[32];       /* NVML form, "00000000:3B:00.0" */
    uint32_t pci_device_id;    /* 0x233010de style (device << 16 | vendor) when known, else 0 */
    bool pci_graphics;         /* PCI class 0x0300 (VGA) rather than 0x0302 (3D controller) */
    int minor;                 /* /dev/nvidia<minor>; -1 if unknown */
    int numa_node;             /* -1 if unknown */
    int cc_major, cc_minor;    /* CUDA compute capability; 0.0 if unknown */
    uint64_t memory_mib;       /* total framebuffer */
    bool mig_capable, mig_enabled;
    int n_mig;
    struct gs_disc_mig mig[GS_DISC_MAX_MIG];
    uint8_t nvlink[GS_DISC_MAX_GPUS]; /* number of NVLinks to each other GPU index */
};

struct gs_inventory {
    char backend[16];          /* "nvml", "sysfs", "mock" */
    char hostname[64];
    char machine[64];          /* DMI product name or "unknown" */
    char driver_version[32];   /* "550.54.15"; "" if unknown */
    int cuda_version;          /* NVML form: 12040 = 12.4; 0 if unknown */
    int n_numa;                /* NUMA nodes on the machine (>= 1) */
    int numa_cpus[GS_DISC_MAX_NUMA];                 /* CPUs per NUMA node */
    int numa_distance[GS_DISC_MAX_NUMA][GS_DISC_MAX_NUMA]; /* SLIT distances, 10 = local */
    int n_gpus;
    struct gs_disc_gpu gpus[GS_DISC_MAX_GPUS];
};

/*--- Dynamic values, read on each collection ---*/

/* Bits of gs_sample.have: a backend sets the bit of each value it could read;
 * the exporter emits only those (dcgm-exporter likewise skips blank fields). */
enum gs_sample_field {
    GS_SF_UTIL = 1u << 0,      /* util_gpu, util_mem */
    GS_SF_ENCDEC = 1u << 1,    /* util_enc, util_dec */
    GS_SF_MEMORY = 1u << 2,    /* fb_used, fb_free, fb_reserved */
    GS_SF_TEMP = 1u << 3,
    GS_SF_MEMTEMP = 1u << 4,
    GS_SF_POWER = 1u << 5,
    GS_SF_ENERGY = 1u << 6,
    GS_SF_CLOCKS = 1u << 7,
    GS_SF_ECC = 1u << 8,
    GS_SF_PCIE_REPLAY = 1u << 9,
    GS_SF_NVLINK_BW = 1u << 10,
    GS_SF_REMAP = 1u << 11,
};

struct gs_sample {
    unsigned have;             /* GS_SF_* bits */
    unsigned util_gpu, util_mem, util_enc, util_dec; /* percent */
    uint64_t fb_used_mib, fb_free_mib, fb_reserved_mib;
    unsigned temp_c, mem_temp_c;
    double power_w;
    uint64_t energy_mj;
    unsigned sm_clock_mhz, mem_clock_mhz;
    uint64_t ecc_sbe_vol, ecc_dbe_vol, ecc_sbe_agg, ecc_dbe_agg;
    uint64_t pcie_replay;
    uint64_t nvlink_bw_total;  /* KiB, all links */
    uint64_t remap_corr, remap_uncorr;
    bool remap_failure;
};

/*--- Events (health) ---*/

enum gs_event_kind {
    GS_EV_XID,      /* value = Xid code */
    GS_EV_ECC_DBE,  /* double-bit (uncorrectable) ECC error; value = count */
    GS_EV_LOST,     /* the GPU stopped answering queries */
};

struct gs_event {
    enum gs_event_kind kind;
    int gpu;         /* index; -1 = every GPU (NVML reports some events without a device) */
    uint64_t value;
    int64_t t_ns;    /* when it was seen, on the backend's clock */
};

/*--- Backend vtable ---*/

struct gs_disc;

struct gs_disc_ops {
    const char *name;
    /* Fills the static facts. Called once by each open and again on demand;
     * safe to call repeatedly. Required. */
    int (*inventory)(struct gs_disc *d, struct gs_inventory *inv);
    /* Reads the dynamic values of GPU `gpu` (an index from the inventory).
     * Returns 0 (fields it could not read are left out of s->have), or a
     * negative GS_E* when the GPU does not answer at all (GS_EIO). Optional:
     * NULL means the backend has no metrics (sysfs). Collector thread. */
    int (*sample)(struct gs_disc *d, int gpu, struct gs_sample *s);
    /* Waits up to timeout_ms for the next health event. 0 and *ev filled, or
     * GS_ETIMEDOUT when none came, or another GS_E* on failure. Optional. */
    int (*poll_event)(struct gs_disc *d, int timeout_ms, struct gs_event *ev);
    /* Releases the backend's resources. Required. */
    void (*close)(struct gs_disc *d);
};

/* A backend handle: caller-allocated, filled by one of the gs_disc_open_* calls,
 * released with gs_disc_close. */
struct gs_disc {
    const struct gs_disc_ops *ops;
    void *impl;
    const struct gs_clock *clock; /* borrowed; event timestamps and mock time */
    char err[160];                /* why the last call failed, for people */
};

/* Opens NVML. libpath NULL means "libnvidia-ml.so.1" found by the dynamic
 * loader. sysfs_root (NULL = "/sys") supplies NUMA nodes. GS_ENOENT when the
 * library is absent, GS_EUNSUPPORTED when a required symbol is missing, GS_EIO
 * when NVML fails to initialise; d->err says which. */
int gs_disc_open_nvml(struct gs_disc *d, const char *libpath, const char *sysfs_root,
                      const struct gs_clock *clock);
/* Opens the sysfs backend rooted at root (NULL = "/sys"). */
int gs_disc_open_sysfs(struct gs_disc *d, const char *root, const struct gs_clock *clock);
/* Opens a mock node from a spec string (docs/DISCOVERY.md) or, when spec names
 * an existing file, from that YAML/JSON file. Mock time starts at the clock's
 * current time when opened; faults fire relative to it. GS_EINVAL with d->err. */
int gs_disc_open_mock(struct gs_disc *d, const char *spec, const struct gs_clock *clock);
/* NVML if it loads, otherwise sysfs. */
int gs_disc_open_auto(struct gs_disc *d, const char *sysfs_root, const struct gs_clock *clock);
/* Opens by name: "auto", "nvml", "sysfs" or "mock" (which needs mock_spec);
 * NULL backend means "mock" when mock_spec is given, else "auto". GS_EINVAL
 * for an unknown name, with d->err set. */
int gs_disc_open_named(struct gs_disc *d, const char *backend, const char *mock_spec, const char *sysfs_root,
                       const struct gs_clock *clock);
void gs_disc_close(struct gs_disc *d);

static inline int gs_disc_inventory(struct gs_disc *d, struct gs_inventory *inv)
{
    return d->ops->inventory(d, inv);
}

/*--- Mock backend: spec strings, files and scripted faults (mock.c) ---*/

/* One scripted fault: at `at_ns` after the mock opened, GPU `gpu` (-1 = all)
 * reports an event of `kind` (value: Xid code or DBE count); a GS_EV_LOST
 * fault keeps the GPU from answering for `for_ns` (0 = for good). */
struct gs_fault {
    enum gs_event_kind kind;
    uint64_t value;
    int gpu;
    int64_t at_ns;
    int64_t for_ns;
};

/* Parses one fault, "xid=79@gpu3@t=5s", "dbe@gpu0@t=1s", "lost@gpu2@t=3s@for=10s",
 * "xid=48@all@t=0". 0, or GS_EINVAL with a message in err. */
int gs_fault_parse(const char *s, struct gs_fault *f, char *err, size_t errlen);
/* Parses faults separated by ';', ',' or white space. *v is malloc'd (caller
 * frees; NULL when none). Faults come back sorted by time. */
int gs_fault_script_parse(const char *s, struct gs_fault **v, size_t *n, char *err, size_t errlen);
/* Parses a spec string (never a file) into an inventory and its faults
 * (*faults malloc'd, caller frees). 0, or GS_EINVAL with a message in err. */
int gs_mock_parse(const char *spec, struct gs_inventory *inv, struct gs_fault **faults, size_t *nfaults,
                  char *err, size_t errlen);
/* Adds a fault to an open mock backend; its at_ns counts from the open, as in
 * scripts. GS_EINVAL if d is not a mock or the GPU does not exist. */
int gs_disc_mock_inject(struct gs_disc *d, const struct gs_fault *f);

/* MIG manager hook (src/govern/migmanager.c): re-partitions mock GPU `gpu`
 * to a layout in spec form ("1g.10gb*7", "" = MIG off); later inventories
 * show it. GS_EINVAL (err says why) for a non-mock, a GPU that is not
 * MIG-capable or a bad layout. */
int gs_disc_mock_set_mig(struct gs_disc *d, int gpu, const char *layout, char *err, size_t errlen);

/*--- Helpers shared by the backends (discovery.c) ---*/

/* Parses a duration "5s", "250ms", "2m", "1h", "1.5s", "30" (seconds). 0 or GS_EINVAL. */
int gs_duration_parse(const char *s, int64_t *ns);
/* The NVML-form bus id "00000000:3B:00.0" as sysfs names it, "0000:3b:00.0". */
void gs_pci_sysfs_name(const char *nvml_bus_id, char *out, size_t len);
/* Sets the inventory's hostname from gethostname() when it is empty. */
void gs__inventory_defaults(struct gs_inventory *inv);
/* Fills n_numa, numa_cpus and numa_distance from <root>/devices/system/node.
 * Leaves one node with `fallback_cpus` when the tree is absent. */
void gs__sysfs_numa(const char *root, struct gs_inventory *inv, int fallback_cpus);
/* Reads <root>/bus/pci/devices/<bus>/numa_node; -1 if unknown. */
int gs__sysfs_gpu_numa(const char *root, const char *nvml_bus_id);
/* Reads <root>/class/dmi/id/product_name into buf, or "unknown". */
void gs__sysfs_machine(const char *root, char *buf, size_t len);
/* Counts PCI functions of vendor 0x10de that are display controllers. -1 if
 * the tree cannot be read. */
int gs_sysfs_nvidia_present(const char *root);

#endif
