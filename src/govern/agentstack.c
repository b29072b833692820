/*
 * agentstack.c - the node agent's side of the GPU stack: it answers the
 * operator's validation requests, runs the operands that belong to the node
 * (the toolkit's CDI spec, the advertised device resources, the MIG
 * manager), and publishes GFD labels and the NodeResourceTopology when the
 * node reaches ready.
 *
 * The operator asks through the Node's annotation gpusched.io/gpu-stack-request
 * (generation, step, attempt, MIG strategy and layout, components; see
 * govern/operator.h). Every few hundred milliseconds the agent reads its
 * Node; a request it has not answered yet is validated at once and the
 * answer patched into status.gpuStack. An answer that a full status write
 * (a re-registration) wiped is sent again, so the operator never waits for
 * an answer the agent believes it gave.
 *
 * Runs on the agent's sync loop thread only, the one thread that touches
 * the inventory, so re-partitioning a GPU and re-reading the inventory need
 * no lock beyond the pod table's.
 */
#include "agent/agent_int.h"
#include "control/resources.h"
#include "core/log.h"
#include "discovery/outputs.h"
#include "govern/migmanager.h"
#include "govern/operator.h"
#include "govern/policy.h"
#include "govern/validators.h"
#include "node/cdi.h"
#include "node/gpus_disc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POLL_NS (250 * GS_NS_PER_MS)       /* while governed: answers come back fast */
#define POLL_IDLE_NS (1000 * GS_NS_PER_MS) /* no request seen yet: look now and then */

struct gs__stack {
    int64_t next_ns;
    int64_t answered_gen;      /* last request answered: (generation, step, attempt) */
    char answered_step[32];
    int answered_attempt;
    json_t *answer;            /* the last answer sent */
    bool seen_ready;           /* the last request seen was at ready: publish on the way in only */
    bool governed;             /* the last Node read carried a request */
    struct gs_migmgr mig;
    struct gs_mig_backend backend;
    bool backend_open;
    char cdi_dir[1100];
    int model;                 /* -1 not read yet, 0 ungoverned, 1 ClusterPolicy (device plugin), 2 GPUCluster (DRA) */
    bool dra_driver;           /* the request's components.draDriver */
};

static const struct gs_api_resource *nodes_res(void) { return gs_api_resource_lookup("nodes"); }

/*--- Resources the Node advertises (called from agent_node.c) ---*/

void gs__stack_capacity(const struct gs_agent *a, json_t *capacity)
{
    if (a->stack && a->stack->model == 2) { /* a GPUCluster: GPUs reach pods through DRA only */
        json_object_del(capacity, "nvidia.com/gpu");
        return;
    }
    json_t *res = gs_stack_resources(&a->inv, (enum gs_mig_strategy)a->mig_strategy);
    const char *k;
    json_t *v;
    json_object_foreach(res, k, v) {
        char n[32];
        snprintf(n, sizeof n, "%lld", (long long)json_integer_value(v));
        json_object_set_new(capacity, k, json_string(n));
    }
    json_decref(res);
}

int gs__stack_dra(const struct gs_agent *a)
{
    const struct gs__stack *s = a->stack;
    if (!s || s->model < 0) return -1;
    return s->model != 1 || s->dra_driver; /* a ClusterPolicy publishes slices only with draDriver enabled */
}

/* Which policy governs the node, from its request: a change re-registers the advertised resources. */
static void follow_model(struct gs_agent *a, struct gs__stack *s, const json_t *req)
{
    const char *m = req ? gs__jstr(req, "model") : NULL;
    int model = !req ? 0 : m && !strcmp(m, "dra") ? 2 : 1;
    s->dra_driver = req && json_is_true(json_object_get(json_object_get(req, "components"), "draDriver"));
    if (model != s->model && s->model >= 0 && (model == 2 || s->model == 2)) atomic_store(&a->registered, false);
    s->model = model;
}

void gs__stack_keep_conditions(const json_t *old_status, json_t *status)
{
    json_t *conds = json_object_get(status, "conditions"), *c;
    size_t i;
    json_array_foreach(json_object_get(old_status, "conditions"), i, c) {
        const char *t = gs__jstr(c, "type");
        if (t && !strcmp(t, GS_COND_GPU_STACK) && json_is_array(conds)) json_array_append(conds, c);
    }
    json_t *ans = json_object_get(old_status, "gpuStack");
    if (ans) json_object_set(status, "gpuStack", ans);
}

