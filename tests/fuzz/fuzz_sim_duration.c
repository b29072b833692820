/*
 * fuzz_sim_duration.c - the simulator's duration annotations
 * (sim/trace_manifest.h: seconds or Go durations) fuzz target.
 *
 * Any byte string must parse to a finite value >= 0 or fail with a reason;
 * a value that parses as plain seconds must print and parse back to itself.
 */
#include "core/error.h"
#include "sim/trace_manifest.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    double v = -1;
    const char *why = NULL;
    int rc = gs_sim_duration_parse(s, &v, &why);
    free(s);
    if (rc) {
        if (rc != GS_EINVAL || !why || !*why) abort();
        return 0;
    }
    if (!isfinite(v) || v < 0) abort();
    char buf[64];
    snprintf(buf, sizeof buf, "%.17g", v);
    double back = -1;
    if (gs_sim_duration_parse(buf, &back, NULL) != 0 || back != v) abort();
    return 0;
}
