/*
 * operator.c - the GPU stack operator in the server; see operator.h.
 *
 * A plain poll, like the node lifecycle: each pass lists the ClusterPolicies
 * and the nodes, steps each node's state machine with what its agent
 * answered, and writes back only what differs, in one read-modify-write per
 * node that re-reads the node (through the source, source.h: in the server
 * one store transaction under its lock). Each machine's
 * position is written with the rest (annotation gpusched.io/gpu-stack-machine)
 * and read back the first time the node is seen, so a restart keeps ready
 * nodes ready; events are created after the node write that records the
 * move, so a crash between the two loses an event rather than repeating one.
 *
 * The policy's generation is a counter bumped whenever the spec's canonical
 * JSON changes, not its resourceVersion, so the operator's own status writes
 * on the ClusterPolicy never re-drive anything. It is kept in the policy's
 * status with a hash of the spec, so it survives restarts.
 */
#include "govern/operator.h"
#include "govern/metrics.h"
#include "govern/policy.h"
#include "govern/statemachine.h"

#include "control/apiserver.h"
#include "control/events.h" /* an Event per transition */
#include "core/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct node_sm {
    char name[256];
    struct gs_stack_sm sm;
    char last_fail[256]; /* message of the last failure event, to not repeat it */
    char mig[256];       /* MIG layout driven ("name=text"): a change re-drives the node */
};

struct gs_operator {
    struct gs_source *source;
    struct gs_clock real;
    const struct gs_clock *clock;
    int64_t period_ms;
    pthread_t th;
    bool started;
    atomic_bool stop;
    pthread_mutex_t mu; /* everything below, for metrics readers */
    bool have_policy;
    struct gs_policy policy;
    char *spec_text;    /* canonical JSON of the policy's spec */
    int64_t generation;
    char spec_hash[20]; /* FNV-1a of spec_text, hex */
    struct gs_clock realtime;
    const struct gs_clock *wall;
    int64_t wall_offset; /* wall time - op->clock time, fixed at start so saved times are stable */
    struct pend {
        char node[256], reason[32], type[16], msg[400];
    } pend[8];          /* events of the node being driven, created after its write */
    int npend;
    struct node_sm *nodes;
    size_t n, cap;
    struct gs_event_source ev; /* GS_EVENT_DISTINCT: one Event per transition, in order */
    struct gs_recorder *own_events; /* when the options named none */
    struct gs_operator_stats st;
    /* The last pass listed the nodes without a policy, at this version. */
    bool idle_listed;
    int64_t nodes_rv;
};

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static void wall_text(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* "2026-11-29T17:30:01.123Z" for wall time t (ns since the epoch). */
static void ms_text(int64_t t, char *buf, size_t len)
{
    time_t sec = (time_t)(t >= 0 ? t / GS_NS_PER_SEC : -((-t + GS_NS_PER_SEC - 1) / GS_NS_PER_SEC));
    struct tm tm;
    gmtime_r(&sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03dZ", base, (int)((t - (int64_t)sec * GS_NS_PER_SEC) / GS_NS_PER_MS));
}

static int parse_ms_text(const char *s, int64_t *out)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *p = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!p) return GS_EINVAL;
    int64_t frac = 0, scale = GS_NS_PER_SEC;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            if (scale >= 10) scale /= 10, frac += (*p - '0') * scale;
    if (strcmp(p, "Z")) return GS_EINVAL;
    *out = (int64_t)timegm(&tm) * GS_NS_PER_SEC + frac;
    return 0;
}

static int64_t realtime_now(const struct gs_clock *c)
{
    (void)c;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * GS_NS_PER_SEC + ts.tv_nsec;
}

static void hash_text(const char *s, char *out, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    snprintf(out, len, "%016llx", (unsigned long long)h);
}

/*--- Policy ---*/

struct pick {
    json_t *best;
    const char *best_key;
    json_t *all; /* key -> object */
};

static int pick_policy(const char *key, json_t *obj, void *arg)
{
    struct pick *p = arg;
    json_object_set(p->all, key, obj);
    json_t *md = json_object_get(obj, "metadata");
    json_t *bmd = json_object_get(p->best, "metadata");
    const char *ts = jstr(md, "creationTimestamp") ?: "", *bts = jstr(bmd, "creationTimestamp") ?: "";
    if (!p->best || strcmp(ts, bts) < 0 || (!strcmp(ts, bts) && strcmp(jstr(md, "name") ?: "", jstr(bmd, "name") ?: "") < 0))
        p->best = obj;
    return 0;
}

struct pstatus {
    const char *state;
    const char *message;
};

static int set_policy_status(json_t *cur, json_t **out, void *arg)
{
    const struct pstatus *ps = arg;
    if (!cur) return GS_STORE_UNCHANGED;
    json_t *st = json_object_get(cur, "status");
    if (jstr(st, "state") && !strcmp(jstr(st, "state"), ps->state) &&
        !strcmp(jstr(st, "message") ?: "", ps->message))
        return GS_STORE_UNCHANGED;
    json_t *n = json_deep_copy(cur);
    char ts[32];
    wall_text(ts, sizeof ts);
    bool ok = !strcmp(ps->state, "ready") || !strcmp(ps->state, "notReady");
    json_t *nst = json_pack("{s:s,s:s,s:[{s:s,s:s,s:s,s:s,s:s}]}", "state", ps->state, "message", ps->message,
                            "conditions", "type", ok ? "Ready" : "Error", "status", "True", "reason", ps->state,
                            "message", ps->message, "lastTransitionTime", ts);
    /* The operator's generation and spec hash (set_policy_generation) stay. */
    if (json_object_get(st, "generation")) json_object_set(nst, "generation", json_object_get(st, "generation"));
    if (json_object_get(st, "specHash")) json_object_set(nst, "specHash", json_object_get(st, "specHash"));
    json_object_set_new(n, "status", nst);
    *out = n;
    return 0;
}

