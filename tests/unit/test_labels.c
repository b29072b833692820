/*
 * test_labels.c - label sets, key/value syntax, selectors, node affinity,
 * taints and tolerations, each against Kubernetes' documented semantics.
 */
#include "core/error.h"
#include "core/labels.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/*--- Builders (tests own everything they build) ---*/

static char *dup(const char *s) { return s ? strdup(s) : NULL; }

/* A requirement with up to two values (NULL: fewer). */
static struct gs_sel_req req(const char *key, enum gs_sel_op op, const char *v0, const char *v1)
{
    struct gs_sel_req r = {.key = dup(key), .op = op};
    const char *vals[2] = {v0, v1};
    r.values = calloc(2, sizeof *r.values);
    for (int i = 0; i < 2 && vals[i]; i++) r.values[r.nvalues++] = dup(vals[i]);
    return r;
}

static void sel_add(struct gs_selector *s, struct gs_sel_req r)
{
    s->reqs = realloc(s->reqs, (s->n + 1) * sizeof *s->reqs);
    assert_non_null(s->reqs);
    s->reqs[s->n++] = r;
}

static struct gs_labels labels_of(const char *const *kv)
{
    struct gs_labels l = {0};
    for (; kv[0]; kv += 2) assert_int_equal(gs_labels_set(&l, kv[0], kv[1]), 0);
    return l;
}

static bool req_match_free(struct gs_sel_req r, const struct gs_labels *l)
{
    bool m = gs_sel_req_matches(&r, l);
    struct gs_selector s = {.reqs = malloc(sizeof r), .n = 1};
    s.reqs[0] = r;
    gs_selector_free(&s);
    return m;
}

/*--- Label sets ---*/

static void test_labels_set_get(void **st)
{
    (void)st;
    struct gs_labels l = {0};
    assert_null(gs_labels_get(&l, "a"));
    const char *keys[] = {"zone", "gpu", "a", "nvidia.com/gpu.product", "b", "gpu.count", "Z"};
    for (size_t i = 0; i < 7; i++) assert_int_equal(gs_labels_set(&l, keys[i], keys[i]), 0);
    assert_int_equal(l.n, 7);
    for (size_t i = 1; i < l.n; i++) assert_true(strcmp(l.v[i - 1].key, l.v[i].key) < 0);
    for (size_t i = 0; i < 7; i++) assert_string_equal(gs_labels_get(&l, keys[i]), keys[i]);
    assert_null(gs_labels_get(&l, "gpu.c"));
    assert_null(gs_labels_get(&l, ""));
    assert_null(gs_labels_get(&l, "zzz"));
    assert_null(gs_labels_get(&l, "0"));

    /* replace keeps size and order */
    assert_int_equal(gs_labels_set(&l, "gpu", "a100"), 0);
    assert_int_equal(gs_labels_set(&l, "a", ""), 0);
    assert_int_equal(l.n, 7);
    assert_string_equal(gs_labels_get(&l, "gpu"), "a100");
    assert_string_equal(gs_labels_get(&l, "a"), "");
    assert_string_equal(l.v[0].key, "Z");
    assert_string_equal(l.v[6].key, "zone");

    /* the set copies its inputs */
    char key[] = "temp", val[] = "v1";
    assert_int_equal(gs_labels_set(&l, key, val), 0);
    key[0] = 'x', val[0] = 'x';
    assert_string_equal(gs_labels_get(&l, "temp"), "v1");

    gs_labels_free(&l);
    assert_int_equal(l.n, 0);
    assert_null(l.v);
    assert_null(gs_labels_get(&l, "gpu"));
    gs_labels_free(&l); /* idempotent */
}

