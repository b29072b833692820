/*
 * object.h - the Kubernetes-shaped object model: typed views over documents.
 *
 * Every object is decoded from a JSON document (jansson json_t; YAML is turned
 * into the same json_t by codec.c). The document stays attached to the object
 * (`doc`, owned, one reference) and is the source of truth for encoding, so
 * fields we do not model - and fields of kinds we do not know - survive a
 * round trip unchanged. The typed structs below are what the scheduler reads:
 * fields parsed once at decode time, with quantities already exact integers
 * and the pod's total demand precomputed (struct gs_demand).
 *
 * Decoding validates: every problem is reported to a struct gs_diags with the
 * field path (`spec.containers[0].resources.limits["nvidia.com/gpu"]`) and a
 * message naming the value and why it is wrong. An object with problems is not
 * returned.
 *
 * Objects may also be built without a document (the simulator builds pods
 * from CSV rows): doc is then NULL and gs_object_to_json() synthesises one.
 *
 * Well-known names (keep stable, users rely on them):
 */
#ifndef GS_CORE_OBJECT_H
#define GS_CORE_OBJECT_H

#include "core/error.h"
#include "core/labels.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define GS_RES_CPU "cpu"
#define GS_RES_MEMORY "memory"
#define GS_RES_PODS "pods"
#define GS_RES_GPU "nvidia.com/gpu"
#define GS_ANN_GPU_MILLI "gpusched.io/gpu-milli"   /* per-GPU share, 1..1000 */
#define GS_ANN_GPU_MEMORY "gpusched.io/gpu-memory" /* per-GPU memory, MiB */
#define GS_ANN_GPU_MODEL "gpusched.io/gpu-model"   /* acceptable models, "V100M16|V100M32" */
#define GS_ANN_KAI_GPU_FRACTION "gpu-fraction"      /* KAI: "0.5" -> 500 milli */
#define GS_ANN_KAI_GPU_MEMORY "gpu-memory"          /* KAI: MiB */
#define GS_ANN_DEVICES "gpusched.io/devices"       /* chosen devices on a bound pod */
#define GS_ANN_SIM_ARRIVAL "sim.gpusched.io/arrival"   /* seconds */
#define GS_ANN_SIM_DURATION "sim.gpusched.io/duration" /* seconds */
#define GS_LABEL_POD_GROUP "scheduling.x-k8s.io/pod-group"
#define GS_ANN_VOLCANO_GROUP "scheduling.k8s.io/group-name"
#define GS_ANN_NODE_GPUS "gpusched.io/gpus" /* Node: JSON text of the status.devices array (node DaemonSet) */
#define GS_LABEL_GPU_MEMORY "nvidia.com/gpu.memory" /* GFD: MiB per GPU */
#define GS_LABEL_QUEUE "kueue.x-k8s.io/queue-name"
#define GS_LABEL_KUEUE_PRIORITY_CLASS "kueue.x-k8s.io/priority-class" /* a WorkloadPriorityClass */
#define GS_LABEL_GPU_PRODUCT "nvidia.com/gpu.product"
#define GS_DEFAULT_SCHEDULER "default-scheduler"

/*--- Kinds ---*/

