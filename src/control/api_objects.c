/*
 * api_objects.c - the object handlers of the API server: list, get, create,
 * update, patch, bind, delete; see apiserver.h for the behaviour.
 *
 * Every write is a read-modify-write inside the store (gs_store_mutate), so
 * identity fields (uid, creationTimestamp, name) are carried over from the
 * stored object, the status subresource rule is applied against what is
 * stored, a no-op write changes nothing (no new resourceVersion, no watch
 * event), and the result is validated by the core decoders before it is
 * committed. A resourceVersion given by the client makes the write
 * conditional: a different stored version is 409 Conflict.
 */
#include "control/api_fields.h"
#include "control/apiserver_int.h"

#include "control/events.h" /* events.k8s.io view */
#include "control/dra_convert.h" /* resource.k8s.io versions */
#include "control/pdb.h"
#include "core/codec.h"
#include "core/object.h"
#include "core/pod_security.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/*--- Filters ---*/

bool gs__filter_needs_object(const struct gs__filter *f)
{
    return f->labels.n || f->fields.n || f->if_bound || (f->who && f->who->role == GS_ROLE_TENANT);
}

static const char *node_of(const json_t *obj)
{
    const char *n = json_string_value(json_object_get(json_object_get(obj, "spec"), "nodeName"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    /* a claim: the node it is allocated on */
    return n || !kind || strcmp(kind, "ResourceClaim") ? n : gs_dra_claim_node(obj);
}

static bool bound_to(const json_t *obj, const struct gs_principal *who)
{
    const char *n = node_of(obj);
    return who && who->node && n && !strcmp(n, who->node);
}

/* A stored object as the request's resource serves it: events.k8s.io's view, resource.k8s.io's version. */
static json_t *serve(const struct gs_api_resource *res, json_t *obj)
{
    return gs_dra_serve(res, gs_event_serve(res, obj));
}

bool gs__filter_matches(const struct gs__filter *f, const json_t *obj)
{
    if (f->who && f->who->role == GS_ROLE_TENANT && f->res->namespaced) {
        const char *ns = json_string_value(json_object_get(json_object_get(obj, "metadata"), "namespace"));
        if (!gs_auth_sees_namespace(f->who, ns)) return false;
    }
    if (f->if_bound && !bound_to(obj, f->who)) return false;
    return gs__label_selector_matches(&f->labels, obj) && gs__field_selector_matches(&f->fields, obj);
}

void gs__filter_free(struct gs__filter *f)
{
    gs_selector_free(&f->labels);
    gs__field_selector_free(&f->fields);
}

/* 0, or the request was answered with 400. */
static int make_filter(struct gs__req *r, struct gs__filter *f)
{
    memset(f, 0, sizeof *f);
    f->res = r->res;
    f->who = r->who;
    f->if_bound = r->if_bound;
    const char *why;
    const char *ls = gs__arg(r, "labelSelector"), *fs = gs__arg(r, "fieldSelector");
    if (gs__label_selector_parse(ls, &f->labels, &why)) {
        gs__reply_status(r, 400, NULL, NULL, "invalid labelSelector \"%s\": %s", ls, why);
        return GS_EINVAL;
    }
    if (gs__field_selector_parse(fs, &f->fields, &why)) {
        gs__filter_free(f);
        gs__reply_status(r, 400, NULL, NULL, "invalid fieldSelector \"%s\": %s", fs, why);
        return GS_EINVAL;
    }
    return 0;
}

/*--- Reads ---*/

struct collect {
    struct gs__filter *f;
    json_t *items;
};

static int collect_one(const char *key, json_t *obj, void *arg)
{
    (void)key;
    struct collect *c = arg;
    if (gs__filter_matches(c->f, obj)) json_array_append(c->items, obj);
    return 0;
}

static enum gs__include include_of(struct gs__req *r)
{
    const char *inc = gs__arg(r, "includeObject");
    return inc && !strcmp(inc, "Object") ? GS_INCLUDE_OBJECT : inc && !strcmp(inc, "None") ? GS_INCLUDE_NONE
                                                                                          : GS_INCLUDE_METADATA;
}

/* A whole number of seconds in [0, max] from the query, or absent; answers 400 itself. */
static int query_seconds(struct gs__req *r, const char *key, long long max)
{
    const char *q = gs__arg(r, key);
    if (!q) return 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(q, &end, 10);
    if (*q && !*end && !errno && v >= 0 && v <= max) return 0;
    gs__reply_status(r, 400, "BadRequest", NULL,
                     "invalid %s \"%.64s\": must be a whole number of seconds from 0 to %lld", key, q, max);
    return GS_EINVAL;
}

enum MHD_Result gs__handle_list(struct gs__req *r, bool watch)
{
    if (query_seconds(r, "timeoutSeconds", GS__MAX_WATCH_SECONDS)) return MHD_YES;
    struct gs__filter f;
    if (make_filter(r, &f)) return MHD_YES;
    char prefix[512];
    gs_api_key(r->res, r->ns, NULL, prefix, sizeof prefix);
    if (watch) return gs__serve_watch(r, &f, prefix);
    struct collect c = {&f, json_array()};
    int64_t rv = 0;
    int err = c.items ? gs_store_list(r->s->store, prefix, collect_one, &c, &rv) : GS_ENOMEM;
    gs__filter_free(&f);
    if (err) {
        json_decref(c.items);
        return gs__reply_err(r, err, NULL);
    }
    char rvs[32], gv[128], kind[160];
    snprintf(rvs, sizeof rvs, "%lld", (long long)rv);
    if (gs__wants_table(r)) {
        json_t *t = gs__table(r->res, c.items, rvs, gs__wall_now(), include_of(r));
        json_decref(c.items);
        return gs__reply_json(r, 200, t);
    }
    snprintf(kind, sizeof kind, "%sList", r->res->kind);
    for (size_t i = 0; (gs_event_res_is_v1(r->res) || gs_dra_res(r->res)) && i < json_array_size(c.items); i++)
        json_array_set_new(c.items, i, serve(r->res, json_incref(json_array_get(c.items, i))));
    return gs__reply_json(r, 200,
                          json_pack("{s:s, s:s, s:{s:s}, s:o}", "kind", kind, "apiVersion",
                                    gs_api_resource_gv(r->res, gv, sizeof gv), "metadata", "resourceVersion", rvs,
                                    "items", c.items));
}

enum MHD_Result gs__handle_get(struct gs__req *r)
{
    char key[1024];
    gs_api_key(r->res, r->ns, r->name, key, sizeof key);
    json_t *obj = NULL;
    int err = gs_store_get(r->s->store, key, &obj, NULL);
    if (!err && r->if_bound && !bound_to(obj, r->who)) err = GS_EPERM;
    if (err) {
        json_decref(obj);
        return gs__reply_err(r, err, r->name);
    }
    if (gs__wants_table(r)) {
        json_t *arr = json_pack("[o]", obj);
        json_t *t = gs__table(r->res, arr, NULL, gs__wall_now(), include_of(r));
        json_decref(arr);
        return gs__reply_json(r, 200, t);
    }
    return gs__reply_json(r, 200, serve(r->res, obj));
}

/*--- Bodies and identity ---*/

/* The request body as one JSON object; answers 400 itself when it is not. */
/* Refuses a body nested deeper than GS_JSON_MAX_DEPTH: the clients could not
 * read it back inside a list or a watch event (see codec.h). */
static bool too_deep(struct gs__req *r, int depth, int line, int col)
{
    if (depth <= GS_JSON_MAX_DEPTH) return false;
    char where[64] = "";
    if (line) snprintf(where, sizeof where, " at line %d column %d", line, col);
    gs__reply_status(r, 422, "Invalid", r->name,
                     "the body is nested deeper than %d levels%s: objects are limited to %d levels of nesting",
                     GS_JSON_MAX_DEPTH, where, GS_JSON_MAX_DEPTH);
    return true;
}

static json_t *parse_body(struct gs__req *r)
{
    struct gs_diags d = {0};
    json_t *doc = NULL;
    int line = 0, col = 0;
    const char *ct = gs__header(r, "Content-Type");
    if (!r->body || !r->len) {
        gs__reply_status(r, 400, NULL, r->name, "the request has no body");
        return NULL;
    }
    if (ct && strstr(ct, "protobuf")) { /* api_proto.c reads only DeleteOptions and Eviction */
        gs__reply_status(r, 415, NULL, r->name, "protobuf bodies are accepted only for DeleteOptions and Eviction; "
                         "send JSON or YAML");
        return NULL;
    }
    bool yaml = ct && strstr(ct, "yaml");
    if (yaml) {
        struct gs_docs docs = {0};
        if (gs_decode_stream(r->body, r->len, &docs, &d, NULL) == 0 && docs.n == 1) doc = json_incref(docs.docs[0]);
        else if (!d.n) gs_diags_add(&d, "", "want exactly one document");
        gs_docs_free(&docs);
    } else if (memchr(r->body, 0, r->len)) {
        gs_diags_add(&d, "", "NUL byte in the body");
    } else if (too_deep(r, gs_json_text_depth(r->body, r->len, GS_JSON_MAX_DEPTH, &line, &col), line, col)) {
        return NULL;
    } else if (gs_json_decode(r->body, r->len, &doc, &d) == GS_EPARSE && (doc = gs__body_with_duplicates(r, &d))) {
        gs_diags_free(&d);
    }
    /* A JSON body's depth was checked on its text above (the tree's is the
     * same, or less with duplicate keys): only YAML's tree is walked. */
    if (yaml && doc && too_deep(r, gs_json_depth(doc), 0, 0)) {
        json_decref(doc);
        gs_diags_free(&d);
        return NULL;
    }
    if (doc && !json_is_object(doc)) {
        json_decref(doc);
        doc = NULL;
        gs_diags_add(&d, "", "the body must be a JSON object");
    }
    if (!doc && !r->answered)
        gs__reply_status(r, 400, NULL, r->name, "malformed body: %s", d.n ? d.v[0].msg : "cannot parse");
    gs_diags_free(&d);
    return doc;
}

static json_t *meta_of(json_t *obj)
{
    json_t *md = json_object_get(obj, "metadata");
    if (!json_is_object(md)) json_object_set_new(obj, "metadata", md = json_object());
    return md;
}

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* Kind, apiVersion, namespace and name against the URL; answers 400 itself. */
static int check_identity(struct gs__req *r, json_t *obj)
{
    char gv[128];
    gs_api_resource_gv(r->res, gv, sizeof gv);
    const char *kind = str(obj, "kind"), *api = str(obj, "apiVersion");
    if (!kind) json_object_set_new(obj, "kind", json_string(r->res->kind));
    else if (strcmp(kind, r->res->kind))
        return gs__reply_status(r, 400, NULL, r->name, "kind \"%s\" does not match the resource \"%s\"", kind,
                                r->res->plural), GS_EINVAL;
    if (!api) json_object_set_new(obj, "apiVersion", json_string(gv));
    else if (strchr(api, '/') ? strncmp(api, r->res->group, strlen(r->res->group)) || api[strlen(r->res->group)] != '/'
                              : r->res->group[0] != 0)
        return gs__reply_status(r, 400, NULL, r->name, "apiVersion \"%s\" does not belong to the group \"%s\"", api,
                                r->res->group), GS_EINVAL;
    json_t *md = meta_of(obj);
    const char *ns = str(md, "namespace"), *name = str(md, "name");
    if (r->res->namespaced) {
        if (!ns) json_object_set_new(md, "namespace", json_string(r->ns));
        else if (strcmp(ns, r->ns))
            return gs__reply_status(r, 400, NULL, r->name, "the namespace of the object (%s) does not match the "
                                    "namespace of the request (%s)", ns, r->ns), GS_EINVAL;
    } else {
        json_object_del(md, "namespace");
    }
    if (r->name && !name) json_object_set_new(md, "name", json_string(r->name));
    else if (r->name && strcmp(name, r->name))
        return gs__reply_status(r, 400, NULL, r->name, "the name of the object (%s) does not match the name in the "
                                "URL (%s)", name, r->name), GS_EINVAL;
    return 0;
}

static void random_suffix(unsigned char *b, size_t n)
{
    if (getrandom(b, n, 0) != (ssize_t)n) memset(b, 0, n);
}

void (*gs__name_suffix_source)(unsigned char *b, size_t n) = random_suffix;

static void generate_name(json_t *md)
{
    const char *gen = str(md, "generateName");
    if (str(md, "name") || !gen) return;
    static const char alnum[] = "bcdfghjklmnpqrstvwxz2456789";
    unsigned char b[5];
    gs__name_suffix_source(b, sizeof b);
    char name[300];
    int n = snprintf(name, sizeof name, "%.*s", 58, gen);
    for (int i = 0; i < 5; i++) name[n + i] = alnum[b[i] % (sizeof alnum - 1)];
    name[n + 5] = 0;
    json_object_set_new(md, "name", json_string(name));
}

/* Decodes obj with the core decoders and checks its enum fields (those
 * already wrong in old, the stored version, are let pass); fills d and
 * returns GS_EINVAL when invalid. */
static int validate(json_t *obj, const json_t *old, struct gs_diags *d)
{
    struct gs_object *o = NULL;
    int err = gs_object_decode(obj, &o, d);
    gs_object_free(o);
    const char *kind = str(obj, "kind");
    if (kind && !strcmp(kind, "PodDisruptionBudget") && gs_pdb_validate(obj, d) == GS_ENOMEM) return GS_ENOMEM;
    if (err == GS_ENOMEM || gs__check_enums(obj, old, d)) return GS_ENOMEM;
    return err ? err : d->n ? GS_EINVAL : 0;
}

static enum MHD_Result reply_invalid(struct gs__req *r, const json_t *obj, const struct gs_diags *d)
{
    const char *name = str(json_object_get(obj, "metadata"), "name");
    if (!name) name = r->name; /* a patch names its object in the URL only */
    char msg[2048];
    int n = snprintf(msg, sizeof msg, "%s \"%s\" is invalid: ", r->res->kind, name ? name : "");
    struct gs__cause causes[32];
    size_t nc = 0;
    for (size_t i = 0; i < d->n && n < (int)sizeof msg; i++) {
        n += snprintf(msg + n, sizeof msg - (size_t)n, "%s%s%s%s", i ? ", " : "", d->v[i].path,
                      d->v[i].path[0] ? ": " : "", d->v[i].msg);
        if (nc < 32) causes[nc++] = (struct gs__cause){d->v[i].path, d->v[i].msg, NULL};
    }
    json_t *st = gs__status(422, NULL, msg, r->res, name, causes, nc);
    /* kube-apiserver names the kind here (kubectl: `The Pod "x" is invalid`), the resource elsewhere */
    json_object_set_new(json_object_get(st, "details"), "kind", json_string(r->res->kind));
    return gs__reply_json(r, 422, st);
}

/*--- Create ---*/

/* The create, or under dryRun=All its check: an existing object is still a conflict. */
static int create_or_preview(struct gs__req *r, const char *key, json_t *obj, char **text)
{
    if (!r->dry_run) return gs_store_create_text(r->s->store, key, obj, NULL, text);
    json_t *have = NULL;
    int err = gs_store_get(r->s->store, key, &have, NULL);
    json_decref(have);
    return err == 0 ? GS_EEXIST : err == GS_ENOENT ? 0 : err;
}

enum MHD_Result gs__handle_create(struct gs__req *r)
{
    if (r->res->namespaced && !r->ns)
        return gs__reply_status(r, 404, NULL, NULL, "%s are created in a namespace", r->res->plural);
    json_t *obj = parse_body(r);
    if (!obj) return MHD_YES;
    struct gs_diags d = {0};
    enum MHD_Result ret;
    if (check_identity(r, obj) || gs__check_fields(r, obj, false) || gs_dra_to_storage(obj)) {
        json_decref(obj);
        return r->answered ? MHD_YES : gs__reply_err(r, GS_ENOMEM, NULL);
    }
    bool ev1 = gs_event_res_is_v1(r->res);
    if (ev1) { /* stored as the core v1 Event it converts to */
        json_t *core = NULL;
        if (gs_event_from_events_v1(obj, &core, &d)) {
            ret = reply_invalid(r, obj, &d);
            goto out;
        }
        json_decref(obj);
        obj = core;
    }
    bool generated = !str(meta_of(obj), "name") && str(meta_of(obj), "generateName");
    generate_name(meta_of(obj));
    if (gs__fields_create(r, obj)) { /* who may set which field; namespace; priority (api_fields.c) */
        json_decref(obj);
        return MHD_YES;
    }
    int err = gs_apiserver_prepare_new(obj);
    json_object_del(meta_of(obj), "deletionGracePeriodSeconds");
    gs_admit_default_tolerations(&r->s->admit_defaults, obj); /* DefaultTolerationSeconds (admit_defaults.c) */
    if (!err && validate(obj, NULL, &d)) {
        ret = reply_invalid(r, obj, &d);
        goto out;
    }
    const char *name = str(meta_of(obj), "name");
    char key[1024];
    if (!err && gs_api_key(r->res, r->ns, name, key, sizeof key) < 0) err = GS_EINVAL;
    char *text = NULL; /* the stored text is the reply */
    if (!err) err = create_or_preview(r, key, obj, &text);
    /* A generated name that is taken: another suffix, as kube-apiserver does. */
    for (int attempt = 1; err == GS_EEXIST && generated && attempt < GS__GENERATE_NAME_ATTEMPTS; attempt++) {
        json_object_del(meta_of(obj), "name");
        generate_name(meta_of(obj));
        name = str(meta_of(obj), "name");
        err = gs_api_key(r->res, r->ns, name, key, sizeof key) < 0 ? GS_EINVAL : create_or_preview(r, key, obj, &text);
    }
    if (err == GS_EEXIST && generated) {
        ret = gs__reply_status(r, 409, "AlreadyExists", name, "%s \"%s\" already exists: %d names generated from "
                               "generateName \"%s\" were all taken; try again or use a longer prefix", r->res->plural,
                               name, GS__GENERATE_NAME_ATTEMPTS, str(meta_of(obj), "generateName"));
        goto out;
    }
    if (text && (ev1 || gs_dra_res(r->res))) gs_store_text_release(text), text = NULL; /* served converted */
    ret = err ? gs__reply_err(r, err, name) : text ? gs__reply_stored(r, 201, text)
                                                   : gs__reply_json(r, 201, serve(r->res, json_incref(obj)));
out:
    gs_diags_free(&d);
    json_decref(obj);
    return ret;
}

/*--- Update and patch ---*/

enum wkind { W_UPDATE, W_MERGE, W_STRATEGIC };

struct wctx {
    struct gs__req *r;
    enum wkind kind;
    json_t *body;
    int64_t expect;
    struct gs_diags d;
    bool invalid;
    json_t *preview; /* dry run: what would have been written */
};

static void copy_member(json_t *dst, const json_t *src, const char *key)
{
    json_t *v = json_object_get(src, key);
    if (v) json_object_set(dst, key, v);
    else json_object_del(dst, key);
}

/* The write's new object from the stored one: body or patch, then the status rule and identity. */
static json_t *next_object(struct wctx *w, json_t *cur)
{
    json_t *view = gs_dra_serve(w->r->res, json_incref(cur)); /* a patch applies to the version it names */
    json_t *next = !view                ? NULL
                   : w->kind == W_UPDATE ? json_deep_copy(w->body)
                   : w->kind == W_MERGE  ? gs__merge_patch(view, w->body)
                                         : gs__strategic_merge_patch(view, w->body);
    json_decref(view);
    if (!next || !json_is_object(next) || gs_dra_to_storage(next)) {
        json_decref(next);
        return NULL;
    }
    if (!strcmp(w->r->sub, "status")) { /* only the status moves */
        json_t *n2 = json_deep_copy(cur);
        if (n2) copy_member(n2, next, "status");
        json_decref(next);
        next = n2;
    } else if (w->r->res->has_status) {
        copy_member(next, cur, "status");
    }
    if (!next) return NULL;
    copy_member(next, cur, "kind");
    /* A pod's binding is final: only the binding subresource sets spec.nodeName. */
    const char *bound = node_of(cur);
    json_t *spec = json_object_get(next, "spec");
    if (!strcmp(w->r->res->plural, "pods") && !w->r->res->group[0] && json_is_object(spec)) {
        if (bound) json_object_set_new(spec, "nodeName", json_string(bound));
        else json_object_del(spec, "nodeName");
    }
    json_t *md = meta_of(next), *cmd = json_object_get(cur, "metadata");
    const char *keep[] = {"name",          "namespace",         "uid", "creationTimestamp", "resourceVersion",
                          "deletionTimestamp", "deletionGracePeriodSeconds"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) copy_member(md, cmd, keep[i]);
    return next;
}

/* Does next carry a finalizer that cur does not? */
static bool adds_finalizer(const json_t *cur, const json_t *next)
{
    json_t *have = json_object_get(json_object_get(cur, "metadata"), "finalizers"), *f, *g;
    size_t i, j;
    json_array_foreach(json_object_get(json_object_get(next, "metadata"), "finalizers"), i, f) {
        bool found = false;
        json_array_foreach(have, j, g) found |= json_equal(f, g);
        if (!found) return true;
    }
    return false;
}

static int write_fn(json_t *cur, json_t **out, void *arg)
{
    struct wctx *w = arg;
    if (!cur) return GS_ENOENT;
    if (w->r->if_bound && !bound_to(cur, w->r->who)) return GS_EPERM;
    if (w->expect && gs_store_obj_rv(cur) != w->expect) return GS_ECONFLICT;
    json_t *next = next_object(w, cur);
    if (!next) return GS_ENOMEM;
    if (!strcmp(w->r->res->plural, "pods") && !w->r->res->group[0] && !w->r->sub[0])
        gs_admit_default_tolerations(&w->r->s->admit_defaults, next); /* on updates too, as Kubernetes' plugin */
    gs__fields_update(w->r, cur, next, &w->d); /* who may change which field (api_fields.c) */
    if (json_equal(next, cur)) {
        json_decref(next);
        return GS_STORE_UNCHANGED;
    }
    if (str(json_object_get(cur, "metadata"), "deletionTimestamp") && adds_finalizer(cur, next))
        gs_diags_add(&w->d, "metadata.finalizers", "Forbidden: no new finalizers can be added if the object is being "
                     "deleted");
    if (!strcmp(w->r->res->plural, "pods") && !w->r->res->group[0])
        gs_admit_phase_check(cur, next, &w->d); /* terminal phases are final (admit_defaults.c) */
    if (w->d.n || validate(next, cur, &w->d)) {
        w->invalid = true;
        json_decref(next);
        return GS_EINVAL;
    }
    if (w->r->dry_run) { /* answered, never written */
        w->preview = next;
        return GS_STORE_UNCHANGED;
    }
    *out = next;
    return 0;
}

static void finish_deletion(struct gs__req *r, const char *key, json_t **obj);

static enum MHD_Result run_write(struct wctx *w)
{
    struct gs__req *r = w->r;
    char key[1024];
    gs_api_key(r->res, r->ns, r->name, key, sizeof key);
    json_t *out = NULL;
    int err = gs_store_mutate(r->s->store, key, write_fn, w, &out, NULL);
    enum MHD_Result ret;
    if (err == GS_EINVAL && w->invalid) ret = reply_invalid(r, w->body, &w->d);
    else if (err == GS_ENOMEM && !out) ret = gs__reply_status(r, 422, NULL, r->name, "the patch cannot be applied");
    else if (err) ret = gs__reply_err(r, err, r->name);
    else if (w->preview) {
        ret = gs__reply_json(r, 200, w->preview), w->preview = NULL;
    } else {
        if (!r->dry_run) finish_deletion(r, key, &out);
        ret = gs__reply_json(r, 200, serve(r->res, out)), out = NULL; /* events.k8s.io, resource.k8s.io: their view */
    }
    json_decref(w->preview);
    json_decref(out);
    gs_diags_free(&w->d);
    json_decref(w->body);
    return ret;
}

/* The resourceVersion a client gives as a precondition (holder's
 * "resourceVersion"; field names it in the message): 0 when absent or "",
 * else a decimal integer >= 0. Anything else is refused (400) rather than
 * taken as "no precondition", which would make the write unconditional. */
static int client_rv(struct gs__req *r, const json_t *holder, const char *field, int64_t *out)
{
    *out = 0;
    json_t *v = json_object_get(holder, "resourceVersion");
    if (!v || json_is_null(v)) return 0;
    const char *s = json_string_value(v);
    if (s && !*s) return 0;
    size_t n = s ? strlen(s) : 0;
    bool ok = s && n <= 18;
    for (size_t i = 0; ok && i < n; i++) ok = s[i] >= '0' && s[i] <= '9';
    if (ok) return (*out = strtoll(s, NULL, 10)), 0;
    char *dump = s ? NULL : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    char msg[512];
    snprintf(msg, sizeof msg, "%s: Invalid value: %s%.64s%s: must be a decimal integer >= 0 in a string (the "
             "resourceVersion of the object as last read)", field, s ? "\"" : "", s ? s : dump ? dump : "?",
             s ? "\"" : "");
    free(dump);
    char clean[512];
    gs__text_printable(msg, clean, sizeof clean); /* %.64s may have cut a character in two */
    struct gs__cause c = {field, "must be a decimal integer >= 0 in a string", "FieldValueInvalid"};
    gs__reply_json(r, 400, gs__status(400, "BadRequest", clean, r->res, r->name, &c, 1));
    return GS_EINVAL;
}

enum MHD_Result gs__handle_update(struct gs__req *r)
{
    if (strcmp(r->sub, "") && strcmp(r->sub, "status"))
        return gs__reply_status(r, 405, NULL, r->name, "cannot update %s", r->sub);
    if (gs__fields_node_event_write(r)) return MHD_YES;
    json_t *obj = parse_body(r);
    if (!obj) return MHD_YES;
    if (check_identity(r, obj) || gs__check_fields(r, obj, false) || gs_dra_to_storage(obj)) {
        json_decref(obj);
        return r->answered ? MHD_YES : gs__reply_err(r, GS_ENOMEM, NULL);
    }
    if (gs_event_res_is_v1(r->res)) { /* an events.k8s.io PUT (a recorder's series) replaces the core Event */
        struct gs_diags d = {0};
        json_t *core = NULL;
        if (gs_event_from_events_v1(obj, &core, &d)) {
            enum MHD_Result ret = reply_invalid(r, obj, &d);
            gs_diags_free(&d);
            json_decref(obj);
            return ret;
        }
        gs_diags_free(&d);
        json_object_set(core, "metadata", meta_of(obj));
        json_decref(obj);
        obj = core;
    }
    struct wctx w = {.r = r, .kind = W_UPDATE, .body = obj};
    if (client_rv(r, meta_of(obj), "metadata.resourceVersion", &w.expect)) {
        json_decref(obj);
        return MHD_YES;
    }
    return run_write(&w);
}

enum MHD_Result gs__handle_patch(struct gs__req *r)
{
    if (strcmp(r->sub, "") && strcmp(r->sub, "status"))
        return gs__reply_status(r, 405, NULL, r->name, "cannot patch %s", r->sub);
    if (gs_event_res_is_v1(r->res))
        return gs__reply_status(r, 405, NULL, r->name, "events.k8s.io/v1 Events are not patched in place: patch "
                                "the same Event as v1 (/api/v1/namespaces/%s/events/%s)", r->ns, r->name);
    const char *ct = gs__header(r, "Content-Type");
    enum wkind k;
    if (ct && !strncmp(ct, "application/merge-patch+json", 28)) k = W_MERGE;
    else if (ct && !strncmp(ct, "application/strategic-merge-patch+json", 38)) k = W_STRATEGIC;
    else
        return gs__reply_status(r, 415, NULL, r->name, "patch type \"%s\" not supported (use merge-patch or "
                                "strategic-merge-patch)", ct ? ct : "");
    if (gs__fields_node_event_write(r)) return MHD_YES;
    json_t *patch = parse_body(r);
    if (!patch) return MHD_YES;
    if (gs__check_fields(r, patch, true)) {
        json_decref(patch);
        return MHD_YES;
    }
    struct wctx w = {.r = r, .kind = k, .body = patch};
    if (client_rv(r, json_object_get(patch, "metadata"), "metadata.resourceVersion", &w.expect)) {
        json_decref(patch);
        return MHD_YES;
    }
    return run_write(&w);
}

/*--- Binding ---*/

int gs__pod_set_condition(json_t *pod, const char *type, const char *status, const char *reason, const char *message)
{
    json_t *st = json_object_get(pod, "status");
    if (!json_is_object(st)) json_object_set_new(pod, "status", st = json_object());
    json_t *conds = json_object_get(st, "conditions");
    if (!json_is_array(conds)) json_object_set_new(st, "conditions", conds = json_array());
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    size_t i;
    json_t *c, *found = NULL;
    json_array_foreach(conds, i, c)
        if (json_is_string(json_object_get(c, "type")) && !strcmp(str(c, "type"), type)) found = c;
    if (!found) json_array_append_new(conds, found = json_object());
    const char *old = str(found, "status");
    if (!old || strcmp(old, status)) json_object_set_new(found, "lastTransitionTime", json_string(ts));
    json_object_set_new(found, "type", json_string(type));
    json_object_set_new(found, "status", json_string(status));
    if (reason) json_object_set_new(found, "reason", json_string(reason));
    else json_object_del(found, "reason");
    if (message) json_object_set_new(found, "message", json_string(message));
    else json_object_del(found, "message");
    json_object_set_new(found, "lastProbeTime", json_null());
    return 0;
}

struct bctx {
    const char *node;
    json_t *annotations;
    char bound_to[256];
    bool dry_run;
    const char *want_uid; /* the Binding's metadata.uid: a precondition, as kube-apiserver's */
    char uid[128];        /* the pod's, when it differs */
};

static int bind_fn(json_t *cur, json_t **out, void *arg)
{
    struct bctx *b = arg;
    if (!cur) return GS_ENOENT;
    const char *uid = str(json_object_get(cur, "metadata"), "uid");
    if (b->want_uid && (!uid || strcmp(uid, b->want_uid))) {
        snprintf(b->uid, sizeof b->uid, "%s", uid ? uid : "");
        return GS_ECONFLICT;
    }
    const char *n = node_of(cur);
    if (n && *n) {
        snprintf(b->bound_to, sizeof b->bound_to, "%s", n);
        return GS_EEXIST;
    }
    if (str(json_object_get(cur, "metadata"), "deletionTimestamp")) return GS_ESTATE;
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    json_t *spec = json_object_get(next, "spec");
    if (!json_is_object(spec)) json_object_set_new(next, "spec", spec = json_object());
    json_object_set_new(spec, "nodeName", json_string(b->node));
    if (json_is_object(b->annotations)) {
        json_t *md = meta_of(next), *ann = json_object_get(md, "annotations");
        if (!json_is_object(ann)) json_object_set_new(md, "annotations", ann = json_object());
        json_object_update(ann, b->annotations);
    }
    gs__pod_set_condition(next, "PodScheduled", "True", NULL, NULL);
    if (b->dry_run) {
        json_decref(next);
        return GS_STORE_UNCHANGED;
    }
    *out = next;
    return 0;
}

enum MHD_Result gs__handle_bind(struct gs__req *r)
{
    json_t *body = parse_body(r);
    if (!body) return MHD_YES;
    const char *node = str(json_object_get(body, "target"), "name");
    enum MHD_Result ret;
    json_t *uidv = json_object_get(json_object_get(body, "metadata"), "uid");
    if (uidv && !json_is_string(uidv)) {
        struct gs__cause c = {"metadata.uid", "Invalid value: must be a string", "FieldValueInvalid"};
        ret = gs__reply_json(r, 422, gs__status(422, NULL, "Binding is invalid: metadata.uid: must be a string",
                                                r->res, r->name, &c, 1));
    } else if (!node || !*node) {
        struct gs__cause c = {"target.name", "Required value", "FieldValueRequired"};
        ret = gs__reply_json(r, 422, gs__status(422, NULL, "Binding is invalid: target.name: Required value", r->res,
                                                r->name, &c, 1));
    } else {
        json_t *md = json_object_get(body, "metadata");
        struct bctx b = {node, json_object_get(md, "annotations"), "", r->dry_run, str(md, "uid"), ""};
        if (b.want_uid && !*b.want_uid) b.want_uid = NULL;
        char key[1024];
        gs_api_key(r->res, r->ns, r->name, key, sizeof key);
        int err = gs_store_mutate(r->s->store, key, bind_fn, &b, NULL, NULL);
        if (err == GS_ECONFLICT) /* kube-apiserver's words for a failed uid precondition */
            ret = gs__reply_status(r, 409, "Conflict", r->name,
                                   "Operation cannot be fulfilled on pods \"%s\": Precondition failed: UID in "
                                   "precondition: %s, UID in object meta: %s", r->name, b.want_uid, b.uid);
        else if (err == GS_EEXIST)
            ret = gs__reply_status(r, 409, "Conflict", r->name, "pod %s is already assigned to node \"%s\"", r->name,
                                   b.bound_to);
        else if (err == GS_ESTATE)
            ret = gs__reply_status(r, 409, "Conflict", r->name, "pod %s is being deleted, cannot be assigned to a host",
                                   r->name);
        else if (err) ret = gs__reply_err(r, err, r->name);
        else ret = gs__reply_json(r, 201, gs__status(201, NULL, "", NULL, NULL, NULL, 0));
    }
    json_decref(body);
    return ret;
}

/*--- Delete ---
 *
 * Graceful deletion, as Kubernetes does it. A pod bound to a node and not
 * finished is not removed: DELETE sets metadata.deletionTimestamp (now +
 * grace) and deletionGracePeriodSeconds and answers the object; the node
 * agent stops the processes, releases the devices and then deletes the pod
 * with gracePeriodSeconds=0, which removes it. Until then the scheduler
 * keeps counting its resources, so no new pod is bound onto GPUs whose
 * processes still run. A later DELETE may shorten the deadline, never
 * extend it. An object with finalizers is kept (deletionTimestamp set)
 * until an update empties them; it is then removed when its grace period
 * is 0 (everything but a terminating pod, whose agent still has to confirm).
 */

struct dctx {
    struct gs__req *r;
    const char *want_uid;
    int64_t expect;
    long long grace;  /* -1: not given */
    bool now;         /* remove at once, at version seen_rv */
    int64_t seen_rv;
    json_t *preview;  /* dry run: the answer */
};

static bool has_finalizers(const json_t *obj)
{
    return json_array_size(json_object_get(json_object_get(obj, "metadata"), "finalizers")) > 0;
}

static bool pod_terminal(const json_t *obj)
{
    const char *ph = str(json_object_get(obj, "status"), "phase");
    return ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed"));
}

static bool is_pod(const struct gs_api_resource *res)
{
    return !res->group[0] && !strcmp(res->plural, "pods");
}

static void rfc3339(time_t t, char *buf, size_t len)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static time_t parse_rfc3339(const char *s)
{
    struct tm tm = {0};
    return s && strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) ? timegm(&tm) : 0;
}

static int delete_fn(json_t *cur, json_t **out, void *arg)
{
    struct dctx *d = arg;
    if (!cur) return GS_ENOENT;
    if (d->r->if_bound && !bound_to(cur, d->r->who)) return GS_EPERM;
    const char *uid = str(json_object_get(cur, "metadata"), "uid");
    if (d->want_uid && (!uid || strcmp(uid, d->want_uid))) return GS_ECONFLICT;
    d->seen_rv = gs_store_obj_rv(cur);
    if (d->expect && d->seen_rv != d->expect) return GS_ECONFLICT;
    bool graceful = is_pod(d->r->res) && node_of(cur) && *node_of(cur) && !pod_terminal(cur);
    long long grace = 0;
    if (graceful) {
        json_t *tg = json_object_get(json_object_get(cur, "spec"), "terminationGracePeriodSeconds");
        grace = d->grace >= 0 ? d->grace : json_is_integer(tg) && json_integer_value(tg) >= 0 ? json_integer_value(tg)
                                                                                                : 30;
        if (grace > GS_GRACE_MAX_S) grace = GS_GRACE_MAX_S; /* a pod stored before the limit: no overflow */
    }
    bool fin = has_finalizers(cur);
    if (!fin && grace == 0 && d->r->dry_run) { /* would be removed: its last state is the answer */
        d->preview = json_incref(cur);
        return GS_STORE_UNCHANGED;
    }
    if (!fin && grace == 0) {
        d->now = true;
        return GS_ESTATE;
    }
    time_t deadline = time(NULL) + (time_t)grace;
    json_t *md = json_object_get(cur, "metadata");
    const char *old = str(md, "deletionTimestamp");
    json_t *old_grace = json_object_get(md, "deletionGracePeriodSeconds");
    bool later = old && parse_rfc3339(old) <= deadline; /* never extended */
    if (later && (grace > 0 || json_integer_value(old_grace) == 0)) return GS_STORE_UNCHANGED;
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    char ts[32];
    rfc3339(deadline, ts, sizeof ts);
    md = meta_of(next);
    if (!later) json_object_set_new(md, "deletionTimestamp", json_string(ts));
    json_object_set_new(md, "deletionGracePeriodSeconds", json_integer(grace));
    if (d->r->dry_run) {
        d->preview = next;
        return GS_STORE_UNCHANGED;
    }
    *out = next;
    return 0;
}

/* gracePeriodSeconds from the DeleteOptions body or the query (0..GS_GRACE_MAX_S); answers 400 itself. */
static int grace_of(struct gs__req *r, const json_t *opts, long long *grace)
{
    *grace = -1;
    json_t *g = json_object_get(opts, "gracePeriodSeconds");
    const char *q = gs__arg(r, "gracePeriodSeconds");
    char text[64] = "";
    if (g && !json_is_null(g)) {
        if (json_is_integer(g) && json_integer_value(g) >= 0 && json_integer_value(g) <= GS__MAX_GRACE_SECONDS)
            return (*grace = json_integer_value(g)), 0;
        char *dump = json_dumps(g, JSON_ENCODE_ANY | JSON_COMPACT);
        snprintf(text, sizeof text, "%s", dump ? dump : "?");
        free(dump);
    } else if (q) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(q, &end, 10);
        if (*q && !*end && !errno && v >= 0 && v <= GS__MAX_GRACE_SECONDS) return (*grace = v), 0;
        snprintf(text, sizeof text, "\"%.48s\"", q);
    } else {
        return 0;
    }
    struct gs__cause c = {"gracePeriodSeconds", "must be a whole number of seconds from 0 to 31536000",
                          "FieldValueInvalid"};
    char msg[160], clean[160];
    snprintf(msg, sizeof msg, "invalid gracePeriodSeconds %s: must be a whole number of seconds from 0 to %lld "
             "(one year)", text, (long long)GS__MAX_GRACE_SECONDS);
    gs__reply_json(r, 400, gs__status(400, NULL, gs__text_printable(msg, clean, sizeof clean), r->res, r->name, &c, 1));
    return GS_EINVAL;
}

