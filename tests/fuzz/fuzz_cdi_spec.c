/*
 * fuzz_cdi_spec.c - fuzz target for the CDI spec checker the OCI spec
 * builder runs on every spec file it reads (node/oci.h, gs_cdi_spec_parse).
 *
 * Any byte string must be accepted or refused with a message that names the
 * file; an accepted spec has everything the builder later reads without
 * checking: a kind "vendor/class", devices with string names and object
 * containerEdits, hooks with a known stage and an absolute path, device
 * nodes with an absolute path.
 */
#include "core/error.h"
#include "node/oci.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_edits(const json_t *e)
{
    if (!e) return;
    if (!json_is_object(e)) abort();
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(e, "deviceNodes"), i, x) {
        const char *p = json_string_value(json_object_get(x, "path"));
        if (!p || p[0] != '/') abort();
    }
    json_array_foreach(json_object_get(e, "hooks"), i, x) {
        const char *p = json_string_value(json_object_get(x, "path"));
        if (!p || p[0] != '/' || !json_string_value(json_object_get(x, "hookName"))) abort();
    }
    json_array_foreach(json_object_get(e, "mounts"), i, x) {
        if (!json_string_value(json_object_get(x, "hostPath"))) abort();
        const char *c = json_string_value(json_object_get(x, "containerPath"));
        if (!c || c[0] != '/') abort();
    }
    json_array_foreach(json_object_get(e, "env"), i, x) if (!strchr(json_string_value(x), '=')) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *s = NULL;
    char err[512] = "";
    int rc = gs_cdi_spec_parse((const char *)data, size, "fuzz.yaml", &s, err, sizeof err);
    if (rc) {
        if (rc != GS_EINVAL && rc != GS_ENOMEM) abort();
        if (rc == GS_EINVAL && strncmp(err, "CDI spec fuzz.yaml", 18)) abort();
        if (s) abort();
        return 0;
    }
    const char *kind = json_string_value(json_object_get(s, "kind"));
    if (!kind || !strchr(kind, '/')) abort();
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(s, "devices"), i, d) {
        if (!json_string_value(json_object_get(d, "name"))) abort();
        check_edits(json_object_get(d, "containerEdits"));
    }
    check_edits(json_object_get(s, "containerEdits"));
    json_decref(s);
    return 0;
}
