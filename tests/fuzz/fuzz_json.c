/*
 * fuzz_json.c - JSON bytes -> gs_json_decode -> gs_object_decode.
 *
 * Whatever the input, decoding must not crash, leak or trip a sanitizer, and
 * a document that decodes must survive both encoders: its JSON and YAML text
 * read back to an equal tree (the round trip validate -o relies on).
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
    if (gs_json_decode((const char *)data, size, &doc, &d) == 0) {
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
