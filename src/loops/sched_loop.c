/*
 * sched_loop.c - the in-server scheduler on the store's change stream; see sched_loop.h.
 *
 * State. One entry per pod and per node the loop knows, keyed by store key.
 * An entry keeps the decoded object the scheduler borrows (queue and cache
 * hold pointers into it) apart from a digest of the latest stored document
 * (not the document: one copy of each pod is enough) and its version:
 * a change that only touches status updates the document and leaves the
 * decoded object where it is, so a queued pod keeps its place and a bound
 * pod's cache accounting stays put. Anything else about a queued pod
 * requeues it as the new object.
 *
 * Order. Events are applied in version order and an event whose version is
 * not newer than the entry's is skipped, which makes the initial lists (nodes,
 * then pods, each at its own version) and the stream that follows from the
 * older of the two agree. If the loop falls behind the store's event ring it
 * drops all state and loads again. Versions compared are always objects'
 * own (an entry's rv, an event's rv, a write's rv); the cursor the lists
 * return is only handed back to the change stream, since for a Kubernetes
 * source it counts something else (source.h).
 */
#include "loops/sched_loop.h"
#include "loops/admission_loop.h" /* multi-tenant admission */
#include "sched/admission/admission.h"  /* admission tuning (server options) */
#include "govern/metrics.h"  /* metrics hook */
#include "govern/operator.h" /* GPU stack gate */

#include "control/api.h"
#include "control/events.h" /* Scheduled, FailedScheduling, Preempted */
#include "loops/nodelifecycle.h" /* evictions awaiting their node */
#include "loops/podgroups.h" /* PodGroup shapes and status */
#include "core/log.h"
#include "sched/cache.h"
#include "sched/gpu_state.h" /* count-only nodes */
#include "sched/cache_feed.h" /* budgets and namespaces */
#include "loops/sched_dra.h"   /* DRA kinds and claim writes */
#include "informer/informer.h"  /* served resources, for the prefixes */
#include "sched/explain.h"
#include "sched/scheduler.h"
#include "sched/strmap.h"
#include "sched/topology_core.h"
#include "informer/informer.h" /* which followed kinds the API serves */

#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CYCLES_PER_ROUND 512
#define BIND_CHUNK 64 /* kube source: bindings sent while the round goes on deciding */
#define IDLE_WAIT_MS 50

enum pstate { P_QUEUED, P_BOUND, P_DONE, P_OTHER, P_DETACHED, P_ADMIT /* held by admission */,
              P_GATED /* spec.schedulingGates not empty */ };

struct entry {
    char *key;             /* store key; also the map's key */
    struct gs_object *obj; /* decoded: borrowed by the scheduler */
    uint64_t digest;       /* of the latest stored document but its status and version (see doc_digest) */
    int64_t rv;
    enum pstate state;
    int sched;             /* profile index when queued */
    char *msg;             /* last Unschedulable message written */
    struct gs_nrt *nrt;    /* NodeResourceTopology entries: parsed, borrowed by the cache */
    char *nominated;       /* status.nominatedNodeName last written, NULL none */
    bool confirm;          /* bound by us, stored version unknown: the stream's next one confirms it */
};

/* A pod preemption evicted during a cycle, carried out after it. */
struct victim {
    char *key;       /* store key */
    char *preemptor; /* "ns/name" */
    char *node;      /* where it ran: the preemptor's nominated node */
    size_t sched;
};

/* An explain request from an API thread, answered by the loop thread. */
struct explain_req {
    const char *ns, *name;
    char *text;
    int err;
    bool done;
    void (*fn)(struct gs_cache *c, void *arg); /* gs_sched_loop_inspect instead of an explain */
    void *arg;
};

struct gs_sched_loop {
    struct gs_source *source;
    bool (*may_write)(void *ctx); /* leadership (sched_loop.h) */
    void *may_write_ctx;
    bool leading;                 /* may_write's answer before the last round */
    bool loading;                 /* in load(): no writes from inside a list */
    struct entry *nominated_now;  /* the preemptor nominated by the cycle running */
    struct gs_sched_config own;       /* the default when no config was given */
    const struct gs_sched_config *cfg;
    uint64_t seed;
    struct gs_hist *cycle_latency; /* metrics hook */
    struct gs_clock clock;
    struct gs_cache *cache;
    struct gs_gpu_state_memo gpu_memo; /* count-only nodes named in diagnoses (sched/gpu_state.h) */
    struct gs_scheduler **scheds;
    size_t nsched;
    struct gs_adm_loop *adm; /* admission in front of the queues (admission_loop.h) */
    struct gs_admission_opts adm_opts; /* admission tuning (server options), kept for reloads */
    bool has_adm_opts;
    struct gs__strmap pods, nodes, groups, nrts;
    int64_t rv;
    struct victim *victims;
    size_t nvictims, cur_sched;
    pthread_cond_t cv;           /* explain requests (under mu) */
    struct explain_req *req;
    pthread_t th;
    atomic_bool stop;
    pthread_mutex_t mu; /* stats */
    struct pending_bind *pend; /* this round's bindings, written when it ends */
    size_t npend;
    struct gs_source_bind *bb; /* their requests and results, pend's order */
    json_t **bann;             /* their annotations */
    size_t bsent;              /* pend[0, bsent) sent (kube: early, in chunks) */
    struct bind_job *job;      /* the chunk on its way, NULL none */
    struct gs_sched_loop_stats st;
    struct gs_event_source ev; /* events hook */
};

/*--- Devices annotation ---*/

int gs_devices_format(const struct gs_node *node, uint64_t mask, int32_t milli, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (int g = 0; g < 64; g++) {
        if (!(mask >> g & 1)) continue;
        const struct gs_gpu *d = node && (size_t)g < node->ngpus ? &node->gpus[g] : NULL;
        char name[160];
        if (d && d->uuid) snprintf(name, sizeof name, "%s", d->uuid);
        else snprintf(name, sizeof name, "%d", d ? d->index : g);
        int w = snprintf(buf + (n < len ? n : len), n < len ? len - n : 0, "%s%s", n ? "," : "", name);
        n += (size_t)w;
        if (milli > 0 && milli < 1000) n += (size_t)snprintf(buf + (n < len ? n : len), n < len ? len - n : 0, ":%d", milli);
    }
    return (int)n;
}

static int find_gpu(const struct gs_node *node, int32_t ngpus, const char *name)
{
    for (size_t g = 0; node && g < node->ngpus && (int32_t)g < ngpus; g++)
        if (node->gpus[g].uuid && !strcmp(node->gpus[g].uuid, name)) return (int)g;
    char *end;
    long idx = strtol(name, &end, 10);
    if (*name && !*end && idx >= 0) {
        for (size_t g = 0; node && g < node->ngpus; g++)
            if (node->gpus[g].index == idx) return (int)g;
        if (idx < ngpus) return (int)idx;
    }
    return -1;
}

int gs_devices_parse(const struct gs_node *node, int32_t ngpus, const char *text, uint64_t *mask, int32_t *milli)
{
    *mask = 0;
    *milli = 1000;
    char buf[2048];
    if (snprintf(buf, sizeof buf, "%s", text) >= (int)sizeof buf) return GS_EINVAL;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(t, ':');
        if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
            *colon = 0;
            *milli = atoi(colon + 1);
            if (*milli < 1 || *milli > 1000) return GS_EINVAL;
        }
        int g = find_gpu(node, ngpus, t);
        if (g < 0 || g >= 64) return GS_EINVAL;
        *mask |= 1ull << g;
    }
    return 0;
}

/*--- Entries ---*/

static void entry_free(struct entry *e)
{
    if (!e) return;
    if (e->nrt) gs_nrt_clear(e->nrt);
    free(e->nrt);
    gs_object_free(e->obj);
    free(e->msg);
    free(e->nominated);
    free(e->key);
    free(e);
}

static struct entry *entry_new(const char *key)
{
    struct entry *e = calloc(1, sizeof *e);
    if (e && !(e->key = strdup(key))) {
        free(e);
        e = NULL;
    }
    return e;
}

static void notify_all(struct gs_sched_loop *l, enum gs_cluster_event ev)
{
    for (size_t i = 0; i < l->nsched; i++) gs_sched_queue_on_event(gs_scheduler_queue(l->scheds[i]), ev);
}

static int profile_of(struct gs_sched_loop *l, const struct gs_pod *pod)
{
    const char *name = pod->scheduler_name ? pod->scheduler_name : GS_DEFAULT_SCHEDULER;
    for (size_t i = 0; i < l->cfg->nprofiles; i++)
        if (!strcmp(l->cfg->profiles[i].scheduler_name, name)) return (int)i;
    return -1;
}

static bool pod_terminal(const struct gs_pod *p)
{
    return p->phase && (!strcmp(p->phase, "Succeeded") || !strcmp(p->phase, "Failed"));
}

/* A hash of a JSON value; object members combine by sum so member order
 * does not matter. A 64-bit digest instead of the document itself keeps a
 * copy of every pod out of memory; a collision (2^-64) would only miss a
 * requeue. */
