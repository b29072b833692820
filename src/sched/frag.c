/*
 * frag.c - the FGD fragmentation model: target workload, per-node F with a
 * generation-keyed cache, and a memo of F by node-state signature.
 *
 * See frag.h for the definition. The signature of a node state is the sum,
 * in two independent 64-bit lanes, of a hash of (model, free CPU, GPU count)
 * and one hash per GPU of its free milli. Because the sum is commutative the
 * GPU order does not matter (F does not depend on it either), and a
 * hypothetical placement changes the signature by subtracting the old
 * elements and adding the new ones. Two lanes make an accidental collision
 * (two different states sharing a memo slot) vanishingly unlikely; the memo
 * is a cache, so it is cleared when it grows past a bound.
 */
#include "sched/frag.h"

#include "core/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ELEM_TABLE 1001          /* free milli 0..1000 */
#define MEMO_MAX_ENTRIES (1u << 22)

/* A class ready for evaluation: model ids resolved. */
struct fclass {
    int64_t cpu;
    int32_t milli;
    int32_t count;
    double p;
    int32_t *models; /* NULL = any */
    size_t nmodels;
};

struct memo_entry {
    uint64_t k1, k2; /* k1 == 0: empty */
    double f;
};

struct node_entry {
    uint64_t gen;
    const char *name; /* detects a reused slot */
    int32_t ngpus;
    bool valid, counted;
    uint64_t h1, h2;
    double f;
    int64_t idle;
};

struct gs_frag_model {
    struct gs_cache *cache;
    struct gs_frag_class *classes; /* public view */
    struct fclass *fc;             /* GPU classes only */
    size_t nclasses, nfc;
    double p_cpu_only;             /* classes needing no GPU: all idle milli is fragment */
    uint64_t ea[ELEM_TABLE], eb[ELEM_TABLE];
    struct memo_entry *memo;
    size_t memo_cap, memo_n;
    struct node_entry *nodes;
    size_t nnodes;
    double total_f;
    int64_t total_idle;
    struct gs_frag_stats stats;
};

/*--- Hashing ---*/

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t elem_a(const struct gs_frag_model *m, int32_t left)
{
    if (left >= 0 && left < ELEM_TABLE) return m->ea[left];
    return mix64((uint64_t)(int64_t)left + 0x1234567ULL);
}

static uint64_t elem_b(const struct gs_frag_model *m, int32_t left)
{
    if (left >= 0 && left < ELEM_TABLE) return m->eb[left];
    return mix64((uint64_t)(int64_t)left * 0x9e3779b97f4a7c15ULL + 0xabcdefULL);
}

static void base_hash(int32_t model, int64_t cpu, int32_t ngpus, uint64_t *a, uint64_t *b)
{
    uint64_t x = mix64((uint64_t)cpu ^ ((uint64_t)(uint32_t)model << 40) ^ ((uint64_t)(uint32_t)ngpus << 56));
    *a = mix64(x + 0x51ed27ULL);
    *b = mix64(x ^ 0x7f4a7c159e3779b9ULL);
}

static void init_tables(struct gs_frag_model *m)
{
    for (int32_t i = 0; i < ELEM_TABLE; i++) {
        m->ea[i] = mix64((uint64_t)i + 0x1234567ULL);
        m->eb[i] = mix64((uint64_t)i * 0x9e3779b97f4a7c15ULL + 0xabcdefULL);
    }
}

/*--- Memo ---*/

static int memo_grow(struct gs_frag_model *m)
{
    size_t ncap = m->memo_cap ? m->memo_cap * 2 : 4096;
    if (m->memo_n >= MEMO_MAX_ENTRIES) ncap = m->memo_cap; /* full: start over at the same size */
    struct memo_entry *nm = calloc(ncap, sizeof *nm);
    if (!nm) return GS_ENOMEM;
    if (m->memo_n < MEMO_MAX_ENTRIES) {
        for (size_t i = 0; i < m->memo_cap; i++) {
            struct memo_entry *e = &m->memo[i];
            if (!e->k1) continue;
            size_t j = e->k1 & (ncap - 1);
            while (nm[j].k1) j = (j + 1) & (ncap - 1);
            nm[j] = *e;
        }
    } else {
        m->memo_n = 0;
    }
    free(m->memo);
    m->memo = nm;
    m->memo_cap = ncap;
    return 0;
}

