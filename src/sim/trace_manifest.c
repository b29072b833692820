/*
 * trace_manifest.c - a simulator trace from Kubernetes manifests, so any
 * scenario can be written by hand: a cluster file of Node documents and a
 * workload file of Pod documents (YAML or JSON, several per file).
 *
 * Pods are decoded by the same decoder the server uses (gs_pod_decode), so a
 * scenario exercises exactly the fields a real pod would: requests, the
 * fractional-GPU annotations, GPU model constraints, selectors, affinity,
 * tolerations. Timing comes from two annotations, in seconds:
 * sim.gpusched.io/arrival (default 0) and sim.gpusched.io/duration (absent:
 * the pod runs until the end).
 *
 * Nodes become struct gs_node_spec, the trace's node form: allocatable CPU,
 * memory and pods, the GPU count (status.devices[] or the allocatable
 * nvidia.com/gpu count), the GPU model (first device's model or the
 * nvidia.com/gpu.product label, which is then also set as a label so model
 * constraints match), per-GPU memory, and each GPU's NUMA node and NVLink
 * peers (status.devices[]). The cluster file may also hold
 * NodeResourceTopology documents and the workload file PodGroup documents
 * (scheduler-plugins' or Volcano's); those are kept as objects in the trace
 * for the replay to hand to the cache and the scheduler. Problems are reported as
 * "FILE:LINE: field: message", LINE being where the document starts.
 */
#include "core/codec.h"
#include "core/object.h"
#include "sim/sim.h"
#include "sim/sim_dra.h" /* DRA documents */

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NO_MODEL_NAME "GPU"

