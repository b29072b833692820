/*
 * agent_mig.c - MIG instances for the pods of this node, chosen the way
 * kubelet's device manager chooses the devices of an extended resource.
 *
 * The scheduler counts extended resources (nvidia.com/mig-1g.10gb: 7 on this
 * node, 2 used) but does not name devices for them, so the node picks: free
 * instances of the requested profile, lowest GPU index first, then in the
 * order the GPU lists its instances. "Free" means on a healthy GPU and not
 * held by another live pod here; a pod holds its instances from its start
 * until its processes are gone (holds_devices in agent_pods.c), so an
 * instance is never handed to two running pods. The UUIDs reach the
 * processes as NVIDIA_VISIBLE_DEVICES (what NVIDIA's device plugin returns
 * from Allocate under the envvar strategy) and CUDA_VISIBLE_DEVICES.
 *
 * Single strategy: nvidia.com/gpu stands for MIG devices when the GPUs are
 * partitioned. The scheduler cache then offers each instance as a slot past
 * the physical GPUs, and gpusched.io/devices names such a slot by its number
 * ("4" on a four-GPU node); each of those numbers here means "one MIG
 * instance", chosen like a mixed-strategy one.
 *
 * The choice is written into the pod's checkpoint (pod.json, "mig"), so an
 * agent that restarts re-adopts the running pod with the same instances and
 * keeps them out of later choices. Pods whose instances are taken wait, as
 * for whole GPUs (start_pod in agent_pods.c): the holder may be a pod that
 * was deleted but whose processes are still in their grace period.
 */
#include "agent/agent_int.h"
#include "core/log.h"
#include "discovery/outputs.h" /* enum gs_mig_strategy */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RES_MIG_PREFIX "nvidia.com/mig-"
#define RES_GPU "nvidia.com/gpu"

/*--- Requests ---*/

static long ctr_res(const json_t *c, const char *name)
{
    json_t *res = json_object_get(c, "resources");
    const char *v = gs__jstr(json_object_get(res, "limits"), name);
    if (!v) v = gs__jstr(json_object_get(res, "requests"), name);
    return v ? atol(v) : 0;
}

static long pod_res(const json_t *pod, const char *name)
{
    long n = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c) n += ctr_res(c, name);
    return n;
}

/* Adds count to the request named res, keeping the list sorted by name. */
static int add_req(struct gs__mig_req *reqs, int n, int max, const char *res, long count)
{
    int i = 0;
    while (i < n && strcmp(reqs[i].resource, res) < 0) i++;
    if (i < n && !strcmp(reqs[i].resource, res)) {
        reqs[i].count += (int)count;
        return n;
    }
    if (n == max || strlen(res) >= sizeof reqs[0].resource) return n;
    memmove(&reqs[i + 1], &reqs[i], (size_t)(n - i) * sizeof reqs[0]);
    memset(&reqs[i], 0, sizeof reqs[i]);
    snprintf(reqs[i].resource, sizeof reqs[i].resource, "%s", res);
    snprintf(reqs[i].profile, sizeof reqs[i].profile, "%s", res + strlen(RES_MIG_PREFIX));
    reqs[i].count = (int)count;
    return n + 1;
}

int gs__mig_pod_reqs(const json_t *pod, struct gs__mig_req *reqs, int max)
{
    int n = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c) {
        json_t *res = json_object_get(c, "resources");
        json_t *src = json_object_size(json_object_get(res, "limits")) ? json_object_get(res, "limits")
                                                                       : json_object_get(res, "requests");
        const char *k;
        json_t *v;
        json_object_foreach(src, k, v) {
            if (strncmp(k, RES_MIG_PREFIX, strlen(RES_MIG_PREFIX)) || !k[strlen(RES_MIG_PREFIX)]) continue;
            long count = ctr_res(c, k);
            if (count > 0) n = add_req(reqs, n, max, k, count > 4096 ? 4096 : count);
        }
    }
    return n;
}

