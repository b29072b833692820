/*
 * recorder.c - recording test plugins and object builders; see recorder.h.
 */
#include "recorder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_MAX 8192
#define NREC 3

static char log_buf[LOG_MAX];
static size_t log_len;
static struct rec_behaviour behaviour[NREC];
static int unreserves[NREC];
static uint64_t last_seed;
static const char *const names[NREC] = {"RecA", "RecB", "RecC"};

static int rec_index(const char *name)
{
    for (int i = 0; i < NREC; i++)
        if (strcmp(names[i], name) == 0) return i;
    return -1;
}

void rec_reset(void)
{
    log_len = 0;
    log_buf[0] = 0;
    for (int i = 0; i < NREC; i++) {
        behaviour[i] = (struct rec_behaviour){.fail_at = GS_PT_COUNT};
        unreserves[i] = 0;
    }
}

void rec_configure(const char *plugin, const struct rec_behaviour *b)
{
    int i = rec_index(plugin);
    if (i >= 0) behaviour[i] = *b;
}

const char *rec_log(void) { return log_buf; }

uint64_t rec_last_seed(void) { return last_seed; }

int rec_unreserve_count(const char *plugin)
{
    int i = rec_index(plugin);
    return i >= 0 ? unreserves[i] : -1;
}

/* Plugin state is the plugin's index, set by init. */
static int idx_of(void *state) { return (int)(intptr_t)state; }

static void note(void *state, enum gs_point pt)
{
    int n = snprintf(log_buf + log_len, LOG_MAX - log_len, "%s%s.%s", log_len ? " " : "", names[idx_of(state)],
                     gs_point_name(pt));
    if (n > 0 && log_len + (size_t)n < LOG_MAX) log_len += (size_t)n;
}

static struct gs_status verdict(void *state, enum gs_point pt)
{
    note(state, pt);
    const struct rec_behaviour *b = &behaviour[idx_of(state)];
    if (b->fail_at != pt) return (struct gs_status){0};
    return gs_status_make(b->fail_code, "%s says %s at %s", names[idx_of(state)], gs_code_name(b->fail_code),
                          gs_point_name(pt));
}

static int init_common(int idx, void **state)
{
    *state = (void *)(intptr_t)idx;
    return 0;
}

static bool r_less(void *state, const struct gs_queued_pod *a, const struct gs_queued_pod *b)
{
    (void)state;
    return a->seq < b->seq;
}

static struct gs_status r_pre_enqueue(void *state, const struct gs_pod *pod)
{
    (void)pod;
    return verdict(state, GS_PT_PRE_ENQUEUE);
}

static struct gs_status r_pre_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod)
{
    (void)pod;
    last_seed = cs->seed;
    return verdict(state, GS_PT_PRE_FILTER);
}

static void r_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                     struct gs_node_info *const *nodes, size_t n, uint8_t *reject)
{
    (void)cs, (void)pod;
    note(state, GS_PT_FILTER);
    const struct rec_behaviour *b = &behaviour[idx_of(state)];
    for (size_t i = 0; i < n; i++)
        if (nodes[i]->idx < 64 && ((b->reject_nodes >> nodes[i]->idx) & 1)) reject[i] = 1;
}

static int r_reason(void *state, const struct gs_pod *pod, uint8_t code, char *buf, size_t len)
{
    (void)pod;
    return snprintf(buf, len, "%s rejected (code %u)", names[idx_of(state)], code);
}

static struct gs_status r_post_filter(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                      const struct gs_diagnosis *diag, struct gs_post_filter_result *res)
{
    (void)cs, (void)pod, (void)diag, (void)res;
    struct gs_status s = verdict(state, GS_PT_POST_FILTER);
    /* Without a configured answer a PostFilter finds nothing to preempt. */
    if (behaviour[idx_of(state)].fail_at != GS_PT_POST_FILTER) s = gs_status_make(GS_UNSCHEDULABLE, "no victims");
    return s;
}

static struct gs_status r_pre_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                    struct gs_node_info *const *nodes, size_t n)
{
    (void)cs, (void)pod, (void)nodes, (void)n;
    return verdict(state, GS_PT_PRE_SCORE);
}

static void r_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                    struct gs_node_info *const *nodes, size_t n, int64_t *scores)
{
    (void)cs, (void)pod;
    note(state, GS_PT_SCORE);
    const struct rec_behaviour *b = &behaviour[idx_of(state)];
    for (size_t i = 0; i < n; i++) scores[i] = b->score_base + nodes[i]->idx * b->score_step;
}

static void r_normalize(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                        struct gs_node_info *const *nodes, int64_t *scores, size_t n)
{
    (void)state, (void)cs, (void)pod, (void)nodes;
    for (size_t i = 0; i < n; i++) scores[i] = scores[i] < 0 ? 0 : scores[i] > 100 ? 100 : scores[i];
}

static struct gs_status r_reserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                  struct gs_node_info *node, struct gs_assignment *a)
{
    (void)cs, (void)pod, (void)node, (void)a;
    return verdict(state, GS_PT_RESERVE);
}

static void r_unreserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod, struct gs_node_info *node)
{
    (void)cs, (void)pod, (void)node;
    int n = snprintf(log_buf + log_len, LOG_MAX - log_len, "%s%s.unreserve", log_len ? " " : "",
                     names[idx_of(state)]);
    if (n > 0 && log_len + (size_t)n < LOG_MAX) log_len += (size_t)n;
    unreserves[idx_of(state)]++;
}

