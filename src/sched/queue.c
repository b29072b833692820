/*
 * queue.c - the scheduling queue: activeQ heap, backoffQ heap, unschedulable
 * set; see queue.h.
 *
 * Every pod the queue knows has one entry (keyed by "namespace/name") that
 * says where it is: active, backing off, unschedulable, or in flight (popped
 * and being scheduled). Heaps store entry pointers and each entry remembers
 * its position, so deleting a pod from the middle of a heap is O(log n).
 *
 * A cluster event that happens while a pod is in flight must not be lost:
 * had the pod failed a moment earlier, the event would have moved it back.
 * So the queue numbers events and remembers, per event type, the number of
 * the last one; a pod that comes back unschedulable after an event it waits
 * for went by goes to backoffQ instead of the unschedulable set (kube's
 * moveRequestCycle, per event type).
 *
 * The unschedulable set is scanned for pods past max_unschedulable_ns only
 * when the earliest such deadline has come, so pops stay O(log n).
 *
 * A pod an event moved while it was still backing off waits in backoffQ
 * marked "woken": the event may have made room for it, and when activeQ runs
 * dry the woken pods are tried at once instead of idling out their backoff
 * (kube's SchedulerPopFromBackoffQ). Only woken pods: one that failed with
 * an error waits its backoff, or a pod that always errs would be retried in
 * a loop. A woken pod gets one such early try per event; failing again it
 * goes back to the unschedulable set to wait for the next one.
 *
 * Batches. A gang member waiting at Permit brings every unplaced sibling to
 * activeQ (gs_sched_queue_reactivate_many), and the next member does it
 * again for the same siblings less itself: reactivating each one is a heap
 * remove and push through QueueSort, quadratic in the gang's size. But when
 * nothing got a seq since the last batch, the clock has not moved, and the
 * pods asked for are exactly the entries of the last batch still in activeQ
 * untouched, in the same order, reactivating them again changes nothing but
 * their seqs: each is already in activeQ with a fresh entry stamped now, and
 * its new seq stays above every other entry's, as its old one was, with the
 * same order among them. So those seqs are renumbered in place and the heap
 * is left as it is: the same state as the one by one reactivation (up to
 * the heap's layout, which cannot change what comes out while QueueSort is
 * a strict order, as every QueueSort plugin's seq tie-break makes it). The
 * check walks the pods and the batch side by side, one pointer compare per
 * pod; a pod the batch does not hold costs a map lookup.
 */
#include "sched/queue.h"

#include "sched/strmap.h"

#include <stdlib.h>
#include <string.h>

enum where { W_ACTIVE, W_BACKOFF, W_UNSCHED, W_INFLIGHT };

struct qent {
    struct gs_queued_pod qp;
    char *key;
    enum where where;
    size_t pos;
    int64_t ready_ns;      /* end of the current backoff */
    int64_t unsched_since;
    unsigned mask;         /* events that move it out of the unschedulable set */
    unsigned checked;      /* of those, the pod events that move it only when the hint says so */
    uint64_t popped_at;    /* event number when it was popped */
    bool woken;            /* in backoffQ because an event moved it (see above) */
    bool fresh;            /* in activeQ since the last batch reactivated it (see "Batches") */
    bool in_batch;         /* q->batch.v[batch_idx] is this entry (then fresh) */
    size_t batch_idx;
};

struct heap {
    struct qent **v;
    size_t n, cap;
};

/* The last gs_sched_queue_reactivate_many: the entries it moved and their
 * pods, in the order they got their seqs, NULL where one has left activeQ
 * since (so every entry named is still in activeQ untouched), the seq after
 * them and the clock then. */
struct batch {
    struct qent **v;
    const struct gs_pod **pod;
    size_t n, cap;
    uint64_t end;
    int64_t at;
    bool valid;
    size_t kept;           /* batches answered without touching the heap */
};

#define NEVENTS 8

