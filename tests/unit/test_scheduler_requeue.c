/*
 * test_scheduler_requeue.c - requeue on cluster events through the driver
 * (scheduler.c + queue.c): a pod rejected for GPUs is tried again the moment
 * a GPU pod finishes, however long its backoff has grown; a pod rejected by a
 * node selector stays parked through pod completions and comes back on a
 * node event; gang members come back when their PodGroup arrives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sched/scheduler.h"
#include "sched_fixture.h"

#define S GS_NS_PER_SEC

struct env {
    struct gs_clock clk;
    struct gs_cache *cache;
    struct gs_sched_config cfg;
    struct gs_scheduler *s;
};

/* The server's profile: the default plugins plus Coscheduling and preemption. */
static void start(struct env *e)
{
    gs_clock_init_sim(&e->clk, 1000 * S);
    e->cache = gs_cache_new(&e->clk);
    assert_non_null(e->cache);
    assert_int_equal(gs_sched_config_gpusched(&e->cfg), 0);
    struct gs_scheduler_opts o = {.profile = &e->cfg.profiles[0]};
    struct gs_diags d = {0};
    assert_int_equal(gs_scheduler_new(&e->clk, e->cache, &o, &e->s, &d), 0);
    gs_diags_free(&d);
}

static void stop(struct env *e)
{
    gs_scheduler_free(e->s);
    gs_sched_config_free(&e->cfg);
    gs_cache_free(e->cache);
}

/* One cycle; the pod tried and its outcome. */
static const char *cycle(struct env *e, enum gs_code *code)
{
    struct gs_cycle_result r;
    int rc = gs_scheduler_run_one(e->s, &r);
    assert_true(rc >= 0);
    if (code) *code = r.code;
    return rc ? r.pod->meta.name : "(none)";
}

static void gpu_rejection_wakes_on_finish_selector_does_not(void **st)
{
    (void)st;
    struct env e;
    start(&e);
    assert_int_equal(fx_add_node(e.cache, "n0", 1, 16, 0, 0, NULL), 0);
    struct gs_pod *run = fx_pod("run", 1, 0, NULL), *wait = fx_pod("wait", 1, 0, NULL);
    /* CPU only: n0 has room for it, only its selector turns it away there. */
    struct gs_pod *sel = fx_pod_ex("sel", 0, 0, 1, 0, NULL, NULL, "\"nodeSelector\":{\"pool\":\"other\"},", NULL);
    assert_non_null(run);
    assert_non_null(wait);
    assert_non_null(sel);
    enum gs_code code;
    assert_int_equal(gs_scheduler_add_pod(e.s, run), 0);
    assert_string_equal(cycle(&e, &code), "run");
    assert_int_equal(code, GS_SUCCESS);
    assert_int_equal(gs_scheduler_add_pod(e.s, wait), 0);
    assert_int_equal(gs_scheduler_add_pod(e.s, sel), 0);
    struct gs_sched_queue *q = gs_scheduler_queue(e.s);
    /* Node events wake both; each fails again and its backoff doubles, to 10 s. */
    for (int i = 0; i < 6; i++) {
        cycle(&e, &code);
        assert_int_equal(code, GS_UNSCHEDULABLE);
        cycle(&e, &code);
        assert_int_equal(code, GS_UNSCHEDULABLE);
        assert_int_equal(gs_sched_queue_unschedulable_len(q), 2);
        gs_clock_advance(&e.clk, S / 10);
        if (i < 5) assert_int_equal(gs_sched_queue_on_event(q, GS_EV_NODE_UPDATED), 2);
    }
    assert_string_equal(cycle(&e, NULL), "(none)");
    /* The GPU pod finishes: "wait" gets its GPU in the same instant. */
    assert_int_equal(gs_scheduler_delete_pod(e.s, "default/run"), 0);
    assert_string_equal(cycle(&e, &code), "wait");
    assert_int_equal(code, GS_SUCCESS);
    /* No pod leaving can satisfy a node selector: "sel" was not even tried. */
    assert_string_equal(cycle(&e, NULL), "(none)");
    assert_int_equal(gs_sched_queue_unschedulable_len(q), 1);
    assert_int_equal(gs_scheduler_delete_pod(e.s, "default/wait"), 0);
    assert_string_equal(cycle(&e, NULL), "(none)");
    assert_int_equal(gs_sched_queue_unschedulable_len(q), 1);
    /* A node it selects arrives: tried at once although its backoff runs 10 s. */
    struct gs_labels lab = {0};
    assert_int_equal(gs_labels_set(&lab, "pool", "other"), 0);
    struct gs_node_spec sp = {.name = "n1", .cpu_milli = 16000, .mem_bytes = 64LL << 30, .gpu_model = "A100",
                              .ngpus = 1, .gpu_mem_mib = 81920, .labels = &lab};
    assert_int_equal(gs_scheduler_add_node_spec(e.s, &sp), 1);
    gs_labels_free(&lab);
    assert_string_equal(cycle(&e, &code), "sel");
    assert_int_equal(code, GS_SUCCESS);
    stop(&e);
    fx_pod_free(run);
    fx_pod_free(wait);
    fx_pod_free(sel);
}

static void gang_members_wake_when_their_podgroup_arrives(void **st)
{
    (void)st;
    struct env e;
    start(&e);
    assert_int_equal(fx_add_node(e.cache, "n0", 4, 16, 0, 0, NULL), 0);
    struct gs_pod *a = fx_pod("a", 1, 0, "g"), *b = fx_pod("b", 1, 0, "g");
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(gs_scheduler_add_pod(e.s, a), 0);
    assert_int_equal(gs_scheduler_add_pod(e.s, b), 0);
    enum gs_code code;
    cycle(&e, &code);
    assert_int_not_equal(code, GS_SUCCESS); /* no PodGroup yet */
    cycle(&e, &code);
    assert_int_not_equal(code, GS_SUCCESS);
    struct gs_sched_queue *q = gs_scheduler_queue(e.s);
    assert_int_equal(gs_sched_queue_unschedulable_len(q), 2);
    /* A node event wakes them, but without their PodGroup they fail again... */
    assert_int_equal(gs_sched_queue_on_event(q, GS_EV_NODE_UPDATED), 2);
    cycle(&e, NULL);
    cycle(&e, NULL);
    assert_string_equal(cycle(&e, NULL), "(none)");
    assert_int_equal(gs_sched_queue_unschedulable_len(q), 2);
    /* ...and the PodGroup brings them back at once, backoff or not. */
    struct gs_object *pg = fx_podgroup("g", 2, 30, NULL);
    assert_non_null(pg);
    assert_int_equal(gs_scheduler_add_podgroup(e.s, pg->u.podgroup), 0);
    assert_int_equal(gs_sched_queue_unschedulable_len(q), 0);
    for (int i = 0; i < 4; i++) {
        struct gs_cycle_result r;
        if (gs_scheduler_run_one(e.s, &r) <= 0) break;
    }
    gs_scheduler_tick(e.s);
    assert_non_null(gs_cache_pod_assignment(e.cache, "default/a"));
    assert_non_null(gs_cache_pod_assignment(e.cache, "default/b"));
    stop(&e);
    fx_pod_free(a);
    fx_pod_free(b);
    gs_object_free(pg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpu_rejection_wakes_on_finish_selector_does_not),
        cmocka_unit_test(gang_members_wake_when_their_podgroup_arrives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
