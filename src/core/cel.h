/*
 * cel.h - CEL for DRA device selectors (resource.k8s.io/v1), compiled and evaluated in C.
 *
 * DeviceClass and ResourceClaim selectors are CEL expressions over one variable, `device`
 * (driver, attributes, capacity, allowMultipleAllocations). The allocator evaluates each
 * selector on every candidate device, so a selector is compiled once (lexed, parsed into an
 * AST held in one block, type-checked against the DRA environment, constant regexes compiled)
 * and the resulting program is immutable: any number of threads may evaluate it at once.
 *
 * The language is the subset Kubernetes users write in selectors; docs/DRA.md "Selectors
 * (CEL)" lists it, with the limits of resource.k8s.io/v1 (10 KiB of text, a runtime cost of
 * 1,000,000, nesting depth 100). Every error carries the 1-based column of the fault, counted
 * in bytes from the start of the expression, and a message worded as cel-go words it.
 */
#ifndef GS_CORE_CEL_H
#define GS_CORE_CEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_cel_program;                 /* compiled, immutable, shareable across threads */
enum gs_cel_kind { GS_CEL_NULL, GS_CEL_BOOL, GS_CEL_INT, GS_CEL_STRING, GS_CEL_VERSION, GS_CEL_QUANTITY };
struct gs_cel_attr {                   /* one attribute or capacity of a device */
    const char *domain;                /* "gpu.nvidia.com", "resource.kubernetes.io" */
    const char *name;                  /* "productName" */
    enum gs_cel_kind kind;
    bool b; int64_t i; const char *s;  /* string or semver text (VERSION) */
    int64_t q_milli;                   /* QUANTITY in milli-units (capacity values) */
};
struct gs_cel_device {                 /* the `device` variable */
    const char *driver;
    const struct gs_cel_attr *attrs; size_t nattrs;
    const struct gs_cel_attr *capacity; size_t ncapacity;   /* kind QUANTITY */
    bool allow_multiple_allocations;
};
struct gs_cel_error { size_t column; char msg[256]; };  /* column: 1-based, of the fault */
/* Compiles expr (<= 10 KiB) and checks it against the DRA environment (the
 * result must be bool). 0, GS_EPARSE / GS_EINVAL with err filled. */
int gs_cel_compile(const char *expr, struct gs_cel_program **out, struct gs_cel_error *err);
/* Evaluates on one device: 0 with *result, or GS_EINVAL (runtime error:
 * unknown field, type mismatch, cost above 1,000,000) with err filled. */
int gs_cel_eval(const struct gs_cel_program *p, const struct gs_cel_device *dev, bool *result,
                struct gs_cel_error *err);
void gs_cel_free(struct gs_cel_program *p);

/* Limits of resource.k8s.io/v1 (CELSelectorExpressionMaxLength / MaxCost) and of the parser. */
#define GS_CEL_MAX_LENGTH 10240
#define GS_CEL_MAX_COST 1000000
#define GS_CEL_MAX_DEPTH 100

/* The runtime cost of the last successful evaluation is not kept; this variant reports it
 * (cost units as in the doc: one per node visited, string work by length). cost may be NULL. */
int gs_cel_eval_cost(const struct gs_cel_program *p, const struct gs_cel_device *dev, bool *result,
                     int64_t *cost, struct gs_cel_error *err);

#endif
