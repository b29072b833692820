/*
 * dra_defaults.h - the DeviceClasses every gpusched server offers, created
 * at start when absent, as NVIDIA's DRA driver installs them:
 *
 *   gpu.nvidia.com  device.driver == "gpu.nvidia.com" &&
 *                   device.attributes["gpu.nvidia.com"].type == "gpu"
 *   mig.nvidia.com  the same with type == "mig"
 *
 * A class that exists is never touched, so an administrator's change (an
 * extendedResourceName: nvidia.com/gpu on gpu.nvidia.com, which moves every
 * plain nvidia.com/gpu pod to DRA; other selectors) survives restarts; one
 * that was deleted comes back on the next start. Both carry the label
 * app.kubernetes.io/managed-by=gpusched so people can tell them apart.
 */
#ifndef GS_CONTROL_DRA_DEFAULTS_H
#define GS_CONTROL_DRA_DEFAULTS_H

#include "control/store.h"

#define GS_DRA_DRIVER "gpu.nvidia.com"
#define GS_DRA_CLASS_GPU "gpu.nvidia.com"
#define GS_DRA_CLASS_MIG "mig.nvidia.com"

/* Creates the missing default classes in st. 0 or the store's error. */
int gs_dra_default_classes(struct gs_store *st);

#endif
