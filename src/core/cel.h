/*
 * cel.h - the CEL subset of resource.k8s.io/v1 device selectors.
 *
 * A selector is compiled once (when its DeviceClass or ResourceClaim is
 * decoded) and evaluated on many devices, so compilation checks everything it
 * can and evaluation only walks the tree. The `device` variable is described
 * by struct gs_cel_device: the driver, typed attributes and quantity
 * capacities, as a ResourceSlice publishes them.
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

#endif
