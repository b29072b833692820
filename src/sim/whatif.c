/*
 * whatif.c - a snapshot replayed forward, before and after a change
 * (whatif.h).
 *
 * The changes edit the snapshot's documents rather than the loaded trace:
 * the loader then checks the changed cluster exactly as it checks a
 * hand-written one (a quota that is not a quantity, a weight out of range,
 * a template node with devices a copy cannot have), and the replay needs to
 * know nothing about what-if questions. The documents go through a private
 * temporary directory because the loader reads files (its messages name
 * them); the directory is removed before returning.
 */
#include "sim/whatif.h"

#include "core/codec.h"
#include "core/object.h"
#include "core/quantity.h"
#include "sim/snapshot.h"
#include "sim/trace_manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }
static const char *meta_str(const json_t *doc, const char *k) { return jstr(json_object_get(doc, "metadata"), k); }

static bool is(const json_t *doc, const char *kind, const char *name)
{
    const char *k = jstr(doc, "kind"), *n = meta_str(doc, "name");
    return k && n && !strcmp(k, kind) && (!name || !strcmp(n, name));
}

/*--- Parsing the flags ---*/

static int split(const char *value, char sep, char *left, size_t ll, char *right, size_t rl)
{
    const char *at = strrchr(value, sep);
    if (!at || at == value || !at[1]) return GS_EINVAL;
    if ((size_t)(at - value) >= ll || strlen(at + 1) >= rl) return GS_EINVAL;
    snprintf(left, ll, "%.*s", (int)(at - value), value);
    snprintf(right, rl, "%s", at + 1);
    return 0;
}

int gs_whatif_change_parse(const char *flag, const char *value, struct gs_whatif_change *out, const char **why)
{
    memset(out, 0, sizeof *out);
    *why = NULL;
    char num[64], rest[512];
    if (!strcmp(flag, "add-nodes")) {
        out->kind = GS_WHATIF_ADD_NODES;
        if (split(value, ':', num, sizeof num, out->name, sizeof out->name) || strchr(num, ':')) {
            *why = "want N:TEMPLATE_NODE, e.g. 4:gpu-a";
            return GS_EINVAL;
        }
        char *end;
        long n = strtol(num, &end, 10);
        if (*end || n < 1 || n > 10000) {
            *why = "N must be a whole number from 1 to 10000";
            return GS_EINVAL;
        }
        out->count = (int)n;
        return 0;
    }
    if (!strcmp(flag, "remove-node")) {
        out->kind = GS_WHATIF_REMOVE_NODE;
        if (!*value || strlen(value) >= sizeof out->name) {
            *why = "want a node name";
            return GS_EINVAL;
        }
        snprintf(out->name, sizeof out->name, "%s", value);
        return 0;
    }
    if (!strcmp(flag, "set-quota")) {
        out->kind = GS_WHATIF_SET_QUOTA;
        const char *colon = strchr(value, ':');
        if (!colon || colon == value || (size_t)(colon - value) >= sizeof out->name ||
            split(colon + 1, '=', out->resource, sizeof out->resource, out->value, sizeof out->value)) {
            *why = "want QUEUE:RESOURCE=QUANTITY, e.g. research-cq:nvidia.com/gpu=16";
            return GS_EINVAL;
        }
        snprintf(out->name, sizeof out->name, "%.*s", (int)(colon - value), value);
        int64_t milli;
        if (gs_quantity_parse(out->value, &milli, why) || milli < 0) {
            if (!*why) *why = "the quantity must be >= 0";
            return GS_EINVAL;
        }
        return 0;
    }
    if (!strcmp(flag, "set-weight")) {
        out->kind = GS_WHATIF_SET_WEIGHT;
        if (split(value, '=', out->name, sizeof out->name, rest, sizeof rest) || strlen(rest) >= sizeof out->value) {
            *why = "want QUEUE=WEIGHT, e.g. research=2";
            return GS_EINVAL;
        }
        int64_t milli;
        if (gs_quantity_parse(rest, &milli, why) || milli <= 0) {
            if (!*why) *why = "the weight must be > 0";
            return GS_EINVAL;
        }
        memcpy(out->value, rest, strlen(rest) + 1); /* fits: checked above */
        return 0;
    }
    *why = "not a what-if change";
    return GS_EINVAL;
}

/*--- Applying them ---*/

static json_t *find(const json_t *docs, const char *kind, const char *name)
{
    size_t i;
    json_t *doc;
    json_array_foreach(docs, i, doc) if (is(doc, kind, name)) return doc;
    return NULL;
}

