/*
 * snapshot.c - a live cluster as simulator input (snapshot.h).
 *
 * The fetch lists every resource the server serves whose kind the simulator
 * uses, through the same REST client as get and describe, so one code path
 * reads our server and a Kubernetes API server. The build step is pure: it
 * takes the listed documents and the time of the snapshot and sorts them
 * into the cluster and workload files, turning each pod's state into the
 * annotations the trace loader reads (trace_manifest.h). Keeping the two
 * apart lets the tests build snapshots from hand-made lists at a fixed time.
 *
 * What is dropped from each document: metadata.managedFields and
 * resourceVersion (noise for a replay), and a pod's status apart from its
 * phase (the replay decides what happens next). Everything else stays, so
 * the loader validates the objects exactly as the server did.
 */
#include "sim/snapshot.h"

#include "control/client.h"
#include "control/resources.h"
#include "core/codec.h"
#include "core/object.h"
#include "kube/goduration.h"
#include "sim/trace_manifest.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/*--- Which kinds, in which file ---*/

/* Kinds of the cluster file: what the cluster is and how it is governed. */
static const char *const cluster_kinds[] = {
    "Node",          "NodeResourceTopology", "ResourceFlavor", "ClusterQueue",    "WorkloadPriorityClass",
    "Queue",         "PriorityClass",        "ClusterPolicy",  "GPUCluster",      "ResourceSlice",
    "DeviceClass",   "DeviceTaintRule",      "Namespace",
};
/* Kinds of the workload file: the pods and what they refer to. */
static const char *const workload_kinds[] = {
    "Pod", "LocalQueue", "PodGroup", "Workload", "ResourceClaim", "ResourceClaimTemplate", "PodDisruptionBudget",
};

static bool in(const char *kind, const char *const *v, size_t n)
{
    for (size_t i = 0; kind && i < n; i++)
        if (!strcmp(kind, v[i])) return true;
    return false;
}
#define IN(kind, table) in(kind, table, sizeof table / sizeof table[0])

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/*--- Fetch ---*/

/* Kueue's Workload (kueue.x-k8s.io) is its admission record, not a pod
 * template: the replay admits pods itself. */
static bool wanted(const struct gs_api_resource *r)
{
    if (!strcmp(r->kind, "Workload") && !strcmp(r->group, "kueue.x-k8s.io")) return false;
    return IN(r->kind, cluster_kinds) || IN(r->kind, workload_kinds);
}

int gs_snapshot_fetch(struct gs_client *c, json_t **objects, struct gs_diags *d)
{
    *objects = json_array();
    if (!*objects) return GS_ENOMEM;
    size_t n = 0;
    const struct gs_api_resource *rs = gs_api_resources(&n);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const struct gs_api_resource *r = &rs[i];
        if (!wanted(r)) continue;
        json_t *list = NULL;
        int err = gs_client_list(c, r, NULL, NULL, NULL, false, &list);
        if (err == GS_ENOENT) { /* the server does not serve this API (CRD not installed) */
            json_decref(list);
            continue;
        }
        if (err) {
            const char *msg = jstr(list, "message");
            gs_diags_add(d, r->plural, "listing %s.%s failed: %s", r->plural, r->group[0] ? r->group : "core",
                         msg ? msg : gs_strerror(err));
            json_decref(list);
            rc = err;
            break;
        }
        char gv[256];
        gs_api_resource_gv(r, gv, sizeof gv);
        size_t j;
        json_t *it;
        json_array_foreach(json_object_get(list, "items"), j, it)
        {
            if (!json_is_object(it)) continue;
            if (!json_object_get(it, "kind")) json_object_set_new(it, "kind", json_string(r->kind));
            if (!json_object_get(it, "apiVersion")) json_object_set_new(it, "apiVersion", json_string(gv));
            if (json_array_append(*objects, it)) rc = GS_ENOMEM;
        }
        json_decref(list);
    }
    if (rc) {
        json_decref(*objects);
        *objects = NULL;
    }
    return rc;
}

/*--- Build ---*/