enum gs_kind {
    GS_KIND_UNKNOWN = 0, /* kept as a generic object: meta + doc */
    GS_KIND_NODE,
    GS_KIND_POD,
    GS_KIND_PODGROUP,              /* scheduling.x-k8s.io/v1alpha1, scheduling.volcano.sh/v1beta1 */
    GS_KIND_QUEUE,                 /* scheduling.gpusched.io/v1alpha1, scheduling.volcano.sh/v1beta1 */
    GS_KIND_CLUSTERQUEUE,          /* kueue.x-k8s.io/v1beta1|v1beta2 */
    GS_KIND_LOCALQUEUE,            /* kueue.x-k8s.io */
    GS_KIND_RESOURCEFLAVOR,        /* kueue.x-k8s.io */
    GS_KIND_RESOURCECLAIM,         /* resource.k8s.io */
    GS_KIND_DEVICECLASS,           /* resource.k8s.io */
    GS_KIND_RESOURCESLICE,         /* resource.k8s.io */
    GS_KIND_NODERESOURCETOPOLOGY,  /* topology.node.k8s.io/v1alpha2 */
    GS_KIND_CLUSTERPOLICY,         /* nvidia.com/v1 */
    GS_KIND_PRIORITYCLASS,         /* scheduling.k8s.io/v1 */
    GS_KIND_WORKLOAD,              /* scheduling.k8s.io/v1beta1 (native gang templates; Kueue's is generic) */
    GS_KIND_WORKLOADPRIORITYCLASS, /* kueue.x-k8s.io */
    GS_KIND_RESOURCECLAIMTEMPLATE, /* resource.k8s.io */
    GS_KIND_DEVICETAINTRULE,       /* resource.k8s.io */
    GS_KIND_GPUCLUSTER,            /* nvidia.com/v1alpha1 (the DRA counterpart of ClusterPolicy) */
    GS_KIND_RUNTIMECLASS,          /* node.k8s.io/v1: which runtime handler runs a pod */
    GS_KIND_COUNT
};

/* "Pod" -> GS_KIND_POD ...; GS_KIND_UNKNOWN for anything else. */
enum gs_kind gs_kind_from_name(const char *kind);
const char *gs_kind_name(enum gs_kind k);

/*--- Common parts ---*/

struct gs_meta {
    char *name;
    char *namespace_; /* NULL for cluster-scoped kinds; "default" filled in for pods without one */
    char *uid;
    char *resource_version;
    char *creation_timestamp; /* RFC 3339 text as given */
    struct gs_labels labels;
    struct gs_labels annotations;
};

/* One named resource amount in milli-units (cpu "500m" -> 500, memory "1Gi" -> 2^30*1000). */
struct gs_resource {
    char *name;
    int64_t milli;
};

struct gs_resources {
    struct gs_resource *v;
    size_t n;
};

/* Milli-units of name, or 0 when absent. */
int64_t gs_resources_get(const struct gs_resources *r, const char *name);
int gs_resources_set(struct gs_resources *r, const char *name, int64_t milli);
void gs_resources_free(struct gs_resources *r);

/*--- Pod ---*/

struct gs_container {
    char *name;
    char *image;
    char **command; size_t ncommand;
    char **args; size_t nargs;
    struct gs_resources requests;
    struct gs_resources limits;
};

enum gs_when_unsatisfiable { GS_DO_NOT_SCHEDULE, GS_SCHEDULE_ANYWAY };

struct gs_spread_constraint {
    int32_t max_skew;
    char *topology_key;
    enum gs_when_unsatisfiable when_unsatisfiable;
    struct gs_selector label_selector;
    int32_t min_domains; /* 0 when unset */
};

/* One podAffinity / podAntiAffinity term (kube's PodAffinityTerm). The
 * selector already carries matchLabelKeys (key In (own value)) and
 * mismatchLabelKeys (key NotIn (own value)) for the keys the pod has, as the
 * API server merges them at creation. Namespaces: the listed ones, plus those
 * whose labels match namespace_selector when has_ns_selector (an empty
 * selector matches every namespace); neither given: the pod's own. */
struct gs_pod_affinity_term {
    bool has_selector;             /* labelSelector absent: the term matches no pod */
    struct gs_selector selector;
    char **namespaces; size_t nnamespaces;
    bool has_ns_selector;
    struct gs_selector ns_selector;
    char *topology_key;
    int32_t weight;                /* preferred terms: 1..100; required: 0 */
};

/* spec.affinity.podAffinity / podAntiAffinity (decoded by pod_affinity.c). */
struct gs_pod_affinity {
    struct gs_pod_affinity_term *req_aff; size_t nreq_aff;
    struct gs_pod_affinity_term *pref_aff; size_t npref_aff;
    struct gs_pod_affinity_term *req_anti; size_t nreq_anti;
    struct gs_pod_affinity_term *pref_anti; size_t npref_anti;
};

