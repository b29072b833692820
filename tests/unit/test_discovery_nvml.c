/*
 * test_discovery_nvml.c - the NVML backend against tests/fakenvml: the real
 * dlopen("libnvidia-ml.so.1") through LD_LIBRARY_PATH (set by CTest), canned
 * answers, and each failure the fake can be told to produce.
 */
#include "discovery/discovery.h"
#include "discovery/exporter.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define SYSFS GS_TEST_DATA "/sysfs-nvml"

static void env(const char *gpus, const char *fail, const char *mig, const char *nvlink, const char *events)
{
    setenv("FAKE_NVML_GPUS", gpus, 1);
    setenv("FAKE_NVML_FAIL", fail, 1);
    setenv("FAKE_NVML_MIG", mig, 1);
    setenv("FAKE_NVML_NVLINK", nvlink, 1);
    setenv("FAKE_NVML_EVENTS", events, 1);
}

static int setup(void **state)
{
    (void)state;
    env("2", "", "0", "none", "");
    return 0;
}

static void variant(char *buf, size_t len, const char *name)
{
    const char *dir = getenv("FAKE_NVML_DIR");
    snprintf(buf, len, "%s/%s", dir ? dir : ".", name);
}

static void test_inventory(void **state)
{
    (void)state;
    env("4", "", "1", "pairs", "");
    struct gs_disc d;
    struct gs_inventory inv;
    int rc = gs_disc_open_nvml(&d, NULL, SYSFS, NULL);
    if (rc) fprintf(stderr, "open: %s\n", d.err);
    assert_int_equal(rc, 0);
    assert_int_equal(gs_disc_inventory(&d, &inv), 0);
    assert_string_equal(inv.backend, "nvml");
    assert_string_equal(inv.driver_version, "550.54.15");
    assert_int_equal(inv.cuda_version, 12040);
    assert_int_equal(inv.n_gpus, 4);
    assert_string_equal(inv.gpus[1].uuid, "GPU-11111111-2222-3333-4444-555555555551");
    assert_string_equal(inv.gpus[1].name, "NVIDIA A100-SXM4-40GB");
    assert_int_equal(inv.gpus[1].memory_mib, 40960);
    assert_string_equal(inv.gpus[1].pci_bus_id, "00000000:20:00.0");
    assert_int_equal(inv.gpus[1].minor, 1);
    assert_int_equal(inv.gpus[1].cc_major, 8);
    assert_int_equal(inv.gpus[0].numa_node, 1); /* from the fake sysfs tree */
    assert_int_equal(inv.gpus[1].numa_node, 0);
    assert_int_equal(inv.gpus[2].numa_node, -1);
    assert_int_equal(inv.n_numa, 2);
    assert_int_equal(inv.numa_cpus[1], 8);
    /* MIG on GPU 0 only */
    assert_true(inv.gpus[0].mig_capable);
    assert_true(inv.gpus[0].mig_enabled);
    assert_false(inv.gpus[1].mig_enabled);
    assert_int_equal(inv.gpus[0].n_mig, 2);
    assert_string_equal(inv.gpus[0].mig[0].profile, "1g.5gb");
    assert_string_equal(inv.gpus[0].mig[1].profile, "3g.20gb");
    assert_int_equal(inv.gpus[0].mig[1].memory_mib, 20096);
    assert_int_equal(inv.gpus[0].mig[0].gi_id, 7);
    assert_int_equal(inv.gpus[0].mig[1].slices_gi, 3);
    /* NVLink pairs: 4 links each way */
    assert_int_equal(inv.gpus[0].nvlink[1], 4);
    assert_int_equal(inv.gpus[3].nvlink[2], 4);
    assert_int_equal(inv.gpus[0].nvlink[2], 0);
    gs_disc_close(&d);
}

static void test_nvswitch(void **state)
{
    (void)state;
    env("3", "", "0", "switch", "");
    struct gs_disc d;
    struct gs_inventory inv;
    assert_int_equal(gs_disc_open_nvml(&d, NULL, SYSFS, NULL), 0);
    assert_int_equal(gs_disc_inventory(&d, &inv), 0);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) assert_int_equal(inv.gpus[i].nvlink[j], i == j ? 0 : 6);
    gs_disc_close(&d);
}

static void test_sample(void **state)
{
    (void)state;
    struct gs_disc d;
    struct gs_sample s;
    assert_int_equal(gs_disc_open_nvml(&d, NULL, SYSFS, NULL), 0);
    assert_int_equal(d.ops->sample(&d, 1, &s), 0);
    unsigned want = GS_SF_UTIL | GS_SF_ENCDEC | GS_SF_MEMORY | GS_SF_TEMP | GS_SF_POWER | GS_SF_ENERGY |
                    GS_SF_CLOCKS | GS_SF_ECC | GS_SF_PCIE_REPLAY | GS_SF_REMAP;
    assert_int_equal(s.have, want);
    assert_int_equal(s.util_gpu, 41);
    assert_int_equal(s.util_mem, 21);
    assert_int_equal(s.util_enc, 3);
    assert_int_equal(s.fb_used_mib, 1100);
    assert_int_equal(s.fb_reserved_mib, 512);
    assert_int_equal(s.fb_used_mib + s.fb_free_mib + s.fb_reserved_mib, 40960);
    assert_int_equal(s.temp_c, 51);
    assert_true(s.power_w > 123.45 && s.power_w < 123.46);
    assert_int_equal(s.energy_mj, 987654321ULL);
    assert_int_equal(s.sm_clock_mhz, 1410);
    assert_int_equal(s.ecc_dbe_agg, 11);
    assert_int_equal(s.ecc_sbe_agg, 1);
    assert_int_equal(s.pcie_replay, 7);
    assert_int_equal(s.remap_uncorr, 1);
    assert_int_equal(d.ops->sample(&d, 2, &s), GS_EINVAL);
    gs_disc_close(&d);
}

