/*
 * auth.c - tokens file, bearer authentication, role rules, rate limits; see auth.h.
 */
#include "control/auth.h"

#include "core/codec.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- Parsing ---*/

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

/* Splits s on sep into a new array of new strings (empty items dropped). */
static int split(const char *s, char sep, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    char *copy = strdup(s);
    if (!copy) return GS_ENOMEM;
    int err = 0;
    for (char *save = NULL, *tok = strtok_r(copy, (char[]){sep, 0}, &save); tok && !err;
         tok = strtok_r(NULL, (char[]){sep, 0}, &save)) {
        tok = trim(tok);
        if (!*tok) continue;
        char **nv = realloc(*out, (*n + 1) * sizeof *nv);
        if (!nv || !(nv[*n] = strdup(tok))) {
            if (nv) *out = nv;
            err = GS_ENOMEM;
            break;
        }
        *out = nv;
        (*n)++;
    }
    free(copy);
    return err;
}

static void principal_free(struct gs_principal *p)
{
    free(p->token);
    free(p->user);
    for (size_t i = 0; i < p->ngroups; i++) free(p->groups[i]);
    free(p->groups);
    for (size_t i = 0; i < p->nnamespaces; i++) free(p->namespaces[i]);
    free(p->namespaces);
}

static int parse_role(const char *s, enum gs_role *r)
{
    if (!*s || !strcmp(s, "tenant")) *r = GS_ROLE_TENANT;
    else if (!strcmp(s, "admin")) *r = GS_ROLE_ADMIN;
    else if (!strcmp(s, "node")) *r = GS_ROLE_NODE;
    else if (!strcmp(s, "scheduler")) *r = GS_ROLE_SCHEDULER;
    else return GS_EINVAL;
    return 0;
}

/* One CSV line (5 fields; quotes not needed since lists use ';'). */
static int parse_line(char *line, int lineno, struct gs_principal *p, struct gs_diags *d)
{
    char *f[5] = {0};
    int nf = 0;
    for (char *s = line; nf < 5; nf++) {
        f[nf] = s;
        char *c = strchr(s, ',');
        if (!c) { nf++; break; }
        *c = 0;
        s = c + 1;
    }
    char where[32];
    snprintf(where, sizeof where, "line %d", lineno);
    if (nf < 2) return gs_diags_add(d, where, "want token,user,groups,namespaces,role") ? GS_ENOMEM : GS_EINVAL;
    for (int i = 0; i < 5; i++) f[i] = f[i] ? trim(f[i]) : "";
    if (!*f[0] || !*f[1])
        return gs_diags_add(d, where, "token and user must not be empty") ? GS_ENOMEM : GS_EINVAL;
    if (parse_role(f[4], &p->role))
        return gs_diags_add(d, where, "unknown role \"%s\" (want admin, tenant, node or scheduler)", f[4]) ? GS_ENOMEM
                                                                                                : GS_EINVAL;
    if (!(p->token = strdup(f[0])) || !(p->user = strdup(f[1]))) return GS_ENOMEM;
    int err = split(f[2], ';', &p->groups, &p->ngroups);
    if (!err) err = split(f[3], ';', &p->namespaces, &p->nnamespaces);
    if (err) return err;
    if (p->role == GS_ROLE_TENANT && !p->nnamespaces)
        return gs_diags_add(d, where, "a tenant needs at least one namespace") ? GS_ENOMEM : GS_EINVAL;
    if (p->role == GS_ROLE_NODE)
        p->node = !strncmp(p->user, "system:node:", 12) ? p->user + 12 : p->user;
    return 0;
}

