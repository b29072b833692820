/*
 * admission_fuzz.h - a random-operation driver for admission, shared by the
 * bounded invariant test (test_admission_invariants.c) and the fuzz target
 * (tests/fuzz/fuzz_admission.c).
 *
 * The input bytes pick a small cluster, a cohort of three ClusterQueues with
 * random nominal quotas, borrowing/lending limits and preemption policies,
 * then a sequence of operations: submit a workload (1-3 pods of whole or
 * half GPUs), finish one, move the clock, run an admission cycle and bind
 * what it admitted. After every operation the checker runs: quota never
 * exceeded anywhere in the tree, each queue's usage equal to the sum of its
 * admitted workloads, the cache's aggregates equal to its pods, no workload
 * evicted before it ran the minimum runtime, and none evicted more often than
 * the per-window cap (the eviction rules are drawn from the input too).
 */
#ifndef GS_TESTS_ADMISSION_FUZZ_H
#define GS_TESTS_ADMISSION_FUZZ_H

#include "core/codec.h"
#include "sched/admission/admission.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Binds each pod of w on the first node and GPUs that fit (the test plays the scheduler). */
static inline int adm_bind_workload(struct gs_cache *c, const struct gs_workload *w)
{
    int placed = 0;
    for (size_t i = 0; i < w->npods; i++) {
        const struct gs_pod *p = w->pods[i];
        char key[256];
        gs_meta_key(&p->meta, key, sizeof key);
        if (gs_cache_pod_assignment(c, key)) continue;
        for (int32_t n = 0; n < gs_cache_node_count(c); n++) {
            const struct gs_node_info *ni = gs_cache_node(c, n);
            struct gs_assignment a = {.node = n, .milli = p->demand.gpu_milli};
            int32_t need = p->demand.gpu_count;
            for (int32_t g = 0; g < ni->ngpus && need; g++)
                if (ni->gpus[g].milli_free >= p->demand.gpu_milli) a.gpu_mask |= 1ULL << g, need--;
            if (need || !gs_cache_fits(c, p, &a)) continue;
            if (gs_cache_add_bound(c, p, &a) == 0) placed++;
            break;
        }
    }
    return placed;
}

static inline void adm_unbind_workload(struct gs_cache *c, const struct gs_workload *w)
{
    for (size_t i = 0; i < w->npods; i++) {
        char key[256];
        gs_meta_key(&w->pods[i]->meta, key, sizeof key);
        gs_cache_remove_pod(c, key);
    }
}

struct adm_fuzz {
    const uint8_t *p;
    size_t n, at;
};

static inline unsigned adm_byte(struct adm_fuzz *f)
{
    return f->at < f->n ? f->p[f->at++] : 0;
}

/* Decodes one JSON document into the tree. */
static inline int adm_add_doc(struct gs_queue_tree *t, const char *text, struct gs_diags *d)
{
    struct gs_docs docs = {0};
    int rc = gs_decode_stream(text, strlen(text), &docs, d, NULL);
    for (size_t i = 0; !rc && i < docs.n; i++) {
        struct gs_object *o = NULL;
        rc = gs_object_decode(docs.docs[i], &o, d);
        if (!rc) rc = gs_queue_tree_add_object(t, o, d);
        gs_object_free(o);
    }
    gs_docs_free(&docs);
    return rc;
}

