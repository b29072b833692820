/*
 * leader.c - Lease-based leader election; see leader.h.
 *
 * One read-modify-write per attempt (gs_source_mutate): the transport reads
 * the live Lease, try_fn decides and returns the record to write, and the
 * write carries the resourceVersion read, so two replicas racing for an
 * expired lease cannot both win; the loser's retry sees the winner's record
 * and backs off. No cached copy is ever written blind.
 *
 * Locks: tick_mu serialises attempts (the thread, a release, a test's
 * ticks); mu guards the state read by may_write and stats. try_fn may run
 * under the transport's write lock and takes only mu, and nothing holds mu
 * while calling the source, so the order is always source lock -> mu.
 */
#include "kube/leader.h"

#include "core/log.h"
#include "informer/source.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JITTER 1.2 /* client-go's JitterFactor for a follower's retries */

struct gs_leader {
    struct gs_leader_opts o;
    char *ns, *name, *identity;
    char key[600];
    struct gs_clock real;
    const struct gs_clock *clock;
    uint64_t rng;

    pthread_mutex_t tick_mu;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool started, stop;

    /* under mu */
    bool leading;
    int64_t last_renew_ns; /* clock time at the start of the last successful write */
    json_t *observed;      /* the record last seen */
    int64_t observed_ns;   /* when it was first seen as it is */
    struct gs_leader_stats st;
};

/*--- Time ---*/

static int64_t now_ns(const struct gs_leader *l) { return gs_clock_now(l->clock); }

/* RFC 3339 with microseconds (metav1.MicroTime), of the wall time. */
static void micro_time(const struct gs_leader *l, int64_t mono_now, char *buf, size_t len)
{
    int64_t wall = l->clock == &l->real ? (int64_t)(gs_wall_time() * 1e9) : mono_now;
    time_t secs = (time_t)(wall / GS_NS_PER_SEC);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%06lldZ", day, (long long)(wall % GS_NS_PER_SEC / 1000));
}

/*--- Options ---*/

static bool dns_label(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > 63 || s[0] == '-' || s[n - 1] == '-') return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')) return false;
    return true;
}

static bool dns_subdomain(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > 253) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.')) return false;
    return s[0] != '-' && s[0] != '.' && s[n - 1] != '-' && s[n - 1] != '.';
}

static int check(const struct gs_leader_opts *o, int64_t lease, int64_t renew, int64_t retry, struct gs_diags *d)
{
    size_t before = d ? d->n : 0;
    struct gs_diags scratch = {0};
    if (!d) d = &scratch;
    if (!o->source) gs_diags_add(d, "source", "required");
    if (!o->ns || !dns_label(o->ns))
        gs_diags_add(d, "namespace", "\"%s\": want a namespace name (lower-case letters, digits, '-')",
                     o->ns ? o->ns : "");
    if (!o->name || !dns_subdomain(o->name))
        gs_diags_add(d, "name", "\"%s\": want a Lease name (lower-case letters, digits, '-', '.')",
                     o->name ? o->name : "");
    if (!o->identity || !*o->identity || strlen(o->identity) > 250)
        gs_diags_add(d, "identity", "must be 1 to 250 characters, unique among the replicas");
    if (lease < GS_NS_PER_SEC)
        gs_diags_add(d, "leaseDuration", "%.3fs: must be at least 1s (the Lease holds whole seconds)", lease / 1e9);
    if (retry <= 0) gs_diags_add(d, "retryPeriod", "%.3fs: must be more than 0", retry / 1e9);
    if (renew >= lease)
        gs_diags_add(d, "renewDeadline", "%.3fs: must be less than the lease duration (%.3fs), or another replica "
                     "could take over while this one still writes", renew / 1e9, lease / 1e9);
    if (retry > 0 && (double)renew <= JITTER * (double)retry)
        gs_diags_add(d, "renewDeadline", "%.3fs: must be more than 1.2 x the retry period (%.3fs), or one failed "
                     "renewal already loses the lease", renew / 1e9, retry / 1e9);
    bool bad = d->n > before;
    gs_diags_free(&scratch);
    return bad ? GS_EINVAL : 0;
}

