/*
 * test_object.c - the object model: every kind decodes, pods' demand follows
 * Kubernetes' rules, nodes expose their GPUs, in-memory objects get a
 * document, and the shipped examples are valid.
 */
#include "core/codec.h"
#include "core/object.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define GI (1024LL * 1024 * 1024)

/* Decodes one YAML document into an object, failing the test on any problem. */
static struct gs_object *decode_ok(const char *yaml)
{
    struct gs_docs docs;
    struct gs_diags d = {0};
    assert_int_equal(gs_decode_stream(yaml, strlen(yaml), &docs, &d, NULL), 0);
    assert_int_equal(docs.n, 1);
    struct gs_object *o = NULL;
    int rc = gs_object_decode(docs.docs[0], &o, &d);
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, "unexpected: %s: %s\n", d.v[i].path, d.v[i].msg);
    assert_int_equal(rc, 0);
    gs_docs_free(&docs);
    gs_diags_free(&d);
    return o;
}

/* Number of problems a document has (0 = valid). */
static size_t problems(const char *yaml)
{
    struct gs_docs docs;
    struct gs_diags d = {0};
    assert_int_equal(gs_decode_stream(yaml, strlen(yaml), &docs, &d, NULL), 0);
    struct gs_object *o = NULL;
    int rc = gs_object_decode(docs.docs[0], &o, &d);
    size_t n = d.n;
    assert_true(rc == 0 ? n == 0 && o : n > 0 && !o);
    gs_object_free(o);
    gs_docs_free(&docs);
    gs_diags_free(&d);
    return n;
}

static const char *pod_head = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n";

static struct gs_pod *pod_of(struct gs_object *o)
{
    assert_int_equal(o->kind, GS_KIND_POD);
    return o->u.pod;
}

static struct gs_object *pod_yaml(const char *rest)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s%s", pod_head, rest);
    return decode_ok(buf);
}

static void test_kinds_table(void **state)
{
    (void)state;
    assert_int_equal(gs_kind_from_name("Pod"), GS_KIND_POD);
    assert_int_equal(gs_kind_from_name("ClusterPolicy"), GS_KIND_CLUSTERPOLICY);
    assert_int_equal(gs_kind_from_name("Deployment"), GS_KIND_UNKNOWN);
    assert_int_equal(gs_kind_from_name(NULL), GS_KIND_UNKNOWN);
    for (int k = 1; k < GS_KIND_COUNT; k++) assert_int_equal(gs_kind_from_name(gs_kind_name((enum gs_kind)k)), k);
}

