/*
 * test_informer_decode.c - the decoders of what an API server sends the
 * informers (informer.h): watch lines and list pages that are well formed
 * decode to what the informer uses; every malformed one is refused with a
 * message naming the field and the value, and keys and key prefixes map to
 * the resource table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "informer/informer.h"

#include <string.h>

static const struct gs_api_resource *R(const char *name) { return gs_api_resource_lookup(name); }

static void watch_refused(const struct gs_api_resource *r, const char *line, const char *want)
{
    struct gs_watch_event ev;
    char why[512] = "";
    assert_int_equal(gs_watch_event_decode(r, line, strlen(line), &ev, why, sizeof why), GS_EPARSE);
    if (!strstr(why, want)) fail_msg("\"%s\" does not say \"%s\"", why, want);
}

static void watch_lines(void **state)
{
    (void)state;
    struct gs_watch_event ev;
    char why[512];
    const char *ok = "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":"
                     "\"ns\",\"resourceVersion\":\"42\"}}}";
    assert_int_equal(gs_watch_event_decode(R("pods"), ok, strlen(ok), &ev, why, sizeof why), 0);
    assert_int_equal(ev.type, GS_WATCH_MODIFIED);
    assert_string_equal(ev.rv, "42");
    char key[128];
    assert_int_equal(gs_informer_key_of(R("pods"), ev.object, key, sizeof key), 0);
    assert_string_equal(key, "pods/ns/p");
    json_decref(ev.object);
    const char *bm = "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"77\"}}}";
    assert_int_equal(gs_watch_event_decode(R("pods"), bm, strlen(bm), &ev, why, sizeof why), 0);
    assert_int_equal(ev.type, GS_WATCH_BOOKMARK);
    assert_string_equal(ev.rv, "77");
    json_decref(ev.object);
    const char *er = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}";
    assert_int_equal(gs_watch_event_decode(R("pods"), er, strlen(er), &ev, why, sizeof why), 0);
    assert_int_equal(ev.type, GS_WATCH_ERROR);
    assert_int_equal(ev.code, 410);
    json_decref(ev.object);
    assert_int_equal(gs_watch_event_decode(R("pods"), " \r", 2, &ev, why, sizeof why), 1); /* a keep-alive */
    watch_refused(R("pods"), "{\"type\":\"ADDED\",\"obj", "watch event: not JSON: line 1");
    watch_refused(R("pods"), "{\"object\":{}}", "watch event: type: missing");
    watch_refused(R("pods"), "{\"type\":\"RENAMED\",\"object\":{}}", "type \"RENAMED\": not ADDED, MODIFIED");
    watch_refused(R("pods"), "{\"type\":\"ADDED\",\"object\":3}", "object: missing or not an object");
    watch_refused(R("pods"), "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Node\",\"metadata\":{}}}",
                  "object.kind \"Node\": not a Pod");
    watch_refused(R("pods"), "{\"type\":\"ADDED\",\"object\":{\"metadata\":[]}}", "object.metadata: missing");
    watch_refused(R("pods"), "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"\"}}}",
                  "object.metadata.name: missing or empty");
    watch_refused(R("pods"), "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"p\",\"resourceVersion\":\"1\"}}}",
                  "object.metadata.namespace: missing for the namespaced Pod");
    watch_refused(R("nodes"), "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"n\"}}}",
                  "object.metadata.resourceVersion: missing");
    watch_refused(R("nodes"), "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{}}}",
                  "BOOKMARK object.metadata.resourceVersion: missing");
}

static void page_refused(const char *text, const char *want)
{
    json_t *doc = json_loads(text, 0, NULL);
    assert_non_null(doc);
    struct gs_list_page p;
    char why[512] = "";
    assert_int_equal(gs_list_page_decode(R("nodes"), doc, &p, why, sizeof why), GS_EPARSE);
    json_decref(doc);
    if (!strstr(why, want)) fail_msg("\"%s\" does not say \"%s\"", why, want);
}

static void list_pages(void **state)
{
    (void)state;
    json_t *doc = json_loads("{\"metadata\":{\"resourceVersion\":\"9\",\"continue\":\"tok\"},\"items\":["
                             "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"3\"}}]}",
                             0, NULL);
    struct gs_list_page p;
    char why[512];
    assert_int_equal(gs_list_page_decode(R("nodes"), doc, &p, why, sizeof why), 0);
    assert_string_equal(p.rv, "9");
    assert_string_equal(p.cont, "tok");
    assert_int_equal(json_array_size(p.items), 1);
    gs_list_page_free(&p);
    json_decref(doc);
    doc = json_loads("{\"metadata\":{\"resourceVersion\":\"9\"},\"items\":null}", 0, NULL);
    assert_int_equal(gs_list_page_decode(R("nodes"), doc, &p, why, sizeof why), 0); /* an empty list, as Go writes it */
    assert_int_equal(json_array_size(p.items), 0);
    assert_string_equal(p.cont, "");
    gs_list_page_free(&p);
    json_decref(doc);
    page_refused("[]", "list: not an object");
    page_refused("{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":{}}", "list: items: not an array");
    page_refused("{\"items\":[]}", "list: metadata.resourceVersion: missing");
    page_refused("{\"metadata\":{\"resourceVersion\":\"1\",\"continue\":5},\"items\":[]}",
                 "list: metadata.continue: not a string");
    page_refused("{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[{\"metadata\":{\"name\":\"a\","
                 "\"resourceVersion\":\"1\"}},{\"kind\":\"Pod\",\"metadata\":{}}]}",
                 "list: items[1].kind \"Pod\": not a Node");
}

static void keys_and_prefixes(void **state)
{
    (void)state;
    const char *ns, *name;
    size_t nsl, namel;
    const struct gs_api_resource *r = gs_informer_resource_of_key("pods/team/web-0", &ns, &nsl, &name, &namel);
    assert_ptr_equal(r, R("pods"));
    assert_int_equal(nsl, 4);
    assert_memory_equal(ns, "team", 4);
    assert_int_equal(namel, 5);
    assert_memory_equal(name, "web-0", 5);
    r = gs_informer_resource_of_key("nodes/n1", &ns, &nsl, &name, &namel);
    assert_ptr_equal(r, R("nodes"));
    assert_null(ns);
    assert_memory_equal(name, "n1", 2);
    r = gs_informer_resource_of_key("podgroups.scheduling.x-k8s.io/default/", &ns, &nsl, &name, &namel);
    assert_non_null(r);
    assert_string_equal(r->group, "scheduling.x-k8s.io");
    assert_int_equal(nsl, 7);
    assert_null(name);
    assert_non_null(gs_informer_resource_of_key("pods/", &ns, &nsl, &name, &namel));
    assert_null(ns);
    assert_null(gs_informer_resource_of_key("widgets/a", &ns, &nsl, &name, &namel));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(watch_lines),
        cmocka_unit_test(list_pages),
        cmocka_unit_test(keys_and_prefixes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
