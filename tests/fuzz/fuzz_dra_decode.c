/*
 * fuzz_dra_decode.c - the resource.k8s.io decoders (core/dra.h) and the
 * allocator on what they decode.
 *
 * Any bytes that parse as JSON go through every decoder. Each must either
 * succeed with no problem reported, or fail with at least one problem, each
 * with a message; a decoded ResourceSlice is then copied and fed to a pool
 * view, a decoded claim is allocated on every node of it (with a taint rule
 * and a class decoded from the same input when they decode), and an
 * allocation's status must decode back as the same allocation.
 */
#include "core/dra.h"
#include "sched/dra_alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int rc, const struct gs_diags *d)
{
    if ((rc == 0) != (d->n == 0)) abort();
    for (size_t i = 0; i < d->n; i++)
        if (!d->v[i].msg || !*d->v[i].msg || !d->v[i].path) abort();
}

static void try_claim(struct gs_dra_pool_view *v, const struct gs_dra_claim *c, const char *node)
{
    struct gs_dra_result *res = NULL;
    size_t nres = 0;
    struct gs_dra_why why;
    int rc = gs_dra_allocate(v, node, &c, 1, &res, &nres, &why);
    if (rc) {
        if (res || !why.what[0]) abort();
        return;
    }
    json_t *st = gs_dra_allocation_json(c, res, nres, NULL, 0, node, 0);
    if (!st) abort();
    json_t *doc = json_pack("{s:{s:s, s:s}, s:{}, s:{s:o}}", "metadata", "name", "x", "uid", "u", "spec", "status",
                            "allocation", st);
    struct gs_diags d = {0};
    struct gs_dra_claim back;
    if (!doc || gs_dra_claim_decode(doc, &back, &d)) abort();
    if (back.nresults != nres || !back.alloc_node || strcmp(back.alloc_node, node)) abort();
    for (size_t i = 0; i < nres; i++)
        if (strcmp(back.results[i].device, res[i].device) || strcmp(back.results[i].request, res[i].request)) abort();
    gs_dra_claim_free(&back);
    json_decref(doc);
    if (gs_dra_view_hold(v, "u", res, nres)) abort();
    gs_dra_view_release(v, "u");
    gs_dra_results_free(res, nres);
}

/* Decodes one document with every decoder; view-side kinds go into v. */
static void feed(struct gs_dra_pool_view *v, const json_t *j)
{
    struct gs_diags d = {0};
    struct gs_dra_slice s;
    int rc = gs_dra_slice_decode(j, &s, &d);
    check(rc, &d);
    gs_diags_free(&d);
    if (!rc) {
        struct gs_dra_slice c;
        if (gs_dra_slice_copy(&c, &s)) abort();
        gs_dra_slice_free(&s);
        if (gs_dra_view_set_slice(v, &c)) abort();
        gs_dra_slice_free(&c);
    }
    struct gs_dra_class k;
    rc = gs_dra_class_decode(j, &k, &d);
    check(rc, &d);
    gs_diags_free(&d);
    if (!rc) {
        if (gs_dra_view_set_class(v, &k)) abort();
        gs_dra_class_free(&k);
    }
    struct gs_dra_taint_rule r;
    rc = gs_dra_taint_rule_decode(j, &r, &d);
    check(rc, &d);
    gs_diags_free(&d);
    if (!rc) {
        if (gs_dra_view_set_taint_rule(v, &r)) abort();
        gs_dra_taint_rule_free(&r);
    }
}

/* Decodes claims and templates and allocates them against v. */
static void use(struct gs_dra_pool_view *v, const json_t *j)
{
    struct gs_diags d = {0};
    struct gs_dra_claim_spec ts;
    int rc = gs_dra_template_decode(j, &ts, &d);
    if (rc != 0 && d.n == 0) abort();
    gs_diags_free(&d);
    if (!rc) {
        struct gs_dra_why why;
        (void)gs_dra_feasible(v, &ts, &why);
        gs_dra_claim_spec_free(&ts);
    }
    struct gs_dra_claim c;
    rc = gs_dra_claim_decode(j, &c, &d);
    check(rc, &d);
    gs_diags_free(&d);
    if (!rc) {
        try_claim(v, &c, "n1");
        try_claim(v, &c, "n2");
        struct gs_dra_why why;
        (void)gs_dra_feasible(v, &c.spec, &why);
        gs_dra_claim_free(&c);
    }
}

/* One document, or an array of them (slices, classes and rules first). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!j) return 0;
    struct gs_dra_pool_view *v = gs_dra_view_new();
    if (!v) abort();
    size_t n = json_is_array(j) ? json_array_size(j) : 1;
    for (size_t i = 0; i < n && i < 64; i++) feed(v, json_is_array(j) ? json_array_get(j, i) : j);
    for (size_t i = 0; i < n && i < 64; i++) use(v, json_is_array(j) ? json_array_get(j, i) : j);
    if (json_is_array(j)) use(v, j); /* an array is a bad document of every kind */
    gs_dra_view_free(v);
    json_decref(j);
    return 0;
}
