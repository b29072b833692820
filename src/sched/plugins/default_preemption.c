/*
 * default_preemption.c - "DefaultPreemption": the framework adapter of
 * preemption_core.c.
 *
 * PostFilter: when no node fits, find victims (preemption_core) for the pod
 * or, for a gang member of a group that has not started, for all its pending
 * members at once; the fit test is the profile's own filters run on the
 * cache with the victims taken out (gs_framework_run_filters, Coscheduling's
 * admission left out: that is what preemption resolves), also given as a
 * batch (one PreFilter for many nodes) with the hint that NodeResourcesFit
 * is in it when it is, so the search can rule nodes out by arithmetic
 * (gs_preempt_find_with). Only a plan that places every member is carried
 * out: victims are evicted through the handle and each member is nominated
 * to its node.
 *
 * Filter keeps nominated capacity for its pod: a node nominated to another
 * pod of at least this priority is rejected when this pod would eat into
 * what the nominated pod needs. Score prefers the pod's own nominated node;
 * Reserve clears the nomination. Args: maxPreemptionsPerWindow (3),
 * preemptionWindowSeconds (600), nominationTTLSeconds (60).
 */
#include "sched/framework.h"
#include "sched/gang_core.h"
#include "sched/preemption_core.h"
#include "sched/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "DefaultPreemption"

enum { REJ_NOMINATED = 1 | GS_REJECT_UNRESOLVABLE };

struct pre_state {
    struct gs_handle h;
    struct gs_preemption *p;
    /* Pods whose search found nothing on the cache as it is now (key hashes,
     * forgotten as soon as the cache changes): a queue of pending pods retried
     * on every event would otherwise search again and again for nothing. */
    uint64_t failed[256];
    size_t nfailed;
    uint64_t failed_changes;
};

static bool failed_before(struct pre_state *s, uint64_t h)
{
    if (s->failed_changes != gs_cache_changes(s->h.cache)) {
        s->failed_changes = gs_cache_changes(s->h.cache);
        s->nfailed = 0;
    }
    for (size_t i = 0; i < s->nfailed; i++)
        if (s->failed[i] == h) return true;
    return false;
}

struct gs_preemption *gs__preemption_of(void *state) { return state ? ((struct pre_state *)state)->p : NULL; }

static int64_t sec_arg(const json_t *args, const char *name, int64_t def, struct gs_diags *d, int *err)
{
    const json_t *v = json_object_get(args, name);
    if (!v) return def;
    if (!json_is_integer(v) || json_integer_value(v) < 1) {
        char p[96];
        snprintf(p, sizeof p, "args.%s", name);
        gs_diags_add(d, p, "must be a positive integer");
        *err = GS_EINVAL;
        return def;
    }
    return json_integer_value(v);
}

static int pre_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    int err = 0;
    struct gs_preempt_opts o = {
        .max_per_window = (int32_t)sec_arg(args, "maxPreemptionsPerWindow", 3, d, &err),
        .window_ns = sec_arg(args, "preemptionWindowSeconds", 600, d, &err) * GS_NS_PER_SEC,
        .nomination_ttl_ns = sec_arg(args, "nominationTTLSeconds", 60, d, &err) * GS_NS_PER_SEC,
    };
    if (err) return err;
    struct pre_state *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->h = *h;
    if (!(s->p = gs_preemption_new(&o, h->clock, h->cache))) {
        free(s);
        return GS_ENOMEM;
    }
    *state = s;
    return 0;
}

static void pre_fini(void *state)
{
    struct pre_state *s = state;
    if (!s) return;
    gs_preemption_free(s->p);
    free(s);
}

static void pre_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                       struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)cs;
    struct pre_state *s = state;
    for (size_t i = 0; i < n; i++)
        if (gs_preempt_blocked(s->p, pod, nodes[i])) reject[i] = REJ_NOMINATED;
}

