/*
 * output.c - the simulator's files: events.jsonl, series.csv, report.html,
 * and the CSV/JSON next to the report (summary.json; band.csv and
 * unscheduled.csv for fgd; waits.csv, queues.csv and gangs.csv for replay).
 *
 * Events and samples are written as they arrive, so a run over a large trace
 * never holds its event log in memory. The report keeps only what its
 * charts draw: the samples of the first run of each policy as small float
 * points (four floats a sample; ~11k samples a run for fgd on openb), each
 * run's allocation on a fixed grid of arrived % (the band over seeds: 801
 * floats a run), its unscheduled pods by request shape (a few counters),
 * and for replay, per pod of the first run of each policy, its first start,
 * queue, group and last failure reason (the waiting-time CDFs and the
 * per-queue and per-gang tables). Later runs of a policy (other seeds) also
 * contribute their summary to the table, with means and standard deviations.
 *
 * The page is deliberately plain: inline SVG (svg_chart.h), light CSS, no
 * script and no external resource, so it opens offline and can be mailed or
 * attached to a ticket as one file. Its first table is the run's metadata
 * (version, command line, trace, tune, seeds, date), which the caller sets;
 * the date is the caller's, so the library never reads the wall clock.
 *
 * Write errors are remembered (first one wins) and reported by close(), so
 * the per-event path stays free of error plumbing.
 */
#include "sim/output.h"

#include "sim/svg_chart.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define GRID_STEP 0.5  /* arrived % between two points of the fgd band */
#define GRID_N 801     /* 0 .. 400 % arrived */
#define MAX_TABLE_ROWS 50

/*--- Statistics ---*/

static const char *const field_names[GS_SF_COUNT] = {
    "nodes",           "gpus",          "pods_arrived",     "pods_scheduled", "alloc_pct_at_100", "alloc_pct_final",
    "frag_ratio_at_80", "wall_seconds", "delay_p50",        "delay_p90",      "delay_p99",
    "bound_pct",
};
_Static_assert(sizeof field_names / sizeof field_names[0] == GS_SF_COUNT, "one name per field");

const char *gs_sim_field_name(enum gs_sim_field f)
{
    return (unsigned)f < GS_SF_COUNT ? field_names[f] : "unknown";
}

double gs_sim_field_get(const struct gs_sim_result *r, enum gs_sim_field f)
{
    switch (f) {
    case GS_SF_NODES: return (double)r->nodes;
    case GS_SF_GPUS: return (double)r->gpus;
    case GS_SF_PODS_ARRIVED: return (double)r->pods_arrived;
    case GS_SF_PODS_SCHEDULED: return (double)r->pods_scheduled;
    case GS_SF_ALLOC_AT_100: return r->alloc_pct_at_100;
    case GS_SF_ALLOC_FINAL: return r->alloc_pct_final;
    case GS_SF_FRAG_AT_80: return r->frag_ratio_at_80;
    case GS_SF_WALL_SECONDS: return r->wall_seconds;
    case GS_SF_DELAY_P50: return r->delay_p50;
    case GS_SF_DELAY_P90: return r->delay_p90;
    case GS_SF_DELAY_P99: return r->delay_p99;
    case GS_SF_BOUND_PCT: return r->bound_pct;
    case GS_SF_COUNT: break;
    }
    return 0;
}

void gs_sim_stats_compute(const struct gs_sim_result *runs, size_t n, struct gs_sim_stats *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0) return;
    snprintf(out->policy, sizeof out->policy, "%s", runs[0].policy);
    out->nruns = n;
    for (size_t i = 0; i < n && i < GS_SIM_MAX_SEEDS; i++) out->seeds[i] = runs[i].seed;
    out->has_bound = true;
    for (size_t i = 0; i < n; i++) out->has_bound = out->has_bound && runs[i].has_bound;
    for (int f = 0; f < GS_SF_COUNT; f++) {
        double sum = 0, sq = 0;
        for (size_t i = 0; i < n; i++) sum += gs_sim_field_get(&runs[i], f);
        double mean = sum / (double)n;
        for (size_t i = 0; i < n; i++) {
            double dv = gs_sim_field_get(&runs[i], f) - mean;
            sq += dv * dv;
        }
        out->mean[f] = mean;
        out->std[f] = n > 1 ? sqrt(sq / (double)(n - 1)) : 0.0;
    }
}

const char *gs_sim_event_name(enum gs_sim_event_type t)
{
    switch (t) {
    case GS_SIM_SCHEDULED: return "scheduled";
    case GS_SIM_FAILED: return "failed";
    case GS_SIM_PREEMPTED: return "preempted";
    case GS_SIM_COMPLETED: return "completed";
    }
    return "unknown";
}


/*--- Request shapes ---*/

enum shape { SH_CPU, SH_SHARE, SH_1, SH_2, SH_4, SH_8, SH_OTHER, NSHAPES };
static const char *const shape_names[NSHAPES] = {"CPU only", "GPU share", "1 GPU", "2 GPUs", "4 GPUs", "8 GPUs",
                                                 "other GPUs"};

static enum shape shape_of(const struct gs_pod *p)
{
    int32_t n = p->demand.gpu_count, m = p->demand.gpu_milli;
    if (n <= 0 || m <= 0) return SH_CPU;
    if (m < GS_GPU_MILLI) return SH_SHARE;
    return n == 1 ? SH_1 : n == 2 ? SH_2 : n == 4 ? SH_4 : n == 8 ? SH_8 : SH_OTHER;
}

/*--- Writer state ---*/

/* One sample as the charts need it. x: arrived % (fgd) or hours (replay). */
struct point {
    float x, alloc, frag, pending;
};

/* What the replay report knows of one trace pod in a kept run. */
struct podrec {
    double start;        /* first scheduled, NAN none */
    int32_t preempted;
    char *queue, *group; /* first seen on its events; owned */
    char *reason;        /* last failure; owned */
};

struct run {
    char policy[64];
    uint64_t seed;
    struct gs_sim_result res;
    bool ended;
    bool keep;          /* first run of its policy: samples kept for the charts */
    struct point *pts;
    size_t n, cap;
    float *grid;        /* fgd: alloc % at arrived % = i * GRID_STEP, gfill points */
    size_t gfill;
    double last_x, last_alloc;
    int64_t unsched[NSHAPES]; /* failed events by the pod's request shape */
    struct podrec *pods;      /* replay, kept runs: one per trace pod */
    size_t npods;
};

struct tkey {
    char *key;          /* "ns/name" */
    size_t i;           /* index in the trace */
};

struct gs_sim_writer {
    enum gs_sim_mode mode;
    char *dir;
    FILE *events, *series;
    struct run *runs;
    size_t nruns, cap;
    int err;            /* first failure since open */
    json_t *meta;       /* gs_sim_meta_json of the caller's metadata, NULL none */
    const struct gs_trace *trace;
    struct tkey *keys;  /* the trace's pods by key */
    size_t nkeys;
};

static void fail(struct gs_sim_writer *w, int err)
{
    if (!w->err) w->err = err;
}

/*--- Metadata ---*/

/* An argument a POSIX shell reads back as itself, quoted only when needed. */
static bool shell_plain(const char *s)
{
    if (!*s) return false;
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%", *s)) return false;
    return true;
}

