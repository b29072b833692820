/*
 * cel.c - the CEL compiler for DRA device selectors: lexer, parser, type checker.
 *
 * No CEL implementation in C exists in Debian, and selectors use a small corner of the
 * language, so this is a direct one: a hand-written lexer feeding a recursive-descent parser
 * (one function per precedence level, as the CEL grammar is written), which appends nodes to
 * one array (cel_internal.h). A second pass resolves names (`device`, cel.bind variables),
 * turns the has() and cel.bind() macros into their own nodes, gives each node a static type
 * and rejects what can never work ("found no matching overload for '_==_' applied to
 * '(string, int)'"), the same errors cel-go gives at compile time. Attribute values are typed
 * only at run time (a slice decides whether productName is a string), so checks on them are
 * left to the evaluator (cel_eval.c).
 *
 * Regexes given as literals to matches() are translated from RE2 to POSIX ERE and compiled
 * here once; the RE2 features POSIX cannot express are refused with the column of the pattern.
 */
#include "core/cel.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cel_internal.h"
#include "core/error.h"

/*--- Lexer ---*/

enum tok {
    T_EOF, T_INT, T_UINT, T_STRING, T_IDENT, T_TRUE, T_FALSE, T_NULL, T_IN,
    T_LP, T_RP, T_LB, T_RB, T_LC, T_RC, T_DOT, T_DOTQ, T_LBQ, T_COMMA, T_QUESTION, T_COLON,
    T_NOT, T_MINUS, T_PLUS, T_STAR, T_SLASH, T_PERCENT,
    T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE, T_AND, T_OR,
};

static const char *const tok_text[] = {
    "end of expression", "integer", "uint", "string", "identifier", "true", "false", "null", "in",
    "(", ")", "[", "]", "{", "}", ".", ".?", "[?", ",", "?", ":",
    "!", "-", "+", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||",
};
_Static_assert(sizeof tok_text / sizeof tok_text[0] == T_OR + 1, "tok_text matches enum tok");

struct parser {
    const char *src; size_t len, pos;
    struct gs_cel_program *p;
    /* current token */
    enum tok t; size_t tcol;           /* 1-based */
    uint64_t tnum; uint32_t tstr, tlen; /* literal value, pool offset and length */
    int depth;
    struct gs_cel_error *err;
    int rc;                            /* first error, sticky */
};

static int fail(struct parser *ps, size_t col, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct parser *ps, size_t col, int rc, const char *fmt, ...)
{
    if (ps->rc) return ps->rc;
    ps->rc = rc;
    if (ps->err) {
        ps->err->column = col ? col : 1;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->err->msg, sizeof ps->err->msg, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static int pool_reserve(struct gs_cel_program *p, size_t more)
{
    if (p->npool + more <= p->cappool) return 0;
    size_t cap = p->cappool ? p->cappool : 256;
    while (cap < p->npool + more) cap *= 2;
    char *np = realloc(p->pool, cap);
    if (!np) return GS_ENOMEM;
    p->pool = np;
    p->cappool = cap;
    return 0;
}

static int pool_put(struct parser *ps, const char *s, size_t n, uint32_t *off)
{
    if (pool_reserve(ps->p, n + 1)) return fail(ps, ps->tcol, GS_ENOMEM, "out of memory");
    *off = (uint32_t)ps->p->npool;
    memcpy(ps->p->pool + ps->p->npool, s, n);
    ps->p->pool[ps->p->npool + n] = 0;
    ps->p->npool += n + 1;
    return 0;
}

static int put_utf8(char *o, uint32_t c)
{
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F)); return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F)); return 4;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A quoted string starting at ps->pos (the quote), raw when r is set. The decoded text goes
 * to the pool; escapes are CEL's (\n \t \\ \" \xHH \uHHHH \UHHHHHHHH \ooo ...). */
static int lex_string(struct parser *ps, bool raw)
{
    size_t start = ps->pos;
    char q = ps->src[ps->pos];
    if (ps->pos + 2 < ps->len && ps->src[ps->pos + 1] == q && ps->src[ps->pos + 2] == q)
        return fail(ps, start + 1, GS_EPARSE, "Syntax error: triple-quoted strings are not supported");
    ps->pos++;
    /* decoded text is never longer than the source text */
    char *buf = malloc(ps->len - ps->pos + 1);
    if (!buf) return fail(ps, start + 1, GS_ENOMEM, "out of memory");
    size_t n = 0;
    for (;;) {
        if (ps->pos >= ps->len || ps->src[ps->pos] == '\n' || ps->src[ps->pos] == '\r') {
            free(buf);
            return fail(ps, start + 1, GS_EPARSE, "Syntax error: unterminated string literal");
        }
        char c = ps->src[ps->pos];
        if (c == q) { ps->pos++; break; }
        if (c != '\\' || raw) { buf[n++] = c; ps->pos++; continue; }
        size_t ecol = ps->pos + 1;
        if (ps->pos + 1 >= ps->len) { free(buf); return fail(ps, ecol, GS_EPARSE, "Syntax error: unterminated string literal"); }
        char e = ps->src[ps->pos + 1];
        ps->pos += 2;
        switch (e) {
        case 'a': buf[n++] = '\a'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'v': buf[n++] = '\v'; break;
        case '\\': case '\'': case '"': case '`': case '?': buf[n++] = e; break;
        case 'x': case 'X': case 'u': case 'U': {
            int digits = (e == 'x' || e == 'X') ? 2 : e == 'u' ? 4 : 8;
            uint32_t v = 0;
            for (int i = 0; i < digits; i++) {
                int h = ps->pos < ps->len ? hexval(ps->src[ps->pos]) : -1;
                if (h < 0) { free(buf); return fail(ps, ecol, GS_EPARSE, "Syntax error: invalid escape sequence: \\%c needs %d hex digits", e, digits); }
                v = v * 16 + (uint32_t)h;
                ps->pos++;
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
                free(buf);
                return fail(ps, ecol, GS_EPARSE, "Syntax error: invalid unicode code point in escape sequence");
            }
            if (digits == 2) buf[n++] = (char)v;
            else n += (size_t)put_utf8(buf + n, v);
            break;
        }
        default:
            if (e >= '0' && e <= '3' && ps->pos + 1 < ps->len &&
                ps->src[ps->pos] >= '0' && ps->src[ps->pos] <= '7' &&
                ps->src[ps->pos + 1] >= '0' && ps->src[ps->pos + 1] <= '7') {
                buf[n++] = (char)((e - '0') * 64 + (ps->src[ps->pos] - '0') * 8 + (ps->src[ps->pos + 1] - '0'));
                ps->pos += 2;
                break;
            }
            free(buf);
            return fail(ps, ecol, GS_EPARSE, "Syntax error: invalid escape sequence '\\%c'", e);
        }
    }
    ps->t = T_STRING;
    ps->tlen = (uint32_t)n;
    int rc = pool_put(ps, buf, n, &ps->tstr);
    free(buf);
    return rc;
}

static bool is_ident_start(char c) { return c == '_' || ((c | 32) >= 'a' && (c | 32) <= 'z'); }
static bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

