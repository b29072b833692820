/*
 * kinds_dra.c - the checks of the resource.k8s.io kinds (ResourceSlice,
 * DeviceClass, ResourceClaim, ResourceClaimTemplate, DeviceTaintRule) that
 * the API server and `gpusched validate` run; called from kinds.c.
 *
 * The documents are kept whole (the scheduler decodes them itself, core/dra.c);
 * what is checked here is what resource.k8s.io/v1's validation refuses and
 * what a consumer would otherwise trip over later: the limits (128 devices per
 * slice, 64 when taints or counters are used; 8 counter sets; 32 attributes
 * and capacities per device; 16 taints; 32 requests, selectors and
 * constraints; 8 subrequests; 256 reservedFor entries; CEL expressions of at
 * most 10 KiB), exactly-one-of rules (nodeName / nodeSelector / allNodes /
 * perDeviceNodeSelection; exactly / firstAvailable; an attribute's value;
 * matchAttribute / distinctAttribute), qualified names, the enums
 * (allocationMode, taint effect, toleration operator) and names a constraint
 * or config refers to. CEL selectors are compiled (core/cel.c) so a
 * syntax or type error is refused with its column at write time, not found
 * by the scheduler later.
 *
 * The API server converts v1beta1 to v1 before it validates
 * (control/dra_convert.c); `gpusched validate` sees documents as written, so
 * v1beta1's `basic` device wrapper and flat requests are checked too.
 */
#include "core/cel.h"
#include "core/decode.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLICE_DEVICES 128
#define MAX_SLICE_DEVICES_ADVANCED 64 /* with taints or counters */
#define MAX_COUNTER_SETS 8
#define MAX_ATTRS 32
#define MAX_TAINTS 16
#define MAX_REQUESTS 32
#define MAX_SELECTORS 32
#define MAX_SUBREQUESTS 8
#define MAX_CONSTRAINTS 32
#define MAX_TOLERATIONS 16
#define MAX_CONFIG 32
#define MAX_RESERVED 256
#define MAX_CEL_BYTES 10240
#define MAX_ATTR_STRING 64

