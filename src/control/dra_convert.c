/*
 * dra_convert.c - resource.k8s.io versions over one stored v1 shape; see
 * dra_convert.h.
 */
#include "control/dra_convert.h"

#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fields of v1's ExactDeviceRequest that v1beta1 keeps on the request itself. */
static const char *const exact_fields[] = {"deviceClassName", "selectors", "allocationMode", "count",
                                           "adminAccess",     "tolerations", "capacity"};
#define NEXACT (sizeof exact_fields / sizeof exact_fields[0])

bool gs_dra_res(const struct gs_api_resource *res)
{
    return res && !strcmp(res->group, GS_DRA_GROUP);
}

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/*--- Requests: v1beta1 flat <-> v1 `exactly` ---*/

static int request_to_v1(json_t *req)
{
    if (!json_is_object(req) || json_object_get(req, "exactly") || json_object_get(req, "firstAvailable")) return 0;
    json_t *ex = NULL;
    for (size_t i = 0; i < NEXACT; i++) {
        json_t *v = json_object_get(req, exact_fields[i]);
        if (!v) continue;
        if (!ex && !(ex = json_object())) return GS_ENOMEM;
        json_object_set(ex, exact_fields[i], v);
        json_object_del(req, exact_fields[i]);
    }
    return ex && json_object_set_new(req, "exactly", ex) ? GS_ENOMEM : 0;
}

static int request_from_v1(json_t *req)
{
    json_t *ex = json_object_get(req, "exactly");
    if (!json_is_object(ex)) return 0;
    json_incref(ex);
    json_object_del(req, "exactly");
    int err = json_object_update_missing(req, ex) ? GS_ENOMEM : 0;
    json_decref(ex);
    return err;
}

/* claim_spec is a ResourceClaimSpec (a claim's spec, a template's spec.spec). */
static int claim_spec(json_t *claim_spec, bool to_v1)
{
    json_t *reqs = json_object_get(json_object_get(claim_spec, "devices"), "requests"), *r;
    size_t i;
    json_array_foreach(reqs, i, r) {
        int err = to_v1 ? request_to_v1(r) : request_from_v1(r);
        if (err) return err;
    }
    return 0;
}

/*--- Slice devices: v1beta1 `basic` <-> v1 flat ---*/

static int device_to_v1(json_t *dev)
{
    json_t *basic = json_object_get(dev, "basic");
    if (!json_is_object(basic)) return 0;
    json_incref(basic);
    json_object_del(dev, "basic");
    int err = json_object_update_missing(dev, basic) ? GS_ENOMEM : 0;
    json_decref(basic);
    return err;
}

static int device_from_v1(json_t *dev)
{
    if (!json_is_object(dev) || json_object_get(dev, "basic")) return 0;
    json_t *basic = json_object();
    if (!basic) return GS_ENOMEM;
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(dev, tmp, k, v) {
        if (!strcmp(k, "name")) continue;
        json_object_set(basic, k, v);
        json_object_del(dev, k);
    }
    return json_object_set_new(dev, "basic", basic) ? GS_ENOMEM : 0;
}

static int slice_spec(json_t *spec, bool to_v1)
{
    json_t *devs = json_object_get(spec, "devices"), *d;
    size_t i;
    json_array_foreach(devs, i, d) {
        int err = to_v1 ? device_to_v1(d) : device_from_v1(d);
        if (err) return err;
    }
    return 0;
}

/* The v1beta1 <-> v1 shape change of one object by kind. */
static int convert_body(json_t *obj, bool to_v1)
{
    const char *kind = str(obj, "kind");
    json_t *spec = json_object_get(obj, "spec");
    if (!kind || !json_is_object(spec)) return 0;
    if (!strcmp(kind, "ResourceSlice")) return slice_spec(spec, to_v1);
    if (!strcmp(kind, "ResourceClaim")) return claim_spec(spec, to_v1);
    if (!strcmp(kind, "ResourceClaimTemplate")) return claim_spec(json_object_get(spec, "spec"), to_v1);
    return 0; /* DeviceClass, DeviceTaintRule: the same in every version */
}

static bool is_group(const char *api)
{
    size_t n = strlen(GS_DRA_GROUP);
    return api && !strncmp(api, GS_DRA_GROUP, n) && api[n] == '/';
}

int gs_dra_to_storage(json_t *obj)
{
    const char *api = str(obj, "apiVersion");
    if (!is_group(api) || !strcmp(api, GS_DRA_STORAGE_VERSION)) return 0;
    if (!strcmp(api, GS_DRA_GROUP "/v1beta1")) {
        int err = convert_body(obj, true);
        if (err) return err;
    }
    return json_object_set_new(obj, "apiVersion", json_string(GS_DRA_STORAGE_VERSION)) ? GS_ENOMEM : 0;
}