static void test_pod_basics(void **state)
{
    (void)state;
    struct gs_object *o = pod_yaml(
        "  labels: {scheduling.x-k8s.io/pod-group: g1, kueue.x-k8s.io/queue-name: lq}\n"
        "spec:\n"
        "  priority: -5\n  priorityClassName: low\n  nodeName: n1\n"
        "  nodeSelector: {disk: ssd}\n"
        "  tolerations: [{operator: Exists}, {key: k, value: v, effect: NoExecute, tolerationSeconds: 30}]\n"
        "  affinity:\n    nodeAffinity:\n"
        "      requiredDuringSchedulingIgnoredDuringExecution:\n"
        "        nodeSelectorTerms:\n"
        "        - matchExpressions: [{key: zone, operator: In, values: [a, b]}]\n"
        "          matchFields: [{key: metadata.name, operator: NotIn, values: [n9]}]\n"
        "        - matchExpressions: [{key: gpus, operator: Gt, values: [\"4\"]}]\n"
        "      preferredDuringSchedulingIgnoredDuringExecution:\n"
        "      - {weight: 20, preference: {matchExpressions: [{key: fast, operator: Exists}]}}\n"
        "  topologySpreadConstraints:\n"
        "  - {maxSkew: 2, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, minDomains: 3,\n"
        "     labelSelector: {matchLabels: {app: x}, matchExpressions: [{key: tier, operator: NotIn, values: [db]}]}}\n"
        "  containers: [{name: c, image: busybox, command: [sh, -c], args: [\"sleep 1\"]}]\n"
        "status: {phase: Running}\n");
    struct gs_pod *p = pod_of(o);
    assert_string_equal(p->meta.namespace_, "default");
    assert_string_equal(p->scheduler_name, GS_DEFAULT_SCHEDULER);
    assert_string_equal(p->pod_group, "g1");
    assert_string_equal(p->queue_name, "lq");
    assert_string_equal(p->node_name, "n1");
    assert_string_equal(p->phase, "Running");
    assert_string_equal(p->priority_class_name, "low");
    assert_int_equal(p->priority, -5);
    assert_string_equal(gs_labels_get(&p->node_selector, "disk"), "ssd");
    assert_int_equal(p->ntolerations, 2);
    assert_int_equal(p->tolerations[0].op, GS_TOL_EXISTS);
    assert_null(p->tolerations[0].key);
    assert_int_equal(p->tolerations[1].effect, GS_EFFECT_NOEXECUTE);
    assert_true(p->tolerations[1].has_seconds);
    assert_int_equal(p->tolerations[1].toleration_seconds, 30);
    assert_true(p->node_affinity.has_required);
    assert_int_equal(p->node_affinity.nrequired, 2);
    assert_int_equal(p->node_affinity.required[0].match_expressions.n, 1);
    assert_int_equal(p->node_affinity.required[0].match_expressions.reqs[0].nvalues, 2);
    assert_int_equal(p->node_affinity.required[0].match_fields.n, 1);
    assert_int_equal(p->node_affinity.required[1].match_expressions.reqs[0].op, GS_SEL_GT);
    assert_int_equal(p->node_affinity.npreferred, 1);
    assert_int_equal(p->node_affinity.preferred[0].weight, 20);
    assert_int_equal(p->nspread, 1);
    assert_int_equal(p->spread[0].max_skew, 2);
    assert_int_equal(p->spread[0].min_domains, 3);
    assert_int_equal(p->spread[0].when_unsatisfiable, GS_DO_NOT_SCHEDULE);
    assert_int_equal(p->spread[0].label_selector.n, 2);
    assert_int_equal(p->ncontainers, 1);
    assert_int_equal(p->containers[0].ncommand, 2);
    assert_string_equal(p->containers[0].args[0], "sleep 1");
    assert_int_equal(p->demand.gpu_count, 0);
    assert_int_equal(p->demand.gpu_milli, 0);
    /* the matcher (labels.c) agrees with what was decoded */
    struct gs_labels nl = {0};
    gs_labels_set(&nl, "zone", "b");
    assert_true(gs_node_affinity_required_matches(&p->node_affinity, &nl, "n1"));
    assert_false(gs_node_affinity_required_matches(&p->node_affinity, &nl, "n9"));
    gs_labels_free(&nl);
    char key[64];
    assert_int_equal(gs_meta_key(&p->meta, key, sizeof key), 0);
    assert_string_equal(key, "default/p");
    assert_int_equal(gs_meta_key(&p->meta, key, 4), GS_ERANGE);
    gs_object_free(o);
}

/* The key is cut and terminated exactly as snprintf("%s/%s") would cut it,
 * for every buffer size, with and without a namespace. */
static void test_meta_key_cut_like_snprintf(void **state)
{
    (void)state;
    struct gs_meta with = {.namespace_ = "team-a", .name = "job-7"}, without = {.name = "node-3"}, empty = {0};
    for (size_t len = 1; len <= 16; len++) {
        char got[16], want[16];
        memset(got, 'x', sizeof got);
        memset(want, 'x', sizeof want);
        int n = snprintf(want, len, "%s/%s", with.namespace_, with.name);
        assert_int_equal(gs_meta_key(&with, got, len), (size_t)n >= len ? GS_ERANGE : 0);
        assert_memory_equal(got, want, sizeof got);
        memset(got, 'x', sizeof got);
        memset(want, 'x', sizeof want);
        n = snprintf(want, len, "%s", without.name);
        assert_int_equal(gs_meta_key(&without, got, len), (size_t)n >= len ? GS_ERANGE : 0);
        assert_memory_equal(got, want, sizeof got);
    }
    char one[1] = {'x'};
    assert_int_equal(gs_meta_key(&empty, one, 1), 0);
    assert_int_equal(one[0], '\0');
    assert_int_equal(gs_meta_key(&empty, one, 0), GS_ERANGE);
}

