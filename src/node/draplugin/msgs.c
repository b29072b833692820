/*
 * msgs.c - protobuf-c <-> JSON for the DRA plugin API (msgs.h).
 */
#include "node/draplugin/msgs.h"

#include "core/error.h"
#include "dra/health/v1/api.pb-c.h"
#include "dra/pluginregistration/v1/api.pb-c.h"
#include "dra/v1/api.pb-c.h"
#include "node/draplugin/draplugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest PrepReq;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepResp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry PrepEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepOne;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device Dev;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepResp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry UnprepEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse UnprepOne;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim Claim;

#define PREP_REQ_INIT K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_REQUEST__INIT
#define PREP_RESP_INIT K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT
#define PREP_ENTRY_INIT K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY__INIT
#define PREP_ONE_INIT K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCE_RESPONSE__INIT
#define DEV_INIT K8S__IO__KUBELET__PKG__APIS__DRA__V1__DEVICE__INIT
#define UNPREP_RESP_INIT K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT
#define UNPREP_ENTRY_INIT K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY__INIT
#define UNPREP_ONE_INIT K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCE_RESPONSE__INIT
#define CLAIM_INIT K8S__IO__KUBELET__PKG__APIS__DRA__V1__CLAIM__INIT

static int pack(const ProtobufCMessage *m, uint8_t **buf, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    *buf = malloc(*len ? *len : 1);
    if (!*buf) return GS_ENOMEM;
    protobuf_c_message_pack(m, *buf);
    return 0;
}

static char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return (char *)(s ? s : "");
}

/* The strings of a JSON array as a borrowed char* vector (malloc'd). */
static char **strv(const json_t *a, size_t *n)
{
    *n = json_array_size(a);
    char **v = calloc(*n ? *n : 1, sizeof *v);
    for (size_t i = 0; v && i < *n; i++) {
        const char *s = json_string_value(json_array_get(a, i));
        v[i] = (char *)(s ? s : "");
    }
    if (!v) *n = 0;
    return v;
}

static json_t *strv_json(char **v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_string(v[i] ? v[i] : ""));
    return a;
}

/*--- Claims (requests) ---*/

int gs__drap_claims_decode(const uint8_t *buf, size_t len, json_t **claims)
{
    /* The unprepare request has the same layout (claims = 1). */
    PrepReq *r = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(NULL, len, buf);
    if (!r) return GS_EPARSE;
    json_t *a = json_array();
    for (size_t i = 0; i < r->n_claims; i++) {
        const Claim *c = r->claims[i];
        json_array_append_new(a, json_pack("{s:s,s:s,s:s}", "namespace", c->namespace_, "uid", c->uid, "name",
                                           c->name));
    }
    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(r, NULL);
    *claims = a;
    return 0;
}

int gs__drap_claims_pack(const json_t *claims, uint8_t **buf, size_t *len)
{
    size_t n = json_array_size(claims);
    Claim *cs = calloc(n ? n : 1, sizeof *cs);
    Claim **ps = calloc(n ? n : 1, sizeof *ps);
    int rc = GS_ENOMEM;
    if (cs && ps) {
        for (size_t i = 0; i < n; i++) {
            const json_t *c = json_array_get(claims, i);
            cs[i] = (Claim)CLAIM_INIT;
            cs[i].namespace_ = str(c, "namespace");
            cs[i].uid = str(c, "uid");
            cs[i].name = str(c, "name");
            ps[i] = &cs[i];
        }
        PrepReq r = PREP_REQ_INIT;
        r.n_claims = n;
        r.claims = ps;
        rc = pack(&r.base, buf, len);
    }
    free(cs);
    free(ps);
    return rc;
}

/*--- Prepare answers ---*/

