/*
 * agent_int.h - the agent's internals shared by its files (internal header):
 * agent.c (start/stop, sync loop, reports), agent_pods.c (pod lifecycle),
 * agent_node.c (Node, heartbeat, NodeResourceTopology), agent_slices.c (DRA
 * ResourceSlices), agent_watch.c (list
 * + watch of this node's pods), agent_http.c (logs, metrics, reports).
 *
 * Locking: a->mu guards the pod table for readers outside the sync loop
 * (the HTTP thread); the loop holds it while it changes the table and not
 * while it talks to the server. a->wmu guards the watch thread's desired map.
 */
#ifndef GS_AGENT_INT_H
#define GS_AGENT_INT_H

#include "agent/agent.h"
#include "agent/runtime.h"
#include "agent/runtime_runc.h"
#include "core/clock.h"
#include "discovery/discovery.h"
#include "discovery/exporter.h"
#include "node/gpus.h"

#include <pthread.h>
#include <stdatomic.h>

enum gs__cstate { GS_C_WAITING, GS_C_RUNNING, GS_C_EXITED };
enum gs__phase { GS_P_PENDING, GS_P_RUNNING, GS_P_SUCCEEDED, GS_P_FAILED };

struct gs__mig_hold; /* MIG instances a pod holds (agent_mig.c) */
struct gs__dra;      /* a pod's resource claims (agent_dra.c) */

struct gs__ctr {
    char *name;
    char **argv;             /* NULL-terminated, owned */
    char **env;              /* NULL-terminated, owned */
    struct gs_proc proc;
    enum gs__cstate state;
    int exit_code;
    int restarts;
    int64_t started, finished; /* wall seconds */
    int64_t next_start_ns;   /* restart backoff (monotonic) */
    char *reason;            /* terminated reason ("Completed", "Error", "Lost"), owned */
    bool set_ids;            /* run as uid/gid (the agent is root) */
    uid_t uid;
    gid_t gid;
    char *runc_id;           /* runc runtime: the container id (runtime_runc.h); NULL: a process */
};

struct gs__pod {
    char *ns, *name, *uid, *key; /* key "ns/name" */
    char *devices;           /* the gpusched.io/devices annotation, or NULL */
    char *restart_policy;    /* Always | OnFailure | Never */
    int slots[GS_NODE_MAX_GPUS];
    int nslots;
    int milli;               /* per GPU, 1000 = whole */
    struct gs__ctr *c;
    size_t nc;
    enum gs__phase phase;
    char reason[64];
    char message[256];
    int64_t start_time;      /* wall seconds */
    json_t *obj;             /* latest server object (rv for status writes) */
    bool dirty;              /* status to report */
    bool holds_devices;
    bool terminating;        /* stopping: SIGTERM sent */
    int64_t kill_at_ns;      /* SIGKILL after this (monotonic) */
    bool gone;               /* no longer wanted: remove after stopping */
    int64_t wait_dev_until_ns; /* != 0: waiting for a stopping pod to release a chosen GPU (monotonic deadline) */
    bool deleting;           /* graceful deletion: confirm (delete with grace 0) once stopped */
    int64_t next_delete_ns;  /* retry of that confirmation (monotonic) */
    bool evicted;            /* the server evicted it (nodelifecycle.h): stop, then confirm ProcessesStopped */
    int64_t next_confirm_ns; /* retry of that confirmation (monotonic) */
    struct gs__mig_hold *mig; /* MIG instances chosen for it, or NULL (agent_mig.c); held while holds_devices */
    struct gs__dra *dra;     /* its resource claims, or NULL (agent_dra.c) */
    bool runc;               /* run by runc (the pod's RuntimeClass or the node's default) */
    char wait_reason[64];    /* Pending, not started yet: why (ErrImageNeverPull, RuntimeClassNotFound...) */
    char wait_msg[512];
    int64_t retry_at_ns;     /* != 0: start_pod again then (monotonic) */
    char dir[1200];
};

struct gs_agent {
    struct gs_agent_opts o;
    char node[128];
    char state_dir[1024];
    char endpoint[320];
    char http_token[128];    /* required by the HTTP endpoint (agent_http.c) */
    struct gs_clock clock;
    struct gs_disc disc;
    bool disc_open;
    struct gs_inventory inv;
    struct gs_node_gpus gpus;
    struct gs_exporter *exp;
    uint64_t unhealthy;      /* GPU slots marked unhealthy on the Node */
    struct gs_client *cl;    /* the loop's connection */
    struct gs__agent_http *http;
    int port;