static void test_demand_containers_and_init(void **state)
{
    (void)state;
    /* sum(containers) = cpu 1.5, mem 3Gi; max(init) = cpu 2, mem 1Gi -> cpu 2, mem 3Gi; overhead adds 100m */
    struct gs_object *o = pod_yaml(
        "spec:\n"
        "  overhead: {cpu: 100m}\n"
        "  initContainers:\n"
        "  - {name: i1, resources: {requests: {cpu: \"2\", memory: 1Gi}}}\n"
        "  - {name: i2, resources: {limits: {cpu: 500m, example.com/fpga: 3}}}\n"
        "  containers:\n"
        "  - {name: a, resources: {requests: {cpu: 500m, memory: 1Gi, ephemeral-storage: 1Gi}}}\n"
        "  - {name: b, resources: {requests: {cpu: 1, memory: 2Gi}, limits: {example.com/fpga: 1}}}\n");
    struct gs_demand *d = &pod_of(o)->demand;
    assert_int_equal(d->cpu_milli, 2100);
    assert_int_equal(d->mem_bytes, 3 * GI);
    assert_int_equal(d->gpu_count, 0);
    assert_int_equal(gs_resources_get(&d->extended, "example.com/fpga"), 3000); /* init max beats the sum */
    assert_int_equal(gs_resources_get(&d->extended, "ephemeral-storage"), GI * 1000);
    assert_int_equal(gs_resources_get(&d->extended, "cpu"), 0);
    gs_object_free(o);
}

static void test_demand_limits_only(void **state)
{
    (void)state;
    struct gs_object *o = pod_yaml("spec:\n  containers:\n"
                                   "  - {name: a, resources: {limits: {cpu: 1, memory: 1.5, nvidia.com/gpu: 4}}}\n"
                                   "  - {name: b, resources: {limits: {cpu: 250m}, requests: {cpu: 100m}}}\n");
    struct gs_demand *d = &pod_of(o)->demand;
    assert_int_equal(d->cpu_milli, 1100);
    assert_int_equal(d->mem_bytes, 2); /* 1.5 bytes rounds up */
    assert_int_equal(d->gpu_count, 4);
    assert_int_equal(d->gpu_milli, 1000);
    assert_int_equal(d->gpu_mem_mib, 0);
    assert_null(d->gpu_models);
    gs_object_free(o);
}

static void test_demand_fractional(void **state)
{
    (void)state;
    struct gs_object *o = pod_yaml("  annotations: {gpusched.io/gpu-milli: \"250\", gpusched.io/gpu-memory: \"8192\",\n"
                                   "                gpusched.io/gpu-model: \"V100M16|V100M32\"}\n"
                                   "spec:\n  containers: [{name: a}]\n");
    struct gs_demand *d = &pod_of(o)->demand;
    assert_int_equal(d->gpu_count, 1);
    assert_int_equal(d->gpu_milli, 250);
    assert_int_equal(d->gpu_mem_mib, 8192);
    assert_int_equal(d->ngpu_models, 2);
    assert_string_equal(d->gpu_models[0], "V100M16");
    assert_string_equal(d->gpu_models[1], "V100M32");
    gs_object_free(o);
    o = pod_yaml("  annotations: {gpusched.io/gpu-milli: \"500\"}\n"
                 "spec:\n  containers: [{name: a, resources: {limits: {nvidia.com/gpu: 2}}}]\n");
    assert_int_equal(pod_of(o)->demand.gpu_count, 2);
    assert_int_equal(pod_of(o)->demand.gpu_milli, 500);
    gs_object_free(o);
}

