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
        return gs_diags_add(d, where, "unknown role \"%s\" (want admin, tenant or node)", f[4]) ? GS_ENOMEM
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

static bool is_read(const char *verb)
{
    return !strcmp(verb, "get") || !strcmp(verb, "list") || !strcmp(verb, "watch");
}

static enum gs_authz deny(const char **why, const char *text)
{
    *why = text;
    return GS_AUTHZ_DENY;
}

static enum gs_authz tenant_rule(const struct gs_principal *p, const struct gs_authz_req *r, const char **why)
{
    if (!r->res->namespaced)
        return is_read(r->verb) ? GS_AUTHZ_ALLOW : deny(why, "tenants may only read cluster-scoped resources");
    if (!strcmp(r->subresource, "binding")) return deny(why, "only the scheduler binds pods");
    if (!r->ns) /* all-namespaces lists are narrowed to the tenant's namespaces */
        return !strcmp(r->verb, "list") || !strcmp(r->verb, "watch") ? GS_AUTHZ_ALLOW
                                                                      : deny(why, "a namespace is required");
    return gs_auth_sees_namespace(p, r->ns) ? GS_AUTHZ_ALLOW : deny(why, "namespace not allowed for this user");
}

static enum gs_authz node_rule(const struct gs_principal *p, const struct gs_authz_req *r, const char **why)
{
    const char *res = r->res->plural;
    bool core = !r->res->group[0];
    if (core && !strcmp(res, "nodes")) {
        if (is_read(r->verb)) return GS_AUTHZ_ALLOW;
        if (!strcmp(r->verb, "delete")) return deny(why, "nodes may not delete Node objects");
        if (r->name && !strcmp(r->name, p->node)) return GS_AUTHZ_ALLOW;
        return deny(why, "a node may only write its own Node object");
    }
    if (core && !strcmp(res, "pods")) {
        if (!strcmp(r->subresource, "binding")) return deny(why, "nodes may not bind pods");
        if (!strcmp(r->verb, "create")) return deny(why, "nodes may not create pods");
        if (!r->name) return is_read(r->verb) ? GS_AUTHZ_IF_BOUND : deny(why, "not allowed on pod collections");
        if (!strcmp(r->verb, "update") || !strcmp(r->verb, "patch"))
            return !strcmp(r->subresource, "status") ? GS_AUTHZ_IF_BOUND
                                                     : deny(why, "nodes may only write a pod's status");
        return GS_AUTHZ_IF_BOUND;
    }
    if (core && !strcmp(res, "events")) return GS_AUTHZ_ALLOW;
    if (!strcmp(r->res->group, "coordination.k8s.io") && !strcmp(res, "leases") && !is_read(r->verb)) {
        /* The node heartbeat: its own Lease, in the node lease namespace. */
        if (!r->ns || strcmp(r->ns, GS_NODE_LEASE_NS))
            return deny(why, "a node may only write its lease in the namespace " GS_NODE_LEASE_NS);
        if (!strcmp(r->verb, "delete")) return deny(why, "nodes may not delete leases");
        if (!strcmp(r->verb, "create")) return GS_AUTHZ_IF_NAMED; /* the name is in the body */
        if (r->name && !strcmp(r->name, p->node)) return GS_AUTHZ_ALLOW;
        return deny(why, "a node may only write its own lease");
    }
    if (is_read(r->verb)) return GS_AUTHZ_ALLOW;
    return deny(why, "nodes may not write this resource");
}

enum gs_authz gs_authorize(const struct gs_principal *p, const struct gs_authz_req *r, const char **why)
{
    *why = "";
    if (!p) return deny(why, "no user");
    switch (p->role) {
    case GS_ROLE_ADMIN: return GS_AUTHZ_ALLOW;
    case GS_ROLE_TENANT: return tenant_rule(p, r, why);
    case GS_ROLE_NODE: return node_rule(p, r, why);
    }
    return deny(why, "unknown role");
}
