/*
 * test_discovery_publish.c - what `gpusched node-publisher` writes: the
 * devices array (decoded back by the Node decoder, as the scheduler reads
 * it), the Node metadata merge patch with owned-label bookkeeping, and the
 * NodeResourceTopology create-or-update decision.
 */
#include "core/object.h"
#include "discovery/discovery.h"
#include "discovery/outputs.h"
#include "discovery/publish.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static void inv_of(const char *spec, struct gs_inventory *inv)
{
    char err[160];
    assert_int_equal(gs_mock_parse(spec, inv, NULL, NULL, err, sizeof err), 0);
}

static const struct gs_label_opts LO = {.mig = GS_MIG_NONE, .timestamp = 1700000000, .nvidia_pci_devices = -1};

static const char *label(const json_t *patch, const char *key)
{
    return json_string_value(json_object_get(json_object_get(json_object_get(patch, "metadata"), "labels"), key));
}

static const char *annotation(const json_t *patch, const char *key)
{
    return json_string_value(json_object_get(json_object_get(json_object_get(patch, "metadata"), "annotations"), key));
}

/* A Node as the server holds it after a merge patch: labels and annotations
 * merged, nulls removed (RFC 7386 on these two maps is all the publisher uses). */
static json_t *apply(json_t *node, const json_t *patch)
{
    if (!node) node = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Node", "metadata", "name", "n1");
    json_t *md = json_object_get(node, "metadata");
    const char *maps[] = {"labels", "annotations"};
    for (int m = 0; m < 2; m++) {
        json_t *src = json_object_get(json_object_get(patch, "metadata"), maps[m]), *dst = json_object_get(md, maps[m]);
        if (!src) continue;
        if (!dst) json_object_set_new(md, maps[m], dst = json_object());
        const char *k;
        json_t *v;
        json_object_foreach(src, k, v) {
            if (json_is_null(v)) json_object_del(dst, k);
            else json_object_set(dst, k, v);
        }
    }
    return node;
}

static void test_devices_decode_as_node_status(void **state)
{
    (void)state;
    struct gs_inventory inv;
    inv_of("4xH100-80GB,nvlink=all,numa=2", &inv);
    json_t *devs = gs_inventory_devices(&inv, 1u << 2);
    assert_non_null(devs);
    assert_int_equal(json_array_size(devs), 4);
    /* The scheduler decodes the annotation as status.devices: round-trip through the Node decoder. */
    json_t *doc = json_pack("{s:s,s:s,s:{s:s},s:{s:O}}", "apiVersion", "v1", "kind", "Node", "metadata", "name", "n1",
                            "status", "devices", devs);
    struct gs_node n;
    struct gs_diags d = {0};
    assert_int_equal(gs_node_decode(doc, &n, &d), 0);
    assert_int_equal(n.ngpus, 4);
    for (size_t i = 0; i < n.ngpus; i++) {
        assert_int_equal(n.gpus[i].index, (int)i);
        assert_string_equal(n.gpus[i].uuid, inv.gpus[i].uuid);
        assert_string_equal(n.gpus[i].model, "NVIDIA-H100-80GB-HBM3");
        assert_int_equal(n.gpus[i].memory_mib, (int64_t)inv.gpus[i].memory_mib);
        assert_int_equal(n.gpus[i].numa_node, inv.gpus[i].numa_node);
        assert_int_equal(n.gpus[i].healthy, i != 2);
        assert_int_equal(__builtin_popcountll(n.gpus[i].nvlink_peers), 3); /* all-to-all, not itself */
        assert_false(n.gpus[i].nvlink_peers >> i & 1);
    }
    gs_node_clear(&n);
    gs_diags_free(&d);
    json_decref(doc);
    json_decref(devs);
}

static void test_devices_mig(void **state)
{
    (void)state;
    struct gs_inventory inv;
    inv_of("1xA100-40GB,mig=3g.20gb+1g.5gb", &inv);
    json_t *devs = gs_inventory_devices(&inv, 0), *mig = json_object_get(json_array_get(devs, 0), "mig");
    assert_true(json_is_true(json_object_get(mig, "enabled")));
    assert_int_equal(json_array_size(json_object_get(mig, "instances")), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(mig, "instances"), 0),
                                                          "profile")), "3g.20gb");
    json_decref(devs);
}

