/*
 * fuzz_image_layer.c - the image store's archive readers (src/node/
 * image_unpack.c): a layer unpacked over a root file system, and the tar of
 * an image layout extracted for import.
 *
 * The bytes are written to a file in a fresh scratch directory holding
 * rootfs/ and a sibling outside/; both readers run on that file. Any input
 * must unpack or fail with a message, and neither reader may leave anything
 * outside its target: outside/ stays empty and the scratch directory holds
 * only what the harness made, whatever the entries' names, symlinks,
 * whiteouts and hard links say.
 */
#include "node/image_int.h"

#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Entries of dir other than "." and "..", or -1. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char base[] = "/tmp/gs_fuzz_layer_XXXXXX", p[PATH_MAX], root[PATH_MAX], lay[PATH_MAX], err[1024];
    if (!mkdtemp(base)) return 0;
    snprintf(root, sizeof root, "%s/rootfs", base);
    snprintf(p, sizeof p, "%s/outside", base);
    snprintf(lay, sizeof lay, "%s/layer", base);
    FILE *f = fopen(lay, "wb");
    if (mkdir(root, 0755) != 0 || mkdir(p, 0755) != 0 || !f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);

    err[0] = '\0';
    if (gs__image_unpack_layer(root, lay, "layer", err, sizeof err) != 0 && !err[0]) abort();
    if (count_entries(p) != 0 || count_entries(base) != 3) abort();
    gs__image_rm_rf(root);
    if (mkdir(root, 0755) != 0) abort();
    err[0] = '\0';
    if (gs__image_extract_tar(lay, root, err, sizeof err) != 0 && !err[0]) abort();
    if (count_entries(p) != 0 || count_entries(base) != 3) abort();
    gs__image_rm_rf(base);
    return 0;
}
