/*
 * fuzz_fgd_learn_args.c - the FGDLearn policy's pluginConfig args
 * (src/sched/plugins/fgd_learn.c, sched/fgd_learn_core.c) fuzz target.
 *
 * Any JSON document must either make a policy instance or be refused with
 * GS_EINVAL and at least one diagnostic whose path names an args field. An
 * accepted instance then scores and reserves a few pods on a small cluster
 * (the learner's rebuilds run with whatever parameters were accepted) and is
 * freed without leaks.
 */
#include "core/clock.h"
#include "core/error.h"
#include "sched/cache.h"
#include "sched/plugin.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern const struct gs_plugin gs_plugin_fgd_learn;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drive(struct gs_cache *c, void *state)
{
    struct gs_node_info *nodes[2] = {gs_cache_node(c, 0), gs_cache_node(c, 1)};
    struct gs_cycle_state cs;
    gs_cycle_state_init(&cs);
    static struct gs_pod pods[40]; /* the cache borrows placed pods until it is freed */
    for (int i = 0; i < 40; i++) {
        struct gs_pod p;
        memset(&p, 0, sizeof p);
        p.meta.name = (char *)"p";
        p.meta.namespace_ = (char *)"default";
        p.demand.cpu_milli = 1000 * (i % 3);
        p.demand.gpu_count = i % 4 == 3 ? 0 : 1 + (i % 5 == 0);
        p.demand.gpu_milli = p.demand.gpu_count ? (i % 2 ? 1000 : 250 + 50 * (i % 7)) : 0;
        if (p.demand.gpu_count > 1) p.demand.gpu_milli = 1000;
        int64_t s[2];
        gs_plugin_fgd_learn.pre_score(state, &cs, &p, nodes, 2);
        gs_plugin_fgd_learn.score(state, &cs, &p, nodes, 2, s);
        gs_plugin_fgd_learn.normalize_score(state, &cs, &p, nodes, s, 2);
        if ((s[0] < 0 || s[0] > 100) || (s[1] < 0 || s[1] > 100)) abort();
        int best = s[1] > s[0];
        struct gs_assignment a = {.node = best};
        struct gs_status st = gs_plugin_fgd_learn.reserve(state, &cs, &p, nodes[best], &a);
        pods[i] = p;
        if (gs_status_ok(&st)) gs_cache_assume(c, &pods[i], &a, 0);
    }
    gs_cycle_state_free(&cs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *args = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!args) return 0;
    struct gs_clock clock;
    gs_clock_init_sim(&clock, 0);
    struct gs_cache *c = gs_cache_new(&clock);
    if (!c) abort();
    struct gs_node_spec a = {.name = "a", .cpu_milli = 32000, .mem_bytes = 1LL << 36, .gpu_model = "V100", .ngpus = 8};
    struct gs_node_spec b = {.name = "b", .cpu_milli = 16000, .mem_bytes = 1LL << 35, .gpu_model = "T4", .ngpus = 2};
    if (gs_cache_add_node_spec(c, &a) < 0 || gs_cache_add_node_spec(c, &b) < 0) abort();
    struct gs_handle h = {.clock = &clock, .cache = c, .seed = 1};
    struct gs_diags d = {0};
    void *state = NULL;
    int rc = gs_plugin_fgd_learn.init(&h, args, &state, &d);
    if (rc == 0) {
        if (!state) abort();
        drive(c, state);
        gs_plugin_fgd_learn.fini(state);
    } else {
        if (rc != GS_EINVAL || state || d.n < 1 || !d.v[0].path || strncmp(d.v[0].path, "args", 4)) abort();
    }
    gs_diags_free(&d);
    gs_cache_free(c);
    json_decref(args);
    return 0;
}
