/*
 * test_quantity.c - quantity parsing, formatting and their round trip.
 *
 * Accepted forms are checked against values worked out by hand; random forms
 * against an independent 128-bit computation; malformed and out-of-range
 * forms against the exact error code and a non-empty explanation.
 */
#include "core/error.h"
#include "core/quantity.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define KI ((int64_t)1024)
#define MI (KI * 1024)
#define GI (MI * 1024)
#define TI (GI * 1024)
#define PI (TI * 1024)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void want_value(const char *s, int64_t want)
{
    int64_t got = 12345;
    const char *why = NULL;
    int rc = gs_quantity_parse(s, &got, &why);
    if (rc != 0 || got != want)
        fail_msg("parse(\"%s\"): rc %d (%s), got %lld, want %lld", s, rc, why ? why : "-", (long long)got,
                 (long long)want);
}

static void want_error(const char *s, int want_rc)
{
    int64_t got = 777;
    const char *why = NULL;
    int rc = gs_quantity_parse(s, &got, &why);
    if (rc != want_rc) fail_msg("parse(\"%.60s\"): rc %d, want %d", s, rc, want_rc);
    assert_non_null(why);
    assert_true(strlen(why) > 0);
    assert_int_equal(got, 777); /* untouched on failure */
}

/*--- Accepted forms ---*/

static void test_documented_forms(void **st)
{
    (void)st;
    want_value("500m", 500);
    want_value("2", 2000);
    want_value("1.5", 1500);
    want_value("16Gi", 16 * GI * 1000);
    want_value("1e3", 1000000);
    want_value("100M", INT64_C(100000000000));
    want_value("0.1", 100);
    want_value("1E-3", 1);
    want_value("12Mi", 12 * MI * 1000);
    want_value(".5", 500);
    want_value("+1", 1000);
    want_value("-1", -1000);
    want_value("1.", 1000);
    want_value("0", 0);
}

static void test_every_suffix(void **st)
{
    (void)st;
    want_value("1000000n", 1);
    want_value("3000000000n", 3000);
    want_value("1000u", 1);
    want_value("7m", 7);
    want_value("1k", 1000000);
    want_value("1M", INT64_C(1000000000));
    want_value("1G", INT64_C(1000000000000));
    want_value("1T", INT64_C(1000000000000000));
    want_value("1P", INT64_C(1000000000000000000));
    want_value("0.001E", INT64_C(1000000000000000000));
    want_value("1Ki", KI * 1000);
    want_value("1Mi", MI * 1000);
    want_value("1Gi", GI * 1000);
    want_value("1Ti", TI * 1000);
    want_value("1Pi", PI * 1000);
    want_value("8Pi", 8 * PI * 1000);
    want_value("0.001Ei", INT64_C(1152921504606846976)); /* 2^60 / 1000 units */
}

static void test_other_accepted(void **st)
{
    (void)st;
    want_value("1.5Gi", 3 * GI * 500);
    want_value("0.5Ki", 512000);
    want_value("0.0005Ki", 512);
    want_value("1.G", INT64_C(1000000000000));
    want_value("1.5000000000000000000000", 1500);
    want_value("0000000000000000000000000001", 1000);
    want_value("-0", 0);
    want_value("+0.000", 0);
    want_value("0e99", 0);
    want_value("0Ei", 0);
    want_value("1e+3", 1000000);
    want_value("1e03", 1000000);
    want_value("1E3", 1000000);
    want_value("100e-5", 1);
    want_value("25e-1", 2500);
    want_value("-.5", -500);
    want_value("0.000000000000000000000000001e30", 1000000);
    want_value("123456.789", 123456789);
    want_value("9223372036854775807m", INT64_MAX);
    want_value("-9223372036854775808m", INT64_MIN);
    want_value("9223372036854775.807", INT64_MAX);
    want_value("9223372036854775807000000n", INT64_MAX);
    want_value("0e9223372036854775807", 0);
    /* a NULL output pointer still validates */
    assert_int_equal(gs_quantity_parse("3Gi", NULL, NULL), 0);
}

