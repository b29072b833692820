/*
 * queue_tree.c - building the queue tree from Kueue and Volcano objects.
 *
 * Objects arrive in any order (a LocalQueue before its ClusterQueue, a
 * ClusterQueue naming a flavor defined later), so adding only records names;
 * gs_queue_tree_finalize() resolves them all at once and reports every
 * dangling reference. The documents were already checked by the object model
 * (kinds.c); here we only read them, and the few problems that need the
 * whole set of objects (unknown flavor, duplicate, cycle) are reported with
 * the object's name.
 *
 * Kueue maps one-to-one: a ClusterQueue is a leaf with its resourceGroups; a
 * cohort becomes an interior node without quota. Volcano queues map their
 * guarantee to the nominal quota and capability to nominal + borrowing
 * limit; an interior Volcano queue's own nominal is what its guarantee adds
 * over its children's (so the subtree sums match what the user wrote).
 */
#include "sched/admission/queue_tree.h"

#include "core/quantity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*--- Names ---*/

const char *gs_qt_preempt_name(enum gs_qt_preempt p)
{
    static const char *const names[] = {"Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"};
    return (unsigned)p < 4 ? names[p] : "?";
}

const char *gs_qt_strategy_name(enum gs_qt_strategy s)
{
    return s == GS_QT_STRICT_FIFO ? "StrictFIFO" : "BestEffortFIFO";
}

static enum gs_qt_preempt preempt_parse(const char *s, enum gs_qt_preempt dflt)
{
    if (!s) return dflt;
    if (!strcmp(s, "LowerPriority")) return GS_PREEMPT_LOWER_PRIORITY;
    if (!strcmp(s, "LowerOrNewerEqualPriority")) return GS_PREEMPT_LOWER_OR_NEWER_EQUAL;
    if (!strcmp(s, "Any")) return GS_PREEMPT_ANY;
    return GS_PREEMPT_NEVER;
}

/*--- Life cycle ---*/

void gs_queue_tree_init(struct gs_queue_tree *t)
{
    memset(t, 0, sizeof *t);
}

void gs_queue_tree_free(struct gs_queue_tree *t)
{
    for (int32_t i = 0; i < t->n; i++) {
        free(t->nodes[i].name);
        free(t->nodes[i].parent_name);
        free(t->nodes[i].children);
    }
    free(t->nodes);
    for (int i = 0; i < t->nres; i++) free(t->res_names[i]);
    for (int i = 0; i < t->nflavors; i++) {
        free(t->flavors[i].name);
        gs_labels_free(&t->flavors[i].node_labels);
    }
    for (size_t i = 0; i < t->nlocals; i++) {
        free(t->locals[i].namespace_);
        free(t->locals[i].name);
        free(t->locals[i].cluster_queue);
    }
    free(t->locals);
    memset(t, 0, sizeof *t);
}

/*--- Interning ---*/

int32_t gs_queue_tree_find(const struct gs_queue_tree *t, const char *name)
{
    for (int32_t i = 0; name && i < t->n; i++)
        if (!strcmp(t->nodes[i].name, name)) return i;
    return -1;
}

int gs_queue_tree_res(const struct gs_queue_tree *t, const char *name)
{
    for (int i = 0; name && i < t->nres; i++)
        if (!strcmp(t->res_names[i], name)) return i;
    return -1;
}

int gs_queue_tree_flavor(const struct gs_queue_tree *t, const char *name)
{
    for (int i = 0; name && i < t->nflavors; i++)
        if (!strcmp(t->flavors[i].name, name)) return i;
    return -1;
}

int gs_queue_tree_intern_res(struct gs_queue_tree *t, const char *name)
{
    int id = gs_queue_tree_res(t, name);
    if (id >= 0) return id;
    if (t->nres == GS_QT_MAX_RES) return GS_ERANGE;
    if (!(t->res_names[t->nres] = strdup(name))) return GS_ENOMEM;
    return t->nres++;
}

