/*
 * schema.c - per-kind field tables and the walker behind field validation;
 * see schema.h.
 *
 * A schema is a tree of static field lists: each field has a name, a shape
 * (a scalar, an enum string, an object with its own list, a list of such
 * objects, a free map, or anything at all) and, for enums, the sorted set of
 * allowed values, as kube-apiserver prints them. Shared shapes (ObjectMeta,
 * LabelSelector, Toleration, Container) are one list used wherever they
 * appear. Lookups are linear scans of short lists: a pod spec has ~40
 * fields and a walk touches each member of the document once (about 1.6 us
 * for a one-container pod, a third of what decoding it costs).
 *
 * The walker is fed untrusted JSON (request bodies): it recurses only as
 * deep as the schema goes, so a document nested a million levels deep
 * costs nothing beyond what the schema names (fuzzed by
 * tests/fuzz/fuzz_schema.c).
 */
#include "core/schema.h"

#include <stdio.h>
#include <string.h>

/*--- Shapes ---*/

enum shape {
    S_SCALAR, /* any scalar; its type is the decoders' business */
    S_ENUM,   /* a string among enums */
    S_ENUM0,  /* the same, or "" (toleration effect and operator) */
    S_OBJ,    /* an object with the fields in sub */
    S_LIST,   /* an array of such objects */
    S_MAP,    /* an object with free keys (labels, resource lists) */
    S_ANY,    /* anything (status, free-form parts) */
};

struct sfield {
    const char *name;
    enum shape shape;
    const struct sfield *sub;  /* S_OBJ, S_LIST */
    const char *const *enums;  /* S_ENUM*: sorted, NULL-terminated */
};

#define SC(n) {n, S_SCALAR, NULL, NULL}
#define EN(n, e) {n, S_ENUM, NULL, e}
#define EN0(n, e) {n, S_ENUM0, NULL, e}
#define OB(n, s) {n, S_OBJ, s, NULL}
#define LI(n, s) {n, S_LIST, s, NULL}
#define MA(n) {n, S_MAP, NULL, NULL}
#define AN(n) {n, S_ANY, NULL, NULL}
#define END {NULL, S_SCALAR, NULL, NULL}

/*--- Enums (sorted, as kube-apiserver lists them) ---*/

static const char *const e_restart[] = {"Always", "Never", "OnFailure", NULL};
static const char *const e_container_restart[] = {"Always", NULL};
static const char *const e_dns[] = {"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None", NULL};
static const char *const e_pull[] = {"Always", "IfNotPresent", "Never", NULL};
static const char *const e_preempt[] = {"Never", "PreemptLowerPriority", NULL};
static const char *const e_effect[] = {"NoExecute", "NoSchedule", "PreferNoSchedule", NULL};
static const char *const e_tol_op[] = {"Equal", "Exists", NULL};
static const char *const e_protocol[] = {"SCTP", "TCP", "UDP", NULL};
static const char *const e_sel_op[] = {"DoesNotExist", "Exists", "In", "NotIn", NULL};
static const char *const e_node_op[] = {"DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn", NULL};
static const char *const e_when[] = {"DoNotSchedule", "ScheduleAnyway", NULL};
static const char *const e_honor[] = {"Honor", "Ignore", NULL};
static const char *const e_term_msg[] = {"FallbackToLogsOnError", "File", NULL};
static const char *const e_propagation[] = {"Bidirectional", "HostToContainer", "None", NULL};
static const char *const e_resize[] = {"NotRequired", "RestartContainer", NULL};
static const char *const e_os[] = {"linux", "windows", NULL};
static const char *const e_unhealthy[] = {"AlwaysAllow", "IfHealthyBudget", NULL};
static const char *const e_delete_prop[] = {"Background", "Foreground", "Orphan", NULL};
static const char *const e_event_type[] = {"Normal", "Warning", NULL};

/*--- Shared shapes ---*/

static const struct sfield owner_ref[] = {SC("apiVersion"), SC("blockOwnerDeletion"), SC("controller"), SC("kind"),
                                          SC("name"), SC("uid"), END};

