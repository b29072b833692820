/*
 * api_eviction.c - POST /api/v1/namespaces/NS/pods/NAME/eviction, the
 * subresource `kubectl drain` uses: a policy/v1 (or v1beta1) Eviction that
 * deletes the pod as DELETE does (gracefully when it runs on a node),
 * unless a PodDisruptionBudget selecting it would be violated, which is 429
 * TooManyRequests with kube-apiserver's message and a DisruptionBudget cause;
 * kubectl drain then retries every 5 s until the budget allows it or its
 * --timeout passes.
 *
 * The budget's status (expectedPods, currentHealthy, desiredHealthy,
 * disruptionsAllowed, disruptedPods) is recomputed from the pods of its
 * namespace and written on each eviction, in the same read-modify-write
 * that decides it (pdb.h): the decision and the spent disruption are one
 * step, so concurrent evictions cannot both take the last allowed one. No
 * controller keeps the status between evictions: it shows the numbers as
 * of the last eviction that looked at the budget.
 *
 * As in Kubernetes: finished pods (Succeeded, Failed), pods not yet
 * running (Pending) and pods already being deleted are evicted without
 * looking at budgets; a pod selected by more than one budget cannot be
 * evicted (500); an unhealthy pod is evicted when the budget is met
 * (currentHealthy >= desiredHealthy) or its unhealthyPodEvictionPolicy is
 * AlwaysAllow. dryRun=All decides and answers without writing anything.
 */
#include "control/apiserver_int.h"
#include "control/pdb.h"

#include "core/codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DISRUPTED_TTL_S 120 /* an evicted pod not gone after this counts again (kube's DeletionTimeout) */

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/*--- The body ---*/

/* The Eviction as JSON (from JSON or protobuf); answers 400 itself. */
static json_t *eviction_body(struct gs__req *r)
{
    const char *ct = gs__header(r, "Content-Type");
    json_t *ev = NULL;
    char why[256] = "the request has no body";
    if (r->len && ct && strstr(ct, "protobuf")) {
        gs__proto_decode(r->body, r->len, &ev, why, sizeof why);
    } else if (r->len) {
        struct gs_diags d = {0};
        gs_json_decode(r->body, r->len, &ev, &d);
        snprintf(why, sizeof why, "%s", d.n ? d.v[0].msg : "the body must be a JSON object");
        gs_diags_free(&d);
        if (ev && !json_is_object(ev)) json_decref(ev), ev = NULL;
    }
    if (!ev) {
        gs__reply_status(r, 400, NULL, r->name, "malformed Eviction: %s", why);
        return NULL;
    }
    const char *kind = str(ev, "kind"), *api = str(ev, "apiVersion");
    const char *name = str(json_object_get(ev, "metadata"), "name");
    const char *ns = str(json_object_get(ev, "metadata"), "namespace");
    if (kind && strcmp(kind, "Eviction"))
        gs__reply_status(r, 400, NULL, r->name, "the body of an eviction must be an Eviction, got kind \"%s\"", kind);
    else if (api && strcmp(api, "policy/v1") && strcmp(api, "policy/v1beta1"))
        gs__reply_status(r, 400, NULL, r->name, "Eviction of apiVersion \"%s\" is not served (policy/v1 or "
                         "policy/v1beta1)", api);
    else if (!name || strcmp(name, r->name))
        gs__reply_status(r, 400, NULL, r->name, "name in URL does not match name in Eviction object");
    else if (ns && strcmp(ns, r->ns))
        gs__reply_status(r, 400, NULL, r->name, "namespace in URL does not match namespace in Eviction object");
    else {
        if (!kind) json_object_set_new(ev, "kind", json_string("Eviction")); /* so the fields checked are an Eviction's */
        if (!api) json_object_set_new(ev, "apiVersion", json_string("policy/v1"));
        if (!gs__check_fields(r, ev, false) && !gs__check_delete_options(r, json_object_get(ev, "deleteOptions")))
            return ev;
    }
    json_decref(ev);
    return NULL;
}

