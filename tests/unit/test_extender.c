/*
 * test_extender.c - the kube-scheduler extender over a local source: request
 * parsing and its error messages, filter in both nodeCacheCapable modes with
 * our reasons, prioritize on 0..10, preempt choosing victims per node, bind
 * writing the node and the devices and accounting them at once, the cache
 * following the source, and the HTTP endpoint (routes, readiness, metrics).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/store.h"
#include "control/tls.h"
#include "informer/source.h"
#include "kube/extender.h"
#include "sched_fixture.h"
#include "tmpdir_fixture.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct env {
    char dir[64];
    struct gs_store *store;
    struct gs_source *src;
    struct gs_extender *x;
    struct gs_sched_config cfg;
    bool has_cfg;
};

/*--- Objects ---*/

static json_t *node(const char *name, int ngpus, const char *cpu)
{
    json_t *devs = json_array();
    for (int i = 0; i < ngpus; i++) {
        char uuid[32];
        snprintf(uuid, sizeof uuid, "GPU-%s-%d", name, i);
        json_array_append_new(devs, json_pack("{s:i, s:s, s:s, s:i}", "index", i, "uuid", uuid, "model", "H100",
                                              "memoryMiB", 81920));
    }
    char gpus[8];
    snprintf(gpus, sizeof gpus, "%d", ngpus);
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:s, s:s, s:s, s:s}, s:o}}", "apiVersion", "v1", "kind", "Node",
                     "metadata", "name", name, "status", "capacity", "cpu", cpu, "memory", "256Gi", "pods", "110",
                     "nvidia.com/gpu", gpus, "devices", devs);
}

/* A pod asking for gpus GPUs and cpu; bound to node with devices when node is given. */
static json_t *pod(const char *name, const char *gpus, const char *cpu, int priority, const char *node,
                   const char *devices)
{
    char uid[64];
    snprintf(uid, sizeof uid, "uid-%s", name);
    json_t *p = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{}}, s:{s:i, s:[{s:s, s:s, s:{s:{s:s, s:s}, s:{s:s}}}]}}",
                          "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", "default", "uid",
                          uid, "annotations", "spec", "priority", priority, "containers", "name", "c", "image", "x",
                          "resources", "limits", "nvidia.com/gpu", gpus, "cpu", cpu, "requests", "cpu", cpu);
    if (node) json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string(node));
    if (devices)
        json_object_set_new(json_object_get(json_object_get(p, "metadata"), "annotations"), "gpusched.io/devices",
                            json_string(devices));
    return p;
}

static void put(struct env *e, const char *key, json_t *obj)
{
    assert_int_equal(gs_store_create(e->store, key, obj, NULL), 0);
    json_decref(obj);
}

/* n1: 2 free GPUs; n2: 1 GPU taken by a priority-0 pod; n3: 4 free GPUs;
 * n4: 1 GPU taken by a priority-1000 pod. */
static void cluster(struct env *e)
{
    put(e, "nodes/n1", node("n1", 2, "64"));
    put(e, "nodes/n2", node("n2", 1, "64"));
    put(e, "nodes/n3", node("n3", 4, "64"));
    put(e, "nodes/n4", node("n4", 1, "64"));
    put(e, "pods/default/low", pod("low", "1", "1", 0, "n2", "GPU-n2-0"));
    put(e, "pods/default/high", pod("high", "1", "1", 1000, "n4", "GPU-n4-0"));
    put(e, "pods/default/p", pod("p", "1", "1", 100, NULL, NULL));
}

