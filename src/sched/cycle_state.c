/*
 * cycle_state.c - the per-cycle key/value store plugins share; see cycle_state.h.
 *
 * A handful of entries per cycle at most, so a flat array searched linearly
 * beats any hash table. Keys are compared by pointer first (plugins pass the
 * same static string) and by content as a fallback.
 */
#include "sched/cycle_state.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

void gs_cycle_state_init(struct gs_cycle_state *cs) { memset(cs, 0, sizeof *cs); }

static struct gs_cycle_state_entry *find(const struct gs_cycle_state *cs, const char *key)
{
    for (size_t i = 0; i < cs->n; i++)
        if (cs->v[i].key == key || strcmp(cs->v[i].key, key) == 0) return &cs->v[i];
    return NULL;
}

int gs_cycle_state_write(struct gs_cycle_state *cs, const char *key, void *data, void *(*clone)(const void *),
                         void (*free_fn)(void *))
{
    struct gs_cycle_state_entry *e = find(cs, key);
    if (e) {
        if (e->free && e->data != data) e->free(e->data);
        *e = (struct gs_cycle_state_entry){key, data, clone, free_fn};
        return 0;
    }
    if (cs->n == cs->cap) {
        size_t cap = cs->cap ? cs->cap * 2 : 8;
        struct gs_cycle_state_entry *nv = realloc(cs->v, cap * sizeof *nv);
        if (!nv) {
            if (free_fn) free_fn(data);
            return GS_ENOMEM;
        }
        cs->v = nv;
        cs->cap = cap;
    }
    cs->v[cs->n++] = (struct gs_cycle_state_entry){key, data, clone, free_fn};
    return 0;
}

void *gs_cycle_state_read(const struct gs_cycle_state *cs, const char *key)
{
    struct gs_cycle_state_entry *e = find(cs, key);
    return e ? e->data : NULL;
}

int gs_cycle_state_clone(const struct gs_cycle_state *src, struct gs_cycle_state *dst)
{
    gs_cycle_state_init(dst);
    dst->seed = src->seed;
    dst->skip_filter_mask = src->skip_filter_mask;
    dst->skip_score_mask = src->skip_score_mask;
    for (size_t i = 0; i < src->n; i++) {
        const struct gs_cycle_state_entry *e = &src->v[i];
        void *data = e->data;
        void (*free_fn)(void *) = NULL;
        if (e->clone) {
            data = e->clone(e->data);
            if (!data && e->data) {
                gs_cycle_state_free(dst);
                return GS_ENOMEM;
            }
            free_fn = e->free;
        }
        /* An uncloneable entry is shared: the copy must not free it. */
        if (gs_cycle_state_write(dst, e->key, data, e->clone, free_fn) != 0) {
            gs_cycle_state_free(dst);
            return GS_ENOMEM;
        }
    }
    return 0;
}

void gs_cycle_state_reset(struct gs_cycle_state *cs)
{
    for (size_t i = 0; i < cs->n; i++)
        if (cs->v[i].free) cs->v[i].free(cs->v[i].data);
    cs->n = 0;
    cs->seed = 0;
    cs->skip_filter_mask = 0;
    cs->skip_score_mask = 0;
}

void gs_cycle_state_free(struct gs_cycle_state *cs)
{
    gs_cycle_state_reset(cs);
    free(cs->v);
    gs_cycle_state_init(cs);
}
