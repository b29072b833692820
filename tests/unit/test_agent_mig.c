/*
 * test_agent_mig.c - MIG instances on the node: the node agent's choice for
 * pods (src/agent/agent_mig.c: free, held, unhealthy, none left, lowest GPU
 * index first, re-adoption from the checkpoint after a restart, env and
 * status) and the device plugin's resources under each MIG strategy
 * (src/node/gpus_disc.c: gs_node_resources), and the scheduler cache's view
 * of a single-strategy node (src/sched/cache.c: one GPU slot per instance).
 *
 * Inventories come from the mock discovery backend, as on a `--mock` node.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/agent_int.h"
#include "core/error.h"
#include "core/object.h"
#include "node/gpus_disc.h"
#include "sched/cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct gs_inventory *inventory(const char *spec)
{
    struct gs_clock clk;
    gs_clock_init_real(&clk);
    struct gs_disc d;
    struct gs_inventory *inv = calloc(1, sizeof *inv);
    assert_non_null(inv);
    assert_int_equal(gs_disc_open_mock(&d, spec, &clk), 0);
    assert_int_equal(gs_disc_inventory(&d, inv), 0);
    gs_disc_close(&d);
    return inv;
}

static struct gs__mig_req req(const char *profile, int count)
{
    struct gs__mig_req r = {.count = count};
    snprintf(r.profile, sizeof r.profile, "%s", profile);
    snprintf(r.resource, sizeof r.resource, "%s%s", *profile ? "nvidia.com/mig-" : "nvidia.com/gpu", profile);
    return r;
}

/*--- The choice ---*/

/* Two GPUs, each 1g.10gb x2 + 2g.20gb + 3g.40gb (instances 0,1 are 1g). */
#define BALANCED "2xA100-80GB,mig=1g.10gb*2+2g.20gb+3g.40gb"

static void test_free_lowest_gpu_then_instance_order(void **state)
{
    (void)state;
    struct gs_inventory *inv = inventory(BALANCED);
    struct gs__mig_req r[] = {req("1g.10gb", 3), req("3g.40gb", 1)};
    struct gs__mig_pick_in in = {.inv = inv, .reqs = r, .nreq = 2};
    struct gs__mig_hold *h;
    char why[256] = "";
    assert_int_equal(gs__mig_pick(&in, &h, why, sizeof why), 0);
    assert_int_equal(h->n, 4);
    assert_string_equal(h->v[0].uuid, inv->gpus[0].mig[0].uuid);
    assert_string_equal(h->v[1].uuid, inv->gpus[0].mig[1].uuid);
    assert_string_equal(h->v[2].uuid, inv->gpus[1].mig[0].uuid);
    assert_string_equal(h->v[3].uuid, inv->gpus[0].mig[3].uuid);
    assert_string_equal(h->v[3].profile, "3g.40gb");
    assert_string_equal(h->v[3].resource, "nvidia.com/mig-3g.40gb");
    assert_string_equal(h->v[2].parent, inv->gpus[1].uuid);
    assert_int_equal(h->v[2].gpu, 1);
    free(h);
    /* Listed out of index order, the GPU with the lower index still comes first. */
    struct gs_disc_gpu tmp = inv->gpus[0];
    inv->gpus[0] = inv->gpus[1];
    inv->gpus[1] = tmp;
    struct gs__mig_req one = req("2g.20gb", 1);
    in.reqs = &one, in.nreq = 1;
    assert_int_equal(gs__mig_pick(&in, &h, why, sizeof why), 0);
    assert_int_equal(h->v[0].gpu, 0);
    assert_string_equal(h->v[0].uuid, inv->gpus[1].mig[2].uuid);
    free(h);
    free(inv);
}

