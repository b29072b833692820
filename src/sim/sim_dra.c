/*
 * sim_dra.c - DRA in the simulator; see sim_dra.h.
 *
 * The simulator keeps each claim's current document itself (the server's
 * store does that there) and feeds every new version to the cache, exactly
 * as the scheduler loop's stream would.
 */
#include "sim/sim_dra.h"

#include "core/dra.h"
#include "loops/claims.h" /* generated claim names and annotations, as the controller makes them */
#include "sched/cache_feed.h"
#include "sched/dra_plugin.h"
#include "sched/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *kind, *plural;
    bool namespaced;
} kinds[] = {
    {"ResourceSlice", "resourceslices", false},       {"DeviceClass", "deviceclasses", false},
    {"DeviceTaintRule", "devicetaintrules", false},   {"ResourceClaimTemplate", "resourceclaimtemplates", true},
    {"ResourceClaim", "resourceclaims", true},
};

static int kind_index(const char *kind)
{
    for (size_t i = 0; kind && i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(kinds[i].kind, kind)) return (int)i;
    return -1;
}

bool gs_sim_dra_kind(const char *kind) { return kind_index(kind) >= 0; }

static const char *jstr(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

int gs_sim_dra_check(const json_t *doc, struct gs_diags *d)
{
    int k = kind_index(jstr(doc, "kind", NULL));
    if (k < 0) return GS_ENOENT;
    if (!jstr(doc, "metadata", "name")) {
        gs_diags_add(d, "metadata.name", "is required");
        return GS_EINVAL;
    }
    int rc = 0;
    switch (k) {
    case 0: {
        struct gs_dra_slice s = {0};
        rc = gs_dra_slice_decode(doc, &s, d);
        gs_dra_slice_free(&s);
        break;
    }
    case 1: {
        struct gs_dra_class c = {0};
        rc = gs_dra_class_decode(doc, &c, d);
        gs_dra_class_free(&c);
        break;
    }
    case 2: {
        struct gs_dra_taint_rule r = {0};
        rc = gs_dra_taint_rule_decode(doc, &r, d);
        gs_dra_taint_rule_free(&r);
        break;
    }
    case 3: {
        struct gs_dra_claim_spec s = {0};
        const json_t *spec = json_object_get(json_object_get(doc, "spec"), "spec");
        if (!spec) {
            gs_diags_add(d, "spec.spec", "is required");
            return GS_EINVAL;
        }
        rc = gs_dra_claim_spec_decode(spec, &s, "spec.spec", d);
        gs_dra_claim_spec_free(&s);
        break;
    }
    default: {
        struct gs_dra_claim c = {0};
        rc = gs_dra_claim_decode(doc, &c, d);
        gs_dra_claim_free(&c);
        break;
    }
    }
    return rc;
}

int gs_sim_dra_pod_uid(struct gs_pod *p)
{
    char buf[600];
    snprintf(buf, sizeof buf, "sim-%s-%s", p->meta.namespace_ ? p->meta.namespace_ : "default",
             p->meta.name ? p->meta.name : "");
    return (p->meta.uid = strdup(buf)) ? 0 : GS_ENOMEM;
}

/*--- State ---*/

struct pod_claims {
    char *pod_key;
    char **claims; /* "NS/NAME" */
    size_t n;
};

struct claim_doc {
    char *key;
    json_t *doc;
};

struct gs_sim_dra {
    struct gs_cache *cache;
    struct gs__strmap claims; /* "NS/NAME" -> struct claim_doc */
    struct gs__strmap pods;   /* pod key -> struct pod_claims */
    json_t *event;            /* the last bound's claims array */
};

static void pod_claims_free(struct pod_claims *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) free(p->claims[i]);
    free(p->claims);
    free(p->pod_key);
    free(p);
}

