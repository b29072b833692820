/*
 * fuzz_image_index.c - the image store's documents (src/node/image.h):
 * index.json, image manifests and image configs, as an imported layout
 * brings them.
 *
 * Any byte string must parse or fail with a message. What parses must hold:
 * every descriptor's digest is sha256:<64 hex>, sizes are not negative, an
 * index entry's reference is already normalised (normalising it again gives
 * the same text), a config's Env entries are NAME=VALUE, and its WorkingDir
 * is absolute. The same bytes also go through the reference normaliser,
 * whose output must normalise to itself.
 */
#include "core/error.h"
#include "node/image.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_desc(const struct gs_image_desc *d)
{
    if (strncmp(d->digest, "sha256:", 7) || strlen(d->digest) != 71 || d->size < 0) abort();
}

static void check_ref(const char *ref)
{
    char again[600], err[512];
    if (gs_image_ref_normalize(ref, again, sizeof again, err, sizeof err) != 0 || strcmp(again, ref)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    char err[512];
    struct gs_image_desc *v;
    size_t n;
    err[0] = '\0';
    if (gs__image_parse_index(text, size, "index.json", &v, &n, err, sizeof err) == 0) {
        for (size_t i = 0; i < n; i++) {
            check_desc(&v[i]);
            if (v[i].ref) check_ref(v[i].ref);
        }
        gs__image_descs_free(v, n);
    } else if (!err[0]) {
        abort();
    }
    struct gs_image_manifest m;
    err[0] = '\0';
    if (gs__image_parse_manifest(text, size, "manifest", &m, err, sizeof err) == 0) {
        check_desc(&m.config);
        for (size_t i = 0; i < m.n_layers; i++) check_desc(&m.layers[i]);
        gs__image_manifest_free(&m);
    } else if (!err[0]) {
        abort();
    }
    struct gs_image_config c;
    err[0] = '\0';
    if (gs__image_parse_config(text, size, "config", &c, err, sizeof err) == 0) {
        for (size_t i = 0; c.env && c.env[i]; i++)
            if (!strchr(c.env[i], '=') || c.env[i][0] == '=') abort();
        if (c.workdir && c.workdir[0] != '/') abort();
        gs_image_config_free(&c);
    } else if (!err[0]) {
        abort();
    }
    /* The bytes as a reference (up to the first NUL). */
    char ref[600], out[600];
    size_t len = size < sizeof ref - 1 ? size : sizeof ref - 1;
    memcpy(ref, data, len);
    ref[len] = '\0';
    err[0] = '\0';
    if (gs_image_ref_normalize(ref, out, sizeof out, err, sizeof err) == 0) check_ref(out);
    else if (!err[0]) abort();
    return 0;
}
