/*
 * object.c - the object model's entry point: kinds, metadata, resource lists,
 * and the decoding toolkit every typed decoder uses.
 *
 * gs_object_decode() looks at apiVersion and kind, picks the typed decoder
 * (pod.c, node.c, kinds.c) and keeps the document attached to the object so
 * unknown fields round-trip. The kinds table is the one place that says which
 * (apiVersion, kind) pairs we understand. A known apiVersion with a kind it
 * does not define is an error (a typo such as "Pdo" should not pass
 * silently); an apiVersion we have never heard of (apps/v1 Deployment, CRDs)
 * is kept as a generic object with only its metadata checked.
 *
 * The decoding toolkit (struct gs_dec, decode.h) tracks the field path and
 * turns every wrong type, bad quantity or bad label into one gs_diags entry,
 * then carries on: validate reports all problems of a document at once.
 */
#include "core/decode.h"
#include "core/quantity.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- Kinds ---*/

static const char *const kind_names[GS_KIND_COUNT] = {
    [GS_KIND_UNKNOWN] = "Unknown",
    [GS_KIND_NODE] = "Node",
    [GS_KIND_POD] = "Pod",
    [GS_KIND_PODGROUP] = "PodGroup",
    [GS_KIND_QUEUE] = "Queue",
    [GS_KIND_CLUSTERQUEUE] = "ClusterQueue",
    [GS_KIND_LOCALQUEUE] = "LocalQueue",
    [GS_KIND_RESOURCEFLAVOR] = "ResourceFlavor",
    [GS_KIND_RESOURCECLAIM] = "ResourceClaim",
    [GS_KIND_DEVICECLASS] = "DeviceClass",
    [GS_KIND_RESOURCESLICE] = "ResourceSlice",
    [GS_KIND_NODERESOURCETOPOLOGY] = "NodeResourceTopology",
    [GS_KIND_CLUSTERPOLICY] = "ClusterPolicy",
    [GS_KIND_PRIORITYCLASS] = "PriorityClass",
    [GS_KIND_WORKLOAD] = "Workload",
    [GS_KIND_WORKLOADPRIORITYCLASS] = "WorkloadPriorityClass",
    [GS_KIND_RESOURCECLAIMTEMPLATE] = "ResourceClaimTemplate",
    [GS_KIND_DEVICETAINTRULE] = "DeviceTaintRule",
    [GS_KIND_GPUCLUSTER] = "GPUCluster",
    [GS_KIND_RUNTIMECLASS] = "RuntimeClass",
};

/* Which kinds each apiVersion we know defines. Kinds mapped to
 * GS_KIND_UNKNOWN are real kinds of that API that we keep generically. */