int gs_auth_parse(const char *text, struct gs_auth *a, struct gs_diags *d)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
    char *copy = strdup(text);
    if (!copy) return GS_ENOMEM;
    int err = 0, lineno = 0;
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *t = trim(line);
        if (!*t || *t == '#') continue;
        struct gs_principal p = {0};
        int e = parse_line(t, lineno, &p, d);
        struct gs_principal *nv = e ? NULL : realloc(a->v, (a->n + 1) * sizeof *nv);
        if (!e && !nv) e = GS_ENOMEM;
        if (e) {
            principal_free(&p);
            err = err == GS_ENOMEM ? err : e;
            if (e == GS_ENOMEM) break;
            continue;
        }
        a->v = nv;
        a->v[a->n++] = p;
    }
    free(copy);
    /* The node pointer refers into user, which moved with the struct only by value: fix it up. */
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i].role == GS_ROLE_NODE)
            a->v[i].node = !strncmp(a->v[i].user, "system:node:", 12) ? a->v[i].user + 12 : a->v[i].user;
    return err;
}

int gs_auth_load(const char *path, struct gs_auth *a, struct gs_diags *d)
{
    char *buf = NULL;
    size_t len = 0;
    int err = gs_read_file(path, &buf, &len);
    if (err) {
        memset(a, 0, sizeof *a);
        pthread_mutex_init(&a->mu, NULL);
        return err;
    }
    err = gs_auth_parse(buf, a, d);
    free(buf);
    return err;
}

void gs_auth_free(struct gs_auth *a)
{
    for (size_t i = 0; i < a->n; i++) principal_free(&a->v[i]);
    free(a->v);
    pthread_mutex_destroy(&a->mu);
    memset(a, 0, sizeof *a);
}

/*--- Authentication and rate limits ---*/

/* Equal strings, in time that depends on the lengths only. */
static bool secret_eq(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = la != lb;
    for (size_t i = 0; i < la && i < lb; i++) diff |= (unsigned char)(a[i] ^ b[i]);
    return !diff;
}

struct gs_principal *gs_auth_authenticate(struct gs_auth *a, const char *authorization)
{
    if (!authorization || strncasecmp(authorization, "Bearer ", 7)) return NULL;
    const char *tok = authorization + 7;
    while (*tok == ' ') tok++;
    struct gs_principal *found = NULL;
    for (size_t i = 0; i < a->n; i++)
        if (secret_eq(a->v[i].token, tok) && !found) found = &a->v[i];
    return found;
}

bool gs_auth_rate_take(struct gs_auth *a, struct gs_principal *p, int64_t now_ns)
{
    if (a->qps <= 0 || !p) return true;
    double burst = a->burst > 0 ? a->burst : a->qps;
    pthread_mutex_lock(&a->mu);
    if (p->last_ns == 0) p->bucket = burst;
    else p->bucket += (double)(now_ns - p->last_ns) / 1e9 * a->qps;
    if (p->bucket > burst) p->bucket = burst;
    p->last_ns = now_ns;
    bool ok = p->bucket >= 1;
    if (ok) p->bucket -= 1;
    pthread_mutex_unlock(&a->mu);
    return ok;
}

/*--- Authorisation ---*/

bool gs_auth_sees_namespace(const struct gs_principal *p, const char *ns)
{
    if (p->role != GS_ROLE_TENANT) return true;
    if (!ns) return false;
    for (size_t i = 0; i < p->nnamespaces; i++)
        if (!strcmp(p->namespaces[i], ns)) return true;
    return false;
}

/*
 * The authorization table. One row per resource and subresource; per role a
 * letter per verb, in the order of GS_AUTH_VERBS: A allowed, N narrowed (see
 * narrow() below), D denied, '-' not served for that verb. The same table is
 * printed in docs/CONTROL_PLANE.md ("Authorization table"), and test_auth_table
 * checks the two agree and walks every cell against a running server.
 */
