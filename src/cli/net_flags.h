/*
 * net_flags.h - the hardening flags `gpusched server` and `gpusched up`
 * share (connection limits, idle timeout, failed-auth rate, agent token
 * file), and the pods' default uid/gid of `up` and `agent`. Outside the
 * library, like every cmd_* file.
 */
#ifndef GS_CLI_NET_FLAGS_H
#define GS_CLI_NET_FLAGS_H

#include "control/server.h"

#include <getopt.h>
#include <stddef.h>

extern const char gs__net_usage[];
/* Appends the flags to a NULL-terminated option table of capacity cap. */
void gs__net_options_append(struct option *opts, size_t cap);
/* Applies one of them: 0, 2 after printing "gpusched CMD: --flag "v": why",
 * or -1 when code is not one of them. */
int gs__net_option(struct gs_server_opts *o, int code, const char *v, const char *cmd);

/* --pod-uid / --pod-gid value: 1..2147483647 (0 refused: run a pod as root
 * with its securityContext.runAsUser). 0 or 2 after printing why. */
int gs__pod_id_flag(const char *cmd, const char *flag, const char *v, long long *out);

#endif
