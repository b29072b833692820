/*
 * image_unpack.c - archives on disk for the image store (image.h): the tar of
 * an image layout being imported, and the layers unpacked into a rootfs.
 *
 * libarchive reads every tar flavour and compression a layer may use; its
 * disk writer creates the entries (modes, times, owners when root, device
 * nodes). What libarchive cannot know is that the target is a root file
 * system: a layer's "/lib/x" must land in <root>/usr/lib/x when the layer
 * below made "lib -> /usr/lib". So every entry's parent path is resolved
 * here, component by component, the way a chroot would: ".." stops at the
 * root, an absolute symlink target restarts at the root. The resolved path
 * then has no symlinks left in it, and libarchive's SECURE_SYMLINKS and
 * SECURE_NODOTDOT checks stand guard behind that.
 *
 * OCI whiteouts are handled before libarchive sees an entry: ".wh.NAME"
 * removes NAME (recursively), ".wh..wh..opq" removes what the directory held
 * from the layers below; other ".wh..wh." entries (aufs bookkeeping) are
 * skipped. Whiteouts are applied in archive order, as the layers' writers
 * emit them before the siblings they hide.
 */
#include "node/image_int.h"

#include "core/error.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 40

/*--- Removing ---*/

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    int rc = (type == FTW_DP) ? rmdir(path) : unlink(path);
    return (rc != 0 && errno != ENOENT) ? -1 : 0;
}

int gs__image_rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : GS_EIO;
    if (!S_ISDIR(st.st_mode)) return unlink(path) == 0 ? 0 : GS_EIO;
    return nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : GS_EIO;
}

/* Removes the children of dir (an opaque whiteout), keeping dir itself. */
static int empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : GS_EIO;
    struct dirent *e;
    int rc = 0;
    char p[PATH_MAX];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p) { rc = GS_ERANGE; break; }
        if ((rc = gs__image_rm_rf(p)) != 0) break;
    }
    closedir(d);
    return rc;
}

/*--- Paths inside the root ---*/

/* Checks an entry's name: relative after a leading "./" or "/" is dropped,
 * no ".." component. Returns the name without the leading part, or NULL. */
static const char *entry_name(const char *name)
{
    while (name[0] == '/' || (name[0] == '.' && name[1] == '/')) name += (name[0] == '/') ? 1 : 2;
    for (const char *p = name; *p;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.') return NULL;
        p += len + (slash ? 1 : 0);
    }
    return name;
}

/* Resolves rel under root as a chroot would, following every symlink met in
 * the directories on the way but not the last component: out receives
 * "<root>/<dirs without symlinks>/<last>". rel "" or "." gives root. */
static int resolve_in_root(const char *root, const char *rel, char *out, size_t outlen)
{
    size_t rootlen = strlen(root);
    char rest[PATH_MAX], next[PATH_MAX], target[PATH_MAX];
    int links = 0;
    if (rootlen >= outlen || snprintf(rest, sizeof rest, "%s", rel) >= (int)sizeof rest) return GS_ERANGE;
    memcpy(out, root, rootlen + 1);
    size_t cur = rootlen;
    char *p = rest;
    while (*p) {
        char *slash = strchr(p, '/');
        if (slash) *slash = '\0';
        char *comp = p;
        p = slash ? slash + 1 : p + strlen(p);
        bool last = (*p == '\0');
        if (!*comp || !strcmp(comp, ".")) continue;
        if (!strcmp(comp, "..")) {
            while (cur > rootlen && out[cur - 1] != '/') cur--;
            if (cur > rootlen) cur--;
            out[cur] = '\0';
            continue;
        }
        size_t clen = strlen(comp);
        if (cur + 1 + clen >= outlen) return GS_ERANGE;
        out[cur] = '/';
        memcpy(out + cur + 1, comp, clen + 1);
        struct stat st;
        if (last || lstat(out, &st) != 0 || !S_ISLNK(st.st_mode)) {
            cur += 1 + clen;
            continue;
        }
        /* A symlink in the middle: splice its target in front of the rest. */
        if (++links > MAX_LINKS) return GS_EINVAL;
        ssize_t n = readlink(out, target, sizeof target - 1);
        if (n < 0) return GS_EIO;
        target[n] = '\0';
        out[cur] = '\0';
        if (target[0] == '/') cur = rootlen, out[cur] = '\0';
        if (snprintf(next, sizeof next, "%s/%s", target, p) >= (int)sizeof next) return GS_ERANGE;
        memcpy(rest, next, strlen(next) + 1);
        p = rest;
    }
    return 0;
}

/*--- Layers ---*/

