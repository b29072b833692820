/*
 * fuzz_deviceplugin_msgs.c - every device plugin API message we decode, from
 * either side, with the handling that follows.
 *
 * The first byte picks the message; the rest is its protobuf encoding:
 *   0 AllocateRequest              -> the plugin's Allocate handler
 *   1 PreferredAllocationRequest   -> the plugin's GetPreferredAllocation handler
 *   2 PreStartContainerRequest     -> the plugin's PreStartContainer handler
 *   3 RegisterRequest              -> the device manager's parser
 *   4 ListAndWatchResponse         -> the device manager's parser
 *   5 AllocateResponse             -> the device manager's parser
 *   6 PreferredAllocationResponse  -> the device manager's parser
 *   7 the plugin handlers with time-sliced replicas (first byte 7 + an AllocateRequest)
 * Invariants: no crash or leak; a successful answer decodes back as the
 * message it claims to be, with one entry per container asked about.
 */
#include "deviceplugin/v1beta1/api.pb-c.h"
#include "node/devicemanager.h"
#include "node/deviceplugin/handlers.h"
#include "node/deviceplugin/rpc.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_allocate(const struct gs_node_gpus *g, const uint8_t *p, size_t n)
{
    uint8_t *out = NULL;
    size_t len = 0;
    char msg[256];
    struct gs_alloc_opts o = {.strategy = GS_DLS_ENVVAR | GS_DLS_CDI_ANNOTATIONS | GS_DLS_CDI_CRI};
    if (gs_dp_h_allocate(g, &o, p, n, &out, &len, msg, sizeof msg) == GS_RPC_OK) {
        V1beta1__AllocateRequest *req = v1beta1__allocate_request__unpack(NULL, n, p);
        V1beta1__AllocateResponse *r = v1beta1__allocate_response__unpack(NULL, len, out);
        if (!req || !r || r->n_container_responses != req->n_container_requests) abort();
        v1beta1__allocate_response__free_unpacked(r, NULL);
        v1beta1__allocate_request__free_unpacked(req, NULL);
    }
    free(out);
}

static void check_preferred(const struct gs_node_gpus *g, const uint8_t *p, size_t n)
{
    uint8_t *out = NULL;
    size_t len = 0;
    char msg[256];
    if (gs_dp_h_preferred(g, p, n, &out, &len, msg, sizeof msg) == GS_RPC_OK) {
        V1beta1__PreferredAllocationResponse *r = v1beta1__preferred_allocation_response__unpack(NULL, len, out);
        if (!r) abort();
        v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static struct gs_node_gpus g, rep;
    if (!g.n) {
        gs_node_gpus_mock(&g, 8, 2, 4, 1);
        gs_node_gpus_set_health(&g, 3, false);
        gs_node_gpus_mock(&rep, 4, 1, 2, 4);
    }
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    uint8_t *out = NULL;
    size_t len = 0;
    char msg[256], a[64], b[128], c[128];
    json_t *v = NULL;
    switch (data[0] % 8) {
    case 0: check_allocate(&g, p, n); break;
    case 1: check_preferred(&g, p, n); break;
    case 2:
        gs_dp_h_prestart(p, n, &out, &len, msg, sizeof msg);
        break;
    case 3: gs_dm_parse_register(p, n, a, sizeof a, b, sizeof b, c, sizeof c); break;
    case 4: v = gs_dm_parse_list(p, n); break;
    case 5: v = gs_dm_parse_allocate(p, n); break;
    case 6: v = gs_dm_parse_preferred(p, n); break;
    case 7:
        check_allocate(&rep, p, n);
        check_preferred(&rep, p, n);
        break;
    }
    free(out);
    json_decref(v);
    return 0;
}