/*--- Operands ---*/

/* The toolkit's part on this node: the CDI spec for its GPUs. */
static void write_cdi(struct gs_agent *a, struct gs__stack *s)
{
    char path[1200];
    if (gs_cdi_write(s->cdi_dir, &a->gpus, NULL, path, sizeof path))
        gs_log(GS_LOG_WARN, "agent: cannot write the CDI spec", "dir", s->cdi_dir, NULL);
}

/* Inventory changed (MIG): re-read it, keep GPU health, re-advertise. */
static void refresh_inventory(struct gs_agent *a)
{
    if (gs_disc_inventory(&a->disc, &a->inv)) return;
    struct gs_node_gpus g;
    gs_node_gpus_from_inventory(&g, &a->inv, 1);
    for (int i = 0; i < g.n; i++) gs_node_gpus_set_health(&g, i, !(a->unhealthy >> i & 1));
    pthread_mutex_lock(&a->mu);
    a->gpus = g;
    pthread_mutex_unlock(&a->mu);
    if (a->exp) gs_exporter_set_mig(a->exp, &a->inv); /* per-MIG-instance metrics follow the layout */
    atomic_store(&a->registered, false); /* the next upkeep re-registers capacity and devices */
    a->nrt_dirty = true;
}

static int run_mig(struct gs_agent *a, struct gs__stack *s, const json_t *req, const struct gs_mig_layout *want,
                   char *msg, size_t len)
{
    if (!s->backend_open) {
        int err = gs_mig_backend_open(&a->disc, &s->backend);
        if (err) return snprintf(msg, len, "no MIG backend for the %s discovery backend: %s", a->disc.ops->name,
                                 a->disc.err[0] ? a->disc.err : gs_strerror(err)), err;
        s->backend_open = true;
    }
    char names[GS_DISC_MAX_GPUS][200];
    const char *busy_pods[64] = {0};
    uint64_t busy = 0;
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->npods; i++) {
        const struct gs__pod *p = a->pods[i];
        for (int k = 0; p->holds_devices && k < p->nslots; k++)
            if (p->slots[k] >= 0 && p->slots[k] < GS_DISC_MAX_GPUS) {
                busy |= 1ull << p->slots[k];
                snprintf(names[p->slots[k]], sizeof names[0], "%s", p->key);
                busy_pods[p->slots[k]] = names[p->slots[k]];
            }
        /* MIG instances (agent_mig.c) pin their GPUs too: re-partitioning would pull them away. */
        uint64_t mm = p->holds_devices ? gs__mig_gpu_mask(a, p) : 0;
        for (int g = 0; g < GS_DISC_MAX_GPUS; g++)
            if (mm >> g & 1) {
                busy |= 1ull << g;
                snprintf(names[g], sizeof names[0], "%s", p->key);
                busy_pods[g] = names[g];
            }
    }
    pthread_mutex_unlock(&a->mu);
    struct gs_mig_step_in in = {&s->backend, want, busy, busy_pods,
                                (int64_t)(json_number_value(json_object_get(req, "drainTimeoutSeconds")) * 1e9),
                                gs__mono_ns()};
    bool changed = false;
    int err = gs_migmgr_step(&s->mig, &in, &changed, msg, len);
    if (changed) {
        refresh_inventory(a);
        gs_log(GS_LOG_INFO, "agent: MIG layout applied", "node", a->node, "layout", want->name, NULL);
    }
    return err;
}

/*--- Validation ---*/

static bool comp_on(const json_t *req, const char *key)
{
    return json_is_true(json_object_get(json_object_get(req, "components"), key));
}

/* The MIG strategy of every request, answered or not: an agent that restarts
 * on a ready node gets no new request, yet must advertise (and hand out) MIG
 * devices under the policy's strategy again. */
static enum gs_mig_strategy follow_strategy(struct gs_agent *a, const json_t *req)
{
    const char *strategy = gs__jstr(req, "strategy");
    enum gs_mig_strategy st = !strategy || !strcmp(strategy, "none") ? GS_MIG_NONE
                              : !strcmp(strategy, "single")           ? GS_MIG_SINGLE
                                                                      : GS_MIG_MIXED;
    if (st != (enum gs_mig_strategy)a->mig_strategy) {
        a->mig_strategy = st;
        atomic_store(&a->registered, false); /* advertise the resources under the new strategy */
    }
    return st;
}

