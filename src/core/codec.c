/*
 * codec.c - JSON and YAML streams in and out, all as jansson trees.
 *
 * Every manifest, whatever its format, becomes a json_t; the object model
 * never sees YAML. JSON is parsed by jansson. YAML is parsed with libyaml's
 * event API and built into json_t here, which lets us apply the rules that
 * matter for Kubernetes manifests instead of a YAML 1.1 loader's surprises:
 *
 *  - plain scalars resolve with the YAML 1.2 core schema, so `yes`, `on`,
 *    `y` stay strings, `0o17`/`0x1f` are integers, and a number that does
 *    not fit int64 (or a float that overflows) stays a string - a 20-digit
 *    id is never rounded. Quoted scalars, and `!!str`/`!` tags, are strings;
 *  - anchors are document-scoped and registered when their node is complete,
 *    so an alias can never refer to its own ancestor (no cycles). Aliases are
 *    deep copies, which keeps trees independent, and the copies are counted:
 *    a document whose aliases expand past GS_YAML_MAX_ALIAS_NODES nodes is
 *    refused ("billion laughs");
 *  - a duplicate mapping key is an error, as in JSON (jansson's
 *    JSON_REJECT_DUPLICATES), because silently taking the last value hides
 *    mistakes in hand-written manifests;
 *  - empty documents (`---` with nothing after it) are skipped.
 *
 * JSON numbers that overflow int64/double get the same treatment as in YAML:
 * jansson refuses them, so the text is re-read with those literals quoted.
 * A JSON stream may be one value or several concatenated; a top-level array
 * and any `*List` object with `items` are split into one document per item
 * (items of a List get the List's line). gs_decode_stream also splits YAML
 * Lists, as `kubectl get -o yaml` writes them; YAML sequences are left whole.
 *
 * Encoders keep key order (jansson keeps insertion order). The YAML encoder
 * quotes every string that a YAML 1.2 or 1.1 reader could take for another
 * type, so its output reads back to the same tree here and in other tools.
 */
#include "core/codec.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define GS_YAML_MAX_ALIAS_NODES 100000
#define GS_YAML_MAX_DEPTH 512

/*--- Documents ---*/

void gs_docs_free(struct gs_docs *d)
{
    for (size_t i = 0; i < d->n; i++) json_decref(d->docs[i]);
    free(d->docs);
    free(d->lines);
    d->docs = NULL;
    d->lines = NULL;
    d->n = 0;
}

static int docs_push(struct gs_docs *d, json_t *v, int line)
{
    json_t **nd = realloc(d->docs, (d->n + 1) * sizeof *nd);
    if (!nd) return GS_ENOMEM;
    d->docs = nd;
    int *nl = realloc(d->lines, (d->n + 1) * sizeof *nl);
    if (!nl) return GS_ENOMEM;
    d->lines = nl;
    d->docs[d->n] = json_incref(v);
    d->lines[d->n] = line;
    d->n++;
    return 0;
}

/*--- Reading files ---*/

int gs_read_file(const char *path, char **buf, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rbe") : stdin;
    if (!f) return errno == ENOENT ? GS_ENOENT : GS_EIO;
    char *b = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (cap - n < 4096) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *nb = realloc(b, ncap + 1);
            if (!nb) { rc = GS_ENOMEM; break; }
            b = nb;
            cap = ncap;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            if (ferror(f)) rc = GS_EIO;
            break;
        }
    }
    if (f != stdin) fclose(f);
    if (rc) { free(b); return rc; }
    if (!b && !(b = malloc(1))) return GS_ENOMEM;
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

/*--- Scalar resolution (YAML 1.2 core schema) ---*/

static bool all_in(const char *s, size_t n, const char *set)
{
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++)
        if (!s[i] || !strchr(set, s[i])) return false;
    return true;
}

static bool is_word(const char *s, size_t n, const char *const *words)
{
    for (; *words; words++)
        if (strlen(*words) == n && !memcmp(s, *words, n)) return true;
    return false;
}