static int add_nodes(json_t *cluster, const struct gs_whatif_change *c, struct gs_diags *d)
{
    const json_t *tmpl = find(cluster, "Node", c->name);
    if (!tmpl) return gs_diags_add(d, "--add-nodes", "no node \"%s\" in the snapshot to copy", c->name), GS_EINVAL;
    const json_t *nrt = find(cluster, "NodeResourceTopology", c->name);
    for (int i = 1; i <= c->count; i++) {
        char name[300];
        snprintf(name, sizeof name, "%s-new-%d", c->name, i);
        if (find(cluster, "Node", name))
            return gs_diags_add(d, "--add-nodes", "a node \"%s\" is already in the snapshot", name), GS_EINVAL;
        for (const json_t *src = tmpl; src; src = src == tmpl ? nrt : NULL) {
            json_t *copy = json_deep_copy(src);
            json_t *md = json_object_get(copy, "metadata");
            if (!copy || json_object_set_new(md, "name", json_string(name))) {
                json_decref(copy);
                return GS_ENOMEM;
            }
            json_object_del(md, "uid");
            json_t *labels = json_object_get(md, "labels");
            if (json_object_get(labels, "kubernetes.io/hostname"))
                json_object_set_new(labels, "kubernetes.io/hostname", json_string(name));
            /* Device uuids name one physical GPU: a copy gets its own. */
            size_t j;
            json_t *dev;
            json_array_foreach(json_object_get(json_object_get(copy, "status"), "devices"), j, dev)
            {
                const char *uuid = jstr(dev, "uuid");
                if (!uuid) continue;
                char u[400];
                snprintf(u, sizeof u, "%s-new-%d", uuid, i);
                json_object_set_new(dev, "uuid", json_string(u));
            }
            if (json_array_append_new(cluster, copy)) return GS_ENOMEM;
        }
    }
    return 0;
}

/* The pods bound to node wait again, from the start. */
static void unbind_pods(json_t *workload, const char *node)
{
    size_t i;
    json_t *doc;
    json_array_foreach(workload, i, doc)
    {
        json_t *spec = json_object_get(doc, "spec");
        if (!is(doc, "Pod", NULL) || !jstr(spec, "nodeName") || strcmp(jstr(spec, "nodeName"), node)) continue;
        json_object_del(spec, "nodeName");
        json_object_del(doc, "status");
        json_t *an = json_object_get(json_object_get(doc, "metadata"), "annotations");
        json_object_del(an, GS_ANN_DEVICES);
        json_object_del(an, GS_ANN_SIM_RUNNING_FOR);
        json_object_set_new(an, GS_ANN_SIM_ARRIVAL, json_string("0"));
    }
}

static int remove_node(json_t *cluster, json_t *workload, const struct gs_whatif_change *c, struct gs_diags *d)
{
    bool found = false;
    for (size_t i = json_array_size(cluster); i-- > 0;) {
        json_t *doc = json_array_get(cluster, i);
        if (is(doc, "Node", c->name) || is(doc, "NodeResourceTopology", c->name)) {
            found |= is(doc, "Node", c->name);
            json_array_remove(cluster, i);
        }
    }
    if (!found) return gs_diags_add(d, "--remove-node", "no node \"%s\" in the snapshot", c->name), GS_EINVAL;
    unbind_pods(workload, c->name);
    return 0;
}

/* A Volcano or gpusched Queue named name, or a ClusterQueue. */
static json_t *queue(const json_t *cluster, const json_t *workload, const char *name, bool *cq)
{
    json_t *q = find(cluster, "ClusterQueue", name);
    if (!q) q = find(workload, "ClusterQueue", name);
    *cq = q != NULL;
    if (!q) q = find(cluster, "Queue", name);
    if (!q) q = find(workload, "Queue", name);
    return q;
}

static json_t *child(json_t *o, const char *key)
{
    json_t *c = json_object_get(o, key);
    if (!json_is_object(c)) {
        c = json_object();
        if (json_object_set_new(o, key, c)) return NULL;
    }
    return c;
}

static int set_quota(json_t *cluster, json_t *workload, const struct gs_whatif_change *c, struct gs_diags *d)
{
    bool cq;
    json_t *q = queue(cluster, workload, c->name, &cq);
    if (!q) return gs_diags_add(d, "--set-quota", "no ClusterQueue or Queue \"%s\" in the snapshot", c->name), GS_EINVAL;
    json_t *spec = child(q, "spec");
    if (!spec) return GS_ENOMEM;
    if (!cq) return json_object_set_new(child(spec, "capability"), c->resource, json_string(c->value)) ? GS_ENOMEM : 0;
    size_t set = 0, i, j, k;
    json_t *rg, *fl, *res;
    json_array_foreach(json_object_get(spec, "resourceGroups"), i, rg)
        json_array_foreach(json_object_get(rg, "flavors"), j, fl)
            json_array_foreach(json_object_get(fl, "resources"), k, res)
                if (jstr(res, "name") && !strcmp(jstr(res, "name"), c->resource))
                    set += !json_object_set_new(res, "nominalQuota", json_string(c->value));
    if (!set)
        return gs_diags_add(d, "--set-quota", "ClusterQueue \"%s\" has no quota of %s in any flavor", c->name,
                            c->resource),
               GS_EINVAL;
    return 0;
}

