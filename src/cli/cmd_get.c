/*
 * cmd_get.c - `gpusched get KIND [NAME...]`: tables like kubectl's (the
 * server builds the Table; -o wide shows its extra columns), or the objects
 * as JSON/YAML, or kind/name lines.
 */
#include "cli/commands.h"
#include "control/cli_common.h"

#include <stdlib.h>
#include <string.h>

static const char usage_text[] = "usage: gpusched get KIND [NAME...] [-n NS | -A] [-o wide|json|yaml|name] [-l SEL]\n\n"
                                 "KIND: pods (po), nodes (no), podgroups (pg), queues, clusterqueues (cq),\n"
                                 "localqueues (lq), resourceflavors, noderesourcetopologies (nrt), clusterpolicies, events\n\n";

static void print_names(const struct gs_api_resource *r, const json_t *items)
{
    size_t i;
    json_t *o;
    json_array_foreach(items, i, o)
        printf("%s/%s\n", r->singular, json_string_value(json_object_get(json_object_get(o, "metadata"), "name")));
}

static int show(struct gs_client *cl, struct gs_cli *c, const struct gs_api_resource *r, const char *ns,
                const char *name, bool *printed_header)
{
    bool table = !c->output || !strcmp(c->output, "wide");
    json_t *out = NULL;
    int err;
    if (name) {
        char fs[600];
        snprintf(fs, sizeof fs, "metadata.name=%s", name);
        err = gs_client_list(cl, r, ns, NULL, fs, table, &out);
    } else {
        err = gs_client_list(cl, r, ns, c->selector, c->field_sel, table, &out);
    }
    if (err) {
        gs_cli_report("get", err, out);
        json_decref(out);
        return 1;
    }
    size_t n = table ? json_array_size(json_object_get(out, "rows")) : json_array_size(json_object_get(out, "items"));
    int rc = 0;
    if (name && n == 0) {
        fprintf(stderr, "get: %s \"%s\" not found\n", r->plural, name);
        rc = 1;
    } else if (table) {
        gs_cli_print_table(stdout, out, c->output != NULL, c->all_ns && r->namespaced, !*printed_header);
        *printed_header = *printed_header || n;
    } else if (!strcmp(c->output, "name")) {
        print_names(r, json_object_get(out, "items"));
    } else {
        const json_t *doc = name ? json_array_get(json_object_get(out, "items"), 0) : out;
        gs_cli_print_doc(stdout, doc, !strcmp(c->output, "yaml"));
    }
    if (!name && n == 0 && (!c->output || strcmp(c->output, "json")))
        fprintf(stderr, "No resources found%s%s%s.\n", r->namespaced && !c->all_ns ? " in " : "",
                r->namespaced && !c->all_ns ? ns : "", r->namespaced && !c->all_ns ? " namespace" : "");
    json_decref(out);
    return rc;
}

int gs_cmd_get(int argc, char **argv)
{
    struct gs_cli c;
    int rc = gs_cli_parse(argc, argv, usage_text, &c);
    if (rc >= 0) return rc;
    if (c.nargs < 1) {
        fputs(usage_text, stderr);
        gs_cli_free(&c);
        return 2;
    }
    const struct gs_api_resource *r = gs_api_resource_lookup(c.args[0]);
    if (!r) {
        fprintf(stderr, "get: unknown resource type \"%s\"\n", c.args[0]);
        gs_cli_free(&c);
        return 2;
    }
    struct gs_client *cl = gs_cli_connect(&c, "get");
    if (!cl) {
        gs_cli_free(&c);
        return 1;
    }
    const char *ns = c.all_ns ? NULL : c.ns ? c.ns : "default";
    bool header = false;
    rc = 0;
    if (c.nargs == 1) rc = show(cl, &c, r, ns, NULL, &header);
    for (int i = 1; i < c.nargs; i++) rc |= show(cl, &c, r, ns, c.args[i], &header);
    gs_client_free(cl);
    gs_cli_free(&c);
    return rc;
}
