/*
 * test_pdb_budget.c - PodDisruptionBudgets in the scheduler: decoding (and
 * its error messages), which pods a budget covers, the cache feed by store
 * key, and preemption's victim order as kube's DefaultPreemption has it:
 * nodes with fewer budget violations win, and violating victims are the
 * first reprieved; with budgets that allow the disruption the plan is the
 * one without budgets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/pdb_budget.h"
#include "sched/cache_feed.h"
#include "sched/preemption_core.h"
#include "sched/topology_core.h"
#include "sched_fixture.h"

static struct gs_clock clk;

static json_t *pdb_doc(const char *ns, const char *name, const char *selector, int allowed)
{
    char doc[1024];
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"policy/v1\",\"kind\":\"PodDisruptionBudget\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"%s\"},\"spec\":{\"minAvailable\":1%s%s},\"status\":{\"disruptionsAllowed\":%d}}",
             name, ns, selector ? ",\"selector\":" : "", selector ? selector : "", allowed);
    json_t *j = json_loads(doc, 0, NULL);
    assert_non_null(j);
    return j;
}

static void test_decode_and_covers(void **st)
{
    (void)st;
    json_t *j = json_loads("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns1\"},"
                           "\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"db\"}}},"
                           "\"status\":{\"disruptionsAllowed\":2,\"disruptedPods\":{\"db-0\":\"2026-01-01T00:00:00Z\"}}}",
                           0, NULL);
    struct gs_pdb_budget b;
    struct gs_diags d = {0};
    assert_int_equal(gs_pdb_budget_decode(j, &b, &d), 0);
    assert_string_equal(b.ns, "ns1");
    assert_string_equal(b.name, "p");
    assert_int_equal(b.disruptions_allowed, 2);
    assert_true(gs_pdb_budget_disrupted(&b, "db-0"));
    assert_false(gs_pdb_budget_disrupted(&b, "db-1"));
    struct gs_labels db = {0}, web = {0}, none = {0};
    gs_labels_set(&db, "app", "db");
    gs_labels_set(&web, "app", "web");
    assert_true(gs_pdb_budget_covers(&b, "ns1", &db));
    assert_false(gs_pdb_budget_covers(&b, "ns2", &db));
    assert_false(gs_pdb_budget_covers(&b, "ns1", &web));
    assert_false(gs_pdb_budget_covers(&b, "ns1", &none));
    gs_pdb_budget_clear(&b);
    json_decref(j);
    /* No status: no disruption allowed; an empty selector covers nothing for preemption. */
    j = json_loads("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"selector\":{}}}", 0, NULL);
    assert_int_equal(gs_pdb_budget_decode(j, &b, &d), 0);
    assert_string_equal(b.ns, "default");
    assert_int_equal(b.disruptions_allowed, 0);
    assert_false(gs_pdb_budget_covers(&b, "default", &db));
    gs_pdb_budget_clear(&b);
    json_decref(j);
    gs_labels_free(&db), gs_labels_free(&web);

    static const struct {
        const char *doc, *path, *msg;
    } bad[] = {
        {"{\"metadata\":{\"name\":\"p\"},\"status\":{\"disruptionsAllowed\":-1}}", "status.disruptionsAllowed",
         "invalid value -1: must be at least 0"},
        {"{\"metadata\":{\"name\":\"p\"},\"status\":{\"disruptionsAllowed\":\"one\"}}", "status.disruptionsAllowed",
         "expected an integer, got string"},
        {"{\"metadata\":{\"name\":\"p\"},\"spec\":{\"selector\":{\"matchExpressions\":[{\"key\":\"a\","
         "\"operator\":\"Near\"}]}}}",
         "spec.selector.matchExpressions[0].operator", "Near"},
        {"{\"metadata\":{}}", "metadata.name", "is required"},
        {"[1]", "", "expected an object, got array"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = json_loads(bad[i].doc, JSON_DECODE_ANY, NULL);
        assert_non_null(j);
        assert_int_equal(gs_pdb_budget_decode(j, &b, &d), GS_EINVAL);
        bool found = false;
        for (size_t k = 0; k < d.n && !found; k++) found = !strcmp(d.v[k].path, bad[i].path) && strstr(d.v[k].msg, bad[i].msg);
        if (!found) fail_msg("case %zu: want %s: %s, got %s: %s", i, bad[i].path, bad[i].msg, d.n ? d.v[0].path : "-",
                             d.n ? d.v[0].msg : "-");
        assert_null(b.name); /* cleared on failure */
        gs_diags_free(&d);
        json_decref(j);
    }
}

