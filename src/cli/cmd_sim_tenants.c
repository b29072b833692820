/*
 * cmd_sim_tenants.c - `gpusched sim --experiment tenants`: the multi-tenant
 * scenario (sim/tenants.h) run with admission ("fair": queues, fair share,
 * reclaim, backfill) and without ("fifo": every pod straight to the
 * scheduler), side by side.
 *
 * Prints one table row per mode (Jain's index, per-tenant share against
 * entitlement, waiting-time percentiles for small and large workloads,
 * preemptions) or, with --json, one JSON array on the last stdout line.
 * With --out DIR it writes tenants.csv (every sample: t, mode, tenant, used,
 * entitled, demand GPUs, jain), tenants.json (the run's metadata and each
 * mode's results) and tenants.html: the metadata, and for each mode the GPUs
 * used per tenant, a chart per tenant of GPUs used against the fair-share
 * entitlement, and the Jain index over time, in hours and GPUs with ticks and
 * a legend (sim/svg_chart.h) - inline SVG, no script.
 */
#include "cli/commands.h"
#include "cli/cmd_sim_meta.h"
#include "sim/output.h"
#include "sim/svg_chart.h"
#include "sim/tenants.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NODE_CSV "openb_node_list_gpu_node.csv"
#define MAX_POINTS 65536 /* samples kept for the charts (every 10 simulated minutes: 450 days) */

struct targs {
    const char *trace_dir, *variant, *nodes, *pods, *out, *policy, *modes, *queues_json;
    struct gs_tenants_opts o;
    bool json;
};

struct series {
    struct gs_tenants_point *v;
    size_t n, cap, every, seen;
    FILE *csv;
    const char *mode;
};

static void usage(FILE *f)
{
    fputs("usage: gpusched sim --experiment tenants [input] [options]\n\n"
          "Splits a trace across tenants (queues with weights), with arrival bursts and gangs,\n"
          "and replays it with admission (fair) and without (fifo).\n\n"
          "input: --trace-dir DIR [--variant NAME] | --nodes FILE --pods FILE (openb CSVs)\n\n"
          "options:\n"
          "  --tenants N          number of tenants (default 3)\n"
          "  --weights A,B,...    queue weights (default 1,2,1)\n"
          "  --mode fair|fifo|both  with admission, without, or both (default both)\n"
          "  --burst S            arrival burst window in seconds (default 1800)\n"
          "  --gangs F            share of whole-GPU pods that start a gang (default 0.3; 0: none)\n"
          "  --halflife S         fair-share usage half-life in seconds (default 3600)\n"
          "  --history-weight F   weight of the decayed usage history in the queue order, 0..1 (default 0.5;\n"
          "                       0: the current weighted share alone)\n"
          "  --starvation S       wait before a large workload gets a reservation (default 1800)\n"
          "  --speedup X          divide arrival times by X: X times the load (default 1)\n"
          "  --node-fraction F    keep this share of the nodes (default 1)\n"
          "  --policy NAME        placement policy (default: the default profile's scoring)\n"
          "  --seed N             tenant assignment and gang seed (default 42)\n"
          "  --min-runtime S      no eviction before a workload ran S seconds (default 600; 0: none)\n"
          "  --reclaim-wait S     a claimant reclaims only after pending S seconds (default 600; 0: at once)\n"
          "  --impatient-below F  a claimant whose queue's weighted share is below F reclaims without waiting\n"
          "                       --reclaim-wait (default 0: every claimant waits)\n"
          "  --max-preemptions N  evictions of one workload per hour (default 1; 0: unlimited)\n"
          "  --evict-charge F     share of a victim's lost GPU-hours charged to the claimant (default 1; 0: none)\n"
          "  --hold S             how long nodes freed by reclaim are held for the claimant (default 60)\n"
          "  --reserve-horizon S  reserve for a starving workload only if it can start within S (default 3600; 0: any)\n"
          "  --share-gate on|off  while a queue below its fair share has a workload that fits quota but\n"
          "                       not the nodes, queues at or above theirs admit no GPU workloads (default off)\n"
          "  --reserve-for oldest|under-share  the reservation goes to the oldest starving large workload\n"
          "                       (default) or, at once, to the large workload of the queue furthest below\n"
          "                       its fair share (docs/QUEUES.md \"Starvation guard\")\n"
          "  --pin on|large|above|off  admitted GPU workloads are bound on the nodes admission's placement\n"
          "                       check chose (it packs), not where the scheduler's scoring would spread them, while\n"
          "                       a queue below its share waits for room (default off); large: only while that\n"
          "                       workload is large; above: only while some queue is above its fair share\n"
          "  --drain on|strict|off  a large workload of a queue below its fair share that fits its quota but\n"
          "                       no node gets the nodes that free up soonest, kept for it (default off); strict:\n"
          "                       its own queue's other work backfills them only if it ends before the drain's start\n"
          "  --consolidate on|off|N  while no queue is above its fair share, a large workload of a queue below it\n"
          "                       that fits its quota but no node, while the free GPUs summed over nodes would\n"
          "                       hold it, gets whole nodes by\n"
          "                       moving small workloads that each fit now on another node (evicted and admitted\n"
          "                       again at once there; counted as evictions); at most N moves per gang pod (on: 2;\n"
          "                       default off; docs/QUEUES.md \"Whole nodes for the starved queue\")\n"
          "  --consolidate-own on|off|N  the same, moving the gang's own queue's small workloads (without\n"
          "                       the proof that each fits elsewhere: one that does not waits in line); at\n"
          "                       most N per gang pod (on: 4; default off); with --consolidate, every queue's\n"
          "                       movers and the larger limit\n"
          "  --reclaim-from fairshare|nominal  reclaim from queues above their fair share (default) or\n"
          "                       from any queue above its nominal quota (the earlier rule)\n"
          "  --victims nodewise|global  reclaim victims chosen per node for the claimant's pods (default)\n"
          "                       or in one global order (lowest priority, most recently admitted; the earlier rule)\n"
          "  --victim-cost work|count|room  node-wise victims: the set losing the least work (default), the\n"
          "                       fewest victims then least work, or the fewest victims then the most GPU room left\n"
          "                       (docs/QUEUES.md \"Reclaim and preemption\")\n"
          "  --queues-json FILE   write the per-queue status of the fair run (quotas, usage, fair share,\n"
          "                       pending workloads with position and estimated start, counters)\n"
          "  --queues-at S        take that snapshot at simulated second S (default: at the end)\n"
          "  --out DIR            write tenants.csv, tenants.json and tenants.html\n"
          "  --json               results as a JSON array on the last line\n",
          f);
}

