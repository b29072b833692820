/*
 * fuzz_json.c - JSON bytes -> gs_json_decode -> gs_object_decode.
 *
 * Whatever the input, decoding must not crash, leak or trip a sanitizer, and
 * a document that decodes must survive both encoders: its JSON and YAML text
 * read back to an equal tree (the round trip validate -o relies on). The
 * server's depth pre-check (gs_json_text_depth, run on raw bodies before they
 * are parsed) must agree with the depth of the tree whenever the text parses,
 * so the limit it enforces is the one the tree really has.
 */
#include "core/codec.h"
#include "core/object.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void round_trip(const json_t *doc)
{
    char *texts[2] = {gs_json_encode(doc, 0), gs_yaml_encode(doc)};
    for (int i = 0; i < 2; i++) {
        if (!texts[i]) abort();
        struct gs_docs docs;
        struct gs_diags d = {0};
        if (gs_decode_stream(texts[i], strlen(texts[i]), &docs, &d, NULL) || docs.n != 1 ||
            !json_equal(docs.docs[0], doc))
            abort();
        gs_docs_free(&docs);
        free(texts[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = NULL;
    struct gs_diags d = {0};
    int line = 0, col = 0;
    int text_depth = gs_json_text_depth((const char *)data, size, 1 << 20, &line, &col);
    if (gs_json_text_depth((const char *)data, size, GS_JSON_MAX_DEPTH, &line, &col) > GS_JSON_MAX_DEPTH &&
        (line < 1 || col < 1))
        abort();
    if (gs_json_decode((const char *)data, size, &doc, &d) == 0) {
        if (gs_json_depth(doc) != text_depth) abort();
        struct gs_object *o = NULL;
        if (gs_object_decode(doc, &o, &d) == 0) {
            round_trip(gs_object_to_json(o));
            gs_object_free(o);
        }
        json_decref(doc);
    }
    gs_diags_free(&d);
    return 0;
}