static int lex_number(struct parser *ps)
{
    size_t start = ps->pos;
    const char *s = ps->src;
    uint64_t v = 0;
    bool overflow = false;
    if (s[ps->pos] == '0' && ps->pos + 1 < ps->len && (s[ps->pos + 1] == 'x' || s[ps->pos + 1] == 'X')) {
        ps->pos += 2;
        if (ps->pos >= ps->len || hexval(s[ps->pos]) < 0)
            return fail(ps, start + 1, GS_EPARSE, "Syntax error: hexadecimal literal needs digits");
        while (ps->pos < ps->len && hexval(s[ps->pos]) >= 0) {
            if (v > (UINT64_MAX >> 4)) overflow = true;
            v = v * 16 + (uint64_t)hexval(s[ps->pos++]);
        }
    } else {
        while (ps->pos < ps->len && s[ps->pos] >= '0' && s[ps->pos] <= '9') {
            unsigned d = (unsigned)(s[ps->pos++] - '0');
            if (v > (UINT64_MAX - d) / 10) overflow = true;
            v = v * 10 + d;
        }
        if (ps->pos < ps->len && (s[ps->pos] == '.' || s[ps->pos] == 'e' || s[ps->pos] == 'E') &&
            !(s[ps->pos] == '.' && ps->pos + 1 < ps->len && !(s[ps->pos + 1] >= '0' && s[ps->pos + 1] <= '9')))
            return fail(ps, start + 1, GS_EPARSE,
                        "floating-point literals are not supported in device selectors; use an int or quantity(\"...\")");
    }
    bool u = ps->pos < ps->len && (s[ps->pos] == 'u' || s[ps->pos] == 'U');
    if (u) ps->pos++;
    if (ps->pos < ps->len && is_ident_start(s[ps->pos]))
        return fail(ps, ps->pos + 1, GS_EPARSE, "Syntax error: unexpected character '%c' after number", s[ps->pos]);
    /* int literals may reach 2^63 so that -9223372036854775808 parses; the parser checks */
    if (overflow || (u ? false : v > (uint64_t)INT64_MAX + 1))
        return fail(ps, start + 1, GS_EPARSE, "Syntax error: %s literal out of range", u ? "uint" : "int");
    ps->t = u ? T_UINT : T_INT;
    ps->tnum = v;
    return 0;
}


static const char *const reserved[] = {
    "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
    "loop", "package", "namespace", "return", "var", "void", "while",
};

static int lex(struct parser *ps)
{
    if (ps->rc) return ps->rc;
    const char *s = ps->src;
    for (;;) {
        while (ps->pos < ps->len && (s[ps->pos] == ' ' || s[ps->pos] == '\t' || s[ps->pos] == '\n' ||
                                     s[ps->pos] == '\r' || s[ps->pos] == '\f'))
            ps->pos++;
        if (ps->pos + 1 < ps->len && s[ps->pos] == '/' && s[ps->pos + 1] == '/') {
            while (ps->pos < ps->len && s[ps->pos] != '\n') ps->pos++;
            continue;
        }
        break;
    }
    ps->tcol = ps->pos + 1;
    if (ps->pos >= ps->len) { ps->t = T_EOF; return 0; }
    char c = s[ps->pos];
    char d = ps->pos + 1 < ps->len ? s[ps->pos + 1] : 0;
    if (c >= '0' && c <= '9') return lex_number(ps);
    if (c == '"' || c == '\'') return lex_string(ps, false);
    if ((c == 'r' || c == 'R') && (d == '"' || d == '\'')) { ps->pos++; return lex_string(ps, true); }
    if ((c == 'b' || c == 'B') && (d == '"' || d == '\''))
        return fail(ps, ps->tcol, GS_EPARSE, "bytes literals are not supported in device selectors");
    if (is_ident_start(c)) {
        size_t st = ps->pos;
        while (ps->pos < ps->len && is_ident_char(s[ps->pos])) ps->pos++;
        size_t n = ps->pos - st;
        if (n == 4 && !memcmp(s + st, "true", 4)) { ps->t = T_TRUE; return 0; }
        if (n == 5 && !memcmp(s + st, "false", 5)) { ps->t = T_FALSE; return 0; }
        if (n == 4 && !memcmp(s + st, "null", 4)) { ps->t = T_NULL; return 0; }
        if (n == 2 && !memcmp(s + st, "in", 2)) { ps->t = T_IN; return 0; }
        for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
            if (strlen(reserved[i]) == n && !memcmp(reserved[i], s + st, n))
                return fail(ps, st + 1, GS_EPARSE, "Syntax error: reserved identifier '%s'", reserved[i]);
        ps->t = T_IDENT;
        ps->tlen = (uint32_t)n;
        return pool_put(ps, s + st, n, &ps->tstr);
    }
    ps->pos++;
    switch (c) {
    case '(': ps->t = T_LP; return 0;
    case ')': ps->t = T_RP; return 0;
    case '[': if (d == '?') { ps->pos++; ps->t = T_LBQ; } else ps->t = T_LB; return 0;
    case ']': ps->t = T_RB; return 0;
    case '{': ps->t = T_LC; return 0;
    case '}': ps->t = T_RC; return 0;
    case '.':
        if (d >= '0' && d <= '9')
            return fail(ps, ps->tcol, GS_EPARSE,
                        "floating-point literals are not supported in device selectors; use an int or quantity(\"...\")");
        if (d == '?') { ps->pos++; ps->t = T_DOTQ; } else ps->t = T_DOT;
        return 0;
    case ',': ps->t = T_COMMA; return 0;
    case '?': ps->t = T_QUESTION; return 0;
    case ':': ps->t = T_COLON; return 0;
    case '-': ps->t = T_MINUS; return 0;
    case '+': ps->t = T_PLUS; return 0;
    case '*': ps->t = T_STAR; return 0;
    case '/': ps->t = T_SLASH; return 0;
    case '%': ps->t = T_PERCENT; return 0;
    case '!': if (d == '=') { ps->pos++; ps->t = T_NE; } else ps->t = T_NOT; return 0;
    case '=': if (d == '=') { ps->pos++; ps->t = T_EQ; return 0; } break;
    case '<': if (d == '=') { ps->pos++; ps->t = T_LE; } else ps->t = T_LT; return 0;
    case '>': if (d == '=') { ps->pos++; ps->t = T_GE; } else ps->t = T_GT; return 0;
    case '&': if (d == '&') { ps->pos++; ps->t = T_AND; return 0; } break;
    case '|': if (d == '|') { ps->pos++; ps->t = T_OR; return 0; } break;
    default: break;
    }
    if (c == '=') return fail(ps, ps->tcol, GS_EPARSE, "Syntax error: token recognition error at: '=' (use == to compare)");
    if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
        return fail(ps, ps->tcol, GS_EPARSE, "Syntax error: token recognition error at byte 0x%02x", (unsigned char)c);
    return fail(ps, ps->tcol, GS_EPARSE, "Syntax error: token recognition error at: '%c'", c);
}

/*--- Parser ---*/

static int32_t node_new(struct parser *ps, int op, size_t col)
{
    struct gs_cel_program *p = ps->p;
    if (ps->rc) return -1;
    if (p->nnodes == p->capnodes) {
        size_t cap = p->capnodes ? p->capnodes * 2 : 32;
        struct gs__cel_node *nn = realloc(p->nodes, cap * sizeof *nn);
        if (!nn) { fail(ps, col, GS_ENOMEM, "out of memory"); return -1; }
        p->nodes = nn;
        p->capnodes = cap;
    }
    struct gs__cel_node *n = &p->nodes[p->nnodes];
    memset(n, 0, sizeof *n);
    n->op = (uint8_t)op;
    n->col = (uint32_t)col;
    n->a = n->b = n->c = -1;
    n->re = -1;
    return (int32_t)p->nnodes++;
}

#define NODE(ps, i) (&(ps)->p->nodes[(i)])

static int expect(struct parser *ps, enum tok t)
{
    if (ps->rc) return ps->rc;
    if (ps->t != t)
        return fail(ps, ps->tcol, GS_EPARSE, "Syntax error: mismatched input '%s' expecting '%s'",
                    tok_text[ps->t], tok_text[t]);
    return lex(ps);
}

