/*
 * fuzz_events_v1.c - an events.k8s.io/v1 request body -> the core v1 Event
 * the server stores (gs_event_from_events_v1) -> back to events.k8s.io/v1.
 *
 * Whatever the input, conversion must not crash, leak or trip a sanitizer;
 * a body it accepts names its object and converts back to a document with
 * the same fields (one storage served through two groups).
 */
#include "control/events.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *in = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!in) return 0;
    struct gs_diags d = {0};
    json_t *core = NULL;
    int err = gs_event_from_events_v1(in, &core, &d);
    if (err && !d.n) abort(); /* a refusal says why */
    if (!err) {
        if (!json_string_value(json_object_get(json_object_get(core, "involvedObject"), "name"))) abort();
        json_t *back = gs_event_to_events_v1(core);
        const char *k;
        json_t *v;
        static const char *const core_only[] = {"apiVersion", "kind", "involvedObject", "message",
                                                "reportingComponent", "source", "firstTimestamp",
                                                "lastTimestamp", "count"}; /* dropped: not events.k8s.io fields */
        json_object_foreach(in, k, v) {
            bool skip = false;
            for (size_t i = 0; i < sizeof core_only / sizeof core_only[0]; i++) skip |= !strcmp(k, core_only[i]);
            if (!skip && !json_equal(v, json_object_get(back, k))) abort();
        }
        json_decref(back);
        json_decref(core);
    }
    gs_diags_free(&d);
    json_decref(in);
    return 0;
}