/* A flavor referenced before (or without) its ResourceFlavor: no labels yet. */
static int intern_flavor(struct gs_queue_tree *t, const char *name)
{
    int id = gs_queue_tree_flavor(t, name);
    if (id >= 0) return id;
    if (t->nflavors == GS_QT_MAX_FLAVORS) return GS_ERANGE;
    if (!(t->flavors[t->nflavors].name = strdup(name))) return GS_ENOMEM;
    return t->nflavors++;
}

int gs_queue_tree_add_flavor(struct gs_queue_tree *t, const char *name, const struct gs_labels *node_labels)
{
    int id = intern_flavor(t, name);
    if (id < 0) return id;
    struct gs_labels *l = &t->flavors[id].node_labels;
    gs_labels_free(l);
    for (size_t i = 0; node_labels && i < node_labels->n; i++)
        if (gs_labels_set(l, node_labels->v[i].key, node_labels->v[i].value)) return GS_ENOMEM;
    return 0;
}

int gs_queue_tree_add_local(struct gs_queue_tree *t, const char *ns, const char *name, const char *cluster_queue)
{
    if (!name || !cluster_queue) return GS_EINVAL;
    if (t->nlocals == t->caplocals) {
        size_t cap = t->caplocals ? 2 * t->caplocals : 8;
        struct gs_qt_local *v = realloc(t->locals, cap * sizeof *v);
        if (!v) return GS_ENOMEM;
        t->locals = v;
        t->caplocals = cap;
    }
    struct gs_qt_local *l = &t->locals[t->nlocals];
    *l = (struct gs_qt_local){.namespace_ = strdup(ns ? ns : "default"), .name = strdup(name),
                              .cluster_queue = strdup(cluster_queue), .target = -1};
    if (!l->namespace_ || !l->name || !l->cluster_queue) {
        free(l->namespace_), free(l->name), free(l->cluster_queue);
        return GS_ENOMEM;
    }
    t->nlocals++;
    return 0;
}

/* A new node with defaults; its index, or a negative error. */
static int32_t add_node(struct gs_queue_tree *t, const char *name, enum gs_qt_kind kind, const char *parent)
{
    if (gs_queue_tree_find(t, name) >= 0) return GS_EEXIST;
    if (t->n == t->cap) {
        int32_t cap = t->cap ? 2 * t->cap : 8;
        struct gs_qt_node *v = realloc(t->nodes, (size_t)cap * sizeof *v);
        if (!v) return GS_ENOMEM;
        t->nodes = v;
        t->cap = cap;
    }
    struct gs_qt_node *q = &t->nodes[t->n];
    memset(q, 0, sizeof *q);
    q->name = strdup(name);
    q->parent_name = parent ? strdup(parent) : NULL;
    if (!q->name || (parent && !q->parent_name)) {
        free(q->name), free(q->parent_name);
        return GS_ENOMEM;
    }
    q->kind = kind;
    q->parent = -1;
    q->weight = 1;
    for (int i = 0; i < GS_QT_NFR; i++)
        q->quota[i] = (struct gs_qt_quota){.borrowing_limit = GS_QT_UNLIMITED, .lending_limit = GS_QT_UNLIMITED};
    return t->n++;
}

/*--- Volcano-style queues ---*/

int gs_queue_tree_add_queue(struct gs_queue_tree *t, const struct gs_qt_queue_spec *s)
{
    int f = intern_flavor(t, GS_QT_DEFAULT_FLAVOR);
    if (f < 0) return f;
    int32_t i = add_node(t, s->name, GS_QT_QUEUE, s->parent ? s->parent : GS_QT_ROOT_NAME);
    if (i < 0) return i;
    struct gs_qt_node *q = &t->nodes[i];
    q->weight = s->weight > 0 ? s->weight : 1;
    q->priority = s->priority;
    q->strategy = s->strategy;
    q->within = s->within;
    q->reclaim = s->reclaim;
    for (size_t k = 0; k < s->nres; k++) {
        int r = gs_queue_tree_intern_res(t, s->res[k]);
        if (r < 0) return r;
        struct gs_qt_quota *qq = &q->quota[GS_QT_FR(f, r)];
        qq->set = true;
        qq->nominal = s->guarantee ? s->guarantee[k] : 0;
        int64_t lim = s->limit ? s->limit[k] : GS_QT_UNLIMITED;
        qq->borrowing_limit = lim == GS_QT_UNLIMITED ? GS_QT_UNLIMITED : (lim > qq->nominal ? lim - qq->nominal : 0);
    }
    return 0;
}