static const struct sfield object_meta[] = {
    MA("annotations"), SC("creationTimestamp"), SC("deletionGracePeriodSeconds"), SC("deletionTimestamp"),
    AN("finalizers"), SC("generateName"), SC("generation"), MA("labels"), AN("managedFields"), SC("name"),
    SC("namespace"), LI("ownerReferences", owner_ref), SC("resourceVersion"), SC("selfLink"), SC("uid"), END};

static const struct sfield sel_req[] = {SC("key"), EN("operator", e_sel_op), AN("values"), END};
static const struct sfield label_selector[] = {LI("matchExpressions", sel_req), MA("matchLabels"), END};

static const struct sfield node_req[] = {SC("key"), EN("operator", e_node_op), AN("values"), END};
static const struct sfield node_term[] = {LI("matchExpressions", node_req), LI("matchFields", node_req), END};
static const struct sfield node_selector[] = {LI("nodeSelectorTerms", node_term), END};
static const struct sfield preferred_term[] = {OB("preference", node_term), SC("weight"), END};
static const struct sfield node_affinity[] = {
    LI("preferredDuringSchedulingIgnoredDuringExecution", preferred_term),
    OB("requiredDuringSchedulingIgnoredDuringExecution", node_selector), END};

static const struct sfield pod_affinity_term[] = {OB("labelSelector", label_selector), AN("matchLabelKeys"),
                                                  AN("mismatchLabelKeys"), OB("namespaceSelector", label_selector),
                                                  AN("namespaces"), SC("topologyKey"), END};
static const struct sfield weighted_pod_term[] = {OB("podAffinityTerm", pod_affinity_term), SC("weight"), END};
static const struct sfield pod_affinity[] = {LI("preferredDuringSchedulingIgnoredDuringExecution", weighted_pod_term),
                                             LI("requiredDuringSchedulingIgnoredDuringExecution", pod_affinity_term),
                                             END};
static const struct sfield affinity[] = {OB("nodeAffinity", node_affinity), OB("podAffinity", pod_affinity),
                                         OB("podAntiAffinity", pod_affinity), END};

static const struct sfield toleration[] = {EN0("effect", e_effect), SC("key"), EN0("operator", e_tol_op),
                                           SC("tolerationSeconds"), SC("value"), END};
static const struct sfield taint[] = {EN("effect", e_effect), SC("key"), SC("timeAdded"), SC("value"), END};

static const struct sfield spread[] = {OB("labelSelector", label_selector), AN("matchLabelKeys"), SC("maxSkew"),
                                       SC("minDomains"), EN("nodeAffinityPolicy", e_honor),
                                       EN("nodeTaintsPolicy", e_honor), SC("topologyKey"),
                                       EN("whenUnsatisfiable", e_when), END};

/*--- Container ---*/

static const struct sfield port[] = {SC("containerPort"), SC("hostIP"), SC("hostPort"), SC("name"),
                                     EN("protocol", e_protocol), END};
static const struct sfield env_var[] = {SC("name"), SC("value"), AN("valueFrom"), END};
static const struct sfield env_from[] = {AN("configMapRef"), SC("prefix"), AN("secretRef"), END};
static const struct sfield claim_ref[] = {SC("name"), SC("request"), END};
static const struct sfield resources[] = {LI("claims", claim_ref), MA("limits"), MA("requests"), END};
static const struct sfield probe[] = {AN("exec"), SC("failureThreshold"), AN("grpc"), AN("httpGet"),
                                      SC("initialDelaySeconds"), SC("periodSeconds"), SC("successThreshold"),
                                      AN("tcpSocket"), SC("terminationGracePeriodSeconds"), SC("timeoutSeconds"),
                                      END};
static const struct sfield lifecycle[] = {AN("postStart"), AN("preStop"), SC("stopSignal"), END};
static const struct sfield mount[] = {SC("mountPath"), EN("mountPropagation", e_propagation), SC("name"),
                                      SC("readOnly"), SC("recursiveReadOnly"), SC("subPath"), SC("subPathExpr"), END};
static const struct sfield device[] = {SC("devicePath"), SC("name"), END};
static const struct sfield resize[] = {SC("resourceName"), EN("restartPolicy", e_resize), END};

