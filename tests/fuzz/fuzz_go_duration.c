/*
 * fuzz_go_duration.c - Go duration parser (kube/goduration.h) fuzz target.
 *
 * Any byte string must parse or fail with a reason; whatever parses must
 * format to the Go form that parses back to the same value (the scheduler's
 * flags are echoed in that form).
 */
#include "core/error.h"
#include "kube/goduration.h"

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
    int64_t v = 0;
    const char *why = NULL;
    int rc = gs_go_duration_parse(s, &v, &why);
    free(s);
    if (rc) {
        if ((rc != GS_EINVAL && rc != GS_ERANGE) || !why || !*why) abort();
        return 0;
    }
    char buf[64];
    int n = gs_go_duration_format(v, buf, sizeof buf);
    if (n <= 0 || n >= (int)sizeof buf) abort();
    int64_t back = 0;
    if (gs_go_duration_parse(buf, &back, NULL) != 0 || back != v) abort();
    return 0;
}