static int apply_whiteout(const char *root, const char *name, const char *base, char *err, size_t errlen,
                          const char *what)
{
    char rel[PATH_MAX], path[PATH_MAX];
    size_t dirlen = (size_t)(base - name);
    bool opaque = !strcmp(base, ".wh..wh..opq");
    if (!opaque && !strncmp(base, ".wh..wh.", 8)) return 0; /* aufs bookkeeping */
    if (snprintf(rel, sizeof rel, "%.*s%s", (int)dirlen, name, opaque ? "" : base + 4) >= (int)sizeof rel ||
        resolve_in_root(root, rel, path, sizeof path) != 0) {
        snprintf(err, errlen, "%s: whiteout \"%s\" cannot be resolved inside the root file system", what, name);
        return GS_EINVAL;
    }
    if (opaque) {
        /* The directory itself may be a symlink in the tree so far. */
        char dir[PATH_MAX];
        if (snprintf(rel, sizeof rel, "%.*s.", (int)dirlen, name) >= (int)sizeof rel ||
            resolve_in_root(root, rel, dir, sizeof dir) != 0) {
            snprintf(err, errlen, "%s: opaque whiteout \"%s\" cannot be resolved", what, name);
            return GS_EINVAL;
        }
        size_t l = strlen(dir);
        if (l >= 2 && !strcmp(dir + l - 2, "/.")) dir[l - 2] = '\0';
        if (empty_dir(dir) != 0) {
            snprintf(err, errlen, "%s: opaque whiteout \"%s\": cannot empty %s: %s", what, name, dir, strerror(errno));
            return GS_EIO;
        }
        return 0;
    }
    if (strlen(path) <= strlen(root)) {
        snprintf(err, errlen, "%s: whiteout \"%s\" would remove the root itself", what, name);
        return GS_EINVAL;
    }
    if (gs__image_rm_rf(path) != 0) {
        snprintf(err, errlen, "%s: whiteout \"%s\": cannot remove %s: %s", what, name, path, strerror(errno));
        return GS_EIO;
    }
    return 0;
}

/* Makes way for an entry: a directory replaced by a non-directory (or the
 * other way round) is removed first, as the layer replaces it. */
static void make_way(const char *path, mode_t type)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode) && type != AE_IFDIR) gs__image_rm_rf(path);
    else if (!S_ISDIR(st.st_mode) && type == AE_IFDIR) unlink(path);
}

static int unpack_entry(struct archive *in, struct archive *out, struct archive_entry *e, const char *root,
                        const char *what, char *err, size_t errlen)
{
    const char *raw = archive_entry_pathname(e);
    const char *name = raw ? entry_name(raw) : NULL;
    char path[PATH_MAX];
    if (!name) {
        snprintf(err, errlen, "%s: entry \"%s\" escapes the root file system (\"..\")", what, raw ? raw : "");
        return GS_EINVAL;
    }
    if (!*name) return 0; /* "./" itself */
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    if (!*base) { /* "dir/": drop the slash */
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%.*s", (int)(base - name - 1), name);
        archive_entry_copy_pathname(e, tmp);
        return unpack_entry(in, out, e, root, what, err, errlen);
    }
    if (!strncmp(base, ".wh.", 4)) return apply_whiteout(root, name, base, err, errlen, what);
    if (resolve_in_root(root, name, path, sizeof path) != 0) {
        snprintf(err, errlen, "%s: entry \"%s\" cannot be resolved inside the root file system", what, name);
        return GS_EINVAL;
    }
    const char *hl = archive_entry_hardlink(e);
    if (hl) {
        const char *hname = entry_name(hl);
        char hpath[PATH_MAX];
        if (!hname || resolve_in_root(root, hname, hpath, sizeof hpath) != 0) {
            snprintf(err, errlen, "%s: hard link \"%s\" -> \"%s\" escapes the root file system", what, name, hl);
            return GS_EINVAL;
        }
        archive_entry_copy_hardlink(e, hpath);
    }
    make_way(path, archive_entry_filetype(e));
    archive_entry_copy_pathname(e, path);
    if (archive_write_header(out, e) < ARCHIVE_WARN) {
        snprintf(err, errlen, "%s: cannot create \"%s\": %s", what, name, archive_error_string(out));
        return GS_EIO;
    }
    if (archive_entry_size(e) > 0 && !hl) {
        const void *buf;
        size_t len;
        la_int64_t off;
        int r;
        while ((r = archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK) {
            if (archive_write_data_block(out, buf, len, off) < ARCHIVE_WARN) {
                snprintf(err, errlen, "%s: cannot write \"%s\": %s", what, name, archive_error_string(out));
                return GS_EIO;
            }
        }
        if (r != ARCHIVE_EOF) {
            snprintf(err, errlen, "%s: reading \"%s\": %s", what, name, archive_error_string(in));
            return GS_EIO;
        }
    }
    if (archive_write_finish_entry(out) < ARCHIVE_WARN) {
        snprintf(err, errlen, "%s: finishing \"%s\": %s", what, name, archive_error_string(out));
        return GS_EIO;
    }
    return 0;
}

static struct archive *open_reader(const char *path, const char *what, char *err, size_t errlen)
{
    struct archive *in = archive_read_new();
    if (!in) {
        snprintf(err, errlen, "%s: out of memory", what);
        return NULL;
    }
    archive_read_support_filter_all(in);
    archive_read_support_format_tar(in);
    if (archive_read_open_filename(in, path, 64 * 1024) != ARCHIVE_OK) {
        snprintf(err, errlen, "%s: cannot open %s as a tar archive: %s", what, path, archive_error_string(in));
        archive_read_free(in);
        return NULL;
    }
    return in;
}

int gs__image_unpack_layer(const char *root, const char *layer_path, const char *what, char *err, size_t errlen)
{
    struct archive *in = open_reader(layer_path, what, err, errlen);
    if (!in) return GS_EIO;
    struct archive *out = archive_write_disk_new();
    int flags = ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_UNLINK | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                ARCHIVE_EXTRACT_SECURE_NODOTDOT;
    if (geteuid() == 0) flags |= ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_XATTR;
    archive_write_disk_set_options(out, flags);
    struct archive_entry *e;
    int rc = 0, r;
    while ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
        if ((rc = unpack_entry(in, out, e, root, what, err, errlen)) != 0) break;
    }
    if (!rc && r != ARCHIVE_EOF) {
        snprintf(err, errlen, "%s: not a readable tar archive: %s", what, archive_error_string(in));
        rc = GS_EINVAL;
    }
    if (archive_write_close(out) != ARCHIVE_OK && !rc) {
        snprintf(err, errlen, "%s: setting modes and times: %s", what, archive_error_string(out));
        rc = GS_EIO;
    }
    archive_write_free(out);
    archive_read_free(in);
    return rc;
}

