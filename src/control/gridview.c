/*
 * gridview.c - the console's GPU grid: its records, its assembly, and the
 * in-memory view that keeps the records up to date from the change stream;
 * see gridview.h for what the view promises.
 *
 * Both ways to answer GET /apis/ui.gpusched.io/v1/gpugrid start from the
 * same records: a Node or Pod object becomes a record (node_rec, pod_rec).
 * gs_ui_gpugrid, the store's way, assembles a jansson tree from the records
 * of one store list per kind (asm_node, asm_pod, asm_end) and the reply
 * dumps it. The view keeps the records in search trees keyed by store key
 * (tsearch: in-order walks give key order, which the document's node and
 * pending order are), replaced one at a time as events arrive, and writes
 * the reply's bytes itself, with no tree per request:
 *
 *  - every record carries its own encoded pieces, dumped by jansson once
 *    when the record is made: a node's entry up to its GPUs and after them,
 *    each GPU's members up to its holders; a pod's holder name, its pending
 *    entry, its "grouped" member. Escaping and number formatting are
 *    jansson's, so the bytes are those json_dumps(JSON_COMPACT) writes for
 *    the store's tree (test_gridview checks them byte for byte);
 *  - a slot per node name lists the bound pods that hold a GPU there (in
 *    key order, which is the holders' name order) and caches the node's
 *    whole entry, holders included, for a principal that sees every
 *    namespace. A change to the Node or to a pod in the slot drops that one
 *    entry; the next request encodes it again from the pieces.
 *
 * So an admin's request concatenates 5,000 cached entries and walks the pod
 * records once for the pending ones and the groups (a few milliseconds at
 * 5,000 nodes and 50,000 pods). A tenant's request encodes each node's
 * entry from the pieces, keeping only the holders of its namespaces: no
 * cached entry ever carries another principal's narrowing.
 *
 * A pod record is one allocation: the struct, its strings and its device
 * list packed behind it. A node record holds its grid entry as JSON (for
 * the store's way), its UUID-to-index map and its pieces.
 *
 * Consistency: a list of Nodes at version a and of Pods at b >= a, then the
 * stream from a (events up to b replay changes the pod list has; each
 * replaces the record whole, so after b every key holds its state at b). No
 * answer before the view reached b and the store's version at the request.
 * Under a stream of changes the follower reads them in batches gathered
 * for up to 50 ms (a waiting request ends the gathering) and decodes only
 * the last change of each key in a batch: as each replaces the record
 * whole, the earlier ones would be replaced before any request saw them.
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
#include <stdint.h>
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

/*--- Encoded text ---*/

/* A growing buffer; a failed growth sets oom and drops what follows. */
struct buf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void put(struct buf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void puts_(struct buf *b, const char *s) { put(b, s, strlen(s)); }

static void put_int(struct buf *b, json_int_t v)
{
    char t[32];
    int n = snprintf(t, sizeof t, "%" JSON_INTEGER_FORMAT, v);
    put(b, t, (size_t)n);
}

/* Appends v as json_dumps(JSON_COMPACT) writes it (any value, strings included). */
static void put_json(struct buf *b, const json_t *v)
{
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t) {
        b->oom = true;
        return;
    }
    puts_(b, t);
    free(t);
}

static void put_str(struct buf *b, const char *s)
{
    json_t *j = json_string(s);
    if (!j) b->oom = true;
    else put_json(b, j);
    json_decref(j);
}

/* The members of obj before the member named split, as `{"k":v,...,"split":`
 * (to *head), and those after it closed with `}` (to *tail, each member
 * after a comma); the split member's value is left to the caller. 0 or
 * GS_ENOMEM. */
static int split_dump(const json_t *obj, const char *split, char **head, char **tail)
{
    struct buf h = {0}, t = {0};
    const char *k;
    json_t *v;
    bool after = false, first = true;
    puts_(&h, "{");
    json_object_foreach((json_t *)obj, k, v) {
        if (!strcmp(k, split)) {
            if (!first) puts_(&h, ",");
            put_str(&h, k);
            puts_(&h, ":");
            after = true;
            continue;
        }
        struct buf *b = after ? &t : &h;
        if (after || !first) puts_(b, ",");
        put_str(b, k);
        puts_(b, ":");
        put_json(b, v);
        first = false;
    }
    puts_(&t, "}");
    if (h.oom || t.oom || !after) {
        free(h.p), free(t.p);
        return GS_ENOMEM;
    }
    *head = h.p, *tail = t.p;
    return 0;
}

