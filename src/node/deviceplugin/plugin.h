/*
 * plugin.h - `gpusched device-plugin`: a kubelet device plugin (API v1beta1)
 * for the node's GPUs.
 *
 * struct gs_dp owns the GPU table of one resource and serves
 * v1beta1.DevicePlugin on <plugin-dir>/<endpoint> (server.c). gs_dp_run
 * (register.c) registers with kubelet, keeps the health current,
 * re-registers when kubelet restarts, and returns when asked to stop, with
 * the socket removed. Under a MIG strategy a node has several resources
 * (nvidia.com/gpu, nvidia.com/mig-1g.10gb, ...): one gs_dp each, each with
 * its own socket and Register call, all run by gs_dp_run_all, as NVIDIA's
 * plugin runs one server per resource.
 *
 * Threads: the gRPC server thread answers kubelet; the caller's thread runs
 * gs_dp_run and the health source. The GPU table is shared under a mutex;
 * every health change bumps a version that open ListAndWatch streams follow.
 */
#ifndef GS_NODE_DEVICEPLUGIN_PLUGIN_H
#define GS_NODE_DEVICEPLUGIN_PLUGIN_H

#include "node/allocate.h"
#include "node/gpus.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_DP_DEFAULT_DIR "/var/lib/kubelet/device-plugins"
#define GS_DP_KUBELET_SOCKET "kubelet.sock"

struct gs_dp_config {
    const char *plugin_dir;     /* NULL = GS_DP_DEFAULT_DIR */
    const char *resource_name;  /* NULL = "nvidia.com/gpu" */
    const char *endpoint;       /* socket file name; NULL = "gpusched-gpu.sock" */
    struct gs_alloc_opts alloc;
    int poll_ms;                /* stream update latency; 0 = 20 */
};

struct gs_dp;

/* Creates the plugin with a copy of the table (not yet serving). */
int gs_dp_create(const struct gs_dp_config *cfg, const struct gs_node_gpus *g, struct gs_dp **out);
void gs_dp_destroy(struct gs_dp *dp);   /* stops serving first */

/* Serves on the socket (replacing a stale file). 0 or GS_EIO with err. */
int gs_dp_serve(struct gs_dp *dp, char *err, size_t errlen);
/* Stops serving and removes the socket. Idempotent. */
void gs_dp_unserve(struct gs_dp *dp);

/* Sets a GPU's health (by table slot); open streams get a new list. */
void gs_dp_set_health(struct gs_dp *dp, int slot, bool healthy);
/* Sets the health of every device on the physical GPU whose inventory slot
 * is parent (the GPU, or its MIG devices); open streams get a new list. */
void gs_dp_set_parent_health(struct gs_dp *dp, int parent, bool healthy);
/* A copy of the current table. */
void gs_dp_snapshot(struct gs_dp *dp, struct gs_node_gpus *g);
/* Full path of the plugin socket and of kubelet's. */
const char *gs_dp_socket(const struct gs_dp *dp);
const char *gs_dp_kubelet_socket(const struct gs_dp *dp);
int gs_dp_streams(struct gs_dp *dp);

/* Calls v1beta1.Registration/Register on kubelet's socket, waiting up to
 * timeout_ms for kubelet to be ready. 0, GS_ETIMEDOUT, or GS_EIO with err. */
int gs_dp_register(struct gs_dp *dp, int timeout_ms, char *err, size_t errlen);

/* Health source for gs_dp_run: waits up to timeout_ms for health news and
 * applies it with gs_dp_set_health. Returns 0 (also when nothing happened)
 * or a negative GS_E* to stop the run. */
typedef int (*gs_dp_health_fn)(void *ud, struct gs_dp *dp, int timeout_ms);

/* Serves, registers, and then watches until *stop becomes non-zero: health
 * through `health` (may be NULL), and kubelet's socket: when kubelet.sock is
 * replaced (kubelet restarted and wiped the directory) or the plugin's own
 * socket disappears, it serves again and registers again. Registration
 * failures are retried every second. Returns 0 after a stop, with the socket
 * removed, or a negative GS_E* if serving failed. */
int gs_dp_run(struct gs_dp *dp, gs_dp_health_fn health, void *ud, volatile sig_atomic_t *stop);
/* The same for n plugins at once (health gets dps[0]); each serves and
 * registers again on its own when its socket or kubelet's is replaced. */
int gs_dp_run_all(struct gs_dp *const *dps, int n, gs_dp_health_fn health, void *ud, volatile sig_atomic_t *stop);

/* How many times gs_dp_run has registered successfully (for tests and logs). */
int gs_dp_registrations(struct gs_dp *dp);

/* Internal, shared by server.c and register.c. */
void gs__dp_registered(struct gs_dp *dp);
const char *gs__dp_resource(const struct gs_dp *dp);
const char *gs__dp_endpoint(const struct gs_dp *dp);

#endif
