/*
 * fuzz_quantity.c - quantity parser fuzz target.
 *
 * Any byte string must parse or fail cleanly; whatever parses must format to
 * text that parses back to the same value (the canonical form is what every
 * output and the API server write, so it must never drift).
 */
#include "core/quantity.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    int64_t v;
    const char *why = NULL;
    int rc = gs_quantity_parse(s, &v, &why);
    free(s);
    if (rc != 0) {
        if (!why || !*why) abort();
        return 0;
    }
    char buf[64];
    int n = gs_quantity_format(v, buf, sizeof buf);
    if (n <= 0 || n >= (int)sizeof buf) abort();
    int64_t back;
    if (gs_quantity_parse(buf, &back, NULL) != 0 || back != v) abort();
    return 0;
}