char *gs_sim_command_line(int argc, char *const *argv)
{
    size_t len = strlen("gpusched") + 1;
    for (int i = 0; i < argc; i++) len += 4 * strlen(argv[i]) + 3;
    char *out = malloc(len), *p = out;
    if (!out) return NULL;
    p += sprintf(p, "gpusched");
    for (int i = 0; i < argc; i++) {
        *p++ = ' ';
        if (shell_plain(argv[i])) {
            p += sprintf(p, "%s", argv[i]);
            continue;
        }
        *p++ = '\'';
        for (const char *s = argv[i]; *s; s++) {
            if (*s == '\'') p += sprintf(p, "'\\''");
            else *p++ = *s;
        }
        *p++ = '\'';
    }
    *p = '\0';
    return out;
}

json_t *gs_sim_meta_json(const struct gs_sim_meta *m)
{
    json_t *o = json_object(), *seeds = json_array();
    if (!o || !seeds) {
        json_decref(o);
        json_decref(seeds);
        return NULL;
    }
    const char *keys[] = {"version", "command", "date", "experiment", "trace", "variant", "config", "policies"};
    const char *vals[] = {m->version, m->command, m->date, m->experiment, m->trace, m->variant, m->config, m->policies};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        json_object_set_new(o, keys[i], vals[i] ? json_string(vals[i]) : json_null());
    json_object_set_new(o, "tune", m->tune > 0 ? json_real(m->tune) : json_null());
    for (size_t i = 0; i < m->nseeds; i++) json_array_append_new(seeds, json_integer((json_int_t)m->seeds[i]));
    json_object_set_new(o, "seeds", seeds);
    return o;
}

static void meta_row(FILE *f, const char *name, const char *value, bool code)
{
    if (!value) return;
    fprintf(f, "<tr><th>%s</th><td class=\"%s\">", name, code ? "code" : "text");
    gs_html_escaped(f, value);
    fputs("</td></tr>\n", f);
}

void gs_sim_meta_html(FILE *f, const struct gs_sim_meta *m)
{
    fputs("<table class=\"meta\">\n", f);
    meta_row(f, "gpusched version", m->version, false);
    meta_row(f, "command", m->command, true);
    meta_row(f, "experiment", m->experiment, false);
    meta_row(f, "trace", m->trace, true);
    meta_row(f, "variant", m->variant, false);
    meta_row(f, "scheduler config", m->config, true);
    meta_row(f, "policies", m->policies ? m->policies : "the default profile", false);
    if (m->tune > 0) fprintf(f, "<tr><th>tune</th><td class=\"text\">%g</td></tr>\n", m->tune);
    if (m->nseeds) {
        fputs("<tr><th>seeds</th><td class=\"text\">", f);
        for (size_t i = 0; i < m->nseeds; i++) fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)m->seeds[i]);
        fputs("</td></tr>\n", f);
    }
    meta_row(f, "date", m->date, false);
    fputs("</table>\n", f);
}

static const char *meta_str(const json_t *meta, const char *key)
{
    return json_string_value(json_object_get(meta, key));
}

/* The stored JSON back as a gs_sim_meta for the HTML table (strings borrowed from meta). */
static void meta_from_json(const json_t *meta, struct gs_sim_meta *m, uint64_t *seeds, size_t max)
{
    *m = (struct gs_sim_meta){.version = meta_str(meta, "version"), .command = meta_str(meta, "command"),
                              .date = meta_str(meta, "date"), .experiment = meta_str(meta, "experiment"),
                              .trace = meta_str(meta, "trace"), .variant = meta_str(meta, "variant"),
                              .config = meta_str(meta, "config"), .policies = meta_str(meta, "policies"),
                              .tune = json_real_value(json_object_get(meta, "tune")), .seeds = seeds};
    const json_t *arr = json_object_get(meta, "seeds");
    for (size_t i = 0; i < json_array_size(arr) && i < max; i++)
        seeds[m->nseeds++] = (uint64_t)json_integer_value(json_array_get(arr, i));
}

int gs_sim_writer_set_meta(struct gs_sim_writer *w, const struct gs_sim_meta *m)
{
    json_t *j = gs_sim_meta_json(m);
    if (!j) return GS_ENOMEM;
    json_decref(w->meta);
    w->meta = j;
    return 0;
}

/*--- The trace's pods by key ---*/

static int cmp_tkey(const void *a, const void *b)
{
    return strcmp(((const struct tkey *)a)->key, ((const struct tkey *)b)->key);
}

static void free_keys(struct gs_sim_writer *w)
{
    for (size_t i = 0; i < w->nkeys; i++) free(w->keys[i].key);
    free(w->keys);
    w->keys = NULL;
    w->nkeys = 0;
}

void gs_sim_writer_set_trace(struct gs_sim_writer *w, const struct gs_trace *t)
{
    free_keys(w);
    w->trace = t;
    if (!t || !t->npods) return;
    w->keys = calloc(t->npods, sizeof *w->keys);
    if (!w->keys) {
        fail(w, GS_ENOMEM);
        w->trace = NULL;
        return;
    }
    for (size_t i = 0; i < t->npods; i++) {
        char key[512];
        gs_meta_key(&t->pods[i].pod->meta, key, sizeof key);
        if (!(w->keys[i].key = strdup(key))) {
            w->nkeys = i;
            free_keys(w);
            fail(w, GS_ENOMEM);
            w->trace = NULL;
            return;
        }
        w->keys[i].i = i;
    }
    w->nkeys = t->npods;
    qsort(w->keys, w->nkeys, sizeof *w->keys, cmp_tkey);
}

/* The trace pod behind an event's pod key; the fgd experiment's inflated
 * copies ("NAME-tuned-N") map to the pod they copy. SIZE_MAX when unknown. */
static size_t trace_index(const struct gs_sim_writer *w, const char *key)
{
    if (!w->nkeys || !key) return SIZE_MAX;
    struct tkey k = {.key = (char *)key};
    const struct tkey *hit = bsearch(&k, w->keys, w->nkeys, sizeof *w->keys, cmp_tkey);
    if (hit) return hit->i;
    const char *tuned = strstr(key, "-tuned-");
    if (!tuned) return SIZE_MAX;
    char base[512];
    snprintf(base, sizeof base, "%.*s", (int)(tuned - key), key);
    k.key = base;
    hit = bsearch(&k, w->keys, w->nkeys, sizeof *w->keys, cmp_tkey);
    return hit ? hit->i : SIZE_MAX;
}

/*--- Opening, runs ---*/

static int mkdir_p(const char *dir)
{
    char *p = strdup(dir);
    if (!p) return GS_ENOMEM;
    int rc = 0;
    for (char *s = p + 1;; s++) {
        bool end = *s == '\0';
        if (*s != '/' && !end) continue;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) rc = GS_EIO;
        if (end || rc) break;
        *s = '/';
    }
    free(p);
    struct stat st;
    if (!rc && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) rc = GS_EIO;
    return rc;
}

static FILE *open_in(const char *dir, const char *name)
{
    size_t len = strlen(dir) + strlen(name) + 2;
    char *path = malloc(len);
    if (!path) return NULL;
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    free(path);
    return f;
}