static void write_policy_status(struct gs_operator *op, const char *key, const char *state, const char *msg)
{
    struct pstatus ps = {state, msg};
    json_t *out = NULL;
    gs_source_mutate(op->source, key, "status", set_policy_status, &ps, &out, NULL);
    json_decref(out);
}

static int set_policy_generation(json_t *cur, json_t **out, void *arg)
{
    const struct gs_operator *op = arg;
    if (!cur) return GS_STORE_UNCHANGED;
    json_t *st = json_object_get(cur, "status");
    if (json_integer_value(json_object_get(st, "generation")) == op->generation &&
        !strcmp(jstr(st, "specHash") ?: "", op->spec_hash))
        return GS_STORE_UNCHANGED;
    json_t *n = json_deep_copy(cur);
    st = json_object_get(n, "status");
    if (!json_is_object(st)) json_object_set_new(n, "status", st = json_object());
    json_object_set_new(st, "generation", json_integer(op->generation));
    json_object_set_new(st, "specHash", json_string(op->spec_hash));
    *out = n;
    return 0;
}

/* A spec seen for the first time by this process: the generation it had
 * before a restart when the spec is the same, else the next one. */
static void adopt_generation(struct gs_operator *op, const json_t *obj, const char *hash)
{
    const json_t *st = json_object_get(obj, "status");
    int64_t saved = json_integer_value(json_object_get(st, "generation"));
    if (!op->spec_text && saved > 0 && !strcmp(jstr(st, "specHash") ?: "", hash)) op->generation = saved;
    else op->generation = (saved > op->generation ? saved : op->generation) + 1;
}

static void stack_cfg(const struct gs_policy *p, const json_t *labels, struct gs_stack_cfg *c)
{
    memset(c, 0, sizeof *c);
    static const struct {
        enum gs_step step;
        enum gs_comp comp;
    } gates[] = {{GS_STEP_DRIVER, GS_COMP_DRIVER},
                 {GS_STEP_TOOLKIT, GS_COMP_TOOLKIT},
                 {GS_STEP_DEVICE_PLUGIN, GS_COMP_DEVICE_PLUGIN},
                 {GS_STEP_DRA_PLUGIN, GS_COMP_DRA_DRIVER},
                 {GS_STEP_MIG, GS_COMP_MIG_MANAGER},
                 {GS_STEP_MONITORING, GS_COMP_DCGM_EXPORTER}};
    for (size_t i = 0; i < sizeof gates / sizeof gates[0]; i++)
        if (gs_policy_node_enabled(p, labels, gates[i].comp)) c->enabled |= GS_STEP_BIT(gates[i].step);
    c->backoff_initial_ns = p->backoff_initial_ms * GS_NS_PER_MS;
    c->backoff_max_ns = p->backoff_max_ms * GS_NS_PER_MS;
    c->answer_timeout_ns = p->answer_timeout_ms * GS_NS_PER_MS;
}

/*--- Events ---*/

static void emit_now(struct gs_operator *op, const json_t *node, const char *name, const char *reason,
                     const char *type, const char *msg)
{
    const char *uid = jstr(json_object_get(node, "metadata"), "uid");
    gs_event_record(&op->ev, GS_EVENT_NODE(name, uid), type, reason, reason, "%s", msg);
    op->st.events++;
}

/* Queued until the node's write (flush_events). */
static void emit(struct gs_operator *op, const char *node, const char *reason, const char *type, const char *msg)
{
    if (op->npend == (int)(sizeof op->pend / sizeof op->pend[0])) return; /* a pass moves a node a few times at most */
    struct pend *e = &op->pend[op->npend++];
    snprintf(e->node, sizeof e->node, "%s", node);
    snprintf(e->reason, sizeof e->reason, "%s", reason);
    snprintf(e->type, sizeof e->type, "%s", type);
    snprintf(e->msg, sizeof e->msg, "%s", msg);
}

static void flush_events(struct gs_operator *op, const json_t *node)
{
    for (int i = 0; i < op->npend; i++)
        emit_now(op, node, op->pend[i].node, op->pend[i].reason, op->pend[i].type, op->pend[i].msg);
    op->npend = 0;
}

static void publish(struct gs_operator *op, struct node_sm *ns, const struct gs_stack_change *ch)
{
    if (ch->failure) {
        op->st.failures++;
        if (!strcmp(ns->last_fail, ch->message)) return;
        snprintf(ns->last_fail, sizeof ns->last_fail, "%s", ch->message);
        emit(op, ns->name, "ValidationFailed", "Warning", ch->message);
        gs_log(GS_LOG_WARN, "operator: validation failed", "node", ns->name, "step", gs_step_name(ch->from), "message",
               ch->message, NULL);
        return;
    }
    op->st.transitions++;
    ns->last_fail[0] = 0;
    char msg[400];
    snprintf(msg, sizeof msg, "GPU stack %s -> %s: %s", gs_step_name(ch->from), gs_step_name(ch->to), ch->message);
    emit(op, ns->name, gs_step_reason(ch->to), ch->to == GS_STEP_NOT_READY && ch->from != GS_STEP_READY ? "Normal" : ch->to < ch->from ? "Warning" : "Normal", msg);
    gs_log(GS_LOG_INFO, "operator: GPU stack transition", "node", ns->name, "from", gs_step_name(ch->from), "to",
           gs_step_name(ch->to), NULL);
}

