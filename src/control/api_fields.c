/*
 * api_fields.c - who may write which field; see api_fields.h.
 *
 * Kubernetes splits a pod between its writers: the client writes the spec
 * once, the scheduler names the node and (here) the GPUs through
 * pods/binding, the node writes the status, and the Priority admission
 * plugin turns priorityClassName into spec.priority. A field written by the
 * wrong party is how a tenant could run on GPUs it picked, free quota while
 * its processes run, or preempt everyone, so each rule below is checked on
 * every create and every write of the main resource:
 *
 *  - create, tenants and nodes: spec.nodeName and the devices annotation are
 *    refused (403, naming the field); status is reset to Pending. Admins may
 *    create a pod bound to a node, as in Kubernetes (it bypasses the
 *    scheduler), and keep the status they send;
 *  - create, everyone: spec.priority and spec.preemptionPolicy come from the
 *    PriorityClass (or the global default, else 0 / PreemptLowerPriority);
 *    an unknown class and a client value that differs are refused with the
 *    admission plugin's words;
 *  - update and patch, everyone: the pod spec is immutable except the fields
 *    Kubernetes lets change, with its error text; the devices annotation and
 *    the queue and pod-group labels never change after create;
 *  - PriorityClass: value immutable, names "system-" reserved, one default.
 *  - RuntimeClass: handler immutable.
 *
 * Lookups are cached per server for a second, as Kubernetes' admission
 * plugins read informer caches: a namespace seen Active, a class found by
 * name, the global default. Two store reads on every pod create cost a
 * third of the create throughput. Misses always read the store; DELETE of a
 * namespace and create of a class drop what they change at once, so only a
 * class deleted in the last second can still be applied.
 */
#include "control/api_fields.h"

#include "core/object.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PC_ID "priorityclasses.scheduling.k8s.io"

/*--- The lookup cache ---*/

#define CACHE_TTL_NS 1000000000LL
#define CACHE_SLOTS 32

struct slot {
    char name[256];
    json_t *obj;   /* the class (namespaces: NULL) */
    int64_t until; /* monotonic ns; 0: empty */
};

