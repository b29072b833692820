/*
 * auth.h - who is calling (bearer tokens) and what they may do.
 *
 * Tokens come from a CSV file, one principal a line:
 *
 *     token,user,groups,namespaces,role
 *     s3cr3t,alice,dev;ml,team-a;team-b,tenant
 *     n0de,system:node:gpu-1,,,node
 *     adm1n,admin,system:masters,,admin
 *
 * groups and namespaces are ';'-separated; '#' starts a comment line. Roles:
 *  - admin: everything;
 *  - tenant: namespaced resources in its namespaces (lists across
 *    namespaces are narrowed to them), read-only on cluster-scoped
 *    resources, never pods/binding nor a status subresource;
 *  - node: its own Node (it registers it) and its status, its own
 *    NodeResourceTopology and Lease, the pods bound to it (read, status,
 *    delete), events about itself and its pods; reads the rest;
 *  - scheduler: a standalone `gpusched scheduler` (tenant-free): reads what
 *    the scheduler follows, binds pods, writes pod, PodGroup and queue
 *    status, deletes pods (preemption), writes Events, and holds its Lease
 *    in GS_SCHEDULER_LEASE_NS; no pod create, no node writes, nothing else.
 * Every decision comes from one table (gs_auth_table), one row per resource
 * and subresource, printed in docs/CONTROL_PLANE.md. Narrowed cells that
 * depend on the stored object or the body answer GS_AUTHZ_IF_BOUND or
 * GS_AUTHZ_IF_NAMED and the API server finishes the check.
 *
 * Rate limit: one token bucket per principal (qps, burst), checked per request.
 */
#ifndef GS_CONTROL_AUTH_H
#define GS_CONTROL_AUTH_H

#include "control/resources.h"
#include "core/error.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

enum gs_role { GS_ROLE_ADMIN, GS_ROLE_TENANT, GS_ROLE_NODE, GS_ROLE_SCHEDULER };

/* The scheduler's identity (the token `gpusched server` writes into
 * scheduler.kubeconfig) and the one namespace where it may hold its
 * leader-election Lease. */
#define GS_SCHEDULER_USER "system:gpusched-scheduler"
#define GS_SCHEDULER_LEASE_NS "kube-system"

struct gs_principal {
    char *token;
    char *user;
    char **groups; size_t ngroups;
    char **namespaces; size_t nnamespaces;
    enum gs_role role;
    const char *node;  /* role node: the node's name (points into user) */
    double bucket;     /* rate limiter state, under gs_auth.mu */
    int64_t last_ns;
};

struct gs_auth {
    struct gs_principal *v;
    size_t n;
    double qps, burst;  /* qps <= 0: no rate limit */
    pthread_mutex_t mu;
};

/* Parses tokens text (see above) into a; problems (with "line N" paths) go to d.
 * 0, GS_EINVAL or GS_ENOMEM. a is initialised either way: free with gs_auth_free. */
int gs_auth_parse(const char *text, struct gs_auth *a, struct gs_diags *d);
/* Reads and parses a tokens file. GS_ENOENT when it does not exist. */
int gs_auth_load(const char *path, struct gs_auth *a, struct gs_diags *d);
void gs_auth_free(struct gs_auth *a);

/* Principal for an Authorization header value ("Bearer <token>"), or NULL.
 * Compares tokens in constant time per candidate. Borrowed from a. */
struct gs_principal *gs_auth_authenticate(struct gs_auth *a, const char *authorization);
/* Takes one request from the principal's bucket at now_ns (monotonic). false: over the limit. */
bool gs_auth_rate_take(struct gs_auth *a, struct gs_principal *p, int64_t now_ns);

enum gs_authz { GS_AUTHZ_DENY, GS_AUTHZ_ALLOW, GS_AUTHZ_IF_BOUND, GS_AUTHZ_IF_NAMED };

/* One request to authorise: verb is get|list|watch|create|update|patch|delete;
 * subresource "" or "status", "binding", "log"; ns NULL for cluster-scoped or
 * all-namespaces requests; name NULL for collections. */
struct gs_authz_req {
    const char *verb;
    const struct gs_api_resource *res;
    const char *subresource;
    const char *ns;
    const char *name;
};

/* The decision; *why (static text) says what was refused. GS_AUTHZ_IF_BOUND:
 * allowed only when the object's spec.nodeName is p->node. GS_AUTHZ_IF_NAMED:
 * a create allowed only when the new object belongs to p->node: named after
 * it (Node, Lease, NodeResourceTopology), or an Event about it or its pods. */
enum gs_authz gs_authorize(const struct gs_principal *p, const struct gs_authz_req *r, const char **why);
/* One row of the authorization table: per role one letter per verb, in the
 * order of GS_AUTH_VERBS: 'A' allowed, 'N' narrowed (tenant: its namespaces;
 * node: what belongs to it; scheduler: its Lease in GS_SCHEDULER_LEASE_NS),
 * 'D' denied (403), '-' not served. */
#define GS_AUTH_VERBS "get list watch create update patch delete"
struct gs_auth_rule {
    const char *resource; /* plural */
    const char *sub;      /* "" or the subresource */
    const char *admin, *tenant, *node;
    const char *scheduler; /* NULL: all denied */
};
/* The whole table (static); *n gets the row count. */
const struct gs_auth_rule *gs_auth_table(size_t *n);
/* The row of resource/sub, or NULL. */
const struct gs_auth_rule *gs_auth_rule_find(const char *resource, const char *sub);
/* 0..6 in GS_AUTH_VERBS order, -1 for another word. */
int gs_auth_verb_index(const char *verb);

/* May p see an object in namespace ns (list/watch narrowing)? */
bool gs_auth_sees_namespace(const struct gs_principal *p, const char *ns);

#endif
