/*
 * fuzz_cel.c - CEL selector compiler and evaluator fuzz target.
 *
 * Any byte string must compile or fail with a message and a column inside the expression;
 * whatever compiles is evaluated on two fixed devices (a whole GPU and a MIG slice), where it
 * must produce a bool or a runtime error with a message, never crash, and give the same
 * answer when evaluated twice (the program is immutable; evaluation keeps no state).
 */
#include "core/cel.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct gs_cel_attr attrs[] = {
    { .domain = "gpu.nvidia.com", .name = "type", .kind = GS_CEL_STRING, .s = "gpu" },
    { .domain = "gpu.nvidia.com", .name = "productName", .kind = GS_CEL_STRING, .s = "NVIDIA H100 80GB HBM3" },
    { .domain = "gpu.nvidia.com", .name = "driverVersion", .kind = GS_CEL_VERSION, .s = "550.54.15" },
    { .domain = "gpu.nvidia.com", .name = "badVersion", .kind = GS_CEL_VERSION, .s = "1.2" },
    { .domain = "gpu.nvidia.com", .name = "nvlinkDomain", .kind = GS_CEL_INT, .i = 1 },
    { .domain = "gpu.nvidia.com", .name = "healthy", .kind = GS_CEL_BOOL, .b = true },
    { .domain = "resource.kubernetes.io", .name = "numaNode", .kind = GS_CEL_INT, .i = 0 },
    { .domain = "resource.kubernetes.io", .name = "pciBusID", .kind = GS_CEL_STRING, .s = "0000:1b:00.0" },
};
static const struct gs_cel_attr caps[] = {
    { .domain = "gpu.nvidia.com", .name = "memory", .kind = GS_CEL_QUANTITY, .q_milli = 85899345920000 },
};
static const struct gs_cel_attr mig_attrs[] = {
    { .domain = "gpu.nvidia.com", .name = "type", .kind = GS_CEL_STRING, .s = "mig" },
    { .domain = "gpu.nvidia.com", .name = "profile", .kind = GS_CEL_STRING, .s = "1g.10gb" },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > GS_CEL_MAX_LENGTH + 16) return 0;
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    size_t len = strlen(s);
    struct gs_cel_program *p = NULL;
    struct gs_cel_error err;
    int rc = gs_cel_compile(s, &p, &err);
    free(s);
    if (rc != 0) {
        if (p || !err.msg[0] || err.column < 1 || err.column > len + 1) abort();
        return 0;
    }
    const struct gs_cel_device devs[] = {
        { .driver = "gpu.nvidia.com", .attrs = attrs, .nattrs = sizeof attrs / sizeof attrs[0], .capacity = caps, .ncapacity = 1 },
        { .driver = "gpu.nvidia.com", .attrs = mig_attrs, .nattrs = 2, .allow_multiple_allocations = true },
    };
    for (size_t i = 0; i < 2; i++) {
        bool r1 = false, r2 = false;
        struct gs_cel_error e1, e2;
        int a = gs_cel_eval(p, &devs[i], &r1, &e1);
        int b = gs_cel_eval(p, &devs[i], &r2, &e2);
        if (a != b) abort();
        if (a == 0 && r1 != r2) abort();
        if (a != 0 && (!e1.msg[0] || strcmp(e1.msg, e2.msg) || e1.column != e2.column || e1.column < 1 || e1.column > len)) abort();
    }
    gs_cel_free(p);
    return 0;
}
