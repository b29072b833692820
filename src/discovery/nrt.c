/*
 * nrt.c - the node's NodeResourceTopology object (topology.node.k8s.io/v1alpha2).
 *
 * The NodeResourceTopology scheduler plugin (ours, and scheduler-plugins'
 * upstream) decides NUMA fit from this object: one zone per NUMA node named
 * "node-<N>", type "Node", with the SLIT distance to every other zone as a
 * cost and, per resource, capacity (what exists), allocatable (what may be
 * handed out: healthy GPUs only) and available (allocatable minus what pods
 * hold). GPUs whose NUMA node is unknown are counted in node-0, as the kubelet's
 * topology manager does for devices without affinity.
 *
 * The object is cluster-scoped and named after the node; it has no spec or
 * status, the fields sit at the top level. Quantities are written as strings,
 * the way the API server returns them.
 */
#include "discovery/outputs.h"

#include <stdio.h>
#include <string.h>

struct res {
    char name[64];
    int64_t capacity, allocatable, available;
};

#define MAX_RES 16 /* cpu, nvidia.com/gpu and a few MIG profiles per zone */

static struct res *res_get(struct res *v, int *n, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(v[i].name, name)) return &v[i];
    if (*n >= MAX_RES) return NULL;
    struct res *r = &v[(*n)++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

static void count(struct res *r, bool allocatable, bool available)
{
    if (!r) return;
    r->capacity++;
    r->allocatable += allocatable;
    r->available += allocatable && available;
}

/* Resources of NUMA zone z: its CPUs, its full GPUs and its MIG instances. */
static int zone_resources(const struct gs_inventory *inv, const struct gs_nrt_opts *o, int z, struct res *v)
{
    int n = 0;
    struct res *cpu = res_get(v, &n, "cpu");
    cpu->capacity = cpu->allocatable = inv->numa_cpus[z];
    cpu->available = cpu->allocatable - o->cpus_allocated[z];
    if (cpu->available < 0) cpu->available = 0;
    for (int i = 0; i < inv->n_gpus; i++) {
        const struct gs_disc_gpu *g = &inv->gpus[i];
        int node = g->numa_node >= 0 && g->numa_node < inv->n_numa ? g->numa_node : 0;
        if (node != z) continue;
        bool healthy = !(o->unhealthy >> i & 1), free_ = !(o->allocated >> i & 1);
        if (!g->mig_enabled) {
            count(res_get(v, &n, "nvidia.com/gpu"), healthy, free_);
            continue;
        }
        for (int k = 0; k < g->n_mig; k++) {
            char name[64];
            snprintf(name, sizeof name, "nvidia.com/mig-%.40s", g->mig[k].profile);
            count(res_get(v, &n, name), healthy, free_);
        }
    }
    return n;
}

static json_t *qty(int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return json_string(buf);
}

static json_t *zone(const struct gs_inventory *inv, const struct gs_nrt_opts *o, int z)
{
    char name[32];
    snprintf(name, sizeof name, "node-%d", z);
    json_t *costs = json_array(), *resources = json_array();
    for (int m = 0; m < inv->n_numa; m++) {
        char other[32];
        snprintf(other, sizeof other, "node-%d", m);
        int d = inv->numa_distance[z][m] ? inv->numa_distance[z][m] : (z == m ? 10 : 20);
        json_array_append_new(costs, json_pack("{s:s, s:i}", "name", other, "value", d));
    }
    struct res v[MAX_RES];
    int n = zone_resources(inv, o, z, v);
    for (int i = 0; i < n; i++)
        json_array_append_new(resources, json_pack("{s:s, s:o, s:o, s:o}", "name", v[i].name, "capacity",
                                                   qty(v[i].capacity), "allocatable", qty(v[i].allocatable),
                                                   "available", qty(v[i].available)));
    return json_pack("{s:s, s:s, s:o, s:o}", "name", name, "type", "Node", "costs", costs, "resources", resources);
}

json_t *gs_nrt_build(const struct gs_inventory *inv, const struct gs_nrt_opts *opts)
{
    static const struct gs_nrt_opts defaults;
    const struct gs_nrt_opts *o = opts ? opts : &defaults;
    json_t *zones = json_array();
    for (int z = 0; z < inv->n_numa && z < GS_DISC_MAX_NUMA; z++) json_array_append_new(zones, zone(inv, o, z));
    json_t *attrs = json_pack("[{s:s, s:s}, {s:s, s:s}]", "name", "topologyManagerPolicy", "value",
                              o->policy ? o->policy : "none", "name", "topologyManagerScope", "value",
                              o->scope ? o->scope : "container");
    return json_pack("{s:s, s:s, s:{s:s}, s:o, s:o}", "apiVersion", "topology.node.k8s.io/v1alpha2", "kind",
                     "NodeResourceTopology", "metadata", "name", inv->hostname, "zones", zones, "attributes", attrs);
}