static const char *const null_words[] = {"~", "null", "Null", "NULL", NULL};
static const char *const true_words[] = {"true", "True", "TRUE", NULL};
static const char *const false_words[] = {"false", "False", "FALSE", NULL};

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool is_float_text(const char *s, size_t n)
{
    size_t i = 0, digits = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) i++;
    while (i < n && isdigit((unsigned char)s[i])) i++, digits++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && isdigit((unsigned char)s[i])) i++, digits++;
    }
    if (digits == 0) return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '-' || s[i] == '+')) i++;
        size_t ed = 0;
        while (i < n && isdigit((unsigned char)s[i])) i++, ed++;
        if (ed == 0) return false;
    }
    return i == n;
}

/* Integer text in base 10 (optional sign), 0o octal or 0x hex; false on overflow. */
static bool parse_int_text(const char *s, size_t n, long long *out)
{
    char tmp[80];
    if (n == 0 || n >= sizeof tmp) return false;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    int base = 10;
    const char *p = tmp;
    if (n > 2 && tmp[0] == '0' && (tmp[1] == 'o' || tmp[1] == 'x')) {
        base = tmp[1] == 'o' ? 8 : 16;
        p = tmp + 2;
        if (!all_in(p, n - 2, base == 8 ? "01234567" : "0123456789abcdefABCDEF")) return false;
    } else {
        size_t off = (tmp[0] == '-' || tmp[0] == '+');
        if (!all_in(tmp + off, n - off, "0123456789")) return false;
    }
    errno = 0;
    char *end;
    long long v = strtoll(p, &end, base);
    if (errno == ERANGE || *end) return false;
    *out = v;
    return true;
}

/* The json_t a plain, untagged scalar stands for. */
static json_t *resolve_plain(const char *s, size_t n)
{
    if (n == 0 || is_word(s, n, null_words)) return json_null();
    if (is_word(s, n, true_words)) return json_true();
    if (is_word(s, n, false_words)) return json_false();
    long long iv;
    if (parse_int_text(s, n, &iv)) return json_integer(iv);
    size_t sign = (s[0] == '-' || s[0] == '+');
    if (all_in(s + sign, n - sign, "0123456789")) return json_stringn(s, n); /* beyond int64: keep the digits */
    if (is_float_text(s, n) && n < 400) {
        char tmp[400];
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        double d = strtod(tmp, NULL);
        if (isfinite(d)) return json_real(d);
    }
    return json_stringn(s, n);
}

/*--- JSON ---*/

static int json_fail(struct gs_diags *d, const json_error_t *e, int line_off, int col_off)
{
    int line = e->line > 0 ? e->line : 1;
    int col = e->column > 0 ? e->column : 1;
    if (line == 1) col += col_off;
    line += line_off;
    gs_diags_add(d, "", "line %d column %d: %s", line, col, e->text);
    return GS_EPARSE;
}

static bool too_big_number_error(const json_error_t *e)
{
    return strstr(e->text, "too big integer") || strstr(e->text, "real number overflow");
}

/* Copy of buf with every number literal that overflows int64 (integers) or
 * double (reals) wrapped in quotes, so it decodes as a string. */
static char *quote_big_numbers(const char *buf, size_t len, size_t *outlen)
{
    char *out = malloc(len * 3 + 1);
    if (!out) return NULL;
    size_t o = 0;
    bool in_str = false;
    for (size_t i = 0; i < len;) {
        char c = buf[i];
        if (in_str) {
            out[o++] = c;
            if (c == '\\' && i + 1 < len) out[o++] = buf[++i];
            else if (c == '"') in_str = false;
            i++;
            continue;
        }
        if (c == '"') { in_str = true; out[o++] = c; i++; continue; }
        if (c != '-' && !isdigit((unsigned char)c)) { out[o++] = c; i++; continue; }
        size_t j = i + 1;
        bool real = false;
        while (j < len && (isdigit((unsigned char)buf[j]) || strchr(".eE+-", buf[j]))) {
            if (!isdigit((unsigned char)buf[j])) real = true;
            j++;
        }
        char tmp[512];
        bool big = false;
        if (j - i < sizeof tmp) {
            memcpy(tmp, buf + i, j - i);
            tmp[j - i] = '\0';
            errno = 0;
            if (real) big = isinf(strtod(tmp, NULL));
            else { (void)strtoll(tmp, NULL, 10); big = errno == ERANGE; }
        } else {
            big = true;
        }
        if (big) out[o++] = '"';
        memcpy(out + o, buf + i, j - i);
        o += j - i;
        if (big) out[o++] = '"';
        i = j;
    }
    out[o] = '\0';
    *outlen = o;
    return out;
}

