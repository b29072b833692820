/*
 * test_podgroups.c - the three PodGroup shapes (scheduler-plugins, Volcano,
 * native scheduling.k8s.io/v1beta1 with Workload): decoding and its error
 * messages, pod membership and group keys that keep equal names of two shapes
 * apart, a gang of 3 bound whole for each shape through the scheduler driver,
 * the store-key helpers, the status each shape gets (PodGroupScheduled,
 * Volcano's phase and conditions), and the in-process server writing it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "loops/podgroups.h"
#include "control/store.h"
#include "core/codec.h"
#include "sched/gang_core.h"
#include "sched/scheduler.h"
#include "sched_fixture.h"

#include <unistd.h>

/*--- Decoding ---*/

static struct gs_object *decode(const char *text, struct gs_diags *d)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    struct gs_object *o = NULL;
    int rc = gs_object_decode(j, &o, d);
    json_decref(j);
    return rc ? NULL : o;
}

/* The diagnostics of text, which must not decode, joined as "path: msg\n". */
static void problems(const char *text, char *buf, size_t len)
{
    struct gs_diags d = {0};
    struct gs_object *o = decode(text, &d);
    assert_null(o);
    buf[0] = 0;
    for (size_t i = 0; i < d.n; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s: %s\n", d.v[i].path, d.v[i].msg);
    gs_diags_free(&d);
}

#define NATIVE_PG(name, policy)                                                                                    \
    "{\"apiVersion\":\"scheduling.k8s.io/v1beta1\",\"kind\":\"PodGroup\",\"metadata\":{\"name\":\"" name           \
    "\",\"namespace\":\"default\"},\"spec\":{" policy "}}"

static void three_shapes_decode_into_one_struct(void **st)
{
    (void)st;
    struct gs_diags d = {0};
    struct gs_object *a = decode("{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"kind\":\"PodGroup\","
                                 "\"metadata\":{\"name\":\"train\",\"namespace\":\"ml\"},\"spec\":{\"minMember\":3}}",
                                 &d);
    struct gs_object *v = decode("{\"apiVersion\":\"scheduling.volcano.sh/v1beta1\",\"kind\":\"PodGroup\","
                                 "\"metadata\":{\"name\":\"train\",\"namespace\":\"ml\"},\"spec\":{\"minMember\":4,"
                                 "\"queue\":\"research\",\"priorityClassName\":\"high\",\"minResources\":"
                                 "{\"nvidia.com/gpu\":\"8\"}}}",
                                 &d);
    struct gs_object *n = decode(NATIVE_PG("train", "\"schedulingPolicy\":{\"gang\":{\"minCount\":5}},"
                                                    "\"workloadRef\":{\"workloadName\":\"job\",\"templateName\":\"w\"},"
                                                    "\"priorityClassName\":\"low\""),
                                 &d);
    struct gs_object *b = decode(NATIVE_PG("solo", "\"schedulingPolicy\":{\"basic\":{}}"), &d);
    assert_int_equal(d.n, 0);
    assert_non_null(a);
    assert_non_null(v);
    assert_non_null(n);
    assert_non_null(b);
    assert_int_equal(a->kind, GS_KIND_PODGROUP);
    assert_int_equal(n->kind, GS_KIND_PODGROUP);
    assert_int_equal(a->u.podgroup->shape, GS_PG_COSCHED);
    assert_int_equal(v->u.podgroup->shape, GS_PG_VOLCANO);
    assert_int_equal(n->u.podgroup->shape, GS_PG_NATIVE);
    assert_string_equal(a->u.podgroup->group, "train");
    assert_string_equal(v->u.podgroup->group, "scheduling.volcano.sh/train");
    assert_string_equal(n->u.podgroup->group, "scheduling.k8s.io/train");
    assert_int_equal(a->u.podgroup->min_member, 3);
    assert_int_equal(v->u.podgroup->min_member, 4);
    assert_int_equal(n->u.podgroup->min_member, 5);
    assert_int_equal(b->u.podgroup->min_member, 1); /* basic: no gang */
    assert_string_equal(v->u.podgroup->queue, "research");
    assert_string_equal(v->u.podgroup->priority_class_name, "high");
    assert_int_equal(gs_resources_get(&v->u.podgroup->min_resources, GS_RES_GPU), 8000);
    assert_string_equal(n->u.podgroup->priority_class_name, "low");
    gs_object_free(a);
    gs_object_free(v);
    gs_object_free(n);
    gs_object_free(b);
}

static void pods_join_by_each_shape(void **st)
{
    (void)st;
    struct gs_pod *lab = fx_pod_ex("a", 1, 0, 1, 0, "train", NULL, NULL, NULL);
    struct gs_pod *vol = fx_pod_ex("b", 1, 0, 1, 0, NULL, NULL, NULL, "{\"scheduling.k8s.io/group-name\":\"train\"}");
    struct gs_pod *nat = fx_pod_ex("c", 1, 0, 1, 0, NULL, NULL, "\"schedulingGroup\":{\"podGroupName\":\"train\"},", NULL);
    /* the native field wins over the label, the label over Volcano's annotation */
    struct gs_pod *both = fx_pod_ex("d", 1, 0, 1, 0, "other", NULL, "\"schedulingGroup\":{\"podGroupName\":\"train\"},",
                                    "{\"scheduling.k8s.io/group-name\":\"x\"}");
    struct gs_pod *lv = fx_pod_ex("e", 1, 0, 1, 0, "train", NULL, NULL, "{\"scheduling.k8s.io/group-name\":\"x\"}");
    assert_non_null(lab);
    assert_non_null(vol);
    assert_non_null(nat);
    assert_non_null(both);
    assert_non_null(lv);
    assert_string_equal(lab->pod_group, "train");
    assert_string_equal(vol->pod_group, "scheduling.volcano.sh/train");
    assert_string_equal(nat->pod_group, "scheduling.k8s.io/train");
    assert_string_equal(both->pod_group, "scheduling.k8s.io/train");
    assert_string_equal(lv->pod_group, "train");
    char key[256];
    assert_int_equal(gs_podgroup_store_key(lab, key, sizeof key), 0);
    assert_string_equal(key, "podgroups.scheduling.x-k8s.io/default/train");
    assert_int_equal(gs_podgroup_store_key(vol, key, sizeof key), 0);
    assert_string_equal(key, "podgroups.scheduling.volcano.sh/default/train");
    assert_int_equal(gs_podgroup_store_key(nat, key, sizeof key), 0);
    assert_string_equal(key, "podgroups.scheduling.k8s.io/default/train");
    assert_int_equal(gs_podgroup_ns_group("podgroups.scheduling.k8s.io/default/train", key, sizeof key), 0);
    assert_string_equal(key, "default/scheduling.k8s.io/train");
    assert_int_equal(gs_podgroup_ns_group("podgroups.scheduling.volcano.sh/ml/g", key, sizeof key), 0);
    assert_string_equal(key, "ml/scheduling.volcano.sh/g");
    assert_int_equal(gs_podgroup_ns_group("podgroups.scheduling.x-k8s.io/ml/g", key, sizeof key), 0);
    assert_string_equal(key, "ml/g");
    assert_int_equal(gs_podgroup_ns_group("pods/ml/g", key, sizeof key), -1);
    assert_int_equal(gs_podgroup_ns_group("podgroups.scheduling.k8s.io/ml", key, sizeof key), -1);
    assert_int_equal(gs_podgroup_store_key(lab, key, 10), -1); /* too small */
    fx_pod_free(lab);
    fx_pod_free(vol);
    fx_pod_free(nat);
    fx_pod_free(both);
    fx_pod_free(lv);
}

static void bad_groups_name_field_and_value(void **st)
{
    (void)st;
    char m[4096];
    problems(NATIVE_PG("g", "\"priority\":1"), m, sizeof m);
    assert_non_null(strstr(m, "spec.schedulingPolicy: is required"));
    problems(NATIVE_PG("g", "\"schedulingPolicy\":{\"basic\":{},\"gang\":{\"minCount\":2}}"), m, sizeof m);
    assert_non_null(strstr(m, "spec.schedulingPolicy: exactly one of basic or gang must be set, got both"));
    problems(NATIVE_PG("g", "\"schedulingPolicy\":{}"), m, sizeof m);
    assert_non_null(strstr(m, "spec.schedulingPolicy: exactly one of basic or gang must be set, got neither"));
    problems(NATIVE_PG("g", "\"schedulingPolicy\":{\"gang\":{}}"), m, sizeof m);
    assert_non_null(strstr(m, "spec.schedulingPolicy.gang.minCount: is required"));
    problems(NATIVE_PG("g", "\"schedulingPolicy\":{\"gang\":{\"minCount\":0}}"), m, sizeof m);
    assert_non_null(strstr(m, "spec.schedulingPolicy.gang.minCount"));
    assert_non_null(strstr(m, "0"));
    problems(NATIVE_PG("g", "\"schedulingPolicy\":{\"basic\":{}},\"workloadRef\":{\"workloadName\":\"w\"}"), m, sizeof m);
    assert_non_null(strstr(m, "spec.workloadRef.templateName: is required"));
    problems(NATIVE_PG("g", "\"schedulingPolicy\":{\"basic\":{}},\"schedulingConstraints\":{\"topology\":"
                            "[{\"key\":\"rack\"},{\"key\":\"zone\"}]}"),
             m, sizeof m);
    assert_non_null(strstr(m, "spec.schedulingConstraints.topology: must have at most 1 items, got 2"));
    problems(NATIVE_PG("g", "\"schedulingPolicy\":{\"basic\":{}},\"resourceClaims\":[{\"name\":\"c\"}]"), m, sizeof m);
    assert_non_null(strstr(m, "spec.resourceClaims[0]: exactly one of resourceClaimName or resourceClaimTemplateName"));
    problems("{\"apiVersion\":\"scheduling.k8s.io/v1beta1\",\"kind\":\"PodGroup\",\"metadata\":{\"name\":\"g\","
             "\"namespace\":\"default\"}}",
             m, sizeof m);
    assert_non_null(strstr(m, "spec: is required"));
    problems("{\"apiVersion\":\"scheduling.volcano.sh/v1beta1\",\"kind\":\"PodGroup\",\"metadata\":{\"name\":\"g\"},"
             "\"spec\":{\"minMember\":-1}}",
             m, sizeof m);
    assert_non_null(strstr(m, "spec.minMember"));
    assert_non_null(strstr(m, "-1"));
    problems(NATIVE_PG("g", "\"schedulingPolicy\":{\"basic\":{}},\"priority\":\"high\""), m, sizeof m);
    const char *pr = strstr(m, "spec.priority: expected an integer, got string");
    assert_non_null(pr);
    assert_null(strstr(pr + 1, "spec.priority: expected")); /* said once */
    /* Workload */
    problems("{\"apiVersion\":\"scheduling.k8s.io/v1beta1\",\"kind\":\"Workload\",\"metadata\":{\"name\":\"w\","
             "\"namespace\":\"default\"},\"spec\":{\"podGroupTemplates\":[{\"name\":\"a\",\"schedulingPolicy\":"
             "{\"gang\":{\"minCount\":2}}},{\"name\":\"a\",\"schedulingPolicy\":{\"basic\":{}}},"
             "{\"name\":\"Bad_Name\",\"schedulingPolicy\":{\"basic\":{}}},{\"name\":\"c\"}]}}",
             m, sizeof m);
    assert_non_null(strstr(m, "spec.podGroupTemplates[1].name: duplicate template name \"a\""));
    assert_non_null(strstr(m, "spec.podGroupTemplates[2].name: invalid name \"Bad_Name\""));
    assert_non_null(strstr(m, "spec.podGroupTemplates[3].schedulingPolicy: is required"));
    problems("{\"apiVersion\":\"scheduling.k8s.io/v1beta1\",\"kind\":\"Workload\",\"metadata\":{\"name\":\"w\","
             "\"namespace\":\"default\"},\"spec\":{\"podGroupTemplates\":[]}}",
             m, sizeof m);
    assert_non_null(strstr(m, "spec.podGroupTemplates: must list at least one template"));
    /* a pod's native membership */
    problems("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{\"schedulingGroup\":{},"
             "\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}",
             m, sizeof m);
    assert_non_null(strstr(m, "spec.schedulingGroup.podGroupName: is required"));
    problems("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{\"schedulingGroup\":"
             "{\"podGroupName\":\"No/Slash\"},\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}",
             m, sizeof m);
    assert_non_null(strstr(m, "spec.schedulingGroup.podGroupName: invalid name \"No/Slash\""));
    /* a good Workload decodes */
    struct gs_diags d = {0};
    struct gs_object *w = decode("{\"apiVersion\":\"scheduling.k8s.io/v1beta1\",\"kind\":\"Workload\",\"metadata\":"
                                 "{\"name\":\"w\",\"namespace\":\"default\"},\"spec\":{\"controllerRef\":{\"kind\":"
                                 "\"Job\",\"name\":\"j\"},\"podGroupTemplates\":[{\"name\":\"workers\","
                                 "\"schedulingPolicy\":{\"gang\":{\"minCount\":4}}}]}}",
                                 &d);
    assert_non_null(w);
    assert_int_equal(w->kind, GS_KIND_WORKLOAD);
    assert_string_equal(w->u.meta->namespace_, "default");
    gs_object_free(w);
    gs_diags_free(&d);
}

/* examples/podgroup-shapes.yaml decodes, its two "train" groups apart. */
static void example_decodes(void **st)
{
    (void)st;
    char path[1024], *buf;
    size_t len;
    snprintf(path, sizeof path, "%s", __FILE__); /* absolute under CMake */
    snprintf(strrchr(path, '/'), sizeof path - (size_t)(strrchr(path, '/') - path), "/../../examples/podgroup-shapes.yaml");
    assert_int_equal(gs_read_file(path, &buf, &len), 0);
    struct gs_docs docs;
    struct gs_diags d = {0};
    assert_int_equal(gs_decode_stream(buf, len, &docs, &d, NULL), 0);
    assert_int_equal(docs.n, 5);
    const char *groups[5] = {0};
    for (size_t k = 0; k < docs.n; k++) {
        struct gs_object *o = NULL;
        int rc = gs_object_decode(docs.docs[k], &o, &d);
        for (size_t j = 0; j < d.n; j++) fprintf(stderr, "%s: %s\n", d.v[j].path, d.v[j].msg);
        assert_int_equal(rc, 0);
        if (o->kind == GS_KIND_PODGROUP) groups[k] = o->u.podgroup->group;
        if (o->kind == GS_KIND_POD) groups[k] = o->u.pod->pod_group;
        if (groups[k]) groups[k] = strdup(groups[k]);
        gs_object_free(o);
    }
    assert_string_equal(groups[0], "scheduling.volcano.sh/train");
    assert_string_equal(groups[1], groups[0]);
    assert_null(groups[2]); /* the Workload */
    assert_string_equal(groups[3], "scheduling.k8s.io/train");
    assert_string_equal(groups[4], groups[3]);
    for (int k = 0; k < 5; k++) free((char *)groups[k]);
    gs_docs_free(&docs);
    free(buf);
}

/*--- Gangs through the scheduler driver ---*/

struct env {
    struct gs_clock clock;
    struct gs_cache *cache;
    struct gs_sched_config cfg;
    struct gs_scheduler *s;
    struct gs_pod *pods[16];
    int npods;
    struct gs_object *pgs[4];
    int npgs;
};

static void env_init(struct env *e, int nodes, int gpus)
{
    memset(e, 0, sizeof *e);
    gs_clock_init_sim(&e->clock, 0);
    e->cache = gs_cache_new(&e->clock);
    char name[32];
    for (int i = 0; i < nodes; i++) {
        snprintf(name, sizeof name, "n%d", i);
        assert_true(fx_add_node(e->cache, name, gpus, 64, 0, 0, NULL) >= 0);
    }
    char cfgtext[4096];
    snprintf(cfgtext, sizeof cfgtext, FX_GANG_PROFILE, 60, "true");
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    assert_int_equal(gs_decode_stream(cfgtext, strlen(cfgtext), &docs, &d, NULL), 0);
    assert_int_equal(gs_sched_config_parse(docs.docs[0], &e->cfg, &d), 0);
    gs_docs_free(&docs);
    struct gs_scheduler_opts o = {.profile = &e->cfg.profiles[0]};
    assert_int_equal(gs_scheduler_new(&e->clock, e->cache, &o, &e->s, &d), 0);
    gs_diags_free(&d);
}

static void env_free(struct env *e)
{
    gs_scheduler_free(e->s);
    gs_cache_free(e->cache);
    gs_sched_config_free(&e->cfg);
    for (int i = 0; i < e->npods; i++) fx_pod_free(e->pods[i]);
    for (int i = 0; i < e->npgs; i++) gs_object_free(e->pgs[i]);
}

static void add_group(struct env *e, const char *text)
{
    struct gs_diags d = {0};
    struct gs_object *o = decode(text, &d);
    assert_non_null(o);
    gs_diags_free(&d);
    e->pgs[e->npgs++] = o;
    gs_scheduler_add_podgroup(e->s, o->u.podgroup);
}

static void add(struct env *e, struct gs_pod *p)
{
    assert_non_null(p);
    e->pods[e->npods++] = p;
    assert_int_equal(gs_scheduler_add_pod(e->s, p), 0);
}

static void drain(struct env *e)
{
    struct gs_cycle_result r;
    while (gs_scheduler_run_one(e->s, &r) > 0) {}
}

static bool placed(struct env *e, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "default/%s", name);
    return gs_cache_pod_assignment(e->cache, key) != NULL;
}