struct loader {
    const char *file;
    int line;           /* first line of the current document */
    struct gs_diags *d;
    int problems;
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

static bool kind_is(struct loader *l, json_t *doc, const char *want)
{
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    if (kind && !strcmp(kind, want)) return true;
    if (gs_sim_dra_kind(kind)) return false; /* the caller's DRA documents */
    bool cluster = !strcmp(want, "Node");
    if (kind && !strcmp(kind, cluster ? "NodeResourceTopology" : "PodGroup")) return false; /* the caller's other kind */
    char msg[200];
    snprintf(msg, sizeof msg, "kind \"%.60s\": the %s file holds only %s documents (and %s)", kind ? kind : "",
             cluster ? "cluster" : "workload", want,
             cluster ? "NodeResourceTopology, DRA kinds" : "PodGroup, DRA kinds");
    problem(l, "kind", msg);
    return false;
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

static bool node_name_taken(const struct gs_trace *t, const char *name)
{
    for (size_t i = 0; i < t->nnodes; i++)
        if (!strcmp(t->nodes[i].name, name)) return true;
    return false;
}

static int add_node(struct loader *l, json_t *doc, struct gs_trace *t)
{
    struct gs_node n;
    struct gs_diags inner = {0};
    int rc = gs_node_decode(doc, &n, &inner);
    if (rc) {
        forward_diags(l, &inner);
        gs_diags_free(&inner);
        return 0; /* reported; keep reading to find every problem */
    }
    gs_diags_free(&inner);
    if (node_name_taken(t, n.meta.name)) {
        problem(l, "metadata.name", "duplicate node name");
        gs_node_clear(&n);
        return 0;
    }
    size_t i = t->nnodes;
    memset(&t->nodes[i], 0, sizeof t->nodes[i]);
    memset(&t->node_labels[i], 0, sizeof t->node_labels[i]);
    t->nnodes++; /* counted before filling so gs_trace_free releases a partial entry */
    rc = node_to_spec(&n, &t->nodes[i], &t->node_labels[i]);
    gs_node_clear(&n);
    return rc;
}

/* A PodGroup or NodeResourceTopology document, kept as an object. */
static int add_object(struct loader *l, json_t *doc, struct gs_trace *t, size_t cap)
{
    struct gs_object *o = NULL;
    struct gs_diags inner = {0};
    int rc = gs_object_decode(doc, &o, &inner);
    forward_diags(l, &inner);
    gs_diags_free(&inner);
    if (rc) return rc == GS_ENOMEM ? rc : 0;
    (void)cap;
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

static int other_kind(struct loader *l, json_t *doc, struct gs_trace *t, size_t cap, const char *kind)
{
    const char *k = json_string_value(json_object_get(doc, "kind"));
    if (gs_sim_dra_kind(k)) return add_dra(l, doc, t);
    return k && !strcmp(k, kind) ? add_object(l, doc, t, cap) : 0;
}

static int load_nodes(struct loader *l, struct gs_trace *t)
{
    struct gs_docs docs = {0};
    int rc = read_docs(l, &docs);
    if (rc) return rc;
    t->nodes = calloc(docs.n ? docs.n : 1, sizeof *t->nodes);
    t->node_labels = calloc(docs.n ? docs.n : 1, sizeof *t->node_labels);
    if (!t->nodes || !t->node_labels) rc = GS_ENOMEM;
    for (size_t i = 0; i < docs.n && !rc; i++) {
        l->line = docs.lines[i];
        if (kind_is(l, docs.docs[i], "Node")) rc = add_node(l, docs.docs[i], t);
        else rc = other_kind(l, docs.docs[i], t, 2 * docs.n, "NodeResourceTopology");
    }
    gs_docs_free(&docs);
    return rc;
}

/*--- Pods ---*/

/* Seconds from an annotation: a non-negative finite number. */
static bool seconds(struct loader *l, const struct gs_pod *p, const char *key, double *out)
{
    const char *v = gs_labels_get(&p->meta.annotations, key);
    if (!v) return false;
    char *end;
    errno = 0;
    double s = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(s) || s < 0) {
        char field[128], msg[192];
        snprintf(field, sizeof field, "metadata.annotations[\"%s\"]", key);
        snprintf(msg, sizeof msg, "\"%.80s\" is not a number of seconds >= 0", v);
        problem(l, field, msg);
        return false;
    }
    *out = s;
    return true;
}

static bool pod_key_taken(const struct gs_trace *t, const struct gs_pod *p)
{
    for (size_t i = 0; i < t->npods; i++) {
        const struct gs_meta *m = &t->pods[i].pod->meta;
        if (!strcmp(m->name, p->meta.name) && !strcmp(m->namespace_, p->meta.namespace_)) return true;
    }
    return false;
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
        return 0;
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
    seconds(l, p, GS_ANN_SIM_ARRIVAL, &tp.arrival);
    seconds(l, p, GS_ANN_SIM_DURATION, &tp.duration);
    if (pod_key_taken(t, p)) problem(l, "metadata.name", "duplicate pod (same namespace and name)");
    if (l->problems != before) {
        gs_pod_clear(p);
        free(p);
        return 0;
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
        if (kind_is(l, docs.docs[i], "Pod")) rc = add_pod(l, docs.docs[i], t);
        else rc = other_kind(l, docs.docs[i], t, 2 * docs.n, "PodGroup");
    }
    gs_docs_free(&docs);
    return rc;
}

int gs_trace_load_manifests(const char *cluster_path, const char *workload_path, struct gs_trace *out,
                            struct gs_diags *d)
{
    memset(out, 0, sizeof *out);
    struct loader nl = {.file = cluster_path, .d = d}, pl = {.file = workload_path, .d = d};
    int rc = load_nodes(&nl, out);
    if (!rc) rc = load_pods(&pl, out);
    if (!rc && nl.problems + pl.problems > 0) rc = GS_EINVAL;
    if (!rc && out->nnodes == 0) {
        nl.line = 0;
        problem(&nl, NULL, "no Node documents");
        rc = GS_EINVAL;
    }
    if (rc) gs_trace_free(out);
    return rc;
}
