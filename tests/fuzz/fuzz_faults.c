/*
 * fuzz_faults.c - fault script parser fuzz target.
 *
 * Any byte string must parse or fail with a message; a parsed script is
 * sorted by time, has known kinds, GPUs in range and non-negative times.
 */
#include "discovery/discovery.h"

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
    struct gs_fault *v = NULL;
    size_t n = 0;
    char err[160] = "";
    int rc = gs_fault_script_parse(s, &v, &n, err, sizeof err);
    free(s);
    if (rc) {
        if (v || n || (rc == GS_EINVAL && !err[0])) abort();
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i].kind != GS_EV_XID && v[i].kind != GS_EV_ECC_DBE && v[i].kind != GS_EV_LOST) abort();
        if (v[i].gpu < -1 || v[i].gpu >= GS_DISC_MAX_GPUS || v[i].at_ns < 0 || v[i].for_ns < 0) abort();
        if (v[i].kind == GS_EV_XID && v[i].value == 0) abort();
        if (i && v[i].at_ns < v[i - 1].at_ns) abort();
    }
    free(v);
    return 0;
}
