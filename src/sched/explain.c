/*
 * explain.c - the pending-pod report; see explain.h.
 *
 * Every Filter plugin is run on every live node (gs_framework_run_filters in
 * "each" mode) so the tallies answer "what does each plugin think" rather
 * than the scheduler's short-circuit "who rejected first". The closest node
 * is the one the fewest plugins reject (ties: the most free GPU share); what
 * it lacks is computed from the cache's aggregates. The preemption
 * counterfactual runs preemption_core's search with the profile's filters on
 * a private preemption state, so it works whether or not the profile enables
 * DefaultPreemption, and leaves the cache exactly as it was.
 */
#include "sched/explain.h"

#include "sched/gang_core.h"
#include "sched/gpu_state.h"
#include "sched/preemption_core.h"
#include "sched/strmap.h"
#include "sched/topology_core.h"

#include <stdlib.h>
#include <string.h>

static void describe_pod(const struct gs_pod *pod, FILE *out)
{
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    const struct gs_demand *d = &pod->demand;
    fprintf(out, "pod %s (priority %d): %.3g CPU, %.3g GiB", key, pod->priority, (double)d->cpu_milli / 1000,
            (double)d->mem_bytes / (1 << 30));
    if (d->gpu_count)
        fprintf(out, ", %d GPU%s x %d milli", d->gpu_count, d->gpu_count > 1 ? "s" : "", d->gpu_milli);
    if (pod->pod_group) fprintf(out, ", pod group %s", pod->pod_group);
    fputc('\n', out);
}

struct tally {
    const struct gs_plugin *pl;
    void *state;
    uint8_t code;
    int count;
};

static void per_plugin(struct gs_framework *fw, const struct gs_pod *pod, const uint8_t *rej, size_t n, FILE *out)
{
    int nf = gs_framework_filter_count(fw);
    for (int i = 0; i < nf; i++) {
        void *st;
        const struct gs_plugin *pl = gs_framework_filter_plugin(fw, i, &st);
        int counts[256] = {0}, total = 0;
        for (size_t j = 0; j < n; j++)
            if (rej[(size_t)i * n + j]) counts[rej[(size_t)i * n + j]]++, total++;
        if (!total) continue;
        for (int c = 1; c < 256; c++) {
            if (!counts[c]) continue;
            char why[GS_STATUS_REASON_MAX + 64];
            if (!pl->reason || pl->reason(st, pod, (uint8_t)c, why, sizeof why) < 0)
                snprintf(why, sizeof why, "code %d", GS_REJECT_CODE(c));
            fprintf(out, "  %-22s rejected %d node(s): %s\n", pl->name, counts[c], why);
        }
    }
}

/* What the node lacks for the pod, from its aggregates. */
static void lacks(const struct gs_node_info *n, const struct gs_pod *pod, FILE *out)
{
    const struct gs_demand *d = &pod->demand;
    bool any = false;
    int64_t cpu = n->cpu_alloc - n->cpu_used, mem = n->mem_alloc - n->mem_used;
    if (d->cpu_milli > cpu) fprintf(out, "%s%.3g CPU (%.3g free)", any ? ", " : "", (double)(d->cpu_milli - cpu) / 1000, (double)cpu / 1000), any = true;
    if (d->mem_bytes > mem) fprintf(out, "%s%.3g GiB memory", any ? ", " : "", (double)(d->mem_bytes - mem) / (1 << 30)), any = true;
    if (d->gpu_count) {
        int fit = __builtin_popcountll(gs_topo_fit_mask(n, d->gpu_milli, d->gpu_mem_mib));
        if (fit < d->gpu_count)
            fprintf(out, "%s%d GPU(s) with %d milli free (has %d)", any ? ", " : "", d->gpu_count - fit, d->gpu_milli, fit), any = true;
    }
    if (!any) fprintf(out, "no resources: it is rejected by policy (see the plugins above)");
}