void gs_sim_dra_free(struct gs_sim_dra *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->claims.cap; i++)
        if (s->claims.slots[i].key) {
            struct claim_doc *c = s->claims.slots[i].val;
            free(c->key);
            json_decref(c->doc);
            free(c);
        }
    gs__strmap_free(&s->claims);
    for (size_t i = 0; i < s->pods.cap; i++)
        if (s->pods.slots[i].key) pod_claims_free(s->pods.slots[i].val);
    gs__strmap_free(&s->pods);
    json_decref(s->event);
    free(s);
}

static int feed(struct gs_sim_dra *s, int k, const json_t *doc, struct gs_diags *d)
{
    const char *name = jstr(doc, "metadata", "name"), *ns = jstr(doc, "metadata", "namespace");
    char key[600];
    if (kinds[k].namespaced)
        snprintf(key, sizeof key, "%s.resource.k8s.io/%s/%s", kinds[k].plural, ns && *ns ? ns : "default", name);
    else snprintf(key, sizeof key, "%s.resource.k8s.io/%s", kinds[k].plural, name);
    int rc = gs_cache_feed(s->cache, key, doc);
    if (rc && d) gs_diags_add(d, key, "the scheduler cannot take it: %s", gs_strerror(rc));
    return rc;
}

/* Keeps a claim's document (a new reference taken) and feeds it. */
static int put_claim(struct gs_sim_dra *s, json_t *doc, struct gs_diags *d)
{
    const char *ns = jstr(doc, "metadata", "namespace");
    char key[600];
    snprintf(key, sizeof key, "%s/%s", ns && *ns ? ns : "default", jstr(doc, "metadata", "name"));
    struct claim_doc *c = gs__strmap_get(&s->claims, key);
    if (c) {
        json_decref(c->doc);
        c->doc = json_incref(doc);
    } else {
        c = calloc(1, sizeof *c);
        if (!c || !(c->key = strdup(key)) || gs__strmap_put(&s->claims, c->key, c)) {
            if (c) free(c->key);
            free(c);
            return GS_ENOMEM;
        }
        c->doc = json_incref(doc);
    }
    return feed(s, 4, doc, d);
}

/* A slice for a node without one, named and shaped as the agent publishes it. */
static json_t *node_slice(const struct gs_node_spec *n)
{
    json_t *devs = json_array();
    for (int32_t g = 0; g < n->ngpus; g++) {
        char dn[32], uuid[300];
        snprintf(dn, sizeof dn, "gpu-%d", g);
        snprintf(uuid, sizeof uuid, "GPU-sim-%s-%d", n->name, g);
        json_t *attrs = json_pack("{s:{s:s}, s:{s:s}, s:{s:s}}", "type", "string", "gpu", "uuid", "string", uuid,
                                  "productName", "string", n->gpu_model ? n->gpu_model : "GPU");
        if (n->gpu_numa) json_object_set_new(attrs, "resource.kubernetes.io/numaNode", json_pack("{s:i}", "int", n->gpu_numa[g]));
        json_t *cap = json_pack("{s:{s:s}}", "memory", "value", "0");
        char mem[32];
        snprintf(mem, sizeof mem, "%lldMi", (long long)n->gpu_mem_mib);
        json_object_set_new(json_object_get(cap, "memory"), "value", json_string(mem));
        json_array_append_new(devs, json_pack("{s:s, s:o, s:o}", "name", dn, "attributes", attrs, "capacity", cap));
    }
    char name[300];
    snprintf(name, sizeof name, "%s-gpu.nvidia.com-0", n->name);
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:{s:s, s:i, s:i}, s:o}}", "apiVersion", "resource.k8s.io/v1",
                     "kind", "ResourceSlice", "metadata", "name", name, "spec", "driver", "gpu.nvidia.com", "nodeName",
                     n->name, "pool", "name", n->name, "generation", 1, "resourceSliceCount", 1, "devices", devs);
}

static bool pod_has_claims(const struct gs_pod *p)
{
    return json_array_size(json_object_get(json_object_get(p->doc, "spec"), "resourceClaims")) > 0;
}

