/*
 * gridview.c - the console's GPU grid: its records, its assembly, and the
 * in-memory view that keeps the records up to date from the change stream;
 * see gridview.h for what the view promises.
 *
 * Both ways to answer GET /apis/ui.gpusched.io/v1/gpugrid go through the
 * same two steps: a Node or Pod object becomes a record (node_rec, pod_rec),
 * and records in store key order become the document (asm_node, asm_pod,
 * asm_end). gs_ui_gpugrid does both for every object of one store list per
 * kind; the view keeps the records in two search trees keyed by store key
 * (tsearch: in-order walks give key order, which the document's node and
 * pending order are), replaced one at a time as events arrive, so a request
 * only assembles. The assembly copies each node's GPUs (holders differ per
 * tenant) and walks the pods once: tens of milliseconds at 5,000 nodes and
 * 50,000 pods, against the seconds a decode of every Pod took.
 *
 * A pod record is one allocation: the struct, its strings and its device
 * list packed behind it. A node record holds its grid entry as JSON (GPUs
 * with empty holders) and its UUID-to-index map.
 *
 * Consistency: a list of Nodes at version a and of Pods at b >= a, then the
 * stream from a (events up to b replay changes the pod list has; each
 * replaces the record whole, so after b every key holds its state at b). No
 * answer before the view reached b and the store's version at the request.
 */
#include "control/gridview.h"

#include "control/api.h"
#include "control/api_ui.h"
#include "control/auth.h"
#include "core/log.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <search.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEVICES_ANN "gpusched.io/devices"
#define STACK_ANN "gpusched.io/gpu-stack-state"
#define LQ_LABEL "kueue.x-k8s.io/queue-name"

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    return json_string_value(json_object_get(json_object_get(o, a), b));
}

/*--- Records ---*/

struct node_rec {
    char *key;     /* the store key (tree order) */
    json_t *entry; /* {name, ready, unschedulable, [taints], [stack], [model], gpus: [{..., holders: []}]} */
    json_t *uuids; /* uuid -> index */
    size_t bytes;  /* the entry's compact text, a measure of its size */
};

static void node_rec_free(void *p)
{
    struct node_rec *n = p;
    if (!n) return;
    json_decref(n->entry), json_decref(n->uuids);
    free(n->key);
    free(n);
}

/* The record of a Node; NULL when it has no name (it shows nothing) or out of memory (*err). */
static struct node_rec *node_rec(const char *key, const json_t *obj, int *err)
{
    *err = 0;
    const char *name = str_at(obj, "metadata", "name");
    if (!name) return NULL;
    *err = GS_ENOMEM;
    json_t *spec = json_object_get(obj, "spec"), *st = json_object_get(obj, "status");
    bool ready = false;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type")), *s = json_string_value(json_object_get(c, "status"));
        if (t && !strcmp(t, "Ready")) ready = s && !strcmp(s, "True");
    }
    struct node_rec *r = calloc(1, sizeof *r);
    json_t *gpus = json_array();
    if (!r || !gpus || !(r->key = strdup(key)) || !(r->uuids = json_object()) ||
        !(r->entry = json_pack("{s:s, s:b, s:b, s:O}", "name", name, "ready", ready, "unschedulable",
                               json_is_true(json_object_get(spec, "unschedulable")), "gpus", gpus))) {
        json_decref(gpus);
        node_rec_free(r);
        return NULL;
    }
    json_t *taints = json_object_get(spec, "taints");
    if (json_array_size(taints)) json_object_set(r->entry, "taints", taints);
    const char *stack = json_string_value(json_object_get(json_object_get(json_object_get(obj, "metadata"), "annotations"), STACK_ANN));
    if (stack) json_object_set_new(r->entry, "stack", json_string(stack));
    json_t *d;
    json_array_foreach(json_object_get(st, "devices"), i, d) {
        json_t *gi = json_object_get(d, "index");
        if (!json_is_integer(gi)) continue;
        json_t *gpu = json_object();
        if (!gpu) break;
        json_object_update(gpu, d);
        const char *uuid = json_string_value(json_object_get(d, "uuid"));
        if (uuid) json_object_set(r->uuids, uuid, gi);
        json_object_del(gpu, "uuid");      /* the page resolves no UUID: holders come resolved */
        json_object_del(gpu, "memoryMiB"); /* the node page reads it from the whole Node */
        json_object_set_new(gpu, "holders", json_array());
        json_array_append_new(gpus, gpu);
    }
    /* One model for the node when its GPUs share it (the usual case): 40,000 copies fewer at 5,000 nodes. */
    const char *model = json_string_value(json_object_get(json_array_get(gpus, 0), "model"));
    json_array_foreach(gpus, i, d) {
        const char *m = json_string_value(json_object_get(d, "model"));
        if (!m || !model || strcmp(m, model)) model = NULL;
    }
    if (model) {
        json_object_set_new(r->entry, "model", json_string(model));
        json_array_foreach(gpus, i, d) json_object_del(d, "model");
    }
    json_decref(gpus);
    char *text = json_dumps(r->entry, JSON_COMPACT);
    r->bytes = text ? strlen(text) : 0;
    free(text);
    *err = 0;
    return r;
}