static void test_demand_kai(void **state)
{
    (void)state;
    struct gs_object *o = pod_yaml("  annotations: {gpu-fraction: \"0.5\"}\nspec:\n  containers: [{name: a}]\n");
    assert_int_equal(pod_of(o)->demand.gpu_count, 1);
    assert_int_equal(pod_of(o)->demand.gpu_milli, 500);
    gs_object_free(o);
    o = pod_yaml("  annotations: {gpu-fraction: \"1\"}\nspec:\n  containers: [{name: a}]\n");
    assert_int_equal(pod_of(o)->demand.gpu_milli, 1000);
    gs_object_free(o);
    /* memory-only share: smallest compute share, the memory decides */
    o = pod_yaml("  annotations: {gpu-memory: \"2000\"}\nspec:\n  containers: [{name: a}]\n");
    assert_int_equal(pod_of(o)->demand.gpu_count, 1);
    assert_int_equal(pod_of(o)->demand.gpu_milli, 1);
    assert_int_equal(pod_of(o)->demand.gpu_mem_mib, 2000);
    gs_object_free(o);
    /* gpusched.io wins over KAI when both are given */
    o = pod_yaml("  annotations: {gpu-fraction: \"0.5\", gpusched.io/gpu-milli: \"300\"}\n"
                 "spec:\n  containers: [{name: a}]\n");
    assert_int_equal(pod_of(o)->demand.gpu_milli, 300);
    gs_object_free(o);
    char buf[512];
    static const char *const bad[] = {"0", "1.5", "-0.5", "0.0001", "half", "500m", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(buf, sizeof buf, "%s  annotations: {gpu-fraction: \"%s\"}\nspec:\n  containers: [{name: a}]\n",
                 pod_head, bad[i]);
        assert_int_equal(problems(buf), 1);
    }
}

static void test_pod_json_numbers(void **state)
{
    (void)state;
    const char *j = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"},"
                    "\"spec\":{\"schedulerName\":\"mine\",\"containers\":[{\"name\":\"a\",\"resources\":{"
                    "\"requests\":{\"cpu\":1.5,\"memory\":1073741824},\"limits\":{\"nvidia.com/gpu\":1}}}]}}";
    json_t *doc;
    struct gs_diags d = {0};
    assert_int_equal(gs_json_decode(j, strlen(j), &doc, &d), 0);
    struct gs_pod p;
    assert_int_equal(gs_pod_decode(doc, &p, &d), 0);
    assert_int_equal(p.demand.cpu_milli, 1500);
    assert_int_equal(p.demand.mem_bytes, GI);
    assert_int_equal(p.demand.gpu_count, 1);
    assert_string_equal(p.scheduler_name, "mine");
    assert_string_equal(p.meta.namespace_, "ns");
    assert_ptr_equal(p.doc, doc);
    gs_pod_clear(&p);
    json_decref(doc);
}

static void test_node(void **state)
{
    (void)state;
    struct gs_object *o = decode_ok(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {nvidia.com/gpu.product: A100}}\n"
        "spec:\n  unschedulable: true\n  taints: [{key: gpu, value: \"yes\", effect: NoSchedule}, {key: x, effect: "
        "PreferNoSchedule}]\n"
        "status:\n  capacity: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 4}\n"
        "  devices:\n"
        "  - {index: 0, uuid: GPU-a, model: A100, memoryMiB: 40960, numaNode: 1, nvlinkPeers: [1, 3]}\n"
        "  - {index: 3, health: Unhealthy, mig: {enabled: true, instances: [{profile: 1g.5gb, uuid: MIG-1}, "
        "{profile: 2g.10gb}]}}\n");
    assert_int_equal(o->kind, GS_KIND_NODE);
    struct gs_node *n = o->u.node;
    assert_null(n->meta.namespace_);
    assert_true(n->unschedulable);
    assert_int_equal(n->ntaints, 2);
    assert_string_equal(n->taints[0].value, "yes");
    assert_null(n->taints[1].value);
    assert_int_equal(n->taints[1].effect, GS_EFFECT_PREFERNOSCHEDULE);
    assert_int_equal(gs_resources_get(&n->allocatable, "cpu"), 64000); /* defaults to capacity */
    assert_int_equal(gs_resources_get(&n->allocatable, "memory"), 512 * GI * 1000);
    assert_int_equal(n->ngpus, 2);
    assert_int_equal(n->gpus[0].memory_mib, 40960);
    assert_int_equal(n->gpus[0].numa_node, 1);
    assert_int_equal(n->gpus[0].nvlink_peers, (1u << 1) | (1u << 3));
    assert_true(n->gpus[0].healthy);
    assert_false(n->gpus[0].mig_enabled);
    assert_int_equal(n->gpus[1].index, 3);
    assert_int_equal(n->gpus[1].numa_node, -1);
    assert_false(n->gpus[1].healthy);
    assert_true(n->gpus[1].mig_enabled);
    assert_int_equal(n->gpus[1].nmig, 2);
    assert_string_equal(n->gpus[1].mig[0].uuid, "MIG-1");
    assert_null(n->gpus[1].mig[1].uuid);
    gs_object_free(o);
}