int gs_sim_writer_open(const char *dir, enum gs_sim_mode mode, struct gs_sim_writer **out)
{
    *out = NULL;
    int rc = mkdir_p(dir);
    if (rc) return rc;
    struct gs_sim_writer *w = calloc(1, sizeof *w);
    if (!w) return GS_ENOMEM;
    w->mode = mode;
    w->dir = strdup(dir);
    w->events = open_in(dir, "events.jsonl");
    w->series = open_in(dir, "series.csv");
    if (!w->dir || !w->events || !w->series) {
        rc = w->dir ? GS_EIO : GS_ENOMEM;
        if (w->events) fclose(w->events);
        if (w->series) fclose(w->series);
        free(w->dir);
        free(w);
        return rc;
    }
    fputs("t,pods_arrived,pods_scheduled,pods_running,pods_pending,arrived_pct,alloc_pct,frag_ratio,"
          "arrived_milli,used_milli,frag_milli,policy,seed\n",
          w->series);
    *out = w;
    return 0;
}

static struct run *current(struct gs_sim_writer *w)
{
    return w->nruns && !w->runs[w->nruns - 1].ended ? &w->runs[w->nruns - 1] : NULL;
}

/* fgd: grid points below x hold the allocation before the sample at x. */
static void grid_fill(struct run *r, double x)
{
    while (r->grid && r->gfill < GRID_N && (double)r->gfill * GRID_STEP < x) r->grid[r->gfill++] = (float)r->last_alloc;
}

static void close_grid(struct run *r)
{
    while (r->grid && r->gfill < GRID_N && (double)r->gfill * GRID_STEP <= r->last_x)
        r->grid[r->gfill++] = (float)r->last_alloc;
}

int gs_sim_writer_begin_run(struct gs_sim_writer *w, const char *policy, uint64_t seed)
{
    struct run *cur = current(w);
    if (cur) cur->ended = true; /* a run never ended keeps no summary */
    if (w->nruns == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 8;
        struct run *r = realloc(w->runs, cap * sizeof *r);
        if (!r) return GS_ENOMEM;
        w->runs = r;
        w->cap = cap;
    }
    struct run *r = &w->runs[w->nruns++];
    memset(r, 0, sizeof *r);
    snprintf(r->policy, sizeof r->policy, "%s", policy);
    r->seed = seed;
    r->keep = true;
    for (size_t i = 0; i + 1 < w->nruns; i++)
        if (!strcmp(w->runs[i].policy, r->policy)) r->keep = false;
    if (w->mode == GS_SIM_FGD && !(r->grid = malloc(GRID_N * sizeof *r->grid))) return GS_ENOMEM;
    if (w->mode == GS_SIM_REPLAY && r->keep && w->trace && w->trace->npods) {
        if (!(r->pods = calloc(w->trace->npods, sizeof *r->pods))) return GS_ENOMEM;
        r->npods = w->trace->npods;
        for (size_t i = 0; i < w->trace->npods; i++) r->pods[i].start = NAN;
    }
    return 0;
}

int gs_sim_writer_end_run(struct gs_sim_writer *w, const struct gs_sim_result *res)
{
    struct run *cur = current(w);
    if (!cur) return GS_ESTATE;
    cur->res = *res;
    cur->ended = true;
    close_grid(cur);
    return 0;
}

/*--- events.jsonl and series.csv ---*/

/* Whole seconds print as integers ("t":427061), others as reals. */
static json_t *json_time(double t)
{
    if (t == floor(t) && fabs(t) < 1e15) return json_integer((json_int_t)t);
    return json_real(t);
}

static json_t *event_json(const struct gs_sim_event *e, const struct run *r)
{
    json_t *o = json_object();
    json_t *gpus = json_array();
    if (!o || !gpus) {
        json_decref(o);
        json_decref(gpus);
        return NULL;
    }
    for (int i = 0; i < 64; i++)
        if (e->gpus & (UINT64_C(1) << i)) json_array_append_new(gpus, json_integer(i));
    json_object_set_new(o, "t", json_time(e->t));
    json_object_set_new(o, "event", json_string(gs_sim_event_name(e->type)));
    json_object_set_new(o, "pod", e->pod ? json_string(e->pod) : json_null());
    json_object_set_new(o, "node", e->node ? json_string(e->node) : json_null());
    json_object_set_new(o, "gpus", gpus);
    json_object_set_new(o, "milli", json_integer(e->gpus ? e->milli : 0));
    json_object_set_new(o, "reason", e->reason ? json_string(e->reason) : json_null());
    if (e->claims) json_object_set(o, "claims", (json_t *)e->claims);
    if (r) {
        json_object_set_new(o, "policy", json_string(r->policy));
        json_object_set_new(o, "seed", json_integer((json_int_t)r->seed));
    }
    if (e->queue) json_object_set_new(o, "queue", json_string(e->queue));
    if (e->group) json_object_set_new(o, "group", json_string(e->group));
    return o;
}

static void set_once(struct gs_sim_writer *w, char **slot, const char *v)
{
    if (*slot || !v) return;
    if (!(*slot = strdup(v))) fail(w, GS_ENOMEM);
}

/* What the report needs of the event: shapes of unscheduled pods, per-pod starts. */
static void note_event(struct gs_sim_writer *w, struct run *r, const struct gs_sim_event *e)
{
    size_t i = trace_index(w, e->pod);
    if (i == SIZE_MAX || i >= w->trace->npods) return;
    if (e->type == GS_SIM_FAILED && w->mode == GS_SIM_FGD) r->unsched[shape_of(w->trace->pods[i].pod)]++;
    if (!r->pods || i >= r->npods) return;
    struct podrec *p = &r->pods[i];
    set_once(w, &p->queue, e->queue);
    set_once(w, &p->group, e->group);
    if (e->type == GS_SIM_SCHEDULED && isnan(p->start)) p->start = e->t;
    if (e->type == GS_SIM_PREEMPTED) p->preempted++;
    if (e->type == GS_SIM_FAILED && e->reason) {
        free(p->reason);
        if (!(p->reason = strdup(e->reason))) fail(w, GS_ENOMEM);
    }
}

void gs_sim_writer_event(struct gs_sim_writer *w, const struct gs_sim_event *e)
{
    struct run *r = current(w);
    json_t *o = event_json(e, r);
    if (!o) {
        fail(w, GS_ENOMEM);
        return;
    }
    if (json_dumpf(o, w->events, JSON_COMPACT | JSON_REAL_PRECISION(12)) != 0 || fputc('\n', w->events) == EOF)
        fail(w, GS_EIO);
    json_decref(o);
    if (r) note_event(w, r, e);
}

static void keep_point(struct gs_sim_writer *w, struct run *r, const struct gs_sim_sample *s)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 1024;
        struct point *p = realloc(r->pts, cap * sizeof *p);
        if (!p) {
            fail(w, GS_ENOMEM);
            return;
        }
        r->pts = p;
        r->cap = cap;
    }
    double x = w->mode == GS_SIM_FGD ? s->arrived_pct : s->t / 3600.0;
    r->pts[r->n++] = (struct point){(float)x, (float)s->alloc_pct, (float)s->frag_ratio, (float)s->pods_pending};
}

