/*
 * dra_alloc.c - the DRA pool view and the allocator (see dra_alloc.h).
 *
 * The view keeps owned copies of slices, classes and taint rules and, after
 * every change to them, rebuilds a flat index: every usable device (latest
 * generation of a complete, valid pool) once, in slice-name then device-name
 * order, with its merged taints, its resolved counter consumption, and the
 * result of every DeviceClass's selectors on it. Class selectors are
 * evaluated when a slice or class changes, never per scheduling attempt: the
 * hot path (one pod, one node) then only walks the node's few devices,
 * evaluates the claim's own selectors, and checks use counts. Holds (devices
 * of allocated claims) change per pod and are applied incrementally to the
 * index; a rebuild recomputes them from the hold records, so the two never
 * drift.
 *
 * gs_dra_allocate first filters each request's candidates (class, selectors,
 * taints, counters) and answers the common "not enough devices" case without
 * searching; then it runs a depth-first search over requests in claim order,
 * firstAvailable alternatives in order, and device sets in increasing
 * candidate order (a set is tried once, not once per permutation), checking
 * constraints and counters incrementally and backtracking on failure. A step
 * bound cuts off pathological searches with GS_ERANGE rather than a wrong
 * "does not fit".
 */
#include "sched/dra_alloc.h"

#include "core/error.h"
#include "sched/strmap.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- The view ---*/

struct vslice {
    struct gs_dra_slice s;
    size_t *order;        /* device indices sorted by name */
    uint8_t *class_res;   /* [device][class]: CM_* for classes[] as of class_epoch */
    uint64_t class_epoch;
};

enum { CM_NO = 0, CM_YES = 1, CM_ERR = 2 };

struct slot {             /* one counter of a counter set of a usable pool */
    int64_t cap, used;
};

struct use_ref {
    size_t slot;
    int64_t amount;
};

struct dev {
    const struct vslice *vs;
    const struct gs_dra_device *d;
    size_t di;            /* index in vs->s.devices */
    char *key;            /* "driver\x1fpool\x1fdevice" */
    struct gs_cel_device cel;
    const struct gs_dra_taint **taints;
    size_t ntaints;
    struct use_ref *uses;
    size_t nuses;
    bool bad_counters;    /* consumes a counter its pool does not define */
    int held;             /* holds by claims (non-admin results) */
};

struct nodeent {
    char *name;
    size_t *devs;         /* indices into v->devs, ascending */
    size_t n;
};

struct hold {
    char *uid;
    struct gs_dra_result *r;
    size_t n;
};

struct gs_dra_pool_view {
    struct vslice **slices;
    size_t nslices;
    struct gs_dra_class **classes; /* sorted by name */
    size_t nclasses;
    struct gs_dra_taint_rule **rules;
    size_t nrules;
    struct gs__strmap holds; /* uid -> struct hold */
    uint64_t gen, class_epoch;
    /* The index (rebuilt). */
    struct dev *devs;
    size_t ndevs;
    struct gs__strmap by_key;  /* dev key -> index + 1 */
    struct gs__strmap by_node; /* node -> struct nodeent */
    struct nodeent allnodes;   /* devices of allNodes slices */
    char **node_names;         /* sorted */
    size_t nnode_names;
    struct slot *slots;
    size_t nslots;
};

static char *key_of(const char *driver, const char *pool, const char *device)
{
    char *k = NULL;
    if (asprintf(&k, "%s\x1f%s\x1f%s", driver ? driver : "", pool ? pool : "", device ? device : "") < 0) return NULL;
    return k;
}

static void index_free(struct gs_dra_pool_view *v)
{
    for (size_t i = 0; i < v->ndevs; i++) {
        free(v->devs[i].key);
        free(v->devs[i].taints);
        free(v->devs[i].uses);
    }
    free(v->devs);
    v->devs = NULL;
    v->ndevs = 0;
    gs__strmap_free(&v->by_key);
    for (size_t i = 0; i < v->by_node.cap; i++) {
        struct nodeent *ne = v->by_node.slots[i].key ? v->by_node.slots[i].val : NULL;
        if (!ne) continue;
        free(ne->name);
        free(ne->devs);
        free(ne);
    }
    gs__strmap_free(&v->by_node);
    free(v->allnodes.devs);
    v->allnodes = (struct nodeent){0};
    free(v->node_names);
    v->node_names = NULL;
    v->nnode_names = 0;
    free(v->slots);
    v->slots = NULL;
    v->nslots = 0;
}

struct gs_dra_pool_view *gs_dra_view_new(void)
{
    struct gs_dra_pool_view *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    gs__strmap_init(&v->holds);
    gs__strmap_init(&v->by_key);
    gs__strmap_init(&v->by_node);
    return v;
}

static void vslice_free(struct vslice *vs)
{
    if (!vs) return;
    gs_dra_slice_free(&vs->s);
    free(vs->order);
    free(vs->class_res);
    free(vs);
}

static void hold_free(struct hold *h)
{
    if (!h) return;
    gs_dra_results_free(h->r, h->n);
    free(h->uid);
    free(h);
}

void gs_dra_view_free(struct gs_dra_pool_view *v)
{
    if (!v) return;
    index_free(v);
    for (size_t i = 0; i < v->nslices; i++) vslice_free(v->slices[i]);
    free(v->slices);
    for (size_t i = 0; i < v->nclasses; i++) {
        gs_dra_class_free(v->classes[i]);
        free(v->classes[i]);
    }
    free(v->classes);
    for (size_t i = 0; i < v->nrules; i++) {
        gs_dra_taint_rule_free(v->rules[i]);
        free(v->rules[i]);
    }
    free(v->rules);
    for (size_t i = 0; i < v->holds.cap; i++)
        if (v->holds.slots[i].key) hold_free(v->holds.slots[i].val);
    gs__strmap_free(&v->holds);
    free(v);
}

uint64_t gs_dra_view_generation(const struct gs_dra_pool_view *v)
{
    return v->gen;
}

/*--- Rebuilding the index ---*/

static const struct gs_cel_attr *attr_of(const struct gs_dra_device *d, const char *domain, const char *name)
{
    for (size_t i = 0; i < d->nattrs; i++)
        if (!strcmp(d->attrs[i].name, name) && !strcmp(d->attrs[i].domain, domain)) return &d->attrs[i];
    return NULL;
}

/* "domain/name" lookup. */
static const struct gs_cel_attr *attr_full(const struct gs_dra_device *d, const char *full)
{
    const char *slash = strchr(full, '/');
    if (!slash) return NULL;
    size_t dl = (size_t)(slash - full);
    for (size_t i = 0; i < d->nattrs; i++)
        if (strlen(d->attrs[i].domain) == dl && !strncmp(d->attrs[i].domain, full, dl) &&
            !strcmp(d->attrs[i].name, slash + 1))
            return &d->attrs[i];
    return NULL;
}

static void cel_device(const struct gs_dra_slice *s, const struct gs_dra_device *d, struct gs_cel_device *out)
{
    *out = (struct gs_cel_device){.driver = s->driver, .attrs = d->attrs, .nattrs = d->nattrs,
                                  .capacity = d->capacity, .ncapacity = d->ncapacity,
                                  .allow_multiple_allocations = d->allow_multiple_allocations};
}

