/*
 * test_auth_fields.c - who may write which field (api_fields.c), priority
 * from PriorityClasses, namespaces (namespaces.c) and node identity, over
 * HTTP against an in-process server, with the error texts clients see:
 * Kubernetes' own where Kubernetes has one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_fixture.h"

#include <string.h>
#include <unistd.h>

static const char tokens[] = "adm,admin,,,admin\n"
                             "ten,alice,,team-a,tenant\n"
                             "nod,system:node:n1,,,node\n";

static const char *MP = "application/merge-patch+json", *SP = "application/strategic-merge-patch+json";

static const char *spec_str(json_t *obj, const char *k)
{
    return json_string_value(json_object_get(json_object_get(obj, "spec"), k));
}

#define PODS "/api/v1/namespaces/team-a/pods"
#define POD(extra_meta, extra_spec)                                                                                    \
    "{\"metadata\":{\"name\":\"p\"" extra_meta "},\"spec\":{" extra_spec "\"containers\":[{\"name\":\"c\","         \
    "\"image\":\"i\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}"

static void ns(struct api_env *e, const char *name)
{
    char body[128];
    snprintf(body, sizeof body, "{\"metadata\":{\"name\":\"%s\"}}", name);
    assert_int_equal(fx_req(e->adm, "POST", "/api/v1/namespaces", NULL, body, NULL), 201);
}

static void pod_fields_at_create(void **state)
{
    struct api_env *e = *state;
    ns(e, "team-a");
    fx_expect(e->ten, "POST", PODS, NULL, POD("", "\"nodeName\":\"n1\","), 403,
           "pods \"p\" is forbidden: field spec.nodeName (\"n1\") is set only by the scheduler through pods/binding");
    fx_expect(e->ten, "POST", PODS, NULL, POD(",\"annotations\":{\"gpusched.io/devices\":\"GPU-1\"}", ""), 403,
           "field metadata.annotations[gpusched.io/devices] is set only by the scheduler");
    /* A status sent with the pod is dropped. */
    json_t *out = NULL;
    assert_int_equal(fx_req(e->ten, "POST", PODS, NULL,
                         "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]},\"status\":"
                         "{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}", &out),
                     201);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "status"), "phase")), "Pending");
    assert_null(json_object_get(json_object_get(out, "status"), "conditions"));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(out, "spec"), "priority")), 0);
    assert_string_equal(spec_str(out, "preemptionPolicy"), "PreemptLowerPriority");
    json_decref(out);
    /* Admins may place a pod themselves, as in Kubernetes. */
    assert_int_equal(fx_req(e->adm, "POST", PODS, NULL,
                         "{\"metadata\":{\"name\":\"q\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\"}]}}",
                         NULL), 201);
    /* Binding and status: not the tenant's. */
    fx_expect(e->ten, "POST", PODS "/p/binding", NULL, "{\"target\":{\"name\":\"n1\"}}", 403,
           "only the scheduler binds pods");
    fx_expect(e->ten, "PATCH", PODS "/q/status", MP, "{\"status\":{\"phase\":\"Succeeded\"}}", 403,
           "a pod's status is written only by its node and the scheduler");
    assert_int_equal(fx_req(e->nod, "PATCH", PODS "/q/status", MP, "{\"status\":{\"phase\":\"Running\"}}", NULL), 200);
}

