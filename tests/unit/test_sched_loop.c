/*
 * test_sched_loop.c - the scheduler loop on a scratch store, reached through
 * a source (source.h): the Kubernetes behaviours it carries for every
 * transport (schedulingGates, status.nominatedNodeName, a binding that
 * another scheduler won) and the leadership switch (may_write).
 *
 * The loop runs its own thread; the tests write objects straight into the
 * store, wait for what the loop writes back and look at its cache between
 * rounds (gs_sched_loop_inspect). A wrapping source counts the loop's writes
 * and can let "another replica" bind a pod just before the loop's binding.
 */
#include "loops/sched_loop.h"
#include "control/store.h"
#include "core/object.h" /* GS_ANN_DEVICES */
#include "informer/source.h"
#include "sched/cache.h"
#include "tmpdir_fixture.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

/*--- A source that wraps the local one ---*/

struct wrap {
    struct gs_source base;
    struct gs_source *in;
    atomic_int writes;      /* every create, mutate, remove, bind item and preempt */
    const char *steal_key;  /* bind of this key: another scheduler binds it first, to steal_node */
    const char *steal_node;
    /* Cursors in their own number space, as a Kubernetes source's merged
     * stream (source.h): the stream's position is this far from any object's rv. */
    int64_t cursor_offset;
    /* The next fail_binds bind items answer fail_err without writing (an
     * API server's 500, or 429s past the client's retries). */
    atomic_int fail_binds;
    int fail_err;
    const char *fail_list; /* list of this prefix answers GS_EINVAL (a resource the source does not follow) */
};

#define IN(s) (((struct wrap *)(s))->in)
#define W(s) ((struct wrap *)(s))

static int w_list(struct gs_source *s, const char *prefix, gs_store_list_fn fn, void *arg, int64_t *cursor)
{
    if (W(s)->fail_list && !strcmp(prefix, W(s)->fail_list)) return GS_EINVAL;
    int err = gs_source_list(IN(s), prefix, fn, arg, cursor);
    *cursor += W(s)->cursor_offset;
    return err;
}
static int w_events(struct gs_source *s, int64_t *after, const char *prefix, int timeout_ms, const atomic_bool *stop,
                    struct gs_store_event **evs, size_t *n)
{
    int64_t off = W(s)->cursor_offset, at = *after - off;
    assert_true(at >= 0); /* a cursor the loop made up from an object's rv would land below the offset */
    int err = gs_source_events(IN(s), &at, prefix, timeout_ms, stop, evs, n);
    *after = at + off;
    return err;
}
static int w_get(struct gs_source *s, const char *key, json_t **obj, int64_t *rv)
{ return gs_source_get(IN(s), key, obj, rv); }
static int w_create(struct gs_source *s, const char *key, json_t *obj, int64_t *rv)
{
    atomic_fetch_add(&W(s)->writes, 1);
    return gs_source_create(IN(s), key, obj, rv);
}
static int w_mutate(struct gs_source *s, const char *key, const char *sub, gs_store_mutate_fn fn, void *arg,
                    json_t **out, int64_t *rv)
{
    atomic_fetch_add(&W(s)->writes, 1);
    return gs_source_mutate(IN(s), key, sub, fn, arg, out, rv);
}
static int w_remove(struct gs_source *s, const char *key, const char *uid, int64_t expect_rv, json_t **old)
{
    atomic_fetch_add(&W(s)->writes, 1);
    return gs_source_remove(IN(s), key, uid, expect_rv, old);
}

static int steal_fn(json_t *cur, json_t **out, void *arg)
{
    const char *node = arg;
    json_t *n = json_deep_copy(cur);
    json_object_set_new(json_object_get(n, "spec"), "nodeName", json_string(node));
    json_t *md = json_object_get(n, "metadata");
    char dev[64];
    snprintf(dev, sizeof dev, "GPU-%s-0", node);
    json_object_set_new(md, "annotations", json_pack("{s:s}", GS_ANN_DEVICES, dev));
    *out = n;
    return 0;
}

