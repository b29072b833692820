/*
 * cmd_sim.c - `gpusched sim`: run a trace through the scheduler on a
 * simulated clock and report what happened.
 *
 * The command is a thin shell around the library: it parses and checks every
 * flag up front (a wrong value is a usage error, exit 2, with a message that
 * names the flag and the value), loads the trace once - openb CSVs or
 * Kubernetes manifests - and then runs gs_sim_run() for each policy x seed,
 * streaming events and samples to the output writer when --out is given.
 * Results are printed as a table for people, or with --json as one JSON array
 * on the last stdout line for scripts; with several seeds each policy's
 * object carries means and <key>_std standard deviations.
 *
 * Only this file looks at the wall clock (for wall_seconds and the progress
 * bar, drawn on stderr when it is a terminal and the run takes over a
 * second); the simulator itself runs on its simulated clock.
 */
#include "cli/commands.h"
#include "cli/cmd_sim_meta.h"
#include "core/clock.h"
#include "sched/plugin.h"
#include "sim/output.h"
#include "sim/replay_gangq.h"
#include "sim/sim.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_TRACE_DIR "../shared/traces/openb"
#define NODE_CSV "openb_node_list_gpu_node.csv"
#define MAX_POLICIES 32

struct sim_args {
    const char *nodes, *pods;         /* --nodes/--pods */
    const char *trace_dir, *variant;  /* --trace-dir/--variant */
    const char *cluster, *workload;   /* --cluster/--workload */
    enum gs_sim_mode mode;
    const char *policies[MAX_POLICIES];
    size_t npolicies;
    char *policy_buf;                 /* storage for policies[] */
    uint64_t *seeds;
    size_t nseeds;
    bool seed_list;                   /* --seeds given: report means and std */
    double tune;
    const char *config, *out;
    bool json, quiet;
    int gang_queue;                   /* --gang-queue (sim/replay_gangq.h) */
    bool gang_queue_set;              /* --gang-queue given (else scheduler: the server's path) */
    int64_t gang_slack;               /* --gang-slack seconds, 0 = the mode's */
    bool bound;                       /* --bound: fgd's upper bound next to each policy */
    int queue_window;                 /* --queue-window: fgd, queued pods a policy may read */
    char node_path[4096], pod_path[4096];
    int argc;                         /* the command line, for the report's metadata */
    char **argv;
};

static void usage(FILE *f)
{
    fputs("usage: gpusched sim [input] [options]\n\n"
          "Runs a cluster trace through the scheduler on a simulated clock.\n\n"
          "input (one of):\n"
          "  --trace-dir DIR [--variant NAME]  openb trace: DIR/" NODE_CSV " and\n"
          "                                    DIR/openb_pod_list_NAME.csv (default: $GS_TRACE_DIR or\n"
          "                                    " DEFAULT_TRACE_DIR ", variant default)\n"
          "  --nodes FILE --pods FILE          openb-format node and pod CSVs\n"
          "  --cluster FILE --workload FILE    Node and Pod manifests (YAML/JSON); pods carry\n"
          "                                    sim.gpusched.io/arrival and /duration (seconds or Go\n"
          "                                    durations: 30s, 1m30s, 2h); any kind the server accepts\n\n"
          "options:\n"
          "  --experiment fgd|replay  fgd: the FGD paper's procedure (default); replay: trace times\n"
          "  --experiment tenants     multi-tenant queues and admission (--experiment tenants --help)\n"
          "  --from-cluster, --snapshot DIR  what-if on a live cluster: when each pending pod would\n"
          "                           start (--from-cluster --help)\n"
          "  --policy A,B,...         placement policies, e.g. Random,DotProd,GpuClustering,\n"
          "                           GpuPacking,BestFit,FGD,FGDPack,FGDPlus,FGDLearn; \"profile\"\n"
          "                           (the default) is the server's profile as it is, whose\n"
          "                           placement is FGDLearn's\n"
          "  --seed N                 random seed (default 42)\n"
          "  --seeds LIST             several seeds, e.g. 42-51 or 1,5,9: means and _std reported\n"
          "  --tune X                 fgd: inflate GPU demand to X times capacity (default 1.3)\n"
          "  --queue-window K         fgd: pods queued behind the current one that a policy may\n"
          "                           read, the next K of the sequence (default 8; 0: none)\n"
          "  --config FILE            scheduler configuration: the file gpusched server --config takes\n"
          "  --out DIR                write events.jsonl, series.csv and report.html to DIR\n"
          "                           (with summary.json and CSVs; docs/SCHEDULING.md \"Reports\")\n"
          "  --gang-queue MODE        replay: which gang enters the scheduling queue next: scheduler\n"
          "                           (default: every pod at arrival, as the server), auto (backfill\n"
          "                           when the trace has pod groups and no admission queues, else\n"
          "                           scheduler),\n"
          "                           fifo (strict FIFO of gangs), volcano (enqueue when its resources\n"
          "                           fit the idle total), reserve, reserve-exact, reserve-pinned,\n"
          "                           volcano-reserve, backfill (FIFO, reservation for the head,\n"
          "                           backfill; docs/QUEUES.md)\n"
          "  --gang-slack S           replay: how far (s) backfill may push the reserved head past its\n"
          "                           first shadow start (default: the mode's; backfill 450)\n"
          "  --bound                  fgd: also report bound_pct, an upper bound on alloc%@100 that\n"
          "                           no placer can pass (docs/SCHEDULING.md \"How far from the best\")\n"
          "  --json                   print the results as a JSON array on the last line\n"
          "  -q, --quiet              no progress bar or notes on stderr\n"
          "  -h, --help               this help\n",
          f);
}

