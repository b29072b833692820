/*
 * test_kueue_v1beta2.c - Kueue's kueue.x-k8s.io/v1beta2 objects next to
 * v1beta1: decoded, what v1beta2 renamed refused under its old name with the
 * new one in the message, quota from v1beta2 ClusterQueues applied in the
 * queue tree admission uses, and both versions served over the same stored
 * objects (with the new PodGroup and Workload resources) by the server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "control/resources.h"
#include "core/codec.h"
#include "sched/admission/quota.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPU(n) ((int64_t)(n) * 1000)

static int load(struct gs_queue_tree *t, const char *yaml, struct gs_diags *d)
{
    struct gs_docs docs = {0};
    gs_queue_tree_init(t);
    int rc = gs_decode_stream(yaml, strlen(yaml), &docs, d, NULL);
    for (size_t i = 0; !rc && i < docs.n; i++) {
        struct gs_object *o = NULL;
        rc = gs_object_decode(docs.docs[i], &o, d);
        if (!rc && o->kind != GS_KIND_WORKLOADPRIORITYCLASS) rc = gs_queue_tree_add_object(t, o, d);
        gs_object_free(o);
    }
    gs_docs_free(&docs);
    return rc ? rc : gs_queue_tree_finalize(t, d);
}

static const char *const V1BETA2 =
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: h100}\n"
    "spec: {nodeLabels: {nvidia.com/gpu.product: H100}}\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {name: urgent}\n"
    "value: 1000\ndescription: jobs that page someone\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: team-a}\n"
    "spec:\n  cohortName: lab\n"
    "  flavorFungibility: {whenCanBorrow: MayStopSearch, whenCanPreempt: TryNextFlavor}\n"
    "  admissionChecksStrategy: {admissionChecks: [{name: prov}]}\n"
    "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n"
    "    - name: h100\n      resources: [{name: nvidia.com/gpu, nominalQuota: 2, borrowingLimit: 1}]\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: team-b}\n"
    "spec:\n  cohortName: lab\n"
    "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n"
    "    - name: h100\n      resources: [{name: nvidia.com/gpu, nominalQuota: 3}]\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns-a}\n"
    "spec: {clusterQueue: team-a}\n";

static void v1beta2_objects_give_quota(void **st)
{
    (void)st;
    struct gs_queue_tree t;
    struct gs_diags d = {0};
    int rc = load(&t, V1BETA2, &d);
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, "%s: %s\n", d.v[i].path, d.v[i].msg);
    assert_int_equal(rc, 0);
    int32_t a = gs_queue_tree_find(&t, "team-a"), b = gs_queue_tree_find(&t, "team-b"),
            lab = gs_queue_tree_find(&t, "lab");
    assert_true(a >= 0 && b >= 0 && lab >= 0);
    assert_int_equal(t.nodes[a].parent, lab);
    assert_int_equal(t.nodes[b].parent, lab);
    assert_int_equal(gs_queue_tree_resolve(&t, "ns-a", "lq"), a);
    int fr = GS_QT_FR(gs_queue_tree_flavor(&t, "h100"), gs_queue_tree_res(&t, "nvidia.com/gpu"));
    struct gs_quota q;
    assert_int_equal(gs_quota_init(&q, &t), 0);
    assert_int_equal(gs_quota_available(&q, a, fr), GPU(3)); /* nominal 2 + borrowing 1 */
    gs_qvec req = {0};
    req[fr] = GPU(3);
    assert_true(gs_quota_fits(&q, a, req, NULL));
    gs_quota_apply(&q, a, req, +1);
    assert_int_equal(gs_quota_borrowed(&q, a, fr), GPU(1));
    req[fr] = GPU(1);
    assert_false(gs_quota_fits(&q, a, req, NULL)); /* over nominal + borrowingLimit */
    assert_int_equal(gs_quota_available(&q, b, fr), GPU(2)); /* b lent 1 of its 3 */
    gs_quota_free(&q);
    gs_queue_tree_free(&t);
    gs_diags_free(&d);
    /* the WorkloadPriorityClass is typed, at both versions */
    json_t *j = json_pack("{s:s, s:s, s:{s:s}, s:i}", "apiVersion", "kueue.x-k8s.io/v1beta1", "kind",
                          "WorkloadPriorityClass", "metadata", "name", "low", "value", -5);
    struct gs_object *o = NULL;
    assert_int_equal(gs_object_decode(j, &o, &d), 0);
    assert_int_equal(o->kind, GS_KIND_WORKLOADPRIORITYCLASS);
    assert_null(o->u.meta->namespace_);
    gs_object_free(o);
    json_decref(j);
}

