/*
 * test_agent_env.c - the agent's defence behind the API's refusal of
 * reserved variables: a pod written straight into the store (as one stored
 * before the rule would be) that sets NVIDIA_VISIBLE_DEVICES, and
 * GPUSCHED_POD, still sees the GPU the scheduler chose and its own name,
 * since the agent applies its variables after the pod's. A real server and
 * agent in process, on a mock node.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/agent.h"
#include "api_fixture.h"
#include "control/apiserver.h"
#include "control/resources.h"
#include "control/server.h"
#include "tmpdir_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static void agent_variables_win(void **state)
{
    (void)state;
    char dir[64], url[64], sdir[128];
    struct gs_server_opts so = {.no_scheduler = true};
    struct gs_server *srv = fx_server_start(dir, sizeof dir, "/tmp/gs-agentenv-XXXXXX", "adm,admin,,,admin\n", so);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", gs_server_port(srv));
    snprintf(sdir, sizeof sdir, "%s/agent", dir);
    struct gs_agent_opts ao = {.node_name = "n1", .backend = "mock", .mock_spec = "1xH100-80GB", .state_dir = sdir,
                               .heartbeat_ms = 200, .resync_ms = 500, .grace_ms = 500};
    ao.conn.server = url;
    ao.conn.token = "adm";
    struct gs_agent *a = NULL;
    char err[256] = "";
    assert_int_equal(gs_agent_start(&ao, &a, err, sizeof err), 0);
    for (int i = 0; i < 200 && !gs_agent_registered(a); i++) usleep(50000);
    assert_true(gs_agent_registered(a));
    char key[256];
    gs_api_key(gs_api_resource_lookup("nodes"), NULL, "n1", key, sizeof key);
    json_t *node = NULL;
    assert_int_equal(gs_store_get(gs_server_store(srv), key, &node, NULL), 0);
    char uuid[128];
    const char *u =
        json_string_value(json_object_get(json_array_get(json_object_get(json_object_get(node, "status"), "devices"), 0),
                                          "uuid"));
    assert_non_null(u);
    snprintf(uuid, sizeof uuid, "%s", u);
    char text[2048];
    snprintf(text, sizeof text,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"default\","
             "\"annotations\":{\"gpusched.io/devices\":\"%s\"}},\"spec\":{\"nodeName\":\"n1\",\"restartPolicy\":"
             "\"Never\",\"containers\":[{\"name\":\"main\",\"command\":[\"sh\",\"-c\",\"echo "
             "$NVIDIA_VISIBLE_DEVICES $CUDA_VISIBLE_DEVICES $GPUSCHED_POD $FOO\"],\"env\":[{\"name\":"
             "\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"all\"},{\"name\":\"GPUSCHED_POD\",\"value\":\"evil\"},"
             "{\"name\":\"FOO\",\"value\":\"bar\"}],\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
             uuid);
    json_decref(node);
    json_t *pod = json_loads(text, 0, NULL);
    assert_non_null(pod);
    assert_int_equal(gs_apiserver_prepare_new(pod), 0);
    char uid[64];
    snprintf(uid, sizeof uid, "%s", json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid")));
    gs_api_key(gs_api_resource_lookup("pods"), "default", "p", key, sizeof key);
    assert_int_equal(gs_store_create(gs_server_store(srv), key, pod, NULL), 0); /* no validation on this path */
    json_decref(pod);
    char logp[256], want[300];
    snprintf(logp, sizeof logp, "%s/pods/%s/main/log", sdir, uid);
    const char *got = NULL;
    for (int i = 0; i < 200 && !((got = slurp(logp)) && strchr(got, '\n')); i++) usleep(50000);
    assert_non_null(got);
    snprintf(want, sizeof want, "%s %s p bar\n", uuid, uuid);
    assert_string_equal(got, want);
    gs_agent_stop(a, true);
    gs_server_stop(srv);
    fx_rm_tree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(agent_variables_win)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