int gs_rfc3339_seconds(const char *s, double *out)
{
    int y, mo, d, h, mi, se, n = 0;
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) != 6 || n != 19)
        return GS_EINVAL;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60 || y < 1970) return GS_EINVAL;
    const char *p = s + n;
    double frac = 0, scale = 0.1;
    if (*p == '.') {
        if (!isdigit((unsigned char)*++p)) return GS_EINVAL;
        for (; isdigit((unsigned char)*p); p++, scale /= 10) frac += (*p - '0') * scale;
    }
    long off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om, m2 = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &m2) != 2 || m2 != 5 || oh > 23 || om > 59) return GS_EINVAL;
        off = (long)(oh * 3600 + om * 60) * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return GS_EINVAL;
    }
    if (*p) return GS_EINVAL;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = se};
    *out = (double)timegm(&tm) - (double)off + frac;
    return 0;
}

static json_t *annotations(json_t *doc)
{
    json_t *md = json_object_get(doc, "metadata");
    json_t *an = json_object_get(md, "annotations");
    if (!json_is_object(md)) return NULL;
    if (!json_is_object(an)) {
        an = json_object();
        if (json_object_set_new(md, "annotations", an)) return NULL;
    }
    return an;
}

static void seconds_text(double s, char *buf, size_t len)
{
    /* Whole seconds as a Go duration reads best ("1h2m3s"); fractions stay plain. */
    if (s >= 0 && s < 9e9 && s == floor(s)) gs_go_duration_format((int64_t)s * 1000000000LL, buf, len);
    else snprintf(buf, len, "%.3f", s);
}

struct building {
    const struct gs_snapshot_opts *o;
    struct gs_diags *d;
    size_t no_duration; /* pods without one */
    char first[3][300]; /* the first of them, named in the message */
};

