/*
 * fgd_learn_core.c - the learned, size-weighted target workload of the
 * FGDLearn policy (fgd_learn_core.h has the definition).
 *
 * Classes are keyed by (CPU, per-GPU milli, GPU count, acceptable models), as
 * frag.c's classes; memory is kept as the class's decayed mean and only used
 * to count how many copies of the class a node can take. Decay without a pass
 * over the classes per pod: the increment grows by 2^(1/half_life) per pod and
 * every count is rescaled when the increment gets large, so relative weights
 * are those of exponentially decayed counts.
 *
 * A rebuild selects the classes on popularity (plus the hysteresis), walks
 * the live, schedulable nodes once per kept class when a hardness term is on
 * (off by default: no walk), computes the weights and builds a frag.h model
 * from them, unless the weights are within 2% of the model in use.
 */
#include "sched/fgd_learn_core.h"

#include "core/error.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define RESCALE_AT 1e150
#define SAME_WEIGHT 0.02 /* a rebuild whose weights all stay within 2% keeps the model */

struct cls {
    int64_t cpu;
    int32_t milli, count;
    char *models;     /* "A|B" sorted, NULL = any; owned */
    int32_t *mids;    /* model ids, resolved at first rebuild */
    size_t nmids;
    bool resolved;
    bool sel;         /* in the model of the last rebuild */
    double cnt, mem_sum;
    double p, hard, weight, usable; /* as of the last rebuild */
};

struct gs_fgdl {
    struct gs_cache *cache;
    struct gs_fgdl_params par;
    struct cls *v;
    size_t n, cap;
    double inc, growth;
    uint64_t observed, next_rebuild;
    struct gs_frag_model *model;
    uint64_t epoch;
};

/*--- Parameters ---*/

void gs_fgdl_params_default(struct gs_fgdl_params *p)
{
    *p = (struct gs_fgdl_params){
        .half_life = 4000, .beta = 0, .pop_exp = 0, .count_exp = -1, .size_exp = 1.1, .usable_exp = 0, .threshold = 1.0, .floor = 0.02,
        .coverage = 0.99, .share_scale = 0.8, .rebuild = 2048};
}

static int num_field(const json_t *args, const char *key, double lo, double hi, bool lo_open, double *out,
                     struct gs_diags *d)
{
    const json_t *v = json_object_get(args, key);
    if (!v) return 0;
    char path[64];
    snprintf(path, sizeof path, "args.%s", key);
    if (!json_is_number(v)) {
        gs_diags_add(d, path, "expected a number in %s%g, %g]", lo_open ? "(" : "[", lo, hi);
        return GS_EINVAL;
    }
    double x = json_number_value(v);
    if (!(lo_open ? x > lo : x >= lo) || !(x <= hi)) {
        gs_diags_add(d, path, "%g is out of range: expected a number in %s%g, %g]", x, lo_open ? "(" : "[", lo, hi);
        return GS_EINVAL;
    }
    *out = x;
    return 0;
}

int gs_fgdl_params_parse(const json_t *args, struct gs_fgdl_params *p, struct gs_diags *d)
{
    gs_fgdl_params_default(p);
    if (!args) return 0;
    if (!json_is_object(args)) {
        gs_diags_add(d, "args", "expected an object");
        return GS_EINVAL;
    }
    double rebuild = p->rebuild;
    int rc = 0;
    rc |= num_field(args, "halfLife", 0, 1e12, true, &p->half_life, d);
    rc |= num_field(args, "beta", -8, 8, false, &p->beta, d);
    rc |= num_field(args, "usableFloor", 0, 1, true, &p->floor, d);
    rc |= num_field(args, "threshold", 0, 1e6, true, &p->threshold, d);
    rc |= num_field(args, "sizeExp", -8, 8, false, &p->size_exp, d);
    rc |= num_field(args, "popExp", -8, 8, false, &p->pop_exp, d);
    rc |= num_field(args, "countExp", -1, 8, false, &p->count_exp, d);
    rc |= num_field(args, "usableExp", -8, 8, false, &p->usable_exp, d);
    rc |= num_field(args, "coverage", 0, 1, true, &p->coverage, d);
    rc |= num_field(args, "shareScale", 0, 100, true, &p->share_scale, d);
    rc |= num_field(args, "rebuildEvery", 1, 1e9, false, &rebuild, d);
    if (!rc && rebuild != floor(rebuild)) {
        gs_diags_add(d, "args.rebuildEvery", "%g is not a whole number of pods", rebuild);
        rc = GS_EINVAL;
    }
    p->rebuild = (uint32_t)rebuild;
    return rc ? GS_EINVAL : 0;
}

