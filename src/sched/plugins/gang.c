/*
 * gang.c - "Coscheduling": the framework adapter of gang_core.c.
 *
 * Points: QueueSort (group members together), PreFilter (admission and the
 * whole-group plan), Filter (a required topology domain), Score (the planned
 * node), Reserve/Unreserve (plan bookkeeping; a failed member rejects its
 * waiting siblings), Permit (wait until minMember are reserved, then allow
 * them all), PostFilter (a member that fits nowhere releases its waiting
 * siblings), and the pod/PodGroup events that feed the registry.
 *
 * Args (CoschedulingArgs plus ours): permitWaitingTimeSeconds (60),
 * podGroupBackoffSeconds (0), podGroupRejectPercentage (0), wholeGroupPlan
 * (true), topologyKey and topologyMode ("preferred" | "required").
 *
 * Planning places members with the profile's own filters
 * (gs_framework_run_filters) and packs them: among feasible nodes the one
 * with the least free GPU share, so a gang fills few nodes. It judges one
 * node per node class when the filters allow (place_by_class), the same
 * choice as judging every node.
 */
#include "sched/dra_plugin.h" /* members with resource claims */
#include "sched/framework.h"
#include "sched/gang_core.h"
#include "sched/nodeclass.h" /* the label a class leaves out */
#include "sched/strmap.h"
#include "sched/topology_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "Coscheduling"
#define KEY "Coscheduling"

enum { REJ_DOMAIN = 1 | GS_REJECT_UNRESOLVABLE };

struct gang_state {
    struct gs_handle h;
    struct gs_gang *g;
    char *topology_key;
    /* place()'s node list and verdicts, kept between calls (one per member planned). */
    struct gs_node_info **nodes;
    uint8_t *rej;
    int32_t cap;
    /* Members whose claims the plan being made holds (DynamicResources), given back after it. */
    const struct gs_pod **dra_planned;
    size_t ndra_planned, dra_cap;
    /* activate_siblings' list, kept between calls. */
    const struct gs_pod **sibs;
    size_t sibs_cap;
};

struct cyc {
    int32_t planned;
    const char *domain_key;
    const char *domain;
    bool required;
};

static int int_arg(const json_t *args, const char *name, int def, int lo, int hi, struct gs_diags *d, int *err)
{
    const json_t *v = json_object_get(args, name);
    if (!v) return def;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char p[96];
        snprintf(p, sizeof p, "args.%s", name);
        gs_diags_add(d, p, "must be an integer in %d..%d", lo, hi);
        *err = GS_EINVAL;
        return def;
    }
    return (int)json_integer_value(v);
}

static int gang_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    int err = 0;
    struct gs_gang_opts o = {
        .permit_wait_s = int_arg(args, "permitWaitingTimeSeconds", GS_GANG_DEFAULT_WAIT_S, 1, 86400, d, &err),
        .backoff_s = int_arg(args, "podGroupBackoffSeconds", 0, 0, 86400, d, &err),
        .reject_percentage = int_arg(args, "podGroupRejectPercentage", 0, 0, 100, d, &err),
        .whole_group_plan = true,
    };
    const json_t *plan = json_object_get(args, "wholeGroupPlan");
    if (plan && !json_is_boolean(plan)) gs_diags_add(d, "args.wholeGroupPlan", "must be true or false"), err = GS_EINVAL;
    if (plan) o.whole_group_plan = json_is_true(plan);
    const char *key = json_string_value(json_object_get(args, "topologyKey"));
    const char *mode = json_string_value(json_object_get(args, "topologyMode"));
    if (mode && strcmp(mode, "required") && strcmp(mode, "preferred"))
        gs_diags_add(d, "args.topologyMode", "\"%s\": want required or preferred", mode), err = GS_EINVAL;
    o.topology_required = mode && !strcmp(mode, "required");
    if (err) return err;
    struct gang_state *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->h = *h;
    if (key && !(s->topology_key = strdup(key))) {
        free(s);
        return GS_ENOMEM;
    }
    o.topology_key = s->topology_key;
    if (!(s->g = gs_gang_new(&o, h->clock, h->cache))) {
        free(s->topology_key);
        free(s);
        return GS_ENOMEM;
    }
    *state = s;
    return 0;
}

