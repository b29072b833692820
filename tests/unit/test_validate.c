/*
 * test_validate.c - the exact messages `gpusched validate` prints for bad
 * manifests (field path and wording are a user-facing contract), and the
 * command itself run in-process: output format, exit codes, directories.
 */
#include "cli/commands.h"
#include "core/codec.h"
#include "core/object.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

/* Input document(s) and every problem expected, "path: message\n" each, in order. */
static const struct {
    const char *input;
    const char *want;
} cases[] = {
    {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources:\n      limits: {nvidia.com/gpu: two}\n",
     "spec.containers[0].resources.limits[\"nvidia.com/gpu\"]: invalid quantity \"two\": no digits in number\n"},
    {"apiVersion: v1\nkind: Pdo\nmetadata: {name: p}\n",
     "kind: unknown kind \"Pdo\" for apiVersion \"v1\"\n"},
    {"apiVersion: v2\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n",
     "apiVersion: unknown apiVersion \"v2\" for kind \"Pod\" (expected \"v1\")\n"},
    {"apiVersion: v1\nkind: Pod\nmetadata: {namespace: Bad.NS}\nspec: {containers: [{name: c}]}\n",
     "metadata.name: is required\n" "metadata.namespace: invalid namespace \"Bad.NS\": must consist of lower case alphanumeric characters or '-'\n"},
    {"apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: 3}}\nspec: {containers: [{name: 7}]}\n",
     "metadata.labels.app: expected a string, got number\n" "spec.containers[0].name: expected a string, got number\n"},
    {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: -1, memory: \"-2Gi\"}}}]}\n",
     "spec.containers[0].resources.requests.cpu: invalid quantity \"-1\": must not be negative\n" "spec.containers[0].resources.requests.memory: invalid quantity \"-2Gi\": must not be negative\n"},
    {"apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {gpusched.io/gpu-milli: \"1500\", gpusched.io/gpu-memory: \"lots\"}}\nspec: {containers: [{name: c}]}\n",
     "metadata.annotations[\"gpusched.io/gpu-milli\"]: invalid value \"1500\": must be an integer from 1 to 1000\n" "metadata.annotations[\"gpusched.io/gpu-memory\"]: invalid value \"lots\": must be a positive integer number of MiB\n"},
    {"apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {gpu-fraction: \"1.5\"}}\nspec: {containers: [{name: c}]}\n",
     "metadata.annotations.gpu-fraction: invalid value \"1.5\": must be a decimal fraction in (0, 1] with at most 3 decimals\n"},
    {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2, cpu: 1}}}, {name: d, resources: {requests: {cpu: 2}, limits: {cpu: 1, example.com/x: 0.5}}}]}\n",
     "spec.containers[0].resources.requests[\"nvidia.com/gpu\"]: request \"1\" must equal the limit \"2\" for extended resource nvidia.com/gpu\n" "spec.containers[1].resources.limits[\"example.com/x\"]: invalid quantity \"0.5\": extended resource example.com/x must be a whole number\n" "spec.containers[1].resources.requests.cpu: request \"2\" must be less than or equal to the limit \"1\"\n"},
    {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}], tolerations: [{key: k, operator: Maybe, effect: Sometimes}], priority: 1.5}\n",
     "spec.priority: expected an integer, got 1.5\n" "spec.tolerations[0].operator: invalid value \"Maybe\": must be one of \"Equal\", \"Exists\"\n" "spec.tolerations[0].effect: invalid effect \"Sometimes\": must be NoSchedule, PreferNoSchedule or NoExecute\n"},
    {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}], topologySpreadConstraints: [{maxSkew: 0, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}]}\n",
     "spec.topologySpreadConstraints[0].maxSkew: invalid value 0: must be at least 1\n" "spec.topologySpreadConstraints[0].topologyKey: is required\n" "spec.topologySpreadConstraints[0].minDomains: can only be set when whenUnsatisfiable is DoNotSchedule\n"},
    {"apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: {taints: [{key: k}], unschedulable: \"yes\"}\nstatus: {capacity: {cpu: 1x}, devices: [{uuid: GPU-1}, {index: 64}]}\n",
     "spec.unschedulable: expected a boolean, got string\n" "spec.taints[0].effect: is required\n" "status.capacity.cpu: invalid quantity \"1x\": unexpected character after number\n" "status.devices[0].index: is required\n" "status.devices[1].index: invalid value 64: must be from 0 to 63\n"},
    {"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec: {queueingStrategy: LIFO, resourceGroups: [{coveredResources: [cpu, memory], flavors: [{name: f, resources: [{name: memory, nominalQuota: 1Gi, borrowingLimit: 1}, {name: cpu}]}]}]}\n",
     "spec.resourceGroups[0].flavors[0].resources[0].name: resource \"memory\" must be \"cpu\": each flavor lists coveredResources in order\n" "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: must not be set when the ClusterQueue has no cohort\n" "spec.resourceGroups[0].flavors[0].resources[1].name: resource \"cpu\" must be \"memory\": each flavor lists coveredResources in order\n" "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: is required\n" "spec.queueingStrategy: invalid value \"LIFO\": must be one of \"BestEffortFIFO\", \"StrictFIFO\"\n"},
    {"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: Bad_Name, exactly: {count: 0}, firstAvailable: []}], constraints: [{}]}}\n",
     "spec.devices.requests[0].name: invalid name \"Bad_Name\": must consist of lower case alphanumeric characters or '-'\n" "spec.devices.requests[0]: exactly one of exactly or firstAvailable must be set, got both\n" "spec.devices.requests[0].exactly.deviceClassName: is required\n" "spec.devices.requests[0].exactly.count: invalid value 0: must be at least 1\n" "spec.devices.requests[0].firstAvailable: must have at least one subrequest\n" "spec.devices.constraints[0]: exactly one of matchAttribute or distinctAttribute must be set, got neither\n"},
    {"apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\nspec: {devices: [{name: d, attributes: {a: {int: 1, string: x}}, capacity: {m: {}}}, {name: d}]}\n",
     "spec.driver: is required\n" "spec.pool: is required\n" "spec: exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection must be set, got 0\n" "spec.devices[0].attributes.a: exactly one of int, bool, string or version must be set, got 2\n" "spec.devices[0].capacity.m.value: is required\n" "spec.devices[1].name: duplicate device name \"d\" (also at index 0)\n"},
    /* resource.k8s.io: limits, exactly-one-of, qualified names, enums, references */
    {"apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: gpu.nvidia.com, nodeName: n1, allNodes: true, pool: {name: n1, resourceSliceCount: 0}, devices: [{name: gpu-0, attributes: {Bad.Name: {string: x}, driverVersion: {version: \"535.104.05\"}}, taints: [{key: gpu.nvidia.com/unhealthy, effect: Sometimes}]}], sharedCounters: [{name: gpu-0-counter-set, counters: {}}]}\n",
     "spec.pool.resourceSliceCount: invalid value 0: must be at least 1\n" "spec: exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection must be set, got 2\n" "spec.devices[0].attributes[\"Bad.Name\"]: invalid name \"Bad.Name\": the name must consist of alphanumeric characters or '_' (a C identifier)\n" "spec.devices[0].attributes.driverVersion.version: \"535.104.05\": must be a semantic version (MAJOR.MINOR.PATCH, no leading zeros)\n" "spec.devices[0].taints[0].effect: invalid value \"Sometimes\": must be one of \"None\", \"NoSchedule\", \"NoExecute\"\n" "spec.sharedCounters[0].counters: is required and must not be empty\n" "spec.sharedCounters: a slice has either devices or sharedCounters, not both\n"},
    {"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, allocationMode: Some, tolerations: [{key: a, operator: Exists, value: x, effect: PreferNoSchedule}]}}, {name: gpu, firstAvailable: [{name: a, deviceClassName: x, adminAccess: true}, {name: a, deviceClassName: y}]}], constraints: [{requests: [gpu, nope], matchAttribute: numaNode}], config: [{requests: [gpu/a, zz], opaque: {driver: gpu.nvidia.com}}]}}\n",
     "spec.devices.requests[0].exactly.allocationMode: invalid value \"Some\": must be one of \"ExactCount\", \"All\"\n" "spec.devices.requests[0].exactly.tolerations[0].value: must be empty when operator is Exists\n" "spec.devices.requests[0].exactly.tolerations[0].effect: invalid value \"PreferNoSchedule\": must be one of \"NoSchedule\", \"NoExecute\"\n" "spec.devices.requests[1].firstAvailable[0].adminAccess: is not allowed in a subrequest\n" "spec.devices.requests[1].firstAvailable[1].name: duplicate subrequest name \"a\" (also at index 0)\n" "spec.devices.requests[1].name: duplicate request name \"gpu\" (also at index 0)\n" "spec.devices.constraints[0].requests[1]: \"nope\": not the name of a request (or \"<request>/<subrequest>\") of this claim\n" "spec.devices.constraints[0].matchAttribute: invalid name \"numaNode\": must include a domain (\"<domain>/<name>\")\n" "spec.devices.config[0].opaque.parameters: is required\n" "spec.devices.config[0].requests[1]: \"zz\": not the name of a request (or \"<request>/<subrequest>\") of this claim\n"},
    {"apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {name: t}\nspec: {deviceSelector: {driver: gpu.nvidia.com, device: GPU_0}, taint: {key: maintenance, effect: NoEvict}}\n",
     "spec.deviceSelector.device: invalid name \"GPU_0\": must consist of lower case alphanumeric characters or '-'\n" "spec.taint.effect: invalid value \"NoEvict\": must be one of \"None\", \"NoSchedule\", \"NoExecute\"\n"},
    {"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: t}\nspec: {selectors: [{cel: {expression: 'device.driver == '}}, {cel: {expression: 'device.driver == \"gpu.nvidia.com\"'}}, {cel: {expression: '1 + 2'}}]}\n",
     "spec.selectors[0].cel.expression: compilation failed at column 18: Syntax error: mismatched input 'end of expression' expecting an operand\n" "spec.selectors[2].cel.expression: compilation failed at column 1: expression must evaluate to bool, not 'int'\n"},
    {"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: t}\nspec: {extendedResourceName: gpu}\n",
     "spec.extendedResourceName: invalid value \"gpu\": must be \"<domain>/<name>\", like nvidia.com/gpu\n"},
    {"apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t}\nspec: {spec: {devices: {requests: [{name: g}]}}}\n",
     "spec.spec.devices.requests[0]: exactly one of exactly or firstAvailable must be set, got neither\n"},
    {"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {}\nstatus: {allocation: {devices: {results: [{request: gpu, driver: gpu.nvidia.com, pool: n1}]}}, reservedFor: [{resource: pods, name: p}]}\n",
     "status.allocation.devices.results[0].device: is required\n" "status.reservedFor[0].uid: is required\n"},
    {"apiVersion: topology.node.k8s.io/v1alpha2\nkind: NodeResourceTopology\nmetadata: {name: n}\ntopologyPolicies: [Sometimes]\n",
     "zones: is required\n" "topologyPolicies[0]: unknown topology policy \"Sometimes\"\n"},
    {"apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cp}\nspec: {driver: {enabled: \"true\"}, mig: {strategy: all}}\n",
     "spec.driver.enabled: expected a boolean, got string\n" "spec.mig.strategy: invalid value \"all\": must be one of \"none\", \"single\", \"mixed\"\n"},
    {"[1, \"x\"]",
     "expected an object, got number\n" "expected an object, got string\n"},
    {"a: 1\nb: [\n",
     "line 3 column 1: did not find expected node content while parsing a flow node\n"},
};

