/*
 * test_topology.c - NVLink islands, the GPU set choice (best interconnect,
 * packing, never splitting the last whole island when avoidable),
 * NodeResourceTopology parsing, TopologyManager admission (single-numa-node
 * with pod and container scope, restricted), and the plugin's filter,
 * reasons and reserve through a framework, leaveFlatNodes; the islands the cache keeps per
 * GPU follow node updates and equal a fresh flood fill on random topologies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched/topology_core.h"
#include "sched_fixture.h"

static struct gs_clock clk;

static struct gs_cache *one_node(int gpus, int island, int numa)
{
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    assert_int_equal(fx_add_node(c, "dgx", gpus, 64, island, numa, NULL), 0);
    return c;
}

static uint64_t take(struct gs_cache *c, struct gs_pod *p)
{
    struct gs_gpu_choice ch;
    struct gs_node_info *n = gs_cache_node(c, 0);
    assert_true(gs_topo_choose(n, p->demand.gpu_count, p->demand.gpu_milli, 0, ~0ULL, &ch));
    struct gs_assignment a = {0, ch.mask, p->demand.gpu_milli, 0};
    assert_int_equal(gs_cache_assume(c, p, &a, 0), 0);
    return ch.mask;
}

static void test_islands_and_choice(void **st)
{
    (void)st;
    struct gs_cache *c = one_node(8, 4, 4);
    uint64_t isl[8];
    assert_int_equal(gs_topo_islands(gs_cache_node(c, 0), isl, 8), 2);
    assert_int_equal(isl[0], 0x0f);
    assert_int_equal(isl[1], 0xf0);
    struct gs_pod *p[4] = {fx_pod("p1", 3, 0, NULL), fx_pod("p2", 2, 0, NULL), fx_pod("p3", 1, 0, NULL),
                           fx_pod("p4", 2, 0, NULL)};
    assert_int_equal(take(c, p[0]), 0x07); /* both islands whole: the first */
    assert_int_equal(take(c, p[1]), 0x30); /* not GPUs 3+4 across islands */
    assert_int_equal(take(c, p[2]), 0x08); /* packs island 0 rather than split island 1 again */
    assert_int_equal(take(c, p[3]), 0xc0);
    assert_int_equal(gs_topo_largest_free_island(gs_cache_node(c, 0), 1000, 0), 0);
    fx_check_cache(c);
    for (int i = 0; i < 4; i++) {
        char k[64];
        snprintf(k, sizeof k, "default/%s", p[i]->meta.name);
        gs_cache_forget(c, k);
        fx_pod_free(p[i]);
    }
    gs_cache_free(c);
}

static void test_last_whole_island(void **st)
{
    (void)st;
    /* Islands of 4 and 2 (GPUs 0-3, 4-5) plus 2 loose GPUs on NUMA 1. */
    struct gs_cache *c = one_node(8, 0, 4);
    struct gs_node_info *n = gs_cache_node(c, 0);
    for (int g = 0; g < 4; g++) n->gpus[g].nvlink = 0x0f & ~(1ULL << g);
    n->gpus[4].nvlink = 1ULL << 5, n->gpus[5].nvlink = 1ULL << 4;
    gs_topo_memo_islands(n); /* written past the cache: derive the islands as the cache would */
    struct gs_gpu_choice ch;
    /* A 2-GPU pod takes the 2-island (fewest free), not half of the 4-island. */
    assert_true(gs_topo_choose(n, 2, 1000, 0, ~0ULL, &ch));
    assert_int_equal(ch.mask, 0x30);
    assert_int_equal(ch.level, GS_LINK_NVLINK);
    /* With only the 4-island whole, a 1-GPU pod goes to a loose GPU. */
    assert_true(gs_topo_choose(n, 1, 1000, 0, ~0ULL, &ch));
    assert_true(ch.mask & 0xc0 || ch.mask & 0x30);
    assert_false(ch.mask & 0x0f);
    /* Five GPUs: no island holds them; NUMA 0 has 4: any level. */
    assert_true(gs_topo_choose(n, 5, 1000, 0, ~0ULL, &ch));
    assert_int_equal(ch.level, GS_LINK_ANY);
    assert_int_equal(__builtin_popcountll(ch.mask), 5);
    /* Restricted to NUMA 1 (GPUs 4-7): two of them. */
    assert_true(gs_topo_choose(n, 2, 1000, 0, 0xf0, &ch));
    assert_int_equal(ch.mask & ~0xf0ULL, 0);
    assert_false(gs_topo_choose(n, 9, 1000, 0, ~0ULL, &ch));
    assert_true(gs_topo_compactness(n, 2, 1000, 0) > gs_topo_compactness(n, 5, 1000, 0));
    gs_cache_free(c);
}