static void gang_fini(void *state)
{
    struct gang_state *s = state;
    if (!s) return;
    gs_gang_free(s->g);
    free(s->topology_key);
    free(s->nodes);
    free(s->rej);
    free(s->dra_planned);
    free(s->sibs);
    free(s);
}

struct gs_gang *gs__gang_of(void *state) { return state ? ((struct gang_state *)state)->g : NULL; }

static bool gang_less(void *state, const struct gs_queued_pod *a, const struct gs_queued_pod *b)
{
    return gs_gang_less(((struct gang_state *)state)->g, a, b);
}

/*--- Planning through the framework's filters ---*/

static bool in_plan_domain(const struct gs_node_info *ni, const char *const *dv, const char *dkey, const char *domain)
{
    if (!domain) return true;
    const char *v = dv ? dv[ni->idx] : gs_topo_domain(ni, dkey);
    return v && (v == domain || !strcmp(v, domain));
}

/* The packing order: less free GPU share (GPU pods) or CPU (others); ties
 * go to the lower node index. */
static bool packs_before(const struct gs_demand *d, const struct gs_node_info *a, const struct gs_node_info *b)
{
    if (d->gpu_count ? a->gpu_milli_free != b->gpu_milli_free : a->cpu_alloc - a->cpu_used != b->cpu_alloc - b->cpu_used)
        return d->gpu_count ? a->gpu_milli_free < b->gpu_milli_free : a->cpu_alloc - a->cpu_used < b->cpu_alloc - b->cpu_used;
    return a->idx < b->idx;
}

/* Every live, schedulable node of the domain through the filters; *best the
 * first in packing order among those that pass (NULL none). 0, or -1. */
static int place_by_node(struct gang_state *s, const struct gs_pod *pod, const char *dkey, const char *domain,
                         struct gs_node_info **best)
{
    struct gs_cache *c = s->h.cache;
    struct gs_node_info **nodes = s->nodes;
    size_t n = 0;
    const char *const *dv = domain ? gs__gang_node_domains(s->g, dkey) : NULL;
    for (int32_t i = 0, slots = gs_cache_node_count(c); i < slots; i++) {
        struct gs_node_info *ni = gs_cache_node(c, i);
        if (ni->live && ni->schedulable && in_plan_domain(ni, dv, dkey, domain)) nodes[n++] = ni;
    }
    struct gs_filter_run run = {.nodes = nodes, .n = n, .reject = s->rej, .skip = NAME};
    if (gs_framework_run_filters(s->h.fw, pod, &run) <= 0) return -1;
    for (size_t i = 0; i < n; i++)
        if (!s->rej[i] && (!*best || packs_before(&pod->demand, nodes[i], *best))) *best = nodes[i];
    return 0;
}

/* The same choice on one representative per node class (sched/nodeclass.h):
 * members of a class hold equal free amounts and labels but the hostname,
 * and when every Filter that runs is class-aware they get the same
 * verdicts, so the first node in packing order is the lowest member (the
 * representative) of the best class. 0 (*best NULL when nothing passes), or
 * -1 when this pod or domain cannot go by class (then place_by_node). */
