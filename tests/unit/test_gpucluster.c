/*
 * test_gpucluster.c - the GPUCluster (nvidia.com/v1alpha1), NVIDIA's DRA
 * counterpart of the ClusterPolicy: its parse (DRA driver on, no device
 * plugin or MIG manager, what it does not manage refused by name), the
 * operator walking a node driver -> toolkit -> dra-plugin -> monitoring ->
 * ready under it with the request saying model "dra", the policy status
 * written on the GPUCluster, the oldest of a ClusterPolicy and a GPUCluster
 * kept when both exist, the dra-plugin validator against ResourceSlices
 * built from the same mock GPUs, and the API refusing the second kind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "control/resources.h"
#include "control/store.h"
#include "core/clock.h"
#include "core/object.h"
#include "discovery/discovery.h"
#include "discovery/resourceslice.h"
#include "govern/operator.h"
#include "govern/policy.h"
#include "govern/statemachine.h"
#include "govern/validators.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *J(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    if (!j) fail_msg("bad JSON in the test: %s", text);
    return j;
}

/*--- Parse ---*/

static void parse_defaults_and_refusals(void **state)
{
    (void)state;
    struct gs_policy p;
    struct gs_diags d = {0};
    json_t *doc = J("{\"kind\":\"GPUCluster\",\"metadata\":{\"name\":\"gc\"},\"spec\":{}}");
    assert_int_equal(gs_gpucluster_parse(doc, &p, &d), 0);
    json_decref(doc);
    assert_true(p.dra);
    assert_string_equal(p.name, "gc");
    assert_true(p.enabled[GS_COMP_DRA_DRIVER]);
    assert_false(p.enabled[GS_COMP_DEVICE_PLUGIN]);
    assert_false(p.enabled[GS_COMP_MIG_MANAGER]);
    assert_true(p.enabled[GS_COMP_DRIVER]);
    assert_true(p.enabled[GS_COMP_DCGM_EXPORTER]);
    /* a ClusterPolicy leaves the DRA driver off unless it says so */
    struct gs_policy cp;
    doc = J("{\"spec\":{}}");
    assert_int_equal(gs_policy_parse(doc, &cp, &d), 0);
    json_decref(doc);
    assert_false(cp.dra);
    assert_false(cp.enabled[GS_COMP_DRA_DRIVER]);
    assert_true(cp.enabled[GS_COMP_DEVICE_PLUGIN]);
    /* switches it reads */
    doc = J("{\"spec\":{\"dcgmExporter\":{\"enabled\":false},\"validator\":{\"retry\":{\"initialBackoffSeconds\":3}}}}");
    assert_int_equal(gs_gpucluster_parse(doc, &p, &d), 0);
    json_decref(doc);
    assert_false(p.enabled[GS_COMP_DCGM_EXPORTER]);
    assert_int_equal(p.backoff_initial_ms, 3000);
    /* what it does not manage, by name */
    doc = J("{\"spec\":{\"devicePlugin\":{\"enabled\":true},\"migManager\":{},\"driver\":{\"enabled\":false},"
            "\"draDriver\":{\"enabled\":\"yes\"}}}");
    assert_int_equal(gs_gpucluster_parse(doc, &p, &d), GS_EINVAL);
    json_decref(doc);
    assert_int_equal(d.n, 4);
    assert_string_equal(d.v[0].path, "spec.devicePlugin");
    assert_non_null(strstr(d.v[0].msg, "not managed by a GPUCluster"));
    assert_string_equal(d.v[1].path, "spec.migManager");
    assert_string_equal(d.v[2].path, "spec.draDriver");
    assert_string_equal(d.v[2].msg, "enabled: want true or false");
    assert_string_equal(d.v[3].path, "spec.driver.enabled");
    gs_diags_free(&d);
    /* the API's validation says the same */
    doc = J("{\"apiVersion\":\"nvidia.com/v1alpha1\",\"kind\":\"GPUCluster\",\"metadata\":{\"name\":\"g\"},"
            "\"spec\":{\"mig\":{\"strategy\":\"mixed\"},\"dcgm\":{\"enabled\":1}}}");
    struct gs_object *o = NULL;
    gs_object_decode(doc, &o, &d);
    gs_object_free(o);
    json_decref(doc);
    assert_int_equal(d.n, 2);
    assert_string_equal(d.v[0].path, "spec.dcgm.enabled");
    assert_string_equal(d.v[1].path, "spec.mig");
    gs_diags_free(&d);
    assert_string_equal(gs_step_name(GS_STEP_DRA_PLUGIN), "dra-plugin");
    assert_string_equal(gs_step_reason(GS_STEP_DRA_PLUGIN), "DRAPluginValidating");
    assert_string_equal(gs_comp_operand(GS_COMP_DRA_DRIVER), "dra-driver");
}

