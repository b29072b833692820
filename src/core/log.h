/*
 * log.h - leveled, structured (key=value) logging to stderr or a chosen stream.
 *
 * One line per event: `ts=2026-11-29T14:50:18.123Z level=info msg="pod scheduled" pod=ns/a node=n1`.
 * Values containing spaces, quotes or '=' are quoted. The library logs only
 * through here; what goes to stdout is the CLI's business.
 */
#ifndef GS_CORE_LOG_H
#define GS_CORE_LOG_H

#include <stdio.h>

enum gs_log_level { GS_LOG_DEBUG, GS_LOG_INFO, GS_LOG_WARN, GS_LOG_ERROR, GS_LOG_OFF };

void gs_log_set_level(enum gs_log_level lvl);
enum gs_log_level gs_log_get_level(void);
/* Destination stream (default stderr). Borrowed: the caller keeps it open. */
void gs_log_set_stream(FILE *f);
/* Parses "debug|info|warn|error|off"; returns 0 or GS_EINVAL. */
int gs_log_level_parse(const char *s, enum gs_log_level *out);

/* Logs msg followed by key/value pairs: a NULL-terminated list of
 * const char *key, const char *value. Example:
 *   gs_log(GS_LOG_INFO, "pod scheduled", "pod", key, "node", name, NULL); */
void gs_log(enum gs_log_level lvl, const char *msg, ...) __attribute__((sentinel));

#endif
