/*
 * output.c - the simulator's files: events.jsonl, series.csv, report.html.
 *
 * Events and samples are written as they arrive, so a run over a large trace
 * never holds its event log in memory. The report is the exception: it draws
 * whole curves, so the samples of the first run of each policy are kept as
 * small float points (four floats a sample; the FGD experiment on the openb
 * trace makes ~11k samples a run, well under a megabyte for six policies).
 * Later runs of the same policy (other seeds) only contribute their summary
 * to the table, where means and standard deviations are shown.
 *
 * The page is deliberately plain: inline SVG polylines, a legend, light CSS,
 * no script and no external resource, so it opens offline and can be mailed
 * or attached to a ticket as one file. Curves are thinned to about
 * MAX_POINTS vertices (each bucket of samples keeps its lowest and highest
 * point), which is about the chart's width in pixels and keeps the file small.
 *
 * Write errors are remembered (first one wins) and reported by close(), so
 * the per-event path stays free of error plumbing.
 */
#include "sim/output.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_POINTS 800

/*--- Statistics ---*/

static const char *const field_names[GS_SF_COUNT] = {
    "nodes",           "gpus",          "pods_arrived",     "pods_scheduled", "alloc_pct_at_100", "alloc_pct_final",
    "frag_ratio_at_80", "wall_seconds", "delay_p50",        "delay_p90",      "delay_p99",
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

/*--- Writer state ---*/

/* One sample as the charts need it. x: arrived % (fgd) or hours (replay). */
struct point {
    float x, alloc, frag, pending;
};

struct run {
    char policy[64];
    uint64_t seed;
    struct gs_sim_result res;
    bool ended;
    bool keep;          /* first run of its policy: samples kept for the charts */
    struct point *pts;
    size_t n, cap;
};

struct gs_sim_writer {
    enum gs_sim_mode mode;
    char *dir;
    FILE *events, *series;
    struct run *runs;
    size_t nruns, cap;
    int err;            /* first failure since open */
};

static void fail(struct gs_sim_writer *w, int err)
{
    if (!w->err) w->err = err;
}

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
    return 0;
}

int gs_sim_writer_end_run(struct gs_sim_writer *w, const struct gs_sim_result *res)
{
    struct run *cur = current(w);
    if (!cur) return GS_ESTATE;
    cur->res = *res;
    cur->ended = true;
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
    return o;
}

void gs_sim_writer_event(struct gs_sim_writer *w, const struct gs_sim_event *e)
{
    json_t *o = event_json(e, current(w));
    if (!o) {
        fail(w, GS_ENOMEM);
        return;
    }
    if (json_dumpf(o, w->events, JSON_COMPACT | JSON_REAL_PRECISION(12)) != 0 || fputc('\n', w->events) == EOF)
        fail(w, GS_EIO);
    json_decref(o);
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
    if (r && r->keep) keep_point(w, r, s);
}

static void sink_event(void *ctx, const struct gs_sim_event *e) { gs_sim_writer_event(ctx, e); }
static void sink_sample(void *ctx, const struct gs_sim_sample *s) { gs_sim_writer_sample(ctx, s); }

void gs_sim_writer_sink(struct gs_sim_writer *w, struct gs_sim_sink *sink)
{
    *sink = (struct gs_sim_sink){.event = sink_event, .sample = sink_sample, .progress = NULL, .ctx = w};
}

/*--- report.html: SVG charts ---*/

enum field { F_ALLOC, F_FRAG, F_PENDING };

static double point_value(const struct point *p, enum field f)
{
    return f == F_ALLOC ? p->alloc : f == F_FRAG ? p->frag : p->pending;
}

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
#define NPALETTE (sizeof palette / sizeof palette[0])

static void html_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A round tick step giving about five intervals over range. */
static double nice_step(double range)
{
    if (!(range > 0)) return 1;
    double raw = range / 5, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return mag * (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10);
}

