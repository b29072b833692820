/*
 * api_proto.c - the two protobuf bodies the server accepts: DeleteOptions
 * and Eviction, as kubectl (client-go) sends them with
 * `Content-Type: application/vnd.kubernetes.protobuf`.
 *
 * client-go's typed clients encode built-in kinds as protobuf: `kubectl
 * drain` deletes pods (--disable-eviction) and posts pods/eviction that way,
 * and there is no switch to make it send JSON. Every other body (objects,
 * patches) still comes as JSON or YAML, so rather than a general protobuf
 * codec this file turns those two messages into the JSON the handlers
 * already read, field for field, and refuses anything else with a message
 * that says so.
 *
 * The wire format (k8s.io/apimachinery/pkg/runtime/serializer/protobuf): the
 * 4 bytes "k8s\0", then a runtime.Unknown message {1: TypeMeta {1:
 * apiVersion, 2: kind}, 2: raw bytes, 3: contentEncoding, 4: contentType};
 * raw is the kind's own message (meta/v1 and policy/v1 generated.proto).
 * The input is untrusted: every length is checked against what remains,
 * nesting is bounded by the shape of the two messages, and unknown fields
 * are skipped as protobuf requires (fuzzed by tests/fuzz/fuzz_proto.c).
 */
#include "control/api.h"

#include <stdio.h>
#include <string.h>

/*--- Wire format ---*/

struct pb {
    const unsigned char *p, *end;
};

static int varint(struct pb *b, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end) return GS_EINVAL;
        unsigned char c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return 0;
    }
    return GS_EINVAL;
}

/* One field: its number and wire type; a length-delimited one in *sub. */
struct pbfield {
    uint32_t num;
    int wire;
    uint64_t v;    /* varint value */
    struct pb sub; /* length-delimited bytes */
};

static int next_field(struct pb *b, struct pbfield *f)
{
    uint64_t key;
    if (varint(b, &key)) return GS_EINVAL;
    f->num = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    if (f->num == 0) return GS_EINVAL;
    switch (f->wire) {
    case 0: return varint(b, &f->v);
    case 1:
        if (b->end - b->p < 8) return GS_EINVAL;
        b->p += 8;
        return 0;
    case 5:
        if (b->end - b->p < 4) return GS_EINVAL;
        b->p += 4;
        return 0;
    case 2: {
        uint64_t n;
        if (varint(b, &n) || n > (uint64_t)(b->end - b->p)) return GS_EINVAL;
        f->sub = (struct pb){b->p, b->p + n};
        b->p += n;
        return 0;
    }
    default: return GS_EINVAL; /* groups (3, 4) are not used by Kubernetes */
    }
}

static json_t *pb_string(const struct pbfield *f)
{
    return json_stringn((const char *)f->sub.p, (size_t)(f->sub.end - f->sub.p)); /* NULL when not UTF-8 */
}

/* Sets key to the field's string; GS_EINVAL when it is not a valid one. */
static int set_string(json_t *obj, const char *key, const struct pbfield *f)
{
    if (f->wire != 2) return GS_EINVAL;
    json_t *s = pb_string(f);
    return s ? json_object_set_new(obj, key, s) : GS_EINVAL;
}

/*--- Messages ---*/

static int preconditions(struct pb b, json_t *out)
{
    struct pbfield f;
    while (b.p < b.end) {
        if (next_field(&b, &f)) return GS_EINVAL;
        if (f.num == 1 && set_string(out, "uid", &f)) return GS_EINVAL;
        if (f.num == 2 && set_string(out, "resourceVersion", &f)) return GS_EINVAL;
    }
    return 0;
}