/*--- Records ---*/

/* A GPU's members before its holders: `{"index":0,...,"holders":`. */
struct gpu_piece {
    json_int_t index;
    bool live; /* the last GPU of its index (the one holders land on, as in asm_node's map) */
    char *head;
};

struct slot;

struct node_rec {
    char *key;     /* the store key (tree order) */
    json_t *entry; /* {name, ready, unschedulable, gpus: [{..., holders: []}], [taints], [stack], [model]} */
    json_t *uuids; /* uuid -> index */
    size_t bytes;  /* the pieces' text, a measure of its size */
    /* The entry in pieces: head ("...,"gpus":"), per GPU its head, tail (after gpus, with "}") */
    char *head, *tail;
    size_t ngpu;
    struct gpu_piece *gpus;
    struct slot *slot; /* the view's slot of its name (view only) */
};

static void node_rec_free(void *p)
{
    struct node_rec *n = p;
    if (!n) return;
    json_decref(n->entry), json_decref(n->uuids);
    for (size_t i = 0; i < n->ngpu; i++) free(n->gpus[i].head);
    free(n->gpus), free(n->head), free(n->tail);
    free(n->key);
    free(n);
}

/* The entry's pieces (see node_rec). */
static int node_pieces(struct node_rec *r)
{
    json_t *gpus = json_object_get(r->entry, "gpus");
    r->ngpu = json_array_size(gpus);
    if (r->ngpu && !(r->gpus = calloc(r->ngpu, sizeof *r->gpus))) return GS_ENOMEM;
    char *t = NULL;
    if (split_dump(r->entry, "gpus", &r->head, &r->tail)) return GS_ENOMEM;
    r->bytes = strlen(r->head) + strlen(r->tail);
    for (size_t i = 0; i < r->ngpu; i++) {
        json_t *g = json_array_get(gpus, i);
        struct gpu_piece *p = &r->gpus[i];
        p->index = json_integer_value(json_object_get(g, "index"));
        p->live = true;
        for (size_t j = 0; j < i; j++)
            if (r->gpus[j].index == p->index) r->gpus[j].live = false;
        if (split_dump(g, "holders", &p->head, &t)) return GS_ENOMEM;
        free(t); /* "}": holders is the GPU's last member */
        r->bytes += strlen(p->head);
    }
    return 0;
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
        json_object_del(gpu, "holders");   /* the grid's own, last, with "milli" after them */
        json_object_del(gpu, "milli");
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
    if (node_pieces(r)) {
        node_rec_free(r);
        return NULL;
    }
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
    /* Encoded: a bound pod's "ns/name" (a JSON string) and, in a group, its
     * `"ns/name":"group"` member; a pending pod's entry. NULL when none. */
    const char *holder, *grouped, *pend;
    double gpus;
    size_t ndev;
    struct pod_dev *devs;
    enum pod_state state;
};

/* A pod record holds GPUs of its node (it sits in the node's slot). */
static bool holds(const struct pod_rec *r) { return r->state == POD_BOUND && (r->ndev || r->uuids); }

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