int gs_leader_new(const struct gs_leader_opts *o, struct gs_leader **out, struct gs_diags *d)
{
    *out = NULL;
    int64_t lease = o->lease_duration_ns ? o->lease_duration_ns : 15 * GS_NS_PER_SEC;
    int64_t renew = o->renew_deadline_ns ? o->renew_deadline_ns : 10 * GS_NS_PER_SEC;
    int64_t retry = o->retry_period_ns ? o->retry_period_ns : 2 * GS_NS_PER_SEC;
    int err = check(o, lease, renew, retry, d);
    if (err) return err;
    struct gs_leader *l = calloc(1, sizeof *l);
    if (!l) return GS_ENOMEM;
    l->o = *o;
    l->o.lease_duration_ns = lease;
    l->o.renew_deadline_ns = renew;
    l->o.retry_period_ns = retry;
    l->ns = strdup(o->ns);
    l->name = strdup(o->name);
    l->identity = strdup(o->identity);
    if (!l->ns || !l->name || !l->identity) {
        gs_leader_free(l);
        return GS_ENOMEM;
    }
    snprintf(l->key, sizeof l->key, "leases.coordination.k8s.io/%s/%s", l->ns, l->name); /* resources.h key */
    gs_clock_init_real(&l->real);
    l->clock = o->clock ? o->clock : &l->real;
    l->rng = o->seed ? o->seed : 0x9e3779b97f4a7c15ULL;
    pthread_mutex_init(&l->tick_mu, NULL);
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    *out = l;
    return 0;
}

/*--- The record ---*/

/* The election record of a Lease's spec (new reference). */
static json_t *record_of(const json_t *lease)
{
    json_t *spec = json_object_get(lease, "spec"), *r = json_object();
    static const char *const fields[] = {"holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
                                         "leaseTransitions"};
    for (size_t i = 0; r && i < sizeof fields / sizeof fields[0]; i++) {
        json_t *v = json_object_get(spec, fields[i]);
        if (v && !json_is_null(v)) json_object_set(r, fields[i], v);
    }
    return r;
}

/* Under mu: r is what the Lease says now; note when it last changed. */
static void observe(struct gs_leader *l, json_t *r, int64_t now)
{
    if (!l->observed || !json_equal(l->observed, r)) {
        json_decref(l->observed);
        l->observed = json_incref(r);
        l->observed_ns = now;
    }
    const char *h = json_string_value(json_object_get(r, "holderIdentity"));
    snprintf(l->st.holder, sizeof l->st.holder, "%s", h ? h : "");
    l->st.lease_transitions = json_integer_value(json_object_get(r, "leaseTransitions"));
}

static json_t *lease_object(const struct gs_leader *l, json_t *spec)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "apiVersion", "coordination.k8s.io/v1", "kind", "Lease",
                     "metadata", "name", l->name, "namespace", l->ns, "spec", spec);
}

struct try_ctx {
    struct gs_leader *l;
    int64_t now;
    char now_text[48];
    json_t *written; /* the record written (new reference) */
};

#define HELD_BY_OTHER GS_EBUSY

static int try_fn(json_t *cur, json_t **out, void *arg)
{
    struct try_ctx *c = arg;
    struct gs_leader *l = c->l;
    json_int_t secs = (json_int_t)(l->o.lease_duration_ns / GS_NS_PER_SEC);
    json_t *spec;
    if (!cur) { /* absent: ours, first of its line */
        spec = json_pack("{s:s, s:I, s:s, s:s, s:I}", "holderIdentity", l->identity, "leaseDurationSeconds", secs,
                         "acquireTime", c->now_text, "renewTime", c->now_text, "leaseTransitions", (json_int_t)0);
        *out = spec ? lease_object(l, json_incref(spec)) : NULL;
    } else {
        json_t *r = record_of(cur);
        if (!r) return GS_ENOMEM;
        pthread_mutex_lock(&l->mu);
        observe(l, r, c->now);
        const char *h = json_string_value(json_object_get(r, "holderIdentity"));
        json_int_t dur = json_integer_value(json_object_get(r, "leaseDurationSeconds"));
        if (dur <= 0) dur = secs; /* a record without one: ours counts */
        bool mine = h && !strcmp(h, l->identity);
        bool valid = h && *h && l->observed_ns + (int64_t)dur * GS_NS_PER_SEC > c->now;
        pthread_mutex_unlock(&l->mu);
        if (valid && !mine) {
            json_decref(r);
            return HELD_BY_OTHER;
        }
        json_int_t trans = json_integer_value(json_object_get(r, "leaseTransitions"));
        const char *acq = json_string_value(json_object_get(r, "acquireTime"));
        spec = json_pack("{s:s, s:I, s:s, s:s, s:I}", "holderIdentity", l->identity, "leaseDurationSeconds", secs,
                         "acquireTime", mine && acq ? acq : c->now_text, "renewTime", c->now_text,
                         "leaseTransitions", mine ? trans : trans + 1);
        json_decref(r);
        json_t *next = spec ? json_deep_copy(cur) : NULL;
        if (next) json_object_set(next, "spec", spec);
        *out = next;
    }
    if (!*out) {
        json_decref(spec);
        return GS_ENOMEM;
    }
    json_decref(c->written); /* a retried attempt (409) replaces the last one */
    c->written = spec;
    return 0;
}

