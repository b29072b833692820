/*
 * cmd_server_store.c - the store flags of `gpusched server`; see
 * cmd_server_store.h. Every value is checked here and refused with the
 * flag's name, the value and why: an etcd flag never falls back to SQLite.
 */
#include "cli/cmd_server_store.h"

#include "control/etcd.h"
#include "discovery/discovery.h" /* gs_duration_parse */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { S_STORE = 0x2200, S_ENDPOINTS, S_CA, S_CERT, S_KEY, S_PREFIX, S_COMPACT }; /* apart from 0x2000/0x2100 */

static const struct option store_options[] = {
    {"store", required_argument, 0, S_STORE},
    {"etcd-endpoints", required_argument, 0, S_ENDPOINTS},
    {"etcd-cafile", required_argument, 0, S_CA},
    {"etcd-certfile", required_argument, 0, S_CERT},
    {"etcd-keyfile", required_argument, 0, S_KEY},
    {"etcd-prefix", required_argument, 0, S_PREFIX},
    {"etcd-compaction-interval", required_argument, 0, S_COMPACT},
    {0, 0, 0, 0},
};

const char gs__store_usage[] =
    "\nstore (see docs/CONTROL_PLANE.md, \"Store backends: SQLite and etcd\"):\n"
    "  --store sqlite|etcd   where objects live: SQLite in the data directory (default) or etcd\n"
    "  --etcd-endpoints URL[,URL...]  etcd members, http://HOST:PORT or https://HOST:PORT\n"
    "  --etcd-cafile FILE    CA bundle (PEM) that signed the etcd members' certificates\n"
    "  --etcd-certfile FILE --etcd-keyfile FILE  client certificate and key for etcd (mutual TLS)\n"
    "  --etcd-prefix PATH    key prefix in etcd (default /registry: /registry/pods/NS/NAME)\n"
    "  --etcd-compaction-interval DUR  compact etcd's history this often, to the revision seen\n"
    "                        one interval earlier (default 5m; 0: never)\n";

void gs__store_options_append(struct option *opts, size_t cap)
{
    size_t n = 0;
    while (n < cap && opts[n].name) n++;
    for (const struct option *a = store_options; a->name && n + 1 < cap; a++) opts[n++] = *a;
    if (n < cap) opts[n] = (struct option){0};
}

static int readable(const char *cmd, const char *flag, const char *path)
{
    if (!*path || access(path, R_OK)) {
        fprintf(stderr, "%s: --%s \"%s\": cannot read it: %s\n", cmd, flag, path, *path ? strerror(errno) : "empty");
        return 2;
    }
    return 0;
}

int gs__store_option(struct gs__store_flags *f, struct gs_server_opts *o, int code, const char *value,
                     const char *cmd)
{
    const struct option *opt = store_options;
    while (opt->name && opt->val != code) opt++;
    if (!opt->name) return -1;
    if (code != S_STORE) {
        f->etcd_flag = true;
        f->etcd_flag_name = opt->name;
    }
    char why[512];
    int64_t ns = 0;
    switch (code) {
    case S_STORE:
        if (strcmp(value, "sqlite") && strcmp(value, "etcd")) {
            fprintf(stderr, "%s: --store \"%s\": want sqlite or etcd\n", cmd, value);
            return 2;
        }
        f->kind_set = true;
        o->store_kind = strcmp(value, "etcd") ? GS_STORE_SQLITE : GS_STORE_ETCD;
        return 0;
    case S_ENDPOINTS:
        gs_etcd_endpoints_free(f->endpoints, f->n_endpoints);
        f->endpoints = NULL;
        f->n_endpoints = 0;
        if (gs_etcd_endpoints_parse(value, &f->endpoints, &f->n_endpoints, why, sizeof why)) {
            fprintf(stderr, "%s: --etcd-endpoints \"%s\": %s\n", cmd, value, why);
            return 2;
        }
        o->etcd.endpoints = (const char *const *)f->endpoints;
        o->etcd.n_endpoints = f->n_endpoints;
        return 0;
    case S_CA: o->etcd.cafile = value; return readable(cmd, opt->name, value);
    case S_CERT: o->etcd.certfile = value; return readable(cmd, opt->name, value);
    case S_KEY: o->etcd.keyfile = value; return readable(cmd, opt->name, value);
    case S_PREFIX:
        if (value[0] != '/' || !value[1] || value[strlen(value) - 1] == '/' || strstr(value, "//") ||
            strpbrk(value, " \t\n")) {
            fprintf(stderr, "%s: --etcd-prefix \"%s\": want a path such as /registry (a leading '/', no trailing "
                    "'/', no empty segment, no spaces)\n", cmd, value);
            return 2;
        }
        o->etcd.prefix = value;
        return 0;
    case S_COMPACT:
        if (gs_duration_parse(value, &ns) || ns < 0) {
            fprintf(stderr, "%s: --etcd-compaction-interval \"%s\": want a duration such as 5m or 30s, or 0 for "
                    "never\n", cmd, value);
            return 2;
        }
        if (ns > 0 && ns < 1000000) {
            fprintf(stderr, "%s: --etcd-compaction-interval \"%s\": at least 1ms (or 0 for never)\n", cmd, value);
            return 2;
        }
        o->etcd.compaction_interval_ms = ns ? ns / 1000000 : -1;
        return 0;
    }
    return -1;
}

int gs__store_flags_check(struct gs__store_flags *f, const struct gs_server_opts *o, const char *cmd)
{
    if (o->store_kind != GS_STORE_ETCD) {
        if (f->etcd_flag) {
            fprintf(stderr, "%s: --%s is for --store etcd (the store is %s)\n", cmd, f->etcd_flag_name,
                    f->kind_set ? "sqlite, as --store says" : "sqlite by default: add --store etcd");
            return 2;
        }
        return 0;
    }
    if (!o->etcd.n_endpoints) {
        fprintf(stderr, "%s: --store etcd needs --etcd-endpoints URL[,URL...] (e.g. http://127.0.0.1:2379)\n", cmd);
        return 2;
    }
    if (!o->etcd.certfile != !o->etcd.keyfile) {
        fprintf(stderr, "%s: --%s needs --%s as well (a client certificate and its key)\n", cmd,
                o->etcd.certfile ? "etcd-certfile" : "etcd-keyfile", o->etcd.certfile ? "etcd-keyfile" : "etcd-certfile");
        return 2;
    }
    bool tls = false;
    for (size_t i = 0; i < o->etcd.n_endpoints; i++) tls |= !strncmp(o->etcd.endpoints[i], "https://", 8);
    if (!tls && (o->etcd.cafile || o->etcd.certfile)) {
        fprintf(stderr, "%s: --%s is given but no --etcd-endpoints URL is https://\n", cmd,
                o->etcd.cafile ? "etcd-cafile" : "etcd-certfile");
        return 2;
    }
    return 0;
}

void gs__store_flags_free(struct gs__store_flags *f)
{
    gs_etcd_endpoints_free(f->endpoints, f->n_endpoints);
    f->endpoints = NULL;
    f->n_endpoints = 0;
}