static struct memo_entry *memo_find(struct gs_frag_model *m, uint64_t k1, uint64_t k2)
{
    if (!m->memo_cap) return NULL;
    size_t j = k1 & (m->memo_cap - 1);
    while (m->memo[j].k1) {
        if (m->memo[j].k1 == k1 && m->memo[j].k2 == k2) return &m->memo[j];
        j = (j + 1) & (m->memo_cap - 1);
    }
    return NULL;
}

static void memo_put(struct gs_frag_model *m, uint64_t k1, uint64_t k2, double f)
{
    if ((m->memo_n + 1) * 2 > m->memo_cap && memo_grow(m) < 0) return; /* a cache: losing it is fine */
    size_t j = k1 & (m->memo_cap - 1);
    while (m->memo[j].k1) j = (j + 1) & (m->memo_cap - 1);
    m->memo[j] = (struct memo_entry){k1, k2, f};
    m->memo_n++;
}

/*--- Evaluation ---*/

static bool class_accepts(const struct fclass *c, int32_t model)
{
    if (!c->models) return true;
    if (model < 0) return false;
    for (size_t i = 0; i < c->nmodels; i++)
        if (c->models[i] == model) return true;
    return false;
}

double gs_frag_state(const struct gs_frag_model *m, int32_t gpu_model, int64_t cpu_left, const int32_t *gpu_left,
                     int32_t ngpus)
{
    int64_t idle = 0;
    for (int32_t i = 0; i < ngpus; i++) idle += gpu_left[i];
    if (idle == 0) return 0.0;
    double f = m->p_cpu_only * (double)idle;
    for (size_t k = 0; k < m->nfc; k++) {
        const struct fclass *c = &m->fc[k];
        int64_t small = 0;
        int32_t fit = 0;
        for (int32_t i = 0; i < ngpus; i++) {
            if (gpu_left[i] >= c->milli) fit++;
            else small += gpu_left[i];
        }
        bool runs = class_accepts(c, gpu_model) && fit >= c->count && cpu_left >= c->cpu;
        f += c->p * (double)(runs ? small : idle);
    }
    return f;
}

static double eval_memo(struct gs_frag_model *m, uint64_t h1, uint64_t h2, int32_t model, int64_t cpu,
                        const int32_t *left, int32_t ngpus)
{
    uint64_t k1 = h1 ? h1 : 1;
    struct memo_entry *e = memo_find(m, k1, h2);
    if (e) {
        m->stats.memo_hits++;
        return e->f;
    }
    double f = gs_frag_state(m, model, cpu, left, ngpus);
    m->stats.evals++;
    memo_put(m, k1, h2, f);
    return f;
}

static int ensure_nodes(struct gs_frag_model *m, size_t n)
{
    if (n <= m->nnodes) return 0;
    size_t ncap = m->nnodes ? m->nnodes : 64;
    while (ncap < n) ncap *= 2;
    struct node_entry *nn = realloc(m->nodes, ncap * sizeof *nn);
    if (!nn) return GS_ENOMEM;
    memset(nn + m->nnodes, 0, (ncap - m->nnodes) * sizeof *nn);
    m->nodes = nn;
    m->nnodes = ncap;
    return 0;
}

static void node_lefts(const struct gs_node_info *n, int32_t *left)
{
    for (int32_t i = 0; i < n->ngpus; i++) left[i] = gs_gpu_left(n, i);
}