static const char *NRT =
    "{\"apiVersion\":\"topology.node.k8s.io/v1alpha2\",\"kind\":\"NodeResourceTopology\",\"metadata\":{\"name\":\"dgx\"},"
    "\"attributes\":[{\"name\":\"topologyManagerPolicy\",\"value\":\"%s\"},{\"name\":\"topologyManagerScope\",\"value\":\"%s\"}],"
    "\"zones\":[{\"name\":\"node-0\",\"type\":\"Node\",\"resources\":[{\"name\":\"cpu\",\"allocatable\":\"16\"},"
    "{\"name\":\"nvidia.com/gpu\",\"allocatable\":\"4\"}]},{\"name\":\"node-1\",\"type\":\"Node\",\"resources\":"
    "[{\"name\":\"cpu\",\"allocatable\":\"16\"},{\"name\":\"memory\",\"allocatable\":\"64Gi\"}]}]}";

static json_t *nrt_doc(const char *policy, const char *scope)
{
    char buf[2048];
    snprintf(buf, sizeof buf, NRT, policy, scope);
    return json_loads(buf, 0, NULL);
}

static void test_nrt_parse(void **st)
{
    (void)st;
    json_t *j = nrt_doc("single-numa-node", "pod");
    struct gs_nrt n;
    struct gs_diags d = {0};
    assert_int_equal(gs_nrt_parse(j, &n, &d), 0);
    assert_string_equal(n.node, "dgx");
    assert_true(n.has_policy);
    assert_int_equal(n.policy, GS_TM_SINGLE_NUMA);
    assert_int_equal(n.scope, GS_TM_SCOPE_POD);
    assert_int_equal(n.nzones, 2);
    assert_int_equal(n.zones[1].numa, 1);
    assert_int_equal(n.zones[0].cpu_milli, 16000);
    assert_int_equal(n.zones[0].gpus, 4);
    assert_int_equal(n.zones[1].mem_bytes, 64LL << 30);
    gs_nrt_clear(&n);
    json_decref(j);
    j = nrt_doc("sometimes", "pod");
    assert_int_equal(gs_nrt_parse(j, &n, &d), GS_EINVAL);
    assert_non_null(strstr(d.v[0].path, "attributes[0].value"));
    assert_non_null(strstr(d.v[0].msg, "sometimes"));
    gs_diags_free(&d);
    json_decref(j);
    enum gs_tm_policy p;
    assert_true(gs_tm_policy_parse("restricted", &p) && p == GS_TM_RESTRICTED);
    assert_string_equal(gs_tm_policy_name(GS_TM_BEST_EFFORT), "best-effort");
}

static void test_admission(void **st)
{
    (void)st;
    struct gs_cache *c = one_node(8, 0, 4);
    struct gs_node_info *n = gs_cache_node(c, 0);
    json_t *j = nrt_doc("single-numa-node", "pod");
    struct gs_nrt nrt;
    assert_int_equal(gs_nrt_parse(j, &nrt, NULL), 0);
    json_decref(j);
    gs_cache_set_nrt(c, 0, &nrt);
    struct gs_zone_free z[8];
    int64_t used_cpu[2] = {12000, 0};
    int nz = gs_topo_zones(n, used_cpu, NULL, z, 8);
    assert_int_equal(nz, 2);
    assert_int_equal(z[0].gpus, 0x0f);
    assert_int_equal(z[0].cpu_free, 4000);
    struct gs_pod *small = fx_pod_ex("s", 2, 0, 4, 0, NULL, NULL, NULL, NULL);
    struct gs_pod *wide = fx_pod_ex("w", 6, 0, 4, 0, NULL, NULL, NULL, NULL);
    struct gs_pod *cpu = fx_pod_ex("c", 2, 0, 20, 0, NULL, NULL, NULL, NULL);
    assert_true(gs_topo_admit(n, small, GS_TM_SINGLE_NUMA, GS_TM_SCOPE_POD, z, nz));
    assert_false(gs_topo_admit(n, wide, GS_TM_SINGLE_NUMA, GS_TM_SCOPE_POD, z, nz)); /* 6 GPUs: two zones */
    assert_false(gs_topo_admit(n, cpu, GS_TM_SINGLE_NUMA, GS_TM_SCOPE_CONTAINER, z, nz)); /* 20 CPUs */
    /* restricted: 6 GPUs always need two zones, so two is the narrowest and fine. */
    assert_true(gs_topo_admit(n, wide, GS_TM_RESTRICTED, GS_TM_SCOPE_POD, z, nz));
    assert_true(gs_topo_admit(n, wide, GS_TM_BEST_EFFORT, GS_TM_SCOPE_POD, z, nz));
    /* Zone 0 busy: 2 GPUs + 8 CPUs fit only zone 1. */
    struct gs_zone_need need = {8000, 0, 2, 1000, 0};
    assert_int_equal(gs_topo_best_zone(n, z, nz, &need), 1);
    assert_int_equal(gs_topo_zones_needed(n, z, nz, &need, false), 1);
    fx_pod_free(small), fx_pod_free(wide), fx_pod_free(cpu);
    gs_cache_free(c);
    gs_nrt_clear(&nrt);
}