static int w_bind(struct gs_source *s, struct gs_source_bind *b, size_t n)
{
    struct wrap *w = W(s);
    atomic_fetch_add(&w->writes, (int)n);
    if (atomic_load(&w->fail_binds) > 0) {
        for (size_t i = 0; i < n; i++) b[i].err = w->fail_err, b[i].out = NULL;
        atomic_fetch_sub(&w->fail_binds, (int)n);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (w->steal_key && !strcmp(b[i].key, w->steal_key)) {
            json_t *out = NULL;
            assert_int_equal(gs_source_mutate(w->in, b[i].key, NULL, steal_fn, (void *)w->steal_node, &out, NULL), 0);
            json_decref(out);
            w->steal_key = NULL;
        }
    return gs_source_bind(w->in, b, n);
}
static int w_preempt(struct gs_source *s, const char *key, const char *uid, const char *preemptor, bool *recreated)
{
    atomic_fetch_add(&W(s)->writes, 1);
    return gs_source_preempt(IN(s), key, uid, preemptor, recreated);
}
static void w_interrupt(struct gs_source *s) { gs_source_interrupt(IN(s)); }
static void w_free(struct gs_source *s) { (void)s; }

static const struct gs_source_vtbl wrap_vtbl = {
    .kind = GS_SOURCE_LOCAL, .list = w_list, .events = w_events, .get = w_get, .create = w_create,
    .mutate = w_mutate, .remove = w_remove, .bind = w_bind, .preempt = w_preempt, .interrupt = w_interrupt,
    .free = w_free,
};

/*--- Fixture ---*/

struct fx {
    char dir[64];
    struct gs_store *st;
    struct gs_source *local;
    struct wrap w;
    struct gs_sched_loop *loop;
    atomic_int lead;   /* may_write: 1 yes, 0 no, -1 yes once then no */
    atomic_int asked;  /* may_write calls */
};

static bool may_write(void *ctx)
{
    struct fx *f = ctx;
    atomic_fetch_add(&f->asked, 1);
    int v = atomic_load(&f->lead);
    if (v < 0) atomic_store(&f->lead, 0);
    return v != 0;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/gs-schedloop-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    struct gs_store_opts so = {.dir = f->dir};
    assert_int_equal(gs_store_open_sqlite(&so, &f->st), 0);
    assert_int_equal(gs_source_local_new(f->st, &f->local), 0);
    f->w.base.v = &wrap_vtbl;
    f->w.in = f->local;
    atomic_store(&f->lead, 1);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    gs_sched_loop_stop(f->loop);
    gs_source_free(f->local);
    gs_store_close(f->st);
    fx_rm_tree(f->dir);
    free(f);
    return 0;
}

static void start(struct fx *f, bool leadership)
{
    struct gs_sched_loop_opts o = {.source = &f->w.base, .seed = 1};
    if (leadership) o.may_write = may_write, o.may_write_ctx = f;
    struct gs_diags d = {0};
    assert_int_equal(gs_sched_loop_start(&o, &f->loop, &d), 0);
    gs_diags_free(&d);
}

static void put_node(struct fx *f, const char *name, int ngpus)
{
    json_t *devs = json_array();
    for (int i = 0; i < ngpus; i++) {
        char uuid[32];
        snprintf(uuid, sizeof uuid, "GPU-%s-%d", name, i);
        json_array_append_new(devs, json_pack("{s:i, s:s, s:s, s:i}", "index", i, "uuid", uuid, "model", "H100",
                                              "memoryMiB", 81920));
    }
    json_t *n = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:{s:s, s:s, s:s}, s:o}}", "apiVersion", "v1", "kind", "Node",
                          "metadata", "name", name, "uid", name, "status", "capacity", "cpu", "64", "memory",
                          "256Gi", "pods", "110", "devices", devs);
    char key[64];
    snprintf(key, sizeof key, "nodes/%s", name);
    assert_int_equal(gs_store_create(f->st, key, n, NULL), 0);
    json_decref(n);
}