int gs_json_decode(const char *buf, size_t len, json_t **out, struct gs_diags *d)
{
    json_error_t e;
    size_t flags = JSON_REJECT_DUPLICATES | JSON_DECODE_ANY;
    json_t *v = json_loadb(buf, len, flags, &e);
    if (!v && too_big_number_error(&e)) {
        size_t n2;
        char *b2 = quote_big_numbers(buf, len, &n2);
        if (!b2) return GS_ENOMEM;
        v = json_loadb(b2, n2, flags, &e);
        free(b2);
    }
    if (!v) return json_fail(d, &e, 0, 0);
    *out = v;
    return 0;
}

/*--- Depth limits ---*/

/* The client reads answers with jansson: the limit plus any envelope must fit its parser. */
_Static_assert(GS_JSON_MAX_DEPTH + GS_JSON_ENVELOPE_DEPTH <= JSON_PARSER_MAX_DEPTH,
               "objects the server accepts must stay readable by jansson inside a list or watch event");

int gs_json_text_depth(const char *buf, size_t len, int max, int *line, int *col)
{
    int depth = 0, deepest = 0, ln = 1;
    size_t bol = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char ch = buf[i];
        if (ch == '\n') {
            ln++;
            bol = i + 1;
        }
        if (in_str) {
            if (ch == '\\') i++; /* the escaped byte cannot end the string */
            else if (ch == '"') in_str = false;
            continue;
        }
        if (ch == '"') in_str = true;
        else if (ch == '}' || ch == ']') depth -= depth > 0;
        else if ((ch == '{' || ch == '[') && ++depth > deepest && (deepest = depth) > max) {
            if (line) *line = ln;
            if (col) *col = (int)(i - bol) + 1;
            return deepest;
        }
    }
    return deepest;
}

int gs_json_depth(const json_t *v)
{
    int deepest = 0;
    size_t i;
    const char *k;
    json_t *e;
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, e) {
            int d = gs_json_depth(e);
            if (d > deepest) deepest = d;
        }
        return deepest + 1;
    }
    if (json_is_array(v)) {
        json_array_foreach(v, i, e) {
            int d = gs_json_depth(e);
            if (d > deepest) deepest = d;
        }
        return deepest + 1;
    }
    return 0;
}

static int count_lines(const char *buf, size_t upto)
{
    int n = 0;
    for (size_t i = 0; i < upto; i++) n += buf[i] == '\n';
    return n;
}

static int col_of(const char *buf, size_t off)
{
    size_t i = off;
    while (i > 0 && buf[i - 1] != '\n') i--;
    return (int)(off - i);
}

/* Appends one decoded JSON value to out: split into items when it is an array or a List. */
static int json_push_value(struct gs_docs *out, json_t *v, int line)
{
    json_t *items = NULL;
    if (json_is_array(v)) {
        items = v;
    } else if (json_is_object(v)) {
        const char *kind = json_string_value(json_object_get(v, "kind"));
        json_t *it = json_object_get(v, "items");
        size_t kl = kind ? strlen(kind) : 0;
        if (kl >= 4 && !strcmp(kind + kl - 4, "List") && json_is_array(it)) items = it;
    }
    if (!items) return docs_push(out, v, line);
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        int rc = docs_push(out, it, line);
        if (rc) return rc;
    }
    return 0;
}

