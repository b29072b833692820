/*
 * test_admission_invariants.c - random admission workloads, a bounded number
 * of runs: quota is never exceeded, usage always equals the sum of admitted
 * workloads, and the cache stays consistent (the checker in admission_fuzz.h,
 * also driven by the fuzz target).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "admission_fuzz.h"

#define RUNS 60
#define BYTES 900

static void random_operations_keep_the_invariants(void **st)
{
    (void)st;
    uint8_t buf[BYTES];
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    struct adm_fuzz_stats stats = {0};
    for (int run = 0; run < RUNS; run++) {
        for (size_t i = 0; i < BYTES; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = (uint8_t)(x >> 24);
        }
        char why[256] = "";
        int rc = adm_fuzz_run(buf, sizeof buf, why, sizeof why, &stats);
        if (rc) fail_msg("run %d: %s", run, why);
    }
    /* the runs exercised admission, completion and eviction */
    assert_true(stats.admitted > 500);
    assert_true(stats.finished > 200);
    assert_true(stats.evicted > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_operations_keep_the_invariants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
