/*
 * fuzz_mig_minors.c - fuzz target for the driver's mig-minors parser
 * (node/migcaps.h).
 *
 * Any byte string must parse or be refused with a message naming a line;
 * whatever parses must answer lookups for every entry it kept with the
 * minor it read, and leave nothing allocated on refusal.
 */
#include "core/error.h"
#include "node/migcaps.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_migcaps c;
    char err[256] = "";
    int rc = gs_migcaps_parse((const char *)data, size, &c, err, sizeof err);
    if (rc) {
        if (rc != GS_EINVAL && rc != GS_ENOMEM) abort();
        if (rc == GS_EINVAL && strncmp(err, "line ", 5)) abort();
        if (c.v || c.n) abort();
        return 0;
    }
    for (int i = 0; i < c.n; i++) {
        const struct gs_migcap *m = &c.v[i];
        if (m->minor < 0 || m->gpu < 0 || m->gi < 0 || m->ci < -1) abort();
        if (gs_migcaps_minor(&c, m->gpu, m->gi, m->ci) != m->minor) abort();
    }
    gs_migcaps_free(&c);
    return 0;
}
