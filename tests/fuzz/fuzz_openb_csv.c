/*
 * fuzz_openb_csv.c - fuzz target for the openb trace loader's CSV parsers.
 *
 * The input is a node CSV and a pod CSV separated by the first line "%%";
 * without a separator the whole input is fed to both parsers. Every input
 * must either load or fail with diagnostics, without crashing or leaking.
 */
#include "sim/sim.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int gs__openb_parse_nodes(const char *buf, size_t len, const char *fname, struct gs_trace *t, struct gs_diags *d);
int gs__openb_parse_pods(const char *buf, size_t len, const char *fname, struct gs_trace *t, struct gs_diags *d);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data, *sep = NULL;
    for (size_t i = 0; i + 2 <= size; i++)
        if ((i == 0 || buf[i - 1] == '\n') && buf[i] == '%' && buf[i + 1] == '%') {
            sep = buf + i;
            break;
        }
    size_t nlen = sep ? (size_t)(sep - buf) : size;
    const char *pods = sep ? memchr(sep, '\n', size - (size_t)(sep - buf)) : buf;
    size_t plen = pods ? size - (size_t)(pods - buf) : 0;
    if (pods && sep) pods++, plen--;
    struct gs_trace t;
    memset(&t, 0, sizeof t);
    struct gs_diags d = {0};
    gs__openb_parse_nodes(buf, nlen, "nodes.csv", &t, &d);
    if (pods) gs__openb_parse_pods(pods, plen, "pods.csv", &t, &d);
    for (size_t i = 0; i < d.n; i++)
        if (!d.v[i].path || !d.v[i].msg) abort();
    for (size_t i = 0; i < t.npods; i++) {
        const struct gs_demand *dm = &t.pods[i].pod->demand;
        if (dm->gpu_milli < 0 || dm->gpu_milli > 1000 || (dm->gpu_count == 0 && dm->gpu_milli)) abort();
    }
    gs_diags_free(&d);
    gs_trace_free(&t);
    return 0;
}