static int class_eval(const struct gs_dra_class *c, const struct gs_cel_device *dev, struct gs_cel_error *err)
{
    for (size_t k = 0; k < c->nselectors; k++) {
        bool ok = false;
        if (gs_cel_eval(c->selectors[k].prog, dev, &ok, err)) return CM_ERR;
        if (!ok) return CM_NO;
    }
    return CM_YES;
}

static int vslice_eval_classes(struct gs_dra_pool_view *v, struct vslice *vs)
{
    if (vs->class_epoch == v->class_epoch && (vs->class_res || !vs->s.ndevices || !v->nclasses)) return 0;
    free(vs->class_res);
    vs->class_res = NULL;
    if (vs->s.ndevices && v->nclasses) {
        vs->class_res = malloc(vs->s.ndevices * v->nclasses);
        if (!vs->class_res) return GS_ENOMEM;
        for (size_t i = 0; i < vs->s.ndevices; i++) {
            struct gs_cel_device cd;
            cel_device(&vs->s, &vs->s.devices[i], &cd);
            for (size_t c = 0; c < v->nclasses; c++) {
                struct gs_cel_error err;
                vs->class_res[i * v->nclasses + c] = (uint8_t)class_eval(v->classes[c], &cd, &err);
            }
        }
    }
    vs->class_epoch = v->class_epoch;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool same_pool(const struct gs_dra_slice *a, const struct gs_dra_slice *b)
{
    return !strcmp(a->driver, b->driver) && !strcmp(a->pool, b->pool);
}

/* Whether slice i belongs to a usable pool: its generation is the pool's
 * highest, the pool has resourceSliceCount slices of that generation which
 * agree on the count, and no device name repeats within it. */
static bool pool_usable(const struct gs_dra_pool_view *v, size_t i)
{
    const struct gs_dra_slice *s = &v->slices[i]->s;
    int64_t seen = 0;
    for (size_t j = 0; j < v->nslices; j++) {
        const struct gs_dra_slice *o = &v->slices[j]->s;
        if (!same_pool(s, o)) continue;
        if (o->generation > s->generation) return false;
        if (o->generation < s->generation) continue;
        if (o->slice_count != s->slice_count) return false;
        seen++;
        if (j == i) continue;
        for (size_t a = 0; a < s->ndevices; a++)
            for (size_t b = 0; b < o->ndevices; b++)
                if (!strcmp(s->devices[a].name, o->devices[b].name)) return false;
    }
    return seen == s->slice_count;
}

static int node_add(struct gs_dra_pool_view *v, const char *node, size_t di)
{
    struct nodeent *ne = gs__strmap_get(&v->by_node, node);
    if (!ne) {
        ne = calloc(1, sizeof *ne);
        if (!ne || !(ne->name = strdup(node))) {
            free(ne);
            return GS_ENOMEM;
        }
        if (gs__strmap_put(&v->by_node, ne->name, ne)) {
            free(ne->name);
            free(ne);
            return GS_ENOMEM;
        }
    }
    if (ne->n && ne->devs[ne->n - 1] == di) return 0;
    size_t *g = realloc(ne->devs, (ne->n + 1) * sizeof *g);
    if (!g) return GS_ENOMEM;
    ne->devs = g;
    ne->devs[ne->n++] = di;
    return 0;
}

static bool rule_matches(const struct gs_dra_taint_rule *r, const struct dev *d)
{
    return (!r->driver || !strcmp(r->driver, d->vs->s.driver)) && (!r->pool || !strcmp(r->pool, d->vs->s.pool)) &&
           (!r->device || !strcmp(r->device, d->d->name));
}

static void apply_hold(struct gs_dra_pool_view *v, const struct gs_dra_result *r, size_t n, int sign)
{
    for (size_t i = 0; i < n; i++) {
        if (r[i].admin_access) continue;
        char *k = key_of(r[i].driver, r[i].pool, r[i].device);
        if (!k) continue;
        uintptr_t ix = (uintptr_t)gs__strmap_get(&v->by_key, k);
        free(k);
        if (!ix) continue;
        struct dev *d = &v->devs[ix - 1];
        int before = d->held;
        d->held += sign;
        if (d->held < 0) d->held = 0;
        /* Counters are consumed once per device, however many claims share it. */
        if ((before == 0) != (d->held == 0))
            for (size_t u = 0; u < d->nuses; u++) v->slots[d->uses[u].slot].used += sign * d->uses[u].amount;
    }
}

static int resolve_counters(struct gs_dra_pool_view *v, struct dev *d, const size_t *pool_slices, size_t npool,
                            const size_t *slot_base)
{
    const struct gs_dra_device *dv = d->d;
    size_t total = 0;
    for (size_t c = 0; c < dv->nconsumes; c++) total += dv->consumes[c].n;
    if (!total) return 0;
    d->uses = calloc(total, sizeof *d->uses);
    if (!d->uses) return GS_ENOMEM;
    for (size_t c = 0; c < dv->nconsumes; c++) {
        const struct gs_dra_counter_use *u = &dv->consumes[c];
        bool found_set = false;
        for (size_t p = 0; p < npool && !found_set; p++) {
            const struct gs_dra_slice *ps = &v->slices[pool_slices[p]]->s;
            size_t base = slot_base[p];
            for (size_t cs = 0; cs < ps->ncounters; cs++) {
                if (strcmp(ps->counters[cs].name, u->counter_set)) {
                    base += ps->counters[cs].n;
                    continue;
                }
                found_set = true;
                for (size_t k = 0; k < u->n; k++) {
                    size_t j = 0;
                    while (j < ps->counters[cs].n && strcmp(ps->counters[cs].names[j], u->names[k])) j++;
                    if (j == ps->counters[cs].n) {
                        d->bad_counters = true;
                        continue;
                    }
                    d->uses[d->nuses++] = (struct use_ref){base + j, u->values_milli[k]};
                }
                break;
            }
        }
        if (!found_set) d->bad_counters = true;
    }
    return 0;
}

static int rebuild(struct gs_dra_pool_view *v)
{
    index_free(v);
    gs__strmap_init(&v->by_key);
    gs__strmap_init(&v->by_node);
    size_t total = 0, nslots = 0;
    bool *usable = calloc(v->nslices ? v->nslices : 1, sizeof *usable);
    size_t *slot_base = calloc(v->nslices ? v->nslices : 1, sizeof *slot_base);
    size_t *pool_slices = calloc(v->nslices ? v->nslices : 1, sizeof *pool_slices);
    size_t *pool_base = calloc(v->nslices ? v->nslices : 1, sizeof *pool_base);
    int rc = GS_ENOMEM;
    if (!usable || !slot_base || !pool_slices || !pool_base) goto out;
    for (size_t i = 0; i < v->nslices; i++) {
        if (vslice_eval_classes(v, v->slices[i])) goto out;
        if (!(usable[i] = pool_usable(v, i))) continue;
        total += v->slices[i]->s.ndevices;
        slot_base[i] = nslots;
        for (size_t c = 0; c < v->slices[i]->s.ncounters; c++) nslots += v->slices[i]->s.counters[c].n;
    }
    v->slots = calloc(nslots ? nslots : 1, sizeof *v->slots);
    v->devs = calloc(total ? total : 1, sizeof *v->devs);
    if (!v->slots || !v->devs) goto out;
    v->nslots = nslots;
    for (size_t i = 0; i < v->nslices; i++) {
        if (!usable[i]) continue;
        const struct gs_dra_slice *s = &v->slices[i]->s;
        for (size_t c = 0, b = slot_base[i]; c < s->ncounters; c++)
            for (size_t k = 0; k < s->counters[c].n; k++) v->slots[b++].cap = s->counters[c].values_milli[k];
    }
    for (size_t i = 0; i < v->nslices; i++) {
        if (!usable[i]) continue;
        struct vslice *vs = v->slices[i];
        size_t npool = 0;
        for (size_t j = 0; j < v->nslices; j++)
            if (usable[j] && same_pool(&vs->s, &v->slices[j]->s)) {
                pool_base[npool] = slot_base[j];
                pool_slices[npool++] = j;
            }
        for (size_t k = 0; k < vs->s.ndevices; k++) {
            size_t di = vs->order[k];
            struct dev *d = &v->devs[v->ndevs];
            d->vs = vs;
            d->d = &vs->s.devices[di];
            d->di = di;
            cel_device(&vs->s, d->d, &d->cel);
            if (!(d->key = key_of(vs->s.driver, vs->s.pool, d->d->name))) goto out;
            v->ndevs++;
            if (resolve_counters(v, d, pool_slices, npool, pool_base)) goto out;
            size_t nt = d->d->ntaints;
            for (size_t r = 0; r < v->nrules; r++) nt += rule_matches(v->rules[r], d);
            if (nt) {
                if (!(d->taints = calloc(nt, sizeof *d->taints))) goto out;
                for (size_t t = 0; t < d->d->ntaints; t++) d->taints[d->ntaints++] = &d->d->taints[t];
                for (size_t r = 0; r < v->nrules; r++)
                    if (rule_matches(v->rules[r], d)) d->taints[d->ntaints++] = &v->rules[r]->taint;
            }
            if (gs__strmap_put(&v->by_key, d->key, (void *)(uintptr_t)v->ndevs)) goto out;
            size_t idx = v->ndevs - 1;
            const struct gs_dra_slice *s = &vs->s;
            if (s->node_name && node_add(v, s->node_name, idx)) goto out;
            for (size_t n = 0; n < s->nselector_nodes; n++)
                if (node_add(v, s->selector_nodes[n], idx)) goto out;
            if (s->per_device_nodes && d->d->node_name && node_add(v, d->d->node_name, idx)) goto out;
            if (s->all_nodes || (s->per_device_nodes && d->d->all_nodes)) {
                size_t *g = realloc(v->allnodes.devs, (v->allnodes.n + 1) * sizeof *g);
                if (!g) goto out;
                v->allnodes.devs = g;
                g[v->allnodes.n++] = idx;
            }
        }
    }
    /* Nodes see the all-nodes devices too, merged in index order. */
    v->node_names = calloc(v->by_node.n ? v->by_node.n : 1, sizeof *v->node_names);
    if (!v->node_names) goto out;
    for (size_t i = 0; i < v->by_node.cap; i++) {
        struct nodeent *ne = v->by_node.slots[i].key ? v->by_node.slots[i].val : NULL;
        if (!ne) continue;
        v->node_names[v->nnode_names++] = ne->name;
        if (!v->allnodes.n) continue;
        size_t *m = malloc((ne->n + v->allnodes.n) * sizeof *m), a = 0, b = 0, n = 0;
        if (!m) goto out;
        while (a < ne->n || b < v->allnodes.n) {
            size_t x = a < ne->n ? ne->devs[a] : SIZE_MAX, y = b < v->allnodes.n ? v->allnodes.devs[b] : SIZE_MAX;
            if (x == y) a++, b++, m[n++] = x;
            else if (x < y) a++, m[n++] = x;
            else b++, m[n++] = y;
        }
        free(ne->devs);
        ne->devs = m;
        ne->n = n;
    }
    qsort(v->node_names, v->nnode_names, sizeof *v->node_names, cmp_str);
    for (size_t i = 0; i < v->holds.cap; i++)
        if (v->holds.slots[i].key) {
            struct hold *h = v->holds.slots[i].val;
            apply_hold(v, h->r, h->n, +1);
        }
    rc = 0;
out:
    free(usable);
    free(slot_base);
    free(pool_slices);
    free(pool_base);
    v->gen++;
    return rc;
}

/*--- Changing the view ---*/

static size_t slice_find(const struct gs_dra_pool_view *v, const char *name, bool *found)
{
    size_t lo = 0, hi = v->nslices;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(v->slices[mid]->s.name, name);
        if (!c) {
            *found = true;
            return mid;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    *found = false;
    return lo;
}

static size_t dev_order_sort(struct vslice *vs)
{
    for (size_t i = 0; i < vs->s.ndevices; i++) vs->order[i] = i;
    /* Insertion sort: slices hold at most 128 devices, and it needs no global. */
    for (size_t i = 1; i < vs->s.ndevices; i++) {
        size_t x = vs->order[i], j = i;
        while (j > 0 && strcmp(vs->s.devices[vs->order[j - 1]].name, vs->s.devices[x].name) > 0) {
            vs->order[j] = vs->order[j - 1];
            j--;
        }
        vs->order[j] = x;
    }
    return vs->s.ndevices;
}

int gs_dra_view_set_slice(struct gs_dra_pool_view *v, const struct gs_dra_slice *s)
{
    if (!s || !s->name || !s->driver || !s->pool) return GS_EINVAL;
    struct vslice *vs = calloc(1, sizeof *vs);
    if (!vs) return GS_ENOMEM;
    if (gs_dra_slice_copy(&vs->s, s) || !(vs->order = calloc(s->ndevices ? s->ndevices : 1, sizeof *vs->order))) {
        vslice_free(vs);
        return GS_ENOMEM;
    }
    dev_order_sort(vs);
    vs->class_epoch = UINT64_MAX;
    bool found;
    size_t at = slice_find(v, s->name, &found);
    if (found) {
        vslice_free(v->slices[at]);
        v->slices[at] = vs;
    } else {
        struct vslice **g = realloc(v->slices, (v->nslices + 1) * sizeof *g);
        if (!g) {
            vslice_free(vs);
            return GS_ENOMEM;
        }
        v->slices = g;
        memmove(&g[at + 1], &g[at], (v->nslices - at) * sizeof *g);
        g[at] = vs;
        v->nslices++;
    }
    return rebuild(v);
}

void gs_dra_view_remove_slice(struct gs_dra_pool_view *v, const char *name)
{
    bool found;
    size_t at = slice_find(v, name, &found);
    if (!found) return;
    vslice_free(v->slices[at]);
    memmove(&v->slices[at], &v->slices[at + 1], (v->nslices - at - 1) * sizeof *v->slices);
    v->nslices--;
    rebuild(v);
}

static size_t class_find(const struct gs_dra_pool_view *v, const char *name, bool *found)
{
    size_t lo = 0, hi = v->nclasses;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(v->classes[mid]->name, name);
        if (!c) {
            *found = true;
            return mid;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    *found = false;
    return lo;
}

const struct gs_dra_class *gs_dra_view_class(const struct gs_dra_pool_view *v, const char *name)
{
    bool found;
    size_t at = class_find(v, name, &found);
    return found ? v->classes[at] : NULL;
}

int gs_dra_view_set_class(struct gs_dra_pool_view *v, const struct gs_dra_class *c)
{
    if (!c || !c->name) return GS_EINVAL;
    struct gs_dra_class *cp = malloc(sizeof *cp);
    if (!cp || gs_dra_class_copy(cp, c)) {
        free(cp);
        return GS_ENOMEM;
    }
    bool found;
    size_t at = class_find(v, c->name, &found);
    if (found) {
        gs_dra_class_free(v->classes[at]);
        free(v->classes[at]);
        v->classes[at] = cp;
    } else {
        struct gs_dra_class **g = realloc(v->classes, (v->nclasses + 1) * sizeof *g);
        if (!g) {
            gs_dra_class_free(cp);
            free(cp);
            return GS_ENOMEM;
        }
        v->classes = g;
        memmove(&g[at + 1], &g[at], (v->nclasses - at) * sizeof *g);
        g[at] = cp;
        v->nclasses++;
    }
    v->class_epoch++;
    return rebuild(v);
}

void gs_dra_view_remove_class(struct gs_dra_pool_view *v, const char *name)
{
    bool found;
    size_t at = class_find(v, name, &found);
    if (!found) return;
    gs_dra_class_free(v->classes[at]);
    free(v->classes[at]);
    memmove(&v->classes[at], &v->classes[at + 1], (v->nclasses - at - 1) * sizeof *v->classes);
    v->nclasses--;
    v->class_epoch++;
    rebuild(v);
}

int gs_dra_view_set_taint_rule(struct gs_dra_pool_view *v, const struct gs_dra_taint_rule *r)
{
    if (!r || !r->name) return GS_EINVAL;
    struct gs_dra_taint_rule *cp = malloc(sizeof *cp);
    if (!cp || gs_dra_taint_rule_copy(cp, r)) {
        free(cp);
        return GS_ENOMEM;
    }
    for (size_t i = 0; i < v->nrules; i++)
        if (!strcmp(v->rules[i]->name, r->name)) {
            gs_dra_taint_rule_free(v->rules[i]);
            free(v->rules[i]);
            v->rules[i] = cp;
            return rebuild(v);
        }
    struct gs_dra_taint_rule **g = realloc(v->rules, (v->nrules + 1) * sizeof *g);
    if (!g) {
        gs_dra_taint_rule_free(cp);
        free(cp);
        return GS_ENOMEM;
    }
    v->rules = g;
    g[v->nrules++] = cp;
    return rebuild(v);
}

void gs_dra_view_remove_taint_rule(struct gs_dra_pool_view *v, const char *name)
{
    for (size_t i = 0; i < v->nrules; i++)
        if (!strcmp(v->rules[i]->name, name)) {
            gs_dra_taint_rule_free(v->rules[i]);
            free(v->rules[i]);
            memmove(&v->rules[i], &v->rules[i + 1], (v->nrules - i - 1) * sizeof *v->rules);
            v->nrules--;
            rebuild(v);
            return;
        }
}

static int results_copy(struct gs_dra_result **out, const struct gs_dra_result *in, size_t n)
{
    *out = NULL;
    if (!n) return 0;
    struct gs_dra_result *r = calloc(n, sizeof *r);
    if (!r) return GS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        r[i].admin_access = in[i].admin_access;
        r[i].request = strdup(in[i].request ? in[i].request : "");
        r[i].driver = strdup(in[i].driver ? in[i].driver : "");
        r[i].pool = strdup(in[i].pool ? in[i].pool : "");
        r[i].device = strdup(in[i].device ? in[i].device : "");
        if (!r[i].request || !r[i].driver || !r[i].pool || !r[i].device) {
            gs_dra_results_free(r, i + 1);
            return GS_ENOMEM;
        }
    }
    *out = r;
    return 0;
}

void gs_dra_results_free(struct gs_dra_result *res, size_t n)
{
    if (!res) return;
    for (size_t i = 0; i < n; i++) {
        free(res[i].request);
        free(res[i].driver);
        free(res[i].pool);
        free(res[i].device);
    }
    free(res);
}

int gs_dra_view_hold(struct gs_dra_pool_view *v, const char *claim_uid, const struct gs_dra_result *r, size_t n)
{
    if (!claim_uid || !*claim_uid) return GS_EINVAL;
    struct hold *h = calloc(1, sizeof *h);
    if (!h || !(h->uid = strdup(claim_uid)) || results_copy(&h->r, r, n)) {
        hold_free(h);
        return GS_ENOMEM;
    }
    h->n = n;
    gs_dra_view_release(v, claim_uid);
    if (gs__strmap_put(&v->holds, h->uid, h)) {
        hold_free(h);
        return GS_ENOMEM;
    }
    apply_hold(v, h->r, h->n, +1);
    v->gen++;
    return 0;
}

void gs_dra_view_release(struct gs_dra_pool_view *v, const char *claim_uid)
{
    struct hold *h = gs__strmap_del(&v->holds, claim_uid);
    if (!h) return;
    apply_hold(v, h->r, h->n, -1);
    hold_free(h);
    v->gen++;
}

bool gs_dra_view_holds(const struct gs_dra_pool_view *v, const char *claim_uid)
{
    return gs__strmap_get(&v->holds, claim_uid) != NULL;
}

static const struct nodeent *node_devs(const struct gs_dra_pool_view *v, const char *node)
{
    const struct nodeent *ne = node ? gs__strmap_get(&v->by_node, node) : NULL;
    return ne ? ne : &v->allnodes;
}

size_t gs_dra_view_node_devices(const struct gs_dra_pool_view *v, const char *node)
{
    return node_devs(v, node)->n;
}

const char *gs_dra_view_device_uuid(const struct gs_dra_pool_view *v, const char *driver, const char *pool,
                                    const char *device)
{
    char *k = key_of(driver, pool, device);
    if (!k) return NULL;
    uintptr_t ix = (uintptr_t)gs__strmap_get(&v->by_key, k);
    free(k);
    if (!ix) return NULL;
    const struct gs_dra_device *d = v->devs[ix - 1].d;
    const struct gs_cel_attr *a = attr_of(d, "gpu.nvidia.com", "parentUUID");
    if (!a || a->kind != GS_CEL_STRING) a = attr_of(d, "gpu.nvidia.com", "uuid");
    return a && a->kind == GS_CEL_STRING ? a->s : NULL;
}

/*--- Allocation ---*/

/* One request of one claim being filled. */
struct unit {
    size_t claim;                      /* index into the call's claims */
    const struct gs_dra_request *req;
    /* per alternative: candidate positions (into the node list) that pass
     * class, selectors, taints and counters on their own */
    size_t **cand;
    size_t *ncand;
    const struct gs_dra_class **cls;   /* per alternative */
    size_t chosen_alt;
};

struct pick {                          /* one device chosen in the search */
    size_t unit, alt, pos;
};

struct search {
    const struct gs_dra_pool_view *v;
    const struct nodeent *ne;
    const struct gs_dra_claim *const *claims;
    struct unit *units;
    size_t nunits;
    int *taken;                        /* per node position: non-admin picks in this call */
    int *self;                         /* per node position: holds by this call's own claims */
    int64_t *slot_delta;               /* per distinct slot on this node */
    size_t *slot_ids;
    size_t nslot_ids;
    struct pick *picks;
    size_t npicks, cap_picks;
    long steps;
    bool cut;
    /* Why the search failed, when it did. */
    size_t fail_constraint_claim, fail_constraint;
    long constraint_fails, counter_fails, conflict_fails;
};

static bool tolerated(const struct gs_dra_subrequest *s, const struct gs_dra_taint *t)
{
    if (t->effect == GS_DRA_EFFECT_NONE) return true;
    for (size_t i = 0; i < s->ntolerations; i++) {
        const struct gs_dra_toleration *o = &s->tolerations[i];
        if (o->effect >= 0 && o->effect != t->effect) continue;
        if (!strcmp(o->op, "Exists")) {
            if (!*o->key || !strcmp(o->key, t->key)) return true;
        } else if (!strcmp(o->key, t->key) && !strcmp(o->value, t->value)) {
            return true;
        }
    }
    return false;
}

/* Holds on the device at pos by claims other than this call's. */
static int held_by_others(const struct search *S, size_t pos)
{
    return S->v->devs[S->ne->devs[pos]].held - S->self[pos];
}

static size_t slot_local(struct search *S, size_t slot)
{
    for (size_t i = 0; i < S->nslot_ids; i++)
        if (S->slot_ids[i] == slot) return i;
    return SIZE_MAX;
}

/* Do the device's counters still fit, given holds and this call's picks? */
static bool counters_fit(const struct search *S, size_t pos)
{
    const struct dev *d = &S->v->devs[S->ne->devs[pos]];
    if (held_by_others(S, pos) && d->d->allow_multiple_allocations) return true; /* consumed already, once */
    for (size_t u = 0; u < d->nuses; u++) {
        const struct slot *sl = &S->v->slots[d->uses[u].slot];
        size_t l = slot_local((struct search *)S, d->uses[u].slot);
        int64_t delta = l == SIZE_MAX ? 0 : S->slot_delta[l];
        if (sl->used + delta + d->uses[u].amount > sl->cap) return false;
    }
    return true;
}

static void counters_apply(struct search *S, size_t pos, int sign)
{
    const struct dev *d = &S->v->devs[S->ne->devs[pos]];
    if (held_by_others(S, pos) && d->d->allow_multiple_allocations) return;
    for (size_t u = 0; u < d->nuses; u++) {
        size_t l = slot_local(S, d->uses[u].slot);
        if (l != SIZE_MAX) S->slot_delta[l] += sign * d->uses[u].amount;
    }
}

static bool constraint_covers(const struct gs_dra_constraint *k, const struct gs_dra_request *r,
                              const struct gs_dra_subrequest *alt)
{
    if (!k->nrequests) return true;
    size_t rl = strlen(r->name);
    for (size_t i = 0; i < k->nrequests; i++) {
        const char *q = k->requests[i];
        if (strncmp(q, r->name, rl)) continue;
        if (!q[rl]) return true;
        if (q[rl] == '/' && r->first_available && !strcmp(q + rl + 1, alt->name)) return true;
    }
    return false;
}

static bool attr_equal(const struct gs_cel_attr *a, const struct gs_cel_attr *b)
{
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case GS_CEL_BOOL: return a->b == b->b;
    case GS_CEL_INT: return a->i == b->i;
    case GS_CEL_STRING:
    case GS_CEL_VERSION: return !strcmp(a->s, b->s);
    case GS_CEL_QUANTITY: return a->q_milli == b->q_milli;
    default: return true;
    }
}

static const struct dev *pick_dev(const struct search *S, const struct pick *p)
{
    return &S->v->devs[S->ne->devs[p->pos]];
}

/* Would adding the device at pos for (unit, alt) keep every constraint of its
 * claim satisfiable? Checked against the picks so far of the same claim. */
static bool constraints_ok(struct search *S, size_t ui, size_t alt, size_t pos)
{
    const struct unit *u = &S->units[ui];
    const struct gs_dra_claim *c = S->claims[u->claim];
    const struct gs_dra_device *d = S->v->devs[S->ne->devs[pos]].d;
    for (size_t k = 0; k < c->spec.nconstraints; k++) {
        const struct gs_dra_constraint *ct = &c->spec.constraints[k];
        if (!constraint_covers(ct, u->req, &u->req->alts[alt])) continue;
        const char *an = ct->match_attr ? ct->match_attr : ct->distinct_attr;
        if (!an) continue;
        const struct gs_cel_attr *a = attr_full(d, an);
        bool ok = a != NULL;
        for (size_t i = 0; ok && i < S->npicks; i++) {
            const struct pick *p = &S->picks[i];
            const struct unit *pu = &S->units[p->unit];
            if (pu->claim != u->claim || !constraint_covers(ct, pu->req, &pu->req->alts[p->alt])) continue;
            const struct gs_cel_attr *b = attr_full(pick_dev(S, p)->d, an);
            bool eq = b && attr_equal(a, b);
            ok = ct->match_attr ? eq : !eq;
        }
        if (!ok) {
            if (!S->constraint_fails++ || S->fail_constraint_claim > u->claim ||
                (S->fail_constraint_claim == u->claim && S->fail_constraint > k)) {
                S->fail_constraint_claim = u->claim;
                S->fail_constraint = k;
            }
            return false;
        }
    }
    return true;
}

static bool push_pick(struct search *S, size_t ui, size_t alt, size_t pos)
{
    if (S->npicks == S->cap_picks) {
        size_t nc = S->cap_picks ? S->cap_picks * 2 : 16;
        struct pick *g = realloc(S->picks, nc * sizeof *g);
        if (!g) return false;
        S->picks = g;
        S->cap_picks = nc;
    }
    S->picks[S->npicks++] = (struct pick){ui, alt, pos};
    return true;
}

/* Can the device at pos be used for (unit, alt) now? */
static bool usable_now(struct search *S, size_t ui, size_t alt, size_t pos)
{
    const struct gs_dra_subrequest *s = &S->units[ui].req->alts[alt];
    const struct dev *d = &S->v->devs[S->ne->devs[pos]];
    if (!s->admin_access) {
        if (!d->d->allow_multiple_allocations && (held_by_others(S, pos) || S->taken[pos])) {
            S->conflict_fails++;
            return false;
        }
        if (!counters_fit(S, pos)) {
            S->counter_fails++;
            return false;
        }
    }
    return constraints_ok(S, ui, alt, pos);
}

static void take(struct search *S, size_t ui, size_t alt, size_t pos, int sign)
{
    const struct gs_dra_subrequest *s = &S->units[ui].req->alts[alt];
    if (s->admin_access) return;
    const struct dev *d = &S->v->devs[S->ne->devs[pos]];
    bool first = !S->taken[pos] && sign > 0;
    S->taken[pos] += sign;
    bool last = !S->taken[pos] && sign < 0;
    /* A shared device consumes its counters once in a call, as in the view. */
    if (!d->d->allow_multiple_allocations || first || last) counters_apply(S, pos, sign);
}

static int search_unit(struct search *S, size_t ui);

/* Picks need more devices for unit ui / alt, from candidate index `from` on. */
static int search_devices(struct search *S, size_t ui, size_t alt, size_t need, size_t from)
{
    if (!need) return search_unit(S, ui + 1);
    struct unit *u = &S->units[ui];
    const struct gs_dra_subrequest *s = &u->req->alts[alt];
    size_t n = u->ncand[alt];
    for (size_t i = from; i + need <= n; i++) {
        if (++S->steps > GS_DRA_SEARCH_STEPS) {
            S->cut = true;
            return 0;
        }
        size_t pos = u->cand[alt][i];
        if (!usable_now(S, ui, alt, pos)) {
            if (s->all) return 0; /* All: every candidate must be taken */
            continue;
        }
        if (!push_pick(S, ui, alt, pos)) return GS_ENOMEM;
        take(S, ui, alt, pos, +1);
        int rc = search_devices(S, ui, alt, need - 1, i + 1);
        if (rc) return rc; /* found (1) or out of memory */
        take(S, ui, alt, pos, -1);
        S->npicks--;
        if (S->cut || s->all) return 0;
    }
    return 0;
}

/* 1 when units ui.. are all filled, 0 when not, <0 on error. */
static int search_unit(struct search *S, size_t ui)
{
    if (ui == S->nunits) return 1;
    struct unit *u = &S->units[ui];
    for (size_t a = 0; a < u->req->nalts; a++) {
        const struct gs_dra_subrequest *s = &u->req->alts[a];
        size_t need = s->all ? u->ncand[a] : (size_t)s->count;
        if (!u->cls[a] || need > u->ncand[a]) continue;
        u->chosen_alt = a;
        int rc = search_devices(S, ui, a, need, 0);
        if (rc) return rc;
        if (S->cut) return 0;
    }
    return 0;
}

static void why_set(struct gs_dra_why *why, const char *request, int considered, int matching, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void why_set(struct gs_dra_why *why, const char *request, int considered, int matching, const char *fmt, ...)
{
    if (!why) return;
    snprintf(why->request, sizeof why->request, "%s", request ? request : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->what, sizeof why->what, fmt, ap);
    va_end(ap);
    why->devices_considered = considered;
    why->devices_matching = matching;
}

static void req_label(const struct gs_dra_request *r, size_t alt, char *buf, size_t len)
{
    if (r->first_available) snprintf(buf, len, "%s/%s", r->name, r->alts[alt].name);
    else snprintf(buf, len, "%s", r->name);
}

struct filter_report {                 /* what filtering one alternative found */
    int considered, class_ok, sel_ok, untainted, counters_ok, free_;
    size_t failing_selector;           /* first selector that dropped devices to below need */
    int failing_selector_left;
    const struct gs_dra_taint *taint;  /* a taint that excluded devices */
    int tainted;
    bool all_blocked;                  /* All: a matching device cannot be given */
    const struct gs_dra_class *cls;    /* the alternative's class, NULL when missing */
};

/* Candidates of one alternative on the node: class, selectors, taints,
 * counters and holds, each device on its own. GS_EINVAL on a CEL runtime
 * error (why filled). */
static int filter_alt(struct search *S, struct unit *u, size_t a, struct filter_report *fr, struct gs_dra_why *why)
{
    const struct gs_dra_subrequest *s = &u->req->alts[a];
    const struct gs_dra_pool_view *v = S->v;
    const struct nodeent *ne = S->ne;
    char lab[128];
    req_label(u->req, a, lab, sizeof lab);
    memset(fr, 0, sizeof *fr);
    fr->failing_selector = SIZE_MAX;
    u->ncand[a] = 0;
    bool found;
    size_t ci = class_find(v, s->class_name, &found);
    u->cls[a] = fr->cls = found ? v->classes[ci] : NULL;
    if (!found) return 0;
    int *sel_left = NULL;
    if (s->nselectors && !(sel_left = calloc(s->nselectors, sizeof *sel_left))) return GS_ENOMEM;
    for (size_t p = 0; p < ne->n; p++) {
        const struct dev *d = &v->devs[ne->devs[p]];
        fr->considered++;
        uint8_t cm = d->vs->class_res ? d->vs->class_res[d->di * v->nclasses + ci] : CM_NO;
        if (cm == CM_ERR) {
            struct gs_cel_error err = {0};
            class_eval(u->cls[a], &d->cel, &err);
            why_set(why, lab, fr->considered, 0, "class \"%s\" selector on device %s: column %zu: %s", s->class_name,
                    d->d->name, err.column, err.msg);
            free(sel_left);
            return GS_EINVAL;
        }
        if (cm != CM_YES) continue;
        fr->class_ok++;
        bool ok = true;
        for (size_t k = 0; ok && k < s->nselectors; k++) {
            struct gs_cel_error err = {0};
            bool r = false;
            if (gs_cel_eval(s->selectors[k].prog, &d->cel, &r, &err)) {
                why_set(why, lab, fr->considered, 0, "selector %.120s on device %s: column %zu: %s",
                        s->selectors[k].expr, d->d->name, err.column, err.msg);
                free(sel_left);
                return GS_EINVAL;
            }
            if (r) sel_left[k]++;
            ok = r;
        }
        if (!ok) continue;
        fr->sel_ok++;
        const struct gs_dra_taint *bad = NULL;
        for (size_t t = 0; !bad && t < d->ntaints; t++)
            if (!tolerated(s, d->taints[t])) bad = d->taints[t];
        if (bad) {
            if (!fr->taint) fr->taint = bad;
            fr->tainted++;
            fr->all_blocked = true;
            continue;
        }
        fr->untainted++;
        /* Counters against the holds alone: a device whose counters others
         * exhausted never fits on this node, whatever the search picks. */
        if (d->bad_counters || (!s->admin_access && !counters_fit(S, p))) {
            fr->all_blocked = true;
            continue;
        }
        fr->counters_ok++;
        if (!s->admin_access && !d->d->allow_multiple_allocations && held_by_others(S, p)) {
            fr->all_blocked = true;
            continue;
        }
        fr->free_++;
        u->cand[a][u->ncand[a]++] = p;
    }
    size_t need = s->all ? 1 : (size_t)s->count;
    /* The selector to blame: the first that took the count below need. */
    for (size_t k = 0; k < s->nselectors; k++)
        if (fr->failing_selector == SIZE_MAX && (size_t)sel_left[k] < need &&
            sel_left[k] < (k ? sel_left[k - 1] : fr->class_ok)) {
            fr->failing_selector = k;
            fr->failing_selector_left = sel_left[k];
        }
    free(sel_left);
    return 0;
}

static bool alt_possible(const struct unit *u, size_t a, const struct filter_report *fr)
{
    const struct gs_dra_subrequest *s = &u->req->alts[a];
    if (!u->cls[a]) return false;
    if (s->all) return u->ncand[a] > 0 && !fr->all_blocked;
    return u->ncand[a] >= (size_t)s->count;
}

/* The why for an alternative that cannot be filled on its own. */
static void alt_why(const struct unit *u, size_t a, const struct filter_report *fr, struct gs_dra_why *why)
{
    const struct gs_dra_subrequest *s = &u->req->alts[a];
    char lab[128];
    req_label(u->req, a, lab, sizeof lab);
    long need = s->all ? 1 : (long)s->count;
    /* Blame the first stage that took the count below what was needed. */
    if (!fr->cls) {
        why_set(why, lab, fr->considered, 0, "class \"%s\" does not exist", s->class_name);
    } else if (!fr->considered) {
        why_set(why, lab, 0, 0, "no devices on this node");
    } else if (fr->class_ok < need && fr->class_ok < fr->considered) {
        why_set(why, lab, fr->considered, fr->class_ok, "class \"%s\" selectors matched %d of %d devices",
                s->class_name, fr->class_ok, fr->considered);
    } else if (fr->failing_selector != SIZE_MAX) {
        why_set(why, lab, fr->considered, fr->failing_selector_left, "selector %.160s matched %d of %d devices",
                s->selectors[fr->failing_selector].expr, fr->failing_selector_left, fr->class_ok);
    } else if (fr->tainted && (s->all || fr->untainted < need)) {
        why_set(why, lab, fr->considered, fr->sel_ok, "tainted %s%s%s:%s (%d devices)", fr->taint->key,
                *fr->taint->value ? "=" : "", fr->taint->value, gs_dra_effect_name(fr->taint->effect), fr->tainted);
    } else if (fr->counters_ok < fr->untainted && (s->all || fr->counters_ok < need)) {
        why_set(why, lab, fr->considered, fr->sel_ok, "shared counters exhausted: %d of %d matching devices still fit",
                fr->counters_ok, fr->sel_ok);
    } else if (s->all && fr->free_ < fr->counters_ok) {
        why_set(why, lab, fr->considered, fr->sel_ok,
                "allocationMode All: %d of %d matching devices are already allocated", fr->counters_ok - fr->free_,
                fr->sel_ok);
    } else {
        why_set(why, lab, fr->considered, fr->sel_ok, "needs %ld devices, %d of %d matching devices are free", need,
                fr->free_, fr->sel_ok);
    }
}

static void search_free(struct search *S)
{
    for (size_t i = 0; i < S->nunits; i++) {
        for (size_t a = 0; a < S->units[i].req->nalts; a++) free(S->units[i].cand ? S->units[i].cand[a] : NULL);
        free(S->units[i].cand);
        free(S->units[i].ncand);
        free(S->units[i].cls);
    }
    free(S->units);
    free(S->taken);
    free(S->self);
    free(S->slot_delta);
    free(S->slot_ids);
    free(S->picks);
}

static bool same_claim(const struct gs_dra_claim *a, const struct gs_dra_claim *b)
{
    return a == b || (a->uid && b->uid && *a->uid && !strcmp(a->uid, b->uid));
}

static int build_results(struct search *S, size_t nclaims, struct gs_dra_result **res, size_t *nres)
{
    for (size_t c = 0; c < nclaims; c++) {
        size_t n = 0;
        for (size_t i = 0; i < S->npicks; i++) n += S->units[S->picks[i].unit].claim == c;
        if (!n) continue;
        struct gs_dra_result *r = calloc(n, sizeof *r);
        if (!r) return GS_ENOMEM;
        res[c] = r;
        size_t k = 0;
        for (size_t i = 0; i < S->npicks; i++) {
            const struct pick *p = &S->picks[i];
            const struct unit *u = &S->units[p->unit];
            if (u->claim != c) continue;
            const struct dev *d = pick_dev(S, p);
            char lab[160];
            req_label(u->req, p->alt, lab, sizeof lab);
            r[k].request = strdup(lab);
            r[k].driver = strdup(d->vs->s.driver);
            r[k].pool = strdup(d->vs->s.pool);
            r[k].device = strdup(d->d->name);
            r[k].admin_access = u->req->alts[p->alt].admin_access;
            nres[c] = ++k;
            if (!r[k - 1].request || !r[k - 1].driver || !r[k - 1].pool || !r[k - 1].device) return GS_ENOMEM;
        }
    }
    return 0;
}

static void constraint_why(const struct search *S, struct gs_dra_why *why)
{
    const struct gs_dra_claim *c = S->claims[S->fail_constraint_claim];
    const struct gs_dra_constraint *k = &c->spec.constraints[S->fail_constraint];
    size_t need = 0;
    for (size_t i = 0; i < S->nunits; i++) {
        const struct unit *u = &S->units[i];
        if (u->claim != S->fail_constraint_claim) continue;
        for (size_t a = 0; a < u->req->nalts; a++)
            if (constraint_covers(k, u->req, &u->req->alts[a])) {
                need += u->req->alts[a].all ? u->ncand[a] : (size_t)u->req->alts[a].count;
                break;
            }
    }
    if (k->match_attr)
        why_set(why, "", (int)S->ne->n, 0, "constraint matchAttribute %s: no %zu devices share a value", k->match_attr,
                need);
    else
        why_set(why, "", (int)S->ne->n, 0, "constraint distinctAttribute %s: no %zu devices have distinct values",
                k->distinct_attr, need);
}

static size_t pos_of(const struct nodeent *ne, size_t di)
{
    size_t lo = 0, hi = ne->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ne->devs[mid] == di) return mid;
        if (ne->devs[mid] < di) lo = mid + 1;
        else hi = mid;
    }
    return SIZE_MAX;
}

