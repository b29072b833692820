/*
 * claims.c - the resourceclaim controller; see claims.h.
 *
 * Each pass reads everything it decides on through the source's lists
 * (claims first, then pods, templates and classes), decides per pod and per
 * claim, and writes only differences, each as a read-modify-write on the
 * object's current version. A pass that finds nothing to change writes
 * nothing, so its own writes coming back as changes end in one quiet pass.
 *
 * An idle controller (the last pass found no claim, template, pod naming
 * claims nor extended-resource class) looks at the pods without keeping
 * them: a pass that keeps 500,000 decoded pods to free them at the end spent
 * most of its CPU in free(), and at 50,000 nodes such passes ran back to
 * back whenever a create burst outran the change-stream ring. Only when
 * that look finds something to do does the full pass run.
 */
#include "loops/claims.h"

#include "core/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIN_GAP_MS 100   /* passes at most this often, however many changes come */
#define RESYNC_MS 30000  /* a pass without any change at least this often */

struct gs_claims {
    struct gs_claims_opts o;
    pthread_t th;
    bool running;
    atomic_bool stop;
    pthread_mutex_t mu;
    struct gs_claims_stats st;
    int64_t cursor; /* change stream position after the last lists */
    bool idle;      /* the last pass found no claim, template, pod with claims nor extended-resource class */
};

/*--- Small JSON helpers ---*/

static json_t *jpath(const json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(o, a);
    return b ? json_object_get(v, b) : v;
}
static const char *jstr(const json_t *o, const char *a, const char *b) { return json_string_value(jpath(o, a, b)); }

struct list { json_t **v; size_t n, cap; };

static int list_add(const char *key, json_t *obj, void *arg)
{
    (void)key;
    struct list *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        json_t **v = realloc(l->v, cap * sizeof *v);
        if (!v) return 1;
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = json_incref(obj);
    return 0;
}

static void list_free(struct list *l)
{
    for (size_t i = 0; i < l->n; i++) json_decref(l->v[i]);
    free(l->v);
    *l = (struct list){0};
}

static const char *ns_of(const json_t *o)
{
    const char *ns = jstr(o, "metadata", "namespace");
    return ns && *ns ? ns : "default";
}

static json_t *find_named(const struct list *l, const char *ns, const char *name)
{
    for (size_t i = 0; name && i < l->n; i++)
        if (!strcmp(ns_of(l->v[i]), ns) && jstr(l->v[i], "metadata", "name") &&
            !strcmp(jstr(l->v[i], "metadata", "name"), name))
            return l->v[i];
    return NULL;
}

static bool pod_terminal(const json_t *pod)
{
    const char *ph = jstr(pod, "status", "phase");
    return ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed"));
}

static bool strs_has(const char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (!strcmp(v[i], s)) return true;
    return false;
}

/* The controller ownerReference of kind Pod, or NULL. */
static const json_t *pod_owner(const json_t *claim)
{
    size_t i;
    const json_t *r;
    json_array_foreach(jpath(claim, "metadata", "ownerReferences"), i, r) {
        const char *k = jstr(r, "kind", NULL);
        if (k && !strcmp(k, "Pod") && json_is_true(json_object_get(r, "controller"))) return r;
    }
    return NULL;
}

/*--- Names ---*/

