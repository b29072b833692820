/*
 * test_resourceslice.c - ResourceSlices built from mock discovery: NVIDIA's
 * device names, attributes and capacities, NVLink islands and NUMA, MIG
 * instances with their placements, taints from health, partitionable
 * counter sets, slice splitting and resourceSliceCount, the generation rule,
 * and that every slice passes the API's own validation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/object.h"
#include "discovery/discovery.h"
#include "discovery/resourceslice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void inv_of(const char *spec, struct gs_inventory *inv)
{
    struct gs_fault *f = NULL;
    size_t nf = 0;
    char err[256] = "";
    int rc = gs_mock_parse(spec, inv, &f, &nf, err, sizeof err);
    if (rc) fail_msg("mock %s: %s", spec, err);
    free(f);
}

/* Every slice validates as the API server would. */
static void valid(const json_t *slices)
{
    size_t i;
    json_t *s;
    json_array_foreach(slices, i, s) {
        struct gs_diags d = {0};
        struct gs_object *o = NULL;
        json_t *copy = json_deep_copy(s);
        int rc = gs_object_decode(copy, &o, &d);
        if (rc || d.n) fail_msg("slice %zu invalid: %s: %s", i, d.n ? d.v[0].path : "", d.n ? d.v[0].msg : "");
        gs_object_free(o);
        json_decref(copy);
        gs_diags_free(&d);
    }
}

static const json_t *device(const json_t *slices, const char *name)
{
    size_t i, j;
    json_t *s, *d;
    json_array_foreach(slices, i, s) json_array_foreach(json_object_get(json_object_get(s, "spec"), "devices"), j, d) {
        const char *n = json_string_value(json_object_get(d, "name"));
        if (n && !strcmp(n, name)) return d;
    }
    return NULL;
}

static size_t ndevices(const json_t *slices)
{
    size_t n = 0, i;
    json_t *s;
    json_array_foreach(slices, i, s) n += json_array_size(json_object_get(json_object_get(s, "spec"), "devices"));
    return n;
}

static const json_t *attr(const json_t *dev, const char *name)
{
    return json_object_get(json_object_get(dev, "attributes"), name);
}

static const char *astr(const json_t *dev, const char *name, const char *kind)
{
    return json_string_value(json_object_get(attr(dev, name), kind));
}

static const char *cap(const json_t *dev, const char *name)
{
    return json_string_value(json_object_get(json_object_get(json_object_get(dev, "capacity"), name), "value"));
}

