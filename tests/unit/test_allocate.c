/*
 * test_allocate.c - Allocate answers per device-list strategy, and refusals.
 */
#include "core/error.h"
#include "node/allocate.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static struct gs_alloc_resp *resp(void)
{
    struct gs_alloc_resp *r = malloc(sizeof *r);
    assert_non_null(r);
    return r;
}

static void envvar(void **state)
{
    (void)state;
    struct gs_node_gpus g;
    gs_node_gpus_mock(&g, 4, 1, 0, 1);
    g.gpu[2].minor = 7;
    struct gs_alloc_resp *r = resp();
    const char *ids[2] = {g.gpu[2].uuid, g.gpu[0].uuid};
    char err[200];
    assert_int_equal(gs_alloc_container(&g, NULL, ids, 2, r, err, sizeof err), 0);
    assert_int_equal(r->n_env, 1);
    assert_string_equal(r->env[0].key, "NVIDIA_VISIBLE_DEVICES");
    char want[300];
    snprintf(want, sizeof want, "%s,%s", g.gpu[2].uuid, g.gpu[0].uuid);
    assert_string_equal(r->env[0].value, want);
    assert_int_equal(r->n_dev, 5);
    assert_string_equal(r->dev[0].container_path, "/dev/nvidiactl");
    assert_string_equal(r->dev[1].container_path, "/dev/nvidia-uvm");
    assert_string_equal(r->dev[2].container_path, "/dev/nvidia-uvm-tools");
    assert_string_equal(r->dev[3].host_path, "/dev/nvidia7");
    assert_string_equal(r->dev[4].host_path, "/dev/nvidia0");
    assert_string_equal(r->dev[4].permissions, "rw");
    assert_int_equal(r->n_cdi, 0);
    assert_int_equal(r->n_ann, 0);
    free(r);
}

static void cdi_strategies(void **state)
{
    (void)state;
    struct gs_node_gpus g;
    gs_node_gpus_mock(&g, 2, 1, 0, 1);
    struct gs_alloc_resp *r = resp();
    const char *ids[1] = {g.gpu[1].uuid};
    char err[200], want[200];
    struct gs_alloc_opts o = {.strategy = GS_DLS_CDI_CRI};
    assert_int_equal(gs_alloc_container(&g, &o, ids, 1, r, err, sizeof err), 0);
    assert_int_equal(r->n_env, 0);
    assert_int_equal(r->n_dev, 0);
    assert_int_equal(r->n_cdi, 1);
    snprintf(want, sizeof want, "nvidia.com/gpu=%s", g.gpu[1].uuid);
    assert_string_equal(r->cdi[0], want);
    o.strategy = GS_DLS_CDI_ANNOTATIONS;
    assert_int_equal(gs_alloc_container(&g, &o, ids, 1, r, err, sizeof err), 0);
    assert_int_equal(r->n_cdi, 0);
    assert_int_equal(r->n_ann, 1);
    assert_string_equal(r->ann[0].value, want);
    assert_int_equal(strncmp(r->ann[0].key, "cdi.k8s.io/gpusched_GPU-", 24), 0);
    assert_true(strlen(r->ann[0].key) - strlen("cdi.k8s.io/") <= 63);
    assert_int_equal(gs_dls_parse("envvar,cdi-cri", &o.strategy), 0);
    assert_int_equal(gs_alloc_container(&g, &o, ids, 1, r, err, sizeof err), 0);
    assert_int_equal(r->n_env, 1);
    assert_int_equal(r->n_cdi, 1);
    free(r);
}

static void refusals(void **state)
{
    (void)state;
    struct gs_node_gpus g;
    gs_node_gpus_mock(&g, 2, 1, 0, 1);
    struct gs_alloc_resp *r = resp();
    char err[200];
    const char *unknown[2] = {g.gpu[0].uuid, "GPU-does-not-exist"};
    assert_int_equal(gs_alloc_container(&g, NULL, unknown, 2, r, err, sizeof err), GS_ENOENT);
    assert_non_null(strstr(err, "GPU-does-not-exist"));
    gs_node_gpus_set_health(&g, 1, false);
    const char *sick[1] = {g.gpu[1].uuid};
    assert_int_equal(gs_alloc_container(&g, NULL, sick, 1, r, err, sizeof err), GS_ESTATE);
    assert_non_null(strstr(err, "unhealthy"));
    const char *twice[2] = {g.gpu[0].uuid, g.gpu[0].uuid};
    assert_int_equal(gs_alloc_container(&g, NULL, twice, 2, r, err, sizeof err), GS_EINVAL);
    assert_int_equal(gs_alloc_container(&g, NULL, twice, 0, r, err, sizeof err), GS_EINVAL);
    unsigned bits;
    assert_int_equal(gs_dls_parse("volume-mounts", &bits), GS_EINVAL);
    free(r);
}

static void replicas_collapse(void **state)
{
    (void)state;
    struct gs_node_gpus g;
    gs_node_gpus_mock(&g, 2, 1, 0, 2);
    char a[GS_NODE_ID_MAX], b[GS_NODE_ID_MAX];
    gs_node_gpus_id(&g, 0, a, sizeof a);
    gs_node_gpus_id(&g, 1, b, sizeof b);
    const char *ids[2] = {a, b};
    struct gs_alloc_resp *r = resp();
    char err[200];
    assert_int_equal(gs_alloc_container(&g, NULL, ids, 2, r, err, sizeof err), 0);
    assert_string_equal(r->env[0].value, g.gpu[0].uuid);
    assert_int_equal(r->n_dev, 4);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(envvar), cmocka_unit_test(cdi_strategies), cmocka_unit_test(refusals),
        cmocka_unit_test(replicas_collapse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
