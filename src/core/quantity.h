/*
 * quantity.h - Kubernetes resource quantities, parsed exactly.
 *
 * Accepts what Kubernetes' resource.Quantity accepts: an optional sign, a
 * decimal number (`2`, `1.5`, `.5`, `0.1`), and an optional suffix: binary
 * (Ki Mi Gi Ti Pi Ei), decimal SI (n u m "" k M G T P E) or a decimal exponent
 * (`1e3`, `1E-3`). The value is stored as an exact integer number of
 * milli-units (1 = 0.001), so `500m` -> 500, `2` -> 2000, `16Gi` -> 16*2^30*1000.
 * A value that cannot be represented exactly in milli-units (`0.1m`, `1n`) or
 * that overflows int64 is an error: nothing is rounded silently.
 */
#ifndef GS_CORE_QUANTITY_H
#define GS_CORE_QUANTITY_H

#include <stddef.h>
#include <stdint.h>

/* Parses s into milli-units. Returns 0, GS_EINVAL (malformed; *why set to a
 * static explanation such as "unknown suffix \"Gb\"") or GS_ERANGE (overflow or
 * finer than 1m). why may be NULL. */
int gs_quantity_parse(const char *s, int64_t *milli, const char **why);

/* Formats milli-units canonically: whole values without suffix ("2"), others
 * with "m" ("500m"); values that are whole multiples of Ki..Ei or k..E get that
 * suffix when it is exact and shorter is not needed. Returns the length the
 * text needs (snprintf semantics). */
int gs_quantity_format(int64_t milli, char *buf, size_t len);

/* Whole units from milli-units, failing (GS_EINVAL) when not whole: used for
 * extended resources such as nvidia.com/gpu, which must be integers. */
int gs_quantity_whole(int64_t milli, int64_t *units);

#endif
