/*
 * test_devicemanager.c - the device manager and the device plugin in one
 * process, over real gRPC on unix sockets in a temporary directory:
 * registration, ListAndWatch health, topology-aware admission, exact IDs,
 * refusals, the checkpoint across a restart, and re-registration of the
 * plugin when the manager (kubelet) restarts.
 */
#include "core/error.h"
#include "node/devicemanager.h"
#include "node/deviceplugin/plugin.h"
#include "node/gpus.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

struct fixture {
    char dir[64];
    struct gs_node_gpus gpus;
    struct gs_dp *dp;
    struct gs_dm *dm;
    pthread_t runner;
    volatile sig_atomic_t stop;
    struct gs_dm_config cfg;
};

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *run_plugin(void *arg)
{
    struct fixture *f = arg;
    gs_dp_run(f->dp, NULL, NULL, &f->stop);
    return NULL;
}

/* Healthy / unhealthy device counts of the GPU resource (-1: not registered). */
static int count(struct gs_dm *dm, const char *which)
{
    json_t *r = gs_dm_resources(dm);
    json_t *gpu = json_object_get(r, "nvidia.com/gpu");
    int n = gpu ? (int)json_array_size(json_object_get(gpu, which)) : -1;
    json_decref(r);
    return n;
}

static bool wait_count(struct gs_dm *dm, const char *which, int want, int ms)
{
    for (int t = 0; t < ms; t += 10) {
        if (count(dm, which) == want) return true;
        sleep_ms(10);
    }
    return count(dm, which) == want;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/gs-dm-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    gs_node_gpus_mock(&f->gpus, 8, 2, 4, 1); /* islands = NUMA halves */
    f->cfg = (struct gs_dm_config){.plugin_dir = f->dir, .topo = {GS_TOPO_SINGLE_NUMA, GS_TOPO_SCOPE_CONTAINER, 2}};
    char err[256];
    if (gs_dm_start(&f->cfg, &f->dm, err, sizeof err)) return -1;
    struct gs_dp_config pc = {.plugin_dir = f->dir, .poll_ms = 10};
    if (gs_dp_create(&pc, &f->gpus, &f->dp)) return -1;
    pthread_create(&f->runner, NULL, run_plugin, f);
    *state = f;
    return wait_count(f->dm, "healthy", 8, 5000) ? 0 : -1;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    f->stop = 1;
    pthread_join(f->runner, NULL);
    gs_dp_destroy(f->dp);
    gs_dm_stop(f->dm);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static json_t *admit_count(struct fixture *f, const char *pod, int n, int *rc, char *why)
{
    struct gs_dm_container c = {.name = "main", .n = 1, .resource = {"nvidia.com/gpu"}, .count = {n}};
    json_t *res = NULL;
    *rc = gs_dm_admit(f->dm, pod, &c, 1, &res, why, 256);
    return res;
}

static int numa_of(struct fixture *f, const char *id)
{
    return f->gpus.gpu[gs_node_gpus_find(&f->gpus, id, NULL)].numa;
}

static void registration_and_admission(void **state)
{
    struct fixture *f = *state;
    int rc;
    char why[256];
    json_t *r = admit_count(f, "pod-a", 2, &rc, why);
    assert_int_equal(rc, 0);
    json_t *devs = json_object_get(json_array_get(r, 0), "devices");
    assert_int_equal(json_array_size(devs), 2);
    assert_int_equal(numa_of(f, json_string_value(json_array_get(devs, 0))),
                     numa_of(f, json_string_value(json_array_get(devs, 1))));
    json_t *env = json_object_get(json_object_get(json_object_get(json_array_get(r, 0), "response"), "envs"),
                                  "NVIDIA_VISIBLE_DEVICES");
    assert_non_null(strstr(json_string_value(env), json_string_value(json_array_get(devs, 0))));
    json_decref(r);
    /* Same pod again: the same answer, nothing new taken. */
    r = admit_count(f, "pod-a", 2, &rc, why);
    assert_int_equal(rc, 0);
    json_decref(r);
    assert_int_equal(count(f->dm, "allocated"), 2);
    /* Five GPUs never fit one NUMA node. */
    r = admit_count(f, "pod-b", 5, &rc, why);
    assert_int_equal(rc, GS_EPERM);
    /* Four fit the other node whole. */
    r = admit_count(f, "pod-c", 4, &rc, why);
    assert_int_equal(rc, 0);
    json_decref(r);
    r = admit_count(f, "pod-d", 4, &rc, why);
    assert_int_equal(rc, GS_EPERM);
    assert_int_equal(gs_dm_remove_pod(f->dm, "pod-c"), 0);
    assert_int_equal(gs_dm_remove_pod(f->dm, "pod-c"), GS_ENOENT);
    assert_int_equal(count(f->dm, "allocated"), 2);
}

static void exact_ids_and_health(void **state)
{
    struct fixture *f = *state;
    char why[256];
    json_t *r = NULL;
    const char *ids[2] = {f->gpus.gpu[6].uuid, f->gpus.gpu[7].uuid};
    struct gs_dm_container c = {.name = "c", .n = 1, .resource = {"nvidia.com/gpu"}, .exact = {ids},
                                .n_exact = {2}};
    assert_int_equal(gs_dm_admit(f->dm, "pod-x", &c, 1, &r, why, sizeof why), 0);
    json_t *devs = json_object_get(json_array_get(r, 0), "devices");
    assert_string_equal(json_string_value(json_array_get(devs, 0)), ids[0]);
    json_decref(r);
    /* Taken now. */
    assert_int_equal(gs_dm_admit(f->dm, "pod-y", &c, 1, &r, why, sizeof why), GS_ESTATE);
    assert_non_null(strstr(why, "already allocated"));
    /* Unknown. */
    const char *bad[1] = {"GPU-unknown"};
    c.exact[0] = bad, c.n_exact[0] = 1;
    assert_int_equal(gs_dm_admit(f->dm, "pod-y", &c, 1, &r, why, sizeof why), GS_ENOENT);
    /* A GPU fails: the manager hears it through ListAndWatch within a second. */
    gs_dp_set_health(f->dp, 5, false);
    assert_true(wait_count(f->dm, "unhealthy", 1, 1000));
    const char *sick[1] = {f->gpus.gpu[5].uuid};
    c.exact[0] = sick;
    assert_int_equal(gs_dm_admit(f->dm, "pod-y", &c, 1, &r, why, sizeof why), GS_ESTATE);
    assert_non_null(strstr(why, "unhealthy"));
    gs_dp_set_health(f->dp, 5, true);
    assert_true(wait_count(f->dm, "unhealthy", 0, 1000));
    /* Unknown resource. */
    struct gs_dm_container other = {.name = "c", .n = 1, .resource = {"example.com/fpga"}, .count = {1}};
    assert_int_equal(gs_dm_admit(f->dm, "pod-z", &other, 1, &r, why, sizeof why), GS_ENOENT);
}

static void restart_keeps_allocations_and_plugin_reregisters(void **state)
{
    struct fixture *f = *state;
    int rc;
    char why[256], err[256];
    json_t *r = admit_count(f, "pod-keep", 3, &rc, why);
    assert_int_equal(rc, 0);
    json_t *before = json_deep_copy(json_object_get(json_array_get(r, 0), "devices"));
    json_decref(r);
    int regs = gs_dp_registrations(f->dp);
    gs_dm_stop(f->dm);
    f->dm = NULL;
    assert_int_equal(gs_dm_start(&f->cfg, &f->dm, err, sizeof err), 0);
    json_t *allocs = gs_dm_allocations(f->dm);
    assert_int_equal(json_array_size(allocs), 1);
    assert_true(json_equal(json_object_get(json_array_get(allocs, 0), "devices"), before));
    json_decref(allocs);
    json_decref(before);
    /* The restart removed the plugin's socket; it serves and registers again. */
    assert_true(wait_count(f->dm, "healthy", 8, 5000));
    assert_true(gs_dp_registrations(f->dp) > regs);
    assert_int_equal(count(f->dm, "allocated"), 3);
    r = admit_count(f, "pod-more", 6, &rc, why);
    assert_int_equal(rc, GS_EPERM); /* 5 free, and not on one node */
}

static void resource_names(void **state)
{
    (void)state;
    assert_int_equal(gs_dm_valid_resource("nvidia.com/gpu"), 0);
    assert_int_equal(gs_dm_valid_resource("gpu"), GS_EINVAL);
    assert_int_equal(gs_dm_valid_resource("kubernetes.io/gpu"), GS_EINVAL);
    assert_int_equal(gs_dm_valid_resource("foo.kubernetes.io/gpu"), GS_EINVAL);
    assert_int_equal(gs_dm_valid_resource("nodomain/gpu"), GS_EINVAL);
    assert_int_equal(gs_dm_valid_resource("a.b/c/d"), GS_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(registration_and_admission, setup, teardown),
        cmocka_unit_test_setup_teardown(exact_ids_and_health, setup, teardown),
        cmocka_unit_test_setup_teardown(restart_keeps_allocations_and_plugin_reregisters, setup, teardown),
        cmocka_unit_test(resource_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
