/*
 * ui.c - serves the web console's embedded files at /ui; see ui.h.
 *
 * The console is a single page of plain ES modules. Answers are cacheable
 * but always revalidated (Cache-Control: no-cache with an ETag): a browser
 * keeps the files and gets a 304 until the server is upgraded, and never runs
 * an old app.js against a newer API. Every answer carries the strict
 * Content-Security-Policy of GS_UI_CSP, nosniff and no-referrer, so that a
 * pod name or an event message shown by the page can never become script.
 * Only GET and HEAD are served; the shell needs no token (the data calls
 * are authorized one by one by the API).
 *
 * Simulator reports are files on disk, under the directory an operator
 * names with --ui-reports: the only files served from disk, so the names
 * are checked against a fixed set (no path from the URL reaches open()
 * but one plain run name and one of three file names). Unlike the console's
 * own files they need the API's token and are authorized by the row
 * "reports" of the authorization table (auth.c): the page fetches a report
 * with its Bearer token and shows it in a sandboxed frame from a blob: URL,
 * so no frame or tab ever has to send a token. A report carries its own
 * inline styles, so it gets a policy of its own: no script at all (and the
 * frame's sandbox allows none either).
 */
#include "control/ui.h"

#include "control/apiserver_int.h"
#include "control/auth.h"

#include "core/codec.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REPORT_CSP "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'"
#define REPORT_MAX_BYTES (256u << 20)

bool gs_ui_is_path(const char *url)
{
    return url && !strncmp(url, "/ui", 3) && (url[3] == 0 || url[3] == '/');
}

enum gs_ui_result gs_ui_find(const char *url, const struct gs_ui_asset **out)
{
    *out = NULL;
    if (!gs_ui_is_path(url)) return GS_UI_NOT_FOUND;
    if (!url[3]) return GS_UI_REDIRECT;
    const char *name = url + 4;
    if (!*name) name = "index.html";
    if (strchr(name, '/')) return GS_UI_NOT_FOUND; /* web/ is flat: no "..", no subdirectories */
    for (size_t i = 0; i < gs_ui_nassets; i++)
        if (!strcmp(gs_ui_assets[i].name, name)) {
            *out = &gs_ui_assets[i];
            return GS_UI_ASSET;
        }
    return GS_UI_NOT_FOUND;
}

static const char *const report_files[] = {"report.html", "series.csv", "events.jsonl"};
static const char *const report_types[] = {"text/html; charset=utf-8", "text/csv; charset=utf-8",
                                           "application/x-ndjson; charset=utf-8"};

static bool run_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 255 || s[0] == '.') return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '.' || s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

bool gs_ui_report_path(const char *url, char *run, const char **file)
{
    run[0] = 0;
    *file = "";
    if (!url || strncmp(url, "/ui/reports", 11)) return false;
    const char *p = url + 11;
    if (!*p || !strcmp(p, "/")) return true;
    if (*p++ != '/') return false;
    const char *slash = strchr(p, '/');
    if (!slash || !run_name_ok(p, (size_t)(slash - p))) return false;
    for (size_t i = 0; i < sizeof report_files / sizeof report_files[0]; i++)
        if (!strcmp(slash + 1, report_files[i])) {
            memcpy(run, p, (size_t)(slash - p));
            run[slash - p] = 0;
            *file = report_files[i];
            return true;
        }
    return false;
}

static void secure_headers(struct MHD_Response *resp, const char *csp)
{
    MHD_add_response_header(resp, "Content-Security-Policy", csp);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
}

static enum MHD_Result reply_mode(struct gs__req *r, int code, const char *ctype, const void *data, size_t len,
                                  const char *etag, const char *location, enum MHD_ResponseMemoryMode mode,
                                  const char *csp)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)data, mode);
    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE) free((void *)data);
        return MHD_NO;
    }
    secure_headers(resp, csp);
    if (ctype) MHD_add_response_header(resp, "Content-Type", ctype);
    if (etag) MHD_add_response_header(resp, "ETag", etag);
    if (location) MHD_add_response_header(resp, "Location", location);
    if (code == 405) MHD_add_response_header(resp, "Allow", "GET, HEAD");
    MHD_add_response_header(resp, "Cache-Control", code == 200 || code == 304 ? "no-cache" : "no-store");
    enum MHD_Result ret = MHD_queue_response(r->c, (unsigned)code, resp);
    MHD_destroy_response(resp);
    r->answered = true;
    return ret;
}

static enum MHD_Result reply(struct gs__req *r, int code, const char *ctype, const void *data, size_t len,
                             const char *etag, const char *location)
{
    return reply_mode(r, code, ctype, data, len, etag, location, MHD_RESPMEM_PERSISTENT, GS_UI_CSP);
}

