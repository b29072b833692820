/*
 * store_hwm.c - the store's high-water mark file (<data-dir>/store.hwm): what
 * it says, how it is read back and how it is replaced; see store.h.
 *
 * The file lives outside the SQLite files on purpose: when the database or
 * its write-ahead log goes back in time (a WAL truncated or corrupted while
 * the server was stopped, an old copy of store.db restored), this file still
 * remembers how far the store had got, so the store can refuse to serve
 * older data under versions that clients already saw. It holds two numbers:
 *
 *   committed  a version known to be committed and acknowledged (recorded
 *              a few times a second while writes happen, and at clean stop);
 *   reserved   no version above it was ever handed out (rewritten, before
 *              the commit, whenever the counter is about to pass it, one
 *              block of versions at a time).
 *
 * Replaced atomically: written to store.hwm.tmp, fsynced, renamed over the
 * old one, then the directory fsynced, so a crash leaves the old or the new
 * file, never a mix.
 */
#include "control/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HWM_HEADER "# gpusched store high-water mark: written by the server, do not edit"

static int hwm_number(const char *p, size_t n, int64_t *out)
{
    if (n == 0 || n > 18) return GS_EINVAL;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return GS_EINVAL;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 0;
}

int gs_store_hwm_parse(const char *text, size_t len, struct gs_store_hwm *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    bool have_c = false, have_r = false;
    size_t line = 0;
    for (size_t i = 0; i < len;) {
        size_t end = i;
        while (end < len && text[end] != '\n') end++;
        const char *p = text + i;
        size_t n = end - i;
        line++;
        i = end + 1;
        if (n == 0 || p[0] == '#') continue;
        const char *sp = memchr(p, ' ', n);
        int64_t v = 0;
        size_t klen = sp ? (size_t)(sp - p) : n;
        if (!sp || hwm_number(sp + 1, n - klen - 1, &v)) {
            snprintf(why, why_len, "line %zu: want \"committed N\" or \"reserved N\" with N a decimal integer", line);
            return GS_EPARSE;
        }
        if (klen == 9 && !memcmp(p, "committed", 9) && !have_c) {
            out->committed = v;
            have_c = true;
        } else if (klen == 8 && !memcmp(p, "reserved", 8) && !have_r) {
            out->reserved = v;
            have_r = true;
        } else {
            snprintf(why, why_len, "line %zu: unknown or repeated key \"%.*s\"", line, (int)(klen > 40 ? 40 : klen), p);
            return GS_EPARSE;
        }
    }
    if (!have_c || !have_r) {
        snprintf(why, why_len, "missing the \"%s\" line", have_c ? "reserved" : "committed");
        return GS_EPARSE;
    }
    if (out->reserved < out->committed) {
        snprintf(why, why_len, "reserved %lld is below committed %lld", (long long)out->reserved,
                 (long long)out->committed);
        return GS_EPARSE;
    }
    return 0;
}

int gs_store_hwm_format(const struct gs_store_hwm *h, char *buf, size_t len)
{
    int n = snprintf(buf, len, HWM_HEADER "\ncommitted %lld\nreserved %lld\n", (long long)h->committed,
                     (long long)h->reserved);
    return n < 0 || (size_t)n >= len ? GS_ERANGE : n;
}

int gs_store_hwm_read(const char *path, struct gs_store_hwm *out, char *why, size_t why_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return GS_ENOENT;
        snprintf(why, why_len, "cannot open: %s", strerror(errno));
        return GS_EIO;
    }
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf);
    int e = errno;
    close(fd);
    if (n < 0) {
        snprintf(why, why_len, "cannot read: %s", strerror(e));
        return GS_EIO;
    }
    if ((size_t)n == sizeof buf) {
        snprintf(why, why_len, "longer than %zu bytes: not a high-water mark file", sizeof buf - 1);
        return GS_EPARSE;
    }
    return gs_store_hwm_parse(buf, (size_t)n, out, why, why_len);
}

int gs_store_hwm_write(const char *dir, const struct gs_store_hwm *h, char *why, size_t why_len)
{
    char path[4200], tmp[4210], text[256];
    snprintf(path, sizeof path, "%s/store.hwm", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int n = gs_store_hwm_format(h, text, sizeof text);
    if (n < 0) return n;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, why_len, "cannot create %s: %s", tmp, strerror(errno));
        return GS_EIO;
    }
    bool ok = write(fd, text, (size_t)n) == n && fsync(fd) == 0;
    int e = errno;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path)) {
        if (ok) e = errno;
        snprintf(why, why_len, "cannot write %s: %s", path, strerror(e));
        unlink(tmp);
        return GS_EIO;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { /* the rename itself must survive a power loss */
        fsync(dfd);
        close(dfd);
    }
    return 0;
}
