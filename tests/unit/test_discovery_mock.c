/*
 * test_discovery_mock.c - the mock backend: spec strings, the file form,
 * NVLink modes, MIG layouts, fault scripts and the values it reports.
 */
#include "discovery/discovery.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static int parse(const char *spec, struct gs_inventory *inv, char *err)
{
    return gs_mock_parse(spec, inv, NULL, NULL, err, 160);
}

static void test_simple_spec(void **state)
{
    (void)state;
    struct gs_inventory inv;
    char err[160] = "";
    assert_int_equal(parse("8xH100-80GB", &inv, err), 0);
    assert_string_equal(inv.backend, "mock");
    assert_int_equal(inv.n_gpus, 8);
    assert_int_equal(inv.n_numa, 1);
    for (int i = 0; i < 8; i++) {
        const struct gs_disc_gpu *g = &inv.gpus[i];
        assert_int_equal(g->index, i);
        assert_int_equal(g->minor, i);
        assert_string_equal(g->name, "NVIDIA H100 80GB HBM3");
        assert_int_equal(g->memory_mib, 81559);
        assert_int_equal(g->cc_major, 9);
        assert_true(g->mig_capable);
        assert_false(g->mig_enabled);
        assert_int_equal(strncmp(g->uuid, "GPU-", 4), 0);
        assert_int_equal(strlen(g->uuid), 40);
        /* SXM H100 defaults to NVSwitch-style all-to-all NVLink */
        for (int j = 0; j < 8; j++) assert_true(j == i ? g->nvlink[j] == 0 : g->nvlink[j] > 0);
        for (int j = 0; j < i; j++) {
            assert_string_not_equal(g->uuid, inv.gpus[j].uuid);
            assert_string_not_equal(g->pci_bus_id, inv.gpus[j].pci_bus_id);
        }
    }
    assert_string_equal(inv.driver_version, "550.54.15");
    assert_int_equal(inv.cuda_version, 12040);
}

static void test_numa_and_pairs(void **state)
{
    (void)state;
    struct gs_inventory inv;
    char err[160];
    assert_int_equal(parse("4xA100-40GB,numa=2,nvlink=pairs,cpus=24", &inv, err), 0);
    assert_int_equal(inv.n_numa, 2);
    assert_int_equal(inv.numa_cpus[1], 24);
    assert_int_equal(inv.numa_distance[0][1], 20);
    assert_int_equal(inv.numa_distance[1][1], 10);
    int numa[] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++) assert_int_equal(inv.gpus[i].numa_node, numa[i]);
    assert_true(inv.gpus[0].nvlink[1] > 0);
    assert_true(inv.gpus[2].nvlink[3] > 0);
    assert_int_equal(inv.gpus[0].nvlink[2], 0);
    assert_int_equal(inv.gpus[1].nvlink[2], 0);
}

static void test_nvlink_modes(void **state)
{
    (void)state;
    struct gs_inventory inv;
    char err[160];
    assert_int_equal(parse("8xH100-80GB,nvlink=islands:4", &inv, err), 0);
    assert_true(inv.gpus[0].nvlink[3] > 0);
    assert_int_equal(inv.gpus[3].nvlink[4], 0);
    assert_true(inv.gpus[4].nvlink[7] > 0);
    assert_int_equal(parse("8xH100-80GB,nvlink=none", &inv, err), 0);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) assert_int_equal(inv.gpus[i].nvlink[j], 0);
    assert_int_equal(parse("2xT4", &inv, err), 0); /* PCIe cards: no NVLink by default */
    assert_int_equal(inv.gpus[0].nvlink[1], 0);
    assert_int_equal(parse("2xT4,nvlink=all", &inv, err), 0);
    assert_true(inv.gpus[0].nvlink[1] > 0);
    assert_int_equal(parse("2xT4,nvlink=ring", &inv, err), GS_EINVAL);
    assert_non_null(strstr(err, "ring"));
    assert_int_equal(parse("2xT4,nvlink=islands:0", &inv, err), GS_EINVAL);
}

