/*
 * api_explain.c - the pods/NAME/explain subresource: "why is this pod
 * pending", answered by the in-server scheduler from its live cache
 * (sched_loop.c, sched/explain.h): an Explanation document whose "report"
 * holds the text. `gpusched explain POD`
 * calls it when a server is configured.
 */
#include "control/apiserver_int.h"

#include <stdlib.h>
#include <string.h>

enum MHD_Result gs__handle_explain(struct gs__req *r)
{
    if (strcmp(r->res->plural, "pods") || !r->name)
        return gs__reply_status(r, 404, NULL, r->name, "only pods have an explain subresource");
    if (strcmp(r->method, "GET")) return gs__reply_status(r, 405, NULL, r->name, "method %s not allowed", r->method);
    if (!r->s->explain)
        return gs__reply_status(r, 503, "ServiceUnavailable", r->name, "this server runs no scheduler");
    char *text = NULL;
    int err = r->s->explain(r->s->explain_ctx, r->ns, r->name, &text);
    if (err == GS_ENOENT)
        return gs__reply_status(r, 404, NULL, r->name, "pods \"%s\" not found by the scheduler", r->name);
    if (err) return gs__reply_status(r, 503, "ServiceUnavailable", r->name, "explain failed: %s", gs_strerror(err));
    json_t *doc = json_pack("{s:s, s:s, s:{s:s, s:s}, s:s}", "apiVersion", "scheduling.gpusched.io/v1alpha1", "kind",
                            "Explanation", "metadata", "name", r->name, "namespace", r->ns, "report", text ? text : "");
    free(text);
    return doc ? gs__reply_json(r, 200, doc) : gs__reply_status(r, 500, NULL, r->name, "out of memory");
}