enum pod_state { POD_NONE, POD_PENDING, POD_BOUND };

struct pod_dev {
    json_int_t index, milli;
};

/* One allocation: the struct, then devs, then the strings. */
struct pod_rec {
    const char *key, *ns, *name;
    const char *node, *group, *uuids, *created, *queue; /* NULL when absent */
    double gpus;
    size_t ndev;
    struct pod_dev *devs;
    enum pod_state state;
};

/* The PodGroup a pod belongs to, by the labels and annotation the page reads (util.js podGroup). */
static const char *pod_group(const json_t *md)
{
    const json_t *l = json_object_get(md, "labels"), *a = json_object_get(md, "annotations");
    const char *v;
    if ((v = json_string_value(json_object_get(l, "scheduling.x-k8s.io/pod-group")))) return v;
    if ((v = json_string_value(json_object_get(l, "pod-group.scheduling.sigs.k8s.io")))) return v;
    if ((v = json_string_value(json_object_get(a, "scheduling.k8s.io/group-name")))) return v;
    return json_string_value(json_object_get(l, "scheduling.k8s.io/group-name"));
}

static size_t slen(const char *s) { return s ? strlen(s) + 1 : 0; }

static const char *pack(char **at, const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    memcpy(*at, s, n);
    const char *r = *at;
    *at += n;
    return r;
}

/* The record of a Pod (free with free()); NULL only when out of memory. */
static struct pod_rec *pod_rec(const char *key, const json_t *obj)
{
    json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    const char *phase = str_at(obj, "status", "phase"), *node = str_at(obj, "spec", "nodeName");
    enum pod_state state = POD_NONE;
    if (!ns || !name || (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))))
        state = POD_NONE;
    else if (node)
        state = POD_BOUND;
    else if (!phase || !strcmp(phase, "Pending"))
        state = POD_PENDING;
    const char *group = NULL, *created = NULL, *queue = NULL, *uuids = NULL;
    json_t *devs = NULL;
    size_t ndev = 0;
    if (state != POD_NONE) group = pod_group(md);
    if (state == POD_PENDING) {
        created = json_string_value(json_object_get(md, "creationTimestamp"));
        queue = json_string_value(json_object_get(json_object_get(md, "labels"), LQ_LABEL));
        if (!queue) queue = json_string_value(json_object_get(json_object_get(md, "labels"), "scheduling.gpusched.io/queue"));
    }
    if (state == POD_BOUND) {
        /* As the page did: status.devices when the node wrote them, else the devices annotation's UUIDs. */
        devs = json_object_get(json_object_get(obj, "status"), "devices");
        size_t i;
        json_t *d;
        json_array_foreach(devs, i, d) ndev += json_is_integer(json_object_get(d, "index"));
        if (!json_array_size(devs)) uuids = json_string_value(json_object_get(json_object_get(md, "annotations"), DEVICES_ANN));
    }
    if (state == POD_NONE) ns = name = NULL, node = NULL;
    size_t len = sizeof(struct pod_rec) + ndev * sizeof(struct pod_dev) + slen(key) + slen(ns) + slen(name) +
                 slen(node) + slen(group) + slen(uuids) + slen(created) + slen(queue);
    struct pod_rec *r = malloc(len);
    if (!r) return NULL;
    *r = (struct pod_rec){.state = state, .ndev = ndev, .devs = (struct pod_dev *)(r + 1)};
    if (state == POD_PENDING) r->gpus = gs__ui_pod_gpus(obj);
    size_t i, k = 0;
    json_t *d;
    json_array_foreach(ndev ? devs : NULL, i, d) {
        json_t *gi = json_object_get(d, "index"), *m = json_object_get(d, "milli");
        if (!json_is_integer(gi)) continue;
        r->devs[k++] = (struct pod_dev){json_integer_value(gi), json_integer_value(m) > 0 ? json_integer_value(m) : 1000};
    }
    char *at = (char *)(r->devs + ndev);
    r->key = pack(&at, key), r->ns = pack(&at, ns), r->name = pack(&at, name), r->node = pack(&at, node);
    r->group = pack(&at, group), r->uuids = pack(&at, uuids), r->created = pack(&at, created);
    r->queue = pack(&at, queue);
    return r;
}