static int pre_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)state, (void)pod, (void)code;
    return snprintf(buf, len, "node(s) hold capacity nominated to a pod of higher or equal priority");
}

static void pre_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)cs;
    struct pre_state *s = state;
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    int32_t nom = gs_preempt_nominated_node(s->p, key);
    for (size_t i = 0; i < n && nom >= 0; i++) scores[i] = nodes[i]->idx == nom ? GS_MAX_SCORE : 0;
}

static struct gs_status pre_reserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                    struct gs_node_info *node, struct gs_assignment *a)
{
    (void)cs, (void)node, (void)a;
    struct pre_state *s = state;
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    gs_preempt_clear(s->p, key);
    return (struct gs_status){0};
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

static void fits_many(void *ctx, const struct gs_pod *pod, struct gs_node_info *const *nodes, size_t n, bool *ok)
{
    struct fit_ctx *f = ctx;
    uint8_t *rej = malloc(n ? n : 1);
    struct gs_filter_run run = {.nodes = nodes, .n = n, .reject = rej, .skip = "Coscheduling"};
    int m = rej ? gs_framework_run_filters(f->fw, pod, &run) : GS_ENOMEM;
    for (size_t i = 0; i < n; i++) ok[i] = m > 0 && !rej[i];
    free(rej);
}

/* Is NodeResourcesFit's Filter always part of the fit test? */
static bool checks_resources(struct gs_framework *fw)
{
    for (int i = 0; i < gs_framework_filter_count(fw); i++) {
        const struct gs_plugin *pl = gs_framework_filter_plugin(fw, i, NULL);
        if (pl && !strcmp(pl->name, "NodeResourcesFit") && pl->filter && !pl->pre_filter) return true;
    }
    return false;
}

/* The preemptor and, for a gang that has not started, its pending siblings. */
static size_t members_of(struct pre_state *s, const struct gs_pod *pod, const struct gs_pod ***out)
{
    struct gs_gang *g = gs__gang_of(gs_framework_plugin_state(s->h.fw, "Coscheduling"));
    struct gs_gang_group *gr = g ? gs_gang_group_of(g, pod) : NULL;
    const struct gs_pod *const *all = NULL;
    size_t n = gr ? gs_gang_members(gr, &all) : 0;
    *out = calloc(n + 1, sizeof **out);
    if (!*out) return 0;
    (*out)[0] = pod;
    size_t k = 1;
    int32_t min = gr ? gs_gang_min_member(gr) : 0;
    if (gr && gs_gang_placed(g, gr) < (min > 0 ? min : 1)) {
        for (size_t i = 0; i < n; i++) {
            char key[GS__KEY_MAX];
            gs__pod_key(all[i], key, sizeof key);
            if (all[i] != pod && !gs_cache_pod_assignment(s->h.cache, key)) (*out)[k++] = all[i];
        }
    }
    return k;
}

int gs__preempt_plan_for(void *state, struct gs_framework *fw, const struct gs_pod *pod, struct gs_preempt_plan *plan,
                         const struct gs_pod ***members, size_t *nmembers)
{
    struct pre_state *s = state;
    struct gs_handle h = s->h;
    h.fw = fw;
    struct pre_state tmp = {.h = h, .p = s->p};
    *nmembers = members_of(&tmp, pod, members);
    if (!*nmembers) return GS_ENOMEM;
    struct fit_ctx f = {fw};
    struct gs_preempt_fit fit = {fits, fits_many, &f, checks_resources(fw)};
    return gs_preempt_find_with(s->p, *members, *nmembers, &fit, plan);
}

static struct gs_status pre_post_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                        const struct gs_diagnosis *diag, struct gs_post_filter_result *res)
{
    (void)cs;
    struct pre_state *s = state;
    if (!s->h.fw || !s->h.evict) return (struct gs_status){.code = GS_SKIP};
    if (pod->preempt_never) /* kube's PodEligibleToPreemptOthers */
        return gs_status_make(GS_UNSCHEDULABLE, "not eligible due to preemptionPolicy=Never.");
    /* Rejected outright and for good (a gang still missing members): no eviction can help. */
    if (diag && diag->prefilter.code == GS_UNSCHEDULABLE_AND_UNRESOLVABLE) return (struct gs_status){.code = GS_SKIP};
    /* It failed even with its nomination: the capacity held for it did not
     * help (or went to others), so release it before looking again. */
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    gs_preempt_clear(s->p, key);
    struct gs_preempt_plan plan;
    const struct gs_pod **members;
    size_t n;
    uint64_t h = gs__fnv1a(key);
    if (failed_before(s, h)) {
        gs_preempt_count_refusal(s->p);
        return gs_status_make(GS_UNSCHEDULABLE, "preemption would not help (cluster unchanged since the last search)");
    }
    int rc = gs__preempt_plan_for(state, s->h.fw, pod, &plan, &members, &n);
    if (rc) {
        if (s->nfailed < sizeof s->failed / sizeof s->failed[0]) s->failed[s->nfailed++] = h;
        free(members);
        gs_preempt_count_refusal(s->p);
        return gs_status_make(GS_UNSCHEDULABLE, "preemption would not help: no set of lower-priority victims makes room");
    }
    if (plan.nvictims == 0) { /* it fits as things are: nothing to evict or to hold */
        gs_preempt_plan_free(&plan);
        free(members);
        return gs_status_make(GS_UNSCHEDULABLE, "fits without preemption; retried on the next event");
    }
    for (size_t i = 0; i < plan.nvictims; i++) s->h.evict(s->h.evict_ctx, plan.victims[i], pod);
    for (size_t i = 0; i < n; i++) gs_preempt_nominate(s->p, members[i], plan.nodes[i]);
    gs_preempt_record(s->p, &plan, pod);
    res->nominated_node = plan.nodes[0];
    gs_preempt_plan_free(&plan);
    free(members);
    return (struct gs_status){0};
}

