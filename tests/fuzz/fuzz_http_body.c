/*
 * fuzz_http_body.c - what the API server parses from a request: the
 * labelSelector and fieldSelector of the URL, and the body, applied as a
 * JSON merge patch and as a strategic merge patch to a stored pod and then
 * validated as the server does before a write.
 *
 * Input layout: line 1 = labelSelector, line 2 = fieldSelector, the rest =
 * the body. Nothing may crash, leak or trip a sanitizer; a selector that
 * parses must evaluate; a patch result must be an object that validates or
 * is refused with diagnostics.
 */
#include "control/api.h"
#include "core/codec.h"
#include "core/object.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char stored[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"default\","
    "\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"x\",\"resources\":"
    "{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},\"status\":{\"phase\":\"Pending\"}}";

static void check_patched(json_t *patched)
{
    if (!patched) return;
    struct gs_object *o = NULL;
    struct gs_diags d = {0};
    if (json_is_object(patched) && gs_object_decode(patched, &o, &d) != 0 && d.n == 0) abort();
    gs_object_free(o);
    gs_diags_free(&d);
    json_decref(patched);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *ls = buf, *fs = strchr(ls, '\n');
    char *body = NULL;
    if (fs) {
        *fs++ = 0;
        body = strchr(fs, '\n');
        if (body) *body++ = 0;
    }
    json_t *pod = json_loads(stored, 0, NULL);
    struct gs_selector sel;
    const char *why;
    if (gs__label_selector_parse(ls, &sel, &why) == 0) {
        gs__label_selector_matches(&sel, pod);
        gs_selector_free(&sel);
    } else if (!why || !*why) {
        abort();
    }
    struct gs__field_sel f;
    if (fs && gs__field_selector_parse(fs, &f, &why) == 0) {
        gs__field_selector_matches(&f, pod);
        gs__field_selector_free(&f);
    }
    json_t *patch = NULL;
    struct gs_diags d = {0};
    if (body && gs_json_decode(body, strlen(body), &patch, &d) == 0) {
        check_patched(gs__merge_patch(pod, patch));
        check_patched(gs__strategic_merge_patch(pod, patch));
        json_decref(patch);
    }
    gs_diags_free(&d);
    json_decref(pod);
    free(buf);
    return 0;
}