static const json_t *condition(const json_t *node, const char *type);

/*--- Saved position (annotation gpusched.io/gpu-stack-machine) ---*/

static json_t *saved_json(const struct gs_operator *op, const struct node_sm *ns)
{
    struct gs_stack_saved sv;
    gs_stack_sm_save(&ns->sm, &sv);
    char entered[40], next[40];
    ms_text(sv.entered_ns + op->wall_offset, entered, sizeof entered);
    ms_text(sv.next_try_ns + op->wall_offset, next, sizeof next);
    json_t *enabled = json_array();
    for (int s = GS_STEP_DRIVER; s < GS_STEP_READY; s++)
        if (sv.enabled & GS_STEP_BIT(s)) json_array_append_new(enabled, json_string(gs_step_name(s)));
    return json_pack("{s:I,s:s,s:s,s:i,s:b,s:i,s:s,s:s,s:o,s:s,s:s}", "generation", (json_int_t)sv.generation,
                     "specHash", op->spec_hash, "step", gs_step_name(sv.step), "attempt", sv.attempt, "waiting",
                     sv.waiting, "failures", sv.failures, "enteredAt", entered, "nextTryAt", next, "enabled", enabled,
                     "mig", ns->mig, "lastFailure", ns->last_fail);
}

struct saved {
    struct gs_stack_saved sv;
    const char *hash, *mig, *last_fail;
};

/* Reads the saved position; on a bad field returns GS_EINVAL with the
 * field's name in field and the problem in why. */
static int parse_saved(const struct gs_operator *op, const json_t *o, struct saved *out, const char **field, char *why,
                       size_t len)
{
    memset(out, 0, sizeof *out);
#define BAD(f, ...) return *field = (f), snprintf(why, len, __VA_ARGS__), GS_EINVAL
    const json_t *v = json_object_get(o, "generation");
    if (!json_is_integer(v) || json_integer_value(v) < 0) BAD("generation", "want a whole number >= 0");
    out->sv.generation = json_integer_value(v);
    if (!(out->hash = jstr(o, "specHash"))) BAD("specHash", "want a string");
    int step = gs_step_parse(jstr(o, "step"));
    if (step < 0) BAD("step", "\"%.40s\": not a GPU stack step", jstr(o, "step") ?: "(missing)");
    out->sv.step = (enum gs_step)step;
    v = json_object_get(o, "attempt");
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000000)
        BAD("attempt", "want a whole number from 0");
    out->sv.attempt = (int)json_integer_value(v);
    if (!json_is_boolean(json_object_get(o, "waiting"))) BAD("waiting", "want true or false");
    out->sv.waiting = json_is_true(json_object_get(o, "waiting"));
    v = json_object_get(o, "failures");
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000000)
        BAD("failures", "want a whole number from 0");
    out->sv.failures = (int)json_integer_value(v);
    if (parse_ms_text(jstr(o, "enteredAt"), &out->sv.entered_ns))
        BAD("enteredAt", "\"%.40s\": want a time like 2026-01-02T03:04:05.678Z", jstr(o, "enteredAt") ?: "(missing)");
    if (parse_ms_text(jstr(o, "nextTryAt"), &out->sv.next_try_ns))
        BAD("nextTryAt", "\"%.40s\": want a time like 2026-01-02T03:04:05.678Z", jstr(o, "nextTryAt") ?: "(missing)");
    out->sv.entered_ns -= op->wall_offset;
    out->sv.next_try_ns -= op->wall_offset;
    v = json_object_get(o, "enabled");
    if (!json_is_array(v)) BAD("enabled", "want a list of steps");
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        int s = gs_step_parse(json_string_value(e));
        if (s <= GS_STEP_NOT_READY || s >= GS_STEP_READY)
            BAD("enabled", "item %zu: \"%.40s\": not a validation step", i, json_string_value(e) ?: "(not a string)");
        out->sv.enabled |= GS_STEP_BIT(s);
    }
    if (!(out->mig = jstr(o, "mig"))) BAD("mig", "want a string");
    out->last_fail = jstr(o, "lastFailure") ?: "";
#undef BAD
    return 0;
}

/* Puts a node's machine back where the Node says it was (a server restart).
 * Publishes nothing: the node did not move. drive() then compares what was
 * saved with the policy and labels of now, and re-drives on a change. */
