/*
 * test_hardening.c - what a pod, a node or a network client may not do:
 * the agent endpoint's one accepted shape (and the Node validation naming
 * the annotation), reserved environment variables, securityContext and
 * grace period limits at pod validation (field paths and messages), the
 * per-address bucket of failed authentications, and token files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/netguard.h"
#include "control/secret.h"
#include "core/endpoint.h"
#include "core/error.h"
#include "core/object.h"
#include "core/pod_security.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*--- Agent endpoint ---*/

static void endpoint_accepts_only_scheme_host_port(void **state)
{
    (void)state;
    const char *good[] = {"http://127.0.0.1:10250", "https://gpu-7.example.com:443", "http://[::1]:8080",
                          "http://h:1", "http://h:65535"};
    char why[400];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) assert_int_equal(gs_endpoint_check(good[i], why, sizeof why), 0);
    struct {
        const char *ep, *why;
    } bad[] = {
        {"file:///etc/passwd", "must start with http:// or https://"},
        {"gopher://h:70", "must start with http:// or https://"},
        {"http://127.0.0.1:1/admin#", "must be exactly http(s)://HOST:PORT"},
        {"http://127.0.0.1:1#", "must be exactly http(s)://HOST:PORT"},
        {"http://127.0.0.1:1?x=1", "must be exactly http(s)://HOST:PORT"},
        {"http://127.0.0.1:1/", "must be exactly http(s)://HOST:PORT"},
        {"http://user:pw@h:1", "may not carry user information"},
        {"http://h", "must end with :PORT"},
        {"http://:80", "must name a host"},
        {"http://h:0", "the port must be a number from 1 to 65535"},
        {"http://h:65536", "the port must be a number from 1 to 65535"},
        {"http://h:080", "the port must be a number from 1 to 65535"},
        {"http://h:1x", "must be exactly http(s)://HOST:PORT"},
        {"http://[]:1", "an IPv6 host must be"},
        {"http://-h:1", "may not start with '-' or '.'"},
        {"HTTP://h:1", "must start with http:// or https://"},
        {"", "must start with http:// or https://"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(gs_endpoint_check(bad[i].ep, why, sizeof why), -1);
        if (!strstr(why, bad[i].why)) fail_msg("%s: got \"%s\", want \"%s\"", bad[i].ep, why, bad[i].why);
        char quoted[300];
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[i].ep);
        assert_non_null(strstr(why, quoted)); /* names the value */
    }
}

static void node_validation_names_the_annotation(void **state)
{
    (void)state;
    json_t *doc = json_loads("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n\",\"annotations\":"
                             "{\"gpusched.io/agent-endpoint\":\"http://10.0.0.1:1/x#\"}}}",
                             0, NULL);
    struct gs_node n;
    struct gs_diags d = {0};
    assert_int_equal(gs_node_decode(doc, &n, &d), GS_EINVAL);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, "metadata.annotations[\"gpusched.io/agent-endpoint\"]");
    assert_non_null(strstr(d.v[0].msg, "\"http://10.0.0.1:1/x#\""));
    gs_diags_free(&d);
    json_object_set_new(json_object_get(json_object_get(doc, "metadata"), "annotations"), GS_ANN_AGENT_ENDPOINT,
                        json_string("http://10.0.0.1:10250"));
    assert_int_equal(gs_node_decode(doc, &n, &d), 0);
    gs_node_clear(&n);
    gs_diags_free(&d);
    json_decref(doc);
}

/*--- Pod validation ---*/

/* Decodes a pod whose spec is given; returns the diagnostics (caller frees). */
static struct gs_diags pod_diags(const char *spec)
{
    char text[2048];
    snprintf(text, sizeof text, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":%s}", spec);
    json_t *doc = json_loads(text, 0, NULL);
    assert_non_null(doc);
    struct gs_pod p;
    struct gs_diags d = {0};
    if (gs_pod_decode(doc, &p, &d) == 0) gs_pod_clear(&p);
    json_decref(doc);
    return d;
}

static void expect_one(struct gs_diags *d, const char *path, const char *msg)
{
    if (d->n != 1) fail_msg("want 1 problem at %s, got %zu (first: %s)", path, d->n, d->n ? d->v[0].path : "-");
    assert_string_equal(d->v[0].path, path);
    if (!strstr(d->v[0].msg, msg)) fail_msg("%s: got \"%s\", want \"%s\"", path, d->v[0].msg, msg);
    gs_diags_free(d);
}

