/*
 * api_route.h - the API server's request routing as pure functions: URL
 * path -> what answers it (health, discovery, a resource with namespace,
 * name and subresource), method -> verb, Accept -> Table. apiserver.c calls
 * them on each request; tests/fuzz/fuzz_http_request.c drives them with
 * raw request bytes, without a socket.
 */
#ifndef GS_CONTROL_API_ROUTE_H
#define GS_CONTROL_API_ROUTE_H

#include "control/resources.h"

#include <stdbool.h>

#define GS_ROUTE_MAX_SEGS 12

enum gs_route_kind {
    GS_RT_NOT_FOUND, /* 404 */
    GS_RT_TOO_LONG,  /* 414 */
    GS_RT_HEALTH,    /* /healthz, /livez, /readyz */
    GS_RT_METRICS,   /* /metrics */
    GS_RT_OPENAPI,   /* /openapi/v2 */
    GS_RT_ROOT,      /* / */
    GS_RT_DISCOVERY, /* /version, /api, /api/v1, /apis, /apis/G, /apis/G/V: seg, n */
    GS_RT_RESOURCE,  /* res, ns, name, sub */
};

struct gs_route {
    enum gs_route_kind kind;
    char path[2048];                  /* the URL, split in place */
    char *seg[GS_ROUTE_MAX_SEGS];     /* into path */
    int n;
    const struct gs_api_resource *res;
    const char *ns, *name, *sub;      /* into path; sub "" when none, ns/name NULL when absent */
};

/* Routes url (the path, without the query). Never fails: an unknown path is GS_RT_NOT_FOUND. */
void gs__route_parse(const char *url, struct gs_route *rt);
/* "get", "list", "watch", "create", "update", "patch", "delete", or NULL
 * (405). watch: the ?watch= argument or NULL. */
const char *gs__route_verb(const char *method, bool named, const char *watch);
/* Does this Accept header ask for a Table (kubectl get)? */
bool gs__accept_table(const char *accept);

#endif
