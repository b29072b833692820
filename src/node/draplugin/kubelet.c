/*
 * kubelet.c - the kubelet's side of the DRA plugin API (draplugin.h): what
 * the agent does for pods with resource claims. The plugin is found as the
 * kubelet's plugin watcher finds it (the registration socket in the
 * registry directory, GetInfo, NotifyRegistrationStatus), then called on
 * the endpoint GetInfo names, in the newest service version it offers.
 */
#include "node/draplugin/draplugin.h"

#include "core/error.h"
#include "node/deviceplugin/rpc.h"
#include "node/draplugin/msgs.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int gs_drap_kubelet_find(const char *registry_dir, const char *driver, char *endpoint, size_t eplen, bool *v1,
                         char *err, size_t errlen)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s-reg.sock", registry_dir, driver);
    struct stat st;
    if (stat(path, &st)) {
        snprintf(err, errlen, "no DRA plugin of driver %s is registered (%s: %s)", driver, path, strerror(errno));
        return GS_ENOENT;
    }
    struct gs_rpc_conn *c;
    if (gs_rpc_dial(path, &c)) return GS_ENOMEM;
    uint8_t *resp = NULL;
    size_t rlen = 0;
    char why[256] = "";
    int rc = gs_rpc_unary(c, "/pluginregistration.Registration/GetInfo", NULL, 0, &resp, &rlen, 5000, false, NULL,
                          why, sizeof why);
    json_t *info = NULL;
    if (rc) snprintf(err, errlen, "GetInfo on %s: %s", path, why[0] ? why : gs_strerror(rc));
    else if (gs__drap_info_decode(resp, rlen, &info)) {
        snprintf(err, errlen, "GetInfo on %s: not a PluginInfo", path);
        rc = GS_EIO;
    }
    free(resp);
    const char *type = json_string_value(json_object_get(info, "type"));
    const char *name = json_string_value(json_object_get(info, "name"));
    const char *ep = json_string_value(json_object_get(info, "endpoint"));
    char refusal[512] = "";
    bool has_v1 = false, has_beta = false;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(info, "versions"), i, v) {
        has_v1 |= !strcmp(json_string_value(v), "v1.DRAPlugin");
        has_beta |= !strcmp(json_string_value(v), "v1beta1.DRAPlugin");
    }
    if (!rc) {
        if (!type || strcmp(type, "DRAPlugin"))
            snprintf(refusal, sizeof refusal, "type \"%s\", want DRAPlugin", type ? type : "");
        else if (!name || strcmp(name, driver))
            snprintf(refusal, sizeof refusal, "name \"%s\", want %s", name ? name : "", driver);
        else if (!ep || !*ep) snprintf(refusal, sizeof refusal, "no endpoint");
        else if (!has_v1 && !has_beta)
            snprintf(refusal, sizeof refusal, "supported versions name neither v1.DRAPlugin nor v1beta1.DRAPlugin");
    }
    if (!rc) {
        /* Tell the plugin, as the kubelet does; a plugin that cannot hear it still serves. */
        uint8_t *buf = NULL, *r2 = NULL;
        size_t blen = 0, r2len = 0;
        if (!gs__drap_status_pack(!refusal[0], refusal, &buf, &blen))
            gs_rpc_unary(c, "/pluginregistration.Registration/NotifyRegistrationStatus", buf, blen, &r2, &r2len, 5000,
                         false, NULL, NULL, 0);
        free(buf);
        free(r2);
    }
    gs_rpc_close(c);
    if (!rc && refusal[0]) {
        snprintf(err, errlen, "the plugin on %s is not usable: %s", path, refusal);
        rc = GS_EINVAL;
    }
    if (!rc) {
        snprintf(endpoint, eplen, "%s", ep);
        *v1 = has_v1;
    }
    json_decref(info);
    return rc;
}

static json_t *claims_json(const struct gs_drap_claim_ref *c, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:s,s:s,s:s}", "namespace", c[i].ns, "uid", c[i].uid, "name",
                                           c[i].name));
    return a;
}

static int call(const char *endpoint, bool v1, const char *method, const struct gs_drap_claim_ref *c, size_t n,
                int timeout_ms, uint8_t **resp, size_t *rlen, char *err, size_t errlen)
{
    json_t *claims = claims_json(c, n);
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc = gs__drap_claims_pack(claims, &buf, &blen);
    json_decref(claims);
    if (rc) return rc;
    char path[160], why[512] = "";
    snprintf(path, sizeof path, "/k8s.io.kubelet.pkg.apis.dra.%s.DRAPlugin/%s", v1 ? "v1" : "v1beta1", method);
    struct gs_rpc_conn *conn;
    rc = gs_rpc_dial(endpoint, &conn);
    if (!rc) {
        rc = gs_rpc_unary(conn, path, buf, blen, resp, rlen, timeout_ms, false, NULL, why, sizeof why);
        gs_rpc_close(conn);
    }
    if (rc) snprintf(err, errlen, "%s on %s: %s", method, endpoint, why[0] ? why : gs_strerror(rc));
    free(buf);
    return rc;
}

/* Every claim asked about gets an entry: a missing one is an error of its own. */
static void fill_missing(json_t *ans, const struct gs_drap_claim_ref *c, size_t n, bool prepare)
{
    for (size_t i = 0; i < n; i++)
        if (!json_object_get(ans, c[i].uid))
            json_object_set_new(ans, c[i].uid,
                                prepare ? json_pack("{s:[],s:s}", "devices", "error",
                                                    "the plugin did not answer for this claim")
                                        : json_pack("{s:s}", "error", "the plugin did not answer for this claim"));
}