static int32_t parse_expr(struct parser *ps);

static int enter(struct parser *ps)
{
    if (++ps->depth > GS_CEL_MAX_DEPTH)
        return fail(ps, ps->tcol, GS_EPARSE, "expression nesting depth exceeds %d", GS_CEL_MAX_DEPTH);
    return 0;
}

/* Parses `expr, expr, ...` up to close; stores the list in kids. */
static int parse_list(struct parser *ps, enum tok close, uint32_t *k, uint32_t *n)
{
    int32_t tmp[64];
    int32_t *items = tmp;
    size_t cnt = 0, cap = 64;
    int rc = 0;
    if (ps->t != close) {
        for (;;) {
            int32_t e = parse_expr(ps);
            if (ps->rc) { rc = ps->rc; break; }
            if (cnt == cap) {
                int32_t *ni = malloc(cap * 2 * sizeof *ni);
                if (!ni) { rc = fail(ps, ps->tcol, GS_ENOMEM, "out of memory"); break; }
                memcpy(ni, items, cnt * sizeof *ni);
                if (items != tmp) free(items);
                items = ni;
                cap *= 2;
            }
            items[cnt++] = e;
            if (ps->t != T_COMMA) break;
            if (lex(ps)) { rc = ps->rc; break; }
            if (ps->t == close) break;   /* CEL allows a trailing comma */
        }
    }
    if (!rc) rc = expect(ps, close);
    if (!rc) {
        struct gs_cel_program *p = ps->p;
        if (p->nkids + cnt > p->capkids) {
            size_t c2 = p->capkids ? p->capkids : 32;
            while (c2 < p->nkids + cnt) c2 *= 2;
            int32_t *nk = realloc(p->kids, c2 * sizeof *nk);
            if (!nk) rc = fail(ps, ps->tcol, GS_ENOMEM, "out of memory");
            else { p->kids = nk; p->capkids = c2; }
        }
        if (!rc) {
            *k = (uint32_t)p->nkids;
            *n = (uint32_t)cnt;
            if (cnt) memcpy(p->kids + p->nkids, items, cnt * sizeof *items);
            p->nkids += cnt;
        }
    }
    if (items != tmp) free(items);
    return rc;
}

static int32_t parse_primary(struct parser *ps)
{
    size_t col = ps->tcol;
    int32_t n = -1;
    switch (ps->t) {
    case T_INT:
        if (ps->tnum > (uint64_t)INT64_MAX) { fail(ps, col, GS_EPARSE, "Syntax error: int literal out of range"); return -1; }
        n = node_new(ps, CN_INT, col);
        if (n >= 0) NODE(ps, n)->lit.i = (int64_t)ps->tnum;
        lex(ps);
        return n;
    case T_UINT:
        n = node_new(ps, CN_UINT, col);
        if (n >= 0) NODE(ps, n)->lit.u = ps->tnum;
        lex(ps);
        return n;
    case T_STRING:
        n = node_new(ps, CN_STRING, col);
        if (n >= 0) { NODE(ps, n)->str = ps->tstr; NODE(ps, n)->n = ps->tlen; }
        lex(ps);
        return n;
    case T_TRUE: case T_FALSE:
        n = node_new(ps, CN_BOOL, col);
        if (n >= 0) NODE(ps, n)->lit.b = ps->t == T_TRUE;
        lex(ps);
        return n;
    case T_NULL:
        n = node_new(ps, CN_NULL, col);
        lex(ps);
        return n;
    case T_IDENT: {
        uint32_t name = ps->tstr;
        if (lex(ps)) return -1;
        if (ps->t == T_LP) {
            if (lex(ps)) return -1;
            n = node_new(ps, CN_CALL, col);
            uint32_t k = 0, cnt = 0;
            if (n < 0 || parse_list(ps, T_RP, &k, &cnt)) return -1;
            NODE(ps, n)->str = name; NODE(ps, n)->k = k; NODE(ps, n)->n = cnt;
            return n;
        }
        n = node_new(ps, CN_IDENT, col);
        if (n >= 0) NODE(ps, n)->str = name;
        return n;
    }
    case T_DOT:
        fail(ps, col, GS_EPARSE, "Syntax error: leading '.' (fully qualified names) is not supported");
        return -1;
    case T_LP: {
        /* parse_expr counts the nesting of parentheses, lists and arguments */
        if (lex(ps)) return -1;
        n = parse_expr(ps);
        if (expect(ps, T_RP)) return -1;
        return n;
    }
    case T_LB: {
        if (lex(ps)) return -1;
        n = node_new(ps, CN_LIST, col);
        uint32_t k = 0, cnt = 0;
        if (n < 0 || parse_list(ps, T_RB, &k, &cnt)) return -1;
        NODE(ps, n)->k = k; NODE(ps, n)->n = cnt;
        return n;
    }
    case T_LC:
        fail(ps, col, GS_EPARSE, "map literals are not supported in device selectors");
        return -1;
    default:
        fail(ps, col, GS_EPARSE, "Syntax error: mismatched input '%s' expecting an operand", tok_text[ps->t]);
        return -1;
    }
}

static int32_t parse_member(struct parser *ps)
{
    int32_t n = parse_primary(ps);
    while (!ps->rc) {
        size_t col = ps->tcol;
        if (ps->t == T_DOT || ps->t == T_DOTQ) {
            bool opt = ps->t == T_DOTQ;
            if (lex(ps)) return -1;
            if (ps->t != T_IDENT) {
                fail(ps, ps->tcol, GS_EPARSE, "Syntax error: mismatched input '%s' expecting a field name", tok_text[ps->t]);
                return -1;
            }
            uint32_t name = ps->tstr;
            size_t ncol = ps->tcol;
            if (lex(ps)) return -1;
            if (!opt && ps->t == T_LP) {
                if (lex(ps)) return -1;
                int32_t c = node_new(ps, CN_CALL, ncol);
                uint32_t k = 0, cnt = 0;
                if (c < 0 || parse_list(ps, T_RP, &k, &cnt)) return -1;
                NODE(ps, c)->str = name; NODE(ps, c)->a = n; NODE(ps, c)->k = k; NODE(ps, c)->n = cnt;
                n = c;
                continue;
            }
            int32_t s = node_new(ps, CN_SELECT, ncol);
            if (s < 0) return -1;
            NODE(ps, s)->a = n; NODE(ps, s)->str = name; NODE(ps, s)->sub = opt;
            n = s;
        } else if (ps->t == T_LB || ps->t == T_LBQ) {
            bool opt = ps->t == T_LBQ;
            if (lex(ps)) return -1;
            int32_t key = parse_expr(ps);
            if (expect(ps, T_RB)) return -1;
            int32_t x = node_new(ps, CN_INDEX, col);
            if (x < 0) return -1;
            NODE(ps, x)->a = n; NODE(ps, x)->b = key; NODE(ps, x)->sub = opt;
            n = x;
        } else {
            break;
        }
    }
    return ps->rc ? -1 : n;
}

