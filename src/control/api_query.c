/*
 * api_query.c - selectors in URL form and merge patches; see api.h.
 *
 * These parse text that arrives from the network, so every function takes
 * any input and answers GS_EINVAL rather than trusting it; the HTTP fuzz
 * target drives them directly.
 */
#include "control/api.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- Text from URLs ---*/

/* Length of the valid UTF-8 sequence at p (no overlongs, no surrogates, at
 * most U+10FFFF, as JSON encoders accept), 0 when it is not one. */
static size_t utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80) return 1;
    size_t n = p[0] >= 0xc2 && p[0] <= 0xdf   ? 2
               : p[0] >= 0xe0 && p[0] <= 0xef ? 3
               : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
                                              : 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))) return 0;
    if (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))) return 0;
    return n;
}

long gs__text_bad_byte(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; p[i];) {
        if (p[i] < 0x20 || p[i] == 0x7f) return (long)i;
        size_t n = utf8_len(p + i);
        if (!n) return (long)i;
        i += n;
    }
    return -1;
}

const char *gs__text_printable(const char *s, char *buf, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    for (size_t i = 0; p[i] && o + 5 < len;) {
        size_t n = p[i] < 0x20 || p[i] == 0x7f ? 0 : utf8_len(p + i);
        if (!n) {
            o += (size_t)snprintf(buf + o, len - o, "\\x%02x", p[i]);
            i++;
            continue;
        }
        if (o + n >= len) break;
        memcpy(buf + o, p + i, n);
        o += n;
        i += n;
    }
    if (len) buf[o < len ? o : len - 1] = 0;
    return buf;
}

static const char *bad_text_why(const char *text)
{
    long at = gs__text_bad_byte(text);
    if (at < 0) return NULL;
    unsigned char c = (unsigned char)text[at];
    return c < 0x20 || c == 0x7f ? "it contains a control character (or %00)" : "it is not valid UTF-8";
}

/*--- Label selectors ---*/

static char *dup_trim(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s)) s++, n--;
    while (n && isspace((unsigned char)s[n - 1])) n--;
    return strndup(s, n);
}

static int add_value(struct gs_sel_req *r, const char *s, size_t n, const char **why)
{
    char *v = dup_trim(s, n);
    if (!v) return GS_ENOMEM;
    char **nv = realloc(r->values, (r->nvalues + 1) * sizeof *nv);
    if (!nv) {
        free(v);
        return GS_ENOMEM;
    }
    r->values = nv;
    r->values[r->nvalues++] = v;
    return gs_label_value_check(v, why) ? GS_EINVAL : 0;
}

/* "key in (a, b)" / "key notin (a)": rest points after the operator word. */
static int parse_set(struct gs_sel_req *r, const char *rest, const char **why)
{
    while (isspace((unsigned char)*rest)) rest++;
    size_t n = strlen(rest);
    if (*rest != '(' || n < 2 || rest[n - 1] != ')') {
        *why = "a set needs parentheses: key in (a,b)";
        return GS_EINVAL;
    }
    const char *p = rest + 1, *end = rest + n - 1;
    while (p <= end) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        const char *e = c ? c : end;
        int err = add_value(r, p, (size_t)(e - p), why);
        if (err) return err;
        p = e + 1;
    }
    return 0;
}

static const char *find_word(const char *s, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = strstr(s, word); p; p = strstr(p + 1, word))
        if (p > s && isspace((unsigned char)p[-1]) && (isspace((unsigned char)p[wl]) || p[wl] == '('))
            return p;
    return NULL;
}

static int parse_term(const char *t, struct gs_sel_req *r, const char **why)
{
    const char *op = NULL, *rest = NULL;
    size_t klen;
    if (*t == '!') {
        r->op = GS_SEL_DOESNOTEXIST;
        t++;
        klen = strlen(t);
    } else if ((op = find_word(t, "notin")) || (op = find_word(t, "in"))) {
        r->op = op[0] == 'n' ? GS_SEL_NOTIN : GS_SEL_IN;
        klen = (size_t)(op - t);
        rest = op + (r->op == GS_SEL_NOTIN ? 5 : 2);
    } else if ((op = strpbrk(t, "!=<>"))) {
        klen = (size_t)(op - t);
        if (op[0] == '!' && op[1] == '=') r->op = GS_SEL_NOTIN, rest = op + 2;
        else if (op[0] == '=') r->op = GS_SEL_IN, rest = op + (op[1] == '=' ? 2 : 1);
        else if (op[0] == '>') r->op = GS_SEL_GT, rest = op + 1;
        else if (op[0] == '<') r->op = GS_SEL_LT, rest = op + 1;
        else {
            *why = "unexpected '!'";
            return GS_EINVAL;
        }
    } else {
        r->op = GS_SEL_EXISTS;
        klen = strlen(t);
    }
    if (!(r->key = dup_trim(t, klen))) return GS_ENOMEM;
    if (gs_label_key_check(r->key, why)) return GS_EINVAL;
    if (!rest) return 0;
    if (r->op == GS_SEL_IN || r->op == GS_SEL_NOTIN) {
        if (op && (op[0] == 'i' || op[0] == 'n')) return parse_set(r, rest, why);
        return add_value(r, rest, strlen(rest), why);
    }
    int err = add_value(r, rest, strlen(rest), why);
    char *end = NULL;
    if (!err && (strtoll(r->values[0], &end, 10), !*r->values[0] || *end)) {
        *why = "> and < need an integer";
        err = GS_EINVAL;
    }
    return err;
}

