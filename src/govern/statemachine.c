/*
 * statemachine.c - the per-node GPU stack state machine; see statemachine.h.
 *
 * The machine only remembers the last request; answers carry (step, attempt)
 * so a late answer to an earlier request, or to a step the node has since
 * left (a re-drive), can never move it.
 */
#include "govern/statemachine.h"

#include <stdio.h>
#include <string.h>

static const char *const names[GS_STEP_COUNT] = {"not-ready", "driver", "toolkit", "device-plugin",
                                                 "mig",       "monitoring", "ready"};
static const char *const reasons[GS_STEP_COUNT] = {"NotReady",       "DriverValidating",     "ToolkitValidating",
                                                   "DevicePluginValidating", "MIGConfiguring", "MonitoringValidating",
                                                   "Ready"};
_Static_assert(sizeof names / sizeof names[0] == GS_STEP_COUNT, "step names");

const char *gs_step_name(enum gs_step s) { return s < GS_STEP_COUNT ? names[s] : "unknown"; }
const char *gs_step_reason(enum gs_step s) { return s < GS_STEP_COUNT ? reasons[s] : "Unknown"; }

int gs_step_parse(const char *name)
{
    for (int i = 0; name && i < GS_STEP_COUNT; i++)
        if (!strcmp(names[i], name)) return i;
    return -1;
}

int64_t gs_stack_backoff(const struct gs_stack_cfg *cfg, int n)
{
    int64_t d = cfg->backoff_initial_ns > 0 ? cfg->backoff_initial_ns : 1;
    for (int i = 1; i < n && d < cfg->backoff_max_ns; i++) d *= 2;
    return cfg->backoff_max_ns > 0 && d > cfg->backoff_max_ns ? cfg->backoff_max_ns : d;
}

/* The first enabled step after s; ready when none. */
static enum gs_step next_step(const struct gs_stack_sm *m, enum gs_step s)
{
    for (int i = (int)s + 1; i < GS_STEP_READY; i++)
        if (m->cfg.enabled & GS_STEP_BIT(i)) return (enum gs_step)i;
    return GS_STEP_READY;
}

static void fill(struct gs_stack_change *ch, enum gs_step from, enum gs_step to, bool failure, int attempt,
                 const char *msg)
{
    if (!ch) return;
    ch->from = from;
    ch->to = to;
    ch->failure = failure;
    ch->attempt = attempt;
    snprintf(ch->message, sizeof ch->message, "%s", msg);
}

static void enter(struct gs_stack_sm *m, enum gs_step s, int64_t now, const char *why, struct gs_stack_change *ch)
{
    fill(ch, m->step, s, false, m->attempt, why);
    m->step = s;
    m->waiting = false; /* attempt keeps counting: an answer from before the move can never match */
    m->failures = 0;
    m->entered_ns = m->next_try_ns = now;
    m->transitions++;
    snprintf(m->message, sizeof m->message, "%s", why);
}

void gs_stack_sm_init(struct gs_stack_sm *m, const struct gs_stack_cfg *cfg, int64_t generation, int64_t now)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->generation = generation;
    m->step = GS_STEP_NOT_READY;
    m->entered_ns = m->next_try_ns = now;
    snprintf(m->message, sizeof m->message, "waiting for the node's agent to post Ready");
}

bool gs_stack_sm_redrive(struct gs_stack_sm *m, const struct gs_stack_cfg *cfg, int64_t generation, int64_t now,
                         const char *reason, struct gs_stack_change *ch)
{
    m->cfg = *cfg;
    m->generation = generation;
    char why[256];
    if (reason) snprintf(why, sizeof why, "%s: validating the GPU stack again", reason);
    else snprintf(why, sizeof why, "cluster policy changed (generation %lld): validating the GPU stack again",
                  (long long)generation);
    if (m->step == GS_STEP_NOT_READY) {
        m->waiting = false;
        return false;
    }
    enter(m, GS_STEP_NOT_READY, now, why, ch);
    return true;
}

bool gs_stack_sm_node(struct gs_stack_sm *m, bool agent_up, int64_t now, struct gs_stack_change *ch)
{
    if (!agent_up) {
        if (m->step == GS_STEP_NOT_READY) return false;
        enter(m, GS_STEP_NOT_READY, now, "the node's agent is not posting Ready", ch);
        return true;
    }
    if (m->step != GS_STEP_NOT_READY) return false;
    enum gs_step s = next_step(m, GS_STEP_NOT_READY);
    char why[256];
    if (s == GS_STEP_READY) snprintf(why, sizeof why, "every GPU stack component is disabled");
    else snprintf(why, sizeof why, "validating %s", gs_step_name(s));
    enter(m, s, now, why, ch);
    return true;
}

static void failed(struct gs_stack_sm *m, int64_t now, const char *msg, struct gs_stack_change *ch)
{
    m->waiting = false;
    m->failures++;
    m->total_failures++;
    int64_t wait = gs_stack_backoff(&m->cfg, m->failures);
    m->next_try_ns = now + wait;
    snprintf(m->message, sizeof m->message, "%s validation failed (attempt %d, retry in %.3gs): %s",
             gs_step_name(m->step), m->failures, (double)wait / 1e9, msg);
    fill(ch, m->step, m->step, true, m->attempt, m->message);
}

bool gs_stack_sm_tick(struct gs_stack_sm *m, int64_t now, struct gs_stack_change *ch)
{
    if (!m->waiting || m->cfg.answer_timeout_ns <= 0 || now - m->requested_ns < m->cfg.answer_timeout_ns) return false;
    char msg[128];
    snprintf(msg, sizeof msg, "no answer from the node's agent within %.3gs", (double)m->cfg.answer_timeout_ns / 1e9);
    failed(m, now, msg, ch);
    return true;
}

bool gs_stack_sm_request(struct gs_stack_sm *m, int64_t now)
{
    if (m->step == GS_STEP_NOT_READY || m->step == GS_STEP_READY || m->waiting || now < m->next_try_ns) return false;
    m->attempt++;
    m->waiting = true;
    m->requested_ns = now;
    return true;
}

bool gs_stack_sm_answer(struct gs_stack_sm *m, enum gs_step step, int attempt, bool ok, const char *message,
                        int64_t now, struct gs_stack_change *ch)
{
    if (!m->waiting || step != m->step || attempt != m->attempt) return false;
    if (!ok) {
        failed(m, now, message && message[0] ? message : "no reason given", ch);
        return true;
    }
    enum gs_step s = next_step(m, m->step);
    char why[256];
    if (s == GS_STEP_READY) snprintf(why, sizeof why, "every enabled GPU stack component validated");
    else snprintf(why, sizeof why, "%s validated%s%.160s; validating %s", gs_step_name(m->step),
                  message && message[0] ? ": " : "", message ? message : "", gs_step_name(s));
    enter(m, s, now, why, ch);
    return true;
}
