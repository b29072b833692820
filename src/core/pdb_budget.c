/*
 * pdb_budget.c - a PodDisruptionBudget document into the scheduler's view;
 * see pdb_budget.h.
 *
 * Only the fields preemption reads are decoded: metadata (name, namespace),
 * spec.selector, status.disruptionsAllowed and the names of
 * status.disruptedPods. Each is checked for its type and range so a budget
 * that would mislead the victim order is refused with its field named, and
 * the caller (the scheduler loop) logs that and keeps the budget out.
 */
#include "core/pdb_budget.h"

#include "core/decode.h"

#include <stdlib.h>
#include <string.h>

void gs_pdb_budget_clear(struct gs_pdb_budget *b)
{
    free(b->ns);
    free(b->name);
    gs_selector_free(&b->selector);
    gs__strv_free(b->disrupted, b->ndisrupted);
    memset(b, 0, sizeof *b);
}

void gs_pdb_budget_free(struct gs_pdb_budget *b)
{
    if (!b) return;
    gs_pdb_budget_clear(b);
    free(b);
}

int gs_pdb_budget_decode(const json_t *doc, struct gs_pdb_budget *out, struct gs_diags *d)
{
    struct gs_dec dc;
    gs__dec_init(&dc, d);
    memset(out, 0, sizeof *out);
    if (!json_is_object(doc)) {
        gs__dec_err(&dc, "expected an object, got %s", doc ? gs__json_type_name(doc) : "nothing");
        return GS_EINVAL;
    }
    struct gs_meta m = {0};
    gs__dec_meta(&dc, doc, true, &m);
    out->ns = m.namespace_, m.namespace_ = NULL;
    out->name = m.name, m.name = NULL;
    gs_meta_clear(&m);
    json_t *spec = gs__dec_get(&dc, doc, "spec", JSON_OBJECT);
    if (spec) {
        size_t k = gs__dec_key(&dc, "spec");
        json_t *sel = json_object_get(spec, "selector");
        gs__dec_label_selector(&dc, spec, "selector", &out->selector);
        out->has_selector = sel && !json_is_null(sel) && out->selector.n > 0;
        gs__dec_pop(&dc, k);
    }
    json_t *st = gs__dec_get(&dc, doc, "status", JSON_OBJECT);
    if (st) {
        size_t k = gs__dec_key(&dc, "status");
        int64_t v = 0;
        if (gs__dec_int(&dc, st, "disruptionsAllowed", 0, INT32_MAX, &v))
            out->disruptions_allowed = (int32_t)v;
        json_t *dp = gs__dec_get(&dc, st, "disruptedPods", JSON_OBJECT);
        size_t n = json_object_size(dp);
        if (n && !(out->disrupted = calloc(n, sizeof *out->disrupted))) dc.oom = true;
        const char *name;
        json_t *t;
        json_object_foreach(dp, name, t) {
            if (!out->disrupted) break;
            if (!(out->disrupted[out->ndisrupted++] = strdup(name))) dc.oom = true;
        }
        gs__dec_pop(&dc, k);
    }
    int rc = dc.oom ? GS_ENOMEM : dc.nerr ? GS_EINVAL : 0;
    if (rc) gs_pdb_budget_clear(out);
    return rc;
}

bool gs_pdb_budget_covers(const struct gs_pdb_budget *b, const char *ns, const struct gs_labels *labels)
{
    if (!b->has_selector || !labels || !labels->n) return false; /* a pod without labels matches no budget */
    if (strcmp(b->ns ? b->ns : "default", ns ? ns : "default")) return false;
    return gs_selector_matches(&b->selector, labels);
}

bool gs_pdb_budget_disrupted(const struct gs_pdb_budget *b, const char *name)
{
    for (size_t i = 0; name && i < b->ndisrupted; i++)
        if (!strcmp(b->disrupted[i], name)) return true;
    return false;
}
