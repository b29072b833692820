/*
 * queue_status.c - per-queue status on the queue objects; see queue_status.h.
 */
#include "loops/queue_status.h"

#include "control/resources.h"
#include "core/error.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define DEFAULT_INTERVAL_NS (2 * 1000LL * 1000 * 1000)
#define MAX_PENDING_LISTED 10

void gs_qstatus_init(struct gs_qstatus *q) { *q = (struct gs_qstatus){.written = json_object()}; }

void gs_qstatus_free(struct gs_qstatus *q)
{
    json_decref(q->written);
    q->written = NULL;
}

/*--- Building ---*/

static void rfc3339(double t, char *buf, size_t len)
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* A Kubernetes quantity for v units of resource name: whole units plain
 * (memory in Gi when exact), fractions in milli-units. */
static json_t *quantity(const char *name, double v)
{
    long long milli = llround(v * 1000.0);
    char buf[64];
    if (milli % 1000) {
        snprintf(buf, sizeof buf, "%lldm", milli);
    } else {
        long long units = milli / 1000, gi = 1LL << 30;
        if (!strcmp(name, "memory") && units && units % gi == 0) snprintf(buf, sizeof buf, "%lldGi", units / gi);
        else snprintf(buf, sizeof buf, "%lld", units);
    }
    return json_string(buf);
}

static json_t *quantities(const json_t *res)
{
    json_t *o = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)res, k, v) json_object_set_new(o, k, quantity(k, json_number_value(v)));
    return o;
}

static double round_to(double v, double step) { return round(v / step) * step; }

static json_t *pending_list(const json_t *pending, double clock_s, double wall_s)
{
    json_t *arr = json_array();
    size_t i;
    json_t *p;
    json_array_foreach(pending, i, p) {
        if (i >= MAX_PENDING_LISTED) break;
        json_t *o = json_pack("{s:O?, s:O?, s:O?, s:O?}", "workload", json_object_get(p, "workload"), "position",
                              json_object_get(p, "position"), "gpus", json_object_get(p, "gpus"), "reason",
                              json_object_get(p, "reason"));
        if (!o) continue;
        double est = json_number_value(json_object_get(p, "estimatedStart"));
        if (json_object_get(p, "estimatedStart") && est >= 0) {
            char ts[32];
            /* Never in the past: a workload that fits now starts "now". */
            rfc3339(wall_s + (est > clock_s ? est - clock_s : 0), ts, sizeof ts);
            json_object_set_new(o, "estimatedStart", json_string(ts));
        }
        if (json_is_true(json_object_get(p, "reservation"))) json_object_set_new(o, "reservation", json_true());
        json_array_append_new(arr, o);
    }
    return arr;
}

/* What neither Kueue nor Volcano report, common to both kinds. */
static json_t *admission_block(const json_t *e, double clock_s, double wall_s)
{
    json_t *a = json_object();
    static const char *const res_fields[] = {"nominal", "borrowed", "lent", "usage", "fairShare"};
    for (size_t i = 0; i < sizeof res_fields / sizeof *res_fields; i++) {
        const json_t *r = json_object_get(e, res_fields[i]);
        if (json_is_object(r)) json_object_set_new(a, res_fields[i], quantities(r));
    }
    json_object_set_new(a, "decayedGpuHours",
                        json_real(round_to(json_number_value(json_object_get(e, "decayedGpuHours")), 0.1)));
    json_object_set_new(a, "weightedShare",
                        json_real(round_to(json_number_value(json_object_get(e, "weightedShare")), 0.001)));
    json_object_set_new(a, "preemptions", json_integer(json_integer_value(json_object_get(e, "preemptions"))));
    json_object_set_new(a, "evictionsCaused",
                        json_integer(json_integer_value(json_object_get(e, "evictionsCaused"))));
    const json_t *pending = json_object_get(e, "pending");
    if (json_is_array(pending)) json_object_set_new(a, "pending", pending_list(pending, clock_s, wall_s));
    return a;
}

static json_t *cluster_queue_status(const json_t *e)
{
    json_int_t pending = json_integer_value(json_object_get(e, "pendingWorkloads"));
    json_int_t admitted = json_integer_value(json_object_get(e, "admittedWorkloads"));
    double share = json_number_value(json_object_get(e, "weightedShare"));
    /* Admission reserves quota and admits in one step, so reserving = admitted. */
    return json_pack("{s:I, s:I, s:I, s:{s:I}, s:[{s:s, s:s, s:s, s:s}]}", "pendingWorkloads", pending,
                     "reservingWorkloads", admitted, "admittedWorkloads", admitted, "fairSharing", "weightedShare",
                     (json_int_t)llround(share * 1000.0), "conditions", "type", "Active", "status", "True", "reason",
                     "Ready", "message", "Can admit new workloads");
}

static json_t *volcano_queue_status(const json_t *e)
{
    json_t *s = json_pack("{s:s, s:I, s:I}", "state", "Open", "pending",
                          json_integer_value(json_object_get(e, "pendingWorkloads")), "running",
                          json_integer_value(json_object_get(e, "admittedWorkloads")));
    const json_t *usage = json_object_get(e, "usage");
    if (s && json_is_object(usage)) json_object_set_new(s, "allocated", quantities(usage));
    return s;
}