/* Members "<prefix>-i" of one shape: how each joins its group. */
static struct gs_pod *member(int shape, const char *prefix, int i, const char *group)
{
    char name[64], ann[128], spec[128];
    snprintf(name, sizeof name, "%s-%d", prefix, i);
    if (shape == GS_PG_COSCHED) return fx_pod_ex(name, 1, 0, 1, 0, group, NULL, NULL, NULL);
    if (shape == GS_PG_VOLCANO) {
        snprintf(ann, sizeof ann, "{\"scheduling.k8s.io/group-name\":\"%s\"}", group);
        return fx_pod_ex(name, 1, 0, 1, 0, NULL, NULL, NULL, ann);
    }
    snprintf(spec, sizeof spec, "\"schedulingGroup\":{\"podGroupName\":\"%s\"},", group);
    return fx_pod_ex(name, 1, 0, 1, 0, NULL, NULL, spec, NULL);
}

static const char *const GROUP_DOCS[] = {
    "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"kind\":\"PodGroup\",\"metadata\":{\"name\":\"train\","
    "\"namespace\":\"default\"},\"spec\":{\"minMember\":3}}",
    "{\"apiVersion\":\"scheduling.volcano.sh/v1beta1\",\"kind\":\"PodGroup\",\"metadata\":{\"name\":\"train\","
    "\"namespace\":\"default\"},\"spec\":{\"minMember\":3}}",
    NATIVE_PG("train", "\"schedulingPolicy\":{\"gang\":{\"minCount\":3}}"),
};