/*--- Flag values ---*/

static int bad(const char *flag, const char *value, const char *why)
{
    fprintf(stderr, "gpusched sim: %s: invalid value \"%s\": %s\n", flag, value, why);
    return 2;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!*s || *s == '-' || *s == '+' || *s == ' ') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

static int push_seed(struct sim_args *a, uint64_t v)
{
    if (a->nseeds == GS_SIM_MAX_SEEDS) return -1;
    uint64_t *s = realloc(a->seeds, (a->nseeds + 1) * sizeof *s);
    if (!s) return -1;
    a->seeds = s;
    a->seeds[a->nseeds++] = v;
    return 0;
}

/* "42", "42-51", "1,5,9", "1-3,7". */
static int parse_seeds(struct sim_args *a, const char *flag, const char *value)
{
    char *copy = strdup(value), *save = NULL;
    if (!copy) return 1;
    a->nseeds = 0;
    int rc = 0;
    char buf[160];
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        char *dash = strchr(tok, '-');
        uint64_t lo, hi;
        if (dash) *dash = '\0';
        if (!parse_u64(tok, &lo) || (dash && !parse_u64(dash + 1, &hi))) {
            rc = bad(flag, value, "want seeds such as 42, 42-51 or 1,5,9 (non-negative integers)");
            break;
        }
        if (!dash) hi = lo;
        if (hi < lo || hi - lo >= GS_SIM_MAX_SEEDS) {
            snprintf(buf, sizeof buf, "range must go up and hold at most %d seeds", GS_SIM_MAX_SEEDS);
            rc = bad(flag, value, buf);
            break;
        }
        for (uint64_t s = lo;; s++) {
            if (push_seed(a, s)) {
                snprintf(buf, sizeof buf, "at most %d seeds", GS_SIM_MAX_SEEDS);
                rc = bad(flag, value, buf);
                break;
            }
            if (s == hi) break;
        }
    }
    if (!rc && a->nseeds == 0) rc = bad(flag, value, "no seed given");
    free(copy);
    return rc;
}

/* A placement policy is a registered plugin that scores; matched without
 * regard to case and stored under its registered name. */
static const struct gs_plugin *find_policy(const char *name)
{
    const struct gs_plugin *const *all = gs_plugin_all();
    for (size_t i = 0; all && all[i]; i++)
        if (all[i]->score && !strcasecmp(all[i]->name, name)) return all[i];
    return NULL;
}

static void list_policies(FILE *f)
{
    const struct gs_plugin *const *all = gs_plugin_all();
    fputs("gpusched sim: placement policies: " GS_SIM_PROFILE " (the server's profile)", f);
    for (size_t i = 0; all && all[i]; i++)
        if (all[i]->score) fprintf(f, " %s", all[i]->name);
    fputc('\n', f);
}

