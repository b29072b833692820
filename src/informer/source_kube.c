/*
 * source_kube.c - the Kubernetes transport of source.h: reads from the
 * informers' caches and merged stream (informer.c), writes as REST calls.
 *
 * Writes go through a pool of clients (one libcurl handle and one kept-alive
 * connection each), taken by whichever thread writes; a batch of bindings
 * or mutations is spread over write_workers threads, each with its own
 * connection, because a binding is one round trip and a scheduler that
 * binds thousands of pods a second cannot wait for them one by one.
 *
 * Retries: a 429 is repeated after its Retry-After (GS_EBUSY after a few);
 * reads are also repeated after 5xx and transport errors; a write that may
 * have reached the server is never repeated blindly (its caller decides,
 * level-triggered, from what the stream shows next). A mutate repeats its
 * GET, fn, PUT cycle on 409 Conflict, up to MUTATE_TRIES times.
 */
#include "informer/source_kube.h"

#include "control/api.h" /* gs__pod_set_condition */
#include "core/log.h"
#include "informer/informer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MUTATE_TRIES 5
#define BUSY_TRIES 8  /* 429s in a row before GS_EBUSY */
#define READ_TRIES 4  /* a read after 5xx / transport errors */

struct kube {
    struct gs_source base;
    struct gs_informer_hub *hub;
    struct gs_client_opts copts;
    char *server, *token, *kubeconfig, *ca_file, *user_agent;
    int write_workers;
    void (*on_request)(void *ctx, const char *method, const char *path, long code);
    void *on_request_ctx;
    pthread_mutex_t pmu; /* the pool */
    struct gs_client **pool;
    size_t npool, cap;
    atomic_uint_fast64_t requests, retries, conflicts;
    atomic_bool stop;
};

#define K(s) ((struct kube *)(s))

/*--- Clients and calls ---*/

static struct gs_client *take(struct kube *k)
{
    pthread_mutex_lock(&k->pmu);
    struct gs_client *c = k->npool ? k->pool[--k->npool] : NULL;
    pthread_mutex_unlock(&k->pmu);
    if (c) return c;
    struct gs_diags d = {0};
    if (gs_client_new(&k->copts, &c, &d)) c = NULL;
    gs_diags_free(&d);
    if (c && k->user_agent && gs_client_set_user_agent(c, k->user_agent)) {
        gs_client_free(c);
        return NULL;
    }
    if (c) gs_client_set_cancel(c, &k->stop);
    return c;
}