json_t *gs_dra_serve(const struct gs_api_resource *res, json_t *obj)
{
    if (!obj || !gs_dra_res(res) || !json_is_object(obj)) return obj;
    char gv[128];
    gs_api_resource_gv(res, gv, sizeof gv);
    const char *api = str(obj, "apiVersion");
    if (api && !strcmp(api, gv)) return obj;
    json_t *out = json_deep_copy(obj);
    json_decref(obj);
    if (!out) return NULL;
    /* An object stored before the store spoke v1 only is brought to v1 first. */
    if (gs_dra_to_storage(out) || (!strcmp(res->version, "v1beta1") && convert_body(out, false)) ||
        json_object_set_new(out, "apiVersion", json_string(gv))) {
        json_decref(out);
        return NULL;
    }
    return out;
}

char *gs_dra_text_for(const struct gs_api_resource *res, const char *stored)
{
    if (!gs_dra_res(res) || !strcmp(res->version, "v1")) return NULL;
    json_t *obj = json_loads(stored, 0, NULL);
    if (!obj) return NULL;
    json_t *out = gs_dra_serve(res, obj);
    char *text = out ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(out);
    return text;
}

/*--- Tables (kube's printers for ResourceSlice and ResourceClaim) ---*/

static json_t *col(const char *name, const char *desc)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:i}", "name", name, "type", "string", "format",
                     !strcmp(name, "Name") ? "name" : "", "description", desc, "priority", 0);
}

bool gs_dra_has_table(const struct gs_api_resource *res)
{
    return gs_dra_res(res) && (!strcmp(res->kind, "ResourceSlice") || !strcmp(res->kind, "ResourceClaim"));
}

json_t *gs_dra_table_columns(const struct gs_api_resource *res)
{
    if (!strcmp(res->kind, "ResourceSlice"))
        return json_pack("[o,o,o,o,o]", col("Name", "Name must be unique."),
                         col("Node", "The node the slice's devices are on (spec.nodeName)."),
                         col("Driver", "The DRA driver that publishes the devices."),
                         col("Pool", "The pool the slice belongs to."), col("Age", "Time since creation."));
    return json_pack("[o,o,o]", col("Name", "Name must be unique within a namespace."),
                     col("State", "pending, allocated, reserved, deleted."), col("Age", "Time since creation."));
}

json_t *gs_dra_table_row(const struct gs_api_resource *res, const json_t *o, const char *name, const char *age)
{
    const json_t *spec = json_object_get(o, "spec"), *st = json_object_get(o, "status");
    if (!strcmp(res->kind, "ResourceSlice")) {
        const char *node = str(spec, "nodeName"), *drv = str(spec, "driver");
        const char *pool = str(json_object_get(spec, "pool"), "name");
        return json_pack("[s, s, s, s, s]", name, node ? node : "<none>", drv ? drv : "", pool ? pool : "", age);
    }
    /* kube's claim printer: the states joined with commas, "pending" when none */
    char state[64] = "";
    if (json_object_get(st, "allocation")) strcat(state, "allocated");
    if (json_array_size(json_object_get(st, "reservedFor"))) strcat(state, state[0] ? ",reserved" : "reserved");
    if (str(json_object_get(o, "metadata"), "deletionTimestamp")) strcat(state, state[0] ? ",deleted" : "deleted");
    return json_pack("[s, s, s]", name, state[0] ? state : "pending", age);
}

const char *gs_dra_claim_node(const json_t *claim)
{
    const json_t *alloc = json_object_get(json_object_get(claim, "status"), "allocation");
    const json_t *sel = json_object_get(alloc, "nodeSelector");
    const json_t *terms = json_object_get(sel, "nodeSelectorTerms"), *t, *f;
    size_t i, j;
    const char *node = NULL;
    json_array_foreach(terms, i, t) json_array_foreach(json_object_get(t, "matchFields"), j, f) {
        const char *key = str(f, "key"), *op = str(f, "operator");
        const json_t *vals = json_object_get(f, "values");
        if (!key || strcmp(key, "metadata.name") || !op || strcmp(op, "In") || json_array_size(vals) != 1) continue;
        const char *v = json_string_value(json_array_get(vals, 0));
        if (!v || (node && strcmp(node, v))) return NULL; /* more than one node: none in particular */
        node = v;
    }
    return node;
}
