/*
 * test_policy.c - the ClusterPolicy view: defaults, enabled flags, node
 * deploy labels, MIG strategy and layouts (built in, inline, per node
 * label), retry settings and the errors that name the field.
 */
#include "core/codec.h"
#include "govern/policy.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static json_t *doc(const char *yaml)
{
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    assert_int_equal(gs_decode_stream(yaml, strlen(yaml), &docs, &d, NULL), 0);
    assert_int_equal(docs.n, 1);
    json_t *o = json_incref(docs.docs[0]);
    gs_docs_free(&docs);
    gs_diags_free(&d);
    return o;
}

static int parse(const char *yaml, struct gs_policy *p, char *first_path)
{
    json_t *o = doc(yaml);
    struct gs_diags d = {0};
    int err = gs_policy_parse(o, p, &d);
    if (first_path) strcpy(first_path, d.n ? d.v[0].path : "");
    gs_diags_free(&d);
    json_decref(o);
    return err;
}

#define HEAD "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: p, resourceVersion: \"42\"}\n"

static void defaults_follow_the_gpu_operator(void **state)
{
    (void)state;
    struct gs_policy p;
    assert_int_equal(parse(HEAD "spec: {}\n", &p, NULL), 0);
    assert_string_equal(p.name, "p");
    assert_int_equal(p.generation, 42);
    assert_true(p.enabled[GS_COMP_DRIVER] && p.enabled[GS_COMP_TOOLKIT] && p.enabled[GS_COMP_DEVICE_PLUGIN]);
    assert_true(p.enabled[GS_COMP_DCGM_EXPORTER] && p.enabled[GS_COMP_GFD] && p.enabled[GS_COMP_MIG_MANAGER]);
    assert_false(p.enabled[GS_COMP_NODE_STATUS_EXPORTER]);
    assert_string_equal(gs_comp_operand(GS_COMP_TOOLKIT), "container-toolkit");
    assert_string_equal(gs_comp_key(GS_COMP_DEVICE_PLUGIN), "devicePlugin");
    assert_int_equal(p.strategy, GS_MIG_MIXED);
    assert_string_equal(p.mig_default, "all-disabled");
    assert_int_equal(p.drain_timeout_ms, 60000);
    assert_int_equal(p.backoff_initial_ms, 1000);
    const struct gs_mig_layout *l = gs_policy_layout(&p, "all-balanced");
    assert_non_null(l);
    char text[128];
    gs_mig_layout_text(l, text, sizeof text);
    assert_string_equal(text, "1g.10gb*2+2g.20gb+3g.40gb");
    assert_int_equal(gs_mig_layout_slices(l), 7);
    assert_int_equal(gs_mig_layout_devices(l), 4);
    assert_false(gs_policy_layout(&p, "all-disabled")->enabled);
}

static void enabled_flags_and_node_labels(void **state)
{
    (void)state;
    struct gs_policy p;
    assert_int_equal(parse(HEAD "spec:\n  toolkit: {enabled: false}\n  nodeStatusExporter: {enabled: true}\n"
                                "  driver: {enabled: true, useNvidiaDriverCRD: false}\n",
                           &p, NULL),
                     0);
    assert_false(p.enabled[GS_COMP_TOOLKIT]);
    assert_true(p.enabled[GS_COMP_NODE_STATUS_EXPORTER]);
    json_t *labels = json_pack("{s:s}", "nvidia.com/gpu.deploy.dcgm-exporter", "false");
    assert_false(gs_policy_node_enabled(&p, labels, GS_COMP_DCGM_EXPORTER));
    assert_false(gs_policy_node_enabled(&p, labels, GS_COMP_TOOLKIT));
    assert_true(gs_policy_node_enabled(&p, labels, GS_COMP_DRIVER));
    json_object_set_new(labels, "nvidia.com/gpu.deploy.operands", json_string("false"));
    assert_false(gs_policy_node_enabled(&p, labels, GS_COMP_DRIVER));
    assert_true(gs_policy_node_enabled(&p, NULL, GS_COMP_DRIVER));
    json_decref(labels);
}