static void give(struct kube *k, struct gs_client *c)
{
    pthread_mutex_lock(&k->pmu);
    if (k->npool == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 16;
        struct gs_client **p = realloc(k->pool, cap * sizeof *p);
        if (p) k->pool = p, k->cap = cap;
    }
    if (k->npool < k->cap) {
        k->pool[k->npool++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&k->pmu);
    gs_client_free(c);
}

/* Waits ms (at most WAIT_MAX_MS), in slices so that free() is not held up. */
#define WAIT_MAX_MS 30000
static void sleep_ms(struct kube *k, long ms)
{
    if (ms > WAIT_MAX_MS) ms = WAIT_MAX_MS;
    for (; ms > 0 && !atomic_load(&k->stop); ms -= 100) {
        struct timespec ts = {0, (ms < 100 ? ms : 100) * 1000000};
        nanosleep(&ts, NULL);
    }
}

/* One request with the retries above. */
static int call(struct kube *k, struct gs_client *c, const char *method, const char *path, const json_t *body,
                json_t **out, long *code_out)
{
    bool read = !strcmp(method, "GET");
    int busy = 0, failed = 0, err;
    long code = 0;
    for (;;) {
        json_t *doc = NULL;
        err = gs_client_call(c, method, path, body ? "application/json" : NULL, body, NULL, &doc, &code);
        atomic_fetch_add(&k->requests, 1);
        if (k->on_request) k->on_request(k->on_request_ctx, method, path, code);
        bool again = false;
        long wait = 0;
        if (code == 429 && ++busy < BUSY_TRIES && !atomic_load(&k->stop)) {
            int ra = gs_client_retry_after(c);
            wait = ra > 0 ? ra * 1000L : 100L << (busy < 8 ? busy : 8);
            again = true;
        } else if (read && (code >= 500 || (!code && err == GS_EIO)) && ++failed < READ_TRIES &&
                   !atomic_load(&k->stop)) {
            wait = 100L << failed;
            again = true;
        }
        if (!again) {
            if (out) *out = doc;
            else json_decref(doc);
            break;
        }
        json_decref(doc);
        atomic_fetch_add(&k->retries, 1);
        sleep_ms(k, wait);
    }
    if (code_out) *code_out = code;
    return err;
}

/* The URL path of a store key, with an optional subresource. */
static int key_path(const char *key, const char *sub, char *buf, size_t len, const struct gs_api_resource **res)
{
    const char *ns, *name;
    size_t nsl, namel;
    const struct gs_api_resource *r = gs_informer_resource_of_key(key, &ns, &nsl, &name, &namel);
    if (!r || (r->namespaced && !ns)) return GS_EINVAL;
    char nsb[256], nameb[512];
    if (nsl >= sizeof nsb || namel >= sizeof nameb) return GS_EINVAL;
    snprintf(nsb, sizeof nsb, "%.*s", (int)nsl, ns ? ns : "");
    snprintf(nameb, sizeof nameb, "%.*s", (int)namel, name ? name : "");
    int n = gs_api_path(r, ns ? nsb : NULL, name ? nameb : NULL, buf, len);
    if (n < 0 || (size_t)n >= len) return GS_EINVAL;
    if (sub && *sub && snprintf(buf + n, len - (size_t)n, "/%s", sub) >= (int)(len - (size_t)n)) return GS_EINVAL;
    if (res) *res = r;
    return 0;
}

/*--- Reads ---*/

static int k_list(struct gs_source *s, const char *prefix, gs_store_list_fn fn, void *arg, int64_t *cursor)
{
    int err = gs_informer_hub_list(K(s)->hub, prefix, fn, arg, cursor);
    if (err == GS_ENOENT) gs_log(GS_LOG_ERROR, "kube source: list of a resource not followed", "prefix", prefix, NULL);
    return err == GS_ENOENT ? GS_EINVAL : err;
}

static int k_events(struct gs_source *s, int64_t *after, const char *prefix, int timeout_ms, const atomic_bool *stop,
                    struct gs_store_event **evs, size_t *n)
{ return gs_informer_hub_events(K(s)->hub, after, prefix, timeout_ms, stop, evs, n); }

/* A live GET (not from the cache). */
static int live_get(struct kube *k, struct gs_client *c, const char *key, const char *sub, json_t **obj)
{
    char p[1536];
    *obj = NULL;
    int err = key_path(key, sub, p, sizeof p, NULL);
    if (err) return err;
    json_t *doc = NULL;
    err = call(k, c, "GET", p, NULL, &doc, NULL);
    if (!err && !json_is_object(doc)) err = GS_EPARSE;
    if (err) json_decref(doc);
    else *obj = doc;
    return err;
}

static int k_get(struct gs_source *s, const char *key, json_t **obj, int64_t *rv)
{
    struct kube *k = K(s);
    int err = gs_informer_hub_get(k->hub, key, obj, rv);
    if (err != GS_EUNSUPPORTED) return err;
    struct gs_client *c = take(k);
    if (!c) return GS_ENOMEM;
    err = live_get(k, c, key, NULL, obj);
    give(k, c);
    if (!err && rv) *rv = gs_store_obj_rv(*obj);
    return err;
}

/*--- Writes ---*/

/* The server's answer to a write: its metadata (version, uid, timestamps) goes onto obj. */
static void take_meta(json_t *obj, const json_t *answer)
{
    json_t *md = json_object_get(answer, "metadata");
    if (json_is_object(obj) && json_is_object(md)) json_object_set(obj, "metadata", md);
}

static int create_with(struct kube *k, struct gs_client *c, const char *key, json_t *obj, json_t **out, int64_t *rv)
{
    char p[1536];
    const struct gs_api_resource *r;
    const char *ns, *name;
    size_t nsl, namel;
    if (!gs_informer_resource_of_key(key, &ns, &nsl, &name, &namel) || !name) return GS_EINVAL;
    char nsb[256];
    snprintf(nsb, sizeof nsb, "%.*s", (int)nsl, ns ? ns : "");
    /* the collection: the key without its name */
    char coll[1024];
    snprintf(coll, sizeof coll, "%.*s", (int)(name - key), key);
    int err = key_path(coll, NULL, p, sizeof p, &r);
    if (err) return err;
    json_t *doc = NULL;
    err = call(k, c, "POST", p, obj, &doc, NULL);
    if (!err) {
        take_meta(obj, doc);
        if (rv) *rv = gs_store_obj_rv(doc);
        if (out) *out = json_incref(doc);
    }
    json_decref(doc);
    return err;
}

static int k_create(struct gs_source *s, const char *key, json_t *obj, int64_t *rv)
{
    struct kube *k = K(s);
    struct gs_client *c = take(k);
    if (!c) return GS_ENOMEM;
    int err = create_with(k, c, key, obj, NULL, rv);
    give(k, c);
    return err;
}

static void set_rv(json_t *obj, const json_t *from)
{
    const char *rv = json_string_value(json_object_get(json_object_get(from, "metadata"), "resourceVersion"));
    json_t *md = json_object_get(obj, "metadata");
    if (!json_is_object(md)) json_object_set_new(obj, "metadata", md = json_object());
    if (rv) json_object_set_new(md, "resourceVersion", json_string(rv));
}

static int mutate_with(struct kube *k, struct gs_client *c, const char *key, const char *sub, gs_store_mutate_fn fn,
                       void *arg, json_t **out, int64_t *rv)
{
    if (out) *out = NULL;
    char p[1536];
    int err = key_path(key, sub, p, sizeof p, NULL);
    if (err) return err;
    for (int attempt = 0; attempt < MUTATE_TRIES; attempt++) {
        json_t *cur = NULL, *next = NULL;
        err = live_get(k, c, key, NULL, &cur);
        if (err && err != GS_ENOENT) return err;
        err = fn(cur, &next, arg);
        if (err == GS_STORE_UNCHANGED) {
            if (!cur) return GS_ENOENT;
            if (rv) *rv = gs_store_obj_rv(cur);
            if (out) *out = cur;
            else json_decref(cur);
            return 0;
        }
        if (err < 0 || !next) {
            json_decref(cur);
            json_decref(next);
            return err < 0 ? err : GS_ENOENT;
        }
        json_t *doc = NULL;
        if (!cur) {
            err = create_with(k, c, key, next, &doc, rv);
        } else {
            set_rv(next, cur);
            long code = 0;
            err = call(k, c, "PUT", p, next, &doc, &code);
            if (!err && rv) *rv = gs_store_obj_rv(doc);
        }
        json_decref(cur);
        json_decref(next);
        if (err == GS_ECONFLICT) {
            atomic_fetch_add(&k->conflicts, 1);
            json_decref(doc);
            continue;
        }
        if (!err && out) *out = doc;
        else json_decref(doc);
        return err;
    }
    return GS_ECONFLICT;
}

static int k_mutate(struct gs_source *s, const char *key, const char *sub, gs_store_mutate_fn fn, void *arg,
                    json_t **out, int64_t *rv)
{
    struct kube *k = K(s);
    struct gs_client *c = take(k);
    if (!c) return GS_ENOMEM;
    int err = mutate_with(k, c, key, sub, fn, arg, out, rv);
    give(k, c);
    return err;
}

static int remove_with(struct kube *k, struct gs_client *c, const char *key, const char *uid, int64_t expect_rv,
                       json_t **old)
{
    if (old) *old = NULL;
    char p[1536];
    int err = key_path(key, NULL, p, sizeof p, NULL);
    if (err) return err;
    json_t *body = json_pack("{s:s, s:s, s:{}}", "kind", "DeleteOptions", "apiVersion", "v1", "preconditions");
    if (!body) return GS_ENOMEM;
    json_t *pre = json_object_get(body, "preconditions");
    if (uid) json_object_set_new(pre, "uid", json_string(uid));
    if (expect_rv) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)expect_rv);
        json_object_set_new(pre, "resourceVersion", json_string(v));
    }
    json_t *doc = NULL;
    err = call(k, c, "DELETE", p, body, &doc, NULL);
    json_decref(body);
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    if (!err && old && json_is_object(doc) && !(kind && !strcmp(kind, "Status"))) *old = json_incref(doc);
    json_decref(doc);
    return err;
}