static int json_stream(const char *buf, size_t len, struct gs_docs *out, struct gs_diags *d, size_t *err_doc,
                       bool *retry_big)
{
    size_t off = 0;
    for (;;) {
        while (off < len && isspace((unsigned char)buf[off])) off++;
        if (off >= len) return 0;
        json_error_t e;
        json_t *v = json_loadb(buf + off, len - off, JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK, &e);
        if (!v) {
            if (too_big_number_error(&e) && retry_big) { *retry_big = true; return GS_EPARSE; }
            if (err_doc) *err_doc = out->n + 1;
            return json_fail(d, &e, count_lines(buf, off), col_of(buf, off));
        }
        int rc = json_push_value(out, v, count_lines(buf, off) + 1);
        json_decref(v);
        if (rc) return rc;
        off += (size_t)e.position;
    }
}

static int json_decode_stream(const char *buf, size_t len, struct gs_docs *out, struct gs_diags *d, size_t *err_doc)
{
    bool big = false;
    int rc = json_stream(buf, len, out, d, err_doc, &big);
    if (!big) return rc;
    gs_docs_free(out);
    size_t n2;
    char *b2 = quote_big_numbers(buf, len, &n2);
    if (!b2) return GS_ENOMEM;
    rc = json_stream(b2, n2, out, d, err_doc, NULL);
    free(b2);
    return rc;
}

/*--- YAML decoding ---*/

struct anchor {
    char *name;
    json_t *val;
    size_t size; /* nodes in val, what one alias to it costs */
};

struct frame {
    json_t *node;  /* object or array being filled */
    char *key;     /* mapping: key waiting for its value, NULL when a key is expected */
    char *anchor;  /* registered when the collection ends */
};

struct ybuild {
    yaml_parser_t parser;
    struct frame *stack;
    size_t depth, cap;
    struct anchor *anchors;
    size_t nanchors;
    size_t expanded;
    json_t *root;
    struct gs_diags *d;
};

static int yerr(struct ybuild *b, const yaml_mark_t *m, const char *fmt, const char *arg)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    gs_diags_add(b->d, "", "line %zu column %zu: %s", m->line + 1, m->column + 1, msg);
    return GS_EPARSE;
}

static size_t tree_size(const json_t *v)
{
    size_t n = 1, i;
    const char *k;
    json_t *c;
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, c) n += tree_size(c);
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, c) n += tree_size(c);
    }
    return n;
}

static void anchors_clear(struct ybuild *b)
{
    for (size_t i = 0; i < b->nanchors; i++) {
        free(b->anchors[i].name);
        json_decref(b->anchors[i].val);
    }
    free(b->anchors);
    b->anchors = NULL;
    b->nanchors = 0;
    b->expanded = 0;
}

static int anchor_add(struct ybuild *b, const char *name, json_t *v)
{
    struct anchor *na = realloc(b->anchors, (b->nanchors + 1) * sizeof *na);
    if (!na) return GS_ENOMEM;
    b->anchors = na;
    char *nm = strdup(name);
    if (!nm) return GS_ENOMEM;
    b->anchors[b->nanchors++] = (struct anchor){nm, json_incref(v), tree_size(v)};
    return 0;
}

static struct anchor *anchor_find(struct ybuild *b, const char *name)
{
    for (size_t i = b->nanchors; i-- > 0;)
        if (!strcmp(b->anchors[i].name, name)) return &b->anchors[i];
    return NULL;
}

static bool expecting_key(struct ybuild *b)
{
    return b->depth && json_is_object(b->stack[b->depth - 1].node) && !b->stack[b->depth - 1].key;
}

static int set_key(struct ybuild *b, const char *key, size_t n, const yaml_mark_t *m)
{
    struct frame *f = &b->stack[b->depth - 1];
    if (memchr(key, '\0', n)) return yerr(b, m, "mapping key contains a NUL character%s", "");
    char *k = strndup(key, n);
    if (!k) return GS_ENOMEM;
    if (json_object_get(f->node, k)) {
        int rc = yerr(b, m, "duplicate key \"%.200s\"", k);
        free(k);
        return rc;
    }
    f->key = k;
    return 0;
}

