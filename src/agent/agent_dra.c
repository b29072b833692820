/*
 * agent_dra.c - the agent as the kubelet of pods with resource claims
 * (spec.resourceClaims), next to the device-plugin path of agent_pods.c.
 *
 * Before a pod starts, each of its claims is resolved (resourceClaimName,
 * or the claim the resourceclaim controller generated from a template and
 * named in status.resourceClaimStatuses), read from the API, and must be
 * allocated and reserved for this pod; until then the pod waits, Pending,
 * with the condition ResourceClaimsPrepared=False and an event saying what
 * it waits for. Then NodePrepareResources goes to each driver's plugin,
 * found as the kubelet finds it (GetInfo on <registry>/<driver>-reg.sock),
 * and the CDI devices it returns become the environment of the containers
 * that name the claim in resources.claims (a process runtime has no device
 * nodes to add: NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES name the
 * devices' UUIDs). A plugin's error for a claim keeps the pod waiting with
 * a Warning event naming the claim and the error, as the kubelet does; the
 * pod never starts without its devices. NodeUnprepareResources follows
 * when the pod's devices are released (it ended, was deleted or stopped),
 * unless another pod here still uses the same (shared) claim.
 *
 * GPUs reached through claims count as held for the device-plugin path
 * (gs__dra_holds_slot), so a device-plugin pod and a DRA pod never share
 * one here, whatever the scheduler thought. Loop thread only.
 */
#include "agent/agent_int.h"
#include "control/api.h"
#include "core/log.h"
#include "node/draplugin/draplugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_NS 1000000000LL /* how often a waiting pod looks again */
#define PREPARE_TIMEOUT_MS 45000 /* the kubelet's own per-call timeout */

struct gs__dra {
    json_t *claims;        /* [{podClaim, namespace, name, uid, driver}] once resolved */
    json_t *devices;       /* uid -> the plugin's devices (prepare answer) */
    json_t *env;           /* container name -> {k: v} */
    uint64_t slots;        /* GPU table slots the claims reach */
    bool prepared;         /* Prepare succeeded: Unprepare owed */
    bool waiting;
    int64_t next_try_ns;
    char last[256];        /* the last wait reason reported */
};

static struct gs__dra *state(struct gs__pod *p)
{
    if (!p->dra) p->dra = calloc(1, sizeof *p->dra);
    return p->dra;
}

void gs__dra_free(struct gs__pod *p)
{
    if (!p->dra) return;
    json_decref(p->dra->claims);
    json_decref(p->dra->devices);
    json_decref(p->dra->env);
    free(p->dra);
    p->dra = NULL;
}

static const json_t *pod_claims(const struct gs__pod *p)
{
    return json_object_get(json_object_get(p->obj, "spec"), "resourceClaims");
}

bool gs__dra_waiting(const struct gs__pod *p)
{
    return p->dra && p->dra->waiting;
}

bool gs__dra_holds_slot(const struct gs__pod *p, int slot)
{
    return p->dra && p->dra->prepared && slot >= 0 && slot < 64 && (p->dra->slots >> slot & 1);
}

uint64_t gs__dra_slots(const struct gs__pod *p)
{
    return p->dra && p->dra->prepared ? p->dra->slots : 0;
}

/*--- Resolving claims ---*/

static int get_claim(struct gs_agent *a, const char *ns, const char *name, json_t **out)
{
    static const char *const versions[] = {"v1", "v1beta2", "v1beta1"};
    for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++) {
        char path[1024];
        long code = 0;
        snprintf(path, sizeof path, "/apis/resource.k8s.io/%s/namespaces/%s/resourceclaims/%s", versions[v], ns, name);
        *out = NULL;
        int rc = gs_client_call(a->cl, "GET", path, NULL, NULL, NULL, out, &code);
        if (!rc && code == 200) return 0;
        json_decref(*out);
        *out = NULL;
        /* A node reads only the claims allocated on it (docs/CONTROL_PLANE.md):
         * before the scheduler's allocation the claim is forbidden, not absent. */
        if (code == 403) return GS_EPERM;
        if (code != 404) return GS_EIO;
    }
    return GS_ENOENT;
}

