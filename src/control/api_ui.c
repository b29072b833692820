/*
 * api_ui.c - the console's read-only routes and the queue usage history;
 * see api_ui.h.
 *
 * History is kept as one JSON object per queue with an array of samples,
 * trimmed to the ring's capacity from the front: a few hundred small
 * objects per queue, read by whole-list requests that copy them under the
 * lock. A queue that disappears keeps its history until it has no sample
 * left in the window (it stops getting new ones), so a deleted queue still
 * shows what it did in the last hours.
 *
 * LocalQueue samples are counted from the pods that name the queue
 * (kueue.x-k8s.io/queue-name): no LocalQueue status is written by the
 * server, and counting here keeps a tenant's view to its own pods.
 */
#include "control/api_ui.h"

#include "control/apiserver_int.h"
#include "control/gridview.h"
#include "core/log.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GPU "nvidia.com/gpu"
#define LQ_LABEL "kueue.x-k8s.io/queue-name"
/* How long a grid request waits for the view to reach the store's version before reading the store. */
#define GRID_WAIT_MS 1000

struct gs_ui_history {
    struct gs_store *store;
    int64_t interval_ms;
    size_t cap;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, running;
    pthread_t th;
    json_t *queues; /* "<Kind>/<ns>/<name>" -> {queueKind, namespace, name, clusterQueue, samples: [...]}, under mu */
};

/*--- Sampling ---*/

/* A Kubernetes quantity as a number: "4", "500m", "1.5"; 0 when absent or unreadable. */
static double qty(const json_t *v)
{
    if (json_is_number(v)) return json_number_value(v);
    const char *s = json_string_value(v);
    if (!s) return 0;
    char *end = NULL;
    double d = strtod(s, &end);
    if (end == s || !isfinite(d)) return 0;
    return *end == 'm' && !end[1] ? d / 1000 : d;
}

static double gpu_of(const json_t *status_admission, const char *field)
{
    return qty(json_object_get(json_object_get(status_admission, field), GPU));
}

struct sample_ctx {
    json_t *next; /* the sample of this round, per key */
    double now;
};

static json_t *entry(struct sample_ctx *c, const char *kind, const char *ns, const char *name)
{
    char key[800];
    snprintf(key, sizeof key, "%s/%s/%s", kind, ns, name);
    json_t *e = json_object_get(c->next, key);
    if (!e) {
        e = json_pack("{s:s, s:s, s:s, s:{s:f}}", "queueKind", kind, "namespace", ns, "name", name, "sample", "t",
                      c->now);
        if (e) json_object_set_new(c->next, key, e);
    }
    return e;
}

/* A ClusterQueue or Volcano Queue: what admission wrote on its status. */
static int cluster_queue_one(const char *key, json_t *obj, void *arg, const char *kind)
{
    (void)key;
    struct sample_ctx *c = arg;
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (!name) return 0;
    json_t *e = entry(c, kind, "", name);
    if (!e) return GS_ENOMEM;
    json_t *st = json_object_get(obj, "status"), *adm = json_object_get(st, "admission");
    json_t *s = json_object_get(e, "sample");
    bool volcano = !strcmp(kind, "Queue");
    json_object_set_new(s, "used", json_real(gpu_of(adm, "usage")));
    json_object_set_new(s, "nominal", json_real(gpu_of(adm, "nominal")));
    json_object_set_new(s, "borrowed", json_real(gpu_of(adm, "borrowed")));
    json_object_set_new(s, "lent", json_real(gpu_of(adm, "lent")));
    json_object_set_new(s, "fairShare", json_real(gpu_of(adm, "fairShare")));
    json_object_set_new(s, "weightedShare", json_real(json_number_value(json_object_get(adm, "weightedShare"))));
    json_object_set_new(s, "pending", json_integer(json_integer_value(
                                          json_object_get(st, volcano ? "pending" : "pendingWorkloads"))));
    json_object_set_new(s, "admitted", json_integer(json_integer_value(
                                           json_object_get(st, volcano ? "running" : "admittedWorkloads"))));
    const char *cohort = json_string_value(json_object_get(json_object_get(obj, "spec"), "cohort"));
    if (cohort) json_object_set_new(e, "cohort", json_string(cohort));
    return 0;
}

