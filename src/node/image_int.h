/*
 * image_int.h - what image.c (the store: documents, blobs, references) and
 * image_unpack.c (archives on disk: import tars and layers, with libarchive)
 * share. Not part of the public API; see image.h for the store itself.
 */
#ifndef GS_NODE_IMAGE_INT_H
#define GS_NODE_IMAGE_INT_H

#include <stddef.h>

/* Unpacks one layer (a tar, gzip- or otherwise compressed; libarchive
 * detects which) over the root file system at root (an absolute path without
 * symlinks). OCI whiteouts are applied: ".wh.NAME" removes NAME of the
 * layers below, ".wh..wh..opq" empties its directory. Entries naming ".."
 * are refused; symlinks met on the way are resolved inside root (an absolute
 * target starts again at root), so nothing is written outside it. Modes are
 * kept; owners too when running as root. what names the layer in err. */
int gs__image_unpack_layer(const char *root, const char *layer_path, const char *what, char *err, size_t errlen);

/* Extracts the regular files and directories of an image-layout tar into the
 * existing empty directory dir (other entry types are skipped); an entry
 * naming ".." or an absolute path is refused. */
int gs__image_extract_tar(const char *tar_path, const char *dir, char *err, size_t errlen);

/* Removes path and everything under it without following symlinks; a path
 * that does not exist is not an error. */
int gs__image_rm_rf(const char *path);

#endif
