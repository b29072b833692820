/*
 * strmap.c - open-addressing string hash table; see strmap.h.
 */
#include "sched/strmap.h"

#include "core/error.h"
#include "core/object.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t gs__fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

uint64_t gs__mix64(uint64_t a, uint64_t b)
{
    uint64_t z = a + 0x9e3779b97f4a7c15ULL * (b + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void gs__strmap_init(struct gs__strmap *m) { memset(m, 0, sizeof *m); }

void gs__strmap_free(struct gs__strmap *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

static size_t find_slot(const struct gs__strmap *m, const char *key, uint64_t h)
{
    size_t mask = m->cap - 1, i = (size_t)h & mask;
    while (m->slots[i].key && (m->slots[i].hash != h || strcmp(m->slots[i].key, key) != 0))
        i = (i + 1) & mask;
    return i;
}

void *gs__strmap_get(const struct gs__strmap *m, const char *key)
{
    if (!m->n) return NULL;
    size_t i = find_slot(m, key, gs__fnv1a(key));
    return m->slots[i].key ? m->slots[i].val : NULL;
}

static int grow(struct gs__strmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    struct gs__strmap_slot *ns = calloc(cap, sizeof *ns);
    if (!ns) return GS_ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key) continue;
        size_t j = (size_t)m->slots[i].hash & (cap - 1);
        while (ns[j].key) j = (j + 1) & (cap - 1);
        ns[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = ns;
    m->cap = cap;
    return 0;
}

int gs__strmap_put(struct gs__strmap *m, const char *key, void *val)
{
    /* Keep the load factor under 1/2: probes stay short. */
    if ((m->n + 1) * 2 > m->cap && grow(m) != 0) return GS_ENOMEM;
    uint64_t h = gs__fnv1a(key);
    size_t i = find_slot(m, key, h);
    if (!m->slots[i].key) m->n++;
    m->slots[i] = (struct gs__strmap_slot){key, h, val};
    return 0;
}

void *gs__strmap_del(struct gs__strmap *m, const char *key)
{
    if (!m->n) return NULL;
    size_t mask = m->cap - 1, i = find_slot(m, key, gs__fnv1a(key));
    if (!m->slots[i].key) return NULL;
    void *val = m->slots[i].val;
    /* Backward-shift: pull later entries of the probe run into the hole. */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slots[j].key) break;
        size_t home = (size_t)m->slots[j].hash & mask;
        int between = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (between) continue;
        m->slots[i] = m->slots[j];
        i = j;
    }
    m->slots[i].key = NULL;
    m->n--;
    return val;
}

int gs__pod_key(const void *p, char *buf, size_t len)
{
    const struct gs_pod *pod = p;
    const char *ns = pod->meta.namespace_ ? pod->meta.namespace_ : "default";
    return snprintf(buf, len, "%s/%s", ns, pod->meta.name ? pod->meta.name : "");
}
