/*
 * nodeclass.c - the cache's node classes; see nodeclass.h for what a class
 * holds and why equal keys mean equal answers.
 *
 * Layout. Classes live in an array by id (a released id is reused); a hash
 * table of ids, probed linearly and deleted by backward shift, finds a class
 * by its key's hash; the ids with members sit densely in `active`, which is
 * what the framework walks. Per node slot the index keeps its class id, its
 * position in that class's member heap, and a dirty flag; the cache marks a
 * slot dirty on every change, and gs_cache_classes re-keys the dirty slots
 * only. A pod placed costs one re-key (a few hundred bytes written and
 * hashed), one table lookup and two heap updates: O(log class size), not
 * O(nodes).
 *
 * Out of memory while marking or re-keying sets `all_dirty`, so the next
 * read rebuilds from every slot instead of trusting a half-done update.
 */
#include "sched/nodeclass.h"

#include "core/error.h"
#include "sched/cache.h"
#include "sched/plugin.h" /* gs_plugin_by_class_always */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cls {
    uint64_t hash;
    uint8_t *key;
    size_t keylen;
    int32_t *heap; /* member slots, a min-heap */
    int32_t n, cap;
    int32_t active_pos;
    bool schedulable;
};

struct gs_nodeclasses {
    struct cls *cls;
    int32_t ncls, cls_cap;
    int32_t *free_ids;
    int32_t nfree;
    int32_t *active;
    int32_t nactive;
    int32_t *tab; /* class ids, -1 empty; cap a power of two */
    size_t tab_cap, tab_n;
    int32_t *slot_cls, *slot_pos;
    uint8_t *dirty;
    int32_t slots_cap;
    int32_t *dirty_list;
    int32_t ndirty, dirty_cap;
    bool all_dirty;
    uint8_t *buf;
    size_t buf_len, buf_cap;
    bool buf_oom;
};

struct gs_nodeclasses *gs__nodeclass_new(void)
{
    struct gs_nodeclasses *x = calloc(1, sizeof *x);
    if (x) x->all_dirty = true;
    return x;
}

void gs__nodeclass_free(struct gs_nodeclasses *x)
{
    if (!x) return;
    for (int32_t i = 0; i < x->ncls; i++) {
        free(x->cls[i].key);
        free(x->cls[i].heap);
    }
    free(x->cls);
    free(x->free_ids);
    free(x->active);
    free(x->tab);
    free(x->slot_cls);
    free(x->slot_pos);
    free(x->dirty);
    free(x->dirty_list);
    free(x->buf);
    free(x);
}

/*--- Per-slot state ---*/

static int grow_slots(struct gs_nodeclasses *x, int32_t want)
{
    if (want <= x->slots_cap) return 0;
    int32_t cap = x->slots_cap ? x->slots_cap : 64;
    while (cap < want) cap *= 2;
    int32_t *sc = realloc(x->slot_cls, (size_t)cap * sizeof *sc);
    if (sc) x->slot_cls = sc;
    int32_t *sp = realloc(x->slot_pos, (size_t)cap * sizeof *sp);
    if (sp) x->slot_pos = sp;
    uint8_t *d = realloc(x->dirty, (size_t)cap);
    if (d) x->dirty = d;
    if (!sc || !sp || !d) return GS_ENOMEM;
    for (int32_t i = x->slots_cap; i < cap; i++) x->slot_cls[i] = -1, x->slot_pos[i] = -1, x->dirty[i] = 0;
    x->slots_cap = cap;
    return 0;
}

void gs__nodeclass_mark(struct gs_nodeclasses *x, int32_t idx)
{
    if (!x || x->all_dirty || idx < 0) return;
    if (grow_slots(x, idx + 1) != 0) {
        x->all_dirty = true;
        return;
    }
    if (x->dirty[idx]) return;
    if (x->ndirty == x->dirty_cap) {
        int32_t cap = x->dirty_cap ? x->dirty_cap * 2 : 64;
        int32_t *nv = realloc(x->dirty_list, (size_t)cap * sizeof *nv);
        if (!nv) {
            x->all_dirty = true;
            return;
        }
        x->dirty_list = nv;
        x->dirty_cap = cap;
    }
    x->dirty[idx] = 1;
    x->dirty_list[x->ndirty++] = idx;
}

