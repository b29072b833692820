/*
 * schema.h - the known fields of each kind, for kube-apiserver's field
 * validation (unknown fields) and enum checks.
 *
 * The decoders (object.c, pod.c, node.c, kinds.c) read the fields the
 * scheduler needs and keep the rest of a document as it came, so a misspelt
 * field (`nodeSelecter`) used to pass silently. This table lists, per kind,
 * every field Kubernetes defines (for Pod: the whole v1 PodSpec and
 * Container, including the fields gpusched ignores), so the API server can
 * warn about or refuse the others as kube-apiserver's fieldValidation does,
 * and the string fields whose values form a closed set (restartPolicy,
 * imagePullPolicy, taint effects...), so a value outside it is refused with
 * kube's "Unsupported value" text.
 *
 * Free-form parts (status, labels, annotations, resource lists, and the
 * specs of kinds whose schema we do not carry in full: DRA, Kueue
 * ClusterQueue, NodeResourceTopology, ClusterPolicy) accept anything; kinds
 * the table does not know (apps/v1, CRDs) are not checked at all.
 */
#ifndef GS_CORE_SCHEMA_H
#define GS_CORE_SCHEMA_H

#include "core/error.h"

#include <jansson.h>
#include <stdbool.h>

/* doc is a patch: keys starting with '$' (strategic merge directives) and
 * null values (removals) are not fields. */
#define GS_SCHEMA_PATCH 1u

/* Whether the table knows (apiVersion, kind); api_version NULL: any group. */
bool gs_schema_known(const char *api_version, const char *kind);

/* Walks doc, a document (or patch) of (api_version, kind). unknown (may be
 * NULL) gets one entry per field the kind does not define, path such as
 * "spec.containers[0].imagePullPolicyy" and message "unknown field"; invalid
 * (may be NULL) one per enum violation, message as kube-apiserver writes it:
 * `Unsupported value: "Sometimes": supported values: "Always", "Never",
 * "OnFailure"`. Values of the wrong JSON type are left to the decoders.
 * Returns 0 (also for kinds it does not know) or GS_ENOMEM. */
int gs_schema_check(const char *api_version, const char *kind, const json_t *doc, unsigned flags,
                    struct gs_diags *unknown, struct gs_diags *invalid);

#endif