int gs__label_selector_parse(const char *text, struct gs_selector *out, const char **why)
{
    memset(out, 0, sizeof *out);
    *why = "";
    if (!text) return 0;
    if ((*why = bad_text_why(text))) return GS_EINVAL;
    *why = "";
    const char *p = text;
    int err = 0;
    while (*p && !err) {
        int depth = 0;
        const char *e = p;
        for (; *e && (depth || *e != ','); e++) depth += *e == '(' ? 1 : *e == ')' ? -1 : 0;
        char *term = dup_trim(p, (size_t)(e - p));
        if (!term) err = GS_ENOMEM;
        else if (*term) {
            struct gs_sel_req *nv = realloc(out->reqs, (out->n + 1) * sizeof *nv);
            if (!nv) err = GS_ENOMEM;
            else {
                out->reqs = nv;
                memset(&nv[out->n], 0, sizeof nv[0]);
                err = parse_term(term, &nv[out->n++], why);
            }
        } else if (*e || p != text) {
            *why = "empty requirement";
            err = GS_EINVAL;
        }
        free(term);
        p = *e ? e + 1 : e;
    }
    if (err == GS_ENOMEM) *why = "out of memory";
    if (err) gs_selector_free(out);
    return err;
}

bool gs__label_selector_matches(const struct gs_selector *sel, const json_t *obj)
{
    if (!sel->n) return true;
    json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
    struct gs_labels l = {0};
    const char *k;
    json_t *v;
    json_object_foreach(labels, k, v)
        if (json_is_string(v)) gs_labels_set(&l, k, json_string_value(v));
    bool ok = gs_selector_matches(sel, &l);
    gs_labels_free(&l);
    return ok;
}

/*--- Field selectors ---*/

const char *gs__json_path_text(const json_t *obj, const char *path, char *buf, size_t len)
{
    const json_t *cur = obj;
    char seg[256];
    for (const char *p = path; cur && *p;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof seg) return "";
        memcpy(seg, p, n);
        seg[n] = 0;
        cur = json_object_get(cur, seg);
        p = dot ? dot + 1 : p + n;
    }
    if (!cur || json_is_null(cur)) return "";
    if (json_is_string(cur)) return json_string_value(cur);
    if (json_is_integer(cur)) snprintf(buf, len, "%lld", (long long)json_integer_value(cur));
    else if (json_is_boolean(cur)) snprintf(buf, len, "%s", json_is_true(cur) ? "true" : "false");
    else if (json_is_real(cur)) snprintf(buf, len, "%g", json_real_value(cur));
    else return "";
    return buf;
}

void gs__field_selector_free(struct gs__field_sel *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].path);
        free(s->v[i].value);
    }
    free(s->v);
    memset(s, 0, sizeof *s);
}

int gs__field_selector_parse(const char *text, struct gs__field_sel *out, const char **why)
{
    memset(out, 0, sizeof *out);
    *why = "";
    if (!text) return 0;
    if ((*why = bad_text_why(text))) return GS_EINVAL;
    *why = "";
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char *term = dup_trim(p, n);
        struct gs__field_req r = {0};
        const char *eq = term ? strchr(term, '=') : NULL;
        int err = !term ? GS_ENOMEM : 0;
        if (!err && (!eq || eq == term)) {
            *why = "a field selector term is field=value or field!=value";
            err = GS_EINVAL;
        }
        if (!err) {
            r.negate = eq[-1] == '!';
            const char *val = eq + 1 + (eq[1] == '=');
            r.path = dup_trim(term, (size_t)(eq - term) - r.negate);
            r.value = dup_trim(val, strlen(val));
            struct gs__field_req *nv = r.path && r.value ? realloc(out->v, (out->n + 1) * sizeof *nv) : NULL;
            if (!nv) err = GS_ENOMEM;
            else {
                out->v = nv;
                out->v[out->n++] = r;
                r.path = r.value = NULL;
            }
            if (!err && !*out->v[out->n - 1].path) {
                *why = "empty field name";
                err = GS_EINVAL;
            }
        }
        free(r.path);
        free(r.value);
        free(term);
        if (err) {
            gs__field_selector_free(out);
            return err;
        }
        p = e ? e + 1 : p + n;
    }
    return 0;
}