static int start_with(void **state, const char *config)
{
    struct env *e = calloc(1, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/gs-extender-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    struct gs_store_opts so = {.dir = e->dir};
    assert_int_equal(gs_store_open_sqlite(&so, &e->store), 0);
    assert_int_equal(gs_source_local_new(e->store, &e->src), 0);
    cluster(e);
    struct gs_diags d = {0};
    if (config) {
        json_t *doc = json_loads(config, 0, NULL);
        assert_non_null(doc);
        assert_int_equal(gs_sched_config_parse(doc, &e->cfg, &d), 0);
        json_decref(doc);
        e->has_cfg = true;
    }
    struct gs_extender_opts o = {.source = e->src, .config = config ? &e->cfg : NULL, .seed = 1};
    assert_int_equal(gs_extender_new(&o, &e->x, &d), 0);
    gs_diags_free(&d);
    assert_true(gs_extender_wait_synced(e->x, 10000));
    *state = e;
    return 0;
}

static int setup(void **state) { return start_with(state, NULL); }

/* Scores by NodeResourcesFit alone (LeastAllocated): more free CPU, higher. */
static int setup_fit_score(void **state)
{
    return start_with(state, "{\"profiles\":[{\"schedulerName\":\"default-scheduler\",\"plugins\":{\"score\":"
                             "{\"disabled\":[{\"name\":\"*\"}],\"enabled\":[{\"name\":\"NodeResourcesFit\"}]}}}]}");
}

static int teardown(void **state)
{
    struct env *e = *state;
    gs_extender_free(e->x);
    gs_source_free(e->src);
    gs_store_close(e->store);
    if (e->has_cfg) gs_sched_config_free(&e->cfg);
    fx_rm_tree(e->dir);
    free(e);
    return 0;
}

/* Calls the verb with body; returns the answer parsed (caller frees), status in *status. */
static json_t *call(struct env *e, enum gs_ext_verb v, const char *body, int *status)
{
    struct gs_ext_reply r;
    assert_int_equal(gs_extender_handle(e->x, v, body, strlen(body), &r), 0);
    assert_non_null(r.body);
    *status = r.status;
    json_t *doc = json_loads(r.body, JSON_DECODE_ANY, NULL);
    free(r.body);
    assert_non_null(doc);
    return doc;
}

static char *dump_pod(const char *name, const char *gpus, int priority)
{
    json_t *p = pod(name, gpus, "1", priority, NULL, NULL);
    char *s = json_dumps(p, JSON_COMPACT);
    json_decref(p);
    return s;
}

/*--- Parsing ---*/

static void parse_errors_name_the_field(void **state)
{
    (void)state;
    static const struct {
        enum gs_ext_verb v;
        const char *body, *want;
    } cases[] = {
        {GS_EXT_FILTER, "{}", "ExtenderArgs.Pod: required"},
        {GS_EXT_FILTER, "{\"Pod\":", "ExtenderArgs: the request body is not JSON"},
        {GS_EXT_FILTER, "[1]", "ExtenderArgs: the request body must be a JSON object, got array"},
        {GS_EXT_PRIORITIZE, "{\"Pod\":[]}", "ExtenderArgs.Pod: must be an object, got array"},
        {GS_EXT_FILTER, "{\"Pod\":{\"metadata\":{}}}", "ExtenderArgs.Pod.metadata.name: required"},
        {GS_EXT_FILTER, "{\"Pod\":{\"metadata\":{\"name\":\"p\"}}}", "ExtenderArgs: neither Nodes"},
        {GS_EXT_FILTER, "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNames\":[\"a\",3]}",
         "ExtenderArgs.NodeNames[1]: must be a string, got number"},
        {GS_EXT_FILTER, "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNames\":[\"\"]}",
         "ExtenderArgs.NodeNames[0]: must not be empty"},
        {GS_EXT_FILTER, "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNames\":\"n1\"}",
         "ExtenderArgs.NodeNames: must be an array of node names, got string"},
        {GS_EXT_FILTER, "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"Nodes\":{\"items\":[{\"metadata\":{}}]}}",
         "ExtenderArgs.Nodes.items[0].metadata.name: required"},
        {GS_EXT_FILTER, "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"Nodes\":{\"items\":{}}}",
         "ExtenderArgs.Nodes.items: must be an array, got object"},
        {GS_EXT_BIND, "{}", "ExtenderBindingArgs.PodName: required"},
        {GS_EXT_BIND, "{\"PodName\":\"p\"}", "ExtenderBindingArgs.Node: required"},
        {GS_EXT_BIND, "{\"PodName\":3,\"Node\":\"n1\"}", "ExtenderBindingArgs.PodName: must be a string, got number"},
        {GS_EXT_BIND, "{\"PodName\":\"a/b\",\"Node\":\"n1\"}", "is not a pod name"},
        {GS_EXT_PREEMPT, "{\"Pod\":{\"metadata\":{\"name\":\"p\"}}}", "ExtenderPreemptionArgs: neither"},
        {GS_EXT_PREEMPT, "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToMetaVictims\":{\"n1\":{\"Pods\":[{}]}}}",
         "ExtenderPreemptionArgs.NodeNameToMetaVictims[\"n1\"].Pods[0].UID: required"},
        {GS_EXT_PREEMPT,
         "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToVictims\":{\"n1\":{\"NumPDBViolations\":\"x\"}}}",
         "ExtenderPreemptionArgs.NodeNameToVictims[\"n1\"].NumPDBViolations: must be an integer, got string"},
        {GS_EXT_PREEMPT,
         "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToVictims\":{\"n1\":{\"Pods\":[{\"metadata\":{}}]}}}",
         "ExtenderPreemptionArgs.NodeNameToVictims[\"n1\"].Pods[0].metadata.uid: required"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gs_ext_request r;
        char err[512];
        int rc = gs_ext_request_parse(cases[i].v, cases[i].body, strlen(cases[i].body), &r, err, sizeof err);
        if (rc != GS_EINVAL || !strstr(err, cases[i].want))
            fail_msg("case %zu (%s): rc %d, message \"%s\", want \"%s\"", i, cases[i].body, rc, err, cases[i].want);
        gs_ext_request_free(&r);
    }
}

static void parse_reads_keys_as_go_does(void **state)
{
    (void)state;
    /* Go matches keys without regard to case; older encoders wrote "pod" / "nodenames". */
    const char *body = "{\"pod\":{\"metadata\":{\"name\":\"p\"}},\"nodenames\":[\"n1\",\"n2\"]}";
    struct gs_ext_request r;
    char err[256];
    assert_int_equal(gs_ext_request_parse(GS_EXT_FILTER, body, strlen(body), &r, err, sizeof err), 0);
    assert_true(r.cache_capable);
    assert_int_equal(r.nnames, 2);
    assert_string_equal(r.names[1], "n2");
    gs_ext_request_free(&r);
    body = "{\"PodName\":\"p\",\"PodNamespace\":\"\",\"PodUID\":\"u\",\"Node\":\"n1\"}";
    assert_int_equal(gs_ext_request_parse(GS_EXT_BIND, body, strlen(body), &r, err, sizeof err), 0);
    assert_string_equal(r.pod_namespace, "default");
    assert_string_equal(r.pod_uid, "u");
    gs_ext_request_free(&r);
    body = "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToMetaVictims\":{\"b\":{\"Pods\":[{\"uid\":\"1\"}],"
           "\"NumPDBViolations\":2},\"a\":{}}}";
    assert_int_equal(gs_ext_request_parse(GS_EXT_PREEMPT, body, strlen(body), &r, err, sizeof err), 0);
    assert_int_equal(r.nvictims, 2);
    assert_string_equal(r.victims[0].node, "a"); /* sorted */
    assert_string_equal(r.victims[1].uids[0], "1");
    assert_int_equal(r.victims[1].pdb_violations, 2);
    gs_ext_request_free(&r);
    assert_int_equal(gs_ext_verb_parse("prioritize"), GS_EXT_PRIORITIZE);
    assert_int_equal(gs_ext_verb_parse("Filter"), -1);
}

static void bad_request_is_400_with_the_message(void **state)
{
    struct env *e = *state;
    int status;
    json_t *doc = call(e, GS_EXT_FILTER, "{\"NodeNames\":[]}", &status);
    assert_int_equal(status, 400);
    assert_string_equal(json_string_value(json_object_get(doc, "Error")), "ExtenderArgs.Pod: required");
    json_decref(doc);
    /* A Pod our decoder refuses is named with the field that is wrong. */
    doc = call(e, GS_EXT_FILTER,
               "{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":"
               "{\"limits\":{\"nvidia.com/gpu\":\"lots\"}}}]}},\"NodeNames\":[\"n1\"]}",
               &status);
    assert_int_equal(status, 400);
    const char *msg = json_string_value(json_object_get(doc, "Error"));
    assert_non_null(strstr(msg, "ExtenderArgs.Pod: "));
    assert_non_null(strstr(msg, "nvidia.com/gpu"));
    json_decref(doc);
    struct gs_extender_stats st;
    gs_extender_stats(e->x, &st);
    assert_int_equal(st.requests[GS_EXT_FILTER], 2);
    assert_int_equal(st.errors[GS_EXT_FILTER], 2);
    assert_int_equal(st.nodes, 4);
    assert_int_equal(st.pods, 2);
}

/*--- Filter ---*/

static void filter_node_names_with_reasons(void **state)
{
    struct env *e = *state;
    char *p = dump_pod("p", "1", 100), body[4096];
    snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNames\":[\"n1\",\"n2\",\"n3\",\"ghost\"]}", p);
    int status;
    json_t *doc = call(e, GS_EXT_FILTER, body, &status);
    assert_int_equal(status, 200);
    json_t *names = json_object_get(doc, "NodeNames");
    assert_int_equal(json_array_size(names), 2);
    assert_string_equal(json_string_value(json_array_get(names, 0)), "n1");
    assert_string_equal(json_string_value(json_array_get(names, 1)), "n3");
    assert_true(json_is_null(json_object_get(doc, "Nodes")));
    json_t *failed = json_object_get(doc, "FailedNodes");
    assert_string_equal(json_string_value(json_object_get(failed, "n2")), "Insufficient nvidia.com/gpu");
    assert_non_null(strstr(json_string_value(json_object_get(failed, "ghost")), "not known to gpusched"));
    assert_int_equal(json_object_size(json_object_get(doc, "FailedAndUnresolvableNodes")), 0);
    assert_string_equal(json_string_value(json_object_get(doc, "Error")), "");
    json_decref(doc);
    free(p);
    /* Three GPUs fit only n3. */
    p = dump_pod("big", "3", 0);
    snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNames\":[\"n1\",\"n3\"]}", p);
    doc = call(e, GS_EXT_FILTER, body, &status);
    assert_int_equal(json_array_size(json_object_get(doc, "NodeNames")), 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(doc, "NodeNames"), 0)), "n3");
    assert_non_null(json_object_get(json_object_get(doc, "FailedNodes"), "n1"));
    json_decref(doc);
    free(p);
}

