/*
 * migcaps.c - the driver's MIG capability minors (migcaps.h).
 *
 * The file comes from the kernel, but the parser still treats it as outside
 * input (it is also fuzzed): every line is checked whole, numbers are bounded
 * and a refusal names the line, so a driver that changes the format yields a
 * message an operator can act on rather than a wrong device node.
 */
#include "node/migcaps.h"

#include "core/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MINOR ((1 << 20) - 1) /* Linux minor numbers are 20 bits */

/* Mock layout: see migcaps.h. */
#define MOCK_FIRST 3
#define MOCK_PER_GI 9
#define MOCK_GIS 15

/*--- Parsing ---*/

/* Reads a decimal number at *p, at most max; advances *p. -1 when none or too big. */
static long number(const char **p, const char *end, long max)
{
    const char *s = *p;
    long v = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        v = v * 10 + (*s - '0');
        if (v > max) return -1;
        s++;
    }
    if (s == *p) return -1;
    *p = s;
    return v;
}

static bool literal(const char **p, const char *end, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(end - *p) < n || memcmp(*p, lit, n)) return false;
    *p += n;
    return true;
}

/* "gpu<N>/gi<G>/access" or "gpu<N>/gi<G>/ci<C>/access" spanning [s, end). */
static bool access_name(const char *s, const char *end, struct gs_migcap *m)
{
    long gpu, gi, ci = -1;
    if (!literal(&s, end, "gpu") || (gpu = number(&s, end, GS_MIGCAPS_MAX_ID)) < 0) return false;
    if (!literal(&s, end, "/gi") || (gi = number(&s, end, GS_MIGCAPS_MAX_ID)) < 0) return false;
    if (literal(&s, end, "/ci") && (ci = number(&s, end, GS_MIGCAPS_MAX_ID)) < 0) return false;
    if (!literal(&s, end, "/access") || s != end) return false;
    m->gpu = (int)gpu, m->gi = (int)gi, m->ci = (int)ci;
    return true;
}

static bool plain_name(const char *s, const char *end)
{
    for (; s < end; s++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '/' || c == '.' || c == '-';
        if (!ok) return false;
    }
    return true;
}

static int refuse(char *err, size_t errlen, int lineno, const char *line, size_t len, const char *why)
{
    char shown[81];
    size_t n = len < sizeof shown - 1 ? len : sizeof shown - 1;
    for (size_t i = 0; i < n; i++) shown[i] = line[i] >= 0x20 && line[i] < 0x7f ? line[i] : '?';
    shown[n] = '\0';
    snprintf(err, errlen, "line %d \"%s%s\": %s", lineno, shown, len > n ? "..." : "", why);
    return GS_EINVAL;
}

static int push(struct gs_migcaps *c, const struct gs_migcap *m)
{
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 256;
        struct gs_migcap *v = realloc(c->v, (size_t)cap * sizeof *v);
        if (!v) return GS_ENOMEM;
        c->v = v, c->cap = cap;
    }
    c->v[c->n++] = *m;
    return 0;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* One line without its newline; 0, GS_EINVAL (why set) or GS_ENOMEM. */
