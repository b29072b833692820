/*
 * test_draplugin.c - the DRA plugin (src/node/draplugin/): CDI names, the
 * device table from ResourceSlices, which devices of a claim are prepared
 * and the errors for the rest, the per-claim CDI spec, the checkpoint and
 * its errors, the message codecs, CDI edits into an environment, and the
 * whole plugin over its sockets driven by the kubelet side, including a
 * restart between Prepare and Unprepare.
 */
#include "node/draplugin/draplugin.h"
#include "node/draplugin/msgs.h"

#include "core/error.h"
#include "dra/pluginregistration/v1/api.pb-c.h"
#include "node/deviceplugin/rpc.h"

#include <jansson.h>
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

#define NODE "node-a"

static json_t *slices(void)
{
    return json_loads("[{\"metadata\":{\"name\":\"node-a-gpu.nvidia.com-0\"},\"spec\":{\"driver\":\"gpu.nvidia.com\","
                      "\"devices\":["
                      "{\"name\":\"gpu-0\",\"attributes\":{\"type\":{\"string\":\"gpu\"},\"uuid\":{\"string\":\"GPU-a\"}}},"
                      "{\"name\":\"gpu-1\",\"attributes\":{\"gpu.nvidia.com/type\":{\"string\":\"gpu\"},"
                      "\"gpu.nvidia.com/uuid\":{\"string\":\"GPU-b\"}}},"
                      "{\"name\":\"gpu-1-mig-1g.10gb-19-0\",\"attributes\":{\"type\":{\"string\":\"mig\"},"
                      "\"uuid\":{\"string\":\"MIG-c\"},\"parentUUID\":{\"string\":\"GPU-b\"}}}]}}]",
                      0, NULL);
}

static int minor_of(void *ud, const char *uuid)
{
    (void)ud;
    return !strcmp(uuid, "GPU-a") ? 0 : !strcmp(uuid, "GPU-b") ? 4 : -1;
}

static void table(struct gs_drap_table *t)
{
    json_t *s = slices();
    char err[256] = "";
    assert_int_equal(gs_drap_table_from_slices(s, minor_of, NULL, t, err, sizeof err), 0);
    json_decref(s);
}

static void names(void **state)
{
    (void)state;
    char buf[512];
    gs_drap_cdi_path("/var/run/cdi", "u-1", buf, sizeof buf);
    assert_string_equal(buf, "/var/run/cdi/k8s.gpu.nvidia.com-claim_u-1.json");
    gs_drap_cdi_id("u-1", "gpu-3", buf, sizeof buf);
    assert_string_equal(buf, "k8s.gpu.nvidia.com/claim=u-1-gpu-3");
}

static void device_table(void **state)
{
    (void)state;
    static struct gs_drap_table t;
    table(&t);
    assert_int_equal(t.n, 3);
    assert_string_equal(t.d[1].uuid, "GPU-b");
    assert_int_equal(t.d[1].minor, 4);
    assert_true(t.d[2].mig);
    assert_int_equal(t.d[2].minor, 4); /* the parent's device node */
    assert_non_null(gs_drap_table_find(&t, "gpu-1-mig-1g.10gb-19-0"));
    assert_null(gs_drap_table_find(&t, "gpu-9"));
}

