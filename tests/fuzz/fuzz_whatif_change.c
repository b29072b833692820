/*
 * fuzz_whatif_change.c - the what-if flag values (sim/whatif.h) and the
 * snapshot's RFC 3339 times (sim/snapshot.h) fuzz target.
 *
 * The first byte picks the flag; the rest is its value. Anything must parse
 * or fail with a reason, and what parses must fit its fields.
 */
#include "core/error.h"
#include "sim/snapshot.h"
#include "sim/whatif.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const char *const flags[] = {"add-nodes", "remove-node", "set-quota", "set-weight", "time"};
    const char *flag = flags[data[0] % 5];
    char *s = malloc(size);
    if (!s) return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0;
    if (!strcmp(flag, "time")) {
        double t = 0;
        if (gs_rfc3339_seconds(s, &t) == 0 && !isfinite(t)) abort();
        free(s);
        return 0;
    }
    struct gs_whatif_change c;
    const char *why = NULL;
    int rc = gs_whatif_change_parse(flag, s, &c, &why);
    free(s);
    if (rc) {
        if (rc != GS_EINVAL || !why || !*why) abort();
        return 0;
    }
    if (!c.name[0] || memchr(c.name, 0, sizeof c.name) == NULL) abort();
    if (c.kind == GS_WHATIF_ADD_NODES && (c.count < 1 || c.count > 10000)) abort();
    if (c.kind == GS_WHATIF_SET_QUOTA && (!c.resource[0] || !c.value[0])) abort();
    return 0;
}
