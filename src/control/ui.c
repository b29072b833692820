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
 */
#include "control/ui.h"

#include "control/apiserver_int.h"

#include <stdio.h>
#include <string.h>

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

static void secure_headers(struct MHD_Response *resp)
{
    MHD_add_response_header(resp, "Content-Security-Policy", GS_UI_CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
}

static enum MHD_Result reply(struct gs__req *r, int code, const char *ctype, const void *data, size_t len,
                             const char *etag, const char *location)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    secure_headers(resp);
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

/* Does an If-None-Match header name etag ("*", or one of a comma list)? */
static bool etag_matches(const char *inm, const char *etag)
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
    const struct gs_ui_asset *a;
    switch (gs_ui_find(r->url, &a)) {
    case GS_UI_REDIRECT: return reply(r, 308, NULL, "", 0, NULL, "/ui/");
    case GS_UI_NOT_FOUND:
        return reply(r, 404, "text/plain; charset=utf-8", not_found, sizeof not_found - 1, NULL, NULL);
    case GS_UI_ASSET: break;
    }
    if (etag_matches(gs__header(r, "If-None-Match"), a->etag)) return reply(r, 304, NULL, "", 0, a->etag, NULL);
    return reply(r, 200, a->ctype, a->data, a->len, a->etag, NULL);
}
