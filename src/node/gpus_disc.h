/*
 * gpus_disc.h - the bridge from layer 1 (src/discovery/) to the node GPU
 * table: fill it from a discovery inventory, split it into the resources a
 * device plugin serves under a MIG strategy, and feed the plugins the health
 * transitions of discovery's health machine.
 *
 * MIG strategies, as NVIDIA's k8s-device-plugin has them:
 *  - none:   nvidia.com/gpu = every GPU, MIG mode or not;
 *  - mixed:  nvidia.com/gpu = the GPUs without MIG mode (left out when there
 *            are none), and one resource nvidia.com/mig-<profile> per MIG
 *            profile present, whose devices are those MIG instances;
 *  - single: nvidia.com/gpu = the MIG instances, provided every GPU has MIG
 *            mode on and every instance has the same profile; with no GPU in
 *            MIG mode it is the none strategy; anything else is refused.
 * A GPU in MIG mode is never offered whole under mixed or single.
 *
 * This is the only file of src/node/ that includes discovery headers.
 */
#ifndef GS_NODE_GPUS_DISC_H
#define GS_NODE_GPUS_DISC_H

#include "discovery/discovery.h"
#include "discovery/health.h"
#include "discovery/outputs.h" /* enum gs_mig_strategy */
#include "node/deviceplugin/plugin.h"
#include "node/gpus.h"

/* Copies UUID, index, minor (index when unknown), NUMA node and the NVLink
 * matrix; every GPU starts healthy. */
void gs_node_gpus_from_inventory(struct gs_node_gpus *g, const struct gs_inventory *inv, int replicas);

#define GS_NODE_MAX_RESOURCES 9 /* nvidia.com/gpu and up to 8 MIG profiles */

struct gs_node_resource {
    char name[64];            /* "nvidia.com/gpu", "nvidia.com/mig-1g.10gb" */
    char endpoint[96];        /* socket file name; "" for nvidia.com/gpu = the plugin's default */
    struct gs_node_gpus gpus; /* entries' parent = inventory slot of their GPU */
};

/* The resources to serve for inv under strategy s, each device shared by
 * `replicas`: fills res[0..] (room for GS_NODE_MAX_RESOURCES) and returns
 * how many (at least one: nvidia.com/gpu, maybe with no devices). GS_EINVAL
 * with err when the single strategy meets GPUs it cannot express, or there
 * are more profiles or devices than a table holds. */
int gs_node_resources(const struct gs_inventory *inv, enum gs_mig_strategy s, int replicas,
                      struct gs_node_resource *res, char *err, size_t errlen);

/* Health source for gs_dp_run_all: device events from a discovery backend go
 * through the health machine, and its transitions reach every plugin (a
 * GPU's health is its MIG devices' health). */
struct gs_node_health {
    struct gs_disc *disc;      /* borrowed */
    struct gs_health *health;  /* owned */
    struct gs_dp *const *dps;  /* borrowed */
    int n_dps;
    int n_gpus;
    int64_t next_sample_ns;
};

/* The plugins must be created from gs_node_resources' tables (their entries
 * name the inventory slot of their GPU). */
int gs_node_health_open(struct gs_node_health *nh, struct gs_disc *d, const struct gs_health_config *cfg, int n_gpus,
                        struct gs_dp *const *dps, int n_dps);
void gs_node_health_close(struct gs_node_health *nh);
/* gs_dp_health_fn: waits up to timeout_ms for a device event, feeds it, and
 * once a second tells the machine which GPUs answer (recovery). */
int gs_node_health_poll(void *ud, struct gs_dp *dp, int timeout_ms);

#endif
