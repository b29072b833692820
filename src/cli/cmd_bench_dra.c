/*
 * cmd_bench_dra.c - `gpusched bench --shape dra-template`: the shape of
 * kube-scheduler's SchedulingWithResourceClaimTemplate/5000pods_500nodes
 * benchmark, through the real framework, DynamicResources plugin, cache
 * and allocator.
 *
 * The cluster: --nodes nodes (500), each with one ResourceSlice of
 * --gpus-per-node GPUs (driver gpu.nvidia.com, devices gpu-<i> with type,
 * uuid, productName and memory, as the agent publishes them), the
 * gpu.nvidia.com DeviceClass with its CEL selector, and one
 * ResourceClaimTemplate asking one device of that class. --pods pods
 * (5000), each with one claim generated from the template as the
 * resourceclaim controller names and owns it. The first half are the
 * initial pods (scheduled, not timed); the second half is measured. Each
 * measured pod costs what the scheduler loop does for it: the cycle over
 * every node, the binding cycle, taking the claim's allocation and feeding
 * the allocated claim back into the cache (the stream's echo). The last
 * stdout line is JSON like `gpusched bench`'s, plus "measured" and "shape".
 */
#include "cli/bench_clock.h"
#include "cli/commands.h"

#include "loops/claims.h" /* generated claim names */
#include "sched/cache_feed.h"
#include "sched/dra_plugin.h"
#include "sched/framework.h"
#include "sched/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

int gs__bench_dra(long nodes, long gpus, long pods, uint64_t seed);

static int feed_text(struct gs_cache *c, const char *key, const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    int rc = j ? gs_cache_feed(c, key, j) : GS_EINVAL;
    json_decref(j);
    return rc;
}

static int build_cluster(struct gs_cache *c, long nodes, long gpus)
{
    size_t cap = 4096 + (size_t)gpus * 512;
    char *doc = malloc(cap), *devs = malloc(cap);
    if (!doc || !devs) {
        free(doc), free(devs);
        return GS_ENOMEM;
    }
    int rc = 0;
    for (long i = 0; !rc && i < nodes; i++) {
        char name[64], key[160];
        snprintf(name, sizeof name, "bench-node-%05ld", i);
        struct gs_node_spec s = {.name = name, .cpu_milli = 16000 * gpus, .mem_bytes = gpus * 128 * (1LL << 30),
                                 .pods = 110, .gpu_model = "A100", .ngpus = (int32_t)gpus, .gpu_mem_mib = 81251};
        if (gs_cache_add_node_spec(c, &s) < 0) rc = GS_EINVAL;
        size_t n = 0;
        for (long g = 0; g < gpus; g++)
            n += (size_t)snprintf(devs + n, cap - n,
                                  "%s{\"name\":\"gpu-%ld\",\"attributes\":{\"type\":{\"string\":\"gpu\"},\"uuid\":"
                                  "{\"string\":\"GPU-%s-%ld\"},\"productName\":{\"string\":\"NVIDIA A100-SXM4-80GB\"}},"
                                  "\"capacity\":{\"memory\":{\"value\":\"80Gi\"}}}",
                                  g ? "," : "", g, name, g);
        snprintf(doc, cap,
                 "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":"
                 "\"%s-gpu.nvidia.com-0\"},\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"%s\",\"pool\":{"
                 "\"name\":\"%s\",\"generation\":1,\"resourceSliceCount\":1},\"devices\":[%s]}}",
                 name, name, name, devs);
        snprintf(key, sizeof key, "resourceslices.resource.k8s.io/%s-gpu.nvidia.com-0", name);
        if (!rc) rc = feed_text(c, key, doc);
    }
    free(doc), free(devs);
    if (!rc)
        rc = feed_text(c, "deviceclasses.resource.k8s.io/gpu.nvidia.com",
                       "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":{\"name\":"
                       "\"gpu.nvidia.com\"},\"spec\":{\"selectors\":[{\"cel\":{\"expression\":\"device.driver == "
                       "'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'\"}}]}}");
    if (!rc)
        rc = feed_text(c, "resourceclaimtemplates.resource.k8s.io/default/one-gpu",
                       "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaimTemplate\",\"metadata\":{"
                       "\"name\":\"one-gpu\",\"namespace\":\"default\"},\"spec\":{\"spec\":{\"devices\":{\"requests\":"
                       "[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\"}}]}}}}");
    return rc;
}

/* Pod i and its generated claim (fed to the cache). */
static int make_pod(struct gs_cache *c, long i, uint64_t seed, struct gs_pod *p)
{
    char name[64], uid[64], doc[1024], claim[256], key[400];
    snprintf(name, sizeof name, "dra-pod-%05ld", i);
    snprintf(uid, sizeof uid, "uid-%05ld", i);
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\","
             "\"uid\":\"%s\"},\"spec\":{\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":"
             "\"one-gpu\"}],\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"resources\":{\"requests\":{\"cpu\":"
             "\"100m\",\"memory\":\"100Mi\"}}}]}}",
             name, uid);
    json_t *j = json_loads(doc, 0, NULL);
    struct gs_diags d = {0};
    int rc = j ? gs_pod_decode(j, p, &d) : GS_EINVAL;
    json_decref(j);
    gs_diags_free(&d);
    if (rc) return rc;
    gs_claims_generated_name(name, "gpu", uid, seed, claim, sizeof claim);
    snprintf(doc, sizeof doc,
             "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"default\",\"uid\":\"claim-%s\",\"annotations\":{\"" GS_ANN_POD_CLAIM_NAME "\":\"gpu\"},"
             "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"%s\",\"uid\":\"%s\","
             "\"controller\":true}]},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{"
             "\"deviceClassName\":\"gpu.nvidia.com\"}}]}}}",
             claim, uid, name, uid);
    snprintf(key, sizeof key, "resourceclaims.resource.k8s.io/default/%s", claim);
    return feed_text(c, key, doc);
}