/*--- The key ---*/

static void put(struct gs_nodeclasses *x, const void *p, size_t n)
{
    if (x->buf_len + n > x->buf_cap) {
        size_t cap = x->buf_cap ? x->buf_cap : 512;
        while (cap < x->buf_len + n) cap *= 2;
        uint8_t *nb = realloc(x->buf, cap);
        if (!nb) {
            x->buf_oom = true;
            return;
        }
        x->buf = nb;
        x->buf_cap = cap;
    }
    memcpy(x->buf + x->buf_len, p, n);
    x->buf_len += n;
}

#define PUTV(x, v)                                                                                                     \
    do {                                                                                                               \
        __typeof__(v) v_ = (v);                                                                                        \
        put((x), &v_, sizeof v_);                                                                                      \
    } while (0)

/* Length-prefixed, NULL distinct from "": equal bytes mean equal strings. */
static void put_str(struct gs_nodeclasses *x, const char *s)
{
    uint32_t n = s ? (uint32_t)strlen(s) : UINT32_MAX;
    PUTV(x, n);
    if (s) put(x, s, n);
}

static void put_res(struct gs_nodeclasses *x, const struct gs_resources *r)
{
    PUTV(x, (uint64_t)r->n);
    for (size_t i = 0; i < r->n; i++) {
        put_str(x, r->v[i].name);
        PUTV(x, r->v[i].milli);
    }
}

/* Writes node n's key into x->buf (see nodeclass.h for the fields). */
static void write_key(struct gs_nodeclasses *x, const struct gs_cache *c, const struct gs_node_info *n)
{
    x->buf_len = 0;
    put(x, &gs_cache_hot(c)[n->idx], sizeof(struct gs_node_hot));
    PUTV(x, n->cpu_alloc);
    PUTV(x, n->cpu_used);
    PUTV(x, n->mem_alloc);
    PUTV(x, n->mem_used);
    PUTV(x, n->pods_alloc);
    PUTV(x, n->pods_used);
    PUTV(x, n->gpu_model);
    PUTV(x, n->ngpus);
    PUTV(x, n->gpu_milli_free);
    PUTV(x, n->gpus_whole_free);
    PUTV(x, n->npods);
    PUTV(x, (uint8_t)n->schedulable);
    PUTV(x, (uintptr_t)n->nrt);
    for (int32_t g = 0; g < n->ngpus; g++) {
        const struct gs_gpu_slot *s = &n->gpus[g];
        PUTV(x, s->milli_free);
        PUTV(x, s->npods);
        PUTV(x, s->mem_total_mib);
        PUTV(x, s->mem_free_mib);
        PUTV(x, s->numa_node);
        PUTV(x, s->nvlink);
        PUTV(x, s->island);
        PUTV(x, (uint8_t)s->healthy);
    }
    put_res(x, &n->ext_alloc);
    put_res(x, &n->ext_used);
    const struct gs_labels *l = n->labels;
    uint64_t nl = 0;
    for (size_t i = 0; l && i < l->n; i++) nl += strcmp(l->v[i].key, GS_CLASS_IGNORED_LABEL) != 0;
    PUTV(x, nl);
    for (size_t i = 0; l && i < l->n; i++) { /* sorted by key: the same set writes the same bytes */
        if (!strcmp(l->v[i].key, GS_CLASS_IGNORED_LABEL)) continue;
        put_str(x, l->v[i].key);
        put_str(x, l->v[i].value);
    }
    PUTV(x, (uint8_t)(n->node != NULL));
    if (n->node) {
        PUTV(x, (uint8_t)n->node->unschedulable);
        PUTV(x, (uint64_t)n->node->ntaints);
        for (size_t i = 0; i < n->node->ntaints; i++) {
            put_str(x, n->node->taints[i].key);
            put_str(x, n->node->taints[i].value);
            PUTV(x, (int32_t)n->node->taints[i].effect);
        }
    }
}

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, sizeof w);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/*--- The class table ---*/

