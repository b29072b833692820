/*
 * extender.h - the kube-scheduler extender: our Filter, Score, preemption and
 * device choice answering kube-scheduler's HTTP callouts, for clusters that
 * keep kube-scheduler.
 *
 * kube-scheduler (KubeSchedulerConfiguration `extenders[]`) POSTs JSON to
 * <urlPrefix>/<verb> for the pods it is told to (managedResources), after
 * its own plugins ran. The shapes are k8s.io/kube-scheduler/extender/v1,
 * which carry no JSON tags: keys are the Go field names (ExtenderArgs {Pod,
 * Nodes, NodeNames}, ExtenderFilterResult {Nodes, NodeNames, FailedNodes,
 * FailedAndUnresolvableNodes, Error}, HostPriorityList [{Host, Score}],
 * ExtenderPreemptionArgs {Pod, NodeNameToVictims, NodeNameToMetaVictims},
 * ExtenderPreemptionResult {NodeNameToMetaVictims}, ExtenderBindingArgs
 * {PodName, PodNamespace, PodUID, Node}, ExtenderBindingResult {Error}).
 * Keys are written exactly so and read without regard to case, as Go reads
 * them.
 *
 * The extender keeps the scheduler's cache (sched/cache.h) of the nodes,
 * their NodeResourceTopology and the bound pods, fed from a struct gs_source
 * (list, then the change stream; a fall behind relists), decoded with the
 * same core decoders and devices annotation as the in-server loop. Each
 * request runs the framework of one profile (the server's default unless
 * configured) on the nodes it names:
 *
 *   - filter: PreFilter + Filter; a rejected node carries the rejecting
 *     plugin's reason (the text explain prints), under FailedAndUnresolvable
 *     when preemption cannot help there.
 *   - prioritize: the weighted Score sum mapped onto 0..10
 *     (MaxExtenderPriority): score = round(10 * total / highest total).
 *   - preempt: for each candidate node the victims our preemption search
 *     picks on that node alone (lowest priority first, fewest pods); a node
 *     where evicting cannot make the pod fit is left out. NumPDBViolations is
 *     kube-scheduler's own count for the node, passed back.
 *   - bind: the devices a full cycle would choose on that node (the same
 *     Reserve plugins), then gs_source_bind with the gpusched.io/devices
 *     annotation; the pod is accounted in the cache at once.
 *
 * nodeCacheCapable true: NodeNames are looked up in the cache. false: the
 * Nodes items of the request are decoded into a scratch cache that takes the
 * main cache's bound pods on those nodes (and their NRT), so the answer
 * judges the nodes as sent with our pod accounting.
 *
 * Thread-safe: requests and the follower thread serialise on one mutex.
 */
#ifndef GS_KUBE_EXTENDER_H
#define GS_KUBE_EXTENDER_H

#include "core/error.h"
#include "informer/source.h"
#include "sched/framework.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_mbuf;

enum gs_ext_verb { GS_EXT_FILTER, GS_EXT_PRIORITIZE, GS_EXT_PREEMPT, GS_EXT_BIND, GS_EXT_VERBS };

/* "filter", "prioritize", "preempt", "bind". */
const char *gs_ext_verb_name(enum gs_ext_verb v);
/* The verb of a name (exact), or -1. */
int gs_ext_verb_parse(const char *name);

/*--- Requests (outside input: parsed and checked before anything runs) ---*/

/* One node's victims in a preemption request. */
struct gs_ext_victims {
    const char *node;      /* borrowed from the request document */
    const char **uids;     /* victims' UIDs (borrowed), nuids of them */
    size_t nuids;
    int64_t pdb_violations; /* NumPDBViolations */
};

struct gs_ext_request {
    enum gs_ext_verb verb;
    json_t *doc;               /* the whole body (owned) */
    json_t *pod;               /* filter, prioritize, preempt: the Pod (borrowed from doc) */
    bool cache_capable;        /* NodeNames / NodeNameToMetaVictims form */
    json_t *node_items;        /* !cache_capable filter/prioritize: Nodes.items (borrowed) */
    const char **names;        /* filter/prioritize: NodeNames, or the names of Nodes.items */
    size_t nnames;
    struct gs_ext_victims *victims; /* preempt: one per node, sorted by node name */
    size_t nvictims;
    const char *pod_name, *pod_namespace, *pod_uid, *node; /* bind (pod_uid may be NULL) */
};

