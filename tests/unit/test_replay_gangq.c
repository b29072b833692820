/*
 * test_replay_gangq.c - the replay's gang queueing modes (sim/replay_gangq.h)
 * on a scenario whose timeline is known by hand: which workload each mode
 * lets in when, the gang's queueing delay, the GPU idle time while the gang
 * waits, and that no gang ever runs partly. Also the mode names.
 *
 * Scenario: two nodes of 4 GPUs. t=0 s0 (3 GPUs, 100 s); t=1 the gang G
 * (2 pods x 4 GPUs, 100 s: both nodes whole); t=2 s1 (1 GPU, 50 s: ends
 * before s0); t=3 s2 (1 GPU, 500 s).
 *   scheduler, volcano: s1 and s2 start at once and G waits for s2: 503.
 *   fifo: G at 100 (s0 ended), s1 and s2 behind it at 200.
 *   reserve: G reserves both nodes from 100; s1 ends before that and is
 *     backfilled at 2; s2 is not and waits until G ends (200).
 *
 * Two more scenarios, with racks (RACKS, below), show what the placement
 * check on the released cluster and the domain search change; and an API
 * test shows that the shadow start leaves the cache as it found it.
 */
#include "sched/plugin.h"
#include "sim/replay_gangq.h"
#include "sim/sim.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cmocka of Debian 12 has no assert_double_equal. */
#define assert_double_equal(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) <= (eps))

extern const struct gs_plugin gs_plugin_best_fit;
const struct gs_plugin *const test_gangq_policy = &gs_plugin_best_fit;

#define CONFIG GS_TEST_DATA "/../../examples/scheduler/gang-topology-scheduler.yaml"

static char *write_tmp(const char *text)
{
    char tmpl[] = "/tmp/gs_test_gangq_XXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return strdup(tmpl);
}

static const char *NODES =
    "apiVersion: v1\nkind: Node\nmetadata: {name: n0}\n"
    "status: {allocatable: {cpu: '64', memory: 256Gi, pods: '110', nvidia.com/gpu: '4'}}\n"
    "---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
    "status: {allocatable: {cpu: '64', memory: 256Gi, pods: '110', nvidia.com/gpu: '4'}}\n";

#define POD(name, group, at, dur, gpus)                                                                        \
    "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: " name "\n  namespace: default\n" group                   \
    "  annotations: {sim.gpusched.io/arrival: '" at "', sim.gpusched.io/duration: '" dur "'}\n"                   \
    "spec: {containers: [{name: c, image: i, resources: {limits: {cpu: '1', memory: 1Gi, nvidia.com/gpu: '" gpus \
    "'}}}]}\n"
#define IN_G "  labels: {scheduling.x-k8s.io/pod-group: g}\n"

static const char *WORKLOAD =
    "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: default}\n"
    "spec: {minMember: 2, scheduleTimeoutSeconds: 30}\n"
    POD("s0", "", "0", "100", "3") POD("g-0", IN_G, "1", "100", "4") POD("g-1", IN_G, "1", "100", "4")
    POD("s1", "", "2", "50", "1") POD("s2", "", "3", "500", "1");

struct starts {
    double t[16];
    char pod[16][32], node[16][8];
    size_t n;
};

static void on_event(void *ctx, const struct gs_sim_event *e)
{
    struct starts *s = ctx;
    if (e->type != GS_SIM_SCHEDULED || s->n == 16) return;
    s->t[s->n] = e->t;
    snprintf(s->node[s->n], sizeof s->node[0], "%s", e->node ? e->node : "");
    snprintf(s->pod[s->n++], sizeof s->pod[0], "%s", e->pod);
}

static const char *node_of(const struct starts *s, const char *pod)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->pod[i], pod)) return s->node[i];
    return "";
}

static double start_of(const struct starts *s, const char *pod)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->pod[i], pod)) return s->t[i];
    return -1;
}