static const json_t *find_template(const struct gs_trace *t, const char *ns, const char *name)
{
    for (size_t i = 0; i < t->ndra; i++) {
        const char *k = jstr(t->dra[i], "kind", NULL), *n = jstr(t->dra[i], "metadata", "name");
        const char *tns = jstr(t->dra[i], "metadata", "namespace");
        if (k && !strcmp(k, "ResourceClaimTemplate") && n && !strcmp(n, name) &&
            !strcmp(tns && *tns ? tns : "default", ns))
            return t->dra[i];
    }
    return NULL;
}

/* The claims the resourceclaim controller would create for pod's template entries. */
static int generate_claims(struct gs_sim_dra *s, const struct gs_trace *t, const struct gs_pod *p, uint64_t seed,
                           struct gs_diags *d)
{
    const char *ns = p->meta.namespace_ ? p->meta.namespace_ : "default";
    size_t i;
    const json_t *en;
    json_array_foreach(json_object_get(json_object_get(p->doc, "spec"), "resourceClaims"), i, en) {
        const char *ename = jstr(en, "name", NULL), *tname = jstr(en, "resourceClaimTemplateName", NULL);
        if (!ename || !tname) continue;
        const json_t *tm = find_template(t, ns, tname);
        if (!tm) continue; /* the scheduler reports it */
        char name[256], uid[300];
        gs_claims_generated_name(p->meta.name, ename, p->meta.uid, seed, name, sizeof name);
        snprintf(uid, sizeof uid, "sim-claim-%s-%s", ns, name);
        json_t *c = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}, s:[{s:s, s:s, s:s, s:s, s:b}]}, s:O}",
                              "apiVersion", jstr(tm, "apiVersion", NULL) ? jstr(tm, "apiVersion", NULL) : "resource.k8s.io/v1",
                              "kind", "ResourceClaim", "metadata", "name", name, "namespace", ns, "uid", uid,
                              "annotations", GS_ANN_POD_CLAIM_NAME, ename, "ownerReferences", "apiVersion", "v1", "kind",
                              "Pod", "name", p->meta.name, "uid", p->meta.uid, "controller", 1, "spec",
                              json_object_get(json_object_get(tm, "spec"), "spec"));
        if (!c) return GS_ENOMEM;
        int rc = put_claim(s, c, d);
        json_decref(c);
        if (rc) return rc;
    }
    return 0;
}

int gs_sim_dra_new(struct gs_cache *cache, const struct gs_trace *t, uint64_t seed, struct gs_sim_dra **out,
                   struct gs_diags *d)
{
    *out = NULL;
    bool any = t->ndra > 0;
    for (size_t i = 0; !any && i < t->npods; i++) any = pod_has_claims(t->pods[i].pod);
    if (!any) return 0;
    struct gs_sim_dra *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->cache = cache;
    gs__strmap_init(&s->claims);
    gs__strmap_init(&s->pods);
    int rc = 0;
    /* Classes and rules, then slices, then claims: a claim's hold needs its devices known. */
    static const int order[] = {1, 2, 0, 3, 4};
    for (size_t o = 0; !rc && o < sizeof order / sizeof order[0]; o++)
        for (size_t i = 0; !rc && i < t->ndra; i++) {
            int k = kind_index(jstr(t->dra[i], "kind", NULL));
            if (k != order[o]) continue;
            rc = k == 4 ? put_claim(s, t->dra[i], d) : feed(s, k, t->dra[i], d);
        }
    for (size_t n = 0; !rc && n < t->nnodes; n++) {
        bool has = false;
        for (size_t i = 0; !has && i < t->ndra; i++) {
            const char *node = jstr(json_object_get(t->dra[i], "spec"), "nodeName", NULL);
            has = kind_index(jstr(t->dra[i], "kind", NULL)) == 0 && node && !strcmp(node, t->nodes[n].name);
        }
        if (has || t->nodes[n].ngpus <= 0) continue;
        json_t *sl = node_slice(&t->nodes[n]);
        rc = sl ? feed(s, 0, sl, d) : GS_ENOMEM;
        json_decref(sl);
    }
    for (size_t i = 0; !rc && i < t->npods; i++) rc = generate_claims(s, t, t->pods[i].pod, seed, d);
    if (rc) {
        gs_sim_dra_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/*--- Binding and leaving ---*/

static void remember(struct gs_sim_dra *s, const char *pod_key, const char *claim_key)
{
    struct pod_claims *p = gs__strmap_get(&s->pods, pod_key);
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p || !(p->pod_key = strdup(pod_key)) || gs__strmap_put(&s->pods, p->pod_key, p)) {
            pod_claims_free(p);
            return;
        }
    }
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->claims[i], claim_key)) return;
    char **v = realloc(p->claims, (p->n + 1) * sizeof *v);
    if (!v) return;
    p->claims = v;
    if ((p->claims[p->n] = strdup(claim_key))) p->n++;
}

