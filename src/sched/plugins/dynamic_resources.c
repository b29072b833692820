/*
 * dynamic_resources.c - "DynamicResources": kube-scheduler's plugin of the
 * same name, over the cache's DRA side (sched/cache_dra.h) and the allocator
 * (sched/dra_alloc.h).
 *
 * PreFilter finds the pod's claims: spec.resourceClaims[] by
 * resourceClaimName, or the claim the resourceclaim controller generated
 * from a template (by owner and pod-claim-name annotation), plus the
 * extended-resource claim when a DeviceClass serves one of the pod's
 * extended resources (nvidia.com/gpu). A claim that does not exist (yet)
 * makes the pod unschedulable with its name; a pod without claims skips
 * the plugin.
 *
 * Filter asks gs_dra_allocate, per node, whether every claim of the pod can
 * be allocated there, and keeps the reason (gs_dra_why) as a reject code
 * whose text names the claim, the request and what failed ("claim c request
 * gpus: selector ... matched 0 of 8 devices"). GPUs that device-plugin pods
 * hold (busy in the cache's GPU slots, not held by a claim) are held in the
 * view for the call, so DRA never hands out a GPU a device-plugin pod uses.
 * Answers are remembered per node and keyed on the claims' specs and the
 * node's versions (cache generation, DRA version), so pods from one template
 * cost one allocation per changed node, not one per node.
 *
 * Reserve allocates on the chosen node, holds the devices as assumed in the
 * cache and fills a->gpu_mask with the GPUs they sit on (whole GPUs, or a
 * 1-milli share of a MIG device's parent), so device-plugin pods see them
 * taken; Unreserve gives them back. PreBind marks the allocation due: the
 * driver writes the claims' status before the binding (sched/dra_plugin.h).
 */
#include "sched/cache_dra.h"
#include "sched/dra_alloc.h"
#include "sched/dra_plugin.h"
#include "sched/plugin.h"
#include "sched/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY "DynamicResources"
#define MAX_CLAIMS 16
#define MAX_WHYS 120
#define DP_UID "gpusched.io/device-plugin-pods" /* the pseudo claim holding device-plugin GPUs */

struct memo {
    uint64_t sig, ver;
    uint8_t code;
};

struct pend_claim {
    char *claim_key;   /* "NS/NAME" */
    char *uid;
    bool fresh;        /* allocated by this Reserve */
    struct gs_dra_result *res;
    size_t nres;
};

struct pend {
    char *pod_key;
    char *node;
    char *pod_name, *pod_uid;
    struct pend_claim *c;
    size_t n;
};

struct dr {
    struct gs_handle h;
    struct memo *memo;
    int32_t nmemo;
    uint64_t memo_epoch;
    char *whys[MAX_WHYS];
    int nwhys;
    struct gs__strmap pend; /* pod key -> struct pend */
    struct gs_dra_result *dp; /* device-plugin GPUs of the node being looked at */
    size_t ndp, dp_cap;
};

/* What PreFilter found, for Filter and Reserve (the claims are the cache's). */
struct cyc {
    size_t n;
    const struct gs_cache_claim *rec[MAX_CLAIMS];
    struct gs_dra_claim view[MAX_CLAIMS]; /* shallow: an assumed claim shows as allocated */
    uint64_t sig;                         /* 0: no memo (a claim allocated already) */
};

static void *cyc_clone(const void *p)
{
    struct cyc *c = malloc(sizeof *c);
    if (c) memcpy(c, p, sizeof *c);
    return c;
}

/*--- Pods ---*/

bool gs_pod_has_claims(const struct gs_pod *pod)
{
    return json_array_size(json_object_get(json_object_get(pod->doc, "spec"), "resourceClaims")) > 0;
}

static void pend_free(struct pend *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->c[i].claim_key), free(p->c[i].uid);
        gs_dra_results_free(p->c[i].res, p->c[i].nres);
    }
    free(p->c);
    free(p->pod_key), free(p->node), free(p->pod_name), free(p->pod_uid);
    free(p);
}

/*--- Init ---*/

static int dr_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    (void)args, (void)d;
    struct dr *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->h = *h;
    gs__strmap_init(&s->pend);
    *state = s;
    return 0;
}

