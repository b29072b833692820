/*
 * test_gang_invariants.c - the gang invariant checker (tests/fuzz/
 * gang_checker.h) on a bounded number of seeded random event strings, both
 * with whole-group plans and member by member, and on a few fixed strings:
 * two groups competing for the same capacity, late members, preemptions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../fuzz/gang_checker.h"

#define ITERATIONS 400
#define LEN 96

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint8_t next_byte(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint8_t)(rng >> 32);
}

static void run_ok(const uint8_t *d, size_t n, int iter)
{
    char why[512] = "";
    int rc = gc_run(d, n, why, sizeof why);
    if (rc) fprintf(stderr, "iteration %d: %s\n", iter, why);
    assert_int_equal(rc, 0);
}

static void test_fixed(void **st)
{
    (void)st;
    /* Two 4 x 2-GPU groups at once on 12 GPUs, then a third; time passes, pods complete. */
    const uint8_t two[] = {1, 0, 6, 0, 6, 0, 6, 4, 15, 5, 0, 5, 1, 4, 15};
    run_ok(two, sizeof two, -1);
    /* Member by member, groups arriving one pod at a time, with high-priority singles. */
    const uint8_t late[] = {0, 1, 2, 1, 6, 2, 0, 3, 28, 2, 0, 2, 0, 4, 11, 3, 20, 2, 0, 4, 11};
    run_ok(late, sizeof late, -2);
    const uint8_t late100[] = {2, 1, 2, 1, 6, 2, 0, 3, 28, 2, 0, 4, 12, 2, 0, 4, 12};
    run_ok(late100, sizeof late100, -3);
}

static void test_random(void **st)
{
    (void)st;
    uint8_t d[LEN];
    for (int it = 0; it < ITERATIONS; it++) {
        for (size_t i = 0; i < LEN; i++) d[i] = next_byte();
        run_ok(d, LEN, it);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
