/*
 * dra.c - decoding the resource.k8s.io kinds into the shapes of dra.h.
 *
 * The API server's validation (kinds.c) decides what may be stored; this file
 * turns a stored object into what the allocator needs and nothing else, with
 * the same field paths in its messages. It is stricter in one way: a field the
 * allocator cannot honour (consumable capacity requests, list attributes,
 * nodeSelector on labels) is an error naming the field, never ignored, so a
 * claim is never allocated as if it had asked for less.
 *
 * The three API versions differ only in where fields live: v1beta1 wraps
 * device data in `basic` and puts request fields directly on the request.
 * Both layouts are accepted whatever the apiVersion says, because the bodies
 * cannot be mistaken for one another.
 *
 * Decoding goes through the gs__dec helpers (decode.h): every problem is
 * collected with its path, so one pass reports all of a document's faults.
 */
#include "core/dra.h"

#include "core/decode.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*--- Small helpers ---*/

struct ddec {
    struct gs_dec dc;
    bool cel_failed; /* a selector did not compile: GS_EPARSE */
};

static const char *req_str(struct gs_dec *dc, const json_t *obj, const char *key)
{
    const char *s = gs__dec_str(dc, obj, key);
    if (!s && !(obj && json_object_get(obj, key) && !json_is_null(json_object_get(obj, key))))
        gs__dec_err_at(dc, key, "is required");
    else if (s && !*s) gs__dec_err_at(dc, key, "must not be empty");
    return s && *s ? s : NULL;
}

static char *dup_or_oom(struct gs_dec *dc, const char *s)
{
    if (!s) return NULL;
    char *r = strdup(s);
    if (!r) dc->oom = true;
    return r;
}

static void *calloc_or_oom(struct gs_dec *dc, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) dc->oom = true;
    return p;
}

static bool is_ident(const char *s, size_t n)
{
    if (!n || n > 32 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return false;
    return true;
}

/* Splits a qualified name ("domain/id" or "id" in default_domain) into two
 * fresh strings; reports at the current path when invalid. */
static bool split_qualified(struct gs_dec *dc, const char *q, const char *default_domain, char **domain, char **name)
{
    const char *slash = strchr(q, '/');
    const char *id = slash ? slash + 1 : q;
    if (slash) {
        size_t dl = (size_t)(slash - q);
        char dom[256];
        if (dl == 0 || dl > 63 || dl >= sizeof dom) {
            gs__dec_err(dc, "invalid name \"%s\": the domain must be 1 to 63 characters", q);
            return false;
        }
        memcpy(dom, q, dl);
        dom[dl] = 0;
        const char *why = gs__dns_check(dom, false);
        if (why) {
            gs__dec_err(dc, "invalid name \"%s\": domain: %s", q, why);
            return false;
        }
    } else if (!default_domain) {
        gs__dec_err(dc, "invalid name \"%s\": must be fully qualified (<domain>/<name>)", q);
        return false;
    }
    if (!is_ident(id, strlen(id))) {
        gs__dec_err(dc, "invalid name \"%s\": \"%s\" must be a C identifier of at most 32 characters", q, id);
        return false;
    }
    *domain = slash ? strndup(q, (size_t)(slash - q)) : strdup(default_domain);
    *name = strdup(id);
    if (!*domain || !*name) {
        free(*domain);
        free(*name);
        *domain = *name = NULL;
        dc->oom = true;
        return false;
    }
    return true;
}

/* RFC 3339 ("2026-01-02T03:04:05Z", fractions and offsets allowed) to Unix seconds. */
static bool parse_rfc3339(const char *s, int64_t *out)
{
    int y, mo, d, h, mi, se, n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) != 6 || n != 19) return false;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60 || y < 1970) return false;
    const char *p = s + n;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p)) return false;
        while (isdigit((unsigned char)*p)) p++;
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om, m2 = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &m2) != 2 || m2 != 5 || oh > 23 || om > 59) return false;
        off = (int64_t)(oh * 3600 + om * 60) * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return false;
    }
    if (*p) return false;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = se};
    *out = (int64_t)timegm(&tm) - off;
    return true;
}

static void format_rfc3339(int64_t t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&tt, &tm)) tm = (struct tm){.tm_year = 70, .tm_mday = 1};
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

const char *gs_dra_effect_name(int effect)
{
    switch (effect) {
    case GS_DRA_EFFECT_NONE: return "None";
    case GS_DRA_EFFECT_NO_SCHEDULE: return "NoSchedule";
    case GS_DRA_EFFECT_NO_EXECUTE: return "NoExecute";
    default: return "";
    }
}

static int effect_of(const char *s)
{
    if (!strcmp(s, "None")) return GS_DRA_EFFECT_NONE;
    if (!strcmp(s, "NoSchedule")) return GS_DRA_EFFECT_NO_SCHEDULE;
    return GS_DRA_EFFECT_NO_EXECUTE;
}

/* The array member key (NULL when absent), reporting a wrong type or more
 * than max items. */
static json_t *get_array(struct gs_dec *dc, const json_t *obj, const char *key, size_t max)
{
    json_t *a = gs__dec_get(dc, obj, key, JSON_ARRAY);
    if (a && max && json_array_size(a) > max)
        gs__dec_err_at(dc, key, "must have at most %zu items, got %zu", max, json_array_size(a));
    return a;
}

static const char *meta_str(struct gs_dec *dc, const json_t *obj, const char *key, bool required)
{
    json_t *meta = gs__dec_get(dc, obj, "metadata", JSON_OBJECT);
    size_t m = gs__dec_key(dc, "metadata");
    const char *s = required ? req_str(dc, meta, key) : gs__dec_str(dc, meta, key);
    gs__dec_pop(dc, m);
    return s;
}

static const json_t *get_spec(struct gs_dec *dc, const json_t *obj)
{
    json_t *spec = gs__dec_get(dc, obj, "spec", JSON_OBJECT);
    if (!spec && !json_object_get(obj, "spec")) gs__dec_err_at(dc, "spec", "is required");
    return spec;
}

/* The start of every top-level decoder: dc ready, obj an object (else that error). */
static bool dec_begin(struct gs_dec *dc, struct gs_diags *d, const json_t *obj)
{
    gs__dec_init(dc, d);
    if (json_is_object(obj)) return true;
    gs__dec_err(dc, "expected an object, got %s", obj ? gs__json_type_name(obj) : "nothing");
    return false;
}

static void check_api(struct gs_dec *dc, const json_t *obj, const char *kind)
{
    const char *api = gs__dec_str(dc, obj, "apiVersion");
    if (api && strcmp(api, "resource.k8s.io/v1") && strcmp(api, "resource.k8s.io/v1beta2") &&
        strcmp(api, "resource.k8s.io/v1beta1"))
        gs__dec_err_at(dc, "apiVersion", "invalid value \"%s\": %s is served as resource.k8s.io/v1, v1beta2 or v1beta1",
                       api, kind);
    const char *k = gs__dec_str(dc, obj, "kind");
    if (k && strcmp(k, kind)) gs__dec_err_at(dc, "kind", "invalid value \"%s\": expected %s", k, kind);
}

static int finish(struct ddec *x)
{
    if (x->dc.oom) return GS_ENOMEM;
    if (x->dc.nerr) return x->cel_failed ? GS_EPARSE : GS_EINVAL;
    return 0;
}

/*--- Selectors and tolerations ---*/

static void selectors_decode(struct ddec *x, const json_t *obj, struct gs_dra_selector **out, size_t *n)
{
    struct gs_dec *dc = &x->dc;
    json_t *arr = get_array(dc, obj, "selectors", 32);
    *out = NULL;
    *n = 0;
    if (!arr || !json_array_size(arr)) return;
    struct gs_dra_selector *v = calloc_or_oom(dc, json_array_size(arr), sizeof *v);
    if (!v) return;
    *out = v;
    size_t m = gs__dec_key(dc, "selectors"), i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        size_t m2 = gs__dec_idx(dc, i);
        if (!gs__dec_is(dc, e, JSON_OBJECT)) goto next;
        json_t *cel = gs__dec_get(dc, e, "cel", JSON_OBJECT);
        if (!cel) {
            if (!json_object_get(e, "cel")) gs__dec_err_at(dc, "cel", "is required");
            goto next;
        }
        size_t m3 = gs__dec_key(dc, "cel");
        const char *expr = req_str(dc, cel, "expression");
        if (expr && strlen(expr) > 10240) {
            gs__dec_err_at(dc, "expression", "must be at most 10240 bytes, got %zu", strlen(expr));
        } else if (expr) {
            struct gs_cel_error err = {0};
            struct gs_cel_program *p = NULL;
            int rc = gs_cel_compile(expr, &p, &err);
            if (rc == GS_ENOMEM) {
                dc->oom = true;
            } else if (rc) {
                gs__dec_err_at(dc, "expression", "column %zu: %s", err.column, err.msg);
                x->cel_failed = true;
            } else {
                v[*n].expr = dup_or_oom(dc, expr);
                v[*n].prog = p;
                (*n)++;
            }
        }
        gs__dec_pop(dc, m3);
    next:
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

static void selectors_free(struct gs_dra_selector *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].expr);
        gs_cel_free(v[i].prog);
    }
    free(v);
}

