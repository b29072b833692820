/*
 * fuzz_draplugin_msgs.c - everything the DRA plugin and its kubelet side
 * decode from outside (src/node/draplugin/), with the handling that follows.
 *
 * The first byte picks the input; the rest is it:
 *   0 Node(Un)PrepareResourcesRequest -> the plugin's claims list, packed again
 *   1 NodePrepareResourcesResponse    -> the kubelet side's decoder, packed again
 *   2 NodeUnprepareResourcesResponse  -> the same for Unprepare
 *   3 checkpoint text                 -> gs_drap_checkpoint_parse
 *   4 CDI spec text                   -> gs_drap_cdi_env_text
 *   5 PluginInfo / RegistrationStatus -> the registration decoders
 *   6 ResourceSlice JSON              -> gs_drap_table_from_slices, then a claim from the same text
 * Invariants: no crash or leak; whatever decodes packs and decodes back to
 * the same JSON; a refused checkpoint leaves the state as it was.
 */
#include "node/draplugin/draplugin.h"
#include "node/draplugin/msgs.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void roundtrip(int (*decode)(const uint8_t *, size_t, json_t **), int (*pack)(const json_t *, uint8_t **, size_t *),
                      const uint8_t *p, size_t n)
{
    json_t *v = NULL, *w = NULL;
    if (decode(p, n, &v)) return;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!pack(v, &buf, &len)) {
        if (decode(buf, len, &w) || !json_equal(v, w)) abort();
    }
    free(buf);
    json_decref(v);
    json_decref(w);
}

static int minor_of(void *ud, const char *uuid)
{
    (void)ud;
    return (int)(strlen(uuid) % 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    const char *text = (const char *)p;
    char err[512];
    switch (data[0] % 7) {
    case 0: roundtrip(gs__drap_claims_decode, gs__drap_claims_pack, p, n); break;
    case 1: roundtrip(gs_drap_decode_prepare, gs__drap_prepare_pack, p, n); break;
    case 2: roundtrip(gs_drap_decode_unprepare, gs__drap_unprepare_pack, p, n); break;
    case 3: {
        json_t *before = json_pack("{s:{s:s,s:s,s:[]}}", "u", "namespace", "n", "name", "c", "devices");
        struct gs_drap_state st = {"gpu.nvidia.com", "node-a", "/tmp", json_incref(before)};
        if (gs_drap_checkpoint_parse(text, n, &st, err, sizeof err) && !json_equal(st.claims, before)) abort();
        json_decref(st.claims);
        json_decref(before);
        break;
    }
    case 4: {
        json_t *env = json_object();
        bool found;
        gs_drap_cdi_env_text(text, n, "k8s.gpu.nvidia.com/claim", "u-gpu-0", env, &found, err, sizeof err);
        json_decref(env);
        break;
    }
    case 5: {
        json_t *info = NULL;
        int reg = 0;
        if (!gs__drap_info_decode(p, n, &info)) json_decref(info);
        gs__drap_status_decode(p, n, &reg, err, sizeof err);
        break;
    }
    case 6: {
        json_t *v = json_loadb(text, n, 0, NULL);
        static struct gs_drap_table t;
        if (v && !gs_drap_table_from_slices(json_is_array(v) ? v : json_object_get(v, "slices"), minor_of, NULL, &t,
                                            err, sizeof err)) {
            struct gs_drap_state st = {"gpu.nvidia.com", "node-a", "/tmp", NULL};
            json_t *out = NULL;
            const json_t *claim = json_object_get(v, "claim");
            if (claim && !gs_drap_choose(&st, &t, claim, "ns", "c", "u", &out, err, sizeof err)) {
                json_t *spec = gs_drap_cdi_spec(&t, "u", out);
                if (!spec) abort();
                json_decref(spec);
            }
            json_decref(out);
        }
        json_decref(v);
        break;
    }
    }
    return 0;
}
