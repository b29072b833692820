/*
 * source_local.c - the in-process transport of source.h: the server's own
 * store, no HTTP.
 *
 * Reads and whole-object writes are the store's calls unchanged, so the
 * server's loops pay nothing for going through the interface. The two
 * semantic writes keep the server's own meaning: a binding is one
 * transaction (node, devices annotation, PodScheduled=True, status.devices),
 * and a preempted pod ends Failed/Preempted (restartPolicy Never) or is
 * re-created unbound under a new uid, since no controller runs here to
 * re-create a deleted one.
 */
#include "informer/source.h"

#include "control/api.h"       /* gs__pod_set_condition */
#include "control/apiserver.h" /* gs_apiserver_prepare_new */
#include "core/object.h"       /* GS_ANN_DEVICES */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct local {
    struct gs_source base;
    struct gs_store *store;
};

#define ST(s) (((struct local *)(s))->store)

static int l_list(struct gs_source *s, const char *prefix, gs_store_list_fn fn, void *arg, int64_t *cursor)
{ return gs_store_list(ST(s), prefix, fn, arg, cursor); }

static int l_events(struct gs_source *s, int64_t *after, const char *prefix, int timeout_ms, const atomic_bool *stop,
                    struct gs_store_event **evs, size_t *n)
{ return gs_store_events(ST(s), after, prefix, timeout_ms, stop, evs, n); }

static int l_get(struct gs_source *s, const char *key, json_t **obj, int64_t *rv)
{ return gs_store_get(ST(s), key, obj, rv); }

/* A loop's create gets what the API gives every new object (uid,
 * creationTimestamp): a claim the resourceclaim controller makes is then
 * told apart from a later one of the same name, as through a kube source. */
static int l_create(struct gs_source *s, const char *key, json_t *obj, int64_t *rv)
{
    const json_t *md = json_object_get(obj, "metadata");
    if (!json_object_get(md, "uid")) {
        int err = gs_apiserver_prepare_new(obj);
        if (err) return err;
    }
    return gs_store_create(ST(s), key, obj, rv);
}

/* The store has no subresources: a status write is a write of the object
 * whose fn only touches status. */
static int l_mutate(struct gs_source *s, const char *key, const char *sub, gs_store_mutate_fn fn, void *arg,
                    json_t **out, int64_t *rv)
{
    (void)sub;
    return gs_store_mutate(ST(s), key, fn, arg, out, rv);
}

static int l_mutate_batch(struct gs_source *s, struct gs_store_mut *m, size_t n)
{ return gs_store_mutate_batch(ST(s), m, n); }

struct rm_ctx {
    const char *uid;
};

static int l_remove(struct gs_source *s, const char *key, const char *uid, int64_t expect_rv, json_t **old)
{
    if (old) *old = NULL;
    if (uid) { /* the store compares versions only: read the uid at the version we delete */
        json_t *cur = NULL;
        int64_t rv = 0;
        int err = gs_store_get(ST(s), key, &cur, &rv);
        if (err) return err;
        const char *u = json_string_value(json_object_get(json_object_get(cur, "metadata"), "uid"));
        bool same = u && !strcmp(u, uid);
        json_decref(cur);
        if (!same) return GS_ECONFLICT;
        if (expect_rv && expect_rv != rv) return GS_ECONFLICT;
        expect_rv = rv;
    }
    return gs_store_delete(ST(s), key, expect_rv, old, NULL);
}

/*--- bind ---*/

static int bind_fn(json_t *cur, json_t **out, void *arg)
{
    const struct gs_source_bind *b = arg;
    if (!cur) return GS_ENOENT;
    json_t *md = json_object_get(cur, "metadata"), *spec = json_object_get(cur, "spec");
    const char *uid = json_string_value(json_object_get(md, "uid"));
    if (b->uid && (!uid || strcmp(uid, b->uid))) return GS_ENOENT; /* a new pod of the same name */
    const char *n = json_string_value(json_object_get(spec, "nodeName"));
    if (n && *n) return GS_EEXIST;
    if (json_object_get(md, "deletionTimestamp")) return GS_ENOENT; /* being deleted */
    json_t *next = json_incref(cur); /* the store's private copy (store.h): changed in place, not copied */
    if (!json_is_object(spec)) json_object_set_new(next, "spec", spec = json_object());
    json_object_set_new(spec, "nodeName", json_string(b->node));
    if (json_object_size(b->annotations)) {
        json_t *ann = json_object_get(md, "annotations");
        if (!json_is_object(ann)) json_object_set_new(md, "annotations", ann = json_object());
        json_object_update(ann, (json_t *)b->annotations);
    }
    gs__pod_set_condition(next, "PodScheduled", "True", NULL, NULL);
    if (json_array_size(b->status_devices))
        json_object_set(json_object_get(next, "status"), "devices", (json_t *)b->status_devices);
    *out = next;
    return 0;
}