static void restore(struct gs_operator *op, struct node_sm *ns, const json_t *node, int64_t now)
{
    const json_t *md = json_object_get(node, "metadata");
    const char *text = jstr(json_object_get(md, "annotations"), GS_ANN_STACK_MACHINE);
    if (!text) return;
    json_error_t jerr;
    json_t *o = json_loads(text, 0, &jerr);
    struct saved sd;
    const char *field = GS_ANN_STACK_MACHINE;
    char why[200];
    int err = 0;
    if (!json_is_object(o)) err = GS_EINVAL, snprintf(why, sizeof why, "not a JSON object: %s", o ? "" : jerr.text);
    else err = parse_saved(op, o, &sd, &field, why, sizeof why);
    if (err) {
        op->st.restore_errors++;
        gs_log(GS_LOG_WARN, "operator: cannot restore the node's GPU stack state; validating it again from not-ready",
               "node", ns->name, "field", field, "reason", why, NULL);
        json_decref(o);
        return;
    }
    struct gs_stack_cfg cfg;
    stack_cfg(&op->policy, json_object_get(md, "labels"), &cfg);
    if (strcmp(sd.hash, op->spec_hash)) sd.sv.generation = 0; /* another spec under that number: re-driven */
    gs_stack_sm_restore(&ns->sm, &cfg, &sd.sv, now);
    const json_t *c = condition(node, GS_COND_GPU_STACK);
    if (sd.sv.step != GS_STEP_READY && sd.sv.step != GS_STEP_NOT_READY && jstr(c, "message") &&
        !strcmp(jstr(c, "reason") ?: "", gs_step_reason(sd.sv.step)))
        snprintf(ns->sm.message, sizeof ns->sm.message, "%s", jstr(c, "message"));
    snprintf(ns->mig, sizeof ns->mig, "%s", sd.mig);
    snprintf(ns->last_fail, sizeof ns->last_fail, "%s", sd.last_fail);
    op->st.restored++;
    gs_log(GS_LOG_INFO, "operator: GPU stack state restored", "node", ns->name, "step", gs_step_name(sd.sv.step), NULL);
    json_decref(o);
}

/*--- Node bookkeeping ---*/

/* The node's machine; a node seen for the first time (node non-NULL) gets
 * one, restored from what the Node carries. */
static struct node_sm *node_find(struct gs_operator *op, const char *name, const json_t *node, int64_t now)
{
    for (size_t i = 0; i < op->n; i++)
        if (!strcmp(op->nodes[i].name, name)) return &op->nodes[i];
    if (!node) return NULL;
    if (op->n == op->cap) {
        size_t cap = op->cap ? op->cap * 2 : 16;
        struct node_sm *v = realloc(op->nodes, cap * sizeof *v);
        if (!v) return NULL;
        op->nodes = v, op->cap = cap;
    }
    struct node_sm *ns = &op->nodes[op->n++];
    memset(ns, 0, sizeof *ns);
    snprintf(ns->name, sizeof ns->name, "%s", name);
    struct gs_stack_cfg c = {0};
    gs_stack_sm_init(&ns->sm, &c, op->generation, now);
    restore(op, ns, node, now);
    return ns;
}

static const json_t *condition(const json_t *node, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), i, c)
        if (jstr(c, "type") && !strcmp(jstr(c, "type"), type)) return c;
    return NULL;
}

static bool gpu_node(const json_t *node)
{
    const char *present = jstr(json_object_get(json_object_get(node, "metadata"), "labels"), "nvidia.com/gpu.present");
    return json_array_size(json_object_get(json_object_get(node, "status"), "devices")) > 0 ||
           (present && !strcmp(present, "true"));
}

/*--- What a node should carry ---*/

struct want {
    const struct gs_operator *op;
    bool governed;          /* false: remove what the operator wrote */
    const struct gs_stack_sm *sm;
    json_t *request;        /* the request annotation's JSON, or NULL */
    json_t *saved;          /* the saved position's JSON, or NULL */
};

static json_t *request_json(const struct gs_operator *op, const struct gs_stack_sm *sm, const json_t *labels)
{
    const struct gs_policy *p = &op->policy;
    const char *lname = NULL;
    const struct gs_mig_layout *l = gs_policy_layout_for(p, labels, &lname);
    char text[160] = "";
    if (l) gs_mig_layout_text(l, text, sizeof text);
    json_t *comps = json_object();
    for (int c = 0; c < GS_COMP_COUNT; c++)
        json_object_set_new(comps, gs_comp_key(c), json_boolean(gs_policy_node_enabled(p, labels, c)));
    /* At ready the request names the step checked again after a restore, if any. */
    enum gs_step step = sm->step == GS_STEP_READY && sm->check != GS_STEP_NOT_READY ? sm->check : sm->step;
    return json_pack("{s:I,s:s,s:i,s:s,s:s,s:s?,s:b,s:f,s:o,s:s}", "generation", (json_int_t)sm->generation, "step",
                     gs_step_name(step), "attempt", sm->attempt, "strategy", gs_mig_strategy_name(p->strategy),
                     "migConfig", lname ? lname : "", "migLayout", l ? text : NULL, "migKnown", l != NULL,
                     "drainTimeoutSeconds", (double)p->drain_timeout_ms / 1000, "components", comps, "model",
                     p->dra ? "dra" : "device-plugin"); /* GPUCluster or ClusterPolicy: what the agent advertises */
}

