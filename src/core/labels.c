/*
 * labels.c - label sets, selectors, node affinity, taints and tolerations.
 *
 * Users bring manifests written for kube-scheduler, so every predicate here
 * copies Kubernetes' semantics, corner cases included:
 *  - labels.Requirement.Matches for selector operators (NotIn/DoesNotExist
 *    match an absent key; Gt/Lt need exactly one value, and both sides must
 *    parse as base-10 int64 the way strconv.ParseInt does);
 *  - component-helpers' nodeaffinity for terms: an empty term matches
 *    nothing, matchFields knows only In/NotIn with a single value (any other
 *    shape makes the term unparseable, so it never matches) and reads every
 *    field but metadata.name as "";
 *  - v1.Toleration.ToleratesTaint for tolerations.
 * Label sets are small sorted arrays: lookups are binary searches and the
 * order is deterministic for output and hashing.
 */
#include "core/labels.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

/*--- Label sets ---*/

/* Index of key, or of where it would be inserted; *found says which. */
static size_t labels_find(const struct gs_labels *l, const char *key, bool *found)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(l->v[mid].key, key);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    *found = false;
    return lo;
}

const char *gs_labels_get(const struct gs_labels *l, const char *key)
{
    if (!l || !l->n || !key) return NULL;
    bool found;
    size_t i = labels_find(l, key, &found);
    return found ? l->v[i].value : NULL;
}

int gs_labels_set(struct gs_labels *l, const char *key, const char *value)
{
    bool found;
    size_t i = labels_find(l, key, &found);
    char *v = strdup(value ? value : "");
    if (!v) return GS_ENOMEM;
    if (found) {
        free(l->v[i].value);
        l->v[i].value = v;
        return 0;
    }
    char *k = strdup(key);
    struct gs_kv *nv = k ? realloc(l->v, (l->n + 1) * sizeof *nv) : NULL;
    if (!nv) {
        free(k);
        free(v);
        return GS_ENOMEM;
    }
    l->v = nv;
    memmove(&l->v[i + 1], &l->v[i], (l->n - i) * sizeof *nv);
    l->v[i] = (struct gs_kv){.key = k, .value = v};
    l->n++;
    return 0;
}

void gs_labels_free(struct gs_labels *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].value);
    }
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/*--- Key and value syntax ---*/

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9] over s[0..n), n >= 1 */
static bool qualified_name_chars(const char *s, size_t n)
{
    if (!is_alnum(s[0]) || !is_alnum(s[n - 1])) return false;
    for (size_t i = 1; i + 1 < n; i++)
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.') return false;
    return true;
}

static bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/* RFC 1123 subdomain: dot-separated labels of [a-z0-9]([-a-z0-9]*[a-z0-9])?, <= 253 chars. */
static bool dns_subdomain(const char *s, size_t n)
{
    if (n == 0 || n > 253) return false;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.') {
            if (!is_lower_alnum(s[i]) && s[i] != '-') return false;
            continue;
        }
        if (i == start || !is_lower_alnum(s[start]) || !is_lower_alnum(s[i - 1])) return false;
        start = i + 1;
    }
    return true;
}

int gs_label_key_check(const char *key, const char **why)
{
    const char *dummy;
    if (!why) why = &dummy;
    if (!key || !*key) { *why = "label key is empty"; return GS_EINVAL; }
    const char *name = key, *slash = strchr(key, '/');
    if (slash) {
        if (strchr(slash + 1, '/')) { *why = "label key has more than one '/'"; return GS_EINVAL; }
        if (slash == key) { *why = "label key prefix is empty"; return GS_EINVAL; }
        if (!dns_subdomain(key, (size_t)(slash - key))) {
            *why = "label key prefix must be a lowercase DNS subdomain of at most 253 characters";
            return GS_EINVAL;
        }
        name = slash + 1;
    }
    size_t n = strlen(name);
    if (n == 0) { *why = "label key name is empty"; return GS_EINVAL; }
    if (n > 63) { *why = "label key name is longer than 63 characters"; return GS_EINVAL; }
    if (!qualified_name_chars(name, n)) {
        *why = "label key name must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric";
        return GS_EINVAL;
    }
    return 0;
}

int gs_label_value_check(const char *value, const char **why)
{
    const char *dummy;
    if (!why) why = &dummy;
    size_t n = value ? strlen(value) : 0;
    if (n == 0) return 0;
    if (n > 63) { *why = "label value is longer than 63 characters"; return GS_EINVAL; }
    if (!qualified_name_chars(value, n)) {
        *why = "label value must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric";
        return GS_EINVAL;
    }
    return 0;
}