static int add_volcano(struct gs_queue_tree *t, const struct gs_queue *vq)
{
    size_t n = vq->guarantee.n + vq->limit.n;
    const char **res = calloc(n ? n : 1, sizeof *res);
    int64_t *g = calloc(n ? n : 1, sizeof *g), *l = calloc(n ? n : 1, sizeof *l);
    int rc = res && g && l ? 0 : GS_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; !rc && i < vq->guarantee.n; i++, k++) {
        res[k] = vq->guarantee.v[i].name;
        g[k] = vq->guarantee.v[i].milli;
        bool capped = false;
        for (size_t j = 0; j < vq->limit.n; j++) capped |= !strcmp(vq->limit.v[j].name, res[k]);
        l[k] = capped ? gs_resources_get(&vq->limit, res[k]) : GS_QT_UNLIMITED;
    }
    for (size_t i = 0; !rc && i < vq->limit.n; i++) {
        bool seen = false;
        for (size_t j = 0; j < vq->guarantee.n; j++) seen |= !strcmp(vq->guarantee.v[j].name, vq->limit.v[i].name);
        if (seen) continue;
        res[k] = vq->limit.v[i].name;
        g[k] = 0;
        l[k++] = vq->limit.v[i].milli;
    }
    struct gs_qt_queue_spec s = {.name = vq->meta.name, .parent = vq->parent, .weight = vq->weight,
                                 .priority = vq->priority, .res = res, .guarantee = g, .limit = l, .nres = k,
                                 .within = GS_PREEMPT_LOWER_PRIORITY, .reclaim = GS_PREEMPT_ANY};
    if (!rc) rc = gs_queue_tree_add_queue(t, &s);
    free(res), free(g), free(l);
    return rc;
}

/*--- Kueue objects ---*/

/* Quantity from a JSON string or number, in milli-units. */
static bool json_quantity(const json_t *v, int64_t *out)
{
    if (json_is_string(v)) return gs_quantity_parse(json_string_value(v), out, NULL) == 0;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v) * 1000;
        return true;
    }
    if (json_is_real(v)) {
        *out = llround(json_real_value(v) * 1000.0);
        return true;
    }
    return false;
}

static int cq_flavor(struct gs_queue_tree *t, struct gs_qt_node *q, struct gs_qt_group *g, const json_t *fl,
                     const char *where, struct gs_diags *d)
{
    const char *fname = json_string_value(json_object_get(fl, "name"));
    if (!fname) return 0; /* refused by validation already */
    int f = intern_flavor(t, fname);
    if (f < 0) {
        gs_diags_add(d, where, "too many flavors (at most %d)", GS_QT_MAX_FLAVORS);
        return GS_EINVAL;
    }
    if (g->nflavors < GS_QT_MAX_FLAVORS) g->flavors[g->nflavors++] = (uint8_t)f;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(fl, "resources"), i, r) {
        int rid = gs_queue_tree_res(t, json_string_value(json_object_get(r, "name")));
        if (rid < 0) continue;
        struct gs_qt_quota *qq = &q->quota[GS_QT_FR(f, rid)];
        qq->set = true;
        if (!json_quantity(json_object_get(r, "nominalQuota"), &qq->nominal)) qq->nominal = 0;
        if (!json_quantity(json_object_get(r, "borrowingLimit"), &qq->borrowing_limit))
            qq->borrowing_limit = GS_QT_UNLIMITED;
        if (!json_quantity(json_object_get(r, "lendingLimit"), &qq->lending_limit))
            qq->lending_limit = GS_QT_UNLIMITED;
    }
    return 0;
}