static void test_optional_failures_are_left_out(void **state)
{
    (void)state;
    env("2", "nvmlDeviceGetTemperature@1:3,nvmlDeviceGetTotalEccErrors:3,nvmlDeviceGetCudaComputeCapability@0,"
             "nvmlDeviceGetMinorNumber,nvmlSystemGetCudaDriverVersion_v2,nvmlDeviceGetMigMode:3",
        "0", "none", "");
    struct gs_disc d;
    struct gs_inventory inv;
    struct gs_sample s;
    assert_int_equal(gs_disc_open_nvml(&d, NULL, SYSFS, NULL), 0);
    assert_int_equal(gs_disc_inventory(&d, &inv), 0);
    assert_int_equal(inv.cuda_version, 0);
    assert_int_equal(inv.gpus[0].cc_major, 0);
    assert_int_equal(inv.gpus[1].cc_major, 8);
    assert_int_equal(inv.gpus[0].minor, -1);
    assert_false(inv.gpus[0].mig_capable);
    assert_int_equal(d.ops->sample(&d, 1, &s), 0);
    assert_false(s.have & GS_SF_TEMP);
    assert_false(s.have & GS_SF_ECC);
    assert_true(s.have & GS_SF_UTIL);
    assert_int_equal(d.ops->sample(&d, 0, &s), 0);
    assert_true(s.have & GS_SF_TEMP);
    gs_disc_close(&d);
}

static void test_required_failures(void **state)
{
    (void)state;
    struct gs_disc d;
    struct gs_inventory inv;
    struct {
        const char *fail;
        int open_rc, inv_rc;
        const char *msg;
    } cases[] = {
        {"nvmlInit_v2:9", GS_EIO, 0, "nvmlInit_v2: Driver Not Loaded"},
        {"nvmlDeviceGetCount_v2", GS_EIO, 0, "nvmlDeviceGetCount_v2"},
        {"nvmlDeviceGetHandleByIndex_v2@1", GS_EIO, 0, "nvmlDeviceGetHandleByIndex_v2(1)"},
        {"nvmlDeviceGetUUID@1", 0, GS_EIO, "nvmlDeviceGetUUID(GPU 1): Unknown Error"},
        {"nvmlDeviceGetName@0", 0, GS_EIO, "nvmlDeviceGetName(GPU 0)"},
        {"nvmlDeviceGetMemoryInfo@1:15", 0, GS_EIO, "GPU is lost"},
        {"nvmlDeviceGetPciInfo_v3", 0, GS_EIO, "nvmlDeviceGetPciInfo_v3"},
        {"nvmlSystemGetDriverVersion", 0, GS_EIO, "nvmlSystemGetDriverVersion"},
        {"nvmlEventSetCreate,nvmlShutdown", 0, 0, ""}, /* no events, and a failing shutdown is harmless */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        env("2", cases[i].fail, "0", "none", "");
        int rc = gs_disc_open_nvml(&d, NULL, SYSFS, NULL);
        assert_int_equal(rc, cases[i].open_rc);
        if (!rc) {
            rc = gs_disc_inventory(&d, &inv);
            assert_int_equal(rc, cases[i].inv_rc);
        }
        assert_non_null(strstr(d.err, cases[i].msg));
        if (!cases[i].open_rc) gs_disc_close(&d);
    }
    struct gs_event ev;
    env("1", "nvmlEventSetCreate", "0", "none", "");
    assert_int_equal(gs_disc_open_nvml(&d, NULL, SYSFS, NULL), 0);
    assert_int_equal(d.ops->poll_event(&d, 10, &ev), GS_EUNSUPPORTED);
    gs_disc_close(&d);
    env("1", "nvmlDeviceRegisterEvents", "0", "none", "");
    assert_int_equal(gs_disc_open_nvml(&d, NULL, SYSFS, NULL), 0);
    assert_int_equal(d.ops->poll_event(&d, 10, &ev), GS_EUNSUPPORTED);
    gs_disc_close(&d);
}

static void test_sample_not_answering(void **state)
{
    (void)state;
    env("2", "nvmlDeviceGetMemoryInfo@1:15", "0", "none", "");
    struct gs_disc d;
    struct gs_sample s;
    assert_int_equal(gs_disc_open_nvml(&d, NULL, SYSFS, NULL), 0);
    assert_int_equal(d.ops->sample(&d, 0, &s), 0);
    assert_int_equal(d.ops->sample(&d, 1, &s), GS_EIO);
    assert_non_null(strstr(d.err, "GPU is lost"));
    gs_disc_close(&d);
}