int gs_claims_generated_name(const char *pod, const char *claim, const char *pod_uid, uint64_t seed, char *buf,
                             size_t len)
{
    static const char alpha[] = "bcdfghjklmnpqrstvwxz2456789";
    uint64_t h = 1469598103934665603ull ^ seed;
    const char *parts[] = {pod_uid ? pod_uid : "", "/", claim};
    for (int p = 0; p < 3; p++)
        for (const char *s = parts[p]; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    char sfx[6];
    for (int i = 0; i < 5; i++) {
        h ^= h >> 29, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 32;
        sfx[i] = alpha[h % (sizeof alpha - 1)];
    }
    sfx[5] = 0;
    /* Kubernetes truncates pod and claim names so the result stays a valid
     * object name; 63 + 1 + 63 + 1 + 5 stays within 253. */
    return snprintf(buf, len, "%.63s-%.63s-%s", pod, claim, sfx);
}

/*--- Writes ---*/

struct pod_status_ctx {
    const char *uid;
    json_t *statuses; /* resourceClaimStatuses wanted (NULL: leave) */
    json_t *extended; /* extendedResourceClaimStatus wanted (NULL: leave) */
};

static int pod_status_fn(json_t *cur, json_t **out, void *arg)
{
    struct pod_status_ctx *c = arg;
    if (!cur) return GS_ENOENT;
    const char *uid = jstr(cur, "metadata", "uid");
    if (c->uid && (!uid || strcmp(uid, c->uid))) return GS_ENOENT;
    json_t *st = json_object_get(cur, "status");
    bool same = (!c->statuses || json_equal(json_object_get(st, "resourceClaimStatuses"), c->statuses)) &&
                (!c->extended || json_equal(json_object_get(st, "extendedResourceClaimStatus"), c->extended));
    if (same) return GS_STORE_UNCHANGED;
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    if (!json_is_object(json_object_get(next, "status"))) json_object_set_new(next, "status", json_object());
    st = json_object_get(next, "status");
    if (c->statuses) json_object_set(st, "resourceClaimStatuses", c->statuses);
    if (c->extended) json_object_set(st, "extendedResourceClaimStatus", c->extended);
    *out = next;
    return 0;
}

struct prune_ctx {
    const char *uid;
    const char *const *dead; size_t ndead; /* pod uids found gone or finished */
    bool dealloc_unreserved;               /* an allocated claim without consumers is deallocated too */
    bool deallocated;                      /* out */
    size_t pruned;                         /* out */
};

static int prune_fn(json_t *cur, json_t **out, void *arg)
{
    struct prune_ctx *c = arg;
    if (!cur) return GS_ENOENT;
    const char *uid = jstr(cur, "metadata", "uid");
    if (c->uid && (!uid || strcmp(uid, c->uid))) return GS_ENOENT;
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    json_t *st = json_object_get(next, "status");
    json_t *rf = json_object_get(st, "reservedFor");
    size_t before = json_array_size(rf), pruned = 0;
    for (size_t i = json_array_size(rf); i-- > 0;) {
        const json_t *r = json_array_get(rf, i);
        const char *res = jstr(r, "resource", NULL);
        if ((!res || !strcmp(res, "pods")) && strs_has(c->dead, c->ndead, jstr(r, "uid", NULL))) {
            json_array_remove(rf, i);
            pruned++;
        }
    }
    if (rf && !json_array_size(rf)) json_object_del(st, "reservedFor");
    bool unreserved = !json_array_size(json_object_get(st, "reservedFor"));
    if (unreserved && json_object_get(st, "allocation") && ((before && pruned) || c->dealloc_unreserved)) {
        json_object_del(st, "allocation");
        json_object_del(st, "devices");
        c->deallocated = true;
    }
    c->pruned = pruned;
    if (json_equal(next, cur)) {
        json_decref(next);
        return GS_STORE_UNCHANGED;
    }
    *out = next;
    return 0;
}

struct fin_ctx { const char *uid; bool want; };

static int finalizer_fn(json_t *cur, json_t **out, void *arg)
{
    struct fin_ctx *c = arg;
    if (!cur) return GS_ENOENT;
    const char *uid = jstr(cur, "metadata", "uid");
    if (c->uid && (!uid || strcmp(uid, c->uid))) return GS_ENOENT;
    /* Decided on the current version: allocated now means protected. */
    bool want = c->want && jpath(cur, "status", "allocation");
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    json_t *md = json_object_get(next, "metadata");
    json_t *fin = json_object_get(md, "finalizers");
    bool has = false;
    for (size_t i = json_array_size(fin); i-- > 0;)
        if (json_string_value(json_array_get(fin, i)) && !strcmp(json_string_value(json_array_get(fin, i)), GS_FINALIZER_CLAIM)) {
            has = true;
            if (!want) json_array_remove(fin, i);
        }
    if (want && !has) {
        if (!fin) json_object_set_new(md, "finalizers", fin = json_array());
        json_array_append_new(fin, json_string(GS_FINALIZER_CLAIM));
    }
    if (fin && !json_array_size(fin)) json_object_del(md, "finalizers");
    if (json_equal(next, cur)) {
        json_decref(next);
        return GS_STORE_UNCHANGED;
    }
    *out = next;
    return 0;
}

/*--- One pass ---*/

struct pass {
    struct gs_claims *c;
    struct list claims, pods, templates, classes;
    const char **dead; size_t ndead;    /* pod uids gone or finished */
    const char **exist; size_t nexist;  /* every listed pod's uid */
};

static void count(struct gs_claims *c, uint64_t *field)
{
    pthread_mutex_lock(&c->mu);
    (*field)++;
    pthread_mutex_unlock(&c->mu);
}

static char *claim_key(const char *ns, const char *name)
{
    size_t n = strlen(GS_CLAIMS_PREFIX) + strlen(ns) + strlen(name) + 2;
    char *k = malloc(n);
    if (k) snprintf(k, n, "%s%s/%s", GS_CLAIMS_PREFIX, ns, name);
    return k;
}

/* An existing claim of pod for entry (annotation and owner), or NULL. */
static json_t *owned_claim(struct pass *p, const json_t *pod, const char *entry, bool extended)
{
    const char *uid = jstr(pod, "metadata", "uid"), *ns = ns_of(pod);
    for (size_t i = 0; uid && i < p->claims.n; i++) {
        const json_t *cl = p->claims.v[i];
        const json_t *own = pod_owner(cl);
        if (!own || strcmp(ns_of(cl), ns) || !jstr(own, "uid", NULL) || strcmp(jstr(own, "uid", NULL), uid)) continue;
        const json_t *ann = jpath(cl, "metadata", "annotations");
        if (extended ? json_object_get(ann, GS_ANN_EXTENDED_CLAIM) != NULL
                     : jstr(ann, GS_ANN_POD_CLAIM_NAME, NULL) && !strcmp(jstr(ann, GS_ANN_POD_CLAIM_NAME, NULL), entry))
            return p->claims.v[i];
    }
    return NULL;
}

/* Creates claim name from spec for pod; the new claim joins p->claims. */
static int create_claim(struct pass *p, const json_t *pod, const char *name, const char *api, json_t *spec,
                        const json_t *tmpl_meta, const char *ann_key, const char *ann_val)
{
    const char *ns = ns_of(pod);
    json_t *labels = json_deep_copy(json_object_get(tmpl_meta, "labels"));
    json_t *anns = json_deep_copy(json_object_get(tmpl_meta, "annotations"));
    if (!json_is_object(labels)) json_decref(labels), labels = NULL;
    if (!json_is_object(anns)) json_decref(anns), anns = json_object();
    json_object_set_new(anns, ann_key, json_string(ann_val));
    json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:s, s:o, s:[{s:s, s:s, s:s, s:s, s:b, s:b}]}, s:O}", "apiVersion",
                            api, "kind", "ResourceClaim", "metadata", "name", name, "namespace", ns, "annotations",
                            anns, "ownerReferences", "apiVersion", "v1", "kind", "Pod", "name",
                            jstr(pod, "metadata", "name"), "uid", jstr(pod, "metadata", "uid"), "controller", 1,
                            "blockOwnerDeletion", 1, "spec", spec);
    if (!obj) {
        json_decref(labels);
        return GS_ENOMEM;
    }
    if (labels) json_object_set_new(json_object_get(obj, "metadata"), "labels", labels);
    char *key = claim_key(ns, name);
    int err = key ? gs_source_create(p->c->o.source, key, obj, NULL) : GS_ENOMEM;
    free(key);
    if (!err) {
        count(p->c, &p->c->st.created);
        list_add(NULL, obj, &p->claims);
        gs_log(GS_LOG_INFO, "claims: created", "claim", name, "namespace", ns, "pod", jstr(pod, "metadata", "name"),
               NULL);
    } else if (err != GS_EEXIST) {
        count(p->c, &p->c->st.errors);
        gs_log(GS_LOG_WARN, "claims: cannot create claim", "claim", name, "namespace", ns, "error", gs_strerror(err),
               NULL);
    }
    json_decref(obj);
    return err;
}

