/*
 * api_docs.c - the documents the server answers besides objects: Status
 * errors, discovery (/version, /api, /apis, resource lists) and Table
 * responses for `get`; see api.h and the kubectl notes in docs/CONTROL_PLANE.md.
 *
 * Tables follow kubectl's own printers closely enough that `kubectl get pods`
 * and `gpusched get pods` look the way people expect: NAME READY STATUS
 * RESTARTS AGE (+ IP NODE GPUS in wide), NAME STATUS ROLES AGE VERSION
 * (+ GPUS in wide) for nodes, NAME AGE for the rest.
 */
#include "control/api.h"
#include "control/events.h" /* Event tables */
#include "control/dra_convert.h" /* ResourceSlice, ResourceClaim tables */

#include "core/object.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*--- Status ---*/

const char *gs__reason_for(int code)
{
    switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 406: return "NotAcceptable";
    case 409: return "Conflict";
    case 410: return "Expired";
    case 413: return "RequestEntityTooLarge";
    case 415: return "UnsupportedMediaType";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 503: return "ServiceUnavailable";
    default: return code >= 500 ? "InternalError" : "";
    }
}

json_t *gs__status(int code, const char *reason, const char *message, const struct gs_api_resource *res,
                   const char *name, const struct gs__cause *causes, size_t ncauses)
{
    json_t *st = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:i}", "kind", "Status", "apiVersion", "v1", "metadata",
                           "status", code < 400 ? "Success" : "Failure", "message", message ? message : "", "code",
                           code);
    if (!st) return NULL;
    if (code >= 400) json_object_set_new(st, "reason", json_string(reason ? reason : gs__reason_for(code)));
    if (!res && !name && !ncauses) return st;
    json_t *det = json_object();
    if (name) json_object_set_new(det, "name", json_string(name));
    if (res && res->group[0]) json_object_set_new(det, "group", json_string(res->group));
    if (res) json_object_set_new(det, "kind", json_string(res->plural));
    if (ncauses) {
        json_t *cs = json_array();
        for (size_t i = 0; i < ncauses; i++)
            json_array_append_new(cs, json_pack("{s:s, s:s, s:s}", "reason",
                                                 causes[i].reason ? causes[i].reason : "FieldValueInvalid",
                                                 "message", causes[i].message ? causes[i].message : "", "field",
                                                 causes[i].field ? causes[i].field : ""));
        json_object_set_new(det, "causes", cs);
    }
    json_object_set_new(st, "details", det);
    return st;
}

/*--- Discovery ---*/

json_t *gs__doc_version(void)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "major", "1", "minor", "32", "gitVersion",
                     "v1.32.0-gpusched." GS_VERSION, "gitCommit", "", "gitTreeState", "clean", "buildDate", "",
                     "goVersion", "none", "compiler", "gc", "platform", "linux/amd64");
}

json_t *gs__doc_api_versions(void)
{
    return json_pack("{s:s, s:[s], s:[]}", "kind", "APIVersions", "versions", "v1", "serverAddressByClientCIDRs");
}

static json_t *group_doc(const char *group)
{
    size_t n;
    const struct gs_api_resource *t = gs_api_resources(&n);
    json_t *versions = json_array(), *pref = NULL;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(t[i].group, group)) continue;
        char gv[128];
        gs_api_resource_gv(&t[i], gv, sizeof gv);
        bool seen = false;
        size_t j;
        json_t *v;
        json_array_foreach(versions, j, v)
            seen |= !strcmp(json_string_value(json_object_get(v, "version")), t[i].version);
        if (seen) continue;
        json_t *ver = json_pack("{s:s, s:s}", "groupVersion", gv, "version", t[i].version);
        if (!pref) pref = json_deep_copy(ver);
        json_array_append_new(versions, ver);
    }
    if (!pref) {
        json_decref(versions);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:s, s:o, s:o}", "kind", "APIGroup", "apiVersion", "v1", "name", group, "versions",
                     versions, "preferredVersion", pref);
}

json_t *gs__doc_group(const char *group)
{
    return group[0] ? group_doc(group) : NULL;
}

json_t *gs__doc_group_list(void)
{
    size_t n;
    const struct gs_api_resource *t = gs_api_resources(&n);
    json_t *groups = json_array();
    for (size_t i = 0; i < n; i++) {
        if (!t[i].group[0]) continue;
        bool seen = false;
        for (size_t j = 0; j < i; j++) seen |= !strcmp(t[j].group, t[i].group);
        if (seen) continue;
        json_t *g = group_doc(t[i].group);
        if (g) {
            json_object_del(g, "kind");
            json_object_del(g, "apiVersion");
            json_array_append_new(groups, g);
        }
    }
    return json_pack("{s:s, s:s, s:o}", "kind", "APIGroupList", "apiVersion", "v1", "groups", groups);
}

