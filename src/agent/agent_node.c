/*
 * agent_node.c - the agent's Node: registration, heartbeat, device health,
 * and the NodeResourceTopology object.
 *
 * The Node carries what the scheduler needs to choose exact devices
 * (status.devices[], decoded by src/core/node.c), GPU Feature Discovery's
 * labels, and the agent's HTTP endpoint (annotation gpusched.io/agent-endpoint
 * and status.daemonEndpoints.kubeletEndpoint.Port, as kubelet advertises it)
 * so clients can fetch logs and metrics. Spec (taints, unschedulable) belongs
 * to the administrator and the node lifecycle, so a re-registration keeps it.
 *
 * The heartbeat is the Ready condition's lastHeartbeatTime, written with a
 * strategic merge patch of the status: it touches nothing else, needs no
 * resourceVersion, and is what the server's node lifecycle compares against
 * its grace period.
 */
#include "agent/agent_int.h"
#include "control/resources.h"
#include "core/log.h"
#include "discovery/outputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct gs_api_resource *nodes_res(void) { return gs_api_resource_lookup("nodes"); }

json_t *gs__node_devices(const struct gs_agent *a)
{
    json_t *devs = json_array();
    char product[128];
    for (int i = 0; i < a->inv.n_gpus; i++) {
        const struct gs_disc_gpu *g = &a->inv.gpus[i];
        gs_gfd_product(g->name, product, sizeof product);
        json_t *peers = json_array();
        for (int j = 0; j < a->inv.n_gpus; j++)
            if (j != i && g->nvlink[a->inv.gpus[j].index]) json_array_append_new(peers, json_integer(a->inv.gpus[j].index));
        json_t *d = json_pack("{s:i,s:s,s:s,s:I,s:i,s:o,s:s}", "index", g->index, "uuid", g->uuid, "model", product,
                              "memoryMiB", (json_int_t)g->memory_mib, "numaNode", g->numa_node, "nvlinkPeers", peers,
                              "health", a->unhealthy >> i & 1 ? "Unhealthy" : "Healthy");
        gs__stack_device_mig(a, i, d); /* GPU stack: MIG instances */
        json_array_append_new(devs, d);
    }
    return devs;
}

static json_t *ready_condition(const char *status, const char *reason, const char *msg)
{
    char ts[32];
    gs__rfc3339(gs__wall_s(), ts, sizeof ts);
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", "Ready", "status", status, "reason", reason, "message", msg,
                     "lastHeartbeatTime", ts, "lastTransitionTime", ts);
}

static json_t *capacity(const struct gs_agent *a)
{
    long cpus = 0;
    for (int i = 0; i < a->inv.n_numa; i++) cpus += a->inv.numa_cpus[i];
    if (cpus <= 0) cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long long mem = (long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE) / 1024;
    char c[32], m[32], g[32];
    snprintf(c, sizeof c, "%ld", cpus);
    snprintf(m, sizeof m, "%lldKi", mem);
    snprintf(g, sizeof g, "%d", a->inv.n_gpus);
    json_t *cap = json_pack("{s:s,s:s,s:s,s:s}", "cpu", c, "memory", m, "pods", "110", "nvidia.com/gpu", g);
    gs__stack_capacity(a, cap); /* GPU stack: resources under the MIG strategy */
    return cap;
}

static json_t *labels(const struct gs_agent *a)
{
    struct gs_labels l = {0};
    struct gs_label_opts lo = {.mig = GS_MIG_NONE, .nvidia_pci_devices = -1};
    gs_gfd_labels(&a->inv, &lo, &l);
    json_t *o = json_object();
    for (size_t i = 0; i < l.n; i++) json_object_set_new(o, l.v[i].key, json_string(l.v[i].value));
    gs_labels_free(&l);
    json_object_set_new(o, "kubernetes.io/hostname", json_string(a->node));
    json_object_set_new(o, "kubernetes.io/os", json_string("linux"));
    json_object_set_new(o, "gpusched.io/agent", json_string("true"));
    if (a->o.extra_labels) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", a->o.extra_labels);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(t, '=');
            if (eq) *eq = 0;
            json_object_set_new(o, t, json_string(eq ? eq + 1 : ""));
        }
    }
    return o;
}

static json_t *node_status(const struct gs_agent *a)
{
    json_t *cap = capacity(a);
    return json_pack("{s:o,s:O,s:o,s:[o],s:[{s:s,s:s},{s:s,s:s}],s:{s:{s:i}},s:{s:s,s:s,s:s,s:s}}", "capacity", cap,
                     "allocatable", cap, "devices", gs__node_devices(a), "conditions",
                     ready_condition("True", "AgentReady", "gpusched agent is posting ready status"), "addresses",
                     "type", "InternalIP", "address", "127.0.0.1", "type", "Hostname", "address", a->node,
                     "daemonEndpoints", "kubeletEndpoint", "Port", a->port, "nodeInfo", "kubeletVersion",
                     "gpusched-" GS_VERSION, "operatingSystem", "linux", "architecture", "amd64", "containerRuntimeVersion",
                     "gpusched-process://" GS_VERSION);
}

