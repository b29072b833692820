/*
 * test_schema.c - the per-kind field tables (core/schema.h): unknown field
 * paths as kube-apiserver names them, patch bodies (directives and
 * removals are not fields), enum violations with kube's "Unsupported
 * value" text, free-form parts, and kinds the table does not know.
 */
#include "core/codec.h"
#include "core/schema.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

static json_t *doc(const char *text)
{
    json_t *d = NULL;
    struct gs_diags dg = {0};
    assert_int_equal(gs_json_decode(text, strlen(text), &d, &dg), 0);
    gs_diags_free(&dg);
    return d;
}

static void check(const char *api, const char *kind, const char *text, unsigned flags, struct gs_diags *unknown,
                  struct gs_diags *invalid)
{
    json_t *d = doc(text);
    assert_int_equal(gs_schema_check(api, kind, d, flags, unknown, invalid), 0);
    json_decref(d);
}

static void unknown_pod_fields_are_named_by_path(void **state)
{
    (void)state;
    struct gs_diags u = {0}, inv = {0};
    check("v1", "Pod",
          "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"labelz\":{}},"
          "\"spec\":{\"nodeSelecter\":{\"a\":\"b\"},\"nodeSelector\":{\"any.key/x\":\"y\"},"
          "\"containers\":[{\"name\":\"a\"},{\"name\":\"b\",\"imagePullPolicyy\":\"Always\","
          "\"resources\":{\"limits\":{\"nvidia.com/gpu\":1},\"requestz\":{}}}],"
          "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
          "[{\"matchExpressions\":[{\"key\":\"k\",\"operator\":\"In\",\"values\":[\"v\"],\"extra\":1}]}]}}}},"
          "\"status\":{\"anything\":{\"goes\":true}}}",
          0, &u, &inv);
    assert_int_equal(u.n, 5);
    assert_string_equal(u.v[0].path, "metadata.labelz");
    assert_string_equal(u.v[0].msg, "unknown field");
    assert_string_equal(u.v[1].path, "spec.nodeSelecter");
    assert_string_equal(u.v[2].path, "spec.containers[1].imagePullPolicyy");
    assert_string_equal(u.v[3].path, "spec.containers[1].resources.requestz");
    assert_string_equal(u.v[4].path,
                        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
                        ".matchExpressions[0].extra");
    assert_int_equal(inv.n, 0);
    gs_diags_free(&u);
}

/* Fields Kubernetes has and gpusched ignores are known: no warning for them. */
static void full_pod_spec_is_known(void **state)
{
    (void)state;
    struct gs_diags u = {0};
    check("v1", "Pod",
          "{\"spec\":{\"activeDeadlineSeconds\":1,\"automountServiceAccountToken\":true,\"dnsConfig\":{\"options\":"
          "[{\"name\":\"ndots\",\"value\":\"2\"}]},\"dnsPolicy\":\"None\",\"enableServiceLinks\":false,"
          "\"ephemeralContainers\":[{\"name\":\"dbg\",\"targetContainerName\":\"a\"}],\"hostAliases\":[{\"ip\":\"1.2.3.4\","
          "\"hostnames\":[\"x\"]}],\"hostIPC\":false,\"hostNetwork\":false,\"hostPID\":false,\"hostUsers\":true,"
          "\"hostname\":\"h\",\"imagePullSecrets\":[{\"name\":\"s\"}],\"initContainers\":[{\"name\":\"i\","
          "\"restartPolicy\":\"Always\"}],\"os\":{\"name\":\"linux\"},\"overhead\":{\"cpu\":\"1\"},"
          "\"preemptionPolicy\":\"Never\",\"priority\":1,\"priorityClassName\":\"p\",\"readinessGates\":"
          "[{\"conditionType\":\"x\"}],\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"c\"}],"
          "\"runtimeClassName\":\"nvidia\",\"schedulerName\":\"s\",\"schedulingGates\":[{\"name\":\"g\"}],"
          "\"securityContext\":{\"runAsUser\":1},\"serviceAccount\":\"a\",\"serviceAccountName\":\"a\","
          "\"setHostnameAsFQDN\":false,\"shareProcessNamespace\":false,\"subdomain\":\"s\","
          "\"terminationGracePeriodSeconds\":3,\"tolerations\":[{\"operator\":\"Exists\",\"effect\":\"\"}],"
          "\"topologySpreadConstraints\":[{\"maxSkew\":1,\"topologyKey\":\"z\",\"whenUnsatisfiable\":\"ScheduleAnyway\","
          "\"nodeAffinityPolicy\":\"Honor\",\"matchLabelKeys\":[\"a\"]}],\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}],"
          "\"containers\":[{\"name\":\"c\",\"args\":[],\"env\":[{\"name\":\"A\",\"valueFrom\":{\"fieldRef\":{}}}],"
          "\"envFrom\":[{\"prefix\":\"P\",\"configMapRef\":{\"name\":\"m\"}}],\"lifecycle\":{\"preStop\":{}},"
          "\"livenessProbe\":{\"exec\":{\"command\":[\"true\"]},\"periodSeconds\":5},\"ports\":[{\"containerPort\":80,"
          "\"protocol\":\"SCTP\"}],\"resizePolicy\":[{\"resourceName\":\"cpu\",\"restartPolicy\":\"NotRequired\"}],"
          "\"stdin\":true,\"stdinOnce\":true,\"tty\":true,\"terminationMessagePath\":\"/t\","
          "\"terminationMessagePolicy\":\"File\",\"volumeDevices\":[{\"name\":\"d\",\"devicePath\":\"/dev/x\"}],"
          "\"volumeMounts\":[{\"name\":\"v\",\"mountPath\":\"/v\",\"mountPropagation\":\"None\"}],"
          "\"workingDir\":\"/\"}]}}",
          0, &u, NULL);
    for (size_t i = 0; i < u.n; i++) fprintf(stderr, "unexpected unknown field %s\n", u.v[i].path);
    assert_int_equal(u.n, 0);
}

