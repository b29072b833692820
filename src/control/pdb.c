/*
 * pdb.c - PodDisruptionBudget arithmetic; see pdb.h.
 */
#include "control/pdb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/*--- Int or percent ---*/

/* An IntOrString: *v the integer, *pct whether it was "N%". false when malformed (why set). */
static bool int_or_percent(const json_t *x, int64_t *v, bool *pct, const char **why)
{
    *pct = false;
    if (json_is_integer(x)) {
        *v = json_integer_value(x);
        if (*v < 0) return (*why = "must be greater than or equal to 0"), false;
        return true;
    }
    const char *s = json_string_value(x);
    if (!s) return (*why = "must be an integer or a percentage such as \"50%\""), false;
    char *end = NULL;
    long long n = strtoll(s, &end, 10);
    if (end == s || strcmp(end, "%") || s[0] == '-' || s[0] == '+')
        return (*why = "a valid percent string must be a numeric string followed by an ending '%'"), false;
    if (n > 100) return (*why = "must not be greater than 100%"), false;
    *v = n;
    *pct = true;
    return true;
}

static int bad(struct gs_diags *d, const char *path, const json_t *v, const char *why)
{
    char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    int err = gs_diags_add(d, path, "Invalid value: %s: %s", t ? t : "?", why);
    free(t);
    return err;
}

int gs_pdb_validate(const json_t *pdb, struct gs_diags *d)
{
    size_t before = d->n;
    const json_t *spec = json_object_get(pdb, "spec");
    if (spec && !json_is_object(spec)) return gs_diags_add(d, "spec", "must be an object") ? GS_ENOMEM : GS_EINVAL;
    const json_t *min = json_object_get(spec, "minAvailable"), *max = json_object_get(spec, "maxUnavailable");
    if (json_is_null(min)) min = NULL;
    if (json_is_null(max)) max = NULL;
    int err = 0;
    if (min && max)
        err = gs_diags_add(d, "spec", "minAvailable and maxUnavailable cannot be both set");
    int64_t v;
    bool pct;
    const char *why = NULL;
    if (!err && min && !int_or_percent(min, &v, &pct, &why)) err = bad(d, "spec.minAvailable", min, why);
    if (!err && max && !int_or_percent(max, &v, &pct, &why)) err = bad(d, "spec.maxUnavailable", max, why);
    const json_t *sel = json_object_get(spec, "selector"), *ml = json_object_get(sel, "matchLabels");
    if (!err && sel && !json_is_null(sel) && !json_is_object(sel))
        err = gs_diags_add(d, "spec.selector", "must be a label selector {matchLabels, matchExpressions}");
    const char *k;
    json_t *lv;
    json_object_foreach((json_t *)ml, k, lv)
        if (!err && !json_is_string(lv)) err = gs_diags_add(d, "spec.selector.matchLabels", "value of \"%s\" must be a string", k);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(sel, "matchExpressions"), i, e) {
        if (err) break;
        const char *op = str(e, "operator");
        json_t *vals = json_object_get(e, "values");
        char path[96];
        snprintf(path, sizeof path, "spec.selector.matchExpressions[%zu]", i);
        if (!str(e, "key")) err = gs_diags_add(d, path, "key: Required value");
        else if (op && (!strcmp(op, "In") || !strcmp(op, "NotIn")) && !json_array_size(vals))
            err = gs_diags_add(d, path, "values: Required value: must be specified when `operator` is 'In' or 'NotIn'");
        else if (op && (!strcmp(op, "Exists") || !strcmp(op, "DoesNotExist")) && json_array_size(vals))
            err = gs_diags_add(d, path, "values: Forbidden: may not be specified when `operator` is 'Exists' or "
                               "'DoesNotExist'");
    }
    if (err) return GS_ENOMEM;
    return d->n > before ? GS_EINVAL : 0;
}

/*--- Selection and health ---*/

static bool has_value(const json_t *vals, const char *v)
{
    size_t i;
    json_t *x;
    json_array_foreach(vals, i, x)
        if (json_is_string(x) && v && !strcmp(json_string_value(x), v)) return true;
    return false;
}

bool gs_pdb_selects(const json_t *pdb, const json_t *pod)
{
    const json_t *pm = json_object_get(pdb, "metadata"), *om = json_object_get(pod, "metadata");
    const char *pns = str(pm, "namespace"), *ons = str(om, "namespace");
    if (!pns || !ons || strcmp(pns, ons)) return false;
    const json_t *sel = json_object_get(json_object_get(pdb, "spec"), "selector");
    const json_t *labels = json_object_get(om, "labels");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)json_object_get(sel, "matchLabels"), k, v) {
        const char *have = str(labels, k);
        if (!have || !json_is_string(v) || strcmp(have, json_string_value(v))) return false;
    }
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(sel, "matchExpressions"), i, e) {
        const char *key = str(e, "key"), *op = str(e, "operator");
        const char *have = key ? str(labels, key) : NULL;
        const json_t *vals = json_object_get(e, "values");
        if (!op) return false;
        if (!strcmp(op, "In") && !has_value(vals, have)) return false;
        if (!strcmp(op, "NotIn") && have && has_value(vals, have)) return false;
        if (!strcmp(op, "Exists") && !have) return false;
        if (!strcmp(op, "DoesNotExist") && have) return false;
    }
    return true;
}

bool gs_pdb_pod_healthy(const json_t *pod)
{
    if (str(json_object_get(pod, "metadata"), "deletionTimestamp")) return false;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "conditions"), i, c) {
        const char *t = str(c, "type"), *s = str(c, "status");
        if (t && !strcmp(t, "Ready")) return s && !strcmp(s, "True");
    }
    return false;
}

static bool finished(const json_t *pod)
{
    const char *ph = str(json_object_get(pod, "status"), "phase");
    return ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed"));
}

/* ceil(pct * of / 100), as Kubernetes scales an IntOrString rounding up. */
static int64_t scaled(int64_t v, bool pct, int64_t of)
{
    return pct ? (v * of + 99) / 100 : v;
}

void gs_pdb_evaluate(const json_t *pdb, json_t *const *pods, size_t npods, const json_t *disrupted,
                     struct gs_pdb_eval *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < npods; i++) {
        if (!gs_pdb_selects(pdb, pods[i]) || finished(pods[i])) continue;
        out->expected++;
        const char *name = str(json_object_get(pods[i], "metadata"), "name");
        if (gs_pdb_pod_healthy(pods[i]) && !(name && json_object_get(disrupted, name))) out->current_healthy++;
    }
    const json_t *spec = json_object_get(pdb, "spec");
    const json_t *min = json_object_get(spec, "minAvailable"), *max = json_object_get(spec, "maxUnavailable");
    int64_t v;
    bool pct;
    const char *why;
    if (max && !json_is_null(max) && int_or_percent(max, &v, &pct, &why)) {
        int64_t unavailable = scaled(v, pct, out->expected);
        out->desired_healthy = out->expected > unavailable ? out->expected - unavailable : 0;
    } else if (min && !json_is_null(min) && int_or_percent(min, &v, &pct, &why)) {
        out->desired_healthy = scaled(v, pct, out->expected);
    } /* neither given: nothing must stay up (policy/v1 has no default; v1beta1's minAvailable 1 is gone) */
    out->disruptions_allowed = out->current_healthy > out->desired_healthy ? out->current_healthy - out->desired_healthy
                                                                          : 0;
}