static void test_labels_many(void **st)
{
    (void)st;
    struct gs_labels l = {0};
    char k[32];
    /* insert in a scrambled order */
    for (unsigned i = 0; i < 500; i++) {
        snprintf(k, sizeof k, "k%05u", (i * 337) % 500);
        assert_int_equal(gs_labels_set(&l, k, k + 1), 0);
    }
    assert_int_equal(l.n, 500);
    for (unsigned i = 0; i < 500; i++) {
        snprintf(k, sizeof k, "k%05u", i);
        assert_string_equal(l.v[i].key, k);
        assert_string_equal(gs_labels_get(&l, k), k + 1);
    }
    gs_labels_free(&l);
}

/*--- Key and value syntax ---*/

static void key_ok(const char *k)
{
    const char *why = NULL;
    if (gs_label_key_check(k, &why) != 0) fail_msg("key \"%s\" refused: %s", k, why);
}

static void key_bad(const char *k)
{
    const char *why = NULL;
    if (gs_label_key_check(k, &why) != GS_EINVAL) fail_msg("key \"%.80s\" accepted", k);
    assert_non_null(why);
    assert_true(*why);
}

static void test_label_keys(void **st)
{
    (void)st;
    char n63[64], n64[65], p253[300], p254[300];
    memset(n63, 'a', 63), n63[63] = 0;
    memset(n64, 'a', 64), n64[64] = 0;
    /* 253-char prefix of 63-char labels joined by dots, then "/x" */
    memset(p253, 'a', 253);
    for (int i = 63; i < 253; i += 64) p253[i] = '.';
    strcpy(p253 + 253, "/x");
    memset(p254, 'a', 254);
    for (int i = 63; i < 254; i += 64) p254[i] = '.';
    strcpy(p254 + 254, "/x");

    key_ok("a");
    key_ok("gpu");
    key_ok("A-b_c.d");
    key_ok("nvidia.com/gpu.product");
    key_ok("kubernetes.io/hostname");
    key_ok("topology.kubernetes.io/zone");
    key_ok("a-b.c/Name_1");
    key_ok("1");
    key_ok(n63);
    key_ok(p253);

    key_bad("");
    key_bad(NULL);
    key_bad(n64);
    key_bad(p254);
    key_bad("/name");
    key_bad("prefix/");
    key_bad("a/b/c");
    key_bad("-a");
    key_bad("a-");
    key_bad("_a");
    key_bad("a.");
    key_bad("a b");
    key_bad("a:b");
    key_bad("Upper.Case/x");    /* prefixes are lowercase DNS names */
    key_bad("a..b/x");          /* empty DNS label */
    key_bad("-a.b/x");
    key_bad("a.b-/x");
    key_bad("a_b/x");
    key_bad("caf\xc3\xa9");
    assert_int_equal(gs_label_key_check("ok", NULL), 0);
    assert_int_equal(gs_label_key_check("", NULL), GS_EINVAL);
}

static void test_label_values(void **st)
{
    (void)st;
    char v63[64], v64[65];
    memset(v63, 'z', 63), v63[63] = 0;
    memset(v64, 'z', 64), v64[64] = 0;
    const char *ok[] = {"", "a", "A100-SXM4-80GB", "1.2_3", v63, "0"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) assert_int_equal(gs_label_value_check(ok[i], NULL), 0);
    assert_int_equal(gs_label_value_check(NULL, NULL), 0);
    const char *bad[] = {v64, "-a", "a-", ".a", "a b", "a/b", "a:b", "\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *why = NULL;
        assert_int_equal(gs_label_value_check(bad[i], &why), GS_EINVAL);
        assert_non_null(why);
        assert_true(*why);
    }
}

/*--- Selectors ---*/