static int k_remove(struct gs_source *s, const char *key, const char *uid, int64_t expect_rv, json_t **old)
{
    struct kube *k = K(s);
    struct gs_client *c = take(k);
    if (!c) return GS_ENOMEM;
    int err = remove_with(k, c, key, uid, expect_rv, old);
    give(k, c);
    return err;
}

/*--- Binding ---*/

/* What a 409 to a binding means: the pod is already bound (GS_EEXIST), is
 * being deleted (GS_ESTATE), or is not the pod the scheduler saw (a uid
 * precondition failed: GS_ENOENT). */
static int bind_conflict(const json_t *status)
{
    const char *m = gs_client_status_message(status);
    if (strstr(m, "Precondition failed") || strstr(m, "UID in precondition")) return GS_ENOENT;
    if (strstr(m, "being deleted")) return GS_ESTATE;
    return GS_EEXIST;
}

static int bind_one(struct kube *k, struct gs_client *c, struct gs_source_bind *b)
{
    b->rv = 0;
    b->out = NULL;
    const char *ns, *name;
    size_t nsl, namel;
    const struct gs_api_resource *r = gs_informer_resource_of_key(b->key, &ns, &nsl, &name, &namel);
    if (!r || strcmp(r->id, "pods") || !ns || !name || !b->node) return GS_EINVAL;
    char nsb[256], nameb[512], p[1536];
    if (nsl >= sizeof nsb || namel >= sizeof nameb) return GS_EINVAL;
    snprintf(nsb, sizeof nsb, "%.*s", (int)nsl, ns);
    snprintf(nameb, sizeof nameb, "%.*s", (int)namel, name);
    int err = key_path(b->key, "binding", p, sizeof p, NULL);
    if (err) return err;
    json_t *body = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "Binding",
                             "metadata", "name", nameb, "namespace", nsb, "target", "kind", "Node", "name", b->node);
    if (!body) return GS_ENOMEM;
    json_t *md = json_object_get(body, "metadata");
    if (b->uid) json_object_set_new(md, "uid", json_string(b->uid));
    if (json_object_size(b->annotations)) json_object_set(md, "annotations", (json_t *)b->annotations);
    json_t *doc = NULL;
    long code = 0;
    err = call(k, c, "POST", p, body, &doc, &code);
    json_decref(body);
    if (code == 409) err = bind_conflict(doc);
    json_decref(doc);
    return err;
}

