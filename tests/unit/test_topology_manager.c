/*
 * test_topology_manager.c - hint merging, hint generation and pod admission
 * of the topology manager, in the shape of kubelet's policy test tables.
 * Two NUMA nodes unless said otherwise: mask 0x1 = node 0, 0x2 = node 1.
 */
#include "core/error.h"
#include "node/topology.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#define H(m, p) {(m), (p)}
#define NIL {-1, NULL}

struct merge_case {
    const char *name;
    int nprov;
    struct gs_topo_hints prov[3];
    struct gs_topo_hint want[4];  /* per policy: none, best-effort, restricted, single-numa-node */
    bool admit[4];
};

static const struct gs_topo_hint p01[] = {H(1, true)};
static const struct gs_topo_hint p10[] = {H(2, true)};
static const struct gs_topo_hint n11[] = {H(3, false)};
static const struct gs_topo_hint p01_p10[] = {H(1, true), H(2, true)};
static const struct gs_topo_hint p01_p10_n11[] = {H(1, true), H(2, true), H(3, false)};
static const struct gs_topo_hint p01_p11[] = {H(1, true), H(3, true)};
static const struct gs_topo_hint n01_p11[] = {H(1, false), H(3, true)};
static const struct gs_topo_hint p11[] = {H(3, true)};

#define L(a) {(int)(sizeof(a) / sizeof(a[0])), a}
#define NONE_OK H(0, true)

static const struct merge_case cases[] = {
    {"same mask, both preferred, node 0", 2, {L(p01), L(p01)},
     {NONE_OK, H(1, true), H(1, true), H(1, true)}, {true, true, true, true}},
    {"same mask, both preferred, node 1", 2, {L(p10), L(p10)},
     {NONE_OK, H(2, true), H(2, true), H(2, true)}, {true, true, true, true}},
    {"one provider without preference", 2, {NIL, L(p01)},
     {NONE_OK, H(1, true), H(1, true), H(1, true)}, {true, true, true, true}},
    {"two hints against one non-preferred wide hint", 2, {L(p01_p10), L(n11)},
     {NONE_OK, H(1, false), H(1, false), H(0, false)}, {true, true, false, false}},
    {"both offer both nodes: the narrower, lower one", 2, {L(p01_p10), L(p01_p10)},
     {NONE_OK, H(1, true), H(1, true), H(1, true)}, {true, true, true, true}},
    {"a wider preferred hint beats a narrower non-preferred one", 2, {L(p11), L(n01_p11)},
     {NONE_OK, H(3, true), H(3, true), H(0, false)}, {true, true, true, false}},
    {"no common node", 2, {L(p01), L(p10)},
     {NONE_OK, H(3, false), H(3, false), H(0, false)}, {true, true, false, false}},
    {"a provider with no possible placement", 2, {{0, NULL}, L(p01)},
     {NONE_OK, H(1, false), H(1, false), H(0, false)}, {true, true, false, false}},
    {"single-numa drops wide preferred hints", 2, {L(p01_p10_n11), L(p11)},
     {NONE_OK, H(1, true), H(1, true), H(0, false)}, {true, true, true, false}},
    {"a preferred narrow pair wins over a preferred wide one", 2, {L(p01_p11), L(n01_p11)},
     {NONE_OK, H(1, true), H(1, true), H(0, false)}, {true, true, true, false}},
    {"three providers agree on node 1", 3, {L(p01_p10), L(p10), NIL},
     {NONE_OK, H(2, true), H(2, true), H(2, true)}, {true, true, true, true}},
};

static void merge_table(void **state)
{
    (void)state;
    static const enum gs_topo_policy pol[] = {GS_TOPO_NONE, GS_TOPO_BEST_EFFORT, GS_TOPO_RESTRICTED,
                                              GS_TOPO_SINGLE_NUMA};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int p = 0; p < 4; p++) {
            struct gs_topo_hint best;
            bool ok = gs_topo_merge(pol[p], 2, cases[i].prov, (size_t)cases[i].nprov, &best);
            if (ok != cases[i].admit[p] || best.mask != cases[i].want[p].mask ||
                best.preferred != cases[i].want[p].preferred)
                fail_msg("%s / %s: got {%#x, %d} admit %d", cases[i].name, gs_topo_policy_name(pol[p]), best.mask,
                         best.preferred, ok);
        }
    }
}

static void hints_generation(void **state)
{
    (void)state;
    struct gs_topo_hint h[GS_TOPO_MAX_HINTS];
    int avail[GS_TOPO_MAX_NUMA] = {4, 4}, total[GS_TOPO_MAX_NUMA] = {4, 4};
    int n = gs_topo_hints_for(2, avail, total, 2, h, GS_TOPO_MAX_HINTS);
    assert_int_equal(n, 3);
    assert_int_equal(h[0].mask, 1), assert_true(h[0].preferred);
    assert_int_equal(h[1].mask, 2), assert_true(h[1].preferred);
    assert_int_equal(h[2].mask, 3), assert_false(h[2].preferred);
    /* 6 GPUs need both nodes: the only hint, and preferred. */
    n = gs_topo_hints_for(2, avail, total, 6, h, GS_TOPO_MAX_HINTS);
    assert_int_equal(n, 1);
    assert_int_equal(h[0].mask, 3), assert_true(h[0].preferred);
    /* Node 0 has 1 free of 4: node 1 alone is preferred; both is not. */
    avail[0] = 1;
    n = gs_topo_hints_for(2, avail, total, 2, h, GS_TOPO_MAX_HINTS);
    assert_int_equal(n, 2);
    assert_int_equal(h[0].mask, 2), assert_true(h[0].preferred);
    assert_int_equal(h[1].mask, 3), assert_false(h[1].preferred);
    /* More than the machine has: nothing. */
    assert_int_equal(gs_topo_hints_for(2, avail, total, 9, h, GS_TOPO_MAX_HINTS), 0);
    /* Four nodes: 15 subsets, the four single nodes preferred for one unit. */
    int a4[GS_TOPO_MAX_NUMA] = {1, 1, 1, 1}, t4[GS_TOPO_MAX_NUMA] = {1, 1, 1, 1};
    n = gs_topo_hints_for(4, a4, t4, 1, h, GS_TOPO_MAX_HINTS);
    assert_int_equal(n, 15);
    int pref = 0;
    for (int i = 0; i < n; i++) pref += h[i].preferred;
    assert_int_equal(pref, 4);
}

