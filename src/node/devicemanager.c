/*
 * devicemanager.c - registration server, endpoint registry and ListAndWatch
 * clients of the device manager (devicemanager.h). Admission and the
 * checkpoint are in dm_admit.c.
 */
#include "node/devicemanager.h"

#include "core/error.h"
#include "core/log.h"
#include "deviceplugin/v1beta1/api.pb-c.h"
#include "node/dm_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*--- Message parsing (also the fuzz target's entry points) ---*/

int gs_dm_parse_register(const unsigned char *buf, size_t len, char *version, size_t vlen, char *endpoint,
                         size_t elen, char *resource, size_t rlen)
{
    V1beta1__RegisterRequest *r = v1beta1__register_request__unpack(NULL, len, buf);
    if (!r) return GS_EINVAL;
    snprintf(version, vlen, "%s", r->version ? r->version : "");
    snprintf(endpoint, elen, "%s", r->endpoint ? r->endpoint : "");
    snprintf(resource, rlen, "%s", r->resource_name ? r->resource_name : "");
    v1beta1__register_request__free_unpacked(r, NULL);
    return 0;
}

json_t *gs_dm_parse_list(const unsigned char *buf, size_t len)
{
    V1beta1__ListAndWatchResponse *r = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
    if (!r) return NULL;
    json_t *v = json_array();
    for (size_t i = 0; i < r->n_devices; i++) {
        const V1beta1__Device *d = r->devices[i];
        long long numa = d->topology && d->topology->n_nodes ? (long long)d->topology->nodes[0]->id : -1;
        json_array_append_new(v, json_pack("{s:s, s:b, s:I}", "id", d->id ? d->id : "", "healthy",
                                           d->health && !strcmp(d->health, "Healthy"), "numa", numa));
    }
    v1beta1__list_and_watch_response__free_unpacked(r, NULL);
    return v;
}

static json_t *container_response(const V1beta1__ContainerAllocateResponse *c)
{
    json_t *envs = json_object(), *ann = json_object(), *mounts = json_array(), *devs = json_array(),
           *cdi = json_array();
    for (size_t i = 0; i < c->n_envs; i++)
        json_object_set_new(envs, c->envs[i]->key ? c->envs[i]->key : "", json_string(c->envs[i]->value ? c->envs[i]->value : ""));
    for (size_t i = 0; i < c->n_annotations; i++)
        json_object_set_new(ann, c->annotations[i]->key ? c->annotations[i]->key : "",
                            json_string(c->annotations[i]->value ? c->annotations[i]->value : ""));
    for (size_t i = 0; i < c->n_mounts; i++)
        json_array_append_new(mounts, json_pack("{s:s?, s:s?, s:b}", "container_path", c->mounts[i]->container_path,
                                                "host_path", c->mounts[i]->host_path, "read_only",
                                                c->mounts[i]->read_only));
    for (size_t i = 0; i < c->n_devices; i++)
        json_array_append_new(devs, json_pack("{s:s?, s:s?, s:s?}", "container_path", c->devices[i]->container_path,
                                              "host_path", c->devices[i]->host_path, "permissions",
                                              c->devices[i]->permissions));
    for (size_t i = 0; i < c->n_cdi_devices; i++)
        json_array_append_new(cdi, json_string(c->cdi_devices[i]->name ? c->cdi_devices[i]->name : ""));
    return json_pack("{s:o, s:o, s:o, s:o, s:o}", "envs", envs, "mounts", mounts, "devices", devs, "annotations",
                     ann, "cdi_devices", cdi);
}

json_t *gs_dm_parse_allocate(const unsigned char *buf, size_t len)
{
    V1beta1__AllocateResponse *r = v1beta1__allocate_response__unpack(NULL, len, buf);
    if (!r) return NULL;
    json_t *v = r->n_container_responses ? container_response(r->container_responses[0]) : NULL;
    v1beta1__allocate_response__free_unpacked(r, NULL);
    return v;
}

