/*
 * cache_dra.c - the cache's DRA side; see cache_dra.h.
 *
 * Every hold is undone exactly as it was made: a claim record remembers the
 * node and GPU slots its hold counted, so a slice that changed meanwhile
 * cannot leave a slot counted twice or never released.
 */
#include "sched/cache_dra.h"

#include "core/log.h"
#include "sched/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define P_SLICES "resourceslices.resource.k8s.io/"
#define P_CLASSES "deviceclasses.resource.k8s.io/"
#define P_CLAIMS "resourceclaims.resource.k8s.io/"
#define P_TEMPLATES "resourceclaimtemplates.resource.k8s.io/"
#define P_RULES "devicetaintrules.resource.k8s.io/"

struct dev {
    char *key;     /* "driver/pool/device": the devs map's key */
    char *name, *driver, *pool;
    char *uuid;    /* the GPU's uuid, or a MIG device's parentUUID; NULL unknown */
    bool mig;
};

struct slice_rec {
    char *name;
    char *node;    /* NULL: not bound to one node */
    struct dev *devs;
    size_t ndevs;
};

struct node_rec {
    char *name;
    uint64_t version;
    int32_t held[GS_MAX_GPUS_PER_NODE]; /* claims holding each slot */
};

struct gs_cache_dra {
    struct gs_dra_pool_view *view;
    struct gs__strmap claims, slices, nodes, templates, classes, rules, devs;
    const struct gs_dra_class **class_arr;
    size_t nclass;
    uint64_t epoch, global;
    struct gs_dra_result *scratch; /* gs_cache_dra_slot_devices */
    size_t nscratch, scratch_cap;
};


/*--- Records ---*/

static void claim_rec_free(struct gs_cache_claim *r)
{
    if (!r) return;
    gs_dra_claim_free(&r->c);
    free(r->key);
    free(r->api_version);
    free(r->owner_uid);
    free(r->pod_claim_name);
    free(r->assumed_node);
    gs_dra_results_free(r->assumed_res, r->nassumed_res);
    free(r->held_node);
    free(r);
}

static void slice_rec_free(struct slice_rec *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->ndevs; i++) {
        free(s->devs[i].key), free(s->devs[i].name), free(s->devs[i].driver), free(s->devs[i].pool);
        free(s->devs[i].uuid);
    }
    free(s->devs);
    free(s->name);
    free(s->node);
    free(s);
}

static void class_free(struct gs_dra_class *k)
{
    if (!k) return;
    gs_dra_class_free(k);
    free(k);
}

static void map_free(struct gs__strmap *m, void (*fn)(void *))
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key) fn(m->slots[i].val);
    gs__strmap_free(m);
}

static void node_rec_free(void *p)
{
    struct node_rec *n = p;
    if (n) free(n->name);
    free(n);
}

static void claim_free_v(void *p) { claim_rec_free(p); }
static void slice_free_v(void *p) { slice_rec_free(p); }
static void class_free_v(void *p) { class_free(p); }
static void nothing(void *p) { (void)p; }

void gs_cache_dra_free(struct gs_cache_dra *d)
{
    if (!d) return;
    map_free(&d->claims, claim_free_v);
    map_free(&d->slices, slice_free_v);
    map_free(&d->nodes, node_rec_free);
    map_free(&d->templates, free);
    map_free(&d->classes, class_free_v);
    map_free(&d->rules, free);
    map_free(&d->devs, nothing); /* borrowed from the slices */
    gs_dra_view_free(d->view);
    free(d->class_arr);
    free(d->scratch);
    free(d);
}

struct gs_cache_dra *gs__cache_dra_new(void)
{
    struct gs_cache_dra *d = calloc(1, sizeof *d);
    if (!d || !(d->view = gs_dra_view_new())) {
        free(d);
        return NULL;
    }
    struct gs__strmap *maps[] = {&d->claims, &d->slices, &d->nodes, &d->templates, &d->classes, &d->rules, &d->devs};
    for (size_t i = 0; i < sizeof maps / sizeof maps[0]; i++) gs__strmap_init(maps[i]);
    return d;
}

