/*
 * test_replay_server.c - the replay runs what the server runs: the server's
 * default profile without --policy (gangs start whole), the server's
 * admission loop in front of the queue (quota holds pods back; events carry
 * queue and group), pods already running at the start on exactly their
 * devices, nodes that become schedulable later, --config read as the server
 * reads it, and the one-line warnings for features a profile does not run.
 * Traces are built in memory from Kubernetes documents.
 */
#include "sched/plugin.h"
#include "sim/sim.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "trace_fixture.h" /* trace_nodes */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The registry refers to the placement policies weakly; naming one pulls it in. */
extern const struct gs_plugin gs_plugin_best_fit;
const struct gs_plugin *const test_replay_server_policy = &gs_plugin_best_fit;

/*--- Recording sink ---*/

struct rec_event {
    double t;
    enum gs_sim_event_type type;
    char pod[64], node[64], queue[64], group[64], reason[256];
    uint64_t gpus;
};

struct rec {
    struct rec_event ev[128];
    size_t nev;
};

static void rec_event(void *ctx, const struct gs_sim_event *e)
{
    struct rec *r = ctx;
    assert_true(r->nev < 128);
    struct rec_event *x = &r->ev[r->nev++];
    memset(x, 0, sizeof *x);
    x->t = e->t;
    x->type = e->type;
    x->gpus = e->gpus;
    snprintf(x->pod, sizeof x->pod, "%s", e->pod);
    snprintf(x->node, sizeof x->node, "%s", e->node ? e->node : "");
    snprintf(x->queue, sizeof x->queue, "%s", e->queue ? e->queue : "");
    snprintf(x->group, sizeof x->group, "%s", e->group ? e->group : "");
    snprintf(x->reason, sizeof x->reason, "%s", e->reason ? e->reason : "");
}

/* The first event of type for pod, or NULL. */
static const struct rec_event *find(const struct rec *r, const char *pod, enum gs_sim_event_type type)
{
    for (size_t i = 0; i < r->nev; i++)
        if (r->ev[i].type == type && !strcmp(r->ev[i].pod, pod)) return &r->ev[i];
    return NULL;
}

static double sched_at(const struct rec *r, const char *pod)
{
    const struct rec_event *e = find(r, pod, GS_SIM_SCHEDULED);
    if (!e) fail_msg("pod %s was never scheduled", pod);
    return e->t;
}

/*--- In-memory traces ---*/

static json_t *doc_of(const char *text)
{
    json_error_t err;
    json_t *doc = json_loads(text, 0, &err);
    if (!doc) fail_msg("bad test document: %s: %s", err.text, text);
    return doc;
}

/* A Pod asking for gpus whole GPUs at a priority; labels: a JSON object's members, or "". */
static size_t trace_pod_prio(struct gs_trace *t, const char *name, const char *labels, double arrival,
                             double duration, int gpus, int priority)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\","
             "\"uid\":\"uid-%s\",\"labels\":{%s}},\"spec\":{\"priority\":%d,\"containers\":[{\"name\":\"c\","
             "\"image\":\"x\",\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\","
             "\"nvidia.com/gpu\":\"%d\"},\"limits\":{\"nvidia.com/gpu\":\"%d\"}}}]}}",
             name, name, labels, priority, gpus, gpus);
    json_t *doc = doc_of(text);
    struct gs_pod *p = calloc(1, sizeof *p);
    assert_non_null(p);
    struct gs_diags d = {0};
    int rc = gs_pod_decode(doc, p, &d);
    for (size_t i = 0; i < d.n; i++) print_message("pod %s: %s: %s\n", name, d.v[i].path, d.v[i].msg);
    gs_diags_free(&d);
    json_decref(doc);
    assert_int_equal(rc, 0);
    t->pods = realloc(t->pods, (t->npods + 1) * sizeof *t->pods);
    assert_non_null(t->pods);
    t->pods[t->npods] = (struct gs_trace_pod){.pod = p, .arrival = arrival, .duration = duration};
    return t->npods++;
}

