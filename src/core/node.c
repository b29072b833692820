/*
 * node.c - decoding a Node, including the GPUs it reports.
 *
 * Standard fields: metadata, spec.unschedulable, spec.taints,
 * status.capacity and status.allocatable (allocatable defaults to capacity,
 * as a node that reports no reservations has none).
 *
 * status.devices[] is our own extension to the Node object, written by
 * discovery (NVML, sysfs or mock) so the scheduler can choose exact devices:
 *
 *   status:
 *     devices:
 *     - index: 0                  # required, 0..63, unique on the node
 *       uuid: GPU-8c3f...          # optional
 *       model: NVIDIA-H100-80GB    # optional, compared with gpusched.io/gpu-model
 *       memoryMiB: 81559           # optional, >= 0
 *       numaNode: 0                # optional, -1 (default) = unknown
 *       nvlinkPeers: [1, 2, 3]     # indices of GPUs reachable over NVLink
 *       health: Healthy            # Healthy (default) | Unhealthy
 *       mig:
 *         enabled: true
 *         instances: [{profile: 1g.10gb, uuid: MIG-...}]
 *
 * Peer indices are kept as a 64-bit mask, which is why indices stop at 63.
 *
 * Real Kubernetes Nodes have no status.devices (the API server drops unknown
 * status fields). There, our node DaemonSet publishes the same array as JSON
 * text in the annotation gpusched.io/gpus, read with the same rules when
 * status.devices is absent. A bad annotation does not drop the node: the
 * problem goes to gpu_note ("node n1: annotation gpusched.io/gpus: ...") for
 * the caller to log, and the node is used count-only. Without either, a node
 * with allocatable nvidia.com/gpu is count-only (gpu_source GS_GPU_SRC_COUNT):
 * that many GPUs, no uuid, NUMA or NVLink, the model from the GFD label
 * nvidia.com/gpu.product. gs_node_gpus_from_zones then gives such a node
 * per-GPU NUMA nodes from its NodeResourceTopology's zones (the scheduler
 * calls it through sched/gpu_state.h when the topology is known).
 */
#include "core/decode.h"
#include "core/endpoint.h"

#include <stdlib.h>
#include <string.h>

static void gpus_free(struct gs_node *n);

void gs_node_clear(struct gs_node *n)
{
    gs_meta_clear(&n->meta);
    json_decref(n->doc);
    free(n->gpu_note);
    for (size_t i = 0; i < n->ntaints; i++) gs_taint_free(&n->taints[i]);
    free(n->taints);
    gs_resources_free(&n->capacity);
    gs_resources_free(&n->allocatable);
    gpus_free(n);
    memset(n, 0, sizeof *n);
}

/*--- GPUs ---*/

