/*
 * event_sink.c - the recorder's sink over a gs_source; see event_sink.h.
 *
 * The conversion is events.c's (gs_event_to_events_v1: the same renames the
 * API server applies when it serves stored Events as events.k8s.io/v1), so
 * an Event reads the same whether our server converted it or this sink did.
 * Only the reporter fields differ: a standalone replica names itself.
 */
#include "kube/event_sink.h"

#include "control/apiserver.h" /* gs_apiserver_prepare_new: uid and creationTimestamp of a stored create */
#include "informer/source.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gs_kube_event_sink {
    struct gs_source *src;
    char *controller, *instance;
    pthread_mutex_t mu;
    struct gs_kube_event_sink_stats st;
};

json_t *gs_kube_event_v1(const json_t *core, const char *controller, const char *instance)
{
    json_t *v1 = gs_event_to_events_v1(core);
    if (!v1) return NULL;
    if (controller) json_object_set_new(v1, "reportingController", json_string(controller));
    if (instance) json_object_set_new(v1, "reportingInstance", json_string(instance));
    /* events.k8s.io wants series only from the second occurrence on (count >= 2). */
    json_t *series = json_object_get(v1, "series");
    if (series && json_integer_value(json_object_get(series, "count")) < 2) json_object_del(v1, "series");
    return v1;
}

/* The core form with the reporter fields, for the in-process store. */
static json_t *core_event(const struct gs_kube_event_sink *s, const json_t *ev)
{
    json_t *c = json_deep_copy(ev);
    if (!c) return NULL;
    if (s->controller) json_object_set_new(c, "reportingComponent", json_string(s->controller));
    if (s->instance) json_object_set_new(c, "reportingInstance", json_string(s->instance));
    return c;
}

static int replace_fn(json_t *cur, json_t **out, void *arg)
{
    if (!cur) return GS_ENOENT; /* expired or deleted: the recorder creates a new one */
    json_t *n = json_deep_copy(arg);
    if (!n) return GS_ENOMEM;
    json_object_set(n, "metadata", json_object_get(cur, "metadata"));
    *out = n;
    return 0;
}

static int sink_write(void *ctx, const char *ns, const char *name, const json_t *ev, bool update)
{
    struct gs_kube_event_sink *s = ctx;
    bool kube = gs_source_kind(s->src) == GS_SOURCE_KUBE;
    char key[1024];
    if (snprintf(key, sizeof key, "%s/%s/%s", kube ? "events.events.k8s.io" : "events", ns, name) >= (int)sizeof key)
        return GS_EINVAL;
    json_t *doc = kube ? gs_kube_event_v1(ev, s->controller, s->instance) : core_event(s, ev);
    if (!doc) return GS_ENOMEM;
    json_object_set_new(doc, "metadata", json_pack("{s:s, s:s}", "name", name, "namespace", ns));
    int err;
    if (update) {
        err = gs_source_mutate(s->src, key, NULL, replace_fn, doc, NULL, NULL);
    } else {
        err = kube ? 0 : gs_apiserver_prepare_new(doc); /* the API server does this for a POST */
        if (!err) err = gs_source_create(s->src, key, doc, NULL);
    }
    json_decref(doc);
    pthread_mutex_lock(&s->mu);
    if (err) s->st.errors++;
    else if (update) s->st.updated++;
    else s->st.created++;
    pthread_mutex_unlock(&s->mu);
    return err;
}

int gs_kube_event_sink_new(const struct gs_kube_event_sink_opts *o, struct gs_kube_event_sink **out)
{
    *out = NULL;
    if (!o->source) return GS_EINVAL;
    struct gs_kube_event_sink *s = calloc(1, sizeof *s);
    if (!s) return GS_ENOMEM;
    s->src = o->source;
    if ((o->controller && !(s->controller = strdup(o->controller))) ||
        (o->instance && !(s->instance = strdup(o->instance)))) {
        free(s->controller);
        free(s);
        return GS_ENOMEM;
    }
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return 0;
}

struct gs_event_sink gs_kube_event_sink(struct gs_kube_event_sink *s)
{
    return (struct gs_event_sink){sink_write, s};
}

void gs_kube_event_sink_stats(struct gs_kube_event_sink *s, struct gs_kube_event_sink_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    pthread_mutex_unlock(&s->mu);
}

void gs_kube_event_sink_free(struct gs_kube_event_sink *s)
{
    if (!s) return;
    pthread_mutex_destroy(&s->mu);
    free(s->controller);
    free(s->instance);
    free(s);
}