static int parse_policies(struct sim_args *a, const char *flag, const char *value)
{
    free(a->policy_buf);
    a->policy_buf = strdup(value);
    if (!a->policy_buf) return 1;
    a->npolicies = 0;
    for (char *tok = a->policy_buf, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next) *next++ = '\0';
        if (!*tok) return bad(flag, value, "empty policy name");
        if (!strcasecmp(tok, GS_SIM_PROFILE)) { /* the server's profile, as without --policy */
            if (a->npolicies == MAX_POLICIES) return bad(flag, value, "too many policies");
            a->policies[a->npolicies++] = GS_SIM_PROFILE;
            continue;
        }
        const struct gs_plugin *p = find_policy(tok);
        if (!p) {
            char why[160];
            snprintf(why, sizeof why, "unknown placement policy \"%s\"", tok);
            bad(flag, value, why);
            list_policies(stderr);
            return 2;
        }
        if (a->npolicies == MAX_POLICIES) return bad(flag, value, "too many policies");
        a->policies[a->npolicies++] = p->name;
    }
    return 0;
}

static int parse_tune(struct sim_args *a, const char *flag, const char *value)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (errno || end == value || *end || !isfinite(v) || v <= 0 || v > 100)
        return bad(flag, value, "want a number greater than 0 and at most 100, such as 1.3");
    a->tune = v;
    return 0;
}

static int check_file(const char *flag, const char *path, bool dir)
{
    struct stat st;
    if (stat(path, &st) != 0) return bad(flag, path, strerror(errno));
    if (dir && !S_ISDIR(st.st_mode)) return bad(flag, path, "not a directory");
    if (!dir && S_ISDIR(st.st_mode)) return bad(flag, path, "is a directory, want a file");
    if (access(path, R_OK) != 0) return bad(flag, path, strerror(errno));
    return 0;
}

/*--- Argument parsing ---*/

/* The value of a flag: "--flag=value" or the next argument. */
static const char *flag_value(int argc, char **argv, int *i, const char *flag)
{
    const char *eq = strchr(argv[*i], '=');
    if (eq && !strncmp(argv[*i], "--", 2)) return eq + 1;
    if (*i + 1 >= argc) {
        fprintf(stderr, "gpusched sim: %s: missing value\n", flag);
        return NULL;
    }
    return argv[++*i];
}

static int set_value(struct sim_args *a, const char *flag, const char *v)
{
    if (!strcmp(flag, "--nodes")) a->nodes = v;
    else if (!strcmp(flag, "--pods")) a->pods = v;
    else if (!strcmp(flag, "--trace-dir")) a->trace_dir = v;
    else if (!strcmp(flag, "--variant")) a->variant = v;
    else if (!strcmp(flag, "--cluster")) a->cluster = v;
    else if (!strcmp(flag, "--workload")) a->workload = v;
    else if (!strcmp(flag, "--config")) a->config = v;
    else if (!strcmp(flag, "--out")) a->out = v;
    else if (!strcmp(flag, "--policy")) return parse_policies(a, flag, v);
    else if (!strcmp(flag, "--tune")) return parse_tune(a, flag, v);
    else if (!strcmp(flag, "--queue-window")) {
        uint64_t k;
        if (!parse_u64(v, &k) || k > 1000) return bad(flag, v, "want an integer 0..1000 (queued pods a policy may read)");
        a->queue_window = (int)k;
    }
    else if (!strcmp(flag, "--gang-queue")) {
        int m = gs_gangq_mode_parse(v);
        if (m < 0) {
            char want[256] = "want ";
            gs_gangq_mode_list(want + 5, sizeof want - 5);
            return bad(flag, v, want);
        }
        a->gang_queue = m;
        a->gang_queue_set = true;
    }
    else if (!strcmp(flag, "--gang-slack")) {
        uint64_t s;
        if (!parse_u64(v, &s) || s < 1 || s > 86400 * 365)
            return bad(flag, v, "want whole seconds from 1 to 31536000 (a year)");
        a->gang_slack = (int64_t)s;
    }
    else if (!strcmp(flag, "--experiment")) {
        if (!strcmp(v, "fgd")) a->mode = GS_SIM_FGD;
        else if (!strcmp(v, "replay")) a->mode = GS_SIM_REPLAY;
        else return bad(flag, v, "want fgd or replay");
    } else if (!strcmp(flag, "--seed")) {
        uint64_t s;
        if (!parse_u64(v, &s)) return bad(flag, v, "want a non-negative integer");
        a->nseeds = 0;
        a->seed_list = false;
        if (push_seed(a, s)) return 1;
    } else if (!strcmp(flag, "--seeds")) {
        a->seed_list = true;
        return parse_seeds(a, flag, v);
    } else {
        return -1;
    }
    if (!*v) return bad(flag, v, "empty");
    return 0;
}