static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static uint64_t str_hash(const char *p, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return mix(h);
}

static uint64_t json_hash(const json_t *v, int depth, bool top)
{
    uint64_t h = 0xcbf29ce484222325ull + (uint64_t)json_typeof(v);
    const char *k;
    json_t *x;
    size_t i;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        json_object_foreach((json_t *)v, k, x) {
            if (top && !strcmp(k, "status")) continue;
            if (depth == 1 && !strcmp(k, "resourceVersion")) continue;
            bool meta = top && !strcmp(k, "metadata");
            h += mix(str_hash(k, strlen(k), 0x9e3779b97f4a7c15ull) ^ json_hash(x, meta ? 1 : 2, false));
        }
        return mix(h);
    case JSON_ARRAY:
        json_array_foreach(v, i, x) h = mix(h * 31 + json_hash(x, 2, false));
        return h;
    case JSON_STRING: return str_hash(json_string_value(v), json_string_length(v), h);
    case JSON_INTEGER: return mix(h ^ (uint64_t)json_integer_value(v));
    case JSON_REAL: {
        double d = json_real_value(v);
        uint64_t b;
        memcpy(&b, &d, sizeof b);
        return mix(h ^ b);
    }
    default: return mix(h);
    }
}

/* Equal digests: equal apart from status and metadata.resourceVersion. */
static uint64_t doc_digest(const json_t *doc) { return json_hash(doc, 0, true); }

/* Puts a bound pod's resources into the cache, on the devices its annotation names. */
static enum pstate account_bound(struct gs_sched_loop *l, struct entry *e)
{
    const struct gs_pod *pod = e->obj->u.pod;
    int32_t idx = gs_cache_find_node(l->cache, pod->node_name);
    if (idx < 0) return P_DETACHED;
    struct gs_node_info *ni = gs_cache_node(l->cache, idx);
    struct gs_assignment a = {.node = idx, .milli = pod->demand.gpu_milli, .mem_mib = pod->demand.gpu_mem_mib};
    const char *dev = gs_labels_get(&pod->meta.annotations, GS_ANN_DEVICES);
    int32_t milli = 1000;
    if (dev && gs_devices_parse(ni->node, ni->ngpus, dev, &a.gpu_mask, &milli) == 0) a.milli = milli;
    if (gs_cache_add_bound(l->cache, pod, &a) != 0) {
        gs_log(GS_LOG_WARN, "scheduler: bound pod not accounted", "pod", e->key, "node", pod->node_name, NULL);
        return P_DETACHED;
    }
    return P_BOUND;
}

/* Releases whatever the scheduler holds for a pod entry. */
static void pod_release(struct gs_sched_loop *l, struct entry *e)
{
    char key[GS__KEY_MAX];
    gs_meta_key(&e->obj->u.pod->meta, key, sizeof key);
    gs_adm_loop_pod_gone(l->adm, e->key); /* admission hook: quota released */
    if (e->state == P_QUEUED) gs_scheduler_delete_pod(l->scheds[e->sched], key);
    else {
        if (e->state == P_BOUND && gs_cache_remove_pod(l->cache, key) == 0) notify_all(l, GS_EV_POD_DELETED);
        /* The driver that queued it (since bound, evicted or finished) may still hold
         * the pod object, which is freed next: it must not keep the pointer. */
        if (e->sched >= 0 && (size_t)e->sched < l->nsched) gs_scheduler_delete_pod(l->scheds[e->sched], key);
    }
}

static bool writable(struct gs_sched_loop *l) { return !l->may_write || l->may_write(l->may_write_ctx); }

#define GATED_MSG "Scheduling is blocked due to non-empty scheduling gates" /* kube-scheduler's words */

static bool pod_gated(const struct gs_pod *pod)
{ return json_array_size(json_object_get(json_object_get(pod->doc, "spec"), "schedulingGates")) > 0; }

static void write_gated(struct gs_sched_loop *l, struct entry *e);

/* Where a freshly decoded pod goes. */
static void pod_place(struct gs_sched_loop *l, struct entry *e)
{
    const struct gs_pod *pod = e->obj->u.pod;
    int p;
    /* An evicted pod's devices stay held until its node confirms or is lost (nodelifecycle.h). */
    if (pod_terminal(pod) && !gs_nodelc_eviction_pending(&pod->meta.annotations)) e->state = P_DONE;
    else if (pod->node_name) {
        e->state = account_bound(l, e);
        if (gs_adm_loop_claims(l->adm, pod)) gs_adm_loop_pod_running(l->adm, e->key, pod); /* admission hook */
    } else if ((p = profile_of(l, pod)) < 0) e->state = P_OTHER;
    else if (pod_gated(pod)) { /* queued once the gates are removed: a spec change, placed again */
        e->sched = p;
        e->state = P_GATED;
        write_gated(l, e);
    } else if (gs_adm_loop_claims(l->adm, pod) && gs_adm_loop_pod_add(l->adm, e->key, pod)) { /* admission hook */
        e->sched = p;
        e->state = P_ADMIT;
    } else {
        e->sched = p;
        e->state = gs_scheduler_add_pod(l->scheds[p], pod) == 0 ? P_QUEUED : P_OTHER;
    }
}

/* A binding whose stored version the source did not return (a Kubernetes
 * binding answers with a Status, not the pod): the first version on the
 * node we chose is our own write coming back, not news. */
static bool confirms(struct gs_sched_loop *l, const struct entry *e, const struct gs_pod *now)
{
    if (!e->confirm || e->state != P_BOUND || !now->node_name) return false;
    char key[GS__KEY_MAX];
    gs_meta_key(&now->meta, key, sizeof key);
    const struct gs_assignment *a = gs_cache_pod_assignment(l->cache, key);
    struct gs_node_info *ni = a ? gs_cache_node(l->cache, a->node) : NULL;
    return ni && !strcmp(ni->name, now->node_name);
}

/* confirms() read from the document itself, before any decoding: with a
 * Kubernetes source every binding the loop writes comes back once on the
 * pods watch, and at thousands of bindings a second decoding each echo
 * only to keep it would cost more than the decision. Anything else (another
 * uid, a deletion, a finished pod) takes the full path. */
static bool binding_echo(struct gs_sched_loop *l, const struct entry *e, const json_t *doc)
{
    if (!e->confirm || e->state != P_BOUND) return false;
    const json_t *md = json_object_get(doc, "metadata"), *st = json_object_get(doc, "status");
    const char *node = json_string_value(json_object_get(json_object_get(doc, "spec"), "nodeName"));
    const char *uid = json_string_value(json_object_get(md, "uid")), *was = e->obj->u.pod->meta.uid;
    const char *phase = json_string_value(json_object_get(st, "phase"));
    if (!node || json_object_get(md, "deletionTimestamp") || (uid || was ? !uid || !was || strcmp(uid, was) : 0) ||
        (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))))
        return false;
    char key[GS__KEY_MAX];
    gs_meta_key(&e->obj->u.pod->meta, key, sizeof key);
    const struct gs_assignment *a = gs_cache_pod_assignment(l->cache, key);
    struct gs_node_info *ni = a ? gs_cache_node(l->cache, a->node) : NULL;
    return ni && !strcmp(ni->name, node);
}

/* The decoded pod is all the loop reads of a plain pod; only a gated pod
 * (its gates, its conditions) and one admission may copy (a queue or a
 * PodGroup names it) read the document again. 50,000 pending pods' jansson
 * trees were most of the standalone scheduler's memory. */
static void pod_drop_doc(struct entry *e)
{
    struct gs_pod *p = e->obj->u.pod;
    if (e->state == P_GATED || e->state == P_ADMIT || p->queue_name || p->pod_group) return;
    if (gs_pod_has_claims(p)) return; /* DynamicResources reads spec.resourceClaims */
    json_decref(p->doc);
    p->doc = NULL;
}

static void pod_event(struct gs_sched_loop *l, const char *key, json_t *doc, int64_t rv, bool deleted)
{
    struct entry *e = gs__strmap_get(&l->pods, key);
    if (e && rv <= e->rv) return;
    if (deleted) {
        if (!e) return;
        pod_release(l, e);
        gs__strmap_del(&l->pods, key);
        entry_free(e);
        return;
    }
    if (e && binding_echo(l, e, doc)) { /* what the full path below keeps, without the decoding */
        e->confirm = false;
        e->digest = doc_digest(doc);
        e->rv = rv;
        return;
    }
    struct gs_diags d = {0};
    struct gs_object *o = NULL;
    if (gs_object_decode(doc, &o, &d) || o->kind != GS_KIND_POD) {
        gs_log(GS_LOG_WARN, "scheduler: cannot decode pod", "pod", key, "error", d.n ? d.v[0].msg : "", NULL);
        gs_diags_free(&d);
        gs_object_free(o);
        return;
    }
    gs_diags_free(&d);
    bool fresh = !e;
    if (fresh && (!(e = entry_new(key)) || gs__strmap_put(&l->pods, e->key, e))) {
        entry_free(e);
        gs_object_free(o);
        return;
    }
    uint64_t digest = doc_digest(doc);
    /* Graceful deletion: a terminating bound pod keeps its resources until it is gone. */
    bool deleting = json_object_get(json_object_get(doc, "metadata"), "deletionTimestamp") != NULL;
    bool keep = !fresh && e->state != P_DETACHED && e->state != P_OTHER &&
                (e->digest == digest || (deleting && e->state == P_BOUND) || confirms(l, e, o->u.pod)) &&
                !(e->state != P_DONE && pod_terminal(o->u.pod));
    e->confirm = false;
    e->digest = digest;
    e->rv = rv;
    if (keep) { /* status-only change: the scheduler's view of the pod is unchanged */
        gs_object_free(o);
        return;
    }
    if (!fresh) pod_release(l, e);
    gs_object_free(e->obj);
    e->obj = o;
    if (deleting && !o->u.pod->node_name) e->state = P_OTHER; /* being deleted: never bound */
    else pod_place(l, e);
    pod_drop_doc(e);
}

