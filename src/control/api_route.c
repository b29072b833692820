/*
 * api_route.c - request routing without a connection; see api_route.h.
 *
 * Kubernetes paths: /api/v1/[namespaces/NS/]PLURAL[/NAME[/SUB]] for the
 * core group, /apis/GROUP/VERSION/... for the others. Segments are split
 * on '/', so "a//b" is "a/b" as kube-apiserver's router sees it; "." and
 * ".." and names longer than 253 are refused, so no key built from a
 * route can step outside its prefix in the store.
 */
#include "control/api_route.h"

#include <stdio.h>
#include <string.h>

static bool segment_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= 253 && strcmp(s, ".") && strcmp(s, "..");
}

/* /api/v1/... or /apis/g/v/...: fills res, ns, name, sub; false when no such resource. */
static bool route_resource(struct gs_route *rt)
{
    char **seg = rt->seg;
    int n = rt->n;
    int base = !strcmp(seg[0], "api") ? 2 : 3;
    if (n <= base) return false;
    const char *group = base == 2 ? "" : seg[1], *version = seg[base - 1];
    char **rest = seg + base;
    int nr = n - base;
    if (nr >= 3 && !strcmp(rest[0], "namespaces")) {
        rt->ns = rest[1];
        rest += 2;
        nr -= 2;
    }
    if (nr > 3) return false;
    rt->res = gs_api_resource_find(group, version, rest[0]);
    if (!rt->res || (rt->ns && !rt->res->namespaced)) return false;
    rt->name = nr > 1 ? rest[1] : NULL;
    rt->sub = nr > 2 ? rest[2] : "";
    if (rt->name && rt->res->namespaced && !rt->ns) return false;
    if ((rt->ns && !segment_ok(rt->ns)) || (rt->name && !segment_ok(rt->name))) return false;
    return true;
}

void gs__route_parse(const char *url, struct gs_route *rt)
{
    memset(rt, 0, sizeof *rt);
    rt->sub = "";
    rt->kind = GS_RT_NOT_FOUND;
    if (!url) return;
    if (!strcmp(url, "/healthz") || !strcmp(url, "/livez") || !strcmp(url, "/readyz")) {
        rt->kind = GS_RT_HEALTH;
        return;
    }
    if (!strcmp(url, "/metrics")) {
        rt->kind = GS_RT_METRICS;
        return;
    }
    if (!strcmp(url, "/openapi/v2")) {
        rt->kind = GS_RT_OPENAPI;
        return;
    }
    if (snprintf(rt->path, sizeof rt->path, "%s", url) >= (int)sizeof rt->path) {
        rt->kind = GS_RT_TOO_LONG;
        return;
    }
    for (char *save = NULL, *t = strtok_r(rt->path, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (rt->n == GS_ROUTE_MAX_SEGS) return; /* not found */
        rt->seg[rt->n++] = t;
    }
    if (rt->n == 0) {
        rt->kind = GS_RT_ROOT;
        return;
    }
    char **seg = rt->seg;
    int n = rt->n;
    bool api = !strcmp(seg[0], "api") && (n == 1 || !strcmp(seg[1], "v1"));
    bool apis = !strcmp(seg[0], "apis");
    if (!strcmp(seg[0], "version") || (api && n <= 2) || (apis && n <= 3)) rt->kind = GS_RT_DISCOVERY;
    else if ((api || apis) && route_resource(rt)) rt->kind = GS_RT_RESOURCE;
    /* else not found; res/ns/name keep what was recognised, for the 404's details */
}

const char *gs__route_verb(const char *method, bool named, const char *watch)
{
    if (!method) return NULL;
    if (!strcmp(method, "GET")) {
        if (!named && watch && (!strcmp(watch, "true") || !strcmp(watch, "1"))) return "watch";
        return named ? "get" : "list";
    }
    if (!strcmp(method, "POST")) return "create";
    if (!strcmp(method, "PUT")) return "update";
    if (!strcmp(method, "PATCH")) return "patch";
    if (!strcmp(method, "DELETE")) return "delete";
    return NULL;
}

bool gs__accept_table(const char *accept)
{
    return accept && strstr(accept, "as=Table");
}