struct gs_dra_pool_view *gs_cache_dra_view(struct gs_cache_dra *d) { return d->view; }
uint64_t gs_cache_dra_epoch(const struct gs_cache_dra *d) { return d->epoch; }

static struct node_rec *node_rec(struct gs_cache_dra *d, const char *name, bool create)
{
    struct node_rec *n = gs__strmap_get(&d->nodes, name);
    if (n || !create) return n;
    n = calloc(1, sizeof *n);
    if (!n || !(n->name = strdup(name)) || gs__strmap_put(&d->nodes, n->name, n)) {
        node_rec_free(n);
        return NULL;
    }
    return n;
}

static void bump_node(struct gs_cache_dra *d, const char *name)
{
    d->epoch++;
    struct node_rec *n = name ? node_rec(d, name, true) : NULL;
    if (n) n->version++;
    else d->global++; /* a slice for no single node: every node may see it */
}

uint64_t gs_cache_dra_node_version(const struct gs_cache_dra *d, const char *node)
{
    const struct node_rec *n = gs__strmap_get(&d->nodes, node);
    return gs__mix64(d->global, n ? n->version : 0);
}

/*--- GPU slots ---*/

static int slot_of(const struct gs_node_info *ni, const struct dev *dv)
{
    const struct gs_node *obj = ni->node;
    if (dv->uuid && obj)
        for (size_t g = 0; g < obj->ngpus && (int32_t)g < ni->ngpus; g++)
            if (obj->gpus[g].uuid && !strcmp(obj->gpus[g].uuid, dv->uuid)) return (int)g;
    /* "gpu-<minor>" and "gpu-<minor>-mig-...": the minor. */
    if (strncmp(dv->name, "gpu-", 4)) return -1;
    char *end;
    long minor = strtol(dv->name + 4, &end, 10);
    if (end == dv->name + 4 || (*end && *end != '-') || minor < 0) return -1;
    for (size_t g = 0; obj && g < obj->ngpus && (int32_t)g < ni->ngpus; g++)
        if (obj->gpus[g].index == minor) return (int)g;
    return minor < ni->ngpus && minor < GS_MAX_GPUS_PER_NODE ? (int)minor : -1;
}

static const struct dev *dev_of(const struct gs_cache_dra *d, const struct gs_dra_result *r)
{
    char key[768];
    snprintf(key, sizeof key, "%s/%s/%s", r->driver ? r->driver : "", r->pool ? r->pool : "",
             r->device ? r->device : "");
    return gs__strmap_get(&d->devs, key);
}

uint64_t gs_cache_dra_slots(struct gs_cache *c, int32_t node, const struct gs_dra_result *res, size_t n,
                            bool *mig_only)
{
    struct gs_cache_dra *d = gs_cache_dra(c);
    struct gs_node_info *ni = node >= 0 && node < gs_cache_node_count(c) ? gs_cache_node(c, node) : NULL;
    uint64_t mask = 0;
    bool all_mig = n > 0;
    for (size_t i = 0; d && ni && ni->live && i < n; i++) {
        if (res[i].admin_access) continue; /* monitoring access holds nothing */
        const struct dev *dv = dev_of(d, &res[i]);
        struct dev byname = {.name = res[i].device};
        int g = slot_of(ni, dv ? dv : &byname);
        if (g < 0) continue;
        mask |= 1ull << g;
        all_mig &= dv ? dv->mig : strstr(res[i].device, "-mig-") != NULL;
    }
    if (mig_only) *mig_only = mask && all_mig;
    return mask;
}

uint64_t gs_cache_dra_held_slots(const struct gs_cache_dra *d, const char *node)
{
    const struct node_rec *n = gs__strmap_get(&d->nodes, node);
    uint64_t m = 0;
    for (int g = 0; n && g < GS_MAX_GPUS_PER_NODE; g++)
        if (n->held[g] > 0) m |= 1ull << g;
    return m;
}

