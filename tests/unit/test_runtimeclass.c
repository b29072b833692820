/*
 * test_runtimeclass.c - the RuntimeClass kind (node.k8s.io/v1) over HTTP
 * against an in-process server: who may read and write it (cluster admins
 * write; tenants, nodes and the scheduler read), its validation messages
 * (handler required and a DNS label, overhead quantities, unknown fields
 * under fieldValidation=Strict), that an unknown handler value is stored as
 * Kubernetes stores it (the node decides), and that handler is immutable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "control/api.h"

#include <string.h>

static const char tokens[] = "adm,admin,,,admin\n"
                             "ten,alice,,team-a,tenant\n"
                             "nod,system:node:n1,,,node\n"
                             "sch,system:gpusched-scheduler,,,scheduler\n";

#define RC "/apis/node.k8s.io/v1/runtimeclasses"
#define MP "application/merge-patch+json"

#define BODY(name, rest) "{\"apiVersion\":\"node.k8s.io/v1\",\"kind\":\"RuntimeClass\",\"metadata\":{\"name\":\"" name \
                         "\"}" rest "}"

static void roles(void **state)
{
    struct api_env *e = *state;
    struct gs_client *sch = fx_client(e->srv, "sch");
    fx_expect(e->adm, "POST", RC, NULL, BODY("runc", ",\"handler\":\"runc\""), 201, NULL);
    /* everyone reads */
    struct gs_client *readers[] = {e->adm, e->ten, e->nod, sch};
    for (int i = 0; i < 4; i++) {
        json_t *out = NULL;
        assert_int_equal(fx_req(readers[i], "GET", RC "/runc", NULL, NULL, &out), 200);
        assert_string_equal(json_string_value(json_object_get(out, "handler")), "runc");
        json_decref(out);
        assert_int_equal(fx_req(readers[i], "GET", RC, NULL, NULL, &out), 200);
        assert_int_equal(json_array_size(json_object_get(out, "items")), 1);
        json_decref(out);
    }
    /* only admins write */
    struct gs_client *others[] = {e->ten, e->nod, sch};
    for (int i = 0; i < 3; i++) {
        fx_expect(others[i], "POST", RC, NULL, BODY("other", ",\"handler\":\"runc\""), 403, NULL);
        fx_expect(others[i], "PATCH", RC "/runc", MP, "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}", 403, NULL);
        fx_expect(others[i], "PUT", RC "/runc", NULL, BODY("runc", ",\"handler\":\"runc\""), 403, NULL);
        fx_expect(others[i], "DELETE", RC "/runc", NULL, NULL, 403, NULL);
    }
    struct gs_client *anon = fx_client(e->srv, NULL);
    fx_expect(anon, "GET", RC "/runc", NULL, NULL, 401, NULL);
    gs_client_free(anon);
    fx_expect(e->adm, "PATCH", RC "/runc", MP, "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}", 200, NULL);
    fx_expect(e->adm, "DELETE", RC "/runc", NULL, NULL, 200, NULL);
    fx_expect(e->ten, "GET", RC "/runc", NULL, NULL, 404, NULL);
    gs_client_free(sch);
}

static void validation(void **state)
{
    struct api_env *e = *state;
    fx_expect(e->adm, "POST", RC, NULL, BODY("none", ""), 422, "handler: Required value");
    fx_expect(e->adm, "POST", RC, NULL, BODY("bad", ",\"handler\":\"Run_C\""), 422, "handler: Invalid value: \"Run_C\"");
    fx_expect(e->adm, "POST", RC, NULL, BODY("num", ",\"handler\":7"), 422, "handler");
    fx_expect(e->adm, "POST", RC, NULL, BODY("ov", ",\"handler\":\"runc\",\"overhead\":{\"podFixed\":{\"memory\":\"1Gb\"}}"),
           422, "overhead.podFixed.memory: Invalid value: \"1Gb\"");
    fx_expect(e->adm, "POST", RC, NULL, BODY("neg", ",\"handler\":\"runc\",\"overhead\":{\"podFixed\":{\"cpu\":\"-1\"}}"),
           422, "overhead.podFixed.cpu");
    fx_expect(e->adm, "POST", RC, NULL, BODY("sel", ",\"handler\":\"runc\",\"scheduling\":{\"nodeSelector\":{\"a\":1}}"),
           422, "scheduling.nodeSelector.a");
    fx_expect(e->adm, "POST", RC "?fieldValidation=Strict", NULL, BODY("strict", ",\"handler\":\"runc\",\"spec\":{}"),
           400, "strict decoding error: unknown field \"spec\"");
    /* a handler no node may have is still a valid RuntimeClass, as in Kubernetes */
    fx_expect(e->adm, "POST", RC, NULL,
           BODY("kata", ",\"handler\":\"kata\",\"overhead\":{\"podFixed\":{\"cpu\":\"250m\",\"memory\":\"64Mi\"}},"
                "\"scheduling\":{\"nodeSelector\":{\"k\":\"v\"},\"tolerations\":[{\"key\":\"k\",\"operator\":"
                "\"Exists\"}]}"),
           201, NULL);
    /* handler is immutable; the rest may change */
    fx_expect(e->adm, "PATCH", RC "/kata", MP, "{\"handler\":\"runc\"}", 422, "handler: Invalid value: field is immutable");
    fx_expect(e->adm, "PATCH", RC "/kata", MP, "{\"overhead\":{\"podFixed\":{\"cpu\":\"1\"}}}", 200, NULL);
    json_t *out = NULL;
    assert_int_equal(fx_req(e->adm, "GET", RC "/kata", NULL, NULL, &out), 200);
    assert_string_equal(json_string_value(json_object_get(out, "handler")), "kata");
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(out, "overhead"), "podFixed"),
                                                          "cpu")), "1");
    json_decref(out);
}

/* kubectl get runtimeclasses: NAME, HANDLER, AGE. */
static void table_columns(void **state)
{
    (void)state;
    const struct gs_api_resource *res = gs_api_resource_find("node.k8s.io", "v1", "runtimeclasses");
    assert_non_null(res);
    assert_false(res->namespaced);
    json_t *objs = json_loads("[{\"metadata\":{\"name\":\"runc\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\"},"
                              "\"handler\":\"runc\"}]", 0, NULL);
    json_t *t = gs__table(res, objs, "7", 1767225600.0 + 120, GS_INCLUDE_NONE);
    json_t *cols = json_object_get(t, "columnDefinitions");
    assert_int_equal(json_array_size(cols), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(cols, 1), "name")), "Handler");
    json_t *cells = json_object_get(json_array_get(json_object_get(t, "rows"), 0), "cells");
    assert_string_equal(json_string_value(json_array_get(cells, 0)), "runc");
    assert_string_equal(json_string_value(json_array_get(cells, 1)), "runc");
    assert_string_equal(json_string_value(json_array_get(cells, 2)), "2m");
    json_decref(t);
    json_decref(objs);
}

static int setup(void **state)
{
    return api_env_start(state, "/tmp/gs-runtimeclass-XXXXXX", tokens, true,
                         (struct gs_server_opts){.no_scheduler = true});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(roles, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(validation, setup, api_env_teardown),
        cmocka_unit_test(table_columns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