static int32_t parse_unary(struct parser *ps)
{
    size_t col = ps->tcol;
    if (ps->t == T_NOT || ps->t == T_MINUS) {
        enum tok t = ps->t;
        if (enter(ps) || lex(ps)) return -1;
        int32_t n;
        if (t == T_MINUS && ps->t == T_INT) {
            /* a negative literal, so that the most negative int is writable */
            size_t lcol = ps->tcol;
            uint64_t v = ps->tnum;
            if (lex(ps)) return -1;
            if (ps->t == T_DOT || ps->t == T_DOTQ || ps->t == T_LB || ps->t == T_LBQ) {
                fail(ps, lcol, GS_EPARSE, "Syntax error: member access on a numeric literal");
                return -1;
            }
            n = node_new(ps, CN_INT, col);
            if (n >= 0) NODE(ps, n)->lit.i = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
        } else {
            int32_t a = parse_unary(ps);
            n = node_new(ps, t == T_NOT ? CN_NOT : CN_NEG, col);
            if (n >= 0) NODE(ps, n)->a = a;
        }
        ps->depth--;
        return ps->rc ? -1 : n;
    }
    return parse_member(ps);
}

static int32_t binary(struct parser *ps, int op, int sub, size_t col, int32_t a, int32_t b)
{
    int32_t n = node_new(ps, op, col);
    if (n < 0) return -1;
    NODE(ps, n)->sub = (uint8_t)sub;
    NODE(ps, n)->a = a;
    NODE(ps, n)->b = b;
    return n;
}

static int32_t parse_mul(struct parser *ps)
{
    int32_t n = parse_unary(ps);
    while (!ps->rc && (ps->t == T_STAR || ps->t == T_SLASH || ps->t == T_PERCENT)) {
        int sub = ps->t == T_STAR ? CB_MUL : ps->t == T_SLASH ? CB_DIV : CB_MOD;
        size_t col = ps->tcol;
        if (lex(ps)) return -1;
        n = binary(ps, CN_BINARY, sub, col, n, parse_unary(ps));
    }
    return ps->rc ? -1 : n;
}

static int32_t parse_add(struct parser *ps)
{
    int32_t n = parse_mul(ps);
    while (!ps->rc && (ps->t == T_PLUS || ps->t == T_MINUS)) {
        int sub = ps->t == T_PLUS ? CB_ADD : CB_SUB;
        size_t col = ps->tcol;
        if (lex(ps)) return -1;
        n = binary(ps, CN_BINARY, sub, col, n, parse_mul(ps));
    }
    return ps->rc ? -1 : n;
}

static int32_t parse_rel(struct parser *ps)
{
    int32_t n = parse_add(ps);
    while (!ps->rc) {
        int sub;
        switch (ps->t) {
        case T_EQ: sub = CB_EQ; break;
        case T_NE: sub = CB_NE; break;
        case T_LT: sub = CB_LT; break;
        case T_LE: sub = CB_LE; break;
        case T_GT: sub = CB_GT; break;
        case T_GE: sub = CB_GE; break;
        case T_IN: sub = CB_IN; break;
        default: return n;
        }
        size_t col = ps->tcol;
        if (lex(ps)) return -1;
        n = binary(ps, CN_BINARY, sub, col, n, parse_add(ps));
    }
    return -1;
}

static int32_t parse_and(struct parser *ps)
{
    int32_t n = parse_rel(ps);
    while (!ps->rc && ps->t == T_AND) {
        size_t col = ps->tcol;
        if (lex(ps)) return -1;
        n = binary(ps, CN_AND, 0, col, n, parse_rel(ps));
    }
    return ps->rc ? -1 : n;
}

static int32_t parse_or(struct parser *ps)
{
    int32_t n = parse_and(ps);
    while (!ps->rc && ps->t == T_OR) {
        size_t col = ps->tcol;
        if (lex(ps)) return -1;
        n = binary(ps, CN_OR, 0, col, n, parse_and(ps));
    }
    return ps->rc ? -1 : n;
}

static int32_t parse_expr(struct parser *ps)
{
    if (enter(ps)) return -1;
    int32_t n = parse_or(ps);
    if (!ps->rc && ps->t == T_QUESTION) {
        size_t col = ps->tcol;
        if (lex(ps)) return -1;
        int32_t b = parse_or(ps);
        if (expect(ps, T_COLON)) return -1;
        int32_t c = parse_expr(ps);
        int32_t x = node_new(ps, CN_COND, col);
        if (x < 0) return -1;
        NODE(ps, x)->a = n; NODE(ps, x)->b = b; NODE(ps, x)->c = c;
        n = x;
    }
    ps->depth--;
    return ps->rc ? -1 : n;
}

/*--- Checker ---*/

static const char *const type_names[] = {
    "dyn", "null_type", "bool", "int", "uint", "string", "kubernetes.Semver", "kubernetes.Quantity",
    "list(dyn)", "device", "map(string, map(string, dyn))", "map(string, map(string, kubernetes.Quantity))",
    "map(string, dyn)", "map(string, kubernetes.Quantity)", "optional_type(dyn)",
};
_Static_assert(sizeof type_names / sizeof type_names[0] == CT_OPTIONAL + 1, "type_names matches enum");

static const char *const bin_names[] = {
    "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "@in", "_+_", "_-_", "_*_", "_/_", "_%_",
};
_Static_assert(sizeof bin_names / sizeof bin_names[0] == CB_MOD + 1, "bin_names matches enum");

struct fninfo {
    const char *name;
    enum gs__cel_fn fn;
    bool member;     /* receiver.name(args) rather than name(args) */
    int nargs;       /* not counting the receiver */
    uint8_t ret;     /* static result type */
};

static const struct fninfo fns[] = {
    { "size", CF_SIZE, false, 1, CT_INT },
    { "size", CF_SIZE, true, 0, CT_INT },
    { "semver", CF_SEMVER, false, 1, CT_VERSION },
    { "isSemver", CF_ISSEMVER, false, 1, CT_BOOL },
    { "quantity", CF_QUANTITY, false, 1, CT_QUANTITY },
    { "isQuantity", CF_ISQUANTITY, false, 1, CT_BOOL },
    { "int", CF_INT, false, 1, CT_INT },
    { "uint", CF_UINT, false, 1, CT_UINT },
    { "string", CF_STRINGCONV, false, 1, CT_STRING },
    { "matches", CF_MATCHES, false, 2, CT_BOOL },
    { "matches", CF_MATCHES, true, 1, CT_BOOL },
    { "startsWith", CF_STARTSWITH, true, 1, CT_BOOL },
    { "endsWith", CF_ENDSWITH, true, 1, CT_BOOL },
    { "contains", CF_CONTAINS, true, 1, CT_BOOL },
    { "lowerAscii", CF_LOWER, true, 0, CT_STRING },
    { "upperAscii", CF_UPPER, true, 0, CT_STRING },
    { "compareTo", CF_COMPARETO, true, 1, CT_INT },
    { "isGreaterThan", CF_ISGREATER, true, 1, CT_BOOL },
    { "isLessThan", CF_ISLESS, true, 1, CT_BOOL },
    { "major", CF_MAJOR, true, 0, CT_INT },
    { "minor", CF_MINOR, true, 0, CT_INT },
    { "patch", CF_PATCH, true, 0, CT_INT },
    { "asInteger", CF_ASINTEGER, true, 0, CT_INT },
    { "isInteger", CF_ISINTEGER, true, 0, CT_BOOL },
    { "sign", CF_SIGN, true, 0, CT_INT },
    { "add", CF_ADD, true, 1, CT_QUANTITY },
    { "sub", CF_SUB, true, 1, CT_QUANTITY },
    { "orValue", CF_ORVALUE, true, 1, CT_DYN },
    { "hasValue", CF_HASVALUE, true, 0, CT_BOOL },
    { "value", CF_VALUE, true, 0, CT_DYN },
};

struct scope { const char *name; int slot; };

struct checker {
    struct parser *ps;
    struct scope scopes[GS_CEL_MAX_DEPTH + 1];
    int nscopes;
    int depth;
};