static void refresh(struct gs_frag_model *m, struct node_entry *e, const struct gs_node_info *n)
{
    if (e->valid && e->gen == n->generation && e->name == n->name && e->ngpus == n->ngpus) return;
    int32_t left[GS_MAX_GPUS_PER_NODE];
    int32_t ng = n->ngpus > GS_MAX_GPUS_PER_NODE ? GS_MAX_GPUS_PER_NODE : n->ngpus;
    node_lefts(n, left);
    int64_t cpu = n->cpu_alloc - n->cpu_used;
    uint64_t a, b;
    base_hash(n->gpu_model, cpu, ng, &a, &b);
    int64_t idle = 0;
    for (int32_t i = 0; i < ng; i++) {
        a += elem_a(m, left[i]);
        b += elem_b(m, left[i]);
        idle += left[i];
    }
    e->gen = n->generation;
    e->name = n->name;
    e->ngpus = ng;
    e->h1 = a;
    e->h2 = b;
    e->idle = idle;
    e->f = eval_memo(m, a, b, n->gpu_model, cpu, left, ng);
    e->valid = true;
}

static struct node_entry *entry_for(struct gs_frag_model *m, const struct gs_node_info *n)
{
    if (ensure_nodes(m, (size_t)n->idx + 1) < 0) return NULL;
    struct node_entry *e = &m->nodes[n->idx];
    if (!e->counted) refresh(m, e, n);
    else {
        /* keep the cluster totals consistent when a counted node changes here */
        double of = e->f;
        int64_t oi = e->idle;
        refresh(m, e, n);
        m->total_f += e->f - of;
        m->total_idle += e->idle - oi;
    }
    return e;
}

double gs_frag_node(struct gs_frag_model *m, const struct gs_node_info *n)
{
    struct node_entry *e = entry_for(m, n);
    if (e) return e->f;
    int32_t left[GS_MAX_GPUS_PER_NODE];
    node_lefts(n, left);
    return gs_frag_state(m, n->gpu_model, n->cpu_alloc - n->cpu_used, left, n->ngpus);
}

double gs_frag_node_after(struct gs_frag_model *m, const struct gs_node_info *n, int64_t cpu, uint64_t mask,
                          int32_t milli)
{
    int32_t left[GS_MAX_GPUS_PER_NODE];
    int32_t ng = n->ngpus > GS_MAX_GPUS_PER_NODE ? GS_MAX_GPUS_PER_NODE : n->ngpus;
    int64_t cpu_now = n->cpu_alloc - n->cpu_used;
    struct node_entry *e = entry_for(m, n);
    node_lefts(n, left);
    for (int32_t i = 0; i < ng; i++)
        if (mask >> i & 1) left[i] -= milli;
    if (!e) return gs_frag_state(m, n->gpu_model, cpu_now - cpu, left, ng);
    uint64_t a0, b0, a1, b1;
    base_hash(n->gpu_model, cpu_now, ng, &a0, &b0);
    base_hash(n->gpu_model, cpu_now - cpu, ng, &a1, &b1);
    uint64_t a = e->h1 - a0 + a1, b = e->h2 - b0 + b1;
    for (int32_t i = 0; i < ng; i++) {
        if (!(mask >> i & 1)) continue;
        a += elem_a(m, left[i]) - elem_a(m, left[i] + milli);
        b += elem_b(m, left[i]) - elem_b(m, left[i] + milli);
    }
    return eval_memo(m, a, b, n->gpu_model, cpu_now - cpu, left, ng);
}

int64_t gs_frag_cluster_total(struct gs_frag_model *m, struct gs_cache *c, int64_t *idle_milli)
{
    int32_t nn = gs_cache_node_count(c);
    if (ensure_nodes(m, (size_t)nn) < 0) return GS_ENOMEM;
    for (int32_t i = 0; i < nn; i++) {
        struct gs_node_info *n = gs_cache_node(c, i);
        struct node_entry *e = &m->nodes[i];
        bool live = n && n->live;
        if (!live) {
            if (e->counted) {
                m->total_f -= e->f;
                m->total_idle -= e->idle;
                e->counted = false;
            }
            e->valid = false;
            continue;
        }
        if (e->counted) {
            entry_for(m, n);
            continue;
        }
        refresh(m, e, n);
        m->total_f += e->f;
        m->total_idle += e->idle;
        e->counted = true;
    }
    if (idle_milli) *idle_milli = m->total_idle;
    return (int64_t)llround(m->total_f);
}

