/*
 * trace_manifest.c - a simulator trace from Kubernetes manifests, so any
 * scenario can be written by hand, or taken from a live cluster by
 * `gpusched snapshot`: a cluster file and a workload file (YAML or JSON,
 * several documents per file).
 *
 * Every document is decoded and validated by the server's own decoders
 * (gs_object_decode, the schema's enum checks), so a scenario exercises
 * exactly the fields a real object would and is refused where the API server
 * would refuse it. Nodes go in the cluster file and Pods in the workload file;
 * every other kind the server accepts may be in either: Kueue ClusterQueue /
 * LocalQueue / ResourceFlavor / WorkloadPriorityClass, Volcano and gpusched
 * Queues, PriorityClass, the three PodGroup shapes and the native Workload,
 * NodeResourceTopology, ClusterPolicy / GPUCluster, PodDisruptionBudget,
 * Namespace... They are kept as objects in the trace for the replay to hand
 * to admission, the cache and the scheduler as the server's loops do; the
 * DRA kinds are kept as documents (sim_dra.h).
 *
 * Timing comes from annotations (trace_manifest.h): arrival and duration in
 * seconds or as Go durations; a pod bound by spec.nodeName is running at the
 * start on the devices its gpusched.io/devices annotation names, for
 * sim.gpusched.io/running-for already. A ClusterPolicy makes each GPU node
 * walk its GPU stack first: the govern layer's state machine
 * (govern/statemachine.h) is driven on simulated time, each enabled step
 * taking its sim.gpusched.io/step-durations time, and the instant the node
 * reaches ready becomes trace->node_ready_at. A node whose GPUStackReady
 * condition is already True (a snapshot) is ready from the start.
 *
 * Nodes become struct gs_node_spec, the trace's node form: allocatable CPU,
 * memory and pods, the GPU count (status.devices[] or the allocatable
 * nvidia.com/gpu count), the GPU model (first device's model or the
 * nvidia.com/gpu.product label, which is then also set as a label so model
 * constraints match), per-GPU memory, and each GPU's NUMA node and NVLink
 * peers (status.devices[]). Problems are reported as "FILE:LINE: field:
 * message", LINE being where the document starts.
 */
#include "sim/trace_manifest.h"

#include "core/codec.h"
#include "core/object.h"
#include "core/schema.h"
#include "govern/operator.h" /* GS_COND_GPU_STACK */
#include "govern/policy.h"
#include "govern/statemachine.h"
#include "kube/goduration.h"
#include "loops/sched_loop.h" /* gs_devices_parse: the server's reading of gpusched.io/devices */
#include "sim/sim.h"
#include "sim/sim_dra.h" /* DRA documents */

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NO_MODEL_NAME "GPU"

/* What both files' loaders share: the decoded nodes (bound pods are checked
 * against their devices) and the share of each GPU bound pods already hold. */
struct scenario {
    struct gs_node *nodes;  /* decoded, parallel to trace->nodes */
    int32_t **used_milli;   /* per node, per GPU */
    size_t cap;
};

struct loader {
    const char *file;
    int line;           /* first line of the current document */
    struct gs_diags *d;
    int problems;
    struct scenario *sc;
};

static void problem(struct loader *l, const char *field, const char *msg)
{
    char path[1024], line[24] = "";
    if (l->line > 0) snprintf(line, sizeof line, ":%d", l->line);
    snprintf(path, sizeof path, "%s%s%s%s", l->file, line, field && *field ? ": " : "", field ? field : "");
    gs_diags_add(l->d, path, "%s", msg);
    l->problems++;
}

/* The decoder reports paths relative to the document: prefix them. */
static void forward_diags(struct loader *l, const struct gs_diags *inner)
{
    for (size_t i = 0; i < inner->n; i++) problem(l, inner->v[i].path, inner->v[i].msg);
}