static int bad(const char *flag, const char *v, const char *why)
{
    fprintf(stderr, "gpusched sim: %s: invalid value \"%s\": %s\n", flag, v, why);
    return 2;
}

/* on (as on_moves), off (0) or a number of moves per gang pod from 1 to 8. */
static int moves(const char *flag, const char *v, int on_moves, int *out)
{
    if (!strcmp(v, "on")) return *out = on_moves, 0;
    if (!strcmp(v, "off")) return *out = 0, 0;
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 1 || n > 8) return bad(flag, v, "want on, off or a number of moves per gang pod from 1 to 8");
    *out = (int)n;
    return 0;
}

static int num(const char *flag, const char *v, double lo, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || !*v || x < lo) return bad(flag, v, "want a number in range");
    *out = x;
    return 0;
}

static int weights(struct targs *a, const char *v)
{
    char *copy = strdup(v), *save = NULL;
    int k = 0, rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        double w;
        if (k == GS_TENANTS_MAX || num("--weights", tok, 1e-9, &w)) rc = bad("--weights", v, "want up to 8 positive numbers");
        else a->o.weights[k++] = w;
    }
    free(copy);
    if (!rc && !a->o.ntenants) a->o.ntenants = k;
    return rc;
}

static int parse(int argc, char **argv, struct targs *a)
{
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--json")) {
            a->json = true;
            continue;
        }
        if (!strcmp(f, "-q") || !strcmp(f, "--quiet")) continue;
        if (i + 1 >= argc) {
            fprintf(stderr, "gpusched sim: %s needs a value\n", f);
            return 2;
        }
        const char *v = argv[++i];
        double x;
        int rc = 0;
        if (!strcmp(f, "--experiment")) continue;
        else if (!strcmp(f, "--trace-dir")) a->trace_dir = v;
        else if (!strcmp(f, "--variant")) a->variant = v;
        else if (!strcmp(f, "--nodes")) a->nodes = v;
        else if (!strcmp(f, "--pods")) a->pods = v;
        else if (!strcmp(f, "--out")) a->out = v;
        else if (!strcmp(f, "--policy")) a->policy = v;
        else if (!strcmp(f, "--mode")) {
            if (strcmp(v, "fair") && strcmp(v, "fifo") && strcmp(v, "both")) return bad(f, v, "want fair, fifo or both");
            a->modes = v;
        } else if (!strcmp(f, "--weights")) rc = weights(a, v);
        else if (!strcmp(f, "--tenants")) {
            if (!(rc = num(f, v, 2, &x)) && x > GS_TENANTS_MAX) rc = bad(f, v, "at most 8");
            a->o.ntenants = (int)x;
        } else if (!strcmp(f, "--burst")) rc = num(f, v, 1, &a->o.burst_s);
        else if (!strcmp(f, "--gangs")) {
            rc = num(f, v, 0, &x);
            a->o.gang_fraction = x > 0 ? x : -1;
        } else if (!strcmp(f, "--halflife")) rc = num(f, v, 1, &a->o.halflife_s);
        else if (!strcmp(f, "--history-weight")) {
            char *end;
            double h = strtod(v, &end);
            if (!*v || *end || !(h >= 0 && h <= 1)) return bad(f, v, "want a number from 0 to 1");
            a->o.history_weight = h > 0 ? h : -1; /* the options' 0 is the default */
        } else if (!strcmp(f, "--starvation")) rc = num(f, v, 1, &a->o.starvation_s);
        else if (!strcmp(f, "--speedup")) rc = num(f, v, 1e-6, &a->o.speedup);
        else if (!strcmp(f, "--node-fraction")) {
            if (!(rc = num(f, v, 1e-6, &a->o.node_fraction)) && a->o.node_fraction > 1) rc = bad(f, v, "at most 1");
        }
        else if (!strcmp(f, "--min-runtime")) {
            rc = num(f, v, 0, &a->o.min_runtime_s);
            if (a->o.min_runtime_s == 0) a->o.min_runtime_s = -1;
        } else if (!strcmp(f, "--reclaim-wait")) {
            rc = num(f, v, 0, &a->o.reclaim_wait_s);
            if (a->o.reclaim_wait_s == 0) a->o.reclaim_wait_s = -1;
        } else if (!strcmp(f, "--impatient-below")) {
            if (!(rc = num(f, v, 0, &a->o.impatient_share)) && a->o.impatient_share > 1)
                rc = bad(f, v, "a weighted share, at most 1");
        } else if (!strcmp(f, "--max-preemptions")) {
            rc = num(f, v, 0, &x);
            a->o.max_preemptions = x > 0 ? (int)x : -1;
        } else if (!strcmp(f, "--evict-charge")) {
            rc = num(f, v, 0, &a->o.evict_charge);
            if (a->o.evict_charge == 0) a->o.evict_charge = -1;
        } else if (!strcmp(f, "--hold")) rc = num(f, v, 1, &a->o.hold_s);
        else if (!strcmp(f, "--reserve-horizon")) {
            rc = num(f, v, 0, &a->o.reserve_horizon_s);
            if (a->o.reserve_horizon_s == 0) a->o.reserve_horizon_s = -1;
        } else if (!strcmp(f, "--reserve-for")) {
            if (strcmp(v, "oldest") && strcmp(v, "under-share")) return bad(f, v, "want oldest or under-share");
            a->o.reserve_under_share = !strcmp(v, "under-share");
        } else if (!strcmp(f, "--share-gate")) {
            if (strcmp(v, "on") && strcmp(v, "off")) return bad(f, v, "want on or off");
            a->o.share_gate = !strcmp(v, "on");
        } else if (!strcmp(f, "--drain")) {
            if (strcmp(v, "on") && strcmp(v, "off") && strcmp(v, "strict")) return bad(f, v, "want on, strict or off");
            a->o.drain = strcmp(v, "off") != 0;
            a->o.drain_strict = !strcmp(v, "strict");
        } else if (!strcmp(f, "--consolidate")) {
            if ((rc = moves(f, v, 2, &a->o.consolidate_moves))) return rc;
        } else if (!strcmp(f, "--consolidate-own")) {
            if ((rc = moves(f, v, 4, &a->o.consolidate_own))) return rc;
        } else if (!strcmp(f, "--pin")) {
            if (strcmp(v, "on") && strcmp(v, "off") && strcmp(v, "large") && strcmp(v, "above"))
                return bad(f, v, "want on, large, above or off");
            a->o.pin_placement = strcmp(v, "off") != 0;
            a->o.pin_large = !strcmp(v, "large");
            a->o.pin_above = !strcmp(v, "above");
        } else if (!strcmp(f, "--reclaim-from")) {
            if (strcmp(v, "fairshare") && strcmp(v, "nominal")) return bad(f, v, "want fairshare or nominal");
            a->o.reclaim_above_nominal = !strcmp(v, "nominal");
        } else if (!strcmp(f, "--victims")) {
            if (strcmp(v, "nodewise") && strcmp(v, "global")) return bad(f, v, "want nodewise or global");
            a->o.global_victims = !strcmp(v, "global");
        } else if (!strcmp(f, "--victim-cost")) {
            if (!strcmp(v, "work")) a->o.victim_cost = 0;
            else if (!strcmp(v, "count")) a->o.victim_cost = 1;
            else if (!strcmp(v, "room")) a->o.victim_cost = 2;
            else return bad(f, v, "want work, count or room");
        } else if (!strcmp(f, "--queues-json")) {
            a->queues_json = v;
            a->o.want_queues = true;
        } else if (!strcmp(f, "--queues-at")) rc = num(f, v, 0, &a->o.queues_at_s);
        else if (!strcmp(f, "--seed")) {
            rc = num(f, v, 0, &x);
            a->o.seed = (uint64_t)x;
        } else {
            fprintf(stderr, "gpusched sim: unknown option %s for --experiment tenants\n", f);
            return 2;
        }
        if (rc) return rc;
    }
    return 0;
}

