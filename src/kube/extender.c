/*
 * extender.c - the kube-scheduler extender's cache and verbs; see extender.h.
 *
 * State. One entry per node, per bound pod and per NodeResourceTopology the
 * source has shown, keyed by store key, each holding the decoded object the
 * cache borrows. Pods matter only while bound and not finished: an unbound
 * pod is kube-scheduler's business until it asks us. A pod entry is
 * "accounted" while the cache holds it; pods whose node is not known yet
 * wait unaccounted and are taken in when the node comes. Every change to a
 * bound pod re-adds it from its devices annotation, which is also how a
 * binding this extender wrote is confirmed when the source sends it back.
 *
 * The follower thread lists nodes, topologies and pods (in that order),
 * then follows the source's change stream from the smallest cursor the
 * lists returned; an event not newer than its entry is skipped, and falling
 * behind the stream drops everything and lists again.
 *
 * Requests run on the HTTP thread under the same mutex, so a verb sees the
 * cache between two events and a bind's accounting is in before the next
 * request is looked at.
 */
#include "kube/extender.h"

#include "loops/sched_loop.h" /* gs_devices_format / gs_devices_parse */
#include "core/clock.h"
#include "core/log.h"
#include "core/object.h"
#include "govern/metrics.h"
#include "govern/operator.h" /* gs_stack_gate_node */
#include "sched/cache.h"
#include "sched/preemption_core.h"
#include "sched/strmap.h"
#include "sched/topology_core.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FOLLOW_WAIT_MS 200
#define PREFIX_NODES "nodes/"
#define PREFIX_PODS "pods/"
#define PREFIX_NRT "noderesourcetopologies.topology.node.k8s.io/"
#define MAX_EXTENDER_PRIORITY 10 /* extender/v1 MaxExtenderPriority */

struct entry {
    char *key;
    struct gs_object *obj; /* nodes and pods: decoded, borrowed by the cache */
    struct gs_nrt *nrt;    /* topologies */
    int64_t rv;
    bool accounted;        /* pods: held by the cache */
};

struct gs_extender {
    struct gs_source *src;
    struct gs_sched_config own;
    const struct gs_sched_config *cfg;
    const struct gs_profile *profile;
    uint64_t seed;
    struct gs_clock clock;
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* synced */
    struct gs_cache *cache;
    struct gs_framework *fw;
    struct gs_preemption *pre;
    struct gs__strmap nodes, pods, nrts;
    int64_t cursor;
    bool synced;
    uint64_t relists;
    uint64_t requests[GS_EXT_VERBS], errors[GS_EXT_VERBS];
    struct gs_hist latency[GS_EXT_VERBS];
    atomic_bool stop;
    pthread_t th;
    bool started;
};

/*--- Entries ---*/

static struct entry *entry_new(const char *key)
{
    struct entry *e = calloc(1, sizeof *e);
    if (e && !(e->key = strdup(key))) {
        free(e);
        return NULL;
    }
    return e;
}

static void entry_free(struct entry *e)
{
    if (!e) return;
    if (e->nrt) gs_nrt_clear(e->nrt);
    free(e->nrt);
    gs_object_free(e->obj);
    free(e->key);
    free(e);
}

/* Objects from a Kubernetes API server's lists carry no apiVersion/kind
 * (the list has them); our decoders want them. Borrowed doc, changed in place. */
static void default_kind(json_t *doc, const char *api, const char *kind)
{
    if (!json_object_get(doc, "apiVersion")) json_object_set_new(doc, "apiVersion", json_string(api));
    if (!json_object_get(doc, "kind")) json_object_set_new(doc, "kind", json_string(kind));
}

/* Decodes a Pod or Node document (a copy gets the missing type fields).
 * NULL with the first problem in why. */
static struct gs_object *decode_own(json_t *copy, enum gs_kind want, char *why, size_t len);

static struct gs_object *decode(const json_t *doc, enum gs_kind want, char *why, size_t len)
{
    json_t *copy = json_deep_copy(doc);
    if (!copy) {
        snprintf(why, len, "out of memory");
        return NULL;
    }
    struct gs_object *o = decode_own(copy, want, why, len);
    json_decref(copy);
    return o;
}

/* decode() on a document the caller may change (a request's own items: no copy). */
static struct gs_object *decode_own(json_t *copy, enum gs_kind want, char *why, size_t len)
{
    bool had_api = json_object_get(copy, "apiVersion"), had_kind = json_object_get(copy, "kind");
    default_kind(copy, "v1", want == GS_KIND_POD ? "Pod" : "Node");
    struct gs_diags d = {0};
    struct gs_object *o = NULL;
    int err = gs_object_decode(copy, &o, &d);
    if (!err && o->kind != want) err = GS_EINVAL;
    if (err) {
        if (d.n) snprintf(why, len, "%s%s%s", d.v[0].path ? d.v[0].path : "", d.v[0].path ? ": " : "", d.v[0].msg);
        else snprintf(why, len, "%s", err == GS_EINVAL ? "not a Pod or Node" : gs_strerror(err));
        gs_object_free(o);
        o = NULL;
    }
    gs_diags_free(&d);
    if (!had_api) json_object_del(copy, "apiVersion"); /* the document goes back as it came */
    if (!had_kind) json_object_del(copy, "kind");
    return o;
}

static bool pod_terminal(const struct gs_pod *p)
{
    return p->phase && (!strcmp(p->phase, "Succeeded") || !strcmp(p->phase, "Failed"));
}

/* A node whose Ready condition is present and not True takes no new pods. */
static bool node_not_ready(const json_t *doc)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(doc, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        const char *s = json_string_value(json_object_get(c, "status"));
        if (t && !strcmp(t, "Ready")) return !s || strcmp(s, "True");
    }
    return false;
}

/*--- Applying the source's objects ---*/