static int read_docs(struct loader *l, struct gs_docs *docs)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = gs_read_file(l->file, &buf, &len);
    if (rc) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot read: %s", gs_strerror(rc));
        l->line = 0;
        problem(l, NULL, msg);
        return rc;
    }
    struct gs_diags inner = {0};
    size_t err_doc = 0;
    rc = gs_decode_stream(buf, len, docs, &inner, &err_doc);
    free(buf);
    if (rc) {
        l->line = 0;
        forward_diags(l, &inner);
    }
    gs_diags_free(&inner);
    return rc;
}

static const char *doc_kind(const json_t *doc) { return json_string_value(json_object_get(doc, "kind")); }

/* Nodes only in the cluster file and Pods only in the workload file, so a
 * swapped pair of arguments is caught at once. */
static bool misplaced(struct loader *l, const json_t *doc, bool cluster)
{
    const char *kind = doc_kind(doc);
    if (!kind || strcmp(kind, cluster ? "Pod" : "Node")) return false;
    problem(l, "kind",
            cluster ? "kind \"Pod\": the cluster file holds only Node documents and the cluster's other objects "
                      "(queues, NodeResourceTopology, ClusterPolicy, DRA kinds...); pods go in the workload file"
                    : "kind \"Node\": the workload file holds Pods and the other objects of the scenario; "
                      "nodes go in the cluster file");
    return true;
}

/* The API server's enum checks (control/api_options.c runs the same). */
static int check_enums(struct loader *l, const json_t *doc)
{
    struct gs_diags inner = {0};
    int rc = gs_schema_check(json_string_value(json_object_get(doc, "apiVersion")), doc_kind(doc), doc, 0, NULL,
                             &inner);
    forward_diags(l, &inner);
    gs_diags_free(&inner);
    return rc;
}

/*--- Durations ---*/