static void run_trace(const char *nodes_yaml, const char *workload, int mode, int64_t slack, struct starts *s,
                      struct gs_sim_result *res)
{
    char *nodes = write_tmp(nodes_yaml), *pods = write_tmp(workload);
    struct gs_trace t;
    struct gs_diags d = {0};
    int rc = gs_trace_load_manifests(nodes, pods, &t, &d);
    for (size_t i = 0; i < d.n; i++) print_message("diag: %s: %s\n", d.v[i].path, d.v[i].msg);
    assert_int_equal(rc, 0);
    memset(s, 0, sizeof *s);
    struct gs_sim_sink sink = {.event = on_event, .ctx = s};
    struct gs_sim_opts o = {.mode = GS_SIM_REPLAY, .policy = "BestFit", .seed = 42, .config_path = CONFIG,
                            .gang_queue = mode, .gang_slack_s = slack};
    rc = gs_sim_run(&t, &o, &sink, res, &d);
    for (size_t i = 0; i < d.n; i++) print_message("diag: %s: %s\n", d.v[i].path, d.v[i].msg);
    assert_int_equal(rc, 0);
    gs_diags_free(&d);
    gs_trace_free(&t);
    unlink(nodes), unlink(pods);
    free(nodes), free(pods);
    assert_int_equal(res->partial_gangs, 0); /* never a partial gang */
    if (mode != GS_GANGQ_AUTO) assert_int_equal(res->gang_queue, mode);
}

static void run_mode(int mode, struct starts *s, struct gs_sim_result *res)
{
    run_trace(NODES, WORKLOAD, mode, 0, s, res);
    assert_int_equal(res->pods_scheduled, 5);
    assert_int_equal(res->gangs, 1);
    assert_int_equal(res->gangs_started, 1);
    assert_int_equal(res->partial_gangs, 0); /* never a partial gang */
    assert_double_equal(start_of(s, "default/g-0"), start_of(s, "default/g-1"), 1e-9);
}

static void test_scheduler_mode_starves_the_gang(void **state)
{
    (void)state;
    struct starts s;
    struct gs_sim_result res;
    run_mode(GS_GANGQ_SCHEDULER, &s, &res);
    assert_double_equal(start_of(&s, "default/s1"), 2, 1e-9);
    assert_double_equal(start_of(&s, "default/s2"), 3, 1e-9);
    assert_double_equal(start_of(&s, "default/g-0"), 503, 1e-9);
    assert_double_equal(res.gang_delay_p50, 502, 1e-9);
    /* Free GPUs while G waits: 5 (1-2), 4 (2-3), 3 (3-52), 4 (52-100), 7 (100-503). */
    assert_double_equal(res.gang_idle_gpu_hours * 3600, 5 + 4 + 3 * 49 + 4 * 48 + 7 * 403, 1e-6);
    assert_double_equal(res.gang_wait_hours * 3600, 502, 1e-6);
}

static void test_fifo_keeps_order(void **state)
{
    (void)state;
    struct starts s;
    struct gs_sim_result res;
    run_mode(GS_GANGQ_FIFO, &s, &res);
    assert_double_equal(start_of(&s, "default/g-0"), 100, 1e-9);
    assert_double_equal(start_of(&s, "default/s1"), 200, 1e-9);
    assert_double_equal(start_of(&s, "default/s2"), 200, 1e-9);
    assert_double_equal(res.gang_delay_p50, 99, 1e-9);
    /* 5 free (1-100): s1 and s2 wait behind the gang. */
    assert_double_equal(res.gang_idle_gpu_hours * 3600, 5 * 99, 1e-6);
}

static void test_volcano_enqueues_what_fits_the_total(void **state)
{
    (void)state;
    struct starts s;
    struct gs_sim_result res;
    run_mode(GS_GANGQ_VOLCANO, &s, &res);
    /* G's 8 GPUs never fit the idle total while s2 runs; s1 and s2 pass it. */
    assert_double_equal(start_of(&s, "default/s1"), 2, 1e-9);
    assert_double_equal(start_of(&s, "default/s2"), 3, 1e-9);
    assert_double_equal(start_of(&s, "default/g-0"), 503, 1e-9);
}