/* A bad gpusched.io/gpus annotation is logged (the node is count-only), and a
 * count-only node takes NUMA nodes from its NodeResourceTopology (sched/gpu_state.h). */
static void node_gpu_state(struct gs_sched_loop *l, struct gs_node *n)
{
    if (n->gpu_note) gs_log(GS_LOG_WARN, "scheduler: GPU state", "error", n->gpu_note, NULL);
    char nkey[GS__KEY_MAX + 32];
    snprintf(nkey, sizeof nkey, "noderesourcetopologies.topology.node.k8s.io/%s", n->meta.name);
    struct entry *t = gs__strmap_get(&l->nrts, nkey);
    if (t && t->nrt) gs_gpu_state_apply_nrt(n, t->nrt);
}

static void node_event(struct gs_sched_loop *l, const char *key, json_t *doc, int64_t rv, bool deleted)
{
    struct entry *e = gs__strmap_get(&l->nodes, key);
    if (e && rv <= e->rv) return;
    if (deleted) {
        if (!e) return;
        gs_cache_remove_node(l->cache, e->obj->u.node->meta.name);
        gs__strmap_del(&l->nodes, key);
        entry_free(e);
        return;
    }
    struct gs_diags d = {0};
    struct gs_object *o = NULL;
    if (gs_object_decode(doc, &o, &d) || o->kind != GS_KIND_NODE) {
        gs_log(GS_LOG_WARN, "scheduler: cannot decode node", "node", key, NULL);
        gs_diags_free(&d);
        gs_object_free(o);
        return;
    }
    gs_diags_free(&d);
    node_gpu_state(l, o->u.node); /* per-GPU state of a Node without status.devices */
    gs_stack_gate_node(doc, o->u.node); /* GPU stack gate: no GPUs offered until GPUStackReady */
    bool fresh = !e;
    if (fresh && (!(e = entry_new(key)) || gs__strmap_put(&l->nodes, e->key, e))) {
        entry_free(e);
        gs_object_free(o);
        return;
    }
    int r = fresh ? gs_scheduler_add_node(l->scheds[0], o->u.node) : gs_cache_update_node(l->cache, o->u.node);
    if (r < 0) {
        gs_log(GS_LOG_WARN, "scheduler: node not accepted by the cache", "node", key, "error", gs_strerror(r), NULL);
        if (fresh) {
            gs__strmap_del(&l->nodes, key);
            entry_free(e);
        }
        gs_object_free(o);
        return;
    }
    /* A node that reports Ready=False takes no new pods. */
    const char *ready = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(doc, "status"), "conditions"), i, c)
        if (!strcmp(json_string_value(json_object_get(c, "type")) ? json_string_value(json_object_get(c, "type")) : "", "Ready"))
            ready = json_string_value(json_object_get(c, "status"));
    if (ready && strcmp(ready, "True")) gs_cache_set_schedulable(l->cache, r, false);
    gs_object_free(e->obj);
    e->obj = o;
    e->rv = rv;
    notify_all(l, fresh ? GS_EV_NODE_ADDED : GS_EV_NODE_UPDATED);
    /* Pods bound to this node before it was known can be accounted now. */
    if (fresh) {
        char nkey[GS__KEY_MAX + 32];
        snprintf(nkey, sizeof nkey, "noderesourcetopologies.topology.node.k8s.io/%s", o->u.node->meta.name);
        struct entry *t = gs__strmap_get(&l->nrts, nkey);
        if (t && t->nrt) gs_cache_set_nrt(l->cache, r, t->nrt);
        for (size_t s = 0; s < l->pods.cap; s++) {
            struct entry *p = l->pods.slots[s].key ? l->pods.slots[s].val : NULL;
            if (p && p->state == P_DETACHED && p->obj->u.pod->node_name &&
                !strcmp(p->obj->u.pod->node_name, o->u.node->meta.name))
                p->state = account_bound(l, p);
        }
    }
}

/* PodGroups: every scheduler's plugins borrow the decoded group until it is removed. */
static void group_event(struct gs_sched_loop *l, const char *key, json_t *doc, int64_t rv, bool deleted)
{
    struct entry *e = gs__strmap_get(&l->groups, key);
    if (e && rv <= e->rv) return;
    struct gs_object *o = NULL;
    if (!deleted) {
        struct gs_diags d = {0};
        if (gs_object_decode(doc, &o, &d) || o->kind != GS_KIND_PODGROUP) {
            gs_log(GS_LOG_WARN, "scheduler: cannot decode pod group", "podgroup", key, NULL);
            gs_object_free(o);
            o = NULL;
        }
        gs_diags_free(&d);
        if (!o) return;
    }
    /* admission hook: PodGroups are admission workloads; a status-only change (its Admitted condition) is not news */
    if (e && o && e->digest == doc_digest(doc)) {
        e->rv = rv;
        gs_object_free(o);
        return;
    }
    gs_adm_loop_group_event(l->adm, key, o ? o->u.podgroup : NULL);
    if (e) {
        for (size_t i = 0; i < l->nsched; i++) gs_scheduler_remove_podgroup(l->scheds[i], e->obj->u.podgroup);
        gs__strmap_del(&l->groups, key);
        entry_free(e);
    }
    if (!o) return;
    if (!(e = entry_new(key)) || gs__strmap_put(&l->groups, e->key, e)) {
        entry_free(e);
        gs_object_free(o);
        return;
    }
    e->obj = o;
    e->rv = rv;
    e->digest = doc_digest(doc); /* admission hook: see above */
    for (size_t i = 0; i < l->nsched; i++) gs_scheduler_add_podgroup(l->scheds[i], o->u.podgroup);
}

/* A count-only node known to the cache takes its GPUs' NUMA nodes from nrt (NULL: none). */
static void nrt_node_gpus(struct gs_sched_loop *l, const char *node, const struct gs_nrt *nrt)
{
    char nkey[GS__KEY_MAX + 8];
    snprintf(nkey, sizeof nkey, "nodes/%s", node);
    struct entry *ne = gs__strmap_get(&l->nodes, nkey);
    struct gs_node *nd = ne && ne->obj ? ne->obj->u.node : NULL;
    if (!nd || (nd->gpu_source != GS_GPU_SRC_COUNT && nd->gpu_source != GS_GPU_SRC_NRT)) return;
    if (gs_gpu_state_apply_nrt(nd, nrt) == 0) gs_cache_update_node(l->cache, nd);
}

/* NodeResourceTopology: parsed and attached to its node (now or when the node comes). */
static void nrt_event(struct gs_sched_loop *l, const char *key, json_t *doc, int64_t rv, bool deleted)
{
    struct entry *e = gs__strmap_get(&l->nrts, key);
    if (e && rv <= e->rv) return;
    struct gs_nrt *n = NULL;
    if (!deleted) {
        struct gs_diags d = {0};
        if (!(n = calloc(1, sizeof *n)) || gs_nrt_parse(doc, n, &d)) {
            gs_log(GS_LOG_WARN, "scheduler: cannot parse NodeResourceTopology", "object", key,
                   "error", d.n ? d.v[0].msg : "", NULL);
            free(n);
            n = NULL;
        }
        gs_diags_free(&d);
        if (!n) return;
    }
    if (e) {
        int32_t idx = e->nrt ? gs_cache_find_node(l->cache, e->nrt->node) : -1;
        if (idx >= 0) gs_cache_set_nrt(l->cache, idx, NULL);
        if (e->nrt && !n) nrt_node_gpus(l, e->nrt->node, NULL);
        gs__strmap_del(&l->nrts, key);
        entry_free(e);
    }
    if (!n) return;
    if (!(e = entry_new(key)) || gs__strmap_put(&l->nrts, e->key, e)) {
        entry_free(e);
        gs_nrt_clear(n);
        free(n);
        return;
    }
    e->nrt = n;
    e->rv = rv;
    int32_t idx = gs_cache_find_node(l->cache, n->node);
    if (idx >= 0) gs_cache_set_nrt(l->cache, idx, n);
    nrt_node_gpus(l, n->node, n);
    notify_all(l, GS_EV_NODE_UPDATED);
}

