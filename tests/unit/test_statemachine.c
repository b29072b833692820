/*
 * test_statemachine.c - the per-node GPU stack state machine: every
 * transition, failures with exponential backoff and retry, answer timeouts,
 * stale answers, disabled components, re-drives and lost agents, and save /
 * restore across a restart. Time is a simulated clock moved by hand.
 */
#include "core/clock.h"
#include "govern/statemachine.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#define S GS_NS_PER_SEC
#define ALL (GS_STEP_BIT(GS_STEP_DRIVER) | GS_STEP_BIT(GS_STEP_TOOLKIT) | GS_STEP_BIT(GS_STEP_DEVICE_PLUGIN) | \
             GS_STEP_BIT(GS_STEP_MIG) | GS_STEP_BIT(GS_STEP_MONITORING))

static struct gs_stack_cfg cfg(uint32_t enabled)
{
    return (struct gs_stack_cfg){enabled, 1 * S, 8 * S, 30 * S};
}

/* Every step enabled and the node's agent up at time 0: the machine waits at the driver step. */
static void started(struct gs_stack_sm *m, struct gs_stack_change *ch)
{
    struct gs_stack_cfg c = cfg(ALL);
    gs_stack_sm_init(m, &c, 1, 0);
    gs_stack_sm_node(m, true, 0, ch);
}

/* Requests and answers ok at the current step; returns the change. */
static struct gs_stack_change pass(struct gs_stack_sm *m, int64_t now)
{
    struct gs_stack_change ch;
    memset(&ch, 0, sizeof ch);
    assert_true(gs_stack_sm_request(m, now));
    assert_true(gs_stack_sm_answer(m, m->step, m->attempt, true, "fine", now, &ch));
    return ch;
}

static void names_and_reasons(void **state)
{
    (void)state;
    assert_string_equal(gs_step_name(GS_STEP_DEVICE_PLUGIN), "device-plugin");
    assert_string_equal(gs_step_reason(GS_STEP_MIG), "MIGConfiguring");
    assert_string_equal(gs_step_reason(GS_STEP_READY), "Ready");
    for (int s = 0; s < GS_STEP_COUNT; s++) assert_int_equal(gs_step_parse(gs_step_name(s)), s);
    assert_int_equal(gs_step_parse("bogus"), -1);
    assert_int_equal(gs_step_parse(NULL), -1);
}

static void walks_every_step_in_order(void **state)
{
    (void)state;
    struct gs_stack_sm m;
    struct gs_stack_cfg c = cfg(ALL);
    struct gs_stack_change ch;
    gs_stack_sm_init(&m, &c, 1, 0);
    assert_int_equal(m.step, GS_STEP_NOT_READY);
    assert_false(gs_stack_sm_request(&m, 0)); /* nothing to validate before the agent is up */
    assert_true(gs_stack_sm_node(&m, true, 1, &ch));
    assert_int_equal(ch.from, GS_STEP_NOT_READY);
    assert_int_equal(ch.to, GS_STEP_DRIVER);
    enum gs_step want[] = {GS_STEP_TOOLKIT, GS_STEP_DEVICE_PLUGIN, GS_STEP_MIG, GS_STEP_MONITORING, GS_STEP_READY};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        enum gs_step from = m.step;
        ch = pass(&m, 2 + (int64_t)i);
        assert_int_equal(ch.from, from);
        assert_int_equal(ch.to, want[i]);
        assert_false(ch.failure);
        assert_int_equal(m.step, want[i]);
        assert_int_equal(m.entered_ns, 2 + (int64_t)i);
    }
    assert_false(gs_stack_sm_request(&m, 100)); /* ready asks nothing */
    assert_int_equal(m.transitions, 6);
    assert_non_null(strstr(m.message, "every enabled"));
}

