/*
 * log.c - see log.h. Formats one key=value line per call; quoting follows
 * logfmt so lines stay machine-parsable.
 */
#include "core/log.h"

#include "core/error.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>

static enum gs_log_level cur_level = GS_LOG_INFO;
static FILE *out_stream;

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

void gs_log_set_level(enum gs_log_level lvl) { cur_level = lvl; }
enum gs_log_level gs_log_get_level(void) { return cur_level; }
void gs_log_set_stream(FILE *f) { out_stream = f; }

int gs_log_level_parse(const char *s, enum gs_log_level *out)
{
    for (int i = 0; i <= GS_LOG_OFF; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum gs_log_level)i;
            return 0;
        }
    }
    return GS_EINVAL;
}

static void put_value(FILE *f, const char *v)
{
    if (!v) v = "";
    int quote = *v == '\0' || strpbrk(v, " \t\n\"=\\") != NULL;
    if (!quote) {
        fputs(v, f);
        return;
    }
    fputc('"', f);
    for (const char *p = v; *p; p++) {
        if (*p == '"' || *p == '\\') fputc('\\', f);
        if (*p == '\n') { fputs("\\n", f); continue; }
        fputc(*p, f);
    }
    fputc('"', f);
}

void gs_log(enum gs_log_level lvl, const char *msg, ...)
{
    if (lvl < cur_level || lvl >= GS_LOG_OFF) return;
    FILE *f = out_stream ? out_stream : stderr;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char tbuf[32];
    strftime(tbuf, sizeof tbuf, "%Y-%m-%dT%H:%M:%S", &tm);
    flockfile(f);
    fprintf(f, "ts=%s.%03ldZ level=%s msg=", tbuf, ts.tv_nsec / 1000000, level_names[lvl]);
    put_value(f, msg);
    va_list ap;
    va_start(ap, msg);
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (!k) break;
        const char *v = va_arg(ap, const char *);
        fprintf(f, " %s=", k);
        put_value(f, v);
    }
    va_end(ap);
    fputc('\n', f);
    funlockfile(f);
}