typedef void (*event_fn)(struct gs_sched_loop *, const char *, json_t *, int64_t, bool);

/* Queue objects (ClusterQueue, LocalQueue, ResourceFlavor, Queue) go to admission. */
static void queue_event(struct gs_sched_loop *l, const char *key, json_t *doc, int64_t rv, bool deleted)
{
    gs_adm_loop_queue_event(l->adm, key, deleted ? NULL : doc, rv);
}

/* PodDisruptionBudgets and Namespaces only inform the cache (sched/cache_feed.h). */
static void feed_event(struct gs_sched_loop *l, const char *key, json_t *doc, int64_t rv, bool deleted)
{
    (void)rv;
    gs_cache_feed(l->cache, key, deleted ? NULL : doc);
}

/* DRA objects inform the cache and may let waiting pods in (loops/sched_dra.h). */
static void dra_event(struct gs_sched_loop *l, const char *key, json_t *doc, int64_t rv, bool deleted)
{
    (void)rv;
    if (gs_cache_feed(l->cache, key, deleted ? NULL : doc) == 0)
        notify_all(l, GS_EV_NODE_UPDATED | GS_EV_DEVICE_FREED);
}

static const struct {
    const char *prefix;
    event_fn fn;
} kinds[] = {
    {GS_CACHE_FEED_NAMESPACE, feed_event},
    GS_SCHED_DRA_KINDS(dra_event), /* before the pods that claim them */
    {GS_CACHE_FEED_PDB, feed_event},
    {"nodes/", node_event},
    {"noderesourcetopologies.topology.node.k8s.io/", nrt_event},
    {"podgroups.scheduling.x-k8s.io/", group_event},
    {"podgroups.scheduling.volcano.sh/", group_event}, /* the three PodGroup shapes: loops/podgroups.h */
    {"podgroups.scheduling.k8s.io/", group_event},
    {"resourceflavors.kueue.x-k8s.io/", queue_event},
    {"clusterqueues.kueue.x-k8s.io/", queue_event},
    {"localqueues.kueue.x-k8s.io/", queue_event},
    {"queues.scheduling.gpusched.io/", queue_event},
    {"workloadpriorityclasses.kueue.x-k8s.io/", queue_event}, /* Kueue's workload priorities */
    /* DRA objects: admission counts claimed devices and checks they exist (dra_admit.h) */
    {"resourceslices.resource.k8s.io/", queue_event},
    {"deviceclasses.resource.k8s.io/", queue_event},
    {"resourceclaims.resource.k8s.io/", queue_event},
    {"resourceclaimtemplates.resource.k8s.io/", queue_event},
    {"devicetaintrules.resource.k8s.io/", queue_event},
    {"pods/", pod_event},
};

static void apply_event(struct gs_sched_loop *l, const struct gs_store_event *ev)
{
    /* Our own binding writes come back here already applied: skip them unparsed. */
    struct entry *e = ev->type != GS_STORE_DELETED && !strncmp(ev->key, "pods/", 5) ? gs__strmap_get(&l->pods, ev->key)
                                                                                    : NULL;
    if (e && ev->rv <= e->rv) return;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (strncmp(ev->key, kinds[k].prefix, strlen(kinds[k].prefix))) continue;
        json_t *doc = json_loads(ev->value, 0, NULL);
        if (!doc) return;
        kinds[k].fn(l, ev->key, doc, ev->rv, ev->type == GS_STORE_DELETED);
        json_decref(doc);
        /* no return: a kind may have more than one reader (DRA objects: admission and the cache) */
    }
}

/*--- Load ---*/

struct load_ctx {
    struct gs_sched_loop *l;
    event_fn fn;
};

static int load_one(const char *key, json_t *obj, void *arg)
{
    struct load_ctx *c = arg;
    c->fn(c->l, key, obj, gs_store_obj_rv(obj), false);
    return atomic_load(&c->l->stop);
}

static void drop_state(struct gs_sched_loop *l)
{
    gs_adm_loop_free(l->adm); /* before the pods it borrows */
    l->adm = NULL;
    for (size_t i = 0; i < l->nsched; i++) gs_scheduler_free(l->scheds[i]);
    free(l->scheds);
    l->scheds = NULL;
    l->nsched = 0;
    gs_cache_free(l->cache);
    l->cache = NULL;
    struct gs__strmap *maps[] = {&l->pods, &l->groups, &l->nrts, &l->nodes};
    for (int m = 0; m < 4; m++) {
        for (size_t s = 0; s < maps[m]->cap; s++)
            if (maps[m]->slots[s].key) entry_free(maps[m]->slots[s].val);
        gs__strmap_free(maps[m]);
        gs__strmap_init(maps[m]);
    }
}

static void hook_bound(void *ctx, const struct gs_pod *pod, const struct gs_assignment *a);
static void hook_rejected(void *ctx, const struct gs_pod *pod, const char *reason);
static void hook_evicted(void *ctx, const struct gs_pod *victim, const struct gs_pod *preemptor,
                         const struct gs_assignment *a);

static void adm_admitted(void *ctx, const char *key);
static void adm_evict(void *ctx, const char *key, const char *by);

static int build(struct gs_sched_loop *l, struct gs_diags *d)
{
    l->cache = gs_cache_new(&l->clock);
    l->gpu_memo = (struct gs_gpu_state_memo){0}; /* keyed on this cache's epoch */
    l->scheds = calloc(l->cfg->nprofiles, sizeof *l->scheds);
    if (!l->cache || !l->scheds) return GS_ENOMEM;
    struct gs_adm_loop_opts ao = {.source = l->source, .cache = l->cache, .clock = &l->clock,
                                  .profile = &l->cfg->profiles[0], .ctx = l,
                                  .admitted = adm_admitted, .evict = adm_evict,
                                  .tuning = l->has_adm_opts ? &l->adm_opts : NULL, /* server options */
                                  .events = l->ev.rec};                                 /* events hook */
    if (gs_adm_loop_new(&ao, &l->adm)) return GS_ENOMEM;
    for (size_t i = 0; i < l->cfg->nprofiles; i++) {
        struct gs_scheduler_opts so = {.profile = gs_adm_loop_profile(l->adm, &l->cfg->profiles[i]), /* + AdmissionHold */
                                       .seed = l->seed,
                                       .hooks = {hook_bound, hook_rejected, hook_evicted, l}};
        int err = gs_scheduler_new(&l->clock, l->cache, &so, &l->scheds[i], d);
        if (err) return err;
        l->nsched++;
    }
    return 0;
}

/* Everything from the source (nodes, their topologies and the pod groups
 * before the pods), then the stream from the smallest cursor the lists
 * returned. A resource the source does not follow (GS_ENOENT: a Kubernetes
 * source without that CRD) is empty. One that cannot be listed is said and
 * the loop stays unsynced, but the others are still listed: stopping there
 * would leave the pods listed or not depending on whether their creation
 * happened to fall after the cursor. */
static bool served(const char *prefix);

static int load(struct gs_sched_loop *l)
{
    int err = 0;
    l->rv = INT64_MAX;
    l->loading = true;
    l->leading = false; /* the next round writes what the lists showed is owed (start_leading) */
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        int64_t cursor = INT64_MAX;
        struct load_ctx c = {l, kinds[k].fn};
        if (!served(kinds[k].prefix)) continue; /* gs_sched_loop_prefixes leaves it out too */
        int e = gs_source_list(l->source, kinds[k].prefix, load_one, &c, &cursor);
        if (e == GS_ENOENT) e = 0;
        else if (!e && cursor < l->rv) l->rv = cursor;
        else if (e) gs_log(GS_LOG_WARN, "scheduler: cannot list", "resource", kinds[k].prefix, "error",
                           gs_strerror(e), NULL);
        if (e && !err) err = e;
    }
    if (l->rv == INT64_MAX) l->rv = 0;
    l->loading = false;
#ifdef __GLIBC__
    /* The informers' list pages and the lists' parse trees are garbage now,
     * spread over every thread's arena: give the free pages back, or they
     * stay the process's RSS (half of it at 50,000 pods). */
    if (gs_source_kind(l->source) == GS_SOURCE_KUBE) malloc_trim(0);
#endif
    pthread_mutex_lock(&l->mu);
    l->st.synced = !err;
    pthread_mutex_unlock(&l->mu);
    return err;
}

/*--- Writing decisions ---*/

static json_t *status_devices(const struct gs_node *node, const struct gs_assignment *a)
{
    json_t *arr = json_array();
    for (int g = 0; g < 64; g++) {
        if (!(a->gpu_mask >> g & 1)) continue;
        const struct gs_gpu *d = node && (size_t)g < node->ngpus ? &node->gpus[g] : NULL;
        json_t *o = json_pack("{s:i, s:i}", "index", d ? d->index : g, "milli", a->milli);
        if (d && d->uuid) json_object_set_new(o, "uuid", json_string(d->uuid));
        if (a->mem_mib) json_object_set_new(o, "memoryMiB", json_integer(a->mem_mib));
        json_array_append_new(arr, o);
    }
    return arr;
}