static void pod_spec_is_immutable(void **state)
{
    struct api_env *e = *state;
    ns(e, "team-a");
    assert_int_equal(fx_req(e->ten, "POST", PODS, NULL,
                         POD(",\"labels\":{\"kueue.x-k8s.io/queue-name\":\"lq\"}",
                             "\"tolerations\":[{\"key\":\"a\",\"operator\":\"Exists\"}],"), NULL), 201);
    json_t *out = NULL;
    assert_int_equal(fx_req(e->ten, "PATCH", PODS "/p", SP,
                         "{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"8\"}}}]}}",
                         &out), 422);
    assert_string_equal(json_string_value(json_object_get(out, "message")),
                        "Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than "
                        "`spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, "
                        "`spec.tolerations` (only additions to existing tolerations), "
                        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)");
    json_t *cause = json_array_get(json_object_get(json_object_get(out, "details"), "causes"), 0);
    assert_string_equal(json_string_value(json_object_get(cause, "field")), "spec");
    json_decref(out);
    /* What Kubernetes lets change. */
    assert_int_equal(fx_req(e->ten, "PATCH", PODS "/p", SP, "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"j\"}]}}",
                         NULL), 200);
    assert_int_equal(fx_req(e->ten, "PATCH", PODS "/p", MP, "{\"spec\":{\"activeDeadlineSeconds\":30}}", NULL), 200);
    assert_int_equal(fx_req(e->ten, "PATCH", PODS "/p", MP,
                         "{\"spec\":{\"tolerations\":[{\"key\":\"a\",\"operator\":\"Exists\"},{\"key\":\"b\","
                         "\"operator\":\"Exists\"}]}}", NULL), 200);
    fx_expect(e->ten, "PATCH", PODS "/p", MP, "{\"spec\":{\"tolerations\":[]}}", 422, "spec: Forbidden");
    fx_expect(e->ten, "PATCH", PODS "/p", MP, "{\"spec\":{\"priority\":1000}}", 422, "spec: Forbidden");
    fx_expect(e->adm, "PATCH", PODS "/p", MP, "{\"spec\":{\"nodeSelector\":{\"a\":\"b\"}}}", 422, "spec: Forbidden");
    /* The devices annotation and the queue label never change, for anyone. */
    fx_expect(e->adm, "PATCH", PODS "/p", MP, "{\"metadata\":{\"annotations\":{\"gpusched.io/devices\":\"GPU-1\"}}}", 422,
           "metadata.annotations[gpusched.io/devices]: Forbidden: set only by the scheduler through pods/binding");
    fx_expect(e->ten, "PATCH", PODS "/p", MP, "{\"metadata\":{\"labels\":{\"kueue.x-k8s.io/queue-name\":null}}}", 422,
           "metadata.labels[kueue.x-k8s.io/queue-name]: Forbidden: field is immutable");
    /* A PUT of what GET gave, without the resolved priority fields, keeps them. */
    assert_int_equal(fx_req(e->ten, "GET", PODS "/p", NULL, NULL, &out), 200);
    json_t *spec = json_object_get(out, "spec");
    json_object_del(spec, "priority");
    json_object_del(spec, "preemptionPolicy");
    json_object_set_new(json_object_get(out, "metadata"), "labels",
                        json_pack("{s:s,s:s}", "kueue.x-k8s.io/queue-name", "lq", "x", "y"));
    char *text = json_dumps(out, 0);
    json_decref(out);
    assert_int_equal(fx_req(e->ten, "PUT", PODS "/p", NULL, text, &out), 200);
    free(text);
    assert_string_equal(spec_str(out, "preemptionPolicy"), "PreemptLowerPriority");
    json_decref(out);
}

#define PCS "/apis/scheduling.k8s.io/v1/priorityclasses"

static void priority_comes_from_the_class(void **state)
{
    struct api_env *e = *state;
    ns(e, "team-a");
    json_t *out = NULL;
    assert_int_equal(fx_req(e->ten, "GET", PCS "/system-node-critical", NULL, NULL, &out), 200);
    assert_int_equal(json_integer_value(json_object_get(out, "value")), 2000001000);
    json_decref(out);
    fx_expect(e->ten, "POST", PCS, NULL, "{\"metadata\":{\"name\":\"mine\"},\"value\":5}", 403,
           "tenants may only read cluster-scoped resources");
    fx_expect(e->adm, "POST", PCS, NULL, "{\"metadata\":{\"name\":\"system-mine\"},\"value\":5}", 403,
           "priority class names with 'system-' prefix are reserved for system use");
    fx_expect(e->adm, "POST", PCS, NULL, "{\"metadata\":{\"name\":\"huge\"},\"value\":1000000001}", 422, "value");
    fx_expect(e->adm, "POST", PCS, NULL, "{\"metadata\":{\"name\":\"nov\"}}", 422, "value: is required");
    fx_expect(e->adm, "POST", PCS, NULL, "{\"metadata\":{\"name\":\"odd\"},\"value\":1,\"preemptionPolicy\":\"Maybe\"}", 422,
           "preemptionPolicy: Unsupported value: \"Maybe\": supported values: \"Never\", \"PreemptLowerPriority\"");
    assert_int_equal(fx_req(e->adm, "POST", PCS, NULL,
                         "{\"metadata\":{\"name\":\"high\"},\"value\":100,\"preemptionPolicy\":\"Never\"}", NULL), 201);
    fx_expect(e->adm, "PATCH", PCS "/high", MP, "{\"value\":101}", 422, "value: Forbidden: may not be changed in an update.");

    fx_expect(e->ten, "POST", PODS, NULL, POD("", "\"priorityClassName\":\"nope\","), 403,
           "pods \"p\" is forbidden: no PriorityClass with name nope was found");
    fx_expect(e->ten, "POST", PODS, NULL, POD("", "\"priority\":2147483647,"), 403,
           "the integer value of priority (2147483647) must not be provided in pod spec; priority admission "
           "controller computed 0 from the given PriorityClass name");
    fx_expect(e->ten, "POST", PODS, NULL, POD("", "\"priorityClassName\":\"high\",\"preemptionPolicy\":\"PreemptLowerPriority\","),
           403, "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec");
    fx_expect(e->ten, "POST", PODS, NULL, POD("", "\"priorityClassName\":\"system-node-critical\","), 403,
           "pods with system-node-critical priorityClass is not permitted in team-a namespace");
    assert_int_equal(fx_req(e->ten, "POST", PODS, NULL, POD("", "\"priorityClassName\":\"high\",\"priority\":100,"), &out),
                     201);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(out, "spec"), "priority")), 100);
    assert_string_equal(spec_str(out, "preemptionPolicy"), "Never");
    json_decref(out);
    /* A global default applies to pods without a class, and there is only one. */
    assert_int_equal(fx_req(e->adm, "POST", PCS, NULL, "{\"metadata\":{\"name\":\"base\"},\"value\":7,\"globalDefault\":true}",
                         NULL), 201);
    fx_expect(e->adm, "POST", PCS, NULL, "{\"metadata\":{\"name\":\"base2\"},\"value\":8,\"globalDefault\":true}", 422,
           "globalDefault: Forbidden: PriorityClass base is already marked as default. Only one default can exist");
    assert_int_equal(fx_req(e->ten, "POST", PODS, NULL,
                         "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}", &out), 201);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(out, "spec"), "priority")), 7);
    assert_string_equal(spec_str(out, "priorityClassName"), "base");
    json_decref(out);
}