int gs__delete_object(struct gs__req *r, const json_t *opts, json_t **out_obj)
{
    *out_obj = NULL;
    json_t *pre = json_object_get(opts, "preconditions");
    struct dctx d = {.r = r, .want_uid = str(pre, "uid")};
    if (client_rv(r, pre, "preconditions.resourceVersion", &d.expect) || grace_of(r, opts, &d.grace)) return GS_EINVAL;
    char key[1024];
    gs_api_key(r->res, r->ns, r->name, key, sizeof key);
    json_t *out = NULL;
    int err = GS_ECONFLICT;
    /* An object that changed between the look and the removal is looked at again. */
    for (int attempt = 0; attempt < 8 && err == GS_ECONFLICT; attempt++) {
        d.now = false;
        json_decref(d.preview);
        d.preview = NULL;
        err = gs_store_mutate(r->s->store, key, delete_fn, &d, &out, NULL);
        if (err == GS_ESTATE && d.now) err = gs_store_delete(r->s->store, key, d.seen_rv, &out, NULL);
        if (err == GS_ECONFLICT && (d.expect || d.want_uid)) break; /* the client's precondition failed */
    }
    if (!err && d.preview) {
        json_decref(out);
        out = d.preview, d.preview = NULL;
    }
    json_decref(d.preview);
    if (err) json_decref(out);
    else *out_obj = out;
    return err;
}

