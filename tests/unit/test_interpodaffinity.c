/*
 * test_interpodaffinity.c - InterPodAffinity against kube's rules, one
 * rule per test: required affinity (hostname and zone), required
 * anti-affinity of the incoming pod and of existing pods (both directions),
 * the first pod of a self-affine group, preferred weights with kube's
 * normalisation, hardPodAffinityWeight, namespaces and namespaceSelector,
 * matchLabelKeys, the Skip fast path and its cache counters, the decoder's
 * error messages, the queueing hint (alone and through the scheduler's
 * queue), and the default profile's weights.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched/affinity_hint.h"
#include "sched/scheduler.h"
#include "sched_fixture.h"

static struct gs_clock clk;

struct env {
    struct gs_cache *c;
    const struct gs_plugin *pl;
    void *state;
    struct gs_pod *pods[32];
    int n;
};

/* Nodes n0..n{nodes-1}: hostname = name, zone = zone-a for the first half, zone-b after. */
static void env_init(struct env *e, int nodes)
{
    memset(e, 0, sizeof *e);
    gs_clock_init_sim(&clk, 0);
    e->c = gs_cache_new(&clk);
    for (int i = 0; i < nodes; i++) {
        char n[16];
        snprintf(n, sizeof n, "n%d", i);
        struct gs_labels l = {0};
        gs_labels_set(&l, "kubernetes.io/hostname", n);
        gs_labels_set(&l, "topology.kubernetes.io/zone", i < (nodes + 1) / 2 ? "zone-a" : "zone-b");
        assert_int_equal(fx_add_node(e->c, n, 0, 64, 0, 0, &l), i);
        gs_labels_free(&l);
    }
    e->pl = gs_plugin_lookup("InterPodAffinity");
    assert_non_null(e->pl);
    struct gs_handle h = {.clock = &clk, .cache = e->c};
    struct gs_diags d = {0};
    assert_int_equal(e->pl->init(&h, NULL, &e->state, &d), 0);
}

static void env_free(struct env *e)
{
    e->pl->fini(e->state);
    gs_cache_free(e->c);
    for (int i = 0; i < e->n; i++) fx_pod_free(e->pods[i]);
}

static struct gs_pod *mk(struct env *e, const char *name, const char *labels, const char *spec)
{
    struct gs_pod *p = fx_pod_ex(name, 0, 0, 1, 0, NULL, labels, spec, NULL);
    assert_non_null(p);
    return e->pods[e->n++] = p;
}

static void place(struct env *e, struct gs_pod *p, int node)
{
    struct gs_assignment a = {node, 0, 0, 0};
    assert_int_equal(gs_cache_add_bound(e->c, p, &a), 0);
}

/* Filter verdicts on every node into rej; returns PreFilter's code. */
static enum gs_code run_filter(struct env *e, const struct gs_pod *pod, uint8_t *rej)
{
    struct gs_cycle_state cs;
    gs_cycle_state_init(&cs);
    struct gs_status st = e->pl->pre_filter(e->state, &cs, pod);
    int32_t n = gs_cache_node_count(e->c);
    struct gs_node_info *nodes[32];
    int32_t idx[32];
    uint8_t rej2[32] = {0};
    for (int32_t i = 0; i < n; i++) nodes[i] = gs_cache_node(e->c, i), idx[i] = i, rej[i] = 0;
    if (st.code == GS_SUCCESS) {
        e->pl->filter(e->state, &cs, pod, nodes, (size_t)n, rej);
        e->pl->filter_idx(e->state, &cs, pod, idx, (size_t)n, rej2);
        assert_memory_equal(rej, rej2, (size_t)n); /* both forms agree */
    }
    gs_cycle_state_free(&cs);
    return st.code;
}

