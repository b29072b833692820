/*
 * cel_eval.c - the evaluator for compiled CEL selectors (cel.c builds the programs).
 *
 * A tree walk over the immutable node array with a cost counter, as cel-go's interpreter
 * with an actual-cost limit: one unit per node visited, string work by the length of the
 * strings, regex matching by the length of the input. The evaluation state (bound
 * variables, a scratch arena for concatenated strings and lists, the cost) lives on the
 * caller's stack, so one program can be evaluated by any number of threads at once; an
 * evaluation that builds no new strings or lists allocates nothing.
 *
 * Semantics follow cel-go as Kubernetes configures it: && and || are commutative over
 * errors (false && error is false, error || true is true), equality across different types
 * is false rather than an error, ordering across int and uint compares values, and an
 * attribute missing from a device is the error "no such key: NAME" unless has() or `.?`
 * guards it. An unknown attribute domain is an empty map.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/cel.h"
#include "core/cel_internal.h"
#include "core/error.h"
#include "core/quantity.h"

enum vkind {
    V_NULL, V_BOOL, V_INT, V_UINT, V_STRING, V_VERSION, V_QUANTITY, V_LIST,
    V_DEVICE, V_ATTRS, V_CAPS, V_DOMAIN_ATTRS, V_DOMAIN_CAPS, V_OPT,
};

static const char *const vnames[] = {
    "null_type", "bool", "int", "uint", "string", "kubernetes.Semver", "kubernetes.Quantity", "list",
    "device", "map(string, map(string, dyn))", "map(string, map(string, kubernetes.Quantity))",
    "map(string, dyn)", "map(string, kubernetes.Quantity)", "optional_type",
};
_Static_assert(sizeof vnames / sizeof vnames[0] == V_OPT + 1, "vnames matches enum vkind");

struct val {
    enum vkind k;
    union {
        bool b;
        int64_t i;
        uint64_t u;
        int64_t q;                                      /* quantity, milli-units */
        struct { const char *p; size_t n; } s;          /* string, version text; NUL-terminated */
        struct { const struct val *v; size_t n; } l;
        struct { const char *dom; size_t n; } m;        /* domain of V_DOMAIN_* */
        struct { bool has; const struct val *v; } o;
    };
};

struct ev {
    const struct gs_cel_program *p;
    const struct gs_cel_device *dev;
    struct val *slots;
    struct gs_arena arena;
    int64_t cost;
    struct gs_cel_error *err;
};

static int rt_fail(struct ev *e, uint32_t col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int rt_fail(struct ev *e, uint32_t col, const char *fmt, ...)
{
    if (e->err) {
        e->err->column = col ? col : 1;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->err->msg, sizeof e->err->msg, fmt, ap);
        va_end(ap);
    }
    return GS_EINVAL;
}

static int charge(struct ev *e, uint32_t col, int64_t units)
{
    e->cost += units;
    if (e->cost > GS_CEL_MAX_COST)
        return rt_fail(e, col, "operation cancelled: actual cost limit exceeded (%d)", GS_CEL_MAX_COST);
    return 0;
}

static int no_overload1(struct ev *e, uint32_t col, const char *fn, const struct val *a)
{
    return rt_fail(e, col, "found no matching overload for '%s' applied to '(%s)'", fn, vnames[a->k]);
}

static int no_overload2(struct ev *e, uint32_t col, const char *fn, const struct val *a, const struct val *b)
{
    return rt_fail(e, col, "found no matching overload for '%s' applied to '(%s, %s)'", fn, vnames[a->k], vnames[b->k]);
}

static int no_overload_member(struct ev *e, uint32_t col, const char *fn, const struct val *r, const struct val *a)
{
    if (a)
        return rt_fail(e, col, "found no matching overload for '%s' applied to '%s.(%s)'", fn, vnames[r->k], vnames[a->k]);
    return rt_fail(e, col, "found no matching overload for '%s' applied to '%s.()'", fn, vnames[r->k]);
}

/*--- Semver ---*/

struct semver { uint64_t v[3]; const char *pre; size_t npre; };

static bool parse_num(const char **s, const char *end, uint64_t *out)
{
    const char *p = *s;
    if (p >= end || *p < '0' || *p > '9') return false;
    if (*p == '0' && p + 1 < end && p[1] >= '0' && p[1] <= '9') return false;   /* no leading zeros */
    uint64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (v > (UINT64_MAX - 9) / 10) return false;
        v = v * 10 + (uint64_t)(*p++ - '0');
    }
    *out = v;
    *s = p;
    return true;
}

