/*
 * test_queue_reactivate.c - gs_sched_queue_reactivate is delete + add.
 *
 * Two queues see the same random stream of adds, pops, requeues (backoff
 * and unschedulable), cluster events, deletes, time passing and
 * reactivations; one reactivates in place, the other deletes and adds as
 * the scheduler did before. QueueSort is priority only, so many pods tie
 * and the pop order depends on the heap's layout too. Every pop must give
 * the same pod with the same attempts, seq and times, and the queue lengths
 * must agree after every step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plugins/recorder.h"
#include "sched/queue.h"
#include "sched/strmap.h"

#include <stdio.h>

#define NPODS 64

static bool by_priority(void *ctx, const struct gs_queued_pod *a, const struct gs_queued_pod *b)
{
    (void)ctx;
    return a->pod->priority > b->pod->priority; /* ties left to the heap */
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static void reactivate_is_delete_and_add(void **st)
{
    (void)st;
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_sched_queue *a = gs_sched_queue_new(&clock, NULL, by_priority, NULL);
    struct gs_sched_queue *b = gs_sched_queue_new(&clock, NULL, by_priority, NULL);
    assert_non_null(a);
    assert_non_null(b);
    struct gs_pod *pods[NPODS];
    for (int i = 0; i < NPODS; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%02d", i);
        pods[i] = test_pod("ns", name, 100, 1 << 20, 0, 0);
        pods[i]->priority = (int32_t)(i % 3);
    }
    struct gs_queued_pod flight[NPODS];
    int nflight = 0, reactivated = 0, pops = 0;
    uint64_t rng = 12345;
    for (int step = 0; step < 20000; step++) {
        uint64_t op = rnd(&rng) % 16;
        struct gs_pod *p = pods[rnd(&rng) % NPODS];
        char key[GS__KEY_MAX];
        gs__pod_key(p, key, sizeof key);
        if (op < 3) {
            assert_int_equal(gs_sched_queue_add(a, p), gs_sched_queue_add(b, p));
        } else if (op < 6) {
            struct gs_queued_pod x, y;
            bool ok = gs_sched_queue_pop(a, &x);
            assert_int_equal(ok, gs_sched_queue_pop(b, &y));
            if (!ok) continue;
            pops++;
            assert_ptr_equal(x.pod, y.pod);
            assert_int_equal(x.attempts, y.attempts);
            assert_int_equal(x.seq, y.seq);
            assert_int_equal(x.enqueued_ns, y.enqueued_ns);
            assert_int_equal(x.timestamp_ns, y.timestamp_ns);
            flight[nflight++] = x;
        } else if (op < 9 && nflight) { /* a popped pod failed */
            int k = (int)(rnd(&rng) % (uint64_t)nflight);
            struct gs_queued_pod qp = flight[k];
            flight[k] = flight[--nflight];
            bool unsched = rnd(&rng) % 2;
            unsigned mask = (unsigned)(1u << (rnd(&rng) % 7));
            assert_int_equal(gs_sched_queue_requeue(a, &qp, unsched, mask), gs_sched_queue_requeue(b, &qp, unsched, mask));
        } else if (op == 9 && nflight) { /* a popped pod was scheduled */
            int k = (int)(rnd(&rng) % (uint64_t)nflight);
            char fk[GS__KEY_MAX];
            gs__pod_key(flight[k].pod, fk, sizeof fk);
            gs_sched_queue_done(a, fk);
            gs_sched_queue_done(b, fk);
            flight[k] = flight[--nflight];
        } else if (op == 10) {
            enum gs_cluster_event ev = (enum gs_cluster_event)(1u << (rnd(&rng) % 7));
            assert_int_equal(gs_sched_queue_on_event(a, ev), gs_sched_queue_on_event(b, ev));
        } else if (op == 11) {
            assert_int_equal(gs_sched_queue_delete(a, key), gs_sched_queue_delete(b, key));
            for (int k = 0; k < nflight; k++)
                if (flight[k].pod == p) flight[k--] = flight[--nflight];
        } else if (op == 12) {
            gs_clock_set(&clock, gs_clock_now(&clock) + (int64_t)(rnd(&rng) % 4000) * 1000000);
        } else { /* activate: in place on a, delete + add on b */
            bool inflight = false;
            for (int k = 0; k < nflight; k++) inflight = inflight || flight[k].pod == p;
            if (inflight) continue; /* the scheduler never activates the pod it is scheduling */
            int ra = gs_sched_queue_reactivate(a, p, key);
            int rb = gs_sched_queue_delete(b, key) == 0 ? gs_sched_queue_add(b, p) : GS_ENOENT;
            assert_int_equal(ra, rb);
            reactivated += ra == 0;
        }
        assert_int_equal(gs_sched_queue_active_len(a), gs_sched_queue_active_len(b));
        assert_int_equal(gs_sched_queue_backoff_len(a), gs_sched_queue_backoff_len(b));
        assert_int_equal(gs_sched_queue_unschedulable_len(a), gs_sched_queue_unschedulable_len(b));
        assert_int_equal(gs_sched_queue_next_ready(a), gs_sched_queue_next_ready(b));
    }
    assert_true(reactivated > 1000);
    assert_true(pops > 1000);
    gs_sched_queue_free(a);
    gs_sched_queue_free(b);
    for (int i = 0; i < NPODS; i++) test_pod_free(pods[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(reactivate_is_delete_and_add)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
