/*
 * admission_loop.c - admission in front of the server's scheduling queue;
 * see admission_loop.h.
 *
 * Each labelled pod has a record here (keyed by store key) that outlives
 * rebuilds of the admission: the admission's workload id, whether the pod
 * was handed to the scheduler, and the QuotaReserved condition last
 * written. Workload keys given to the admission are "ns/name", with a
 * suffix when a finished workload of that name is still in its table (a pod
 * re-created under the same name).
 */
#include "control/admission_loop.h"

#include "control/api.h"
#include "core/log.h"
#include "sched/admission/admission.h"
#include "sched/strmap.h"

#include <stdlib.h>
#include <string.h>

#define TICK_NS (1000LL * 1000 * 1000) /* retry everyone this often: capacity changes we do not see */
#define REBUILD_FINISHED 4096          /* finished workloads kept before the table is compacted */

const char *const gs_adm_loop_prefixes[] = {"resourceflavors.kueue.x-k8s.io/", "clusterqueues.kueue.x-k8s.io/",
                                            "localqueues.kueue.x-k8s.io/", "queues.scheduling.gpusched.io/", NULL};

struct wl {
    char *key;                 /* store key; the map's key */
    const struct gs_pod *pod;  /* borrowed from the scheduler loop's entry */
    int32_t id;                /* in the current admission, -1 when not submitted */
    bool admitted;             /* handed to the scheduler (or running) */
    uint64_t seq;              /* arrival order, kept over rebuilds */
    char *cond;                /* condition last written: "status\nreason\nmessage" */
};

struct qdoc {
    char *key; /* the map's key */
    json_t *doc;
    int64_t rv;
};

struct gs_adm_loop {
    struct gs_adm_loop_opts o;
    struct gs__strmap wls, queues;
    struct gs_queue_tree tree;
    bool tree_ok;
    char tree_err[256];
    struct gs_admission *adm;
    struct wl **by_id;         /* admission id -> record (NULL once gone) */
    size_t nby, capby;
    size_t finished;
    uint64_t seq, suffix;
    bool dirty, changed;
    int64_t last_ns;
    char **evicted;            /* store keys evicted during a cycle */
    size_t nevicted;
};

/*--- Records ---*/

static void wl_free(struct wl *w)
{
    if (!w) return;
    free(w->key);
    free(w->cond);
    free(w);
}

bool gs_adm_loop_wants(const struct gs_pod *pod) { return pod->queue_name && *pod->queue_name; }

bool gs_adm_loop_is_queue_key(const char *key)
{
    for (size_t i = 0; gs_adm_loop_prefixes[i]; i++)
        if (!strncmp(key, gs_adm_loop_prefixes[i], strlen(gs_adm_loop_prefixes[i]))) return true;
    return false;
}

static int track_id(struct gs_adm_loop *a, int32_t id, struct wl *w)
{
    if ((size_t)id >= a->capby) {
        size_t cap = a->capby ? 2 * a->capby : 64;
        while (cap <= (size_t)id) cap *= 2;
        struct wl **v = realloc(a->by_id, cap * sizeof *v);
        if (!v) return GS_ENOMEM;
        memset(v + a->capby, 0, (cap - a->capby) * sizeof *v);
        a->by_id = v;
        a->capby = cap;
    }
    a->by_id[id] = w;
    if ((size_t)id >= a->nby) a->nby = (size_t)id + 1;
    return 0;
}

/* Submits w to the current admission; running: restored as admitted. */
static void submit(struct gs_adm_loop *a, struct wl *w, bool running)
{
    w->id = -1;
    if (!a->adm) return;
    char key[600];
    gs_meta_key(&w->pod->meta, key, sizeof key);
    if (gs_admission_find(a->adm, key) >= 0) /* a finished namesake */
        snprintf(key + strlen(key), sizeof key - strlen(key), "#%llu", (unsigned long long)++a->suffix);
    const struct gs_pod *pods[1] = {w->pod};
    struct gs_workload_spec s = {.key = key, .namespace_ = w->pod->meta.namespace_, .queue = w->pod->queue_name,
                                 .priority = w->pod->priority, .pods = pods, .npods = 1};
    int id = gs_admission_submit(a->adm, &s);
    if (id < 0 || track_id(a, id, w)) return;
    w->id = id;
    if (running && gs_admission_restore(a->adm, id) == 0) w->admitted = true;
}

/*--- Queue objects and the tree ---*/