static size_t trace_pod(struct gs_trace *t, const char *name, const char *labels, double arrival, double duration,
                        int gpus)
{
    return trace_pod_prio(t, name, labels, arrival, duration, gpus, 0);
}

static void trace_object(struct gs_trace *t, const char *text)
{
    json_t *doc = doc_of(text);
    struct gs_object *o = NULL;
    struct gs_diags d = {0};
    int rc = gs_object_decode(doc, &o, &d);
    for (size_t i = 0; i < d.n; i++) print_message("object: %s: %s\n", d.v[i].path, d.v[i].msg);
    gs_diags_free(&d);
    json_decref(doc);
    assert_int_equal(rc, 0);
    t->objects = realloc(t->objects, (t->nobjects + 1) * sizeof *t->objects);
    assert_non_null(t->objects);
    t->objects[t->nobjects++] = o;
}

static void podgroup(struct gs_trace *t, const char *name, int min_member)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"kind\":\"PodGroup\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"default\"},\"spec\":{\"minMember\":%d}}",
             name, min_member);
    trace_object(t, text);
}

/* ResourceFlavor "default", ClusterQueue "cq" with gpus GPUs of quota, LocalQueue "lq". */
static void queues(struct gs_trace *t, int gpus)
{
    trace_object(t, "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"ResourceFlavor\","
                    "\"metadata\":{\"name\":\"default\"},\"spec\":{}}");
    char text[1024];
    snprintf(text, sizeof text,
             "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"ClusterQueue\",\"metadata\":{\"name\":\"cq\"},"
             "\"spec\":{\"namespaceSelector\":{},\"resourceGroups\":[{\"coveredResources\":[\"cpu\",\"memory\","
             "\"nvidia.com/gpu\"],\"flavors\":[{\"name\":\"default\",\"resources\":[{\"name\":\"cpu\","
             "\"nominalQuota\":\"64\"},{\"name\":\"memory\",\"nominalQuota\":\"256Gi\"},{\"name\":\"nvidia.com/gpu\","
             "\"nominalQuota\":%d}]}]}]}}",
             gpus);
    trace_object(t, text);
    trace_object(t, "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"LocalQueue\",\"metadata\":{\"name\":"
                    "\"lq\",\"namespace\":\"default\"},\"spec\":{\"clusterQueue\":\"cq\"}}");
}

static int run_policy(const struct gs_trace *t, const char *policy, const char *config, struct rec *r,
                      struct gs_sim_result *res, struct gs_diags *d)
{
    memset(r, 0, sizeof *r);
    struct gs_sim_sink sink = {.event = rec_event, .ctx = r};
    struct gs_sim_opts o = {.mode = GS_SIM_REPLAY, .policy = policy, .seed = 42, .config_path = config};
    int rc = gs_sim_run(t, &o, &sink, res, d);
    for (size_t i = 0; i < d->n; i++) print_message("diag: %s: %s\n", d->v[i].path, d->v[i].msg);
    return rc;
}

static int run(const struct gs_trace *t, const char *policy, struct rec *r, struct gs_sim_result *res)
{
    struct gs_diags d = {0};
    int rc = run_policy(t, policy, NULL, r, res, &d);
    gs_diags_free(&d);
    return rc;
}

/*--- Tests ---*/

/* The workload: two gangs whose second members arrive 100 s after
 * the first, on a node with room for two pods. Kube's default plugins
 * (--policy) start one member of each at once: two partial gangs. The
 * server's profile (no --policy) starts each gang whole, one after the
 * other, and every event names the gang. */
static void gang_trace(struct gs_trace *t)
{
    trace_nodes(t, 1, 2);
    podgroup(t, "a", 2);
    podgroup(t, "b", 2);
    trace_pod(t, "a-0", "\"scheduling.x-k8s.io/pod-group\":\"a\"", 0, 50, 1);
    trace_pod(t, "b-0", "\"scheduling.x-k8s.io/pod-group\":\"b\"", 0, 50, 1);
    trace_pod(t, "a-1", "\"scheduling.x-k8s.io/pod-group\":\"a\"", 100, 50, 1);
    trace_pod(t, "b-1", "\"scheduling.x-k8s.io/pod-group\":\"b\"", 100, 50, 1);
}