/* Places a finished value: as the document root, an array item, or a mapping value. Steals v. */
static int place_value(struct ybuild *b, json_t *v, const char *anchor)
{
    if (!v) return GS_ENOMEM;
    int rc = anchor ? anchor_add(b, anchor, v) : 0;
    if (rc) { json_decref(v); return rc; }
    if (b->depth == 0) {
        b->root = v;
        return 0;
    }
    struct frame *f = &b->stack[b->depth - 1];
    if (json_is_array(f->node)) return json_array_append_new(f->node, v) ? GS_ENOMEM : 0;
    rc = json_object_set_new(f->node, f->key, v) ? GS_ENOMEM : 0;
    free(f->key);
    f->key = NULL;
    return rc;
}

static int on_scalar(struct ybuild *b, yaml_event_t *ev)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    const char *anchor = (const char *)ev->data.scalar.anchor;
    if (expecting_key(b)) {
        int rc = set_key(b, s, n, &ev->start_mark);
        if (!rc && anchor) {
            json_t *kv = json_stringn(s, n);
            rc = kv ? anchor_add(b, anchor, kv) : GS_ENOMEM;
            json_decref(kv);
        }
        return rc;
    }
    const char *tag = (const char *)ev->data.scalar.tag;
    bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    bool str_tag = tag && (!strcmp(tag, "!") || !strcmp(tag, YAML_STR_TAG));
    json_t *v = plain && !str_tag ? resolve_plain(s, n) : json_stringn(s, n);
    if (!v) return yerr(b, &ev->start_mark, "scalar is not valid UTF-8 text%s", "");
    return place_value(b, v, anchor);
}

static int on_alias(struct ybuild *b, yaml_event_t *ev)
{
    const char *name = (const char *)ev->data.alias.anchor;
    struct anchor *a = anchor_find(b, name);
    if (!a) return yerr(b, &ev->start_mark, "unknown alias \"%.200s\"", name);
    b->expanded += a->size;
    if (b->expanded > GS_YAML_MAX_ALIAS_NODES)
        return yerr(b, &ev->start_mark, "aliases expand to more than %s nodes", "100000");
    if (expecting_key(b)) {
        if (!json_is_string(a->val))
            return yerr(b, &ev->start_mark, "alias \"%.200s\" used as a key is not a string", name);
        return set_key(b, json_string_value(a->val), json_string_length(a->val), &ev->start_mark);
    }
    return place_value(b, json_deep_copy(a->val), NULL);
}

static int on_start(struct ybuild *b, yaml_event_t *ev, bool mapping)
{
    if (expecting_key(b)) return yerr(b, &ev->start_mark, "mapping keys must be scalars%s", "");
    if (b->depth >= GS_YAML_MAX_DEPTH) return yerr(b, &ev->start_mark, "nesting deeper than %s levels", "512");
    if (b->depth == b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 16;
        struct frame *ns = realloc(b->stack, ncap * sizeof *ns);
        if (!ns) return GS_ENOMEM;
        b->stack = ns;
        b->cap = ncap;
    }
    const char *anchor = mapping ? (const char *)ev->data.mapping_start.anchor
                                 : (const char *)ev->data.sequence_start.anchor;
    struct frame *f = &b->stack[b->depth];
    *f = (struct frame){mapping ? json_object() : json_array(), NULL, anchor ? strdup(anchor) : NULL};
    if (!f->node || (anchor && !f->anchor)) {
        json_decref(f->node);
        free(f->anchor);
        return GS_ENOMEM;
    }
    b->depth++;
    return 0;
}

static int on_end(struct ybuild *b)
{
    struct frame f = b->stack[--b->depth];
    free(f.key);
    int rc = place_value(b, f.node, f.anchor);
    free(f.anchor);
    return rc;
}