static void test_held_are_skipped_and_wait(void **state)
{
    (void)state;
    struct gs_inventory *inv = inventory(BALANCED);
    struct gs__mig_used used[] = {{inv->gpus[0].mig[0].uuid, "default/a"}, {inv->gpus[0].mig[1].uuid, "default/a"},
                                  {inv->gpus[1].mig[0].uuid, "team/b"}};
    struct gs__mig_req r = req("1g.10gb", 1);
    struct gs__mig_pick_in in = {.inv = inv, .used = used, .nused = 3, .reqs = &r, .nreq = 1};
    struct gs__mig_hold *h;
    char why[256] = "";
    assert_int_equal(gs__mig_pick(&in, &h, why, sizeof why), 0);
    assert_string_equal(h->v[0].uuid, inv->gpus[1].mig[1].uuid); /* the one nobody holds */
    free(h);
    /* Two wanted, one free, three held: enough exist, so wait for a holder. */
    r.count = 2;
    assert_int_equal(gs__mig_pick(&in, &h, why, sizeof why), GS_EBUSY);
    assert_null(h);
    assert_non_null(strstr(why, "nvidia.com/mig-1g.10gb"));
    assert_non_null(strstr(why, "requested 2, available 1"));
    assert_non_null(strstr(why, "3 held by other pods, e.g. team/b"));
    free(inv);
}

static void test_unhealthy_gpus_are_never_chosen(void **state)
{
    (void)state;
    struct gs_inventory *inv = inventory(BALANCED);
    struct gs__mig_req r = req("3g.40gb", 1);
    struct gs__mig_pick_in in = {.inv = inv, .unhealthy = 1, .reqs = &r, .nreq = 1};
    struct gs__mig_hold *h;
    char why[256] = "";
    assert_int_equal(gs__mig_pick(&in, &h, why, sizeof why), 0);
    assert_int_equal(h->v[0].gpu, 1);
    free(h);
    /* Both 3g.40gb wanted, one GPU sick: never satisfiable, no waiting. */
    r.count = 2;
    assert_int_equal(gs__mig_pick(&in, &h, why, sizeof why), GS_ERANGE);
    assert_non_null(strstr(why, "node has 2, 1 on unhealthy GPUs"));
    /* Sick and held together: only the healthy ones count towards waiting. */
    struct gs__mig_used used[] = {{inv->gpus[1].mig[3].uuid, "default/x"}};
    in.used = used, in.nused = 1, r.count = 1;
    assert_int_equal(gs__mig_pick(&in, &h, why, sizeof why), GS_EBUSY);
    r.count = 2;
    assert_int_equal(gs__mig_pick(&in, &h, why, sizeof why), GS_ERANGE);
    free(inv);
}

static void test_none_left_or_no_such_profile(void **state)
{
    (void)state;
    struct gs_inventory *inv = inventory(BALANCED);
    struct gs__mig_req r = req("1g.10gb", 5);
    struct gs__mig_pick_in in = {.inv = inv, .reqs = &r, .nreq = 1};
    struct gs__mig_hold *h;
    char why[256] = "";
    assert_int_equal(gs__mig_pick(&in, &h, why, sizeof why), GS_ERANGE);
    assert_non_null(strstr(why, "requested 5, available 4 (node has 4, 0 on unhealthy GPUs, 0 held"));
    r = req("7g.80gb", 1);
    assert_int_equal(gs__mig_pick(&in, &h, why, sizeof why), GS_ERANGE);
    assert_non_null(strstr(why, "nvidia.com/mig-7g.80gb: requested 1, available 0 (node has 0"));
    /* Single strategy: any profile, still GPU then instance order. */
    r = req("", 8);
    assert_int_equal(gs__mig_pick(&in, &h, why, sizeof why), 0);
    assert_int_equal(h->n, 8);
    assert_string_equal(h->v[4].uuid, inv->gpus[1].mig[0].uuid);
    assert_string_equal(h->v[7].resource, "nvidia.com/gpu");
    free(h);
    r.count = 9;
    assert_int_equal(gs__mig_pick(&in, &h, why, sizeof why), GS_ERANGE);
    assert_non_null(strstr(why, "node has 8 MIG instances"));
    free(inv);
}