enum MHD_Result gs__handle_delete(struct gs__req *r)
{
    if (!r->res->group[0] && !strcmp(r->res->plural, "namespaces")) return gs__namespace_delete(r); /* namespaces.c */
    json_t *opts = NULL, *out = NULL;
    if (gs__delete_options(r, r->body, r->len, gs__header(r, "Content-Type"), &opts)) return MHD_YES;
    int err = gs__delete_object(r, opts, &out);
    json_decref(opts);
    if (err == GS_EINVAL && r->answered) return MHD_YES;
    if (err) return gs__reply_err(r, err, r->name);
    return gs__reply_json(r, 200, serve(r->res, out));
}

/* After a write: an object being deleted whose finalizers are all gone and
 * whose grace period is 0 is removed now. *obj becomes its last state. */
static void finish_deletion(struct gs__req *r, const char *key, json_t **obj)
{
    json_t *md = json_object_get(*obj, "metadata");
    if (!str(md, "deletionTimestamp") || has_finalizers(*obj)) return;
    json_int_t grace = json_integer_value(json_object_get(md, "deletionGracePeriodSeconds"));
    if (grace > 0) return; /* a terminating pod: its agent deletes it */
    json_t *old = NULL;
    if (gs_store_delete(r->s->store, key, gs_store_obj_rv(*obj), &old, NULL) == 0) {
        json_decref(*obj);
        *obj = old;
    }
}
