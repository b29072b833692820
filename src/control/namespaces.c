/*
 * namespaces.c - built-in namespaces, the namespace rules of the API and the
 * namespace controller; see namespaces.h and api_fields.h.
 *
 * Kubernetes' namespace lifecycle admission refuses objects in a namespace
 * that does not exist (404) or is being terminated (403), and its namespace
 * controller deletes the contents of a Terminating namespace before the
 * namespace itself. Without both, pods, queues and PodGroups outlived their
 * namespace and kept quota. The controller walks the served resources table,
 * so a namespaced kind added there is emptied too.
 */
#include "control/namespaces.h"

#include "control/api_fields.h"
#include "control/resources.h"
#include "core/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const builtin[] = {"default", "kube-system", "kube-public", GS_NODE_LEASE_NS};

bool gs_namespace_builtin(const char *name)
{
    for (size_t i = 0; name && i < sizeof builtin / sizeof builtin[0]; i++)
        if (!strcmp(builtin[i], name)) return true;
    return false;
}

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static void now_rfc3339(time_t t, char *buf, size_t len)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/*--- Bootstrap ---*/

static int ensure(struct gs_store *st, const char *key, json_t *obj)
{
    int err = obj && !gs_apiserver_prepare_new(obj) ? gs_store_create(st, key, obj, NULL) : GS_ENOMEM;
    json_decref(obj);
    return err == GS_EEXIST ? 0 : err;
}

int gs_namespaces_bootstrap(struct gs_store *st)
{
    int err = 0;
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0] && !err; i++) {
        char key[128];
        snprintf(key, sizeof key, "namespaces/%s", builtin[i]);
        err = ensure(st, key,
                     json_pack("{s:s,s:s,s:{s:s},s:{s:[s]},s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                               "metadata", "name", builtin[i], "spec", "finalizers", "kubernetes", "status", "phase",
                               "Active"));
    }
    /* Kubernetes' two system classes, values as kube-apiserver creates them. */
    static const struct { const char *name; long long value; const char *what; } pcs[] = {
        {"system-cluster-critical", 2000000000, "Used for system critical pods that must run in the cluster, but "
                                                "can be moved to another node if necessary."},
        {"system-node-critical", 2000001000, "Used for system critical pods that must not be moved from their "
                                             "current node."},
    };
    for (size_t i = 0; i < 2 && !err; i++) {
        char key[128];
        snprintf(key, sizeof key, "priorityclasses.scheduling.k8s.io/%s", pcs[i].name);
        err = ensure(st, key,
                     json_pack("{s:s,s:s,s:{s:s},s:I,s:b,s:s,s:s}", "apiVersion", "scheduling.k8s.io/v1", "kind",
                               "PriorityClass", "metadata", "name", pcs[i].name, "value", pcs[i].value,
                               "globalDefault", 0, "preemptionPolicy", "PreemptLowerPriority", "description",
                               pcs[i].what));
    }
    return err;
}

/*--- The API's rules ---*/

int gs__namespace_admits(struct gs__req *r)
{
    if (gs__fields_ns_cached(r, r->ns)) return 0;
    char key[512];
    snprintf(key, sizeof key, "namespaces/%s", r->ns);
    json_t *ns = NULL;
    int err = gs_store_get(r->s->store, key, &ns, NULL);
    const char *phase = str(json_object_get(ns, "status"), "phase");
    bool ending = !err && (str(json_object_get(ns, "metadata"), "deletionTimestamp") ||
                           (phase && !strcmp(phase, "Terminating")));
    json_decref(ns);
    if (err == GS_ENOENT) { /* kube names the namespace, not the object being created */
        char msg[600];
        snprintf(msg, sizeof msg, "namespaces \"%s\" not found", r->ns);
        gs__reply_json(r, 404, gs__status(404, NULL, msg, gs_api_resource_find("", "v1", "namespaces"), r->ns, NULL, 0));
        return GS_ENOENT;
    }
    if (err) return gs__reply_err(r, err, r->ns), err;
    if (ending) {
        gs__reply_status(r, 403, NULL, NULL, "%s is forbidden: unable to create new content in namespace %s because "
                         "it is being terminated", r->res->plural, r->ns);
        return GS_EPERM;
    }
    gs__fields_ns_note(r, r->ns, true);
    return 0;
}