static void test_pod_requests(void **state)
{
    (void)state;
    json_t *pod = json_loads("{\"spec\":{\"containers\":["
                             "{\"resources\":{\"limits\":{\"nvidia.com/mig-3g.40gb\":\"1\",\"cpu\":\"1\"}}},"
                             "{\"resources\":{\"requests\":{\"nvidia.com/mig-1g.10gb\":\"2\"}}},"
                             "{\"resources\":{\"limits\":{\"nvidia.com/mig-1g.10gb\":\"1\",\"nvidia.com/mig-\":\"1\"}}}"
                             "]}}",
                             0, NULL);
    assert_non_null(pod);
    struct gs__mig_req r[GS__MIG_RES_MAX];
    assert_int_equal(gs__mig_pod_reqs(pod, r, GS__MIG_RES_MAX), 2);
    assert_string_equal(r[0].resource, "nvidia.com/mig-1g.10gb");
    assert_string_equal(r[0].profile, "1g.10gb");
    assert_int_equal(r[0].count, 3);
    assert_string_equal(r[1].profile, "3g.40gb");
    assert_int_equal(r[1].count, 1);
    json_decref(pod);
}

/*--- The agent's side: admission, checkpoint, restart ---*/

static struct gs__pod *pod(const char *key, const char *limits_json)
{
    struct gs__pod *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->key = strdup(key);
    char doc[512];
    snprintf(doc, sizeof doc, "{\"spec\":{\"containers\":[{\"resources\":{\"limits\":%s}}]}}", limits_json);
    p->obj = json_loads(doc, 0, NULL);
    assert_non_null(p->obj);
    return p;
}

static void pod_free(struct gs__pod *p)
{
    free(p->key);
    free(p->devices);
    free(p->mig);
    json_decref(p->obj);
    free(p);
}

static struct gs_agent *agent(const char *spec)
{
    struct gs_agent *a = calloc(1, sizeof *a);
    assert_non_null(a);
    struct gs_inventory *inv = inventory(spec);
    a->inv = *inv;
    free(inv);
    gs_node_gpus_from_inventory(&a->gpus, &a->inv, 1);
    snprintf(a->node, sizeof a->node, "n1");
    a->pods = calloc(8, sizeof *a->pods);
    return a;
}

