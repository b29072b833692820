/*
 * cmd_server_lc.h - the node lifecycle's server flags, shared by `gpusched server`
 * (cmd_server.c) and `gpusched up` (cmd_up.c):
 *   --default-not-ready-toleration-seconds N    (kube-apiserver's flags; default 300)
 *   --default-unreachable-toleration-seconds N
 *   --node-lost-timeout DUR                      (default 5m)
 * See src/control/admit_defaults.h and nodelifecycle.h for what they mean.
 */
#ifndef GS_CLI_CMD_SERVER_LC_H
#define GS_CLI_CMD_SERVER_LC_H

#include "control/admit_defaults.h"
#include "control/server.h"

#include <getopt.h>
#include <stddef.h>

struct gs__lc_flags {
    struct gs_admit_defaults def; /* what o->admit_defaults points to */
};

extern const char gs__lc_usage[];
/* Defaults into f; o->admit_defaults points at f->def (f must outlive o's use). */
void gs__lc_flags_init(struct gs__lc_flags *f, struct gs_server_opts *o);
/* Appends the flags to the NULL-terminated options (of capacity cap). */
void gs__lc_options_append(struct option *opts, size_t cap);
/* -1: code is not one of these flags; 0: taken; 2: bad value (said on stderr, naming cmd and the flag). */
int gs__lc_option(struct gs__lc_flags *f, struct gs_server_opts *o, int code, const char *value, const char *cmd);

#endif