/* Very long but valid strings parse in one pass. */
static void test_long_valid(void **st)
{
    (void)st;
    size_t n = 200000;
    char *s = malloc(n + 16);
    assert_non_null(s);
    memset(s, '0', n);
    strcpy(s + n, "1Ki");
    want_value(s, 1024000);
    s[0] = '0', s[1] = '.';
    strcpy(s + n, "1e199999"); /* 0.(199998 zeros)1 * 10^199999 = 1 */
    want_value(s, 1000);
    free(s);
}

/*--- Malformed forms ---*/

static void test_malformed(void **st)
{
    (void)st;
    static const char *const bad[] = {
        "",       " 1",     "1 ",      "1.5.2",  "1Kb",     "ki",        "1ki",     "1e",       "1e+",
        "1e-",    "--1",    "+-1",     "-+1",    "0x10",    "1,5",       "inf",     "NaN",      "-inf",
        "1e1.5",  "1Ke3",   "1Gix",    "Ki",     "-",       "+",         ".",       "-.",       "1K",
        "1mi",    "1\xc2\xb5", "\xef\xbc\x91", "1\n", "1\t", "1ee3",     "1e3e",    "1E3.0",    "e3",
        "1Mi3",   "1 Mi",   "1.5 Gi",  "1/2",    "1_000",   "1..5",      "1.5.",    "m",        "1iK",
        "1Mii",   "1gi",    "1GI",     "1b",     "1B",      "1e 3",      "1e3 ",    "\t1",      "1m1",
        "1E+",    "1.e",    "0.5.Ki",  "1-",     "1+1",     "1e--3",     "1e+-3",   "１Gi",      "1\xff",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) want_error(bad[i], GS_EINVAL);
    assert_int_equal(gs_quantity_parse(NULL, NULL, NULL), GS_EINVAL);
}

static void test_long_malformed(void **st)
{
    (void)st;
    size_t n = 100000;
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, 'a', n);
    s[n] = 0;
    want_error(s, GS_EINVAL);
    memset(s, '1', n);
    s[n - 1] = 'x';
    want_error(s, GS_EINVAL);
    memset(s, 'e', n);
    s[0] = '1';
    want_error(s, GS_EINVAL);
    free(s);
}

/*--- Out of range ---*/

static void test_overflow(void **st)
{
    (void)st;
    want_error("9223372036854775807", GS_ERANGE); /* fits int64, not in milli */
    want_error("9223372036854776", GS_ERANGE);
    want_error("9223372036854775.808", GS_ERANGE);
    want_error("9223372036854775808m", GS_ERANGE);
    want_error("-9223372036854775809m", GS_ERANGE);
    want_error("9223372036854775808000000n", GS_ERANGE);
    want_error("1E", GS_ERANGE);
    want_error("1Ei", GS_ERANGE);
    want_error("100000000000000000000000000000000000000000", GS_ERANGE);
    want_error("1e99999999999999999999", GS_ERANGE);
    want_error("1e9223372036854775807", GS_ERANGE);
    want_error("1e16", GS_ERANGE);
    want_error("-1e16", GS_ERANGE);
    want_value("1e15", INT64_C(1000000000000000000));
}