static void test_admit_skips_live_holders_and_readopts(void **state)
{
    (void)state;
    struct gs_agent *a = agent(BALANCED);
    char why[256] = "";
    struct gs__pod *p1 = pod("default/p1", "{\"nvidia.com/mig-1g.10gb\":\"3\"}");
    a->pods[a->npods++] = p1;
    assert_int_equal(gs__mig_admit(a, p1, why, sizeof why), 0);
    assert_non_null(p1->mig);
    assert_int_equal(p1->mig->n, 3);
    p1->holds_devices = true;
    /* The checkpoint carries the choice: a restarted agent gets the same instances back. */
    json_t *doc = json_object();
    gs__mig_save(p1, doc);
    char *text = json_dumps(doc, 0);
    json_decref(doc);
    pod_free(p1);
    json_t *back = json_loads(text, 0, NULL);
    free(text);
    struct gs__pod *r1 = pod("default/p1", "{}");
    gs__mig_recover(r1, back);
    json_decref(back);
    assert_non_null(r1->mig);
    assert_int_equal(r1->mig->n, 3);
    assert_string_equal(r1->mig->v[0].uuid, a->inv.gpus[0].mig[0].uuid);
    assert_string_equal(r1->mig->v[2].uuid, a->inv.gpus[1].mig[0].uuid);
    assert_string_equal(r1->mig->v[2].parent, a->inv.gpus[1].uuid);
    assert_string_equal(r1->mig->v[2].resource, "nvidia.com/mig-1g.10gb");
    assert_int_equal(gs__mig_gpu_mask(a, r1), 3);
    r1->holds_devices = true;
    a->pods[0] = r1;
    /* A new pod gets only what the re-adopted one does not hold. */
    struct gs__pod *p2 = pod("default/p2", "{\"nvidia.com/mig-1g.10gb\":\"1\"}");
    a->pods[a->npods++] = p2;
    assert_int_equal(gs__mig_admit(a, p2, why, sizeof why), 0);
    assert_string_equal(p2->mig->v[0].uuid, a->inv.gpus[1].mig[1].uuid);
    p2->holds_devices = true;
    /* None left now; the holders are live, so the third one waits. */
    struct gs__pod *p3 = pod("default/p3", "{\"nvidia.com/mig-1g.10gb\":\"1\"}");
    a->pods[a->npods++] = p3;
    assert_int_equal(gs__mig_admit(a, p3, why, sizeof why), 1);
    assert_null(p3->mig);
    assert_non_null(strstr(why, "4 held by other pods"));
    /* p1 ends: its instances are released, the waiting pod gets the first of them. */
    r1->holds_devices = false;
    assert_int_equal(gs__mig_admit(a, p3, why, sizeof why), 0);
    assert_string_equal(p3->mig->v[0].uuid, a->inv.gpus[0].mig[0].uuid);
    /* A GPU going bad: its instances are not handed out, and a pod that cannot be served fails. */
    a->unhealthy = 1;
    struct gs__pod *p4 = pod("default/p4", "{\"nvidia.com/mig-2g.20gb\":\"2\"}");
    a->pods[a->npods++] = p4;
    assert_int_equal(gs__mig_admit(a, p4, why, sizeof why), -1);
    assert_non_null(strstr(why, "nvidia.com/mig-2g.20gb: requested 2, available 1"));
    for (size_t i = 0; i < a->npods; i++) pod_free(a->pods[i]);
    free(a->pods);
    free(a);
}

static void test_single_strategy_slots(void **state)
{
    (void)state;
    struct gs_agent *a = agent("2xA100-80GB,mig=2g.20gb*3");
    char why[256] = "";
    /* The scheduler names single-strategy slots past the two GPUs. */
    assert_false(gs__mig_slot_token(a, "1"));
    assert_true(gs__mig_slot_token(a, "2"));
    assert_true(gs__mig_slot_token(a, "7"));
    assert_false(gs__mig_slot_token(a, "GPU-x"));
    assert_false(gs__mig_slot_token(a, ""));
    struct gs__pod *p = pod("default/s", "{\"nvidia.com/gpu\":\"2\"}");
    p->devices = strdup("3,2");
    a->pods[a->npods++] = p;
    assert_int_equal(gs__mig_admit(a, p, why, sizeof why), 0);
    assert_int_equal(p->mig->n, 2);
    assert_string_equal(p->mig->v[1].uuid, a->inv.gpus[0].mig[1].uuid);
    assert_string_equal(p->mig->v[0].resource, "nvidia.com/gpu");
    /* Unannotated nvidia.com/gpu: MIG devices only when the node runs the single strategy. */
    free(p->devices);
    p->devices = NULL;
    assert_int_equal(gs__mig_admit(a, p, why, sizeof why), 0);
    assert_null(p->mig);
    a->mig_strategy = GS_MIG_SINGLE;
    assert_int_equal(gs__mig_admit(a, p, why, sizeof why), 0);
    assert_int_equal(p->mig->n, 2);
    /* Without MIG on the node, a number past the GPUs is not a MIG slot. */
    struct gs_agent *plain = agent("2xA100-80GB");
    assert_false(gs__mig_slot_token(plain, "2"));
    free(plain->pods);
    free(plain);
    pod_free(p);
    free(a->pods);
    free(a);
}

