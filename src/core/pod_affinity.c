/*
 * pod_affinity.c - decoding spec.affinity.podAffinity and podAntiAffinity.
 *
 * The four term lists (required and preferred, affinity and anti-affinity)
 * become struct gs_pod_affinity, read by the InterPodAffinity plugin. A pod
 * without any term keeps pod_affinity NULL, which is what lets the scheduler
 * skip the plugin for the common pod at no cost.
 *
 * Two things are settled here once, as the Kubernetes API server settles
 * them when a pod is created, rather than in every scheduling cycle:
 *  - matchLabelKeys / mismatchLabelKeys become requirements of the term's
 *    selector with the pod's own value (key In (v) / key NotIn (v)); a key
 *    the pod does not carry adds nothing;
 *  - the namespace rule: listed namespaces, a namespaceSelector, or (neither
 *    given) the pod's own namespace (the matcher reads has_ns_selector).
 *
 * Errors name the field and the value, as kube-apiserver's validation does:
 * a missing or malformed topologyKey, a preferred term without weight or
 * podAffinityTerm, a label key in both matchLabelKeys and mismatchLabelKeys,
 * or either list given without a labelSelector.
 */
#include "core/decode.h"

#include <stdlib.h>
#include <string.h>

/*--- Clearing ---*/

static void term_clear(struct gs_pod_affinity_term *t)
{
    gs_selector_free(&t->selector);
    gs_selector_free(&t->ns_selector);
    gs__strv_free(t->namespaces, t->nnamespaces);
    free(t->topology_key);
}

static void terms_free(struct gs_pod_affinity_term *v, size_t n)
{
    for (size_t i = 0; i < n; i++) term_clear(&v[i]);
    free(v);
}

void gs__pod_affinity_free(struct gs_pod_affinity *a)
{
    if (!a) return;
    terms_free(a->req_aff, a->nreq_aff);
    terms_free(a->pref_aff, a->npref_aff);
    terms_free(a->req_anti, a->nreq_anti);
    terms_free(a->pref_anti, a->npref_anti);
    free(a);
}

/*--- Decoding ---*/

/* Adds "key op (value)" to the selector; false when out of memory. */
static bool add_req(struct gs_selector *s, const char *key, enum gs_sel_op op, const char *value)
{
    struct gs_sel_req *nr = realloc(s->reqs, (s->n + 1) * sizeof *nr);
    if (!nr) return false;
    s->reqs = nr;
    char **vals = calloc(1, sizeof *vals);
    char *k = strdup(key), *v = strdup(value);
    if (!vals || !k || !v) {
        free(vals), free(k), free(v);
        return false;
    }
    vals[0] = v;
    s->reqs[s->n++] = (struct gs_sel_req){k, op, vals, 1};
    return true;
}

static bool in_list(char **v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], s)) return true;
    return false;
}

/* matchLabelKeys / mismatchLabelKeys into the selector with the pod's values. */
static void label_keys(struct gs_dec *dc, const json_t *t, const struct gs_pod *p, struct gs_pod_affinity_term *out)
{
    size_t nm = 0, nx = 0;
    char **mk = gs__dec_strv(dc, t, "matchLabelKeys", &nm);
    char **xk = gs__dec_strv(dc, t, "mismatchLabelKeys", &nx);
    const char *names[2] = {"matchLabelKeys", "mismatchLabelKeys"};
    char **lists[2] = {mk, xk};
    size_t counts[2] = {nm, nx};
    for (int l = 0; l < 2; l++) {
        if (counts[l] && !out->has_selector)
            gs__dec_err_at(dc, names[l], "must not be specified when labelSelector is not set");
        for (size_t i = 0; i < counts[l]; i++) {
            const char *why = NULL;
            size_t m = gs__dec_key(dc, names[l]);
            gs__dec_idx(dc, i);
            if (gs_label_key_check(lists[l][i], &why)) gs__dec_err(dc, "invalid label key \"%s\": %s", lists[l][i], why);
            else if (l == 1 && in_list(mk, nm, lists[l][i]))
                gs__dec_err(dc, "\"%s\" is in both matchLabelKeys and mismatchLabelKeys: a key may be in one of them",
                            lists[l][i]);
            else if (out->has_selector) {
                const char *v = gs_labels_get(&p->meta.labels, lists[l][i]);
                if (v && !add_req(&out->selector, lists[l][i], l ? GS_SEL_NOTIN : GS_SEL_IN, v)) dc->oom = true;
            }
            gs__dec_pop(dc, m);
        }
    }
    gs__strv_free(mk, nm);
    gs__strv_free(xk, nx);
}

