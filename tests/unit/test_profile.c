/*
 * test_profile.c - scheduler configuration: the default profile, kube's merge
 * rules (disable, "*", re-enable in place with a weight, append, multiPoint),
 * several profiles by schedulerName, pluginConfig args, and errors that name
 * the field path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sched/framework.h"

#include <string.h>

static const char *names_at(const struct gs_profile *p, enum gs_point pt)
{
    static char buf[512];
    buf[0] = 0;
    for (int i = 0; i < p->npoints[pt]; i++) {
        char one[80];
        snprintf(one, sizeof one, "%s%s", i ? "," : "", p->points[pt][i].plugin->name);
        if (pt == GS_PT_SCORE) snprintf(one + strlen(one), sizeof one - strlen(one), ":%lld", (long long)p->points[pt][i].weight);
        strncat(buf, one, sizeof buf - strlen(buf) - 1);
    }
    return buf;
}

static int parse(const char *text, struct gs_sched_config *cfg, struct gs_diags *d)
{
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    assert_non_null(doc);
    int err = gs_sched_config_parse(doc, cfg, d);
    json_decref(doc);
    return err;
}

static void default_profile(void **st)
{
    (void)st;
    struct gs_sched_config c;
    assert_int_equal(gs_sched_config_default(&c), 0);
    const struct gs_profile *p = gs_sched_config_profile(&c, NULL);
    assert_non_null(p);
    assert_string_equal(p->scheduler_name, "default-scheduler");
    assert_string_equal(names_at(p, GS_PT_QUEUE_SORT), "PrioritySort");
    assert_string_equal(names_at(p, GS_PT_FILTER),
                        "NodeUnschedulable,NodeResourcesFit,GpuShare,GpuModel,NodeAffinity,TaintToleration,"
                        "InterPodAffinity,DynamicResources");
    assert_string_equal(names_at(p, GS_PT_PRE_FILTER),
                        "NodeUnschedulable,GpuShare,GpuModel,NodeAffinity,TaintToleration,InterPodAffinity,"
                        "DynamicResources");
    /* kube-scheduler's default weights. */
    assert_string_equal(names_at(p, GS_PT_SCORE), "NodeResourcesFit:1,NodeAffinity:2,TaintToleration:3,"
                                                  "InterPodAffinity:2,NodeResourcesBalancedAllocation:1");
    assert_string_equal(names_at(p, GS_PT_RESERVE), "DynamicResources,GpuShare");
    assert_string_equal(names_at(p, GS_PT_PRE_BIND), "DynamicResources");
    assert_string_equal(names_at(p, GS_PT_BIND), "DefaultBinder");
    assert_null(gs_sched_config_profile(&c, "other"));
    gs_sched_config_free(&c);
    /* A document without profiles is the default. */
    struct gs_diags d = {0};
    assert_int_equal(parse("{\"apiVersion\":\"kubescheduler.config.k8s.io/v1\",\"kind\":\"KubeSchedulerConfiguration\"}", &c, &d), 0);
    assert_int_equal(c.nprofiles, 1);
    gs_sched_config_free(&c);
}

/* The server's profile: FGDLearn places (scores, and picks the GPUs after
 * the topology and claim choices, before GpuShare's); kube's spreading
 * resource scorers are off; every plugin a pod's own asks go through keeps
 * a weight above FGDLearn's. */
static void gpusched_profile_placement(void **st)
{
    (void)st;
    struct gs_sched_config c;
    assert_int_equal(gs_sched_config_gpusched(&c), 0);
    const struct gs_profile *p = gs_sched_config_profile(&c, NULL);
    assert_non_null(p);
    assert_string_equal(names_at(p, GS_PT_SCORE), "NodeAffinity:2,TaintToleration:3,InterPodAffinity:2,FGDLearn:1,"
                                                  "Coscheduling:10,NodeResourceTopology:3,PodTopologySpread:2,"
                                                  "DefaultPreemption:5");
    assert_string_equal(names_at(p, GS_PT_PRE_SCORE), "NodeAffinity,TaintToleration,InterPodAffinity,FGDLearn");
    assert_string_equal(names_at(p, GS_PT_RESERVE),
                        "NodeResourceTopology,DynamicResources,FGDLearn,GpuShare,Coscheduling,DefaultPreemption");
    assert_string_equal(names_at(p, GS_PT_FILTER),
                        "NodeUnschedulable,NodeResourcesFit,GpuShare,GpuModel,NodeAffinity,TaintToleration,"
                        "InterPodAffinity,DynamicResources,Coscheduling,PodTopologySpread,NodeResourceTopology,"
                        "DefaultPreemption");
    bool leave_flat = false;
    for (int i = 0; i < p->nargs; i++)
        if (!strcmp(p->args_names[i], "NodeResourceTopology"))
            leave_flat = json_is_true(json_object_get(p->args[i], "leaveFlatNodes"));
    assert_true(leave_flat);
    gs_sched_config_free(&c);
}

