/*
 * dra_admit.c - DRA objects as admission sees them: device counts for quota and the
 * feasibility check (see dra_admit.h for the rules).
 *
 * Every object is decoded once, when its event arrives, by the decoders of core/dra.h (which
 * also compile the CEL selectors), and kept by store key. ResourceSlices, DeviceClasses and
 * DeviceTaintRules are mirrored into a pool view of the allocator (sched/dra_alloc.h), so the
 * question "could this claim be allocated somewhere if nothing were in use" gets the same
 * answer the scheduler would give, selectors, taints and constraints included. Counting an
 * allocationMode All request walks the slices itself: it needs how many devices match on the
 * largest node, which the allocator does not report.
 */
#include "sched/admission/dra_admit.h"

#include "core/cel.h"
#include "core/dra.h"
#include "sched/dra_alloc.h"
#include "sched/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum rkind { R_SLICE, R_CLASS, R_CLAIM, R_TEMPLATE, R_RULE };

#define P_SLICE "resourceslices.resource.k8s.io/"
#define P_CLASS "deviceclasses.resource.k8s.io/"
#define P_CLAIM "resourceclaims.resource.k8s.io/"
#define P_TEMPLATE "resourceclaimtemplates.resource.k8s.io/"
#define P_RULE "devicetaintrules.resource.k8s.io/"

const char *const gs_dra_admit_prefixes[] = {P_SLICE, P_CLASS, P_CLAIM, P_TEMPLATE, P_RULE, NULL};

struct rec {
    char *key;
    int64_t rv;
    enum rkind kind;
    union {
        struct gs_dra_slice slice;
        struct gs_dra_class cls;
        struct gs_dra_claim claim;
        struct gs_dra_claim_spec tmpl;
        struct gs_dra_taint_rule rule;
    } u;
};

struct mapping {
    char *resource, *cls;
};

struct gs_dra_admit {
    struct gs__strmap recs;
    struct gs_dra_pool_view *view;
    struct mapping *maps;
    size_t nmaps;
    uint64_t gen;
};

/*--- Objects ---*/

static int kind_of(const char *key, enum rkind *k)
{
    static const enum rkind kinds[] = {R_SLICE, R_CLASS, R_CLAIM, R_TEMPLATE, R_RULE};
    for (size_t i = 0; gs_dra_admit_prefixes[i]; i++)
        if (!strncmp(key, gs_dra_admit_prefixes[i], strlen(gs_dra_admit_prefixes[i]))) {
            *k = kinds[i];
            return 0;
        }
    return GS_ENOENT;
}

bool gs_dra_admit_is_key(const char *key)
{
    enum rkind k;
    return kind_of(key, &k) == 0;
}

static void rec_clear(struct gs_dra_admit *a, struct rec *r)
{
    switch (r->kind) {
    case R_SLICE:
        gs_dra_view_remove_slice(a->view, r->u.slice.name);
        gs_dra_slice_free(&r->u.slice);
        break;
    case R_CLASS:
        gs_dra_view_remove_class(a->view, r->u.cls.name);
        gs_dra_class_free(&r->u.cls);
        break;
    case R_CLAIM: gs_dra_claim_free(&r->u.claim); break;
    case R_TEMPLATE: gs_dra_claim_spec_free(&r->u.tmpl); break;
    case R_RULE:
        gs_dra_view_remove_taint_rule(a->view, r->u.rule.name);
        gs_dra_taint_rule_free(&r->u.rule);
        break;
    }
}

static void rec_free(struct gs_dra_admit *a, struct rec *r)
{
    rec_clear(a, r);
    free(r->key);
    free(r);
}