static void test_server_profile_gangs(void **state)
{
    (void)state;
    struct gs_trace t = {0};
    gang_trace(&t);
    struct rec r;
    struct gs_sim_result res;
    assert_int_equal(run(&t, NULL, &r, &res), 0);
    assert_string_equal(res.policy, GS_SIM_PROFILE);
    assert_int_equal(res.pods_scheduled, 4);
    /* Each gang whole: its members bound at the same instant, the gangs one after the other. */
    assert_true(sched_at(&r, "default/a-0") == sched_at(&r, "default/a-1"));
    assert_true(sched_at(&r, "default/b-0") == sched_at(&r, "default/b-1"));
    assert_true(sched_at(&r, "default/a-0") >= 100 && sched_at(&r, "default/b-0") >= 100);
    assert_true(sched_at(&r, "default/a-0") != sched_at(&r, "default/b-0"));
    for (size_t i = 0; i < r.nev; i++) {
        const char *want = r.ev[i].pod[8] == 'a' ? "default/a" : "default/b";
        if (strcmp(r.ev[i].group, want)) fail_msg("event %zu of %s: group \"%s\", want %s", i, r.ev[i].pod,
                                                  r.ev[i].group, want);
        assert_string_equal(r.ev[i].queue, ""); /* no admission in this trace */
    }

    /* --policy keeps kube's default plugins: one member of each gang starts alone at 0. */
    assert_int_equal(run(&t, "BestFit", &r, &res), 0);
    assert_true(sched_at(&r, "default/a-0") == 0 && sched_at(&r, "default/b-0") == 0);
    assert_true(sched_at(&r, "default/a-1") >= 100);
    gs_trace_free(&t);
}

/* Quota of 2 GPUs on a node of 4: the third queued pod waits for admission
 * until the first one ends; a pod outside the queues is not held. */
static void test_admission_quota(void **state)
{
    (void)state;
    struct gs_trace t = {0};
    trace_nodes(&t, 1, 4);
    queues(&t, 2);
    const char *lq = "\"kueue.x-k8s.io/queue-name\":\"lq\"";
    trace_pod(&t, "q1", lq, 0, 100, 1);
    trace_pod(&t, "q2", lq, 0, 200, 1);
    trace_pod(&t, "q3", lq, 10, 100, 1);
    trace_pod(&t, "plain", "", 10, 100, 1);
    for (int pass = 0; pass < 2; pass++) { /* the server's profile, then a policy: admission runs in both */
        struct rec r;
        struct gs_sim_result res;
        assert_int_equal(run(&t, pass ? "BestFit" : NULL, &r, &res), 0);
        assert_int_equal(res.pods_scheduled, 4);
        assert_true(sched_at(&r, "default/q1") == 0);
        assert_true(sched_at(&r, "default/q2") == 0);
        assert_true(sched_at(&r, "default/plain") == 10);
        double q3 = sched_at(&r, "default/q3");
        if (q3 < 100 || q3 > 102) fail_msg("q3 scheduled at %g, want when q1 ends (100 s, within a tick)", q3);
        assert_string_equal(find(&r, "default/q3", GS_SIM_SCHEDULED)->queue, "lq");
        assert_string_equal(find(&r, "default/q1", GS_SIM_COMPLETED)->queue, "lq");
        assert_string_equal(find(&r, "default/plain", GS_SIM_SCHEDULED)->queue, "");
        assert_string_equal(find(&r, "default/plain", GS_SIM_SCHEDULED)->group, "");
    }
    gs_trace_free(&t);
}

/* A pod larger than its queue's quota is never admitted: the run ends with
 * a "failed" event saying why (admission's own words) rather than none. */