/* A pod asking for gpus whole GPUs; extra (may be NULL) is merged into its spec. */
static void put_pod(struct fx *f, const char *name, const char *gpus, json_t *extra)
{
    char uid[64];
    snprintf(uid, sizeof uid, "uid-%s", name);
    json_t *p = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:{s:s, s:[{s:s, s:s, s:{s:{s:s}}}]}, s:{s:s}}",
                          "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", "default", "uid",
                          uid, "spec", "restartPolicy", "Never", "containers", "name", "c", "image", "busybox",
                          "resources", "limits", "nvidia.com/gpu", gpus, "status", "phase", "Pending");
    if (extra) json_object_update(json_object_get(p, "spec"), extra);
    json_decref(extra);
    char key[64];
    snprintf(key, sizeof key, "pods/default/%s", name);
    assert_int_equal(gs_store_create(f->st, key, p, NULL), 0);
    json_decref(p);
}

static json_t *get_pod(struct fx *f, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "pods/default/%s", name);
    json_t *p = NULL;
    assert_int_equal(gs_store_get(f->st, key, &p, NULL), 0);
    return p;
}

static const char *node_of(const json_t *p)
{ return json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName")); }

static const json_t *condition(const json_t *p, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(p, "status"), "conditions"), i, c)
        if (!strcmp(json_string_value(json_object_get(c, "type")) ?: "", type)) return c;
    return NULL;
}

/* Polls pod name until ok(pod) or 5 s; returns it (the caller's). */
static json_t *wait_pod(struct fx *f, const char *name, bool (*ok)(const json_t *))
{
    for (int i = 0; i < 500; i++) {
        json_t *p = get_pod(f, name);
        if (ok(p)) return p;
        json_decref(p);
        usleep(10000);
    }
    fail_msg("pod %s never reached the expected state", name);
    return NULL;
}

static bool bound(const json_t *p) { return node_of(p) != NULL; }

static bool gated_cond(const json_t *p)
{
    const json_t *c = condition(p, "PodScheduled");
    return c && !strcmp(json_string_value(json_object_get(c, "reason")) ?: "", "SchedulingGated");
}

static bool unschedulable(const json_t *p)
{
    const json_t *c = condition(p, "PodScheduled");
    return c && !strcmp(json_string_value(json_object_get(c, "reason")) ?: "", "Unschedulable");
}

static void noop(struct gs_cache *c, void *arg) { (void)c, (void)arg; }

/* Inspections are served between iterations: after a few, the loop ran
 * whole iterations (a round and the stream) since what the test wrote. */
static void settle(struct fx *f)
{
    usleep(100000); /* longer than an idle wait on the stream */
    for (int i = 0; i < 3; i++) assert_int_equal(gs_sched_loop_inspect(f->loop, noop, NULL), 0);
}

/*--- Cache checks (on the loop thread) ---*/

struct node_look {
    const char *name;
    int32_t npods, whole_free;
    bool found;
};

static void look_node(struct gs_cache *c, void *arg)
{
    struct node_look *l = arg;
    int32_t idx = gs_cache_find_node(c, l->name);
    l->found = idx >= 0;
    if (idx < 0) return;
    struct gs_node_info *ni = gs_cache_node(c, idx);
    l->npods = ni->npods;
    l->whole_free = ni->gpus_whole_free;
}

static struct node_look node_state(struct fx *f, const char *name)
{
    struct node_look l = {name, 0, 0, false};
    assert_int_equal(gs_sched_loop_inspect(f->loop, look_node, &l), 0);
    return l;
}

/*--- Tests ---*/

/* A gated pod is not queued and says why (as kube-scheduler writes it);
 * removing its gates (a spec change) queues and binds it. */