/* A GPU pod bound without our devices annotation (kube-scheduler bound it,
 * the device plugin chose): its GPUs are taken all the same. Without knowing
 * which, count the lowest-numbered ones with room, so the node's free total
 * is right even if the per-GPU picture is a guess. */
static uint64_t guess_gpus(const struct gs_node_info *ni, const struct gs_assignment *a, int32_t count)
{
    uint64_t mask = 0;
    for (int32_t g = 0; g < ni->ngpus && g < 64 && count > 0; g++) {
        const struct gs_gpu_slot *s = &ni->gpus[g];
        if (s->milli_free >= a->milli && (a->mem_mib <= 0 || s->mem_free_mib >= a->mem_mib)) {
            mask |= 1ull << g;
            count--;
        }
    }
    return mask;
}

/* The cache's accounting of a bound pod, on the devices its annotation
 * names (or the share the pod asks for when it names none). */
static void pod_account(struct gs_extender *x, struct entry *e)
{
    const struct gs_pod *pod = e->obj->u.pod;
    int32_t idx = gs_cache_find_node(x->cache, pod->node_name);
    if (idx < 0) return; /* the node comes later: node_added takes it in */
    struct gs_node_info *ni = gs_cache_node(x->cache, idx);
    struct gs_assignment a = {.node = idx, .milli = pod->demand.gpu_milli, .mem_mib = pod->demand.gpu_mem_mib};
    const char *dev = gs_labels_get(&pod->meta.annotations, GS_ANN_DEVICES);
    int32_t milli = 1000;
    if (dev && gs_devices_parse(ni->node, ni->ngpus, dev, &a.gpu_mask, &milli) == 0) a.milli = milli;
    if (!a.gpu_mask && pod->demand.gpu_count > 0) a.gpu_mask = guess_gpus(ni, &a, pod->demand.gpu_count);
    if (gs_cache_add_bound(x->cache, pod, &a) == 0) e->accounted = true;
    else gs_log(GS_LOG_WARN, "extender: bound pod not accounted", "pod", e->key, "node", pod->node_name, NULL);
}

static void pod_unaccount(struct gs_extender *x, struct entry *e)
{
    if (!e->accounted) return;
    char key[GS__KEY_MAX];
    gs_meta_key(&e->obj->u.pod->meta, key, sizeof key);
    gs_cache_remove_pod(x->cache, key);
    e->accounted = false;
}

static void pod_drop(struct gs_extender *x, struct entry *e)
{
    pod_unaccount(x, e);
    gs__strmap_del(&x->pods, e->key);
    entry_free(e);
}

static void pod_apply(struct gs_extender *x, const char *key, json_t *doc, int64_t rv, bool deleted)
{
    struct entry *e = gs__strmap_get(&x->pods, key);
    if (e && rv && rv <= e->rv) return;
    if (deleted) {
        if (e) pod_drop(x, e);
        return;
    }
    char why[256];
    struct gs_object *o = decode(doc, GS_KIND_POD, why, sizeof why);
    if (!o) {
        gs_log(GS_LOG_WARN, "extender: cannot decode pod", "pod", key, "error", why, NULL);
        return;
    }
    const struct gs_pod *pod = o->u.pod;
    if (!pod->node_name || pod_terminal(pod)) { /* not holding anything on a node */
        if (e) pod_drop(x, e);
        gs_object_free(o);
        return;
    }
    if (!e) {
        if (!(e = entry_new(key)) || gs__strmap_put(&x->pods, e->key, e)) {
            entry_free(e);
            gs_object_free(o);
            return;
        }
    }
    pod_unaccount(x, e);
    gs_object_free(e->obj);
    e->obj = o;
    e->rv = rv;
    pod_account(x, e);
}

static void nrt_attach(struct gs_extender *x, int32_t idx, const char *node)
{
    char key[GS__KEY_MAX + 64];
    snprintf(key, sizeof key, PREFIX_NRT "%s", node);
    struct entry *t = gs__strmap_get(&x->nrts, key);
    gs_cache_set_nrt(x->cache, idx, t ? t->nrt : NULL);
}

static void node_apply(struct gs_extender *x, const char *key, json_t *doc, int64_t rv, bool deleted)
{
    struct entry *e = gs__strmap_get(&x->nodes, key);
    if (e && rv && rv <= e->rv) return;
    if (deleted) {
        if (!e) return;
        gs_cache_remove_node(x->cache, e->obj->u.node->meta.name); /* forgets its pods */
        for (size_t s = 0; s < x->pods.cap; s++) {
            struct entry *p = x->pods.slots[s].key ? x->pods.slots[s].val : NULL;
            if (p && p->accounted && !strcmp(p->obj->u.pod->node_name, e->obj->u.node->meta.name))
                p->accounted = false;
        }
        gs__strmap_del(&x->nodes, key);
        entry_free(e);
        return;
    }
    char why[256];
    struct gs_object *o = decode(doc, GS_KIND_NODE, why, sizeof why);
    if (!o) {
        gs_log(GS_LOG_WARN, "extender: cannot decode node", "node", key, "error", why, NULL);
        return;
    }
    gs_stack_gate_node(doc, o->u.node); /* no GPUs offered until the GPU stack is ready, as in the server */
    bool fresh = !e;
    if (fresh && (!(e = entry_new(key)) || gs__strmap_put(&x->nodes, e->key, e))) {
        entry_free(e);
        gs_object_free(o);
        return;
    }
    int r = fresh ? gs_cache_add_node(x->cache, o->u.node) : gs_cache_update_node(x->cache, o->u.node);
    if (r < 0) {
        gs_log(GS_LOG_WARN, "extender: node not accepted by the cache", "node", key, "error", gs_strerror(r), NULL);
        if (fresh) {
            gs__strmap_del(&x->nodes, key);
            entry_free(e);
        }
        gs_object_free(o);
        return;
    }
    int32_t idx = gs_cache_find_node(x->cache, o->u.node->meta.name);
    gs_cache_set_schedulable(x->cache, idx, !o->u.node->unschedulable && !node_not_ready(doc));
    gs_object_free(e->obj);
    e->obj = o;
    e->rv = rv;
    if (!fresh) return;
    nrt_attach(x, idx, o->u.node->meta.name);
    for (size_t s = 0; s < x->pods.cap; s++) { /* pods bound here before the node was known */
        struct entry *p = x->pods.slots[s].key ? x->pods.slots[s].val : NULL;
        if (p && !p->accounted && !strcmp(p->obj->u.pod->node_name, o->u.node->meta.name)) pod_account(x, p);
    }
}

