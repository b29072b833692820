/*
 * svg_chart.c - line, band and bar charts as inline SVG (see svg_chart.h).
 *
 * Coordinates are in a fixed 960 x 400 viewBox; the page scales the chart
 * to its width. Ticks are round steps (1, 2 or 5 times a power of ten) over
 * the data's range, with as many decimals as the step needs, so an axis
 * over 0..3483 hours reads 0, 500, 1000 ... rather than its two ends.
 */
#include "sim/svg_chart.h"

#include <math.h>
#include <string.h>

enum { CW = 960, CH = 400, ML = 92, MR = 180, MT = 36, MB = 56 };
#define MAX_VERTICES 900

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

const char *gs_chart_color(size_t k) { return palette[k % (sizeof palette / sizeof palette[0])]; }

void gs_html_escaped(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A round step giving about five intervals over range. */
static double nice_step(double range)
{
    if (!(range > 0)) return 1;
    double raw = range / 5, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return mag * (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10);
}

/* The data's max rounded up to a tick. */
static double nice_max(double v)
{
    if (!(v > 0)) return 1;
    double step = nice_step(v);
    return ceil(v / step - 1e-9) * step;
}

static int decimals(double step) { return step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9); }

struct frame {
    double xmin, xmax, ymax;
};

static double sx(const struct frame *fr, double x)
{
    return ML + (x - fr->xmin) / (fr->xmax - fr->xmin) * (CW - ML - MR);
}
static double sy(const struct frame *fr, double y)
{
    double v = y < 0 ? 0 : y > fr->ymax ? fr->ymax : y;
    return CH - MB - v / fr->ymax * (CH - MT - MB);
}

static void tick_label(FILE *f, double v, int dec, const char *unit)
{
    fprintf(f, "%.*f", dec, v);
    if (unit && *unit) {
        fputc(' ', f);
        gs_html_escaped(f, unit);
    }
}

static void open_svg(FILE *f, const char *id, const char *title)
{
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" data-chart=\"");
    gs_html_escaped(f, id);
    fprintf(f, "\" viewBox=\"0 0 %d %d\" width=\"100%%\" preserveAspectRatio=\"xMidYMid meet\" role=\"img\">\n"
               "<title>",
            CW, CH);
    gs_html_escaped(f, title);
    fprintf(f, "</title>\n<text x=\"%d\" y=\"22\" class=\"title\">", ML);
    gs_html_escaped(f, title);
    fputs("</text>\n", f);
}

static void axis_titles(FILE *f, const char *xlabel, const char *ylabel)
{
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"label xlabel\" text-anchor=\"middle\">", (ML + CW - MR) / 2, CH - 12);
    gs_html_escaped(f, xlabel);
    fprintf(f, "</text>\n<text x=\"14\" y=\"%d\" class=\"label ylabel\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 14 %d)\">",
            (MT + CH - MB) / 2, (MT + CH - MB) / 2);
    gs_html_escaped(f, ylabel);
    fputs("</text>\n", f);
}

static void y_ticks(FILE *f, const struct frame *fr, const char *unit)
{
    double ys = nice_step(fr->ymax);
    int dec = decimals(ys);
    for (double v = 0; v <= fr->ymax + ys * 1e-6; v += ys) {
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>", ML, sy(fr, v), CW - MR,
                sy(fr, v));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"tick ytick\" text-anchor=\"end\">", ML - 6, sy(fr, v) + 4);
        tick_label(f, v, dec, unit);
        fputs("</text>\n", f);
    }
}

static void legend_entry(FILE *f, size_t k, const char *label, bool bar)
{
    double ly = MT + 10 + 18.0 * (double)k;
    if (bar)
        fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"20\" height=\"10\" fill=\"%s\"/>", CW - MR + 12, ly - 5,
                gs_chart_color(k));
    else
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>", CW - MR + 12,
                ly, CW - MR + 32, ly, gs_chart_color(k));
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"tick legend\">", CW - MR + 38, ly + 4);
    gs_html_escaped(f, label);
    fputs("</text>\n", f);
}

