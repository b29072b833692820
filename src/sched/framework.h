/*
 * framework.h - profiles and the scheduling cycle.
 *
 * A profile (KubeSchedulerConfiguration's profiles[]) names, per extension
 * point, the enabled plugins in order, Score weights, and per-plugin args. A
 * struct gs_framework instantiates one profile over a cache and runs cycles:
 *
 *   gs_framework_schedule(fw, pod, &res)
 *     PreFilter (all) -> Filter (every live, schedulable node; plugins in
 *     order, each sees only nodes that passed the previous ones) -> if none:
 *     PostFilter, diagnosis -> PreScore -> Score -> NormalizeScore -> weighted
 *     sum -> highest total wins, ties to the lowest node index -> Reserve (device
 *     choice; then the framework assumes the pod in the cache) -> Permit.
 *
 * On any failure after Reserve every reserve plugin's Unreserve runs in reverse
 * order and the cache assumption is forgotten. Permit Wait parks the pod in the
 * framework's waiting list until allowed, rejected or timed out (clock).
 * gs_framework_bind() runs the binding cycle for a reserved pod.
 *
 * Decisions are deterministic: node order is the cache's, ties go to the
 * lowest index, and each cycle's random seed is derived from the profile seed
 * and the pod key.
 */
#ifndef GS_SCHED_FRAMEWORK_H
#define GS_SCHED_FRAMEWORK_H

#include "core/arena.h"
#include "sched/plugin.h"

#include <jansson.h>

enum gs_point {
    GS_PT_QUEUE_SORT,
    GS_PT_PRE_ENQUEUE,
    GS_PT_PRE_FILTER,
    GS_PT_FILTER,
    GS_PT_POST_FILTER,
    GS_PT_PRE_SCORE,
    GS_PT_SCORE,
    GS_PT_RESERVE,
    GS_PT_PERMIT,
    GS_PT_PRE_BIND,
    GS_PT_BIND,
    GS_PT_POST_BIND,
    GS_PT_COUNT
};
/* Config key of a point ("queueSort", "preFilter", ..., "postBind"). */
const char *gs_point_name(enum gs_point p);

#define GS_MAX_PLUGINS_PER_POINT 16

struct gs_profile_plugin {
    const struct gs_plugin *plugin;
    int64_t weight;          /* Score only; default 1 */
};

struct gs_profile {
    char *scheduler_name;                 /* default "default-scheduler" */
    struct gs_profile_plugin points[GS_PT_COUNT][GS_MAX_PLUGINS_PER_POINT];
    int npoints[GS_PT_COUNT];
    json_t *args[GS_MAX_PLUGINS_PER_POINT * 4]; /* pluginConfig args by plugin (owned refs) */
    const char *args_names[GS_MAX_PLUGINS_PER_POINT * 4];
    int nargs;
};

struct gs_sched_config {
    struct gs_profile *profiles;
    size_t nprofiles;
};

/* Parses a KubeSchedulerConfiguration-shaped document (JSON tree):
 *   profiles[].schedulerName, profiles[].plugins.<point>.enabled[] {name, weight},
 *   profiles[].plugins.<point>.disabled[] {name} ("*" disables the defaults),
 *   profiles[].plugins.multiPoint.enabled[], profiles[].pluginConfig[] {name, args}.
 * Unset points take the default profile's plugins. Problems go to d with field
 * paths ("profiles[0].plugins.score.enabled[1].name: unknown plugin \"Foo\"").
 * 0 or GS_EINVAL. */
int gs_sched_config_parse(const json_t *doc, struct gs_sched_config *out, struct gs_diags *d);
/* The built-in default: one "default-scheduler" profile. */
int gs_sched_config_default(struct gs_sched_config *out);
/* The server's default: the default profile plus Coscheduling,
 * NodeResourceTopology, PodTopologySpread and DefaultPreemption. */
int gs_sched_config_gpusched(struct gs_sched_config *out);
/* Reads a --config file: exactly one KubeSchedulerConfiguration document
 * (YAML or JSON), parsed as gs_sched_config_parse does. Shared by `gpusched
 * server --config` and `gpusched sim --config`, so both take the same file.
 * 0, GS_ENOENT ("file not found"), GS_EINVAL or another read error; problems
 * go to d under the path. */
int gs_sched_config_load(const char *path, struct gs_sched_config *out, struct gs_diags *d);
/* Profile for a schedulerName, or NULL. Borrowed. */
const struct gs_profile *gs_sched_config_profile(const struct gs_sched_config *c, const char *scheduler_name);
void gs_sched_config_free(struct gs_sched_config *c);

