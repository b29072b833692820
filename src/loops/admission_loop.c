/*
 * admission_loop.c - admission in front of the server's scheduling queue;
 * see admission_loop.h.
 *
 * Records. A workload record (struct wl) outlives rebuilds of the admission:
 * its members, the admission's workload id, whether it is admitted, and its
 * arrival order. A member (struct member) is one pod: its store key, the uid
 * conditions are written to, admission's own decoded copy of it, and the
 * QuotaReserved condition last written. Members are found by store key; a
 * member that left (finished, deleted, re-created with another request)
 * stays in its workload, marked gone, while the admission still borrows its
 * copy. Freed copies wait in a graveyard until the cache no longer holds
 * them: admission's victim simulation puts running pods back into the cache
 * by its own pointers.
 *
 * Workload keys given to the admission are "ns/name" of the pod or the
 * PodGroup, with a suffix when a finished workload of that name is still in
 * its table (a pod re-created under the same name).
 *
 * Flow of one cycle: settle (members that left: their share released),
 * sync (workloads whose membership changed are submitted, resubmitted or
 * withdrawn, in arrival order), the admission cycle, its evictions carried
 * out, admitted pods handed to the scheduler, conditions written.
 */
#include "loops/admission_loop.h"
#include "control/events.h" /* Kueue's Events on the pods */

#include "control/api.h"
#include "loops/queue_status.h"
#include "loops/podgroups.h"
#include "core/log.h"
#include "sched/admission/admission.h"
#include "sched/admission/dra_admit.h" /* claims counted against quota */
#include "sched/strmap.h"
#include "kube/goduration.h" /* duration annotations */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TICK_NS (1000LL * 1000 * 1000) /* retry everyone this often: capacity changes we do not see */
#define REBUILD_FINISHED 4096          /* finished workloads kept before the table is compacted */
#define QSTATUS_LISTED 10   /* pending workloads listed per queue in its status */
#define QSTATUS_ESTIMATED 3 /* of which given an estimated start (each costs placement checks) */

#define WPC_PREFIX "workloadpriorityclasses.kueue.x-k8s.io/"
const char *const gs_adm_loop_prefixes[] = {"resourceflavors.kueue.x-k8s.io/", "clusterqueues.kueue.x-k8s.io/",
                                            "localqueues.kueue.x-k8s.io/", "queues.scheduling.gpusched.io/",
                                            WPC_PREFIX, NULL};

struct wl;

struct member {
    char *key;               /* store key "pods/ns/name" */
    char *uid;               /* of the pod stored under key now */
    struct gs_object *copy;  /* admission's own; the workload borrows copy->u.pod */
    struct wl *w;
    bool leaving;            /* gone or replaced: settled at the next cycle unless it comes back */
    bool gone;               /* left for good */
    bool running;            /* was bound when seen */
    bool queued;             /* handed to the scheduler */
    bool submitted;          /* part of the current submission */
    char *cond;              /* condition last written: "status\nreason\nmessage" */
};

struct wl {
    char *key;               /* "group:ns/name", or "pod:<seq>" for a single pod; the map's key */
    char *group;             /* "ns/name" of the PodGroup, NULL for a single pod */
    struct member **m;
    size_t n, cap;
    int32_t id;              /* in the current admission, -1 when not submitted */
    bool admitted;           /* handed to the scheduler (or running) */
    bool dirty;              /* membership or state changed: synced at the next cycle */
    bool resubmit;           /* members changed since the submission */
    int submit_rc;           /* last gs_admission_submit error (GS_ENOENT: unknown queue), 0 */
    const char *wait_reason; /* why it is not submitted (a group short of pods), NULL */
    char wait_msg[200];
    int64_t est_ns;          /* estimated run time given at submission, 0 unknown */
    int npods;               /* pods in the submission */
    uint64_t seq;            /* arrival order, kept over rebuilds */
    char *gcond;             /* PodGroup condition last written */
};

struct ginfo {
    char *key;               /* "ns/name"; the map's key */
    char *store_key;
    int32_t min_member;
    char *queue;             /* label kueue.x-k8s.io/queue-name, else spec.queue; NULL */
};

struct qdoc {
    char *key; /* the map's key */
    json_t *doc;
    int64_t rv;
};

struct evicted {
    char *key;                 /* store key */
    const struct gs_pod *pod;  /* the copy admission evicted */
};

struct gs_adm_loop {
    struct gs_adm_loop_opts o;
    struct gs__strmap wls, members, groups, queues;
    struct gs_queue_tree tree;
    bool tree_ok;
    char tree_err[256];
    struct gs_admission *adm;
    struct gs_dra_admit *dra;  /* DRA objects, kept over rebuilds */
    struct wl **by_id;         /* admission id -> record (NULL once gone) */
    size_t nby, capby;
    size_t finished;
    uint64_t seq, suffix;
    bool dirty, changed;
    bool some_dirty;           /* some record is dirty */
    int64_t last_ns;
    struct evicted *ev;        /* evicted during a cycle */
    size_t nev, capev;
    struct member **leaving;   /* members that may have left, settled by the next cycle */
    size_t nleaving, capleaving;
    struct gs_object **grave;  /* freed copies the cache may still point to */
    size_t ngrave, capgrave;
    struct gs_profile **profiles; /* scheduler profiles with AdmissionHold */
    size_t nprofiles;
    json_t *hold_args;
    struct gs_qstatus qstatus;    /* per-queue status on the queue objects */
    struct gs_admission_opts tuning; /* server options (o.tuning copied), for every rebuild */
};

/*--- Small helpers ---*/

static int push(void **v, size_t *n, size_t *cap, size_t size, const void *x)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        void *nv = realloc(*v, c * size);
        if (!nv) return GS_ENOMEM;
        *v = nv;
        *cap = c;
    }
    memcpy((char *)*v + *n * size, x, size);
    ++*n;
    return 0;
}

static const char *ns_of(const struct gs_pod *p) { return p->meta.namespace_ ? p->meta.namespace_ : "default"; }