const struct gs_dra_result *gs_cache_dra_slot_devices(struct gs_cache *c, int32_t node, int32_t g, size_t *n)
{
    struct gs_cache_dra *d = gs_cache_dra(c);
    *n = 0;
    struct gs_node_info *ni = d && node >= 0 && node < gs_cache_node_count(c) ? gs_cache_node(c, node) : NULL;
    if (!ni || !ni->live) return NULL;
    d->nscratch = 0;
    for (size_t s = 0; s < d->slices.cap; s++) {
        const struct slice_rec *sr = d->slices.slots[s].key ? d->slices.slots[s].val : NULL;
        if (!sr || !sr->node || strcmp(sr->node, ni->name)) continue;
        for (size_t i = 0; i < sr->ndevs; i++) {
            if (slot_of(ni, &sr->devs[i]) != g) continue;
            if (d->nscratch == d->scratch_cap) {
                size_t cap = d->scratch_cap ? d->scratch_cap * 2 : 16;
                struct gs_dra_result *v = realloc(d->scratch, cap * sizeof *v);
                if (!v) return NULL;
                d->scratch = v, d->scratch_cap = cap;
            }
            d->scratch[d->nscratch++] = (struct gs_dra_result){.request = (char *)"", .driver = sr->devs[i].driver,
                                                               .pool = sr->devs[i].pool, .device = sr->devs[i].name};
        }
    }
    *n = d->nscratch;
    return d->scratch;
}

/*--- Holds ---*/

static void hold_release(struct gs_cache_dra *d, struct gs_cache_claim *r)
{
    if (!r->c.uid) return;
    gs_dra_view_release(d->view, r->c.uid);
    if (r->held_node) {
        struct node_rec *n = node_rec(d, r->held_node, false);
        for (int g = 0; n && g < GS_MAX_GPUS_PER_NODE; g++)
            if (r->held_mask >> g & 1 && n->held[g] > 0) n->held[g]--;
        bump_node(d, r->held_node);
    } else {
        d->global++;
    }
    free(r->held_node);
    r->held_node = NULL;
    r->held_mask = 0;
    d->epoch++;
}

/* The hold r's state asks for: its allocation, else its assumption. */
static int hold_apply(struct gs_cache *c, struct gs_cache_dra *d, struct gs_cache_claim *r)
{
    const struct gs_dra_result *res = NULL;
    size_t n = 0;
    const char *node = NULL;
    if (r->c.allocated) res = r->c.results, n = r->c.nresults, node = r->c.alloc_node;
    else if (r->assumed) res = r->assumed_res, n = r->nassumed_res, node = r->assumed_node;
    else return 0;
    if (!r->c.uid) return 0;
    int err = gs_dra_view_hold(d->view, r->c.uid, res, n);
    if (err) return err;
    d->epoch++;
    if (!node) {
        d->global++;
        return 0;
    }
    int32_t idx = gs_cache_find_node(c, node);
    r->held_mask = idx >= 0 ? gs_cache_dra_slots(c, idx, res, n, NULL) : 0;
    if (!(r->held_node = strdup(node))) return GS_ENOMEM;
    struct node_rec *nr = node_rec(d, node, true);
    for (int g = 0; nr && g < GS_MAX_GPUS_PER_NODE; g++)
        if (r->held_mask >> g & 1) nr->held[g]++;
    bump_node(d, node);
    return 0;
}

static int copy_results(struct gs_dra_result **out, const struct gs_dra_result *res, size_t n)
{
    *out = n ? calloc(n, sizeof **out) : NULL;
    if (n && !*out) return GS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct gs_dra_result *o = &(*out)[i];
        o->admin_access = res[i].admin_access;
        if ((res[i].request && !(o->request = strdup(res[i].request))) ||
            (res[i].driver && !(o->driver = strdup(res[i].driver))) ||
            (res[i].pool && !(o->pool = strdup(res[i].pool))) ||
            (res[i].device && !(o->device = strdup(res[i].device)))) {
            gs_dra_results_free(*out, n);
            *out = NULL;
            return GS_ENOMEM;
        }
    }
    return 0;
}