/* Filter rejections of one (plugin, reason code) over the nodes of a cycle. */
struct gs_diag_entry {
    const struct gs_plugin *plugin;
    void *state;                /* the plugin's state (for reason text) */
    uint8_t code;
    uint32_t count;
};

/* Why a pod did not fit: who rejected how many nodes, and why. */
struct gs_diagnosis {
    int32_t nodes_total;               /* nodes considered */
    struct gs_status prefilter;        /* non-success when PreFilter rejected the pod outright */
    struct gs_diag_entry *entries;     /* sorted by count desc, then plugin, then code */
    size_t n, cap;
};
/* "0/1213 nodes are available: 812 Insufficient nvidia.com/gpu, 401 GPU model
 * mismatch (want V100M16|V100M32)." Returns the length (snprintf). */
int gs_diagnosis_format(const struct gs_diagnosis *d, const struct gs_pod *pod, char *buf, size_t len);
void gs_diagnosis_free(struct gs_diagnosis *d);

struct gs_schedule_result {
    enum gs_code code;           /* SUCCESS (reserved, permitted), WAIT (reserved, waiting at Permit), or a failure */
    struct gs_assignment a;      /* node and devices when SUCCESS or WAIT */
    struct gs_status status;     /* failing status, plugin-stamped */
    struct gs_diagnosis diag;    /* filled when no node fit */
    int32_t nominated_node;      /* from PostFilter, -1 none */
    int32_t feasible_nodes;
};
void gs_schedule_result_free(struct gs_schedule_result *r);

struct gs_framework;

/* Instantiates profile p over cache (borrowed: both must outlive the framework).
 * Calls every enabled plugin's init with its args. 0 or an error with d filled. */
int gs_framework_new(const struct gs_profile *p, const struct gs_handle *h, struct gs_framework **out,
                     struct gs_diags *d);
void gs_framework_free(struct gs_framework *fw);

/* Runs one scheduling cycle for pod (borrowed until the pod leaves the cache).
 * On SUCCESS/WAIT the pod is assumed in the cache with assumed_ttl_ns (0 = no expiry). */
int gs_framework_schedule(struct gs_framework *fw, const struct gs_pod *pod, int64_t assumed_ttl_ns,
                          struct gs_schedule_result *res);
/* Binding cycle for a reserved (SUCCESS) pod: PreBind, Bind, PostBind. On
 * success the cache assumption is confirmed; on failure it is forgotten after
 * Unreserve. Returns the final status. */
struct gs_status gs_framework_bind(struct gs_framework *fw, const struct gs_pod *pod);

/* QueueSort of the profile (for the queue). */
bool gs_framework_less(struct gs_framework *fw, const struct gs_queued_pod *a, const struct gs_queued_pod *b);
/* PreEnqueue of the profile. */
struct gs_status gs_framework_pre_enqueue(struct gs_framework *fw, const struct gs_pod *pod);

/* Waiting pods (Permit Wait). allow: one permit plugin's approval (the pod
 * proceeds when every waiting plugin allowed); reject: unreserve and fail. */
int gs_framework_allow(struct gs_framework *fw, const char *pod_key, const char *plugin);
int gs_framework_reject(struct gs_framework *fw, const char *pod_key, const char *plugin, const char *reason);
/* Rejects waiting pods whose timeout passed; returns how many. cb gets each
 * pod that became ready (allowed: ok=true) or was rejected (ok=false). */
int gs_framework_tick(struct gs_framework *fw, void (*cb)(const struct gs_pod *, bool ok, void *), void *arg);
/* Number of pods waiting at Permit. */
size_t gs_framework_waiting(const struct gs_framework *fw);

/* Inside gs_framework_tick's callback for a rejected pod: why it was rejected. */
const char *gs_framework_last_rejection(const struct gs_framework *fw);
/* Earliest deadline (clock ns) among pods waiting at Permit, or -1 when none. */
int64_t gs_framework_next_deadline(const struct gs_framework *fw);

/* Cluster events, passed to every enabled plugin that has on_pod / on_podgroup. */
void gs_framework_notify_pod(struct gs_framework *fw, const struct gs_pod *pod, bool added);
void gs_framework_notify_podgroup(struct gs_framework *fw, const struct gs_podgroup *pg, bool added);
/* The state an enabled plugin's init made (borrowed), or NULL when the plugin
 * is not enabled (or keeps no state). */
void *gs_framework_plugin_state(struct gs_framework *fw, const char *name);