static int cq_groups(struct gs_queue_tree *t, struct gs_qt_node *q, const json_t *spec, const char *name,
                     struct gs_diags *d)
{
    size_t gi;
    json_t *grp;
    json_array_foreach(json_object_get(spec, "resourceGroups"), gi, grp) {
        if (q->ngroups == GS_QT_MAX_GROUPS) break;
        struct gs_qt_group *g = &q->groups[q->ngroups++];
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(grp, "coveredResources"), i, v) {
            int r = json_is_string(v) ? gs_queue_tree_intern_res(t, json_string_value(v)) : GS_EINVAL;
            if (r < 0) {
                gs_diags_add(d, name, "spec.resourceGroups[%zu].coveredResources[%zu]: too many resources (at most %d)",
                             gi, i, GS_QT_MAX_RES);
                return GS_EINVAL;
            }
            if (g->nres < GS_QT_MAX_RES) g->res[g->nres++] = (uint8_t)r;
        }
        json_array_foreach(json_object_get(grp, "flavors"), i, v) {
            int rc = cq_flavor(t, q, g, v, name, d);
            if (rc) return rc;
        }
    }
    return 0;
}

static int add_clusterqueue(struct gs_queue_tree *t, const struct gs_generic *o, struct gs_diags *d)
{
    const json_t *spec = json_object_get(o->doc, "spec");
    const char *cohort = json_string_value(json_object_get(spec, "cohortName"));
    if (!cohort) cohort = json_string_value(json_object_get(spec, "cohort")); /* v1beta1 */
    int32_t i = add_node(t, o->meta.name, GS_QT_CLUSTERQUEUE, cohort);
    if (i == GS_EEXIST) gs_diags_add(d, o->meta.name, "duplicate queue name \"%s\"", o->meta.name);
    if (i < 0) return i;
    struct gs_qt_node *q = &t->nodes[i];
    q->strict_cover = true;
    q->within = q->reclaim = GS_PREEMPT_NEVER;
    const char *strategy = json_string_value(json_object_get(spec, "queueingStrategy"));
    q->strategy = strategy && !strcmp(strategy, "StrictFIFO") ? GS_QT_STRICT_FIFO : GS_QT_BEST_EFFORT_FIFO;
    const json_t *pre = json_object_get(spec, "preemption");
    q->within = preempt_parse(json_string_value(json_object_get(pre, "withinClusterQueue")), GS_PREEMPT_NEVER);
    q->reclaim = preempt_parse(json_string_value(json_object_get(pre, "reclaimWithinCohort")), GS_PREEMPT_NEVER);
    int64_t w;
    if (json_quantity(json_object_get(json_object_get(spec, "fairSharing"), "weight"), &w))
        q->weight = (double)w / 1000.0;
    return cq_groups(t, q, spec, o->meta.name, d);
}

int gs_queue_tree_add_object(struct gs_queue_tree *t, const struct gs_object *o, struct gs_diags *d)
{
    const struct gs_generic *g = o->u.generic;
    switch (o->kind) {
    case GS_KIND_QUEUE: {
        int rc = add_volcano(t, o->u.queue);
        if (rc == GS_EEXIST) gs_diags_add(d, o->u.queue->meta.name, "duplicate queue name");
        return rc;
    }
    case GS_KIND_CLUSTERQUEUE:
        return add_clusterqueue(t, g, d);
    case GS_KIND_LOCALQUEUE: {
        const char *cq = json_string_value(json_object_get(json_object_get(g->doc, "spec"), "clusterQueue"));
        if (!cq) {
            gs_diags_add(d, g->meta.name, "spec.clusterQueue: is required");
            return GS_EINVAL;
        }
        return gs_queue_tree_add_local(t, g->meta.namespace_, g->meta.name, cq);
    }
    case GS_KIND_RESOURCEFLAVOR: {
        struct gs_labels l = {0};
        json_t *nl = json_object_get(json_object_get(g->doc, "spec"), "nodeLabels");
        const char *k;
        json_t *v;
        int rc = 0;
        json_object_foreach(nl, k, v) if (!rc && json_is_string(v)) rc = gs_labels_set(&l, k, json_string_value(v));
        if (!rc) rc = gs_queue_tree_add_flavor(t, g->meta.name, &l);
        if (rc == GS_ERANGE) gs_diags_add(d, g->meta.name, "too many flavors (at most %d)", GS_QT_MAX_FLAVORS);
        gs_labels_free(&l);
        return rc;
    }
    default:
        gs_diags_add(d, o->u.meta && o->u.meta->name ? o->u.meta->name : "", "kind %s is not a queue object",
                     o->kind_name ? o->kind_name : "?");
        return GS_EINVAL;
    }
}