/* Decodes doc into r (kind set) and mirrors it into the view. */
static int rec_load(struct gs_dra_admit *a, struct rec *r, const json_t *doc, struct gs_diags *d)
{
    int rc;
    memset(&r->u, 0, sizeof r->u);
    switch (r->kind) {
    case R_SLICE:
        rc = gs_dra_slice_decode(doc, &r->u.slice, d);
        if (!rc) rc = gs_dra_view_set_slice(a->view, &r->u.slice);
        if (rc) gs_dra_slice_free(&r->u.slice);
        return rc;
    case R_CLASS:
        rc = gs_dra_class_decode(doc, &r->u.cls, d);
        if (!rc) rc = gs_dra_view_set_class(a->view, &r->u.cls);
        if (rc) gs_dra_class_free(&r->u.cls);
        return rc;
    case R_CLAIM:
        rc = gs_dra_claim_decode(doc, &r->u.claim, d);
        if (rc) gs_dra_claim_free(&r->u.claim);
        return rc;
    case R_TEMPLATE:
        rc = gs_dra_template_decode(doc, &r->u.tmpl, d); /* its spec.spec */
        if (rc) gs_dra_claim_spec_free(&r->u.tmpl);
        return rc;
    case R_RULE:
        rc = gs_dra_taint_rule_decode(doc, &r->u.rule, d);
        if (!rc) rc = gs_dra_view_set_taint_rule(a->view, &r->u.rule);
        if (rc) gs_dra_taint_rule_free(&r->u.rule);
        return rc;
    }
    return GS_EINVAL;
}

int gs_dra_admit_event(struct gs_dra_admit *a, const char *key, const json_t *doc, int64_t rv, struct gs_diags *d)
{
    enum rkind k;
    if (kind_of(key, &k)) return GS_ENOENT;
    struct rec *old = gs__strmap_get(&a->recs, key);
    if (old && doc && rv <= old->rv) return 0;
    /* A claim's spec never changes once created; its updates are status (allocation,
     * reservedFor), which the scheduler writes often and which change no count. */
    bool quiet = old && doc && k == R_CLAIM;
    if (old) {
        gs__strmap_del(&a->recs, key);
        rec_free(a, old);
        if (!quiet) a->gen++;
    }
    if (!doc) return 0;
    struct rec *r = calloc(1, sizeof *r);
    if (!r || !(r->key = strdup(key))) {
        free(r);
        return GS_ENOMEM;
    }
    r->kind = k;
    r->rv = rv;
    int rc = rec_load(a, r, doc, d);
    if (rc) {
        free(r->key);
        free(r);
        return rc == GS_ENOMEM ? rc : GS_EINVAL; /* a CEL syntax error (GS_EPARSE) is bad input too */
    }
    if (gs__strmap_put(&a->recs, r->key, r)) {
        rec_free(a, r);
        return GS_ENOMEM;
    }
    if (!quiet) a->gen++;
    return 0;
}

uint64_t gs_dra_admit_generation(const struct gs_dra_admit *a) { return a->gen; }

int gs_dra_admit_new(struct gs_dra_admit **out)
{
    struct gs_dra_admit *a = calloc(1, sizeof *a);
    if (!a) return GS_ENOMEM;
    gs__strmap_init(&a->recs);
    if (!(a->view = gs_dra_view_new())) {
        free(a);
        return GS_ENOMEM;
    }
    *out = a;
    return 0;
}

static void maps_clear(struct gs_dra_admit *a)
{
    for (size_t i = 0; i < a->nmaps; i++) free(a->maps[i].resource), free(a->maps[i].cls);
    free(a->maps);
    a->maps = NULL;
    a->nmaps = 0;
}

void gs_dra_admit_free(struct gs_dra_admit *a)
{
    if (!a) return;
    for (size_t s = 0; s < a->recs.cap; s++)
        if (a->recs.slots[s].key) rec_free(a, a->recs.slots[s].val);
    gs__strmap_free(&a->recs);
    gs_dra_view_free(a->view);
    maps_clear(a);
    free(a);
}

/*--- Mappings ---*/

static const char *mapped(const struct gs_dra_admit *a, const char *cls)
{
    for (size_t i = 0; i < a->nmaps; i++)
        if (!strcmp(a->maps[i].cls, cls)) return a->maps[i].resource;
    return NULL;
}

