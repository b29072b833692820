/*
 * quantity.c - exact parsing and canonical formatting of resource quantities.
 *
 * The grammar is Kubernetes' documented one:
 *
 *   <quantity>  ::= <sign>? <number> <suffix>
 *   <number>    ::= <digits> | <digits> "." <digits>? | "." <digits>
 *   <suffix>    ::= "" | n u m k M G T P E | Ki Mi Gi Ti Pi Ei
 *                 | ("e" | "E") <sign>? <digits>
 *
 * apimachinery's scanner is laxer than its own grammar in two corners, and we
 * follow the grammar there: a number needs at least one digit ("Ki", "-" and
 * "." are refused, apimachinery reads them as 0), and an exponent is a plain
 * int64 (what its strconv.ParseInt accepts; "1e1.5" is refused by both).
 *
 * Where apimachinery rounds (up to 1n, or caps at 2^63-1), we refuse: the
 * scheduler compares sums of requests against capacities, and a silently
 * rounded request would make those sums lie. The value is held as
 *     D * 10^e * 2^b   (D the significant digits, trailing zeros moved to e)
 * and converted to milli-units with checked integer arithmetic only. When
 * e < 0 the result is whole only if 10^-e divides D * 2^b; since D has no
 * factor 10, that requires -e <= b <= 60, so at most 60 long divisions of a
 * digit string by 5 are ever needed and no input can make parsing slow.
 */
#include "core/quantity.h"

#include "core/error.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Exponents beyond this cannot change the outcome (inputs are far shorter
 * than 2^40 bytes) and keep the exponent arithmetic clear of overflow. */
#define EXP_CLAMP ((int64_t)1 << 40)
/* A D with more significant digits than this overflows even after the
 * largest possible division (by 5^60 < 10^42): 10^63 / 10^42 > 2^63. */
#define MAX_SIG_DIGITS 64

static const char WHY_EMPTY[] = "empty quantity";
static const char WHY_NODIGITS[] = "no digits in number";
static const char WHY_JUNK[] = "unexpected character after number";
static const char WHY_SUFFIX[] = "unknown suffix (want Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or e<exponent>)";
static const char WHY_EXP[] = "malformed exponent (want e or E followed by an integer)";
static const char WHY_EXPRANGE[] = "exponent out of range";
static const char WHY_OVERFLOW[] = "value too large (overflows int64 milli-units)";
static const char WHY_PRECISION[] = "precision finer than 1m";

/*--- Suffixes ---*/

struct suffix {
    const char *text;
    int exp10; /* power of ten */
    int exp2;  /* power of two */
};

static const struct suffix suffixes[] = {
    {"", 0, 0},   {"n", -9, 0}, {"u", -6, 0}, {"m", -3, 0},  {"k", 3, 0},
    {"M", 6, 0},  {"G", 9, 0},  {"T", 12, 0}, {"P", 15, 0},  {"E", 18, 0},
    {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
};

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Parses [+-]?[0-9]+ to the end of s as strconv.ParseInt(s, 10, 64) would,
 * but saturating at +-EXP_CLAMP instead of failing for long inputs within int64. */
static int parse_exponent(const char *s, int64_t *out, const char **why)
{
    bool neg = false;
    if (*s == '+' || *s == '-') neg = *s++ == '-';
    if (!is_digit(*s)) { *why = WHY_EXP; return GS_EINVAL; }
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; is_digit(*s); s++) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v) ||
            v > lim) {
            *why = WHY_EXPRANGE;
            return GS_ERANGE;
        }
    }
    if (*s) { *why = WHY_EXP; return GS_EINVAL; }
    int64_t e = v > (uint64_t)EXP_CLAMP ? EXP_CLAMP : (int64_t)v;
    *out = neg ? -e : e;
    return 0;
}

static int parse_suffix(const char *s, int64_t *exp10, int *exp2, const char **why)
{
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        if (strcmp(s, suffixes[i].text) == 0) {
            *exp10 = suffixes[i].exp10;
            *exp2 = suffixes[i].exp2;
            return 0;
        }
    }
    *exp2 = 0;
    if ((s[0] == 'e' || s[0] == 'E') && s[1]) return parse_exponent(s + 1, exp10, why);
    *why = strchr("eEinumkKMGTP", s[0]) ? WHY_SUFFIX : WHY_JUNK;
    return GS_EINVAL;
}

/*--- Digits to milli-units ---*/

/* The number's digits with the decimal point removed, as one virtual string. */
struct digits {
    const char *ip, *fp; /* integer and fraction digits */
    size_t ni, nf;
};

static char digit_at(const struct digits *d, size_t i)
{
    return i < d->ni ? d->ip[i] : d->fp[i - d->ni];
}

/* Divides the decimal string s (n digits) by 5 in place; false if not exact. */
static bool div5(char *s, size_t n)
{
    unsigned rem = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned cur = rem * 10 + (unsigned)(s[i] - '0');
        s[i] = (char)('0' + cur / 5);
        rem = cur % 5;
    }
    return rem == 0;
}

static bool to_u64(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(s[i] - '0'), &v))
            return false;
    }
    *out = v;
    return true;
}

static bool mul_pow(uint64_t *v, uint64_t base, int64_t times)
{
    for (int64_t i = 0; i < times; i++)
        if (__builtin_mul_overflow(*v, base, v)) return false;
    return true;
}