static const struct gs_pod *pod_of(const struct member *m) { return m->copy->u.pod; }

bool gs_adm_loop_wants(const struct gs_pod *pod) { return pod->queue_name && *pod->queue_name; }

static const struct ginfo *group_info(const struct gs_adm_loop *a, const struct gs_pod *pod)
{
    if (!pod->pod_group || !*pod->pod_group) return NULL;
    char key[GS__KEY_MAX];
    snprintf(key, sizeof key, "%s/%s", ns_of(pod), pod->pod_group);
    return gs__strmap_get(&a->groups, key);
}

bool gs_adm_loop_claims(const struct gs_adm_loop *a, const struct gs_pod *pod)
{
    if (gs_adm_loop_wants(pod)) return true;
    const struct ginfo *g = a ? group_info(a, pod) : NULL;
    return g && g->queue;
}

bool gs_adm_loop_is_queue_key(const char *key)
{
    if (gs_dra_admit_is_key(key)) return true;
    for (size_t i = 0; gs_adm_loop_prefixes[i]; i++)
        if (!strncmp(key, gs_adm_loop_prefixes[i], strlen(gs_adm_loop_prefixes[i]))) return true;
    return false;
}

/* Copies wait here until the cache no longer points to them (see the top). */
static void bury(struct gs_adm_loop *a, struct gs_object *o)
{
    if (o && push((void **)&a->grave, &a->ngrave, &a->capgrave, sizeof *a->grave, &o)) gs_object_free(o);
}

struct grave_scan {
    struct gs_object **v; /* sorted by the pod's address */
    uint8_t *held;
    size_t n;
};

static int cmp_grave(const void *x, const void *y)
{
    uintptr_t p = (uintptr_t)(*(struct gs_object *const *)x)->u.pod;
    uintptr_t q = (uintptr_t)(*(struct gs_object *const *)y)->u.pod;
    return p < q ? -1 : p > q;
}

static void mark_held(void *arg, const struct gs_pod *pod, const struct gs_assignment *as, bool bound)
{
    (void)as, (void)bound;
    struct grave_scan *g = arg;
    for (size_t lo = 0, hi = g->n; lo < hi;) {
        size_t mid = (lo + hi) / 2;
        uintptr_t p = (uintptr_t)g->v[mid]->u.pod;
        if (p == (uintptr_t)pod) {
            g->held[mid] = 1;
            return;
        }
        if (p < (uintptr_t)pod) lo = mid + 1;
        else hi = mid;
    }
}

/* Frees the buried copies no pod in the cache is. */
static void empty_grave(struct gs_adm_loop *a)
{
    if (!a->ngrave) return;
    struct grave_scan g = {a->grave, calloc(a->ngrave, 1), a->ngrave};
    if (!g.held) return; /* no memory: tried again next cycle */
    qsort(a->grave, a->ngrave, sizeof *a->grave, cmp_grave);
    gs_cache_foreach_pod(a->o.cache, mark_held, &g);
    size_t k = 0;
    for (size_t i = 0; i < a->ngrave; i++) {
        if (g.held[i]) a->grave[k++] = a->grave[i];
        else gs_object_free(a->grave[i]);
    }
    a->ngrave = k;
    free(g.held);
}

/*--- Records ---*/

static void member_free(struct gs_adm_loop *a, struct member *m)
{
    if (!m) return;
    bury(a, m->copy);
    free(m->key);
    free(m->uid);
    free(m->cond);
    free(m);
}

static void wl_free(struct gs_adm_loop *a, struct wl *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        struct member *m = w->m[i];
        if (gs__strmap_get(&a->members, m->key) == m) gs__strmap_del(&a->members, m->key);
        member_free(a, m);
    }
    free(w->m);
    free(w->key);
    free(w->group);
    free(w->gcond);
    free(w);
}

/* Admission's own copy of pod: decoded again from its document, unbound. */
static struct gs_object *copy_pod(const struct gs_pod *pod)
{
    if (!pod->doc) return NULL;
    struct gs_diags d = {0};
    struct gs_object *o = NULL;
    int rc = gs_object_decode(pod->doc, &o, &d);
    gs_diags_free(&d);
    if (rc || o->kind != GS_KIND_POD) {
        gs_object_free(o);
        return NULL;
    }
    free(o->u.pod->node_name); /* a restored workload evicted later is placed afresh */
    o->u.pod->node_name = NULL;
    return o;
}

static struct member *member_new(const char *key, const struct gs_pod *pod)
{
    struct member *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->key = strdup(key);
    m->uid = pod->meta.uid ? strdup(pod->meta.uid) : NULL;
    m->copy = copy_pod(pod);
    if (!m->key || !m->copy || (pod->meta.uid && !m->uid)) {
        gs_object_free(m->copy);
        free(m->key), free(m->uid), free(m);
        return NULL;
    }
    return m;
}

static int live_members(const struct wl *w)
{
    int n = 0;
    for (size_t i = 0; i < w->n; i++) n += !w->m[i]->gone;
    return n;
}

/* The record pod joins: its PodGroup's (unless that one is admitted already:
 * a late member is a workload of its own), else a new one of its own. */
static struct wl *wl_for(struct gs_adm_loop *a, const struct gs_pod *pod)
{
    char wkey[GS__KEY_MAX + 16];
    bool group = pod->pod_group && *pod->pod_group;
    if (group) snprintf(wkey, sizeof wkey, "group:%s/%s", ns_of(pod), pod->pod_group);
    struct wl *w = group ? gs__strmap_get(&a->wls, wkey) : NULL;
    if (w && !w->admitted) return w;
    group = group && !w;
    if (!group) snprintf(wkey, sizeof wkey, "pod:%llu", (unsigned long long)(a->seq + 1)); /* unique */
    w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->key = strdup(wkey);
    if (group) w->group = strdup(wkey + 6);
    w->id = -1;
    w->seq = ++a->seq;
    if (!w->key || (group && !w->group) || gs__strmap_put(&a->wls, w->key, w)) {
        free(w->key), free(w->group), free(w);
        return NULL;
    }
    return w;
}

