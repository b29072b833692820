/*
 * bound.c - an upper bound on the GPU milli any placer can allocate from a
 * given set of pods on a cluster of G GPUs (1000 milli each), used as the
 * "physical limit" of the FGD experiment (bound.h says what is bounded).
 *
 * The bound. Let P be the pods considered (a prefix of the experiment's
 * sequence), D their GPU milli and C = 1000 G the capacity. A placement puts
 * a subset S of P on the cluster; a pod p asking for k_p GPUs with m_p milli
 * each occupies k_p "items" of size m_p on distinct GPUs, and the items on
 * one GPU sum to at most 1000 (GpuShare's check). We bound U = sum over S of
 * k_p m_p, the allocated milli the experiment reports.
 *
 * A dual feasible function (DFF) f: [0,1000] -> [0,1000] is one for which
 * any sizes x_1..x_r with sum <= 1000 have sum f(x_i) <= 1000. Summing over
 * the G GPUs, every placement has sum_S k_p f(m_p) <= C. For any such f and
 * any lambda in [0,1]:
 *   U = lambda U + (1 - lambda) U
 *     = lambda [sum_S k f(m) + sum_S k (m - f(m))] + (1 - lambda) [D - sum_{P\S} k m]
 *    <= lambda C + (1 - lambda) D + sum_S lambda k (m - f(m)) - sum_{P\S} (1 - lambda) k m
 *    <= lambda C + (1 - lambda) D + sum_P max(lambda k (m - f(m)), -(1 - lambda) k m)
 * since each pod is in S or not. The right side, B(f, lambda), no longer
 * depends on S: it bounds every placement, whoever computes it and in
 * whatever order pods came. We report the least B over a family of DFFs and
 * over lambda. For a fixed f, B is convex and piecewise linear in lambda
 * (a linear part plus a sum of maxima of two linear functions), so its
 * minimum over [0,1] lies at 0, 1 or a breakpoint lambda = m / f(m) (where
 * f(m) >= m > 0); we evaluate exactly those. With f = identity, B is
 * min(C, D), the trivial bound, which is always in the family.
 *
 * The DFFs (all classical, each checked by the unit tests against brute
 * force on small instances):
 *  - threshold(t), 1 <= t <= 500: 1000 above 1000 - t, x on [t, 1000 - t],
 *    0 below t. Valid: a GPU holding an item above 1000 - t has under t
 *    left, so every other item there counts 0; otherwise f(x) <= x. It
 *    charges a big share (810 milli) the whole GPU unless the small shares
 *    that could fill its rest (< t) exist: the main loss in openb.
 *  - fs(k), k = 1..FS_MAX (Fekete and Schepers): x when (k+1) x / 1000 is an
 *    integer, else floor((k+1) x / 1000) 1000 / k. It charges e.g. two 470s
 *    500 each, so a GPU of two of them counts as full.
 *  - fs(k) after threshold(t): a composition of DFFs is a DFF.
 *
 * What it leaves out, so where it is loose: GPU models (a model-constrained
 * pod counts as able to use any GPU), CPU and memory of nodes, and that the
 * k GPUs of one pod must be on one node (an 8-GPU pod needs a whole free
 * 8-GPU node). Every omission only enlarges the set of placements bounded,
 * so the result stays an upper bound; docs/SCHEDULING.md "How far from the
 * best: the upper bound" says how far it is from the best policy.
 *
 * Cost: about 10,500 functions x (distinct shares)^2 evaluations, a few
 * milliseconds for openb's two dozen distinct shares.
 */
#include "sim/bound.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MILLI 1000
#define FS_MAX 20

/* One distinct share with its weight: GPUs asked with that share (sum of
 * pods x gpus). */
struct share {
    int32_t m;
    double w;
};

/*--- Dual feasible functions ---*/

static double threshold(int32_t x, int32_t t)
{
    if (x > MILLI - t) return MILLI;
    return x >= t ? (double)x : 0.0;
}

static double fs(double x, int k)
{
    double y = (double)(k + 1) * x / MILLI;
    double fl = floor(y + 1e-9);
    if (fabs(y - fl) < 1e-9) return x;
    return fl * MILLI / k;
}

/* f(m) for the function numbered `id`: 0 identity, 1..500 threshold(id),
 * then FS_MAX fs(k), then FS_MAX x 500 fs(k) after threshold(t). */
enum { N_THRESHOLD = MILLI / 2, N_FUNCS = 1 + N_THRESHOLD + FS_MAX + FS_MAX * N_THRESHOLD };

static double dff(int id, int32_t m)
{
    if (id == 0) return m;
    if (id <= N_THRESHOLD) return threshold(m, id);
    id -= 1 + N_THRESHOLD;
    if (id < FS_MAX) return fs(m, id + 1);
    id -= FS_MAX;
    return fs(threshold(m, id % N_THRESHOLD + 1), id / N_THRESHOLD + 1);
}

static void dff_name(int id, char *buf, size_t len)
{
    if (id == 0) snprintf(buf, len, "identity");
    else if (id <= N_THRESHOLD) snprintf(buf, len, "threshold(t=%d)", id);
    else if ((id -= 1 + N_THRESHOLD) < FS_MAX) snprintf(buf, len, "fs(k=%d)", id + 1);
    else {
        id -= FS_MAX;
        snprintf(buf, len, "fs(k=%d)*threshold(t=%d)", id / N_THRESHOLD + 1, id % N_THRESHOLD + 1);
    }
}

/*--- The bound ---*/