/* Normalised scores on every node; returns PreScore's code. */
static enum gs_code run_score(struct env *e, const struct gs_pod *pod, int64_t *scores)
{
    struct gs_cycle_state cs;
    gs_cycle_state_init(&cs);
    int32_t n = gs_cache_node_count(e->c);
    struct gs_node_info *nodes[32];
    int32_t idx[32];
    int64_t s2[32];
    for (int32_t i = 0; i < n; i++) nodes[i] = gs_cache_node(e->c, i), idx[i] = i, scores[i] = 0;
    struct gs_status st = e->pl->pre_score(e->state, &cs, pod, nodes, (size_t)n);
    if (st.code == GS_SUCCESS) {
        e->pl->score(e->state, &cs, pod, nodes, (size_t)n, scores);
        e->pl->score_idx(e->state, &cs, pod, idx, (size_t)n, s2);
        assert_memory_equal(scores, s2, (size_t)n * sizeof *s2);
        e->pl->normalize_score(e->state, &cs, pod, nodes, scores, (size_t)n);
    }
    gs_cycle_state_free(&cs);
    return st.code;
}

#define AFF(kind, when, body) "\"affinity\":{\"" kind "\":{\"" when "DuringSchedulingIgnoredDuringExecution\":[" body "]}},"
#define TERM(sel, key) "{\"labelSelector\":{\"matchLabels\":" sel "},\"topologyKey\":\"" key "\"}"
#define WTERM(w, sel, key) "{\"weight\":" #w ",\"podAffinityTerm\":" TERM(sel, key) "}"
#define HOST "kubernetes.io/hostname"
#define ZONE "topology.kubernetes.io/zone"

static void test_required_affinity_hostname_and_zone(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 4); /* n0,n1 zone-a; n2,n3 zone-b */
    place(&e, mk(&e, "db", "{\"app\":\"db\"}", NULL), 1);
    uint8_t rej[32];
    struct gs_pod *host = mk(&e, "web", "{\"app\":\"web\"}", AFF("podAffinity", "required", TERM("{\"app\":\"db\"}", HOST)));
    assert_int_equal(run_filter(&e, host, rej), GS_SUCCESS);
    assert_int_equal(rej[0], 1 | GS_REJECT_UNRESOLVABLE); /* affinity: preemption cannot help */
    assert_int_equal(rej[1], 0);
    assert_int_equal(rej[2], 1 | GS_REJECT_UNRESOLVABLE);
    assert_int_equal(rej[3], 1 | GS_REJECT_UNRESOLVABLE);
    struct gs_pod *zone = mk(&e, "web2", "{\"app\":\"web\"}", AFF("podAffinity", "required", TERM("{\"app\":\"db\"}", ZONE)));
    assert_int_equal(run_filter(&e, zone, rej), GS_SUCCESS);
    assert_int_equal(rej[0], 0);
    assert_int_equal(rej[1], 0);
    assert_int_equal(rej[2], 1 | GS_REJECT_UNRESOLVABLE);
    /* A pod of another namespace does not count (the term's namespace is its own). */
    struct gs_pod *other = mk(&e, "x", "{\"app\":\"web\"}", AFF("podAffinity", "required", TERM("{\"app\":\"web\"}", ZONE)));
    free(other->meta.namespace_);
    other->meta.namespace_ = strdup("team-b");
    place(&e, mk(&e, "w-default", "{\"app\":\"web\"}", NULL), 3);
    /* x matches its own term: first pod of its group in team-b, allowed anywhere. */
    assert_int_equal(run_filter(&e, other, rej), GS_SUCCESS);
    for (int i = 0; i < 4; i++) assert_int_equal(rej[i], 0);
    char why[64];
    assert_true(e.pl->reason(e.state, host, 1 | GS_REJECT_UNRESOLVABLE, why, sizeof why) > 0); /* as the diagnosis passes it */
    assert_string_equal(why, "node(s) didn't match pod affinity rules");
    e.pl->reason(e.state, host, 1, why, sizeof why); /* as explain may */
    assert_string_equal(why, "node(s) didn't match pod affinity rules");
    env_free(&e);
}

