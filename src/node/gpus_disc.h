/*
 * gpus_disc.h - the bridge from layer 1 (src/discovery/) to the node GPU
 * table: fill it from a discovery inventory, and feed a device plugin the
 * health transitions of discovery's health machine.
 *
 * This is the only file of src/node/ that includes discovery headers.
 */
#ifndef GS_NODE_GPUS_DISC_H
#define GS_NODE_GPUS_DISC_H

#include "discovery/discovery.h"
#include "discovery/health.h"
#include "node/deviceplugin/plugin.h"
#include "node/gpus.h"

/* Copies UUID, index, minor (index when unknown), NUMA node and the NVLink
 * matrix; every GPU starts healthy. */
void gs_node_gpus_from_inventory(struct gs_node_gpus *g, const struct gs_inventory *inv, int replicas);

/* Health source for gs_dp_run: device events from a discovery backend go
 * through the health machine, and its transitions reach the plugin. */
struct gs_node_health {
    struct gs_disc *disc;      /* borrowed */
    struct gs_health *health;  /* owned */
    struct gs_dp *dp;          /* borrowed */
    int n_gpus;
    int64_t next_sample_ns;
};

/* The plugin must be created; its table slots are the inventory's indices. */
int gs_node_health_open(struct gs_node_health *nh, struct gs_disc *d, const struct gs_health_config *cfg, int n_gpus,
                        struct gs_dp *dp);
void gs_node_health_close(struct gs_node_health *nh);
/* gs_dp_health_fn: waits up to timeout_ms for a device event, feeds it, and
 * once a second tells the machine which GPUs answer (recovery). */
int gs_node_health_poll(void *ud, struct gs_dp *dp, int timeout_ms);

#endif