/* Sets (v non-NULL) or removes annotation k to v's compact JSON. */
static bool set_json_annotation(json_t *ann, const char *k, const json_t *v)
{
    char *text = v ? json_dumps(v, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    bool changed = false;
    if (text && strcmp(jstr(ann, k) ?: "", text)) {
        json_object_set_new(ann, k, json_string(text));
        changed = true;
    } else if (!text && json_object_get(ann, k)) {
        json_object_del(ann, k);
        changed = true;
    }
    free(text);
    return changed;
}

static bool set_label(json_t *labels, const char *k, const char *v)
{
    const char *cur = jstr(labels, k);
    if (v && cur && !strcmp(cur, v)) return false;
    if (!v && !cur) return false;
    if (v) json_object_set_new(labels, k, json_string(v));
    else json_object_del(labels, k);
    return true;
}

/* Deploy labels: the operator writes those it manages, remembering each
 * value it wrote in an annotation ("driver=true,dcgm=false"). A label that is
 * absent, or still holds what the operator wrote, is the operator's; any
 * other value was set by someone else and is left alone (and, being
 * "false", switches that component off on the node). */
static bool deploy_labels(const struct gs_operator *op, json_t *labels, json_t *ann, bool governed)
{
    char managed[1024] = "", now[1024] = "";
    snprintf(managed, sizeof managed, ",%s,", jstr(ann, GS_ANN_DEPLOY_MANAGED) ?: "");
    bool changed = false;
    for (int c = 0; c < GS_COMP_COUNT; c++) {
        char key[128], tag[96];
        snprintf(key, sizeof key, GS_LABEL_DEPLOY_PREFIX "%s", gs_comp_operand(c));
        const char *cur = jstr(labels, key);
        snprintf(tag, sizeof tag, ",%s=%.8s,", gs_comp_operand(c), cur ? cur : "");
        if (cur && !strstr(managed, tag)) continue; /* someone else's */
        if (!governed) {
            changed |= set_label(labels, key, NULL);
            continue;
        }
        const char *v = op->policy.enabled[c] ? "true" : "false";
        changed |= set_label(labels, key, v);
        size_t w = strlen(now);
        snprintf(now + w, sizeof now - w, "%s%s=%s", w ? "," : "", gs_comp_operand(c), v);
    }
    if (governed) {
        if (strcmp(jstr(ann, GS_ANN_DEPLOY_MANAGED) ?: "", now)) {
            json_object_set_new(ann, GS_ANN_DEPLOY_MANAGED, json_string(now));
            changed = true;
        }
    } else if (json_object_get(ann, GS_ANN_DEPLOY_MANAGED)) {
        json_object_del(ann, GS_ANN_DEPLOY_MANAGED);
        changed = true;
    }
    return changed;
}

static bool set_condition(json_t *node, const struct want *w)
{
    json_t *st = json_object_get(node, "status");
    if (!json_is_object(st)) json_object_set_new(node, "status", st = json_object());
    json_t *conds = json_object_get(st, "conditions");
    if (!json_is_array(conds)) json_object_set_new(st, "conditions", conds = json_array());
    size_t i, at = SIZE_MAX;
    json_t *c;
    json_array_foreach(conds, i, c) if (jstr(c, "type") && !strcmp(jstr(c, "type"), GS_COND_GPU_STACK)) at = i;
    if (!w->governed) {
        if (at == SIZE_MAX) return false;
        json_array_remove(conds, at);
        return true;
    }
    const char *status = w->sm->step == GS_STEP_READY ? "True" : "False";
    const char *reason = gs_step_reason(w->sm->step);
    c = at == SIZE_MAX ? NULL : json_array_get(conds, at);
    if (c && !strcmp(jstr(c, "status") ?: "", status) && !strcmp(jstr(c, "reason") ?: "", reason) &&
        !strcmp(jstr(c, "message") ?: "", w->sm->message))
        return false;
    char ts[32];
    wall_text(ts, sizeof ts);
    bool moved = !c || strcmp(jstr(c, "status") ?: "", status) || strcmp(jstr(c, "reason") ?: "", reason);
    json_t *n = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", GS_COND_GPU_STACK, "status", status, "reason", reason,
                          "message", w->sm->message, "lastTransitionTime",
                          moved ? ts : (jstr(c, "lastTransitionTime") ?: ts), "lastHeartbeatTime", ts);
    if (at == SIZE_MAX) json_array_append_new(conds, n);
    else json_array_set_new(conds, at, n);
    return true;
}

static int apply_want(json_t *cur, json_t **out, void *arg)
{
    const struct want *w = arg;
    if (!cur) return GS_STORE_UNCHANGED;
    json_t *n = json_deep_copy(cur);
    json_t *md = json_object_get(n, "metadata");
    json_t *labels = json_object_get(md, "labels"), *ann = json_object_get(md, "annotations");
    if (!json_is_object(labels)) json_object_set_new(md, "labels", labels = json_object());
    if (!json_is_object(ann)) json_object_set_new(md, "annotations", ann = json_object());
    bool changed = set_label(labels, GS_LABEL_STACK_STATE, w->governed ? gs_step_name(w->sm->step) : NULL);
    if (w->governed) changed |= set_label(labels, "nvidia.com/gpu.present", "true");
    changed |= deploy_labels(w->op, labels, ann, w->governed);
    changed |= set_json_annotation(ann, GS_ANN_STACK_REQUEST, w->request);
    changed |= set_json_annotation(ann, GS_ANN_STACK_MACHINE, w->saved);
    changed |= set_condition(n, w);
    if (!changed) {
        json_decref(n);
        return GS_STORE_UNCHANGED;
    }
    *out = n;
    return 0;
}

/*--- One node ---*/

static void take_answer(struct gs_operator *op, struct node_sm *ns, const json_t *node, int64_t now)
{
    const json_t *rep = json_object_get(json_object_get(node, "status"), "gpuStack");
    if (!rep || json_integer_value(json_object_get(rep, "generation")) != ns->sm.generation) return;
    int step = gs_step_parse(jstr(rep, "step"));
    if (step < 0) return;
    struct gs_stack_change ch;
    if (gs_stack_sm_answer(&ns->sm, (enum gs_step)step, (int)json_integer_value(json_object_get(rep, "attempt")),
                           json_is_true(json_object_get(rep, "ok")), jstr(rep, "message"), now, &ch))
        publish(op, ns, &ch);
}

