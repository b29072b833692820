/*
 * cycle_state.h - per-pod, per-cycle data shared between extension points.
 *
 * PreFilter computes something once (e.g. the pod's acceptable GPU model
 * mask), Filter and Score read it. Entries are keyed by a static string
 * (usually the plugin name). Each entry carries its own clone and free
 * functions so preemption can simulate on a copy of the state without
 * disturbing the real cycle. The state is reset at the start of every cycle.
 */
#ifndef GS_SCHED_CYCLE_STATE_H
#define GS_SCHED_CYCLE_STATE_H

#include <stdbool.h>
#include <stddef.h>

struct gs_cycle_state_entry {
    const char *key;                 /* static string, compared by content */
    void *data;                      /* owned by the state */
    void *(*clone)(const void *data); /* NULL: data is not cloneable (shared pointer copied) */
    void (*free)(void *data);        /* NULL: not freed */
};

struct gs_cycle_state {
    struct gs_cycle_state_entry *v;
    size_t n, cap;
    unsigned long long seed; /* deterministic per-cycle randomness: set by the framework */
    int skip_filter_mask;    /* internal: plugins whose PreFilter said Skip */
    int skip_score_mask;     /* internal: plugins whose PreScore said Skip */
    bool filters_only;       /* gs_framework_run_filters: Filters alone, no Score follows */
};

void gs_cycle_state_init(struct gs_cycle_state *cs);
/* Stores data under key, replacing (and freeing) an older entry. 0 or GS_ENOMEM
 * (data is then freed with free_fn). */
int gs_cycle_state_write(struct gs_cycle_state *cs, const char *key, void *data,
                         void *(*clone)(const void *), void (*free_fn)(void *));
/* Borrowed pointer, or NULL when absent. */
void *gs_cycle_state_read(const struct gs_cycle_state *cs, const char *key);
/* Deep copy into dst (initialised by this call). 0 or GS_ENOMEM. */
int gs_cycle_state_clone(const struct gs_cycle_state *src, struct gs_cycle_state *dst);
/* Frees every entry; the state stays usable. */
void gs_cycle_state_reset(struct gs_cycle_state *cs);
void gs_cycle_state_free(struct gs_cycle_state *cs);

#endif
