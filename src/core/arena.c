/*
 * arena.c - bump allocator over a list of chunks; see arena.h.
 */
#include "core/arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gs_arena_chunk {
    struct gs_arena_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void gs_arena_init(struct gs_arena *a, size_t chunk_size)
{
    a->head = NULL;
    a->chunk_size = chunk_size ? chunk_size : 64 * 1024;
}

void *gs_arena_alloc(struct gs_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (size == 0) size = 16;
    struct gs_arena_chunk *c = a->head;
    if (!c || c->size - c->used < size) {
        size_t cs = size > a->chunk_size ? size : a->chunk_size;
        c = malloc(sizeof *c + cs);
        if (!c) return NULL;
        c->size = cs;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += size;
    return p;
}

void *gs_arena_calloc(struct gs_arena *a, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = gs_arena_alloc(a, n * size);
    if (p) memset(p, 0, n * size);
    return p;
}

char *gs_arena_strdup(struct gs_arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = gs_arena_alloc(a, n);
    if (p) memcpy(p, s, n);
    return p;
}

char *gs_arena_printf(struct gs_arena *a, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = n < 0 ? NULL : gs_arena_alloc(a, (size_t)n + 1);
    if (p) vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

void gs_arena_reset(struct gs_arena *a)
{
    struct gs_arena_chunk *c = a->head;
    if (!c) return;
    /* Keep the largest-capacity chunk: the one allocated for the biggest need. */
    struct gs_arena_chunk *keep = c;
    for (struct gs_arena_chunk *x = c; x; x = x->next)
        if (x->size > keep->size) keep = x;
    while (c) {
        struct gs_arena_chunk *n = c->next;
        if (c != keep) free(c);
        c = n;
    }
    keep->next = NULL;
    keep->used = 0;
    a->head = keep;
}

void gs_arena_free(struct gs_arena *a)
{
    struct gs_arena_chunk *c = a->head;
    while (c) {
        struct gs_arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
}
