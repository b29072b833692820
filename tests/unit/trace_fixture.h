/*
 * trace_fixture.h - in-memory simulator traces for the replay tests: n
 * identical T4 nodes ("n1".."nN", 64 CPUs, 256 GiB, gpus GPUs each) added to
 * a struct gs_trace that gs_trace_free() releases. Include after cmocka.h.
 * Static functions: each test includes its own copy.
 */
#ifndef GS_TEST_TRACE_FIXTURE_H
#define GS_TEST_TRACE_FIXTURE_H

#include "sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void trace_nodes(struct gs_trace *t, size_t n, int32_t gpus)
{
    t->nodes = calloc(n, sizeof *t->nodes);
    t->node_labels = calloc(n, sizeof *t->node_labels);
    assert_non_null(t->nodes);
    assert_non_null(t->node_labels);
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "n%zu", i + 1);
        struct gs_node_spec *s = &t->nodes[i];
        s->name = strdup(name);
        s->cpu_milli = 64000;
        s->mem_bytes = (int64_t)256 << 30;
        s->gpu_model = strdup("T4");
        s->ngpus = gpus;
        s->gpu_mem_mib = 15109;
        s->labels = &t->node_labels[i];
        t->nnodes++;
    }
}

#endif