#define CONTAINER_FIELDS                                                                                           \
    AN("args"), AN("command"), LI("env", env_var), LI("envFrom", env_from), SC("image"),                          \
        EN("imagePullPolicy", e_pull), OB("lifecycle", lifecycle), OB("livenessProbe", probe), SC("name"),        \
        LI("ports", port), OB("readinessProbe", probe), LI("resizePolicy", resize), OB("resources", resources),   \
        EN("restartPolicy", e_container_restart), AN("securityContext"), OB("startupProbe", probe), SC("stdin"),  \
        SC("stdinOnce"), SC("terminationMessagePath"), EN("terminationMessagePolicy", e_term_msg), SC("tty"),     \
        LI("volumeDevices", device), LI("volumeMounts", mount), SC("workingDir")

static const struct sfield container[] = {CONTAINER_FIELDS, END};
static const struct sfield ephemeral_container[] = {CONTAINER_FIELDS, SC("targetContainerName"), END};

/*--- Pod ---*/

static const struct sfield volume[] = {
    AN("awsElasticBlockStore"), AN("azureDisk"), AN("azureFile"), AN("cephfs"), AN("cinder"), AN("configMap"),
    AN("csi"), AN("downwardAPI"), AN("emptyDir"), AN("ephemeral"), AN("fc"), AN("flexVolume"), AN("flocker"),
    AN("gcePersistentDisk"), AN("gitRepo"), AN("glusterfs"), AN("hostPath"), AN("image"), AN("iscsi"), SC("name"),
    AN("nfs"), AN("persistentVolumeClaim"), AN("photonPersistentDisk"), AN("portworxVolume"), AN("projected"),
    AN("quobyte"), AN("rbd"), AN("scaleIO"), AN("secret"), AN("storageos"), AN("vsphereVolume"), END};
static const struct sfield dns_option[] = {SC("name"), SC("value"), END};
static const struct sfield dns_config[] = {AN("nameservers"), LI("options", dns_option), AN("searches"), END};
static const struct sfield host_alias[] = {AN("hostnames"), SC("ip"), END};
static const struct sfield name_only[] = {SC("name"), END};
static const struct sfield pod_os[] = {EN("name", e_os), END};
static const struct sfield readiness_gate[] = {SC("conditionType"), END};
static const struct sfield sched_group[] = {SC("podGroupName"), END};
static const struct sfield pod_claim[] = {SC("name"), SC("resourceClaimName"), SC("resourceClaimTemplateName"), END};

static const struct sfield pod_spec[] = {
    SC("activeDeadlineSeconds"), OB("affinity", affinity), SC("automountServiceAccountToken"),
    LI("containers", container), OB("dnsConfig", dns_config), EN("dnsPolicy", e_dns), SC("enableServiceLinks"),
    LI("ephemeralContainers", ephemeral_container), LI("hostAliases", host_alias), SC("hostIPC"),
    SC("hostNetwork"), SC("hostPID"), SC("hostUsers"), SC("hostname"), LI("imagePullSecrets", name_only),
    LI("initContainers", container), SC("nodeName"), MA("nodeSelector"), OB("os", pod_os), MA("overhead"),
    EN("preemptionPolicy", e_preempt), SC("priority"), SC("priorityClassName"), LI("readinessGates", readiness_gate),
    LI("resourceClaims", pod_claim), OB("resources", resources), EN("restartPolicy", e_restart),
    SC("runtimeClassName"), SC("schedulerName"), LI("schedulingGates", name_only), OB("schedulingGroup", sched_group),
    AN("securityContext"),
    SC("serviceAccount"), SC("serviceAccountName"), SC("setHostnameAsFQDN"), SC("shareProcessNamespace"),
    SC("subdomain"), SC("terminationGracePeriodSeconds"), LI("tolerations", toleration),
    LI("topologySpreadConstraints", spread), LI("volumes", volume), END};

#define TOP(spec_shape) SC("apiVersion"), SC("kind"), OB("metadata", object_meta), spec_shape, AN("status")

