/*
 * fuzz_proto.c - bytes -> gs__proto_decode, the protobuf DeleteOptions and
 * Eviction bodies client-go sends (src/control/api_proto.c).
 *
 * Whatever the input, decoding must not crash, read out of bounds, leak or
 * trip a sanitizer; a failure always says why and leaves no object; a
 * success is a JSON object naming one of the two kinds.
 */
#include "control/api.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *o = NULL;
    char why[256] = "";
    int err = gs__proto_decode((const char *)data, size, &o, why, sizeof why);
    if (err) {
        if (o || !why[0]) abort();
        return 0;
    }
    const char *kind = json_string_value(json_object_get(o, "kind"));
    if (!json_is_object(o) || !kind || (strcmp(kind, "DeleteOptions") && strcmp(kind, "Eviction"))) abort();
    json_decref(o);
    return 0;
}