/* The DeviceClass whose spec.extendedResourceName is res, or NULL. */
static const json_t *class_for(const struct pass *p, const char *res)
{
    for (size_t i = 0; i < p->classes.n; i++) {
        const char *e = jstr(jpath(p->classes.v[i], "spec", NULL), "extendedResourceName", NULL);
        if (e && !strcmp(e, res)) return p->classes.v[i];
    }
    return NULL;
}

/* One request of an extended-resource claim, in the shape of api. */
static json_t *ext_request(const char *api, const char *name, const char *cls, json_int_t n)
{
    if (!strcmp(api, "resource.k8s.io/v1"))
        return json_pack("{s:s, s:{s:s, s:s, s:I}}", "name", name, "exactly", "deviceClassName", cls, "allocationMode",
                         "ExactCount", "count", n);
    return json_pack("{s:s, s:s, s:s, s:I}", "name", name, "deviceClassName", cls, "allocationMode", "ExactCount",
                     "count", n);
}

/* The pod's extended-resource claim, when a class serves one of its
 * extended resources: the wanted status in *ext (new reference), NULL when
 * none applies. */
static int pod_extended(struct pass *p, const json_t *pod, json_t **ext)
{
    *ext = NULL;
    if (!p->classes.n) return 0;
    const char *api = p->c->o.api_version ? p->c->o.api_version : "resource.k8s.io/v1beta1";
    json_t *reqs = json_array(), *maps = json_array();
    size_t ci;
    const json_t *ctr;
    json_array_foreach(jpath(pod, "spec", "containers"), ci, ctr) {
        const json_t *res = jpath(ctr, "resources", "requests");
        if (!res) res = jpath(ctr, "resources", "limits");
        const char *rn;
        const json_t *amt;
        size_t j = 0;
        json_object_foreach((json_t *)res, rn, amt) {
            const json_t *cls = class_for(p, rn);
            if (!cls) continue;
            json_int_t n = json_is_integer(amt) ? json_integer_value(amt)
                           : json_is_string(amt) ? strtoll(json_string_value(amt), NULL, 10) : 0;
            if (n <= 0) continue;
            char req[64];
            snprintf(req, sizeof req, "container-%zu-request-%zu", ci, j++);
            json_array_append_new(reqs, ext_request(api, req, jstr(cls, "metadata", "name"), n));
            json_array_append_new(maps, json_pack("{s:s, s:s, s:s}", "containerName",
                                                  jstr(ctr, "name", NULL) ? jstr(ctr, "name", NULL) : "", "resourceName",
                                                  rn, "requestName", req));
        }
    }
    int err = 0;
    if (json_array_size(reqs)) {
        const json_t *have = owned_claim(p, pod, NULL, true);
        char name[256];
        if (have) snprintf(name, sizeof name, "%s", jstr(have, "metadata", "name"));
        else {
            gs_claims_generated_name(jstr(pod, "metadata", "name"), "extended-resources", jstr(pod, "metadata", "uid"),
                                     p->c->o.seed, name, sizeof name);
            json_t *spec = json_pack("{s:{s:O}}", "devices", "requests", reqs);
            err = create_claim(p, pod, name, api, spec, NULL, GS_ANN_EXTENDED_CLAIM, "true");
            json_decref(spec);
            if (err == GS_EEXIST) err = 0;
        }
        if (!err) *ext = json_pack("{s:s, s:O}", "resourceClaimName", name, "requestMappings", maps);
    }
    json_decref(reqs);
    json_decref(maps);
    return err;
}

