/*
 * decode.h - internal helpers shared by the object decoders (object.c,
 * pod.c, node.c, kinds.c). Not part of the public API.
 *
 * A decoder walks a json_t with a struct gs_dec that tracks the field path
 * of the value being read, so every problem lands in gs_diags under a path
 * such as spec.containers[0].resources.limits["nvidia.com/gpu"]. Getters
 * report wrong types themselves and return "absent", which lets a decoder
 * carry on and collect every problem of a document rather than the first.
 * A JSON null is treated as an absent field, as Kubernetes does.
 */
#ifndef GS_CORE_DECODE_H
#define GS_CORE_DECODE_H

#include "core/error.h"
#include "core/labels.h"
#include "core/object.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct gs_dec {
    struct gs_diags *d;
    char path[512];
    size_t len;
    size_t nerr; /* problems reported so far */
    bool oom;
};

void gs__dec_init(struct gs_dec *dc, struct gs_diags *d);
/* Push a path element; returns the previous length to give to gs__dec_pop. */
size_t gs__dec_key(struct gs_dec *dc, const char *key);
size_t gs__dec_idx(struct gs_dec *dc, size_t i);
void gs__dec_pop(struct gs_dec *dc, size_t mark);
/* Reports a problem at the current path (or at path.key). */
void gs__dec_err(struct gs_dec *dc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gs__dec_err_at(struct gs_dec *dc, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

const char *gs__json_type_name(const json_t *v);
/* Member key of obj when present, non-null and of type `type` (JSON_TRUE stands
 * for either boolean); NULL otherwise, reporting a wrong type. */
json_t *gs__dec_get(struct gs_dec *dc, const json_t *obj, const char *key, json_type type);
/* Same, for a value already in hand at the current path. */
bool gs__dec_is(struct gs_dec *dc, const json_t *v, json_type type);
/* Borrowed string member or NULL. */
const char *gs__dec_str(struct gs_dec *dc, const json_t *obj, const char *key);
/* strdup'd string member or NULL (also NULL when absent). */
char *gs__dec_strdup(struct gs_dec *dc, const json_t *obj, const char *key);
bool gs__dec_bool(struct gs_dec *dc, const json_t *obj, const char *key, bool *out);
/* Integer member in [min, max]; false when absent or invalid (invalid is reported). */
bool gs__dec_int(struct gs_dec *dc, const json_t *obj, const char *key, int64_t min, int64_t max, int64_t *out);
/* A quantity at the current path (string, integer or real); false when invalid. */
bool gs__dec_quantity(struct gs_dec *dc, const json_t *v, int64_t *milli);
bool gs__dec_quantity_at(struct gs_dec *dc, const json_t *obj, const char *key, int64_t *milli);
/* Milli-units as plain decimal text: 1500 -> "1.5", -1000 -> "-1". */
void gs__milli_text(int64_t milli, char *buf, size_t len);
/* A ResourceList member: name -> non-negative quantity. */
void gs__dec_resources(struct gs_dec *dc, const json_t *obj, const char *key, struct gs_resources *out);
/* A string map member (labels when check_label, annotations/plain maps otherwise). */
void gs__dec_labels(struct gs_dec *dc, const json_t *obj, const char *key, struct gs_labels *out,
                    bool check_label);
/* An array of strings. */
char **gs__dec_strv(struct gs_dec *dc, const json_t *obj, const char *key, size_t *n);
void gs__strv_free(char **v, size_t n);
/* A label selector {matchLabels, matchExpressions} member. */
void gs__dec_label_selector(struct gs_dec *dc, const json_t *obj, const char *key, struct gs_selector *out);
/* One nodeSelectorTerm at the current path. */
void gs__dec_node_term(struct gs_dec *dc, const json_t *t, struct gs_node_selector_term *out);
/* Taint list member (effect required) into out[0..n). */
void gs__dec_taints(struct gs_dec *dc, const json_t *obj, const char *key, struct gs_taint **out, size_t *n);
void gs__dec_tolerations(struct gs_dec *dc, const json_t *obj, const char *key, struct gs_toleration **out,
                         size_t *n);
/* metadata; namespaced kinds get "default" when no namespace is given. */
void gs__dec_meta(struct gs_dec *dc, const json_t *doc, bool namespaced, struct gs_meta *out);
/* Checks a DNS subdomain (<= 253) or DNS label (<= 63); NULL when fine, else why. */
const char *gs__dns_check(const char *s, bool label);
/* Value must be one of the NULL-terminated words; reports otherwise. */
bool gs__dec_enum(struct gs_dec *dc, const json_t *obj, const char *key, const char *const *words, const char **out);

/* spec.affinity.podAffinity / podAntiAffinity of p (pod_affinity.c): spec
 * is the pod's spec at the current path; p->meta.labels must be decoded. */
void gs__dec_pod_affinity(struct gs_dec *dc, const json_t *spec, struct gs_pod *p);
void gs__pod_affinity_free(struct gs_pod_affinity *a);

/* Generic kinds (kinds.c). */
int gs__podgroup_decode(json_t *doc, struct gs_podgroup *out, struct gs_dec *dc);
int gs__queue_decode(json_t *doc, struct gs_queue *out, struct gs_dec *dc);
void gs__podgroup_clear(struct gs_podgroup *p);
void gs__queue_clear(struct gs_queue *q);
/* Typed checks for kinds kept as struct gs_generic. */
void gs__generic_validate(enum gs_kind k, const char *api_version, const json_t *doc, struct gs_dec *dc);
/* The resource.k8s.io kinds (kinds_dra.c): spec (the path at "spec"), and a claim's status. */
void gs__dra_validate(enum gs_kind k, const char *api_version, const json_t *spec, struct gs_dec *dc);
void gs__dra_validate_status(enum gs_kind k, const json_t *doc, struct gs_dec *dc);
/* Is this kind namespaced? */
bool gs__kind_namespaced(enum gs_kind k);

/* Typed decoders at an existing context (pod.c, node.c). */
int gs__pod_decode(json_t *doc, struct gs_pod *out, struct gs_dec *dc);
int gs__node_decode(json_t *doc, struct gs_node *out, struct gs_dec *dc);

/* Documents synthesised for objects built in memory (doc == NULL). New references. */
json_t *gs__meta_to_json(const struct gs_meta *m);
json_t *gs__pod_to_json(const struct gs_pod *p);
json_t *gs__node_to_json(const struct gs_node *n);
json_t *gs__resources_to_json(const struct gs_resources *r);

#endif
