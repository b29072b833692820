/*
 * strmap.h - a small string-keyed hash table for the scheduler's indexes.
 *
 * The cache (pods and node names), the queue and the framework's waiting list
 * all map "namespace/name" keys to a record. This is an open-addressing
 * table with linear probing and backward-shift deletion (no tombstones, so
 * lookups never degrade after many deletes), keyed by FNV-1a. Keys are
 * borrowed: the caller keeps each key string alive while it is in the table
 * (records usually own their key). Not thread-safe.
 */
#ifndef GS_SCHED_STRMAP_H
#define GS_SCHED_STRMAP_H

#include <stddef.h>
#include <stdint.h>

struct gs__strmap_slot {
    const char *key; /* NULL: empty */
    uint64_t hash;
    void *val;
};

struct gs__strmap {
    struct gs__strmap_slot *slots;
    size_t cap; /* power of two, 0 before the first insert */
    size_t n;
};

uint64_t gs__fnv1a(const char *s);
/* Mixes two 64-bit values into a well-spread one (splitmix64 finaliser). */
uint64_t gs__mix64(uint64_t a, uint64_t b);

void gs__strmap_init(struct gs__strmap *m);
void gs__strmap_free(struct gs__strmap *m);
/* Value for key or NULL. */
void *gs__strmap_get(const struct gs__strmap *m, const char *key);
/* Inserts or replaces. 0 or GS_ENOMEM. */
int gs__strmap_put(struct gs__strmap *m, const char *key, void *val);
/* Removes key; returns its value or NULL when absent. */
void *gs__strmap_del(struct gs__strmap *m, const char *key);

/* "namespace/name" of a pod (namespace "default" when unset) into buf. */
int gs__pod_key(const void *pod, char *buf, size_t len);
#define GS__KEY_MAX 320

#endif
