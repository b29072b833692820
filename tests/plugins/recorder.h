/*
 * recorder.h - test plugins that record the framework's calls, and small
 * builders for hand-made pods and nodes.
 *
 * Recorder plugins ("RecA", "RecB", "RecC") implement every extension point.
 * Each call appends "<plugin>.<point>" to a shared log, so a test can assert
 * the exact order in which the framework drove them. Their behaviour is set
 * per plugin with rec_configure(): fail (with a code) or skip at a given
 * point, wait at Permit for a timeout, reject certain nodes in Filter, give
 * fixed scores. Test-only code: the shared log is a global on purpose.
 */
#ifndef GS_TESTS_RECORDER_H
#define GS_TESTS_RECORDER_H

#include "sched/framework.h"

#include <stdbool.h>
#include <stdint.h>

extern const struct gs_plugin rec_plugin_a, rec_plugin_b, rec_plugin_c;

struct rec_behaviour {
    enum gs_point fail_at;       /* GS_PT_COUNT: never */
    enum gs_code fail_code;      /* status code returned at fail_at (Skip, Unschedulable, Error, Wait ...) */
    int64_t wait_ns;             /* Permit Wait timeout when fail_code == GS_WAIT */
    uint64_t reject_nodes;       /* Filter: bit i rejects the node with cache index i (code 1) */
    int64_t score_base;          /* Score: score = score_base + node index * score_step */
    int64_t score_step;
};

/* Resets the log and every plugin's behaviour to "succeed everywhere". */
void rec_reset(void);
/* Sets the behaviour of plugin "RecA" / "RecB" / "RecC". */
void rec_configure(const char *plugin, const struct rec_behaviour *b);
/* The log so far: entries separated by single spaces ("RecA.preFilter RecB.preFilter ..."). */
const char *rec_log(void);
/* CycleState seed seen by the last PreFilter call. */
uint64_t rec_last_seed(void);
/* How many times plugin's unreserve ran since the reset. */
int rec_unreserve_count(const char *plugin);

/* Builders. Strings are copied; free with test_pod_free / test_node_free. */
struct gs_pod *test_pod(const char *ns, const char *name, int64_t cpu_milli, int64_t mem_bytes, int32_t gpus,
                        int32_t gpu_milli);
void test_pod_free(struct gs_pod *p);
/* A node object with cpu (milli), memory (bytes), pods and ngpus GPUs of model (mem_mib each). */
struct gs_node *test_node(const char *name, int64_t cpu_milli, int64_t mem_bytes, int32_t pods, int32_t ngpus,
                          const char *model, int64_t mem_mib);
void test_node_free(struct gs_node *n);

#endif
