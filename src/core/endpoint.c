/*
 * endpoint.c - validation of agent endpoints; see endpoint.h.
 *
 * A whitelist rather than a URL parser: what is not scheme, host characters,
 * one colon and digits is refused, so no parser differential (curl's versus
 * ours) can smuggle a path, a fragment or credentials through.
 */
#include "core/endpoint.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

static bool hex6_char(char c)
{
    return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') || c == ':' || c == '.';
}

static int fail(char *why, size_t wl, const char *ep, const char *what)
{
    snprintf(why, wl, "invalid agent endpoint \"%.200s\": %s", ep, what);
    return -1;
}

int gs_endpoint_check(const char *ep, char *why, size_t wl)
{
    if (!ep) return fail(why, wl, "", "absent");
    const char *p;
    if (!strncmp(ep, "http://", 7)) p = ep + 7;
    else if (!strncmp(ep, "https://", 8)) p = ep + 8;
    else return fail(why, wl, ep, "must start with http:// or https://");
    if (strchr(p, '@')) return fail(why, wl, ep, "may not carry user information");
    const char *h = p;
    if (*p == '[') {
        for (p++; hex6_char(*p); p++) {}
        if (*p != ']' || p == h + 1) return fail(why, wl, ep, "an IPv6 host must be [hex digits and colons]");
        p++;
    } else {
        for (; host_char(*p); p++) {}
        if (p == h) return fail(why, wl, ep, "must name a host (http://HOST:PORT)");
        if (*h == '-' || *h == '.') return fail(why, wl, ep, "the host may not start with '-' or '.'");
    }
    if (p - h > 253) return fail(why, wl, ep, "the host is longer than 253 characters");
    if (*p != ':') {
        if (!*p) return fail(why, wl, ep, "must end with :PORT");
        return fail(why, wl, ep, "must be exactly http(s)://HOST:PORT (no user information, path, query or fragment)");
    }
    long port = 0;
    const char *d = ++p;
    for (; *p >= '0' && *p <= '9' && p - d < 6; p++) port = port * 10 + (*p - '0');
    if (p == d || *d == '0' || port < 1 || port > 65535)
        return fail(why, wl, ep, "the port must be a number from 1 to 65535");
    if (*p) return fail(why, wl, ep, "must be exactly http(s)://HOST:PORT (no user information, path, query or fragment)");
    return 0;
}