/*--- Operator ---*/

struct fx {
    char dir[64];
    struct gs_store *st;
    struct gs_source *src;
    struct gs_clock clk;
    struct gs_operator *op;
};

static int op_setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/gs-gpucluster-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    struct gs_store_opts so = {.dir = f->dir};
    if (gs_store_open_sqlite(&so, &f->st) || gs_source_local_new(f->st, &f->src)) return -1;
    gs_clock_init_sim(&f->clk, 1000 * GS_NS_PER_SEC);
    struct gs_operator_opts oo = {.source = f->src, .clock = &f->clk, .wall = &f->clk};
    if (gs_operator_new(&oo, &f->op)) return -1;
    json_t *node = J("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"},\"spec\":{},\"status\":"
                     "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],\"devices\":[{\"index\":0,\"uuid\":"
                     "\"GPU-1\",\"model\":\"NVIDIA-H100\",\"memoryMiB\":81559}]}}");
    int err = gs_store_create(f->st, "nodes/n1", node, NULL);
    json_decref(node);
    *state = f;
    return err;
}

static int op_teardown(void **state)
{
    struct fx *f = *state;
    gs_operator_stop(f->op);
    gs_source_free(f->src);
    gs_store_close(f->st);
    fx_rm_tree(f->dir);
    free(f);
    return 0;
}

static json_t *get(struct fx *f, const char *key)
{
    json_t *o = NULL;
    assert_int_equal(gs_store_get(f->st, key, &o, NULL), 0);
    return o;
}

static json_t *request(struct fx *f)
{
    json_t *n = get(f, "nodes/n1");
    const char *t = json_string_value(
        json_object_get(json_object_get(json_object_get(n, "metadata"), "annotations"), GS_ANN_STACK_REQUEST));
    json_t *r = t ? json_loads(t, 0, NULL) : NULL;
    json_decref(n);
    return r;
}

static int answer_fn(json_t *cur, json_t **out, void *arg)
{
    json_t *n = json_deep_copy(cur);
    json_object_set(json_object_get(n, "status"), "gpuStack", arg);
    *out = n;
    return 0;
}

/* Answers the pending request ok; returns its step name (static buffer). */
static const char *answer_ok(struct fx *f)
{
    static char step[32];
    json_t *r = request(f);
    assert_non_null(r);
    snprintf(step, sizeof step, "%s", json_string_value(json_object_get(r, "step")));
    json_t *a = json_pack("{s:O,s:O,s:O,s:b,s:s}", "generation", json_object_get(r, "generation"), "step",
                          json_object_get(r, "step"), "attempt", json_object_get(r, "attempt"), "ok", 1, "message", "ok");
    json_t *out = NULL;
    assert_int_equal(gs_store_mutate(f->st, "nodes/n1", answer_fn, a, &out, NULL), 0);
    json_decref(out);
    json_decref(a);
    json_decref(r);
    return step;
}

static void put(struct fx *f, const char *prefix, const char *api, const char *kind, const char *name, const char *ts)
{
    char key[160];
    snprintf(key, sizeof key, "%s%s", prefix, name);
    json_t *p = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:{s:{s:f}}}}", "apiVersion", api, "kind", kind, "metadata", "name",
                          name, "creationTimestamp", ts, "spec", "validator", "retry", "initialBackoffSeconds", 0.1);
    assert_int_equal(gs_store_create(f->st, key, p, NULL), 0);
    json_decref(p);
}

static const char *label(const json_t *node, const char *k)
{
    return json_string_value(json_object_get(json_object_get(json_object_get(node, "metadata"), "labels"), k));
}