/*--- Binding writes, batched per round ---
 *
 * A round's bindings are queued and written together (one gs_source_bind:
 * one transaction for the in-process source) when the round ends. Until
 * then a pod is only assumed in the cache, as between a cycle and its write
 * before; nothing about it is visible outside the loop until the write. A
 * Kubernetes source gets them earlier, in chunks (see bind_early), and the
 * results are still taken when the round ends.
 */

/* The PodGroup's scheduled / unschedulable status (loops/podgroups.h); repeats write nothing. */
static void group_status(struct gs_sched_loop *l, const struct gs_pod *pod, bool scheduled, const char *msg)
{
    char key[GS__KEY_MAX + 64];
    struct gs_podgroup_status st = {scheduled, msg, gs_wall_time()};
    if (pod->pod_group && !gs_podgroup_store_key(pod, key, sizeof key))
        gs_source_mutate(l->source, key, "status", gs_podgroup_status_fn, &st, NULL, NULL);
}

struct pending_bind {
    struct entry *e;
    const char *node;     /* the cache's name of the node, stable for the round */
    char devices[1024];   /* the devices annotation, "" for none */
    json_t *status_devices;
    struct gs_dra_claim_write *dra; /* claim status written for it (loops/sched_dra.h) */
    size_t ndra;
};

static void write_nomination(struct gs_sched_loop *l, struct entry *e, const char *node);

static void binding_done(struct gs_sched_loop *l, struct pending_bind *p, struct gs_source_bind *b)
{
    struct entry *e = p->e;
    json_decref(p->status_devices);
    if (b->err) gs_sched_dra_undo(l->source, l->cache, p->dra, p->ndra); /* claims: sched_dra.h */
    else gs_sched_dra_done(p->dra, p->ndra);
    p->dra = NULL, p->ndra = 0;
    if (b->err == GS_EIO || b->err == GS_EBUSY || b->err == GS_ETIMEDOUT || b->err == GS_EFENCED) {
        /* Refused without a change (a 500, 429s past the client's retries, a
         * fenced write between a Lease renewal and the fence moving, store.h):
         * no event will come for the pod, so it is queued again. Had the
         * write landed after all, the next binding's 409 says so. */
        char key[GS__KEY_MAX];
        gs_meta_key(&e->obj->u.pod->meta, key, sizeof key);
        gs_cache_remove_pod(l->cache, key);
        gs_scheduler_delete_pod(l->scheds[e->sched], key);
        e->state = gs_scheduler_add_pod(l->scheds[e->sched], e->obj->u.pod) == 0 ? P_QUEUED : P_OTHER;
        gs_log(GS_LOG_INFO, "scheduler: binding not written, queued again", "pod", e->key, "error",
               gs_strerror(b->err), NULL);
        json_decref(b->out);
        return;
    }
    if (b->err) { /* the pod changed under us: forget the placement, the stream tells what happened */
        char key[GS__KEY_MAX];
        gs_meta_key(&e->obj->u.pod->meta, key, sizeof key);
        gs_cache_remove_pod(l->cache, key);
        e->state = P_DETACHED;
        e->rv = 0; /* accept whatever comes next */
        gs_log(GS_LOG_INFO,
               b->err == GS_EEXIST ? "scheduler: pod bound elsewhere meanwhile" : "scheduler: binding not written",
               "pod", e->key, "error", gs_strerror(b->err), NULL);
        json_decref(b->out);
        return;
    }
    e->state = P_BOUND;
    if (b->out) e->digest = doc_digest(b->out);
    else e->confirm = true; /* see confirms() */
    json_decref(b->out);
    if (b->rv) e->rv = b->rv;
    if (e->nominated && strcmp(e->nominated, p->node)) write_nomination(l, e, NULL); /* bound elsewhere */
    gs_log(GS_LOG_DEBUG, "scheduler: bound", "pod", e->key, "node", p->node, "devices", p->devices, NULL);
}

/* Leadership was lost with bindings assumed: those from pend[from] on are
 * not written, each pod is forgotten in the cache and queued again (a new leader's binding comes
 * back through the stream and replaces it). */
static void drop_bindings(struct gs_sched_loop *l, size_t from)
{
    for (size_t i = from; i < l->npend; i++) {
        struct entry *e = l->pend[i].e;
        const struct gs_pod *pod = e->obj->u.pod;
        char key[GS__KEY_MAX];
        gs_meta_key(&pod->meta, key, sizeof key);
        json_decref(l->pend[i].status_devices);
        gs_sched_dra_undo(l->source, l->cache, l->pend[i].dra, l->pend[i].ndra); /* claims: sched_dra.h */
        gs_cache_remove_pod(l->cache, key);
        gs_scheduler_delete_pod(l->scheds[e->sched], key);
        e->state = gs_scheduler_add_pod(l->scheds[e->sched], pod) == 0 ? P_QUEUED : P_OTHER;
    }
    pthread_mutex_lock(&l->mu);
    l->st.binds_dropped += l->npend - from;
    pthread_mutex_unlock(&l->mu);
    if (l->npend > from) gs_log(GS_LOG_WARN, "scheduler: no longer allowed to write, assumed bindings dropped", NULL);
    l->npend = from;
}

/*
 * Early chunks (kube source). A Kubernetes binding is a round trip per pod,
 * and a round waiting for 512 of them left the loop idle a third of the
 * time. So once BIND_CHUNK bindings are queued they go out on a helper
 * thread while the round goes on deciding; the results are taken only
 * where the round's bindings always were (flush_bindings), in order, so
 * every decision sees what it saw before: within a round no decision ever
 * knew how its predecessors' bindings went. Each chunk asks may_write
 * right before it is sent, as the whole batch did.
 */
struct bind_job {
    struct gs_source *src;
    struct gs_source_bind *b;
    size_t n;
    pthread_t th;
    atomic_bool done;
};

static void *bind_main(void *arg)
{
    struct bind_job *j = arg;
    gs_source_bind(j->src, j->b, j->n); /* a failed batch sets every item's err */
    atomic_store(&j->done, true);
    return NULL;
}

static void bind_prepare(struct gs_sched_loop *l, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        struct pending_bind *p = &l->pend[i];
        l->bann[i] = p->devices[0] ? json_pack("{s:s}", GS_ANN_DEVICES, p->devices) : NULL;
        l->bb[i] = (struct gs_source_bind){.key = p->e->key, .uid = p->e->obj->u.pod->meta.uid, .node = p->node,
                                           .annotations = l->bann[i], .status_devices = p->status_devices};
    }
}

static void bind_join(struct gs_sched_loop *l)
{
    if (!l->job) return;
    pthread_join(l->job->th, NULL);
    free(l->job);
    l->job = NULL;
}

/* Sends what is queued and unsent when no chunk is on its way. */
static void bind_early(struct gs_sched_loop *l)
{
    if (l->job && atomic_load(&l->job->done)) bind_join(l);
    if (l->job || gs_source_kind(l->source) != GS_SOURCE_KUBE || l->npend - l->bsent < BIND_CHUNK || !writable(l))
        return;
    struct bind_job *j = malloc(sizeof *j);
    if (!j) return; /* sent with the rest */
    bind_prepare(l, l->bsent, l->npend);
    *j = (struct bind_job){.src = l->source, .b = &l->bb[l->bsent], .n = l->npend - l->bsent};
    atomic_init(&j->done, false);
    if (pthread_create(&j->th, NULL, bind_main, j)) {
        gs_source_bind(j->src, j->b, j->n);
        free(j);
    } else {
        l->job = j;
    }
    l->bsent = l->npend;
}

static void flush_bindings(struct gs_sched_loop *l)
{
    bind_join(l);
    if (!l->npend) return;
    if (l->bsent < l->npend) {
        if (!writable(l)) drop_bindings(l, l->bsent); /* right before the write: a lost lease must not bind */
        else {
            bind_prepare(l, l->bsent, l->npend);
            gs_source_bind(l->source, &l->bb[l->bsent], l->npend - l->bsent); /* a failed batch sets every item's err */
        }
    }
    l->bsent = 0;
    if (!l->npend) return;
    struct gs_source_bind *b = l->bb;
    uint64_t ok = 0, conflicts = 0;
    for (size_t i = 0; i < l->npend; i++) {
        json_decref(l->bann[i]);
        ok += !b[i].err;
        conflicts += b[i].err == GS_EEXIST;
        binding_done(l, &l->pend[i], &b[i]);
    }
    pthread_mutex_lock(&l->mu);
    l->st.bound += ok;
    l->st.write_failures += l->npend - ok;
    l->st.bind_conflicts += conflicts;
    pthread_mutex_unlock(&l->mu);
    for (size_t i = 0; i < l->npend; i++) { /* events hook: after the counters, as kube-scheduler after binding */
        const struct gs_pod *pod = l->pend[i].e->obj->u.pod;
        const char *ns = pod->meta.namespace_ ? pod->meta.namespace_ : "default";
        if (!b[i].err)
            gs_event_record(&l->ev, GS_EVENT_POD(ns, pod->meta.name, pod->meta.uid), "Normal", "Scheduled",
                            "Binding", "Successfully assigned %s/%s to %s", ns, pod->meta.name, l->pend[i].node);
        const struct gs_pod *prev = i && !b[i - 1].err ? l->pend[i - 1].e->obj->u.pod : NULL; /* a gang: once a round */
        if (!b[i].err && pod->pod_group && !(prev && prev->pod_group && !strcmp(prev->pod_group, pod->pod_group) &&
                                             !strcmp(prev->meta.namespace_ ? prev->meta.namespace_ : "default", ns)))
            group_status(l, pod, true, NULL);
    }
    l->npend = 0;
}

