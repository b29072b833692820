/*
 * test_queue.c - the scheduling queue: QueueSort order, exponential backoff on
 * the clock, unschedulable pods moved back by matching events (and not by
 * others) and tried at once when activeQ is empty however long their backoff,
 * errors waiting their whole backoff, events seen while a pod is in flight, flush after
 * max_unschedulable_ns, delete from anywhere.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plugins/recorder.h"
#include "sched/queue.h"

#include <stdio.h>
#include <string.h>

extern const struct gs_plugin gs_plugin_priority_sort;

static bool prio_less(void *ctx, const struct gs_queued_pod *a, const struct gs_queued_pod *b)
{
    (void)ctx;
    return gs_plugin_priority_sort.less(NULL, a, b);
}

#define S GS_NS_PER_SEC

struct qenv {
    struct gs_clock clk;
    struct gs_sched_queue *q;
    struct gs_pod *pods[16];
    int n;
};

static struct gs_pod *qpod(struct qenv *e, const char *name, int32_t prio)
{
    struct gs_pod *p = test_pod("ns", name, 0, 0, 0, 0);
    p->priority = prio;
    e->pods[e->n++] = p;
    return p;
}

static void qstart(struct qenv *e)
{
    memset(e, 0, sizeof *e);
    gs_clock_init_sim(&e->clk, 100 * S);
    e->q = gs_sched_queue_new(&e->clk, NULL, prio_less, NULL);
}

static void qend(struct qenv *e)
{
    gs_sched_queue_free(e->q);
    for (int i = 0; i < e->n; i++) test_pod_free(e->pods[i]);
}

static const char *pop_name(struct qenv *e, struct gs_queued_pod *qp)
{
    struct gs_queued_pod tmp;
    if (!qp) qp = &tmp;
    return gs_sched_queue_pop(e->q, qp) ? qp->pod->meta.name : "(empty)";
}

static void active_order_is_priority_then_time(void **st)
{
    (void)st;
    struct qenv e;
    qstart(&e);
    gs_sched_queue_add(e.q, qpod(&e, "low", 0));
    gs_clock_advance(&e.clk, 1);
    gs_sched_queue_add(e.q, qpod(&e, "high", 10));
    gs_clock_advance(&e.clk, 1);
    gs_sched_queue_add(e.q, qpod(&e, "low2", 0));
    gs_sched_queue_add(e.q, qpod(&e, "high2", 10));
    assert_int_equal(gs_sched_queue_add(e.q, e.pods[0]), GS_EEXIST);
    assert_int_equal(gs_sched_queue_active_len(e.q), 4);
    assert_string_equal(pop_name(&e, NULL), "high");
    assert_string_equal(pop_name(&e, NULL), "high2");
    assert_string_equal(pop_name(&e, NULL), "low");
    assert_string_equal(pop_name(&e, NULL), "low2");
    assert_string_equal(pop_name(&e, NULL), "(empty)");
    qend(&e);
}

static void backoff_doubles_up_to_the_cap(void **st)
{
    (void)st;
    struct qenv e;
    qstart(&e);
    gs_sched_queue_add(e.q, qpod(&e, "p", 0));
    int64_t expect[] = {1 * S, 2 * S, 4 * S, 8 * S, 10 * S, 10 * S};
    for (int i = 0; i < 6; i++) {
        struct gs_queued_pod qp;
        assert_string_equal(pop_name(&e, &qp), "p");
        assert_int_equal(qp.attempts, i);
        int64_t now = gs_clock_now(&e.clk);
        assert_int_equal(gs_sched_queue_requeue(e.q, &qp, false, 0), 0);
        assert_int_equal(gs_sched_queue_backoff_len(e.q), 1);
        assert_int_equal(gs_sched_queue_next_ready(e.q), now + expect[i]);
        gs_clock_set(&e.clk, now + expect[i] - 1);
        assert_string_equal(pop_name(&e, NULL), "(empty)");
        gs_clock_set(&e.clk, now + expect[i]);
    }
    assert_string_equal(pop_name(&e, NULL), "p");
    assert_int_equal(gs_sched_queue_next_ready(e.q), -1);
    /* Requeue is only for in-flight pods. */
    gs_sched_queue_done(e.q, "ns/p");
    struct gs_queued_pod ghost = {.pod = e.pods[0]};
    assert_int_equal(gs_sched_queue_requeue(e.q, &ghost, false, 0), GS_ENOENT);
    qend(&e);
}

