/*
 * agent_int.h - the agent's internals shared by its files (internal header):
 * agent.c (start/stop, sync loop, reports), agent_pods.c (pod lifecycle),
 * agent_node.c (Node, heartbeat, NodeResourceTopology), agent_watch.c (list
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
#include "core/clock.h"
#include "discovery/discovery.h"
#include "discovery/exporter.h"
#include "node/gpus.h"

#include <pthread.h>
#include <stdatomic.h>

enum gs__cstate { GS_C_WAITING, GS_C_RUNNING, GS_C_EXITED };
enum gs__phase { GS_P_PENDING, GS_P_RUNNING, GS_P_SUCCEEDED, GS_P_FAILED };

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
    char dir[1200];
};

struct gs_agent {
    struct gs_agent_opts o;
    char node[128];
    char state_dir[1024];
    char endpoint[320];
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

/* agent_watch.c */
void *gs__watch_main(void *arg);

/* agent_pods.c */
/* Reconciles one desired pod (obj NULL: gone). Loop thread. */
void gs__pods_reconcile(struct gs_agent *a, const char *key, json_t *obj);
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

/* src/govern/agentstack.c: one GPU stack step per call (loop thread). */
void gs__stack_tick(struct gs_agent *a, int64_t now_ns);
void gs__stack_free(struct gs_agent *a);
/* The GPU resources the Node advertises (nvidia.com/gpu, nvidia.com/mig-*) into
 * capacity, and MIG instances of GPU slot i into its device entry. */
void gs__stack_capacity(const struct gs_agent *a, json_t *capacity);
void gs__stack_device_mig(const struct gs_agent *a, int i, json_t *device);
/* Carries the conditions the agent does not own (GPUStackReady) and the
 * GPU stack answer from old_status into a freshly built status, so a
 * re-registration never opens a window where the node looks ungoverned. */
void gs__stack_keep_conditions(const json_t *old_status, json_t *status);

/* agent_http.c */
struct gs__agent_http;
int gs__http_start(struct gs_agent *a, const char *listen, char *err, size_t errlen);
void gs__http_stop(struct gs_agent *a);

#endif