int gs_sim_duration_parse(const char *s, double *seconds, const char **why)
{
    const char *dummy;
    if (!why) why = &dummy;
    *why = NULL;
    if (!s || !*s) {
        *why = "empty";
        return GS_EINVAL;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* strtod also reads "inf", "nan" and hex: only plain decimal numbers are seconds. */
    bool plain = strspn(s, "+-0123456789.eE") == strlen(s);
    if (plain && end != s && !*end) {
        if (errno || !isfinite(v)) *why = "out of range";
        else if (v < 0) *why = "must be >= 0";
        if (*why) return GS_EINVAL;
        *seconds = v;
        return 0;
    }
    int64_t ns = 0;
    int rc = gs_go_duration_parse(s, &ns, why);
    if (rc) {
        if (!*why) *why = "not a duration";
        return GS_EINVAL;
    }
    if (ns < 0) {
        *why = "must be >= 0";
        return GS_EINVAL;
    }
    *seconds = (double)ns / 1e9;
    return 0;
}

/* A duration annotation of p: false when absent or bad (reported). */
static bool ann_seconds(struct loader *l, const struct gs_pod *p, const char *key, double *out)
{
    const char *v = gs_labels_get(&p->meta.annotations, key);
    if (!v) return false;
    const char *why = NULL;
    if (gs_sim_duration_parse(v, out, &why)) {
        char field[128], msg[320];
        snprintf(field, sizeof field, "metadata.annotations[\"%s\"]", key);
        snprintf(msg, sizeof msg,
                 "\"%.80s\" is not a duration >= 0 (seconds such as 90, or a Go duration such as 1m30s, 2h, 500ms): %s",
                 v, why);
        problem(l, field, msg);
        return false;
    }
    return true;
}

/*--- Nodes ---*/

static char *node_model(const struct gs_node *n)
{
    for (size_t i = 0; i < n->ngpus; i++)
        if (n->gpus[i].model && *n->gpus[i].model) return strdup(n->gpus[i].model);
    const char *label = gs_labels_get(&n->meta.labels, GS_LABEL_GPU_PRODUCT);
    return strdup(label && *label ? label : NO_MODEL_NAME);
}

/* Per-GPU NUMA nodes and NVLink peers, when the devices report any. */
static int node_topology(const struct gs_node *n, struct gs_node_spec *spec)
{
    bool any = false;
    for (size_t i = 0; i < n->ngpus; i++) any = any || n->gpus[i].numa_node >= 0 || n->gpus[i].nvlink_peers;
    if (!any || (int32_t)n->ngpus != spec->ngpus) return 0;
    int32_t *numa = calloc(n->ngpus, sizeof *numa);
    uint64_t *links = calloc(n->ngpus, sizeof *links);
    if (!numa || !links) {
        free(numa), free(links);
        return GS_ENOMEM;
    }
    for (size_t i = 0; i < n->ngpus; i++) numa[i] = n->gpus[i].numa_node, links[i] = n->gpus[i].nvlink_peers;
    spec->gpu_numa = numa;
    spec->gpu_nvlink = links;
    return 0;
}

static int node_to_spec(const struct gs_node *n, struct gs_node_spec *spec, struct gs_labels *labels)
{
    spec->cpu_milli = gs_resources_get(&n->allocatable, GS_RES_CPU);
    spec->mem_bytes = gs_resources_get(&n->allocatable, GS_RES_MEMORY) / 1000;
    spec->pods = (int32_t)(gs_resources_get(&n->allocatable, GS_RES_PODS) / 1000);
    spec->ngpus = n->ngpus ? (int32_t)n->ngpus : (int32_t)(gs_resources_get(&n->allocatable, GS_RES_GPU) / 1000);
    spec->gpu_mem_mib = n->ngpus ? n->gpus[0].memory_mib : 0;
    spec->name = strdup(n->meta.name);
    spec->gpu_model = spec->ngpus > 0 ? node_model(n) : NULL;
    if (!spec->name || (spec->ngpus > 0 && !spec->gpu_model)) return GS_ENOMEM;
    for (size_t i = 0; i < n->meta.labels.n; i++)
        if (gs_labels_set(labels, n->meta.labels.v[i].key, n->meta.labels.v[i].value)) return GS_ENOMEM;
    if (spec->gpu_model && gs_labels_set(labels, GS_LABEL_GPU_PRODUCT, spec->gpu_model)) return GS_ENOMEM;
    spec->labels = labels;
    return node_topology(n, spec);
}

static int node_index(const struct gs_trace *t, const char *name)
{
    for (size_t i = 0; i < t->nnodes; i++)
        if (!strcmp(t->nodes[i].name, name)) return (int)i;
    return -1;
}

static int add_node(struct loader *l, json_t *doc, struct gs_trace *t)
{
    struct gs_node n;
    struct gs_diags inner = {0};
    int rc = gs_node_decode(doc, &n, &inner);
    if (rc) {
        forward_diags(l, &inner);
        gs_diags_free(&inner);
        return rc == GS_ENOMEM ? rc : 0; /* reported; keep reading to find every problem */
    }
    gs_diags_free(&inner);
    if ((rc = check_enums(l, doc)) != 0) {
        gs_node_clear(&n);
        return rc;
    }
    if (node_index(t, n.meta.name) >= 0) {
        problem(l, "metadata.name", "duplicate node name");
        gs_node_clear(&n);
        return 0;
    }
    size_t i = t->nnodes;
    memset(&t->nodes[i], 0, sizeof t->nodes[i]);
    memset(&t->node_labels[i], 0, sizeof t->node_labels[i]);
    t->nnodes++; /* counted before filling so gs_trace_free releases a partial entry */
    rc = node_to_spec(&n, &t->nodes[i], &t->node_labels[i]);
    l->sc->nodes[i] = n; /* kept until the load ends: bound pods name its devices */
    int32_t ngpus = t->nodes[i].ngpus > 0 ? t->nodes[i].ngpus : 1;
    if (!rc && !(l->sc->used_milli[i] = calloc((size_t)ngpus, sizeof(int32_t)))) rc = GS_ENOMEM;
    return rc;
}

/* Any other kind the server accepts, decoded by its decoder and kept as an object. */
static int add_object(struct loader *l, json_t *doc, struct gs_trace *t)
{
    struct gs_object *o = NULL;
    struct gs_diags inner = {0};
    int rc = gs_object_decode(doc, &o, &inner);
    forward_diags(l, &inner);
    gs_diags_free(&inner);
    if (rc) return rc == GS_ENOMEM ? rc : 0;
    int before = l->problems;
    if ((rc = check_enums(l, doc)) != 0 || l->problems != before) {
        gs_object_free(o);
        return rc;
    }
    struct gs_object **nv = realloc(t->objects, (t->nobjects + 1) * sizeof *nv);
    if (!nv) {
        gs_object_free(o);
        return GS_ENOMEM;
    }
    t->objects = nv;
    t->objects[t->nobjects++] = o;
    return 0;
}

/* A DRA document, checked by its decoder and kept as JSON (sim_dra.h). */
static int add_dra(struct loader *l, json_t *doc, struct gs_trace *t)
{
    struct gs_diags inner = {0};
    int rc = gs_sim_dra_check(doc, &inner);
    forward_diags(l, &inner);
    gs_diags_free(&inner);
    if (rc) return rc == GS_ENOMEM ? rc : 0;
    json_t **nv = realloc(t->dra, (t->ndra + 1) * sizeof *nv);
    if (!nv) return GS_ENOMEM;
    t->dra = nv;
    t->dra[t->ndra++] = json_incref(doc);
    return 0;
}

static int other_kind(struct loader *l, json_t *doc, struct gs_trace *t)
{
    if (gs_sim_dra_kind(doc_kind(doc))) return add_dra(l, doc, t);
    return add_object(l, doc, t);
}

static int load_nodes(struct loader *l, struct gs_trace *t)
{
    struct gs_docs docs = {0};
    int rc = read_docs(l, &docs);
    if (rc) return rc;
    size_t cap = docs.n ? docs.n : 1;
    t->nodes = calloc(cap, sizeof *t->nodes);
    t->node_labels = calloc(cap, sizeof *t->node_labels);
    l->sc->nodes = calloc(cap, sizeof *l->sc->nodes);
    l->sc->used_milli = calloc(cap, sizeof *l->sc->used_milli);
    l->sc->cap = cap;
    if (!t->nodes || !t->node_labels || !l->sc->nodes || !l->sc->used_milli) rc = GS_ENOMEM;
    for (size_t i = 0; i < docs.n && !rc; i++) {
        l->line = docs.lines[i];
        json_t *doc = docs.docs[i];
        const char *kind = doc_kind(doc);
        if (misplaced(l, doc, true)) continue;
        if (kind && !strcmp(kind, "Node")) rc = add_node(l, doc, t);
        else rc = other_kind(l, doc, t);
    }
    gs_docs_free(&docs);
    return rc;
}

/*--- Pods ---*/

static bool pod_key_taken(const struct gs_trace *t, const struct gs_pod *p)
{
    for (size_t i = 0; i < t->npods; i++) {
        const struct gs_meta *m = &t->pods[i].pod->meta;
        if (!strcmp(m->name, p->meta.name) && !strcmp(m->namespace_, p->meta.namespace_)) return true;
    }
    return false;
}

/* The lowest-numbered GPUs of node i with room for the pod's share. */
static uint64_t free_gpus(const struct scenario *sc, const struct gs_trace *t, int i, const struct gs_pod *p)
{
    uint64_t mask = 0;
    int want = p->demand.gpu_count;
    for (int32_t g = 0; g < t->nodes[i].ngpus && g < 64 && want > 0; g++)
        if (sc->used_milli[i][g] + p->demand.gpu_milli <= 1000) mask |= 1ull << g, want--;
    return want > 0 ? 0 : mask;
}

/* A pod bound by spec.nodeName: running at the start, on its devices. */
static void bind_pod(struct loader *l, struct gs_trace *t, struct gs_trace_pod *tp)
{
    const struct gs_pod *p = tp->pod;
    char msg[400];
    int i = node_index(t, p->node_name);
    if (i < 0) {
        snprintf(msg, sizeof msg, "node \"%.100s\" is not in the cluster file", p->node_name);
        problem(l, "spec.nodeName", msg);
        return;
    }
    const char *field = "metadata.annotations[\"" GS_ANN_DEVICES "\"]";
    double running = 0;
    if (ann_seconds(l, p, GS_ANN_SIM_RUNNING_FOR, &running)) tp->started = -running;
    if (gs_labels_get(&p->meta.annotations, GS_ANN_SIM_ARRIVAL) && tp->arrival != 0)
        problem(l, "metadata.annotations[\"" GS_ANN_SIM_ARRIVAL "\"]",
                "a pod bound by spec.nodeName is running at the start: it has no arrival (use " GS_ANN_SIM_RUNNING_FOR
                " for how long it has run)");
    if (tp->duration >= 0 && tp->duration < running) {
        snprintf(msg, sizeof msg, "%g s is less than the %g s the pod has already run (" GS_ANN_SIM_RUNNING_FOR ")",
                 tp->duration, running);
        problem(l, "metadata.annotations[\"" GS_ANN_SIM_DURATION "\"]", msg);
    }
    tp->milli = p->demand.gpu_count ? p->demand.gpu_milli : 0;
    const char *dev = gs_labels_get(&p->meta.annotations, GS_ANN_DEVICES);
    if (p->demand.gpu_count == 0) {
        if (dev && *dev) problem(l, field, "the pod requests no GPU but names devices");
    } else if (dev) {
        int32_t milli = 1000;
        if (gs_devices_parse(&l->sc->nodes[i], t->nodes[i].ngpus, dev, &tp->gpus, &milli)) {
            snprintf(msg, sizeof msg, "\"%.200s\" names a GPU node \"%.100s\" does not have", dev, p->node_name);
            problem(l, field, msg);
            return;
        }
        if (__builtin_popcountll(tp->gpus) != p->demand.gpu_count) {
            snprintf(msg, sizeof msg, "\"%.200s\" names %d GPUs, the pod requests %d", dev,
                     __builtin_popcountll(tp->gpus), p->demand.gpu_count);
            problem(l, field, msg);
            return;
        }
        if (strchr(dev, ':')) tp->milli = milli;
    } else if (!(tp->gpus = free_gpus(l->sc, t, i, p))) {
        snprintf(msg, sizeof msg, "not given, and node \"%.100s\" has no %d GPUs left with %d milli free",
                 p->node_name, p->demand.gpu_count, p->demand.gpu_milli);
        problem(l, field, msg);
        return;
    }
    for (int g = 0; g < 64; g++) {
        if (!(tp->gpus >> g & 1)) continue;
        if (l->sc->used_milli[i][g] + tp->milli > 1000) {
            snprintf(msg, sizeof msg, "GPU %d of node \"%.100s\" is already held by earlier bound pods", g,
                     p->node_name);
            problem(l, field, msg);
            return;
        }
        l->sc->used_milli[i][g] += tp->milli;
    }
    tp->node = strdup(p->node_name);
}

static int add_pod(struct loader *l, json_t *doc, struct gs_trace *t)
{
    struct gs_pod *p = calloc(1, sizeof *p);
    if (!p) return GS_ENOMEM;
    struct gs_diags inner = {0};
    int rc = gs_pod_decode(doc, p, &inner);
    if (rc) {
        forward_diags(l, &inner);
        gs_diags_free(&inner);
        free(p);
        return rc == GS_ENOMEM ? rc : 0;
    }
    gs_diags_free(&inner);
    /* A pod's generated claims name it as their owner by uid: a scenario need not invent one. */
    if (!p->meta.uid && (rc = gs_sim_dra_pod_uid(p)) != 0) {
        gs_pod_clear(p);
        free(p);
        return rc;
    }
    int before = l->problems;
    struct gs_trace_pod tp = {.pod = p, .arrival = 0, .duration = -1};
    if (!rc) rc = check_enums(l, doc);
    ann_seconds(l, p, GS_ANN_SIM_ARRIVAL, &tp.arrival);
    ann_seconds(l, p, GS_ANN_SIM_DURATION, &tp.duration);
    if (pod_key_taken(t, p)) problem(l, "metadata.name", "duplicate pod (same namespace and name)");
    if (p->node_name && l->problems == before) bind_pod(l, t, &tp);
    if (!rc && tp.node == NULL && p->node_name && l->problems == before) rc = GS_ENOMEM;
    if (rc || l->problems != before) {
        free(tp.node);
        gs_pod_clear(p);
        free(p);
        return rc;
    }
    t->pods[t->npods++] = tp;
    return 0;
}

static int load_pods(struct loader *l, struct gs_trace *t)
{
    struct gs_docs docs = {0};
    int rc = read_docs(l, &docs);
    if (rc) return rc;
    t->pods = calloc(docs.n ? docs.n : 1, sizeof *t->pods);
    if (!t->pods) rc = GS_ENOMEM;
    for (size_t i = 0; i < docs.n && !rc; i++) {
        l->line = docs.lines[i];
        json_t *doc = docs.docs[i];
        const char *kind = doc_kind(doc);
        if (misplaced(l, doc, false)) continue;
        if (kind && !strcmp(kind, "Pod")) rc = add_pod(l, doc, t);
        else rc = other_kind(l, doc, t);
    }
    gs_docs_free(&docs);
    return rc;
}

/*--- The GPU stack walk (ClusterPolicy) ---*/

/* The operator's gates (govern/operator.c): which component runs each step. */
static const struct {
    enum gs_step step;
    enum gs_comp comp;
} stack_gates[] = {{GS_STEP_DRIVER, GS_COMP_DRIVER},
                   {GS_STEP_TOOLKIT, GS_COMP_TOOLKIT},
                   {GS_STEP_DEVICE_PLUGIN, GS_COMP_DEVICE_PLUGIN},
                   {GS_STEP_DRA_PLUGIN, GS_COMP_DRA_DRIVER},
                   {GS_STEP_MIG, GS_COMP_MIG_MANAGER},
                   {GS_STEP_MONITORING, GS_COMP_DCGM_EXPORTER}};

/* "driver=3m,toolkit=20s": seconds per step into secs (GS_STEP_COUNT entries). */
static void step_durations(struct loader *l, const json_t *doc, double *secs)
{
    for (int s = 0; s < GS_STEP_COUNT; s++) secs[s] = GS_SIM_STEP_DEFAULT;
    const json_t *ann = json_object_get(json_object_get(doc, "metadata"), "annotations");
    const char *v = json_string_value(json_object_get(ann, GS_ANN_SIM_STEP_DURATIONS));
    if (!v) return;
    const char *field = "metadata.annotations[\"" GS_ANN_SIM_STEP_DURATIONS "\"]";
    char buf[1024], msg[400];
    if (snprintf(buf, sizeof buf, "%s", v) >= (int)sizeof buf) {
        problem(l, field, "longer than 1023 characters");
        return;
    }
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (eq) *eq = 0;
        int s = gs_step_parse(item);
        const char *why = NULL;
        double d = 0;
        if (!eq || s <= GS_STEP_NOT_READY || s >= GS_STEP_READY) {
            snprintf(msg, sizeof msg,
                     "\"%.100s\": each item is STEP=DURATION, STEP one of driver, toolkit, device-plugin, "
                     "dra-plugin, mig, monitoring",
                     item);
            problem(l, field, msg);
        } else if (gs_sim_duration_parse(eq + 1, &d, &why)) {
            snprintf(msg, sizeof msg, "%s=\"%.80s\": %s (seconds, or a Go duration such as 3m)", item, eq + 1, why);
            problem(l, field, msg);
        } else secs[s] = d;
    }
}