/* What the scheduler needs of a pod, derived once at decode. Effective
 * requests follow Kubernetes: max(sum over containers, max over init
 * containers) per resource; an extended resource given only as a limit
 * requests the limit. GPU: nvidia.com/gpu count, or 1 when only a fractional
 * annotation is present. */
struct gs_demand {
    int64_t cpu_milli;
    int64_t mem_bytes;
    int32_t gpu_count;      /* GPUs wanted (0 = none) */
    int32_t gpu_milli;      /* share of each GPU, 1..1000; 1000 = whole GPU; 0 when gpu_count == 0 */
    int64_t gpu_mem_mib;    /* per-GPU memory wanted, 0 = no constraint */
    char **gpu_models;      /* acceptable GPU models (from GS_ANN_GPU_MODEL), NULL when any */
    size_t ngpu_models;
    struct gs_resources extended; /* every other requested resource except cpu, memory, nvidia.com/gpu */
};

struct gs_pod {
    struct gs_meta meta;
    json_t *doc;               /* owned reference; NULL when built in memory */
    char *node_name;           /* spec.nodeName, NULL when unbound */
    char *scheduler_name;      /* defaults to "default-scheduler" */
    char *priority_class_name;
    int32_t priority;          /* spec.priority (0 when unset) */
    bool preempt_never;        /* spec.preemptionPolicy: Never (default PreemptLowerPriority) */
    struct gs_container *containers; size_t ncontainers;
    struct gs_container *init_containers; size_t ninit_containers;
    struct gs_labels node_selector;
    struct gs_node_affinity node_affinity;
    struct gs_toleration *tolerations; size_t ntolerations;
    struct gs_spread_constraint *spread; size_t nspread;
    struct gs_pod_affinity *pod_affinity; /* NULL when the pod has no pod (anti-)affinity terms */
    /* The group key, equal to its PodGroup's gs_podgroup.group: the name from
     * GS_LABEL_POD_GROUP (scheduler-plugins); "scheduling.volcano.sh/<name>"
     * from GS_ANN_VOLCANO_GROUP; "scheduling.k8s.io/<name>" from
     * spec.schedulingGroup.podGroupName (native). The prefixes keep two shapes
     * with one name in one namespace apart (names never hold '/'). */
    char *pod_group;
    char *queue_name;          /* from GS_LABEL_QUEUE */
    char *phase;               /* status.phase, NULL when unset */
    struct gs_demand demand;
};

/*--- Node ---*/

struct gs_mig_instance {
    char *profile; /* "1g.10gb" */
    char *uuid;    /* may be NULL */
};

/* One GPU of a node, from status.devices[] (written by discovery). */
struct gs_gpu {
    int32_t index;
    char *uuid;
    char *model;
    int64_t memory_mib;
    int32_t numa_node;      /* -1 when unknown */
    uint64_t nvlink_peers;  /* bit i set: NVLink to the GPU with index i (indices < 64) */
    bool healthy;
    bool mig_enabled;
    struct gs_mig_instance *mig; size_t nmig;
};

/* Where a node's per-GPU state came from (node.c; NRT: sched/gpu_state.h). */
enum gs_gpu_source {
    GS_GPU_SRC_NONE = 0,   /* no GPUs */
    GS_GPU_SRC_DEVICES,    /* status.devices */
    GS_GPU_SRC_ANNOTATION, /* GS_ANN_NODE_GPUS */
    GS_GPU_SRC_NRT,        /* NUMA zones of the node's NodeResourceTopology, count from allocatable */
    GS_GPU_SRC_COUNT,      /* allocatable nvidia.com/gpu only: no uuid, NUMA or NVLink */
};

struct gs_node {
    struct gs_meta meta;
    json_t *doc;
    bool unschedulable;              /* spec.unschedulable */
    struct gs_taint *taints; size_t ntaints;
    struct gs_resources capacity;    /* status.capacity */
    struct gs_resources allocatable; /* status.allocatable (defaults to capacity when absent) */
    struct gs_gpu *gpus; size_t ngpus;
    enum gs_gpu_source gpu_source;
    char *gpu_note;                  /* why GS_ANN_NODE_GPUS was not used ("node n1: annotation ...: ..."), or NULL */
};