    pthread_mutex_t mu;      /* pods, for readers outside the loop */
    struct gs__pod **pods;
    size_t npods;

    pthread_mutex_t wmu;     /* desired map, filled by the watch thread */
    json_t *desired;         /* key -> pod object */
    json_t *changed;         /* key -> true */
    bool desired_synced;     /* a full list arrived at least once */
    uint64_t list_gen;       /* full lists applied so far */
    atomic_bool relist_now;  /* the loop asks the watch thread for a fresh list */
    atomic_bool watch_cancel; /* set with stop or relist_now: the watch thread's transfers end */

    /* Reconcile first (agent.c): at start and after the agent was paused
     * (SIGSTOP, a frozen machine) no new pod is admitted until a list newer
     * than the pause was applied and every process the server no longer
     * wants here (deleted, terminal, evicted, re-created elsewhere) stopped. */
    bool reconciling;
    uint64_t gate_gen;       /* the list_gen that must have been applied */
    uint64_t applied_gen;    /* list_gen of the changes the loop last took */
    int64_t last_loop_ns;
    int reconcile_stops;     /* pods stopped during this reconcile */

    pthread_t loop_th, watch_th;
    bool loop_started, watch_started;
    atomic_bool stop;
    atomic_bool registered;
    int64_t next_heartbeat_ns, next_nrt_ns;
    /* Node heartbeat as a Lease (agent_node.c): the last Lease written, and
     * when the Node status is next written even though nothing changed. */
    json_t *lease;
    bool lease_unsupported;  /* the server has no leases: heartbeat on the Node */
    int64_t next_status_ns;
    bool nrt_dirty;
    uint64_t alloc_mask_reported;
    /* GPU stack (src/govern/agentstack.c): validators, MIG manager, and the
     * MIG strategy the Node's resources and labels are advertised under. */
    struct gs__stack *stack;
    int mig_strategy;        /* enum gs_mig_strategy; GS_MIG_NONE (0) until a policy says */
    /* Events (agent_events.c): a recorder writing through a client of its own. */
    struct gs_client *ev_cl;
    struct gs_recorder *events;
    struct gs__slices *slices; /* DRA ResourceSlices published (agent_slices.c) */
    /* The runc runtime: runc's state directory <state_dir>/runc, whether the
     * binary runs (checked at start), the image store <state_dir>/images. */
    char runc_root[1100], image_dir[1100];
    struct gs_runc runc;
    bool runc_ok;
};

int64_t gs__mono_ns(void);
int64_t gs__wall_s(void);
/* RFC 3339 "2026-01-02T03:04:05Z" for wall seconds t. */
void gs__rfc3339(int64_t t, char *buf, size_t len);
const char *gs__jstr(const json_t *o, const char *k);

/* agent_node.c */
int gs__node_register(struct gs_agent *a);
int gs__node_heartbeat(struct gs_agent *a);
int gs__node_publish_nrt(struct gs_agent *a);
/* Reads the exporter's health machine; true when the Node must be told. */
bool gs__node_health_changed(struct gs_agent *a);
json_t *gs__node_devices(const struct gs_agent *a);

/* agent_slices.c: publishes the node's ResourceSlices when they changed
 * (checked every 2 s; now: at once, e.g. after a health change). */
void gs__slices_tick(struct gs_agent *a, int64_t now_ns, bool now);
void gs__slices_free(struct gs_agent *a);

/* agent_watch.c */
void *gs__watch_main(void *arg);
/* Lists the pods bound to a->node and makes them the desired map, marking
 * what changed; rv_out gets the list's resourceVersion. On any error
 * (unreachable, unreadable or cut-short answer) the map is left untouched. */
int gs__agent_relist(struct gs_agent *a, struct gs_client *c, char *rv_out, size_t rv_len);

