/*
 * test_dra_api.c - the resource.k8s.io kinds through a running server: one
 * stored v1 shape served at v1, v1beta2 and v1beta1 (v1beta1's `basic` device
 * wrapper and flat requests converted both ways, patches applied in the
 * version they name, watches converted), the ResourceSlice table, the claim
 * status subresource, a node writing only its own slices and reading only
 * the claims allocated on it, and the default
 * DeviceClasses created at start but never overwritten.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "control/resources.h"
#include "core/codec.h"

#include <string.h>

static const char tokens[] = "adm,admin,,,admin\n"
                             "nod,system:node:n1,,,node\n";

static json_t *J(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    return j;
}

static const struct gs_api_resource *R(const char *version, const char *plural)
{
    const struct gs_api_resource *r = gs_api_resource_find("resource.k8s.io", version, plural);
    assert_non_null(r);
    return r;
}

static const char *S(const json_t *o, const char *path)
{
    /* dotted path with [i] for arrays */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const json_t *cur = o;
    for (char *save = NULL, *t = strtok_r(buf, ".", &save); t && cur; t = strtok_r(NULL, ".", &save)) {
        char *br = strchr(t, '[');
        if (br) *br = 0;
        if (*t) cur = json_object_get(cur, t);
        for (; br; br = strchr(br + 1, '[')) cur = json_array_get(cur, (size_t)atoi(br + 1));
    }
    return json_is_string(cur) ? json_string_value(cur) : NULL;
}

static const json_t *at(const json_t *o, const char *a, const char *b, const char *c)
{
    const json_t *x = json_object_get(o, a);
    if (b) x = json_object_get(x, b);
    if (c) x = json_object_get(x, c);
    return x;
}

static int setup(void **state)
{
    return api_env_start(state, "/tmp/gs-dra-api-XXXXXX", tokens, false, (struct gs_server_opts){.no_scheduler = true});
}

#define SLICE_V1BETA1                                                                                              \
    "{\"apiVersion\":\"resource.k8s.io/v1beta1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":\"n1-gpu\"},"      \
    "\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"n1\",\"pool\":{\"name\":\"n1\",\"generation\":1,"      \
    "\"resourceSliceCount\":1},\"devices\":[{\"name\":\"gpu-0\",\"basic\":{\"attributes\":{\"type\":{\"string\":"    \
    "\"gpu\"}},\"capacity\":{\"memory\":{\"value\":\"80Gi\"}}}}]}}"

static void slices_are_stored_as_v1_and_served_in_each_version(void **state)
{
    struct api_env *e = *state;
    json_t *s = J(SLICE_V1BETA1), *out = NULL;
    assert_int_equal(gs_client_create(e->adm, R("v1beta1", "resourceslices"), NULL, s, &out), 0);
    /* the reply is in the version written */
    assert_string_equal(S(out, "apiVersion"), "resource.k8s.io/v1beta1");
    assert_string_equal(S(out, "spec.devices[0].basic.attributes.type.string"), "gpu");
    json_decref(out);
    assert_int_equal(gs_client_get(e->adm, R("v1", "resourceslices"), NULL, "n1-gpu", &out), 0);
    assert_string_equal(S(out, "apiVersion"), "resource.k8s.io/v1");
    assert_null(at(json_array_get(at(out, "spec", "devices", NULL), 0), "basic", NULL, NULL));
    assert_string_equal(S(out, "spec.devices[0].attributes.type.string"), "gpu");
    assert_string_equal(S(out, "spec.devices[0].capacity.memory.value"), "80Gi");
    json_decref(out);
    assert_int_equal(gs_client_get(e->adm, R("v1beta2", "resourceslices"), NULL, "n1-gpu", &out), 0);
    assert_string_equal(S(out, "apiVersion"), "resource.k8s.io/v1beta2");
    assert_string_equal(S(out, "spec.devices[0].attributes.type.string"), "gpu");
    json_decref(out);
    /* a merge patch through v1beta1 names v1beta1's fields */
    json_t *p = J("{\"spec\":{\"devices\":[{\"name\":\"gpu-0\",\"basic\":{\"attributes\":{\"type\":{\"string\":\"mig\"}}}}]}}");
    assert_int_equal(gs_client_patch(e->adm, R("v1beta1", "resourceslices"), NULL, "n1-gpu", NULL, false, p, &out), 0);
    json_decref(out);
    json_decref(p);
    assert_int_equal(gs_client_list(e->adm, R("v1", "resourceslices"), NULL, NULL, NULL, false, &out), 0);
    assert_string_equal(S(out, "items[0].spec.devices[0].attributes.type.string"), "mig");
    assert_null(S(out, "items[0].spec.devices[0].capacity.memory.value")); /* the patch replaced the list */
    json_decref(out);
    assert_int_equal(gs_client_list(e->adm, R("v1beta1", "resourceslices"), NULL, NULL, NULL, false, &out), 0);
    assert_string_equal(S(out, "apiVersion"), "resource.k8s.io/v1beta1");
    assert_string_equal(S(out, "items[0].apiVersion"), "resource.k8s.io/v1beta1");
    assert_string_equal(S(out, "items[0].spec.devices[0].basic.attributes.type.string"), "mig");
    json_decref(out);
    /* kubectl's printer columns */
    assert_int_equal(gs_client_list(e->adm, R("v1", "resourceslices"), NULL, NULL, NULL, true, &out), 0);
    assert_string_equal(S(out, "columnDefinitions[1].name"), "Node");
    assert_string_equal(S(out, "columnDefinitions[2].name"), "Driver");
    assert_string_equal(S(out, "columnDefinitions[3].name"), "Pool");
    assert_string_equal(S(out, "rows[0].cells[0]"), "n1-gpu");
    assert_string_equal(S(out, "rows[0].cells[1]"), "n1");
    assert_string_equal(S(out, "rows[0].cells[2]"), "gpu.nvidia.com");
    json_decref(out);
    json_decref(s);
}