static void test_reserve_backfills_only_what_ends_before(void **state)
{
    (void)state;
    struct starts s;
    struct gs_sim_result res;
    run_mode(GS_GANGQ_RESERVE, &s, &res);
    assert_double_equal(start_of(&s, "default/s1"), 2, 1e-9);  /* ends at 52, before the shadow start */
    assert_double_equal(start_of(&s, "default/g-0"), 100, 1e-9);
    assert_double_equal(start_of(&s, "default/s2"), 200, 1e-9); /* would end at 503: not backfilled */
    assert_double_equal(res.gang_delay_p50, 99, 1e-9);
    assert_true(res.gang_reservations > 0);
    assert_int_equal(res.gang_backfilled, 1);
    /* Free while G waits: 5 (1-2), 4 (2-52), 5 (52-100). */
    assert_double_equal(res.gang_idle_gpu_hours * 3600, 5 + 4 * 50 + 5 * 48, 1e-6);
}

static struct gs_pod *mkpod(const char *name, const char *group, int gpus);
static void on_release(void *ctx, size_t i);

/*--- Racks: the shadow start by the placement check, the domain search ---*/

/* Four nodes of 4 GPUs in two racks: r0 = n0, n1; r1 = n2, n3. */
#define RACK_NODE(n, r)                                                                                        \
    "---\napiVersion: v1\nkind: Node\nmetadata: {name: " n ", labels: {topology.gpusched.io/rack: " r ", slot: " n \
    "}}\nstatus: {allocatable: {cpu: '64', memory: 256Gi, pods: '110', nvidia.com/gpu: '4'}}\n"
static const char *RACKS = RACK_NODE("n0", "r0") RACK_NODE("n1", "r0") RACK_NODE("n2", "r1") RACK_NODE("n3", "r1");

#define RACK_GROUP(name, min)                                                                                   \
    "---\napiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: " name ", namespace: default," \
    " annotations: {gpusched.io/required-topology: topology.gpusched.io/rack}}\n"                                  \
    "spec: {minMember: " min ", scheduleTimeoutSeconds: 30}\n"
#define PINNED_POD(name, node, at, dur, gpus)                                                                   \
    "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: " name "\n  namespace: default\n"                          \
    "  annotations: {sim.gpusched.io/arrival: '" at "', sim.gpusched.io/duration: '" dur "'}\n"                   \
    "spec: {nodeSelector: {slot: " node "}, containers: [{name: c, image: i, resources: {limits: {cpu: '1',"      \
    " memory: 1Gi, nvidia.com/gpu: '" gpus "'}}}]}\n"
#define IN(g) "  labels: {scheduling.x-k8s.io/pod-group: " g "}\n"

/* x0 (n0) and x2 (n3) run until 300, x1 (n2) until 100. G (2 x 4 GPUs, one
 * rack) needs a whole rack: by GPU counts it fits at 100 (n1 and n2), by
 * the placement check with the rack at 300. s (1 GPU, 150 s) ends before
 * 300; u (1 GPU, 500 s) does not, but ends within 450 s of it.
 *   reserve: the check ignores the rack (its Coscheduling knows no
 *     PodGroup), lets G in at 100, where the scheduler cannot place it; the
 *     unbound head then blocks s and u until G starts at 300.
 *   reserve-exact: shadow start 300 on r0 (both racks free 8 then, r0
 *     first); s is backfilled at 2 (ends at 152), u goes beside the
 *     reservation on n2 once x1 ended (100).
 *   backfill: also u at 3 (ends at 503, within 300 + 450 s); G's
 *     reservation moves to r1 (n1 is no longer whole at 300), still 300. */
