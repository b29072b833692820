/*
 * signals.c - blocking the stop signals for the long-running commands; see signals.h.
 */
#include "cli/signals.h"

#include <pthread.h>

void gs_cli_block_stop_signals(sigset_t *set, sigset_t *old)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, set, old);
    signal(SIGPIPE, SIG_IGN);
}
