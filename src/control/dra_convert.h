/*
 * dra_convert.h - resource.k8s.io served at v1, v1beta2 and v1beta1 over one
 * stored shape, as kube-apiserver does.
 *
 * Every DRA object is stored as resource.k8s.io/v1, whatever version it was
 * written in, so the scheduler, the agent and the DRA plugin decode one
 * shape. v1beta2 has v1's layout (only apiVersion differs); v1beta1 wraps a
 * ResourceSlice device's data in `basic` and puts a request's exact fields
 * (deviceClassName, selectors, allocationMode, count, adminAccess,
 * tolerations, capacity) directly on the request where v1 has `exactly`.
 * The API server calls gs_dra_to_storage on what a client writes (create and
 * update bodies, the result of a patch) and gs_dra_serve / gs_dra_text_for on
 * what it answers (get, list, watch, write replies), so a v1beta1 client sees
 * v1beta1 and a v1 client v1.
 */
#ifndef GS_CONTROL_DRA_CONVERT_H
#define GS_CONTROL_DRA_CONVERT_H

#include "control/resources.h"

#include <jansson.h>
#include <stdbool.h>

#define GS_DRA_GROUP "resource.k8s.io"
#define GS_DRA_STORAGE_VERSION "resource.k8s.io/v1"

/* Is res a resource.k8s.io resource (any version)? */
bool gs_dra_res(const struct gs_api_resource *res);
/* Rewrites obj (a DRA object in any served version, its apiVersion saying
 * which) in place into the stored v1 shape. Objects of other groups are left
 * alone. 0 or GS_ENOMEM. */
int gs_dra_to_storage(json_t *obj);
/* obj (stored, any version) as res's version serves it; steals obj and
 * returns a new reference (obj itself when nothing changes). NULL in, NULL out. */
json_t *gs_dra_serve(const struct gs_api_resource *res, json_t *obj);
/* The JSON text of a stored object as res's version serves it (malloc'd), or
 * NULL when the stored text can be sent as it is. */
char *gs_dra_text_for(const struct gs_api_resource *res, const char *stored);

/* The node a ResourceClaim is allocated on: the one name of
 * status.allocation.nodeSelector's matchFields metadata.name In [...] (what
 * the scheduler writes for node-local devices), else NULL. A node may read
 * only the claims allocated on it (auth.c). Borrowed from claim. */
const char *gs_dra_claim_node(const json_t *claim);

/* Table columns like kube's printers: ResourceSlice NAME NODE DRIVER POOL AGE,
 * ResourceClaim NAME STATE AGE. gs_dra_has_table says which resources have
 * them; the others get NAME AGE. */
bool gs_dra_has_table(const struct gs_api_resource *res);
json_t *gs_dra_table_columns(const struct gs_api_resource *res);
json_t *gs_dra_table_row(const struct gs_api_resource *res, const json_t *o, const char *name, const char *age);

#endif