int gs__drap_prepare_pack(const json_t *answer, uint8_t **buf, size_t *len)
{
    size_t n = json_object_size(answer), ndev = 0, k = 0;
    const char *uid;
    json_t *v;
    json_object_foreach((json_t *)answer, uid, v) ndev += json_array_size(json_object_get(v, "devices"));
    PrepEntry *es = calloc(n ? n : 1, sizeof *es);
    PrepEntry **eps = calloc(n ? n : 1, sizeof *eps);
    PrepOne *ones = calloc(n ? n : 1, sizeof *ones);
    Dev *ds = calloc(ndev ? ndev : 1, sizeof *ds);
    Dev **dps = calloc(ndev ? ndev : 1, sizeof *dps);
    int rc = GS_ENOMEM;
    size_t di = 0;
    if (!es || !eps || !ones || !ds || !dps) goto out;
    json_object_foreach((json_t *)answer, uid, v) {
        ones[k] = (PrepOne)PREP_ONE_INIT;
        ones[k].error = str(v, "error");
        const json_t *devs = json_object_get(v, "devices");
        ones[k].devices = &dps[di];
        for (size_t i = 0; i < json_array_size(devs); i++, di++) {
            const json_t *d = json_array_get(devs, i);
            ds[di] = (Dev)DEV_INIT;
            ds[di].pool_name = str(d, "pool");
            ds[di].device_name = str(d, "device");
            ds[di].request_names = strv(json_object_get(d, "requests"), &ds[di].n_request_names);
            ds[di].cdi_device_ids = strv(json_object_get(d, "cdi"), &ds[di].n_cdi_device_ids);
            dps[di] = &ds[di];
            ones[k].n_devices++;
        }
        es[k] = (PrepEntry)PREP_ENTRY_INIT;
        es[k].key = (char *)uid;
        es[k].value = &ones[k];
        eps[k] = &es[k];
        k++;
    }
    PrepResp r = PREP_RESP_INIT;
    r.n_claims = n;
    r.claims = eps;
    rc = pack(&r.base, buf, len);
out:
    for (size_t i = 0; ds && i < di; i++) free(ds[i].request_names), free(ds[i].cdi_device_ids);
    free(es), free(eps), free(ones), free(ds), free(dps);
    return rc;
}

int gs_drap_decode_prepare(const uint8_t *buf, size_t len, json_t **out)
{
    PrepResp *r = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__unpack(NULL, len, buf);
    if (!r) return GS_EPARSE;
    json_t *o = json_object();
    for (size_t i = 0; i < r->n_claims; i++) {
        const PrepEntry *e = r->claims[i];
        json_t *devs = json_array();
        const char *error = e->value ? e->value->error : "";
        for (size_t j = 0; e->value && j < e->value->n_devices; j++) {
            const Dev *d = e->value->devices[j];
            json_array_append_new(devs, json_pack("{s:o,s:s,s:s,s:o}", "requests",
                                                  strv_json(d->request_names, d->n_request_names), "pool",
                                                  d->pool_name, "device", d->device_name, "cdi",
                                                  strv_json(d->cdi_device_ids, d->n_cdi_device_ids)));
        }
        json_object_set_new(o, e->key, json_pack("{s:o,s:s}", "devices", devs, "error", error ? error : ""));
    }
    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r, NULL);
    *out = o;
    return 0;
}

/*--- Unprepare answers ---*/

int gs__drap_unprepare_pack(const json_t *answer, uint8_t **buf, size_t *len)
{
    size_t n = json_object_size(answer), k = 0;
    UnprepEntry *es = calloc(n ? n : 1, sizeof *es);
    UnprepEntry **eps = calloc(n ? n : 1, sizeof *eps);
    UnprepOne *ones = calloc(n ? n : 1, sizeof *ones);
    int rc = GS_ENOMEM;
    if (es && eps && ones) {
        const char *uid;
        json_t *v;
        json_object_foreach((json_t *)answer, uid, v) {
            ones[k] = (UnprepOne)UNPREP_ONE_INIT;
            ones[k].error = str(v, "error");
            es[k] = (UnprepEntry)UNPREP_ENTRY_INIT;
            es[k].key = (char *)uid;
            es[k].value = &ones[k];
            eps[k] = &es[k];
            k++;
        }
        UnprepResp r = UNPREP_RESP_INIT;
        r.n_claims = n;
        r.claims = eps;
        rc = pack(&r.base, buf, len);
    }
    free(es), free(eps), free(ones);
    return rc;
}