/* arg: non-NULL under dryRun=All: the answer is the Terminating object, kept
 * in *(json_t **)arg, and nothing is written. */
static int terminate_fn(json_t *cur, json_t **out, void *arg)
{
    if (!cur) return GS_ENOENT;
    json_t *md = json_object_get(cur, "metadata");
    const char *phase = str(json_object_get(cur, "status"), "phase");
    if (str(md, "deletionTimestamp") && phase && !strcmp(phase, "Terminating")) return GS_STORE_UNCHANGED;
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    char ts[32];
    now_rfc3339(time(NULL), ts, sizeof ts);
    md = json_object_get(next, "metadata");
    if (!str(md, "deletionTimestamp")) json_object_set_new(md, "deletionTimestamp", json_string(ts));
    json_object_set_new(md, "deletionGracePeriodSeconds", json_integer(0));
    json_t *st = json_object_get(next, "status");
    if (!json_is_object(st)) json_object_set_new(next, "status", st = json_object());
    json_object_set_new(st, "phase", json_string("Terminating"));
    if (arg) {
        *(json_t **)arg = next;
        return GS_STORE_UNCHANGED;
    }
    *out = next;
    return 0;
}

enum MHD_Result gs__namespace_delete(struct gs__req *r)
{
    if (gs_namespace_builtin(r->name))
        return gs__reply_status(r, 403, NULL, r->name, "namespaces \"%s\" is forbidden: this namespace may not be "
                                "deleted", r->name);
    char key[512];
    snprintf(key, sizeof key, "namespaces/%s", r->name);
    json_t *out = NULL, *preview = NULL;
    int err = gs_store_mutate(r->s->store, key, terminate_fn, r->dry_run ? (void *)&preview : NULL, &out, NULL);
    if (preview) { /* dryRun=All: what the namespace would become */
        json_decref(out);
        out = preview;
    } else {
        gs__fields_ns_note(r, r->name, false); /* creates see Terminating from now on */
    }
    if (err) {
        json_decref(out);
        return gs__reply_err(r, err, r->name);
    }
    return gs__reply_json(r, 200, out);
}

/*--- The controller ---*/

struct gs_nsctl {
    struct gs_store *store;
    int64_t period_ms;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
};

struct names {
    char **v;
    size_t n;
};

static int add_name(struct names *n, const char *s)
{
    char **nv = realloc(n->v, (n->n + 1) * sizeof *nv);
    if (!nv) return GS_ENOMEM;
    n->v = nv;
    if (!(n->v[n->n] = strdup(s))) return GS_ENOMEM;
    n->n++;
    return 0;
}

static void names_free(struct names *n)
{
    for (size_t i = 0; i < n->n; i++) free(n->v[i]);
    free(n->v);
    memset(n, 0, sizeof *n);
}

static int terminating_one(const char *key, json_t *obj, void *arg)
{
    (void)key;
    const char *phase = str(json_object_get(obj, "status"), "phase");
    const json_t *md = json_object_get(obj, "metadata");
    if ((phase && !strcmp(phase, "Terminating")) || str(md, "deletionTimestamp"))
        return add_name(arg, str(md, "name") ? str(md, "name") : "");
    return 0;
}

static int key_one(const char *key, json_t *obj, void *arg)
{
    (void)obj;
    return add_name(arg, key);
}

/* As a DELETE would: an object with finalizers, or a bound and unfinished
 * pod (its agent confirms), is marked and waits; anything else goes now. */
