/*
 * fuzz_gang_events.c - libFuzzer target: random gang/single-pod/time/
 * completion events through the scheduler, invariants checked after each
 * (tests/fuzz/gang_checker.h). Aborts on a broken invariant.
 */
#include "gang_checker.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[512];
    if (gc_run(data, size, why, sizeof why) != 0) {
        fprintf(stderr, "gang invariant broken: %s\n", why);
        abort();
    }
    return 0;
}