static void test_mig_layout(void **state)
{
    (void)state;
    struct gs_inventory inv;
    char err[160];
    assert_int_equal(parse("2xA100-40GB,mig=3g.20gb+2g.10gb*2", &inv, err), 0);
    for (int i = 0; i < 2; i++) {
        const struct gs_disc_gpu *g = &inv.gpus[i];
        assert_true(g->mig_enabled);
        assert_int_equal(g->n_mig, 3);
        assert_string_equal(g->mig[0].profile, "3g.20gb");
        assert_string_equal(g->mig[2].profile, "2g.10gb");
        assert_int_equal(g->mig[0].slices_gi, 3);
        assert_int_equal(g->mig[1].memory_mib, 10240);
        assert_int_not_equal(g->mig[0].gi_id, g->mig[1].gi_id);
        assert_int_equal(strncmp(g->mig[0].uuid, "MIG-", 4), 0);
    }
    /* 8 slices do not fit a 7-slice GPU */
    assert_int_equal(parse("1xA100-40GB,mig=4g.20gb*2", &inv, err), GS_EINVAL);
    assert_non_null(strstr(err, "slices"));
    assert_int_equal(parse("1xA100-40GB,mig=big", &inv, err), GS_EINVAL);
    /* a node-wide layout applies to MIG-capable GPUs only */
    assert_int_equal(parse("1xA100-40GB+1xT4,mig=1g.5gb*7", &inv, err), 0);
    assert_int_equal(inv.gpus[0].n_mig, 7);
    assert_false(inv.gpus[1].mig_enabled);
}

static void test_mixed_groups_and_options(void **state)
{
    (void)state;
    struct gs_inventory inv;
    char err[160];
    assert_int_equal(parse("2xA100-80GB+T4, driver=535.104.05, cuda=12.2, host=n7, machine=DGX-A100", &inv, err), 0);
    assert_int_equal(inv.n_gpus, 3);
    assert_string_equal(inv.gpus[2].name, "Tesla T4");
    assert_string_equal(inv.driver_version, "535.104.05");
    assert_int_equal(inv.cuda_version, 12020);
    assert_string_equal(inv.hostname, "n7");
    assert_string_equal(inv.machine, "DGX-A100");
    /* unknown models with a size work generically; without one they are refused */
    assert_int_equal(parse("2xRTX6000-48GB", &inv, err), 0);
    assert_int_equal(inv.gpus[0].memory_mib, 48 * 1024);
    assert_int_equal(parse("2xWhatever", &inv, err), GS_EINVAL);
    assert_non_null(strstr(err, "Whatever"));
}

static void test_spec_errors(void **state)
{
    (void)state;
    struct gs_inventory inv;
    char err[160];
    const char *bad[] = {"", "0xT4", "40xT4", "8xH100-80GB,numa=0", "8xH100-80GB,numa=x", "T4,frobnicate=1",
                         "T4,cpus", "T4,cuda=twelve", "T4,xid=79@gpu5", "T4,xid=0@gpu0", "17xT4+17xT4",
                         "2xT4,driver=;rm"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        assert_int_equal(parse(bad[i], &inv, err), GS_EINVAL);
        assert_true(strlen(err) > 0);
    }
}