void gs_sim_writer_sample(struct gs_sim_writer *w, const struct gs_sim_sample *s)
{
    struct run *r = current(w);
    int n = fprintf(w->series, "%.10g,%lld,%lld,%lld,%lld,%.4f,%.4f,%.4f,%lld,%lld,%lld,%s,%llu\n", s->t,
                    (long long)s->pods_arrived, (long long)s->pods_scheduled, (long long)s->pods_running,
                    (long long)s->pods_pending, s->arrived_pct, s->alloc_pct, s->frag_ratio,
                    (long long)s->arrived_milli, (long long)s->used_milli, (long long)s->frag_milli,
                    r ? r->policy : "", r ? (unsigned long long)r->seed : 0ULL);
    if (n < 0) fail(w, GS_EIO);
    if (!r) return;
    if (r->keep) keep_point(w, r, s);
    if (r->grid) {
        grid_fill(r, s->arrived_pct);
        r->last_x = s->arrived_pct;
        r->last_alloc = s->alloc_pct;
    }
}

static void sink_event(void *ctx, const struct gs_sim_event *e) { gs_sim_writer_event(ctx, e); }
static void sink_sample(void *ctx, const struct gs_sim_sample *s) { gs_sim_writer_sample(ctx, s); }

void gs_sim_writer_sink(struct gs_sim_writer *w, struct gs_sim_sink *sink)
{
    *sink = (struct gs_sim_sink){.event = sink_event, .sample = sink_sample, .progress = NULL, .ctx = w};
}

/*--- report.html: curves of the first seed (struct point) ---*/

enum field { F_ALLOC, F_FRAG, F_PENDING };

static double point_value(const struct point *p, enum field f)
{
    return f == F_ALLOC ? p->alloc : f == F_FRAG ? p->frag : p->pending;
}

/* c's series are the kept runs' field f against x. */
static void points_chart(FILE *f, struct gs_sim_writer *w, struct gs_chart c, enum field fld,
                         const struct run *const *kept, size_t nk)
{
    struct gs_chart_series *s = calloc(nk ? nk : 1, sizeof *s);
    double **xy = calloc(2 * (nk ? nk : 1), sizeof *xy);
    bool ok = s && xy;
    for (size_t k = 0; ok && k < nk; k++) {
        const struct run *r = kept[k];
        xy[2 * k] = malloc((r->n ? r->n : 1) * sizeof **xy);
        xy[2 * k + 1] = malloc((r->n ? r->n : 1) * sizeof **xy);
        if (!xy[2 * k] || !xy[2 * k + 1]) {
            ok = false;
            break;
        }
        for (size_t i = 0; i < r->n; i++) xy[2 * k][i] = r->pts[i].x, xy[2 * k + 1][i] = point_value(&r->pts[i], fld);
        s[k] = (struct gs_chart_series){.label = r->policy, .x = xy[2 * k], .y = xy[2 * k + 1], .n = r->n};
    }
    if (ok) {
        c.s = s;
        c.ns = nk;
        gs_chart_line(f, &c);
    } else {
        fail(w, GS_ENOMEM);
    }
    for (size_t k = 0; xy && k < 2 * nk; k++) free(xy[k]);
    free(xy);
    free(s);
}

/*--- report.html: summary table ---*/
static void cell(FILE *f, double mean, double std, size_t nruns, const char *fmt)
{
    fputs("<td>", f);
    fprintf(f, fmt, mean);
    if (nruns > 1) {
        fputs(" &plusmn; ", f);
        fprintf(f, fmt, std);
    }
    fputs("</td>", f);
}

static void table_row(FILE *f, enum gs_sim_mode mode, const struct gs_sim_stats *s)
{
    static const enum gs_sim_field fgd_cols[] = {GS_SF_PODS_ARRIVED, GS_SF_PODS_SCHEDULED, GS_SF_ALLOC_AT_100,
                                                 GS_SF_ALLOC_FINAL, GS_SF_FRAG_AT_80, GS_SF_WALL_SECONDS};
    static const enum gs_sim_field replay_cols[] = {GS_SF_PODS_ARRIVED, GS_SF_PODS_SCHEDULED, GS_SF_ALLOC_FINAL,
                                                    GS_SF_DELAY_P50,    GS_SF_DELAY_P90,      GS_SF_DELAY_P99,
                                                    GS_SF_WALL_SECONDS};
    const enum gs_sim_field *cols = mode == GS_SIM_FGD ? fgd_cols : replay_cols;
    size_t ncols = mode == GS_SIM_FGD ? sizeof fgd_cols / sizeof *fgd_cols : sizeof replay_cols / sizeof *replay_cols;
    fputs("<tr><td>", f);
    gs_html_escaped(f, s->policy);
    fprintf(f, "</td><td>%zu</td><td>%.0f</td><td>%.0f</td>", s->nruns, s->mean[GS_SF_NODES], s->mean[GS_SF_GPUS]);
    for (size_t i = 0; i < ncols; i++) {
        enum gs_sim_field c = cols[i];
        const char *fmt = c == GS_SF_PODS_ARRIVED || c == GS_SF_PODS_SCHEDULED ? "%.0f"
                          : c == GS_SF_WALL_SECONDS                           ? "%.3f"
                          : c >= GS_SF_DELAY_P50                              ? "%.1f"
                                                                              : "%.2f";
        cell(f, s->mean[c], s->std[c], s->nruns, fmt);
    }
    fputs("</tr>\n", f);
}

/* Policies in order of first appearance, with the stats of their ended runs. */
static size_t collect_stats(const struct gs_sim_writer *w, struct gs_sim_stats *stats, struct gs_sim_result *tmp)
{
    size_t np = 0;
    for (size_t i = 0; i < w->nruns; i++) {
        if (!w->runs[i].keep) continue;
        size_t n = 0;
        for (size_t j = i; j < w->nruns; j++)
            if (w->runs[j].ended && !strcmp(w->runs[j].policy, w->runs[i].policy)) tmp[n++] = w->runs[j].res;
        if (!n) continue;
        gs_sim_stats_compute(tmp, n, &stats[np]);
        snprintf(stats[np].policy, sizeof stats[np].policy, "%s", w->runs[i].policy);
        np++;
    }
    return np;
}

static void report_table(FILE *f, const struct gs_sim_writer *w)
{
    struct gs_sim_stats *stats = calloc(w->nruns ? w->nruns : 1, sizeof *stats);
    struct gs_sim_result *tmp = calloc(w->nruns ? w->nruns : 1, sizeof *tmp);
    if (!stats || !tmp) {
        free(stats);
        free(tmp);
        return;
    }
    size_t np = collect_stats(w, stats, tmp);
    fputs("<table>\n<tr><th>policy</th><th>runs</th><th>nodes</th><th>GPUs</th><th>pods arrived</th>"
          "<th>pods scheduled</th>",
          f);
    if (w->mode == GS_SIM_FGD)
        fputs("<th>alloc % at 100% arrived</th><th>alloc % final</th><th>frag ratio % at 80%</th>", f);
    else
        fputs("<th>alloc % final</th><th>delay p50 (s)</th><th>delay p90 (s)</th><th>delay p99 (s)</th>", f);
    fputs("<th>wall (s)</th></tr>\n", f);
    for (size_t i = 0; i < np; i++) table_row(f, w->mode, &stats[i]);
    fputs("</table>\n", f);
    free(stats);
    free(tmp);
}