static void problems(const char *yaml, char *buf, size_t len)
{
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    assert_int_equal(gs_decode_stream(yaml, strlen(yaml), &docs, &d, NULL), 0);
    struct gs_object *o = NULL;
    assert_int_not_equal(gs_object_decode(docs.docs[0], &o, &d), 0);
    buf[0] = 0;
    for (size_t i = 0; i < d.n; i++) snprintf(buf + strlen(buf), len - strlen(buf), "%s: %s\n", d.v[i].path, d.v[i].msg);
    gs_docs_free(&docs);
    gs_diags_free(&d);
}

#define CQ(version, extra)                                                                                          \
    "apiVersion: kueue.x-k8s.io/" version "\nkind: ClusterQueue\nmetadata: {name: q}\nspec:\n" extra               \
    "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"                                               \
    "    - name: f\n      resources: [{name: cpu, nominalQuota: 1}]\n"

static void renamed_fields_are_refused_with_the_new_name(void **st)
{
    (void)st;
    char m[2048];
    problems(CQ("v1beta2", "  cohort: lab\n"), m, sizeof m);
    assert_non_null(strstr(m, "spec.cohort: unknown field in kueue.x-k8s.io/v1beta2: it is called cohortName since v1beta2"));
    problems(CQ("v1beta2", "  flavorFungibility: {whenCanBorrow: Borrow}\n"), m, sizeof m);
    assert_non_null(strstr(m, "spec.flavorFungibility.whenCanBorrow: invalid value \"Borrow\": kueue.x-k8s.io/v1beta2 "
                              "calls it \"MayStopSearch\""));
    problems(CQ("v1beta2", "  flavorFungibility: {whenCanPreempt: Preempt}\n"), m, sizeof m);
    assert_non_null(strstr(m, "spec.flavorFungibility.whenCanPreempt: invalid value \"Preempt\""));
    problems(CQ("v1beta2", "  flavorFungibility: {whenCanBorrow: Sometimes}\n"), m, sizeof m);
    assert_non_null(strstr(m, "spec.flavorFungibility.whenCanBorrow: invalid value \"Sometimes\": must be one of "
                              "\"MayStopSearch\", \"TryNextFlavor\""));
    problems(CQ("v1beta2", "  admissionChecks: [prov]\n"), m, sizeof m);
    assert_non_null(strstr(m, "spec.admissionChecks: unknown field in kueue.x-k8s.io/v1beta2"));
    problems(CQ("v1beta1", "  flavorFungibility: {whenCanBorrow: Sometimes, preference: Never}\n"), m, sizeof m);
    assert_non_null(strstr(m, "must be one of \"Borrow\", \"MayStopSearch\", \"TryNextFlavor\""));
    assert_non_null(strstr(m, "spec.flavorFungibility.preference: invalid value \"Never\""));
    problems("apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {name: w}\n", m, sizeof m);
    assert_non_null(strstr(m, "value: is required"));
    problems("apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {name: w}\nvalue: 3000000000\n",
             m, sizeof m);
    assert_non_null(strstr(m, "value"));
    assert_non_null(strstr(m, "3000000000"));
    /* v1beta1 keeps its names */
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    const char *ok = CQ("v1beta1", "  cohort: lab\n  flavorFungibility: {whenCanBorrow: Borrow, whenCanPreempt: Preempt}\n");
    assert_int_equal(gs_decode_stream(ok, strlen(ok), &docs, &d, NULL), 0);
    struct gs_object *o = NULL;
    assert_int_equal(gs_object_decode(docs.docs[0], &o, &d), 0);
    gs_object_free(o);
    gs_docs_free(&docs);
    gs_diags_free(&d);
}

