/*
 * test_cdi.c - the CDI spec's shape and its atomic file replacement.
 */
#include "node/cdi.h"

#include <dirent.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

static void shape(void **state)
{
    (void)state;
    struct gs_node_gpus g;
    gs_node_gpus_mock(&g, 2, 1, 0, 1);
    g.gpu[1].minor = 5;
    struct gs_cdi_mount m[1] = {{"/usr/bin/nvidia-smi", NULL}};
    struct gs_cdi_opts o = {.mounts = m, .n_mounts = 1};
    char *text;
    assert_int_equal(gs_cdi_spec_json(&g, &o, &text), 0);
    json_error_t e;
    json_t *s = json_loads(text, 0, &e);
    free(text);
    assert_non_null(s);
    assert_string_equal(json_string_value(json_object_get(s, "cdiVersion")), "0.5.0");
    assert_string_equal(json_string_value(json_object_get(s, "kind")), "nvidia.com/gpu");
    json_t *devs = json_object_get(s, "devices");
    assert_int_equal(json_array_size(devs), 5); /* 2 by UUID, 2 by index, all */
    json_t *d1 = json_array_get(devs, 2);
    assert_string_equal(json_string_value(json_object_get(d1, "name")), g.gpu[1].uuid);
    json_t *node = json_array_get(json_object_get(json_object_get(d1, "containerEdits"), "deviceNodes"), 0);
    assert_string_equal(json_string_value(json_object_get(node, "path")), "/dev/nvidia5");
    json_t *all = json_array_get(devs, 4);
    assert_string_equal(json_string_value(json_object_get(all, "name")), "all");
    assert_int_equal(json_array_size(json_object_get(json_object_get(all, "containerEdits"), "deviceNodes")), 2);
    json_t *ce = json_object_get(s, "containerEdits");
    assert_string_equal(json_string_value(json_array_get(json_object_get(ce, "env"), 0)), "NVIDIA_VISIBLE_DEVICES=void");
    assert_int_equal(json_array_size(json_object_get(ce, "deviceNodes")), 3);
    json_t *mount = json_array_get(json_object_get(ce, "mounts"), 0);
    assert_string_equal(json_string_value(json_object_get(mount, "containerPath")), "/usr/bin/nvidia-smi");
    assert_string_equal(json_string_value(json_array_get(json_object_get(mount, "options"), 0)), "ro");
    json_decref(s);
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.' || (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))) n++;
    if (d) closedir(d);
    return n;
}

static void atomic_write(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs-cdi-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[64], path[256];
    snprintf(sub, sizeof sub, "%s/run/cdi", dir);
    struct gs_node_gpus g;
    gs_node_gpus_mock(&g, 3, 1, 0, 1);
    assert_int_equal(gs_cdi_write(sub, &g, NULL, path, sizeof path), 0);
    char want[256];
    snprintf(want, sizeof want, "%s/nvidia.com-gpu.json", sub);
    assert_string_equal(path, want);
    g.n = 1;
    assert_int_equal(gs_cdi_write(sub, &g, NULL, NULL, 0), 0);
    assert_int_equal(count_files(sub), 1); /* replaced, no temporary left */
    json_error_t e;
    json_t *s = json_load_file(path, 0, &e);
    assert_non_null(s);
    assert_int_equal(json_array_size(json_object_get(s, "devices")), 3);
    json_decref(s);
    char name[64];
    gs_cdi_file_name("example.com/fpga", name, sizeof name);
    assert_string_equal(name, "example.com-fpga.json");
    unlink(path);
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/run", dir);
    rmdir(sub);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(shape), cmocka_unit_test(atomic_write)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
