/*
 * agent_watch.c - the watch thread: keeps a->desired (key -> the server's
 * latest object for every pod bound to this node) and marks what changed.
 *
 * Level-triggered, like kubelet's pod config: the loop never sees a stream
 * of events, only "this key now looks like that", so a missed event costs
 * nothing more than a delay until the next relist. A relist happens at
 * start, after any watch failure (server restarted, 410 Expired) and every
 * resync period, and when the sync loop asks (a->relist_now: it was paused).
 * A pod that leaves the selection (re-created off this node
 * by the node lifecycle or by reclaim) arrives as DELETED, since the
 * server's filtered watch says so; the resync covers the few changes
 * between a list and the watch that follows it.
 */
#include "agent/agent_int.h"
#include "control/resources.h"
#include "core/log.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct wctx {
    struct gs_agent *a;
    char rv[32];
    bool broken;
};

static const char *key_of(const json_t *obj, char *buf, size_t len)
{
    json_t *md = json_object_get(obj, "metadata");
    const char *ns = gs__jstr(md, "namespace"), *name = gs__jstr(md, "name");
    if (!name) return NULL;
    snprintf(buf, len, "%s/%s", ns ? ns : "default", name);
    return buf;
}

static void set_desired(struct gs_agent *a, const char *key, json_t *obj)
{
    if (obj) json_object_set(a->desired, key, obj);
    else json_object_del(a->desired, key);
    json_object_set_new(a->changed, key, json_true());
}

static int on_event(const char *type, json_t *obj, void *arg)
{
    struct wctx *w = arg;
    struct gs_agent *a = w->a;
    if (atomic_load(&a->stop) || atomic_load(&a->relist_now)) return 1;
    if (!strcmp(type, "ERROR")) {
        w->broken = true;
        return 1;
    }
    char key[512];
    if (!key_of(obj, key, sizeof key)) return 0;
    const char *rv = gs__jstr(json_object_get(obj, "metadata"), "resourceVersion");
    if (rv) snprintf(w->rv, sizeof w->rv, "%s", rv);
    const char *node = gs__jstr(json_object_get(obj, "spec"), "nodeName");
    bool here = node && !strcmp(node, a->node) && strcmp(type, "DELETED");
    pthread_mutex_lock(&a->wmu);
    set_desired(a, key, here ? obj : NULL);
    pthread_mutex_unlock(&a->wmu);
    return 0;
}

static const char *rv_of(const json_t *obj)
{
    const char *rv = gs__jstr(json_object_get(obj, "metadata"), "resourceVersion");
    return rv ? rv : "";
}

/* Replaces the desired map with a fresh list. */
static int relist(struct gs_agent *a, struct gs_client *c, const char *fs, struct wctx *w)
{
    json_t *list = NULL;
    int err = gs_client_list(c, gs_api_resource_lookup("pods"), NULL, NULL, fs, false, &list);
    if (err) {
        json_decref(list);
        return err;
    }
    json_t *fresh = json_object(), *items = json_object_get(list, "items"), *it;
    size_t i;
    char key[512];
    json_array_foreach(items, i, it)
        if (key_of(it, key, sizeof key)) json_object_set(fresh, key, it);
    pthread_mutex_lock(&a->wmu);
    const char *k;
    json_t *v;
    json_object_foreach(a->desired, k, v)
        if (!json_object_get(fresh, k)) json_object_set_new(a->changed, k, json_true());
    json_object_foreach(fresh, k, v) {
        json_t *old = json_object_get(a->desired, k);
        if (!old || strcmp(rv_of(old), rv_of(v)))
            json_object_set_new(a->changed, k, json_true());
    }
    json_decref(a->desired);
    a->desired = fresh;
    a->desired_synced = true;
    a->list_gen++; /* the reconcile gate (agent.c) */
    pthread_mutex_unlock(&a->wmu);
    const char *rv = gs__jstr(json_object_get(list, "metadata"), "resourceVersion");
    snprintf(w->rv, sizeof w->rv, "%s", rv ? rv : "");
    json_decref(list);
    return 0;
}

void *gs__watch_main(void *arg)
{
    struct gs_agent *a = arg;
    struct gs_client *c = NULL;
    struct gs_diags d = {0};
    char fs[256];
    snprintf(fs, sizeof fs, "spec.nodeName=%s", a->node);
    struct wctx w = {.a = a};
    while (!atomic_load(&a->stop)) {
        if (!c && gs_client_new(&a->o.conn, &c, &d)) {
            gs_diags_free(&d);
            usleep(500000);
            continue;
        }
        atomic_store(&a->relist_now, false); /* this list answers the request */
        if (relist(a, c, fs, &w)) {
            usleep(300000);
            continue;
        }
        int64_t until = gs__mono_ns() + (int64_t)a->o.resync_ms * 1000000;
        w.broken = false;
        while (!atomic_load(&a->stop) && !w.broken && !atomic_load(&a->relist_now) && gs__mono_ns() < until) {
            int err = gs_client_watch(c, gs_api_resource_lookup("pods"), NULL, NULL, fs, w.rv, 1, on_event, &w);
            if (err < 0) w.broken = true;
        }
        if (w.broken && !atomic_load(&a->stop)) usleep(200000);
    }
    gs_client_free(c);
    gs_diags_free(&d);
    return NULL;
}