static const struct sfield pod[] = {TOP(OB("spec", pod_spec)), END};

/*--- Other kinds ---*/

static const struct sfield node_spec[] = {AN("configSource"), SC("externalID"), SC("podCIDR"), AN("podCIDRs"),
                                          SC("providerID"), LI("taints", taint), SC("unschedulable"), END};
static const struct sfield node[] = {TOP(OB("spec", node_spec)), END};

static const struct sfield ns_spec[] = {AN("finalizers"), END};
static const struct sfield namespace_[] = {TOP(OB("spec", ns_spec)), END};

static const struct sfield obj_ref[] = {SC("apiVersion"), SC("fieldPath"), SC("kind"), SC("name"), SC("namespace"),
                                        SC("resourceVersion"), SC("uid"), END};
static const struct sfield event_source[] = {SC("component"), SC("host"), END};
static const struct sfield event[] = {SC("action"), SC("apiVersion"), SC("count"), SC("eventTime"),
                                      SC("firstTimestamp"), OB("involvedObject", obj_ref), SC("kind"),
                                      SC("lastTimestamp"), SC("message"), OB("metadata", object_meta), SC("reason"),
                                      OB("related", obj_ref), SC("reportingComponent"), SC("reportingInstance"),
                                      AN("series"), OB("source", event_source), EN("type", e_event_type), END};

static const struct sfield lease_spec[] = {SC("acquireTime"), SC("holderIdentity"), SC("leaseDurationSeconds"),
                                           SC("leaseTransitions"), SC("preferredHolder"), SC("renewTime"),
                                           SC("strategy"), END};
static const struct sfield lease[] = {TOP(OB("spec", lease_spec)), END};

/* Both PodGroup shapes: scheduler-plugins' and Volcano's. */
static const struct sfield podgroup_spec[] = {SC("minMember"), MA("minResources"), MA("minTaskMember"),
                                              AN("networkTopology"), SC("priority"), SC("priorityClassName"),
                                              SC("queue"), SC("scheduleTimeoutSeconds"), END};
static const struct sfield podgroup[] = {TOP(OB("spec", podgroup_spec)), END};
/* Native scheduling.k8s.io/v1beta1 PodGroup; its Workload is checked as a whole spec. */
static const struct sfield native_podgroup_spec[] = {
    SC("disruptionMode"), SC("parentCompositePodGroupName"), SC("preemptionPolicy"), SC("priority"),
    SC("priorityClassName"), AN("resourceClaims"), AN("schedulingConstraints"), AN("schedulingPolicy"),
    AN("workloadRef"), END};
static const struct sfield native_podgroup[] = {TOP(OB("spec", native_podgroup_spec)), END};
/* node.k8s.io/v1 RuntimeClass: top-level fields, no spec or status. */
static const struct sfield runtime_class_overhead[] = {MA("podFixed"), END};
static const struct sfield runtime_class_scheduling[] = {MA("nodeSelector"), LI("tolerations", toleration), END};
static const struct sfield runtime_class[] = {SC("apiVersion"), SC("handler"), SC("kind"), OB("metadata", object_meta),
                                              OB("overhead", runtime_class_overhead),
                                              OB("scheduling", runtime_class_scheduling), END};

static const struct sfield workload_priority_class[] = {SC("apiVersion"), SC("description"), SC("kind"),
                                                        OB("metadata", object_meta), SC("value"), END};

/* Volcano's Queue and ours (limit for capability, guarantee as a plain list). */
static const struct sfield queue_spec[] = {AN("affinity"), MA("capability"), SC("dequeueStrategy"), MA("deserved"),
                                           AN("extendClusters"), AN("guarantee"), MA("limit"), SC("parent"),
                                           SC("priority"), SC("reclaimable"), SC("type"), SC("weight"), END};
static const struct sfield queue[] = {TOP(OB("spec", queue_spec)), END};

static const struct sfield localqueue_spec[] = {SC("clusterQueue"), AN("fairSharing"), SC("stopPolicy"), END};
static const struct sfield localqueue[] = {TOP(OB("spec", localqueue_spec)), END};
static const struct sfield flavor_spec[] = {MA("nodeLabels"), LI("nodeTaints", taint), LI("tolerations", toleration),
                                            SC("topologyName"), END};