static void test_env_and_status(void **state)
{
    (void)state;
    struct gs__pod *p = pod("default/e", "{}");
    p->mig = calloc(1, sizeof *p->mig + 2 * sizeof p->mig->v[0]);
    p->mig->n = 2;
    snprintf(p->mig->v[0].uuid, sizeof p->mig->v[0].uuid, "MIG-a");
    snprintf(p->mig->v[1].uuid, sizeof p->mig->v[1].uuid, "MIG-b");
    snprintf(p->mig->v[1].profile, sizeof p->mig->v[1].profile, "1g.10gb");
    p->mig->v[1].gpu = 3;
    json_t *env = json_pack("{s:s,s:s}", "NVIDIA_VISIBLE_DEVICES", "void", "CUDA_VISIBLE_DEVICES", "");
    gs__mig_env(p, env);
    assert_string_equal(json_string_value(json_object_get(env, "NVIDIA_VISIBLE_DEVICES")), "MIG-a,MIG-b");
    assert_string_equal(json_string_value(json_object_get(env, "CUDA_VISIBLE_DEVICES")), "MIG-a,MIG-b");
    /* With a whole GPU too (single strategy on a node with both), the GPU comes first. */
    p->nslots = 1;
    json_object_set_new(env, "NVIDIA_VISIBLE_DEVICES", json_string("GPU-1"));
    gs__mig_env(p, env);
    assert_string_equal(json_string_value(json_object_get(env, "NVIDIA_VISIBLE_DEVICES")), "GPU-1,MIG-a,MIG-b");
    json_decref(env);
    /* Status: whole GPUs stay, the scheduler's slot numbers and stale MIG entries go. */
    json_t *st = json_loads("{\"devices\":[{\"index\":0,\"uuid\":\"GPU-1\"},{\"index\":5,\"milli\":1000},"
                            "{\"index\":1,\"uuid\":\"MIG-old\"}]}",
                            0, NULL);
    gs__mig_status(p, st); /* not started (refused at admission): nothing to report */
    assert_int_equal(json_array_size(json_object_get(st, "devices")), 3);
    assert_string_equal(gs__jstr(json_array_get(json_object_get(st, "devices"), 2), "uuid"), "MIG-old");
    p->start_time = 1700000000;
    gs__mig_status(p, st);
    gs__mig_status(p, st); /* idempotent */
    json_t *devs = json_object_get(st, "devices");
    assert_int_equal(json_array_size(devs), 3);
    assert_string_equal(gs__jstr(json_array_get(devs, 0), "uuid"), "GPU-1");
    assert_string_equal(gs__jstr(json_array_get(devs, 2), "uuid"), "MIG-b");
    assert_string_equal(gs__jstr(json_array_get(devs, 2), "profile"), "1g.10gb");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(devs, 2), "index")), 3);
    json_decref(st);
    pod_free(p);
}

/*--- The device plugin's resources ---*/

static struct gs_node_resource *resources(const char *spec, enum gs_mig_strategy s, int *n, char *err, size_t el)
{
    struct gs_inventory *inv = inventory(spec);
    struct gs_node_resource *res = calloc(GS_NODE_MAX_RESOURCES, sizeof *res);
    assert_non_null(res);
    *n = gs_node_resources(inv, s, 1, res, err, el);
    free(inv);
    return res;
}

