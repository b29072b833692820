/*
 * labels.h - labels, label selectors, node affinity, taints and tolerations.
 *
 * Everything here follows Kubernetes' semantics exactly, because users bring
 * manifests written for kube-scheduler:
 *  - a label selector is an AND of requirements; matchLabels k: v becomes
 *    "k In (v)"; In/NotIn/Exists/DoesNotExist/Gt/Lt as in nodeSelectorTerms
 *    (NotIn and DoesNotExist match when the key is absent; Gt/Lt compare the
 *    value as a base-10 int64 and do not match when it is absent or not a number);
 *  - required node affinity is an OR of terms, each an AND; an empty term list
 *    matches nothing, an empty term matches nothing (kube's rule);
 *  - a toleration with empty key and operator Exists tolerates every taint; an
 *    empty effect tolerates every effect.
 * Label sets are sorted by key so lookups are binary searches.
 */
#ifndef GS_CORE_LABELS_H
#define GS_CORE_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_kv {
    char *key;
    char *value;
};

/* A set of key/value strings sorted by key (labels, annotations, nodeSelector). Owns its strings. */
struct gs_labels {
    struct gs_kv *v;
    size_t n;
};

/* Value for key, or NULL. Borrowed from the set. */
const char *gs_labels_get(const struct gs_labels *l, const char *key);
/* Inserts or replaces key (copies both). Keeps the set sorted. 0 or GS_ENOMEM. */
int gs_labels_set(struct gs_labels *l, const char *key, const char *value);
void gs_labels_free(struct gs_labels *l);
/* Checks a label key (optional DNS-subdomain prefix "/" name of <= 63 chars,
 * alphanumerics, '-', '_', '.') or value (<= 63 chars, may be empty). 0 or GS_EINVAL, *why static. */
int gs_label_key_check(const char *key, const char **why);
int gs_label_value_check(const char *value, const char **why);

enum gs_sel_op { GS_SEL_IN, GS_SEL_NOTIN, GS_SEL_EXISTS, GS_SEL_DOESNOTEXIST, GS_SEL_GT, GS_SEL_LT };

/* Parses "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt". 0 or GS_EINVAL. */
int gs_sel_op_parse(const char *s, enum gs_sel_op *op);
const char *gs_sel_op_name(enum gs_sel_op op);

struct gs_sel_req {
    char *key;
    enum gs_sel_op op;
    char **values;
    size_t nvalues;
};

/* AND of requirements. Empty selector matches everything. */
struct gs_selector {
    struct gs_sel_req *reqs;
    size_t n;
};

bool gs_sel_req_matches(const struct gs_sel_req *r, const struct gs_labels *l);
bool gs_selector_matches(const struct gs_selector *s, const struct gs_labels *l);
void gs_selector_free(struct gs_selector *s);

/* One nodeSelectorTerm: matchExpressions over labels, matchFields over
 * fields (only metadata.name is defined, as in Kubernetes). */
struct gs_node_selector_term {
    struct gs_selector match_expressions;
    struct gs_selector match_fields;
};

struct gs_preferred_term {
    int32_t weight; /* 1..100 */
    struct gs_node_selector_term term;
};

struct gs_node_affinity {
    bool has_required; /* requiredDuringSchedulingIgnoredDuringExecution present */
    struct gs_node_selector_term *required; /* OR of terms */
    size_t nrequired;
    struct gs_preferred_term *preferred;
    size_t npreferred;
};

/* Does the term match a node with these labels and this name? An empty term matches nothing. */
bool gs_node_term_matches(const struct gs_node_selector_term *t, const struct gs_labels *labels,
                          const char *node_name);
/* Required affinity: true when absent, else OR of terms. */
bool gs_node_affinity_required_matches(const struct gs_node_affinity *a, const struct gs_labels *labels,
                                       const char *node_name);
/* Sum of weights of the preferred terms that match. */
int64_t gs_node_affinity_preferred_score(const struct gs_node_affinity *a, const struct gs_labels *labels,
                                         const char *node_name);
void gs_node_affinity_free(struct gs_node_affinity *a);

enum gs_taint_effect {
    GS_EFFECT_ANY = 0, /* tolerations only: empty effect matches every effect */
    GS_EFFECT_NOSCHEDULE,
    GS_EFFECT_PREFERNOSCHEDULE,
    GS_EFFECT_NOEXECUTE,
};
/* "NoSchedule" | "PreferNoSchedule" | "NoExecute" ("" -> ANY when allow_any). 0 or GS_EINVAL. */
int gs_taint_effect_parse(const char *s, bool allow_any, enum gs_taint_effect *out);
const char *gs_taint_effect_name(enum gs_taint_effect e);

struct gs_taint {
    char *key;
    char *value; /* may be NULL */
    enum gs_taint_effect effect;
};

enum gs_tol_op { GS_TOL_EQUAL, GS_TOL_EXISTS };

struct gs_toleration {
    char *key; /* NULL/"" with EXISTS: every key */
    enum gs_tol_op op;
    char *value; /* NULL treated as "" */
    enum gs_taint_effect effect;
    bool has_seconds;
    int64_t toleration_seconds;
};

bool gs_toleration_tolerates(const struct gs_toleration *t, const struct gs_taint *taint);
/* First taint among taints[0..n) whose effect is in effect_mask (bit 1<<effect)
 * and that no toleration tolerates; NULL when all are tolerated. */
const struct gs_taint *gs_find_untolerated_taint(const struct gs_taint *taints, size_t ntaints,
                                                 const struct gs_toleration *tols, size_t ntols,
                                                 unsigned effect_mask);
/* Number of PreferNoSchedule taints not tolerated (TaintToleration's score input). */
size_t gs_count_intolerable_prefer(const struct gs_taint *taints, size_t ntaints,
                                   const struct gs_toleration *tols, size_t ntols);
void gs_taint_free(struct gs_taint *t);
void gs_toleration_free(struct gs_toleration *t);

#endif
