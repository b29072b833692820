/*
 * agent_slices.c - the agent publishes its node's DRA ResourceSlices
 * (discovery/resourceslice.h) to the server and keeps them true.
 *
 * Every couple of seconds, and at once when GPU health changed, the loop
 * builds the slices from the inventory (GPUs, MIG layout) and the health
 * machine (taints) and compares them with what it last published. Only a
 * change is written: the pool generation goes up by one, every slice is
 * created or replaced, and slices of this node and driver that are no longer
 * produced (fewer devices after a MIG change) are deleted. At start the
 * agent reads the slices the server holds for its node: identical content
 * keeps their generation (a restart writes nothing), anything else is
 * published one generation above the highest seen, so consumers that keep
 * only the newest generation never mix the old and the new view.
 *
 * Whether the node publishes at all follows the GPU stack's policy
 * (gs__stack_dra): always without a policy, under a ClusterPolicy only when
 * its draDriver is enabled (else that is the device-plugin path), always
 * under a GPUCluster. When publishing stops the node's slices are deleted.
 * Loop thread only.
 */
#include "agent/agent_int.h"
#include "control/resources.h"
#include "core/log.h"
#include "discovery/exporter.h"
#include "discovery/health.h"
#include "discovery/resourceslice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLICES_PERIOD_NS (2000LL * 1000000)
#define SLICES_RETRY_NS (1000LL * 1000000)

struct gs__slices {
    bool started;            /* the server's slices were read once */
    int64_t generation;
    json_t *last;            /* what was last published (array), NULL before */
    uint64_t unhealthy;      /* the mask since[] describes */
    int64_t since_s[GS_DISC_MAX_GPUS];
    int64_t next_ns;
};

static const struct gs_api_resource *slices_res(void)
{
    return gs_api_resource_find("resource.k8s.io", "v1", "resourceslices");
}

/* Xids that mean the GPU is gone until reset (double-bit ECC, off the bus,
 * uncontained ECC): NoExecute, so consumers are evicted, not only kept away. */
static bool fatal_xid(uint64_t x)
{
    return x == 48 || x == 79 || x == 95;
}

static void health_of(struct gs_agent *a, struct gs__slices *s, struct gs_slice_health *h)
{
    memset(h, 0, sizeof *h);
    h->unhealthy = a->unhealthy;
    int64_t now = gs__wall_s();
    for (int i = 0; i < a->inv.n_gpus && i < GS_DISC_MAX_GPUS; i++) {
        bool bad = a->unhealthy >> i & 1;
        if (bad && !(s->unhealthy >> i & 1)) s->since_s[i] = now; /* when it went bad, kept while it stays */
        h->since_s[i] = s->since_s[i];
        struct gs_health_gpu hg;
        if (bad && a->exp && gs_health_get(gs_exporter_health(a->exp), a->inv.gpus[i].index, &hg) == 0 &&
            (!hg.answering || fatal_xid(hg.last_xid)))
            h->fatal |= 1ull << i;
    }
    s->unhealthy = a->unhealthy;
}

static const char *name_of(const json_t *o)
{
    return gs__jstr(json_object_get(o, "metadata"), "name");
}

/* The server's slices of this node and driver (a new array), or NULL on error. */
static json_t *server_slices(struct gs_agent *a)
{
    char fs[256];
    snprintf(fs, sizeof fs, "spec.nodeName=%s,spec.driver=%s", a->node, GS_DRA_NVIDIA_DRIVER);
    json_t *list = NULL;
    if (gs_client_list(a->cl, slices_res(), NULL, NULL, fs, false, &list)) {
        json_decref(list);
        return NULL;
    }
    json_t *items = json_incref(json_object_get(list, "items"));
    json_decref(list);
    return json_is_array(items) ? items : (json_decref(items), json_array());
}