static int map_one(struct gs_dra_admit *a, const char *res, const char *cls, const char *path, struct gs_diags *d)
{
    if (!*cls) return gs_diags_add(d, path, "empty DeviceClass name"), GS_EINVAL;
    const char *prev = mapped(a, cls);
    if (prev) {
        gs_diags_add(d, path, "DeviceClass \"%s\" is mapped twice (to %s and %s): a device can count for one resource only",
                     cls, prev, res);
        return GS_EINVAL;
    }
    struct mapping *v = realloc(a->maps, (a->nmaps + 1) * sizeof *v);
    if (!v) return GS_ENOMEM;
    a->maps = v;
    if (!(v[a->nmaps].resource = strdup(res)) || !(v[a->nmaps].cls = strdup(cls))) {
        free(v[a->nmaps].resource);
        return GS_ENOMEM;
    }
    a->nmaps++;
    return 0;
}

int gs_dra_admit_add_mapping(struct gs_dra_admit *a, const char *text, struct gs_diags *d)
{
    const char *eq = strchr(text, '=');
    if (!eq || eq == text || !eq[1]) {
        gs_diags_add(d, "deviceClassMappings", "\"%s\": want RESOURCE=CLASS[,CLASS...] (example.com/gpus=gpu.example.com)", text);
        return GS_EINVAL;
    }
    char res[160];
    if ((size_t)(eq - text) >= sizeof res) {
        gs_diags_add(d, "deviceClassMappings", "\"%.40s...\": resource name longer than %zu", text, sizeof res - 1);
        return GS_EINVAL;
    }
    memcpy(res, text, (size_t)(eq - text));
    res[eq - text] = 0;
    char *list = strdup(eq + 1);
    if (!list) return GS_ENOMEM;
    /* all or nothing: a refused entry leaves the mappings as they were */
    size_t before = a->nmaps;
    int rc = 0;
    char *rest = list;
    for (char *c = strsep(&rest, ","); c && !rc; c = strsep(&rest, ",")) /* empty names kept, to be refused */
        rc = map_one(a, res, c, "deviceClassMappings", d);
    free(list);
    while (rc && a->nmaps > before) {
        a->nmaps--;
        free(a->maps[a->nmaps].resource);
        free(a->maps[a->nmaps].cls);
    }
    if (!rc) a->gen++;
    return rc;
}

int gs_dra_admit_set_config(struct gs_dra_admit *a, const json_t *config, struct gs_diags *d)
{
    maps_clear(a);
    a->gen++;
    const json_t *res = json_object_get(config, "resources");
    const json_t *m = json_object_get(res, "deviceClassMappings");
    if (!m) return 0;
    if (!json_is_array(m)) {
        gs_diags_add(d, "resources.deviceClassMappings", "must be a list");
        return GS_EINVAL;
    }
    size_t i;
    const json_t *e;
    json_array_foreach(m, i, e) {
        char path[96];
        snprintf(path, sizeof path, "resources.deviceClassMappings[%zu]", i);
        const char *name = json_string_value(json_object_get(e, "name"));
        const json_t *cls = json_object_get(e, "deviceClassNames");
        if (!name || !*name) {
            gs_diags_add(d, path, "name: required (the resource name quota is written in)");
            return GS_EINVAL;
        }
        if (!json_is_array(cls) || !json_array_size(cls)) {
            gs_diags_add(d, path, "deviceClassNames: must list at least one DeviceClass");
            return GS_EINVAL;
        }
        size_t j;
        const json_t *c;
        json_array_foreach(cls, j, c) {
            char p2[160];
            snprintf(p2, sizeof p2, "%s.deviceClassNames[%zu]", path, j);
            if (!json_is_string(c)) {
                gs_diags_add(d, p2, "must be a string");
                return GS_EINVAL;
            }
            int rc = map_one(a, name, json_string_value(c), p2, d);
            if (rc) return rc;
        }
    }
    return 0;
}

/*--- Counting ---*/

