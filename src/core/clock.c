/*
 * clock.c - real (monotonic) and simulated clocks behind struct gs_clock.
 */
#include "core/clock.h"

#include <time.h>

static int64_t real_now(const struct gs_clock *c)
{
    (void)c;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * GS_NS_PER_SEC + ts.tv_nsec;
}

static int64_t sim_now(const struct gs_clock *c) { return c->sim_now; }

void gs_clock_init_real(struct gs_clock *c)
{
    c->now = real_now;
    c->sim_now = 0;
}

void gs_clock_init_sim(struct gs_clock *c, int64_t start_ns)
{
    c->now = sim_now;
    c->sim_now = start_ns;
}

void gs_clock_set(struct gs_clock *c, int64_t t_ns)
{
    if (t_ns > c->sim_now) c->sim_now = t_ns;
}

void gs_clock_advance(struct gs_clock *c, int64_t dt_ns)
{
    if (dt_ns > 0) c->sim_now += dt_ns;
}

double gs_wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
