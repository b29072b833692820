/*
 * test_validators.c - each GPU stack validator, passing and failing with a
 * message that says what is wrong: driver (mock backend, no backend),
 * toolkit (runtime hook on a search path, CDI spec naming every GPU or
 * not), device plugin (advertised counts under each MIG strategy), MIG
 * (layout per GPU), monitoring (exporter samples per GPU).
 */
#include "core/clock.h"
#include "govern/validators.h"
#include "node/cdi.h"
#include "node/gpus_disc.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

struct fx {
    struct gs_clock clk;
    struct gs_disc d;
    char dir[64];
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    gs_clock_init_sim(&f->clk, 0);
    if (gs_disc_open_mock(&f->d, "4xA100-40GB+1xT4", &f->clk)) return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/gs-validators-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    if (system(cmd)) return -1;
    gs_disc_close(&f->d);
    free(f);
    return 0;
}

static void driver(void **state)
{
    struct fx *f = *state;
    char msg[256];
    struct gs_validate_in in = {.disc = &f->d};
    assert_int_equal(gs_validate_driver(&in, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "mock"));
    assert_non_null(strstr(msg, "5 GPUs"));
    in.disc = NULL;
    assert_int_equal(gs_validate_driver(&in, msg, sizeof msg), GS_ENOENT);
    assert_non_null(strstr(msg, "NVML"));
    assert_int_equal(gs_validate_step(GS_STEP_DRIVER, &in, msg, sizeof msg), GS_ENOENT);
    assert_int_equal(gs_validate_step(GS_STEP_READY, &in, msg, sizeof msg), GS_EINVAL);
}

static void toolkit(void **state)
{
    struct fx *f = *state;
    char msg[600], bindir[128], cdidir[128];
    snprintf(bindir, sizeof bindir, "%s/bin", f->dir);
    snprintf(cdidir, sizeof cdidir, "%s/cdi", f->dir);
    mkdir(bindir, 0755);
    struct gs_validate_in in = {.disc = &f->d, .cdi_dirs = cdidir, .hook_path = bindir};
    assert_int_equal(gs_validate_toolkit(&in, msg, sizeof msg), GS_ENOENT);
    assert_non_null(strstr(msg, "no CDI spec"));
    /* A CDI spec for only some GPUs is named as such. */
    struct gs_inventory inv;
    gs_disc_inventory(&f->d, &inv);
    struct gs_node_gpus g;
    gs_node_gpus_from_inventory(&g, &inv, 1);
    struct gs_node_gpus part = g;
    part.n = 2;
    assert_int_equal(gs_cdi_write(cdidir, &part, NULL, NULL, 0), 0);
    assert_int_equal(gs_validate_toolkit(&in, msg, sizeof msg), GS_ENOENT);
    assert_non_null(strstr(msg, "does not name GPU 2"));
    /* The full spec passes. */
    assert_int_equal(gs_cdi_write(cdidir, &g, NULL, NULL, 0), 0);
    assert_int_equal(gs_validate_toolkit(&in, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "CDI spec"));
    /* A runtime hook on the search path is enough on its own. */
    in.cdi_dirs = f->dir; /* no spec there */
    char hook[200];
    snprintf(hook, sizeof hook, "%s/nvidia-container-runtime-hook", bindir);
    FILE *h = fopen(hook, "w");
    fputs("#!/bin/sh\n", h);
    fclose(h);
    chmod(hook, 0755);
    assert_int_equal(gs_validate_toolkit(&in, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "nvidia-container-runtime-hook"));
}

static json_t *node_with(const char *gpu, const char *mig)
{
    json_t *alloc = json_pack("{s:s}", "nvidia.com/gpu", gpu);
    if (mig) json_object_set_new(alloc, "nvidia.com/mig-1g.5gb", json_string(mig));
    return json_pack("{s:{s:o}}", "status", "allocatable", alloc);
}

