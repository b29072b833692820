/*
 * test_discovery_labels.c - GFD labels, the NodeResourceTopology object and
 * the inventory JSON, all from mock inventories.
 */
#include "core/object.h"
#include "discovery/discovery.h"
#include "discovery/outputs.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static struct gs_inventory *inv_of(const char *spec)
{
    static struct gs_inventory inv;
    char err[160];
    assert_int_equal(gs_mock_parse(spec, &inv, NULL, NULL, err, sizeof err), 0);
    return &inv;
}

static void labels_of(const char *spec, enum gs_mig_strategy mig, struct gs_labels *l)
{
    struct gs_label_opts o = {.mig = mig, .nvidia_pci_devices = -1};
    memset(l, 0, sizeof *l);
    assert_int_equal(gs_gfd_labels(inv_of(spec), &o, l), 0);
    /* every key and value must be a valid Kubernetes label */
    for (size_t i = 0; i < l->n; i++) {
        const char *why;
        assert_int_equal(gs_label_key_check(l->v[i].key, &why), 0);
        assert_int_equal(gs_label_value_check(l->v[i].value, &why), 0);
    }
}

#define assert_label(l, k, v) assert_string_equal(gs_labels_get(l, k) ? gs_labels_get(l, k) : "(absent)", v)

static void test_h100_labels(void **state)
{
    (void)state;
    struct gs_labels l;
    labels_of("8xH100-80GB,driver=550.107.02,cuda=12.4,machine=DGX H100", GS_MIG_NONE, &l);
    assert_label(&l, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3");
    assert_label(&l, "nvidia.com/gpu.count", "8");
    assert_label(&l, "nvidia.com/gpu.memory", "81559");
    assert_label(&l, "nvidia.com/gpu.family", "hopper");
    assert_label(&l, "nvidia.com/gpu.compute.major", "9");
    assert_label(&l, "nvidia.com/gpu.compute.minor", "0");
    assert_label(&l, "nvidia.com/gpu.replicas", "1");
    assert_label(&l, "nvidia.com/gpu.sharing-strategy", "none");
    assert_label(&l, "nvidia.com/cuda.driver.major", "550");
    assert_label(&l, "nvidia.com/cuda.driver.minor", "107");
    assert_label(&l, "nvidia.com/cuda.driver.rev", "02");
    assert_label(&l, "nvidia.com/cuda.driver-version.full", "550.107.02");
    assert_label(&l, "nvidia.com/cuda.runtime.major", "12");
    assert_label(&l, "nvidia.com/cuda.runtime.minor", "4");
    assert_label(&l, "nvidia.com/cuda.runtime-version.full", "12.4");
    assert_label(&l, "nvidia.com/mig.capable", "true");
    assert_label(&l, "nvidia.com/mps.capable", "false");
    assert_label(&l, "nvidia.com/gpu.machine", "DGX-H100");
    assert_label(&l, "nvidia.com/gpu.mode", "compute");
    assert_label(&l, "feature.node.kubernetes.io/pci-10de.present", "true");
    assert_null(gs_labels_get(&l, "nvidia.com/mig.strategy"));
    assert_null(gs_labels_get(&l, "nvidia.com/gfd.timestamp"));
    gs_labels_free(&l);
}

static void test_two_part_driver_and_timestamp(void **state)
{
    (void)state;
    struct gs_labels l = {0};
    struct gs_label_opts o = {.timestamp = 1724632719, .nvidia_pci_devices = -1};
    assert_int_equal(gs_gfd_labels(inv_of("T4,driver=535.54"), &o, &l), 0);
    assert_label(&l, "nvidia.com/cuda.driver.rev", "");
    assert_label(&l, "nvidia.com/cuda.driver.minor", "54");
    assert_label(&l, "nvidia.com/gfd.timestamp", "1724632719");
    assert_label(&l, "nvidia.com/gpu.product", "Tesla-T4");
    assert_label(&l, "nvidia.com/gpu.family", "turing");
    assert_label(&l, "nvidia.com/mig.capable", "false");
    gs_labels_free(&l);
}

static void test_mig_single(void **state)
{
    (void)state;
    struct gs_labels l;
    labels_of("2xA100-40GB,mig=1g.5gb*7", GS_MIG_SINGLE, &l);
    assert_label(&l, "nvidia.com/mig.strategy", "single");
    assert_label(&l, "nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb");
    assert_label(&l, "nvidia.com/gpu.count", "14");
    assert_label(&l, "nvidia.com/gpu.memory", "5120");
    assert_label(&l, "nvidia.com/gpu.slices.gi", "1");
    assert_label(&l, "nvidia.com/gpu.engines.copy", "1");
    assert_non_null(gs_labels_get(&l, "nvidia.com/gpu.multiprocessors"));
    gs_labels_free(&l);
    /* two profiles cannot be one resource */
    labels_of("1xA100-40GB,mig=3g.20gb+1g.5gb", GS_MIG_SINGLE, &l);
    assert_label(&l, "nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB-MIG-INVALID");
    assert_label(&l, "nvidia.com/gpu.count", "0");
    gs_labels_free(&l);
    /* single with MIG off everywhere labels full GPUs */
    labels_of("2xA100-40GB", GS_MIG_SINGLE, &l);
    assert_label(&l, "nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB");
    assert_label(&l, "nvidia.com/gpu.count", "2");
    gs_labels_free(&l);
}

static void test_mig_mixed(void **state)
{
    (void)state;
    struct gs_labels l;
    labels_of("2xA100-40GB+1xT4,mig=3g.20gb+2g.10gb*2", GS_MIG_MIXED, &l);
    assert_label(&l, "nvidia.com/mig.strategy", "mixed");
    assert_label(&l, "nvidia.com/mig-3g.20gb.count", "2");
    assert_label(&l, "nvidia.com/mig-2g.10gb.count", "4");
    assert_label(&l, "nvidia.com/mig-2g.10gb.product", "NVIDIA-A100-SXM4-40GB-MIG-2g.10gb");
    assert_label(&l, "nvidia.com/mig-2g.10gb.memory", "10240");
    assert_label(&l, "nvidia.com/mig-3g.20gb.slices.ci", "3");
    /* the full GPU left is the T4 */
    assert_label(&l, "nvidia.com/gpu.count", "1");
    assert_label(&l, "nvidia.com/gpu.product", "Tesla-T4");
    gs_labels_free(&l);
}

static void test_value_formats(void **state)
{
    (void)state;
    char buf[64];
    gs_gfd_product("  NVIDIA  A100-SXM4-40GB (rev a1)! ", buf, sizeof buf);
    assert_string_equal(buf, "NVIDIA-A100-SXM4-40GB-rev-a1");
    gs_gfd_product("Tesla V100-SXM2-16GB", buf, sizeof buf);
    assert_string_equal(buf, "Tesla-V100-SXM2-16GB");
    struct { int major, minor; const char *family; } fam[] = {
        {6, 0, "pascal"}, {7, 0, "volta"}, {7, 2, "volta"}, {7, 5, "turing"}, {8, 0, "ampere"}, {8, 6, "ampere"},
        {8, 9, "ada-lovelace"}, {9, 0, "hopper"}, {10, 0, "blackwell"}, {12, 0, "blackwell"}, {13, 0, "rubin"},
        {4, 0, "undefined"}, {0, 0, "undefined"},
    };
    for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++)
        assert_string_equal(gs_gpu_family(fam[i].major, fam[i].minor), fam[i].family);
    enum gs_mig_strategy s;
    assert_int_equal(gs_mig_strategy_parse("mixed", &s), 0);
    assert_int_equal(s, GS_MIG_MIXED);
    assert_int_equal(gs_mig_strategy_parse("both", &s), GS_EINVAL);
}

