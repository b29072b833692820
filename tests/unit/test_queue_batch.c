/*
 * test_queue_batch.c - gs_sched_queue_reactivate_many is
 * gs_sched_queue_reactivate of each pod in turn.
 *
 * Two queues see the same random stream of adds, pops, requeues, cluster
 * events, deletes, time passing and gang-style batches (a group's pods not
 * in flight, often the previous batch less what was popped since, sometimes
 * shuffled, with a duplicate or with pods the queue does not hold); one
 * takes each batch in one call, the other reactivates pod by pod. Every pop
 * must give the same pod with the same attempts, seq and times, every call
 * the same count, and the queue lengths must agree after every step. Both
 * QueueSorts are strict orders broken by seq, as the plugins' are; one of
 * them reads the activeQ timestamp too (PrioritySort's shape). A second test
 * follows a gang of 200 through its members' Permits and checks that the
 * batches after the first one are kept in place.
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
#define GROUP 8

/* Coscheduling's shape: priority, then insertion order. */
static bool by_priority_seq(void *ctx, const struct gs_queued_pod *a, const struct gs_queued_pod *b)
{
    (void)ctx;
    if (a->pod->priority != b->pod->priority) return a->pod->priority > b->pod->priority;
    return a->seq < b->seq;
}

/* PrioritySort's shape: priority, activeQ time, insertion order. */
static bool by_priority_time_seq(void *ctx, const struct gs_queued_pod *a, const struct gs_queued_pod *b)
{
    (void)ctx;
    if (a->pod->priority != b->pod->priority) return a->pod->priority > b->pod->priority;
    if (a->timestamp_ns != b->timestamp_ns) return a->timestamp_ns < b->timestamp_ns;
    return a->seq < b->seq;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static size_t one_by_one(struct gs_sched_queue *q, const struct gs_pod *const *pods, size_t n)
{
    size_t done = 0;
    for (size_t i = 0; i < n; i++) {
        char key[GS__KEY_MAX];
        gs__pod_key(pods[i], key, sizeof key);
        done += gs_sched_queue_reactivate(q, pods[i], key) == 0;
    }
    return done;
}

static bool in_flight(const struct gs_queued_pod *flight, int nflight, const struct gs_pod *p)
{
    for (int k = 0; k < nflight; k++)
        if (flight[k].pod == p) return true;
    return false;
}

static void assert_same_pop(struct gs_sched_queue *a, struct gs_sched_queue *b, struct gs_queued_pod *x, bool *ok)
{
    struct gs_queued_pod y;
    *ok = gs_sched_queue_pop(a, x);
    assert_int_equal(*ok, gs_sched_queue_pop(b, &y));
    if (!*ok) return;
    assert_ptr_equal(x->pod, y.pod);
    assert_int_equal(x->attempts, y.attempts);
    assert_int_equal(x->seq, y.seq);
    assert_int_equal(x->enqueued_ns, y.enqueued_ns);
    assert_int_equal(x->timestamp_ns, y.timestamp_ns);
}

static void run_stream(bool (*less)(void *, const struct gs_queued_pod *, const struct gs_queued_pod *), uint64_t rng)
{
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_sched_queue *a = gs_sched_queue_new(&clock, NULL, less, NULL);
    struct gs_sched_queue *b = gs_sched_queue_new(&clock, NULL, less, NULL);
    assert_non_null(a);
    assert_non_null(b);
    struct gs_pod *pods[NPODS];
    for (int i = 0; i < NPODS; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%02d", i);
        pods[i] = test_pod("ns", name, 100, 1 << 20, 0, 0);
        pods[i]->priority = (int32_t)((i / GROUP) % 3);
    }
    struct gs_queued_pod flight[NPODS];
    const struct gs_pod *batch[2 * GROUP + 2];
    int nflight = 0, pops = 0, batches = 0, group = 0;
    for (int step = 0; step < 40000; step++) {
        uint64_t op = rnd(&rng) % 32;
        struct gs_pod *p = pods[rnd(&rng) % NPODS];
        char key[GS__KEY_MAX];
        gs__pod_key(p, key, sizeof key);
        if (op < 3) {
            assert_int_equal(gs_sched_queue_add(a, p), gs_sched_queue_add(b, p));
        } else if (op < 12) {
            struct gs_queued_pod x;
            bool ok;
            assert_same_pop(a, b, &x, &ok);
            if (!ok) continue;
            pops++;
            flight[nflight++] = x;
        } else if (op < 15 && nflight) { /* a popped pod failed */
            int k = (int)(rnd(&rng) % (uint64_t)nflight);
            struct gs_queued_pod qp = flight[k];
            flight[k] = flight[--nflight];
            bool unsched = rnd(&rng) % 2;
            unsigned mask = (unsigned)(1u << (rnd(&rng) % 7));
            assert_int_equal(gs_sched_queue_requeue(a, &qp, unsched, mask), gs_sched_queue_requeue(b, &qp, unsched, mask));
        } else if (op == 15 && nflight) { /* a popped pod was scheduled */
            int k = (int)(rnd(&rng) % (uint64_t)nflight);
            char fk[GS__KEY_MAX];
            gs__pod_key(flight[k].pod, fk, sizeof fk);
            gs_sched_queue_done(a, fk);
            gs_sched_queue_done(b, fk);
            flight[k] = flight[--nflight];
        } else if (op == 16) {
            enum gs_cluster_event ev = (enum gs_cluster_event)(1u << (rnd(&rng) % 7));
            assert_int_equal(gs_sched_queue_on_event(a, ev), gs_sched_queue_on_event(b, ev));
        } else if (op == 17) {
            assert_int_equal(gs_sched_queue_delete(a, key), gs_sched_queue_delete(b, key));
            for (int k = 0; k < nflight; k++)
                if (flight[k].pod == p) flight[k--] = flight[--nflight];
        } else if (op == 18) {
            gs_clock_set(&clock, gs_clock_now(&clock) + (int64_t)(rnd(&rng) % 4000) * 1000000);
        } else if (op == 19) { /* a single activation */
            if (in_flight(flight, nflight, p)) continue;
            assert_int_equal(gs_sched_queue_reactivate(a, p, key), gs_sched_queue_reactivate(b, p, key));
        } else { /* a batch: mostly the same group as last time */
            if (rnd(&rng) % 8 == 0) group = (int)(rnd(&rng) % (NPODS / GROUP));
            size_t n = 0;
            for (int i = group * GROUP; i < (group + 1) * GROUP; i++)
                if (!in_flight(flight, nflight, pods[i])) batch[n++] = pods[i];
            uint64_t twist = rnd(&rng) % 16;
            if (twist == 0 && n > 1) { /* out of order */
                const struct gs_pod *t = batch[0];
                batch[0] = batch[n - 1], batch[n - 1] = t;
            } else if (twist == 1 && n) { /* a duplicate */
                batch[n] = batch[rnd(&rng) % n];
                n++;
            } else if (twist == 2 && n) { /* one left out */
                batch[rnd(&rng) % n] = batch[n - 1];
                n--;
            } else if (twist == 3) { /* a pod of another group, maybe not queued */
                batch[n++] = pods[rnd(&rng) % NPODS];
                if (in_flight(flight, nflight, batch[n - 1])) n--;
            }
            assert_int_equal(gs_sched_queue_reactivate_many(a, batch, n), one_by_one(b, batch, n));
            batches++;
        }
        assert_int_equal(gs_sched_queue_active_len(a), gs_sched_queue_active_len(b));
        assert_int_equal(gs_sched_queue_backoff_len(a), gs_sched_queue_backoff_len(b));
        assert_int_equal(gs_sched_queue_unschedulable_len(a), gs_sched_queue_unschedulable_len(b));
        assert_int_equal(gs_sched_queue_next_ready(a), gs_sched_queue_next_ready(b));
    }
    /* Drain what is left: the same order to the end. */
    for (;;) {
        struct gs_queued_pod x;
        bool ok;
        assert_same_pop(a, b, &x, &ok);
        if (!ok) break;
    }
    assert_true(pops > 5000);
    assert_true(batches > 5000);
    assert_true(gs_sched_queue_batches_kept(a) > 500); /* the in-place path was taken, and checked */
    assert_true(gs_sched_queue_batches_kept(a) < (size_t)batches);
    assert_int_equal(gs_sched_queue_batches_kept(b), 0);
    gs_sched_queue_free(a);
    gs_sched_queue_free(b);
    for (int i = 0; i < NPODS; i++) test_pod_free(pods[i]);
}

static void many_is_one_by_one(void **st)
{
    (void)st;
    run_stream(by_priority_seq, 12345);
    run_stream(by_priority_seq, 777);
    run_stream(by_priority_time_seq, 4242);
    run_stream(by_priority_time_seq, 99);
}

/* A gang of 200 and 20 other pods: each member popped in turn brings its
 * unplaced siblings back; after the first batch every one is kept in place,
 * and the pops are those of one by one reactivation. */
static void gang_batches_kept_in_place(void **st)
{
    (void)st;
    enum { N = 200, OTHERS = 20 };
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_sched_queue *a = gs_sched_queue_new(&clock, NULL, by_priority_time_seq, NULL);
    struct gs_sched_queue *b = gs_sched_queue_new(&clock, NULL, by_priority_time_seq, NULL);
    struct gs_pod *pods[N + OTHERS];
    const struct gs_pod *sibs[N];
    for (int i = 0; i < N + OTHERS; i++) {
        char name[16];
        snprintf(name, sizeof name, "%s%03d", i < N ? "m" : "o", i);
        pods[i] = test_pod("ns", name, 100, 1 << 20, 0, 0);
        pods[i]->priority = i < N ? 1 : 0;
        assert_int_equal(gs_sched_queue_add(a, pods[i]), 0);
        assert_int_equal(gs_sched_queue_add(b, pods[i]), 0);
    }
    for (int k = 0; k < N; k++) { /* member k is popped, reserved, and waits */
        struct gs_queued_pod x;
        bool ok;
        assert_same_pop(a, b, &x, &ok);
        assert_true(ok);
        assert_ptr_equal(x.pod, pods[k]);
        size_t n = 0;
        for (int i = k + 1; i < N; i++) sibs[n++] = pods[i];
        assert_int_equal(gs_sched_queue_reactivate_many(a, sibs, n), n);
        assert_int_equal(one_by_one(b, sibs, n), n);
    }
    assert_int_equal(gs_sched_queue_batches_kept(a), N - 1);
    for (int k = 0; k < OTHERS; k++) {
        struct gs_queued_pod x;
        bool ok;
        assert_same_pop(a, b, &x, &ok);
        assert_true(ok);
        assert_ptr_equal(x.pod, pods[N + k]);
    }
    gs_sched_queue_free(a);
    gs_sched_queue_free(b);
    for (int i = 0; i < N + OTHERS; i++) test_pod_free(pods[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(many_is_one_by_one),
        cmocka_unit_test(gang_batches_kept_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