static const char *const value_flags[] = {"--nodes",  "--pods",   "--trace-dir", "--variant",    "--cluster",
                                          "--workload", "--config", "--out",     "--policy",     "--tune",
                                          "--experiment", "--seed", "--seeds", "--gang-queue", "--gang-slack",
                                          "--queue-window"};

static bool takes_value(const char *arg, char *flag, size_t len)
{
    size_t n = strcspn(arg, "=");
    for (size_t i = 0; i < sizeof value_flags / sizeof *value_flags; i++)
        if (strlen(value_flags[i]) == n && !strncmp(arg, value_flags[i], n)) {
            snprintf(flag, len, "%s", value_flags[i]);
            return true;
        }
    return false;
}

/* Input mode consistency, defaults and file checks. */
static int check_inputs(struct sim_args *a)
{
    int groups = (a->nodes || a->pods) + (a->cluster || a->workload) + (a->trace_dir || a->variant);
    if (groups > 1) {
        fprintf(stderr, "gpusched sim: give one input: --trace-dir/--variant, --nodes/--pods or "
                        "--cluster/--workload\n");
        return 2;
    }
    if ((a->nodes != NULL) != (a->pods != NULL)) {
        fprintf(stderr, "gpusched sim: %s needs %s as well\n", a->nodes ? "--nodes" : "--pods",
                a->nodes ? "--pods" : "--nodes");
        return 2;
    }
    if ((a->cluster != NULL) != (a->workload != NULL)) {
        fprintf(stderr, "gpusched sim: %s needs %s as well\n", a->cluster ? "--cluster" : "--workload",
                a->cluster ? "--workload" : "--cluster");
        return 2;
    }
    int rc = 0;
    if (a->nodes) {
        if ((rc = check_file("--nodes", a->nodes, false)) || (rc = check_file("--pods", a->pods, false))) return rc;
    } else if (a->cluster) {
        if ((rc = check_file("--cluster", a->cluster, false)) || (rc = check_file("--workload", a->workload, false)))
            return rc;
    } else {
        const char *env = getenv("GS_TRACE_DIR");
        const char *dir = a->trace_dir ? a->trace_dir : env && *env ? env : DEFAULT_TRACE_DIR;
        const char *variant = a->variant ? a->variant : "default";
        if ((rc = check_file(a->trace_dir ? "--trace-dir" : "trace directory", dir, true))) return rc;
        if (strchr(variant, '/')) return bad("--variant", variant, "want a name such as default or gpushare40");
        snprintf(a->node_path, sizeof a->node_path, "%s/%s", dir, NODE_CSV);
        snprintf(a->pod_path, sizeof a->pod_path, "%s/openb_pod_list_%s.csv", dir, variant);
        if (access(a->node_path, R_OK) != 0) return bad("--trace-dir", dir, "no " NODE_CSV " in it");
        if (access(a->pod_path, R_OK) != 0) {
            char why[4200];
            snprintf(why, sizeof why, "no pod list %s", a->pod_path);
            return bad("--variant", variant, why);
        }
    }
    if (a->config && (rc = check_file("--config", a->config, false))) return rc;
    if (a->gang_queue_set && a->mode != GS_SIM_REPLAY)
        return bad("--gang-queue", gs_gangq_mode_name(a->gang_queue),
                   "gang queueing is a mode of --experiment replay (the fgd experiment tries each pod once)");
    if (a->gang_slack && a->mode != GS_SIM_REPLAY) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)a->gang_slack);
        return bad("--gang-slack", v, "a gang queue's slack is for --experiment replay");
    }
    return 0;
}

static int parse_args(int argc, char **argv, struct sim_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        char flag[32];
        if (!strcmp(arg, "--json")) a->json = true;
        else if (!strcmp(arg, "--bound")) a->bound = true;
        else if (!strcmp(arg, "-q") || !strcmp(arg, "--quiet")) a->quiet = true;
        else if (takes_value(arg, flag, sizeof flag)) {
            const char *v = flag_value(argc, argv, &i, flag);
            if (!v) return 2;
            int rc = set_value(a, flag, v);
            if (rc) return rc;
        } else {
            fprintf(stderr, "gpusched sim: %s \"%s\" (see gpusched sim --help)\n",
                    arg[0] == '-' ? "unknown option" : "unexpected argument", arg);
            return 2;
        }
    }
    if (a->npolicies == 0) a->policies[a->npolicies++] = GS_SIM_PROFILE; /* the server's placement */
    if (a->nseeds == 0 && push_seed(a, 42)) return 1;
    if (a->bound && a->mode != GS_SIM_FGD) {
        fprintf(stderr, "gpusched sim: --bound: the upper bound is for --experiment fgd only (pods tried once, "
                        "nothing departs)\n");
        return 2;
    }
    return check_inputs(a);
}