/*--- Leading ---*/

/* Under mu: leadership ends (the caller reports it after unlocking). */
static void step_down(struct gs_leader *l, const char *why)
{
    if (!l->leading) return;
    l->leading = false;
    l->st.leading = false;
    l->st.lost++;
    gs_log(GS_LOG_WARN, "leader: stopped leading", "lease", l->key, "identity", l->identity, "why", why, NULL);
}

static void report(struct gs_leader *l, bool was, bool is)
{
    if (was != is && l->o.on_change) l->o.on_change(l->o.ctx, is);
}

bool gs_leader_tick(struct gs_leader *l)
{
    pthread_mutex_lock(&l->tick_mu);
    struct try_ctx c = {.l = l, .now = now_ns(l)};
    micro_time(l, c.now, c.now_text, sizeof c.now_text);
    pthread_mutex_lock(&l->mu);
    bool was = l->leading;
    if (l->leading && c.now >= l->last_renew_ns + l->o.renew_deadline_ns) step_down(l, "renew deadline passed");
    pthread_mutex_unlock(&l->mu);

    int64_t rv = 0;
    int err = gs_source_mutate(l->o.source, l->key, NULL, try_fn, &c, NULL, &rv);
    if (!err && l->o.on_renew) l->o.on_renew(l->o.ctx, rv); /* the fence moves before may_write says yes */

    pthread_mutex_lock(&l->mu);
    if (!err || err == HELD_BY_OTHER) l->st.last_contact_ns = c.now;
    if (!err) {
        if (c.written) observe(l, c.written, c.now);
        l->observed_ns = c.now; /* our own write: seen now */
        l->last_renew_ns = c.now;
        if (!l->leading) {
            l->leading = l->st.leading = true;
            l->st.acquired++;
            gs_log(GS_LOG_INFO, "leader: leading", "lease", l->key, "identity", l->identity, NULL);
        }
    } else if (err == HELD_BY_OTHER) {
        step_down(l, "another replica holds the lease");
    } else {
        if (l->leading) {
            l->st.renew_failures++;
            gs_log(GS_LOG_WARN, "leader: renewal failed", "lease", l->key, "error", gs_strerror(err), NULL);
        } else {
            gs_log(GS_LOG_WARN, "leader: cannot read or write the lease", "lease", l->key, "error", gs_strerror(err),
                   NULL);
        }
        if (l->leading && c.now >= l->last_renew_ns + l->o.renew_deadline_ns)
            step_down(l, "renew deadline passed");
    }
    bool is = l->leading;
    pthread_mutex_unlock(&l->mu);
    json_decref(c.written);
    report(l, was, is);
    pthread_mutex_unlock(&l->tick_mu);
    return is;
}

bool gs_leader_is_leader(struct gs_leader *l)
{
    pthread_mutex_lock(&l->mu);
    bool v = l->leading;
    pthread_mutex_unlock(&l->mu);
    return v;
}

bool gs_leader_may_write(void *ctx)
{
    struct gs_leader *l = ctx;
    int64_t now = now_ns(l);
    pthread_mutex_lock(&l->mu);
    bool v = l->leading && now < l->last_renew_ns + l->o.renew_deadline_ns;
    pthread_mutex_unlock(&l->mu);
    return v;
}