void gs_adm_loop_queue_event(struct gs_adm_loop *a, const char *key, const json_t *doc, int64_t rv)
{
    struct qdoc *q = gs__strmap_get(&a->queues, key);
    if (q && rv <= q->rv) return;
    if (!doc) {
        if (!q) return;
        gs__strmap_del(&a->queues, key);
        json_decref(q->doc);
        free(q->key);
        free(q);
    } else if (q) {
        json_decref(q->doc);
        q->doc = json_deep_copy(doc);
        q->rv = rv;
    } else {
        q = calloc(1, sizeof *q);
        if (!q || !(q->key = strdup(key)) || gs__strmap_put(&a->queues, q->key, q)) {
            if (q) free(q->key);
            free(q);
            return;
        }
        q->doc = json_deep_copy(doc);
        q->rv = rv;
    }
    a->dirty = true;
}

static void build_tree(struct gs_adm_loop *a)
{
    gs_queue_tree_free(&a->tree);
    gs_queue_tree_init(&a->tree);
    struct gs_diags d = {0};
    int rc = 0;
    for (size_t s = 0; !rc && s < a->queues.cap; s++) {
        struct qdoc *q = a->queues.slots[s].key ? a->queues.slots[s].val : NULL;
        struct gs_object *o = NULL;
        if (!q || !q->doc) continue;
        rc = gs_object_decode(q->doc, &o, &d);
        if (!rc) rc = gs_queue_tree_add_object(&a->tree, o, &d);
        gs_object_free(o);
    }
    if (!rc) rc = gs_queue_tree_finalize(&a->tree, &d);
    /* Volcano-style queues share the cluster's capacity. */
    const char *res[] = {GS_RES_GPU, GS_RES_CPU, GS_RES_MEMORY};
    int64_t total[3] = {gs_cache_gpu_count(a->o.cache) * GS_GPU_MILLI, 0, 0};
    for (int32_t i = 0; i < gs_cache_node_count(a->o.cache); i++) {
        const struct gs_node_info *n = gs_cache_node(a->o.cache, i);
        total[1] += n->cpu_alloc;
        total[2] += n->mem_alloc * 1000;
    }
    for (int r = 0; !rc && r < 3; r++) rc = gs_queue_tree_set_capacity(&a->tree, res[r], total[r]);
    a->tree_ok = !rc;
    snprintf(a->tree_err, sizeof a->tree_err, "queue configuration rejected: %s",
             d.n ? d.v[0].msg : gs_strerror(rc));
    if (rc) gs_log(GS_LOG_WARN, "admission: queue configuration rejected", "error", a->tree_err, NULL);
    gs_diags_free(&d);
}

static void evicted(void *ctx, const struct gs_pod *pod);

static int cmp_seq(const void *x, const void *y)
{
    const struct wl *p = *(struct wl *const *)x, *q = *(struct wl *const *)y;
    return p->seq < q->seq ? -1 : p->seq > q->seq;
}

/* A fresh tree and admission; live workloads submitted again in arrival order. */
static int rebuild(struct gs_adm_loop *a)
{
    gs_admission_free(a->adm);
    a->adm = NULL;
    a->nby = a->finished = 0;
    a->dirty = false;
    build_tree(a);
    struct wl **v = calloc(a->wls.n ? a->wls.n : 1, sizeof *v);
    if (!v) return GS_ENOMEM;
    size_t n = 0;
    for (size_t s = 0; s < a->wls.cap; s++)
        if (a->wls.slots[s].key) v[n++] = a->wls.slots[s].val;
    qsort(v, n, sizeof *v, cmp_seq);
    if (a->tree_ok) {
        struct gs_diags d = {0};
        struct gs_admission_opts ao = {.profile = a->o.profile, .evict = evicted, .ctx = a};
        if (gs_admission_new(&a->tree, a->o.cache, a->o.clock, &ao, &a->adm, &d)) a->adm = NULL;
        gs_diags_free(&d);
    }
    for (size_t i = 0; i < n; i++) {
        bool running = v[i]->admitted;
        v[i]->admitted = false;
        submit(a, v[i], running);
        if (!a->adm) v[i]->admitted = running;
    }
    free(v);
    a->changed = true;
    return 0;
}

/*--- Pods ---*/

bool gs_adm_loop_pod_add(struct gs_adm_loop *a, const char *key, const struct gs_pod *pod)
{
    struct wl *w = gs__strmap_get(&a->wls, key);
    if (w) return !w->admitted;
    if (!(w = calloc(1, sizeof *w)) || !(w->key = strdup(key)) || gs__strmap_put(&a->wls, w->key, w)) {
        wl_free(w);
        return false; /* no memory: scheduled without admission rather than lost */
    }
    w->pod = pod;
    w->id = -1;
    w->seq = ++a->seq;
    if (!a->dirty) submit(a, w, false);
    a->changed = true;
    return true;
}