static const struct gs_auth_rule rules[] = {
    /* resource                 sub        admin      tenant     node       scheduler */
    {"pods",                   "",        "AAAAAAA", "NNNNNNN", "NNNDDDN", "AAADDDA"},
    {"pods",                   "status",  "A---AA-", "N---DD-", "N---NN-", "A---AA-"},
    {"pods",                   "binding", "---A---", "---D---", "---D---", "---A---"},
    {"pods",                   "log",     "A------", "N------", "N------", "D------"},
    {"pods",                   "explain", "A------", "N------", "D------", "D------"},
    {"pods",                   "eviction","---A---", "---N---", "---D---", "---D---"},
    {"nodes",                  "",        "AAAAAAA", "AAADDDD", "AAANNND", "AAADDDD"},
    {"nodes",                  "status",  "A---AA-", "A---DD-", "A---NN-", "A---DD-"},
    {"namespaces",             "",        "AAAAAAA", "AAADDDD", "AAADDDD", "AAADDDD"},
    {"events",                 "",        "AAAAAAA", "NNNNNNN", "AAANNND", "ADDAAAD"},
    {"podgroups",              "",        "AAAAAAA", "NNNNNNN", "AAADDDD", "AAADDDD"},
    {"podgroups",              "status",  "A---AA-", "N---DD-", "A---DD-", "A---AA-"},
    {"queues",                 "",        "AAAAAAA", "AAADDDD", "AAADDDD", "AAADDDD"},
    {"queues",                 "status",  "A---AA-", "A---DD-", "A---DD-", "A---AA-"},
    {"clusterqueues",          "",        "AAAAAAA", "AAADDDD", "AAADDDD", "AAADDDD"},
    {"clusterqueues",          "status",  "A---AA-", "A---DD-", "A---DD-", "A---AA-"},
    {"localqueues",            "",        "AAAAAAA", "NNNNNNN", "AAADDDD", "AAADDDD"},
    {"localqueues",            "status",  "A---AA-", "N---DD-", "A---DD-", "A---AA-"},
    {"resourceflavors",        "",        "AAAAAAA", "AAADDDD", "AAADDDD", "AAADDDD"},
    {"noderesourcetopologies", "",        "AAAAAAA", "AAADDDD", "AAANNND", "AAADDDD"},
    {"clusterpolicies",        "",        "AAAAAAA", "AAADDDD", "AAADDDD", "DDDDDDD"},
    {"clusterpolicies",        "status",  "A---AA-", "A---DD-", "A---DD-", "D---DD-"},
    {"resourceclaims",         "",        "AAAAAAA", "NNNNNNN", "NNNDDDD", "AAAAAAA"},
    {"resourceclaims",         "status",  "A---AA-", "N---DD-", "N---DD-", "A---AA-"},
    {"resourceclaimtemplates", "",        "AAAAAAA", "NNNNNNN", "AAADDDD", "AAADDDD"},
    {"deviceclasses",          "",        "AAAAAAA", "AAADDDD", "AAADDDD", "AAADDDD"},
    {"resourceslices",         "",        "AAAAAAA", "AAADDDD", "AAANNNN", "AAADDDD"},
    {"devicetaintrules",       "",        "AAAAAAA", "AAADDDD", "AAADDDD", "AAADDDD"},
    {"devicetaintrules",       "status",  "A---AA-", "A---DD-", "A---DD-", "A---DD-"},
    {"gpuclusters",            "",        "AAAAAAA", "AAADDDD", "AAADDDD", "DDDDDDD"},
    {"gpuclusters",            "status",  "A---AA-", "A---DD-", "A---DD-", "D---DD-"},
    {"leases",                 "",        "AAAAAAA", "NNNNNNN", "AAANNND", "NDDNNDD"},
    {"priorityclasses",        "",        "AAAAAAA", "AAADDDD", "AAADDDD", "AAADDDD"},
    {"runtimeclasses",         "",        "AAAAAAA", "AAADDDD", "AAADDDD", "AAADDDD"},
    {"poddisruptionbudgets",   "",        "AAAAAAA", "NNNNNNN", "AAADDDD", "AAADDDD"},
    {"poddisruptionbudgets",   "status",  "A---AA-", "N---DD-", "A---DD-", "A---DD-"},
    {"workloads",              "",        "AAAAAAA", "NNNNNNN", "AAADDDD", "AAADDDD"},
    {"workloadpriorityclasses", "",       "AAAAAAA", "AAADDDD", "AAADDDD", "AAADDDD"},
    {"selfsubjectreviews",     "",        "---A---", "---A---", "---A---", "---A---"},
    {"queuehistories",         "",        "AA-----", "NN-----", "DD-----", "DD-----"},
    /* not an API resource: the console's simulator reports, /ui/reports (ui.c) */
    {"reports",                "",        "AA-----", "AA-----", "DD-----", "DD-----"},
    /* not a stored resource: the console's GPU grid, /apis/ui.gpusched.io/v1/gpugrid (api_ui.c) */
    {"gpugrid",                "",        "-A-----", "-N-----", "-D-----", "-D-----"},
};
#define NRULES (sizeof rules / sizeof rules[0])