static const struct {
    const char *api_version;
    const char *kind;
    enum gs_kind k;
} api_kinds[] = {
    {"v1", "Pod", GS_KIND_POD},
    {"v1", "Node", GS_KIND_NODE},
    {"v1", "Namespace", GS_KIND_UNKNOWN},
    {"v1", "ConfigMap", GS_KIND_UNKNOWN},
    {"v1", "Secret", GS_KIND_UNKNOWN},
    {"v1", "Service", GS_KIND_UNKNOWN},
    {"v1", "ServiceAccount", GS_KIND_UNKNOWN},
    {"v1", "PersistentVolume", GS_KIND_UNKNOWN},
    {"v1", "PersistentVolumeClaim", GS_KIND_UNKNOWN},
    {"v1", "ResourceQuota", GS_KIND_UNKNOWN},
    {"v1", "LimitRange", GS_KIND_UNKNOWN},
    {"v1", "Endpoints", GS_KIND_UNKNOWN},
    {"v1", "Event", GS_KIND_UNKNOWN},
    {"v1", "PodTemplate", GS_KIND_UNKNOWN},
    {"v1", "ReplicationController", GS_KIND_UNKNOWN},
    {"v1", "Binding", GS_KIND_UNKNOWN},
    {"scheduling.x-k8s.io/v1alpha1", "PodGroup", GS_KIND_PODGROUP},
    {"scheduling.x-k8s.io/v1alpha1", "ElasticQuota", GS_KIND_UNKNOWN},
    {"scheduling.volcano.sh/v1beta1", "PodGroup", GS_KIND_PODGROUP},
    {"scheduling.volcano.sh/v1beta1", "Queue", GS_KIND_QUEUE},
    {"scheduling.gpusched.io/v1alpha1", "Queue", GS_KIND_QUEUE},
    {"scheduling.gpusched.io/v1alpha1", "PodGroup", GS_KIND_PODGROUP},
    {"kueue.x-k8s.io/v1beta1", "ClusterQueue", GS_KIND_CLUSTERQUEUE},
    {"kueue.x-k8s.io/v1beta1", "LocalQueue", GS_KIND_LOCALQUEUE},
    {"kueue.x-k8s.io/v1beta1", "ResourceFlavor", GS_KIND_RESOURCEFLAVOR},
    {"kueue.x-k8s.io/v1beta1", "Workload", GS_KIND_UNKNOWN},
    {"kueue.x-k8s.io/v1beta1", "AdmissionCheck", GS_KIND_UNKNOWN},
    {"kueue.x-k8s.io/v1beta1", "WorkloadPriorityClass", GS_KIND_WORKLOADPRIORITYCLASS},
    {"kueue.x-k8s.io/v1beta1", "Cohort", GS_KIND_UNKNOWN},
    {"kueue.x-k8s.io/v1beta1", "Topology", GS_KIND_UNKNOWN},
    {"kueue.x-k8s.io/v1beta2", "ClusterQueue", GS_KIND_CLUSTERQUEUE},
    {"kueue.x-k8s.io/v1beta2", "LocalQueue", GS_KIND_LOCALQUEUE},
    {"kueue.x-k8s.io/v1beta2", "ResourceFlavor", GS_KIND_RESOURCEFLAVOR},
    {"kueue.x-k8s.io/v1beta2", "Workload", GS_KIND_UNKNOWN},
    {"kueue.x-k8s.io/v1beta2", "AdmissionCheck", GS_KIND_UNKNOWN},
    {"kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass", GS_KIND_WORKLOADPRIORITYCLASS},
    {"kueue.x-k8s.io/v1beta2", "Cohort", GS_KIND_UNKNOWN},
    {"kueue.x-k8s.io/v1beta2", "Topology", GS_KIND_UNKNOWN},
    {"resource.k8s.io/v1", "ResourceClaim", GS_KIND_RESOURCECLAIM},
    {"resource.k8s.io/v1", "DeviceClass", GS_KIND_DEVICECLASS},
    {"resource.k8s.io/v1", "ResourceSlice", GS_KIND_RESOURCESLICE},
    {"resource.k8s.io/v1", "ResourceClaimTemplate", GS_KIND_RESOURCECLAIMTEMPLATE},
    {"resource.k8s.io/v1beta1", "ResourceClaim", GS_KIND_RESOURCECLAIM},
    {"resource.k8s.io/v1beta1", "DeviceClass", GS_KIND_DEVICECLASS},
    {"resource.k8s.io/v1beta1", "ResourceSlice", GS_KIND_RESOURCESLICE},
    {"resource.k8s.io/v1beta1", "ResourceClaimTemplate", GS_KIND_RESOURCECLAIMTEMPLATE},
    {"resource.k8s.io/v1beta2", "ResourceClaim", GS_KIND_RESOURCECLAIM},
    {"resource.k8s.io/v1beta2", "DeviceClass", GS_KIND_DEVICECLASS},
    {"resource.k8s.io/v1beta2", "ResourceSlice", GS_KIND_RESOURCESLICE},
    {"resource.k8s.io/v1beta2", "ResourceClaimTemplate", GS_KIND_RESOURCECLAIMTEMPLATE},
    {"resource.k8s.io/v1", "DeviceTaintRule", GS_KIND_DEVICETAINTRULE},
    {"resource.k8s.io/v1beta2", "DeviceTaintRule", GS_KIND_DEVICETAINTRULE},
    {"resource.k8s.io/v1alpha3", "DeviceTaintRule", GS_KIND_DEVICETAINTRULE},
    {"nvidia.com/v1alpha1", "GPUCluster", GS_KIND_GPUCLUSTER},
    {"topology.node.k8s.io/v1alpha2", "NodeResourceTopology", GS_KIND_NODERESOURCETOPOLOGY},
    {"topology.node.k8s.io/v1alpha1", "NodeResourceTopology", GS_KIND_NODERESOURCETOPOLOGY},
    {"nvidia.com/v1", "ClusterPolicy", GS_KIND_CLUSTERPOLICY},
    {"scheduling.k8s.io/v1", "PriorityClass", GS_KIND_PRIORITYCLASS},
    {"scheduling.k8s.io/v1beta1", "PodGroup", GS_KIND_PODGROUP},
    {"scheduling.k8s.io/v1beta1", "Workload", GS_KIND_WORKLOAD},
    {"node.k8s.io/v1", "RuntimeClass", GS_KIND_RUNTIMECLASS},
};
#define NAPI_KINDS (sizeof api_kinds / sizeof api_kinds[0])

enum gs_kind gs_kind_from_name(const char *kind)
{
    if (!kind) return GS_KIND_UNKNOWN;
    for (int k = 1; k < GS_KIND_COUNT; k++)
        if (!strcmp(kind_names[k], kind)) return (enum gs_kind)k;
    return GS_KIND_UNKNOWN;
}

const char *gs_kind_name(enum gs_kind k)
{
    return (unsigned)k < GS_KIND_COUNT ? kind_names[k] : "Unknown";
}

bool gs__kind_namespaced(enum gs_kind k)
{
    switch (k) {
    case GS_KIND_POD:
    case GS_KIND_PODGROUP:
    case GS_KIND_LOCALQUEUE:
    case GS_KIND_WORKLOAD:
    case GS_KIND_RESOURCECLAIM:
    case GS_KIND_RESOURCECLAIMTEMPLATE: return true;
    default: return false;
    }
}

static bool api_known(const char *api_version)
{
    for (size_t i = 0; i < NAPI_KINDS; i++)
        if (!strcmp(api_kinds[i].api_version, api_version)) return true;
    return false;
}

/* Resolves the kind, reporting a known apiVersion without that kind, or a
 * typed kind under an apiVersion that does not define it. */