/*--- Samples: CSV rows and a thinned copy for the charts ---*/

static void on_sample(void *ctx, const struct gs_tenants_point *p)
{
    struct series *s = ctx;
    for (int k = 0; s->csv && k < p->ntenants; k++)
        fprintf(s->csv, "%.0f,%s,tenant-%c,%.3f,%.3f,%.3f,%.4f\n", p->t, s->mode, 'a' + k, p->used[k], p->entitled[k],
                p->demand[k], p->jain);
    if (s->seen++ % s->every) return;
    if (s->n == s->cap) { /* keep every other point and halve the rate */
        size_t k = 0;
        for (size_t i = 0; i < s->n; i += 2) s->v[k++] = s->v[i];
        s->n = k;
        s->every *= 2;
    }
    s->v[s->n++] = *p;
}

/* Series k of a run (k < 0: Jain's index over contended samples), t in hours. */
static size_t series_of(const struct series *s, int k, bool entitled, double tmax, double *x, double *y)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n && s->v[i].t <= tmax; i++) {
        if (k < 0 && s->v[i].jain < 0) continue; /* fewer than two tenants with demand: no index */
        x[n] = s->v[i].t / 3600.0;
        y[n++] = k < 0 ? s->v[i].jain : entitled ? s->v[i].entitled[k] : s->v[i].used[k];
    }
    return n;
}