static int on_event(const char *type, json_t *obj, void *arg)
{
    json_t **seen = arg;
    if (strcmp(type, "ADDED")) return 0;
    *seen = json_incref(obj);
    return 1;
}

static void claims_convert_requests_and_keep_status(void **state)
{
    struct api_env *e = *state;
    json_t *c = J("{\"apiVersion\":\"resource.k8s.io/v1beta1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"c\"},"
                  "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"deviceClassName\":\"gpu.nvidia.com\","
                  "\"count\":2},{\"name\":\"any\",\"firstAvailable\":[{\"name\":\"big\",\"deviceClassName\":"
                  "\"gpu.nvidia.com\"}]}]}}}"), *out = NULL;
    assert_int_equal(gs_client_create(e->adm, R("v1beta1", "resourceclaims"), "default", c, &out), 0);
    json_decref(out);
    assert_int_equal(gs_client_get(e->adm, R("v1", "resourceclaims"), "default", "c", &out), 0);
    assert_string_equal(S(out, "spec.devices.requests[0].exactly.deviceClassName"), "gpu.nvidia.com");
    assert_int_equal(json_integer_value(at(json_object_get(json_array_get(at(out, "spec", "devices", "requests"), 0),
                                                           "exactly"), "count", NULL, NULL)), 2);
    assert_null(S(out, "spec.devices.requests[0].deviceClassName"));
    assert_string_equal(S(out, "spec.devices.requests[1].firstAvailable[0].name"), "big");
    assert_null(at(json_array_get(at(out, "spec", "devices", "requests"), 1), "exactly", NULL, NULL));
    json_decref(out);
    /* the allocation goes through status; the main resource keeps it */
    json_t *st = J("{\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":"
                   "\"gpu.nvidia.com\",\"pool\":\"n1\",\"device\":\"gpu-0\"}]},\"nodeSelector\":{\"nodeSelectorTerms\":"
                   "[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"n1\"]}]}]}}}}");
    assert_int_equal(gs_client_patch(e->adm, R("v1", "resourceclaims"), "default", "c", "status", false, st, &out), 0);
    json_decref(out);
    json_t *wipe = J("{\"status\":null,\"metadata\":{\"labels\":{\"x\":\"1\"}}}");
    assert_int_equal(gs_client_patch(e->adm, R("v1", "resourceclaims"), "default", "c", NULL, false, wipe, &out), 0);
    assert_string_equal(S(out, "status.allocation.devices.results[0].device"), "gpu-0");
    json_decref(out);
    /* a watch through v1beta1 streams v1beta1 */
    json_t *seen = NULL;
    assert_int_equal(gs_client_watch(e->adm, R("v1beta1", "resourceclaims"), "default", NULL, NULL, "0", 5, on_event,
                                     &seen), 1);
    assert_non_null(seen);
    assert_string_equal(S(seen, "apiVersion"), "resource.k8s.io/v1beta1");
    assert_string_equal(S(seen, "spec.devices.requests[0].deviceClassName"), "gpu.nvidia.com");
    assert_string_equal(S(seen, "status.allocation.devices.results[0].pool"), "n1");
    json_decref(seen);
    /* the claim table says allocated */
    assert_int_equal(gs_client_list(e->adm, R("v1", "resourceclaims"), "default", NULL, NULL, true, &out), 0);
    assert_string_equal(S(out, "rows[0].cells[1]"), "allocated");
    json_decref(out);
    /* a bad v1beta1 body is refused with v1's field path */
    json_t *bad = J("{\"apiVersion\":\"resource.k8s.io/v1beta1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":"
                    "\"b\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"deviceClassName\":\"x\","
                    "\"count\":0}]}}}");
    assert_int_equal(gs_client_create(e->adm, R("v1beta1", "resourceclaims"), "default", bad, &out), GS_EINVAL);
    assert_non_null(strstr(S(out, "message"), "spec.devices.requests[0].exactly.count: invalid value 0"));
    json_decref(out);
    json_decref(bad);
    json_decref(wipe);
    json_decref(st);
    json_decref(c);
}