/* The node reaches ready at the returned second: the operator's machine, its
 * agent up at 0, every request answered ok after the step's time. */
static double stack_walk(const struct gs_policy *pol, const json_t *labels, const double *secs)
{
    struct gs_stack_cfg cfg = {.backoff_initial_ns = pol->backoff_initial_ms * GS_NS_PER_MS,
                               .backoff_max_ns = pol->backoff_max_ms * GS_NS_PER_MS,
                               .answer_timeout_ns = pol->answer_timeout_ms * GS_NS_PER_MS};
    for (size_t i = 0; i < sizeof stack_gates / sizeof stack_gates[0]; i++)
        if (gs_policy_node_enabled(pol, labels, stack_gates[i].comp)) cfg.enabled |= GS_STEP_BIT(stack_gates[i].step);
    struct gs_stack_sm m;
    struct gs_stack_change ch;
    int64_t now = 0;
    gs_stack_sm_init(&m, &cfg, 1, now);
    gs_stack_sm_node(&m, true, now, &ch);
    for (int guard = 0; m.step != GS_STEP_READY && guard < 4 * GS_STEP_COUNT; guard++) {
        if (!gs_stack_sm_request(&m, now)) break;
        now += (int64_t)llround(secs[m.step] * 1e9);
        gs_stack_sm_answer(&m, m.step, m.attempt, true, "ok", now, &ch);
    }
    return (double)now / 1e9;
}