static int html_charts(FILE *f, const struct series *r, const struct gs_tenants_result *res, size_t idx)
{
    size_t n = r->n ? r->n : 1;
    int nt = res->ntenants;
    double *buf = malloc((size_t)(2 * nt + 2) * 2 * n * sizeof *buf);
    if (!buf) return GS_ENOMEM;
    char names[GS_TENANTS_MAX][48], id[64], title[160];
    /* The long tail after the last contended sample (pods finishing one by
     * one for thousands of hours) would squash the curves into the first
     * pixels: the charts end a little after it, the CSV has the rest. */
    double tlast = 0, tend = r->n ? r->v[r->n - 1].t : 0;
    for (size_t i = 0; i < r->n; i++) {
        double dem = 0;
        for (int k = 0; k < nt; k++) dem += r->v[i].demand[k];
        if (dem > (double)res->gpus) tlast = r->v[i].t;
    }
    double tmax = tlast > 0 && tlast * 1.25 < tend ? tlast * 1.25 : tend;
    fprintf(f, "<p>Charts from 0 to %.1f h (%s); every sample up to %.1f h is in tenants.csv.</p>\n", tmax / 3600,
            tmax < tend ? "a quarter past the last sample where demand exceeded the cluster" : "the whole run",
            tend / 3600);
    struct gs_chart_series all[GS_TENANTS_MAX], two[2];
    for (int k = 0; k < nt; k++) {
        double *x = buf + (size_t)k * 2 * n, *y = x + n;
        snprintf(names[k], sizeof names[k], "tenant-%c (weight %g)", 'a' + k, res->weight[k]);
        all[k] = (struct gs_chart_series){.label = names[k], .x = x, .y = y, .n = series_of(r, k, false, tmax, x, y)};
    }
    snprintf(id, sizeof id, "tenants-used-%zu", idx);
    snprintf(title, sizeof title, "%s: GPUs used per tenant", r->mode);
    gs_chart_line(f, &(struct gs_chart){.id = id, .title = title, .xlabel = "simulated time (hours)",
                                        .ylabel = "GPUs in use", .xunit = "h", .yunit = "GPUs", .steps = true,
                                        .s = all, .ns = (size_t)nt});
    for (int k = 0; k < nt; k++) {
        double *x = buf + (size_t)(nt + k) * 2 * n, *y = x + n;
        size_t m = series_of(r, k, true, tmax, x, y);
        two[0] = (struct gs_chart_series){.label = "fair-share entitlement", .x = x, .y = y, .n = m};
        two[1] = (struct gs_chart_series){.label = "GPUs used", .x = all[k].x, .y = all[k].y, .n = all[k].n};
        fprintf(f, "<h3>tenant-%c (weight %g): GPUs used vs entitled</h3>\n", 'a' + k, res->weight[k]);
        snprintf(id, sizeof id, "tenant-%c-%zu", 'a' + k, idx);
        snprintf(title, sizeof title, "%s, tenant-%c: GPUs used and entitled", r->mode, 'a' + k);
        gs_chart_line(f, &(struct gs_chart){.id = id, .title = title, .xlabel = "simulated time (hours)",
                                            .ylabel = "GPUs", .xunit = "h", .yunit = "GPUs", .steps = true, .s = two,
                                            .ns = 2});
    }
    double *x = buf + (size_t)(2 * nt) * 2 * n, *y = x + n;
    struct gs_chart_series j = {.label = "Jain's index", .x = x, .y = y, .n = series_of(r, -1, false, tmax, x, y)};
    fputs("<h3>Jain's fairness index over contended samples (1: shares proportional to entitlements)</h3>\n", f);
    snprintf(id, sizeof id, "jain-%zu", idx);
    snprintf(title, sizeof title, "%s: Jain's fairness index of used / entitled", r->mode);
    gs_chart_line(f, &(struct gs_chart){.id = id, .title = title, .xlabel = "simulated time (hours)",
                                        .ylabel = "Jain's index", .xunit = "h", .ymax = 1, .s = &j, .ns = 1});
    free(buf);
    return 0;
}