/* A pending pod's entry in the document (new reference; NULL when out of memory). */
static json_t *pending_json(const char *ns, const char *name, double gpus, const char *created, const char *group,
                            const char *queue)
{
    json_t *p = json_pack("{s:s, s:s, s:f}", "namespace", ns, "name", name, "gpus", gpus);
    if (!p) return NULL;
    if ((created && json_object_set_new(p, "creationTimestamp", json_string(created))) ||
        (group && json_object_set_new(p, "podGroup", json_string(group))) ||
        (queue && json_object_set_new(p, "queue", json_string(queue)))) {
        json_decref(p);
        return NULL;
    }
    return p;
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
    /* The encoded pieces, by jansson as the store's tree is dumped. */
    char *holder = NULL, *grouped = NULL, *pend = NULL;
    double ngpus = state == POD_PENDING ? gs__ui_pod_gpus(obj) : 0;
    bool oom = false;
    if (state == POD_BOUND) {
        struct buf h = {0}, g = {0};
        char *full = malloc(strlen(ns) + strlen(name) + 2);
        if (full) sprintf(full, "%s/%s", ns, name);
        if (!full) h.oom = true;
        else put_str(&h, full);
        if (full && group) {
            put_str(&g, full);
            puts_(&g, ":");
            put_str(&g, group);
        }
        free(full);
        holder = h.p, grouped = g.p, oom = h.oom || g.oom;
    } else if (state == POD_PENDING) {
        json_t *p = pending_json(ns, name, ngpus, created, group, queue);
        pend = p ? json_dumps(p, JSON_COMPACT) : NULL;
        json_decref(p);
        oom = !pend;
    }
    size_t len = sizeof(struct pod_rec) + ndev * sizeof(struct pod_dev) + slen(key) + slen(ns) + slen(name) +
                 slen(node) + slen(group) + slen(uuids) + slen(created) + slen(queue) + slen(holder) +
                 slen(grouped) + slen(pend);
    struct pod_rec *r = oom ? NULL : malloc(len);
    if (!r) {
        free(holder), free(grouped), free(pend);
        return NULL;
    }
    *r = (struct pod_rec){.state = state, .ndev = ndev, .devs = (struct pod_dev *)(r + 1), .gpus = ngpus};
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
    r->holder = pack(&at, holder), r->grouped = pack(&at, grouped), r->pend = pack(&at, pend);
    free(holder), free(grouped), free(pend);
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
        json_t *p = pending_json(r->ns, r->name, r->gpus, r->created, r->group, r->queue);
        return !p || json_array_append_new(g->pending, p) ? GS_ENOMEM : 0;
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

/*--- The view: records, slots ---*/

/* Everything under the view's lock, or under construction by a relist. */
struct trees {
    void *nodes, *pods, *slots; /* tsearch trees: node_rec, pod_rec by key; slot by node name */
    size_t n_nodes, n_pods, pod_bytes, node_bytes, cached_bytes, n_cached;
};

/* A node name: its Node's record (if any), the bound pods holding GPUs there
 * (key order), and its encoded entry for a principal who sees every
 * namespace (NULL until asked for, and again after a change to either). */
struct slot {
    char *name;
    struct node_rec *node;
    struct pod_rec **pods;
    size_t npods, cap;
    char *text;
    size_t len;
};

struct gs_gridview {
    struct gs_store *store;
    char np[256], pp[256];
    pthread_mutex_t mu;
    pthread_cond_t cv; /* after moved, or the lists were taken (CLOCK_MONOTONIC) */
    /* Under mu: */
    struct trees t;
    int64_t after;        /* every event up to here is in the records */
    int64_t listed;       /* the pods' list version: no answer before after reaches it */
    bool ready;           /* the lists were taken (false again after a lost place in the stream) */
    int waiters;          /* grid requests waiting for the records to catch up: the follower gathers no more */
    size_t relists;
    atomic_bool stop;
    pthread_t th;
};

static int by_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void slot_free(void *p)
{
    struct slot *s = p;
    if (!s) return;
    free(s->text), free(s->pods), free(s->name);
    free(s);
}

static void trees_free(struct trees *t)
{
    tdestroy(t->slots, slot_free);
    tdestroy(t->nodes, node_rec_free);
    tdestroy(t->pods, free);
    *t = (struct trees){0};
}

static void slot_stale(struct trees *t, struct slot *s)
{
    if (!s->text) return;
    t->cached_bytes -= s->len, t->n_cached--;
    free(s->text);
    s->text = NULL, s->len = 0;
}

/* The slot of name, made when missing (NULL: out of memory). */
static struct slot *slot_get(struct trees *t, const char *name)
{
    struct slot probe = {.name = (char *)name};
    void *found = tfind(&probe, &t->slots, by_key);
    if (found) return *(struct slot **)found;
    struct slot *s = calloc(1, sizeof *s);
    if (!s || !(s->name = strdup(name))) {
        slot_free(s);
        return NULL;
    }
    if (!tsearch(s, &t->slots, by_key)) {
        slot_free(s);
        return NULL;
    }
    return s;
}

/* Drops a slot left with neither a Node nor a pod. */
static void slot_gc(struct trees *t, struct slot *s)
{
    if (s->node || s->npods) return;
    slot_stale(t, s);
    tdelete(s, &t->slots, by_key);
    slot_free(s);
}

/* Where key is, or would go, in the slot's pods (binary search by key). */
static size_t slot_at(const struct slot *s, const char *key, bool *hit)
{
    size_t lo = 0, hi = s->npods;
    *hit = false;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(s->pods[mid]->key, key);
        if (!c) {
            *hit = true;
            return mid;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void slot_leave(struct trees *t, struct pod_rec *r)
{
    if (!holds(r)) return;
    struct probe {
        char *name;
    } probe = {(char *)r->node};
    void *found = tfind(&probe, &t->slots, by_key);
    if (!found) return;
    struct slot *s = *(struct slot **)found;
    bool hit;
    size_t i = slot_at(s, r->key, &hit);
    if (hit) memmove(s->pods + i, s->pods + i + 1, (s->npods - i - 1) * sizeof *s->pods), s->npods--;
    slot_stale(t, s);
    slot_gc(t, s);
}

static int slot_join(struct trees *t, struct pod_rec *r)
{
    if (!holds(r)) return 0;
    struct slot *s = slot_get(t, r->node);
    if (!s) return GS_ENOMEM;
    bool hit;
    size_t i = slot_at(s, r->key, &hit);
    if (!hit) {
        if (s->npods == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 8;
            struct pod_rec **p = realloc(s->pods, cap * sizeof *p);
            if (!p) {
                slot_gc(t, s);
                return GS_ENOMEM;
            }
            s->pods = p, s->cap = cap;
        }
        memmove(s->pods + i + 1, s->pods + i, (s->npods - i) * sizeof *s->pods);
        s->npods++;
    }
    s->pods[i] = r;
    slot_stale(t, s);
    return 0;
}

static void node_leave(struct trees *t, struct node_rec *r)
{
    struct slot *s = r->slot;
    if (!s) return;
    if (s->node == r) s->node = NULL;
    r->slot = NULL;
    slot_stale(t, s);
    slot_gc(t, s);
}

static int node_join(struct trees *t, struct node_rec *r)
{
    struct slot *s = slot_get(t, json_string_value(json_object_get(r->entry, "name")));
    if (!s) return GS_ENOMEM;
    if (s->node) s->node->slot = NULL; /* another key of the same name: the later one holds, as by_name did */
    s->node = r, r->slot = s;
    slot_stale(t, s);
    return 0;
}

/* Puts r (owned) in place of the record of its key; r NULL deletes key. */
static int put_node(struct trees *t, const char *key, struct node_rec *r)
{
    struct node_rec probe = {.key = (char *)key};
    void *found = tfind(&probe, &t->nodes, by_key);
    if (found) {
        struct node_rec *old = *(struct node_rec **)found;
        t->node_bytes -= old->bytes;
        node_leave(t, old);
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
    if (!r) return 0;
    t->node_bytes += r->bytes;
    return node_join(t, r);
}

static int put_pod(struct trees *t, const char *key, struct pod_rec *r)
{
    struct pod_rec probe = {.key = key};
    void *found = tfind(&probe, &t->pods, by_key);
    if (found) {
        struct pod_rec *old = *(struct pod_rec **)found;
        t->pod_bytes -= malloc_usable_size(old);
        slot_leave(t, old);
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
    if (!r) return 0;
    t->pod_bytes += malloc_usable_size(r);
    return slot_join(t, r);
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
    trees_free(&v->t);
    v->t = t;
    v->after = nrv, v->listed = prv;
    v->ready = true;
    v->relists++;
    pthread_cond_broadcast(&v->cv);
    pthread_mutex_unlock(&v->mu);
    return 0;
}

static bool starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* One event decoded into its record, without the lock (the follower's own
 * work); put in place under it by put_change. */
struct change {
    enum { CH_NONE, CH_NODE, CH_POD } kind;
    bool del;
    struct node_rec *n;
    struct pod_rec *p;
    int err;
};

static void decode(const struct gs_gridview *v, const struct gs_store_event *ev, struct change *c)
{
    *c = (struct change){0};
    bool node = starts(ev->key, v->np), pod = !node && starts(ev->key, v->pp);
    if (!node && !pod) return;
    c->kind = node ? CH_NODE : CH_POD;
    if (ev->type == GS_STORE_DELETED) {
        c->del = true;
        return;
    }
    json_t *obj = json_loads(ev->value, 0, NULL);
    if (!obj) {
        c->err = GS_EPARSE;
    } else if (node) {
        c->n = node_rec(ev->key, obj, &c->err);
        c->del = !c->n && !c->err; /* a Node without a name shows nothing */
    } else {
        c->p = pod_rec(ev->key, obj);
        if (!c->p) c->err = GS_ENOMEM;
    }
    json_decref(obj);
}

/* The decoded change into the records, under mu; c's record is taken (or freed). */
static int put_change(struct gs_gridview *v, const struct gs_store_event *ev, struct change *c)
{
    struct trees *t = &v->t;
    if (c->err || c->kind == CH_NONE) return c->err;
    if (c->kind == CH_NODE) return put_node(t, ev->key, c->del ? NULL : c->n);
    return put_pod(t, ev->key, c->del ? NULL : c->p);
}

static void change_free(struct change *c)
{
    node_rec_free(c->n);
    free(c->p);
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

/* Under a stream of changes the follower lets the next ones gather for
 * GATHER_MS before it reads them, unless a grid request is waiting (it
 * wakes the follower at once): a pod's create and its binding then mostly
 * come in one batch, where only the last version of each key is decoded,
 * and the thread wakes some 20 times a second instead of once per change.
 * The store's ring keeps 75 s of changes, so the wait never loses a place. */
#define GATHER_MS 50

static void gather(struct gs_gridview *v)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += GATHER_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&v->mu);
    while (!atomic_load(&v->stop) && !v->waiters)
        if (pthread_cond_timedwait(&v->cv, &v->mu, &ts) == ETIMEDOUT) break;
    pthread_mutex_unlock(&v->mu);
}

static uint64_t key_hash(const char *k)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *k; k++) h = (h ^ (unsigned char)*k) * 1099511628211ULL;
    return h;
}

/* superseded[i] true when a later event of the batch changes the same Node
 * or Pod: put in place one after the other, only the last one's record
 * stays, so the earlier ones need no decoding. false when out of memory. */
static bool mark_superseded(const struct gs_gridview *v, const struct gs_store_event *evs, size_t n, bool *superseded)
{
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    size_t *slot = malloc(cap * sizeof *slot); /* index + 1 of the latest event of a key; 0 empty */
    if (!slot) return false;
    memset(slot, 0, cap * sizeof *slot);
    for (size_t i = 0; i < n; i++) {
        if (!starts(evs[i].key, v->np) && !starts(evs[i].key, v->pp)) continue;
        size_t h = (size_t)key_hash(evs[i].key) & (cap - 1);
        while (slot[h] && strcmp(evs[slot[h] - 1].key, evs[i].key)) h = (h + 1) & (cap - 1);
        if (slot[h]) superseded[slot[h] - 1] = true;
        slot[h] = i + 1;
    }
    free(slot);
    return true;
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
        /* Decoded before taking the lock, so a grid request waits only for the records' swap. Only this
         * thread writes v->after, so it reads it here without the lock. */
        struct change *chs = !err && n ? calloc(n, sizeof *chs) : NULL;
        bool *later = chs ? calloc(n, sizeof *later) : NULL;
        if (later && !mark_superseded(v, evs, n, later)) memset(later, 0, n * sizeof *later);
        if (chs)
            for (size_t i = 0; i < n; i++) /* a superseded one stays CH_NONE: put_change passes it */
                if (evs[i].rv > v->after && !(later && later[i])) decode(v, &evs[i], &chs[i]);
        free(later);
        pthread_mutex_lock(&v->mu);
        if (err == GS_ERANGE) {
            gs_log(GS_LOG_INFO, "console grid: the change stream moved past the view; listing again", NULL);
            v->ready = false;
        } else if (!err && n && !chs) {
            gs_log(GS_LOG_WARN, "console grid: out of memory for a batch of changes; listing again", NULL);
            v->ready = false;
        } else if (!err) {
            for (size_t i = 0; i < n; i++) {
                if (evs[i].rv <= v->after) continue;
                int e = put_change(v, &evs[i], &chs[i]);
                chs[i].n = NULL, chs[i].p = NULL; /* taken by the trees (or freed there) */
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
        for (size_t i = 0; chs && i < n; i++) change_free(&chs[i]);
        free(chs);
        gs_store_events_free(evs, n);
        if (err && err != GS_ERANGE) pause_ms(v, 100);
        else if (!err && n) gather(v);
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
    trees_free(&v->t);
    pthread_cond_destroy(&v->cv);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

/*--- The view: encoding ---*/

/* One hold of a GPU by a pod, in the order the holders are listed. */
struct hold_at {
    json_int_t index, milli;
    const struct pod_rec *pod;
};

struct holds {
    struct hold_at *h;
    size_t n, cap;
    bool oom;
};

static void add_hold(struct holds *hs, json_int_t index, json_int_t milli, const struct pod_rec *pod)
{
    if (hs->n == hs->cap) {
        size_t cap = hs->cap ? hs->cap * 2 : 16;
        struct hold_at *h = realloc(hs->h, cap * sizeof *h);
        if (!h) {
            hs->oom = true;
            return;
        }
        hs->h = h, hs->cap = cap;
    }
    hs->h[hs->n++] = (struct hold_at){index, milli, pod};
}

/* The holds of the pods in s that who sees (who NULL: every pod), in key
 * order and each pod's device order: status.devices by index, else the
 * devices annotation's UUIDs through the node's map (as asm_pod). */
static void slot_holds(const struct slot *s, const struct gs_principal *who, struct holds *hs)
{
    for (size_t k = 0; k < s->npods && !hs->oom; k++) {
        const struct pod_rec *p = s->pods[k];
        if (who && !gs_auth_sees_namespace(who, p->ns)) continue;
        for (size_t i = 0; i < p->ndev; i++) add_hold(hs, p->devs[i].index, p->devs[i].milli, p);
        for (const char *u = p->ndev ? NULL : p->uuids; u && *u;) {
            const char *end = strchr(u, ',');
            size_t n = end ? (size_t)(end - u) : strlen(u);
            while (n && *u == ' ') u++, n--;
            while (n && u[n - 1] == ' ') n--;
            char uuid[256];
            if (n < sizeof uuid) {
                memcpy(uuid, u, n);
                uuid[n] = 0;
                json_t *gi = json_object_get(s->node->uuids, uuid);
                if (gi) add_hold(hs, json_integer_value(gi), 1000, p);
            }
            u = end ? end + 1 : NULL;
        }
    }
}

/* The node's entry for who (NULL: every namespace), as json_dumps writes asm_node + asm_pod's tree. */
static void encode_node(struct buf *b, const struct slot *s, const struct gs_principal *who)
{
    const struct node_rec *r = s->node;
    struct holds hs = {0};
    slot_holds(s, who, &hs);
    if (hs.oom) b->oom = true;
    const struct hold_at *h = hs.h;
    size_t nh = hs.n;
    puts_(b, r->head);
    puts_(b, "[");
    for (size_t j = 0; j < r->ngpu; j++) {
        const struct gpu_piece *g = &r->gpus[j];
        if (j) puts_(b, ",");
        puts_(b, g->head);
        puts_(b, "[");
        bool shares = false, first = true;
        for (size_t i = 0; i < nh && g->live; i++) {
            if (h[i].index != g->index) continue;
            if (!first) puts_(b, ",");
            puts_(b, h[i].pod->holder);
            shares |= h[i].milli != 1000, first = false;
        }
        puts_(b, "]");
        if (shares) { /* the shares only where one is fractional */
            puts_(b, ",\"milli\":[");
            first = true;
            for (size_t i = 0; i < nh; i++) {
                if (h[i].index != g->index) continue;
                if (!first) puts_(b, ",");
                put_int(b, h[i].milli);
                first = false;
            }
            puts_(b, "]");
        }
        puts_(b, "}");
    }
    puts_(b, "]");
    puts_(b, r->tail);
    free(hs.h);
}

struct enc {
    struct buf out, pend, grouped;
    size_t nodes; /* entries written */
    struct trees *t;
    const struct gs_principal *who; /* NULL: sees every namespace */
};

static void enc_node(const void *nodep, VISIT which, void *arg)
{
    struct enc *e = arg;
    if (which != postorder && which != leaf) return;
    const struct node_rec *r = *(const struct node_rec *const *)nodep;
    struct slot *s = r->slot;
    if (e->nodes++) puts_(&e->out, ",");
    if (!s || s->node != r) { /* a second key of a name (never from the API): no holders, as before */
        struct slot alone = {.node = (struct node_rec *)r};
        encode_node(&e->out, &alone, e->who);
        return;
    }
    if (e->who) {
        encode_node(&e->out, s, e->who);
        return;
    }
    if (!s->text) {
        struct buf one = {0};
        encode_node(&one, s, NULL);
        if (one.oom) {
            free(one.p);
            e->out.oom = true;
            return;
        }
        s->text = one.p, s->len = one.len;
        e->t->cached_bytes += s->len, e->t->n_cached++;
    }
    put(&e->out, s->text, s->len);
}

static void enc_pod(const void *nodep, VISIT which, void *arg)
{
    struct enc *e = arg;
    if (which != postorder && which != leaf) return;
    const struct pod_rec *r = *(const struct pod_rec *const *)nodep;
    if (r->state == POD_NONE || (e->who && !gs_auth_sees_namespace(e->who, r->ns))) return;
    struct buf *b = r->state == POD_PENDING ? &e->pend : &e->grouped;
    const char *text = r->state == POD_PENDING ? r->pend : r->grouped;
    if (!text) return;
    if (b->len) puts_(b, ",");
    puts_(b, text);
}

char *gs_gridview_text(struct gs_gridview *v, const struct gs_principal *who, int wait_ms, size_t *len, int *err)
{
    int64_t want = gs_store_current_rv(v->store);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += wait_ms / 1000, until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&v->mu);
    if (!(v->ready && v->after >= want && v->after >= v->listed)) {
        v->waiters++;
        pthread_cond_broadcast(&v->cv); /* ends the follower's gathering */
        while (!(v->ready && v->after >= want && v->after >= v->listed))
            if (pthread_cond_timedwait(&v->cv, &v->mu, &until) == ETIMEDOUT) break;
        v->waiters--;
    }
    if (!(v->ready && v->after >= want && v->after >= v->listed)) {
        pthread_mutex_unlock(&v->mu);
        *err = GS_ETIMEDOUT;
        return NULL;
    }
    struct enc e = {.t = &v->t, .who = who && who->role == GS_ROLE_TENANT ? who : NULL};
    char rv[32];
    snprintf(rv, sizeof rv, "%lld", (long long)v->after);
    puts_(&e.out, "{\"apiVersion\":\"ui.gpusched.io/v1\",\"kind\":\"GPUGrid\",\"metadata\":{\"resourceVersion\":\"");
    puts_(&e.out, rv);
    puts_(&e.out, "\"},\"nodes\":[");
    twalk_r(v->t.nodes, enc_node, &e);
    twalk_r(v->t.pods, enc_pod, &e);
    pthread_mutex_unlock(&v->mu);
    puts_(&e.out, "],\"pending\":[");
    if (e.pend.len) put(&e.out, e.pend.p, e.pend.len);
    puts_(&e.out, "],\"grouped\":{");
    if (e.grouped.len) put(&e.out, e.grouped.p, e.grouped.len);
    puts_(&e.out, "}}");
    bool oom = e.out.oom || e.pend.oom || e.grouped.oom;
    free(e.pend.p), free(e.grouped.p);
    if (oom) {
        free(e.out.p);
        *err = GS_ENOMEM;
        return NULL;
    }
    *err = 0;
    *len = e.out.len;
    return e.out.p;
}

json_t *gs_gridview_grid(struct gs_gridview *v, const struct gs_principal *who, int wait_ms, int *err)
{
    size_t len = 0;
    char *text = gs_gridview_text(v, who, wait_ms, &len, err);
    if (!text) return NULL;
    json_t *doc = json_loadb(text, len, 0, NULL);
    free(text);
    *err = doc ? 0 : GS_ENOMEM;
    return doc;
}

void gs_gridview_stats(struct gs_gridview *v, struct gs_gridview_stats *out)
{
    pthread_mutex_lock(&v->mu);
    const struct trees *t = &v->t;
    *out = (struct gs_gridview_stats){t->n_nodes, t->n_pods, t->pod_bytes + t->node_bytes + t->cached_bytes, v->after,
                                      v->relists, t->n_cached};
    pthread_mutex_unlock(&v->mu);
}
