/*
 * secret.h - small secrets kept in files: the token the API server's log
 * proxy presents to node agents (<data-dir>/agent.token), read by `up`'s
 * agents directly and by a separate `gpusched agent --agent-token-file`.
 * Tokens live in files (mode 0600) and never on a command line, where any
 * local user could read them from /proc.
 */
#ifndef GS_CONTROL_SECRET_H
#define GS_CONTROL_SECRET_H

#include <stdbool.h>
#include <stddef.h>

/* First line of path, trimmed, into buf. 0, GS_ENOENT, GS_EIO, or GS_EPARSE
 * (empty, longer than len-1, or not printable ASCII). */
int gs_secret_read(const char *path, char *buf, size_t len);
/* Reads path, or creates it (0600, exclusive) with 48 random hex digits. */
int gs_secret_ensure(const char *path, char *buf, size_t len);
/* Compares in time independent of where they differ. */
bool gs_secret_equal(const char *a, const char *b);

#endif
