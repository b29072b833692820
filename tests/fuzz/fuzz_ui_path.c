/*
 * fuzz_ui_path.c - the console's file lookup (src/control/ui.c) on raw
 * paths and If-None-Match values: the first line of the input is the path,
 * the rest the header.
 *
 * Invariants beyond "no crash": an asset is found only for a path under
 * /ui/ whose last part is exactly an embedded file's name (never a path with
 * another '/', so no ".." can reach anything), "/ui" alone redirects, an
 * asset's own ETag always matches itself, and a report path names one plain
 * run (no '/', not starting with '.') and one of the three report files.
 */
#include "control/ui.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *nl = memchr(buf, '\n', size);
    const char *inm = NULL;
    if (nl) {
        *nl = 0;
        inm = nl + 1;
    }
    const struct gs_ui_asset *a = NULL;
    enum gs_ui_result r = gs_ui_find(buf, &a);
    if (r == GS_UI_ASSET) {
        if (!a || strncmp(buf, "/ui/", 4) || strchr(buf + 4, '/')) abort();
        if (buf[4] && strcmp(buf + 4, a->name)) abort();
        if (!gs_ui_etag_matches(a->etag, a->etag)) abort();
        (void)gs_ui_etag_matches(inm, a->etag);
    } else if (r == GS_UI_REDIRECT) {
        if (strcmp(buf, "/ui")) abort();
    } else if (a) {
        abort();
    }
    char run[256];
    const char *file;
    if (gs_ui_report_path(buf, run, &file)) { /* a run is one plain name, a file one of three */
        if (strchr(run, '/') || run[0] == '.' || (*file && !run[0]) || (!*file && run[0])) abort();
        if (*file && strcmp(file, "report.html") && strcmp(file, "series.csv") && strcmp(file, "events.jsonl")) abort();
    }
    free(buf);
    return 0;
}