static int place_by_class(struct gang_state *s, const struct gs_pod *pod, const char *dkey, const char *domain,
                          struct gs_node_info **best)
{
    struct gs_cache *c = s->h.cache;
    if (domain && !strcmp(dkey, GS_CLASS_IGNORED_LABEL)) return -1; /* a class has no hostname */
    enum gs_node_classes mode = gs_framework_node_classes(s->h.fw);
    if (mode == GS_CLASSES_OFF) return -1;
    struct gs_nodeclasses *x = gs_cache_classes(c);
    if (!x) return -1;
    size_t nc = gs_nodeclass_count(x);
    /* Nearly a class per node: by node is cheaper. Either way, the same node. */
    if (mode == GS_CLASSES_AUTO && nc * 4 > (size_t)gs_cache_node_count(c) * 3) return -1;
    struct gs_node_info **nodes = s->nodes;
    size_t n = 0;
    const char *const *dv = domain ? gs__gang_node_domains(s->g, dkey) : NULL;
    for (size_t k = 0; k < nc; k++) {
        struct gs_nodeclass cl = gs_nodeclass_get(x, k);
        struct gs_node_info *ni = gs_cache_node(c, cl.min);
        if (cl.schedulable && ni->live && in_plan_domain(ni, dv, dkey, domain)) nodes[n++] = ni;
    }
    struct gs_filter_run run = {.nodes = nodes, .n = n, .reject = s->rej, .skip = NAME, .classes = true};
    int ok = gs_framework_run_filters(s->h.fw, pod, &run);
    if (run.not_by_class) return -1;
    if (ok <= 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (!s->rej[i] && (!*best || packs_before(&pod->demand, nodes[i], *best))) *best = nodes[i];
    return 0;
}

static int place(void *ctx, const struct gs_pod *pod, const char *dkey, const char *domain, struct gs_assignment *a)
{
    struct gang_state *s = ctx;
    struct gs_cache *c = s->h.cache;
    int32_t slots = gs_cache_node_count(c), want = slots ? slots : 1;
    if (want > s->cap) {
        struct gs_node_info **nv = realloc(s->nodes, (size_t)want * sizeof *nv);
        if (!nv) return -1;
        s->nodes = nv;
        uint8_t *nr = realloc(s->rej, (size_t)want);
        if (!nr) return -1;
        s->rej = nr;
        s->cap = want;
    }
    struct gs_node_info *best = NULL;
    int by_class = place_by_class(s, pod, dkey, domain, &best);
    if (by_class < 0 && place_by_node(s, pod, dkey, domain, &best) != 0) return -1;
    if (!best) return -1;
    const struct gs_demand *d = &pod->demand;
    if (gs_pod_has_claims(pod)) { /* the plan includes its devices: later members see them taken */
        void *dra = gs_framework_plugin_state(s->h.fw, GS_DRA_PLUGIN_NAME);
        if (s->ndra_planned == s->dra_cap) {
            size_t cap = s->dra_cap ? s->dra_cap * 2 : 8;
            const struct gs_pod **v = realloc(s->dra_planned, cap * sizeof *v);
            if (!v) return -1;
            s->dra_planned = v, s->dra_cap = cap;
        }
        *a = (struct gs_assignment){best->idx, 0, 0, 0};
        if (!dra || gs_dra_plugin_plan(dra, pod, best, a)) return -1;
        s->dra_planned[s->ndra_planned++] = pod;
        return 0;
    }
    struct gs_gpu_choice ch;
    if (!gs_topo_choose(best, d->gpu_count, d->gpu_milli, d->gpu_mem_mib, ~0ULL, &ch)) return -1;
    *a = (struct gs_assignment){best->idx, ch.mask, d->gpu_count ? d->gpu_milli : 0, d->gpu_count ? d->gpu_mem_mib : 0};
    return 0;
}

/*--- Scheduling cycle ---*/

static bool grow_sibs(struct gang_state *s, size_t n)
{
    const struct gs_pod **v = realloc(s->sibs, n * sizeof *v);
    if (!v) return false;
    s->sibs = v, s->sibs_cap = n;
    return true;
}

static struct gs_status gang_pre_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    struct gang_state *s = state;
    struct gs_gang_group *gr = gs_gang_group_of(s->g, pod);
    if (gs_gang_planning(s->g) || !gr) return (struct gs_status){.code = GS_SKIP};
    struct gs_status st = gs_gang_admit(s->g, pod);
    if (st.code != GS_SUCCESS) return st;
    int32_t min = gs_gang_min_member(gr);
    bool started = gs_gang_placed(s->g, gr) >= (min > 0 ? min : 1);
    if (!started && s->h.fw && !gs_gang_plan_valid(s->g, pod)) {
        st = gs_gang_plan(s->g, pod, place, s);
        void *dra = s->ndra_planned ? gs_framework_plugin_state(s->h.fw, GS_DRA_PLUGIN_NAME) : NULL;
        for (size_t i = 0; i < s->ndra_planned; i++) gs_dra_plugin_unplan(dra, s->dra_planned[i]);
        s->ndra_planned = 0;
        if (st.code != GS_SUCCESS) return st;
    }
    struct cyc *c = calloc(1, sizeof *c);
    if (!c) return gs_status_make(GS_ERROR, "out of memory");
    c->planned = started ? -1 : gs_gang_planned_node(s->g, pod);
    c->domain_key = gs_gang_domain(s->g, pod, &c->required, &c->domain);
    if (gs_cycle_state_write(cs, KEY, c, NULL, free) != 0) return gs_status_make(GS_ERROR, "out of memory");
    return (struct gs_status){0};
}