static void test_required_anti_affinity_both_directions(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 4);
    uint8_t rej[32];
    /* Incoming anti-affinity: no two web pods on one host. */
    place(&e, mk(&e, "web0", "{\"app\":\"web\"}", NULL), 0);
    struct gs_pod *web = mk(&e, "web1", "{\"app\":\"web\"}", AFF("podAntiAffinity", "required", TERM("{\"app\":\"web\"}", HOST)));
    assert_int_equal(run_filter(&e, web, rej), GS_SUCCESS);
    assert_int_equal(rej[0], 2); /* resolvable: evicting web0 would help */
    assert_int_equal(rej[1], 0);
    char why[64];
    e.pl->reason(e.state, web, 2, why, sizeof why);
    assert_string_equal(why, "node(s) didn't match pod anti-affinity rules");
    /* Existing pod's anti-affinity: a pod in zone-b repels cache pods from its zone. */
    place(&e, mk(&e, "loner", "{\"app\":\"loner\"}", AFF("podAntiAffinity", "required", TERM("{\"app\":\"batch\"}", ZONE))), 2);
    assert_int_equal(gs_cache_required_anti_affinity_pods(e.c), 1);
    struct gs_pod *batch = mk(&e, "batch", "{\"app\":\"batch\"}", NULL); /* no terms of its own */
    assert_int_equal(run_filter(&e, batch, rej), GS_SUCCESS);
    assert_int_equal(rej[0], 0);
    assert_int_equal(rej[1], 0);
    assert_int_equal(rej[2], 3);
    assert_int_equal(rej[3], 3); /* same zone as the loner */
    e.pl->reason(e.state, batch, 3, why, sizeof why);
    assert_string_equal(why, "node(s) didn't satisfy existing pods anti-affinity rules");
    /* A pod the loner's term does not match is not repelled: PreFilter skips. */
    struct gs_pod *plain = mk(&e, "plain", "{\"app\":\"other\"}", NULL);
    assert_int_equal(run_filter(&e, plain, rej), GS_SKIP);
    env_free(&e);
}

static void test_self_affinity_first_pod(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 3);
    uint8_t rej[32];
    /* First of a group with affinity to itself: allowed on every node with the key. */
    struct gs_pod *first = mk(&e, "g0", "{\"grp\":\"a\"}", AFF("podAffinity", "required", TERM("{\"grp\":\"a\"}", ZONE)));
    assert_int_equal(run_filter(&e, first, rej), GS_SUCCESS);
    for (int i = 0; i < 3; i++) assert_int_equal(rej[i], 0);
    /* A node without the key never qualifies. */
    struct gs_node_spec nl = {.name = "nolabel", .cpu_milli = 64000, .mem_bytes = 64LL << 30, .pods = 110};
    assert_int_equal(gs_cache_add_node_spec(e.c, &nl), 3);
    assert_int_equal(run_filter(&e, first, rej), GS_SUCCESS);
    assert_int_equal(rej[3], 1 | GS_REJECT_UNRESOLVABLE);
    /* Once one member runs, the others follow it to its zone. */
    place(&e, first, 0); /* zone-a: n0, n1 */
    struct gs_pod *second = mk(&e, "g1", "{\"grp\":\"a\"}", AFF("podAffinity", "required", TERM("{\"grp\":\"a\"}", ZONE)));
    assert_int_equal(run_filter(&e, second, rej), GS_SUCCESS);
    assert_int_equal(rej[0], 0);
    assert_int_equal(rej[1], 0);
    assert_int_equal(rej[2], 1 | GS_REJECT_UNRESOLVABLE);
    /* A pod whose terms do not match itself gets no exception. */
    struct gs_pod *stranger = mk(&e, "s", "{\"grp\":\"b\"}", AFF("podAffinity", "required", TERM("{\"grp\":\"c\"}", ZONE)));
    assert_int_equal(run_filter(&e, stranger, rej), GS_SUCCESS);
    for (int i = 0; i < 4; i++) assert_int_equal(rej[i], 1 | GS_REJECT_UNRESOLVABLE);
    env_free(&e);
}

