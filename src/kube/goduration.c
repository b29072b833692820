/*
 * goduration.c - Go duration strings; see goduration.h.
 *
 * Exact integer arithmetic as Go's: the whole part and up to the
 * nanosecond of the fraction, each term checked against int64 overflow, so
 * that a value reads back to itself through gs_go_duration_format.
 */
#include "kube/goduration.h"

#include "core/error.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int64_t ns;
} units[] = {
    {"ns", 1}, {"us", 1000}, {"\xc2\xb5s", 1000}, {"\xce\xbcs", 1000}, {"ms", 1000000},
    {"s", 1000000000LL}, {"m", 60 * 1000000000LL}, {"h", 3600 * 1000000000LL},
};

int gs_go_duration_parse(const char *s, int64_t *ns, const char **why)
{
    const char *dummy;
    if (!why) why = &dummy;
    *why = "";
    *ns = 0;
    if (!s || !*s) return *why = "empty duration", GS_EINVAL;
    bool neg = false;
    if (*s == '-' || *s == '+') neg = *s++ == '-';
    if (!strcmp(s, "0")) return 0;
    if (!*s) return *why = "a sign without a number", GS_EINVAL;
    uint64_t total = 0;
    const uint64_t limit = (uint64_t)INT64_MAX + (neg ? 1 : 0);
    while (*s) {
        if (!(*s >= '0' && *s <= '9') && *s != '.') return *why = "want a number before each unit", GS_EINVAL;
        uint64_t whole = 0, frac = 0, scale = 1;
        bool digits = false, over = false;
        for (; *s >= '0' && *s <= '9'; s++, digits = true) {
            if (whole > (UINT64_MAX - 9) / 10) over = true;
            else whole = whole * 10 + (uint64_t)(*s - '0');
        }
        if (*s == '.') {
            s++;
            for (; *s >= '0' && *s <= '9'; s++, digits = true)
                if (scale < 1000000000000000000ULL) { /* digits past 1e-18 cannot matter */
                    frac = frac * 10 + (uint64_t)(*s - '0');
                    scale *= 10;
                }
        }
        if (!digits) return *why = "a '.' without digits", GS_EINVAL;
        size_t ul = 0;
        while (s[ul] && !(s[ul] >= '0' && s[ul] <= '9') && s[ul] != '.') ul++;
        if (!ul) return *why = "missing unit (ns, us, ms, s, m or h)", GS_EINVAL;
        int64_t unit = 0;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
            if (strlen(units[i].name) == ul && !strncmp(units[i].name, s, ul)) unit = units[i].ns;
        if (!unit) return *why = "unknown unit (want ns, us, ms, s, m or h)", GS_EINVAL;
        s += ul;
        if (over || whole > limit / (uint64_t)unit) return *why = "too large", GS_ERANGE;
        uint64_t v = whole * (uint64_t)unit;
        /* frac / scale of a unit, in ns: exact for every unit up to an hour */
        v += (uint64_t)((long double)frac * (long double)unit / (long double)scale);
        if (v > limit || total > limit - v) return *why = "too large", GS_ERANGE;
        total += v;
    }
    *ns = neg ? (int64_t)(0 - total) : (int64_t)total;
    return 0;
}

int gs_go_duration_format(int64_t ns, char *buf, size_t len)
{
    if (ns == 0) return snprintf(buf, len, "0s");
    uint64_t u = ns < 0 ? 0 - (uint64_t)ns : (uint64_t)ns;
    const char *sign = ns < 0 ? "-" : "";
    if (u < 1000000000ULL) { /* below a second: one unit with a fraction, as Go */
        const char *name = u < 1000 ? "ns" : u < 1000000 ? "\xc2\xb5s" : "ms";
        uint64_t div = u < 1000 ? 1 : u < 1000000 ? 1000 : 1000000;
        char frac[16] = "";
        if (u % div) {
            int w = div == 1000 ? 3 : 6;
            snprintf(frac, sizeof frac, ".%0*llu", w, (unsigned long long)(u % div));
            for (char *e = frac + strlen(frac) - 1; *e == '0'; e--) *e = 0;
        }
        return snprintf(buf, len, "%s%llu%s%s", sign, (unsigned long long)(u / div), frac, name);
    }
    uint64_t h = u / 3600000000000ULL, m = u / 60000000000ULL % 60, sec = u / 1000000000ULL % 60,
             sub = u % 1000000000ULL;
    char frac[16] = "";
    if (sub) {
        snprintf(frac, sizeof frac, ".%09llu", (unsigned long long)sub);
        for (char *e = frac + strlen(frac) - 1; *e == '0'; e--) *e = 0;
    }
    if (h) return snprintf(buf, len, "%s%lluh%llum%llu%ss", sign, (unsigned long long)h, (unsigned long long)m,
                           (unsigned long long)sec, frac);
    if (m) return snprintf(buf, len, "%s%llum%llu%ss", sign, (unsigned long long)m, (unsigned long long)sec, frac);
    return snprintf(buf, len, "%s%llu%ss", sign, (unsigned long long)sec, frac);
}