static int cq_one(const char *key, json_t *obj, void *arg) { return cluster_queue_one(key, obj, arg, "ClusterQueue"); }
static int vq_one(const char *key, json_t *obj, void *arg) { return cluster_queue_one(key, obj, arg, "Queue"); }

static json_t *zero_lq(struct sample_ctx *c, const char *ns, const char *name)
{
    json_t *e = entry(c, "LocalQueue", ns, name);
    if (!e) return NULL;
    json_t *s = json_object_get(e, "sample");
    if (!json_object_get(s, "used")) {
        json_object_set_new(s, "used", json_real(0));
        json_object_set_new(s, "pending", json_integer(0));
        json_object_set_new(s, "admitted", json_integer(0));
    }
    return e;
}

static int lq_one(const char *key, json_t *obj, void *arg)
{
    (void)key;
    json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    if (!ns || !name) return 0;
    json_t *e = zero_lq(arg, ns, name);
    if (!e) return GS_ENOMEM;
    const char *cq = json_string_value(json_object_get(json_object_get(obj, "spec"), "clusterQueue"));
    if (cq) json_object_set_new(e, "clusterQueue", json_string(cq));
    return 0;
}

double gs__ui_pod_gpus(const json_t *pod)
{
    double sum = 0;
    size_t i;
    json_t *ctr;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, ctr) {
        json_t *res = json_object_get(ctr, "resources");
        json_t *v = json_object_get(json_object_get(res, "limits"), GPU);
        sum += qty(v ? v : json_object_get(json_object_get(res, "requests"), GPU));
    }
    return sum;
}

/* A pod in a LocalQueue: pending (not bound) or admitted (bound, not finished). */
static int pod_one(const char *key, json_t *obj, void *arg)
{
    (void)key;
    json_t *md = json_object_get(obj, "metadata");
    const char *lq = json_string_value(json_object_get(json_object_get(md, "labels"), LQ_LABEL));
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    if (!lq || !ns) return 0;
    const char *phase = json_string_value(json_object_get(json_object_get(obj, "status"), "phase"));
    if (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))) return 0;
    json_t *e = zero_lq(arg, ns, lq);
    if (!e) return GS_ENOMEM;
    json_t *s = json_object_get(e, "sample");
    bool bound = json_string_value(json_object_get(json_object_get(obj, "spec"), "nodeName")) != NULL;
    const char *field = bound ? "admitted" : "pending";
    json_object_set_new(s, field, json_integer(json_integer_value(json_object_get(s, field)) + 1));
    if (bound) json_object_set_new(s, "used", json_real(json_number_value(json_object_get(s, "used")) + gs__ui_pod_gpus(obj)));
    return 0;
}

static int list_kind(struct gs_store *st, const char *group, const char *version, const char *plural,
                     gs_store_list_fn fn, void *arg)
{
    const struct gs_api_resource *r = gs_api_resource_find(group, version, plural);
    char prefix[256];
    if (!r || gs_api_key(r, NULL, NULL, prefix, sizeof prefix) < 0) return GS_EINVAL;
    int64_t rv;
    int err = gs_store_list(st, prefix, fn, arg, &rv);
    return err == 1 ? 0 : err;
}