static void operator_walks_the_dra_stack(void **state)
{
    struct fx *f = *state;
    put(f, GS_GPUCLUSTER_PREFIX, "nvidia.com/v1alpha1", "GPUCluster", "gpu-cluster", "2026-01-01T00:00:00Z");
    gs_operator_sync(f->op);
    json_t *r = request(f);
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(r, "model")), "dra");
    assert_true(json_is_true(json_object_get(json_object_get(r, "components"), "draDriver")));
    assert_false(json_is_true(json_object_get(json_object_get(r, "components"), "devicePlugin")));
    json_decref(r);
    const char *want[] = {"driver", "toolkit", "dra-plugin", "monitoring"};
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(answer_ok(f), want[i]);
        gs_operator_sync(f->op);
    }
    json_t *n = get(f, "nodes/n1");
    assert_string_equal(label(n, GS_LABEL_STACK_STATE), "ready");
    assert_string_equal(label(n, "nvidia.com/gpu.deploy.dra-driver"), "true");
    assert_string_equal(label(n, "nvidia.com/gpu.deploy.device-plugin"), "false");
    json_decref(n);
    json_t *gc = get(f, GS_GPUCLUSTER_PREFIX "gpu-cluster");
    assert_string_equal(json_string_value(json_object_get(json_object_get(gc, "status"), "state")), "ready");
    json_decref(gc);
    /* a ClusterPolicy created later is the one ignored, naming the GPUCluster */
    put(f, "clusterpolicies.nvidia.com/", "nvidia.com/v1", "ClusterPolicy", "late", "2026-02-01T00:00:00Z");
    gs_operator_sync(f->op);
    json_t *cp = get(f, "clusterpolicies.nvidia.com/late");
    assert_string_equal(json_string_value(json_object_get(json_object_get(cp, "status"), "state")), "ignored");
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(cp, "status"), "message")),
                           "another GPUCluster (gpu-cluster) is in force"));
    json_decref(cp);
    r = request(f);
    assert_string_equal(json_string_value(json_object_get(r, "model")), "dra");
    json_decref(r);
}

static void switching_model_redrives(void **state)
{
    struct fx *f = *state;
    put(f, "clusterpolicies.nvidia.com/", "nvidia.com/v1", "ClusterPolicy", "cp", "2026-01-01T00:00:00Z");
    gs_operator_sync(f->op);
    const char *want[] = {"driver", "toolkit", "device-plugin", "mig", "monitoring"};
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(answer_ok(f), want[i]);
        gs_operator_sync(f->op);
    }
    json_t *r = request(f);
    assert_string_equal(json_string_value(json_object_get(r, "model")), "device-plugin");
    assert_string_equal(json_string_value(json_object_get(r, "step")), "ready");
    json_decref(r);
    /* the ClusterPolicy goes, a GPUCluster comes: the node walks again, through dra-plugin */
    json_t *old = NULL;
    assert_int_equal(gs_store_delete(f->st, "clusterpolicies.nvidia.com/cp", 0, &old, NULL), 0);
    json_decref(old);
    put(f, GS_GPUCLUSTER_PREFIX, "nvidia.com/v1alpha1", "GPUCluster", "gc", "2026-03-01T00:00:00Z");
    gs_operator_sync(f->op);
    gs_operator_sync(f->op);
    r = request(f);
    assert_string_equal(json_string_value(json_object_get(r, "model")), "dra");
    assert_string_equal(json_string_value(json_object_get(r, "step")), "driver");
    json_decref(r);
    assert_string_equal(answer_ok(f), "driver");
    gs_operator_sync(f->op);
    assert_string_equal(answer_ok(f), "toolkit");
    gs_operator_sync(f->op);
    r = request(f);
    assert_string_equal(json_string_value(json_object_get(r, "step")), "dra-plugin");
    json_decref(r);
}

/*--- Validator ---*/