/* A claim being allocated may already hold devices in the view (reserved
 * by an earlier attempt whose status was never written): those are its
 * own, not another claim's, and their counters are given back for the call. */
static void self_holds(struct search *S, size_t nclaims)
{
    const struct gs_dra_pool_view *v = S->v;
    for (size_t c = 0; c < nclaims; c++) {
        const struct gs_dra_claim *cl = S->claims[c];
        if (cl->allocated || !cl->uid || !*cl->uid) continue;
        bool dup = false;
        for (size_t e = 0; e < c; e++) dup |= same_claim(S->claims[e], cl);
        const struct hold *h = dup ? NULL : gs__strmap_get(&v->holds, cl->uid);
        for (size_t i = 0; h && i < h->n; i++) {
            if (h->r[i].admin_access) continue;
            char *k = key_of(h->r[i].driver, h->r[i].pool, h->r[i].device);
            uintptr_t ix = k ? (uintptr_t)gs__strmap_get(&v->by_key, k) : 0;
            free(k);
            size_t pos = ix ? pos_of(S->ne, ix - 1) : SIZE_MAX;
            if (pos == SIZE_MAX) continue;
            S->self[pos]++;
            if (held_by_others(S, pos) == 0) {
                const struct dev *d = &v->devs[ix - 1];
                for (size_t u = 0; u < d->nuses; u++) {
                    size_t l = slot_local(S, d->uses[u].slot);
                    if (l != SIZE_MAX) S->slot_delta[l] -= d->uses[u].amount;
                }
            }
        }
    }
}