static void device_table_errors(void **state)
{
    (void)state;
    static struct gs_drap_table t;
    char err[256];
    struct {
        const char *json, *want;
    } cases[] = {
        {"[{\"metadata\":{\"name\":\"s\"},\"spec\":{\"devices\":[{\"name\":\"gpu-0\"}]}}]",
         "ResourceSlice s: device gpu-0: attribute uuid: missing"},
        {"[{\"metadata\":{\"name\":\"s\"},\"spec\":{\"devices\":[{\"attributes\":{}}]}}]",
         "ResourceSlice s: spec.devices[0].name: missing"},
        {"[{\"metadata\":{\"name\":\"s\"},\"spec\":{\"devices\":[{\"name\":\"m\",\"attributes\":{\"type\":{\"string\":"
         "\"mig\"},\"uuid\":{\"string\":\"MIG-x\"}}}]}}]",
         "ResourceSlice s: device m: a MIG device without attribute parentUUID"},
        {"[{\"metadata\":{\"name\":\"s\"},\"spec\":{\"devices\":[{\"name\":\"g\",\"attributes\":{\"uuid\":{\"string\":"
         "\"A\"}}},{\"name\":\"g\",\"attributes\":{\"uuid\":{\"string\":\"B\"}}}]}}]",
         "ResourceSlice s: device g: published twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *s = json_loads(cases[i].json, 0, NULL);
        assert_non_null(s);
        err[0] = '\0';
        assert_int_equal(gs_drap_table_from_slices(s, NULL, NULL, &t, err, sizeof err), GS_EINVAL);
        assert_non_null(strstr(err, cases[i].want));
        json_decref(s);
    }
}

static void device_table_placements(void **state)
{
    (void)state;
    static struct gs_drap_table t;
    char err[256] = "";
    /* A partitionable GPU's MIG placement that does not exist yet has no uuid: left out. */
    json_t *s = json_loads("[{\"metadata\":{\"name\":\"s\"},\"spec\":{\"devices\":["
                           "{\"name\":\"gpu-0\",\"attributes\":{\"uuid\":{\"string\":\"GPU-a\"}}},"
                           "{\"name\":\"gpu-0-mig-1g10gb-19-3\",\"attributes\":{\"type\":{\"string\":\"mig\"}},"
                           "\"consumesCounters\":[{\"counterSet\":\"gpu-0-counter-set\"}]}]}}]",
                           0, NULL);
    assert_int_equal(gs_drap_table_from_slices(s, NULL, NULL, &t, err, sizeof err), 0);
    assert_int_equal(t.n, 1);
    assert_null(gs_drap_table_find(&t, "gpu-0-mig-1g10gb-19-3"));
    json_decref(s);
}

static json_t *claim(const char *uid, const char *node, const char *results)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"%s\"},\"status\":{\"allocation\":{"
             "\"devices\":{\"results\":%s},\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":"
             "\"metadata.name\",\"operator\":\"In\",\"values\":[\"%s\"]}]}]}}}}",
             uid, results, node);
    json_t *c = json_loads(text, 0, NULL);
    assert_non_null(c);
    return c;
}

static void choose(void **state)
{
    (void)state;
    static struct gs_drap_table t;
    table(&t);
    struct gs_drap_state st = {"gpu.nvidia.com", NODE, "/tmp", NULL};
    json_t *c = claim("u1", NODE,
                      "[{\"request\":\"big/h100\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"node-a\",\"device\":\"gpu-1\"},"
                      "{\"request\":\"net\",\"driver\":\"other.example.com\",\"pool\":\"node-a\",\"device\":\"nic\"}]");
    json_t *out = NULL;
    char err[512] = "";
    assert_int_equal(gs_drap_choose(&st, &t, c, "ns", "c", "u1", &out, err, sizeof err), 0);
    json_t *devs = json_object_get(out, "devices");
    assert_int_equal(json_array_size(devs), 1); /* the other driver's device is not ours to prepare */
    json_t *d = json_array_get(devs, 0);
    assert_string_equal(json_string_value(json_object_get(d, "device")), "gpu-1");
    assert_string_equal(json_string_value(json_array_get(json_object_get(d, "requests"), 0)), "big");
    assert_string_equal(json_string_value(json_array_get(json_object_get(d, "cdi"), 0)),
                        "k8s.gpu.nvidia.com/claim=u1-gpu-1");

    json_t *spec = gs_drap_cdi_spec(&t, "u1", out);
    assert_string_equal(json_string_value(json_object_get(spec, "kind")), "k8s.gpu.nvidia.com/claim");
    json_t *sd = json_array_get(json_object_get(spec, "devices"), 0);
    assert_string_equal(json_string_value(json_object_get(sd, "name")), "u1-gpu-1");
    json_t *edits = json_object_get(sd, "containerEdits");
    assert_string_equal(json_string_value(json_array_get(json_object_get(edits, "env"), 0)),
                        "NVIDIA_VISIBLE_DEVICES=GPU-b");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(edits, "deviceNodes"), 0), "path")),
        "/dev/nvidia4");
    json_decref(spec);
    json_decref(out);
    out = NULL;

    assert_int_equal(gs_drap_choose(&st, &t, c, "ns", "c", "other-uid", &out, err, sizeof err), GS_ENOENT);
    assert_string_equal(err, "ResourceClaim ns/c: uid is u1, the kubelet asked for other-uid");
    json_decref(c);

    c = claim("u2", "node-b", "[]");
    assert_int_equal(gs_drap_choose(&st, &t, c, "ns", "c", "u2", &out, err, sizeof err), GS_EINVAL);
    assert_string_equal(err, "ResourceClaim ns/c: allocated to node node-b, this is node node-a");
    json_decref(c);

    c = claim("u3", NODE, "[{\"request\":\"r\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"node-a\",\"device\":\"gpu-7\"}]");
    assert_int_equal(gs_drap_choose(&st, &t, c, "ns", "c", "u3", &out, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "results[0].device: gpu-7 is not a device of driver gpu.nvidia.com on node node-a"));
    json_decref(c);

    c = json_loads("{\"metadata\":{\"uid\":\"u4\"},\"status\":{}}", 0, NULL);
    assert_int_equal(gs_drap_choose(&st, &t, c, "ns", "c", "u4", &out, err, sizeof err), GS_EINVAL);
    assert_string_equal(err, "ResourceClaim ns/c: not allocated (status.allocation is missing)");
    json_decref(c);
    assert_null(out);
}

