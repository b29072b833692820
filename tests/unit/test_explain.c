/*
 * test_explain.c - the pending-pod report: per-plugin rejection counts, the
 * closest node and what it lacks, the preemption counterfactual naming the
 * victims (and leaving the cache untouched), the NVLink island hint, and a
 * gang's state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched/explain.h"
#include "sched_fixture.h"

static struct gs_clock clk;

static char *report(struct gs_framework *fw, struct gs_cache *c, const struct gs_pod *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(gs_explain_pod(fw, c, p, f), 0);
    fclose(f);
    return buf;
}

static void test_report(void **st)
{
    (void)st;
    gs_clock_init_sim(&clk, 0);
    struct gs_cache *c = gs_cache_new(&clk);
    assert_int_equal(fx_add_node(c, "dgx", 8, 64, 4, 4, NULL), 0);
    assert_int_equal(fx_add_node(c, "small", 2, 8, 0, 0, NULL), 1);
    struct gs_handle h = {.clock = &clk, .cache = c};
    struct gs_sched_config cfg;
    char text[4096];
    snprintf(text, sizeof text, FX_GANG_PROFILE, 60, "true");
    struct gs_framework *fw = fx_framework(text, &cfg, &h);
    assert_non_null(fw);
    struct gs_pod *x = fx_pod("x", 1, 0, NULL), *y = fx_pod("y", 2, 0, NULL), *z = fx_pod("z", 2, 50, NULL);
    assert_int_equal(gs_cache_add_bound(c, x, &(struct gs_assignment){0, 0x08, 1000, 0}), 0);
    assert_int_equal(gs_cache_add_bound(c, y, &(struct gs_assignment){0, 0x90, 1000, 0}), 0);
    assert_int_equal(gs_cache_add_bound(c, z, &(struct gs_assignment){1, 0x03, 1000, 0}), 0);
    int64_t used = gs_cache_gpu_milli_used(c);

    /* 4 GPUs in one NVLink island: free are 0,1,2 and 5,6. */
    struct gs_pod *nv = fx_pod_ex("nv", 4, 0, 1, 10, NULL, NULL, NULL, "{\"gpusched.io/gpu-interconnect\":\"nvlink\"}");
    char *r = report(fw, c, nv);
    assert_non_null(strstr(r, "0 of 2 schedulable node(s) pass every filter"));
    assert_non_null(strstr(r, "NodeResourceTopology"));
    assert_non_null(strstr(r, "GpuShare               rejected 1 node(s): Insufficient nvidia.com/gpu"));
    assert_non_null(strstr(r, "closest node: dgx"));
    assert_non_null(strstr(r, "needs 4 GPUs in one NVLink island; largest free island is 3 (on dgx)"));
    assert_non_null(strstr(r, "would fit on dgx if pod default/y was preempted"));
    free(r);
    fx_check_cache(c);
    assert_int_equal(gs_cache_gpu_milli_used(c), used);

    /* Too big for any node, and nothing to preempt that would help. */
    struct gs_pod *huge = fx_pod_ex("huge", 2, 0, 100, 10, NULL, NULL, NULL, NULL);
    r = report(fw, c, huge);
    assert_non_null(strstr(r, "NodeResourcesFit"));
    assert_non_null(strstr(r, "it lacks: 3") || strstr(r, "it lacks: 36"));
    assert_non_null(strstr(r, "preemption: would not help"));
    free(r);

    /* A pod that fits says so. */
    struct gs_pod *one = fx_pod("one", 1, 0, NULL);
    r = report(fw, c, one);
    assert_non_null(strstr(r, "it fits now"));
    free(r);

    /* A gang with one of two members: the group line and the admission reason. */
    struct gs_object *pg = fx_podgroup("g", 2, 0, NULL);
    gs_framework_notify_podgroup(fw, pg->u.podgroup, true);
    struct gs_pod *g0 = fx_pod("g-0", 1, 0, "g");
    gs_framework_notify_pod(fw, g0, true);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    const struct gs_pod *members[1] = {g0};
    assert_int_equal(gs_explain_group(fw, c, "default/g", members, 1, f), 0);
    fclose(f);
    assert_non_null(strstr(buf, "pod group default/g: 1 member(s) known, 0 placed, minMember 2"));
    assert_non_null(strstr(buf, "has 1 of minMember 2 pods"));
    free(buf);

    gs_framework_free(fw);
    gs_sched_config_free(&cfg);
    gs_cache_free(c);
    fx_pod_free(x), fx_pod_free(y), fx_pod_free(z), fx_pod_free(nv), fx_pod_free(huge), fx_pod_free(one), fx_pod_free(g0);
    gs_object_free(pg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_report)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
