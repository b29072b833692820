/*
 * test_dra_decode.c - decoding ResourceSlice, DeviceClass, ResourceClaim,
 * ResourceClaimTemplate and DeviceTaintRule (core/dra.h).
 *
 * Good documents in the v1 and v1beta1 shapes must decode to the same C
 * shape; a table of bad documents must give exactly the expected message at
 * exactly the expected field path; and the allocation status must be the JSON
 * Kubernetes writes.
 */
#include "core/dra.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static json_t *J(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j) fail_msg("bad test JSON at %d: %s: %s", e.position, e.text, text);
    return j;
}

static const struct gs_cel_attr *find_attr(const struct gs_cel_attr *a, size_t n, const char *dom, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(a[i].domain, dom) && !strcmp(a[i].name, name)) return &a[i];
    return NULL;
}

#define SLICE_V1                                                                                                    \
    "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":\"n1-gpu\"},"        \
    "\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"n1\",\"pool\":{\"name\":\"n1\",\"generation\":3,"      \
    "\"resourceSliceCount\":1},\"devices\":[{\"name\":\"gpu-0\",\"attributes\":{\"type\":{\"string\":\"gpu\"},"    \
    "\"productName\":{\"string\":\"NVIDIA H100\"},\"cudaComputeCapability\":{\"version\":\"9.0.0\"},"              \
    "\"resource.kubernetes.io/numaNode\":{\"int\":1},\"nvlinkDomain\":{\"int\":0},\"mig\":{\"bool\":false}},"     \
    "\"capacity\":{\"memory\":{\"value\":\"80Gi\"}},\"taints\":[{\"key\":\"gpu.nvidia.com/unhealthy\","          \
    "\"effect\":\"NoSchedule\",\"timeAdded\":\"2026-01-02T03:04:05Z\"}],\"allowMultipleAllocations\":true}]}}"

static void check_slice(const struct gs_dra_slice *s)
{
    assert_string_equal(s->name, "n1-gpu");
    assert_string_equal(s->driver, "gpu.nvidia.com");
    assert_string_equal(s->pool, "n1");
    assert_string_equal(s->node_name, "n1");
    assert_int_equal(s->generation, 3);
    assert_int_equal(s->slice_count, 1);
    assert_int_equal(s->ndevices, 1);
    const struct gs_dra_device *d = &s->devices[0];
    assert_string_equal(d->name, "gpu-0");
    assert_int_equal(d->nattrs, 6);
    const struct gs_cel_attr *a = find_attr(d->attrs, d->nattrs, "gpu.nvidia.com", "productName");
    assert_non_null(a);
    assert_int_equal(a->kind, GS_CEL_STRING);
    assert_string_equal(a->s, "NVIDIA H100");
    a = find_attr(d->attrs, d->nattrs, "gpu.nvidia.com", "cudaComputeCapability");
    assert_non_null(a);
    assert_int_equal(a->kind, GS_CEL_VERSION);
    assert_string_equal(a->s, "9.0.0");
    a = find_attr(d->attrs, d->nattrs, "resource.kubernetes.io", "numaNode");
    assert_non_null(a);
    assert_int_equal(a->kind, GS_CEL_INT);
    assert_int_equal(a->i, 1);
    a = find_attr(d->attrs, d->nattrs, "gpu.nvidia.com", "mig");
    assert_non_null(a);
    assert_int_equal(a->kind, GS_CEL_BOOL);
    assert_false(a->b);
    assert_int_equal(d->ncapacity, 1);
    assert_string_equal(d->capacity[0].domain, "gpu.nvidia.com");
    assert_int_equal(d->capacity[0].kind, GS_CEL_QUANTITY);
    assert_true(d->capacity[0].q_milli == (int64_t)80 * 1024 * 1024 * 1024 * 1000);
    assert_int_equal(d->ntaints, 1);
    assert_string_equal(d->taints[0].key, "gpu.nvidia.com/unhealthy");
    assert_int_equal(d->taints[0].effect, GS_DRA_EFFECT_NO_SCHEDULE);
    assert_int_equal(d->taints[0].time_added_s, 1767323045);
    assert_true(d->allow_multiple_allocations);
}

static void test_slice_v1(void **state)
{
    (void)state;
    json_t *j = J(SLICE_V1);
    struct gs_diags d = {0};
    struct gs_dra_slice s;
    assert_int_equal(gs_dra_slice_decode(j, &s, &d), 0);
    assert_int_equal(d.n, 0);
    check_slice(&s);
    struct gs_dra_slice c;
    assert_int_equal(gs_dra_slice_copy(&c, &s), 0);
    gs_dra_slice_free(&s);
    check_slice(&c); /* the copy owns everything */
    gs_dra_slice_free(&c);
    json_decref(j);
}