static void disabled_components_are_skipped(void **state)
{
    (void)state;
    struct gs_stack_sm m;
    struct gs_stack_cfg c = cfg(GS_STEP_BIT(GS_STEP_DRIVER) | GS_STEP_BIT(GS_STEP_MONITORING));
    struct gs_stack_change ch;
    gs_stack_sm_init(&m, &c, 1, 0);
    gs_stack_sm_node(&m, true, 0, &ch);
    assert_int_equal(m.step, GS_STEP_DRIVER);
    ch = pass(&m, 1);
    assert_int_equal(ch.to, GS_STEP_MONITORING);
    assert_non_null(strstr(ch.message, "validating monitoring"));
    ch = pass(&m, 2);
    assert_int_equal(ch.to, GS_STEP_READY);
    /* Nothing enabled: straight to ready once the agent is up. */
    c = cfg(0);
    gs_stack_sm_init(&m, &c, 1, 0);
    assert_true(gs_stack_sm_node(&m, true, 5, &ch));
    assert_int_equal(ch.to, GS_STEP_READY);
    assert_non_null(strstr(m.message, "disabled"));
    /* Only the first step disabled: the machine starts at the second. */
    c = cfg(ALL & ~GS_STEP_BIT(GS_STEP_DRIVER));
    gs_stack_sm_init(&m, &c, 1, 0);
    gs_stack_sm_node(&m, true, 0, &ch);
    assert_int_equal(m.step, GS_STEP_TOOLKIT);
}

static void failure_keeps_step_and_backs_off(void **state)
{
    (void)state;
    struct gs_stack_sm m;
    struct gs_stack_change ch;
    started(&m, &ch);
    pass(&m, 0); /* driver ok: at toolkit */
    int64_t now = 10 * S;
    int64_t waits[] = {1 * S, 2 * S, 4 * S, 8 * S, 8 * S}; /* doubled, capped at 8 s */
    int first = m.attempt + 1;
    for (int k = 0; k < 5; k++) {
        assert_true(gs_stack_sm_request(&m, now));
        assert_int_equal(m.attempt, first + k);
        assert_false(gs_stack_sm_request(&m, now)); /* one request at a time */
        assert_true(gs_stack_sm_answer(&m, GS_STEP_TOOLKIT, first + k, false, "no CDI spec", now, &ch));
        assert_true(ch.failure);
        assert_int_equal(ch.from, GS_STEP_TOOLKIT);
        assert_int_equal(ch.to, GS_STEP_TOOLKIT);
        assert_int_equal(m.step, GS_STEP_TOOLKIT);
        assert_int_equal(m.failures, k + 1);
        assert_int_equal(m.next_try_ns, now + waits[k]);
        assert_non_null(strstr(m.message, "no CDI spec"));
        char att[32];
        snprintf(att, sizeof att, "(attempt %d,", k + 1); /* per step, for people */
        assert_non_null(strstr(m.message, att));
        assert_non_null(strstr(m.message, "retry in"));
        assert_false(gs_stack_sm_request(&m, now + waits[k] - 1)); /* not before the backoff ends */
        now += waits[k];
    }
    assert_int_equal(m.total_failures, 5);
    /* Fixed: the next attempt passes and the failure count resets. */
    ch = pass(&m, now);
    assert_int_equal(ch.to, GS_STEP_DEVICE_PLUGIN);
    assert_int_equal(m.failures, 0);
    assert_int_equal(m.total_failures, 5);
}

static void backoff_function(void **state)
{
    (void)state;
    struct gs_stack_cfg c = {0, 250 * GS_NS_PER_MS, 3 * S, 0};
    assert_int_equal(gs_stack_backoff(&c, 1), 250 * GS_NS_PER_MS);
    assert_int_equal(gs_stack_backoff(&c, 2), 500 * GS_NS_PER_MS);
    assert_int_equal(gs_stack_backoff(&c, 4), 2 * S);
    assert_int_equal(gs_stack_backoff(&c, 5), 3 * S);
    assert_int_equal(gs_stack_backoff(&c, 1000), 3 * S); /* no overflow */
}

static void unanswered_request_times_out_with_reason(void **state)
{
    (void)state;
    struct gs_stack_sm m;
    struct gs_stack_change ch;
    started(&m, &ch);
    assert_true(gs_stack_sm_request(&m, 0));
    assert_false(gs_stack_sm_tick(&m, 30 * S - 1, &ch));
    assert_true(gs_stack_sm_tick(&m, 30 * S, &ch));
    assert_true(ch.failure);
    assert_non_null(strstr(m.message, "no answer from the node's agent"));
    assert_false(m.waiting);
    /* A late answer to the timed-out attempt is stale. */
    assert_false(gs_stack_sm_answer(&m, GS_STEP_DRIVER, 1, true, "", 31 * S, &ch));
    assert_int_equal(m.step, GS_STEP_DRIVER);
    /* The retry (attempt 2) is answered and moves on. */
    assert_true(gs_stack_sm_request(&m, 31 * S));
    assert_int_equal(m.attempt, 2);
    assert_true(gs_stack_sm_answer(&m, GS_STEP_DRIVER, 2, true, "", 31 * S, &ch));
    assert_int_equal(m.step, GS_STEP_TOOLKIT);
}

