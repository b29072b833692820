/*
 * test_goduration.c - Go duration strings (kube/goduration.h): what
 * time.ParseDuration accepts, what it refuses and why, and the String form.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/error.h"
#include "kube/goduration.h"

#include <string.h>

#define S 1000000000LL

static void accepted(void **state)
{
    (void)state;
    struct {
        const char *in;
        int64_t ns;
    } ok[] = {
        {"0", 0}, {"15s", 15 * S}, {"10s", 10 * S}, {"2s", 2 * S}, {"1.5s", 1500000000LL}, {"250ms", 250000000LL},
        {"1m30s", 90 * S}, {"1h", 3600 * S}, {"2h45m", (2 * 3600 + 45 * 60) * S}, {".5s", 500000000LL},
        {"1.s", S}, {"300us", 300000}, {"300\xc2\xb5s", 300000}, {"7ns", 7}, {"-1.5h", -5400 * S}, {"+3s", 3 * S},
        {"1h1m1s1ms1us1ns", 3661001001001LL}, {"9223372036854775807ns", INT64_MAX},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t v = -42;
        const char *why = NULL;
        int rc = gs_go_duration_parse(ok[i].in, &v, &why);
        if (rc || v != ok[i].ns) fail_msg("\"%s\": rc %d (%s), %lld", ok[i].in, rc, why, (long long)v);
    }
}

static void refused_with_reason(void **state)
{
    (void)state;
    struct {
        const char *in;
        int rc;
        const char *why;
    } bad[] = {
        {"", GS_EINVAL, "empty duration"},
        {"15", GS_EINVAL, "missing unit"},
        {"15 s", GS_EINVAL, "unknown unit"},
        {"1s 2s", GS_EINVAL, "unknown unit"},
        {"15sec", GS_EINVAL, "unknown unit"},
        {"1d", GS_EINVAL, "unknown unit"},
        {"s", GS_EINVAL, "want a number before each unit"},
        {".s", GS_EINVAL, "a '.' without digits"},
        {"-", GS_EINVAL, "a sign without a number"},
        {"9223372036854775808ns", GS_ERANGE, "too large"},
        {"3000000h", GS_ERANGE, "too large"},
        {"2562047h47m16.854775808s", GS_ERANGE, "too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v = 0;
        const char *why = NULL;
        int rc = gs_go_duration_parse(bad[i].in, &v, &why);
        if (rc != bad[i].rc || !why || !strstr(why, bad[i].why))
            fail_msg("\"%s\": rc %d why \"%s\", want %d \"%s\"", bad[i].in, rc, why ? why : "", bad[i].rc, bad[i].why);
    }
}

static void string_form(void **state)
{
    (void)state;
    struct {
        int64_t ns;
        const char *out;
    } f[] = {
        {0, "0s"}, {15 * S, "15s"}, {90 * S, "1m30s"}, {3600 * S, "1h0m0s"}, {1500000000LL, "1.5s"},
        {250000000LL, "250ms"}, {1500, "1.5\xc2\xb5s"}, {7, "7ns"}, {-5400 * S, "-1h30m0s"},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        char buf[64];
        gs_go_duration_format(f[i].ns, buf, sizeof buf);
        assert_string_equal(buf, f[i].out);
        int64_t back = 0;
        assert_int_equal(gs_go_duration_parse(buf, &back, NULL), 0);
        assert_int_equal(back, f[i].ns);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepted),
        cmocka_unit_test(refused_with_reason),
        cmocka_unit_test(string_form),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
