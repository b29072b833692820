/*
 * profile.c - scheduler configuration: KubeSchedulerConfiguration-shaped
 * documents into struct gs_profile, and the built-in default profile.
 *
 * Merging follows kube-scheduler (mergePluginSet): for each point, start from
 * the default plugins minus the disabled ones ("*" drops them all); an
 * enabled plugin that is also a default replaces it in place (keeping the
 * order, taking its weight); other enabled plugins are appended. multiPoint
 * plugins are then added to every point they implement where they are not
 * already present or disabled.
 *
 * Every problem is reported with its field path so a user can find it:
 *   profiles[0].plugins.score.enabled[1].name: unknown plugin "Foo"
 * pluginConfig args are checked by starting the plugin once against an empty
 * cache, so bad args fail at parse time with their full path too.
 */
#include "sched/framework.h"
#include "core/codec.h" /* gs_sched_config_load */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_MAX_LEN 256

/* snprintf for field paths: truncation is acceptable (paths are for people). */
static void pathf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void pathf(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

/* The default profile: names per point, in order, with score weights. */
static const struct {
    enum gs_point pt;
    const char *name;
    int64_t weight;
} defaults[] = {
    {GS_PT_QUEUE_SORT, "PrioritySort", 0},
    {GS_PT_PRE_FILTER, "NodeUnschedulable", 0},
    {GS_PT_PRE_FILTER, "NodeResourcesFit", 0},
    {GS_PT_PRE_FILTER, "GpuShare", 0},
    {GS_PT_PRE_FILTER, "GpuModel", 0},
    {GS_PT_PRE_FILTER, "NodeAffinity", 0},
    {GS_PT_PRE_FILTER, "TaintToleration", 0},
    {GS_PT_PRE_FILTER, "InterPodAffinity", 0},
    {GS_PT_PRE_FILTER, "DynamicResources", 0},
    {GS_PT_FILTER, "NodeUnschedulable", 0},
    {GS_PT_FILTER, "NodeResourcesFit", 0},
    {GS_PT_FILTER, "GpuShare", 0},
    {GS_PT_FILTER, "GpuModel", 0},
    {GS_PT_FILTER, "NodeAffinity", 0},
    {GS_PT_FILTER, "TaintToleration", 0},
    {GS_PT_FILTER, "InterPodAffinity", 0},
    {GS_PT_FILTER, "DynamicResources", 0},
    {GS_PT_PRE_SCORE, "NodeAffinity", 0},
    {GS_PT_PRE_SCORE, "TaintToleration", 0},
    {GS_PT_PRE_SCORE, "InterPodAffinity", 0},
    {GS_PT_PRE_SCORE, "NodeResourcesBalancedAllocation", 0},
    /* kube-scheduler's default weights: TaintToleration 3, NodeAffinity 2,
     * InterPodAffinity 2, NodeResourcesFit 1, BalancedAllocation 1. */
    {GS_PT_SCORE, "NodeResourcesFit", 1},
    {GS_PT_SCORE, "NodeAffinity", 2},
    {GS_PT_SCORE, "TaintToleration", 3},
    {GS_PT_SCORE, "InterPodAffinity", 2},
    {GS_PT_SCORE, "NodeResourcesBalancedAllocation", 1},
    {GS_PT_RESERVE, "DynamicResources", 0}, /* before GpuShare: its GPUs are the pod's slots */
    {GS_PT_RESERVE, "GpuShare", 0},
    {GS_PT_PRE_BIND, "DynamicResources", 0},
    {GS_PT_BIND, "DefaultBinder", 0},
};

/* Does the plugin implement the point? */
static bool implements(const struct gs_plugin *p, enum gs_point pt)
{
    switch (pt) {
    case GS_PT_QUEUE_SORT: return p->less != NULL;
    case GS_PT_PRE_ENQUEUE: return p->pre_enqueue != NULL;
    case GS_PT_PRE_FILTER: return p->pre_filter != NULL;
    case GS_PT_FILTER: return p->filter != NULL;
    case GS_PT_POST_FILTER: return p->post_filter != NULL;
    case GS_PT_PRE_SCORE: return p->pre_score != NULL;
    case GS_PT_SCORE: return p->score != NULL;
    case GS_PT_RESERVE: return p->reserve != NULL || p->unreserve != NULL;
    case GS_PT_PERMIT: return p->permit != NULL;
    case GS_PT_PRE_BIND: return p->pre_bind != NULL;
    case GS_PT_BIND: return p->bind != NULL;
    case GS_PT_POST_BIND: return p->post_bind != NULL;
    default: return false;
    }
}

static void profile_defaults(struct gs_profile *p)
{
    memset(p->npoints, 0, sizeof p->npoints);
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
        const struct gs_plugin *pl = gs_plugin_lookup(defaults[i].name);
        /* A default that does not implement its point (e.g. no PreFilter) is simply not listed there. */
        if (!pl || !implements(pl, defaults[i].pt)) continue;
        int k = p->npoints[defaults[i].pt]++;
        p->points[defaults[i].pt][k] = (struct gs_profile_plugin){pl, defaults[i].weight ? defaults[i].weight : 1};
    }
}