static bool same_key(const struct cls *k, uint64_t hash, const uint8_t *key, size_t len)
{
    return k->hash == hash && k->keylen == len && !memcmp(k->key, key, len);
}

static int32_t tab_find(const struct gs_nodeclasses *x, uint64_t hash, const uint8_t *key, size_t len)
{
    if (!x->tab_cap) return -1;
    for (size_t i = hash & (x->tab_cap - 1);; i = (i + 1) & (x->tab_cap - 1)) {
        int32_t id = x->tab[i];
        if (id < 0) return -1;
        if (same_key(&x->cls[id], hash, key, len)) return id;
    }
}

static int tab_grow(struct gs_nodeclasses *x)
{
    size_t cap = x->tab_cap ? x->tab_cap * 2 : 64;
    int32_t *t = malloc(cap * sizeof *t);
    if (!t) return GS_ENOMEM;
    memset(t, 0xff, cap * sizeof *t);
    for (size_t i = 0; i < x->tab_cap; i++) {
        int32_t id = x->tab[i];
        if (id < 0) continue;
        size_t j = x->cls[id].hash & (cap - 1);
        while (t[j] >= 0) j = (j + 1) & (cap - 1);
        t[j] = id;
    }
    free(x->tab);
    x->tab = t;
    x->tab_cap = cap;
    return 0;
}

static void tab_del(struct gs_nodeclasses *x, int32_t id)
{
    size_t mask = x->tab_cap - 1, i = x->cls[id].hash & mask;
    while (x->tab[i] != id) i = (i + 1) & mask;
    x->tab[i] = -1;
    x->tab_n--;
    /* Backward shift: move up every entry whose probe passed the hole. */
    for (size_t j = (i + 1) & mask; x->tab[j] >= 0; j = (j + 1) & mask) {
        size_t home = x->cls[x->tab[j]].hash & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            x->tab[i] = x->tab[j];
            x->tab[j] = -1;
            i = j;
        }
    }
}

/* A new class for the key in x->buf; its id, or -1 when out of memory. */
static int32_t class_new(struct gs_nodeclasses *x, uint64_t hash, bool schedulable)
{
    if ((x->tab_n + 1) * 2 > x->tab_cap && tab_grow(x) != 0) return -1;
    uint8_t *key = malloc(x->buf_len ? x->buf_len : 1);
    if (!key) return -1;
    memcpy(key, x->buf, x->buf_len);
    int32_t id;
    if (x->nfree) {
        id = x->free_ids[--x->nfree];
    } else {
        if (x->ncls == x->cls_cap) {
            int32_t cap = x->cls_cap ? x->cls_cap * 2 : 16;
            struct cls *nc = realloc(x->cls, (size_t)cap * sizeof *nc);
            int32_t *na = nc ? realloc(x->active, (size_t)cap * sizeof *na) : NULL;
            if (nc) x->cls = nc;
            if (na) x->active = na;
            int32_t *nf = na ? realloc(x->free_ids, (size_t)cap * sizeof *nf) : NULL;
            if (nf) x->free_ids = nf;
            if (!nc || !na || !nf) {
                free(key);
                return -1;
            }
            x->cls_cap = cap;
        }
        id = x->ncls++;
        x->cls[id] = (struct cls){0};
    }
    struct cls *k = &x->cls[id];
    free(k->heap);
    *k = (struct cls){.hash = hash, .key = key, .keylen = x->buf_len, .schedulable = schedulable};
    k->active_pos = x->nactive;
    x->active[x->nactive++] = id;
    size_t mask = x->tab_cap - 1, i = hash & mask;
    while (x->tab[i] >= 0) i = (i + 1) & mask;
    x->tab[i] = id;
    x->tab_n++;
    return id;
}