static int l_bind(struct gs_source *s, struct gs_source_bind *b, size_t n)
{
    struct gs_store_mut stack[64], *m = n <= 64 ? stack : calloc(n, sizeof *m);
    if (!m) return GS_ENOMEM;
    for (size_t i = 0; i < n; i++) m[i] = (struct gs_store_mut){.key = b[i].key, .fn = bind_fn, .arg = &b[i]};
    int err = gs_store_mutate_batch(ST(s), m, n);
    for (size_t i = 0; i < n; i++) {
        b[i].err = err ? err : m[i].err;
        b[i].rv = m[i].rv;
        b[i].out = m[i].out;
    }
    if (m != stack) free(m);
    return err;
}

/*--- preempt ---*/

struct evict_ctx {
    const char *uid;
    const char *preemptor;
    bool recreated;
};

static int evict_fn(json_t *cur, json_t **out, void *arg)
{
    struct evict_ctx *c = arg;
    if (!cur) return GS_ENOENT;
    json_t *md = json_object_get(cur, "metadata");
    const char *uid = json_string_value(json_object_get(md, "uid"));
    if (c->uid && (!uid || strcmp(uid, c->uid))) return GS_ENOENT;
    json_t *n = json_deep_copy(cur);
    if (!n) return GS_ENOMEM;
    char msg[1024];
    snprintf(msg, sizeof msg, "preempted by %s", c->preemptor);
    const char *policy = json_string_value(json_object_get(json_object_get(n, "spec"), "restartPolicy"));
    md = json_object_get(n, "metadata");
    if (policy && !strcmp(policy, "Never")) {
        json_t *st = json_object_get(n, "status");
        if (!json_is_object(st)) json_object_set_new(n, "status", st = json_object());
        json_object_set_new(st, "phase", json_string("Failed"));
        json_object_set_new(st, "reason", json_string("Preempted"));
        json_object_set_new(st, "message", json_string(msg));
        gs__pod_set_condition(n, "DisruptionTarget", "True", "PreemptionByScheduler", msg);
        *out = n;
        return 0;
    }
    json_t *ann = json_object_get(md, "annotations");
    if (!json_is_object(ann)) json_object_set_new(md, "annotations", ann = json_object());
    json_object_set(ann, "gpusched.io/recreated-from", json_object_get(md, "uid"));
    json_object_set_new(ann, "gpusched.io/recreated-reason", json_string(msg));
    json_object_del(ann, GS_ANN_DEVICES);
    json_object_del(json_object_get(n, "spec"), "nodeName");
    json_object_set_new(n, "status", json_object());
    int err = gs_apiserver_prepare_new(n);
    if (err) {
        json_decref(n);
        return err;
    }
    c->recreated = true;
    *out = n;
    return 0;
}

static int l_preempt(struct gs_source *s, const char *key, const char *uid, const char *preemptor, bool *recreated)
{
    struct evict_ctx c = {uid, preemptor, false};
    int err = gs_store_mutate(ST(s), key, evict_fn, &c, NULL, NULL);
    if (recreated) *recreated = !err && c.recreated;
    return err;
}

static void l_interrupt(struct gs_source *s) { gs_store_interrupt(ST(s)); }
static void l_free(struct gs_source *s) { free(s); }

static const struct gs_source_vtbl local_vtbl = {
    .kind = GS_SOURCE_LOCAL,
    .list = l_list,
    .events = l_events,
    .get = l_get,
    .create = l_create,
    .mutate = l_mutate,
    .mutate_batch = l_mutate_batch,
    .remove = l_remove,
    .bind = l_bind,
    .preempt = l_preempt,
    .interrupt = l_interrupt,
    .free = l_free,
};

int gs_source_local_new(struct gs_store *store, struct gs_source **out)
{
    *out = NULL;
    struct local *l = calloc(1, sizeof *l);
    if (!l) return GS_ENOMEM;
    l->base.v = &local_vtbl;
    l->store = store;
    *out = &l->base;
    return 0;
}

struct gs_store *gs_source_local_store(struct gs_source *s)
{ return s && s->v == &local_vtbl ? ST(s) : NULL; }