static void test_never_admitted_logged(void **state)
{
    (void)state;
    struct gs_trace t = {0};
    trace_nodes(&t, 1, 4);
    queues(&t, 2);
    const char *lq = "\"kueue.x-k8s.io/queue-name\":\"lq\"";
    trace_pod(&t, "big", lq, 0, 10, 3);
    trace_pod(&t, "fits", lq, 0, 10, 1);
    struct rec r;
    struct gs_sim_result res;
    assert_int_equal(run(&t, NULL, &r, &res), 0);
    assert_int_equal(res.pods_scheduled, 1);
    assert_null(find(&r, "default/big", GS_SIM_SCHEDULED));
    const struct rec_event *f = find(&r, "default/big", GS_SIM_FAILED);
    assert_non_null(f);
    assert_string_equal(f->queue, "lq");
    if (!strstr(f->reason, "waiting for quota in ClusterQueue cq: nvidia.com/gpu 3 > 2"))
        fail_msg("reason does not say which quota refuses it: %s", f->reason);
    assert_null(strchr(f->reason, '\n'));
    assert_null(find(&r, "default/fits", GS_SIM_FAILED));
    gs_trace_free(&t);
}

/* Admission's preemption within a ClusterQueue (Kueue's LowerPriority): the
 * low-priority workload is evicted for the high one (a "preempted" event),
 * waits for admission again and runs its whole duration after. */
static void test_admission_evicts(void **state)
{
    (void)state;
    struct gs_trace t = {0};
    trace_nodes(&t, 1, 4);
    trace_object(&t, "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"ResourceFlavor\","
                     "\"metadata\":{\"name\":\"default\"},\"spec\":{}}");
    trace_object(&t, "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"ClusterQueue\",\"metadata\":"
                     "{\"name\":\"cq\"},\"spec\":{\"namespaceSelector\":{},\"preemption\":{\"withinClusterQueue\":"
                     "\"LowerPriority\"},\"resourceGroups\":[{\"coveredResources\":[\"cpu\",\"memory\","
                     "\"nvidia.com/gpu\"],\"flavors\":[{\"name\":\"default\",\"resources\":[{\"name\":\"cpu\","
                     "\"nominalQuota\":\"64\"},{\"name\":\"memory\",\"nominalQuota\":\"256Gi\"},{\"name\":"
                     "\"nvidia.com/gpu\",\"nominalQuota\":1}]}]}]}}");
    trace_object(&t, "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"LocalQueue\",\"metadata\":{\"name\":"
                     "\"lq\",\"namespace\":\"default\"},\"spec\":{\"clusterQueue\":\"cq\"}}");
    const char *lq = "\"kueue.x-k8s.io/queue-name\":\"lq\"";
    trace_pod_prio(&t, "low", lq, 0, 5000, 1, 0);
    trace_pod_prio(&t, "high", lq, 1000, 100, 1, 100);
    struct rec r;
    struct gs_sim_result res;
    assert_int_equal(run(&t, NULL, &r, &res), 0);
    const struct rec_event *ev = find(&r, "default/low", GS_SIM_PREEMPTED);
    if (!ev) fail_msg("low was never evicted");
    if (ev->t < 1000 || ev->t > 1001) fail_msg("low evicted at %g, want when high arrives (1000 s)", ev->t);
    assert_non_null(strstr(ev->reason, "evicted by admission"));
    assert_string_equal(ev->queue, "lq");
    double high = sched_at(&r, "default/high");
    assert_true(high >= 1000 && high <= 1001);
    /* low again once high is done, for its whole 5000 s */
    const struct rec_event *again = NULL, *done = find(&r, "default/low", GS_SIM_COMPLETED);
    for (size_t i = 0; i < r.nev; i++)
        if (r.ev[i].type == GS_SIM_SCHEDULED && !strcmp(r.ev[i].pod, "default/low") && r.ev[i].t > 0) again = &r.ev[i];
    if (!again || !done) fail_msg("low was not scheduled again and completed");
    assert_true(again->t >= high + 100 && again->t <= high + 101);
    assert_true(done->t == again->t + 5000);
    assert_int_equal(res.pods_preempted, 1);
    gs_trace_free(&t);
}

/* A Volcano Queue (kept under the gpusched Queue's key, as the server has no
 * resource of its own for it) caps its pods at its capability. */