static void drive(struct gs_operator *op, struct node_sm *ns, const json_t *node, int64_t now)
{
    const json_t *labels = json_object_get(json_object_get(node, "metadata"), "labels");
    struct gs_stack_cfg cfg;
    stack_cfg(&op->policy, labels, &cfg);
    struct gs_stack_change ch;
    const char *lname = NULL;
    const struct gs_mig_layout *l = gs_policy_layout_for(&op->policy, labels, &lname);
    char mig[256], text[160] = "?";
    if (l) gs_mig_layout_text(l, text, sizeof text);
    snprintf(mig, sizeof mig, "%.60s=%s", lname ? lname : "", text);
    bool mig_changed = ns->mig[0] && strcmp(ns->mig, mig);
    snprintf(ns->mig, sizeof ns->mig, "%s", mig);
    if (ns->sm.generation != op->generation) {
        if (gs_stack_sm_redrive(&ns->sm, &cfg, op->generation, now, NULL, &ch)) publish(op, ns, &ch);
        op->st.redrives++;
    } else if (cfg.enabled != ns->sm.cfg.enabled) {
        /* A deploy label changed on this node: validate it again under the new set. */
        if (gs_stack_sm_redrive(&ns->sm, &cfg, op->generation, now, "the node's components changed", &ch))
            publish(op, ns, &ch);
    } else if (mig_changed && (cfg.enabled & GS_STEP_BIT(GS_STEP_MIG))) {
        char why[200];
        snprintf(why, sizeof why, "MIG layout changed to %.60s", lname ? lname : "?");
        if (gs_stack_sm_redrive(&ns->sm, &cfg, op->generation, now, why, &ch)) publish(op, ns, &ch);
    }
    const json_t *ready = condition(node, "Ready");
    bool up = ready && !strcmp(jstr(ready, "status") ?: "", "True");
    if (gs_stack_sm_node(&ns->sm, up, now, &ch)) publish(op, ns, &ch);
    take_answer(op, ns, node, now);
    if (gs_stack_sm_tick(&ns->sm, now, &ch)) publish(op, ns, &ch);
    gs_stack_sm_request(&ns->sm, now);
}

static void write_node(struct gs_operator *op, const char *key, const json_t *node, struct node_sm *ns)
{
    struct want w = {op, ns != NULL, ns ? &ns->sm : NULL, NULL, ns ? saved_json(op, ns) : NULL};
    if (ns && ns->sm.step != GS_STEP_NOT_READY)
        w.request = request_json(op, &ns->sm, json_object_get(json_object_get(node, "metadata"), "labels"));
    json_t *out = NULL;
    int64_t rv0 = gs_store_obj_rv(node), rv = 0;
    /* Nothing to change in the copy just listed: no write (and no store
     * transaction), as the read-modify-write would find; a change since
     * the list is seen by the next pass. */
    if (apply_want((json_t *)node, &out, &w) == GS_STORE_UNCHANGED) {
        json_decref(w.request);
        json_decref(w.saved);
        return;
    }
    json_decref(out);
    out = NULL;
    if (gs_source_mutate(op->source, key, NULL, apply_want, &w, &out, &rv) == 0 && rv != rv0) op->st.writes++;
    json_decref(out);
    json_decref(w.request);
    json_decref(w.saved);
}

/*--- Pass ---*/

struct node_list {
    json_t *all; /* key -> node */
};

static int collect(const char *key, json_t *obj, void *arg)
{
    json_object_set(((struct node_list *)arg)->all, key, obj);
    return 0;
}

static void sync_policy(struct gs_operator *op)
{
    struct pick p = {NULL, NULL, json_object()};
    int64_t rv;
    gs_source_list(op->source, "clusterpolicies.nvidia.com/", pick_policy, &p, &rv);
    gs_source_list(op->source, GS_GPUCLUSTER_PREFIX, pick_policy, &p, &rv); /* the DRA model, one or the other */
    const char *key;
    json_t *obj;
    bool had = op->have_policy;
    op->have_policy = false;
    json_object_foreach(p.all, key, obj) {
        if (obj != p.best) {
            char msg[300];
            snprintf(msg, sizeof msg, "another %s (%s) is in force; only one is kept", jstr(p.best, "kind") ?: "policy",
                     jstr(json_object_get(p.best, "metadata"), "name") ?: "?");
            write_policy_status(op, key, "ignored", msg);
            continue;
        }
        struct gs_diags d = {0};
        struct gs_policy pol;
        bool dra = !strncmp(key, GS_GPUCLUSTER_PREFIX, strlen(GS_GPUCLUSTER_PREFIX));
        /* The kind is part of what is driven: the same spec under the other model re-drives every node. */
        json_t *what = json_pack("{s:s, s:O}", "kind", dra ? "GPUCluster" : "ClusterPolicy", "spec",
                                 json_object_get(obj, "spec") ?: json_object());
        char *spec = json_dumps(what, JSON_SORT_KEYS | JSON_COMPACT);
        json_decref(what);
        if (dra ? gs_gpucluster_parse(obj, &pol, &d) : gs_policy_parse(obj, &pol, &d)) {
            char msg[400];
            snprintf(msg, sizeof msg, "invalid: %s: %s%s", d.n ? d.v[0].path : "", d.n ? d.v[0].msg : "",
                     had ? "; the previous policy stays in force" : "");
            write_policy_status(op, key, "notReady", msg);
            op->have_policy = had;
        } else {
            if (!op->spec_text || !spec || strcmp(op->spec_text, spec)) {
                char hash[20];
                hash_text(spec, hash, sizeof hash);
                adopt_generation(op, obj, hash);
                free(op->spec_text);
                op->spec_text = spec;
                spec = NULL;
                snprintf(op->spec_hash, sizeof op->spec_hash, "%s", hash);
                char gen[24];
                snprintf(gen, sizeof gen, "%lld", (long long)op->generation);
                gs_log(GS_LOG_INFO, "operator: cluster policy in force", "name", pol.name, "generation", gen, NULL);
            }
            /* Saved before any node is driven under it, so a restart never
             * sees nodes ahead of their policy. */
            json_t *pout = NULL;
            gs_source_mutate(op->source, key, "status", set_policy_generation, op, &pout, NULL);
            json_decref(pout);
            op->policy = pol;
            op->have_policy = true;
        }
        free(spec);
        gs_diags_free(&d);
    }
    if (!p.best && op->spec_text) {
        free(op->spec_text);
        op->spec_text = NULL;
    }
    json_decref(p.all);
}