json_t *gs_qstatus_build(const json_t *entry, double clock_s, double wall_s)
{
    const char *kind = json_string_value(json_object_get(entry, "kind"));
    json_t *s = NULL;
    if (kind && !strcmp(kind, "ClusterQueue")) s = cluster_queue_status(entry);
    else if (kind && !strcmp(kind, "Queue")) s = volcano_queue_status(entry);
    if (s) json_object_set_new(s, "admission", admission_block(entry, clock_s, wall_s));
    return s;
}

/*--- Writing ---*/

static int store_key(const json_t *entry, char *buf, size_t len)
{
    const char *kind = json_string_value(json_object_get(entry, "kind"));
    const char *name = json_string_value(json_object_get(entry, "name"));
    const struct gs_api_resource *r =
        !kind || !name ? NULL
        : !strcmp(kind, "ClusterQueue") ? gs_api_resource_by_kind("kueue.x-k8s.io/v1beta1", "ClusterQueue")
        : !strcmp(kind, "Queue")        ? gs_api_resource_by_kind("scheduling.gpusched.io/v1alpha1", "Queue")
                                        : NULL;
    if (!r) return GS_ENOENT;
    int n = gs_api_key(r, NULL, name, buf, len);
    return n < 0 || (size_t)n >= len ? GS_EINVAL : 0;
}

/* The condition of type t in conds, or NULL. */
static json_t *find_cond(const json_t *conds, const char *t)
{
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c) {
        const char *ct = json_string_value(json_object_get(c, "type"));
        if (ct && !strcmp(ct, t)) return c;
    }
    return NULL;
}

struct put_ctx {
    const json_t *status; /* built, conditions without times */
    const char *now_ts;
    bool changed;
};

/* Sets status on a copy of cur; a condition whose status did not change
 * keeps its lastTransitionTime, as Kubernetes conditions do. */
static int put_status(json_t *cur, json_t **out, void *arg)
{
    struct put_ctx *c = arg;
    if (!cur) return GS_ENOENT; /* deleted meanwhile: never re-create it */
    json_t *next = json_deep_copy(cur), *st = json_deep_copy(c->status);
    if (!next || !st) {
        json_decref(next);
        json_decref(st);
        return GS_ENOMEM;
    }
    const json_t *old_conds = json_object_get(json_object_get(cur, "status"), "conditions");
    size_t i;
    json_t *cond;
    json_array_foreach(json_object_get(st, "conditions"), i, cond) {
        const json_t *old = find_cond(old_conds, json_string_value(json_object_get(cond, "type")));
        const json_t *old_ts = json_object_get(old, "lastTransitionTime");
        bool same = old && json_equal(json_object_get(old, "status"), json_object_get(cond, "status"));
        json_object_set_new(cond, "lastTransitionTime",
                            same && json_is_string(old_ts) ? json_copy((json_t *)old_ts) : json_string(c->now_ts));
    }
    json_object_set_new(next, "status", st);
    if (json_equal(next, cur)) {
        json_decref(next);
        return GS_STORE_UNCHANGED;
    }
    *out = next;
    c->changed = true;
    return 0;
}

int gs_qstatus_publish(struct gs_qstatus *q, struct gs_source *src, const json_t *view, int64_t now_ns, bool force)
{
    if (!force && now_ns < q->next_ns) return 0;
    q->next_ns = now_ns + (q->interval_ns > 0 ? q->interval_ns : DEFAULT_INTERVAL_NS);
    double clock_s = json_number_value(json_object_get(view, "time"));
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double wall_s = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    char now_ts[32];
    rfc3339(wall_s, now_ts, sizeof now_ts);
    int written = 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(view, "queues"), i, e) {
        char key[512];
        if (store_key(e, key, sizeof key)) continue;
        json_t *status = gs_qstatus_build(e, clock_s, wall_s);
        if (!status) continue;
        if (json_equal(json_object_get(q->written, key), status)) {
            json_decref(status);
            continue;
        }
        struct put_ctx c = {status, now_ts, false};
        int rc = gs_source_mutate(src, key, "status", put_status, &c, NULL, NULL);
        if (rc == 0) {
            json_object_set_new(q->written, key, status); /* also when unchanged: the store has it */
            written += c.changed;
        } else {
            json_decref(status); /* no object (a cohort's name, or deleted): try again next time */
        }
    }
    return written;
}

/*--- Comparing ---*/

static json_t *without_bookkeeping(const json_t *o)
{
    json_t *c = json_deep_copy(o);
    if (!c) return NULL;
    json_object_del(c, "status");
    json_t *md = json_object_get(c, "metadata");
    json_object_del(md, "resourceVersion");
    json_object_del(md, "generation");
    json_object_del(md, "managedFields");
    return c;
}

bool gs_qstatus_spec_equal(const json_t *a, const json_t *b)
{
    if (!a || !b) return a == b;
    json_t *x = without_bookkeeping(a), *y = without_bookkeeping(b);
    bool eq = x && y && json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return eq;
}