const json_t *gs_sim_dra_bound(struct gs_sim_dra *s, struct gs_framework *fw, const struct gs_pod *pod, double now_s)
{
    if (!s) return NULL;
    json_decref(s->event);
    s->event = NULL;
    char key[GS__KEY_MAX];
    gs_meta_key(&pod->meta, key, sizeof key);
    struct gs_dra_claim_write *w = NULL;
    size_t n = 0;
    if (gs_dra_plugin_take(gs_framework_plugin_state(fw, GS_DRA_PLUGIN_NAME), key, now_s, &w, &n) || !n) return NULL;
    s->event = json_array();
    for (size_t i = 0; i < n; i++) {
        struct claim_doc *cd = gs__strmap_get(&s->claims, w[i].claim_key);
        json_t *cur = cd ? cd->doc : NULL;
        if (!cur) continue;
        json_t *next = json_deep_copy(cur);
        if (!json_is_object(json_object_get(next, "status"))) json_object_set_new(next, "status", json_object());
        json_t *st = json_object_get(next, "status");
        if (w[i].allocation) json_object_set(st, "allocation", w[i].allocation);
        json_t *rf = json_object_get(st, "reservedFor");
        if (!json_is_array(rf)) json_object_set_new(st, "reservedFor", rf = json_array());
        json_array_append_new(rf, json_pack("{s:s, s:s, s:s}", "resource", "pods", "name", w[i].pod_name, "uid",
                                            w[i].pod_uid ? w[i].pod_uid : ""));
        put_claim(s, next, NULL);
        remember(s, key, w[i].claim_key);
        json_array_append_new(s->event, json_pack("{s:s, s:O}", "claim", jstr(next, "metadata", "name"), "allocation",
                                                  json_object_get(st, "allocation")));
        json_decref(next);
    }
    gs_dra_claim_writes_free(w, n);
    return s->event;
}

void gs_sim_dra_left(struct gs_sim_dra *s, const struct gs_pod *pod)
{
    if (!s) return;
    char key[GS__KEY_MAX];
    gs_meta_key(&pod->meta, key, sizeof key);
    struct pod_claims *p = gs__strmap_del(&s->pods, key);
    for (size_t i = 0; p && i < p->n; i++) {
        struct claim_doc *cd = gs__strmap_get(&s->claims, p->claims[i]);
        json_t *cur = cd ? cd->doc : NULL;
        if (!cur) continue;
        json_t *next = json_deep_copy(cur);
        json_t *st = json_object_get(next, "status");
        json_t *rf = json_object_get(st, "reservedFor");
        for (size_t k = json_array_size(rf); k-- > 0;)
            if (pod->meta.uid && jstr(json_array_get(rf, k), "uid", NULL) &&
                !strcmp(jstr(json_array_get(rf, k), "uid", NULL), pod->meta.uid))
                json_array_remove(rf, k);
        if (!json_array_size(rf)) { /* the last consumer is gone: deallocated */
            json_object_del(st, "reservedFor");
            json_object_del(st, "allocation");
        }
        put_claim(s, next, NULL);
        json_decref(next);
    }
    pod_claims_free(p);
}
