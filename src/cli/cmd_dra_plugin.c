/*
 * cmd_dra_plugin.c - `gpusched dra-plugin`: the kubelet DRA plugin of driver
 * gpu.nvidia.com for the GPUs that discovery sees (NVML) or mock ones.
 *
 * Builds the node's ResourceSlices from discovery, takes the plugin's
 * device table from them (so the names the scheduler allocates are the
 * names the plugin prepares), serves DRAPlugin / DRAResourceHealth on
 * <plugins-dir>/<driver>/dra.sock and Registration on
 * <registry-dir>/<driver>-reg.sock (src/node/draplugin/), feeds it GPU
 * health from discovery's health machine, and exits 0 on SIGTERM/SIGINT
 * with the sockets removed. With --kubeconfig it reads each claim's
 * allocation from the API at Prepare and publishes the slices (create or
 * replace by name), deleting them on a clean exit, as the kubelet expects
 * of a driver that goes away.
 */
#include "cli/commands.h"
#include "cli/dra_plugin.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "discovery/discovery.h"
#include "discovery/health.h"
#include "node/draplugin/draplugin.h"

#include "discovery/resourceslice.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*--- ResourceSlices ---*/

/* The one place the plugin asks for its node's slices. */
static json_t *node_slices(const struct gs_inventory *inv, const char *node, int64_t gen)
{
    struct gs_diags d = {0};
    json_t *s = gs_resourceslices_build(inv, node, gen, false, &d);
    for (size_t i = 0; i < d.n; i++) gs_log(GS_LOG_ERROR, "dra-plugin: slices", d.v[i].path, d.v[i].msg, NULL);
    gs_diags_free(&d);
    return s;
}

static int minor_of(void *ud, const char *uuid)
{
    const struct gs_inventory *inv = ud;
    for (int i = 0; i < inv->n_gpus; i++)
        if (!strcmp(inv->gpus[i].uuid, uuid)) return inv->gpus[i].minor >= 0 ? inv->gpus[i].minor : inv->gpus[i].index;
    return -1;
}

static const char *const versions[] = {"v1", "v1beta2"}; /* the versions with this device layout */

static void slice_path(const char *ver, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "/apis/resource.k8s.io/%s/resourceslices%s%s", ver, name ? "/" : "", name ? name : "");
}

/* Creates or replaces each slice; false when the API took none. */
static bool publish(struct gs_client *c, json_t *slices)
{
    size_t i;
    json_t *s;
    int ok = 0;
    json_array_foreach(slices, i, s) {
        const char *name = json_string_value(json_object_get(json_object_get(s, "metadata"), "name"));
        for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++) {
            char path[512];
            json_t *out = NULL;
            long code = 0;
            json_object_set_new(s, "apiVersion", json_sprintf("resource.k8s.io/%s", versions[v]));
            slice_path(versions[v], NULL, path, sizeof path);
            int rc = gs_client_call(c, "POST", path, "application/json", s, NULL, &out, &code);
            if (code == 409) { /* ours from an earlier run: replace it */
                json_decref(out);
                out = NULL;
                slice_path(versions[v], name, path, sizeof path);
                json_t *old = NULL;
                if (!gs_client_call(c, "GET", path, NULL, NULL, NULL, &old, &code)) {
                    json_t *md = json_object_get(s, "metadata");
                    json_object_set(md, "resourceVersion",
                                    json_object_get(json_object_get(old, "metadata"), "resourceVersion"));
                    rc = gs_client_call(c, "PUT", path, "application/json", s, NULL, &out, &code);
                    json_object_del(md, "resourceVersion");
                }
                json_decref(old);
            }
            json_decref(out);
            if (!rc && code < 300) {
                ok++;
                break;
            }
            if (code != 404 || v + 1 == sizeof versions / sizeof versions[0]) {
                char st[64];
                snprintf(st, sizeof st, code ? "HTTP %ld" : "unreachable", code);
                gs_log(GS_LOG_WARN, "dra-plugin: cannot publish the ResourceSlice", "name", name, "version",
                       versions[v], "status", st, NULL);
                break;
            }
        }
    }
    return ok > 0;
}

