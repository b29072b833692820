/*
 * test_mig_caps.c - the driver's mig-minors file (node/migcaps.h) and the
 * capability device nodes Allocate returns for MIG devices.
 */
#include "core/error.h"
#include "node/allocate.h"
#include "node/migcaps.h"

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

static const char good[] = "config 1\n"
                           "monitor 2\n"
                           "gpu0/gi0/access 3\n"
                           "gpu0/gi0/ci0/access 4\n"
                           "\n"
                           "gpu0/gi1/access 12\r\n"
                           "gpu0/gi1/ci0/access 13\n"
                           "gpu3/gi14/ci7/access 410\n"
                           "fabric-imex-mgmt 7\n" /* a name we do not use */
                           "gpu1/gi2/access 30";  /* no final newline */

static void parse_good(void **state)
{
    (void)state;
    struct gs_migcaps c;
    char err[256] = "";
    assert_int_equal(gs_migcaps_parse(good, strlen(good), &c, err, sizeof err), 0);
    assert_int_equal(c.config, 1);
    assert_int_equal(c.monitor, 2);
    assert_int_equal(c.n, 6);
    assert_int_equal(gs_migcaps_minor(&c, 0, 1, -1), 12);
    assert_int_equal(gs_migcaps_minor(&c, 0, 1, 0), 13);
    assert_int_equal(gs_migcaps_minor(&c, 0, 0, 0), 4);
    assert_int_equal(gs_migcaps_minor(&c, 3, 14, 7), 410);
    assert_int_equal(gs_migcaps_minor(&c, 1, 2, -1), 30);
    assert_int_equal(gs_migcaps_minor(&c, 1, 2, 0), -1);
    assert_int_equal(gs_migcaps_minor(&c, 2, 0, -1), -1);
    gs_migcaps_free(&c);
}

/* Each bad line is refused with its number, its text and the reason. */
static void parse_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want_line, *want_why;
    } cases[] = {
        {"config 1\ngpu0/gi1/access\n", "line 2 \"gpu0/gi1/access\"", "minor is missing"},
        {"gpu0/gi1/access twelve\n", "line 1 \"gpu0/gi1/access twelve\"", "not a number"},
        {"config 1\n\ngpu0/gi1/access 12 13\n", "line 3 ", "more after the minor"},
        {"gpu0/gix/access 12\n", "line 1 \"gpu0/gix/access 12\"", "malformed name"},
        {"gpu0/gi1/ci/access 12\n", "line 1 ", "malformed name"},
        {"gpu0/gi1/access 12\ngpu0/gi1/access 14\n", "line 2 ", "listed twice"},
        {"config 1\nconfig 1\n", "line 2 ", "listed twice"},
        {"gpu0/gi1/access 99999999999\n", "line 1 ", "not a number from 0 to 1048575"},
        {"gpu0/gi1/access -3\n", "line 1 ", "not a number"},
        {"gpu99999/gi1/access 3\n", "line 1 ", "malformed name"},
        {"conf\"ig 1\n", "line 1 \"conf\"ig 1\"", "malformed name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gs_migcaps c;
        char err[256] = "";
        assert_int_equal(gs_migcaps_parse(cases[i].text, strlen(cases[i].text), &c, err, sizeof err), GS_EINVAL);
        if (!strstr(err, cases[i].want_line) || !strstr(err, cases[i].want_why))
            fail_msg("case %zu: got \"%s\", want \"%s\" and \"%s\"", i, err, cases[i].want_line, cases[i].want_why);
        assert_null(c.v);
        assert_int_equal(c.n, 0);
    }
    /* A NUL inside a line, and a control character shown as '?'. */
    const char nul[] = "config 1\ngpu0/gi1/\0ccess 12\n";
    struct gs_migcaps c;
    char err[256] = "";
    assert_int_equal(gs_migcaps_parse(nul, sizeof nul - 1, &c, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "line 2 \"gpu0/gi1/?ccess 12\": contains a NUL byte"));
}