static void test_first_patch_and_idempotence(void **state)
{
    (void)state;
    struct gs_inventory inv;
    inv_of("2xH100-80GB", &inv);
    json_t *patch = NULL;
    assert_int_equal(gs_publish_node_patch(NULL, &inv, 0, &LO, &patch), 0);
    assert_non_null(patch);
    assert_string_equal(label(patch, "nvidia.com/gpu.count"), "2");
    assert_string_equal(label(patch, "nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
    assert_null(label(patch, "nvidia.com/gfd.timestamp")); /* would rewrite the Node every period */
    /* The annotation is the devices array as compact JSON text. */
    json_t *devs = gs_inventory_devices(&inv, 0);
    char *text = json_dumps(devs, JSON_COMPACT);
    assert_string_equal(annotation(patch, GS_ANN_GPUS), text);
    free(text);
    json_decref(devs);
    /* Every label it set is recorded as owned, and nothing else. */
    const char *owned = annotation(patch, GS_ANN_PUBLISHED_LABELS);
    assert_non_null(owned);
    assert_non_null(strstr(owned, "nvidia.com/gpu.count"));
    size_t commas = 0;
    for (const char *p = owned; *p; p++) commas += *p == ',';
    assert_int_equal(commas + 1, json_object_size(json_object_get(json_object_get(patch, "metadata"), "labels")));
    /* Applied, the same inventory needs no write. */
    json_t *node = apply(NULL, patch);
    json_decref(patch);
    assert_int_equal(gs_publish_node_patch(node, &inv, 0, &LO, &patch), 0);
    assert_null(patch);
    /* A GPU turning unhealthy changes the annotation only. */
    assert_int_equal(gs_publish_node_patch(node, &inv, 1, &LO, &patch), 0);
    assert_non_null(patch);
    assert_null(json_object_get(json_object_get(patch, "metadata"), "labels"));
    assert_non_null(strstr(annotation(patch, GS_ANN_GPUS), "\"health\":\"Unhealthy\""));
    assert_null(annotation(patch, GS_ANN_PUBLISHED_LABELS));
    json_decref(patch);
    json_decref(node);
}

static void test_stale_labels_removed_foreign_kept(void **state)
{
    (void)state;
    struct gs_inventory a, b;
    inv_of("2xA100-40GB,mig=1g.5gb*7", &a);
    inv_of("2xA100-40GB", &b);
    struct gs_label_opts single = LO;
    single.mig = GS_MIG_SINGLE;
    json_t *patch = NULL;
    assert_int_equal(gs_publish_node_patch(NULL, &a, 0, &single, &patch), 0);
    assert_non_null(label(patch, "nvidia.com/mig.strategy"));
    assert_non_null(label(patch, "nvidia.com/gpu.slices.gi"));
    json_t *node = apply(NULL, patch);
    json_decref(patch);
    /* Someone else's labels, one of them in the nvidia.com/ namespace. */
    json_t *labels = json_object_get(json_object_get(node, "metadata"), "labels");
    json_object_set_new(labels, "team", json_string("a"));
    json_object_set_new(labels, "nvidia.com/gpu.deploy.driver", json_string("true"));
    assert_int_equal(gs_publish_node_patch(node, &b, 0, &LO, &patch), 0);
    json_t *pl = json_object_get(json_object_get(patch, "metadata"), "labels");
    assert_true(json_is_null(json_object_get(pl, "nvidia.com/mig.strategy")));
    assert_true(json_is_null(json_object_get(pl, "nvidia.com/gpu.slices.gi")));
    assert_null(json_object_get(pl, "team"));
    assert_null(json_object_get(pl, "nvidia.com/gpu.deploy.driver"));
    assert_non_null(strstr(annotation(patch, GS_ANN_PUBLISHED_LABELS), "nvidia.com/gpu.count"));
    assert_null(strstr(annotation(patch, GS_ANN_PUBLISHED_LABELS), "mig.strategy"));
    node = apply(node, patch);
    json_decref(patch);
    labels = json_object_get(json_object_get(node, "metadata"), "labels");
    assert_null(json_object_get(labels, "nvidia.com/mig.strategy"));
    assert_string_equal(json_string_value(json_object_get(labels, "team")), "a");
    assert_string_equal(json_string_value(json_object_get(labels, "nvidia.com/gpu.deploy.driver")), "true");
    /* A node whose GPUs are gone loses every owned label. */
    struct gs_inventory none;
    inv_of("1xT4", &none);
    none.n_gpus = 0; /* the mock wants at least one GPU; a node without any is a sysfs/NVML answer */
    assert_int_equal(gs_publish_node_patch(node, &none, 0, &LO, &patch), 0);
    pl = json_object_get(json_object_get(patch, "metadata"), "labels");
    assert_true(json_is_null(json_object_get(pl, "nvidia.com/gpu.count")));
    assert_null(json_object_get(pl, "team"));
    assert_string_equal(annotation(patch, GS_ANN_PUBLISHED_LABELS), "");
    assert_string_equal(annotation(patch, GS_ANN_GPUS), "[]");
    json_decref(patch);
    json_decref(node);
}

static void test_nrt_create_update_skip(void **state)
{
    (void)state;
    struct gs_inventory inv;
    inv_of("4xH100-80GB,numa=2", &inv);
    json_t *obj = NULL;
    assert_int_equal(gs_publish_nrt(NULL, "node-a", &inv, 0, NULL, &obj), 0);
    assert_non_null(obj);
    assert_string_equal(json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")), "node-a");
    assert_null(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    assert_int_equal(json_array_size(json_object_get(obj, "zones")), 2);
    /* The server's copy, with what it adds. */
    json_t *cur = json_deep_copy(obj);
    json_object_set_new(json_object_get(cur, "metadata"), "resourceVersion", json_string("17"));
    json_object_set_new(json_object_get(cur, "metadata"), "uid", json_string("u-1"));
    json_decref(obj);
    assert_int_equal(gs_publish_nrt(cur, "node-a", &inv, 0, NULL, &obj), 0);
    assert_null(obj);
    /* An unhealthy GPU is no longer allocatable: update over the version read. */
    assert_int_equal(gs_publish_nrt(cur, "node-a", &inv, 1, NULL, &obj), 0);
    assert_non_null(obj);
    assert_string_equal(json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion")), "17");
    char *text = json_dumps(json_object_get(obj, "zones"), JSON_COMPACT);
    assert_non_null(strstr(text, "\"capacity\":\"2\",\"allocatable\":\"1\""));
    free(text);
    json_decref(obj);
    /* Another policy is a change too. */
    struct gs_nrt_opts o = {.policy = "single-numa-node"};
    assert_int_equal(gs_publish_nrt(cur, "node-a", &inv, 0, &o, &obj), 0);
    assert_non_null(obj);
    json_decref(obj);
    json_decref(cur);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_devices_decode_as_node_status),
        cmocka_unit_test(test_devices_mig),
        cmocka_unit_test(test_first_patch_and_idempotence),
        cmocka_unit_test(test_stale_labels_removed_foreign_kept),
        cmocka_unit_test(test_nrt_create_update_skip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