static void gang_of_three_bound_whole_per_shape(void **st)
{
    (void)st;
    for (int shape = 0; shape < 3; shape++) {
        struct env e;
        env_init(&e, 2, 2); /* 4 GPUs: room for one gang of 3 */
        add_group(&e, GROUP_DOCS[shape]);
        add(&e, member(shape, "m", 0, "train"));
        add(&e, member(shape, "m", 1, "train"));
        drain(&e);
        assert_false(placed(&e, "m-0")); /* 2 of 3: nothing starts */
        assert_false(placed(&e, "m-1"));
        add(&e, member(shape, "m", 2, "train"));
        gs_clock_set(&e.clock, 2 * GS_NS_PER_SEC);
        drain(&e);
        assert_true(placed(&e, "m-0") && placed(&e, "m-1") && placed(&e, "m-2"));
        fx_check_cache(e.cache);
        env_free(&e);
    }
}

/* A Volcano and a native PodGroup both named "train" in one namespace are two
 * gangs: the native one (minCount 2) starts on its own, the Volcano one
 * (minMember 3) waits for its third member. */
static void equal_names_of_two_shapes_do_not_collide(void **st)
{
    (void)st;
    struct env e;
    env_init(&e, 2, 4);
    add_group(&e, GROUP_DOCS[GS_PG_VOLCANO]);
    add_group(&e, NATIVE_PG("train", "\"schedulingPolicy\":{\"gang\":{\"minCount\":2}}"));
    add(&e, member(GS_PG_VOLCANO, "v", 0, "train"));
    add(&e, member(GS_PG_VOLCANO, "v", 1, "train"));
    add(&e, member(GS_PG_NATIVE, "k", 0, "train"));
    add(&e, member(GS_PG_NATIVE, "k", 1, "train"));
    drain(&e);
    gs_clock_set(&e.clock, 2 * GS_NS_PER_SEC);
    drain(&e);
    assert_true(placed(&e, "k-0") && placed(&e, "k-1"));
    assert_false(placed(&e, "v-0") || placed(&e, "v-1"));
    struct gs_gang *g = gs__gang_of(gs_framework_plugin_state(gs_scheduler_framework(e.s), "Coscheduling"));
    assert_non_null(g);
    struct gs_gang_group *gv = gs_gang_group_of(g, e.pods[0]), *gk = gs_gang_group_of(g, e.pods[2]);
    assert_true(gv && gk && gv != gk);
    assert_string_equal(gs_gang_group_key(gv), "default/scheduling.volcano.sh/train");
    assert_string_equal(gs_gang_group_key(gk), "default/scheduling.k8s.io/train");
    assert_int_equal(gs_gang_min_member(gv), 3);
    assert_int_equal(gs_gang_min_member(gk), 2);
    add(&e, member(GS_PG_VOLCANO, "v", 2, "train"));
    gs_clock_set(&e.clock, 4 * GS_NS_PER_SEC);
    drain(&e);
    assert_true(placed(&e, "v-0") && placed(&e, "v-1") && placed(&e, "v-2"));
    env_free(&e);
}