int gs_ui_history_sample(struct gs_ui_history *h, double now)
{
    struct sample_ctx c = {json_object(), now};
    if (!c.next) return GS_ENOMEM;
    int err = list_kind(h->store, "kueue.x-k8s.io", "v1beta1", "clusterqueues", cq_one, &c);
    if (!err) err = list_kind(h->store, "scheduling.gpusched.io", "v1alpha1", "queues", vq_one, &c);
    if (!err) err = list_kind(h->store, "kueue.x-k8s.io", "v1beta1", "localqueues", lq_one, &c);
    /* Pods only when some LocalQueue exists: listing every pod is the sample's whole cost. */
    bool any_lq = false;
    const char *k;
    json_t *v;
    json_object_foreach(c.next, k, v) any_lq = any_lq || !strncmp(k, "LocalQueue/", 11);
    if (!err && any_lq) err = list_kind(h->store, "", "v1", "pods", pod_one, &c);
    if (err) {
        json_decref(c.next);
        return err;
    }
    pthread_mutex_lock(&h->mu);
    const char *key;
    json_t *e, *tmp;
    json_object_foreach(c.next, key, e) {
        json_t *have = json_object_get(h->queues, key);
        if (!have) {
            have = json_pack("{s:O, s:O, s:O, s:[]}", "queueKind", json_object_get(e, "queueKind"), "namespace",
                             json_object_get(e, "namespace"), "name", json_object_get(e, "name"), "samples");
            if (!have) continue;
            json_object_set_new(h->queues, key, have);
        }
        const char *extra[] = {"clusterQueue", "cohort"};
        for (size_t k = 0; k < 2; k++)
            if (json_object_get(e, extra[k])) json_object_set(have, extra[k], json_object_get(e, extra[k]));
        json_array_append(json_object_get(have, "samples"), json_object_get(e, "sample"));
    }
    /* Trim every ring, the vanished queues' too; drop a queue with nothing left in the window. */
    double oldest = now - (double)h->interval_ms / 1000.0 * (double)h->cap;
    json_object_foreach_safe(h->queues, tmp, key, e) {
        json_t *samples = json_object_get(e, "samples");
        while (json_array_size(samples) > h->cap) json_array_remove(samples, 0);
        while (json_array_size(samples) &&
               json_number_value(json_object_get(json_array_get(samples, 0), "t")) < oldest)
            json_array_remove(samples, 0);
        if (!json_array_size(samples)) json_object_del(h->queues, key);
    }
    pthread_mutex_unlock(&h->mu);
    json_decref(c.next);
    return 0;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *sampler(void *arg)
{
    struct gs_ui_history *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        pthread_mutex_unlock(&h->mu);
        int err = gs_ui_history_sample(h, wall_now());
        if (err) gs_log(GS_LOG_DEBUG, "ui: queue history sample failed", "error", gs_strerror(err), NULL);
        pthread_mutex_lock(&h->mu);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += h->interval_ms / 1000;
        until.tv_nsec += (h->interval_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
        while (!h->stop && pthread_cond_timedwait(&h->cv, &h->mu, &until) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

int gs_ui_history_new(struct gs_store *store, int64_t interval_ms, size_t cap, struct gs_ui_history **out)
{
    *out = NULL;
    if (interval_ms < 10 || cap < 2) return GS_EINVAL;
    struct gs_ui_history *h = calloc(1, sizeof *h);
    if (!h || !(h->queues = json_object())) {
        free(h);
        return GS_ENOMEM;
    }
    h->store = store, h->interval_ms = interval_ms, h->cap = cap;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    if (store) {
        if (pthread_create(&h->th, NULL, sampler, h)) {
            gs_ui_history_free(h);
            return GS_EIO;
        }
        h->running = true;
    }
    *out = h;
    return 0;
}

void gs_ui_history_free(struct gs_ui_history *h)
{
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (h->running) pthread_join(h->th, NULL);
    json_decref(h->queues);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

json_t *gs_ui_history_list(struct gs_ui_history *h, bool (*keep)(const char *ns, void *arg), void *arg)
{
    json_t *items = json_array();
    json_t *doc = json_pack("{s:s, s:s, s:{s:f, s:I}, s:o}", "apiVersion", "ui.gpusched.io/v1", "kind",
                            "QueueHistoryList", "metadata", "intervalSeconds", (double)h->interval_ms / 1000.0,
                            "capacity", (json_int_t)h->cap, "items", items);
    if (!doc) return NULL;
    pthread_mutex_lock(&h->mu);
    const char *key;
    json_t *e;
    json_object_foreach(h->queues, key, e) {
        const char *ns = json_string_value(json_object_get(e, "namespace"));
        if (keep && !keep(ns ? ns : "", arg)) continue;
        json_t *md = json_pack("{s:O}", "name", json_object_get(e, "name"));
        if (ns && *ns) json_object_set_new(md, "namespace", json_string(ns));
        /* The first sample's time: a table's AGE then says how far back the history reaches. */
        time_t first = (time_t)json_number_value(json_object_get(json_array_get(json_object_get(e, "samples"), 0), "t"));
        struct tm tm;
        char ts[32];
        gmtime_r(&first, &tm);
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
        json_object_set_new(md, "creationTimestamp", json_string(ts));
        json_t *item = json_pack("{s:s, s:s, s:o, s:O, s:O}", "apiVersion", "ui.gpusched.io/v1", "kind",
                                 "QueueHistory", "metadata", md, "queueKind", json_object_get(e, "queueKind"),
                                 "samples", json_object_get(e, "samples"));
        const char *extra[] = {"clusterQueue", "cohort"};
        for (size_t k = 0; item && k < 2; k++)
            if (json_object_get(e, extra[k])) json_object_set(item, extra[k], json_object_get(e, extra[k]));
        /* A deep copy: the ring grows on the sampler thread while this is sent. */
        if (item) json_array_append_new(items, json_deep_copy(item));
        json_decref(item);
    }
    pthread_mutex_unlock(&h->mu);
    return doc;
}

int gs_ui_history_interval_env(int64_t *ms, char *why, size_t len)
{
    const char *env = getenv("GPUSCHED_UI_HISTORY_INTERVAL");
    *ms = GS_UI_HISTORY_INTERVAL_DEFAULT_MS;
    if (!env) return 0;
    char *end = NULL;
    double sec = strtod(env, &end);
    if (end == env || *end || !isfinite(sec) || sec < 0.01 || sec > 3600) {
        snprintf(why, len, "GPUSCHED_UI_HISTORY_INTERVAL \"%s\": must be seconds between 0.01 and 3600", env);
        return GS_EINVAL;
    }
    *ms = (int64_t)llround(sec * 1000);
    return 0;
}

/*--- Routes ---*/

bool gs__ui_api_resource(const struct gs_api_resource *res)
{
    return !strcmp(res->group, "ui.gpusched.io") || !strcmp(res->group, "authentication.k8s.io");
}

static json_t *strings(char **v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_string(v[i]));
    return a;
}

static enum MHD_Result self_review(struct gs__req *r)
{
    /* The review takes no input: a protobuf body (kubectl's) is not decoded, a JSON one must be an object. */
    const char *ct = gs__header(r, "Content-Type");
    bool proto = ct && !strncmp(ct, "application/vnd.kubernetes.protobuf", 35);
    json_error_t jerr;
    json_t *in = !r->len || proto ? json_object() : json_loadb(r->body, r->len, 0, &jerr);
    if (!json_is_object(in)) {
        json_decref(in);
        return gs__reply_status(r, 400, "BadRequest", NULL,
                                "SelfSubjectReview body must be a JSON object (or empty), got %.40s", r->body);
    }
    json_decref(in);
    static const char *const roles[] = {"admin", "tenant", "node", "scheduler"};
    const struct gs_principal *p = r->who;
    json_t *extra = json_pack("{s:[s]}", "gpusched.io/role", roles[p->role]);
    if (p->role == GS_ROLE_TENANT) json_object_set_new(extra, "gpusched.io/namespaces", strings(p->namespaces, p->nnamespaces));
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *doc = json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:s, s:o, s:o}}}", "apiVersion", "authentication.k8s.io/v1",
                            "kind", "SelfSubjectReview", "metadata", "creationTimestamp", ts, "status", "userInfo",
                            "username", p->user, "groups", strings(p->groups, p->ngroups), "extra", extra);
    return doc ? gs__reply_json(r, 201, doc) : gs__reply_status(r, 500, NULL, NULL, "out of memory");
}