static json_t *resource_entry(const struct gs_api_resource *r, const char *sub)
{
    char name[128];
    snprintf(name, sizeof name, "%s%s%s", r->plural, sub ? "/" : "", sub ? sub : "");
    json_t *verbs = !sub && gs_event_res_is_v1(r) ? json_pack("[s,s,s,s,s,s]", "create", "delete", "get", "list", "update", "watch")
                    : !sub ? json_pack("[s,s,s,s,s,s,s]", "create", "delete", "get", "list", "patch", "update", "watch")
                    : !strcmp(sub, "binding") || !strcmp(sub, "eviction") ? json_pack("[s]", "create")
                                              : json_pack("[s,s,s]", "get", "patch", "update");
    json_t *e = json_pack("{s:s, s:s, s:b, s:s, s:o}", "name", name, "singularName", sub ? "" : r->singular,
                          "namespaced", r->namespaced, "kind", !sub || strcmp(sub, "binding") ? r->kind : "Binding",
                          "verbs", verbs);
    if (!sub && r->short_names) {
        json_t *sn = json_array();
        char buf[128];
        snprintf(buf, sizeof buf, "%s", r->short_names);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
            json_array_append_new(sn, json_string(t));
        json_object_set_new(e, "shortNames", sn);
    }
    if (!sub && !strcmp(r->plural, "pods")) json_object_set_new(e, "categories", json_pack("[s]", "all"));
    return e;
}

json_t *gs__doc_resource_list(const char *group, const char *version)
{
    size_t n;
    const struct gs_api_resource *t = gs_api_resources(&n);
    json_t *res = json_array();
    char gv[128] = "";
    for (size_t i = 0; i < n; i++) {
        if (strcmp(t[i].group, group) || strcmp(t[i].version, version)) continue;
        gs_api_resource_gv(&t[i], gv, sizeof gv);
        json_array_append_new(res, resource_entry(&t[i], NULL));
        if (t[i].has_status) json_array_append_new(res, resource_entry(&t[i], "status"));
        if (!strcmp(t[i].plural, "pods") && !t[i].group[0]) json_array_append_new(res, resource_entry(&t[i], "binding"));
        if (!strcmp(t[i].plural, "pods") && !t[i].group[0]) { /* policy/v1 Eviction, what kubectl drain looks for */
            json_t *e = resource_entry(&t[i], "eviction");
            json_object_set_new(e, "kind", json_string("Eviction"));
            json_object_set_new(e, "group", json_string("policy"));
            json_object_set_new(e, "version", json_string("v1"));
            json_array_append_new(res, e);
        }
    }
    if (!gv[0]) {
        json_decref(res);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:s, s:o}", "kind", "APIResourceList", "apiVersion", "v1", "groupVersion", gv,
                     "resources", res);
}

/*--- Tables ---*/

void gs__age(const char *ts, double now, char *buf, size_t len)
{
    struct tm tm = {0};
    if (!ts || !strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm)) {
        snprintf(buf, len, "<unknown>");
        return;
    }
    double s = now - (double)timegm(&tm);
    if (s < 0) s = 0;
    if (s < 120) snprintf(buf, len, "%ds", (int)s);
    else if (s < 3600 * 3) snprintf(buf, len, "%dm", (int)(s / 60));
    else if (s < 86400 * 2) snprintf(buf, len, "%dh", (int)(s / 3600));
    else snprintf(buf, len, "%dd", (int)(s / 86400));
}

static json_t *col(const char *name, const char *type, const char *format, int priority, const char *desc)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:i}", "name", name, "type", type, "format", format, "description", desc,
                     "priority", priority);
}

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    if (b) v = json_object_get(v, b);
    return json_string_value(v);
}

/* The message of a pod's condition of type t with status s, or NULL. */
static const json_t *condition(const json_t *obj, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(obj, "status"), "conditions"), i, c)
        if (json_is_string(json_object_get(c, "type")) && !strcmp(json_string_value(json_object_get(c, "type")), type))
            return c;
    return NULL;
}

