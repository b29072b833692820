/*
 * cmd_apply.c - `gpusched apply -f FILE|DIR|-`: creates what is absent and
 * merges the manifest into what exists (JSON merge patch, so what the server
 * and the scheduler added - the binding, the devices, status - stays).
 * Prints kubectl's words: "pod/web created|configured|unchanged".
 */
#include "cli/commands.h"
#include "control/cli_common.h"
#include "control/store.h"

#include <string.h>

static const char usage_text[] = "usage: gpusched apply -f FILE|DIR|- [-n NS]\n\n";

static const char *meta_str(const json_t *d, const char *k)
{
    return json_string_value(json_object_get(json_object_get(d, "metadata"), k));
}

/* Merges the manifest into the stored object (JSON merge patch): fields the
 * manifest names take its values, fields only the server or the scheduler set
 * (the binding, status, defaults) stay. 0 and *changed, or an error. */
static int merge(struct gs_client *cl, const struct gs_api_resource *r, const char *ns, const char *name,
                 json_t *doc, const json_t *cur, bool *changed, json_t **out)
{
    int err = gs_client_patch(cl, r, ns, name, NULL, false, doc, out);
    *changed = !err && gs_store_obj_rv(*out) != gs_store_obj_rv(cur);
    return err;
}

static int apply_one(struct gs_client *cl, struct gs_cli *c, json_t *doc, size_t idx)
{
    const struct gs_api_resource *r = gs_api_resource_by_kind(json_string_value(json_object_get(doc, "apiVersion")),
                                                              json_string_value(json_object_get(doc, "kind")));
    const char *name = meta_str(doc, "name");
    if (!r || !name) {
        fprintf(stderr, "apply: document %zu: %s\n", idx, !r ? "unknown apiVersion/kind" : "metadata.name is required");
        return 1;
    }
    const char *ns = r->namespaced ? (meta_str(doc, "namespace") ? meta_str(doc, "namespace")
                                                                   : c->ns ? c->ns : "default")
                                   : NULL;
    json_t *cur = NULL, *out = NULL;
    int err = gs_client_get(cl, r, ns, name, &cur);
    const char *verb = "created";
    bool changed = true;
    if (err == GS_ENOENT) err = gs_client_create(cl, r, ns, doc, &out);
    else if (!err) {
        err = merge(cl, r, ns, name, doc, cur, &changed, &out);
        verb = changed ? "configured" : "unchanged";
    }
    const char *w;
    for (size_t i = 0; i < gs_client_warnings(cl, i, &w) && w; i++) /* as kubectl prints them */
        fprintf(stderr, "Warning: %s\n", w);
    if (err) gs_cli_report("apply", err, out ? out : cur);
    else printf("%s/%s %s\n", r->singular, name, verb);
    json_decref(cur);
    json_decref(out);
    return err ? 1 : 0;
}

int gs_cmd_apply(int argc, char **argv)
{
    struct gs_cli c;
    int rc = gs_cli_parse(argc, argv, usage_text, &c);
    if (rc >= 0) return rc;
    if (!c.nfiles || c.nargs) {
        fputs(usage_text, stderr);
        gs_cli_free(&c);
        return 2;
    }
    struct gs_docs docs;
    struct gs_client *cl = NULL;
    rc = 1;
    if (gs_cli_read_manifests(&c, "apply", &docs) == 0 && (cl = gs_cli_connect(&c, "apply"))) {
        rc = 0;
        for (size_t i = 0; i < docs.n; i++) rc |= apply_one(cl, &c, docs.docs[i], i + 1);
    }
    gs_docs_free(&docs);
    gs_client_free(cl);
    gs_cli_free(&c);
    return rc;
}