static void mock_layout(void **state)
{
    (void)state;
    struct gs_migcaps c;
    gs_migcaps_mock(&c);
    assert_int_equal(gs_migcaps_minor(&c, 0, 0, -1), 3);
    assert_int_equal(gs_migcaps_minor(&c, 0, 0, 0), 4);
    assert_int_equal(gs_migcaps_minor(&c, 0, 1, -1), 12);
    assert_int_equal(gs_migcaps_minor(&c, 0, 1, 0), 13);
    assert_int_equal(gs_migcaps_minor(&c, 1, 0, -1), 3 + 15 * 9);
    assert_int_equal(gs_migcaps_minor(&c, 0, 15, -1), -1);
    assert_int_equal(gs_migcaps_minor(&c, 0, 1, 8), -1);
    /* Distinct for every GPU, GI and CI of an 8-GPU node. */
    static char seen[3 + 8 * 15 * 9];
    for (int g = 0; g < 8; g++)
        for (int gi = 0; gi < 15; gi++)
            for (int ci = -1; ci < 8; ci++) {
                int m = gs_migcaps_minor(&c, g, gi, ci);
                assert_in_range(m, 3, sizeof seen - 1);
                assert_int_equal(seen[m], 0);
                seen[m] = 1;
            }
    gs_migcaps_free(&c);
}

/*--- Files under a fake proc root ---*/

static void write_minors(const char *root, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/driver", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/driver/nvidia-caps", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s", root, GS_MIGCAPS_FILE);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void rm_minors(const char *root)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, GS_MIGCAPS_FILE);
    unlink(path);
    snprintf(path, sizeof path, "%s/driver/nvidia-caps", root);
    rmdir(path);
    snprintf(path, sizeof path, "%s/driver", root);
    rmdir(path);
    rmdir(root);
}

static void load_file(void **state)
{
    (void)state;
    char root[] = "/tmp/gs-migcaps-XXXXXX";
    assert_non_null(mkdtemp(root));
    struct gs_migcaps c;
    char err[512] = "";
    assert_int_equal(gs_migcaps_load(root, &c, err, sizeof err), GS_ENOENT);
    assert_non_null(strstr(err, "driver/nvidia-caps/mig-minors"));
    assert_non_null(strstr(err, root));
    write_minors(root, good);
    assert_int_equal(gs_migcaps_load(root, &c, err, sizeof err), 0);
    assert_int_equal(gs_migcaps_minor(&c, 0, 1, 0), 13);
    gs_migcaps_free(&c);
    write_minors(root, "config 1\nmonitor two\n");
    assert_int_equal(gs_migcaps_load(root, &c, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "mig-minors: line 2 \"monitor two\""));
    rm_minors(root);
}

/*--- Allocate for MIG devices ---*/

/* Two GPUs (minors 0 and 5) with two MIG devices each. */
static void mig_table(struct gs_node_gpus *g)
{
    memset(g, 0, sizeof *g);
    g->mig = true;
    g->replicas = 1;
    for (int i = 0; i < 4; i++) {
        struct gs_node_gpu *d = &g->gpu[g->n++];
        snprintf(d->uuid, sizeof d->uuid, "MIG-0000000%d-aaaa-bbbb-cccc-000000000000", i);
        d->index = i / 2;
        d->minor = i / 2 ? 5 : 0;
        d->numa = -1;
        d->parent = i / 2;
        d->healthy = true;
        d->gi = i % 2 ? 2 : 1;
        d->ci = 0;
    }
    gs_node_gpus_finish(g);
}

static bool has_dev(const struct gs_alloc_resp *r, const char *path)
{
    for (int i = 0; i < r->n_dev; i++)
        if (!strcmp(r->dev[i].host_path, path) && !strcmp(r->dev[i].container_path, path)) return true;
    return false;
}

