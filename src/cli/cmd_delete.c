/*
 * cmd_delete.c - `gpusched delete KIND NAME...` or `delete -f FILE`.
 */
#include "cli/commands.h"
#include "control/cli_common.h"

#include <string.h>

static const char usage_text[] = "usage: gpusched delete KIND NAME... [-n NS] | delete -f FILE|DIR|-\n\n";

static int delete_one(struct gs_client *cl, const struct gs_api_resource *r, const char *ns, const char *name)
{
    json_t *out = NULL;
    int err = gs_client_delete(cl, r, r->namespaced ? ns : NULL, name, &out);
    if (err) gs_cli_report("delete", err, out);
    else printf("%s \"%s\" deleted\n", r->singular, name);
    json_decref(out);
    return err ? 1 : 0;
}

static int delete_files(struct gs_client *cl, struct gs_cli *c)
{
    struct gs_docs docs;
    if (gs_cli_read_manifests(c, "delete", &docs)) {
        gs_docs_free(&docs);
        return 1;
    }
    int rc = 0;
    for (size_t i = 0; i < docs.n; i++) {
        const json_t *d = docs.docs[i], *md = json_object_get(d, "metadata");
        const struct gs_api_resource *r = gs_api_resource_by_kind(json_string_value(json_object_get(d, "apiVersion")),
                                                                  json_string_value(json_object_get(d, "kind")));
        const char *name = json_string_value(json_object_get(md, "name"));
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        if (!r || !name) {
            fprintf(stderr, "delete: document %zu: unknown kind or no name\n", i + 1);
            rc = 1;
            continue;
        }
        rc |= delete_one(cl, r, ns ? ns : c->ns ? c->ns : "default", name);
    }
    gs_docs_free(&docs);
    return rc;
}

int gs_cmd_delete(int argc, char **argv)
{
    struct gs_cli c;
    int rc = gs_cli_parse(argc, argv, usage_text, &c);
    if (rc >= 0) return rc;
    const struct gs_api_resource *r = c.nargs ? gs_api_resource_lookup(c.args[0]) : NULL;
    if (!c.nfiles && (c.nargs < 2 || !r)) {
        if (c.nargs && !r) fprintf(stderr, "delete: unknown resource type \"%s\"\n", c.args[0]);
        else fputs(usage_text, stderr);
        gs_cli_free(&c);
        return 2;
    }
    struct gs_client *cl = gs_cli_connect(&c, "delete");
    rc = 1;
    if (cl && c.nfiles) rc = delete_files(cl, &c);
    else if (cl) {
        rc = 0;
        for (int i = 1; i < c.nargs; i++) rc |= delete_one(cl, r, c.ns ? c.ns : "default", c.args[i]);
    }
    gs_client_free(cl);
    gs_cli_free(&c);
    return rc;
}
