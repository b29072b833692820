/*
 * clock.h - the only way scheduler code learns the time.
 *
 * The server runs on the real clock; the simulator drives a simulated one, so
 * the same scheduler code replays a trace in seconds and gives the same
 * decisions for the same inputs. Scheduler and simulator code must never call
 * time(), clock_gettime() or gettimeofday() directly: take a struct gs_clock.
 * Times are nanoseconds; the real clock is CLOCK_MONOTONIC for durations and
 * deadlines, the simulated one starts where the caller says.
 */
#ifndef GS_CORE_CLOCK_H
#define GS_CORE_CLOCK_H

#include <stdint.h>

#define GS_NS_PER_SEC 1000000000LL
#define GS_NS_PER_MS 1000000LL

struct gs_clock {
    /* Returns the current time in nanoseconds. Never NULL after init. */
    int64_t (*now)(const struct gs_clock *c);
    int64_t sim_now; /* simulated clocks only */
};

/* Monotonic wall clock. */
void gs_clock_init_real(struct gs_clock *c);
/* Simulated clock starting at start_ns; moves only through set/advance. */
void gs_clock_init_sim(struct gs_clock *c, int64_t start_ns);
/* Moves a simulated clock to t (never backwards: earlier values are ignored). */
void gs_clock_set(struct gs_clock *c, int64_t t_ns);
void gs_clock_advance(struct gs_clock *c, int64_t dt_ns);

static inline int64_t gs_clock_now(const struct gs_clock *c) { return c->now(c); }

/* Wall-clock seconds since the epoch, for timestamps shown to people (logs,
 * creationTimestamp). Not for scheduling decisions. */
double gs_wall_time(void);

#endif
