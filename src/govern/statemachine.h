/*
 * statemachine.h - the per-node GPU stack state machine (what the GPU
 * Operator's state manager and validator do for one node).
 *
 *   not-ready -> driver -> toolkit -> device-plugin -> mig -> monitoring -> ready
 *
 * (under a GPUCluster: ... toolkit -> dra-plugin -> monitoring -> ready; the
 * steps are one list and each policy enables its own)
 *
 * A node leaves not-ready once its agent posts Ready. At each later step the
 * operator asks the node's agent to validate that step (a request carries
 * the step and an attempt number); the agent answers ok or not with a
 * message. Ok moves to the next enabled step (disabled components are
 * skipped); not ok keeps the node at the step, says why, and asks again after
 * an exponential backoff (initial, doubled per failure, capped). A request
 * the agent leaves unanswered past the answer timeout counts as a failure
 * whose message says so, so no node waits silently. A new policy (another
 * generation) or a lost agent sends the node back to not-ready.
 *
 * Request numbers grow for the machine's whole life (not per step), so an
 * answer to a request made before a re-drive can never be taken for one
 * made after it.
 *
 * A machine can be saved and restored (gs_stack_sm_save/_restore) so a
 * server restart does not send every node back through the walk: the
 * operator keeps the saved form on the Node. A machine restored at ready
 * stays ready and checks each enabled step once more in the background
 * (m->check); only a failed check takes it out of ready.
 *
 * Pure logic on caller-supplied times (nanoseconds from a struct gs_clock):
 * no I/O, no threads, no allocation. Each change of step, and each failure,
 * fills a struct gs_stack_change for the caller to publish (event, log,
 * metrics).
 */
#ifndef GS_GOVERN_STATEMACHINE_H
#define GS_GOVERN_STATEMACHINE_H

#include <stdbool.h>
#include <stdint.h>

enum gs_step {
    GS_STEP_NOT_READY,
    GS_STEP_DRIVER,
    GS_STEP_TOOLKIT,
    GS_STEP_DEVICE_PLUGIN,
    GS_STEP_DRA_PLUGIN,        /* a GPUCluster's DRA kubelet plugin, in place of the device plugin */
    GS_STEP_MIG,
    GS_STEP_MONITORING,
    GS_STEP_READY,
    GS_STEP_COUNT
};

/* Label value: "not-ready", "driver", "toolkit", "device-plugin", "dra-plugin", "mig", "monitoring", "ready". */
const char *gs_step_name(enum gs_step s);
/* Condition reason: "NotReady", "DriverValidating", "ToolkitValidating",
 * "DevicePluginValidating", "DRAPluginValidating", "MIGConfiguring", "MonitoringValidating", "Ready". */
const char *gs_step_reason(enum gs_step s);
/* From a label value; -1 when unknown. */
int gs_step_parse(const char *name);

#define GS_STEP_BIT(s) (1u << (s))

struct gs_stack_cfg {
    uint32_t enabled;          /* GS_STEP_BIT of each validation step that runs */
    int64_t backoff_initial_ns;
    int64_t backoff_max_ns;
    int64_t answer_timeout_ns; /* a request unanswered this long is a failure */
};

struct gs_stack_sm {
    struct gs_stack_cfg cfg;
    int64_t generation;        /* of the policy being driven */
    enum gs_step step;
    int attempt;               /* number of the latest request; never reused, so a stale answer cannot match */
    bool waiting;              /* a request is out */
    int failures;              /* consecutive failures at this step */
    int64_t entered_ns;        /* when the node reached this step */
    int64_t requested_ns;      /* when the current request went out */
    int64_t next_try_ns;       /* no request before this (backoff) */
    uint64_t total_failures;   /* over the machine's life */
    uint64_t transitions;
    enum gs_step check;        /* at ready: the step being checked again after a restore; not-ready: none */
    char message[256];         /* why the node is where it is */
};

/* What survives a restart. Times are on the machine's clock; the caller
 * converts them to and from wall time. */
struct gs_stack_saved {
    int64_t generation;
    uint32_t enabled;          /* cfg.enabled when saved */
    enum gs_step step;
    int attempt;
    bool waiting;
    int failures;
    int64_t entered_ns, next_try_ns;
};

struct gs_stack_change {
    enum gs_step from, to;
    bool failure;              /* a failed validation; from == to */
    int attempt;
    char message[256];
};

void gs_stack_sm_init(struct gs_stack_sm *m, const struct gs_stack_cfg *cfg, int64_t generation, int64_t now);
/* A new policy (or a node whose components or MIG layout changed): back to
 * not-ready under cfg. why (NULL: "cluster policy changed") becomes the
 * message. Fills ch unless the machine already was at not-ready; returns
 * whether it moved. */
bool gs_stack_sm_redrive(struct gs_stack_sm *m, const struct gs_stack_cfg *cfg, int64_t generation, int64_t now,
                         const char *why, struct gs_stack_change *ch);
/* The node's agent is (not) posting Ready. Going down returns to not-ready;
 * coming up moves to the first enabled step (or ready when none is). Returns
 * whether the step changed (ch filled). */
bool gs_stack_sm_node(struct gs_stack_sm *m, bool agent_up, int64_t now, struct gs_stack_change *ch);
/* Time passes: an unanswered request past the timeout becomes a failure
 * (returns true, ch filled). */
bool gs_stack_sm_tick(struct gs_stack_sm *m, int64_t now, struct gs_stack_change *ch);
/* Whether a validation request for m->step should go out now; if so the
 * attempt number is bumped and the request is marked out. */
bool gs_stack_sm_request(struct gs_stack_sm *m, int64_t now);
/* The agent's answer for (step, attempt). Answers for another step or
 * attempt are stale and ignored (false). Ok advances; not ok records a
 * failure and schedules the retry. Returns true when ch was filled. */
bool gs_stack_sm_answer(struct gs_stack_sm *m, enum gs_step step, int attempt, bool ok, const char *message,
                        int64_t now, struct gs_stack_change *ch);
/* The step the current (or next) request is for: m->step, or m->check
 * while a restored ready machine checks its steps again. */
enum gs_step gs_stack_sm_asking(const struct gs_stack_sm *m);
void gs_stack_sm_save(const struct gs_stack_sm *m, struct gs_stack_saved *out);
/* Puts m where s says, under cfg's timing (its enabled set is s->enabled,
 * so a caller comparing it with the node's current set re-drives on a
 * change). Nothing is published: the node did not move. A request that was
 * out stays out with a fresh answer window (the agent could not answer
 * while the server was down); a backoff deadline stays; at ready the
 * background check starts with the first enabled step. */
void gs_stack_sm_restore(struct gs_stack_sm *m, const struct gs_stack_cfg *cfg, const struct gs_stack_saved *s,
                         int64_t now);
/* The backoff after the n-th consecutive failure (n >= 1). */
int64_t gs_stack_backoff(const struct gs_stack_cfg *cfg, int n);

#endif