static void filter_nodes_mode_judges_nodes_as_sent(void **state)
{
    struct env *e = *state;
    char *p = dump_pod("p", "1", 100);
    json_t *n1 = node("n1", 2, "64"), *n2 = node("n2", 1, "64"), *n9 = node("n9", 1, "8");
    /* n1 as sent has no GPUs at all (a newer view than ours): it must fail. */
    json_object_set_new(json_object_get(n1, "status"), "devices", json_array());
    json_object_set_new(json_object_get(json_object_get(n1, "status"), "capacity"), "nvidia.com/gpu",
                        json_string("0"));
    json_t *items = json_pack("[O, O, O]", n1, n2, n9);
    char *nodes = json_dumps(items, JSON_COMPACT);
    char *body = malloc(strlen(p) + strlen(nodes) + 64);
    sprintf(body, "{\"Pod\":%s,\"Nodes\":{\"items\":%s}}", p, nodes);
    int status;
    json_t *doc = call(e, GS_EXT_FILTER, body, &status);
    assert_int_equal(status, 200);
    assert_true(json_is_null(json_object_get(doc, "NodeNames")));
    json_t *pass = json_object_get(json_object_get(doc, "Nodes"), "items");
    /* n9 is unknown to the cache but judged as sent; n2's GPU is held by a bound pod we know of. */
    assert_int_equal(json_array_size(pass), 1);
    assert_true(json_equal(json_array_get(pass, 0), n9));
    json_t *failed = json_object_get(doc, "FailedNodes");
    assert_string_equal(json_string_value(json_object_get(failed, "n2")), "Insufficient nvidia.com/gpu");
    assert_non_null(json_object_get(failed, "n1"));
    json_decref(doc);
    json_decref(items), json_decref(n1), json_decref(n2), json_decref(n9);
    free(nodes), free(body), free(p);
}

static void filter_unschedulable_node_is_unresolvable(void **state)
{
    struct env *e = *state;
    json_t *n = node("n5", 2, "64");
    json_object_set_new(n, "spec", json_pack("{s:b}", "unschedulable", 1));
    put(e, "nodes/n5", n);
    char *p = dump_pod("p", "1", 100), body[4096];
    snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNames\":[\"n5\"]}", p);
    json_t *doc = NULL;
    for (int i = 0; i < 200; i++) { /* until the follower has the node */
        int status;
        doc = call(e, GS_EXT_FILTER, body, &status);
        if (!strstr(json_string_value(json_object_get(json_object_get(doc, "FailedNodes"), "n5")) ?: "",
                    "not known")) break;
        json_decref(doc);
        doc = NULL;
        usleep(20000);
    }
    assert_non_null(doc);
    assert_non_null(json_object_get(json_object_get(doc, "FailedAndUnresolvableNodes"), "n5"));
    json_decref(doc);
    free(p);
}

/* A GPU pod that kube-scheduler bound (no devices annotation) still holds its GPUs. */
static void pods_bound_elsewhere_hold_their_gpus(void **state)
{
    struct env *e = *state;
    put(e, "pods/default/kube", pod("kube", "3", "1", 0, "n3", NULL));
    char *p = dump_pod("p", "2", 100), body[4096];
    snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNames\":[\"n3\"]}", p);
    json_t *doc = NULL;
    for (int i = 0; i < 200; i++) {
        int status;
        doc = call(e, GS_EXT_FILTER, body, &status);
        if (json_object_get(json_object_get(doc, "FailedNodes"), "n3")) break;
        json_decref(doc);
        doc = NULL;
        usleep(20000);
    }
    assert_non_null(doc); /* 3 of 4 taken: 2 do not fit */
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "FailedNodes"), "n3")),
                        "Insufficient nvidia.com/gpu");
    json_decref(doc);
    free(p);
    p = dump_pod("p", "1", 100);
    snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNames\":[\"n3\"]}", p);
    int status;
    doc = call(e, GS_EXT_FILTER, body, &status);
    assert_int_equal(json_array_size(json_object_get(doc, "NodeNames")), 1); /* the fourth is free */
    json_decref(doc);
    free(p);
}

/* A Pod and a Node exactly as a kube-apiserver serves them (kubelet's
 * status, no status.devices: the count-only path; managedFields, probes,
 * projected volumes, affinity, tolerations): decoded and judged. */