static inline int adm_fuzz_tree(struct adm_fuzz *f, struct gs_queue_tree *t)
{
    static const char *const pol[] = {"Never", "LowerPriority", "Any"};
    struct gs_diags d = {0};
    int rc = 0;
    gs_queue_tree_init(t);
    for (int q = 0; q < 3 && !rc; q++) {
        unsigned b = adm_byte(f), c = adm_byte(f);
        char lim[96] = "", buf[1024];
        if (b & 1) snprintf(lim, sizeof lim, ", \"borrowingLimit\": %u", (c >> 4) % 5);
        if (b & 2) snprintf(lim + strlen(lim), sizeof lim - strlen(lim), ", \"lendingLimit\": %u", c % 5);
        snprintf(buf, sizeof buf,
                 "{\"apiVersion\": \"kueue.x-k8s.io/v1beta2\", \"kind\": \"ClusterQueue\","
                 " \"metadata\": {\"name\": \"cq%d\"}, \"spec\": {\"cohortName\": \"co\","
                 " \"queueingStrategy\": \"%s\", \"preemption\": {\"reclaimWithinCohort\": \"%s\","
                 " \"withinClusterQueue\": \"%s\"}, \"resourceGroups\": [{\"coveredResources\":"
                 " [\"nvidia.com/gpu\"], \"flavors\": [{\"name\": \"f\", \"resources\": [{\"name\":"
                 " \"nvidia.com/gpu\", \"nominalQuota\": %u%s}]}]}]}}\n",
                 q, (b & 4) ? "StrictFIFO" : "BestEffortFIFO", pol[(b >> 3) % 3], pol[(b >> 5) % 2],
                 (b >> 6) + (c % 5), lim);
        rc = adm_add_doc(t, buf, &d);
    }
    if (!rc) rc = gs_queue_tree_finalize(t, &d);
    gs_diags_free(&d);
    return rc;
}

struct adm_fuzz_stats {
    long admitted, evicted, finished;
};

/* Runs the operations encoded in data; 0, or GS_ESTATE with why when an
 * invariant broke. st (may be NULL) counts what happened. */