static void whole_gpus_carry_nvidias_attributes(void **state)
{
    (void)state;
    struct gs_inventory inv;
    inv_of("8xH100-80GB,numa=2,nvlink=islands:4,host=node-a,driver=550.54.15,cuda=12.4", &inv);
    struct gs_diags d = {0};
    json_t *s = gs_resourceslices_build(&inv, "node-a", 3, false, &d);
    assert_non_null(s);
    assert_int_equal(json_array_size(s), 1);
    const json_t *sl = json_array_get(s, 0), *spec = json_object_get(sl, "spec");
    assert_string_equal(json_string_value(json_object_get(sl, "apiVersion")), "resource.k8s.io/v1");
    assert_string_equal(json_string_value(json_object_get(json_object_get(sl, "metadata"), "name")),
                        "node-a-gpu.nvidia.com-0");
    assert_string_equal(json_string_value(json_object_get(spec, "driver")), "gpu.nvidia.com");
    assert_string_equal(json_string_value(json_object_get(spec, "nodeName")), "node-a");
    assert_string_equal(json_string_value(json_object_get(json_object_get(spec, "pool"), "name")), "node-a");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(spec, "pool"), "generation")), 3);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(spec, "pool"), "resourceSliceCount")), 1);
    assert_int_equal(ndevices(s), 8);
    const json_t *g0 = device(s, "gpu-0"), *g5 = device(s, "gpu-5");
    assert_non_null(g0);
    assert_string_equal(astr(g0, "type", "string"), "gpu");
    assert_string_equal(astr(g0, "uuid", "string"), inv.gpus[0].uuid); /* what the GPU cache knows */
    assert_string_equal(astr(g0, "productName", "string"), "NVIDIA H100 80GB HBM3");
    assert_string_equal(astr(g0, "architecture", "string"), "Hopper");
    assert_string_equal(astr(g0, "brand", "string"), "Nvidia");
    assert_string_equal(astr(g0, "cudaComputeCapability", "version"), "9.0.0");
    assert_string_equal(astr(g0, "driverVersion", "version"), "550.54.15");
    assert_string_equal(astr(g0, "cudaDriverVersion", "version"), "12.4.0");
    assert_non_null(astr(g0, "resource.kubernetes.io/pciBusID", "string"));
    assert_int_equal(strncmp(astr(g0, "resource.kubernetes.io/pcieRoot", "string"), "pci", 3), 0);
    assert_string_equal(cap(g0, "memory"), "81559Mi");
    /* NUMA in contiguous blocks, NVLink islands of four named by their lowest index */
    assert_int_equal(json_integer_value(json_object_get(attr(g0, "resource.kubernetes.io/numaNode"), "int")), 0);
    assert_int_equal(json_integer_value(json_object_get(attr(g5, "resource.kubernetes.io/numaNode"), "int")), 1);
    assert_int_equal(json_integer_value(json_object_get(attr(g0, "gpu.nvidia.com/nvlinkDomain"), "int")), 0);
    assert_int_equal(json_integer_value(json_object_get(attr(device(s, "gpu-3"), "gpu.nvidia.com/nvlinkDomain"),
                                                        "int")), 0);
    assert_int_equal(json_integer_value(json_object_get(attr(g5, "gpu.nvidia.com/nvlinkDomain"), "int")), 4);
    assert_null(json_object_get(g0, "taints"));
    valid(s);
    json_decref(s);
    /* PCIe cards without NVLink: no nvlinkDomain; a driver version with a leading zero becomes semver */
    inv_of("2xT4,driver=535.104.05", &inv);
    s = gs_resourceslices_build(&inv, "n", 0, false, &d);
    assert_null(attr(device(s, "gpu-0"), "gpu.nvidia.com/nvlinkDomain"));
    assert_string_equal(astr(device(s, "gpu-1"), "driverVersion", "version"), "535.104.5");
    assert_string_equal(astr(device(s, "gpu-1"), "architecture", "string"), "Turing");
    valid(s);
    json_decref(s);
    assert_int_equal(d.n, 0);
}

static void mig_instances_replace_their_gpu(void **state)
{
    (void)state;
    struct gs_inventory inv;
    inv_of("2xA100-40GB,mig=3g.20gb+2g.10gb*2,host=m", &inv);
    struct gs_diags d = {0};
    json_t *s = gs_resourceslices_build(&inv, "m", 1, false, &d);
    assert_non_null(s);
    assert_null(device(s, "gpu-0")); /* never handed out whole while partitioned */
    assert_int_equal(ndevices(s), 6);
    /* 3g must sit at 4 so both 2g fit at 0 and 2 */
    const json_t *m3 = device(s, "gpu-0-mig-3g20gb-9-4"), *m2a = device(s, "gpu-0-mig-2g10gb-14-0"),
                 *m2b = device(s, "gpu-0-mig-2g10gb-14-2");
    assert_non_null(m3);
    assert_non_null(m2a);
    assert_non_null(m2b);
    assert_string_equal(astr(m3, "type", "string"), "mig");
    assert_string_equal(astr(m3, "profile", "string"), "3g.20gb");
    assert_string_equal(astr(m3, "parentUUID", "string"), inv.gpus[0].uuid);
    assert_string_equal(astr(m3, "uuid", "string"), inv.gpus[0].mig[0].uuid);
    assert_string_equal(astr(m3, "productName", "string"), inv.gpus[0].name);
    assert_string_equal(cap(m3, "memorySlice4"), "1");
    assert_string_equal(cap(m3, "memorySlice7"), "1");
    assert_null(cap(m3, "memorySlice3"));
    assert_non_null(cap(m3, "multiprocessors"));
    assert_non_null(cap(m3, "copyEngines"));
    assert_string_equal(cap(m2b, "memorySlice2"), "1");
    valid(s);
    json_decref(s);
    assert_int_equal(d.n, 0);
}