static const char KUBE_POD[] =
    "{\"metadata\":{\"name\":\"train-0\",\"generateName\":\"train-\",\"namespace\":\"default\",\"uid\":\"0c7d9b7e-4f6a-4b5"
    "1-9d3a-5a9e1c1f3a11\",\"resourceVersion\":\"123456\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\",\"labels\":"
    "{\"app\":\"train\",\"pod-template-hash\":\"abc\"},\"annotations\":{\"kubectl.kubernetes.io/restartedAt\":\"2026-0"
    "1-01T00:00:00Z\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"train-abc\",\""
    "uid\":\"11111111-2222-3333-4444-555555555555\",\"controller\":true,\"blockOwnerDeletion\":true}],\"managedFi"
    "elds\":[{\"manager\":\"kube-controller-manager\",\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"2026-01-0"
    "1T00:00:00Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:labels\":{\".\":{}}}}}]},\"spec\":{\"vol"
    "umes\":[{\"name\":\"kube-api-access-x\",\"projected\":{\"sources\":[{\"serviceAccountToken\":{\"expirationSecond"
    "s\":3607,\"path\":\"token\"}},{\"configMap\":{\"name\":\"kube-root-ca.crt\",\"items\":[{\"key\":\"ca.crt\",\"path\":\"ca"
    ".crt\"}]}}],\"defaultMode\":420}},{\"name\":\"shm\",\"emptyDir\":{\"medium\":\"Memory\",\"sizeLimit\":\"8Gi\"}}],\"ini"
    "tContainers\":[{\"name\":\"init\",\"image\":\"busybox:1.36\",\"command\":[\"sh\",\"-c\",\"true\"],\"resources\":{},\"ter"
    "minationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfN"
    "otPresent\"}],\"containers\":[{\"name\":\"main\",\"image\":\"nvcr.io/nvidia/pytorch:24.01-py3\",\"args\":[\"python"
    "\",\"train.py\"],\"ports\":[{\"name\":\"metrics\",\"containerPort\":9090,\"protocol\":\"TCP\"}],\"env\":[{\"name\":\"NCC"
    "L_DEBUG\",\"value\":\"INFO\"},{\"name\":\"POD_IP\",\"valueFrom\":{\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":\"st"
    "atus.podIP\"}}}],\"resources\":{\"limits\":{\"cpu\":\"8\",\"memory\":\"64Gi\",\"nvidia.com/gpu\":\"1\",\"ephemeral-sto"
    "rage\":\"10Gi\"},\"requests\":{\"cpu\":\"4\",\"memory\":\"32Gi\",\"nvidia.com/gpu\":\"1\",\"ephemeral-storage\":\"5Gi\"}}"
    ",\"volumeMounts\":[{\"name\":\"kube-api-access-x\",\"readOnly\":true,\"mountPath\":\"/var/run/secrets/kubernete"
    "s.io/serviceaccount\"},{\"name\":\"shm\",\"mountPath\":\"/dev/shm\"}],\"livenessProbe\":{\"httpGet\":{\"path\":\"/he"
    "althz\",\"port\":9090,\"scheme\":\"HTTP\"},\"initialDelaySeconds\":30,\"timeoutSeconds\":1,\"periodSeconds\":10,\""
    "successThreshold\":1,\"failureThreshold\":3},\"terminationMessagePath\":\"/dev/termination-log\",\"terminati"
    "onMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNotPresent\",\"securityContext\":{\"allowPrivilegeEscalatio"
    "n\":false,\"capabilities\":{\"drop\":[\"ALL\"]}}}],\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\""
    ":30,\"dnsPolicy\":\"ClusterFirst\",\"serviceAccountName\":\"default\",\"serviceAccount\":\"default\",\"securityCo"
    "ntext\":{\"runAsNonRoot\":true,\"seccompProfile\":{\"type\":\"RuntimeDefault\"}},\"affinity\":{\"nodeAffinity\":{"
    "\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\""
    "nvidia.com/gpu.present\",\"operator\":\"In\",\"values\":[\"true\"]}]}]}},\"podAntiAffinity\":{\"preferredDuringS"
    "chedulingIgnoredDuringExecution\":[{\"weight\":100,\"podAffinityTerm\":{\"labelSelector\":{\"matchLabels\":{\""
    "app\":\"train\"}},\"topologyKey\":\"kubernetes.io/hostname\"}}]}},\"schedulerName\":\"default-scheduler\",\"tole"
    "rations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"toleration"
    "Seconds\":300},{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tole"
    "rationSeconds\":300},{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}],\"priority\":0"
    ",\"enableServiceLinks\":true,\"preemptionPolicy\":\"PreemptLowerPriority\",\"topologySpreadConstraints\":[{\""
    "maxSkew\":1,\"topologyKey\":\"topology.kubernetes.io/zone\",\"whenUnsatisfiable\":\"ScheduleAnyway\",\"labelSe"
    "lector\":{\"matchLabels\":{\"app\":\"train\"}}}]},\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodSch"
    "eduled\",\"status\":\"False\",\"lastProbeTime\":null,\"lastTransitionTime\":\"2026-01-01T00:00:00Z\",\"reason\":\""
    "Unschedulable\",\"message\":\"0/3 nodes are available\"}],\"qosClass\":\"Burstable\"}}";
