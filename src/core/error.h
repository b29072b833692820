/*
 * error.h - infrastructure error codes shared by every layer.
 *
 * Library functions return 0 on success or a negative GS_E* code; they never
 * exit() or print. One table (error.c) maps each code to a name and a message,
 * so gs_strerror() is the only place wording lives. Scheduling verdicts are a
 * different thing (sched/status.h): "pod does not fit" is not an error.
 *
 * Detailed, user-facing problems with a field path (validate, decoders) are
 * collected in a struct gs_diags: a list of (path, message) pairs.
 */
#ifndef GS_CORE_ERROR_H
#define GS_CORE_ERROR_H

#include <stddef.h>

enum gs_err {
    GS_OK = 0,
    GS_ENOMEM = -1,       /* allocation failed */
    GS_EINVAL = -2,       /* malformed or invalid input */
    GS_ERANGE = -3,       /* value out of range / overflow */
    GS_ENOENT = -4,       /* no such object, file or key */
    GS_EEXIST = -5,       /* already exists */
    GS_EIO = -6,          /* read/write failed */
    GS_EPARSE = -7,       /* syntax error in a document */
    GS_ECONFLICT = -8,    /* version conflict */
    GS_EUNSUPPORTED = -9, /* valid but not supported here */
    GS_ETIMEDOUT = -10,   /* deadline passed */
    GS_EBUSY = -11,       /* resource in use */
    GS_EPERM = -12,       /* not allowed */
    GS_ESTATE = -13,      /* call not valid in the current state */
    GS_EFENCED = -14,     /* a fenced store handle's write refused: another replica leads (store.h) */
};
#define GS_ERR_COUNT 15

/* Message for a code ("invalid argument"); never NULL, unknown codes included. */
const char *gs_strerror(int err);
/* Symbolic name for a code ("GS_EINVAL"); never NULL. */
const char *gs_errname(int err);

/* One problem found in user input. path is a field path such as
 * spec.containers[0].resources.limits["nvidia.com/gpu"] ("" for the whole document). */
struct gs_diag {
    char *path;
    char *msg;
};

/* A growable list of problems; zero-initialise, then gs_diags_free(). */
struct gs_diags {
    struct gs_diag *v;
    size_t n, cap;
};

/* Appends a problem (printf-style message). Returns 0 or GS_ENOMEM. */
int gs_diags_add(struct gs_diags *d, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Frees every entry; the list is empty and reusable afterwards. */
void gs_diags_free(struct gs_diags *d);

#endif