/*--- The choice ---*/

static const char *used_by(const struct gs__mig_pick_in *in, const char *uuid)
{
    for (size_t i = 0; i < in->nused; i++)
        if (!strcmp(in->used[i].uuid, uuid)) return in->used[i].owner;
    return NULL;
}

static bool in_hold(const struct gs__mig_hold *h, const char *uuid)
{
    for (int i = 0; i < h->n; i++)
        if (!strcmp(h->v[i].uuid, uuid)) return true;
    return false;
}

/* Inventory positions by NVML index, so "lowest GPU index" does not depend on
 * the order the backend listed them in. */
static int gpu_order(const struct gs_inventory *inv, int *order)
{
    int n = inv->n_gpus < GS_DISC_MAX_GPUS ? inv->n_gpus : GS_DISC_MAX_GPUS;
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && inv->gpus[order[j - 1]].index > inv->gpus[i].index) order[j] = order[j - 1], j--;
        order[j] = i;
    }
    return n;
}

struct tally {
    int chosen, exist, sick, held;
    const char *holder;
};

static void pick_one(const struct gs__mig_pick_in *in, const struct gs__mig_req *r, const int *order, int ngpu,
                     struct gs__mig_hold *h, struct tally *t)
{
    for (int o = 0; o < ngpu; o++) {
        const struct gs_disc_gpu *g = &in->inv->gpus[order[o]];
        if (!g->mig_enabled) continue;
        for (int k = 0; k < g->n_mig && k < GS_DISC_MAX_MIG; k++) {
            const struct gs_disc_mig *m = &g->mig[k];
            if (r->profile[0] && strcmp(m->profile, r->profile)) continue;
            t->exist++;
            const char *by;
            if (in->unhealthy >> order[o] & 1) t->sick++;
            else if (in_hold(h, m->uuid)) continue; /* an earlier request of this pod has it */
            else if ((by = used_by(in, m->uuid))) t->held++, t->holder = by;
            else if (t->chosen < r->count) {
                struct gs__mig_dev *d = &h->v[h->n++];
                snprintf(d->uuid, sizeof d->uuid, "%s", m->uuid);
                snprintf(d->profile, sizeof d->profile, "%s", m->profile);
                snprintf(d->parent, sizeof d->parent, "%s", g->uuid);
                snprintf(d->resource, sizeof d->resource, "%s", r->resource);
                d->gpu = g->index;
                t->chosen++;
            }
        }
    }
}

int gs__mig_pick(const struct gs__mig_pick_in *in, struct gs__mig_hold **out, char *why, size_t wl)
{
    *out = NULL;
    size_t total = 0;
    for (int i = 0; i < in->nreq; i++) total += in->reqs[i].count > 0 ? (size_t)in->reqs[i].count : 0;
    struct gs__mig_hold *h = calloc(1, sizeof *h + (total ? total : 1) * sizeof h->v[0]);
    if (!h) return snprintf(why, wl, "out of memory"), GS_ENOMEM;
    int order[GS_DISC_MAX_GPUS];
    int ngpu = gpu_order(in->inv, order);
    for (int i = 0; i < in->nreq; i++) {
        const struct gs__mig_req *r = &in->reqs[i];
        struct tally t = {0};
        if (r->count <= 0) continue;
        pick_one(in, r, order, ngpu, h, &t);
        if (t.chosen == r->count) continue;
        free(h);
        int avail = t.exist - t.sick - t.held;
        snprintf(why, wl,
                 "requested number of devices unavailable for %s: requested %d, available %d (node has %d%s, %d on "
                 "unhealthy GPUs, %d held by other pods%s%s)",
                 r->resource, r->count, avail < 0 ? 0 : avail, t.exist, r->profile[0] ? "" : " MIG instances", t.sick,
                 t.held, t.holder ? ", e.g. " : "", t.holder ? t.holder : "");
        /* Enough healthy instances exist: a holder may be on its way out. */
        return t.exist - t.sick >= r->count && t.held > 0 ? GS_EBUSY : GS_ERANGE;
    }
    *out = h;
    return 0;
}