void gs_frag_stats(const struct gs_frag_model *m, struct gs_frag_stats *out)
{
    *out = m->stats;
    out->memo_size = m->memo_n;
}

/*--- Target workload ---*/

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "A|B" from the pod's acceptable models, sorted; NULL when any. */
static char *models_key(const struct gs_demand *d)
{
    if (!d->gpu_models || !d->ngpu_models) return NULL;
    char **v = malloc(d->ngpu_models * sizeof *v);
    if (!v) return NULL;
    size_t len = 1, n = 0;
    for (size_t i = 0; i < d->ngpu_models; i++) {
        if (!d->gpu_models[i] || !d->gpu_models[i][0]) continue;
        v[n++] = d->gpu_models[i];
        len += strlen(d->gpu_models[i]) + 1;
    }
    char *s = NULL;
    if (n) {
        qsort(v, n, sizeof *v, cmp_str);
        s = malloc(len);
        if (s) {
            s[0] = 0;
            for (size_t i = 0; i < n; i++) {
                if (i) strcat(s, "|");
                strcat(s, v[i]);
            }
        }
    }
    free(v);
    return s;
}

static int cmp_models(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "");
}

/* Class identity order (any total order works for grouping). */
static int cmp_class_key(const void *pa, const void *pb)
{
    const struct gs_frag_class *a = pa, *b = pb;
    if (a->cpu_milli != b->cpu_milli) return a->cpu_milli < b->cpu_milli ? -1 : 1;
    if (a->gpu_milli != b->gpu_milli) return a->gpu_milli < b->gpu_milli ? -1 : 1;
    if (a->gpu_count != b->gpu_count) return a->gpu_count < b->gpu_count ? -1 : 1;
    return cmp_models(a->models, b->models);
}

/* Most popular first; equal weights: the larger class key first. */
static int cmp_popularity(const void *pa, const void *pb)
{
    const struct gs_frag_class *a = pa, *b = pb;
    if (a->p != b->p) return a->p > b->p ? -1 : 1;
    return -cmp_class_key(pa, pb);
}

static void free_classes(struct gs_frag_class *v, size_t n)
{
    for (size_t i = 0; i < n; i++) free(v[i].models);
    free(v);
}

static int resolve_models(struct gs_cache *cache, const char *models, struct fclass *fc)
{
    fc->models = NULL;
    fc->nmodels = 0;
    if (!models) return 0;
    size_t cap = 1;
    for (const char *s = models; *s; s++) cap += *s == '|';
    fc->models = malloc(cap * sizeof *fc->models);
    char *copy = strdup(models);
    if (!fc->models || !copy) {
        free(copy);
        return GS_ENOMEM;
    }
    char *save = NULL;
    for (char *t = strtok_r(copy, "|", &save); t; t = strtok_r(NULL, "|", &save))
        fc->models[fc->nmodels++] = gs_cache_model_id(cache, t);
    free(copy);
    return 0;
}

/* Takes ownership of classes[0..n) (already selected). */
static int build(struct gs_cache *cache, struct gs_frag_class *classes, size_t n, struct gs_frag_model **out)
{
    struct gs_frag_model *m = calloc(1, sizeof *m);
    if (!m) {
        free_classes(classes, n);
        return GS_ENOMEM;
    }
    m->cache = cache;
    m->classes = classes;
    m->nclasses = n;
    init_tables(m);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += classes[i].p;
    m->fc = calloc(n ? n : 1, sizeof *m->fc);
    if (!m->fc || sum <= 0) {
        int rc = m->fc ? GS_EINVAL : GS_ENOMEM;
        gs_frag_model_free(m);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        classes[i].p /= sum;
        if (classes[i].gpu_milli <= 0 || classes[i].gpu_count <= 0) {
            m->p_cpu_only += classes[i].p;
            continue;
        }
        struct fclass *fc = &m->fc[m->nfc++];
        fc->cpu = classes[i].cpu_milli;
        fc->milli = classes[i].gpu_milli;
        fc->count = classes[i].gpu_count;
        fc->p = classes[i].p;
        if (resolve_models(cache, classes[i].models, fc) < 0) {
            gs_frag_model_free(m);
            return GS_ENOMEM;
        }
    }
    *out = m;
    return 0;
}

