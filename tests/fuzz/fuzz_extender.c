/*
 * fuzz_extender.c - kube-scheduler extender request bodies (extender.h):
 * the first byte picks the verb (filter, prioritize, preempt, bind), the
 * rest is the body.
 *
 * Whatever the input, parsing must not crash, leak or trip a sanitizer; a
 * refusal says why and names the request type; an accepted request has
 * what its verb needs (a Pod with a name, node names that are non-empty
 * strings, victims with UIDs, a binding's pod and node), and the Pod goes
 * through the same decoder the extender then uses.
 */
#include "core/object.h"
#include "kube/extender.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_pod(json_t *pod)
{
    if (!json_is_object(pod)) abort();
    const char *name = json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
    if (!name || !*name) abort();
    json_t *copy = json_deep_copy(pod);
    if (!json_object_get(copy, "apiVersion")) json_object_set_new(copy, "apiVersion", json_string("v1"));
    if (!json_object_get(copy, "kind")) json_object_set_new(copy, "kind", json_string("Pod"));
    struct gs_diags d = {0};
    struct gs_object *o = NULL;
    int err = gs_object_decode(copy, &o, &d);
    if (err == GS_EINVAL && !d.n) abort(); /* a refusal says why */
    gs_object_free(o);
    gs_diags_free(&d);
    json_decref(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    enum gs_ext_verb v = (enum gs_ext_verb)(data[0] % GS_EXT_VERBS);
    struct gs_ext_request r;
    char err[512];
    int rc = gs_ext_request_parse(v, (const char *)data + 1, size - 1, &r, err, sizeof err);
    if (rc == GS_EINVAL && (!err[0] || strncmp(err, "Extender", 8))) abort();
    if (!rc) {
        if (v == GS_EXT_BIND) {
            if (!r.pod_name || !*r.pod_name || !r.node || !*r.node || !r.pod_namespace) abort();
        } else {
            check_pod(r.pod);
        }
        for (size_t i = 0; i < r.nnames; i++)
            if (!r.names[i] || !*r.names[i]) abort();
        if (!r.cache_capable && (v == GS_EXT_FILTER || v == GS_EXT_PRIORITIZE) &&
            json_array_size(r.node_items) != r.nnames)
            abort();
        for (size_t i = 0; i < r.nvictims; i++) {
            if (!r.victims[i].node || r.victims[i].pdb_violations < 0) abort();
            if (i && strcmp(r.victims[i - 1].node, r.victims[i].node) > 0) abort();
            for (size_t k = 0; k < r.victims[i].nuids; k++)
                if (!r.victims[i].uids[k] || !*r.victims[i].uids[k]) abort();
        }
    }
    gs_ext_request_free(&r);
    return 0;
}
