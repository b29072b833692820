/*
 * agent_events.c - the agent's Events (kubelet's reasons and messages:
 * Started, Killing, BackOff, Failed), written through the API.
 *
 * The agent records with the server's recorder code (control/events.h):
 * aggregation, the spam filter and a bounded queue drained by the
 * recorder's thread, so a slow or absent server never holds the sync loop.
 * The recorder's sink is a client of its own (a libcurl handle serves one
 * thread) with the node's token: it creates Events in the pod's namespace
 * through the normal create path and patches count and lastTimestamp of
 * aggregated ones. involvedObject is always the pod, with the container's
 * fieldPath, as kubelet writes it.
 */
#include "agent/agent_int.h"
#include "control/client.h"
#include "control/events.h"
#include "control/resources.h"
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int client_write(void *ctx, const char *ns, const char *name, const json_t *ev, bool update)
{
    struct gs_client *cl = ctx;
    const struct gs_api_resource *res = gs_api_resource_lookup("events");
    json_t *out = NULL;
    int err;
    if (!update) {
        err = gs_client_create(cl, res, ns, ev, &out);
    } else {
        json_t *patch = json_deep_copy(ev);
        if (!patch) return GS_ENOMEM;
        json_object_del(patch, "metadata"); /* the server's (uid, resourceVersion) stay */
        err = gs_client_patch(cl, res, ns, name, NULL, false, patch, &out);
        json_decref(patch);
    }
    json_decref(out);
    return err;
}

int gs__agent_events_start(struct gs_agent *a)
{
    struct gs_diags d = {0};
    struct gs_client_opts co = a->o.conn;
    co.timeout_ms = 5000; /* an Event is not worth the default 30 s wait */
    int err = gs_client_new(&co, &a->ev_cl, &d);
    gs_diags_free(&d);
    if (err) return err;
    struct gs_recorder_opts ro = {.sink = {client_write, a->ev_cl}};
    return gs_recorder_new(&ro, &a->events);
}

void gs__agent_events_stop(struct gs_agent *a)
{
    gs_recorder_free(a->events); /* sends what is queued first */
    a->events = NULL;
    gs_client_free(a->ev_cl);
    a->ev_cl = NULL;
}

void gs__pod_event(struct gs_agent *a, const struct gs__pod *p, const struct gs__ctr *c, const char *type,
                   const char *reason, const char *fmt, ...)
{
    if (!a->events) return;
    char msg[GS_EVENT_MESSAGE_MAX + 1], path[300] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c) snprintf(path, sizeof path, "spec.containers{%s}", c->name);
    struct gs_event_source src = {a->events, "kubelet", a->node, 0};
    struct gs_event_ref ref = {.kind = "Pod", .api_version = "v1", .ns = p->ns, .name = p->name, .uid = p->uid,
                               .field_path = c ? path : NULL};
    gs_event_record(&src, &ref, type, reason, reason, "%s", msg);
}