/*--- Line charts ---*/

static void vertex(FILE *f, const struct frame *fr, double x, double y, bool steps, double *prev_y)
{
    double px = sx(fr, x), py = sy(fr, y);
    if (steps && !isnan(*prev_y)) fprintf(f, "%.1f,%.1f ", px, *prev_y);
    fprintf(f, "%.1f,%.1f ", px, py);
    *prev_y = py;
}

/* Thinned to MAX_VERTICES: each bucket contributes its lowest and highest point, in order. */
static void polyline(FILE *f, const struct frame *fr, const struct gs_chart_series *s, size_t k, bool steps)
{
    size_t step = s->n > MAX_VERTICES ? (s->n + MAX_VERTICES / 2 - 1) / (MAX_VERTICES / 2) : 1, last = 0;
    double prev = NAN;
    fprintf(f, "<polyline class=\"line\" data-series=\"");
    gs_html_escaped(f, s->label);
    fprintf(f, "\" stroke=\"%s\" points=\"", gs_chart_color(k));
    for (size_t i = 0; i < s->n; i += step) {
        size_t lo = i, hi = i, end = i + step < s->n ? i + step : s->n;
        for (size_t j = i; j < end; j++) {
            if (s->y[j] < s->y[lo]) lo = j;
            if (s->y[j] > s->y[hi]) hi = j;
        }
        size_t a = lo < hi ? lo : hi, b = lo < hi ? hi : lo;
        vertex(f, fr, s->x[a], s->y[a], steps, &prev);
        if (a != b) vertex(f, fr, s->x[b], s->y[b], steps, &prev);
        last = b;
    }
    if (s->n && last != s->n - 1) vertex(f, fr, s->x[s->n - 1], s->y[s->n - 1], steps, &prev);
    fputs("\"/>\n", f);
}

static void band(FILE *f, const struct frame *fr, const struct gs_chart_series *s, size_t k)
{
    size_t step = s->n > MAX_VERTICES ? (s->n + MAX_VERTICES - 1) / MAX_VERTICES : 1;
    fprintf(f, "<polygon class=\"band\" data-series=\"");
    gs_html_escaped(f, s->label);
    fprintf(f, "\" fill=\"%s\" points=\"", gs_chart_color(k));
    for (size_t i = 0; i < s->n; i += step) fprintf(f, "%.1f,%.1f ", sx(fr, s->x[i]), sy(fr, s->hi[i]));
    for (size_t i = (s->n - 1) / step * step + 1; i-- > 0;)
        if (i % step == 0) fprintf(f, "%.1f,%.1f ", sx(fr, s->x[i]), sy(fr, s->lo[i]));
    fputs("\"/>\n", f);
}