struct narrow {
    const struct gs_principal *who;
    const char *ns; /* a namespaced request's namespace, or NULL */
};

static bool keep_ns(const char *ns, void *arg)
{
    const struct narrow *n = arg;
    if (n->ns) return !strcmp(ns, n->ns);
    return !*ns || gs_auth_sees_namespace(n->who, ns); /* cluster-scoped queues are readable by every role let in */
}

static enum MHD_Result history(struct gs__req *r, const char *verb)
{
    if (!r->s->ui_history)
        return gs__reply_status(r, 503, "ServiceUnavailable", NULL, "this server keeps no queue history");
    struct narrow n = {r->who, r->ns};
    json_t *doc = gs_ui_history_list(r->s->ui_history, keep_ns, &n);
    if (!doc) return gs__reply_status(r, 500, NULL, NULL, "out of memory");
    if (!strcmp(verb, "list") && gs__wants_table(r)) { /* kubectl get / gpusched get: NAME and AGE */
        json_t *t = gs__table(r->res, json_object_get(doc, "items"), NULL, gs__wall_now(), GS_INCLUDE_METADATA);
        json_decref(doc);
        return t ? gs__reply_json(r, 200, t) : gs__reply_status(r, 500, NULL, NULL, "out of memory");
    }
    if (!strcmp(verb, "list")) return gs__reply_json(r, 200, doc);
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(doc, "items"), i, item) {
        const char *name = json_string_value(json_object_get(json_object_get(item, "metadata"), "name"));
        const char *kind = json_string_value(json_object_get(item, "queueKind"));
        if (name && kind && !strcmp(name, r->name) && !strcmp(kind, "LocalQueue")) {
            json_incref(item);
            json_decref(doc);
            return gs__reply_json(r, 200, item);
        }
    }
    json_decref(doc);
    return gs__reply_status(r, 404, "NotFound", r->name,
                            "queuehistories \"%s\" not found: no LocalQueue of that name in namespace \"%s\" has "
                            "samples (they are taken every %.0f s)",
                            r->name, r->ns, (double)gs_ui_history_interval_ms(r->s->ui_history) / 1000.0);
}