static void profile_clear(struct gs_profile *p)
{
    free(p->scheduler_name);
    for (int i = 0; i < p->nargs; i++) json_decref(p->args[i]);
    memset(p, 0, sizeof *p);
}

void gs_sched_config_free(struct gs_sched_config *c)
{
    for (size_t i = 0; i < c->nprofiles; i++) profile_clear(&c->profiles[i]);
    free(c->profiles);
    c->profiles = NULL;
    c->nprofiles = 0;
}

int gs_sched_config_default(struct gs_sched_config *out)
{
    out->profiles = calloc(1, sizeof *out->profiles);
    if (!out->profiles) return GS_ENOMEM;
    out->nprofiles = 1;
    out->profiles[0].scheduler_name = strdup(GS_DEFAULT_SCHEDULER);
    if (!out->profiles[0].scheduler_name) {
        gs_sched_config_free(out);
        return GS_ENOMEM;
    }
    profile_defaults(&out->profiles[0]);
    return 0;
}

/*
 * The "gpusched" default the server runs: kube's default set plus gang
 * scheduling, NUMA/NVLink-aware placement, topology spread and preemption
 * (the set of examples/scheduler/gang-topology-scheduler.yaml), with
 * FGDLearn as the placement score (docs/SCHEDULING.md "The server's
 * placement"). The added plugins skip at PreFilter for a pod without a
 * group, a topology ask or spread constraints, so plain pods cost about what
 * they cost under the kube set. NodeResourceTopology's policy is none: only
 * a pod's gpusched.io/gpu-interconnect annotation or a node's NRT policy
 * constrains.
 *
 * Placement. FGDLearn (plugins/fgd_learn.c) packs against the fragmentation
 * of the workload it has seen; kube's two resource scorers spread
 * (NodeResourcesFit's LeastAllocated, BalancedAllocation's evenness), so
 * next to it they would pull the other way, and at any weight they break
 * its ties by spreading rather than by the lowest node index it was measured
 * with. They are off at Score (NodeResourcesFit still filters) and
 * BalancedAllocation at PreScore. FGDLearn has weight 1, its 0..100 score
 * below the user's own asks: NodeAffinity's and InterPodAffinity's
 * preferences, TaintToleration's PreferNoSchedule (kube's weights 2, 2, 3),
 * a gang's planned node (Coscheduling 10), a nomination (DefaultPreemption
 * 5), spread (PodTopologySpread 2) and interconnect (NodeResourceTopology
 * 3). NodeResourceTopology's leaveFlatNodes: on a node whose GPUs no
 * topology tells apart its compactness would be a second packing score and
 * its GPU choice a second packer, so there it scores 0 and leaves the GPUs
 * to FGDLearn. A pod without any of those asks, on such nodes, gets the same
 * score from each of them on every node, so its node is FGDLearn's first
 * choice and its GPUs FGDLearn's, as in the FGD
 * experiment (`sim --experiment fgd` without --policy runs this placement;
 * bench/RESULTS.md "Every policy on every openb variant"). Its Reserve comes
 * after NodeResourceTopology's and DynamicResources' (an interconnect ask or
 * a claim chooses the devices first) and before GpuShare's, so it picks the
 * GPUs of every other pod.
 */