/* Upper axis bound: the data's max rounded up to a tick. */
static double nice_max(double v)
{
    if (!(v > 0)) return 1;
    double step = nice_step(v);
    return ceil(v / step - 1e-9) * step;
}

struct chart {
    const char *title, *xlabel, *ylabel;
    enum field field;
    double ymax;     /* fixed top of the y axis; 0: fitted to the data */
    bool xfit;       /* x axis starts where the data starts (else at 0) */
    bool steps;      /* values hold until the next sample (state over time) */
    double ycap;     /* fitted y axis never above this (0: no cap) */
    double xmin, xmax;
};

enum { CW = 760, CH = 380, ML = 64, MR = 150, MT = 34, MB = 48 };

static double sx(const struct chart *c, double x)
{
    return ML + (x - c->xmin) / (c->xmax - c->xmin) * (CW - ML - MR);
}
static double sy(const struct chart *c, double y) { return CH - MB - y / c->ymax * (CH - MT - MB); }

static void chart_axes(FILE *f, const struct chart *c)
{
    fprintf(f, "<text x=\"%d\" y=\"20\" class=\"title\">", ML);
    html_escaped(f, c->title);
    fputs("</text>\n", f);
    double xs = nice_step(c->xmax - c->xmin), ys = nice_step(c->ymax);
    for (double v = c->xmin; v <= c->xmax + xs * 1e-6; v += xs)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"grid\"/><text x=\"%.1f\" y=\"%d\" "
                   "class=\"tick\" text-anchor=\"middle\">%g</text>\n",
                sx(c, v), MT, sx(c, v), CH - MB, sx(c, v), CH - MB + 16, v);
    for (double v = 0; v <= c->ymax + ys * 1e-6; v += ys)
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/><text x=\"%d\" y=\"%.1f\" "
                   "class=\"tick\" text-anchor=\"end\">%g</text>\n",
                ML, sy(c, v), CW - MR, sy(c, v), ML - 6, sy(c, v) + 4, v);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"frame\"/>\n", ML, MT, CW - ML - MR,
            CH - MT - MB);
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"label\" text-anchor=\"middle\">", (ML + CW - MR) / 2, CH - 10);
    html_escaped(f, c->xlabel);
    fprintf(f, "</text>\n<text x=\"14\" y=\"%d\" class=\"label\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 14 %d)\">",
            (MT + CH - MB) / 2, (MT + CH - MB) / 2);
    html_escaped(f, c->ylabel);
    fputs("</text>\n", f);
}

/* prev_y: the y drawn last (NAN at the start), for step lines. */
static void vertex(FILE *f, const struct chart *c, const struct point *p, double *prev_y)
{
    double x = sx(c, p->x), y = sy(c, point_value(p, c->field));
    if (c->steps && !isnan(*prev_y)) fprintf(f, "%.1f,%.1f ", x, *prev_y);
    fprintf(f, "%.1f,%.1f ", x, y);
    *prev_y = y;
}

/* Thinned to MAX_POINTS vertices: each bucket of samples contributes its
 * lowest and highest point, in order, so short spikes stay visible. */
static void chart_line(FILE *f, const struct chart *c, const struct run *r, size_t k)
{
    const char *color = palette[k % NPALETTE];
    size_t step = r->n > MAX_POINTS ? (r->n + MAX_POINTS / 2 - 1) / (MAX_POINTS / 2) : 1, last = 0;
    double prev_y = NAN;
    fprintf(f, "<polyline class=\"line\" stroke=\"%s\" points=\"", color);
    for (size_t i = 0; i < r->n; i += step) {
        size_t lo = i, hi = i, end = i + step < r->n ? i + step : r->n;
        for (size_t j = i; j < end; j++) {
            if (point_value(&r->pts[j], c->field) < point_value(&r->pts[lo], c->field)) lo = j;
            if (point_value(&r->pts[j], c->field) > point_value(&r->pts[hi], c->field)) hi = j;
        }
        vertex(f, c, &r->pts[lo < hi ? lo : hi], &prev_y);
        if (lo != hi) vertex(f, c, &r->pts[lo < hi ? hi : lo], &prev_y);
        last = lo > hi ? lo : hi;
    }
    if (r->n && last != r->n - 1) vertex(f, c, &r->pts[r->n - 1], &prev_y); /* the end state, always */
    fputs("\"/>\n", f);
    double ly = MT + 10 + 18.0 * (double)k;
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>"
               "<text x=\"%d\" y=\"%.1f\" class=\"tick\">",
            CW - MR + 12, ly, CW - MR + 32, ly, color, CW - MR + 38, ly + 4);
    html_escaped(f, r->policy);
    fputs("</text>\n", f);
}