static void test_plugin_resources_mixed(void **state)
{
    (void)state;
    char err[256] = "";
    int n;
    struct gs_node_resource *r = resources("2xA100-80GB+2xT4,numa=2,mig=1g.10gb*2+3g.40gb", GS_MIG_MIXED, &n, err,
                                           sizeof err);
    assert_int_equal(n, 3);
    assert_string_equal(r[0].name, "nvidia.com/gpu");
    assert_int_equal(r[0].gpus.n, 2); /* the T4s only: MIG GPUs are never whole */
    assert_false(r[0].gpus.mig);
    assert_int_equal(r[0].gpus.gpu[0].parent, 2);
    assert_string_equal(r[1].name, "nvidia.com/mig-1g.10gb");
    assert_string_equal(r[1].endpoint, "gpusched-mig-1g.10gb.sock");
    assert_true(r[1].gpus.mig);
    assert_int_equal(r[1].gpus.n, 4);
    assert_memory_equal(r[1].gpus.gpu[0].uuid, "MIG-", 4);
    assert_int_equal(r[1].gpus.gpu[2].parent, 1);
    assert_int_equal(r[1].gpus.gpu[2].index, 1);
    assert_string_equal(r[2].name, "nvidia.com/mig-3g.40gb");
    assert_int_equal(r[2].gpus.n, 2);
    /* A GPU going bad takes its MIG devices with it, and only them. */
    assert_true(gs_node_gpus_set_parent_health(&r[1].gpus, 1, false));
    assert_true(r[1].gpus.gpu[0].healthy && r[1].gpus.gpu[1].healthy);
    assert_false(r[1].gpus.gpu[2].healthy || r[1].gpus.gpu[3].healthy);
    assert_false(gs_node_gpus_set_parent_health(&r[1].gpus, 1, false));
    free(r);
    /* No whole GPU left: no nvidia.com/gpu resource. */
    r = resources("2xA100-80GB,mig=1g.10gb*7", GS_MIG_MIXED, &n, err, sizeof err);
    assert_int_equal(n, 1);
    assert_string_equal(r[0].name, "nvidia.com/mig-1g.10gb");
    assert_int_equal(r[0].gpus.n, 14);
    free(r);
}

static void test_plugin_resources_single_and_none(void **state)
{
    (void)state;
    char err[256] = "";
    int n;
    struct gs_node_resource *r = resources("4xA100-80GB,mig=1g.10gb*7", GS_MIG_SINGLE, &n, err, sizeof err);
    assert_int_equal(n, 1);
    assert_string_equal(r[0].name, "nvidia.com/gpu");
    assert_true(r[0].gpus.mig);
    assert_int_equal(r[0].gpus.n, 28);
    free(r);
    r = resources("2xA100-80GB+1xT4,mig=1g.10gb*7", GS_MIG_SINGLE, &n, err, sizeof err);
    assert_int_equal(n, GS_EINVAL);
    assert_non_null(strstr(err, "GPU 0 has MIG enabled, GPU 2 has not"));
    free(r);
    r = resources("2xA100-80GB,mig=2g.20gb+1g.10gb", GS_MIG_SINGLE, &n, err, sizeof err);
    assert_int_equal(n, GS_EINVAL);
    assert_non_null(strstr(err, "found 1g.10gb and 2g.20gb"));
    free(r);
    /* Single without MIG, and none with MIG: whole GPUs. */
    r = resources("2xA100-80GB", GS_MIG_SINGLE, &n, err, sizeof err);
    assert_int_equal(n, 1);
    assert_int_equal(r[0].gpus.n, 2);
    assert_false(r[0].gpus.mig);
    free(r);
    r = resources("2xA100-80GB,mig=1g.10gb*7", GS_MIG_NONE, &n, err, sizeof err);
    assert_int_equal(n, 1);
    assert_int_equal(r[0].gpus.n, 2);
    assert_memory_equal(r[0].gpus.gpu[1].uuid, "GPU-", 4);
    free(r);
    /* 8 GPUs of 7 instances: 56 devices fit one table. */
    r = resources("8xH100-80GB,mig=1g.10gb*7", GS_MIG_MIXED, &n, err, sizeof err);
    assert_int_equal(n, 1);
    assert_int_equal(r[0].gpus.n, 56);
    free(r);
}

/*--- The scheduler cache under the single strategy ---*/

/* A node of 2 MIG GPUs (3 x 2g.20gb each) and one whole GPU; strategy label and
 * allocatable nvidia.com/gpu as given. Returns the cache's record. */