static int set_weight(json_t *cluster, json_t *workload, const struct gs_whatif_change *c, struct gs_diags *d)
{
    bool cq;
    json_t *q = queue(cluster, workload, c->name, &cq);
    if (!q) return gs_diags_add(d, "--set-weight", "no ClusterQueue or Queue \"%s\" in the snapshot", c->name), GS_EINVAL;
    json_t *spec = child(q, "spec");
    if (!spec) return GS_ENOMEM;
    if (cq) return json_object_set_new(child(spec, "fairSharing"), "weight", json_string(c->value)) ? GS_ENOMEM : 0;
    char *end;
    long w = strtol(c->value, &end, 10);
    if (*end || w < 1 || w > 65535)
        return gs_diags_add(d, "--set-weight", "\"%s\": a Queue's weight is a whole number from 1 to 65535", c->value),
               GS_EINVAL;
    return json_object_set_new(spec, "weight", json_integer(w)) ? GS_ENOMEM : 0;
}

static bool same_object(const json_t *a, const json_t *b)
{
    const char *ka = jstr(a, "kind"), *kb = jstr(b, "kind");
    const char *na = meta_str(a, "name"), *nb = meta_str(b, "name");
    const char *sa = meta_str(a, "namespace"), *sb = meta_str(b, "namespace");
    if (!ka || !kb || !na || !nb || strcmp(ka, kb) || strcmp(na, nb)) return false;
    if (!strcmp(ka, "Pod")) { /* a pod without a namespace is in "default" */
        sa = sa ? sa : "default";
        sb = sb ? sb : "default";
    }
    return (!sa && !sb) || (sa && sb && !strcmp(sa, sb));
}

static int overlay_one(json_t *cluster, json_t *workload, json_t *doc)
{
    json_t *files[2] = {cluster, workload};
    for (int f = 0; f < 2; f++) {
        size_t i;
        json_t *cur;
        json_array_foreach(files[f], i, cur) if (same_object(cur, doc)) return json_array_set(files[f], i, doc);
    }
    return json_array_append(is(doc, "Node", NULL) ? cluster : workload, doc);
}

int gs_whatif_apply(json_t *cluster, json_t *workload, const struct gs_whatif_change *c, size_t n,
                    const json_t *overlay, struct gs_diags *d)
{
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        switch (c[i].kind) {
        case GS_WHATIF_ADD_NODES: rc = add_nodes(cluster, &c[i], d); break;
        case GS_WHATIF_REMOVE_NODE: rc = remove_node(cluster, workload, &c[i], d); break;
        case GS_WHATIF_SET_QUOTA: rc = set_quota(cluster, workload, &c[i], d); break;
        case GS_WHATIF_SET_WEIGHT: rc = set_weight(cluster, workload, &c[i], d); break;
        }
    }
    size_t i;
    json_t *doc;
    json_array_foreach(overlay, i, doc)
    {
        if (rc) break;
        if (!json_is_object(doc) || !jstr(doc, "kind") || !meta_str(doc, "name")) {
            gs_diags_add(d, "--overlay", "document %zu has no kind or metadata.name", i + 1);
            rc = GS_EINVAL;
        } else if (overlay_one(cluster, workload, doc)) {
            rc = GS_ENOMEM;
        }
    }
    return rc;
}

/*--- Running ---*/

static int write_docs(const char *path, const json_t *docs)
{
    FILE *f = fopen(path, "we");
    if (!f) return GS_EIO;
    int rc = 0;
    size_t i;
    const json_t *doc;
    json_array_foreach(docs, i, doc)
    {
        char *text = gs_json_encode(doc, 0);
        if (!text) {
            rc = GS_ENOMEM;
            break;
        }
        fprintf(f, "---\n%s\n", text);
        free(text);
    }
    if (fclose(f) && !rc) rc = GS_EIO;
    return rc;
}

struct collect {
    struct gs_whatif_result *r;
};

static struct gs_whatif_pod *slot(struct gs_whatif_result *r, const char *pod)
{
    for (size_t i = 0; pod && i < r->n; i++)
        if (!strcmp(r->v[i].pod, pod)) return &r->v[i];
    return NULL;
}