static void dr_fini(void *state)
{
    struct dr *s = state;
    if (!s) return;
    for (size_t i = 0; i < s->pend.cap; i++)
        if (s->pend.slots[i].key) {
            struct pend *p = s->pend.slots[i].val;
            for (size_t k = 0; k < p->n; k++)
                if (p->c[k].fresh) gs_cache_dra_unassume(s->h.cache, p->c[k].claim_key);
            pend_free(p);
        }
    gs__strmap_free(&s->pend);
    for (int i = 0; i < s->nwhys; i++) free(s->whys[i]);
    free(s->memo);
    free(s->dp);
    free(s);
}

/*--- PreFilter ---*/

static void add_claim(struct cyc *c, const struct gs_cache_claim *r)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->rec[i] == r) return; /* one claim named twice is allocated once */
    c->rec[c->n] = r;
    c->view[c->n] = r->c;
    if (r->assumed && !r->c.allocated) {
        c->view[c->n].allocated = true;
        c->view[c->n].results = r->assumed_res;
        c->view[c->n].nresults = r->nassumed_res;
        c->view[c->n].alloc_node = r->assumed_node;
    }
    c->n++;
}

static struct gs_status dr_pre_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    struct dr *s = state;
    const json_t *entries = json_object_get(json_object_get(pod->doc, "spec"), "resourceClaims");
    struct gs_cache_dra *d = gs_cache_dra(s->h.cache);
    const struct gs_dra_class *ext = d && pod->demand.gpu_count > 0 ? gs_cache_dra_class_for(d, GS_RES_GPU) : NULL;
    if (!json_array_size(entries) && !ext) return gs_status_make(GS_SKIP, NULL);
    if (!d) return gs_status_make(GS_ERROR, "out of memory");
    if (json_array_size(entries) + 1 > MAX_CLAIMS)
        return gs_status_make(GS_UNSCHEDULABLE_AND_UNRESOLVABLE, "pod has more than %d resource claims", MAX_CLAIMS - 1);
    struct cyc *c = calloc(1, sizeof *c);
    if (!c) return gs_status_make(GS_ERROR, "out of memory");
    const char *ns = pod->meta.namespace_ ? pod->meta.namespace_ : "default";
    size_t i;
    const json_t *en;
    json_array_foreach(entries, i, en) {
        const char *name = json_string_value(json_object_get(en, "name"));
        const char *cn = json_string_value(json_object_get(en, "resourceClaimName"));
        const char *tn = json_string_value(json_object_get(en, "resourceClaimTemplateName"));
        const struct gs_cache_claim *r = cn ? gs_cache_dra_claim(d, ns, cn)
                                            : gs_cache_dra_pod_claim(d, ns, pod->meta.uid, name ? name : "");
        if (!r) {
            struct gs_status st =
                cn ? gs_status_make(GS_UNSCHEDULABLE_AND_UNRESOLVABLE, "resourceclaim \"%s\" not found", cn)
                : tn && !gs_cache_dra_has_template(d, ns, tn)
                    ? gs_status_make(GS_UNSCHEDULABLE_AND_UNRESOLVABLE, "resourceclaimtemplate \"%s\" not found", tn)
                    : gs_status_make(GS_UNSCHEDULABLE_AND_UNRESOLVABLE,
                                     "waiting for the claim of entry \"%s\" (template \"%s\") to be created",
                                     name ? name : "", tn ? tn : "");
            free(c);
            return st;
        }
        add_claim(c, r);
    }
    if (ext) {
        const struct gs_cache_claim *r = gs_cache_dra_pod_claim(d, ns, pod->meta.uid, NULL);
        if (!r) {
            free(c);
            return gs_status_make(GS_UNSCHEDULABLE_AND_UNRESOLVABLE,
                                  "waiting for the claim of extended resource %s (DeviceClass \"%s\") to be created",
                                  GS_RES_GPU, ext->name);
        }
        add_claim(c, r);
    }
    c->sig = 0x9e3779b97f4a7c15ull;
    for (size_t k = 0; k < c->n; k++) {
        if (c->view[k].allocated) {
            c->sig = 0;
            break;
        }
        c->sig = gs__mix64(c->sig, c->rec[k]->spec_hash);
    }
    if (gs_cycle_state_write(cs, KEY, c, cyc_clone, free)) return gs_status_make(GS_ERROR, "out of memory");
    return (struct gs_status){0};
}

/*--- Filter ---*/

/* The reject code of a why text (interned; the table restarts, with the
 * memo, when full). */