static const struct rec *lookup(const struct gs_dra_admit *a, const char *prefix, const char *ns, const char *name)
{
    char key[GS__KEY_MAX + 64];
    if (ns) snprintf(key, sizeof key, "%s%s/%s", prefix, ns, name);
    else snprintf(key, sizeof key, "%s%s", prefix, name);
    return gs__strmap_get(&a->recs, key);
}

static const struct gs_dra_class *class_of(const struct gs_dra_admit *a, const char *name)
{
    const struct rec *r = name ? lookup(a, P_CLASS, NULL, name) : NULL;
    return r ? &r->u.cls : NULL;
}

static void resource_for(const struct gs_dra_admit *a, const struct gs_dra_class *c, char *buf, size_t len)
{
    const char *m = mapped(a, c->name);
    if (m) snprintf(buf, len, "%s", m);
    else if (c->extended_resource && *c->extended_resource) snprintf(buf, len, "%s", c->extended_resource);
    else snprintf(buf, len, GS_DRA_IMPLICIT_PREFIX "%s", c->name);
}

static bool selectors_match(const struct gs_dra_selector *sel, size_t n, const struct gs_cel_device *dev)
{
    for (size_t i = 0; i < n; i++) {
        bool ok = false;
        struct gs_cel_error err;
        /* a runtime error means "no" here; the feasibility check reports it */
        if (!sel[i].prog || gs_cel_eval(sel[i].prog, dev, &ok, &err) || !ok) return false;
    }
    return true;
}

static bool tolerated(const struct gs_dra_subrequest *sr, const struct gs_dra_taint *t)
{
    if (t->effect != 1 && t->effect != 2) return true; /* None: informational */
    for (size_t i = 0; i < sr->ntolerations; i++) {
        const struct gs_dra_toleration *o = &sr->tolerations[i];
        if (o->effect != -1 && o->effect != t->effect) continue;
        bool exists = o->op && !strcmp(o->op, "Exists");
        if (exists && (!o->key || !*o->key)) return true;
        if (!o->key || !t->key || strcmp(o->key, t->key)) continue;
        if (exists) return true;
        if (!strcmp(o->value ? o->value : "", t->value ? t->value : "")) return true;
    }
    return false;
}

static bool rule_hits(const struct gs_dra_taint_rule *r, const struct gs_dra_slice *s, const struct gs_dra_device *dev)
{
    return (!r->driver || !strcmp(r->driver, s->driver ? s->driver : "")) &&
           (!r->pool || !strcmp(r->pool, s->pool ? s->pool : "")) && (!r->device || !strcmp(r->device, dev->name));
}

static bool usable(const struct gs_dra_admit *a, const struct gs_dra_subrequest *sr, const struct gs_dra_slice *s,
                   const struct gs_dra_device *dev)
{
    for (size_t i = 0; i < dev->ntaints; i++)
        if (!tolerated(sr, &dev->taints[i])) return false;
    for (size_t k = 0; k < a->recs.cap; k++) {
        const struct rec *r = a->recs.slots[k].key ? a->recs.slots[k].val : NULL;
        if (r && r->kind == R_RULE && rule_hits(&r->u.rule, s, dev) && !tolerated(sr, &r->u.rule.taint)) return false;
    }
    return true;
}

/* Is s superseded by a slice of the same pool with a newer generation? */
static bool stale(const struct gs_dra_admit *a, const struct gs_dra_slice *s)
{
    for (size_t k = 0; k < a->recs.cap; k++) {
        const struct rec *r = a->recs.slots[k].key ? a->recs.slots[k].val : NULL;
        if (!r || r->kind != R_SLICE || r->u.slice.generation <= s->generation) continue;
        if (!strcmp(r->u.slice.driver ? r->u.slice.driver : "", s->driver ? s->driver : "") &&
            !strcmp(r->u.slice.pool ? r->u.slice.pool : "", s->pool ? s->pool : ""))
            return true;
    }
    return false;
}

/* allocationMode All: the devices that match on the largest node. Slices for every node
 * (allNodes, node selectors) add to each node. */
