/*
 * extender_parse.c - kube-scheduler's extender requests, read and checked;
 * see extender.h.
 *
 * The bodies are outside input (anyone who reaches the port may send one),
 * so every field is checked for presence and type before the extender looks
 * at it, and a refusal names the field, what was there and why:
 * "ExtenderArgs.NodeNames[2]: must be a string, got number". Go's
 * encoding/json matches keys without regard to case and the extender/v1
 * types carry no JSON tags, so a key is looked up exactly first and then
 * case-insensitively; the older lower-case spellings of the v1 legacy API
 * ("nodenames", "nodeToVictims") are read too. Nothing is copied: the
 * request keeps the parsed document and hands out pointers into it.
 */
#include "kube/extender.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const verb_names[GS_EXT_VERBS] = {
    [GS_EXT_FILTER] = "filter", [GS_EXT_PRIORITIZE] = "prioritize", [GS_EXT_PREEMPT] = "preempt", [GS_EXT_BIND] = "bind"};

const char *gs_ext_verb_name(enum gs_ext_verb v)
{
    return (int)v >= 0 && v < GS_EXT_VERBS ? verb_names[v] : "unknown";
}

int gs_ext_verb_parse(const char *name)
{
    for (int v = 0; v < GS_EXT_VERBS; v++)
        if (name && !strcmp(name, verb_names[v])) return v;
    return -1;
}

/*--- Helpers ---*/

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER:
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return GS_EINVAL;
}

/* obj[key] as Go would find it: the exact key, else any spelling of it
 * (or of alt) ignoring case. JSON null counts as absent, as for Go pointers. */
static json_t *field(const json_t *obj, const char *key, const char *alt)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)obj, k, x) {
            if (!strcasecmp(k, key) || (alt && !strcasecmp(k, alt))) {
                v = x;
                break;
            }
        }
    }
    return json_is_null(v) ? NULL : v;
}

/* A required non-empty string field. */
static int str_field(const json_t *obj, const char *type, const char *key, bool required, const char **out, char *err,
                     size_t len)
{
    *out = NULL;
    json_t *v = field(obj, key, NULL);
    if (!v) return required ? fail(err, len, "%s.%s: required", type, key) : 0;
    if (!json_is_string(v)) return fail(err, len, "%s.%s: must be a string, got %s", type, key, type_name(v));
    if (required && !json_string_length(v)) return fail(err, len, "%s.%s: required, got \"\"", type, key);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return fail(err, len, "%s.%s: contains a NUL character", type, key);
    *out = json_string_value(v);
    return 0;
}

/* The Pod every verb but bind carries: an object with metadata.name. */
static int pod_field(const json_t *doc, const char *type, json_t **out, char *err, size_t len)
{
    json_t *pod = field(doc, "Pod", NULL);
    if (!pod) return fail(err, len, "%s.Pod: required", type);
    if (!json_is_object(pod)) return fail(err, len, "%s.Pod: must be an object, got %s", type, type_name(pod));
    json_t *md = json_object_get(pod, "metadata");
    if (!json_is_object(md)) return fail(err, len, "%s.Pod.metadata: required (an object)", type);
    json_t *name = json_object_get(md, "name");
    if (!json_is_string(name) || !json_string_length(name))
        return fail(err, len, "%s.Pod.metadata.name: required (a non-empty string)", type);
    *out = pod;
    return 0;
}

/* A node name from the request: non-empty, no NUL, of a sane length. */
static int check_name(const json_t *v, const char *what, char *err, size_t len)
{
    if (!json_is_string(v)) return fail(err, len, "%s: must be a string, got %s", what, type_name(v));
    size_t n = json_string_length(v);
    if (!n) return fail(err, len, "%s: must not be empty", what);
    if (n > 253) return fail(err, len, "%s: \"%.40s...\" is longer than 253 characters", what, json_string_value(v));
    if (strlen(json_string_value(v)) != n) return fail(err, len, "%s: contains a NUL character", what);
    return 0;
}

/*--- ExtenderArgs (filter, prioritize) ---*/

