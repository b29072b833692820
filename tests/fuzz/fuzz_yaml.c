/*
 * fuzz_yaml.c - YAML stream bytes -> gs_yaml_decode_stream -> every document
 * -> gs_object_decode.
 *
 * Besides not crashing (anchors, aliases, deep nesting and odd scalars are the
 * risky parts), every decoded document must re-encode to YAML that reads
 * back to an equal tree.
 */
#include "core/codec.h"
#include "core/object.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_docs docs;
    struct gs_diags d = {0};
    size_t err_doc = 0;
    if (gs_yaml_decode_stream((const char *)data, size, &docs, &d, &err_doc) == 0) {
        for (size_t i = 0; i < docs.n; i++) {
            char *y = gs_yaml_encode(docs.docs[i]);
            if (!y) abort();
            struct gs_docs back;
            struct gs_diags d2 = {0};
            if (gs_yaml_decode_stream(y, strlen(y), &back, &d2, NULL) || back.n != 1 ||
                !json_equal(back.docs[0], docs.docs[i]))
                abort();
            gs_docs_free(&back);
            gs_diags_free(&d2);
            free(y);
            struct gs_object *o = NULL;
            if (gs_object_decode(docs.docs[i], &o, &d) == 0) gs_object_free(o);
        }
        gs_docs_free(&docs);
    } else if (err_doc == 0) {
        abort(); /* a failure always names its document */
    }
    gs_diags_free(&d);
    return 0;
}