/* A native group's schedulingConstraints.topology key is a required domain:
 * two racks of 2 GPUs cannot hold a gang of 3 one-GPU pods, three can in one rack. */
static void native_topology_constraint_is_required(void **st)
{
    (void)st;
    for (int big = 0; big < 2; big++) {
        struct env e;
        memset(&e, 0, sizeof e);
        env_init(&e, 0, 0);
        const char *racks[] = {"a", "b", "b"};
        for (int i = 0; i < 2 + big; i++) {
            struct gs_labels l = {0};
            gs_labels_set(&l, "rack", racks[i]);
            char name[16];
            snprintf(name, sizeof name, "n%d", i);
            assert_true(fx_add_node(e.cache, name, 2, 64, 0, 0, &l) >= 0);
            gs_labels_free(&l);
        }
        add_group(&e, NATIVE_PG("train", "\"schedulingPolicy\":{\"gang\":{\"minCount\":3}},"
                                         "\"schedulingConstraints\":{\"topology\":[{\"key\":\"rack\"}]}"));
        assert_string_equal(e.pgs[0]->u.podgroup->topology_key, "rack");
        for (int i = 0; i < 3; i++) add(&e, member(GS_PG_NATIVE, "m", i, "train"));
        drain(&e);
        gs_clock_set(&e.clock, 2 * GS_NS_PER_SEC);
        drain(&e);
        int n = placed(&e, "m-0") + placed(&e, "m-1") + placed(&e, "m-2");
        assert_int_equal(n, big ? 3 : 0);
        for (int i = 0; big && i < 3; i++) { /* all in rack b: nodes n1 and n2 */
            char key[32];
            snprintf(key, sizeof key, "default/m-%d", i);
            assert_true(gs_cache_pod_assignment(e.cache, key)->node >= 1);
        }
        env_free(&e);
    }
}

