/*
 * test_output.c - the simulator's writers: events.jsonl lines parse back to
 * what was emitted (queue and group only when set), series.csv has one row
 * per sample, report.html is one self-contained page with a curve per
 * policy, its metadata, the fgd band over seeds, bars and unscheduled shapes,
 * the replay waiting-time CDFs and per-queue / per-gang / never-scheduled
 * tables, the CSV/JSON next to it agree with the page, and the seed
 * statistics are the right means and sample standard deviations.
 */
#include "sim/output.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *tmpdir(void)
{
    char tmpl[] = "/tmp/gs_test_output_XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static char *slurp(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void rm_rf(const char *dir)
{
    const char *names[] = {"events.jsonl", "series.csv",  "report.html", "summary.json", "band.csv",
                           "unscheduled.csv", "waits.csv", "queues.csv", "gangs.csv"};
    char path[512];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static struct gs_sim_result result(const char *policy, uint64_t seed, double alloc100)
{
    struct gs_sim_result r = {.seed = seed, .nodes = 3, .gpus = 10, .pods_arrived = 20, .alloc_pct_at_100 = alloc100};
    snprintf(r.policy, sizeof r.policy, "%s", policy);
    r.pods_scheduled = (int64_t)seed - 30;
    r.wall_seconds = 0.5;
    return r;
}

static void test_stats_mean_std(void **state)
{
    (void)state;
    struct gs_sim_result runs[3] = {result("FGD", 42, 90), result("FGD", 43, 92), result("FGD", 44, 94)};
    struct gs_sim_stats *s = malloc(sizeof *s);
    gs_sim_stats_compute(runs, 3, s);
    assert_string_equal(s->policy, "FGD");
    assert_int_equal(s->nruns, 3);
    assert_int_equal(s->seeds[0], 42);
    assert_int_equal(s->seeds[2], 44);
    assert_true(s->mean[GS_SF_ALLOC_AT_100] == 92.0);
    assert_true(s->std[GS_SF_ALLOC_AT_100] == 2.0); /* sample std of 90, 92, 94 */
    assert_true(s->mean[GS_SF_PODS_SCHEDULED] == 13.0);
    assert_true(s->std[GS_SF_PODS_SCHEDULED] == 1.0);
    assert_true(s->mean[GS_SF_NODES] == 3.0);
    assert_true(s->std[GS_SF_NODES] == 0.0);

    gs_sim_stats_compute(runs, 1, s);
    assert_true(s->std[GS_SF_ALLOC_AT_100] == 0.0);
    assert_true(s->mean[GS_SF_ALLOC_AT_100] == 90.0);
    free(s);
}

static void test_field_names(void **state)
{
    (void)state;
    struct gs_sim_result r = {.frag_ratio_at_80 = 7.5, .delay_p99 = 12, .gpus = 6212};
    assert_string_equal(gs_sim_field_name(GS_SF_ALLOC_AT_100), "alloc_pct_at_100");
    assert_string_equal(gs_sim_field_name(GS_SF_FRAG_AT_80), "frag_ratio_at_80");
    assert_string_equal(gs_sim_field_name(GS_SF_WALL_SECONDS), "wall_seconds");
    assert_true(gs_sim_field_get(&r, GS_SF_FRAG_AT_80) == 7.5);
    assert_true(gs_sim_field_get(&r, GS_SF_DELAY_P99) == 12);
    assert_true(gs_sim_field_get(&r, GS_SF_GPUS) == 6212);
    assert_string_equal(gs_sim_event_name(GS_SIM_PREEMPTED), "preempted");
}

/* One fgd run per policy (two of FGD), a few events and samples each. */
static void write_runs(struct gs_sim_writer *w)
{
    const char *policies[] = {"FGD", "BestFit", "FGD"};
    uint64_t seeds[] = {42, 42, 43};
    for (int r = 0; r < 3; r++) {
        assert_int_equal(gs_sim_writer_begin_run(w, policies[r], seeds[r]), 0);
        struct gs_sim_sink sink;
        gs_sim_writer_sink(w, &sink);
        struct gs_sim_event e1 = {.t = 3, .type = GS_SIM_SCHEDULED, .pod = "default/p0", .node = "n1",
                                  .gpus = 0x5, .milli = 500};
        struct gs_sim_event e2 = {.t = 4.5, .type = GS_SIM_FAILED, .pod = "default/p1",
                                  .reason = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."};
        sink.event(sink.ctx, &e1);
        sink.event(sink.ctx, &e2);
        for (int i = 0; i <= 10; i++) {
            struct gs_sim_sample s = {.t = i, .pods_arrived = i, .pods_scheduled = i - i / 4,
                                      .arrived_pct = 10.0 * i, .alloc_pct = 9.0 * i + r, .frag_ratio = 5 - 0.1 * i,
                                      .arrived_milli = 1000 * i, .used_milli = 900 * i};
            sink.sample(sink.ctx, &s);
        }
        struct gs_sim_result res = result(policies[r], seeds[r], 90 + 2 * r);
        assert_int_equal(gs_sim_writer_end_run(w, &res), 0);
    }
}

static void check_events(const char *text)
{
    assert_int_equal(count(text, "\n"), 6);
    const char *line = text;
    for (int i = 0; i < 6; i++) {
        const char *nl = strchr(line, '\n');
        json_error_t err;
        json_t *o = json_loadb(line, (size_t)(nl - line), 0, &err);
        assert_non_null(o);
        assert_true(json_is_number(json_object_get(o, "t")));
        assert_non_null(json_object_get(o, "pod"));
        if (i % 2 == 0) {
            assert_string_equal(json_string_value(json_object_get(o, "event")), "scheduled");
            assert_string_equal(json_string_value(json_object_get(o, "node")), "n1");
            json_t *g = json_object_get(o, "gpus");
            assert_int_equal(json_array_size(g), 2);
            assert_int_equal(json_integer_value(json_array_get(g, 0)), 0);
            assert_int_equal(json_integer_value(json_array_get(g, 1)), 2);
            assert_int_equal(json_integer_value(json_object_get(o, "milli")), 500);
            assert_int_equal(json_integer_value(json_object_get(o, "t")), 3);
            assert_true(json_is_null(json_object_get(o, "reason")));
        } else {
            assert_string_equal(json_string_value(json_object_get(o, "event")), "failed");
            assert_true(json_is_null(json_object_get(o, "node")));
            assert_int_equal(json_array_size(json_object_get(o, "gpus")), 0);
            assert_true(json_real_value(json_object_get(o, "t")) == 4.5);
            assert_non_null(strstr(json_string_value(json_object_get(o, "reason")), "Insufficient"));
        }
        const char *want = i < 2 ? "FGD" : i < 4 ? "BestFit" : "FGD";
        assert_string_equal(json_string_value(json_object_get(o, "policy")), want);
        assert_int_equal(json_integer_value(json_object_get(o, "seed")), i < 4 ? 42 : 43);
        json_decref(o);
        line = nl + 1;
    }
}

static void test_writer_files(void **state)
{
    (void)state;
    char *base = tmpdir();
    char dir[512];
    snprintf(dir, sizeof dir, "%s/nested/out", base);
    struct gs_sim_writer *w = NULL;
    assert_int_equal(gs_sim_writer_open(dir, GS_SIM_FGD, &w), 0);
    write_runs(w);
    assert_int_equal(gs_sim_writer_close(w), 0);

    char *events = slurp(dir, "events.jsonl");
    check_events(events);
    free(events);

    char *series = slurp(dir, "series.csv");
    assert_int_equal(count(series, "\n"), 1 + 33);
    assert_true(!strncmp(series, "t,pods_arrived,pods_scheduled,pods_running,pods_pending,arrived_pct,alloc_pct,"
                                 "frag_ratio,",
                         80));
    assert_non_null(strstr(series, "\n10,10,8,0,0,100.0000,91.0000,4.0000,10000,9000,0,BestFit,42\n"));
    free(series);

    char *html = slurp(dir, "report.html");
    /* alloc, frag (first seed), the band over seeds, the bars; no trace: no shapes. */
    assert_int_equal(count(html, "<svg"), 4);
    assert_int_equal(count(html, "<polyline"), 6); /* three line charts x (FGD, BestFit) */
    assert_int_equal(count(html, "<polygon class=\"band\""), 1); /* FGD has two seeds, BestFit one */
    assert_int_equal(count(html, "<rect class=\"bar\""), 2);
    assert_int_equal(count(html, "width=\"100%\""), 4);
    assert_null(strstr(html, "unscheduled-shapes"));
    assert_null(strstr(html, "<script"));
    assert_null(strstr(html, "src="));
    assert_null(strstr(html, "href="));
    /* FGD: seeds 42 and 43 -> alloc 90 and 94: mean 92, sample std 2.83. */
    assert_non_null(strstr(html, "<td>92.00 &plusmn; 2.83</td>"));
    assert_non_null(strstr(html, "<td>BestFit</td><td>1</td>"));
    assert_non_null(strstr(html, "<td>FGD</td><td>2</td>"));
    free(html);

    rm_rf(dir);
    snprintf(dir, sizeof dir, "%s/nested", base);
    rmdir(dir);
    rmdir(base);
    free(base);
}

static void test_replay_report_and_escaping(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct gs_sim_writer *w = NULL;
    assert_int_equal(gs_sim_writer_open(dir, GS_SIM_REPLAY, &w), 0);
    assert_int_equal(gs_sim_writer_end_run(w, &(struct gs_sim_result){0}), GS_ESTATE);
    assert_int_equal(gs_sim_writer_begin_run(w, "<Pol&icy>", 7), 0);
    /* Enough samples that the curve is thinned. */
    for (int i = 0; i < 5000; i++) {
        struct gs_sim_sample s = {.t = 36.0 * i, .pods_pending = i % 7, .alloc_pct = (i % 100)};
        gs_sim_writer_sample(w, &s);
    }
    struct gs_sim_result res = {.seed = 7, .delay_p50 = 1.5, .delay_p90 = 30, .delay_p99 = 120};
    assert_int_equal(gs_sim_writer_end_run(w, &res), 0);
    assert_int_equal(gs_sim_writer_close(w), 0);

    char *html = slurp(dir, "report.html");
    assert_null(strstr(html, "<Pol&icy>"));
    assert_non_null(strstr(html, "&lt;Pol&amp;icy&gt;"));
    assert_non_null(strstr(html, "Pending pods over time"));
    assert_non_null(strstr(html, "<td>1.5</td><td>30.0</td><td>120.0</td>"));
    /* 5000 samples thinned to at most 800 (+ the last) points per polyline,
     * each drawn as a step (a corner at the previous value first). */
    const char *pl = strstr(html, "<polyline");
    assert_non_null(pl);
    const char *end = strstr(pl, "/>");
    size_t commas = 0;
    for (const char *p = pl; p < end; p++) commas += *p == ',';
    assert_true(commas > 100 && commas <= 2 * 901);
    free(html);
    rm_rf(dir);
    free(dir);
}

static void test_open_fails_on_file(void **state)
{
    (void)state;
    char *dir = tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    FILE *f = fopen(path, "w");
    fclose(f);
    struct gs_sim_writer *w = (void *)1;
    assert_int_equal(gs_sim_writer_open(path, GS_SIM_FGD, &w), GS_EIO); /* a file where the directory should be */
    assert_null(w);
    rm_rf(dir);
    free(dir);
}

/*--- Metadata, the band over seeds, request shapes, replay breakdowns ---*/

static struct gs_pod *new_pod(const char *name, int32_t ngpu, int32_t milli)
{
    struct gs_pod *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->meta.name = strdup(name);
    p->meta.namespace_ = strdup("default");
    p->demand.gpu_count = ngpu;
    p->demand.gpu_milli = milli;
    return p;
}

static void free_pods(struct gs_trace *t)
{
    for (size_t i = 0; i < t->npods; i++) {
        free(t->pods[i].pod->meta.name);
        free(t->pods[i].pod->meta.namespace_);
        free(t->pods[i].pod);
    }
    free(t->pods);
}

static json_t *load_json(const char *dir, const char *name)
{
    char *text = slurp(dir, name);
    json_error_t err;
    json_t *o = json_loads(text, 0, &err);
    free(text);
    assert_non_null(o);
    return o;
}

static void test_command_line_quoting(void **state)
{
    (void)state;
    char *argv[] = {"sim", "--out", "my dir", "--x=it's", "--policy", "FGD,BestFit", ""};
    char *c = gs_sim_command_line(7, argv);
    assert_string_equal(c, "gpusched sim --out 'my dir' '--x=it'\\''s' --policy FGD,BestFit ''");
    free(c);
}

static void test_meta_band_and_shapes(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct gs_trace t = {0};
    t.pods = calloc(3, sizeof *t.pods);
    t.pods[0].pod = new_pod("p0", 1, 1000);
    t.pods[1].pod = new_pod("p1", 1, 500);
    t.pods[2].pod = new_pod("p2", 8, 1000);
    t.npods = 3;
    struct gs_sim_writer *w = NULL;
    assert_int_equal(gs_sim_writer_open(dir, GS_SIM_FGD, &w), 0);
    uint64_t seeds[] = {1, 2};
    struct gs_sim_meta m = {.version = "9.9.9", .command = "gpusched sim --out '<dir>'", .date = "2026-01-02T03:04:05Z",
                            .experiment = "fgd", .trace = "nodes.csv pods.csv", .variant = "default", .tune = 1.3,
                            .seeds = seeds, .nseeds = 2};
    assert_int_equal(gs_sim_writer_set_meta(w, &m), 0);
    gs_sim_writer_set_trace(w, &t);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(gs_sim_writer_begin_run(w, "FGD", seeds[r]), 0);
        gs_sim_writer_event(w, &(struct gs_sim_event){.t = 1, .type = GS_SIM_SCHEDULED, .pod = "default/p0",
                                                      .node = "n", .gpus = 1, .milli = 1000});
        gs_sim_writer_event(w, &(struct gs_sim_event){.t = 2, .type = GS_SIM_FAILED, .pod = "default/p1", .reason = "x"});
        gs_sim_writer_event(w, &(struct gs_sim_event){.t = 3, .type = GS_SIM_FAILED, .pod = "default/p2-tuned-7"});
        for (int i = 0; i <= 10; i++)
            gs_sim_writer_sample(w, &(struct gs_sim_sample){.arrived_pct = 10.0 * i, .alloc_pct = 9.0 * i + (double)seeds[r]});
        struct gs_sim_result res = result("FGD", seeds[r], 80 + 4 * r);
        assert_int_equal(gs_sim_writer_end_run(w, &res), 0);
    }
    assert_int_equal(gs_sim_writer_close(w), 0);

    char *html = slurp(dir, "report.html");
    assert_non_null(strstr(html, "<tr><th>gpusched version</th><td class=\"text\">9.9.9</td></tr>"));
    assert_non_null(strstr(html, "<td class=\"code\">gpusched sim --out '&lt;dir&gt;'</td>"));
    assert_non_null(strstr(html, "<tr><th>seeds</th><td class=\"text\">1, 2</td></tr>"));
    assert_non_null(strstr(html, "<tr><th>tune</th><td class=\"text\">1.3</td></tr>"));
    assert_non_null(strstr(html, "2026-01-02T03:04:05Z"));
    assert_non_null(strstr(html, "data-chart=\"alloc-band\""));
    assert_int_equal(count(html, "<polygon class=\"band\" data-series=\"FGD\""), 1);
    assert_non_null(strstr(html, "data-chart=\"unscheduled-shapes\""));
    /* One share pod and one 8-GPU pod (an inflated copy of p2) failed in each seed. */
    assert_non_null(strstr(html, "data-series=\"FGD\" data-group=\"GPU share\" data-value=\"1\""));
    assert_non_null(strstr(html, "data-series=\"FGD\" data-group=\"8 GPUs\" data-value=\"1\""));
    assert_non_null(strstr(html, "data-series=\"FGD\" data-group=\"1 GPU\" data-value=\"0\""));
    /* Bars: alloc at 100 % arrived 80 and 84: mean 82. */
    assert_non_null(strstr(html, "data-series=\"mean ± std\" data-group=\"FGD\" data-value=\"82\""));
    free(html);

    /* Grid point 50 % holds the last sample at or below it: 45 + seed. */
    char *band = slurp(dir, "band.csv");
    assert_true(!strncmp(band, "policy,arrived_pct,alloc_pct_mean,alloc_pct_min,alloc_pct_max,runs\n", 66));
    assert_non_null(strstr(band, "\nFGD,50.0,46.5000,46.0000,47.0000,2\n"));
    assert_non_null(strstr(band, "\nFGD,100.0,91.5000,91.0000,92.0000,2\n"));
    assert_null(strstr(band, "\nFGD,100.5,")); /* no run went past 100 % */
    free(band);
    char *us = slurp(dir, "unscheduled.csv");
    assert_non_null(strstr(us, "\nFGD,2,GPU share,1\n"));
    assert_non_null(strstr(us, "\nFGD,2,8 GPUs,1\n"));
    assert_non_null(strstr(us, "\nFGD,1,1 GPU,0\n"));
    free(us);

    json_t *sum = load_json(dir, "summary.json");
    json_t *meta = json_object_get(sum, "meta");
    assert_string_equal(json_string_value(json_object_get(meta, "command")), "gpusched sim --out '<dir>'");
    assert_string_equal(json_string_value(json_object_get(meta, "version")), "9.9.9");
    assert_int_equal(json_array_size(json_object_get(meta, "seeds")), 2);
    assert_true(json_is_null(json_object_get(meta, "config")));
    json_t *p0 = json_array_get(json_object_get(sum, "policies"), 0);
    assert_int_equal(json_integer_value(json_object_get(p0, "runs")), 2);
    assert_true(json_real_value(json_object_get(json_object_get(p0, "mean"), "alloc_pct_at_100")) == 82);
    json_decref(sum);
    rm_rf(dir);
    free(dir);
    free_pods(&t);
}

static void test_replay_breakdowns(void **state)
{
    (void)state;
    char *dir = tmpdir();
    struct gs_trace t = {0};
    t.pods = calloc(6, sizeof *t.pods);
    const char *names[] = {"a0", "a1", "g0", "g1", "never", "running"};
    double arrival[] = {0, 10, 0, 0, 5, 0};
    for (size_t i = 0; i < 6; i++) {
        t.pods[i].pod = new_pod(names[i], i == 4 ? 8 : 1, 1000);
        t.pods[i].arrival = arrival[i];
    }
    t.pods[5].node = "n9"; /* already running when the trace starts: no wait */
    t.npods = 6;
    struct gs_sim_writer *w = NULL;
    assert_int_equal(gs_sim_writer_open(dir, GS_SIM_REPLAY, &w), 0);
    gs_sim_writer_set_trace(w, &t);
    assert_int_equal(gs_sim_writer_begin_run(w, "default", 42), 0);
    struct gs_sim_event ev[] = {
        {.t = 1, .type = GS_SIM_SCHEDULED, .pod = "default/g0", .node = "n", .gpus = 1, .milli = 1000,
         .queue = "team-b", .group = "default/gang"},
        {.t = 1, .type = GS_SIM_FAILED, .pod = "default/g1", .reason = "no fit", .queue = "team-b",
         .group = "default/gang"},
        {.t = 2, .type = GS_SIM_SCHEDULED, .pod = "default/a0", .node = "n", .gpus = 2, .milli = 1000, .queue = "team-a"},
        {.t = 5, .type = GS_SIM_FAILED, .pod = "default/never", .reason = "0/1 nodes: Insufficient <gpu>",
         .queue = "team-b"},
        {.t = 40, .type = GS_SIM_SCHEDULED, .pod = "default/a1", .node = "n", .gpus = 4, .milli = 1000,
         .queue = "team-a"},
        {.t = 60, .type = GS_SIM_PREEMPTED, .pod = "default/a1", .queue = "team-a"},
        {.t = 70, .type = GS_SIM_SCHEDULED, .pod = "default/a1", .node = "n", .gpus = 4, .milli = 1000},
        {.t = 101, .type = GS_SIM_SCHEDULED, .pod = "default/g1", .node = "n", .gpus = 8, .milli = 1000,
         .queue = "team-b", .group = "default/gang"},
    };
    for (size_t i = 0; i < sizeof ev / sizeof *ev; i++) gs_sim_writer_event(w, &ev[i]);
    gs_sim_writer_sample(w, &(struct gs_sim_sample){.t = 0, .alloc_pct = 10});
    gs_sim_writer_sample(w, &(struct gs_sim_sample){.t = 101, .alloc_pct = 50});
    assert_int_equal(gs_sim_writer_end_run(w, &(struct gs_sim_result){.seed = 42}), 0);
    assert_int_equal(gs_sim_writer_close(w), 0);

    /* queue/group keys only on the events that have them. */
    char *events = slurp(dir, "events.jsonl");
    assert_int_equal(count(events, "\"queue\":"), 7);
    assert_int_equal(count(events, "\"group\":\"default/gang\""), 3);
    assert_non_null(strstr(events, "\"t\":70,\"event\":\"scheduled\",\"pod\":\"default/a1\",\"node\":\"n\","
                                   "\"gpus\":[2],\"milli\":1000,\"reason\":null,\"policy\":\"default\",\"seed\":42}\n"));
    free(events);

    char *waits = slurp(dir, "waits.csv");
    assert_int_equal(count(waits, "\n"), 1 + 5); /* the running pod has no row */
    assert_non_null(strstr(waits, "\ndefault,42,\"default/a1\",\"team-a\",\"\",1 GPU,1,1000,10.000,40.000,30.000,1\n"));
    assert_non_null(strstr(waits, "\ndefault,42,\"default/never\",\"team-b\",\"\",8 GPUs,8,1000,5.000,,,0\n"));
    free(waits);
    char *queues = slurp(dir, "queues.csv");
    assert_non_null(strstr(queues, "\ndefault,42,\"team-a\",2,2,0,1,2.000,30.000,30.000,30.000\n"));
    assert_non_null(strstr(queues, "\ndefault,42,\"team-b\",3,2,1,0,1.000,101.000,101.000,101.000\n"));
    free(queues);
    char *gangs = slurp(dir, "gangs.csv");
    assert_non_null(strstr(gangs, "\ndefault,42,\"default/gang\",2,2,1.000,101.000,100.000,101.000\n"));
    free(gangs);

    char *html = slurp(dir, "report.html");
    assert_non_null(strstr(html, "data-chart=\"wait-cdf-queue-0\""));
    assert_non_null(strstr(html, "data-chart=\"wait-cdf-size-0\""));
    assert_non_null(strstr(html, "<polyline class=\"line\" data-series=\"team-a\""));
    assert_non_null(strstr(html, "<polyline class=\"line\" data-series=\"8 GPUs\""));
    assert_non_null(strstr(html, "<p>1 gangs; 0 started only in part"));
    assert_non_null(strstr(html, "<td>default/gang</td><td>2</td><td>2</td><td>1.0</td><td>101.0</td><td>100.0</td>"));
    assert_non_null(strstr(html, "<p>1 of 5 pods never started:</p>"));
    assert_non_null(strstr(html, "<td>default/never</td><td>team-b</td><td>-</td><td>8 GPUs</td><td>5.0</td>"
                                 "<td>0/1 nodes: Insufficient &lt;gpu&gt;</td>"));
    assert_null(strstr(html, "<td>default/running</td>"));
    free(html);
    rm_rf(dir);
    free(dir);
    t.pods[5].node = NULL;
    free_pods(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_mean_std),
        cmocka_unit_test(test_field_names),
        cmocka_unit_test(test_writer_files),
        cmocka_unit_test(test_replay_report_and_escaping),
        cmocka_unit_test(test_open_fails_on_file),
        cmocka_unit_test(test_command_line_quoting),
        cmocka_unit_test(test_meta_band_and_shapes),
        cmocka_unit_test(test_replay_breakdowns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