int64_t gs_ui_history_interval_ms(const struct gs_ui_history *h) { return h->interval_ms; }

enum MHD_Result gs__handle_ui_api(struct gs__req *r, const char *verb)
{
    bool review = !strcmp(r->res->plural, "selfsubjectreviews");
    if (r->sub[0]) return gs__reply_status(r, 404, NULL, r->name, "no subresource \"%s\"", r->sub);
    if (review && !strcmp(verb, "create") && !r->name) return self_review(r);
    if (!review && (!strcmp(verb, "list") || !strcmp(verb, "get"))) return history(r, verb);
    return gs__reply_status(r, 405, "MethodNotAllowed", r->name, "%s are read-only here: %s is not served",
                            r->res->plural, verb);
}

/*--- The GPU grid (gridview.c builds it) ---*/

static const struct gs_api_resource grid_res = {"ui.gpusched.io", "v1", "gpugrid", "gpugrid", "GPUGrid", NULL,
                                                false, false, "gpugrid"};

bool gs__ui_gpugrid_path(const char *url) { return url && !strcmp(url, "/apis/ui.gpusched.io/v1/gpugrid"); }

enum MHD_Result gs__handle_ui_gpugrid(struct gs__req *r)
{
    if (strcmp(r->method, "GET"))
        return gs__reply_status(r, 405, "MethodNotAllowed", NULL, "gpugrid is read-only: %s is not served", r->method);
    const char *why = "";
    struct gs_authz_req q = {"list", &grid_res, "", NULL, NULL};
    if (gs_authorize(r->who, &q, &why) != GS_AUTHZ_ALLOW)
        return gs__reply_status(r, 403, NULL, NULL, "gpugrid is forbidden: User \"%s\" cannot list gpugrid: %s",
                                r->who ? r->who->user : "", why);
    int err = GS_ETIMEDOUT;
    /* The view when it has caught up with the store within the bound; else one pass over the store. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t len = 0;
    char *text = r->s->gridview ? gs_gridview_text(r->s->gridview, r->who, GRID_WAIT_MS, &len, &err) : NULL;
    const char *from = text ? "view" : "store";
    json_t *doc = NULL;
    if (!text && err == GS_ETIMEDOUT && (doc = gs_ui_gpugrid(r->s->store, r->who, &err))) {
        text = json_dumps(doc, JSON_COMPACT);
        json_decref(doc);
        if (!text) err = GS_ENOMEM;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (text) { /* one line per page load: where the grid came from, its cost, the view's size */
        struct gs_gridview_stats st = {0};
        if (r->s->gridview) gs_gridview_stats(r->s->gridview, &st);
        char ms[32], nodes[32], pods[32], bytes[32];
        snprintf(ms, sizeof ms, "%.1f", (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
        snprintf(nodes, sizeof nodes, "%zu", st.nodes), snprintf(pods, sizeof pods, "%zu", st.pods);
        snprintf(bytes, sizeof bytes, "%zu", st.bytes);
        gs_log(GS_LOG_INFO, "console grid: answered", "from", from, "ms", ms, "view_nodes", nodes, "view_pods", pods,
               "view_bytes", bytes, NULL);
    }
    if (!text) return gs__reply_status(r, 500, NULL, NULL, "gpugrid: %s", gs_strerror(err));
    return gs__reply_text(r, 200, "application/json", text);
}