static void closest(struct gs_framework *fw, const struct gs_pod *pod, struct gs_node_info **nodes, const uint8_t *rej,
                    size_t n, FILE *out)
{
    int nf = gs_framework_filter_count(fw), best = -1, best_r = 1 << 30;
    for (size_t j = 0; j < n; j++) {
        int r = 0;
        for (int i = 0; i < nf; i++) r += rej[(size_t)i * n + j] != 0;
        if (r < best_r || (r == best_r && nodes[j]->gpu_milli_free > nodes[best]->gpu_milli_free)) best = (int)j, best_r = r;
    }
    if (best < 0) return;
    fprintf(out, "closest node: %s (rejected by %d plugin%s", nodes[best]->name, best_r, best_r == 1 ? "" : "s");
    for (int i = 0; i < nf; i++) {
        uint8_t c = rej[(size_t)i * n + (size_t)best];
        if (!c) continue;
        void *st;
        const struct gs_plugin *pl = gs_framework_filter_plugin(fw, i, &st);
        char why[GS_STATUS_REASON_MAX + 64] = "";
        if (pl->reason) pl->reason(st, pod, c, why, sizeof why);
        fprintf(out, "; %s: %s", pl->name, why);
    }
    fprintf(out, ")\n  it lacks: ");
    lacks(nodes[best], pod, out);
    fputc('\n', out);
}

static void island_hint(const struct gs_pod *pod, struct gs_node_info **nodes, size_t n, FILE *out)
{
    const struct gs_demand *d = &pod->demand;
    if (d->gpu_count < 2) return;
    int32_t best = 0;
    const char *where = NULL;
    bool links = false;
    for (size_t j = 0; j < n; j++) {
        for (int32_t g = 0; g < nodes[j]->ngpus; g++) links = links || nodes[j]->gpus[g].nvlink;
        int32_t f = gs_topo_largest_free_island(nodes[j], d->gpu_milli, d->gpu_mem_mib);
        if (f > best) best = f, where = nodes[j]->name;
    }
    if (!links || best >= d->gpu_count) return;
    fprintf(out, "topology: needs %d GPUs in one NVLink island; largest free island is %d (on %s)\n", d->gpu_count,
            best, where ? where : "no node");
}

struct fit_ctx {
    struct gs_framework *fw;
};

static bool fits(void *ctx, const struct gs_pod *pod, struct gs_node_info *node)
{
    struct fit_ctx *f = ctx;
    struct gs_node_info *nodes[1] = {node};
    uint8_t rej[1];
    struct gs_filter_run run = {.nodes = nodes, .n = 1, .reject = rej, .skip = "Coscheduling"};
    return gs_framework_run_filters(f->fw, pod, &run) == 1;
}

static void counterfactual(struct gs_framework *fw, struct gs_cache *cache, const struct gs_pod *pod, FILE *out)
{
    struct gs_clock fixed;
    gs_clock_init_sim(&fixed, 0);
    struct gs_preempt_opts o = {0};
    struct gs_preemption *p = gs_preemption_new(&o, &fixed, cache);
    if (!p) return;
    struct fit_ctx f = {fw};
    const struct gs_pod *members[1] = {pod};
    struct gs_preempt_plan plan;
    if (gs_preempt_find(p, members, 1, fits, &f, &plan) != 0) {
        fprintf(out, "preemption: would not help (no set of lower-priority pods frees a node for it)\n");
    } else if (plan.nvictims == 0) {
        fprintf(out, "preemption: not needed, it fits now on %s\n", gs_cache_node(cache, plan.nodes[0])->name);
    } else {
        fprintf(out, "preemption: would fit on %s if pod%s ", gs_cache_node(cache, plan.nodes[0])->name,
                plan.nvictims > 1 ? "s" : "");
        for (size_t i = 0; i < plan.nvictims; i++) {
            char key[GS__KEY_MAX];
            gs__pod_key(plan.victims[i], key, sizeof key);
            fprintf(out, "%s%s", i ? (i + 1 == plan.nvictims ? " and " : ", ") : "", key);
        }
        fprintf(out, " %s preempted\n", plan.nvictims > 1 ? "were" : "was");
        gs_preempt_plan_free(&plan);
    }
    gs_preemption_free(p);
}