/* Types a value of static type t may have at run time when an operator needs `want`. */
static bool may_be(int t, int want)
{
    if (t == CT_DYN || t == want) return true;
    if (want == CT_DOMAIN_ATTRS && t == CT_DOMAIN_CAPS) return true;
    return false;
}

static bool numeric(int t) { return t == CT_INT || t == CT_UINT; }

static int no_overload2(struct checker *ck, size_t col, const char *fn, int a, int b)
{
    return fail(ck->ps, col, GS_EINVAL, "found no matching overload for '%s' applied to '(%s, %s)'",
                fn, type_names[a], type_names[b]);
}

static int check(struct checker *ck, int32_t i);

static const char *pstr(struct checker *ck, uint32_t off) { return ck->ps->p->pool + off; }

static int check_call(struct checker *ck, int32_t i)
{
    struct parser *ps = ck->ps;
    struct gs__cel_node *n = NODE(ps, i);
    const char *name = pstr(ck, n->str);
    int32_t target = n->a;
    size_t col = n->col;

    /* macros first: their arguments are not ordinary expressions */
    if (target < 0 && !strcmp(name, "has")) {
        if (n->n != 1) return fail(ps, col, GS_EINVAL, "invalid argument to has() macro: it takes one field selection");
        int32_t arg = ps->p->kids[n->k];
        struct gs__cel_node *an = NODE(ps, arg);
        if (an->op != CN_SELECT || an->sub)
            return fail(ps, an->col, GS_EINVAL, "invalid argument to has() macro: it takes a field selection such as has(device.attributes[\"gpu.nvidia.com\"].uuid)");
        if (check(ck, an->a)) return ps->rc;
        n = NODE(ps, i);
        n->op = CN_HAS;
        n->a = NODE(ps, arg)->a;
        n->str = NODE(ps, arg)->str;
        int t = NODE(ps, n->a)->type;
        if (t != CT_DYN && t != CT_DEVICE && t != CT_ATTRS && t != CT_CAPS && t != CT_DOMAIN_ATTRS && t != CT_DOMAIN_CAPS)
            return fail(ps, NODE(ps, arg)->col, GS_EINVAL, "type '%s' does not support field selection", type_names[t]);
        n->type = CT_BOOL;
        return 0;
    }
    if (target >= 0 && NODE(ps, target)->op == CN_IDENT && !strcmp(pstr(ck, NODE(ps, target)->str), "cel")) {
        if (!strcmp(name, "bind")) {
            if (n->n != 3) return fail(ps, col, GS_EINVAL, "cel.bind() takes a variable name, an init expression and a result expression");
            int32_t v = ps->p->kids[n->k], init = ps->p->kids[n->k + 1], body = ps->p->kids[n->k + 2];
            if (NODE(ps, v)->op != CN_IDENT)
                return fail(ps, NODE(ps, v)->col, GS_EINVAL, "cel.bind() variable name must be a simple identifier");
            if (check(ck, init)) return ps->rc;
            if (ck->nscopes >= GS_CEL_MAX_DEPTH)
                return fail(ps, col, GS_EINVAL, "expression nesting depth exceeds %d", GS_CEL_MAX_DEPTH);
            int slot = ck->nscopes;
            ck->scopes[ck->nscopes].name = pstr(ck, NODE(ps, v)->str);
            ck->scopes[ck->nscopes].slot = slot;
            ck->nscopes++;
            if (slot + 1 > ps->p->nslots) ps->p->nslots = slot + 1;
            int rc = check(ck, body);
            ck->nscopes--;
            if (rc) return rc;
            n = NODE(ps, i);
            n->op = CN_BIND;
            n->a = slot;
            n->b = init;
            n->c = body;
            n->type = NODE(ps, body)->type;
            return 0;
        }
        return fail(ps, col, GS_EINVAL, "undeclared reference to 'cel.%s' (in container '')", name);
    }
    if (target >= 0 && NODE(ps, target)->op == CN_IDENT && !strcmp(pstr(ck, NODE(ps, target)->str), "optional")) {
        enum gs__cel_fn f = !strcmp(name, "of") ? CF_OPT_OF : !strcmp(name, "none") ? CF_OPT_NONE : CF_NONE;
        if (f == CF_NONE) return fail(ps, col, GS_EINVAL, "undeclared reference to 'optional.%s' (in container '')", name);
        if ((int)n->n != (f == CF_OPT_OF ? 1 : 0))
            return fail(ps, col, GS_EINVAL, "found no matching overload for 'optional.%s' with %u arguments", name, n->n);
        if (f == CF_OPT_OF && check(ck, ps->p->kids[n->k])) return ps->rc;
        n = NODE(ps, i);
        n->fn = (uint8_t)f;
        n->a = -1;
        n->type = CT_OPTIONAL;
        return 0;
    }

    if (target >= 0 && check(ck, target)) return ps->rc;
    for (uint32_t j = 0; j < NODE(ps, i)->n; j++)
        if (check(ck, ps->p->kids[NODE(ps, i)->k + j])) return ps->rc;
    n = NODE(ps, i);

    const struct fninfo *fi = NULL;
    bool known = false;
    for (size_t j = 0; j < sizeof fns / sizeof fns[0]; j++) {
        if (strcmp(fns[j].name, name)) continue;
        known = true;
        if (fns[j].member == (target >= 0) && fns[j].nargs == (int)n->n) { fi = &fns[j]; break; }
    }
    int rt = target >= 0 ? NODE(ps, target)->type : CT_DYN;
    int a0 = n->n > 0 ? NODE(ps, ps->p->kids[n->k])->type : CT_DYN;
    int a1 = n->n > 1 ? NODE(ps, ps->p->kids[n->k + 1])->type : CT_DYN;
    if (!fi) {
        if (!known) return fail(ps, col, GS_EINVAL, "undeclared reference to '%s' (in container '')", name);
        char sig[160];
        size_t o = 0;
        if (target >= 0) o += (size_t)snprintf(sig, sizeof sig, "%s.", type_names[rt]);
        o += (size_t)snprintf(sig + o, sizeof sig - o, "(");
        for (uint32_t j = 0; j < n->n && o < sizeof sig; j++)
            o += (size_t)snprintf(sig + o, sizeof sig - o, "%s%s", j ? ", " : "",
                                  type_names[NODE(ps, ps->p->kids[n->k + j])->type]);
        if (o < sizeof sig) snprintf(sig + o, sizeof sig - o, ")");
        return fail(ps, col, GS_EINVAL, "found no matching overload for '%s' applied to '%s'", name, sig);
    }
    n->fn = (uint8_t)fi->fn;
    n->type = fi->ret;

    /* argument types that can never match, where they are known now */
    bool ok = true;
    switch (fi->fn) {
    case CF_SIZE: {
        int t = target >= 0 ? rt : a0;
        ok = t == CT_DYN || t == CT_STRING || t == CT_LIST || t == CT_DOMAIN_ATTRS || t == CT_DOMAIN_CAPS ||
             t == CT_ATTRS || t == CT_CAPS;
        break;
    }
    case CF_SEMVER: case CF_ISSEMVER: case CF_QUANTITY: case CF_ISQUANTITY: ok = may_be(a0, CT_STRING); break;
    case CF_INT: ok = a0 == CT_DYN || a0 == CT_INT || a0 == CT_UINT || a0 == CT_STRING; break;
    case CF_UINT: ok = a0 == CT_DYN || a0 == CT_INT || a0 == CT_UINT || a0 == CT_STRING; break;
    case CF_STRINGCONV:
        ok = a0 == CT_DYN || a0 == CT_INT || a0 == CT_UINT || a0 == CT_STRING || a0 == CT_BOOL ||
             a0 == CT_VERSION || a0 == CT_QUANTITY;
        break;
    case CF_MATCHES:
        if (target >= 0) ok = may_be(rt, CT_STRING) && may_be(a0, CT_STRING);
        else ok = may_be(a0, CT_STRING) && may_be(a1, CT_STRING);
        break;
    case CF_STARTSWITH: case CF_ENDSWITH: case CF_CONTAINS: ok = may_be(rt, CT_STRING) && may_be(a0, CT_STRING); break;
    case CF_LOWER: case CF_UPPER: ok = may_be(rt, CT_STRING); break;
    case CF_COMPARETO: case CF_ISGREATER: case CF_ISLESS:
        ok = (rt == CT_DYN || rt == CT_VERSION || rt == CT_QUANTITY) && (a0 == CT_DYN || rt == CT_DYN || a0 == rt);
        if (ok && rt == CT_DYN && a0 != CT_DYN) ok = a0 == CT_VERSION || a0 == CT_QUANTITY;
        break;
    case CF_MAJOR: case CF_MINOR: case CF_PATCH: ok = may_be(rt, CT_VERSION); break;
    case CF_ASINTEGER: case CF_ISINTEGER: case CF_SIGN: ok = may_be(rt, CT_QUANTITY); break;
    case CF_ADD: case CF_SUB: ok = may_be(rt, CT_QUANTITY) && (a0 == CT_DYN || a0 == CT_QUANTITY || a0 == CT_INT); break;
    case CF_ORVALUE: case CF_HASVALUE: case CF_VALUE: ok = may_be(rt, CT_OPTIONAL); if (fi->fn == CF_ORVALUE) n->type = (uint8_t)a0; break;
    default: break;
    }
    if (!ok) {
        char sig[160];
        if (target >= 0)
            snprintf(sig, sizeof sig, "%s.(%s%s%s)", type_names[rt], n->n ? type_names[a0] : "", n->n > 1 ? ", " : "",
                     n->n > 1 ? type_names[a1] : "");
        else
            snprintf(sig, sizeof sig, "(%s%s%s)", type_names[a0], n->n > 1 ? ", " : "", n->n > 1 ? type_names[a1] : "");
        return fail(ps, col, GS_EINVAL, "found no matching overload for '%s' applied to '%s'", name, sig);
    }

    /* a constant pattern is translated and compiled once, here */
    if (fi->fn == CF_MATCHES) {
        int32_t pat = target >= 0 ? ps->p->kids[n->k] : ps->p->kids[n->k + 1];
        struct gs__cel_node *pn = NODE(ps, pat);
        if (pn->op == CN_STRING) {
            char *posix = NULL;
            int icase = 0;
            const char *why = NULL;
            size_t at = 0;
            int rc = gs__cel_regex_translate(ps->p->pool + pn->str, pn->n, &posix, &icase, &why, &at);
            if (rc == GS_ENOMEM) return fail(ps, pn->col, GS_ENOMEM, "out of memory");
            if (rc) return fail(ps, pn->col, GS_EINVAL, "invalid regular expression at offset %zu: %s", at, why);
            struct gs_cel_program *p = ps->p;
            if (p->nres == p->capres) {
                size_t cap = p->capres ? p->capres * 2 : 4;
                regex_t *nr = realloc(p->res, cap * sizeof *nr);
                if (!nr) { free(posix); return fail(ps, pn->col, GS_ENOMEM, "out of memory"); }
                p->res = nr;
                p->capres = cap;
            }
            int rrc = regcomp(&p->res[p->nres], posix, REG_EXTENDED | REG_NOSUB | (icase ? REG_ICASE : 0));
            free(posix);
            if (rrc) {
                char buf[128];
                regerror(rrc, &p->res[p->nres], buf, sizeof buf);
                regfree(&p->res[p->nres]);
                return fail(ps, pn->col, GS_EINVAL, "invalid regular expression: %s", buf);
            }
            NODE(ps, i)->re = (int32_t)p->nres++;
        }
    }
    return 0;
}