static enum MHD_Result reply_text(struct gs__req *r, int code, const char *fmt, const char *arg)
{
    char *text = NULL;
    if (asprintf(&text, fmt, arg) < 0) return MHD_NO;
    return reply_mode(r, code, "text/plain; charset=utf-8", text, strlen(text), NULL, NULL, MHD_RESPMEM_MUST_FREE,
                      GS_UI_CSP);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* {"runs": [names of DIR's subdirectories that hold a report.html]}, sorted. */
static enum MHD_Result report_list(struct gs__req *r)
{
    DIR *d = opendir(r->s->ui_reports);
    if (!d) return reply_text(r, 503, "cannot read the reports directory %s\n", r->s->ui_reports);
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char path[2048];
        struct stat st;
        if (!run_name_ok(e->d_name, strlen(e->d_name))) continue;
        snprintf(path, sizeof path, "%s/%s/report.html", r->s->ui_reports, e->d_name);
        if (stat(path, &st) || !S_ISREG(st.st_mode)) continue;
        char **nv = realloc(names, (n + 1) * sizeof *nv);
        if (!nv) break;
        names = nv;
        if ((names[n] = strdup(e->d_name))) n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, by_name);
    json_t *runs = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(runs, json_string(names[i]));
        free(names[i]);
    }
    free(names);
    json_t *doc = json_pack("{s:o}", "runs", runs);
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) return MHD_NO;
    return reply_mode(r, 200, "application/json", text, strlen(text), NULL, NULL, MHD_RESPMEM_MUST_FREE, GS_UI_CSP);
}

/* Not an API resource: the name under which the authorization table's
 * "reports" row is looked up (get: one file, list: the runs). */
static const struct gs_api_resource reports_res = {"ui.gpusched.io", "v1", "reports", "report", "Report", NULL,
                                                   false, false, "reports"};

/* The token check the API's own routes get: NULL when r may read, else why
 * not, with *code the answer (401 or 403). */
static const char *report_refused(const struct gs__req *r, const char *verb, const char *run, int *code)
{
    *code = 401;
    if (!r->who) return "Unauthorized: simulator reports need the API's Bearer token";
    const char *why = "";
    struct gs_authz_req q = {verb, &reports_res, "", NULL, run[0] ? run : NULL};
    if (gs_authorize(r->who, &q, &why) == GS_AUTHZ_ALLOW) return NULL;
    *code = 403;
    return why;
}

static enum MHD_Result report(struct gs__req *r)
{
    char run[256];
    const char *file;
    bool path_ok = gs_ui_report_path(r->url, run, &file);
    const char *verb = path_ok && *file ? "get" : "list";
    int code;
    const char *why = report_refused(r, verb, path_ok ? run : "", &code);
    if (why && code == 401) return gs__reply_status(r, 401, NULL, NULL, "%s", why);
    if (why)
        return gs__reply_status(r, 403, NULL, NULL, "reports is forbidden: User \"%s\" cannot %s simulator reports: %s",
                                r->who->user, verb, why);
    if (!r->s->ui_reports[0])
        return reply_text(r, 404, "%s", "no simulator reports here: start the server with --ui-reports DIR\n");
    if (!path_ok)
        return reply_text(r, 404, "%s", "no such report: want /ui/reports/RUN/report.html (or series.csv, events.jsonl)\n");
    if (!*file) return report_list(r);
    char path[2048], *data = NULL;
    size_t len = 0;
    struct stat st;
    snprintf(path, sizeof path, "%s/%s/%s", r->s->ui_reports, run, file);
    if (stat(path, &st) || !S_ISREG(st.st_mode)) return reply_text(r, 404, "run \"%s\" has no such file\n", run);
    if ((size_t)st.st_size > REPORT_MAX_BYTES) return reply_text(r, 413, "%s is too large to serve\n", file);
    if (gs_read_file(path, &data, &len)) return reply_text(r, 500, "cannot read %s\n", file);
    size_t k = 0;
    while (strcmp(report_files[k], file)) k++;
    return reply_mode(r, 200, report_types[k], data, len, NULL, NULL, MHD_RESPMEM_MUST_FREE,
                      k == 0 ? REPORT_CSP : GS_UI_CSP);
}

bool gs_ui_etag_matches(const char *inm, const char *etag)
{
    if (!inm) return false;
    size_t el = strlen(etag);
    for (const char *p = inm; *p;) {
        while (*p == ' ' || *p == ',') p++;
        if (!strncmp(p, "W/", 2)) p += 2;
        if (*p == '*') return true;
        if (!strncmp(p, etag, el) && (p[el] == 0 || p[el] == ',' || p[el] == ' ')) return true;
        while (*p && *p != ',') p++;
    }
    return false;
}

enum MHD_Result gs__handle_ui(struct gs__req *r)
{
    static const char not_found[] = "no such file in the console\n";
    static const char bad_method[] = "the console's files are read with GET or HEAD only\n";
    if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD"))
        return reply(r, 405, "text/plain; charset=utf-8", bad_method, sizeof bad_method - 1, NULL, NULL);
    if (!strncmp(r->url, "/ui/reports", 11) && (r->url[11] == 0 || r->url[11] == '/')) return report(r);
    const struct gs_ui_asset *a;
    switch (gs_ui_find(r->url, &a)) {
    case GS_UI_REDIRECT: return reply(r, 308, NULL, "", 0, NULL, "/ui/");
    case GS_UI_NOT_FOUND:
        return reply(r, 404, "text/plain; charset=utf-8", not_found, sizeof not_found - 1, NULL, NULL);
    case GS_UI_ASSET: break;
    }
    if (gs_ui_etag_matches(gs__header(r, "If-None-Match"), a->etag)) return reply(r, 304, NULL, "", 0, a->etag, NULL);
    return reply(r, 200, a->ctype, a->data, a->len, a->etag, NULL);
}