/*--- Batches over write_workers connections ---*/

struct batch {
    struct kube *k;
    size_t n;
    atomic_size_t next;
    struct gs_source_bind *b; /* bind, or */
    struct gs_store_mut *m;   /* mutate_batch */
};

static void batch_item(struct batch *bt, struct gs_client *c, size_t i)
{
    if (bt->b) {
        bt->b[i].err = c ? bind_one(bt->k, c, &bt->b[i]) : GS_ENOMEM;
    } else {
        struct gs_store_mut *m = &bt->m[i];
        m->out = NULL;
        m->text = NULL;
        m->err = c ? mutate_with(bt->k, c, m->key, NULL, m->fn, m->arg, &m->out, &m->rv) : GS_ENOMEM;
    }
}

static void *batch_worker(void *arg)
{
    struct batch *bt = arg;
    struct gs_client *c = take(bt->k);
    for (size_t i; (i = atomic_fetch_add(&bt->next, 1)) < bt->n;) batch_item(bt, c, i);
    if (c) give(bt->k, c);
    return NULL;
}

static void run_batch(struct batch *bt)
{
    size_t w = (size_t)bt->k->write_workers;
    if (w > bt->n) w = bt->n;
    pthread_t th[64];
    if (w > 64) w = 64;
    size_t started = 0;
    for (size_t i = 1; i < w; i++)
        if (!pthread_create(&th[started], NULL, batch_worker, bt)) started++;
    batch_worker(bt); /* this thread works too */
    for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
}

