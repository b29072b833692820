/*
 * informer.c - list + watch reflectors over the REST API feeding caches and
 * one merged change stream; see informer.h for the contract.
 *
 * One mutex guards every cache and the ring: an informer applies a watch
 * event or a whole relist under it, so a list() taken under the same lock
 * and the cursor it returns always agree (every change after the cursor is
 * in the stream, none before it is missing from the list). The lock is held
 * only to move references: texts are parsed outside it.
 *
 * The cache holds the compact JSON text of each object, shared by reference
 * with the ring's events (stored texts, store.h), not parsed trees: a list
 * hands each caller a private parsed copy, as the store does, so callers may
 * keep and change what they get, and 50,000 pods cost their text only.
 */
#include "informer/informer.h"

#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_EVENTS_PER_CALL 1024
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 30000
#define WATCH_GRACE_S 15               /* beyond timeoutSeconds before the client gives up on a silent server */
#define WATCH_MAX_LINE ((size_t)64 << 20)

/*--- Decoders ---*/

static const char *sget(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static int bad(char *why, size_t wl, const char *fmt, const char *a, const char *b)
{
    snprintf(why, wl, fmt, a ? a : "", b ? b : "");
    return GS_EPARSE;
}

/* An object of r as a server sends it: kind (when given) r's, a name, a
 * namespace when r is namespaced, a resourceVersion. */
static int check_object(const struct gs_api_resource *r, const json_t *o, const char *where, char *why, size_t wl)
{
    if (!json_is_object(o)) return bad(why, wl, "%s: not an object", where, NULL);
    const char *kind = sget(o, "kind");
    if (kind && *kind && strcmp(kind, r->kind)) {
        char w[160];
        snprintf(w, sizeof w, "%s.kind \"%.60s\"", where, kind);
        return bad(why, wl, "%s: not a %s", w, r->kind);
    }
    const json_t *md = json_object_get(o, "metadata");
    if (!json_is_object(md)) return bad(why, wl, "%s.metadata: missing or not an object", where, NULL);
    const char *name = sget(md, "name");
    if (!name || !*name) return bad(why, wl, "%s.metadata.name: missing or empty", where, NULL);
    if (r->namespaced && !(sget(md, "namespace") && *sget(md, "namespace")))
        return bad(why, wl, "%s.metadata.namespace: missing for the namespaced %s", where, r->kind);
    const char *rv = sget(md, "resourceVersion");
    if (!rv || !*rv || strlen(rv) >= 64)
        return bad(why, wl, "%s.metadata.resourceVersion: missing or too long", where, NULL);
    return 0;
}

int gs_watch_event_decode(const struct gs_api_resource *r, const char *line, size_t len, struct gs_watch_event *ev,
                          char *why, size_t why_len)
{
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) i++;
    if (i == len) return 1;
    memset(ev, 0, sizeof *ev);
    json_error_t je;
    json_t *doc = json_loadb(line, len, 0, &je);
    if (!doc) {
        snprintf(why, why_len, "watch event: not JSON: line %d column %d: %s", je.line, je.column, je.text);
        return GS_EPARSE;
    }
    const char *type = sget(doc, "type");
    json_t *obj = json_object_get(doc, "object");
    int err = 0;
    if (!json_is_object(doc) || !type) err = bad(why, why_len, "watch event: type: missing", NULL, NULL);
    else if (!strcmp(type, "ADDED")) ev->type = GS_WATCH_ADDED;
    else if (!strcmp(type, "MODIFIED")) ev->type = GS_WATCH_MODIFIED;
    else if (!strcmp(type, "DELETED")) ev->type = GS_WATCH_DELETED;
    else if (!strcmp(type, "BOOKMARK")) ev->type = GS_WATCH_BOOKMARK;
    else if (!strcmp(type, "ERROR")) ev->type = GS_WATCH_ERROR;
    else err = bad(why, why_len, "watch event: type \"%.40s\": not ADDED, MODIFIED, DELETED, BOOKMARK or ERROR",
                   type, NULL);
    if (!err && !json_is_object(obj))
        err = bad(why, why_len, "watch event: object: missing or not an object", NULL, NULL);
    if (!err && ev->type == GS_WATCH_ERROR) {
        json_t *c = json_object_get(obj, "code");
        ev->code = json_is_integer(c) ? (long)json_integer_value(c) : 0;
    } else if (!err && ev->type == GS_WATCH_BOOKMARK) {
        const char *rv = sget(json_object_get(obj, "metadata"), "resourceVersion");
        if (!rv || !*rv || strlen(rv) >= sizeof ev->rv)
            err = bad(why, why_len, "watch event: BOOKMARK object.metadata.resourceVersion: missing or too long", NULL,
                      NULL);
        else snprintf(ev->rv, sizeof ev->rv, "%s", rv);
    } else if (!err) {
        err = check_object(r, obj, "watch event: object", why, why_len);
        if (!err) snprintf(ev->rv, sizeof ev->rv, "%s", sget(json_object_get(obj, "metadata"), "resourceVersion"));
    }
    if (!err) ev->object = json_incref(obj);
    json_decref(doc);
    return err;
}

