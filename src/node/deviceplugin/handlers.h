/*
 * handlers.h - the device plugin's answers to each v1beta1.DevicePlugin
 * request, as functions from packed request bytes to packed reply bytes.
 *
 * Kept apart from the gRPC plumbing (server.c) so that unit tests and the
 * fuzz target drive exactly the code kubelet's bytes reach: protobuf-c
 * unpacking of untrusted input, then our handling.
 *
 * Each returns a gRPC status code (GS_RPC_*, rpc.h); on GS_RPC_OK *out is a
 * malloc'd packed reply (caller frees), otherwise msg says why.
 */
#ifndef GS_NODE_DEVICEPLUGIN_HANDLERS_H
#define GS_NODE_DEVICEPLUGIN_HANDLERS_H

#include "node/allocate.h"
#include "node/gpus.h"

#include <stddef.h>
#include <stdint.h>

#define GS_DP_API_VERSION "v1beta1"
#define GS_DP_HEALTHY "Healthy"
#define GS_DP_UNHEALTHY "Unhealthy"

/* DevicePluginOptions: no PreStartContainer, GetPreferredAllocation available. */
int gs_dp_h_options(uint8_t **out, size_t *len);
/* ListAndWatchResponse with every device ID, its health and NUMA node. */
int gs_dp_h_list(const struct gs_node_gpus *g, uint8_t **out, size_t *len);
int gs_dp_h_preferred(const struct gs_node_gpus *g, const uint8_t *req, size_t reqlen, uint8_t **out, size_t *len,
                      char *msg, size_t msglen);
int gs_dp_h_allocate(const struct gs_node_gpus *g, const struct gs_alloc_opts *o, const uint8_t *req,
                     size_t reqlen, uint8_t **out, size_t *len, char *msg, size_t msglen);
int gs_dp_h_prestart(const uint8_t *req, size_t reqlen, uint8_t **out, size_t *len, char *msg, size_t msglen);

#endif