static void unwind(struct ybuild *b)
{
    while (b->depth) {
        struct frame *f = &b->stack[--b->depth];
        json_decref(f->node);
        free(f->key);
        free(f->anchor);
    }
    json_decref(b->root);
    b->root = NULL;
}

static int parser_fail(struct ybuild *b)
{
    const yaml_parser_t *p = &b->parser;
    if (p->error == YAML_MEMORY_ERROR) return GS_ENOMEM;
    const yaml_mark_t *m = p->problem ? &p->problem_mark : &p->context_mark;
    gs_diags_add(b->d, "", "line %zu column %zu: %s%s%s", m->line + 1, m->column + 1,
                 p->problem ? p->problem : "syntax error", p->context ? " " : "", p->context ? p->context : "");
    return GS_EPARSE;
}

static int yaml_event_step(struct ybuild *b, yaml_event_t *ev, struct gs_docs *out, int *doc_line)
{
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        *doc_line = (int)ev->start_mark.line + 1;
        return 0;
    case YAML_DOCUMENT_END_EVENT: {
        int rc = 0;
        if (b->root && !json_is_null(b->root)) rc = docs_push(out, b->root, *doc_line);
        json_decref(b->root);
        b->root = NULL;
        anchors_clear(b);
        return rc;
    }
    case YAML_SCALAR_EVENT: return on_scalar(b, ev);
    case YAML_ALIAS_EVENT: return on_alias(b, ev);
    case YAML_SEQUENCE_START_EVENT: return on_start(b, ev, false);
    case YAML_MAPPING_START_EVENT: return on_start(b, ev, true);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT: return on_end(b);
    default: return 0;
    }
}

int gs_yaml_decode_stream(const char *buf, size_t len, struct gs_docs *out, struct gs_diags *d, size_t *err_doc)
{
    memset(out, 0, sizeof *out);
    struct ybuild b = {.d = d};
    if (!yaml_parser_initialize(&b.parser)) return GS_ENOMEM;
    yaml_parser_set_input_string(&b.parser, (const unsigned char *)buf, len);
    int rc = 0, doc_line = 1;
    for (bool done = false; !done && !rc;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&b.parser, &ev)) {
            rc = parser_fail(&b);
            break;
        }
        done = ev.type == YAML_STREAM_END_EVENT;
        rc = yaml_event_step(&b, &ev, out, &doc_line);
        yaml_event_delete(&ev);
    }
    if (rc && err_doc) *err_doc = out->n + 1;
    unwind(&b);
    anchors_clear(&b);
    free(b.stack);
    yaml_parser_delete(&b.parser);
    if (rc) gs_docs_free(out);
    return rc;
}

/* kubectl's YAML output wraps objects in a List too: give its items their own documents. */
static int split_yaml_lists(struct gs_docs *docs)
{
    struct gs_docs out = {0};
    int rc = 0;
    for (size_t i = 0; i < docs->n && !rc; i++)
        rc = json_is_object(docs->docs[i]) ? json_push_value(&out, docs->docs[i], docs->lines[i])
                                           : docs_push(&out, docs->docs[i], docs->lines[i]);
    gs_docs_free(docs);
    if (rc) gs_docs_free(&out);
    *docs = out;
    return rc;
}

int gs_decode_stream(const char *buf, size_t len, struct gs_docs *out, struct gs_diags *d, size_t *err_doc)
{
    memset(out, 0, sizeof *out);
    size_t i = 0;
    if (len >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3)) i = 3;
    while (i < len && isspace((unsigned char)buf[i])) i++;
    if (i < len && (buf[i] == '{' || buf[i] == '[')) {
        int rc = json_decode_stream(buf + i, len - i, out, d, err_doc);
        if (rc == 0) {
            int skipped = count_lines(buf, i);
            for (size_t k = 0; k < out->n; k++) out->lines[k] += skipped;
        } else {
            gs_docs_free(out);
        }
        return rc;
    }
    int rc = gs_yaml_decode_stream(buf, len, out, d, err_doc);
    return rc ? rc : split_yaml_lists(out);
}

/*--- Encoding ---*/

