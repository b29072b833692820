/*
 * sysfs.c - the sysfs backend: NVIDIA PCI devices and NUMA layout without NVML.
 *
 * Reads only plain files under a root directory ("/sys" on a real machine, a
 * fake tree under tests/data in the tests):
 *   bus/pci/devices/<dddd:bb:dd.f>/{vendor,device,class,numa_node}
 *   devices/system/node/node<N>/{cpulist,distance}
 *   class/dmi/id/product_name
 * It knows no names, memory or metrics (a small PCI id table gives names for
 * common models), so its inventory is enough for NFD's pci-10de label, NUMA
 * zones and a cross-check of NVML's GPU count, not for the exporter. The NUMA
 * and DMI helpers are shared with the NVML backend.
 */
#include "discovery/discovery.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- Small file readers ---*/

/* Reads the first line of root/rel into buf (no newline). 0 or GS_ENOENT. */
static int read_line(const char *root, const char *rel, char *buf, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "re");
    if (!f) return GS_ENOENT;
    if (!fgets(buf, (int)len, f)) buf[0] = 0;
    fclose(f);
    buf[strcspn(buf, "\r\n")] = 0;
    return 0;
}

/* Counts the CPUs in a cpulist such as "0-15,32-47". */
static int cpulist_count(const char *s)
{
    int n = 0;
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10);
        if (end == s) break;
        long b = a;
        if (*end == '-') {
            s = end + 1;
            b = strtol(s, &end, 10);
            if (end == s) break;
        }
        if (b >= a && b - a < 65536) n += (int)(b - a + 1);
        s = end;
        if (*s == ',') s++;
        else break;
    }
    return n;
}

/*--- Shared helpers ---*/

void gs__sysfs_numa(const char *root, struct gs_inventory *inv, int fallback_cpus)
{
    char rel[128], line[512];
    int found = 0;
    for (int n = 0; n < GS_DISC_MAX_NUMA; n++) {
        snprintf(rel, sizeof rel, "devices/system/node/node%d/cpulist", n);
        if (read_line(root, rel, line, sizeof line) != 0) continue;
        inv->numa_cpus[n] = cpulist_count(line);
        found = n + 1;
        snprintf(rel, sizeof rel, "devices/system/node/node%d/distance", n);
        if (read_line(root, rel, line, sizeof line) == 0) {
            char *p = line;
            for (int m = 0; m < GS_DISC_MAX_NUMA && *p; m++) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p) break;
                inv->numa_distance[n][m] = (int)v;
                p = end;
            }
        }
    }
    if (found) {
        inv->n_numa = found;
        return;
    }
    inv->n_numa = 1;
    inv->numa_cpus[0] = fallback_cpus;
    inv->numa_distance[0][0] = 10;
}

int gs__sysfs_gpu_numa(const char *root, const char *nvml_bus_id)
{
    char name[64], rel[160], line[64];
    gs_pci_sysfs_name(nvml_bus_id, name, sizeof name);
    snprintf(rel, sizeof rel, "bus/pci/devices/%s/numa_node", name);
    if (read_line(root, rel, line, sizeof line) != 0 || !line[0]) return -1;
    long v = strtol(line, NULL, 10);
    return v < 0 || v >= GS_DISC_MAX_NUMA ? -1 : (int)v;
}

void gs__sysfs_machine(const char *root, char *buf, size_t len)
{
    if (read_line(root, "class/dmi/id/product_name", buf, len) != 0 || !buf[0])
        snprintf(buf, len, "unknown");
}

/*--- PCI scan ---*/

struct pci_fn {
    char name[64];
    unsigned device;
    unsigned klass;
};

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct pci_fn *)a)->name, ((const struct pci_fn *)b)->name);
}

/* NVIDIA display controllers (class 0x0300 VGA or 0x0302 3D) under root, sorted
 * by bus id (NVML's default enumeration order). Returns the count, or -1. */
static int scan_pci(const char *root, struct pci_fn *out, int max)
{
    char dir[512], rel[160], line[64];
    snprintf(dir, sizeof dir, "%s/bus/pci/devices", root);
    DIR *dp = opendir(dir);
    if (!dp) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) && n < max) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof out[0].name) continue;
        snprintf(rel, sizeof rel, "bus/pci/devices/%.63s/vendor", e->d_name);
        if (read_line(root, rel, line, sizeof line) != 0 || strtoul(line, NULL, 16) != 0x10de) continue;
        snprintf(rel, sizeof rel, "bus/pci/devices/%.63s/class", e->d_name);
        if (read_line(root, rel, line, sizeof line) != 0) continue;
        unsigned klass = (unsigned)(strtoul(line, NULL, 16) >> 8);
        if (klass != 0x0300 && klass != 0x0302) continue; /* skips NVSwitch bridges and HDMI audio */
        struct pci_fn *f = &out[n++];
        snprintf(f->name, sizeof f->name, "%.63s", e->d_name);
        f->klass = klass;
        snprintf(rel, sizeof rel, "bus/pci/devices/%.63s/device", e->d_name);
        f->device = read_line(root, rel, line, sizeof line) == 0 ? (unsigned)strtoul(line, NULL, 16) : 0;
    }
    closedir(dp);
    qsort(out, (size_t)n, sizeof *out, by_name);
    return n;
}