/*--- Layout tars ---*/

static int mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        int r = mkdir(path, 0755);
        *p = '/';
        if (r != 0 && errno != EEXIST) return GS_EIO;
    }
    return (mkdir(path, 0755) != 0 && errno != EEXIST) ? GS_EIO : 0;
}

static int extract_file(struct archive *in, const char *path, const char *name, const char *tar, char *err,
                        size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create \"%s\": %s", tar, name, strerror(errno));
        return GS_EIO;
    }
    const void *buf;
    size_t len;
    la_int64_t off;
    int r, rc = 0;
    while ((r = archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK) {
        if (pwrite(fd, buf, len, off) != (ssize_t)len) {
            snprintf(err, errlen, "%s: writing \"%s\": %s", tar, name, strerror(errno));
            rc = GS_EIO;
            break;
        }
    }
    if (!rc && r != ARCHIVE_EOF) {
        snprintf(err, errlen, "%s: reading \"%s\": %s", tar, name, archive_error_string(in));
        rc = GS_EINVAL;
    }
    if (close(fd) != 0 && !rc) rc = GS_EIO;
    return rc;
}

int gs__image_extract_tar(const char *tar_path, const char *dir, char *err, size_t errlen)
{
    struct archive *in = open_reader(tar_path, tar_path, err, errlen);
    if (!in) return GS_EINVAL;
    struct archive_entry *e;
    int rc = 0, r;
    char path[PATH_MAX];
    while ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
        const char *raw = archive_entry_pathname(e);
        mode_t type = archive_entry_filetype(e);
        if (!raw || (type != AE_IFREG && type != AE_IFDIR)) continue;
        const char *name = raw[0] == '/' ? NULL : entry_name(raw);
        if (!name) {
            snprintf(err, errlen, "%s: entry \"%s\" points outside the image layout", tar_path, raw);
            rc = GS_EINVAL;
            break;
        }
        if (!*name) continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
            snprintf(err, errlen, "%s: entry \"%s\": path too long", tar_path, raw);
            rc = GS_EINVAL;
            break;
        }
        size_t l = strlen(path);
        while (l > 1 && path[l - 1] == '/') path[--l] = '\0';
        if (type == AE_IFDIR) {
            if ((rc = mkdirs(path)) != 0) {
                snprintf(err, errlen, "%s: cannot create directory \"%s\": %s", tar_path, name, strerror(errno));
                break;
            }
            continue;
        }
        char *slash = strrchr(path, '/');
        *slash = '\0';
        rc = mkdirs(path);
        *slash = '/';
        if (rc != 0) {
            snprintf(err, errlen, "%s: cannot create the directory of \"%s\": %s", tar_path, name, strerror(errno));
            break;
        }
        if ((rc = extract_file(in, path, name, tar_path, err, errlen)) != 0) break;
    }
    if (!rc && r != ARCHIVE_EOF) {
        snprintf(err, errlen, "%s: not a readable tar archive: %s", tar_path, archive_error_string(in));
        rc = GS_EINVAL;
    }
    archive_read_free(in);
    return rc;
}
