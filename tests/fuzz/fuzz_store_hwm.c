/*
 * fuzz_store_hwm.c - fuzz target for the store's high-water mark file parser
 * (store_hwm.c): any bytes parse or fail with a reason; whatever parses
 * formats back to text that parses to the same two numbers.
 */
#include "control/store.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_store_hwm h, back;
    char why[256] = "";
    if (gs_store_hwm_parse((const char *)data, size, &h, why, sizeof why)) {
        if (!why[0]) abort();
        return 0;
    }
    if (h.committed < 0 || h.reserved < h.committed) abort();
    char buf[256];
    int n = gs_store_hwm_format(&h, buf, sizeof buf);
    if (n <= 0) abort();
    if (gs_store_hwm_parse(buf, (size_t)n, &back, why, sizeof why) || back.committed != h.committed ||
        back.reserved != h.reserved)
        abort();
    return 0;
}
