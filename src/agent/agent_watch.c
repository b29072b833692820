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
 *
 * Each watch asks the server to end it at the next resync (timeoutSeconds)
 * and allows bookmarks: a BOOKMARK only moves the resourceVersion the next
 * watch starts from, and a watch that ends normally is followed by another
 * from there; only an ERROR (410 Expired) or a failed watch leads to a
 * relist. A relist that fails - the server unreachable, an answer cut short
 * or unreadable - changes nothing: the desired map, and so every running
 * pod, stays as it was until a list succeeds (retried with back-off).
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
    if (!strcmp(type, "BOOKMARK")) { /* only a version to resume from, never a pod */
        const char *rv = gs__jstr(json_object_get(obj, "metadata"), "resourceVersion");
        if (rv) snprintf(w->rv, sizeof w->rv, "%s", rv);
        return 0;
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

int gs__agent_relist(struct gs_agent *a, struct gs_client *c, char *rv_out, size_t rv_len)
{
    char fs[256];
    snprintf(fs, sizeof fs, "spec.nodeName=%s", a->node);
    json_t *list = NULL;
    int err = gs_client_list(c, gs_api_resource_lookup("pods"), NULL, NULL, fs, false, &list);
    if (err) { /* the client never hands back an unreadable list as an empty one */
        gs_log(GS_LOG_WARN, "agent: relist failed, keeping the pods as they are", "error", gs_strerror(err),
               "message", gs_client_status_message(list), NULL);
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
    snprintf(rv_out, rv_len, "%s", rv ? rv : "");
    json_decref(list);
    return 0;
}

/* Sleeps ms in short steps, so a stop is seen promptly. */
static void nap(struct gs_agent *a, int ms)
{
    for (int t = 0; t < ms && !atomic_load(&a->stop); t += 100) usleep(100 * 1000);
}

void *gs__watch_main(void *arg)
{
    struct gs_agent *a = arg;
    struct gs_client *c = NULL;
    struct gs_diags d = {0};
    char fs[256];
    snprintf(fs, sizeof fs, "spec.nodeName=%s", a->node);
    struct wctx w = {.a = a};
    int backoff_ms = 300;
    while (!atomic_load(&a->stop)) {
        if (!c && gs_client_new(&a->o.conn, &c, &d)) {
            gs_diags_free(&d);
            nap(a, 500);
            continue;
        }
        /* Transfers end on a stop and on a relist request (watch_cancel is
         * set with either), so a paused agent lists again at once. */
        gs_client_set_cancel(c, &a->watch_cancel);
        atomic_store(&a->relist_now, false); /* this list answers the request */
        atomic_store(&a->watch_cancel, atomic_load(&a->stop));
        if (gs__agent_relist(a, c, w.rv, sizeof w.rv)) {
            nap(a, backoff_ms);
            backoff_ms = backoff_ms * 2 > 5000 ? 5000 : backoff_ms * 2;
            continue;
        }
        backoff_ms = 300;
        int64_t until = gs__mono_ns() + (int64_t)a->o.resync_ms * 1000000;
        w.broken = false;
        for (int64_t left; !atomic_load(&a->stop) && !w.broken && !atomic_load(&a->relist_now) &&
                           (left = until - gs__mono_ns()) > 0;) {
            int secs = (int)((left + 999999999) / 1000000000); /* the server ends it at the resync */
            int err = gs_client_watch(c, gs_api_resource_lookup("pods"), NULL, NULL, fs, w.rv, secs, on_event, &w);
            if (err < 0) w.broken = true;
        }
        if (w.broken && !atomic_load(&a->stop)) nap(a, 200);
    }
    gs_client_free(c);
    gs_diags_free(&d);
    return NULL;
}