struct gs_sched_queue {
    const struct gs_clock *clock;
    struct gs_queue_opts opts;
    bool (*less)(void *ctx, const struct gs_queued_pod *, const struct gs_queued_pod *);
    void *ctx;
    struct gs__strmap map;
    struct heap active, backoff;
    struct qent **unsched;
    size_t nunsched, unsched_cap;
    int64_t flush_at;      /* earliest unschedulable deadline, INT64_MAX when none */
    uint64_t seq;
    uint64_t event_no;
    uint64_t last_event[NEVENTS];
    size_t nwoken;         /* woken entries in backoffQ */
    /* Pod-event hint (gs_sched_queue_set_hint) and how many unschedulable
     * entries wait for each event bit, so a pod event nobody waits for costs
     * nothing. */
    gs_queue_hint_fn hint;
    void *hint_ctx;
    size_t waiting[NEVENTS];
    struct batch batch;
};

/*--- Heaps ---*/

static bool before(const struct gs_sched_queue *q, const struct heap *h, const struct qent *a, const struct qent *b)
{
    if (h == &q->backoff) {
        if (a->ready_ns != b->ready_ns) return a->ready_ns < b->ready_ns;
        return a->qp.seq < b->qp.seq;
    }
    return q->less(q->ctx, &a->qp, &b->qp);
}

static void heap_set(struct heap *h, size_t i, struct qent *e)
{
    h->v[i] = e;
    e->pos = i;
}

static void sift_up(const struct gs_sched_queue *q, struct heap *h, size_t i)
{
    struct qent *e = h->v[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(q, h, e, h->v[p])) break;
        heap_set(h, i, h->v[p]);
        i = p;
    }
    heap_set(h, i, e);
}

static void sift_down(const struct gs_sched_queue *q, struct heap *h, size_t i)
{
    struct qent *e = h->v[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(q, h, h->v[c + 1], h->v[c])) c++;
        if (!before(q, h, h->v[c], e)) break;
        heap_set(h, i, h->v[c]);
        i = c;
    }
    heap_set(h, i, e);
}

static int heap_push(const struct gs_sched_queue *q, struct heap *h, struct qent *e)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        struct qent **nv = realloc(h->v, cap * sizeof *nv);
        if (!nv) return GS_ENOMEM;
        h->v = nv;
        h->cap = cap;
    }
    heap_set(h, h->n++, e);
    sift_up(q, h, h->n - 1);
    return 0;
}

static void heap_remove(const struct gs_sched_queue *q, struct heap *h, size_t i)
{
    struct qent *last = h->v[--h->n];
    if (i == h->n) return;
    heap_set(h, i, last);
    sift_down(q, h, i);
    sift_up(q, h, last->pos);
}

/*--- Placement ---*/

static int to_active(struct gs_sched_queue *q, struct qent *e)
{
    e->where = W_ACTIVE;
    e->qp.timestamp_ns = gs_clock_now(q->clock);
    return heap_push(q, &q->active, e);
}

static int to_backoff(struct gs_sched_queue *q, struct qent *e, bool woken)
{
    e->where = W_BACKOFF;
    e->woken = woken;
    q->nwoken += woken;
    return heap_push(q, &q->backoff, e);
}

/* e leaves backoffQ (it is already out of the heap). */
static void unwake(struct gs_sched_queue *q, struct qent *e)
{
    q->nwoken -= e->woken;
    e->woken = false;
}

static int to_unsched(struct gs_sched_queue *q, struct qent *e, unsigned mask)
{
    if (q->nunsched == q->unsched_cap) {
        size_t cap = q->unsched_cap ? q->unsched_cap * 2 : 64;
        struct qent **nv = realloc(q->unsched, cap * sizeof *nv);
        if (!nv) return GS_ENOMEM;
        q->unsched = nv;
        q->unsched_cap = cap;
    }
    e->where = W_UNSCHED;
    e->mask = mask;
    for (int b = 0; b < NEVENTS; b++) q->waiting[b] += (mask >> b) & 1;
    e->unsched_since = gs_clock_now(q->clock);
    e->pos = q->nunsched;
    q->unsched[q->nunsched++] = e;
    if (e->unsched_since + q->opts.max_unschedulable_ns < q->flush_at)
        q->flush_at = e->unsched_since + q->opts.max_unschedulable_ns;
    return 0;
}