const struct gs_auth_rule *gs_auth_table(size_t *n)
{
    *n = NRULES;
    return rules;
}

static const char *const verbs[] = {"get", "list", "watch", "create", "update", "patch", "delete"};

int gs_auth_verb_index(const char *verb)
{
    for (int i = 0; i < 7; i++)
        if (!strcmp(verbs[i], verb)) return i;
    return -1;
}

const struct gs_auth_rule *gs_auth_rule_find(const char *resource, const char *sub)
{
    for (size_t i = 0; i < NRULES; i++)
        if (!strcmp(rules[i].resource, resource) && !strcmp(rules[i].sub, sub)) return &rules[i];
    return NULL;
}

static enum gs_authz deny(const char **why, const char *text)
{
    *why = text;
    return GS_AUTHZ_DENY;
}

/* Why a D cell refuses, in words the caller can act on. */
static enum gs_authz denied(const struct gs_principal *p, const struct gs_authz_req *r, const char **why)
{
    const char *sub = r->subresource;
    if (!strcmp(r->res->plural, "reports")) return deny(why, "simulator reports are read by admins and tenants only");
    if (!strcmp(r->res->plural, "gpugrid")) return deny(why, "the console's GPU grid is read by admins and tenants only");
    if (!strcmp(sub, "binding")) return deny(why, "only the scheduler binds pods");
    if (!strcmp(sub, "status"))
        return deny(why, !strcmp(r->res->plural, "pods") ? "a pod's status is written only by its node and the scheduler"
                                                         : "this status is written only by the control plane");
    if (p->role == GS_ROLE_TENANT)
        return deny(why, !r->res->namespaced ? "tenants may only read cluster-scoped resources"
                                             : "not allowed for tenants");
    if (p->role == GS_ROLE_SCHEDULER) /* it reads, binds, writes statuses and Events, deletes victims */
        return deny(why, !strcmp(r->res->plural, "pods") ? "the scheduler may only bind, write the status of and "
                                                           "delete (preempt) pods"
                                                         : "not needed by the scheduler");
    if (!strcmp(r->res->plural, "pods"))
        return deny(why, !strcmp(r->verb, "create") ? "nodes may not create pods" : "nodes may only write a pod's status");
    if (!strcmp(r->verb, "delete")) return deny(why, "nodes may not delete this resource");
    if (!strcmp(r->res->plural, "events")) return deny(why, "nodes may not delete events");
    return deny(why, "nodes may not write this resource");
}

/* N for a tenant: its namespaces; lists and watches across namespaces are
 * narrowed to them by the handler. */
static enum gs_authz tenant_narrow(const struct gs_principal *p, const struct gs_authz_req *r, const char **why)
{
    if (!r->ns)
        return !strcmp(r->verb, "list") || !strcmp(r->verb, "watch") ? GS_AUTHZ_ALLOW
                                                                      : deny(why, "a namespace is required");
    return gs_auth_sees_namespace(p, r->ns) ? GS_AUTHZ_ALLOW : deny(why, "namespace not allowed for this user");
}