static int check_binary(struct checker *ck, int32_t i)
{
    struct parser *ps = ck->ps;
    struct gs__cel_node *n = NODE(ps, i);
    int a = NODE(ps, n->a)->type, b = NODE(ps, n->b)->type;
    const char *fn = bin_names[n->sub];
    bool ok;
    switch (n->sub) {
    case CB_EQ: case CB_NE:
        ok = a == CT_DYN || b == CT_DYN || a == b || (numeric(a) && numeric(b)) ||
             (a == CT_NULL && b == CT_OPTIONAL) || (b == CT_NULL && a == CT_OPTIONAL);
        if (ok && (a == CT_DEVICE || b == CT_DEVICE)) ok = false;
        n->type = CT_BOOL;
        break;
    case CB_LT: case CB_LE: case CB_GT: case CB_GE:
        ok = (a == CT_DYN && b == CT_DYN) ||
             (a == CT_DYN && (numeric(b) || b == CT_STRING || b == CT_BOOL)) ||
             (b == CT_DYN && (numeric(a) || a == CT_STRING || a == CT_BOOL)) ||
             (numeric(a) && numeric(b)) || (a == b && (a == CT_STRING || a == CT_BOOL));
        n->type = CT_BOOL;
        break;
    case CB_IN:
        ok = b == CT_DYN || b == CT_LIST ||
             ((b == CT_ATTRS || b == CT_CAPS || b == CT_DOMAIN_ATTRS || b == CT_DOMAIN_CAPS) && may_be(a, CT_STRING));
        n->type = CT_BOOL;
        break;
    case CB_ADD:
        ok = (a == CT_DYN && (b == CT_DYN || numeric(b) || b == CT_STRING || b == CT_LIST)) ||
             (b == CT_DYN && (numeric(a) || a == CT_STRING || a == CT_LIST)) ||
             (a == b && (numeric(a) || a == CT_STRING || a == CT_LIST));
        n->type = (uint8_t)(a != CT_DYN ? a : b);
        break;
    default:
        ok = (a == CT_DYN && (b == CT_DYN || numeric(b))) || (b == CT_DYN && numeric(a)) || (a == b && numeric(a));
        n->type = (uint8_t)(a != CT_DYN ? a : b);
        break;
    }
    if (!ok && n->sub >= CB_LT && n->sub <= CB_GE && a == b && (a == CT_VERSION || a == CT_QUANTITY))
        return fail(ck->ps, n->col, GS_EINVAL,
                    "found no matching overload for '%s' applied to '(%s, %s)': use compareTo(), isGreaterThan() or isLessThan()",
                    fn, type_names[a], type_names[b]);
    if (!ok) return no_overload2(ck, n->col, fn, a, b);
    return 0;
}

