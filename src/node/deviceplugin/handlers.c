/*
 * handlers.c - DevicePlugin request handling over protobuf-c (handlers.h).
 *
 * protobuf-c builds replies from caller-owned structs; we keep them on the
 * stack or in one calloc'd block per reply and pack into a malloc'd buffer.
 */
#include "node/deviceplugin/handlers.h"

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "node/deviceplugin/rpc.h"
#include "node/preferred.h"
#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Packs any message into a malloc'd buffer. */
static int pack(const ProtobufCMessage *m, uint8_t **out, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    *out = malloc(*len ? *len : 1);
    if (!*out) return GS_RPC_INTERNAL;
    protobuf_c_message_pack(m, *out);
    return GS_RPC_OK;
}

int gs_dp_h_options(uint8_t **out, size_t *len)
{
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    o.pre_start_required = 0;
    o.get_preferred_allocation_available = 1;
    return pack(&o.base, out, len);
}

/*--- ListAndWatch ---*/

struct dev_block {
    V1beta1__Device dev;
    V1beta1__TopologyInfo topo;
    V1beta1__NUMANode numa;
    V1beta1__NUMANode *numap;
    char id[GS_NODE_ID_MAX];
};

int gs_dp_h_list(const struct gs_node_gpus *g, uint8_t **out, size_t *len)
{
    int n = gs_node_gpus_ndev(g);
    struct dev_block *b = calloc((size_t)(n ? n : 1), sizeof *b);
    V1beta1__Device **devs = calloc((size_t)(n ? n : 1), sizeof *devs);
    if (!b || !devs) {
        free(b), free(devs);
        return GS_RPC_INTERNAL;
    }
    for (int i = 0; i < n; i++) {
        int slot = gs_node_gpus_id(g, i, b[i].id, sizeof b[i].id);
        v1beta1__device__init(&b[i].dev);
        b[i].dev.id = b[i].id;
        b[i].dev.health = g->gpu[slot].healthy ? GS_DP_HEALTHY : GS_DP_UNHEALTHY;
        if (g->gpu[slot].numa >= 0) {
            v1beta1__topology_info__init(&b[i].topo);
            v1beta1__numanode__init(&b[i].numa);
            b[i].numa.id = g->gpu[slot].numa;
            b[i].numap = &b[i].numa;
            b[i].topo.n_nodes = 1;
            b[i].topo.nodes = &b[i].numap;
            b[i].dev.topology = &b[i].topo;
        }
        devs[i] = &b[i].dev;
    }
    V1beta1__ListAndWatchResponse r = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    r.n_devices = (size_t)n;
    r.devices = devs;
    int rc = pack(&r.base, out, len);
    free(b), free(devs);
    return rc;
}

/*--- GetPreferredAllocation ---*/

static int preferred_one(const struct gs_node_gpus *g, const V1beta1__ContainerPreferredAllocationRequest *cr,
                         V1beta1__ContainerPreferredAllocationResponse *resp, char *msg, size_t msglen)
{
    v1beta1__container_preferred_allocation_response__init(resp);
    if (cr->allocation_size < 1 || (size_t)cr->allocation_size > cr->n_available_deviceids) {
        snprintf(msg, msglen, "allocation size %d out of range (1..%zu available)", cr->allocation_size,
                 cr->n_available_deviceids);
        return GS_RPC_INVALID_ARGUMENT;
    }
    int *pick = calloc((size_t)cr->allocation_size, sizeof *pick);
    char **ids = calloc((size_t)cr->allocation_size, sizeof *ids);
    if (!pick || !ids) {
        free(pick), free(ids);
        return GS_RPC_INTERNAL;
    }
    int n = gs_preferred(g, (const char *const *)cr->available_deviceids, cr->n_available_deviceids,
                         (const char *const *)cr->must_include_deviceids, cr->n_must_include_deviceids,
                         cr->allocation_size, pick);
    for (int i = 0; i < n; i++) ids[i] = cr->available_deviceids[pick[i]];
    free(pick);
    resp->n_deviceids = n > 0 ? (size_t)n : 0;
    resp->deviceids = ids;
    return GS_RPC_OK;
}

int gs_dp_h_preferred(const struct gs_node_gpus *g, const uint8_t *req, size_t reqlen, uint8_t **out, size_t *len,
                      char *msg, size_t msglen)
{
    V1beta1__PreferredAllocationRequest *r = v1beta1__preferred_allocation_request__unpack(NULL, reqlen, req);
    if (!r) {
        snprintf(msg, msglen, "malformed PreferredAllocationRequest");
        return GS_RPC_INVALID_ARGUMENT;
    }
    size_t n = r->n_container_requests;
    V1beta1__ContainerPreferredAllocationResponse *cr = calloc(n ? n : 1, sizeof *cr);
    V1beta1__ContainerPreferredAllocationResponse **crp = calloc(n ? n : 1, sizeof *crp);
    int rc = cr && crp ? GS_RPC_OK : GS_RPC_INTERNAL;
    size_t done = 0;
    for (; rc == GS_RPC_OK && done < n; done++) {
        rc = preferred_one(g, r->container_requests[done], &cr[done], msg, msglen);
        crp[done] = &cr[done];
    }
    if (rc == GS_RPC_OK) {
        V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
        resp.n_container_responses = n;
        resp.container_responses = crp;
        rc = pack(&resp.base, out, len);
    }
    for (size_t i = 0; cr && i < done; i++) free(cr[i].deviceids);
    free(cr), free(crp);
    v1beta1__preferred_allocation_request__free_unpacked(r, NULL);
    return rc;
}

