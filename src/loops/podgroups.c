/*
 * podgroups.c - PodGroup store keys per shape and the scheduler's status
 * write; see podgroups.h.
 *
 * The group key of a pod is "<name>" (scheduler-plugins) or
 * "<api group>/<name>" (Volcano, native), and each shape is stored under
 * "podgroups.<api group>/", so both directions are string surgery on the
 * api group; nothing here parses the PodGroup's spec.
 */
#include "loops/podgroups.h"

#include "control/store.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define COSCHED_GROUP "scheduling.x-k8s.io"
#define VOLCANO_GROUP "scheduling.volcano.sh"
#define NATIVE_GROUP "scheduling.k8s.io"

const char *const gs_podgroup_prefixes[] = {"podgroups." COSCHED_GROUP "/", "podgroups." VOLCANO_GROUP "/",
                                            "podgroups." NATIVE_GROUP "/", NULL};

/*--- Keys ---*/

int gs_podgroup_store_key(const struct gs_pod *pod, char *buf, size_t len)
{
    const char *g = pod->pod_group;
    if (!g || !*g) return -1;
    const char *ns = pod->meta.namespace_ ? pod->meta.namespace_ : "default";
    const char *slash = strchr(g, '/');
    int n;
    if (slash) /* "<api group>/<name>" */
        n = snprintf(buf, len, "podgroups.%.*s/%s/%s", (int)(slash - g), g, ns, slash + 1);
    else n = snprintf(buf, len, "podgroups." COSCHED_GROUP "/%s/%s", ns, g);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

int gs_podgroup_ns_group(const char *store_key, char *buf, size_t len)
{
    for (int i = 0; gs_podgroup_prefixes[i]; i++) {
        size_t pl = strlen(gs_podgroup_prefixes[i]);
        if (strncmp(store_key, gs_podgroup_prefixes[i], pl)) continue;
        const char *nsname = store_key + pl, *slash = strchr(nsname, '/');
        if (!slash || !slash[1]) return -1;
        int n = i == 0 ? snprintf(buf, len, "%s", nsname)
                       : snprintf(buf, len, "%.*s/%.*s/%s", (int)(slash - nsname), nsname,
                                  (int)(pl - strlen("podgroups.") - 1), gs_podgroup_prefixes[i] + strlen("podgroups."),
                                  slash + 1);
        return n < 0 || (size_t)n >= len ? -1 : 0;
    }
    return -1;
}

/*--- Status ---*/

static void rfc3339(double now_s, char *buf, size_t len)
{
    time_t t = (time_t)now_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The condition of type in status.conditions (created when create), or NULL. */
static json_t *condition(json_t *status, const char *type, bool create)
{
    json_t *conds = json_object_get(status, "conditions");
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && !strcmp(t, type)) return c;
    }
    if (!create) return NULL;
    if (!json_is_array(conds)) json_object_set_new(status, "conditions", conds = json_array());
    c = json_pack("{s:s}", "type", type);
    if (!c || json_array_append_new(conds, c)) return NULL;
    return c;
}

/* Sets a condition as Kubernetes does: lastTransitionTime moves only when
 * the status does. */
static void set_condition(json_t *status, const char *type, const char *st, const char *reason, const char *msg,
                          const char *now)
{
    json_t *c = condition(status, type, true);
    if (!c) return;
    const char *old = json_string_value(json_object_get(c, "status"));
    if (!old || strcmp(old, st)) json_object_set_new(c, "lastTransitionTime", json_string(now));
    json_object_set_new(c, "status", json_string(st));
    json_object_set_new(c, "reason", json_string(reason));
    json_object_set_new(c, "message", json_string(msg ? msg : ""));
}

static void drop_condition(json_t *status, const char *type)
{
    json_t *conds = json_object_get(status, "conditions");
    for (size_t i = json_array_size(conds); i-- > 0;) {
        const char *t = json_string_value(json_object_get(json_array_get(conds, i), "type"));
        if (t && !strcmp(t, type)) json_array_remove(conds, i);
    }
}

static bool is_scheduled(const json_t *status, const char *api)
{
    const char *phase = json_string_value(json_object_get(status, "phase"));
    if (!strncmp(api, NATIVE_GROUP "/", strlen(NATIVE_GROUP) + 1)) {
        json_t *c = condition((json_t *)status, "PodGroupScheduled", false);
        const char *s = json_string_value(json_object_get(c, "status"));
        return s && !strcmp(s, "True");
    }
    if (!strncmp(api, VOLCANO_GROUP "/", strlen(VOLCANO_GROUP) + 1))
        return phase && (!strcmp(phase, "Running") || !strcmp(phase, "Completed"));
    return phase && (!strcmp(phase, "Scheduled") || !strcmp(phase, "Running") || !strcmp(phase, "Finished"));
}

int gs_podgroup_status_fn(json_t *cur, json_t **out, void *arg)
{
    const struct gs_podgroup_status *s = arg;
    if (!cur) return GS_STORE_UNCHANGED;
    const char *api = json_string_value(json_object_get(cur, "apiVersion"));
    if (!api) api = "";
    json_t *status = json_object_get(cur, "status");
    if (!s->scheduled && json_is_object(status) && is_scheduled(status, api)) return GS_STORE_UNCHANGED;
    json_t *next = json_deep_copy(cur);
    if (!next) return GS_ENOMEM;
    status = json_object_get(next, "status");
    if (!json_is_object(status)) json_object_set_new(next, "status", status = json_object());
    char now[32];
    rfc3339(s->now_s, now, sizeof now);
    const char *placed = "minMember pods of the group are placed";
    if (!strncmp(api, NATIVE_GROUP "/", strlen(NATIVE_GROUP) + 1)) {
        if (s->scheduled) set_condition(status, "PodGroupScheduled", "True", "Scheduled", placed, now);
        else set_condition(status, "PodGroupScheduled", "False", "Unschedulable", s->message, now);
    } else if (!strncmp(api, VOLCANO_GROUP "/", strlen(VOLCANO_GROUP) + 1)) {
        if (s->scheduled) {
            json_object_set_new(status, "phase", json_string("Running"));
            set_condition(status, "Scheduled", "True", "Scheduled", placed, now);
            drop_condition(status, "Unschedulable");
        } else {
            if (!json_object_get(status, "phase")) json_object_set_new(status, "phase", json_string("Pending"));
            set_condition(status, "Unschedulable", "True", "NotEnoughResources", s->message, now);
        }
    } else {
        if (s->scheduled) json_object_set_new(status, "phase", json_string("Scheduled"));
        else if (!json_object_get(status, "phase")) json_object_set_new(status, "phase", json_string("Pending"));
    }
    if (json_equal(next, cur)) {
        json_decref(next);
        return GS_STORE_UNCHANGED;
    }
    *out = next;
    return 0;
}
