/*
 * gpus.h - the node's GPUs as layer 3 sees them: identity, device node,
 * NUMA node, NVLink wiring and health, plus the device IDs handed to kubelet.
 *
 * Layer 1 (src/discovery/) knows far more about a GPU; the device plugin,
 * Allocate, GetPreferredAllocation and the CDI writer need only this table,
 * so they are tested without a discovery backend. gpus_disc.c fills it from a
 * discovery inventory.
 *
 * Device IDs: the GPU UUID, or "UUID::k" (k = 0..replicas-1) when each GPU is
 * shared by time-slicing into `replicas` schedulable units, as NVIDIA's plugin
 * names its replicas.
 *
 * A table may also hold MIG devices instead of GPUs (the device plugin's
 * MIG strategies, gpus_disc.h): each entry is then one MIG instance, with its
 * MIG UUID, and the index, minor and NUMA node of the GPU it lives on.
 *
 * Not thread-safe by itself: the device plugin guards its copy with a mutex.
 */
#ifndef GS_NODE_GPUS_H
#define GS_NODE_GPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_NODE_MAX_GPUS 64  /* entries: 8 GPUs of 7 MIG instances fit */
#define GS_NODE_MAX_REPLICAS 64
#define GS_NODE_ID_MAX 128   /* buffer size of one device ID */

struct gs_node_gpu {
    char uuid[96];   /* "GPU-8f6b..." */
    int index;       /* 0-based, as NVML numbers them */
    int minor;       /* /dev/nvidia<minor> */
    int numa;        /* NUMA node, -1 when unknown */
    int island;      /* NVLink island (connected component), set by gs_node_gpus_finish */
    int parent;      /* inventory slot of the physical GPU (itself for a GPU); set by the builders */
    bool healthy;
    int gi, ci;      /* MIG device: GPU / compute instance ids (capability nodes, migcaps.h) */
};

struct gs_node_gpus {
    int n;
    struct gs_node_gpu gpu[GS_NODE_MAX_GPUS];
    uint8_t nvlink[GS_NODE_MAX_GPUS][GS_NODE_MAX_GPUS]; /* links between GPU i and j, by table slot */
    int replicas;    /* >= 1; 1 = whole GPUs */
    bool mig;        /* the entries are MIG devices */
};

/* Computes islands from the NVLink matrix and clamps replicas to >= 1. Call
 * after filling the table by hand. */
void gs_node_gpus_finish(struct gs_node_gpus *g);

/* Number of device IDs the table exposes: n * replicas. */
int gs_node_gpus_ndev(const struct gs_node_gpus *g);

/* Writes device ID number i (0 .. ndev-1) into buf; GPU-major order, so the
 * replicas of one GPU are adjacent. Returns the GPU slot. */
int gs_node_gpus_id(const struct gs_node_gpus *g, int i, char *buf, size_t len);

/* The GPU slot a device ID names, or -1 when the ID is not ours (wrong UUID,
 * a replica suffix when there are no replicas, a replica out of range).
 * *replica (may be NULL) gets the replica number, 0 for whole GPUs. */
int gs_node_gpus_find(const struct gs_node_gpus *g, const char *id, int *replica);

/* Marks the GPU with this slot healthy or not. Returns true when it changed. */
bool gs_node_gpus_set_health(struct gs_node_gpus *g, int slot, bool healthy);
/* Marks every entry on the physical GPU `parent` (its inventory slot): the
 * GPU itself, or all its MIG devices. Returns true when one changed. */
bool gs_node_gpus_set_parent_health(struct gs_node_gpus *g, int parent, bool healthy);

/* Fills a table with n mock GPUs for tests and tools: UUIDs
 * "GPU-00000000-0000-0000-0000-0000000000NN", minors 0..n-1, NUMA nodes split
 * evenly over `numa` nodes, NVLink islands of `island` GPUs each (0 = none),
 * 12 links between GPUs of one island. */
void gs_node_gpus_mock(struct gs_node_gpus *g, int n, int numa, int island, int replicas);

#endif