static void sync_pod(struct pass *p, const json_t *pod)
{
    if (pod_terminal(pod) || jpath(pod, "metadata", "deletionTimestamp")) return;
    const char *pname = jstr(pod, "metadata", "name"), *uid = jstr(pod, "metadata", "uid"), *ns = ns_of(pod);
    if (!pname || !uid) return;
    const json_t *entries = jpath(pod, "spec", "resourceClaims");
    json_t *statuses = json_array();
    bool complete = true;
    size_t i;
    const json_t *en;
    json_array_foreach(entries, i, en) {
        const char *ename = jstr(en, "name", NULL), *tname = jstr(en, "resourceClaimTemplateName", NULL);
        if (!ename || !tname) continue; /* resourceClaimName: the claim exists on its own */
        const json_t *have = owned_claim(p, pod, ename, false);
        char name[256];
        if (have) snprintf(name, sizeof name, "%s", jstr(have, "metadata", "name"));
        else {
            const json_t *t = find_named(&p->templates, ns, tname);
            if (!t) { /* the scheduler says so; created once it appears */
                complete = false;
                continue;
            }
            gs_claims_generated_name(pname, ename, uid, p->c->o.seed, name, sizeof name);
            const char *api = jstr(t, "apiVersion", NULL);
            json_t *spec = jpath(t, "spec", "spec");
            json_t *copy = spec ? json_deep_copy(spec) : json_object();
            int err = create_claim(p, pod, name, api ? api : "resource.k8s.io/v1beta1", copy,
                                   jpath(t, "spec", "metadata"), GS_ANN_POD_CLAIM_NAME, ename);
            json_decref(copy);
            if (err && err != GS_EEXIST) {
                complete = false;
                continue;
            }
        }
        json_array_append_new(statuses, json_pack("{s:s, s:s}", "name", ename, "resourceClaimName", name));
    }
    json_t *ext = NULL;
    pod_extended(p, pod, &ext);
    /* Entries whose template is missing keep what the pod already says. */
    bool write_st = json_array_size(statuses) && complete;
    if (write_st || ext) {
        char key[600];
        snprintf(key, sizeof key, "pods/%s/%s", ns, pname);
        struct pod_status_ctx c = {uid, write_st ? statuses : NULL, ext};
        json_t *out = NULL;
        int err = gs_source_mutate(p->c->o.source, key, "status", pod_status_fn, &c, &out, NULL);
        if (!err && out && !json_equal(jpath(out, "status", "resourceClaimStatuses"),
                                       jpath(pod, "status", "resourceClaimStatuses")))
            count(p->c, &p->c->st.pod_status);
        else if (!err && out && ext && !json_equal(jpath(out, "status", "extendedResourceClaimStatus"),
                                                   jpath(pod, "status", "extendedResourceClaimStatus")))
            count(p->c, &p->c->st.pod_status);
        else if (err && err != GS_ENOENT) count(p->c, &p->c->st.errors);
        json_decref(out);
    }
    json_decref(ext);
    json_decref(statuses);
}

