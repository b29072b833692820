/*
 * cmd_describe.c - `gpusched describe KIND NAME`: an object for people.
 *
 * Pods: node, phase, the devices the scheduler chose, conditions (a pending
 * pod's PodScheduled message is the scheduler's diagnosis) and events.
 * Nodes: capacity, GPUs, conditions and the pods bound there with their
 * devices. Both end with their Events in kubectl's table. Other kinds:
 * their spec and status as YAML.
 */
#include "cli/commands.h"
#include "control/cli_common.h"
#include "core/object.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage_text[] = "usage: gpusched describe KIND NAME [-n NS]\n\n";

static const char *s(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

static void print_map(const char *title, const json_t *m)
{
    printf("%-14s", title);
    if (!json_object_size(m)) printf("<none>\n");
    const char *k;
    json_t *v;
    bool first = true;
    json_object_foreach((json_t *)m, k, v) {
        char *t = json_is_string(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        printf("%s%s=%s\n", first ? "" : "              ", k, t ? t : json_string_value(v));
        free(t);
        first = false;
    }
}

static void print_conditions(const json_t *status)
{
    const json_t *conds = json_object_get(status, "conditions");
    printf("Conditions:\n");
    if (!json_array_size(conds)) printf("  <none>\n");
    else printf("  %-16s %-7s %-16s %s\n", "Type", "Status", "Reason", "Message");
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c)
        printf("  %-16s %-7s %-16s %s\n", s(c, "type"), s(c, "status"), s(c, "reason"), s(c, "message"));
}

/* Age of an RFC 3339 time as kubectl prints it ("5m", "2d"); "<unknown>" without one. */
static void age_of(const char *ts, char *buf, size_t len)
{
    struct tm tm = {0};
    if (!ts || !*ts || !strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm)) {
        snprintf(buf, len, "<unknown>");
        return;
    }
    long long d = (long long)(time(NULL) - timegm(&tm));
    if (d < 0) d = 0;
    if (d < 120) snprintf(buf, len, "%llds", d);
    else if (d < 3600 * 3) snprintf(buf, len, "%lldm", d / 60);
    else if (d < 86400 * 2) snprintf(buf, len, "%lldh", d / 3600);
    else snprintf(buf, len, "%lldd", d / 86400);
}

static int by_last_seen(const void *x, const void *y)
{
    const json_t *a = *(json_t *const *)x, *b = *(json_t *const *)y;
    const char *ta = *s(a, "lastTimestamp") ? s(a, "lastTimestamp") : s(a, "eventTime");
    const char *tb = *s(b, "lastTimestamp") ? s(b, "lastTimestamp") : s(b, "eventTime");
    return strcmp(ta, tb);
}

/* kubectl's Events table: Type Reason Age From Message, "(x3 over 5m)" when aggregated. */
static void print_events(struct gs_client *cl, const char *ns, const char *kind, const char *name, const char *uid)
{
    const struct gs_api_resource *ev = gs_api_resource_lookup("events");
    char fs[900];
    /* As kubectl: the object's name, namespace and uid (nodes: by kind and name, as
     * their Events carry either the Node's uid or its name). */
    if (ns) snprintf(fs, sizeof fs, "involvedObject.name=%s,involvedObject.namespace=%s%s%s", name, ns,
                     uid && *uid ? ",involvedObject.uid=" : "", uid && *uid ? uid : "");
    else snprintf(fs, sizeof fs, "involvedObject.kind=%s,involvedObject.name=%s", kind, name);
    json_t *out = NULL;
    json_t *items = gs_client_list(cl, ev, ns, NULL, fs, false, &out) == 0 ? json_object_get(out, "items") : NULL;
    size_t n = json_array_size(items);
    if (!n) {
        printf("Events:        <none>\n");
        json_decref(out);
        return;
    }
    json_t **v = malloc(n * sizeof *v);
    for (size_t i = 0; v && i < n; i++) v[i] = json_array_get(items, i);
    if (v) qsort(v, n, sizeof *v, by_last_seen);
    printf("Events:\n  %-8s %-24s %-18s %-20s %s\n  %-8s %-24s %-18s %-20s %s\n", "Type", "Reason", "Age", "From",
           "Message", "----", "------", "----", "----", "-------");
    for (size_t i = 0; v && i < n; i++) {
        const json_t *e = v[i];
        const char *first = *s(e, "firstTimestamp") ? s(e, "firstTimestamp") : s(e, "eventTime");
        const char *last = *s(e, "lastTimestamp") ? s(e, "lastTimestamp") : first;
        char fa[32], la[32], age[96];
        age_of(first, fa, sizeof fa);
        age_of(last, la, sizeof la);
        json_int_t count = json_integer_value(json_object_get(e, "count"));
        if (count > 1) snprintf(age, sizeof age, "%s (x%lld over %s)", la, (long long)count, fa);
        else snprintf(age, sizeof age, "%s", la);
        const json_t *src = json_object_get(e, "source");
        char from[300];
        snprintf(from, sizeof from, "%s%s%s", *s(src, "component") ? s(src, "component") : s(e, "reportingComponent"),
                 *s(src, "host") ? ", " : "", s(src, "host"));
        printf("  %-8s %-24s %-18s %-20s %s\n", s(e, "type"), s(e, "reason"), age, from, s(e, "message"));
    }
    free(v);
    json_decref(out);
}

