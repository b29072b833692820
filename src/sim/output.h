/*
 * output.h - what a simulation leaves behind: events.jsonl, series.csv and
 * report.html in one directory, plus the per-policy statistics over seeds.
 *
 * A writer is opened on a directory and then fed runs one after the other:
 * begin_run names the policy and seed, events and samples stream straight to
 * the files (nothing of the event log is held in memory), end_run records the
 * run's summary. The report needs whole curves, so the writer keeps the
 * samples of the first run of each policy (the one the charts show) and only
 * the summaries of the others. close() renders report.html - one
 * self-contained page, inline SVG, no script, no network - and closes the
 * files.
 *
 * events.jsonl: one object per line,
 *   {"t":..,"event":"scheduled|failed|preempted|completed","pod":"ns/name",
 *    "node":..|null,"gpus":[indices],"milli":..,"reason":..|null,"policy":..,"seed":..}
 * series.csv: header line, then one row per sample:
 *   t,pods_arrived,pods_scheduled,pods_running,pods_pending,arrived_pct,
 *   alloc_pct,frag_ratio,arrived_milli,used_milli,frag_milli,policy,seed
 */
#ifndef GS_SIM_OUTPUT_H
#define GS_SIM_OUTPUT_H

#include "sim/sim.h"

#include <stddef.h>

/* The numeric fields of struct gs_sim_result, addressable by number so
 * summaries (JSON, tables, statistics) iterate instead of listing fields. */
enum gs_sim_field {
    GS_SF_NODES,
    GS_SF_GPUS,
    GS_SF_PODS_ARRIVED,
    GS_SF_PODS_SCHEDULED,
    GS_SF_ALLOC_AT_100,
    GS_SF_ALLOC_FINAL,
    GS_SF_FRAG_AT_80,
    GS_SF_WALL_SECONDS,
    GS_SF_DELAY_P50,
    GS_SF_DELAY_P90,
    GS_SF_DELAY_P99,
    GS_SF_COUNT
};
/* The field's JSON key, as in struct gs_sim_result ("alloc_pct_at_100"). */
const char *gs_sim_field_name(enum gs_sim_field f);
double gs_sim_field_get(const struct gs_sim_result *r, enum gs_sim_field f);

#define GS_SIM_MAX_SEEDS 1024

/* Mean and standard deviation over runs of one policy (different seeds). */
struct gs_sim_stats {
    char policy[64];
    size_t nruns;
    uint64_t seeds[GS_SIM_MAX_SEEDS]; /* the first GS_SIM_MAX_SEEDS seeds, in run order */
    double mean[GS_SF_COUNT];
    double std[GS_SF_COUNT];          /* sample standard deviation (n - 1); 0 for one run */
};

/* Mean/std of runs[0..n) (all of one policy). */
void gs_sim_stats_compute(const struct gs_sim_result *runs, size_t n, struct gs_sim_stats *out);

/* "scheduled", "failed", "preempted", "completed". */
const char *gs_sim_event_name(enum gs_sim_event_type t);

struct gs_sim_writer;

/* Creates dir (and missing parents) and opens events.jsonl and series.csv in
 * it. mode picks the report's charts. GS_EIO when a file cannot be created. */
int gs_sim_writer_open(const char *dir, enum gs_sim_mode mode, struct gs_sim_writer **out);
/* Starts a run: events and samples that follow belong to (policy, seed). */
int gs_sim_writer_begin_run(struct gs_sim_writer *w, const char *policy, uint64_t seed);
void gs_sim_writer_event(struct gs_sim_writer *w, const struct gs_sim_event *e);
void gs_sim_writer_sample(struct gs_sim_writer *w, const struct gs_sim_sample *s);
/* Ends the current run with its summary (copied). */
int gs_sim_writer_end_run(struct gs_sim_writer *w, const struct gs_sim_result *res);
/* A sink whose event/sample callbacks feed w (progress left NULL). */
void gs_sim_writer_sink(struct gs_sim_writer *w, struct gs_sim_sink *sink);
/* Writes report.html, closes every file and frees w. Returns 0, or GS_EIO
 * when any write since open failed (the files may then be incomplete). */
int gs_sim_writer_close(struct gs_sim_writer *w);

#endif