static void sync_claim(struct pass *p, const json_t *cl)
{
    const char *name = jstr(cl, "metadata", "name"), *uid = jstr(cl, "metadata", "uid"), *ns = ns_of(cl);
    if (!name) return;
    char *key = claim_key(ns, name);
    if (!key) return;
    const json_t *own = pod_owner(cl);
    bool orphan = own && !strs_has(p->exist, p->nexist, jstr(own, "uid", NULL));
    bool deleting = jpath(cl, "metadata", "deletionTimestamp") != NULL;
    /* reservedFor upkeep and deallocation. A claim being deleted or whose
     * pod is gone gives its devices back even without a consumer entry. */
    const json_t *st = json_object_get(cl, "status");
    bool allocated = json_object_get(st, "allocation") != NULL;
    bool has_dead = false;
    size_t i;
    const json_t *r;
    json_array_foreach(json_object_get(st, "reservedFor"), i, r)
        has_dead |= strs_has(p->dead, p->ndead, jstr(r, "uid", NULL));
    bool unreserved = !json_array_size(json_object_get(st, "reservedFor"));
    if (has_dead || (allocated && unreserved && (orphan || deleting))) {
        struct prune_ctx c = {uid, p->dead, p->ndead, orphan || deleting, false, 0};
        int err = gs_source_mutate(p->c->o.source, key, "status", prune_fn, &c, NULL, NULL);
        if (!err) {
            pthread_mutex_lock(&p->c->mu);
            p->c->st.pruned += c.pruned;
            p->c->st.deallocated += c.deallocated;
            pthread_mutex_unlock(&p->c->mu);
            if (c.deallocated) {
                allocated = false;
                gs_log(GS_LOG_INFO, "claims: deallocated", "claim", name, "namespace", ns, NULL);
            }
        } else if (err != GS_ENOENT) count(p->c, &p->c->st.errors);
    }
    /* The finalizer follows the allocation. */
    bool has_fin = false;
    json_array_foreach(jpath(cl, "metadata", "finalizers"), i, r)
        has_fin |= json_string_value(r) && !strcmp(json_string_value(r), GS_FINALIZER_CLAIM);
    if (has_fin != allocated) {
        struct fin_ctx c = {uid, allocated};
        int err = gs_source_mutate(p->c->o.source, key, NULL, finalizer_fn, &c, NULL, NULL);
        if (err && err != GS_ENOENT) count(p->c, &p->c->st.errors);
    }
    if (orphan && !allocated && !deleting) {
        int err = gs_source_remove(p->c->o.source, key, uid, 0, NULL);
        if (!err) {
            count(p->c, &p->c->st.deleted);
            gs_log(GS_LOG_INFO, "claims: deleted with its pod", "claim", name, "namespace", ns, NULL);
        } else if (err != GS_ENOENT) count(p->c, &p->c->st.errors);
    }
    free(key);
}