int gs_cache_dra_assume(struct gs_cache *c, const char *claim_key, const char *node, const struct gs_dra_result *res,
                        size_t n)
{
    struct gs_cache_dra *d = gs_cache_dra(c);
    if (!d) return GS_ENOMEM;
    struct gs_cache_claim *r = gs__strmap_get(&d->claims, claim_key);
    if (!r) return GS_ENOENT;
    hold_release(d, r);
    gs_dra_results_free(r->assumed_res, r->nassumed_res);
    free(r->assumed_node);
    r->assumed_res = NULL, r->nassumed_res = 0, r->assumed_node = NULL, r->assumed = false;
    int err = copy_results(&r->assumed_res, res, n);
    if (!err && node && !(r->assumed_node = strdup(node))) err = GS_ENOMEM;
    if (!err) {
        r->nassumed_res = n;
        r->assumed = true;
    }
    int e2 = hold_apply(c, d, r);
    return err ? err : e2;
}

void gs_cache_dra_unassume(struct gs_cache *c, const char *claim_key)
{
    struct gs_cache_dra *d = gs_cache_dra(c);
    struct gs_cache_claim *r = d ? gs__strmap_get(&d->claims, claim_key) : NULL;
    if (!r || !r->assumed) return;
    hold_release(d, r);
    gs_dra_results_free(r->assumed_res, r->nassumed_res);
    free(r->assumed_node);
    r->assumed_res = NULL, r->nassumed_res = 0, r->assumed_node = NULL, r->assumed = false;
    hold_apply(c, d, r); /* the allocation, if the stream brought one meanwhile */
}

/*--- Lookups ---*/

const struct gs_cache_claim *gs_cache_dra_claim(const struct gs_cache_dra *d, const char *ns, const char *name)
{
    char key[GS__KEY_MAX];
    snprintf(key, sizeof key, "%s/%s", ns ? ns : "default", name);
    return gs__strmap_get(&d->claims, key);
}

const struct gs_cache_claim *gs_cache_dra_pod_claim(const struct gs_cache_dra *d, const char *ns,
                                                    const char *pod_uid, const char *entry)
{
    if (!pod_uid) return NULL;
    const char *want_ns = ns ? ns : "default";
    for (size_t i = 0; i < d->claims.cap; i++) {
        const struct gs_cache_claim *r = d->claims.slots[i].key ? d->claims.slots[i].val : NULL;
        if (!r || !r->owner_uid || strcmp(r->owner_uid, pod_uid) || strcmp(r->c.ns ? r->c.ns : "default", want_ns))
            continue;
        if (entry ? r->pod_claim_name && !strcmp(r->pod_claim_name, entry) : r->extended) return r;
    }
    return NULL;
}

bool gs_cache_dra_has_template(const struct gs_cache_dra *d, const char *ns, const char *name)
{
    char key[GS__KEY_MAX];
    snprintf(key, sizeof key, "%s/%s", ns ? ns : "default", name);
    return gs__strmap_get(&d->templates, key) != NULL;
}

const struct gs_dra_class *const *gs_cache_dra_classes(const struct gs_cache_dra *d, size_t *n)
{
    *n = d->nclass;
    return (const struct gs_dra_class *const *)d->class_arr;
}

const struct gs_dra_class *gs_cache_dra_class_for(const struct gs_cache_dra *d, const char *res)
{
    for (size_t i = 0; res && i < d->nclass; i++)
        if (d->class_arr[i]->extended_resource && !strcmp(d->class_arr[i]->extended_resource, res))
            return d->class_arr[i];
    return NULL;
}

/*--- Feeding ---*/

bool gs_cache_dra_key(const char *key)
{
    static const char *const pre[] = {P_SLICES, P_CLASSES, P_CLAIMS, P_TEMPLATES, P_RULES};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
        if (!strncmp(key, pre[i], strlen(pre[i]))) return true;
    return false;
}