static void test_no_gpus(void **state)
{
    (void)state;
    struct gs_inventory inv;
    memset(&inv, 0, sizeof inv);
    struct gs_labels l = {0};
    struct gs_label_opts o = {.nvidia_pci_devices = 0};
    assert_int_equal(gs_gfd_labels(&inv, &o, &l), 0);
    assert_int_equal(l.n, 0);
    o.nvidia_pci_devices = 1; /* a card NVML cannot see still makes NFD's label */
    assert_int_equal(gs_gfd_labels(&inv, &o, &l), 0);
    assert_int_equal(l.n, 1);
    assert_label(&l, "feature.node.kubernetes.io/pci-10de.present", "true");
    gs_labels_free(&l);
}

/*--- NodeResourceTopology ---*/

static json_t *find_by_name(json_t *arr, const char *name)
{
    size_t i;
    json_t *it;
    json_array_foreach(arr, i, it) if (!strcmp(json_string_value(json_object_get(it, "name")), name)) return it;
    return NULL;
}

static void assert_res(json_t *zone, const char *res, const char *cap, const char *alloc, const char *avail)
{
    json_t *r = find_by_name(json_object_get(zone, "resources"), res);
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(r, "capacity")), cap);
    assert_string_equal(json_string_value(json_object_get(r, "allocatable")), alloc);
    assert_string_equal(json_string_value(json_object_get(r, "available")), avail);
}

