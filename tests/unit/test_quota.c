/*
 * test_quota.c - the queue tree built from Kueue and Volcano objects, and
 * quota accounting: borrowing and lending limits, cohort sums, and the
 * invariant that no queue ever goes over nominal + borrowing limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/codec.h"
#include "sched/admission/quota.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPU(n) ((int64_t)(n) * 1000)

/* Decodes every document of yaml into the tree, then finalizes it. */
static int load(struct gs_queue_tree *t, const char *yaml, struct gs_diags *d)
{
    struct gs_docs docs = {0};
    gs_queue_tree_init(t);
    int rc = gs_decode_stream(yaml, strlen(yaml), &docs, d, NULL);
    for (size_t i = 0; !rc && i < docs.n; i++) {
        struct gs_object *o = NULL;
        rc = gs_object_decode(docs.docs[i], &o, d);
        if (!rc) rc = gs_queue_tree_add_object(t, o, d);
        gs_object_free(o);
    }
    gs_docs_free(&docs);
    return rc ? rc : gs_queue_tree_finalize(t, d);
}

static const char *const COHORT =
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: h100}\n"
    "spec: {nodeLabels: {nvidia.com/gpu.product: H100}}\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: team-a}\n"
    "spec:\n  cohortName: research\n  queueingStrategy: StrictFIFO\n"
    "  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}\n"
    "  fairSharing: {weight: \"2\"}\n"
    "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n"
    "    - name: h100\n      resources: [{name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 2}]\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-b}\n"
    "spec:\n  cohort: research\n"
    "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n"
    "    - name: h100\n      resources: [{name: nvidia.com/gpu, nominalQuota: 6, lendingLimit: 2}]\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns-a}\n"
    "spec: {clusterQueue: team-a}\n";

static void kueue_objects_map_onto_the_tree(void **st)
{
    (void)st;
    struct gs_queue_tree t;
    struct gs_diags d = {0};
    assert_int_equal(load(&t, COHORT, &d), 0);
    int32_t a = gs_queue_tree_find(&t, "team-a"), b = gs_queue_tree_find(&t, "team-b");
    int32_t c = gs_queue_tree_find(&t, "research");
    assert_true(a >= 0 && b >= 0 && c >= 0);
    assert_int_equal(t.nodes[c].kind, GS_QT_COHORT);
    assert_int_equal(t.nodes[a].parent, c); /* v1beta2 cohortName */
    assert_int_equal(t.nodes[b].parent, c); /* v1beta1 cohort */
    assert_int_equal(t.nodes[a].strategy, GS_QT_STRICT_FIFO);
    assert_int_equal(t.nodes[b].strategy, GS_QT_BEST_EFFORT_FIFO);
    assert_int_equal(t.nodes[a].reclaim, GS_PREEMPT_ANY);
    assert_int_equal(t.nodes[a].within, GS_PREEMPT_LOWER_PRIORITY);
    assert_int_equal(t.nodes[b].reclaim, GS_PREEMPT_NEVER);
    assert_true(t.nodes[a].weight == 2.0 && t.nodes[b].weight == 1.0);
    int f = gs_queue_tree_flavor(&t, "h100"), r = gs_queue_tree_res(&t, "nvidia.com/gpu");
    const struct gs_qt_quota *qa = &t.nodes[a].quota[GS_QT_FR(f, r)], *qb = &t.nodes[b].quota[GS_QT_FR(f, r)];
    assert_true(qa->set);
    assert_int_equal(qa->nominal, GPU(4));
    assert_int_equal(qa->borrowing_limit, GPU(2));
    assert_true(qa->lending_limit == GS_QT_UNLIMITED);
    assert_int_equal(qb->lending_limit, GPU(2));
    assert_string_equal(gs_labels_get(&t.flavors[f].node_labels, "nvidia.com/gpu.product"), "H100");
    assert_int_equal(gs_queue_tree_resolve(&t, "ns-a", "lq"), a);
    assert_int_equal(gs_queue_tree_resolve(&t, "other", "lq"), -1);
    assert_int_equal(gs_queue_tree_resolve(&t, NULL, "team-b"), b);
    gs_queue_tree_free(&t);
    gs_diags_free(&d);
}

