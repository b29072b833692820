/*
 * discovery.c - what the backends share: opening the best backend available,
 * closing, and small parsers (durations, PCI bus ids) used by more than one.
 *
 * gs_disc_open_auto prefers NVML because only NVML knows names, memory and
 * metrics; sysfs is the fallback that still tells "this node has NVIDIA PCI
 * devices, on these NUMA nodes" when the driver's library is absent.
 */
#include "discovery/discovery.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*--- Opening and closing ---*/

int gs_disc_open_auto(struct gs_disc *d, const char *sysfs_root, const struct gs_clock *clock)
{
    char why[sizeof d->err];
    int rc = gs_disc_open_nvml(d, NULL, sysfs_root, clock);
    if (rc == 0) return 0;
    snprintf(why, sizeof why, "%s", d->err);
    rc = gs_disc_open_sysfs(d, sysfs_root, clock);
    if (rc == 0) snprintf(d->err, sizeof d->err, "NVML unavailable (%.100s); using sysfs", why);
    return rc;
}

int gs_disc_open_named(struct gs_disc *d, const char *backend, const char *mock_spec, const char *sysfs_root,
                       const struct gs_clock *clock)
{
    if (!backend) backend = mock_spec ? "mock" : "auto";
    if (!strcmp(backend, "mock")) {
        if (mock_spec) return gs_disc_open_mock(d, mock_spec, clock);
        memset(d, 0, sizeof *d);
        snprintf(d->err, sizeof d->err, "the mock backend needs --mock SPEC");
        return GS_EINVAL;
    }
    if (!strcmp(backend, "auto")) return gs_disc_open_auto(d, sysfs_root, clock);
    if (!strcmp(backend, "nvml")) return gs_disc_open_nvml(d, NULL, sysfs_root, clock);
    if (!strcmp(backend, "sysfs")) return gs_disc_open_sysfs(d, sysfs_root, clock);
    memset(d, 0, sizeof *d);
    snprintf(d->err, sizeof d->err, "unknown backend \"%.32s\" (want auto, nvml, sysfs or mock)", backend);
    return GS_EINVAL;
}

void gs_disc_close(struct gs_disc *d)
{
    if (d && d->ops && d->ops->close) d->ops->close(d);
    if (d) {
        d->ops = NULL;
        d->impl = NULL;
    }
}

/*--- Small parsers ---*/

int gs_duration_parse(const char *s, int64_t *ns)
{
    if (!s || !*s || !(isdigit((unsigned char)*s) || *s == '.')) return GS_EINVAL;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0) return GS_EINVAL;
    double mul;
    if (!*end || !strcmp(end, "s")) mul = 1e9;
    else if (!strcmp(end, "ms")) mul = 1e6;
    else if (!strcmp(end, "us")) mul = 1e3;
    else if (!strcmp(end, "m")) mul = 60e9;
    else if (!strcmp(end, "h")) mul = 3600e9;
    else return GS_EINVAL;
    double r = v * mul;
    if (r > 9.0e18) return GS_ERANGE;
    *ns = (int64_t)r;
    return 0;
}

void gs_pci_sysfs_name(const char *bus, char *out, size_t len)
{
    /* NVML pads the domain to 8 hex digits and uses capitals; sysfs uses 4 and lower case. */
    const char *colon = strchr(bus, ':');
    if (colon && strchr(colon + 1, ':'))
        snprintf(out, len, "%04lx:%s", strtoul(bus, NULL, 16) & 0xffffUL, colon + 1);
    else
        snprintf(out, len, "0000:%s", bus);
    for (char *p = out; *p; p++) *p = (char)tolower((unsigned char)*p);
}

void gs__inventory_defaults(struct gs_inventory *inv)
{
    if (!inv->hostname[0] && gethostname(inv->hostname, sizeof inv->hostname - 1) != 0)
        snprintf(inv->hostname, sizeof inv->hostname, "localhost");
    inv->hostname[sizeof inv->hostname - 1] = 0;
    if (!inv->machine[0]) snprintf(inv->machine, sizeof inv->machine, "unknown");
    if (inv->n_numa < 1) {
        inv->n_numa = 1;
        inv->numa_distance[0][0] = 10;
    }
}