static const char style[] =
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}"
    "td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}"
    "table.meta th{text-align:left}table.meta td{text-align:left}td.code{font-family:monospace;white-space:pre-wrap;"
    "word-break:break-all}"
    ".title{font-size:15px;font-weight:600}.tick{font-size:12px;fill:#444}.label{font-size:13px;fill:#222}"
    ".grid{stroke:#e6e6e6}.frame{fill:none;stroke:#999}.line{fill:none;stroke-width:1.6}"
    ".band{fill-opacity:0.18;stroke:none}.whisker{stroke:#222;stroke-width:1.2}"
    "svg.chart{display:block;width:100%;height:auto;margin:1em 0}";

/*--- fgd: mean and band over seeds, bars, unscheduled shapes ---*/

/* Per policy (in order of first appearance): its ended runs. */
static size_t runs_of(const struct gs_sim_writer *w, const struct run *first, const struct run **out)
{
    size_t n = 0;
    for (size_t j = (size_t)(first - w->runs); j < w->nruns; j++)
        if (w->runs[j].ended && !strcmp(w->runs[j].policy, first->policy)) out[n++] = &w->runs[j];
    return n;
}

struct band {
    double *x, *mean, *lo, *hi;
    size_t n, nruns;
};

/* Mean, min and max over the policy's runs on the grid points all of them reached. */
static int band_of(const struct gs_sim_writer *w, const struct run *first, const struct run **tmp, struct band *b)
{
    size_t nr = runs_of(w, first, tmp), n = GRID_N;
    for (size_t k = 0; k < nr; k++) n = tmp[k]->gfill < n ? tmp[k]->gfill : n;
    if (!nr) n = 0;
    *b = (struct band){.x = malloc((n ? n : 1) * sizeof(double)), .mean = malloc((n ? n : 1) * sizeof(double)),
                       .lo = malloc((n ? n : 1) * sizeof(double)), .hi = malloc((n ? n : 1) * sizeof(double)),
                       .n = n, .nruns = nr};
    if (!b->x || !b->mean || !b->lo || !b->hi) return GS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        double sum = 0, lo = INFINITY, hi = -INFINITY;
        for (size_t k = 0; k < nr; k++) {
            double v = tmp[k]->grid[i];
            sum += v;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        b->x[i] = (double)i * GRID_STEP;
        b->mean[i] = sum / (double)nr;
        b->lo[i] = lo;
        b->hi[i] = hi;
    }
    return 0;
}

static void band_free(struct band *b) { free(b->x), free(b->mean), free(b->lo), free(b->hi); }

static void fgd_sections(FILE *f, struct gs_sim_writer *w, const struct run *const *kept, size_t nk)
{
    const struct run **tmp = calloc(w->nruns ? w->nruns : 1, sizeof *tmp);
    struct band *bands = calloc(nk ? nk : 1, sizeof *bands);
    struct gs_chart_series *s = calloc(nk ? nk : 1, sizeof *s);
    FILE *csv = open_in(w->dir, "band.csv"), *us = open_in(w->dir, "unscheduled.csv");
    if (!tmp || !bands || !s || !csv || !us) {
        fail(w, tmp && bands && s ? GS_EIO : GS_ENOMEM);
        goto out;
    }
    fputs("policy,arrived_pct,alloc_pct_mean,alloc_pct_min,alloc_pct_max,runs\n", csv);
    size_t maxruns = 0;
    for (size_t k = 0; k < nk; k++) {
        if (band_of(w, kept[k], tmp, &bands[k])) {
            fail(w, GS_ENOMEM);
            goto out;
        }
        const struct band *b = &bands[k];
        maxruns = b->nruns > maxruns ? b->nruns : maxruns;
        for (size_t i = 0; i < b->n; i++)
            fprintf(csv, "%s,%.1f,%.4f,%.4f,%.4f,%zu\n", kept[k]->policy, b->x[i], b->mean[i], b->lo[i], b->hi[i],
                    b->nruns);
        s[k] = (struct gs_chart_series){.label = kept[k]->policy, .x = b->x, .y = b->mean, .n = b->n,
                                        .lo = b->nruns > 1 ? b->lo : NULL, .hi = b->nruns > 1 ? b->hi : NULL};
    }
    fputs("<h2>Allocation over seeds</h2>\n", f);
    fprintf(f, "<p>Mean over seeds of each policy%s, on arrived demand in steps of %.1f%%.</p>\n",
            maxruns > 1 ? "; the shaded band spans the lowest and highest seed" : " (one seed: no band)", GRID_STEP);
    gs_chart_line(f, &(struct gs_chart){.id = "alloc-band", .title = "GPU allocation vs arrived workload (mean over seeds)",
                                        .xlabel = "arrived GPU demand (% of capacity)",
                                        .ylabel = "allocated GPU (% of capacity)", .xunit = "%", .yunit = "%",
                                        .ymax = 100, .s = s, .ns = nk});

    /* Bars: alloc % at 100 % arrived, mean +- std over seeds. */
    const char **names = calloc(nk ? nk : 1, sizeof *names);
    double *val = calloc(nk ? nk : 1, sizeof *val), *err = calloc(nk ? nk : 1, sizeof *err);
    struct gs_sim_result *res = calloc(w->nruns ? w->nruns : 1, sizeof *res);
    struct gs_sim_stats *st = malloc(sizeof *st);
    const char *series[1] = {"mean ± std"};
    if (names && val && err && res && st) {
        for (size_t k = 0; k < nk; k++) {
            size_t nr = runs_of(w, kept[k], tmp);
            for (size_t j = 0; j < nr; j++) res[j] = tmp[j]->res;
            gs_sim_stats_compute(res, nr, st);
            names[k] = kept[k]->policy;
            val[k] = st->mean[GS_SF_ALLOC_AT_100];
            err[k] = st->std[GS_SF_ALLOC_AT_100];
        }
        gs_chart_bars(f, &(struct gs_bar_chart){.id = "alloc-bars", .title = "GPU allocation at 100% arrived, per policy",
                                                .xlabel = "policy", .ylabel = "allocated GPU (% of capacity)",
                                                .yunit = "%", .groups = names, .ngroups = nk, .series = series,
                                                .nseries = 1, .value = val, .err = err});
    } else {
        fail(w, GS_ENOMEM);
    }

    /* Unscheduled pods by request shape: mean over seeds per policy. */
    fputs("policy,seed,shape,pods\n", us);
    for (size_t i = 0; i < w->nruns; i++)
        for (int sh = 0; w->trace && w->runs[i].ended && sh < NSHAPES; sh++)
            fprintf(us, "%s,%llu,%s,%lld\n", w->runs[i].policy, (unsigned long long)w->runs[i].seed, shape_names[sh],
                    (long long)w->runs[i].unsched[sh]);
    double *cnt = calloc(NSHAPES * (nk ? nk : 1), sizeof *cnt);
    if (w->trace && cnt && names) {
        for (size_t k = 0; k < nk; k++) {
            size_t nr = runs_of(w, kept[k], tmp);
            for (int sh = 0; sh < NSHAPES; sh++) {
                double sum = 0;
                for (size_t j = 0; j < nr; j++) sum += (double)tmp[j]->unsched[sh];
                cnt[(size_t)sh * nk + k] = nr ? sum / (double)nr : 0;
            }
        }
        fputs("<h2>Unscheduled pods by request shape</h2>\n<p>Pods the policy could not place (each is tried once), "
              "mean over seeds; every count per seed is in unscheduled.csv.</p>\n",
              f);
        gs_chart_bars(f, &(struct gs_bar_chart){.id = "unscheduled-shapes",
                                                .title = "Unscheduled pods by request shape",
                                                .xlabel = "request shape", .ylabel = "unscheduled pods",
                                                .groups = shape_names, .ngroups = NSHAPES, .series = names,
                                                .nseries = nk, .value = cnt});
    }
    free(cnt);
    free(names), free(val), free(err), free(res), free(st);
out:
    for (size_t k = 0; bands && k < nk; k++) band_free(&bands[k]);
    free(bands), free(s), free(tmp);
    if (csv && fclose(csv) != 0) fail(w, GS_EIO);
    if (us && fclose(us) != 0) fail(w, GS_EIO);
}