static const char gpusched_profile[] =
    "{\"kind\":\"KubeSchedulerConfiguration\",\"profiles\":[{\"schedulerName\":\"" GS_DEFAULT_SCHEDULER "\","
    "\"plugins\":{"
    "\"queueSort\":{\"enabled\":[{\"name\":\"Coscheduling\"}],\"disabled\":[{\"name\":\"*\"}]},"
    "\"preFilter\":{\"enabled\":[{\"name\":\"Coscheduling\"},{\"name\":\"PodTopologySpread\"},"
    "{\"name\":\"NodeResourceTopology\"}]},"
    "\"filter\":{\"enabled\":[{\"name\":\"Coscheduling\"},{\"name\":\"PodTopologySpread\"},"
    "{\"name\":\"NodeResourceTopology\"},{\"name\":\"DefaultPreemption\"}]},"
    "\"postFilter\":{\"enabled\":[{\"name\":\"DefaultPreemption\"},{\"name\":\"Coscheduling\"}]},"
    "\"preScore\":{\"enabled\":[{\"name\":\"FGDLearn\"}],"
    "\"disabled\":[{\"name\":\"NodeResourcesBalancedAllocation\"}]},"
    "\"score\":{\"enabled\":[{\"name\":\"FGDLearn\",\"weight\":1},"
    "{\"name\":\"Coscheduling\",\"weight\":10},{\"name\":\"NodeResourceTopology\",\"weight\":3},"
    "{\"name\":\"PodTopologySpread\",\"weight\":2},{\"name\":\"DefaultPreemption\",\"weight\":5}],"
    "\"disabled\":[{\"name\":\"NodeResourcesFit\"},{\"name\":\"NodeResourcesBalancedAllocation\"}]},"
    "\"reserve\":{\"enabled\":[{\"name\":\"NodeResourceTopology\"},{\"name\":\"DynamicResources\"},"
    "{\"name\":\"FGDLearn\"},{\"name\":\"GpuShare\"},"
    "{\"name\":\"Coscheduling\"},{\"name\":\"DefaultPreemption\"}],\"disabled\":[{\"name\":\"*\"}]},"
    "\"permit\":{\"enabled\":[{\"name\":\"Coscheduling\"}]}},"
    "\"pluginConfig\":["
    "{\"name\":\"Coscheduling\",\"args\":{\"permitWaitingTimeSeconds\":60,\"podGroupRejectPercentage\":0,"
    "\"wholeGroupPlan\":true}},"
    "{\"name\":\"NodeResourceTopology\",\"args\":{\"topologyManagerPolicy\":\"none\","
    "\"topologyManagerScope\":\"container\",\"leaveFlatNodes\":true}},"
    "{\"name\":\"DefaultPreemption\",\"args\":{\"maxPreemptionsPerWindow\":3,\"preemptionWindowSeconds\":600}}"
    "]}]}";

int gs_sched_config_gpusched(struct gs_sched_config *out)
{
    memset(out, 0, sizeof *out);
    json_t *doc = json_loads(gpusched_profile, 0, NULL);
    if (!doc) return GS_ENOMEM;
    struct gs_diags d = {0};
    int err = gs_sched_config_parse(doc, out, &d);
    gs_diags_free(&d);
    json_decref(doc);
    return err;
}

int gs_sched_config_load(const char *path, struct gs_sched_config *out, struct gs_diags *d)
{
    memset(out, 0, sizeof *out);
    char *buf = NULL;
    size_t len = 0;
    int err = gs_read_file(path, &buf, &len);
    struct gs_docs docs = {0};
    if (!err) err = gs_decode_stream(buf, len, &docs, d, NULL);
    free(buf);
    if (!err && docs.n != 1) {
        gs_diags_add(d, path, "want one KubeSchedulerConfiguration document, found %zu", docs.n);
        err = GS_EINVAL;
    }
    if (!err) err = gs_sched_config_parse(docs.docs[0], out, d);
    gs_docs_free(&docs);
    if (err == GS_ENOENT) gs_diags_add(d, path, "file not found");
    return err;
}

