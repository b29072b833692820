/*
 * bench_clock.h - the two clocks `gpusched bench` reads (cmd_bench.c and its
 * shapes in cmd_bench_dra.c and cmd_bench_gang.c): wall time for pods per
 * second, and the calling thread's CPU time for pods per CPU second, which
 * other processes taking turns on the core do not inflate. Only the CLI reads
 * them; the scheduler itself runs on its clock interface.
 */
#ifndef GS_CLI_BENCH_CLOCK_H
#define GS_CLI_BENCH_CLOCK_H

#include <time.h>

/* CLOCK_MONOTONIC in microseconds. */
static inline double gs_bench_wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* CLOCK_THREAD_CPUTIME_ID in microseconds. */
static inline double gs_bench_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

#endif