static void stale_answers_are_ignored(void **state)
{
    (void)state;
    struct gs_stack_sm m;
    struct gs_stack_change ch;
    started(&m, &ch);
    assert_false(gs_stack_sm_answer(&m, GS_STEP_DRIVER, 1, true, "", 0, &ch)); /* nothing asked */
    gs_stack_sm_request(&m, 0);
    assert_false(gs_stack_sm_answer(&m, GS_STEP_TOOLKIT, 1, true, "", 0, &ch)); /* another step */
    assert_false(gs_stack_sm_answer(&m, GS_STEP_DRIVER, 7, true, "", 0, &ch));  /* another attempt */
    assert_int_equal(m.step, GS_STEP_DRIVER);
    assert_true(gs_stack_sm_answer(&m, GS_STEP_DRIVER, 1, false, NULL, 0, &ch));
    assert_non_null(strstr(ch.message, "no reason given"));
}

static void redrive_and_lost_agent(void **state)
{
    (void)state;
    struct gs_stack_sm m;
    struct gs_stack_change ch;
    started(&m, &ch);
    for (int i = 0; i < 5; i++) pass(&m, i);
    assert_int_equal(m.step, GS_STEP_READY);
    /* A new policy: back to not-ready, then the walk again under the new set. */
    struct gs_stack_cfg c2 = cfg(GS_STEP_BIT(GS_STEP_MIG));
    assert_true(gs_stack_sm_redrive(&m, &c2, 2, 10, NULL, &ch));
    assert_int_equal(ch.from, GS_STEP_READY);
    assert_int_equal(ch.to, GS_STEP_NOT_READY);
    assert_non_null(strstr(ch.message, "generation 2"));
    assert_int_equal(m.generation, 2);
    assert_true(gs_stack_sm_node(&m, true, 11, &ch));
    assert_int_equal(m.step, GS_STEP_MIG);
    /* The reason given is the message. */
    assert_true(gs_stack_sm_redrive(&m, &c2, 2, 12, "MIG layout changed to all-1g.10gb", &ch));
    assert_non_null(strstr(m.message, "MIG layout changed"));
    /* Already at not-ready: no change to report. */
    assert_false(gs_stack_sm_redrive(&m, &c2, 3, 13, NULL, &ch));
    assert_int_equal(m.generation, 3);
    /* The agent stops posting Ready mid-walk: not-ready, and it says why. */
    gs_stack_sm_node(&m, true, 14, &ch);
    gs_stack_sm_request(&m, 14);
    assert_true(gs_stack_sm_node(&m, false, 15, &ch));
    assert_int_equal(m.step, GS_STEP_NOT_READY);
    assert_non_null(strstr(m.message, "not posting Ready"));
    assert_false(gs_stack_sm_node(&m, false, 16, &ch));
    /* The answer to the request made before it went down is stale, even at the same step again. */
    int before = m.attempt;
    gs_stack_sm_node(&m, true, 17, &ch);
    assert_true(gs_stack_sm_request(&m, 17));
    assert_int_equal(m.attempt, before + 1);
    assert_false(gs_stack_sm_answer(&m, GS_STEP_MIG, before, true, "", 17, &ch));
    assert_int_equal(m.step, GS_STEP_MIG);
}