static int64_t all_count(const struct gs_dra_admit *a, const struct gs_dra_class *c, const struct gs_dra_subrequest *sr)
{
    struct { const char *node; int64_t n; } *per = NULL;
    size_t nper = 0;
    int64_t everywhere = 0, best = 0;
    for (size_t k = 0; k < a->recs.cap; k++) {
        const struct rec *r = a->recs.slots[k].key ? a->recs.slots[k].val : NULL;
        if (!r || r->kind != R_SLICE || stale(a, &r->u.slice)) continue;
        const struct gs_dra_slice *s = &r->u.slice;
        int64_t m = 0;
        for (size_t i = 0; i < s->ndevices; i++) {
            const struct gs_dra_device *dev = &s->devices[i];
            struct gs_cel_device cd = {.driver = s->driver, .attrs = dev->attrs, .nattrs = dev->nattrs,
                                       .capacity = dev->capacity, .ncapacity = dev->ncapacity,
                                       .allow_multiple_allocations = dev->allow_multiple_allocations};
            if (selectors_match(c->selectors, c->nselectors, &cd) && selectors_match(sr->selectors, sr->nselectors, &cd) &&
                usable(a, sr, s, dev))
                m++;
        }
        if (!m) continue;
        if (!s->node_name) {
            everywhere += m;
            continue;
        }
        size_t j = 0;
        while (j < nper && strcmp(per[j].node, s->node_name)) j++;
        if (j == nper) {
            void *nv = realloc(per, (nper + 1) * sizeof *per);
            if (!nv) break; /* counts what it saw so far */
            per = nv;
            per[nper].node = s->node_name;
            per[nper++].n = 0;
        }
        per[j].n += m;
    }
    for (size_t j = 0; j < nper; j++)
        if (per[j].n > best) best = per[j].n;
    free(per);
    return best + everywhere;
}

static int need_add(struct gs_dra_need *need, const char *res, int64_t devices, char *why, size_t len)
{
    for (size_t i = 0; i < need->n; i++)
        if (!strcmp(need->v[i].resource, res)) {
            need->v[i].devices += devices;
            return 0;
        }
    if (need->n == GS_DRA_NEED_MAX) {
        snprintf(why, len, "claims charge more than %d resource names (%s is one too many)", GS_DRA_NEED_MAX, res);
        return GS_ERANGE;
    }
    snprintf(need->v[need->n].resource, sizeof need->v[need->n].resource, "%s", res);
    need->v[need->n++].devices = devices;
    return 0;
}

/* One claim spec's devices into need; label names the claim in messages. */
static int spec_need(const struct gs_dra_admit *a, const struct gs_dra_claim_spec *spec, const char *label,
                     struct gs_dra_need *need, char *why, size_t len)
{
    for (size_t i = 0; i < spec->nrequests; i++) {
        const struct gs_dra_request *rq = &spec->requests[i];
        struct gs_dra_need one = {0}; /* this request: the most any alternative takes, per resource */
        for (size_t j = 0; j < rq->nalts; j++) {
            const struct gs_dra_subrequest *sr = &rq->alts[j];
            const struct gs_dra_class *c = class_of(a, sr->class_name);
            if (!c) {
                snprintf(why, len, "%s request %s: DeviceClass \"%s\" not found", label, sr->name ? sr->name : rq->name,
                         sr->class_name ? sr->class_name : "");
                return GS_ENOENT;
            }
            int64_t n = sr->admin_access ? 0 : sr->all ? all_count(a, c, sr) : sr->count; /* admin access holds no device */
            char res[160];
            resource_for(a, c, res, sizeof res);
            size_t k = 0;
            while (k < one.n && strcmp(one.v[k].resource, res)) k++;
            if (k == one.n) {
                int rc = need_add(&one, res, n, why, len);
                if (rc) return rc;
            } else if (n > one.v[k].devices) {
                one.v[k].devices = n;
            }
        }
        for (size_t k = 0; k < one.n; k++) {
            int rc = need_add(need, one.v[k].resource, one.v[k].devices, why, len);
            if (rc) return rc;
        }
    }
    return 0;
}