int gs_list_page_decode(const struct gs_api_resource *r, const json_t *doc, struct gs_list_page *p, char *why,
                        size_t why_len)
{
    memset(p, 0, sizeof *p);
    if (!json_is_object(doc)) return bad(why, why_len, "list: not an object", NULL, NULL);
    const json_t *md = json_object_get(doc, "metadata");
    json_t *items = json_object_get(doc, "items");
    if (!json_is_array(items) && !json_is_null(items) && items)
        return bad(why, why_len, "list: items: not an array", NULL, NULL);
    const char *rv = sget(md, "resourceVersion");
    if (!rv || !*rv || strlen(rv) >= sizeof p->rv)
        return bad(why, why_len, "list: metadata.resourceVersion: missing or too long", NULL, NULL);
    const json_t *c = json_object_get(md, "continue");
    if (c && !json_is_string(c)) return bad(why, why_len, "list: metadata.continue: not a string", NULL, NULL);
    if (c && strlen(json_string_value(c)) >= sizeof p->cont)
        return bad(why, why_len, "list: metadata.continue: longer than 4095 bytes", NULL, NULL);
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        char where[64];
        snprintf(where, sizeof where, "list: items[%zu]", i);
        if (check_object(r, it, where, why, why_len)) return GS_EPARSE;
    }
    snprintf(p->rv, sizeof p->rv, "%s", rv);
    snprintf(p->cont, sizeof p->cont, "%s", c ? json_string_value(c) : "");
    p->items = json_is_array(items) ? json_incref(items) : json_array();
    return p->items ? 0 : GS_ENOMEM;
}

void gs_list_page_free(struct gs_list_page *p)
{
    json_decref(p->items);
    p->items = NULL;
}

int gs_informer_key_of(const struct gs_api_resource *r, const json_t *obj, char *buf, size_t len)
{
    const json_t *md = json_object_get(obj, "metadata");
    int n = gs_api_key(r, sget(md, "namespace"), sget(md, "name"), buf, len);
    return n < 0 || (size_t)n >= len ? GS_ERANGE : 0;
}

const struct gs_api_resource *gs_informer_resource_of_key(const char *key, const char **ns, size_t *nsl,
                                                          const char **name, size_t *namel)
{
    *ns = *name = NULL;
    *nsl = *namel = 0;
    size_t idl = strcspn(key, "/"), n;
    const struct gs_api_resource *t = gs_api_resources(&n), *r = NULL;
    for (size_t i = 0; i < n && !r; i++)
        if (strlen(t[i].id) == idl && !strncmp(t[i].id, key, idl)) r = &t[i];
    /* A view stored under another resource's id (events.k8s.io's Events under
     * "events") is reached remotely by "<plural>.<group>": the writer picks the group. */
    for (size_t i = 0; i < n && !r; i++) {
        size_t pl = strlen(t[i].plural), gl = strlen(t[i].group);
        if (gl && pl + 1 + gl == idl && !strncmp(key, t[i].plural, pl) && key[pl] == '.' &&
            !strncmp(key + pl + 1, t[i].group, gl))
            r = &t[i];
    }
    if (!r || !key[idl]) return r;
    const char *rest = key + idl + 1;
    if (!*rest) return r;
    if (r->namespaced) {
        *ns = rest;
        *nsl = strcspn(rest, "/");
        rest += *nsl;
        if (*rest == '/') rest++;
        if (!*rest) return r;
    }
    *name = rest;
    *namel = strlen(rest);
    return r;
}

/*--- Cache: key -> stored text ---*/

struct cent {
    char *key;
    char *text; /* stored text (store.h) */
    int64_t rv;
    struct cent *next;
};

struct cache {
    struct cent **b;
    size_t nb, n;
};

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static struct cent *cache_find(const struct cache *c, const char *key)
{
    if (!c->nb) return NULL;
    for (struct cent *e = c->b[fnv(key) % c->nb]; e; e = e->next)
        if (!strcmp(e->key, key)) return e;
    return NULL;
}

static int cache_grow(struct cache *c)
{
    size_t nb = c->nb ? c->nb * 2 : 256;
    struct cent **b = calloc(nb, sizeof *b);
    if (!b) return GS_ENOMEM;
    for (size_t i = 0; i < c->nb; i++)
        for (struct cent *e = c->b[i], *nx; e; e = nx) {
            nx = e->next;
            size_t k = fnv(e->key) % nb;
            e->next = b[k];
            b[k] = e;
        }
    free(c->b);
    c->b = b;
    c->nb = nb;
    return 0;
}

/* Takes text (a reference). */
static int cache_put(struct cache *c, const char *key, char *text, int64_t rv)
{
    struct cent *e = cache_find(c, key);
    if (e) {
        gs_store_text_release(e->text);
        e->text = text;
        e->rv = rv;
        return 0;
    }
    if (c->n + 1 > c->nb && cache_grow(c)) return GS_ENOMEM;
    e = calloc(1, sizeof *e);
    if (!e || !(e->key = strdup(key))) {
        free(e);
        return GS_ENOMEM;
    }
    e->text = text;
    e->rv = rv;
    size_t k = fnv(key) % c->nb;
    e->next = c->b[k];
    c->b[k] = e;
    c->n++;
    return 0;
}

/* Removes key; its text reference goes to *text (NULL when absent). */
static void cache_del(struct cache *c, const char *key, char **text)
{
    *text = NULL;
    if (!c->nb) return;
    for (struct cent **p = &c->b[fnv(key) % c->nb]; *p; p = &(*p)->next)
        if (!strcmp((*p)->key, key)) {
            struct cent *e = *p;
            *p = e->next;
            *text = e->text;
            free(e->key);
            free(e);
            c->n--;
            return;
        }
}