static bool in_domain(const struct cyc *c, const struct gs_node_info *n)
{
    const char *v = gs_topo_domain(n, c->domain_key);
    return v && !strcmp(v, c->domain);
}

static void gang_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                        struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)state, (void)pod;
    const struct cyc *c = gs_cycle_state_read(cs, KEY);
    if (!c || !c->required || !c->domain) return;
    for (size_t i = 0; i < n; i++)
        if (!in_domain(c, nodes[i])) reject[i] = REJ_DOMAIN;
}

static int gang_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)state, (void)code;
    return snprintf(buf, len, "node(s) are outside the topology domain of pod group %s's placed members",
                    pod->pod_group ? pod->pod_group : "");
}

static void gang_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                       struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)state, (void)pod;
    const struct cyc *c = gs_cycle_state_read(cs, KEY);
    if (!c) return;
    for (size_t i = 0; i < n; i++) {
        if (nodes[i]->idx == c->planned) scores[i] = GS_MAX_SCORE;
        else if (c->domain && in_domain(c, nodes[i])) scores[i] = GS_MAX_SCORE / 2;
    }
}

static struct gs_status gang_reserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                     struct gs_node_info *node, struct gs_assignment *a)
{
    (void)cs, (void)a;
    struct gang_state *s = state;
    gs_gang_reserved(s->g, pod, node->idx);
    return (struct gs_status){0};
}

static void reject_siblings(struct gang_state *s, const struct gs_pod *pod, bool reserved)
{
    char **keys;
    size_t n = gs_gang_member_failed(s->g, pod, reserved, &keys);
    if (!n || !s->h.fw) {
        gs_gang_keys_free(keys, n);
        return;
    }
    char key[GS__KEY_MAX], why[GS__KEY_MAX + 64];
    gs__pod_key(pod, key, sizeof key);
    snprintf(why, sizeof why, "gang member %s failed", key);
    gs_gang_set_unwinding(s->g, pod, true);
    for (size_t i = 0; i < n; i++) gs_framework_reject(s->h.fw, keys[i], NAME, why);
    gs_gang_set_unwinding(s->g, pod, false);
    gs_gang_keys_free(keys, n);
}

static void gang_unreserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod, struct gs_node_info *node)
{
    (void)cs, (void)node;
    reject_siblings(state, pod, true);
}

/* Siblings backing off or parked would come back one by one, each too late
 * for the others' wait: bring them all to the active queue now, in one
 * batch (the queue then keeps them in place from one member's Permit to the
 * next; sched/queue.c "Batches"). */