static void test_slice_v1beta1(void **state)
{
    (void)state;
    json_t *j = J("{\"apiVersion\":\"resource.k8s.io/v1beta1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":"
                  "\"n1-gpu\"},\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"n1\",\"pool\":{\"name\":\"n1\","
                  "\"generation\":3,\"resourceSliceCount\":1},\"devices\":[{\"name\":\"gpu-0\",\"basic\":{"
                  "\"attributes\":{\"type\":{\"string\":\"gpu\"},\"productName\":{\"string\":\"NVIDIA H100\"},"
                  "\"cudaComputeCapability\":{\"version\":\"9.0.0\"},\"resource.kubernetes.io/numaNode\":{\"int\":1},"
                  "\"nvlinkDomain\":{\"int\":0},\"mig\":{\"bool\":false}},\"capacity\":{\"memory\":{\"value\":"
                  "\"80Gi\"}},\"taints\":[{\"key\":\"gpu.nvidia.com/unhealthy\",\"effect\":\"NoSchedule\","
                  "\"timeAdded\":\"2026-01-02T04:04:05+01:00\"}],\"allowMultipleAllocations\":true}}]}}");
    struct gs_diags d = {0};
    struct gs_dra_slice s;
    assert_int_equal(gs_dra_slice_decode(j, &s, &d), 0);
    check_slice(&s);
    gs_dra_slice_free(&s);
    json_decref(j);
}

static void test_slice_counters(void **state)
{
    (void)state;
    json_t *j = J("{\"metadata\":{\"name\":\"c\"},\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"n1\","
                  "\"pool\":{\"name\":\"n1\",\"resourceSliceCount\":2},\"sharedCounters\":[{\"name\":\"gpu-0-cs\","
                  "\"counters\":{\"memory\":{\"value\":\"80Gi\"},\"slices\":{\"value\":7}}}]}}");
    struct gs_diags d = {0};
    struct gs_dra_slice s;
    assert_int_equal(gs_dra_slice_decode(j, &s, &d), 0);
    assert_int_equal(s.ncounters, 1);
    assert_string_equal(s.counters[0].name, "gpu-0-cs");
    assert_int_equal(s.counters[0].n, 2);
    assert_string_equal(s.counters[0].names[1], "slices");
    assert_int_equal(s.counters[0].values_milli[1], 7000);
    assert_int_equal(s.ndevices, 0);
    gs_dra_slice_free(&s);
    json_decref(j);
    j = J("{\"metadata\":{\"name\":\"d\"},\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"n1\",\"pool\":{"
          "\"name\":\"n1\",\"resourceSliceCount\":2},\"devices\":[{\"name\":\"gpu-0-mig-1g\",\"consumesCounters\":[{"
          "\"counterSet\":\"gpu-0-cs\",\"counters\":{\"slices\":{\"value\":1}}}]}]}}");
    assert_int_equal(gs_dra_slice_decode(j, &s, &d), 0);
    assert_int_equal(s.devices[0].nconsumes, 1);
    assert_string_equal(s.devices[0].consumes[0].counter_set, "gpu-0-cs");
    assert_string_equal(s.devices[0].consumes[0].names[0], "slices");
    assert_int_equal(s.devices[0].consumes[0].values_milli[0], 1000);
    gs_dra_slice_free(&s);
    json_decref(j);
}

