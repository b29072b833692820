/*
 * store_etcd.h - the etcd store's conversions of etcd's answers into store
 * objects and events (store_etcd.c), on their own so the fuzz target
 * (tests/fuzz/fuzz_etcd_msgs.c) runs exactly what the store runs on bytes
 * that came from the network. The store itself is opened through store.h
 * (gs_store_open_etcd).
 */
#ifndef GS_CONTROL_STORE_ETCD_H
#define GS_CONTROL_STORE_ETCD_H

#include "control/store.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct Mvccpb__KeyValue;
struct Mvccpb__Event;

/* kv's value as an object with metadata.resourceVersion set to rv (a new
 * reference). GS_EPARSE when the value is not a JSON object, GS_ENOMEM. */
int gs__etcd_kv_object(const struct Mvccpb__KeyValue *kv, int64_t rv, json_t **out);

/* One watch event on a key under prefix (plen bytes, ending in '/') as a
 * store event: the key without the prefix; for PUT the new object (ADDED
 * when the key was created in that revision, else MODIFIED), for DELETE the
 * previous object (or, when etcd no longer had it, just its name) with the
 * delete's revision. 0; GS_EINVAL (no key, a key outside prefix, no
 * revision), GS_EPARSE (a value that is not a JSON object), GS_ENOMEM.
 * Free out's key and value with gs_store_events_free's rules. */
int gs__etcd_event_convert(const char *prefix, size_t plen, const struct Mvccpb__Event *ev,
                           struct gs_store_event *out);

#endif