bool gs__field_selector_matches(const struct gs__field_sel *sel, const json_t *obj)
{
    char buf[64];
    for (size_t i = 0; i < sel->n; i++) {
        bool eq = !strcmp(gs__json_path_text(obj, sel->v[i].path, buf, sizeof buf), sel->v[i].value);
        if (eq == sel->v[i].negate) return false;
    }
    return true;
}

/*--- Merge patches ---*/

json_t *gs__merge_patch(const json_t *target, const json_t *patch)
{
    if (!json_is_object(patch)) return json_deep_copy(patch);
    json_t *out = json_is_object(target) ? json_deep_copy(target) : json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)patch, k, v) {
        if (!out) return NULL;
        if (json_is_null(v)) {
            json_object_del(out, k);
            continue;
        }
        json_t *m = gs__merge_patch(json_object_get(out, k), v);
        if (!m || json_object_set_new(out, k, m)) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* Merge keys of the lists kubectl patches element-wise (patchMergeKey tags of k8s.io/api). */
static const struct {
    const char *field, *key;
} merge_keys[] = {
    {"containers", "name"},     {"initContainers", "name"}, {"ephemeralContainers", "name"},
    {"volumes", "name"},        {"env", "name"},            {"volumeMounts", "mountPath"},
    {"ports", "containerPort"}, {"imagePullSecrets", "name"}, {"conditions", "type"},
    {"taints", "key"},          {"addresses", "type"},      {"hostAliases", "ip"},
    {"resourceClaims", "name"}, {"ownerReferences", "uid"}, {"topologySpreadConstraints", "topologyKey"},
};

static const char *merge_key_of(const char *field)
{
    for (size_t i = 0; i < sizeof merge_keys / sizeof merge_keys[0]; i++)
        if (!strcmp(merge_keys[i].field, field)) return merge_keys[i].key;
    return NULL;
}

static json_t *smp(const json_t *target, const json_t *patch);

static bool same_key(const json_t *a, const json_t *b, const char *key)
{
    json_t *x = json_object_get(a, key), *y = json_object_get(b, key);
    return x && y && json_equal(x, y);
}

/* Element-wise merge of a list by key. */
static json_t *merge_list(const json_t *target, const json_t *patch, const char *key)
{
    json_t *out = json_is_array(target) ? json_deep_copy(target) : json_array();
    size_t i;
    json_t *pe;
    json_array_foreach(patch, i, pe) {
        if (!out) return NULL;
        const char *dir = json_string_value(json_object_get(pe, "$patch"));
        if (dir && !strcmp(dir, "replace")) { /* the whole list is replaced by the patch's other elements */
            json_decref(out);
            out = json_array();
            size_t j;
            json_t *q;
            json_array_foreach(patch, j, q)
                if (!json_object_get(q, "$patch")) json_array_append(out, q);
            return out;
        }
        size_t j, found = SIZE_MAX;
        json_t *te;
        json_array_foreach(out, j, te)
            if (json_is_object(pe) && same_key(te, pe, key)) { found = j; break; }
        if (dir && !strcmp(dir, "delete")) {
            if (found != SIZE_MAX) json_array_remove(out, found);
            continue;
        }
        json_t *m = smp(found != SIZE_MAX ? json_array_get(out, found) : NULL, pe);
        if (!m) goto fail;
        if (found != SIZE_MAX ? json_array_set_new(out, found, m) : json_array_append_new(out, m)) goto fail;
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

static void delete_primitives(json_t *out, const char *field, const json_t *values)
{
    json_t *list = json_object_get(out, field);
    size_t i, j;
    json_t *v;
    json_array_foreach(values, i, v)
        for (j = json_array_size(list); j-- > 0;)
            if (json_equal(json_array_get(list, j), v)) json_array_remove(list, j);
}

static json_t *smp(const json_t *target, const json_t *patch)
{
    if (!json_is_object(patch)) return json_deep_copy(patch);
    const char *dir = json_string_value(json_object_get(patch, "$patch"));
    bool replace = dir && !strcmp(dir, "replace");
    json_t *out = json_is_object(target) && !replace ? json_deep_copy(target) : json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)patch, k, v) {
        if (!out) return NULL;
        if (k[0] == '$') {
            if (!strncmp(k, "$deleteFromPrimitiveList/", 25)) delete_primitives(out, k + 25, v);
            continue; /* $patch, $setElementOrder/..., $retainKeys */
        }
        if (json_is_null(v)) {
            json_object_del(out, k);
            continue;
        }
        const char *mk = json_is_array(v) ? merge_key_of(k) : NULL;
        const char *sub = json_string_value(json_object_get(v, "$patch"));
        if (sub && !strcmp(sub, "delete")) {
            json_object_del(out, k);
            continue;
        }
        json_t *m = mk ? merge_list(json_object_get(out, k), v, mk) : smp(json_object_get(out, k), v);
        if (!m || json_object_set_new(out, k, m)) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

json_t *gs__strategic_merge_patch(const json_t *target, const json_t *patch)
{
    return smp(target, patch);
}