static const char style[] =
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}"
    "td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}"
    "table.meta td{text-align:left}td.code{font-family:monospace;white-space:pre-wrap;word-break:break-all}"
    ".title{font-size:15px;font-weight:600}.tick{font-size:12px;fill:#444}.label{font-size:13px;fill:#222}"
    ".grid{stroke:#e6e6e6}.frame{fill:none;stroke:#999}.line{fill:none;stroke-width:1.6}"
    "svg.chart{display:block;width:100%;height:auto;margin:1em 0}";

static int html_report(FILE *f, const struct gs_sim_meta *meta, struct series *runs, struct gs_tenants_result *res,
                       size_t nruns)
{
    fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gpusched sim: tenants</title>"
               "<style>%s</style></head><body>\n<h1>gpusched sim &mdash; multi-tenant queues</h1>\n<h2>Run</h2>\n",
            style);
    gs_sim_meta_html(f, meta);
    fputs("<h2>Summary</h2>\n<table><tr><th>mode</th><th>GPUs</th><th>workloads</th><th>Jain mean</th>"
          "<th>Jain min</th><th>small wait p50/p90/p99 (s)</th><th>large wait p50/p90/p99 (s)</th><th>preemptions</th>"
          "<th>idle share</th></tr>\n",
          f);
    for (size_t r = 0; r < nruns; r++)
        fprintf(f, "<tr><td>%s</td><td>%lld</td><td>%lld</td><td>%.3f</td><td>%.3f</td><td>%.0f / %.0f / %.0f</td>"
                   "<td>%.0f / %.0f / %.0f</td><td>%lld</td><td>%.2f</td></tr>\n",
                runs[r].mode, (long long)res[r].gpus, (long long)res[r].workloads, res[r].jain_mean, res[r].jain_min,
                res[r].wait_small[0], res[r].wait_small[1], res[r].wait_small[2], res[r].wait_large[0],
                res[r].wait_large[1], res[r].wait_large[2], (long long)res[r].preemptions, res[r].idle_share);
    fputs("</table>\n<p>Entitlement: each tenant's fair share of the cluster's GPUs, water-filled by weight over the "
          "demand at that moment. Every sample is in tenants.csv; the results and this metadata in tenants.json.</p>\n",
          f);
    int rc = 0;
    for (size_t r = 0; r < nruns && !rc; r++) {
        fprintf(f, "<h2>%s</h2>\n", runs[r].mode);
        rc = html_charts(f, &runs[r], &res[r], r);
    }
    fputs("</body></html>\n", f);
    return rc;
}