static void save_and_restore(void **state)
{
    (void)state;
    struct gs_stack_cfg c = cfg(ALL & ~GS_STEP_BIT(GS_STEP_MIG));
    struct gs_stack_sm m, r;
    struct gs_stack_change ch;
    gs_stack_sm_init(&m, &c, 4, 0);
    gs_stack_sm_node(&m, true, 0, &ch);
    pass(&m, 1 * S); /* driver */
    assert_true(gs_stack_sm_request(&m, 2 * S));
    assert_true(gs_stack_sm_answer(&m, GS_STEP_TOOLKIT, m.attempt, false, "no hook", 2 * S, &ch));
    struct gs_stack_saved sv;
    gs_stack_sm_save(&m, &sv);
    assert_int_equal(sv.step, GS_STEP_TOOLKIT);
    assert_int_equal(sv.failures, 1);
    assert_false(sv.waiting);
    assert_int_equal(sv.next_try_ns, 3 * S);
    assert_int_equal(sv.entered_ns, 1 * S);
    /* Mid-walk: same step, attempt and backoff; no retry before the deadline. */
    gs_stack_sm_restore(&r, &c, &sv, 2 * S + S / 2);
    assert_int_equal(r.step, GS_STEP_TOOLKIT);
    assert_int_equal(r.generation, 4);
    assert_int_equal(r.attempt, m.attempt);
    assert_int_equal(r.transitions, 0);
    assert_false(gs_stack_sm_request(&r, 2 * S + S / 2));
    assert_true(gs_stack_sm_request(&r, 3 * S));
    assert_int_equal(r.attempt, m.attempt + 1);
    /* A request out when saved stays out, with a fresh answer window. */
    gs_stack_sm_save(&r, &sv);
    assert_true(sv.waiting);
    gs_stack_sm_restore(&r, &c, &sv, 100 * S);
    assert_false(gs_stack_sm_tick(&r, 129 * S, &ch));
    assert_true(gs_stack_sm_answer(&r, GS_STEP_TOOLKIT, sv.attempt, true, "", 100 * S, &ch));
    assert_int_equal(ch.to, GS_STEP_DEVICE_PLUGIN);

    /* Ready: stays ready, checks every enabled step once, skipping disabled ones. */
    sv = (struct gs_stack_saved){4, c.enabled, GS_STEP_READY, 9, false, 0, 50 * S, 50 * S};
    gs_stack_sm_restore(&r, &c, &sv, 60 * S);
    assert_int_equal(r.step, GS_STEP_READY);
    assert_int_equal(r.entered_ns, 50 * S);
    enum gs_step want[] = {GS_STEP_DRIVER, GS_STEP_TOOLKIT, GS_STEP_DEVICE_PLUGIN, GS_STEP_MONITORING};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(gs_stack_sm_asking(&r), want[i]);
        assert_true(gs_stack_sm_request(&r, 60 * S));
        assert_false(gs_stack_sm_answer(&r, GS_STEP_READY, r.attempt, true, "", 60 * S, &ch)); /* stale */
        assert_false(gs_stack_sm_answer(&r, want[i], r.attempt, true, "", 60 * S, &ch));      /* no move */
        assert_int_equal(r.step, GS_STEP_READY);
    }
    assert_false(gs_stack_sm_request(&r, 61 * S)); /* checked: nothing more to ask */
    assert_int_equal(r.transitions, 0);
    /* A failed check leaves ready for that step, with the backoff. */
    gs_stack_sm_restore(&r, &c, &sv, 60 * S);
    assert_true(gs_stack_sm_request(&r, 60 * S));
    assert_true(gs_stack_sm_answer(&r, GS_STEP_DRIVER, r.attempt, false, "NVML: driver not loaded", 60 * S, &ch));
    assert_false(ch.failure);
    assert_int_equal(ch.from, GS_STEP_READY);
    assert_int_equal(ch.to, GS_STEP_DRIVER);
    assert_non_null(strstr(ch.message, "driver not loaded"));
    assert_int_equal(r.failures, 1);
    assert_false(gs_stack_sm_request(&r, 60 * S + S / 2));
    assert_true(gs_stack_sm_request(&r, 61 * S));
    /* An unanswered check is a failure too. */
    gs_stack_sm_restore(&r, &c, &sv, 60 * S);
    assert_true(gs_stack_sm_request(&r, 60 * S));
    assert_true(gs_stack_sm_tick(&r, 90 * S, &ch));
    assert_int_equal(r.step, GS_STEP_DRIVER);
    assert_non_null(strstr(r.message, "no answer"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_and_reasons),
        cmocka_unit_test(walks_every_step_in_order),
        cmocka_unit_test(disabled_components_are_skipped),
        cmocka_unit_test(failure_keeps_step_and_backs_off),
        cmocka_unit_test(backoff_function),
        cmocka_unit_test(unanswered_request_times_out_with_reason),
        cmocka_unit_test(stale_answers_are_ignored),
        cmocka_unit_test(redrive_and_lost_agent),
        cmocka_unit_test(save_and_restore),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