/* The allocation, with holds optionally ignored (feasibility). */
static int allocate(const struct gs_dra_pool_view *v, const struct nodeent *ne, const char *node,
                    const struct gs_dra_claim *const *claims, size_t nclaims, struct gs_dra_result **res,
                    size_t *nres, struct gs_dra_why *why)
{
    struct search S = {.v = v, .ne = ne, .claims = claims};
    int rc = GS_ENOMEM;
    if (why) memset(why, 0, sizeof *why);
    for (size_t c = 0; c < nclaims; c++) {
        res[c] = NULL;
        nres[c] = 0;
    }
    size_t nunits = 0;
    for (size_t c = 0; c < nclaims; c++) {
        bool dup = false;
        for (size_t e = 0; e < c; e++) dup |= same_claim(claims[e], claims[c]);
        if (!dup && !claims[c]->allocated) nunits += claims[c]->spec.nrequests;
    }
    S.units = calloc(nunits ? nunits : 1, sizeof *S.units);
    S.taken = calloc(ne->n ? ne->n : 1, sizeof *S.taken);
    S.self = calloc(ne->n ? ne->n : 1, sizeof *S.self);
    if (!S.units || !S.taken || !S.self) goto out;
    /* Counter slots this node's devices use: the search's local deltas. */
    size_t nuses = 0;
    for (size_t p = 0; p < ne->n; p++) nuses += v->devs[ne->devs[p]].nuses;
    S.slot_ids = calloc(nuses ? nuses : 1, sizeof *S.slot_ids);
    S.slot_delta = calloc(nuses ? nuses : 1, sizeof *S.slot_delta);
    if (!S.slot_ids || !S.slot_delta) goto out;
    for (size_t p = 0; p < ne->n; p++) {
        const struct dev *d = &v->devs[ne->devs[p]];
        for (size_t u = 0; u < d->nuses; u++)
            if (slot_local(&S, d->uses[u].slot) == SIZE_MAX) S.slot_ids[S.nslot_ids++] = d->uses[u].slot;
    }
    self_holds(&S, nclaims);
    for (size_t c = 0; c < nclaims; c++) {
        const struct gs_dra_claim *cl = claims[c];
        bool dup = false;
        for (size_t e = 0; e < c; e++) dup |= same_claim(claims[e], cl);
        if (dup) continue;
        if (cl->allocated) {
            if (cl->alloc_node && node && strcmp(cl->alloc_node, node)) {
                why_set(why, "", (int)ne->n, 0, "claim %s/%s is allocated on node %s", cl->ns ? cl->ns : "",
                        cl->name ? cl->name : "", cl->alloc_node);
                rc = GS_ENOENT;
                goto out;
            }
            continue;
        }
        for (size_t r = 0; r < cl->spec.nrequests; r++) {
            struct unit *u = &S.units[S.nunits++];
            u->claim = c;
            u->req = &cl->spec.requests[r];
            u->cand = calloc(u->req->nalts ? u->req->nalts : 1, sizeof *u->cand);
            u->ncand = calloc(u->req->nalts ? u->req->nalts : 1, sizeof *u->ncand);
            u->cls = calloc(u->req->nalts ? u->req->nalts : 1, sizeof *u->cls);
            if (!u->cand || !u->ncand || !u->cls) goto out;
            bool any = false;
            struct filter_report first_fr = {0};
            size_t first_alt = SIZE_MAX;
            for (size_t a = 0; a < u->req->nalts; a++) {
                if (!(u->cand[a] = calloc(ne->n ? ne->n : 1, sizeof **u->cand))) goto out;
                struct filter_report fr;
                int frc = filter_alt(&S, u, a, &fr, why);
                if (frc) {
                    rc = frc;
                    goto out;
                }
                if (alt_possible(u, a, &fr)) {
                    any = true;
                    continue;
                }
                /* An alternative that cannot be filled alone is never tried. */
                if (first_alt == SIZE_MAX) {
                    first_alt = a;
                    first_fr = fr;
                }
                u->cls[a] = NULL;
            }
            if (!any) {
                alt_why(u, first_alt, &first_fr, why);
                rc = GS_ENOENT;
                goto out;
            }
        }
    }
    int f = search_unit(&S, 0);
    if (f < 0) {
        rc = f;
        goto out;
    }
    if (f == 1) {
        rc = build_results(&S, nclaims, res, nres);
        if (rc) goto out;
        /* Allocated claims keep their results; duplicates share the first's. */
        for (size_t c = 0; c < nclaims && !rc; c++) {
            size_t e = 0;
            while (e < c && !same_claim(claims[e], claims[c])) e++;
            if (e < c) rc = results_copy(&res[c], res[e], nres[e]), nres[c] = res[c] ? nres[e] : 0;
            else if (claims[c]->allocated)
                rc = results_copy(&res[c], claims[c]->results, claims[c]->nresults), nres[c] = claims[c]->nresults;
        }
        goto out;
    }
    if (S.cut) {
        why_set(why, "", (int)ne->n, 0, "search cut off after %d device choices; the claim may still fit",
                GS_DRA_SEARCH_STEPS);
        rc = GS_ERANGE;
    } else if (S.constraint_fails) {
        constraint_why(&S, why);
        rc = GS_ENOENT;
    } else if (S.counter_fails) {
        why_set(why, "", (int)ne->n, 0, "shared counters: the requests do not fit together in the counter sets");
        rc = GS_ENOENT;
    } else {
        why_set(why, "", (int)ne->n, 0, "the requests of this pod's claims need more free devices together than "
                                        "the node has");
        rc = GS_ENOENT;
    }
out:
    if (rc)
        for (size_t c = 0; c < nclaims; c++) {
            gs_dra_results_free(res[c], nres[c]);
            res[c] = NULL;
            nres[c] = 0;
        }
    search_free(&S);
    return rc;
}

