/*
 * cmd_server_store.h - `gpusched server`'s store flags (cmd_server.c):
 *   --store sqlite|etcd           (default sqlite: the data directory; `up` keeps it)
 *   --etcd-endpoints URL[,URL...] http(s)://host:port of etcd members
 *   --etcd-cafile / --etcd-certfile / --etcd-keyfile  TLS to etcd
 *   --etcd-prefix /registry       where the objects live in etcd
 *   --etcd-compaction-interval DUR (default 5m; 0: never)
 * See docs/CONTROL_PLANE.md "Store backends: SQLite and etcd".
 */
#ifndef GS_CLI_CMD_SERVER_STORE_H
#define GS_CLI_CMD_SERVER_STORE_H

#include "control/server.h"

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

struct gs__store_flags {
    bool kind_set, etcd_flag; /* --store given; any --etcd-* given */
    const char *etcd_flag_name;
    char **endpoints;         /* parsed --etcd-endpoints (what o->etcd.endpoints points to) */
    size_t n_endpoints;
};

extern const char gs__store_usage[];
/* Appends the flags to the NULL-terminated options (of capacity cap). */
void gs__store_options_append(struct option *opts, size_t cap);
/* -1: code is not one of these flags; 0: taken; 2: bad value (said on stderr, naming cmd and the flag). */
int gs__store_option(struct gs__store_flags *f, struct gs_server_opts *o, int code, const char *value,
                     const char *cmd);
/* After every flag: the combination is consistent (0) or 2 with the problem on stderr. */
int gs__store_flags_check(struct gs__store_flags *f, const struct gs_server_opts *o, const char *cmd);
void gs__store_flags_free(struct gs__store_flags *f);

#endif