/*--- Output ---*/

static void print_table(struct series *runs, struct gs_tenants_result *res, size_t n)
{
    printf("%-5s %6s %6s  %-26s %-24s %-24s %7s %5s\n", "mode", "jain", "min", "share/entitled per tenant",
           "wait small p50/p90/p99", "wait large p50/p90/p99", "preempt", "idle");
    for (size_t r = 0; r < n; r++) {
        char shares[128] = "";
        for (int k = 0; k < res[r].ntenants; k++)
            snprintf(shares + strlen(shares), sizeof shares - strlen(shares), "%s%.2f/%.2f", k ? " " : "",
                     res[r].mean_share[k], res[r].mean_entitled[k]);
        printf("%-5s %6.3f %6.3f  %-26s %7.0f %7.0f %8.0f %7.0f %7.0f %8.0f %7lld %5.2f\n", runs[r].mode,
               res[r].jain_mean, res[r].jain_min, shares, res[r].wait_small[0], res[r].wait_small[1],
               res[r].wait_small[2], res[r].wait_large[0], res[r].wait_large[1], res[r].wait_large[2],
               (long long)res[r].preemptions, res[r].idle_share);
        if (!strcmp(runs[r].mode, "fair"))
            printf("      claims: %lld waited before reclaiming; a victim spared in %lld by minimum runtime, %lld by fair "
                   "share, %lld by the cap; most evictions of one workload %d; %.1f GPU-hours charged to claimants\n",
                   (long long)res[r].reclaims_deferred, (long long)res[r].spared_min_runtime,
                   (long long)res[r].spared_fair_share, (long long)res[r].spared_cap, res[r].max_workload_preemptions,
                   res[r].charged_gpu_hours);
        if (!strcmp(runs[r].mode, "fair"))
            printf("      victim searches: %lld, %lld found a set (%lld node-wise; node-wise found no set in %lld, "
                   "its set was not confirmed in %lld); evictions %lld; reservations %lld (%lld times none: start "
                   "past the horizon)\n",
                   (long long)res[r].victim_searches, (long long)res[r].victim_searches_won,
                   (long long)res[r].nodewise_won, (long long)res[r].nodewise_refused,
                   (long long)res[r].nodewise_unproven, (long long)res[r].evictions, (long long)res[r].reservations,
                   (long long)res[r].reservations_beyond_horizon);
        if (!strcmp(runs[r].mode, "fair") && res[r].share_gated)
            printf("      share gate: a queue at or above its share held its GPU workloads back %lld times\n",
                   (long long)res[r].share_gated);
        if (!strcmp(runs[r].mode, "fair") && res[r].evictions)
            printf("      evicted GPUs: %.1f over %lld evictions; needless evictions: %lld, made for %lld claims whose "
                   "claimant was not bound within its hold\n",
                   res[r].evicted_gpus, (long long)res[r].evictions, (long long)res[r].evictions_unplaced,
                   (long long)res[r].claims_unplaced);
        if (!strcmp(runs[r].mode, "fair") && res[r].pins_expired)
            printf("      pins: %lld ran out before their pods were bound\n", (long long)res[r].pins_expired);
        if (!strcmp(runs[r].mode, "fair") && (res[r].drains || res[r].drains_beyond_horizon))
            printf("      drains: %lld whole-node drains for a queue below its share (%lld plans dropped: start past "
                   "the horizon)\n",
                   (long long)res[r].drains, (long long)res[r].drains_beyond_horizon);
        if (!strcmp(runs[r].mode, "fair") && res[r].consolidations)
            printf("      consolidation: %lld gangs admitted on nodes made whole by moving %lld small workloads "
                   "(%lld of the gang's own queue, %lld of them back in line)\n",
                   (long long)res[r].consolidations, (long long)res[r].consolidation_moves,
                   (long long)res[r].consolidation_own, (long long)res[r].consolidation_own_waiting);
    }
}