/* Draws field of every kept run against x. */
static void chart(FILE *f, struct chart c, const struct run *const *runs, size_t n)
{
    double xmin = INFINITY, xmax = 0, ymax = 0;
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < runs[k]->n; i++) {
            const struct point *p = &runs[k]->pts[i];
            xmin = p->x < xmin ? p->x : xmin;
            xmax = p->x > xmax ? p->x : xmax;
            ymax = point_value(p, c.field) > ymax ? point_value(p, c.field) : ymax;
        }
    c.xmin = 0;
    if (c.xfit && xmin < xmax) {
        double step = nice_step(xmax - xmin);
        c.xmin = floor(xmin / step) * step;
    }
    c.xmax = c.xmin + nice_max(xmax - c.xmin);
    if (!(c.ymax > 0)) c.ymax = nice_max(c.ycap > 0 && ymax > c.ycap ? c.ycap : ymax);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", CW, CH,
            CW, CH);
    chart_axes(f, &c);
    for (size_t k = 0; k < n; k++) chart_line(f, &c, runs[k], k);
    fputs("</svg>\n", f);
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
    html_escaped(f, s->policy);
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
    ".title{font-size:15px;font-weight:600}.tick{font-size:11px;fill:#444}.label{font-size:12px;fill:#222}"
    ".grid{stroke:#e6e6e6}.frame{fill:none;stroke:#999}.line{fill:none;stroke-width:1.6}"
    "svg{display:block;margin:1em 0}";

static void report_body(FILE *f, const struct gs_sim_writer *w, const struct run *const *kept, size_t nk)
{
    bool fgd = w->mode == GS_SIM_FGD;
    fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gpusched sim: %s</title>"
               "<style>%s</style></head><body>\n<h1>gpusched sim &mdash; %s experiment</h1>\n",
            fgd ? "fgd" : "replay", style, fgd ? "fgd" : "replay");
    fputs("<h2>Summary</h2>\n", f);
    report_table(f, w);
    if (nk > 0 && kept[0]->seed)
        fprintf(f, "<p>Curves show the first seed of each policy (%llu).</p>\n", (unsigned long long)kept[0]->seed);
    if (fgd) {
        chart(f, (struct chart){"GPU allocation vs arrived workload", "arrived GPU demand (% of capacity)",
                                "allocated GPU (% of capacity)", F_ALLOC, .ymax = 100},
              kept, nk);
        chart(f, (struct chart){"Fragmentation vs arrived workload", "arrived GPU demand (% of capacity)",
                                "fragmented share of idle GPU (%)", F_FRAG, .ycap = 100},
              kept, nk);
    } else {
        chart(f, (struct chart){"GPU utilisation over time", "time (hours)", "allocated GPU (% of capacity)",
                                F_ALLOC, .xfit = true, .steps = true, .ycap = 100},
              kept, nk);
        chart(f, (struct chart){"Pending pods over time", "time (hours)", "pending pods", F_PENDING, .xfit = true, .steps = true},
              kept, nk);
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
    return fclose(f) != 0 || bad ? GS_EIO : 0;
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
    for (size_t i = 0; i < w->nruns; i++) free(w->runs[i].pts);
    free(w->runs);
    free(w->dir);
    free(w);
    return rc;
}