static void checkpoint(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs-drap-ckpt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/sub/checkpoint.json", dir);
    struct gs_drap_state st = {"gpu.nvidia.com", NODE, "/tmp", json_loads(
        "{\"u1\":{\"namespace\":\"ns\",\"name\":\"c\",\"devices\":[{\"requests\":[\"r\"],\"pool\":\"node-a\","
        "\"device\":\"gpu-1\",\"cdi\":[\"k8s.gpu.nvidia.com/claim=u1-gpu-1\"]}]}}", 0, NULL)};
    assert_int_equal(gs_drap_checkpoint_save(path, &st), 0);
    struct gs_drap_state back = {"gpu.nvidia.com", NODE, "/tmp", json_object()};
    char err[256] = "";
    assert_int_equal(gs_drap_checkpoint_load(path, &back, err, sizeof err), 0);
    assert_true(json_equal(back.claims, st.claims));
    /* Only the file itself: the temporary is renamed over it. */
    char sub[256];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) -eq 1", sub);
    assert_int_equal(system(cmd), 0);

    struct gs_drap_state other = {"gpu.nvidia.com", "node-b", "/tmp", json_object()};
    assert_int_equal(gs_drap_checkpoint_load(path, &other, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "driver/node: gpu.nvidia.com/node-a, this plugin is gpu.nvidia.com/node-b"));

    snprintf(path, sizeof path, "%s/absent.json", dir);
    assert_int_equal(gs_drap_checkpoint_load(path, &back, err, sizeof err), 0); /* none yet: empty */

    struct {
        const char *text, *want;
    } bad[] = {
        {"{", "line 1"},
        {"{\"version\":2}", "version: want 1"},
        {"{\"version\":1,\"driver\":\"gpu.nvidia.com\",\"node\":\"node-a\",\"claims\":[]}", "claims: want an object"},
        {"{\"version\":1,\"driver\":\"gpu.nvidia.com\",\"node\":\"node-a\",\"claims\":{\"u\":{\"name\":\"c\"}}}",
         "claims.u: want namespace, name and devices"},
        {"{\"version\":1,\"driver\":\"gpu.nvidia.com\",\"node\":\"node-a\",\"claims\":{\"u\":{\"namespace\":\"n\","
         "\"name\":\"c\",\"devices\":[{\"device\":\"d\",\"pool\":\"p\",\"cdi\":[1],\"requests\":[]}]}}}",
         "claims.u.devices[0]: want pool, device, requests[] and cdi[]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_not_equal(gs_drap_checkpoint_parse(bad[i].text, strlen(bad[i].text), &back, err, sizeof err), 0);
        assert_non_null(strstr(err, bad[i].want));
    }
    assert_true(json_equal(back.claims, st.claims)); /* a refused text leaves the state alone */
    json_decref(st.claims);
    json_decref(back.claims);
    json_decref(other.claims);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void codecs(void **state)
{
    (void)state;
    json_t *ans = json_loads("{\"u1\":{\"devices\":[{\"requests\":[\"r\"],\"pool\":\"p\",\"device\":\"gpu-1\","
                             "\"cdi\":[\"k=a\",\"k=b\"]}],\"error\":\"\"},\"u2\":{\"devices\":[],\"error\":\"nope\"}}",
                             0, NULL);
    uint8_t *buf;
    size_t len;
    assert_int_equal(gs__drap_prepare_pack(ans, &buf, &len), 0);
    json_t *back = NULL;
    assert_int_equal(gs_drap_decode_prepare(buf, len, &back), 0);
    assert_true(json_equal(ans, back));
    free(buf);
    json_decref(back);
    json_decref(ans);
    ans = json_loads("{\"u1\":{\"error\":\"\"},\"u2\":{\"error\":\"busy\"}}", 0, NULL);
    assert_int_equal(gs__drap_unprepare_pack(ans, &buf, &len), 0);
    assert_int_equal(gs_drap_decode_unprepare(buf, len, &back), 0);
    assert_true(json_equal(ans, back));
    free(buf);
    json_decref(back);
    json_decref(ans);
    json_t *claims = json_loads("[{\"namespace\":\"ns\",\"uid\":\"u\",\"name\":\"c\"}]", 0, NULL);
    assert_int_equal(gs__drap_claims_pack(claims, &buf, &len), 0);
    assert_int_equal(gs__drap_claims_decode(buf, len, &back), 0);
    assert_true(json_equal(claims, back));
    free(buf);
    json_decref(back);
    json_decref(claims);
    const uint8_t junk[] = {0x0a, 0xff, 0xff};
    assert_int_equal(gs_drap_decode_prepare(junk, sizeof junk, &back), GS_EPARSE);
}

static void cdi_env(void **state)
{
    (void)state;
    const char *spec = "{\"kind\":\"k8s.gpu.nvidia.com/claim\",\"devices\":["
                       "{\"name\":\"u-gpu-0\",\"containerEdits\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=GPU-a\"]}},"
                       "{\"name\":\"u-gpu-1\",\"containerEdits\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=GPU-b\",\"X=1\"]}}],"
                       "\"containerEdits\":{\"env\":[\"COMMON=yes\"]}}";
    json_t *env = json_object();
    bool found = false;
    char err[256];
    assert_int_equal(gs_drap_cdi_env_text(spec, strlen(spec), "k8s.gpu.nvidia.com/claim", "u-gpu-0", env, &found,
                                          err, sizeof err), 0);
    assert_true(found);
    assert_int_equal(gs_drap_cdi_env_text(spec, strlen(spec), "k8s.gpu.nvidia.com/claim", "u-gpu-1", env, &found,
                                          err, sizeof err), 0);
    assert_string_equal(json_string_value(json_object_get(env, "NVIDIA_VISIBLE_DEVICES")), "GPU-a,GPU-b");
    assert_string_equal(json_string_value(json_object_get(env, "X")), "1");
    assert_string_equal(json_string_value(json_object_get(env, "COMMON")), "yes");
    assert_int_equal(gs_drap_cdi_env_text(spec, strlen(spec), "nvidia.com/gpu", "u-gpu-0", env, &found, err,
                                          sizeof err), 0);
    assert_false(found);
    assert_int_equal(gs_drap_cdi_env_text("[1", 2, "k", "d", env, &found, err, sizeof err), GS_EPARSE);
    json_decref(env);
    env = json_object();
    const char *ids[] = {"k8s.gpu.nvidia.com/claim"};
    assert_int_equal(gs_drap_cdi_env("/nonexistent", ids, 1, env, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "not a fully qualified name"));
    json_decref(env);
}

/*--- The whole plugin over its sockets ---*/

static json_t *api_claims; /* name -> claim object */

static int get_claim(void *ud, const char *ns, const char *name, json_t **out, char *err, size_t errlen)
{
    (void)ud, (void)ns, (void)err, (void)errlen;
    json_t *c = json_object_get(api_claims, name);
    if (!c) return GS_ENOENT;
    *out = json_incref(c);
    return 0;
}

static void served(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs-drap-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char plugins[128], reg[128], cdi[128];
    snprintf(plugins, sizeof plugins, "%s/plugins", dir);
    snprintf(reg, sizeof reg, "%s/registry", dir);
    snprintf(cdi, sizeof cdi, "%s/cdi", dir);
    static struct gs_drap_table t;
    table(&t);
    api_claims = json_object();
    json_object_set_new(api_claims, "c",
                        claim("u1", NODE, "[{\"request\":\"r\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"node-a\","
                                          "\"device\":\"gpu-0\"}]"));
    struct gs_drap_config cfg = {.node = NODE, .plugins_dir = plugins, .registry_dir = reg, .cdi_dir = cdi,
                                 .get_claim = get_claim};
    struct gs_drap *p = NULL;
    char err[512] = "";
    assert_int_equal(gs_drap_create(&cfg, &t, &p, err, sizeof err), 0);
    assert_int_equal(gs_drap_serve(p, err, sizeof err), 0);

    char ep[1200];
    bool v1 = false;
    assert_int_equal(gs_drap_kubelet_find(reg, "gpu.nvidia.com", ep, sizeof ep, &v1, err, sizeof err), 0);
    assert_string_equal(ep, gs_drap_socket(p));
    assert_true(v1);
    assert_int_equal(gs_drap_kubelet_find(reg, "other.example.com", ep, sizeof ep, &v1, err, sizeof err), GS_ENOENT);

    struct gs_drap_claim_ref refs[] = {{"ns", "c", "u1"}, {"ns", "gone", "u9"}};
    json_t *ans = NULL;
    assert_int_equal(gs_drap_kubelet_prepare(gs_drap_socket(p), true, refs, 2, 5000, &ans, err, sizeof err), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(ans, "u1"), "error")), "");
    assert_string_equal(json_string_value(json_object_get(json_object_get(ans, "u9"), "error")),
                        "ResourceClaim ns/gone not found");
    json_t *ids = json_object_get(json_array_get(json_object_get(json_object_get(ans, "u1"), "devices"), 0), "cdi");
    const char *id = json_string_value(json_array_get(ids, 0));
    assert_string_equal(id, "k8s.gpu.nvidia.com/claim=u1-gpu-0");
    json_t *env = json_object();
    assert_int_equal(gs_drap_cdi_env(cdi, &id, 1, env, err, sizeof err), 0);
    assert_string_equal(json_string_value(json_object_get(env, "NVIDIA_VISIBLE_DEVICES")), "GPU-a");
    json_decref(env);
    json_decref(ans);
    assert_int_equal(gs_drap_prepared(p), 1);

    /* Restart: a new plugin from the checkpoint answers without the API. */
    gs_drap_destroy(p);
    json_object_clear(api_claims);
    assert_int_equal(gs_drap_create(&cfg, &t, &p, err, sizeof err), 0);
    assert_int_equal(gs_drap_serve(p, err, sizeof err), 0);
    assert_int_equal(gs_drap_prepared(p), 1);
    assert_int_equal(gs_drap_kubelet_prepare(gs_drap_socket(p), false, refs, 1, 5000, &ans, err, sizeof err), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(ans, "u1"), "error")), "");
    json_decref(ans);
    assert_int_equal(gs_drap_kubelet_unprepare(gs_drap_socket(p), true, refs, 2, 5000, &ans, err, sizeof err), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(ans, "u1"), "error")), "");
    assert_string_equal(json_string_value(json_object_get(json_object_get(ans, "u9"), "error")), "");
    json_decref(ans);
    char spec[256];
    gs_drap_cdi_path(cdi, "u1", spec, sizeof spec);
    assert_int_not_equal(access(spec, F_OK), 0);
    assert_int_equal(gs_drap_prepared(p), 0);

    /* Health: a GPU and its MIG device follow the GPU. */
    assert_true(gs_drap_set_gpu_health(p, "GPU-b", false, "Xid 79"));
    assert_false(gs_drap_set_gpu_health(p, "GPU-b", false, "Xid 79"));
    gs_drap_destroy(p);
    json_decref(api_claims);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A registration socket that says it is something else. */
