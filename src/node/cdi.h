/*
 * cdi.h - the CDI spec file for the node's GPUs, read by CDI-aware container
 * runtimes (containerd, CRI-O, podman) to turn "nvidia.com/gpu=<UUID>" into
 * device nodes, mounts and environment.
 *
 * Shape (CDI spec 0.5.0, the oldest version that allows device names
 * starting with a digit and hostPath on device nodes, both used here):
 *   cdiVersion, kind "nvidia.com/gpu",
 *   devices: one per GPU named by UUID, one per GPU named by index, and
 *            "all"; each with containerEdits.deviceNodes for /dev/nvidia<minor>;
 *   containerEdits (applied with any device): env NVIDIA_VISIBLE_DEVICES=void
 *            (so an image's own "all" cannot widen the grant through the
 *            NVIDIA runtime), deviceNodes /dev/nvidiactl, /dev/nvidia-uvm,
 *            /dev/nvidia-uvm-tools, and read-only bind mounts of the driver
 *            files the caller lists.
 * The file is replaced atomically (temporary file in the same directory,
 * fsync, rename), so a runtime never reads half a spec.
 */
#ifndef GS_NODE_CDI_H
#define GS_NODE_CDI_H

#include "node/gpus.h"

#include <stddef.h>

#define GS_CDI_VERSION "0.5.0"
#define GS_CDI_DEFAULT_DIR "/var/run/cdi"

struct gs_cdi_mount {
    const char *host_path;
    const char *container_path;   /* NULL = same as host_path */
};

struct gs_cdi_opts {
    const char *kind;             /* NULL = "nvidia.com/gpu" */
    const struct gs_cdi_mount *mounts;
    size_t n_mounts;
};

/* The spec as pretty JSON. *out is malloc'd (caller frees). 0 or GS_ENOMEM. */
int gs_cdi_spec_json(const struct gs_node_gpus *g, const struct gs_cdi_opts *o, char **out);

/* The file name for a kind: "nvidia.com/gpu" -> "nvidia.com-gpu.json". */
void gs_cdi_file_name(const char *kind, char *buf, size_t len);

/* Writes the spec into dir (created if missing) atomically. path (may be
 * NULL) gets the file written. 0, or GS_EIO with errno kept. */
int gs_cdi_write(const char *dir, const struct gs_node_gpus *g, const struct gs_cdi_opts *o, char *path,
                 size_t pathlen);

/* Writes text as dir/name (dir created if missing) the same atomic way; for
 * other specs (the DRA plugin's per-claim specs) and checkpoints. 0 or GS_EIO. */
int gs_cdi_write_text(const char *dir, const char *name, const char *text, char *path, size_t pathlen);

#endif