static const char KUBE_NODE[] =
    "{\"metadata\":{\"name\":\"gpu-node-1\",\"uid\":\"aaaa\",\"resourceVersion\":\"999\",\"creationTimestamp\":\"2026-01-0"
    "1T00:00:00Z\",\"labels\":{\"kubernetes.io/hostname\":\"gpu-node-1\",\"node.kubernetes.io/instance-type\":\"p5."
    "48xlarge\",\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\",\"nvidia.com/gpu.present\":\"true\",\"topology"
    ".kubernetes.io/zone\":\"us-east-1a\"},\"annotations\":{\"node.alpha.kubernetes.io/ttl\":\"0\",\"volumes.kubern"
    "etes.io/controller-managed-attach-detach\":\"true\"}},\"spec\":{\"podCIDR\":\"10.244.1.0/24\",\"podCIDRs\":[\"10"
    ".244.1.0/24\"],\"providerID\":\"aws:///us-east-1a/i-0123\",\"taints\":[{\"key\":\"nvidia.com/gpu\",\"value\":\"pre"
    "sent\",\"effect\":\"NoSchedule\"}]},\"status\":{\"capacity\":{\"cpu\":\"192\",\"ephemeral-storage\":\"3750000000Ki\","
    "\"hugepages-1Gi\":\"0\",\"hugepages-2Mi\":\"0\",\"memory\":\"2097152000Ki\",\"nvidia.com/gpu\":\"8\",\"pods\":\"110\",\"v"
    "pc.amazonaws.com/efa\":\"32\"},\"allocatable\":{\"cpu\":\"191450m\",\"ephemeral-storage\":\"3455000000000\",\"huge"
    "pages-1Gi\":\"0\",\"hugepages-2Mi\":\"0\",\"memory\":\"2090000000Ki\",\"nvidia.com/gpu\":\"8\",\"pods\":\"110\",\"vpc.am"
    "azonaws.com/efa\":\"32\"},\"conditions\":[{\"type\":\"MemoryPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\""
    "2026-01-01T00:00:00Z\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\",\"reason\":\"KubeletHasSufficientMemo"
    "ry\",\"message\":\"ok\"},{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"2026-01-01T00:00:00Z\",\"last"
    "TransitionTime\":\"2026-01-01T00:00:00Z\",\"reason\":\"KubeletReady\",\"message\":\"kubelet is posting ready s"
    "tatus\"}],\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.5\"},{\"type\":\"Hostname\",\"address\":\"gpu-n"
    "ode-1\"}],\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":10250}},\"nodeInfo\":{\"machineID\":\"x\",\"systemUUI"
    "D\":\"y\",\"bootID\":\"z\",\"kernelVersion\":\"6.1\",\"osImage\":\"Ubuntu\",\"containerRuntimeVersion\":\"containerd:/"
    "/1.7\",\"kubeletVersion\":\"v1.30.0\",\"kubeProxyVersion\":\"v1.30.0\",\"operatingSystem\":\"linux\",\"architectur"
    "e\":\"amd64\"},\"images\":[{\"names\":[\"nvcr.io/nvidia/pytorch@sha256:abc\",\"nvcr.io/nvidia/pytorch:24.01-py"
    "3\"],\"sizeBytes\":9000000000}],\"volumesInUse\":[],\"volumesAttached\":[]}}";

static void kube_shaped_objects_are_judged(void **state)
{
    struct env *e = *state;
    size_t len = strlen(KUBE_POD) + strlen(KUBE_NODE) + 64;
    char *body = malloc(len);
    snprintf(body, len, "{\"Pod\":%s,\"Nodes\":{\"items\":[%s]},\"NodeNames\":null}", KUBE_POD, KUBE_NODE);
    int status;
    json_t *doc = call(e, GS_EXT_FILTER, body, &status);
    assert_int_equal(status, 200);
    json_t *items = json_object_get(json_object_get(doc, "Nodes"), "items");
    assert_int_equal(json_array_size(items), 1);
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(items, 0), "metadata"), "name")),
                        "gpu-node-1");
    assert_null(json_object_get(json_array_get(items, 0), "kind")); /* sent back as it came */
    json_decref(doc);
    /* The same pod on a node whose taint it does not tolerate is refused, with the taint named. */
    json_t *n = json_loads(KUBE_NODE, 0, NULL);
    json_object_set_new(json_array_get(json_object_get(json_object_get(n, "spec"), "taints"), 0), "key",
                        json_string("dedicated"));
    char *ns = json_dumps(n, JSON_COMPACT);
    json_decref(n);
    free(body);
    len = strlen(KUBE_POD) + strlen(ns) + 64;
    body = malloc(len);
    snprintf(body, len, "{\"Pod\":%s,\"Nodes\":{\"items\":[%s]}}", KUBE_POD, ns);
    doc = call(e, GS_EXT_FILTER, body, &status);
    assert_int_equal(status, 200);
    const char *why = json_string_value(json_object_get(json_object_get(doc, "FailedAndUnresolvableNodes"), "gpu-node-1"));
    if (!why) why = json_string_value(json_object_get(json_object_get(doc, "FailedNodes"), "gpu-node-1"));
    assert_non_null(why);
    assert_non_null(strstr(why, "dedicated"));
    json_decref(doc);
    free(ns);
    free(body);
}

/*--- Prioritize ---*/

static void prioritize_maps_scores_to_0_10(void **state)
{
    struct env *e = *state;
    put(e, "nodes/busy", node("busy", 2, "64"));
    put(e, "pods/default/hog", pod("hog", "0", "48", 0, "busy", NULL));
    char *p = dump_pod("p", "1", 100), body[4096];
    snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNames\":[\"n1\",\"busy\",\"ghost\"]}", p);
    /* Wait until the hog is accounted, then ask: an answer computed before
     * that would see an idle "busy" node. */
    for (int i = 0; i < 200; i++) {
        struct gs_extender_stats st;
        gs_extender_stats(e->x, &st);
        if (st.pods == 3) break;
        usleep(20000);
    }
    int status;
    json_t *doc = call(e, GS_EXT_PRIORITIZE, body, &status);
    assert_int_equal(status, 200);
    assert_non_null(doc);
    assert_int_equal(json_array_size(doc), 3);
    json_int_t s[3];
    for (int i = 0; i < 3; i++) {
        json_t *h = json_array_get(doc, (size_t)i);
        s[i] = json_integer_value(json_object_get(h, "Score"));
        assert_true(s[i] >= 0 && s[i] <= 10);
    }
    assert_string_equal(json_string_value(json_object_get(json_array_get(doc, 0), "Host")), "n1");
    assert_string_equal(json_string_value(json_object_get(json_array_get(doc, 1), "Host")), "busy");
    assert_int_equal(s[0], 10); /* idle: the highest total of the asked nodes */
    assert_int_equal(s[1], 0);  /* 49 of 64 CPUs taken: the lowest */
    assert_int_equal(s[2], 0);  /* unknown node */
    json_decref(doc);
    free(p);
}

/* A plugin that scores every node alike (TaintToleration at weight 9: no
 * taints, 0 everywhere) must not hide the one that tells the nodes apart:
 * against the highest possible total (1,000) both nodes would round to 1. */
static int setup_fit_and_common_score(void **state)
{
    return start_with(state, "{\"profiles\":[{\"schedulerName\":\"default-scheduler\",\"plugins\":{\"score\":"
                             "{\"disabled\":[{\"name\":\"*\"}],\"enabled\":[{\"name\":\"NodeResourcesFit\"},"
                             "{\"name\":\"TaintToleration\",\"weight\":9}]}}}]}");
}