static void test_cache_feed(void **st)
{
    (void)st;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    size_t n;
    json_t *j = pdb_doc("ns1", "p", "{\"matchLabels\":{\"app\":\"db\"}}", 1);
    assert_int_equal(gs_cache_feed(c, "poddisruptionbudgets.policy/ns1/p", j), 0);
    json_decref(j);
    j = pdb_doc("ns1", "p", "{\"matchLabels\":{\"app\":\"db\"}}", 0); /* status changed: replaced */
    assert_int_equal(gs_cache_feed(c, "poddisruptionbudgets.policy/ns1/p", j), 0);
    json_decref(j);
    const struct gs_pdb_budget *const *v = gs_cache_pdbs(c, &n);
    assert_int_equal(n, 1);
    assert_int_equal(v[0]->disruptions_allowed, 0);
    /* A broken version drops the budget rather than keep the old one. */
    j = json_loads("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns1\"},\"status\":{\"disruptionsAllowed\":-3}}", 0, NULL);
    assert_int_equal(gs_cache_feed(c, "poddisruptionbudgets.policy/ns1/p", j), GS_EINVAL);
    json_decref(j);
    gs_cache_pdbs(c, &n);
    assert_int_equal(n, 0);
    j = pdb_doc("ns1", "q", "{\"matchLabels\":{\"app\":\"db\"}}", 0);
    assert_int_equal(gs_cache_feed(c, "poddisruptionbudgets.policy/ns1/q", j), 0);
    json_decref(j);
    assert_int_equal(gs_cache_feed(c, "poddisruptionbudgets.policy/ns1/q", NULL), 0); /* deleted */
    gs_cache_pdbs(c, &n);
    assert_int_equal(n, 0);
    /* Namespaces: their labels, forgotten on delete. */
    j = json_loads("{\"metadata\":{\"name\":\"team\",\"labels\":{\"tier\":\"gold\"}}}", 0, NULL);
    assert_int_equal(gs_cache_feed(c, "namespaces/team", j), 0);
    json_decref(j);
    assert_string_equal(gs_labels_get(gs_cache_namespace_labels(c, "team"), "tier"), "gold");
    assert_int_equal(gs_cache_feed(c, "namespaces/team", NULL), 0);
    assert_null(gs_labels_get(gs_cache_namespace_labels(c, "team"), "tier"));
    assert_int_equal(gs_cache_feed(c, "pods/default/x", NULL), GS_ENOENT);
    assert_int_equal(gs_cache_feed(c, "poddisruptionbudgets.policy/noname", NULL), GS_EINVAL);
    gs_cache_free(c);
}

/* Resource fit alone: enough CPU and GPUs. */
static bool fits(void *ctx, const struct gs_pod *pod, struct gs_node_info *n)
{
    (void)ctx;
    struct gs_gpu_choice ch;
    return pod->demand.cpu_milli <= n->cpu_alloc - n->cpu_used &&
           gs_topo_choose(n, pod->demand.gpu_count, pod->demand.gpu_milli, 0, ~0ULL, &ch);
}

struct env {
    struct gs_cache *c;
    struct gs_pod *pods[8];
    int n;
};

static struct gs_pod *bind(struct env *e, const char *name, int gpus, int prio, const char *labels, int node,
                           uint64_t mask)
{
    struct gs_pod *p = fx_pod_ex(name, gpus, 0, 1, prio, NULL, labels, NULL, NULL);
    assert_non_null(p);
    struct gs_assignment a = {node, mask, 1000, 0};
    assert_int_equal(gs_cache_add_bound(e->c, p, &a), 0);
    return e->pods[e->n++] = p;
}

static void put_pdb(struct gs_cache *c, const char *name, const char *app, int allowed)
{
    char sel[128], key[128];
    snprintf(sel, sizeof sel, "{\"matchLabels\":{\"app\":\"%s\"}}", app);
    snprintf(key, sizeof key, "poddisruptionbudgets.policy/default/%s", name);
    json_t *j = pdb_doc("default", name, sel, allowed);
    assert_int_equal(gs_cache_feed(c, key, j), 0);
    json_decref(j);
}