static void test_class(void **state)
{
    (void)state;
    json_t *j = J("{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":{\"name\":"
                  "\"gpu.nvidia.com\"},\"spec\":{\"selectors\":[{\"cel\":{\"expression\":\"device.driver == "
                  "\\\"gpu.nvidia.com\\\"\"}}],\"config\":[{\"opaque\":{\"driver\":\"gpu.nvidia.com\",\"parameters\":"
                  "{\"sharing\":\"none\"}}}],\"extendedResourceName\":\"nvidia.com/gpu\"}}");
    struct gs_diags d = {0};
    struct gs_dra_class c;
    assert_int_equal(gs_dra_class_decode(j, &c, &d), 0);
    assert_string_equal(c.name, "gpu.nvidia.com");
    assert_int_equal(c.nselectors, 1);
    assert_non_null(c.selectors[0].prog);
    assert_string_equal(c.selectors[0].expr, "device.driver == \"gpu.nvidia.com\"");
    assert_string_equal(c.extended_resource, "nvidia.com/gpu");
    assert_int_equal(json_array_size(c.config), 1);
    gs_dra_class_free(&c);
    json_decref(j);
}

#define CLAIM_STATUS                                                                                                \
    ",\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":\"gpu.nvidia.com\","   \
    "\"pool\":\"n1\",\"device\":\"gpu-3\"}]},\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":" \
    "\"metadata.name\",\"operator\":\"In\",\"values\":[\"n1\"]}]}]}},\"reservedFor\":[{\"resource\":\"pods\","     \
    "\"name\":\"p\",\"uid\":\"pod-uid\"}]}"

static void check_claim(const struct gs_dra_claim *c)
{
    assert_string_equal(c->ns, "team");
    assert_string_equal(c->name, "c1");
    assert_string_equal(c->uid, "u1");
    assert_int_equal(c->spec.nrequests, 2);
    const struct gs_dra_request *r = &c->spec.requests[0];
    assert_string_equal(r->name, "gpu");
    assert_false(r->first_available);
    assert_int_equal(r->nalts, 1);
    assert_string_equal(r->alts[0].name, "gpu");
    assert_string_equal(r->alts[0].class_name, "gpu.nvidia.com");
    assert_int_equal(r->alts[0].count, 2);
    assert_false(r->alts[0].all);
    assert_int_equal(r->alts[0].nselectors, 1);
    assert_int_equal(r->alts[0].ntolerations, 1);
    assert_string_equal(r->alts[0].tolerations[0].key, "gpu.nvidia.com/unhealthy");
    assert_string_equal(r->alts[0].tolerations[0].op, "Exists");
    assert_int_equal(r->alts[0].tolerations[0].effect, -1);
    r = &c->spec.requests[1];
    assert_true(r->first_available);
    assert_int_equal(r->nalts, 2);
    assert_string_equal(r->alts[0].name, "big");
    assert_true(r->alts[1].all);
    assert_int_equal(c->spec.nconstraints, 1);
    assert_string_equal(c->spec.constraints[0].match_attr, "gpu.nvidia.com/nvlinkDomain");
    assert_null(c->spec.constraints[0].distinct_attr);
    assert_true(c->allocated);
    assert_int_equal(c->nresults, 1);
    assert_string_equal(c->results[0].device, "gpu-3");
    assert_string_equal(c->alloc_node, "n1");
    assert_int_equal(c->nreserved, 1);
    assert_string_equal(c->reserved[0].uid, "pod-uid");
}

static void test_claim_v1_and_v1beta1(void **state)
{
    (void)state;
    json_t *v1 = J("{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"c1\","
                   "\"namespace\":\"team\",\"uid\":\"u1\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\","
                   "\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":2,\"selectors\":[{\"cel\":{"
                   "\"expression\":\"device.attributes[\\\"gpu.nvidia.com\\\"].type == \\\"gpu\\\"\"}}],"
                   "\"tolerations\":[{\"key\":\"gpu.nvidia.com/unhealthy\",\"operator\":\"Exists\"}]}},{\"name\":"
                   "\"alt\",\"firstAvailable\":[{\"name\":\"big\",\"deviceClassName\":\"gpu.nvidia.com\"},{\"name\":"
                   "\"rest\",\"deviceClassName\":\"gpu.nvidia.com\",\"allocationMode\":\"All\"}]}],\"constraints\":[{"
                   "\"requests\":[\"gpu\",\"alt/big\"],\"matchAttribute\":\"gpu.nvidia.com/nvlinkDomain\"}]}}"
                   CLAIM_STATUS "}");
    json_t *b1 = J("{\"apiVersion\":\"resource.k8s.io/v1beta1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":"
                   "\"c1\",\"namespace\":\"team\",\"uid\":\"u1\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":"
                   "\"gpu\",\"deviceClassName\":\"gpu.nvidia.com\",\"count\":2,\"selectors\":[{\"cel\":{"
                   "\"expression\":\"device.attributes[\\\"gpu.nvidia.com\\\"].type == \\\"gpu\\\"\"}}],"
                   "\"tolerations\":[{\"key\":\"gpu.nvidia.com/unhealthy\",\"operator\":\"Exists\"}]},{\"name\":"
                   "\"alt\",\"firstAvailable\":[{\"name\":\"big\",\"deviceClassName\":\"gpu.nvidia.com\"},{\"name\":"
                   "\"rest\",\"deviceClassName\":\"gpu.nvidia.com\",\"allocationMode\":\"All\"}]}],\"constraints\":[{"
                   "\"requests\":[\"gpu\",\"alt/big\"],\"matchAttribute\":\"gpu.nvidia.com/nvlinkDomain\"}]}}"
                   CLAIM_STATUS "}");
    struct gs_diags d = {0};
    struct gs_dra_claim c;
    assert_int_equal(gs_dra_claim_decode(v1, &c, &d), 0);
    check_claim(&c);
    gs_dra_claim_free(&c);
    assert_int_equal(gs_dra_claim_decode(b1, &c, &d), 0);
    check_claim(&c);
    gs_dra_claim_free(&c);
    assert_int_equal(d.n, 0);
    json_decref(v1);
    json_decref(b1);
}

static void test_template_and_rule(void **state)
{
    (void)state;
    json_t *t = J("{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaimTemplate\",\"metadata\":{\"name\":"
                  "\"one-gpu\"},\"spec\":{\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{"
                  "\"deviceClassName\":\"gpu.nvidia.com\"}}]}}}}");
    struct gs_diags d = {0};
    struct gs_dra_claim_spec s;
    assert_int_equal(gs_dra_template_decode(t, &s, &d), 0);
    assert_int_equal(s.nrequests, 1);
    assert_int_equal(s.requests[0].alts[0].count, 1);
    gs_dra_claim_spec_free(&s);
    json_decref(t);
    json_t *r = J("{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceTaintRule\",\"metadata\":{\"name\":"
                  "\"maint\"},\"spec\":{\"deviceSelector\":{\"driver\":\"gpu.nvidia.com\",\"pool\":\"n1\"},"
                  "\"taint\":{\"key\":\"maintenance\",\"value\":\"soon\",\"effect\":\"NoExecute\"}}}");
    struct gs_dra_taint_rule tr;
    assert_int_equal(gs_dra_taint_rule_decode(r, &tr, &d), 0);
    assert_string_equal(tr.name, "maint");
    assert_string_equal(tr.driver, "gpu.nvidia.com");
    assert_string_equal(tr.pool, "n1");
    assert_null(tr.device);
    assert_string_equal(tr.taint.key, "maintenance");
    assert_string_equal(tr.taint.value, "soon");
    assert_int_equal(tr.taint.effect, GS_DRA_EFFECT_NO_EXECUTE);
    gs_dra_taint_rule_free(&tr);
    json_decref(r);
}

/*--- Bad documents: exact messages ---*/

enum kind { K_SLICE, K_CLASS, K_CLAIM, K_RULE, K_TEMPLATE };

struct bad {
    enum kind kind;
    const char *doc;
    int rc;
    const char *path, *msg; /* the first problem reported */
};

#define SL(spec) "{\"metadata\":{\"name\":\"s\"},\"spec\":" spec "}"
#define SLD(devs) SL("{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"n\",\"pool\":{\"name\":\"n\",\"resourceSliceCount\":1},\"devices\":" devs "}")
#define CL(devices) "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"devices\":" devices "}}"
#define CLR(req) CL("{\"requests\":[" req "]}")

static const struct bad bads[] = {
    {K_SLICE, "[]", GS_EINVAL, "", "expected an object, got array"},
    {K_SLICE, "{\"metadata\":{},\"spec\":{}}", GS_EINVAL, "metadata.name", "is required"},
    {K_SLICE, SL("{\"nodeName\":\"n\",\"pool\":{\"name\":\"n\",\"resourceSliceCount\":1}}"), GS_EINVAL, "spec.driver",
     "is required"},
    {K_SLICE, SL("{\"driver\":\"Bad_Driver\",\"nodeName\":\"n\",\"pool\":{\"name\":\"n\",\"resourceSliceCount\":1}}"),
     GS_EINVAL, "spec.driver", NULL},
    {K_SLICE, SL("{\"driver\":\"d.io\",\"nodeName\":\"n\",\"pool\":{\"name\":\"n\"}}"), GS_EINVAL,
     "spec.pool.resourceSliceCount", "is required"},
    {K_SLICE, SL("{\"driver\":\"d.io\",\"nodeName\":\"n\",\"pool\":{\"name\":\"n\",\"resourceSliceCount\":0}}"),
     GS_EINVAL, "spec.pool.resourceSliceCount", "invalid value 0: must be at least 1"},
    {K_SLICE, SL("{\"driver\":\"d.io\",\"nodeName\":\"n\",\"pool\":{\"name\":\"n\",\"generation\":-1,\"resourceSliceCount\":1}}"),
     GS_EINVAL, "spec.pool.generation", "invalid value -1: must be at least 0"},
    {K_SLICE, SL("{\"driver\":\"d.io\",\"pool\":{\"name\":\"n\",\"resourceSliceCount\":1}}"), GS_EINVAL, "spec",
     "exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection must be set"},
    {K_SLICE, SL("{\"driver\":\"d.io\",\"nodeName\":\"n\",\"allNodes\":true,\"pool\":{\"name\":\"n\",\"resourceSliceCount\":1}}"),
     GS_EINVAL, "spec", "exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection must be set"},
    {K_SLICE, SL("{\"driver\":\"d.io\",\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\"}]}]},\"pool\":{\"name\":\"n\",\"resourceSliceCount\":1}}"),
     GS_EINVAL, "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions",
     "node labels are not supported by the scheduler here; use matchFields on metadata.name"},
    {K_SLICE, SLD("[{\"name\":\"Gpu_0\"}]"), GS_EINVAL, "spec.devices[0].name", NULL},
    {K_SLICE, SLD("[{\"name\":\"g\"},{\"name\":\"g\"}]"), GS_EINVAL, "spec.devices[1].name",
     "duplicate device name \"g\""},
    {K_SLICE, SLD("[{\"name\":\"g\",\"attributes\":{\"a\":{}}}]"), GS_EINVAL, "spec.devices[0].attributes.a",
     "exactly one of int, bool, string or version must be set, got none"},
    {K_SLICE, SLD("[{\"name\":\"g\",\"attributes\":{\"a\":{\"int\":1,\"string\":\"x\"}}}]"), GS_EINVAL,
     "spec.devices[0].attributes.a", "exactly one of int, bool, string or version must be set, got 2"},
    {K_SLICE, SLD("[{\"name\":\"g\",\"attributes\":{\"a\":{\"int\":\"1\"}}}]"), GS_EINVAL,
     "spec.devices[0].attributes.a.int", "expected an integer, got string"},
    {K_SLICE, SLD("[{\"name\":\"g\",\"attributes\":{\"a\":{\"strings\":[\"x\"]}}}]"), GS_EINVAL,
     "spec.devices[0].attributes.a.strings", "list attributes are not supported by the scheduler"},
    {K_SLICE, SLD("[{\"name\":\"g\",\"attributes\":{\"9bad\":{\"int\":1}}}]"), GS_EINVAL,
     "spec.devices[0].attributes.9bad", "invalid name \"9bad\": \"9bad\" must be a C identifier of at most 32 characters"},
    {K_SLICE, SLD("[{\"name\":\"g\",\"attributes\":{\"/x\":{\"int\":1}}}]"), GS_EINVAL,
     "spec.devices[0].attributes[\"/x\"]", "invalid name \"/x\": the domain must be 1 to 63 characters"},
    {K_SLICE, SLD("[{\"name\":\"g\",\"capacity\":{\"memory\":{\"value\":\"80GB\"}}}]"), GS_EINVAL,
     "spec.devices[0].capacity.memory.value", NULL},
    {K_SLICE, SLD("[{\"name\":\"g\",\"capacity\":{\"memory\":{}}}]"), GS_EINVAL, "spec.devices[0].capacity.memory.value",
     "is required"},
    {K_SLICE, SLD("[{\"name\":\"g\",\"taints\":[{\"key\":\"k\"}]}]"), GS_EINVAL, "spec.devices[0].taints[0].effect",
     "is required"},
    {K_SLICE, SLD("[{\"name\":\"g\",\"taints\":[{\"key\":\"k\",\"effect\":\"PreferNoSchedule\"}]}]"), GS_EINVAL,
     "spec.devices[0].taints[0].effect",
     "invalid value \"PreferNoSchedule\": must be one of \"None\", \"NoSchedule\", \"NoExecute\""},
    {K_SLICE, SLD("[{\"name\":\"g\",\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\",\"timeAdded\":\"yesterday\"}]}]"),
     GS_EINVAL, "spec.devices[0].taints[0].timeAdded", "invalid value \"yesterday\": must be an RFC 3339 time"},
    {K_SLICE, SLD("[{\"name\":\"g\",\"consumesCounters\":[{\"counters\":{\"c\":{\"value\":1}}}]}]"), GS_EINVAL,
     "spec.devices[0].consumesCounters[0].counterSet", "is required"},
    {K_SLICE, SLD("[{\"name\":\"g\",\"nodeName\":\"n\"}]"), GS_EINVAL, "spec.devices[0]",
     "nodeName, nodeSelector and allNodes may be set on a device only with perDeviceNodeSelection"},
    {K_SLICE, SL("{\"driver\":\"d.io\",\"nodeName\":\"n\",\"pool\":{\"name\":\"n\",\"resourceSliceCount\":1},\"sharedCounters\":[{\"name\":\"cs\",\"counters\":{\"c\":{\"value\":-1}}}]}"),
     GS_EINVAL, "spec.sharedCounters[0].counters.c.value", "invalid quantity -1000m: must not be negative"},
    {K_SLICE, "{\"apiVersion\":\"resource.k8s.io/v2\",\"metadata\":{\"name\":\"s\"},\"spec\":{\"driver\":\"d.io\",\"nodeName\":\"n\",\"pool\":{\"name\":\"n\",\"resourceSliceCount\":1}}}",
     GS_EINVAL, "apiVersion",
     "invalid value \"resource.k8s.io/v2\": ResourceSlice is served as resource.k8s.io/v1, v1beta2 or v1beta1"},
    {K_CLASS, "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"selectors\":[{\"cel\":{\"expression\":\"device.driver ==\"}}]}}",
     GS_EPARSE, "spec.selectors[0].cel.expression", NULL},
    {K_CLASS, "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"selectors\":[{}]}}", GS_EINVAL, "spec.selectors[0].cel",
     "is required"},
    {K_CLASS, "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"config\":[{\"opaque\":{\"driver\":\"d.io\"}}]}}", GS_EINVAL,
     "spec.config[0].opaque.parameters", "is required"},
    {K_CLASS, "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"extendedResourceName\":\"gpu\"}}", GS_EINVAL,
     "spec.extendedResourceName", "invalid value \"gpu\": must be <domain>/<name>"},
    {K_CLAIM, CLR("{\"name\":\"r\"}"), GS_EINVAL, "spec.devices.requests[0]",
     "exactly one of exactly or firstAvailable must be set"},
    {K_CLAIM, CLR("{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"c\",\"count\":-1}}"), GS_EINVAL,
     "spec.devices.requests[0].exactly.count", "invalid value -1: must be at least 1"},
    {K_CLAIM, CLR("{\"name\":\"r\",\"exactly\":{\"count\":1}}"), GS_EINVAL,
     "spec.devices.requests[0].exactly.deviceClassName", "is required"},
    {K_CLAIM, CLR("{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"c\",\"allocationMode\":\"Some\"}}"), GS_EINVAL,
     "spec.devices.requests[0].exactly.allocationMode", "invalid value \"Some\": must be one of \"ExactCount\", \"All\""},
    {K_CLAIM, CLR("{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"c\",\"allocationMode\":\"All\",\"count\":2}}"),
     GS_EINVAL, "spec.devices.requests[0].exactly.count", "must not be set when allocationMode is All"},
    {K_CLAIM, CLR("{\"name\":\"r\",\"firstAvailable\":[{\"name\":\"a\",\"deviceClassName\":\"c\",\"adminAccess\":true}]}"),
     GS_EINVAL, "spec.devices.requests[0].firstAvailable[0].adminAccess", "is not allowed in a subrequest"},
    {K_CLAIM, CLR("{\"name\":\"r\",\"firstAvailable\":[]}"), GS_EINVAL, "spec.devices.requests[0].firstAvailable",
     "must have at least one item"},
    {K_CLAIM, CLR("{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"c\"}},{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"c\"}}"),
     GS_EINVAL, "spec.devices.requests[1].name", "duplicate request \"r\""},
    {K_CLAIM, CLR("{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"c\",\"tolerations\":[{\"key\":\"k\",\"operator\":\"Exists\",\"value\":\"v\"}]}}"),
     GS_EINVAL, "spec.devices.requests[0].exactly.tolerations[0].value",
     "invalid value \"v\": must be empty when operator is Exists"},
    {K_CLAIM, CLR("{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"c\",\"capacity\":{\"requests\":{\"memory\":\"1Gi\"}}}}"),
     GS_EINVAL, "spec.devices.requests[0].exactly.capacity",
     "consumable capacity requests are not supported by the scheduler"},
    {K_CLAIM, CL("{\"requests\":[{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"c\"}}],\"constraints\":[{\"requests\":[\"x\"],\"matchAttribute\":\"d.io/a\"}]}"),
     GS_EINVAL, "spec.devices.constraints[0].requests[0]", "invalid value \"x\": no such request in this claim"},
    {K_CLAIM, CL("{\"requests\":[{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"c\"}}],\"constraints\":[{\"matchAttribute\":\"a\"}]}"),
     GS_EINVAL, "spec.devices.constraints[0].matchAttribute",
     "invalid name \"a\": must be fully qualified (<domain>/<name>)"},
    {K_CLAIM, CL("{\"requests\":[{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"c\"}}],\"constraints\":[{\"matchAttribute\":\"d.io/a\",\"distinctAttribute\":\"d.io/b\"}]}"),
     GS_EINVAL, "spec.devices.constraints[0]", "exactly one of matchAttribute or distinctAttribute must be set"},
    {K_CLAIM, CL("{\"requests\":[{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"c\"}}],\"config\":[{\"requests\":[\"q\"],\"opaque\":{\"driver\":\"d.io\",\"parameters\":{}}}]}"),
     GS_EINVAL, "spec.devices.config[0].requests[0]", "invalid value \"q\": no such request in this claim"},
    {K_CLAIM, "{\"metadata\":{\"name\":\"c\"},\"spec\":{},\"status\":{\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"p\",\"uid\":\"u\"}]}}",
     GS_EINVAL, "status.reservedFor", "must be empty while the claim is not allocated"},
    {K_CLAIM, "{\"metadata\":{\"name\":\"c\"},\"spec\":{},\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"r\",\"driver\":\"d.io\",\"pool\":\"p\"}]}}}}",
     GS_EINVAL, "status.allocation.devices.results[0].device", "is required"},
    {K_CLAIM, "{\"metadata\":{\"name\":\"c\"},\"spec\":{},\"status\":{\"allocation\":{\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"a\",\"b\"]}]}]}}}}",
     GS_EINVAL, "status.allocation.nodeSelector",
     "must name exactly one node (matchFields metadata.name In [node]), got 2"},
    {K_RULE, "{\"metadata\":{\"name\":\"r\"},\"spec\":{\"deviceSelector\":{\"driver\":\"d.io\"}}}", GS_EINVAL,
     "spec.taint", "is required"},
    {K_RULE, "{\"metadata\":{\"name\":\"r\"},\"spec\":{\"taint\":{\"key\":\"k\",\"effect\":\"Evict\"}}}", GS_EINVAL,
     "spec.taint.effect", "invalid value \"Evict\": must be one of \"None\", \"NoSchedule\", \"NoExecute\""},
    {K_RULE, "{\"metadata\":{\"name\":\"r\"},\"spec\":{\"deviceSelector\":{\"deviceClassName\":\"c\"},\"taint\":{\"key\":\"k\",\"effect\":\"NoSchedule\"}}}",
     GS_EINVAL, "spec.deviceSelector.deviceClassName", "is not supported (removed in resource.k8s.io/v1beta2)"},
    {K_TEMPLATE, "{\"metadata\":{\"name\":\"t\"},\"spec\":{\"spec\":{\"devices\":{\"requests\":[{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"c\",\"count\":0}}]}}}}",
     GS_EINVAL, "spec.spec.devices.requests[0].exactly.count", "invalid value 0: must be at least 1"},
};

static void test_bad_documents(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bads / sizeof *bads; i++) {
        const struct bad *b = &bads[i];
        json_t *j = J(b->doc);
        struct gs_diags d = {0};
        int rc = 0;
        switch (b->kind) {
        case K_SLICE: {
            struct gs_dra_slice s;
            rc = gs_dra_slice_decode(j, &s, &d);
            assert_null(s.devices); /* left empty on failure */
            break;
        }
        case K_CLASS: {
            struct gs_dra_class c;
            rc = gs_dra_class_decode(j, &c, &d);
            break;
        }
        case K_CLAIM: {
            struct gs_dra_claim c;
            rc = gs_dra_claim_decode(j, &c, &d);
            break;
        }
        case K_RULE: {
            struct gs_dra_taint_rule r;
            rc = gs_dra_taint_rule_decode(j, &r, &d);
            break;
        }
        case K_TEMPLATE: {
            struct gs_dra_claim_spec s;
            rc = gs_dra_template_decode(j, &s, &d);
            break;
        }
        }
        if (rc != b->rc || !d.n) fail_msg("case %zu: rc %d (want %d), %zu problems", i, rc, b->rc, d.n);
        if (strcmp(d.v[0].path, b->path) || (b->msg && strcmp(d.v[0].msg, b->msg)))
            fail_msg("case %zu: got %s: %s\nwant %s: %s", i, d.v[0].path, d.v[0].msg, b->path,
                     b->msg ? b->msg : "(any)");
        if (!*d.v[0].msg) fail_msg("case %zu: empty message", i);
        gs_diags_free(&d);
        json_decref(j);
    }
}