int gs_dra_allocate(const struct gs_dra_pool_view *v, const char *node, const struct gs_dra_claim *const *claims,
                    size_t nclaims, struct gs_dra_result **res, size_t *nres, struct gs_dra_why *why)
{
    return allocate(v, node_devs(v, node), node, claims, nclaims, res, nres, why);
}

/*--- Feasibility ---*/

/* A view whose holds are ignored: the same index with zero use counts. The
 * allocator reads use counts and slot usage only through the view, so a
 * shallow copy with cleared counts answers "if nothing were in use". */
bool gs_dra_feasible(const struct gs_dra_pool_view *v, const struct gs_dra_claim_spec *spec, struct gs_dra_why *why)
{
    struct gs_dra_pool_view empty = *v;
    struct dev *devs = NULL;
    struct slot *slots = NULL;
    if (v->ndevs && !(devs = malloc(v->ndevs * sizeof *devs))) goto oom;
    if (v->nslots && !(slots = malloc(v->nslots * sizeof *slots))) goto oom;
    if (devs) memcpy(devs, v->devs, v->ndevs * sizeof *devs);
    if (slots) memcpy(slots, v->slots, v->nslots * sizeof *slots);
    for (size_t i = 0; i < v->ndevs; i++) devs[i].held = 0;
    for (size_t i = 0; i < v->nslots; i++) slots[i].used = 0;
    empty.devs = devs;
    empty.slots = slots;
    struct gs_dra_claim claim = {.ns = "", .name = "", .uid = "", .spec = *spec};
    const struct gs_dra_claim *cp = &claim;
    struct gs_dra_why first = {0}, w;
    bool have_first = false, ok = false;
    size_t tried = 0;
    for (size_t i = 0; i <= v->nnode_names && !ok; i++) {
        const struct nodeent *ne = i < v->nnode_names ? gs__strmap_get(&v->by_node, v->node_names[i]) : &v->allnodes;
        if (i == v->nnode_names && (v->nnode_names || !ne->n)) break; /* all-nodes devices are in every node */
        struct gs_dra_result *r = NULL;
        size_t nr = 0;
        int rc = allocate(&empty, ne, ne->name, &cp, 1, &r, &nr, &w);
        tried++;
        if (!rc) {
            ok = true;
            gs_dra_results_free(r, nr);
        } else if (!have_first) {
            first = w;
            have_first = true;
        }
    }
    if (!ok && why) {
        if (!tried) why_set(why, "", 0, 0, "no node publishes devices");
        else {
            *why = first;
            char tail[64];
            snprintf(tail, sizeof tail, " (fits on none of %zu nodes)", tried);
            size_t l = strlen(why->what);
            if (l + strlen(tail) < sizeof why->what) memcpy(why->what + l, tail, strlen(tail) + 1);
        }
    }
    free(devs);
    free(slots);
    return ok;
oom:
    free(devs);
    free(slots);
    if (why) why_set(why, "", 0, 0, "out of memory");
    return false;
}