static int validate(struct gs_agent *a, struct gs__stack *s, const json_t *req, const json_t *node, enum gs_step step,
                    char *msg, size_t len)
{
    enum gs_mig_strategy st = follow_strategy(a, req);
    char dirs[1200];
    snprintf(dirs, sizeof dirs, "%s:/etc/cdi:/var/run/cdi", s->cdi_dir);
    struct gs_mig_layout want;
    bool known = json_is_true(json_object_get(req, "migKnown"));
    if (known && gs_mig_layout_parse(gs__jstr(req, "migLayout") ?: "", &want)) known = false;
    if (known) snprintf(want.name, sizeof want.name, "%s", gs__jstr(req, "migConfig") ?: "");
    struct gs_validate_in in = {.disc = &a->disc, .cdi_dirs = dirs, .node = node, .strategy = st,
                                .layout = known ? &want : NULL};
    struct gs_metrics_text *page = NULL;
    json_t *slices = NULL;
    int err = 0;
    switch (step) {
    case GS_STEP_TOOLKIT:
        if (comp_on(req, "toolkit")) write_cdi(a, s);
        break;
    case GS_STEP_MIG:
        if (!known)
            return snprintf(msg, len, "no MIG layout named \"%s\" in the ClusterPolicy (node label %s)",
                            gs__jstr(req, "migConfig") ?: "", GS_LABEL_MIG_CONFIG), GS_ENOENT;
        if ((err = run_mig(a, s, req, &want, msg, len))) return err;
        break;
    case GS_STEP_DEVICE_PLUGIN:
        if (!atomic_load(&a->registered)) return snprintf(msg, len, "re-registering the node's resources"), GS_EBUSY;
        break;
    case GS_STEP_MONITORING:
        if (a->exp && (page = gs_exporter_text(a->exp))) in.metrics = page->data;
        break;
    case GS_STEP_DRA_PLUGIN: { /* what the server holds of this node's slices (agent_slices.c writes them) */
        char fs[320];
        snprintf(fs, sizeof fs, "spec.nodeName=%s,spec.driver=gpu.nvidia.com", a->node);
        if (gs_client_list(a->cl, gs_api_resource_find("resource.k8s.io", "v1", "resourceslices"), NULL, NULL, fs,
                           false, &slices))
            return snprintf(msg, len, "cannot list the node's ResourceSlices"), GS_EIO;
        in.slices = json_object_get(slices, "items");
        break;
    }
    default:
        break;
    }
    err = gs_validate_step(step, &in, msg, len);
    if (page) gs_metrics_text_unref(page);
    json_decref(slices);
    return err;
}

static void send_answer(struct gs_agent *a, struct gs__stack *s)
{
    json_t *patch = json_pack("{s:{s:O}}", "status", "gpuStack", s->answer), *out = NULL;
    int err = gs_client_patch(a->cl, nodes_res(), NULL, a->node, "status", true, patch, &out);
    if (err) gs_log(GS_LOG_WARN, "agent: cannot report a GPU stack validation", "node", a->node, "error",
                    gs_strerror(err), NULL);
    json_decref(patch);
    json_decref(out);
}

/*--- Stale MIG labels (begin) ---*/
/* Keys the GFD labels carry only under a MIG strategy: per-profile labels
 * (mixed), the strategy itself, and the MIG attributes put on nvidia.com/gpu
 * (single). When a publication lacks one, the node must lose it, or a policy
 * back at migStrategy none leaves the node advertising a MIG view. Never
 * nvidia.com/mig.config*: those are the MIG manager's, set by people. */
static bool stale_mig_label(const char *k)
{
    static const char *const single_keys[] = {
        "nvidia.com/mig.strategy",         "nvidia.com/gpu.multiprocessors", "nvidia.com/gpu.slices.gi",
        "nvidia.com/gpu.slices.ci",        "nvidia.com/gpu.engines.copy",    "nvidia.com/gpu.engines.decoder",
        "nvidia.com/gpu.engines.encoder",  "nvidia.com/gpu.engines.jpeg",    "nvidia.com/gpu.engines.ofa",
    };
    if (!strncmp(k, "nvidia.com/mig-", 15)) return true;
    for (size_t i = 0; i < sizeof single_keys / sizeof single_keys[0]; i++)
        if (!strcmp(k, single_keys[i])) return true;
    return false;
}
/*--- Stale MIG labels (end) ---*/

