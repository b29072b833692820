/*
 * test_util.c - error table, diagnostics list, clocks, arena and logging.
 */
#include "core/arena.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static void test_strerror(void **s)
{
    (void)s;
    assert_string_equal(gs_strerror(GS_OK), "success");
    assert_string_equal(gs_strerror(GS_EINVAL), "invalid argument");
    assert_string_equal(gs_errname(GS_ENOMEM), "GS_ENOMEM");
    assert_string_equal(gs_errname(GS_ESTATE), "GS_ESTATE");
    assert_string_equal(gs_strerror(-1000), "unknown error");
    assert_string_equal(gs_strerror(5), "unknown error");
    for (int e = 0; e > -GS_ERR_COUNT; e--) {
        assert_non_null(gs_strerror(e));
        assert_true(strncmp(gs_errname(e), "GS_", 3) == 0);
    }
}

static void test_diags(void **s)
{
    (void)s;
    struct gs_diags d = {0};
    for (int i = 0; i < 20; i++) assert_int_equal(gs_diags_add(&d, "spec.x", "bad %d", i), 0);
    assert_int_equal(d.n, 20);
    assert_string_equal(d.v[13].msg, "bad 13");
    assert_string_equal(d.v[0].path, "spec.x");
    assert_int_equal(gs_diags_add(&d, NULL, "whole"), 0);
    assert_string_equal(d.v[20].path, "");
    gs_diags_free(&d);
    assert_int_equal(d.n, 0);
    assert_null(d.v);
}

static void test_sim_clock(void **s)
{
    (void)s;
    struct gs_clock c;
    gs_clock_init_sim(&c, 100);
    assert_int_equal(gs_clock_now(&c), 100);
    gs_clock_advance(&c, 50);
    assert_int_equal(gs_clock_now(&c), 150);
    gs_clock_set(&c, 120); /* never backwards */
    assert_int_equal(gs_clock_now(&c), 150);
    gs_clock_set(&c, 5 * GS_NS_PER_SEC);
    assert_int_equal(gs_clock_now(&c), 5 * GS_NS_PER_SEC);
    gs_clock_advance(&c, -10);
    assert_int_equal(gs_clock_now(&c), 5 * GS_NS_PER_SEC);
}

static void test_real_clock(void **s)
{
    (void)s;
    struct gs_clock c;
    gs_clock_init_real(&c);
    int64_t a = gs_clock_now(&c), b = gs_clock_now(&c);
    assert_true(a > 0);
    assert_true(b >= a);
    assert_true(gs_wall_time() > 1.6e9);
}

static void test_arena(void **s)
{
    (void)s;
    struct gs_arena a;
    gs_arena_init(&a, 256);
    char *p[100];
    for (int i = 0; i < 100; i++) {
        p[i] = gs_arena_printf(&a, "item-%d", i);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % 16, 0);
    }
    for (int i = 0; i < 100; i++) {
        char want[16];
        snprintf(want, sizeof want, "item-%d", i);
        assert_string_equal(p[i], want);
    }
    /* larger than a chunk */
    unsigned char *big = gs_arena_calloc(&a, 1000, 4);
    assert_non_null(big);
    for (int i = 0; i < 4000; i++) assert_int_equal(big[i], 0);
    assert_null(gs_arena_calloc(&a, SIZE_MAX / 2, 4));
    gs_arena_reset(&a);
    char *q = gs_arena_strdup(&a, "after reset");
    assert_string_equal(q, "after reset");
    gs_arena_free(&a);
}

static void test_log(void **s)
{
    (void)s;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    gs_log_set_stream(f);
    gs_log_set_level(GS_LOG_INFO);
    gs_log(GS_LOG_DEBUG, "hidden", "k", "v", NULL);
    gs_log(GS_LOG_INFO, "pod scheduled", "pod", "default/a", "why", "two words", "q", "say \"hi\"", NULL);
    fflush(f);
    assert_null(strstr(buf, "hidden"));
    assert_non_null(strstr(buf, "level=info msg=\"pod scheduled\" pod=default/a why=\"two words\" q=\"say \\\"hi\\\"\""));
    assert_int_equal(buf[len - 1], '\n');
    gs_log_set_stream(NULL);
    fclose(f);
    free(buf);
    enum gs_log_level l;
    assert_int_equal(gs_log_level_parse("warn", &l), 0);
    assert_int_equal(l, GS_LOG_WARN);
    assert_int_equal(gs_log_level_parse("loud", &l), GS_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror), cmocka_unit_test(test_diags), cmocka_unit_test(test_sim_clock),
        cmocka_unit_test(test_real_clock), cmocka_unit_test(test_arena), cmocka_unit_test(test_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