static int parse_args(struct gs_ext_request *r, char *err, size_t len)
{
    int e = pod_field(r->doc, "ExtenderArgs", &r->pod, err, len);
    if (e) return e;
    json_t *names = field(r->doc, "NodeNames", NULL), *nodes = field(r->doc, "Nodes", NULL);
    if (names) {
        if (!json_is_array(names))
            return fail(err, len, "ExtenderArgs.NodeNames: must be an array of node names, got %s", type_name(names));
        r->cache_capable = true;
        r->nnames = json_array_size(names);
        if (!(r->names = calloc(r->nnames ? r->nnames : 1, sizeof *r->names))) return GS_ENOMEM;
        for (size_t i = 0; i < r->nnames; i++) {
            char what[64];
            snprintf(what, sizeof what, "ExtenderArgs.NodeNames[%zu]", i);
            json_t *v = json_array_get(names, i);
            if ((e = check_name(v, what, err, len))) return e;
            r->names[i] = json_string_value(v);
        }
        return 0;
    }
    if (!nodes)
        return fail(err, len, "ExtenderArgs: neither Nodes (nodeCacheCapable false) nor NodeNames "
                              "(nodeCacheCapable true) given");
    if (!json_is_object(nodes))
        return fail(err, len, "ExtenderArgs.Nodes: must be a NodeList object, got %s", type_name(nodes));
    json_t *items = json_object_get(nodes, "items");
    if (json_is_null(items) || !items) items = NULL;
    else if (!json_is_array(items))
        return fail(err, len, "ExtenderArgs.Nodes.items: must be an array, got %s", type_name(items));
    r->node_items = items;
    r->nnames = json_array_size(items);
    if (!(r->names = calloc(r->nnames ? r->nnames : 1, sizeof *r->names))) return GS_ENOMEM;
    for (size_t i = 0; i < r->nnames; i++) {
        json_t *n = json_array_get(items, i);
        char what[64];
        snprintf(what, sizeof what, "ExtenderArgs.Nodes.items[%zu]", i);
        if (!json_is_object(n)) return fail(err, len, "%s: must be a Node object, got %s", what, type_name(n));
        snprintf(what, sizeof what, "ExtenderArgs.Nodes.items[%zu].metadata.name", i);
        json_t *nm = json_object_get(json_object_get(n, "metadata"), "name");
        if (!nm) return fail(err, len, "%s: required", what);
        if ((e = check_name(nm, what, err, len))) return e;
        r->names[i] = json_string_value(nm);
    }
    return 0;
}

/*--- ExtenderPreemptionArgs ---*/

static int cmp_victims(const void *a, const void *b)
{
    return strcmp(((const struct gs_ext_victims *)a)->node, ((const struct gs_ext_victims *)b)->node);
}

/* One Victims / MetaVictims value: {Pods: [...], NumPDBViolations}. */
static int parse_victims(struct gs_ext_victims *v, const json_t *val, bool meta, const char *map, char *err,
                         size_t len)
{
    if (!json_is_object(val))
        return fail(err, len, "ExtenderPreemptionArgs.%s[\"%s\"]: must be an object, got %s", map, v->node,
                    type_name(val));
    json_t *pdb = field(val, "NumPDBViolations", NULL);
    if (pdb && !json_is_integer(pdb))
        return fail(err, len, "ExtenderPreemptionArgs.%s[\"%s\"].NumPDBViolations: must be an integer, got %s", map,
                    v->node, type_name(pdb));
    v->pdb_violations = pdb ? json_integer_value(pdb) : 0;
    if (v->pdb_violations < 0)
        return fail(err, len, "ExtenderPreemptionArgs.%s[\"%s\"].NumPDBViolations: must not be negative, got %lld",
                    map, v->node, (long long)v->pdb_violations);
    json_t *pods = field(val, "Pods", NULL);
    if (pods && !json_is_array(pods))
        return fail(err, len, "ExtenderPreemptionArgs.%s[\"%s\"].Pods: must be an array, got %s", map, v->node,
                    type_name(pods));
    v->nuids = json_array_size(pods);
    if (!(v->uids = calloc(v->nuids ? v->nuids : 1, sizeof *v->uids))) return GS_ENOMEM;
    for (size_t i = 0; i < v->nuids; i++) {
        json_t *p = json_array_get(pods, i);
        if (!json_is_object(p))
            return fail(err, len, "ExtenderPreemptionArgs.%s[\"%s\"].Pods[%zu]: must be an object, got %s", map,
                        v->node, i, type_name(p));
        /* MetaPod {UID}; a full Pod has metadata.uid. */
        json_t *uid = meta ? field(p, "UID", NULL) : json_object_get(json_object_get(p, "metadata"), "uid");
        const char *where = meta ? "UID" : "metadata.uid";
        if (!json_is_string(uid) || !json_string_length(uid))
            return fail(err, len, "ExtenderPreemptionArgs.%s[\"%s\"].Pods[%zu].%s: required (a non-empty string)",
                        map, v->node, i, where);
        v->uids[i] = json_string_value(uid);
    }
    return 0;
}