struct gs__fields_cache {
    pthread_mutex_t mu;
    struct slot ns[CACHE_SLOTS], pc[CACHE_SLOTS];
    unsigned ns_next, pc_next;
    json_t *def;       /* the global default class, NULL when none */
    int64_t def_until; /* 0: unknown */
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static struct gs__fields_cache *cache_of(struct gs__req *r)
{
    struct gs__fields_cache *c = atomic_load(&r->s->fields_cache);
    if (c) return c;
    if (!(c = calloc(1, sizeof *c))) return NULL;
    pthread_mutex_init(&c->mu, NULL);
    struct gs__fields_cache *none = NULL;
    if (atomic_compare_exchange_strong(&r->s->fields_cache, &none, c)) return c;
    pthread_mutex_destroy(&c->mu);
    free(c);
    return none; /* another thread's */
}

void gs__fields_cache_free(struct gs__fields_cache *c)
{
    if (!c) return;
    for (int i = 0; i < CACHE_SLOTS; i++) json_decref(c->pc[i].obj);
    json_decref(c->def);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* The live entry for name in v (NULL: none); under c->mu. */
static struct slot *slot_find(struct slot *v, const char *name, int64_t now)
{
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (v[i].until > now && !strcmp(v[i].name, name)) return &v[i];
    return NULL;
}

static void slot_put(struct slot *v, unsigned *next, const char *name, json_t *obj, int64_t now)
{
    if (strlen(name) >= sizeof v[0].name) return;
    struct slot *s = slot_find(v, name, now);
    if (!s) s = &v[(*next)++ % CACHE_SLOTS];
    json_decref(s->obj);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->obj = json_incref(obj);
    s->until = now + CACHE_TTL_NS;
}

bool gs__fields_ns_cached(struct gs__req *r, const char *ns)
{
    struct gs__fields_cache *c = cache_of(r);
    if (!c) return false;
    pthread_mutex_lock(&c->mu);
    bool yes = slot_find(c->ns, ns, mono_ns()) != NULL;
    pthread_mutex_unlock(&c->mu);
    return yes;
}

void gs__fields_ns_note(struct gs__req *r, const char *ns, bool active)
{
    struct gs__fields_cache *c = cache_of(r);
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    int64_t now = mono_ns();
    if (active) slot_put(c->ns, &c->ns_next, ns, NULL, now);
    else {
        struct slot *s = slot_find(c->ns, ns, now);
        if (s) s->until = 0;
    }
    pthread_mutex_unlock(&c->mu);
}

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static bool is_core(const struct gs__req *r, const char *plural)
{
    return !r->res->group[0] && !strcmp(r->res->plural, plural);
}

static const char *name_of(const json_t *obj)
{
    return str(json_object_get(obj, "metadata"), "name");
}

static int forbid(struct gs__req *r, const json_t *obj, const char *fmt, const char *a, const char *b)
{
    const char *name = name_of(obj);
    char why[512];
    snprintf(why, sizeof why, fmt, a, b);
    gs__reply_status(r, 403, NULL, name, "%s \"%s\" is forbidden: %s", r->res->plural, name ? name : "", why);
    return GS_EPERM;
}

/*--- Node principals: only what belongs to the node ---*/

static bool pod_bound_to(struct gs__req *r, const char *ns, const char *name, const char *node)
{
    if (!ns || !name) return false;
    char key[1024];
    snprintf(key, sizeof key, "pods/%s/%s", ns, name);
    json_t *pod = NULL;
    bool yes = false;
    if (gs_store_get(r->s->store, key, &pod, NULL) == 0) {
        const char *n = str(json_object_get(pod, "spec"), "nodeName");
        yes = n && !strcmp(n, node);
    }
    json_decref(pod);
    return yes;
}

static int node_create(struct gs__req *r, const json_t *obj)
{
    const char *node = r->who->node, *name = name_of(obj);
    if (is_core(r, "events")) {
        const json_t *io = json_object_get(obj, "involvedObject");
        const char *kind = str(io, "kind"), *on = str(io, "name");
        bool ok = kind && on &&
                  ((!strcmp(kind, "Node") && !strcmp(on, node)) ||
                   (!strcmp(kind, "Pod") && pod_bound_to(r, str(io, "namespace") ? str(io, "namespace") : r->ns, on,
                                                         node)));
        return ok ? 0 : forbid(r, obj, "User \"%s\" may only create events about node \"%s\" and the pods bound to it",
                               r->who->user, node);
    }
    if (!strcmp(r->res->plural, "resourceslices")) { /* its own slices: spec.nodeName, whatever the name */
        const char *sn = str(json_object_get(obj, "spec"), "nodeName");
        return sn && !strcmp(sn, node) ? 0 : forbid(r, obj, "User \"%s\" may only create ResourceSlices whose "
                                                   "spec.nodeName is its node \"%s\"", r->who->user, node);
    }
    if (!name || strcmp(name, node))
        return forbid(r, obj, "User \"%s\" may only create the one named after its node \"%s\"", r->who->user, node);
    return 0;
}

/*--- Pods at create ---*/

struct pc_default {
    json_t *pc; /* the globalDefault class, if any */
};

static int find_default(const char *key, json_t *obj, void *arg)
{
    (void)key;
    struct pc_default *d = arg;
    if (json_is_true(json_object_get(obj, "globalDefault")) && !d->pc) d->pc = json_incref(obj);
    return 0;
}

/* The class named name from the store (NULL: the global default; *pc stays NULL without one). */
static int load_class(struct gs__req *r, const char *name, json_t **pc)
{
    *pc = NULL;
    if (name) {
        char key[512];
        snprintf(key, sizeof key, PC_ID "/%s", name);
        return gs_store_get(r->s->store, key, pc, NULL);
    }
    struct pc_default d = {NULL};
    int64_t rv;
    int err = gs_store_list(r->s->store, PC_ID "/", find_default, &d, &rv);
    *pc = d.pc;
    return err;
}

/* load_class through the cache (*pc: a new reference). */
static int find_class(struct gs__req *r, const char *name, json_t **pc)
{
    struct gs__fields_cache *c = cache_of(r);
    if (!c) return load_class(r, name, pc);
    pthread_mutex_lock(&c->mu);
    int64_t now = mono_ns();
    struct slot *s = name ? slot_find(c->pc, name, now) : NULL;
    bool hit = name ? s != NULL : c->def_until > now;
    *pc = !hit ? NULL : json_incref(name ? s->obj : c->def);
    pthread_mutex_unlock(&c->mu);
    if (hit) return 0;
    int err = load_class(r, name, pc);
    if (err) return err;
    pthread_mutex_lock(&c->mu);
    now = mono_ns();
    if (name) slot_put(c->pc, &c->pc_next, name, *pc, now);
    else {
        json_decref(c->def);
        c->def = json_incref(*pc);
        c->def_until = now + CACHE_TTL_NS;
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* A class is being created: the default may change. */
static void classes_changed(struct gs__req *r)
{
    struct gs__fields_cache *c = cache_of(r);
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->def_until = 0;
    pthread_mutex_unlock(&c->mu);
}

/* Kubernetes' Priority admission: priority and preemption policy from the class. */
static int resolve_priority(struct gs__req *r, json_t *obj)
{
    json_t *spec = json_object_get(obj, "spec");
    if (!json_is_object(spec)) return 0; /* validation says what is missing */
    const char *cls = str(spec, "priorityClassName");
    if (cls && !*cls) cls = NULL;
    json_t *pc = NULL;
    int err = find_class(r, cls, &pc);
    if (err == GS_ENOENT && cls) return forbid(r, obj, "no PriorityClass with name %s was found%s", cls, "");
    /* The system classes outrank every workload: only kube-system pods and admins get them. */
    if (!err && cls && !strncmp(cls, "system-", 7) && r->who->role != GS_ROLE_ADMIN && strcmp(r->ns, "kube-system")) {
        json_decref(pc);
        return forbid(r, obj, "pods with %s priorityClass is not permitted in %s namespace", cls, r->ns);
    }
    if (err) return gs__reply_err(r, err, name_of(obj)), err;
    long long value = pc ? json_integer_value(json_object_get(pc, "value")) : 0;
    const char *policy = pc && str(pc, "preemptionPolicy") ? str(pc, "preemptionPolicy") : "PreemptLowerPriority";
    json_t *given = json_object_get(spec, "priority");
    const char *given_policy = str(spec, "preemptionPolicy");
    char a[32], b[32];
    if (given && !json_is_null(given) && (!json_is_integer(given) || json_integer_value(given) != value)) {
        char *dump = json_dumps(given, JSON_ENCODE_ANY | JSON_COMPACT);
        snprintf(a, sizeof a, "%s", dump ? dump : "?");
        free(dump);
        snprintf(b, sizeof b, "%lld", value);
        err = forbid(r, obj, "the integer value of priority (%s) must not be provided in pod spec; priority admission "
                     "controller computed %s from the given PriorityClass name", a, b);
    } else if (given_policy && strcmp(given_policy, policy)) {
        err = forbid(r, obj, "the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority "
                     "admission controller computed %s from the given PriorityClass name", given_policy, policy);
    } else {
        if (pc && !cls) json_object_set_new(spec, "priorityClassName", json_string(name_of(pc)));
        json_object_set_new(spec, "priority", json_integer(value));
        json_object_set_new(spec, "preemptionPolicy", json_string(policy));
    }
    json_decref(pc);
    return err;
}

static int pod_create(struct gs__req *r, json_t *obj)
{
    if (r->who->role != GS_ROLE_ADMIN) {
        json_t *spec = json_object_get(obj, "spec");
        const char *node = str(spec, "nodeName");
        if (node && *node)
            return forbid(r, obj, "field spec.nodeName (\"%s\") is set only by the scheduler through pods/binding%s",
                          node, "");
        json_t *ann = json_object_get(json_object_get(obj, "metadata"), "annotations");
        if (json_object_get(ann, GS_ANN_DEVICES))
            return forbid(r, obj, "field metadata.annotations[%s] is set only by the scheduler through pods/binding%s",
                          GS_ANN_DEVICES, "");
        json_object_set_new(obj, "status", json_object()); /* Pending, no conditions */
    }
    return resolve_priority(r, obj);
}

/*--- PriorityClass at create ---*/

static int pc_create(struct gs__req *r, json_t *obj)
{
    const char *name = name_of(obj);
    if (name && !strncmp(name, "system-", 7))
        return forbid(r, obj, "priority class names with '%s' prefix are reserved for system use%s", "system-", "");
    classes_changed(r);
    if (!json_is_true(json_object_get(obj, "globalDefault"))) return 0;
    json_t *pc = NULL;
    int err = load_class(r, NULL, &pc); /* the store's word, not the cache's */
    if (!err && pc) {
        char msg[512];
        snprintf(msg, sizeof msg, "PriorityClass.scheduling.k8s.io \"%s\" is invalid: globalDefault: Forbidden: "
                 "PriorityClass %s is already marked as default. Only one default can exist", name ? name : "",
                 name_of(pc));
        struct gs__cause c = {"globalDefault", "Forbidden: only one default PriorityClass can exist",
                              "FieldValueForbidden"};
        gs__reply_json(r, 422, gs__status(422, NULL, msg, r->res, name, &c, 1));
        err = GS_EINVAL;
    }
    json_decref(pc);
    return err;
}

static bool node_event_ok(struct gs__req *r, const json_t *ev, const char *node)
{
    const json_t *io = json_object_get(ev, "involvedObject");
    const char *kind = str(io, "kind"), *on = str(io, "name");
    return kind && on &&
           ((!strcmp(kind, "Node") && !strcmp(on, node)) ||
            (!strcmp(kind, "Pod") && pod_bound_to(r, str(io, "namespace") ? str(io, "namespace") : r->ns, on, node)));
}

int gs__fields_node_event_write(struct gs__req *r)
{
    if (!r->if_named || !is_core(r, "events") || !r->name) return 0;
    char key[1024];
    if (gs_api_key(r->res, r->ns, r->name, key, sizeof key) < 0) return 0;
    json_t *ev = NULL;
    int err = 0;
    if (gs_store_get(r->s->store, key, &ev, NULL) == 0 && !node_event_ok(r, ev, r->who->node))
        err = forbid(r, ev, "User \"%s\" may only write events about node \"%s\" and the pods bound to it",
                     r->who->user, r->who->node);
    json_decref(ev); /* not found: the write itself answers 404 */
    return err;
}

int gs__fields_create(struct gs__req *r, json_t *obj)
{
    if (r->res->namespaced && gs__namespace_admits(r)) return GS_EPERM;
    if (gs__gpu_model_check(r)) return GS_ECONFLICT; /* one GPU model per cluster */
    if (r->if_named) {
        int err = node_create(r, obj);
        if (err) return err;
    }
    if (is_core(r, "pods")) return pod_create(r, obj);
    if (!strcmp(r->res->id, PC_ID)) return pc_create(r, obj);
    return 0;
}

/*--- Updates ---*/

/* Overwrites next[key] with cur[key] (both objects). */
static void take(json_t *next, const json_t *cur, const char *key)
{
    json_t *v = json_object_get(cur, key);
    if (v) json_object_set(next, key, v);
    else json_object_del(next, key);
}

/* Every element of a is in b. */
static bool subset(const json_t *a, const json_t *b)
{
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(a, i, x) {
        bool found = false;
        json_array_foreach(b, j, y) found |= json_equal(x, y);
        if (!found) return false;
    }
    return true;
}

/* The images of list (containers or initContainers) of next, put back to cur's. */
static void same_images(json_t *next, const json_t *cur, const char *list)
{
    json_t *nl = json_object_get(next, list), *cl = json_object_get(cur, list);
    if (json_array_size(nl) != json_array_size(cl)) return;
    for (size_t i = 0; i < json_array_size(nl); i++)
        if (json_is_object(json_array_get(nl, i)) && json_is_object(json_array_get(cl, i)))
            take(json_array_get(nl, i), json_array_get(cl, i), "image");
}

/* Does next's spec differ from cur's in a field Kubernetes keeps? */
static bool spec_changed(const json_t *cur, const json_t *next)
{
    const json_t *cs = json_object_get(cur, "spec");
    json_t *ns = json_deep_copy(json_object_get(next, "spec"));
    if (!ns || !json_is_object(ns) || !json_is_object(cs)) {
        bool diff = !json_equal(ns, cs);
        json_decref(ns);
        return diff;
    }
    same_images(ns, cs, "containers");
    same_images(ns, cs, "initContainers");
    take(ns, cs, "activeDeadlineSeconds");
    if (subset(json_object_get(cs, "tolerations"), json_object_get(ns, "tolerations"))) take(ns, cs, "tolerations");
    if (subset(json_object_get(ns, "schedulingGates"), json_object_get(cs, "schedulingGates")))
        take(ns, cs, "schedulingGates");
    json_t *og = json_object_get(cs, "terminationGracePeriodSeconds"), *ng = json_object_get(ns, "terminationGracePeriodSeconds");
    if (json_integer_value(og) < 0 && json_integer_value(ng) == 1) take(ns, cs, "terminationGracePeriodSeconds");
    bool diff = !json_equal(ns, cs);
    json_decref(ns);
    return diff;
}

static const char *meta_str(const json_t *obj, const char *map, const char *key)
{
    return str(json_object_get(json_object_get(obj, "metadata"), map), key);
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static void immutable_meta(const json_t *cur, const json_t *next, const char *map, const char *key, const char *why,
                           struct gs_diags *d)
{
    const char *a = meta_str(cur, map, key), *b = meta_str(next, map, key);
    if (!same_str(a, b))
        gs_diags_add(d, "", "metadata.%s[%s]: Forbidden: %s", map, key, why); /* path in the text: keys hold dots */
}

void gs__fields_update(const struct gs__req *r, const json_t *cur, json_t *next, struct gs_diags *d)
{
    if (r->sub[0]) return; /* status: only the status moves (next_object) */
    if (r->if_bound && !strcmp(r->res->plural, "resourceslices")) { /* a node keeps its slices its own */
        const char *sn = str(json_object_get(next, "spec"), "nodeName");
        if (!sn || strcmp(sn, r->who->node))
            gs_diags_add(d, "spec.nodeName", "Forbidden: a node may only write ResourceSlices of its own node \"%s\"",
                         r->who->node);
    }
    if (r->if_named && is_core(r, "events") &&
        !json_equal(json_object_get(cur, "involvedObject"), json_object_get(next, "involvedObject")))
        gs_diags_add(d, "involvedObject", "Forbidden: a node may not change what an Event is about");
    if (is_core(r, "pods")) {
        json_t *ns = json_object_get(next, "spec"), *cs = json_object_get(cur, "spec");
        static const char *const resolved[] = {"priority", "priorityClassName", "preemptionPolicy"};
        for (size_t i = 0; json_is_object(ns) && i < 3; i++)
            if (!json_object_get(ns, resolved[i]) && json_object_get(cs, resolved[i]))
                json_object_set(ns, resolved[i], json_object_get(cs, resolved[i]));
        if (spec_changed(cur, next))
            gs_diags_add(d, "spec", "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                         "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only "
                         "additions to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set "
                         "to 1 if it was previously negative)");
        immutable_meta(cur, next, "annotations", GS_ANN_DEVICES, "set only by the scheduler through pods/binding", d);
        immutable_meta(cur, next, "labels", GS_LABEL_QUEUE, "field is immutable", d);
        immutable_meta(cur, next, "labels", GS_LABEL_POD_GROUP, "field is immutable", d);
    } else if (!strcmp(r->res->id, PC_ID)) {
        if (!json_equal(json_object_get(cur, "value"), json_object_get(next, "value")))
            gs_diags_add(d, "value", "Forbidden: may not be changed in an update.");
        if (!json_equal(json_object_get(cur, "preemptionPolicy"), json_object_get(next, "preemptionPolicy")))
            gs_diags_add(d, "preemptionPolicy", "Invalid value: field is immutable");
    } else if (!strcmp(r->res->id, "runtimeclasses.node.k8s.io")) {
        if (!json_equal(json_object_get(cur, "handler"), json_object_get(next, "handler")))
            gs_diags_add(d, "handler", "Invalid value: field is immutable");
    }
}
