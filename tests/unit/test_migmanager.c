/*
 * test_migmanager.c - the MIG manager on the mock backend: idle GPUs are
 * re-partitioned at once, busy ones wait for their pods with a deadline,
 * the deadline passing is said clearly, a new layout restarts the clock,
 * and the NVML backend reports a library without MIG functions; and the
 * NVML backend end to end against the fake libnvidia-ml.so.1 (tests/fakenvml,
 * found through LD_LIBRARY_PATH set by CTest): partition, re-read the
 * instances through discovery, re-partition, destroy back to MIG off, on a
 * fake H100 80GB and A100 40GB, with the driver's refusals reported.
 */
#include "core/clock.h"
#include "govern/migmanager.h"
#include "govern/validators.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
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

/*--- NVML backend against the fake library ---*/

static void open_fake(struct gs_disc *d, struct gs_mig_backend *b, const char *model, const char *pending)
{
    setenv("FAKE_NVML_GPUS", "2", 1);
    setenv("FAKE_NVML_MODEL", model, 1);
    setenv("FAKE_NVML_MIG", "0", 1);
    setenv("FAKE_NVML_MIG_PENDING", pending, 1);
    setenv("FAKE_NVML_FAIL", "", 1);
    int rc = gs_disc_open_nvml(d, NULL, GS_TEST_DATA "/sysfs-nvml", NULL);
    if (rc) fprintf(stderr, "open: %s\n", d->err);
    assert_int_equal(rc, 0);
    assert_int_equal(gs_mig_backend_open(d, b), 0);
    assert_string_equal(b->name, "nvml");
}

/* Every GPU carries want, with distinct MIG device UUIDs and GPU instance IDs. */
static void expect_layout(struct gs_disc *d, const struct gs_mig_layout *want, int n_mig, int mem_mib)
{
    struct gs_inventory inv;
    assert_int_equal(gs_disc_inventory(d, &inv), 0);
    assert_int_equal(inv.n_gpus, 2);
    for (int i = 0; i < inv.n_gpus; i++) {
        const struct gs_disc_gpu *g = &inv.gpus[i];
        assert_true(g->mig_capable);
        assert_true(gs_gpu_has_layout(g, want));
        assert_int_equal(g->n_mig, n_mig);
        for (int k = 0; k < g->n_mig; k++) {
            assert_int_equal(strncmp(g->mig[k].uuid, "MIG-", 4), 0);
            if (mem_mib) assert_int_equal(g->mig[k].memory_mib, mem_mib);
            for (int j = 0; j < k; j++) {
                assert_string_not_equal(g->mig[k].uuid, g->mig[j].uuid);
                assert_int_not_equal(g->mig[k].gi_id, g->mig[j].gi_id);
            }
        }
    }
}

static void nvml_backend_end_to_end(void **state)
{
    (void)state;
    struct gs_disc d;
    struct gs_mig_backend b;
    open_fake(&d, &b, "h100", "0");
    struct gs_migmgr m;
    gs_migmgr_init(&m);
    struct gs_mig_layout want;
    layout(&want, "all-1g.10gb", "1g.10gb*7");
    struct gs_mig_step_in in = {&b, &want, 0, NULL, 60 * S, 0};
    bool changed;
    char msg[400];
    int rc = gs_migmgr_step(&m, &in, &changed, msg, sizeof msg);
    if (rc) fprintf(stderr, "%s\n", msg);
    assert_int_equal(rc, 0);
    assert_true(changed);
    assert_int_equal(m.gpus_applied, 2);
    expect_layout(&d, &want, 7, 9984);
    struct gs_inventory inv;
    assert_int_equal(gs_disc_inventory(&d, &inv), 0);
    assert_string_equal(inv.gpus[0].mig[0].profile, "1g.10gb");
    assert_int_equal(inv.gpus[0].mig[0].slices_gi, 1);
    /* In place: nothing to do. */
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), 0);
    assert_false(changed);
    /* Re-partitioned: the seven 1-slice instances (profile ID 19) go first. */
    layout(&want, "all-balanced", "1g.10gb*2+2g.20gb+3g.40gb");
    rc = gs_migmgr_step(&m, &in, &changed, msg, sizeof msg);
    if (rc) fprintf(stderr, "%s\n", msg);
    assert_int_equal(rc, 0);
    assert_true(changed);
    expect_layout(&d, &want, 4, 0);
    /* The whole GPU as one instance: 79.25 GiB of an 80 GB GPU is "7g.80gb". */
    layout(&want, "all-7g.80gb", "7g.80gb");
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), 0);
    expect_layout(&d, &want, 1, 81152);
    /* Back to MIG off: instances destroyed, mode off. */
    layout(&want, "all-disabled", "");
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), 0);
    assert_true(changed);
    assert_int_equal(gs_disc_inventory(&d, &inv), 0);
    for (int i = 0; i < 2; i++) {
        assert_false(inv.gpus[i].mig_enabled);
        assert_int_equal(inv.gpus[i].n_mig, 0);
    }
    /* A profile this GPU does not have, and one with no room: the driver's refusal, by GPU. */
    layout(&want, "odd", "1g.5gb");
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), GS_EINVAL);
    assert_non_null(strstr(msg, "cannot apply layout odd to GPU 0 through nvml: this GPU has no MIG profile 1g.5gb"));
    layout(&want, "too-many", "1g.20gb*5");
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), GS_EIO);
    assert_non_null(strstr(msg, "cannot create GPU instance 1g.20gb: Insufficient resources"));
    gs_mig_backend_close(&b);
    gs_disc_close(&d);

    /* A100 40GB: its own profile names; a mode change left pending a reset is said so. */
    open_fake(&d, &b, "a100", "0");
    gs_migmgr_init(&m);
    layout(&want, "all-1g.5gb", "1g.5gb*7");
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), 0);
    expect_layout(&d, &want, 7, 4864);
    layout(&want, "halves", "3g.20gb*2");
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), 0);
    expect_layout(&d, &want, 2, 20096);
    gs_mig_backend_close(&b);
    gs_disc_close(&d);
    open_fake(&d, &b, "a100", "1");
    gs_migmgr_init(&m);
    layout(&want, "all-1g.5gb", "1g.5gb*7");
    assert_int_equal(gs_migmgr_step(&m, &in, &changed, msg, sizeof msg), GS_ESTATE);
    assert_non_null(strstr(msg, "pending a GPU reset"));
    gs_mig_backend_close(&b);
    gs_disc_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(idle_gpus_repartition_at_once),
        cmocka_unit_test(busy_gpu_drains_with_deadline),
        cmocka_unit_test(backends),
        cmocka_unit_test(nvml_backend_end_to_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