static uint8_t why_code(struct dr *s, const char *text)
{
    for (int i = 0; i < s->nwhys; i++)
        if (!strcmp(s->whys[i], text)) return (uint8_t)(i + 1);
    if (s->nwhys == MAX_WHYS) {
        for (int i = 0; i < s->nwhys; i++) free(s->whys[i]);
        s->nwhys = 0;
        s->memo_epoch++;
    }
    char *t = strdup(text);
    if (!t) return MAX_WHYS; /* a code without text reads "cannot allocate the resource claims" */
    s->whys[s->nwhys++] = t;
    return (uint8_t)s->nwhys;
}

static const char *claim_of_request(const struct cyc *c, const char *request)
{
    char main[128];
    snprintf(main, sizeof main, "%s", request);
    char *slash = strchr(main, '/');
    if (slash) *slash = 0;
    for (size_t i = 0; i < c->n && *main; i++)
        for (size_t r = 0; r < c->view[i].spec.nrequests; r++)
            if (c->view[i].spec.requests[r].name && !strcmp(c->view[i].spec.requests[r].name, main))
                return c->view[i].name;
    return c->n ? c->view[0].name : "";
}

static void why_text(const struct cyc *c, const struct gs_dra_why *w, char *buf, size_t len)
{
    const char *claim = claim_of_request(c, w->request);
    if (w->request[0]) snprintf(buf, len, "claim %s request %s: %s", claim, w->request, w->what);
    else snprintf(buf, len, "claim%s %s: %s", c->n > 1 ? "s of" : "", c->n > 1 ? "the pod" : claim, w->what);
}

/* GPU slots device-plugin pods use on node: busy in the cache, held by no claim. */
static uint64_t foreign_slots(struct gs_cache_dra *d, const struct gs_node_info *ni)
{
    uint64_t busy = 0;
    for (int32_t g = 0; g < ni->ngpus && g < GS_MAX_GPUS_PER_NODE; g++)
        if (ni->gpus[g].milli_free < GS_GPU_MILLI) busy |= 1ull << g;
    return busy ? busy & ~gs_cache_dra_held_slots(d, ni->name) : 0;
}

/* Holds node's device-plugin GPUs in the view for one allocation (see above). */
static bool hold_foreign(struct dr *s, struct gs_cache_dra *d, const struct gs_node_info *ni)
{
    uint64_t f = foreign_slots(d, ni);
    if (!f) return false;
    s->ndp = 0;
    for (int g = 0; g < GS_MAX_GPUS_PER_NODE; g++) {
        if (!(f >> g & 1)) continue;
        size_t n;
        const struct gs_dra_result *r = gs_cache_dra_slot_devices(s->h.cache, ni->idx, g, &n);
        if (s->ndp + n > s->dp_cap) {
            size_t cap = (s->ndp + n) * 2;
            struct gs_dra_result *v = realloc(s->dp, cap * sizeof *v);
            if (!v) break;
            s->dp = v, s->dp_cap = cap;
        }
        memcpy(s->dp + s->ndp, r, n * sizeof *r);
        s->ndp += n;
    }
    if (!s->ndp) return false;
    gs_dra_view_hold(gs_cache_dra_view(d), DP_UID, s->dp, s->ndp);
    return true;
}

/* gs_dra_allocate for c on ni: 0, or the reject code; results kept when res given. */
static uint8_t try_node(struct dr *s, struct gs_cache_dra *d, const struct cyc *c, const struct gs_node_info *ni,
                        struct gs_dra_result **res, size_t *nres)
{
    const struct gs_dra_claim *claims[MAX_CLAIMS];
    for (size_t i = 0; i < c->n; i++) claims[i] = &c->view[i];
    struct gs_dra_result *r[MAX_CLAIMS] = {0};
    size_t nr[MAX_CLAIMS] = {0};
    struct gs_dra_why why = {0};
    bool held = hold_foreign(s, d, ni);
    int err = gs_dra_allocate(gs_cache_dra_view(d), ni->name, claims, c->n, r, nr, &why);
    if (held) gs_dra_view_release(gs_cache_dra_view(d), DP_UID);
    if (!err) {
        for (size_t i = 0; i < c->n; i++) {
            if (res) res[i] = r[i], nres[i] = nr[i];
            else gs_dra_results_free(r[i], nr[i]);
        }
        return 0;
    }
    char text[512];
    if (err == GS_ENOENT || err == GS_EINVAL) why_text(c, &why, text, sizeof text);
    else snprintf(text, sizeof text, "cannot allocate the resource claims: %s", gs_strerror(err));
    return why_code(s, text);
}