/* Sorts classes by weight (p), keeps the most popular up to coverage, builds. */
static int select_and_build(struct gs_cache *cache, struct gs_frag_class *all, size_t n, double coverage,
                            struct gs_frag_model **out)
{
    double total = 0, cum = 0;
    for (size_t i = 0; i < n; i++) total += all[i].p;
    qsort(all, n, sizeof *all, cmp_popularity);
    double want = coverage * total;
    size_t k = 0;
    while (k < n && cum < want) cum += all[k++].p;
    for (size_t i = k; i < n; i++) free(all[i].models);
    return build(cache, all, k, out);
}

int gs_frag_model_new(struct gs_cache *cache, const struct gs_pod *const *pods, size_t npods, double coverage,
                      struct gs_frag_model **out)
{
    *out = NULL;
    if (!npods || !(coverage > 0 && coverage <= 1)) return GS_EINVAL;
    struct gs_frag_class *all = calloc(npods, sizeof *all);
    if (!all) return GS_ENOMEM;
    for (size_t i = 0; i < npods; i++) {
        const struct gs_demand *d = &pods[i]->demand;
        all[i].cpu_milli = d->cpu_milli;
        all[i].gpu_count = d->gpu_count;
        all[i].gpu_milli = d->gpu_count > 0 ? (d->gpu_milli > GS_GPU_MILLI ? GS_GPU_MILLI : d->gpu_milli) : 0;
        all[i].models = models_key(d);
        all[i].count = 1;
    }
    qsort(all, npods, sizeof *all, cmp_class_key);
    size_t n = 0;
    for (size_t i = 0; i < npods; i++) {
        if (n && !cmp_class_key(&all[n - 1], &all[i])) {
            all[n - 1].count++;
            free(all[i].models);
            continue;
        }
        all[n++] = all[i];
    }
    for (size_t i = 0; i < n; i++) all[i].p = (double)all[i].count;
    return select_and_build(cache, all, n, coverage, out);
}

int gs_frag_model_from_classes(struct gs_cache *cache, const struct gs_frag_class *classes, size_t n,
                               double coverage, struct gs_frag_model **out)
{
    *out = NULL;
    if (!n || !(coverage > 0 && coverage <= 1)) return GS_EINVAL;
    struct gs_frag_class *v = calloc(n, sizeof *v);
    if (!v) return GS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        v[i] = classes[i];
        v[i].models = classes[i].models ? strdup(classes[i].models) : NULL;
        if (classes[i].models && !v[i].models) {
            free_classes(v, i);
            return GS_ENOMEM;
        }
        if (!(v[i].p >= 0)) {
            free_classes(v, i + 1);
            return GS_EINVAL;
        }
    }
    return select_and_build(cache, v, n, coverage, out);
}

