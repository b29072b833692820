/*
 * test_discovery_health.c - the per-GPU health machine: which events are
 * critical, reasons, the recovery window, subscribers.
 */
#include "discovery/health.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#define S GS_NS_PER_SEC

struct log {
    int n;
    struct {
        int gpu;
        enum gs_health_state from, to;
        char reason[160];
    } c[16];
    struct gs_health *h; /* to query from inside the callback */
    bool state_seen_in_cb;
};

static void record(const struct gs_health_change *c, void *arg)
{
    struct log *l = arg;
    if (l->n < 16) {
        l->c[l->n].gpu = c->gpu;
        l->c[l->n].from = c->from;
        l->c[l->n].to = c->to;
        snprintf(l->c[l->n].reason, sizeof l->c[0].reason, "%s", c->reason);
        l->n++;
    }
    struct gs_health_gpu g;
    if (l->h && gs_health_get(l->h, c->gpu, &g) == 0) l->state_seen_in_cb = g.state == c->to;
}

static struct gs_event xid(int gpu, unsigned code)
{
    return (struct gs_event){.kind = GS_EV_XID, .gpu = gpu, .value = code};
}

static void test_default_xids(void **state)
{
    (void)state;
    struct gs_health_config c;
    gs_health_config_default(&c);
    unsigned app[] = {13, 31, 43, 45, 68, 109};
    for (size_t i = 0; i < 6; i++) assert_false(gs_health_xid_critical(&c, app[i]));
    unsigned crit[] = {48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 2000};
    for (size_t i = 0; i < sizeof crit / sizeof crit[0]; i++) assert_true(gs_health_xid_critical(&c, crit[i]));
    assert_string_equal(gs_xid_description(79), "GPU has fallen off the bus");
    assert_string_equal(gs_xid_description(4242), "");
}

static void test_config_lists(void **state)
{
    (void)state;
    struct gs_health_config c;
    gs_health_config_default(&c);
    assert_int_equal(gs_health_config_set_critical(&c, "79,48,61-63"), 0);
    assert_true(gs_health_xid_critical(&c, 62));
    assert_true(gs_health_xid_critical(&c, 79));
    assert_false(gs_health_xid_critical(&c, 74));
    assert_false(gs_health_xid_critical(&c, 5000));
    assert_int_equal(gs_health_config_set_ignored(&c, "79"), 0);
    assert_false(gs_health_xid_critical(&c, 79));
    assert_int_equal(gs_health_config_set_critical(&c, "all"), 0);
    assert_true(gs_health_xid_critical(&c, 13));
    assert_int_equal(gs_health_config_set_critical(&c, "none"), 0);
    assert_false(gs_health_xid_critical(&c, 79));
    const char *bad[] = {"", "79,", "x", "5-3", "0", "79;48", "99999", "-5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(gs_health_config_set_critical(&c, bad[i]), GS_EINVAL);
        assert_int_equal(gs_health_config_set_ignored(&c, bad[i]), GS_EINVAL);
    }
}

static void test_transitions_and_recovery(void **state)
{
    (void)state;
    struct gs_health *h;
    struct gs_health_config c;
    gs_health_config_default(&c);
    c.recovery_ns = 10 * S;
    assert_int_equal(gs_health_create(&c, 4, &h), 0);
    struct log l = {.h = h};
    assert_int_equal(gs_health_subscribe(h, record, &l), 0);

    struct gs_event e = xid(1, 13); /* application error: no transition */
    assert_int_equal(gs_health_event(h, &e, 1 * S), 0);
    assert_int_equal(l.n, 0);
    struct gs_health_gpu g;
    gs_health_get(h, 1, &g);
    assert_int_equal(g.last_xid, 13);
    assert_int_equal(g.state, GS_HEALTH_HEALTHY);

    e = xid(1, 79);
    gs_health_event(h, &e, 2 * S);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.c[0].gpu, 1);
    assert_int_equal(l.c[0].to, GS_HEALTH_UNHEALTHY);
    assert_string_equal(l.c[0].reason, "Xid 79: GPU has fallen off the bus");
    assert_true(l.state_seen_in_cb);
    assert_int_equal(gs_health_unhealthy_mask(h), 1u << 1);

    /* a second critical event restarts the window, without a new transition */
    e = xid(1, 48);
    gs_health_event(h, &e, 5 * S);
    assert_int_equal(l.n, 1);
    gs_health_observe(h, 1, true, 14 * S); /* 9 s after the last critical event */
    assert_int_equal(l.n, 1);
    gs_health_observe(h, 1, true, 15 * S);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.c[1].to, GS_HEALTH_HEALTHY);
    assert_non_null(strstr(l.c[1].reason, "recovered"));
    assert_non_null(strstr(l.c[1].reason, "Xid 79")); /* the reason is kept */
    gs_health_get(h, 1, &g);
    assert_int_equal(g.state, GS_HEALTH_HEALTHY);
    assert_int_equal(g.since_ns, 15 * S);
    assert_int_equal(g.xid_count, 3);
    assert_int_equal(gs_health_unhealthy_mask(h), 0);
    gs_health_free(h);
}