int gs_sysfs_nvidia_present(const char *root)
{
    struct pci_fn fns[GS_DISC_MAX_GPUS];
    return scan_pci(root ? root : "/sys", fns, GS_DISC_MAX_GPUS);
}

/* A few PCI device ids, so a node without NVML still shows model names. */
static const struct {
    unsigned id;
    const char *name;
    int major, minor;
} pci_ids[] = {
    {0x2330, "NVIDIA H100 80GB HBM3", 9, 0}, {0x2331, "NVIDIA H100 PCIe", 9, 0},
    {0x2335, "NVIDIA H200", 9, 0},           {0x20b0, "NVIDIA A100-SXM4-40GB", 8, 0},
    {0x20b2, "NVIDIA A100-SXM4-80GB", 8, 0}, {0x20b5, "NVIDIA A100 80GB PCIe", 8, 0},
    {0x2236, "NVIDIA A10", 8, 6},            {0x27b8, "NVIDIA L4", 8, 9},
    {0x26b9, "NVIDIA L40S", 8, 9},           {0x1eb8, "Tesla T4", 7, 5},
    {0x1db1, "Tesla V100-SXM2-16GB", 7, 0},  {0x1db5, "Tesla V100-SXM2-32GB", 7, 0},
    {0x15f8, "Tesla P100-PCIE-16GB", 6, 0},
};

static void fill_gpu(const char *root, const struct pci_fn *f, int index, struct gs_disc_gpu *g)
{
    memset(g, 0, sizeof *g);
    g->index = index;
    g->minor = -1;
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    sscanf(f->name, "%x:%x:%x.%x", &dom, &bus, &dev, &fn);
    snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%08X:%02X:%02X.%X", dom, bus, dev, fn);
    g->pci_device_id = f->device << 16 | 0x10de;
    g->pci_graphics = f->klass == 0x0300;
    g->numa_node = gs__sysfs_gpu_numa(root, g->pci_bus_id);
    snprintf(g->name, sizeof g->name, "NVIDIA device 0x%04x", f->device);
    for (size_t i = 0; i < sizeof pci_ids / sizeof pci_ids[0]; i++)
        if (pci_ids[i].id == f->device) {
            snprintf(g->name, sizeof g->name, "%s", pci_ids[i].name);
            g->cc_major = pci_ids[i].major;
            g->cc_minor = pci_ids[i].minor;
        }
}

/*--- Backend ---*/

struct sysfs_impl {
    char root[256];
};

static int sysfs_inventory(struct gs_disc *d, struct gs_inventory *inv)
{
    struct sysfs_impl *s = d->impl;
    struct pci_fn fns[GS_DISC_MAX_GPUS];
    memset(inv, 0, sizeof *inv);
    snprintf(inv->backend, sizeof inv->backend, "sysfs");
    int n = scan_pci(s->root, fns, GS_DISC_MAX_GPUS);
    if (n < 0) {
        snprintf(d->err, sizeof d->err, "cannot read %.100s/bus/pci/devices", s->root);
        return GS_EIO;
    }
    for (int i = 0; i < n; i++) fill_gpu(s->root, &fns[i], i, &inv->gpus[i]);
    inv->n_gpus = n;
    gs__sysfs_numa(s->root, inv, 0);
    gs__sysfs_machine(s->root, inv->machine, sizeof inv->machine);
    gs__inventory_defaults(inv);
    return 0;
}

static void sysfs_close(struct gs_disc *d)
{
    free(d->impl);
}

static const struct gs_disc_ops sysfs_ops = {
    .name = "sysfs",
    .inventory = sysfs_inventory,
    .close = sysfs_close,
};

int gs_disc_open_sysfs(struct gs_disc *d, const char *root, const struct gs_clock *clock)
{
    memset(d, 0, sizeof *d);
    d->clock = clock;
    struct sysfs_impl *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    snprintf(s->root, sizeof s->root, "%s", root ? root : "/sys");
    char dir[300];
    snprintf(dir, sizeof dir, "%s/bus/pci/devices", s->root);
    DIR *dp = opendir(dir);
    if (!dp) {
        snprintf(d->err, sizeof d->err, "no PCI tree at %.120s", dir);
        free(s);
        return GS_ENOENT;
    }
    closedir(dp);
    d->ops = &sysfs_ops;
    d->impl = s;
    return 0;
}
