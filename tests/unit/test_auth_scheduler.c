/*
 * test_auth_scheduler.c - the tenant-free scheduler identity against a
 * running server: its token does what a standalone scheduler does (list and
 * watch pods and nodes, bind, write pod status, delete a victim, write
 * Events in both groups, hold its Lease in kube-system) and is refused the
 * rest with a 403 that says why (create a pod, patch a node, a Lease
 * elsewhere, pod logs, ClusterPolicies, anything not served). A Binding's
 * metadata.uid is a precondition as in kube-apiserver (409 naming both
 * uids). `gpusched server` on a fresh data directory writes
 * scheduler.kubeconfig with a scheduler token, once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "control/auth.h"
#include "core/codec.h"

#include <string.h>
#include <sys/stat.h>

static const char tokens[] = "adm,admin,,,admin\n"
                             "nod,system:node:n1,,,node\n"
                             "sch,system:gpusched-scheduler,,,scheduler\n";

static const char *MP = "application/merge-patch+json";

#define PODS "/api/v1/namespaces/default/pods"
#define POD                                                                                                    \
    "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"schedulerName\":\"gpusched\",\"containers\":[{\"name\":\"c\","     \
    "\"image\":\"i\"}]}}"

static char *uid_of(struct gs_client *c, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, PODS "/%s", name);
    json_t *out = NULL;
    assert_int_equal(fx_req(c, "GET", path, NULL, NULL, &out), 200);
    char *u = strdup(json_string_value(json_object_get(json_object_get(out, "metadata"), "uid")));
    json_decref(out);
    return u;
}

static void scheduler_does_its_work(void **state)
{
    struct api_env *e = *state;
    struct gs_client *sch = fx_client(e->srv, "sch");
    char body[1024];
    snprintf(body, sizeof body, POD, "web");
    fx_expect(e->adm, "POST", PODS, NULL, body, 201, NULL);
    snprintf(body, sizeof body, POD, "victim");
    fx_expect(e->adm, "POST", PODS, NULL, body, 201, NULL);
    fx_expect(e->adm, "POST", "/api/v1/nodes", NULL, "{\"metadata\":{\"name\":\"n1\"}}", 201, NULL);

    fx_expect(sch, "GET", "/api/v1/pods", NULL, NULL, 200, NULL);
    fx_expect(sch, "GET", "/api/v1/nodes", NULL, NULL, 200, NULL);
    fx_expect(sch, "GET", "/api/v1/namespaces", NULL, NULL, 200, NULL);
    fx_expect(sch, "GET", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups", NULL, NULL, 200, NULL);
    fx_expect(sch, "GET", "/apis/policy/v1/poddisruptionbudgets", NULL, NULL, 200, NULL);
    fx_expect(sch, "GET", "/apis/scheduling.k8s.io/v1/priorityclasses", NULL, NULL, 200, NULL);
    /* The status: PodScheduled=False with the diagnosis, a nominated node. */
    fx_expect(sch, "PATCH", PODS "/web/status", MP,
           "{\"status\":{\"nominatedNodeName\":\"n1\",\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"False\","
           "\"reason\":\"Unschedulable\",\"message\":\"0/1 nodes are available\"}]}}", 200, NULL);
    /* A binding with the pod's uid as precondition. */
    char *uid = uid_of(e->adm, "web");
    snprintf(body, sizeof body, "{\"metadata\":{\"name\":\"web\",\"uid\":\"%s\",\"annotations\":"
             "{\"gpusched.io/devices\":\"GPU-0\"}},\"target\":{\"kind\":\"Node\",\"name\":\"n1\"}}", uid);
    fx_expect(sch, "POST", PODS "/web/binding", NULL, body, 201, NULL);
    json_t *out = NULL;
    assert_int_equal(fx_req(e->adm, "GET", PODS "/web", NULL, NULL, &out), 200);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "spec"), "nodeName")), "n1");
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(out, "metadata"),
                                                                          "annotations"), "gpusched.io/devices")),
                        "GPU-0");
    json_decref(out);
    free(uid);
    /* Preemption deletes a victim. */
    fx_expect(sch, "DELETE", PODS "/victim", NULL, NULL, 200, NULL);
    /* Events, in both groups: create, then update (aggregation). */
    fx_expect(sch, "POST", "/api/v1/namespaces/default/events", NULL,
           "{\"metadata\":{\"name\":\"web.1\"},\"involvedObject\":{\"kind\":\"Pod\",\"name\":\"web\"},"
           "\"reason\":\"Scheduled\",\"message\":\"m\",\"type\":\"Normal\"}", 201, NULL);
    fx_expect(sch, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", NULL,
           "{\"metadata\":{\"name\":\"web.2\"},\"regarding\":{\"kind\":\"Pod\",\"name\":\"web\"},"
           "\"reason\":\"Scheduled\",\"note\":\"m\",\"type\":\"Normal\",\"action\":\"Binding\","
           "\"eventTime\":\"2026-01-01T00:00:00.000000Z\","
           "\"reportingController\":\"gpusched\",\"reportingInstance\":\"a\"}", 201, NULL);
    out = NULL;
    assert_int_equal(fx_req(sch, "GET", "/apis/events.k8s.io/v1/namespaces/default/events/web.2", NULL, NULL, &out), 200);
    assert_string_equal(json_string_value(json_object_get(out, "note")), "m");
    json_object_set_new(out, "series", json_pack("{s:i, s:s}", "count", 2, "lastObservedTime",
                                                 "2026-01-01T00:00:05.000000Z"));
    char *evtext = json_dumps(out, 0);
    json_decref(out);
    fx_expect(sch, "PUT", "/apis/events.k8s.io/v1/namespaces/default/events/web.2", NULL, evtext, 200, NULL);
    free(evtext);
    assert_int_equal(fx_req(e->adm, "GET", "/api/v1/namespaces/default/events/web.2", NULL, NULL, &out), 200);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(out, "series"), "count")), 2);
    assert_string_equal(json_string_value(json_object_get(out, "message")), "m"); /* stored as core v1 */
    json_decref(out);
    /* A bad one is refused by field, as on create. */
    fx_expect(sch, "PUT", "/apis/events.k8s.io/v1/namespaces/default/events/web.2", NULL,
           "{\"metadata\":{\"name\":\"web.2\"},\"regarding\":{\"kind\":\"Pod\",\"name\":\"web\"},\"reason\":"
           "\"Scheduled\",\"type\":\"Fatal\",\"action\":\"Binding\",\"eventTime\":\"2026-01-01T00:00:00.000000Z\","
           "\"reportingController\":\"gpusched\",\"reportingInstance\":\"a\"}", 422, "Unsupported value: \"Fatal\"");
    /* Its Lease, in kube-system: create, read, update. */
    const char *lease = "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":"
                        "\"gpusched\"},\"spec\":{\"holderIdentity\":\"a\",\"leaseDurationSeconds\":15}}";
    fx_expect(sch, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", NULL, lease, 201, NULL);
    assert_int_equal(fx_req(sch, "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpusched", NULL,
                         NULL, &out), 200);
    json_object_set_new(json_object_get(out, "spec"), "holderIdentity", json_string("b"));
    char *text = json_dumps(out, 0);
    json_decref(out);
    fx_expect(sch, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpusched", NULL, text, 200, NULL);
    free(text);
    gs_client_free(sch);
}

static void scheduler_is_refused_the_rest(void **state)
{
    struct api_env *e = *state;
    struct gs_client *sch = fx_client(e->srv, "sch");
    char body[1024];
    snprintf(body, sizeof body, POD, "mine");
    fx_expect(sch, "POST", PODS, NULL, body, 403,
           "User \"system:gpusched-scheduler\" cannot create resource \"pods\" in API group \"\" in the namespace "
           "\"default\": the scheduler may only bind, write the status of and delete (preempt) pods");
    fx_expect(e->adm, "POST", PODS, NULL, body, 201, NULL);
    fx_expect(sch, "PATCH", PODS "/mine", MP, "{\"metadata\":{\"labels\":{\"x\":\"y\"}}}", 403,
           "cannot patch resource \"pods\"");
    fx_expect(e->adm, "POST", "/api/v1/nodes", NULL, "{\"metadata\":{\"name\":\"n2\"}}", 201, NULL);
    fx_expect(sch, "PATCH", "/api/v1/nodes/n2", MP, "{\"metadata\":{\"labels\":{\"x\":\"y\"}}}", 403,
           "cannot patch resource \"nodes\" in API group \"\": not needed by the scheduler");
    fx_expect(sch, "PATCH", "/api/v1/nodes/n2/status", MP, "{\"status\":{}}", 403,
           "cannot patch resource \"nodes/status\"");
    fx_expect(sch, "DELETE", "/api/v1/nodes/n2", NULL, NULL, 403, "cannot delete resource \"nodes\"");
    fx_expect(sch, "GET", PODS "/mine/log", NULL, NULL, 403, "cannot get resource \"pods/log\"");
    fx_expect(sch, "POST", PODS "/mine/eviction", NULL, "{\"metadata\":{\"name\":\"mine\"}}", 403, NULL);
    fx_expect(sch, "GET", "/apis/nvidia.com/v1/clusterpolicies", NULL, NULL, 403, "not needed by the scheduler");
    fx_expect(sch, "POST", "/api/v1/namespaces", NULL, "{\"metadata\":{\"name\":\"x\"}}", 403, NULL);
    fx_expect(sch, "DELETE", "/api/v1/namespaces/default/events/none", NULL, NULL, 403, NULL);
    fx_expect(sch, "GET", "/api/v1/namespaces/default/events", NULL, NULL, 403, "cannot list resource \"events\"");
    /* Leases: only its own namespace, and no list, watch or delete there either. */
    const char *lease = "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":"
                        "\"gpusched\"},\"spec\":{}}";
    fx_expect(sch, "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", NULL, lease, 403,
           "the scheduler may only write its lease in the namespace kube-system");
    fx_expect(sch, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", NULL, lease, 403, NULL);
    fx_expect(sch, "GET", "/apis/coordination.k8s.io/v1/leases", NULL, NULL, 403, NULL);
    fx_expect(sch, "DELETE", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpusched", NULL, NULL, 403, NULL);
    /* Nothing that is not served: secrets do not exist here; the answer is no either way. */
    long code = fx_req(sch, "GET", "/api/v1/namespaces/default/secrets", NULL, NULL, NULL);
    assert_true(code == 403 || code == 404);
    gs_client_free(sch);
}

static void binding_uid_is_a_precondition(void **state)
{
    struct api_env *e = *state;
    struct gs_client *sch = fx_client(e->srv, "sch");
    char body[1024];
    snprintf(body, sizeof body, POD, "b1");
    fx_expect(e->adm, "POST", PODS, NULL, body, 201, NULL);
    char *uid = uid_of(e->adm, "b1");
    fx_expect(sch, "POST", PODS "/b1/binding", NULL,
           "{\"metadata\":{\"name\":\"b1\",\"uid\":\"not-the-uid\"},\"target\":{\"name\":\"n1\"}}", 409, NULL);
    char want[512];
    snprintf(want, sizeof want, "Operation cannot be fulfilled on pods \"b1\": Precondition failed: "
             "UID in precondition: not-the-uid, UID in object meta: %s", uid);
    fx_expect(sch, "POST", PODS "/b1/binding", NULL,
           "{\"metadata\":{\"name\":\"b1\",\"uid\":\"not-the-uid\"},\"target\":{\"name\":\"n1\"}}", 409, want);
    json_t *out = NULL;
    assert_int_equal(fx_req(e->adm, "GET", PODS "/b1", NULL, NULL, &out), 200);
    assert_null(json_object_get(json_object_get(out, "spec"), "nodeName")); /* nothing written */
    json_decref(out);
    fx_expect(sch, "POST", PODS "/b1/binding", NULL,
           "{\"metadata\":{\"name\":\"b1\",\"uid\":7},\"target\":{\"name\":\"n1\"}}", 422,
           "metadata.uid: must be a string");
    snprintf(body, sizeof body, "{\"metadata\":{\"name\":\"b1\",\"uid\":\"%s\"},\"target\":{\"name\":\"n1\"}}", uid);
    fx_expect(sch, "POST", PODS "/b1/binding", NULL, body, 201, NULL);
    /* A second binding: 409, already assigned (uid right or not). */
    fx_expect(sch, "POST", PODS "/b1/binding", NULL, body, 409, "is already assigned to node \"n1\"");
    /* No uid: no precondition, as before. */
    snprintf(body, sizeof body, POD, "b2");
    fx_expect(e->adm, "POST", PODS, NULL, body, 201, NULL);
    fx_expect(sch, "POST", PODS "/b2/binding", NULL, "{\"metadata\":{\"name\":\"b2\"},\"target\":{\"name\":\"n1\"}}", 201,
           NULL);
    free(uid);
    gs_client_free(sch);
}

static void server_writes_scheduler_kubeconfig(void **state)
{
    (void)state;
    char dir[64] = "/tmp/gs-schedkc-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char tok1[128] = "";
    for (int round = 0; round < 2; round++) { /* a restart keeps the token */
        struct gs_server_opts o = {.data_dir = dir, .listen = "127.0.0.1:0", .insecure = true, .qps = -1,
                                   .fail_qps = -1, .no_scheduler = true};
        struct gs_server *srv = NULL;
        struct gs_diags d = {0};
        assert_int_equal(gs_server_start(&o, &srv, &d), 0);
        const char *tok = gs_server_scheduler_token(srv);
        assert_non_null(tok);
        if (!round) snprintf(tok1, sizeof tok1, "%s", tok);
        else assert_string_equal(tok, tok1);
        char path[128], *text = NULL;
        size_t len = 0;
        snprintf(path, sizeof path, "%s/scheduler.kubeconfig", dir);
        assert_int_equal(gs_read_file(path, &text, &len), 0);
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal(sb.st_mode & 0777, 0600); /* a credential: its owner's only */
        assert_non_null(strstr(text, "user: " GS_SCHEDULER_USER "\n"));
        char line[200];
        snprintf(line, sizeof line, "    token: %s\n", tok);
        assert_non_null(strstr(text, line));
        free(text);
        /* the admin kubeconfig still holds the admin token */
        snprintf(path, sizeof path, "%s/kubeconfig", dir);
        assert_int_equal(gs_read_file(path, &text, &len), 0);
        assert_null(strstr(text, tok));
        assert_non_null(strstr(text, "user: admin\n"));
        free(text);
        /* the token is the scheduler's: it lists pods and may not create one */
        struct gs_client *c = fx_client(srv, tok);
        fx_expect(c, "GET", "/api/v1/pods", NULL, NULL, 200, NULL);
        char body[512];
        snprintf(body, sizeof body, POD, "p");
        fx_expect(c, "POST", PODS, NULL, body, 403, "system:gpusched-scheduler");
        gs_client_free(c);
        gs_server_stop(srv);
    }
    /* once: one scheduler line in the tokens file */
    char path[128], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/tokens.csv", dir);
    assert_int_equal(gs_read_file(path, &text, &len), 0);
    char *first = strstr(text, ",scheduler");
    assert_non_null(first);
    assert_null(strstr(first + 1, ",scheduler"));
    free(text);
    fx_rm_tree(dir);
}

static int setup(void **state)
{
    return api_env_start(state, "/tmp/gs-authsched-XXXXXX", tokens, false,
                         (struct gs_server_opts){.no_scheduler = true});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(scheduler_does_its_work, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(scheduler_is_refused_the_rest, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(binding_uid_is_a_precondition, setup, api_env_teardown),
        cmocka_unit_test(server_writes_scheduler_kubeconfig),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