/*--- Running ---*/

struct progress {
    const struct gs_clock *clock;
    int64_t start_ns, last_ns;
    size_t run, nruns;
    bool enabled, drawn;
    const char *label;
    struct gs_sim_writer *w;   /* forwards events/samples when --out */
};

static void draw(struct progress *p, double fraction)
{
    int64_t now = gs_clock_now(p->clock);
    if (now - p->start_ns < GS_NS_PER_SEC || now - p->last_ns < 100 * GS_NS_PER_MS) return;
    p->last_ns = now;
    double total = ((double)p->run + (fraction < 0 ? 0 : fraction > 1 ? 1 : fraction)) / (double)p->nruns;
    int width = 30, filled = (int)(total * width);
    fprintf(stderr, "\r[");
    for (int i = 0; i < width; i++) fputc(i < filled ? '#' : '.', stderr);
    fprintf(stderr, "] %3d%%  run %zu/%zu %s\033[K", (int)(total * 100), p->run + 1, p->nruns, p->label);
    p->drawn = true;
}

static void on_progress(void *ctx, double fraction)
{
    struct progress *p = ctx;
    if (p->enabled) draw(p, fraction);
}

static void on_event(void *ctx, const struct gs_sim_event *e)
{
    struct progress *p = ctx;
    if (p->w) gs_sim_writer_event(p->w, e);
}

static void on_sample(void *ctx, const struct gs_sim_sample *s)
{
    struct progress *p = ctx;
    if (p->w) gs_sim_writer_sample(p->w, s);
}

static void print_diags(const struct gs_diags *d)
{
    for (size_t i = 0; i < d->n; i++) {
        if (d->v[i].path && *d->v[i].path) fprintf(stderr, "gpusched sim: %s: %s\n", d->v[i].path, d->v[i].msg);
        else fprintf(stderr, "gpusched sim: %s\n", d->v[i].msg);
    }
}

static int load(const struct sim_args *a, struct gs_trace *t)
{
    struct gs_diags d = {0};
    int rc;
    if (a->cluster) rc = gs_trace_load_manifests(a->cluster, a->workload, t, &d);
    else if (a->nodes) rc = gs_trace_load_openb(a->nodes, a->pods, t, &d);
    else rc = gs_trace_load_openb(a->node_path, a->pod_path, t, &d);
    if (rc) {
        print_diags(&d);
        fprintf(stderr, "gpusched sim: cannot load the trace: %s\n", gs_strerror(rc));
    }
    gs_diags_free(&d);
    return rc;
}

/* One run: policy x seed. 0 or 1 (failure reported). */
static int run_one(const struct sim_args *a, const struct gs_trace *t, struct progress *p, const char *policy,
                   uint64_t seed, struct gs_sim_result *res)
{
    struct gs_sim_opts o = {.mode = a->mode, .policy = policy, .seed = seed, .tune = a->tune,
                            .config_path = a->config, .gang_queue = a->gang_queue, .gang_slack_s = a->gang_slack,
                            .bound = a->bound, .queue_window = a->queue_window};
    struct gs_sim_sink sink = {.event = on_event, .sample = on_sample, .progress = on_progress, .ctx = p};
    struct gs_diags d = {0};
    char label[96];
    snprintf(label, sizeof label, "%s seed %llu", policy, (unsigned long long)seed);
    p->label = label;
    if (p->w && gs_sim_writer_begin_run(p->w, policy, seed)) return 1;
    memset(res, 0, sizeof *res);
    int64_t t0 = gs_clock_now(p->clock);
    int rc = gs_sim_run(t, &o, &sink, res, &d);
    double wall = (double)(gs_clock_now(p->clock) - t0) / GS_NS_PER_SEC;
    if (res->wall_seconds <= 0) res->wall_seconds = wall;
    snprintf(res->policy, sizeof res->policy, "%s", policy);
    res->seed = seed;
    if (rc) {
        print_diags(&d);
        fprintf(stderr, "gpusched sim: %s, seed %llu: %s\n", policy, (unsigned long long)seed, gs_strerror(rc));
    } else if (p->w && gs_sim_writer_end_run(p->w, res)) {
        rc = GS_ESTATE;
    }
    gs_diags_free(&d);
    return rc ? 1 : 0;
}