static bool stack_ready(const json_t *node_doc)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(node_doc, "status"), "conditions"), i, c)
    {
        const char *type = json_string_value(json_object_get(c, "type"));
        const char *st = json_string_value(json_object_get(c, "status"));
        if (type && !strcmp(type, GS_COND_GPU_STACK)) return st && !strcmp(st, "True");
    }
    return false;
}

/* trace->node_ready_at from the scenario's ClusterPolicy or GPUCluster, if any. */
static int stack_ready_at(struct loader *l, struct scenario *sc, struct gs_trace *t)
{
    struct gs_object *po = NULL;
    for (size_t i = 0; i < t->nobjects; i++) {
        enum gs_kind k = t->objects[i]->kind;
        if (k != GS_KIND_CLUSTERPOLICY && k != GS_KIND_GPUCLUSTER) continue;
        if (po) {
            l->line = 0;
            problem(l, "kind", "more than one ClusterPolicy / GPUCluster: the operator drives the nodes by one");
            return 0;
        }
        po = t->objects[i];
    }
    if (!po || t->nnodes == 0) return 0;
    json_t *doc = gs_object_to_json(po);
    struct gs_policy pol;
    struct gs_diags inner = {0};
    bool dra = po->kind == GS_KIND_GPUCLUSTER;
    int rc = dra ? gs_gpucluster_parse(doc, &pol, &inner) : gs_policy_parse(doc, &pol, &inner);
    l->line = 0;
    forward_diags(l, &inner);
    gs_diags_free(&inner);
    if (rc) return rc == GS_ENOMEM ? rc : 0;
    double secs[GS_STEP_COUNT];
    step_durations(l, doc, secs);
    if (!(t->node_ready_at = calloc(t->nnodes, sizeof *t->node_ready_at))) return GS_ENOMEM;
    for (size_t i = 0; i < t->nnodes; i++) {
        const json_t *nd = sc->nodes[i].doc;
        if (t->nodes[i].ngpus <= 0 || stack_ready(nd)) continue; /* not governed, or already walked */
        t->node_ready_at[i] = stack_walk(&pol, json_object_get(json_object_get(nd, "metadata"), "labels"), secs);
    }
    return 0;
}

static void scenario_free(struct scenario *sc)
{
    for (size_t i = 0; i < sc->cap; i++) {
        if (sc->nodes) gs_node_clear(&sc->nodes[i]);
        if (sc->used_milli) free(sc->used_milli[i]);
    }
    free(sc->nodes);
    free(sc->used_milli);
}

int gs_trace_load_manifests(const char *cluster_path, const char *workload_path, struct gs_trace *out,
                            struct gs_diags *d)
{
    memset(out, 0, sizeof *out);
    struct scenario sc = {0};
    struct loader nl = {.file = cluster_path, .d = d, .sc = &sc}, pl = {.file = workload_path, .d = d, .sc = &sc};
    int rc = load_nodes(&nl, out);
    if (!rc) rc = load_pods(&pl, out);
    if (!rc) rc = stack_ready_at(&nl, &sc, out);
    if (!rc && nl.problems + pl.problems > 0) rc = GS_EINVAL;
    if (!rc && out->nnodes == 0) {
        nl.line = 0;
        problem(&nl, NULL, "no Node documents");
        rc = GS_EINVAL;
    }
    scenario_free(&sc);
    if (rc) gs_trace_free(out);
    return rc;
}