static void merge_rules(void **st)
{
    (void)st;
    struct gs_sched_config c;
    struct gs_diags d = {0};
    const char *doc =
        "{\"profiles\":["
        "{\"schedulerName\":\"a\",\"plugins\":{"
        "  \"score\":{\"disabled\":[{\"name\":\"TaintToleration\"},{\"name\":\"NodeResourcesFit\"}],"
        "             \"enabled\":[{\"name\":\"NodeResourcesFit\",\"weight\":4},{\"name\":\"NodeAffinity\",\"weight\":7}]},"
        "  \"filter\":{\"disabled\":[{\"name\":\"*\"}],\"enabled\":[{\"name\":\"GpuShare\"},{\"name\":\"NodeResourcesFit\"}]}}},"
        "{\"schedulerName\":\"b\",\"plugins\":{\"multiPoint\":{\"enabled\":[{\"name\":\"NodeAffinity\",\"weight\":5}]},"
        "  \"score\":{\"disabled\":[{\"name\":\"*\"}]}},"
        " \"pluginConfig\":[{\"name\":\"NodeResourcesFit\",\"args\":{\"scoringStrategy\":{\"type\":\"MostAllocated\"}}}]}"
        "]}";
    int err = parse(doc, &c, &d);
    if (err) fail_msg("%s: %s", d.n ? d.v[0].path : "", d.n ? d.v[0].msg : "");
    assert_int_equal(c.nprofiles, 2);
    const struct gs_profile *a = gs_sched_config_profile(&c, "a"), *b = gs_sched_config_profile(&c, "b");
    assert_non_null(a);
    assert_non_null(b);
    /* Disabled defaults dropped; an enabled default keeps its place with the new weight; an enabled
     * plugin that was disabled as a default is appended; "*" drops every default. */
    assert_string_equal(names_at(a, GS_PT_SCORE),
                        "NodeAffinity:7,InterPodAffinity:2,NodeResourcesBalancedAllocation:1,NodeResourcesFit:4");
    assert_string_equal(names_at(a, GS_PT_FILTER), "GpuShare,NodeResourcesFit");
    assert_string_equal(names_at(a, GS_PT_QUEUE_SORT), "PrioritySort");
    assert_string_equal(names_at(b, GS_PT_SCORE), "NodeAffinity:5");
    assert_string_equal(names_at(b, GS_PT_FILTER),
                        "NodeUnschedulable,NodeResourcesFit,GpuShare,GpuModel,NodeAffinity,TaintToleration,"
                        "InterPodAffinity,DynamicResources");
    assert_int_equal(b->nargs, 1);
    assert_string_equal(b->args_names[0], "NodeResourcesFit");
    gs_sched_config_free(&c);
    gs_diags_free(&d);
}

static void merge_keeps_default_order(void **st)
{
    (void)st;
    struct gs_sched_config c;
    struct gs_diags d = {0};
    assert_int_equal(parse("{\"profiles\":[{\"plugins\":{\"score\":{\"disabled\":[{\"name\":\"TaintToleration\"}],"
                           "\"enabled\":[{\"name\":\"NodeAffinity\",\"weight\":7}]}}}]}",
                           &c, &d),
                     0);
    assert_string_equal(names_at(&c.profiles[0], GS_PT_SCORE),
                        "NodeResourcesFit:1,NodeAffinity:7,InterPodAffinity:2,NodeResourcesBalancedAllocation:1");
    gs_sched_config_free(&c);
}

struct bad {
    const char *doc, *path, *msg_part;
};