static void cache_clear(struct cache *c)
{
    for (size_t i = 0; i < c->nb; i++)
        for (struct cent *e = c->b[i], *nx; e; e = nx) {
            nx = e->next;
            gs_store_text_release(e->text);
            free(e->key);
            free(e);
        }
    free(c->b);
    *c = (struct cache){0};
}

/*--- Hub ---*/

struct ring_ev {
    enum gs_store_ev type;
    int64_t rv;
    char *key;
    char *value;
};

struct informer;

struct gs_informer_hub {
    struct gs_informer_opts o;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* a new event, a first list, an interrupt */
    struct ring_ev *ring;
    size_t cap, start, count;
    int64_t last, floor;    /* cursor of the newest event; events after floor are held */
    unsigned interrupts;
    atomic_bool stop;
    pthread_mutex_t smu;    /* the informers' sleeps */
    pthread_cond_t scv;
    struct informer **inf;
    size_t ninf;
    atomic_uint_fast64_t requests, lists, relists, watches, bookmarks, retries;
};

struct informer {
    struct gs_informer_hub *h;
    const struct gs_api_resource *res;
    char *ns;               /* NULL: every namespace */
    char prefix[512];
    struct gs_client *c;
    pthread_t th;
    bool started;
    struct cache cache;     /* under h->mu */
    bool synced;            /* under h->mu: first list in */
    char rv[64];            /* where the watch goes on from */
    uint64_t rng;
    int backoff_ms;
    bool not_served_logged;
};

static void ring_push(struct gs_informer_hub *h, enum gs_store_ev type, int64_t rv, char *key, char *value)
{
    if (h->count == h->cap) {
        struct ring_ev *old = &h->ring[h->start];
        free(old->key);
        gs_store_text_release(old->value);
        h->start = (h->start + 1) % h->cap;
        h->count--;
        h->floor++;
    }
    h->ring[(h->start + h->count) % h->cap] = (struct ring_ev){type, rv, key, value};
    h->count++;
    h->last++;
}

/* One change, under h->mu: the cache and the stream together (the cache
 * only when !publish). text is a reference handed over; for DELETED it is
 * the last state to publish. */
static void apply_to(struct informer *in, enum gs_store_ev type, const char *key, char *text, int64_t rv, bool publish)
{
    if (!publish) {
        if (type == GS_STORE_DELETED) {
            char *old = NULL;
            cache_del(&in->cache, key, &old);
            gs_store_text_release(old);
            gs_store_text_release(text);
        } else if (cache_put(&in->cache, key, text, rv)) {
            gs_store_text_release(text);
            gs_log(GS_LOG_ERROR, "informer: out of memory caching an object", "key", key, NULL);
        }
        return;
    }
    char *k = strdup(key);
    if (type == GS_STORE_DELETED) {
        char *old = NULL;
        cache_del(&in->cache, key, &old);
        gs_store_text_release(old);
    } else if (cache_put(&in->cache, key, gs_store_text_ref(text), rv)) {
        gs_store_text_release(text); /* the reference the cache did not take */
        gs_store_text_release(text);
        free(k);
        gs_log(GS_LOG_ERROR, "informer: out of memory caching an object", "key", key, NULL);
        return;
    }
    if (!k) {
        gs_store_text_release(text);
        return;
    }
    ring_push(in->h, type, rv, k, text);
}

static void apply(struct informer *in, enum gs_store_ev type, const char *key, char *text, int64_t rv)
{
    apply_to(in, type, key, text, rv, true);
}

