/*
 * fuzz_dra_convert.c - the resource.k8s.io version conversion the API server
 * applies to request bodies (control/dra_convert.c).
 *
 * Any JSON document, tagged with a kind by the first byte and written at
 * v1beta1, v1beta2 or v1: converting to the stored v1 shape never crashes
 * and is idempotent; serving the stored object at every version and
 * converting it back gives the stored object again, whenever the stored
 * object is in v1's shape (no v1beta1-only fields left over, requests that
 * hold only what the API defines).
 */
#include "control/dra_convert.h"
#include "control/resources.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const kinds[] = {"ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "DeviceClass"};
static const char *const plurals[] = {"resourceslices", "resourceclaims", "resourceclaimtemplates", "deviceclasses"};
static const char *const versions[] = {"v1beta1", "v1beta2", "v1"};

/* Is obj free of what only v1beta1 has (devices[].basic, flat request fields)? */
static bool v1_shaped(const json_t *obj)
{
    const json_t *spec = json_object_get(obj, "spec"), *x;
    size_t i;
    json_array_foreach(json_object_get(spec, "devices"), i, x) if (json_object_get(x, "basic")) return false;
    const json_t *cs = json_object_get(obj, "kind") && !strcmp(json_string_value(json_object_get(obj, "kind")),
                                                                  "ResourceClaimTemplate")
                           ? json_object_get(spec, "spec")
                           : spec;
    static const char *const flat[] = {"deviceClassName", "selectors", "allocationMode", "count", "adminAccess",
                                       "tolerations", "capacity", NULL};
    json_array_foreach(json_object_get(json_object_get(cs, "devices"), "requests"), i, x) {
        /* a request holds name and one of exactly / firstAvailable; exactly only its own fields, at least one
         * (what else a client sends is not kept by either version, so it need not survive the trip) */
        const char *key;
        json_t *v;
        json_t *ex = json_object_get(x, "exactly");
        if (!json_is_object(x) || (ex != NULL) == (json_object_get(x, "firstAvailable") != NULL)) return false;
        json_object_foreach((json_t *)x, key, v)
            if (strcmp(key, "name") && strcmp(key, "exactly") && strcmp(key, "firstAvailable")) return false;
        if (ex && (!json_is_object(ex) || !json_object_size(ex))) return false;
        json_object_foreach(ex, key, v) {
            bool known = false;
            for (const char *const *f = flat; *f; f++) known |= !strcmp(*f, key);
            if (!known) return false;
        }
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned k = data[0] % 4, v = (data[0] / 4) % 3;
    json_t *doc = json_loadb((const char *)data + 1, size - 1, 0, NULL);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return 0;
    }
    char api[64];
    snprintf(api, sizeof api, "resource.k8s.io/%s", versions[v]);
    json_object_set_new(doc, "apiVersion", json_string(api));
    json_object_set_new(doc, "kind", json_string(kinds[k]));
    if (gs_dra_to_storage(doc) == 0) {
        if (strcmp(json_string_value(json_object_get(doc, "apiVersion")), "resource.k8s.io/v1")) abort();
        json_t *again = json_deep_copy(doc);
        if (gs_dra_to_storage(again) || !json_equal(again, doc)) abort();
        json_decref(again);
        for (unsigned w = 0; w < 3 && v1_shaped(doc); w++) {
            const struct gs_api_resource *r = gs_api_resource_find("resource.k8s.io", versions[w], plurals[k]);
            if (!r) abort();
            json_t *served = gs_dra_serve(r, json_deep_copy(doc));
            if (!served) continue; /* out of memory */
            if (gs_dra_to_storage(served) || !json_equal(served, doc)) abort();
            json_decref(served);
        }
    }
    json_decref(doc);
    return 0;
}
