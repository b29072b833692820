/*
 * register.c - registration with kubelet and the plugin's run loop
 * (plugin.h).
 *
 * kubelet answers Register only after it has dialled the plugin and asked
 * for its options, so the plugin's server must already be serving on its own
 * thread when Register goes out; it is.
 *
 * Kubelet restarts are seen by polling: every 100 ms the loop stats
 * kubelet.sock and the plugin's socket. A kubelet restart deletes every
 * socket in the directory and creates kubelet.sock anew (new inode), so
 * either change means "serve again, register again". Polling costs two
 * stat() calls a tick and needs no inotify descriptor; the tick already
 * exists for the health source.
 */
#include "node/deviceplugin/plugin.h"

#include "core/error.h"
#include "core/log.h"
#include "deviceplugin/v1beta1/api.pb-c.h"
#include "node/deviceplugin/handlers.h"
#include "node/deviceplugin/rpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

int gs_dp_register(struct gs_dp *dp, int timeout_ms, char *err, size_t errlen)
{
    V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    opts.get_preferred_allocation_available = 1;
    V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
    req.version = GS_DP_API_VERSION;
    req.endpoint = (char *)gs__dp_endpoint(dp);
    req.resource_name = (char *)gs__dp_resource(dp);
    req.options = &opts;
    size_t len = protobuf_c_message_get_packed_size(&req.base);
    uint8_t *buf = malloc(len ? len : 1), *resp = NULL;
    if (!buf) return GS_ENOMEM;
    protobuf_c_message_pack(&req.base, buf);
    struct gs_rpc_conn *c;
    int rc = gs_rpc_dial(gs_dp_kubelet_socket(dp), &c);
    size_t rlen = 0;
    if (!rc) {
        rc = gs_rpc_unary(c, "/v1beta1.Registration/Register", buf, len, &resp, &rlen, timeout_ms, true, NULL, err,
                          errlen);
        gs_rpc_close(c);
    }
    free(buf);
    free(resp);
    if (!rc) gs__dp_registered(dp);
    return rc;
}

/*--- Run loop ---*/

struct sock_id {
    bool present;
    dev_t dev;
    ino_t ino;
};

static struct sock_id sock_id(const char *path)
{
    struct stat st;
    struct sock_id id = {0};
    if (!stat(path, &st)) id.present = true, id.dev = st.st_dev, id.ino = st.st_ino;
    return id;
}

static bool same(struct sock_id a, struct sock_id b)
{
    return a.present == b.present && a.dev == b.dev && a.ino == b.ino;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Serves again and registers until it works or a stop comes. */
static int bring_up(struct gs_dp *dp, volatile sig_atomic_t *stop, struct sock_id *kubelet)
{
    char err[256];
    int rc = gs_dp_serve(dp, err, sizeof err);
    if (rc) {
        gs_log(GS_LOG_ERROR, "cannot serve the device plugin", "socket", gs_dp_socket(dp), "error", err, NULL);
        return rc;
    }
    while (!*stop) {
        *kubelet = sock_id(gs_dp_kubelet_socket(dp));
        rc = gs_dp_register(dp, 1000, err, sizeof err);
        if (!rc) {
            gs_log(GS_LOG_INFO, "registered with kubelet", "resource", gs__dp_resource(dp), "endpoint",
                   gs_dp_socket(dp), NULL);
            return 0;
        }
        gs_log(GS_LOG_WARN, "registration failed, retrying", "kubelet", gs_dp_kubelet_socket(dp), "error",
               err[0] ? err : gs_strerror(rc), NULL);
        if (rc != GS_ETIMEDOUT) sleep_ms(1000);
    }
    return 0;
}

/* One tick's look at kubelet's socket and the plugin's own. */
static int watch(struct gs_dp *dp, volatile sig_atomic_t *stop, struct sock_id *kubelet)
{
    struct sock_id now = sock_id(gs_dp_kubelet_socket(dp));
    bool mine = sock_id(gs_dp_socket(dp)).present;
    /* Gone for a moment counts as replaced even if the inode is reused. */
    if (!now.present) kubelet->present = false;
    if (!now.present || (same(now, *kubelet) && mine)) return 0;
    gs_log(GS_LOG_INFO, mine ? "kubelet restarted, registering again" : "plugin socket removed, serving again",
           "kubelet", gs_dp_kubelet_socket(dp), "resource", gs__dp_resource(dp), NULL);
    return bring_up(dp, stop, kubelet);
}

int gs_dp_run_all(struct gs_dp *const *dps, int n, gs_dp_health_fn health, void *ud, volatile sig_atomic_t *stop)
{
    struct sock_id *kubelet = calloc(n > 0 ? (size_t)n : 1, sizeof *kubelet);
    int rc = kubelet ? 0 : GS_ENOMEM;
    for (int i = 0; !rc && i < n; i++) rc = bring_up(dps[i], stop, &kubelet[i]);
    while (!rc && !*stop) {
        if (health && n) rc = health(ud, dps[0], 100);
        else sleep_ms(100);
        for (int i = 0; !rc && !*stop && i < n; i++) rc = watch(dps[i], stop, &kubelet[i]);
    }
    for (int i = 0; i < n; i++) gs_dp_unserve(dps[i]);
    free(kubelet);
    return rc;
}

int gs_dp_run(struct gs_dp *dp, gs_dp_health_fn health, void *ud, volatile sig_atomic_t *stop)
{
    return gs_dp_run_all(&dp, 1, health, ud, stop);
}