static void tolerations_decode(struct gs_dec *dc, const json_t *obj, struct gs_dra_toleration **out, size_t *n)
{
    json_t *arr = get_array(dc, obj, "tolerations", 16);
    *out = NULL;
    *n = 0;
    if (!arr || !json_array_size(arr)) return;
    struct gs_dra_toleration *v = calloc_or_oom(dc, json_array_size(arr), sizeof *v);
    if (!v) return;
    *out = v;
    size_t m = gs__dec_key(dc, "tolerations"), i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        size_t m2 = gs__dec_idx(dc, i);
        if (gs__dec_is(dc, e, JSON_OBJECT)) {
            static const char *const ops[] = {"Exists", "Equal", NULL};
            static const char *const effects[] = {"None", "NoSchedule", "NoExecute", NULL};
            const char *op = "Equal", *eff = NULL;
            if (json_object_get(e, "operator") && !json_is_null(json_object_get(e, "operator")))
                gs__dec_enum(dc, e, "operator", ops, &op);
            const char *key = gs__dec_str(dc, e, "key"), *val = gs__dec_str(dc, e, "value");
            if (!strcmp(op, "Exists") && val && *val)
                gs__dec_err_at(dc, "value", "invalid value \"%s\": must be empty when operator is Exists", val);
            if (!strcmp(op, "Equal") && (!key || !*key))
                gs__dec_err_at(dc, "key", "is required when operator is Equal");
            const char *es = gs__dec_str(dc, e, "effect");
            if (es && *es) gs__dec_enum(dc, e, "effect", effects, &eff);
            int64_t secs;
            gs__dec_int(dc, e, "tolerationSeconds", INT64_MIN, INT64_MAX, &secs);
            v[i].key = dup_or_oom(dc, key ? key : "");
            v[i].op = dup_or_oom(dc, op);
            v[i].value = dup_or_oom(dc, val ? val : "");
            v[i].effect = eff ? effect_of(eff) : -1;
            *n = i + 1;
        } else {
            v[i].effect = -1;
            *n = i + 1;
        }
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

static void tolerations_free(struct gs_dra_toleration *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].key);
        free(v[i].op);
        free(v[i].value);
    }
    free(v);
}

/*--- ResourceSlice ---*/

static void taint_decode(struct gs_dec *dc, const json_t *t, struct gs_dra_taint *out)
{
    static const char *const effects[] = {"None", "NoSchedule", "NoExecute", NULL};
    const char *key = req_str(dc, t, "key"), *eff = NULL;
    if (key) {
        /* A taint key is a label key: an optional DNS prefix, "/", and a name. */
        const char *slash = strchr(key, '/'), *why = NULL;
        if (strlen(key) > 316) why = "must be at most 316 characters";
        else if (slash == key) why = "the prefix before \"/\" must not be empty";
        else if (slash && !slash[1]) why = "the name after \"/\" must not be empty";
        if (why) gs__dec_err_at(dc, "key", "invalid key \"%s\": %s", key, why);
    }
    if (!gs__dec_str(dc, t, "effect") && !json_object_get(t, "effect")) gs__dec_err_at(dc, "effect", "is required");
    else gs__dec_enum(dc, t, "effect", effects, &eff);
    out->key = dup_or_oom(dc, key ? key : "");
    out->value = dup_or_oom(dc, gs__dec_str(dc, t, "value") ? gs__dec_str(dc, t, "value") : "");
    out->effect = eff ? effect_of(eff) : GS_DRA_EFFECT_NO_SCHEDULE;
    out->time_added_s = 0;
    const char *ta = gs__dec_str(dc, t, "timeAdded");
    if (ta && !parse_rfc3339(ta, &out->time_added_s))
        gs__dec_err_at(dc, "timeAdded", "invalid value \"%s\": must be an RFC 3339 time", ta);
}

static void taint_free(struct gs_dra_taint *t)
{
    free(t->key);
    free(t->value);
}