/* For each whole-unit suffix, the largest mantissa that fits and the next one. */
static void test_overflow_every_suffix(void **st)
{
    (void)st;
    static const struct {
        const char *sfx;
        int64_t per_unit; /* milli-units per 1<sfx> */
    } t[] = {
        {"m", 1},
        {"", 1000},
        {"k", INT64_C(1000000)},
        {"M", INT64_C(1000000000)},
        {"G", INT64_C(1000000000000)},
        {"T", INT64_C(1000000000000000)},
        {"P", INT64_C(1000000000000000000)},
        {"Ki", KI * 1000},
        {"Mi", MI * 1000},
        {"Gi", GI * 1000},
        {"Ti", TI * 1000},
        {"Pi", PI * 1000},
        {"e6", INT64_C(1000000000)},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int64_t max = INT64_MAX / t[i].per_unit;
        char buf[64];
        snprintf(buf, sizeof buf, "%lld%s", (long long)max, t[i].sfx);
        want_value(buf, max * t[i].per_unit);
        snprintf(buf, sizeof buf, "-%lld%s", (long long)max, t[i].sfx);
        want_value(buf, -max * t[i].per_unit);
        snprintf(buf, sizeof buf, "%llu%s", (unsigned long long)max + 1, t[i].sfx);
        want_error(buf, GS_ERANGE);
        snprintf(buf, sizeof buf, "-%llu%s", (unsigned long long)max + 2, t[i].sfx);
        want_error(buf, GS_ERANGE);
        snprintf(buf, sizeof buf, "99999999999999999999999%s", t[i].sfx);
        want_error(buf, GS_ERANGE);
    }
    want_error("99999999999999999999999999999999n", GS_ERANGE);
    want_error("99999999999999999999999999999u", GS_ERANGE);
}

static void test_sub_milli(void **st)
{
    (void)st;
    static const char *const fine[] = {
        "0.1m", "1n", "1u", "1e-4", "0.0001", "1.0001", "999999n", "1500n", "0.0001Ki", "1.5m",
        "-0.5m", "0.000001Ei", "1e-9223372036854775808", "0.0000000000000000000000000000001",
    };
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        want_error(fine[i], GS_ERANGE);
        const char *why = NULL;
        gs_quantity_parse(fine[i], NULL, &why);
        assert_string_equal(why, "precision finer than 1m");
    }
}

/*--- Against an independent computation ---*/

struct sfx {
    const char *text;
    int exp10, exp2;
};

static const struct sfx sfxs[] = {
    {"", 0, 0},    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},
    {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},  {"Ki", 0, 10}, {"Mi", 0, 20},
    {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60}, {"e-7", -7, 0}, {"E5", 5, 0},
};

static __int128 pow10_128(int n)
{
    __int128 v = 1;
    while (n-- > 0) v *= 10;
    return v;
}

static void test_random_against_int128(void **st)
{
    (void)st;
    for (int iter = 0; iter < 50000; iter++) {
        int64_t ip = (int64_t)(rng() % 100000);
        int k = (int)(rng() % 5);
        int64_t fp = k ? (int64_t)(rng() % (uint64_t)pow10_128(k)) : 0;
        const struct sfx *sf = &sfxs[rng() % (sizeof sfxs / sizeof sfxs[0])];
        bool neg = rng() & 1;
        char s[64];
        if (k) snprintf(s, sizeof s, "%s%lld.%0*lld%s", neg ? "-" : "", (long long)ip, k, (long long)fp, sf->text);
        else snprintf(s, sizeof s, "%s%lld%s", neg ? "-" : "", (long long)ip, sf->text);
        __int128 num = ((__int128)ip * pow10_128(k) + fp) << sf->exp2;
        __int128 den = pow10_128(k);
        int e = sf->exp10 + 3;
        if (e >= 0) num *= pow10_128(e);
        else den *= pow10_128(-e);
        if (num % den != 0) {
            want_error(s, GS_ERANGE);
        } else if (num / den > INT64_MAX) {
            want_error(s, GS_ERANGE);
        } else {
            int64_t v = (int64_t)(num / den);
            want_value(s, neg ? -v : v);
        }
    }
}

/*--- Formatting ---*/

static void want_format(int64_t milli, const char *want)
{
    char buf[64];
    int n = gs_quantity_format(milli, buf, sizeof buf);
    assert_string_equal(buf, want);
    assert_int_equal(n, (int)strlen(want));
}