/*--- Assembly ---*/

struct grid {
    const struct gs_principal *who;
    json_t *nodes;   /* [node entry copy], in name order (store key order) */
    json_t *by_name; /* name -> {gpus: index -> gpu (borrowed), uuids: uuid -> index} */
    json_t *pending; /* [pod] */
    json_t *grouped; /* "ns/name" -> PodGroup, of bound pods in a group */
    int err;
};

static int asm_node(struct grid *g, const struct node_rec *r)
{
    json_t *n = json_deep_copy(r->entry), *idx = json_object();
    json_t *e = json_pack("{s:o, s:O}", "gpus", idx, "uuids", r->uuids);
    if (!n || !idx || !e) {
        json_decref(n), json_decref(e);
        return GS_ENOMEM;
    }
    size_t i;
    json_t *gpu;
    json_array_foreach(json_object_get(n, "gpus"), i, gpu) {
        char k[32];
        snprintf(k, sizeof k, "%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(gpu, "index")));
        json_object_set(idx, k, gpu);
    }
    json_object_set_new(g->by_name, json_string_value(json_object_get(n, "name")), e);
    return json_array_append_new(g->nodes, n) ? GS_ENOMEM : 0;
}

static void hold(json_t *gpus, json_int_t index, const char *pod, json_int_t milli)
{
    char k[32];
    snprintf(k, sizeof k, "%" JSON_INTEGER_FORMAT, index);
    json_t *gpu = json_object_get(gpus, k);
    if (!gpu) return;
    json_array_append_new(json_object_get(gpu, "holders"), json_string(pod));
    json_t *m = json_object_get(gpu, "milli");
    if (!m && milli != 1000) { /* the shares only where one is fractional, 1000 for those before */
        json_object_set_new(gpu, "milli", m = json_array());
        for (size_t i = 1; i < json_array_size(json_object_get(gpu, "holders")); i++)
            json_array_append_new(m, json_integer(1000));
    }
    if (m) json_array_append_new(m, json_integer(milli));
}

static int asm_pod(struct grid *g, const struct pod_rec *r)
{
    if (r->state == POD_NONE || !gs_auth_sees_namespace(g->who, r->ns)) return 0;
    if (r->state == POD_PENDING) {
        json_t *p = json_pack("{s:s, s:s, s:f}", "namespace", r->ns, "name", r->name, "gpus", r->gpus);
        if (!p) return GS_ENOMEM;
        if (r->created) json_object_set_new(p, "creationTimestamp", json_string(r->created));
        if (r->group) json_object_set_new(p, "podGroup", json_string(r->group));
        if (r->queue) json_object_set_new(p, "queue", json_string(r->queue));
        return json_array_append_new(g->pending, p) ? GS_ENOMEM : 0;
    }
    char pod[640];
    snprintf(pod, sizeof pod, "%s/%s", r->ns, r->name);
    if (r->group) json_object_set_new(g->grouped, pod, json_string(r->group));
    json_t *e = json_object_get(g->by_name, r->node);
    if (!e) return 0;
    json_t *gpus = json_object_get(e, "gpus");
    for (size_t i = 0; i < r->ndev; i++) hold(gpus, r->devs[i].index, pod, r->devs[i].milli);
    json_t *uuids = json_object_get(e, "uuids");
    for (const char *p = r->ndev ? NULL : r->uuids; p && *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char uuid[256];
        while (n && *p == ' ') p++, n--;
        while (n && p[n - 1] == ' ') n--;
        if (n < sizeof uuid) {
            memcpy(uuid, p, n);
            uuid[n] = 0;
            json_t *gi = json_object_get(uuids, uuid);
            if (gi) hold(gpus, json_integer_value(gi), pod, 1000);
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}

static int by_holder(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

/* Holders in name order; a GPU with shares keeps each share with its pod. */
static void sort_holders(json_t *gpu)
{
    json_t *h = json_object_get(gpu, "holders"), *m = json_object_get(gpu, "milli");
    size_t n = json_array_size(h);
    if (n < 2) return;
    if (!m) {
        json_t **v = malloc(n * sizeof *v);
        if (!v) return;
        for (size_t i = 0; i < n; i++) v[i] = json_incref(json_array_get(h, i));
        qsort(v, n, sizeof *v, by_holder);
        json_array_clear(h);
        for (size_t i = 0; i < n; i++) json_array_append_new(h, v[i]);
        free(v);
        return;
    }
    /* a few holders per GPU: insertion sort of both arrays together */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(json_string_value(json_array_get(h, j - 1)), json_string_value(json_array_get(h, j))) > 0; j--) {
            json_t *a = json_incref(json_array_get(h, j - 1)), *b = json_incref(json_array_get(m, j - 1));
            json_array_set(h, j - 1, json_array_get(h, j));
            json_array_set(m, j - 1, json_array_get(m, j));
            json_array_set_new(h, j, a);
            json_array_set_new(m, j, b);
        }
}

static int grid_init(struct grid *g, const struct gs_principal *who)
{
    *g = (struct grid){who, json_array(), json_object(), json_array(), json_object(), 0};
    return g->nodes && g->by_name && g->pending && g->grouped ? 0 : GS_ENOMEM;
}

static void grid_done(struct grid *g)
{
    json_decref(g->nodes), json_decref(g->by_name), json_decref(g->pending), json_decref(g->grouped);
}

/* The document at version rv (new reference) or NULL (out of memory); g is spent either way. */
static json_t *asm_end(struct grid *g, int64_t rv)
{
    size_t i, j;
    json_t *n, *gpu;
    json_array_foreach(g->nodes, i, n) json_array_foreach(json_object_get(n, "gpus"), j, gpu) sort_holders(gpu);
    char rvs[32];
    snprintf(rvs, sizeof rvs, "%lld", (long long)rv);
    json_t *doc = json_pack("{s:s, s:s, s:{s:s}, s:O, s:O, s:O}", "apiVersion", "ui.gpusched.io/v1", "kind", "GPUGrid",
                            "metadata", "resourceVersion", rvs, "nodes", g->nodes, "pending", g->pending, "grouped",
                            g->grouped);
    grid_done(g);
    return doc;
}

/*--- From the store ---*/

static int prefixes(char *np, char *pp, size_t len)
{
    const struct gs_api_resource *nr = gs_api_resource_find("", "v1", "nodes"), *pr = gs_api_resource_find("", "v1", "pods");
    if (!nr || !pr || gs_api_key(nr, NULL, NULL, np, len) < 0 || gs_api_key(pr, NULL, NULL, pp, len) < 0)
        return GS_EINVAL;
    return 0;
}

static int store_node(const char *key, json_t *obj, void *arg)
{
    struct grid *g = arg;
    int err;
    struct node_rec *r = node_rec(key, obj, &err);
    if (r) err = asm_node(g, r);
    node_rec_free(r);
    return err;
}

static int store_pod(const char *key, json_t *obj, void *arg)
{
    struct pod_rec *r = pod_rec(key, obj);
    int err = r ? asm_pod(arg, r) : GS_ENOMEM;
    free(r);
    return err;
}

json_t *gs_ui_gpugrid(struct gs_store *store, const struct gs_principal *who, int *err)
{
    struct grid g;
    char np[256], pp[256];
    int64_t rv = 0, pods_rv = 0;
    if ((*err = grid_init(&g, who)) || (*err = prefixes(np, pp, sizeof np))) {
        grid_done(&g);
        return NULL;
    }
    /* Nodes first: their version is the document's, and the pods are at least as new (see the header). */
    *err = gs_store_list(store, np, store_node, &g, &rv);
    if (*err == 1) *err = 0;
    if (!*err) *err = gs_store_list(store, pp, store_pod, &g, &pods_rv);
    if (*err == 1) *err = 0;
    if (*err) {
        grid_done(&g);
        return NULL;
    }
    json_t *doc = asm_end(&g, rv);
    *err = doc ? 0 : GS_ENOMEM;
    return doc;
}

/*--- The view ---*/

struct gs_gridview {
    struct gs_store *store;
    char np[256], pp[256];
    pthread_mutex_t mu;
    pthread_cond_t cv; /* after moved, or the lists were taken (CLOCK_MONOTONIC) */
    /* Under mu: */
    void *nodes, *pods;   /* tsearch trees of node_rec / pod_rec by key */
    size_t n_nodes, n_pods, pod_bytes, node_bytes;
    int64_t after;        /* every event up to here is in the records */
    int64_t listed;       /* the pods' list version: no answer before after reaches it */
    bool ready;           /* the lists were taken (false again after a lost place in the stream) */
    size_t relists;
    atomic_bool stop;
    pthread_t th;
};

static int by_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Trees under construction (relist) or in place. */
struct trees {
    void *nodes, *pods;
    size_t n_nodes, n_pods, pod_bytes, node_bytes;
};

static void trees_free(struct trees *t)
{
    tdestroy(t->nodes, node_rec_free);
    tdestroy(t->pods, free);
    *t = (struct trees){0};
}

/* Puts r (owned) in place of the record of its key; r NULL deletes key. */
static int put_node(struct trees *t, const char *key, struct node_rec *r)
{
    struct node_rec probe = {.key = (char *)key};
    void *found = tfind(&probe, &t->nodes, by_key);
    if (found) {
        struct node_rec *old = *(struct node_rec **)found;
        t->node_bytes -= old->bytes;
        if (r) {
            *(struct node_rec **)found = r; /* same key: the tree's order holds */
        } else {
            tdelete(old, &t->nodes, by_key);
            t->n_nodes--;
        }
        node_rec_free(old);
    } else if (r) {
        if (!tsearch(r, &t->nodes, by_key)) {
            node_rec_free(r);
            return GS_ENOMEM;
        }
        t->n_nodes++;
    }
    if (r) t->node_bytes += r->bytes;
    return 0;
}

static int put_pod(struct trees *t, const char *key, struct pod_rec *r)
{
    struct pod_rec probe = {.key = key};
    void *found = tfind(&probe, &t->pods, by_key);
    if (found) {
        struct pod_rec *old = *(struct pod_rec **)found;
        t->pod_bytes -= malloc_usable_size(old);
        if (r) {
            *(struct pod_rec **)found = r;
        } else {
            tdelete(old, &t->pods, by_key);
            t->n_pods--;
        }
        free(old);
    } else if (r) {
        if (!tsearch(r, &t->pods, by_key)) {
            free(r);
            return GS_ENOMEM;
        }
        t->n_pods++;
    }
    if (r) t->pod_bytes += malloc_usable_size(r);
    return 0;
}

static int list_node(const char *key, json_t *obj, void *arg)
{
    int err;
    struct node_rec *r = node_rec(key, obj, &err);
    return r ? put_node(arg, key, r) : err;
}

static int list_pod(const char *key, json_t *obj, void *arg)
{
    struct pod_rec *r = pod_rec(key, obj);
    return r ? put_pod(arg, key, r) : GS_ENOMEM;
}

static void take(struct gs_gridview *v, struct trees *t)
{
    struct trees old = {v->nodes, v->pods, 0, 0, 0, 0};
    trees_free(&old);
    v->nodes = t->nodes, v->pods = t->pods;
    v->n_nodes = t->n_nodes, v->n_pods = t->n_pods, v->pod_bytes = t->pod_bytes, v->node_bytes = t->node_bytes;
}

static struct trees mine(struct gs_gridview *v)
{
    return (struct trees){v->nodes, v->pods, v->n_nodes, v->n_pods, v->pod_bytes, v->node_bytes};
}

/* Lists Nodes then Pods into new trees and puts them in place. */
static int relist(struct gs_gridview *v)
{
    struct trees t = {0};
    int64_t nrv = 0, prv = 0;
    int err = gs_store_list(v->store, v->np, list_node, &t, &nrv);
    if (err == 1) err = 0;
    if (!err) err = gs_store_list(v->store, v->pp, list_pod, &t, &prv);
    if (err == 1) err = 0;
    if (err) {
        trees_free(&t);
        return err;
    }
    pthread_mutex_lock(&v->mu);
    take(v, &t);
    v->after = nrv, v->listed = prv;
    v->ready = true;
    v->relists++;
    pthread_cond_broadcast(&v->cv);
    pthread_mutex_unlock(&v->mu);
    return 0;
}

static bool starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* One event into the records, under mu. */
static int apply(struct gs_gridview *v, const struct gs_store_event *ev)
{
    bool node = starts(ev->key, v->np), pod = !node && starts(ev->key, v->pp);
    if (!node && !pod) return 0;
    struct trees t = mine(v);
    int err = 0;
    if (ev->type == GS_STORE_DELETED) {
        err = node ? put_node(&t, ev->key, NULL) : put_pod(&t, ev->key, NULL);
    } else {
        json_t *obj = json_loads(ev->value, 0, NULL);
        if (!obj) {
            err = GS_EPARSE;
        } else if (node) {
            struct node_rec *r = node_rec(ev->key, obj, &err);
            err = r ? put_node(&t, ev->key, r) : err ? err : put_node(&t, ev->key, NULL);
        } else {
            struct pod_rec *r = pod_rec(ev->key, obj);
            err = r ? put_pod(&t, ev->key, r) : GS_ENOMEM;
        }
        json_decref(obj);
    }
    v->nodes = t.nodes, v->pods = t.pods;
    v->n_nodes = t.n_nodes, v->n_pods = t.n_pods, v->pod_bytes = t.pod_bytes, v->node_bytes = t.node_bytes;
    return err;
}

static void pause_ms(struct gs_gridview *v, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000, ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&v->mu);
    if (!atomic_load(&v->stop)) pthread_cond_timedwait(&v->cv, &v->mu, &ts);
    pthread_mutex_unlock(&v->mu);
}

static void *follow(void *arg)
{
    struct gs_gridview *v = arg;
    while (!atomic_load(&v->stop)) {
        pthread_mutex_lock(&v->mu);
        bool ready = v->ready;
        int64_t after = v->after;
        pthread_mutex_unlock(&v->mu);
        if (!ready) {
            int err = relist(v);
            if (err) {
                gs_log(GS_LOG_WARN, "console grid: cannot list nodes and pods; retrying", "error", gs_strerror(err), NULL);
                pause_ms(v, 1000);
            }
            continue;
        }
        struct gs_store_event *evs = NULL;
        size_t n = 0;
        int err = gs_store_events(v->store, &after, NULL, 1000, &v->stop, &evs, &n);
        pthread_mutex_lock(&v->mu);
        if (err == GS_ERANGE) {
            gs_log(GS_LOG_INFO, "console grid: the change stream moved past the view; listing again", NULL);
            v->ready = false;
        } else if (!err) {
            for (size_t i = 0; i < n; i++) {
                if (evs[i].rv <= v->after) continue;
                int e = apply(v, &evs[i]);
                if (e) { /* a record that cannot be kept: list again rather than show it wrong */
                    gs_log(GS_LOG_WARN, "console grid: cannot apply a change; listing again", "key", evs[i].key,
                           "error", gs_strerror(e), NULL);
                    v->ready = false;
                    break;
                }
            }
            if (v->ready && after > v->after) v->after = after;
            pthread_cond_broadcast(&v->cv);
        }
        pthread_mutex_unlock(&v->mu);
        gs_store_events_free(evs, n);
        if (err && err != GS_ERANGE) pause_ms(v, 100);
    }
    return NULL;
}

int gs_gridview_new(struct gs_store *store, struct gs_gridview **out)
{
    *out = NULL;
    struct gs_gridview *v = calloc(1, sizeof *v);
    if (!v) return GS_ENOMEM;
    v->store = store;
    int err = prefixes(v->np, v->pp, sizeof v->np);
    if (err) {
        free(v);
        return err;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&v->mu, NULL);
    pthread_cond_init(&v->cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&v->stop, false);
    if (pthread_create(&v->th, NULL, follow, v)) {
        pthread_cond_destroy(&v->cv);
        pthread_mutex_destroy(&v->mu);
        free(v);
        return GS_EIO;
    }
    *out = v;
    return 0;
}

void gs_gridview_free(struct gs_gridview *v)
{
    if (!v) return;
    atomic_store(&v->stop, true);
    pthread_mutex_lock(&v->mu);
    pthread_cond_broadcast(&v->cv);
    pthread_mutex_unlock(&v->mu);
    gs_store_interrupt(v->store);
    pthread_join(v->th, NULL);
    struct trees t = mine(v);
    trees_free(&t);
    pthread_cond_destroy(&v->cv);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

struct walk {
    struct grid *g;
    bool node;
};

static void walk_one(const void *nodep, VISIT which, void *arg)
{
    struct walk *w = arg;
    if ((which != postorder && which != leaf) || w->g->err) return;
    const void *rec = *(const void *const *)nodep;
    w->g->err = w->node ? asm_node(w->g, rec) : asm_pod(w->g, rec);
}

json_t *gs_gridview_grid(struct gs_gridview *v, const struct gs_principal *who, int wait_ms, int *err)
{
    int64_t want = gs_store_current_rv(v->store);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += wait_ms / 1000, until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&v->mu);
    while (!(v->ready && v->after >= want && v->after >= v->listed))
        if (pthread_cond_timedwait(&v->cv, &v->mu, &until) == ETIMEDOUT) break;
    if (!(v->ready && v->after >= want && v->after >= v->listed)) {
        pthread_mutex_unlock(&v->mu);
        *err = GS_ETIMEDOUT;
        return NULL;
    }
    struct grid g;
    json_t *doc = NULL;
    *err = grid_init(&g, who);
    if (!*err) {
        struct walk w = {&g, true};
        twalk_r(v->nodes, walk_one, &w);
        w.node = false;
        if (!g.err) twalk_r(v->pods, walk_one, &w);
        *err = g.err;
    }
    int64_t rv = v->after;
    pthread_mutex_unlock(&v->mu);
    if (*err) {
        grid_done(&g);
        return NULL;
    }
    doc = asm_end(&g, rv); /* sorting and packing outside the lock: the records are copied */
    *err = doc ? 0 : GS_ENOMEM;
    return doc;
}

void gs_gridview_stats(struct gs_gridview *v, struct gs_gridview_stats *out)
{
    pthread_mutex_lock(&v->mu);
    *out = (struct gs_gridview_stats){v->n_nodes, v->n_pods, v->pod_bytes + v->node_bytes, v->after, v->relists};
    pthread_mutex_unlock(&v->mu);
}