char *gs_json_encode(const json_t *v, int pretty)
{
    return json_dumps(v, JSON_ENCODE_ANY | (pretty ? JSON_INDENT(2) : JSON_COMPACT));
}

struct outbuf {
    char *p;
    size_t n, cap;
    bool oom;
};

static int out_write(void *data, unsigned char *buffer, size_t size)
{
    struct outbuf *o = data;
    if (o->n + size + 1 > o->cap) {
        size_t ncap = (o->cap ? o->cap * 2 : 1024) + size;
        char *np = realloc(o->p, ncap);
        if (!np) { o->oom = true; return 0; }
        o->p = np;
        o->cap = ncap;
    }
    memcpy(o->p + o->n, buffer, size);
    o->n += size;
    o->p[o->n] = '\0';
    return 1;
}

static const char *const yaml11_words[] = {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
                                           "on", "On", "ON", "off", "Off", "OFF", "=", "<<", NULL};

/* Would a YAML reader (1.2 core here, or a 1.1 one elsewhere) read this plain text as a non-string? */
static bool needs_quotes(const char *s, size_t n)
{
    if (n == 0 || memchr(s, '\0', n)) return true;
    if (is_word(s, n, yaml11_words)) return true;
    json_t *r = resolve_plain(s, n);
    bool str = json_is_string(r);
    json_decref(r);
    if (!str) return true;
    /* numbers in other notations (1_000, 0b1, 12:30, .inf): any plain text starting like a number */
    return strchr("0123456789+-.", s[0]) != NULL;
}

static void real_text(double d, char *buf, size_t len)
{
    if (d == floor(d) && fabs(d) < 1e16) {
        snprintf(buf, len, "%.1f", d);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", len - strlen(buf) - 1);
}

static int emit_scalar(yaml_emitter_t *em, const char *s, size_t n, bool quote)
{
    yaml_event_t ev;
    yaml_scalar_style_t st = quote ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)n, !quote, 1, st)) return -1;
    return yaml_emitter_emit(em, &ev) ? 0 : -1;
}

static int emit_node(yaml_emitter_t *em, const json_t *v)
{
    yaml_event_t ev;
    char num[64];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_ANY_MAPPING_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return -1;
        const char *k;
        json_t *c;
        json_object_foreach((json_t *)v, k, c) {
            if (emit_scalar(em, k, strlen(k), needs_quotes(k, strlen(k))) || emit_node(em, c)) return -1;
        }
        return yaml_mapping_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev) ? 0 : -1;
    }
    case JSON_ARRAY: {
        if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_ANY_SEQUENCE_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return -1;
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c) if (emit_node(em, c)) return -1;
        return yaml_sequence_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev) ? 0 : -1;
    }
    case JSON_STRING: {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        return emit_scalar(em, s, n, needs_quotes(s, n));
    }
    case JSON_INTEGER: snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL: real_text(json_real_value(v), num, sizeof num); break;
    case JSON_TRUE: strcpy(num, "true"); break;
    case JSON_FALSE: strcpy(num, "false"); break;
    default: strcpy(num, "null"); break;
    }
    return emit_scalar(em, num, strlen(num), false);
}

char *gs_yaml_encode(const json_t *v)
{
    yaml_emitter_t em;
    struct outbuf o = {0};
    if (!yaml_emitter_initialize(&em)) return NULL;
    yaml_emitter_set_output(&em, out_write, &o);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_width(&em, -1);
    yaml_event_t ev;
    int ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) && yaml_emitter_emit(&em, &ev) &&
             yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) && yaml_emitter_emit(&em, &ev) &&
             emit_node(&em, v) == 0 && yaml_document_end_event_initialize(&ev, 1) &&
             yaml_emitter_emit(&em, &ev) && yaml_stream_end_event_initialize(&ev) &&
             yaml_emitter_emit(&em, &ev) && yaml_emitter_flush(&em);
    yaml_emitter_delete(&em);
    if (!ok || o.oom || !o.p) {
        free(o.p);
        return NULL;
    }
    return o.p;
}