/*--- Budgets ---*/

struct gather {
    const json_t *pod;  /* budgets: the pod they must select */
    json_t *items;
};

static int gather_one(const char *key, json_t *obj, void *arg)
{
    (void)key;
    struct gather *g = arg;
    if (!g->pod || gs_pdb_selects(obj, g->pod)) json_array_append(g->items, obj);
    return 0;
}

static int list_ns(struct gs__req *r, const char *plural_id, const json_t *pod, json_t **items)
{
    char prefix[600];
    snprintf(prefix, sizeof prefix, "%s/%s/", plural_id, r->ns);
    struct gather g = {pod, json_array()};
    int err = g.items ? gs_store_list(r->s->store, prefix, gather_one, &g, NULL) : GS_ENOMEM;
    if (err) json_decref(g.items), g.items = NULL;
    *items = g.items;
    return err;
}

struct decide {
    struct gs__req *r;
    const json_t *pod;
    json_t *pods; /* the namespace's pods */
    bool allowed;
    struct gs_pdb_eval e;
};

static void rfc3339(time_t t, char *buf, size_t len)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* disruptedPods of cur without the pods gone, being deleted, or evicted too long ago. */
static json_t *live_disrupted(const json_t *cur, const json_t *pods, time_t now)
{
    json_t *out = json_object();
    const char *name;
    json_t *ts;
    json_object_foreach(json_object_get(json_object_get(cur, "status"), "disruptedPods"), name, ts) {
        struct tm tm = {0};
        const char *t = json_string_value(ts);
        if (!t || !strptime(t, "%Y-%m-%dT%H:%M:%S", &tm) || timegm(&tm) + DISRUPTED_TTL_S < now) continue;
        size_t i;
        json_t *p;
        json_array_foreach(pods, i, p) {
            const json_t *md = json_object_get(p, "metadata");
            if (str(md, "name") && !strcmp(str(md, "name"), name) && !str(md, "deletionTimestamp"))
                json_object_set(out, name, ts);
        }
    }
    return out;
}

static int decide_fn(json_t *cur, json_t **out, void *arg)
{
    struct decide *d = arg;
    if (!cur) return GS_ENOENT;
    time_t now = time(NULL);
    json_t *disrupted = live_disrupted(cur, d->pods, now);
    if (!disrupted) return GS_ENOMEM;
    size_t n = json_array_size(d->pods);
    json_t **pods = calloc(n ? n : 1, sizeof *pods);
    if (!pods) {
        json_decref(disrupted);
        return GS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) pods[i] = json_array_get(d->pods, i);
    gs_pdb_evaluate(cur, pods, n, disrupted, &d->e);
    free(pods);
    const char *policy = str(json_object_get(cur, "spec"), "unhealthyPodEvictionPolicy");
    if (gs_pdb_pod_healthy(d->pod)) {
        d->allowed = d->e.disruptions_allowed > 0;
        if (d->allowed) { /* spent: counted as not healthy until it is gone */
            char ts[32];
            rfc3339(now, ts, sizeof ts);
            json_object_set_new(disrupted, str(json_object_get(d->pod, "metadata"), "name"), json_string(ts));
            d->e.disruptions_allowed--;
            d->e.current_healthy--;
        }
    } else {
        d->allowed = (policy && !strcmp(policy, "AlwaysAllow")) || d->e.current_healthy >= d->e.desired_healthy;
    }
    json_t *st = json_pack("{s:I, s:I, s:I, s:I}", "expectedPods", (json_int_t)d->e.expected, "currentHealthy",
                           (json_int_t)d->e.current_healthy, "desiredHealthy", (json_int_t)d->e.desired_healthy,
                           "disruptionsAllowed", (json_int_t)d->e.disruptions_allowed);
    if (!st) {
        json_decref(disrupted);
        return GS_ENOMEM;
    }
    if (json_object_size(disrupted)) json_object_set(st, "disruptedPods", disrupted);
    json_decref(disrupted);
    json_t *gen = json_object_get(json_object_get(cur, "metadata"), "generation");
    json_object_set_new(st, "observedGeneration", json_integer(json_is_integer(gen) ? json_integer_value(gen) : 1));
    if (d->r->dry_run || json_equal(st, json_object_get(cur, "status"))) {
        json_decref(st);
        return GS_STORE_UNCHANGED;
    }
    json_t *next = json_deep_copy(cur);
    if (!next) {
        json_decref(st);
        return GS_ENOMEM;
    }
    json_object_set_new(next, "status", st);
    *out = next;
    return 0;
}

