/*
 * cel_internal.h - the compiled form of a CEL selector, shared by the compiler (cel.c) and
 * the evaluator (cel_eval.c). Not for use outside those two files.
 *
 * A program is an array of nodes that refer to each other by index, child lists in one int
 * array and every string of the expression in one pool, so a compiled selector is a handful
 * of allocations however long it is, and evaluation never writes to it.
 */
#ifndef GS_CORE_CEL_INTERNAL_H
#define GS_CORE_CEL_INTERNAL_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gs__cel_op {
    CN_NULL, CN_BOOL, CN_INT, CN_UINT, CN_STRING,
    CN_IDENT,      /* str: name; resolved to CN_DEVICE or CN_VAR by the checker */
    CN_DEVICE,     /* the `device` variable */
    CN_VAR,        /* a cel.bind variable: a = slot */
    CN_SELECT,     /* a.str; sub = 1 for `.?` */
    CN_INDEX,      /* a[b]; sub = 1 for `[?` */
    CN_CALL,       /* str: function; a = target or -1; kids[k..k+n) args; fn = function id */
    CN_LIST,       /* kids[k..k+n) */
    CN_NOT, CN_NEG,
    CN_BINARY,     /* sub = enum gs__cel_bin; a, b */
    CN_AND, CN_OR, /* a, b */
    CN_COND,       /* a ? b : c */
    CN_HAS,        /* has(a.str): a = operand of the select */
    CN_BIND,       /* cel.bind: a = slot, b = init, c = body */
};

enum gs__cel_bin { CB_EQ, CB_NE, CB_LT, CB_LE, CB_GT, CB_GE, CB_IN, CB_ADD, CB_SUB, CB_MUL, CB_DIV, CB_MOD };

/* Static types found by the checker; DYN is "known only at run time" (attribute values). */
enum gs__cel_type {
    CT_DYN, CT_NULL, CT_BOOL, CT_INT, CT_UINT, CT_STRING, CT_VERSION, CT_QUANTITY,
    CT_LIST, CT_DEVICE, CT_ATTRS, CT_CAPS, CT_DOMAIN_ATTRS, CT_DOMAIN_CAPS, CT_OPTIONAL,
};

enum gs__cel_fn {
    CF_NONE, CF_SIZE, CF_SEMVER, CF_ISSEMVER, CF_QUANTITY, CF_ISQUANTITY, CF_INT, CF_UINT,
    CF_STRINGCONV, CF_MATCHES, CF_STARTSWITH, CF_ENDSWITH, CF_CONTAINS, CF_LOWER, CF_UPPER,
    CF_COMPARETO, CF_ISGREATER, CF_ISLESS, CF_MAJOR, CF_MINOR, CF_PATCH, CF_ASINTEGER,
    CF_ISINTEGER, CF_SIGN, CF_ADD, CF_SUB, CF_ORVALUE, CF_HASVALUE, CF_VALUE, CF_OPT_OF,
    CF_OPT_NONE,
};

struct gs__cel_node {
    uint8_t op, sub, type, fn;
    uint32_t col;          /* 1-based column of the token that made the node */
    int32_t a, b, c;       /* children, -1 when absent */
    uint32_t k, n;         /* kids[k..k+n) for calls and lists; string length for CN_STRING */
    uint32_t str;          /* offset of a name or string literal in the pool */
    int32_t re;            /* index of a constant regex for matches(), -1 */
    union { bool b; int64_t i; uint64_t u; } lit;
};

struct gs_cel_program {
    struct gs__cel_node *nodes; size_t nnodes, capnodes;
    int32_t *kids; size_t nkids, capkids;
    char *pool; size_t npool, cappool;
    regex_t *res; size_t nres, capres;
    int32_t root;
    int nslots;            /* cel.bind variables, innermost-last */
};

/* Translates an RE2 pattern to a POSIX extended one, or says which RE2 feature is refused.
 * 0 and *out (malloc'd), or GS_EINVAL with why (static text) and *at (0-based offset). */
int gs__cel_regex_translate(const char *re, size_t n, char **out, int *icase, const char **why, size_t *at);

/* Evaluates node idx; shared with the compiler only for its prototype. */
struct gs_cel_device;

#endif