static int delete_options(struct pb b, json_t *out)
{
    struct pbfield f;
    while (b.p < b.end) {
        if (next_field(&b, &f)) return GS_EINVAL;
        int err = 0;
        switch (f.num) {
        case 1: err = f.wire ? GS_EINVAL : json_object_set_new(out, "gracePeriodSeconds", json_integer((int64_t)f.v));
            break;
        case 2: {
            json_t *p = json_object();
            err = f.wire != 2 || !p || preconditions(f.sub, p) ? GS_EINVAL : 0;
            if (!err) json_object_set(out, "preconditions", p);
            json_decref(p);
            break;
        }
        case 3: err = f.wire ? GS_EINVAL : json_object_set_new(out, "orphanDependents", json_boolean(f.v)); break;
        case 4: err = set_string(out, "propagationPolicy", &f); break;
        case 5: {
            json_t *arr = json_object_get(out, "dryRun"), *s = f.wire == 2 ? pb_string(&f) : NULL;
            if (!arr) json_object_set_new(out, "dryRun", arr = json_array());
            err = s ? json_array_append_new(arr, s) : GS_EINVAL;
            break;
        }
        default: break; /* later fields (ignoreStoreReadError...) are skipped */
        }
        if (err) return GS_EINVAL;
    }
    return 0;
}

static int object_meta(struct pb b, json_t *out)
{
    static const char *const names[] = {[1] = "name", [2] = "generateName", [3] = "namespace", [5] = "uid",
                                        [6] = "resourceVersion"};
    struct pbfield f;
    while (b.p < b.end) {
        if (next_field(&b, &f)) return GS_EINVAL;
        if (f.num < sizeof names / sizeof names[0] && names[f.num] && set_string(out, names[f.num], &f))
            return GS_EINVAL;
    }
    return 0;
}

static int eviction(struct pb b, json_t *out)
{
    struct pbfield f;
    while (b.p < b.end) {
        if (next_field(&b, &f)) return GS_EINVAL;
        if (f.num != 1 && f.num != 2) continue;
        json_t *o = json_object();
        int err = f.wire != 2 || !o || (f.num == 1 ? object_meta(f.sub, o) : delete_options(f.sub, o)) ? GS_EINVAL : 0;
        if (!err) json_object_set(out, f.num == 1 ? "metadata" : "deleteOptions", o);
        json_decref(o);
        if (err) return GS_EINVAL;
    }
    return 0;
}

/*--- Envelope ---*/

int gs__proto_decode(const char *buf, size_t len, json_t **out, char *why, size_t whylen)
{
    *out = NULL;
    if (len < 4 || memcmp(buf, "k8s", 4)) {
        snprintf(why, whylen, "a protobuf body must start with the 4 bytes \"k8s\\0\"");
        return GS_EINVAL;
    }
    struct pb b = {(const unsigned char *)buf + 4, (const unsigned char *)buf + len}, raw = {NULL, NULL};
    json_t *tm = json_object();
    if (!tm) return GS_ENOMEM;
    struct pbfield f;
    int err = 0;
    while (!err && b.p < b.end) {
        if (next_field(&b, &f)) err = GS_EINVAL;
        else if (f.num == 1 && f.wire == 2) {
            struct pb t = f.sub;
            while (!err && t.p < t.end) {
                struct pbfield g;
                if (next_field(&t, &g)) err = GS_EINVAL;
                else if (g.num == 1) err = set_string(tm, "apiVersion", &g);
                else if (g.num == 2) err = set_string(tm, "kind", &g);
            }
        } else if (f.num == 2 && f.wire == 2) {
            raw = f.sub;
        } else if ((f.num == 3 || f.num == 4) && f.wire == 2 && f.sub.end != f.sub.p) {
            snprintf(why, whylen, "protobuf %s is not supported", f.num == 3 ? "contentEncoding" : "contentType");
            json_decref(tm);
            return GS_EINVAL;
        }
    }
    if (err) {
        snprintf(why, whylen, "malformed protobuf envelope");
        json_decref(tm);
        return GS_EINVAL;
    }
    const char *kind = json_string_value(json_object_get(tm, "kind"));
    bool is_delete = kind && !strcmp(kind, "DeleteOptions"), is_evict = kind && !strcmp(kind, "Eviction");
    if (!is_delete && !is_evict) {
        snprintf(why, whylen, "protobuf bodies are accepted only for DeleteOptions and Eviction, got kind \"%s\"; "
                 "send JSON", kind ? kind : "");
        json_decref(tm);
        return GS_EINVAL;
    }
    if (!raw.p) raw = (struct pb){b.end, b.end}; /* an empty message */
    err = is_delete ? delete_options(raw, tm) : eviction(raw, tm);
    if (err) {
        snprintf(why, whylen, "malformed protobuf %s", kind);
        json_decref(tm);
        return GS_EINVAL;
    }
    *out = tm;
    return 0;
}
