/*
 * admission_fixture.h - an admission instance on a small hand-made cluster,
 * shared by the admission and reclaim tests: a simulated clock, a cache of
 * identical H100 nodes, the queue tree from a YAML text and the pods the
 * test created (freed with the rest). Include after <cmocka.h>: the helpers
 * assert. Static functions: each test executable includes its own copy.
 */
#ifndef GS_TEST_ADMISSION_FIXTURE_H
#define GS_TEST_ADMISSION_FIXTURE_H

#include "admission_fuzz.h"
#include "plugins/recorder.h"

#include <stdio.h>
#include <string.h>

struct adm_env {
    struct gs_clock clk;
    struct gs_cache *cache;
    struct gs_queue_tree t;
    struct gs_admission *a;
    struct gs_pod *pods[64];
    int npods;
    struct gs_admission_result res;
};

/* nnodes nodes named node0.. with ngpus GPUs each, the queues in yaml, admission with options o. */
__attribute__((unused)) static void adm_env_init(struct adm_env *e, int nnodes, int ngpus, const char *yaml,
                                                 const struct gs_admission_opts *o)
{
    memset(e, 0, sizeof *e);
    gs_clock_init_sim(&e->clk, 0);
    e->cache = gs_cache_new(&e->clk);
    for (int i = 0; i < nnodes; i++) {
        char name[16];
        snprintf(name, sizeof name, "node%d", i);
        struct gs_node_spec s = {.name = name, .cpu_milli = 64000, .mem_bytes = 1LL << 38, .gpu_model = "H100",
                                 .ngpus = ngpus, .gpu_mem_mib = 81920};
        assert_true(gs_cache_add_node_spec(e->cache, &s) >= 0);
    }
    gs_queue_tree_init(&e->t);
    struct gs_diags d = {0};
    struct gs_docs docs = {0};
    assert_int_equal(gs_decode_stream(yaml, strlen(yaml), &docs, &d, NULL), 0);
    for (size_t i = 0; i < docs.n; i++) {
        struct gs_object *obj = NULL;
        assert_int_equal(gs_object_decode(docs.docs[i], &obj, &d), 0);
        assert_int_equal(gs_queue_tree_add_object(&e->t, obj, &d), 0);
        gs_object_free(obj);
    }
    gs_docs_free(&docs);
    assert_int_equal(gs_queue_tree_finalize(&e->t, &d), 0);
    assert_int_equal(gs_admission_new(&e->t, e->cache, &e->clk, o, &e->a, &d), 0);
    gs_diags_free(&d);
}

__attribute__((unused)) static void adm_env_free(struct adm_env *e)
{
    gs_admission_free(e->a);
    gs_cache_free(e->cache);
    gs_queue_tree_free(&e->t);
    for (int i = 0; i < e->npods; i++) test_pod_free(e->pods[i]);
}

#endif