/*--- Gang and queues ---*/

/* The three PodGroup shapes (kinds.c). */
enum gs_pg_shape {
    GS_PG_COSCHED = 0, /* scheduling.x-k8s.io/v1alpha1 (and scheduling.gpusched.io) */
    GS_PG_VOLCANO,     /* scheduling.volcano.sh/v1beta1 */
    GS_PG_NATIVE,      /* scheduling.k8s.io/v1beta1, pods join by spec.schedulingGroup.podGroupName */
};

struct gs_podgroup {
    struct gs_meta meta;
    json_t *doc;
    enum gs_pg_shape shape;
    char *group;                      /* the key member pods' pod_group holds (see gs_pod) */
    int32_t min_member;               /* minMember; native: schedulingPolicy.gang.minCount, 1 for basic */
    struct gs_resources min_resources;
    int32_t schedule_timeout_seconds; /* 0 when unset (the plugin's default applies) */
    char *queue;                      /* Volcano spec.queue, NULL when unset */
    int32_t priority;
    char *priority_class_name;        /* spec.priorityClassName, NULL when unset */
    char *topology_key;               /* native schedulingConstraints.topology[0].key: a required domain, or NULL */
};

struct gs_queue {
    struct gs_meta meta;
    json_t *doc;
    char *parent;                  /* NULL for a root */
    int32_t weight;                /* >= 1, default 1 */
    int32_t priority;
    struct gs_resources guarantee; /* deserved / guaranteed quota */
    struct gs_resources limit;     /* capability; empty = unlimited */
};

/*--- The generic object ---*/

struct gs_object {
    enum gs_kind kind;
    char *api_version;
    char *kind_name;       /* as written in the document */
    union {
        struct gs_meta *meta; /* every typed struct starts with struct gs_meta */
        struct gs_pod *pod;
        struct gs_node *node;
        struct gs_podgroup *podgroup;
        struct gs_queue *queue;
        struct gs_generic *generic;
    } u;
};

/* Kinds without a dedicated struct yet (ClusterQueue, ResourceFlavor, ...). */
struct gs_generic {
    struct gs_meta meta;
    json_t *doc;
};

/* Decodes and validates one document. On success *out is a new object holding
 * its own reference to doc (the caller's reference is untouched); free with
 * gs_object_free. On failure returns GS_EINVAL with every problem in d. */
int gs_object_decode(json_t *doc, struct gs_object **out, struct gs_diags *d);
/* The object's document (borrowed; synthesised and cached for in-memory objects). */
json_t *gs_object_to_json(struct gs_object *o);
void gs_object_free(struct gs_object *o);

/* Typed decoders used by gs_object_decode; each fills *out (caller-allocated,
 * zeroed on failure) and reports problems under path prefix "". */
int gs_pod_decode(json_t *doc, struct gs_pod *out, struct gs_diags *d);
int gs_node_decode(json_t *doc, struct gs_node *out, struct gs_diags *d);
/* Gives a count-only node (gpu_source COUNT or NRT) one GPU per allocatable
 * nvidia.com/gpu, numbered zone by zone: zone z (NUMA node zone_numa[z])
 * holds zone_gpus[z] of them; model and memory from the GFD labels. With no
 * GPUs in the zones the node is count-only again. Other nodes are left as
 * they are. 0 or GS_ENOMEM. */
int gs_node_gpus_from_zones(struct gs_node *n, const int32_t *zone_numa, const int32_t *zone_gpus, int nzones);
/* "status.devices", "annotation gpusched.io/gpus", "NodeResourceTopology", "count-only", "none". */
const char *gs_gpu_source_name(enum gs_gpu_source s);
void gs_pod_clear(struct gs_pod *p);
void gs_node_clear(struct gs_node *n);
void gs_meta_clear(struct gs_meta *m);

/* "namespace/name" into buf (or "name" when cluster-scoped). */
int gs_meta_key(const struct gs_meta *m, char *buf, size_t len);

#endif