static void prioritize_maps_the_nodes_own_range(void **state)
{
    struct env *e = *state;
    put(e, "nodes/busy", node("busy", 2, "64"));
    put(e, "pods/default/hog", pod("hog", "0", "48", 0, "busy", NULL));
    for (int i = 0; i < 200; i++) {
        struct gs_extender_stats st;
        gs_extender_stats(e->x, &st);
        if (st.pods == 3) break;
        usleep(20000);
    }
    char *p = dump_pod("q", "1", 100), body[4096];
    snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNames\":[\"busy\",\"n1\"]}", p);
    int status;
    json_t *doc = call(e, GS_EXT_PRIORITIZE, body, &status);
    assert_int_equal(status, 200);
    assert_non_null(doc);
    assert_int_equal(json_array_size(doc), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(doc, 0), "Score")), 0);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(doc, 1), "Score")), 10);
    json_decref(doc);
    /* One node alone is mapped against the highest possible total: the idle
     * one's NodeResourcesFit score (about 99 of 1,000) rounds to 1. */
    snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNames\":[\"n1\"]}", p);
    doc = call(e, GS_EXT_PRIORITIZE, body, &status);
    assert_int_equal(status, 200);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(doc, 0), "Score")), 1);
    json_decref(doc);
    free(p);
}

/*--- Preempt ---*/

static void preempt_picks_victims_per_node(void **state)
{
    struct env *e = *state;
    char *p = dump_pod("p", "1", 100), body[4096];
    snprintf(body, sizeof body,
             "{\"Pod\":%s,\"NodeNameToMetaVictims\":{\"n2\":{\"Pods\":[{\"UID\":\"uid-low\"}],\"NumPDBViolations\":1},"
             "\"n4\":{\"Pods\":[{\"UID\":\"uid-high\"}],\"NumPDBViolations\":0},\"ghost\":{\"Pods\":[]}}}",
             p);
    int status;
    json_t *doc = call(e, GS_EXT_PREEMPT, body, &status);
    assert_int_equal(status, 200);
    json_t *m = json_object_get(doc, "NodeNameToMetaVictims");
    /* n2: the priority-0 pod goes; n4's pod outranks the preemptor; ghost is unknown. */
    assert_int_equal(json_object_size(m), 1);
    json_t *v = json_object_get(m, "n2");
    assert_non_null(v);
    assert_int_equal(json_array_size(json_object_get(v, "Pods")), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(v, "Pods"), 0), "UID")),
                        "uid-low");
    assert_int_equal(json_integer_value(json_object_get(v, "NumPDBViolations")), 1);
    json_decref(doc);
    free(p);
}

/*--- Bind ---*/

static json_t *stored(struct env *e, const char *key)
{
    json_t *o = NULL;
    assert_int_equal(gs_store_get(e->store, key, &o, NULL), 0);
    return o;
}

static void bind_writes_node_and_devices(void **state)
{
    struct env *e = *state;
    int status;
    json_t *doc = call(e, GS_EXT_BIND,
                       "{\"PodName\":\"p\",\"PodNamespace\":\"default\",\"PodUID\":\"uid-p\",\"Node\":\"n1\"}", &status);
    assert_int_equal(status, 200);
    assert_string_equal(json_string_value(json_object_get(doc, "Error")), "");
    json_decref(doc);
    json_t *o = stored(e, "pods/default/p");
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "spec"), "nodeName")), "n1");
    const char *dev = json_string_value(
        json_object_get(json_object_get(json_object_get(o, "metadata"), "annotations"), "gpusched.io/devices"));
    assert_non_null(dev);
    assert_int_equal(strncmp(dev, "GPU-n1-", 7), 0);
    assert_null(strchr(dev, ',')); /* one GPU */
    json_decref(o);
    /* Accounted at once: a pod wanting both GPUs of n1 no longer fits there. */
    char *q = dump_pod("q", "2", 0), body[4096];
    snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNames\":[\"n1\"]}", q);
    doc = call(e, GS_EXT_FILTER, body, &status);
    assert_int_equal(json_array_size(json_object_get(doc, "NodeNames")), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "FailedNodes"), "n1")),
                        "Insufficient nvidia.com/gpu");
    json_decref(doc);
    free(q);
    /* A second binding is refused, and says why. */
    doc = call(e, GS_EXT_BIND, "{\"PodName\":\"p\",\"PodNamespace\":\"default\",\"Node\":\"n3\"}", &status);
    assert_non_null(strstr(json_string_value(json_object_get(doc, "Error")), "already bound to n1"));
    json_decref(doc);
    struct gs_extender_stats st;
    gs_extender_stats(e->x, &st);
    assert_int_equal(st.requests[GS_EXT_BIND], 2);
    assert_int_equal(st.errors[GS_EXT_BIND], 1);
}

static void bind_refusals_say_why(void **state)
{
    struct env *e = *state;
    put(e, "pods/default/r", pod("r", "1", "1", 0, NULL, NULL));
    int status;
    json_t *doc = NULL;
    for (int i = 0; i < 100 && !doc; i++) { /* the source's get sees the new pod at once (local) */
        doc = call(e, GS_EXT_BIND, "{\"PodName\":\"r\",\"PodUID\":\"uid-other\",\"Node\":\"n1\"}", &status);
    }
    assert_non_null(strstr(json_string_value(json_object_get(doc, "Error")), "PodUID uid-other does not match"));
    json_decref(doc);
    doc = call(e, GS_EXT_BIND, "{\"PodName\":\"r\",\"Node\":\"n2\"}", &status);
    const char *msg = json_string_value(json_object_get(doc, "Error"));
    assert_non_null(strstr(msg, "does not fit on n2"));
    assert_non_null(strstr(msg, "Insufficient nvidia.com/gpu"));
    json_decref(doc);
    doc = call(e, GS_EXT_BIND, "{\"PodName\":\"r\",\"Node\":\"nowhere\"}", &status);
    assert_non_null(strstr(json_string_value(json_object_get(doc, "Error")), "node nowhere is not known"));
    json_decref(doc);
    doc = call(e, GS_EXT_BIND, "{\"PodName\":\"gone\",\"Node\":\"n1\"}", &status);
    assert_string_equal(json_string_value(json_object_get(doc, "Error")), "pod default/gone: not found");
    json_decref(doc);
    json_t *o = stored(e, "pods/default/r");
    assert_null(json_object_get(json_object_get(o, "spec"), "nodeName"));
    json_decref(o);
}

