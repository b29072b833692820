/*
 * goduration.h - Go duration strings ("15s", "1m30s", "250ms", "1.5h"), as
 * time.ParseDuration reads them.
 *
 * The standalone scheduler takes kube-scheduler's flag values unchanged
 * (--leader-elect-lease-duration 15s and the like) so that a Deployment's
 * arguments carry over; those are Go durations, which the rest of gpusched's
 * duration flags (discovery.h: "30" means seconds, one unit only) are not.
 */
#ifndef GS_KUBE_GODURATION_H
#define GS_KUBE_GODURATION_H

#include <stddef.h>
#include <stdint.h>

/* Parses s into *ns: an optional sign, then one or more <number><unit> with
 * units ns, us (µs, μs), ms, s, m, h; "0" alone needs no unit. 0, or
 * GS_EINVAL / GS_ERANGE with *why (static text) saying what is wrong. */
int gs_go_duration_parse(const char *s, int64_t *ns, const char **why);
/* The Go form of ns ("1m30s", "250ms", "0s"), as time.Duration.String writes
 * it. Returns the length (snprintf). */
int gs_go_duration_format(int64_t ns, char *buf, size_t len);

#endif