/*--- The agent's side ---*/

static bool node_has_mig(const struct gs_agent *a)
{
    for (int i = 0; i < a->inv.n_gpus; i++)
        if (a->inv.gpus[i].mig_enabled && a->inv.gpus[i].n_mig > 0) return true;
    return false;
}

bool gs__mig_slot_token(const struct gs_agent *a, const char *t)
{
    if (!t[0] || strlen(t) > 6 || strspn(t, "0123456789") != strlen(t)) return false;
    return atoi(t) >= a->gpus.n && node_has_mig(a);
}

/* MIG devices of the single strategy that gpusched.io/devices names. */
static int single_slots(const struct gs_agent *a, const struct gs__pod *p)
{
    if (!p->devices || !*p->devices) {
        /* Bound without the scheduler's choice: under the single strategy on a
         * partitioned node, nvidia.com/gpu can only mean MIG devices. */
        if (a->mig_strategy != GS_MIG_SINGLE || !node_has_mig(a) || !p->obj) return 0;
        long n = pod_res(p->obj, RES_GPU);
        return n > 0 && n <= 4096 ? (int)n : 0;
    }
    char buf[2048];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", p->devices);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) n += gs__mig_slot_token(a, t);
    return n;
}

/* Instances held by live pods other than self. Caller frees *used. */
static size_t collect_used(const struct gs_agent *a, const struct gs__pod *self, struct gs__mig_used **used)
{
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < a->npods; i++) {
        const struct gs__pod *q = a->pods[i];
        if (q != self && q->holds_devices && q->mig) cap += (size_t)q->mig->n;
    }
    *used = cap ? calloc(cap, sizeof **used) : NULL;
    for (size_t i = 0; *used && i < a->npods; i++) {
        const struct gs__pod *q = a->pods[i];
        if (q == self || !q->holds_devices || !q->mig) continue;
        for (int k = 0; k < q->mig->n; k++) (*used)[n++] = (struct gs__mig_used){q->mig->v[k].uuid, q->key};
    }
    return n;
}

int gs__mig_admit(struct gs_agent *a, struct gs__pod *p, char *why, size_t wl)
{
    free(p->mig);
    p->mig = NULL;
    struct gs__mig_req reqs[GS__MIG_RES_MAX + 1];
    int n = p->obj ? gs__mig_pod_reqs(p->obj, reqs, GS__MIG_RES_MAX) : 0;
    int single = single_slots(a, p);
    if (single) {
        reqs[n] = (struct gs__mig_req){.count = single};
        snprintf(reqs[n].resource, sizeof reqs[n].resource, "%s", RES_GPU);
        n++;
    }
    if (!n) return 0;
    struct gs__mig_used *used = NULL;
    size_t nused = collect_used(a, p, &used);
    struct gs__mig_pick_in in = {&a->inv, a->unhealthy, used, nused, reqs, n};
    int rc = gs__mig_pick(&in, &p->mig, why, wl);
    free(used);
    if (rc) return rc == GS_EBUSY ? 1 : -1;
    char list[1024];
    size_t w = 0;
    for (int k = 0; k < p->mig->n && w < sizeof list; k++)
        w += (size_t)snprintf(list + w, sizeof list - w, "%s%s", k ? "," : "", p->mig->v[k].uuid);
    gs_log(GS_LOG_INFO, "agent: MIG instances chosen", "pod", p->key, "instances", list, NULL);
    return 0;
}