static void dangling_references_are_reported(void **st)
{
    (void)st;
    struct gs_queue_tree t;
    struct gs_diags d = {0};
    const char *y = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, namespace: x}\n"
                    "spec: {clusterQueue: nowhere}\n";
    assert_int_equal(load(&t, y, &d), GS_EINVAL);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].msg, "nowhere"));
    gs_queue_tree_free(&t);
    gs_diags_free(&d);
    const char *v = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q1}\n"
                    "spec: {parent: ghost, weight: 1}\n";
    assert_int_equal(load(&t, v, &d), GS_EINVAL);
    assert_non_null(strstr(d.v[0].msg, "ghost"));
    gs_queue_tree_free(&t);
    gs_diags_free(&d);
}

static void borrowing_and_lending_limits(void **st)
{
    (void)st;
    struct gs_queue_tree t;
    struct gs_diags d = {0};
    assert_int_equal(load(&t, COHORT, &d), 0);
    struct gs_quota q;
    assert_int_equal(gs_quota_init(&q, &t), 0);
    int32_t a = gs_queue_tree_find(&t, "team-a"), b = gs_queue_tree_find(&t, "team-b");
    int32_t c = gs_queue_tree_find(&t, "research");
    int fr = GS_QT_FR(gs_queue_tree_flavor(&t, "h100"), gs_queue_tree_res(&t, "nvidia.com/gpu"));
    /* b keeps 6 - 2 = 4 for itself; the pool is a's 4 and b's lendable 2 */
    assert_int_equal(q.guaranteed[b][fr], GPU(4));
    assert_int_equal(q.subtree[c][fr], GPU(6));
    /* a: nominal 4 + borrowingLimit 2 */
    assert_int_equal(gs_quota_available(&q, a, fr), GPU(6));
    /* b: its guarantee 4 + the whole pool 6 (no borrowing limit) */
    assert_int_equal(gs_quota_available(&q, b, fr), GPU(10));
    gs_qvec req = {0};
    req[fr] = GPU(6);
    assert_true(gs_quota_fits(&q, a, req, NULL));
    gs_quota_apply(&q, a, req, +1);
    assert_int_equal(gs_quota_borrowed(&q, a, fr), GPU(2));
    assert_int_equal(gs_quota_lent(&q, b, fr), GPU(2));
    /* cohort sum: a takes 6 from the pool, all of it */
    assert_int_equal(q.usage[c][fr], GPU(6));
    req[fr] = GPU(1);
    int bad = -1;
    assert_false(gs_quota_fits(&q, a, req, &bad)); /* over nominal + borrowing */
    assert_int_equal(bad, fr);
    /* b still has what its lending limit protects, and nothing more */
    assert_int_equal(gs_quota_available(&q, b, fr), GPU(4));
    req[fr] = GPU(4);
    gs_quota_apply(&q, b, req, +1);
    assert_int_equal(gs_quota_available(&q, b, fr), 0);
    char why[256];
    assert_int_equal(gs_quota_check(&q, why, sizeof why), 0);
    /* the checker catches a queue pushed past its limit */
    req[fr] = GPU(1);
    gs_quota_apply(&q, a, req, +1);
    assert_int_equal(gs_quota_check(&q, why, sizeof why), GS_ESTATE);
    assert_non_null(strstr(why, "team-a"));
    gs_quota_free(&q);
    gs_queue_tree_free(&t);
    gs_diags_free(&d);
}