static int parse_preempt(struct gs_ext_request *r, char *err, size_t len)
{
    int e = pod_field(r->doc, "ExtenderPreemptionArgs", &r->pod, err, len);
    if (e) return e;
    json_t *meta = field(r->doc, "NodeNameToMetaVictims", NULL);
    json_t *full = field(r->doc, "NodeNameToVictims", "nodeToVictims");
    const char *map = meta ? "NodeNameToMetaVictims" : "NodeNameToVictims";
    json_t *m = meta ? meta : full;
    if (!m)
        return fail(err, len, "ExtenderPreemptionArgs: neither NodeNameToMetaVictims (nodeCacheCapable true) nor "
                              "NodeNameToVictims (nodeCacheCapable false) given");
    if (!json_is_object(m))
        return fail(err, len, "ExtenderPreemptionArgs.%s: must be an object keyed by node name, got %s", map,
                    type_name(m));
    r->cache_capable = meta != NULL;
    r->nvictims = json_object_size(m);
    if (!(r->victims = calloc(r->nvictims ? r->nvictims : 1, sizeof *r->victims))) return GS_ENOMEM;
    const char *k;
    json_t *val;
    size_t i = 0;
    json_object_foreach(m, k, val) {
        char what[64];
        snprintf(what, sizeof what, "ExtenderPreemptionArgs.%s key", map);
        json_t *ks = json_string(k);
        e = ks ? check_name(ks, what, err, len) : GS_ENOMEM;
        json_decref(ks);
        if (e) return e;
        r->victims[i].node = k;
        if ((e = parse_victims(&r->victims[i++], val, meta != NULL, map, err, len))) return e;
    }
    qsort(r->victims, r->nvictims, sizeof *r->victims, cmp_victims);
    return 0;
}

/*--- ExtenderBindingArgs ---*/

static int parse_bind(struct gs_ext_request *r, char *err, size_t len)
{
    const char *t = "ExtenderBindingArgs";
    int e;
    if ((e = str_field(r->doc, t, "PodName", true, &r->pod_name, err, len)) ||
        (e = str_field(r->doc, t, "PodNamespace", false, &r->pod_namespace, err, len)) ||
        (e = str_field(r->doc, t, "PodUID", false, &r->pod_uid, err, len)) ||
        (e = str_field(r->doc, t, "Node", true, &r->node, err, len)))
        return e;
    if (!r->pod_namespace || !*r->pod_namespace) r->pod_namespace = "default";
    if (r->pod_uid && !*r->pod_uid) r->pod_uid = NULL;
    if (strlen(r->pod_name) > 253 || strlen(r->pod_namespace) > 63 || strchr(r->pod_name, '/') ||
        strchr(r->pod_namespace, '/'))
        return fail(err, len, "%s: \"%.64s/%.64s\" is not a pod name (a namespace of at most 63 and a name of at "
                              "most 253 characters, no '/')", t, r->pod_namespace, r->pod_name);
    if (strlen(r->node) > 253 || strchr(r->node, '/'))
        return fail(err, len, "%s.Node: \"%.64s\" is not a node name", t, r->node);
    return 0;
}

int gs_ext_request_parse(enum gs_ext_verb v, const char *body, size_t len, struct gs_ext_request *out, char *err,
                         size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->verb = v;
    if (errlen) err[0] = 0;
    if ((int)v < 0 || v >= GS_EXT_VERBS) return fail(err, errlen, "unknown verb %d", (int)v);
    static const char *const types[GS_EXT_VERBS] = {"ExtenderArgs", "ExtenderArgs", "ExtenderPreemptionArgs",
                                                    "ExtenderBindingArgs"};
    json_error_t je;
    out->doc = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!out->doc)
        return fail(err, errlen, "%s: the request body is not JSON: %s (line %d, column %d)", types[v], je.text,
                    je.line, je.column);
    if (!json_is_object(out->doc))
        return fail(err, errlen, "%s: the request body must be a JSON object, got %s", types[v],
                    type_name(out->doc));
    switch (v) {
    case GS_EXT_FILTER:
    case GS_EXT_PRIORITIZE: return parse_args(out, err, errlen);
    case GS_EXT_PREEMPT: return parse_preempt(out, err, errlen);
    default: return parse_bind(out, err, errlen);
    }
}

void gs_ext_request_free(struct gs_ext_request *r)
{
    if (!r) return;
    for (size_t i = 0; r->victims && i < r->nvictims; i++) free(r->victims[i].uids);
    free(r->victims);
    free(r->names);
    json_decref(r->doc);
    memset(r, 0, sizeof *r);
}