static void dec_peers(struct gs_dec *dc, const json_t *dev, struct gs_gpu *g)
{
    json_t *arr = gs__dec_get(dc, dev, "nvlinkPeers", JSON_ARRAY);
    size_t m = gs__dec_key(dc, "nvlinkPeers"), i;
    json_t *p;
    json_array_foreach(arr, i, p) {
        size_t m2 = gs__dec_idx(dc, i);
        if (!json_is_integer(p)) gs__dec_err(dc, "expected an integer, got %s", gs__json_type_name(p));
        else if (json_integer_value(p) < 0 || json_integer_value(p) > 63)
            gs__dec_err(dc, "invalid GPU index %lld: must be from 0 to 63", (long long)json_integer_value(p));
        else g->nvlink_peers |= 1ull << json_integer_value(p);
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

static void dec_mig(struct gs_dec *dc, const json_t *dev, struct gs_gpu *g)
{
    json_t *mig = gs__dec_get(dc, dev, "mig", JSON_OBJECT);
    if (!mig) return;
    size_t m = gs__dec_key(dc, "mig");
    gs__dec_bool(dc, mig, "enabled", &g->mig_enabled);
    json_t *arr = gs__dec_get(dc, mig, "instances", JSON_ARRAY);
    size_t n = json_array_size(arr), i;
    g->mig = n ? calloc(n, sizeof *g->mig) : NULL;
    if (n && !g->mig) dc->oom = true;
    gs__dec_key(dc, "instances");
    json_t *in;
    json_array_foreach(arr, i, in) {
        if (!g->mig) break;
        size_t m2 = gs__dec_idx(dc, i);
        if (gs__dec_is(dc, in, JSON_OBJECT)) {
            struct gs_mig_instance *mi = &g->mig[g->nmig];
            mi->profile = gs__dec_strdup(dc, in, "profile");
            mi->uuid = gs__dec_strdup(dc, in, "uuid");
            if (!mi->profile) {
                if (!json_object_get(in, "profile")) gs__dec_err_at(dc, "profile", "is required");
                free(mi->uuid);
                mi->uuid = NULL;
            } else {
                g->nmig++;
            }
        }
        gs__dec_pop(dc, m2);
    }
    if (g->nmig && !g->mig_enabled) gs__dec_err(dc, "MIG instances listed but mig.enabled is not true");
    gs__dec_pop(dc, m);
}

static bool dec_gpu(struct gs_dec *dc, const json_t *dev, struct gs_gpu *g)
{
    if (!gs__dec_is(dc, dev, JSON_OBJECT)) return false;
    int64_t v;
    bool ok = true;
    if (gs__dec_int(dc, dev, "index", 0, 63, &v)) g->index = (int32_t)v;
    else {
        if (!json_object_get(dev, "index")) gs__dec_err_at(dc, "index", "is required");
        ok = false;
    }
    g->uuid = gs__dec_strdup(dc, dev, "uuid");
    g->model = gs__dec_strdup(dc, dev, "model");
    if (gs__dec_int(dc, dev, "memoryMiB", 0, INT64_MAX / 2, &v)) g->memory_mib = v;
    g->numa_node = -1;
    if (gs__dec_int(dc, dev, "numaNode", -1, 1023, &v)) g->numa_node = (int32_t)v;
    dec_peers(dc, dev, g);
    static const char *const health[] = {"Healthy", "Unhealthy", NULL};
    const char *h = "Healthy";
    if (json_object_get(dev, "health")) gs__dec_enum(dc, dev, "health", health, &h);
    g->healthy = !strcmp(h, "Healthy");
    dec_mig(dc, dev, g);
    return ok;
}

static void gpus_free(struct gs_node *n)
{
    for (size_t i = 0; i < n->ngpus; i++) {
        struct gs_gpu *g = &n->gpus[i];
        free(g->uuid);
        free(g->model);
        for (size_t j = 0; j < g->nmig; j++) {
            free(g->mig[j].profile);
            free(g->mig[j].uuid);
        }
        free(g->mig);
    }
    free(n->gpus);
    n->gpus = NULL;
    n->ngpus = 0;
}

static void dec_gpus(struct gs_dec *dc, const json_t *status, struct gs_node *n)
{
    json_t *arr = gs__dec_get(dc, status, "devices", JSON_ARRAY);
    if (!arr || !json_array_size(arr)) return;
    n->gpus = calloc(json_array_size(arr), sizeof *n->gpus);
    if (!n->gpus) { dc->oom = true; return; }
    size_t m = gs__dec_key(dc, "devices"), i;
    uint64_t seen = 0;
    json_t *dev;
    json_array_foreach(arr, i, dev) {
        size_t m2 = gs__dec_idx(dc, i);
        struct gs_gpu *g = &n->gpus[n->ngpus++];
        if (dec_gpu(dc, dev, g)) {
            if (seen & (1ull << g->index)) gs__dec_err_at(dc, "index", "duplicate GPU index %d", g->index);
            seen |= 1ull << g->index;
        }
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

/*--- GPUs of a Node without status.devices ---*/

static int64_t gpu_count_of(const struct gs_node *n) { return gs_resources_get(&n->allocatable, GS_RES_GPU) / 1000; }

/* The annotation's array, decoded like status.devices on a private diags
 * list: its problems become gpu_note, never the node's decode errors. */
static void dec_gpu_annotation(struct gs_dec *dc, struct gs_node *n)
{
    const char *txt = gs_labels_get(&n->meta.annotations, GS_ANN_NODE_GPUS);
    if (!txt) return;
    json_error_t je;
    json_t *arr = json_loads(txt, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    struct gs_diags d = {0};
    struct gs_dec sub;
    gs__dec_init(&sub, &d);
    char why[512] = "";
    if (!arr) snprintf(why, sizeof why, "not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    else if (!json_is_array(arr))
        snprintf(why, sizeof why, "expected a JSON array of devices (as status.devices), got %s", gs__json_type_name(arr));
    else {
        json_t *wrap = json_pack("{s:O}", "devices", arr);
        if (!wrap) dc->oom = true;
        else dec_gpus(&sub, wrap, n);
        json_decref(wrap);
        if (sub.oom) dc->oom = true;
        if (d.n) /* the path starts "devices": the annotation's own array is the root */
            snprintf(why, sizeof why, "%s: %s%s", d.v[0].path[0] ? d.v[0].path + strlen("devices") : "(root)",
                     d.v[0].msg, d.n > 1 ? " (and more)" : "");
        else if (!n->ngpus) snprintf(why, sizeof why, "the array lists no devices");
    }
    json_decref(arr);
    gs_diags_free(&d);
    if (!why[0]) {
        n->gpu_source = GS_GPU_SRC_ANNOTATION;
        return;
    }
    gpus_free(n);
    if (asprintf(&n->gpu_note, "node %s: annotation %s: %s; using the count-only GPU state",
                 n->meta.name ? n->meta.name : "?", GS_ANN_NODE_GPUS, why) < 0) {
        n->gpu_note = NULL;
        dc->oom = true;
    }
}

static void dec_gpu_state(struct gs_dec *dc, const json_t *status, struct gs_node *n)
{
    dec_gpus(dc, status, n);
    if (n->ngpus) {
        n->gpu_source = GS_GPU_SRC_DEVICES;
        return;
    }
    dec_gpu_annotation(dc, n);
    if (!n->ngpus) n->gpu_source = gpu_count_of(n) > 0 ? GS_GPU_SRC_COUNT : GS_GPU_SRC_NONE;
}

int gs_node_gpus_from_zones(struct gs_node *n, const int32_t *zone_numa, const int32_t *zone_gpus, int nzones)
{
    if (n->gpu_source != GS_GPU_SRC_COUNT && n->gpu_source != GS_GPU_SRC_NRT) return 0;
    gpus_free(n);
    n->gpu_source = gpu_count_of(n) > 0 ? GS_GPU_SRC_COUNT : GS_GPU_SRC_NONE;
    int64_t in_zones = 0;
    for (int z = 0; z < nzones; z++) in_zones += zone_gpus[z] > 0 ? zone_gpus[z] : 0;
    int64_t count = gpu_count_of(n); /* allocatable: the healthy ones, 0 while the GPU stack gate holds them */
    if (!in_zones || count <= 0) return 0;
    if (count > 64) count = 64;
    if (!(n->gpus = calloc((size_t)count, sizeof *n->gpus))) return GS_ENOMEM;
    const char *model = gs_labels_get(&n->meta.labels, GS_LABEL_GPU_PRODUCT);
    const char *mem = gs_labels_get(&n->meta.labels, GS_LABEL_GPU_MEMORY);
    char *end = NULL;
    long long mib = mem ? strtoll(mem, &end, 10) : 0;
    if (!mem || *end || mib < 0) mib = 0; /* not a plain MiB count: unknown */
    int z = 0, used = 0; /* GPUs are numbered zone by zone, in the zones' order */
    for (int64_t i = 0; i < count; i++) {
        while (z < nzones && used >= zone_gpus[z]) z++, used = 0;
        struct gs_gpu *g = &n->gpus[n->ngpus++];
        g->index = (int32_t)i;
        g->numa_node = z < nzones ? zone_numa[z] : -1;
        used++;
        g->healthy = true;
        g->memory_mib = mib;
        if (model && !(g->model = strdup(model))) return GS_ENOMEM;
    }
    n->gpu_source = GS_GPU_SRC_NRT;
    return 0;
}

const char *gs_gpu_source_name(enum gs_gpu_source s)
{
    switch (s) {
    case GS_GPU_SRC_DEVICES: return "status.devices";
    case GS_GPU_SRC_ANNOTATION: return "annotation " GS_ANN_NODE_GPUS;
    case GS_GPU_SRC_NRT: return "NodeResourceTopology";
    case GS_GPU_SRC_COUNT: return "count-only";
    default: return "none";
    }
}

/*--- The node ---*/

static void check_endpoint(struct gs_dec *dc, const struct gs_meta *meta)
{
    const char *ep = gs_labels_get(&meta->annotations, GS_ANN_AGENT_ENDPOINT);
    char why[400];
    if (!ep || !gs_endpoint_check(ep, why, sizeof why)) return;
    size_t m = gs__dec_key(dc, "metadata");
    gs__dec_key(dc, "annotations");
    gs__dec_key(dc, GS_ANN_AGENT_ENDPOINT);
    gs__dec_err(dc, "%s", why);
    gs__dec_pop(dc, m);
}

int gs__node_decode(json_t *doc, struct gs_node *n, struct gs_dec *dc)
{
    gs__dec_meta(dc, doc, false, &n->meta);
    check_endpoint(dc, &n->meta); /* agent endpoint: http(s)://host:port only (endpoint.c) */
    json_t *spec = gs__dec_get(dc, doc, "spec", JSON_OBJECT);
    size_t m = gs__dec_key(dc, "spec");
    gs__dec_bool(dc, spec, "unschedulable", &n->unschedulable);
    gs__dec_taints(dc, spec, "taints", &n->taints, &n->ntaints);
    gs__dec_pop(dc, m);
    json_t *status = gs__dec_get(dc, doc, "status", JSON_OBJECT);
    m = gs__dec_key(dc, "status");
    gs__dec_resources(dc, status, "capacity", &n->capacity);
    json_t *alloc = status ? json_object_get(status, "allocatable") : NULL;
    if (alloc && !json_is_null(alloc)) gs__dec_resources(dc, status, "allocatable", &n->allocatable);
    else
        for (size_t i = 0; i < n->capacity.n; i++)
            if (gs_resources_set(&n->allocatable, n->capacity.v[i].name, n->capacity.v[i].milli)) dc->oom = true;
    dec_gpu_state(dc, status, n);
    gs__dec_pop(dc, m);
    n->doc = json_incref(doc);
    return dc->oom ? GS_ENOMEM : 0;
}

int gs_node_decode(json_t *doc, struct gs_node *out, struct gs_diags *d)
{
    struct gs_dec dc;
    gs__dec_init(&dc, d);
    memset(out, 0, sizeof *out);
    if (!json_is_object(doc)) {
        gs__dec_err(&dc, "expected an object, got %s", doc ? gs__json_type_name(doc) : "nothing");
        return GS_EINVAL;
    }
    int rc = gs__node_decode(doc, out, &dc);
    if (!rc && dc.nerr) rc = GS_EINVAL;
    if (rc) gs_node_clear(out);
    return rc;
}

/*--- Synthesised document ---*/

static json_t *gpu_to_json(const struct gs_gpu *g)
{
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "index", json_integer(g->index));
    if (g->uuid) json_object_set_new(o, "uuid", json_string(g->uuid));
    if (g->model) json_object_set_new(o, "model", json_string(g->model));
    if (g->memory_mib) json_object_set_new(o, "memoryMiB", json_integer(g->memory_mib));
    if (g->numa_node >= 0) json_object_set_new(o, "numaNode", json_integer(g->numa_node));
    if (g->nvlink_peers) {
        json_t *p = json_array();
        for (int i = 0; i < 64; i++)
            if (g->nvlink_peers & (1ull << i)) json_array_append_new(p, json_integer(i));
        json_object_set_new(o, "nvlinkPeers", p);
    }
    json_object_set_new(o, "health", json_string(g->healthy ? "Healthy" : "Unhealthy"));
    if (g->mig_enabled || g->nmig) {
        json_t *mig = json_object(), *inst = json_array();
        json_object_set_new(mig, "enabled", json_boolean(g->mig_enabled));
        for (size_t i = 0; i < g->nmig; i++) {
            json_t *mi = json_pack("{s:s}", "profile", g->mig[i].profile ? g->mig[i].profile : "");
            if (mi && g->mig[i].uuid) json_object_set_new(mi, "uuid", json_string(g->mig[i].uuid));
            json_array_append_new(inst, mi);
        }
        json_object_set_new(mig, "instances", inst);
        json_object_set_new(o, "mig", mig);
    }
    return o;
}

json_t *gs__node_to_json(const struct gs_node *n)
{
    json_t *doc = json_object(), *spec = json_object(), *status = json_object();
    if (!doc || !spec || !status) {
        json_decref(doc), json_decref(spec), json_decref(status);
        return NULL;
    }
    json_object_set_new(doc, "apiVersion", json_string("v1"));
    json_object_set_new(doc, "kind", json_string("Node"));
    json_object_set_new(doc, "metadata", gs__meta_to_json(&n->meta));
    if (n->unschedulable) json_object_set_new(spec, "unschedulable", json_true());
    if (n->ntaints) {
        json_t *ts = json_array();
        for (size_t i = 0; i < n->ntaints; i++) {
            json_t *t = json_pack("{s:s}", "key", n->taints[i].key ? n->taints[i].key : "");
            if (t && n->taints[i].value) json_object_set_new(t, "value", json_string(n->taints[i].value));
            if (t) json_object_set_new(t, "effect", json_string(gs_taint_effect_name(n->taints[i].effect)));
            json_array_append_new(ts, t);
        }
        json_object_set_new(spec, "taints", ts);
    }
    json_object_set_new(doc, "spec", spec);
    json_object_set_new(status, "capacity", gs__resources_to_json(&n->capacity));
    json_object_set_new(status, "allocatable", gs__resources_to_json(&n->allocatable));
    if (n->ngpus) {
        json_t *devs = json_array();
        for (size_t i = 0; i < n->ngpus; i++) json_array_append_new(devs, gpu_to_json(&n->gpus[i]));
        json_object_set_new(status, "devices", devs);
    }
    json_object_set_new(doc, "status", status);
    return doc;
}