static const struct sfield flavor[] = {TOP(OB("spec", flavor_spec)), END};

/* Kinds whose spec we do not carry field by field. */
static const struct sfield generic[] = {TOP(AN("spec")), END};
static const struct sfield nrt[] = {SC("apiVersion"), AN("attributes"), SC("kind"), OB("metadata", object_meta),
                                    AN("topologyPolicies"), AN("zones"), END};

static const struct sfield pdb_spec[] = {SC("maxUnavailable"), SC("minAvailable"), OB("selector", label_selector),
                                         EN("unhealthyPodEvictionPolicy", e_unhealthy), END};
static const struct sfield pdb[] = {TOP(OB("spec", pdb_spec)), END};

static const struct sfield preconditions[] = {SC("resourceVersion"), SC("uid"), END};
#define DELETE_OPTIONS_FIELDS                                                                                      \
    SC("apiVersion"), AN("dryRun"), SC("gracePeriodSeconds"), SC("ignoreStoreReadErrorWithClusterBreakingPotential"), \
        SC("kind"), SC("orphanDependents"), OB("preconditions", preconditions),                                    \
        EN("propagationPolicy", e_delete_prop)
static const struct sfield delete_options[] = {DELETE_OPTIONS_FIELDS, END};
static const struct sfield eviction[] = {SC("apiVersion"), OB("deleteOptions", delete_options), SC("kind"),
                                         OB("metadata", object_meta), END};

/*--- resource.k8s.io (every served version: v1 and v1beta2 fields plus v1beta1's basic and flat requests) ---*/

static const struct sfield dra_cel[] = {SC("expression"), END};
static const struct sfield dra_selector[] = {OB("cel", dra_cel), END};
static const struct sfield dra_taint[] = {SC("effect"), SC("key"), SC("timeAdded"), SC("value"), END};
static const struct sfield dra_toleration[] = {SC("effect"), SC("key"), SC("operator"), SC("tolerationSeconds"),
                                               SC("value"), END};
static const struct sfield dra_counter_use[] = {SC("counterSet"), MA("counters"), END};
#define DRA_DEVICE_DATA                                                                                            \
    SC("allNodes"), SC("allowMultipleAllocations"), MA("attributes"), AN("bindingConditions"),                    \
        AN("bindingFailureConditions"), SC("bindsToNode"), MA("capacity"), LI("consumesCounters", dra_counter_use), \
        SC("nodeName"), OB("nodeSelector", node_selector), LI("taints", dra_taint)
static const struct sfield dra_basic[] = {DRA_DEVICE_DATA, END};
static const struct sfield dra_device[] = {OB("basic", dra_basic), SC("name"), DRA_DEVICE_DATA, END};
static const struct sfield dra_pool[] = {SC("generation"), SC("name"), SC("resourceSliceCount"), END};
static const struct sfield dra_counter_set[] = {MA("counters"), SC("name"), END};
static const struct sfield dra_slice_spec[] = {
    SC("allNodes"), LI("devices", dra_device), SC("driver"), SC("nodeName"), OB("nodeSelector", node_selector),
    SC("partitionTypeAttribute"), SC("perDeviceNodeSelection"), OB("pool", dra_pool),
    LI("sharedCounters", dra_counter_set), SC("skipNodeOperations"), END};
static const struct sfield dra_slice[] = {TOP(OB("spec", dra_slice_spec)), END};

static const struct sfield dra_opaque[] = {SC("driver"), AN("parameters"), END};
static const struct sfield dra_class_config[] = {OB("opaque", dra_opaque), END};
static const struct sfield dra_class_spec[] = {LI("config", dra_class_config), SC("extendedResourceName"),
                                               LI("selectors", dra_selector), END};
static const struct sfield dra_class[] = {TOP(OB("spec", dra_class_spec)), END};

static const struct sfield dra_capacity_req[] = {MA("requests"), END};
#define DRA_EXACT_FIELDS                                                                                           \
    SC("allocationMode"), OB("capacity", dra_capacity_req), SC("count"), SC("deviceClassName"),                   \
        LI("selectors", dra_selector), LI("tolerations", dra_toleration)
