/*
 * fuzz_admission.c - fuzz target for admission: the input bytes are a
 * cluster, a cohort of ClusterQueues and a sequence of submit / finish /
 * cycle operations; any broken invariant (quota exceeded, usage != sum of
 * admitted workloads, cache inconsistent) aborts. The driver and checker are
 * shared with tests/unit/test_admission_invariants.c.
 */
#include "../unit/admission_fuzz.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[256] = "";
    if (adm_fuzz_run(data, size, why, sizeof why, NULL)) {
        fprintf(stderr, "admission invariant broken: %s\n", why);
        abort();
    }
    return 0;
}