json_t *gs_frag_model_to_json(const struct gs_frag_model *m)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < m->nclasses; i++) {
        const struct gs_frag_class *c = &m->classes[i];
        json_t *o = json_pack("{s:I,s:i,s:i,s:f}", "cpuMilli", (json_int_t)c->cpu_milli, "gpuMilli", c->gpu_milli,
                              "gpuCount", c->gpu_count, "weight", c->p);
        if (o && c->models) json_object_set_new(o, "gpuModels", json_string(c->models));
        if (!o || json_array_append_new(arr, o) < 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static int class_from_json(const json_t *o, const char *path, size_t i, struct gs_diags *d,
                           struct gs_frag_class *c)
{
    const json_t *cpu = json_object_get(o, "cpuMilli"), *milli = json_object_get(o, "gpuMilli"),
                 *count = json_object_get(o, "gpuCount"), *w = json_object_get(o, "weight"),
                 *models = json_object_get(o, "gpuModels");
    int bad = 0;
    if (!json_is_object(o)) {
        gs_diags_add(d, path, "[%zu]: expected an object", i);
        return GS_EINVAL;
    }
    if (cpu && (!json_is_integer(cpu) || json_integer_value(cpu) < 0))
        bad |= gs_diags_add(d, path, "[%zu].cpuMilli: expected an integer >= 0", i) <= 0;
    if (milli && (!json_is_integer(milli) || json_integer_value(milli) < 0 || json_integer_value(milli) > 1000))
        bad |= gs_diags_add(d, path, "[%zu].gpuMilli: expected an integer in 0..1000", i) <= 0;
    if (count && (!json_is_integer(count) || json_integer_value(count) < 0 ||
                  json_integer_value(count) > GS_MAX_GPUS_PER_NODE))
        bad |= gs_diags_add(d, path, "[%zu].gpuCount: expected an integer in 0..%d", i, GS_MAX_GPUS_PER_NODE) <= 0;
    if (!w || !json_is_number(w) || json_number_value(w) < 0)
        bad |= gs_diags_add(d, path, "[%zu].weight: expected a number >= 0", i) <= 0;
    if (models && !json_is_string(models))
        bad |= gs_diags_add(d, path, "[%zu].gpuModels: expected a string such as \"V100M16|V100M32\"", i) <= 0;
    if (bad) return GS_EINVAL;
    c->cpu_milli = cpu ? json_integer_value(cpu) : 0;
    c->gpu_count = count ? (int32_t)json_integer_value(count) : 0;
    c->gpu_milli = c->gpu_count ? (milli ? (int32_t)json_integer_value(milli) : GS_GPU_MILLI) : 0;
    c->p = json_number_value(w);
    c->models = models && json_string_value(models)[0] ? (char *)json_string_value(models) : NULL;
    return 0;
}

int gs_frag_model_from_json(struct gs_cache *cache, const json_t *arr, const char *path, struct gs_diags *d,
                            struct gs_frag_model **out)
{
    *out = NULL;
    if (!json_is_array(arr) || !json_array_size(arr)) {
        gs_diags_add(d, path, "expected a non-empty array of pod classes");
        return GS_EINVAL;
    }
    size_t n = json_array_size(arr);
    struct gs_frag_class *v = calloc(n, sizeof *v);
    if (!v) return GS_ENOMEM;
    int rc = 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (class_from_json(json_array_get(arr, i), path, i, d, &v[i]) < 0) rc = GS_EINVAL;
        else sum += v[i].p;
    }
    if (!rc && !(sum > 0)) {
        gs_diags_add(d, path, "the weights sum to 0");
        rc = GS_EINVAL;
    }
    if (!rc) rc = gs_frag_model_from_classes(cache, v, n, 1.0, out);
    free(v); /* models strings were borrowed from the JSON */
    return rc;
}

void gs_frag_model_free(struct gs_frag_model *m)
{
    if (!m) return;
    if (m->fc)
        for (size_t i = 0; i < m->nfc; i++) free(m->fc[i].models);
    free(m->fc);
    free_classes(m->classes, m->nclasses);
    free(m->memo);
    free(m->nodes);
    free(m);
}

size_t gs_frag_model_nclasses(const struct gs_frag_model *m) { return m->nclasses; }

const struct gs_frag_class *gs_frag_model_class(const struct gs_frag_model *m, size_t i)
{
    return i < m->nclasses ? &m->classes[i] : NULL;
}

/*--- Target workload source ---*/

struct seen {
    struct gs_frag_class c; /* p counts pods */
    uint64_t hash;          /* 0 = empty slot */
};

struct gs_frag_source {
    struct gs_cache *cache;
    struct gs_frag_model *model;
    bool fixed;
    double coverage;
    uint64_t epoch;
    struct seen *tab;
    size_t cap, n;
    uint64_t observed, next_rebuild;
};

int gs_frag_source_new(struct gs_cache *cache, const json_t *args, struct gs_diags *d,
                       struct gs_frag_source **out)
{
    *out = NULL;
    struct gs_frag_source *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->cache = cache;
    s->coverage = GS_FRAG_DEFAULT_COVERAGE;
    s->next_rebuild = 1;
    const json_t *cov = args ? json_object_get(args, "coverage") : NULL;
    if (cov) {
        double v = json_is_number(cov) ? json_number_value(cov) : -1;
        if (!(v > 0 && v <= 1)) {
            gs_diags_add(d, "args.coverage", "expected a number in (0, 1]");
            free(s);
            return GS_EINVAL;
        }
        s->coverage = v;
    }
    const json_t *tw = args ? json_object_get(args, "targetWorkload") : NULL;
    if (tw) {
        int rc = gs_frag_model_from_json(cache, tw, "args.targetWorkload", d, &s->model);
        if (rc < 0) {
            free(s);
            return rc;
        }
        s->fixed = true;
    }
    *out = s;
    return 0;
}

void gs_frag_source_free(struct gs_frag_source *s)
{
    if (!s) return;
    gs_frag_model_free(s->model);
    for (size_t i = 0; i < s->cap; i++) free(s->tab[i].c.models);
    free(s->tab);
    free(s);
}

static uint64_t class_hash(const struct gs_frag_class *c)
{
    uint64_t h = mix64((uint64_t)c->cpu_milli ^ ((uint64_t)(uint32_t)c->gpu_milli << 32));
    h = mix64(h ^ (uint64_t)(uint32_t)c->gpu_count);
    for (const char *p = c->models; p && *p; p++) h = mix64(h ^ (unsigned char)*p);
    return h ? h : 1;
}

static int seen_grow(struct gs_frag_source *s)
{
    size_t nc = s->cap ? s->cap * 2 : 64;
    struct seen *nt = calloc(nc, sizeof *nt);
    if (!nt) return GS_ENOMEM;
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->tab[i].hash) continue;
        size_t j = s->tab[i].hash & (nc - 1);
        while (nt[j].hash) j = (j + 1) & (nc - 1);
        nt[j] = s->tab[i];
    }
    free(s->tab);
    s->tab = nt;
    s->cap = nc;
    return 0;
}