static int wl_attach(struct gs_adm_loop *a, struct wl *w, struct member *m)
{
    if (push((void **)&w->m, &w->n, &w->cap, sizeof *w->m, &m)) return GS_ENOMEM;
    if (gs__strmap_put(&a->members, m->key, m)) {
        w->n--;
        return GS_ENOMEM;
    }
    m->w = w;
    w->dirty = w->resubmit = true;
    a->changed = a->some_dirty = true;
    return 0;
}

/* Does the re-added pod ask for what the copy asked (so it keeps its workload)? */
static bool same_request(const struct gs_pod *p, const struct gs_pod *q)
{
    const struct gs_demand *x = &p->demand, *y = &q->demand;
    if (x->cpu_milli != y->cpu_milli || x->mem_bytes != y->mem_bytes || x->gpu_count != y->gpu_count ||
        x->gpu_milli != y->gpu_milli || x->gpu_mem_mib != y->gpu_mem_mib || x->extended.n != y->extended.n ||
        p->priority != q->priority)
        return false;
    for (size_t i = 0; i < x->extended.n; i++)
        if (x->extended.v[i].milli != y->extended.v[i].milli || strcmp(x->extended.v[i].name, y->extended.v[i].name))
            return false;
    const char *s[][2] = {{p->queue_name, q->queue_name}, {p->pod_group, q->pod_group}};
    for (size_t i = 0; i < 2; i++)
        if (!s[i][0] != !s[i][1] || (s[i][0] && strcmp(s[i][0], s[i][1]))) return false;
    return true;
}

/* Adds (or brings back) the pod under key; the member or NULL (no memory). */
static struct member *member_add(struct gs_adm_loop *a, const char *key, const struct gs_pod *pod, bool running)
{
    struct member *m = gs__strmap_get(&a->members, key);
    if (m && m->leaving && same_request(pod_of(m), pod)) { /* replaced: keeps its workload and place */
        char *uid = pod->meta.uid ? strdup(pod->meta.uid) : NULL;
        if (pod->meta.uid && !uid) return NULL;
        free(m->uid);
        m->uid = uid;
        m->leaving = false;
        free(m->cond); /* the new pod carries no condition yet */
        m->cond = NULL;
        m->queued = m->running = false; /* as the new pod is: see below */
    } else if (m && m->leaving) { /* a different pod now: the old one has left */
        gs__strmap_del(&a->members, key);
        m = NULL;
    }
    if (m) {
        if (running && !m->running) m->running = m->queued = m->w->dirty = true, a->changed = a->some_dirty = true;
        return m;
    }
    struct wl *w = wl_for(a, pod);
    if (!w || !(m = member_new(key, pod))) return NULL;
    if (wl_attach(a, w, m)) {
        member_free(a, m);
        return NULL;
    }
    m->running = m->queued = running;
    return m;
}

bool gs_adm_loop_pod_add(struct gs_adm_loop *a, const char *key, const struct gs_pod *pod)
{
    struct member *m = member_add(a, key, pod, false);
    if (!m) return false; /* no memory: scheduled without admission rather than lost */
    if (!m->w->admitted) return true;
    m->queued = true;
    return false;
}

void gs_adm_loop_pod_running(struct gs_adm_loop *a, const char *key, const struct gs_pod *pod)
{
    member_add(a, key, pod, true);
}

void gs_adm_loop_pod_gone(struct gs_adm_loop *a, const char *key)
{
    struct member *m = a ? gs__strmap_get(&a->members, key) : NULL;
    if (!m || m->leaving) return;
    if (push((void **)&a->leaving, &a->nleaving, &a->capleaving, sizeof *a->leaving, &m)) return;
    m->leaving = true;
    a->changed = true;
}

void gs_adm_loop_group_event(struct gs_adm_loop *a, const char *key, const struct gs_podgroup *pg)
{
    char nsname[GS__KEY_MAX]; /* "ns/<group key>" of any PodGroup shape (podgroups.h) */
    if (!a || gs_podgroup_ns_group(key, nsname, sizeof nsname)) return;
    struct ginfo *g = gs__strmap_del(&a->groups, nsname);
    if (g) {
        free(g->key), free(g->store_key), free(g->queue), free(g);
        g = NULL;
    }
    char wkey[GS__KEY_MAX + 16];
    snprintf(wkey, sizeof wkey, "group:%s", nsname);
    struct wl *w = gs__strmap_get(&a->wls, wkey);
    if (w) w->dirty = true, a->changed = a->some_dirty = true;
    if (!pg) return;
    const char *q = gs_labels_get(&pg->meta.labels, GS_LABEL_QUEUE);
    if (!q || !*q) q = pg->queue && *pg->queue ? pg->queue : NULL;
    if (!(g = calloc(1, sizeof *g))) return;
    g->key = strdup(nsname);
    g->store_key = strdup(key);
    g->queue = q ? strdup(q) : NULL;
    g->min_member = pg->min_member > 0 ? pg->min_member : 1;
    if (!g->key || !g->store_key || (q && !g->queue) || gs__strmap_put(&a->groups, g->key, g))
        free(g->key), free(g->store_key), free(g->queue), free(g);
}

/*--- Submission ---*/

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

/* The queue the workload names: a member's label, else its PodGroup's. */
/* Kueue's label kueue.x-k8s.io/priority-class names a WorkloadPriorityClass
 * (v1beta1 or v1beta2): its value is the workload's priority in admission.
 * False when the pod has no such label or the class is unknown. */
static bool wpc_priority(const struct gs_adm_loop *a, const struct gs_pod *pod, int32_t *out)
{
    const char *name = gs_labels_get(&pod->meta.labels, GS_LABEL_KUEUE_PRIORITY_CLASS);
    if (!name || !*name) return false;
    char key[GS__KEY_MAX + 64];
    snprintf(key, sizeof key, WPC_PREFIX "%s", name);
    const struct qdoc *q = gs__strmap_get(&a->queues, key);
    const json_t *v = q && q->doc ? json_object_get(q->doc, "value") : NULL;
    if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN || json_integer_value(v) > INT32_MAX) return false;
    *out = (int32_t)json_integer_value(v);
    return true;
}