/* Strict semver 2.0: MAJOR.MINOR.PATCH[-prerelease][+build], as k8s' semver library parses. */
static bool semver_parse(const char *s, size_t n, struct semver *sv)
{
    const char *p = s, *end = s + n;
    memset(sv, 0, sizeof *sv);
    for (int i = 0; i < 3; i++) {
        if (!parse_num(&p, end, &sv->v[i])) return false;
        if (i < 2) { if (p >= end || *p != '.') return false; p++; }
    }
    if (p < end && *p == '-') {
        p++;
        sv->pre = p;
        while (p < end && *p != '+') {
            char c = *p;
            if (!(c == '.' || c == '-' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z'))) return false;
            p++;
        }
        sv->npre = (size_t)(p - sv->pre);
        if (!sv->npre || sv->pre[0] == '.' || sv->pre[sv->npre - 1] == '.') return false;
    }
    if (p < end && *p == '+') {
        p++;
        if (p >= end) return false;
        while (p < end) {
            char c = *p++;
            if (!(c == '.' || c == '-' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z'))) return false;
        }
    }
    return p == end;
}

static bool all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) if (s[i] < '0' || s[i] > '9') return false;
    return n > 0;
}

static int cmp_pre(const struct semver *a, const struct semver *b)
{
    if (!a->npre && !b->npre) return 0;
    if (!a->npre) return 1;       /* a release is above its pre-releases */
    if (!b->npre) return -1;
    const char *pa = a->pre, *ea = a->pre + a->npre, *pb = b->pre, *eb = b->pre + b->npre;
    while (pa < ea && pb < eb) {
        const char *da = memchr(pa, '.', (size_t)(ea - pa)), *db = memchr(pb, '.', (size_t)(eb - pb));
        if (!da) da = ea;
        if (!db) db = eb;
        size_t la = (size_t)(da - pa), lb = (size_t)(db - pb);
        bool na = all_digits(pa, la), nb = all_digits(pb, lb);
        int c;
        if (na && nb) c = la != lb ? (la < lb ? -1 : 1) : memcmp(pa, pb, la);
        else if (na) c = -1;
        else if (nb) c = 1;
        else { c = memcmp(pa, pb, la < lb ? la : lb); if (!c && la != lb) c = la < lb ? -1 : 1; }
        if (c) return c < 0 ? -1 : 1;
        pa = da < ea ? da + 1 : ea;
        pb = db < eb ? db + 1 : eb;
    }
    if (pa < ea) return 1;
    if (pb < eb) return -1;
    return 0;
}

static int semver_cmp(const struct semver *a, const struct semver *b)
{
    for (int i = 0; i < 3; i++)
        if (a->v[i] != b->v[i]) return a->v[i] < b->v[i] ? -1 : 1;
    return cmp_pre(a, b);
}

static int version_of(struct ev *e, uint32_t col, const struct val *v, struct semver *sv)
{
    if (!semver_parse(v->s.p, v->s.n, sv))
        return rt_fail(e, col, "invalid semver \"%.*s\"", (int)(v->s.n > 64 ? 64 : v->s.n), v->s.p);
    return 0;
}

/*--- Values ---*/

static struct val from_attr(const struct gs_cel_attr *a)
{
    struct val v = { .k = V_NULL };
    switch (a->kind) {
    case GS_CEL_BOOL: v.k = V_BOOL; v.b = a->b; break;
    case GS_CEL_INT: v.k = V_INT; v.i = a->i; break;
    case GS_CEL_STRING: v.k = V_STRING; v.s.p = a->s ? a->s : ""; v.s.n = strlen(v.s.p); break;
    case GS_CEL_VERSION: v.k = V_VERSION; v.s.p = a->s ? a->s : ""; v.s.n = strlen(v.s.p); break;
    case GS_CEL_QUANTITY: v.k = V_QUANTITY; v.q = a->q_milli; break;
    case GS_CEL_NULL: break;
    }
    return v;
}

static bool dom_eq(const char *d, const char *dom, size_t n)
{
    return d && strlen(d) == n && !memcmp(d, dom, n);
}

/* The attribute (or capacity) name of domain dom, or NULL. */
static const struct gs_cel_attr *lookup(const struct ev *e, bool cap, const char *dom, size_t ndom, const char *name)
{
    const struct gs_cel_attr *v = cap ? e->dev->capacity : e->dev->attrs;
    size_t n = cap ? e->dev->ncapacity : e->dev->nattrs;
    for (size_t i = 0; i < n; i++)
        if (v[i].name && !strcmp(v[i].name, name) && dom_eq(v[i].domain, dom, ndom)) return &v[i];
    return NULL;
}

static size_t domain_size(const struct ev *e, bool cap, const char *dom, size_t ndom)
{
    const struct gs_cel_attr *v = cap ? e->dev->capacity : e->dev->attrs;
    size_t n = cap ? e->dev->ncapacity : e->dev->nattrs, c = 0;
    for (size_t i = 0; i < n; i++) if (dom_eq(v[i].domain, dom, ndom)) c++;
    return c;
}

static int vcmp_eq(struct ev *e, uint32_t col, const struct val *a, const struct val *b, bool *eq);

static int list_eq(struct ev *e, uint32_t col, const struct val *a, const struct val *b, bool *eq)
{
    *eq = false;
    if (a->l.n != b->l.n) return 0;
    for (size_t i = 0; i < a->l.n; i++) {
        bool x;
        int rc = vcmp_eq(e, col, &a->l.v[i], &b->l.v[i], &x);
        if (rc) return rc;
        if (!x) return 0;
    }
    *eq = true;
    return 0;
}

/* Equality as cel-go's heterogeneous equality: different types are unequal, int and uint by value. */
static int vcmp_eq(struct ev *e, uint32_t col, const struct val *a, const struct val *b, bool *eq)
{
    *eq = false;
    if (a->k == V_INT && b->k == V_UINT) { *eq = a->i >= 0 && (uint64_t)a->i == b->u; return 0; }
    if (a->k == V_UINT && b->k == V_INT) { *eq = b->i >= 0 && (uint64_t)b->i == a->u; return 0; }
    if (a->k != b->k) return 0;
    switch (a->k) {
    case V_NULL: *eq = true; return 0;
    case V_BOOL: *eq = a->b == b->b; return 0;
    case V_INT: *eq = a->i == b->i; return 0;
    case V_UINT: *eq = a->u == b->u; return 0;
    case V_QUANTITY: *eq = a->q == b->q; return 0;
    case V_STRING:
        if (charge(e, col, (int64_t)(a->s.n < b->s.n ? a->s.n : b->s.n) / 10)) return GS_EINVAL;
        *eq = a->s.n == b->s.n && !memcmp(a->s.p, b->s.p, a->s.n);
        return 0;
    case V_VERSION: {
        struct semver x, y;
        if (version_of(e, col, a, &x) || version_of(e, col, b, &y)) return GS_EINVAL;
        *eq = semver_cmp(&x, &y) == 0;
        return 0;
    }
    case V_LIST: return list_eq(e, col, a, b, eq);
    case V_DOMAIN_ATTRS: case V_DOMAIN_CAPS: *eq = a->m.n == b->m.n && !memcmp(a->m.dom, b->m.dom, a->m.n); return 0;
    case V_OPT:
        if (a->o.has != b->o.has) return 0;
        if (!a->o.has) { *eq = true; return 0; }
        return vcmp_eq(e, col, a->o.v, b->o.v, eq);
    default: *eq = true; return 0;   /* device, attributes: one of each exists */
    }
}

static int vcmp_order(struct ev *e, uint32_t col, const char *fn, const struct val *a, const struct val *b, int *c)
{
    if ((a->k == V_INT || a->k == V_UINT) && (b->k == V_INT || b->k == V_UINT)) {
        if (a->k == b->k) *c = a->k == V_INT ? (a->i > b->i) - (a->i < b->i) : (a->u > b->u) - (a->u < b->u);
        else if (a->k == V_INT) *c = a->i < 0 ? -1 : ((uint64_t)a->i > b->u) - ((uint64_t)a->i < b->u);
        else *c = b->i < 0 ? 1 : (a->u > (uint64_t)b->i) - (a->u < (uint64_t)b->i);
        return 0;
    }
    if (a->k != b->k || (a->k != V_STRING && a->k != V_BOOL)) {
        if (a->k == b->k && (a->k == V_VERSION || a->k == V_QUANTITY))
            return rt_fail(e, col, "found no matching overload for '%s' applied to '(%s, %s)': use compareTo(), isGreaterThan() or isLessThan()",
                           fn, vnames[a->k], vnames[b->k]);
        return no_overload2(e, col, fn, a, b);
    }
    if (a->k == V_BOOL) { *c = (int)a->b - (int)b->b; return 0; }
    size_t n = a->s.n < b->s.n ? a->s.n : b->s.n;
    if (charge(e, col, (int64_t)n / 10)) return GS_EINVAL;
    int r = memcmp(a->s.p, b->s.p, n);
    *c = r ? (r < 0 ? -1 : 1) : (a->s.n > b->s.n) - (a->s.n < b->s.n);
    return 0;
}

static int ev(struct ev *e, int32_t i, struct val *out);

static size_t utf8_len(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) if (((unsigned char)s[i] & 0xC0) != 0x80) c++;
    return c;
}

static int do_matches(struct ev *e, const struct gs__cel_node *n, const struct val *s, const struct val *pat, bool *out)
{
    if (charge(e, n->col, (int64_t)s->s.n + 1)) return GS_EINVAL;
    regmatch_t m = { .rm_so = 0, .rm_eo = (regoff_t)s->s.n };
    if (n->re >= 0) {
        *out = regexec(&e->p->res[n->re], s->s.p, 1, &m, REG_STARTEND) == 0;
        return 0;
    }
    if (charge(e, n->col, (int64_t)pat->s.n)) return GS_EINVAL;
    char *posix = NULL;
    int icase = 0;
    const char *why = NULL;
    size_t at = 0;
    int rc = gs__cel_regex_translate(pat->s.p, pat->s.n, &posix, &icase, &why, &at);
    if (rc == GS_ENOMEM) return rt_fail(e, n->col, "out of memory");
    if (rc) return rt_fail(e, n->col, "invalid regular expression at offset %zu: %s", at, why);
    regex_t re;
    int rrc = regcomp(&re, posix, REG_EXTENDED | REG_NOSUB | (icase ? REG_ICASE : 0));
    free(posix);
    if (rrc) {
        char buf[128];
        regerror(rrc, &re, buf, sizeof buf);
        regfree(&re);
        return rt_fail(e, n->col, "invalid regular expression: %s", buf);
    }
    *out = regexec(&re, s->s.p, 1, &m, REG_STARTEND) == 0;
    regfree(&re);
    return 0;
}

static int quantity_arg(struct ev *e, uint32_t col, const char *fn, const struct val *r, const struct val *a, int64_t *q)
{
    if (a->k == V_QUANTITY) { *q = a->q; return 0; }
    if (a->k == V_INT) {
        if (a->i > INT64_MAX / 1000 || a->i < INT64_MIN / 1000) return rt_fail(e, col, "quantity overflow");
        *q = a->i * 1000;
        return 0;
    }
    return no_overload_member(e, col, fn, r, a);
}

static int ev_call(struct ev *e, int32_t i, struct val *out)
{
    const struct gs__cel_node *n = &e->p->nodes[i];
    const int32_t *kids = e->p->kids ? e->p->kids + n->k : NULL;
    const char *name = e->p->pool + n->str;
    struct val r = { .k = V_NULL }, a = { .k = V_NULL }, b = { .k = V_NULL };
    bool member = n->a >= 0;

    switch (n->fn) {
    case CF_OPT_NONE:
        out->k = V_OPT; out->o.has = false; out->o.v = NULL;
        return 0;
    case CF_OPT_OF: {
        struct val *box = gs_arena_alloc(&e->arena, sizeof *box);
        if (!box) return rt_fail(e, n->col, "out of memory");
        if (ev(e, kids[0], box)) return GS_EINVAL;
        out->k = V_OPT; out->o.has = true; out->o.v = box;
        return 0;
    }
    case CF_ORVALUE: case CF_HASVALUE: case CF_VALUE:
        if (ev(e, n->a, &r)) return GS_EINVAL;
        if (r.k != V_OPT) return no_overload_member(e, n->col, name, &r, NULL);
        if (n->fn == CF_HASVALUE) { out->k = V_BOOL; out->b = r.o.has; return 0; }
        if (r.o.has) { *out = *r.o.v; return 0; }
        if (n->fn == CF_VALUE) return rt_fail(e, n->col, "optional.none() dereference");
        return ev(e, kids[0], out);   /* the default is evaluated only when needed */
    default: break;
    }

    if (member && ev(e, n->a, &r)) return GS_EINVAL;
    if (n->n > 0 && ev(e, kids[0], &a)) return GS_EINVAL;
    if (n->n > 1 && ev(e, kids[1], &b)) return GS_EINVAL;

    switch (n->fn) {
    case CF_SIZE: {
        const struct val *x = member ? &r : &a;
        out->k = V_INT;
        if (x->k == V_STRING) { if (charge(e, n->col, (int64_t)x->s.n / 10)) return GS_EINVAL; out->i = (int64_t)utf8_len(x->s.p, x->s.n); }
        else if (x->k == V_LIST) out->i = (int64_t)x->l.n;
        else if (x->k == V_DOMAIN_ATTRS || x->k == V_DOMAIN_CAPS) out->i = (int64_t)domain_size(e, x->k == V_DOMAIN_CAPS, x->m.dom, x->m.n);
        else return member ? no_overload_member(e, n->col, name, x, NULL) : no_overload1(e, n->col, name, x);
        return 0;
    }
    case CF_SEMVER: case CF_ISSEMVER: {
        if (a.k != V_STRING) return no_overload1(e, n->col, name, &a);
        struct semver sv;
        bool ok = semver_parse(a.s.p, a.s.n, &sv);
        if (n->fn == CF_ISSEMVER) { out->k = V_BOOL; out->b = ok; return 0; }
        if (!ok) return rt_fail(e, n->col, "semver(\"%.*s\"): not a semantic version MAJOR.MINOR.PATCH", (int)(a.s.n > 64 ? 64 : a.s.n), a.s.p);
        out->k = V_VERSION; out->s = a.s;
        return 0;
    }
    case CF_QUANTITY: case CF_ISQUANTITY: {
        if (a.k != V_STRING) return no_overload1(e, n->col, name, &a);
        int64_t q = 0;
        const char *why = NULL;
        int rc = strlen(a.s.p) == a.s.n ? gs_quantity_parse(a.s.p, &q, &why) : GS_EINVAL;
        if (n->fn == CF_ISQUANTITY) { out->k = V_BOOL; out->b = rc == 0; return 0; }
        if (rc) return rt_fail(e, n->col, "quantity(\"%.*s\"): %s", (int)(a.s.n > 64 ? 64 : a.s.n), a.s.p,
                               why ? why : rc == GS_ERANGE ? "out of range" : "not a quantity");
        out->k = V_QUANTITY; out->q = q;
        return 0;
    }
    case CF_INT: case CF_UINT: {
        bool to_int = n->fn == CF_INT;
        if (a.k == V_INT) {
            if (!to_int && a.i < 0) return rt_fail(e, n->col, "uint() of %lld: range error", (long long)a.i);
            if (to_int) *out = a; else { out->k = V_UINT; out->u = (uint64_t)a.i; }
            return 0;
        }
        if (a.k == V_UINT) {
            if (to_int && a.u > INT64_MAX) return rt_fail(e, n->col, "int() of %llu: range error", (unsigned long long)a.u);
            if (to_int) { out->k = V_INT; out->i = (int64_t)a.u; } else *out = a;
            return 0;
        }
        if (a.k == V_STRING) {
            char *end = NULL;
            if (a.s.n == 0 || a.s.n > 24) return rt_fail(e, n->col, "%s(\"%.*s\"): not a number", name, (int)(a.s.n > 24 ? 24 : a.s.n), a.s.p);
            char buf[32];
            memcpy(buf, a.s.p, a.s.n);
            buf[a.s.n] = 0;
            if (to_int) {
                long long v = strtoll(buf, &end, 10);
                if (*end || (buf[0] != '-' && (buf[0] < '0' || buf[0] > '9')) || ((v == LLONG_MAX || v == LLONG_MIN) && strlen(buf) > 18))
                    return rt_fail(e, n->col, "int(\"%s\"): not an int", buf);
                out->k = V_INT; out->i = v;
            } else {
                unsigned long long v = strtoull(buf, &end, 10);
                if (*end || buf[0] < '0' || buf[0] > '9' || (v == ULLONG_MAX && strlen(buf) > 19))
                    return rt_fail(e, n->col, "uint(\"%s\"): not a uint", buf);
                out->k = V_UINT; out->u = v;
            }
            return 0;
        }
        return no_overload1(e, n->col, name, &a);
    }
    case CF_STRINGCONV: {
        char buf[48];
        int len;
        switch (a.k) {
        case V_STRING: case V_VERSION: out->k = V_STRING; out->s = a.s; return 0;
        case V_BOOL: out->k = V_STRING; out->s.p = a.b ? "true" : "false"; out->s.n = strlen(out->s.p); return 0;
        case V_INT: len = snprintf(buf, sizeof buf, "%lld", (long long)a.i); break;
        case V_UINT: len = snprintf(buf, sizeof buf, "%llu", (unsigned long long)a.u); break;
        case V_QUANTITY: len = gs_quantity_format(a.q, buf, sizeof buf); break;
        default: return no_overload1(e, n->col, name, &a);
        }
        char *s = gs_arena_strdup(&e->arena, buf);
        if (!s) return rt_fail(e, n->col, "out of memory");
        out->k = V_STRING; out->s.p = s; out->s.n = (size_t)len;
        return 0;
    }
    case CF_MATCHES: {
        const struct val *s = member ? &r : &a, *pat = member ? &a : &b;
        if (s->k != V_STRING || pat->k != V_STRING) {
            if (member) return no_overload_member(e, n->col, name, s, pat);
            return no_overload2(e, n->col, name, s, pat);
        }
        bool m = false;
        if (do_matches(e, n, s, pat, &m)) return GS_EINVAL;
        out->k = V_BOOL; out->b = m;
        return 0;
    }
    case CF_STARTSWITH: case CF_ENDSWITH: case CF_CONTAINS: {
        if (r.k != V_STRING || a.k != V_STRING) return no_overload_member(e, n->col, name, &r, &a);
        if (charge(e, n->col, (int64_t)(n->fn == CF_CONTAINS ? r.s.n : a.s.n) / 10 + 1)) return GS_EINVAL;
        bool m = false;
        if (a.s.n <= r.s.n) {
            if (n->fn == CF_STARTSWITH) m = !memcmp(r.s.p, a.s.p, a.s.n);
            else if (n->fn == CF_ENDSWITH) m = !memcmp(r.s.p + r.s.n - a.s.n, a.s.p, a.s.n);
            else m = a.s.n == 0 || memmem(r.s.p, r.s.n, a.s.p, a.s.n) != NULL;
        }
        out->k = V_BOOL; out->b = m;
        return 0;
    }
    case CF_LOWER: case CF_UPPER: {
        if (r.k != V_STRING) return no_overload_member(e, n->col, name, &r, NULL);
        if (charge(e, n->col, (int64_t)r.s.n / 10 + 1)) return GS_EINVAL;
        char *s = gs_arena_alloc(&e->arena, r.s.n + 1);
        if (!s) return rt_fail(e, n->col, "out of memory");
        for (size_t j = 0; j < r.s.n; j++) {
            char c = r.s.p[j];
            if (n->fn == CF_LOWER && c >= 'A' && c <= 'Z') c = (char)(c + 32);
            if (n->fn == CF_UPPER && c >= 'a' && c <= 'z') c = (char)(c - 32);
            s[j] = c;
        }
        s[r.s.n] = 0;
        out->k = V_STRING; out->s.p = s; out->s.n = r.s.n;
        return 0;
    }
    case CF_COMPARETO: case CF_ISGREATER: case CF_ISLESS: {
        int c;
        if (r.k == V_VERSION && a.k == V_VERSION) {
            struct semver x, y;
            if (version_of(e, n->col, &r, &x) || version_of(e, n->col, &a, &y)) return GS_EINVAL;
            c = semver_cmp(&x, &y);
        } else if (r.k == V_QUANTITY && a.k == V_QUANTITY) {
            c = (r.q > a.q) - (r.q < a.q);
        } else {
            return no_overload_member(e, n->col, name, &r, &a);
        }
        if (n->fn == CF_COMPARETO) { out->k = V_INT; out->i = c; }
        else { out->k = V_BOOL; out->b = n->fn == CF_ISGREATER ? c > 0 : c < 0; }
        return 0;
    }
    case CF_MAJOR: case CF_MINOR: case CF_PATCH: {
        if (r.k != V_VERSION) return no_overload_member(e, n->col, name, &r, NULL);
        struct semver x;
        if (version_of(e, n->col, &r, &x)) return GS_EINVAL;
        uint64_t v = x.v[n->fn - CF_MAJOR];
        if (v > INT64_MAX) return rt_fail(e, n->col, "%s(): version part out of int range", name);
        out->k = V_INT; out->i = (int64_t)v;
        return 0;
    }
    case CF_ASINTEGER: case CF_ISINTEGER: case CF_SIGN:
        if (r.k != V_QUANTITY) return no_overload_member(e, n->col, name, &r, NULL);
        if (n->fn == CF_SIGN) { out->k = V_INT; out->i = (r.q > 0) - (r.q < 0); return 0; }
        if (n->fn == CF_ISINTEGER) { out->k = V_BOOL; out->b = r.q % 1000 == 0; return 0; }
        if (r.q % 1000) return rt_fail(e, n->col, "asInteger(): the quantity is not a whole number");
        out->k = V_INT; out->i = r.q / 1000;
        return 0;
    case CF_ADD: case CF_SUB: {
        if (r.k != V_QUANTITY) return no_overload_member(e, n->col, name, &r, &a);
        int64_t q = 0;
        if (quantity_arg(e, n->col, name, &r, &a, &q)) return GS_EINVAL;
        int64_t res;
        if (n->fn == CF_ADD ? __builtin_add_overflow(r.q, q, &res) : __builtin_sub_overflow(r.q, q, &res))
            return rt_fail(e, n->col, "%s(): quantity overflow", name);
        out->k = V_QUANTITY; out->q = res;
        return 0;
    }
    default:
        return rt_fail(e, n->col, "undeclared reference to '%s'", name);
    }
}

/* Field or key access on a map-like value; missing keys are an error unless opt. */
static int access(struct ev *e, const struct gs__cel_node *n, const struct val *m, const char *key, size_t nkey,
                  bool opt, struct val *out)
{
    if (m->k == V_OPT) {
        if (!m->o.has) { *out = *m; return 0; }
        m = m->o.v;
        opt = true;
    }
    struct val r;
    bool found = true;
    switch (m->k) {
    case V_DEVICE:
        if (nkey == 6 && !memcmp(key, "driver", 6)) { r.k = V_STRING; r.s.p = e->dev->driver ? e->dev->driver : ""; r.s.n = strlen(r.s.p); }
        else if (nkey == 10 && !memcmp(key, "attributes", 10)) r.k = V_ATTRS;
        else if (nkey == 8 && !memcmp(key, "capacity", 8)) r.k = V_CAPS;
        else if (nkey == 24 && !memcmp(key, "allowMultipleAllocations", 24)) { r.k = V_BOOL; r.b = e->dev->allow_multiple_allocations; }
        else return rt_fail(e, n->col, "no such key: %.*s", (int)nkey, key);
        break;
    case V_ATTRS: case V_CAPS:
        /* every domain exists, empty when no attribute is in it */
        r.k = m->k == V_ATTRS ? V_DOMAIN_ATTRS : V_DOMAIN_CAPS;
        r.m.dom = key; r.m.n = nkey;
        break;
    case V_DOMAIN_ATTRS: case V_DOMAIN_CAPS: {
        const struct gs_cel_attr *a = strlen(key) == nkey ? lookup(e, m->k == V_DOMAIN_CAPS, m->m.dom, m->m.n, key) : NULL;
        if (a) r = from_attr(a);
        else found = false;
        break;
    }
    default:
        return rt_fail(e, n->col, "type '%s' does not support field selection", vnames[m->k]);
    }
    if (!found && !opt) return rt_fail(e, n->col, "no such key: %.*s", (int)(nkey > 64 ? 64 : nkey), key);
    if (opt) {
        out->k = V_OPT;
        out->o.has = found;
        out->o.v = NULL;
        if (found) {
            struct val *box = gs_arena_alloc(&e->arena, sizeof *box);
            if (!box) return rt_fail(e, n->col, "out of memory");
            *box = r;
            out->o.v = box;
        }
        return 0;
    }
    *out = r;
    return 0;
}

static int ev_in(struct ev *e, const struct gs__cel_node *n, const struct val *a, const struct val *b, bool *res)
{
    *res = false;
    if (b->k == V_LIST) {
        for (size_t j = 0; j < b->l.n; j++) {
            bool eq;
            if (charge(e, n->col, 1) || vcmp_eq(e, n->col, a, &b->l.v[j], &eq)) return GS_EINVAL;
            if (eq) { *res = true; return 0; }
        }
        return 0;
    }
    if (a->k != V_STRING) {
        if (b->k == V_ATTRS || b->k == V_CAPS || b->k == V_DOMAIN_ATTRS || b->k == V_DOMAIN_CAPS) return 0;
        return no_overload2(e, n->col, "@in", a, b);
    }
    if (b->k == V_ATTRS || b->k == V_CAPS) {
        *res = domain_size(e, b->k == V_CAPS, a->s.p, a->s.n) > 0;
        return 0;
    }
    if (b->k == V_DOMAIN_ATTRS || b->k == V_DOMAIN_CAPS) {
        *res = strlen(a->s.p) == a->s.n && lookup(e, b->k == V_DOMAIN_CAPS, b->m.dom, b->m.n, a->s.p) != NULL;
        return 0;
    }
    return no_overload2(e, n->col, "@in", a, b);
}

static int ev_arith(struct ev *e, const struct gs__cel_node *n, const struct val *a, const struct val *b, struct val *out)
{
    static const char *const names[] = { [CB_ADD] = "_+_", [CB_SUB] = "_-_", [CB_MUL] = "_*_", [CB_DIV] = "_/_", [CB_MOD] = "_%_" };
    const char *fn = names[n->sub];
    if (n->sub == CB_ADD && a->k == V_STRING && b->k == V_STRING) {
        if (charge(e, n->col, (int64_t)(a->s.n + b->s.n) / 10 + 1)) return GS_EINVAL;
        char *s = gs_arena_alloc(&e->arena, a->s.n + b->s.n + 1);
        if (!s) return rt_fail(e, n->col, "out of memory");
        memcpy(s, a->s.p, a->s.n);
        memcpy(s + a->s.n, b->s.p, b->s.n);
        s[a->s.n + b->s.n] = 0;
        out->k = V_STRING; out->s.p = s; out->s.n = a->s.n + b->s.n;
        return 0;
    }
    if (n->sub == CB_ADD && a->k == V_LIST && b->k == V_LIST) {
        if (charge(e, n->col, (int64_t)(a->l.n + b->l.n))) return GS_EINVAL;
        struct val *v = gs_arena_calloc(&e->arena, a->l.n + b->l.n + 1, sizeof *v);
        if (!v) return rt_fail(e, n->col, "out of memory");
        if (a->l.n) memcpy(v, a->l.v, a->l.n * sizeof *v);
        if (b->l.n) memcpy(v + a->l.n, b->l.v, b->l.n * sizeof *v);
        out->k = V_LIST; out->l.v = v; out->l.n = a->l.n + b->l.n;
        return 0;
    }
    if (a->k == V_INT && b->k == V_INT) {
        int64_t r = 0;
        bool ovf = false;
        switch (n->sub) {
        case CB_ADD: ovf = __builtin_add_overflow(a->i, b->i, &r); break;
        case CB_SUB: ovf = __builtin_sub_overflow(a->i, b->i, &r); break;
        case CB_MUL: ovf = __builtin_mul_overflow(a->i, b->i, &r); break;
        default:
            if (b->i == 0) return rt_fail(e, n->col, n->sub == CB_DIV ? "division by zero" : "modulus by zero");
            if (a->i == INT64_MIN && b->i == -1) { ovf = n->sub == CB_DIV; r = 0; }
            else r = n->sub == CB_DIV ? a->i / b->i : a->i % b->i;
        }
        if (ovf) return rt_fail(e, n->col, "integer overflow");
        out->k = V_INT; out->i = r;
        return 0;
    }
    if (a->k == V_UINT && b->k == V_UINT) {
        uint64_t r = 0;
        bool ovf = false;
        switch (n->sub) {
        case CB_ADD: ovf = __builtin_add_overflow(a->u, b->u, &r); break;
        case CB_SUB: ovf = __builtin_sub_overflow(a->u, b->u, &r); break;
        case CB_MUL: ovf = __builtin_mul_overflow(a->u, b->u, &r); break;
        default:
            if (b->u == 0) return rt_fail(e, n->col, n->sub == CB_DIV ? "division by zero" : "modulus by zero");
            r = n->sub == CB_DIV ? a->u / b->u : a->u % b->u;
        }
        if (ovf) return rt_fail(e, n->col, "unsigned integer overflow");
        out->k = V_UINT; out->u = r;
        return 0;
    }
    return no_overload2(e, n->col, fn, a, b);
}

static int ev_logic(struct ev *e, int32_t i, struct val *out)
{
    const struct gs__cel_node *n = &e->p->nodes[i];
    bool is_and = n->op == CN_AND;
    struct val a, b;
    /* CEL's commutative semantics: the deciding value wins over an error on either side */
    int ra = ev(e, n->a, &a);
    if (!ra && a.k != V_BOOL) ra = rt_fail(e, e->p->nodes[n->a].col, "found no matching overload for '%s' applied to '(%s, ...)'",
                                           is_and ? "_&&_" : "_||_", vnames[a.k]);
    if (!ra && a.b != is_and) { out->k = V_BOOL; out->b = a.b; return 0; }
    if (e->cost > GS_CEL_MAX_COST) return GS_EINVAL;   /* a cost error is never forgiven */
    struct gs_cel_error saved;
    if (ra && e->err) saved = *e->err;
    int rb = ev(e, n->b, &b);
    if (!rb && b.k != V_BOOL) rb = rt_fail(e, e->p->nodes[n->b].col, "found no matching overload for '%s' applied to '(..., %s)'",
                                           is_and ? "_&&_" : "_||_", vnames[b.k]);
    if (!rb && b.b != is_and) { out->k = V_BOOL; out->b = b.b; return 0; }
    if (ra) {
        if (e->err && e->cost <= GS_CEL_MAX_COST) *e->err = saved;
        return GS_EINVAL;
    }
    if (rb) return GS_EINVAL;
    out->k = V_BOOL; out->b = is_and;
    return 0;
}

static int ev(struct ev *e, int32_t i, struct val *out)
{
    const struct gs__cel_node *n = &e->p->nodes[i];
    if (charge(e, n->col, 1)) return GS_EINVAL;
    switch (n->op) {
    case CN_NULL: out->k = V_NULL; return 0;
    case CN_BOOL: out->k = V_BOOL; out->b = n->lit.b; return 0;
    case CN_INT: out->k = V_INT; out->i = n->lit.i; return 0;
    case CN_UINT: out->k = V_UINT; out->u = n->lit.u; return 0;
    case CN_STRING: out->k = V_STRING; out->s.p = e->p->pool + n->str; out->s.n = n->n; return 0;
    case CN_DEVICE: out->k = V_DEVICE; return 0;
    case CN_VAR: *out = e->slots[n->a]; return 0;
    case CN_SELECT: {
        struct val m;
        if (ev(e, n->a, &m)) return GS_EINVAL;
        const char *key = e->p->pool + n->str;
        return access(e, n, &m, key, strlen(key), n->sub, out);
    }
    case CN_INDEX: {
        struct val m, k;
        if (ev(e, n->a, &m) || ev(e, n->b, &k)) return GS_EINVAL;
        bool opt = n->sub;
        if (m.k == V_OPT && !m.o.has) { *out = m; return 0; }
        const struct val *mm = m.k == V_OPT ? m.o.v : &m;
        if (m.k == V_OPT) opt = true;
        if (mm->k == V_LIST) {
            int64_t idx;
            if (k.k == V_INT) idx = k.i;
            else if (k.k == V_UINT) idx = k.u > INT64_MAX ? -1 : (int64_t)k.u;
            else return no_overload2(e, n->col, "_[_]", mm, &k);
            if (idx < 0 || (uint64_t)idx >= mm->l.n) {
                if (opt) { out->k = V_OPT; out->o.has = false; out->o.v = NULL; return 0; }
                return rt_fail(e, n->col, "index out of range: %lld", (long long)idx);
            }
            if (!opt) { *out = mm->l.v[idx]; return 0; }
            out->k = V_OPT; out->o.has = true; out->o.v = &mm->l.v[idx];
            return 0;
        }
        if (k.k != V_STRING) return no_overload2(e, n->col, "_[_]", mm, &k);
        if (mm->k == V_DEVICE) return rt_fail(e, n->col, "found no matching overload for '_[_]' applied to '(device, string)'");
        return access(e, n, mm, k.s.p, k.s.n, opt, out);
    }
    case CN_HAS: {
        struct val m;
        if (ev(e, n->a, &m)) return GS_EINVAL;
        const char *key = e->p->pool + n->str;
        out->k = V_BOOL;
        if (m.k == V_DEVICE) {
            out->b = !strcmp(key, "driver") || !strcmp(key, "attributes") || !strcmp(key, "capacity") ||
                     !strcmp(key, "allowMultipleAllocations");
            return 0;
        }
        if (m.k == V_ATTRS || m.k == V_CAPS) { out->b = domain_size(e, m.k == V_CAPS, key, strlen(key)) > 0; return 0; }
        if (m.k == V_DOMAIN_ATTRS || m.k == V_DOMAIN_CAPS) {
            out->b = lookup(e, m.k == V_DOMAIN_CAPS, m.m.dom, m.m.n, key) != NULL;
            return 0;
        }
        return rt_fail(e, n->col, "invalid type for field selection: %s", vnames[m.k]);
    }
    case CN_CALL: return ev_call(e, i, out);
    case CN_LIST: {
        struct val *v = n->n ? gs_arena_calloc(&e->arena, n->n, sizeof *v) : NULL;
        if (n->n && !v) return rt_fail(e, n->col, "out of memory");
        for (uint32_t j = 0; j < n->n; j++)
            if (ev(e, e->p->kids[n->k + j], &v[j])) return GS_EINVAL;
        out->k = V_LIST; out->l.v = v; out->l.n = n->n;
        return 0;
    }
    case CN_NOT: {
        struct val a;
        if (ev(e, n->a, &a)) return GS_EINVAL;
        if (a.k != V_BOOL) return no_overload1(e, n->col, "!_", &a);
        out->k = V_BOOL; out->b = !a.b;
        return 0;
    }
    case CN_NEG: {
        struct val a;
        if (ev(e, n->a, &a)) return GS_EINVAL;
        if (a.k != V_INT) return no_overload1(e, n->col, "-_", &a);
        if (a.i == INT64_MIN) return rt_fail(e, n->col, "integer overflow");
        out->k = V_INT; out->i = -a.i;
        return 0;
    }
    case CN_AND: case CN_OR: return ev_logic(e, i, out);
    case CN_COND: {
        struct val c;
        if (ev(e, n->a, &c)) return GS_EINVAL;
        if (c.k != V_BOOL) return rt_fail(e, n->col, "found no matching overload for '_?_:_' applied to '(%s, ...)'", vnames[c.k]);
        return ev(e, c.b ? n->b : n->c, out);
    }
    case CN_BIND: {
        if (ev(e, n->b, &e->slots[n->a])) return GS_EINVAL;
        return ev(e, n->c, out);
    }
    case CN_BINARY: {
        struct val a, b;
        if (ev(e, n->a, &a) || ev(e, n->b, &b)) return GS_EINVAL;
        switch (n->sub) {
        case CB_EQ: case CB_NE: {
            bool eq;
            if (vcmp_eq(e, n->col, &a, &b, &eq)) return GS_EINVAL;
            out->k = V_BOOL; out->b = n->sub == CB_EQ ? eq : !eq;
            return 0;
        }
        case CB_LT: case CB_LE: case CB_GT: case CB_GE: {
            static const char *const names[] = { [CB_LT] = "_<_", [CB_LE] = "_<=_", [CB_GT] = "_>_", [CB_GE] = "_>=_" };
            int c = 0;
            if (vcmp_order(e, n->col, names[n->sub], &a, &b, &c)) return GS_EINVAL;
            out->k = V_BOOL;
            out->b = n->sub == CB_LT ? c < 0 : n->sub == CB_LE ? c <= 0 : n->sub == CB_GT ? c > 0 : c >= 0;
            return 0;
        }
        case CB_IN: {
            bool r;
            if (ev_in(e, n, &a, &b, &r)) return GS_EINVAL;
            out->k = V_BOOL; out->b = r;
            return 0;
        }
        default: return ev_arith(e, n, &a, &b, out);
        }
    }
    default:
        return rt_fail(e, n->col, "internal error: unresolved node");
    }
}

int gs_cel_eval_cost(const struct gs_cel_program *p, const struct gs_cel_device *dev, bool *result,
                     int64_t *cost, struct gs_cel_error *err)
{
    if (err) { err->column = 0; err->msg[0] = 0; }
    if (!p || !dev) {
        if (err) { err->column = 1; snprintf(err->msg, sizeof err->msg, "no program or device"); }
        return GS_EINVAL;
    }
    struct val slots_small[8];
    struct val *slots = slots_small;
    if (p->nslots > 8) {
        slots = calloc((size_t)p->nslots, sizeof *slots);
        if (!slots) { if (err) { err->column = 1; snprintf(err->msg, sizeof err->msg, "out of memory"); } return GS_ENOMEM; }
    }
    struct ev e = { .p = p, .dev = dev, .slots = slots, .err = err };
    gs_arena_init(&e.arena, 4096);
    struct val v;
    int rc = ev(&e, p->root, &v);
    if (!rc) {
        if (v.k == V_BOOL) *result = v.b;
        else rc = rt_fail(&e, p->nodes[p->root].col, "expression must evaluate to bool, not '%s'", vnames[v.k]);
    }
    gs_arena_free(&e.arena);
    if (slots != slots_small) free(slots);
    if (cost) *cost = e.cost;
    return rc;
}

int gs_cel_eval(const struct gs_cel_program *p, const struct gs_cel_device *dev, bool *result, struct gs_cel_error *err)
{
    return gs_cel_eval_cost(p, dev, result, NULL, err);
}