static void enum_violations_have_kube_text(void **state)
{
    (void)state;
    struct gs_diags inv = {0};
    check("v1", "Pod",
          "{\"spec\":{\"restartPolicy\":\"Sometimes\",\"dnsPolicy\":\"ClusterFirst\",\"containers\":[{\"name\":\"c\","
          "\"imagePullPolicy\":\"Maybe\",\"ports\":[{\"containerPort\":1,\"protocol\":\"tcp\"}]}],"
          "\"tolerations\":[{\"operator\":\"Exists\",\"effect\":\"\"},{\"key\":\"k\",\"operator\":\"Equals\"}]}}",
          0, NULL, &inv);
    assert_int_equal(inv.n, 4);
    assert_string_equal(inv.v[0].path, "spec.restartPolicy");
    assert_string_equal(inv.v[0].msg, "Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\", "
                                      "\"OnFailure\"");
    assert_string_equal(inv.v[1].path, "spec.containers[0].imagePullPolicy");
    assert_string_equal(inv.v[1].msg, "Unsupported value: \"Maybe\": supported values: \"Always\", \"IfNotPresent\", "
                                      "\"Never\"");
    assert_string_equal(inv.v[2].path, "spec.containers[0].ports[0].protocol");
    assert_string_equal(inv.v[2].msg, "Unsupported value: \"tcp\": supported values: \"SCTP\", \"TCP\", \"UDP\"");
    assert_string_equal(inv.v[3].path, "spec.tolerations[1].operator");
    gs_diags_free(&inv);
    check("v1", "Node", "{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoScheduling\"}]}}", 0, NULL, &inv);
    assert_int_equal(inv.n, 1);
    assert_string_equal(inv.v[0].path, "spec.taints[0].effect");
    assert_string_equal(inv.v[0].msg, "Unsupported value: \"NoScheduling\": supported values: \"NoExecute\", "
                                      "\"NoSchedule\", \"PreferNoSchedule\"");
    gs_diags_free(&inv);
    /* a value of the wrong type is the decoders' to report, not an enum violation */
    check("v1", "Pod", "{\"spec\":{\"restartPolicy\":7}}", 0, NULL, &inv);
    assert_int_equal(inv.n, 0);
}

static void patches_skip_directives_and_removals(void **state)
{
    (void)state;
    struct gs_diags u = {0};
    check("v1", "Pod",
          "{\"metadata\":{\"labels\":{\"a\":null}},\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"c\"}],"
          "\"containers\":[{\"name\":\"c\",\"$patch\":\"delete\"}],\"oldField\":null,\"newFieldd\":1}}",
          GS_SCHEMA_PATCH, &u, NULL);
    assert_int_equal(u.n, 1);
    assert_string_equal(u.v[0].path, "spec.newFieldd");
    gs_diags_free(&u);
    /* the same document as a whole object: directives are fields nobody knows */
    check("v1", "Pod", "{\"spec\":{\"$patch\":\"replace\"}}", 0, &u, NULL);
    assert_int_equal(u.n, 1);
    gs_diags_free(&u);
}

