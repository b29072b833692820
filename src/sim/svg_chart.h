/*
 * svg_chart.h - the charts of the simulator's reports (report.html of the
 * fgd and replay experiments, tenants.html): inline SVG line charts, with an
 * optional band (min-max over seeds) per series, CDFs, and grouped bar
 * charts.
 *
 * Every chart is one <svg> sized by its viewBox and width="100%", so it fills
 * the page at any width; it has a title, axis titles, round ticks labelled in
 * the data's unit ("12 h", "40 %", "300 GPUs") and a legend. No script and no
 * external resource: a report opens offline. Each <svg> carries
 * data-chart="ID" and each series a data-series="LABEL", so tests find them.
 * Long series are thinned to about the chart's width in vertices (each
 * bucket keeps its lowest and highest point, so spikes stay visible).
 */
#ifndef GS_SIM_SVG_CHART_H
#define GS_SIM_SVG_CHART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct gs_chart_series {
    const char *label;
    const double *x, *y;   /* n points, x ascending */
    const double *lo, *hi; /* a band drawn under the line; NULL: none */
    size_t n;
};

struct gs_chart {
    const char *id;                /* data-chart attribute */
    const char *title, *xlabel, *ylabel;
    const char *xunit, *yunit;     /* appended to tick labels ("h", "%", "GPUs"); NULL: none */
    double ymax;                   /* > 0: fixed top of the y axis, else fitted to the data */
    double ycap;                   /* > 0: a fitted y axis never above this */
    bool xfit;                     /* the x axis starts where the data starts (else at 0) */
    bool steps;                    /* values hold until the next point (state over time, CDFs) */
    const struct gs_chart_series *s;
    size_t ns;
};

/* Writes c as one <svg> element. */
void gs_chart_line(FILE *f, const struct gs_chart *c);

struct gs_bar_chart {
    const char *id, *title, *xlabel, *ylabel, *yunit;
    const char *const *groups;     /* categories along x */
    size_t ngroups;
    const char *const *series;     /* bars in each category, one colour each (legend) */
    size_t nseries;
    const double *value;           /* value[g * nseries + s] */
    const double *err;             /* +- drawn as a whisker; NULL: none */
};

void gs_chart_bars(FILE *f, const struct gs_bar_chart *c);

/* The colour of series k (a fixed palette, repeated). */
const char *gs_chart_color(size_t k);
/* s with <, >, &, " escaped. */
void gs_html_escaped(FILE *f, const char *s);

#endif