static int feasible(const struct gs_dra_admit *a, const struct gs_dra_claim_spec *spec, const char *label, char *why,
                    size_t len)
{
    struct gs_dra_why w;
    memset(&w, 0, sizeof w);
    if (gs_dra_feasible(a->view, spec, &w)) return 0;
    if (w.request[0])
        snprintf(why, len, "%s request %s cannot be satisfied on any node: %s", label, w.request, w.what);
    else
        snprintf(why, len, "%s cannot be satisfied on any node: %s", label, w.what[0] ? w.what : "no node has the devices");
    return GS_EINVAL;
}

bool gs_dra_admit_pod_has_claims(const struct gs_pod *pod)
{
    const json_t *rc = pod->doc ? json_object_get(json_object_get(pod->doc, "spec"), "resourceClaims") : NULL;
    return json_array_size(rc) > 0;
}

int gs_dra_admit_need(const struct gs_dra_admit *a, const struct gs_pod *const *pods, size_t npods, int flags,
                      struct gs_dra_need *need, char *why, size_t len)
{
    const char **seen = NULL; /* named claims counted already: once per workload */
    size_t nseen = 0;
    int rc = 0;
    for (size_t p = 0; p < npods && !rc; p++) {
        const struct gs_pod *pod = pods[p];
        const json_t *rcs = pod->doc ? json_object_get(json_object_get(pod->doc, "spec"), "resourceClaims") : NULL;
        const char *ns = pod->meta.namespace_ ? pod->meta.namespace_ : "default";
        size_t i;
        const json_t *e;
        json_array_foreach(rcs, i, e) {
            const char *pname = json_string_value(json_object_get(e, "name"));
            const char *cname = json_string_value(json_object_get(e, "resourceClaimName"));
            const char *tname = json_string_value(json_object_get(e, "resourceClaimTemplateName"));
            char label[192];
            if (cname) {
                if (!(flags & GS_DRA_NEED_SHARED)) continue;
                bool dup = false;
                for (size_t k = 0; k < nseen && !dup; k++) dup = !strcmp(seen[k], cname);
                if (dup) continue;
                const char **ns2 = realloc(seen, (nseen + 1) * sizeof *seen);
                if (!ns2) { rc = GS_ENOMEM; break; }
                seen = ns2;
                seen[nseen++] = cname;
                snprintf(label, sizeof label, "pod %s/%s claim %s (ResourceClaim %s)", ns, pod->meta.name,
                         pname ? pname : "?", cname);
                const struct rec *r = lookup(a, P_CLAIM, ns, cname);
                if (!r) {
                    snprintf(why, len, "%s: ResourceClaim %s/%s not found", label, ns, cname);
                    rc = GS_ENOENT;
                    break;
                }
                rc = spec_need(a, &r->u.claim.spec, label, need, why, len);
                /* an allocated claim has its devices: nothing to prove */
                if (!rc && (flags & GS_DRA_NEED_FEASIBLE) && !r->u.claim.allocated)
                    rc = feasible(a, &r->u.claim.spec, label, why, len);
            } else if (tname) {
                snprintf(label, sizeof label, "pod %s/%s claim %s (ResourceClaimTemplate %s)", ns, pod->meta.name,
                         pname ? pname : "?", tname);
                const struct rec *r = lookup(a, P_TEMPLATE, ns, tname);
                if (!r) {
                    snprintf(why, len, "%s: ResourceClaimTemplate %s/%s not found", label, ns, tname);
                    rc = GS_ENOENT;
                    break;
                }
                rc = spec_need(a, &r->u.tmpl, label, need, why, len);
                if (!rc && (flags & GS_DRA_NEED_FEASIBLE)) rc = feasible(a, &r->u.tmpl, label, why, len);
            }
            if (rc) break;
        }
    }
    free(seen);
    return rc;
}
