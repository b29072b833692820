/*
 * agent.h - the node agent: what kubelet is to a Kubernetes node, for
 * gpusched: containers as processes on the host, or as OCI bundles run by
 * runc (--default-runtime, RuntimeClass handlers; agent_runc.c).
 *
 * It registers its Node (capacity, GFD labels, status.devices, conditions,
 * the address of its own HTTP endpoint) and the node's NodeResourceTopology,
 * renews its heartbeat (the Ready condition's lastHeartbeatTime, which the
 * server's node lifecycle watches), and follows the pods bound to it:
 *
 *   bound pod --admit (the exact GPUs of gpusched.io/devices, all healthy,
 *   none taken)--> start one process group per container (runtime.h) with
 *   NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES from the node side's
 *   Allocate answer plus GPUSCHED_POD, GPUSCHED_NAMESPACE, GPUSCHED_NODE
 *   --> Running --> Succeeded | Failed (exit codes, restartPolicy honoured)
 *
 * A pod deleted on the server (or bound elsewhere now) is stopped: SIGTERM to
 * its group, SIGKILL after the grace period, devices released, directory
 * removed. Pod state lives in <state_dir>/pods/<uid>/ (pod.json, and per
 * container the shim's pid and start time, exit code, log, working
 * directory), which is the checkpoint: a restarted agent re-adopts processes
 * that still run and reports the rest as finished or lost.
 *
 * Its HTTP endpoint serves /metrics (the discovery exporter's page, with
 * each GPU attributed to the pod using it), /logs/<ns>/<pod>[?container=C]
 * (also kubelet's /containerLogs/<ns>/<pod>/<container>), /pods (what runs
 * where, for tools and invariant checks) and /healthz.
 *
 * Threads: a sync loop (the only one that touches pods and processes), a
 * watch thread (list + watch of this node's pods, feeding the loop), the
 * HTTP server and the exporter's collector. Several agents may live in one
 * process (`gpusched up` with several mock nodes).
 */
#ifndef GS_AGENT_AGENT_H
#define GS_AGENT_AGENT_H

#include "control/client.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_agent_opts {
    const char *node_name;     /* NULL: the discovered hostname */
    const char *backend;       /* discovery backend: "auto" (NULL), "nvml", "sysfs", "mock" */
    const char *mock_spec;     /* mock GPUs (docs/DISCOVERY.md spec or file) */
    const char *state_dir;     /* NULL: ./gpusched-data/agent/<node> */
    const char *listen;        /* HTTP endpoint; NULL: "127.0.0.1:0" */
    const char *advertise;     /* host put in the node's endpoint; NULL: the listen host */
    struct gs_client_opts conn;
    int heartbeat_ms;          /* 0: 2000 */
    int resync_ms;             /* full relist period; 0: 10000 */
    int grace_ms;              /* SIGTERM -> SIGKILL; 0: 3000 */
    int64_t metrics_interval_ns; /* exporter collections; 0: 5 s */
    const char *extra_labels;  /* "k=v,k2=v2" added to the node's labels, or NULL */
    /* Pods' uid/gid when the agent runs as root and the pod asks for none
     * (securityContext.runAsUser/runAsGroup); 0: 65534 (nobody). */
    long long pod_uid, pod_gid;
    /* Bearer token the HTTP endpoint requires on every route but /metrics
     * and /healthz (the server's log proxy sends it); borrowed, copied at
     * start. NULL: a random one, so only /metrics is open. */
    const char *http_token;
    /* DRA (agent_dra.c): the kubelet plugin registry where drivers' plugins
     * are found, and the CDI directory their specs are read from (NULL:
     * /var/run/cdi). No registry: pods with resource claims wait. Borrowed. */
    const char *dra_registry_dir, *dra_cdi_dir;
    /* DRA ResourceSlices (agent_slices.c): no_resource_slices publishes none;
     * dra_partitionable offers MIG-capable GPUs as counter sets with every
     * MIG placement (docs/DRA.md "ResourceSlices"). */
    bool no_resource_slices, dra_partitionable;
    /* Runtimes (docs/NODE.md "Runtimes"): the handler for pods that name no
     * RuntimeClass, "process" (NULL) or "runc"; the runc binary (NULL: runc
     * from PATH); the CDI spec directories the runc runtime applies,
     * ':'-separated (NULL: <state_dir>/cdi:/etc/cdi:/var/run/cdi). Borrowed. */
    const char *default_runtime, *runc_bin, *cdi_dirs;
};

struct gs_agent;

/* Opens discovery, reads the checkpoint (re-adopting what still runs),
 * starts the HTTP endpoint and the threads. Registration happens on the
 * loop, retried until the server answers. 0 or an error with err filled. */
int gs_agent_start(const struct gs_agent_opts *o, struct gs_agent **out, char *err, size_t errlen);
/* Stops the threads. kill_pods: also stop every running pod (an orderly
 * shutdown of `up`); otherwise they keep running for the next agent. */
void gs_agent_stop(struct gs_agent *a, bool kill_pods);

const char *gs_agent_node(const struct gs_agent *a);
int gs_agent_port(const struct gs_agent *a);
/* True once the Node was registered. */
bool gs_agent_registered(struct gs_agent *a);
/* The agent's view: {node, pods: [{namespace, name, uid, phase, devices[],
 * milli, containers: [{name, pid, state, exitCode, restarts}]}]}. New reference. */
json_t *gs_agent_report(struct gs_agent *a);

/* Splits "2x8xH100-80GB,nvlink=islands:4" into a node count (2) and the
 * per-node spec ("8xH100-80GB,nvlink=islands:4"); a spec without a leading
 * "<N>x<M>x" is one node. *spec_out points into spec. */
int gs_agent_mock_nodes(const char *spec, int *nodes, const char **spec_out);

#endif