/*--- Allocate ---*/

/* Reply structs for one container, pointing into a gs_alloc_resp. */
struct ctr_block {
    struct gs_alloc_resp a;
    V1beta1__ContainerAllocateResponse resp;
    V1beta1__ContainerAllocateResponse__EnvsEntry env[GS_ALLOC_MAX_KV], *envp[GS_ALLOC_MAX_KV];
    V1beta1__ContainerAllocateResponse__AnnotationsEntry ann[GS_ALLOC_MAX_KV], *annp[GS_ALLOC_MAX_KV];
    V1beta1__DeviceSpec dev[GS_ALLOC_MAX_DEVS], *devp[GS_ALLOC_MAX_DEVS];
    V1beta1__CDIDevice cdi[GS_NODE_MAX_GPUS], *cdip[GS_NODE_MAX_GPUS];
};

static void fill_reply(struct ctr_block *b)
{
    v1beta1__container_allocate_response__init(&b->resp);
    for (int i = 0; i < b->a.n_env; i++) {
        v1beta1__container_allocate_response__envs_entry__init(&b->env[i]);
        b->env[i].key = b->a.env[i].key, b->env[i].value = b->a.env[i].value;
        b->envp[i] = &b->env[i];
    }
    for (int i = 0; i < b->a.n_ann; i++) {
        v1beta1__container_allocate_response__annotations_entry__init(&b->ann[i]);
        b->ann[i].key = b->a.ann[i].key, b->ann[i].value = b->a.ann[i].value;
        b->annp[i] = &b->ann[i];
    }
    for (int i = 0; i < b->a.n_dev; i++) {
        v1beta1__device_spec__init(&b->dev[i]);
        b->dev[i].container_path = b->a.dev[i].container_path;
        b->dev[i].host_path = b->a.dev[i].host_path;
        b->dev[i].permissions = b->a.dev[i].permissions;
        b->devp[i] = &b->dev[i];
    }
    for (int i = 0; i < b->a.n_cdi; i++) {
        v1beta1__cdidevice__init(&b->cdi[i]);
        b->cdi[i].name = b->a.cdi[i];
        b->cdip[i] = &b->cdi[i];
    }
    b->resp.n_envs = (size_t)b->a.n_env, b->resp.envs = b->envp;
    b->resp.n_annotations = (size_t)b->a.n_ann, b->resp.annotations = b->annp;
    b->resp.n_devices = (size_t)b->a.n_dev, b->resp.devices = b->devp;
    b->resp.n_cdi_devices = (size_t)b->a.n_cdi, b->resp.cdi_devices = b->cdip;
}

static int refusal_code(int rc)
{
    if (rc == GS_ENOENT) return GS_RPC_NOT_FOUND;
    if (rc == GS_ESTATE || rc == GS_EUNSUPPORTED) return GS_RPC_FAILED_PRECONDITION; /* EUNSUPPORTED: MIG caps */
    return GS_RPC_INVALID_ARGUMENT;
}

int gs_dp_h_allocate(const struct gs_node_gpus *g, const struct gs_alloc_opts *o, const uint8_t *req,
                     size_t reqlen, uint8_t **out, size_t *len, char *msg, size_t msglen)
{
    V1beta1__AllocateRequest *r = v1beta1__allocate_request__unpack(NULL, reqlen, req);
    if (!r) {
        snprintf(msg, msglen, "malformed AllocateRequest");
        return GS_RPC_INVALID_ARGUMENT;
    }
    size_t n = r->n_container_requests;
    struct ctr_block *b = calloc(n ? n : 1, sizeof *b);
    V1beta1__ContainerAllocateResponse **bp = calloc(n ? n : 1, sizeof *bp);
    int rc = b && bp ? GS_RPC_OK : GS_RPC_INTERNAL;
    for (size_t i = 0; rc == GS_RPC_OK && i < n; i++) {
        const V1beta1__ContainerAllocateRequest *cr = r->container_requests[i];
        char why[256];
        int e = gs_alloc_container(g, o, (const char *const *)cr->devices_ids, cr->n_devices_ids, &b[i].a, why,
                                   sizeof why);
        if (e) {
            snprintf(msg, msglen, "container %zu: %s", i, why);
            rc = refusal_code(e);
            break;
        }
        fill_reply(&b[i]);
        bp[i] = &b[i].resp;
    }
    if (rc == GS_RPC_OK) {
        V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
        resp.n_container_responses = n;
        resp.container_responses = bp;
        rc = pack(&resp.base, out, len);
    }
    free(b), free(bp);
    v1beta1__allocate_request__free_unpacked(r, NULL);
    return rc;
}

int gs_dp_h_prestart(const uint8_t *req, size_t reqlen, uint8_t **out, size_t *len, char *msg, size_t msglen)
{
    V1beta1__PreStartContainerRequest *r = v1beta1__pre_start_container_request__unpack(NULL, reqlen, req);
    if (!r) {
        snprintf(msg, msglen, "malformed PreStartContainerRequest");
        return GS_RPC_INVALID_ARGUMENT;
    }
    v1beta1__pre_start_container_request__free_unpacked(r, NULL);
    V1beta1__PreStartContainerResponse resp = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
    return pack(&resp.base, out, len);
}