int gs_informer_hub_new(const struct gs_informer_opts *o, size_t ring_events, struct gs_informer_hub **out)
{
    *out = NULL;
    struct gs_informer_hub *h = calloc(1, sizeof *h);
    if (!h) return GS_ENOMEM;
    h->o = *o;
    h->cap = ring_events ? ring_events : 100000;
    h->ring = calloc(h->cap, sizeof *h->ring);
    if (!h->ring) {
        free(h);
        return GS_ENOMEM;
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->smu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_cond_init(&h->scv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&h->stop, false);
    *out = h;
    return 0;
}

void gs_informer_hub_free(struct gs_informer_hub *h)
{
    if (!h) return;
    atomic_store(&h->stop, true);
    pthread_mutex_lock(&h->smu);
    pthread_cond_broadcast(&h->scv);
    pthread_mutex_unlock(&h->smu);
    gs_informer_hub_interrupt(h);
    for (size_t i = 0; i < h->ninf; i++) {
        struct informer *in = h->inf[i];
        if (in->started) pthread_join(in->th, NULL);
        gs_client_free(in->c);
        cache_clear(&in->cache);
        free(in->ns);
        free(in);
    }
    free(h->inf);
    for (size_t i = 0; i < h->count; i++) {
        struct ring_ev *e = &h->ring[(h->start + i) % h->cap];
        free(e->key);
        gs_store_text_release(e->value);
    }
    free(h->ring);
    pthread_mutex_destroy(&h->mu);
    pthread_mutex_destroy(&h->smu);
    pthread_cond_destroy(&h->cv);
    pthread_cond_destroy(&h->scv);
    free(h);
}

/*--- One informer's thread ---*/

static uint64_t next_rand(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ULL;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Sleeps ms unless the hub stops first. false when it stopped. */
static bool nap(struct gs_informer_hub *h, long ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    int64_t ns = dl.tv_nsec + (int64_t)ms * 1000000;
    dl.tv_sec += ns / 1000000000;
    dl.tv_nsec = ns % 1000000000;
    pthread_mutex_lock(&h->smu);
    while (!atomic_load(&h->stop))
        if (pthread_cond_timedwait(&h->scv, &h->smu, &dl) == ETIMEDOUT) break;
    pthread_mutex_unlock(&h->smu);
    return !atomic_load(&h->stop);
}

/* After a failed request: the server's Retry-After when it gave one (429),
 * else the next exponential step with jitter in [50%, 100%]. */
static bool back_off(struct informer *in, long code)
{
    atomic_fetch_add(&in->h->retries, 1);
    int ra = gs_client_retry_after(in->c);
    long ms;
    if (code == 429 && ra >= 0) {
        ms = ra ? ra * 1000L : 100;
    } else {
        in->backoff_ms = in->backoff_ms ? in->backoff_ms * 2 : BACKOFF_MIN_MS;
        if (in->backoff_ms > BACKOFF_MAX_MS) in->backoff_ms = BACKOFF_MAX_MS;
        ms = in->backoff_ms / 2 + (long)(next_rand(&in->rng) % (uint64_t)(in->backoff_ms / 2 + 1));
    }
    return nap(in->h, ms);
}

/* counted: false for a watch, counted when it was sent (it is reported when it ends). */
static void report_req(struct informer *in, const char *method, const char *path, long code, bool counted)
{
    if (!counted) atomic_fetch_add(&in->h->requests, 1);
    if (in->h->o.on_request) in->h->o.on_request(in->h->o.on_request_ctx, method, path, code);
}

static int collection_path(struct informer *in, char *p, size_t len)
{
    int n = gs_api_path(in->res, in->ns, NULL, p, len);
    return n < 0 || (size_t)n >= len ? GS_ERANGE : n;
}

/* Appends "&key=value" (or "?..."), escaped. */
static void query(char *p, size_t len, const char *key, const char *val)
{
    size_t n = strlen(p);
    char esc[4096 * 3 + 1], *o = esc;
    for (const unsigned char *s = (const unsigned char *)val; *s && o < esc + sizeof esc - 4; s++) {
        if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr("-_.~", *s))
            *o++ = (char)*s;
        else o += sprintf(o, "%%%02X", *s);
    }
    *o = 0;
    snprintf(p + n, len - n, "%c%s=%s", strchr(p, '?') ? '&' : '?', key, esc);
}

struct listed {
    struct cache fresh; /* key -> text of the new list */
    char **order;       /* keys in the order listed */
    size_t n, cap;
    char rv[64];
};

static void listed_free(struct listed *l)
{
    cache_clear(&l->fresh);
    for (size_t i = 0; i < l->n; i++) free(l->order[i]);
    free(l->order);
    *l = (struct listed){0};
}

static int listed_add(struct informer *in, struct listed *l, json_t *obj)
{
    char key[1024];
    if (gs_informer_key_of(in->res, obj, key, sizeof key)) return GS_ERANGE;
    char *t = json_dumps(obj, JSON_COMPACT);
    char *text = t ? gs_store_text_new(t, strlen(t)) : NULL;
    free(t);
    if (!text) return GS_ENOMEM;
    bool dup = cache_find(&l->fresh, key) != NULL;
    if (cache_put(&l->fresh, key, text, gs_store_obj_rv(obj))) {
        gs_store_text_release(text);
        return GS_ENOMEM;
    }
    if (dup) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        char **o = realloc(l->order, cap * sizeof *o);
        if (!o) return GS_ENOMEM;
        l->order = o;
        l->cap = cap;
    }
    return (l->order[l->n] = strdup(key)) ? (l->n++, 0) : GS_ENOMEM;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Client-go's Replace: what the new list holds becomes the cache; each
 * difference is an event. Under h->mu. The first list publishes nothing:
 * no consumer can hold a cursor that needs it (a list of this resource
 * waits for it, and a consumer lists what it follows), and its events
 * would keep every object's first text alive in the ring after the
 * object changed (50,000 pods' pending versions behind their bindings). */
static void replace(struct informer *in, struct listed *l)
{
    int64_t list_rv = atoll(l->rv);
    for (size_t i = 0; i < l->n; i++) {
        struct cent *n = cache_find(&l->fresh, l->order[i]), *o = cache_find(&in->cache, l->order[i]);
        if (o && o->rv == n->rv && n->rv) continue; /* unchanged */
        apply_to(in, o ? GS_STORE_MODIFIED : GS_STORE_ADDED, l->order[i], gs_store_text_ref(n->text), n->rv,
                 in->synced);
    }
    size_t ngone = 0, cap = 0;
    char **gone = NULL;
    for (size_t i = 0; i < in->cache.nb; i++)
        for (struct cent *e = in->cache.b[i]; e; e = e->next)
            if (!cache_find(&l->fresh, e->key)) {
                if (ngone == cap) {
                    cap = cap ? cap * 2 : 16;
                    char **g = realloc(gone, cap * sizeof *g);
                    if (!g) break;
                    gone = g;
                }
                gone[ngone++] = e->key;
            }
    if (ngone) qsort(gone, ngone, sizeof *gone, cmp_str); /* gone is NULL when nothing went */
    for (size_t i = 0; i < ngone; i++) {
        struct cent *e = cache_find(&in->cache, gone[i]);
        char key[1024];
        snprintf(key, sizeof key, "%s", e->key);
        /* the last known state, at the list's version: newer than anything the consumer saw */
        int64_t rv = list_rv > e->rv ? list_rv : e->rv + 1;
        apply(in, GS_STORE_DELETED, key, gs_store_text_ref(e->text), rv);
    }
    free(gone);
}

enum { LIST_OK = 0, LIST_NOT_SERVED = 1 };

/* The next row of the resource table after r serving the same resource in
 * another version (Kueue's v1beta1 and v1beta2), wrapping around; r itself
 * when there is none. A server that dropped the preferred version (Kueue
 * 0.20 serves only v1beta2) still gets its objects followed. */
static const struct gs_api_resource *other_version(const struct gs_api_resource *r)
{
    size_t n;
    const struct gs_api_resource *t = gs_api_resources(&n);
    size_t at = (size_t)(r - t);
    if (at >= n) return r; /* not a table row */
    for (size_t k = 1; k < n; k++) {
        const struct gs_api_resource *c = &t[(at + k) % n];
        if (!strcmp(c->group, r->group) && !strcmp(c->plural, r->plural) && !strcmp(c->id, r->id)) return c;
    }
    return r;
}

/* A whole paged list into l. LIST_NOT_SERVED on 404; errors back off and
 * are returned (the caller lists again). */
static int list_all(struct informer *in, struct listed *l)
{
    char base[1024], p[8192];
    int err = collection_path(in, base, sizeof base);
    if (err < 0) return err;
    int limit = in->h->o.page_size > 0 ? in->h->o.page_size : 500;
    const struct gs_api_resource *first = in->res;
    char cont[4096] = "";
    bool restarted = false;
    for (;;) {
        if (atomic_load(&in->h->stop)) return GS_ESTATE;
        snprintf(p, sizeof p, "%s?limit=%d", base, limit);
        if (cont[0]) query(p, sizeof p, "continue", cont);
        json_t *doc = NULL;
        long code = 0;
        err = gs_client_call(in->c, "GET", p, NULL, NULL, NULL, &doc, &code);
        report_req(in, "GET", p, code, false);
        if (code == 404) {
            json_decref(doc);
            if (cont[0]) return LIST_NOT_SERVED; /* gone mid-list: taken as not served */
            const struct gs_api_resource *alt = other_version(in->res);
            if (alt == in->res || alt == first) {
                in->res = first; /* none served: ask for the preferred one next time */
                return LIST_NOT_SERVED;
            }
            in->res = alt; /* the watch follows the version the list found */
            if ((err = collection_path(in, base, sizeof base)) < 0) return err;
            continue;
        }
        if (code == 410 && cont[0]) { /* the continue token expired: start again, from a fresh list */
            json_decref(doc);
            listed_free(l);
            cont[0] = 0;
            if (restarted && !back_off(in, code)) return GS_ESTATE;
            restarted = true;
            continue;
        }
        if (err) {
            if (code != 429 && (code < 500) && code) /* 401, 403, 400: say why, then keep trying */
                gs_log(GS_LOG_WARN, "informer: list refused", "path", p, "status", gs_client_status_message(doc),
                       NULL);
            json_decref(doc);
            if (!back_off(in, code)) return GS_ESTATE;
            continue;
        }
        struct gs_list_page pg;
        char why[512];
        err = gs_list_page_decode(in->res, doc, &pg, why, sizeof why);
        json_decref(doc);
        if (!err) atomic_fetch_add(&in->h->lists, 1);
        if (err) {
            gs_log(GS_LOG_WARN, "informer: bad list answer", "path", p, "error", why, NULL);
            if (!back_off(in, 500)) return GS_ESTATE;
            listed_free(l);
            cont[0] = 0;
            continue;
        }
        size_t i;
        json_t *it;
        json_array_foreach(pg.items, i, it)
            if ((err = listed_add(in, l, it))) break;
        snprintf(l->rv, sizeof l->rv, "%s", pg.rv);
        snprintf(cont, sizeof cont, "%s", pg.cont);
        gs_list_page_free(&pg);
        if (err) return err;
        if (!cont[0]) return LIST_OK;
    }
}

/* List (or relist) and swap the result in. */
static int relist(struct informer *in)
{
    struct listed l = {0};
    int r = list_all(in, &l);
    if (r == LIST_NOT_SERVED) {
        if (!in->not_served_logged)
            gs_log(GS_LOG_WARN, "informer: the server does not serve this resource (404); taken as empty, asked "
                                "again every minute", "resource", in->prefix, NULL);
        in->not_served_logged = true;
        snprintf(l.rv, sizeof l.rv, "0");
    } else if (r) {
        listed_free(&l);
        return r;
    } else if (in->not_served_logged) {
        gs_log(GS_LOG_INFO, "informer: the resource is served now", "resource", in->prefix, NULL);
        in->not_served_logged = false;
    }
    pthread_mutex_lock(&in->h->mu);
    replace(in, &l);
    in->synced = true;
    pthread_cond_broadcast(&in->h->cv);
    pthread_mutex_unlock(&in->h->mu);
    snprintf(in->rv, sizeof in->rv, "%s", l.rv);
    listed_free(&l);
    in->backoff_ms = 0;
    return r;
}

/*--- Watch ---*/

struct wstream {
    struct informer *in;
    char *p;
    size_t n, cap;
    bool expired;    /* an ERROR event with 410 */
    long error_code; /* another ERROR event */
    int broken;      /* an event that could not be read */
    bool any;        /* at least one event arrived */
};

enum { WATCH_STOP = 1 };

static int watch_event(struct wstream *w, const char *line, size_t len)
{
    struct informer *in = w->in;
    struct gs_watch_event ev;
    char why[512];
    int err = gs_watch_event_decode(in->res, line, len, &ev, why, sizeof why);
    if (err == 1) return 0;
    if (err) {
        gs_log(GS_LOG_WARN, "informer: bad watch event", "resource", in->prefix, "error", why, NULL);
        w->broken = GS_EPARSE;
        return WATCH_STOP;
    }
    w->any = true;
    int stop = 0;
    switch (ev.type) {
    case GS_WATCH_BOOKMARK:
        atomic_fetch_add(&in->h->bookmarks, 1);
        snprintf(in->rv, sizeof in->rv, "%s", ev.rv);
        break;
    case GS_WATCH_ERROR:
        if (ev.code == 410) w->expired = true;
        else w->error_code = ev.code ? ev.code : 500;
        gs_log(GS_LOG_INFO, "informer: watch ended by the server", "resource", in->prefix, "status",
               gs_client_status_message(ev.object), NULL);
        stop = WATCH_STOP;
        break;
    default: {
        char key[1024];
        char *t = json_dumps(ev.object, JSON_COMPACT);
        char *text = t ? gs_store_text_new(t, strlen(t)) : NULL;
        free(t);
        if (!text || gs_informer_key_of(in->res, ev.object, key, sizeof key)) {
            gs_store_text_release(text);
            w->broken = GS_ENOMEM;
            stop = WATCH_STOP;
            break;
        }
        enum gs_store_ev type = ev.type == GS_WATCH_ADDED      ? GS_STORE_ADDED
                                : ev.type == GS_WATCH_MODIFIED ? GS_STORE_MODIFIED
                                                               : GS_STORE_DELETED;
        pthread_mutex_lock(&in->h->mu);
        apply(in, type, key, text, gs_store_obj_rv(ev.object));
        pthread_cond_broadcast(&in->h->cv);
        pthread_mutex_unlock(&in->h->mu);
        snprintf(in->rv, sizeof in->rv, "%s", ev.rv);
    }
    }
    json_decref(ev.object);
    return stop;
}

static int on_stream(const char *data, size_t n, void *arg)
{
    struct wstream *w = arg;
    if (w->n + n + 1 > WATCH_MAX_LINE) {
        w->broken = GS_ERANGE;
        return WATCH_STOP;
    }
    if (w->n + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 65536;
        while (cap < w->n + n + 1) cap *= 2;
        char *np = realloc(w->p, cap);
        if (!np) {
            w->broken = GS_ENOMEM;
            return WATCH_STOP;
        }
        w->p = np;
        w->cap = cap;
    }
    memcpy(w->p + w->n, data, n);
    w->n += n;
    size_t start = 0;
    char *nl;
    while ((nl = memchr(w->p + start, '\n', w->n - start))) {
        size_t len = (size_t)(nl - (w->p + start));
        int stop = watch_event(w, w->p + start, len);
        start += len + 1;
        if (stop) return stop;
    }
    memmove(w->p, w->p + start, w->n - start);
    w->n -= start;
    return 0;
}

enum { WATCH_ENDED = 0, WATCH_EXPIRED = 1 };

/* One watch from in->rv until it ends. WATCH_ENDED: go on from in->rv;
 * WATCH_EXPIRED: relist; else an error, backed off already. */
static int watch_once(struct informer *in)
{
    char p[8192];
    int err = collection_path(in, p, sizeof p);
    if (err < 0) return err;
    int t = in->h->o.watch_timeout_s;
    if (t <= 0) t = 300 + (int)(next_rand(&in->rng) % 300);
    snprintf(p + strlen(p), sizeof p - strlen(p), "?watch=true&allowWatchBookmarks=true&timeoutSeconds=%d", t);
    query(p, sizeof p, "resourceVersion", in->rv);
    struct wstream w = {.in = in};
    long code = 0;
    json_t *st = NULL;
    atomic_fetch_add(&in->h->watches, 1);
    atomic_fetch_add(&in->h->requests, 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    err = gs_client_stream_timed(in->c, p, t + WATCH_GRACE_S, on_stream, &w, &st, &code);
    report_req(in, "GET", p, code, true);
    bool partial = false; /* the stream ended inside an event */
    for (size_t i = 0; i < w.n && !partial; i++) partial = !strchr(" \t\r", w.p[i]);
    free(w.p);
    if (atomic_load(&in->h->stop)) {
        json_decref(st);
        return GS_ESTATE;
    }
    if (w.expired || code == 410) {
        json_decref(st);
        atomic_fetch_add(&in->h->relists, 1);
        return WATCH_EXPIRED;
    }
    if (code == 404) { /* the resource went away (a CRD deleted): list again, as at the start */
        json_decref(st);
        return back_off(in, code) ? WATCH_EXPIRED : GS_ESTATE;
    }
    if (code && code != 200) {
        gs_log(GS_LOG_INFO, "informer: watch refused", "resource", in->prefix, "status", gs_client_status_message(st),
               NULL);
        json_decref(st);
        return back_off(in, code) ? GS_EIO : GS_ESTATE;
    }
    json_decref(st);
    if (w.broken == GS_EPARSE) { /* what came cannot be trusted to continue from: list again */
        atomic_fetch_add(&in->h->relists, 1);
        return back_off(in, 500) ? WATCH_EXPIRED : GS_ESTATE;
    }
    if (w.error_code || w.broken) return back_off(in, w.error_code) ? GS_EIO : GS_ESTATE;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double lasted = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if ((err == GS_ETIMEDOUT || err == 0) && !partial && (w.any || lasted >= 1.0)) {
        in->backoff_ms = 0;
        return WATCH_ENDED;
    }
    /* A watch the server ended at once without a word is a failure too (as
     * client-go's "very short watch"), or a server doing so would be asked
     * again and again with no pause. */
    /* A connection lost or cut inside an event: events before it were whole; go on from the last one. */
    if (w.any) in->backoff_ms = 0;
    return back_off(in, 0) ? GS_EIO : GS_ESTATE;
}

static void *informer_main(void *arg)
{
    struct informer *in = arg;
    struct gs_informer_hub *h = in->h;
    bool need_list = true;
    while (!atomic_load(&h->stop)) {
        if (need_list) {
            int r = relist(in);
            if (r == LIST_NOT_SERVED) {
                nap(h, h->o.not_served_recheck_ms > 0 ? h->o.not_served_recheck_ms : 60000);
                continue;
            }
            if (r) { /* answers were backed off already; what failed here (memory, a key too long) is too */
                if (r != GS_ESTATE) back_off(in, 0);
                continue;
            }
            need_list = false;
        }
        int r = watch_once(in);
        if (r == WATCH_EXPIRED) need_list = true;
        else if (r == GS_ERANGE) back_off(in, 0); /* the path did not fit: nothing was asked */
    }
    return NULL;
}

int gs_informer_hub_follow(struct gs_informer_hub *h, const char *prefix, struct gs_diags *d)
{
    const char *ns, *name;
    size_t nsl, namel;
    const struct gs_api_resource *r = gs_informer_resource_of_key(prefix, &ns, &nsl, &name, &namel);
    size_t pl = strlen(prefix);
    if (!r || name || !pl || prefix[pl - 1] != '/' || pl >= sizeof ((struct informer *)0)->prefix) {
        gs_diags_add(d, "follow", "\"%s\": not the key prefix of a served resource (\"pods/\", \"pods/NAMESPACE/\")",
                     prefix);
        return GS_EINVAL;
    }
    pthread_mutex_lock(&h->mu);
    for (size_t i = 0; i < h->ninf; i++)
        if (!strcmp(h->inf[i]->prefix, prefix)) {
            pthread_mutex_unlock(&h->mu);
            return GS_EEXIST;
        }
    pthread_mutex_unlock(&h->mu);
    struct informer *in = calloc(1, sizeof *in);
    if (!in) return GS_ENOMEM;
    in->h = h;
    in->res = r;
    snprintf(in->prefix, sizeof in->prefix, "%s", prefix);
    in->rng = h->o.seed ^ fnv(prefix) ^ 0x5851f42d4c957f2dULL;
    int err = ns && !(in->ns = strndup(ns, nsl)) ? GS_ENOMEM : 0;
    if (!err) err = gs_client_new(h->o.client, &in->c, d);
    if (!err && h->o.user_agent) err = gs_client_set_user_agent(in->c, h->o.user_agent);
    struct informer **v = err ? NULL : realloc(h->inf, (h->ninf + 1) * sizeof *v);
    if (!err && !v) err = GS_ENOMEM;
    if (err) {
        gs_client_free(in->c);
        free(in->ns);
        free(in);
        return err;
    }
    gs_client_set_cancel(in->c, &h->stop);
    pthread_mutex_lock(&h->mu);
    h->inf = v;
    h->inf[h->ninf++] = in;
    pthread_mutex_unlock(&h->mu);
    if (pthread_create(&in->th, NULL, informer_main, in)) return GS_ENOMEM;
    in->started = true;
    return 0;
}

/*--- Reads ---*/

static struct informer *covering(struct gs_informer_hub *h, const char *key)
{
    for (size_t i = 0; i < h->ninf; i++)
        if (!strncmp(key, h->inf[i]->prefix, strlen(h->inf[i]->prefix))) return h->inf[i];
    return NULL;
}

struct snap {
    char *key, *text;
};

static int cmp_snap(const void *a, const void *b)
{
    return strcmp(((const struct snap *)a)->key, ((const struct snap *)b)->key);
}

int gs_informer_hub_list(struct gs_informer_hub *h, const char *prefix, gs_store_list_fn fn, void *arg,
                         int64_t *cursor)
{
    pthread_mutex_lock(&h->mu);
    struct informer *in = covering(h, prefix);
    if (!in) {
        pthread_mutex_unlock(&h->mu);
        return GS_ENOENT;
    }
    unsigned gen = h->interrupts;
    while (!in->synced && !atomic_load(&h->stop) && gen == h->interrupts) pthread_cond_wait(&h->cv, &h->mu);
    if (!in->synced) {
        pthread_mutex_unlock(&h->mu);
        return GS_ESTATE;
    }
    size_t n = 0, pl = strlen(prefix);
    struct snap *v = malloc((in->cache.n + 1) * sizeof *v);
    if (!v) {
        pthread_mutex_unlock(&h->mu);
        return GS_ENOMEM;
    }
    for (size_t i = 0; i < in->cache.nb; i++)
        for (struct cent *e = in->cache.b[i]; e; e = e->next)
            if (!strncmp(e->key, prefix, pl)) v[n++] = (struct snap){e->key, gs_store_text_ref(e->text)};
    for (size_t i = 0; i < n; i++) v[i].key = strdup(v[i].key);
    if (cursor) *cursor = h->last;
    pthread_mutex_unlock(&h->mu);
    int err = 0;
    for (size_t i = 0; i < n; i++)
        if (!v[i].key) err = GS_ENOMEM;
    if (!err) qsort(v, n, sizeof *v, cmp_snap);
    for (size_t i = 0; i < n && !err; i++) {
        json_t *obj = json_loads(v[i].text, 0, NULL);
        if (!obj) continue; /* cannot happen: the cache holds what jansson wrote */
        int stop = fn(v[i].key, obj, arg);
        json_decref(obj);
        if (stop) break;
    }
    for (size_t i = 0; i < n; i++) {
        free(v[i].key);
        gs_store_text_release(v[i].text);
    }
    free(v);
    return err;
}

static int collect(struct gs_informer_hub *h, int64_t *after, const char *prefix, struct gs_store_event **evs,
                   size_t *n)
{
    if (*after < h->floor) return GS_ERANGE;
    size_t plen = prefix ? strlen(prefix) : 0, cap = 0;
    for (int64_t v = *after + 1; v <= h->last && *n < MAX_EVENTS_PER_CALL; v++) {
        struct ring_ev *e = &h->ring[(h->start + (size_t)(v - h->floor - 1)) % h->cap];
        *after = v;
        if (plen && strncmp(e->key, prefix, plen)) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            struct gs_store_event *nv = realloc(*evs, cap * sizeof *nv);
            if (!nv) return GS_ENOMEM;
            *evs = nv;
        }
        struct gs_store_event *o = &(*evs)[*n];
        o->type = e->type;
        o->rv = e->rv;
        o->key = strdup(e->key);
        o->value = gs_store_text_ref(e->value);
        (*n)++;
        if (!o->key) return GS_ENOMEM;
    }
    return 0;
}

int gs_informer_hub_events(struct gs_informer_hub *h, int64_t *after, const char *prefix, int timeout_ms,
                           const atomic_bool *stop, struct gs_store_event **evs, size_t *n)
{
    *evs = NULL;
    *n = 0;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    int64_t ns = dl.tv_nsec + (int64_t)timeout_ms * 1000000;
    dl.tv_sec += ns / 1000000000;
    dl.tv_nsec = ns % 1000000000;
    pthread_mutex_lock(&h->mu);
    unsigned gen = h->interrupts;
    int err = 0;
    for (;;) {
        if (*after > h->last) *after = h->last; /* a cursor from the future: resume from now */
        err = collect(h, after, prefix, evs, n);
        if (err || *n || (stop && atomic_load(stop)) || gen != h->interrupts || atomic_load(&h->stop)) break;
        if (pthread_cond_timedwait(&h->cv, &h->mu, &dl) == ETIMEDOUT) {
            err = collect(h, after, prefix, evs, n);
            break;
        }
    }
    pthread_mutex_unlock(&h->mu);
    if (err) {
        gs_store_events_free(*evs, *n);
        *evs = NULL;
        *n = 0;
    }
    return err;
}

int gs_informer_hub_get(struct gs_informer_hub *h, const char *key, json_t **obj, int64_t *rv)
{
    *obj = NULL;
    pthread_mutex_lock(&h->mu);
    struct informer *in = covering(h, key);
    if (!in || !in->synced) {
        pthread_mutex_unlock(&h->mu);
        return GS_EUNSUPPORTED;
    }
    struct cent *e = cache_find(&in->cache, key);
    char *text = e ? gs_store_text_ref(e->text) : NULL;
    int64_t v = e ? e->rv : 0;
    pthread_mutex_unlock(&h->mu);
    if (!text) return GS_ENOENT;
    *obj = json_loads(text, 0, NULL);
    gs_store_text_release(text);
    if (rv) *rv = v;
    return *obj ? 0 : GS_ENOMEM;
}

bool gs_informer_hub_wait_synced(struct gs_informer_hub *h, int timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    int64_t ns = dl.tv_nsec + (int64_t)timeout_ms * 1000000;
    dl.tv_sec += ns / 1000000000;
    dl.tv_nsec = ns % 1000000000;
    pthread_mutex_lock(&h->mu);
    bool all;
    for (;;) {
        all = true;
        for (size_t i = 0; i < h->ninf; i++) all = all && h->inf[i]->synced;
        if (all || atomic_load(&h->stop)) break;
        if (pthread_cond_timedwait(&h->cv, &h->mu, &dl) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&h->mu);
    return all;
}

void gs_informer_hub_interrupt(struct gs_informer_hub *h)
{
    pthread_mutex_lock(&h->mu);
    h->interrupts++;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

void gs_informer_hub_stats(struct gs_informer_hub *h, struct gs_informer_stats *out)
{
    out->requests = atomic_load(&h->requests);
    out->lists = atomic_load(&h->lists);
    out->relists = atomic_load(&h->relists);
    out->watches = atomic_load(&h->watches);
    out->bookmarks = atomic_load(&h->bookmarks);
    out->retries = atomic_load(&h->retries);
    pthread_mutex_lock(&h->mu);
    out->synced = true;
    for (size_t i = 0; i < h->ninf; i++) out->synced = out->synced && h->inf[i]->synced;
    pthread_mutex_unlock(&h->mu);
}