static void a_node_writes_only_its_own_slices(void **state)
{
    struct api_env *e = *state;
    const char *fmt = "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":\"%s\"},"
                      "\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"%s\",\"pool\":{\"name\":\"%s\","
                      "\"generation\":1,\"resourceSliceCount\":1},\"devices\":[{\"name\":\"gpu-0\"}]}}";
    char b[1024];
    snprintf(b, sizeof b, fmt, "n1-gpu.nvidia.com-0", "n1", "n1");
    json_t *mine = J(b), *out = NULL;
    snprintf(b, sizeof b, fmt, "n2-gpu.nvidia.com-0", "n2", "n2");
    json_t *other = J(b);
    assert_int_equal(gs_client_create(e->nod, R("v1", "resourceslices"), NULL, mine, &out), 0);
    json_decref(out);
    assert_int_equal(gs_client_create(e->nod, R("v1", "resourceslices"), NULL, other, &out), GS_EPERM);
    assert_non_null(strstr(S(out, "message"), "spec.nodeName is its node \"n1\""));
    json_decref(out);
    assert_int_equal(gs_client_create(e->adm, R("v1", "resourceslices"), NULL, other, NULL), 0);
    /* moving its slice to another node is refused; another node's slice cannot be touched */
    json_t *move = J("{\"spec\":{\"nodeName\":\"n2\"}}");
    assert_int_equal(gs_client_patch(e->nod, R("v1", "resourceslices"), NULL, "n1-gpu.nvidia.com-0", NULL, false, move,
                                     &out), GS_EINVAL);
    assert_non_null(strstr(S(out, "message"), "spec.nodeName: Forbidden"));
    json_decref(out);
    assert_int_equal(gs_client_delete(e->nod, R("v1", "resourceslices"), NULL, "n2-gpu.nvidia.com-0", &out), GS_EPERM);
    json_decref(out);
    assert_int_equal(gs_client_delete(e->nod, R("v1", "resourceslices"), NULL, "n1-gpu.nvidia.com-0", &out), 0);
    json_decref(out);
    /* claims: only those allocated on the node are read */
    json_t *c = J("{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"c\"},"
                  "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"x\"}}]}}}");
    assert_int_equal(gs_client_create(e->adm, R("v1", "resourceclaims"), "default", c, NULL), 0);
    assert_int_equal(gs_client_get(e->nod, R("v1", "resourceclaims"), "default", "c", &out), GS_EPERM);
    json_decref(out);
    assert_int_equal(gs_client_list(e->nod, R("v1", "resourceclaims"), NULL, NULL, NULL, false, &out), 0);
    assert_int_equal(json_array_size(json_object_get(out, "items")), 0);
    json_decref(out);
    json_t *st = J("{\"status\":{\"allocation\":{\"devices\":{\"results\":[]},\"nodeSelector\":{\"nodeSelectorTerms\":"
                   "[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"n1\"]}]}]}}}}");
    assert_int_equal(gs_client_patch(e->adm, R("v1", "resourceclaims"), "default", "c", "status", false, st, NULL), 0);
    assert_int_equal(gs_client_get(e->nod, R("v1beta1", "resourceclaims"), "default", "c", &out), 0);
    json_decref(out);
    assert_int_equal(gs_client_list(e->nod, R("v1", "resourceclaims"), NULL, NULL, NULL, false, &out), 0);
    assert_int_equal(json_array_size(json_object_get(out, "items")), 1);
    json_decref(out);
    json_decref(st);
    json_decref(c);
    /* reading every slice is fine */
    assert_int_equal(gs_client_list(e->nod, R("v1", "resourceslices"), NULL, NULL, NULL, false, &out), 0);
    assert_int_equal(json_array_size(json_object_get(out, "items")), 1);
    json_decref(out);
    json_decref(move);
    json_decref(mine);
    json_decref(other);
}