static void dr_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)pod;
    struct dr *s = state;
    const struct cyc *c = gs_cycle_state_read(cs, KEY);
    struct gs_cache_dra *d = gs_cache_dra(s->h.cache);
    if (!c || !d) return;
    int32_t slots = gs_cache_node_count(s->h.cache);
    if (slots > s->nmemo) {
        struct memo *m = realloc(s->memo, (size_t)slots * sizeof *m);
        if (m) {
            memset(m + s->nmemo, 0, (size_t)(slots - s->nmemo) * sizeof *m);
            s->memo = m, s->nmemo = slots;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_info *ni = nodes[i];
        uint64_t ver = gs__mix64(gs__mix64(ni->generation, gs_cache_dra_node_version(d, ni->name)), s->memo_epoch);
        struct memo *m = c->sig && ni->idx < s->nmemo ? &s->memo[ni->idx] : NULL;
        if (m && m->sig == c->sig && m->ver == ver) {
            reject[i] = m->code;
            continue;
        }
        reject[i] = try_node(s, d, c, ni, NULL, NULL);
        if (m) *m = (struct memo){c->sig, ver, reject[i]};
    }
}

static int dr_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)pod;
    struct dr *s = state;
    int i = GS_REJECT_CODE(code) - 1;
    if (i >= 0 && i < s->nwhys) return snprintf(buf, len, "%s", s->whys[i]);
    return snprintf(buf, len, "cannot allocate the resource claims");
}

/*--- Reserve ---*/

static void drop_pend(struct dr *s, const char *pod_key, bool unassume)
{
    struct pend *p = gs__strmap_del(&s->pend, pod_key);
    if (!p) return;
    for (size_t k = 0; unassume && k < p->n; k++)
        if (p->c[k].fresh) gs_cache_dra_unassume(s->h.cache, p->c[k].claim_key);
    pend_free(p);
}

static struct gs_status dr_reserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                   struct gs_node_info *node, struct gs_assignment *a)
{
    struct dr *s = state;
    const struct cyc *c = gs_cycle_state_read(cs, KEY);
    struct gs_cache_dra *d = gs_cache_dra(s->h.cache);
    if (!c || !d) return (struct gs_status){0};
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    drop_pend(s, key, true);
    struct gs_dra_result *res[MAX_CLAIMS] = {0};
    size_t nres[MAX_CLAIMS] = {0};
    uint8_t code = try_node(s, d, c, node, res, nres);
    if (code) {
        char why[256];
        dr_reason(s, pod, code, why, sizeof why);
        return gs_status_make(GS_UNSCHEDULABLE, "%s", why);
    }
    struct pend *p = calloc(1, sizeof *p);
    if (p) p->c = calloc(c->n, sizeof *p->c);
    if (!p || !p->c || !(p->pod_key = strdup(key)) || !(p->node = strdup(node->name)) ||
        !(p->pod_name = strdup(pod->meta.name)) || (pod->meta.uid && !(p->pod_uid = strdup(pod->meta.uid)))) {
        for (size_t i = 0; i < c->n; i++) gs_dra_results_free(res[i], nres[i]);
        pend_free(p);
        return gs_status_make(GS_ERROR, "out of memory");
    }
    uint64_t mask = 0;
    bool mig_only = true;
    for (size_t i = 0; i < c->n; i++) {
        struct pend_claim *pc = &p->c[p->n++];
        pc->claim_key = strdup(c->rec[i]->key);
        pc->uid = c->rec[i]->c.uid ? strdup(c->rec[i]->c.uid) : NULL;
        pc->fresh = !c->view[i].allocated;
        pc->res = res[i], pc->nres = nres[i];
        if (!pc->fresh) continue;
        bool mo = false;
        mask |= gs_cache_dra_slots(s->h.cache, node->idx, res[i], nres[i], &mo);
        mig_only &= mo || !nres[i];
        if (pc->claim_key) gs_cache_dra_assume(s->h.cache, pc->claim_key, node->name, res[i], nres[i]);
    }
    if (gs__strmap_put(&s->pend, p->pod_key, p)) {
        for (size_t k = 0; k < p->n; k++)
            if (p->c[k].fresh) gs_cache_dra_unassume(s->h.cache, p->c[k].claim_key);
        pend_free(p);
        return gs_status_make(GS_ERROR, "out of memory");
    }
    /* The GPUs the devices sit on are taken in the cache's slots too. */
    if (mask && !a->gpu_mask) {
        a->gpu_mask = mask;
        a->milli = mig_only ? 1 : GS_GPU_MILLI;
        a->mem_mib = 0;
    }
    return (struct gs_status){0};
}