const struct gs_profile *gs_sched_config_profile(const struct gs_sched_config *c, const char *scheduler_name)
{
    if (!scheduler_name) scheduler_name = GS_DEFAULT_SCHEDULER;
    for (size_t i = 0; i < c->nprofiles; i++)
        if (strcmp(c->profiles[i].scheduler_name, scheduler_name) == 0) return &c->profiles[i];
    return NULL;
}

/*--- Parsing ---*/

struct entry {
    const struct gs_plugin *pl;
    int64_t weight;
};

/* Parses one {name, weight} list; 0 or GS_EINVAL. */
static int parse_list(const json_t *arr, const char *path, enum gs_point pt, bool check_point, struct entry *out,
                      int *n, bool allow_star, bool *star, struct gs_diags *d)
{
    *n = 0;
    if (!arr) return 0;
    if (!json_is_array(arr)) {
        gs_diags_add(d, path, "must be a list of plugins");
        return GS_EINVAL;
    }
    int err = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(arr, i, e) {
        char p[PATH_MAX_LEN];
        const char *name = json_string_value(json_object_get(e, "name"));
        pathf(p, sizeof p, "%s[%zu].name", path, i);
        if (!name) {
            gs_diags_add(d, p, "required");
            err = GS_EINVAL;
            continue;
        }
        if (allow_star && strcmp(name, "*") == 0) {
            *star = true;
            continue;
        }
        const struct gs_plugin *pl = gs_plugin_lookup(name);
        if (!pl) {
            gs_diags_add(d, p, "unknown plugin \"%s\"", name);
            err = GS_EINVAL;
            continue;
        }
        if (check_point && !implements(pl, pt)) {
            gs_diags_add(d, p, "plugin \"%s\" does not implement %s", name, gs_point_name(pt));
            err = GS_EINVAL;
            continue;
        }
        int64_t weight = 1;
        const json_t *w = json_object_get(e, "weight");
        if (w) {
            pathf(p, sizeof p, "%s[%zu].weight", path, i);
            if (!json_is_integer(w) || json_integer_value(w) < 0 || json_integer_value(w) > 100) {
                gs_diags_add(d, p, "must be an integer between 0 and 100");
                err = GS_EINVAL;
                continue;
            }
            /* kube: weight 0 means "not set" and takes the default 1. */
            weight = json_integer_value(w) ? json_integer_value(w) : 1;
        }
        if (*n == GS_MAX_PLUGINS_PER_POINT) {
            gs_diags_add(d, path, "at most %d plugins per extension point", GS_MAX_PLUGINS_PER_POINT);
            return GS_EINVAL;
        }
        out[(*n)++] = (struct entry){pl, weight};
    }
    return err;
}

static int find_in(const struct gs_profile *p, enum gs_point pt, const struct gs_plugin *pl)
{
    for (int i = 0; i < p->npoints[pt]; i++)
        if (p->points[pt][i].plugin == pl) return i;
    return -1;
}

static bool listed(const struct entry *v, int n, const struct gs_plugin *pl)
{
    for (int i = 0; i < n; i++)
        if (v[i].pl == pl) return true;
    return false;
}