static void errors_name_the_field(void **st)
{
    (void)st;
    const struct bad cases[] = {
        {"{\"profiles\":[{\"plugins\":{\"score\":{\"enabled\":[{\"name\":\"NodeAffinity\"},{\"name\":\"Foo\"}]}}}]}",
         "profiles[0].plugins.score.enabled[1].name", "unknown plugin \"Foo\""},
        {"{\"profiles\":[{},{\"plugins\":{\"score\":{\"enabled\":[{\"name\":\"NodeAffinity\",\"weight\":101}]}}}]}",
         "profiles[1].plugins.score.enabled[0].weight", "between 0 and 100"},
        {"{\"profiles\":[{\"plugins\":{\"score\":{\"enabled\":[{\"name\":\"NodeAffinity\",\"weight\":\"x\"}]}}}]}",
         "profiles[0].plugins.score.enabled[0].weight", "integer"},
        {"{\"profiles\":[{\"plugins\":{\"scores\":{\"enabled\":[]}}}]}", "profiles[0].plugins.scores",
         "unknown extension point \"scores\""},
        {"{\"profiles\":[{\"plugins\":{\"bind\":{\"enabled\":[{\"name\":\"GpuModel\"}]}}}]}",
         "profiles[0].plugins.bind.enabled[0].name", "does not implement bind"},
        {"{\"profiles\":[{\"plugins\":{\"queueSort\":{\"disabled\":[{\"name\":\"*\"}]}}}]}",
         "profiles[0].plugins.queueSort", "exactly one queueSort"},
        {"{\"profiles\":[{\"pluginConfig\":[{\"name\":\"Nope\",\"args\":{}}]}]}", "profiles[0].pluginConfig[0].name",
         "unknown plugin \"Nope\""},
        {"{\"profiles\":[{\"pluginConfig\":[{\"name\":\"NodeResourcesFit\",\"args\":{\"scoringStrategy\":{\"type\":\"X\"}}}]}]}",
         "profiles[0].pluginConfig[0].args.scoringStrategy.type", "unknown scoring strategy \"X\""},
        {"{\"profiles\":[{\"schedulerName\":\"s\"},{\"schedulerName\":\"s\"}]}", "profiles[1].schedulerName",
         "duplicate schedulerName"},
        {"{\"kind\":\"Pod\"}", "kind", "KubeSchedulerConfiguration"},
        {"{\"profiles\":[{\"plugin\":{}}]}", "profiles[0].plugin", "unknown field"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gs_sched_config c;
        struct gs_diags d = {0};
        assert_int_equal(parse(cases[i].doc, &c, &d), GS_EINVAL);
        assert_true(d.n >= 1);
        bool found = false;
        for (size_t k = 0; k < d.n; k++)
            if (!strcmp(d.v[k].path, cases[i].path) && strstr(d.v[k].msg, cases[i].msg_part)) found = true;
        if (!found) fail_msg("case %zu: got %s: %s", i, d.v[0].path, d.v[0].msg);
        assert_int_equal(c.nprofiles, 0);
        gs_diags_free(&d);
    }
}

static void profile_runs_in_a_framework(void **st)
{
    (void)st;
    struct gs_sched_config c;
    struct gs_diags d = {0};
    assert_int_equal(parse("{\"profiles\":[{\"schedulerName\":\"packer\",\"pluginConfig\":[{\"name\":\"NodeResourcesFit\","
                           "\"args\":{\"scoringStrategy\":{\"type\":\"MostAllocated\"}}}]}]}",
                           &c, &d),
                     0);
    struct gs_clock clk;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *cache = gs_cache_new(&clk);
    struct gs_node_spec a = {.name = "a", .cpu_milli = 4000, .mem_bytes = 1LL << 33};
    struct gs_node_spec b = {.name = "b", .cpu_milli = 4000, .mem_bytes = 1LL << 33};
    gs_cache_add_node_spec(cache, &a);
    gs_cache_add_node_spec(cache, &b);
    struct gs_handle h = {.clock = &clk, .cache = cache, .seed = 3};
    struct gs_framework *fw;
    assert_int_equal(gs_framework_new(gs_sched_config_profile(&c, "packer"), &h, &fw, &d), 0);
    /* MostAllocated packs: every pod lands on the node already used. */
    struct gs_pod pods[3] = {0};
    char names[3][8] = {"p0", "p1", "p2"};
    for (int i = 0; i < 3; i++) {
        pods[i].meta.name = names[i];
        pods[i].meta.namespace_ = "ns";
        pods[i].demand.cpu_milli = 1000;
        struct gs_schedule_result r;
        assert_int_equal(gs_framework_schedule(fw, &pods[i], 0, &r), 0);
        assert_int_equal(r.code, GS_SUCCESS);
        assert_int_equal(r.a.node, 0);
        assert_int_equal(gs_framework_bind(fw, &pods[i]).code, GS_SUCCESS);
        gs_schedule_result_free(&r);
    }
    gs_framework_free(fw);
    gs_cache_free(cache);
    gs_sched_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_profile),
        cmocka_unit_test(gpusched_profile_placement),
        cmocka_unit_test(merge_rules),
        cmocka_unit_test(merge_keeps_default_order),
        cmocka_unit_test(errors_name_the_field),
        cmocka_unit_test(profile_runs_in_a_framework),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