static json_t *result_json(const char *mode, const struct gs_tenants_result *r)
{
    json_t *sh = json_array(), *en = json_array();
    for (int k = 0; k < r->ntenants; k++) {
        json_array_append_new(sh, json_real(r->mean_share[k]));
        json_array_append_new(en, json_real(r->mean_entitled[k]));
    }
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:o, s:o, s:[fff], s:[fff], s:I, s:f}", "mode", mode,
                     "gpus", (json_int_t)r->gpus, "workloads", (json_int_t)r->workloads, "gangs",
                     (json_int_t)r->gangs, "finished", (json_int_t)r->finished, "jain_mean", r->jain_mean,
                     "jain_min", r->jain_min, "share", sh, "entitled", en, "wait_small", r->wait_small[0],
                     r->wait_small[1], r->wait_small[2], "wait_large", r->wait_large[0], r->wait_large[1],
                     r->wait_large[2], "preemptions", (json_int_t)r->preemptions, "wall_seconds", r->wall_seconds);
    if (o)
        json_object_update_new(o, json_pack("{s:f, s:I, s:I, s:I, s:I, s:i, s:f}", "idle_share", r->idle_share,
                                            "reclaims_deferred", (json_int_t)r->reclaims_deferred,
                                            "spared_min_runtime", (json_int_t)r->spared_min_runtime,
                                            "spared_fair_share", (json_int_t)r->spared_fair_share,
                                            "spared_cap", (json_int_t)r->spared_cap, "max_workload_preemptions",
                                            r->max_workload_preemptions, "charged_gpu_hours",
                                            r->charged_gpu_hours));
    if (o)
        json_object_update_new(o, json_pack("{s:I, s:I, s:I, s:I}", "victim_searches", (json_int_t)r->victim_searches,
                                            "victim_searches_won", (json_int_t)r->victim_searches_won,
                                            "nodewise_won", (json_int_t)r->nodewise_won, "nodewise_refused",
                                            (json_int_t)r->nodewise_refused));
    if (o)
        json_object_update_new(o, json_pack("{s:I, s:I, s:I, s:I, s:I}", "reservations", (json_int_t)r->reservations,
                                            "share_gated", (json_int_t)r->share_gated, "drains",
                                            (json_int_t)r->drains, "drains_beyond_horizon",
                                            (json_int_t)r->drains_beyond_horizon, "pins_expired",
                                            (json_int_t)r->pins_expired));
    if (o)
        json_object_update_new(o, json_pack("{s:I, s:I, s:f}", "claims_unplaced", (json_int_t)r->claims_unplaced,
                                            "evictions_unplaced", (json_int_t)r->evictions_unplaced, "evicted_gpus",
                                            r->evicted_gpus));
    if (o)
        json_object_update_new(o, json_pack("{s:I, s:I, s:I, s:I}", "consolidations", (json_int_t)r->consolidations,
                                            "consolidation_moves", (json_int_t)r->consolidation_moves,
                                            "consolidation_own", (json_int_t)r->consolidation_own,
                                            "consolidation_own_waiting", (json_int_t)r->consolidation_own_waiting));
    return o;
}