/*--- Status ---*/

static json_t *status_after(const char *doc, bool scheduled, const char *msg, int *rc)
{
    json_t *cur = json_loads(doc, 0, NULL), *out = NULL;
    assert_non_null(cur);
    struct gs_podgroup_status s = {scheduled, msg, 1767225600.0}; /* 2026-01-01T00:00:00Z */
    *rc = gs_podgroup_status_fn(cur, &out, &s);
    json_decref(cur);
    return out;
}

static const char *cond_field(const json_t *doc, const char *type, const char *field)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(doc, "status"), "conditions"), i, c)
        if (!strcmp(json_string_value(json_object_get(c, "type")), type))
            return json_string_value(json_object_get(c, field));
    return NULL;
}

static void status_per_shape(void **st)
{
    (void)st;
    int rc;
    /* native: PodGroupScheduled False with the diagnosis, then True */
    json_t *o = status_after(NATIVE_PG("g", "\"schedulingPolicy\":{\"basic\":{}}"), false, "0/2 nodes are available", &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(cond_field(o, "PodGroupScheduled", "status"), "False");
    assert_string_equal(cond_field(o, "PodGroupScheduled", "reason"), "Unschedulable");
    assert_string_equal(cond_field(o, "PodGroupScheduled", "message"), "0/2 nodes are available");
    assert_string_equal(cond_field(o, "PodGroupScheduled", "lastTransitionTime"), "2026-01-01T00:00:00Z");
    char *text = json_dumps(o, 0);
    json_decref(o);
    o = status_after(text, false, "0/2 nodes are available", &rc); /* the same again: no write */
    assert_int_equal(rc, GS_STORE_UNCHANGED);
    assert_null(o);
    o = status_after(text, true, NULL, &rc);
    free(text);
    assert_int_equal(rc, 0);
    assert_string_equal(cond_field(o, "PodGroupScheduled", "status"), "True");
    assert_string_equal(cond_field(o, "PodGroupScheduled", "reason"), "Scheduled");
    assert_int_equal(json_array_size(json_object_get(json_object_get(o, "status"), "conditions")), 1);
    text = json_dumps(o, 0);
    json_decref(o);
    o = status_after(text, false, "a late member failed", &rc); /* a scheduled group stays scheduled */
    assert_int_equal(rc, GS_STORE_UNCHANGED);
    free(text);
    /* Volcano: Unschedulable condition and Pending, then Running with Scheduled and no Unschedulable */
    o = status_after("{\"apiVersion\":\"scheduling.volcano.sh/v1beta1\",\"kind\":\"PodGroup\",\"metadata\":"
                     "{\"name\":\"v\"},\"spec\":{\"minMember\":2},\"status\":{\"conditions\":[{\"type\":\"Other\","
                     "\"status\":\"True\"}]}}",
                     false, "not enough GPUs", &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "status"), "phase")), "Pending");
    assert_string_equal(cond_field(o, "Unschedulable", "reason"), "NotEnoughResources");
    assert_string_equal(cond_field(o, "Unschedulable", "message"), "not enough GPUs");
    assert_string_equal(cond_field(o, "Other", "status"), "True"); /* others' conditions kept */
    text = json_dumps(o, 0);
    json_decref(o);
    o = status_after(text, true, NULL, &rc);
    free(text);
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "status"), "phase")), "Running");
    assert_string_equal(cond_field(o, "Scheduled", "status"), "True");
    assert_null(cond_field(o, "Unschedulable", "status"));
    assert_string_equal(cond_field(o, "Other", "status"), "True");
    json_decref(o);
    /* scheduler-plugins: phases only */
    o = status_after("{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"kind\":\"PodGroup\",\"metadata\":"
                     "{\"name\":\"c\"},\"spec\":{\"minMember\":2}}",
                     true, NULL, &rc);
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "status"), "phase")), "Scheduled");
    assert_null(json_object_get(json_object_get(o, "status"), "conditions"));
    json_decref(o);
    /* no PodGroup: nothing is created */
    json_t *out = NULL;
    struct gs_podgroup_status s = {true, NULL, 0};
    assert_int_equal(gs_podgroup_status_fn(NULL, &out, &s), GS_STORE_UNCHANGED);
    assert_null(out);
}

