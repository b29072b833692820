/*
 * test_auth_invariants.c - nothing a tenant does may corrupt quota or cache
 * accounting. An in-process server with its scheduler, two 4-GPU nodes and a
 * 4-GPU ClusterQueue (no cohort) takes a few hundred random tenant requests
 * from a fixed seed: pods created with a node, devices, a status or a
 * priority of their own choosing, patches of spec, status, annotations and
 * labels, bindings, deletes, priority classes and namespace games, mixed
 * with the nodes finishing their pods. Each request's answer is checked
 * (refused ones with the status the field rules give), and after each the
 * scheduler cache's accounting - GPU milli used per GPU and pods per node -
 * must come to equal what the store's bound, unfinished pods imply, and the
 * queue's bound pods must stay within its quota.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "loops/sched_loop.h"
#include "control/store.h"
#include "sched/cache.h"

#include <string.h>
#include <unistd.h>

#define NODES 2
#define GPUS 4
#define QUOTA 4

static const char tokens[] = "adm,admin,,,admin\n"
                             "ten,alice,,team-a;team-b,tenant\n"
                             "nod,system:node:n1,,,node\n"
                             "nod2,system:node:n2,,,node\n";

static uint64_t rng = 0x5eed1234abcdULL;

static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static json_t *J(const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_error_t e;
    json_t *j = json_loads(buf, 0, &e);
    if (!j) fail_msg("bad JSON %s: %s", buf, e.text);
    return j;
}

/* The HTTP status of one call (0 when it never got an answer). */
static long call(struct gs_client *c, const char *method, const char *path, const char *ctype, json_t *body)
{
    json_t *out = NULL;
    long code = 0;
    gs_client_call(c, method, path, ctype, body, NULL, &out, &code);
    json_decref(out);
    json_decref(body);
    return code;
}

/*--- Accounting: the cache's and the store's ---*/

struct usage {
    int milli[NODES][GPUS];
    int pods[NODES];
    int queue_gpus; /* GPUs of bound, unfinished pods in the LocalQueue */
};

static int node_index(const char *name)
{
    return name && name[0] == 'n' && name[1] >= '1' && name[1] < '1' + NODES && !name[2] ? name[1] - '1' : -1;
}

static void from_cache(struct gs_cache *c, void *arg)
{
    struct usage *u = arg;
    for (int32_t i = 0; i < gs_cache_node_count(c); i++) {
        struct gs_node_info *n = gs_cache_node(c, i);
        int k = n->live ? node_index(n->name) : -1;
        if (k < 0) continue;
        u->pods[k] = n->npods;
        for (int g = 0; g < n->ngpus && g < GPUS; g++) u->milli[k][g] = 1000 - n->gpus[g].milli_free;
    }
}

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static int from_store_one(const char *key, json_t *pod, void *arg)
{
    (void)key;
    struct usage *u = arg;
    const char *ph = str(json_object_get(pod, "status"), "phase");
    int k = node_index(str(json_object_get(pod, "spec"), "nodeName"));
    if (k < 0 || (ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed")))) return 0;
    u->pods[k]++;
    const char *dev = str(json_object_get(json_object_get(pod, "metadata"), "annotations"), "gpusched.io/devices");
    char buf[512];
    snprintf(buf, sizeof buf, "%s", dev ? dev : "");
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), n++) {
        const char *dash = strrchr(t, '-');
        int g = dash ? atoi(dash + 1) : -1;
        assert_true(g >= 0 && g < GPUS);
        u->milli[k][g] += 1000;
    }
    const char *q = str(json_object_get(json_object_get(pod, "metadata"), "labels"), "kueue.x-k8s.io/queue-name");
    if (q && !strcmp(q, "lq")) u->queue_gpus += n;
    return 0;
}