static const char *SHADOW =
    RACK_GROUP("g", "2") PINNED_POD("x0", "n0", "0", "300", "4") PINNED_POD("x1", "n2", "0", "100", "4")
    PINNED_POD("x2", "n3", "0", "300", "4") POD("g-0", IN("g"), "1", "100", "4") POD("g-1", IN("g"), "1", "100", "4")
    POD("s", "", "2", "150", "1") POD("u", "", "3", "500", "1");

static void shadow_case(int mode, double s_at, double u_at)
{
    struct starts s;
    struct gs_sim_result res;
    run_trace(RACKS, SHADOW, mode, 0, &s, &res);
    assert_int_equal(res.pods_scheduled, 7);
    assert_int_equal(res.gangs_started, 1);
    assert_double_equal(start_of(&s, "default/g-0"), 300, 1e-9);
    assert_double_equal(start_of(&s, "default/g-1"), 300, 1e-9);
    assert_double_equal(res.gang_delay_p50, 299, 1e-9);
    assert_double_equal(start_of(&s, "default/s"), s_at, 1e-9);
    assert_double_equal(start_of(&s, "default/u"), u_at, 1e-9);
    assert_int_equal(res.pods_preempted, 0);
}

static void test_reserve_gpu_counts_miss_the_rack(void **state)
{
    (void)state;
    shadow_case(GS_GANGQ_RESERVE, 300, 300);
}

static void test_reserve_exact_backfills_by_the_real_shadow(void **state)
{
    (void)state;
    shadow_case(GS_GANGQ_RESERVE_EXACT, 2, 100);
}

static void test_backfill_slack_lets_u_in(void **state)
{
    (void)state;
    shadow_case(GS_GANGQ_BACKFILL, 2, 3);
    struct starts s;
    struct gs_sim_result res;
    run_trace(RACKS, SHADOW, GS_GANGQ_BACKFILL, 100, &s, &res); /* 503 > 300 + 100: u waits, goes beside at 100 */
    assert_double_equal(start_of(&s, "default/u"), 100, 1e-9);
    assert_double_equal(start_of(&s, "default/g-0"), 300, 1e-9);
}

/* y0 (2 GPUs, n0) and y1 (4 GPUs, n1) run until 1000: r0 has 2 free GPUs
 * (on n0), r1 is free. H (2 x 2 GPUs, one rack) fits only in r1; fifo and
 * backfill check each rack that has the GPUs and let H in at 1. K (2 x 4
 * GPUs, one rack, at 2) then waits for H (101): r1 holds one whole node. */
static const char *DOMAINS =
    RACK_GROUP("h", "2") RACK_GROUP("k", "2") PINNED_POD("y0", "n0", "0", "1000", "2")
    PINNED_POD("y1", "n1", "0", "1000", "4") POD("h-0", IN("h"), "1", "100", "2") POD("h-1", IN("h"), "1", "100", "2")
    POD("k-0", IN("k"), "2", "100", "4") POD("k-1", IN("k"), "2", "100", "4");

static void test_domain_search(void **state)
{
    (void)state;
    static const int modes[] = {GS_GANGQ_FIFO, GS_GANGQ_BACKFILL};
    for (size_t m = 0; m < 2; m++) {
        struct starts s;
        struct gs_sim_result res;
        run_trace(RACKS, DOMAINS, modes[m], 0, &s, &res);
        assert_int_equal(res.pods_scheduled, 6);
        assert_double_equal(start_of(&s, "default/h-0"), 1, 1e-9);
        assert_double_equal(start_of(&s, "default/h-1"), 1, 1e-9);
        const char *a = node_of(&s, "default/h-0"), *b = node_of(&s, "default/h-1");
        assert_true((!strcmp(a, "n2") || !strcmp(a, "n3")) && (!strcmp(b, "n2") || !strcmp(b, "n3")));
        assert_double_equal(start_of(&s, "default/k-0"), 101, 1e-9);
        assert_int_equal(res.gangs_started, 2);
    }
}

