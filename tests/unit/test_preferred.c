/*
 * test_preferred.c - GetPreferredAllocation's choice: NVLink islands before
 * NUMA nodes, best fit among islands, must-include IDs, replicas spread.
 */
#include "core/error.h"
#include "node/preferred.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

/* 8 GPUs, NUMA 0 = GPUs 0-3, NUMA 1 = 4-7, and NVLink islands that cross
 * NUMA: {0,1,4,5} and {2,3,6,7}. */
static void crossed(struct gs_node_gpus *g)
{
    gs_node_gpus_mock(g, 8, 2, 0, 1);
    static const int isl[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) g->nvlink[i][j] = i != j && isl[i] == isl[j] ? 6 : 0;
    gs_node_gpus_finish(g);
}

static int ids(const struct gs_node_gpus *g, const int *which, int n, char buf[][GS_NODE_ID_MAX], const char **v)
{
    for (int i = 0; i < n; i++) {
        gs_node_gpus_id(g, which[i], buf[i], GS_NODE_ID_MAX);
        v[i] = buf[i];
    }
    return n;
}

/* The GPU slots picked, as a bit set. */
static unsigned picked(const struct gs_node_gpus *g, const char **avail, const int *pick, int n)
{
    unsigned set = 0;
    for (int i = 0; i < n; i++) set |= 1u << gs_node_gpus_find(g, avail[pick[i]], NULL);
    return set;
}

static void island_beats_numa(void **state)
{
    (void)state;
    struct gs_node_gpus g;
    crossed(&g);
    assert_int_equal(g.gpu[4].island, g.gpu[0].island);
    char buf[8][GS_NODE_ID_MAX];
    const char *avail[8];
    int all[8] = {0, 1, 2, 3, 4, 5, 6, 7}, pick[8];
    ids(&g, all, 8, buf, avail);
    int n = gs_preferred(&g, avail, 8, NULL, 0, 4, pick);
    assert_int_equal(n, 4);
    assert_int_equal(picked(&g, avail, pick, n), 0x33); /* {0,1,4,5}: one island across NUMA */
    n = gs_preferred(&g, avail, 8, NULL, 0, 2, pick);
    assert_int_equal(picked(&g, avail, pick, n), 0x03); /* same island and same NUMA */
    n = gs_preferred(&g, avail, 8, NULL, 0, 8, pick);
    assert_int_equal(n, 8);
}

static void best_fit_and_must(void **state)
{
    (void)state;
    struct gs_node_gpus g;
    gs_node_gpus_mock(&g, 8, 2, 4, 1); /* islands {0-3}, {4-7} */
    char buf[8][GS_NODE_ID_MAX];
    const char *avail[8];
    int free6[6] = {2, 3, 4, 5, 6, 7}, pick[8];
    int n = ids(&g, free6, 6, buf, avail);
    /* Island 0 has two free, island 1 four: two GPUs go to island 0. */
    int k = gs_preferred(&g, avail, (size_t)n, NULL, 0, 2, pick);
    assert_int_equal(picked(&g, avail, pick, k), 0x0c);
    /* ...unless a must-include GPU sits in island 1. */
    const char *must[1] = {avail[3]}; /* GPU 5 */
    k = gs_preferred(&g, avail, (size_t)n, must, 1, 2, pick);
    assert_int_equal(k, 2);
    unsigned set = picked(&g, avail, pick, k);
    assert_true(set & 0x20);
    assert_int_equal(set & 0x0f, 0);
    /* Four: the whole free island 1. */
    k = gs_preferred(&g, avail, (size_t)n, NULL, 0, 4, pick);
    assert_int_equal(picked(&g, avail, pick, k), 0xf0);
    /* Must-include IDs alone when they fill the size. */
    k = gs_preferred(&g, avail, (size_t)n, must, 1, 1, pick);
    assert_int_equal(k, 1);
    assert_string_equal(avail[pick[0]], must[0]);
    assert_int_equal(gs_preferred(&g, avail, (size_t)n, NULL, 0, 0, pick), GS_EINVAL);
}

static void unknown_ids_ignored(void **state)
{
    (void)state;
    struct gs_node_gpus g;
    gs_node_gpus_mock(&g, 2, 1, 2, 1);
    const char *avail[3] = {"GPU-nope", g.gpu[1].uuid, g.gpu[0].uuid};
    int pick[3];
    int k = gs_preferred(&g, avail, 3, NULL, 0, 3, pick);
    assert_int_equal(k, 2);
    assert_int_equal(pick[0], 1);
    assert_int_equal(pick[1], 2);
}

static void replicas_spread(void **state)
{
    (void)state;
    struct gs_node_gpus g;
    gs_node_gpus_mock(&g, 2, 1, 2, 4);
    char buf[8][GS_NODE_ID_MAX];
    const char *avail[8];
    int all[8] = {0, 1, 2, 3, 4, 5, 6, 7}, pick[8];
    ids(&g, all, 8, buf, avail);
    int k = gs_preferred(&g, avail, 8, NULL, 0, 2, pick);
    assert_int_equal(k, 2);
    assert_int_not_equal(gs_node_gpus_find(&g, avail[pick[0]], NULL), gs_node_gpus_find(&g, avail[pick[1]], NULL));
    /* GPU 0 already has three replicas taken: the next one goes to GPU 1. */
    int rest[5] = {3, 4, 5, 6, 7};
    ids(&g, rest, 5, buf, avail);
    k = gs_preferred(&g, avail, 5, NULL, 0, 1, pick);
    assert_int_equal(gs_node_gpus_find(&g, avail[pick[0]], NULL), 1);
}

static void replica_ids(void **state)
{
    (void)state;
    struct gs_node_gpus g;
    gs_node_gpus_mock(&g, 2, 1, 0, 3);
    char id[GS_NODE_ID_MAX];
    assert_int_equal(gs_node_gpus_ndev(&g), 6);
    assert_int_equal(gs_node_gpus_id(&g, 4, id, sizeof id), 1);
    char want[GS_NODE_ID_MAX];
    snprintf(want, sizeof want, "%s::1", g.gpu[1].uuid);
    assert_string_equal(id, want);
    int rep = -1;
    assert_int_equal(gs_node_gpus_find(&g, id, &rep), 1);
    assert_int_equal(rep, 1);
    snprintf(want, sizeof want, "%s::3", g.gpu[1].uuid);
    assert_int_equal(gs_node_gpus_find(&g, want, NULL), -1);
    assert_int_equal(gs_node_gpus_find(&g, g.gpu[1].uuid, NULL), -1); /* replicas need the suffix */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(island_beats_numa), cmocka_unit_test(best_fit_and_must),
        cmocka_unit_test(unknown_ids_ignored), cmocka_unit_test(replicas_spread),
        cmocka_unit_test(replica_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