/*--- replay: waiting times, queues, gangs, pods never scheduled ---*/

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[0..n). */
static double pct(const double *v, size_t n, double p)
{
    if (!n) return 0;
    size_t rank = (size_t)ceil(p / 100.0 * (double)n);
    return v[rank ? rank - 1 : 0];
}

struct pod_view {
    size_t i;           /* trace index */
    const struct gs_pod *pod;
    const char *queue, *group, *shape;
    double arrival, start, wait; /* NAN when never started */
};

static int cmp_by_queue(const void *a, const void *b)
{
    const struct pod_view *x = a, *y = b;
    int c = strcmp(x->queue, y->queue);
    return c ? c : x->i < y->i ? -1 : x->i > y->i;
}

static int cmp_by_shape(const void *a, const void *b)
{
    const struct pod_view *x = a, *y = b;
    int c = strcmp(x->shape, y->shape);
    return c ? c : x->i < y->i ? -1 : x->i > y->i;
}

static int cmp_by_group(const void *a, const void *b)
{
    const struct pod_view *x = a, *y = b;
    int c = strcmp(x->group ? x->group : "", y->group ? y->group : "");
    return c ? c : x->i < y->i ? -1 : x->i > y->i;
}

struct unit {
    const char *name;
    double div;
};

static struct unit wait_unit(double max_s)
{
    if (max_s > 3 * 3600) return (struct unit){"h", 3600};
    if (max_s > 600) return (struct unit){"min", 60};
    return (struct unit){"s", 1};
}

/* One CDF per run of v (sorted by key): the share of the key's pods started within x. */
static void cdf_chart(FILE *f, struct gs_sim_writer *w, const char *id, const char *title, const char *what,
                      struct pod_view *v, size_t n, int (*cmp)(const void *, const void *),
                      const char *(*key)(const struct pod_view *))
{
    qsort(v, n, sizeof *v, cmp);
    double maxw = 0;
    for (size_t i = 0; i < n; i++) maxw = !isnan(v[i].wait) && v[i].wait > maxw ? v[i].wait : maxw;
    struct unit u = wait_unit(maxw);
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) ng += !i || strcmp(key(&v[i]), key(&v[i - 1]));
    struct gs_chart_series *s = calloc(ng ? ng : 1, sizeof *s);
    double *xs = malloc((n ? n : 1) * sizeof *xs), *ys = malloc((n ? n : 1) * sizeof *ys);
    if (!s || !xs || !ys) {
        fail(w, GS_ENOMEM);
        free(s), free(xs), free(ys);
        return;
    }
    size_t at = 0, g = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i, started = 0;
        while (j < n && !strcmp(key(&v[j]), key(&v[i]))) j++;
        double *x = xs + at, *y = ys + at;
        for (size_t k = i; k < j; k++)
            if (!isnan(v[k].wait)) x[started++] = v[k].wait / u.div;
        qsort(x, started, sizeof *x, cmp_double);
        for (size_t k = 0; k < started; k++) y[k] = 100.0 * (double)(k + 1) / (double)(j - i);
        s[g++] = (struct gs_chart_series){.label = key(&v[i]), .x = x, .y = y, .n = started};
        at += started;
        i = j;
    }
    char xlabel[96];
    snprintf(xlabel, sizeof xlabel, "waiting time, arrival to first start (%s)", u.name);
    char ylabel[96];
    snprintf(ylabel, sizeof ylabel, "%s started within (%%)", what);
    gs_chart_line(f, &(struct gs_chart){.id = id, .title = title, .xlabel = xlabel, .ylabel = ylabel,
                                        .xunit = u.name, .yunit = "%", .ymax = 100, .steps = true, .s = s, .ns = g});
    free(s), free(xs), free(ys);
}

static const char *queue_key(const struct pod_view *p) { return p->queue; }
static const char *shape_key(const struct pod_view *p) { return p->shape; }

static void queue_table(FILE *f, FILE *csv, const struct run *r, struct pod_view *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_by_queue);
    double *waits = malloc((n ? n : 1) * sizeof *waits);
    if (!waits) return;
    fputs("<table class=\"queues\">\n<tr><th>queue</th><th>pods</th><th>started</th><th>never started</th>"
          "<th>preemptions</th><th>wait p50 (s)</th><th>wait p90 (s)</th><th>wait p99 (s)</th><th>wait max (s)</th></tr>\n",
          f);
    for (size_t i = 0; i < n;) {
        size_t j = i, nw = 0;
        int64_t pre = 0;
        while (j < n && !strcmp(v[j].queue, v[i].queue)) j++;
        for (size_t k = i; k < j; k++) {
            if (!isnan(v[k].wait)) waits[nw++] = v[k].wait;
            pre += r->pods[v[k].i].preempted;
        }
        qsort(waits, nw, sizeof *waits, cmp_double);
        double p50 = pct(waits, nw, 50), p90 = pct(waits, nw, 90), p99 = pct(waits, nw, 99),
               mx = nw ? waits[nw - 1] : 0;
        fputs("<tr><td>", f);
        gs_html_escaped(f, v[i].queue);
        fprintf(f, "</td><td>%zu</td><td>%zu</td><td>%zu</td><td>%lld</td><td>%.1f</td><td>%.1f</td><td>%.1f</td>"
                   "<td>%.1f</td></tr>\n",
                j - i, nw, j - i - nw, (long long)pre, p50, p90, p99, mx);
        fprintf(csv, "%s,%llu,\"%s\",%zu,%zu,%zu,%lld,%.3f,%.3f,%.3f,%.3f\n", r->policy, (unsigned long long)r->seed,
                v[i].queue, j - i, nw, j - i - nw, (long long)pre, p50, p90, p99, mx);
        i = j;
    }
    fputs("</table>\n", f);
    free(waits);
}

struct gang {
    const char *name;
    size_t members, started;
    double first_arrival, first_start, last_start;
};