/* a (4 GPUs) runs 0-1000 on one of the two nodes; G (2 x 4 GPUs) waits for
 * it from 1; b (1 GPU, 1000 s) comes at 700.
 *   volcano: b fits the idle total and goes at 700; G then waits for b: 1700.
 *   volcano-reserve: G has waited 699 s (over 600) when b comes: G is
 *     reserved for (shadow start 1000, both nodes), b does not end before
 *     it and waits for G: G at 1000, b at 1100.
 *   backfill: the same (b ends past 1000 + 450). */
static const char *AGED = "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: "
                          "default}\nspec: {minMember: 2, scheduleTimeoutSeconds: 30}\n"
    POD("a", "", "0", "1000", "4") POD("g-0", IN_G, "1", "100", "4") POD("g-1", IN_G, "1", "100", "4")
    POD("b", "", "700", "1000", "1");

static void test_volcano_reserve_reserves_for_an_aged_gang(void **state)
{
    (void)state;
    static const struct {
        int mode;
        double g, b;
    } want[] = {{GS_GANGQ_VOLCANO, 1700, 700}, {GS_GANGQ_VOLCANO_RESERVE, 1000, 1100}, {GS_GANGQ_BACKFILL, 1000, 1100}};
    for (size_t k = 0; k < 3; k++) {
        struct starts s;
        struct gs_sim_result res;
        run_trace(NODES, AGED, want[k].mode, 0, &s, &res);
        assert_int_equal(res.pods_scheduled, 4);
        assert_double_equal(start_of(&s, "default/g-0"), want[k].g, 1e-9);
        assert_double_equal(start_of(&s, "default/g-1"), want[k].g, 1e-9);
        assert_double_equal(start_of(&s, "default/b"), want[k].b, 1e-9);
    }
}

static void test_auto_resolves(void **state)
{
    (void)state;
    struct gs_trace_pod tp[1] = {{.pod = mkpod("p", NULL, 1)}};
    struct gs_trace t = {.pods = tp, .npods = 1};
    assert_int_equal(gs_gangq_resolve(GS_GANGQ_AUTO, &t, false), GS_GANGQ_SCHEDULER); /* no pod group */
    tp[0].pod->pod_group = strdup("g");
    assert_int_equal(gs_gangq_resolve(GS_GANGQ_AUTO, &t, false), GS_GANGQ_BACKFILL);
    assert_int_equal(gs_gangq_resolve(GS_GANGQ_AUTO, &t, true), GS_GANGQ_SCHEDULER); /* admission decides */
    assert_int_equal(gs_gangq_resolve(GS_GANGQ_FIFO, &t, true), GS_GANGQ_FIFO);
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *cache = gs_cache_new(&clk);
    struct gs_gangq *q = (void *)1;
    struct gs_diags d = {0};
    assert_int_equal(gs_gangq_new(GS_GANGQ_AUTO, &t, NULL, cache, &clk, NULL, on_release, NULL, &q, &d), GS_EINVAL);
    assert_null(q);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, "gang_queue");
    assert_non_null(strstr(d.v[0].msg, "is not a gang queue mode (auto: gs_gangq_resolve first)"));
    gs_diags_free(&d);
    assert_int_equal(gs_gangq_new(GS_GANGQ_NMODES, &t, NULL, cache, &clk, NULL, on_release, NULL, &q, &d), GS_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "%d is not a gang queue mode", (int)GS_GANGQ_NMODES);
    assert_non_null(strstr(d.v[0].msg, want));
    gs_diags_free(&d);
    gs_cache_free(cache);
    gs_pod_clear(tp[0].pod);
    free(tp[0].pod);
    struct starts s;
    struct gs_sim_result res;
    run_trace(NODES, WORKLOAD, GS_GANGQ_AUTO, 0, &s, &res);
    assert_int_equal(res.gang_queue, GS_GANGQ_BACKFILL);
}