static void on_event(void *ctx, const struct gs_sim_event *e)
{
    struct gs_whatif_pod *p = slot(((struct collect *)ctx)->r, e->pod);
    if (!p || p->start >= 0) return; /* not pending, or already started */
    if (e->type == GS_SIM_SCHEDULED && e->node) {
        p->start = e->t;
        snprintf(p->node, sizeof p->node, "%s", e->node);
        p->reason[0] = 0;
    } else if (e->type == GS_SIM_FAILED && e->reason) {
        snprintf(p->reason, sizeof p->reason, "%s", e->reason);
    }
}

const struct gs_whatif_pod *gs_whatif_find(const struct gs_whatif_result *r, const char *key)
{
    return slot((struct gs_whatif_result *)r, key);
}

void gs_whatif_result_free(struct gs_whatif_result *r)
{
    free(r->v);
    memset(r, 0, sizeof *r);
}

static int pending_pods(const struct gs_trace *t, struct gs_whatif_result *out)
{
    out->v = calloc(t->npods ? t->npods : 1, sizeof *out->v);
    if (!out->v) return GS_ENOMEM;
    for (size_t i = 0; i < t->npods; i++) {
        if (t->pods[i].node) continue;
        struct gs_whatif_pod *p = &out->v[out->n++];
        const struct gs_meta *m = &t->pods[i].pod->meta;
        snprintf(p->pod, sizeof p->pod, "%s/%s", m->namespace_ ? m->namespace_ : "default", m->name);
        p->start = -1;
        snprintf(p->reason, sizeof p->reason, "no decision in the replay");
    }
    return 0;
}

int gs_whatif_run(const json_t *cluster, const json_t *workload, const struct gs_sim_opts *o,
                  struct gs_whatif_result *out, struct gs_diags *d)
{
    memset(out, 0, sizeof *out);
    const char *tmp = getenv("TMPDIR");
    char dir[4096], cpath[4200], wpath[4200];
    snprintf(dir, sizeof dir, "%s/gpusched-whatif-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return gs_diags_add(d, dir, "cannot create: %s", strerror(errno)), GS_EIO;
    snprintf(cpath, sizeof cpath, "%s/cluster.yaml", dir);
    snprintf(wpath, sizeof wpath, "%s/workload.yaml", dir);
    int rc = write_docs(cpath, cluster);
    if (!rc) rc = write_docs(wpath, workload);
    struct gs_trace t;
    bool loaded = false;
    if (!rc) loaded = (rc = gs_trace_load_manifests(cpath, wpath, &t, d)) == 0;
    unlink(cpath);
    unlink(wpath);
    rmdir(dir);
    if (!rc) rc = pending_pods(&t, out);
    if (!rc) {
        struct gs_sim_opts ro = *o;
        ro.mode = GS_SIM_REPLAY;
        struct collect c = {out};
        struct gs_sim_sink sink = {.event = on_event, .ctx = &c};
        struct gs_sim_result res;
        rc = gs_sim_run_replay(&t, &ro, &sink, &res, d);
    }
    if (loaded) gs_trace_free(&t);
    if (rc) gs_whatif_result_free(out);
    return rc;
}

/* Whether the workload has pod key bound to a node. */
static bool pod_running(const json_t *workload, const char *key)
{
    size_t i;
    const json_t *doc;
    json_array_foreach(workload, i, doc)
    {
        if (!is(doc, "Pod", NULL)) continue;
        const char *ns = meta_str(doc, "namespace");
        char k[600];
        snprintf(k, sizeof k, "%s/%s", ns ? ns : "default", meta_str(doc, "name"));
        if (!strcmp(k, key)) return jstr(json_object_get(doc, "spec"), "nodeName") != NULL;
    }
    return false;
}

int gs_whatif_eta(const struct gs_client_opts *conn, double assume_duration, const struct gs_sim_opts *o,
                  const char *key, struct gs_whatif_pod *out, bool *running, struct gs_diags *d)
{
    struct gs_snapshot_opts so = {.now = (double)time(NULL), .assume_duration = assume_duration};
    json_t *cluster = NULL, *workload = NULL;
    struct gs_sim_opts def = {.mode = GS_SIM_REPLAY, .seed = 42};
    struct gs_whatif_result r = {0};
    *running = false;
    int rc = gs_snapshot_take(conn, &so, &cluster, &workload, d);
    if (!rc) *running = pod_running(workload, key);
    if (!rc) rc = gs_whatif_run(cluster, workload, o ? o : &def, &r, d);
    if (!rc) {
        const struct gs_whatif_pod *p = gs_whatif_find(&r, key);
        if (p) *out = *p;
        else rc = GS_ENOENT;
    }
    gs_whatif_result_free(&r);
    json_decref(cluster);
    json_decref(workload);
    return rc;
}