static int k_bind(struct gs_source *s, struct gs_source_bind *b, size_t n)
{
    struct batch bt = {.k = K(s), .n = n, .b = b};
    atomic_init(&bt.next, 0);
    run_batch(&bt);
    return 0;
}

static int k_mutate_batch(struct gs_source *s, struct gs_store_mut *m, size_t n)
{
    struct batch bt = {.k = K(s), .n = n, .m = m};
    atomic_init(&bt.next, 0);
    run_batch(&bt);
    return 0;
}

/*--- Preemption ---*/

struct disrupt {
    const char *uid, *preemptor;
};

/* DisruptionTarget=True on the victim's status, as kube-scheduler writes it before the delete. */
static int disrupt_fn(json_t *cur, json_t **out, void *arg)
{
    struct disrupt *d = arg;
    if (!cur) return GS_ENOENT;
    const char *uid = json_string_value(json_object_get(json_object_get(cur, "metadata"), "uid"));
    if (d->uid && (!uid || strcmp(uid, d->uid))) return GS_ENOENT;
    char msg[1024];
    snprintf(msg, sizeof msg, "preempted by %s", d->preemptor ? d->preemptor : "a higher-priority pod");
    json_t *n = json_incref(cur);
    gs__pod_set_condition(n, "DisruptionTarget", "True", "PreemptionByScheduler", msg);
    *out = n;
    return 0;
}

static int k_preempt(struct gs_source *s, const char *key, const char *uid, const char *preemptor, bool *recreated)
{
    struct kube *k = K(s);
    if (recreated) *recreated = false;
    struct gs_client *c = take(k);
    if (!c) return GS_ENOMEM;
    struct disrupt d = {uid, preemptor};
    int err = mutate_with(k, c, key, "status", disrupt_fn, &d, NULL, NULL);
    if (!err) err = remove_with(k, c, key, uid, 0, NULL);
    give(k, c);
    return err;
}

/*--- Life ---*/

static void k_interrupt(struct gs_source *s) { gs_informer_hub_interrupt(K(s)->hub); }

static void k_free(struct gs_source *s)
{
    struct kube *k = K(s);
    atomic_store(&k->stop, true);
    gs_informer_hub_free(k->hub);
    for (size_t i = 0; i < k->npool; i++) gs_client_free(k->pool[i]);
    free(k->pool);
    pthread_mutex_destroy(&k->pmu);
    free(k->server);
    free(k->token);
    free(k->kubeconfig);
    free(k->ca_file);
    free(k->user_agent);
    free(k);
}

static const struct gs_source_vtbl kube_vtbl = {
    .kind = GS_SOURCE_KUBE,
    .list = k_list,
    .events = k_events,
    .get = k_get,
    .create = k_create,
    .mutate = k_mutate,
    .mutate_batch = k_mutate_batch,
    .remove = k_remove,
    .bind = k_bind,
    .preempt = k_preempt,
    .interrupt = k_interrupt,
    .free = k_free,
};

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