static int run_all(const struct sim_args *a, const struct gs_trace *t, struct gs_sim_writer *w,
                   struct gs_sim_result *results)
{
    struct gs_clock wall;
    gs_clock_init_real(&wall);
    struct progress p = {.clock = &wall, .nruns = a->npolicies * a->nseeds, .w = w,
                         .enabled = !a->quiet && isatty(STDERR_FILENO)};
    p.start_ns = gs_clock_now(&wall);
    int rc = 0;
    for (size_t i = 0; i < a->npolicies && !rc; i++) { /* what the trace uses and the profile does not run */
        struct gs_sim_opts o = {.mode = a->mode, .policy = a->policies[i], .config_path = a->config};
        struct gs_diags warn = {0}, d = {0};
        if (gs_sim_check(t, &o, &warn, &d) == 0)
            for (size_t k = 0; k < warn.n; k++) fprintf(stderr, "gpusched sim: warning: %s\n", warn.v[k].msg);
        gs_diags_free(&warn), gs_diags_free(&d); /* a profile that does not build is reported by the run */
    }
    for (size_t i = 0; i < a->npolicies && !rc; i++)
        for (size_t s = 0; s < a->nseeds && !rc; s++, p.run++)
            rc = run_one(a, t, &p, a->policies[i], a->seeds[s], &results[i * a->nseeds + s]);
    if (p.drawn) fputs("\r\033[K", stderr);
    return rc;
}

/*--- Printing ---*/

static const enum gs_sim_field fgd_fields[] = {GS_SF_NODES,        GS_SF_GPUS,          GS_SF_PODS_ARRIVED,
                                               GS_SF_PODS_SCHEDULED, GS_SF_ALLOC_AT_100, GS_SF_ALLOC_FINAL,
                                               GS_SF_FRAG_AT_80,   GS_SF_WALL_SECONDS};
static const enum gs_sim_field replay_fields[] = {
    GS_SF_NODES,      GS_SF_GPUS,      GS_SF_PODS_ARRIVED, GS_SF_PODS_SCHEDULED, GS_SF_ALLOC_AT_100,
    GS_SF_ALLOC_FINAL, GS_SF_FRAG_AT_80, GS_SF_WALL_SECONDS, GS_SF_DELAY_P50,     GS_SF_DELAY_P90,
    GS_SF_DELAY_P99};

static const enum gs_sim_field fgd_bound_fields[] = {
    GS_SF_NODES,      GS_SF_GPUS,        GS_SF_PODS_ARRIVED, GS_SF_PODS_SCHEDULED, GS_SF_ALLOC_AT_100,
    GS_SF_BOUND_PCT,  GS_SF_ALLOC_FINAL, GS_SF_FRAG_AT_80,   GS_SF_WALL_SECONDS};

static const enum gs_sim_field *fields(const struct sim_args *a, size_t *n)
{
    if (a->mode == GS_SIM_FGD && a->bound) {
        *n = sizeof fgd_bound_fields / sizeof *fgd_bound_fields;
        return fgd_bound_fields;
    }
    *n = a->mode == GS_SIM_FGD ? sizeof fgd_fields / sizeof *fgd_fields : sizeof replay_fields / sizeof *replay_fields;
    return a->mode == GS_SIM_FGD ? fgd_fields : replay_fields;
}

/* Integers stay integers in JSON (counts); everything else is a real. */
static json_t *number(double v)
{
    if (v == floor(v) && fabs(v) < 1e15) return json_integer((json_int_t)v);
    return json_real(v);
}