static void test_preferred_weights_normalised(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 4);
    int64_t s[32];
    place(&e, mk(&e, "db", "{\"app\":\"db\"}", NULL), 0);   /* zone-a */
    place(&e, mk(&e, "web", "{\"app\":\"web\"}", NULL), 2); /* zone-b */
    place(&e, mk(&e, "web2", "{\"app\":\"web\"}", NULL), 0);
    /* +80 per db pod in the zone, -20 per web pod in the zone:
     * zone-a: 80 - 20 = 60 (n0, n1); zone-b: -20 (n2, n3). */
    struct gs_pod *p = mk(&e, "p", "{\"app\":\"p\"}",
                          "\"affinity\":{\"podAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":["
                          WTERM(80, "{\"app\":\"db\"}", ZONE) "]},"
                          "\"podAntiAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":["
                          WTERM(20, "{\"app\":\"web\"}", ZONE) "]}},");
    assert_int_equal(run_score(&e, p, s), GS_SUCCESS);
    assert_int_equal(s[0], 100);
    assert_int_equal(s[1], 100);
    assert_int_equal(s[2], 0);
    assert_int_equal(s[3], 0);
    /* Hostname instead: n0 = 80 - 20 = 60, n1 = 0, n2 = -20, n3 = 0:
     * (x - -20) * 100 / 80 -> 100, 25, 0, 25. */
    struct gs_pod *q = mk(&e, "q", "{\"app\":\"q\"}",
                          "\"affinity\":{\"podAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":["
                          WTERM(80, "{\"app\":\"db\"}", HOST) "]},"
                          "\"podAntiAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":["
                          WTERM(20, "{\"app\":\"web\"}", HOST) "]}},");
    assert_int_equal(run_score(&e, q, s), GS_SUCCESS);
    assert_int_equal(s[0], 100);
    assert_int_equal(s[1], 25);
    assert_int_equal(s[2], 0);
    assert_int_equal(s[3], 25);
    env_free(&e);
}

static void test_existing_terms_and_hard_weight(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 4);
    int64_t s[32];
    /* An existing pod on n1 requires affinity to app=x: an x pod gets
     * hardPodAffinityWeight (1) on n1's host; a pod on n3 prefers app=x with 10. */
    place(&e, mk(&e, "needs-x", "{\"app\":\"y\"}", AFF("podAffinity", "required", TERM("{\"app\":\"x\"}", HOST))), 1);
    place(&e, mk(&e, "likes-x", "{\"app\":\"z\"}", AFF("podAffinity", "preferred", WTERM(10, "{\"app\":\"x\"}", HOST))), 3);
    assert_int_equal(gs_cache_affinity_pods(e.c), 2);
    struct gs_pod *x = mk(&e, "x", "{\"app\":\"x\"}", NULL);
    /* raw: n0 0, n1 1, n2 0, n3 10 -> 0, 10, 0, 100. */
    assert_int_equal(run_score(&e, x, s), GS_SUCCESS);
    assert_int_equal(s[0], 0);
    assert_int_equal(s[1], 10);
    assert_int_equal(s[2], 0);
    assert_int_equal(s[3], 100);
    /* hardPodAffinityWeight 0 drops the required term's share; ignoring
     * existing preferred terms skips a pod without terms of its own. */
    struct gs_handle h = {.clock = &clk, .cache = e.c};
    struct gs_diags d = {0};
    void *st2 = NULL;
    json_t *args = json_pack("{s:i}", "hardPodAffinityWeight", 0);
    assert_int_equal(e.pl->init(&h, args, &st2, &d), 0);
    json_decref(args);
    void *keep = e.state;
    e.state = st2;
    assert_int_equal(run_score(&e, x, s), GS_SUCCESS);
    assert_int_equal(s[1], 0);
    assert_int_equal(s[3], 100);
    e.pl->fini(st2);
    args = json_pack("{s:b}", "ignorePreferredTermsOfExistingPods", 1);
    assert_int_equal(e.pl->init(&h, args, &st2, &d), 0);
    json_decref(args);
    e.state = st2;
    assert_int_equal(run_score(&e, x, s), GS_SKIP);
    e.pl->fini(st2);
    e.state = keep;
    /* Bad args name the field. */
    args = json_pack("{s:i}", "hardPodAffinityWeight", 101);
    assert_int_equal(e.pl->init(&h, args, &st2, &d), GS_EINVAL);
    json_decref(args);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, "args.hardPodAffinityWeight");
    gs_diags_free(&d);
    env_free(&e);
}

static void test_namespaces_and_selector(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 2);
    uint8_t rej[32];
    struct gs_pod *db = mk(&e, "db", "{\"app\":\"db\"}", NULL);
    free(db->meta.namespace_);
    db->meta.namespace_ = strdup("data");
    place(&e, db, 1);
    /* Own namespace only: the db in "data" does not count; the pod is not in its own group either. */
    struct gs_pod *own = mk(&e, "a", "{\"app\":\"web\"}", AFF("podAffinity", "required", TERM("{\"app\":\"db\"}", HOST)));
    assert_int_equal(run_filter(&e, own, rej), GS_SUCCESS);
    assert_int_equal(rej[1], 1 | GS_REJECT_UNRESOLVABLE);
    /* Listed namespace. */
    struct gs_pod *listed = mk(&e, "b", "{\"app\":\"web\"}",
                               AFF("podAffinity", "required",
                                   "{\"labelSelector\":{\"matchLabels\":{\"app\":\"db\"}},\"namespaces\":[\"data\"],"
                                   "\"topologyKey\":\"" HOST "\"}"));
    assert_int_equal(run_filter(&e, listed, rej), GS_SUCCESS);
    assert_int_equal(rej[0], 1 | GS_REJECT_UNRESOLVABLE);
    assert_int_equal(rej[1], 0);
    /* namespaceSelector: matches once the namespace has the label. */
    struct gs_pod *sel = mk(&e, "c", "{\"app\":\"web\"}",
                            AFF("podAffinity", "required",
                                "{\"labelSelector\":{\"matchLabels\":{\"app\":\"db\"}},"
                                "\"namespaceSelector\":{\"matchLabels\":{\"tier\":\"storage\"}},"
                                "\"topologyKey\":\"" HOST "\"}"));
    assert_int_equal(run_filter(&e, sel, rej), GS_SUCCESS);
    assert_int_equal(rej[1], 1 | GS_REJECT_UNRESOLVABLE);
    struct gs_labels nl = {0};
    gs_labels_set(&nl, "tier", "storage");
    assert_int_equal(gs_cache_set_namespace_labels(e.c, "data", &nl), 0);
    gs_labels_free(&nl);
    assert_int_equal(run_filter(&e, sel, rej), GS_SUCCESS);
    assert_int_equal(rej[1], 0);
    /* An empty namespaceSelector selects every namespace. */
    struct gs_pod *all = mk(&e, "d", "{\"app\":\"web\"}",
                            AFF("podAffinity", "required",
                                "{\"labelSelector\":{\"matchLabels\":{\"app\":\"db\"}},\"namespaceSelector\":{},"
                                "\"topologyKey\":\"" HOST "\"}"));
    assert_int_equal(gs_cache_set_namespace_labels(e.c, "data", NULL), 0);
    assert_int_equal(run_filter(&e, all, rej), GS_SUCCESS);
    assert_int_equal(rej[1], 0);
    env_free(&e);
}

