/*
 * migcaps.h - the MIG capability device nodes a container needs to use a MIG
 * device: /dev/nvidia-caps/nvidia-cap<minor> for its GPU instance's access
 * file and for its compute instance's access file.
 *
 * The driver lists every capability and its minor number in
 * /proc/driver/nvidia-caps/mig-minors, one "<name> <minor>" per line:
 *
 *     config 1
 *     monitor 2
 *     gpu0/gi1/access 12
 *     gpu0/gi1/ci0/access 13
 *
 * where gpu<N> is the GPU's device minor (/dev/nvidia<N>), gi<G> the GPU
 * instance id and ci<C> the compute instance id. Without those nodes a
 * container that sees /dev/nvidia<N> still cannot open the MIG device, so
 * Allocate refuses rather than omitting them (allocate.c).
 *
 * Mock nodes have no such file; gs_migcaps_mock gives minors from a fixed
 * layout shaped like the driver's (9 minors per GPU instance id: its access
 * file, then ci0..ci7; 15 GPU instance ids per GPU; GPU 0 starting at 3), so
 * tests see stable, distinct numbers.
 */
#ifndef GS_NODE_MIGCAPS_H
#define GS_NODE_MIGCAPS_H

#include <stdbool.h>
#include <stddef.h>

#define GS_MIGCAPS_FILE "driver/nvidia-caps/mig-minors" /* under the proc root */
#define GS_MIGCAPS_DEV_DIR "/dev/nvidia-caps"
#define GS_MIGCAPS_MAX_BYTES (1u << 20) /* a real file is about 100 KiB */
#define GS_MIGCAPS_MAX_ID 4095          /* gpu, gi and ci numbers above are refused */

struct gs_migcap {
    int gpu, gi, ci; /* ci -1: the GPU instance's access file */
    int minor;
};

struct gs_migcaps {
    bool mock;       /* minors come from the fixed layout, v is unused */
    int config, monitor; /* -1 when absent */
    int n, cap;
    struct gs_migcap *v; /* malloc'd */
};

/* Parses the text of a mig-minors file (len bytes, need not be terminated).
 * Blank lines are skipped and well-formed names we do not know (a newer
 * driver's) are ignored; anything else is refused: GS_EINVAL with err naming
 * the line number, the line and why. GS_ENOMEM. On error c is left empty. */
int gs_migcaps_parse(const char *text, size_t len, struct gs_migcaps *c, char *err, size_t errlen);

/* Reads and parses <proc_root>/driver/nvidia-caps/mig-minors (proc_root NULL
 * = "/proc"). GS_ENOENT / GS_EIO / GS_ERANGE (too big) / GS_EINVAL, with err
 * naming the file. */
int gs_migcaps_load(const char *proc_root, struct gs_migcaps *c, char *err, size_t errlen);

/* The fixed mock layout (see above). */
void gs_migcaps_mock(struct gs_migcaps *c);

/* The minor of gpu<gpu>/gi<gi>/access (ci < 0) or gpu<gpu>/gi<gi>/ci<ci>/access;
 * -1 when the file has no such line. */
int gs_migcaps_minor(const struct gs_migcaps *c, int gpu, int gi, int ci);

void gs_migcaps_free(struct gs_migcaps *c);

#endif