/*--- Finalize ---*/

static int ensure_parent(struct gs_queue_tree *t, int32_t i)
{
    const char *pn = t->nodes[i].parent_name;
    if (!pn) return 0;
    int32_t p = gs_queue_tree_find(t, pn);
    if (p >= 0) return 0;
    /* A cohort, or the implicit root, exists by being named. */
    if (t->nodes[i].kind == GS_QT_CLUSTERQUEUE) return add_node(t, pn, GS_QT_COHORT, NULL) < 0 ? GS_ENOMEM : 0;
    if (!strcmp(pn, GS_QT_ROOT_NAME)) {
        int32_t r = add_node(t, pn, GS_QT_ROOT, NULL);
        if (r < 0) return r;
        int f = intern_flavor(t, GS_QT_DEFAULT_FLAVOR);
        for (int k = 0; f >= 0 && k < t->nres; k++) t->nodes[r].quota[GS_QT_FR(f, k)].set = true;
        return 0;
    }
    return GS_ENOENT;
}

static int link_children(struct gs_queue_tree *t, struct gs_diags *d)
{
    int rc = 0;
    for (int32_t i = 0; i < t->n; i++) {
        struct gs_qt_node *q = &t->nodes[i];
        if (!q->parent_name) continue;
        q->parent = gs_queue_tree_find(t, q->parent_name);
        if (q->parent < 0) {
            gs_diags_add(d, q->name, "spec.parent: unknown queue \"%s\"", q->parent_name);
            rc = GS_EINVAL;
            continue;
        }
        if (t->nodes[q->parent].kind == GS_QT_CLUSTERQUEUE) {
            gs_diags_add(d, q->name, "spec.parent: \"%s\" is a ClusterQueue, which cannot have children", q->parent_name);
            rc = GS_EINVAL;
            continue;
        }
        struct gs_qt_node *p = &t->nodes[q->parent];
        int32_t *c = realloc(p->children, (size_t)(p->nchildren + 1) * sizeof *c);
        if (!c) return GS_ENOMEM;
        p->children = c;
        p->children[p->nchildren++] = i;
    }
    for (int32_t i = 0; i < t->n; i++) { /* a walk longer than n steps is a cycle */
        int32_t depth = 0, j = i;
        while (j >= 0 && t->nodes[j].parent >= 0 && depth <= t->n) j = t->nodes[j].parent, depth++;
        t->nodes[i].depth = depth;
        if (depth > t->n) {
            gs_diags_add(d, t->nodes[i].name, "spec.parent: queues form a cycle");
            return GS_EINVAL;
        }
    }
    return rc;
}

/* Volcano queues: every known resource is covered on the default flavor, and
 * an interior queue keeps as its own nominal what its guarantee adds over its
 * children's. */