void gs_leader_stats(struct gs_leader *l, struct gs_leader_stats *out)
{
    pthread_mutex_lock(&l->mu);
    *out = l->st;
    pthread_mutex_unlock(&l->mu);
}

/*--- Release ---*/

static int release_fn(json_t *cur, json_t **out, void *arg)
{
    struct try_ctx *c = arg;
    if (!cur) return GS_ENOENT;
    json_t *r = record_of(cur);
    const char *h = json_string_value(json_object_get(r, "holderIdentity"));
    bool mine = h && !strcmp(h, c->l->identity);
    json_int_t trans = json_integer_value(json_object_get(r, "leaseTransitions"));
    json_decref(r);
    if (!mine) return HELD_BY_OTHER; /* taken meanwhile: not ours to clear */
    json_t *spec = json_pack("{s:s, s:I, s:s, s:s, s:I}", "holderIdentity", "", "leaseDurationSeconds", (json_int_t)1,
                             "acquireTime", c->now_text, "renewTime", c->now_text, "leaseTransitions", trans);
    json_t *next = spec ? json_deep_copy(cur) : NULL;
    if (!next) {
        json_decref(spec);
        return GS_ENOMEM;
    }
    json_object_set(next, "spec", spec);
    json_decref(c->written); /* a retried attempt (409) replaces the last one */
    c->written = spec;
    *out = next;
    return 0;
}

void gs_leader_release(struct gs_leader *l)
{
    pthread_mutex_lock(&l->tick_mu);
    pthread_mutex_lock(&l->mu);
    bool was = l->leading;
    step_down(l, "released");
    pthread_mutex_unlock(&l->mu);
    if (was) { /* writing has stopped: now the lease may go */
        report(l, true, false);
        struct try_ctx c = {.l = l, .now = now_ns(l)};
        micro_time(l, c.now, c.now_text, sizeof c.now_text);
        int err = gs_source_mutate(l->o.source, l->key, NULL, release_fn, &c, NULL, NULL);
        if (err && err != HELD_BY_OTHER)
            gs_log(GS_LOG_WARN, "leader: release failed", "lease", l->key, "error", gs_strerror(err), NULL);
        pthread_mutex_lock(&l->mu);
        if (!err && c.written) observe(l, c.written, c.now);
        pthread_mutex_unlock(&l->mu);
        json_decref(c.written);
    }
    pthread_mutex_unlock(&l->tick_mu);
}

/*--- The thread ---*/

static double rand01(struct gs_leader *l)
{
    l->rng ^= l->rng << 13;
    l->rng ^= l->rng >> 7;
    l->rng ^= l->rng << 17;
    return (double)(l->rng >> 11) / 9007199254740992.0;
}

static void *run(void *arg)
{
    struct gs_leader *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        pthread_mutex_unlock(&l->mu);
        bool leading = gs_leader_tick(l);
        pthread_mutex_lock(&l->mu);
        /* A leader renews on the period; followers spread their retries (client-go's JitterUntil). */
        int64_t wait = leading ? l->o.retry_period_ns
                               : (int64_t)((double)l->o.retry_period_ns * (1.0 + rand01(l) * JITTER));
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t until = (int64_t)ts.tv_sec * GS_NS_PER_SEC + ts.tv_nsec + wait;
        ts.tv_sec = (time_t)(until / GS_NS_PER_SEC);
        ts.tv_nsec = (long)(until % GS_NS_PER_SEC);
        while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &ts) != ETIMEDOUT) {}
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

int gs_leader_start(struct gs_leader *l)
{
    if (l->started) return 0;
    l->stop = false;
    if (pthread_create(&l->thread, NULL, run, l)) return GS_ENOMEM;
    l->started = true;
    return 0;
}

void gs_leader_stop(struct gs_leader *l)
{
    if (!l) return;
    if (l->started) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
        l->started = false;
    }
    gs_leader_release(l);
}

void gs_leader_free(struct gs_leader *l)
{
    if (!l) return;
    if (l->identity && l->ns && l->name) {
        gs_leader_stop(l);
        pthread_mutex_destroy(&l->tick_mu);
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->cv);
    }
    json_decref(l->observed);
    free(l->ns);
    free(l->name);
    free(l->identity);
    free(l);
}