static void describe_pod(struct gs_client *cl, const json_t *o)
{
    const json_t *md = json_object_get(o, "metadata"), *spec = json_object_get(o, "spec"),
                 *st = json_object_get(o, "status");
    const json_t *ann = json_object_get(md, "annotations");
    printf("%-14s%s\n%-14s%s\n", "Name:", s(md, "name"), "Namespace:", s(md, "namespace"));
    printf("%-14s%s\n", "Scheduler:", *s(spec, "schedulerName") ? s(spec, "schedulerName") : GS_DEFAULT_SCHEDULER);
    printf("%-14s%s\n", "Node:", *s(spec, "nodeName") ? s(spec, "nodeName") : "<none>");
    printf("%-14s%s\n", "Status:", *s(st, "phase") ? s(st, "phase") : "Pending");
    const char *dev = json_string_value(json_object_get(ann, GS_ANN_DEVICES));
    printf("%-14s%s\n", "Devices:", dev ? dev : "<none>");
    print_map("Labels:", json_object_get(md, "labels"));
    print_map("Annotations:", ann);
    printf("Containers:\n");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(spec, "containers"), i, c) {
        char *res = json_dumps(json_object_get(c, "resources"), JSON_COMPACT);
        printf("  %s: image %s, resources %s\n", s(c, "name"), *s(c, "image") ? s(c, "image") : "<none>",
               res ? res : "{}");
        free(res);
    }
    print_conditions(st);
    print_events(cl, *s(md, "namespace") ? s(md, "namespace") : "default", "Pod", s(md, "name"), s(md, "uid"));
}

static void describe_node(struct gs_client *cl, const json_t *o)
{
    const json_t *md = json_object_get(o, "metadata"), *st = json_object_get(o, "status");
    printf("%-14s%s\n", "Name:", s(md, "name"));
    print_map("Labels:", json_object_get(md, "labels"));
    print_map("Capacity:", json_object_get(st, "capacity"));
    print_map("Allocatable:", json_object_get(st, "allocatable"));
    printf("GPUs:\n");
    size_t i;
    json_t *d;
    if (!json_array_size(json_object_get(st, "devices"))) printf("  <none>\n");
    json_array_foreach(json_object_get(st, "devices"), i, d)
        printf("  %-3lld %-40s %-16s %6lld MiB  numa %lld  %s\n", (long long)json_integer_value(json_object_get(d, "index")),
               s(d, "uuid"), s(d, "model"), (long long)json_integer_value(json_object_get(d, "memoryMiB")),
               (long long)json_integer_value(json_object_get(d, "numaNode")),
               json_is_false(json_object_get(d, "healthy")) ? "unhealthy" : "");
    print_conditions(st);
    char fs[600];
    snprintf(fs, sizeof fs, "spec.nodeName=%s", s(md, "name"));
    json_t *pods = NULL;
    printf("Pods:\n");
    if (gs_client_list(cl, gs_api_resource_lookup("pods"), NULL, NULL, fs, false, &pods) == 0) {
        json_t *p;
        if (!json_array_size(json_object_get(pods, "items"))) printf("  <none>\n");
        json_array_foreach(json_object_get(pods, "items"), i, p) {
            const json_t *pm = json_object_get(p, "metadata");
            const char *dev = json_string_value(json_object_get(json_object_get(pm, "annotations"), GS_ANN_DEVICES));
            printf("  %s/%-30s %-10s %s\n", s(pm, "namespace"), s(pm, "name"), s(json_object_get(p, "status"), "phase"),
                   dev ? dev : "");
        }
    }
    json_decref(pods);
    print_events(cl, NULL, "Node", s(md, "name"), s(md, "uid"));
}

int gs_cmd_describe(int argc, char **argv)
{
    struct gs_cli c;
    int rc = gs_cli_parse(argc, argv, usage_text, &c);
    if (rc >= 0) return rc;
    const struct gs_api_resource *r = c.nargs == 2 ? gs_api_resource_lookup(c.args[0]) : NULL;
    if (!r) {
        if (c.nargs == 2) fprintf(stderr, "describe: unknown resource type \"%s\"\n", c.args[0]);
        else fputs(usage_text, stderr);
        gs_cli_free(&c);
        return 2;
    }
    struct gs_client *cl = gs_cli_connect(&c, "describe");
    json_t *o = NULL;
    int err = cl ? gs_client_get(cl, r, r->namespaced ? (c.ns ? c.ns : "default") : NULL, c.args[1], &o) : GS_EIO;
    rc = 1;
    if (cl && err) gs_cli_report("describe", err, o);
    else if (cl) {
        rc = 0;
        if (!strcmp(r->plural, "pods") && !r->group[0]) describe_pod(cl, o);
        else if (!strcmp(r->plural, "nodes") && !r->group[0]) describe_node(cl, o);
        else gs_cli_print_doc(stdout, o, true);
    }
    json_decref(o);
    gs_client_free(cl);
    gs_cli_free(&c);
    return rc;
}