static void events_move_unschedulable_pods(void **st)
{
    (void)st;
    struct qenv e;
    qstart(&e);
    gs_sched_queue_add(e.q, qpod(&e, "a", 0));
    gs_sched_queue_add(e.q, qpod(&e, "b", 0));
    struct gs_queued_pod qa, qb;
    pop_name(&e, &qa);
    pop_name(&e, &qb);
    gs_sched_queue_requeue(e.q, &qa, true, GS_EV_NODE_ADDED);
    gs_sched_queue_requeue(e.q, &qb, true, GS_EV_POD_DELETED);
    assert_int_equal(gs_sched_queue_unschedulable_len(e.q), 2);
    /* Unschedulable pods are not retried by time alone (until the flush). */
    gs_clock_advance(&e.clk, 60 * S);
    assert_string_equal(pop_name(&e, NULL), "(empty)");
    assert_int_equal(gs_sched_queue_on_event(e.q, GS_EV_DEVICE_FREED), 0);
    assert_int_equal(gs_sched_queue_on_event(e.q, GS_EV_NODE_ADDED), 1);
    /* Its backoff (1 s) is long over: straight to activeQ. */
    assert_int_equal(gs_sched_queue_active_len(e.q), 1);
    assert_string_equal(pop_name(&e, &qa), "a");
    /* b is moved while still backing off: it waits in backoffQ first. */
    gs_sched_queue_requeue(e.q, &qa, true, GS_EV_NODE_ADDED);
    pop_name(&e, NULL);
    gs_sched_queue_on_event(e.q, GS_EV_POD_DELETED);
    assert_int_equal(gs_sched_queue_active_len(e.q), 1);
    pop_name(&e, &qb);
    gs_sched_queue_requeue(e.q, &qb, true, GS_EV_POD_DELETED); /* attempt 2: 2 s backoff */
    assert_int_equal(gs_sched_queue_on_event(e.q, GS_EV_POD_DELETED), 1);
    assert_int_equal(gs_sched_queue_backoff_len(e.q), 1);
    /* Woken by the event, it still yields to active pods; once activeQ is
     * empty it is tried at once, not after its 2 s. */
    gs_sched_queue_add(e.q, qpod(&e, "c", -5));
    assert_string_equal(pop_name(&e, NULL), "c");
    assert_string_equal(pop_name(&e, &qb), "b");
    assert_int_equal(gs_sched_queue_backoff_len(e.q), 0);
    /* Failing again it waits for the next event, not for time. */
    gs_sched_queue_requeue(e.q, &qb, true, GS_EV_POD_DELETED);
    gs_clock_advance(&e.clk, 60 * S);
    assert_string_equal(pop_name(&e, NULL), "(empty)");
    assert_int_equal(gs_sched_queue_unschedulable_len(e.q), 2); /* a and b */
    qend(&e);
}

/* The 40-pods-on-8-GPUs case at queue level: every completion wakes the
 * waiting pods however many times they failed, so none idles out a backoff
 * that has grown to seconds while a GPU is free. */
static void repeated_failures_do_not_delay_event_wakeups(void **st)
{
    (void)st;
    struct qenv e;
    qstart(&e);
    gs_sched_queue_add(e.q, qpod(&e, "w", 0));
    struct gs_queued_pod qp;
    for (int i = 0; i < 6; i++) { /* backoff now 10 s */
        assert_string_equal(pop_name(&e, &qp), "w");
        gs_sched_queue_requeue(e.q, &qp, true, GS_EV_POD_DELETED);
        assert_int_equal(gs_sched_queue_unschedulable_len(e.q), 1);
        gs_clock_advance(&e.clk, S / 10);
        assert_int_equal(gs_sched_queue_on_event(e.q, GS_EV_POD_DELETED), 1);
    }
    assert_string_equal(pop_name(&e, &qp), "w");
    assert_int_equal(qp.attempts, 6);
    qend(&e);
}

/* An error is not an event: such a pod waits its whole backoff even when
 * nothing else is queued and events go by. */
static void error_backoff_is_not_cut_short(void **st)
{
    (void)st;
    struct qenv e;
    qstart(&e);
    gs_sched_queue_add(e.q, qpod(&e, "err", 0));
    struct gs_queued_pod qp;
    pop_name(&e, &qp);
    gs_sched_queue_requeue(e.q, &qp, false, 0);
    assert_int_equal(gs_sched_queue_on_event(e.q, GS_EV_ALL), 0);
    assert_string_equal(pop_name(&e, NULL), "(empty)");
    gs_clock_advance(&e.clk, S);
    assert_string_equal(pop_name(&e, NULL), "err");
    qend(&e);
}