static void test_sel_op_names(void **st)
{
    (void)st;
    const char *names[] = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"};
    const enum gs_sel_op ops[] = {GS_SEL_IN, GS_SEL_NOTIN, GS_SEL_EXISTS, GS_SEL_DOESNOTEXIST, GS_SEL_GT, GS_SEL_LT};
    for (size_t i = 0; i < 6; i++) {
        enum gs_sel_op op = GS_SEL_LT;
        assert_int_equal(gs_sel_op_parse(names[i], &op), 0);
        assert_int_equal(op, ops[i]);
        assert_string_equal(gs_sel_op_name(ops[i]), names[i]);
    }
    enum gs_sel_op op;
    const char *bad[] = {"in", "IN", "", "Exist", "notin", "Gt ", "=", "!=", "gt"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_int_equal(gs_sel_op_parse(bad[i], &op), GS_EINVAL);
    assert_int_equal(gs_sel_op_parse(NULL, &op), GS_EINVAL);
}

static void test_sel_ops(void **st)
{
    (void)st;
    const char *kv[] = {"gpu", "a100", "count", "8", "neg", "-3", "text", "eight", "empty", "", NULL};
    struct gs_labels l = labels_of(kv);

    assert_true(req_match_free(req("gpu", GS_SEL_IN, "v100", "a100"), &l));
    assert_false(req_match_free(req("gpu", GS_SEL_IN, "v100", NULL), &l));
    assert_false(req_match_free(req("absent", GS_SEL_IN, "a100", NULL), &l));
    assert_false(req_match_free(req("gpu", GS_SEL_IN, NULL, NULL), &l));
    assert_true(req_match_free(req("empty", GS_SEL_IN, "", NULL), &l));
    assert_false(req_match_free(req("absent", GS_SEL_IN, "", NULL), &l));

    assert_false(req_match_free(req("gpu", GS_SEL_NOTIN, "v100", "a100"), &l));
    assert_true(req_match_free(req("gpu", GS_SEL_NOTIN, "v100", NULL), &l));
    assert_true(req_match_free(req("absent", GS_SEL_NOTIN, "a100", NULL), &l));
    assert_false(req_match_free(req("empty", GS_SEL_NOTIN, "", NULL), &l));

    assert_true(req_match_free(req("gpu", GS_SEL_EXISTS, NULL, NULL), &l));
    assert_true(req_match_free(req("empty", GS_SEL_EXISTS, NULL, NULL), &l));
    assert_false(req_match_free(req("absent", GS_SEL_EXISTS, NULL, NULL), &l));
    assert_false(req_match_free(req("gpu", GS_SEL_DOESNOTEXIST, NULL, NULL), &l));
    assert_true(req_match_free(req("absent", GS_SEL_DOESNOTEXIST, NULL, NULL), &l));

    assert_true(req_match_free(req("count", GS_SEL_GT, "4", NULL), &l));
    assert_false(req_match_free(req("count", GS_SEL_GT, "8", NULL), &l));
    assert_true(req_match_free(req("count", GS_SEL_LT, "+9", NULL), &l));
    assert_false(req_match_free(req("count", GS_SEL_LT, "8", NULL), &l));
    assert_true(req_match_free(req("neg", GS_SEL_LT, "-2", NULL), &l));
    assert_true(req_match_free(req("neg", GS_SEL_GT, "-9223372036854775808", NULL), &l));
    assert_false(req_match_free(req("absent", GS_SEL_GT, "1", NULL), &l));
    assert_false(req_match_free(req("absent", GS_SEL_LT, "1", NULL), &l));
    /* non-numeric on either side, or not exactly one value: no match either way */
    assert_false(req_match_free(req("text", GS_SEL_GT, "1", NULL), &l));
    assert_false(req_match_free(req("text", GS_SEL_LT, "1", NULL), &l));
    assert_false(req_match_free(req("empty", GS_SEL_LT, "1", NULL), &l));
    assert_false(req_match_free(req("count", GS_SEL_GT, "four", NULL), &l));
    assert_false(req_match_free(req("count", GS_SEL_LT, "1e3", NULL), &l));
    assert_false(req_match_free(req("count", GS_SEL_LT, " 9", NULL), &l));
    assert_false(req_match_free(req("count", GS_SEL_LT, "9223372036854775808", NULL), &l));
    assert_false(req_match_free(req("count", GS_SEL_GT, "1", "2"), &l));
    assert_false(req_match_free(req("count", GS_SEL_GT, NULL, NULL), &l));
    gs_labels_free(&l);
}

static void test_selector_and(void **st)
{
    (void)st;
    const char *kv[] = {"gpu", "a100", "zone", "z1", NULL};
    struct gs_labels l = labels_of(kv), none = {0};
    struct gs_selector empty = {0};
    assert_true(gs_selector_matches(&empty, &l));
    assert_true(gs_selector_matches(&empty, &none));

    struct gs_selector s = {0};
    sel_add(&s, req("gpu", GS_SEL_IN, "a100", NULL));
    assert_true(gs_selector_matches(&s, &l));
    sel_add(&s, req("zone", GS_SEL_NOTIN, "z2", NULL));
    assert_true(gs_selector_matches(&s, &l));
    sel_add(&s, req("spot", GS_SEL_DOESNOTEXIST, NULL, NULL));
    assert_true(gs_selector_matches(&s, &l));
    assert_false(gs_selector_matches(&s, &none)); /* gpu In fails when absent */
    sel_add(&s, req("zone", GS_SEL_IN, "z2", NULL));
    assert_false(gs_selector_matches(&s, &l));
    gs_selector_free(&s);
    assert_int_equal(s.n, 0);
    assert_null(s.reqs);
    gs_labels_free(&l);
}

/*--- Node affinity ---*/

static struct gs_node_selector_term term_expr(struct gs_sel_req r)
{
    struct gs_node_selector_term t = {0};
    sel_add(&t.match_expressions, r);
    return t;
}

static struct gs_node_selector_term term_field(struct gs_sel_req r)
{
    struct gs_node_selector_term t = {0};
    sel_add(&t.match_fields, r);
    return t;
}

static void add_required(struct gs_node_affinity *a, struct gs_node_selector_term t)
{
    a->has_required = true;
    a->required = realloc(a->required, (a->nrequired + 1) * sizeof *a->required);
    assert_non_null(a->required);
    a->required[a->nrequired++] = t;
}

static void add_preferred(struct gs_node_affinity *a, int32_t w, struct gs_node_selector_term t)
{
    a->preferred = realloc(a->preferred, (a->npreferred + 1) * sizeof *a->preferred);
    assert_non_null(a->preferred);
    a->preferred[a->npreferred++] = (struct gs_preferred_term){.weight = w, .term = t};
}

static void test_node_term(void **st)
{
    (void)st;
    const char *kv[] = {"gpu", "a100", "zone", "z1", NULL};
    struct gs_labels l = labels_of(kv);
    struct gs_node_selector_term empty = {0};
    assert_false(gs_node_term_matches(&empty, &l, "n1"));

    struct gs_node_selector_term t = term_expr(req("gpu", GS_SEL_IN, "a100", NULL));
    assert_true(gs_node_term_matches(&t, &l, "n1"));
    sel_add(&t.match_expressions, req("zone", GS_SEL_IN, "z2", NULL));
    assert_false(gs_node_term_matches(&t, &l, "n1")); /* AND inside a term */
    gs_selector_free(&t.match_expressions);

    /* matchFields on metadata.name: In / NotIn with one value */
    t = term_field(req("metadata.name", GS_SEL_IN, "n1", NULL));
    assert_true(gs_node_term_matches(&t, &l, "n1"));
    assert_false(gs_node_term_matches(&t, &l, "n2"));
    sel_add(&t.match_expressions, req("gpu", GS_SEL_EXISTS, NULL, NULL));
    assert_true(gs_node_term_matches(&t, &l, "n1"));
    assert_false(gs_node_term_matches(&t, &(struct gs_labels){0}, "n1")); /* both parts must hold */
    gs_selector_free(&t.match_expressions);
    gs_selector_free(&t.match_fields);

    t = term_field(req("metadata.name", GS_SEL_NOTIN, "n1", NULL));
    assert_false(gs_node_term_matches(&t, &l, "n1"));
    assert_true(gs_node_term_matches(&t, &l, "n2"));
    gs_selector_free(&t.match_fields);

    /* other shapes do not parse in Kubernetes, so the term never matches */
    const struct gs_sel_req badf[] = {
        req("metadata.name", GS_SEL_IN, "n1", "n2"),
        req("metadata.name", GS_SEL_IN, NULL, NULL),
        req("metadata.name", GS_SEL_EXISTS, NULL, NULL),
        req("metadata.name", GS_SEL_GT, "1", NULL),
    };
    for (size_t i = 0; i < sizeof badf / sizeof badf[0]; i++) {
        t = term_field(badf[i]);
        assert_false(gs_node_term_matches(&t, &l, "n1"));
        assert_false(gs_node_term_matches(&t, &l, "n2"));
        gs_selector_free(&t.match_fields);
    }
    /* unknown fields read as "" */
    t = term_field(req("metadata.namespace", GS_SEL_IN, "n1", NULL));
    assert_false(gs_node_term_matches(&t, &l, "n1"));
    gs_selector_free(&t.match_fields);
    t = term_field(req("spec.unschedulable", GS_SEL_NOTIN, "true", NULL));
    assert_true(gs_node_term_matches(&t, &l, "n1"));
    gs_selector_free(&t.match_fields);
    gs_labels_free(&l);
}

static void test_required_affinity(void **st)
{
    (void)st;
    const char *kv[] = {"gpu", "a100", "zone", "z1", NULL};
    struct gs_labels l = labels_of(kv);
    struct gs_node_affinity a = {0};
    assert_true(gs_node_affinity_required_matches(&a, &l, "n1")); /* absent: anything goes */
    assert_true(gs_node_affinity_required_matches(NULL, &l, "n1"));
    a.has_required = true;
    assert_false(gs_node_affinity_required_matches(&a, &l, "n1")); /* present with no terms */

    add_required(&a, (struct gs_node_selector_term){0});
    assert_false(gs_node_affinity_required_matches(&a, &l, "n1")); /* only an empty term */
    add_required(&a, term_expr(req("gpu", GS_SEL_IN, "h100", NULL)));
    assert_false(gs_node_affinity_required_matches(&a, &l, "n1"));
    add_required(&a, term_field(req("metadata.name", GS_SEL_IN, "n7", NULL)));
    assert_false(gs_node_affinity_required_matches(&a, &l, "n1"));
    assert_true(gs_node_affinity_required_matches(&a, &l, "n7")); /* OR across terms */
    add_required(&a, term_expr(req("zone", GS_SEL_IN, "z1", NULL)));
    assert_true(gs_node_affinity_required_matches(&a, &l, "n1"));
    gs_node_affinity_free(&a);
    assert_false(a.has_required);
    assert_int_equal(a.nrequired, 0);
    assert_null(a.required);
    gs_labels_free(&l);
}

static void test_preferred_affinity(void **st)
{
    (void)st;
    const char *kv[] = {"gpu", "a100", "zone", "z1", "tier", "3", NULL};
    struct gs_labels l = labels_of(kv);
    struct gs_node_affinity a = {0};
    assert_int_equal(gs_node_affinity_preferred_score(&a, &l, "n1"), 0);
    add_preferred(&a, 10, term_expr(req("gpu", GS_SEL_IN, "a100", NULL)));
    add_preferred(&a, 20, term_expr(req("zone", GS_SEL_IN, "z2", NULL)));
    add_preferred(&a, 40, term_expr(req("tier", GS_SEL_GT, "2", NULL)));
    add_preferred(&a, 80, (struct gs_node_selector_term){0}); /* empty: never counts */
    add_preferred(&a, 100, term_field(req("metadata.name", GS_SEL_IN, "n1", NULL)));
    assert_int_equal(gs_node_affinity_preferred_score(&a, &l, "n1"), 150);
    assert_int_equal(gs_node_affinity_preferred_score(&a, &l, "n2"), 50);
    struct gs_labels none = {0};
    assert_int_equal(gs_node_affinity_preferred_score(&a, &none, "n2"), 0);
    /* preferred terms do not affect the required verdict */
    assert_true(gs_node_affinity_required_matches(&a, &none, "n2"));
    gs_node_affinity_free(&a);
    assert_null(a.preferred);
    gs_labels_free(&l);
}

/*--- Taints and tolerations ---*/

static void test_effect_names(void **st)
{
    (void)st;
    enum gs_taint_effect e = GS_EFFECT_ANY;
    assert_int_equal(gs_taint_effect_parse("NoSchedule", false, &e), 0);
    assert_int_equal(e, GS_EFFECT_NOSCHEDULE);
    assert_int_equal(gs_taint_effect_parse("PreferNoSchedule", false, &e), 0);
    assert_int_equal(e, GS_EFFECT_PREFERNOSCHEDULE);
    assert_int_equal(gs_taint_effect_parse("NoExecute", false, &e), 0);
    assert_int_equal(e, GS_EFFECT_NOEXECUTE);
    assert_int_equal(gs_taint_effect_parse("", false, &e), GS_EINVAL);
    assert_int_equal(e, GS_EFFECT_NOEXECUTE);
    assert_int_equal(gs_taint_effect_parse("", true, &e), 0);
    assert_int_equal(e, GS_EFFECT_ANY);
    assert_int_equal(gs_taint_effect_parse("noschedule", true, &e), GS_EINVAL);
    assert_int_equal(gs_taint_effect_parse("NoSchedule ", true, &e), GS_EINVAL);
    assert_int_equal(gs_taint_effect_parse(NULL, true, &e), GS_EINVAL);
    assert_string_equal(gs_taint_effect_name(GS_EFFECT_NOSCHEDULE), "NoSchedule");
    assert_string_equal(gs_taint_effect_name(GS_EFFECT_PREFERNOSCHEDULE), "PreferNoSchedule");
    assert_string_equal(gs_taint_effect_name(GS_EFFECT_NOEXECUTE), "NoExecute");
    assert_string_equal(gs_taint_effect_name(GS_EFFECT_ANY), "");
}

static struct gs_taint taint(const char *k, const char *v, enum gs_taint_effect e)
{
    return (struct gs_taint){.key = (char *)k, .value = (char *)v, .effect = e};
}

static struct gs_toleration tol(const char *k, enum gs_tol_op op, const char *v, enum gs_taint_effect e)
{
    return (struct gs_toleration){.key = (char *)k, .op = op, .value = (char *)v, .effect = e};
}

/* Every combination of operator x key (same, other, empty) x effect (any,
 * same, other) x value (same, other), against ToleratesTaint's rules. */
static void test_toleration_matrix(void **st)
{
    (void)st;
    const struct gs_taint t = taint("gpu", "true", GS_EFFECT_NOSCHEDULE);
    const char *keys[] = {"gpu", "other", "", NULL};
    const enum gs_taint_effect effects[] = {GS_EFFECT_ANY, GS_EFFECT_NOSCHEDULE, GS_EFFECT_NOEXECUTE};
    const char *values[] = {"true", "false", NULL};
    int tolerated = 0;
    for (int op = GS_TOL_EQUAL; op <= GS_TOL_EXISTS; op++)
        for (size_t k = 0; k < 4; k++)
            for (size_t e = 0; e < 3; e++)
                for (size_t v = 0; v < 3; v++) {
                    struct gs_toleration o = tol(keys[k], (enum gs_tol_op)op, values[v], effects[e]);
                    bool key_ok = !keys[k] || !*keys[k] || strcmp(keys[k], "gpu") == 0;
                    bool eff_ok = effects[e] == GS_EFFECT_ANY || effects[e] == GS_EFFECT_NOSCHEDULE;
                    bool val_ok = op == GS_TOL_EXISTS || (values[v] && strcmp(values[v], "true") == 0);
                    bool want = key_ok && eff_ok && val_ok;
                    if (gs_toleration_tolerates(&o, &t) != want)
                        fail_msg("op %d key %s effect %d value %s: want %d", op, keys[k] ? keys[k] : "(null)",
                                 (int)effects[e], values[v] ? values[v] : "(null)", want);
                    tolerated += want;
                }
    assert_int_equal(tolerated, 2 * 3 * 1 + 3 * 2 * 3); /* Equal: 3 keys x 2 effects x 1 value; Exists: all values */

    /* taints without a value: NULL and "" are the same */
    const struct gs_taint nv = taint("dedicated", NULL, GS_EFFECT_NOEXECUTE);
    struct gs_toleration eq_empty = tol("dedicated", GS_TOL_EQUAL, "", GS_EFFECT_ANY);
    struct gs_toleration eq_null = tol("dedicated", GS_TOL_EQUAL, NULL, GS_EFFECT_NOEXECUTE);
    struct gs_toleration eq_x = tol("dedicated", GS_TOL_EQUAL, "x", GS_EFFECT_NOEXECUTE);
    struct gs_toleration all = tol(NULL, GS_TOL_EXISTS, NULL, GS_EFFECT_ANY);
    struct gs_toleration all_ns = tol("", GS_TOL_EXISTS, NULL, GS_EFFECT_NOSCHEDULE);
    assert_true(gs_toleration_tolerates(&eq_empty, &nv));
    assert_true(gs_toleration_tolerates(&eq_null, &nv));
    assert_false(gs_toleration_tolerates(&eq_x, &nv));
    assert_true(gs_toleration_tolerates(&all, &nv));
    assert_false(gs_toleration_tolerates(&all_ns, &nv)); /* every key, but only NoSchedule */
    assert_true(gs_toleration_tolerates(&all_ns, &t));
}

#define MASK(e) (1u << (e))
#define HARD (MASK(GS_EFFECT_NOSCHEDULE) | MASK(GS_EFFECT_NOEXECUTE))

static void test_untolerated(void **st)
{
    (void)st;
    const struct gs_taint taints[] = {
        taint("soft", "", GS_EFFECT_PREFERNOSCHEDULE),
        taint("gpu", "true", GS_EFFECT_NOSCHEDULE),
        taint("maint", "now", GS_EFFECT_NOEXECUTE),
        taint("soft2", "x", GS_EFFECT_PREFERNOSCHEDULE),
    };
    assert_null(gs_find_untolerated_taint(NULL, 0, NULL, 0, HARD));
    assert_ptr_equal(gs_find_untolerated_taint(taints, 4, NULL, 0, HARD), &taints[1]);
    assert_ptr_equal(gs_find_untolerated_taint(taints, 4, NULL, 0, MASK(GS_EFFECT_NOEXECUTE)), &taints[2]);
    assert_ptr_equal(gs_find_untolerated_taint(taints, 4, NULL, 0, MASK(GS_EFFECT_PREFERNOSCHEDULE)), &taints[0]);
    assert_null(gs_find_untolerated_taint(taints, 4, NULL, 0, 0));

    struct gs_toleration tols[] = {
        tol("gpu", GS_TOL_EXISTS, NULL, GS_EFFECT_ANY),
        tol("maint", GS_TOL_EQUAL, "later", GS_EFFECT_NOEXECUTE),
    };
    assert_ptr_equal(gs_find_untolerated_taint(taints, 4, tols, 2, HARD), &taints[2]); /* value differs */
    tols[1].value = "now";
    assert_null(gs_find_untolerated_taint(taints, 4, tols, 2, HARD));
    assert_ptr_equal(gs_find_untolerated_taint(taints, 4, tols, 2, HARD | MASK(GS_EFFECT_PREFERNOSCHEDULE)),
                     &taints[0]);
    struct gs_toleration everything = tol(NULL, GS_TOL_EXISTS, NULL, GS_EFFECT_ANY);
    assert_null(gs_find_untolerated_taint(taints, 4, &everything, 1, ~0u));
    struct gs_toleration noexec_all = tol("", GS_TOL_EXISTS, NULL, GS_EFFECT_NOEXECUTE);
    assert_ptr_equal(gs_find_untolerated_taint(taints, 4, &noexec_all, 1, HARD), &taints[1]);
    assert_null(gs_find_untolerated_taint(taints, 4, &noexec_all, 1, MASK(GS_EFFECT_NOEXECUTE)));
}

static void test_count_prefer(void **st)
{
    (void)st;
    const struct gs_taint taints[] = {
        taint("a", "1", GS_EFFECT_PREFERNOSCHEDULE), taint("b", "1", GS_EFFECT_PREFERNOSCHEDULE),
        taint("c", "1", GS_EFFECT_NOSCHEDULE),       taint("d", NULL, GS_EFFECT_PREFERNOSCHEDULE),
    };
    assert_int_equal(gs_count_intolerable_prefer(taints, 4, NULL, 0), 3);
    assert_int_equal(gs_count_intolerable_prefer(NULL, 0, NULL, 0), 0);
    struct gs_toleration tols[] = {
        tol("a", GS_TOL_EQUAL, "1", GS_EFFECT_PREFERNOSCHEDULE),
        tol("b", GS_TOL_EXISTS, NULL, GS_EFFECT_NOSCHEDULE), /* wrong effect: does not count */
        tol("c", GS_TOL_EXISTS, NULL, GS_EFFECT_ANY),
    };
    assert_int_equal(gs_count_intolerable_prefer(taints, 4, tols, 3), 2);
    tols[1].effect = GS_EFFECT_ANY;
    assert_int_equal(gs_count_intolerable_prefer(taints, 4, tols, 3), 1);
    struct gs_toleration d = tol("d", GS_TOL_EQUAL, "", GS_EFFECT_PREFERNOSCHEDULE);
    assert_int_equal(gs_count_intolerable_prefer(&taints[3], 1, &d, 1), 0);
}

static void test_free_functions(void **st)
{
    (void)st;
    struct gs_taint t = {.key = strdup("k"), .value = strdup("v"), .effect = GS_EFFECT_NOEXECUTE};
    gs_taint_free(&t);
    assert_null(t.key);
    assert_null(t.value);
    gs_taint_free(&t);
    struct gs_toleration o = {.key = strdup("k"), .value = NULL, .has_seconds = true, .toleration_seconds = 30};
    gs_toleration_free(&o);
    assert_null(o.key);
    assert_false(o.has_seconds);
    gs_toleration_free(&o);
    gs_taint_free(NULL);
    gs_toleration_free(NULL);
    gs_selector_free(NULL);
    gs_labels_free(NULL);
    gs_node_affinity_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels_set_get),
        cmocka_unit_test(test_labels_many),
        cmocka_unit_test(test_label_keys),
        cmocka_unit_test(test_label_values),
        cmocka_unit_test(test_sel_op_names),
        cmocka_unit_test(test_sel_ops),
        cmocka_unit_test(test_selector_and),
        cmocka_unit_test(test_node_term),
        cmocka_unit_test(test_required_affinity),
        cmocka_unit_test(test_preferred_affinity),
        cmocka_unit_test(test_effect_names),
        cmocka_unit_test(test_toleration_matrix),
        cmocka_unit_test(test_untolerated),
        cmocka_unit_test(test_count_prefer),
        cmocka_unit_test(test_free_functions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