static void device_plugin(void **state)
{
    struct fx *f = *state;
    char msg[256], err[160];
    struct gs_validate_in in = {.disc = &f->d, .strategy = GS_MIG_MIXED};
    assert_int_equal(gs_validate_device_plugin(&in, msg, sizeof msg), GS_ENOENT);
    json_t *n = node_with("5", NULL);
    in.node = n;
    assert_int_equal(gs_validate_device_plugin(&in, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "nvidia.com/gpu=5"));
    json_decref(n);
    /* Two GPUs split into 1g.5gb*7: mixed wants 3 whole GPUs and 14 MIG devices. */
    assert_int_equal(gs_disc_mock_set_mig(&f->d, 0, "1g.5gb*7", err, sizeof err), 0);
    assert_int_equal(gs_disc_mock_set_mig(&f->d, 1, "1g.5gb*7", err, sizeof err), 0);
    n = node_with("5", NULL);
    in.node = n;
    assert_int_equal(gs_validate_device_plugin(&in, msg, sizeof msg), GS_ESTATE);
    assert_non_null(strstr(msg, "advertises 5 devices, want 3"));
    json_decref(n);
    n = node_with("3", NULL);
    in.node = n;
    assert_int_equal(gs_validate_device_plugin(&in, msg, sizeof msg), GS_ENOENT);
    assert_non_null(strstr(msg, "nvidia.com/mig-1g.5gb is not registered"));
    json_decref(n);
    n = node_with("3", "14");
    in.node = n;
    assert_int_equal(gs_validate_device_plugin(&in, msg, sizeof msg), 0);
    json_decref(n);
    /* Single: every MIG device is one nvidia.com/gpu. */
    struct gs_inventory inv;
    gs_disc_inventory(&f->d, &inv);
    json_t *r = gs_stack_resources(&inv, GS_MIG_SINGLE);
    assert_int_equal(json_integer_value(json_object_get(r, "nvidia.com/gpu")), 14 + 3);
    json_decref(r);
    /* ...but not when MIG GPUs differ: they advertise nothing. */
    assert_int_equal(gs_disc_mock_set_mig(&f->d, 1, "3g.20gb*2", err, sizeof err), 0);
    gs_disc_inventory(&f->d, &inv);
    r = gs_stack_resources(&inv, GS_MIG_SINGLE);
    assert_int_equal(json_integer_value(json_object_get(r, "nvidia.com/gpu")), 3);
    json_decref(r);
    r = gs_stack_resources(&inv, GS_MIG_NONE);
    assert_int_equal(json_integer_value(json_object_get(r, "nvidia.com/gpu")), 5);
    assert_int_equal(json_object_size(r), 1);
    json_decref(r);
}

static void mig(void **state)
{
    struct fx *f = *state;
    char msg[300], err[160];
    struct gs_mig_layout want;
    assert_int_equal(gs_mig_layout_parse("1g.5gb*7", &want), 0);
    snprintf(want.name, sizeof want.name, "all-1g.5gb");
    struct gs_validate_in in = {.disc = &f->d};
    assert_int_equal(gs_validate_mig(&in, msg, sizeof msg), 0); /* no layout wanted */
    in.layout = &want;
    assert_int_equal(gs_validate_mig(&in, msg, sizeof msg), GS_ESTATE);
    assert_non_null(strstr(msg, "GPU 0 has MIG off"));
    for (int g = 0; g < 4; g++) assert_int_equal(gs_disc_mock_set_mig(&f->d, g, "1g.5gb*7", err, sizeof err), 0);
    assert_int_equal(gs_validate_mig(&in, msg, sizeof msg), 0); /* the T4 is not MIG-capable and is skipped */
    assert_non_null(strstr(msg, "4 MIG-capable GPUs"));
    assert_int_equal(gs_disc_mock_set_mig(&f->d, 2, "1g.5gb*6", err, sizeof err), 0);
    assert_int_equal(gs_validate_mig(&in, msg, sizeof msg), GS_ESTATE);
    assert_non_null(strstr(msg, "GPU 2 has 1g.5gb+"));
    /* The T4 refuses MIG. */
    assert_int_equal(gs_disc_mock_set_mig(&f->d, 4, "1g.5gb", err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "not MIG-capable"));
}

static void monitoring(void **state)
{
    struct fx *f = *state;
    char msg[300];
    struct gs_inventory inv;
    gs_disc_inventory(&f->d, &inv);
    struct gs_validate_in in = {.disc = &f->d};
    assert_int_equal(gs_validate_monitoring(&in, msg, sizeof msg), GS_ENOENT);
    char page[8192] = "# HELP x\n";
    for (int i = 0; i < inv.n_gpus; i++) {
        size_t w = strlen(page);
        const char *metric = i == 3 ? "DCGM_FI_DEV_XID_ERRORS" : "DCGM_FI_DEV_GPU_TEMP";
        snprintf(page + w, sizeof page - w, "%s{gpu=\"%d\",UUID=\"%s\"} 1\n", metric, i, inv.gpus[i].uuid);
    }
    in.metrics = page;
    /* GPU 3 only has an Xid counter: no sample, so it does not answer. */
    assert_int_equal(gs_validate_monitoring(&in, msg, sizeof msg), GS_ESTATE);
    assert_non_null(strstr(msg, "GPU 3"));
    size_t w = strlen(page);
    snprintf(page + w, sizeof page - w, "DCGM_FI_DEV_FB_USED{gpu=\"3\",UUID=\"%s\"} 0\n", inv.gpus[3].uuid);
    assert_int_equal(gs_validate_monitoring(&in, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "all 5 GPUs"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(driver, setup, teardown),
        cmocka_unit_test_setup_teardown(toolkit, setup, teardown),
        cmocka_unit_test_setup_teardown(device_plugin, setup, teardown),
        cmocka_unit_test_setup_teardown(mig, setup, teardown),
        cmocka_unit_test_setup_teardown(monitoring, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