/* N for a node: what belongs to it. Pods: those bound to it (the handler
 * checks the stored object). Its Node, its NodeResourceTopology, its Lease
 * (in kube-node-lease): by name; a create is checked against the name in the
 * body. ResourceSlices: those whose spec.nodeName is its node (a create and
 * an update are checked against the body too, api_fields.c). ResourceClaims:
 * those allocated on it (status.allocation.nodeSelector, gs_dra_claim_node),
 * read only. Events: a create about its Node or a pod bound to it (checked
 * against the body, api_fields.c). */
static enum gs_authz node_narrow(const struct gs_principal *p, const struct gs_authz_req *r, const char **why)
{
    const char *res = r->res->plural;
    if (!strcmp(res, "pods")) return GS_AUTHZ_IF_BOUND;
    if (!strcmp(res, "events")) return GS_AUTHZ_IF_NAMED;
    if (!strcmp(res, "leases") && (!r->ns || strcmp(r->ns, GS_NODE_LEASE_NS)))
        return deny(why, "a node may only write its lease in the namespace " GS_NODE_LEASE_NS);
    if (!strcmp(res, "resourceclaims")) return GS_AUTHZ_IF_BOUND; /* reads: the claims allocated on it */
    /* ResourceSlices: those whose spec.nodeName is its node (the body's on create, the stored one's after) */
    if (!strcmp(res, "resourceslices")) return !strcmp(r->verb, "create") ? GS_AUTHZ_IF_NAMED : GS_AUTHZ_IF_BOUND;
    if (!strcmp(r->verb, "create")) return GS_AUTHZ_IF_NAMED; /* the name is in the body */
    if (r->name && !strcmp(r->name, p->node)) return GS_AUTHZ_ALLOW;
    return deny(why, !strcmp(res, "nodes") ? "a node may only write its own Node object"
                     : !strcmp(res, "leases") ? "a node may only write its own lease"
                                              : "a node may only write the object named after it");
}

/* N for the scheduler: its leader-election Lease, in GS_SCHEDULER_LEASE_NS only. */
static enum gs_authz scheduler_narrow(const struct gs_authz_req *r, const char **why)
{
    if (!strcmp(r->res->plural, "leases") && r->ns && !strcmp(r->ns, GS_SCHEDULER_LEASE_NS)) return GS_AUTHZ_ALLOW;
    return deny(why, "the scheduler may only write its lease in the namespace " GS_SCHEDULER_LEASE_NS);
}

enum gs_authz gs_authorize(const struct gs_principal *p, const struct gs_authz_req *r, const char **why)
{
    *why = "";
    if (!p) return deny(why, "no user");
    const struct gs_auth_rule *row = gs_auth_rule_find(r->res->plural, r->subresource);
    int v = gs_auth_verb_index(r->verb);
    if (v < 0) return deny(why, "unknown verb");
    if (!row) /* no such subresource: the handler answers 404 to whoever may reach the resource */
        return p->role == GS_ROLE_ADMIN ? GS_AUTHZ_ALLOW : deny(why, "not in the authorization table");
    const char *cells = p->role == GS_ROLE_ADMIN      ? row->admin
                        : p->role == GS_ROLE_TENANT   ? row->tenant
                        : p->role == GS_ROLE_SCHEDULER ? row->scheduler
                                                       : row->node;
    if (!cells) cells = "DDDDDDD"; /* a row without this role's column grants it nothing */
    switch (cells[v]) {
    case 'A': return GS_AUTHZ_ALLOW;
    case 'N':
        if (p->role == GS_ROLE_SCHEDULER) return scheduler_narrow(r, why);
        return p->role == GS_ROLE_TENANT ? tenant_narrow(p, r, why) : node_narrow(p, r, why);
    case '-': return deny(why, "this verb is not served here");
    default: return denied(p, r, why);
    }
}