/* PreFilter + Filter for one pod over given nodes, outside the scheduling
 * cycle and without touching its state: what preemption simulates with, gang
 * planning places members with, and explain reports from. */
struct gs_filter_run {
    struct gs_node_info *const *nodes; /* in: n candidates */
    size_t n;
    bool each;               /* in: every Filter plugin sees every node (explain); else only survivors */
    const char *skip;        /* in: plugin left out of PreFilter and Filter (the caller itself), NULL none */
    uint8_t *reject;         /* out, caller's: n codes (0 = fits), or nfilter x n when each (plugin-major) */
    int8_t *by;              /* out, optional, !each: Filter plugin index that rejected node i, -1 none */
    struct gs_status prefilter; /* out: PreFilter's rejection (every node then rejected), else Success */
    bool classes;            /* in: the nodes stand for their node classes (one each, !each only) */
    bool not_by_class;       /* out, with classes: a Filter that runs is not class-aware for the
                                pod (plugin.h by_class); nothing was judged, the caller goes by node */
};
/* Returns how many nodes passed every Filter, or a negative GS_E*. */
int gs_framework_run_filters(struct gs_framework *fw, const struct gs_pod *pod, struct gs_filter_run *run);
/* Filter plugins of the profile, in order: count, and plugin i with its state. */
int gs_framework_filter_count(const struct gs_framework *fw);
const struct gs_plugin *gs_framework_filter_plugin(const struct gs_framework *fw, int i, void **state);

/* gs_framework_schedule over the given nodes only (cache indices; dead and
 * unschedulable ones are left out, the rest taken in cache order): what the
 * kube-scheduler extender's bind uses to choose devices on the node
 * kube-scheduler picked, with the same Reserve plugins a full cycle runs. */
int gs_framework_schedule_on(struct gs_framework *fw, const struct gs_pod *pod, const int32_t *idx, size_t n,
                             int64_t assumed_ttl_ns, struct gs_schedule_result *res);
/* PreFilter, PreScore, Score and NormalizeScore for pod on n nodes of the
 * framework's cache, outside the scheduling cycle: total[i] = the weighted
 * sum over the active Score plugins (0..gs_framework_max_total_score). A
 * PreFilter or PreScore failure leaves every total 0 and is put in *failed
 * (else Success). 0 or GS_ENOMEM. */
int gs_framework_run_scores(struct gs_framework *fw, const struct gs_pod *pod, struct gs_node_info *const *nodes,
                            size_t n, int64_t *total, struct gs_status *failed);
/* GS_MAX_SCORE times the sum of the Score weights: the highest total. */
int64_t gs_framework_max_total_score(const struct gs_framework *fw);

/* Node classes (plugin.h): AUTO (the default) decides by class unless the
 * classes are nearly as many as the nodes; OFF filters and scores every
 * node; ALWAYS decides by class whenever the plugins allow. The decisions
 * are the same in every mode; OFF and ALWAYS are for tests that prove it. */
enum gs_node_classes { GS_CLASSES_AUTO, GS_CLASSES_OFF, GS_CLASSES_ALWAYS };
void gs_framework_set_node_classes(struct gs_framework *fw, enum gs_node_classes mode);
enum gs_node_classes gs_framework_node_classes(const struct gs_framework *fw);
/* Called from a plugin's by_class during a cycle: the plugin's Filter, Score
 * and NormalizeScore are functions of the class on every node but `node`,
 * which is judged on its own (its class's other members keep one
 * representative, the node itself is a candidate of size one). A planned
 * gang member's preferred node is such a node. Holds until the cycle ends. */
void gs_framework_class_apart(struct gs_framework *fw, int32_t node);
/* The node set apart so far in this cycle's by_class calls, -1 none. */
int32_t gs_framework_class_apart_node(const struct gs_framework *fw);
/* How many cycles chose their node by class so far. */
uint64_t gs_framework_class_cycles(const struct gs_framework *fw);

/* Diagnosis text (on by default). Off: a cycle where no node fits leaves
 * status.reason empty (res.diag is filled all the same, and
 * gs_diagnosis_format(&res.diag, pod, ...) gives the line when someone reads
 * it), for drivers that read no reasons and run millions of failed cycles
 * (a simulator). Decisions do not depend on it. */
void gs_framework_set_diagnosis_text(struct gs_framework *fw, bool on);

/* The per-cycle arena (scratch valid until the next cycle). */
struct gs_arena *gs_framework_arena(struct gs_framework *fw);

#endif