static struct gs_topo_resource gpus(int a0, int a1)
{
    struct gs_topo_resource r = {.name = "nvidia.com/gpu", .avail = {a0, a1}, .total = {4, 4}};
    return r;
}

static void scope_container_vs_pod(void **state)
{
    (void)state;
    struct gs_topo_resource r = gpus(4, 4);
    struct gs_topo_container c[2] = {
        {.name = "a", .n = 1, .res = {"nvidia.com/gpu"}, .count = {3}},
        {.name = "b", .n = 1, .res = {"nvidia.com/gpu"}, .count = {3}},
    };
    struct gs_topo_hint aff[2];
    char why[200];
    struct gs_topo_config cfg = {GS_TOPO_SINGLE_NUMA, GS_TOPO_SCOPE_CONTAINER, 2};
    /* Per container: each fits a node of its own. */
    assert_true(gs_node_topo_admit(&cfg, &r, 1, c, 2, aff, why, sizeof why));
    assert_int_equal(aff[0].mask, 1);
    assert_int_equal(aff[1].mask, 2);
    /* As a pod: 6 GPUs never fit one node. */
    cfg.scope = GS_TOPO_SCOPE_POD;
    assert_false(gs_node_topo_admit(&cfg, &r, 1, c, 2, aff, why, sizeof why));
    assert_non_null(strstr(why, "single-numa-node"));
    /* best-effort admits the pod across both nodes. */
    cfg.policy = GS_TOPO_BEST_EFFORT;
    assert_true(gs_node_topo_admit(&cfg, &r, 1, c, 2, aff, why, sizeof why));
    assert_int_equal(aff[0].mask, 3);
    assert_int_equal(aff[1].mask, 3);
    /* restricted refuses it: the only hint for 6 of 8 is preferred, so it admits. */
    cfg.policy = GS_TOPO_RESTRICTED;
    assert_true(gs_node_topo_admit(&cfg, &r, 1, c, 2, aff, why, sizeof why));
    /* ...but not when node 0 has lost GPUs the request would need to stay narrow. */
    r = gpus(1, 4);
    c[0].count[0] = 2;
    cfg.scope = GS_TOPO_SCOPE_CONTAINER;
    struct gs_topo_container one = c[0];
    assert_true(gs_node_topo_admit(&cfg, &r, 1, &one, 1, aff, why, sizeof why));
    assert_int_equal(aff[0].mask, 2);
}

static void gpus_and_cpus(void **state)
{
    (void)state;
    struct gs_topo_resource r[2] = {gpus(0, 4), {.name = "cpu", .avail = {16, 16}, .total = {16, 16}}};
    struct gs_topo_container c = {.name = "c", .n = 2, .res = {"nvidia.com/gpu", "cpu"}, .count = {2, 8}};
    struct gs_topo_hint aff;
    struct gs_topo_config cfg = {GS_TOPO_SINGLE_NUMA, GS_TOPO_SCOPE_CONTAINER, 2};
    assert_true(gs_node_topo_admit(&cfg, r, 2, &c, 1, &aff, NULL, 0));
    assert_int_equal(aff.mask, 2);
    assert_true(aff.preferred);
    /* CPUs of node 1 used up: GPUs and CPUs no longer meet on one node. */
    r[1].avail[1] = 2;
    assert_false(gs_node_topo_admit(&cfg, r, 2, &c, 1, &aff, NULL, 0));
    cfg.policy = GS_TOPO_BEST_EFFORT;
    assert_true(gs_node_topo_admit(&cfg, r, 2, &c, 1, &aff, NULL, 0));
    assert_false(aff.preferred);
    /* A resource without NUMA information does not constrain. */
    r[0].no_topology = true;
    cfg.policy = GS_TOPO_RESTRICTED;
    r[1].avail[1] = 16;
    assert_true(gs_node_topo_admit(&cfg, r, 2, &c, 1, &aff, NULL, 0));
}

static void names(void **state)
{
    (void)state;
    enum gs_topo_policy p;
    enum gs_topo_scope s;
    assert_int_equal(gs_topo_policy_parse("single-numa-node", &p), 0);
    assert_int_equal(p, GS_TOPO_SINGLE_NUMA);
    assert_string_equal(gs_topo_policy_name(GS_TOPO_BEST_EFFORT), "best-effort");
    assert_int_equal(gs_topo_policy_parse("strict", &p), GS_EINVAL);
    assert_int_equal(gs_topo_scope_parse("pod", &s), 0);
    assert_int_equal(s, GS_TOPO_SCOPE_POD);
    assert_int_equal(gs_topo_scope_parse("node", &s), GS_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(merge_table),          cmocka_unit_test(hints_generation),
        cmocka_unit_test(scope_container_vs_pod), cmocka_unit_test(gpus_and_cpus),
        cmocka_unit_test(names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