static void namespaces_exist_and_terminate(void **state)
{
    struct api_env *e = *state;
    const char *builtin[] = {"default", "kube-system", "kube-public", "kube-node-lease"};
    for (int i = 0; i < 4; i++) {
        char path[128];
        snprintf(path, sizeof path, "/api/v1/namespaces/%s", builtin[i]);
        assert_int_equal(fx_req(e->ten, "GET", path, NULL, NULL, NULL), 200);
        fx_expect(e->adm, "DELETE", path, NULL, NULL, 403, "this namespace may not be deleted");
    }
    json_t *out = NULL;
    fx_expect(e->adm, "POST", "/api/v1/namespaces/nope/pods", NULL, POD("", ""), 404, "namespaces \"nope\" not found");
    assert_int_equal(fx_req(e->adm, "POST", "/api/v1/namespaces/nope/pods", NULL, POD("", ""), &out), 404);
    assert_string_equal(json_string_value(json_object_get(out, "reason")), "NotFound");
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "details"), "kind")), "namespaces");
    json_decref(out);
    ns(e, "x");
    assert_int_equal(fx_req(e->adm, "POST", "/api/v1/namespaces/x/pods", NULL, POD("", ""), NULL), 201);
    assert_int_equal(fx_req(e->adm, "POST", "/api/v1/namespaces/x/pods", NULL,
                         "{\"metadata\":{\"name\":\"run\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\"}]}}",
                         NULL), 201);
    assert_int_equal(fx_req(e->adm, "POST", "/apis/kueue.x-k8s.io/v1beta1/namespaces/x/localqueues", NULL,
                         "{\"metadata\":{\"name\":\"lq\"},\"spec\":{\"clusterQueue\":\"cq\"}}", NULL), 201);
    assert_int_equal(fx_req(e->adm, "POST", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/x/podgroups", NULL,
                         "{\"metadata\":{\"name\":\"g\"},\"spec\":{\"minMember\":2}}", NULL), 201);
    assert_int_equal(fx_req(e->adm, "DELETE", "/api/v1/namespaces/x", NULL, NULL, &out), 200);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "status"), "phase")), "Terminating");
    assert_non_null(json_object_get(json_object_get(out, "metadata"), "deletionTimestamp"));
    json_decref(out);
    fx_expect(e->adm, "POST", "/api/v1/namespaces/x/pods", NULL, POD("", ""), 403,
           "unable to create new content in namespace x because it is being terminated");
    /* The unbound pod goes at once; the running one waits for its node, and so does the rest. */
    long code = 0;
    for (int i = 0; i < 100 && (code = fx_req(e->adm, "GET", "/api/v1/namespaces/x/pods/p", NULL, NULL, NULL)) != 404; i++)
        usleep(20000);
    assert_int_equal(code, 404);
    assert_int_equal(fx_req(e->adm, "GET", "/api/v1/namespaces/x/pods/run", NULL, NULL, &out), 200);
    assert_non_null(json_object_get(json_object_get(out, "metadata"), "deletionTimestamp"));
    json_decref(out);
    assert_int_equal(fx_req(e->adm, "GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/x/localqueues/lq", NULL, NULL, NULL), 200);
    /* The node confirms, as its agent does; then everything goes, the namespace last. */
    assert_int_equal(fx_req(e->nod, "DELETE", "/api/v1/namespaces/x/pods/run?gracePeriodSeconds=0", NULL, NULL, NULL), 200);
    for (int i = 0; i < 100 && (code = fx_req(e->adm, "GET", "/api/v1/namespaces/x", NULL, NULL, NULL)) != 404; i++)
        usleep(20000);
    assert_int_equal(code, 404);
    assert_int_equal(fx_req(e->adm, "GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/x/localqueues/lq", NULL, NULL, NULL), 404);
    assert_int_equal(fx_req(e->adm, "GET", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/x/podgroups/g", NULL, NULL, NULL),
                     404);
}

