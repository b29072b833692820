/*
 * fuzz_pdb_budget.c - fuzz target for the scheduler's PodDisruptionBudget
 * decoder (core/pdb_budget.c) and the cache feed it serves: any JSON either
 * decodes or fails with a described problem; a decoded budget has a name, a
 * namespace and a non-negative allowance, answers covers() without
 * crashing, and goes into a cache and out again without leaking.
 */
#include "core/codec.h"
#include "core/pdb_budget.h"
#include "sched/cache_feed.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = NULL;
    struct gs_diags d = {0};
    if (gs_json_decode((const char *)data, size, &doc, &d) != 0) {
        gs_diags_free(&d);
        return 0;
    }
    struct gs_pdb_budget b;
    int rc = gs_pdb_budget_decode(doc, &b, &d);
    if (rc == GS_EINVAL && !d.n) abort(); /* a refusal always says why */
    if (rc == 0) {
        if (!b.name || !b.ns || b.disruptions_allowed < 0) abort();
        struct gs_labels l = {0};
        gs_labels_set(&l, "app", "x");
        (void)gs_pdb_budget_covers(&b, b.ns, &l);
        (void)gs_pdb_budget_disrupted(&b, "x");
        gs_labels_free(&l);
        gs_pdb_budget_clear(&b);
    }
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    if (c) {
        int fr = gs_cache_feed(c, "poddisruptionbudgets.policy/default/p", doc);
        size_t n = 0;
        gs_cache_pdbs(c, &n);
        if ((fr == 0) != (n == 1)) abort();
        gs_cache_feed(c, "namespaces/default", doc);
        gs_cache_feed(c, "poddisruptionbudgets.policy/default/p", NULL);
        gs_cache_pdbs(c, &n);
        if (n) abort();
        gs_cache_free(c);
    }
    json_decref(doc);
    gs_diags_free(&d);
    return 0;
}