void gs_adm_loop_pod_running(struct gs_adm_loop *a, const char *key, const struct gs_pod *pod)
{
    if (gs__strmap_get(&a->wls, key)) return;
    struct wl *w = calloc(1, sizeof *w);
    if (!w || !(w->key = strdup(key)) || gs__strmap_put(&a->wls, w->key, w)) {
        wl_free(w);
        return;
    }
    w->pod = pod;
    w->id = -1;
    w->seq = ++a->seq;
    w->admitted = true;
    if (!a->dirty) submit(a, w, true);
}

void gs_adm_loop_pod_gone(struct gs_adm_loop *a, const char *key)
{
    struct wl *w = a ? gs__strmap_get(&a->wls, key) : NULL;
    if (!w) return;
    if (a->adm && w->id >= 0) {
        gs_admission_finish(a->adm, w->id);
        a->by_id[w->id] = NULL;
        a->finished++;
    }
    gs__strmap_del(&a->wls, key);
    wl_free(w);
    a->changed = true;
}

/* Admission's evict callback, during a cycle: noted, carried out after it. */
static void evicted(void *ctx, const struct gs_pod *pod)
{
    struct gs_adm_loop *a = ctx;
    char key[600];
    snprintf(key, sizeof key, "pods/%s/%s", pod->meta.namespace_ ? pod->meta.namespace_ : "default", pod->meta.name);
    char **v = realloc(a->evicted, (a->nevicted + 1) * sizeof *v);
    if (!v) return;
    a->evicted = v;
    if ((v[a->nevicted] = strdup(key))) a->nevicted++;
}

/*--- Conditions ---*/

struct cond_ctx {
    const char *uid, *status, *reason, *msg;
};

static int cond_fn(json_t *cur, json_t **out, void *arg)
{
    struct cond_ctx *c = arg;
    if (!cur) return GS_ENOENT;
    const char *uid = json_string_value(json_object_get(json_object_get(cur, "metadata"), "uid"));
    if (c->uid && (!uid || strcmp(uid, c->uid))) return GS_ENOENT;
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    gs__pod_set_condition(next, "QuotaReserved", c->status, c->reason, c->msg);
    if (json_equal(next, cur)) {
        json_decref(next);
        return GS_STORE_UNCHANGED;
    }
    *out = next;
    return 0;
}

static void write_cond(struct gs_adm_loop *a, struct wl *w, const char *status, const char *reason, const char *msg)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s\n%s\n%s", status, reason ? reason : "", msg ? msg : "");
    if (w->cond && !strcmp(w->cond, buf)) return;
    struct cond_ctx c = {w->pod->meta.uid, status, reason, msg};
    int rc = gs_store_mutate(a->o.store, w->key, cond_fn, &c, NULL, NULL);
    if (rc && rc != GS_STORE_UNCHANGED) return;
    free(w->cond);
    w->cond = strdup(buf);
}

/* Why w still waits: reason and message for QuotaReserved=False. */
static void pending_why(struct gs_adm_loop *a, const struct wl *w, const char **reason, char *msg, size_t len)
{
    const char *ns = w->pod->meta.namespace_ ? w->pod->meta.namespace_ : "default";
    const struct gs_workload *x = a->adm && w->id >= 0 ? gs_admission_workload(a->adm, w->id) : NULL;
    if (!a->tree_ok) {
        *reason = "QueueConfigInvalid";
        snprintf(msg, len, "%s", a->tree_err);
    } else if (!x) {
        *reason = "UnknownQueue";
        snprintf(msg, len, "LocalQueue %s not found in namespace %s (nor a Queue of that name)", w->pod->queue_name, ns);
    } else {
        *reason = x->state == GS_WL_INADMISSIBLE ? "Inadmissible" : "Pending";
        snprintf(msg, len, "%s", x->reason[0] ? x->reason : "waiting for admission");
    }
}

static void write_conditions(struct gs_adm_loop *a)
{
    for (size_t s = 0; s < a->wls.cap; s++) {
        struct wl *w = a->wls.slots[s].key ? a->wls.slots[s].val : NULL;
        if (!w || w->admitted) continue;
        const char *reason;
        char msg[256];
        pending_why(a, w, &reason, msg, sizeof msg);
        write_cond(a, w, "False", reason, msg);
    }
}

/*--- The cycle ---*/

static void carry_out_evictions(struct gs_adm_loop *a)
{
    for (size_t i = 0; i < a->nevicted; i++) {
        struct wl *w = gs__strmap_get(&a->wls, a->evicted[i]);
        const struct gs_workload *x = w && a->adm && w->id >= 0 ? gs_admission_workload(a->adm, w->id) : NULL;
        const char *by = x ? strstr(x->reason, " of ") : NULL;
        if (w) w->admitted = false;
        if (a->o.evict) a->o.evict(a->o.ctx, a->evicted[i], by ? by + 4 : "admission");
        free(a->evicted[i]);
    }
    a->nevicted = 0;
}