static void test_mode_names(void **state)
{
    (void)state;
    assert_int_equal(gs_gangq_mode_parse("scheduler"), GS_GANGQ_SCHEDULER);
    assert_int_equal(gs_gangq_mode_parse("fifo"), GS_GANGQ_FIFO);
    assert_int_equal(gs_gangq_mode_parse("volcano"), GS_GANGQ_VOLCANO);
    assert_int_equal(gs_gangq_mode_parse("reserve"), GS_GANGQ_RESERVE);
    assert_int_equal(gs_gangq_mode_parse("FIFO"), -1);
    assert_int_equal(gs_gangq_mode_parse(""), -1);
    assert_int_equal(gs_gangq_mode_parse(NULL), -1);
    assert_string_equal(gs_gangq_mode_name(GS_GANGQ_RESERVE), "reserve");
    for (int m = 0; m < GS_GANGQ_NMODES; m++) assert_int_equal(gs_gangq_mode_parse(gs_gangq_mode_name(m)), m);
    char list[256];
    gs_gangq_mode_list(list, sizeof list);
    assert_string_equal(list, "scheduler, fifo, volcano, reserve, reserve-exact, reserve-pinned, volcano-reserve, "
                              "backfill or auto");
    gs_gangq_mode_list(list, 12);
    assert_string_equal(list, "scheduler, ");
    assert_true(gs_gangq_mode_pins(GS_GANGQ_BACKFILL) && gs_gangq_mode_pins(GS_GANGQ_RESERVE));
    assert_false(gs_gangq_mode_pins(GS_GANGQ_FIFO) || gs_gangq_mode_pins(GS_GANGQ_AUTO));
}

/*--- The pin filter, on the gang queue's own API ---*/

static struct gs_pod *mkpod(const char *name, const char *group, int gpus)
{
    struct gs_pod *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->meta.name = strdup(name);
    p->meta.namespace_ = strdup("default");
    p->scheduler_name = strdup("default-scheduler");
    if (group) p->pod_group = strdup(group);
    p->demand.cpu_milli = 1000;
    p->demand.mem_bytes = (int64_t)1 << 30;
    p->demand.gpu_count = gpus;
    p->demand.gpu_milli = gpus ? 1000 : 0;
    return p;
}

static void on_release(void *ctx, size_t i) { ((int *)ctx)[i]++; }

/* Four nodes of 4 GPUs; p0 (3 GPUs on n0, ends at 100 s) and p1 (3 GPUs on n1,
 * ends at 200 s) run. The gang G (3 x 4 GPUs) cannot start until 100 s and
 * reserves n0, n2, n3 then. s (1 GPU, 1000 s) does not end before that: it is
 * let in beside the reservation, on n1's free GPU, and pinned there. */