static void allocate_mock_caps(void **state)
{
    (void)state;
    struct gs_node_gpus g;
    mig_table(&g);
    struct gs_alloc_resp *r = malloc(sizeof *r);
    assert_non_null(r);
    const char *ids[3] = {g.gpu[0].uuid, g.gpu[1].uuid, g.gpu[3].uuid};
    struct gs_alloc_opts o = {.strategy = GS_DLS_ENVVAR, .mock_caps = true};
    char err[512] = "";
    assert_int_equal(gs_alloc_container(&g, &o, ids, 3, r, err, sizeof err), 0);
    /* ctl, uvm, uvm-tools, two parents, two capability nodes per device */
    assert_int_equal(r->n_dev, 3 + 2 + 6);
    assert_true(has_dev(r, "/dev/nvidia0"));
    assert_true(has_dev(r, "/dev/nvidia5"));
    assert_true(has_dev(r, "/dev/nvidia-caps/nvidia-cap12")); /* gpu0/gi1 */
    assert_true(has_dev(r, "/dev/nvidia-caps/nvidia-cap13")); /* gpu0/gi1/ci0 */
    assert_true(has_dev(r, "/dev/nvidia-caps/nvidia-cap21")); /* gpu0/gi2 */
    assert_true(has_dev(r, "/dev/nvidia-caps/nvidia-cap22")); /* gpu0/gi2/ci0 */
    int gpu5 = 3 + 5 * 15 * 9;
    char p[64];
    snprintf(p, sizeof p, "/dev/nvidia-caps/nvidia-cap%d", gpu5 + 2 * 9);
    assert_true(has_dev(r, p));
    snprintf(p, sizeof p, "/dev/nvidia-caps/nvidia-cap%d", gpu5 + 2 * 9 + 1);
    assert_true(has_dev(r, p));
    assert_string_equal(r->dev[r->n_dev - 1].permissions, "rw");
    free(r);
}

static void allocate_file_caps(void **state)
{
    (void)state;
    char root[] = "/tmp/gs-migcaps-XXXXXX";
    assert_non_null(mkdtemp(root));
    struct gs_node_gpus g;
    mig_table(&g);
    struct gs_alloc_resp *r = malloc(sizeof *r);
    assert_non_null(r);
    const char *ids[1] = {g.gpu[1].uuid};
    struct gs_alloc_opts o = {.strategy = GS_DLS_ENVVAR, .proc_root = root};
    char err[512] = "";
    /* No file: refused, naming it, with no half answer. */
    assert_int_equal(gs_alloc_container(&g, &o, ids, 1, r, err, sizeof err), GS_EUNSUPPORTED);
    assert_non_null(strstr(err, "driver/nvidia-caps/mig-minors"));
    assert_non_null(strstr(err, root));
    assert_int_equal(r->n_dev, 0);
    assert_int_equal(r->n_env, 0);
    /* The GI line is there but not the CI line: the missing line is named. */
    write_minors(root, "config 1\nmonitor 2\ngpu0/gi2/access 40\n");
    assert_int_equal(gs_alloc_container(&g, &o, ids, 1, r, err, sizeof err), GS_EUNSUPPORTED);
    assert_non_null(strstr(err, "has no line \"gpu0/gi2/ci0/access\""));
    assert_non_null(strstr(err, g.gpu[1].uuid));
    write_minors(root, "config 1\nmonitor 2\ngpu0/gi2/access 40\ngpu0/gi2/ci0/access 41\n");
    assert_int_equal(gs_alloc_container(&g, &o, ids, 1, r, err, sizeof err), 0);
    assert_int_equal(r->n_dev, 3 + 1 + 2);
    assert_string_equal(r->dev[3].host_path, "/dev/nvidia0");
    assert_string_equal(r->dev[4].host_path, "/dev/nvidia-caps/nvidia-cap40");
    assert_string_equal(r->dev[5].host_path, "/dev/nvidia-caps/nvidia-cap41");
    /* Whole GPUs never need the file. */
    struct gs_node_gpus whole;
    gs_node_gpus_mock(&whole, 2, 1, 0, 1);
    const char *wid[1] = {whole.gpu[0].uuid};
    rm_minors(root);
    assert_int_equal(gs_alloc_container(&whole, &o, wid, 1, r, err, sizeof err), 0);
    assert_int_equal(r->n_dev, 4);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_good),         cmocka_unit_test(parse_malformed),
        cmocka_unit_test(mock_layout),        cmocka_unit_test(load_file),
        cmocka_unit_test(allocate_mock_caps), cmocka_unit_test(allocate_file_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