static void unhealthy_gpus_are_tainted(void **state)
{
    (void)state;
    struct gs_inventory inv;
    inv_of("4xH100-80GB,host=h", &inv);
    struct gs_slice_health h = {.unhealthy = 0x6, .fatal = 0x4};
    h.since_s[1] = 1767225600; /* 2026-01-01T00:00:00Z */
    h.since_s[2] = 1767225660;
    struct gs_diags d = {0};
    json_t *s = gs_resourceslices_build_health(&inv, "h", 2, false, &h, &d);
    assert_null(json_object_get(device(s, "gpu-0"), "taints"));
    const json_t *t1 = json_array_get(json_object_get(device(s, "gpu-1"), "taints"), 0);
    const json_t *t2 = json_array_get(json_object_get(device(s, "gpu-2"), "taints"), 0);
    assert_string_equal(json_string_value(json_object_get(t1, "key")), "gpu.nvidia.com/unhealthy");
    assert_string_equal(json_string_value(json_object_get(t1, "effect")), "NoSchedule");
    assert_string_equal(json_string_value(json_object_get(t1, "timeAdded")), "2026-01-01T00:00:00Z");
    assert_string_equal(json_string_value(json_object_get(t2, "effect")), "NoExecute");
    valid(s);
    /* the content changed: a publisher bumps the generation; the same content at another generation is the same */
    json_t *healthy = gs_resourceslices_build(&inv, "h", 2, false, &d), *again = gs_resourceslices_build_health(
                                                                            &inv, "h", 9, false, &h, &d);
    assert_false(gs_resourceslices_same(s, healthy));
    assert_true(gs_resourceslices_same(s, again));
    json_decref(s);
    json_decref(healthy);
    json_decref(again);
}

static void partitionable_gpus_are_counter_sets(void **state)
{
    (void)state;
    struct gs_inventory inv;
    inv_of("8xH100-80GB,host=p", &inv);
    struct gs_diags d = {0};
    json_t *s = gs_resourceslices_build(&inv, "p", 5, true, &d);
    assert_non_null(s);
    /* 8 GPUs x (whole + 7+3+2+1+1 placements) = 120 devices: one counter slice, two device slices of <= 64 */
    assert_int_equal(ndevices(s), 120);
    assert_int_equal(json_array_size(s), 3);
    for (size_t i = 0; i < 3; i++) {
        const json_t *spec = json_object_get(json_array_get(s, i), "spec");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(spec, "pool"), "resourceSliceCount")), 3);
        assert_true(json_array_size(json_object_get(spec, "devices")) <= 64);
    }
    const json_t *sets = json_object_get(json_object_get(json_array_get(s, 0), "spec"), "sharedCounters");
    assert_int_equal(json_array_size(sets), 8);
    const json_t *set0 = json_array_get(sets, 0);
    assert_string_equal(json_string_value(json_object_get(set0, "name")), "gpu-0-counter-set");
    const json_t *ctr = json_object_get(set0, "counters");
    assert_string_equal(json_string_value(json_object_get(json_object_get(ctr, "memory"), "value")), "81559Mi");
    assert_non_null(json_object_get(ctr, "memorySlice7"));
    /* the whole GPU consumes every slice; a 1g placement at 6 only slice 6, and has no uuid yet */
    const json_t *whole = device(s, "gpu-0"), *p = device(s, "gpu-0-mig-1g10gb-19-6");
    assert_non_null(whole);
    assert_non_null(p);
    const json_t *wc = json_array_get(json_object_get(whole, "consumesCounters"), 0);
    assert_string_equal(json_string_value(json_object_get(wc, "counterSet")), "gpu-0-counter-set");
    assert_non_null(json_object_get(json_object_get(wc, "counters"), "memorySlice0"));
    assert_non_null(json_object_get(json_object_get(wc, "counters"), "memorySlice7"));
    const json_t *pc = json_object_get(json_array_get(json_object_get(p, "consumesCounters"), 0), "counters");
    assert_non_null(json_object_get(pc, "memorySlice6"));
    assert_null(json_object_get(pc, "memorySlice5"));
    assert_null(attr(p, "uuid"));
    assert_string_equal(astr(p, "profile", "string"), "1g.10gb");
    assert_non_null(device(s, "gpu-7-mig-7g80gb-0-0"));
    assert_non_null(device(s, "gpu-3-mig-3g40gb-9-4"));
    valid(s);
    json_decref(s);
    /* GPUs that cannot do MIG stay plain devices */
    inv_of("2xL4,host=p", &inv);
    s = gs_resourceslices_build(&inv, "p", 0, true, &d);
    assert_int_equal(ndevices(s), 2);
    assert_null(json_object_get(device(s, "gpu-0"), "consumesCounters"));
    json_decref(s);
    assert_int_equal(d.n, 0);
}