static void check(struct api_env *e, int step)
{
    struct usage want, have;
    for (int attempt = 0; attempt < 100; attempt++) {
        memset(&want, 0, sizeof want);
        memset(&have, 0, sizeof have);
        int64_t rv;
        assert_int_equal(gs_store_list(gs_server_store(e->srv), "pods/", from_store_one, &want, &rv), 0);
        assert_int_equal(gs_sched_loop_inspect(gs_server_sched_loop(e->srv), from_cache, &have), 0);
        have.queue_gpus = want.queue_gpus;
        if (!memcmp(&want, &have, sizeof want)) break;
        usleep(20000); /* the loop has not applied the latest changes yet */
    }
    for (int k = 0; k < NODES; k++) {
        if (want.pods[k] != have.pods[k])
            fail_msg("step %d: node n%d: the store has %d bound pods, the cache %d", step, k + 1, want.pods[k],
                     have.pods[k]);
        for (int g = 0; g < GPUS; g++) {
            if (want.milli[k][g] > 1000) fail_msg("step %d: GPU %d of n%d given twice in the store", step, g, k + 1);
            if (want.milli[k][g] != have.milli[k][g])
                fail_msg("step %d: GPU %d of n%d: store %d milli used, cache %d", step, g, k + 1, want.milli[k][g],
                         have.milli[k][g]);
        }
    }
    if (want.queue_gpus > QUOTA) fail_msg("step %d: queue lq holds %d GPUs over its quota %d", step, want.queue_gpus, QUOTA);
}

/*--- The cluster ---*/

static void setup_cluster(struct api_env *e)
{
    const char *ns[] = {"team-a", "team-b"};
    for (int i = 0; i < 2; i++)
        assert_int_equal(call(e->adm, "POST", "/api/v1/namespaces", NULL, J("{\"metadata\":{\"name\":\"%s\"}}", ns[i])),
                         201);
    for (int k = 0; k < NODES; k++) {
        char devs[1024] = "";
        for (int g = 0; g < GPUS; g++)
            snprintf(devs + strlen(devs), sizeof devs - strlen(devs), "%s{\"index\":%d,\"uuid\":\"GPU-n%d-%d\","
                     "\"model\":\"H100\",\"memoryMiB\":81920}", g ? "," : "", g, k + 1, g);
        assert_int_equal(call(e->adm, "POST", "/api/v1/nodes", NULL,
                              J("{\"metadata\":{\"name\":\"n%d\"},\"status\":{\"capacity\":{\"cpu\":\"64\",\"memory\":"
                                "\"256Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"%d\"},\"devices\":[%s]}}", k + 1, GPUS,
                                devs)), 201);
    }
    assert_int_equal(call(e->adm, "POST", "/apis/kueue.x-k8s.io/v1beta1/resourceflavors", NULL,
                          J("{\"metadata\":{\"name\":\"f\"}}")), 201);
    assert_int_equal(call(e->adm, "POST", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues", NULL,
                          J("{\"metadata\":{\"name\":\"cq\"},\"spec\":{\"resourceGroups\":[{\"coveredResources\":"
                            "[\"nvidia.com/gpu\"],\"flavors\":[{\"name\":\"f\",\"resources\":[{\"name\":"
                            "\"nvidia.com/gpu\",\"nominalQuota\":%d}]}]}]}}", QUOTA)), 201);
    assert_int_equal(call(e->adm, "POST", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues", NULL,
                          J("{\"metadata\":{\"name\":\"lq\"},\"spec\":{\"clusterQueue\":\"cq\"}}")), 201);
    assert_int_equal(call(e->adm, "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", NULL,
                          J("{\"metadata\":{\"name\":\"low\"},\"value\":10}")), 201);
    /* Tenants cannot make classes, nor a default. */
    assert_int_equal(call(e->ten, "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", NULL,
                          J("{\"metadata\":{\"name\":\"mine\"},\"value\":1000000000}")), 403);
}

/*--- Random tenant requests ---*/

#define MAXP 64

struct pod_ref {
    char ns[16], name[16];
    bool live;
};

static struct pod_ref pods[MAXP];
static int npods;

static struct pod_ref *any_pod(void)
{
    return npods ? &pods[rnd((unsigned)npods)] : NULL;
}

static void pod_path(const struct pod_ref *p, const char *sub, char *buf, size_t len)
{
    snprintf(buf, len, "/api/v1/namespaces/%s/pods/%s%s%s", p->ns, p->name, sub ? "/" : "", sub ? sub : "");
}