/*--- Following the source ---*/

static void follows_deletions(void **state)
{
    struct env *e = *state;
    char *p = dump_pod("p", "1", 100), body[4096];
    snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNames\":[\"n2\"]}", p);
    assert_int_equal(gs_store_delete(e->store, "pods/default/low", 0, NULL, NULL), 0);
    bool freed = false;
    for (int i = 0; i < 250 && !freed; i++) {
        int status;
        json_t *doc = call(e, GS_EXT_FILTER, body, &status);
        freed = json_array_size(json_object_get(doc, "NodeNames")) == 1;
        json_decref(doc);
        if (!freed) usleep(20000);
    }
    assert_true(freed);
    /* A node that goes is unknown again. */
    assert_int_equal(gs_store_delete(e->store, "nodes/n2", 0, NULL, NULL), 0);
    bool gone = false;
    for (int i = 0; i < 250 && !gone; i++) {
        int status;
        json_t *doc = call(e, GS_EXT_FILTER, body, &status);
        gone = json_object_get(json_object_get(doc, "FailedNodes"), "n2") != NULL;
        json_decref(doc);
        if (!gone) usleep(20000);
    }
    assert_true(gone);
    free(p);
}

/*--- HTTP ---*/

/* One HTTP/1.0 exchange on 127.0.0.1:port; returns the whole answer (caller frees). */
static char *http(int port, const char *method, const char *path, const char *body)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     method, path, body ? strlen(body) : 0);
    assert_int_equal(write(fd, head, (size_t)n), n);
    if (body) assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap);
    for (ssize_t r; (r = read(fd, buf + len, cap - len - 1)) > 0;) {
        len += (size_t)r;
        if (len + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    buf[len] = 0;
    close(fd);
    return buf;
}

static void http_routes(void **state)
{
    struct env *e = *state;
    struct gs_extender_http *h = NULL;
    char err[256];
    struct gs_extender_http_opts o = {.listen = "127.0.0.1:0", .max_body = 4096};
    assert_int_equal(gs_extender_http_start(e->x, &o, &h, err, sizeof err), 0);
    int port = gs_extender_http_port(h);
    assert_true(port > 0);
    char *r = http(port, "GET", "/readyz", NULL);
    assert_non_null(strstr(r, " 200 "));
    free(r);
    char *p = dump_pod("p", "1", 100), body[4096];
    snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNames\":[\"n1\",\"n2\"]}", p);
    r = http(port, "POST", "/gpusched/filter", body);
    assert_non_null(strstr(r, " 200 "));
    assert_non_null(strstr(r, "application/json"));
    assert_non_null(strstr(r, "\"NodeNames\":[\"n1\"]"));
    assert_non_null(strstr(r, "\"n2\":\"Insufficient nvidia.com/gpu\""));
    free(r);
    r = http(port, "POST", "/gpusched/filter", "{\"NodeNames\":[]}");
    assert_non_null(strstr(r, " 400 "));
    assert_non_null(strstr(r, "ExtenderArgs.Pod: required"));
    free(r);
    r = http(port, "POST", "/gpusched/sort", "{}");
    assert_non_null(strstr(r, " 404 "));
    free(r);
    char big[5000];
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = 0;
    r = http(port, "POST", "/filter", big);
    assert_non_null(strstr(r, " 413 "));
    free(r);
    r = http(port, "GET", "/metrics", NULL);
    assert_non_null(strstr(r, "gpusched_extender_requests_total{verb=\"filter\"} 2"));
    assert_non_null(strstr(r, "gpusched_extender_errors_total{verb=\"filter\"} 1"));
    assert_non_null(strstr(r, "gpusched_extender_filter_duration_seconds_count"));
    assert_non_null(strstr(r, "gpusched_extender_cache_nodes 4"));
    free(r);
    r = http(port, "GET", "/healthz", NULL);
    assert_non_null(strstr(r, " 200 "));
    free(r);
    gs_extender_http_stop(h);
    free(p);
    /* Bad options are named. */
    o.listen = "nonsense";
    assert_int_equal(gs_extender_http_start(e->x, &o, &h, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "--listen: \"nonsense\""));
    o.listen = "127.0.0.1:0";
    o.tls_cert_file = "/nonexistent/cert.pem";
    assert_int_equal(gs_extender_http_start(e->x, &o, &h, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "--tls-cert-file and --tls-private-key-file go together"));
    o.tls_key_file = "/nonexistent/key.pem";
    assert_int_equal(gs_extender_http_start(e->x, &o, &h, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "--tls-cert-file /nonexistent/cert.pem: cannot be read"));
}

static size_t collect(char *data, size_t size, size_t n, void *arg)
{
    char *buf = arg;
    size_t have = strlen(buf), add = size * n;
    if (have + add < 4096) memcpy(buf + have, data, add), buf[have + add] = 0;
    return add;
}

/* HTTPS with the files of --tls-cert-file / --tls-private-key-file, checked
 * by a client that trusts only their CA. */
static void https_serves_with_the_given_pair(void **state)
{
    struct env *e = *state;
    char tdir[96], cert[128], key[128], ca[128];
    snprintf(tdir, sizeof tdir, "%s/tls", e->dir);
    assert_int_equal(mkdir(tdir, 0700), 0);
    struct gs_tls t = {0};
    assert_int_equal(gs_tls_ensure(tdir, NULL, 0, &t), 0);
    gs_tls_free(&t);
    snprintf(cert, sizeof cert, "%s/server.crt", tdir);
    snprintf(key, sizeof key, "%s/server.key", tdir);
    snprintf(ca, sizeof ca, "%s/ca.crt", tdir);
    struct gs_extender_http *h = NULL;
    char err[256];
    struct gs_extender_http_opts o = {.listen = "127.0.0.1:0", .tls_cert_file = cert, .tls_key_file = key};
    assert_int_equal(gs_extender_http_start(e->x, &o, &h, err, sizeof err), 0);
    char url[96], body[4096] = "";
    snprintf(url, sizeof url, "https://127.0.0.1:%d/sched/filter", gs_extender_http_port(h));
    char *p = dump_pod("p", "1", 100), req[4096];
    snprintf(req, sizeof req, "{\"Pod\":%s,\"NodeNames\":[\"n1\",\"n2\"]}", p);
    CURL *c = curl_easy_init();
    assert_non_null(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    assert_int_equal(code, 200);
    assert_non_null(strstr(body, "\"NodeNames\":[\"n1\"]"));
    curl_easy_cleanup(c);
    gs_extender_http_stop(h);
    free(p);
}

static void unknown_profile_is_refused(void **state)
{
    struct env *e = *state;
    struct gs_extender_opts o = {.source = e->src, .profile = "nope"};
    struct gs_extender *x = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_extender_new(&o, &x, &d), GS_EINVAL);
    assert_null(x);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].msg, "no profile has schedulerName \"nope\"");
    gs_diags_free(&d);
}