static bool reserved_for(const json_t *claim, const char *pod_uid)
{
    size_t i;
    const json_t *r;
    json_array_foreach(json_object_get(json_object_get(claim, "status"), "reservedFor"), i, r) {
        const char *uid = gs__jstr(r, "uid"), *res = gs__jstr(r, "resource");
        if (uid && !strcmp(uid, pod_uid) && (!res || !strcmp(res, "pods"))) return true;
    }
    return false;
}

/* The claim object name of pod claim entry e; NULL with why when unknown yet. */
static const char *claim_name(const struct gs__pod *p, const json_t *e, char *why, size_t wl)
{
    const char *pc = gs__jstr(e, "name");
    const char *direct = gs__jstr(e, "resourceClaimName");
    if (direct) return direct;
    size_t i;
    const json_t *s;
    json_array_foreach(json_object_get(json_object_get(p->obj, "status"), "resourceClaimStatuses"), i, s) {
        const char *n = gs__jstr(s, "name");
        if (n && pc && !strcmp(n, pc) && gs__jstr(s, "resourceClaimName")) return gs__jstr(s, "resourceClaimName");
    }
    snprintf(why, wl, "waiting for the ResourceClaim of pod claim %s (from template %s) to be created", pc ? pc : "?",
             gs__jstr(e, "resourceClaimTemplateName") ? gs__jstr(e, "resourceClaimTemplateName") : "?");
    return NULL;
}

/* Resolves every claim: 0 with d->claims, 1 to wait (why), -1 refused (why). */
static int resolve(struct gs_agent *a, struct gs__pod *p, struct gs__dra *d, char *why, size_t wl)
{
    json_t *list = json_array();
    size_t i;
    const json_t *e;
    json_array_foreach(pod_claims(p), i, e) {
        const char *pc = gs__jstr(e, "name");
        const char *name = claim_name(p, e, why, wl);
        if (!pc || (!name && !gs__jstr(e, "resourceClaimTemplateName") && !gs__jstr(e, "resourceClaimName"))) {
            snprintf(why, wl, "spec.resourceClaims[%zu]: want a name and resourceClaimName or resourceClaimTemplateName",
                     i);
            json_decref(list);
            return -1;
        }
        if (!name) {
            json_decref(list);
            return 1;
        }
        json_t *claim = NULL;
        int rc = get_claim(a, p->ns, name, &claim);
        const json_t *md = json_object_get(claim, "metadata");
        const json_t *alloc = json_object_get(json_object_get(claim, "status"), "allocation");
        if (rc == GS_ENOENT) snprintf(why, wl, "waiting for ResourceClaim %s/%s to exist", p->ns, name);
        else if (rc == GS_EPERM)
            snprintf(why, wl, "waiting for ResourceClaim %s/%s to be allocated on this node (until then this node may not read it)",
                     p->ns, name);
        else if (rc) snprintf(why, wl, "cannot read ResourceClaim %s/%s: %s", p->ns, name, gs_strerror(rc));
        else if (!json_is_object(alloc)) snprintf(why, wl, "waiting for ResourceClaim %s/%s to be allocated", p->ns, name);
        else if (!reserved_for(claim, p->uid))
            snprintf(why, wl, "waiting for ResourceClaim %s/%s to be reserved for this pod", p->ns, name);
        if (rc || !json_is_object(alloc) || !reserved_for(claim, p->uid)) {
            json_decref(claim);
            json_decref(list);
            return 1;
        }
        /* The drivers with devices on this node: each gets its own Prepare. */
        size_t j;
        const json_t *r;
        json_t *drivers = json_array();
        json_array_foreach(json_object_get(json_object_get(alloc, "devices"), "results"), j, r) {
            const char *drv = gs__jstr(r, "driver"), *pool = gs__jstr(r, "pool");
            if (!drv || !pool || strcmp(pool, a->node)) continue;
            bool seen = false;
            size_t k;
            json_t *x;
            json_array_foreach(drivers, k, x) seen |= !strcmp(json_string_value(x), drv);
            if (!seen) json_array_append_new(drivers, json_string(drv));
        }
        json_array_append_new(list, json_pack("{s:s,s:s,s:s,s:s,s:o}", "podClaim", pc, "namespace", p->ns, "name", name,
                                              "uid", gs__jstr(md, "uid") ? gs__jstr(md, "uid") : "", "drivers",
                                              drivers));
        json_decref(claim);
    }
    json_decref(d->claims);
    d->claims = list;
    return 0;
}