static struct gs_status r_permit(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                 struct gs_node_info *node, int64_t *timeout_ns)
{
    (void)cs, (void)pod, (void)node;
    struct gs_status s = verdict(state, GS_PT_PERMIT);
    if (s.code == GS_WAIT) *timeout_ns = behaviour[idx_of(state)].wait_ns;
    return s;
}

static struct gs_status r_pre_bind(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                   const struct gs_node_info *node, const struct gs_assignment *a)
{
    (void)cs, (void)pod, (void)node, (void)a;
    return verdict(state, GS_PT_PRE_BIND);
}

static struct gs_status r_bind(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                               const struct gs_node_info *node, const struct gs_assignment *a)
{
    (void)cs, (void)pod, (void)node, (void)a;
    return verdict(state, GS_PT_BIND);
}

static void r_post_bind(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                        const struct gs_node_info *node, const struct gs_assignment *a)
{
    (void)cs, (void)pod, (void)node, (void)a;
    note(state, GS_PT_POST_BIND);
}

#define REC_PLUGIN(var, idx, nm)                                                                              \
    static int init_##var(const struct gs_handle *h, const json_t *args, void **state, struct gs_diags *d)  \
    {                                                                                                         \
        (void)h, (void)args, (void)d;                                                                         \
        return init_common(idx, state);                                                                       \
    }                                                                                                         \
    const struct gs_plugin var = {                                                                            \
        .name = nm, .init = init_##var, .less = r_less, .pre_enqueue = r_pre_enqueue,                         \
        .pre_filter = r_pre_filter, .filter = r_filter, .reason = r_reason, .post_filter = r_post_filter,     \
        .pre_score = r_pre_score, .score = r_score, .normalize_score = r_normalize, .reserve = r_reserve,     \
        .unreserve = r_unreserve, .permit = r_permit, .pre_bind = r_pre_bind, .bind = r_bind,                 \
        .post_bind = r_post_bind,                                                                             \
    };

REC_PLUGIN(rec_plugin_a, 0, "RecA")
REC_PLUGIN(rec_plugin_b, 1, "RecB")
REC_PLUGIN(rec_plugin_c, 2, "RecC")

/*--- Builders ---*/

struct gs_pod *test_pod(const char *ns, const char *name, int64_t cpu_milli, int64_t mem_bytes, int32_t gpus,
                        int32_t gpu_milli)
{
    struct gs_pod *p = calloc(1, sizeof *p);
    p->meta.namespace_ = strdup(ns);
    p->meta.name = strdup(name);
    p->demand.cpu_milli = cpu_milli;
    p->demand.mem_bytes = mem_bytes;
    p->demand.gpu_count = gpus;
    p->demand.gpu_milli = gpus ? gpu_milli : 0;
    return p;
}

void test_pod_free(struct gs_pod *p)
{
    if (!p) return;
    free(p->meta.namespace_);
    free(p->meta.name);
    gs_labels_free(&p->meta.labels);
    gs_labels_free(&p->node_selector);
    gs_node_affinity_free(&p->node_affinity);
    for (size_t i = 0; i < p->ntolerations; i++) gs_toleration_free(&p->tolerations[i]);
    free(p->tolerations);
    for (size_t i = 0; i < p->demand.ngpu_models; i++) free(p->demand.gpu_models[i]);
    free(p->demand.gpu_models);
    for (size_t i = 0; i < p->demand.extended.n; i++) free(p->demand.extended.v[i].name);
    free(p->demand.extended.v);
    free(p);
}

static void res_push(struct gs_resources *r, const char *name, int64_t milli)
{
    r->v = realloc(r->v, (r->n + 1) * sizeof *r->v);
    r->v[r->n++] = (struct gs_resource){strdup(name), milli};
}

struct gs_node *test_node(const char *name, int64_t cpu_milli, int64_t mem_bytes, int32_t pods, int32_t ngpus,
                          const char *model, int64_t mem_mib)
{
    struct gs_node *n = calloc(1, sizeof *n);
    n->meta.name = strdup(name);
    res_push(&n->allocatable, GS_RES_CPU, cpu_milli);
    res_push(&n->allocatable, GS_RES_MEMORY, mem_bytes * 1000);
    if (pods) res_push(&n->allocatable, GS_RES_PODS, (int64_t)pods * 1000);
    if (ngpus) {
        res_push(&n->allocatable, GS_RES_GPU, (int64_t)ngpus * 1000);
        n->gpus = calloc((size_t)ngpus, sizeof *n->gpus);
        n->ngpus = (size_t)ngpus;
        for (int32_t i = 0; i < ngpus; i++)
            n->gpus[i] = (struct gs_gpu){.index = i, .model = model ? strdup(model) : NULL, .memory_mib = mem_mib,
                                         .numa_node = -1, .healthy = true};
    }
    return n;
}

void test_node_free(struct gs_node *n)
{
    if (!n) return;
    free(n->meta.name);
    gs_labels_free(&n->meta.labels);
    for (size_t i = 0; i < n->allocatable.n; i++) free(n->allocatable.v[i].name);
    free(n->allocatable.v);
    for (size_t i = 0; i < n->ngpus; i++) free(n->gpus[i].model);
    free(n->gpus);
    for (size_t i = 0; i < n->ntaints; i++) gs_taint_free(&n->taints[i]);
    free(n->taints);
    free(n);
}