static void mig_layouts_per_node(void **state)
{
    (void)state;
    struct gs_policy p;
    const char *y = HEAD "spec:\n  mig: {strategy: single}\n  migManager:\n    drainTimeoutSeconds: 5\n"
                         "    config:\n      default: halves\n      migConfigs:\n        halves:\n"
                         "          - devices: all\n            mig-enabled: true\n"
                         "            mig-devices: {\"3g.40gb\": 2}\n"
                         "        all-1g.10gb:\n          - {devices: all, mig-enabled: true, mig-devices: {\"1g.10gb\": 3}}\n"
                         "          - {devices: all, mig-enabled: true, mig-devices: {\"1g.10gb\": 1, \"2g.20gb\": 1}}\n";
    assert_int_equal(parse(y, &p, NULL), 0);
    assert_int_equal(p.strategy, GS_MIG_SINGLE);
    assert_int_equal(p.drain_timeout_ms, 5000);
    const char *name;
    const struct gs_mig_layout *l = gs_policy_layout_for(&p, NULL, &name);
    assert_string_equal(name, "halves");
    char text[128];
    gs_mig_layout_text(l, text, sizeof text);
    assert_string_equal(text, "3g.40gb*2");
    /* A policy's layout replaces the built-in of the same name; entries merge. */
    json_t *labels = json_pack("{s:s}", "nvidia.com/mig.config", "all-1g.10gb");
    l = gs_policy_layout_for(&p, labels, &name);
    gs_mig_layout_text(l, text, sizeof text);
    assert_string_equal(text, "1g.10gb*4+2g.20gb");
    json_object_set_new(labels, "nvidia.com/mig.config", json_string("no-such"));
    assert_null(gs_policy_layout_for(&p, labels, &name));
    assert_string_equal(name, "no-such");
    json_decref(labels);
}

static void layout_text_roundtrip(void **state)
{
    (void)state;
    struct gs_mig_layout l;
    char text[128];
    assert_int_equal(gs_mig_layout_parse("3g.20gb+2g.10gb*2", &l), 0);
    assert_true(l.enabled);
    gs_mig_layout_text(&l, text, sizeof text);
    assert_string_equal(text, "3g.20gb+2g.10gb*2");
    assert_int_equal(gs_mig_layout_parse("", &l), 0);
    assert_false(l.enabled);
    assert_int_equal(gs_mig_layout_parse("enabled", &l), 0);
    assert_true(l.enabled);
    assert_int_equal(l.n, 0);
    assert_int_equal(gs_mig_layout_parse("1g.10gb*8", &l), GS_EINVAL); /* 8 slices */
    assert_int_equal(gs_mig_layout_parse("4g.big", &l), GS_EINVAL);
    assert_int_equal(gs_mig_layout_parse("1g.10gb*x", &l), GS_EINVAL);
    /* A tiny buffer truncates but reports the full length. */
    assert_int_equal(gs_mig_layout_parse("1g.10gb*7", &l), 0);
    assert_int_equal(gs_mig_layout_text(&l, text, 4), 9);
}

static void errors_name_the_field(void **state)
{
    (void)state;
    struct gs_policy p;
    char path[128];
    assert_int_equal(parse(HEAD "spec:\n  toolkit: {enabled: \"yes\"}\n", &p, path), GS_EINVAL);
    assert_string_equal(path, "spec.toolkit");
    assert_int_equal(parse(HEAD "spec:\n  mig: {strategy: half}\n", &p, path), GS_EINVAL);
    assert_string_equal(path, "spec.mig.strategy");
    assert_int_equal(parse(HEAD "spec:\n  migManager: {config: {default: nope}}\n", &p, path), GS_EINVAL);
    assert_string_equal(path, "spec.migManager.config.default");
    assert_int_equal(parse(HEAD "spec:\n  migManager: {config: {migConfigs: {big: [{mig-enabled: true, "
                                "mig-devices: {\"4g.40gb\": 2}}]}}}\n",
                           &p, path),
                     GS_EINVAL);
    assert_string_equal(path, "spec.migManager.config.migConfigs.big");
    assert_int_equal(parse(HEAD "spec:\n  migManager: {config: {migConfigs: {x: [{devices: [0]}]}}}\n", &p, path),
                     GS_EINVAL);
    assert_int_equal(parse(HEAD "spec:\n  validator: {retry: {initialBackoffSeconds: -1}}\n", &p, path), GS_EINVAL);
    assert_string_equal(path, "spec.validator.retry");
    assert_int_equal(parse(HEAD "spec:\n  validator: {retry: {initialBackoffSeconds: 0.5, maxBackoffSeconds: 4}}\n",
                           &p, NULL),
                     0);
    assert_int_equal(p.backoff_initial_ms, 500);
    assert_int_equal(p.backoff_max_ms, 4000);
    assert_int_equal(parse(HEAD "spec: [1]\n", &p, path), GS_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_follow_the_gpu_operator),
        cmocka_unit_test(enabled_flags_and_node_labels),
        cmocka_unit_test(mig_layouts_per_node),
        cmocka_unit_test(layout_text_roundtrip),
        cmocka_unit_test(errors_name_the_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
