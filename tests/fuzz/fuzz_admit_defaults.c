/*
 * fuzz_admit_defaults.c - the API server's pod create defaulting and the
 * terminal-phase rule (src/control/admit_defaults.c) on arbitrary request
 * bodies, and the toleration-seconds flag parser on arbitrary text.
 *
 * Invariants: the defaulting never crashes on any JSON, is idempotent (a
 * second pass changes nothing: the pod then tolerates both taints), and only
 * ever appends to spec.tolerations; the phase check flags exactly a change
 * away from Succeeded/Failed; the flag parser either yields a value that
 * prints back to the same digits or an error naming the flag.
 */
#include "control/admit_defaults.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void flag(const char *text)
{
    char err[256] = "";
    int64_t v = -1;
    if (gs_admit_seconds_parse("default-unreachable-toleration-seconds", text, &v, err, sizeof err)) {
        if (!strstr(err, "--default-unreachable-toleration-seconds")) abort();
        return;
    }
    char back[32];
    snprintf(back, sizeof back, "%lld", (long long)v);
    if (v < 0 || strtoll(back, NULL, 10) != strtoll(text, NULL, 10)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    flag(s);
    json_t *obj = json_loads(s, JSON_DECODE_ANY, NULL);
    free(s);
    if (!obj) return 0;
    struct gs_admit_defaults d = {.not_ready_s = 300, .unreachable_s = 7};
    json_t *before = json_deep_copy(obj);
    size_t had = json_array_size(json_object_get(json_object_get(obj, "spec"), "tolerations"));
    gs_admit_default_tolerations(&d, obj);
    json_t *tols = json_object_get(json_object_get(obj, "spec"), "tolerations");
    if (json_array_size(tols) < had || json_array_size(tols) > had + 2) abort();
    json_t *once = json_deep_copy(obj);
    gs_admit_default_tolerations(&d, obj);
    if (!json_equal(once, obj)) abort();
    struct gs_diags diags = {0};
    gs_admit_phase_check(before, obj, &diags); /* the defaulting never touches the status */
    if (diags.n) abort();
    json_t *moved = json_deep_copy(obj);
    if (json_is_object(moved)) {
        json_object_set_new(moved, "status", json_pack("{s:s}", "phase", "Running"));
        gs_admit_phase_check(obj, moved, &diags);
        const char *was = json_string_value(json_object_get(json_object_get(obj, "status"), "phase"));
        bool terminal = was && (!strcmp(was, "Succeeded") || !strcmp(was, "Failed"));
        if ((diags.n == 1) != terminal || (diags.n && strcmp(diags.v[0].path, "status.phase"))) abort();
    }
    gs_diags_free(&diags);
    json_decref(moved);
    json_decref(once);
    json_decref(before);
    json_decref(obj);
    return 0;
}