/* e leaves activeQ: out of the batch (see "Batches"). */
static void unfresh(struct gs_sched_queue *q, struct qent *e)
{
    if (!e->fresh) return;
    e->fresh = false;
    if (e->in_batch) q->batch.v[e->batch_idx] = NULL, e->in_batch = false;
}

static void unsched_remove(struct gs_sched_queue *q, struct qent *e)
{
    for (int b = 0; b < NEVENTS; b++) q->waiting[b] -= (e->mask >> b) & 1;
    struct qent *last = q->unsched[--q->nunsched];
    q->unsched[e->pos] = last;
    last->pos = e->pos;
}

/* Takes e out of whatever structure holds it (it stays in the map). */
static void detach(struct gs_sched_queue *q, struct qent *e)
{
    unfresh(q, e);
    switch (e->where) {
    case W_ACTIVE: heap_remove(q, &q->active, e->pos); break;
    case W_BACKOFF:
        heap_remove(q, &q->backoff, e->pos);
        unwake(q, e);
        break;
    case W_UNSCHED: unsched_remove(q, e); break;
    case W_INFLIGHT: break;
    }
}

/* Back from the unschedulable set: backoffQ while still backing off, else
 * activeQ. by_event: a cluster event moved it (not the periodic flush). */
static int release(struct gs_sched_queue *q, struct qent *e, int64_t now, bool by_event)
{
    return e->ready_ns > now ? to_backoff(q, e, by_event) : to_active(q, e);
}

/*--- API ---*/

struct gs_sched_queue *gs_sched_queue_new(const struct gs_clock *clock, const struct gs_queue_opts *opts,
                                          bool (*less)(void *ctx, const struct gs_queued_pod *,
                                                       const struct gs_queued_pod *),
                                          void *ctx)
{
    struct gs_sched_queue *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->clock = clock;
    q->opts = opts ? *opts : (struct gs_queue_opts){0};
    if (q->opts.initial_backoff_ns <= 0) q->opts.initial_backoff_ns = GS_NS_PER_SEC;
    if (q->opts.max_backoff_ns <= 0) q->opts.max_backoff_ns = 10 * GS_NS_PER_SEC;
    if (q->opts.max_backoff_ns < q->opts.initial_backoff_ns) q->opts.max_backoff_ns = q->opts.initial_backoff_ns;
    if (q->opts.max_unschedulable_ns <= 0) q->opts.max_unschedulable_ns = 300 * GS_NS_PER_SEC;
    q->less = less;
    q->ctx = ctx;
    q->flush_at = INT64_MAX;
    gs__strmap_init(&q->map);
    return q;
}

static void qent_free(struct qent *e)
{
    free(e->key);
    free(e);
}


void gs_sched_queue_free(struct gs_sched_queue *q)
{
    if (!q) return;
    for (size_t i = 0; i < q->map.cap; i++)
        if (q->map.slots[i].key) qent_free(q->map.slots[i].val);
    gs__strmap_free(&q->map);
    free(q->active.v);
    free(q->backoff.v);
    free(q->unsched);
    free(q->batch.v);
    free(q->batch.pod);
    free(q);
}

int gs_sched_queue_add(struct gs_sched_queue *q, const struct gs_pod *pod)
{
    char key[GS__KEY_MAX];
    gs__pod_key(pod, key, sizeof key);
    if (gs__strmap_get(&q->map, key)) return GS_EEXIST;
    struct qent *e = calloc(1, sizeof *e);
    if (!e || !(e->key = strdup(key))) {
        free(e);
        return GS_ENOMEM;
    }
    int64_t now = gs_clock_now(q->clock);
    e->qp = (struct gs_queued_pod){.pod = pod, .enqueued_ns = now, .timestamp_ns = now, .seq = q->seq++};
    if (gs__strmap_put(&q->map, e->key, e) != 0 || to_active(q, e) != 0) {
        gs__strmap_del(&q->map, e->key);
        qent_free(e);
        return GS_ENOMEM;
    }
    return 0;
}