static json_t *policy_json(const struct sim_args *a, const struct gs_sim_result *runs)
{
    struct gs_sim_stats *st = malloc(sizeof *st);
    json_t *o = json_object();
    if (!st || !o) {
        free(st);
        json_decref(o);
        return NULL;
    }
    gs_sim_stats_compute(runs, a->nseeds, st);
    size_t nf;
    const enum gs_sim_field *f = fields(a, &nf);
    json_object_set_new(o, "policy", json_string(runs[0].policy));
    json_object_set_new(o, "seed", json_integer((json_int_t)runs[0].seed));
    for (size_t i = 0; i < nf; i++) json_object_set_new(o, gs_sim_field_name(f[i]), number(st->mean[f[i]]));
    if (a->mode == GS_SIM_REPLAY && runs[0].gangs) { /* gang queueing (first seed's run) */
        const struct gs_sim_result *r = &runs[0];
        json_object_set_new(o, "gang_queue", json_string(gs_gangq_mode_name(r->gang_queue)));
        json_object_set_new(o, "gangs", json_integer(r->gangs));
        json_object_set_new(o, "gangs_started", json_integer(r->gangs_started));
        json_object_set_new(o, "partial_gangs", json_integer(r->partial_gangs));
        json_object_set_new(o, "gang_delay_p50", number(r->gang_delay_p50));
        json_object_set_new(o, "gang_delay_p99", number(r->gang_delay_p99));
        json_object_set_new(o, "gang_wait_hours", number(r->gang_wait_hours));
        json_object_set_new(o, "gang_idle_gpu_hours", number(r->gang_idle_gpu_hours));
        json_object_set_new(o, "gang_idle_frac", number(r->gang_idle_frac));
        json_object_set_new(o, "gang_reservations", json_integer(r->gang_reservations));
        json_object_set_new(o, "gang_backfilled", json_integer(r->gang_backfilled));
        json_object_set_new(o, "pods_preempted", json_integer(r->pods_preempted));
    }
    if (a->seed_list) {
        json_t *seeds = json_array();
        for (size_t i = 0; i < a->nseeds; i++) json_array_append_new(seeds, json_integer((json_int_t)a->seeds[i]));
        json_object_set_new(o, "seeds", seeds);
        char key[64];
        for (size_t i = 0; i < nf; i++) {
            snprintf(key, sizeof key, "%s_std", gs_sim_field_name(f[i]));
            json_object_set_new(o, key, json_real(st->std[f[i]]));
        }
    }
    free(st);
    return o;
}

static int print_json(const struct sim_args *a, const struct gs_sim_result *results)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < a->npolicies; i++) {
        json_t *o = policy_json(a, &results[i * a->nseeds]);
        if (!o || json_array_append_new(arr, o)) {
            json_decref(arr);
            return 1;
        }
    }
    char *text = arr ? json_dumps(arr, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
    json_decref(arr);
    if (!text) return 1;
    printf("%s\n", text);
    free(text);
    return 0;
}

/* Human columns: the fgd metrics, or for replay the utilisation and delays. */
static void print_table(const struct sim_args *a, const struct gs_sim_result *results)
{
    bool fgd = a->mode == GS_SIM_FGD;
    printf("%-16s %5s %6s %6s %9s %9s", "policy", "seeds", "nodes", "gpus", "arrived", "scheduled");
    if (fgd) printf(" %11s%s %11s %9s", "alloc%@100", a->bound ? "    bound%" : "", "alloc%final", "frag%@80");
    else printf(" %11s %10s %10s %10s", "alloc%final", "delay_p50", "delay_p90", "delay_p99");
    printf(" %9s\n", "wall(s)");
    struct gs_sim_stats *st = malloc(sizeof *st);
    if (!st) return;
    for (size_t i = 0; i < a->npolicies; i++) {
        gs_sim_stats_compute(&results[i * a->nseeds], a->nseeds, st);
        const double *m = st->mean;
        printf("%-16s %5zu %6.0f %6.0f %9.0f %9.0f", st->policy, st->nruns, m[GS_SF_NODES], m[GS_SF_GPUS],
               m[GS_SF_PODS_ARRIVED], m[GS_SF_PODS_SCHEDULED]);
        if (fgd && a->bound)
            printf(" %11.2f %9.2f %11.2f %9.2f", m[GS_SF_ALLOC_AT_100], m[GS_SF_BOUND_PCT], m[GS_SF_ALLOC_FINAL],
                   m[GS_SF_FRAG_AT_80]);
        else if (fgd)
            printf(" %11.2f %11.2f %9.2f", m[GS_SF_ALLOC_AT_100], m[GS_SF_ALLOC_FINAL], m[GS_SF_FRAG_AT_80]);
        else
            printf(" %11.2f %10.1f %10.1f %10.1f", m[GS_SF_ALLOC_FINAL], m[GS_SF_DELAY_P50], m[GS_SF_DELAY_P90],
                   m[GS_SF_DELAY_P99]);
        printf(" %9.3f", m[GS_SF_WALL_SECONDS]);
        if (st->nruns > 1 && fgd) printf("   (alloc%%@100 std %.2f)", st->std[GS_SF_ALLOC_AT_100]);
        putchar('\n');
    }
    free(st);
}

