/*
 * fuzz_dra_mapping.c - device class mappings for admission (sched/admission/dra_admit.h).
 *
 * Two outside inputs map DeviceClasses to quota resource names: the server flag's text
 * "RESOURCE=CLASS[,CLASS...]" and Kueue's Configuration JSON. The first byte picks one; the
 * rest is the input. Either must be accepted, or refused with a diagnostic that has a message,
 * and a refused flag must leave the mappings unchanged (the same text is refused again rather
 * than reported as mapped twice).
 */
#include "sched/admission/dra_admit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096) return 0;
    struct gs_dra_admit *a = NULL;
    if (gs_dra_admit_new(&a)) return 0;
    char *s = malloc(size);
    if (!s) {
        gs_dra_admit_free(a);
        return 0;
    }
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0;
    struct gs_diags d = {0};
    if (data[0] & 1) {
        json_t *j = json_loads(s, JSON_DECODE_ANY, NULL);
        if (j) {
            int rc = gs_dra_admit_set_config(a, j, &d);
            if (rc && (rc != GS_EINVAL || !d.n || !d.v[0].msg[0])) abort();
            json_decref(j);
        }
    } else {
        uint64_t g = gs_dra_admit_generation(a);
        int rc = gs_dra_admit_add_mapping(a, s, &d);
        if (rc && (rc != GS_EINVAL || !d.n || !d.v[0].msg[0])) abort();
        if (rc && gs_dra_admit_generation(a) != g) abort();   /* all or nothing */
        if (rc) {
            gs_diags_free(&d);
            if (gs_dra_admit_add_mapping(a, s, &d) != rc) abort();
        }
    }
    gs_diags_free(&d);
    free(s);
    gs_dra_admit_free(a);
    return 0;
}
