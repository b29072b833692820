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
 *   plus "queue" and "group" only when the event has them (admission ran,
 *   the pod belongs to a PodGroup or Workload), so other outputs are unchanged.
 * Next to report.html: summary.json (the metadata and per-policy results),
 * and per experiment fgd: band.csv (alloc % over seeds on a grid of arrived
 * %), unscheduled.csv (pods by request shape); replay: waits.csv (one row
 * per pod), queues.csv, gangs.csv.
 * series.csv: header line, then one row per sample:
 *   t,pods_arrived,pods_scheduled,pods_running,pods_pending,arrived_pct,
 *   alloc_pct,frag_ratio,arrived_milli,used_milli,frag_milli,policy,seed
 */
#ifndef GS_SIM_OUTPUT_H
#define GS_SIM_OUTPUT_H

#include "sim/sim.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

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
    GS_SF_BOUND_PCT,     /* fgd with --bound only (gs_sim_result.has_bound); left out of outputs otherwise */
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
    bool has_bound;                   /* every run carries bound_pct */
};

/* Mean/std of runs[0..n) (all of one policy). */
void gs_sim_stats_compute(const struct gs_sim_result *runs, size_t n, struct gs_sim_stats *out);

/* "scheduled", "failed", "preempted", "completed". */
const char *gs_sim_event_name(enum gs_sim_event_type t);

struct gs_sim_writer;

/* What a report says about how it was made, printed at its top and stored in
 * summary.json (and tenants.json). Strings may be NULL (not shown). The date
 * comes from the caller (the CLI): the simulator never reads the wall clock
 * for it, so a library run stays reproducible. */
struct gs_sim_meta {
    const char *version;     /* gpusched version */
    const char *command;     /* the exact command line, shell-quoted */
    const char *date;        /* ISO 8601, UTC */
    const char *experiment;  /* fgd, replay, tenants */
    const char *trace;       /* trace directory or files */
    const char *variant;     /* openb pod list variant */
    const char *config;      /* scheduler configuration file */
    const char *policies;    /* as asked ("FGD,BestFit"; NULL: the default profile) */
    double tune;             /* fgd; <= 0: not applicable */
    const uint64_t *seeds;
    size_t nseeds;
};

/* "gpusched ARGV..." with each argument shell-quoted where it needs it;
 * argv[0] is the subcommand (as main() passes it). Caller frees. */
char *gs_sim_command_line(int argc, char *const *argv);
/* The metadata as an HTML table (class "meta") and as a JSON object. */
void gs_sim_meta_html(FILE *f, const struct gs_sim_meta *m);
json_t *gs_sim_meta_json(const struct gs_sim_meta *m);

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
/* Copies m into the writer: the report and summary.json show it. */
int gs_sim_writer_set_meta(struct gs_sim_writer *w, const struct gs_sim_meta *m);
/* The trace the runs replay (borrowed until close): lets the report name
 * each pod's request shape (unscheduled pods by shape, waits by job size)
 * and its arrival (waiting times, pods never scheduled). Without it those
 * sections are left out. */
void gs_sim_writer_set_trace(struct gs_sim_writer *w, const struct gs_trace *t);
/* Writes report.html, closes every file and frees w. Returns 0, or GS_EIO
 * when any write since open failed (the files may then be incomplete). */
int gs_sim_writer_close(struct gs_sim_writer *w);

#endif