json_t *gs_dm_parse_preferred(const unsigned char *buf, size_t len)
{
    V1beta1__PreferredAllocationResponse *r = v1beta1__preferred_allocation_response__unpack(NULL, len, buf);
    if (!r) return NULL;
    json_t *v = json_array();
    if (r->n_container_responses) {
        const V1beta1__ContainerPreferredAllocationResponse *c = r->container_responses[0];
        for (size_t i = 0; i < c->n_deviceids; i++) json_array_append_new(v, json_string(c->deviceids[i] ? c->deviceids[i] : ""));
    }
    v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
    return v;
}

/*--- Resource names ---*/

int gs_dm_valid_resource(const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash || slash == name || strchr(slash + 1, '/')) return GS_EINVAL;
    size_t dlen = (size_t)(slash - name), nlen = strlen(slash + 1);
    if (!memchr(name, '.', dlen) || nlen == 0 || nlen > 63) return GS_EINVAL;
    if ((dlen == 13 && !strncmp(name, "kubernetes.io", 13)) ||
        (dlen > 14 && !strncmp(slash - 14, ".kubernetes.io", 14)))
        return GS_EINVAL;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
              c == '_' || c == '/'))
            return GS_EINVAL;
    }
    return 0;
}

/*--- Endpoints ---*/

struct dm_endpoint *gs__dm_find(struct gs_dm *dm, const char *resource)
{
    for (int i = 0; i < DM_MAX_ENDPOINTS; i++)
        if (dm->ep[i] && !strcmp(dm->ep[i]->resource, resource)) return dm->ep[i];
    return NULL;
}

static void mark_all_unhealthy(struct dm_endpoint *e)
{
    size_t i;
    json_t *d;
    json_array_foreach(e->devices, i, d) json_object_set_new(d, "healthy", json_false());
}

static void *watch_main(void *arg)
{
    struct dm_endpoint *e = arg;
    static const uint8_t empty[1];
    struct gs_rpc_stream *s = NULL;
    if (gs_rpc_stream_open(e->conn, "/v1beta1.DevicePlugin/ListAndWatch", empty, 0, &s)) return NULL;
    while (!atomic_load(&e->stop)) {
        uint8_t *buf;
        size_t len;
        int rc = gs_rpc_stream_next(s, 200, &buf, &len);
        if (rc == GS_ETIMEDOUT) continue;
        json_t *list = rc ? NULL : gs_dm_parse_list(buf, len);
        free(buf);
        pthread_mutex_lock(&e->dm->mu);
        if (list) {
            json_decref(e->devices);
            e->devices = list;
            e->connected = true;
        } else if (rc) {
            e->connected = false;
            mark_all_unhealthy(e);
        }
        pthread_mutex_unlock(&e->dm->mu);
        if (rc) {
            gs_log(GS_LOG_WARN, "device plugin stream ended", "resource", e->resource, NULL);
            break;
        }
    }
    gs_rpc_stream_close(s);
    return NULL;
}

static void endpoint_free(struct dm_endpoint *e)
{
    if (!e) return;
    atomic_store(&e->stop, true);
    pthread_join(e->thread, NULL);
    gs_rpc_close(e->conn);
    json_decref(e->devices);
    free(e);
}

/* Installs e for its resource; returns the endpoint it replaces (to free
 * outside the lock), or e itself when the registry is full. */
static struct dm_endpoint *install(struct gs_dm *dm, struct dm_endpoint *e)
{
    struct dm_endpoint *old = NULL;
    pthread_mutex_lock(&dm->mu);
    int slot = -1;
    for (int i = 0; i < DM_MAX_ENDPOINTS; i++) {
        if (dm->ep[i] && !strcmp(dm->ep[i]->resource, e->resource)) slot = i, old = dm->ep[i];
        else if (!dm->ep[i] && slot < 0) slot = i;
    }
    if (slot >= 0) dm->ep[slot] = e;
    else old = e;
    pthread_mutex_unlock(&dm->mu);
    return old;
}

/*--- Registration service ---*/

