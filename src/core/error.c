/*
 * error.c - the single table of error codes and the diagnostics list.
 */
#include "core/error.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    const char *msg;
} errtab[] = {
    [0] = {"GS_OK", "success"},
    [1] = {"GS_ENOMEM", "out of memory"},
    [2] = {"GS_EINVAL", "invalid argument"},
    [3] = {"GS_ERANGE", "value out of range"},
    [4] = {"GS_ENOENT", "not found"},
    [5] = {"GS_EEXIST", "already exists"},
    [6] = {"GS_EIO", "input/output error"},
    [7] = {"GS_EPARSE", "parse error"},
    [8] = {"GS_ECONFLICT", "conflict"},
    [9] = {"GS_EUNSUPPORTED", "not supported"},
    [10] = {"GS_ETIMEDOUT", "timed out"},
    [11] = {"GS_EBUSY", "resource busy"},
    [12] = {"GS_EPERM", "permission denied"},
    [13] = {"GS_ESTATE", "invalid state"},
    [14] = {"GS_EFENCED", "write fenced off: this replica no longer leads"},
};
static_assert(sizeof errtab / sizeof errtab[0] == GS_ERR_COUNT, "errtab out of sync with enum gs_err");

const char *gs_strerror(int err)
{
    if (err > 0 || -err >= GS_ERR_COUNT) return "unknown error";
    return errtab[-err].msg;
}

const char *gs_errname(int err)
{
    if (err > 0 || -err >= GS_ERR_COUNT) return "GS_EUNKNOWN";
    return errtab[-err].name;
}

int gs_diags_add(struct gs_diags *d, const char *path, const char *fmt, ...)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        struct gs_diag *nv = realloc(d->v, cap * sizeof *nv);
        if (!nv) return GS_ENOMEM;
        d->v = nv;
        d->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    char *msg = NULL;
    int r = vasprintf(&msg, fmt, ap);
    va_end(ap);
    char *p = strdup(path ? path : "");
    if (r < 0 || !p) {
        if (r >= 0) free(msg);
        free(p);
        return GS_ENOMEM;
    }
    d->v[d->n].path = p;
    d->v[d->n].msg = msg;
    d->n++;
    return 0;
}

void gs_diags_free(struct gs_diags *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->v[i].path);
        free(d->v[i].msg);
    }
    free(d->v);
    d->v = NULL;
    d->n = d->cap = 0;
}
