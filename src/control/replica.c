/*
 * replica.c - leader election among server replicas, the loops' start and
 * stop, and the write fence; see replica.h.
 *
 * Two threads. The elector's (kube/leader.c) makes one attempt per retry
 * period and reports through two hooks: on_renew moves the fence to the
 * Lease's new version after each successful write, and on_change records
 * whether this replica leads. Losing closes the fence right there, on the
 * elector's thread, before anything else happens; starting and stopping
 * the loops (which lists the whole store, or joins threads) is left to the
 * worker thread so renewals are never late because of it.
 *
 * Locks: mu guards want/running/fence; the start and stop callbacks run
 * without it (they may take seconds), serialised by being on one thread
 * (or in gs_replica_tick's caller, which has no worker).
 */
#include "control/replica.h"

#include "core/log.h"
#include "govern/metrics.h"
#include "kube/leader.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct gs_replica {
    struct gs_replica_opts o;
    char identity[320];
    struct gs_leader *leader;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t worker;
    bool worker_started, stop;
    /* under mu */
    bool want;      /* the elector says: leading */
    bool running;   /* the loops run (worker-owned transitions) */
    int64_t fence;  /* the value last set */
    uint64_t starts, stops, start_failures;
};

/*--- The fence ---*/

static void set_fence(struct gs_replica *r, int64_t rv)
{
    if (!r->o.set_fence) return;
    int err = r->o.set_fence(r->o.ctx, GS_REPLICA_LEASE_KEY, rv);
    pthread_mutex_lock(&r->mu);
    r->fence = rv;
    pthread_mutex_unlock(&r->mu);
    if (err) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)rv);
        gs_log(GS_LOG_WARN, "replica: cannot set the write fence", "version", v, "error", gs_strerror(err), NULL);
    }
}

static void on_renew(void *ctx, int64_t rv)
{
    struct gs_replica *r = ctx;
    set_fence(r, rv > 0 ? rv : GS_REPLICA_FENCE_CLOSED); /* a store without versions cannot fence: closed */
}

static void on_change(void *ctx, bool leading)
{
    struct gs_replica *r = ctx;
    if (!leading) set_fence(r, GS_REPLICA_FENCE_CLOSED); /* first: no loop write passes from here on */
    pthread_mutex_lock(&r->mu);
    r->want = leading;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    gs_log(leading ? GS_LOG_INFO : GS_LOG_WARN, leading ? "replica: leading, starting the control loops"
                                                        : "replica: not leading, stopping the control loops",
           "identity", r->identity, NULL);
}

/*--- Starting and stopping the loops ---*/

/* One step towards what the elector wants; false when there is nothing to do. */
static bool converge(struct gs_replica *r)
{
    pthread_mutex_lock(&r->mu);
    bool want = r->want && !r->stop, running = r->running;
    pthread_mutex_unlock(&r->mu);
    if (want == running) return false;
    if (want) {
        int err = r->o.start ? r->o.start(r->o.ctx) : 0;
        pthread_mutex_lock(&r->mu);
        if (err) {
            r->start_failures++;
            r->want = false; /* the next renewal's on_change cannot come: leadership is kept, so retry there */
        } else {
            r->running = true;
            r->starts++;
        }
        pthread_mutex_unlock(&r->mu);
        if (err) {
            gs_log(GS_LOG_ERROR, "replica: cannot start the control loops", "error", gs_strerror(err), NULL);
            if (r->o.stop) r->o.stop(r->o.ctx); /* whatever part of them did start */
        }
        return !err;
    }
    if (r->o.stop) r->o.stop(r->o.ctx);
    pthread_mutex_lock(&r->mu);
    r->running = false;
    r->stops++;
    pthread_mutex_unlock(&r->mu);
    return true;
}

/* A failed start is retried while leadership holds: the elector reports
 * only changes, so the worker looks again each retry period. */
static void retry_start(struct gs_replica *r)
{
    pthread_mutex_lock(&r->mu);
    bool again = !r->want && !r->running && !r->stop && r->start_failures && gs_leader_is_leader(r->leader);
    if (again) r->want = true;
    pthread_mutex_unlock(&r->mu);
}