static void test_volcano_queue(void **state)
{
    (void)state;
    struct gs_trace t = {0};
    trace_nodes(&t, 1, 4);
    trace_object(&t, "{\"apiVersion\":\"scheduling.volcano.sh/v1beta1\",\"kind\":\"Queue\",\"metadata\":"
                     "{\"name\":\"vq\"},\"spec\":{\"weight\":1,\"capability\":{\"nvidia.com/gpu\":\"1\"}}}");
    const char *vq = "\"kueue.x-k8s.io/queue-name\":\"vq\"";
    trace_pod(&t, "v1", vq, 0, 50, 1);
    trace_pod(&t, "v2", vq, 0, 50, 1);
    struct rec r;
    struct gs_sim_result res;
    assert_int_equal(run(&t, NULL, &r, &res), 0);
    assert_int_equal(res.pods_scheduled, 2);
    double a = sched_at(&r, "default/v1"), b = sched_at(&r, "default/v2");
    if (!((a == 0 && b >= 50 && b <= 51) || (b == 0 && a >= 50 && a <= 51)))
        fail_msg("v1 at %g, v2 at %g: want one at 0 and the other when it ends (50 s)", a, b);
    assert_string_equal(find(&r, "default/v2", GS_SIM_SCHEDULED)->queue, "vq");
    gs_trace_free(&t);
}

/* A pod of an undefined queue is held for good, as on the server. */
static void test_unknown_queue_held(void **state)
{
    (void)state;
    struct gs_trace t = {0};
    trace_nodes(&t, 1, 2);
    queues(&t, 2);
    trace_pod(&t, "lost", "\"kueue.x-k8s.io/queue-name\":\"nosuch\"", 0, 10, 1);
    trace_pod(&t, "ok", "\"kueue.x-k8s.io/queue-name\":\"lq\"", 0, 10, 1);
    struct rec r;
    struct gs_sim_result res;
    assert_int_equal(run(&t, NULL, &r, &res), 0);
    assert_int_equal(res.pods_arrived, 2);
    assert_int_equal(res.pods_scheduled, 1);
    assert_null(find(&r, "default/lost", GS_SIM_SCHEDULED));
    assert_true(sched_at(&r, "default/ok") == 0);

    struct gs_sim_opts o = {.mode = GS_SIM_REPLAY, .seed = 42};
    struct gs_diags warn = {0}, d = {0};
    assert_int_equal(gs_sim_check(&t, &o, &warn, &d), 0);
    assert_int_equal(warn.n, 1);
    assert_string_equal(warn.v[0].path, "admission");
    assert_non_null(strstr(warn.v[0].msg, "queue \"nosuch\""));
    assert_non_null(strstr(warn.v[0].msg, "UnknownQueue"));
    gs_diags_free(&warn);
    gs_diags_free(&d);
    gs_trace_free(&t);
}

/* A pod for another scheduler waits for it, as on the server (the replay
 * runs one profile), and the warning says so; --policy schedules every pod. */
static void test_other_scheduler_waits(void **state)
{
    (void)state;
    struct gs_trace t = {0};
    trace_nodes(&t, 1, 2);
    size_t i = trace_pod(&t, "theirs", "", 0, 10, 1);
    free(t.pods[i].pod->scheduler_name);
    t.pods[i].pod->scheduler_name = strdup("volcano");
    trace_pod(&t, "ours", "", 0, 10, 1);
    struct rec r;
    struct gs_sim_result res;
    assert_int_equal(run(&t, NULL, &r, &res), 0);
    assert_int_equal(res.pods_arrived, 2);
    assert_int_equal(res.pods_scheduled, 1);
    assert_null(find(&r, "default/theirs", GS_SIM_SCHEDULED));
    struct gs_sim_opts o = {.mode = GS_SIM_REPLAY};
    struct gs_diags warn = {0}, d = {0};
    assert_int_equal(gs_sim_check(&t, &o, &warn, &d), 0);
    assert_int_equal(warn.n, 1);
    assert_string_equal(warn.v[0].path, "schedulerName");
    assert_non_null(strstr(warn.v[0].msg, "\"volcano\""));
    assert_non_null(strstr(warn.v[0].msg, "\"default-scheduler\""));
    gs_diags_free(&warn);
    assert_int_equal(run(&t, "BestFit", &r, &res), 0);
    assert_int_equal(res.pods_scheduled, 2);
    o.policy = "BestFit";
    assert_int_equal(gs_sim_check(&t, &o, &warn, &d), 0);
    assert_int_equal(warn.n, 0);
    gs_diags_free(&warn);
    gs_diags_free(&d);
    gs_trace_free(&t);
}

