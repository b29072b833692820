/*
 * test_image.c - the node's image store (src/node/image.h).
 *
 * The busybox test image is built at test time by scripts/make-test-image.sh
 * (Debian's busybox-static) and imported, resolved by short name, full name
 * and digest, listed and removed. Layouts with hand-made layers (written here
 * with libarchive, digests from GnuTLS) cover whiteouts, entries and symlinks
 * that try to leave the root file system, blobs whose content or size is not
 * what their descriptor says, and the documents' error messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/error.h"
#include "node/image.h"
#include "tmpdir_fixture.h"

#include <archive.h>
#include <archive_entry.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAKE_IMAGE GS_TEST_DATA "/../../scripts/make-test-image.sh"

static char base[64];

static int setup(void **state)
{
    (void)state;
    snprintf(base, sizeof base, "/tmp/gs_image_XXXXXX");
    return mkdtemp(base) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    fx_rm_tree(base);
    return 0;
}

static const char *pathf(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, PATH_MAX, fmt, ap);
    va_end(ap);
    return buf;
}

static bool exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

static void build_busybox(const char *out, const char *ref)
{
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof cmd, "bash %s %s %s >/dev/null", MAKE_IMAGE, out, ref ? ref : "");
    assert_int_equal(system(cmd), 0);
}

/*--- Hand-made layouts ---*/

struct entry {
    const char *path;
    char type;          /* 'f' file, 'd' directory, 'l' symlink */
    const char *data;   /* file content or link target */
};