static void dra_plugin_validator_reads_the_slices(void **state)
{
    (void)state;
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_disc disc;
    assert_int_equal(gs_disc_open_mock(&disc, "2xA100-40GB,mig=3g.20gb+2g.10gb,host=v", &clk), 0);
    struct gs_inventory inv;
    assert_int_equal(gs_disc_inventory(&disc, &inv), 0);
    struct gs_diags d = {0};
    json_t *slices = gs_resourceslices_build(&inv, "v", 1, false, &d);
    struct gs_validate_in in = {.disc = &disc, .slices = slices};
    char msg[256];
    assert_int_equal(gs_validate_step(GS_STEP_DRA_PLUGIN, &in, msg, sizeof msg), 0);
    assert_string_equal(msg, "1 ResourceSlice offer all 4 devices");
    /* a MIG device missing from the slice */
    json_array_remove(json_object_get(json_object_get(json_array_get(slices, 0), "spec"), "devices"), 1);
    assert_int_equal(gs_validate_dra_plugin(&in, msg, sizeof msg), GS_ESTATE);
    assert_non_null(strstr(msg, "is in no ResourceSlice"));
    json_t *none = json_array();
    in.slices = none;
    assert_int_equal(gs_validate_dra_plugin(&in, msg, sizeof msg), GS_ENOENT);
    assert_string_equal(msg, "the server holds no ResourceSlices of driver gpu.nvidia.com for this node");
    json_decref(none);
    json_decref(slices);
    gs_disc_close(&disc);
}

/*--- API: one model per cluster ---*/

static const char tokens[] = "adm,admin,,,admin\n";

static int api_setup(void **state)
{
    return api_env_start(state, "/tmp/gs-gpucluster-api-XXXXXX", tokens, false,
                         (struct gs_server_opts){.no_scheduler = true});
}

static void api_refuses_the_second_model(void **state)
{
    struct api_env *e = *state;
    const struct gs_api_resource *gcr = gs_api_resource_find("nvidia.com", "v1alpha1", "gpuclusters");
    const struct gs_api_resource *cpr = gs_api_resource_find("nvidia.com", "v1", "clusterpolicies");
    assert_non_null(gcr);
    assert_non_null(cpr);
    json_t *gc = J("{\"apiVersion\":\"nvidia.com/v1alpha1\",\"kind\":\"GPUCluster\",\"metadata\":{\"name\":\"gc\"},"
                   "\"spec\":{\"draDriver\":{\"enabled\":true}}}"), *out = NULL;
    assert_int_equal(gs_client_create(e->adm, gcr, NULL, gc, NULL), 0);
    json_t *cp = J("{\"apiVersion\":\"nvidia.com/v1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"cp\"},"
                   "\"spec\":{}}");
    assert_int_equal(gs_client_create(e->adm, cpr, NULL, cp, &out), GS_ECONFLICT);
    assert_non_null(strstr(json_string_value(json_object_get(out, "message")), "GPUCluster \"gc\" exists"));
    json_decref(out);
    /* once the GPUCluster is gone the ClusterPolicy may come, and then a GPUCluster is refused */
    assert_int_equal(gs_client_delete(e->adm, gcr, NULL, "gc", NULL), 0);
    assert_int_equal(gs_client_create(e->adm, cpr, NULL, cp, NULL), 0);
    json_object_set_new(json_object_get(gc, "metadata"), "name", json_string("gc2"));
    assert_int_equal(gs_client_create(e->adm, gcr, NULL, gc, &out), GS_ECONFLICT);
    assert_non_null(strstr(json_string_value(json_object_get(out, "message")), "ClusterPolicy \"cp\" exists"));
    json_decref(out);
    /* an invalid GPUCluster is 422 naming the field */
    assert_int_equal(gs_client_delete(e->adm, cpr, NULL, "cp", NULL), 0);
    json_t *bad = J("{\"apiVersion\":\"nvidia.com/v1alpha1\",\"kind\":\"GPUCluster\",\"metadata\":{\"name\":\"b\"},"
                    "\"spec\":{\"devicePlugin\":{}}}");
    assert_int_equal(gs_client_create(e->adm, gcr, NULL, bad, &out), GS_EINVAL);
    assert_non_null(strstr(json_string_value(json_object_get(out, "message")), "spec.devicePlugin: not managed"));
    json_decref(out);
    json_decref(bad);
    json_decref(gc);
    json_decref(cp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_defaults_and_refusals),
        cmocka_unit_test_setup_teardown(operator_walks_the_dra_stack, op_setup, op_teardown),
        cmocka_unit_test_setup_teardown(switching_model_redrives, op_setup, op_teardown),
        cmocka_unit_test(dra_plugin_validator_reads_the_slices),
        cmocka_unit_test_setup_teardown(api_refuses_the_second_model, api_setup, api_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