static const struct sfield dra_subrequest[] = {DRA_EXACT_FIELDS, SC("name"), END};
static const struct sfield dra_exact[] = {SC("adminAccess"), DRA_EXACT_FIELDS, END};
static const struct sfield dra_request[] = {SC("adminAccess"), DRA_EXACT_FIELDS, OB("exactly", dra_exact),
                                            LI("firstAvailable", dra_subrequest), SC("name"), END};
static const struct sfield dra_constraint[] = {SC("distinctAttribute"), SC("matchAttribute"), AN("requests"), END};
static const struct sfield dra_claim_config[] = {OB("opaque", dra_opaque), AN("requests"), END};
static const struct sfield dra_devices[] = {LI("config", dra_claim_config), LI("constraints", dra_constraint),
                                            LI("requests", dra_request), END};
static const struct sfield dra_claim_spec[] = {OB("devices", dra_devices), END};
static const struct sfield dra_claim[] = {TOP(OB("spec", dra_claim_spec)), END};
static const struct sfield dra_template_spec[] = {OB("metadata", object_meta), OB("spec", dra_claim_spec), END};
static const struct sfield dra_template[] = {TOP(OB("spec", dra_template_spec)), END};

static const struct sfield dra_device_selector[] = {SC("device"), SC("deviceClassName"), SC("driver"), SC("pool"),
                                                    AN("selectors"), END};
static const struct sfield dra_taint_rule_spec[] = {OB("deviceSelector", dra_device_selector),
                                                    OB("taint", dra_taint), END};
static const struct sfield dra_taint_rule[] = {TOP(OB("spec", dra_taint_rule_spec)), END};

/*--- Kinds ---*/

static const struct {
    const char *group; /* "" core; matched against apiVersion's group */
    const char *kind;
    const struct sfield *root;
} kinds[] = {
    {"", "Pod", pod},
    {"", "Node", node},
    {"", "Namespace", namespace_},
    {"", "Event", event},
    {"coordination.k8s.io", "Lease", lease},
    {"scheduling.x-k8s.io", "PodGroup", podgroup},
    {"scheduling.volcano.sh", "PodGroup", podgroup},
    {"scheduling.gpusched.io", "PodGroup", podgroup},
    {"scheduling.k8s.io", "PodGroup", native_podgroup},
    {"scheduling.k8s.io", "Workload", generic},
    {"kueue.x-k8s.io", "WorkloadPriorityClass", workload_priority_class},
    {"node.k8s.io", "RuntimeClass", runtime_class},
    {"scheduling.volcano.sh", "Queue", queue},
    {"scheduling.gpusched.io", "Queue", queue},
    {"kueue.x-k8s.io", "LocalQueue", localqueue},
    {"kueue.x-k8s.io", "ResourceFlavor", flavor},
    {"kueue.x-k8s.io", "ClusterQueue", generic},
    {"resource.k8s.io", "ResourceClaim", dra_claim},
    {"resource.k8s.io", "ResourceClaimTemplate", dra_template},
    {"resource.k8s.io", "DeviceClass", dra_class},
    {"resource.k8s.io", "ResourceSlice", dra_slice},
    {"resource.k8s.io", "DeviceTaintRule", dra_taint_rule},
    {"nvidia.com", "GPUCluster", generic},
    {"topology.node.k8s.io", "NodeResourceTopology", nrt},
    {"nvidia.com", "ClusterPolicy", generic},
    {"policy", "PodDisruptionBudget", pdb},
    {"policy", "Eviction", eviction},
    {"", "DeleteOptions", delete_options},
    {"meta.k8s.io", "DeleteOptions", delete_options},
};

static const struct sfield *root_of(const char *api_version, const char *kind)
{
    if (!kind) return NULL;
    const char *slash = api_version ? strchr(api_version, '/') : NULL;
    size_t glen = slash ? (size_t)(slash - api_version) : 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(kinds[i].kind, kind)) continue;
        if (!api_version || (strlen(kinds[i].group) == glen && !strncmp(kinds[i].group, api_version, glen)))
            return kinds[i].root;
    }
    return NULL;
}

