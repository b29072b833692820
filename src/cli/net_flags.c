/*
 * net_flags.c - hardening flags shared by `server` and `up`; see net_flags.h.
 */
#include "cli/net_flags.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { N_MAXCONN = 0x2000, N_PERIP, N_IDLE, N_FAILQPS, N_AGENT_TOKEN, N_UI_REPORTS };

static const struct option net_options[] = {
    {"max-connections", required_argument, 0, N_MAXCONN},
    {"max-connections-per-ip", required_argument, 0, N_PERIP},
    {"idle-timeout", required_argument, 0, N_IDLE},
    {"auth-fail-qps", required_argument, 0, N_FAILQPS},
    {"agent-token-file", required_argument, 0, N_AGENT_TOKEN},
    {"ui-reports", required_argument, 0, N_UI_REPORTS}, /* the console's simulator reports (docs/CONSOLE.md) */
    {0, 0, 0, 0},
};

const char gs__net_usage[] =
    "\nLimits before authentication (docs/CONTROL_PLANE.md, \"Limits and hardening\"):\n"
    "  --max-connections N        open connections in all (default 1024)\n"
    "  --max-connections-per-ip N open connections per client address (default 512)\n"
    "  --idle-timeout DUR         close a connection silent that long; watches and log\n"
    "                             follows are exempt (default 30s; 10s, 2m or seconds)\n"
    "  --auth-fail-qps N          failed authentications per second per address before 429\n"
    "                             (default 10; -1: no limit)\n"
    "  --agent-token-file FILE    token the log proxy presents to agents\n"
    "                             (default DATA/agent.token, created 0600)\n"
    "  --ui-reports DIR           serve the simulator runs under DIR (DIR/RUN/report.html)\n"
    "                             in the web console, without a token (docs/CONSOLE.md)\n";

void gs__net_options_append(struct option *opts, size_t cap)
{
    size_t n = 0;
    while (opts[n].name) n++;
    for (const struct option *f = net_options; f->name && n + 1 < cap; f++) opts[n++] = *f;
    opts[n] = (struct option){0};
}

static int bad(const char *cmd, const char *flag, const char *v, const char *why)
{
    fprintf(stderr, "gpusched %s: --%s \"%s\": %s\n", cmd, flag, v, why);
    return 2;
}

static int count(const char *cmd, const char *flag, const char *v, unsigned *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < 1 || x > 100000)
        return bad(cmd, flag, v, "want a whole number from 1 to 100000");
    *out = (unsigned)x;
    return 0;
}

int gs__net_option(struct gs_server_opts *o, int code, const char *v, const char *cmd)
{
    char *end;
    errno = 0;
    switch (code) {
    case N_MAXCONN: return count(cmd, "max-connections", v, &o->max_connections);
    case N_PERIP: return count(cmd, "max-connections-per-ip", v, &o->max_per_ip);
    case N_IDLE: {
        long long x = strtoll(v, &end, 10), mul = 1;
        if (!errno && end != v && (!strcmp(end, "s") || !*end)) mul = 1;
        else if (!errno && end != v && !strcmp(end, "m")) mul = 60;
        else return bad(cmd, "idle-timeout", v, "want a duration such as 10s, 2m or a number of seconds");
        if (x < 1 || x * mul > 86400) return bad(cmd, "idle-timeout", v, "must be from 1s to 24h");
        o->idle_timeout_s = (unsigned)(x * mul);
        return 0;
    }
    case N_FAILQPS: {
        double x = strtod(v, &end);
        if (errno || end == v || *end || !(x == -1 || (x > 0 && x <= 1e6)))
            return bad(cmd, "auth-fail-qps", v, "want a rate above 0 (per second), or -1 for no limit");
        o->fail_qps = x;
        return 0;
    }
    case N_AGENT_TOKEN: o->agent_token_file = v; return 0;
    case N_UI_REPORTS: {
        struct stat st;
        if (stat(v, &st) || !S_ISDIR(st.st_mode)) return bad(cmd, "ui-reports", v, "not a directory");
        o->ui_reports = v;
        return 0;
    }
    default: return -1;
    }
}

int gs__pod_id_flag(const char *cmd, const char *flag, const char *v, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < 0 || x > 2147483647)
        return bad(cmd, flag, v, "want a numeric id from 1 to 2147483647");
    if (x == 0)
        return bad(cmd, flag, v, "pods do not run as root by default; a pod that must sets securityContext.runAsUser: 0");
    *out = x;
    return 0;
}