static void test_fault_parse(void **state)
{
    (void)state;
    struct gs_fault f;
    char err[160];
    assert_int_equal(gs_fault_parse("xid=79@gpu3@t=5s", &f, err, sizeof err), 0);
    assert_int_equal(f.kind, GS_EV_XID);
    assert_int_equal(f.value, 79);
    assert_int_equal(f.gpu, 3);
    assert_int_equal(f.at_ns, 5 * GS_NS_PER_SEC);
    assert_int_equal(gs_fault_parse("lost@gpu2@t=1.5s@for=250ms", &f, err, sizeof err), 0);
    assert_int_equal(f.kind, GS_EV_LOST);
    assert_int_equal(f.at_ns, 1500 * GS_NS_PER_MS);
    assert_int_equal(f.for_ns, 250 * GS_NS_PER_MS);
    assert_int_equal(gs_fault_parse("dbe=3@all", &f, err, sizeof err), 0);
    assert_int_equal(f.gpu, -1);
    assert_int_equal(f.value, 3);
    assert_int_equal(f.at_ns, 0);
    const char *bad[] = {"xid=79", "xid@gpu1", "xid=abc@gpu1", "boom@gpu1", "xid=79@gpu1@t=5x", "xid=79@gpu1@for=1s",
                         "lost=3@gpu1", "xid=79@@t=1s", "xid=79@t=1s", "xid=79@gpu99"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(gs_fault_parse(bad[i], &f, err, sizeof err), GS_EINVAL);
}

static void test_fault_script_sorted(void **state)
{
    (void)state;
    struct gs_fault *v;
    size_t n;
    char err[160];
    assert_int_equal(gs_fault_script_parse("xid=79@gpu3@t=5s; dbe@gpu0@t=1s\nxid=13@gpu1@t=1s", &v, &n, err, sizeof err), 0);
    assert_int_equal(n, 3);
    assert_int_equal(v[0].kind, GS_EV_ECC_DBE); /* same time: written order kept */
    assert_int_equal(v[1].value, 13);
    assert_int_equal(v[2].value, 79);
    free(v);
    assert_int_equal(gs_fault_script_parse("xid=79@gpu3; nonsense", &v, &n, err, sizeof err), GS_EINVAL);
    assert_null(v);
    assert_int_equal(gs_fault_script_parse("  ", &v, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
}

static void test_file_form(void **state)
{
    (void)state;
    struct gs_disc d;
    struct gs_inventory inv;
    assert_int_equal(gs_disc_open_mock(&d, GS_TEST_DATA "/discovery/node.yaml", NULL), 0);
    assert_int_equal(gs_disc_inventory(&d, &inv), 0);
    assert_int_equal(inv.n_gpus, 4);
    assert_string_equal(inv.hostname, "gpu-node-7");
    assert_string_equal(inv.machine, "ProLiant XL675d");
    assert_string_equal(inv.driver_version, "535.104.05");
    assert_int_equal(inv.cuda_version, 12020);
    assert_int_equal(inv.numa_cpus[0], 48);
    assert_int_equal(inv.gpus[1].numa_node, 0);
    assert_int_equal(inv.gpus[2].numa_node, 1);
    assert_int_equal(inv.gpus[0].n_mig, 3);
    assert_string_equal(inv.gpus[0].mig[0].profile, "3g.40gb");
    assert_false(inv.gpus[2].mig_enabled);
    assert_int_equal(inv.gpus[0].nvlink[1], 12);
    assert_int_equal(inv.gpus[1].nvlink[0], 12);
    assert_int_equal(inv.gpus[2].nvlink[3], 0);
    gs_disc_close(&d);
    assert_int_equal(gs_disc_open_mock(&d, GS_TEST_DATA "/discovery/bad-matrix.yaml", NULL), GS_EINVAL);
    assert_non_null(strstr(d.err, "symmetric"));
}

/* Faults fire when the simulated clock passes their time, and only then. */
static void test_faults_on_sim_clock(void **state)
{
    (void)state;
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 1000 * GS_NS_PER_SEC);
    struct gs_disc d;
    struct gs_event ev;
    struct gs_sample s;
    assert_int_equal(gs_disc_open_mock(&d, GS_TEST_DATA "/discovery/node.yaml", &clock), 0);
    assert_int_equal(d.ops->poll_event(&d, 50, &ev), GS_ETIMEDOUT);
    assert_int_equal(d.ops->sample(&d, 2, &s), 0);
    gs_clock_advance(&clock, 1 * GS_NS_PER_SEC);
    assert_int_equal(d.ops->sample(&d, 2, &s), GS_EIO); /* lost from t=1s for 2s */
    assert_non_null(strstr(d.err, "not answering"));
    assert_int_equal(d.ops->poll_event(&d, 0, &ev), 0);
    assert_int_equal(ev.kind, GS_EV_LOST);
    assert_int_equal(ev.gpu, 2);
    assert_int_equal(d.ops->poll_event(&d, 0, &ev), GS_ETIMEDOUT);
    gs_clock_advance(&clock, 2 * GS_NS_PER_SEC);
    assert_int_equal(d.ops->sample(&d, 2, &s), 0); /* answering again at t=3s */
    gs_clock_advance(&clock, 2 * GS_NS_PER_SEC);
    assert_int_equal(d.ops->poll_event(&d, 0, &ev), 0);
    assert_int_equal(ev.kind, GS_EV_XID);
    assert_int_equal(ev.value, 79);
    assert_int_equal(ev.gpu, 3);
    assert_int_equal(ev.t_ns, 5 * GS_NS_PER_SEC);
    /* injected faults join the schedule */
    struct gs_fault f = {.kind = GS_EV_ECC_DBE, .value = 2, .gpu = 0, .at_ns = 6 * GS_NS_PER_SEC};
    assert_int_equal(gs_disc_mock_inject(&d, &f), 0);
    f.gpu = 9;
    assert_int_equal(gs_disc_mock_inject(&d, &f), GS_EINVAL);
    assert_int_equal(d.ops->poll_event(&d, 0, &ev), GS_ETIMEDOUT);
    gs_clock_advance(&clock, GS_NS_PER_SEC);
    assert_int_equal(d.ops->sample(&d, 0, &s), 0);
    assert_int_equal(s.ecc_dbe_vol, 2);
    assert_int_equal(d.ops->poll_event(&d, 0, &ev), 0);
    assert_int_equal(ev.kind, GS_EV_ECC_DBE);
    gs_disc_close(&d);
}

static void test_sample_values(void **state)
{
    (void)state;
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_disc d;
    struct gs_inventory inv;
    assert_int_equal(gs_disc_open_mock(&d, "4xH100-80GB", &clock), 0);
    gs_disc_inventory(&d, &inv);
    for (int t = 0; t < 30; t += 7) {
        for (int i = 0; i < 4; i++) {
            struct gs_sample s;
            assert_int_equal(d.ops->sample(&d, i, &s), 0);
            assert_true(s.util_gpu <= 100);
            assert_int_equal(s.fb_used_mib + s.fb_free_mib + s.fb_reserved_mib, inv.gpus[i].memory_mib);
            assert_true(s.power_w > 0 && s.power_w <= 700);
            assert_true(s.have & GS_SF_NVLINK_BW);
        }
        gs_clock_advance(&clock, 7 * GS_NS_PER_SEC);
    }
    struct gs_sample s;
    assert_int_equal(d.ops->sample(&d, 4, &s), GS_EINVAL);
    gs_disc_close(&d);
}

static void test_real_clock_poll_waits(void **state)
{
    (void)state;
    struct gs_disc d;
    struct gs_event ev;
    assert_int_equal(gs_disc_open_mock(&d, "2xT4,xid=31@gpu1@t=50ms", NULL), 0);
    assert_int_equal(d.ops->poll_event(&d, 2000, &ev), 0); /* wakes at the fault, not at the timeout */
    assert_int_equal(ev.value, 31);
    gs_disc_close(&d);
}

static void test_helpers(void **state)
{
    (void)state;
    int64_t ns;
    char buf[32];
    assert_int_equal(gs_duration_parse("2m", &ns), 0);
    assert_int_equal(ns, 120 * GS_NS_PER_SEC);
    assert_int_equal(gs_duration_parse("30", &ns), 0);
    assert_int_equal(ns, 30 * GS_NS_PER_SEC);
    assert_int_equal(gs_duration_parse("-1s", &ns), GS_EINVAL);
    assert_int_equal(gs_duration_parse("1d", &ns), GS_EINVAL);
    assert_int_equal(gs_duration_parse("1e300h", &ns), GS_ERANGE);
    gs_pci_sysfs_name("00000000:3B:00.0", buf, sizeof buf);
    assert_string_equal(buf, "0000:3b:00.0");
    gs_pci_sysfs_name("3B:00.0", buf, sizeof buf);
    assert_string_equal(buf, "0000:3b:00.0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_spec),          cmocka_unit_test(test_numa_and_pairs),
        cmocka_unit_test(test_nvlink_modes),         cmocka_unit_test(test_mig_layout),
        cmocka_unit_test(test_mixed_groups_and_options), cmocka_unit_test(test_spec_errors),
        cmocka_unit_test(test_fault_parse),          cmocka_unit_test(test_fault_script_sorted),
        cmocka_unit_test(test_file_form),            cmocka_unit_test(test_faults_on_sim_clock),
        cmocka_unit_test(test_sample_values),        cmocka_unit_test(test_real_clock_poll_waits),
        cmocka_unit_test(test_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