static void scheduling_gates_hold_a_pod(void **state)
{
    struct fx *f = *state;
    put_node(f, "g1", 2);
    put_pod(f, "held", "1", json_pack("{s:[{s:s}]}", "schedulingGates", "name", "example.com/quota"));
    start(f, false);
    json_t *p = wait_pod(f, "held", gated_cond);
    const json_t *c = condition(p, "PodScheduled");
    assert_string_equal(json_string_value(json_object_get(c, "status")), "False");
    assert_string_equal(json_string_value(json_object_get(c, "message")),
                        "Scheduling is blocked due to non-empty scheduling gates");
    assert_null(node_of(p));
    json_decref(p);
    settle(f);
    struct gs_sched_loop_stats st;
    gs_sched_loop_stats(f->loop, &st);
    assert_int_equal(st.bound, 0);
    assert_int_equal(st.attempts, 0); /* never tried */
    assert_int_equal(node_state(f, "g1").npods, 0);
    char *text = NULL;
    assert_int_equal(gs_sched_loop_explain(f->loop, "default", "held", &text), 0);
    assert_non_null(strstr(text, "example.com/quota"));
    free(text);
    /* One created while the loop runs (the stream, not the list) is held too. */
    put_pod(f, "later", "1", json_pack("{s:[{s:s}]}", "schedulingGates", "name", "example.com/quota"));
    p = wait_pod(f, "later", gated_cond);
    assert_null(node_of(p));
    json_decref(p);
    p = get_pod(f, "held");
    assert_null(node_of(p));
    json_decref(p);

    /* The gate is removed: queued, then bound. */
    p = get_pod(f, "held");
    json_object_del(json_object_get(p, "spec"), "schedulingGates");
    assert_int_equal(gs_store_update(f->st, "pods/default/held", p, 0, NULL), 0);
    json_decref(p);
    p = wait_pod(f, "held", bound);
    assert_string_equal(node_of(p), "g1");
    c = condition(p, "PodScheduled");
    assert_string_equal(json_string_value(json_object_get(c, "status")), "True");
    json_decref(p);
    settle(f);
    gs_sched_loop_stats(f->loop, &st);
    assert_int_equal(st.bound, 1);
    p = get_pod(f, "later");
    assert_null(node_of(p)); /* still gated */
    json_decref(p);
}

/* may_write false: the loop follows the stream (a new node reaches its
 * cache) but writes nothing and counts nothing; true again: it schedules. */
static void follower_writes_nothing(void **state)
{
    struct fx *f = *state;
    atomic_store(&f->lead, 0);
    put_node(f, "g1", 1);
    put_pod(f, "fits", "1", NULL);
    put_pod(f, "toobig", "4", NULL);
    start(f, true);
    settle(f);
    put_node(f, "g2", 1);
    settle(f);
    assert_true(node_state(f, "g2").found); /* the cache is current */
    assert_true(atomic_load(&f->asked) > 0);
    assert_int_equal(atomic_load(&f->w.writes), 0);
    struct gs_sched_loop_stats st;
    gs_sched_loop_stats(f->loop, &st);
    assert_true(st.synced);
    assert_int_equal(st.bound, 0);
    assert_int_equal(st.attempts, 0);
    assert_int_equal(st.unschedulable, 0);
    json_t *p = get_pod(f, "fits");
    assert_null(node_of(p));
    assert_null(condition(p, "PodScheduled"));
    json_decref(p);
    p = get_pod(f, "toobig");
    assert_null(condition(p, "PodScheduled"));
    json_decref(p);

    atomic_store(&f->lead, 1);
    p = wait_pod(f, "fits", bound);
    json_decref(p);
    p = wait_pod(f, "toobig", unschedulable);
    json_decref(p);
    settle(f);
    gs_sched_loop_stats(f->loop, &st);
    assert_int_equal(st.bound, 1);
    assert_int_equal(st.unschedulable, 1);
}

/* Leadership lost between a cycle and its binding's write: nothing is
 * written, the assumption is forgotten (the node is free again in the
 * cache) and the pod is queued again, bound once leadership is back.
 * lead = -1 answers yes to the check before the round and no to the one
 * right before the bind. */
static void lost_lease_drops_assumed_bindings(void **state)
{
    struct fx *f = *state;
    put_node(f, "g1", 1);
    put_pod(f, "p", "1", NULL);
    atomic_store(&f->lead, -1);
    start(f, true);
    settle(f);
    struct gs_sched_loop_stats st;
    gs_sched_loop_stats(f->loop, &st);
    assert_int_equal(st.attempts, 1);
    assert_int_equal(st.binds_dropped, 1);
    assert_int_equal(st.bound, 0);
    assert_int_equal(st.write_failures, 0);
    assert_int_equal(atomic_load(&f->w.writes), 0);
    struct node_look n = node_state(f, "g1");
    assert_int_equal(n.npods, 0);
    assert_int_equal(n.whole_free, 1);
    json_t *p = get_pod(f, "p");
    assert_null(node_of(p));
    json_decref(p);

    atomic_store(&f->lead, 1);
    p = wait_pod(f, "p", bound);
    assert_string_equal(node_of(p), "g1");
    json_decref(p);
    settle(f);
    n = node_state(f, "g1");
    assert_int_equal(n.npods, 1);
    assert_int_equal(n.whole_free, 0);
}

