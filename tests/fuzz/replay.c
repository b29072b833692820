/*
 * replay.c - runs a fuzz target over every file of a corpus directory.
 *
 * Fuzz targets are written for libFuzzer (LLVMFuzzerTestOneInput). Linked with
 * this driver instead of libFuzzer, the same target becomes a plain regression
 * test built by the normal compiler: each corpus file (seeds and any crash
 * reproducers saved there) is fed once, and the run fails if the target
 * crashes or trips a sanitizer. clang is thus needed only to fuzz, not to test.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return -1; }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return -1; }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        if (r == 0) break;
        len += r;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]); return 2; }
    DIR *d = opendir(argv[1]);
    if (!d) { perror(argv[1]); return 1; }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char **nn = realloc(names, (n + 1) * sizeof *names);
        if (!nn) break;
        names = nn;
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], names[i]);
        if (run_file(path) != 0) rc = 1;
        free(names[i]);
    }
    free(names);
    printf("replayed %zu inputs from %s\n", n, argv[1]);
    if (n == 0) { fprintf(stderr, "empty corpus %s\n", argv[1]); return 1; }
    return rc;
}
