/*
 * gridview_bench.c - the console's GPU grid built two ways, side by side in
 * one process: from the store (gs_ui_gpugrid: decode every Node and Pod)
 * and from the in-memory view (gs_gridview_text: the records' encoded
 * pieces and cached node entries concatenated).
 *
 *     build/bench/gridview_bench [NODES [PODS]]     (defaults 5000 50000)
 *
 * Fills a SQLite store in a temporary directory the way bench/console.py
 * fills the server (8 GPUs per node, six GPU pods per node holding all 8 by
 * the gpusched.io/devices annotation, 1,000 pending pods, the rest without
 * GPUs), then times each way 5 times, alternating, in wall and thread CPU
 * milliseconds (CPU time is what a loaded machine inflates least), and
 * prints the view's size. Results: bench/RESULTS.md "Console".
 */
#include "control/api_ui.h"
#include "control/auth.h"
#include "control/gridview.h"
#include "control/resources.h"
#include "control/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double ms(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int put(struct gs_store *s, const char *plural, const char *ns, const char *name, json_t *obj)
{
    char key[256];
    int64_t rv;
    int err = gs_api_key(gs_api_resource_find("", "v1", plural), ns, name, key, sizeof key) < 0 ? GS_EINVAL
                                                                                               : gs_store_create(s, key, obj, &rv);
    json_decref(obj);
    return err;
}

int main(int argc, char **argv)
{
    int nodes = argc > 1 ? atoi(argv[1]) : 5000, pods = argc > 2 ? atoi(argv[2]) : 50000, pending = 1000;
    if (nodes < 1 || pods < pending) {
        fprintf(stderr, "usage: gridview_bench [NODES >= 1 [PODS >= 1000]]\n");
        return 2;
    }
    char dir[] = "/tmp/gs-gridview-bench-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    struct gs_store *s;
    struct gs_store_opts o = {.dir = dir};
    if (gs_store_open_sqlite(&o, &s)) return 1;
    double t0 = ms(CLOCK_MONOTONIC);
    int err = 0, made = 0;
    for (int i = 0; i < nodes && !err; i++) {
        char name[32];
        snprintf(name, sizeof name, "node-%05d", i);
        json_t *devs = json_array();
        for (int g = 0; g < 8; g++) {
            char uuid[48];
            snprintf(uuid, sizeof uuid, "GPU-%05d-%d", i, g);
            json_array_append_new(devs, json_pack("{s:i, s:s, s:s, s:i, s:i, s:s}", "index", g, "uuid", uuid, "model",
                                                  "NVIDIA-H100-80GB-HBM3", "memoryMiB", 81559, "numaNode", g / 4,
                                                  "health", "Healthy"));
        }
        err = put(s, "nodes", NULL, name,
                  json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s}], s:o}}", "apiVersion", "v1", "kind", "Node",
                            "metadata", "name", name, "status", "conditions", "type", "Ready", "status", "True",
                            "devices", devs));
    }
    static const int per[] = {2, 2, 1, 1, 1, 1};
    for (int i = 0; i < pods && !err; i++, made++) {
        char name[32], ns[16], node[32], ann[128] = "";
        snprintf(name, sizeof name, "pod-%06d", i);
        snprintf(ns, sizeof ns, "team-%d", i % 10);
        json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:s, s:{}}, s:{s:[{s:s, s:s}]}, s:{s:s}}", "apiVersion", "v1",
                                "kind", "Pod", "metadata", "name", name, "namespace", ns, "annotations", "spec",
                                "containers", "name", "c", "image", "i", "status", "phase", "Running");
        if (i < pending) {
            json_object_set_new(json_object_get(pod, "status"), "phase", json_string("Pending"));
        } else if (i - pending < nodes * 6) {
            int k = i - pending, n = k / 6, slot = k % 6, first = 0;
            for (int j = 0; j < slot; j++) first += per[j];
            snprintf(node, sizeof node, "node-%05d", n);
            for (int g = first; g < first + per[slot]; g++)
                snprintf(ann + strlen(ann), sizeof ann - strlen(ann), "%sGPU-%05d-%d", g > first ? "," : "", n, g);
            json_object_set_new(json_object_get(pod, "spec"), "nodeName", json_string(node));
            json_object_set_new(json_object_get(json_object_get(pod, "metadata"), "annotations"), "gpusched.io/devices",
                                json_string(ann));
        } else {
            snprintf(node, sizeof node, "node-%05d", i % nodes);
            json_object_set_new(json_object_get(pod, "spec"), "nodeName", json_string(node));
        }
        err = put(s, "pods", ns, name, pod);
    }
    if (err) {
        fprintf(stderr, "fill: %s\n", gs_strerror(err));
        return 1;
    }
    printf("filled %d nodes + %d pods in %.0f ms\n", nodes, made, ms(CLOCK_MONOTONIC) - t0);
    struct gs_gridview *v;
    t0 = ms(CLOCK_MONOTONIC);
    if (gs_gridview_new(s, &v)) return 1;
    struct gs_principal admin = {.user = "admin", .role = GS_ROLE_ADMIN};
    json_t *doc = gs_gridview_grid(v, &admin, 600000, &err); /* the first waits for the view's lists */
    printf("view ready (lists taken, first grid) in %.0f ms\n", ms(CLOCK_MONOTONIC) - t0);
    json_decref(doc);
    /* ways: 0 the store's tree, 1 the view for an admin (cached node entries), 2 the view for a tenant of one
     * namespace (every node entry encoded from the records' pieces, none cached) */
    char *tns[] = {"team-0"};
    struct gs_principal tenant = {.user = "t", .role = GS_ROLE_TENANT, .namespaces = tns, .nnamespaces = 1};
    const char *names[] = {"store", "view", "view-tenant"};
    for (int round = 0; round < 5; round++) {
        for (int way = 0; way < 3; way++) {
            double w = ms(CLOCK_MONOTONIC), c = ms(CLOCK_THREAD_CPUTIME_ID);
            /* the reply's bytes as the server writes them: the store's tree dumped, or the view's own encoding */
            size_t len = 0;
            doc = way ? NULL : gs_ui_gpugrid(s, &admin, &err);
            char *text = way ? gs_gridview_text(v, way == 1 ? &admin : &tenant, 10000, &len, &err)
                             : doc ? json_dumps(doc, JSON_COMPACT) : NULL;
            printf("%-11s round %d: %7.1f ms wall, %7.1f ms CPU (build + encode, %zu bytes)\n", names[way],
                   round + 1, ms(CLOCK_MONOTONIC) - w, ms(CLOCK_THREAD_CPUTIME_ID) - c, text ? strlen(text) : 0);
            free(text);
            json_decref(doc);
        }
    }
    struct gs_gridview_stats st;
    gs_gridview_stats(v, &st);
    printf("view: %zu nodes, %zu pods, %zu bytes counted (%.0f per pod+node)\n", st.nodes, st.pods, st.bytes,
           (double)st.bytes / (double)(st.nodes + st.pods));
    gs_gridview_free(v);
    gs_store_close(s);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) ? 1 : 0;
}