static int dial_plugin(struct dm_endpoint *e, char *msg, size_t ml)
{
    uint8_t *resp = NULL;
    size_t rlen = 0;
    static const uint8_t empty[1];
    int rc = gs_rpc_dial(e->path, &e->conn);
    if (!rc) rc = gs_rpc_unary(e->conn, "/v1beta1.DevicePlugin/GetDevicePluginOptions", empty, 0, &resp, &rlen,
                               10000, true, NULL, msg, ml);
    if (rc) {
        if (!msg[0]) snprintf(msg, ml, "cannot reach the plugin at %s", e->path);
        free(resp);
        return rc;
    }
    V1beta1__DevicePluginOptions *o = v1beta1__device_plugin_options__unpack(NULL, rlen, resp);
    free(resp);
    if (!o) {
        snprintf(msg, ml, "malformed DevicePluginOptions from %s", e->path);
        return GS_EINVAL;
    }
    e->preferred = o->get_preferred_allocation_available;
    v1beta1__device_plugin_options__free_unpacked(o, NULL);
    return 0;
}

static int m_register(void *ud, const uint8_t *req, size_t len, uint8_t **out, size_t *olen, char *msg, size_t ml)
{
    struct gs_dm *dm = ud;
    char version[32], endpoint[128], resource[128];
    *out = NULL, *olen = 0;
    if (gs_dm_parse_register(req, len, version, sizeof version, endpoint, sizeof endpoint, resource, sizeof resource)) {
        snprintf(msg, ml, "malformed RegisterRequest");
        return GS_RPC_INVALID_ARGUMENT;
    }
    if (strcmp(version, "v1beta1")) {
        snprintf(msg, ml, "unsupported version \"%s\" (supported: v1beta1)", version);
        return GS_RPC_INVALID_ARGUMENT;
    }
    if (gs_dm_valid_resource(resource)) {
        snprintf(msg, ml, "invalid extended resource name \"%s\"", resource);
        return GS_RPC_INVALID_ARGUMENT;
    }
    if (!endpoint[0] || strchr(endpoint, '/')) {
        snprintf(msg, ml, "invalid endpoint \"%s\": a file name in %s", endpoint, dm->dir);
        return GS_RPC_INVALID_ARGUMENT;
    }
    struct dm_endpoint *e = calloc(1, sizeof *e);
    if (!e) return GS_RPC_INTERNAL;
    e->dm = dm;
    e->devices = json_array();
    snprintf(e->resource, sizeof e->resource, "%s", resource);
    snprintf(e->path, sizeof e->path, "%s/%s", dm->dir, endpoint);
    if (dial_plugin(e, msg, ml)) {
        gs_rpc_close(e->conn);
        json_decref(e->devices);
        free(e);
        return GS_RPC_UNAVAILABLE;
    }
    if (pthread_create(&e->thread, NULL, watch_main, e)) {
        gs_rpc_close(e->conn);
        json_decref(e->devices);
        free(e);
        return GS_RPC_INTERNAL;
    }
    struct dm_endpoint *old = install(dm, e);
    endpoint_free(old);
    if (old == e) {
        snprintf(msg, ml, "too many device plugins (at most %d)", DM_MAX_ENDPOINTS);
        return GS_RPC_UNAVAILABLE;
    }
    gs_log(GS_LOG_INFO, "device plugin registered", "resource", resource, "endpoint", e->path, NULL);
    return GS_RPC_OK;
}

static const struct gs_rpc_method methods[] = {
    {"/v1beta1.Registration/Register", m_register, NULL},
};

/*--- Life cycle ---*/

/* kubelet's start: keep the directory, drop every socket in it. */
static int prepare_dir(const char *dir)
{
    if (mkdir(dir, 0750) && errno != EEXIST) return GS_EIO;
    DIR *d = opendir(dir);
    if (!d) return GS_EIO;
    struct dirent *de;
    while ((de = readdir(d))) {
        char p[600];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (!lstat(p, &st) && S_ISSOCK(st.st_mode)) unlink(p);
    }
    closedir(d);
    return 0;
}