static void node_writes_only_its_own(void **state)
{
    struct api_env *e = *state;
    ns(e, "team-a");
    assert_int_equal(fx_req(e->nod, "POST", "/api/v1/nodes", NULL, "{\"metadata\":{\"name\":\"n1\"}}", NULL), 201);
    fx_expect(e->nod, "POST", "/api/v1/nodes", NULL, "{\"metadata\":{\"name\":\"n2\"}}", 403,
           "may only create the one named after its node \"n1\"");
    assert_int_equal(fx_req(e->adm, "POST", "/api/v1/nodes", NULL, "{\"metadata\":{\"name\":\"n2\"}}", NULL), 201);
    assert_int_equal(fx_req(e->nod, "PATCH", "/api/v1/nodes/n1", MP,
                         "{\"metadata\":{\"annotations\":{\"gpusched.io/agent-endpoint\":\"http://127.0.0.1:1\"}}}", NULL), 200);
    fx_expect(e->nod, "PATCH", "/api/v1/nodes/n2", MP,
           "{\"metadata\":{\"annotations\":{\"gpusched.io/agent-endpoint\":\"127.0.0.1:1\"}}}", 403,
           "a node may only write its own Node object");
    fx_expect(e->nod, "DELETE", "/api/v1/nodes/n1", NULL, NULL, 403, "nodes may not delete this resource");
    const char *lease = "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"holderIdentity\":\"%s\"}}";
    char b[256];
    snprintf(b, sizeof b, lease, "n1", "n1");
    assert_int_equal(fx_req(e->nod, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", NULL, b, NULL),
                     201);
    snprintf(b, sizeof b, lease, "n2", "n2");
    fx_expect(e->nod, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", NULL, b, 403,
           "named after its node");
    /* Events: about itself and its pods only. */
    assert_int_equal(fx_req(e->adm, "POST", PODS, NULL,
                         "{\"metadata\":{\"name\":\"mine\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\"}]}}",
                         NULL), 201);
    assert_int_equal(fx_req(e->adm, "POST", PODS, NULL,
                         "{\"metadata\":{\"name\":\"theirs\"},\"spec\":{\"nodeName\":\"n2\",\"containers\":[{\"name\":\"c\"}]}}",
                         NULL), 201);
    const char *ev = "{\"metadata\":{\"name\":\"e%d\"},\"involvedObject\":{\"kind\":\"%s\",\"name\":\"%s\"},\"reason\":\"R\"}";
    snprintf(b, sizeof b, ev, 1, "Node", "n1");
    assert_int_equal(fx_req(e->nod, "POST", "/api/v1/namespaces/team-a/events", NULL, b, NULL), 201);
    snprintf(b, sizeof b, ev, 2, "Pod", "mine");
    assert_int_equal(fx_req(e->nod, "POST", "/api/v1/namespaces/team-a/events", NULL, b, NULL), 201);
    snprintf(b, sizeof b, ev, 3, "Pod", "theirs");
    fx_expect(e->nod, "POST", "/api/v1/namespaces/team-a/events", NULL, b, 403,
           "may only create events about node \"n1\" and the pods bound to it");
    snprintf(b, sizeof b, ev, 4, "Node", "n2");
    fx_expect(e->nod, "POST", "/api/v1/namespaces/team-a/events", NULL, b, 403, "events about node \"n1\"");
    /* The status of its pods, not of others'. */
    assert_int_equal(fx_req(e->nod, "PATCH", PODS "/mine/status", MP, "{\"status\":{\"phase\":\"Running\"}}", NULL), 200);
    fx_expect(e->nod, "PATCH", PODS "/theirs/status", MP, "{\"status\":{\"phase\":\"Running\"}}", 403,
           "may only reach pods bound to its node");
    fx_expect(e->nod, "POST", PODS, NULL, POD("", ""), 403, "nodes may not create pods");
}

static int setup(void **state)
{
    return api_env_start(state, "/tmp/gs-authfields-XXXXXX", tokens, true, (struct gs_server_opts){.no_scheduler = true});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(pod_fields_at_create, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(pod_spec_is_immutable, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(priority_comes_from_the_class, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(namespaces_exist_and_terminate, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(node_writes_only_its_own, setup, api_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