static void many_devices_make_more_slices(void **state)
{
    (void)state;
    struct gs_inventory inv;
    inv_of("32xA100-80GB,host=big", &inv);
    struct gs_diags d = {0};
    json_t *s = gs_resourceslices_build(&inv, "big", 0, true, &d);
    /* 32 counter sets: 4 slices of 8; 32 x 15 = 480 devices: 8 slices of 64 (the last 32) */
    assert_int_equal(json_array_size(s), 12);
    assert_int_equal(ndevices(s), 480);
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(s, 11), "metadata"), "name")),
                        "big-gpu.nvidia.com-11");
    valid(s);
    json_decref(s);
    /* no GPUs: nothing to publish */
    inv_of("1xT4", &inv);
    inv.n_gpus = 0;
    s = gs_resourceslices_build(&inv, "empty", 0, false, &d);
    assert_int_equal(json_array_size(s), 0);
    json_decref(s);
    assert_int_equal(d.n, 0);
}

/* The stateless publisher's plan: nothing written for the same content, one generation up otherwise. */
static void next_keeps_or_bumps_the_generation(void **state)
{
    (void)state;
    struct gs_inventory inv;
    inv_of("2xH100-80GB,host=q", &inv);
    struct gs_diags d = {0};
    json_t *want = NULL, *again = NULL;
    bool changed = false;
    assert_int_equal(gs_resourceslices_next(NULL, &inv, "q", false, NULL, &want, &changed, &d), 0);
    assert_true(changed);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(json_array_get(want, 0),
                                                                                          "spec"), "pool"),
                                                        "generation")), 1);
    /* the server's copy (with its metadata) is the same content: nothing to write, same generation */
    json_object_set_new(json_object_get(json_array_get(want, 0), "metadata"), "resourceVersion", json_string("42"));
    assert_int_equal(gs_resourceslices_next(want, &inv, "q", false, NULL, &again, &changed, &d), 0);
    assert_false(changed);
    json_decref(again);
    /* a GPU turns unhealthy: generation 2 */
    struct gs_slice_health h = {.unhealthy = 1};
    assert_int_equal(gs_resourceslices_next(want, &inv, "q", false, &h, &again, &changed, &d), 0);
    assert_true(changed);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(json_array_get(again, 0),
                                                                                          "spec"), "pool"),
                                                        "generation")), 2);
    json_decref(again);
    /* no room above the highest generation: said, not wrapped */
    json_object_set_new(json_object_get(json_object_get(json_array_get(want, 0), "spec"), "pool"), "generation",
                        json_integer(INT64_MAX));
    assert_int_equal(gs_resourceslices_next(want, &inv, "q", false, &h, &again, &changed, &d), GS_ERANGE);
    assert_string_equal(d.v[0].path, "generation");
    gs_diags_free(&d);
    json_decref(want);
}

static void bad_inputs_are_named(void **state)
{
    (void)state;
    struct gs_inventory inv;
    inv_of("1xT4", &inv);
    struct gs_diags d = {0};
    assert_null(gs_resourceslices_build(&inv, "Node_A", 0, false, &d));
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, "node");
    assert_string_equal(d.v[0].msg, "invalid node name \"Node_A\": must consist of lower case alphanumeric characters, "
                                    "'-' or '.'");
    gs_diags_free(&d);
    assert_null(gs_resourceslices_build(&inv, "", 0, false, &d));
    assert_string_equal(d.v[0].msg, "invalid node name \"\": must not be empty");
    gs_diags_free(&d);
    assert_null(gs_resourceslices_build(&inv, "n", -1, false, &d));
    assert_string_equal(d.v[0].msg, "invalid generation -1: must be at least 0");
    gs_diags_free(&d);
    char name[96];
    gs_dra_mig_device_name(3, "1g.10gb+me", 20, 6, name, sizeof name);
    assert_string_equal(name, "gpu-3-mig-1g10gbme-20-6");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_gpus_carry_nvidias_attributes), cmocka_unit_test(mig_instances_replace_their_gpu),
        cmocka_unit_test(unhealthy_gpus_are_tainted),          cmocka_unit_test(partitionable_gpus_are_counter_sets),
        cmocka_unit_test(many_devices_make_more_slices),       cmocka_unit_test(bad_inputs_are_named),
        cmocka_unit_test(next_keeps_or_bumps_the_generation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