static int m_csi_info(void *ud, const uint8_t *req, size_t len, uint8_t **out, size_t *olen, char *msg, size_t ml)
{
    (void)ud, (void)req, (void)len, (void)msg, (void)ml;
    Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
    info.type = "CSIPlugin";
    info.name = "gpu.nvidia.com";
    info.endpoint = "/x.sock";
    *olen = protobuf_c_message_get_packed_size(&info.base);
    *out = malloc(*olen ? *olen : 1);
    protobuf_c_message_pack(&info.base, *out);
    return GS_RPC_OK;
}

static int m_status_ok(void *ud, const uint8_t *req, size_t len, uint8_t **out, size_t *olen, char *msg, size_t ml)
{
    (void)ud, (void)req, (void)len, (void)msg, (void)ml;
    *out = NULL, *olen = 0;
    return GS_RPC_OK;
}

static void kubelet_refusals(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs-drap-reg-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sock[128], err[512] = "", ep[256];
    snprintf(sock, sizeof sock, "%s/gpu.nvidia.com-reg.sock", dir);
    static const struct gs_rpc_method methods[] = {
        {"/pluginregistration.Registration/GetInfo", m_csi_info, NULL},
        {"/pluginregistration.Registration/NotifyRegistrationStatus", m_status_ok, NULL},
    };
    struct gs_rpc_server_cfg cfg = {sock, methods, 2, NULL, 0};
    struct gs_rpc_server *srv = NULL;
    assert_int_equal(gs_rpc_server_start(&cfg, &srv, err, sizeof err), 0);
    bool v1;
    assert_int_equal(gs_drap_kubelet_find(dir, "gpu.nvidia.com", ep, sizeof ep, &v1, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "is not usable: type \"CSIPlugin\", want DRAPlugin"));
    gs_rpc_server_stop(srv);

    /* A request that is not a NodePrepareResourcesRequest is a gRPC error, not a claim's. */
    static struct gs_drap_table t;
    table(&t);
    char plugins[128];
    snprintf(plugins, sizeof plugins, "%s/plugins", dir);
    struct gs_drap_config dc = {.node = NODE, .plugins_dir = plugins, .registry_dir = dir, .cdi_dir = dir};
    struct gs_drap *p = NULL;
    assert_int_equal(gs_drap_create(&dc, &t, &p, err, sizeof err), 0);
    assert_int_equal(gs_drap_serve(p, err, sizeof err), 0);
    struct gs_rpc_conn *c;
    assert_int_equal(gs_rpc_dial(gs_drap_socket(p), &c), 0);
    const uint8_t junk[] = {0x0a, 0x05, 0x0a};
    uint8_t *resp = NULL;
    size_t rlen = 0;
    int status = 0;
    assert_int_equal(gs_rpc_unary(c, "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources", junk,
                                  sizeof junk, &resp, &rlen, 5000, false, &status, err, sizeof err), GS_EIO);
    assert_int_equal(status, GS_RPC_INVALID_ARGUMENT);
    assert_string_equal(err, "NodePrepareResourcesRequest: not a valid message");
    free(resp);
    gs_rpc_close(c);
    gs_drap_destroy(p);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names),       cmocka_unit_test(device_table), cmocka_unit_test(device_table_errors),
        cmocka_unit_test(device_table_placements),
        cmocka_unit_test(choose),      cmocka_unit_test(checkpoint),   cmocka_unit_test(codecs),
        cmocka_unit_test(cdi_env),     cmocka_unit_test(served),       cmocka_unit_test(kubelet_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