static void class_release(struct gs_nodeclasses *x, int32_t id)
{
    struct cls *k = &x->cls[id];
    tab_del(x, id);
    int32_t last = x->active[--x->nactive];
    x->active[k->active_pos] = last;
    x->cls[last].active_pos = k->active_pos;
    free(k->key);
    free(k->heap);
    *k = (struct cls){0};
    x->free_ids[x->nfree++] = id;
}

/*--- Member heaps ---*/

static void heap_set(struct gs_nodeclasses *x, struct cls *k, int32_t pos, int32_t slot)
{
    k->heap[pos] = slot;
    x->slot_pos[slot] = pos;
}

static void sift_up(struct gs_nodeclasses *x, struct cls *k, int32_t pos)
{
    int32_t slot = k->heap[pos];
    while (pos > 0) {
        int32_t parent = (pos - 1) / 2;
        if (k->heap[parent] < slot) break;
        heap_set(x, k, pos, k->heap[parent]);
        pos = parent;
    }
    heap_set(x, k, pos, slot);
}

static void sift_down(struct gs_nodeclasses *x, struct cls *k, int32_t pos)
{
    int32_t slot = k->heap[pos];
    for (;;) {
        int32_t ch = 2 * pos + 1;
        if (ch >= k->n) break;
        if (ch + 1 < k->n && k->heap[ch + 1] < k->heap[ch]) ch++;
        if (k->heap[ch] > slot) break;
        heap_set(x, k, pos, k->heap[ch]);
        pos = ch;
    }
    heap_set(x, k, pos, slot);
}

static int heap_push(struct gs_nodeclasses *x, int32_t id, int32_t slot)
{
    struct cls *k = &x->cls[id];
    if (k->n == k->cap) {
        int32_t cap = k->cap ? k->cap * 2 : 4;
        int32_t *nh = realloc(k->heap, (size_t)cap * sizeof *nh);
        if (!nh) return GS_ENOMEM;
        k->heap = nh;
        k->cap = cap;
    }
    k->heap[k->n++] = slot;
    x->slot_cls[slot] = id;
    sift_up(x, k, k->n - 1);
    return 0;
}

/* Takes slot out of its class, releasing the class when it empties. */
static void leave(struct gs_nodeclasses *x, int32_t slot)
{
    int32_t id = x->slot_cls[slot];
    if (id < 0) return;
    struct cls *k = &x->cls[id];
    int32_t pos = x->slot_pos[slot], last = k->heap[--k->n];
    x->slot_cls[slot] = -1;
    x->slot_pos[slot] = -1;
    if (!k->n) {
        class_release(x, id);
        return;
    }
    if (pos == k->n) return;
    heap_set(x, k, pos, last);
    sift_up(x, k, pos);
    sift_down(x, k, x->slot_pos[last]);
}

/*--- Sync ---*/

/* Re-keys one slot. 0 or GS_ENOMEM. */
static int rekey(struct gs_nodeclasses *x, struct gs_cache *c, int32_t slot)
{
    struct gs_node_info *n = slot < gs_cache_node_count(c) ? gs_cache_node(c, slot) : NULL;
    if (!n || !n->live) {
        leave(x, slot);
        return 0;
    }
    x->buf_oom = false;
    write_key(x, c, n);
    if (x->buf_oom) return GS_ENOMEM;
    uint64_t h = hash_bytes(x->buf, x->buf_len);
    int32_t old = x->slot_cls[slot];
    if (old >= 0 && same_key(&x->cls[old], h, x->buf, x->buf_len)) return 0;
    int32_t id = tab_find(x, h, x->buf, x->buf_len);
    if (id < 0 && (id = class_new(x, h, n->schedulable)) < 0) return GS_ENOMEM;
    leave(x, slot);
    if (heap_push(x, id, slot) != 0) {
        if (!x->cls[id].n) class_release(x, id);
        return GS_ENOMEM;
    }
    return 0;
}