/* The victims' names of a plan for a 4-GPU preemptor of priority 10, comma-separated. */
static void plan_for(struct gs_cache *c, int gpus, char *out, size_t len, int32_t *node)
{
    struct gs_preempt_opts o = {0};
    struct gs_preemption *p = gs_preemption_new(&o, &clk, c);
    struct gs_pod *hp = fx_pod("hp", gpus, 10, NULL);
    const struct gs_pod *m[1] = {hp};
    struct gs_preempt_plan plan;
    assert_int_equal(gs_preempt_find(p, m, 1, fits, NULL, &plan), 0);
    out[0] = 0;
    for (size_t i = 0; i < plan.nvictims; i++)
        snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? "," : "", plan.victims[i]->meta.name);
    *node = plan.nodes[0];
    gs_preempt_plan_free(&plan);
    fx_check_cache(c); /* the search left the cache as it was */
    fx_pod_free(hp);
    gs_preemption_free(p);
}

static void test_fewest_violations_node_wins(void **st)
{
    (void)st;
    gs_clock_init_sim(&clk, 0);
    struct env e = {.c = gs_cache_new(&clk)};
    assert_int_equal(fx_add_node(e.c, "n0", 4, 64, 0, 0, NULL), 0);
    assert_int_equal(fx_add_node(e.c, "n1", 4, 64, 0, 0, NULL), 1);
    bind(&e, "a", 4, 1, "{\"app\":\"a\"}", 0, 0xf); /* the cheaper victim by priority */
    bind(&e, "b", 4, 5, "{\"app\":\"b\"}", 1, 0xf);
    char v[128];
    int32_t node;
    plan_for(e.c, 4, v, sizeof v, &node);
    assert_string_equal(v, "a");
    assert_int_equal(node, 0);
    /* A budget that allows no disruption of a: n1 (no violation) wins despite b's priority. */
    put_pdb(e.c, "pa", "a", 0);
    plan_for(e.c, 4, v, sizeof v, &node);
    assert_string_equal(v, "b");
    assert_int_equal(node, 1);
    /* Allowing one disruption: a is no violation, the plan is the one without budgets. */
    put_pdb(e.c, "pa", "a", 1);
    plan_for(e.c, 4, v, sizeof v, &node);
    assert_string_equal(v, "a");
    /* Both protected: best effort, the fewest violations then priority decide. */
    put_pdb(e.c, "pa", "a", 0);
    put_pdb(e.c, "pb", "b", 0);
    plan_for(e.c, 4, v, sizeof v, &node);
    assert_string_equal(v, "a");
    for (int i = 0; i < e.n; i++) fx_pod_free(e.pods[i]);
    gs_cache_free(e.c);
}

static void test_violating_victims_reprieved_first(void **st)
{
    (void)st;
    gs_clock_init_sim(&clk, 0);
    struct env e = {.c = gs_cache_new(&clk)};
    assert_int_equal(fx_add_node(e.c, "n0", 4, 64, 0, 0, NULL), 0);
    bind(&e, "x", 2, 1, "{\"app\":\"x\"}", 0, 0x3); /* low priority */
    bind(&e, "y", 2, 5, "{\"app\":\"y\"}", 0, 0xc);
    char v[128];
    int32_t node;
    /* Without budgets the more important y is reprieved and x goes. */
    plan_for(e.c, 2, v, sizeof v, &node);
    assert_string_equal(v, "x");
    /* x is protected: it is reprieved first, y goes. */
    put_pdb(e.c, "px", "x", 0);
    plan_for(e.c, 2, v, sizeof v, &node);
    assert_string_equal(v, "y");
    /* x already evicted once (in disruptedPods): spends nothing, no violation. */
    json_t *j = json_loads("{\"metadata\":{\"name\":\"px\",\"namespace\":\"default\"},\"spec\":{\"selector\":"
                           "{\"matchLabels\":{\"app\":\"x\"}}},\"status\":{\"disruptionsAllowed\":0,"
                           "\"disruptedPods\":{\"x\":\"2026-01-01T00:00:00Z\"}}}",
                           0, NULL);
    assert_int_equal(gs_cache_feed(e.c, "poddisruptionbudgets.policy/default/px", j), 0);
    json_decref(j);
    plan_for(e.c, 2, v, sizeof v, &node);
    assert_string_equal(v, "x");
    for (int i = 0; i < e.n; i++) fx_pod_free(e.pods[i]);
    gs_cache_free(e.c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_and_covers),
        cmocka_unit_test(test_cache_feed),
        cmocka_unit_test(test_fewest_violations_node_wins),
        cmocka_unit_test(test_violating_victims_reprieved_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