int gs_sched_queue_delete(struct gs_sched_queue *q, const char *pod_key)
{
    struct qent *e = gs__strmap_del(&q->map, pod_key);
    if (!e) return GS_ENOENT;
    detach(q, e); /* out of the batch too */
    qent_free(e);
    return 0;
}

/* gs_sched_queue_reactivate of the queued entry e. */
static int refresh(struct gs_sched_queue *q, struct qent *e, const struct gs_pod *pod)
{
    detach(q, e); /* what delete does, less the map and the memory; out of the batch */
    char *key = e->key;
    int64_t now = gs_clock_now(q->clock);
    *e = (struct qent){.key = key}; /* what add starts from */
    e->qp = (struct gs_queued_pod){.pod = pod, .enqueued_ns = now, .timestamp_ns = now, .seq = q->seq++};
    if (to_active(q, e) != 0) { /* as add's failure: the pod leaves the queue */
        gs__strmap_del(&q->map, key);
        qent_free(e);
        return GS_ENOMEM;
    }
    return 0;
}

int gs_sched_queue_reactivate(struct gs_sched_queue *q, const struct gs_pod *pod, const char *pod_key)
{
    struct qent *e = gs__strmap_get(&q->map, pod_key);
    return e ? refresh(q, e, pod) : GS_ENOENT;
}

/*--- Batches (see the top of the file) ---*/

/* Would reactivating pods one by one change nothing but the seqs of the
 * last batch's entries still in activeQ? Changes nothing itself, and reads
 * only the batch's arrays while the pods are those entries'. */
static bool batch_holds(const struct gs_sched_queue *q, const struct gs_pod *const *pods, size_t n)
{
    const struct batch *b = &q->batch;
    if (!b->valid || b->end != q->seq || b->at != gs_clock_now(q->clock)) return false;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        while (j < b->n && !b->v[j]) j++;
        if (j < b->n && b->pod[j] == pods[i]) {
            j++;
            continue;
        }
        /* Not the batch's next entry: fine only when the queue does not hold it. */
        char key[GS__KEY_MAX];
        gs__pod_key(pods[i], key, sizeof key);
        if (gs__strmap_get(&q->map, key)) return false;
    }
    for (; j < b->n; j++)
        if (b->v[j]) return false;
    return true;
}

/* The batch's entries get the seqs one by one reactivation would give them,
 * in their order; the holes close. Returns how many. */
static size_t batch_renumber(struct gs_sched_queue *q)
{
    struct batch *b = &q->batch;
    size_t m = 0;
    for (size_t j = 0; j < b->n; j++) {
        struct qent *e = b->v[j];
        if (!e) continue;
        e->qp.seq = q->seq++;
        e->batch_idx = m;
        b->pod[m] = b->pod[j];
        b->v[m++] = e;
    }
    b->n = m;
    b->end = q->seq;
    b->kept++;
    return m;
}

static void batch_clear(struct gs_sched_queue *q)
{
    struct batch *b = &q->batch;
    for (size_t j = 0; j < b->n; j++)
        if (b->v[j]) b->v[j]->in_batch = false, b->v[j]->fresh = false;
    b->n = 0;
    b->valid = false;
}

static bool batch_reserve(struct batch *b, size_t n)
{
    if (n <= b->cap) return true;
    struct qent **nv = realloc(b->v, n * sizeof *nv);
    if (!nv) return false;
    b->v = nv;
    const struct gs_pod **np = realloc(b->pod, n * sizeof *np);
    if (!np) return false;
    b->pod = np;
    b->cap = n;
    return true;
}