static void rebuild(struct gs_frag_source *s)
{
    struct gs_frag_class *v = malloc((s->n ? s->n : 1) * sizeof *v);
    if (!v) return;
    size_t k = 0;
    for (size_t i = 0; i < s->cap; i++)
        if (s->tab[i].hash) v[k++] = s->tab[i].c;
    struct gs_frag_model *m = NULL;
    if (gs_frag_model_from_classes(s->cache, v, k, s->coverage, &m) == 0) {
        gs_frag_model_free(s->model);
        s->model = m;
        s->epoch++;
    }
    free(v);
}

void gs_frag_source_observe(struct gs_frag_source *s, const struct gs_pod *pod)
{
    if (s->fixed) return;
    const struct gs_demand *d = &pod->demand;
    struct gs_frag_class c = {.cpu_milli = d->cpu_milli, .gpu_count = d->gpu_count > 0 ? d->gpu_count : 0};
    c.gpu_milli = c.gpu_count ? (d->gpu_milli > GS_GPU_MILLI ? GS_GPU_MILLI : d->gpu_milli) : 0;
    c.models = models_key(d);
    uint64_t h = class_hash(&c);
    if ((s->n + 1) * 2 > s->cap && seen_grow(s) < 0) {
        free(c.models);
        return;
    }
    size_t j = h & (s->cap - 1);
    while (s->tab[j].hash && (s->tab[j].hash != h || cmp_class_key(&s->tab[j].c, &c))) j = (j + 1) & (s->cap - 1);
    if (s->tab[j].hash) {
        free(c.models);
    } else {
        s->tab[j].hash = h;
        s->tab[j].c = c;
        s->n++;
    }
    s->tab[j].c.p += 1;
    s->tab[j].c.count++;
    if (++s->observed >= s->next_rebuild) {
        s->next_rebuild *= 2;
        rebuild(s);
    }
}