static bool failed(const json_t *p)
{ return !strcmp(json_string_value(json_object_get(json_object_get(p, "status"), "phase")) ?: "", "Failed"); }

/* Preemption: the victim goes through the source's preempt (Failed,
 * Preempted for restartPolicy Never), the preemptor gets
 * status.nominatedNodeName, then binds there. */
static void preemption_nominates_the_node(void **state)
{
    struct fx *f = *state;
    put_node(f, "g1", 1);
    put_pod(f, "low", "1", json_pack("{s:i}", "priority", 0));
    start(f, false);
    json_t *p = wait_pod(f, "low", bound);
    json_decref(p);
    put_pod(f, "high", "1", json_pack("{s:i}", "priority", 1000));
    p = wait_pod(f, "low", failed);
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "status"), "reason")), "Preempted");
    json_decref(p);
    p = wait_pod(f, "high", bound);
    assert_string_equal(node_of(p), "g1");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "status"), "nominatedNodeName")), "g1");
    json_decref(p);
    settle(f); /* the counters move right after the write the store already shows */
    struct gs_sched_loop_stats st;
    gs_sched_loop_stats(f->loop, &st);
    assert_int_equal(st.nominations, 1);
    assert_int_equal(st.bound, 2);
}

static bool nominated(const json_t *p)
{ return json_object_get(json_object_get(p, "status"), "nominatedNodeName") != NULL; }

static bool not_nominated_unschedulable(const json_t *p) { return !nominated(p) && unschedulable(p); }

static int cordon_fn(json_t *cur, json_t **out, void *arg)
{
    (void)arg;
    json_t *n = json_deep_copy(cur);
    json_object_set_new(n, "spec", json_pack("{s:b}", "unschedulable", 1));
    *out = n;
    return 0;
}

/* A nomination is cleared when a later attempt finds the pod unschedulable
 * without preempting: the nominated node is cordoned during the
 * preemptor's backoff (1 s), so its next attempt fits nowhere. */
static void nomination_cleared_when_unschedulable_again(void **state)
{
    struct fx *f = *state;
    put_node(f, "g1", 1);
    put_pod(f, "low", "1", json_pack("{s:i}", "priority", 0));
    start(f, false);
    json_t *p = wait_pod(f, "low", bound);
    json_decref(p);
    put_pod(f, "high", "1", json_pack("{s:i}", "priority", 1000));
    p = wait_pod(f, "high", nominated);
    assert_null(node_of(p));
    json_decref(p);
    json_t *out = NULL;
    assert_int_equal(gs_store_mutate(f->st, "nodes/g1", cordon_fn, NULL, &out, NULL), 0);
    json_decref(out);
    p = wait_pod(f, "high", not_nominated_unschedulable);
    assert_null(node_of(p));
    json_decref(p);
}

/* Another scheduler bound the pod between our cycle and our binding: the
 * bind answers GS_EEXIST, our assumption is forgotten and the pod is
 * accounted where the stream says it went, once. */
static void already_bound_elsewhere_counts_once(void **state)
{
    struct fx *f = *state;
    put_node(f, "g1", 1);
    put_node(f, "g2", 1);
    put_pod(f, "p", "1", NULL);
    f->w.steal_key = "pods/default/p";
    f->w.steal_node = "g2";
    start(f, false);
    json_t *p = wait_pod(f, "p", bound);
    assert_string_equal(node_of(p), "g2"); /* where the other scheduler put it, whatever we chose */
    json_decref(p);
    const char *other = "g1";
    settle(f);
    struct gs_sched_loop_stats st;
    gs_sched_loop_stats(f->loop, &st);
    assert_int_equal(st.bound, 0);
    assert_int_equal(st.bind_conflicts, 1);
    assert_int_equal(st.write_failures, 1);
    struct node_look a = node_state(f, "g2"), b = node_state(f, other);
    assert_int_equal(a.npods, 1);
    assert_int_equal(a.whole_free, 0);
    assert_int_equal(b.npods, 0);
    assert_int_equal(b.whole_free, 1);
    /* The free node still takes a pod: nothing is counted twice. */
    put_pod(f, "q", "1", NULL);
    p = wait_pod(f, "q", bound);
    assert_string_equal(node_of(p), other);
    json_decref(p);
}