static int delete_fn(json_t *cur, json_t **out, void *arg)
{
    bool pod = *(bool *)arg;
    if (!cur) return GS_ENOENT;
    json_t *md = json_object_get(cur, "metadata"), *spec = json_object_get(cur, "spec");
    const char *node = str(spec, "nodeName"), *ph = str(json_object_get(cur, "status"), "phase");
    bool graceful = pod && node && *node && !(ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed")));
    bool fin = json_array_size(json_object_get(md, "finalizers")) > 0;
    if (!graceful && !fin) return GS_ESTATE; /* remove now */
    if (str(md, "deletionTimestamp")) return GS_STORE_UNCHANGED;
    json_t *tg = json_object_get(spec, "terminationGracePeriodSeconds");
    long long grace = !graceful ? 0 : json_is_integer(tg) && json_integer_value(tg) >= 0 ? json_integer_value(tg) : 30;
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    char ts[32];
    now_rfc3339(time(NULL) + (time_t)grace, ts, sizeof ts);
    md = json_object_get(next, "metadata");
    json_object_set_new(md, "deletionTimestamp", json_string(ts));
    json_object_set_new(md, "deletionGracePeriodSeconds", json_integer(grace));
    *out = next;
    return 0;
}

/* Deletes what namespace ns holds of resource res; *left: how many remain. */
static int empty_resource(struct gs_store *st, const struct gs_api_resource *res, const char *ns, size_t *left)
{
    char prefix[512];
    gs_api_key(res, ns, NULL, prefix, sizeof prefix);
    struct names keys = {0};
    int64_t rv;
    int err = gs_store_list(st, prefix, key_one, &keys, &rv);
    bool pods = !res->group[0] && !strcmp(res->plural, "pods");
    for (size_t i = 0; !err && i < keys.n; i++) {
        int e = gs_store_mutate(st, keys.v[i], delete_fn, &pods, NULL, NULL);
        if (e == GS_ESTATE) {
            e = gs_store_delete(st, keys.v[i], 0, NULL, NULL);
            if (e == 0) e = GS_ENOENT; /* gone */
        }
        if (e == GS_ENOENT) continue;
        (*left)++; /* waiting for its agent or its finalizers; the next pass looks again */
    }
    names_free(&keys);
    return err;
}

static bool empty_namespace(struct gs_store *st, const char *ns)
{
    size_t n, left = 0;
    const struct gs_api_resource *t = gs_api_resources(&n);
    const struct gs_api_resource *pods = gs_api_resource_find("", "v1", "pods");
    if (pods) empty_resource(st, pods, ns, &left);
    if (left) return false; /* pods first */
    for (size_t i = 0; i < n; i++)
        if (t[i].namespaced && &t[i] != pods) empty_resource(st, &t[i], ns, &left);
    return left == 0;
}

int gs_nsctl_scan(struct gs_store *st)
{
    struct names ns = {0};
    int64_t rv;
    int removed = 0;
    if (gs_store_list(st, "namespaces/", terminating_one, &ns, &rv) == 0) {
        for (size_t i = 0; i < ns.n; i++) {
            if (!empty_namespace(st, ns.v[i])) continue;
            char key[512];
            snprintf(key, sizeof key, "namespaces/%s", ns.v[i]);
            if (gs_store_delete(st, key, 0, NULL, NULL) == 0) {
                removed++;
                gs_log(GS_LOG_INFO, "namespaces: removed", "namespace", ns.v[i], NULL);
            }
        }
    }
    names_free(&ns);
    return removed;
}

static void *run(void *arg)
{
    struct gs_nsctl *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        pthread_mutex_unlock(&c->mu);
        gs_nsctl_scan(c->store);
        pthread_mutex_lock(&c->mu);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += (long)(c->period_ms % 1000) * 1000000L;
        ts.tv_sec += c->period_ms / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        while (!c->stop && pthread_cond_timedwait(&c->cv, &c->mu, &ts) == 0) {}
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int gs_nsctl_start(const struct gs_nsctl_opts *o, struct gs_nsctl **out)
{
    *out = NULL;
    struct gs_nsctl *c = calloc(1, sizeof *c);
    if (!c) return GS_ENOMEM;
    c->store = o->store;
    c->period_ms = o->period_ms > 0 ? o->period_ms : 250;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&c->th, NULL, run, c)) {
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        free(c);
        return GS_ENOMEM;
    }
    *out = c;
    return 0;
}

void gs_nsctl_stop(struct gs_nsctl *c)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->th, NULL);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}