static int check(struct checker *ck, int32_t i)
{
    struct parser *ps = ck->ps;
    if (ps->rc) return ps->rc;
    if (++ck->depth > 10 * GS_CEL_MAX_DEPTH)
        return fail(ps, NODE(ps, i)->col, GS_EINVAL, "expression is nested too deeply: more than %d operations in one chain",
                    10 * GS_CEL_MAX_DEPTH);
    struct gs__cel_node *n = NODE(ps, i);
    int rc = 0;
    switch (n->op) {
    case CN_NULL: n->type = CT_NULL; break;
    case CN_BOOL: n->type = CT_BOOL; break;
    case CN_INT: n->type = CT_INT; break;
    case CN_UINT: n->type = CT_UINT; break;
    case CN_STRING: n->type = CT_STRING; break;
    case CN_IDENT: {
        const char *name = pstr(ck, n->str);
        for (int j = ck->nscopes - 1; j >= 0; j--) {
            if (!strcmp(ck->scopes[j].name, name)) {
                n->op = CN_VAR;
                n->a = ck->scopes[j].slot;
                n->type = CT_DYN;
                goto out;
            }
        }
        if (!strcmp(name, "device")) { n->op = CN_DEVICE; n->type = CT_DEVICE; break; }
        rc = fail(ps, n->col, GS_EINVAL, "undeclared reference to '%s' (in container '')", name);
        break;
    }
    case CN_SELECT: {
        if ((rc = check(ck, n->a))) break;
        n = NODE(ps, i);
        int t = NODE(ps, n->a)->type;
        const char *f = pstr(ck, n->str);
        if (t == CT_DEVICE) {
            if (n->sub) { rc = fail(ps, n->col, GS_EINVAL, "optional field selection '.?%s' is not supported on device", f); break; }
            if (!strcmp(f, "driver")) n->type = CT_STRING;
            else if (!strcmp(f, "attributes")) n->type = CT_ATTRS;
            else if (!strcmp(f, "capacity")) n->type = CT_CAPS;
            else if (!strcmp(f, "allowMultipleAllocations")) n->type = CT_BOOL;
            else rc = fail(ps, n->col, GS_EINVAL, "undefined field '%s'", f);
        } else if (t == CT_ATTRS || t == CT_CAPS) {
            n->type = t == CT_ATTRS ? CT_DOMAIN_ATTRS : CT_DOMAIN_CAPS;
            if (n->sub) n->type = CT_OPTIONAL;
        } else if (t == CT_DOMAIN_ATTRS || t == CT_DOMAIN_CAPS) {
            n->type = n->sub ? CT_OPTIONAL : t == CT_DOMAIN_ATTRS ? CT_DYN : CT_QUANTITY;
        } else if (t == CT_DYN) {
            n->type = n->sub ? CT_OPTIONAL : CT_DYN;
        } else if (t == CT_OPTIONAL) {
            n->type = CT_OPTIONAL;
        } else {
            rc = fail(ps, n->col, GS_EINVAL, "type '%s' does not support field selection", type_names[t]);
        }
        break;
    }
    case CN_INDEX: {
        if ((rc = check(ck, n->a)) || (rc = check(ck, n->b))) break;
        n = NODE(ps, i);
        int t = NODE(ps, n->a)->type, k = NODE(ps, n->b)->type;
        bool ok;
        if (t == CT_ATTRS || t == CT_CAPS) {
            ok = may_be(k, CT_STRING);
            n->type = n->sub ? CT_OPTIONAL : t == CT_ATTRS ? CT_DOMAIN_ATTRS : CT_DOMAIN_CAPS;
        } else if (t == CT_DOMAIN_ATTRS || t == CT_DOMAIN_CAPS) {
            ok = may_be(k, CT_STRING);
            n->type = n->sub ? CT_OPTIONAL : t == CT_DOMAIN_ATTRS ? CT_DYN : CT_QUANTITY;
        } else if (t == CT_LIST) {
            ok = k == CT_DYN || numeric(k);
            n->type = n->sub ? CT_OPTIONAL : CT_DYN;
        } else if (t == CT_DYN || t == CT_OPTIONAL) {
            ok = true;
            n->type = n->sub || t == CT_OPTIONAL ? CT_OPTIONAL : CT_DYN;
        } else {
            ok = false;
        }
        if (!ok) rc = no_overload2(ck, n->col, "_[_]", t, k);
        break;
    }
    case CN_CALL: rc = check_call(ck, i); break;
    case CN_LIST:
        for (uint32_t j = 0; j < n->n && !rc; j++) rc = check(ck, ps->p->kids[NODE(ps, i)->k + j]);
        NODE(ps, i)->type = CT_LIST;
        break;
    case CN_NOT: case CN_NEG: {
        if ((rc = check(ck, n->a))) break;
        n = NODE(ps, i);
        int t = NODE(ps, n->a)->type;
        if (n->op == CN_NOT) {
            if (!may_be(t, CT_BOOL)) rc = fail(ps, n->col, GS_EINVAL, "found no matching overload for '!_' applied to '(%s)'", type_names[t]);
            n->type = CT_BOOL;
        } else {
            if (t != CT_DYN && t != CT_INT) rc = fail(ps, n->col, GS_EINVAL, "found no matching overload for '-_' applied to '(%s)'", type_names[t]);
            n->type = CT_INT;
        }
        break;
    }
    case CN_BINARY:
        if ((rc = check(ck, n->a)) || (rc = check(ck, n->b))) break;
        rc = check_binary(ck, i);
        break;
    case CN_AND: case CN_OR: {
        if ((rc = check(ck, n->a)) || (rc = check(ck, n->b))) break;
        n = NODE(ps, i);
        int a = NODE(ps, n->a)->type, b = NODE(ps, n->b)->type;
        if (!may_be(a, CT_BOOL) || !may_be(b, CT_BOOL)) rc = no_overload2(ck, n->col, n->op == CN_AND ? "_&&_" : "_||_", a, b);
        n->type = CT_BOOL;
        break;
    }
    case CN_COND: {
        if ((rc = check(ck, n->a)) || (rc = check(ck, n->b)) || (rc = check(ck, n->c))) break;
        n = NODE(ps, i);
        int c = NODE(ps, n->a)->type, b = NODE(ps, n->b)->type, e = NODE(ps, n->c)->type;
        if (!may_be(c, CT_BOOL)) {
            rc = fail(ps, n->col, GS_EINVAL, "found no matching overload for '_?_:_' applied to '(%s, %s, %s)'",
                      type_names[c], type_names[b], type_names[e]);
            break;
        }
        n->type = (uint8_t)(b == e ? b : CT_DYN);
        break;
    }
    default: break;
    }
out:
    ck->depth--;
    return rc ? rc : ps->rc;
}

/*--- RE2 to POSIX ---*/

static int sb_put(char **b, size_t *n, size_t *cap, const char *s, size_t len)
{
    if (*n + len + 1 > *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        while (c < *n + len + 1) c *= 2;
        char *nb = realloc(*b, c);
        if (!nb) return GS_ENOMEM;
        *b = nb;
        *cap = c;
    }
    memcpy(*b + *n, s, len);
    *n += len;
    (*b)[*n] = 0;
    return 0;
}