/* agent_events.c */
int gs__agent_events_start(struct gs_agent *a);
void gs__agent_events_stop(struct gs_agent *a);
/* An Event about pod p (its container c, or NULL), from "kubelet" on this node. */
void gs__pod_event(struct gs_agent *a, const struct gs__pod *p, const struct gs__ctr *c, const char *type,
                   const char *reason, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* agent_pods.c */
/* Reconciles one desired pod (obj NULL: gone). Loop thread. False when it
 * is a pod new here and a->reconciling holds admissions back: call again later. */
bool gs__pods_reconcile(struct gs_agent *a, const char *key, json_t *obj);
/* Pods still stopping because the server no longer wants them here (evicted,
 * finished there, gone or re-created elsewhere; not graceful deletions). */
int gs__pods_stopping(struct gs_agent *a);
/* Sweeps processes, restarts, terminations and status reports. Loop thread. */
void gs__pods_tick(struct gs_agent *a);
/* Reads <state>/pods/ at start: re-adopts or marks lost. */
void gs__pods_recover(struct gs_agent *a);
/* Stops every pod (shutdown with kill_pods). */
void gs__pods_kill_all(struct gs_agent *a);
void gs__pod_free(struct gs__pod *p);
const char *gs__phase_name(enum gs__phase p);
json_t *gs__pod_report(const struct gs__pod *p);
/* GPU slots in use by live pods, as a mask. */
uint64_t gs__pods_alloc_mask(struct gs_agent *a);

/* agent_runc.c: the runtime of a pod and the runc runtime's containers. */
/* Chooses p->runc from spec.runtimeClassName (a GET of the RuntimeClass) or
 * the node's default. 0 decided; 1 the pod waits (p->wait_reason says why). */
int gs__runtime_pick(struct gs_agent *a, struct gs__pod *p);
struct gs_alloc_resp;
/* Turns container c (argv, env from the process path) into a runc bundle and
 * the shim's `runc run` command. 0; 1 waiting (image absent:
 * ErrImageNeverPull in p->wait_reason); -1 refused with why. */
int gs__runc_ctr_build(struct gs_agent *a, struct gs__pod *p, struct gs__ctr *c, const json_t *cs,
                       const struct gs_alloc_resp *r, char *why, size_t wl);
/* Before each start: deletes what a previous run of the container kept. */
void gs__runc_ctr_prestart(struct gs_agent *a, const struct gs__ctr *c);
/* A signal to a container: its process group, or `runc kill --all`. */
void gs__ctr_signal(struct gs_agent *a, const struct gs__ctr *c, int sig);
/* After the container ended with code: the terminated reason the runtime
 * knows ("OOMKilled") or NULL; deletes the runc container and its cgroups. */
const char *gs__runc_ctr_finish(struct gs_agent *a, const struct gs__ctr *c, int code);
/* Recovery when the shim is gone: true when runc state says the container
 * still runs (c->proc then follows its init process). */
bool gs__runc_ctr_adopt(struct gs_agent *a, struct gs__ctr *c);

/* src/govern/agentstack.c: one GPU stack step per call (loop thread). */
void gs__stack_tick(struct gs_agent *a, int64_t now_ns);
void gs__stack_free(struct gs_agent *a);
/* The GPU resources the Node advertises (nvidia.com/gpu, nvidia.com/mig-*) into
 * capacity. (MIG instances in the device entries: gs_inventory_devices.) */
void gs__stack_capacity(const struct gs_agent *a, json_t *capacity);
/* Does the node take the DRA path (publish ResourceSlices)? 1 without a
 * policy and under a GPUCluster, 0 under a ClusterPolicy (unless its
 * draDriver is enabled), -1 while the Node was not read yet. */
int gs__stack_dra(const struct gs_agent *a);
/* Carries the conditions the agent does not own (GPUStackReady) and the
 * GPU stack answer from old_status into a freshly built status, so a
 * re-registration never opens a window where the node looks ungoverned. */
void gs__stack_keep_conditions(const json_t *old_status, json_t *status);

/* agent_http.c */
struct gs__agent_http;
int gs__http_start(struct gs_agent *a, const char *listen, char *err, size_t errlen);
void gs__http_stop(struct gs_agent *a);

/* agent_mig.c: MIG instances for pods, as kubelet's device manager hands out
 * the devices of an extended resource. Mixed strategy: a pod asking for
 * nvidia.com/mig-<profile> gets that many free instances of the profile;
 * single strategy: nvidia.com/gpu stands for MIG instances of any profile
 * (the scheduler names them as numbers past the node's GPUs in
 * gpusched.io/devices, see src/sched/cache.c). Loop thread only. */
#define GS__MIG_RES_MAX 8 /* distinct MIG resources in one pod */

struct gs__mig_dev {
    char uuid[96];      /* "MIG-..." */
    char profile[32];   /* "1g.10gb" */
    char parent[96];    /* the GPU's UUID */
    int gpu;            /* the GPU's NVML index */
    char resource[64];  /* the resource it was given for */
};

struct gs__mig_hold {
    int n;
    struct gs__mig_dev v[]; /* n entries */
};

/* What a pod asks for: count instances of profile ("" = any, single strategy). */
struct gs__mig_req {
    char resource[64];
    char profile[32];
    int count;
};

/* An instance some live pod holds. */
struct gs__mig_used {
    const char *uuid;
    const char *owner; /* "ns/name" */
};

struct gs__mig_pick_in {
    const struct gs_inventory *inv;
    uint64_t unhealthy;               /* bit i: inventory GPU i is unhealthy */
    const struct gs__mig_used *used;  /* held by other pods */
    size_t nused;
    const struct gs__mig_req *reqs;
    int nreq;
};

/* Chooses instances for every request: for each, free instances of its
 * profile by lowest GPU index, then instance order, never a used one or one
 * on an unhealthy GPU. Returns a new hold (caller frees) in *out; on failure
 * *out is NULL and why names the resource and the counts: GS_EBUSY when
 * enough healthy instances exist but other pods hold some (they may be
 * stopping), GS_ERANGE when the node has too few healthy ones at all. */
int gs__mig_pick(const struct gs__mig_pick_in *in, struct gs__mig_hold **out, char *why, size_t wl);
/* The MIG requests of a pod object: nvidia.com/mig-* limits (else requests)
 * summed over its containers, sorted by name. Returns how many (<= max). */
int gs__mig_pod_reqs(const json_t *pod, struct gs__mig_req *reqs, int max);
/* Whether a gpusched.io/devices token names a MIG device of the single
 * strategy: a number at or past the node's GPU count on a node with MIG. */
bool gs__mig_slot_token(const struct gs_agent *a, const char *t);
/* Admission: chooses p's instances into p->mig (replacing any). 0 (also when
 * the pod needs none), 1 when it must wait for a holder to stop, -1 refused;
 * why says it. */
int gs__mig_admit(struct gs_agent *a, struct gs__pod *p, char *why, size_t wl);
/* NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES with the MIG UUIDs (after
 * any whole GPUs the environment already names). */
void gs__mig_env(const struct gs__pod *p, json_t *env);
/* Checkpoint: writes p->mig into pod.json's doc; reads it back at recovery. */
void gs__mig_save(const struct gs__pod *p, json_t *doc);
void gs__mig_recover(struct gs__pod *p, const json_t *doc);
/* Pod status: the MIG instances join status.devices. */
void gs__mig_status(const struct gs__pod *p, json_t *status); /* once it started */
/* Inventory slots of the GPUs whose instances p holds, as a mask. */
uint64_t gs__mig_gpu_mask(const struct gs_agent *a, const struct gs__pod *p);

/* agent_dra.c: pods with spec.resourceClaims, the agent as the kubelet of
 * the DRA plugins (src/node/draplugin/). Loop thread only. */
/* Admission: 0 (ready, or no claims), 1 waiting (claims not allocated or
 * reserved yet, or a plugin error: retried from the tick), -1 refused. */
int gs__dra_admit(struct gs_agent *a, struct gs__pod *p, char *why, size_t wl);
bool gs__dra_waiting(const struct gs__pod *p);
/* The claimed devices' environment for container ctr. */
void gs__dra_env(const struct gs__pod *p, const char *ctr, json_t *env);
/* Pod status: condition ResourceClaimsPrepared. */
void gs__dra_status(const struct gs__pod *p, json_t *obj);
/* NodeUnprepareResources for claims no other pod here uses. Idempotent. */
void gs__dra_release(struct gs_agent *a, struct gs__pod *p);
/* GPU table slots reached through prepared claims. */
bool gs__dra_holds_slot(const struct gs__pod *p, int slot);
uint64_t gs__dra_slots(const struct gs__pod *p);
void gs__dra_save(const struct gs__pod *p, json_t *doc);
void gs__dra_recover(struct gs__pod *p, const json_t *doc);
void gs__dra_free(struct gs__pod *p);

#endif
