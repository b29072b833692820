/*
 * replay_admit.c - the server's admission loop in the replay; see replay_admit.h.
 *
 * The loop is written against a struct gs_source, through which the server
 * writes the QuotaReserved / Admitted conditions and the queues' status. In
 * the replay nothing reads them back, so the source here accepts every
 * write and drops it. It calls itself a Kubernetes source: the admission
 * loop then leaves the queues' status to "Kueue's controller" and does not
 * compute it (estimates cost placement checks, and nothing here shows them);
 * no decision depends on either.
 *
 * Evictions. On the server an evicted pod is written back unbound (the local
 * source re-creates it) and reaches the admission loop again as a new pod of
 * the same name: the loop's pod_gone, then pod_add. The replay does the same
 * right after the cycle that evicted it, so the pod keeps its workload and
 * its place in line, and waits for admission again.
 */
#include "sim/replay_admit.h"

#include "control/resources.h" /* store keys of the trace's objects */
#include "loops/admission_loop.h"
#include "loops/podgroups.h"
#include "sched/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_NS GS_NS_PER_SEC /* admission_loop.c retries everyone this often */

struct gs_replay_admit {
    const struct gs_trace *t;
    struct gs_replay_admit_hooks h;
    struct gs_adm_loop *loop;
    struct gs_source src;
    struct gs__strmap index;   /* "pods/ns/name" -> pod index + 1 */
    char **keys;               /* store key per pod */
    const char **queue;        /* queue per pod, NULL when none */
    size_t *evicted;           /* pods evicted during the current cycle */
    size_t nevicted;
};

/*--- A source that drops every write ---*/

static int null_list(struct gs_source *s, const char *prefix, gs_store_list_fn fn, void *arg, int64_t *cursor)
{
    (void)s, (void)prefix, (void)fn, (void)arg;
    if (cursor) *cursor = 0;
    return 0;
}

static int null_events(struct gs_source *s, int64_t *after, const char *prefix, int timeout_ms, const atomic_bool *stop,
                       struct gs_store_event **evs, size_t *n)
{
    (void)s, (void)after, (void)prefix, (void)timeout_ms, (void)stop;
    *evs = NULL;
    *n = 0;
    return 0;
}

static int null_get(struct gs_source *s, const char *key, json_t **obj, int64_t *rv)
{
    (void)s, (void)key, (void)rv;
    *obj = NULL;
    return GS_ENOENT;
}

static int null_create(struct gs_source *s, const char *key, json_t *obj, int64_t *rv)
{
    (void)s, (void)key, (void)obj;
    if (rv) *rv = 0;
    return 0;
}

static int null_mutate(struct gs_source *s, const char *key, const char *sub, gs_store_mutate_fn fn, void *arg,
                       json_t **out, int64_t *rv)
{
    (void)s, (void)key, (void)sub, (void)fn, (void)arg;
    if (out) *out = NULL;
    if (rv) *rv = 0;
    return 0; /* written, as far as the caller can tell: it does not write the same again */
}

static int null_remove(struct gs_source *s, const char *key, const char *uid, int64_t expect_rv, json_t **old)
{
    (void)s, (void)key, (void)uid, (void)expect_rv;
    if (old) *old = NULL;
    return 0;
}

static int null_bind(struct gs_source *s, struct gs_source_bind *b, size_t n)
{
    (void)s;
    for (size_t i = 0; i < n; i++) b[i].err = 0, b[i].rv = 0, b[i].out = NULL;
    return 0;
}

static int null_preempt(struct gs_source *s, const char *key, const char *uid, const char *preemptor, bool *recreated)
{
    (void)s, (void)key, (void)uid, (void)preemptor;
    if (recreated) *recreated = false;
    return 0;
}

static void null_void(struct gs_source *s) { (void)s; }