/* A tenant's pod create, honest or not; asserts the answer the rules give. */
static void create(struct api_env *e, int step)
{
    if (npods == MAXP) return;
    struct pod_ref *p = &pods[npods];
    snprintf(p->ns, sizeof p->ns, "%s", rnd(3) ? "team-a" : "team-b");
    snprintf(p->name, sizeof p->name, "p%d", step);
    int gpus = (int)rnd(3);
    bool queued = !strcmp(p->ns, "team-a") && rnd(2);
    int trick = (int)rnd(8);
    char labels[128] = "{}", spec[256] = "", ann[256] = "{}", status[128] = "";
    if (queued) snprintf(labels, sizeof labels, "{\"kueue.x-k8s.io/queue-name\":\"lq\"}");
    long want = 201;
    switch (trick) {
    case 0: snprintf(spec, sizeof spec, "\"nodeName\":\"n%u\",", 1 + rnd(NODES)), want = 403; break;
    case 1: snprintf(ann, sizeof ann, "{\"gpusched.io/devices\":\"GPU-n1-0\"}"), want = 403; break;
    case 2: snprintf(spec, sizeof spec, "\"priority\":2147483647,"), want = 403; break;
    case 3: snprintf(spec, sizeof spec, "\"priorityClassName\":\"%s\",", rnd(2) ? "nope" : "system-node-critical");
            want = 403;
            break;
    case 4: snprintf(spec, sizeof spec, "\"priorityClassName\":\"low\","); break;
    case 5: /* status is reset, not refused */
        snprintf(status, sizeof status, ",\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"PodScheduled\","
                 "\"status\":\"True\"}]}");
        break;
    default: break;
    }
    char res[64] = "{}";
    if (gpus) snprintf(res, sizeof res, "{\"limits\":{\"nvidia.com/gpu\":\"%d\"}}", gpus);
    char path[128];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", p->ns);
    long code = call(e->ten, "POST", path, NULL,
                     J("{\"metadata\":{\"name\":\"%s\",\"labels\":%s,\"annotations\":%s},\"spec\":{%s\"containers\":"
                       "[{\"name\":\"c\",\"image\":\"i\",\"resources\":%s}]}%s}", p->name, labels, ann, spec, res,
                       status));
    if (code != want) fail_msg("step %d: create trick %d: %ld, want %ld", step, trick, code, want);
    if (code == 201) {
        p->live = true;
        npods++;
        if (trick == 5) { /* the status it sent is gone */
            json_t *out = NULL;
            char pp[160];
            pod_path(p, NULL, pp, sizeof pp);
            assert_int_equal(gs_client_call(e->ten, "GET", pp, NULL, NULL, NULL, &out, NULL), 0);
            const char *ph = str(json_object_get(out, "status"), "phase");
            if (ph && strcmp(ph, "Pending") && strcmp(ph, "Running"))
                fail_msg("step %d: phase %s", step, ph); /* Running only if the scheduler and a node made it so */
            json_decref(out);
        }
    }
}

