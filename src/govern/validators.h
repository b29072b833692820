/*
 * validators.h - the checks the node agent runs at each step of the GPU
 * stack state machine (what the GPU Operator's nvidia-validator does).
 *
 *   driver         the discovery backend (NVML, or the mock) initialises and
 *                  lists at least one GPU; the message names backend, driver
 *                  and count ("mock" says so).
 *   toolkit        a container runtime hook (nvidia-container-runtime-hook or
 *                  nvidia-ctk) is on the search path, or a CDI spec of kind
 *                  nvidia.com/gpu in one of the CDI directories names every
 *                  GPU of the node.
 *   device-plugin  the resources the node should advertise for its GPUs
 *                  under the MIG strategy (gs_stack_resources) are on the
 *                  Node's status.allocatable as the server holds it: the
 *                  scheduler sees exactly the devices that exist.
 *   dra-plugin     (GPUCluster) the server holds ResourceSlices of driver
 *                  gpu.nvidia.com for the node, and they offer every GPU
 *                  (MIG instances for MIG-enabled GPUs) by uuid: the
 *                  scheduler sees exactly the devices that exist.
 *   mig            every MIG-capable GPU carries the wanted layout.
 *   monitoring     the exporter's page has samples for every GPU (by UUID).
 *
 * Each returns 0 when the check passes, or a negative GS_E* with a message
 * for people saying what is wrong and what was expected. Pure functions of
 * their inputs (apart from the driver check's inventory call and the
 * toolkit check's file lookups), so each is tested on its own.
 */
#ifndef GS_GOVERN_VALIDATORS_H
#define GS_GOVERN_VALIDATORS_H

#include "discovery/discovery.h"
#include "govern/policy.h"
#include "govern/statemachine.h"

#include <jansson.h>
#include <stddef.h>

struct gs_validate_in {
    struct gs_disc *disc;              /* driver, mig: the node's backend (borrowed) */
    const char *cdi_dirs;              /* toolkit: ':'-separated; NULL: "/etc/cdi:/var/run/cdi" */
    const char *hook_path;             /* toolkit: ':'-separated search path for the hook; NULL: $PATH */
    const json_t *node;                /* device-plugin: the Node as the server holds it */
    enum gs_mig_strategy strategy;     /* device-plugin */
    const struct gs_mig_layout *layout;/* mig: the wanted layout; NULL: MIG left as it is */
    const char *metrics;               /* monitoring: the exporter's page, NULL when it has none yet */
    const json_t *slices;              /* dra-plugin: the node's ResourceSlices as the server holds them */
};

int gs_validate_driver(const struct gs_validate_in *in, char *msg, size_t len);
int gs_validate_toolkit(const struct gs_validate_in *in, char *msg, size_t len);
int gs_validate_device_plugin(const struct gs_validate_in *in, char *msg, size_t len);
int gs_validate_dra_plugin(const struct gs_validate_in *in, char *msg, size_t len);
int gs_validate_mig(const struct gs_validate_in *in, char *msg, size_t len);
int gs_validate_monitoring(const struct gs_validate_in *in, char *msg, size_t len);
/* The validator of a step; GS_EINVAL for not-ready and ready. */
int gs_validate_step(enum gs_step s, const struct gs_validate_in *in, char *msg, size_t len);

/* The GPU resources a node with inv advertises under strategy, as
 * {"nvidia.com/gpu": n, "nvidia.com/mig-1g.10gb": m, ...} (new reference).
 * none: every GPU is nvidia.com/gpu. mixed: GPUs without MIG are
 * nvidia.com/gpu, MIG devices nvidia.com/mig-<profile>. single: every MIG
 * device is one nvidia.com/gpu when all MIG GPUs share one layout, plus
 * the GPUs without MIG. */
json_t *gs_stack_resources(const struct gs_inventory *inv, enum gs_mig_strategy strategy);
/* Whether GPU g carries layout l (same profiles and counts; MIG off when l is). */
bool gs_gpu_has_layout(const struct gs_disc_gpu *g, const struct gs_mig_layout *l);

#endif