static void queue_binding(struct gs_sched_loop *l, struct entry *e, const struct gs_cycle_result *c)
{
    struct gs_node_info *ni = gs_cache_node(l->cache, c->a.node);
    if (l->npend == CYCLES_PER_ROUND) flush_bindings(l); /* a round can overrun by a cycle per profile */
    /* The claims' status first (loops/sched_dra.h): a pod never runs without its devices. */
    char pkey[GS__KEY_MAX];
    gs_meta_key(&e->obj->u.pod->meta, pkey, sizeof pkey);
    struct gs_dra_claim_write *dra = NULL;
    size_t ndra = 0;
    if (gs_sched_dra_write(l->source, gs_scheduler_framework(l->scheds[e->sched]), l->cache, pkey, writable(l), &dra,
                           &ndra)) {
        gs_cache_remove_pod(l->cache, pkey);
        gs_scheduler_delete_pod(l->scheds[e->sched], pkey);
        e->state = gs_scheduler_add_pod(l->scheds[e->sched], e->obj->u.pod) == 0 ? P_QUEUED : P_OTHER;
        return;
    }
    struct pending_bind *p = &l->pend[l->npend++];
    p->dra = dra, p->ndra = ndra;
    p->e = e;
    p->node = ni->name;
    p->devices[0] = 0;
    if (c->a.gpu_mask) gs_devices_format(ni->node, c->a.gpu_mask, c->a.milli, p->devices, sizeof p->devices);
    p->status_devices = status_devices(ni->node, &c->a);
    bind_early(l);
}

/*--- Status writes (the status subresource) ---*/

struct cond_ctx {
    const char *uid;
    const char *reason, *msg;
    bool clear_nominated;   /* also drop status.nominatedNodeName */
};

static int unsched_fn(json_t *cur, json_t **out, void *arg)
{
    struct cond_ctx *c = arg;
    if (!cur) return GS_ENOENT;
    const char *uid = json_string_value(json_object_get(json_object_get(cur, "metadata"), "uid"));
    if (c->uid && (!uid || strcmp(uid, c->uid))) return GS_ENOENT;
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    gs__pod_set_condition(next, "PodScheduled", "False", c->reason, c->msg);
    if (c->clear_nominated) json_object_del(json_object_get(next, "status"), "nominatedNodeName");
    if (json_equal(next, cur)) {
        json_decref(next);
        return GS_STORE_UNCHANGED;
    }
    *out = next;
    return 0;
}

static void write_unschedulable(struct gs_sched_loop *l, struct entry *e, const char *msg)
{
    if (!writable(l)) return;
    const struct gs_pod *pod = e->obj->u.pod; /* every attempt: the recorder aggregates repeats */
    char full[2048];
    msg = gs_gpu_state_diagnosis(l->cache, &l->gpu_memo, pod, msg, full, sizeof full); /* + count-only GPU nodes */
    gs_event_record(&l->ev, GS_EVENT_POD(pod->meta.namespace_, pod->meta.name, pod->meta.uid), "Warning",
                    "FailedScheduling", "Scheduling", "%s", msg);
    /* Unschedulable again without preempting: the nomination is void (kube-scheduler clears it too). */
    bool clear = e->nominated && e != l->nominated_now;
    if (e->msg && !strcmp(e->msg, msg) && !clear) return;
    group_status(l, pod, false, msg);
    struct cond_ctx c = {pod->meta.uid, "Unschedulable", msg, clear};
    if (gs_source_mutate(l->source, e->key, "status", unsched_fn, &c, NULL, NULL) != 0) return;
    if (clear) {
        free(e->nominated);
        e->nominated = NULL;
    }
    free(e->msg);
    e->msg = strdup(msg);
    pthread_mutex_lock(&l->mu);
    l->st.unschedulable++;
    pthread_mutex_unlock(&l->mu);
}

/* PodScheduled=False, reason SchedulingGated, once per pod and only when
 * the stored pod does not say so already (kube-scheduler writes the same). */
static void write_gated(struct gs_sched_loop *l, struct entry *e)
{
    if (e->msg && !strcmp(e->msg, GATED_MSG)) return;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(e->obj->u.pod->doc, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        const char *r = json_string_value(json_object_get(c, "reason"));
        if (t && r && !strcmp(t, "PodScheduled") && !strcmp(r, "SchedulingGated")) {
            free(e->msg);
            e->msg = strdup(GATED_MSG);
            return;
        }
    }
    /* The leader writes it; a replica gaining the lease (or done loading) writes what is missing. */
    if (l->loading || !writable(l)) return;
    struct cond_ctx cc = {e->obj->u.pod->meta.uid, "SchedulingGated", GATED_MSG, false};
    if (gs_source_mutate(l->source, e->key, "status", unsched_fn, &cc, NULL, NULL) != 0) return;
    free(e->msg);
    e->msg = strdup(GATED_MSG);
}

struct nominate_ctx {
    const char *uid, *node; /* node NULL: clear */
};

static int nominate_fn(json_t *cur, json_t **out, void *arg)
{
    struct nominate_ctx *c = arg;
    if (!cur) return GS_ENOENT;
    const char *uid = json_string_value(json_object_get(json_object_get(cur, "metadata"), "uid"));
    if (c->uid && (!uid || strcmp(uid, c->uid))) return GS_ENOENT;
    json_t *st = json_object_get(cur, "status");
    const char *was = json_string_value(json_object_get(st, "nominatedNodeName"));
    if (c->node ? was && !strcmp(was, c->node) : !was) return GS_STORE_UNCHANGED;
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    if (!json_is_object(json_object_get(next, "status"))) json_object_set_new(next, "status", json_object());
    st = json_object_get(next, "status");
    if (c->node) json_object_set_new(st, "nominatedNodeName", json_string(c->node));
    else json_object_del(st, "nominatedNodeName");
    *out = next;
    return 0;
}

/* status.nominatedNodeName of the pod: node, or cleared (NULL). */
static void write_nomination(struct gs_sched_loop *l, struct entry *e, const char *node)
{
    if (!writable(l)) return;
    struct nominate_ctx c = {e->obj->u.pod->meta.uid, node};
    if (gs_source_mutate(l->source, e->key, "status", nominate_fn, &c, NULL, NULL) != 0) return;
    free(e->nominated);
    e->nominated = node ? strdup(node) : NULL;
    if (!node) return;
    pthread_mutex_lock(&l->mu);
    l->st.nominations++;
    pthread_mutex_unlock(&l->mu);
}

/*--- The thread ---*/

static struct entry *entry_of_pod(struct gs_sched_loop *l, const struct gs_pod *pod)
{
    char key[GS__KEY_MAX + 8];
    snprintf(key, sizeof key, "pods/%s/%s", pod->meta.namespace_ ? pod->meta.namespace_ : "default", pod->meta.name);
    return gs__strmap_get(&l->pods, key);
}

/*--- Driver hooks: gang members released at Permit, preemption ---*/

static void hook_bound(void *ctx, const struct gs_pod *pod, const struct gs_assignment *a)
{
    struct gs_sched_loop *l = ctx;
    struct entry *e = entry_of_pod(l, pod);
    if (!e || a->node < 0) return;
    struct gs_cycle_result c = {.pod = pod, .code = GS_SUCCESS, .a = *a};
    queue_binding(l, e, &c); /* written with the round's other bindings */
}

static void hook_rejected(void *ctx, const struct gs_pod *pod, const char *reason)
{
    struct gs_sched_loop *l = ctx;
    struct entry *e = entry_of_pod(l, pod);
    if (e && reason && *reason) write_unschedulable(l, e, reason);
}

/* Only noted here: the driver is mid-cycle; after_cycle() writes the eviction. */
static void hook_evicted(void *ctx, const struct gs_pod *victim, const struct gs_pod *preemptor,
                         const struct gs_assignment *a)
{
    struct gs_sched_loop *l = ctx;
    struct entry *e = entry_of_pod(l, victim);
    struct victim *v = realloc(l->victims, (l->nvictims + 1) * sizeof *v);
    if (!e || !v) return;
    l->victims = v;
    char who[GS__KEY_MAX];
    gs_meta_key(&preemptor->meta, who, sizeof who);
    struct gs_node_info *ni = a && a->node >= 0 ? gs_cache_node(l->cache, a->node) : NULL;
    v[l->nvictims] = (struct victim){strdup(e->key), strdup(who), ni ? strdup(ni->name) : NULL, l->cur_sched};
    if (v[l->nvictims].key && v[l->nvictims].preemptor) l->nvictims++;
    else {
        free(v[l->nvictims].key);
        free(v[l->nvictims].preemptor);
        free(v[l->nvictims].node);
    }
}

