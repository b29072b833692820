/*
 * dra_plugin.h - the whole `gpusched dra-plugin` (cmd_dra_plugin.c) as one
 * call, so that `gpusched up` can run a plugin per mock node on a thread of
 * its own with the flags the command would get.
 */
#ifndef GS_CLI_DRA_PLUGIN_H
#define GS_CLI_DRA_PLUGIN_H

#include "control/client.h"

#include <signal.h>
#include <stdbool.h>

struct gs_dra_plugin_opts {
    const char *driver;        /* NULL = gpu.nvidia.com */
    const char *mock;          /* mock GPUs; NULL with nvml = NVML */
    bool nvml;
    const char *node;          /* required */
    const char *plugins_dir, *registry_dir, *cdi_dir, *state_path; /* NULL = the defaults */
    struct gs_client_opts conn; /* conn.kubeconfig or conn.server: read claims, publish slices */
    bool api;                  /* use conn at all */
    bool publish;              /* also publish the node's ResourceSlices (not where the agent does) */
};

/* Discovery, slices, plugin, health; returns when *stop is set (0) or on a
 * failure to start (an exit status, the reason logged). */
int gs_dra_plugin_main(const struct gs_dra_plugin_opts *o, volatile sig_atomic_t *stop);

#endif