int gs_drap_decode_unprepare(const uint8_t *buf, size_t len, json_t **out)
{
    UnprepResp *r = k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__unpack(NULL, len, buf);
    if (!r) return GS_EPARSE;
    json_t *o = json_object();
    for (size_t i = 0; i < r->n_claims; i++) {
        const UnprepEntry *e = r->claims[i];
        json_object_set_new(o, e->key, json_pack("{s:s}", "error", e->value && e->value->error ? e->value->error : ""));
    }
    k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__free_unpacked(r, NULL);
    *out = o;
    return 0;
}

/*--- Health ---*/

int gs__drap_health_pack(const json_t *health, uint8_t **buf, size_t *len)
{
    size_t n = json_array_size(health);
    V1__DeviceHealth *hs = calloc(n ? n : 1, sizeof *hs);
    V1__DeviceHealth **hps = calloc(n ? n : 1, sizeof *hps);
    V1__DeviceIdentifier *ids = calloc(n ? n : 1, sizeof *ids);
    int rc = GS_ENOMEM;
    if (hs && hps && ids) {
        for (size_t i = 0; i < n; i++) {
            const json_t *h = json_array_get(health, i);
            ids[i] = (V1__DeviceIdentifier)V1__DEVICE_IDENTIFIER__INIT;
            ids[i].pool_name = str(h, "pool");
            ids[i].device_name = str(h, "device");
            hs[i] = (V1__DeviceHealth)V1__DEVICE_HEALTH__INIT;
            hs[i].device = &ids[i];
            hs[i].health = json_is_true(json_object_get(h, "healthy")) ? V1__HEALTH_STATUS__HEALTHY
                                                                       : V1__HEALTH_STATUS__UNHEALTHY;
            hs[i].last_updated_time = json_integer_value(json_object_get(h, "updated"));
            hs[i].message = str(h, "message");
            hps[i] = &hs[i];
        }
        V1__NodeWatchResourcesResponse r = V1__NODE_WATCH_RESOURCES_RESPONSE__INIT;
        r.n_devices = n;
        r.devices = hps;
        rc = pack(&r.base, buf, len);
    }
    free(hs), free(hps), free(ids);
    return rc;
}

/*--- Registration ---*/

int gs__drap_info_pack(const char *driver, const char *endpoint, uint8_t **buf, size_t *len)
{
    static char *versions[] = {"v1.DRAPlugin", "v1beta1.DRAPlugin"};
    Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
    info.type = "DRAPlugin";
    info.name = (char *)driver;
    info.endpoint = (char *)endpoint;
    info.n_supported_versions = 2;
    info.supported_versions = versions;
    return pack(&info.base, buf, len);
}

int gs__drap_info_decode(const uint8_t *buf, size_t len, json_t **info)
{
    Pluginregistration__PluginInfo *p = pluginregistration__plugin_info__unpack(NULL, len, buf);
    if (!p) return GS_EPARSE;
    *info = json_pack("{s:s,s:s,s:s,s:o}", "type", p->type, "name", p->name, "endpoint", p->endpoint, "versions",
                      strv_json(p->supported_versions, p->n_supported_versions));
    pluginregistration__plugin_info__free_unpacked(p, NULL);
    return *info ? 0 : GS_ENOMEM;
}

int gs__drap_status_pack(int registered, const char *error, uint8_t **buf, size_t *len)
{
    Pluginregistration__RegistrationStatus s = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
    s.plugin_registered = registered != 0;
    s.error = (char *)(error ? error : "");
    return pack(&s.base, buf, len);
}

int gs__drap_status_decode(const uint8_t *buf, size_t len, int *registered, char *err, size_t errlen)
{
    Pluginregistration__RegistrationStatus *s = pluginregistration__registration_status__unpack(NULL, len, buf);
    if (!s) return GS_EPARSE;
    *registered = s->plugin_registered;
    snprintf(err, errlen, "%s", s->error ? s->error : "");
    pluginregistration__registration_status__free_unpacked(s, NULL);
    return 0;
}