static const char *wl_queue(const struct gs_adm_loop *a, const struct wl *w)
{
    const struct ginfo *g = NULL;
    for (size_t i = 0; i < w->n; i++) {
        const struct gs_pod *p = pod_of(w->m[i]);
        if (w->m[i]->gone) continue;
        if (gs_adm_loop_wants(p)) return p->queue_name;
        if (!g) g = group_info(a, p);
    }
    return g && g->queue ? g->queue : "";
}

/* Seconds of run time a pod states: the simulator's duration annotation
 * (seconds, or a Go duration such as "1m30s", as the simulator reads it),
 * else spec.activeDeadlineSeconds (an upper bound); 0 when neither. */
static int64_t pod_duration_ns(const struct gs_pod *p)
{
    const char *s = gs_labels_get(&p->meta.annotations, GS_ANN_SIM_DURATION);
    char *end = NULL;
    double v = s ? strtod(s, &end) : 0;
    if (s && end != s && !*end && v > 0) return (int64_t)(v * GS_NS_PER_SEC);
    int64_t ns = 0;
    const char *why = NULL;
    if (s && gs_go_duration_parse(s, &ns, &why) == 0 && ns > 0) return ns;
    json_t *ads = json_object_get(json_object_get(p->doc, "spec"), "activeDeadlineSeconds");
    return json_integer_value(ads) > 0 ? json_integer_value(ads) * GS_NS_PER_SEC : 0;
}

/* A workload ends with its last pod: unknown when any pod's end is. */
static int64_t wl_duration_ns(const struct wl *w)
{
    int64_t most = 0;
    for (size_t i = 0; i < w->n; i++) {
        if (w->m[i]->gone) continue;
        int64_t d = pod_duration_ns(pod_of(w->m[i]));
        if (d <= 0) return 0;
        if (d > most) most = d;
    }
    return most;
}

static void withdraw(struct gs_adm_loop *a, struct wl *w)
{
    if (a->adm && w->id >= 0) {
        gs_admission_finish(a->adm, w->id);
        a->by_id[w->id] = NULL;
        a->finished++;
    }
    w->id = -1;
    for (size_t i = 0; i < w->n; i++) w->m[i]->submitted = false;
}

/* Members that left and are no longer borrowed by the admission. */
static void purge_gone(struct gs_adm_loop *a, struct wl *w)
{
    size_t k = 0;
    for (size_t i = 0; i < w->n; i++) {
        if (w->m[i]->gone && !w->m[i]->submitted) member_free(a, w->m[i]);
        else w->m[k++] = w->m[i];
    }
    w->n = k;
}

/* Submits w's live members as one workload; restore: as admitted already. */
static void submit(struct gs_adm_loop *a, struct wl *w, bool restore)
{
    w->id = -1;
    w->submit_rc = 0;
    if (!a->adm) return;
    const struct gs_pod **pods = calloc(w->n ? w->n : 1, sizeof *pods);
    if (!pods) return;
    size_t n = 0;
    int32_t prio = INT32_MIN, wpc;
    for (size_t i = 0; i < w->n; i++) {
        if (w->m[i]->gone) continue;
        pods[n++] = pod_of(w->m[i]);
        if (pod_of(w->m[i])->priority > prio) prio = pod_of(w->m[i])->priority;
    }
    if (n && wpc_priority(a, pods[0], &wpc)) prio = wpc; /* Kueue: the class's value, not the pods' */
    char key[GS__KEY_MAX + 32];
    const char *ns = ns_of(pods[0]);
    if (w->group) snprintf(key, sizeof key, "%s", w->group);
    else snprintf(key, sizeof key, "%s/%s", ns, pods[0]->meta.name);
    if (gs_admission_find(a->adm, key) >= 0) /* a finished namesake */
        snprintf(key + strlen(key), sizeof key - strlen(key), "#%llu", (unsigned long long)++a->suffix);
    w->est_ns = wl_duration_ns(w);
    struct gs_workload_spec s = {.key = key, .namespace_ = ns, .queue = wl_queue(a, w), .priority = prio,
                                 .pods = pods, .npods = n, .est_duration_ns = w->est_ns};
    int id = gs_admission_submit(a->adm, &s);
    free(pods);
    if (id < 0) {
        w->submit_rc = id;
        return;
    }
    if (track_id(a, id, w)) {
        gs_admission_finish(a->adm, id);
        return;
    }
    w->id = id;
    w->npods = (int)n;
    w->resubmit = false;
    for (size_t i = 0; i < w->n; i++) w->m[i]->submitted = !w->m[i]->gone;
    if (restore && gs_admission_restore(a->adm, id) == 0) w->admitted = true;
}

/* Is a group complete enough to be submitted? Sets the wait reason if not. */
static bool group_ready(struct gs_adm_loop *a, struct wl *w)
{
    const struct ginfo *g = gs__strmap_get(&a->groups, w->group);
    int live = live_members(w);
    w->wait_reason = NULL;
    if (!g) {
        w->wait_reason = "PodGroupNotFound";
        snprintf(w->wait_msg, sizeof w->wait_msg, "PodGroup %s not found (%d pods name it)", w->group, live);
    } else if (live < g->min_member) {
        w->wait_reason = "WaitingForPods";
        snprintf(w->wait_msg, sizeof w->wait_msg, "PodGroup %s has %d of minMember %d pods", w->group, live,
                 g->min_member);
    }
    return !w->wait_reason;
}

static void queue_members(struct gs_adm_loop *a, struct wl *w)
{
    for (size_t i = 0; i < w->n; i++) {
        struct member *m = w->m[i];
        if (m->gone || m->queued) continue;
        m->queued = true;
        if (a->o.admitted) a->o.admitted(a->o.ctx, m->key);
    }
}