/*--- Learner ---*/

int gs_fgdl_new(struct gs_cache *cache, const struct gs_fgdl_params *p, struct gs_fgdl **out)
{
    *out = NULL;
    if (!(p->half_life > 0) || !(p->floor > 0 && p->floor <= 1) || !(p->threshold > 0) ||
        !(p->coverage > 0 && p->coverage <= 1) || !(p->share_scale > 0 && p->share_scale <= 100) || p->rebuild < 1)
        return GS_EINVAL;
    struct gs_fgdl *l = calloc(1, sizeof *l);
    if (!l) return GS_ENOMEM;
    l->cache = cache;
    l->par = *p;
    l->inc = 1;
    l->growth = pow(2.0, 1.0 / p->half_life);
    l->next_rebuild = 1;
    *out = l;
    return 0;
}

void gs_fgdl_free(struct gs_fgdl *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].models);
        free(l->v[i].mids);
    }
    free(l->v);
    gs_frag_model_free(l->model);
    free(l);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* "A|B" from the demand's models, sorted; NULL when any (or out of memory:
 * the class then accepts any model, a wider class, never a crash). */
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
    if (n && (s = malloc(len))) {
        qsort(v, n, sizeof *v, cmp_str);
        s[0] = 0;
        for (size_t i = 0; i < n; i++) {
            if (i) strcat(s, "|");
            strcat(s, v[i]);
        }
    }
    free(v);
    return s;
}

static bool same_models(const char *a, const char *b) { return !strcmp(a ? a : "", b ? b : ""); }

static struct cls *find_or_add(struct gs_fgdl *l, int64_t cpu, int32_t milli, int32_t count, char *models)
{
    for (size_t i = 0; i < l->n; i++) {
        struct cls *c = &l->v[i];
        if (c->cpu == cpu && c->milli == milli && c->count == count && same_models(c->models, models)) {
            free(models);
            return c;
        }
    }
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        struct cls *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) {
            free(models);
            return NULL;
        }
        l->v = nv;
        l->cap = nc;
    }
    struct cls *c = &l->v[l->n++];
    *c = (struct cls){.cpu = cpu, .milli = milli, .count = count, .models = models};
    return c;
}

int64_t gs_fgdl_copies(const struct gs_node_info *n, int64_t cpu_milli, int64_t mem_bytes, int32_t gpu_count,
                       int32_t gpu_milli, const int32_t *models, size_t nmodels)
{
    int64_t best = INT64_MAX;
    if (cpu_milli > 0) best = (n->cpu_alloc - n->cpu_used) / cpu_milli;
    if (mem_bytes > 0) {
        int64_t m = (n->mem_alloc - n->mem_used) / mem_bytes;
        if (m < best) best = m;
    }
    if (gpu_count > 0 && gpu_milli > 0) {
        if (nmodels) {
            bool ok = false;
            for (size_t i = 0; i < nmodels && !ok; i++) ok = models[i] == n->gpu_model;
            if (!ok) return 0;
        }
        int64_t slots = 0;
        int32_t ng = n->ngpus < GS_MAX_GPUS_PER_NODE ? n->ngpus : GS_MAX_GPUS_PER_NODE;
        for (int32_t i = 0; i < ng; i++) {
            int32_t left = n->gpus[i].healthy ? n->gpus[i].milli_free : 0;
            slots += gpu_count == 1 ? left / gpu_milli : left >= gpu_milli;
        }
        int64_t g = slots / gpu_count;
        if (g < best) best = g;
    }
    return best == INT64_MAX ? 0 : best;
}

static int resolve(struct gs_fgdl *l, struct cls *c)
{
    if (c->resolved) return 0;
    c->resolved = true;
    if (!c->models) return 0;
    size_t cap = 1;
    for (const char *s = c->models; *s; s++) cap += *s == '|';
    char *copy = strdup(c->models);
    c->mids = malloc(cap * sizeof *c->mids);
    if (!copy || !c->mids) {
        free(copy);
        free(c->mids);
        c->mids = NULL;
        c->resolved = false;
        return GS_ENOMEM;
    }
    char *save = NULL;
    for (char *t = strtok_r(copy, "|", &save); t; t = strtok_r(NULL, "|", &save))
        c->mids[c->nmids++] = gs_cache_model_id(l->cache, t);
    free(copy);
    return 0;
}