/* A binding the API server failed (500, or 429s past the client's retries)
 * changed nothing, so no event will come for the pod: it is queued again and
 * bound by a later attempt, once. */
static void failed_binding_write_is_retried(void **state)
{
    static const int errs[] = {GS_EIO, GS_EBUSY};
    struct fx *f = *state;
    put_node(f, "g1", 2);
    f->w.fail_err = errs[0];
    atomic_store(&f->w.fail_binds, 1);
    put_pod(f, "p", "1", NULL);
    start(f, false);
    json_t *p = wait_pod(f, "p", bound);
    assert_string_equal(node_of(p), "g1");
    json_decref(p);
    settle(f);
    struct gs_sched_loop_stats st;
    gs_sched_loop_stats(f->loop, &st);
    assert_int_equal(st.bound, 1);
    assert_int_equal(st.write_failures, 1);
    assert_int_equal(node_state(f, "g1").npods, 1); /* the failed attempt's assumption is gone */
    /* 429s the client gave up on: the same. */
    f->w.fail_err = errs[1];
    atomic_store(&f->w.fail_binds, 1);
    put_pod(f, "q", "1", NULL);
    p = wait_pod(f, "q", bound);
    json_decref(p);
    settle(f);
    gs_sched_loop_stats(f->loop, &st);
    assert_int_equal(st.bound, 2);
    assert_int_equal(st.write_failures, 2);
    struct node_look n = node_state(f, "g1");
    assert_int_equal(n.npods, 2);
    assert_int_equal(n.whole_free, 0);
}

/* A resource that cannot be listed (listed before the pods) leaves the loop
 * unsynced, but the pods are still listed and bound: not only those whose
 * creation happens to come after the stream's cursor. */
static void a_failed_list_still_lists_the_pods(void **state)
{
    struct fx *f = *state;
    f->w.fail_list = "podgroups.scheduling.volcano.sh/";
    put_node(f, "g1", 2);
    put_pod(f, "before", "1", NULL);
    start(f, false);
    json_t *p = wait_pod(f, "before", bound);
    json_decref(p);
    settle(f);
    struct gs_sched_loop_stats st;
    gs_sched_loop_stats(f->loop, &st);
    assert_false(st.synced);
    assert_int_equal(st.bound, 1);
}

/* The stream's cursor is not an object version (a Kubernetes source): the
 * loop resumes from the lists' cursor and tells events apart by their own
 * rv, so pods created before and after it started are both bound, once. */
static void cursors_are_not_versions(void **state)
{
    struct fx *f = *state;
    f->w.cursor_offset = 1000000;
    put_node(f, "g1", 2);
    put_pod(f, "before", "1", NULL);
    start(f, false);
    json_t *p = wait_pod(f, "before", bound);
    json_decref(p);
    put_pod(f, "after", "1", NULL);
    p = wait_pod(f, "after", bound);
    json_decref(p);
    settle(f);
    struct gs_sched_loop_stats st;
    gs_sched_loop_stats(f->loop, &st);
    assert_int_equal(st.bound, 2);
    assert_int_equal(st.write_failures, 0);
    struct node_look n = node_state(f, "g1");
    assert_int_equal(n.npods, 2);
    assert_int_equal(n.whole_free, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(scheduling_gates_hold_a_pod, setup, teardown),
        cmocka_unit_test_setup_teardown(follower_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(lost_lease_drops_assumed_bindings, setup, teardown),
        cmocka_unit_test_setup_teardown(preemption_nominates_the_node, setup, teardown),
        cmocka_unit_test_setup_teardown(nomination_cleared_when_unschedulable_again, setup, teardown),
        cmocka_unit_test_setup_teardown(already_bound_elsewhere_counts_once, setup, teardown),
        cmocka_unit_test_setup_teardown(cursors_are_not_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(failed_binding_write_is_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(a_failed_list_still_lists_the_pods, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