/* kube's mergePluginSet for one point. */
static int merge_point(struct gs_profile *p, enum gs_point pt, const json_t *set, const char *path,
                       struct gs_diags *d)
{
    struct entry en[GS_MAX_PLUGINS_PER_POINT], dis[GS_MAX_PLUGINS_PER_POINT];
    int nen = 0, ndis = 0;
    bool star = false;
    char sub[PATH_MAX_LEN];
    if (!json_is_object(set)) {
        gs_diags_add(d, path, "must be an object with enabled and disabled lists");
        return GS_EINVAL;
    }
    const char *key;
    const json_t *v;
    int err = 0;
    json_object_foreach((json_t *)set, key, v) {
        if (strcmp(key, "enabled") && strcmp(key, "disabled")) {
            pathf(sub, sizeof sub, "%s.%s", path, key);
            gs_diags_add(d, sub, "unknown field (want enabled or disabled)");
            err = GS_EINVAL;
        }
    }
    pathf(sub, sizeof sub, "%s.enabled", path);
    err |= parse_list(json_object_get(set, "enabled"), sub, pt, true, en, &nen, false, NULL, d);
    pathf(sub, sizeof sub, "%s.disabled", path);
    err |= parse_list(json_object_get(set, "disabled"), sub, pt, false, dis, &ndis, true, &star, d);
    if (err) return GS_EINVAL;
    for (int i = 0; i < nen; i++)
        for (int j = 0; j < i; j++)
            if (en[i].pl == en[j].pl) {
                pathf(sub, sizeof sub, "%s.enabled[%d].name", path, i);
                gs_diags_add(d, sub, "plugin \"%s\" listed twice", en[i].pl->name);
                return GS_EINVAL;
            }
    struct gs_profile_plugin merged[GS_MAX_PLUGINS_PER_POINT];
    bool used[GS_MAX_PLUGINS_PER_POINT] = {0};
    int nm = 0;
    for (int i = 0; !star && i < p->npoints[pt]; i++) {
        struct gs_profile_plugin def = p->points[pt][i];
        if (listed(dis, ndis, def.plugin)) continue;
        for (int j = 0; j < nen; j++)
            if (en[j].pl == def.plugin) {
                def.weight = en[j].weight;
                used[j] = true;
            }
        merged[nm++] = def;
    }
    for (int j = 0; j < nen; j++) {
        if (used[j]) continue;
        if (nm == GS_MAX_PLUGINS_PER_POINT) {
            gs_diags_add(d, path, "at most %d plugins per extension point", GS_MAX_PLUGINS_PER_POINT);
            return GS_EINVAL;
        }
        merged[nm++] = (struct gs_profile_plugin){en[j].pl, en[j].weight};
    }
    memcpy(p->points[pt], merged, (size_t)nm * sizeof merged[0]);
    p->npoints[pt] = nm;
    return 0;
}

static int parse_point_name(const char *key, enum gs_point *pt)
{
    for (int i = 0; i < GS_PT_COUNT; i++)
        if (strcmp(gs_point_name((enum gs_point)i), key) == 0) {
            *pt = (enum gs_point)i;
            return 0;
        }
    return GS_EINVAL;
}

static int apply_multipoint(struct gs_profile *p, const json_t *mp, const json_t *plugins, const char *path,
                            struct gs_diags *d)
{
    struct entry en[GS_MAX_PLUGINS_PER_POINT];
    int nen = 0;
    char sub[PATH_MAX_LEN];
    if (!json_is_object(mp)) {
        gs_diags_add(d, path, "must be an object with an enabled list");
        return GS_EINVAL;
    }
    pathf(sub, sizeof sub, "%s.enabled", path);
    if (parse_list(json_object_get(mp, "enabled"), sub, GS_PT_COUNT, false, en, &nen, false, NULL, d) != 0)
        return GS_EINVAL;
    for (int pt = 0; pt < GS_PT_COUNT; pt++) {
        struct entry dis[GS_MAX_PLUGINS_PER_POINT];
        int ndis = 0;
        bool star = false;
        const json_t *set = json_object_get(plugins, gs_point_name((enum gs_point)pt));
        if (set && parse_list(json_object_get(set, "disabled"), "", (enum gs_point)pt, false, dis, &ndis, true, &star,
                              NULL) != 0)
            ndis = 0;
        for (int j = 0; j < nen; j++) {
            if (!implements(en[j].pl, (enum gs_point)pt) || listed(dis, ndis, en[j].pl)) continue;
            int at = find_in(p, (enum gs_point)pt, en[j].pl);
            if (at >= 0) continue;
            if (p->npoints[pt] == GS_MAX_PLUGINS_PER_POINT) {
                gs_diags_add(d, path, "at most %d plugins per extension point", GS_MAX_PLUGINS_PER_POINT);
                return GS_EINVAL;
            }
            p->points[pt][p->npoints[pt]++] = (struct gs_profile_plugin){en[j].pl, en[j].weight};
        }
    }
    return 0;
}