static int cmp_gang(const void *a, const void *b)
{
    const struct gang *x = a, *y = b;
    bool fx = x->started == x->members, fy = y->started == y->members;
    if (fx != fy) return fx ? 1 : -1; /* partial gangs first */
    double sx_ = x->last_start - x->first_start, sy_ = y->last_start - y->first_start;
    if (sx_ != sy_) return sx_ > sy_ ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void gang_table(FILE *f, FILE *csv, const struct run *r, struct pod_view *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_by_group);
    struct gang *g = calloc(n ? n : 1, sizeof *g);
    if (!g) return;
    size_t ng = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && !strcmp(v[j].group ? v[j].group : "", v[i].group ? v[i].group : "")) j++;
        if (v[i].group) {
            struct gang *x = &g[ng++];
            *x = (struct gang){.name = v[i].group, .members = j - i, .first_arrival = INFINITY,
                               .first_start = INFINITY, .last_start = -INFINITY};
            for (size_t k = i; k < j; k++) {
                x->first_arrival = v[k].arrival < x->first_arrival ? v[k].arrival : x->first_arrival;
                if (isnan(v[k].start)) continue;
                x->started++;
                x->first_start = v[k].start < x->first_start ? v[k].start : x->first_start;
                x->last_start = v[k].start > x->last_start ? v[k].start : x->last_start;
            }
        }
        i = j;
    }
    if (!ng) {
        fputs("<p>No pod of this run belongs to a PodGroup or Workload.</p>\n", f);
        free(g);
        return;
    }
    qsort(g, ng, sizeof *g, cmp_gang);
    size_t partial = 0;
    for (size_t i = 0; i < ng; i++) partial += g[i].started && g[i].started < g[i].members;
    fprintf(f, "<p>%zu gangs; %zu started only in part (members running while others never started).%s</p>\n", ng,
            partial, ng > MAX_TABLE_ROWS ? " The first 50 rows: partial gangs, then by spread; all in gangs.csv." : "");
    fputs("<table class=\"gangs\">\n<tr><th>group</th><th>members</th><th>started</th><th>first start (s)</th>"
          "<th>last start (s)</th><th>spread (s)</th><th>wait of the last member (s)</th></tr>\n",
          f);
    for (size_t i = 0; i < ng; i++) {
        const struct gang *x = &g[i];
        bool any = x->started > 0;
        double spread = any ? x->last_start - x->first_start : 0, wait = any ? x->last_start - x->first_arrival : 0;
        fprintf(csv, "%s,%llu,\"%s\",%zu,%zu,", r->policy, (unsigned long long)r->seed, x->name, x->members,
                x->started);
        if (any) fprintf(csv, "%.3f,%.3f,%.3f,%.3f\n", x->first_start, x->last_start, spread, wait);
        else fputs(",,,\n", csv);
        if (i >= MAX_TABLE_ROWS) continue;
        fputs("<tr><td>", f);
        gs_html_escaped(f, x->name);
        fprintf(f, "</td><td>%zu</td><td>%zu</td>", x->members, x->started);
        if (any) fprintf(f, "<td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td></tr>\n", x->first_start,
                         x->last_start, spread, wait);
        else fputs("<td>-</td><td>-</td><td>-</td><td>-</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    free(g);
}

static void never_table(FILE *f, const struct run *r, const struct pod_view *v, size_t n)
{
    size_t never = 0;
    for (size_t i = 0; i < n; i++) never += isnan(v[i].start);
    fprintf(f, "<p>%zu of %zu pods never started%s</p>\n", never, n,
            never > MAX_TABLE_ROWS ? " (the first 50 below; all in waits.csv, with an empty start)" : never ? ":" : ".");
    if (!never) return;
    fputs("<table class=\"never\">\n<tr><th>pod</th><th>queue</th><th>group</th><th>request</th><th>arrival (s)</th>"
          "<th>last reason</th></tr>\n",
          f);
    for (size_t i = 0, shown = 0; i < n && shown < MAX_TABLE_ROWS; i++) {
        if (!isnan(v[i].start)) continue;
        shown++;
        char key[512];
        gs_meta_key(&v[i].pod->meta, key, sizeof key);
        fputs("<tr><td>", f);
        gs_html_escaped(f, key);
        fputs("</td><td>", f);
        gs_html_escaped(f, v[i].queue);
        fputs("</td><td>", f);
        gs_html_escaped(f, v[i].group ? v[i].group : "-");
        fprintf(f, "</td><td>%s</td><td>%.1f</td><td>", v[i].shape, v[i].arrival);
        gs_html_escaped(f, r->pods[v[i].i].reason ? r->pods[v[i].i].reason : "-");
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void csv_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void replay_sections(FILE *f, struct gs_sim_writer *w, const struct run *const *kept, size_t nk)
{
    FILE *wc = open_in(w->dir, "waits.csv"), *qc = open_in(w->dir, "queues.csv"), *gc = open_in(w->dir, "gangs.csv");
    struct pod_view *v = calloc(w->trace->npods ? w->trace->npods : 1, sizeof *v);
    if (!wc || !qc || !gc || !v) {
        fail(w, v ? GS_EIO : GS_ENOMEM);
        goto out;
    }
    fputs("policy,seed,pod,queue,group,shape,gpus,gpu_milli,arrival,start,wait,preemptions\n", wc);
    fputs("policy,seed,queue,pods,started,never_started,preemptions,wait_p50,wait_p90,wait_p99,wait_max\n", qc);
    fputs("policy,seed,group,members,started,first_start,last_start,spread,wait_last_member\n", gc);
    for (size_t k = 0; k < nk; k++) {
        const struct run *r = kept[k];
        if (!r->pods || r->npods != w->trace->npods) continue;
        size_t n = 0;
        bool queues = false;
        for (size_t i = 0; i < w->trace->npods; i++) {
            const struct gs_trace_pod *tp = &w->trace->pods[i];
            if (tp->node) continue; /* running before the trace starts: no wait to measure */
            const struct podrec *p = &r->pods[i];
            /* A pod admission never let through has no event naming its queue: its label does. */
            const char *queue = p->queue ? p->queue : tp->pod->queue_name;
            queues |= queue != NULL;
            v[n] = (struct pod_view){.i = i, .pod = tp->pod, .queue = queue ? queue : "(no queue)",
                                     .group = p->group, .shape = shape_names[shape_of(tp->pod)],
                                     .arrival = tp->arrival, .start = p->start,
                                     .wait = isnan(p->start) ? NAN : p->start - tp->arrival};
            char key[512];
            gs_meta_key(&tp->pod->meta, key, sizeof key);
            fprintf(wc, "%s,%llu,", r->policy, (unsigned long long)r->seed);
            csv_str(wc, key);
            fputc(',', wc);
            csv_str(wc, queue ? queue : "");
            fputc(',', wc);
            csv_str(wc, p->group ? p->group : "");
            fprintf(wc, ",%s,%d,%d,%.3f,", v[n].shape, tp->pod->demand.gpu_count, tp->pod->demand.gpu_milli,
                    tp->arrival);
            if (isnan(p->start)) fprintf(wc, ",,%d\n", p->preempted);
            else fprintf(wc, "%.3f,%.3f,%d\n", p->start, v[n].wait, p->preempted);
            n++;
        }
        fputs("<h2>Waiting times: ", f);
        gs_html_escaped(f, r->policy);
        fprintf(f, ", seed %llu</h2>\n", (unsigned long long)r->seed);
        if (!queues)
            fputs("<p>No pod went through admission (no queue on any event): one curve, \"(no queue)\".</p>\n", f);
        char id[160], title[200];
        snprintf(id, sizeof id, "wait-cdf-queue-%zu", k);
        snprintf(title, sizeof title, "Waiting time per queue (%s)", r->policy);
        cdf_chart(f, w, id, title, "pods of the queue", v, n, cmp_by_queue, queue_key);
        snprintf(id, sizeof id, "wait-cdf-size-%zu", k);
        snprintf(title, sizeof title, "Waiting time per job size (%s)", r->policy);
        cdf_chart(f, w, id, title, "pods of the size", v, n, cmp_by_shape, shape_key);
        fputs("<h3>Per queue</h3>\n", f);
        queue_table(f, qc, r, v, n);
        fputs("<h3>Per gang</h3>\n", f);
        gang_table(f, gc, r, v, n);
        fputs("<h3>Pods never scheduled</h3>\n", f);
        qsort(v, n, sizeof *v, cmp_by_queue);
        never_table(f, r, v, n);
    }
out:
    free(v);
    if (wc && fclose(wc) != 0) fail(w, GS_EIO);
    if (qc && fclose(qc) != 0) fail(w, GS_EIO);
    if (gc && fclose(gc) != 0) fail(w, GS_EIO);
}

/*--- summary.json ---*/

static int write_summary(struct gs_sim_writer *w)
{
    json_t *o = json_object(), *pol = json_array();
    struct gs_sim_stats *stats = calloc(w->nruns ? w->nruns : 1, sizeof *stats);
    struct gs_sim_result *tmp = calloc(w->nruns ? w->nruns : 1, sizeof *tmp);
    int rc = o && pol && stats && tmp ? 0 : GS_ENOMEM;
    if (!rc) {
        size_t np = collect_stats(w, stats, tmp);
        for (size_t i = 0; i < np; i++) {
            json_t *p = json_object(), *mean = json_object(), *std = json_object(), *seeds = json_array();
            for (int fld = 0; fld < GS_SF_COUNT; fld++) {
                if (fld == GS_SF_BOUND_PCT && !stats[i].has_bound) continue;
                json_object_set_new(mean, gs_sim_field_name(fld), json_real(stats[i].mean[fld]));
                json_object_set_new(std, gs_sim_field_name(fld), json_real(stats[i].std[fld]));
            }
            for (size_t s = 0; s < stats[i].nruns && s < GS_SIM_MAX_SEEDS; s++)
                json_array_append_new(seeds, json_integer((json_int_t)stats[i].seeds[s]));
            json_object_set_new(p, "policy", json_string(stats[i].policy));
            json_object_set_new(p, "runs", json_integer((json_int_t)stats[i].nruns));
            json_object_set_new(p, "seeds", seeds);
            json_object_set_new(p, "mean", mean);
            json_object_set_new(p, "std", std);
            json_array_append_new(pol, p);
        }
        json_object_set_new(o, "meta", w->meta ? json_incref(w->meta) : json_null());
        json_object_set_new(o, "experiment", json_string(w->mode == GS_SIM_FGD ? "fgd" : "replay"));
        json_object_set_new(o, "policies", pol);
        pol = NULL;
        size_t len = strlen(w->dir) + 16;
        char *path = malloc(len);
        if (!path) rc = GS_ENOMEM;
        else {
            snprintf(path, len, "%s/summary.json", w->dir);
            if (json_dump_file(o, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10))) rc = GS_EIO;
            free(path);
        }
    }
    json_decref(o);
    json_decref(pol);
    free(stats);
    free(tmp);
    return rc;
}

/*--- report.html ---*/

static void report_body(FILE *f, struct gs_sim_writer *w, const struct run *const *kept, size_t nk)
{
    bool fgd = w->mode == GS_SIM_FGD;
    fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gpusched sim: %s</title>"
               "<style>%s</style></head><body>\n<h1>gpusched sim &mdash; %s experiment</h1>\n",
            fgd ? "fgd" : "replay", style, fgd ? "fgd" : "replay");
    uint64_t *seeds = w->meta ? malloc(GS_SIM_MAX_SEEDS * sizeof *seeds) : NULL;
    if (seeds) {
        struct gs_sim_meta m;
        meta_from_json(w->meta, &m, seeds, GS_SIM_MAX_SEEDS);
        fputs("<h2>Run</h2>\n", f);
        gs_sim_meta_html(f, &m);
    } else if (w->meta) {
        fail(w, GS_ENOMEM);
    }
    free(seeds);
    fputs("<h2>Summary</h2>\n", f);
    report_table(f, w);
    if (nk > 0 && kept[0]->seed)
        fprintf(f, "<p>Curves below show the first seed of each policy (%llu).</p>\n",
                (unsigned long long)kept[0]->seed);
    if (fgd) {
        points_chart(f, w,
                     (struct gs_chart){.id = "alloc", .title = "GPU allocation vs arrived workload",
                                       .xlabel = "arrived GPU demand (% of capacity)",
                                       .ylabel = "allocated GPU (% of capacity)", .xunit = "%", .yunit = "%",
                                       .ymax = 100},
                     F_ALLOC, kept, nk);
        points_chart(f, w,
                     (struct gs_chart){.id = "frag", .title = "Fragmentation vs arrived workload",
                                       .xlabel = "arrived GPU demand (% of capacity)",
                                       .ylabel = "fragmented share of idle GPU (%)", .xunit = "%", .yunit = "%",
                                       .ycap = 100},
                     F_FRAG, kept, nk);
        fgd_sections(f, w, kept, nk);
    } else {
        points_chart(f, w,
                     (struct gs_chart){.id = "util", .title = "GPU utilisation over time", .xlabel = "time (hours)",
                                       .ylabel = "allocated GPU (% of capacity)", .xunit = "h", .yunit = "%",
                                       .xfit = true, .steps = true, .ycap = 100},
                     F_ALLOC, kept, nk);
        points_chart(f, w,
                     (struct gs_chart){.id = "pending", .title = "Pending pods over time", .xlabel = "time (hours)",
                                       .ylabel = "pending pods", .xunit = "h", .xfit = true, .steps = true},
                     F_PENDING, kept, nk);
        if (w->trace) replay_sections(f, w, kept, nk);
    }
    fputs("</body></html>\n", f);
}

static int write_report(struct gs_sim_writer *w)
{
    FILE *f = open_in(w->dir, "report.html");
    if (!f) return GS_EIO;
    const struct run **kept = calloc(w->nruns ? w->nruns : 1, sizeof *kept);
    if (!kept) {
        fclose(f);
        return GS_ENOMEM;
    }
    size_t nk = 0;
    for (size_t i = 0; i < w->nruns; i++)
        if (w->runs[i].keep) kept[nk++] = &w->runs[i];
    report_body(f, w, kept, nk);
    free(kept);
    int bad = ferror(f);
    int rc = fclose(f) != 0 || bad ? GS_EIO : 0;
    int src = write_summary(w);
    return rc ? rc : src;
}

int gs_sim_writer_close(struct gs_sim_writer *w)
{
    if (!w) return 0;
    int rc = write_report(w);
    if (rc) fail(w, rc);
    if (ferror(w->events)) fail(w, GS_EIO);
    if (fclose(w->events) != 0) fail(w, GS_EIO);
    if (ferror(w->series)) fail(w, GS_EIO);
    if (fclose(w->series) != 0) fail(w, GS_EIO);
    rc = w->err;
    for (size_t i = 0; i < w->nruns; i++) {
        struct run *r = &w->runs[i];
        free(r->pts);
        free(r->grid);
        for (size_t k = 0; k < r->npods; k++)
            free(r->pods[k].queue), free(r->pods[k].group), free(r->pods[k].reason);
        free(r->pods);
    }
    free(w->runs);
    free_keys(w);
    json_decref(w->meta);
    free(w->dir);
    free(w);
    return rc;
}