int gs__cel_regex_translate(const char *re, size_t len, char **out, int *icase, const char **why, size_t *at)
{
    char *b = NULL;
    size_t n = 0, cap = 0;
    bool in_class = false;
    size_t i = 0;
    unsigned long repeats = 0;
    *icase = 0;
    if (len >= 4 && !memcmp(re, "(?i)", 4)) { *icase = 1; i = 4; }
    if (sb_put(&b, &n, &cap, "", 0)) return GS_ENOMEM;
    for (; i < len; i++) {
        char c = re[i];
        const char *rep = NULL;
        char one[2] = { c, 0 };
        if (c == 0) { *why = "NUL byte in pattern"; *at = i; free(b); return GS_EINVAL; }
        if (in_class) {
            if (c == ']' && !(n > 0 && (b[n - 1] == '[' || (n > 1 && b[n - 1] == '^' && b[n - 2] == '[')))) in_class = false;
            if (c == '\\' && i + 1 < len) {
                char e = re[++i];
                switch (e) {
                case 'd': rep = "0-9"; break;
                case 'w': rep = "[:alnum:]_"; break;
                case 's': rep = "[:space:]"; break;
                case 'n': rep = "\n"; break;
                case 't': rep = "\t"; break;
                case ']': case '\\': case '-': case '^': case '[':
                    /* POSIX brackets have no escapes; these must be placed literally */
                    *why = "escaped metacharacter inside a character class is not supported (place ']' first, '-' last)";
                    *at = i - 1; free(b); return GS_EINVAL;
                default:
                    if (is_ident_char(e)) { *why = "unsupported escape inside a character class"; *at = i - 1; free(b); return GS_EINVAL; }
                    one[0] = e; rep = one;
                }
            } else if (c == '[' && i + 1 < len && re[i + 1] == ':') {
                size_t j = i + 2;
                while (j + 1 < len && !(re[j] == ':' && re[j + 1] == ']')) j++;
                if (j + 1 >= len) { *why = "unterminated character class name"; *at = i; free(b); return GS_EINVAL; }
                if (sb_put(&b, &n, &cap, re + i, j + 2 - i)) return GS_ENOMEM;
                i = j + 1;
                continue;
            } else {
                rep = one;
            }
        } else if (c == '[') {
            in_class = true;
            rep = "[";
            if (i + 1 < len && re[i + 1] == '^') { if (sb_put(&b, &n, &cap, "[^", 2)) return GS_ENOMEM; i++; if (i + 1 < len && re[i + 1] == ']') { if (sb_put(&b, &n, &cap, "]", 1)) return GS_ENOMEM; i++; } continue; }
            if (i + 1 < len && re[i + 1] == ']') { if (sb_put(&b, &n, &cap, "[]", 2)) return GS_ENOMEM; i++; continue; }
        } else if (c == '\\') {
            if (i + 1 >= len) { *why = "trailing backslash"; *at = i; free(b); return GS_EINVAL; }
            char e = re[++i];
            switch (e) {
            case 'd': rep = "[0-9]"; break;
            case 'D': rep = "[^0-9]"; break;
            case 'w': rep = "[[:alnum:]_]"; break;
            case 'W': rep = "[^[:alnum:]_]"; break;
            case 's': rep = "[[:space:]]"; break;
            case 'S': rep = "[^[:space:]]"; break;
            case 'n': rep = "\n"; break;
            case 't': rep = "\t"; break;
            case 'b': case 'B': *why = "word boundaries (\\b, \\B) are not supported"; *at = i - 1; free(b); return GS_EINVAL;
            case 'A': case 'z': *why = "\\A and \\z are not supported; use ^ and $"; *at = i - 1; free(b); return GS_EINVAL;
            case 'p': case 'P': *why = "Unicode classes (\\p, \\P) are not supported"; *at = i - 1; free(b); return GS_EINVAL;
            case 'Q': *why = "quoting with \\Q...\\E is not supported"; *at = i - 1; free(b); return GS_EINVAL;
            default:
                if ((e >= '0' && e <= '9') || is_ident_char(e)) {
                    *why = "unsupported escape sequence"; *at = i - 1; free(b); return GS_EINVAL;
                }
                { char two[3] = { '\\', e, 0 }; if (sb_put(&b, &n, &cap, two, 2)) return GS_ENOMEM; }
                continue;
            }
        } else if (c == '(' && i + 1 < len && re[i + 1] == '?') {
            if (i + 2 < len && re[i + 2] == ':') { rep = "("; i += 2; }
            else { *why = "group flags, named groups and lookaround ((?...)) are not supported, except (?i) at the start and (?:...)"; *at = i; free(b); return GS_EINVAL; }
        } else if ((c == '*' || c == '+' || c == '?' || c == '}') && i + 1 < len && re[i + 1] == '?') {
            *why = "non-greedy quantifiers (*? +? ?? {n,m}?) are not supported"; *at = i + 1; free(b); return GS_EINVAL;
        } else if ((c == '*' || c == '+' || c == '?' || c == '}') && i + 1 < len &&
                   (re[i + 1] == '*' || re[i + 1] == '+' || (re[i + 1] == '{' && i + 2 < len && re[i + 2] >= '0' && re[i + 2] <= '9'))) {
            *why = "bad repetition operator (a quantifier after a quantifier)"; *at = i + 1; free(b); return GS_EINVAL;
        } else if (c == '{' && i + 1 < len && re[i + 1] >= '0' && re[i + 1] <= '9') {
            /* bounded repeats are expanded by the POSIX compiler: cap them as RE2 does (1000),
             * and their sum, so nested repeats cannot multiply into millions of states */
            size_t j = i + 1;
            unsigned long v = 0, maxv = 0;
            while (j < len && ((re[j] >= '0' && re[j] <= '9') || re[j] == ',')) {
                if (re[j] == ',') { if (v > maxv) maxv = v; v = 0; }
                else if (v < 100000) v = v * 10 + (unsigned long)(re[j] - '0');
                j++;
            }
            if (v > maxv) maxv = v;
            repeats += maxv;
            if (maxv > 1000 || repeats > 1000) {
                *why = "bad repetition operator: counts above 1000 (in total) are not supported"; *at = i; free(b); return GS_EINVAL;
            }
            rep = one;
        } else {
            rep = one;
        }
        if (sb_put(&b, &n, &cap, rep, strlen(rep))) { free(b); return GS_ENOMEM; }
    }
    if (in_class) { *why = "missing closing ]"; *at = len; free(b); return GS_EINVAL; }
    *out = b;
    return 0;
}

/*--- Public ---*/

void gs_cel_free(struct gs_cel_program *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->nres; i++) regfree(&p->res[i]);
    free(p->res);
    free(p->nodes);
    free(p->kids);
    free(p->pool);
    free(p);
}

int gs_cel_compile(const char *expr, struct gs_cel_program **out, struct gs_cel_error *err)
{
    struct gs_cel_error dummy;
    if (!err) err = &dummy;
    err->column = 0;
    err->msg[0] = 0;
    *out = NULL;
    if (!expr) { err->column = 1; snprintf(err->msg, sizeof err->msg, "expression is missing"); return GS_EINVAL; }
    size_t len = strlen(expr);
    if (len > GS_CEL_MAX_LENGTH) {
        err->column = GS_CEL_MAX_LENGTH + 1;
        snprintf(err->msg, sizeof err->msg, "expression is too long: %zu bytes, the limit is %d", len, GS_CEL_MAX_LENGTH);
        return GS_EINVAL;
    }
    struct gs_cel_program *p = calloc(1, sizeof *p);
    if (!p) { err->column = 1; snprintf(err->msg, sizeof err->msg, "out of memory"); return GS_ENOMEM; }
    struct parser ps = { .src = expr, .len = len, .p = p, .err = err };
    lex(&ps);
    if (!ps.rc && ps.t == T_EOF) fail(&ps, 1, GS_EPARSE, "Syntax error: the expression is empty");
    int32_t root = ps.rc ? -1 : parse_expr(&ps);
    if (!ps.rc && ps.t != T_EOF)
        fail(&ps, ps.tcol, GS_EPARSE, "Syntax error: extraneous input '%s' after the expression", tok_text[ps.t]);
    if (!ps.rc) {
        struct checker ck = { .ps = &ps };
        check(&ck, root);
    }
    if (!ps.rc) {
        int t = p->nodes[root].type;
        if (t != CT_BOOL && t != CT_DYN)
            fail(&ps, 1, GS_EINVAL, "expression must evaluate to bool, not '%s'", type_names[t]);
    }
    if (ps.rc) {
        gs_cel_free(p);
        return ps.rc == GS_ENOMEM ? GS_ENOMEM : ps.rc;
    }
    p->root = root;
    *out = p;
    return 0;
}