static void policy_status(struct gs_operator *op, int gpu_nodes, int ready)
{
    if (!op->have_policy || !op->policy.name[0]) return;
    char key[300], msg[200];
    snprintf(key, sizeof key, "%s%s", op->policy.dra ? GS_GPUCLUSTER_PREFIX : "clusterpolicies.nvidia.com/",
             op->policy.name);
    snprintf(msg, sizeof msg, "%d of %d GPU nodes ready", ready, gpu_nodes);
    write_policy_status(op, key, gpu_nodes == ready ? "ready" : "notReady", msg);
}

/* Without a policy a pass only clears what an earlier policy left on the
 * nodes, so it has nothing new to do while no node changed since the last
 * such pass: the change stream tells, instead of listing every node every
 * period (at 50,000 nodes a list took longer than the period, a core's
 * worth of CPU). Falling behind the stream, or any error, lists again. */
static bool idle_and_unchanged(struct gs_operator *op)
{
    if (op->have_policy || !op->idle_listed || op->n) return false;
    int64_t before;
    do {
        before = op->nodes_rv;
        struct gs_store_event *evs = NULL;
        size_t n = 0;
        int err = gs_source_events(op->source, &op->nodes_rv, "nodes/", 0, NULL, &evs, &n);
        gs_store_events_free(evs, n);
        if (err || n) return false;
    } while (op->nodes_rv != before);
    return true;
}

void gs_operator_sync(struct gs_operator *op)
{
    pthread_mutex_lock(&op->mu);
    int64_t now = gs_clock_now(op->clock);
    sync_policy(op);
    if (idle_and_unchanged(op)) {
        op->st.passes++;
        pthread_mutex_unlock(&op->mu);
        return;
    }
    struct node_list nl = {json_object()};
    int64_t rv = 0;
    bool listed = gs_source_list(op->source, "nodes/", collect, &nl, &rv) == 0;
    op->idle_listed = listed && !op->have_policy;
    op->nodes_rv = rv;
    const char *key;
    json_t *node;
    int gpu_nodes = 0, ready = 0;
    json_object_foreach(nl.all, key, node) {
        const char *name = jstr(json_object_get(node, "metadata"), "name");
        if (!name) continue;
        struct node_sm *ns = NULL;
        if (op->have_policy && gpu_node(node) && (ns = node_find(op, name, node, now))) {
            drive(op, ns, node, now);
            gpu_nodes++;
            ready += ns->sm.step == GS_STEP_READY;
        }
        write_node(op, key, node, ns);
        flush_events(op, node);
    }
    /* Forget nodes that are gone (or no longer governed). */
    for (size_t i = 0; i < op->n;) {
        char nkey[300];
        snprintf(nkey, sizeof nkey, "nodes/%s", op->nodes[i].name);
        if (op->have_policy && json_object_get(nl.all, nkey) && gpu_node(json_object_get(nl.all, nkey))) i++;
        else op->nodes[i] = op->nodes[--op->n];
    }
    json_decref(nl.all);
    op->st.passes++;
    op->st.nodes = gpu_nodes;
    op->st.ready = ready;
    op->st.policy = op->have_policy;
    policy_status(op, gpu_nodes, ready);
    pthread_mutex_unlock(&op->mu);
}

/*--- Lifecycle ---*/

static void *run(void *arg)
{
    struct gs_operator *op = arg;
    while (!atomic_load(&op->stop)) {
        gs_operator_sync(op);
        for (int64_t t = 0; t < op->period_ms && !atomic_load(&op->stop); t += 50) usleep(50000);
    }
    return NULL;
}

/* The Event sink of a private recorder over a source that has no store of
 * its own (a Kubernetes one): create, or replace the Event's fields. */
static int event_replace(json_t *cur, json_t **out, void *arg)
{
    if (!cur) return GS_ENOENT;
    json_t *n = json_deep_copy(arg);
    if (!n) return GS_ENOMEM;
    json_object_set(n, "metadata", json_object_get(cur, "metadata"));
    *out = n;
    return 0;
}

static int source_event_write(void *ctx, const char *ns, const char *name, const json_t *ev, bool update)
{
    struct gs_source *src = ctx;
    char key[1024];
    if (snprintf(key, sizeof key, "events/%s/%s", ns, name) >= (int)sizeof key) return GS_EINVAL;
    if (update) return gs_source_mutate(src, key, NULL, event_replace, (void *)ev, NULL, NULL);
    json_t *doc = json_deep_copy(ev);
    int err = doc ? gs_source_create(src, key, doc, NULL) : GS_ENOMEM;
    json_decref(doc);
    return err;
}