/*--- Selector operators ---*/

static const char *const sel_op_names[] = {
    [GS_SEL_IN] = "In", [GS_SEL_NOTIN] = "NotIn", [GS_SEL_EXISTS] = "Exists",
    [GS_SEL_DOESNOTEXIST] = "DoesNotExist", [GS_SEL_GT] = "Gt", [GS_SEL_LT] = "Lt",
};
_Static_assert(sizeof sel_op_names / sizeof sel_op_names[0] == GS_SEL_LT + 1, "one name per selector op");

int gs_sel_op_parse(const char *s, enum gs_sel_op *op)
{
    for (size_t i = 0; s && i < sizeof sel_op_names / sizeof sel_op_names[0]; i++) {
        if (strcmp(s, sel_op_names[i]) == 0) {
            *op = (enum gs_sel_op)i;
            return 0;
        }
    }
    return GS_EINVAL;
}

const char *gs_sel_op_name(enum gs_sel_op op)
{
    return (unsigned)op <= GS_SEL_LT ? sel_op_names[op] : "?";
}

/*--- Selector matching ---*/

/* strconv.ParseInt(s, 10, 64): optional sign, one or more digits, no overflow. */
static bool parse_int64(const char *s, int64_t *out)
{
    if (!s) return false;
    bool neg = false;
    if (*s == '+' || *s == '-') neg = *s++ == '-';
    if (!*s) return false;
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v) ||
            v > lim)
            return false;
    }
    *out = !neg ? (int64_t)v : v == lim ? INT64_MIN : -(int64_t)v;
    return true;
}

static bool has_value(const struct gs_sel_req *r, const char *v)
{
    for (size_t i = 0; i < r->nvalues; i++)
        if (r->values[i] && strcmp(r->values[i], v) == 0) return true;
    return false;
}

/* Gt/Lt: the label and the requirement's single value must both be integers. */
static bool compare_matches(const struct gs_sel_req *r, const char *v)
{
    int64_t have, want;
    if (!v || r->nvalues != 1 || !parse_int64(v, &have) || !parse_int64(r->values[0], &want)) return false;
    return r->op == GS_SEL_GT ? have > want : have < want;
}

/* One requirement against a value lookup result (NULL: key absent). */
static bool req_matches_value(const struct gs_sel_req *r, const char *v)
{
    switch (r->op) {
    case GS_SEL_IN: return v && has_value(r, v);
    case GS_SEL_NOTIN: return !v || !has_value(r, v);
    case GS_SEL_EXISTS: return v != NULL;
    case GS_SEL_DOESNOTEXIST: return v == NULL;
    case GS_SEL_GT:
    case GS_SEL_LT: return compare_matches(r, v);
    }
    return false;
}

bool gs_sel_req_matches(const struct gs_sel_req *r, const struct gs_labels *l)
{
    return req_matches_value(r, r->key ? gs_labels_get(l, r->key) : NULL);
}

bool gs_selector_matches(const struct gs_selector *s, const struct gs_labels *l)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (!gs_sel_req_matches(&s->reqs[i], l)) return false;
    return true;
}

static void sel_req_free(struct gs_sel_req *r)
{
    free(r->key);
    for (size_t i = 0; i < r->nvalues; i++) free(r->values[i]);
    free(r->values);
    *r = (struct gs_sel_req){0};
}

void gs_selector_free(struct gs_selector *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) sel_req_free(&s->reqs[i]);
    free(s->reqs);
    s->reqs = NULL;
    s->n = 0;
}

/*--- Node affinity ---*/

/* A field selector requirement: only In/NotIn with exactly one value parse;
 * a Set has every field, unknown ones reading as "". */
static bool field_req_matches(const struct gs_sel_req *r, const char *node_name)
{
    if ((r->op != GS_SEL_IN && r->op != GS_SEL_NOTIN) || r->nvalues != 1 || !r->values[0]) return false;
    const char *field = r->key && strcmp(r->key, "metadata.name") == 0 && node_name ? node_name : "";
    bool eq = strcmp(field, r->values[0]) == 0;
    return r->op == GS_SEL_IN ? eq : !eq;
}

bool gs_node_term_matches(const struct gs_node_selector_term *t, const struct gs_labels *labels,
                          const char *node_name)
{
    if (!t || (t->match_expressions.n == 0 && t->match_fields.n == 0)) return false;
    if (!gs_selector_matches(&t->match_expressions, labels)) return false;
    for (size_t i = 0; i < t->match_fields.n; i++)
        if (!field_req_matches(&t->match_fields.reqs[i], node_name)) return false;
    return true;
}