static json_t *pod_row(const json_t *o, const char *age)
{
    const json_t *status = json_object_get(o, "status");
    size_t ncont = json_array_size(json_object_get(json_object_get(o, "spec"), "containers"));
    size_t ready = 0;
    int64_t restarts = 0;
    size_t i;
    json_t *cs;
    json_array_foreach(json_object_get(status, "containerStatuses"), i, cs) {
        ready += json_is_true(json_object_get(cs, "ready"));
        restarts += json_integer_value(json_object_get(cs, "restartCount"));
    }
    const char *phase = str_at(o, "status", "phase");
    const char *reason = str_at(o, "status", "reason");
    const char *st = reason ? reason : phase ? phase : "Pending";
    if (json_object_get(json_object_get(o, "metadata"), "deletionTimestamp")) st = "Terminating";
    char rd[32];
    snprintf(rd, sizeof rd, "%zu/%zu", ready, ncont);
    const char *ip = str_at(o, "status", "podIP");
    const char *node = str_at(o, "spec", "nodeName");
    const json_t *ann = json_object_get(json_object_get(o, "metadata"), "annotations");
    const char *dev = json_string_value(json_object_get(ann, GS_ANN_DEVICES));
    return json_pack("[s, s, s, I, s, s, s, s]", str_at(o, "metadata", "name") ? str_at(o, "metadata", "name") : "",
                     rd, st, (json_int_t)restarts, age, ip ? ip : "<none>", node ? node : "<none>",
                     dev ? dev : "<none>");
}

static json_t *node_row(const json_t *o, const char *age)
{
    const json_t *ready = condition(o, "Ready");
    const char *rs = json_string_value(json_object_get(ready, "status"));
    char st[64];
    snprintf(st, sizeof st, "%s%s", rs && !strcmp(rs, "True") ? "Ready" : ready ? "NotReady" : "Unknown",
             json_is_true(json_object_get(json_object_get(o, "spec"), "unschedulable")) ? ",SchedulingDisabled" : "");
    const json_t *devs = json_object_get(json_object_get(o, "status"), "devices");
    const char *model = json_string_value(json_object_get(json_array_get(devs, 0), "model"));
    const char *ver = str_at(json_object_get(o, "status"), "nodeInfo", "kubeletVersion");
    /* GPU stack column (govern/operator.c): the gpusched.io/gpu-stack-state label. */
    const char *stack = str_at(json_object_get(o, "metadata"), "labels", "gpusched.io/gpu-stack-state");
    return json_pack("[s, s, s, s, s, I, s, s]", str_at(o, "metadata", "name") ? str_at(o, "metadata", "name") : "", st,
                     "<none>", age, ver ? ver : "", (json_int_t)json_array_size(devs), model ? model : "<none>",
                     stack ? stack : "<none>");
}

/* Queue tables read the status queue_status.c publishes. */
static json_t *int_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(json_object_get(o, a), b);
    return json_integer(json_integer_value(v));
}

static const char *admission_gpu(const json_t *o, const char *field)
{
    const json_t *a = json_object_get(json_object_get(o, "status"), "admission");
    const char *v = json_string_value(json_object_get(json_object_get(a, field), "nvidia.com/gpu"));
    return v ? v : "<none>";
}

static json_t *share_cell(const json_t *o)
{
    const json_t *a = json_object_get(json_object_get(o, "status"), "admission");
    const json_t *w = json_object_get(a, "weightedShare");
    char buf[32] = "<none>";
    if (json_is_number(w)) snprintf(buf, sizeof buf, "%.3f", json_number_value(w));
    return json_string(buf);
}

static json_t *cluster_queue_row(const json_t *o, const char *name, const char *age)
{
    const json_t *spec = json_object_get(o, "spec");
    const char *cohort = json_string_value(json_object_get(spec, "cohortName"));
    if (!cohort) cohort = json_string_value(json_object_get(spec, "cohort")); /* v1beta1 */
    const char *strategy = json_string_value(json_object_get(spec, "queueingStrategy"));
    return json_pack("[s, s, s, o, o, s, s, s, o]", name, cohort ? cohort : "", strategy ? strategy : "BestEffortFIFO",
                     int_at(o, "status", "pendingWorkloads"), int_at(o, "status", "admittedWorkloads"), age,
                     admission_gpu(o, "usage"), admission_gpu(o, "fairShare"), share_cell(o));
}

static json_t *volcano_queue_row(const json_t *o, const char *name, const char *age)
{
    const json_t *spec = json_object_get(o, "spec");
    const char *parent = json_string_value(json_object_get(spec, "parent"));
    const json_t *w = json_object_get(spec, "weight");
    char weight[32] = "1";
    if (json_is_number(w)) snprintf(weight, sizeof weight, "%g", json_number_value(w));
    return json_pack("[s, s, s, o, o, s, s, s, o]", name, parent ? parent : "root", weight,
                     int_at(o, "status", "pending"), int_at(o, "status", "running"), age, admission_gpu(o, "usage"),
                     admission_gpu(o, "fairShare"), share_cell(o));
}