bool gs_schema_known(const char *api_version, const char *kind)
{
    return root_of(api_version, kind) != NULL;
}

/*--- Walker ---*/

/* The path is kept as a stack of keys and indexes and only printed when a
 * problem is reported: most walks report nothing, and formatting a path
 * for every member visited cost as much as decoding the object. */
#define MAX_DEPTH 64

struct frame {
    const char *key; /* NULL: an array index */
    size_t idx;
};

struct walk {
    struct frame f[MAX_DEPTH];
    size_t depth;
    unsigned flags;
    struct gs_diags *unknown, *invalid;
    int err;
};

static void path_of(const struct walk *w, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < w->depth && n < len; i++) {
        int k = w->f[i].key ? snprintf(buf + n, len - n, "%s%s", n ? "." : "", w->f[i].key)
                            : snprintf(buf + n, len - n, "[%zu]", w->f[i].idx);
        if (k < 0) break;
        n += (size_t)k;
    }
}

static bool push(struct walk *w, const char *key, size_t idx)
{
    if (w->depth == MAX_DEPTH) return false; /* deeper than any schema goes */
    w->f[w->depth++] = (struct frame){key, idx};
    return true;
}

static void pop(struct walk *w)
{
    w->depth--;
}

static void report(struct walk *w, struct gs_diags *d, const char *msg)
{
    char path[512];
    path_of(w, path, sizeof path);
    if (gs_diags_add(d, path, "%s", msg)) w->err = GS_ENOMEM;
}

static const struct sfield *find(const struct sfield *fields, const char *name)
{
    for (const struct sfield *f = fields; f->name; f++)
        if (!strcmp(f->name, name)) return f;
    return NULL;
}

static void check_enum(struct walk *w, const struct sfield *f, const json_t *v)
{
    const char *s = json_string_value(v);
    if (!s || !w->invalid || (f->shape == S_ENUM0 && !*s)) return;
    for (const char *const *e = f->enums; *e; e++)
        if (!strcmp(*e, s)) return;
    char list[256] = "";
    size_t n = 0;
    for (const char *const *e = f->enums; *e && n < sizeof list; e++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s\"%s\"", e == f->enums ? "" : ", ", *e);
    char msg[512];
    snprintf(msg, sizeof msg, "Unsupported value: \"%.200s\": supported values: %s", s, list);
    report(w, w->invalid, msg);
}

static void walk_object(struct walk *w, const struct sfield *fields, const json_t *obj);

static void walk_value(struct walk *w, const struct sfield *f, const json_t *v)
{
    switch (f->shape) {
    case S_ENUM:
    case S_ENUM0: check_enum(w, f, v); break;
    case S_OBJ:
        if (json_is_object(v)) walk_object(w, f->sub, v);
        break;
    case S_LIST:
        if (json_is_array(v)) {
            size_t i;
            json_t *e;
            json_array_foreach(v, i, e) {
                if (!json_is_object(e) || !push(w, NULL, i)) continue;
                walk_object(w, f->sub, e);
                pop(w);
            }
        }
        break;
    default: break;
    }
}

static void walk_object(struct walk *w, const struct sfield *fields, const json_t *obj)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        if (w->err) return;
        if ((w->flags & GS_SCHEMA_PATCH) && (k[0] == '$' || json_is_null(v))) continue;
        const struct sfield *f = find(fields, k);
        if (!push(w, k, 0)) return;
        if (!f && w->unknown) report(w, w->unknown, "unknown field");
        else if (f) walk_value(w, f, v);
        pop(w);
    }
}

int gs_schema_check(const char *api_version, const char *kind, const json_t *doc, unsigned flags,
                    struct gs_diags *unknown, struct gs_diags *invalid)
{
    const struct sfield *root = root_of(api_version, kind);
    if (!root || !json_is_object(doc)) return 0;
    struct walk w = {.flags = flags, .unknown = unknown, .invalid = invalid};
    walk_object(&w, root, doc);
    return w.err;
}