/* A pod running at the start holds exactly its devices from before the
 * first instant, and ends `duration` after it started. */
static void test_running_at_start(void **state)
{
    (void)state;
    struct gs_trace t = {0};
    trace_nodes(&t, 1, 2);
    size_t i = trace_pod(&t, "running", "", 0, 100, 1);
    t.pods[i].node = strdup("n1");
    t.pods[i].gpus = 0x2; /* GPU 1 */
    t.pods[i].milli = 1000;
    t.pods[i].started = -40;
    trace_pod(&t, "one", "", 0, 10, 1); /* only GPU 0 is free */
    trace_pod(&t, "two", "", 0, 10, 2); /* waits for both */
    struct rec r;
    struct gs_sim_result res;
    assert_int_equal(run(&t, NULL, &r, &res), 0);
    const struct rec_event *e = find(&r, "default/running", GS_SIM_SCHEDULED);
    assert_non_null(e);
    assert_true(e->t == -40);
    assert_string_equal(e->node, "n1");
    assert_int_equal(e->gpus, 0x2);
    e = find(&r, "default/running", GS_SIM_COMPLETED);
    assert_non_null(e);
    assert_true(e->t == 60); /* started -40, runs 100 */
    e = find(&r, "default/one", GS_SIM_SCHEDULED);
    assert_true(e && e->t == 0 && e->gpus == 0x1);
    e = find(&r, "default/two", GS_SIM_SCHEDULED);
    assert_true(e && e->t == 60 && e->gpus == 0x3);
    assert_int_equal(res.pods_scheduled, 3);
    assert_int_equal(res.pods_arrived, 3);

    /* Errors name the pod, the value and why. */
    free(t.pods[i].node);
    t.pods[i].node = strdup("n9");
    struct gs_diags d = {0};
    assert_int_equal(run_policy(&t, NULL, NULL, &r, &res, &d), GS_EINVAL);
    assert_true(d.n >= 1);
    assert_string_equal(d.v[0].path, "default/running");
    assert_non_null(strstr(d.v[0].msg, "\"n9\""));
    gs_diags_free(&d);
    free(t.pods[i].node);
    t.pods[i].node = strdup("n1");
    t.pods[i].gpus = 0x4; /* GPU 2 of a 2-GPU node */
    assert_int_equal(run_policy(&t, NULL, NULL, &r, &res, &d), GS_EINVAL);
    assert_non_null(strstr(d.v[0].msg, "0x4"));
    gs_diags_free(&d);
    gs_trace_free(&t);
}

/* A node whose GPU stack is still being set up takes no pod before its instant. */
static void test_node_ready_later(void **state)
{
    (void)state;
    struct gs_trace t = {0};
    trace_nodes(&t, 2, 1);
    t.node_ready_at = calloc(2, sizeof *t.node_ready_at);
    assert_non_null(t.node_ready_at);
    t.node_ready_at[1] = 300; /* n2 from 300 s */
    trace_pod(&t, "p1", "", 0, 1000, 1);
    trace_pod(&t, "p2", "", 0, 1000, 1);
    struct rec r;
    struct gs_sim_result res;
    assert_int_equal(run(&t, NULL, &r, &res), 0);
    const struct rec_event *a = find(&r, "default/p1", GS_SIM_SCHEDULED), *b = find(&r, "default/p2", GS_SIM_SCHEDULED);
    assert_true(a && b);
    const struct rec_event *first = a->t <= b->t ? a : b, *second = a->t <= b->t ? b : a;
    assert_true(first->t == 0 && !strcmp(first->node, "n1"));
    assert_true(second->t == 300 && !strcmp(second->node, "n2"));

    t.node_ready_at[1] = -1;
    struct gs_diags d = {0};
    assert_int_equal(run_policy(&t, NULL, NULL, &r, &res, &d), GS_EINVAL);
    assert_string_equal(d.v[0].path, "n2");
    assert_non_null(strstr(d.v[0].msg, "ready at -1 s"));
    gs_diags_free(&d);
    gs_trace_free(&t);
}