static json_t *queue_columns(bool kueue)
{
    const char *nd = "Name must be unique.";
    return json_pack("[o,o,o,o,o,o,o,o,o]", col("Name", "string", "name", 0, nd),
                     kueue ? col("Cohort", "string", "", 0, "Cohort this ClusterQueue belongs to.")
                           : col("Parent", "string", "", 0, "Parent queue."),
                     kueue ? col("Strategy", "string", "", 1, "Queueing strategy.")
                           : col("Weight", "string", "", 0, "Fair-share weight."),
                     col(kueue ? "Pending Workloads" : "Pending", "integer", "", 0, "Workloads waiting for admission."),
                     col(kueue ? "Admitted Workloads" : "Running", "integer", "", 0, "Workloads admitted."),
                     col("Age", "string", "", 0, "Time since creation."),
                     col("GPUs-Used", "string", "", 1, "GPUs reserved by admitted workloads."),
                     col("GPU-Fair-Share", "string", "", 1, "GPUs this queue deserves now (weighted, over the tree)."),
                     col("Weighted-Share", "string", "", 1, "Usage over fair share, dominant resource."));
}

static json_t *lease_row(const json_t *o, const char *name, const char *age)
{
    const char *holder = str_at(o, "spec", "holderIdentity");
    return json_pack("[s, s, s]", name, holder ? holder : "", age);
}

/* kubectl's PodDisruptionBudget columns: an int-or-percent as text, N/A when unset. */
static json_t *pdb_row(const json_t *o, const char *name, const char *age)
{
    const json_t *spec = json_object_get(o, "spec");
    char v[2][32];
    const char *keys[] = {"minAvailable", "maxUnavailable"};
    for (int i = 0; i < 2; i++) {
        const json_t *x = json_object_get(spec, keys[i]);
        if (json_is_integer(x)) snprintf(v[i], sizeof v[i], "%lld", (long long)json_integer_value(x));
        else snprintf(v[i], sizeof v[i], "%s", json_is_string(x) ? json_string_value(x) : "N/A");
    }
    json_t *allowed = json_object_get(json_object_get(o, "status"), "disruptionsAllowed");
    return json_pack("[s, s, s, I, s]", name, v[0], v[1], (json_int_t)json_integer_value(allowed), age);
}

/* kubectl's PriorityClass columns. */
static json_t *priorityclass_row(const json_t *o, const char *name, const char *age)
{
    const char *pp = json_string_value(json_object_get(o, "preemptionPolicy"));
    return json_pack("[s, I, s, s, s]", name, (json_int_t)json_integer_value(json_object_get(o, "value")),
                     json_is_true(json_object_get(o, "globalDefault")) ? "true" : "false", age,
                     pp ? pp : "PreemptLowerPriority");
}

/* kubectl's RuntimeClass columns. */
static json_t *runtimeclass_row(const json_t *o, const char *name, const char *age)
{
    const char *h = json_string_value(json_object_get(o, "handler"));
    return json_pack("[s, s, s]", name, h ? h : "", age);
}