static void pass_free(struct pass *p)
{
    list_free(&p->claims), list_free(&p->pods), list_free(&p->templates), list_free(&p->classes);
    free(p->dead);
    free(p->exist);
}

static int pod_names_claims(const char *key, json_t *pod, void *arg)
{
    (void)key;
    if (json_array_size(jpath(pod, "spec", "resourceClaims")) > 0) *(bool *)arg = true;
    return 0;
}

/* While idle: 1 when a look at everything (pods not kept) finds the
 * controller still idle, its cursor moved to the lists' version; 0 when a
 * full pass is needed; a negative error. */
static int still_idle(struct gs_claims *c)
{
    struct list claims = {0}, templates = {0}, classes = {0};
    bool pods_claim = false;
    int64_t cur = INT64_MAX, k = INT64_MAX;
    struct { const char *prefix; gs_store_list_fn fn; void *arg; } lists[] = {
        {GS_CLAIMS_PREFIX, list_add, &claims}, {"pods/", pod_names_claims, &pods_claim},
        {GS_CLAIM_TEMPLATES_PREFIX, list_add, &templates}, {GS_DEVICECLASSES_PREFIX, list_add, &classes}};
    int err = 0;
    for (size_t i = 0; i < sizeof lists / sizeof lists[0] && !err; i++) {
        k = INT64_MAX;
        int e = gs_source_list(c->o.source, lists[i].prefix, lists[i].fn, lists[i].arg, &k);
        if (e && e != GS_ENOENT) err = e;
        else if (!e && k < cur) cur = k;
    }
    bool any = pods_claim || claims.n || templates.n;
    for (size_t i = 0; !any && i < classes.n; i++)
        any = jstr(json_object_get(classes.v[i], "spec"), "extendedResourceName", NULL) != NULL;
    list_free(&claims), list_free(&templates), list_free(&classes);
    if (err) return err;
    if (any) return 0;
    if (cur != INT64_MAX) c->cursor = cur;
    count(c, &c->st.passes);
    return 1;
}