/* Every problem of a document is reported, not only the first. */
static void test_all_problems_reported(void **state)
{
    (void)state;
    json_t *j = J(CLR("{\"name\":\"r\",\"exactly\":{\"count\":0}},{\"name\":\"Q\",\"exactly\":{\"deviceClassName\":\"c\"}}"));
    struct gs_diags d = {0};
    struct gs_dra_claim c;
    assert_int_equal(gs_dra_claim_decode(j, &c, &d), GS_EINVAL);
    assert_int_equal(d.n, 3);
    assert_string_equal(d.v[0].path, "spec.devices.requests[0].exactly.deviceClassName");
    assert_string_equal(d.v[1].path, "spec.devices.requests[0].exactly.count");
    assert_string_equal(d.v[2].path, "spec.devices.requests[1].name");
    gs_diags_free(&d);
    json_decref(j);
}

/*--- Allocation status ---*/

static void test_allocation_json(void **state)
{
    (void)state;
    json_t *cj = J("{\"metadata\":{\"name\":\"c\",\"uid\":\"u\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":"
                   "\"gpu\",\"firstAvailable\":[{\"name\":\"h100\",\"deviceClassName\":\"gpu.nvidia.com\"},{\"name\":"
                   "\"any\",\"deviceClassName\":\"gpu.nvidia.com\",\"tolerations\":[{\"key\":\"k\",\"operator\":"
                   "\"Equal\",\"value\":\"v\",\"effect\":\"NoSchedule\"}]}]}],\"config\":[{\"requests\":[\"gpu\"],"
                   "\"opaque\":{\"driver\":\"gpu.nvidia.com\",\"parameters\":{\"claim\":1}}}]}}}");
    json_t *kj = J("{\"metadata\":{\"name\":\"gpu.nvidia.com\"},\"spec\":{\"config\":[{\"opaque\":{\"driver\":"
                   "\"gpu.nvidia.com\",\"parameters\":{\"class\":1}}}]}}");
    struct gs_diags d = {0};
    struct gs_dra_claim c;
    struct gs_dra_class k;
    assert_int_equal(gs_dra_claim_decode(cj, &c, &d), 0);
    assert_int_equal(gs_dra_class_decode(kj, &k, &d), 0);
    struct gs_dra_result r = {.request = "gpu/any", .driver = "gpu.nvidia.com", .pool = "n1", .device = "gpu-1"};
    const struct gs_dra_class *ks[] = {&k};
    json_t *st = gs_dra_allocation_json(&c, &r, 1, ks, 1, "n1", 1767323045);
    assert_non_null(st);
    json_t *want = J("{\"devices\":{\"results\":[{\"request\":\"gpu/any\",\"driver\":\"gpu.nvidia.com\",\"pool\":"
                     "\"n1\",\"device\":\"gpu-1\",\"tolerations\":[{\"key\":\"k\",\"operator\":\"Equal\",\"value\":"
                     "\"v\",\"effect\":\"NoSchedule\"}]}],\"config\":[{\"source\":\"FromClass\",\"requests\":["
                     "\"gpu/any\"],\"opaque\":{\"driver\":\"gpu.nvidia.com\",\"parameters\":{\"class\":1}}},{"
                     "\"source\":\"FromClaim\",\"requests\":[\"gpu\"],\"opaque\":{\"driver\":\"gpu.nvidia.com\","
                     "\"parameters\":{\"claim\":1}}}]},\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{"
                     "\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"n1\"]}]}]},\"allocationTimestamp\":"
                     "\"2026-01-02T03:04:05Z\"}");
    if (!json_equal(st, want)) {
        char *got = json_dumps(st, JSON_SORT_KEYS);
        fail_msg("allocation status: %s", got);
    }
    /* What it wrote decodes back as the same allocation. */
    json_t *back = json_deep_copy(cj);
    json_object_set_new(back, "status", json_pack("{s:O}", "allocation", st));
    struct gs_dra_claim c2;
    assert_int_equal(gs_dra_claim_decode(back, &c2, &d), 0);
    assert_true(c2.allocated);
    assert_string_equal(c2.alloc_node, "n1");
    assert_int_equal(c2.nresults, 1);
    assert_string_equal(c2.results[0].request, "gpu/any");
    gs_dra_claim_free(&c2);
    json_decref(back);
    json_decref(want);
    json_decref(st);
    gs_dra_claim_free(&c);
    gs_dra_class_free(&k);
    json_decref(cj);
    json_decref(kj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slice_v1),
        cmocka_unit_test(test_slice_v1beta1),
        cmocka_unit_test(test_slice_counters),
        cmocka_unit_test(test_class),
        cmocka_unit_test(test_claim_v1_and_v1beta1),
        cmocka_unit_test(test_template_and_rule),
        cmocka_unit_test(test_bad_documents),
        cmocka_unit_test(test_all_problems_reported),
        cmocka_unit_test(test_allocation_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
