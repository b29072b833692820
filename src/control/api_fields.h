/*
 * api_fields.h - who may write which field of an object, and the namespace
 * rules of writes (api_fields.c, namespaces.c). Internal to src/control.
 *
 * The role table (auth.c) says who may call a verb on a resource; these
 * checks look inside the body: a tenant may create pods but not name their
 * node or devices, a pod's spec is immutable after create as in Kubernetes,
 * priorities come only from PriorityClasses, and a node token's creates must
 * be about its own node. They apply to API requests only: the in-server
 * scheduler, admission and node lifecycle write the store directly.
 */
#ifndef GS_CONTROL_API_FIELDS_H
#define GS_CONTROL_API_FIELDS_H

#include "control/apiserver_int.h"

/* A create's body after identity and name are settled: 0, or the request was
 * answered (403/404/422) and the caller stops. May rewrite obj (pod status
 * reset, spec.priority and spec.preemptionPolicy resolved from the class). */
int gs__fields_create(struct gs__req *r, json_t *obj);
/* ClusterPolicy or GPUCluster, not both (api_gpumodel.c): GS_ECONFLICT when it answered 409. */
int gs__gpu_model_check(struct gs__req *r);

/* An update or patch of the main resource from cur to next (inside the
 * store's read-modify-write, so no store reads): each refused change is
 * added to d with its field path, as a 422. A pod's priority fields left out
 * of next keep their stored values (what defaulting does in Kubernetes). */
void gs__fields_update(const struct gs__req *r, const json_t *cur, json_t *next, struct gs_diags *d);

/* Before a node's update or patch of an Event: 0, or answered 403 because
 * the stored Event is not about its Node or a pod bound to it (the agent
 * aggregates its own Events by patching them). */
int gs__fields_node_event_write(struct gs__req *r);

/* The namespace cache of api_fields.c: seen Active in the last second? */
bool gs__fields_ns_cached(struct gs__req *r, const char *ns);
/* Records ns as Active (active) or drops it (being deleted). */
void gs__fields_ns_note(struct gs__req *r, const char *ns, bool active);

/*--- Namespaces (namespaces.c) ---*/

/* Does r->ns exist and accept new objects? 0, or answered: 404 NotFound
 * `namespaces "x" not found`, 403 Forbidden while it is being terminated. */
int gs__namespace_admits(struct gs__req *r);
/* DELETE of a Namespace: Terminating, then emptied and removed by the
 * namespace controller; the built-in namespaces are refused. */
enum MHD_Result gs__namespace_delete(struct gs__req *r);

#endif