static void warn(const char *what, const char *key, const struct gs_diags *dg)
{
    char msg[160];
    snprintf(msg, sizeof msg, "scheduler: cannot decode %s; it is ignored", what);
    gs_log(GS_LOG_WARN, msg, "object", key, "field", dg->n ? dg->v[0].path : "", "error",
           dg->n ? dg->v[0].msg : "", NULL);
}

static const struct gs_cel_attr *attr(const struct gs_dra_device *dv, const char *name)
{
    for (size_t i = 0; i < dv->nattrs; i++)
        if (dv->attrs[i].name && !strcmp(dv->attrs[i].name, name) &&
            (!dv->attrs[i].domain || !strcmp(dv->attrs[i].domain, "gpu.nvidia.com")))
            return &dv->attrs[i];
    return NULL;
}

static void slice_unindex(struct gs_cache_dra *d, struct slice_rec *s)
{
    for (size_t i = 0; i < s->ndevs; i++)
        if (gs__strmap_get(&d->devs, s->devs[i].key) == &s->devs[i]) gs__strmap_del(&d->devs, s->devs[i].key);
}

static int feed_slice(struct gs_cache_dra *d, const char *key, const char *name, const json_t *doc)
{
    struct slice_rec *old = gs__strmap_del(&d->slices, name);
    if (old) {
        slice_unindex(d, old);
        gs_dra_view_remove_slice(d->view, old->name);
        bump_node(d, old->node);
        slice_rec_free(old);
    }
    if (!doc) return 0;
    struct gs_dra_slice s = {0};
    struct gs_diags dg = {0};
    int err = gs_dra_slice_decode(doc, &s, &dg);
    if (err) {
        warn("ResourceSlice", key, &dg);
        gs_diags_free(&dg);
        gs_dra_slice_free(&s);
        return err;
    }
    gs_diags_free(&dg);
    struct slice_rec *r = calloc(1, sizeof *r);
    if (!r) goto nomem;
    /* Named by the key: a document that says otherwise does not move it. */
    if (!(r->name = strdup(name)) || (s.node_name && !(r->node = strdup(s.node_name)))) goto nomem;
    free(s.name);
    s.name = strdup(name);
    if (!s.name) goto nomem;
    r->devs = s.ndevices ? calloc(s.ndevices, sizeof *r->devs) : NULL;
    if (s.ndevices && !r->devs) goto nomem;
    for (size_t i = 0; i < s.ndevices; i++) {
        const struct gs_dra_device *dv = &s.devices[i];
        struct dev *o = &r->devs[r->ndevs++];
        const struct gs_cel_attr *type = attr(dv, "type"), *uuid = attr(dv, "uuid"), *parent = attr(dv, "parentUUID");
        o->mig = type && type->s && !strcmp(type->s, "mig");
        const char *u = o->mig && parent ? parent->s : uuid ? uuid->s : NULL;
        size_t kl = strlen(s.driver ? s.driver : "") + strlen(s.pool ? s.pool : "") + strlen(dv->name) + 3;
        if (!(o->name = strdup(dv->name)) || !(o->driver = strdup(s.driver ? s.driver : "")) ||
            !(o->pool = strdup(s.pool ? s.pool : "")) || (u && !(o->uuid = strdup(u))) || !(o->key = malloc(kl)))
            goto nomem;
        snprintf(o->key, kl, "%s/%s/%s", o->driver, o->pool, o->name);
    }
    if ((err = gs_dra_view_set_slice(d->view, &s)) != 0) {
        gs_dra_slice_free(&s);
        slice_rec_free(r);
        return err;
    }
    gs_dra_slice_free(&s);
    if (gs__strmap_put(&d->slices, r->name, r)) {
        gs_dra_view_remove_slice(d->view, r->name);
        slice_rec_free(r);
        return GS_ENOMEM;
    }
    for (size_t i = 0; i < r->ndevs; i++) gs__strmap_put(&d->devs, r->devs[i].key, &r->devs[i]);
    bump_node(d, r->node);
    return 0;
nomem:
    gs_dra_slice_free(&s);
    slice_rec_free(r);
    return GS_ENOMEM;
}