/* Brings one changed record in line with the admission. false: freed. */
static bool sync_wl(struct gs_adm_loop *a, struct wl *w)
{
    w->dirty = false;
    if (!live_members(w)) {
        withdraw(a, w);
        gs__strmap_del(&a->wls, w->key);
        wl_free(a, w);
        return false;
    }
    bool running = w->admitted;
    for (size_t i = 0; i < w->n; i++) running |= !w->m[i]->gone && w->m[i]->running;
    if (w->admitted && w->id >= 0) return true; /* members that left are settled; the rest keeps its quota */
    if (running) { /* runs already (a reload, a rebuild): reserved as it is */
        withdraw(a, w);
        purge_gone(a, w);
        w->wait_reason = NULL;
        submit(a, w, true);
        w->admitted = true; /* even unsubmitted (unknown queue): it runs */
        queue_members(a, w);
        return true;
    }
    bool ready = !w->group || group_ready(a, w);
    if (w->id >= 0 && (!ready || w->resubmit)) withdraw(a, w);
    purge_gone(a, w);
    if (ready && w->id < 0) submit(a, w, false);
    return true;
}

static int cmp_seq(const void *x, const void *y)
{
    const struct wl *p = *(struct wl *const *)x, *q = *(struct wl *const *)y;
    return p->seq < q->seq ? -1 : p->seq > q->seq;
}

/* Members that left: gone for good now, their share of the quota released. */
static void settle(struct gs_adm_loop *a)
{
    for (size_t i = 0; i < a->nleaving; i++) {
        struct member *m = a->leaving[i];
        if (!m->leaving) continue; /* came back */
        m->leaving = false;
        m->gone = true;
        m->w->dirty = m->w->resubmit = a->some_dirty = true;
        if (gs__strmap_get(&a->members, m->key) == m) gs__strmap_del(&a->members, m->key);
        if (a->adm && m->w->admitted && m->w->id >= 0 && m->submitted)
            gs_admission_pod_finished(a->adm, m->w->id, pod_of(m));
    }
    a->nleaving = 0;
}

/* Records that changed, in arrival order. */
static int sync_all(struct gs_adm_loop *a, bool all)
{
    if (!all && !a->some_dirty) return 0; /* the common round: nothing to scan */
    struct wl **v = calloc(a->wls.n ? a->wls.n : 1, sizeof *v);
    if (!v) return GS_ENOMEM;
    a->some_dirty = false;
    size_t n = 0;
    for (size_t s = 0; s < a->wls.cap; s++) {
        struct wl *w = a->wls.slots[s].key ? a->wls.slots[s].val : NULL;
        if (w && (all || w->dirty)) v[n++] = w;
    }
    qsort(v, n, sizeof *v, cmp_seq);
    for (size_t i = 0; i < n; i++) sync_wl(a, v[i]);
    free(v);
    return 0;
}

/*--- Queue objects and the tree ---*/

