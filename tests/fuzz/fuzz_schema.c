/*
 * fuzz_schema.c - JSON bytes -> gs_json_decode -> gs_schema_check, as a
 * whole object and as a patch, for the kind the document names and for
 * Pod (the deepest table).
 *
 * Whatever the input, the walk must not crash, leak or trip a sanitizer,
 * every enum violation must name its field and use kube's text, and the
 * patch walk must not report more unknown fields than the object walk (it
 * only skips). (An unknown field may be called "": its path is then empty.)
 */
#include "core/codec.h"
#include "core/schema.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void walk(const char *api, const char *kind, const json_t *doc)
{
    struct gs_diags u = {0}, up = {0}, inv = {0};
    if (gs_schema_check(api, kind, doc, 0, &u, &inv)) abort();
    if (gs_schema_check(api, kind, doc, GS_SCHEMA_PATCH, &up, NULL)) abort();
    if (up.n > u.n) abort();
    for (size_t i = 0; i < u.n; i++)
        if (strcmp(u.v[i].msg, "unknown field")) abort();
    for (size_t i = 0; i < inv.n; i++)
        if (!inv.v[i].path[0] || strncmp(inv.v[i].msg, "Unsupported value: ", 19)) abort();
    gs_diags_free(&u);
    gs_diags_free(&up);
    gs_diags_free(&inv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = NULL;
    struct gs_diags d = {0};
    if (gs_json_decode((const char *)data, size, &doc, &d) == 0) {
        walk(json_string_value(json_object_get(doc, "apiVersion")), json_string_value(json_object_get(doc, "kind")),
             doc);
        walk("v1", "Pod", doc);
        json_decref(doc);
    }
    gs_diags_free(&d);
    return 0;
}