/* --config is the server's file: one KubeSchedulerConfiguration, its
 * profile run as it is; a config without Coscheduling gets the gang warning. */
static void test_config_and_warnings(void **state)
{
    (void)state;
    struct gs_trace t = {0};
    gang_trace(&t);
    char path[] = "/tmp/test_replay_server_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *cfg = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                      "profiles:\n- schedulerName: default-scheduler\n";
    assert_int_equal(write(fd, cfg, strlen(cfg)), (ssize_t)strlen(cfg));
    close(fd);
    struct rec r;
    struct gs_sim_result res;
    struct gs_diags d = {0};
    assert_int_equal(run_policy(&t, NULL, path, &r, &res, &d), 0); /* kube's set: partial gangs again */
    gs_diags_free(&d);
    assert_true(sched_at(&r, "default/a-0") == 0 && sched_at(&r, "default/b-0") == 0);

    struct gs_sim_opts o = {.mode = GS_SIM_REPLAY, .config_path = path};
    struct gs_diags warn = {0};
    assert_int_equal(gs_sim_check(&t, &o, &warn, &d), 0);
    assert_int_equal(warn.n, 1);
    assert_string_equal(warn.v[0].path, "gangs");
    assert_non_null(strstr(warn.v[0].msg, "Coscheduling"));
    assert_non_null(strstr(warn.v[0].msg, path));
    assert_null(strchr(warn.v[0].msg, '\n'));
    gs_diags_free(&warn);
    o.config_path = NULL; /* the server's profile runs gangs: nothing to say */
    assert_int_equal(gs_sim_check(&t, &o, &warn, &d), 0);
    assert_int_equal(warn.n, 0);
    o.policy = "BestFit";
    assert_int_equal(gs_sim_check(&t, &o, &warn, &d), 0);
    assert_int_equal(warn.n, 1);
    assert_non_null(strstr(warn.v[0].msg, "--policy BestFit"));
    gs_diags_free(&warn);
    o.mode = GS_SIM_FGD;
    assert_int_equal(gs_sim_check(&t, &o, &warn, &d), 0);
    assert_int_equal(warn.n, 1);
    assert_non_null(strstr(warn.v[0].msg, "--experiment replay"));
    gs_diags_free(&warn);

    /* The server's messages for a file it would refuse. */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("kind: KubeSchedulerConfiguration\n---\nkind: KubeSchedulerConfiguration\n", f);
    fclose(f);
    assert_int_equal(run_policy(&t, NULL, path, &r, &res, &d), GS_EINVAL);
    assert_string_equal(d.v[0].path, path);
    assert_non_null(strstr(d.v[0].msg, "want one KubeSchedulerConfiguration document, found 2"));
    gs_diags_free(&d);
    unlink(path);
    assert_int_equal(run_policy(&t, NULL, path, &r, &res, &d), GS_ENOENT);
    assert_non_null(strstr(d.v[d.n - 1].msg, "file not found"));
    gs_diags_free(&d);
    gs_trace_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_profile_gangs), cmocka_unit_test(test_admission_quota),
        cmocka_unit_test(test_never_admitted_logged),
        cmocka_unit_test(test_unknown_queue_held),   cmocka_unit_test(test_volcano_queue),
        cmocka_unit_test(test_admission_evicts),     cmocka_unit_test(test_other_scheduler_waits),   cmocka_unit_test(test_running_at_start),
        cmocka_unit_test(test_node_ready_later),     cmocka_unit_test(test_config_and_warnings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