int gs_dm_start(const struct gs_dm_config *cfg, struct gs_dm **out, char *err, size_t errlen)
{
    struct gs_dm *dm = calloc(1, sizeof *dm);
    if (!dm) return GS_ENOMEM;
    dm->cfg = *cfg;
    if (dm->cfg.topo.n_numa < 1) dm->cfg.topo.n_numa = 1;
    if (dm->cfg.topo.n_numa > GS_TOPO_MAX_NUMA) dm->cfg.topo.n_numa = GS_TOPO_MAX_NUMA;
    snprintf(dm->dir, sizeof dm->dir, "%s", cfg->plugin_dir);
    size_t dl = strlen(dm->dir);
    if (dl > 1 && dm->dir[dl - 1] == '/') dm->dir[dl - 1] = '\0';
    snprintf(dm->sock, sizeof dm->sock, "%s/kubelet.sock", dm->dir);
    if (cfg->checkpoint) snprintf(dm->checkpoint, sizeof dm->checkpoint, "%s", cfg->checkpoint);
    else snprintf(dm->checkpoint, sizeof dm->checkpoint, "%s/%s", dm->dir, GS_DM_CHECKPOINT);
    pthread_mutex_init(&dm->mu, NULL);
    pthread_mutex_init(&dm->admit_mu, NULL);
    int rc = prepare_dir(dm->dir);
    if (rc) snprintf(err, errlen, "cannot prepare %s", dm->dir);
    if (!rc) rc = gs__dm_load(dm, err, errlen);
    struct gs_rpc_server_cfg sc = {.socket_path = dm->sock, .methods = methods, .n_methods = 1, .ud = dm};
    if (!rc) rc = gs_rpc_server_start(&sc, &dm->srv, err, errlen);
    if (rc) {
        gs_dm_stop(dm);
        return rc;
    }
    *out = dm;
    return 0;
}

void gs_dm_stop(struct gs_dm *dm)
{
    if (!dm) return;
    gs_rpc_server_stop(dm->srv);
    for (int i = 0; i < DM_MAX_ENDPOINTS; i++) endpoint_free(dm->ep[i]);
    json_decref(dm->allocs);
    pthread_mutex_destroy(&dm->mu);
    pthread_mutex_destroy(&dm->admit_mu);
    free(dm);
}

/*--- Views ---*/

static json_t *resource_view(struct gs_dm *dm, struct dm_endpoint *e)
{
    json_t *healthy = json_array(), *unhealthy = json_array(), *allocated = json_array(), *numa = json_object();
    size_t i;
    json_t *d;
    json_array_foreach(e->devices, i, d) {
        const char *id = json_string_value(json_object_get(d, "id"));
        json_array_append_new(json_is_true(json_object_get(d, "healthy")) ? healthy : unhealthy, json_string(id));
        if (gs__dm_taken(dm, e->resource, id, NULL)) json_array_append_new(allocated, json_string(id));
        json_object_set(numa, id, json_object_get(d, "numa"));
    }
    return json_pack("{s:s, s:b, s:b, s:o, s:o, s:o, s:o}", "endpoint", e->path, "connected", e->connected,
                     "preferred", e->preferred, "healthy", healthy, "unhealthy", unhealthy, "allocated", allocated,
                     "numa", numa);
}

json_t *gs_dm_resources(struct gs_dm *dm)
{
    json_t *v = json_object();
    pthread_mutex_lock(&dm->mu);
    for (int i = 0; i < DM_MAX_ENDPOINTS; i++)
        if (dm->ep[i]) json_object_set_new(v, dm->ep[i]->resource, resource_view(dm, dm->ep[i]));
    pthread_mutex_unlock(&dm->mu);
    return v;
}

json_t *gs_dm_allocations(struct gs_dm *dm)
{
    pthread_mutex_lock(&dm->mu);
    json_t *v = json_deep_copy(dm->allocs);
    pthread_mutex_unlock(&dm->mu);
    return v;
}