static int rebuild_classes(struct gs_cache_dra *d)
{
    free(d->class_arr);
    d->class_arr = NULL;
    d->nclass = 0;
    if (!d->classes.n) return 0;
    d->class_arr = calloc(d->classes.n, sizeof *d->class_arr);
    if (!d->class_arr) return GS_ENOMEM;
    for (size_t i = 0; i < d->classes.cap; i++)
        if (d->classes.slots[i].key) d->class_arr[d->nclass++] = d->classes.slots[i].val;
    /* Name order: the same classes give the same array whatever the map's layout. */
    for (size_t i = 1; i < d->nclass; i++)
        for (size_t j = i; j > 0 && strcmp(d->class_arr[j - 1]->name, d->class_arr[j]->name) > 0; j--) {
            const struct gs_dra_class *t = d->class_arr[j];
            d->class_arr[j] = d->class_arr[j - 1];
            d->class_arr[j - 1] = t;
        }
    return 0;
}

static int feed_class(struct gs_cache_dra *d, const char *key, const char *name, const json_t *doc)
{
    struct gs_dra_class *old = gs__strmap_del(&d->classes, name);
    if (old) gs_dra_view_remove_class(d->view, name);
    class_free(old);
    d->global++, d->epoch++;
    int err = 0;
    if (doc) {
        struct gs_dra_class *k = calloc(1, sizeof *k);
        struct gs_diags dg = {0};
        if (!k) err = GS_ENOMEM;
        else if ((err = gs_dra_class_decode(doc, k, &dg)) != 0) warn("DeviceClass", key, &dg);
        else if (strcmp(k->name ? k->name : "", name)) {
            free(k->name);
            if (!(k->name = strdup(name))) err = GS_ENOMEM;
        }
        if (!err) err = gs_dra_view_set_class(d->view, k);
        if (!err && gs__strmap_put(&d->classes, k->name, k)) {
            gs_dra_view_remove_class(d->view, k->name);
            err = GS_ENOMEM;
        }
        if (err && k) class_free(k);
        gs_diags_free(&dg);
    }
    int e2 = rebuild_classes(d);
    return err ? err : e2;
}

static int feed_rule(struct gs_cache_dra *d, const char *key, const char *name, const json_t *doc)
{
    char *old = gs__strmap_del(&d->rules, name);
    if (old) gs_dra_view_remove_taint_rule(d->view, name);
    free(old);
    d->global++, d->epoch++;
    if (!doc) return 0;
    struct gs_dra_taint_rule r = {0};
    struct gs_diags dg = {0};
    int err = gs_dra_taint_rule_decode(doc, &r, &dg);
    if (err) warn("DeviceTaintRule", key, &dg);
    gs_diags_free(&dg);
    if (!err) {
        free(r.name);
        r.name = strdup(name);
        err = r.name ? gs_dra_view_set_taint_rule(d->view, &r) : GS_ENOMEM;
    }
    char *k = err ? NULL : strdup(name);
    if (!err && (!k || gs__strmap_put(&d->rules, k, k))) {
        free(k);
        gs_dra_view_remove_taint_rule(d->view, name);
        err = GS_ENOMEM;
    }
    gs_dra_taint_rule_free(&r);
    return err;
}

static uint64_t spec_hash(const json_t *doc)
{
    char *t = json_dumps(json_object_get(doc, "spec"), JSON_SORT_KEYS | JSON_COMPACT);
    uint64_t h = t ? gs__fnv1a(t) : 0;
    free(t);
    return h;
}