static void each(struct gs_dec *dc, const json_t *obj, const char *key, size_t max,
                 void (*fn)(struct gs_dec *, const json_t *, void *), void *arg)
{
    json_t *arr = gs__dec_get(dc, obj, key, JSON_ARRAY);
    if (!arr) return;
    size_t m = gs__dec_key(dc, key), i;
    if (max && json_array_size(arr) > max) gs__dec_err(dc, "must have at most %zu items, got %zu", max, json_array_size(arr));
    json_t *e;
    json_array_foreach(arr, i, e) {
        size_t m2 = gs__dec_idx(dc, i);
        if (gs__dec_is(dc, e, JSON_OBJECT)) fn(dc, e, arg);
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

static const char *required_str(struct gs_dec *dc, const json_t *obj, const char *key)
{
    const char *s = gs__dec_str(dc, obj, key);
    if (!s && !json_object_get(obj, key)) gs__dec_err_at(dc, key, "is required");
    else if (s && !*s) gs__dec_err_at(dc, key, "must not be empty");
    return s && *s ? s : NULL;
}

static void check_dns(struct gs_dec *dc, const json_t *obj, const char *key, bool label, bool required)
{
    const char *s = required ? required_str(dc, obj, key) : gs__dec_str(dc, obj, key), *why;
    if (s && (why = gs__dns_check(s, label))) gs__dec_err_at(dc, key, "invalid name \"%s\": %s", s, why);
}

/* A C identifier of at most 32 characters; NULL or why not. */
static const char *identifier_check(const char *s)
{
    size_t n = strlen(s);
    if (!n) return "must not be empty";
    if (n > 32) return "the name must be no more than 32 characters";
    if (!isalpha((unsigned char)s[0]) && s[0] != '_') return "the name must start with a letter or '_'";
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_')
            return "the name must consist of alphanumeric characters or '_' (a C identifier)";
    return NULL;
}

/* QualifiedName: "<identifier>" or "<dns subdomain of at most 63>/<identifier>";
 * full: the domain is required (FullyQualifiedName). NULL or why not. */
static const char *qualified_check(const char *s, bool full)
{
    const char *slash = strchr(s, '/');
    if (!slash) return full ? "must include a domain (\"<domain>/<name>\")" : identifier_check(s);
    size_t dl = (size_t)(slash - s);
    if (dl == 0) return "the domain must not be empty";
    if (dl > 63) return "the domain must be no more than 63 characters";
    char dom[64];
    memcpy(dom, s, dl);
    dom[dl] = 0;
    const char *why = gs__dns_check(dom, false);
    if (why) return "the domain must be a DNS subdomain: lower case alphanumeric characters, '-' or '.'";
    return identifier_check(slash + 1);
}

static void qualified_key(struct gs_dec *dc, const char *k, bool full)
{
    const char *why = qualified_check(k, full);
    if (why) gs__dec_err(dc, "invalid name \"%s\": %s", k, why);
}

/* Semantic version MAJOR.MINOR.PATCH[-pre][+build], without leading zeros. */
static bool semver_ok(const char *s)
{
    for (int part = 0; part < 3; part++) {
        if (!isdigit((unsigned char)*s)) return false;
        if (*s == '0' && isdigit((unsigned char)s[1])) return false;
        while (isdigit((unsigned char)*s)) s++;
        if (part < 2 && *s++ != '.') return false;
    }
    if (*s == '-') {
        s++;
        if (!*s || *s == '+') return false;
        while (*s && *s != '+') {
            if (!isalnum((unsigned char)*s) && *s != '-' && *s != '.') return false;
            s++;
        }
    }
    if (*s == '+') {
        s++;
        if (!*s) return false;
        for (; *s; s++)
            if (!isalnum((unsigned char)*s) && *s != '-' && *s != '.') return false;
    }
    return *s == 0;
}

/*--- Selectors, tolerations, taints ---*/

static void cel_selector(struct gs_dec *dc, const json_t *s, void *arg)
{
    (void)arg;
    json_t *cel = gs__dec_get(dc, s, "cel", JSON_OBJECT);
    if (!cel) {
        if (!json_object_get(s, "cel")) gs__dec_err_at(dc, "cel", "is required");
        return;
    }
    size_t m = gs__dec_key(dc, "cel");
    const char *e = required_str(dc, cel, "expression");
    struct gs_cel_program *prog = NULL;
    struct gs_cel_error ce = {0};
    if (e && strlen(e) > MAX_CEL_BYTES)
        gs__dec_err_at(dc, "expression", "must be at most %d bytes, got %zu", MAX_CEL_BYTES, strlen(e));
    else if (e && gs_cel_compile(e, &prog, &ce)) /* what the scheduler would refuse later, refused now */
        gs__dec_err_at(dc, "expression", "compilation failed at column %zu: %s", ce.column, ce.msg);
    gs_cel_free(prog);
    gs__dec_pop(dc, m);
}

static const char *const taint_effects[] = {"None", "NoSchedule", "NoExecute", NULL};
static const char *const toleration_effects[] = {"NoSchedule", "NoExecute", NULL};
static const char *const toleration_ops[] = {"Exists", "Equal", NULL};

static void device_taint(struct gs_dec *dc, const json_t *t, void *arg)
{
    (void)arg;
    const char *key = required_str(dc, t, "key"), *why;
    if (key && (why = qualified_check(key, false))) gs__dec_err_at(dc, "key", "invalid key \"%s\": %s", key, why);
    const char *v = gs__dec_str(dc, t, "value");
    if (v && strlen(v) > 63) gs__dec_err_at(dc, "value", "\"%.32s...\": must be no more than 63 characters", v);
    if (!json_object_get(t, "effect")) gs__dec_err_at(dc, "effect", "is required");
    else gs__dec_enum(dc, t, "effect", taint_effects, NULL);
    gs__dec_str(dc, t, "timeAdded");
}

static void device_toleration(struct gs_dec *dc, const json_t *t, void *arg)
{
    (void)arg;
    const char *op = "Equal", *key = gs__dec_str(dc, t, "key"), *why;
    if (json_object_get(t, "operator")) gs__dec_enum(dc, t, "operator", toleration_ops, &op);
    if (key && *key && (why = qualified_check(key, false)))
        gs__dec_err_at(dc, "key", "invalid key \"%s\": %s", key, why);
    if ((!key || !*key) && strcmp(op, "Exists"))
        gs__dec_err_at(dc, "operator", "must be Exists when key is empty (to tolerate every taint)");
    if (!strcmp(op, "Exists") && gs__dec_str(dc, t, "value") && *gs__dec_str(dc, t, "value"))
        gs__dec_err_at(dc, "value", "must be empty when operator is Exists");
    if (json_object_get(t, "effect") && json_string_value(json_object_get(t, "effect")) &&
        *json_string_value(json_object_get(t, "effect")))
        gs__dec_enum(dc, t, "effect", toleration_effects, NULL);
    int64_t s;
    gs__dec_int(dc, t, "tolerationSeconds", INT64_MIN, INT64_MAX, &s);
}

/*--- ResourceSlice ---*/

static void attributes(struct gs_dec *dc, const json_t *attrs)
{
    const char *k;
    json_t *a;
    json_object_foreach((json_t *)attrs, k, a) {
        size_t m = gs__dec_key(dc, k);
        qualified_key(dc, k, false);
        if (gs__dec_is(dc, a, JSON_OBJECT)) {
            static const char *const fields[] = {"int", "bool", "string", "version", "ints", "bools", "strings", "versions"};
            int n = 0;
            for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) n += json_object_get(a, fields[i]) != NULL;
            if (n != 1) gs__dec_err(dc, "exactly one of int, bool, string or version must be set, got %d", n);
            int64_t iv;
            gs__dec_int(dc, a, "int", INT64_MIN, INT64_MAX, &iv);
            bool bv;
            gs__dec_bool(dc, a, "bool", &bv);
            const char *s = gs__dec_str(dc, a, "string");
            if (s && strlen(s) > MAX_ATTR_STRING)
                gs__dec_err_at(dc, "string", "\"%.32s...\": must be no more than %d characters", s, MAX_ATTR_STRING);
            const char *v = gs__dec_str(dc, a, "version");
            if (v && !semver_ok(v))
                gs__dec_err_at(dc, "version", "\"%.64s\": must be a semantic version (MAJOR.MINOR.PATCH, no leading "
                               "zeros)", v);
        }
        gs__dec_pop(dc, m);
    }
}

/* A map of names to {value: Quantity} (capacity, counters). */
static void quantity_map(struct gs_dec *dc, const json_t *caps, bool qualified)
{
    const char *k;
    json_t *c;
    json_object_foreach((json_t *)caps, k, c) {
        size_t m = gs__dec_key(dc, k);
        if (qualified) qualified_key(dc, k, false);
        else if (identifier_check(k)) gs__dec_err(dc, "invalid name \"%s\": %s", k, identifier_check(k));
        if (gs__dec_is(dc, c, JSON_OBJECT)) {
            int64_t q;
            if (!gs__dec_quantity_at(dc, c, "value", &q) && !json_object_get(c, "value"))
                gs__dec_err_at(dc, "value", "is required");
        }
        gs__dec_pop(dc, m);
    }
}

static void counter_use(struct gs_dec *dc, const json_t *u, void *arg)
{
    (void)arg;
    check_dns(dc, u, "counterSet", true, true);
    json_t *c = gs__dec_get(dc, u, "counters", JSON_OBJECT);
    if (!c && !json_object_get(u, "counters")) gs__dec_err_at(dc, "counters", "is required");
    size_t m = gs__dec_key(dc, "counters");
    if (c) quantity_map(dc, c, false);
    gs__dec_pop(dc, m);
}

static void counter_set(struct gs_dec *dc, const json_t *s, void *arg)
{
    (void)arg;
    check_dns(dc, s, "name", true, true);
    json_t *c = gs__dec_get(dc, s, "counters", JSON_OBJECT);
    if (!json_object_size(c)) gs__dec_err_at(dc, "counters", "is required and must not be empty");
    size_t m = gs__dec_key(dc, "counters");
    if (c) quantity_map(dc, c, false);
    gs__dec_pop(dc, m);
}

static void slice_device(struct gs_dec *dc, const json_t *d, void *arg)
{
    (void)arg;
    check_dns(dc, d, "name", true, true);
    const json_t *body = d;
    size_t m = dc->len;
    json_t *basic = gs__dec_get(dc, d, "basic", JSON_OBJECT); /* v1beta1 wraps the data */
    if (basic) {
        gs__dec_key(dc, "basic");
        body = basic;
    }
    json_t *attrs = gs__dec_get(dc, body, "attributes", JSON_OBJECT);
    json_t *caps = gs__dec_get(dc, body, "capacity", JSON_OBJECT);
    size_t na = json_object_size(attrs), nc = json_object_size(caps);
    if (na + nc > MAX_ATTRS)
        gs__dec_err(dc, "at most %d attributes and capacities together, got %zu", MAX_ATTRS, na + nc);
    size_t m2 = gs__dec_key(dc, "attributes");
    if (attrs) attributes(dc, attrs);
    gs__dec_pop(dc, m2);
    m2 = gs__dec_key(dc, "capacity");
    if (caps) quantity_map(dc, caps, true);
    gs__dec_pop(dc, m2);
    each(dc, body, "taints", MAX_TAINTS, device_taint, NULL);
    each(dc, body, "consumesCounters", MAX_COUNTER_SETS, counter_use, NULL);
    bool b;
    gs__dec_bool(dc, body, "allowMultipleAllocations", &b);
    gs__dec_pop(dc, m);
}

/* Does any device use taints or counters (the lower device limit)? */
static bool advanced(const json_t *devs)
{
    size_t i;
    json_t *d;
    json_array_foreach(devs, i, d) {
        const json_t *b = json_is_object(json_object_get(d, "basic")) ? json_object_get(d, "basic") : d;
        if (json_array_size(json_object_get(b, "taints")) || json_array_size(json_object_get(b, "consumesCounters")))
            return true;
    }
    return false;
}

static void names_unique(struct gs_dec *dc, const json_t *arr, const char *list, const char *what)
{
    for (size_t i = 0; i < json_array_size(arr); i++)
        for (size_t j = 0; j < i; j++) {
            const char *a = json_string_value(json_object_get(json_array_get(arr, i), "name"));
            const char *b = json_string_value(json_object_get(json_array_get(arr, j), "name"));
            if (a && b && !strcmp(a, b)) {
                size_t m = gs__dec_key(dc, list);
                gs__dec_idx(dc, i);
                gs__dec_err_at(dc, "name", "duplicate %s name \"%s\" (also at index %zu)", what, a, j);
                gs__dec_pop(dc, m);
                break;
            }
        }
}

static void validate_slice(const json_t *spec, struct gs_dec *dc)
{
    const char *drv = required_str(dc, spec, "driver"), *why;
    if (drv && (why = gs__dns_check(drv, false))) gs__dec_err_at(dc, "driver", "invalid driver \"%s\": %s", drv, why);
    else if (drv && strlen(drv) > 63) gs__dec_err_at(dc, "driver", "\"%s\": must be no more than 63 characters", drv);
    json_t *pool = gs__dec_get(dc, spec, "pool", JSON_OBJECT);
    if (!pool && !json_object_get(spec, "pool")) gs__dec_err_at(dc, "pool", "is required");
    if (pool) {
        size_t m = gs__dec_key(dc, "pool");
        int64_t v;
        required_str(dc, pool, "name");
        gs__dec_int(dc, pool, "generation", 0, INT64_MAX, &v);
        if (!gs__dec_int(dc, pool, "resourceSliceCount", 1, INT64_MAX, &v) &&
            !json_object_get(pool, "resourceSliceCount"))
            gs__dec_err_at(dc, "resourceSliceCount", "is required");
        gs__dec_pop(dc, m);
    }
    bool all = false, per = false;
    gs__dec_bool(dc, spec, "allNodes", &all);
    gs__dec_bool(dc, spec, "perDeviceNodeSelection", &per);
    const char *node = gs__dec_str(dc, spec, "nodeName");
    int n = (node != NULL) + (gs__dec_get(dc, spec, "nodeSelector", JSON_OBJECT) != NULL) + all + per;
    if (n != 1)
        gs__dec_err(dc, "exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection must be set, got %d",
                    n);
    if (node && (why = gs__dns_check(node, false)))
        gs__dec_err_at(dc, "nodeName", "invalid node name \"%s\": %s", node, why);
    json_t *devs = json_object_get(spec, "devices"), *sets = json_object_get(spec, "sharedCounters");
    bool adv = json_array_size(sets) || advanced(devs);
    each(dc, spec, "devices", adv ? MAX_SLICE_DEVICES_ADVANCED : MAX_SLICE_DEVICES, slice_device, NULL);
    if (adv && json_array_size(devs) > MAX_SLICE_DEVICES_ADVANCED && json_array_size(devs) <= MAX_SLICE_DEVICES)
        gs__dec_err_at(dc, "devices", "(taints or counters are used: at most 64 devices per slice)");
    each(dc, spec, "sharedCounters", MAX_COUNTER_SETS, counter_set, NULL);
    if (json_array_size(devs) && json_array_size(sets))
        gs__dec_err_at(dc, "sharedCounters", "a slice has either devices or sharedCounters, not both");
    names_unique(dc, devs, "devices", "device");
    names_unique(dc, sets, "sharedCounters", "counter set");
}

/*--- DeviceClass ---*/

static void opaque_config(struct gs_dec *dc, const json_t *c, void *arg)
{
    const json_t *requests = arg; /* the claim's request names, or NULL for a class */
    json_t *op = gs__dec_get(dc, c, "opaque", JSON_OBJECT);
    if (!op && !json_object_get(c, "opaque")) gs__dec_err_at(dc, "opaque", "is required");
    if (op) {
        size_t m = gs__dec_key(dc, "opaque");
        check_dns(dc, op, "driver", false, true);
        if (!json_object_get(op, "parameters")) gs__dec_err_at(dc, "parameters", "is required");
        gs__dec_pop(dc, m);
    }
    json_t *reqs = requests ? gs__dec_get(dc, c, "requests", JSON_ARRAY) : NULL, *r;
    size_t i;
    json_array_foreach(reqs, i, r) {
        const char *s = json_string_value(r);
        if (s && !json_object_get(requests, s)) {
            size_t m = gs__dec_key(dc, "requests");
            gs__dec_idx(dc, i);
            gs__dec_err(dc, "\"%s\": not the name of a request (or \"<request>/<subrequest>\") of this claim", s);
            gs__dec_pop(dc, m);
        }
    }
}

static void validate_class(const json_t *spec, struct gs_dec *dc)
{
    each(dc, spec, "selectors", MAX_SELECTORS, cel_selector, NULL);
    each(dc, spec, "config", MAX_CONFIG, opaque_config, NULL);
    const char *ext = gs__dec_str(dc, spec, "extendedResourceName");
    if (ext) {
        const char *slash = strchr(ext, '/'), *why = NULL;
        char dom[254] = "";
        if (slash && (size_t)(slash - ext) < sizeof dom) memcpy(dom, ext, (size_t)(slash - ext));
        if (!slash || !slash[1]) why = "must be \"<domain>/<name>\", like nvidia.com/gpu";
        else if (gs__dns_check(dom, false)) why = "the domain must be a DNS subdomain";
        else if (!strcmp(dom, "kubernetes.io") || strstr(dom, ".kubernetes.io"))
            why = "names in the kubernetes.io domain are not extended resources";
        else if (!strncmp(ext, "requests.", 9)) why = "must not start with \"requests.\"";
        else if (strlen(slash + 1) > 63) why = "the name must be no more than 63 characters";
        if (why) gs__dec_err_at(dc, "extendedResourceName", "invalid value \"%s\": %s", ext, why);
    }
}

/*--- ResourceClaim ---*/

/* ExactDeviceRequest / DeviceSubRequest / v1beta1 DeviceRequest fields. */
static void exact_request(struct gs_dec *dc, const json_t *r, bool sub)
{
    check_dns(dc, r, "deviceClassName", false, true);
    each(dc, r, "selectors", MAX_SELECTORS, cel_selector, NULL);
    static const char *const modes[] = {"ExactCount", "All", NULL};
    const char *mode = "ExactCount";
    if (json_object_get(r, "allocationMode")) gs__dec_enum(dc, r, "allocationMode", modes, &mode);
    int64_t count;
    if (gs__dec_int(dc, r, "count", 1, INT64_MAX, &count) && !strcmp(mode, "All"))
        gs__dec_err_at(dc, "count", "must not be set when allocationMode is All");
    bool b;
    if (sub && json_object_get(r, "adminAccess")) gs__dec_err_at(dc, "adminAccess", "is not allowed in a subrequest");
    else gs__dec_bool(dc, r, "adminAccess", &b);
    each(dc, r, "tolerations", MAX_TOLERATIONS, device_toleration, NULL);
    json_t *cap = gs__dec_get(dc, r, "capacity", JSON_OBJECT);
    json_t *creq = cap ? gs__dec_get(dc, cap, "requests", JSON_OBJECT) : NULL;
    if (creq) {
        size_t m = gs__dec_key(dc, "capacity"), m2 = gs__dec_key(dc, "requests");
        const char *k;
        json_t *q;
        json_object_foreach(creq, k, q) {
            size_t m3 = gs__dec_key(dc, k);
            qualified_key(dc, k, false);
            int64_t milli;
            gs__dec_quantity(dc, q, &milli);
            gs__dec_pop(dc, m3);
        }
        gs__dec_pop(dc, m2);
        gs__dec_pop(dc, m);
    }
}

static void subrequest(struct gs_dec *dc, const json_t *r, void *arg)
{
    (void)arg;
    check_dns(dc, r, "name", true, true);
    exact_request(dc, r, true);
}

static void device_request(struct gs_dec *dc, const json_t *r, void *arg)
{
    bool v1beta1 = *(bool *)arg;
    check_dns(dc, r, "name", true, true);
    if (v1beta1 && !json_object_get(r, "firstAvailable")) {
        exact_request(dc, r, false);
        return;
    }
    json_t *exactly = json_object_get(r, "exactly"), *first = json_object_get(r, "firstAvailable");
    if (!v1beta1 && (!exactly) == (!first))
        gs__dec_err(dc, "exactly one of exactly or firstAvailable must be set, got %s",
                    exactly ? "both" : "neither");
    json_t *ex = gs__dec_get(dc, r, "exactly", JSON_OBJECT);
    if (ex) {
        size_t m = gs__dec_key(dc, "exactly");
        exact_request(dc, ex, false);
        gs__dec_pop(dc, m);
    }
    if (first && json_is_array(first) && !json_array_size(first))
        gs__dec_err_at(dc, "firstAvailable", "must have at least one subrequest");
    each(dc, r, "firstAvailable", MAX_SUBREQUESTS, subrequest, NULL);
    names_unique(dc, json_object_get(r, "firstAvailable"), "firstAvailable", "subrequest");
}

static void device_constraint(struct gs_dec *dc, const json_t *c, void *arg)
{
    const json_t *requests = arg;
    json_t *reqs = gs__dec_get(dc, c, "requests", JSON_ARRAY), *r;
    size_t i;
    json_array_foreach(reqs, i, r) {
        const char *s = json_string_value(r);
        size_t m = gs__dec_key(dc, "requests");
        gs__dec_idx(dc, i);
        if (!s) gs__dec_err(dc, "expected a string, got %s", gs__json_type_name(r));
        else if (!json_object_get(requests, s))
            gs__dec_err(dc, "\"%s\": not the name of a request (or \"<request>/<subrequest>\") of this claim", s);
        gs__dec_pop(dc, m);
    }
    const char *ma = gs__dec_str(dc, c, "matchAttribute"), *da = gs__dec_str(dc, c, "distinctAttribute"), *why;
    if ((ma != NULL) == (da != NULL))
        gs__dec_err(dc, "exactly one of matchAttribute or distinctAttribute must be set, got %s",
                    ma ? "both" : "neither");
    if (ma && (why = qualified_check(ma, true)))
        gs__dec_err_at(dc, "matchAttribute", "invalid name \"%s\": %s", ma, why);
    if (da && (why = qualified_check(da, true)))
        gs__dec_err_at(dc, "distinctAttribute", "invalid name \"%s\": %s", da, why);
}

/* The names a constraint or config may refer to: requests and "<request>/<sub>". */
static json_t *request_names(const json_t *reqs)
{
    json_t *names = json_object(), *r, *s;
    size_t i, j;
    json_array_foreach(reqs, i, r) {
        const char *n = json_string_value(json_object_get(r, "name"));
        if (!n) continue;
        json_object_set_new(names, n, json_true());
        json_array_foreach(json_object_get(r, "firstAvailable"), j, s) {
            const char *sn = json_string_value(json_object_get(s, "name"));
            char full[160];
            if (sn && snprintf(full, sizeof full, "%s/%s", n, sn) < (int)sizeof full)
                json_object_set_new(names, full, json_true());
        }
    }
    return names;
}

static void claim_spec(const json_t *spec, bool v1beta1, struct gs_dec *dc)
{
    json_t *devs = gs__dec_get(dc, spec, "devices", JSON_OBJECT);
    if (!devs) return;
    size_t m = gs__dec_key(dc, "devices");
    json_t *reqs = json_object_get(devs, "requests"), *names = request_names(reqs);
    each(dc, devs, "requests", MAX_REQUESTS, device_request, &v1beta1);
    names_unique(dc, reqs, "requests", "request");
    each(dc, devs, "constraints", MAX_CONSTRAINTS, device_constraint, names);
    each(dc, devs, "config", MAX_CONFIG, opaque_config, names);
    json_decref(names);
    gs__dec_pop(dc, m);
}

static void result(struct gs_dec *dc, const json_t *r, void *arg)
{
    (void)arg;
    required_str(dc, r, "request");
    check_dns(dc, r, "driver", false, true);
    required_str(dc, r, "pool");
    check_dns(dc, r, "device", true, true);
    bool b;
    gs__dec_bool(dc, r, "adminAccess", &b);
}

static void reserved(struct gs_dec *dc, const json_t *r, void *arg)
{
    (void)arg;
    required_str(dc, r, "resource");
    required_str(dc, r, "name");
    required_str(dc, r, "uid");
}

static void claim_status(const json_t *doc, struct gs_dec *dc)
{
    json_t *st = json_object_get(doc, "status");
    if (!st || json_is_null(st) || !(st = gs__dec_get(dc, doc, "status", JSON_OBJECT))) return;
    size_t m = gs__dec_key(dc, "status");
    json_t *alloc = gs__dec_get(dc, st, "allocation", JSON_OBJECT);
    if (alloc) {
        size_t m2 = gs__dec_key(dc, "allocation");
        json_t *devs = gs__dec_get(dc, alloc, "devices", JSON_OBJECT);
        if (devs) {
            size_t m3 = gs__dec_key(dc, "devices");
            each(dc, devs, "results", MAX_REQUESTS * 128, result, NULL);
            gs__dec_pop(dc, m3);
        }
        gs__dec_pop(dc, m2);
    }
    each(dc, st, "reservedFor", MAX_RESERVED, reserved, NULL);
    gs__dec_pop(dc, m);
}

/*--- DeviceTaintRule ---*/

static void validate_taint_rule(const json_t *spec, struct gs_dec *dc)
{
    json_t *sel = gs__dec_get(dc, spec, "deviceSelector", JSON_OBJECT);
    if (sel) {
        size_t m = gs__dec_key(dc, "deviceSelector");
        check_dns(dc, sel, "driver", false, false);
        gs__dec_str(dc, sel, "pool");
        check_dns(dc, sel, "device", true, false);
        gs__dec_pop(dc, m);
    }
    json_t *t = gs__dec_get(dc, spec, "taint", JSON_OBJECT);
    if (!t) {
        if (!json_object_get(spec, "taint")) gs__dec_err_at(dc, "taint", "is required");
        return;
    }
    size_t m = gs__dec_key(dc, "taint");
    device_taint(dc, t, NULL);
    gs__dec_pop(dc, m);
}

/*--- Dispatch ---*/

void gs__dra_validate(enum gs_kind k, const char *api_version, const json_t *spec, struct gs_dec *dc)
{
    bool v1beta1 = api_version && !strcmp(api_version, "resource.k8s.io/v1beta1");
    switch (k) {
    case GS_KIND_RESOURCESLICE: validate_slice(spec, dc); break;
    case GS_KIND_DEVICECLASS: validate_class(spec, dc); break;
    case GS_KIND_RESOURCECLAIM: claim_spec(spec, v1beta1, dc); break;
    case GS_KIND_RESOURCECLAIMTEMPLATE: {
        gs__dec_get(dc, spec, "metadata", JSON_OBJECT);
        json_t *inner = gs__dec_get(dc, spec, "spec", JSON_OBJECT);
        if (!inner && !json_object_get(spec, "spec")) gs__dec_err_at(dc, "spec", "is required");
        if (inner) {
            size_t m = gs__dec_key(dc, "spec");
            claim_spec(inner, v1beta1, dc);
            gs__dec_pop(dc, m);
        }
        break;
    }
    case GS_KIND_DEVICETAINTRULE: validate_taint_rule(spec, dc); break;
    default: break;
    }
}

void gs__dra_validate_status(enum gs_kind k, const json_t *doc, struct gs_dec *dc)
{
    if (k == GS_KIND_RESOURCECLAIM) claim_status(doc, dc);
}