int gs_claims_sync(struct gs_claims *c)
{
    if (c->o.may_write && !c->o.may_write(c->o.may_write_ctx)) return 0; /* another replica leads */
    if (c->idle) {
        int e = still_idle(c);
        if (e) return e < 0 ? e : 0;
        c->idle = false; /* something to do: the full pass below */
    }
    struct pass p = {.c = c};
    int64_t cur = INT64_MAX, k;
    int err = 0;
    /* Claims before pods (claims.h). A resource the source does not follow is empty. */
    struct { const char *prefix; struct list *l; } lists[] = {
        {GS_CLAIMS_PREFIX, &p.claims}, {"pods/", &p.pods},
        {GS_CLAIM_TEMPLATES_PREFIX, &p.templates}, {GS_DEVICECLASSES_PREFIX, &p.classes}};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        k = INT64_MAX;
        int e = gs_source_list(c->o.source, lists[i].prefix, list_add, lists[i].l, &k);
        if (e == GS_ENOENT) continue;
        if (e) {
            err = e;
            break;
        }
        if (k < cur) cur = k;
    }
    if (err) {
        pass_free(&p);
        return err;
    }
    if (cur != INT64_MAX) c->cursor = cur;
    p.dead = calloc(p.pods.n + 1, sizeof *p.dead);
    p.exist = calloc(p.pods.n + 1, sizeof *p.exist);
    if (!p.dead || !p.exist) {
        pass_free(&p);
        return GS_ENOMEM;
    }
    for (size_t i = 0; i < p.pods.n; i++) {
        const char *uid = jstr(p.pods.v[i], "metadata", "uid");
        if (!uid) continue;
        p.exist[p.nexist++] = uid;
        if (pod_terminal(p.pods.v[i])) p.dead[p.ndead++] = uid;
    }
    /* Consumers a claim names that no listed pod has are gone. */
    size_t nclaims = p.claims.n;
    for (size_t i = 0; i < nclaims; i++) {
        size_t j;
        const json_t *r;
        json_array_foreach(jpath(p.claims.v[i], "status", "reservedFor"), j, r) {
            const char *uid = jstr(r, "uid", NULL), *res = jstr(r, "resource", NULL);
            if (!uid || (res && strcmp(res, "pods")) || strs_has(p.exist, p.nexist, uid)) continue;
            const char **d = realloc(p.dead, (p.ndead + 1) * sizeof *d);
            if (!d) break;
            p.dead = d;
            p.dead[p.ndead++] = uid;
        }
    }
    bool any = p.claims.n || p.templates.n;
    for (size_t i = 0; !any && i < p.classes.n; i++)
        any = jstr(json_object_get(p.classes.v[i], "spec"), "extendedResourceName", NULL) != NULL;
    for (size_t i = 0; !any && i < p.pods.n; i++)
        any = json_array_size(jpath(p.pods.v[i], "spec", "resourceClaims")) > 0;
    c->idle = !any;
    for (size_t i = 0; i < p.pods.n && !atomic_load(&c->stop); i++) sync_pod(&p, p.pods.v[i]);
    for (size_t i = 0; i < nclaims && !atomic_load(&c->stop); i++) sync_claim(&p, p.claims.v[i]);
    count(c, &c->st.passes);
    pass_free(&p);
    return 0;
}

/*--- The thread ---*/