int gs_drap_kubelet_prepare(const char *endpoint, bool v1, const struct gs_drap_claim_ref *c, size_t n,
                            int timeout_ms, json_t **out, char *err, size_t errlen)
{
    uint8_t *resp = NULL;
    size_t rlen = 0;
    *out = NULL;
    int rc = call(endpoint, v1, "NodePrepareResources", c, n, timeout_ms, &resp, &rlen, err, errlen);
    if (!rc && gs_drap_decode_prepare(resp, rlen, out)) {
        snprintf(err, errlen, "NodePrepareResources on %s: the answer is not a NodePrepareResourcesResponse", endpoint);
        rc = GS_EIO;
    }
    free(resp);
    if (!rc) fill_missing(*out, c, n, true);
    return rc;
}

int gs_drap_kubelet_unprepare(const char *endpoint, bool v1, const struct gs_drap_claim_ref *c, size_t n,
                              int timeout_ms, json_t **out, char *err, size_t errlen)
{
    uint8_t *resp = NULL;
    size_t rlen = 0;
    *out = NULL;
    int rc = call(endpoint, v1, "NodeUnprepareResources", c, n, timeout_ms, &resp, &rlen, err, errlen);
    if (!rc && gs_drap_decode_unprepare(resp, rlen, out)) {
        snprintf(err, errlen, "NodeUnprepareResources on %s: the answer is not a NodeUnprepareResourcesResponse",
                 endpoint);
        rc = GS_EIO;
    }
    free(resp);
    if (!rc) fill_missing(*out, c, n, false);
    return rc;
}

/*--- CDI edits -> environment ---*/

static void set_env(json_t *env, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) return;
    char key[256];
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv) < 255 ? (int)(eq - kv) : 255, kv);
    const char *val = eq + 1;
    const char *old = json_string_value(json_object_get(env, key));
    /* Several devices of one container: their visible-device lists add up. */
    if (old && *old && *val && !strcmp(key, "NVIDIA_VISIBLE_DEVICES") && strcmp(old, "void")) {
        size_t len = strlen(old) + strlen(val) + 2;
        char *joined = malloc(len);
        if (!joined) return;
        snprintf(joined, len, "%s,%s", old, val);
        json_object_set_new(env, key, json_string(joined));
        free(joined);
        return;
    }
    json_object_set_new(env, key, json_string(val));
}

static void apply_env(const json_t *edits, json_t *env)
{
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(edits, "env"), i, e) if (json_is_string(e)) set_env(env, json_string_value(e));
}

int gs_drap_cdi_env_text(const char *text, size_t len, const char *kind, const char *device, json_t *env,
                         bool *found, char *err, size_t errlen)
{
    *found = false;
    json_error_t je;
    json_t *spec = json_loadb(text, len, 0, &je);
    if (!json_is_object(spec)) {
        snprintf(err, errlen, "line %d: %s", je.line, spec ? "not an object" : je.text);
        json_decref(spec);
        return GS_EPARSE;
    }
    const char *k = json_string_value(json_object_get(spec, "kind"));
    if (!k || strcmp(k, kind)) {
        json_decref(spec);
        return 0;
    }
    size_t i;
    const json_t *d;
    json_array_foreach(json_object_get(spec, "devices"), i, d) {
        const char *name = json_string_value(json_object_get(d, "name"));
        if (!name || strcmp(name, device)) continue;
        apply_env(json_object_get(spec, "containerEdits"), env);
        apply_env(json_object_get(d, "containerEdits"), env);
        *found = true;
        break;
    }
    json_decref(spec);
    return 0;
}

static int read_file(const char *path, char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return GS_EIO;
    *buf = NULL, *len = 0;
    size_t cap = 0, n;
    char chunk[8192];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (*len + n > cap) {
            cap = (*len + n) * 2;
            char *nb = realloc(*buf, cap);
            if (!nb) {
                free(*buf);
                fclose(f);
                return GS_ENOMEM;
            }
            *buf = nb;
        }
        memcpy(*buf + *len, chunk, n);
        *len += n;
    }
    fclose(f);
    return 0;
}

/* One id against every spec file of dir (json only; dot files are temporaries). */
static int one_id(const char *dir, const char *id, json_t *env, char *err, size_t errlen)
{
    const char *eq = strchr(id, '=');
    if (!eq || eq == id || !eq[1]) {
        snprintf(err, errlen, "CDI device %s: not a fully qualified name (vendor/class=name)", id);
        return GS_EINVAL;
    }
    char kind[256];
    snprintf(kind, sizeof kind, "%.*s", (int)(eq - id) < 255 ? (int)(eq - id) : 255, id);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "CDI device %s: cannot read %s: %s", id, dir, strerror(errno));
        return GS_ENOENT;
    }
    struct dirent *e;
    bool found = false;
    int rc = 0;
    while (!found && !rc && (e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (e->d_name[0] == '.' || nl < 6 || strcmp(e->d_name + nl - 5, ".json")) continue;
        char path[2048], why[256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *text;
        size_t len;
        if (read_file(path, &text, &len)) continue;
        rc = gs_drap_cdi_env_text(text ? text : "", len, kind, eq + 1, env, &found, why, sizeof why);
        if (rc) snprintf(err, errlen, "CDI spec %s: %s", path, why);
        free(text);
    }
    closedir(d);
    if (!rc && !found) {
        snprintf(err, errlen, "CDI device %s: no spec in %s defines it", id, dir);
        rc = GS_ENOENT;
    }
    return rc;
}

int gs_drap_cdi_env(const char *cdi_dir, const char *const *ids, size_t n, json_t *env, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        int rc = one_id(cdi_dir, ids[i], env, err, errlen);
        if (rc) return rc;
    }
    return 0;
}
