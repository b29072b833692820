/*
 * codec.h - JSON and YAML documents in and out, as jansson json_t.
 *
 * JSON goes through jansson. YAML goes through libyaml's event parser and is
 * mapped onto the same json_t tree: mappings -> objects, sequences -> arrays,
 * plain scalars resolved as YAML 1.2 core schema (null, true/false, integers,
 * floats; everything else a string), quoted scalars always strings. Numbers
 * too large for int64 stay strings so nothing is rounded. Anchors/aliases are
 * expanded (with a cap against "billion laughs"); duplicate keys are errors.
 *
 * A stream may hold several documents: YAML's `---` separated documents, or a
 * JSON value (an object, a Kubernetes List's items, or an array of objects).
 * Errors carry the document number (1-based) and line.
 */
#ifndef GS_CORE_CODEC_H
#define GS_CORE_CODEC_H

#include "core/error.h"

#include <jansson.h>
#include <stddef.h>

/* Documents of a stream: docs[i] are new references, lines[i] the 1-based line each starts on. */
struct gs_docs {
    json_t **docs;
    int *lines;
    size_t n;
};
void gs_docs_free(struct gs_docs *d);

/* Parses a YAML stream (JSON is a subset and also accepted). On a syntax
 * error returns GS_EPARSE with one diag whose path is "" and message
 * "line L column C: <problem>"; err_doc (if not NULL) gets the 1-based index
 * of the failing document. Empty documents are skipped. */
int gs_yaml_decode_stream(const char *buf, size_t len, struct gs_docs *out, struct gs_diags *d, size_t *err_doc);
/* Parses exactly one JSON value. GS_EPARSE with "line L column C: ..." on error. */
int gs_json_decode(const char *buf, size_t len, json_t **out, struct gs_diags *d);
/* Either format: JSON when the first non-space byte is '{' or '[', else YAML.
 * A JSON array or a {"kind":"List","items":[...]} yields one document per item. */
int gs_decode_stream(const char *buf, size_t len, struct gs_docs *out, struct gs_diags *d, size_t *err_doc);

/*--- Limits shared by the server and its clients ---*/

/* The deepest nesting of objects and arrays an object may have: the server
 * refuses a create, update or patch body deeper than this (422, naming the
 * limit), so everything it stores can be read back. Real manifests stay
 * under 20 (a pod's affinity terms are about 10). */
#define GS_JSON_MAX_DEPTH 64
/* What an answer adds around an object: a watch event of a Table row
 * ({"object":{"rows":[{"object":OBJ}]}}) is the deepest, 4 levels. */
#define GS_JSON_ENVELOPE_DEPTH 4
/* The server's default --max-body: the size limit of one object written. */
#define GS_JSON_MAX_BODY_DEFAULT ((size_t)3 << 20)

/* The nesting depth of JSON text (0 for a scalar, 1 for {} or [], strings
 * skipped), counted up to max + 1. When it exceeds max, *line and *col
 * (1-based, when given) say where. No syntax checking: run before a parse,
 * it bounds what the parser will be asked to build. */
int gs_json_text_depth(const char *buf, size_t len, int max, int *line, int *col);
/* The nesting depth of a tree, as above (0 for a scalar). */
int gs_json_depth(const json_t *v);

/* Encoders: new malloc'd NUL-terminated text, or NULL when out of memory.
 * Key order is preserved from decode. YAML output re-parses to the same json_t. */
char *gs_json_encode(const json_t *v, int pretty);
char *gs_yaml_encode(const json_t *v);

/* Reads a whole file ("-" = stdin) into a malloc'd buffer (NUL-terminated). */
int gs_read_file(const char *path, char **buf, size_t *len);

#endif
