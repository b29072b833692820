/*
 * migmanager.h - applies a node's MIG layout (what the GPU Operator's
 * mig-manager does with mig-parted), run by the node agent at the
 * state machine's mig step.
 *
 * A GPU is re-partitioned only when no pod uses it. While the node is at
 * the mig step it is not Ready, so the scheduler sends it no new GPU pods:
 * that is the drain. Pods already running are waited for until the drain
 * deadline (the policy's migManager.drainTimeoutSeconds, counted from the
 * first step towards this layout); the answer names them and the time left.
 * Past the deadline the answer is GS_ETIMEDOUT with a message that says the
 * deadline passed, which pods hold which GPU, and what to do - never a
 * silent wait. Idle GPUs are re-partitioned at once, busy ones as they free.
 *
 * Backends: the mock discovery backend (gs_disc_mock_set_mig), and NVML on
 * real GPUs (migmanager_nvml.c: MIG mode, GPU and compute instances through
 * the same dlopen'd libnvidia-ml.so.1 as discovery). After a change the
 * caller re-reads its inventory and re-advertises its resources
 * (gs_stack_resources): mixed strategy nvidia.com/mig-<profile>, single
 * strategy nvidia.com/gpu per MIG device.
 */
#ifndef GS_GOVERN_MIGMANAGER_H
#define GS_GOVERN_MIGMANAGER_H

#include "discovery/discovery.h"
#include "govern/policy.h"

#include <stdbool.h>
#include <stdint.h>

/* Re-partitions one GPU. Backends fill err for people. */
struct gs_mig_backend {
    const char *name;
    /* Sets GPU gpu (an inventory index) to layout l. Required. */
    int (*apply)(struct gs_mig_backend *b, int gpu, const struct gs_mig_layout *l, char *err, size_t errlen);
    /* Releases the backend. Optional. */
    void (*close)(struct gs_mig_backend *b);
    struct gs_disc *disc; /* borrowed */
    void *impl;
};

/* The backend for an open discovery handle: mock or NVML. GS_EUNSUPPORTED
 * for sysfs (it cannot change MIG). */
int gs_mig_backend_open(struct gs_disc *d, struct gs_mig_backend *b);
void gs_mig_backend_close(struct gs_mig_backend *b);
/* NVML MIG backend (migmanager_nvml.c); libpath NULL: libnvidia-ml.so.1. */
int gs_mig_backend_open_nvml(struct gs_disc *d, const char *libpath, struct gs_mig_backend *b);

struct gs_migmgr {
    char target[256];         /* layout being driven towards ("name=text") */
    int64_t drain_started_ns; /* first step towards target */
    uint64_t gpus_applied;    /* re-partitions done (lifetime) */
    uint64_t drain_timeouts;  /* steps answered GS_ETIMEDOUT (lifetime) */
};

struct gs_mig_step_in {
    struct gs_mig_backend *backend;
    const struct gs_mig_layout *want;
    uint64_t busy;            /* bit i: GPU with inventory index i is used by a pod */
    const char *const *busy_pods; /* per inventory index: "ns/pod" using it, or NULL */
    int64_t drain_timeout_ns;
    int64_t now;
};

void gs_migmgr_init(struct gs_migmgr *m);
/* One pass: re-partitions every idle GPU whose layout differs. 0 when every
 * MIG-capable GPU carries the layout; GS_EBUSY while waiting for pods (msg
 * names them and the time left); GS_ETIMEDOUT past the drain deadline;
 * another code when the backend failed. *changed: some GPU was
 * re-partitioned in this pass. */
int gs_migmgr_step(struct gs_migmgr *m, const struct gs_mig_step_in *in, bool *changed, char *msg, size_t len);

#endif