static int cmp_p_desc(const void *a, const void *b)
{
    const struct cls *const *x = a, *const *y = b;
    if ((*x)->p != (*y)->p) return (*x)->p > (*y)->p ? -1 : 1;
    /* equal popularity: larger requests first, then models, for a total order */
    if ((*x)->count != (*y)->count) return (*x)->count > (*y)->count ? -1 : 1;
    if ((*x)->milli != (*y)->milli) return (*x)->milli > (*y)->milli ? -1 : 1;
    if ((*x)->cpu != (*y)->cpu) return (*x)->cpu > (*y)->cpu ? -1 : 1;
    return strcmp((*x)->models ? (*x)->models : "", (*y)->models ? (*y)->models : "");
}

/* Hardness of the kept GPU classes against the nodes as they are now. */
static void hardness(struct gs_fgdl *l, struct cls **keep, size_t k)
{
    int64_t free_milli = 0;
    int32_t nn = l->cache ? gs_cache_node_count(l->cache) : 0;
    for (int32_t j = 0; j < nn; j++) {
        const struct gs_node_info *nd = gs_cache_node(l->cache, j);
        if (nd && nd->live && nd->schedulable) free_milli += nd->gpu_milli_free;
    }
    double dem_total = 0;
    for (size_t i = 0; i < k; i++)
        if (keep[i]->count > 0) dem_total += keep[i]->p * keep[i]->count * keep[i]->milli;
    for (size_t i = 0; i < k; i++) {
        struct cls *c = keep[i];
        c->hard = 1;
        c->usable = 1;
        if (c->count <= 0 || dem_total <= 0 || free_milli <= 0 || resolve(l, c) < 0) continue;
        int64_t copies = 0;
        int64_t mem = c->cnt > 0 ? (int64_t)(c->mem_sum / c->cnt) : 0;
        for (int32_t j = 0; j < nn; j++) {
            const struct gs_node_info *nd = gs_cache_node(l->cache, j);
            if (nd && nd->live && nd->schedulable && nd->gpu_milli_free >= c->milli)
                copies += gs_fgdl_copies(nd, c->cpu, mem, c->count, c->milli, c->mids, c->nmids);
        }
        double usable = (double)copies * c->count * c->milli / (double)free_milli;
        if (usable > 1) usable = 1;
        double demand = c->p * c->count * c->milli / dem_total;
        c->hard = demand / (usable > l->par.floor ? usable : l->par.floor);
        c->usable = usable > l->par.floor ? usable : l->par.floor;
    }
}

/* Whether the model in use is close enough to the one fc would build to be
 * kept: the weight (normalised) of the classes that would come, go or change
 * by more than SAME_WEIGHT relative is below SAME_WEIGHT of the total. A class
 * near the coverage cut that comes and goes then does not forget every
 * memoised key. */
static bool same_weights(const struct gs_fgdl *l, const struct gs_frag_class *fc, size_t k)
{
    if (!l->model) return false;
    size_t nm = gs_frag_model_nclasses(l->model);
    double sum = 0, moved = 0, matched_old = 0;
    for (size_t i = 0; i < k; i++) sum += fc[i].p;
    if (!(sum > 0)) return false;
    for (size_t i = 0; i < k; i++) {
        double w = fc[i].p / sum;
        const struct gs_frag_class *old = NULL;
        for (size_t j = 0; j < nm && !old; j++) {
            const struct gs_frag_class *c = gs_frag_model_class(l->model, j);
            if (c->cpu_milli == fc[i].cpu_milli && c->gpu_milli == fc[i].gpu_milli &&
                c->gpu_count == fc[i].gpu_count && same_models(c->models, fc[i].models))
                old = c;
        }
        if (!old) moved += w;
        else {
            matched_old += old->p;
            if (fabs(old->p - w) > SAME_WEIGHT * old->p) moved += fabs(old->p - w);
        }
    }
    moved += 1.0 - matched_old; /* classes of the model in use that would go */
    return moved < SAME_WEIGHT;
}

/* A GPU class's weight before the rescaling to the GPU classes' total
 * popularity (fgd_learn_core.h). */
static double gpu_class_weight(const struct gs_fgdl_params *p, const struct cls *c)
{
    double over = c->hard / p->threshold;
    double count_exp = p->count_exp < 0 ? p->size_exp : p->count_exp;
    return pow(c->p, p->pop_exp) * pow(c->milli / 1000.0, -p->size_exp) * pow(c->count, -count_exp) *
           pow(c->usable, p->usable_exp) * pow(over > 1 ? over : 1, p->beta) *
           (c->milli < GS_GPU_MILLI ? p->share_scale : 1.0);
}