/* GFD labels (with the MIG strategy's) and the NodeResourceTopology, each time the node reaches ready. */
static void publish_ready(struct gs_agent *a, const json_t *req, const json_t *node)
{
    if (!comp_on(req, "gfd")) return;
    struct gs_labels l = {0};
    struct gs_label_opts lo = {.mig = (enum gs_mig_strategy)a->mig_strategy, .nvidia_pci_devices = -1};
    gs_gfd_labels(&a->inv, &lo, &l);
    json_t *labels = json_object();
    for (size_t i = 0; i < l.n; i++) json_object_set_new(labels, l.v[i].key, json_string(l.v[i].value));
    gs_labels_free(&l);
    /* MIG labels of a previous layout or strategy go (null deletes in a merge patch). */
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(json_object_get(node, "metadata"), "labels"), k, v)
        if (stale_mig_label(k) && !json_object_get(labels, k)) json_object_set_new(labels, k, json_null());
    json_t *patch = json_pack("{s:{s:o}}", "metadata", "labels", labels), *out = NULL;
    gs_client_patch(a->cl, nodes_res(), NULL, a->node, NULL, false, patch, &out);
    json_decref(patch);
    json_decref(out);
    a->nrt_dirty = true;
}

static void answer(struct gs_agent *a, struct gs__stack *s, const json_t *node)
{
    const json_t *md = json_object_get(node, "metadata");
    const char *text = gs__jstr(json_object_get(md, "annotations"), GS_ANN_STACK_REQUEST);
    json_t *req = text ? json_loads(text, 0, NULL) : NULL;
    s->governed = req != NULL;
    follow_model(a, s, req); /* ClusterPolicy or GPUCluster: nvidia.com/gpu or ResourceSlices */
    if (!req) return;
    int64_t gen = json_integer_value(json_object_get(req, "generation"));
    const char *stepname = gs__jstr(req, "step") ?: "";
    int attempt = (int)json_integer_value(json_object_get(req, "attempt"));
    int step = gs_step_parse(stepname);
    follow_strategy(a, req); /* MIG: also after a restart at ready */
    if (step == GS_STEP_READY && !s->seen_ready) publish_ready(a, req, node);
    s->seen_ready = step == GS_STEP_READY;
    bool same = gen == s->answered_gen && attempt == s->answered_attempt && !strcmp(stepname, s->answered_step);
    if (same) {
        /* Re-send when a full status write dropped it. */
        if (!json_equal(json_object_get(json_object_get(node, "status"), "gpuStack"), s->answer)) send_answer(a, s);
    } else if (step > GS_STEP_NOT_READY && step < GS_STEP_READY && attempt > 0) {
        char msg[512];
        int err = validate(a, s, req, node, (enum gs_step)step, msg, sizeof msg);
        json_decref(s->answer);
        s->answer = json_pack("{s:I,s:s,s:i,s:b,s:s}", "generation", (json_int_t)gen, "step", stepname, "attempt",
                              attempt, "ok", err == 0, "message", msg);
        s->answered_gen = gen;
        s->answered_attempt = attempt;
        snprintf(s->answered_step, sizeof s->answered_step, "%s", stepname);
        send_answer(a, s);
    }
    json_decref(req);
}

void gs__stack_tick(struct gs_agent *a, int64_t now_ns)
{
    if (!a->stack) {
        if (!(a->stack = calloc(1, sizeof *a->stack))) return;
        snprintf(a->stack->cdi_dir, sizeof a->stack->cdi_dir, "%s/cdi", a->state_dir);
        a->stack->model = -1;
        gs_migmgr_init(&a->stack->mig);
    }
    struct gs__stack *s = a->stack;
    if (now_ns < s->next_ns) return;
    json_t *node = NULL;
    if (gs_client_get(a->cl, nodes_res(), NULL, a->node, &node) == 0) answer(a, s, node);
    json_decref(node);
    s->next_ns = now_ns + (s->governed ? POLL_NS : POLL_IDLE_NS);
}

void gs__stack_free(struct gs_agent *a)
{
    if (!a->stack) return;
    if (a->stack->backend_open) gs_mig_backend_close(&a->stack->backend);
    json_decref(a->stack->answer);
    free(a->stack);
    a->stack = NULL;
}