/*--- Prepare ---*/

/* Prepare for every claim with devices of driver; answers merged into d->devices.
 * 0, 1 to retry (why: the plugin's error), or -1. */
static int prepare_driver(struct gs_agent *a, struct gs__dra *d, const char *driver, char *why, size_t wl)
{
    char ep[1200], err[512] = "";
    bool v1 = true;
    if (!a->o.dra_registry_dir) {
        snprintf(why, wl, "driver %s: this agent has no DRA plugin registry directory", driver);
        return 1;
    }
    if (gs_drap_kubelet_find(a->o.dra_registry_dir, driver, ep, sizeof ep, &v1, err, sizeof err)) {
        snprintf(why, wl, "driver %s: %s", driver, err);
        return 1;
    }
    struct gs_drap_claim_ref refs[64];
    size_t n = 0, i;
    const json_t *c;
    json_array_foreach(d->claims, i, c) {
        size_t k;
        const json_t *x;
        bool has = false;
        json_array_foreach(json_object_get(c, "drivers"), k, x) has |= !strcmp(json_string_value(x), driver);
        if (has && n < 64) refs[n++] = (struct gs_drap_claim_ref){gs__jstr(c, "namespace"), gs__jstr(c, "name"),
                                                                  gs__jstr(c, "uid")};
    }
    json_t *ans = NULL;
    if (gs_drap_kubelet_prepare(ep, v1, refs, n, PREPARE_TIMEOUT_MS, &ans, err, sizeof err)) {
        snprintf(why, wl, "driver %s: %s", driver, err);
        return 1;
    }
    int rc = 0;
    for (size_t k = 0; k < n; k++) {
        const json_t *one = json_object_get(ans, refs[k].uid);
        const char *e = gs__jstr(one, "error");
        if (e && *e) {
            snprintf(why, wl, "claim %s: plugin %s: %s", refs[k].name, driver, e);
            rc = 1;
            break;
        }
        json_t *devs = json_object_get(d->devices, refs[k].uid);
        if (!devs) json_object_set_new(d->devices, refs[k].uid, devs = json_array());
        json_array_extend(devs, json_object_get(one, "devices"));
    }
    json_decref(ans);
    return rc;
}

/* The CDI ids for container cs's claim references. */
static json_t *ctr_ids(const struct gs__dra *d, const json_t *cs)
{
    json_t *ids = json_array();
    size_t i, j, k;
    const json_t *ref, *c, *dev, *q;
    json_array_foreach(json_object_get(json_object_get(cs, "resources"), "claims"), i, ref) {
        const char *pc = gs__jstr(ref, "name"), *req = gs__jstr(ref, "request");
        json_array_foreach(d->claims, j, c) {
            if (!pc || strcmp(pc, gs__jstr(c, "podClaim"))) continue;
            json_array_foreach(json_object_get(d->devices, gs__jstr(c, "uid")), k, dev) {
                const json_t *reqs = json_object_get(dev, "requests");
                bool take = !req || !json_array_size(reqs);
                size_t m;
                json_array_foreach(reqs, m, q) take |= req && !strcmp(json_string_value(q), req);
                if (!take) continue;
                json_array_foreach(json_object_get(dev, "cdi"), m, q) json_array_append(ids, (json_t *)q);
            }
        }
    }
    return ids;
}

static int ids_env(struct gs_agent *a, const json_t *ids, json_t *env, char *why, size_t wl)
{
    size_t n = json_array_size(ids);
    const char **v = calloc(n ? n : 1, sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < n; i++) v[i] = json_string_value(json_array_get(ids, i));
    char err[512];
    int rc = gs_drap_cdi_env(a->o.dra_cdi_dir ? a->o.dra_cdi_dir : "/var/run/cdi", v, n, env, err, sizeof err);
    free(v);
    if (rc) snprintf(why, wl, "%s", err);
    return rc ? -1 : 0;
}