static void test_events(void **state)
{
    (void)state;
    env("2", "", "0", "none", "xid:79@1,dbe@0,other@0,lost,error");
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 42);
    struct gs_disc d;
    struct gs_event ev;
    assert_int_equal(gs_disc_open_nvml(&d, NULL, SYSFS, &clock), 0);
    assert_int_equal(d.ops->poll_event(&d, 10, &ev), 0);
    assert_int_equal(ev.kind, GS_EV_XID);
    assert_int_equal(ev.gpu, 1);
    assert_int_equal(ev.value, 79);
    assert_int_equal(ev.t_ns, 42);
    assert_int_equal(d.ops->poll_event(&d, 10, &ev), 0);
    assert_int_equal(ev.kind, GS_EV_ECC_DBE);
    assert_int_equal(ev.gpu, 0);
    assert_int_equal(d.ops->poll_event(&d, 10, &ev), GS_ETIMEDOUT); /* a type we did not register */
    assert_int_equal(d.ops->poll_event(&d, 10, &ev), 0);
    assert_int_equal(ev.kind, GS_EV_LOST);
    assert_int_equal(ev.gpu, -1);
    assert_int_equal(d.ops->poll_event(&d, 10, &ev), GS_EIO);
    assert_non_null(strstr(d.err, "nvmlEventSetWait_v2"));
    assert_int_equal(d.ops->poll_event(&d, 10, &ev), GS_ETIMEDOUT);
    gs_disc_close(&d);
}

/* The exporter over NVML: the Xid from the event set reaches the metric and health. */
static void test_exporter_over_nvml(void **state)
{
    (void)state;
    env("2", "", "0", "none", "xid:79@1");
    struct gs_disc d;
    struct gs_exporter *e;
    assert_int_equal(gs_disc_open_nvml(&d, NULL, SYSFS, NULL), 0);
    assert_int_equal(gs_exporter_create(&d, NULL, &e), 0);
    assert_int_equal(gs_exporter_collect(e), 0);
    struct gs_metrics_text *t = gs_exporter_text(e);
    assert_non_null(strstr(t->data, "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-11111111-2222-3333-4444-555555555551\","
                                    "pci_bus_id=\"00000000:20:00.0\",device=\"nvidia1\",modelName=\"NVIDIA A100-SXM4-40GB\""));
    assert_non_null(strstr(t->data, "DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 41\n"));
    assert_non_null(strstr(t->data, "err_code=\"79\""));
    assert_null(strstr(t->data, "DCGM_FI_DEV_MEMORY_TEMP{")); /* NVML path does not read it */
    gs_metrics_text_unref(t);
    assert_int_equal(gs_health_unhealthy_mask(gs_exporter_health(e)), 2);
    gs_exporter_free(e);
    gs_disc_close(&d);
}

static void test_missing_library_and_symbols(void **state)
{
    (void)state;
    struct gs_disc d;
    char path[512];
    assert_int_equal(gs_disc_open_nvml(&d, "libnvidia-ml-does-not-exist.so.1", SYSFS, NULL), GS_ENOENT);
    assert_non_null(strstr(d.err, "cannot load NVML"));
    variant(path, sizeof path, "libfake-nvml-broken.so");
    assert_int_equal(gs_disc_open_nvml(&d, path, SYSFS, NULL), GS_EUNSUPPORTED);
    assert_non_null(strstr(d.err, "nvmlDeviceGetCount_v2"));
    /* only the required symbols: works, with the optional facts unknown */
    variant(path, sizeof path, "libfake-nvml-minimal.so");
    assert_int_equal(gs_disc_open_nvml(&d, path, SYSFS, NULL), 0);
    struct gs_inventory inv;
    struct gs_sample s;
    struct gs_event ev;
    assert_int_equal(gs_disc_inventory(&d, &inv), 0);
    assert_int_equal(inv.n_gpus, 2);
    assert_int_equal(inv.cuda_version, 0);
    assert_int_equal(inv.gpus[0].cc_major, 0);
    assert_false(inv.gpus[0].mig_capable);
    assert_int_equal(d.ops->sample(&d, 0, &s), 0);
    assert_int_equal(s.have, GS_SF_MEMORY);
    assert_int_equal(d.ops->poll_event(&d, 10, &ev), GS_EUNSUPPORTED);
    gs_disc_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_inventory, setup),
        cmocka_unit_test_setup(test_nvswitch, setup),
        cmocka_unit_test_setup(test_sample, setup),
        cmocka_unit_test_setup(test_optional_failures_are_left_out, setup),
        cmocka_unit_test_setup(test_required_failures, setup),
        cmocka_unit_test_setup(test_sample_not_answering, setup),
        cmocka_unit_test_setup(test_events, setup),
        cmocka_unit_test_setup(test_exporter_over_nvml, setup),
        cmocka_unit_test_setup(test_missing_library_and_symbols, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
