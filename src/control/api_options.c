/*
 * api_options.c - the options of a write, as kube-apiserver reads them:
 * dryRun, fieldValidation, the Warning headers they produce, and
 * DeleteOptions in every encoding kubectl sends.
 *
 * dryRun=All (query, or ["All"] in a DeleteOptions body) runs a write all
 * the way - decode, identity, validation, authorization, conflicts - and
 * answers what would be stored without storing it: the handlers in
 * api_objects.c compute the new object inside gs_store_mutate and answer
 * "unchanged", so no version is taken, no event published, nothing reaches
 * the scheduler. fieldValidation=Strict|Warn|Ignore (default Warn, as
 * kube-apiserver 1.27+) decides what unknown fields (core/schema.h) do: a
 * `Warning: 299 - "unknown field \"spec.x\""` header, a 400, or nothing.
 * Under Warn and Ignore the field is kept, as gpusched always kept fields
 * it does not model.
 *
 * DeleteOptions arrive as JSON ({"kind":"DeleteOptions","apiVersion":"v1"
 * or "meta.k8s.io/v1" ...}), as protobuf (client-go's typed clients, e.g.
 * kubectl drain; api_proto.c), as query parameters, or not at all.
 */
#include "control/apiserver_int.h"

#include "core/codec.h"
#include "core/schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- Query options ---*/

static const char *options_kind(const struct gs__req *r)
{
    return !strcmp(r->method, "POST") ? "CreateOptions" : !strcmp(r->method, "PUT") ? "UpdateOptions"
                                                      : !strcmp(r->method, "PATCH") ? "PatchOptions"
                                                                                    : "DeleteOptions";
}

static int refuse_option(struct gs__req *r, const char *field, const char *value, const char *supported)
{
    char msg[512], cause[384];
    snprintf(cause, sizeof cause, "Unsupported value: \"%s\": supported values: %s", value, supported);
    snprintf(msg, sizeof msg, "%s.meta.k8s.io \"\" is invalid: %s: %s", options_kind(r), field, cause);
    struct gs__cause c = {field, cause, "FieldValueNotSupported"};
    gs__reply_json(r, 422, gs__status(422, NULL, msg, NULL, NULL, &c, 1));
    return GS_EINVAL;
}

int gs__write_options(struct gs__req *r)
{
    const char *dry = gs__arg(r, "dryRun"), *fv = gs__arg(r, "fieldValidation");
    if (dry && strcmp(dry, "All")) return refuse_option(r, "dryRun", dry, "\"All\"");
    r->dry_run = dry != NULL;
    if (!fv || !*fv || !strcmp(fv, "Warn")) r->fv = GS_FV_WARN;
    else if (!strcmp(fv, "Strict")) r->fv = GS_FV_STRICT;
    else if (!strcmp(fv, "Ignore")) r->fv = GS_FV_IGNORE;
    else return refuse_option(r, "fieldValidation", fv, "\"Ignore\", \"Strict\", \"Warn\"");
    return 0;
}

/*--- Warnings ---*/

void gs__warn(struct gs__req *r, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (!r->warnings && !(r->warnings = json_array())) return;
    if (json_array_size(r->warnings) < 64) json_array_append_new(r->warnings, json_string(text));
}

void gs__add_warnings(struct gs__req *r, struct MHD_Response *resp)
{
    size_t i;
    json_t *w;
    json_array_foreach(r->warnings, i, w) {
        /* RFC 7234 warn-text: a quoted string, '"' and '\' escaped. */
        const char *s = json_string_value(w);
        char value[1200];
        size_t n = (size_t)snprintf(value, sizeof value, "299 - \"");
        for (; s && *s && n + 4 < sizeof value; s++) {
            if (*s == '"' || *s == '\\') value[n++] = '\\';
            value[n++] = (unsigned char)*s < 0x20 ? ' ' : *s;
        }
        value[n++] = '"';
        value[n] = 0;
        MHD_add_response_header(resp, "Warning", value);
    }
}

/*--- Field validation ---*/

int gs__check_fields(struct gs__req *r, const json_t *body, bool patch)
{
    if (r->fv == GS_FV_IGNORE) return 0;
    const char *api = json_string_value(json_object_get(body, "apiVersion"));
    const char *kind = json_string_value(json_object_get(body, "kind"));
    char gv[128];
    if (patch || !kind || !api) { /* a patch names neither: the URL does */
        kind = r->res->kind;
        api = gs_api_resource_gv(r->res, gv, sizeof gv);
    }
    struct gs_diags d = {0};
    int err = gs_schema_check(api, kind, body, patch ? GS_SCHEMA_PATCH : 0, &d, NULL);
    if (err || !d.n) {
        gs_diags_free(&d);
        return err == GS_ENOMEM ? (gs__reply_err(r, err, r->name), GS_EINVAL) : 0;
    }
    if (r->fv == GS_FV_WARN) {
        for (size_t i = 0; i < d.n; i++) gs__warn(r, "unknown field \"%s\"", d.v[i].path);
        gs_diags_free(&d);
        return 0;
    }
    const char *slash = strchr(api, '/');
    char msg[1024];
    size_t n = (size_t)snprintf(msg, sizeof msg, "%s in version \"%s\" cannot be handled as a %s: strict decoding "
                                "error: ", kind, slash ? slash + 1 : api, kind);
    for (size_t i = 0; i < d.n && n < sizeof msg; i++)
        n += (size_t)snprintf(msg + n, sizeof msg - n, "%sunknown field \"%s\"", i ? ", " : "", d.v[i].path);
    gs_diags_free(&d);
    gs__reply_json(r, 400, gs__status(400, NULL, msg, r->res, r->name, NULL, 0));
    return GS_EINVAL;
}