void gs_adm_loop_queue_event(struct gs_adm_loop *a, const char *key, const json_t *doc, int64_t rv)
{
    if (gs_dra_admit_is_key(key)) { /* no rebuild: the next cycle looks again at workloads with claims */
        struct gs_diags d = {0};
        uint64_t before = gs_dra_admit_generation(a->dra);
        if (gs_dra_admit_event(a->dra, key, doc, rv, &d) == GS_EINVAL)
            gs_log(GS_LOG_WARN, "admission: DRA object ignored", "key", key, "error", d.n ? d.v[0].msg : "invalid",
                   "field", d.n ? d.v[0].path : "", NULL);
        gs_diags_free(&d);
        if (gs_dra_admit_generation(a->dra) != before) a->changed = true;
        return;
    }
    struct qdoc *q = gs__strmap_get(&a->queues, key);
    if (q && rv <= q->rv) return;
    if (!doc) {
        if (!q) return;
        gs__strmap_del(&a->queues, key);
        json_decref(q->doc);
        free(q->key);
        free(q);
    } else if (q) {
        /* Our own status writes (queue_status.c) come back as events: only a
         * changed spec or label means the tree must be rebuilt. */
        bool same = gs_qstatus_spec_equal(q->doc, doc);
        json_decref(q->doc);
        q->doc = json_deep_copy(doc);
        q->rv = rv;
        if (same) return;
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
        if (!q || !q->doc || !strncmp(q->key, WPC_PREFIX, strlen(WPC_PREFIX))) continue; /* priorities, not queues */
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

/* A fresh tree and admission; live workloads submitted again in arrival order. */
static int rebuild(struct gs_adm_loop *a)
{
    gs_admission_free(a->adm);
    a->adm = NULL;
    a->nby = a->finished = 0;
    a->dirty = false;
    build_tree(a);
    for (size_t s = 0; s < a->wls.cap; s++) {
        struct wl *w = a->wls.slots[s].key ? a->wls.slots[s].val : NULL;
        if (!w) continue;
        w->id = -1;
        w->resubmit = true;
        for (size_t i = 0; i < w->n; i++) w->m[i]->submitted = false;
    }
    if (a->tree_ok) {
        struct gs_diags d = {0};
        struct gs_admission_opts ao = a->tuning; /* server options */
        ao.profile = a->o.profile, ao.evict = evicted, ao.ctx = a;
        ao.dra = a->dra;
        if (gs_admission_new(&a->tree, a->o.cache, a->o.clock, &ao, &a->adm, &d)) a->adm = NULL;
        gs_diags_free(&d);
    }
    a->changed = true;
    return sync_all(a, true);
}

/* Admission's evict callback, during a cycle: noted, carried out after it. */
static void evicted(void *ctx, const struct gs_pod *pod)
{
    struct gs_adm_loop *a = ctx;
    char key[GS__KEY_MAX + 8];
    snprintf(key, sizeof key, "pods/%s/%s", ns_of(pod), pod->meta.name);
    struct evicted e = {strdup(key), pod};
    if (!e.key || push((void **)&a->ev, &a->nev, &a->capev, sizeof *a->ev, &e)) free(e.key);
    /* Out of the cache now, as the library's contract asks: it checks right
     * after the evictions that the claimant fits, then admits it and holds
     * the freed nodes for it. Left in the cache until the hook ran after the
     * cycle, the check failed, the claimant stayed pending with no hold, and
     * any other pod could take what reclaim had freed. */
    char ckey[GS__KEY_MAX];
    if (gs_meta_key(&pod->meta, ckey, sizeof ckey) == 0) gs_cache_remove_pod(a->o.cache, ckey); /* as the cache keys it */
}

/*--- Conditions ---*/

struct cond_ctx {
    const char *uid, *type, *status, *reason, *msg;
};

static int cond_fn(json_t *cur, json_t **out, void *arg)
{
    struct cond_ctx *c = arg;
    if (!cur) return GS_ENOENT;
    const char *uid = json_string_value(json_object_get(json_object_get(cur, "metadata"), "uid"));
    if (c->uid && (!uid || strcmp(uid, c->uid))) return GS_ENOENT;
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    gs__pod_set_condition(next, c->type, c->status, c->reason, c->msg);
    if (json_equal(next, cur)) {
        json_decref(next);
        return GS_STORE_UNCHANGED;
    }
    *out = next;
    return 0;
}

/* Writes condition type on the object at key when it differs from *last. */
static void write_cond(struct gs_adm_loop *a, const char *key, const char *uid, char **last, const char *type,
                       const char *status, const char *reason, const char *msg)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s\n%s\n%s", status, reason ? reason : "", msg ? msg : "");
    if (*last && !strcmp(*last, buf)) return;
    struct cond_ctx c = {uid, type, status, reason, msg};
    int rc = gs_source_mutate(a->o.source, key, "status", cond_fn, &c, NULL, NULL);
    if (rc && rc != GS_STORE_UNCHANGED) return;
    free(*last);
    *last = strdup(buf);
}

static const char *queue_node_name(const struct gs_adm_loop *a, const struct wl *w)
{
    const struct gs_workload *x = a->adm && w->id >= 0 ? gs_admission_workload(a->adm, w->id) : NULL;
    return x ? gs_admission_tree(a->adm)->nodes[x->queue].name : wl_queue(a, w);
}

/* Why w still waits: reason and message for QuotaReserved=False. */
static void pending_why(struct gs_adm_loop *a, const struct wl *w, const char **reason, char *msg, size_t len)
{
    const struct gs_workload *x = a->adm && w->id >= 0 ? gs_admission_workload(a->adm, w->id) : NULL;
    const char *ns = w->n ? ns_of(pod_of(w->m[0])) : "default";
    if (!a->tree_ok) {
        *reason = "QueueConfigInvalid";
        snprintf(msg, len, "%s", a->tree_err);
    } else if (w->wait_reason) {
        *reason = w->wait_reason;
        snprintf(msg, len, "%s", w->wait_msg);
    } else if (w->submit_rc == GS_ENOENT) {
        *reason = "UnknownQueue";
        snprintf(msg, len, "LocalQueue %s not found in namespace %s (nor a Queue of that name)", wl_queue(a, w), ns);
    } else if (!x) {
        *reason = "Pending";
        snprintf(msg, len, "waiting for admission");
    } else {
        *reason = x->state == GS_WL_INADMISSIBLE ? "Inadmissible" : "Pending";
        snprintf(msg, len, "%s", x->reason[0] ? x->reason : "waiting for admission");
    }
}

static void write_wl_conditions(struct gs_adm_loop *a, struct wl *w)
{
    const char *reason = "QuotaReserved", *status = w->admitted ? "True" : "False";
    char msg[256];
    if (w->admitted) snprintf(msg, sizeof msg, "quota reserved in %s", queue_node_name(a, w));
    else pending_why(a, w, &reason, msg, sizeof msg);
    for (size_t i = 0; i < w->n; i++) {
        struct member *m = w->m[i];
        if (!m->gone && !m->leaving) write_cond(a, m->key, m->uid, &m->cond, "QuotaReserved", status, reason, msg);
    }
    const struct ginfo *g = w->group ? gs__strmap_get(&a->groups, w->group) : NULL;
    if (!g) return;
    char gmsg[300];
    if (w->admitted) snprintf(gmsg, sizeof gmsg, "%s for %d pods", msg, w->npods);
    else snprintf(gmsg, sizeof gmsg, "%s", msg);
    write_cond(a, g->store_key, NULL, &w->gcond, "Admitted", status, w->admitted ? "Admitted" : reason, gmsg);
}

static void write_conditions(struct gs_adm_loop *a)
{
    for (size_t s = 0; s < a->wls.cap; s++) {
        struct wl *w = a->wls.slots[s].key ? a->wls.slots[s].val : NULL;
        if (w) write_wl_conditions(a, w);
    }
}

/*--- The cycle ---*/

/* An Event on a member pod, from "kueue-admission" as Kueue records them. */
static void member_event(struct gs_adm_loop *a, const struct member *m, const char *type, const char *reason,
                         const char *msg)
{
    const struct gs_pod *p = pod_of(m);
    struct gs_event_source src = {a->o.events, "kueue-admission", NULL, 0};
    gs_event_record(&src, GS_EVENT_POD(ns_of(p), p->meta.name, m->uid), type, reason, reason, "%s", msg);
}

static void admitted_events(struct gs_adm_loop *a, const struct wl *w)
{
    char msg[320];
    const char *q = queue_node_name(a, w);
    for (size_t i = 0; i < w->n; i++) {
        if (w->m[i]->gone || w->m[i]->leaving) continue;
        snprintf(msg, sizeof msg, "Quota reserved in queue %s", q);
        member_event(a, w->m[i], "Normal", "QuotaReserved", msg);
        snprintf(msg, sizeof msg, "Admitted by queue %s", q);
        member_event(a, w->m[i], "Normal", "Admitted", msg);
    }
}

static void carry_out_evictions(struct gs_adm_loop *a)
{
    for (size_t i = 0; i < a->nev; i++) {
        struct member *m = gs__strmap_get(&a->members, a->ev[i].key);
        if (m && pod_of(m) == a->ev[i].pod) { /* not a newer pod of that name */
            const struct gs_workload *x = a->adm ? gs_admission_workload(a->adm, m->w->id) : NULL;
            const char *by = x ? strstr(x->reason, " of ") : NULL;
            m->w->admitted = false;
            m->queued = m->running = false; /* pending again: never restored without checks */
            char msg[400];
            snprintf(msg, sizeof msg, "Preempted to accommodate workload %s", by ? by + 4 : "of a higher claim");
            member_event(a, m, "Warning", "Preempted", msg);
            if (a->o.evict) a->o.evict(a->o.ctx, m->key, by ? by + 4 : "admission");
        }
        free(a->ev[i].key);
    }
    a->nev = 0;
}

static int admission_step(struct gs_adm_loop *a, bool tick)
{
    if (tick) gs_admission_capacity_changed(a->adm);
    struct gs_admission_result r = {0};
    int rc = gs_admission_cycle(a->adm, &r);
    carry_out_evictions(a);
    if (rc) return rc;
    int admitted = 0;
    for (size_t i = 0; i < r.nadmitted; i++) {
        struct wl *w = (size_t)r.admitted[i] < a->nby ? a->by_id[r.admitted[i]] : NULL;
        if (!w) continue;
        w->admitted = true;
        admitted++;
        write_wl_conditions(a, w); /* QuotaReserved=True before the pods can bind */
        admitted_events(a, w);
        queue_members(a, w);
    }
    return admitted;
}

/* Queue objects' status: every couple of seconds, only what changed. Not
 * through a Kubernetes source: there Kueue's own controller owns the
 * ClusterQueue and LocalQueue status, and the scheduler's role only reads them. */
static void publish_queue_status(struct gs_adm_loop *a, int64_t now)
{
    if (!a->adm || now < a->qstatus.next_ns || gs_source_kind(a->o.source) == GS_SOURCE_KUBE) return;
    json_t *view = gs_admission_queues_json(a->adm, QSTATUS_LISTED, QSTATUS_ESTIMATED);
    if (view) gs_qstatus_publish(&a->qstatus, a->o.source, view, now, false);
    json_decref(view);
}

int gs_adm_loop_cycle(struct gs_adm_loop *a)
{
    int64_t now = gs_clock_now(a->o.clock);
    if (a->adm && a->finished > REBUILD_FINISHED && a->finished > 2 * a->wls.n) a->dirty = true;
    settle(a);
    int rc = a->dirty ? rebuild(a) : sync_all(a, false);
    if (rc) return rc;
    empty_grave(a);
    bool tick = now - a->last_ns >= TICK_NS;
    if (!a->changed && !tick) return 0;
    a->last_ns = now;
    a->changed = false;
    int admitted = a->adm ? admission_step(a, tick) : 0;
    if (admitted < 0) return admitted;
    write_conditions(a);
    publish_queue_status(a, now);
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

/*--- Explain ---*/

/* Why no start can be estimated, from the running workloads' known ends. */
static void no_estimate_why(struct gs_adm_loop *a, char *buf, size_t len)
{
    size_t known = 0, unknown = 0;
    for (size_t s = 0; s < a->wls.cap; s++) {
        const struct wl *w = a->wls.slots[s].key ? a->wls.slots[s].val : NULL;
        if (!w || !w->admitted || w->id < 0) continue;
        if (w->est_ns > 0) known++;
        else unknown++;
    }
    if (unknown)
        snprintf(buf, len, "%zu running workload%s no known end (give pods spec.activeDeadlineSeconds or annotation "
                 GS_ANN_SIM_DURATION ")", unknown, unknown == 1 ? " has" : "s have");
    else if (known)
        snprintf(buf, len, "it would not fit even after all %zu running workloads with a known end have ended", known);
    else
        snprintf(buf, len, "no running workload of any queue holds what it needs; it waits for capacity that "
                 "admission does not manage (other pods, nodes)");
}

int gs_adm_loop_explain(struct gs_adm_loop *a, const char *key, FILE *f)
{
    struct member *m = gs__strmap_get(&a->members, key);
    struct wl *w = m ? m->w : NULL;
    if (!w || w->admitted) return GS_ENOENT;
    const char *reason;
    char msg[256];
    pending_why(a, w, &reason, msg, sizeof msg);
    fprintf(f, "pod %s is waiting for admission (queue %s): %s: %s\n", key + 5, wl_queue(a, w), reason, msg);
    if (w->group) {
        const struct ginfo *g = gs__strmap_get(&a->groups, w->group);
        fprintf(f, "  PodGroup: %s, %d pods", w->group, live_members(w));
        if (g) fprintf(f, " (minMember %d)", g->min_member);
        fprintf(f, ", admitted together\n");
    }
    const struct gs_workload *x = a->adm && w->id >= 0 ? gs_admission_workload(a->adm, w->id) : NULL;
    if (!x || x->state != GS_WL_PENDING) return 0;
    int64_t start = gs_admission_estimate_start(a->adm, w->id), now = gs_clock_now(a->o.clock);
    fprintf(f, "  ClusterQueue/Queue: %s\n  position in line: %d\n", gs_admission_tree(a->adm)->nodes[x->queue].name,
            gs_admission_position(a->adm, w->id));
    if (start < 0) {
        char why[256];
        no_estimate_why(a, why, sizeof why);
        fprintf(f, "  estimated start: unknown: %s\n", why);
    } else {
        fprintf(f, "  estimated start: in %.0f s\n", (double)(start > now ? start - now : 0) / GS_NS_PER_SEC);
    }
    return 0;
}

/*--- The AdmissionHold filter for the scheduler's profiles ---*/

static int hold_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    (void)h;
    json_t *v = json_object_get(args, "admissionLoop");
    if (!json_is_integer(v)) {
        gs_diags_add(d, "args.admissionLoop", "AdmissionHold needs the admission loop from gs_adm_loop_profile()");
        return GS_EINVAL;
    }
    *state = (void *)(intptr_t)json_integer_value(v);
    return 0;
}

/* Admission's copy of a pod it admitted (holds name the copies), or NULL. */
static const struct gs_pod *own_copy(const struct gs_adm_loop *a, const struct gs_pod *pod)
{
    char key[GS__KEY_MAX + 8];
    snprintf(key, sizeof key, "pods/%s/%s", ns_of(pod), pod->meta.name);
    const struct member *m = gs__strmap_get(&a->members, key);
    return m && m->submitted && m->w->id >= 0 ? pod_of(m) : NULL;
}

static void hold_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                        struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)cs;
    const struct gs_adm_loop *a = state;
    if (!a->adm) return;
    const struct gs_pod *own = NULL;
    bool looked = false;
    for (size_t i = 0; i < n; i++) {
        if (!gs_admission_node_held(a->adm, nodes[i]->idx, pod)) continue; /* cheap when nothing is held */
        if (!looked) own = own_copy(a, pod), looked = true;
        if (!own || gs_admission_node_held(a->adm, nodes[i]->idx, own)) reject[i] = 1;
    }
}