static void nrt_apply(struct gs_extender *x, const char *key, json_t *doc, int64_t rv, bool deleted)
{
    struct entry *e = gs__strmap_get(&x->nrts, key);
    if (e && rv && rv <= e->rv) return;
    struct gs_nrt *n = NULL;
    if (!deleted) {
        struct gs_diags d = {0};
        if (!(n = calloc(1, sizeof *n)) || gs_nrt_parse(doc, n, &d)) {
            gs_log(GS_LOG_WARN, "extender: cannot parse NodeResourceTopology", "object", key, "error",
                   d.n ? d.v[0].msg : "out of memory", NULL);
            free(n);
            n = NULL;
        }
        gs_diags_free(&d);
        if (!n) return;
    }
    if (e) {
        int32_t idx = e->nrt ? gs_cache_find_node(x->cache, e->nrt->node) : -1;
        if (idx >= 0) gs_cache_set_nrt(x->cache, idx, NULL);
        gs__strmap_del(&x->nrts, key);
        entry_free(e);
    }
    if (!n) return;
    if (!(e = entry_new(key)) || gs__strmap_put(&x->nrts, e->key, e)) {
        entry_free(e);
        gs_nrt_clear(n);
        free(n);
        return;
    }
    e->nrt = n;
    e->rv = rv;
    int32_t idx = gs_cache_find_node(x->cache, n->node);
    if (idx >= 0) gs_cache_set_nrt(x->cache, idx, n);
}

typedef void (*apply_fn)(struct gs_extender *, const char *, json_t *, int64_t, bool);

/* Nodes, then their topologies, then the pods that sit on them. */
static const struct {
    const char *prefix;
    apply_fn fn;
} kinds[] = {
    {PREFIX_NODES, node_apply},
    {PREFIX_NRT, nrt_apply},
    {PREFIX_PODS, pod_apply},
};

static void apply_event(struct gs_extender *x, const struct gs_store_event *ev)
{
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (strncmp(ev->key, kinds[k].prefix, strlen(kinds[k].prefix))) continue;
        json_t *doc = json_loads(ev->value, 0, NULL);
        if (!doc) return;
        kinds[k].fn(x, ev->key, doc, ev->rv, ev->type == GS_STORE_DELETED);
        json_decref(doc);
        return;
    }
}

/*--- Building, loading, following ---*/

static void drop_state(struct gs_extender *x)
{
    gs_framework_free(x->fw);
    x->fw = NULL;
    gs_preemption_free(x->pre);
    x->pre = NULL;
    gs_cache_free(x->cache); /* before the objects it borrows */
    x->cache = NULL;
    struct gs__strmap *maps[] = {&x->pods, &x->nrts, &x->nodes};
    for (int m = 0; m < 3; m++) {
        for (size_t s = 0; s < maps[m]->cap; s++)
            if (maps[m]->slots[s].key) entry_free(maps[m]->slots[s].val);
        gs__strmap_free(maps[m]);
        gs__strmap_init(maps[m]);
    }
}

static int build(struct gs_extender *x, struct gs_diags *d)
{
    if (!(x->cache = gs_cache_new(&x->clock))) return GS_ENOMEM;
    struct gs_handle h = {.clock = &x->clock, .cache = x->cache, .seed = x->seed};
    int err = gs_framework_new(x->profile, &h, &x->fw, d);
    if (err) return err;
    struct gs_preempt_opts po = {0}; /* defaults; the loop guard sees only this extender's answers */
    return (x->pre = gs_preemption_new(&po, &x->clock, x->cache)) ? 0 : GS_ENOMEM;
}

/* One listed object, held until the whole list is applied. */
struct listed {
    char *key;
    json_t *obj;
    int64_t rv;
};

struct load_ctx {
    struct gs_extender *x;
    struct listed *v;
    size_t n, cap;
    bool oom;
};

static int load_one(const char *key, json_t *obj, void *arg)
{
    struct load_ctx *c = arg;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        struct listed *nv = realloc(c->v, cap * sizeof *nv);
        if (!nv) return c->oom = true;
        c->v = nv, c->cap = cap;
    }
    struct listed *l = &c->v[c->n];
    if (!(l->key = strdup(key))) return c->oom = true;
    l->obj = json_incref(obj);
    l->rv = gs_store_obj_rv(obj);
    c->n++;
    return atomic_load(&c->x->stop);
}

/* Lists every followed resource, then applies the lists under the mutex,
 * so no request sees half a load and none waits while a list is fetched.
 * 0 or the source's error. */
static int load(struct gs_extender *x)
{
    int err = 0;
    int64_t cursor = INT64_MAX;
    struct load_ctx lc[sizeof kinds / sizeof kinds[0]];
    memset(lc, 0, sizeof lc);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0] && !err; k++) {
        int64_t c = 0;
        lc[k].x = x;
        err = gs_source_list(x->src, kinds[k].prefix, load_one, &lc[k], &c);
        if (!err && lc[k].oom) err = GS_ENOMEM;
        if (c < cursor) cursor = c;
    }
    pthread_mutex_lock(&x->mu);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (size_t i = 0; i < lc[k].n; i++) {
            if (!err) kinds[k].fn(x, lc[k].v[i].key, lc[k].v[i].obj, lc[k].v[i].rv, false);
            free(lc[k].v[i].key);
            json_decref(lc[k].v[i].obj);
        }
        free(lc[k].v);
    }
    if (!err) {
        x->cursor = cursor == INT64_MAX ? 0 : cursor;
        x->synced = true;
        pthread_cond_broadcast(&x->cv);
    }
    pthread_mutex_unlock(&x->mu);
    return err;
}