static int sync_all(struct gs_nodeclasses *x, struct gs_cache *c)
{
    int32_t slots = gs_cache_node_count(c);
    if (grow_slots(x, slots) != 0) return GS_ENOMEM;
    for (int32_t i = 0; i < x->slots_cap; i++) {
        if (i >= slots) leave(x, i);
        else if (rekey(x, c, i) != 0) return GS_ENOMEM;
        x->dirty[i] = 0;
    }
    x->ndirty = 0;
    x->all_dirty = false;
    return 0;
}

int gs__nodeclass_sync(struct gs_nodeclasses *x, struct gs_cache *c)
{
    if (x->all_dirty) {
        if (sync_all(x, c) == 0) return 0;
        x->all_dirty = true;
        return GS_ENOMEM;
    }
    while (x->ndirty) {
        int32_t slot = x->dirty_list[x->ndirty - 1];
        if (rekey(x, c, slot) != 0) {
            x->all_dirty = true;
            return GS_ENOMEM;
        }
        x->dirty[slot] = 0;
        x->ndirty--;
    }
    return 0;
}

bool gs_plugin_by_class_always(void *state, const struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)state, (void)cs, (void)pod;
    return true;
}

/*--- Reading ---*/

size_t gs_nodeclass_count(const struct gs_nodeclasses *x) { return (size_t)x->nactive; }

struct gs_nodeclass gs_nodeclass_get(const struct gs_nodeclasses *x, size_t i)
{
    const struct cls *k = &x->cls[x->active[i]];
    return (struct gs_nodeclass){k->heap[0], k->n, k->schedulable};
}

int32_t gs_nodeclass_runner_up(const struct gs_nodeclasses *x, size_t i)
{
    const struct cls *k = &x->cls[x->active[i]];
    if (k->n < 2) return -1;
    if (k->n == 2) return k->heap[1];
    return k->heap[1] < k->heap[2] ? k->heap[1] : k->heap[2]; /* a min-heap: the next is a child of the root */
}

int32_t gs_nodeclass_of(const struct gs_nodeclasses *x, int32_t idx)
{
    if (idx < 0 || idx >= x->slots_cap || x->slot_cls[idx] < 0) return -1;
    return x->cls[x->slot_cls[idx]].active_pos;
}

int gs_nodeclass_check(struct gs_cache *c, char *why, size_t len)
{
    struct gs_nodeclasses *x = gs_cache_classes(c);
    if (!x) return GS_ENOMEM;
    int32_t members = 0;
    for (int32_t a = 0; a < x->nactive; a++) {
        const struct cls *k = &x->cls[x->active[a]];
        members += k->n;
        for (int32_t p = 0; p < k->n; p++) {
            int32_t slot = k->heap[p];
            if (p && k->heap[(p - 1) / 2] > slot) {
                snprintf(why, len, "class %d: member heap out of order at %d", a, p);
                return GS_ESTATE;
            }
            struct gs_node_info *n = gs_cache_node(c, slot);
            if (!n || !n->live || x->slot_pos[slot] != p) {
                snprintf(why, len, "class %d: slot %d is not a live member where it says", a, slot);
                return GS_ESTATE;
            }
            write_key(x, c, n);
            if (x->buf_oom) return GS_ENOMEM;
            if (!same_key(k, hash_bytes(x->buf, x->buf_len), x->buf, x->buf_len)) {
                snprintf(why, len, "node %s: its class key is out of date", n->name);
                return GS_ESTATE;
            }
        }
    }
    if (members != gs_cache_live_nodes(c)) {
        snprintf(why, len, "classes hold %d nodes, the cache %d live ones", members, gs_cache_live_nodes(c));
        return GS_ESTATE;
    }
    return 0;
}