/* Creates or replaces each slice of want, then deletes those of have that want lacks. */
static int write_slices(struct gs_agent *a, const json_t *want, const json_t *have)
{
    const struct gs_api_resource *r = slices_res();
    size_t i, j;
    json_t *w, *h;
    json_array_foreach(want, i, w) {
        const json_t *cur = NULL;
        json_array_foreach(have, j, h) if (!strcmp(name_of(h) ? name_of(h) : "", name_of(w))) cur = h;
        json_t *obj = json_deep_copy(w), *out = NULL;
        int err;
        if (cur) {
            json_object_set(json_object_get(obj, "metadata"), "resourceVersion",
                            json_object_get(json_object_get(cur, "metadata"), "resourceVersion"));
            err = gs_client_update(a->cl, r, NULL, name_of(w), NULL, obj, &out);
        } else {
            err = gs_client_create(a->cl, r, NULL, obj, &out);
        }
        json_decref(obj);
        if (err) {
            gs_log(GS_LOG_WARN, "agent: cannot write a ResourceSlice", "node", a->node, "slice", name_of(w), "error",
                   gs_strerror(err), "message", gs_client_status_message(out), NULL);
            json_decref(out);
            return err;
        }
        json_decref(out);
    }
    json_array_foreach(have, j, h) {
        bool wanted = false;
        json_array_foreach(want, i, w) wanted |= !strcmp(name_of(h) ? name_of(h) : "", name_of(w));
        if (wanted || !name_of(h)) continue;
        int err = gs_client_delete(a->cl, r, NULL, name_of(h), NULL);
        if (err && err != GS_ENOENT) return err;
    }
    return 0;
}

static json_t *build(struct gs_agent *a, bool want_any, int64_t gen, const struct gs_slice_health *h,
                     struct gs_diags *d)
{
    return want_any ? gs_resourceslices_build_health(&a->inv, a->node, gen, a->o.dra_partitionable, h, d)
                    : json_array();
}

static int sync_slices(struct gs_agent *a, struct gs__slices *s)
{
    int dra = gs__stack_dra(a);
    if (dra < 0) return GS_EBUSY; /* which policy governs the node is not known yet */
    bool want_any = dra == 1;
    struct gs_slice_health h;
    health_of(a, s, &h);
    struct gs_diags d = {0};
    json_t *want = NULL, *have = NULL;
    bool changed = false;
    int err = 0;
    if (!s->started) { /* what the server holds: its generation kept when it says the same */
        if (!(have = server_slices(a))) return GS_EIO;
        if (want_any) {
            err = gs_resourceslices_next(have, &a->inv, a->node, a->o.dra_partitionable, &h, &want, &changed, &d);
        } else {
            want = json_array();
            changed = json_array_size(have) > 0;
        }
        if (!err && want_any && json_array_size(want))
            s->generation = json_integer_value(json_object_get(
                json_object_get(json_object_get(json_array_get(want, 0), "spec"), "pool"), "generation"));
    } else {
        if (!(want = build(a, want_any, s->generation, &h, &d))) err = GS_EINVAL;
        else if (!gs_resourceslices_same(s->last, want)) {
            json_decref(want); /* new content: a new generation, so no consumer mixes the two */
            want = build(a, want_any, s->generation + 1, &h, &d);
            changed = true;
            if (!want) err = GS_EINVAL;
            else if (!(have = server_slices(a))) err = GS_EIO;
        }
    }
    if (err) {
        if (d.n) gs_log(GS_LOG_WARN, "agent: cannot build ResourceSlices", "node", a->node, "why", d.v[0].msg, NULL);
        gs_diags_free(&d);
        json_decref(want);
        json_decref(have);
        return err;
    }
    if (changed && (err = write_slices(a, want, have))) { /* tried again next time, at the same generation */
        json_decref(want);
        json_decref(have);
        return err;
    }
    if (changed && s->started) s->generation++;
    if (changed) {
        char gen[24];
        snprintf(gen, sizeof gen, "%lld", (long long)s->generation);
        gs_log(GS_LOG_INFO, "agent: ResourceSlices published", "node", a->node, "generation", gen, "slices",
               json_array_size(want) ? "some" : "none", NULL);
    }
    s->started = true;
    json_decref(s->last);
    s->last = want;
    json_decref(have);
    return 0;
}

void gs__slices_tick(struct gs_agent *a, int64_t now_ns, bool now)
{
    if (a->o.no_resource_slices) return;
    if (!a->slices && !(a->slices = calloc(1, sizeof *a->slices))) return;
    struct gs__slices *s = a->slices;
    if (!now && now_ns < s->next_ns) return;
    int err = sync_slices(a, s);
    s->next_ns = now_ns + (err ? SLICES_RETRY_NS : SLICES_PERIOD_NS);
}

void gs__slices_free(struct gs_agent *a)
{
    if (!a->slices) return;
    json_decref(a->slices->last);
    free(a->slices);
    a->slices = NULL;
}