static void rebuild(struct gs_fgdl *l)
{
    double total = 0;
    for (size_t i = 0; i < l->n; i++) total += l->v[i].cnt;
    if (!(total > 0)) return;
    struct cls **keep = malloc(l->n * sizeof *keep);
    struct gs_frag_class *fc = malloc(l->n * sizeof *fc);
    if (!keep || !fc) goto out;
    for (size_t i = 0; i < l->n; i++) {
        l->v[i].p = l->v[i].cnt / total;
        l->v[i].weight = 0;
        keep[i] = &l->v[i];
    }
    qsort(keep, l->n, sizeof *keep, cmp_p_desc);
    size_t k = 0;
    double cum = 0;
    while (k < l->n && cum < l->par.coverage) cum += keep[k++]->p;
    /* Hysteresis: a class of the model in use stays while its popularity is at
     * least half the cut's, so classes near the cut do not come and go at
     * every rebuild (each change forgets every memoised key). */
    double cut = k ? keep[k - 1]->p / 2 : 0;
    for (size_t i = k; i < l->n; i++)
        if (keep[i]->sel && keep[i]->p >= cut) {
            struct cls *t = keep[k];
            keep[k++] = keep[i];
            keep[i] = t;
        }
    for (size_t i = 0; i < l->n; i++) keep[i]->sel = i < k;
    if (l->par.beta != 0 || l->par.usable_exp != 0) hardness(l, keep, k); /* else unused: skip the walk */
    else
        for (size_t i = 0; i < k; i++) keep[i]->hard = keep[i]->usable = 1;
    double gp = 0, gw = 0;
    for (size_t i = 0; i < k; i++) {
        struct cls *c = keep[i];
        c->weight = c->count > 0 ? gpu_class_weight(&l->par, c) : c->p;
        if (c->count > 0) {
            gp += c->p;
            gw += c->weight;
        }
    }
    for (size_t i = 0; i < k; i++) {
        struct cls *c = keep[i];
        if (c->count > 0 && gw > 0) c->weight *= gp / gw;
        fc[i] = (struct gs_frag_class){.cpu_milli = c->cpu, .gpu_milli = c->milli, .gpu_count = c->count,
                                       .models = c->models, .p = c->weight, .count = 1};
    }
    if (same_weights(l, fc, k)) goto out; /* the model in use stands: callers keep their memo */
    struct gs_frag_model *m = NULL;
    if (k && gs_frag_model_from_classes(l->cache, fc, k, 1.0, &m) == 0) {
        gs_frag_model_free(l->model);
        l->model = m;
        l->epoch++;
    }
out:
    free(keep);
    free(fc);
}

void gs_fgdl_observe(struct gs_fgdl *l, const struct gs_demand *d)
{
    int32_t count = d->gpu_count > 0 ? d->gpu_count : 0;
    int32_t milli = count ? (d->gpu_milli > GS_GPU_MILLI ? GS_GPU_MILLI : d->gpu_milli) : 0;
    if (count && milli <= 0) count = 0;
    struct cls *c = find_or_add(l, d->cpu_milli, milli, count, count ? models_key(d) : NULL);
    if (!c) return; /* out of memory: the pod is not counted */
    c->cnt += l->inc;
    c->mem_sum += l->inc * (double)d->mem_bytes;
    l->inc *= l->growth;
    if (l->inc > RESCALE_AT) {
        for (size_t i = 0; i < l->n; i++) {
            l->v[i].cnt /= l->inc;
            l->v[i].mem_sum /= l->inc;
        }
        l->inc = 1;
    }
    if (++l->observed >= l->next_rebuild) {
        uint64_t step = l->observed;
        l->next_rebuild = l->observed + (step < l->par.rebuild ? step : l->par.rebuild);
        rebuild(l);
    }
}

struct gs_frag_model *gs_fgdl_model(struct gs_fgdl *l, uint64_t *epoch)
{
    if (epoch) *epoch = l->epoch;
    return l->model;
}

size_t gs_fgdl_nclasses(const struct gs_fgdl *l) { return l->n; }

int gs_fgdl_class(const struct gs_fgdl *l, size_t i, struct gs_fgdl_class *out)
{
    if (i >= l->n) return GS_EINVAL;
    const struct cls *c = &l->v[i];
    *out = (struct gs_fgdl_class){.cpu_milli = c->cpu, .mem_bytes = c->cnt > 0 ? c->mem_sum / c->cnt : 0,
                                  .gpu_milli = c->milli, .gpu_count = c->count, .models = c->models,
                                  .p = c->p, .hardness = c->hard, .weight = c->weight};
    return 0;
}