/* Schedules and binds pod, then writes its claim as the loop would: allocated, back into the cache. */
static bool one(struct gs_framework *fw, struct gs_cache *c, struct gs_pod *p)
{
    struct gs_schedule_result res;
    memset(&res, 0, sizeof res);
    bool ok = gs_framework_schedule(fw, p, 0, &res) == 0 && res.code == GS_SUCCESS;
    gs_schedule_result_free(&res);
    if (!ok) return false;
    struct gs_status st = gs_framework_bind(fw, p);
    if (!gs_status_ok(&st)) return false;
    char key[GS__KEY_MAX];
    gs_meta_key(&p->meta, key, sizeof key);
    struct gs_dra_claim_write *w = NULL;
    size_t n = 0;
    if (gs_dra_plugin_take(gs_framework_plugin_state(fw, GS_DRA_PLUGIN_NAME), key, 0, &w, &n)) return false;
    for (size_t i = 0; i < n; i++) {
        char ck[400];
        snprintf(ck, sizeof ck, "%s", w[i].claim_key);
        const char *slash = strchr(ck, '/');
        json_t *doc = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}, s:[{s:s, s:s, s:s, s:s, s:b}]}, s:{s:{s:[{s:s, "
                                "s:{s:s}}]}}, s:{s:O, s:[{s:s, s:s, s:s}]}}",
                                "apiVersion", "resource.k8s.io/v1", "kind", "ResourceClaim", "metadata", "name",
                                slash + 1, "namespace", "default", "uid", w[i].uid, "annotations", GS_ANN_POD_CLAIM_NAME,
                                "gpu", "ownerReferences", "apiVersion", "v1", "kind", "Pod", "name", w[i].pod_name, "uid",
                                w[i].pod_uid, "controller", 1, "spec", "devices", "requests", "name", "gpu", "exactly",
                                "deviceClassName", "gpu.nvidia.com", "status", "allocation", w[i].allocation,
                                "reservedFor", "resource", "pods", "name", w[i].pod_name, "uid", w[i].pod_uid);
        char sk[500];
        snprintf(sk, sizeof sk, "resourceclaims.resource.k8s.io/%s", w[i].claim_key);
        if (doc) gs_cache_feed(c, sk, doc);
        json_decref(doc);
    }
    gs_dra_claim_writes_free(w, n);
    return true;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int gs__bench_dra(long nodes, long gpus, long pods, uint64_t seed)
{
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_cache *cache = gs_cache_new(&clock);
    struct gs_sched_config cfg = {0};
    struct gs_framework *fw = NULL;
    struct gs_diags d = {0};
    struct gs_pod *pv = calloc((size_t)pods, sizeof *pv);
    double *lat = calloc((size_t)pods, sizeof *lat);
    int rc = 1;
    if (!cache || !pv || !lat || build_cluster(cache, nodes, gpus)) {
        fprintf(stderr, "gpusched bench: cannot build the DRA cluster\n");
        goto out;
    }
    if (gs_sched_config_default(&cfg) < 0) goto out;
    struct gs_handle h = {.clock = &clock, .cache = cache, .seed = seed};
    if (gs_framework_new(&cfg.profiles[0], &h, &fw, &d) < 0) {
        for (size_t i = 0; i < d.n; i++) fprintf(stderr, "gpusched bench: %s: %s\n", d.v[i].path, d.v[i].msg);
        goto out;
    }
    for (long i = 0; i < pods; i++)
        if (make_pod(cache, i, seed, &pv[i])) {
            fprintf(stderr, "gpusched bench: cannot build pod %ld\n", i);
            goto out;
        }
    long init = pods / 2, measured = pods - init, bound_init = 0, bound = 0;
    for (long i = 0; i < init; i++) bound_init += one(fw, cache, &pv[i]);
    double t0 = gs_bench_wall_us(), c0 = gs_bench_cpu_us();
    for (long i = init; i < pods; i++) {
        double s = gs_bench_wall_us();
        bound += one(fw, cache, &pv[i]);
        lat[i - init] = gs_bench_wall_us() - s;
    }
    double total = gs_bench_wall_us() - t0, cpu = gs_bench_cpu_us() - c0;
    qsort(lat, (size_t)measured, sizeof *lat, cmp_d);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double pps = (double)measured / (total / 1e6), cpps = (double)measured / (cpu / 1e6);
    double p50 = lat[(size_t)(measured - 1) / 2], p99 = lat[(size_t)((double)(measured - 1) * 0.99)];
    char why[256];
    int bad = gs_cache_check(cache, why, sizeof why);
    fprintf(stderr,
            "bench: dra-template, %ld nodes x %ld GPUs, %ld init pods (%ld bound), %ld measured (%ld bound)\n"
            "bench: %.0f pods/s (%.0f per CPU second), %.1f us/pod p50, %.1f us/pod p99, peak RSS %.1f MiB%s%s\n",
            nodes, gpus, init, bound_init, measured, bound, pps, cpps, p50, p99, (double)ru.ru_maxrss / 1024.0,
            bad ? ", cache check failed: " : "", bad ? why : "");
    printf("{\"shape\":\"dra-template\",\"nodes\":%ld,\"pods\":%ld,\"measured\":%ld,\"scheduled\":%ld,"
           "\"pods_per_second\":%.1f,\"pods_per_cpu_second\":%.1f,\"us_per_pod_p50\":%.2f,\"us_per_pod_p99\":%.2f,"
           "\"peak_rss_mb\":%.1f}\n",
           nodes, pods, measured, bound_init + bound, pps, cpps, p50, p99, (double)ru.ru_maxrss / 1024.0);
    rc = bad ? 1 : 0;
out:
    if (fw) gs_framework_free(fw);
    if (cfg.profiles) gs_sched_config_free(&cfg);
    for (long i = 0; pv && i < pods; i++) {
        char key[GS__KEY_MAX];
        if (!pv[i].meta.name) continue;
        gs_meta_key(&pv[i].meta, key, sizeof key);
        if (cache) gs_cache_remove_pod(cache, key);
    }
    if (cache) gs_cache_free(cache);
    for (long i = 0; pv && i < pods; i++) gs_pod_clear(&pv[i]);
    free(pv);
    free(lat);
    gs_diags_free(&d);
    return rc;
}