static void test_match_label_keys_and_decode_errors(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 2);
    uint8_t rej[32];
    /* matchLabelKeys: only pods of the same rollout (pod-template-hash) repel. */
    const char *spec = "\"affinity\":{\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":["
                       "{\"labelSelector\":{\"matchLabels\":{\"app\":\"web\"}},\"matchLabelKeys\":[\"hash\"],"
                       "\"topologyKey\":\"" HOST "\"}]}},";
    place(&e, mk(&e, "old", "{\"app\":\"web\",\"hash\":\"v1\"}", NULL), 0);
    struct gs_pod *v2 = mk(&e, "new", "{\"app\":\"web\",\"hash\":\"v2\"}", spec);
    assert_int_equal(v2->pod_affinity->req_anti[0].selector.n, 2); /* app In (web), hash In (v2) */
    assert_int_equal(run_filter(&e, v2, rej), GS_SUCCESS);
    assert_int_equal(rej[0], 0);
    struct gs_pod *v1 = mk(&e, "new1", "{\"app\":\"web\",\"hash\":\"v1\"}", spec);
    assert_int_equal(run_filter(&e, v1, rej), GS_SUCCESS);
    assert_int_equal(rej[0], 2);
    env_free(&e);

    /* Errors name the field, the value and why. */
    static const struct {
        const char *spec, *path, *msg;
    } bad[] = {
        {AFF("podAffinity", "required", "{\"labelSelector\":{}}"),
         "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
         "is required: can not be empty"},
        {AFF("podAffinity", "required", "{\"labelSelector\":{},\"topologyKey\":\"bad key\"}"),
         "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
         "invalid label key \"bad key\""},
        {AFF("podAntiAffinity", "preferred", "{\"podAffinityTerm\":" TERM("{}", HOST) "}"),
         "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", "is required"},
        {AFF("podAntiAffinity", "preferred", "{\"weight\":101,\"podAffinityTerm\":" TERM("{}", HOST) "}"),
         "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
         "invalid value 101: must be from 1 to 100"},
        {AFF("podAffinity", "preferred", "{\"weight\":5}"),
         "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm", "is required"},
        {AFF("podAffinity", "required",
             "{\"labelSelector\":{},\"topologyKey\":\"k\",\"matchLabelKeys\":[\"a\"],\"mismatchLabelKeys\":[\"a\"]}"),
         "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].mismatchLabelKeys[0]",
         "\"a\" is in both matchLabelKeys and mismatchLabelKeys"},
        {AFF("podAffinity", "required", "{\"topologyKey\":\"k\",\"matchLabelKeys\":[\"a\"]}"),
         "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys",
         "must not be specified when labelSelector is not set"},
        {AFF("podAffinity", "required", "{\"labelSelector\":{},\"topologyKey\":\"k\",\"namespaces\":[\"Bad_NS\"]}"),
         "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaces[0]",
         "invalid namespace \"Bad_NS\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char doc[2048];
        snprintf(doc, sizeof doc,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{%s"
                 "\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}",
                 bad[i].spec);
        json_t *j = json_loads(doc, 0, NULL);
        assert_non_null(j);
        struct gs_pod p;
        struct gs_diags d = {0};
        assert_int_equal(gs_pod_decode(j, &p, &d), GS_EINVAL);
        bool found = false;
        for (size_t k = 0; k < d.n && !found; k++)
            found = !strcmp(d.v[k].path, bad[i].path) && strstr(d.v[k].msg, bad[i].msg);
        if (!found) fail_msg("case %zu: want %s: %s, got %s: %s", i, bad[i].path, bad[i].msg, d.n ? d.v[0].path : "",
                             d.n ? d.v[0].msg : "");
        gs_diags_free(&d);
        json_decref(j);
    }
}

static void test_skip_and_counters(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 2);
    uint8_t rej[32];
    int64_t s[32];
    struct gs_pod *plain = mk(&e, "plain", "{\"app\":\"a\"}", NULL);
    assert_null(plain->pod_affinity);
    place(&e, mk(&e, "b", "{\"app\":\"b\"}", NULL), 0);
    assert_int_equal(gs_cache_affinity_pods(e.c), 0);
    assert_int_equal(run_filter(&e, plain, rej), GS_SKIP);
    assert_int_equal(run_score(&e, plain, s), GS_SKIP);
    struct gs_pod *anti = mk(&e, "anti", "{\"app\":\"c\"}", AFF("podAntiAffinity", "required", TERM("{\"app\":\"zz\"}", HOST)));
    place(&e, anti, 1);
    assert_int_equal(gs_cache_affinity_pods(e.c), 1);
    assert_int_equal(gs_cache_required_anti_affinity_pods(e.c), 1);
    /* plain is not matched by anti's term: still Skip, after looking. */
    assert_int_equal(run_filter(&e, plain, rej), GS_SKIP);
    /* Only required terms: no preferred anywhere, nothing to score. */
    assert_int_equal(run_score(&e, plain, s), GS_SKIP);
    assert_int_equal(gs_cache_remove_pod(e.c, "default/anti"), 0);
    assert_int_equal(gs_cache_affinity_pods(e.c), 0);
    assert_int_equal(gs_cache_required_anti_affinity_pods(e.c), 0);
    fx_check_cache(e.c);
    env_free(&e);
}

static void test_queueing_hint(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 2);
    struct gs_pod *needs_db = mk(&e, "w", "{\"app\":\"web\"}", AFF("podAffinity", "required", TERM("{\"app\":\"db\"}", HOST)));
    struct gs_pod *anti = mk(&e, "a", "{\"app\":\"web\"}", AFF("podAntiAffinity", "required", TERM("{\"app\":\"web\"}", HOST)));
    struct gs_pod *db = mk(&e, "db", "{\"app\":\"db\"}", NULL), *cache = mk(&e, "cache", "{\"app\":\"cache\"}", NULL);
    struct gs_pod *repels = mk(&e, "r", "{\"app\":\"r\"}", AFF("podAntiAffinity", "required", TERM("{\"app\":\"web\"}", HOST)));
    assert_true(gs_affinity_pod_event_helps(e.c, needs_db, db, true));
    assert_false(gs_affinity_pod_event_helps(e.c, needs_db, cache, true));
    assert_false(gs_affinity_pod_event_helps(e.c, needs_db, db, false));        /* a db leaving does not help */
    assert_true(gs_affinity_pod_event_helps(e.c, anti, needs_db, false));       /* a web pod left */
    assert_false(gs_affinity_pod_event_helps(e.c, anti, cache, false));
    assert_true(gs_affinity_pod_event_helps(e.c, needs_db, repels, false));     /* its anti-affinity went away */
    assert_false(gs_affinity_pod_event_helps(e.c, anti, needs_db, true));       /* arrivals never lift anti-affinity */
    struct gs_pod *self = mk(&e, "g", "{\"grp\":\"a\"}", AFF("podAffinity", "required", TERM("{\"grp\":\"a\"}", HOST)));
    struct gs_pod *member = mk(&e, "m", "{\"grp\":\"a\"}", NULL);
    assert_true(gs_affinity_pod_event_helps(e.c, self, member, false)); /* the first-pod rule may apply again */
    assert_false(gs_affinity_pod_event_helps(e.c, needs_db, db, false)); /* needs_db does not match its own term */
    env_free(&e);
}

