/*
 * test_discovery_sysfs.c - the sysfs backend on a fake tree (tests/data/sysfs):
 * two H100s on NUMA nodes 0 and 1, a VGA-class NVIDIA card without NUMA, an
 * NVSwitch bridge and an HDMI audio function (both NVIDIA, both skipped) and
 * an Intel device.
 */
#include "discovery/discovery.h"
#include "discovery/outputs.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#define ROOT GS_TEST_DATA "/sysfs"

static void test_inventory(void **state)
{
    (void)state;
    struct gs_disc d;
    struct gs_inventory inv;
    assert_int_equal(gs_disc_open_sysfs(&d, ROOT, NULL), 0);
    assert_string_equal(d.ops->name, "sysfs");
    assert_null(d.ops->sample);
    assert_int_equal(gs_disc_inventory(&d, &inv), 0);
    assert_string_equal(inv.backend, "sysfs");
    assert_int_equal(inv.n_gpus, 3);
    /* sorted by bus id, NVML's order */
    assert_string_equal(inv.gpus[0].pci_bus_id, "00000000:1B:00.0");
    assert_string_equal(inv.gpus[1].pci_bus_id, "00000000:9A:00.0");
    assert_string_equal(inv.gpus[2].pci_bus_id, "00000000:C1:00.0");
    assert_string_equal(inv.gpus[0].name, "NVIDIA H100 80GB HBM3");
    assert_int_equal(inv.gpus[0].cc_major, 9);
    assert_string_equal(inv.gpus[2].name, "NVIDIA device 0x1234");
    assert_int_equal(inv.gpus[0].numa_node, 0);
    assert_int_equal(inv.gpus[1].numa_node, 1);
    assert_int_equal(inv.gpus[2].numa_node, -1);
    assert_false(inv.gpus[0].pci_graphics);
    assert_true(inv.gpus[2].pci_graphics);
    assert_int_equal(inv.n_numa, 2);
    assert_int_equal(inv.numa_cpus[0], 8);
    assert_int_equal(inv.numa_cpus[1], 4);
    assert_int_equal(inv.numa_distance[0][1], 21);
    assert_string_equal(inv.machine, "DGX H100");
    gs_disc_close(&d);
}

static void test_labels_and_nrt_from_sysfs(void **state)
{
    (void)state;
    struct gs_disc d;
    struct gs_inventory inv;
    assert_int_equal(gs_disc_open_named(&d, "sysfs", NULL, ROOT, NULL), 0);
    assert_int_equal(gs_disc_inventory(&d, &inv), 0);
    struct gs_label_opts o = {.nvidia_pci_devices = gs_sysfs_nvidia_present(ROOT)};
    assert_int_equal(o.nvidia_pci_devices, 3);
    struct gs_labels l = {0};
    assert_int_equal(gs_gfd_labels(&inv, &o, &l), 0);
    assert_string_equal(gs_labels_get(&l, "feature.node.kubernetes.io/pci-10de.present"), "true");
    assert_string_equal(gs_labels_get(&l, "nvidia.com/gpu.machine"), "DGX-H100");
    assert_string_equal(gs_labels_get(&l, "nvidia.com/gpu.mode"), "unknown"); /* 3D and VGA mixed */
    assert_null(gs_labels_get(&l, "nvidia.com/gpu.memory")); /* sysfs knows no memory */
    gs_labels_free(&l);
    json_t *nrt = gs_nrt_build(&inv, NULL);
    json_t *z0 = json_array_get(json_object_get(nrt, "zones"), 0);
    json_t *gpu = json_array_get(json_object_get(z0, "resources"), 1);
    assert_string_equal(json_string_value(json_object_get(gpu, "name")), "nvidia.com/gpu");
    assert_string_equal(json_string_value(json_object_get(gpu, "capacity")), "2"); /* unknown NUMA counts in node-0 */
    json_decref(nrt);
    gs_disc_close(&d);
}

static void test_missing_tree(void **state)
{
    (void)state;
    struct gs_disc d;
    assert_int_equal(gs_disc_open_sysfs(&d, GS_TEST_DATA "/no-such-sysfs", NULL), GS_ENOENT);
    assert_non_null(strstr(d.err, "no PCI tree"));
    assert_int_equal(gs_sysfs_nvidia_present(GS_TEST_DATA "/no-such-sysfs"), -1);
    assert_int_equal(gs__sysfs_gpu_numa(ROOT, "00000000:77:00.0"), -1);
    assert_int_equal(gs__sysfs_gpu_numa(ROOT, "00000000:9A:00.0"), 1);
    struct gs_inventory inv;
    memset(&inv, 0, sizeof inv);
    gs__sysfs_numa(GS_TEST_DATA "/no-such-sysfs", &inv, 6);
    assert_int_equal(inv.n_numa, 1);
    assert_int_equal(inv.numa_cpus[0], 6);
    assert_int_equal(gs_disc_open_named(&d, "quantum", NULL, ROOT, NULL), GS_EINVAL);
    assert_non_null(strstr(d.err, "quantum"));
    assert_int_equal(gs_disc_open_named(&d, "mock", NULL, ROOT, NULL), GS_EINVAL);
}

static void test_auto_falls_back(void **state)
{
    (void)state;
    struct gs_disc d;
    struct gs_inventory inv;
    /* Without a loadable NVML (CI), auto must settle on sysfs; with one, on NVML. */
    assert_int_equal(gs_disc_open_auto(&d, ROOT, NULL), 0);
    assert_int_equal(gs_disc_inventory(&d, &inv), 0);
    assert_true(!strcmp(inv.backend, "sysfs") || !strcmp(inv.backend, "nvml"));
    if (!strcmp(inv.backend, "sysfs")) assert_non_null(strstr(d.err, "NVML unavailable"));
    gs_disc_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inventory),
        cmocka_unit_test(test_labels_and_nrt_from_sysfs),
        cmocka_unit_test(test_missing_tree),
        cmocka_unit_test(test_auto_falls_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