int gs__node_register(struct gs_agent *a)
{
    json_t *cur = NULL, *out = NULL;
    int err = gs_client_get(a->cl, nodes_res(), NULL, a->node, &cur);
    json_t *node;
    if (err == GS_ENOENT) {
        json_decref(cur); /* the Status of the 404 */
        cur = NULL;
        node = json_pack("{s:s,s:s,s:{s:s},s:{}}", "apiVersion", "v1", "kind", "Node", "metadata", "name", a->node,
                         "spec");
    } else if (err) {
        json_decref(cur);
        return err;
    } else {
        node = cur;
        cur = NULL;
    }
    json_t *md = json_object_get(node, "metadata");
    json_t *lab = json_object_get(md, "labels");
    if (!json_is_object(lab)) json_object_set_new(md, "labels", lab = json_object());
    json_t *fresh = labels(a);
    json_object_update(lab, fresh);
    json_decref(fresh);
    json_t *ann = json_object_get(md, "annotations");
    if (!json_is_object(ann)) json_object_set_new(md, "annotations", ann = json_object());
    json_object_set_new(ann, "gpusched.io/agent-endpoint", json_string(a->endpoint));
    json_t *fresh_status = node_status(a);
    gs__stack_keep_conditions(json_object_get(node, "status"), fresh_status); /* GPU stack: keep GPUStackReady */
    json_object_set_new(node, "status", fresh_status);
    err = err == GS_ENOENT ? gs_client_create(a->cl, nodes_res(), NULL, node, &out)
                           : gs_client_update(a->cl, nodes_res(), NULL, a->node, NULL, node, &out);
    if (!err) {
        /* Status may be dropped by a main-resource write: write it on its own too. */
        json_t *st = json_deep_copy(out);
        fresh_status = node_status(a);
        gs__stack_keep_conditions(json_object_get(out, "status"), fresh_status); /* GPU stack */
        json_object_set_new(st, "status", fresh_status);
        json_decref(out);
        out = NULL;
        err = gs_client_update(a->cl, nodes_res(), NULL, a->node, "status", st, &out);
        json_decref(st);
    }
    if (err) gs_log(GS_LOG_WARN, "agent: node registration failed", "node", a->node, "error", gs_strerror(err),
                    "message", gs_client_status_message(out), NULL);
    json_decref(out);
    json_decref(node);
    return err;
}

int gs__node_heartbeat(struct gs_agent *a)
{
    json_t *patch = json_pack("{s:{s:[o],s:o}}", "status", "conditions",
                              ready_condition("True", "AgentReady", "gpusched agent is posting ready status"), "devices",
                              gs__node_devices(a));
    json_t *out = NULL;
    int err = gs_client_patch(a->cl, nodes_res(), NULL, a->node, "status", true, patch, &out);
    json_decref(patch);
    json_decref(out);
    return err;
}

bool gs__node_health_changed(struct gs_agent *a)
{
    if (!a->exp) return false;
    uint64_t m = gs_health_unhealthy_mask(gs_exporter_health(a->exp));
    uint64_t bits = 0;
    for (int i = 0; i < a->inv.n_gpus; i++)
        if (m >> a->inv.gpus[i].index & 1) bits |= 1ull << i;
    if (bits == a->unhealthy) return false;
    for (int i = 0; i < a->gpus.n; i++) gs_node_gpus_set_health(&a->gpus, i, !(bits >> i & 1));
    a->unhealthy = bits;
    gs_log(GS_LOG_WARN, "agent: GPU health changed", "node", a->node, NULL);
    return true;
}

int gs__node_publish_nrt(struct gs_agent *a)
{
    const struct gs_api_resource *r = gs_api_resource_lookup("noderesourcetopologies");
    struct gs_nrt_opts no = {.allocated = 0, .unhealthy = 0};
    uint64_t mask;
    pthread_mutex_lock(&a->mu);
    mask = gs__pods_alloc_mask(a);
    pthread_mutex_unlock(&a->mu);
    for (int i = 0; i < a->inv.n_gpus; i++) {
        if (mask >> i & 1) no.allocated |= 1ull << a->inv.gpus[i].index;
        if (a->unhealthy >> i & 1) no.unhealthy |= 1ull << a->inv.gpus[i].index;
    }
    json_t *nrt = gs_nrt_build(&a->inv, &no), *cur = NULL, *out = NULL;
    if (!nrt) return GS_ENOMEM;
    json_object_set_new(json_object_get(nrt, "metadata"), "name", json_string(a->node));
    int err = gs_client_get(a->cl, r, NULL, a->node, &cur);
    if (err == GS_ENOENT) err = gs_client_create(a->cl, r, NULL, nrt, &out);
    else if (!err) {
        json_object_set(json_object_get(nrt, "metadata"), "resourceVersion",
                        json_object_get(json_object_get(cur, "metadata"), "resourceVersion"));
        err = gs_client_update(a->cl, r, NULL, a->node, NULL, nrt, &out);
    }
    json_decref(cur);
    json_decref(out);
    json_decref(nrt);
    return err;
}
