/*
 * fuzz_http_request.c - the API server's request layer on raw request
 * bytes, without a socket: the request line, the path (unescaped as
 * libmicrohttpd does) through the router of src/control/api_route.c, the
 * verb, query arguments (unescaped, '+' as space) into the selector
 * parsers and the pods/log query parser, the agent path built from what was
 * routed, the Accept header, and a Host header through the agent endpoint
 * check (src/core/endpoint.c).
 *
 * Invariants beyond "no crash, no leak, no sanitizer report": a routed
 * resource has a resource, and its namespace and name are single segments
 * of 1..253 bytes that are neither "." nor ".."; a parser that refuses says
 * why; an accepted endpoint holds nothing but scheme, host and port; a log
 * path stays under /logs/ with every name escaped.
 */
#include "control/api.h"
#include "control/api_route.h"
#include "control/apiserver_int.h"
#include "core/endpoint.h"

#include <microhttpd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KV 32

struct kv {
    char *k[MAX_KV], *v[MAX_KV];
    int n;
};

static const char *kv_get(const struct kv *a, const char *key, bool fold)
{
    for (int i = 0; i < a->n; i++)
        if (fold ? !strcasecmp(a->k[i], key) : !strcmp(a->k[i], key)) return a->v[i];
    return NULL;
}

static const char *arg_of(void *ctx, const char *key) { return kv_get(ctx, key, false); }

static void plus_to_space(char *s)
{
    for (; *s; s++)
        if (*s == '+') *s = ' ';
}

static void split_query(char *q, struct kv *args)
{
    for (char *save = NULL, *t = strtok_r(q, "&", &save); t && args->n < MAX_KV; t = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(t, '=');
        if (eq) *eq++ = 0;
        plus_to_space(t);
        MHD_http_unescape(t);
        if (eq) {
            plus_to_space(eq);
            MHD_http_unescape(eq);
        }
        args->k[args->n] = t;
        args->v[args->n++] = eq ? eq : "";
    }
}

static bool name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n >= 1 && n <= 253 && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static void check_route(const char *method, const char *path, const struct kv *args, const struct kv *hdrs)
{
    struct gs_route rt;
    gs__route_parse(path, &rt);
    if (rt.kind == GS_RT_RESOURCE) {
        if (!rt.res || !rt.sub) abort();
        if (rt.ns && !name_ok(rt.ns)) abort();
        if (rt.name && !name_ok(rt.name)) abort();
        if (rt.res->namespaced && rt.name && !rt.ns) abort();
    }
    if (rt.n > GS_ROUTE_MAX_SEGS) abort();
    const char *verb = gs__route_verb(method, rt.name != NULL, kv_get(args, "watch", false));
    if (verb && !strcmp(verb, "watch") && rt.name) abort();
    (void)gs__accept_table(kv_get(hdrs, "Accept", true));
    /* pods/log: the query, then the agent path built from the route */
    struct gs__log_query q;
    char why[768], apath[2048];
    if (gs__log_query_parse(arg_of, (void *)args, &q, why, sizeof why)) {
        if (!why[0]) abort();
    } else if (rt.kind == GS_RT_RESOURCE && rt.ns && rt.name) {
        const char *ctr = q.container ? q.container : "main";
        if (gs__log_agent_path(rt.ns, rt.name, ctr, &q, apath, sizeof apath) == 0) {
            if (strncmp(apath, "/logs/", 6) || strchr(apath, '#') || strchr(apath, ' ')) abort();
            const char *p = apath + 6;
            if (strchr(p, '/') != strrchr(p, '/') || !strchr(p, '/')) abort(); /* exactly ns/pod: names escaped */
        }
    }
}

static void check_selectors(const struct kv *args)
{
    static const char pod[] = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":"
                              "\"default\",\"labels\":{\"app\":\"web\"}},\"spec\":{\"nodeName\":\"n1\"},"
                              "\"status\":{\"phase\":\"Running\"}}";
    json_t *obj = json_loads(pod, 0, NULL);
    const char *why = NULL;
    const char *ls = kv_get(args, "labelSelector", false), *fs = kv_get(args, "fieldSelector", false);
    struct gs_selector sel;
    if (ls && gs__label_selector_parse(ls, &sel, &why) == 0) {
        gs__label_selector_matches(&sel, obj);
        gs_selector_free(&sel);
    } else if (ls && (!why || !*why)) {
        abort();
    }
    struct gs__field_sel f;
    if (fs && gs__field_selector_parse(fs, &f, &why) == 0) {
        gs__field_selector_matches(&f, obj);
        gs__field_selector_free(&f);
    } else if (fs && (!why || !*why)) {
        abort();
    }
    json_decref(obj);
}

static void check_endpoint(const char *host)
{
    if (!host) return;
    char ep[600], why[400];
    const char *forms[] = {"http://%s", "https://%s", "%s"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        snprintf(ep, sizeof ep, forms[i], host);
        if (gs_endpoint_check(ep, why, sizeof why) != 0) {
            if (!why[0]) abort();
            continue;
        }
        const char *rest = strstr(ep, "://");
        if (!rest || strncmp(ep, "http", 4)) abort();
        rest += 3;
        if (strpbrk(rest, "/?#@ \\%")) abort();
        const char *colon = strrchr(rest, ':');
        if (!colon || !colon[1]) abort();
        for (const char *d = colon + 1; *d; d++)
            if (*d < '0' || *d > '9') abort();
        long port = strtol(colon + 1, NULL, 10);
        if (port < 1 || port > 65535) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    /* Request line: METHOD SP TARGET SP VERSION, then header lines up to an empty one. */
    char *line_end = strchr(buf, '\n');
    char *rest = line_end ? line_end + 1 : buf + size;
    if (line_end) *line_end = 0;
    char *sp1 = strchr(buf, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp1 || !sp2) {
        free(buf);
        return 0;
    }
    *sp1 = 0;
    *sp2 = 0;
    char *method = buf, *target = sp1 + 1;
    struct kv args = {0}, hdrs = {0};
    for (char *save = NULL, *l = strtok_r(rest, "\n", &save); l && hdrs.n < MAX_KV; l = strtok_r(NULL, "\n", &save)) {
        l[strcspn(l, "\r")] = 0;
        if (!*l) break;
        char *colon = strchr(l, ':');
        if (!colon) continue;
        *colon++ = 0;
        while (*colon == ' ' || *colon == '\t') colon++;
        hdrs.k[hdrs.n] = l;
        hdrs.v[hdrs.n++] = colon;
    }
    char *query = strchr(target, '?');
    if (query) *query++ = 0;
    MHD_http_unescape(target);
    if (query) split_query(query, &args);
    check_route(method, target, &args, &hdrs);
    check_selectors(&args);
    check_endpoint(kv_get(&hdrs, "Host", true));
    free(buf);
    return 0;
}