/* Class-wise only when no hold can reject the pod: then the filter keeps every node. */
static bool hold_by_class(void *state, const struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)cs;
    const struct gs_adm_loop *a = state;
    return !a->adm || !gs_admission_holds_apply(a->adm, pod);
}

static int hold_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)state, (void)pod, (void)code;
    return snprintf(buf, len, "node held for a workload admitted by reclaim");
}

const struct gs_plugin gs_adm_loop_hold_plugin = {
    .name = "AdmissionHold",
    .init = hold_init,
    .filter = hold_filter,
    .reason = hold_reason,
    .by_class = hold_by_class,
};

const struct gs_profile *gs_adm_loop_profile(struct gs_adm_loop *a, const struct gs_profile *base)
{
    if (base->npoints[GS_PT_FILTER] >= GS_MAX_PLUGINS_PER_POINT || base->nargs >= GS_MAX_PLUGINS_PER_POINT * 4)
        return base;
    if (!a->hold_args && !(a->hold_args = json_pack("{s:I}", "admissionLoop", (json_int_t)(intptr_t)a))) return base;
    struct gs_profile **v = realloc(a->profiles, (a->nprofiles + 1) * sizeof *v);
    if (!v) return base;
    a->profiles = v;
    struct gs_profile *p = malloc(sizeof *p);
    if (!p) return base;
    *p = *base; /* shares base's names and args: base outlives the schedulers */
    p->points[GS_PT_FILTER][p->npoints[GS_PT_FILTER]++] =
        (struct gs_profile_plugin){.plugin = &gs_adm_loop_hold_plugin, .weight = 1};
    p->args[p->nargs] = a->hold_args;
    p->args_names[p->nargs++] = gs_adm_loop_hold_plugin.name;
    a->profiles[a->nprofiles++] = p;
    return p;
}