/* 0 when the budgets allow evicting pod; else the request was answered (429, 500). */
static int check_budgets(struct gs__req *r, const json_t *pod)
{
    json_t *pdbs = NULL, *pods = NULL;
    int err = list_ns(r, "poddisruptionbudgets.policy", pod, &pdbs);
    if (err) return gs__reply_err(r, err, r->name), err;
    if (json_array_size(pdbs) == 0) {
        json_decref(pdbs);
        return 0;
    }
    if (json_array_size(pdbs) > 1) {
        json_decref(pdbs);
        gs__reply_status(r, 500, NULL, r->name, "This pod has more than one PodDisruptionBudget, which the eviction "
                         "subresource does not support.");
        return GS_ESTATE;
    }
    const json_t *pdb = json_array_get(pdbs, 0);
    const char *pdb_name = str(json_object_get(pdb, "metadata"), "name");
    err = list_ns(r, "pods", NULL, &pods);
    struct decide d = {.r = r, .pod = pod, .pods = pods};
    char key[600];
    snprintf(key, sizeof key, "poddisruptionbudgets.policy/%s/%s", r->ns, pdb_name ? pdb_name : "");
    if (!err) err = gs_store_mutate(r->s->store, key, decide_fn, &d, NULL, NULL);
    json_decref(pods);
    if (err) {
        gs__reply_err(r, err, pdb_name);
    } else if (!d.allowed) {
        char why[512];
        snprintf(why, sizeof why, "The disruption budget %s needs %lld healthy pods and has %lld currently",
                 pdb_name ? pdb_name : "", (long long)d.e.desired_healthy, (long long)d.e.current_healthy);
        struct gs__cause c = {NULL, why, "DisruptionBudget"};
        gs__reply_json(r, 429, gs__status(429, NULL, "Cannot evict pod as it would violate the pod's disruption "
                                          "budget.", r->res, r->name, &c, 1));
        err = GS_ESTATE;
    }
    json_decref(pdbs);
    return err;
}

/*--- The handler ---*/

static bool skips_budgets(const json_t *pod)
{
    const char *ph = str(json_object_get(pod, "status"), "phase");
    return str(json_object_get(pod, "metadata"), "deletionTimestamp") ||
           (ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed") || !strcmp(ph, "Pending")));
}

enum MHD_Result gs__handle_eviction(struct gs__req *r)
{
    json_t *ev = eviction_body(r);
    if (!ev) return MHD_YES;
    char key[1024];
    gs_api_key(r->res, r->ns, r->name, key, sizeof key);
    json_t *pod = NULL, *out = NULL;
    int err = gs_store_get(r->s->store, key, &pod, NULL);
    if (err) gs__reply_err(r, err, r->name);
    else if (!skips_budgets(pod)) err = check_budgets(r, pod);
    if (!err) err = gs__delete_object(r, json_object_get(ev, "deleteOptions"), &out);
    if (err && !r->answered) gs__reply_err(r, err, r->name);
    else if (!err) gs__reply_json(r, 201, gs__status(201, NULL, "", NULL, NULL, NULL, 0));
    json_decref(out);
    json_decref(pod);
    json_decref(ev);
    return MHD_YES;
}