static void volcano_defaults(struct gs_queue_tree *t)
{
    int f = gs_queue_tree_flavor(t, GS_QT_DEFAULT_FLAVOR);
    if (f < 0) return;
    for (int32_t i = 0; i < t->n; i++) {
        struct gs_qt_node *q = &t->nodes[i];
        if (q->kind != GS_QT_QUEUE && q->kind != GS_QT_ROOT) continue;
        for (int r = 0; r < t->nres; r++) q->quota[GS_QT_FR(f, r)].set = true;
        if (q->kind == GS_QT_QUEUE && !q->ngroups) {
            q->ngroups = 1;
            q->groups[0].nflavors = 1;
            q->groups[0].flavors[0] = (uint8_t)f;
            q->groups[0].nres = t->nres;
            for (int r = 0; r < t->nres; r++) q->groups[0].res[r] = (uint8_t)r;
        }
    }
    /* Parents before children: a parent reads its children's guarantees as written. */
    for (int32_t depth = 0; depth < t->n; depth++)
    for (int32_t i = 0; i < t->n; i++) {
        struct gs_qt_node *q = &t->nodes[i];
        if (q->depth != depth || q->kind != GS_QT_QUEUE || !q->nchildren) continue;
        for (int r = 0; r < t->nres; r++) {
            int64_t kids = 0;
            for (int32_t c = 0; c < q->nchildren; c++) kids += t->nodes[q->children[c]].quota[GS_QT_FR(f, r)].nominal;
            struct gs_qt_quota *qq = &q->quota[GS_QT_FR(f, r)];
            int64_t own = qq->nominal > kids ? qq->nominal - kids : 0;
            if (qq->borrowing_limit != GS_QT_UNLIMITED) { /* keep the capability: subtree + limit */
                int64_t cap = qq->nominal + qq->borrowing_limit;
                qq->borrowing_limit = cap > own + kids ? cap - own - kids : 0;
            }
            qq->nominal = own;
        }
    }
}

int gs_queue_tree_finalize(struct gs_queue_tree *t, struct gs_diags *d)
{
    int rc = 0;
    for (int32_t i = 0; i < t->n && !rc; i++) {
        rc = ensure_parent(t, i);
        if (rc == GS_ENOENT) {
            gs_diags_add(d, t->nodes[i].name, "spec.parent: unknown queue \"%s\"", t->nodes[i].parent_name);
            rc = GS_EINVAL;
        }
    }
    if (!rc) rc = link_children(t, d);
    if (rc) return rc;
    volcano_defaults(t);
    for (size_t i = 0; i < t->nlocals; i++) {
        struct gs_qt_local *l = &t->locals[i];
        l->target = gs_queue_tree_find(t, l->cluster_queue);
        if (l->target < 0 || !gs_queue_tree_is_leaf(t, l->target)) {
            gs_diags_add(d, l->name, "spec.clusterQueue: unknown ClusterQueue \"%s\"", l->cluster_queue);
            rc = GS_EINVAL;
        }
    }
    t->finalized = rc == 0;
    return rc;
}

int gs_queue_tree_set_capacity(struct gs_queue_tree *t, const char *res, int64_t milli)
{
    int32_t root = gs_queue_tree_find(t, GS_QT_ROOT_NAME);
    int f = gs_queue_tree_flavor(t, GS_QT_DEFAULT_FLAVOR);
    int r = gs_queue_tree_res(t, res);
    if (root < 0 || f < 0) return 0;
    if (r < 0) return 0;
    int64_t kids = 0;
    const struct gs_qt_node *q = &t->nodes[root];
    for (int32_t c = 0; c < q->nchildren; c++) {
        /* A child's whole subtree guarantee sits under the root. */
        int32_t stack[64], ns = 0;
        stack[ns++] = q->children[c];
        while (ns) {
            const struct gs_qt_node *x = &t->nodes[stack[--ns]];
            kids += x->quota[GS_QT_FR(f, r)].nominal;
            for (int32_t k = 0; k < x->nchildren && ns < 64; k++) stack[ns++] = x->children[k];
        }
    }
    struct gs_qt_quota *qq = &t->nodes[root].quota[GS_QT_FR(f, r)];
    qq->set = true;
    qq->nominal = milli > kids ? milli - kids : 0;
    return 0;
}

int32_t gs_queue_tree_resolve(const struct gs_queue_tree *t, const char *ns, const char *name)
{
    if (!name) return -1;
    for (size_t i = 0; i < t->nlocals; i++) {
        const struct gs_qt_local *l = &t->locals[i];
        if (!strcmp(l->name, name) && !strcmp(l->namespace_, ns ? ns : "default")) return l->target;
    }
    int32_t q = gs_queue_tree_find(t, name);
    return q >= 0 && gs_queue_tree_is_leaf(t, q) ? q : -1;
}
