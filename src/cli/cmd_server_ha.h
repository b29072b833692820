/*
 * cmd_server_ha.h - the replica flags of `gpusched server` (control/replica.h):
 *   --replica-id ID                       (default HOSTNAME_PID)
 *   --leader-elect-lease-duration DUR     (Go durations; default 15s)
 *   --leader-elect-renew-deadline DUR     (default 10s)
 *   --leader-elect-retry-period DUR       (default 2s)
 * They matter only where the replicas elect a leader (a shared store:
 * --store etcd). Checked here with the flag's name, the value and why.
 */
#ifndef GS_CLI_CMD_SERVER_HA_H
#define GS_CLI_CMD_SERVER_HA_H

#include "control/server.h"

#include <getopt.h>
#include <stddef.h>

extern const char gs__ha_usage[];
/* Appends the flags to the NULL-terminated options (of capacity cap). */
void gs__ha_options_append(struct option *opts, size_t cap);
/* -1: code is not one of these flags; 0: taken; 2: bad value (said on stderr, naming cmd and the flag). */
int gs__ha_option(struct gs_server_opts *o, int code, const char *value, const char *cmd);
/* The checks that need every flag (renew deadline against lease duration
 * and retry period): 0 or 2 (said on stderr). */
int gs__ha_check(const struct gs_server_opts *o, const char *cmd);

#endif