static void test_in_memory_documents(void **state)
{
    (void)state;
    struct gs_object *o = calloc(1, sizeof *o);
    o->kind = GS_KIND_POD;
    o->u.pod = calloc(1, sizeof *o->u.pod);
    struct gs_pod *p = o->u.pod;
    p->meta.name = strdup("sim-pod-1");
    p->meta.namespace_ = strdup("default");
    gs_labels_set(&p->meta.annotations, GS_ANN_GPU_MILLI, "500");
    p->scheduler_name = strdup(GS_DEFAULT_SCHEDULER);
    p->containers = calloc(1, sizeof *p->containers);
    p->ncontainers = 1;
    gs_resources_set(&p->containers[0].requests, "cpu", 4000);
    gs_resources_set(&p->containers[0].requests, "memory", 2 * GI * 1000);
    gs_resources_set(&p->containers[0].limits, GS_RES_GPU, 1000);
    json_t *doc = gs_object_to_json(o);
    assert_non_null(doc);
    assert_ptr_equal(doc, gs_object_to_json(o)); /* cached */
    struct gs_object *back;
    struct gs_diags d = {0};
    assert_int_equal(gs_object_decode(doc, &back, &d), 0);
    assert_int_equal(back->u.pod->demand.cpu_milli, 4000);
    assert_int_equal(back->u.pod->demand.mem_bytes, 2 * GI);
    assert_int_equal(back->u.pod->demand.gpu_count, 1);
    assert_int_equal(back->u.pod->demand.gpu_milli, 500);
    gs_object_free(back);
    gs_object_free(o);

    o = calloc(1, sizeof *o);
    o->kind = GS_KIND_NODE;
    o->u.node = calloc(1, sizeof *o->u.node);
    struct gs_node *n = o->u.node;
    n->meta.name = strdup("n1");
    gs_resources_set(&n->capacity, GS_RES_GPU, 2000);
    gs_resources_set(&n->allocatable, GS_RES_GPU, 2000);
    n->gpus = calloc(2, sizeof *n->gpus);
    n->ngpus = 2;
    n->gpus[1] = (struct gs_gpu){.index = 1, .memory_mib = 16384, .numa_node = -1, .nvlink_peers = 1, .healthy = true};
    n->gpus[0] = (struct gs_gpu){.index = 0, .numa_node = 0, .nvlink_peers = 2, .healthy = false};
    assert_int_equal(gs_object_decode(gs_object_to_json(o), &back, &d), 0);
    assert_int_equal(back->u.node->ngpus, 2);
    assert_false(back->u.node->gpus[0].healthy);
    assert_int_equal(back->u.node->gpus[1].memory_mib, 16384);
    assert_int_equal(back->u.node->gpus[1].nvlink_peers, 1);
    assert_int_equal(gs_resources_get(&back->u.node->allocatable, GS_RES_GPU), 2000);
    gs_object_free(back);
    gs_object_free(o);
    assert_int_equal(d.n, 0);
}