/* Applies what the stream has. false: fell behind, load again. */
static bool follow(struct gs_extender *x)
{
    struct gs_store_event *evs = NULL;
    size_t n = 0;
    int64_t after = x->cursor;
    int err = gs_source_events(x->src, &after, NULL, FOLLOW_WAIT_MS, &x->stop, &evs, &n);
    if (err == GS_ERANGE) return false;
    if (err) {
        gs_store_events_free(evs, n);
        struct timespec ts = {0, FOLLOW_WAIT_MS * 1000000L}; /* a source error: do not spin */
        nanosleep(&ts, NULL);
        return true;
    }
    pthread_mutex_lock(&x->mu);
    for (size_t i = 0; i < n; i++) apply_event(x, &evs[i]);
    x->cursor = after;
    pthread_mutex_unlock(&x->mu);
    gs_store_events_free(evs, n);
    return true;
}

static void *follower(void *arg)
{
    struct gs_extender *x = arg;
    while (!atomic_load(&x->stop) && load(x)) {
        struct timespec ts = {1, 0}; /* the source is not answering yet */
        nanosleep(&ts, NULL);
    }
    while (!atomic_load(&x->stop)) {
        if (follow(x)) continue;
        gs_log(GS_LOG_WARN, "extender: fell behind the change stream, listing again", NULL);
        pthread_mutex_lock(&x->mu);
        drop_state(x);
        struct gs_diags d = {0};
        int err = build(x, &d);
        gs_diags_free(&d);
        x->synced = false;
        x->relists++;
        pthread_mutex_unlock(&x->mu);
        if (err) break;
        while (!atomic_load(&x->stop) && load(x)) {
            struct timespec ts = {1, 0};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

int gs_extender_new(const struct gs_extender_opts *o, struct gs_extender **out, struct gs_diags *d)
{
    *out = NULL;
    if (!o || !o->source) return GS_EINVAL;
    struct gs_extender *x = calloc(1, sizeof *x);
    if (!x) return GS_ENOMEM;
    x->src = o->source;
    x->seed = o->seed;
    gs_clock_init_real(&x->clock);
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    gs__strmap_init(&x->nodes);
    gs__strmap_init(&x->pods);
    gs__strmap_init(&x->nrts);
    for (int v = 0; v < GS_EXT_VERBS; v++) gs_hist_init(&x->latency[v], 0.0005, 2, 14);
    int err = 0;
    if (o->config) x->cfg = o->config;
    else if (!(err = gs_sched_config_gpusched(&x->own))) x->cfg = &x->own;
    if (!err && x->cfg->nprofiles == 0) err = GS_EINVAL;
    if (!err) {
        x->profile = o->profile ? gs_sched_config_profile(x->cfg, o->profile) : &x->cfg->profiles[0];
        if (!x->profile) {
            gs_diags_add(d, "profile", "no profile has schedulerName \"%s\"", o->profile);
            err = GS_EINVAL;
        }
    }
    if (!err) err = build(x, d);
    if (!err && pthread_create(&x->th, NULL, follower, x)) err = GS_ENOMEM;
    if (err) {
        x->started = false;
        gs_extender_free(x);
        return err;
    }
    x->started = true;
    *out = x;
    return 0;
}

void gs_extender_free(struct gs_extender *x)
{
    if (!x) return;
    if (x->started) {
        atomic_store(&x->stop, true);
        gs_source_interrupt(x->src);
        pthread_join(x->th, NULL);
    }
    drop_state(x);
    gs_sched_config_free(&x->own);
    for (int v = 0; v < GS_EXT_VERBS; v++) gs_hist_destroy(&x->latency[v]);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    free(x);
}

bool gs_extender_wait_synced(struct gs_extender *x, int timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&x->mu);
    while (!x->synced && pthread_cond_timedwait(&x->cv, &x->mu, &dl) == 0) {}
    bool ok = x->synced;
    pthread_mutex_unlock(&x->mu);
    return ok;
}

void gs_extender_stats(struct gs_extender *x, struct gs_extender_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&x->mu);
    out->synced = x->synced;
    out->nodes = x->cache ? (uint64_t)gs_cache_live_nodes(x->cache) : 0;
    for (size_t s = 0; s < x->pods.cap; s++) {
        struct entry *p = x->pods.slots[s].key ? x->pods.slots[s].val : NULL;
        out->pods += p && p->accounted;
    }
    out->relists = x->relists;
    memcpy(out->requests, x->requests, sizeof out->requests);
    memcpy(out->errors, x->errors, sizeof out->errors);
    pthread_mutex_unlock(&x->mu);
}

/*--- The nodes of a request ---*/

/* Where a filter or prioritize request is judged: the main cache and
 * framework (nodeCacheCapable), or a scratch pair built from the request's
 * Nodes. nodes[i] is request node i in that cache, NULL when not there. */
struct view {
    struct gs_cache *cache;
    struct gs_framework *fw;
    struct gs_node_info **nodes;
    const char **missing;          /* why nodes[i] is NULL */
    struct gs_object **objs;       /* scratch: decoded request nodes (the scratch cache borrows them) */
    size_t n;
    bool scratch;
};

static void view_free(struct view *v)
{
    if (v->scratch) {
        if (v->fw) gs_framework_free(v->fw);
        if (v->cache) gs_cache_free(v->cache);
        for (size_t i = 0; v->objs && i < v->n; i++) gs_object_free(v->objs[i]);
    }
    if (v->missing)
        for (size_t i = 0; i < v->n; i++) free((char *)v->missing[i]);
    free(v->objs);
    free(v->missing);
    free(v->nodes);
    memset(v, 0, sizeof *v);
}

struct copy_ctx {
    struct gs_cache *from, *to;
};

/* A bound or assumed pod of the main cache onto the scratch node of the same name. */
static void copy_pod(void *arg, const struct gs_pod *pod, const struct gs_assignment *a, bool bound)
{
    (void)bound;
    struct copy_ctx *c = arg;
    struct gs_node_info *ni = gs_cache_node(c->from, a->node);
    int32_t idx = ni ? gs_cache_find_node(c->to, ni->name) : -1;
    if (idx < 0) return;
    struct gs_assignment b = *a;
    b.node = idx;
    struct gs_node_info *to = gs_cache_node(c->to, idx);
    uint64_t valid = to->ngpus >= 64 ? ~0ull : (1ull << to->ngpus) - 1;
    if (b.gpu_mask & ~valid) b.gpu_mask &= valid; /* the node as sent has fewer GPUs than we knew */
    gs_cache_add_bound(c->to, pod, &b);
}

static int view_scratch(struct gs_extender *x, const struct gs_ext_request *r, struct view *v)
{
    v->scratch = true;
    if (!(v->cache = gs_cache_new(&x->clock))) return GS_ENOMEM;
    for (size_t i = 0; i < v->n; i++) {
        char why[256];
        json_t *doc = json_array_get(r->node_items, i);
        v->objs[i] = decode_own(doc, GS_KIND_NODE, why, sizeof why);
        if (!v->objs[i]) {
            char msg[320];
            snprintf(msg, sizeof msg, "the Node as sent cannot be read: %s", why);
            v->missing[i] = strdup(msg);
            continue;
        }
        gs_stack_gate_node(doc, v->objs[i]->u.node);
        int idx = gs_cache_add_node(v->cache, v->objs[i]->u.node);
        if (idx < 0) {
            v->missing[i] = strdup(idx == GS_EEXIST ? "node named twice in the request" : gs_strerror(idx));
            gs_object_free(v->objs[i]);
            v->objs[i] = NULL;
            continue;
        }
        gs_cache_set_schedulable(v->cache, idx, !v->objs[i]->u.node->unschedulable && !node_not_ready(doc));
        int32_t main_idx = gs_cache_find_node(x->cache, r->names[i]);
        if (main_idx >= 0) gs_cache_set_nrt(v->cache, idx, gs_cache_node(x->cache, main_idx)->nrt);
        v->nodes[i] = gs_cache_node(v->cache, idx);
    }
    struct copy_ctx c = {x->cache, v->cache};
    gs_cache_foreach_pod(x->cache, copy_pod, &c);
    for (size_t i = 0; i < v->n; i++) /* the array may have moved while nodes were added */
        if (v->nodes[i]) v->nodes[i] = gs_cache_node(v->cache, gs_cache_find_node(v->cache, r->names[i]));
    struct gs_handle h = {.clock = &x->clock, .cache = v->cache, .seed = x->seed};
    struct gs_diags d = {0};
    int err = gs_framework_new(x->profile, &h, &v->fw, &d);
    gs_diags_free(&d);
    return err;
}

static int view_build(struct gs_extender *x, const struct gs_ext_request *r, struct view *v)
{
    memset(v, 0, sizeof *v);
    v->n = r->nnames;
    size_t n = v->n ? v->n : 1;
    v->nodes = calloc(n, sizeof *v->nodes);
    v->missing = calloc(n, sizeof *v->missing);
    v->objs = calloc(n, sizeof *v->objs);
    if (!v->nodes || !v->missing || !v->objs) return GS_ENOMEM;
    if (!r->cache_capable) return view_scratch(x, r, v);
    v->cache = x->cache;
    v->fw = x->fw;
    for (size_t i = 0; i < v->n; i++) {
        int32_t idx = gs_cache_find_node(x->cache, r->names[i]);
        if (idx < 0) v->missing[i] = strdup("node is not known to gpusched (no Node object seen yet)");
        else v->nodes[i] = gs_cache_node(x->cache, idx);
    }
    return 0;
}

/*--- Verbs ---*/

static json_t *error_doc(const char *msg)
{
    return json_pack("{s:s}", "Error", msg);
}

static int reply_json(struct gs_ext_reply *out, int status, json_t *doc)
{
    out->status = status;
    out->body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return out->body ? 0 : GS_ENOMEM;
}

/* The reason text of rejection code of Filter plugin i (what explain prints). */
static void reject_text(struct gs_framework *fw, const struct gs_pod *pod, int i, uint8_t code, char *buf, size_t len)
{
    void *state = NULL;
    const struct gs_plugin *pl = i >= 0 ? gs_framework_filter_plugin(fw, i, &state) : NULL;
    buf[0] = 0;
    if (pl && pl->reason) pl->reason(state, pod, GS_REJECT_CODE(code), buf, len);
    if (!buf[0]) snprintf(buf, len, "rejected by %s", pl ? pl->name : "a filter");
}

static int do_filter(struct gs_extender *x, const struct gs_ext_request *r, const struct gs_pod *pod,
                     struct gs_ext_reply *out)
{
    struct view v;
    int err = view_build(x, r, &v);
    json_t *failed = json_object(), *unres = json_object(), *pass = json_array();
    struct gs_node_info **live = calloc(v.n ? v.n : 1, sizeof *live);
    size_t *pos = calloc(v.n ? v.n : 1, sizeof *pos);
    uint8_t *reject = calloc(v.n ? v.n : 1, 1);
    int8_t *by = calloc(v.n ? v.n : 1, 1);
    if (!err && (!failed || !unres || !pass || !live || !pos || !reject || !by)) err = GS_ENOMEM;
    size_t m = 0;
    for (size_t i = 0; !err && i < v.n; i++) {
        if (!v.nodes[i]) {
            json_object_set_new(failed, r->names[i], json_string(v.missing[i] ? v.missing[i] : "node unknown"));
        } else if (!v.nodes[i]->schedulable) {
            json_object_set_new(unres, r->names[i], json_string("node is unschedulable (cordoned or not Ready)"));
        } else {
            live[m] = v.nodes[i];
            pos[m++] = i;
        }
    }
    if (!err && m) {
        struct gs_filter_run run = {.nodes = live, .n = m, .reject = reject, .by = by};
        int fits = gs_framework_run_filters(v.fw, pod, &run);
        if (fits < 0) err = fits;
        for (size_t j = 0; !err && j < m; j++) {
            const char *name = r->names[pos[j]];
            char why[GS_STATUS_REASON_MAX + 64];
            if (run.prefilter.code != GS_SUCCESS) {
                snprintf(why, sizeof why, "%s%s%s", run.prefilter.plugin ? run.prefilter.plugin : "",
                         run.prefilter.plugin ? ": " : "", run.prefilter.reason);
                json_object_set_new(run.prefilter.code == GS_UNSCHEDULABLE_AND_UNRESOLVABLE ? unres : failed, name,
                                    json_string(why));
            } else if (reject[j]) {
                reject_text(v.fw, pod, by[j], reject[j], why, sizeof why);
                json_object_set_new(reject[j] & GS_REJECT_UNRESOLVABLE ? unres : failed, name, json_string(why));
            } else if (r->cache_capable) {
                json_array_append_new(pass, json_string(name));
            } else {
                json_array_append(pass, json_array_get(r->node_items, pos[j]));
            }
        }
    }
    json_t *doc = NULL;
    if (!err) {
        doc = json_pack("{s:o?, s:o?, s:o, s:o, s:s}", "Nodes",
                        r->cache_capable ? NULL : json_pack("{s:o}", "items", json_incref(pass)), "NodeNames",
                        r->cache_capable ? json_incref(pass) : NULL, "FailedNodes", json_incref(failed),
                        "FailedAndUnresolvableNodes", json_incref(unres), "Error", "");
        if (!doc) err = GS_ENOMEM;
    }
    json_decref(failed), json_decref(unres), json_decref(pass);
    free(live), free(pos), free(reject), free(by);
    view_free(&v);
    return err ? err : reply_json(out, 200, doc);
}

static int do_prioritize(struct gs_extender *x, const struct gs_ext_request *r, const struct gs_pod *pod,
                         struct gs_ext_reply *out)
{
    struct view v;
    int err = view_build(x, r, &v);
    struct gs_node_info **live = calloc(v.n ? v.n : 1, sizeof *live);
    int64_t *total = calloc(v.n ? v.n : 1, sizeof *total);
    size_t *pos = calloc(v.n ? v.n : 1, sizeof *pos);
    int64_t *score = calloc(v.n ? v.n : 1, sizeof *score); /* 0..10 per request node */
    if (!err && (!live || !total || !pos || !score)) err = GS_ENOMEM;
    size_t m = 0;
    for (size_t i = 0; !err && i < v.n; i++)
        if (v.nodes[i]) live[m] = v.nodes[i], pos[m++] = i;
    struct gs_status failed = {0};
    if (!err && m) err = gs_framework_run_scores(v.fw, pod, live, m, total, &failed);
    /* The nodes' totals are mapped from their own range (lowest 0, highest
     * 10), not from the highest possible total: the profile's plugins that
     * score every node alike (spread, affinity, taints) add a large common
     * part, and against a possible maximum in the thousands a placement
     * plugin's 0..100 would round to the same 0..10 on every node. When all
     * totals are equal (or one node is asked about) each is mapped against
     * the highest possible total instead. */
    int64_t max = v.fw ? gs_framework_max_total_score(v.fw) : 0, lo = INT64_MAX, hi = INT64_MIN;
    for (size_t j = 0; j < m; j++) {
        total[j] = total[j] < 0 ? 0 : total[j] > max ? max : total[j];
        lo = total[j] < lo ? total[j] : lo, hi = total[j] > hi ? total[j] : hi;
    }
    if (!err && failed.code == GS_SUCCESS && max > 0)
        for (size_t j = 0; j < m; j++) {
            int64_t num = hi > lo ? total[j] - lo : total[j], den = hi > lo ? hi - lo : max;
            score[pos[j]] = (num * MAX_EXTENDER_PRIORITY * 2 + den) / (2 * den); /* rounded */
        }
    if (failed.code != GS_SUCCESS)
        gs_log(GS_LOG_INFO, "extender: prioritize scored every node 0", "pod", pod->meta.name, "plugin",
               failed.plugin ? failed.plugin : "", "reason", failed.reason, NULL);
    json_t *list = err ? NULL : json_array();
    for (size_t i = 0; list && i < v.n; i++)
        json_array_append_new(list, json_pack("{s:s, s:I}", "Host", r->names[i], "Score", (json_int_t)score[i]));
    if (!err && !list) err = GS_ENOMEM;
    free(live), free(total), free(pos), free(score);
    view_free(&v);
    return err ? err : reply_json(out, 200, list);
}

/*--- Preempt ---*/

struct one_node {
    struct gs_framework *fw;
    int32_t node;
};

/* The preemption search asks this: the node under judgement only, every filter. */
static bool fits_on(void *ctx, const struct gs_pod *pod, struct gs_node_info *node)
{
    struct one_node *c = ctx;
    if (node->idx != c->node || !node->schedulable) return false;
    uint8_t reject = 0;
    struct gs_node_info *one[1] = {node};
    struct gs_filter_run run = {.nodes = one, .n = 1, .reject = &reject};
    return gs_framework_run_filters(c->fw, pod, &run) == 1;
}

static int do_preempt(struct gs_extender *x, const struct gs_ext_request *r, const struct gs_pod *pod,
                      struct gs_ext_reply *out)
{
    json_t *map = json_object();
    if (!map) return GS_ENOMEM;
    const struct gs_pod *members[1] = {pod};
    for (size_t i = 0; i < r->nvictims; i++) {
        const struct gs_ext_victims *kv = &r->victims[i];
        int32_t idx = gs_cache_find_node(x->cache, kv->node);
        if (idx < 0) continue; /* we cannot judge a node we do not know: not offered */
        struct one_node c = {x->fw, idx};
        struct gs_preempt_plan plan = {0};
        int err = gs_preempt_find(x->pre, members, 1, fits_on, &c, &plan);
        if (err == GS_ENOENT) continue; /* evicting cannot make the pod fit there */
        if (err) {
            json_decref(map);
            return err;
        }
        json_t *pods = json_array();
        for (size_t k = 0; pods && k < plan.nvictims; k++)
            json_array_append_new(pods, json_pack("{s:s}", "UID", plan.victims[k]->meta.uid ? plan.victims[k]->meta.uid : ""));
        gs_preempt_plan_free(&plan);
        json_t *mv = pods ? json_pack("{s:o, s:I}", "Pods", pods, "NumPDBViolations", (json_int_t)kv->pdb_violations)
                          : NULL;
        if (!mv || json_object_set_new(map, kv->node, mv)) {
            json_decref(map);
            return GS_ENOMEM;
        }
    }
    return reply_json(out, 200, json_pack("{s:o}", "NodeNameToMetaVictims", map));
}

/*--- Bind ---*/

static int bind_fail(struct gs_ext_reply *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bind_fail(struct gs_ext_reply *out, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return reply_json(out, 200, error_doc(msg));
}

static json_t *status_devices(const struct gs_node *node, const struct gs_assignment *a)
{
    json_t *arr = json_array();
    for (int g = 0; arr && g < 64; g++) {
        if (!(a->gpu_mask >> g & 1)) continue;
        const struct gs_gpu *d = node && (size_t)g < node->ngpus ? &node->gpus[g] : NULL;
        json_t *o = json_pack("{s:i, s:i}", "index", d ? d->index : g, "milli", a->milli);
        if (o && d && d->uuid) json_object_set_new(o, "uuid", json_string(d->uuid));
        if (o && a->mem_mib) json_object_set_new(o, "memoryMiB", json_integer(a->mem_mib));
        json_array_append_new(arr, o);
    }
    return arr;
}

/* The devices a full cycle would take on the node: run it there, keep the
 * assignment, and leave the framework as it was (the pod is accounted as
 * bound once the write succeeded). */
static int choose(struct gs_extender *x, const struct gs_pod *pod, int32_t idx, struct gs_assignment *a, char *why,
                  size_t len)
{
    struct gs_schedule_result res;
    int err = gs_framework_schedule_on(x->fw, pod, &idx, 1, 0, &res);
    if (err) {
        gs_schedule_result_free(&res);
        return err;
    }
    bool placed = res.code == GS_SUCCESS || res.code == GS_WAIT;
    if (placed) {
        *a = res.a;
        char key[GS__KEY_MAX];
        gs__pod_key(pod, key, sizeof key);
        gs_framework_reject(x->fw, key, NULL, "chosen for the extender's binding");
        gs_framework_bind(x->fw, pod); /* drops the rejected reservation */
    } else {
        snprintf(why, len, "%s", res.status.reason[0] ? res.status.reason : gs_code_name(res.code));
    }
    gs_schedule_result_free(&res);
    return placed ? 0 : GS_EBUSY;
}

static int do_bind(struct gs_extender *x, const struct gs_ext_request *r, struct gs_ext_reply *out)
{
    char key[GS__KEY_MAX + 8];
    snprintf(key, sizeof key, "pods/%s/%s", r->pod_namespace, r->pod_name);
    json_t *doc = NULL;
    int err = gs_source_get(x->src, key, &doc, NULL);
    if (err) {
        json_decref(doc);
        return bind_fail(out, "pod %s/%s: %s", r->pod_namespace, r->pod_name,
                         err == GS_ENOENT ? "not found" : gs_strerror(err));
    }
    char why[512];
    struct gs_object *o = decode(doc, GS_KIND_POD, why, sizeof why);
    json_decref(doc);
    if (!o) return bind_fail(out, "pod %s/%s cannot be read: %s", r->pod_namespace, r->pod_name, why);
    const struct gs_pod *pod = o->u.pod;
    if (r->pod_uid && (!pod->meta.uid || strcmp(pod->meta.uid, r->pod_uid))) {
        err = bind_fail(out, "pod %s/%s: PodUID %s does not match the pod's uid %s (a new pod of the same name)",
                        r->pod_namespace, r->pod_name, r->pod_uid, pod->meta.uid ? pod->meta.uid : "(none)");
        gs_object_free(o);
        return err;
    }
    if (pod->node_name) {
        err = bind_fail(out, "pod %s/%s is already bound to %s", r->pod_namespace, r->pod_name, pod->node_name);
        gs_object_free(o);
        return err;
    }
    int32_t idx = gs_cache_find_node(x->cache, r->node);
    if (idx < 0) {
        gs_object_free(o);
        return bind_fail(out, "node %s is not known to gpusched (no Node object seen yet)", r->node);
    }
    struct gs_assignment a;
    if ((err = choose(x, pod, idx, &a, why, sizeof why))) {
        gs_object_free(o);
        return err == GS_EBUSY ? bind_fail(out, "pod %s/%s does not fit on %s: %s", r->pod_namespace, r->pod_name,
                                           r->node, why)
                               : err;
    }
    struct gs_node_info *ni = gs_cache_node(x->cache, idx);
    char devices[1024] = "";
    if (a.gpu_mask) gs_devices_format(ni->node, a.gpu_mask, a.milli, devices, sizeof devices);
    json_t *ann = devices[0] ? json_pack("{s:s}", GS_ANN_DEVICES, devices) : NULL;
    json_t *sd = status_devices(ni->node, &a);
    struct gs_source_bind b = {.key = key, .uid = pod->meta.uid, .node = r->node, .annotations = ann,
                               .status_devices = sd};
    err = gs_source_bind(x->src, &b, 1);
    json_decref(ann);
    json_decref(sd);
    json_decref(b.out);
    if (err || b.err) {
        int e = err ? err : b.err;
        gs_object_free(o);
        return bind_fail(out, "binding pod %s/%s to %s was refused: %s", r->pod_namespace, r->pod_name, r->node,
                         e == GS_EEXIST ? "already bound" : e == GS_ENOENT ? "the pod is gone or has a new uid"
                         : e == GS_ESTATE ? "the pod is being deleted" : gs_strerror(e));
    }
    /* Accounted now; the source's copy of the bound pod replaces this one when it comes. */
    struct entry *e = gs__strmap_get(&x->pods, key);
    if (!e && (!(e = entry_new(key)) || gs__strmap_put(&x->pods, e->key, e))) {
        entry_free(e);
        gs_object_free(o);
        return reply_json(out, 200, json_pack("{s:s}", "Error", ""));
    }
    pod_unaccount(x, e);
    gs_object_free(e->obj);
    e->obj = o;
    e->rv = 0; /* whatever the source says next about it is news */
    free(o->u.pod->node_name);
    o->u.pod->node_name = strdup(r->node);
    if (o->u.pod->node_name && gs_cache_add_bound(x->cache, o->u.pod, &a) == 0) e->accounted = true;
    gs_log(GS_LOG_INFO, "extender: bound", "pod", key, "node", r->node, "devices", devices, NULL);
    return reply_json(out, 200, json_pack("{s:s}", "Error", ""));
}

/*--- Dispatch ---*/

static double since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

int gs_extender_handle(struct gs_extender *x, enum gs_ext_verb v, const char *body, size_t len,
                       struct gs_ext_reply *out)
{
    memset(out, 0, sizeof *out);
    if ((int)v < 0 || v >= GS_EXT_VERBS) return reply_json(out, 404, error_doc("unknown extender verb"));
    struct timespec t0; /* request latency for /metrics, not a scheduling input */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct gs_ext_request r;
    char err_text[512];
    int err = gs_ext_request_parse(v, body, len, &r, err_text, sizeof err_text);
    pthread_mutex_lock(&x->mu);
    if (err == GS_EINVAL) {
        err = reply_json(out, 400, error_doc(err_text));
    } else if (!err && !x->synced) {
        err = reply_json(out, 503, error_doc("the extender has not listed the cluster yet"));
    } else if (!err) {
        struct gs_object *pod = NULL;
        char why[400];
        if (v != GS_EXT_BIND && !(pod = decode(r.pod, GS_KIND_POD, why, sizeof why))) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s.Pod: %s", v == GS_EXT_PREEMPT ? "ExtenderPreemptionArgs" : "ExtenderArgs",
                     why);
            err = reply_json(out, 400, error_doc(msg));
        } else if (v == GS_EXT_FILTER) err = do_filter(x, &r, pod->u.pod, out);
        else if (v == GS_EXT_PRIORITIZE) err = do_prioritize(x, &r, pod->u.pod, out);
        else if (v == GS_EXT_PREEMPT) err = do_preempt(x, &r, pod->u.pod, out);
        else err = do_bind(x, &r, out);
        gs_object_free(pod);
    }
    x->requests[v]++;
    if (err || out->status != 200 || (v == GS_EXT_BIND && out->body && !strstr(out->body, "\"Error\":\"\"")))
        x->errors[v]++;
    pthread_mutex_unlock(&x->mu);
    gs_hist_observe(&x->latency[v], since(&t0));
    gs_ext_request_free(&r);
    return err;
}