/*--- Life cycle ---*/

int gs_adm_loop_new(const struct gs_adm_loop_opts *o, struct gs_adm_loop **out)
{
    struct gs_adm_loop *a = calloc(1, sizeof *a);
    if (!a) return GS_ENOMEM;
    a->o = *o;
    /* server options; without them history weighs 0.5, the library's default */
    a->tuning = o->tuning ? *o->tuning : (struct gs_admission_opts){.history_weight = -1};
    a->o.tuning = NULL;
    if (gs_dra_admit_new(&a->dra)) {
        free(a);
        return GS_ENOMEM;
    }
    for (size_t i = 0; i < a->tuning.ndra_class_mappings; i++) {
        struct gs_diags d = {0};
        if (gs_dra_admit_add_mapping(a->dra, a->tuning.dra_class_mappings[i], &d)) /* checked by the flag parser */
            gs_log(GS_LOG_WARN, "admission: device class mapping ignored", "mapping", a->tuning.dra_class_mappings[i],
                   "error", d.n ? d.v[0].msg : "invalid", NULL);
        gs_diags_free(&d);
    }
    gs__strmap_init(&a->wls);
    gs_qstatus_init(&a->qstatus);
    gs__strmap_init(&a->members);
    gs__strmap_init(&a->groups);
    gs__strmap_init(&a->queues);
    gs_queue_tree_init(&a->tree);
    a->dirty = true;
    *out = a;
    return 0;
}

void gs_adm_loop_free(struct gs_adm_loop *a)
{
    if (!a) return;
    gs_qstatus_free(&a->qstatus);
    gs_admission_free(a->adm);
    gs_dra_admit_free(a->dra);
    gs_queue_tree_free(&a->tree);
    for (size_t s = 0; s < a->wls.cap; s++)
        if (a->wls.slots[s].key) wl_free(a, a->wls.slots[s].val);
    for (size_t s = 0; s < a->groups.cap; s++) {
        struct ginfo *g = a->groups.slots[s].key ? a->groups.slots[s].val : NULL;
        if (g) free(g->key), free(g->store_key), free(g->queue), free(g);
    }
    for (size_t s = 0; s < a->queues.cap; s++) {
        struct qdoc *q = a->queues.slots[s].key ? a->queues.slots[s].val : NULL;
        if (!q) continue;
        free(q->key);
        json_decref(q->doc);
        free(q);
    }
    for (size_t i = 0; i < a->ngrave; i++) gs_object_free(a->grave[i]);
    for (size_t i = 0; i < a->nprofiles; i++) free(a->profiles[i]);
    for (size_t i = 0; i < a->nev; i++) free(a->ev[i].key);
    gs__strmap_free(&a->wls);
    gs__strmap_free(&a->members);
    gs__strmap_free(&a->groups);
    gs__strmap_free(&a->queues);
    json_decref(a->hold_args);
    free(a->profiles);
    free(a->grave);
    free(a->leaving);
    free(a->ev);
    free(a->by_id);
    free(a);
}