/* Through the driver: a pod parked by InterPodAffinity alone is woken by a
 * pod that concerns it, not by one that does not. */
static void test_hint_through_scheduler(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 2);
    struct gs_scheduler *s = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_scheduler_new(&clk, e.c, NULL, &s, &d), 0);
    struct gs_pod *w = mk(&e, "w", "{\"app\":\"web\"}", AFF("podAffinity", "required", TERM("{\"app\":\"db\"}", HOST)));
    assert_int_equal(gs_scheduler_add_pod(s, w), 0);
    struct gs_cycle_result r;
    assert_int_equal(gs_scheduler_run_one(s, &r), 1);
    assert_int_not_equal(r.code, GS_SUCCESS);
    const struct gs_sched_queue *q = gs_scheduler_queue(s);
    assert_int_equal(gs_sched_queue_unschedulable_len(q), 1);
    /* An unrelated pod gets scheduled: w stays parked. */
    assert_int_equal(gs_scheduler_add_pod(s, mk(&e, "cache", "{\"app\":\"cache\"}", NULL)), 0);
    assert_int_equal(gs_sched_queue_unschedulable_len(q), 1);
    assert_int_equal(gs_scheduler_run_one(s, &r), 1);
    assert_int_equal(r.code, GS_SUCCESS);
    assert_string_equal(r.pod->meta.name, "cache");
    assert_int_equal(gs_sched_queue_unschedulable_len(q), 1);
    /* A db pod gets a node: w is woken and follows it. */
    assert_int_equal(gs_scheduler_add_pod(s, mk(&e, "db", "{\"app\":\"db\"}", NULL)), 0);
    assert_int_equal(gs_scheduler_run_one(s, &r), 1);
    assert_string_equal(r.pod->meta.name, "db");
    int32_t db_node = r.a.node;
    assert_int_equal(gs_sched_queue_unschedulable_len(q), 0);
    gs_clock_advance(&clk, 11 * GS_NS_PER_SEC); /* past any backoff */
    assert_int_equal(gs_scheduler_run_one(s, &r), 1);
    assert_string_equal(r.pod->meta.name, "w");
    assert_int_equal(r.code, GS_SUCCESS);
    assert_int_equal(r.a.node, db_node);
    gs_scheduler_free(s);
    env_free(&e);
}

