/*
 * status.c - names of scheduling verdict codes and the status constructor.
 *
 * The name table sits next to the enum's length check so adding a code
 * without a name fails to compile.
 */
#include "sched/status.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>

static const char *const code_names[] = {
    [GS_SUCCESS] = "Success",
    [GS_ERROR] = "Error",
    [GS_UNSCHEDULABLE] = "Unschedulable",
    [GS_UNSCHEDULABLE_AND_UNRESOLVABLE] = "UnschedulableAndUnresolvable",
    [GS_WAIT] = "Wait",
    [GS_SKIP] = "Skip",
    [GS_PENDING] = "Pending",
};
static_assert(sizeof code_names / sizeof code_names[0] == GS_CODE_COUNT, "code_names out of sync with enum gs_code");

const char *gs_code_name(enum gs_code c)
{
    if ((int)c < 0 || c >= GS_CODE_COUNT) return "Unknown";
    return code_names[c];
}

struct gs_status gs_status_make(enum gs_code c, const char *fmt, ...)
{
    struct gs_status s = {.code = c};
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s.reason, sizeof s.reason, fmt, ap);
        va_end(ap);
    }
    return s;
}
