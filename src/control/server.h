/*
 * server.h - the whole control plane in one handle: store, TLS, tokens,
 * API server and the in-server scheduler, started and stopped together.
 *
 * `gpusched server` is a thin command around this; `gpusched up` (server +
 * a local agent) embeds the same handle. On start, in the data directory:
 *   store.db (+ WAL)         the objects;
 *   ca.crt, server.crt/.key  HTTPS (unless insecure);
 *   tokens.csv               created with one admin token when absent and no
 *                            other tokens file is named; node tokens asked
 *                            for in the options are appended to it;
 *   kubeconfig               rewritten on every start: server URL, CA data and
 *                            the first admin token, for kubectl and gpusched.
 * Stopping ends every watch, joins every thread and closes the store, so a
 * restart finds every acknowledged write.
 */
#ifndef GS_CONTROL_SERVER_H
#define GS_CONTROL_SERVER_H

#include "control/store.h"
#include "core/error.h"

#include <stdbool.h>
#include <stddef.h>

struct gs_admission_opts;
struct gs_admit_defaults;

struct gs_server_opts {
    const char *data_dir;     /* NULL: "./gpusched-data" */
    const char *listen;       /* NULL: "127.0.0.1:6443"; port 0: any free port */
    bool insecure;            /* plain http instead of https */
    const char *tokens_file;  /* NULL: <data_dir>/tokens.csv, created with an admin token if absent */
    bool no_auth;             /* no authentication at all: every caller is admin (local tests only) */
    const char *sched_config; /* KubeSchedulerConfiguration file; NULL: the default profile */
    bool no_scheduler;        /* serve the API only */
    double qps, burst;        /* per-token rate limit; qps 0: default 2000/s, < 0: none */
    size_t max_body;          /* request body limit; 0: 3 MiB */
    bool sync_full;           /* fsync every commit */
    bool accept_store_regression; /* start a store that lost acknowledged writes (store.h "Self-checks") */
    size_t ring_events;       /* watch history kept in memory; 0: default */
    /* The store: SQLite in data_dir (the default, and what `up` embeds) or
     * etcd (etcd.endpoints etc.; its ring_events and diags are set here). */
    enum gs_store_kind store_kind;
    struct gs_store_etcd_opts etcd;
    uint64_t seed;
    /* Admission tuning (sched/admission/admission.h), copied at start; NULL:
     * the library's defaults with history weight 0.5. profile/evict/ctx are
     * the server's own and ignored here. */
    const struct gs_admission_opts *admission;
    /* Hardening (docs/CONTROL_PLANE.md "Limits and hardening"); 0: default. */
    const char *agent_token_file; /* NULL: <data_dir>/agent.token, created if absent */
    unsigned max_connections, max_per_ip, idle_timeout_s;
    double fail_qps;
    int64_t event_ttl_s;      /* Events expire this long after their last write (events.h); 0: 1 h */
    /* Node lifecycle (nodelifecycle.h, admit_defaults.h): the tolerationSeconds
     * given to new pods for the not-ready/unreachable NoExecute taints (NULL:
     * 300 s each), and how long after an eviction a silent node is declared
     * lost (0: 5 minutes). */
    const struct gs_admit_defaults *admit_defaults;
    const char *ui_reports;   /* the console's simulator runs (ui.c); NULL: none served */
    double node_lost_timeout_s;
    /* Nodes that get a node token (role node, user system:node:NAME) in the
     * tokens file when it has none yet: what `up` gives its agents. */
    const char *const *node_names;
    size_t nnode_names;
    /* Replicas (control/replica.h; docs/CONTROL_PLANE.md "Running highly
     * available"): several servers on one shared store elect one leader on
     * the Lease kube-system/gpusched-control-plane; only it runs the control
     * loops, every replica serves the API. Always on with store_kind etcd;
     * false over SQLite: one process, the loops always run and no Lease is
     * written (true there elects the one process, for tests). */
    bool leader_elect;
    const char *replica_id;    /* NULL: HOSTNAME_PID */
    int64_t lease_duration_ns; /* 0: 15 s */
    int64_t renew_deadline_ns; /* 0: 10 s */
    int64_t retry_period_ns;   /* 0: 2 s */
};

/* In the data directory of a server on SQLite: locked (flock) while it runs. */
#define GS_SERVER_LOCK_FILE "store.lock"

struct gs_server;

/* Starts everything. Problems with files (tokens, profiles) go to d. */
int gs_server_start(const struct gs_server_opts *o, struct gs_server **out, struct gs_diags *d);
void gs_server_stop(struct gs_server *s);

int gs_server_port(const struct gs_server *s);
/* "https://127.0.0.1:6443" (borrowed). */
const char *gs_server_url(const struct gs_server *s);
/* The first admin token of the tokens file, or NULL (borrowed). */
const char *gs_server_admin_token(const struct gs_server *s);
/* The first scheduler token (role scheduler), or NULL (borrowed). The data
 * directory's own tokens file gets one on first start; scheduler.kubeconfig
 * next to the admin kubeconfig carries it. */
const char *gs_server_scheduler_token(const struct gs_server *s);
/* The token the log proxy presents to agents (borrowed); "" with --no-auth. */
const char *gs_server_agent_token(const struct gs_server *s);
/* The token of node name's principal (role node), or NULL (borrowed). */
const char *gs_server_node_token(const struct gs_server *s, const char *name);
/* <data_dir>/kubeconfig (borrowed). */
const char *gs_server_kubeconfig(const struct gs_server *s);
struct gs_store *gs_server_store(struct gs_server *s);

struct gs_recorder;
/* The server's Event recorder (events.h; borrowed), for embedded producers. */
struct gs_recorder *gs_server_events(struct gs_server *s);

struct gs_sched_loop;
/* The in-server scheduler loop, NULL without one (borrowed). */
struct gs_sched_loop *gs_server_sched_loop(struct gs_server *s);
struct gs_sched_loop_stats;
/* Scheduler counters (zeros when it does not run). */
void gs_server_sched_stats(struct gs_server *s, struct gs_sched_loop_stats *out);

struct gs_replica;
/* The election among replicas, NULL without leader_elect (borrowed). */
struct gs_replica *gs_server_replica(struct gs_server *s);
/* Whether this server runs the control loops: always without leader_elect. */
bool gs_server_leading(struct gs_server *s);

#endif