static enum gs_kind resolve_kind(struct gs_dec *dc, const char *api, const char *kind)
{
    if (!kind) return GS_KIND_UNKNOWN;
    if (!api) return gs_kind_from_name(kind);
    for (size_t i = 0; i < NAPI_KINDS; i++)
        if (!strcmp(api_kinds[i].api_version, api) && !strcmp(api_kinds[i].kind, kind)) return api_kinds[i].k;
    enum gs_kind k = gs_kind_from_name(kind);
    if (api_known(api)) {
        gs__dec_err_at(dc, "kind", "unknown kind \"%s\" for apiVersion \"%s\"", kind, api);
        return GS_KIND_UNKNOWN;
    }
    if (k != GS_KIND_UNKNOWN) {
        const char *want = "";
        for (size_t i = 0; i < NAPI_KINDS; i++)
            if (api_kinds[i].k == k) { want = api_kinds[i].api_version; break; }
        gs__dec_err_at(dc, "apiVersion", "unknown apiVersion \"%s\" for kind \"%s\" (expected \"%s\")", api, kind,
                       want);
    }
    return k;
}

/*--- Resource lists ---*/

int64_t gs_resources_get(const struct gs_resources *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->v[i].name, name)) return r->v[i].milli;
    return 0;
}

int gs_resources_set(struct gs_resources *r, const char *name, int64_t milli)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->v[i].name, name)) {
            r->v[i].milli = milli;
            return 0;
        }
    struct gs_resource *nv = realloc(r->v, (r->n + 1) * sizeof *nv);
    if (!nv) return GS_ENOMEM;
    r->v = nv;
    char *nm = strdup(name);
    if (!nm) return GS_ENOMEM;
    r->v[r->n++] = (struct gs_resource){nm, milli};
    return 0;
}

void gs_resources_free(struct gs_resources *r)
{
    for (size_t i = 0; i < r->n; i++) free(r->v[i].name);
    free(r->v);
    r->v = NULL;
    r->n = 0;
}

/*--- Path tracking and reporting ---*/

void gs__dec_init(struct gs_dec *dc, struct gs_diags *d)
{
    memset(dc, 0, sizeof *dc);
    dc->d = d;
}

static size_t dec_append(struct gs_dec *dc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t dec_append(struct gs_dec *dc, const char *fmt, ...)
{
    size_t mark = dc->len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dc->path + dc->len, sizeof dc->path - dc->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof dc->path - dc->len) dc->path[mark] = '\0'; /* too deep: keep the prefix */
    else dc->len += (size_t)n;
    return mark;
}

/* Keys that are not plain identifiers are written ["key"] so the path stays unambiguous. */
static bool plain_key(const char *k)
{
    if (!*k) return false;
    for (const char *p = k; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-')) return false;
    return true;
}

/* Appends a then b, both or neither (as dec_append truncates); the plain
 * cases of the two below, which every decoded field takes, without printf. */
static size_t dec_put(struct gs_dec *dc, const char *a, size_t an, const char *b, size_t bn)
{
    size_t mark = dc->len;
    if (an + bn >= sizeof dc->path - dc->len) {
        dc->path[mark] = '\0';
        return mark;
    }
    memcpy(dc->path + dc->len, a, an);
    memcpy(dc->path + dc->len + an, b, bn);
    dc->len += an + bn;
    dc->path[dc->len] = '\0';
    return mark;
}

size_t gs__dec_key(struct gs_dec *dc, const char *key)
{
    if (plain_key(key)) return dec_put(dc, ".", dc->len ? 1 : 0, key, strlen(key));
    size_t mark = dec_append(dc, "[\"");
    for (const char *p = key; *p; p++) dec_append(dc, (*p == '"' || *p == '\\') ? "\\%c" : "%c", *p);
    dec_append(dc, "\"]");
    return mark;
}

size_t gs__dec_idx(struct gs_dec *dc, size_t i)
{
    char buf[24];
    size_t n = sizeof buf;
    buf[--n] = ']';
    do buf[--n] = (char)('0' + i % 10);
    while ((i /= 10) && n > 1);
    buf[--n] = '[';
    return dec_put(dc, buf + n, sizeof buf - n, "", 0);
}

void gs__dec_pop(struct gs_dec *dc, size_t mark)
{
    dc->len = mark;
    dc->path[mark] = '\0';
}

static void dec_verr(struct gs_dec *dc, const char *fmt, va_list ap)
{
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0) {
        dc->oom = true;
        return;
    }
    if (gs_diags_add(dc->d, dc->path, "%s", msg)) dc->oom = true;
    dc->nerr++;
    free(msg);
}

void gs__dec_err(struct gs_dec *dc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dec_verr(dc, fmt, ap);
    va_end(ap);
}

void gs__dec_err_at(struct gs_dec *dc, const char *key, const char *fmt, ...)
{
    size_t m = gs__dec_key(dc, key);
    va_list ap;
    va_start(ap, fmt);
    dec_verr(dc, fmt, ap);
    va_end(ap);
    gs__dec_pop(dc, m);
}

/*--- Typed getters ---*/

const char *gs__json_type_name(const json_t *v)
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

static const char *want_name(json_type t)
{
    switch (t) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    default: return "a boolean";
    }
}

bool gs__dec_is(struct gs_dec *dc, const json_t *v, json_type type)
{
    bool ok = json_typeof(v) == type || (type == JSON_TRUE && json_is_boolean(v)) ||
              (type == JSON_REAL && json_is_number(v));
    if (!ok) gs__dec_err(dc, "expected %s, got %s", want_name(type), gs__json_type_name(v));
    return ok;
}

json_t *gs__dec_get(struct gs_dec *dc, const json_t *obj, const char *key, json_type type)
{
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v || json_is_null(v)) return NULL;
    size_t m = gs__dec_key(dc, key);
    bool ok = gs__dec_is(dc, v, type);
    gs__dec_pop(dc, m);
    return ok ? v : NULL;
}