static void test_plugin_filter_reserve(void **st)
{
    (void)st;
    struct gs_cache *c = one_node(8, 4, 4);
    struct gs_handle h = {.clock = &clk, .cache = c};
    struct gs_sched_config cfg;
    const char *conf = "{\"profiles\":[{\"plugins\":{\"preFilter\":{\"enabled\":[{\"name\":\"NodeResourceTopology\"}]},"
                       "\"filter\":{\"enabled\":[{\"name\":\"NodeResourceTopology\"}]},"
                       "\"reserve\":{\"enabled\":[{\"name\":\"NodeResourceTopology\"},{\"name\":\"GpuShare\"}],"
                       "\"disabled\":[{\"name\":\"*\"}]}}}]}";
    struct gs_framework *fw = fx_framework(conf, &cfg, &h);
    assert_non_null(fw);
    struct gs_pod *a = fx_pod("a", 1, 0, NULL);
    struct gs_pod *b = fx_pod("b", 2, 0, NULL);
    struct gs_pod *nv = fx_pod_ex("nv", 4, 0, 1, 0, NULL, NULL, NULL, "{\"gpusched.io/gpu-interconnect\":\"nvlink\"}");
    struct gs_schedule_result r;
    assert_int_equal(gs_framework_schedule(fw, a, 0, &r), 0);
    assert_int_equal(r.code, GS_SUCCESS);
    assert_int_equal(r.a.gpu_mask, 0x01);
    gs_schedule_result_free(&r);
    assert_int_equal(gs_framework_bind(fw, a).code, GS_SUCCESS);
    assert_int_equal(gs_framework_schedule(fw, b, 0, &r), 0);
    assert_int_equal(r.a.gpu_mask, 0x06); /* packs island 0 */
    gs_schedule_result_free(&r);
    assert_int_equal(gs_framework_bind(fw, b).code, GS_SUCCESS);
    /* 4 GPUs in one NVLink island: island 1 is whole. */
    assert_int_equal(gs_framework_schedule(fw, nv, 0, &r), 0);
    assert_int_equal(r.a.gpu_mask, 0xf0);
    gs_schedule_result_free(&r);
    assert_int_equal(gs_framework_bind(fw, nv).code, GS_SUCCESS);
    /* Free GPUs 0 and 3 (island 0) and 4, 5 (island 1): four free, no island holds four. */
    gs_cache_remove_pod(c, "default/a");
    gs_cache_remove_pod(c, "default/nv");
    struct gs_pod *x = fx_pod("x", 2, 0, NULL);
    struct gs_assignment xa = {0, 0xc0, 1000, 0};
    assert_int_equal(gs_cache_add_bound(c, x, &xa), 0);
    struct gs_pod *nv2 = fx_pod_ex("nv2", 4, 0, 1, 0, NULL, NULL, NULL, "{\"gpusched.io/gpu-interconnect\":\"nvlink\"}");
    assert_int_equal(gs_framework_schedule(fw, nv2, 0, &r), 0);
    assert_int_equal(r.code, GS_UNSCHEDULABLE);
    assert_non_null(strstr(r.status.reason, "no NVLink island with 4 free GPUs"));
    gs_schedule_result_free(&r);
    fx_check_cache(c);
    assert_int_equal(gs_topo_largest_free_island(gs_cache_node(c, 0), 1000, 0), 2);
    gs_cache_remove_pod(c, "default/b");
    gs_cache_remove_pod(c, "default/x");
    fx_pod_free(a), fx_pod_free(b), fx_pod_free(nv), fx_pod_free(nv2), fx_pod_free(x);
    gs_framework_free(fw);
    gs_sched_config_free(&cfg);
    gs_cache_free(c);
}