/*--- The in-process server ---*/

static const char tokens[] = "adm,admin,,,admin\n";

static int setup(void **state)
{
    struct gs_server_opts o = {.max_body = 64 * 1024};
    return api_env_start(state, "/tmp/gs-pg-XXXXXX", tokens, false, o);
}

static void create(struct api_env *e, const char *path, const char *body)
{
    long code = 0;
    json_t *j = json_loads(body, 0, NULL), *out = NULL;
    assert_non_null(j);
    int rc = gs_client_call(e->adm, "POST", path, "application/json", j, NULL, &out, &code);
    json_decref(j);
    char *text = out ? json_dumps(out, 0) : NULL;
    if (rc || code != 201) fail_msg("POST %s: rc %d, HTTP %ld: %s", path, rc, code, text ? text : "");
    free(text);
    json_decref(out);
}

static json_t *get(struct api_env *e, const char *path)
{
    json_t *out = NULL;
    long code = 0;
    if (gs_client_call(e->adm, "GET", path, NULL, NULL, NULL, &out, &code) || code != 200) {
        json_decref(out);
        return NULL;
    }
    return out;
}

static json_t *wait_pg(struct api_env *e, const char *path, const char *type, const char *status, const char *phase)
{
    for (int i = 0; i < 300; i++) {
        json_t *o = get(e, path);
        const char *s = type ? cond_field(o, type, "status") : NULL;
        const char *p = json_string_value(json_object_get(json_object_get(o, "status"), "phase"));
        if (o && (type ? s && !strcmp(s, status) : p && !strcmp(p, phase))) return o;
        json_decref(o);
        usleep(20000);
    }
    fail_msg("%s never reached %s %s", path, type ? type : "phase", type ? status : phase);
    return NULL;
}

