/*
 * draplugin.h - `gpusched dra-plugin`: the kubelet DRA plugin of driver
 * gpu.nvidia.com, and the kubelet's side of the same API for the agent.
 *
 * Plugin side (plugin.c, prepare.c): struct gs_drap holds the node's devices
 * (names as the node's ResourceSlices publish them, so a claim's
 * status.allocation.devices.results name them directly), serves
 *   k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin and ...v1beta1.DRAPlugin
 *   v1.DRAResourceHealth/NodeWatchResources
 * on <plugins-dir>/<driver>/dra.sock, and pluginregistration.Registration on
 * <registry-dir>/<driver>-reg.sock. NodePrepareResources reads each claim
 * through a caller's function (the API in `gpusched dra-plugin`, a table in
 * tests), keeps the results of its own driver and node, writes one CDI spec
 * per claim (<cdi-dir>/k8s.gpu.nvidia.com-claim_<uid>.json, kind
 * k8s.gpu.nvidia.com/claim, devices "<uid>-<device>") and answers the CDI
 * ids. Prepared claims are checkpointed atomically (JSON), so a restarted
 * plugin answers Prepare again with the same ids without reading the claim
 * and Unprepare for claims it prepared before. Per-claim failures travel in
 * the answer's error field, never as a gRPC error (the kubelet would drop
 * the whole answer).
 *
 * Kubelet side (kubelet.c): find a driver's plugin through the registry
 * directory (GetInfo on <driver>-reg.sock), call Prepare / Unprepare, and
 * turn CDI ids into the environment a process gets (the agent has no
 * container runtime: device nodes are not mounted, NVIDIA_VISIBLE_DEVICES
 * and CUDA_VISIBLE_DEVICES name the devices' UUIDs).
 *
 * Threads: the gRPC server threads answer the kubelet; the caller's thread
 * runs gs_drap_run (health, re-registration). The device table and the
 * prepared claims are shared under a mutex.
 */
#ifndef GS_NODE_DRAPLUGIN_DRAPLUGIN_H
#define GS_NODE_DRAPLUGIN_DRAPLUGIN_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_DRAP_DRIVER "gpu.nvidia.com"
#define GS_DRAP_PLUGINS_DIR "/var/lib/kubelet/plugins"
#define GS_DRAP_REGISTRY_DIR "/var/lib/kubelet/plugins_registry"
#define GS_DRAP_CDI_KIND "k8s.gpu.nvidia.com/claim"
#define GS_DRAP_MAX_DEVS 320 /* 32 GPUs and their MIG devices */

/* One device the plugin can prepare. */
struct gs_drap_dev {
    char name[128];   /* "gpu-0", as in the ResourceSlice */
    char uuid[96];    /* "GPU-..." or "MIG-..." */
    int minor;        /* /dev/nvidia<minor> of the GPU (the parent's for MIG) */
    bool mig;
    bool healthy;
    char message[160]; /* why unhealthy */
};

struct gs_drap_table {
    int n;
    struct gs_drap_dev d[GS_DRAP_MAX_DEVS];
};

/* The devices of ResourceSlice objects (an array, resource.k8s.io/v1 shape:
 * spec.devices[].name and attributes uuid / type / parentUUID, with or
 * without the gpu.nvidia.com/ prefix). minor_of maps a GPU UUID to its
 * device minor (-1 unknown). 0, or GS_EINVAL with err naming the slice,
 * device and field. */
typedef int (*gs_drap_minor_fn)(void *ud, const char *gpu_uuid);
int gs_drap_table_from_slices(const json_t *slices, gs_drap_minor_fn minor_of, void *ud, struct gs_drap_table *t,
                              char *err, size_t errlen);
const struct gs_drap_dev *gs_drap_table_find(const struct gs_drap_table *t, const char *name);

/*--- Names ---*/

/* "<dir>/k8s.gpu.nvidia.com-claim_<uid>.json" */
void gs_drap_cdi_path(const char *cdi_dir, const char *uid, char *buf, size_t len);
/* "k8s.gpu.nvidia.com/claim=<uid>-<device>" */
void gs_drap_cdi_id(const char *uid, const char *device, char *buf, size_t len);

/*--- Prepared claims (prepare.c) ---*/

/* A claim as the plugin found it: the devices of its driver on its node.
 * {"namespace", "name", "devices": [{"requests": [..], "pool", "device",
 * "cdi": [..]}]}, keyed by uid in a gs_drap_state. */
struct gs_drap_state {
    const char *driver, *node, *cdi_dir; /* borrowed */
    json_t *claims;                      /* uid -> prepared claim (owned) */
};

/* Chooses the devices of one claim object (the API's ResourceClaim JSON, any
 * served version) for (ns, name, uid): 0 with *out a new prepared-claim
 * object, or GS_EINVAL / GS_ENOENT with err saying why for the kubelet (uid
 * differs, not allocated, allocated to another node, a device this node does
 * not have, nothing of this driver). */
int gs_drap_choose(const struct gs_drap_state *st, const struct gs_drap_table *t, const json_t *claim, const char *ns,
                   const char *name, const char *uid, json_t **out, char *err, size_t errlen);
/* The CDI spec (JSON, a new reference) for a prepared claim. */
json_t *gs_drap_cdi_spec(const struct gs_drap_table *t, const char *uid, const json_t *prepared);

/* Checkpoint: {"version": 1, "driver", "node", "claims": {uid: prepared}},
 * written atomically. Load: 0 (a missing file is an empty state), or
 * GS_EPARSE / GS_EINVAL with err naming the file and field. */
