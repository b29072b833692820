/*
 * image.h - the node's local image store: OCI image layouts imported from
 * files, resolved by reference, unpacked once per manifest digest.
 *
 * No registry is reachable from a node, so images arrive the way `ctr images
 * import` brings them: `gpusched image import FILE.tar|DIR` copies an OCI
 * image layout (a directory, or a tar of one; `docker save` archives with an
 * index.json are OCI layouts too) into <store>/ (blobs/sha256/..., index.json
 * with every imported reference as `org.opencontainers.image.ref.name`).
 * The runc runtime asks gs_image_resolve for a pod's `image`; the first use
 * of a manifest unpacks its layers (whiteouts honoured) into
 * <store>/rootfs/<digest>/ with libarchive, later uses share it read-only.
 *
 * References are normalised as kubelet does: "busybox" and
 * "docker.io/library/busybox:latest" name the same image; a reference with
 * "@sha256:" matches by manifest digest.
 *
 * Errors are returned with a message naming the file, the field and why.
 * Not thread-safe per store directory across processes except for resolve,
 * which unpacks into a temporary directory and renames it into place.
 */
#ifndef GS_NODE_IMAGE_H
#define GS_NODE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* What the image's config says about how to run it (config.config of the
 * OCI image config). Every field may be NULL / empty. */
struct gs_image_config {
    char **entrypoint;      /* NULL-terminated, owned */
    char **cmd;             /* NULL-terminated, owned */
    char **env;             /* "K=V", NULL-terminated, owned */
    char *workdir;          /* owned */
    char *user;             /* "uid[:gid]" or a name, owned */
};

struct gs_image {
    char *ref;              /* the normalised reference it was found by, owned */
    char digest[80];        /* "sha256:<hex>" of the manifest */
    char *rootfs;           /* absolute path of the unpacked root file system, owned */
    int64_t size;           /* bytes of its layers (compressed) */
    struct gs_image_config config;
};

/* Normalises a reference the way kubelet does ("busybox" ->
 * "docker.io/library/busybox:latest"). 0, or GS_EINVAL with err saying why. */
int gs_image_ref_normalize(const char *ref, char *out, size_t outlen, char *err, size_t errlen);

/* Imports an OCI image layout (directory or tar file) into the store at
 * store_dir (created when absent). Every reference in its index.json is
 * added; *n_refs (may be NULL) receives how many. 0, or GS_EINVAL / GS_EIO. */
int gs_image_import(const char *store_dir, const char *path, size_t *n_refs, char *err, size_t errlen);

/* Finds ref in the store and unpacks its root file system when not yet done.
 * 0 and *out filled (free with gs_image_free); GS_ENOENT when the store has
 * no such image (err: "image \"X\" is not in the node's image store"),
 * GS_EINVAL / GS_EIO otherwise. */
int gs_image_resolve(const char *store_dir, const char *ref, struct gs_image *out, char *err, size_t errlen);

/* Every image in the store, for `gpusched image ls`. *out is an array of
 * *n entries (rootfs NULL unless unpacked); free with gs_image_list_free. */
int gs_image_list(const char *store_dir, struct gs_image **out, size_t *n, char *err, size_t errlen);

/* Removes a reference (and the blobs and rootfs no other reference uses).
 * GS_ENOENT when absent. */
int gs_image_remove(const char *store_dir, const char *ref, char *err, size_t errlen);

void gs_image_free(struct gs_image *img);
void gs_image_list_free(struct gs_image *v, size_t n);
void gs_image_config_free(struct gs_image_config *c);

/*--- The documents' parsers (image.c; exposed for tests and the fuzz target) ---*/

/* A content descriptor: what index.json and a manifest point at. */
struct gs_image_desc {
    char media_type[128];
    char digest[80];        /* "sha256:<64 hex>", checked */
    int64_t size;           /* >= 0 */
    char *ref;              /* the normalised reference it names (index entries), owned, may be NULL */
};

/* A manifest: its config and layers, in order. */
struct gs_image_manifest {
    struct gs_image_desc config;
    struct gs_image_desc *layers;   /* owned */
    size_t n_layers;
};

/* index.json (an OCI image index): its manifests[] into *out (*n entries,
 * free with gs__image_descs_free). what names the document in err. */
int gs__image_parse_index(const char *text, size_t len, const char *what, struct gs_image_desc **out, size_t *n,
                          char *err, size_t errlen);
/* An image manifest (OCI or Docker schema 2). Free with gs__image_manifest_free. */
int gs__image_parse_manifest(const char *text, size_t len, const char *what, struct gs_image_manifest *out,
                             char *err, size_t errlen);
/* An image config: config.{Entrypoint,Cmd,Env,WorkingDir,User}. Free with gs_image_config_free. */
int gs__image_parse_config(const char *text, size_t len, const char *what, struct gs_image_config *out,
                           char *err, size_t errlen);
void gs__image_descs_free(struct gs_image_desc *v, size_t n);
void gs__image_manifest_free(struct gs_image_manifest *m);

#endif