static void reserved_env_refused(void **state)
{
    (void)state;
    struct gs_diags d = pod_diags("{\"containers\":[{\"name\":\"a\",\"image\":\"x\"},{\"name\":\"b\",\"image\":\"x\","
                                  "\"env\":[{\"name\":\"FOO\",\"value\":\"1\"},{\"name\":\"NVIDIA_VISIBLE_DEVICES\","
                                  "\"value\":\"all\"}]}]}");
    expect_one(&d, "spec.containers[1].env[1].name", "\"NVIDIA_VISIBLE_DEVICES\" is set by the node agent");
    const char *names[] = {"CUDA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "GPUSCHED_GPU_MILLI", "GPUSCHED_POD_UID",
                           "CUDA_DEVICE_ORDER"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char spec[512];
        snprintf(spec, sizeof spec, "{\"initContainers\":[{\"name\":\"i\",\"image\":\"x\",\"env\":[{\"name\":\"%s\"}]}],"
                                    "\"containers\":[{\"name\":\"a\",\"image\":\"x\"}]}", names[i]);
        d = pod_diags(spec);
        expect_one(&d, "spec.initContainers[0].env[0].name", "a pod may not set it");
    }
    assert_true(gs_pod_env_reserved("NVIDIA_VISIBLE_DEVICES"));
    assert_false(gs_pod_env_reserved("NVIDIA_DRIVER_CAPABILITIES"));
    assert_false(gs_pod_env_reserved("PATH"));
    d = pod_diags("{\"containers\":[{\"name\":\"a\",\"image\":\"x\",\"env\":[{\"name\":\"MY_VISIBLE_DEVICES\"}]}]}");
    assert_int_equal(d.n, 0);
}

static void security_context_checked(void **state)
{
    (void)state;
    struct gs_diags d = pod_diags("{\"securityContext\":{\"runAsNonRoot\":true},\"containers\":[{\"name\":\"a\","
                                  "\"image\":\"x\",\"securityContext\":{\"runAsUser\":0}}]}");
    expect_one(&d, "spec.containers[0].securityContext", "runAsNonRoot: true forbids");
    d = pod_diags("{\"securityContext\":{\"runAsUser\":-1},\"containers\":[{\"name\":\"a\",\"image\":\"x\"}]}");
    expect_one(&d, "spec.securityContext.runAsUser", "");
    d = pod_diags("{\"containers\":[{\"name\":\"a\",\"image\":\"x\",\"securityContext\":{\"runAsGroup\":\"x\"}}]}");
    expect_one(&d, "spec.containers[0].securityContext.runAsGroup", "");
    d = pod_diags("{\"containers\":[{\"name\":\"a\",\"image\":\"x\",\"securityContext\":{\"runAsNonRoot\":1}}]}");
    expect_one(&d, "spec.containers[0].securityContext.runAsNonRoot", "");
    d = pod_diags("{\"securityContext\":{\"runAsUser\":1000,\"runAsNonRoot\":true},\"containers\":[{\"name\":\"a\","
                  "\"image\":\"x\"}]}");
    assert_int_equal(d.n, 0);
    /* The container's fields win over the pod's. */
    json_t *spec = json_loads("{\"securityContext\":{\"runAsUser\":5,\"runAsGroup\":6}}", 0, NULL);
    json_t *ctr = json_loads("{\"securityContext\":{\"runAsUser\":7}}", 0, NULL);
    struct gs_run_as ra;
    gs_pod_run_as(spec, ctr, &ra);
    assert_int_equal(ra.user, 7);
    assert_int_equal(ra.group, 6);
    assert_false(ra.non_root);
    gs_pod_run_as(NULL, NULL, &ra);
    assert_int_equal(ra.user, -1);
    assert_int_equal(ra.group, -1);
    json_decref(spec);
    json_decref(ctr);
}

static void grace_period_bounded(void **state)
{
    (void)state;
    struct gs_diags d = pod_diags("{\"terminationGracePeriodSeconds\":9223372036854775807,\"containers\":[{\"name\":"
                                  "\"a\",\"image\":\"x\"}]}");
    expect_one(&d, "spec.terminationGracePeriodSeconds", "31536000");
    d = pod_diags("{\"terminationGracePeriodSeconds\":31536000,\"containers\":[{\"name\":\"a\",\"image\":\"x\"}]}");
    assert_int_equal(d.n, 0);
}