static int feed_claim(struct gs_cache *c, struct gs_cache_dra *d, const char *key, const char *rest,
                      const json_t *doc)
{
    struct gs_cache_claim *old = gs__strmap_del(&d->claims, rest);
    struct gs_cache_claim *r = NULL;
    int err = 0;
    if (doc) {
        struct gs_diags dg = {0};
        r = calloc(1, sizeof *r);
        if (!r) err = GS_ENOMEM;
        else if ((err = gs_dra_claim_decode(doc, &r->c, &dg)) != 0) warn("ResourceClaim", key, &dg);
        gs_diags_free(&dg);
        if (!err && !(r->key = strdup(rest))) err = GS_ENOMEM;
        const json_t *md = json_object_get(doc, "metadata");
        const char *api = json_string_value(json_object_get(doc, "apiVersion"));
        if (!err && api && !(r->api_version = strdup(api))) err = GS_ENOMEM;
        size_t i;
        const json_t *o;
        json_array_foreach(json_object_get(md, "ownerReferences"), i, o) {
            const char *k = json_string_value(json_object_get(o, "kind"));
            const char *u = json_string_value(json_object_get(o, "uid"));
            if (!err && k && u && !strcmp(k, "Pod") && json_is_true(json_object_get(o, "controller")) && !r->owner_uid &&
                !(r->owner_uid = strdup(u)))
                err = GS_ENOMEM;
        }
        const json_t *ann = json_object_get(md, "annotations");
        const char *pcn = json_string_value(json_object_get(ann, "resource.kubernetes.io/pod-claim-name"));
        if (!err && pcn && !(r->pod_claim_name = strdup(pcn))) err = GS_ENOMEM;
        if (r) r->extended = json_object_get(ann, "resource.kubernetes.io/extended-resource-claim") != NULL;
        if (r) r->spec_hash = spec_hash(doc);
        if (err) {
            claim_rec_free(r);
            r = NULL;
        }
    }
    /* The old hold goes; an assumption of the same claim stays until its allocation arrives. */
    if (old) {
        hold_release(d, old);
        if (r && old->assumed && !r->c.allocated && old->c.uid && r->c.uid && !strcmp(old->c.uid, r->c.uid)) {
            r->assumed = true;
            r->assumed_node = old->assumed_node, r->assumed_res = old->assumed_res;
            r->nassumed_res = old->nassumed_res;
            old->assumed_node = NULL, old->assumed_res = NULL, old->nassumed_res = 0;
        }
        claim_rec_free(old);
        d->epoch++;
    }
    if (!r) return err;
    if (gs__strmap_put(&d->claims, r->key, r)) {
        claim_rec_free(r);
        return GS_ENOMEM;
    }
    d->epoch++;
    return hold_apply(c, d, r);
}

static int feed_template(struct gs_cache_dra *d, const char *rest, const json_t *doc)
{
    free(gs__strmap_del(&d->templates, rest));
    d->epoch++;
    if (!doc) return 0;
    char *k = strdup(rest);
    if (!k || gs__strmap_put(&d->templates, k, k)) {
        free(k);
        return GS_ENOMEM;
    }
    return 0;
}

int gs_cache_dra_feed(struct gs_cache *c, const char *key, const json_t *doc)
{
    if (!gs_cache_dra_key(key)) return GS_ENOENT;
    struct gs_cache_dra *d = gs_cache_dra(c);
    if (!d) return GS_ENOMEM;
    const char *slash = strchr(key, '/');
    const char *rest = slash + 1;
    if (!*rest) return GS_EINVAL;
    if (!strncmp(key, P_SLICES, strlen(P_SLICES))) return feed_slice(d, key, rest, doc);
    if (!strncmp(key, P_CLASSES, strlen(P_CLASSES))) return feed_class(d, key, rest, doc);
    if (!strncmp(key, P_RULES, strlen(P_RULES))) return feed_rule(d, key, rest, doc);
    if (!strchr(rest, '/')) return GS_EINVAL; /* namespaced kinds: "NS/NAME" */
    if (!strncmp(key, P_CLAIMS, strlen(P_CLAIMS))) return feed_claim(c, d, key, rest, doc);
    return feed_template(d, rest, doc);
}
