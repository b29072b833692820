/*
 * cmd_server_lc.c - the node lifecycle's server flags; see cmd_server_lc.h.
 *
 * Each value is checked here and refused with the flag's name, the value and
 * why, so a typo never silently means "the default".
 */
#include "cli/cmd_server_lc.h"
#include "discovery/discovery.h" /* gs_duration_parse */

#include <stdio.h>
#include <string.h>

enum { L_NOT_READY = 0x2100, L_UNREACHABLE, L_LOST }; /* apart from net_flags.c (0x2000) and the admission flags */

static const struct option lc_options[] = {
    {"default-not-ready-toleration-seconds", required_argument, 0, L_NOT_READY},
    {"default-unreachable-toleration-seconds", required_argument, 0, L_UNREACHABLE},
    {"node-lost-timeout", required_argument, 0, L_LOST},
    {0, 0, 0, 0},
};

const char gs__lc_usage[] =
    "\nnode lifecycle (see docs/CONTROL_PLANE.md, \"Unreachable nodes and taint-based eviction\"):\n"
    "  --default-unreachable-toleration-seconds N  seconds a new pod tolerates\n"
    "                        node.kubernetes.io/unreachable:NoExecute before eviction (default 300)\n"
    "  --default-not-ready-toleration-seconds N  the same for node.kubernetes.io/not-ready (default 300)\n"
    "  --node-lost-timeout DUR  an evicted pod's devices are released and the pod re-created\n"
    "                        this long after the eviction if its node never confirms (default 5m)\n";

void gs__lc_flags_init(struct gs__lc_flags *f, struct gs_server_opts *o)
{
    gs_admit_defaults_init(&f->def, NULL);
    o->admit_defaults = &f->def;
}

void gs__lc_options_append(struct option *opts, size_t cap)
{
    size_t n = 0;
    while (n < cap && opts[n].name) n++;
    for (const struct option *a = lc_options; a->name && n + 1 < cap; a++) opts[n++] = *a;
    if (n < cap) opts[n] = (struct option){0};
}

int gs__lc_option(struct gs__lc_flags *f, struct gs_server_opts *o, int code, const char *value, const char *cmd)
{
    const struct option *opt = lc_options;
    while (opt->name && opt->val != code) opt++;
    if (!opt->name) return -1;
    char err[256];
    int64_t ns = 0;
    switch (code) {
    case L_NOT_READY:
    case L_UNREACHABLE:
        if (gs_admit_seconds_parse(opt->name, value, code == L_NOT_READY ? &f->def.not_ready_s : &f->def.unreachable_s,
                                   err, sizeof err)) {
            fprintf(stderr, "%s: %s\n", cmd, err);
            return 2;
        }
        return 0;
    case L_LOST:
        if (gs_duration_parse(value, &ns) || ns <= 0) {
            fprintf(stderr, "%s: --%s \"%s\": want a duration above 0 such as 90s or 5m (a plain number is seconds)\n",
                    cmd, opt->name, value);
            return 2;
        }
        o->node_lost_timeout_s = (double)ns / 1e9;
        return 0;
    }
    return -1;
}