static void event_during_flight_is_not_lost(void **st)
{
    (void)st;
    struct qenv e;
    qstart(&e);
    gs_sched_queue_add(e.q, qpod(&e, "a", 0));
    struct gs_queued_pod qa;
    pop_name(&e, &qa);
    gs_sched_queue_on_event(e.q, GS_EV_NODE_ADDED); /* while "a" is being scheduled */
    gs_sched_queue_requeue(e.q, &qa, true, GS_EV_NODE_ADDED);
    assert_int_equal(gs_sched_queue_unschedulable_len(e.q), 0);
    assert_int_equal(gs_sched_queue_backoff_len(e.q), 1);
    /* An event it does not wait for does not count. */
    gs_clock_advance(&e.clk, 2 * S);
    pop_name(&e, &qa);
    gs_sched_queue_on_event(e.q, GS_EV_POD_ADDED);
    gs_sched_queue_requeue(e.q, &qa, true, GS_EV_NODE_ADDED);
    assert_int_equal(gs_sched_queue_unschedulable_len(e.q), 1);
    qend(&e);
}

static void unschedulable_pods_are_flushed(void **st)
{
    (void)st;
    struct qenv e;
    qstart(&e);
    gs_sched_queue_add(e.q, qpod(&e, "a", 0));
    gs_sched_queue_add(e.q, qpod(&e, "b", 0));
    struct gs_queued_pod qa, qb;
    pop_name(&e, &qa);
    gs_sched_queue_requeue(e.q, &qa, true, GS_EV_NODE_ADDED);
    gs_clock_advance(&e.clk, 100 * S);
    pop_name(&e, &qb);
    gs_sched_queue_requeue(e.q, &qb, true, GS_EV_NODE_ADDED);
    gs_clock_advance(&e.clk, 200 * S - 1);
    assert_string_equal(pop_name(&e, NULL), "(empty)");
    gs_clock_advance(&e.clk, 1);
    assert_string_equal(pop_name(&e, NULL), "a");
    assert_string_equal(pop_name(&e, NULL), "(empty)");
    assert_int_equal(gs_sched_queue_unschedulable_len(e.q), 1);
    gs_clock_advance(&e.clk, 100 * S);
    assert_string_equal(pop_name(&e, NULL), "b");
    qend(&e);
}

static void delete_from_anywhere(void **st)
{
    (void)st;
    struct qenv e;
    qstart(&e);
    for (int i = 0; i < 8; i++) {
        char name[8];
        snprintf(name, sizeof name, "p%d", i);
        gs_sched_queue_add(e.q, qpod(&e, name, i));
    }
    struct gs_queued_pod q7, q6;
    pop_name(&e, &q7);
    pop_name(&e, &q6);
    gs_sched_queue_requeue(e.q, &q7, false, 0);
    gs_sched_queue_requeue(e.q, &q6, true, GS_EV_ALL);
    assert_int_equal(gs_sched_queue_delete(e.q, "ns/p7"), 0);
    assert_int_equal(gs_sched_queue_delete(e.q, "ns/p6"), 0);
    assert_int_equal(gs_sched_queue_delete(e.q, "ns/p3"), 0);
    assert_int_equal(gs_sched_queue_delete(e.q, "ns/p3"), GS_ENOENT);
    assert_int_equal(gs_sched_queue_backoff_len(e.q), 0);
    assert_int_equal(gs_sched_queue_unschedulable_len(e.q), 0);
    const char *want[] = {"p5", "p4", "p2", "p1", "p0"};
    for (int i = 0; i < 5; i++) assert_string_equal(pop_name(&e, NULL), want[i]);
    assert_string_equal(pop_name(&e, NULL), "(empty)");
    qend(&e);
}

static void custom_backoff_options(void **st)
{
    (void)st;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_queue_opts o = {.initial_backoff_ns = 100, .max_backoff_ns = 250, .max_unschedulable_ns = 1000};
    struct gs_sched_queue *q = gs_sched_queue_new(&clk, &o, prio_less, NULL);
    struct gs_pod *p = test_pod("ns", "p", 0, 0, 0, 0);
    gs_sched_queue_add(q, p);
    int64_t expect[] = {100, 200, 250};
    for (int i = 0; i < 3; i++) {
        struct gs_queued_pod qp;
        assert_true(gs_sched_queue_pop(q, &qp));
        int64_t now = gs_clock_now(&clk);
        gs_sched_queue_requeue(q, &qp, false, 0);
        assert_int_equal(gs_sched_queue_next_ready(q), now + expect[i]);
        gs_clock_advance(&clk, expect[i]);
    }
    gs_sched_queue_free(q);
    test_pod_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(active_order_is_priority_then_time),
        cmocka_unit_test(backoff_doubles_up_to_the_cap),
        cmocka_unit_test(events_move_unschedulable_pods),
        cmocka_unit_test(repeated_failures_do_not_delay_event_wakeups),
        cmocka_unit_test(error_backoff_is_not_cut_short),
        cmocka_unit_test(event_during_flight_is_not_lost),
        cmocka_unit_test(unschedulable_pods_are_flushed),
        cmocka_unit_test(delete_from_anywhere),
        cmocka_unit_test(custom_backoff_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