json_t *gs__body_with_duplicates(struct gs__req *r, const struct gs_diags *d)
{
    const char *m = d->n ? strstr(d->v[0].msg, "duplicate object key near '\"") : NULL;
    if (!m) return NULL;
    char key[256];
    const char *k = m + strlen("duplicate object key near '\""), *end = strstr(k, "\"'");
    snprintf(key, sizeof key, "%.*s", end ? (int)(end - k) : 0, k);
    if (r->fv == GS_FV_STRICT) {
        gs__reply_status(r, 400, NULL, r->name, "%s in version \"%s\" cannot be handled as a %s: strict decoding "
                         "error: duplicate field \"%s\"", r->res->kind, r->res->version, r->res->kind, key);
        return NULL;
    }
    json_t *doc = json_loadb(r->body, r->len, JSON_DECODE_ANY, NULL); /* the last value wins, as in Go */
    if (doc && r->fv == GS_FV_WARN) gs__warn(r, "duplicate field \"%s\"", key);
    return doc;
}

static bool has_diag(const struct gs_diags *d, const struct gs_diag *x)
{
    for (size_t i = 0; i < d->n; i++)
        if (!strcmp(d->v[i].path, x->path) && !strcmp(d->v[i].msg, x->msg)) return true;
    return false;
}

int gs__check_enums(const json_t *obj, const json_t *old, struct gs_diags *d)
{
    const char *api = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    struct gs_diags now = {0}, before = {0};
    int err = gs_schema_check(api, kind, obj, 0, NULL, &now);
    if (!err && now.n && old) err = gs_schema_check(api, kind, old, 0, NULL, &before);
    for (size_t i = 0; !err && i < now.n; i++)
        if (!has_diag(&before, &now.v[i]) && !has_diag(d, &now.v[i]))
            err = gs_diags_add(d, now.v[i].path, "%s", now.v[i].msg);
    gs_diags_free(&now);
    gs_diags_free(&before);
    return err;
}

/*--- DeleteOptions ---*/

static int bad_options(struct gs__req *r, const char *fmt, const char *a)
{
    gs__reply_status(r, 400, NULL, r->name, fmt, a);
    return GS_EINVAL;
}

int gs__check_delete_options(struct gs__req *r, const json_t *o)
{
    const char *kind = json_string_value(json_object_get(o, "kind"));
    const char *api = json_string_value(json_object_get(o, "apiVersion"));
    static const char *const versions[] = {"v1", "meta.k8s.io/v1", "policy/v1", "policy/v1beta1", "meta.k8s.io/v1beta1",
                                           NULL};
    bool api_ok = !api;
    for (const char *const *v = versions; api && *v; v++) api_ok |= !strcmp(*v, api);
    int err = 0;
    if (json_object_get(o, "kind") && (!kind || strcmp(kind, "DeleteOptions")))
        err = bad_options(r, "the body of a delete must be DeleteOptions, got kind \"%s\"", kind ? kind : "?");
    else if (!api_ok)
        err = bad_options(r, "DeleteOptions of apiVersion \"%s\" are not understood (v1 or meta.k8s.io/v1)", api);
    if (!err) {
        struct gs_diags d = {0};
        gs_schema_check("meta.k8s.io/v1", "DeleteOptions", o, 0, NULL, &d);
        if (d.n) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s: %s", d.v[0].path, d.v[0].msg);
            err = bad_options(r, "invalid DeleteOptions: %s", msg);
        }
        gs_diags_free(&d);
    }
    json_t *dry = json_object_get(o, "dryRun"), *v;
    size_t i;
    if (!err && dry && !json_is_array(dry) && !json_is_null(dry))
        err = bad_options(r, "invalid DeleteOptions: dryRun must be a list such as [\"All\"]%s", "");
    json_array_foreach(dry, i, v) {
        if (err) break;
        if (!json_is_string(v) || strcmp(json_string_value(v), "All")) {
            char *t = json_dumps(v, JSON_ENCODE_ANY);
            err = refuse_option(r, "dryRun", t && json_is_string(v) ? json_string_value(v) : t ? t : "?", "\"All\"");
            free(t);
        } else {
            r->dry_run = true;
        }
    }
    return err;
}

int gs__delete_options(struct gs__req *r, const char *body, size_t len, const char *ctype, json_t **opts)
{
    *opts = NULL;
    const char *pp = gs__arg(r, "propagationPolicy");
    if (pp && strcmp(pp, "Orphan") && strcmp(pp, "Background") && strcmp(pp, "Foreground"))
        return bad_options(r, "invalid propagationPolicy \"%s\": supported values: \"Background\", \"Foreground\", "
                           "\"Orphan\"", pp);
    if (!len) return 0;
    json_t *o = NULL;
    char why[256] = "";
    if (ctype && strstr(ctype, "protobuf")) {
        int err = gs__proto_decode(body, len, &o, why, sizeof why);
        if (err) return bad_options(r, "the body of a delete must be DeleteOptions: %s", why);
    } else {
        struct gs_diags d = {0};
        gs_json_decode(body, len, &o, &d);
        snprintf(why, sizeof why, "%s", d.n ? d.v[0].msg : "not a JSON object");
        gs_diags_free(&d);
        if (!json_is_object(o)) {
            json_decref(o);
            return bad_options(r, "the body of a delete must be DeleteOptions: %s", why);
        }
    }
    int err = gs__check_delete_options(r, o);
    if (err) {
        json_decref(o);
        return err;
    }
    *opts = o;
    return 0;
}
