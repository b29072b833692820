/*
 * fuzz_mockspec.c - mock spec string parser fuzz target.
 *
 * Any byte string must parse or fail with a message; whatever parses must be
 * a sane inventory (GPU count in range, symmetric NVLink, NUMA nodes within
 * the node count, at most 7 MIG slices per GPU) whose faults name real GPUs.
 */
#include "discovery/discovery.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct gs_inventory *inv, const struct gs_fault *f, size_t nf)
{
    if (inv->n_gpus < 1 || inv->n_gpus > GS_DISC_MAX_GPUS || inv->n_numa < 1 || inv->n_numa > GS_DISC_MAX_NUMA) abort();
    for (int i = 0; i < inv->n_gpus; i++) {
        const struct gs_disc_gpu *g = &inv->gpus[i];
        unsigned slices = 0;
        if (g->numa_node < 0 || g->numa_node >= inv->n_numa || g->nvlink[i]) abort();
        for (int j = 0; j < inv->n_gpus; j++)
            if (g->nvlink[j] != inv->gpus[j].nvlink[i]) abort();
        for (int k = 0; k < g->n_mig; k++) slices += g->mig[k].slices_gi;
        if (slices > 7 || (g->n_mig && !g->mig_capable)) abort();
    }
    for (size_t k = 0; k < nf; k++) {
        if (f[k].gpu < -1 || f[k].gpu >= inv->n_gpus) abort();
        if (k && f[k].at_ns < f[k - 1].at_ns) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    struct gs_inventory *inv = malloc(sizeof *inv);
    if (!s || !inv) {
        free(s), free(inv);
        return 0;
    }
    memcpy(s, data, size);
    s[size] = 0;
    struct gs_fault *f = NULL;
    size_t nf = 0;
    char err[160] = "";
    int rc = gs_mock_parse(s, inv, &f, &nf, err, sizeof err);
    if (rc == 0) check(inv, f, nf);
    else if (rc == GS_EINVAL && !err[0]) abort();
    free(f);
    free(inv);
    free(s);
    return 0;
}