static void dr_unreserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod, struct gs_node_info *node)
{
    (void)cs, (void)node;
    struct dr *s = state;
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    drop_pend(s, key, true);
}

static struct gs_status dr_pre_bind(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                    const struct gs_node_info *node, const struct gs_assignment *a)
{
    (void)cs, (void)node, (void)a;
    struct dr *s = state;
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    const struct cyc *c = gs_cycle_state_read(cs, KEY);
    if (c && c->n && !gs__strmap_get(&s->pend, key))
        return gs_status_make(GS_ERROR, "resource claims of pod %s were not reserved", key);
    return (struct gs_status){0};
}

/* A pod that left for good takes no pending write with it. */
static void dr_on_pod(void *state, const struct gs_pod *pod, bool added)
{
    if (added) return;
    struct dr *s = state;
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    drop_pend(s, key, true);
}

/*--- The driver's side (dra_plugin.h) ---*/

int gs_dra_plugin_take(void *state, const char *pod_key, double now_s, struct gs_dra_claim_write **w, size_t *n)
{
    *w = NULL;
    *n = 0;
    struct dr *s = state;
    struct pend *p = s ? gs__strmap_del(&s->pend, pod_key) : NULL;
    if (!p) return 0;
    struct gs_cache_dra *d = gs_cache_dra(s->h.cache);
    size_t ncls = 0;
    const struct gs_dra_class *const *cls = d ? gs_cache_dra_classes(d, &ncls) : NULL;
    struct gs_dra_claim_write *out = calloc(p->n ? p->n : 1, sizeof *out);
    int err = out ? 0 : GS_ENOMEM;
    for (size_t i = 0; !err && i < p->n; i++) {
        const struct pend_claim *pc = &p->c[i];
        struct gs_dra_claim_write *o = &out[(*n)++];
        size_t kl = strlen("resourceclaims.resource.k8s.io/") + strlen(pc->claim_key) + 1;
        o->store_key = malloc(kl);
        if (o->store_key) snprintf(o->store_key, kl, "resourceclaims.resource.k8s.io/%s", pc->claim_key);
        o->claim_key = strdup(pc->claim_key);
        o->uid = pc->uid ? strdup(pc->uid) : NULL;
        o->pod_name = p->pod_name ? strdup(p->pod_name) : NULL;
        o->pod_uid = p->pod_uid ? strdup(p->pod_uid) : NULL;
        if (!o->store_key || !o->claim_key || !o->pod_name) err = GS_ENOMEM;
        const char *slash = strchr(pc->claim_key, '/');
        if (!err && pc->fresh && d) {
            char ns[256];
            snprintf(ns, sizeof ns, "%.*s", (int)(slash ? slash - pc->claim_key : 0), pc->claim_key);
            const struct gs_cache_claim *cr = gs_cache_dra_claim(d, ns, slash ? slash + 1 : pc->claim_key);
            if (cr) o->allocation = gs_dra_allocation_json(&cr->c, pc->res, pc->nres, cls, ncls, p->node,
                                                           (int64_t)now_s);
            if (!o->allocation) err = GS_ENOMEM;
        }
    }
    if (err) {
        for (size_t k = 0; k < p->n; k++)
            if (p->c[k].fresh) gs_cache_dra_unassume(s->h.cache, p->c[k].claim_key);
        gs_dra_claim_writes_free(out, *n);
        *w = NULL;
        *n = 0;
        pend_free(p);
        return err;
    }
    pend_free(p);
    *w = out;
    return 0;
}

void gs_dra_claim_writes_free(struct gs_dra_claim_write *w, size_t n)
{
    for (size_t i = 0; w && i < n; i++) {
        free(w[i].store_key), free(w[i].claim_key), free(w[i].uid), free(w[i].pod_name), free(w[i].pod_uid);
        json_decref(w[i].allocation);
    }
    free(w);
}

const struct gs_plugin gs_plugin_dynamic_resources = {
    .name = GS_DRA_PLUGIN_NAME,
    .init = dr_init,
    .fini = dr_fini,
    .pre_filter = dr_pre_filter,
    .filter = dr_filter,
    .reason = dr_reason,
    .reserve = dr_reserve,
    .unreserve = dr_unreserve,
    .pre_bind = dr_pre_bind,
    .on_pod = dr_on_pod,
};