int gs_adm_loop_cycle(struct gs_adm_loop *a)
{
    int64_t now = gs_clock_now(a->o.clock);
    if (a->adm && a->finished > REBUILD_FINISHED && a->finished > 2 * a->wls.n) a->dirty = true;
    if (a->dirty) {
        int rc = rebuild(a);
        if (rc) return rc;
    }
    bool tick = now - a->last_ns >= TICK_NS;
    if (!a->changed && !tick) return 0;
    a->last_ns = now;
    a->changed = false;
    int admitted = 0;
    if (a->adm) {
        if (tick) gs_admission_capacity_changed(a->adm);
        struct gs_admission_result r = {0};
        int rc = gs_admission_cycle(a->adm, &r);
        carry_out_evictions(a);
        if (rc) return rc;
        for (size_t i = 0; i < r.nadmitted; i++) {
            struct wl *w = (size_t)r.admitted[i] < a->nby ? a->by_id[r.admitted[i]] : NULL;
            if (!w) continue;
            w->admitted = true;
            admitted++;
            const struct gs_workload *x = gs_admission_workload(a->adm, w->id);
            char msg[256];
            snprintf(msg, sizeof msg, "quota reserved in %s", gs_admission_tree(a->adm)->nodes[x->queue].name);
            write_cond(a, w, "True", "QuotaReserved", msg);
            if (a->o.admitted) a->o.admitted(a->o.ctx, w->key);
        }
    }
    write_conditions(a);
    return admitted;
}

size_t gs_adm_loop_pending(const struct gs_adm_loop *a)
{
    size_t n = 0;
    for (size_t s = 0; s < a->wls.cap; s++) {
        const struct wl *w = a->wls.slots[s].key ? a->wls.slots[s].val : NULL;
        n += w && !w->admitted;
    }
    return n;
}

int gs_adm_loop_explain(struct gs_adm_loop *a, const char *key, FILE *f)
{
    struct wl *w = gs__strmap_get(&a->wls, key);
    if (!w || w->admitted) return GS_ENOENT;
    const char *reason;
    char msg[256];
    pending_why(a, w, &reason, msg, sizeof msg);
    fprintf(f, "pod %s is waiting for admission (queue %s): %s: %s\n", key + 5, w->pod->queue_name, reason, msg);
    const struct gs_workload *x = a->adm && w->id >= 0 ? gs_admission_workload(a->adm, w->id) : NULL;
    if (!x || x->state != GS_WL_PENDING) return 0;
    int64_t start = gs_admission_estimate_start(a->adm, w->id), now = gs_clock_now(a->o.clock);
    fprintf(f, "  ClusterQueue/Queue: %s\n  position in line: %d\n", gs_admission_tree(a->adm)->nodes[x->queue].name,
            gs_admission_position(a->adm, w->id));
    if (start < 0) fprintf(f, "  estimated start: unknown (running workloads have no estimated end)\n");
    else fprintf(f, "  estimated start: in %.0f s\n", (double)(start > now ? start - now : 0) / GS_NS_PER_SEC);
    return 0;
}

/*--- Life cycle ---*/

int gs_adm_loop_new(const struct gs_adm_loop_opts *o, struct gs_adm_loop **out)
{
    struct gs_adm_loop *a = calloc(1, sizeof *a);
    if (!a) return GS_ENOMEM;
    a->o = *o;
    gs__strmap_init(&a->wls);
    gs__strmap_init(&a->queues);
    gs_queue_tree_init(&a->tree);
    a->dirty = true;
    *out = a;
    return 0;
}

void gs_adm_loop_free(struct gs_adm_loop *a)
{
    if (!a) return;
    gs_admission_free(a->adm);
    gs_queue_tree_free(&a->tree);
    for (size_t s = 0; s < a->wls.cap; s++)
        if (a->wls.slots[s].key) wl_free(a->wls.slots[s].val);
    for (size_t s = 0; s < a->queues.cap; s++) {
        struct qdoc *q = a->queues.slots[s].key ? a->queues.slots[s].val : NULL;
        if (!q) continue;
        free(q->key);
        json_decref(q->doc);
        free(q);
    }
    gs__strmap_free(&a->wls);
    gs__strmap_free(&a->queues);
    for (size_t i = 0; i < a->nevicted; i++) free(a->evicted[i]);
    free(a->evicted);
    free(a->by_id);
    free(a);
}