/* {NAME: {value: QUANTITY}} into names/values (n entries). */
static void counters_decode(struct gs_dec *dc, const json_t *obj, char ***names, int64_t **values, size_t *n)
{
    *names = NULL;
    *values = NULL;
    *n = 0;
    json_t *map = gs__dec_get(dc, obj, "counters", JSON_OBJECT);
    if (!map && !json_object_get(obj, "counters")) {
        gs__dec_err_at(dc, "counters", "is required");
        return;
    }
    if (!map) return;
    size_t cnt = json_object_size(map);
    if (cnt > 32) gs__dec_err_at(dc, "counters", "must have at most 32 entries, got %zu", cnt);
    *names = calloc_or_oom(dc, cnt, sizeof **names);
    *values = calloc_or_oom(dc, cnt, sizeof **values);
    if (!*names || !*values) return;
    size_t m = gs__dec_key(dc, "counters");
    const char *k;
    json_t *c;
    json_object_foreach(map, k, c) {
        size_t m2 = gs__dec_key(dc, k);
        int64_t q = 0;
        if (!is_ident(k, strlen(k)))
            gs__dec_err(dc, "invalid counter name \"%s\": must be a C identifier of at most 32 characters", k);
        if (gs__dec_is(dc, c, JSON_OBJECT)) {
            if (!json_object_get(c, "value")) gs__dec_err_at(dc, "value", "is required");
            else if (gs__dec_quantity_at(dc, c, "value", &q) && q < 0)
                gs__dec_err_at(dc, "value", "invalid quantity %" PRId64 "m: must not be negative", q);
        }
        (*names)[*n] = dup_or_oom(dc, k);
        (*values)[*n] = q;
        (*n)++;
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

static void attrs_decode(struct gs_dec *dc, const json_t *body, const char *driver, struct gs_dra_device *dev)
{
    json_t *attrs = gs__dec_get(dc, body, "attributes", JSON_OBJECT);
    json_t *caps = gs__dec_get(dc, body, "capacity", JSON_OBJECT);
    size_t na = json_object_size(attrs), nc = json_object_size(caps);
    if (na + nc > 32) gs__dec_err(dc, "at most 32 attributes and capacities together, got %zu", na + nc);
    if (na) dev->attrs = calloc_or_oom(dc, na, sizeof *dev->attrs);
    if (nc) dev->capacity = calloc_or_oom(dc, nc, sizeof *dev->capacity);
    const char *k;
    json_t *a;
    if (dev->attrs) {
        size_t m = gs__dec_key(dc, "attributes");
        json_object_foreach(attrs, k, a) {
            size_t m2 = gs__dec_key(dc, k);
            char *dom = NULL, *nm = NULL;
            if (!gs__dec_is(dc, a, JSON_OBJECT) || !split_qualified(dc, k, driver, &dom, &nm)) goto next_attr;
            static const char *const lists[] = {"ints", "bools", "strings", "versions"};
            int set = 0;
            for (size_t i = 0; i < 4; i++)
                if (json_object_get(a, lists[i])) {
                    gs__dec_err_at(dc, lists[i], "list attributes are not supported by the scheduler");
                    set = -100;
                }
            struct gs_cel_attr at = {.domain = dom, .name = nm, .kind = GS_CEL_NULL};
            json_t *v;
            if ((v = json_object_get(a, "int"))) {
                set++;
                at.kind = GS_CEL_INT;
                gs__dec_int(dc, a, "int", INT64_MIN, INT64_MAX, &at.i);
            }
            if ((v = json_object_get(a, "bool"))) {
                set++;
                at.kind = GS_CEL_BOOL;
                gs__dec_bool(dc, a, "bool", &at.b);
            }
            if ((v = json_object_get(a, "string"))) {
                set++;
                at.kind = GS_CEL_STRING;
                const char *s = gs__dec_str(dc, a, "string");
                if (s && strlen(s) > 64)
                    gs__dec_err_at(dc, "string", "must be at most 64 characters, got %zu", strlen(s));
                at.s = dup_or_oom(dc, s ? s : "");
            }
            if ((v = json_object_get(a, "version"))) {
                set++;
                at.kind = GS_CEL_VERSION;
                const char *s = gs__dec_str(dc, a, "version");
                if (s && strlen(s) > 64)
                    gs__dec_err_at(dc, "version", "must be at most 64 characters, got %zu", strlen(s));
                free((char *)at.s);
                at.s = dup_or_oom(dc, s ? s : "");
            }
            if (set == 0) gs__dec_err(dc, "exactly one of int, bool, string or version must be set, got none");
            else if (set > 1) gs__dec_err(dc, "exactly one of int, bool, string or version must be set, got %d", set);
            for (size_t i = 0; i < dev->nattrs; i++)
                if (!strcmp(dev->attrs[i].domain, dom) && !strcmp(dev->attrs[i].name, nm))
                    gs__dec_err(dc, "duplicate attribute %s/%s", dom, nm);
            dev->attrs[dev->nattrs++] = at;
            dom = nm = NULL;
        next_attr:
            free(dom);
            free(nm);
            gs__dec_pop(dc, m2);
        }
        gs__dec_pop(dc, m);
    }
    if (dev->capacity) {
        size_t m = gs__dec_key(dc, "capacity");
        json_object_foreach(caps, k, a) {
            size_t m2 = gs__dec_key(dc, k);
            char *dom = NULL, *nm = NULL;
            if (gs__dec_is(dc, a, JSON_OBJECT) && split_qualified(dc, k, driver, &dom, &nm)) {
                struct gs_cel_attr at = {.domain = dom, .name = nm, .kind = GS_CEL_QUANTITY};
                if (!json_object_get(a, "value")) gs__dec_err_at(dc, "value", "is required");
                else gs__dec_quantity_at(dc, a, "value", &at.q_milli);
                dev->capacity[dev->ncapacity++] = at;
            } else {
                free(dom);
                free(nm);
            }
            gs__dec_pop(dc, m2);
        }
        gs__dec_pop(dc, m);
    }
}

static void device_free(struct gs_dra_device *d)
{
    free(d->name);
    for (size_t i = 0; i < d->nattrs; i++) {
        free((char *)d->attrs[i].domain);
        free((char *)d->attrs[i].name);
        free((char *)d->attrs[i].s);
    }
    free(d->attrs);
    for (size_t i = 0; i < d->ncapacity; i++) {
        free((char *)d->capacity[i].domain);
        free((char *)d->capacity[i].name);
    }
    free(d->capacity);
    for (size_t i = 0; i < d->ntaints; i++) taint_free(&d->taints[i]);
    free(d->taints);
    for (size_t i = 0; i < d->nconsumes; i++) {
        free(d->consumes[i].counter_set);
        gs__strv_free(d->consumes[i].names, d->consumes[i].n);
        free(d->consumes[i].values_milli);
    }
    free(d->consumes);
    free(d->node_name);
}

static void device_decode(struct gs_dec *dc, const json_t *d, const struct gs_dra_slice *s, struct gs_dra_device *dev,
                          bool *advanced)
{
    const char *name = req_str(dc, d, "name"), *why;
    /* A DNS subdomain rather than a label: MIG device names carry the
     * profile ("gpu-0-mig-1g.10gb-19-0"). */
    if (name && (why = gs__dns_check(name, false))) gs__dec_err_at(dc, "name", "invalid name \"%s\": %s", name, why);
    dev->name = dup_or_oom(dc, name ? name : "");
    const json_t *body = d;
    size_t m = dc->len;
    json_t *basic = gs__dec_get(dc, d, "basic", JSON_OBJECT); /* v1beta1 */
    if (basic) {
        gs__dec_key(dc, "basic");
        body = basic;
    }
    attrs_decode(dc, body, s->driver ? s->driver : "", dev);
    json_t *taints = get_array(dc, body, "taints", 16);
    if (taints && json_array_size(taints)) {
        *advanced = true;
        dev->taints = calloc_or_oom(dc, json_array_size(taints), sizeof *dev->taints);
        size_t m2 = gs__dec_key(dc, "taints"), i;
        json_t *t;
        json_array_foreach(taints, i, t) {
            if (!dev->taints) break;
            size_t m3 = gs__dec_idx(dc, i);
            if (gs__dec_is(dc, t, JSON_OBJECT)) taint_decode(dc, t, &dev->taints[dev->ntaints++]);
            gs__dec_pop(dc, m3);
        }
        gs__dec_pop(dc, m2);
    }
    json_t *cons = get_array(dc, body, "consumesCounters", 8);
    if (cons && json_array_size(cons)) {
        *advanced = true;
        dev->consumes = calloc_or_oom(dc, json_array_size(cons), sizeof *dev->consumes);
        size_t m2 = gs__dec_key(dc, "consumesCounters"), i;
        json_t *c;
        json_array_foreach(cons, i, c) {
            if (!dev->consumes) break;
            size_t m3 = gs__dec_idx(dc, i);
            if (gs__dec_is(dc, c, JSON_OBJECT)) {
                struct gs_dra_counter_use *u = &dev->consumes[dev->nconsumes++];
                u->counter_set = dup_or_oom(dc, req_str(dc, c, "counterSet"));
                counters_decode(dc, c, &u->names, &u->values_milli, &u->n);
            }
            gs__dec_pop(dc, m3);
        }
        gs__dec_pop(dc, m2);
    }
    gs__dec_bool(dc, body, "allowMultipleAllocations", &dev->allow_multiple_allocations);
    if (json_object_get(body, "bindingConditions") && json_array_size(json_object_get(body, "bindingConditions")))
        gs__dec_err_at(dc, "bindingConditions", "binding conditions are not supported by the scheduler");
    const char *dn = gs__dec_str(dc, body, "nodeName");
    bool all = false;
    gs__dec_bool(dc, body, "allNodes", &all);
    bool sel = json_object_get(body, "nodeSelector") && !json_is_null(json_object_get(body, "nodeSelector"));
    if (s->per_device_nodes) {
        if ((dn != NULL) + all + sel != 1)
            gs__dec_err(dc, "exactly one of nodeName, nodeSelector or allNodes must be set with perDeviceNodeSelection");
        if (sel) gs__dec_err_at(dc, "nodeSelector", "a per-device nodeSelector is not supported by the scheduler");
        dev->node_name = dup_or_oom(dc, dn);
        dev->all_nodes = all;
    } else if (dn || all || sel) {
        gs__dec_err(dc, "nodeName, nodeSelector and allNodes may be set on a device only with perDeviceNodeSelection");
    }
    gs__dec_pop(dc, m);
}

/* nodeSelector {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values}]}]}
 * into a list of node names: the only form the allocator can match, given a node name. */
static void node_names_decode(struct gs_dec *dc, const json_t *sel, char ***out, size_t *n)
{
    json_t *terms = gs__dec_get(dc, sel, "nodeSelectorTerms", JSON_ARRAY);
    size_t m = gs__dec_key(dc, "nodeSelectorTerms"), i;
    if (!terms || !json_array_size(terms)) gs__dec_err(dc, "must have at least one term");
    json_t *t;
    json_array_foreach(terms, i, t) {
        size_t m2 = gs__dec_idx(dc, i);
        if (!gs__dec_is(dc, t, JSON_OBJECT)) goto next;
        if (json_array_size(json_object_get(t, "matchExpressions")))
            gs__dec_err_at(dc, "matchExpressions",
                           "node labels are not supported by the scheduler here; use matchFields on metadata.name");
        json_t *mf = gs__dec_get(dc, t, "matchFields", JSON_ARRAY);
        size_t m3 = gs__dec_key(dc, "matchFields"), j;
        json_t *f;
        json_array_foreach(mf, j, f) {
            size_t m4 = gs__dec_idx(dc, j);
            const char *key = gs__dec_str(dc, f, "key"), *op = gs__dec_str(dc, f, "operator");
            if (!key || strcmp(key, "metadata.name"))
                gs__dec_err_at(dc, "key", "invalid value \"%s\": only metadata.name is supported", key ? key : "");
            else if (!op || strcmp(op, "In"))
                gs__dec_err_at(dc, "operator", "invalid value \"%s\": only In is supported", op ? op : "");
            else {
                size_t nv;
                char **v = gs__dec_strv(dc, f, "values", &nv);
                char **grown = realloc(*out, (*n + nv + 1) * sizeof **out);
                if (!grown) {
                    dc->oom = true;
                    gs__strv_free(v, nv);
                } else {
                    *out = grown;
                    for (size_t k = 0; k < nv; k++) (*out)[(*n)++] = v[k];
                    free(v);
                }
            }
            gs__dec_pop(dc, m4);
        }
        gs__dec_pop(dc, m3);
    next:
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

void gs_dra_slice_free(struct gs_dra_slice *s)
{
    if (!s) return;
    free(s->name);
    free(s->driver);
    free(s->pool);
    free(s->node_name);
    for (size_t i = 0; i < s->ndevices; i++) device_free(&s->devices[i]);
    free(s->devices);
    for (size_t i = 0; i < s->ncounters; i++) {
        free(s->counters[i].name);
        gs__strv_free(s->counters[i].names, s->counters[i].n);
        free(s->counters[i].values_milli);
    }
    free(s->counters);
    gs__strv_free(s->selector_nodes, s->nselector_nodes);
    memset(s, 0, sizeof *s);
}

int gs_dra_slice_decode(const json_t *obj, struct gs_dra_slice *out, struct gs_diags *d)
{
    struct ddec x = {0};
    struct gs_dec *dc = &x.dc;
    memset(out, 0, sizeof *out);
    if (!dec_begin(dc, d, obj)) return GS_EINVAL;
    check_api(dc, obj, "ResourceSlice");
    out->name = dup_or_oom(dc, meta_str(dc, obj, "name", true));
    const json_t *spec = get_spec(dc, obj);
    if (!spec) goto done;
    size_t m = gs__dec_key(dc, "spec");
    const char *drv = req_str(dc, spec, "driver"), *why;
    if (drv && (why = gs__dns_check(drv, false))) gs__dec_err_at(dc, "driver", "invalid driver \"%s\": %s", drv, why);
    out->driver = dup_or_oom(dc, drv);
    json_t *pool = gs__dec_get(dc, spec, "pool", JSON_OBJECT);
    if (!pool && !json_object_get(spec, "pool")) gs__dec_err_at(dc, "pool", "is required");
    if (pool) {
        size_t m2 = gs__dec_key(dc, "pool");
        out->pool = dup_or_oom(dc, req_str(dc, pool, "name"));
        gs__dec_int(dc, pool, "generation", 0, INT64_MAX, &out->generation);
        if (!json_object_get(pool, "resourceSliceCount")) gs__dec_err_at(dc, "resourceSliceCount", "is required");
        else gs__dec_int(dc, pool, "resourceSliceCount", 1, INT64_MAX, &out->slice_count);
        gs__dec_pop(dc, m2);
    }
    const char *nn = gs__dec_str(dc, spec, "nodeName");
    gs__dec_bool(dc, spec, "allNodes", &out->all_nodes);
    gs__dec_bool(dc, spec, "perDeviceNodeSelection", &out->per_device_nodes);
    json_t *sel = gs__dec_get(dc, spec, "nodeSelector", JSON_OBJECT);
    int n = (nn != NULL) + (sel != NULL) + out->all_nodes + out->per_device_nodes;
    if (n != 1) gs__dec_err(dc, "exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection must be set");
    if (nn && !*nn) gs__dec_err_at(dc, "nodeName", "must not be empty");
    out->node_name = dup_or_oom(dc, nn && *nn ? nn : NULL);
    if (sel) {
        size_t m2 = gs__dec_key(dc, "nodeSelector");
        node_names_decode(dc, sel, &out->selector_nodes, &out->nselector_nodes);
        gs__dec_pop(dc, m2);
    }
    bool advanced = false;
    json_t *sc = get_array(dc, spec, "sharedCounters", 8);
    if (sc && json_array_size(sc)) {
        advanced = true;
        out->counters = calloc_or_oom(dc, json_array_size(sc), sizeof *out->counters);
        size_t m2 = gs__dec_key(dc, "sharedCounters"), i;
        json_t *c;
        json_array_foreach(sc, i, c) {
            if (!out->counters) break;
            size_t m3 = gs__dec_idx(dc, i);
            if (gs__dec_is(dc, c, JSON_OBJECT)) {
                struct gs_dra_counter_set *cs = &out->counters[out->ncounters++];
                const char *cn = req_str(dc, c, "name");
                if (cn && (why = gs__dns_check(cn, true))) gs__dec_err_at(dc, "name", "invalid name \"%s\": %s", cn, why);
                for (size_t j = 0; cn && j + 1 < out->ncounters; j++)
                    if (out->counters[j].name && !strcmp(out->counters[j].name, cn))
                        gs__dec_err_at(dc, "name", "duplicate counter set \"%s\"", cn);
                cs->name = dup_or_oom(dc, cn);
                counters_decode(dc, c, &cs->names, &cs->values_milli, &cs->n);
            }
            gs__dec_pop(dc, m3);
        }
        gs__dec_pop(dc, m2);
    }
    json_t *devs = get_array(dc, spec, "devices", 128);
    if (devs && json_array_size(devs)) {
        if (out->ncounters) gs__dec_err_at(dc, "devices", "must not be set together with sharedCounters in one slice");
        out->devices = calloc_or_oom(dc, json_array_size(devs), sizeof *out->devices);
        size_t m2 = gs__dec_key(dc, "devices"), i;
        json_t *e;
        json_array_foreach(devs, i, e) {
            if (!out->devices) break;
            size_t m3 = gs__dec_idx(dc, i);
            if (gs__dec_is(dc, e, JSON_OBJECT)) {
                struct gs_dra_device *dev = &out->devices[out->ndevices++];
                device_decode(dc, e, out, dev, &advanced);
                for (size_t j = 0; j + 1 < out->ndevices; j++)
                    if (*dev->name && !strcmp(out->devices[j].name, dev->name))
                        gs__dec_err_at(dc, "name", "duplicate device name \"%s\"", dev->name);
            }
            gs__dec_pop(dc, m3);
        }
        gs__dec_pop(dc, m2);
        if (advanced && json_array_size(devs) > 64)
            gs__dec_err_at(dc, "devices", "must have at most 64 items when taints or counters are used, got %zu",
                           json_array_size(devs));
    }
    gs__dec_pop(dc, m);
done:;
    int rc = finish(&x);
    if (rc) gs_dra_slice_free(out);
    return rc;
}

/*--- DeviceClass ---*/

static json_t *config_decode(struct gs_dec *dc, const json_t *obj, bool claim)
{
    json_t *arr = get_array(dc, obj, "config", 32);
    if (!arr) return NULL;
    size_t m = gs__dec_key(dc, "config"), i;
    json_t *c;
    json_array_foreach(arr, i, c) {
        size_t m2 = gs__dec_idx(dc, i);
        if (gs__dec_is(dc, c, JSON_OBJECT)) {
            json_t *op = gs__dec_get(dc, c, "opaque", JSON_OBJECT);
            if (!op && !json_object_get(c, "opaque")) gs__dec_err_at(dc, "opaque", "is required");
            if (op) {
                size_t m3 = gs__dec_key(dc, "opaque");
                const char *drv = req_str(dc, op, "driver"), *why;
                if (drv && (why = gs__dns_check(drv, false)))
                    gs__dec_err_at(dc, "driver", "invalid driver \"%s\": %s", drv, why);
                if (!json_object_get(op, "parameters")) gs__dec_err_at(dc, "parameters", "is required");
                gs__dec_pop(dc, m3);
            }
            if (claim) {
                size_t nr;
                char **r = gs__dec_strv(dc, c, "requests", &nr);
                gs__strv_free(r, nr);
            } else if (json_object_get(c, "requests")) {
                gs__dec_err_at(dc, "requests", "must not be set in a DeviceClass");
            }
        }
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
    return json_array_size(arr) ? json_incref(arr) : NULL;
}

void gs_dra_class_free(struct gs_dra_class *c)
{
    if (!c) return;
    free(c->name);
    selectors_free(c->selectors, c->nselectors);
    json_decref(c->config);
    free(c->extended_resource);
    memset(c, 0, sizeof *c);
}

int gs_dra_class_decode(const json_t *obj, struct gs_dra_class *out, struct gs_diags *d)
{
    struct ddec x = {0};
    struct gs_dec *dc = &x.dc;
    memset(out, 0, sizeof *out);
    if (!dec_begin(dc, d, obj)) return GS_EINVAL;
    check_api(dc, obj, "DeviceClass");
    out->name = dup_or_oom(dc, meta_str(dc, obj, "name", true));
    const json_t *spec = gs__dec_get(dc, obj, "spec", JSON_OBJECT);
    if (spec) {
        size_t m = gs__dec_key(dc, "spec");
        selectors_decode(&x, spec, &out->selectors, &out->nselectors);
        out->config = config_decode(dc, spec, false);
        const char *ern = gs__dec_str(dc, spec, "extendedResourceName");
        if (ern && (!*ern || !strchr(ern, '/') || strchr(ern, '/') == ern || !strchr(ern, '/')[1]))
            gs__dec_err_at(dc, "extendedResourceName", "invalid value \"%s\": must be <domain>/<name>", ern);
        out->extended_resource = dup_or_oom(dc, ern && *ern ? ern : NULL);
        gs__dec_pop(dc, m);
    }
    int rc = finish(&x);
    if (rc) gs_dra_class_free(out);
    return rc;
}

/*--- ResourceClaim spec ---*/

static void subrequest_decode(struct ddec *x, const json_t *r, struct gs_dra_subrequest *out, bool sub)
{
    struct gs_dec *dc = &x->dc;
    const char *cls = req_str(dc, r, "deviceClassName"), *why;
    if (cls && (why = gs__dns_check(cls, false)))
        gs__dec_err_at(dc, "deviceClassName", "invalid name \"%s\": %s", cls, why);
    out->class_name = dup_or_oom(dc, cls ? cls : "");
    selectors_decode(x, r, &out->selectors, &out->nselectors);
    static const char *const modes[] = {"ExactCount", "All", NULL};
    const char *mode = "ExactCount";
    if (json_object_get(r, "allocationMode") && !json_is_null(json_object_get(r, "allocationMode")))
        gs__dec_enum(dc, r, "allocationMode", modes, &mode);
    out->all = !strcmp(mode, "All");
    out->count = 1;
    if (gs__dec_int(dc, r, "count", 1, INT64_MAX, &out->count) && out->all)
        gs__dec_err_at(dc, "count", "must not be set when allocationMode is All");
    if (out->all) out->count = 0;
    if (sub && json_object_get(r, "adminAccess") && !json_is_null(json_object_get(r, "adminAccess")))
        gs__dec_err_at(dc, "adminAccess", "is not allowed in a subrequest");
    else gs__dec_bool(dc, r, "adminAccess", &out->admin_access);
    tolerations_decode(dc, r, &out->tolerations, &out->ntolerations);
    json_t *cap = json_object_get(r, "capacity");
    if (cap && !json_is_null(cap) && json_object_size(json_object_get(cap, "requests")))
        gs__dec_err_at(dc, "capacity", "consumable capacity requests are not supported by the scheduler");
}

static void subrequest_free(struct gs_dra_subrequest *s)
{
    free(s->name);
    free(s->class_name);
    selectors_free(s->selectors, s->nselectors);
    tolerations_free(s->tolerations, s->ntolerations);
}

static void request_decode(struct ddec *x, const json_t *r, struct gs_dra_request *out)
{
    struct gs_dec *dc = &x->dc;
    const char *name = req_str(dc, r, "name"), *why;
    if (name && (why = gs__dns_check(name, true))) gs__dec_err_at(dc, "name", "invalid name \"%s\": %s", name, why);
    out->name = dup_or_oom(dc, name ? name : "");
    json_t *exactly = gs__dec_get(dc, r, "exactly", JSON_OBJECT);
    json_t *first = get_array(dc, r, "firstAvailable", 8);
    bool flat = json_object_get(r, "deviceClassName") != NULL; /* v1beta1 */
    if ((exactly != NULL) + (first != NULL) + flat != 1) {
        if (!json_object_get(r, "exactly") && !json_object_get(r, "firstAvailable"))
            gs__dec_err(dc, "exactly one of exactly or firstAvailable must be set");
        else if (exactly || first || flat)
            gs__dec_err(dc, "exactly one of exactly or firstAvailable must be set");
        return;
    }
    if (first) {
        out->first_available = true;
        if (!json_array_size(first)) {
            gs__dec_err_at(dc, "firstAvailable", "must have at least one item");
            return;
        }
        out->alts = calloc_or_oom(dc, json_array_size(first), sizeof *out->alts);
        size_t m = gs__dec_key(dc, "firstAvailable"), i;
        json_t *e;
        json_array_foreach(first, i, e) {
            if (!out->alts) break;
            size_t m2 = gs__dec_idx(dc, i);
            if (gs__dec_is(dc, e, JSON_OBJECT)) {
                struct gs_dra_subrequest *s = &out->alts[out->nalts++];
                const char *sn = req_str(dc, e, "name");
                if (sn && (why = gs__dns_check(sn, true)))
                    gs__dec_err_at(dc, "name", "invalid name \"%s\": %s", sn, why);
                for (size_t j = 0; sn && j + 1 < out->nalts; j++)
                    if (!strcmp(out->alts[j].name, sn)) gs__dec_err_at(dc, "name", "duplicate subrequest \"%s\"", sn);
                s->name = dup_or_oom(dc, sn ? sn : "");
                subrequest_decode(x, e, s, true);
            }
            gs__dec_pop(dc, m2);
        }
        gs__dec_pop(dc, m);
        return;
    }
    out->alts = calloc_or_oom(dc, 1, sizeof *out->alts);
    if (!out->alts) return;
    out->nalts = 1;
    out->alts[0].name = dup_or_oom(dc, out->name);
    if (exactly) {
        size_t m = gs__dec_key(dc, "exactly");
        subrequest_decode(x, exactly, &out->alts[0], false);
        gs__dec_pop(dc, m);
    } else {
        subrequest_decode(x, r, &out->alts[0], false);
    }
}

static bool request_known(const struct gs_dra_claim_spec *s, const char *ref)
{
    const char *slash = strchr(ref, '/');
    size_t mlen = slash ? (size_t)(slash - ref) : strlen(ref);
    for (size_t i = 0; i < s->nrequests; i++) {
        const struct gs_dra_request *r = &s->requests[i];
        if (strlen(r->name) != mlen || strncmp(r->name, ref, mlen)) continue;
        if (!slash) return true;
        if (!r->first_available) return false;
        for (size_t j = 0; j < r->nalts; j++)
            if (!strcmp(r->alts[j].name, slash + 1)) return true;
        return false;
    }
    return false;
}

void gs_dra_claim_spec_free(struct gs_dra_claim_spec *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->nrequests; i++) {
        free(s->requests[i].name);
        for (size_t j = 0; j < s->requests[i].nalts; j++) subrequest_free(&s->requests[i].alts[j]);
        free(s->requests[i].alts);
    }
    free(s->requests);
    for (size_t i = 0; i < s->nconstraints; i++) {
        gs__strv_free(s->constraints[i].requests, s->constraints[i].nrequests);
        free(s->constraints[i].match_attr);
        free(s->constraints[i].distinct_attr);
    }
    free(s->constraints);
    json_decref(s->config);
    memset(s, 0, sizeof *s);
}

static void claim_spec_body(struct ddec *x, const json_t *spec, struct gs_dra_claim_spec *out)
{
    struct gs_dec *dc = &x->dc;
    json_t *devs = gs__dec_get(dc, spec, "devices", JSON_OBJECT);
    if (!devs) return;
    size_t m = gs__dec_key(dc, "devices");
    json_t *reqs = get_array(dc, devs, "requests", 32);
    if (reqs && json_array_size(reqs)) {
        out->requests = calloc_or_oom(dc, json_array_size(reqs), sizeof *out->requests);
        size_t m2 = gs__dec_key(dc, "requests"), i;
        json_t *r;
        json_array_foreach(reqs, i, r) {
            if (!out->requests) break;
            size_t m3 = gs__dec_idx(dc, i);
            if (gs__dec_is(dc, r, JSON_OBJECT)) {
                struct gs_dra_request *q = &out->requests[out->nrequests++];
                request_decode(x, r, q);
                for (size_t j = 0; *q->name && j + 1 < out->nrequests; j++)
                    if (!strcmp(out->requests[j].name, q->name))
                        gs__dec_err_at(dc, "name", "duplicate request \"%s\"", q->name);
            }
            gs__dec_pop(dc, m3);
        }
        gs__dec_pop(dc, m2);
    }
    json_t *cons = get_array(dc, devs, "constraints", 32);
    if (cons && json_array_size(cons)) {
        out->constraints = calloc_or_oom(dc, json_array_size(cons), sizeof *out->constraints);
        size_t m2 = gs__dec_key(dc, "constraints"), i;
        json_t *c;
        json_array_foreach(cons, i, c) {
            if (!out->constraints) break;
            size_t m3 = gs__dec_idx(dc, i);
            if (gs__dec_is(dc, c, JSON_OBJECT)) {
                struct gs_dra_constraint *k = &out->constraints[out->nconstraints++];
                k->requests = gs__dec_strv(dc, c, "requests", &k->nrequests);
                for (size_t j = 0; j < k->nrequests; j++)
                    if (!request_known(out, k->requests[j])) {
                        size_t m4 = gs__dec_key(dc, "requests");
                        gs__dec_idx(dc, j);
                        gs__dec_err(dc, "invalid value \"%s\": no such request in this claim", k->requests[j]);
                        gs__dec_pop(dc, m4);
                    }
                const char *ma = gs__dec_str(dc, c, "matchAttribute"), *da = gs__dec_str(dc, c, "distinctAttribute");
                if ((ma != NULL) == (da != NULL))
                    gs__dec_err(dc, "exactly one of matchAttribute or distinctAttribute must be set");
                const char *which = ma ? "matchAttribute" : "distinctAttribute", *v = ma ? ma : da;
                if (v) {
                    size_t m4 = gs__dec_key(dc, which);
                    char *dom = NULL, *nm = NULL;
                    if (split_qualified(dc, v, NULL, &dom, &nm)) {
                        char *full = NULL;
                        if (asprintf(&full, "%s/%s", dom, nm) < 0) dc->oom = true;
                        else if (ma) k->match_attr = full;
                        else k->distinct_attr = full;
                    }
                    free(dom);
                    free(nm);
                    gs__dec_pop(dc, m4);
                }
            }
            gs__dec_pop(dc, m3);
        }
        gs__dec_pop(dc, m2);
    }
    out->config = config_decode(dc, devs, true);
    for (size_t i = 0; i < json_array_size(out->config); i++) {
        json_t *rq = json_object_get(json_array_get(out->config, i), "requests");
        for (size_t j = 0; j < json_array_size(rq); j++) {
            const char *ref = json_string_value(json_array_get(rq, j));
            if (!ref || request_known(out, ref)) continue;
            size_t m4 = gs__dec_key(dc, "config");
            gs__dec_idx(dc, i);
            gs__dec_key(dc, "requests");
            gs__dec_idx(dc, j);
            gs__dec_err(dc, "invalid value \"%s\": no such request in this claim", ref);
            gs__dec_pop(dc, m4);
        }
    }
    gs__dec_pop(dc, m);
}

static void set_path(struct gs_dec *dc, const char *path)
{
    size_t l = strlen(path);
    if (l >= sizeof dc->path) l = sizeof dc->path - 1;
    memcpy(dc->path, path, l);
    dc->path[l] = 0;
    dc->len = l;
}

int gs_dra_claim_spec_decode(const json_t *spec, struct gs_dra_claim_spec *out, const char *path, struct gs_diags *d)
{
    struct ddec x = {0};
    gs__dec_init(&x.dc, d);
    memset(out, 0, sizeof *out);
    set_path(&x.dc, path ? path : "spec");
    if (!json_is_object(spec)) {
        gs__dec_err(&x.dc, "expected an object, got %s", spec ? gs__json_type_name(spec) : "nothing");
        return GS_EINVAL;
    }
    claim_spec_body(&x, spec, out);
    int rc = finish(&x);
    if (rc) gs_dra_claim_spec_free(out);
    return rc;
}

int gs_dra_template_decode(const json_t *obj, struct gs_dra_claim_spec *out, struct gs_diags *d)
{
    memset(out, 0, sizeof *out);
    struct gs_dec dc;
    gs__dec_init(&dc, d);
    check_api(&dc, obj, "ResourceClaimTemplate");
    const json_t *spec = json_is_object(obj) ? get_spec(&dc, obj) : NULL;
    json_t *inner = spec ? gs__dec_get(&dc, spec, "spec", JSON_OBJECT) : NULL;
    if (spec && !inner && !json_object_get(spec, "spec")) gs__dec_err(&dc, "spec.spec: is required");
    if (!json_is_object(obj)) gs__dec_err(&dc, "expected an object");
    if (dc.oom) return GS_ENOMEM;
    if (dc.nerr) return GS_EINVAL;
    return gs_dra_claim_spec_decode(inner, out, "spec.spec", d);
}

int gs_dra_claim_spec_for_extended(struct gs_dra_claim_spec *out, const char *class_name, const char *request_name,
                                   int64_t count)
{
    memset(out, 0, sizeof *out);
    if (!class_name || !request_name || count < 1) return GS_EINVAL;
    out->requests = calloc(1, sizeof *out->requests);
    if (!out->requests) return GS_ENOMEM;
    out->nrequests = 1;
    struct gs_dra_request *r = &out->requests[0];
    r->alts = calloc(1, sizeof *r->alts);
    if (r->alts) r->nalts = 1;
    r->name = strdup(request_name);
    if (r->alts) {
        r->alts[0].name = strdup(request_name);
        r->alts[0].class_name = strdup(class_name);
        r->alts[0].count = count;
    }
    if (!r->alts || !r->name || !r->alts[0].name || !r->alts[0].class_name) {
        gs_dra_claim_spec_free(out);
        return GS_ENOMEM;
    }
    return 0;
}

/*--- ResourceClaim ---*/

static void result_free(struct gs_dra_result *r)
{
    free(r->request);
    free(r->driver);
    free(r->pool);
    free(r->device);
}

void gs_dra_claim_free(struct gs_dra_claim *c)
{
    if (!c) return;
    free(c->ns);
    free(c->name);
    free(c->uid);
    gs_dra_claim_spec_free(&c->spec);
    for (size_t i = 0; i < c->nresults; i++) result_free(&c->results[i]);
    free(c->results);
    free(c->alloc_node);
    for (size_t i = 0; i < c->nreserved; i++) {
        free(c->reserved[i].name);
        free(c->reserved[i].uid);
    }
    free(c->reserved);
    memset(c, 0, sizeof *c);
}

static void allocation_decode(struct gs_dec *dc, const json_t *alloc, struct gs_dra_claim *out)
{
    out->allocated = true;
    json_t *devs = gs__dec_get(dc, alloc, "devices", JSON_OBJECT);
    size_t m = gs__dec_key(dc, "devices");
    json_t *res = get_array(dc, devs, "results", 0);
    if (res && json_array_size(res)) {
        out->results = calloc_or_oom(dc, json_array_size(res), sizeof *out->results);
        size_t m2 = gs__dec_key(dc, "results"), i;
        json_t *r;
        json_array_foreach(res, i, r) {
            if (!out->results) break;
            size_t m3 = gs__dec_idx(dc, i);
            if (gs__dec_is(dc, r, JSON_OBJECT)) {
                struct gs_dra_result *o = &out->results[out->nresults++];
                o->request = dup_or_oom(dc, req_str(dc, r, "request"));
                o->driver = dup_or_oom(dc, req_str(dc, r, "driver"));
                o->pool = dup_or_oom(dc, req_str(dc, r, "pool"));
                o->device = dup_or_oom(dc, req_str(dc, r, "device"));
                gs__dec_bool(dc, r, "adminAccess", &o->admin_access);
            }
            gs__dec_pop(dc, m3);
        }
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
    json_t *sel = gs__dec_get(dc, alloc, "nodeSelector", JSON_OBJECT);
    if (sel) {
        size_t m2 = gs__dec_key(dc, "nodeSelector");
        char **names = NULL;
        size_t n = 0;
        node_names_decode(dc, sel, &names, &n);
        if (n != 1) gs__dec_err(dc, "must name exactly one node (matchFields metadata.name In [node]), got %zu", n);
        else out->alloc_node = dup_or_oom(dc, names[0]);
        gs__strv_free(names, n);
        gs__dec_pop(dc, m2);
    }
}

int gs_dra_claim_decode(const json_t *obj, struct gs_dra_claim *out, struct gs_diags *d)
{
    struct ddec x = {0};
    struct gs_dec *dc = &x.dc;
    memset(out, 0, sizeof *out);
    if (!dec_begin(dc, d, obj)) return GS_EINVAL;
    check_api(dc, obj, "ResourceClaim");
    out->name = dup_or_oom(dc, meta_str(dc, obj, "name", true));
    const char *ns = meta_str(dc, obj, "namespace", false);
    out->ns = dup_or_oom(dc, ns && *ns ? ns : "default");
    const char *uid = meta_str(dc, obj, "uid", false);
    out->uid = dup_or_oom(dc, uid ? uid : "");
    const json_t *spec = get_spec(dc, obj);
    if (spec) {
        size_t m = gs__dec_key(dc, "spec");
        claim_spec_body(&x, spec, &out->spec);
        gs__dec_pop(dc, m);
    }
    json_t *st = gs__dec_get(dc, obj, "status", JSON_OBJECT);
    if (st) {
        size_t m = gs__dec_key(dc, "status");
        json_t *alloc = gs__dec_get(dc, st, "allocation", JSON_OBJECT);
        if (alloc) {
            size_t m2 = gs__dec_key(dc, "allocation");
            allocation_decode(dc, alloc, out);
            gs__dec_pop(dc, m2);
        }
        json_t *rf = get_array(dc, st, "reservedFor", 256);
        if (rf && json_array_size(rf)) {
            out->reserved = calloc_or_oom(dc, json_array_size(rf), sizeof *out->reserved);
            size_t m2 = gs__dec_key(dc, "reservedFor"), i;
            json_t *r;
            json_array_foreach(rf, i, r) {
                if (!out->reserved) break;
                size_t m3 = gs__dec_idx(dc, i);
                if (gs__dec_is(dc, r, JSON_OBJECT)) {
                    struct gs_dra_reserved *o = &out->reserved[out->nreserved++];
                    o->name = dup_or_oom(dc, req_str(dc, r, "name"));
                    o->uid = dup_or_oom(dc, req_str(dc, r, "uid"));
                    req_str(dc, r, "resource");
                }
                gs__dec_pop(dc, m3);
            }
            gs__dec_pop(dc, m2);
        }
        if (out->nreserved && !out->allocated)
            gs__dec_err_at(dc, "reservedFor", "must be empty while the claim is not allocated");
        gs__dec_pop(dc, m);
    }
    int rc = finish(&x);
    if (rc) gs_dra_claim_free(out);
    return rc;
}

/*--- DeviceTaintRule ---*/

void gs_dra_taint_rule_free(struct gs_dra_taint_rule *r)
{
    if (!r) return;
    free(r->name);
    free(r->driver);
    free(r->pool);
    free(r->device);
    taint_free(&r->taint);
    memset(r, 0, sizeof *r);
}

int gs_dra_taint_rule_decode(const json_t *obj, struct gs_dra_taint_rule *out, struct gs_diags *d)
{
    struct ddec x = {0};
    struct gs_dec *dc = &x.dc;
    memset(out, 0, sizeof *out);
    if (!dec_begin(dc, d, obj)) return GS_EINVAL;
    const char *api = gs__dec_str(dc, obj, "apiVersion");
    if (api && strcmp(api, "resource.k8s.io/v1") && strcmp(api, "resource.k8s.io/v1beta2") &&
        strcmp(api, "resource.k8s.io/v1alpha3"))
        gs__dec_err_at(dc, "apiVersion", "invalid value \"%s\": DeviceTaintRule is served as resource.k8s.io/v1, "
                       "v1beta2 or v1alpha3", api);
    out->name = dup_or_oom(dc, meta_str(dc, obj, "name", true));
    const json_t *spec = get_spec(dc, obj);
    if (spec) {
        size_t m = gs__dec_key(dc, "spec");
        json_t *ds = gs__dec_get(dc, spec, "deviceSelector", JSON_OBJECT);
        if (ds) {
            size_t m2 = gs__dec_key(dc, "deviceSelector");
            out->driver = gs__dec_strdup(dc, ds, "driver");
            out->pool = gs__dec_strdup(dc, ds, "pool");
            out->device = gs__dec_strdup(dc, ds, "device");
            if (json_object_get(ds, "deviceClassName"))
                gs__dec_err_at(dc, "deviceClassName", "is not supported (removed in resource.k8s.io/v1beta2)");
            if (json_object_get(ds, "selectors"))
                gs__dec_err_at(dc, "selectors", "is not supported (removed in resource.k8s.io/v1beta2)");
            gs__dec_pop(dc, m2);
        }
        json_t *t = gs__dec_get(dc, spec, "taint", JSON_OBJECT);
        if (!t && !json_object_get(spec, "taint")) gs__dec_err_at(dc, "taint", "is required");
        if (t) {
            size_t m2 = gs__dec_key(dc, "taint");
            taint_decode(dc, t, &out->taint);
            gs__dec_pop(dc, m2);
        }
        gs__dec_pop(dc, m);
    }
    int rc = finish(&x);
    if (rc) gs_dra_taint_rule_free(out);
    return rc;
}

/*--- Copies ---*/

static int sel_copy(struct gs_dra_selector **out, const struct gs_dra_selector *in, size_t n)
{
    *out = NULL;
    if (!n) return 0;
    struct gs_dra_selector *v = calloc(n, sizeof *v);
    if (!v) return GS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct gs_cel_error err;
        v[i].expr = strdup(in[i].expr);
        if (!v[i].expr || gs_cel_compile(in[i].expr, &v[i].prog, &err)) {
            selectors_free(v, i + 1);
            return GS_ENOMEM;
        }
    }
    *out = v;
    return 0;
}

static char **strv_copy(char *const *v, size_t n, bool *oom)
{
    if (!n) return NULL;
    char **r = calloc(n, sizeof *r);
    if (!r) {
        *oom = true;
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (!(r[i] = strdup(v[i]))) *oom = true;
    return r;
}

static int64_t *i64_copy(const int64_t *v, size_t n, bool *oom)
{
    if (!n) return NULL;
    int64_t *r = malloc(n * sizeof *r);
    if (!r) *oom = true;
    else memcpy(r, v, n * sizeof *r);
    return r;
}

static char *sdup(const char *s, bool *oom)
{
    if (!s) return NULL;
    char *r = strdup(s);
    if (!r) *oom = true;
    return r;
}

static void attrs_copy(struct gs_cel_attr **out, const struct gs_cel_attr *in, size_t n, bool *oom)
{
    *out = NULL;
    if (!n) return;
    struct gs_cel_attr *v = calloc(n, sizeof *v);
    if (!v) {
        *oom = true;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        v[i] = in[i];
        v[i].domain = sdup(in[i].domain, oom);
        v[i].name = sdup(in[i].name, oom);
        v[i].s = sdup(in[i].s, oom);
    }
    *out = v;
}

int gs_dra_slice_copy(struct gs_dra_slice *out, const struct gs_dra_slice *in)
{
    bool oom = false;
    memset(out, 0, sizeof *out);
    out->name = sdup(in->name, &oom);
    out->driver = sdup(in->driver, &oom);
    out->pool = sdup(in->pool, &oom);
    out->node_name = sdup(in->node_name, &oom);
    out->all_nodes = in->all_nodes;
    out->per_device_nodes = in->per_device_nodes;
    out->generation = in->generation;
    out->slice_count = in->slice_count;
    out->selector_nodes = strv_copy(in->selector_nodes, in->nselector_nodes, &oom);
    if (out->selector_nodes) out->nselector_nodes = in->nselector_nodes;
    if (in->ncounters && (out->counters = calloc(in->ncounters, sizeof *out->counters))) {
        out->ncounters = in->ncounters;
        for (size_t i = 0; i < in->ncounters; i++) {
            out->counters[i].name = sdup(in->counters[i].name, &oom);
            out->counters[i].names = strv_copy(in->counters[i].names, in->counters[i].n, &oom);
            out->counters[i].values_milli = i64_copy(in->counters[i].values_milli, in->counters[i].n, &oom);
            if (out->counters[i].names) out->counters[i].n = in->counters[i].n;
        }
    } else if (in->ncounters) {
        oom = true;
    }
    if (in->ndevices && (out->devices = calloc(in->ndevices, sizeof *out->devices))) {
        out->ndevices = in->ndevices;
        for (size_t i = 0; i < in->ndevices; i++) {
            const struct gs_dra_device *a = &in->devices[i];
            struct gs_dra_device *b = &out->devices[i];
            b->name = sdup(a->name, &oom);
            attrs_copy(&b->attrs, a->attrs, a->nattrs, &oom);
            if (b->attrs) b->nattrs = a->nattrs;
            attrs_copy(&b->capacity, a->capacity, a->ncapacity, &oom);
            if (b->capacity) b->ncapacity = a->ncapacity;
            b->allow_multiple_allocations = a->allow_multiple_allocations;
            b->node_name = sdup(a->node_name, &oom);
            b->all_nodes = a->all_nodes;
            if (a->ntaints && (b->taints = calloc(a->ntaints, sizeof *b->taints))) {
                b->ntaints = a->ntaints;
                for (size_t j = 0; j < a->ntaints; j++) {
                    b->taints[j] = a->taints[j];
                    b->taints[j].key = sdup(a->taints[j].key, &oom);
                    b->taints[j].value = sdup(a->taints[j].value, &oom);
                }
            } else if (a->ntaints) {
                oom = true;
            }
            if (a->nconsumes && (b->consumes = calloc(a->nconsumes, sizeof *b->consumes))) {
                b->nconsumes = a->nconsumes;
                for (size_t j = 0; j < a->nconsumes; j++) {
                    b->consumes[j].counter_set = sdup(a->consumes[j].counter_set, &oom);
                    b->consumes[j].names = strv_copy(a->consumes[j].names, a->consumes[j].n, &oom);
                    b->consumes[j].values_milli = i64_copy(a->consumes[j].values_milli, a->consumes[j].n, &oom);
                    if (b->consumes[j].names) b->consumes[j].n = a->consumes[j].n;
                }
            } else if (a->nconsumes) {
                oom = true;
            }
        }
    } else if (in->ndevices) {
        oom = true;
    }
    if (oom) {
        gs_dra_slice_free(out);
        return GS_ENOMEM;
    }
    return 0;
}

int gs_dra_class_copy(struct gs_dra_class *out, const struct gs_dra_class *in)
{
    bool oom = false;
    memset(out, 0, sizeof *out);
    out->name = sdup(in->name, &oom);
    out->extended_resource = sdup(in->extended_resource, &oom);
    out->config = in->config ? json_incref(in->config) : NULL;
    if (sel_copy(&out->selectors, in->selectors, in->nselectors)) oom = true;
    else out->nselectors = in->nselectors;
    if (oom) {
        gs_dra_class_free(out);
        return GS_ENOMEM;
    }
    return 0;
}

int gs_dra_taint_rule_copy(struct gs_dra_taint_rule *out, const struct gs_dra_taint_rule *in)
{
    bool oom = false;
    memset(out, 0, sizeof *out);
    out->name = sdup(in->name, &oom);
    out->driver = sdup(in->driver, &oom);
    out->pool = sdup(in->pool, &oom);
    out->device = sdup(in->device, &oom);
    out->taint = in->taint;
    out->taint.key = sdup(in->taint.key, &oom);
    out->taint.value = sdup(in->taint.value, &oom);
    if (oom) {
        gs_dra_taint_rule_free(out);
        return GS_ENOMEM;
    }
    return 0;
}

/*--- Allocation status ---*/

static const struct gs_dra_subrequest *sub_of(const struct gs_dra_claim *c, const char *request)
{
    const char *slash = strchr(request, '/');
    size_t ml = slash ? (size_t)(slash - request) : strlen(request);
    for (size_t i = 0; i < c->spec.nrequests; i++) {
        const struct gs_dra_request *r = &c->spec.requests[i];
        if (strlen(r->name) != ml || strncmp(r->name, request, ml)) continue;
        if (!slash) return r->nalts ? &r->alts[0] : NULL;
        for (size_t j = 0; j < r->nalts; j++)
            if (!strcmp(r->alts[j].name, slash + 1)) return &r->alts[j];
    }
    return NULL;
}

static int add_class_config(json_t *cfg, const struct gs_dra_class *cls, json_t *reqs)
{
    for (size_t i = 0; i < json_array_size(cls->config); i++) {
        json_t *op = json_object_get(json_array_get(cls->config, i), "opaque");
        if (!op) continue;
        json_t *e = json_pack("{s:s, s:O, s:O}", "source", "FromClass", "requests", reqs, "opaque", op);
        if (!e || json_array_append_new(cfg, e)) return GS_ENOMEM;
    }
    return 0;
}

json_t *gs_dra_allocation_json(const struct gs_dra_claim *c, const struct gs_dra_result *res, size_t nres,
                               const struct gs_dra_class *const *classes, size_t nclasses, const char *node, int64_t now_s)
{
    json_t *results = json_array(), *cfg = json_array();
    if (!results || !cfg) goto oom;
    for (size_t i = 0; i < nres; i++) {
        json_t *r = json_pack("{s:s, s:s, s:s, s:s}", "request", res[i].request, "driver", res[i].driver, "pool",
                              res[i].pool, "device", res[i].device);
        if (!r) goto oom;
        if (res[i].admin_access) json_object_set_new(r, "adminAccess", json_true());
        const struct gs_dra_subrequest *s = sub_of(c, res[i].request);
        if (s && s->ntolerations) {
            json_t *tl = json_array();
            for (size_t j = 0; tl && j < s->ntolerations; j++) {
                json_t *t = json_pack("{s:s, s:s}", "key", s->tolerations[j].key, "operator", s->tolerations[j].op);
                if (!t) continue;
                if (*s->tolerations[j].value) json_object_set_new(t, "value", json_string(s->tolerations[j].value));
                if (s->tolerations[j].effect >= 0)
                    json_object_set_new(t, "effect", json_string(gs_dra_effect_name(s->tolerations[j].effect)));
                json_array_append_new(tl, t);
            }
            if (tl) json_object_set_new(r, "tolerations", tl);
        }
        if (json_array_append_new(results, r)) goto oom;
    }
    /* Class config first (FromClass), for the requests that used each class,
     * then the claim's own (FromClaim): the order the driver applies them in. */
    for (size_t k = 0; k < nclasses; k++) {
        if (!classes[k] || !json_array_size(classes[k]->config)) continue;
        json_t *reqs = json_array();
        if (!reqs) goto oom;
        for (size_t i = 0; i < nres; i++) {
            const struct gs_dra_subrequest *s = sub_of(c, res[i].request);
            if (!s || strcmp(s->class_name, classes[k]->name)) continue;
            bool seen = false;
            for (size_t j = 0; j < json_array_size(reqs); j++)
                if (!strcmp(json_string_value(json_array_get(reqs, j)), res[i].request)) seen = true;
            if (!seen) json_array_append_new(reqs, json_string(res[i].request));
        }
        int rc = json_array_size(reqs) ? add_class_config(cfg, classes[k], reqs) : 0;
        json_decref(reqs);
        if (rc) goto oom;
    }
    for (size_t i = 0; i < json_array_size(c->spec.config); i++) {
        json_t *e = json_array_get(c->spec.config, i), *op = json_object_get(e, "opaque");
        if (!op) continue;
        json_t *reqs = json_object_get(e, "requests");
        json_t *o = json_pack("{s:s, s:O}", "source", "FromClaim", "opaque", op);
        if (!o) goto oom;
        if (json_array_size(reqs)) json_object_set(o, "requests", reqs);
        if (json_array_append_new(cfg, o)) goto oom;
    }
    char ts[32];
    format_rfc3339(now_s, ts, sizeof ts);
    json_t *devices = json_pack("{s:o}", "results", results);
    results = NULL;
    if (!devices) goto oom;
    if (json_array_size(cfg)) json_object_set(devices, "config", cfg);
    json_decref(cfg);
    cfg = NULL;
    json_t *out = json_pack("{s:o, s:{s:[{s:[{s:s, s:s, s:[s]}]}]}, s:s}", "devices", devices, "nodeSelector",
                            "nodeSelectorTerms", "matchFields", "key", "metadata.name", "operator", "In", "values",
                            node ? node : "", "allocationTimestamp", ts);
    return out;
oom:
    json_decref(results);
    json_decref(cfg);
    return NULL;
}
