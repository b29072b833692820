/*
 * test_migmanager.c - the MIG manager on the mock backend: idle GPUs are
 * re-partitioned at once, busy ones wait for their pods with a deadline,
 * the deadline passing is said clearly, a new layout restarts the clock,
 * and the NVML backend reports a library without MIG functions.
 */
#include "core/clock.h"
#include "govern/migmanager.h"
#include "govern/validators.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#define S GS_NS_PER_SEC

static void layout(struct gs_mig_layout *l, const char *name, const char *text)
{
    assert_int_equal(gs_mig_layout_parse(text, l), 0);
    snprintf(l->name, sizeof l->name, "%s", name);
}

static void idle_gpus_repartition_at_once(void **state)
{
    (void)state;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_disc d;
    assert_int_equal(gs_disc_open_mock(&d, "2xH100-80GB+1xL4", &clk), 0);
    struct gs_mig_backend b;
    assert_int_equal(gs_mig_backend_open(&d, &b), 0);
    assert_string_equal(b.name, "mock");
    struct gs_migmgr m;
    gs_migmgr_init(&m);
    struct gs_mig_layout want;
    layout(&want, "all-balanced", "1g.10gb*2+2g.20gb+3g.40gb");
    struct gs_mig_step_in in = {&b, &want, 0, NULL, 60 * S, 0};
    bool changed;
    char msg[400];
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), 0);
    assert_true(changed);
    assert_int_equal(m.gpus_applied, 2);
    assert_non_null(strstr(msg, "re-partitioned"));
    struct gs_inventory inv;
    gs_disc_inventory(&d, &inv);
    assert_true(gs_gpu_has_layout(&inv.gpus[0], &want));
    assert_true(gs_gpu_has_layout(&inv.gpus[1], &want));
    assert_int_equal(inv.gpus[0].n_mig, 4);
    assert_true(strncmp(inv.gpus[0].mig[0].uuid, "MIG-", 4) == 0);
    assert_false(inv.gpus[2].mig_enabled); /* L4: not MIG-capable, left alone */
    /* Already in place: nothing to do. */
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), 0);
    assert_false(changed);
    /* Back to MIG off. */
    layout(&want, "all-disabled", "");
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), 0);
    assert_true(changed);
    gs_disc_inventory(&d, &inv);
    assert_false(inv.gpus[0].mig_enabled);
    assert_int_equal(inv.gpus[0].n_mig, 0);
    gs_mig_backend_close(&b);
    gs_disc_close(&d);
}

static void busy_gpu_drains_with_deadline(void **state)
{
    (void)state;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_disc d;
    assert_int_equal(gs_disc_open_mock(&d, "4xA100-40GB", &clk), 0);
    struct gs_mig_backend b;
    gs_mig_backend_open(&d, &b);
    struct gs_migmgr m;
    gs_migmgr_init(&m);
    struct gs_mig_layout want;
    layout(&want, "all-1g.5gb", "1g.5gb*7");
    const char *pods[64] = {[1] = "team-a/train-0", [3] = "team-b/infer"};
    struct gs_mig_step_in in = {&b, &want, 1u << 1 | 1u << 3, pods, 10 * S, 100 * S};
    bool changed;
    char msg[400];
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), GS_EBUSY);
    assert_true(changed); /* GPUs 0 and 2 were idle */
    assert_non_null(strstr(msg, "GPU 1 (team-a/train-0)"));
    assert_non_null(strstr(msg, "GPU 3 (team-b/infer)"));
    assert_non_null(strstr(msg, "deadline in 10s"));
    struct gs_inventory inv;
    gs_disc_inventory(&d, &inv);
    assert_true(gs_gpu_has_layout(&inv.gpus[0], &want));
    assert_false(inv.gpus[1].mig_enabled); /* busy GPU untouched */
    /* GPU 3 frees; the deadline still counts from the first step. */
    in.busy = 1u << 1;
    in.now = 105 * S;
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), GS_EBUSY);
    assert_true(changed);
    assert_non_null(strstr(msg, "deadline in 5s"));
    assert_null(strstr(msg, "GPU 3"));
    /* Past the deadline: a clear answer naming the pod and what to do. */
    in.now = 111 * S;
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), GS_ETIMEDOUT);
    assert_false(changed);
    assert_non_null(strstr(msg, "drain deadline (10s) passed"));
    assert_non_null(strstr(msg, "team-a/train-0"));
    assert_non_null(strstr(msg, "drainTimeoutSeconds"));
    assert_int_equal(m.drain_timeouts, 1);
    /* The pod goes: done. */
    in.busy = 0;
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), 0);
    gs_disc_inventory(&d, &inv);
    for (int i = 0; i < 4; i++) assert_true(gs_gpu_has_layout(&inv.gpus[i], &want));
    /* A new layout restarts the drain clock. */
    layout(&want, "halves", "3g.20gb*2");
    in.busy = 1u;
    in.now = 500 * S;
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), GS_EBUSY);
    assert_non_null(strstr(msg, "deadline in 10s"));
    gs_mig_backend_close(&b);
    gs_disc_close(&d);
}

static void backends(void **state)
{
    (void)state;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_disc d;
    assert_int_equal(gs_disc_open_sysfs(&d, GS_TEST_DATA "/sysfs", &clk), 0);
    struct gs_mig_backend b;
    assert_int_equal(gs_mig_backend_open(&d, &b), GS_EUNSUPPORTED);
    gs_disc_close(&d);
    /* An NVML library that is not there, and one without MIG functions (libc). */
    assert_int_equal(gs_mig_backend_open_nvml(NULL, "/nonexistent/libnvidia-ml.so.1", &b), GS_ENOENT);
    assert_int_equal(gs_mig_backend_open_nvml(NULL, "libc.so.6", &b), GS_EUNSUPPORTED);
    /* A failing apply is reported with the GPU and the backend's reason. */
    assert_int_equal(gs_disc_open_mock(&d, "1xA100-40GB", &clk), 0);
    gs_mig_backend_open(&d, &b);
    struct gs_migmgr m;
    gs_migmgr_init(&m);
    struct gs_mig_layout want = {.name = "odd", .enabled = true, .n = 1, .v = {{"9g.10gb", 1}}};
    struct gs_mig_step_in in = {&b, &want, 0, NULL, S, 0};
    bool changed;
    char msg[400];
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), GS_EINVAL);
    assert_non_null(strstr(msg, "cannot apply layout odd to GPU 0 through mock"));
    gs_mig_backend_close(&b);
    gs_disc_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(idle_gpus_repartition_at_once),
        cmocka_unit_test(busy_gpu_drains_with_deadline),
        cmocka_unit_test(backends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