void gs__mig_env(const struct gs__pod *p, json_t *env)
{
    if (!p->mig || !p->mig->n) return;
    const char *nvd = gs__jstr(env, "NVIDIA_VISIBLE_DEVICES");
    bool whole = p->nslots > 0 && nvd && *nvd && strcmp(nvd, "void");
    size_t len = (whole ? strlen(nvd) + 1 : 0) + (size_t)p->mig->n * (sizeof p->mig->v[0].uuid + 1) + 1;
    char *v = malloc(len);
    if (!v) return;
    size_t w = (size_t)snprintf(v, len, "%s", whole ? nvd : "");
    for (int k = 0; k < p->mig->n; k++) w += (size_t)snprintf(v + w, len - w, "%s%s", w ? "," : "", p->mig->v[k].uuid);
    json_object_set_new(env, "NVIDIA_VISIBLE_DEVICES", json_string(v));
    json_object_set_new(env, "CUDA_VISIBLE_DEVICES", json_string(v));
    free(v);
}

/*--- Checkpoint and status ---*/

void gs__mig_save(const struct gs__pod *p, json_t *doc)
{
    if (!doc || !p->mig) return;
    json_t *arr = json_array();
    for (int k = 0; k < p->mig->n; k++) {
        const struct gs__mig_dev *d = &p->mig->v[k];
        json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:i,s:s}", "uuid", d->uuid, "profile", d->profile, "parent",
                                             d->parent, "gpu", d->gpu, "resource", d->resource));
    }
    json_object_set_new(doc, "mig", arr);
}

void gs__mig_recover(struct gs__pod *p, const json_t *doc)
{
    json_t *arr = json_object_get(doc, "mig"), *e;
    size_t n = json_array_size(arr), i;
    free(p->mig);
    p->mig = NULL;
    if (!n || !(p->mig = calloc(1, sizeof *p->mig + n * sizeof p->mig->v[0]))) return;
    json_array_foreach(arr, i, e) {
        const char *uuid = gs__jstr(e, "uuid");
        if (!uuid || !*uuid) continue;
        struct gs__mig_dev *d = &p->mig->v[p->mig->n++];
        snprintf(d->uuid, sizeof d->uuid, "%s", uuid);
        snprintf(d->profile, sizeof d->profile, "%s", gs__jstr(e, "profile") ? gs__jstr(e, "profile") : "");
        snprintf(d->parent, sizeof d->parent, "%s", gs__jstr(e, "parent") ? gs__jstr(e, "parent") : "");
        snprintf(d->resource, sizeof d->resource, "%s", gs__jstr(e, "resource") ? gs__jstr(e, "resource") : "");
        d->gpu = (int)json_integer_value(json_object_get(e, "gpu"));
    }
}

void gs__mig_status(const struct gs__pod *p, json_t *status)
{
    /* No start time: refused at admission after its instances were picked; it never held them. */
    if (!p->mig || !p->mig->n || !p->start_time || !json_is_object(status)) return;
    json_t *devs = json_array(), *e;
    size_t i;
    /* Keep whole GPUs; the scheduler's entries for single-strategy slots
     * (numbers, no UUID) and earlier MIG entries are replaced by ours. */
    json_array_foreach(json_object_get(status, "devices"), i, e) {
        const char *u = gs__jstr(e, "uuid");
        if (u && strncmp(u, "MIG-", 4)) json_array_append(devs, e);
    }
    for (int k = 0; k < p->mig->n; k++) {
        const struct gs__mig_dev *d = &p->mig->v[k];
        json_array_append_new(devs, json_pack("{s:i,s:s,s:s,s:s,s:s}", "index", d->gpu, "uuid", d->uuid, "parentUUID",
                                              d->parent, "profile", d->profile, "resource", d->resource));
    }
    json_object_set_new(status, "devices", devs);
}

uint64_t gs__mig_gpu_mask(const struct gs_agent *a, const struct gs__pod *p)
{
    uint64_t m = 0;
    for (int k = 0; p->mig && k < p->mig->n; k++)
        for (int i = 0; i < a->inv.n_gpus && i < 64; i++)
            if (!strcmp(a->inv.gpus[i].uuid, p->mig->v[k].parent)) m |= 1ull << i;
    return m;
}