/* Random admissions that respect gs_quota_fits never break the invariants. */
static void never_over_nominal_plus_borrowing(void **st)
{
    (void)st;
    struct gs_queue_tree t;
    gs_queue_tree_init(&t);
    const char *res[] = {"nvidia.com/gpu", "cpu"};
    int64_t g1[] = {GPU(4), 8000}, l1[] = {GPU(6), GS_QT_UNLIMITED};
    int64_t g2[] = {GPU(2), 4000}, l2[] = {GS_QT_UNLIMITED, 6000};
    int64_t g3[] = {0, 0};
    struct gs_qt_queue_spec s[] = {
        {.name = "org", .res = res, .guarantee = g1, .limit = l1, .nres = 2},
        {.name = "a", .parent = "org", .weight = 1, .res = res, .guarantee = g2, .limit = l2, .nres = 2},
        {.name = "b", .parent = "org", .weight = 2, .res = res, .guarantee = g3, .nres = 2},
        {.name = "c", .weight = 1, .res = res, .guarantee = g3, .nres = 2},
    };
    for (size_t i = 0; i < 4; i++) assert_int_equal(gs_queue_tree_add_queue(&t, &s[i]), 0);
    struct gs_diags d = {0};
    assert_int_equal(gs_queue_tree_finalize(&t, &d), 0);
    assert_int_equal(gs_queue_tree_set_capacity(&t, "nvidia.com/gpu", GPU(10)), 0);
    assert_int_equal(gs_queue_tree_set_capacity(&t, "cpu", 16000), 0);
    int32_t org = gs_queue_tree_find(&t, "org"), root = gs_queue_tree_find(&t, GS_QT_ROOT_NAME);
    int f = gs_queue_tree_flavor(&t, GS_QT_DEFAULT_FLAVOR);
    int gpu = GS_QT_FR(f, gs_queue_tree_res(&t, "nvidia.com/gpu"));
    /* org's own nominal is what its guarantee adds over a's and b's */
    assert_int_equal(t.nodes[org].quota[gpu].nominal, GPU(2));
    assert_int_equal(t.nodes[root].quota[gpu].nominal, GPU(6));
    struct gs_quota q;
    assert_int_equal(gs_quota_init(&q, &t), 0);
    assert_int_equal(q.subtree[root][gpu], GPU(10));
    int32_t leaves[] = {gs_queue_tree_find(&t, "a"), gs_queue_tree_find(&t, "b"), gs_queue_tree_find(&t, "c")};
    gs_qvec held[3] = {{0}};
    unsigned seed = 7;
    int admitted = 0, refused = 0;
    for (int it = 0; it < 4000; it++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 16) % 3);
        gs_qvec req = {0};
        req[gpu] = (int64_t)((seed >> 8) % 4) * 500;
        req[GS_QT_FR(f, 1)] = (int64_t)((seed >> 4) % 3) * 1000;
        if ((seed >> 20) % 3 == 0) { /* release what k holds */
            gs_quota_apply(&q, leaves[k], held[k], -1);
            memset(held[k], 0, sizeof held[k]);
        } else if (gs_quota_fits(&q, leaves[k], req, NULL)) {
            gs_quota_apply(&q, leaves[k], req, +1);
            for (int i = 0; i < GS_QT_NFR; i++) held[k][i] += req[i];
            admitted++;
        } else {
            refused++;
        }
        char why[256];
        assert_int_equal(gs_quota_check(&q, why, sizeof why), 0);
        int64_t total = q.usage[leaves[0]][gpu] + q.usage[leaves[1]][gpu] + q.usage[leaves[2]][gpu];
        assert_true(total <= GPU(10));                    /* the cluster */
        assert_true(q.usage[leaves[0]][gpu] + q.usage[leaves[1]][gpu] <= GPU(6)); /* org's capability */
        assert_true(q.usage[leaves[0]][GS_QT_FR(f, 1)] <= 6000);                  /* a's cpu limit */
    }
    assert_true(admitted > 100 && refused > 100);
    gs_quota_free(&q);
    gs_queue_tree_free(&t);
    gs_diags_free(&d);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* The manifests shipped in examples/ load into the tree. */
static void example_manifests_load(void **st)
{
    (void)st;
    struct gs_queue_tree t;
    struct gs_diags d = {0};
    assert_int_equal(load(&t, slurp(GS_TEST_DATA "/../../examples/kueue.yaml"), &d), 0);
    int32_t cq = gs_queue_tree_find(&t, "research-cq");
    assert_true(cq >= 0);
    assert_int_equal(gs_queue_tree_resolve(&t, "research", "research"), cq);
    assert_int_equal(t.nodes[t.nodes[cq].parent].kind, GS_QT_COHORT);
    int fr = GS_QT_FR(gs_queue_tree_flavor(&t, "h100"), gs_queue_tree_res(&t, "nvidia.com/gpu"));
    assert_int_equal(t.nodes[cq].quota[fr].borrowing_limit, GPU(16));
    gs_queue_tree_free(&t);
    assert_int_equal(load(&t, slurp(GS_TEST_DATA "/../../examples/queue-tree.yaml"), &d), 0);
    int32_t research = gs_queue_tree_find(&t, "research"), root = gs_queue_tree_find(&t, "root");
    assert_true(research >= 0 && root >= 0);
    assert_int_equal(t.nodes[research].parent, root);
    assert_true(t.nodes[research].weight == 2.0);
    gs_queue_tree_free(&t);
    gs_diags_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kueue_objects_map_onto_the_tree),
        cmocka_unit_test(dangling_references_are_reported),
        cmocka_unit_test(borrowing_and_lending_limits),
        cmocka_unit_test(never_over_nominal_plus_borrowing),
        cmocka_unit_test(example_manifests_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
