/*
 * msgs.h - the DRA plugin's protobuf messages <-> JSON (internal header of
 * src/node/draplugin/). Both sides of the API work on JSON shapes and only
 * these functions touch protobuf-c, so the long generated names stay here.
 * The v1 messages serve v1beta1 as well: the two are the same on the wire
 * (v1's share_id is field 5, never set by us, ignored by v1beta1 readers).
 *
 * Shapes: claims [{namespace, uid, name}]; a prepare answer {uid: {devices:
 * [{requests: [], pool, device, cdi: []}], error}}; an unprepare answer
 * {uid: {error}}; health [{pool, device, healthy, message, updated}].
 */
#ifndef GS_NODE_DRAPLUGIN_MSGS_H
#define GS_NODE_DRAPLUGIN_MSGS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* A Node(Un)PrepareResourcesRequest (same layout) -> claims. 0 or GS_EPARSE. */
int gs__drap_claims_decode(const uint8_t *buf, size_t len, json_t **claims);
/* claims -> a packed request (*buf malloc'd). 0 or GS_ENOMEM. */
int gs__drap_claims_pack(const json_t *claims, uint8_t **buf, size_t *len);
int gs__drap_prepare_pack(const json_t *answer, uint8_t **buf, size_t *len);
int gs__drap_unprepare_pack(const json_t *answer, uint8_t **buf, size_t *len);
int gs__drap_health_pack(const json_t *health, uint8_t **buf, size_t *len);
/* Registration. */
int gs__drap_info_pack(const char *driver, const char *endpoint, uint8_t **buf, size_t *len);
/* PluginInfo -> {type, name, endpoint, versions: []}. 0 or GS_EPARSE. */
int gs__drap_info_decode(const uint8_t *buf, size_t len, json_t **info);
int gs__drap_status_pack(int registered, const char *error, uint8_t **buf, size_t *len);
/* RegistrationStatus: 0 with *registered and error (copied into err). */
int gs__drap_status_decode(const uint8_t *buf, size_t len, int *registered, char *err, size_t errlen);

#endif