void gs_extender_metrics(struct gs_extender *x, struct gs_mbuf *b)
{
    struct gs_extender_stats st;
    gs_extender_stats(x, &st);
    gs_mbuf_help(b, "gpusched_extender_requests_total", "counter", "Extender requests answered, by verb.");
    for (int v = 0; v < GS_EXT_VERBS; v++)
        gs_mbuf_printf(b, "gpusched_extender_requests_total{verb=\"%s\"} %llu\n", gs_ext_verb_name(v),
                       (unsigned long long)st.requests[v]);
    gs_mbuf_help(b, "gpusched_extender_errors_total", "counter",
                 "Extender requests refused (bad request, not synced) or answered with an Error, by verb.");
    for (int v = 0; v < GS_EXT_VERBS; v++)
        gs_mbuf_printf(b, "gpusched_extender_errors_total{verb=\"%s\"} %llu\n", gs_ext_verb_name(v),
                       (unsigned long long)st.errors[v]);
    for (int v = 0; v < GS_EXT_VERBS; v++) {
        char name[96];
        snprintf(name, sizeof name, "gpusched_extender_%s_duration_seconds", gs_ext_verb_name(v));
        gs_hist_write(&x->latency[v], b, name, "Time to answer one extender request of this verb.");
    }
    gs_mbuf_help(b, "gpusched_extender_cache_nodes", "gauge", "Nodes in the extender's cache.");
    gs_mbuf_printf(b, "gpusched_extender_cache_nodes %llu\n", (unsigned long long)st.nodes);
    gs_mbuf_help(b, "gpusched_extender_cache_bound_pods", "gauge", "Bound pods accounted in the extender's cache.");
    gs_mbuf_printf(b, "gpusched_extender_cache_bound_pods %llu\n", (unsigned long long)st.pods);
    gs_mbuf_help(b, "gpusched_extender_synced", "gauge", "1 once the cluster has been listed.");
    gs_mbuf_printf(b, "gpusched_extender_synced %d\n", st.synced ? 1 : 0);
    gs_mbuf_help(b, "gpusched_extender_relists_total", "counter", "Lists after falling behind the change stream.");
    gs_mbuf_printf(b, "gpusched_extender_relists_total %llu\n", (unsigned long long)st.relists);
}