/* |value| = sig * 10^e10 * 2^e2 in milli-units, or an error. */
static int magnitude(const char *sig, size_t nsig, int64_t e10, int e2, uint64_t *out, const char **why)
{
    char buf[MAX_SIG_DIGITS];
    if (nsig > MAX_SIG_DIGITS) { *why = WHY_OVERFLOW; return GS_ERANGE; }
    memcpy(buf, sig, nsig);
    if (e10 < 0) {
        /* sig has no factor 10, so 10^-e10 can only divide sig * 2^e2 when -e10 <= e2 */
        if (-e10 > e2) { *why = WHY_PRECISION; return GS_ERANGE; }
        for (int64_t i = 0; i < -e10; i++)
            if (!div5(buf, nsig)) { *why = WHY_PRECISION; return GS_ERANGE; }
        e2 -= (int)-e10;
        e10 = 0;
    }
    uint64_t v;
    if (e10 > 19 || !to_u64(buf, nsig, &v) || !mul_pow(&v, 10, e10) || !mul_pow(&v, 2, e2)) {
        *why = WHY_OVERFLOW;
        return GS_ERANGE;
    }
    *out = v;
    return 0;
}

/* Strips leading and trailing zeros of the digit string, folding the trailing
 * ones into e10, and computes the magnitude. A zero value yields 0. */
static int digits_value(const struct digits *d, int64_t e10, int e2, uint64_t *out, const char **why)
{
    size_t n = d->ni + d->nf, first = 0, last = n;
    while (first < n && digit_at(d, first) == '0') first++;
    if (first == n) { *out = 0; return 0; }
    while (digit_at(d, last - 1) == '0') last--;
    size_t nsig = last - first;
    if (nsig > MAX_SIG_DIGITS) { *why = WHY_OVERFLOW; return GS_ERANGE; }
    char sig[MAX_SIG_DIGITS];
    for (size_t i = 0; i < nsig; i++) sig[i] = digit_at(d, first + i);
    /* n and d->nf are below 2^40 in practice; e10 is clamped to +-2^40 */
    e10 += 3 - (int64_t)d->nf + (int64_t)(n - last);
    return magnitude(sig, nsig, e10, e2, out, why);
}

/*--- Public API ---*/

int gs_quantity_parse(const char *s, int64_t *milli, const char **why)
{
    const char *dummy;
    if (!why) why = &dummy;
    if (!s || !*s) { *why = WHY_EMPTY; return GS_EINVAL; }
    bool neg = false;
    if (*s == '+' || *s == '-') neg = *s++ == '-';
    struct digits d = {.ip = s};
    while (is_digit(*s)) s++;
    d.ni = (size_t)(s - d.ip);
    if (*s == '.') {
        d.fp = ++s;
        while (is_digit(*s)) s++;
        d.nf = (size_t)(s - d.fp);
    }
    if (d.ni + d.nf == 0) { *why = WHY_NODIGITS; return GS_EINVAL; }
    int64_t e10;
    int e2;
    int rc = parse_suffix(s, &e10, &e2, why);
    if (rc) return rc;
    uint64_t mag;
    rc = digits_value(&d, e10, e2, &mag, why);
    if (rc) return rc;
    uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (mag > lim) { *why = WHY_OVERFLOW; return GS_ERANGE; }
    if (milli) *milli = !neg ? (int64_t)mag : mag == lim ? INT64_MIN : -(int64_t)mag;
    return 0;
}

static int ndigits(uint64_t v)
{
    int n = 1;
    while (v >= 10) { v /= 10; n++; }
    return n;
}

/* Divides *m by base `times` times; false as soon as a division is inexact. */
static bool divide_out(uint64_t *m, uint64_t base, int times)
{
    for (int i = 0; i < times; i++) {
        if (*m % base) return false;
        *m /= base;
    }
    return true;
}

/* The shortest "<mantissa><suffix>" for a whole number of units; binary wins
 * ties because memory sizes are usually powers of two. */
static const struct suffix *best_suffix(uint64_t units, uint64_t *mant)
{
    const struct suffix *best = &suffixes[0];
    *mant = units;
    if (units == 0) return best;
    int bestlen = ndigits(units);
    for (size_t i = 1; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        const struct suffix *sf = &suffixes[i];
        if (sf->exp10 <= 0 && sf->exp2 == 0) continue; /* n u m are not for whole units */
        uint64_t m = units;
        if (!divide_out(&m, 1000, sf->exp10 / 3) || !divide_out(&m, 1024, sf->exp2 / 10)) continue;
        int len = ndigits(m) + (int)strlen(sf->text);
        if (len < bestlen || (len == bestlen && sf->exp2 && !best->exp2)) {
            best = sf, bestlen = len, *mant = m;
        }
    }
    return best;
}

int gs_quantity_format(int64_t milli, char *buf, size_t len)
{
    uint64_t mag = milli < 0 ? 0 - (uint64_t)milli : (uint64_t)milli;
    const char *sign = milli < 0 ? "-" : "";
    if (mag % 1000 != 0) return snprintf(buf, len, "%s%" PRIu64 "m", sign, mag);
    uint64_t mant;
    const struct suffix *sf = best_suffix(mag / 1000, &mant);
    return snprintf(buf, len, "%s%" PRIu64 "%s", sign, mant, sf->text);
}

int gs_quantity_whole(int64_t milli, int64_t *units)
{
    if (milli % 1000 != 0) return GS_EINVAL;
    if (units) *units = milli / 1000;
    return 0;
}