static inline int adm_fuzz_run(const uint8_t *data, size_t size, char *why, size_t len, struct adm_fuzz_stats *st)
{
    struct adm_fuzz f = {data, size, 0};
    struct gs_queue_tree t;
    if (adm_fuzz_tree(&f, &t)) {
        gs_queue_tree_free(&t);
        return 0;
    }
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *cache = gs_cache_new(&clk);
    int nnodes = 1 + (int)(adm_byte(&f) % 3);
    for (int i = 0; i < nnodes; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        struct gs_node_spec s = {.name = name, .cpu_milli = 64000, .mem_bytes = 1LL << 38, .gpu_model = "G",
                                 .ngpus = (adm_byte(&f) & 1) ? 8 : 4, .gpu_mem_mib = 16384};
        gs_cache_add_node_spec(cache, &s);
    }
    static const int64_t runtimes[4] = {-1, 60, 300, 0};
    unsigned r = adm_byte(&f);
    struct gs_admission_opts o = {.starvation_wait_ns = 60 * GS_NS_PER_SEC, .large_gpu_milli = 4000,
                                  .history_weight = 0.5, .max_checks = 64,
                                  .reclaim_min_runtime_ns = runtimes[r % 4] * GS_NS_PER_SEC,
                                  .reclaim_wait_ns = (r & 4) ? 120 * GS_NS_PER_SEC : -1,
                                  .max_preemptions = (r & 8) ? 2 : 1, .preemption_window_ns = 600 * GS_NS_PER_SEC,
                                  .reclaim_above_nominal = (r & 16) != 0, .max_victim_searches = (r & 32) ? 1 : 0,
                                  .evict_charge = (r & 64) ? -1 : 0, .drain = (r & 128) != 0,
                                  .pin_placement = (r & 128) != 0, .impatient_share = (r & 128) ? 0.5 : 0};
    int64_t min_runtime = runtimes[r % 4] ? runtimes[r % 4] * GS_NS_PER_SEC : 600 * GS_NS_PER_SEC;
    struct gs_admission *a = NULL;
    int rc = gs_admission_new(&t, cache, &clk, &o, &a, NULL);
    struct gs_pod **pods = NULL;
    size_t npods = 0;
    int64_t now = 0;
    for (int op = 0; !rc && f.at < f.n && op < 400; op++) {
        unsigned b = adm_byte(&f);
        if (b % 5 <= 1) { /* submit */
            unsigned c = adm_byte(&f);
            size_t k = 1 + c % 3;
            struct gs_pod **np = realloc(pods, (npods + k) * sizeof *np);
            if (!np) break;
            pods = np;
            char qn[8], key[32];
            snprintf(qn, sizeof qn, "cq%u", (b >> 3) % 3);
            snprintf(key, sizeof key, "t/w%d", op);
            for (size_t i = 0; i < k; i++) {
                struct gs_pod *p = calloc(1, sizeof *p);
                char name[32];
                snprintf(name, sizeof name, "w%d-%zu", op, i);
                p->meta.name = strdup(name);
                p->meta.namespace_ = strdup("t");
                p->demand.gpu_count = 1 + (int32_t)((c >> 2) % 4);
                p->demand.gpu_milli = (c & 0x40) ? 500 : 1000;
                if (p->demand.gpu_milli < 1000) p->demand.gpu_count = 1;
                pods[npods++] = p;
            }
            struct gs_workload_spec s = {.key = key, .namespace_ = "t", .queue = qn, .priority = (int32_t)(c >> 7),
                                         .pods = (const struct gs_pod *const *)&pods[npods - k], .npods = k,
                                         .est_duration_ns = (int64_t)(1 + (b >> 5)) * 30 * GS_NS_PER_SEC};
            gs_admission_submit(a, &s);
        } else if (b % 5 == 2) { /* finish an admitted workload, or one pod of it */
            size_t cnt = gs_admission_count(a);
            for (size_t i = 0; cnt && i < cnt; i++) {
                const struct gs_workload *w = gs_admission_workload(a, (int32_t)((i + (b >> 3)) % cnt));
                if (w->state != GS_WL_ADMITTED) continue;
                if ((b & 0x80) && w->npods > 1) {
                    const struct gs_pod *p = w->pods[(b >> 3) % w->npods];
                    char key[256];
                    gs_meta_key(&p->meta, key, sizeof key);
                    gs_cache_remove_pod(cache, key);
                    rc = gs_admission_pod_finished(a, w->id, p);
                    break;
                }
                adm_unbind_workload(cache, w);
                rc = gs_admission_finish(a, w->id);
                if (st) st->finished++;
                break;
            }
        } else { /* time passes, a cycle runs, admitted pods are bound */
            if (b % 5 == 3) now += (int64_t)(b >> 3) * 10 * GS_NS_PER_SEC;
            gs_clock_set(&clk, now);
            struct gs_admission_result res;
            rc = gs_admission_cycle(a, &res);
            if (st && !rc) st->admitted += (long)res.nadmitted, st->evicted += (long)res.nevicted;
            for (size_t i = 0; !rc && i < res.nadmitted; i++)
                adm_bind_workload(cache, gs_admission_workload(a, res.admitted[i]));
            for (size_t i = 0; !rc && i < res.nevicted; i++) {
                const struct gs_workload *w = gs_admission_workload(a, res.evicted[i]);
                if (w->state != GS_WL_PENDING) {
                    snprintf(why, len, "%s evicted and readmitted in one cycle", w->key);
                    rc = GS_ESTATE;
                } else if (min_runtime > 0 && now - w->admitted_ns < min_runtime) {
                    snprintf(why, len, "%s evicted after running %lld s, minimum %lld s", w->key,
                             (long long)((now - w->admitted_ns) / GS_NS_PER_SEC),
                             (long long)(min_runtime / GS_NS_PER_SEC));
                    rc = GS_ESTATE;
                }
            }
        }
        if (!rc) rc = gs_admission_check(a, why, len);
        if (!rc) rc = gs_cache_check(cache, why, len);
    }
    if (!rc && a) { /* observability must work on any state */
        json_t *j = gs_admission_status_json(a);
        json_decref(j);
        json_decref(gs_admission_queues_json(a, 4, 2));
        if (gs_admission_count(a)) json_decref(gs_admission_explain_json(a, gs_admission_workload(a, 0)->key));
    }
    gs_admission_free(a);
    gs_cache_free(cache);
    for (size_t i = 0; i < npods; i++) {
        free(pods[i]->meta.name);
        free(pods[i]->meta.namespace_);
        free(pods[i]);
    }
    free(pods);
    gs_queue_tree_free(&t);
    return rc;
}

#endif