void gs_chart_line(FILE *f, const struct gs_chart *c)
{
    double xmin = INFINITY, xmax = -INFINITY, ymax = 0;
    for (size_t k = 0; k < c->ns; k++)
        for (size_t i = 0; i < c->s[k].n; i++) {
            const struct gs_chart_series *s = &c->s[k];
            xmin = s->x[i] < xmin ? s->x[i] : xmin;
            xmax = s->x[i] > xmax ? s->x[i] : xmax;
            double top = s->hi && s->hi[i] > s->y[i] ? s->hi[i] : s->y[i];
            ymax = top > ymax ? top : ymax;
        }
    if (!isfinite(xmin)) xmin = 0, xmax = 1;
    struct frame fr = {.xmin = 0};
    if (c->xfit && xmin < xmax) {
        double step = nice_step(xmax - xmin);
        fr.xmin = floor(xmin / step) * step;
    } else if (xmin < 0) {
        fr.xmin = -nice_max(-xmin);
    }
    fr.xmax = fr.xmin + nice_max(xmax - fr.xmin);
    fr.ymax = c->ymax > 0 ? c->ymax : nice_max(c->ycap > 0 && ymax > c->ycap ? c->ycap : ymax);
    open_svg(f, c->id, c->title);
    double xs = nice_step(fr.xmax - fr.xmin);
    int dec = decimals(xs);
    for (double v = fr.xmin; v <= fr.xmax + xs * 1e-6; v += xs) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"grid\"/>", sx(&fr, v), MT, sx(&fr, v),
                CH - MB);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"tick xtick\" text-anchor=\"middle\">", sx(&fr, v), CH - MB + 18);
        tick_label(f, v, dec, c->xunit);
        fputs("</text>\n", f);
    }
    y_ticks(f, &fr, c->yunit);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"frame\"/>\n", ML, MT, CW - ML - MR,
            CH - MT - MB);
    axis_titles(f, c->xlabel, c->ylabel);
    for (size_t k = 0; k < c->ns; k++)
        if (c->s[k].lo && c->s[k].hi && c->s[k].n) band(f, &fr, &c->s[k], k);
    for (size_t k = 0; k < c->ns; k++) {
        polyline(f, &fr, &c->s[k], k, c->steps);
        legend_entry(f, k, c->s[k].label, false);
    }
    fputs("</svg>\n", f);
}

/*--- Bar charts ---*/

void gs_chart_bars(FILE *f, const struct gs_bar_chart *c)
{
    double ymax = 0;
    size_t nv = c->ngroups * c->nseries;
    for (size_t i = 0; i < nv; i++) {
        double top = c->value[i] + (c->err ? c->err[i] : 0);
        ymax = top > ymax ? top : ymax;
    }
    struct frame fr = {.xmin = 0, .xmax = 1, .ymax = nice_max(ymax)};
    open_svg(f, c->id, c->title);
    y_ticks(f, &fr, c->yunit);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"frame\"/>\n", ML, MT, CW - ML - MR,
            CH - MT - MB);
    axis_titles(f, c->xlabel, c->ylabel);
    double gw = (double)(CW - ML - MR) / (double)(c->ngroups ? c->ngroups : 1);
    double bw = gw * 0.8 / (double)(c->nseries ? c->nseries : 1);
    for (size_t g = 0; g < c->ngroups; g++) {
        double x0 = ML + gw * (double)g + gw * 0.1;
        for (size_t s = 0; s < c->nseries; s++) {
            double v = c->value[g * c->nseries + s], x = x0 + bw * (double)s, y = sy(&fr, v);
            fprintf(f, "<rect class=\"bar\" data-series=\"");
            gs_html_escaped(f, c->series[s]);
            fprintf(f, "\" data-group=\"");
            gs_html_escaped(f, c->groups[g]);
            fprintf(f, "\" data-value=\"%g\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", v, x,
                    y, bw * 0.92, sy(&fr, 0) - y, gs_chart_color(s));
            if (c->ngroups * c->nseries <= 24) { /* few bars: each says its value */
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick value\" text-anchor=\"middle\">", x + bw * 0.46,
                        y - 4);
                tick_label(f, v, fabs(v - round(v)) < 1e-9 ? 0 : v < 10 ? 2 : 1, c->yunit);
                fputs("</text>\n", f);
            }
            if (c->err && c->err[g * c->nseries + s] > 0) {
                double e = c->err[g * c->nseries + s], cx = x + bw * 0.46;
                fprintf(f, "<line class=\"whisker\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", cx,
                        sy(&fr, v - e), cx, sy(&fr, v + e));
            }
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"tick xtick\" text-anchor=\"middle\">", ML + gw * ((double)g + 0.5),
                CH - MB + 18);
        gs_html_escaped(f, c->groups[g]);
        fputs("</text>\n", f);
    }
    for (size_t s = 0; s < c->nseries; s++) legend_entry(f, s, c->series[s], true);
    fputs("</svg>\n", f);
}