static void resource_rows(void **st)
{
    (void)st;
    const struct gs_api_resource *b1 = gs_api_resource_find("kueue.x-k8s.io", "v1beta1", "clusterqueues");
    const struct gs_api_resource *b2 = gs_api_resource_find("kueue.x-k8s.io", "v1beta2", "clusterqueues");
    assert_non_null(b1);
    assert_non_null(b2);
    assert_ptr_not_equal(b1, b2);
    assert_string_equal(b1->id, b2->id); /* one store for both versions */
    assert_ptr_equal(gs_api_resource_by_kind("kueue.x-k8s.io/v1beta2", "LocalQueue"),
                     gs_api_resource_find("kueue.x-k8s.io", "v1beta2", "localqueues"));
    assert_non_null(gs_api_resource_find("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses"));
    const struct gs_api_resource *pc = gs_api_resource_lookup("podgroups");
    const struct gs_api_resource *pv = gs_api_resource_by_kind("scheduling.volcano.sh/v1beta1", "PodGroup");
    const struct gs_api_resource *pn = gs_api_resource_lookup("podgroups.scheduling.k8s.io");
    assert_non_null(pc);
    assert_non_null(pv);
    assert_non_null(pn);
    assert_string_equal(pc->id, "podgroups.scheduling.x-k8s.io");
    assert_string_equal(pv->id, "podgroups.scheduling.volcano.sh");
    assert_string_equal(pn->id, "podgroups.scheduling.k8s.io");
    assert_true(pn->namespaced && pn->has_status);
    assert_non_null(gs_api_resource_lookup("workloads.scheduling.k8s.io"));
    assert_string_equal(gs_api_resource_lookup("pc")->version, "v1");
}

/*--- Served ---*/

static int setup(void **state)
{
    struct gs_server_opts o = {.max_body = 64 * 1024, .no_scheduler = true};
    return api_env_start(state, "/tmp/gs-kq-XXXXXX", "adm,admin,,,admin\n", false, o);
}

static json_t *call(struct api_env *e, const char *method, const char *path, const char *yaml, long *code)
{
    json_t *body = NULL, *out = NULL;
    if (yaml) {
        struct gs_docs docs = {0};
        struct gs_diags d = {0};
        assert_int_equal(gs_decode_stream(yaml, strlen(yaml), &docs, &d, NULL), 0);
        body = json_incref(docs.docs[0]);
        gs_docs_free(&docs);
    }
    *code = 0; /* a 4xx answer is an error code here; the status and body still come back */
    gs_client_call(e->adm, method, path, body ? "application/json" : NULL, body, NULL, &out, code);
    json_decref(body);
    return out;
}

static void both_versions_served(void **state)
{
    struct api_env *e = *state;
    long code = 0;
    json_t *o = call(e, "POST", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", CQ("v1beta2", "  cohortName: lab\n"), &code);
    assert_int_equal(code, 201);
    json_decref(o);
    o = call(e, "GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/q", NULL, &code); /* the same object */
    assert_int_equal(code, 200);
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "spec"), "cohortName")), "lab");
    json_decref(o);
    o = call(e, "POST", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", CQ("v1beta2", "  cohort: lab\n"), &code);
    assert_int_equal(code, 422);
    char *text = json_dumps(o, 0);
    assert_non_null(strstr(text, "cohortName"));
    free(text);
    json_decref(o);
    o = call(e, "GET", "/apis/kueue.x-k8s.io/v1beta2", NULL, &code);
    assert_int_equal(code, 200);
    text = json_dumps(o, 0);
    assert_non_null(strstr(text, "\"workloadpriorityclasses\""));
    assert_non_null(strstr(text, "\"localqueues\""));
    free(text);
    json_decref(o);
    o = call(e, "GET", "/apis/scheduling.k8s.io", NULL, &code); /* PriorityClass keeps v1 preferred */
    assert_int_equal(code, 200);
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "preferredVersion"), "version")), "v1");
    json_decref(o);
    o = call(e, "POST", "/apis/scheduling.k8s.io/v1beta1/namespaces/default/workloads",
             "apiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\nmetadata: {name: job}\n"
             "spec:\n  podGroupTemplates: [{name: workers, schedulingPolicy: {gang: {minCount: 0}}}]\n",
             &code);
    assert_int_equal(code, 422);
    text = json_dumps(o, 0);
    assert_non_null(strstr(text, "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount"));
    free(text);
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(v1beta2_objects_give_quota),
        cmocka_unit_test(renamed_fields_are_refused_with_the_new_name),
        cmocka_unit_test(resource_rows),
        cmocka_unit_test_setup_teardown(both_versions_served, setup, api_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