/* Per-container environment and the GPU slots the claims reach. */
static int build_env(struct gs_agent *a, struct gs__pod *p, struct gs__dra *d, char *why, size_t wl)
{
    json_decref(d->env);
    d->env = json_object();
    d->slots = 0;
    size_t i;
    const json_t *cs;
    json_array_foreach(json_object_get(json_object_get(p->obj, "spec"), "containers"), i, cs) {
        json_t *ids = ctr_ids(d, cs), *env = json_object();
        int rc = json_array_size(ids) ? ids_env(a, ids, env, why, wl) : 0;
        json_decref(ids);
        const char *name = gs__jstr(cs, "name");
        if (rc) {
            json_decref(env);
            return -1;
        }
        if (json_object_size(env) && name) json_object_set(d->env, name, env);
        const char *nvd = gs__jstr(env, "NVIDIA_VISIBLE_DEVICES");
        char buf[2048];
        snprintf(buf, sizeof buf, "%s", nvd ? nvd : "");
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int slot = gs_node_gpus_find(&a->gpus, t, NULL);
            if (slot >= 0 && slot < 64) d->slots |= 1ull << slot;
        }
        json_decref(env);
    }
    return 0;
}

/* A GPU the claims reach, held by another pod here under other terms. */
static const struct gs__pod *conflict(struct gs_agent *a, const struct gs__pod *p, const struct gs__dra *d)
{
    for (size_t i = 0; i < a->npods; i++) {
        const struct gs__pod *q = a->pods[i];
        if (q == p || !q->holds_devices) continue;
        for (int k = 0; k < q->nslots; k++)
            if (d->slots >> q->slots[k] & 1) return q;
        if (!q->dra || !q->dra->prepared || !(q->dra->slots & d->slots)) continue;
        /* Another DRA pod: fine only when it is the same claim (shared). */
        size_t j, m;
        const json_t *c1, *c2;
        bool same = false;
        json_array_foreach(d->claims, j, c1) json_array_foreach(q->dra->claims, m, c2) same |=
            !strcmp(gs__jstr(c1, "uid"), gs__jstr(c2, "uid"));
        if (!same) return q;
    }
    return NULL;
}

static void note_wait(struct gs_agent *a, struct gs__pod *p, struct gs__dra *d, bool warn, const char *why)
{
    d->waiting = true;
    d->next_try_ns = gs__mono_ns() + RETRY_NS;
    if (!strcmp(d->last, why)) return;
    snprintf(d->last, sizeof d->last, "%s", why);
    gs_log(warn ? GS_LOG_WARN : GS_LOG_INFO, "agent: pod waits for its resource claims", "pod", p->key, "why", why,
           NULL);
    gs__pod_event(a, p, NULL, warn ? "Warning" : "Normal", warn ? "FailedPrepareDynamicResources" : "WaitingForResourceClaim",
                  "%s", why);
    snprintf(p->message, sizeof p->message, "%s", why);
    p->dirty = true;
}

int gs__dra_admit(struct gs_agent *a, struct gs__pod *p, char *why, size_t wl)
{
    if (!json_array_size(pod_claims(p))) return 0;
    struct gs__dra *d = state(p);
    if (!d) return -1;
    if (d->prepared) return 0;
    if (d->waiting && gs__mono_ns() < d->next_try_ns) return 1;
    int rc = resolve(a, p, d, why, wl);
    if (rc < 0) return -1;
    if (rc > 0) {
        note_wait(a, p, d, false, why);
        return 1;
    }
    json_decref(d->devices);
    d->devices = json_object();
    /* Every driver named by some claim, once. */
    json_t *drivers = json_array();
    size_t i, k;
    const json_t *c, *x;
    json_array_foreach(d->claims, i, c) json_array_foreach(json_object_get(c, "drivers"), k, x) {
        bool seen = false;
        size_t m;
        json_t *y;
        json_array_foreach(drivers, m, y) seen |= json_equal(x, y);
        if (!seen) json_array_append(drivers, (json_t *)x);
    }
    rc = 0;
    json_array_foreach(drivers, i, x) if (!rc) rc = prepare_driver(a, d, json_string_value(x), why, wl);
    json_decref(drivers);
    d->prepared = true; /* from here on an Unprepare is owed, even for a partial success */
    if (!rc) rc = build_env(a, p, d, why, wl) ? 1 : 0;
    const struct gs__pod *q = rc ? NULL : conflict(a, p, d);
    if (q) {
        snprintf(why, wl, "a GPU of its claims is in use by pod %s", q->key);
        rc = 1;
    }
    if (rc) {
        gs__dra_release(a, p);
        note_wait(a, p, d, !q, why);
        return 1;
    }
    d->waiting = false;
    d->last[0] = '\0';
    p->message[0] = '\0';
    gs_log(GS_LOG_INFO, "agent: resource claims prepared", "pod", p->key, NULL);
    return 0;
}