bool gs_node_affinity_required_matches(const struct gs_node_affinity *a, const struct gs_labels *labels,
                                       const char *node_name)
{
    if (!a || !a->has_required) return true;
    for (size_t i = 0; i < a->nrequired; i++)
        if (gs_node_term_matches(&a->required[i], labels, node_name)) return true;
    return false;
}

int64_t gs_node_affinity_preferred_score(const struct gs_node_affinity *a, const struct gs_labels *labels,
                                         const char *node_name)
{
    int64_t sum = 0;
    for (size_t i = 0; a && i < a->npreferred; i++)
        if (gs_node_term_matches(&a->preferred[i].term, labels, node_name)) sum += a->preferred[i].weight;
    return sum;
}

static void term_free(struct gs_node_selector_term *t)
{
    gs_selector_free(&t->match_expressions);
    gs_selector_free(&t->match_fields);
}

void gs_node_affinity_free(struct gs_node_affinity *a)
{
    if (!a) return;
    for (size_t i = 0; i < a->nrequired; i++) term_free(&a->required[i]);
    for (size_t i = 0; i < a->npreferred; i++) term_free(&a->preferred[i].term);
    free(a->required);
    free(a->preferred);
    *a = (struct gs_node_affinity){0};
}

/*--- Taints and tolerations ---*/

static const char *const effect_names[] = {
    [GS_EFFECT_ANY] = "",
    [GS_EFFECT_NOSCHEDULE] = "NoSchedule",
    [GS_EFFECT_PREFERNOSCHEDULE] = "PreferNoSchedule",
    [GS_EFFECT_NOEXECUTE] = "NoExecute",
};
_Static_assert(sizeof effect_names / sizeof effect_names[0] == GS_EFFECT_NOEXECUTE + 1, "one name per effect");

int gs_taint_effect_parse(const char *s, bool allow_any, enum gs_taint_effect *out)
{
    if (!s) return GS_EINVAL;
    for (size_t i = allow_any ? 0 : 1; i < sizeof effect_names / sizeof effect_names[0]; i++) {
        if (strcmp(s, effect_names[i]) == 0) {
            *out = (enum gs_taint_effect)i;
            return 0;
        }
    }
    return GS_EINVAL;
}

const char *gs_taint_effect_name(enum gs_taint_effect e)
{
    return (unsigned)e <= GS_EFFECT_NOEXECUTE ? effect_names[e] : "?";
}

static const char *or_empty(const char *s) { return s ? s : ""; }

bool gs_toleration_tolerates(const struct gs_toleration *t, const struct gs_taint *taint)
{
    if (t->effect != GS_EFFECT_ANY && t->effect != taint->effect) return false;
    if (t->key && *t->key && strcmp(t->key, or_empty(taint->key)) != 0) return false;
    if (t->op == GS_TOL_EXISTS) return true;
    return strcmp(or_empty(t->value), or_empty(taint->value)) == 0;
}

static bool tolerated(const struct gs_taint *taint, const struct gs_toleration *tols, size_t ntols)
{
    for (size_t i = 0; i < ntols; i++)
        if (gs_toleration_tolerates(&tols[i], taint)) return true;
    return false;
}

const struct gs_taint *gs_find_untolerated_taint(const struct gs_taint *taints, size_t ntaints,
                                                 const struct gs_toleration *tols, size_t ntols,
                                                 unsigned effect_mask)
{
    for (size_t i = 0; i < ntaints; i++) {
        if (!(effect_mask & (1u << taints[i].effect))) continue;
        if (!tolerated(&taints[i], tols, ntols)) return &taints[i];
    }
    return NULL;
}

size_t gs_count_intolerable_prefer(const struct gs_taint *taints, size_t ntaints,
                                   const struct gs_toleration *tols, size_t ntols)
{
    size_t n = 0;
    for (size_t i = 0; i < ntaints; i++)
        if (taints[i].effect == GS_EFFECT_PREFERNOSCHEDULE && !tolerated(&taints[i], tols, ntols)) n++;
    return n;
}

void gs_taint_free(struct gs_taint *t)
{
    if (!t) return;
    free(t->key);
    free(t->value);
    *t = (struct gs_taint){0};
}

void gs_toleration_free(struct gs_toleration *t)
{
    if (!t) return;
    free(t->key);
    free(t->value);
    *t = (struct gs_toleration){0};
}