static double eval(const struct share *s, const double *f, size_t n, double c, double dem, double lambda)
{
    double b = lambda * c + (1 - lambda) * dem;
    for (size_t i = 0; i < n; i++) {
        double placed = lambda * (s[i].m - f[i]), dropped = -(1 - lambda) * s[i].m;
        b += s[i].w * (placed > dropped ? placed : dropped);
    }
    return b;
}

static int cmp_share(const void *a, const void *b)
{
    const struct share *x = a, *y = b;
    return (x->m > y->m) - (x->m < y->m);
}

int gs_bound_classes(const struct gs_bound_class *c, size_t n, int64_t ngpus, struct gs_bound *out,
                     struct gs_diags *d)
{
    memset(out, 0, sizeof *out);
    if (ngpus < 1) {
        gs_diags_add(d, "gpus", "invalid value %lld: the cluster needs at least one GPU", (long long)ngpus);
        return GS_EINVAL;
    }
    struct share *s = calloc(n ? n : 1, sizeof *s);
    double *f = calloc(n ? n : 1, sizeof *f);
    if (!s || !f) {
        free(s), free(f);
        return GS_ENOMEM;
    }
    size_t ns = 0;
    int64_t demand = 0;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        char path[64];
        snprintf(path, sizeof path, "classes[%zu]", i);
        if (c[i].milli < 1 || c[i].milli > MILLI) {
            gs_diags_add(d, path, "milli: invalid value %d: a GPU share is 1..1000", c[i].milli);
            rc = GS_EINVAL;
        } else if (c[i].gpus < 1) {
            gs_diags_add(d, path, "gpus: invalid value %d: a GPU pod asks for at least one GPU", c[i].gpus);
            rc = GS_EINVAL;
        } else if (c[i].pods < 0) {
            gs_diags_add(d, path, "pods: invalid value %lld: a count is not negative", (long long)c[i].pods);
            rc = GS_EINVAL;
        }
        if (rc || c[i].pods == 0) continue;
        s[ns++] = (struct share){c[i].milli, (double)c[i].pods * c[i].gpus};
        demand += c[i].pods * c[i].gpus * (int64_t)c[i].milli;
    }
    if (rc) {
        free(s), free(f);
        return rc;
    }
    qsort(s, ns, sizeof *s, cmp_share); /* merge equal shares */
    size_t k = 0;
    for (size_t i = 0; i < ns; i++) {
        if (k && s[k - 1].m == s[i].m) s[k - 1].w += s[i].w;
        else s[k++] = s[i];
    }
    ns = k;
    const double cap = (double)ngpus * MILLI, dem = (double)demand;
    double best = cap < dem ? cap : dem, best_lambda = cap < dem ? 1.0 : 0.0;
    int best_id = 0;
    for (int id = 0; id < N_FUNCS; id++) {
        for (size_t i = 0; i < ns; i++) f[i] = dff(id, s[i].m);
        for (size_t j = 0; j <= ns + 1; j++) { /* breakpoints, then 0 and 1 */
            double lambda = j == ns ? 0.0 : j == ns + 1 ? 1.0 : f[j] >= s[j].m && f[j] > 0 ? s[j].m / f[j] : -1;
            if (lambda < 0 || lambda > 1) continue;
            double b = eval(s, f, ns, cap, dem, lambda);
            if (b < best - 1e-9) best = b, best_lambda = lambda, best_id = id;
        }
    }
    out->capacity_milli = ngpus * MILLI;
    out->demand_milli = demand;
    /* U is an integer <= best; the margin covers rounding in the sums */
    out->bound_milli = (int64_t)floor(best + 1e-6);
    if (out->bound_milli > demand) out->bound_milli = demand;
    if (out->bound_milli > out->capacity_milli) out->bound_milli = out->capacity_milli;
    out->bound_pct = 100.0 * (double)out->bound_milli / (double)out->capacity_milli;
    out->lambda = best_lambda;
    dff_name(best_id, out->function, sizeof out->function);
    free(s), free(f);
    return 0;
}

/*--- The FGD experiment's prefix ---*/

int gs_bound_fgd(const struct gs_pod *pods, size_t npods, int64_t capacity_milli, struct gs_bound *out,
                 struct gs_diags *d)
{
    memset(out, 0, sizeof *out);
    if (capacity_milli < MILLI) {
        gs_diags_add(d, "capacity", "invalid value %lld milli: the cluster needs at least one GPU",
                     (long long)capacity_milli);
        return GS_EINVAL;
    }
    /* one class per pod of the prefix; merged by gs_bound_classes */
    struct gs_bound_class *c = calloc(npods ? npods : 1, sizeof *c);
    if (!c) return GS_ENOMEM;
    size_t n = 0;
    int64_t arrived = 0;
    for (size_t i = 0; i < npods; i++) {
        const struct gs_demand *dm = &pods[i].demand;
        if (dm->gpu_count > 0 && dm->gpu_milli > 0) {
            int32_t m = dm->gpu_milli > MILLI ? MILLI : dm->gpu_milli;
            c[n++] = (struct gs_bound_class){.milli = m, .gpus = dm->gpu_count, .pods = 1};
            arrived += (int64_t)m * dm->gpu_count;
        }
        /* the experiment's test for "100% arrived", to the same rounding */
        if (100.0 * (double)arrived / (double)capacity_milli >= 100.0) break;
    }
    int rc = gs_bound_classes(c, n, capacity_milli / MILLI, out, d);
    free(c);
    return rc;
}