static void pre_on_pod(void *state, const struct gs_pod *pod, bool added)
{
    struct pre_state *s = state;
    if (added) return;
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    gs_preempt_clear(s->p, key);
}

/* Filter and Score read only the nominations, by node index. Without any
 * the Filter rejects nothing and the Score is 0 on every node. With some,
 * the pod's cycle is still a function of the class on every node but the
 * one another plugin set apart (a planned gang member's node, judged on its
 * own) when its own nomination, if any, is that node (Score: the maximum
 * there, 0 elsewhere) and every nomination that could block it lies there
 * too (Filter: no rejection elsewhere); for Filters alone
 * (gs_framework_run_filters) only the second. The node set apart is read, never
 * set: a plugin that sets it sets the same node at each of its calls, so a
 * node seen here stays the cycle's. */
static bool pre_by_class(void *state, const struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    struct pre_state *s = state;
    if (gs_preempt_nomination_count(s->p) == 0) return true;
    /* Filters alone (the whole-group plan's class path): the Filter never
     * reads the pod's own nomination (only Score does), so it is a class
     * function when no nomination that could block the pod lies anywhere. */
    if (cs && cs->filters_only) return gs_preempt_blocks_only(s->p, pod, -1);
    if (!s->h.fw) return false;
    int32_t apart = gs_framework_class_apart_node(s->h.fw);
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    int32_t nom = gs_preempt_nominated_node(s->p, key);
    if (nom >= 0 && nom != apart) return false;
    return gs_preempt_blocks_only(s->p, pod, apart);
}

const struct gs_plugin gs_plugin_default_preemption = {
    .name = NAME,
    .init = pre_init,
    .fini = pre_fini,
    .filter = pre_filter,
    .reason = pre_reason,
    .post_filter = pre_post_filter,
    .score = pre_score,
    .reserve = pre_reserve,
    .on_pod = pre_on_pod,
    .by_class = pre_by_class,
};