static void activate_siblings(struct gang_state *s, const struct gs_pod *pod)
{
    struct gs_gang_group *gr = gs_gang_group_of(s->g, pod);
    if (!gr || (!s->h.activate && !s->h.activate_many)) return;
    const struct gs_pod *const *all;
    size_t n = gs_gang_members(gr, &all), k = 0;
    const uint8_t *placed = gs_gang_placed_flags(s->g, gr); /* the cache's answers, kept by the core */
    if (!s->h.activate_many || (n > s->sibs_cap && !grow_sibs(s, n))) {
        for (size_t i = 0; s->h.activate && i < n; i++)
            if (all[i] != pod && !placed[i]) s->h.activate(s->h.evict_ctx, all[i]);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (all[i] != pod && !placed[i]) s->sibs[k++] = all[i];
    if (k) s->h.activate_many(s->h.evict_ctx, s->sibs, k);
}

static struct gs_status gang_permit(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                    struct gs_node_info *node, int64_t *timeout_ns)
{
    (void)cs, (void)node;
    struct gang_state *s = state;
    char **allow;
    size_t n;
    enum gs_code code = gs_gang_permit(s->g, pod, timeout_ns, &allow, &n);
    for (size_t i = 0; i < n && s->h.fw; i++) gs_framework_allow(s->h.fw, allow[i], NAME);
    gs_gang_keys_free(allow, n);
    if (code == GS_WAIT) {
        activate_siblings(s, pod);
        return gs_status_make(GS_WAIT, "waiting for the rest of the pod group");
    }
    return (struct gs_status){0};
}

static struct gs_status gang_post_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                         const struct gs_diagnosis *diag, struct gs_post_filter_result *res)
{
    (void)cs, (void)diag, (void)res;
    struct gang_state *s = state;
    if (!gs_gang_group_of(s->g, pod)) return (struct gs_status){.code = GS_SKIP};
    reject_siblings(s, pod, false);
    return gs_status_make(GS_UNSCHEDULABLE, "pod group member could not be placed");
}

static void gang_on_pod(void *state, const struct gs_pod *pod, bool added)
{
    struct gang_state *s = state;
    if (added) gs_gang_add_pod(s->g, pod);
    else gs_gang_remove_pod(s->g, pod);
}

static void gang_on_podgroup(void *state, const struct gs_podgroup *pg, bool added)
{
    struct gang_state *s = state;
    if (added) gs_gang_add_podgroup(s->g, pg);
    else gs_gang_remove_podgroup(s->g, pg);
}

/* Filter and Score read a node's domain label and, for a planned member, its
 * index: by class unless the domain label is the hostname (left out of a
 * class). A planned member's node is the one node Score tells apart from its
 * class: the framework judges it on its own (gs_framework_class_apart). */
static bool gang_by_class(void *state, const struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)pod;
    struct gang_state *s = state;
    const struct cyc *c = gs_cycle_state_read(cs, KEY);
    if (!c) return true; /* not a member: no verdict, no score */
    if (c->domain && c->domain_key && !strcmp(c->domain_key, GS_CLASS_IGNORED_LABEL)) return false;
    if (c->planned >= 0) {
        if (!s->h.fw) return false;
        gs_framework_class_apart(s->h.fw, c->planned);
    }
    return true;
}

const struct gs_plugin gs_plugin_coscheduling = {
    .name = NAME,
    .init = gang_init,
    .fini = gang_fini,
    .less = gang_less,
    .pre_filter = gang_pre_filter,
    .filter = gang_filter,
    .reason = gang_reason,
    .post_filter = gang_post_filter,
    .score = gang_score,
    .reserve = gang_reserve,
    .unreserve = gang_unreserve,
    .permit = gang_permit,
    .on_pod = gang_on_pod,
    .on_podgroup = gang_on_podgroup,
    .by_class = gang_by_class,
};