struct gs_frag_model *gs_frag_source_model(struct gs_frag_source *s, uint64_t *epoch)
{
    if (epoch) *epoch = s->epoch;
    return s->model;
}

/*--- GPU choice inside a node ---*/

int32_t gs_gpus_fitting(const struct gs_node_info *n, int32_t milli)
{
    int32_t k = 0;
    for (int32_t i = 0; i < n->ngpus; i++) k += gs_gpu_left(n, i) >= milli;
    return k;
}

uint64_t gs_gpusel_first_free(const struct gs_node_info *n, int32_t count)
{
    uint64_t mask = 0;
    int32_t got = 0;
    for (int32_t i = 0; i < n->ngpus && i < GS_MAX_GPUS_PER_NODE && got < count; i++)
        if (gs_gpu_left(n, i) >= GS_GPU_MILLI) {
            mask |= 1ULL << i;
            got++;
        }
    return got == count ? mask : 0;
}

struct gs_status gs_gpusel_reserve_best_fit(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                            struct gs_node_info *node, struct gs_assignment *a)
{
    (void)state, (void)cs;
    const struct gs_demand *d = &pod->demand;
    if (a->gpu_mask || d->gpu_count <= 0) return (struct gs_status){0};
    a->gpu_mask = gs_gpusel_best_fit(node, d->gpu_count, d->gpu_milli);
    a->milli = d->gpu_milli;
    a->mem_mib = d->gpu_mem_mib;
    if (!a->gpu_mask)
        return gs_status_make(GS_UNSCHEDULABLE, "no GPU on node %s fits %d x %d milli", node->name, d->gpu_count,
                              d->gpu_milli);
    return (struct gs_status){0};
}

uint64_t gs_gpusel_best_fit(const struct gs_node_info *n, int32_t count, int32_t milli)
{
    if (count <= 0) return 0;
    if (milli >= GS_GPU_MILLI || count > 1) return milli >= GS_GPU_MILLI ? gs_gpusel_first_free(n, count) : 0;
    int32_t best = -1;
    for (int32_t i = 0; i < n->ngpus && i < GS_MAX_GPUS_PER_NODE; i++) {
        int32_t l = gs_gpu_left(n, i);
        if (l >= milli && (best < 0 || l < gs_gpu_left(n, best))) best = i;
    }
    return best < 0 ? 0 : 1ULL << best;
}

uint64_t gs_gpusel_random(const struct gs_node_info *n, int32_t count, int32_t milli, uint64_t *rng)
{
    if (count != 1 || milli >= GS_GPU_MILLI) return gs_gpusel_best_fit(n, count, milli);
    uint64_t mask = 0, seen = 0;
    for (int32_t i = 0; i < n->ngpus && i < GS_MAX_GPUS_PER_NODE; i++)
        if (gs_gpu_left(n, i) >= milli && gs_rand_below(rng, ++seen) == 0) mask = 1ULL << i;
    return mask;
}

uint64_t gs_rand_below(uint64_t *s, uint64_t n)
{
    uint64_t threshold = (0 - n) % n;
    for (;;) {
        uint64_t r = gs_rand_next(s);
        if (r >= threshold) return r % n;
    }
}

char *gs_demand_models_join(const struct gs_demand *d)
{
    if (!d->ngpu_models) return NULL;
    size_t len = 1;
    for (size_t i = 0; i < d->ngpu_models; i++) len += strlen(d->gpu_models[i]) + 1;
    char *s = malloc(len);
    if (!s) return NULL;
    s[0] = 0;
    for (size_t i = 0; i < d->ngpu_models; i++) {
        if (i) strcat(s, "|");
        strcat(s, d->gpu_models[i]);
    }
    return s;
}

bool gs_demand_models_equal(const struct gs_demand *d, const char *joined)
{
    const char *p = joined ? joined : "";
    for (size_t i = 0; i < d->ngpu_models; i++) {
        size_t l = strlen(d->gpu_models[i]);
        if (i && *p++ != '|') return false;
        if (strncmp(p, d->gpu_models[i], l)) return false;
        p += l;
    }
    return *p == 0;
}
