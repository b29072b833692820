/*
 * resources.h - the API resources the control plane serves, in one table.
 *
 * The server routes URLs with it (group, version, plural), answers the
 * discovery documents from it, and builds store keys from it; the client
 * uses the same table to turn a kind or a name typed on the command line
 * ("po", "pods", "podgroup") into a URL. One table keeps the two ends from
 * disagreeing about which kinds are namespaced.
 *
 * Store keys: "<id>/<namespace>/<name>" for namespaced kinds and
 * "<id>/<name>" for cluster-scoped ones, where id is the plural for the core
 * group ("pods") and "<plural>.<group>" otherwise ("podgroups.scheduling.x-k8s.io"),
 * so a key prefix selects a resource, or a resource in one namespace.
 *
 * Node heartbeats are coordination.k8s.io/v1 Leases named after the node in
 * the namespace GS_NODE_LEASE_NS, as kubelet writes them.
 */
#ifndef GS_CONTROL_RESOURCES_H
#define GS_CONTROL_RESOURCES_H

#include <stdbool.h>
#include <stddef.h>

struct gs_api_resource {
    const char *group;       /* "" for the core group */
    const char *version;     /* "v1" */
    const char *plural;      /* "pods" */
    const char *singular;    /* "pod" */
    const char *kind;        /* "Pod" */
    const char *short_names; /* "po" (comma separated), or NULL */
    bool namespaced;
    bool has_status;         /* a status subresource: main-resource writes keep status */
    const char *id;          /* store key prefix component: "pods", "podgroups.scheduling.x-k8s.io" */
};

#define GS_NODE_LEASE_NS "kube-node-lease"

/* Every served resource; *n gets the count. Static. */
const struct gs_api_resource *gs_api_resources(size_t *n);
/* Resource for (group, version, plural), or NULL. */
const struct gs_api_resource *gs_api_resource_find(const char *group, const char *version, const char *plural);
/* Resource for a kind and apiVersion ("scheduling.x-k8s.io/v1alpha1"; NULL: any version). */
const struct gs_api_resource *gs_api_resource_by_kind(const char *api_version, const char *kind);
/* Resource for a name a person types: plural, singular, short name or kind,
 * case-insensitive, optionally "<name>.<group>". NULL when unknown. */
const struct gs_api_resource *gs_api_resource_lookup(const char *name);
/* "v1" or "group/version". Writes into buf. */
const char *gs_api_resource_gv(const struct gs_api_resource *r, char *buf, size_t len);

/* Store key of an object ("pods/default/web"; ns ignored for cluster-scoped
 * kinds; name NULL gives the prefix "pods/default/" or "pods/"). Returns the
 * length written (snprintf), or a negative value when it does not fit. */
int gs_api_key(const struct gs_api_resource *r, const char *ns, const char *name, char *buf, size_t len);
/* URL path of a collection or an object: "/api/v1/namespaces/ns/pods[/name]". */
int gs_api_path(const struct gs_api_resource *r, const char *ns, const char *name, char *buf, size_t len);

#endif