static void test_default_profile_weights(void **st)
{
    (void)st;
    struct gs_sched_config c;
    assert_int_equal(gs_sched_config_default(&c), 0);
    const struct gs_profile *p = &c.profiles[0];
    int64_t ipa = 0, ba = 0;
    for (int i = 0; i < p->npoints[GS_PT_SCORE]; i++) {
        if (!strcmp(p->points[GS_PT_SCORE][i].plugin->name, "InterPodAffinity")) ipa = p->points[GS_PT_SCORE][i].weight;
        if (!strcmp(p->points[GS_PT_SCORE][i].plugin->name, "NodeResourcesBalancedAllocation"))
            ba = p->points[GS_PT_SCORE][i].weight;
    }
    assert_int_equal(ipa, 2); /* kube-scheduler's defaults */
    assert_int_equal(ba, 1);
    gs_sched_config_free(&c);
    assert_int_equal(gs_sched_config_gpusched(&c), 0);
    p = &c.profiles[0];
    bool filter = false;
    for (int i = 0; i < p->npoints[GS_PT_FILTER]; i++) filter |= !strcmp(p->points[GS_PT_FILTER][i].plugin->name, "InterPodAffinity");
    assert_true(filter);
    /* The server's placement is FGDLearn's: kube's preferences keep their
     * weights, the two spreading resource scorers are off (profile.c). */
    int64_t learn = 0;
    ipa = ba = 0;
    bool fit = false;
    for (int i = 0; i < p->npoints[GS_PT_SCORE]; i++) {
        const char *name = p->points[GS_PT_SCORE][i].plugin->name;
        if (!strcmp(name, "InterPodAffinity")) ipa = p->points[GS_PT_SCORE][i].weight;
        if (!strcmp(name, "FGDLearn")) learn = p->points[GS_PT_SCORE][i].weight;
        ba |= !strcmp(name, "NodeResourcesBalancedAllocation");
        fit |= !strcmp(name, "NodeResourcesFit");
    }
    assert_int_equal(ipa, 2);
    assert_int_equal(learn, 1);
    assert_int_equal(ba, 0);
    assert_false(fit);
    for (int i = 0; i < p->npoints[GS_PT_PRE_SCORE]; i++)
        assert_string_not_equal(p->points[GS_PT_PRE_SCORE][i].plugin->name, "NodeResourcesBalancedAllocation");
    gs_sched_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_required_affinity_hostname_and_zone),
        cmocka_unit_test(test_required_anti_affinity_both_directions),
        cmocka_unit_test(test_self_affinity_first_pod),
        cmocka_unit_test(test_preferred_weights_normalised),
        cmocka_unit_test(test_existing_terms_and_hard_weight),
        cmocka_unit_test(test_namespaces_and_selector),
        cmocka_unit_test(test_match_label_keys_and_decode_errors),
        cmocka_unit_test(test_skip_and_counters),
        cmocka_unit_test(test_queueing_hint),
        cmocka_unit_test(test_hint_through_scheduler),
        cmocka_unit_test(test_default_profile_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