static void test_backfill_beside_is_pinned(void **state)
{
    (void)state;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *cache = gs_cache_new(&clk);
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i);
        struct gs_node_spec ns = {.name = name, .cpu_milli = 64000, .mem_bytes = 1LL << 38, .gpu_model = "H100",
                                  .ngpus = 4, .gpu_mem_mib = 81920};
        assert_true(gs_cache_add_node_spec(cache, &ns) >= 0);
    }
    struct gs_trace_pod tp[6] = {
        {.pod = mkpod("p0", NULL, 3)}, {.pod = mkpod("p1", NULL, 3)}, {.pod = mkpod("g-0", "g", 4)},
        {.pod = mkpod("g-1", "g", 4)}, {.pod = mkpod("g-2", "g", 4)}, {.pod = mkpod("s", NULL, 1)},
    };
    struct gs_trace t = {.pods = tp, .npods = 6};
    int64_t dur[6] = {100 * GS_NS_PER_SEC, 200 * GS_NS_PER_SEC, 50 * GS_NS_PER_SEC, 50 * GS_NS_PER_SEC,
                      50 * GS_NS_PER_SEC, 1000 * GS_NS_PER_SEC};
    struct gs_assignment a0 = {.node = 0, .gpu_mask = 0x7, .milli = 1000}, a1 = {.node = 1, .gpu_mask = 0x7, .milli = 1000};
    assert_int_equal(gs_cache_add_bound(cache, tp[0].pod, &a0), 0);
    assert_int_equal(gs_cache_add_bound(cache, tp[1].pod, &a1), 0);
    int released[6] = {0};
    struct gs_gangq *q;
    struct gs_diags d = {0};
    assert_int_equal(gs_gangq_new(GS_GANGQ_RESERVE, &t, dur, cache, &clk, NULL, on_release, released, &q, &d), 0);
    gs_gangq_prebound(q, 0, 0, 3, 100 * GS_NS_PER_SEC);
    gs_gangq_prebound(q, 1, 1, 3, 200 * GS_NS_PER_SEC);
    json_t *args = gs_gangq_plugin_args(q);
    void *st = NULL;
    assert_int_equal(gs_gangq_pin_plugin.init(NULL, args, &st, &d), 0);
    for (size_t i = 2; i < 6; i++) assert_true(gs_gangq_arrive(q, i, 0));
    assert_int_equal(gs_gangq_cycle(q, 0), 1); /* s only */
    assert_int_equal(released[5], 1);
    assert_int_equal(released[2] + released[3] + released[4], 0);
    struct gs_node_info *nodes[4];
    for (int i = 0; i < 4; i++) nodes[i] = gs_cache_node(cache, i);
    uint8_t reject[4] = {0};
    gs_gangq_pin_plugin.filter(st, NULL, tp[5].pod, nodes, 4, reject);
    assert_memory_equal(reject, ((uint8_t[]){1, 0, 1, 1}), 4); /* n1 only */
    assert_false(gs_gangq_pin_plugin.by_class(st, NULL, tp[5].pod));
    memset(reject, 0, sizeof reject);
    gs_gangq_pin_plugin.filter(st, NULL, tp[2].pod, nodes, 4, reject); /* not let in: no pin */
    assert_memory_equal(reject, ((uint8_t[]){0, 0, 0, 0}), 4);
    gs_gangq_bound(q, 5, 1, 1, 0); /* bound: the pin is gone */
    assert_true(gs_gangq_pin_plugin.by_class(st, NULL, tp[5].pod));
    struct gs_gangq_stats sts;
    gs_gangq_stats(q, &sts);
    assert_int_equal(sts.backfilled, 1);
    assert_int_equal(sts.gangs, 1);
    json_decref(args);
    gs_gangq_free(q);
    gs_cache_free(cache);
    for (int i = 0; i < 6; i++) {
        gs_pod_clear(tp[i].pod);
        free(tp[i].pod);
    }
    gs_diags_free(&d);
}

/* The backfill mode's shadow start takes p0 out of the cache and puts it
 * back: the cache afterwards is the cache before (every node's free GPUs,
 * CPU and pods, p0's and p1's devices), and the cycle's decisions are those
 * of test_backfill_beside_is_pinned (s beside, on n1). */