const char *gs__dec_str(struct gs_dec *dc, const json_t *obj, const char *key)
{
    return json_string_value(gs__dec_get(dc, obj, key, JSON_STRING));
}

char *gs__dec_strdup(struct gs_dec *dc, const json_t *obj, const char *key)
{
    const char *s = gs__dec_str(dc, obj, key);
    if (!s) return NULL;
    char *r = strdup(s);
    if (!r) dc->oom = true;
    return r;
}

bool gs__dec_bool(struct gs_dec *dc, const json_t *obj, const char *key, bool *out)
{
    json_t *v = gs__dec_get(dc, obj, key, JSON_TRUE);
    if (v) *out = json_is_true(v);
    return v != NULL;
}

bool gs__dec_int(struct gs_dec *dc, const json_t *obj, const char *key, int64_t min, int64_t max, int64_t *out)
{
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v || json_is_null(v)) return false;
    size_t m = gs__dec_key(dc, key);
    bool ok = false;
    if (json_is_integer(v)) {
        int64_t x = json_integer_value(v);
        if ((x < min || x > max) && (max == INT64_MAX || max == INT32_MAX))
            gs__dec_err(dc, "invalid value %" PRId64 ": must be at least %" PRId64, x, min);
        else if (x < min || x > max)
            gs__dec_err(dc, "invalid value %" PRId64 ": must be from %" PRId64 " to %" PRId64, x, min, max);
        else { *out = x; ok = true; }
    } else if (json_is_real(v)) {
        gs__dec_err(dc, "expected an integer, got %g", json_real_value(v));
    } else {
        gs__dec_err(dc, "expected an integer, got %s", gs__json_type_name(v));
    }
    gs__dec_pop(dc, m);
    return ok;
}

bool gs__dec_enum(struct gs_dec *dc, const json_t *obj, const char *key, const char *const *words, const char **out)
{
    const char *s = gs__dec_str(dc, obj, key);
    if (!s) return false;
    for (const char *const *w = words; *w; w++)
        if (!strcmp(*w, s)) {
            if (out) *out = *w;
            return true;
        }
    char list[256] = "";
    for (const char *const *w = words; *w; w++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", w == words ? "" : ", ", *w);
    gs__dec_err_at(dc, key, "invalid value \"%s\": must be one of %s", s, list);
    return false;
}

/*--- Quantities and resource lists ---*/

void gs__milli_text(int64_t milli, char *buf, size_t len)
{
    uint64_t a = milli < 0 ? (uint64_t)0 - (uint64_t)milli : (uint64_t)milli;
    int n = snprintf(buf, len, "%s%" PRIu64, milli < 0 ? "-" : "", a / 1000);
    if (a % 1000 && n > 0 && (size_t)n < len) {
        char frac[8];
        snprintf(frac, sizeof frac, ".%03u", (unsigned)(a % 1000));
        for (size_t l = strlen(frac); frac[l - 1] == '0'; l--) frac[l - 1] = '\0';
        snprintf(buf + n, len - (size_t)n, "%s", frac);
    }
}

/* Shortest decimal text that reads back as d, so 1.5 -> "1.5", not "1.5000000000000000". */
static void shortest_real(double d, char *buf, size_t len)
{
    if (d == floor(d) && fabs(d) < 1e15) {
        snprintf(buf, len, "%.0f", d);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) return;
    }
}

bool gs__dec_quantity(struct gs_dec *dc, const json_t *v, int64_t *milli)
{
    char text[64];
    const char *s;
    if (json_is_string(v)) {
        s = json_string_value(v);
    } else if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n > INT64_MAX / 1000 || n < INT64_MIN / 1000) {
            gs__dec_err(dc, "invalid quantity %" JSON_INTEGER_FORMAT ": too large", n);
            return false;
        }
        *milli = n * 1000;
        return true;
    } else if (json_is_real(v) && isfinite(json_real_value(v))) {
        shortest_real(json_real_value(v), text, sizeof text);
        s = text;
    } else {
        gs__dec_err(dc, "expected a quantity (string or number), got %s", gs__json_type_name(v));
        return false;
    }
    const char *why = NULL;
    int rc = gs_quantity_parse(s, milli, &why);
    if (rc) {
        gs__dec_err(dc, "invalid quantity \"%s\": %s", s, why ? why : gs_strerror(rc));
        return false;
    }
    return true;
}

bool gs__dec_quantity_at(struct gs_dec *dc, const json_t *obj, const char *key, int64_t *milli)
{
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v || json_is_null(v)) return false;
    size_t m = gs__dec_key(dc, key);
    bool ok = gs__dec_quantity(dc, v, milli);
    gs__dec_pop(dc, m);
    return ok;
}