static void server_pod(struct api_env *e, int shape, const char *name, const char *group, int gpus)
{
    char body[1024], meta[256] = "", spec[128] = "";
    if (shape == GS_PG_VOLCANO) snprintf(meta, sizeof meta, ",\"annotations\":{\"scheduling.k8s.io/group-name\":\"%s\"}", group);
    if (shape == GS_PG_COSCHED) snprintf(meta, sizeof meta, ",\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"%s\"}", group);
    if (shape == GS_PG_NATIVE) snprintf(spec, sizeof spec, "\"schedulingGroup\":{\"podGroupName\":\"%s\"},", group);
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\"%s},\"spec\":{%s\"containers\":"
             "[{\"name\":\"c\",\"image\":\"i\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"%d\"}}}]}}",
             name, meta, spec, gpus);
    create(e, "/api/v1/namespaces/default/pods", body);
}

static void server_writes_each_shapes_status(void **state)
{
    struct api_env *e = *state;
    for (int i = 0; i < 2; i++) {
        char n[256];
        snprintf(n, sizeof n,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"g%d\"},\"status\":{\"capacity\":"
                 "{\"cpu\":\"64\",\"memory\":\"256Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"4\"}}}",
                 i);
        create(e, "/api/v1/nodes", n);
    }
    create(e, "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups",
           NATIVE_PG("train", "\"schedulingPolicy\":{\"gang\":{\"minCount\":3}}"));
    create(e, "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups", GROUP_DOCS[GS_PG_VOLCANO]);
    create(e, "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups",
           "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"kind\":\"PodGroup\",\"metadata\":{\"name\":\"big\"},"
           "\"spec\":{\"minMember\":2}}");
    /* native and Volcano "train": 3 one-GPU members each; "big": 2 members of 5 GPUs, never fits a 4-GPU node */
    const char *names[] = {"k-0", "k-1", "k-2", "v-0", "v-1", "v-2"};
    for (int i = 0; i < 6; i++) server_pod(e, i < 3 ? GS_PG_NATIVE : GS_PG_VOLCANO, names[i], "train", 1);
    server_pod(e, GS_PG_COSCHED, "b-0", "big", 5);
    server_pod(e, GS_PG_COSCHED, "b-1", "big", 5);
    json_t *o = wait_pg(e, "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups/train", "PodGroupScheduled",
                        "True", NULL);
    assert_string_equal(cond_field(o, "PodGroupScheduled", "reason"), "Scheduled");
    json_decref(o);
    o = wait_pg(e, "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/train", NULL, NULL, "Running");
    assert_string_equal(cond_field(o, "Scheduled", "status"), "True");
    json_decref(o);
    for (int i = 0; i < 6; i++) {
        char path[128];
        snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s", names[i]);
        json_t *p = get(e, path);
        assert_non_null(json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName")));
        json_decref(p);
    }
    o = wait_pg(e, "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/big", NULL, NULL, "Pending");
    json_decref(o);
    json_t *p = get(e, "/api/v1/namespaces/default/pods/b-0");
    assert_null(json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName")));
    json_decref(p);
}

/* The native group that cannot be placed says why on PodGroupScheduled. */
static void server_writes_unschedulable_diagnosis(void **state)
{
    struct api_env *e = *state;
    create(e, "/api/v1/nodes",
           "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"g0\"},\"status\":{\"capacity\":"
           "{\"cpu\":\"64\",\"memory\":\"256Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"2\"}}}");
    create(e, "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups",
           NATIVE_PG("wide", "\"schedulingPolicy\":{\"gang\":{\"minCount\":2}}"));
    server_pod(e, GS_PG_NATIVE, "w-0", "wide", 2);
    server_pod(e, GS_PG_NATIVE, "w-1", "wide", 2);
    json_t *o = wait_pg(e, "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups/wide", "PodGroupScheduled",
                        "False", NULL);
    assert_string_equal(cond_field(o, "PodGroupScheduled", "reason"), "Unschedulable");
    const char *msg = cond_field(o, "PodGroupScheduled", "message");
    assert_non_null(msg);
    assert_true(strlen(msg) > 0);
    /* the node reports no devices: the diagnosis says it was count-only */
    assert_non_null(strstr(msg, "node g0: count-only GPU state"));
    json_decref(o);
    /* explain speaks of the group by its key, and of the count-only node */
    o = get(e, "/api/v1/namespaces/default/pods/w-0/explain");
    assert_non_null(o);
    const char *report = json_string_value(json_object_get(o, "report"));
    assert_non_null(report);
    if (getenv("GS_TEST_SHOW")) fprintf(stderr, "%s\n", report);
    if (!strstr(report, "pod group default/scheduling.k8s.io/wide") || !strstr(report, "node g0: count-only GPU state"))
        fail_msg("explain report:\n%s", report);
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(three_shapes_decode_into_one_struct),
        cmocka_unit_test(pods_join_by_each_shape),
        cmocka_unit_test(bad_groups_name_field_and_value),
        cmocka_unit_test(example_decodes),
        cmocka_unit_test(gang_of_three_bound_whole_per_shape),
        cmocka_unit_test(equal_names_of_two_shapes_do_not_collide),
        cmocka_unit_test(native_topology_constraint_is_required),
        cmocka_unit_test(status_per_shape),
        cmocka_unit_test_setup_teardown(server_writes_each_shapes_status, setup, api_env_teardown),
        cmocka_unit_test_setup_teardown(server_writes_unschedulable_diagnosis, setup, api_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