static void test_shadow_leaves_the_cache_as_it_was(void **state)
{
    (void)state;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *cache = gs_cache_new(&clk);
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i);
        struct gs_node_spec ns = {.name = name, .cpu_milli = 64000, .mem_bytes = 1LL << 38, .gpu_model = "H100",
                                  .ngpus = 4, .gpu_mem_mib = 81920};
        assert_true(gs_cache_add_node_spec(cache, &ns) >= 0);
    }
    struct gs_trace_pod tp[6] = {
        {.pod = mkpod("p0", NULL, 3)}, {.pod = mkpod("p1", NULL, 3)}, {.pod = mkpod("g-0", "g", 4)},
        {.pod = mkpod("g-1", "g", 4)}, {.pod = mkpod("g-2", "g", 4)}, {.pod = mkpod("s", NULL, 1)},
    };
    struct gs_trace t = {.pods = tp, .npods = 6};
    int64_t dur[6] = {100 * GS_NS_PER_SEC, 200 * GS_NS_PER_SEC, 50 * GS_NS_PER_SEC, 50 * GS_NS_PER_SEC,
                      50 * GS_NS_PER_SEC, 1000 * GS_NS_PER_SEC};
    struct gs_assignment a0 = {.node = 0, .gpu_mask = 0xb, .milli = 1000}, a1 = {.node = 1, .gpu_mask = 0xe, .milli = 1000};
    assert_int_equal(gs_cache_add_bound(cache, tp[0].pod, &a0), 0);
    assert_int_equal(gs_cache_add_bound(cache, tp[1].pod, &a1), 0);
    struct gs_node_info before[4];
    int32_t milli_before[4][4];
    for (int i = 0; i < 4; i++) {
        before[i] = *gs_cache_node(cache, i);
        for (int g = 0; g < 4; g++) milli_before[i][g] = gs_cache_node(cache, i)->gpus[g].milli_free;
    }
    int released[6] = {0};
    struct gs_gangq *q;
    struct gs_diags d = {0};
    assert_int_equal(gs_gangq_new(GS_GANGQ_BACKFILL, &t, dur, cache, &clk, NULL, on_release, released, &q, &d), 0);
    gs_gangq_prebound(q, 0, 0, 3, 100 * GS_NS_PER_SEC);
    gs_gangq_prebound(q, 1, 1, 3, 200 * GS_NS_PER_SEC);
    json_t *args = gs_gangq_plugin_args(q);
    for (size_t i = 2; i < 6; i++) assert_true(gs_gangq_arrive(q, i, 0));
    assert_int_equal(gs_gangq_cycle(q, 0), 1); /* s only: G's shadow start is 100 (p0 ends), on n0, n2, n3 */
    assert_int_equal(released[5], 1);
    assert_int_equal(released[2] + released[3] + released[4], 0);
    char why[256];
    assert_int_equal(gs_cache_check(cache, why, sizeof why), 0);
    for (int i = 0; i < 4; i++) {
        const struct gs_node_info *ni = gs_cache_node(cache, i);
        assert_int_equal(ni->gpus_whole_free, before[i].gpus_whole_free);
        assert_int_equal(ni->gpu_milli_free, before[i].gpu_milli_free);
        assert_int_equal(ni->cpu_used, before[i].cpu_used);
        assert_int_equal(ni->npods, before[i].npods);
        for (int g = 0; g < 4; g++) assert_int_equal(ni->gpus[g].milli_free, milli_before[i][g]);
    }
    const struct gs_assignment *x = gs_cache_pod_assignment(cache, "default/p0");
    assert_non_null(x);
    assert_int_equal(x->node, 0);
    assert_int_equal(x->gpu_mask, 0xb);
    x = gs_cache_pod_assignment(cache, "default/p1");
    assert_non_null(x);
    assert_int_equal(x->gpu_mask, 0xe);
    assert_null(gs_cache_pod_assignment(cache, "default/g-0")); /* the check's pods are gone */
    json_decref(args);
    gs_gangq_free(q);
    gs_cache_free(cache);
    for (int i = 0; i < 6; i++) {
        gs_pod_clear(tp[i].pod);
        free(tp[i].pod);
    }
    gs_diags_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scheduler_mode_starves_the_gang),
        cmocka_unit_test(test_fifo_keeps_order),
        cmocka_unit_test(test_volcano_enqueues_what_fits_the_total),
        cmocka_unit_test(test_reserve_backfills_only_what_ends_before),
        cmocka_unit_test(test_backfill_beside_is_pinned),
        cmocka_unit_test(test_reserve_gpu_counts_miss_the_rack),
        cmocka_unit_test(test_reserve_exact_backfills_by_the_real_shadow),
        cmocka_unit_test(test_backfill_slack_lets_u_in),
        cmocka_unit_test(test_domain_search),
        cmocka_unit_test(test_volcano_reserve_reserves_for_an_aged_gang),
        cmocka_unit_test(test_auto_resolves),
        cmocka_unit_test(test_shadow_leaves_the_cache_as_it_was),
        cmocka_unit_test(test_mode_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