static void test_podgroup_and_queue(void **state)
{
    (void)state;
    struct gs_object *o = decode_ok("apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
                                    "metadata: {name: g}\nspec: {minMember: 4, scheduleTimeoutSeconds: 30,"
                                    " minResources: {cpu: 8, nvidia.com/gpu: 4}}\n");
    assert_int_equal(o->kind, GS_KIND_PODGROUP);
    assert_int_equal(o->u.podgroup->min_member, 4);
    assert_int_equal(o->u.podgroup->schedule_timeout_seconds, 30);
    assert_int_equal(gs_resources_get(&o->u.podgroup->min_resources, GS_RES_GPU), 4000);
    assert_string_equal(o->u.podgroup->meta.namespace_, "default");
    gs_object_free(o);
    o = decode_ok("apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: v, namespace: t}\n"
                  "spec: {queue: research, priorityClassName: high, minTaskMember: {ps: 1, worker: 2}}\n");
    assert_int_equal(o->u.podgroup->min_member, 1);
    assert_string_equal(o->u.podgroup->queue, "research");
    gs_object_free(o);
    /* scheduler-plugins requires minMember, Volcano defaults it */
    assert_int_equal(problems("apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\n"
                              "spec: {}\n"), 1);
    o = decode_ok("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\n"
                  "spec: {parent: root, weight: 3, priority: 2, capability: {nvidia.com/gpu: 8},"
                  " guarantee: {resource: {nvidia.com/gpu: 2}}}\n");
    assert_int_equal(o->kind, GS_KIND_QUEUE);
    struct gs_queue *q = o->u.queue;
    assert_string_equal(q->parent, "root");
    assert_int_equal(q->weight, 3);
    assert_int_equal(q->priority, 2);
    assert_int_equal(gs_resources_get(&q->limit, GS_RES_GPU), 8000);
    assert_int_equal(gs_resources_get(&q->guarantee, GS_RES_GPU), 2000);
    assert_null(q->meta.namespace_);
    gs_object_free(o);
    o = decode_ok("apiVersion: scheduling.gpusched.io/v1alpha1\nkind: Queue\nmetadata: {name: q}\n"
                  "spec: {guarantee: {cpu: 4}, deserved: {cpu: 6}, limit: {cpu: 10}}\n");
    assert_int_equal(o->u.queue->weight, 1);
    assert_null(o->u.queue->parent);
    assert_int_equal(gs_resources_get(&o->u.queue->guarantee, "cpu"), 6000);
    assert_int_equal(gs_resources_get(&o->u.queue->limit, "cpu"), 10000);
    gs_object_free(o);
    assert_int_equal(problems("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\n"
                              "spec: {weight: 0, capability: {cpu: 1}, deserved: {cpu: 2}}\n"), 2);
}

static void test_generic_kinds(void **state)
{
    (void)state;
    static const char *const good[] = {
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\n"
        "spec: {cohortName: c, resourceGroups: [{coveredResources: [cpu, nvidia.com/gpu], flavors: [{name: f,"
        " resources: [{name: cpu, nominalQuota: 8, lendingLimit: 2}, {name: nvidia.com/gpu, nominalQuota: 4}]}]}]}\n",
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, namespace: a}\n"
        "spec: {clusterQueue: cq}\n",
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n",
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec:\n  devices:\n"
        "    requests:\n    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 2, selectors: [{cel:"
        " {expression: 'device.attributes[\"gpu.nvidia.com\"].productName == \"H200\"'}}]}}\n"
        "    - {name: any, firstAvailable: [{name: big, deviceClassName: g}, {name: small, deviceClassName: g}]}\n"
        "    constraints: [{requests: [gpu], matchAttribute: gpu.nvidia.com/pcieRoot}]\n",
        "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: {name: c}\n"
        "spec: {devices: {requests: [{name: gpu, deviceClassName: gpu.nvidia.com, allocationMode: All}]}}\n",
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.nvidia.com}\n"
        "spec: {selectors: [{cel: {expression: 'device.driver == \"gpu.nvidia.com\"'}}],"
        " config: [{opaque: {driver: gpu.nvidia.com, parameters: {any: thing}}}]}\n",
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\n"
        "spec: {driver: gpu.nvidia.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1},"
        " devices: [{name: gpu-0, attributes: {uuid: {string: GPU-1}, index: {int: 0}},"
        " capacity: {memory: {value: 80Gi}}}]}\n",
        "apiVersion: topology.node.k8s.io/v1alpha2\nkind: NodeResourceTopology\nmetadata: {name: n1}\n"
        "attributes: [{name: topologyManagerPolicy, value: single-numa-node}]\n"
        "zones: [{name: node-0, type: Node, costs: [{name: node-1, value: 20}],"
        " resources: [{name: cpu, capacity: 32, allocatable: 30, available: 10}]}]\n",
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cluster-policy}\n"
        "spec: {driver: {enabled: true}, mig: {strategy: mixed}, dcgmExporter: {enabled: false}, future: {x: 1}}\n",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: x}\nspec: {replicas: 3}\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: b}\n",
    };
    static const enum gs_kind kinds[] = {GS_KIND_CLUSTERQUEUE, GS_KIND_LOCALQUEUE, GS_KIND_RESOURCEFLAVOR,
                                         GS_KIND_RESOURCECLAIM, GS_KIND_RESOURCECLAIM, GS_KIND_DEVICECLASS,
                                         GS_KIND_RESOURCESLICE, GS_KIND_NODERESOURCETOPOLOGY,
                                         GS_KIND_CLUSTERPOLICY, GS_KIND_UNKNOWN, GS_KIND_UNKNOWN};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct gs_object *o = decode_ok(good[i]);
        assert_int_equal(o->kind, kinds[i]);
        assert_non_null(o->u.generic->doc);
        assert_non_null(o->u.generic->meta.name);
        gs_object_free(o);
    }
    struct gs_object *o = decode_ok(good[9]);
    assert_string_equal(o->u.generic->meta.namespace_, "x");
    assert_string_equal(o->kind_name, "Deployment");
    gs_object_free(o);
    o = decode_ok(good[1]);
    assert_string_equal(o->u.generic->meta.namespace_, "a");
    gs_object_free(o);
}