void gs__dec_resources(struct gs_dec *dc, const json_t *obj, const char *key, struct gs_resources *out)
{
    json_t *map = gs__dec_get(dc, obj, key, JSON_OBJECT);
    if (!map) return;
    size_t m = gs__dec_key(dc, key);
    const char *name;
    json_t *v;
    json_object_foreach(map, name, v) {
        if (json_is_null(v)) continue;
        size_t m2 = gs__dec_key(dc, name);
        int64_t milli;
        if (gs__dec_quantity(dc, v, &milli)) {
            char t[48];
            gs__milli_text(milli, t, sizeof t);
            if (milli < 0) gs__dec_err(dc, "invalid quantity \"%s\": must not be negative",
                                       json_is_string(v) ? json_string_value(v) : t);
            else if (gs_resources_set(out, name, milli)) dc->oom = true;
        }
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

/*--- Strings, labels, selectors ---*/

void gs__strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

char **gs__dec_strv(struct gs_dec *dc, const json_t *obj, const char *key, size_t *n)
{
    *n = 0;
    json_t *arr = gs__dec_get(dc, obj, key, JSON_ARRAY);
    if (!arr || json_array_size(arr) == 0) return NULL;
    char **v = calloc(json_array_size(arr), sizeof *v);
    if (!v) { dc->oom = true; return NULL; }
    size_t m = gs__dec_key(dc, key), i;
    json_t *it;
    json_array_foreach(arr, i, it) {
        size_t m2 = gs__dec_idx(dc, i);
        if (gs__dec_is(dc, it, JSON_STRING) && !(v[(*n)++] = strdup(json_string_value(it)))) dc->oom = true;
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
    return v;
}

void gs__dec_labels(struct gs_dec *dc, const json_t *obj, const char *key, struct gs_labels *out, bool check_label)
{
    json_t *map = gs__dec_get(dc, obj, key, JSON_OBJECT);
    if (!map) return;
    size_t m = gs__dec_key(dc, key);
    const char *k;
    json_t *v;
    json_object_foreach(map, k, v) {
        size_t m2 = gs__dec_key(dc, k);
        const char *why = NULL;
        if (!gs__dec_is(dc, v, JSON_STRING)) {
            /* reported */
        } else if (check_label && gs_label_key_check(k, &why)) {
            gs__dec_err(dc, "invalid label key \"%s\": %s", k, why ? why : "malformed");
        } else if (check_label && gs_label_value_check(json_string_value(v), &why)) {
            gs__dec_err(dc, "invalid label value \"%s\": %s", json_string_value(v), why ? why : "malformed");
        } else if (gs_labels_set(out, k, json_string_value(v))) {
            dc->oom = true;
        }
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

/* {key, operator, values} at the current path. */
static void dec_sel_req(struct gs_dec *dc, const json_t *e, bool node_ops, struct gs_selector *sel)
{
    if (!gs__dec_is(dc, e, JSON_OBJECT)) return;
    const char *key = gs__dec_str(dc, e, "key");
    const char *op = gs__dec_str(dc, e, "operator");
    if (!key && !json_object_get(e, "key")) gs__dec_err_at(dc, "key", "is required");
    if (!op && !json_object_get(e, "operator")) gs__dec_err_at(dc, "operator", "is required");
    struct gs_sel_req r = {0};
    bool ok = key && op;
    if (op && (gs_sel_op_parse(op, &r.op) || (!node_ops && (r.op == GS_SEL_GT || r.op == GS_SEL_LT)))) {
        gs__dec_err_at(dc, "operator", "invalid operator \"%s\": must be one of In, NotIn, Exists, DoesNotExist%s", op,
                       node_ops ? ", Gt, Lt" : "");
        ok = false;
    }
    r.values = gs__dec_strv(dc, e, "values", &r.nvalues);
    if (ok) {
        bool set_op = r.op == GS_SEL_IN || r.op == GS_SEL_NOTIN;
        bool exist_op = r.op == GS_SEL_EXISTS || r.op == GS_SEL_DOESNOTEXIST;
        if (set_op && r.nvalues == 0) gs__dec_err_at(dc, "values", "must be non-empty for operator %s", op), ok = false;
        if (exist_op && r.nvalues) gs__dec_err_at(dc, "values", "must be empty for operator %s", op), ok = false;
        if (!set_op && !exist_op) {
            char *end = NULL;
            if (r.nvalues != 1) gs__dec_err_at(dc, "values", "must have exactly one value for operator %s", op), ok = false;
            else if ((strtoll(r.values[0], &end, 10), !*r.values[0] || *end))
                gs__dec_err_at(dc, "values", "value \"%s\" for operator %s must be an integer", r.values[0], op), ok = false;
        }
    }
    struct gs_sel_req *nr = ok ? realloc(sel->reqs, (sel->n + 1) * sizeof *nr) : NULL;
    if (ok && nr && (r.key = strdup(key))) {
        sel->reqs = nr;
        sel->reqs[sel->n++] = r;
        return;
    }
    if (ok) {
        if (nr) sel->reqs = nr;
        dc->oom = true;
    }
    gs__strv_free(r.values, r.nvalues);
}

static void dec_sel_reqs(struct gs_dec *dc, const json_t *obj, const char *key, bool node_ops,
                         struct gs_selector *sel)
{
    json_t *arr = gs__dec_get(dc, obj, key, JSON_ARRAY);
    if (!arr) return;
    size_t m = gs__dec_key(dc, key), i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        size_t m2 = gs__dec_idx(dc, i);
        dec_sel_req(dc, e, node_ops, sel);
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

void gs__dec_label_selector(struct gs_dec *dc, const json_t *obj, const char *key, struct gs_selector *out)
{
    json_t *s = gs__dec_get(dc, obj, key, JSON_OBJECT);
    if (!s) return;
    size_t m = gs__dec_key(dc, key);
    struct gs_labels ml = {0};
    gs__dec_labels(dc, s, "matchLabels", &ml, true);
    for (size_t i = 0; i < ml.n; i++) {
        struct gs_sel_req *nr = realloc(out->reqs, (out->n + 1) * sizeof *nr);
        char **vals = calloc(1, sizeof *vals);
        if (!nr || !vals) { free(vals); if (nr) out->reqs = nr; dc->oom = true; break; }
        out->reqs = nr;
        vals[0] = ml.v[i].value;
        out->reqs[out->n++] = (struct gs_sel_req){ml.v[i].key, GS_SEL_IN, vals, 1};
        ml.v[i].key = ml.v[i].value = NULL;
    }
    gs_labels_free(&ml);
    dec_sel_reqs(dc, s, "matchExpressions", false, out);
    gs__dec_pop(dc, m);
}

void gs__dec_node_term(struct gs_dec *dc, const json_t *t, struct gs_node_selector_term *out)
{
    if (!gs__dec_is(dc, t, JSON_OBJECT)) return;
    dec_sel_reqs(dc, t, "matchExpressions", true, &out->match_expressions);
    dec_sel_reqs(dc, t, "matchFields", true, &out->match_fields);
    for (size_t i = 0; i < out->match_fields.n; i++)
        if (strcmp(out->match_fields.reqs[i].key, "metadata.name")) {
            size_t m = gs__dec_key(dc, "matchFields");
            gs__dec_idx(dc, i);
            gs__dec_err_at(dc, "key", "unsupported field \"%s\": only metadata.name", out->match_fields.reqs[i].key);
            gs__dec_pop(dc, m);
        }
}

/*--- Taints and tolerations ---*/

static bool dec_effect(struct gs_dec *dc, const json_t *o, bool allow_any, enum gs_taint_effect *e)
{
    const char *s = gs__dec_str(dc, o, "effect");
    if (!s) {
        if (!allow_any) gs__dec_err_at(dc, "effect", "is required");
        *e = GS_EFFECT_ANY;
        return allow_any;
    }
    if (gs_taint_effect_parse(s, allow_any, e)) {
        gs__dec_err_at(dc, "effect", "invalid effect \"%s\": must be NoSchedule, PreferNoSchedule or NoExecute", s);
        return false;
    }
    return true;
}

static void dec_taint(struct gs_dec *dc, const json_t *t, struct gs_taint *out, bool *ok)
{
    *ok = false;
    if (!gs__dec_is(dc, t, JSON_OBJECT)) return;
    const char *key = gs__dec_str(dc, t, "key");
    const char *why = NULL;
    if (!key) {
        if (!json_object_get(t, "key")) gs__dec_err_at(dc, "key", "is required");
        dec_effect(dc, t, false, &out->effect);
        return;
    }
    bool good = true;
    if (gs_label_key_check(key, &why)) gs__dec_err_at(dc, "key", "invalid taint key \"%s\": %s", key, why), good = false;
    const char *val = gs__dec_str(dc, t, "value");
    if (!dec_effect(dc, t, false, &out->effect)) good = false;
    if (!good) return;
    out->key = strdup(key);
    out->value = val ? strdup(val) : NULL;
    if (!out->key || (val && !out->value)) dc->oom = true;
    *ok = true;
}

void gs__dec_taints(struct gs_dec *dc, const json_t *obj, const char *key, struct gs_taint **out, size_t *n)
{
    json_t *arr = gs__dec_get(dc, obj, key, JSON_ARRAY);
    if (!arr || !json_array_size(arr)) return;
    *out = calloc(json_array_size(arr), sizeof **out);
    if (!*out) { dc->oom = true; return; }
    size_t m = gs__dec_key(dc, key), i;
    json_t *t;
    json_array_foreach(arr, i, t) {
        size_t m2 = gs__dec_idx(dc, i);
        bool ok;
        dec_taint(dc, t, &(*out)[*n], &ok);
        if (ok) (*n)++;
        else gs_taint_free(&(*out)[*n]), memset(&(*out)[*n], 0, sizeof **out);
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

static bool dec_toleration(struct gs_dec *dc, const json_t *t, struct gs_toleration *out)
{
    if (!gs__dec_is(dc, t, JSON_OBJECT)) return false;
    const char *key = gs__dec_str(dc, t, "key");
    const char *val = gs__dec_str(dc, t, "value");
    const char *op = NULL;
    static const char *const ops[] = {"Equal", "Exists", NULL};
    bool ok = true;
    if (json_object_get(t, "operator") && !gs__dec_enum(dc, t, "operator", ops, &op)) ok = false;
    out->op = op && !strcmp(op, "Exists") ? GS_TOL_EXISTS : GS_TOL_EQUAL;
    if (out->op == GS_TOL_EXISTS && val && *val)
        gs__dec_err_at(dc, "value", "must be empty when operator is Exists, got \"%s\"", val), ok = false;
    if ((!key || !*key) && out->op != GS_TOL_EXISTS && ok)
        gs__dec_err_at(dc, "operator", "must be Exists when key is empty"), ok = false;
    if (!dec_effect(dc, t, true, &out->effect)) ok = false;
    int64_t secs;
    if (gs__dec_int(dc, t, "tolerationSeconds", INT64_MIN, INT64_MAX, &secs)) {
        out->has_seconds = true;
        out->toleration_seconds = secs;
    }
    if (!ok) return false;
    out->key = key ? strdup(key) : NULL;
    out->value = val ? strdup(val) : NULL;
    if ((key && !out->key) || (val && !out->value)) dc->oom = true;
    return true;
}

void gs__dec_tolerations(struct gs_dec *dc, const json_t *obj, const char *key, struct gs_toleration **out,
                         size_t *n)
{
    json_t *arr = gs__dec_get(dc, obj, key, JSON_ARRAY);
    if (!arr || !json_array_size(arr)) return;
    *out = calloc(json_array_size(arr), sizeof **out);
    if (!*out) { dc->oom = true; return; }
    size_t m = gs__dec_key(dc, key), i;
    json_t *t;
    json_array_foreach(arr, i, t) {
        size_t m2 = gs__dec_idx(dc, i);
        if (dec_toleration(dc, t, &(*out)[*n])) (*n)++;
        else gs_toleration_free(&(*out)[*n]), memset(&(*out)[*n], 0, sizeof **out);
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

/*--- Metadata ---*/

const char *gs__dns_check(const char *s, bool label)
{
    size_t n = strlen(s);
    if (n == 0) return "must not be empty";
    if (n > (label ? 63u : 253u)) return label ? "must be no more than 63 characters" : "must be no more than 253 characters";
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '-' && (label || c != '.'))
            return label ? "must consist of lower case alphanumeric characters or '-'"
                         : "must consist of lower case alphanumeric characters, '-' or '.'";
        if (!alnum && (i == 0 || i == n - 1)) return "must start and end with an alphanumeric character";
    }
    return NULL;
}

void gs_meta_clear(struct gs_meta *m)
{
    free(m->name);
    free(m->namespace_);
    free(m->uid);
    free(m->resource_version);
    free(m->creation_timestamp);
    gs_labels_free(&m->labels);
    gs_labels_free(&m->annotations);
    memset(m, 0, sizeof *m);
}

void gs__dec_meta(struct gs_dec *dc, const json_t *doc, bool namespaced, struct gs_meta *out)
{
    json_t *md = json_object_get(doc, "metadata");
    if (!md || json_is_null(md)) {
        size_t m = gs__dec_key(dc, "metadata");
        gs__dec_err_at(dc, "name", "is required");
        gs__dec_pop(dc, m);
        if (namespaced && !(out->namespace_ = strdup("default"))) dc->oom = true;
        return;
    }
    md = gs__dec_get(dc, doc, "metadata", JSON_OBJECT);
    if (!md) return;
    size_t m = gs__dec_key(dc, "metadata");
    const char *why;
    out->name = gs__dec_strdup(dc, md, "name");
    if (!out->name && !json_object_get(md, "name")) gs__dec_err_at(dc, "name", "is required");
    else if (out->name && (why = gs__dns_check(out->name, false)))
        gs__dec_err_at(dc, "name", "invalid name \"%s\": %s", out->name, why);
    out->namespace_ = gs__dec_strdup(dc, md, "namespace");
    if (out->namespace_ && (why = gs__dns_check(out->namespace_, true)))
        gs__dec_err_at(dc, "namespace", "invalid namespace \"%s\": %s", out->namespace_, why);
    if (namespaced && !out->namespace_ && !(out->namespace_ = strdup("default"))) dc->oom = true;
    out->uid = gs__dec_strdup(dc, md, "uid");
    out->resource_version = gs__dec_strdup(dc, md, "resourceVersion");
    out->creation_timestamp = gs__dec_strdup(dc, md, "creationTimestamp");
    gs__dec_labels(dc, md, "labels", &out->labels, true);
    gs__dec_labels(dc, md, "annotations", &out->annotations, false);
    gs__dec_pop(dc, m);
}

/* Appends s to buf[*at..len) as snprintf would (cut, always terminated);
 * *at counts what the whole would need. */
static void key_put(char *buf, size_t len, size_t *at, const char *s, size_t n)
{
    if (*at + 1 < len) {
        size_t room = len - 1 - *at;
        memcpy(buf + *at, s, n < room ? n : room);
        buf[*at + (n < room ? n : room)] = '\0';
    }
    *at += n;
}

/* Copies rather than formats: the scheduler builds a key per assumed or
 * forgotten pod, and snprintf's format parsing was most of that cost. */
int gs_meta_key(const struct gs_meta *m, char *buf, size_t len)
{
    const char *name = m->name ? m->name : "";
    size_t at = 0;
    if (len) buf[0] = '\0';
    if (m->namespace_) {
        key_put(buf, len, &at, m->namespace_, strlen(m->namespace_));
        key_put(buf, len, &at, "/", 1);
    }
    key_put(buf, len, &at, name, strlen(name));
    return at >= len ? GS_ERANGE : 0;
}

/*--- Objects ---*/

static void object_free_typed(struct gs_object *o)
{
    if (!o->u.meta) return;
    switch (o->kind) {
    case GS_KIND_POD: gs_pod_clear(o->u.pod); break;
    case GS_KIND_NODE: gs_node_clear(o->u.node); break;
    case GS_KIND_PODGROUP: gs__podgroup_clear(o->u.podgroup); break;
    case GS_KIND_QUEUE: gs__queue_clear(o->u.queue); break;
    default:
        gs_meta_clear(&o->u.generic->meta);
        json_decref(o->u.generic->doc);
        break;
    }
    free(o->u.meta);
    o->u.meta = NULL;
}

void gs_object_free(struct gs_object *o)
{
    if (!o) return;
    object_free_typed(o);
    free(o->api_version);
    free(o->kind_name);
    free(o);
}

static int decode_typed(struct gs_object *o, json_t *doc, struct gs_dec *dc)
{
    size_t sz = o->kind == GS_KIND_POD        ? sizeof(struct gs_pod)
                : o->kind == GS_KIND_NODE     ? sizeof(struct gs_node)
                : o->kind == GS_KIND_PODGROUP ? sizeof(struct gs_podgroup)
                : o->kind == GS_KIND_QUEUE    ? sizeof(struct gs_queue)
                                              : sizeof(struct gs_generic);
    o->u.meta = calloc(1, sz);
    if (!o->u.meta) return GS_ENOMEM;
    switch (o->kind) {
    case GS_KIND_POD: return gs__pod_decode(doc, o->u.pod, dc);
    case GS_KIND_NODE: return gs__node_decode(doc, o->u.node, dc);
    case GS_KIND_PODGROUP: return gs__podgroup_decode(doc, o->u.podgroup, dc);
    case GS_KIND_QUEUE: return gs__queue_decode(doc, o->u.queue, dc);
    default: break;
    }
    struct gs_generic *g = o->u.generic;
    /* Unknown kinds keep whatever namespace they were given: we cannot know their scope. */
    gs__dec_meta(dc, doc, gs__kind_namespaced(o->kind), &g->meta);
    gs__generic_validate(o->kind, o->api_version, doc, dc);
    g->doc = json_incref(doc);
    return dc->oom ? GS_ENOMEM : 0;
}

int gs_object_decode(json_t *doc, struct gs_object **out, struct gs_diags *d)
{
    *out = NULL;
    struct gs_dec dc;
    gs__dec_init(&dc, d);
    if (!doc || !json_is_object(doc)) {
        gs__dec_err(&dc, "expected an object, got %s", doc ? gs__json_type_name(doc) : "nothing");
        return GS_EINVAL;
    }
    const char *api = gs__dec_str(&dc, doc, "apiVersion");
    const char *kind = gs__dec_str(&dc, doc, "kind");
    if (!json_object_get(doc, "apiVersion")) gs__dec_err_at(&dc, "apiVersion", "is required");
    if (!json_object_get(doc, "kind")) gs__dec_err_at(&dc, "kind", "is required");
    if (kind && strlen(kind) >= 4 && !strcmp(kind + strlen(kind) - 4, "List") && json_object_get(doc, "items"))
        gs__dec_err_at(&dc, "kind", "a %s must be split into its items before decoding", kind);
    struct gs_object *o = calloc(1, sizeof *o);
    if (!o) return GS_ENOMEM;
    o->kind = resolve_kind(&dc, api, kind);
    o->api_version = api ? strdup(api) : NULL;
    o->kind_name = kind ? strdup(kind) : NULL;
    if ((api && !o->api_version) || (kind && !o->kind_name)) dc.oom = true;
    int rc = decode_typed(o, doc, &dc);
    if (!rc && dc.oom) rc = GS_ENOMEM;
    if (!rc && dc.nerr) rc = GS_EINVAL;
    if (rc) {
        gs_object_free(o);
        return rc;
    }
    *out = o;
    return 0;
}

/*--- Synthesised documents for in-memory objects ---*/

static json_t *labels_to_json(const struct gs_labels *l)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < l->n; i++) json_object_set_new(o, l->v[i].key, json_string(l->v[i].value));
    return o;
}

json_t *gs__meta_to_json(const struct gs_meta *m)
{
    json_t *o = json_object();
    if (!o) return NULL;
    if (m->name) json_object_set_new(o, "name", json_string(m->name));
    if (m->namespace_) json_object_set_new(o, "namespace", json_string(m->namespace_));
    if (m->uid) json_object_set_new(o, "uid", json_string(m->uid));
    if (m->resource_version) json_object_set_new(o, "resourceVersion", json_string(m->resource_version));
    if (m->creation_timestamp) json_object_set_new(o, "creationTimestamp", json_string(m->creation_timestamp));
    if (m->labels.n) json_object_set_new(o, "labels", labels_to_json(&m->labels));
    if (m->annotations.n) json_object_set_new(o, "annotations", labels_to_json(&m->annotations));
    return o;
}

json_t *gs__resources_to_json(const struct gs_resources *r)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < r->n; i++) {
        char q[64];
        gs_quantity_format(r->v[i].milli, q, sizeof q);
        json_object_set_new(o, r->v[i].name, json_string(q));
    }
    return o;
}

json_t *gs_object_to_json(struct gs_object *o)
{
    json_t **slot;
    switch (o->kind) {
    case GS_KIND_POD: slot = &o->u.pod->doc; break;
    case GS_KIND_NODE: slot = &o->u.node->doc; break;
    case GS_KIND_PODGROUP: slot = &o->u.podgroup->doc; break;
    case GS_KIND_QUEUE: slot = &o->u.queue->doc; break;
    default: slot = &o->u.generic->doc; break;
    }
    if (*slot) return *slot;
    json_t *doc = NULL;
    if (o->kind == GS_KIND_POD) doc = gs__pod_to_json(o->u.pod);
    else if (o->kind == GS_KIND_NODE) doc = gs__node_to_json(o->u.node);
    else if ((doc = json_object())) {
        json_object_set_new(doc, "apiVersion", json_string(o->api_version ? o->api_version : "v1"));
        json_object_set_new(doc, "kind", json_string(o->kind_name ? o->kind_name : gs_kind_name(o->kind)));
        json_object_set_new(doc, "metadata", gs__meta_to_json(o->u.meta));
    }
    *slot = doc;
    return doc;
}