/* One by one, recording the entries as the new batch. */
static size_t reactivate_each(struct gs_sched_queue *q, const struct gs_pod *const *pods, size_t n)
{
    struct batch *b = &q->batch;
    batch_clear(q);
    bool record = batch_reserve(b, n); /* else no batch: the next one goes one by one too */
    size_t done = 0;
    for (size_t i = 0; i < n; i++) {
        char key[GS__KEY_MAX];
        gs__pod_key(pods[i], key, sizeof key);
        struct qent *e = gs__strmap_get(&q->map, key);
        if (!e || refresh(q, e, pods[i]) != 0) continue; /* a duplicate leaves its earlier place */
        done++;
        if (!record) continue;
        e->fresh = true;
        e->in_batch = true;
        e->batch_idx = b->n;
        b->pod[b->n] = pods[i];
        b->v[b->n++] = e;
    }
    b->end = q->seq;
    b->at = gs_clock_now(q->clock);
    b->valid = record;
    return done;
}

size_t gs_sched_queue_reactivate_many(struct gs_sched_queue *q, const struct gs_pod *const *pods, size_t n)
{
    return batch_holds(q, pods, n) ? batch_renumber(q) : reactivate_each(q, pods, n);
}

size_t gs_sched_queue_batches_kept(const struct gs_sched_queue *q) { return q->batch.kept; }

/* Due backoffs to activeQ; unschedulable pods past their deadline back too. */
static void flush(struct gs_sched_queue *q, int64_t now)
{
    while (q->backoff.n && q->backoff.v[0]->ready_ns <= now) {
        struct qent *e = q->backoff.v[0];
        heap_remove(q, &q->backoff, 0);
        unwake(q, e);
        to_active(q, e);
    }
    if (now < q->flush_at) return;
    q->flush_at = INT64_MAX;
    for (size_t i = 0; i < q->nunsched;) {
        struct qent *e = q->unsched[i];
        int64_t due = e->unsched_since + q->opts.max_unschedulable_ns;
        if (due > now) {
            if (due < q->flush_at) q->flush_at = due;
            i++;
            continue;
        }
        unsched_remove(q, e); /* moves the last entry into i */
        release(q, e, now, false);
    }
}

/* activeQ is empty: every woken pod in backoffQ moves to it, where QueueSort
 * orders them. The heap is split in one pass and rebuilt (Floyd), so the
 * order the survivors come out in is that of their ready times, as before. */
static void promote_woken(struct gs_sched_queue *q)
{
    struct heap *h = &q->backoff;
    size_t keep = 0, nw = 0;
    struct qent **woken = malloc(q->nwoken * sizeof *woken);
    if (!woken) return; /* they wait their backoff out */
    for (size_t i = 0; i < h->n; i++) {
        struct qent *e = h->v[i];
        if (e->woken && nw < q->nwoken) woken[nw++] = e;
        else heap_set(h, keep++, e);
    }
    h->n = keep;
    for (size_t i = keep / 2; i-- > 0;) sift_down(q, h, i);
    for (size_t i = 0; i < nw; i++) {
        unwake(q, woken[i]);
        to_active(q, woken[i]);
    }
    free(woken);
}

bool gs_sched_queue_pop(struct gs_sched_queue *q, struct gs_queued_pod *out)
{
    flush(q, gs_clock_now(q->clock));
    if (!q->active.n && q->nwoken) promote_woken(q);
    if (!q->active.n) return false;
    struct qent *e = q->active.v[0];
    heap_remove(q, &q->active, 0);
    unfresh(q, e);
    e->where = W_INFLIGHT;
    e->popped_at = q->event_no;
    *out = e->qp;
    return true;
}

static int64_t backoff_for(const struct gs_sched_queue *q, int32_t attempts)
{
    int64_t d = q->opts.initial_backoff_ns;
    for (int32_t i = 1; i < attempts && d < q->opts.max_backoff_ns; i++) d *= 2;
    return d < q->opts.max_backoff_ns ? d : q->opts.max_backoff_ns;
}

