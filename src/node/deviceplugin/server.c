/*
 * server.c - the v1beta1.DevicePlugin service of `gpusched device-plugin`
 * (plugin.h): method table, shared GPU table, ListAndWatch versioning.
 *
 * The server thread copies the table under the mutex and answers from the
 * copy, so a health change never waits on a slow kubelet.
 */
#include "node/deviceplugin/plugin.h"

#include "core/error.h"
#include "node/deviceplugin/handlers.h"
#include "node/deviceplugin/rpc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gs_dp {
    struct gs_dp_config cfg;
    char dir[200], resource[128], endpoint[96];
    char sock[320], kubelet[320];
    pthread_mutex_t mu;
    struct gs_node_gpus gpus;   /* under mu */
    atomic_uint_fast64_t version;
    struct gs_rpc_server *srv;
    atomic_int registrations;
};

/*--- Methods ---*/

static void snapshot(struct gs_dp *dp, struct gs_node_gpus *g)
{
    pthread_mutex_lock(&dp->mu);
    *g = dp->gpus;
    pthread_mutex_unlock(&dp->mu);
}

static int m_options(void *ud, const uint8_t *req, size_t len, uint8_t **out, size_t *olen, char *msg, size_t ml)
{
    (void)ud, (void)req, (void)len, (void)msg, (void)ml;
    return gs_dp_h_options(out, olen);
}

static int m_preferred(void *ud, const uint8_t *req, size_t len, uint8_t **out, size_t *olen, char *msg, size_t ml)
{
    static _Thread_local struct gs_node_gpus g;
    snapshot(ud, &g);
    return gs_dp_h_preferred(&g, req, len, out, olen, msg, ml);
}

static int m_allocate(void *ud, const uint8_t *req, size_t len, uint8_t **out, size_t *olen, char *msg, size_t ml)
{
    struct gs_dp *dp = ud;
    static _Thread_local struct gs_node_gpus g;
    snapshot(dp, &g);
    return gs_dp_h_allocate(&g, &dp->cfg.alloc, req, len, out, olen, msg, ml);
}

static int m_prestart(void *ud, const uint8_t *req, size_t len, uint8_t **out, size_t *olen, char *msg, size_t ml)
{
    (void)ud;
    return gs_dp_h_prestart(req, len, out, olen, msg, ml);
}

static uint64_t s_version(void *ud)
{
    struct gs_dp *dp = ud;
    /* +1 so a fresh stream (version 0) always gets the first list. */
    return atomic_load(&dp->version) + 1;
}

static int s_message(void *ud, uint8_t **buf, size_t *len)
{
    static _Thread_local struct gs_node_gpus g;
    snapshot(ud, &g);
    return gs_dp_h_list(&g, buf, len) == GS_RPC_OK ? 0 : GS_ENOMEM;
}

static const struct gs_rpc_stream_src list_src = {s_version, s_message};

static const struct gs_rpc_method methods[] = {
    {"/v1beta1.DevicePlugin/GetDevicePluginOptions", m_options, NULL},
    {"/v1beta1.DevicePlugin/ListAndWatch", NULL, &list_src},
    {"/v1beta1.DevicePlugin/GetPreferredAllocation", m_preferred, NULL},
    {"/v1beta1.DevicePlugin/Allocate", m_allocate, NULL},
    {"/v1beta1.DevicePlugin/PreStartContainer", m_prestart, NULL},
};

/*--- Life cycle ---*/

int gs_dp_create(const struct gs_dp_config *cfg, const struct gs_node_gpus *g, struct gs_dp **out)
{
    struct gs_dp *dp = calloc(1, sizeof *dp);
    if (!dp) return GS_ENOMEM;
    dp->cfg = *cfg;
    snprintf(dp->dir, sizeof dp->dir, "%s", cfg->plugin_dir ? cfg->plugin_dir : GS_DP_DEFAULT_DIR);
    size_t dl = strlen(dp->dir);
    if (dl > 1 && dp->dir[dl - 1] == '/') dp->dir[dl - 1] = '\0';
    snprintf(dp->resource, sizeof dp->resource, "%s", cfg->resource_name ? cfg->resource_name : "nvidia.com/gpu");
    snprintf(dp->endpoint, sizeof dp->endpoint, "%s", cfg->endpoint ? cfg->endpoint : "gpusched-gpu.sock");
    snprintf(dp->sock, sizeof dp->sock, "%s/%s", dp->dir, dp->endpoint);
    snprintf(dp->kubelet, sizeof dp->kubelet, "%s/%s", dp->dir, GS_DP_KUBELET_SOCKET);
    dp->cfg.plugin_dir = dp->dir, dp->cfg.resource_name = dp->resource, dp->cfg.endpoint = dp->endpoint;
    dp->gpus = *g;
    gs_node_gpus_finish(&dp->gpus);
    pthread_mutex_init(&dp->mu, NULL);
    *out = dp;
    return 0;
}

void gs_dp_destroy(struct gs_dp *dp)
{
    if (!dp) return;
    gs_dp_unserve(dp);
    pthread_mutex_destroy(&dp->mu);
    free(dp);
}

int gs_dp_serve(struct gs_dp *dp, char *err, size_t errlen)
{
    gs_dp_unserve(dp);
    struct gs_rpc_server_cfg c = {
        .socket_path = dp->sock,
        .methods = methods,
        .n_methods = sizeof methods / sizeof methods[0],
        .ud = dp,
        .poll_ms = dp->cfg.poll_ms,
    };
    return gs_rpc_server_start(&c, &dp->srv, err, errlen);
}

void gs_dp_unserve(struct gs_dp *dp)
{
    gs_rpc_server_stop(dp->srv);
    dp->srv = NULL;
}

void gs_dp_set_health(struct gs_dp *dp, int slot, bool healthy)
{
    pthread_mutex_lock(&dp->mu);
    bool changed = gs_node_gpus_set_health(&dp->gpus, slot, healthy);
    pthread_mutex_unlock(&dp->mu);
    if (changed) atomic_fetch_add(&dp->version, 1);
}

void gs_dp_set_parent_health(struct gs_dp *dp, int parent, bool healthy)
{
    pthread_mutex_lock(&dp->mu);
    bool changed = gs_node_gpus_set_parent_health(&dp->gpus, parent, healthy);
    pthread_mutex_unlock(&dp->mu);
    if (changed) atomic_fetch_add(&dp->version, 1);
}

void gs_dp_snapshot(struct gs_dp *dp, struct gs_node_gpus *g)
{
    snapshot(dp, g);
}

const char *gs_dp_socket(const struct gs_dp *dp)
{
    return dp->sock;
}

const char *gs_dp_kubelet_socket(const struct gs_dp *dp)
{
    return dp->kubelet;
}

int gs_dp_streams(struct gs_dp *dp)
{
    return dp->srv ? gs_rpc_server_streams(dp->srv) : 0;
}

int gs_dp_registrations(struct gs_dp *dp)
{
    return atomic_load(&dp->registrations);
}

void gs__dp_registered(struct gs_dp *dp)
{
    atomic_fetch_add(&dp->registrations, 1);
}

const char *gs__dp_resource(const struct gs_dp *dp)
{
    return dp->resource;
}
const char *gs__dp_endpoint(const struct gs_dp *dp)
{
    return dp->endpoint;
}
