/*
 * fuzz_watch_stream.c - fuzz target for what a Kubernetes API server sends
 * the informers (informer.c): watch stream lines and list pages. The first
 * byte picks the decoder and the resource; the rest is the server's bytes
 * (for watches, several lines split on newlines as the stream reader does).
 * Any bytes decode or fail with a reason; what decodes holds what the
 * informer relies on: an object with a name, a key, a resourceVersion.
 */
#include "informer/informer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const plurals[] = {"pods", "nodes", "podgroups", "leases"};
static const char *const groups[] = {"", "", "scheduling.x-k8s.io", "coordination.k8s.io"};
static const char *const versions[] = {"v1", "v1", "v1alpha1", "v1"};

static void check_object(const struct gs_api_resource *r, const json_t *obj)
{
    char key[1024];
    const json_t *md = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(md, "name"));
    if (!name || !*name) abort();
    if (r->namespaced && !json_string_value(json_object_get(md, "namespace"))) abort();
    if (!gs_informer_key_of(r, obj, key, sizeof key) && strncmp(key, r->id, strlen(r->id))) abort();
}

static void watch_lines(const struct gs_api_resource *r, const char *p, size_t n)
{
    while (n) {
        const char *nl = memchr(p, '\n', n);
        size_t len = nl ? (size_t)(nl - p) : n;
        struct gs_watch_event ev;
        char why[512] = "";
        int err = gs_watch_event_decode(r, p, len, &ev, why, sizeof why);
        if (err < 0 && !why[0]) abort();
        if (!err) {
            if (!json_is_object(ev.object)) abort();
            if (ev.type != GS_WATCH_ERROR && !ev.rv[0]) abort();
            if (ev.type <= GS_WATCH_DELETED) check_object(r, ev.object);
            json_decref(ev.object);
        }
        p += len + (nl != NULL);
        n -= len + (nl != NULL);
    }
}

static void list_page(const struct gs_api_resource *r, const char *p, size_t n)
{
    json_t *doc = json_loadb(p, n, 0, NULL);
    if (!doc) return;
    struct gs_list_page pg;
    char why[512] = "";
    int err = gs_list_page_decode(r, doc, &pg, why, sizeof why);
    json_decref(doc);
    if (err) {
        if (!why[0]) abort();
        return;
    }
    if (!json_is_array(pg.items) || !pg.rv[0] || strlen(pg.cont) >= sizeof pg.cont) abort();
    size_t i;
    json_t *it;
    json_array_foreach(pg.items, i, it) check_object(r, it);
    gs_list_page_free(&pg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned k = data[0] % 4;
    const struct gs_api_resource *r = gs_api_resource_find(groups[k], versions[k], plurals[k]);
    if (!r) abort();
    if (data[0] & 0x80) list_page(r, (const char *)data + 1, size - 1);
    else watch_lines(r, (const char *)data + 1, size - 1);
    return 0;
}