int gs_drap_checkpoint_save(const char *path, const struct gs_drap_state *st);
int gs_drap_checkpoint_load(const char *path, struct gs_drap_state *st, char *err, size_t errlen);
/* Parses checkpoint text into st->claims (replacing it); for load and the fuzzer. */
int gs_drap_checkpoint_parse(const char *text, size_t len, struct gs_drap_state *st, char *err, size_t errlen);

/*--- The plugin (plugin.c) ---*/

/* Reads a ResourceClaim: 0 with *out (new reference), GS_ENOENT when it does
 * not exist, another GS_E* with err. Called on a server thread. */
typedef int (*gs_drap_get_claim_fn)(void *ud, const char *ns, const char *name, json_t **out, char *err,
                                    size_t errlen);

struct gs_drap_config {
    const char *driver;        /* NULL = GS_DRAP_DRIVER */
    const char *node;          /* required: the pool name */
    const char *plugins_dir;   /* NULL = GS_DRAP_PLUGINS_DIR */
    const char *registry_dir;  /* NULL = GS_DRAP_REGISTRY_DIR */
    const char *cdi_dir;       /* NULL = /var/run/cdi */
    const char *state_path;    /* NULL = <plugins_dir>/<driver>/checkpoint.json */
    gs_drap_get_claim_fn get_claim;
    void *get_claim_ud;
    int poll_ms;               /* health stream latency; 0 = 20 */
};

struct gs_drap;

/* Creates the plugin with a copy of the table and loads the checkpoint.
 * 0, or an error with err (an unreadable checkpoint is refused, not dropped:
 * claims prepared before would never be unprepared). */
int gs_drap_create(const struct gs_drap_config *cfg, const struct gs_drap_table *t, struct gs_drap **out, char *err,
                   size_t errlen);
void gs_drap_destroy(struct gs_drap *p);   /* stops serving first */
/* Serves dra.sock and the registration socket (stale files replaced). */
int gs_drap_serve(struct gs_drap *p, char *err, size_t errlen);
void gs_drap_unserve(struct gs_drap *p);
const char *gs_drap_socket(const struct gs_drap *p);
const char *gs_drap_reg_socket(const struct gs_drap *p);
/* Health of a device by GPU UUID (a GPU's MIG devices follow their GPU);
 * open NodeWatchResources streams get a new list. True when one changed. */
bool gs_drap_set_gpu_health(struct gs_drap *p, const char *gpu_uuid, bool healthy, const char *message);
/* Prepared claims now (for tests and logs). */
int gs_drap_prepared(struct gs_drap *p);

/* Health source for gs_drap_run: waits up to timeout_ms for news and applies
 * it with gs_drap_set_gpu_health; 0, or a negative GS_E* to stop. */
typedef int (*gs_drap_health_fn)(void *ud, struct gs_drap *p, int timeout_ms);

/* Serves and then watches until *stop: health through `health` (may be
 * NULL); a registration the kubelet refused, or a socket removed (kubelet
 * restarted and wiped its directories), makes it serve both sockets again.
 * Returns 0 after a stop with the sockets removed. */
int gs_drap_run(struct gs_drap *p, gs_drap_health_fn health, void *ud, volatile sig_atomic_t *stop);

/*--- The kubelet's side (kubelet.c) ---*/

struct gs_drap_claim_ref {
    const char *ns, *name, *uid;
};

/* Finds driver's plugin through <registry_dir>/<driver>-reg.sock: GetInfo
 * (type DRAPlugin, name = driver), then NotifyRegistrationStatus. endpoint
 * gets the service socket, *v1 whether it speaks v1.DRAPlugin (else
 * v1beta1). 0, GS_ENOENT (no socket), or GS_EIO / GS_EINVAL with err. */
int gs_drap_kubelet_find(const char *registry_dir, const char *driver, char *endpoint, size_t eplen, bool *v1,
                         char *err, size_t errlen);
/* NodePrepareResources for n claims: 0 with *out = {uid: {"devices": [{"requests",
 * "pool", "device", "cdi"}], "error"}} (a new reference; a claim missing from
 * the plugin's answer gets error "the plugin did not answer for this claim"),
 * or GS_EIO / GS_ETIMEDOUT with err (the call failed as a whole). */
int gs_drap_kubelet_prepare(const char *endpoint, bool v1, const struct gs_drap_claim_ref *c, size_t n,
                            int timeout_ms, json_t **out, char *err, size_t errlen);
/* NodeUnprepareResources: *out = {uid: {"error"}}. */
int gs_drap_kubelet_unprepare(const char *endpoint, bool v1, const struct gs_drap_claim_ref *c, size_t n,
                              int timeout_ms, json_t **out, char *err, size_t errlen);

/* Decoders of the plugin's packed answers into the JSON above (kubelet.c;
 * the fuzzer calls them). 0 or GS_EPARSE. */
int gs_drap_decode_prepare(const uint8_t *buf, size_t len, json_t **out);
int gs_drap_decode_unprepare(const uint8_t *buf, size_t len, json_t **out);

/* Applies CDI devices to a process environment: for each fully qualified id
 * ("kind=name") the spec of that kind in cdi_dir that defines the device;
 * the device's and the spec's containerEdits.env are set into env (a JSON
 * object name -> value), NVIDIA_VISIBLE_DEVICES values of several devices
 * joined with commas. 0, or GS_ENOENT / GS_EPARSE with err naming the id
 * or file. */
int gs_drap_cdi_env(const char *cdi_dir, const char *const *ids, size_t n, json_t *env, char *err, size_t errlen);
/* The same for one spec's text (the fuzzer and tests). */
int gs_drap_cdi_env_text(const char *text, size_t len, const char *kind, const char *device, json_t *env,
                         bool *found, char *err, size_t errlen);

#endif
