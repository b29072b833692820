/*
 * arena.h - a per-cycle region allocator (nginx pools).
 *
 * A scheduling cycle allocates scratch memory (feasible-node lists, score
 * arrays, diagnosis text) from an arena and releases all of it at once with
 * gs_arena_reset(), so Filter/Score never malloc per node. Memory stays with
 * the arena between cycles; the first chunk is reused after a reset.
 */
#ifndef GS_CORE_ARENA_H
#define GS_CORE_ARENA_H

#include <stddef.h>

struct gs_arena_chunk;

struct gs_arena {
    struct gs_arena_chunk *head; /* current chunk; older ones follow */
    size_t chunk_size;
};

/* chunk_size 0 picks a default (64 KiB). Allocates nothing yet. */
void gs_arena_init(struct gs_arena *a, size_t chunk_size);
/* 16-byte aligned, uninitialised; NULL only when out of memory. Valid until reset/free. */
void *gs_arena_alloc(struct gs_arena *a, size_t size);
/* Zeroed allocation of n * size bytes (overflow checked). */
void *gs_arena_calloc(struct gs_arena *a, size_t n, size_t size);
/* Copy of s in the arena. */
char *gs_arena_strdup(struct gs_arena *a, const char *s);
/* printf into the arena. */
char *gs_arena_printf(struct gs_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Releases everything allocated; keeps one chunk for reuse. */
void gs_arena_reset(struct gs_arena *a);
/* Releases all memory; the arena may be init'ed again. */
void gs_arena_free(struct gs_arena *a);

#endif