static void unpublish(struct gs_client *c, const json_t *slices)
{
    size_t i;
    const json_t *s;
    json_array_foreach(slices, i, s) {
        const char *name = json_string_value(json_object_get(json_object_get(s, "metadata"), "name"));
        const char *ver = json_string_value(json_object_get(s, "apiVersion"));
        char path[512];
        json_t *out = NULL;
        long code = 0;
        slice_path(ver && strchr(ver, '/') ? strchr(ver, '/') + 1 : "v1", name, path, sizeof path);
        gs_client_call(c, "DELETE", path, NULL, NULL, NULL, &out, &code);
        json_decref(out);
    }
}

/* Reads a claim in the newest served version that has it. */
static int get_claim(void *ud, const char *ns, const char *name, json_t **out, char *err, size_t errlen)
{
    static const char *const claim_versions[] = {"v1", "v1beta2", "v1beta1"};
    struct gs_client *c = ud;
    for (size_t v = 0; v < sizeof claim_versions / sizeof claim_versions[0]; v++) {
        char path[1024];
        long code = 0;
        snprintf(path, sizeof path, "/apis/resource.k8s.io/%s/namespaces/%s/resourceclaims/%s", claim_versions[v], ns,
                 name);
        *out = NULL;
        int rc = gs_client_call(c, "GET", path, NULL, NULL, NULL, out, &code);
        if (!rc && code == 200) return 0;
        json_decref(*out);
        *out = NULL;
        if (code == 404) continue;
        snprintf(err, errlen, "reading ResourceClaim %s/%s: %s", ns, name,
                 code ? "the API refused it" : gs_strerror(rc));
        return GS_EIO;
    }
    return GS_ENOENT;
}

/*--- Health ---*/

struct health_src {
    struct gs_disc *disc;
    struct gs_health *h;
    const struct gs_inventory *inv;
    struct gs_drap *p;
    int64_t next_sample_ns;
};

static void on_change(const struct gs_health_change *c, void *arg)
{
    struct health_src *hs = arg;
    if (c->gpu < 0 || c->gpu >= hs->inv->n_gpus || !hs->p) return;
    const char *uuid = hs->inv->gpus[c->gpu].uuid;
    if (gs_drap_set_gpu_health(hs->p, uuid, c->to == GS_HEALTH_HEALTHY, c->reason))
        gs_log(GS_LOG_INFO, "dra-plugin: device health changed", "gpu", uuid, "health",
               gs_health_state_name(c->to), NULL);
}

static int health_poll(void *ud, struct gs_drap *p, int timeout_ms)
{
    struct health_src *hs = ud;
    hs->p = p;
    int64_t now = gs_clock_now(hs->disc->clock);
    if (hs->disc->ops->sample && now >= hs->next_sample_ns) {
        for (int i = 0; i < hs->inv->n_gpus; i++) {
            struct gs_sample s;
            gs_health_observe(hs->h, i, hs->disc->ops->sample(hs->disc, i, &s) == 0, now);
        }
        hs->next_sample_ns = now + GS_NS_PER_SEC;
    }
    struct gs_event ev;
    int rc = hs->disc->ops->poll_event ? hs->disc->ops->poll_event(hs->disc, timeout_ms, &ev) : GS_EUNSUPPORTED;
    if (rc == GS_ETIMEDOUT) return 0;
    if (rc) {
        struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        return 0;
    }
    gs_health_event(hs->h, &ev, gs_clock_now(hs->disc->clock));
    return 0;
}

/*--- The plugin ---*/