static void hex_of(const void *data, size_t len, char hex[65])
{
    unsigned char md[32];
    assert_int_equal(gnutls_hash_fast(GNUTLS_DIG_SHA256, data, len, md), 0);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* Writes data as a blob of layout dir; its hex digest into hex. */
static void put_blob(const char *dir, const void *data, size_t len, char hex[65])
{
    char p[PATH_MAX];
    hex_of(data, len, hex);
    FILE *f = fopen(pathf(p, "%s/blobs/sha256/%s", dir, hex), "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static char *layer_tgz(const struct entry *e, size_t n, size_t *len)
{
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_gzip(a);
    assert_int_equal(archive_write_open_memory(a, buf, cap, len), ARCHIVE_OK);
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *ae = archive_entry_new();
        archive_entry_set_pathname(ae, e[i].path);
        archive_entry_set_mtime(ae, 1700000000, 0);
        if (e[i].type == 'd') {
            archive_entry_set_filetype(ae, AE_IFDIR);
            archive_entry_set_perm(ae, 0755);
        } else if (e[i].type == 'l') {
            archive_entry_set_filetype(ae, AE_IFLNK);
            archive_entry_set_perm(ae, 0777);
            archive_entry_set_symlink(ae, e[i].data);
        } else {
            archive_entry_set_filetype(ae, AE_IFREG);
            archive_entry_set_perm(ae, 0640);
            archive_entry_set_size(ae, (la_int64_t)strlen(e[i].data));
        }
        assert_int_equal(archive_write_header(a, ae), ARCHIVE_OK);
        if (e[i].type == 'f') archive_write_data(a, e[i].data, strlen(e[i].data));
        archive_entry_free(ae);
    }
    archive_write_close(a);
    archive_write_free(a);
    return buf;
}

struct layer {
    const struct entry *e;
    size_t n;
};

/* Makes an OCI layout at dir with one manifest of the given layers, named ref. */
static void make_layout(const char *dir, const char *ref, const struct layer *layers, size_t n_layers,
                        const char *config)
{
    char p[PATH_MAX], hex[65], man[8192], idx[1024];
    mkdir(dir, 0755);
    mkdir(pathf(p, "%s/blobs", dir), 0755);
    mkdir(pathf(p, "%s/blobs/sha256", dir), 0755);
    FILE *f = fopen(pathf(p, "%s/oci-layout", dir), "w");
    fputs("{\"imageLayoutVersion\":\"1.0.0\"}", f);
    fclose(f);
    if (!config) config = "{\"config\":{\"Cmd\":[\"sh\"]}}";
    put_blob(dir, config, strlen(config), hex);
    int k = snprintf(man, sizeof man,
                     "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
                     "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"sha256:%s\","
                     "\"size\":%zu},\"layers\":[",
                     hex, strlen(config));
    for (size_t i = 0; i < n_layers; i++) {
        size_t len;
        char *tgz = layer_tgz(layers[i].e, layers[i].n, &len);
        put_blob(dir, tgz, len, hex);
        free(tgz);
        k += snprintf(man + k, sizeof man - (size_t)k,
                      "%s{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"sha256:%s\","
                      "\"size\":%zu}",
                      i ? "," : "", hex, len);
    }
    snprintf(man + k, sizeof man - (size_t)k, "]}");
    put_blob(dir, man, strlen(man), hex);
    snprintf(idx, sizeof idx,
             "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
             "\"digest\":\"sha256:%s\",\"size\":%zu,\"annotations\":{\"org.opencontainers.image.ref.name\":\"%s\"}}]}",
             hex, strlen(man), ref);
    f = fopen(pathf(p, "%s/index.json", dir), "w");
    fputs(idx, f);
    fclose(f);
}

/*--- References ---*/

static void test_normalize(void **state)
{
    (void)state;
    static const char *const ok[][2] = {
        {"busybox", "docker.io/library/busybox:latest"},
        {"busybox:1.36", "docker.io/library/busybox:1.36"},
        {"docker.io/library/busybox:latest", "docker.io/library/busybox:latest"},
        {"team/app", "docker.io/team/app:latest"},
        {"registry.local:5000/a/b:v1", "registry.local:5000/a/b:v1"},
        {"localhost/x", "localhost/x:latest"},
        {"busybox@sha256:bb414627a286f1fbd255a32260e94256cdf35e0d0663c631006c365395cea600",
         "docker.io/library/busybox@sha256:bb414627a286f1fbd255a32260e94256cdf35e0d0663c631006c365395cea600"},
    };
    char out[600], err[512];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(gs_image_ref_normalize(ok[i][0], out, sizeof out, err, sizeof err), 0);
        assert_string_equal(out, ok[i][1]);
    }
    static const char *const bad[][2] = {
        {"", "empty"},
        {"BusyBox", "repository part \"BusyBox\" must be lowercase"},
        {"busybox:", "tag \"\""},
        {"busybox:-x", "tag \"-x\""},
        {"busybox@sha256:abc", "digest \"sha256:abc\" is not sha256:<64"},
        {"a//b", "repository part \"\""},
        {"team/", "ends with '/'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(gs_image_ref_normalize(bad[i][0], out, sizeof out, err, sizeof err), GS_EINVAL);
        if (!strstr(err, bad[i][1])) fail_msg("\"%s\": got \"%s\", want \"%s\"", bad[i][0], err, bad[i][1]);
    }
}

/*--- The busybox image ---*/

static void test_busybox_import_resolve(void **state)
{
    (void)state;
    char tar[PATH_MAX], store[PATH_MAX], p[PATH_MAX], err[1024], ref[200];
    build_busybox(pathf(tar, "%s/busybox.tar", base), NULL);
    pathf(store, "%s/store", base);
    size_t n = 0;
    assert_int_equal(gs_image_import(store, tar, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);

    struct gs_image img, again;
    assert_int_equal(gs_image_resolve(store, "busybox", &img, err, sizeof err), 0);
    assert_string_equal(img.ref, "docker.io/library/busybox:latest");
    assert_int_equal(strncmp(img.digest, "sha256:", 7), 0);
    assert_true(img.size > 100000);
    assert_non_null(img.rootfs);
    assert_true(img.rootfs[0] == '/');
    assert_int_equal(access(pathf(p, "%s/bin/busybox", img.rootfs), X_OK), 0);
    char target[64] = "";
    assert_int_equal(readlink(pathf(p, "%s/bin/sh", img.rootfs), target, sizeof target - 1), 7);
    assert_string_equal(target, "busybox");
    struct stat st;
    assert_int_equal(stat(pathf(p, "%s/tmp", img.rootfs), &st), 0);
    assert_int_equal(st.st_mode & 07777, 01777);
    if (geteuid() == 0) {
        assert_int_equal(stat(pathf(p, "%s/bin/busybox", img.rootfs), &st), 0);
        assert_int_equal(st.st_uid, 0);
    }
    assert_non_null(img.config.cmd);
    assert_string_equal(img.config.cmd[0], "sh");
    assert_null(img.config.cmd[1]);
    assert_string_equal(img.config.env[0], "PATH=/bin");
    assert_string_equal(img.config.workdir, "/");

    /* The same image by its full name, by name@digest and by bare digest,
     * sharing the root file system unpacked the first time. */
    FILE *f = fopen(pathf(p, "%s/marker", img.rootfs), "w");
    fclose(f);
    const char *forms[] = {"docker.io/library/busybox:latest", NULL, img.digest};
    snprintf(ref, sizeof ref, "busybox@%s", img.digest);
    forms[1] = ref;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gs_image_resolve(store, forms[i], &again, err, sizeof err), 0);
        assert_string_equal(again.rootfs, img.rootfs);
        assert_string_equal(again.digest, img.digest);
        assert_true(exists(pathf(p, "%s/marker", again.rootfs)));
        gs_image_free(&again);
    }

    assert_int_equal(gs_image_resolve(store, "alpine", &again, err, sizeof err), GS_ENOENT);
    assert_string_equal(err, "image \"alpine\" is not in the node's image store");
    assert_int_equal(gs_image_resolve(store, "busybox:1.0", &again, err, sizeof err), GS_ENOENT);
    assert_int_equal(gs_image_resolve(store, "Bad Ref", &again, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "\"Bad Ref\""));

    /* Importing the same tar again adds nothing. */
    assert_int_equal(gs_image_import(store, tar, &n, err, sizeof err), 0);
    struct gs_image *list;
    assert_int_equal(gs_image_list(store, &list, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].ref, "docker.io/library/busybox:latest");
    assert_string_equal(list[0].rootfs, img.rootfs);
    gs_image_list_free(list, n);
    gs_image_free(&img);
}

static void test_import_dir_and_rm(void **state)
{
    (void)state;
    char tar[PATH_MAX], tar2[PATH_MAX], store[PATH_MAX], p[PATH_MAX], err[1024], cmd[PATH_MAX * 3];
    build_busybox(pathf(tar, "%s/a.tar", base), "docker.io/library/busybox:latest");
    build_busybox(pathf(tar2, "%s/b.tar", base), "example.org/tools/bb:v2");
    /* The second as a directory: the layout unpacked by tar. */
    mkdir(pathf(p, "%s/bdir", base), 0755);
    snprintf(cmd, sizeof cmd, "tar -xf %s -C %s", tar2, p);
    assert_int_equal(system(cmd), 0);
    pathf(store, "%s/store", base);
    assert_int_equal(gs_image_import(store, tar, NULL, err, sizeof err), 0);
    assert_int_equal(gs_image_import(store, p, NULL, err, sizeof err), 0);

    struct gs_image a, b;
    assert_int_equal(gs_image_resolve(store, "busybox", &a, err, sizeof err), 0);
    assert_int_equal(gs_image_resolve(store, "example.org/tools/bb:v2", &b, err, sizeof err), 0);
    /* Different index entries, one manifest (same busybox, same bytes). */
    assert_string_equal(a.digest, b.digest);
    struct gs_image *list;
    size_t n;
    assert_int_equal(gs_image_list(store, &list, &n, err, sizeof err), 0);
    assert_int_equal(n, 2);
    gs_image_list_free(list, n);

    /* Removing one name keeps what the other needs. */
    assert_int_equal(gs_image_remove(store, "busybox", err, sizeof err), 0);
    assert_int_equal(gs_image_remove(store, "busybox", err, sizeof err), GS_ENOENT);
    assert_string_equal(err, "image \"busybox\" is not in the node's image store");
    struct gs_image c;
    assert_int_equal(gs_image_resolve(store, "busybox", &c, err, sizeof err), GS_ENOENT);
    assert_int_equal(gs_image_resolve(store, "example.org/tools/bb:v2", &c, err, sizeof err), 0);
    assert_true(exists(pathf(p, "%s/bin/busybox", c.rootfs)));
    gs_image_free(&c);
    assert_true(exists(pathf(p, "%s/blobs/sha256/%s", store, a.digest + 7)));

    /* Removing the last one by digest frees the blobs and the rootfs. */
    assert_int_equal(gs_image_remove(store, b.digest, err, sizeof err), 0);
    assert_false(exists(pathf(p, "%s/blobs/sha256/%s", store, a.digest + 7)));
    assert_false(exists(a.rootfs));
    assert_int_equal(gs_image_list(store, &list, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
    gs_image_free(&a);
    gs_image_free(&b);
}

/*--- Layers ---*/

static void test_whiteouts(void **state)
{
    (void)state;
    static const struct entry l1[] = {
        {"a", 'd', NULL},           {"a/file1", 'f', "one"}, {"a/file2", 'f', "two"}, {"d", 'd', NULL},
        {"d/x", 'f', "x"},          {"d/sub", 'd', NULL},     {"d/sub/y", 'f', "y"},   {"gone", 'd', NULL},
        {"gone/deep", 'f', "deep"}, {"lib", 'l', "/usr/lib"}, {"usr/lib/libc", 'f', "c"},
    };
    static const struct entry l2[] = {
        {"a/.wh.file1", 'f', ""}, {"d/.wh..wh..opq", 'f', ""}, {"d/z", 'f', "z"},
        {".wh.gone", 'f', ""},    {"lib/extra", 'f', "e"},       {"a/file2", 'f', "TWO"},
    };
    const struct layer layers[] = {{l1, sizeof l1 / sizeof l1[0]}, {l2, sizeof l2 / sizeof l2[0]}};
    char dir[PATH_MAX], store[PATH_MAX], p[PATH_MAX], err[1024];
    make_layout(pathf(dir, "%s/wh", base), "wh:1", layers, 2, NULL);
    pathf(store, "%s/store", base);
    assert_int_equal(gs_image_import(store, dir, NULL, err, sizeof err), 0);
    struct gs_image img;
    assert_int_equal(gs_image_resolve(store, "wh:1", &img, err, sizeof err), 0);
    assert_false(exists(pathf(p, "%s/a/file1", img.rootfs)));
    assert_false(exists(pathf(p, "%s/a/.wh.file1", img.rootfs)));
    assert_true(exists(pathf(p, "%s/a/file2", img.rootfs)));
    assert_false(exists(pathf(p, "%s/d/x", img.rootfs)));
    assert_false(exists(pathf(p, "%s/d/sub", img.rootfs)));
    assert_false(exists(pathf(p, "%s/d/.wh..wh..opq", img.rootfs)));
    assert_true(exists(pathf(p, "%s/d/z", img.rootfs)));
    assert_false(exists(pathf(p, "%s/gone", img.rootfs)));
    /* "lib/extra" went through the symlink lib -> /usr/lib, inside the root. */
    assert_true(exists(pathf(p, "%s/usr/lib/extra", img.rootfs)));
    struct stat st;
    assert_int_equal(stat(pathf(p, "%s/a/file2", img.rootfs), &st), 0);
    assert_int_equal(st.st_size, 3);
    assert_int_equal(st.st_mode & 0777, 0640);
    gs_image_free(&img);
}

static void test_escape_refused(void **state)
{
    (void)state;
    char dir[PATH_MAX], store[PATH_MAX], p[PATH_MAX], err[1024], outside[PATH_MAX];
    pathf(store, "%s/store", base);
    /* A ".." entry is refused, and nothing lands beside the store. */
    static const struct entry dots[] = {{"ok", 'f', "fine"}, {"../../../escaped", 'f', "evil"}};
    const struct layer l_dots[] = {{dots, 2}};
    make_layout(pathf(dir, "%s/dots", base), "dots:1", l_dots, 1, NULL);
    assert_int_equal(gs_image_import(store, dir, NULL, err, sizeof err), 0);
    struct gs_image img;
    assert_int_equal(gs_image_resolve(store, "dots:1", &img, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "entry \"../../../escaped\" escapes the root file system"));
    assert_non_null(strstr(err, "image docker.io/library/dots:1 layer 0"));
    assert_false(exists(pathf(p, "%s/escaped", base)));
    assert_false(exists(pathf(p, "%s/store/escaped", base)));
    /* No half-unpacked root file system is left behind. */
    assert_int_equal(system(pathf(p, "test -z \"$(ls -A %s/store/rootfs)\"", base)), 0);

    /* Symlinks pointing out (absolute, or up with ".."): written through,
     * they resolve inside the root, so the files stay in the rootfs. */
    pathf(outside, "%s/outside", base);
    mkdir(outside, 0755);
    char abs_target[PATH_MAX], rel_target[64] = "../../../../../../../../../..";
    snprintf(abs_target, sizeof abs_target, "%s", outside);
    const struct entry links[] = {
        {"abs", 'l', abs_target}, {"up", 'l', rel_target}, {"abs/f1", 'f', "1"}, {"up/f2", 'f', "2"},
    };
    const struct layer l_links[] = {{links, 4}};
    make_layout(pathf(dir, "%s/links", base), "links:1", l_links, 1, NULL);
    assert_int_equal(gs_image_import(store, dir, NULL, err, sizeof err), 0);
    assert_int_equal(gs_image_resolve(store, "links:1", &img, err, sizeof err), 0);
    assert_false(exists(pathf(p, "%s/f1", outside)));
    assert_true(exists(pathf(p, "%s%s/f1", img.rootfs, outside)));
    assert_true(exists(pathf(p, "%s/f2", img.rootfs)));
    assert_false(exists(pathf(p, "/f2")));
    gs_image_free(&img);
}

/*--- Import errors ---*/

static void corrupt_blob(const char *dir, const char *ext_hex_match, const char *data)
{
    /* Overwrites the one blob whose content contains ext_hex_match. */
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof cmd, "f=$(grep -l '%s' %s/blobs/sha256/* | head -1) && printf '%%s' '%s' > \"$f\"",
             ext_hex_match, dir, data);
    assert_int_equal(system(cmd), 0);
}

static void test_import_errors(void **state)
{
    (void)state;
    char dir[PATH_MAX], store[PATH_MAX], p[PATH_MAX], err[1024];
    pathf(store, "%s/store", base);
    static const struct entry e[] = {{"f", 'f', "x"}};
    const struct layer l[] = {{e, 1}};

    /* The config's content changed: same size, other digest. */
    make_layout(pathf(dir, "%s/bad1", base), "bad:1", l, 1, "{\"config\":{\"Cmd\":[\"sh\"]}}");
    corrupt_blob(dir, "Cmd", "{\"config\":{\"Cmd\":[\"SH\"]}}");
    assert_int_equal(gs_image_import(store, dir, NULL, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "the content does not match"));
    /* ... or its size. */
    make_layout(pathf(dir, "%s/bad2", base), "bad:2", l, 1, "{\"config\":{\"Cmd\":[\"sh\"]}}");
    corrupt_blob(dir, "Cmd", "{\"config\":{}}");
    assert_int_equal(gs_image_import(store, dir, NULL, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "is 13 bytes, its descriptor says 25"));
    /* A bad config is refused at import, naming the field. */
    make_layout(pathf(dir, "%s/bad3", base), "bad:3", l, 1, "{\"config\":{\"Env\":[\"PATH=/bin\",7]}}");
    assert_int_equal(gs_image_import(store, dir, NULL, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "config.Env[1] is not a string"));
    /* A directory that is not a layout; a missing file; a tar that is not one. */
    mkdir(pathf(dir, "%s/empty", base), 0755);
    assert_int_equal(gs_image_import(store, dir, NULL, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "is not an OCI image layout: it has no oci-layout file"));
    assert_int_equal(gs_image_import(store, pathf(dir, "%s/nope.tar", base), NULL, err, sizeof err), GS_ENOENT);
    assert_non_null(strstr(err, "nope.tar: No such file"));
    FILE *f = fopen(pathf(dir, "%s/junk.tar", base), "w");
    fputs("this is not a tar archive at all, not even close, really not", f);
    fclose(f);
    assert_int_equal(gs_image_import(store, dir, NULL, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "junk.tar"));
    /* None of them left a reference behind. */
    struct gs_image *list;
    size_t n = 9;
    assert_int_equal(gs_image_list(store, &list, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
    (void)p;
}

/*--- The documents' messages ---*/

static void test_document_errors(void **state)
{
    (void)state;
    static const char D[] = "sha256:bb414627a286f1fbd255a32260e94256cdf35e0d0663c631006c365395cea600";
    char doc[1024], err[512];
    struct gs_image_desc *v;
    size_t n;
    struct {
        const char *fmt, *want;
    } idx[] = {
        {"{", "index.json: not valid JSON (line 1)"},
        {"[]", "index.json: an image index must be a JSON object"},
        {"{\"schemaVersion\":1,\"manifests\":[]}", "index.json: schemaVersion must be 2"},
        {"{\"schemaVersion\":2}", "index.json: manifests is missing or not an array"},
        {"{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"sha256:abc\",\"size\":1}]}",
         "index.json: manifests[0].digest \"sha256:abc\" is not sha256:<64 lowercase hex digits>"},
        {"{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"sha512:abc\",\"size\":1}]}",
         "manifests[0].digest \"sha512:abc\": only sha256 digests are supported"},
        {"{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"%s\",\"size\":-1}]}",
         "manifests[0].size is missing or not a non-negative integer"},
        {"{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"%s\",\"size\":1,\"annotations\":"
         "{\"org.opencontainers.image.ref.name\":\"UPPER\"}}]}",
         "manifests[0] names a bad reference: image reference \"UPPER\": repository part \"UPPER\" must be lowercase"},
        {"{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"%s\",\"size\":1,\"annotations\":[]}]}",
         "manifests[0].annotations must be an object"},
    };
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
        snprintf(doc, sizeof doc, idx[i].fmt, D);
        assert_int_not_equal(gs__image_parse_index(doc, strlen(doc), "index.json", &v, &n, err, sizeof err), 0);
        if (!strstr(err, idx[i].want)) fail_msg("index %zu: got \"%s\", want \"%s\"", i, err, idx[i].want);
    }
    struct gs_image_manifest m;
    struct {
        const char *fmt, *want;
    } man[] = {
        {"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\"}",
         "m: mediaType application/vnd.oci.image.index.v1+json is not an image manifest"},
        {"{\"schemaVersion\":2,\"layers\":[]}", "m: config must be an object"},
        {"{\"schemaVersion\":2,\"config\":{\"digest\":\"%s\",\"size\":2}}", "m: layers is missing or not an array"},
        {"{\"schemaVersion\":2,\"config\":{\"digest\":\"%1$s\",\"size\":2},\"layers\":[{\"mediaType\":"
         "\"text/plain\",\"digest\":\"%1$s\",\"size\":3}]}",
         "m: layers[0].mediaType \"text/plain\" is not a layer type this store unpacks"},
        {"{\"schemaVersion\":2,\"config\":{\"digest\":\"%s\",\"size\":2},\"layers\":[7]}",
         "m: layers[0] must be an object"},
    };
    for (size_t i = 0; i < sizeof man / sizeof man[0]; i++) {
        snprintf(doc, sizeof doc, man[i].fmt, D);
        assert_int_not_equal(gs__image_parse_manifest(doc, strlen(doc), "m", &m, err, sizeof err), 0);
        if (!strstr(err, man[i].want)) fail_msg("manifest %zu: got \"%s\", want \"%s\"", i, err, man[i].want);
    }
    struct gs_image_config c;
    struct {
        const char *doc, *want;
    } cfg[] = {
        {"{\"config\":[]}", "c: config must be an object"},
        {"{\"config\":{\"Cmd\":\"sh\"}}", "c: config.Cmd must be an array of strings"},
        {"{\"config\":{\"Entrypoint\":[1]}}", "c: config.Entrypoint[0] is not a string"},
        {"{\"config\":{\"Env\":[\"NOEQUALS\"]}}", "c: config.Env[0] \"NOEQUALS\" is not NAME=VALUE"},
        {"{\"config\":{\"WorkingDir\":\"rel\"}}", "c: config.WorkingDir \"rel\" is not an absolute path"},
        {"{\"config\":{\"User\":5}}", "c: config.User must be a string"},
    };
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        assert_int_equal(gs__image_parse_config(cfg[i].doc, strlen(cfg[i].doc), "c", &c, err, sizeof err), GS_EINVAL);
        if (!strstr(err, cfg[i].want)) fail_msg("config %zu: got \"%s\", want \"%s\"", i, err, cfg[i].want);
    }
    /* And a good config parses to what it says. */
    const char *good = "{\"config\":{\"Entrypoint\":[\"/bin/sh\",\"-c\"],\"Cmd\":null,\"User\":\"1000:1000\"}}";
    assert_int_equal(gs__image_parse_config(good, strlen(good), "c", &c, err, sizeof err), 0);
    assert_string_equal(c.entrypoint[1], "-c");
    assert_null(c.cmd);
    assert_string_equal(c.user, "1000:1000");
    gs_image_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize),
        cmocka_unit_test_setup_teardown(test_busybox_import_resolve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_dir_and_rm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_whiteouts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_escape_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_errors, setup, teardown),
        cmocka_unit_test(test_document_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