static int parse_line(struct gs_migcaps *c, const char *s, const char *end, const char **why)
{
    while (s < end && is_space(*s)) s++;
    while (end > s && is_space(end[-1])) end--;
    if (s == end) return 0;
    const char *name_end = s;
    while (name_end < end && !is_space(*name_end)) name_end++;
    const char *p = name_end;
    while (p < end && is_space(*p)) p++;
    if (p == end) return *why = "want \"<name> <minor>\", the minor is missing", GS_EINVAL;
    long minor = number(&p, end, MAX_MINOR);
    if (minor < 0) return *why = "the minor is not a number from 0 to 1048575", GS_EINVAL;
    if (p != end) return *why = "want \"<name> <minor>\", found more after the minor", GS_EINVAL;
    struct gs_migcap m = {.minor = (int)minor};
    size_t nlen = (size_t)(name_end - s);
    int *special = nlen == 6 && !memcmp(s, "config", 6) ? &c->config
                   : nlen == 7 && !memcmp(s, "monitor", 7) ? &c->monitor : NULL;
    if (special) {
        if (*special >= 0) return *why = "listed twice", GS_EINVAL;
        *special = (int)minor;
        return 0;
    }
    if (access_name(s, name_end, &m)) {
        if (gs_migcaps_minor(c, m.gpu, m.gi, m.ci) >= 0) return *why = "listed twice", GS_EINVAL;
        return push(c, &m);
    }
    bool looks_access = nlen > 7 && !memcmp(name_end - 7, "/access", 7);
    if (!plain_name(s, name_end) || (nlen >= 3 && !memcmp(s, "gpu", 3) && looks_access))
        return *why = "malformed name (want config, monitor, gpu<N>/gi<G>/access or gpu<N>/gi<G>/ci<C>/access)",
               GS_EINVAL;
    return 0; /* a capability we do not use */
}

int gs_migcaps_parse(const char *text, size_t len, struct gs_migcaps *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->config = c->monitor = -1;
    const char *p = text, *end = text + len;
    for (int lineno = 1; p < end; lineno++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *why = NULL;
        int rc = memchr(p, '\0', (size_t)(le - p)) ? (why = "contains a NUL byte", GS_EINVAL)
                                                    : parse_line(c, p, le, &why);
        if (rc) {
            if (rc == GS_EINVAL) refuse(err, errlen, lineno, p, (size_t)(le - p), why);
            else snprintf(err, errlen, "out of memory");
            gs_migcaps_free(c);
            return rc;
        }
        p = nl ? nl + 1 : end;
    }
    return 0;
}

/*--- Loading ---*/

int gs_migcaps_load(const char *proc_root, struct gs_migcaps *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->config = c->monitor = -1;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", proc_root ? proc_root : "/proc", GS_MIGCAPS_FILE);
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(e));
        return e == ENOENT ? GS_ENOENT : GS_EIO;
    }
    char *buf = malloc(GS_MIGCAPS_MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        snprintf(err, errlen, "out of memory reading %s", path);
        return GS_ENOMEM;
    }
    /* procfs files report size 0, so read until EOF rather than stat. */
    size_t n = fread(buf, 1, GS_MIGCAPS_MAX_BYTES + 1, f);
    bool bad = ferror(f);
    fclose(f);
    int rc = 0;
    if (bad) {
        snprintf(err, errlen, "cannot read %s: read error", path);
        rc = GS_EIO;
    } else if (n > GS_MIGCAPS_MAX_BYTES) {
        snprintf(err, errlen, "%s: larger than %u bytes", path, GS_MIGCAPS_MAX_BYTES);
        rc = GS_ERANGE;
    } else {
        char why[200];
        rc = gs_migcaps_parse(buf, n, c, why, sizeof why);
        if (rc) snprintf(err, errlen, "%s: %s", path, why);
    }
    free(buf);
    return rc;
}

void gs_migcaps_mock(struct gs_migcaps *c)
{
    memset(c, 0, sizeof *c);
    c->mock = true;
    c->config = 1, c->monitor = 2;
}

int gs_migcaps_minor(const struct gs_migcaps *c, int gpu, int gi, int ci)
{
    if (c->mock) {
        if (gpu < 0 || gpu >= GS_MIGCAPS_MAX_ID / MOCK_GIS || gi < 0 || gi >= MOCK_GIS || ci < -1 ||
            ci >= MOCK_PER_GI - 1)
            return -1;
        return MOCK_FIRST + (gpu * MOCK_GIS + gi) * MOCK_PER_GI + (ci < 0 ? 0 : 1 + ci);
    }
    for (int i = 0; i < c->n; i++)
        if (c->v[i].gpu == gpu && c->v[i].gi == gi && c->v[i].ci == ci) return c->v[i].minor;
    return -1;
}

void gs_migcaps_free(struct gs_migcaps *c)
{
    free(c->v);
    c->v = NULL;
    c->n = c->cap = 0;
}