/* Writes one eviction back through the source (local: Failed or re-created;
 * kube: DisruptionTarget, then a delete with the uid as precondition) and
 * the Event. false: not allowed to write any more (may_write), nothing done. */
static bool write_eviction(struct gs_sched_loop *l, struct entry *e, const char *preemptor, bool scheduler)
{
    if (!writable(l)) return false;
    const struct gs_pod *pod = e->obj->u.pod;
    /* The Event on the victim, as kube-scheduler records one (admission records its own). */
    if (gs_source_preempt(l->source, e->key, pod->meta.uid, preemptor, NULL) == 0 && scheduler)
        gs_event_record(&l->ev, GS_EVENT_POD(pod->meta.namespace_, pod->meta.name, pod->meta.uid), "Normal",
                        "Preempted", "Preempting", "Preempted by pod %s", preemptor);
    gs_log(GS_LOG_INFO, "scheduler: preempted", "pod", e->key, "by", preemptor, NULL);
    return true;
}

/* Evictions and nominations of the cycle that just ran: victims are written
 * back; their preemptor gets status.nominatedNodeName (the first victim's
 * node), as kube-scheduler's PostFilter sets it. */
static void after_cycle(struct gs_sched_loop *l)
{
    l->nominated_now = NULL;
    for (size_t i = 0; i < l->nvictims; i++) {
        struct victim *v = &l->victims[i];
        struct entry *e = gs__strmap_get(&l->pods, v->key);
        if (e) {
            const struct gs_pod *pod = e->obj->u.pod;
            bool written = write_eviction(l, e, v->preemptor, true);
            /* The driver queued it again; the store's next version decides its fate. */
            char key[GS__KEY_MAX];
            gs_meta_key(&pod->meta, key, sizeof key);
            gs_scheduler_delete_pod(l->scheds[v->sched], key);
            e->state = P_OTHER;
            e->rv = 0;
            if (!written) e->state = account_bound(l, e); /* leadership lost mid-round: it still runs there */
        }
        char pkey[GS__KEY_MAX + 8];
        snprintf(pkey, sizeof pkey, "pods/%s", v->preemptor);
        struct entry *p = v->node ? gs__strmap_get(&l->pods, pkey) : NULL;
        if (p && p != l->nominated_now) {
            l->nominated_now = p; /* not cleared by this same cycle's Unschedulable write */
            if (!p->nominated || strcmp(p->nominated, v->node)) write_nomination(l, p, v->node);
        }
        free(v->key);
        free(v->preemptor);
        free(v->node);
    }
    l->nvictims = 0;
}

/*--- Admission hooks (admission_loop.h) ---*/

/* Admitted: the pod enters its scheduler's queue. */
static void adm_admitted(void *ctx, const char *key)
{
    struct gs_sched_loop *l = ctx;
    struct entry *e = gs__strmap_get(&l->pods, key);
    if (!e || e->state != P_ADMIT) return;
    e->state = gs_scheduler_add_pod(l->scheds[e->sched], e->obj->u.pod) == 0 ? P_QUEUED : P_OTHER;
}

/* Evicted by admission's reclaim or preemption: out of the scheduler, then
 * written back like the scheduler's own preemption. */
static void adm_evict(void *ctx, const char *key, const char *by)
{
    struct gs_sched_loop *l = ctx;
    struct entry *e = gs__strmap_get(&l->pods, key);
    if (!e) return;
    char pkey[GS__KEY_MAX];
    gs_meta_key(&e->obj->u.pod->meta, pkey, sizeof pkey);
    if (e->state == P_QUEUED) gs_scheduler_delete_pod(l->scheds[e->sched], pkey);
    else if (e->state == P_BOUND) { /* admission took it out of the cache already, during its cycle */
        gs_cache_remove_pod(l->cache, pkey);
        notify_all(l, GS_EV_POD_DELETED);
    }
    bool written = write_eviction(l, e, by, false);
    e->state = P_OTHER; /* the store's next version decides its fate */
    e->rv = 0;
    if (!written) e->state = account_bound(l, e); /* leadership lost mid-round: it still runs there */
}

/* Runs up to CYCLES_PER_ROUND cycles over the schedulers; returns how many ran. */
static int schedule_round(struct gs_sched_loop *l)
{
    int ran = 0;
    bool any = true;
    if (gs_adm_loop_cycle(l->adm) > 0) ran++; /* admission first: what it admits is scheduled now */
    while (any && ran < CYCLES_PER_ROUND && !atomic_load(&l->stop)) {
        any = false;
        for (size_t i = 0; i < l->nsched; i++) {
            struct gs_cycle_result c;
            l->cur_sched = i;
            int64_t t0 = gs_clock_now(&l->clock);
            int rc = gs_scheduler_run_one(l->scheds[i], &c);
            after_cycle(l);
            if (rc <= 0) continue;
            if (l->cycle_latency) gs_hist_observe(l->cycle_latency, (double)(gs_clock_now(&l->clock) - t0) / 1e9);
            any = true;
            ran++;
            struct entry *e = entry_of_pod(l, c.pod);
            if (!e) continue;
            if (c.code == GS_SUCCESS) queue_binding(l, e, &c);
            else if (c.code != GS_WAIT && c.reason) write_unschedulable(l, e, c.reason);
            l->nominated_now = NULL;
        }
    }
    uint64_t qa = 0, qb = 0, qu = 0; /* queue depth for /metrics */
    for (size_t i = 0; i < l->nsched; i++) {
        const struct gs_sched_queue *q = gs_scheduler_queue(l->scheds[i]);
        qa += gs_sched_queue_active_len(q), qb += gs_sched_queue_backoff_len(q);
        qu += gs_sched_queue_unschedulable_len(q);
    }
    flush_bindings(l);
    pthread_mutex_lock(&l->mu);
    l->st.attempts += (uint64_t)ran;
    l->st.queue_active = qa, l->st.queue_backoff = qb, l->st.queue_unschedulable = qu;
    pthread_mutex_unlock(&l->mu);
    return ran;
}

/*--- Explain ---*/

/* The report for one pod, from the live cache: a bound pod says where it
 * runs; a pending gang member explains its whole group. */
static int explain_text(struct gs_sched_loop *l, const char *ns, const char *name, FILE *f)
{
    char key[GS__KEY_MAX + 8];
    snprintf(key, sizeof key, "pods/%s/%s", ns, name);
    struct entry *e = gs__strmap_get(&l->pods, key);
    if (!e) return GS_ENOENT;
    const struct gs_pod *pod = e->obj->u.pod;
    if (e->state == P_BOUND || e->state == P_DONE || e->state == P_DETACHED) {
        if (e->state == P_DONE) fprintf(f, "pod %s/%s has finished\n", ns, name);
        else fprintf(f, "pod %s/%s is bound to %s\n", ns, name, pod->node_name ? pod->node_name : "?");
        return 0;
    }
    if (e->state == P_ADMIT) return gs_adm_loop_explain(l->adm, e->key, f); /* waiting for admission */
    if (e->state == P_GATED) {
        fprintf(f, "pod %s/%s is not queued: %s (spec.schedulingGates:", ns, name, GATED_MSG);
        size_t i;
        json_t *g;
        json_array_foreach(json_object_get(json_object_get(pod->doc, "spec"), "schedulingGates"), i, g) {
            const char *gate = json_string_value(json_object_get(g, "name"));
            fprintf(f, " %s", gate ? gate : "?");
        }
        fprintf(f, ")\n");
        return 0;
    }
    if (e->state != P_QUEUED) {
        fprintf(f, "pod %s/%s is not handled by this scheduler (schedulerName %s)\n", ns, name,
                pod->scheduler_name ? pod->scheduler_name : GS_DEFAULT_SCHEDULER);
        return 0;
    }
    struct gs_framework *fw = gs_scheduler_framework(l->scheds[e->sched]);
    if (!pod->pod_group) return gs_explain_pod(fw, l->cache, pod, f);
    const struct gs_pod **members = calloc(l->pods.cap ? l->pods.cap : 1, sizeof *members);
    if (!members) return GS_ENOMEM;
    size_t n = 0;
    for (size_t s = 0; s < l->pods.cap; s++) {
        struct entry *m = l->pods.slots[s].key ? l->pods.slots[s].val : NULL;
        const struct gs_pod *p = m && m->state == P_QUEUED ? m->obj->u.pod : NULL;
        if (p && p->pod_group && !strcmp(p->pod_group, pod->pod_group) &&
            !strcmp(p->meta.namespace_ ? p->meta.namespace_ : "default", ns))
            members[n++] = p;
    }
    char gkey[GS__KEY_MAX];
    snprintf(gkey, sizeof gkey, "%s/%s", ns, pod->pod_group);
    int err = gs_explain_group(fw, l->cache, gkey, members, n, f);
    free(members);
    return err;
}