static int run(const struct gs_dra_plugin_opts *o, struct gs_disc *d, const struct gs_inventory *inv,
               volatile sig_atomic_t *stop)
{
    struct gs_client *cl = NULL;
    if (o->api) {
        struct gs_diags dg = {0};
        if (gs_client_new(&o->conn, &cl, &dg)) {
            for (size_t i = 0; i < dg.n; i++)
                gs_log(GS_LOG_ERROR, "dra-plugin: API connection", dg.v[i].path, dg.v[i].msg, NULL);
            gs_diags_free(&dg);
            return 1;
        }
        gs_diags_free(&dg);
    }
    json_t *slices = node_slices(inv, o->node, (int64_t)time(NULL));
    static struct gs_drap_table t;
    char err[512] = "";
    int rc = slices ? gs_drap_table_from_slices(slices, minor_of, (void *)inv, &t, err, sizeof err) : GS_EINVAL;
    struct gs_drap *p = NULL;
    if (!rc) {
        struct gs_drap_config cfg = {
            .driver = o->driver, .node = o->node, .plugins_dir = o->plugins_dir, .registry_dir = o->registry_dir,
            .cdi_dir = o->cdi_dir, .state_path = o->state_path, .get_claim = cl ? get_claim : NULL,
            .get_claim_ud = cl,
        };
        rc = gs_drap_create(&cfg, &t, &p, err, sizeof err);
    }
    if (rc) gs_log(GS_LOG_ERROR, "dra-plugin: cannot start", "error", err[0] ? err : gs_strerror(rc), NULL);
    bool published = !rc && cl && o->publish && publish(cl, slices);
    struct health_src hs = {.disc = d, .inv = inv};
    struct gs_health_config hc;
    gs_health_config_default(&hc);
    if (!rc) rc = gs_health_create(&hc, inv->n_gpus, &hs.h);
    if (!rc) rc = gs_health_subscribe(hs.h, on_change, &hs);
    if (!rc) rc = gs_drap_run(p, health_poll, &hs, stop);
    if (published) unpublish(cl, slices);
    gs_health_free(hs.h);
    gs_drap_destroy(p);
    json_decref(slices);
    gs_client_free(cl);
    gs_log(GS_LOG_INFO, rc ? "dra-plugin failed" : "dra-plugin stopped", "node", o->node, NULL);
    return rc ? 1 : 0;
}

int gs_dra_plugin_main(const struct gs_dra_plugin_opts *o, volatile sig_atomic_t *stop)
{
    struct gs_clock clk;
    gs_clock_init_real(&clk);
    struct gs_disc d;
    /* Named after the node as the agent names its mock GPUs (agent.c), so both see the same UUIDs. */
    char spec[1024];
    const char *mock = o->mock;
    if (mock && !strstr(mock, "host=") && access(mock, R_OK) != 0) {
        snprintf(spec, sizeof spec, "%s,host=%s", mock, o->node);
        mock = spec;
    }
    int rc = mock ? gs_disc_open_mock(&d, mock, &clk) : gs_disc_open_nvml(&d, NULL, NULL, &clk);
    if (rc) {
        gs_log(GS_LOG_ERROR, "dra-plugin: discovery", "error", d.err[0] ? d.err : gs_strerror(rc), NULL);
        return 1;
    }
    struct gs_inventory *inv = calloc(1, sizeof *inv);
    rc = inv ? gs_disc_inventory(&d, inv) : GS_ENOMEM;
    if (rc) gs_log(GS_LOG_ERROR, "dra-plugin: inventory", "error", d.err[0] ? d.err : gs_strerror(rc), NULL);
    else rc = run(o, &d, inv, stop);
    free(inv);
    gs_disc_close(&d);
    return rc ? 1 : 0;
}

/*--- The command ---*/

