/*
 * ui.h - the web console's static files, served at /ui by the API server.
 *
 * The files of web/ are compiled into the binary (web/embed.cmake writes
 * gs_ui_assets at build time), so a server needs no source tree or asset
 * directory at run time and the page a server serves always matches its
 * API. The shell is public: it holds no data, and every data call the page
 * makes carries the user's Bearer token to the ordinary API, which applies
 * the same authorization as for kubectl. See docs/CONSOLE.md.
 *
 * Path lookup is a pure function (gs_ui_find), driven by the request fuzzer
 * like api_route.c's routing; ui.c's gs__handle_ui answers the request.
 */
#ifndef GS_CONTROL_UI_H
#define GS_CONTROL_UI_H

#include <stdbool.h>
#include <stddef.h>

struct gs_ui_asset {
    const char *name;          /* "app.js": a file of web/, no directories */
    const char *ctype;         /* "text/javascript; charset=utf-8" */
    const unsigned char *data; /* len bytes (plus a NUL not counted) */
    size_t len;
    const char *etag;          /* "\"<16 hex digits of SHA-256>\"", quoted as HTTP wants */
};

/* Generated (build/gen/ui_assets.c), sorted by name. */
extern const struct gs_ui_asset gs_ui_assets[];
extern const size_t gs_ui_nassets;

/* The policy every console answer carries: scripts, styles, images and
 * connections from the server itself only (no inline script, no CDN), no
 * plugins, no framing of the console by another site. */
#define GS_UI_CSP                                                                                                    \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "           \
    "frame-src 'self' blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'self'"

/* Is url (the path, no query) the console's: "/ui" or under "/ui/"? */
bool gs_ui_is_path(const char *url);

enum gs_ui_result {
    GS_UI_ASSET,     /* *out is the asset to serve */
    GS_UI_REDIRECT,  /* "/ui": answer 308 to "/ui/" so relative asset URLs resolve under /ui/ */
    GS_UI_NOT_FOUND, /* not a console path, or no such file */
};

/* What answers url: "/ui/" and "/ui/index.html" are index.html; "/ui/NAME"
 * an embedded file named exactly NAME. Never fails; *out borrowed (static). */
enum gs_ui_result gs_ui_find(const char *url, const struct gs_ui_asset **out);

/* Simulator reports (`--ui-reports DIR`): "/ui/reports" and "/ui/reports/"
 * are the list of runs (*run and *file ""); "/ui/reports/RUN/FILE" one file
 * of a run, RUN a single name of letters, digits, '.', '_', '-' not starting
 * with '.', FILE one of report.html, series.csv, events.jsonl. false for
 * anything else (404). run has room for 256 bytes; *file is static. */
bool gs_ui_report_path(const char *url, char *run, const char **file);

/* Does an If-None-Match header value name etag ("*", or one of a comma
 * list, weak or strong)? NULL: no. */
bool gs_ui_etag_matches(const char *if_none_match, const char *etag);

#endif
