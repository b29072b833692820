/*
 * bench_gang.h - the gang shapes of `gpusched bench` (cmd_bench_gang.c).
 *
 * kube-scheduler's scheduler_perf `podgroup/gangscheduling` benchmark on the
 * production profile: G gangs of S pods (100m CPU, 100Mi each, kube's
 * pod-default) on N nodes (kube's node-default: 4 CPU, 32Gi, 110 pods, plus
 * --gpus-per-node GPUs no pod asks for), every member of a gang one
 * PodGroup (minMember S), all scheduled through the scheduler driver (queue,
 * Coscheduling's whole-group plan, Permit) on a simulated clock. The
 * preemption variant first fills every node with low-priority single pods
 * (four of 1 CPU each: nothing else fits), then the gangs come at a higher
 * priority and must preempt.
 *
 * Shape names: gang-<G>x<S>, with "-preempt" for the preemption variant
 * (gang-1000x3, gang-3000x3, gang-9x1000, gang-10x5000 are kube's). Every
 * gang must end whole or not at all: the run counts partial gangs from the
 * cache (members assumed or bound) and fails when there is one.
 */
#ifndef GS_CLI_BENCH_GANG_H
#define GS_CLI_BENCH_GANG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The production profile's name for --profile (gs_sched_config_gpusched). */
#define GS_BENCH_PROFILE_GPUSCHED "gpusched"

struct gs_bench_gang_opts {
    long nodes, gpus;   /* cluster: nodes, GPUs per node */
    long gangs, size;   /* gangs of size pods */
    bool preempt;       /* low-priority filler first; the gangs must preempt */
    uint64_t seed;
    int classes;        /* enum gs_node_classes for the framework (0: AUTO, the default) */
};

struct gs_bench_gang_result {
    long pods;            /* gang members */
    long filler;          /* low-priority pods placed before (preemption variant) */
    long bound;           /* gang members bound at the end */
    long gangs_whole;     /* gangs with every member bound */
    long gangs_partial;   /* gangs with some but not all members in the cache: must be 0 */
    long gangs_none;      /* gangs with no member in the cache */
    long attempts;        /* scheduling cycles run */
    int64_t evictions;    /* victims of preemption */
    double cpu_us, wall_us; /* the measured loop: thread CPU time and wall clock */
    double sim_s;         /* simulated seconds the loop took (backoff, Permit waits) */
    uint64_t decisions;   /* FNV-1a over every bind and eviction in order (pod, node, GPUs): equal
                             digests, equal decisions */
    uint64_t class_cycles; /* cycles whose node was chosen by node class */
};

/* Parses a shape name into o->gangs, o->size, o->preempt. 0, or -1 when the
 * name is not a gang shape (why says what is wrong, when it looks like one). */
int gs__bench_gang_shape(const char *name, struct gs_bench_gang_opts *o, char *why, size_t whylen);
/* Runs one shape. 0 (r filled), or a negative GS_E* with why set. A partial
 * gang is not an error here: the caller checks r->gangs_partial. */
int gs__bench_gang_run(const struct gs_bench_gang_opts *o, struct gs_bench_gang_result *r, char *why, size_t whylen);
/* `gpusched bench --shape gang-...`: runs it and prints the summary and the
 * JSON line. Exit code: 0, 1 (a partial gang, or the run failed). */
int gs__bench_gang(const char *shape, long nodes, long gpus, uint64_t seed);

#endif
