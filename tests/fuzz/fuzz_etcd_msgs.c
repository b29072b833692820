/*
 * fuzz_etcd_msgs.c - etcd's answers as the etcd store decodes them
 * (src/control/store_etcd.h): protobuf-c unpacks the bytes, then the
 * store's own conversions run on what came out.
 *
 * The first byte picks the message; the rest is its protobuf encoding:
 *   0 WatchResponse  -> gs__etcd_event_convert on every event (prefix "/registry/")
 *   1 RangeResponse  -> gs__etcd_kv_object on every key-value
 * Invariants: no crash or leak; a converted event's key is what followed
 * the prefix, and its value is a JSON object whose
 * metadata.resourceVersion is the event's version; an object from a range
 * carries the version asked for.
 */
#include "control/store_etcd.h"
#include "etcdserverpb/rpc.pb-c.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char PREFIX[] = "/registry/";

static void check_watch(const uint8_t *p, size_t n)
{
    Etcdserverpb__WatchResponse *r = etcdserverpb__watch_response__unpack(NULL, n, p);
    if (!r) return;
    for (size_t i = 0; i < r->n_events; i++) {
        struct gs_store_event e;
        if (gs__etcd_event_convert(PREFIX, sizeof PREFIX - 1, r->events[i], &e)) continue;
        const Mvccpb__KeyValue *kv = r->events[i]->kv;
        if (strlen(e.key) != kv->key.len - (sizeof PREFIX - 1) || e.rv != kv->mod_revision) abort();
        json_t *o = json_loads(e.value, 0, NULL);
        if (!json_is_object(o) || gs_store_obj_rv(o) != e.rv) abort();
        json_decref(o);
        free(e.key);
        gs_store_text_release(e.value);
    }
    etcdserverpb__watch_response__free_unpacked(r, NULL);
}

static void check_range(const uint8_t *p, size_t n)
{
    Etcdserverpb__RangeResponse *r = etcdserverpb__range_response__unpack(NULL, n, p);
    if (!r) return;
    for (size_t i = 0; i < r->n_kvs; i++) {
        json_t *o = NULL;
        int64_t rv = r->kvs[i]->mod_revision > 0 ? r->kvs[i]->mod_revision : 1;
        if (gs__etcd_kv_object(r->kvs[i], rv, &o)) continue;
        if (!json_is_object(o) || gs_store_obj_rv(o) != rv) abort();
        json_decref(o);
    }
    etcdserverpb__range_response__free_unpacked(r, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    if (data[0] % 2 == 0) check_watch(data + 1, size - 1);
    else check_range(data + 1, size - 1);
    return 0;
}