static const struct gs_node_info *cache_node(struct gs_cache *c, struct gs_object **o, const char *strategy,
                                             const char *alloc)
{
    char doc[2048];
    const char *mig = "\"mig\":{\"enabled\":true,\"instances\":[{\"profile\":\"2g.20gb\",\"uuid\":\"MIG-%c1\"},"
                      "{\"profile\":\"2g.20gb\",\"uuid\":\"MIG-%c2\"},{\"profile\":\"2g.20gb\",\"uuid\":\"MIG-%c3\"}]}";
    char m0[400], m1[400];
    snprintf(m0, sizeof m0, mig, 'a', 'a', 'a');
    snprintf(m1, sizeof m1, mig, 'b', 'b', 'b');
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"labels\":{%s}},"
             "\"status\":{\"allocatable\":{\"cpu\":\"8\",\"memory\":\"64Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"%s\"},"
             "\"devices\":[{\"index\":0,\"uuid\":\"GPU-a\",\"memoryMiB\":81920,\"numaNode\":0,%s},"
             "{\"index\":1,\"uuid\":\"GPU-b\",\"memoryMiB\":81920,\"numaNode\":1,%s},"
             "{\"index\":2,\"uuid\":\"GPU-c\",\"memoryMiB\":16384,\"numaNode\":1}]}}",
             strategy ? "\"nvidia.com/mig.strategy\":\"single\"" : "", alloc, m0, m1);
    json_t *j = json_loads(doc, 0, NULL);
    assert_non_null(j);
    struct gs_diags d = {0};
    assert_int_equal(gs_object_decode(j, o, &d), 0);
    gs_diags_free(&d);
    json_decref(j);
    int32_t idx = gs_cache_add_node(c, (*o)->u.node);
    assert_true(idx >= 0);
    return gs_cache_node(c, idx);
}

static void test_cache_single_strategy_slots(void **state)
{
    (void)state;
    struct gs_clock clk;
    gs_clock_init_real(&clk);
    struct gs_cache *c = gs_cache_new(&clk);
    struct gs_object *o = NULL;
    /* 1 whole GPU + 6 MIG devices advertised as nvidia.com/gpu. */
    const struct gs_node_info *n = cache_node(c, &o, "single", "7");
    assert_int_equal(n->ngpus, 3 + 6);
    assert_false(n->gpus[0].healthy || n->gpus[1].healthy); /* MIG GPUs never whole */
    assert_true(n->gpus[2].healthy);
    for (int s = 3; s < 9; s++) {
        assert_true(n->gpus[s].healthy);
        assert_int_equal(n->gpus[s].mem_total_mib, 20 * 1024);
    }
    assert_int_equal(n->gpus[3].numa_node, 0);
    assert_int_equal(n->gpus[8].numa_node, 1);
    assert_int_equal(n->gpus_whole_free, 7);
    gs_cache_remove_node(c, "n1");
    gs_object_free(o);
    /* Gated (allocatable 0), or not the single strategy: no MIG slots. */
    n = cache_node(c, &o, "single", "0");
    assert_int_equal(n->ngpus, 3);
    gs_cache_remove_node(c, "n1");
    gs_object_free(o);
    n = cache_node(c, &o, NULL, "3");
    assert_int_equal(n->ngpus, 3);
    assert_int_equal(n->gpus_whole_free, 1);
    gs_cache_remove_node(c, "n1");
    gs_object_free(o);
    gs_cache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_lowest_gpu_then_instance_order),
        cmocka_unit_test(test_held_are_skipped_and_wait),
        cmocka_unit_test(test_unhealthy_gpus_are_never_chosen),
        cmocka_unit_test(test_none_left_or_no_such_profile),
        cmocka_unit_test(test_pod_requests),
        cmocka_unit_test(test_admit_skips_live_holders_and_readopts),
        cmocka_unit_test(test_single_strategy_slots),
        cmocka_unit_test(test_env_and_status),
        cmocka_unit_test(test_plugin_resources_mixed),
        cmocka_unit_test(test_plugin_resources_single_and_none),
        cmocka_unit_test(test_cache_single_strategy_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
