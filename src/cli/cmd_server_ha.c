/*
 * cmd_server_ha.c - the replica flags of `gpusched server`; see cmd_server_ha.h.
 *
 * The durations are Go durations, as kube-controller-manager's
 * --leader-elect-* flags, so a manifest's arguments carry over; the rules
 * between them are client-go's, said here with the flags' names before the
 * elector (kube/leader.c) checks them again.
 */
#include "cli/cmd_server_ha.h"

#include "core/clock.h"
#include "kube/goduration.h"

#include <stdio.h>
#include <string.h>

enum { H_ID = 0x2300, H_LEASE, H_RENEW, H_RETRY }; /* apart from 0x2000 (net), 0x2100 (lifecycle), 0x2200 (store) */

static const struct option ha_options[] = {
    {"replica-id", required_argument, 0, H_ID},
    {"leader-elect-lease-duration", required_argument, 0, H_LEASE},
    {"leader-elect-renew-deadline", required_argument, 0, H_RENEW},
    {"leader-elect-retry-period", required_argument, 0, H_RETRY},
    {0, 0, 0, 0},
};

const char gs__ha_usage[] =
    "\nreplicas on a shared store (--store etcd; see docs/CONTROL_PLANE.md, \"Running highly available\"):\n"
    "  --replica-id ID       this replica's identity on the Lease kube-system/gpusched-control-plane,\n"
    "                        unique among the replicas (default HOSTNAME_PID)\n"
    "  --leader-elect-lease-duration DUR  a silent leader is replaced after this (default 15s)\n"
    "  --leader-elect-renew-deadline DUR  a leader that could not renew this long stops writing\n"
    "                        (default 10s; less than the lease duration)\n"
    "  --leader-elect-retry-period DUR    how often the Lease is tried (default 2s)\n"
    "  DUR: a Go duration such as 500ms, 15s, 1m30s\n";

void gs__ha_options_append(struct option *opts, size_t cap)
{
    size_t n = 0;
    while (n < cap && opts[n].name) n++;
    for (const struct option *a = ha_options; a->name && n + 1 < cap; a++) opts[n++] = *a;
    if (n < cap) opts[n] = (struct option){0};
}

static int bad(const char *cmd, const char *flag, const char *v, const char *why)
{
    fprintf(stderr, "%s: --%s \"%s\": %s\n", cmd, flag, v, why);
    return 2;
}

int gs__ha_option(struct gs_server_opts *o, int code, const char *value, const char *cmd)
{
    const struct option *opt = ha_options;
    while (opt->name && opt->val != code) opt++;
    if (!opt->name) return -1;
    if (code == H_ID) {
        size_t n = strlen(value);
        if (!n || n > 250) return bad(cmd, opt->name, value, "must be 1 to 250 characters, unique among the replicas");
        for (const char *p = value; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                return bad(cmd, opt->name, value, "must not contain control characters");
        o->replica_id = value;
        return 0;
    }
    int64_t ns = 0;
    const char *why = NULL;
    if (gs_go_duration_parse(value, &ns, &why)) return bad(cmd, opt->name, value, why);
    if (ns <= 0) return bad(cmd, opt->name, value, "must be more than 0");
    if (code == H_LEASE) o->lease_duration_ns = ns;
    else if (code == H_RENEW) o->renew_deadline_ns = ns;
    else o->retry_period_ns = ns;
    return 0;
}

int gs__ha_check(const struct gs_server_opts *o, const char *cmd)
{
    int64_t lease = o->lease_duration_ns ? o->lease_duration_ns : 15 * GS_NS_PER_SEC;
    int64_t renew = o->renew_deadline_ns ? o->renew_deadline_ns : 10 * GS_NS_PER_SEC;
    int64_t retry = o->retry_period_ns ? o->retry_period_ns : 2 * GS_NS_PER_SEC;
    char a[48], b[48];
    if (lease < GS_NS_PER_SEC) {
        gs_go_duration_format(lease, a, sizeof a);
        return bad(cmd, "leader-elect-lease-duration", a, "must be at least 1s (the Lease holds whole seconds)");
    }
    if (renew >= lease) {
        gs_go_duration_format(renew, a, sizeof a);
        gs_go_duration_format(lease, b, sizeof b);
        fprintf(stderr, "%s: --leader-elect-renew-deadline \"%s\": must be less than --leader-elect-lease-duration "
                "(%s), or another replica could take over while this one still writes\n", cmd, a, b);
        return 2;
    }
    if ((double)renew <= 1.2 * (double)retry) {
        gs_go_duration_format(renew, a, sizeof a);
        gs_go_duration_format(retry, b, sizeof b);
        fprintf(stderr, "%s: --leader-elect-renew-deadline \"%s\": must be more than 1.2 x "
                "--leader-elect-retry-period (%s), or one failed renewal already loses the lease\n", cmd, a, b);
        return 2;
    }
    return 0;
}