static json_t *columns(const struct gs_api_resource *res, int which)
{
    if (which == 6) return gs_event_table_columns();
    if (which == 9) return gs_dra_table_columns(res);
    if (which == 7)
        return json_pack("[o,o,o,o,o]", col("Name", "string", "name", 0, "Name must be unique within a namespace."),
                         col("Min Available", "string", "", 0, "spec.minAvailable."),
                         col("Max Unavailable", "string", "", 0, "spec.maxUnavailable."),
                         col("Allowed Disruptions", "integer", "", 0, "status.disruptionsAllowed (as of the last "
                             "eviction)."),
                         col("Age", "string", "", 0, "Time since creation."));
    if (which == 8)
        return json_pack("[o,o,o,o,o]", col("Name", "string", "name", 0, "Name must be unique."),
                         col("Value", "integer", "", 0, "The priority pods of this class get."),
                         col("Global-Default", "boolean", "", 0, "Applied to pods naming no class."),
                         col("Age", "string", "", 0, "Time since creation."),
                         col("PreemptionPolicy", "string", "", 0, "Whether its pods may preempt others."));
    if (which == 10)
        return json_pack("[o,o,o]", col("Name", "string", "name", 0, "Name must be unique."),
                         col("Handler", "string", "", 0, "The runtime handler that runs pods of this class."),
                         col("Age", "string", "", 0, "Time since creation."));
    if (which == 3 || which == 4) return queue_columns(which == 3);
    if (which == 5)
        return json_pack("[o,o,o]", col("Name", "string", "name", 0, "Name must be unique within a namespace."),
                         col("Holder", "string", "", 0, "The lease's holder (spec.holderIdentity)."),
                         col("Age", "string", "", 0, "Time since creation."));
    const char *nd = "Name must be unique within a namespace.";
    if (which == 1)
        return json_pack("[o,o,o,o,o,o,o,o]", col("Name", "string", "name", 0, nd),
                         col("Ready", "string", "", 0, "Ready containers / containers."),
                         col("Status", "string", "", 0, "The pod's phase or reason."),
                         col("Restarts", "integer", "", 0, "Container restarts."),
                         col("Age", "string", "", 0, "Time since creation."),
                         col("IP", "string", "", 1, "Pod IP."), col("Node", "string", "", 1, "Node the pod is bound to."),
                         col("GPUs", "string", "", 1, "Devices chosen by the scheduler (" GS_ANN_DEVICES ")."));
    if (which == 2)
        return json_pack("[o,o,o,o,o,o,o,o]", col("Name", "string", "name", 0, nd),
                         col("Status", "string", "", 0, "Ready condition."), col("Roles", "string", "", 0, "Roles."),
                         col("Age", "string", "", 0, "Time since creation."),
                         col("Version", "string", "", 0, "Agent version."),
                         col("GPUs", "integer", "", 1, "GPUs reported by discovery."),
                         col("GPU-Model", "string", "", 1, "Model of the first GPU."),
                         col("GPU-Stack", "string", "", 1, "GPU stack state (gpusched.io/gpu-stack-state)."));
    (void)res;
    return json_pack("[o,o]", col("Name", "string", "name", 0, nd), col("Age", "string", "", 0, "Time since creation."));
}

static json_t *row_object(const json_t *o, enum gs__include inc)
{
    if (inc == GS_INCLUDE_NONE) return NULL;
    if (inc == GS_INCLUDE_OBJECT) return json_incref((json_t *)o);
    return json_pack("{s:s, s:s, s:O}", "kind", "PartialObjectMetadata", "apiVersion", "meta.k8s.io/v1", "metadata",
                     json_object_get(o, "metadata"));
}

json_t *gs__table(const struct gs_api_resource *res, const json_t *objs, const char *list_rv, double now,
                  enum gs__include inc)
{
    int which = !strcmp(res->kind, "Event")          ? 6 /* both groups: events.h */
                : !strcmp(res->kind, "ClusterQueue") ? 3
                : !strcmp(res->kind, "Queue")    ? 4
                : !strcmp(res->kind, "Lease")    ? 5
                : !strcmp(res->kind, "PodDisruptionBudget") ? 7
                : !strcmp(res->kind, "PriorityClass") ? 8
                : !strcmp(res->kind, "RuntimeClass") ? 10
                : gs_dra_has_table(res)          ? 9
                : res->group[0]                  ? 0
                : !strcmp(res->plural, "pods")   ? 1
                : !strcmp(res->plural, "nodes")  ? 2
                                                 : 0;
    json_t *rows = json_array();
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o) {
        char age[32];
        gs__age(str_at(o, "metadata", "creationTimestamp"), now, age, sizeof age);
        const char *name = str_at(o, "metadata", "name");
        json_t *cells = which == 6   ? gs_event_table_row(o, now)
                        : which == 1 ? pod_row(o, age)
                        : which == 2 ? node_row(o, age)
                        : which == 3 ? cluster_queue_row(o, name ? name : "", age)
                        : which == 4 ? volcano_queue_row(o, name ? name : "", age)
                        : which == 5 ? lease_row(o, name ? name : "", age)
                        : which == 7 ? pdb_row(o, name ? name : "", age)
                        : which == 8 ? priorityclass_row(o, name ? name : "", age)
                        : which == 10 ? runtimeclass_row(o, name ? name : "", age)
                        : which == 9 ? gs_dra_table_row(res, o, name ? name : "", age)
                                     : json_pack("[s, s]", name ? name : "", age);
        json_t *row = json_pack("{s:o}", "cells", cells);
        json_t *ro = row_object(o, inc);
        if (ro) json_object_set_new(row, "object", ro);
        json_array_append_new(rows, row);
    }
    return json_pack("{s:s, s:s, s:{s:s}, s:o, s:o}", "kind", "Table", "apiVersion", "meta.k8s.io/v1", "metadata",
                     "resourceVersion", list_rv ? list_rv : "", "columnDefinitions", columns(res, which), "rows", rows);
}
