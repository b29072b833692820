/*
 * node_affinity.c - "NodeAffinity": nodeSelector and required node affinity
 * as a filter, preferred node affinity as a score.
 *
 * Label matching is Kubernetes' (labels.c). Pods without a selector or
 * required affinity skip Filter at PreFilter, and pods without preferred
 * terms skip Score at PreScore, so the common pod pays nothing per node. The
 * score is the sum of matching preferred weights, normalised so the best
 * node gets 100 (kube's DefaultNormalizeScore).
 */
#include "sched/nodeclass.h" /* GS_CLASS_IGNORED_LABEL */
#include "sched/plugin.h"

#include <stdio.h>
#include <string.h>

enum { REJ_AFFINITY = 1 | GS_REJECT_UNRESOLVABLE };

static struct gs_status na_pre_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)state, (void)cs;
    if (!pod->node_selector.n && !pod->node_affinity.has_required) return gs_status_make(GS_SKIP, NULL);
    return (struct gs_status){0};
}

static bool selector_matches(const struct gs_labels *sel, const struct gs_labels *labels)
{
    for (size_t i = 0; i < sel->n; i++) {
        const char *v = gs_labels_get(labels, sel->v[i].key);
        if (!v || strcmp(v, sel->v[i].value ? sel->v[i].value : "") != 0) return false;
    }
    return true;
}

static void na_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)state, (void)cs;
    for (size_t i = 0; i < n; i++) {
        const struct gs_node_info *ni = nodes[i];
        if (!selector_matches(&pod->node_selector, ni->labels) ||
            !gs_node_affinity_required_matches(&pod->node_affinity, ni->labels, ni->name))
            reject[i] = REJ_AFFINITY;
    }
}

static int na_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)state, (void)pod, (void)code;
    return snprintf(buf, len, "node(s) didn't match Pod's node affinity/selector");
}

static struct gs_status na_pre_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                     struct gs_node_info *const *nodes, size_t n)
{
    (void)state, (void)cs, (void)nodes, (void)n;
    if (!pod->node_affinity.npreferred) return gs_status_make(GS_SKIP, NULL);
    return (struct gs_status){0};
}

static struct gs_status na_pre_score_idx(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                         const int32_t *idx, size_t n)
{
    (void)idx;
    return na_pre_score(state, cs, pod, NULL, n);
}

static void na_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                     struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)state, (void)cs;
    for (size_t i = 0; i < n; i++)
        scores[i] = gs_node_affinity_preferred_score(&pod->node_affinity, nodes[i]->labels, nodes[i]->name);
}

static void na_normalize(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                         struct gs_node_info *const *nodes, int64_t *scores, size_t n)
{
    (void)state, (void)cs, (void)pod, (void)nodes;
    int64_t max = 0;
    for (size_t i = 0; i < n; i++)
        if (scores[i] > max) max = scores[i];
    if (!max) return;
    for (size_t i = 0; i < n; i++) scores[i] = GS_MAX_SCORE * scores[i] / max;
}

/* A selector naming the one label a class leaves out. */
static bool reads_ignored(const struct gs_selector *sel)
{
    for (size_t i = 0; i < sel->n; i++)
        if (!strcmp(sel->reqs[i].key, GS_CLASS_IGNORED_LABEL)) return true;
    return false;
}

static bool term_by_class(const struct gs_node_selector_term *t)
{
    return !t->match_fields.n && !reads_ignored(&t->match_expressions); /* matchFields: the node's name */
}

/* Labels are in a node's class, its name and hostname label are not. */
static bool na_by_class(void *state, const struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)state, (void)cs;
    if (gs_labels_get(&pod->node_selector, GS_CLASS_IGNORED_LABEL)) return false;
    const struct gs_node_affinity *a = &pod->node_affinity;
    for (size_t i = 0; i < a->nrequired; i++)
        if (!term_by_class(&a->required[i])) return false;
    for (size_t i = 0; i < a->npreferred; i++)
        if (!term_by_class(&a->preferred[i].term)) return false;
    return true;
}

const struct gs_plugin gs_plugin_node_affinity = {
    .name = "NodeAffinity",
    .by_class = na_by_class,
    .pre_filter = na_pre_filter,
    .filter = na_filter,
    .reason = na_reason,
    .pre_score = na_pre_score,
    .pre_score_idx = na_pre_score_idx,
    .score = na_score,
    .normalize_score = na_normalize,
};