/* One token on one line, surrounding blanks dropped. 0, or -1 with the reason printed. */
static int read_token(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "dra-plugin: --token-file \"%s\": %s\n", path, strerror(errno));
        return -1;
    }
    size_t n = fread(buf, 1, len - 1, f);
    bool more = n == len - 1 && fgetc(f) != EOF;
    fclose(f);
    buf[n] = '\0';
    while (n && isspace((unsigned char)buf[n - 1])) buf[--n] = '\0';
    size_t skip = strspn(buf, " \t\r\n");
    memmove(buf, buf + skip, n - skip + 1);
    if (more || !*buf || strpbrk(buf, " \t\r\n")) {
        fprintf(stderr, "dra-plugin: --token-file \"%s\": %s\n", path,
                more ? "too long for a token" : !*buf ? "the file is empty" : "want one token on one line");
        return -1;
    }
    return 0;
}

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: gpusched dra-plugin (--mock SPEC | --nvml) --node-name NAME [options]\n\n"
               "The kubelet DRA plugin of the node's GPUs (DRAPlugin v1 and v1beta1, DRAResourceHealth v1).\n\n"
               "options:\n"
               "  --driver NAME          driver name (default %s; the only one served)\n"
               "  --mock SPEC            mock GPUs (e.g. 8xH100-80GB)\n"
               "  --nvml                 the GPUs NVML sees\n"
               "  --node-name NAME       this node (the pool name); required\n"
               "  --plugins-dir DIR      kubelet's plugins directory (default %s)\n"
               "  --registry-dir DIR     kubelet's plugin registry (default %s)\n"
               "  --cdi-dir DIR          where per-claim CDI specs go (default /var/run/cdi)\n"
               "  --state-dir DIR        the checkpoint's directory (default <plugins-dir>/<driver>)\n"
               "  --kubeconfig FILE      read claims and publish ResourceSlices through this API\n"
               "  --token-file FILE      the node's bearer token (one line) instead of the kubeconfig's\n"
               "  --log-level L          debug, info, warn, error (default info)\n"
               "  -h, --help             show this help\n",
               GS_DRAP_DRIVER, GS_DRAP_PLUGINS_DIR, GS_DRAP_REGISTRY_DIR);
}

int gs_cmd_dra_plugin(int argc, char **argv)
{
    static const struct option longs[] = {
        {"driver", required_argument, 0, 'D'},       {"mock", required_argument, 0, 'm'},
        {"nvml", no_argument, 0, 'n'},               {"node-name", required_argument, 0, 'N'},
        {"plugins-dir", required_argument, 0, 'p'},  {"registry-dir", required_argument, 0, 'r'},
        {"cdi-dir", required_argument, 0, 'c'},      {"state-dir", required_argument, 0, 's'},
        {"kubeconfig", required_argument, 0, 'k'},   {"log-level", required_argument, 0, 'l'},
        {"token-file", required_argument, 0, 't'},
        {"help", no_argument, 0, 'h'},               {0, 0, 0, 0},
    };
    struct gs_dra_plugin_opts o = {0};
    static char state[1200], token[4096];
    enum gs_log_level lvl;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (c) {
        case 'D': o.driver = optarg; break;
        case 'm': o.mock = optarg; break;
        case 'n': o.nvml = true; break;
        case 'N': o.node = optarg; break;
        case 'p': o.plugins_dir = optarg; break;
        case 'r': o.registry_dir = optarg; break;
        case 'c': o.cdi_dir = optarg; break;
        case 's':
            snprintf(state, sizeof state, "%s/checkpoint.json", optarg);
            o.state_path = state;
            break;
        case 'k': o.conn.kubeconfig = optarg, o.api = o.publish = true; break;
        case 't':
            if (read_token(optarg, token, sizeof token)) return 2;
            o.conn.token = token;
            break;
        case 'l':
            if (gs_log_level_parse(optarg, &lvl)) {
                fprintf(stderr, "dra-plugin: --log-level: invalid value \"%s\" (want debug, info, warn or error)\n",
                        optarg);
                return 2;
            }
            gs_log_set_level(lvl);
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dra-plugin: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    if (o.driver && strcmp(o.driver, GS_DRAP_DRIVER)) {
        fprintf(stderr, "dra-plugin: --driver: \"%s\" is not served (only %s)\n", o.driver, GS_DRAP_DRIVER);
        return 2;
    }
    if (!o.mock == !o.nvml) {
        fprintf(stderr, "dra-plugin: exactly one of --mock SPEC and --nvml is required\n");
        return 2;
    }
    if (o.conn.token && !o.api) {
        fprintf(stderr, "dra-plugin: --token-file needs --kubeconfig (the server and its CA)\n");
        return 2;
    }
    if (!o.node || !*o.node) {
        fprintf(stderr, "dra-plugin: --node-name is required (it names the pool the scheduler allocates from)\n");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return gs_dra_plugin_main(&o, &stop_flag);
}