/*--- The framework calls the extender adds ---*/

/* schedule_on over nodes picks what a full cycle picks among them, leaves
 * dead or cordoned nodes out, and run_scores totals lie in 0..max with the
 * emptier node ahead under LeastAllocated. */
static void framework_on_given_nodes(void **state)
{
    (void)state;
    struct gs_clock clock;
    gs_clock_init_sim(&clock, GS_NS_PER_SEC);
    struct gs_cache *c = gs_cache_new(&clock);
    assert_int_equal(fx_add_node(c, "a", 8, 64, 0, 0, NULL), 0);
    assert_int_equal(fx_add_node(c, "b", 8, 64, 0, 0, NULL), 1);
    assert_int_equal(fx_add_node(c, "c", 2, 64, 0, 0, NULL), 2);
    struct gs_sched_config cfg = {0};
    assert_int_equal(gs_sched_config_default(&cfg), 0);
    struct gs_handle h = {.clock = &clock, .cache = c, .seed = 7};
    struct gs_framework *fw = NULL;
    assert_int_equal(gs_framework_new(&cfg.profiles[0], &h, &fw, NULL), 0);
    struct gs_pod *hog = fx_pod_ex("hog", 0, 0, 40, 0, NULL, NULL, NULL, NULL), *p = fx_pod("p", 2, 0, NULL);
    struct gs_assignment ha = {.node = 0, .milli = 1000};
    assert_int_equal(gs_cache_add_bound(c, hog, &ha), 0);
    /* Scores: b (idle) ahead of a (40 of 64 CPUs taken). */
    struct gs_node_info *two[2] = {gs_cache_node(c, 0), gs_cache_node(c, 1)};
    int64_t total[2];
    struct gs_status failed;
    assert_int_equal(gs_framework_run_scores(fw, p, two, 2, total, &failed), 0);
    assert_int_equal(failed.code, GS_SUCCESS);
    int64_t max = gs_framework_max_total_score(fw);
    assert_true(max > 0);
    assert_true(total[0] >= 0 && total[0] <= max && total[1] >= 0 && total[1] <= max);
    assert_true(total[1] > total[0]);
    /* The full cycle over every node and schedule_on over the same nodes agree. */
    struct gs_schedule_result full, on;
    assert_int_equal(gs_framework_schedule(fw, p, 0, &full), 0);
    assert_int_equal(full.code, GS_SUCCESS);
    struct gs_assignment fa = full.a;
    gs_framework_reject(fw, "default/p", NULL, "test");
    gs_framework_bind(fw, p);
    gs_schedule_result_free(&full);
    int32_t all[3] = {2, 0, 1}; /* any order: taken in cache order */
    assert_int_equal(gs_framework_schedule_on(fw, p, all, 3, 0, &on), 0);
    assert_int_equal(on.code, GS_SUCCESS);
    assert_int_equal(on.a.node, fa.node);
    assert_int_equal(on.a.gpu_mask, fa.gpu_mask);
    gs_framework_reject(fw, "default/p", NULL, "test");
    gs_framework_bind(fw, p);
    gs_schedule_result_free(&on);
    /* Only a cordoned node: nothing to place on; a dead index is ignored. */
    assert_int_equal(gs_cache_set_schedulable(c, 2, false), 0);
    int32_t cordoned[2] = {2, 99};
    assert_int_equal(gs_framework_schedule_on(fw, p, cordoned, 2, 0, &on), 0);
    assert_int_equal(on.feasible_nodes, 0);
    assert_true(on.code == GS_UNSCHEDULABLE || on.code == GS_UNSCHEDULABLE_AND_UNRESOLVABLE);
    gs_schedule_result_free(&on);
    fx_check_cache(c);
    gs_framework_free(fw);
    gs_cache_remove_pod(c, "default/hog");
    gs_cache_free(c);
    gs_sched_config_free(&cfg);
    fx_pod_free(hog);
    fx_pod_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_errors_name_the_field),
        cmocka_unit_test(parse_reads_keys_as_go_does),
        cmocka_unit_test(framework_on_given_nodes),
        cmocka_unit_test_setup_teardown(bad_request_is_400_with_the_message, setup, teardown),
        cmocka_unit_test_setup_teardown(filter_node_names_with_reasons, setup, teardown),
        cmocka_unit_test_setup_teardown(filter_nodes_mode_judges_nodes_as_sent, setup, teardown),
        cmocka_unit_test_setup_teardown(filter_unschedulable_node_is_unresolvable, setup, teardown),
        cmocka_unit_test_setup_teardown(pods_bound_elsewhere_hold_their_gpus, setup, teardown),
        cmocka_unit_test_setup_teardown(kube_shaped_objects_are_judged, setup, teardown),
        cmocka_unit_test_setup_teardown(prioritize_maps_scores_to_0_10, setup_fit_score, teardown),
        cmocka_unit_test_setup_teardown(prioritize_maps_the_nodes_own_range, setup_fit_and_common_score, teardown),
        cmocka_unit_test_setup_teardown(preempt_picks_victims_per_node, setup, teardown),
        cmocka_unit_test_setup_teardown(bind_writes_node_and_devices, setup, teardown),
        cmocka_unit_test_setup_teardown(bind_refusals_say_why, setup, teardown),
        cmocka_unit_test_setup_teardown(follows_deletions, setup, teardown),
        cmocka_unit_test_setup_teardown(http_routes, setup, teardown),
        cmocka_unit_test_setup_teardown(https_serves_with_the_given_pair, setup, teardown),
        cmocka_unit_test_setup_teardown(unknown_profile_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