static FILE *open_out(const char *dir, const char *name)
{
    char path[4096];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    if (!f) fprintf(stderr, "gpusched sim: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

static int load(const struct targs *a, struct gs_trace *t)
{
    char np[4096], pp[4096];
    const char *dir = a->trace_dir ? a->trace_dir : getenv("GS_TRACE_DIR");
    if (!dir) dir = "../shared/traces/openb";
    snprintf(np, sizeof np, "%s/%s", dir, NODE_CSV);
    snprintf(pp, sizeof pp, "%s/openb_pod_list_%s.csv", dir, a->variant ? a->variant : "default");
    struct gs_diags d = {0};
    int rc = gs_trace_load_openb(a->nodes ? a->nodes : np, a->pods ? a->pods : pp, t, &d);
    for (size_t i = 0; i < d.n && i < 10; i++) fprintf(stderr, "gpusched sim: %s: %s\n", d.v[i].path, d.v[i].msg);
    gs_diags_free(&d);
    return rc;
}

/* tenants.json: the metadata and each mode's results (as --json prints them). */
static int write_json(const char *dir, const struct gs_sim_meta *meta, const char *const *modes,
                      const struct gs_tenants_result *res, size_t n)
{
    json_t *o = json_object(), *arr = json_array();
    if (!o || !arr) {
        json_decref(o);
        json_decref(arr);
        return GS_ENOMEM;
    }
    for (size_t r = 0; r < n; r++) json_array_append_new(arr, result_json(modes[r], &res[r]));
    json_object_set_new(o, "meta", gs_sim_meta_json(meta));
    json_object_set_new(o, "results", arr);
    char path[4096];
    snprintf(path, sizeof path, "%s/tenants.json", dir);
    int rc = json_dump_file(o, path, JSON_INDENT(2)) ? GS_EIO : 0;
    if (rc) fprintf(stderr, "gpusched sim: cannot write %s\n", path);
    json_decref(o);
    return rc;
}

static int run_all(struct targs *a, const struct gs_trace *t, const struct gs_sim_meta *meta)
{
    const char *modes[2];
    size_t n = 0;
    if (strcmp(a->modes, "fifo")) modes[n++] = "fair";
    if (strcmp(a->modes, "fair")) modes[n++] = "fifo";
    struct series runs[2] = {{0}};
    struct gs_tenants_result res[2];
    FILE *csv = a->out ? open_out(a->out, "tenants.csv") : NULL;
    if (a->out && !csv) return 1;
    if (csv) fputs("t,mode,tenant,used_gpus,entitled_gpus,demand_gpus,jain\n", csv);
    int rc = 0;
    for (size_t r = 0; r < n && !rc; r++) {
        runs[r] = (struct series){.v = malloc(MAX_POINTS * sizeof *runs[r].v), .cap = MAX_POINTS, .every = 1,
                                  .csv = csv, .mode = modes[r]};
        struct gs_tenants_opts o = a->o;
        o.admission = !strcmp(modes[r], "fair");
        o.policy = a->policy;
        struct gs_diags d = {0};
        rc = runs[r].v ? gs_tenants_run(t, &o, on_sample, &runs[r], &res[r], &d) : GS_ENOMEM;
        for (size_t i = 0; i < d.n; i++) fprintf(stderr, "gpusched sim: %s: %s\n", d.v[i].path, d.v[i].msg);
        gs_diags_free(&d);
        if (!rc && res[r].queues && a->queues_json) {
            if (json_dump_file(res[r].queues, a->queues_json, JSON_INDENT(2))) {
                fprintf(stderr, "gpusched sim: cannot write %s\n", a->queues_json);
                rc = GS_EIO;
            }
        }
        json_decref(res[r].queues);
        res[r].queues = NULL;
    }
    if (csv) fclose(csv);
    if (!rc && a->out) {
        FILE *h = open_out(a->out, "tenants.html");
        if (!h || html_report(h, meta, runs, res, n) || ferror(h)) rc = GS_EIO;
        if (h && fclose(h)) rc = GS_EIO;
        if (rc) fprintf(stderr, "gpusched sim: writing %s/tenants.html failed\n", a->out);
        if (!rc) rc = write_json(a->out, meta, modes, res, n);
    }
    if (!rc && !a->json) print_table(runs, res, n);
    if (!rc && a->json) {
        json_t *arr = json_array();
        for (size_t r = 0; r < n; r++) json_array_append_new(arr, result_json(modes[r], &res[r]));
        char *s = json_dumps(arr, JSON_COMPACT);
        printf("%s\n", s ? s : "[]");
        free(s);
        json_decref(arr);
    }
    for (size_t r = 0; r < n; r++) free(runs[r].v);
    return rc ? 1 : 0;
}

int gs_cmd_sim_tenants(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    struct targs a = {.modes = "both", .o = {.seed = 42, .queues_at_s = -1}};
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    struct gs_trace t = {0};
    if (load(&a, &t)) {
        gs_trace_free(&t);
        return 1;
    }
    struct gs_cli_meta cm;
    gs_cli_meta_init(&cm, argc, argv);
    const char *dir = a.trace_dir ? a.trace_dir : getenv("GS_TRACE_DIR");
    char trace[8300];
    if (a.nodes || a.pods) snprintf(trace, sizeof trace, "%s %s", a.nodes ? a.nodes : "", a.pods ? a.pods : "");
    else snprintf(trace, sizeof trace, "%s", dir ? dir : "../shared/traces/openb");
    cm.m.experiment = "tenants";
    cm.m.trace = trace;
    cm.m.variant = a.pods ? NULL : a.variant ? a.variant : "default";
    cm.m.policies = a.policy;
    cm.m.seeds = &a.o.seed;
    cm.m.nseeds = 1;
    rc = run_all(&a, &t, &cm.m);
    gs_cli_meta_free(&cm);
    gs_trace_free(&t);
    fflush(stdout);
    return rc;
}