static void default_classes_are_created_once_and_kept(void **state)
{
    struct api_env *e = *state;
    json_t *out = NULL;
    assert_int_equal(gs_client_get(e->adm, R("v1", "deviceclasses"), NULL, "gpu.nvidia.com", &out), 0);
    assert_string_equal(S(out, "spec.selectors[0].cel.expression"),
                        "device.driver == \"gpu.nvidia.com\" && device.attributes[\"gpu.nvidia.com\"].type == \"gpu\"");
    assert_null(at(out, "spec", "extendedResourceName", NULL));
    json_decref(out);
    assert_int_equal(gs_client_get(e->adm, R("v1", "deviceclasses"), NULL, "mig.nvidia.com", &out), 0);
    assert_non_null(strstr(S(out, "spec.selectors[0].cel.expression"), ".type == \"mig\""));
    json_decref(out);
    /* an administrator's change survives a restart; a deleted class comes back */
    json_t *p = J("{\"spec\":{\"extendedResourceName\":\"nvidia.com/gpu\"}}");
    assert_int_equal(gs_client_patch(e->adm, R("v1", "deviceclasses"), NULL, "gpu.nvidia.com", NULL, false, p, NULL), 0);
    json_decref(p);
    assert_int_equal(gs_client_delete(e->adm, R("v1", "deviceclasses"), NULL, "mig.nvidia.com", NULL), 0);
    gs_client_free(e->adm);
    gs_client_free(e->nod);
    gs_server_stop(e->srv);
    char tok[128];
    snprintf(tok, sizeof tok, "%s/tokens.csv", e->dir);
    struct gs_server_opts o = {.no_scheduler = true, .data_dir = e->dir, .listen = "127.0.0.1:0", .insecure = true,
                               .tokens_file = tok, .qps = -1, .fail_qps = -1};
    struct gs_diags d = {0};
    assert_int_equal(gs_server_start(&o, &e->srv, &d), 0);
    e->adm = fx_client(e->srv, "adm");
    e->nod = fx_client(e->srv, "nod");
    assert_int_equal(gs_client_get(e->adm, R("v1", "deviceclasses"), NULL, "gpu.nvidia.com", &out), 0);
    assert_string_equal(S(out, "spec.extendedResourceName"), "nvidia.com/gpu");
    json_decref(out);
    assert_int_equal(gs_client_get(e->adm, R("v1beta1", "deviceclasses"), NULL, "mig.nvidia.com", &out), 0);
    assert_string_equal(S(out, "apiVersion"), "resource.k8s.io/v1beta1");
    json_decref(out);
}

static void templates_and_taint_rules_are_served(void **state)
{
    struct api_env *e = *state;
    json_t *t = J("{\"apiVersion\":\"resource.k8s.io/v1beta1\",\"kind\":\"ResourceClaimTemplate\",\"metadata\":"
                  "{\"name\":\"t\"},\"spec\":{\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\","
                  "\"deviceClassName\":\"gpu.nvidia.com\"}]}}}}"), *out = NULL;
    assert_int_equal(gs_client_create(e->adm, R("v1beta1", "resourceclaimtemplates"), "default", t, NULL), 0);
    assert_int_equal(gs_client_get(e->adm, R("v1", "resourceclaimtemplates"), "default", "t", &out), 0);
    assert_string_equal(S(out, "spec.spec.devices.requests[0].exactly.deviceClassName"), "gpu.nvidia.com");
    json_decref(out);
    json_t *r = J("{\"apiVersion\":\"resource.k8s.io/v1alpha3\",\"kind\":\"DeviceTaintRule\",\"metadata\":{\"name\":"
                  "\"maint\"},\"spec\":{\"deviceSelector\":{\"driver\":\"gpu.nvidia.com\",\"pool\":\"n1\"},\"taint\":"
                  "{\"key\":\"example.com/maintenance\",\"effect\":\"NoExecute\"}}}");
    const struct gs_api_resource *a3 = gs_api_resource_find("resource.k8s.io", "v1alpha3", "devicetaintrules");
    assert_non_null(a3);
    assert_int_equal(gs_client_create(e->adm, a3, NULL, r, NULL), 0);
    assert_int_equal(gs_client_get(e->adm, R("v1", "devicetaintrules"), NULL, "maint", &out), 0);
    assert_string_equal(S(out, "apiVersion"), "resource.k8s.io/v1");
    assert_string_equal(S(out, "spec.taint.effect"), "NoExecute");
    json_decref(out);
    json_decref(r);
    json_decref(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(slices_are_stored_as_v1_and_served_in_each_version, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(claims_convert_requests_and_keep_status, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(a_node_writes_only_its_own_slices, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(default_classes_are_created_once_and_kept, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(templates_and_taint_rules_are_served, setup, api_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