static int parse_plugins(struct gs_profile *p, const json_t *plugins, const char *path, struct gs_diags *d)
{
    char sub[PATH_MAX_LEN];
    if (!json_is_object(plugins)) {
        gs_diags_add(d, path, "must be an object keyed by extension point");
        return GS_EINVAL;
    }
    int err = 0;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)plugins, key, v) {
        pathf(sub, sizeof sub, "%s.%s", path, key);
        enum gs_point pt;
        if (strcmp(key, "multiPoint") == 0) continue;
        if (parse_point_name(key, &pt) != 0) {
            gs_diags_add(d, sub, "unknown extension point \"%s\"", key);
            err = GS_EINVAL;
            continue;
        }
        if (merge_point(p, pt, v, sub, d) != 0) err = GS_EINVAL;
    }
    const json_t *mp = json_object_get(plugins, "multiPoint");
    if (!err && mp) {
        pathf(sub, sizeof sub, "%s.multiPoint", path);
        err = apply_multipoint(p, mp, plugins, sub, d);
    }
    return err;
}

/* Starts the plugin once on an empty cache to validate its args. */
static int check_args(const struct gs_plugin *pl, const json_t *args, const char *path, struct gs_diags *d)
{
    if (!pl->init) return 0;
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_cache *cache = gs_cache_new(&clock);
    if (!cache) return GS_ENOMEM;
    struct gs_handle h = {.clock = &clock, .cache = cache, .seed = 0, .fw = NULL};
    struct gs_diags local = {0};
    void *state = NULL;
    int err = pl->init(&h, args, &state, &local);
    if (!err && pl->fini) pl->fini(state);
    for (size_t i = 0; i < local.n; i++) {
        char sub[PATH_MAX_LEN];
        pathf(sub, sizeof sub, "%s.%s", path, local.v[i].path);
        gs_diags_add(d, sub, "%s", local.v[i].msg);
    }
    if (err && !local.n) gs_diags_add(d, path, "rejected by plugin %s: %s", pl->name, gs_strerror(err));
    gs_diags_free(&local);
    gs_cache_free(cache);
    return err ? GS_EINVAL : 0;
}