static void test_format(void **st)
{
    (void)st;
    want_format(500, "500m");
    want_format(2000, "2");
    want_format(16 * GI * 1000, "16Gi");
    want_format(INT64_C(1000000000), "1M");
    want_format(0, "0");
    want_format(1000, "1");
    want_format(-1000, "-1");
    want_format(-500, "-500m");
    want_format(1500, "1500m");
    want_format(KI * 1000, "1Ki");
    want_format(1000000, "1k");
    want_format(3 * 1000000, "3k");
    want_format(1024000 * INT64_C(1000), "1024k"); /* = 1000Ki: the shorter wins */
    want_format(1536 * MI * 1000, "1536Mi");
    want_format(INT64_C(100352000) * 1000, "98000Ki"); /* ties "100352k": binary wins */
    want_format(-2 * TI * 1000, "-2Ti");
    want_format(8 * PI * 1000, "8Pi");
    want_format(INT64_C(1000000000000000000), "1P");
    want_format(INT64_MAX, "9223372036854775807m");
    want_format(INT64_MIN, "-9223372036854775808m");
    want_format(999000, "999");
    want_format(1001000, "1001");
}

static void test_format_truncates(void **st)
{
    (void)st;
    char buf[4];
    assert_int_equal(gs_quantity_format(123456000, buf, sizeof buf), 6);
    assert_string_equal(buf, "123");
    assert_int_equal(gs_quantity_format(-1500, NULL, 0), 6);
}

static void round_trip(int64_t v)
{
    char buf[64];
    int n = gs_quantity_format(v, buf, sizeof buf);
    assert_true(n > 0 && n < (int)sizeof buf);
    int64_t back = 0;
    const char *why = NULL;
    int rc = gs_quantity_parse(buf, &back, &why);
    if (rc != 0 || back != v)
        fail_msg("round trip %lld -> \"%s\" -> rc %d (%s) %lld", (long long)v, buf, rc, why ? why : "-",
                 (long long)back);
}

static void test_round_trip(void **st)
{
    (void)st;
    for (int64_t v = -20000; v <= 20000; v++) round_trip(v);
    for (int64_t base = 1; base <= INT64_MAX / 1024; base *= 1024) {
        for (int64_t m = -3000; m <= 3000; m += 7) {
            if (base <= INT64_MAX / 3000) round_trip(m * base);
        }
    }
    for (int64_t p = 1; p <= INT64_MAX / 10; p *= 10) {
        round_trip(p), round_trip(-p), round_trip(p - 1), round_trip(p + 1);
    }
    round_trip(INT64_MAX);
    round_trip(INT64_MIN);
    round_trip(INT64_MAX - 807);
    round_trip(INT64_MIN + 808);
    for (int i = 0; i < 100000; i++) {
        int64_t v = (int64_t)rng();
        switch (i % 4) {
        case 0: break;
        case 1: v >>= rng() % 63; break;
        case 2: v = (v >> 40) * 1000 * (1 << (rng() % 20)); break;
        default: v = (v >> 44) * 1000000; break;
        }
        round_trip(v);
    }
}

static void test_whole(void **st)
{
    (void)st;
    int64_t u = -1;
    assert_int_equal(gs_quantity_whole(8000, &u), 0);
    assert_int_equal(u, 8);
    assert_int_equal(gs_quantity_whole(-3000, &u), 0);
    assert_int_equal(u, -3);
    assert_int_equal(gs_quantity_whole(0, &u), 0);
    assert_int_equal(u, 0);
    u = 42;
    assert_int_equal(gs_quantity_whole(1500, &u), GS_EINVAL);
    assert_int_equal(gs_quantity_whole(1, &u), GS_EINVAL);
    assert_int_equal(gs_quantity_whole(-999, &u), GS_EINVAL);
    assert_int_equal(u, 42);
    assert_int_equal(gs_quantity_whole(INT64_MAX, &u), GS_EINVAL);
    assert_int_equal(gs_quantity_whole(INT64_MAX - 807, &u), 0);
    assert_int_equal(u, INT64_MAX / 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_documented_forms),
        cmocka_unit_test(test_every_suffix),
        cmocka_unit_test(test_other_accepted),
        cmocka_unit_test(test_long_valid),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_long_malformed),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_overflow_every_suffix),
        cmocka_unit_test(test_sub_milli),
        cmocka_unit_test(test_random_against_int128),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_format_truncates),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