static void test_not_answering(void **state)
{
    (void)state;
    struct gs_health *h;
    struct gs_health_config c;
    gs_health_config_default(&c);
    c.recovery_ns = 5 * S;
    assert_int_equal(gs_health_create(&c, 2, &h), 0);
    struct log l = {0};
    gs_health_subscribe(h, record, &l);
    gs_health_observe(h, 0, false, 1 * S);
    assert_int_equal(l.n, 1);
    assert_non_null(strstr(l.c[0].reason, "not answering"));
    gs_health_observe(h, 0, false, 7 * S); /* still not answering: the window restarts */
    gs_health_observe(h, 0, true, 10 * S);
    assert_int_equal(l.n, 1);
    gs_health_observe(h, 0, true, 12 * S);
    assert_int_equal(l.n, 2);
    struct gs_event lost = {.kind = GS_EV_LOST, .gpu = 1};
    gs_health_event(h, &lost, 13 * S);
    struct gs_health_gpu g;
    gs_health_get(h, 1, &g);
    assert_false(g.answering);
    assert_int_equal(g.state, GS_HEALTH_UNHEALTHY);
    gs_health_free(h);
}

static void test_all_gpus_dbe_and_never(void **state)
{
    (void)state;
    struct gs_health *h;
    struct gs_health_config c;
    gs_health_config_default(&c);
    c.recovery_ns = -1;
    assert_int_equal(gs_health_create(&c, 3, &h), 0);
    struct log l = {0};
    gs_health_subscribe(h, record, &l);
    struct gs_event e = {.kind = GS_EV_ECC_DBE, .gpu = -1, .value = 1};
    assert_int_equal(gs_health_event(h, &e, S), 0);
    assert_int_equal(l.n, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(l.c[i].gpu, i); /* in order */
    assert_string_equal(l.c[2].reason, "double-bit ECC error");
    gs_health_observe(h, 0, true, 1000 * S);
    assert_int_equal(gs_health_unhealthy_mask(h), 7); /* recovery disabled */
    e.gpu = 3;
    assert_int_equal(gs_health_event(h, &e, S), GS_EINVAL);
    assert_int_equal(gs_health_observe(h, -1, true, S), GS_EINVAL);
    struct gs_health_gpu g;
    assert_int_equal(gs_health_get(h, 5, &g), GS_EINVAL);
    gs_health_free(h);
    /* DBE not critical when configured so */
    c.dbe_critical = false;
    assert_int_equal(gs_health_create(&c, 1, &h), 0);
    e.gpu = 0;
    gs_health_event(h, &e, S);
    assert_int_equal(gs_health_unhealthy_mask(h), 0);
    gs_health_free(h);
    assert_int_equal(gs_health_create(&c, GS_DISC_MAX_GPUS + 1, &h), GS_EINVAL);
}

static void noop(const struct gs_health_change *c, void *arg)
{
    (void)c, (void)arg;
}

static void test_subscriber_limit(void **state)
{
    (void)state;
    struct gs_health *h;
    assert_int_equal(gs_health_create(NULL, 1, &h), 0);
    int ok = 0;
    while (gs_health_subscribe(h, noop, NULL) == 0) ok++;
    assert_int_equal(ok, 16);
    assert_string_equal(gs_health_state_name(GS_HEALTH_UNHEALTHY), "Unhealthy");
    gs_health_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_xids),     cmocka_unit_test(test_config_lists),
        cmocka_unit_test(test_transitions_and_recovery), cmocka_unit_test(test_not_answering),
        cmocka_unit_test(test_all_gpus_dbe_and_never), cmocka_unit_test(test_subscriber_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