/* Does a change call for a pass? While idle, a pod matters only when it names claims. */
static bool relevant(const struct gs_claims *c, const struct gs_store_event *ev)
{
    const char *key = ev->key;
    if (c->idle && !strncmp(key, "pods/", 5)) return ev->value && strstr(ev->value, "\"resourceClaims\"");
    static const char *const pre[] = {"pods/", GS_CLAIMS_PREFIX, GS_CLAIM_TEMPLATES_PREFIX, GS_DEVICECLASSES_PREFIX};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
        if (!strncmp(key, pre[i], strlen(pre[i]))) return true;
    return false;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *claims_main(void *arg)
{
    struct gs_claims *c = arg;
    int64_t period = c->o.period_ms > 0 ? c->o.period_ms : RESYNC_MS, last = 0;
    bool due = true;
    while (!atomic_load(&c->stop)) {
        if (due) {
            gs_claims_sync(c);
            last = mono_ms();
            due = false;
        }
        struct gs_store_event *evs = NULL;
        size_t n = 0;
        int err = gs_source_events(c->o.source, &c->cursor, NULL, 1000, &c->stop, &evs, &n);
        /* Fell behind the stream, or a quiet period: look at everything again. */
        if (err == GS_ERANGE || (n == 0 && mono_ms() - last >= period)) due = true;
        for (size_t i = 0; i < n && !due; i++) due = relevant(c, &evs[i]);
        gs_store_events_free(evs, n);
        if (err && err != GS_ERANGE) {
            struct timespec ts = {0, 200 * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (due) { /* a burst of changes is one pass */
            struct timespec ts = {0, MIN_GAP_MS * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

int gs_claims_new(const struct gs_claims_opts *o, struct gs_claims **out)
{
    struct gs_claims *c = calloc(1, sizeof *c);
    if (!c) return GS_ENOMEM;
    c->o = *o;
    c->idle = true; /* the first pass is a look too: a restart at 500,000 pods keeps none of them */
    atomic_init(&c->stop, false);
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return 0;
}

int gs_claims_start(const struct gs_claims_opts *o, struct gs_claims **out)
{
    int err = gs_claims_new(o, out);
    if (err) return err;
    if (pthread_create(&(*out)->th, NULL, claims_main, *out)) {
        gs_claims_stop(*out);
        *out = NULL;
        return GS_ENOMEM;
    }
    (*out)->running = true;
    return 0;
}

void gs_claims_stop(struct gs_claims *c)
{
    if (!c) return;
    atomic_store(&c->stop, true);
    if (c->running) {
        gs_source_interrupt(c->o.source);
        pthread_join(c->th, NULL);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void gs_claims_stats(struct gs_claims *c, struct gs_claims_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}

/*--- The scheduler's claim writes (sched/dra_plugin.h) ---*/

static bool reserved_has(const json_t *rf, const char *uid)
{
    size_t i;
    const json_t *r;
    json_array_foreach(rf, i, r) {
        const char *u = json_string_value(json_object_get(r, "uid"));
        if (u && uid && !strcmp(u, uid)) return true;
    }
    return false;
}

int gs_dra_claim_status_fn(json_t *cur, json_t **out, void *arg)
{
    const struct gs_dra_claim_write *w = arg;
    if (!cur) return GS_ENOENT;
    const char *uid = json_string_value(json_object_get(json_object_get(cur, "metadata"), "uid"));
    if (w->uid && (!uid || strcmp(uid, w->uid))) return GS_ENOENT;
    if (json_object_get(json_object_get(cur, "metadata"), "deletionTimestamp")) return GS_ENOENT;
    const json_t *st = json_object_get(cur, "status");
    const json_t *have = json_object_get(st, "allocation");
    if (w->allocation && have && !json_equal(json_object_get(have, "devices"), json_object_get(w->allocation, "devices")))
        return GS_ECONFLICT; /* allocated elsewhere meanwhile */
    if (!w->allocation && !have) return GS_ECONFLICT; /* deallocated meanwhile */
    if (reserved_has(json_object_get(st, "reservedFor"), w->pod_uid) && (have || !w->allocation))
        return GS_STORE_UNCHANGED;
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    if (!json_is_object(json_object_get(next, "status"))) json_object_set_new(next, "status", json_object());
    json_t *ns = json_object_get(next, "status");
    if (w->allocation && !have) json_object_set(ns, "allocation", w->allocation);
    json_t *rf = json_object_get(ns, "reservedFor");
    if (!json_is_array(rf)) json_object_set_new(ns, "reservedFor", rf = json_array());
    if (!reserved_has(rf, w->pod_uid)) {
        json_t *e = json_pack("{s:s, s:s}", "resource", "pods", "name", w->pod_name);
        if (w->pod_uid) json_object_set_new(e, "uid", json_string(w->pod_uid));
        json_array_append_new(rf, e);
    }
    *out = next;
    return 0;
}

int gs_dra_claim_undo_fn(json_t *cur, json_t **out, void *arg)
{
    const struct gs_dra_claim_write *w = arg;
    if (!cur) return GS_ENOENT;
    const char *uid = json_string_value(json_object_get(json_object_get(cur, "metadata"), "uid"));
    if (w->uid && (!uid || strcmp(uid, w->uid))) return GS_ENOENT;
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    json_t *st = json_object_get(next, "status");
    json_t *rf = json_object_get(st, "reservedFor");
    for (size_t i = json_array_size(rf); i-- > 0;) {
        const char *u = json_string_value(json_object_get(json_array_get(rf, i), "uid"));
        if (u && w->pod_uid && !strcmp(u, w->pod_uid)) json_array_remove(rf, i);
    }
    if (rf && !json_array_size(rf)) json_object_del(st, "reservedFor");
    if (w->allocation && !json_array_size(json_object_get(st, "reservedFor")) &&
        json_equal(json_object_get(json_object_get(st, "allocation"), "devices"),
                   json_object_get(w->allocation, "devices")))
        json_object_del(st, "allocation");
    if (json_equal(next, cur)) {
        json_decref(next);
        return GS_STORE_UNCHANGED;
    }
    *out = next;
    return 0;
}