int gs_operator_new(const struct gs_operator_opts *o, struct gs_operator **out)
{
    struct gs_operator *op = calloc(1, sizeof *op);
    if (!op) return GS_ENOMEM;
    op->source = o->source;
    gs_clock_init_real(&op->real);
    op->clock = o->clock ? o->clock : &op->real;
    op->realtime.now = realtime_now;
    op->wall = o->wall ? o->wall : &op->realtime;
    op->wall_offset = gs_clock_now(op->wall) - gs_clock_now(op->clock);
    op->period_ms = o->period_ms > 0 ? o->period_ms : 200;
    /* The private recorder writes through the source too (the local one's store directly, as the server's). */
    struct gs_recorder_opts ro = {.store = gs_source_local_store(op->source), .clock = op->wall, .sync = true};
    if (!ro.store) ro.sink = (struct gs_event_sink){source_event_write, op->source};
    if (!o->events && gs_recorder_new(&ro, &op->own_events)) {
        free(op);
        return GS_ENOMEM;
    }
    op->ev = (struct gs_event_source){o->events ? o->events : op->own_events, "gpusched-operator", NULL,
                                      GS_EVENT_DISTINCT};
    pthread_mutex_init(&op->mu, NULL);
    *out = op;
    return 0;
}

int gs_operator_start(const struct gs_operator_opts *o, struct gs_operator **out)
{
    struct gs_operator *op;
    int err = gs_operator_new(o, &op);
    if (err) return err;
    if (pthread_create(&op->th, NULL, run, op)) {
        gs_operator_stop(op);
        return GS_ENOMEM;
    }
    op->started = true;
    *out = op;
    return 0;
}

void gs_operator_stop(struct gs_operator *op)
{
    if (!op) return;
    atomic_store(&op->stop, true);
    if (op->started) pthread_join(op->th, NULL);
    gs_recorder_free(op->own_events);
    pthread_mutex_destroy(&op->mu);
    free(op->spec_text);
    free(op->nodes);
    free(op);
}

void gs_operator_stats(struct gs_operator *op, struct gs_operator_stats *out)
{
    pthread_mutex_lock(&op->mu);
    *out = op->st;
    pthread_mutex_unlock(&op->mu);
}

int gs_operator_metrics(struct gs_operator *op, char **buf, size_t *len, size_t *cap)
{
    struct gs_mbuf b = {*buf, *len, *cap, 0};
    pthread_mutex_lock(&op->mu);
    int64_t now = gs_clock_now(op->clock);
    gs_mbuf_help(&b, "gpusched_gpu_stack_state", "gauge", "1 for the step each GPU node's stack is at.");
    for (size_t i = 0; i < op->n; i++)
        for (int s = 0; s < GS_STEP_COUNT; s++)
            gs_mbuf_printf(&b, "gpusched_gpu_stack_state{node=\"%s\",state=\"%s\"} %d\n", op->nodes[i].name,
                           gs_step_name(s), op->nodes[i].sm.step == (enum gs_step)s);
    gs_mbuf_help(&b, "gpusched_gpu_stack_state_seconds", "gauge", "Seconds the node has been at its current step.");
    for (size_t i = 0; i < op->n; i++)
        gs_mbuf_printf(&b, "gpusched_gpu_stack_state_seconds{node=\"%s\",state=\"%s\"} %.3f\n", op->nodes[i].name,
                       gs_step_name(op->nodes[i].sm.step), (double)(now - op->nodes[i].sm.entered_ns) / 1e9);
    gs_mbuf_help(&b, "gpusched_gpu_stack_validation_failures_total", "counter",
                 "Failed GPU stack validations per node since the server started.");
    for (size_t i = 0; i < op->n; i++)
        gs_mbuf_printf(&b, "gpusched_gpu_stack_validation_failures_total{node=\"%s\"} %llu\n", op->nodes[i].name,
                       (unsigned long long)op->nodes[i].sm.total_failures);
    gs_mbuf_help(&b, "gpusched_gpu_stack_transitions_total", "counter", "GPU stack step changes, all nodes.");
    gs_mbuf_printf(&b, "gpusched_gpu_stack_transitions_total %llu\n", (unsigned long long)op->st.transitions);
    gs_mbuf_help(&b, "gpusched_gpu_stack_nodes", "gauge", "GPU nodes governed, and how many are ready.");
    gs_mbuf_printf(&b, "gpusched_gpu_stack_nodes{ready=\"true\"} %d\ngpusched_gpu_stack_nodes{ready=\"false\"} %d\n",
                   op->st.ready, op->st.nodes - op->st.ready);
    pthread_mutex_unlock(&op->mu);
    *buf = b.buf, *len = b.len, *cap = b.cap;
    return b.err;
}

/*--- Scheduler gate ---*/

bool gs_stack_gate_node(const json_t *doc, struct gs_node *node)
{
    const json_t *c = condition(doc, GS_COND_GPU_STACK);
    if (!c || !strcmp(jstr(c, "status") ?: "", "True")) return false;
    for (size_t i = 0; i < node->ngpus; i++) node->gpus[i].healthy = false;
    for (size_t i = 0; i < node->allocatable.n; i++)
        if (!strncmp(node->allocatable.v[i].name, "nvidia.com/mig-", 15) ||
            !strcmp(node->allocatable.v[i].name, "nvidia.com/gpu"))
            node->allocatable.v[i].milli = 0;
    return true;
}