static bool missed_event(const struct gs_sched_queue *q, const struct qent *e, unsigned mask)
{
    for (int b = 0; b < NEVENTS; b++)
        if ((mask >> b) & 1 && q->last_event[b] > e->popped_at) return true;
    return false;
}

int gs_sched_queue_requeue(struct gs_sched_queue *q, const struct gs_queued_pod *qp, bool unschedulable,
                           unsigned event_mask)
{
    return gs_sched_queue_requeue_hinted(q, qp, unschedulable, event_mask, 0);
}

int gs_sched_queue_requeue_hinted(struct gs_sched_queue *q, const struct gs_queued_pod *qp, bool unschedulable,
                                  unsigned event_mask, unsigned checked)
{
    char key[GS__KEY_MAX];
    gs__pod_key(qp->pod, key, sizeof key);
    struct qent *e = gs__strmap_get(&q->map, key);
    if (!e) return GS_ENOENT;
    if (e->where != W_INFLIGHT) return GS_ESTATE;
    int64_t now = gs_clock_now(q->clock);
    e->qp.attempts = qp->attempts + 1;
    e->ready_ns = now + backoff_for(q, e->qp.attempts);
    if (!event_mask) event_mask = GS_EV_ALL;
    if (!unschedulable) return to_backoff(q, e, false);
    /* An event it waits for went by while it was in flight: as if it had
     * come a moment later and moved it. */
    if (missed_event(q, e, event_mask)) return to_backoff(q, e, true);
    e->checked = checked & event_mask;
    return to_unsched(q, e, event_mask);
}

void gs_sched_queue_done(struct gs_sched_queue *q, const char *pod_key) { (void)gs_sched_queue_delete(q, pod_key); }

size_t gs_sched_queue_on_event(struct gs_sched_queue *q, enum gs_cluster_event ev)
{
    q->event_no++;
    for (int b = 0; b < NEVENTS; b++)
        if (((unsigned)ev >> b) & 1) q->last_event[b] = q->event_no;
    int64_t now = gs_clock_now(q->clock);
    size_t moved = 0;
    for (size_t i = 0; i < q->nunsched;) {
        struct qent *e = q->unsched[i];
        if (!(e->mask & (unsigned)ev)) {
            i++;
            continue;
        }
        unsched_remove(q, e);
        release(q, e, now, true);
        moved++;
    }
    return moved;
}

void gs_sched_queue_set_hint(struct gs_sched_queue *q, gs_queue_hint_fn fn, void *ctx)
{
    q->hint = fn;
    q->hint_ctx = ctx;
}

size_t gs_sched_queue_on_pod_event(struct gs_sched_queue *q, enum gs_cluster_event ev, const struct gs_pod *pod,
                                   bool arrived)
{
    q->event_no++;
    bool any = false;
    for (int b = 0; b < NEVENTS; b++)
        if (((unsigned)ev >> b) & 1) q->last_event[b] = q->event_no, any |= q->waiting[b] > 0;
    if (!any) return 0;
    int64_t now = gs_clock_now(q->clock);
    size_t moved = 0;
    for (size_t i = 0; i < q->nunsched;) {
        struct qent *e = q->unsched[i];
        unsigned hit = e->mask & (unsigned)ev;
        /* Only events it waits for through the hint: ask whether this pod helps. */
        if (!hit || (!(hit & ~e->checked) && q->hint && !q->hint(q->hint_ctx, e->qp.pod, pod, arrived))) {
            i++;
            continue;
        }
        unsched_remove(q, e);
        release(q, e, now, true);
        moved++;
    }
    return moved;
}

int64_t gs_sched_queue_next_ready(const struct gs_sched_queue *q)
{
    return q->backoff.n ? q->backoff.v[0]->ready_ns : -1;
}

size_t gs_sched_queue_active_len(const struct gs_sched_queue *q) { return q->active.n; }
size_t gs_sched_queue_backoff_len(const struct gs_sched_queue *q) { return q->backoff.n; }
size_t gs_sched_queue_unschedulable_len(const struct gs_sched_queue *q) { return q->nunsched; }