/* Answers a waiting explain request, if any (loop thread). */
static void serve_explain(struct gs_sched_loop *l)
{
    pthread_mutex_lock(&l->mu);
    struct explain_req *q = l->req;
    l->req = NULL;
    pthread_mutex_unlock(&l->mu);
    if (!q) return;
    if (q->fn) q->fn(l->cache, q->arg); /* gs_sched_loop_inspect */
    size_t len = 0;
    char *text = NULL;
    FILE *f = q->fn ? NULL : open_memstream(&text, &len);
    int err = q->fn ? 0 : f ? explain_text(l, q->ns, q->name, f) : GS_ENOMEM;
    if (f) fclose(f);
    pthread_mutex_lock(&l->mu);
    q->err = err;
    q->text = err ? NULL : text;
    if (err) free(text);
    q->done = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

static int ask(struct gs_sched_loop *l, struct explain_req *req);

int gs_sched_loop_explain(struct gs_sched_loop *l, const char *ns, const char *name, char **text)
{
    *text = NULL;
    struct explain_req q = {ns, name, NULL, 0, false, NULL, NULL};
    int err = ask(l, &q);
    if (!q.done) return err;
    *text = q.text;
    return q.err;
}

int gs_sched_loop_inspect(struct gs_sched_loop *l, void (*fn)(struct gs_cache *c, void *arg), void *arg)
{
    struct explain_req q = {NULL, NULL, NULL, 0, false, fn, arg};
    return ask(l, &q);
}

/* Hands q to the loop thread and waits for its answer. */
static int ask(struct gs_sched_loop *l, struct explain_req *q)
{
    pthread_mutex_lock(&l->mu);
    while (l->req && !atomic_load(&l->stop)) pthread_cond_wait(&l->cv, &l->mu); /* one at a time */
    if (atomic_load(&l->stop)) {
        pthread_mutex_unlock(&l->mu);
        return GS_ESTATE;
    }
    l->req = q;
    while (!q->done && !atomic_load(&l->stop)) pthread_cond_wait(&l->cv, &l->mu);
    if (!q->done) l->req = NULL;
    pthread_mutex_unlock(&l->mu);
    return q->done ? q->err : GS_ESTATE;
}

/* Applies what the stream has (waiting up to wait_ms for the first event). false: must reload. */
static bool follow(struct gs_sched_loop *l, int wait_ms)
{
    struct gs_store_event *evs = NULL;
    size_t n = 0;
    int err = gs_source_events(l->source, &l->rv, NULL, wait_ms, &l->stop, &evs, &n);
    if (err == GS_ERANGE) return false;
    for (size_t i = 0; i < n; i++) {
        apply_event(l, &evs[i]);
        flush_bindings(l); /* gang members an event released: written before the next event can touch them */
    }
    gs_store_events_free(evs, n);
    return true;
}

/* Leadership gained, or a load done: what a leader writes for pods it only
 * followed or listed. */
static void start_leading(struct gs_sched_loop *l)
{
    for (size_t s = 0; s < l->pods.cap; s++) {
        struct entry *e = l->pods.slots[s].key ? l->pods.slots[s].val : NULL;
        if (e && e->state == P_GATED) write_gated(l, e);
    }
}

static void *loop_main(void *arg)
{
    struct gs_sched_loop *l = arg;
    load(l);
    while (!atomic_load(&l->stop)) {
        serve_explain(l);
        bool lead = writable(l);
        if (lead && !l->leading) start_leading(l);
        l->leading = lead;
        int ran = lead ? schedule_round(l) : 0; /* a follower keeps its cache current, no more */
        if (follow(l, ran ? 0 : IDLE_WAIT_MS)) continue;
        gs_log(GS_LOG_WARN, "scheduler: fell behind the change stream, reloading", NULL);
        drop_state(l);
        struct gs_diags d = {0};
        int err = build(l, &d);
        gs_diags_free(&d);
        if (err || load(l)) break;
    }
    return NULL;
}

/* A kind this build does not serve cannot be informed. */
static bool served(const char *prefix)
{
    const char *ns, *name;
    size_t nsl, namel;
    return gs_informer_resource_of_key(prefix, &ns, &nsl, &name, &namel) != NULL;
}

size_t gs_sched_loop_prefixes(const char **out, size_t cap)
{
    size_t n = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0] && n + 1 < cap; k++) {
        /* once each (a kind may have several readers), and only what the API serves */
        bool dup = false;
        for (size_t j = 0; j < n && !dup; j++) dup = !strcmp(out[j], kinds[k].prefix);
        if (!dup && served(kinds[k].prefix)) out[n++] = kinds[k].prefix;
    }
    if (cap) out[n] = NULL;
    return n;
}

int gs_sched_loop_start(const struct gs_sched_loop_opts *o, struct gs_sched_loop **out, struct gs_diags *d)
{
    *out = NULL;
    struct gs_sched_loop *l = calloc(1, sizeof *l);
    if (!l) return GS_ENOMEM;
    l->source = o->source;
    l->may_write = o->may_write;
    l->may_write_ctx = o->may_write_ctx;
    l->seed = o->seed;
    l->cycle_latency = o->cycle_latency;
    l->ev = (struct gs_event_source){o->events, o->component ? o->component : "default-scheduler", NULL, 0};
    if (o->admission) l->adm_opts = *o->admission, l->has_adm_opts = true; /* server options */
    gs_clock_init_real(&l->clock);
    gs__strmap_init(&l->pods);
    gs__strmap_init(&l->nodes);
    gs__strmap_init(&l->groups);
    gs__strmap_init(&l->nrts);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->pend = calloc(CYCLES_PER_ROUND, sizeof *l->pend);
    l->bb = calloc(CYCLES_PER_ROUND, sizeof *l->bb);
    l->bann = calloc(CYCLES_PER_ROUND, sizeof *l->bann);
    int err = l->pend && l->bb && l->bann ? 0 : GS_ENOMEM;
    if (err || o->config) l->cfg = o->config;
    else if (!(err = gs_sched_config_gpusched(&l->own))) l->cfg = &l->own;
    if (!err) err = build(l, d);
    if (!err && pthread_create(&l->th, NULL, loop_main, l)) err = GS_ENOMEM;
    if (err) {
        drop_state(l);
        gs_sched_config_free(&l->own);
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->cv);
        free(l->pend);
        free(l->bb);
        free(l->bann);
        free(l);
        return err;
    }
    *out = l;
    return 0;
}

void gs_sched_loop_stop(struct gs_sched_loop *l)
{
    if (!l) return;
    atomic_store(&l->stop, true);
    pthread_mutex_lock(&l->mu);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    gs_source_interrupt(l->source);
    pthread_join(l->th, NULL);
    drop_state(l);
    free(l->victims);
    gs_sched_config_free(&l->own);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l->pend);
    free(l->bb);
    free(l->bann);
    free(l);
}

void gs_sched_loop_stats(struct gs_sched_loop *l, struct gs_sched_loop_stats *out)
{
    pthread_mutex_lock(&l->mu);
    *out = l->st;
    pthread_mutex_unlock(&l->mu);
}

void gs_sched_loop_metrics(struct gs_sched_loop *l, struct gs_hist *cycle_hist, struct gs_mbuf *b)
{
    struct gs_sched_loop_stats st;
    gs_sched_loop_stats(l, &st);
    gs_mbuf_help(b, "gpusched_scheduler_queue_pods", "gauge", "Pods waiting in the scheduling queue, by sub-queue.");
    gs_mbuf_printf(b, "gpusched_scheduler_queue_pods{queue=\"active\"} %llu\n"
                      "gpusched_scheduler_queue_pods{queue=\"backoff\"} %llu\n"
                      "gpusched_scheduler_queue_pods{queue=\"unschedulable\"} %llu\n",
                   (unsigned long long)st.queue_active, (unsigned long long)st.queue_backoff,
                   (unsigned long long)st.queue_unschedulable);
    gs_mbuf_help(b, "gpusched_scheduler_schedule_attempts_total", "counter", "Scheduling cycles, by result.");
    gs_mbuf_printf(b, "gpusched_scheduler_schedule_attempts_total{result=\"scheduled\"} %llu\n"
                      "gpusched_scheduler_schedule_attempts_total{result=\"unschedulable\"} %llu\n"
                      "gpusched_scheduler_schedule_attempts_total{result=\"any\"} %llu\n",
                   (unsigned long long)st.bound, (unsigned long long)st.unschedulable, (unsigned long long)st.attempts);
    gs_mbuf_help(b, "gpusched_scheduler_binding_write_failures_total", "counter",
                 "Bindings refused by the store or the API server (the pod changed or was bound meanwhile).");
    gs_mbuf_printf(b, "gpusched_scheduler_binding_write_failures_total %llu\n", (unsigned long long)st.write_failures);
    if (cycle_hist)
        gs_hist_write(cycle_hist, b, "gpusched_scheduler_scheduling_attempt_duration_seconds",
                      "Duration of one scheduling cycle (queue pop to decision).");
}