static const struct gs_source_vtbl null_vtbl = {
    .kind = GS_SOURCE_KUBE, /* see the top: no queue status computed */
    .list = null_list, .events = null_events, .get = null_get, .create = null_create, .mutate = null_mutate,
    .mutate_batch = NULL, .remove = null_remove, .bind = null_bind, .preempt = null_preempt,
    .interrupt = null_void, .free = null_void,
};

/*--- Keys ---*/

static const char *ns_of(const struct gs_meta *m) { return m->namespace_ ? m->namespace_ : "default"; }

/* The store key the server keeps an object under. Volcano's Queue is not a
 * resource of its own on our server: its decoder is the gpusched Queue's, and
 * so is its key. */
static int object_key(struct gs_object *o, char *buf, size_t len)
{
    json_t *doc = gs_object_to_json(o);
    const char *av = json_string_value(json_object_get(doc, "apiVersion"));
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    const struct gs_api_resource *r = kind ? gs_api_resource_by_kind(av, kind) : NULL;
    if (!r && o->kind == GS_KIND_QUEUE) r = gs_api_resource_by_kind(NULL, "Queue");
    if (!r) return -1;
    int n = gs_api_key(r, ns_of(&o->u.generic->meta), o->u.generic->meta.name, buf, len);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

static bool queue_kind(enum gs_kind k)
{
    return k == GS_KIND_CLUSTERQUEUE || k == GS_KIND_LOCALQUEUE || k == GS_KIND_RESOURCEFLAVOR ||
           k == GS_KIND_QUEUE || k == GS_KIND_WORKLOADPRIORITYCLASS;
}

/* The queue a PodGroup names: its label, else spec.queue (Volcano). */
static const char *group_queue(const struct gs_podgroup *pg)
{
    const char *q = gs_labels_get(&pg->meta.labels, GS_LABEL_QUEUE);
    if (q && *q) return q;
    return pg->queue && *pg->queue ? pg->queue : NULL;
}

/* The PodGroup object of the trace pod belongs to, or NULL. */
static const struct gs_podgroup *pod_group(const struct gs_trace *t, const struct gs_pod *pod)
{
    if (!pod->pod_group || !*pod->pod_group) return NULL;
    for (size_t i = 0; i < t->nobjects; i++) {
        const struct gs_object *o = t->objects[i];
        if (o->kind != GS_KIND_PODGROUP) continue;
        const struct gs_podgroup *pg = o->u.podgroup;
        if (pg->group && !strcmp(pg->group, pod->pod_group) && !strcmp(ns_of(&pg->meta), ns_of(&pod->meta)))
            return pg;
    }
    return NULL;
}

static const char *pod_queue(const struct gs_trace *t, const struct gs_pod *pod)
{
    if (pod->queue_name && *pod->queue_name) return pod->queue_name;
    const struct gs_podgroup *pg = pod_group(t, pod);
    return pg ? group_queue(pg) : NULL;
}

bool gs_replay_admit_wanted(const struct gs_trace *t)
{
    for (size_t i = 0; i < t->nobjects; i++) {
        const struct gs_object *o = t->objects[i];
        if (queue_kind(o->kind) || (o->kind == GS_KIND_PODGROUP && group_queue(o->u.podgroup))) return true;
    }
    for (size_t i = 0; i < t->npods; i++)
        if (t->pods[i].pod->queue_name && *t->pods[i].pod->queue_name) return true;
    return false;
}

/*--- Hooks from the admission loop ---*/

static size_t index_of(const struct gs_replay_admit *a, const char *key)
{
    uintptr_t v = (uintptr_t)gs__strmap_get(&a->index, key);
    return v ? (size_t)(v - 1) : SIZE_MAX;
}

static void on_admitted(void *ctx, const char *key)
{
    struct gs_replay_admit *a = ctx;
    size_t i = index_of(a, key);
    if (i != SIZE_MAX && a->h.admitted) a->h.admitted(a->h.ctx, i);
}

static void on_evict(void *ctx, const char *key, const char *by)
{
    struct gs_replay_admit *a = ctx;
    size_t i = index_of(a, key);
    if (i == SIZE_MAX) return;
    if (a->h.evicted) a->h.evicted(a->h.ctx, i, by);
    a->evicted[a->nevicted++] = i; /* at most one entry per pod and cycle: see the cycle */
}

/*--- Life cycle ---*/

static int feed_objects(struct gs_replay_admit *a, struct gs_diags *d)
{
    const struct gs_trace *t = a->t;
    char key[GS__KEY_MAX];
    for (size_t i = 0; i < t->nobjects; i++) { /* queue objects first, then the groups, as the server lists them */
        struct gs_object *o = t->objects[i];
        if (!queue_kind(o->kind)) continue;
        if (object_key(o, key, sizeof key)) {
            gs_diags_add(d, o->u.generic->meta.name ? o->u.generic->meta.name : "object",
                         "%s: no store key for this kind", gs_kind_name(o->kind));
            return GS_EINVAL;
        }
        gs_adm_loop_queue_event(a->loop, key, gs_object_to_json(o), (int64_t)i + 1);
    }
    for (size_t i = 0; i < t->nobjects; i++) {
        struct gs_object *o = t->objects[i];
        if (o->kind == GS_KIND_PODGROUP && !object_key(o, key, sizeof key))
            gs_adm_loop_group_event(a->loop, key, o->u.podgroup);
    }
    /* DRA objects: admission counts claimed devices against quota (dra_admit.h). */
    for (size_t i = 0; i < t->ndra; i++) {
        json_t *doc = t->dra[i];
        const char *av = json_string_value(json_object_get(doc, "apiVersion"));
        const char *kind = json_string_value(json_object_get(doc, "kind"));
        json_t *meta = json_object_get(doc, "metadata");
        const char *ns = json_string_value(json_object_get(meta, "namespace"));
        const char *name = json_string_value(json_object_get(meta, "name"));
        const struct gs_api_resource *r = kind ? gs_api_resource_by_kind(av, kind) : NULL;
        int n = r && name ? gs_api_key(r, ns ? ns : "default", name, key, sizeof key) : -1;
        if (n > 0 && (size_t)n < sizeof key && gs_adm_loop_is_queue_key(key))
            gs_adm_loop_queue_event(a->loop, key, doc, (int64_t)(t->nobjects + i) + 1);
    }
    return 0;
}

int gs_replay_admit_new(const struct gs_trace *t, struct gs_cache *cache, const struct gs_clock *clock,
                        const struct gs_profile *profile, const struct gs_replay_admit_hooks *hooks,
                        struct gs_replay_admit **out, struct gs_diags *d)
{
    *out = NULL;
    if (!gs_replay_admit_wanted(t)) return 0;
    struct gs_replay_admit *a = calloc(1, sizeof *a);
    if (!a) return GS_ENOMEM;
    a->t = t;
    a->h = *hooks;
    a->src.v = &null_vtbl;
    gs__strmap_init(&a->index);
    size_t n = t->npods ? t->npods : 1;
    a->keys = calloc(n, sizeof *a->keys);
    a->queue = calloc(n, sizeof *a->queue);
    a->evicted = calloc(n, sizeof *a->evicted);
    int rc = a->keys && a->queue && a->evicted ? 0 : GS_ENOMEM;
    for (size_t i = 0; !rc && i < t->npods; i++) {
        const struct gs_pod *p = t->pods[i].pod;
        char key[GS__KEY_MAX];
        snprintf(key, sizeof key, "pods/%s/%s", ns_of(&p->meta), p->meta.name);
        if (!(a->keys[i] = strdup(key)) || gs__strmap_put(&a->index, a->keys[i], (void *)(uintptr_t)(i + 1)))
            rc = GS_ENOMEM;
        a->queue[i] = pod_queue(t, p);
    }
    struct gs_adm_loop_opts ao = {.source = &a->src, .cache = cache, .clock = clock, .profile = profile, .ctx = a,
                                  .admitted = on_admitted, .evict = on_evict};
    if (!rc) rc = gs_adm_loop_new(&ao, &a->loop);
    if (!rc) rc = feed_objects(a, d);
    if (rc) {
        if (rc == GS_ENOMEM) gs_diags_add(d, "replay", "admission: out of memory");
        gs_replay_admit_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void gs_replay_admit_free(struct gs_replay_admit *a)
{
    if (!a) return;
    gs_adm_loop_free(a->loop);
    gs__strmap_free(&a->index);
    for (size_t i = 0; a->keys && i < a->t->npods; i++) free(a->keys[i]);
    free(a->keys);
    free(a->queue);
    free(a->evicted);
    free(a);
}

const struct gs_profile *gs_replay_admit_profile(struct gs_replay_admit *a, const struct gs_profile *base)
{
    return a ? gs_adm_loop_profile(a->loop, base) : base;
}

/*--- Pods ---*/

bool gs_replay_admit_arrive(struct gs_replay_admit *a, size_t i)
{
    if (!a) return false;
    const struct gs_pod *p = a->t->pods[i].pod;
    return gs_adm_loop_claims(a->loop, p) && gs_adm_loop_pod_add(a->loop, a->keys[i], p);
}

void gs_replay_admit_running(struct gs_replay_admit *a, size_t i)
{
    if (!a) return;
    const struct gs_pod *p = a->t->pods[i].pod;
    if (gs_adm_loop_claims(a->loop, p)) gs_adm_loop_pod_running(a->loop, a->keys[i], p);
}

void gs_replay_admit_gone(struct gs_replay_admit *a, size_t i)
{
    if (a) gs_adm_loop_pod_gone(a->loop, a->keys[i]);
}

int gs_replay_admit_cycle(struct gs_replay_admit *a)
{
    if (!a) return 0;
    a->nevicted = 0;
    int rc = gs_adm_loop_cycle(a->loop);
    /* The evicted pods come back unbound, as the server's local source
     * re-creates them: held again, or queued when admission says so. */
    for (size_t k = 0; k < a->nevicted; k++) {
        size_t i = a->evicted[k];
        gs_adm_loop_pod_gone(a->loop, a->keys[i]);
        if (!gs_replay_admit_arrive(a, i) && a->h.admitted) a->h.admitted(a->h.ctx, i);
    }
    a->nevicted = 0;
    return rc;
}

size_t gs_replay_admit_pending(const struct gs_replay_admit *a) { return a ? gs_adm_loop_pending(a->loop) : 0; }

int64_t gs_replay_admit_next_tick(const struct gs_replay_admit *a, int64_t now)
{
    return a && gs_adm_loop_pending(a->loop) ? now + TICK_NS : -1;
}

const char *gs_replay_admit_queue(const struct gs_replay_admit *a, size_t i) { return a ? a->queue[i] : NULL; }

char *gs_replay_admit_why(struct gs_replay_admit *a, size_t i)
{
    if (!a) return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    int rc = gs_adm_loop_explain(a->loop, a->keys[i], f);
    fclose(f);
    if (rc || !buf || !len) {
        free(buf);
        return NULL;
    }
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' ')) buf[--len] = 0;
    for (char *c = buf; *c; c++) /* lines become "; "-separated parts of one */
        if (*c == '\n') *c = ';';
    size_t n = 0;
    for (char *c = buf; *c; c++) n += *c == ';';
    char *out = malloc(len + n + 1);
    if (!out) {
        free(buf);
        return NULL;
    }
    size_t k = 0;
    for (char *c = buf; *c; c++) {
        if (*c == ';') {
            out[k++] = ';';
            out[k++] = ' ';
            while (c[1] == ' ') c++;
        } else {
            out[k++] = *c;
        }
    }
    out[k] = 0;
    free(buf);
    return out;
}