static void test_nrt_zones(void **state)
{
    (void)state;
    struct gs_inventory *inv = inv_of("4xA100-40GB,numa=2,nvlink=pairs,cpus=24,host=n1");
    struct gs_nrt_opts o = {.policy = "single-numa-node", .scope = "pod", .allocated = 1u << 0,
                            .unhealthy = 1u << 3, .cpus_allocated = {4, 0}};
    json_t *nrt = gs_nrt_build(inv, &o);
    assert_non_null(nrt);
    assert_string_equal(json_string_value(json_object_get(nrt, "apiVersion")), "topology.node.k8s.io/v1alpha2");
    assert_string_equal(json_string_value(json_object_get(nrt, "kind")), "NodeResourceTopology");
    assert_string_equal(json_string_value(json_object_get(json_object_get(nrt, "metadata"), "name")), "n1");
    json_t *zones = json_object_get(nrt, "zones");
    assert_int_equal(json_array_size(zones), 2);
    json_t *z0 = find_by_name(zones, "node-0"), *z1 = find_by_name(zones, "node-1");
    assert_non_null(z0);
    assert_string_equal(json_string_value(json_object_get(z0, "type")), "Node");
    assert_res(z0, "nvidia.com/gpu", "2", "2", "1"); /* GPU 0 allocated */
    assert_res(z1, "nvidia.com/gpu", "2", "1", "1"); /* GPU 3 unhealthy */
    assert_res(z0, "cpu", "24", "24", "20");
    json_t *cost = find_by_name(json_object_get(z0, "costs"), "node-1");
    assert_int_equal(json_integer_value(json_object_get(cost, "value")), 20);
    json_t *pol = find_by_name(json_object_get(nrt, "attributes"), "topologyManagerPolicy");
    assert_string_equal(json_string_value(json_object_get(pol, "value")), "single-numa-node");
    /* the object model accepts what we produce */
    struct gs_object *obj = NULL;
    struct gs_diags d = {0};
    int rc = gs_object_decode(nrt, &obj, &d);
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, "%s: %s\n", d.v[i].path, d.v[i].msg);
    assert_int_equal(rc, 0);
    assert_int_equal(obj->kind, GS_KIND_NODERESOURCETOPOLOGY);
    gs_object_free(obj);
    gs_diags_free(&d);
    json_decref(nrt);
}

static void test_nrt_mig(void **state)
{
    (void)state;
    json_t *nrt = gs_nrt_build(inv_of("2xA100-40GB+2xT4,numa=2,mig=1g.5gb*7"), NULL);
    json_t *zones = json_object_get(nrt, "zones");
    json_t *z0 = find_by_name(zones, "node-0"), *z1 = find_by_name(zones, "node-1");
    assert_res(z0, "nvidia.com/mig-1g.5gb", "14", "14", "14");
    assert_null(find_by_name(json_object_get(z0, "resources"), "nvidia.com/gpu"));
    assert_res(z1, "nvidia.com/gpu", "2", "2", "2");
    json_t *pol = find_by_name(json_object_get(nrt, "attributes"), "topologyManagerPolicy");
    assert_string_equal(json_string_value(json_object_get(pol, "value")), "none");
    json_decref(nrt);
}

static void test_inventory_json(void **state)
{
    (void)state;
    json_t *j = gs_inventory_to_json(inv_of("2xA100-40GB,nvlink=pairs,mig=3g.20gb,numa=2"));
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "gpuCount")), 2);
    json_t *g1 = json_array_get(json_object_get(j, "gpus"), 1);
    assert_string_equal(json_string_value(json_object_get(g1, "computeCapability")), "8.0");
    assert_int_equal(json_integer_value(json_object_get(g1, "numaNode")), 1);
    json_t *link = json_array_get(json_object_get(g1, "nvlink"), 0);
    assert_int_equal(json_integer_value(json_object_get(link, "peer")), 0);
    json_t *mig = json_array_get(json_object_get(g1, "mig"), 0);
    assert_string_equal(json_string_value(json_object_get(mig, "profile")), "3g.20gb");
    assert_int_equal(json_array_size(json_object_get(j, "numa")), 2);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h100_labels), cmocka_unit_test(test_two_part_driver_and_timestamp),
        cmocka_unit_test(test_mig_single),  cmocka_unit_test(test_mig_mixed),
        cmocka_unit_test(test_value_formats), cmocka_unit_test(test_no_gpus),
        cmocka_unit_test(test_nrt_zones),   cmocka_unit_test(test_nrt_mig),
        cmocka_unit_test(test_inventory_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