/* One PodAffinityTerm at the current path. */
static void dec_term(struct gs_dec *dc, const json_t *t, const struct gs_pod *p, struct gs_pod_affinity_term *out)
{
    if (!gs__dec_is(dc, t, JSON_OBJECT)) return;
    json_t *sel = json_object_get(t, "labelSelector");
    out->has_selector = sel && !json_is_null(sel);
    gs__dec_label_selector(dc, t, "labelSelector", &out->selector);
    json_t *nss = json_object_get(t, "namespaceSelector");
    out->has_ns_selector = nss && !json_is_null(nss);
    gs__dec_label_selector(dc, t, "namespaceSelector", &out->ns_selector);
    out->namespaces = gs__dec_strv(dc, t, "namespaces", &out->nnamespaces);
    for (size_t i = 0; i < out->nnamespaces; i++) {
        const char *why = gs__dns_check(out->namespaces[i], true);
        if (!why) continue;
        size_t m = gs__dec_key(dc, "namespaces");
        gs__dec_idx(dc, i);
        gs__dec_err(dc, "invalid namespace \"%s\": %s", out->namespaces[i], why);
        gs__dec_pop(dc, m);
    }
    out->topology_key = gs__dec_strdup(dc, t, "topologyKey");
    const char *why = NULL;
    if (!out->topology_key || !*out->topology_key) gs__dec_err_at(dc, "topologyKey", "is required: can not be empty");
    else if (gs_label_key_check(out->topology_key, &why))
        gs__dec_err_at(dc, "topologyKey", "invalid label key \"%s\": %s", out->topology_key, why);
    label_keys(dc, t, p, out);
}

/* A list of required terms (array of PodAffinityTerm) or, when preferred, of
 * WeightedPodAffinityTerm {weight, podAffinityTerm}. */
static struct gs_pod_affinity_term *dec_terms(struct gs_dec *dc, const json_t *obj, const char *key, bool preferred,
                                              const struct gs_pod *p, size_t *n)
{
    *n = 0;
    json_t *arr = gs__dec_get(dc, obj, key, JSON_ARRAY);
    if (!json_array_size(arr)) return NULL;
    struct gs_pod_affinity_term *v = calloc(json_array_size(arr), sizeof *v);
    if (!v) {
        dc->oom = true;
        return NULL;
    }
    size_t m = gs__dec_key(dc, key), i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        size_t m2 = gs__dec_idx(dc, i);
        struct gs_pod_affinity_term *t = &v[(*n)++];
        if (!preferred) {
            dec_term(dc, e, p, t);
        } else if (gs__dec_is(dc, e, JSON_OBJECT)) {
            int64_t w = 0;
            if (!gs__dec_int(dc, e, "weight", 1, 100, &w) && !json_object_get(e, "weight"))
                gs__dec_err_at(dc, "weight", "is required");
            t->weight = (int32_t)w;
            json_t *pt = json_object_get(e, "podAffinityTerm");
            size_t m3 = gs__dec_key(dc, "podAffinityTerm");
            if (!pt || json_is_null(pt)) gs__dec_err(dc, "is required");
            else dec_term(dc, pt, p, t);
            gs__dec_pop(dc, m3);
        }
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
    return v;
}

void gs__dec_pod_affinity(struct gs_dec *dc, const json_t *spec, struct gs_pod *p)
{
    const json_t *aff = json_object_get(spec, "affinity");
    if (!json_is_object(aff)) return; /* a wrong type is reported with nodeAffinity */
    const json_t *pa = json_object_get(aff, "podAffinity"), *pn = json_object_get(aff, "podAntiAffinity");
    if ((!pa || json_is_null(pa)) && (!pn || json_is_null(pn))) return;
    struct gs_pod_affinity *a = calloc(1, sizeof *a);
    if (!a) {
        dc->oom = true;
        return;
    }
    size_t m = gs__dec_key(dc, "affinity");
    static const char req[] = "requiredDuringSchedulingIgnoredDuringExecution";
    static const char pref[] = "preferredDuringSchedulingIgnoredDuringExecution";
    json_t *x = gs__dec_get(dc, aff, "podAffinity", JSON_OBJECT);
    if (x) {
        size_t m2 = gs__dec_key(dc, "podAffinity");
        a->req_aff = dec_terms(dc, x, req, false, p, &a->nreq_aff);
        a->pref_aff = dec_terms(dc, x, pref, true, p, &a->npref_aff);
        gs__dec_pop(dc, m2);
    }
    if ((x = gs__dec_get(dc, aff, "podAntiAffinity", JSON_OBJECT))) {
        size_t m2 = gs__dec_key(dc, "podAntiAffinity");
        a->req_anti = dec_terms(dc, x, req, false, p, &a->nreq_anti);
        a->pref_anti = dec_terms(dc, x, pref, true, p, &a->npref_anti);
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
    if (!a->nreq_aff && !a->npref_aff && !a->nreq_anti && !a->npref_anti) {
        gs__pod_affinity_free(a);
        return;
    }
    p->pod_affinity = a;
}
