/*
 * signals.h - how the long-running commands (server, agent, up, exporter)
 * wait for SIGINT/SIGTERM.
 *
 * The stop signals are blocked in the main thread before any other thread
 * starts, so every thread inherits the mask and only the main thread's
 * sigwait()/sigtimedwait() ever sees them; the shutdown then runs in order
 * on the main thread rather than in a signal handler.
 */
#ifndef GS_CLI_SIGNALS_H
#define GS_CLI_SIGNALS_H

#include <signal.h>

/* Fills set with SIGINT and SIGTERM and blocks them in the calling thread
 * (old, if not NULL, receives the previous mask). SIGPIPE is ignored so a
 * client that hangs up never kills the process. */
void gs_cli_block_stop_signals(sigset_t *set, sigset_t *old);

#endif
