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
 * The heartbeat is a Lease, as kubelet's: coordination.k8s.io/v1, named
 * after the node in the namespace kube-node-lease, its spec.renewTime
 * renewed every heartbeat period with a conditional update of the Lease we
 * last wrote (a small object, one write). The Node itself is read each
 * period and its status (the Ready condition and the devices, by a strategic
 * merge patch of the status: it touches nothing else and needs no
 * resourceVersion) is written only when the server's copy differs from what
 * this agent would write - a GPU turned unhealthy, or the node lifecycle
 * marked the node NotReady - and otherwise once every status report period
 * (kubelet's nodeStatusReportFrequency: 5 minutes, or
 * $GPUSCHED_NODE_STATUS_REPORT seconds). That turns a write of the whole
 * Node status per node and period into a write of a Lease. Against a server
 * without leases the agent falls back to writing the status every period.
 */
#include "agent/agent_int.h"
#include "control/resources.h"
#include "core/log.h"
#include "discovery/outputs.h"
#include "discovery/publish.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEASE_DURATION_S 40        /* kubelet's default */
#define STATUS_REPORT_S 300        /* kubelet's nodeStatusReportFrequency */

static const struct gs_api_resource *nodes_res(void) { return gs_api_resource_lookup("nodes"); }

/* The same encoder builds the gpusched.io/gpus annotation of gpusched node-publisher. */
json_t *gs__node_devices(const struct gs_agent *a) { return gs_inventory_devices(&a->inv, a->unhealthy); }

/*--- Heartbeat ---*/

static int64_t status_report_ns(void)
{
    const char *env = getenv("GPUSCHED_NODE_STATUS_REPORT");
    double s = env && atof(env) > 0 ? atof(env) : STATUS_REPORT_S;
    return (int64_t)(s * 1e9);
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
    else a->next_status_ns = gs__mono_ns() + status_report_ns();
    json_decref(out);
    json_decref(node);
    return err;
}

/* "2026-01-02T03:04:05.000000Z", the MicroTime of a Lease. */
static void micro_time(char *buf, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char sec[24];
    strftime(sec, sizeof sec, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%.19s.%06dZ", sec, (int)(ts.tv_nsec / 1000) % 1000000);
}

/* Creates or renews the node's Lease. 0, or the error of the last write. */
static int renew_lease(struct gs_agent *a)
{
    const struct gs_api_resource *r = gs_api_resource_lookup("leases");
    char now[40];
    micro_time(now, sizeof now);
    int err = GS_ECONFLICT;
    for (int attempt = 0; attempt < 2 && (err == GS_ECONFLICT || err == GS_ENOENT); attempt++) {
        json_t *out = NULL;
        if (a->lease) {
            json_t *l = json_deep_copy(a->lease), *spec = json_object_get(l, "spec");
            if (!json_is_object(spec)) json_object_set_new(l, "spec", spec = json_object());
            json_object_set_new(spec, "holderIdentity", json_string(a->node));
            json_object_set_new(spec, "leaseDurationSeconds", json_integer(LEASE_DURATION_S));
            json_object_set_new(spec, "renewTime", json_string(now));
            err = gs_client_update(a->cl, r, GS_NODE_LEASE_NS, a->node, NULL, l, &out);
            json_decref(l);
        } else {
            json_t *l = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:i,s:s}}", "apiVersion", "coordination.k8s.io/v1",
                                  "kind", "Lease", "metadata", "name", a->node, "namespace", GS_NODE_LEASE_NS, "spec",
                                  "holderIdentity", a->node, "leaseDurationSeconds", LEASE_DURATION_S, "renewTime",
                                  now);
            err = gs_client_create(a->cl, r, GS_NODE_LEASE_NS, l, &out);
            json_decref(l);
            if (err == GS_EEXIST) err = GS_ECONFLICT; /* created by our previous life: read it */
        }
        if (!err) {
            json_decref(a->lease);
            a->lease = out;
            return 0;
        }
        json_decref(out);
        out = NULL;
        json_decref(a->lease);
        a->lease = NULL;
        if (err == GS_ECONFLICT && gs_client_get(a->cl, r, GS_NODE_LEASE_NS, a->node, &out) == 0) a->lease = out;
        else json_decref(out);
    }
    return err;
}

/* Does the server's Node already say what this agent would write? */
static bool status_current(const json_t *node, const json_t *devices)
{
    json_t *st = json_object_get(node, "status"), *c;
    size_t i;
    bool ready = false;
    json_array_foreach(json_object_get(st, "conditions"), i, c)
        if (gs__jstr(c, "type") && !strcmp(gs__jstr(c, "type"), "Ready"))
            ready = gs__jstr(c, "status") && !strcmp(gs__jstr(c, "status"), "True") && gs__jstr(c, "reason") &&
                    !strcmp(gs__jstr(c, "reason"), "AgentReady");
    return ready && json_equal(json_object_get(st, "devices"), devices);
}

static int write_status(struct gs_agent *a, json_t *devices)
{
    json_t *patch = json_pack("{s:{s:[o],s:O}}", "status", "conditions",
                              ready_condition("True", "AgentReady", "gpusched agent is posting ready status"), "devices",
                              devices);
    json_t *out = NULL;
    int err = gs_client_patch(a->cl, nodes_res(), NULL, a->node, "status", true, patch, &out);
    json_decref(patch);
    json_decref(out);
    if (!err) a->next_status_ns = gs__mono_ns() + status_report_ns();
    return err;
}

int gs__node_heartbeat(struct gs_agent *a)
{
    if (!a->lease_unsupported) {
        int err = renew_lease(a);
        if (err == GS_ENOENT) { /* a server that serves no leases */
            a->lease_unsupported = true;
            gs_log(GS_LOG_WARN, "agent: the server has no leases; heartbeat on the Node status", "node", a->node, NULL);
        } else if (err) {
            gs_log(GS_LOG_DEBUG, "agent: lease renewal failed", "node", a->node, "error", gs_strerror(err), NULL);
        }
    }
    json_t *devices = gs__node_devices(a), *node = NULL;
    int err = 0;
    if (!a->lease_unsupported && gs__mono_ns() < a->next_status_ns) {
        err = gs_client_get(a->cl, nodes_res(), NULL, a->node, &node);
        if (!err && status_current(node, devices)) {
            json_decref(node);
            json_decref(devices);
            return 0;
        }
        json_decref(node);
        if (err && err != GS_ENOENT) err = 0; /* unreadable: write it */
    }
    if (!err) err = write_status(a, devices);
    json_decref(devices);
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