static void test_examples_valid(void **state)
{
    (void)state;
    static const char *const files[] = {"gpu-node.yaml", "whole-gpu-pod.yaml", "fractional-gpu-pod.yaml",
                                        "podgroup-gang.yaml", "queue-tree.yaml", "kueue.yaml"};
    size_t total = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024], *buf;
        size_t len;
        /* __FILE__ is absolute under CMake: examples/ is two levels up from tests/unit/ */
        snprintf(path, sizeof path, "%s", __FILE__);
        char *slash = strrchr(path, '/');
        assert_non_null(slash);
        snprintf(slash, sizeof path - (size_t)(slash - path), "/../../examples/%s", files[i]);
        assert_int_equal(gs_read_file(path, &buf, &len), 0);
        struct gs_docs docs;
        struct gs_diags d = {0};
        assert_int_equal(gs_decode_stream(buf, len, &docs, &d, NULL), 0);
        for (size_t k = 0; k < docs.n; k++) {
            struct gs_object *o;
            int rc = gs_object_decode(docs.docs[k], &o, &d);
            for (size_t j = 0; j < d.n; j++) fprintf(stderr, "%s: %s: %s\n", files[i], d.v[j].path, d.v[j].msg);
            assert_int_equal(rc, 0);
            if (o->kind == GS_KIND_NODE) assert_int_equal(o->u.node->ngpus, 8);
            if (o->kind == GS_KIND_POD && !strcmp(o->u.pod->meta.name, "infer-bert-kai"))
                assert_int_equal(o->u.pod->demand.gpu_milli, 250);
            gs_object_free(o);
            total++;
        }
        gs_docs_free(&docs);
        free(buf);
    }
    assert_int_equal(total, 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds_table),
        cmocka_unit_test(test_pod_basics),
        cmocka_unit_test(test_demand_containers_and_init),
        cmocka_unit_test(test_demand_limits_only),
        cmocka_unit_test(test_demand_fractional),
        cmocka_unit_test(test_demand_kai),
        cmocka_unit_test(test_pod_json_numbers),
        cmocka_unit_test(test_node),
        cmocka_unit_test(test_in_memory_documents),
        cmocka_unit_test(test_meta_key_cut_like_snprintf),
        cmocka_unit_test(test_podgroup_and_queue),
        cmocka_unit_test(test_generic_kinds),
        cmocka_unit_test(test_examples_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