/* A Node object with ngpus GPUs linked by links[g] (borrowed by the cache). */
static void link_node(struct gs_node *node, struct gs_gpu *gpus, int ngpus, const uint64_t *links)
{
    memset(node, 0, sizeof *node);
    node->meta.name = "dgx";
    for (int g = 0; g < ngpus; g++)
        gpus[g] = (struct gs_gpu){.index = g, .memory_mib = 81920, .numa_node = g / 4, .nvlink_peers = links[g],
                                  .healthy = true};
    node->gpus = gpus;
    node->ngpus = (size_t)ngpus;
}

static void assert_islands(const struct gs_node_info *n, const uint64_t *want, int nwant)
{
    uint64_t isl[64], fresh[64];
    int k = gs_topo_islands(n, isl, 64);
    assert_int_equal(k, nwant);
    assert_int_equal(gs_topo_islands_fresh(n, fresh, 64), nwant);
    for (int i = 0; i < k; i++) {
        assert_int_equal(isl[i], want[i]);
        assert_int_equal(fresh[i], want[i]);
    }
}

static void test_islands_follow_node_update(void **st)
{
    (void)st;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    uint64_t quads[8], pairs[8], none[8] = {0};
    for (int g = 0; g < 8; g++) {
        quads[g] = (0x0fULL << (g / 4 * 4)) & ~(1ULL << g);
        pairs[g] = 1ULL << (g ^ 1);
    }
    struct gs_node v1, v2, v3;
    struct gs_gpu g1[8], g2[8], g3[8];
    link_node(&v1, g1, 8, quads);
    link_node(&v2, g2, 8, pairs);
    link_node(&v3, g3, 8, none);
    assert_int_equal(gs_cache_add_node(c, &v1), 0);
    struct gs_node_info *n = gs_cache_node(c, 0);
    assert_islands(n, (uint64_t[]){0x0f, 0xf0}, 2);
    /* Same node, new links: the islands are the new ones, and the choice uses them. */
    assert_int_equal(gs_cache_update_node(c, &v2), 0);
    assert_ptr_equal(gs_cache_node(c, 0), n);
    assert_islands(n, (uint64_t[]){0x03, 0x0c, 0x30, 0xc0}, 4);
    struct gs_gpu_choice ch;
    assert_true(gs_topo_choose(n, 2, 1000, 0, ~1ULL, &ch));
    assert_int_equal(ch.level, GS_LINK_NVLINK);
    assert_int_equal(ch.mask, 0x0c); /* GPU 0 not allowed: the next pair, not 1+2 across pairs */
    assert_int_equal(gs_topo_largest_free_island(n, 1000, 0), 2);
    assert_int_equal(gs_cache_update_node(c, &v3), 0);
    assert_islands(n, (uint64_t[]){1, 2, 4, 8, 16, 32, 64, 128}, 8);
    assert_true(gs_topo_choose(n, 2, 1000, 0, ~0ULL, &ch));
    assert_int_equal(ch.level, GS_LINK_NUMA);
    assert_int_equal(gs_cache_update_node(c, &v1), 0);
    assert_islands(n, (uint64_t[]){0x0f, 0xf0}, 2);
    fx_check_cache(c);
    gs_cache_free(c);
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13, rnd_state ^= rnd_state >> 7, rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* Sparse random links: each bit with probability 1/2^density (density 6: none
 * most of the time); bits past ngpus and one-sided links included on purpose. */
static void random_links(uint64_t *links, int ngpus, int density)
{
    for (int g = 0; g < ngpus; g++) {
        uint64_t m = ~0ULL;
        for (int d = 0; d < density; d++) m &= rnd();
        links[g] = density >= 6 ? 0 : m;
    }
}

static void compare_with_fresh(const struct gs_node_info *n)
{
    uint64_t a[64], b[64];
    for (int max = 1; max <= 64; max = max < 4 ? max + 1 : max * 2) {
        int k = gs_topo_islands(n, a, max);
        assert_int_equal(k, gs_topo_islands_fresh(n, b, max));
        assert_memory_equal(a, b, (size_t)k * sizeof *a);
    }
    uint64_t all = 0;
    for (int g = 0; g < n->ngpus; g++) {
        assert_true(n->gpus[g].island & (1ULL << g));
        all |= n->gpus[g].island;
    }
    assert_int_equal(all, n->ngpus == 64 ? ~0ULL : (1ULL << n->ngpus) - 1);
}

static void test_islands_memo_random(void **st)
{
    (void)st;
    for (int it = 0; it < 400; it++) {
        gs_clock_init_sim(&clk, 0);
        struct gs_cache *c = gs_cache_new(&clk);
        int ngpus = it % 5 == 0 ? 64 : (int)(rnd() % 65);
        uint64_t links[64], links2[64];
        int32_t numa[64] = {0};
        random_links(links, ngpus, (int)(rnd() % 7));
        struct gs_node_spec sp = {.name = "r", .cpu_milli = 64000, .mem_bytes = 1LL << 36, .gpu_model = "A100",
                                  .ngpus = ngpus, .gpu_mem_mib = 81920, .gpu_numa = numa, .gpu_nvlink = links};
        assert_int_equal(gs_cache_add_node_spec(c, &sp), 0);
        compare_with_fresh(gs_cache_node(c, 0));
        /* An update through a Node object with other links (and maybe another GPU count). */
        int ng2 = (int)(rnd() % 65);
        random_links(links2, ng2, (int)(rnd() % 7));
        struct gs_node v;
        struct gs_gpu gpus[64];
        link_node(&v, gpus, ng2, links2);
        v.meta.name = "r";
        assert_int_equal(gs_cache_update_node(c, &v), 0);
        assert_int_equal(gs_cache_node(c, 0)->ngpus, ng2);
        compare_with_fresh(gs_cache_node(c, 0));
        gs_cache_free(c);
    }
}

/* leaveFlatNodes: on a node whose GPUs no topology tells apart (no links, one
 * NUMA zone or none) Score is 0 and Reserve leaves the GPUs to the next
 * plugin; a node with islands is scored and chosen for as without it, and
 * without the arg a flat node is too. */
static void test_leave_flat_nodes(void **st)
{
    (void)st;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    assert_true(fx_add_node(c, "flat", 8, 64, 0, 0, NULL) >= 0);
    assert_true(fx_add_node(c, "flat1", 8, 64, 0, 8, NULL) >= 0); /* one NUMA zone */
    assert_true(fx_add_node(c, "dgx", 8, 64, 4, 4, NULL) >= 0);
    assert_true(fx_add_node(c, "numa2", 8, 64, 0, 4, NULL) >= 0); /* two zones, no links */
    struct gs_handle h = {.clock = &clk, .cache = c};
    const struct gs_plugin *pl = gs_plugin_lookup("NodeResourceTopology");
    assert_non_null(pl);
    struct gs_pod *p = fx_pod("p", 2, 0, NULL);
    struct gs_node_info *nodes[4];
    for (int i = 0; i < 4; i++) nodes[i] = gs_cache_node(c, i);
    for (int leave = 0; leave < 2; leave++) {
        json_t *args = json_pack("{s:b}", "leaveFlatNodes", leave);
        struct gs_diags d = {0};
        void *state = NULL;
        assert_int_equal(pl->init(&h, args, &state, &d), 0);
        struct gs_cycle_state cs;
        gs_cycle_state_init(&cs);
        int64_t scores[4] = {-1, -1, -1, -1};
        pl->score(state, &cs, p, nodes, 4, scores);
        for (int i = 0; i < 4; i++) {
            struct gs_assignment a = {nodes[i]->idx, 0, 1000, 0};
            assert_int_equal(pl->reserve(state, &cs, p, nodes[i], &a).code, GS_SUCCESS);
            bool flat = i < 2;
            if (leave && flat) {
                assert_int_equal(scores[i], 0);
                assert_int_equal(a.gpu_mask, 0);
            } else {
                assert_true(scores[i] > 0);
                assert_int_equal(__builtin_popcountll(a.gpu_mask), 2);
            }
        }
        assert_int_equal(scores[2] > scores[3], 1); /* an NVLink pair beats a NUMA pair either way */
        gs_cycle_state_free(&cs);
        pl->fini(state);
        json_decref(args);
        gs_diags_free(&d);
    }
    /* A wrong value names the field. */
    json_t *bad = json_pack("{s:s}", "leaveFlatNodes", "yes");
    struct gs_diags d = {0};
    void *state = NULL;
    assert_int_equal(pl->init(&h, bad, &state, &d), GS_EINVAL);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, "args.leaveFlatNodes");
    gs_diags_free(&d);
    json_decref(bad);
    fx_pod_free(p);
    gs_cache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_islands_and_choice),
        cmocka_unit_test(test_last_whole_island),
        cmocka_unit_test(test_islands_follow_node_update),
        cmocka_unit_test(test_islands_memo_random),
        cmocka_unit_test(test_nrt_parse),
        cmocka_unit_test(test_admission),
        cmocka_unit_test(test_plugin_filter_reserve),
        cmocka_unit_test(test_leave_flat_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