/*--- Entry point ---*/

/* What the report says about the run (sim/output.h), and the trace it names pods from. */
static void report_meta(const struct sim_args *a, struct gs_sim_writer *w, const struct gs_trace *t)
{
    struct gs_cli_meta cm;
    gs_cli_meta_init(&cm, a->argc, a->argv);
    char trace[8300], policies[1024] = "";
    snprintf(trace, sizeof trace, "%s %s", a->cluster ? a->cluster : a->nodes ? a->nodes : a->node_path,
             a->cluster ? (a->workload ? a->workload : "") : a->nodes ? a->pods : a->pod_path);
    for (size_t i = 0; i < a->npolicies; i++)
        snprintf(policies + strlen(policies), sizeof policies - strlen(policies), "%s%s", i ? "," : "", a->policies[i]);
    cm.m.experiment = a->mode == GS_SIM_FGD ? "fgd" : "replay";
    cm.m.trace = trace;
    cm.m.variant = a->cluster || a->nodes ? NULL : a->variant ? a->variant : "default";
    cm.m.config = a->config;
    cm.m.policies = policies[0] ? policies : NULL;
    cm.m.tune = a->mode == GS_SIM_FGD ? a->tune : 0;
    cm.m.seeds = a->seeds;
    cm.m.nseeds = a->nseeds;
    if (gs_sim_writer_set_meta(w, &cm.m)) fprintf(stderr, "gpusched sim: out of memory for the report's metadata\n");
    gs_sim_writer_set_trace(w, t);
    gs_cli_meta_free(&cm);
}

static int simulate(const struct sim_args *a)
{
    struct gs_trace t = {0};
    if (load(a, &t)) return 1;
    if (!a->quiet && !a->json)
        fprintf(stderr, "gpusched sim: %zu nodes, %zu pods, %s experiment, %zu run(s)\n", t.nnodes, t.npods,
                a->mode == GS_SIM_FGD ? "fgd" : "replay", a->npolicies * a->nseeds);
    struct gs_sim_writer *w = NULL;
    int rc = 0;
    if (a->out && (rc = gs_sim_writer_open(a->out, a->mode, &w))) {
        fprintf(stderr, "gpusched sim: --out %s: cannot write there: %s\n", a->out, gs_strerror(rc));
        gs_trace_free(&t);
        return 1;
    }
    if (w) report_meta(a, w, &t);
    struct gs_sim_result *results = calloc(a->npolicies * a->nseeds, sizeof *results);
    rc = results ? run_all(a, &t, w, results) : 1;
    if (w) {
        int wrc = gs_sim_writer_close(w);
        if (wrc) fprintf(stderr, "gpusched sim: --out %s: writing failed: %s\n", a->out, gs_strerror(wrc));
        else if (!a->quiet) fprintf(stderr, "gpusched sim: report written to %s/report.html\n", a->out);
        if (wrc) rc = 1;
    }
    if (!rc) {
        if (a->json) rc = print_json(a, results);
        else print_table(a, results);
    }
    free(results);
    gs_trace_free(&t);
    return rc;
}

/*--- multi-tenant experiment (cmd_sim_tenants.c) ---*/
int gs_cmd_sim_tenants(int argc, char **argv);
int gs_cmd_sim_whatif(int argc, char **argv);

int gs_cmd_sim(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* what-if on a live cluster: cmd_sim_whatif.c */
        if (!strcmp(argv[i], "--from-cluster") || !strcmp(argv[i], "--snapshot")) return gs_cmd_sim_whatif(argc, argv);
    for (int i = 1; i + 1 < argc; i++) /* --experiment tenants has its own flags */
        if (!strcmp(argv[i], "--experiment") && !strcmp(argv[i + 1], "tenants")) return gs_cmd_sim_tenants(argc, argv);
    /*--- end multi-tenant ---*/
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    struct sim_args a = {.mode = GS_SIM_FGD, .tune = 1.3, .queue_window = GS_SIM_QUEUE_WINDOW, .argc = argc, .argv = argv};
    int rc = parse_args(argc, argv, &a);
    if (rc == 0) rc = simulate(&a);
    fflush(stdout);
    free(a.seeds);
    free(a.policy_buf);
    return rc;
}
