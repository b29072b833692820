/*
 * secret.c - token files; see secret.h.
 */
#include "control/secret.h"
#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

int gs_secret_read(const char *path, char *buf, size_t len)
{
    buf[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? GS_ENOENT : GS_EIO;
    char tmp[512];
    ssize_t n = read(fd, tmp, sizeof tmp - 1);
    close(fd);
    if (n < 0) return GS_EIO;
    tmp[n] = 0;
    size_t l = strcspn(tmp, "\r\n");
    if (l == 0 || l >= len) return GS_EPARSE;
    for (size_t i = 0; i < l; i++)
        if (tmp[i] <= ' ' || tmp[i] > '~') return GS_EPARSE;
    memcpy(buf, tmp, l);
    buf[l] = 0;
    return 0;
}

int gs_secret_ensure(const char *path, char *buf, size_t len)
{
    int err = gs_secret_read(path, buf, len);
    if (err != GS_ENOENT) return err;
    unsigned char b[24];
    if (len < 2 * sizeof b + 1 || getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) return GS_EIO;
    for (size_t i = 0; i < sizeof b; i++) snprintf(buf + 2 * i, 3, "%02x", b[i]);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return errno == EEXIST ? gs_secret_read(path, buf, len) : GS_EIO; /* lost a race: theirs */
    size_t n = strlen(buf);
    bool ok = write(fd, buf, n) == (ssize_t)n && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    close(fd);
    return ok ? 0 : GS_EIO;
}

bool gs_secret_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la != lb;
    for (size_t i = 0; i < la; i++) d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return d == 0 && lb > 0;
}