static void kinds_and_groups(void **state)
{
    (void)state;
    struct gs_diags u = {0};
    assert_true(gs_schema_known("v1", "Pod"));
    assert_true(gs_schema_known("policy/v1", "PodDisruptionBudget"));
    assert_true(gs_schema_known("scheduling.volcano.sh/v1beta1", "PodGroup"));
    assert_false(gs_schema_known("apps/v1", "Deployment"));
    assert_false(gs_schema_known("example.com/v1", "Pod")); /* a CRD that happens to be called Pod */
    check("apps/v1", "Deployment", "{\"spec\":{\"replicaz\":1}}", 0, &u, NULL);
    assert_int_equal(u.n, 0);
    /* kinds kept with a free-form spec: only the top level is checked */
    check("kueue.x-k8s.io/v1beta1", "ClusterQueue", "{\"spec\":{\"anything\":1},\"specc\":{}}", 0, &u, NULL);
    assert_int_equal(u.n, 1);
    assert_string_equal(u.v[0].path, "specc");
    gs_diags_free(&u);
    /* resource.k8s.io: v1's fields and v1beta1's (basic, flat requests) in every version */
    check("resource.k8s.io/v1beta1", "ResourceClaim",
          "{\"spec\":{\"devices\":{\"requests\":[{\"name\":\"g\",\"deviceClassName\":\"c\",\"count\":1,"
          "\"exactly\":{\"count\":1,\"adminAccess\":true},\"firstAvailable\":[{\"name\":\"a\",\"adminAcess\":1}]}],"
          "\"anything\":1}}}", 0, &u, NULL);
    assert_int_equal(u.n, 2);
    assert_string_equal(u.v[0].path, "spec.devices.requests[0].firstAvailable[0].adminAcess");
    assert_string_equal(u.v[1].path, "spec.devices.anything");
    gs_diags_free(&u);
    check("resource.k8s.io/v1", "ResourceSlice",
          "{\"spec\":{\"driver\":\"d\",\"devices\":[{\"name\":\"g\",\"basic\":{\"attributes\":{\"x\":{}},\"taint\":[]},"
          "\"taints\":[{\"key\":\"k\",\"efect\":\"NoSchedule\"}]}],\"pool\":{\"name\":\"p\",\"gen\":1}}}", 0, &u, NULL);
    assert_int_equal(u.n, 3);
    assert_string_equal(u.v[0].path, "spec.devices[0].basic.taint");
    assert_string_equal(u.v[1].path, "spec.devices[0].taints[0].efect");
    assert_string_equal(u.v[2].path, "spec.pool.gen");
    gs_diags_free(&u);
    check("resource.k8s.io/v1", "DeviceTaintRule", "{\"spec\":{\"taint\":{\"key\":\"k\",\"efect\":\"None\"}}}", 0, &u,
          NULL);
    assert_int_equal(u.n, 1);
    assert_string_equal(u.v[0].path, "spec.taint.efect");
    gs_diags_free(&u);
    assert_true(gs_schema_known("resource.k8s.io/v1", "ResourceClaimTemplate"));
    check("policy/v1", "PodDisruptionBudget",
          "{\"spec\":{\"minAvailable\":\"50%\",\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"maxUnavailabel\":1,"
          "\"unhealthyPodEvictionPolicy\":\"Sometimes\"}}",
          0, &u, &u);
    assert_int_equal(u.n, 2);
    assert_string_equal(u.v[0].path, "spec.maxUnavailabel");
    assert_string_equal(u.v[1].path, "spec.unhealthyPodEvictionPolicy");
    gs_diags_free(&u);
    /* not an object: nothing to walk */
    json_t *arr = json_array();
    assert_int_equal(gs_schema_check("v1", "Pod", arr, 0, &u, NULL), 0);
    assert_int_equal(u.n, 0);
    json_decref(arr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unknown_pod_fields_are_named_by_path),
        cmocka_unit_test(full_pod_spec_is_known),
        cmocka_unit_test(enum_violations_have_kube_text),
        cmocka_unit_test(patches_skip_directives_and_removals),
        cmocka_unit_test(kinds_and_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
