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

static const char *const names[GS_STEP_COUNT] = {"not-ready", "driver", "toolkit",    "device-plugin",
                                                 "dra-plugin", "mig",   "monitoring", "ready"};
static const char *const reasons[GS_STEP_COUNT] = {"NotReady",       "DriverValidating",     "ToolkitValidating",
                                                   "DevicePluginValidating", "DRAPluginValidating", "MIGConfiguring",
                                                   "MonitoringValidating", "Ready"};
_Static_assert(sizeof reasons / sizeof reasons[0] == GS_STEP_COUNT, "step reasons");
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
    m->check = GS_STEP_NOT_READY;
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

enum gs_step gs_stack_sm_asking(const struct gs_stack_sm *m)
{
    return m->step == GS_STEP_READY ? m->check : m->step;
}

/* A background check after a restore failed: the node leaves ready for the
 * step that failed, as if it had never passed it. */
static void check_failed(struct gs_stack_sm *m, int64_t now, const char *msg, struct gs_stack_change *ch)
{
    char why[256];
    snprintf(why, sizeof why, "checked again after a server restart: %.200s", msg);
    enter(m, m->check, now, why, NULL);
    failed(m, now, why, NULL);
    fill(ch, GS_STEP_READY, m->step, false, m->attempt, m->message);
}

bool gs_stack_sm_tick(struct gs_stack_sm *m, int64_t now, struct gs_stack_change *ch)
{
    if (!m->waiting || m->cfg.answer_timeout_ns <= 0 || now - m->requested_ns < m->cfg.answer_timeout_ns) return false;
    char msg[128];
    snprintf(msg, sizeof msg, "no answer from the node's agent within %.3gs", (double)m->cfg.answer_timeout_ns / 1e9);
    if (m->step == GS_STEP_READY) check_failed(m, now, msg, ch);
    else failed(m, now, msg, ch);
    return true;
}

bool gs_stack_sm_request(struct gs_stack_sm *m, int64_t now)
{
    enum gs_step s = gs_stack_sm_asking(m);
    if (s == GS_STEP_NOT_READY || s == GS_STEP_READY || m->waiting || now < m->next_try_ns) return false;
    m->attempt++;
    m->waiting = true;
    m->requested_ns = now;
    return true;
}

bool gs_stack_sm_answer(struct gs_stack_sm *m, enum gs_step step, int attempt, bool ok, const char *message,
                        int64_t now, struct gs_stack_change *ch)
{
    if (!m->waiting || step != gs_stack_sm_asking(m) || attempt != m->attempt) return false;
    if (m->step == GS_STEP_READY) { /* a background check */
        if (!ok) {
            check_failed(m, now, message && message[0] ? message : "no reason given", ch);
            return true;
        }
        m->waiting = false;
        m->check = next_step(m, m->check);
        if (m->check == GS_STEP_READY) {
            m->check = GS_STEP_NOT_READY;
            snprintf(m->message, sizeof m->message,
                     "every enabled GPU stack component validated (checked again after a server restart)");
        }
        return false;
    }
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

void gs_stack_sm_save(const struct gs_stack_sm *m, struct gs_stack_saved *out)
{
    *out = (struct gs_stack_saved){m->generation, m->cfg.enabled, m->step, m->attempt,
                                   m->waiting && gs_stack_sm_asking(m) != GS_STEP_NOT_READY &&
                                       gs_stack_sm_asking(m) != GS_STEP_READY,
                                   m->failures, m->entered_ns, m->next_try_ns};
}

void gs_stack_sm_restore(struct gs_stack_sm *m, const struct gs_stack_cfg *cfg, const struct gs_stack_saved *s,
                         int64_t now)
{
    gs_stack_sm_init(m, cfg, s->generation, now);
    m->cfg.enabled = s->enabled;
    m->step = s->step < GS_STEP_COUNT ? s->step : GS_STEP_NOT_READY;
    m->attempt = s->attempt > 0 ? s->attempt : 0;
    m->failures = s->failures > 0 ? s->failures : 0;
    m->entered_ns = s->entered_ns < now ? s->entered_ns : now;
    m->next_try_ns = s->next_try_ns;
    if (m->step == GS_STEP_READY) {
        /* Checked once more in the background; its state while the server
         * was down is not known, only that nothing said it broke. */
        m->check = next_step(m, GS_STEP_NOT_READY);
        if (m->check == GS_STEP_READY) m->check = GS_STEP_NOT_READY;
        m->next_try_ns = now;
        snprintf(m->message, sizeof m->message, "every enabled GPU stack component validated%s",
                 m->check != GS_STEP_NOT_READY ? "; checking again after a server restart" : "");
    } else if (m->step != GS_STEP_NOT_READY) {
        m->waiting = s->waiting && m->attempt > 0;
        m->requested_ns = now;
        snprintf(m->message, sizeof m->message, "validating %s (resumed after a server restart)",
                 gs_step_name(m->step));
    }
}