static void *worker_main(void *arg)
{
    struct gs_replica *r = arg;
    for (;;) {
        while (converge(r)) {}
        pthread_mutex_lock(&r->mu);
        if (r->stop) {
            pthread_mutex_unlock(&r->mu);
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t until = (int64_t)ts.tv_sec * GS_NS_PER_SEC + ts.tv_nsec + r->o.retry_period_ns;
        ts.tv_sec = (time_t)(until / GS_NS_PER_SEC);
        ts.tv_nsec = (long)(until % GS_NS_PER_SEC);
        if (!r->stop) pthread_cond_timedwait(&r->cv, &r->mu, &ts); /* a wake-up with nothing to do costs one look */
        pthread_mutex_unlock(&r->mu);
        retry_start(r);
    }
    return NULL;
}

/*--- Life ---*/

int gs_replica_new(const struct gs_replica_opts *o, struct gs_replica **out, struct gs_diags *d)
{
    *out = NULL;
    struct gs_replica *r = calloc(1, sizeof *r);
    if (!r) return GS_ENOMEM;
    r->o = *o;
    if (o->identity) {
        snprintf(r->identity, sizeof r->identity, "%s", o->identity);
    } else {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        snprintf(r->identity, sizeof r->identity, "%s_%ld", *host ? host : "gpusched", (long)getpid());
    }
    r->o.identity = r->identity;
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    struct gs_leader_opts lo = {.source = o->lease_source, .ns = GS_REPLICA_LEASE_NS, .name = GS_REPLICA_LEASE_NAME,
                                .identity = r->identity, .lease_duration_ns = o->lease_duration_ns,
                                .renew_deadline_ns = o->renew_deadline_ns, .retry_period_ns = o->retry_period_ns,
                                .clock = o->clock, .seed = o->seed, .on_change = on_change, .on_renew = on_renew,
                                .ctx = r};
    struct gs_diags scratch = {0};
    int err = gs_leader_new(&lo, &r->leader, &scratch);
    static const char *const flag[][2] = {{"leaseDuration", "--leader-elect-lease-duration"},
                                          {"renewDeadline", "--leader-elect-renew-deadline"},
                                          {"retryPeriod", "--leader-elect-retry-period"},
                                          {"identity", "--replica-id"}};
    for (size_t i = 0; i < scratch.n; i++) { /* the elector's field names, said as the server's flags */
        const char *f = scratch.v[i].path;
        for (size_t k = 0; k < sizeof flag / sizeof flag[0]; k++)
            if (f && !strcmp(f, flag[k][0])) f = flag[k][1];
        if (d) gs_diags_add(d, f ? f : "", "%s", scratch.v[i].msg);
    }
    gs_diags_free(&scratch);
    if (err) {
        gs_replica_free(r);
        return err;
    }
    r->o.retry_period_ns = o->retry_period_ns ? o->retry_period_ns : 2 * GS_NS_PER_SEC;
    set_fence(r, GS_REPLICA_FENCE_CLOSED); /* a follower's loops write nothing */
    *out = r;
    return 0;
}

int gs_replica_start(struct gs_replica *r)
{
    if (!r->worker_started) {
        if (pthread_create(&r->worker, NULL, worker_main, r)) return GS_ENOMEM;
        r->worker_started = true;
    }
    return gs_leader_start(r->leader);
}

bool gs_replica_tick(struct gs_replica *r)
{
    bool leading = gs_leader_tick(r->leader);
    retry_start(r);
    while (converge(r)) {}
    return leading;
}

void gs_replica_free(struct gs_replica *r)
{
    if (!r) return;
    if (r->leader) {
        /* The loops stop first (still fenced to our term), then the fence
         * closes and the Lease is released, so the next leader starts
         * without waiting out the lease and never overlaps with ours. */
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
        if (r->worker_started) pthread_join(r->worker, NULL);
        while (converge(r)) {}
        gs_leader_free(r->leader); /* stop, release: on_change(false) closes the fence */
    }
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/*--- Questions ---*/

bool gs_replica_may_write(void *ctx)
{
    struct gs_replica *r = ctx;
    return gs_leader_may_write(r->leader);
}

bool gs_replica_leading(struct gs_replica *r) { return gs_leader_is_leader(r->leader); }
const char *gs_replica_identity(const struct gs_replica *r) { return r->identity; }
struct gs_leader *gs_replica_leader(struct gs_replica *r) { return r->leader; }

void gs_replica_holder(struct gs_replica *r, char *buf, size_t len)
{
    struct gs_leader_stats st;
    gs_leader_stats(r->leader, &st);
    snprintf(buf, len, "%s", st.holder);
}

int64_t gs_replica_fence(struct gs_replica *r)
{
    pthread_mutex_lock(&r->mu);
    int64_t v = r->fence;
    pthread_mutex_unlock(&r->mu);
    return v;
}

/* A label value as Prometheus's text format wants it. */
static void label_escape(const char *in, char *out, size_t len)
{
    size_t k = 0;
    for (const char *p = in; *p && k + 2 < len; p++) {
        if (*p == '"' || *p == '\\') out[k++] = '\\';
        else if (*p == '\n') {
            out[k++] = '\\';
            out[k++] = 'n';
            continue;
        }
        out[k++] = *p;
    }
    out[k] = 0;
}

void gs_replica_metrics(struct gs_replica *r, struct gs_mbuf *b)
{
    struct gs_leader_stats st;
    gs_leader_stats(r->leader, &st);
    pthread_mutex_lock(&r->mu);
    bool running = r->running;
    uint64_t starts = r->starts, fails = r->start_failures;
    pthread_mutex_unlock(&r->mu);
    char id[700];
    label_escape(r->identity, id, sizeof id);
    gs_mbuf_help(b, "gpusched_leader", "gauge", "1 while this replica leads the control loops, else 0.");
    gs_mbuf_printf(b, "gpusched_leader{replica=\"%s\"} %d\n", id, st.leading ? 1 : 0);
    gs_mbuf_help(b, "gpusched_leader_loops_running", "gauge", "1 while the leader-only control loops run here.");
    gs_mbuf_printf(b, "gpusched_leader_loops_running %d\n", running ? 1 : 0);
    gs_mbuf_help(b, "gpusched_leader_acquired_total", "counter", "Times this replica became leader.");
    gs_mbuf_printf(b, "gpusched_leader_acquired_total %llu\n", (unsigned long long)st.acquired);
    gs_mbuf_help(b, "gpusched_leader_lost_total", "counter", "Times this replica stopped leading.");
    gs_mbuf_printf(b, "gpusched_leader_lost_total %llu\n", (unsigned long long)st.lost);
    gs_mbuf_help(b, "gpusched_leader_renew_failures_total", "counter", "Lease writes that failed while leading.");
    gs_mbuf_printf(b, "gpusched_leader_renew_failures_total %llu\n", (unsigned long long)st.renew_failures);
    gs_mbuf_help(b, "gpusched_leader_lease_transitions", "gauge", "leaseTransitions of the Lease last seen.");
    gs_mbuf_printf(b, "gpusched_leader_lease_transitions %lld\n", (long long)st.lease_transitions);
    gs_mbuf_help(b, "gpusched_leader_loop_starts_total", "counter", "Starts of the leader-only loops (and failed ones).");
    gs_mbuf_printf(b, "gpusched_leader_loop_starts_total{result=\"ok\"} %llu\n", (unsigned long long)starts);
    gs_mbuf_printf(b, "gpusched_leader_loop_starts_total{result=\"error\"} %llu\n", (unsigned long long)fails);
}

char *gs_replica_ready_note(struct gs_replica *r)
{
    struct gs_leader_stats st;
    gs_leader_stats(r->leader, &st);
    char *t = NULL;
    int n = st.leading ? asprintf(&t, "ok\nleader %s\n", r->identity)
                       : asprintf(&t, "ok\nfollower %s (leader: %s)\n", r->identity, *st.holder ? st.holder : "none");
    return n < 0 ? NULL : t;
}