int gs_explain_pod(struct gs_framework *fw, struct gs_cache *cache, const struct gs_pod *pod, FILE *out)
{
    describe_pod(pod, out);
    size_t slots = (size_t)gs_cache_node_count(cache), n = 0;
    size_t nf = (size_t)gs_framework_filter_count(fw);
    struct gs_node_info **nodes = malloc((slots ? slots : 1) * sizeof *nodes);
    uint8_t *rej = malloc((nf ? nf : 1) * (slots ? slots : 1));
    if (!nodes || !rej) {
        free(nodes), free(rej);
        return GS_ENOMEM;
    }
    int unsched = 0;
    for (size_t i = 0; i < slots; i++) {
        struct gs_node_info *ni = gs_cache_node(cache, (int32_t)i);
        if (ni->live && ni->schedulable) nodes[n++] = ni;
        else if (ni->live) unsched++;
    }
    struct gs_filter_run run = {.nodes = nodes, .n = n, .each = true, .reject = rej};
    int ok = gs_framework_run_filters(fw, pod, &run);
    if (ok < 0) {
        free(nodes), free(rej);
        return ok;
    }
    fprintf(out, "%d of %zu schedulable node(s) pass every filter%s\n", ok, n,
            unsched ? " (some nodes are cordoned)" : "");
    char note[512]; /* nodes whose GPUs are known only by their count (sched/gpu_state.h) */
    if (gs_gpu_state_note(cache, NULL, pod, note, sizeof note)) fprintf(out, "  %s\n", note);
    if (run.prefilter.code != GS_SUCCESS) {
        fprintf(out, "  %-22s rejected the pod before any node: %s\n", run.prefilter.plugin ? run.prefilter.plugin : "PreFilter",
                run.prefilter.reason);
    } else {
        per_plugin(fw, pod, rej, n, out);
        if (ok == 0) closest(fw, pod, nodes, rej, n, out);
    }
    if (ok > 0 && run.prefilter.code == GS_SUCCESS) fprintf(out, "it fits now: the next attempt places it\n");
    island_hint(pod, nodes, n, out);
    if (ok == 0 || run.prefilter.code != GS_SUCCESS) counterfactual(fw, cache, pod, out);
    free(nodes), free(rej);
    return 0;
}

int gs_explain_group(struct gs_framework *fw, struct gs_cache *cache, const char *group_key,
                     const struct gs_pod *const *pods, size_t n, FILE *out)
{
    struct gs_gang *g = gs__gang_of(gs_framework_plugin_state(fw, "Coscheduling"));
    size_t placed = 0;
    for (size_t i = 0; i < n; i++) {
        char key[GS__KEY_MAX];
        gs__pod_key(pods[i], key, sizeof key);
        placed += gs_cache_pod_assignment(cache, key) != NULL;
    }
    fprintf(out, "pod group %s: %zu member(s) known, %zu placed", group_key, n, placed);
    struct gs_gang_group *gr = g && n ? gs_gang_group_of(g, pods[0]) : NULL;
    if (gr) fprintf(out, ", minMember %d", gs_gang_min_member(gr));
    fputc('\n', out);
    if (gr && n) {
        struct gs_status s = gs_gang_admit(g, pods[0]);
        if (s.code != GS_SUCCESS) fprintf(out, "  Coscheduling: %s\n", s.reason);
    }
    for (size_t i = 0; i < n; i++) {
        char key[GS__KEY_MAX];
        gs__pod_key(pods[i], key, sizeof key);
        if (gs_cache_pod_assignment(cache, key)) continue;
        fputc('\n', out);
        int rc = gs_explain_pod(fw, cache, pods[i], out);
        if (rc) return rc;
    }
    return 0;
}