/* Parses body as the request of verb v. 0, or GS_EINVAL with err naming the
 * field, the value and why ("ExtenderArgs.Pod: required"), or GS_ENOMEM.
 * Free with gs_ext_request_free (also after a failure). */
int gs_ext_request_parse(enum gs_ext_verb v, const char *body, size_t len, struct gs_ext_request *out, char *err,
                         size_t errlen);
void gs_ext_request_free(struct gs_ext_request *r);

/*--- The extender ---*/

struct gs_extender_opts {
    struct gs_source *source;             /* borrowed; outlives the extender */
    const struct gs_sched_config *config; /* borrowed; NULL: the server's default (gs_sched_config_gpusched) */
    const char *profile;                  /* schedulerName of the profile to run; NULL: the first */
    uint64_t seed;
};

struct gs_extender_stats {
    bool synced;                     /* the first lists are in */
    uint64_t nodes, pods;            /* nodes in the cache, bound pods accounted */
    uint64_t relists;                /* loads after falling behind the change stream */
    uint64_t requests[GS_EXT_VERBS]; /* answered, per verb */
    uint64_t errors[GS_EXT_VERBS];   /* of which refused (4xx) or failed (an Error in the answer) */
};

struct gs_extender;

/* Builds the profile's framework and starts the follower thread (which
 * lists, then follows the source). 0, GS_EINVAL (unknown profile or bad
 * plugin args, in d), GS_ENOMEM. */
int gs_extender_new(const struct gs_extender_opts *o, struct gs_extender **out, struct gs_diags *d);
/* Stops the thread and frees everything (the source stays the caller's). */
void gs_extender_free(struct gs_extender *x);
/* Waits up to timeout_ms for the first lists. */
bool gs_extender_wait_synced(struct gs_extender *x, int timeout_ms);
void gs_extender_stats(struct gs_extender *x, struct gs_extender_stats *out);

/* One answer: HTTP status and a JSON body (malloc'd; caller frees). */
struct gs_ext_reply {
    int status;
    char *body;
};

/* Answers one request of verb v. 200 with the verb's result type (an Error
 * field when the extender could not do it: bind refused, pod gone); 400 with
 * {"Error": "..."} naming the field when the body is not a valid request;
 * 503 before the first lists are in. 0 or GS_ENOMEM. */
int gs_extender_handle(struct gs_extender *x, enum gs_ext_verb v, const char *body, size_t len,
                       struct gs_ext_reply *out);

/* Prometheus text: requests and errors per verb, latency per verb, cache
 * size, synced. */
void gs_extender_metrics(struct gs_extender *x, struct gs_mbuf *b);

/*--- HTTP (extender_http.c) ---*/

struct gs_extender_http_opts {
    const char *listen;        /* "HOST:PORT", ":PORT", "[V6]:PORT" */
    const char *tls_cert_file; /* PEM; both or neither (then plain HTTP) */
    const char *tls_key_file;
    size_t max_body;           /* bytes; 0 = 64 MiB (a 5,000-node NodeList fits) */
};

struct gs_extender_http;

/* Serves POST .../filter, .../prioritize, .../preempt, .../bind (the last
 * path segment names the verb, so any urlPrefix works), GET /healthz,
 * /readyz (200 once synced) and /metrics. 0, GS_EINVAL (bad address, TLS
 * files unreadable: err says which) or GS_EIO (cannot listen). */
int gs_extender_http_start(struct gs_extender *x, const struct gs_extender_http_opts *o,
                           struct gs_extender_http **out, char *err, size_t errlen);
int gs_extender_http_port(const struct gs_extender_http *h);
void gs_extender_http_stop(struct gs_extender_http *h);

#endif
