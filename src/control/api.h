/*
 * api.h - pieces of the Kubernetes API the server is made of, kept apart
 * from HTTP so they can be tested and fuzzed alone (internal header).
 *
 *  - api_query.c: label and field selectors in their URL text form
 *    ("app=web,tier in (a,b),!canary", "spec.nodeName=n1"), and merge
 *    patches: RFC 7386 JSON merge patch and the strategic merge patch kubectl
 *    sends for built-in kinds (lists merged by key, $patch directives);
 *  - api_docs.c: Status error objects, discovery documents, Table responses.
 */
#ifndef GS_CONTROL_API_H
#define GS_CONTROL_API_H

#include "control/resources.h"
#include "core/error.h"
#include "core/labels.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/*--- Selectors (api_query.c) ---*/

/* Offset of the first byte of s that is a control character (the server's
 * URL decoder turns %00 into one, see apiserver.c) or not part of valid
 * UTF-8; -1 when there is none. Such text is refused with 400 wherever it
 * arrives in a URL: it can name no object and cannot be put into JSON. */
long gs__text_bad_byte(const char *s);
/* s for a message: bytes that gs__text_bad_byte refuses written as \xNN; cut to fit len. */
const char *gs__text_printable(const char *s, char *buf, size_t len);

/* Parses a labelSelector. 0 or GS_EINVAL with *why (static) set. Free with gs_selector_free. */
int gs__label_selector_parse(const char *text, struct gs_selector *out, const char **why);
/* Does obj's metadata.labels satisfy sel? */
bool gs__label_selector_matches(const struct gs_selector *sel, const json_t *obj);

struct gs__field_req {
    char *path;  /* "spec.nodeName" */
    char *value;
    bool negate; /* != */
};
struct gs__field_sel {
    struct gs__field_req *v;
    size_t n;
};
/* Parses a fieldSelector ("a=b,c!=d", "==" accepted). 0 or GS_EINVAL. */
int gs__field_selector_parse(const char *text, struct gs__field_sel *out, const char **why);
/* Field values are compared as text; an absent field reads as "". */
bool gs__field_selector_matches(const struct gs__field_sel *sel, const json_t *obj);
void gs__field_selector_free(struct gs__field_sel *s);
/* Value at a dotted path as text ("" when absent); numbers and booleans spelled as JSON. */
const char *gs__json_path_text(const json_t *obj, const char *path, char *buf, size_t len);

/*--- Patches (api_query.c) ---*/

/* RFC 7386: returns a new value (target is not modified). NULL when out of memory. */
json_t *gs__merge_patch(const json_t *target, const json_t *patch);
/* Strategic merge patch as kubectl sends for built-in kinds: maps merge,
 * lists with a known merge key (containers by name, conditions by type, ...)
 * merge element-wise, "$patch": replace|delete, "$setElementOrder/x" and
 * "$retainKeys" accepted (order and retention are not enforced),
 * "$deleteFromPrimitiveList/x" removes values. New value or NULL. */
json_t *gs__strategic_merge_patch(const json_t *target, const json_t *patch);

/*--- Documents (api_docs.c) ---*/

struct gs__cause {
    const char *field;
    const char *message;
    const char *reason; /* "FieldValueInvalid" ... may be NULL */
};

/* A Status object: status Failure (or Success for code < 400), reason, message,
 * details {name, group, kind, causes}. New reference. */
json_t *gs__status(int code, const char *reason, const char *message, const struct gs_api_resource *res,
                   const char *name, const struct gs__cause *causes, size_t ncauses);
/* Reason for an HTTP code ("NotFound", "Conflict", ...). */
const char *gs__reason_for(int code);

json_t *gs__doc_version(void);
json_t *gs__doc_api_versions(void);
json_t *gs__doc_group_list(void);
/* APIGroup for one group; NULL when not served. */
json_t *gs__doc_group(const char *group);
/* APIResourceList for group ("" core) and version; NULL when not served. */
json_t *gs__doc_resource_list(const char *group, const char *version);

enum gs__include { GS_INCLUDE_METADATA, GS_INCLUDE_OBJECT, GS_INCLUDE_NONE };

/* A meta.k8s.io/v1 Table of objs (a JSON array) for res, with kubectl's
 * columns for pods and nodes and NAME/AGE for the rest. now: wall seconds. */
json_t *gs__table(const struct gs_api_resource *res, const json_t *objs, const char *list_rv, double now,
                  enum gs__include inc);
/* Age text as kubectl prints it ("45s", "12m", "3h", "5d"). */
void gs__age(const char *rfc3339, double now, char *buf, size_t len);

/*--- Protobuf bodies (api_proto.c) ---*/

/* A k8s protobuf body ("k8s\0" + runtime.Unknown) holding a DeleteOptions
 * or a policy Eviction, as the same JSON object the JSON body would be
 * (kind and apiVersion from the envelope). Anything else is GS_EINVAL with
 * why saying so. *out: new reference. */
int gs__proto_decode(const char *buf, size_t len, json_t **out, char *why, size_t whylen);

/*--- Pods (api_objects.c) ---*/

/* Sets (or adds) status.conditions[type] with a fresh lastTransitionTime when
 * the status changes. reason/message NULL remove them. 0 or GS_ENOMEM. */
int gs__pod_set_condition(json_t *pod, const char *type, const char *status, const char *reason,
                          const char *message);

#endif