/* A finished pod, or one being deleted: not part of what comes next. */
static bool is_over(const json_t *src)
{
    const char *phase = jstr(json_object_get(src, "status"), "phase");
    return json_object_get(json_object_get(src, "metadata"), "deletionTimestamp") ||
           (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")));
}

/* p (a copy of src) as the replay should see the pod: its phase only, and
 * the timing annotations. */
static int pod_state(struct building *b, json_t *p, const json_t *src)
{
    const json_t *md = json_object_get(src, "metadata");
    const json_t *st = json_object_get(src, "status");
    const char *phase = jstr(st, "phase");
    json_object_del(p, "status");
    if (phase && json_object_set_new(p, "status", json_pack("{s:s}", "phase", phase))) return GS_ENOMEM;
    json_t *an = annotations(p);
    if (!an) return GS_ENOMEM;
    char text[64];
    const char *node = jstr(json_object_get(src, "spec"), "nodeName");
    if (node && *node) {
        double started = 0, running = 0;
        const char *when = jstr(st, "startTime");
        if (!when) when = jstr(md, "creationTimestamp");
        if (when && gs_rfc3339_seconds(when, &started) == 0 && b->o->now > started) running = b->o->now - started;
        seconds_text(floor(running), text, sizeof text);
        json_object_set_new(an, GS_ANN_SIM_RUNNING_FOR, json_string(text));
        json_object_del(an, GS_ANN_SIM_ARRIVAL);
    } else {
        json_object_set_new(an, GS_ANN_SIM_ARRIVAL, json_string("0"));
    }
    if (json_object_get(an, GS_ANN_SIM_DURATION)) return 0;
    if (b->o->assume_duration >= 0) {
        seconds_text(b->o->assume_duration, text, sizeof text);
        json_object_set_new(an, GS_ANN_SIM_DURATION, json_string(text));
    } else if (b->no_duration++ < 3) {
        const char *ns = jstr(md, "namespace"), *name = jstr(md, "name");
        snprintf(b->first[b->no_duration - 1], sizeof b->first[0], "%s/%s", ns ? ns : "default", name ? name : "");
    }
    return 0;
}

static json_t *object_doc(const json_t *src)
{
    json_t *o = json_deep_copy(src);
    if (!o) return NULL;
    json_t *md = json_object_get(o, "metadata");
    json_object_del(md, "managedFields");
    json_object_del(md, "resourceVersion");
    return o;
}

int gs_snapshot_build(const json_t *objects, const struct gs_snapshot_opts *o, json_t **cluster, json_t **workload,
                      struct gs_diags *d)
{
    *cluster = json_array();
    *workload = json_array();
    struct building b = {.o = o, .d = d};
    int rc = *cluster && *workload ? 0 : GS_ENOMEM;
    size_t i;
    const json_t *src;
    json_array_foreach(objects, i, src)
    {
        if (rc) break;
        const char *kind = jstr(src, "kind");
        if (!json_is_object(src) || !kind) {
            gs_diags_add(d, "", "object %zu of the listing has no kind", i);
            rc = GS_EINVAL;
            break;
        }
        bool pod = !strcmp(kind, "Pod");
        if (pod && is_over(src)) continue;
        json_t *doc = object_doc(src);
        if (!doc || (pod && (rc = pod_state(&b, doc, src)) != 0)) {
            json_decref(doc);
            rc = rc ? rc : GS_ENOMEM;
            break;
        }
        json_t *to = IN(kind, workload_kinds) ? *workload : *cluster;
        if (json_array_append_new(to, doc)) rc = GS_ENOMEM;
    }
    if (!rc && b.no_duration) {
        char names[1024];
        snprintf(names, sizeof names, "%s%s%s%s%s%s", b.first[0], b.no_duration > 1 ? ", " : "", b.first[1],
                 b.no_duration > 2 ? ", " : "", b.first[2], b.no_duration > 3 ? ", ..." : "");
        gs_diags_add(d, "metadata.annotations[\"" GS_ANN_SIM_DURATION "\"]",
                     "%zu pod(s) have no duration (%s): the replay must know when each pod ends; annotate them or "
                     "give --assume-duration D (e.g. 1h)",
                     b.no_duration, names);
        rc = GS_EINVAL;
    }
    if (rc) {
        json_decref(*cluster);
        json_decref(*workload);
        *cluster = *workload = NULL;
    }
    return rc;
}

/*--- Write ---*/

static int write_docs(const char *path, const char *header, const json_t *docs, struct gs_diags *d)
{
    FILE *f = fopen(path, "we");
    if (!f) {
        gs_diags_add(d, path, "cannot write: %s", strerror(errno));
        return GS_EIO;
    }
    int rc = 0;
    if (header) fprintf(f, "# %s\n", header);
    size_t i;
    const json_t *doc;
    json_array_foreach(docs, i, doc)
    {
        char *text = gs_yaml_encode(doc);
        if (!text) {
            rc = GS_ENOMEM;
            break;
        }
        fprintf(f, "---\n%s%s", text, text[0] && text[strlen(text) - 1] == '\n' ? "" : "\n");
        free(text);
    }
    if (fclose(f) && !rc) {
        gs_diags_add(d, path, "cannot write: %s", strerror(errno));
        rc = GS_EIO;
    }
    return rc;
}

int gs_snapshot_write(const char *dir, const char *header, const json_t *cluster, const json_t *workload,
                      struct gs_diags *d)
{
    if (mkdir(dir, 0755) && errno != EEXIST) {
        gs_diags_add(d, dir, "cannot create the directory: %s", strerror(errno));
        return GS_EIO;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/cluster.yaml", dir);
    int rc = write_docs(path, header, cluster, d);
    snprintf(path, sizeof path, "%s/workload.yaml", dir);
    if (!rc) rc = write_docs(path, header, workload, d);
    return rc;
}

int gs_snapshot_take(const struct gs_client_opts *conn, const struct gs_snapshot_opts *o, json_t **cluster,
                     json_t **workload, struct gs_diags *d)
{
    *cluster = *workload = NULL;
    struct gs_client *c = NULL;
    int rc = gs_client_new(conn, &c, d);
    json_t *objects = NULL;
    if (!rc) rc = gs_snapshot_fetch(c, &objects, d);
    if (!rc) rc = gs_snapshot_build(objects, o, cluster, workload, d);
    json_decref(objects);
    gs_client_free(c);
    return rc;
}