static int parse_plugin_config(struct gs_profile *p, const json_t *pc, const char *path, struct gs_diags *d)
{
    if (!json_is_array(pc)) {
        gs_diags_add(d, path, "must be a list of {name, args}");
        return GS_EINVAL;
    }
    int err = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(pc, i, e) {
        char sub[PATH_MAX_LEN];
        pathf(sub, sizeof sub, "%s[%zu].name", path, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        const struct gs_plugin *pl = name ? gs_plugin_lookup(name) : NULL;
        if (!pl) {
            gs_diags_add(d, sub, name ? "unknown plugin \"%s\"" : "required%s", name ? name : "");
            err = GS_EINVAL;
            continue;
        }
        for (int k = 0; k < p->nargs; k++)
            if (strcmp(p->args_names[k], pl->name) == 0) {
                gs_diags_add(d, sub, "plugin \"%s\" configured twice", name);
                err = GS_EINVAL;
            }
        if (err) continue;
        json_t *args = json_object_get(e, "args");
        pathf(sub, sizeof sub, "%s[%zu]", path, i);
        if (args && check_args(pl, args, sub, d) != 0) {
            err = GS_EINVAL;
            continue;
        }
        if (p->nargs == (int)(sizeof p->args / sizeof p->args[0])) {
            gs_diags_add(d, path, "too many entries");
            return GS_EINVAL;
        }
        p->args_names[p->nargs] = pl->name;
        p->args[p->nargs++] = json_incref(args);
    }
    return err;
}

static int check_profile(const struct gs_profile *p, const char *path, struct gs_diags *d)
{
    char sub[PATH_MAX_LEN];
    pathf(sub, sizeof sub, "%s.plugins.queueSort", path);
    if (p->npoints[GS_PT_QUEUE_SORT] != 1) {
        gs_diags_add(d, sub, "exactly one queueSort plugin is required, got %d", p->npoints[GS_PT_QUEUE_SORT]);
        return GS_EINVAL;
    }
    pathf(sub, sizeof sub, "%s.plugins.bind", path);
    if (p->npoints[GS_PT_BIND] < 1) {
        gs_diags_add(d, sub, "at least one bind plugin is required");
        return GS_EINVAL;
    }
    return 0;
}

static int parse_profile(struct gs_profile *p, const json_t *o, const char *path, struct gs_diags *d)
{
    char sub[PATH_MAX_LEN];
    if (!json_is_object(o)) {
        gs_diags_add(d, path, "must be an object");
        return GS_EINVAL;
    }
    int err = 0;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        if (strcmp(key, "schedulerName") && strcmp(key, "plugins") && strcmp(key, "pluginConfig") &&
            strcmp(key, "percentageOfNodesToScore")) {
            pathf(sub, sizeof sub, "%s.%s", path, key);
            gs_diags_add(d, sub, "unknown field");
            err = GS_EINVAL;
        }
    }
    const json_t *sn = json_object_get(o, "schedulerName");
    if (sn && (!json_is_string(sn) || !json_string_length(sn))) {
        pathf(sub, sizeof sub, "%s.schedulerName", path);
        gs_diags_add(d, sub, "must be a non-empty string");
        err = GS_EINVAL;
    }
    p->scheduler_name = strdup(sn && json_is_string(sn) ? json_string_value(sn) : GS_DEFAULT_SCHEDULER);
    if (!p->scheduler_name) return GS_ENOMEM;
    profile_defaults(p);
    const json_t *plugins = json_object_get(o, "plugins");
    pathf(sub, sizeof sub, "%s.plugins", path);
    if (plugins && parse_plugins(p, plugins, sub, d) != 0) err = GS_EINVAL;
    const json_t *pc = json_object_get(o, "pluginConfig");
    pathf(sub, sizeof sub, "%s.pluginConfig", path);
    if (pc && parse_plugin_config(p, pc, sub, d) != 0) err = GS_EINVAL;
    if (!err) err = check_profile(p, path, d);
    return err;
}

int gs_sched_config_parse(const json_t *doc, struct gs_sched_config *out, struct gs_diags *d)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(doc)) {
        gs_diags_add(d, "", "scheduler configuration must be an object");
        return GS_EINVAL;
    }
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    if (json_object_get(doc, "kind") && (!kind || strcmp(kind, "KubeSchedulerConfiguration") != 0)) {
        gs_diags_add(d, "kind", "must be KubeSchedulerConfiguration");
        return GS_EINVAL;
    }
    const json_t *profiles = json_object_get(doc, "profiles");
    if (!profiles) return gs_sched_config_default(out);
    if (!json_is_array(profiles) || !json_array_size(profiles)) {
        gs_diags_add(d, "profiles", "must be a non-empty list");
        return GS_EINVAL;
    }
    out->profiles = calloc(json_array_size(profiles), sizeof *out->profiles);
    if (!out->profiles) return GS_ENOMEM;
    int err = 0;
    size_t i;
    const json_t *o;
    json_array_foreach(profiles, i, o) {
        char path[PATH_MAX_LEN];
        pathf(path, sizeof path, "profiles[%zu]", i);
        out->nprofiles = i + 1;
        int e = parse_profile(&out->profiles[i], o, path, d);
        if (e == GS_ENOMEM) {
            gs_sched_config_free(out);
            return e;
        }
        if (e) err = GS_EINVAL;
        for (size_t j = 0; !e && j < i; j++)
            if (out->profiles[j].scheduler_name &&
                strcmp(out->profiles[j].scheduler_name, out->profiles[i].scheduler_name) == 0) {
                pathf(path, sizeof path, "profiles[%zu].schedulerName", i);
                gs_diags_add(d, path, "duplicate schedulerName \"%s\"", out->profiles[i].scheduler_name);
                err = GS_EINVAL;
            }
    }
    if (err) gs_sched_config_free(out);
    return err;
}