int gs_source_kube_new(const struct gs_source_kube_opts *o, struct gs_source **out, struct gs_diags *d)
{
    *out = NULL;
    if (o->page_size < 0 || o->watch_timeout_s < 0 || o->write_workers < 0) {
        gs_diags_add(d, o->page_size < 0 ? "page_size" : o->watch_timeout_s < 0 ? "watch_timeout_s" : "write_workers",
                     "must not be negative (got %d)",
                     o->page_size < 0 ? o->page_size : o->watch_timeout_s < 0 ? o->watch_timeout_s : o->write_workers);
        return GS_EINVAL;
    }
    if (!o->follow || !o->follow[0]) {
        gs_diags_add(d, "follow", "no resource to follow: give at least one key prefix (\"pods/\")");
        return GS_EINVAL;
    }
    struct kube *k = calloc(1, sizeof *k);
    if (!k) return GS_ENOMEM;
    k->base.v = &kube_vtbl;
    pthread_mutex_init(&k->pmu, NULL);
    atomic_init(&k->stop, false);
    k->server = dup_or_null(o->client.server);
    k->token = dup_or_null(o->client.token);
    k->kubeconfig = dup_or_null(o->client.kubeconfig);
    k->ca_file = dup_or_null(o->client.ca_file);
    k->user_agent = dup_or_null(o->user_agent);
    k->copts = o->client;
    k->copts.server = k->server;
    k->copts.token = k->token;
    k->copts.kubeconfig = k->kubeconfig;
    k->copts.ca_file = k->ca_file;
    k->write_workers = o->write_workers ? o->write_workers : 8;
    k->on_request = o->on_request;
    k->on_request_ctx = o->on_request_ctx;
    /* One client now, so a bad configuration is reported before any thread starts. */
    struct gs_client *c = NULL;
    int err = gs_client_new(&k->copts, &c, d);
    if (!err) {
        if (k->user_agent) err = gs_client_set_user_agent(c, k->user_agent);
        gs_client_set_cancel(c, &k->stop);
        give(k, c);
    }
    struct gs_informer_opts io = {.client = &k->copts,
                                  .page_size = o->page_size,
                                  .watch_timeout_s = o->watch_timeout_s,
                                  .seed = o->seed,
                                  .user_agent = k->user_agent,
                                  .on_request = o->on_request,
                                  .on_request_ctx = o->on_request_ctx};
    if (!err) err = gs_informer_hub_new(&io, o->ring_events, &k->hub);
    for (size_t i = 0; !err && o->follow[i]; i++) {
        err = gs_informer_hub_follow(k->hub, o->follow[i], d);
        if (err == GS_EEXIST) err = 0; /* named twice: one informer */
    }
    if (err) {
        k_free(&k->base);
        return err;
    }
    *out = &k->base;
    return 0;
}

bool gs_source_kube_wait_synced(struct gs_source *s, int timeout_ms)
{
    return s->v == &kube_vtbl && gs_informer_hub_wait_synced(K(s)->hub, timeout_ms);
}

void gs_source_kube_stats(struct gs_source *s, struct gs_source_kube_stats *out)
{
    *out = (struct gs_source_kube_stats){0};
    if (s->v != &kube_vtbl) return;
    struct kube *k = K(s);
    struct gs_informer_stats is;
    gs_informer_hub_stats(k->hub, &is);
    out->requests = is.requests + atomic_load(&k->requests);
    out->lists = is.lists;
    out->relists = is.relists;
    out->watches = is.watches;
    out->bookmarks = is.bookmarks;
    out->retries = is.retries + atomic_load(&k->retries);
    out->conflicts = atomic_load(&k->conflicts);
    out->synced = is.synced;
}