/*--- Failed authentications per address ---*/

static struct sockaddr_in v4(const char *ip)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, ip, &sa.sin_addr);
    return sa;
}

static void netguard_bucket_per_address(void **state)
{
    (void)state;
    struct gs_netguard *g;
    struct gs_netguard_opts o = {.fail_qps = 2, .fail_burst = 4};
    assert_int_equal(gs_netguard_new(&o, &g), 0);
    struct sockaddr_in a = v4("10.0.0.1"), b = v4("10.0.0.2");
    int64_t t = 1000000000;
    for (int i = 0; i < 4; i++) assert_true(gs_netguard_fail_take(g, (struct sockaddr *)&a, t));
    assert_false(gs_netguard_fail_take(g, (struct sockaddr *)&a, t)); /* burst spent */
    assert_true(gs_netguard_fail_take(g, (struct sockaddr *)&b, t));  /* another address has its own */
    t += 500000000; /* half a second at 2/s: one more */
    assert_true(gs_netguard_fail_take(g, (struct sockaddr *)&a, t));
    assert_false(gs_netguard_fail_take(g, (struct sockaddr *)&a, t));
    t += 100 * 1000000000LL; /* refills up to the burst, not beyond */
    for (int i = 0; i < 4; i++) assert_true(gs_netguard_fail_take(g, (struct sockaddr *)&a, t));
    assert_false(gs_netguard_fail_take(g, (struct sockaddr *)&a, t));
    gs_netguard_free(g);
    /* A rate below one a second still lets one failure through, then one per 1/rate. */
    struct gs_netguard_opts slow = {.fail_qps = 0.2};
    assert_int_equal(gs_netguard_new(&slow, &g), 0);
    assert_true(gs_netguard_fail_take(g, (struct sockaddr *)&a, t));
    assert_false(gs_netguard_fail_take(g, (struct sockaddr *)&a, t + 4 * 1000000000LL));
    assert_true(gs_netguard_fail_take(g, (struct sockaddr *)&a, t + 5 * 1000000000LL + 1));
    /* Many addresses: the table reuses slots and never refuses a newcomer's first try. */
    for (int i = 0; i < 20000; i++) {
        char ip[32];
        snprintf(ip, sizeof ip, "172.16.%d.%d", (i >> 8) & 255, i & 255);
        struct sockaddr_in x = v4(ip);
        assert_true(gs_netguard_fail_take(g, (struct sockaddr *)&x, t));
    }
    char text[64];
    gs_netguard_addr_text((struct sockaddr *)&a, text, sizeof text);
    assert_string_equal(text, "10.0.0.1");
    gs_netguard_free(g);
    struct gs_netguard_opts off = {.fail_qps = -1};
    assert_int_equal(gs_netguard_new(&off, &g), 0);
    for (int i = 0; i < 1000; i++) assert_true(gs_netguard_fail_take(g, (struct sockaddr *)&a, t));
    gs_netguard_free(g);
}

/*--- Token files ---*/

static void secret_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs-secret-XXXXXX", path[128], buf[128], again[128];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/agent.token", dir);
    assert_int_equal(gs_secret_read(path, buf, sizeof buf), GS_ENOENT);
    assert_int_equal(gs_secret_ensure(path, buf, sizeof buf), 0);
    assert_int_equal(strlen(buf), 48);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(gs_secret_ensure(path, again, sizeof again), 0); /* kept, not replaced */
    assert_string_equal(buf, again);
    assert_true(gs_secret_equal(buf, again));
    again[47] ^= 1;
    assert_false(gs_secret_equal(buf, again));
    assert_false(gs_secret_equal(buf, "short"));
    assert_false(gs_secret_equal("", ""));
    FILE *f = fopen(path, "w");
    fputs("has space\n", f);
    fclose(f);
    assert_int_equal(gs_secret_read(path, buf, sizeof buf), GS_EPARSE);
    f = fopen(path, "w");
    fclose(f);
    assert_int_equal(gs_secret_read(path, buf, sizeof buf), GS_EPARSE);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(endpoint_accepts_only_scheme_host_port), cmocka_unit_test(node_validation_names_the_annotation),
        cmocka_unit_test(reserved_env_refused),  cmocka_unit_test(security_context_checked),
        cmocka_unit_test(grace_period_bounded),  cmocka_unit_test(netguard_bucket_per_address),
        cmocka_unit_test(secret_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
