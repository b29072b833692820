/*
 * taint_toleration.c - "TaintToleration": NoSchedule / NoExecute taints the
 * pod does not tolerate keep it off a node; PreferNoSchedule taints it does
 * not tolerate lower the node's score.
 *
 * The diagnosis names the taint, as kube does ("node(s) had untolerated taint
 * {key: value}"), but a Filter verdict is a one-byte code. So the plugin
 * keeps a table of the distinct (key, value) pairs it has rejected on and
 * uses the row number as the code; past the table's 126 rows the generic
 * wording is used. Nodes without taints (and nodes built without an object,
 * which have none) cost one load each.
 *
 * When the cluster has no tainted node at all (the cache counts them) both
 * Filter and Score are skipped at PreFilter / PreScore.
 *
 * Score counts untolerated PreferNoSchedule taints and normalises in reverse
 * (fewest taints = 100), kube's DefaultNormalizeScore(reverse=true).
 */
#include "sched/plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 126

struct tt {
    struct gs_cache *cache;
    struct {
        char *key, *value;
    } rows[MAX_ROWS];
    int nrows;
};

enum { REJ_GENERIC = 127 };

static int tt_init(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)
{
    (void)args, (void)d;
    struct tt *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->cache = h->cache;
    *state = s;
    return 0;
}

/* Without tainted nodes there is nothing to filter and every score would be equal. */
static struct gs_status tt_pre_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)cs, (void)pod;
    const struct tt *s = state;
    if (!gs_cache_tainted_nodes(s->cache)) return gs_status_make(GS_SKIP, NULL);
    return (struct gs_status){0};
}

static struct gs_status tt_pre_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                     struct gs_node_info *const *nodes, size_t n)
{
    (void)nodes, (void)n;
    return tt_pre_filter(state, cs, pod);
}

static struct gs_status tt_pre_score_idx(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                         const int32_t *idx, size_t n)
{
    (void)idx, (void)n;
    return tt_pre_filter(state, cs, pod);
}

static void tt_fini(void *state)
{
    struct tt *s = state;
    if (!s) return;
    for (int i = 0; i < s->nrows; i++) {
        free(s->rows[i].key);
        free(s->rows[i].value);
    }
    free(s);
}

static uint8_t taint_code(struct tt *s, const struct gs_taint *t)
{
    const char *v = t->value ? t->value : "";
    for (int i = 0; i < s->nrows; i++)
        if (!strcmp(s->rows[i].key, t->key) && !strcmp(s->rows[i].value, v)) return (uint8_t)(i + 1);
    if (s->nrows == MAX_ROWS) return REJ_GENERIC;
    char *k = strdup(t->key), *val = strdup(v);
    if (!k || !val) {
        free(k);
        free(val);
        return REJ_GENERIC;
    }
    s->rows[s->nrows].key = k;
    s->rows[s->nrows].value = val;
    return (uint8_t)(++s->nrows);
}

static void tt_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)cs;
    const unsigned mask = (1u << GS_EFFECT_NOSCHEDULE) | (1u << GS_EFFECT_NOEXECUTE);
    for (size_t i = 0; i < n; i++) {
        const struct gs_node *node = nodes[i]->node;
        if (!node || !node->ntaints) continue;
        const struct gs_taint *t =
            gs_find_untolerated_taint(node->taints, node->ntaints, pod->tolerations, pod->ntolerations, mask);
        if (t) reject[i] = taint_code(state, t) | GS_REJECT_UNRESOLVABLE;
    }
}

static int tt_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)pod;
    const struct tt *s = state;
    int row = GS_REJECT_CODE(code) - 1;
    if (row < 0 || row >= s->nrows) return snprintf(buf, len, "node(s) had untolerated taint");
    return snprintf(buf, len, "node(s) had untolerated taint {%s: %s}", s->rows[row].key, s->rows[row].value);
}

static void tt_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                     struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)state, (void)cs;
    for (size_t i = 0; i < n; i++) {
        const struct gs_node *node = nodes[i]->node;
        scores[i] = node && node->ntaints ? (int64_t)gs_count_intolerable_prefer(node->taints, node->ntaints,
                                                                                  pod->tolerations, pod->ntolerations)
                                          : 0;
    }
}

static void tt_normalize(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                         struct gs_node_info *const *nodes, int64_t *scores, size_t n)
{
    (void)state, (void)cs, (void)pod, (void)nodes;
    int64_t max = 0;
    for (size_t i = 0; i < n; i++)
        if (scores[i] > max) max = scores[i];
    for (size_t i = 0; i < n; i++) scores[i] = max ? GS_MAX_SCORE - GS_MAX_SCORE * scores[i] / max : GS_MAX_SCORE;
}

const struct gs_plugin gs_plugin_taint_toleration = {
    .name = "TaintToleration",
    .by_class = gs_plugin_by_class_always, /* reads of a node only what its class holds */
    .init = tt_init,
    .fini = tt_fini,
    .pre_filter = tt_pre_filter,
    .filter = tt_filter,
    .reason = tt_reason,
    .pre_score = tt_pre_score,
    .pre_score_idx = tt_pre_score_idx,
    .score = tt_score,
    .normalize_score = tt_normalize,
};