/* Runs the decoders like validate does and renders the problems. */
static char *render(const char *input)
{
    struct gs_docs docs;
    struct gs_diags d = {0};
    int rc = gs_decode_stream(input, strlen(input), &docs, &d, NULL);
    for (size_t k = 0; rc == 0 && k < docs.n; k++) {
        struct gs_object *o;
        if (gs_object_decode(docs.docs[k], &o, &d) == 0) gs_object_free(o);
    }
    if (rc == 0) gs_docs_free(&docs);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    for (size_t i = 0; i < d.n; i++)
        fprintf(f, "%s%s%s\n", d.v[i].path, d.v[i].path[0] ? ": " : "", d.v[i].msg);
    fclose(f);
    gs_diags_free(&d);
    return out;
}

static void test_messages(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = render(cases[i].input);
        if (strcmp(got, cases[i].want)) fprintf(stderr, "case %zu:\n%s", i, got);
        assert_string_equal(got, cases[i].want);
        free(got);
    }
}

/* Runs gs_cmd_validate with stdout and stderr sent to files; returns its exit code. */
static int run_validate(char **out, char **err, int argc, ...)
{
    char *argv[16] = {"validate"};
    va_list ap;
    va_start(ap, argc);
    for (int i = 1; i < argc && i < 15; i++) argv[i] = va_arg(ap, char *);
    va_end(ap);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    FILE *fo = tmpfile(), *fe = tmpfile();
    dup2(fileno(fo), 1);
    dup2(fileno(fe), 2);
    int rc = gs_cmd_validate(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    FILE *fs[2] = {fo, fe};
    char **dst[2] = {out, err};
    for (int k = 0; k < 2; k++) {
        long n = ftell(fs[k]);
        rewind(fs[k]);
        *dst[k] = calloc(1, (size_t)n + 1);
        assert_int_equal(fread(*dst[k], 1, (size_t)n, fs[k]), (size_t)n);
        fclose(fs[k]);
    }
    return rc;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_command(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs_validate_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char a[256], b[256], c[256], skip[256];
    snprintf(a, sizeof a, "%s/a.yaml", dir);
    snprintf(b, sizeof b, "%s/b.json", dir);
    snprintf(c, sizeof c, "%s/c.yml", dir);
    snprintf(skip, sizeof skip, "%s/notes.txt", dir);
    write_file(a, "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\n"
                  "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
                  "    resources: {limits: {nvidia.com/gpu: two}}\n");
    write_file(b, "[{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"n2\"}}]");
    write_file(c, "a: [1,\n");
    write_file(skip, "not: [a manifest");
    char *out, *err;
    int rc = run_validate(&out, &err, 3, "-f", dir);
    assert_int_equal(rc, 1);
    char want[1024];
    snprintf(want, sizeof want,
             "%s:2: spec.containers[0].resources.limits[\"nvidia.com/gpu\"]: invalid quantity \"two\": no digits in number\n"
             "%s:1: line 2 column 1: did not find expected node content while parsing a flow node\n", a, c);
    assert_string_equal(out, want);
    assert_string_equal(err, "validate: 3 files, 4 documents, 2 invalid\n");
    free(out);
    free(err);

    rc = run_validate(&out, &err, 6, "-f", b, "--output=json", "--filename", b);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "\"kind\": \"List\""));
    assert_non_null(strstr(out, "\"n2\""));
    free(out);
    free(err);

    rc = run_validate(&out, &err, 1);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "no input"));
    free(out);
    free(err);
    rc = run_validate(&out, &err, 2, "--bogus");
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "unknown option \"--bogus\""));
    free(out);
    free(err);
    rc = run_validate(&out, &err, 3, "-f", "/nonexistent/x.yaml");
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "cannot read /nonexistent/x.yaml"));
    free(out);
    free(err);
    rc = run_validate(&out, &err, 2, "--help");
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "usage: gpusched validate"));
    free(out);
    free(err);
    unlink(a);
    unlink(b);
    unlink(c);
    unlink(skip);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_command),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
