/*
 * bound.h - an upper bound on the GPU allocation any placer can reach in the
 * FGD experiment's setting (pods tried once in a given order, nothing
 * departs), the "physical limit" policies are measured against.
 *
 * What it bounds: for the pods of a prefix P of the experiment's sequence,
 * the most GPU milli of any subset S of P that fits on the cluster at once
 * (each GPU holds shares summing to at most 1000; a pod of k GPUs takes k
 * distinct GPUs). Any placer, online or not, skipping pods or not, ends the
 * prefix with such a subset placed, so its allocated milli is at most the
 * bound. The proof and the functions used are in bound.c's header comment.
 *
 * The FGD experiment (fgd_experiment.c) calls gs_bound_fgd() with its pod
 * sequence when gs_sim_opts.bound is set; `gpusched sim --experiment fgd
 * --bound` reports the result as bound_pct next to alloc_pct_at_100.
 */
#ifndef GS_SIM_BOUND_H
#define GS_SIM_BOUND_H

#include "core/error.h"
#include "core/object.h"

#include <stddef.h>
#include <stdint.h>

/* Pods of one GPU request shape: `pods` pods, each asking for `gpus` GPUs
 * with `milli` (1..1000) of each. */
struct gs_bound_class {
    int32_t milli;
    int32_t gpus;
    int64_t pods;
};

/* How the bound was reached: the dual feasible function (see bound.c) and
 * the weight lambda that gave the smallest value. */
struct gs_bound {
    int64_t capacity_milli; /* 1000 x GPUs */
    int64_t demand_milli;   /* GPU milli asked for by the pods considered */
    int64_t bound_milli;    /* upper bound on the GPU milli any placer allocates */
    double bound_pct;       /* 100 x bound_milli / capacity_milli */
    char function[48];      /* "identity", "threshold(t=191)", "fs(k=2)", "fs(k=2)*threshold(t=31)" */
    double lambda;
};

/* Bound for the classes c[0..n) on ngpus GPUs of 1000 milli. GS_EINVAL with
 * a diagnosis naming the class and field when a class is malformed (milli
 * outside 1..1000, gpus < 1, pods < 0) or ngpus < 1. */
int gs_bound_classes(const struct gs_bound_class *c, size_t n, int64_t ngpus, struct gs_bound *out,
                     struct gs_diags *d);

/* The FGD experiment's bound at 100% arrived: the prefix of pods[0..npods)
 * up to and including the first pod at which the requested GPU milli reaches
 * capacity_milli (all pods when it never does), bounded on
 * capacity_milli / 1000 GPUs. Pods without GPUs are ignored; a pod's share is
 * clipped to 1000 as the experiment does. Errors as gs_bound_classes. */
int gs_bound_fgd(const struct gs_pod *pods, size_t npods, int64_t capacity_milli, struct gs_bound *out,
                 struct gs_diags *d);

#endif