void gs__dra_env(const struct gs__pod *p, const char *ctr, json_t *env)
{
    const json_t *e = p->dra ? json_object_get(p->dra->env, ctr) : NULL;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)e, k, v) json_object_set(env, k, v);
    const char *nvd = gs__jstr(env, "NVIDIA_VISIBLE_DEVICES");
    if (e && nvd && strcmp(nvd, "void")) {
        /* UUIDs, not indices: CUDA's own order need not be NVML's. */
        json_object_set_new(env, "CUDA_VISIBLE_DEVICES", json_string(nvd));
        json_object_set_new(env, "CUDA_DEVICE_ORDER", json_string("PCI_BUS_ID"));
    }
}

void gs__dra_status(const struct gs__pod *p, json_t *obj)
{
    if (!p->dra) return;
    if (p->dra->waiting) {
        gs__pod_set_condition(obj, "ResourceClaimsPrepared", "False", "WaitingForResourceClaims", p->dra->last);
    } else if (p->dra->prepared) {
        gs__pod_set_condition(obj, "ResourceClaimsPrepared", "True", NULL, NULL);
        /* The wait's message came from here: it must not outlive the wait. */
        if (!p->message[0]) json_object_del(json_object_get(obj, "status"), "message");
    }
}

/*--- Unprepare ---*/

static bool claim_in_use(struct gs_agent *a, const struct gs__pod *p, const char *uid)
{
    for (size_t i = 0; i < a->npods; i++) {
        const struct gs__pod *q = a->pods[i];
        if (q == p || !q->dra || !q->dra->prepared || q->terminating) continue;
        size_t j;
        const json_t *c;
        json_array_foreach(q->dra->claims, j, c) if (!strcmp(gs__jstr(c, "uid"), uid)) return true;
    }
    return false;
}

void gs__dra_release(struct gs_agent *a, struct gs__pod *p)
{
    struct gs__dra *d = p->dra;
    if (!d || !d->prepared) return;
    d->prepared = false;
    size_t i, k;
    const json_t *c, *x;
    json_array_foreach(d->claims, i, c) {
        const char *uid = gs__jstr(c, "uid");
        if (claim_in_use(a, p, uid)) continue; /* a shared claim: the last pod here unprepares it */
        json_array_foreach(json_object_get(c, "drivers"), k, x) {
            char ep[1200], err[512] = "";
            bool v1 = true;
            struct gs_drap_claim_ref ref = {gs__jstr(c, "namespace"), gs__jstr(c, "name"), uid};
            json_t *ans = NULL;
            int rc = a->o.dra_registry_dir ? gs_drap_kubelet_find(a->o.dra_registry_dir, json_string_value(x), ep,
                                                                  sizeof ep, &v1, err, sizeof err)
                                           : GS_ENOENT;
            if (!rc) rc = gs_drap_kubelet_unprepare(ep, v1, &ref, 1, PREPARE_TIMEOUT_MS, &ans, err, sizeof err);
            const char *e = gs__jstr(json_object_get(ans, uid), "error");
            if (!rc && e && *e) snprintf(err, sizeof err, "%s", e), rc = GS_EIO;
            json_decref(ans);
            if (rc)
                gs__pod_event(a, p, NULL, "Warning", "FailedUnprepareDynamicResources", "claim %s: plugin %s: %s",
                              ref.name, json_string_value(x), err[0] ? err : gs_strerror(rc));
            else gs_log(GS_LOG_INFO, "agent: resource claim unprepared", "pod", p->key, "claim", ref.name, NULL);
        }
    }
}

/*--- Checkpoint ---*/

void gs__dra_save(const struct gs__pod *p, json_t *doc)
{
    if (p->dra && p->dra->prepared && p->dra->claims)
        json_object_set(doc, "draClaims", p->dra->claims);
}

void gs__dra_recover(struct gs__pod *p, const json_t *doc)
{
    const json_t *c = json_object_get(doc, "draClaims");
    if (!json_is_array(c)) return;
    struct gs__dra *d = state(p);
    if (!d) return;
    d->claims = json_incref((json_t *)c);
    d->prepared = true;
}