static void tamper(struct api_env *e, int step)
{
    struct pod_ref *p = any_pod();
    if (!p) return;
    char path[160];
    const char *mp = "application/merge-patch+json", *sp = "application/strategic-merge-patch+json";
    long code = 0;
    int op = (int)rnd(9);
    switch (op) {
    case 0: /* more GPUs once bound */
        pod_path(p, NULL, path, sizeof path);
        code = call(e->ten, "PATCH", path, sp, J("{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
                                               "{\"nvidia.com/gpu\":\"%u\"}}}]}}", 1 + rnd(4)));
        if (code != 422 && code != 404 && code != 200) fail_msg("step %d: patch requests: %ld", step, code);
        break;
    case 1: /* finish it while its processes run */
        pod_path(p, "status", path, sizeof path);
        code = call(e->ten, "PATCH", path, mp, J("{\"status\":{\"phase\":\"Succeeded\"}}"));
        if (code != 403) fail_msg("step %d: tenant pods/status: %ld", step, code);
        break;
    case 2: /* pick its own GPUs */
        pod_path(p, NULL, path, sizeof path);
        code = call(e->ten, "PATCH", path, mp, J("{\"metadata\":{\"annotations\":{\"gpusched.io/devices\":"
                                               "\"GPU-n1-%u\"}}}", rnd(GPUS)));
        /* 200 only when it names the GPUs the pod already has: nothing changes */
        if (code != 422 && code != 404 && code != 200) fail_msg("step %d: devices annotation: %ld", step, code);
        break;
    case 3:
        pod_path(p, "binding", path, sizeof path);
        code = call(e->ten, "POST", path, NULL, J("{\"target\":{\"name\":\"n%u\"}}", 1 + rnd(NODES)));
        if (code != 403) fail_msg("step %d: tenant binding: %ld", step, code);
        break;
    case 4: /* leave the queue (or join it) after admission */
        pod_path(p, NULL, path, sizeof path);
        code = call(e->ten, "PATCH", path, mp, J("{\"metadata\":{\"labels\":{\"kueue.x-k8s.io/queue-name\":%s}}}",
                                               rnd(2) ? "null" : "\"lq\""));
        if (code != 422 && code != 404 && code != 200) fail_msg("step %d: queue label: %ld", step, code);
        break;
    case 5: /* a new node or priority through PUT */
        pod_path(p, NULL, path, sizeof path);
        code = call(e->ten, "PUT", path, NULL,
                    J("{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"nodeName\":\"n2\",\"priority\":%u,\"containers\":"
                      "[{\"name\":\"c\",\"image\":\"i\"}]}}", p->name, rnd(2) ? 0 : 1000000));
        if (code != 422 && code != 404 && code != 200) fail_msg("step %d: PUT: %ld", step, code);
        break;
    case 6: /* an allowed change: the image */
        pod_path(p, NULL, path, sizeof path);
        code = call(e->ten, "PATCH", path, sp, J("{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i%d\"}]}}", step));
        if (code != 200 && code != 404) fail_msg("step %d: image: %ld", step, code);
        break;
    case 7:
        pod_path(p, NULL, path, sizeof path);
        code = call(e->ten, "DELETE", path, NULL, NULL);
        if (code != 200 && code != 404) fail_msg("step %d: delete: %ld", step, code);
        break;
    default: /* namespaces and nodes are not the tenant's */
        code = call(e->ten, "DELETE", "/api/v1/namespaces/team-b", NULL, NULL);
        if (code != 403) fail_msg("step %d: tenant namespace delete: %ld", step, code);
        code = call(e->ten, "PATCH", "/api/v1/nodes/n1/status", mp, J("{\"status\":{\"capacity\":{\"nvidia.com/gpu\":"
                                                                      "\"64\"}}}"));
        if (code != 403) fail_msg("step %d: tenant node status: %ld", step, code);
        code = call(e->ten, "POST", "/api/v1/namespaces/kube-system/pods", NULL,
                    J("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}"));
        if (code != 403) fail_msg("step %d: tenant in kube-system: %ld", step, code);
        break;
    }
}

/* A node finishes one of its pods (what the agent reports when it exits). */
static void node_finishes(struct api_env *e, struct gs_client *node2)
{
    struct pod_ref *p = any_pod();
    if (!p) return;
    char path[160];
    pod_path(p, "status", path, sizeof path);
    json_t *b = J("{\"status\":{\"phase\":\"Succeeded\"}}");
    long c1 = call(e->nod, "PATCH", path, "application/merge-patch+json", json_incref(b));
    long c2 = call(node2, "PATCH", path, "application/merge-patch+json", b);
    /* Exactly one node owns a bound pod; neither may touch an unbound one. */
    assert_true(c1 == 403 || c1 == 404 || c1 == 200);
    assert_true(c2 == 403 || c2 == 404 || c2 == 200);
    assert_false(c1 == 200 && c2 == 200);
}

static void random_tenant_requests_keep_accounting(void **state)
{
    struct api_env *e = *state;
    struct gs_client *node2 = fx_client(e->srv, "nod2");
    setup_cluster(e);
    check(e, 0);
    for (int step = 1; step <= 300; step++) {
        unsigned what = rnd(10);
        if (what < 4) create(e, step);
        else if (what < 9) tamper(e, step);
        else node_finishes(e, node2);
        check(e, step);
    }
    gs_client_free(node2);
}

static int setup(void **state)
{
    return api_env_start(state, "/tmp/gs-authinv-XXXXXX", tokens, true, (struct gs_server_opts){0});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(random_tenant_requests_keep_accounting, setup, api_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
